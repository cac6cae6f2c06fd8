"""`mlc train` against PyTorch: the small MiniLLM, from the same initial
safetensors weights and the same token stream, for 20 AdamW steps (lr 3e-4,
PyTorch's defaults otherwise).

fp32 (compute=f32): each step's loss must follow PyTorch's fp32 run within a
relative error of 1e-3.
bf16 (compute=bf16, the model's default: bf16 compute, f32 master weights and
optimizer state): each step's loss must follow PyTorch's
torch.autocast("cpu", bfloat16) run within a relative error of 2e-3, the
bf16 tolerance (bf16 keeps 8 bits of mantissa: one rounding is 2^-9 = 2e-3
relative, and the two programs round different intermediates).

Usage: train_minillm.py MLC MODEL.mdl WORKDIR f32|bf16 [STEPS]"""
import os
import re
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F

from models import MiniLLM, write_safetensors

CFG = dict(vocab=512, dim=128, layers=2, heads=4)
B, T = 2, 64
TOL = {"f32": 1e-3, "bf16": 2e-3}


def main():
    mlc, model, work, mode = sys.argv[1:5]
    steps = int(sys.argv[5]) if len(sys.argv) > 5 else 20
    os.makedirs(work, exist_ok=True)
    torch.manual_seed(0)
    ref = MiniLLM(**CFG)
    with torch.no_grad():  # the biases start at zero in PyTorch; make them count
        for p in ref.parameters():
            if p.dim() == 1:
                p.add_(torch.randn_like(p) * 0.1)
    weights = os.path.join(work, "init.safetensors")
    write_safetensors(weights, {k: v.detach().clone() for k, v in ref.state_dict().items()}, {"format": "pt"})
    data = torch.randint(0, CFG["vocab"], (steps * B * T + 1,), dtype=torch.int32)
    data_file = os.path.join(work, "tokens.i32")
    data.numpy().tofile(data_file)

    cmd = [mlc, "train", model, "--target", "cpu", *[f"{k}={v}" for k, v in CFG.items()], f"batch={B}", f"seq={T}", f"compute={mode}",
           "--weights", weights, "--data", data_file, "--data-dtype", "i32", "--steps", str(steps)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"mlc train failed ({r.returncode}):\n{r.stderr}")
    got = [float(x) for x in re.findall(r"loss (\S+)", r.stdout)]

    opt = torch.optim.AdamW(ref.parameters(), lr=3e-4)
    want = []
    for s in range(steps):
        w = data[s * B * T: s * B * T + B * T + 1].long()
        tok, tgt = w[:-1].view(B, T), w[1:].view(B, T)
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=mode == "bf16"):
            logits = ref(tok)
        loss = F.cross_entropy(logits.float().view(-1, CFG["vocab"]), tgt.reshape(-1))
        loss.backward()
        opt.step()
        want.append(loss.item())
    worst = 0.0
    for s, (a, b) in enumerate(zip(got, want)):
        e = abs(a - b) / abs(b) if a == a else float("inf")
        worst = max(worst, e)
        print(f"step {s + 1:2d}: mlc {a:.6f}  torch {b:.6f}  rel {e:.2e}")
    ok = len(got) == steps and worst <= TOL[mode]
    print(f"{mode}, {steps} AdamW steps: worst relative error {worst:.3g} (tolerance {TOL[mode]}): {'ok' if ok else 'FAIL'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
