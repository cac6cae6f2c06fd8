#!/usr/bin/env python3
"""PyTorch's side of bench/spirv_h200.sh, on the same GPU: torch.matmul
(cuBLAS) at n^3 in f16 and bf16, and the MiniLLM forward in bf16 (the model
of tests/ref/models.py, as bench/minillm_bf16.mdl), each the median of CUDA
event times after warm-up.

Usage: spirv_torch.py gemm [--n 4096] | minillm [--runs 10]
"""
import argparse
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "ref"))


def timed(fn, runs, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(runs):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
    return statistics.median(ts), min(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["gemm", "minillm"])
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    print("torch", torch.__version__, torch.cuda.get_device_name(), flush=True)
    if args.what == "gemm":
        n = args.n
        for dt in (torch.float16, torch.bfloat16):
            a = torch.randn(n, n, device="cuda", dtype=dt)
            b = torch.randn(n, n, device="cuda", dtype=dt)
            med, best = timed(lambda: torch.matmul(a, b), args.runs)
            print("torch.matmul %s %d^3: median %.3f ms, min %.3f; %.1f TFLOP/s" % (
                str(dt).replace("torch.", ""), n, med, best, 2 * n ** 3 / (med * 1e-3) / 1e12), flush=True)
        return 0
    from models import MiniLLM
    torch.manual_seed(0)
    m = MiniLLM(32000, 2048, 12, 16, device="cuda").to(torch.bfloat16).eval()
    idx = torch.randint(0, 32000, (8, 1024), device="cuda")
    with torch.no_grad():
        med, best = timed(lambda: m(idx), args.runs)
    print("torch MiniLLM forward bf16 (batch 8, seq 1024): median %.3f ms, min %.3f over %d runs" % (med, best, args.runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
