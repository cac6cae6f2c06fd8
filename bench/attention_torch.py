#!/usr/bin/env python3
"""PyTorch's attention at the MiniLLM's shape, the reference for
bench/attention_bf16.mdl: F.scaled_dot_product_attention in bf16 (batch 8,
16 heads, 1024 tokens, head dim 128, not causal; --shape and --causal for others), forward alone and forward
plus backward, CUDA-event medians.  Prints the backend PyTorch picks."""
import argparse

import torch
import torch.nn.functional as F

from spirv_torch import timed  # median and min of CUDA-event times after warm-up


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--shape", default="8,16,1024,128", help="b,h,s,d (default: the MiniLLM's)")
    a = ap.parse_args()
    b, h, s, d = (int(x) for x in a.shape.split(","))
    torch.manual_seed(0)
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    r = torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16)
    fwd = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=a.causal)

    def step():
        o = fwd()
        (o * r).sum().backward()

    with torch.no_grad():
        t_fwd = timed(fwd, a.runs)[0]
    t_step = timed(step, a.runs)[0]
    fl = 4.0 * b * h * s * s * d * (0.5 if a.causal else 1.0)
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}; flash {torch.backends.cuda.flash_sdp_enabled()}, "
          f"cudnn {torch.backends.cuda.cudnn_sdp_enabled()}, mem_efficient {torch.backends.cuda.mem_efficient_sdp_enabled()}")
    print(f"sdpa b{b} h{h} s{s} d{d} bf16 causal={a.causal}: forward {t_fwd:.3f} ms ({fl / t_fwd / 1e9:.0f} TFLOP/s), "
          f"forward+backward {t_step:.3f} ms, backward alone about {t_step - t_fwd:.3f} ms "
          f"({2.5 * fl / (t_step - t_fwd) / 1e9:.0f} TFLOP/s)")
    try:
        from torch.profiler import profile, ProfilerActivity
        with profile(activities=[ProfilerActivity.CUDA]) as p:
            step()
            torch.cuda.synchronize()
        print(p.key_averages().table(sort_by="cuda_time_total", row_limit=8))
    except Exception as e:  # the kernel names are a nicety
        print("profiler:", e)


if __name__ == "__main__":
    main()
