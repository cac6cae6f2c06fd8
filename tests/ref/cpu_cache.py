#!/usr/bin/python3
"""The CPU target's object cache (codegen/llvm/llvm.c), through `mlc run`:

- an empty cache gets one object file per entry compiled; a second run finds
  them (no new files, no file rewritten) and gives the same output bytes;
- an object file damaged in its body, cut short, or replaced by another
  entry's object is not used: the run compiles again, gives the same bytes,
  and the file is whole again;
- `--cpu x86-64-v2` (another target machine) gets objects of its own;
- MLC_CPU_CACHE=0 writes nothing.

The output is checked against the first run's bytes, which ref.run checks
against PyTorch; here the question is only whether the cache changes them.

Usage: cpu_cache.py MLC ROOT WORKDIR"""
import os
import shutil
import subprocess
import sys

import numpy as np

BATCH, INPUTS = 32, 784  # examples/mlp.mdl's config


def run(mlc, root, work, cache, extra=(), env_extra=None):
    env = dict(os.environ, XDG_CACHE_HOME=cache, **(env_extra or {}))
    out = os.path.join(work, "y.bin")
    if os.path.exists(out):
        os.remove(out)
    cmd = [mlc, "run", os.path.join(root, "examples", "mlp.mdl"), "--target", "cpu", "--input",
           "x=" + os.path.join(work, "x.bin"), "-o", "output=" + out, *extra]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode:
        sys.exit(f"FAIL: {' '.join(cmd)}\n{r.stderr}")
    return open(out, "rb").read()


def objects(cache):
    d = os.path.join(cache, "mlc", "cpu")
    if not os.path.isdir(d):
        return {}
    return {f: open(os.path.join(d, f), "rb").read() for f in sorted(os.listdir(d))}


def main():
    mlc, root, work = sys.argv[1:4]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    cache = os.path.join(work, "cache")
    # examples/mlp.mdl's input: f32[batch, inputs], its config's batch and inputs
    np.random.default_rng(0).standard_normal((BATCH, INPUTS)).astype(np.float32).tofile(os.path.join(work, "x.bin"))
    failed = 0

    def check(ok, what):
        nonlocal failed
        print(f"{'ok' if ok else 'FAIL'}: {what}")
        failed += not ok

    first = run(mlc, root, work, cache)
    objs = objects(cache)
    check(len(objs) >= 1 and all(f.endswith(".o") for f in objs), f"an empty cache gets object files ({len(objs)})")
    inodes = {f: os.stat(os.path.join(cache, "mlc", "cpu", f)).st_ino for f in objs}
    again = run(mlc, root, work, cache)
    check(again == first and objects(cache) == objs and inodes == {f: os.stat(os.path.join(cache, "mlc", "cpu", f)).st_ino
                                                                 for f in objects(cache)},
          "a second run: the same bytes, no file added or rewritten (the same inodes)")

    names = list(objs)
    damaged = {}
    for i, name in enumerate(names):
        path = os.path.join(cache, "mlc", "cpu", name)
        data = bytearray(objs[name])
        if i % 3 == 0:
            data[len(data) // 2] ^= 0xFF            # one byte of the object flipped
        elif i % 3 == 1:
            data = data[: len(data) // 2]             # cut short
        else:
            data = bytearray(objs[names[0]])          # another entry's object
        open(path, "wb").write(bytes(data))
        damaged[name] = bytes(data)
    after = run(mlc, root, work, cache)
    now = objects(cache)
    check(after == first, "damaged, truncated and swapped objects: the same bytes")
    check(now == objs, "every damaged file is compiled again and whole afterwards")

    n = len(objects(cache))
    base = run(mlc, root, work, cache, ["--cpu", "x86-64-v2"])
    check(len(objects(cache)) > n, "--cpu x86-64-v2 adds objects of its own")
    check(np.allclose(np.frombuffer(base, np.float32), np.frombuffer(first, np.float32), rtol=1e-5, atol=1e-6),
          "--cpu x86-64-v2's output agrees with the native one (1e-5)")

    off = os.path.join(work, "cache-off")
    run(mlc, root, work, off, env_extra={"MLC_CPU_CACHE": "0"})
    check(not objects(off), "MLC_CPU_CACHE=0 writes no object")
    if failed:
        sys.exit(f"{failed} checks failed")
    print("ok")


if __name__ == "__main__":
    main()
