#!/usr/bin/python3
"""FP8 GEMMs' ceiling at the MiniLLM's shapes, before mlc has FP8 kernels
(issue 30, docs/notes/fp8-training.md §0 and plan step 1): cuBLAS's e4m3 GEMM
through torch._scaled_mm against its bf16 GEMM, on the GPU, for each of the
train step's GEMMs: every linear's forward, dx and dw (in_proj, out_proj,
ffn up, ffn down; the head), median of ITERS runs timed with CUDA events.

Prints one row per GEMM (ms bf16, ms fp8, TFLOP/s, ratio) and the step's
GEMM time with the layers' GEMMs in fp8 and the head in bf16 (the fp8 pass's
default), so §0's projection of the step can use measured numbers.  The
fp8 operands are both K-major ([M, K] and [N, K], as scaled_mm in ops.def);
per-tensor scales; use_fast_accum as torchao's forward (--accum promote for
the other).  No mlc code runs here.

Usage: fp8_ceiling.py [--tokens 8192] [--dim 2048] [--ffn 8192] [--vocab 32000] [--layers 12] [--iters 20]"""
import argparse

import torch


def timed(fn, iters):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(iters):
        start.record()
        fn()
        end.record()
        end.synchronize()
        ts.append(start.elapsed_time(end))
    ts.sort()
    return ts[len(ts) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--dim", type=int, default=2048)
    ap.add_argument("--ffn", type=int, default=8192)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--accum", choices=["fast", "promote"], default="fast")
    a = ap.parse_args()
    if not hasattr(torch, "_scaled_mm") or not hasattr(torch, "float8_e4m3fn"):
        raise SystemExit(f"torch {torch.__version__} has no _scaled_mm / float8_e4m3fn")
    T, D, F, V = a.tokens, a.dim, a.ffn, a.vocab
    linears = [("in_proj", 3 * D, D), ("out_proj", D, D), ("ffn_up", F, D), ("ffn_down", D, F)]
    gemms = []  # (name, M, N, K, per step)
    for name, n, k in linears:
        gemms += [(f"{name} fwd", T, n, k, a.layers), (f"{name} dx", T, k, n, a.layers), (f"{name} dw", n, k, T, a.layers)]
    head = [("head fwd", T, V, D, 1), ("head dx", T, D, V, 1), ("head dw", V, D, T, 1)]
    dev = torch.device("cuda")
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, tokens {T} dim {D} ffn {F} vocab {V} "
          f"layers {a.layers}, accum {a.accum}, median of {a.iters}")
    print(f"{'gemm':16s} {'M':>6s} {'N':>6s} {'K':>6s} {'bf16 ms':>8s} {'fp8 ms':>8s} {'bf16 TF/s':>9s} {'fp8 TF/s':>9s} {'fp8/bf16':>8s}")
    tot16 = tot8 = 0.0
    for name, M, N, K, count in gemms + head:
        x = torch.randn(M, K, device=dev, dtype=torch.bfloat16)
        w = torch.randn(N, K, device=dev, dtype=torch.bfloat16)
        t16 = timed(lambda: x @ w.t(), a.iters)
        x8, w8 = x.to(torch.float8_e4m3fn), w.to(torch.float8_e4m3fn)
        one = torch.ones((), device=dev)
        t8 = timed(lambda: torch._scaled_mm(x8, w8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16,
                                            use_fast_accum=a.accum == "fast"), a.iters)
        fl = 2.0 * M * N * K
        print(f"{name:16s} {M:6d} {N:6d} {K:6d} {t16:8.3f} {t8:8.3f} {fl / t16 / 1e9:9.1f} {fl / t8 / 1e9:9.1f} {t16 / t8:8.2f}")
        tot16 += count * t16
        tot8 += count * (t16 if name.startswith("head") else t8)
        del x, w, x8, w8
    print(f"step's GEMMs: bf16 {tot16:.2f} ms; layers in fp8, head bf16 {tot8:.2f} ms (saves {tot16 - tot8:.2f} ms, "
          f"casts and amax not counted)")


if __name__ == "__main__":
    main()
