"""Cross-attention trains on the spirv target: tests/ref/encdec.mdl (an
encoder-decoder whose decoder attends over 9 encoder positions from 5, once
causally: that gradient's mask is made of arange, lt and where) for 3 AdamW
steps with `mlc train --target spirv` and `--target cpu` from
the same initial weights (--seed) and data: the losses must agree within
1e-5 (the cpu target's are checked against PyTorch by ref.train.encdec).
Exit 77 when no Vulkan device is there.
Usage: cross_attention.py MLC REPO_ROOT WORKDIR"""
import os
import re
import subprocess
import sys

import numpy as np


def main():
    mlc, root, work = sys.argv[1], sys.argv[2], os.path.abspath(sys.argv[3])
    os.makedirs(work, exist_ok=True)
    if subprocess.run([mlc, "devices", "--target", "spirv"], capture_output=True).returncode != 0:
        print("no Vulkan device")
        sys.exit(77)
    model = os.path.join(root, "tests", "ref", "encdec.mdl")
    rng = np.random.default_rng(0)
    args = []
    for name, shape in (("src_ids", (3, 9)), ("tgt_ids", (3, 5)), ("targets", (3, 5))):
        path = os.path.join(work, name + ".npy")
        np.save(path, rng.integers(0, 13, shape).astype(np.int32))
        args += ["--input", f"{name}={path}"]
    losses = {}
    for target in ("cpu", "spirv"):
        r = subprocess.run([mlc, "train", model, "--target", target, "--steps", "3", "--seed", "5", *args],
                           capture_output=True, text=True)
        losses[target] = [float(v) for v in re.findall(r"^step \d+: loss (\S+) ", r.stdout, re.M)]
        if len(losses[target]) != 3:
            print(f"FAIL mlc train --target {target}:\n{r.stdout}{r.stderr}")
            sys.exit(1)
    err = max(abs(a - b) for a, b in zip(losses["cpu"], losses["spirv"]))
    ok = err <= 1e-5
    print(f"{'ok  ' if ok else 'FAIL'} 3 AdamW losses on spirv {losses['spirv']} against cpu {losses['cpu']}: "
          f"max difference {err:.2e} (tolerance 1e-5)")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
