#!/usr/bin/env python3
"""One cuBLAS GEMM through torch, for ncu to profile beside mlc's:
    gemm_cublas_one.py M N K bias   (F.linear of x[M,K] and W[N,K], bf16)
Warms up twice, then runs once more under an NVTX range "cublas"."""
import sys

import torch
import torch.nn.functional as F

M, N, K, bias = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "true"
x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
w = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
b = torch.randn(N, device="cuda", dtype=torch.bfloat16) if bias else None
for _ in range(3):
    F.linear(x, w, b)
torch.cuda.synchronize()
