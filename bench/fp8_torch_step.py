#!/usr/bin/python3
"""PyTorch's FP8 train step of the MiniLLM (issue 30's reference), beside its
bf16 step, in one process on the GPU: what `mlc train examples/minillm.mdl
--target cuda --matmul=fp8` is measured against.

The model is ../shared/bench/torch_baseline.py's MiniLLM (12 layers, dim 2048,
16 heads, FFN 8192 with SiLU, RMSNorm, vocab 32000, batch 8 x 1024 tokens,
AdamW 3e-4 fused, bf16 autocast), with its MultiheadAttention written as the
two Linears it holds (in_proj 2048 -> 6144 with bias, out_proj with bias) and
F.scaled_dot_product_attention between them, so that every layer GEMM is an
nn.Linear that FP8 can take.

FP8 (every Linear but the head, as mlc's fp8 pass and torchao's recipes):
- torchao's `convert_to_float8_training` (tensorwise) where `import torchao`
  works on this machine;
- else this file's `F8Linear`: torchao's tensorwise recipe written out with
  torch._scaled_mm: x and w in e4m3, the output gradient in e5m2, each
  tensor scaled by a power of two from its amax (2^floor(log2(fmax / amax)),
  mlc's rule), saturated, the three GEMMs (y = x w^T, dx = g w, dw = g^T x)
  on cuBLAS's FP8 kernels; use_fast_accum on the forward only (torchao's
  default), the transposed operands made contiguous as _scaled_mm needs.

Each mode is timed eager and under torch.compile: 2 warm-up steps, then the
median of --steps steps (CUDA events around zero_grad .. opt.step()).
Prints one JSON line per run: {"case", "step_ms", "loss_first", "loss_last",
"peak_gb", ...}.

Usage: fp8_torch_step.py [--modes bf16,fp8] [--compile both|eager|compile] [--steps 8]
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

B, S, V, D, H, L = 8, 1024, 32000, 2048, 16, 12
E4, E5 = torch.float8_e4m3fn, torch.float8_e5m2


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1 = nn.RMSNorm(D)
        self.in_proj = nn.Linear(D, 3 * D)
        self.out_proj = nn.Linear(D, D)
        self.norm2 = nn.RMSNorm(D)
        self.up = nn.Linear(D, 4 * D, bias=False)
        self.down = nn.Linear(4 * D, D, bias=False)

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = self.in_proj(self.norm1(x)).view(b, s, 3, H, D // H).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, s, D)
        x = x + self.out_proj(a)
        return x + self.down(F.silu(self.up(self.norm2(x))))


class MiniLLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(V, D)
        self.layers = nn.ModuleList([Block() for _ in range(L)])
        self.head = nn.Linear(D, V, bias=False)

    def forward(self, idx):
        x = self.embed(idx)
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


def quant(t, dt):
    """t's codes in dt and the dequantisation factor: a power-of-two scale from amax, saturated."""
    fmax = torch.finfo(dt).max
    amax = t.detach().abs().max().float().clamp(min=1e-30)
    s = torch.exp2(torch.floor(torch.log2(fmax / amax)))
    return (t.float() * s).clamp(-fmax, fmax).to(dt), s.reciprocal()


class F8Matmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):  # x [m, k], w [n, k] -> x w^T [m, n] in bf16
        x8, xs = quant(x, E4)
        w8, ws = quant(w, E4)
        ctx.save_for_backward(x8, xs, w8, ws)
        return torch._scaled_mm(x8, w8.t(), scale_a=xs, scale_b=ws, out_dtype=torch.bfloat16, use_fast_accum=True)

    @staticmethod
    def backward(ctx, g):
        x8, xs, w8, ws = ctx.saved_tensors
        g8, gs = quant(g, E5)
        dx = torch._scaled_mm(g8, w8.t().contiguous().t(), scale_a=gs, scale_b=ws, out_dtype=torch.bfloat16)
        dw = torch._scaled_mm(g8.t().contiguous(), x8.t().contiguous().t(), scale_a=gs, scale_b=xs,
                              out_dtype=torch.bfloat16)
        return dx, dw.to(torch.float32)


class F8Linear(nn.Linear):
    def forward(self, x):
        y = F8Matmul.apply(x.reshape(-1, x.shape[-1]).to(torch.bfloat16), self.weight)
        y = y.view(*x.shape[:-1], -1)
        return y + self.bias.to(y.dtype) if self.bias is not None else y


def to_fp8(model):
    """The layers' Linears to FP8 (not the head): torchao where it imports, else F8Linear. Returns its name."""
    try:
        from torchao.float8 import convert_to_float8_training
        convert_to_float8_training(model, module_filter_fn=lambda m, fqn: fqn != "head")
        return "torchao float8 (tensorwise)"
    except ImportError:
        pass
    for blk in model.layers:
        for name in ("in_proj", "out_proj", "up", "down"):
            old = getattr(blk, name)
            new = F8Linear(old.in_features, old.out_features, bias=old.bias is not None, device=old.weight.device)
            new.load_state_dict(old.state_dict())
            setattr(blk, name, new)
    return "torch._scaled_mm (this file's F8Linear, tensorwise)"


def run(mode, compile_, steps):
    torch.manual_seed(0)
    model = MiniLLM().cuda()
    recipe = to_fp8(model) if mode == "fp8" else "bf16 autocast"
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=True)
    fwd = torch.compile(model) if compile_ else model
    g = torch.Generator(device="cuda").manual_seed(1)
    tok = torch.randint(0, V, (B, S), device="cuda", generator=g)
    tgt = torch.randint(0, V, (B, S), device="cuda", generator=g)
    losses = []

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = fwd(tok)
        loss = F.cross_entropy(logits.float().view(-1, V), tgt.view(-1))
        loss.backward()
        opt.step()
        return loss

    torch.cuda.reset_peak_memory_stats()
    t0 = time.time()
    losses.append(step().item())
    first = time.time() - t0
    for _ in range(2):
        losses.append(step().item())
    ts = []
    for _ in range(steps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        loss = step()
        b.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b))
        losses.append(loss.item())
    print(json.dumps({"case": f"{mode}_{'compile' if compile_ else 'eager'}", "recipe": recipe,
                      "step_ms": statistics.median(ts), "min_ms": min(ts), "max_ms": max(ts), "steps": steps,
                      "first_step_s": round(first, 1), "loss_first": losses[0], "loss_last": losses[-1],
                      "peak_gb": torch.cuda.max_memory_allocated() / 1e9}), flush=True)
    del model, opt, fwd
    torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--modes", default="bf16,fp8")
    ap.add_argument("--compile", default="both", choices=["both", "eager", "compile"])
    ap.add_argument("--steps", type=int, default=8)
    a = ap.parse_args()
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    for mode in a.modes.split(","):
        for c in {"both": (False, True), "eager": (False,), "compile": (True,)}[a.compile]:
            run(mode, c, a.steps)


if __name__ == "__main__":
    main()
