"""An interrupted `mlc train` resumes to the checkpoint an uninterrupted run
writes, byte for byte.

A small MLP (examples/mlp.mdl, batch 8) on 45 random rows from .npy files,
shuffled, with 9 rows held out and a validation loss every 1000 steps:
  - one run of 20000 steps with --save-every 7000 (saves at 7000, 14000 and
    the end);
  - the same run stopped by SIGINT once step 300 is printed: exit status
    130, "stopped after step K; saved", a checkpoint at step K; resumed for
    20000 - K steps, its final checkpoint must equal the first run's;
  - the same with SIGTERM: exit status 143.
Usage: train_interrupt.py MLC REPO_ROOT WORKDIR"""
import os
import re
import signal
import subprocess
import sys

import numpy as np

CFG = ["inputs=16", "hidden=32", "classes=10", "batch=8"]
STEPS = 20000


def main():
    mlc, root, work = sys.argv[1], sys.argv[2], os.path.abspath(sys.argv[3])
    os.makedirs(work, exist_ok=True)
    model = os.path.join(root, "examples", "mlp.mdl")
    rng = np.random.default_rng(0)
    x, y = os.path.join(work, "x.npy"), os.path.join(work, "y.npy")
    np.save(x, rng.standard_normal((45, 16)).astype(np.float32))
    np.save(y, rng.integers(0, 10, 45).astype(np.int32))
    base = [mlc, "train", model, "--target", "cpu", *CFG, "--input", f"x={x}", "--input", f"labels={y}",
            "--shuffle", "5", "--eval-split", "0.2", "--eval-every", "1000"]
    failed = 0

    def check(what, ok, detail=""):
        nonlocal failed
        failed += not ok
        print(("ok   " if ok else "FAIL ") + what + ("" if ok else "\n     " + detail))

    full = os.path.join(work, "full.ckpt")
    r = subprocess.run(base + ["--steps", str(STEPS), "--save", full, "--save-every", "7000"], capture_output=True, text=True)
    saves = re.findall(r"^saved \S+ at step (\d+)$", r.stdout, re.M)
    check("uninterrupted: saved at steps 7000, 14000 and 20000", r.returncode == 0 and saves == ["7000", "14000", "20000"],
          f"exit {r.returncode}, saves {saves}\n{r.stderr}")

    for sig, name in ((signal.SIGINT, "SIGINT"), (signal.SIGTERM, "SIGTERM")):
        part = os.path.join(work, f"part_{name}.ckpt")
        p = subprocess.Popen(base + ["--steps", str(STEPS), "--save", part], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        for line in p.stdout:
            if line.startswith("step 300:"):
                p.send_signal(sig)
                break
        out, err = p.communicate()
        m = re.search(rf"^mlc: {name}: stopped after step (\d+); saved {re.escape(part)} \(continue with --resume\)$", err, re.M)
        k = int(m.group(1)) if m else 0
        check(f"{name} at step 300: exit {128 + sig}, stopped after step {k} and saved",
              p.returncode == 128 + sig and m is not None and 300 <= k < STEPS and os.path.exists(part),
              f"exit {p.returncode}\n{err}")
        if not m:
            continue
        r = subprocess.run(base + ["--steps", str(STEPS - k), "--resume", part, "--save", part], capture_output=True, text=True)
        first = re.search(r"^step (\d+): loss", r.stdout, re.M)
        with open(full, "rb") as f:
            want = f.read()
        with open(part, "rb") as f:
            got = f.read()
        check(f"{name}: resumed at step {first.group(1) if first else '?'} for {STEPS - k} steps: the checkpoint equals "
              f"the uninterrupted run's ({len(got)} bytes)",
              r.returncode == 0 and first is not None and int(first.group(1)) == k + 1 and got == want, r.stderr)
    print(f"{failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
