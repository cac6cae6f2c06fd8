"""mlc's CPU target side by side with PyTorch CPU, at the same thread count,
in one run: the small MiniLLM forward and a 1024^3 f32 GEMM.

Usage: /usr/bin/python3 bench/cpu_bench.py MLC [--threads N] [--runs N]
Prints a markdown table (and the raw outputs) to stdout.

PyTorch is Debian's python3-torch 1.13.  Its torch.matmul goes to the BLAS
it was built with; torch.utils.mkldnn (oneDNN) is timed as well, since that
is the fast path a PyTorch user on this build can reach for.
"""
import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import time

import torch
import torch.utils.mkldnn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "ref"))
from models import MiniLLM  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SMALL = dict(vocab=512, dim=128, layers=2, heads=4)
B, S = 2, 64


def median_ms(fn, warm, runs):
    for _ in range(warm):
        fn()
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def mlc_bench(mlc, model, defines, threads, runs):
    cmd = [mlc, "bench", model, "--target", "cpu", "--threads", str(threads), "--runs", str(runs), *defines]
    r = subprocess.run(cmd, capture_output=True, text=True, check=True)
    print("$", " ".join(cmd))
    print(r.stderr.strip())
    print(r.stdout.strip())
    return float(re.search(r"median ([0-9.]+) ms", r.stdout).group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mlc")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--runs", type=int, default=20)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    print(f"threads {a.threads}, torch {torch.__version__}, {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs")

    rows = []
    defines = [f"{k}={v}" for k, v in SMALL.items()] + [f"batch={B}", f"seq={S}"]
    m_ms = mlc_bench(a.mlc, os.path.join(ROOT, "examples", "minillm.mdl"), defines, a.threads, a.runs)
    torch.manual_seed(0)
    ref = MiniLLM(**SMALL).eval()
    idx = torch.randint(0, SMALL["vocab"], (B, S))
    with torch.no_grad():
        t_ms = median_ms(lambda: ref(idx), 3, a.runs)
    rows.append(("small MiniLLM forward (vocab 512, dim 128, 2 layers, batch 2 x 64)", m_ms, t_ms, "eager"))

    # One training step (forward, backward, AdamW) in fp32: mlc train's per-step times against
    # PyTorch eager with torch.optim.AdamW, after warm-up.
    steps = a.runs + 3
    cmd = [a.mlc, "train", os.path.join(ROOT, "examples", "minillm.mdl"), "--target", "cpu", *defines, "compute=f32",
           "--threads", str(a.threads), "--steps", str(steps)]
    r = subprocess.run(cmd, capture_output=True, text=True, check=True)
    print("$", " ".join(cmd))
    print(r.stdout.strip())
    ms = [float(x) for x in re.findall(r"\(([0-9.]+) ms[,)]", r.stdout)][3:]
    mt_ms = statistics.median(ms)
    opt = torch.optim.AdamW(ref.parameters(), lr=3e-4)
    tgt = torch.randint(0, SMALL["vocab"], (B, S))

    def step():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(ref(idx).view(-1, SMALL["vocab"]), tgt.view(-1))
        loss.backward()
        opt.step()
    tt_ms = median_ms(step, 3, a.runs)
    rows.append(("small MiniLLM train step, fp32, AdamW, eager PyTorch", mt_ms, tt_ms, "eager"))

    g_ms = mlc_bench(a.mlc, os.path.join(ROOT, "bench", "gemm1024.mdl"), [], a.threads, a.runs)
    x, y = torch.randn(1024, 1024), torch.randn(1024, 1024)
    tm_ms = median_ms(lambda: torch.matmul(x, y), 2, max(3, a.runs // 4))
    lin = torch.nn.Linear(1024, 1024, bias=False).eval()
    lin.weight.data = y.t().contiguous()
    mk = torch.utils.mkldnn.to_mkldnn(lin)
    xm = x.to_mkldnn()
    mk_ms = median_ms(lambda: mk(xm), 3, a.runs)
    rows.append(("GEMM f32 1024^3 vs torch.matmul", g_ms, tm_ms, "matmul"))
    rows.append(("GEMM f32 1024^3 vs oneDNN (torch.utils.mkldnn Linear)", g_ms, mk_ms, "oneDNN"))

    print()
    print("| case | mlc ms | PyTorch ms | PyTorch / mlc | mlc GFLOP/s |")
    print("|---|---|---|---|---|")
    for name, m, t, _ in rows:
        gf = f"{2 * 1024 ** 3 / (m * 1e-3) / 1e9:.1f}" if "GEMM" in name else ""
        print(f"| {name} | {m:.3f} | {t:.3f} | {t / m:.2f}x | {gf} |")


if __name__ == "__main__":
    main()
