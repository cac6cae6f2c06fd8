#!/usr/bin/env python3
"""Every distinct GEMM of the MiniLLM forward and train step, in the layout
the step runs it, timed through mlc and through cuBLAS (torch) in the same
call, on the GPU machine:

    python3 bench/gemm_shapes.py --mlc build-gpu/mlc --out $OUT [--quick]

Layouts (M x N x K):
  linear  y = x W^T (+ bias): every forward projection (bench/gemm_linear.mdl)
  nn      C = A B: the input gradients dX = dY W (bench/gemm_nn.mdl)
  tn      C = A^T B: the weight gradients dW = dY^T X, K = tokens (bench/gemm_tn.mdl)
plus a few shapes off the multiples of 64.  mlc's time is `mlc bench`'s
median of 20 runs (CUDA events around the entry point); cuBLAS's is the
median of 20 CUDA-event timings of torch.matmul / F.linear on the same
shape and layout.  Writes gemm_shapes.md (a table) and gemm_shapes.json
(one record a shape, ratio = cuBLAS time / mlc time, > 1: mlc faster).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from spirv_torch import timed  # median and min of CUDA-event times after warm-up

T = 8192  # tokens: batch 8 x seq 1024
D, FF, QKV, V = 2048, 8192, 6144, 32000

# (what, layout, M, N, K, bias)
SHAPES = [
    ("in_proj", "linear", T, QKV, D, True),
    ("out_proj", "linear", T, D, D, True),
    ("ffn_up", "linear", T, FF, D, False),
    ("ffn_down", "linear", T, D, FF, False),
    ("head", "linear", T, V, D, False),
    ("in_proj dX", "nn", T, D, QKV, False),
    ("out_proj dX", "nn", T, D, D, False),
    ("ffn_up dX", "nn", T, D, FF, False),
    ("ffn_down dX", "nn", T, FF, D, False),
    ("head dX", "nn", T, D, V, False),
    ("in_proj dW", "tn", QKV, D, T, False),
    ("out_proj dW", "tn", D, D, T, False),
    ("ffn_up dW", "tn", FF, D, T, False),
    ("ffn_down dW", "tn", D, FF, T, False),
    ("head dW", "tn", V, D, T, False),
    ("odd linear", "linear", 8000, 6000, 2000, True),
    ("odd nn", "nn", 1000, 1000, 1000, False),
    ("odd tn", "tn", 2000, 2050, 8100, False),
]
QUICK = {"in_proj", "ffn_up", "head", "in_proj dW", "odd linear"}
# GEMMs of less than a wave of 128 x 128 tiles (under 132), for the tile rule's small-grid case
# (bench/gemm_tune.py --set small); not part of the table
SMALL = [
    ("odd nn", "nn", 1000, 1000, 1000, False),
    ("small linear", "linear", 1024, 1024, 4096, True),
    ("small nn", "nn", 2048, 1024, 1024, False),
    ("small tn", "tn", 1024, 2048, 2048, False),
    ("small long k", "linear", 512, 2048, 8192, False),
    ("small odd", "linear", 1000, 1500, 1000, True),
    ("small no tma", "nn", 1000, 1002, 1000, False),
    ("tiny", "nn", 256, 256, 256, False),
]


def torch_ms(layout, M, N, K, bias):
    g = torch.Generator(device="cuda").manual_seed(0)
    r = lambda *s: torch.randn(*s, device="cuda", dtype=torch.bfloat16, generator=g)
    if layout == "linear":
        x, w, b = r(M, K), r(N, K), r(N) if bias else None
        return timed(lambda: F.linear(x, w, b), 20)[0]
    if layout == "nn":
        a, b = r(M, K), r(K, N)
        return timed(lambda: a @ b, 20)[0]
    a, b = r(K, M), r(K, N)
    return timed(lambda: a.t() @ b, 20)[0]


def mlc_ms(mlc, root, layout, M, N, K, bias, log):
    args = [mlc, "bench", os.path.join(root, "bench", f"gemm_{layout}.mdl"), "--target", "cuda",
            f"M={M}", f"N={N}", f"K={K}", "--runs", "20", "--warmup", "3"]
    if layout == "linear":
        args.append(f"bias={'true' if bias else 'false'}")
    p = subprocess.run(args, capture_output=True, text=True)
    log.write(" ".join(args[1:]) + "\n" + p.stdout + p.stderr)
    m = re.search(r"median ([0-9.]+) ms", p.stdout + p.stderr)
    if p.returncode or not m:
        raise SystemExit(f"mlc bench failed ({p.returncode}) for {layout} {M}x{N}x{K}:\n{p.stdout}{p.stderr}")
    return float(m.group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mlc", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true", help="five shapes only")
    a = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.makedirs(a.out, exist_ok=True)
    rows = []
    with open(os.path.join(a.out, "gemm_shapes_mlc.log"), "w") as log:
        for what, layout, M, N, K, bias in SHAPES:
            if a.quick and what not in QUICK:
                continue
            tm = mlc_ms(a.mlc, root, layout, M, N, K, bias, log)
            tr = torch_ms(layout, M, N, K, bias)
            fl = 2.0 * M * N * K
            row = dict(what=what, layout=layout, M=M, N=N, K=K, bias=bias, mlc_ms=tm, cublas_ms=tr,
                       mlc_tflops=fl / tm / 1e9, cublas_tflops=fl / tr / 1e9, ratio=tr / tm)
            rows.append(row)
            print(json.dumps(row), flush=True)
    with open(os.path.join(a.out, "gemm_shapes.json"), "w") as f:
        json.dump(rows, f, indent=1)
    ratios = sorted(r["ratio"] for r in rows)
    worst = min(rows, key=lambda r: r["ratio"])
    with open(os.path.join(a.out, "gemm_shapes.md"), "w") as f:
        f.write(f"torch {torch.__version__}, {torch.cuda.get_device_name()}\n\n")
        f.write("| GEMM | layout | M x N x K | bias | mlc ms | cuBLAS ms | mlc TFLOP/s | cuBLAS TFLOP/s | cuBLAS/mlc |\n")
        f.write("|---|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            f.write(f"| {r['what']} | {r['layout']} | {r['M']}x{r['N']}x{r['K']} | {'yes' if r['bias'] else ''} | "
                    f"{r['mlc_ms']:.3f} | {r['cublas_ms']:.3f} | {r['mlc_tflops']:.0f} | {r['cublas_tflops']:.0f} | "
                    f"{r['ratio']:.2f} |\n")
        f.write(f"\nworst: {worst['what']} {worst['ratio']:.2f}; median {statistics.median(ratios):.2f}\n")
    print(f"worst {worst['what']} {worst['ratio']:.3f}, median {statistics.median(ratios):.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
