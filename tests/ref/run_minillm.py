"""`mlc run` against PyTorch: the small MiniLLM, with weights saved from the
PyTorch model as safetensors, must give PyTorch's fp32 logits to a relative
error (max |mlc - torch| / max |torch|) of 1e-4 or less.

Usage: run_minillm.py MLC MODEL.mdl WORKDIR"""
import os
import subprocess
import sys

import numpy as np
import torch

from models import MiniLLM, rel_err, write_safetensors

CFG = dict(vocab=512, dim=128, layers=2, heads=4)
BATCH, SEQ = 2, 64
TOL = 1e-4


def main():
    mlc, model, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    torch.manual_seed(0)
    ref = MiniLLM(**CFG).eval()
    # The attention biases start at zero in PyTorch; make them count.
    with torch.no_grad():
        for p in ref.parameters():
            if p.dim() == 1:
                p.add_(torch.randn_like(p) * 0.1)
    weights = os.path.join(work, "minillm_small.safetensors")
    write_safetensors(weights, {k: v.detach() for k, v in ref.state_dict().items()}, {"format": "pt"})
    idx = torch.randint(0, CFG["vocab"], (BATCH, SEQ), dtype=torch.int32)
    idx_file, out_file = os.path.join(work, "idx.bin"), os.path.join(work, "logits.bin")
    idx.numpy().tofile(idx_file)
    defines = [f"{k}={v}" for k, v in CFG.items()] + [f"batch={BATCH}", f"seq={SEQ}"]
    cmd = [mlc, "run", model, "--target", "cpu", *defines, "--weights", weights, "--input", f"idx={idx_file}",
           "--output", f"output={out_file}"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"mlc run failed ({r.returncode}):\n{r.stderr}")
    got = torch.from_numpy(np.fromfile(out_file, dtype=np.float32).reshape(BATCH, SEQ, CFG["vocab"]))
    with torch.no_grad():
        want = ref(idx.long())
    err = rel_err(got, want)
    print(f"small MiniLLM logits: relative error {err:.3g} (tolerance {TOL}), max |logit| {want.abs().max():.3g}")
    print(r.stdout.strip())
    sys.exit(0 if err <= TOL else 1)


if __name__ == "__main__":
    main()
