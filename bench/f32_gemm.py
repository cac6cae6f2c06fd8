#!/usr/bin/env python3
"""f32 GEMMs (issue 20): speed against torch.matmul f32 and accuracy against
float64, mlc and PyTorch in the same call.

Speed: each shape of SHAPES through `mlc bench` (median of 20 runs, CUDA
events around the entry point) with --f32-matmul MODE, and through torch
(F.linear / a @ b / a.t() @ b, median of 20 CUDA-event timings) at f32's
default precision ("highest", no TF32) and, for reference, with TF32 on.
ratio = torch f32 time / mlc time (> 1: mlc faster).  Layouts (M x N x K) as
bench/gemm_shapes.py: linear y = x W^T (+ bias) (bench/gemm_f32_linear.mdl),
nn C = A B (gemm_f32_nn.mdl), tn C = A^T B (gemm_f32_tn.mdl).

Accuracy: for each shape of ACCURACY, inputs N(0, 1) in f32, the product
through `mlc run` in every mode (ieee, 3xtf32, tf32; only mlc's default if
this mlc has no --f32-matmul), torch f32 "highest" and torch TF32, each
against the product in float64 of the same f32 inputs:
  max   max |C - C64| / max |C64|  (the measure of the project's tests)
  norm  ||C - C64||_F / ||C64||_F

    python3 bench/f32_gemm.py --mlc build-gpu/mlc --out $OUT [--f32-matmul 3xtf32]
    python3 bench/f32_gemm.py --mlc build/mlc --target cpu --small --out /tmp/f32

Writes f32_gemm.md and f32_gemm.json to --out.
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
from f32_models import ROOT, median_ms, torch_setup, write_safetensors  # noqa: E402

T, D, V = 4000, 768, 8003  # bench/gpt2like_f32.mdl: tokens (4 x 1000), dim, vocab
B, W = 2000, 1000  # bench/mlp_f32.mdl: batch, width

# (what, layout, M, N, K, bias)
SHAPES = [
    ("square", "nn", 4096, 4096, 4096, False),
    ("square linear", "linear", 4096, 4096, 4096, True),
    ("square 8192", "nn", 8192, 8192, 8192, False),
    ("odd linear", "linear", 4000, 3000, 1000, True),
    ("odd nn", "nn", 4000, 3000, 1000, False),
    ("odd tn", "tn", 3000, 1000, 4000, False),
    ("gpt2 in_proj", "linear", T, 3 * D, D, True),
    ("gpt2 c_fc", "linear", T, 4 * D, D, True),
    ("gpt2 c_proj", "linear", T, D, 4 * D, True),
    ("gpt2 lm_head", "linear", T, V, D, False),
    ("gpt2 lm_head dX", "nn", T, D, V, False),
    ("gpt2 lm_head dW", "tn", V, D, T, False),
    ("gpt2 c_fc dW", "tn", 4 * D, D, T, False),
    ("mlp fc", "linear", B, W, W, True),
    ("mlp fc dX", "nn", B, W, W, False),
    ("mlp fc dW", "tn", W, W, B, False),
]
# (layout, M, N, K)
ACCURACY = [
    ("nn", 1024, 1024, 1024),
    ("nn", 1000, 1000, 3000),
    ("nn", 1024, 1024, 8192),
    ("linear", 1000, 3000, 4000),
    ("tn", 1000, 768, 8192),
]
SMALL_SHAPES = [
    ("square", "nn", 256, 256, 256, False),
    ("odd linear", "linear", 100, 60, 70, True),
    ("odd tn", "tn", 60, 50, 130, False),
]
SMALL_ACCURACY = [("nn", 64, 64, 512), ("linear", 50, 70, 300), ("tn", 40, 30, 1000)]
MODES = ["ieee", "3xtf32", "tf32"]
COLUMNS = ["mlc default"] + ["mlc " + m for m in MODES] + ["torch f32", "torch tf32"]


def mdl(layout):
    return os.path.join(ROOT, "bench", "gemm_f32_%s.mdl" % layout)


def dims(layout, M, N, K, bias=False):
    d = ["M=%d" % M, "N=%d" % N, "K=%d" % K]
    return d + (["bias=%s" % ("true" if bias else "false")] if layout == "linear" else [])


def mlc(args, cmd, log):
    cmd = [args.mlc] + cmd
    r = subprocess.run(cmd, capture_output=True, text=True)
    log.write("$ " + " ".join(cmd[1:]) + "\n" + r.stdout + r.stderr)
    log.flush()
    if r.returncode:
        raise RuntimeError("mlc failed (%d): %s\n%s%s" % (r.returncode, " ".join(cmd), r.stdout, r.stderr[-3000:]))
    return r.stdout + r.stderr


def mode_args(mode):
    return ["--f32-matmul", mode] if mode else []


def mlc_ms(args, layout, M, N, K, bias, log):
    out = mlc(args, ["bench", mdl(layout), "--target", args.target, "--runs", "20", "--warmup", "3"]
              + mode_args(args.f32_matmul) + dims(layout, M, N, K, bias), log)
    return float(re.search(r"median ([0-9.]+) ms", out).group(1))


def operands(layout, M, N, K, bias, dev, seed=0):
    g = torch.Generator(device=dev).manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, device=dev)
    if layout == "linear":
        return r(M, K), r(N, K), (r(N) if bias else None)
    if layout == "nn":
        return r(M, K), r(K, N), None
    return r(K, M), r(K, N), None


def torch_gemm(layout, a, b, bias):
    if layout == "linear":
        return F.linear(a, b, bias)
    return a @ b if layout == "nn" else a.t() @ b


def torch_ms(layout, M, N, K, bias, dev, runs):
    """torch's time at f32 ("highest"), and with TF32 on the GPU."""
    a, b, c = operands(layout, M, N, K, bias, dev)
    f32 = median_ms(lambda: torch_gemm(layout, a, b, c), runs, 3, dev)
    if dev != "cuda":
        return f32, None
    torch.set_float32_matmul_precision("high")
    tf32 = median_ms(lambda: torch_gemm(layout, a, b, c), runs, 3, dev)
    torch.set_float32_matmul_precision("highest")
    return f32, tf32


def errors(c, c64):
    d = c.double() - c64
    return dict(max=(d.abs().max() / c64.abs().max()).item(), norm=(d.norm() / c64.norm()).item())


def accuracy(args, dev, modes, log, failed):
    rows = []
    work = os.path.join(args.work, "acc")
    os.makedirs(work, exist_ok=True)
    for layout, M, N, K in (SMALL_ACCURACY if args.small else ACCURACY):
        a, b, _ = operands(layout, M, N, K, False, "cpu", seed=1)
        c64 = torch_gemm(layout, a.to(dev).double(), b.to(dev).double(), None)
        row = dict(layout=layout, M=M, N=N, K=K, err={})
        files = ["--output", "output=" + os.path.join(work, "c.bin")]
        if layout == "linear":
            write_safetensors(os.path.join(work, "w.safetensors"), {"lin.weight": b.contiguous()}, {"format": "pt"})
            a.numpy().tofile(os.path.join(work, "x.bin"))
            files += ["--weights", os.path.join(work, "w.safetensors"), "--input", "x=" + os.path.join(work, "x.bin")]
        else:
            a.numpy().tofile(os.path.join(work, "a.bin"))
            b.numpy().tofile(os.path.join(work, "b.bin"))
            files += ["--input", "a=" + os.path.join(work, "a.bin"), "--input", "b=" + os.path.join(work, "b.bin")]
        for mode in modes:
            try:
                mlc(args, ["run", mdl(layout), "--target", args.target] + mode_args(mode) + dims(layout, M, N, K) + files, log)
            except RuntimeError as e:
                print("FAIL %s" % e, flush=True)
                failed.append("run %s %s %dx%dx%d" % (mode, layout, M, N, K))
                continue
            c = torch.from_file(os.path.join(work, "c.bin"), size=M * N, dtype=torch.float32).view(M, N)
            row["err"]["mlc " + (mode or "default")] = errors(c.to(dev), c64)
        ad, bd = a.to(dev), b.to(dev)
        row["err"]["torch f32"] = errors(torch_gemm(layout, ad, bd, None), c64)
        if dev == "cuda":
            torch.set_float32_matmul_precision("high")  # TF32
            row["err"]["torch tf32"] = errors(torch_gemm(layout, ad, bd, None), c64)
            torch.set_float32_matmul_precision("highest")
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def has_f32_flag(mlc_bin):
    r = subprocess.run([mlc_bin, "--help"], capture_output=True, text=True)
    return "--f32-matmul" in r.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mlc", required=True)
    ap.add_argument("--target", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--f32-matmul", help="the mode the speed table runs mlc in (default: mlc's own)")
    ap.add_argument("--small", action="store_true", help="tiny shapes (the CPU)")
    ap.add_argument("--skip-speed", action="store_true")
    ap.add_argument("--skip-accuracy", action="store_true")
    ap.add_argument("--work", default="/tmp/f32_gemm")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    dev = "cuda" if args.target == "cuda" else "cpu"
    env = torch_setup(dev)
    modes = MODES if has_f32_flag(args.mlc) else [None]
    print(env + "; accuracy modes: %s" % ", ".join(m or "mlc's default" for m in modes), flush=True)
    speed, acc, failed = [], [], []

    def save():  # after each part, so a timeout keeps what was done
        out = dict(torch=torch.__version__, device=torch.cuda.get_device_name() if dev == "cuda" else "cpu",
                   target=args.target, f32_matmul=args.f32_matmul, small=args.small, speed=speed, accuracy=acc, failed=failed)
        with open(os.path.join(args.out, "f32_gemm.json"), "w") as f:
            json.dump(out, f, indent=1)
        write_md(os.path.join(args.out, "f32_gemm.md"), env, args, speed, acc, failed)

    with open(os.path.join(args.out, "f32_gemm_mlc.log"), "w") as log:
        if not args.skip_speed:
            for what, layout, M, N, K, bias in (SMALL_SHAPES if args.small else SHAPES):
                try:
                    tm = mlc_ms(args, layout, M, N, K, bias, log)
                except RuntimeError as e:  # say so, go on with the next shape
                    print("FAIL %s" % e, flush=True)
                    failed.append("bench %s %s %dx%dx%d" % (what, layout, M, N, K))
                    continue
                tr, tt = torch_ms(layout, M, N, K, bias, dev, 20)
                fl = 2.0 * M * N * K
                row = dict(what=what, layout=layout, M=M, N=N, K=K, bias=bias, mlc_ms=tm, torch_ms=tr, torch_tf32_ms=tt,
                           mlc_tflops=fl / tm / 1e9, torch_tflops=fl / tr / 1e9, ratio=tr / tm)
                speed.append(row)
                print(json.dumps(row), flush=True)
            save()
        if not args.skip_accuracy:
            acc = accuracy(args, dev, modes, log, failed)
            save()
    if speed:
        worst = min(speed, key=lambda r: r["ratio"])
        print("speed: worst %s %.3f, median %.3f" % (worst["what"], worst["ratio"],
                                                     statistics.median(r["ratio"] for r in speed)), flush=True)
    if failed:
        print("FAIL: mlc failed on " + "; ".join(failed))
    return 1 if failed else 0


def write_md(path, env, args, speed, acc, failed):
    with open(path, "w") as f:
        f.write("%s; mlc --target %s\n" % (env, args.target))
        if speed:
            f.write("\nSpeed, mlc --f32-matmul %s against torch f32 (\"highest\"); ratio = torch f32 ms / mlc ms\n\n"
                    % (args.f32_matmul or "(mlc's default)"))
            f.write("| GEMM | layout | M x N x K | bias | mlc ms | torch f32 ms | torch tf32 ms | mlc TFLOP/s | "
                    "torch f32 TFLOP/s | ratio |\n|---|---|---|---|---|---|---|---|---|---|\n")
            for r in speed:
                tt = "%.3f" % r["torch_tf32_ms"] if r["torch_tf32_ms"] else "-"
                f.write("| %s | %s | %dx%dx%d | %s | %.3f | %.3f | %s | %.1f | %.1f | %.2f |\n" % (
                    r["what"], r["layout"], r["M"], r["N"], r["K"], "yes" if r["bias"] else "", r["mlc_ms"],
                    r["torch_ms"], tt, r["mlc_tflops"], r["torch_tflops"], r["ratio"]))
            worst = min(speed, key=lambda r: r["ratio"])
            f.write("\nworst: %s %.2f; median %.2f\n" % (worst["what"], worst["ratio"],
                                                       statistics.median(r["ratio"] for r in speed)))
        if acc:
            cols = [c for c in COLUMNS if any(c in r["err"] for r in acc)]
            f.write("\nAccuracy against float64 (inputs N(0,1) in f32): max |C - C64| / max |C64|, and "
                    "||C - C64||_F / ||C64||_F in brackets\n\n| layout | M x N x K | %s |\n|---|---|%s\n" % (
                        " | ".join(cols), "---|" * len(cols)))
            for r in acc:
                f.write("| %s | %dx%dx%d | %s |\n" % (r["layout"], r["M"], r["N"], r["K"], " | ".join(
                    "%.2e (%.2e)" % (r["err"][c]["max"], r["err"][c]["norm"]) if c in r["err"] else "-" for c in cols)))
        if failed:
            f.write("\nmlc failed on: %s (see f32_gemm_mlc.log)\n" % "; ".join(failed))


if __name__ == "__main__":
    sys.exit(main())
