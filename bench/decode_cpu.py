#!/usr/bin/python3
"""Decode speed: `mlc generate` against PyTorch eager with a static KV cache,
in the same call, from the same weights (examples/minillm_causal.mdl).

    bench/decode_cpu.py MLC [--threads 2] [--runs 3] [--target cpu|spirv|cuda] [--quantize Q]
                        [--torch-device cpu|cuda] [--dtype f32|bf16] [NAME=VALUE ...]

--target picks mlc's target (spirv: a Vulkan device, lavapipe here, NVIDIA's
driver on the GPU machine); --quantize passes mlc generate's (the tokens may
then differ from PyTorch's f32 ones); --torch-device runs PyTorch's side on
the GPU (timed with synchronisation), for comparing a GPU target.  --dtype
bf16 runs bench/minillm_causal_bf16.mdl (bf16 parameters, f32 logits) against
the same model in bf16 in PyTorch, caches bf16 too; random weights make bf16
argmax ties likely, so its tokens are counted, not required to agree.

With --torch-device cuda it also prints the bandwidth limit of a decode
step: the bytes a token reads (every parameter but the embedding table, of
which one row, with --quantize each linear's weight in its packed form,
plus the valid rows of both caches of every layer at the decode's mean
position) over the device's copy bandwidth, measured in the
same call (a 2 GiB device-to-device copy, read plus written bytes, median of
10), and mlc's fraction of that limit.

NAME=VALUE overrides the model's config (dim=512 layers=8 ...), for both.
PyTorch's decode keeps a cache [batch, heads, max_ctx, head_dim] per layer,
writes each step's keys and values at its position and attends over the valid
prefix (eager, f32, torch.set_num_threads(threads)); its prefill runs the
prompt at once.  Both generate greedily from the same prompt; the tokens must
agree.  Prints each run's prefill and decode tokens/s and the median ratio
of mlc's decode rate over PyTorch's.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "ref"))
from models import MiniLLM, write_safetensors  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def rmsnorm(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + torch.finfo(x.dtype).eps) * w


class Cached:
    """The MiniLLM's forward over static KV caches, in eager PyTorch."""

    def __init__(self, model, heads, max_ctx, device="cpu"):
        self.m, self.h = model, heads
        d, dt = model.embed.weight.shape[1], model.embed.weight.dtype
        self.k = [torch.zeros(1, heads, max_ctx, d // heads, device=device, dtype=dt) for _ in model.layers]
        self.v = [torch.zeros(1, heads, max_ctx, d // heads, device=device, dtype=dt) for _ in model.layers]

    def __call__(self, idx, pos):
        t = idx.shape[1]
        x = self.m.embed(idx)
        mask = torch.ones(t, pos + t, dtype=torch.bool, device=idx.device).tril(pos)
        for i, layer in enumerate(self.m.layers):
            a = layer.attn
            h = rmsnorm(x, layer.norm1.weight)
            q, k, v = F.linear(h, a.in_proj_weight, a.in_proj_bias).chunk(3, dim=-1)
            q, k, v = (z.view(1, t, self.h, -1).transpose(1, 2) for z in (q, k, v))
            self.k[i][:, :, pos:pos + t] = k
            self.v[i][:, :, pos:pos + t] = v
            kc, vc = self.k[i][:, :, :pos + t], self.v[i][:, :, :pos + t]
            s = (q @ kc.transpose(-1, -2)) / (q.shape[-1] ** 0.5)
            o = s.masked_fill(~mask, float("-inf")).softmax(-1) @ vc
            o = F.linear(o.transpose(1, 2).reshape(1, t, -1), a.out_proj.weight, a.out_proj.bias)
            x = x + o
            x = x + layer.ffn(rmsnorm(x, layer.norm2.weight))
        return self.m.head(x).float()


def torch_generate(model, heads, max_ctx, prompt, n, device="cpu"):
    c = Cached(model, heads, max_ctx, device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    with torch.no_grad():
        sync()
        t0 = time.perf_counter()
        logits = c(torch.tensor([prompt], device=device), 0)
        tok = [int(logits[0, -1].argmax())]  # .item() synchronises
        t1 = time.perf_counter()
        for k in range(1, n):
            logits = c(torch.tensor([[tok[-1]]], device=device), len(prompt) + k - 1)
            tok.append(int(logits[0, -1].argmax()))
        sync()
        t2 = time.perf_counter()
    return tok, t1 - t0, t2 - t1


def copy_bandwidth(device):
    """Bytes per second of a device-to-device copy (read + written), median of 10."""
    src = torch.empty(1 << 30, dtype=torch.int16, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)
    ts = []
    for _ in range(10):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        dst.copy_(src)
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) / 1e3)
    ts.sort()
    return 2 * src.numel() * src.element_size() / ts[len(ts) // 2]


def quant_row_bytes(k, quantize):
    """Bytes of one packed row of k weights under --quantize Q (runtime/quant.h: the codes, then the scales and,
    asymmetric, the mins, bf16 two to a word unless :scales=f32)."""
    parts = quantize.split(":")
    bits = int(parts[0][3:])
    group = next((int(x[6:]) for x in parts[1:] if x.startswith("group=")), 128)
    halves = (2 if "asym" in parts[1:] else 1) * (k // group)
    return 4 * (k * bits // 32 + (halves if "scales=f32" in parts[1:] else (halves + 1) // 2))


def token_bytes(model, cfg, mean_pos, quantize=None):
    """Bytes one decode step reads: the parameters (one row of the embedding; with --quantize every linear's
    weight, the 2-D parameters but the embedding, in its packed form) and both caches' valid rows."""
    b = 0
    for name, p in model.named_parameters():
        if name == "embed.weight":
            b += p.shape[-1] * p.element_size()
        elif quantize and p.dim() == 2:
            b += p.shape[0] * quant_row_bytes(p.shape[1], quantize)
        else:
            b += p.numel() * p.element_size()
    es = model.embed.weight.element_size()
    return b + 2 * cfg["layers"] * mean_pos * cfg["dim"] * es


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mlc")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--new", type=int, default=128)
    ap.add_argument("--target", default="cpu")
    ap.add_argument("--quantize")
    ap.add_argument("--torch-device", default="cpu")
    ap.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    ap.add_argument("defines", nargs="*")
    a = ap.parse_intermixed_args()
    cfg = dict(vocab=512, dim=128, layers=2, heads=4, max_ctx=256, prefill=16)
    for d in a.defines:
        k, v = d.split("=")
        cfg[k] = int(v)
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = MiniLLM(cfg["vocab"], cfg["dim"], cfg["layers"], cfg["heads"]).eval()
    if a.dtype == "bf16":
        model = model.to(torch.bfloat16)
    work = tempfile.mkdtemp(prefix="mlc_decode_")
    weights = os.path.join(work, "w.safetensors")
    write_safetensors(weights, {k: v.detach() for k, v in model.state_dict().items()}, {"format": "pt"})
    prompt = torch.randint(0, cfg["vocab"], (a.prompt_len,)).tolist()
    mdl = os.path.join(ROOT, "bench", "minillm_causal_bf16.mdl") if a.dtype == "bf16" else \
        os.path.join(ROOT, "examples", "minillm_causal.mdl")
    cmd = [a.mlc, "generate", mdl, "--target", a.target,
           "--weights", weights, "--prompt", ",".join(map(str, prompt)), "--max-new", str(a.new)]
    cmd += ["--threads", str(a.threads)] if a.target == "cpu" else []
    cmd += ["--quantize", a.quantize] if a.quantize else []
    cmd += [f"{k}={v}" for k, v in cfg.items()] + ["batch=1"]
    print("config:", " ".join(f"{k}={v}" for k, v in cfg.items()), f"threads={a.threads}",
          f"prompt={a.prompt_len} new={a.new} target={a.target} quantize={a.quantize} torch={a.torch_device} "
          f"dtype={a.dtype}")
    tmodel = model.to(a.torch_device)
    print("mlc:", " ".join(cmd[:3] + ["..."] + cmd[-len(cfg) - 1:]))
    ratios, decs = [], []
    for r in range(a.runs):
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode:
            sys.exit(out.stderr)
        lines = {x.split(":")[0]: x for x in out.stdout.splitlines()}
        mtok = [int(x) for x in lines["tokens"].split()[1:]]
        m_pre = float(lines["prefill"].split(" ms")[0].split()[-1]) / 1e3
        m_dec = float(lines["decode"].split(" ms")[0].split()[-1]) / 1e3
        ttok, t_pre, t_dec = torch_generate(tmodel, cfg["heads"], cfg["max_ctx"], prompt, a.new, a.torch_device)
        same = sum(x == y for x, y in zip(mtok, ttok))
        n = a.new - 1
        ratios.append((n / m_dec) / (n / t_dec))
        decs.append(m_dec / n)
        print(f"run {r}: prefill mlc {a.prompt_len / m_pre:.1f} tok/s, torch {a.prompt_len / t_pre:.1f}; "
              f"decode mlc {n / m_dec:.1f} tok/s ({m_dec / n * 1e3:.3f} ms), torch {n / t_dec:.1f} tok/s "
              f"({t_dec / n * 1e3:.3f} ms); mlc/torch {ratios[-1]:.2f}x; tokens equal {same}/{a.new}")
    ratios.sort()
    print(f"decode mlc/torch (median of {a.runs}): {ratios[len(ratios) // 2]:.2f}x")
    if a.torch_device == "cuda":
        bw = copy_bandwidth(a.torch_device)
        tb = token_bytes(model, cfg, a.prompt_len + a.new / 2, a.quantize)
        limit = tb / bw
        med = sorted(decs)[len(decs) // 2]
        print(f"bandwidth: copy {bw / 1e12:.3f} TB/s; {tb / 1e9:.4f} GB a token; limit {limit * 1e3:.4f} ms a token; "
              f"mlc at {limit / med:.3f} of it (median {med * 1e3:.4f} ms a token)")


if __name__ == "__main__":
    main()
