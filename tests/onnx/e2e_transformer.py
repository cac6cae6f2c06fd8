#!/usr/bin/env python3
"""End to end: a small decoder-only transformer exported from PyTorch with
torch.onnx.export, compiled and run by mlc on the CPU, must give PyTorch's
logits.

The model (2 layers): token embedding plus learned positions, pre-LayerNorm
blocks, a hand-written causal attention (masked_fill: Where) in layer 0 and
nn.MultiheadAttention with a causal float mask in layer 1, a GELU (erf) MLP,
residuals, a final LayerNorm and an LM head tied to the embedding.  It is
exported twice: with a fixed batch and sequence length, and with both axes
dynamic ('batch', 'seq'), bound at compile time with -D.

The check: max |mlc - torch| / max |torch| <= 1e-4 in f32.  Exits 77 (a
skip) where torch or onnx is missing.

With --record DIR, each model that passes is also kept in DIR/e2e/ as
tests/onnx/replay.py reads it (the .onnx, the tokens, torch's logits, the
arguments and this tolerance), so that the GPU machine, whose torch may export
differently or not at all, checks Debian's export on --target cuda.

Usage: e2e_transformer.py --mlc MLC [--work DIR] [--target cpu] [--record DIR]"""
import argparse
import json
import os
import shutil
import subprocess
import sys

try:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:  # pragma: no cover - a machine without torch
    print(f"skipped: {e} (the test exports its model with torch.onnx.export)")
    sys.exit(77)

VOCAB, DIM, HEADS, LAYERS, MAXLEN = 256, 64, 4, 2, 32
BATCH, SEQ = 2, 16
TOL = 1e-4


class CausalSelfAttention(nn.Module):
    """q, k, v from one projection; softmax(q k^T / sqrt(d) masked) v."""

    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / (c // self.heads) ** 0.5)
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~mask, float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class TorchMHA(nn.Module):
    """nn.MultiheadAttention (batch_first, biases) with a causal float mask."""

    def __init__(self, dim, heads):
        super().__init__()
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)

    def forward(self, x):
        t = x.shape[1]
        mask = torch.triu(torch.full((t, t), float("-inf"), device=x.device), diagonal=1)
        return self.attn(x, x, x, attn_mask=mask, need_weights=False)[0]


class Block(nn.Module):
    def __init__(self, dim, heads, attn):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = attn(dim, heads)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, DIM)
        self.pos = nn.Embedding(MAXLEN, DIM)
        kinds = [CausalSelfAttention, TorchMHA]
        self.blocks = nn.ModuleList(Block(DIM, HEADS, kinds[i % 2]) for i in range(LAYERS))
        self.ln_f = nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, VOCAB, bias=False)
        self.head.weight = self.tok.weight  # tied

    def forward(self, idx):
        t = idx.shape[1]
        pos = torch.arange(t, device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln_f(x))


def make_model():
    torch.manual_seed(0)
    m = TinyGPT().eval()
    # LayerNorm and the biases start at 1 and 0 in PyTorch; make them count.
    with torch.no_grad():
        for name, p in m.named_parameters():
            if p.dim() == 1:
                p.add_(torch.randn_like(p) * 0.1)
    return m


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {r.returncode}:\n{r.stdout}{r.stderr}")
    return r


def check(args, model, label, path, defines, opset, batch=BATCH, seq=SEQ):
    idx = torch.randint(0, VOCAB, (batch, seq), dtype=torch.int64)
    with torch.no_grad():
        want = model(idx)
    base = os.path.join(args.work, label)
    idx_file, out_file = base + ".idx.bin", base + ".logits.bin"
    idx.numpy().tofile(idx_file)
    if os.path.exists(out_file):
        os.remove(out_file)
    mlc = [args.mlc, "run", path, "--target", args.target, *defines, "--input", f"idx={idx_file}",
           "--output", f"logits={out_file}"]
    run(mlc)
    got = torch.from_numpy(np.fromfile(out_file, dtype=np.float32))
    if got.numel() != want.numel():
        sys.exit(f"FAIL {label}: mlc wrote {got.numel()} logits, torch has {want.numel()}")
    got = got.reshape(want.shape)
    scale = want.abs().max().item()
    err = (got - want).abs().max().item() / scale
    ok = err <= TOL
    print(f"{'PASS' if ok else 'FAIL'} {label} (opset {opset}): logits {tuple(want.shape)}, "
          f"max |mlc - torch| / max |torch| = {err:.3g} (max |torch| {scale:.3g}, tolerance {TOL})")
    print("  " + " ".join(mlc))
    if ok and args.record:
        d = os.path.join(args.record, "e2e", f"tinygpt_{label}", "test_data_set_0")
        os.makedirs(d, exist_ok=True)
        shutil.copyfile(path, os.path.join(d, "model.onnx"))
        shutil.copyfile(idx_file, os.path.join(d, "in_idx.bin"))
        np.save(os.path.join(d, "want_logits.npy"), want.numpy())
        with open(os.path.join(d, "manifest.json"), "w") as f:
            json.dump({"args": [*defines, "--input", "idx=in_idx.bin"], "outputs": ["logits"],
                       "scaled_tol": TOL}, f)
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mlc", required=True)
    ap.add_argument("--work", default="e2e_transformer")
    ap.add_argument("--target", default="cpu")
    ap.add_argument("--record", help="keep the passing models for tests/onnx/replay.py here")
    args = ap.parse_args()
    try:
        import onnx  # noqa: F401  (torch.onnx.export needs it)
    except ImportError as e:
        print(f"skipped: {e} (torch.onnx.export needs the onnx package)")
        sys.exit(77)
    os.makedirs(args.work, exist_ok=True)
    model = make_model()
    example = torch.zeros(BATCH, SEQ, dtype=torch.int64)
    dynamic = {"idx": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}}
    ok = True
    # opset 14: LayerNorm as ReduceMean, Sub, Pow, Sqrt, Div; opset 17: as LayerNormalization.
    # The dynamic model runs at another batch and length than it was exported with.
    for label, opset, axes, defines, b, t in [("fixed", 14, None, [], BATCH, SEQ),
                                              ("dynamic", 14, dynamic, ["-D", "batch=3", "-D", "seq=11"], 3, 11),
                                              ("fixed", 17, None, [], BATCH, SEQ)]:
        path = os.path.join(args.work, f"tinygpt_{label}_{opset}.onnx")
        torch.onnx.export(model, (example,), path, input_names=["idx"], output_names=["logits"],
                          opset_version=opset, dynamic_axes=axes)
        ok = check(args, model, f"{label}_{opset}", path, defines, opset, b, t) and ok
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
