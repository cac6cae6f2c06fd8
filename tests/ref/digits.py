"""The digits example (examples/digits/) reaches at least 95 % held-out
accuracy from the command line and from Python, measured by numpy alone
(examples/digits/accuracy.py: the exported weights, exact GELU, argmax) on
the 359 rows --eval-split 0.2 holds out.  From Python, the predictions of
the binding's forward must also be numpy's, row for row.

Needs Debian's python3-sklearn (the data set).  Usage: digits.py MLC REPO_ROOT WORKDIR"""
import os
import re
import subprocess
import sys

import numpy as np


def accuracy(text):
    m = re.search(r"^held-out accuracy: ([0-9.]+) \((\d+) of 359\)$", text, re.M)
    return float(m.group(1)) if m else 0.0


def main():
    mlc, root, work = sys.argv[1], sys.argv[2], os.path.abspath(sys.argv[3])
    here = os.path.join(root, "examples", "digits")
    csv = "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz"
    if not os.path.exists(csv):
        sys.exit(f"{csv} is missing: install Debian's python3-sklearn (scripts/deps.sh)")
    os.makedirs(work, exist_ok=True)
    env = dict(os.environ, PYTHON=sys.executable, PYTHONPATH=os.path.join(root, "python"))
    failed = 0

    r = subprocess.run(["sh", os.path.join(here, "train.sh"), mlc, work], capture_output=True, text=True, env=env)
    print(r.stdout[-600:], r.stderr[-600:] if r.returncode else "")
    val = [float(v) for v in re.findall(r"^step \d+: validation (\S+) ", r.stdout, re.M)]
    cli = accuracy(r.stdout)
    ok = r.returncode == 0 and cli >= 0.95 and len(val) == 3
    failed += not ok
    print(f"{'ok  ' if ok else 'FAIL'} CLI: held-out accuracy {cli:.4f} (at least 0.95), validation losses {val}")

    art = os.path.join(work, "artifact")
    subprocess.run([mlc, "compile", os.path.join(root, "examples", "mlp.mdl"), "--target", "cpu", "-o", art,
                    "inputs=64", "hidden=64"], check=True, capture_output=True)
    w = os.path.join(work, "python.safetensors")
    r = subprocess.run([sys.executable, os.path.join(here, "train.py"), art, work, w], capture_output=True, text=True, env=env)
    print(r.stdout, r.stderr[-2000:] if r.returncode else "")
    py = accuracy(r.stdout)
    ref = subprocess.run([sys.executable, os.path.join(here, "accuracy.py"), w, work], capture_output=True, text=True)
    sys.path.insert(0, here)
    from accuracy import held_out, logits, read_safetensors
    same = r.returncode == 0 and bool(
        (np.load(w + ".pred.npy") == logits(read_safetensors(w), held_out(work)[0]).argmax(1)).all())
    ok = r.returncode == 0 and py >= 0.95 and accuracy(ref.stdout) == py and same
    failed += not ok
    print(f"{'ok  ' if ok else 'FAIL'} Python: held-out accuracy {py:.4f} (at least 0.95); numpy's predictions from its "
          f"weights {'the same' if same else 'DIFFER'} ({ref.stdout.strip()})")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
