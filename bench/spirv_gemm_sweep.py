#!/usr/bin/env python3
"""The SPIR-V cooperative-matrix GEMM at n^3 (4096 by default) over workgroup
tiles (--spirv-gemm-tile=BMxBNxWMxWN[xBK[xSTAGES]]) and both forms
(--spirv-coopmat=khr|nv), f16 and bf16, against torch.matmul (cuBLAS) in the
same call; bench/h200_spirv_gemm.sh runs it on the H200.

Order: cuBLAS first (so every row has its ratio), then f16 and bf16 with
khr over every tile, f16 with nv over every tile, bf16 with nv, each `mlc bench`
with MLC_VK_PIPELINE_STATS=1 (the driver's register count and shared
memory of the pipeline, and its symbol: a tile the code generator refuses
is silently its default, and shows as the same symbol); runs left when
--budget seconds are spent are listed as not run.  Then the fastest
configuration of each dtype and form is checked: `mlc run` at n^3 on random
inputs against torch's f32 product of the same inputs on the GPU.

bf16 GEMMs have a cooperative-matrix kernel in the KHR form only (bf16
matrices, SPV_KHR_bfloat16; the device must list 16x16x16 bf16 -> f32, else
the runtime builds the portable fallback, which the registers column then
shows); with nv they keep the portable kernel, timed once (the default
tile) to show it.

Writes OUT/gemm_sweep.md, OUT/gemm_sweep.json and OUT/logs/*.log; prints
the best configuration per dtype.

Usage: spirv_gemm_sweep.py --mlc MLC --out DIR [--n 4096] [--runs 30]
       [--budget 400] [--tiles "default 128x128x64x64x16x2 ..."] [--forms khr,nv]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

# The sweep, most promising first (see docs/spirv.md, "Choosing the GEMM tile").
# Each fits coop_tile_ok (emit_gemm.c): subgroups of 32 owning WM x WN as
# (WM/16)(WN/16) <= 16 accumulators, whole 16-byte quads per thread, at most
# 48 KiB of shared memory.  threads / shared bytes (the most either operand
# layout needs) / accumulators a subgroup:
TILES = [
    "default",               # 128x256x64x64x32x1: 256 / 30720 / 16 (the code generator's choice)
    "128x128x64x64x16x2",    # 128 / 24576 / 16: llama.cpp's large tile on NVIDIA (4 subgroups of 64x64, slices of 16)
    "128x128x64x64x32x2",    # 128 / 40960 / 16: the same, slices of 32
    "128x128x64x64x32x1",    # 128 / 20480 / 16
    "64x256x64x64x32x1",     # 128 / 25600 / 16
    "256x64x64x64x32x1",     # 128 / 25600 / 16
    "128x256x64x64x16x2",    # 256 / 36864 / 16
    "128x256x64x64x16x1",    # 256 / 18432 / 16
    "128x256x64x32x32x1",    # 512 / 30720 / 8: 128 registers at most (64K / 512)
    "256x128x64x64x32x1",    # 256 / 30720 / 16
    "256x128x64x64x16x2",    # 256 / 36864 / 16
    "128x128x64x32x64x1",    # 256 / 36864 / 8: the default below 132 tiles of 128 x 256
    "128x128x64x64x64x1",    # 128 / 36864 / 16
    "128x128x32x64x32x2",    # 256 / 40960 / 8
    "128x128x64x32x32x2",    # 256 / 40960 / 8
    "128x256x128x32x32x1",   # 256 / 30720 / 16 as 8 x 2
    "128x256x32x128x32x1",   # 256 / 30720 / 16 as 2 x 8
    "256x256x64x64x16x1",    # 512 / 24576 / 16
    "64x128x64x64x32x2",     # 64 / 30720 / 16
    "128x64x64x64x32x2",     # 64 / 30720 / 16
]

BENCH_RE = re.compile(r"median ([0-9.]+) ms, min ([0-9.]+), max ([0-9.]+)")
STATS_RE = re.compile(r"mlc: pipeline (\S+) main0, executable 0 \(CS\):.*?Register Count=(\d+);.*?Shared Memory Size=(\d+);")
TORCH_RE = re.compile(r"torch.matmul (\w+) (\d+)\^3: median ([0-9.]+) ms, min ([0-9.]+)")


def run(cmd, log, timeout, env=None):
    t = time.time()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout, env=env, text=True)
        out, rc = p.stdout, p.returncode
    except subprocess.TimeoutExpired as e:
        out, rc = (e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")) + "\n(timed out)\n", 124
    with open(log, "a") as f:
        f.write("$ %s\n%s(exit %d, %.1f s)\n" % (" ".join(cmd), out, rc, time.time() - t))
    return rc, out


def bench_one(a, dtype, form, tile, logdir):
    model = "bench/gemm_%s.mdl" % dtype
    cmd = [a.mlc, "bench", model, "--target", "spirv", "n=%d" % a.n, "--runs", str(a.runs), "--warmup", "5",
           "--spirv-coopmat=" + form]
    if tile != "default":
        cmd.append("--spirv-gemm-tile=" + tile)
    log = os.path.join(logdir, "%s_%s_%s.log" % (dtype, form, tile))
    env = dict(os.environ, MLC_VK_PIPELINE_STATS="1")
    rc, out = run(cmd, log, 60, env)
    if rc != 0:  # statistics have failed a pipeline before (bench/spirv_gemm_h200.sh): again without
        env.pop("MLC_VK_PIPELINE_STATS")
        rc, out = run(cmd, log, 60, env)
    r = {"dtype": dtype, "form": form, "tile": tile, "rc": rc}
    m = BENCH_RE.search(out)
    if rc == 0 and m:
        r.update(median_ms=float(m.group(1)), min_ms=float(m.group(2)), max_ms=float(m.group(3)))
        r["tflops"] = 2 * a.n ** 3 / (r["median_ms"] * 1e-3) / 1e12
    st = [s for s in STATS_RE.findall(out) if "matmul" in s[0]]
    if st:
        r.update(symbol=st[0][0], registers=int(st[0][1]), shared_bytes=int(st[0][2]))
    return r


def check_one(a, dtype, form, tile, logdir):
    """mlc run at n^3 on random inputs against torch's f32 product on the GPU:
    the largest error over the largest |reference| (f16 and bf16 outputs round
    to 2^-11 and 2^-8 of their value)."""
    import torch
    n = a.n
    tdt = torch.float16 if dtype == "f16" else torch.bfloat16
    g = torch.Generator().manual_seed(0)
    x = (torch.rand(n, n, generator=g) * 2 - 1).to(tdt)
    y = (torch.rand(n, n, generator=g) * 2 - 1).to(tdt)
    d = "/tmp/mlc-gemm-check"
    os.makedirs(d, exist_ok=True)
    x.view(torch.int16).numpy().tofile(d + "/a.bin")
    y.view(torch.int16).numpy().tofile(d + "/b.bin")
    cmd = [a.mlc, "run", "bench/gemm_%s.mdl" % dtype, "--target", "spirv", "n=%d" % n, "--spirv-coopmat=" + form,
           "--input", "a=%s/a.bin" % d, "--input", "b=%s/b.bin" % d, "--output", "output=%s/c.bin" % d]
    if tile != "default":
        cmd.append("--spirv-gemm-tile=" + tile)
    rc, _ = run(cmd, os.path.join(logdir, "check_%s_%s_%s.log" % (dtype, form, tile)), 90)
    r = {"dtype": dtype, "form": form, "tile": tile, "rc": rc}
    if rc == 0:
        import numpy as np
        dev = "cuda" if torch.cuda.is_available() else "cpu"  # cpu: trying the script out on lavapipe
        c = torch.from_numpy(np.fromfile(d + "/c.bin", dtype=np.int16).reshape(n, n)).view(tdt).to(dev).float()
        ref = x.to(dev).float() @ y.to(dev).float()
        r["rel_err"] = float((c - ref).abs().max() / ref.abs().max())
        r["tolerance"] = 2e-3 if dtype == "f16" else 1e-2
        r["ok"] = r["rel_err"] <= r["tolerance"]
    else:
        r["ok"] = False
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mlc", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--budget", type=float, default=400, help="seconds for cuBLAS and the sweep; the checks come after")
    ap.add_argument("--tiles", default=" ".join(TILES))
    ap.add_argument("--forms", default="khr,nv")
    a = ap.parse_args()
    t0 = time.time()
    logdir = os.path.join(a.out, "logs")
    os.makedirs(logdir, exist_ok=True)
    tiles, forms = a.tiles.split(), a.forms.split(",")
    commit = os.environ.get("COMMIT") or subprocess.run(["git", "rev-parse", "--short", "HEAD"], stdout=subprocess.PIPE,
                                                         stderr=subprocess.DEVNULL, text=True).stdout.strip() or "?"
    res = {"script": "bench/h200_spirv_gemm.sh", "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
           "commit": commit, "n": a.n, "runs": a.runs, "cublas": {}, "rows": [], "not_run": [], "checks": []}

    rc, out = run([sys.executable, "bench/spirv_torch.py", "gemm", "--n", str(a.n), "--runs", "50"],
                  os.path.join(logdir, "torch.log"), 120)
    for dt, _, med, mn in TORCH_RE.findall(out):
        key = {"float16": "f16", "bfloat16": "bf16"}[dt]
        res["cublas"][key] = {"median_ms": float(med), "min_ms": float(mn),
                              "tflops": 2 * a.n ** 3 / (float(med) * 1e-3) / 1e12}
    print("cuBLAS: " + ", ".join("%s %.3f ms" % (k, v["median_ms"]) for k, v in res["cublas"].items()), flush=True)

    plan = []
    for form in forms:
        plan += [("f16", form, t) for t in tiles]
        plan += [("bf16", form, t) for t in (tiles if form == "khr" else ["default"])]
    for dtype, form, tile in plan:
        if time.time() - t0 > a.budget:
            res["not_run"].append({"dtype": dtype, "form": form, "tile": tile})
            continue
        r = bench_one(a, dtype, form, tile, logdir)
        cb = res["cublas"].get(dtype)
        if cb and "median_ms" in r:
            r["vs_cublas"] = cb["median_ms"] / r["median_ms"]
        res["rows"].append(r)
        print("%-4s %-3s %-20s %s" % (dtype, form, tile, "%.3f ms, %.1f TFLOP/s%s, %s registers" % (
            r["median_ms"], r["tflops"], ", %.3fx cuBLAS" % r["vs_cublas"] if "vs_cublas" in r else "",
            r.get("registers", "?")) if "median_ms" in r else "failed (exit %d)" % r["rc"]), flush=True)
    # a tile the code generator refused is its default again, and a kernel
    # the device cannot run is its portable fallback: the same pipeline
    first = {}
    for r in res["rows"]:
        if "symbol" in r:
            k = (r["dtype"], r["symbol"])
            if k in first:
                r["same_kernel_as"] = first[k]
            else:
                first[k] = "%s %s" % (r["form"], r["tile"])

    best = {}
    for r in res["rows"]:
        if "median_ms" not in r or "same_kernel_as" in r:
            continue
        for key in (r["dtype"], "%s_%s" % (r["dtype"], r["form"])):
            if key not in best or r["median_ms"] < best[key]["median_ms"]:
                best[key] = r
    res["best"] = {k: {f: v[f] for f in ("dtype", "form", "tile", "median_ms", "tflops", "vs_cublas") if f in v}
                   for k, v in best.items()}
    for key in ["%s_%s" % (d, f) for d in ("f16", "bf16") for f in forms]:
        if key in best:
            b = best[key]
            try:
                c = check_one(a, b["dtype"], b["form"], b["tile"], logdir)
            except Exception as e:  # noqa: BLE001 -- the check must not lose the timings
                c = {"dtype": b["dtype"], "form": b["form"], "tile": b["tile"], "ok": False, "error": str(e)}
            res["checks"].append(c)
            print("check %s %s %s: %s" % (c["dtype"], c["form"], c["tile"], "max error %.2e of max |ref| (tolerance %.0e): %s" % (
                c["rel_err"], c["tolerance"], "ok" if c["ok"] else "FAIL") if "rel_err" in c else "FAIL %s" % c.get("error", "exit %d" % c.get("rc", -1))), flush=True)
    res["seconds"] = time.time() - t0

    with open(os.path.join(a.out, "gemm_sweep.json"), "w") as f:
        json.dump(res, f, indent=1)
    with open(os.path.join(a.out, "gemm_sweep.md"), "w") as f:
        f.write("# SPIR-V cooperative-matrix GEMM %d^3 over tiles and forms, %s, commit %s\n\n" % (a.n, res["date"], commit))
        f.write("cuBLAS (torch.matmul, median of 50): %s\n\n" % ", ".join(
            "%s %.3f ms (%.1f TFLOP/s)" % (k, v["median_ms"], v["tflops"]) for k, v in res["cublas"].items()))
        f.write("mlc: `mlc bench bench/gemm_DT.mdl --target spirv n=%d --runs %d --warmup 5 --spirv-coopmat=FORM "
                "[--spirv-gemm-tile=TILE]`; registers and shared memory as the driver reports the pipeline.\n\n" % (a.n, a.runs))
        f.write("| dtype | form | tile | median ms | min | max | TFLOP/s | vs cuBLAS | registers | shared B | note |\n")
        f.write("|---|---|---|---|---|---|---|---|---|---|---|\n")
        for r in sorted(res["rows"], key=lambda r: (r["dtype"], r.get("median_ms", 1e9))):
            if "median_ms" in r:
                f.write("| %s | %s | %s | %.3f | %.3f | %.3f | %.1f | %s | %s | %s | %s |\n" % (
                    r["dtype"], r["form"], r["tile"], r["median_ms"], r["min_ms"], r["max_ms"], r["tflops"],
                    "%.3f" % r["vs_cublas"] if "vs_cublas" in r else "", r.get("registers", ""), r.get("shared_bytes", ""),
                    "same kernel as %s" % r["same_kernel_as"] if "same_kernel_as" in r else ""))
            else:
                f.write("| %s | %s | %s | | | | | | | | failed (exit %d) |\n" % (r["dtype"], r["form"], r["tile"], r["rc"]))
        for r in res["not_run"]:
            f.write("| %s | %s | %s | | | | | | | | not run (time budget) |\n" % (r["dtype"], r["form"], r["tile"]))
        f.write("\nChecks (`mlc run` at %d^3, uniform inputs in [-1, 1], against torch's f32 product on the GPU):\n\n" % a.n)
        for c in res["checks"]:
            f.write("- %s %s %s: %s\n" % (c["dtype"], c["form"], c["tile"], "max |error| / max |ref| = %.2e (tolerance %.0e): %s" % (
                c["rel_err"], c["tolerance"], "ok" if c["ok"] else "FAIL") if "rel_err" in c else "FAIL (%s)" % c.get("error", "exit %d" % c.get("rc", -1))))
    print("\nbest per dtype:")
    for dt in ("f16", "bf16"):
        b = res["best"].get(dt)
        if b:
            print("  %s: %s %s %.3f ms, %.1f TFLOP/s%s" % (dt, b["form"], b["tile"], b["median_ms"], b["tflops"],
                                                          ", %.3fx cuBLAS" % b["vs_cublas"] if "vs_cublas" in b else ""))
    print("wrote %s/gemm_sweep.md and gemm_sweep.json (%.0f s)" % (a.out, res["seconds"]))
    return 0 if all(c["ok"] for c in res["checks"]) and res["rows"] else 1


if __name__ == "__main__":
    sys.exit(main())
