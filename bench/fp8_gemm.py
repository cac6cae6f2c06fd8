#!/usr/bin/python3
"""mlc's FP8 GEMM (scaled_mm on CUDA, issue 30) at the MiniLLM train step's
shapes, beside cuBLAS's through torch._scaled_mm and cuBLAS's bf16 GEMM, in
one process on the GPU.

For each GEMM (every linear's forward, dx and dw; the head's): e4m3 codes of
a [M, K] and b [N, K] (dx and dw: a in e5m2, as the fp8 pass quantises
gradients), written as raw files; `mlc_opcheck --op scaled_mm --target cuda
--bench N` runs mlc's kernel on them (bf16 out, per-tensor amaxes 1.0) and
gives its median; torch._scaled_mm (use_fast_accum=False, bf16 out) and
x @ w.t() in bf16 are timed with CUDA events (median of N).  mlc's output is
checked against torch._scaled_mm's f32 output of the same codes: the largest
difference over the largest |ref| (the two accumulate in different orders on
the same tensor cores; bf16's rounding is 2^-8).

Usage: fp8_gemm.py OPCHECK WORKDIR [--iters 20] [--only NAME] [--json F]
Prints one row per GEMM and the step's total (12 layers, head in bf16).
"""
import argparse
import json
import os
import subprocess

import torch

from fp8_ceiling import timed  # bench/: CUDA events, the median of iters


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("opcheck")
    ap.add_argument("work")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--only", default="")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    T, D, F, V, L = 8192, 2048, 8192, 32000, 12
    gemms = []
    for name, n, k in [("in_proj", 3 * D, D), ("out_proj", D, D), ("ffn_up", F, D), ("ffn_down", D, F)]:
        gemms += [(f"{name}_fwd", T, n, k, False), (f"{name}_dx", T, k, n, True), (f"{name}_dw", n, k, T, True)]
    gemms += [("head_fwd", T, V, D, False)]
    dev = torch.device("cuda")
    os.makedirs(a.work, exist_ok=True)
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, median of {a.iters}")
    print(f"{'gemm':14s} {'M':>6s} {'N':>6s} {'K':>6s} {'mlc ms':>8s} {'cuBLAS8':>8s} {'bf16':>8s} {'mlc TF/s':>9s} "
          f"{'vs fp8':>7s} {'vs bf16':>7s} {'err':>8s}")
    rows = {}
    tot = {"mlc": 0.0, "fp8": 0.0, "bf16": 0.0}
    for name, M, N, K, grad in gemms:
        if a.only and a.only not in name:
            continue
        ta = torch.float8_e5m2 if grad else torch.float8_e4m3fn
        x = (torch.randn(M, K, device=dev) * 4).to(ta)
        w = (torch.randn(N, K, device=dev) * 4).to(torch.float8_e4m3fn)
        d = os.path.join(a.work, name)
        os.makedirs(d, exist_ok=True)
        files = {"a": x, "b": w, "aa": torch.tensor(448.0 if not grad else 57344.0), "ab": torch.tensor(448.0)}
        cmd = [a.opcheck, "--op", "scaled_mm", d, "--dtype", "bf16", "--target", "cuda", "--bench", str(a.iters),
               "--in", f"a:f8{'e5m2' if grad else 'e4m3'}[{M}, {K}]", "--in", f"b:f8e4m3[{N}, {K}]",
               "--in", "aa:f32[]", "--in", "ab:f32[]"]
        for n, t in files.items():
            p = os.path.join(d, f"{n}.raw")
            (t.view(torch.uint8) if t.dtype != torch.float32 else t).cpu().numpy().tofile(p)
            cmd += ["--input-file", f"{n}={p}"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            print(f"{name}: mlc_opcheck failed ({r.returncode}): {r.stderr[-800:]}")
            continue
        med = None
        with open(os.path.join(d, "manifest.txt")) as f:
            for line in f:
                if line.startswith("bench "):
                    med = float(line.split()[1]) * 1e3
        got = torch.from_numpy(__import__("numpy").fromfile(os.path.join(d, "output.output.bin"), dtype="uint16").astype("int32"))
        got = (got << 16).view(torch.float32).reshape(M, N).to(dev)
        one = torch.ones((), device=dev)
        # amax 448 (57344 for e5m2) is scale 1: the codes' own values
        ref = torch._scaled_mm(x, w.t(), scale_a=one, scale_b=one, out_dtype=torch.float32)
        err = float((got - ref).abs().max() / ref.abs().max())
        t8 = timed(lambda: torch._scaled_mm(x, w.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16), a.iters)
        xb, wb = x.to(torch.bfloat16), w.to(torch.bfloat16)
        t16 = timed(lambda: xb @ wb.t(), a.iters)
        fl = 2.0 * M * N * K
        print(f"{name:14s} {M:6d} {N:6d} {K:6d} {med:8.3f} {t8:8.3f} {t16:8.3f} {fl / med / 1e9:9.1f} {t8 / med:7.2f} "
              f"{t16 / med:7.2f} {err:8.1e}", flush=True)
        rows[name] = {"M": M, "N": N, "K": K, "mlc_ms": med, "cublas_fp8_ms": t8, "cublas_bf16_ms": t16, "err": err}
        count = 1 if name.startswith("head") else L
        tot["mlc"] += count * med
        tot["fp8"] += count * t8
        tot["bf16"] += count * t16
        for n in files:
            os.remove(os.path.join(d, f"{n}.raw"))
    print(f"step's layer GEMMs and head forward: mlc fp8 {tot['mlc']:.2f} ms, cuBLAS fp8 {tot['fp8']:.2f}, "
          f"cuBLAS bf16 {tot['bf16']:.2f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rows": rows, "total": tot}, f, indent=1)


if __name__ == "__main__":
    main()
