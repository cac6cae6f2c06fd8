#!/usr/bin/python3
"""A decode block on the Metal target, through the CPU emulator
(tests/metal/msl_emu.hpp): the prefill and step entries of a causal MiniLLM
(examples/minillm_causal.mdl in f32, bench/minillm_causal_bf16.mdl in bf16,
its step only) run once each by mlc_opcheck on metal and on cpu from the same parameters,
KV caches (random, as earlier tokens' would be), tokens and position; the
f32 model also with --quantize int8 (step) and int4 (group 32), symmetric and
asymmetric (:asym), every linear a qlinear over weights packed from the same
f32 ones.  The cpu target's
decode is checked against PyTorch by ref.decode, its qlinear against numpy
by ref.quant; here

  - the logits agree: max |metal - cpu| / max |cpu| <= 1e-5 (f32, int8, int4),
    2e-2 (bf16);
  - each KV cache after the call agrees in the rows [pos, pos + t) the call
    writes, to the same tolerance (they come from the in-projection GEMMs,
    which round differently on the two targets);
  - every other cache row is bit for bit what it was before the call.

Usage: decode_emu.py OPCHECK ROOT WORKDIR"""
import os
import subprocess
import sys

import numpy as np

DT = {"f32": np.float32, "bf16": np.uint16, "i32": np.int32}


def load(d):
    """manifest.txt -> {(kind, name): array} (bf16 as float32)."""
    out = {}
    for line in open(os.path.join(d, "manifest.txt")):
        f = line.split()
        if f[0] not in ("param", "state", "input", "output", "updated"):
            continue
        kind, name, dt, rank = f[0], f[1], f[2], int(f[3])
        shape = [int(x) for x in f[4:4 + rank]]
        a = np.fromfile(os.path.join(d, "%s.%s.bin" % (kind, name)), dtype=DT[dt]).reshape(shape)
        if dt == "bf16":
            a = (a.astype(np.uint32) << 16).view(np.float32)
        out[(kind, name)] = a
    return out


def rel(a, b):
    return float(np.max(np.abs(a.astype(np.float64) - b)) / max(np.max(np.abs(b.astype(np.float64))), 1e-30))


def main():
    opcheck, root, work = sys.argv[1], sys.argv[2], os.path.abspath(sys.argv[3])
    os.makedirs(work, exist_ok=True)
    os.environ.setdefault("MLC_EMU_PCH", os.path.join(work, "msl_emu.pch"))
    f32 = os.path.join(root, "examples", "minillm_causal.mdl")
    both, step = (("prefill", 21), ("step", 40)), (("step", 40),)
    models = (("f32", f32, 1e-5, [], both), ("bf16", os.path.join(root, "bench", "minillm_causal_bf16.mdl"), 2e-2, [], step),
              ("int8", f32, 1e-5, ["--quantize=int8:scales=f32"], step), ("int4", f32, 1e-5, ["--quantize=int4:group=32"], both),
              ("int8asym", f32, 1e-5, ["--quantize=int8:asym:scales=f32"], step),
              ("int4asym", f32, 1e-5, ["--quantize=int4:group=32:asym"], both))
    failed = 0
    for dt, model, tol, extra, funcs in models:
        for func, pos in funcs:
            runs = {}
            for target in ("cpu", "metal"):
                d = os.path.join(work, "%s_%s_%s" % (dt, func, target))
                r = subprocess.run([opcheck, model, d, "--func", func, "--target", target, "--seed", "3",
                                    "--range", "tokens=0,512,int", "--range", "pos=%d,%d,int" % (pos, pos + 1), *extra],
                                   capture_output=True, text=True)
                if r.returncode != 0:
                    print("FAIL %s %s on %s: mlc_opcheck exited %d\n%s%s" % (dt, func, target, r.returncode, r.stdout,
                                                                             r.stderr[-2000:]))
                    return 1
                runs[target] = load(d)
            cpu, mtl = runs["cpu"], runs["metal"]
            t = cpu[("input", "tokens")].shape[-1]
            checks = [("logits", rel(mtl[("output", "logits")], cpu[("output", "logits")]), tol)]
            caches = sorted(n for k, n in cpu if k == "updated")
            worst_new, untouched_ok = 0.0, True
            for n in caches:
                before, c, m = mtl[("state", n)], cpu[("updated", n)], mtl[("updated", n)]
                worst_new = max(worst_new, rel(m[:, :, pos:pos + t], c[:, :, pos:pos + t]))
                keep = np.ones(before.shape[2], bool)
                keep[pos:pos + t] = False
                untouched_ok &= np.array_equal(m[:, :, keep].view(np.uint32), before[:, :, keep].view(np.uint32))
                untouched_ok &= not np.array_equal(m[:, :, pos:pos + t], before[:, :, pos:pos + t])
            checks.append(("%d caches' rows %d..%d" % (len(caches), pos, pos + t - 1), worst_new, tol))
            for what, err, tl in checks:
                ok = err <= tl
                failed += not ok
                print("%s %s %-7s %-28s err %.2e  tol %.0e" % ("PASS" if ok else "FAIL", dt, func, what, err, tl))
            print("%s %s %-7s the caches' other rows are unchanged, bit for bit" % ("PASS" if untouched_ok else "FAIL", dt, func))
            failed += not untouched_ok
    print("%s: %d failed" % ("ok" if not failed else "FAIL", failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
