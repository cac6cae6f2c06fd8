#!/usr/bin/env python3
"""PyTorch eager's MiniLLM bf16 forward (torch_baseline.py's `infer`, carried
as .yardstick/), kernel by kernel: the CUDA time of each kernel name summed
over 5 profiled forwards (after 3 warm-ups), divided by 5, with the launch
count per forward; then the total.  Beside `mlc profile` in the same call
(bench/h200_fwdprof.sh), to see where mlc's forward loses to eager's.
"""
import os
import sys
from collections import defaultdict

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".yardstick"))
import torch_baseline as tb  # noqa: E402

torch.manual_seed(0)
model = tb.MiniLLM().cuda().to(torch.bfloat16).eval()
tok = torch.randint(0, 32000, (8, 1024), device="cuda")
N = 5
with torch.no_grad():
    for _ in range(3):
        model(tok)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as p:
        for _ in range(N):
            model(tok)
        torch.cuda.synchronize()
tot, cnt = defaultdict(float), defaultdict(int)
for e in p.events():
    if e.device_type == torch.autograd.DeviceType.CUDA:
        tot[e.name] += e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total
        cnt[e.name] += 1
s = sum(tot.values())
print(f"eager forward: kernels' CUDA time {s / N / 1e3:.3f} ms per forward")
for name, t in sorted(tot.items(), key=lambda kv: -kv[1]):
    print(f"{t / N / 1e3:8.3f} ms  {cnt[name] // N:4d}x  {name[:160]}")
