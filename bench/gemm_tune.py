#!/usr/bin/env python3
"""The measurements behind the bf16/f16 wgmma GEMM's tile table
(codegen/cuda/emit_gemm.c, gemm_pick): every shape of bench/gemm_shapes.py
under each configuration given, through --cuda-gemm-tile BN,ST,OCC,LAG
(128 x BN tiles, ST stages, OCC blocks a multiprocessor, LAG k-tiles of
wgmma left running), beside cuBLAS (torch) in the same call:

    python3 bench/gemm_tune.py --mlc build-gpu/mlc --out $OUT \\
        --configs "default;128,3,2,0;256,4,1,0" [--set small]

"default" is gemm_pick's own choice.  The kernels are compiled first, 8 at
a time (`mlc bench --runs 1`, which fills the kernel cache); then each is
timed alone (`mlc bench`'s median of 20 runs).  Writes gemm_tune.md and
gemm_tune.json (ms per configuration; ratio = cuBLAS / best mlc).
"""
import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gemm_shapes import SHAPES, SMALL, torch_ms  # noqa: E402


def bench_args(mlc, root, layout, M, N, K, bias, runs):
    a = [mlc, "bench", os.path.join(root, "bench", f"gemm_{layout}.mdl"), "--target", "cuda",
         f"M={M}", f"N={N}", f"K={K}", "--runs", str(runs), "--warmup", "3" if runs > 1 else "0"]
    if layout == "linear":
        a.append(f"bias={'true' if bias else 'false'}")
    return a


def run(args, cfg):
    if cfg != "default":
        args = args + ["--cuda-gemm-tile", cfg]
    p = subprocess.run(args, capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mlc", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--configs", default="default;128,3,2,0;128,3,2,1;256,4,1,0")
    ap.add_argument("--only", default="", help="comma-separated names of SHAPES (default: all)")
    ap.add_argument("--set", default="model", choices=["model", "small"],
                    help="model: the MiniLLM's shapes and the odd ones (SHAPES); small: under a wave of tiles (SMALL)")
    a = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cfgs = a.configs.split(";")
    only = set(s for s in a.only.split(",") if s)
    shapes = [s for s in (SMALL if a.set == "small" else SHAPES) if not only or s[0] in only]
    os.makedirs(a.out, exist_ok=True)
    log = open(os.path.join(a.out, "gemm_tune_mlc.log"), "w")
    jobs = [(s, c) for s in shapes for c in cfgs]
    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        for (s, c), (rc, text) in zip(jobs, ex.map(lambda j: run(bench_args(a.mlc, root, *j[0][1:], 1), j[1]), jobs)):
            if rc:
                log.write(f"compile {s[0]} {c}: rc {rc}\n{text}\n")
    rows = []
    for s in shapes:
        what, layout, M, N, K, bias = s
        ms = {}
        for c in cfgs:
            rc, text = run(bench_args(a.mlc, root, layout, M, N, K, bias, 20), c)
            log.write(f"## {what} {c}\n{text}\n")
            m = re.search(r"median ([0-9.]+) ms", text)
            ms[c] = float(m.group(1)) if rc == 0 and m else None
        tr = torch_ms(layout, M, N, K, bias)
        ok = {c: v for c, v in ms.items() if v}
        best = min(ok, key=ok.get) if ok else None
        row = dict(what=what, layout=layout, M=M, N=N, K=K, bias=bias, mlc_ms=ms, cublas_ms=tr, best=best,
                   ratio=tr / ok[best] if best else None, ratio_default=tr / ms["default"] if ms.get("default") else None)
        rows.append(row)
        print(json.dumps(row), flush=True)
    json.dump(rows, open(os.path.join(a.out, "gemm_tune.json"), "w"), indent=1)
    with open(os.path.join(a.out, "gemm_tune.md"), "w") as f:
        f.write("| GEMM | layout | M x N x K | " + " | ".join(cfgs) + " | cuBLAS | best | cuBLAS/best |\n")
        f.write("|---|---|---|" + "---|" * len(cfgs) + "---|---|---|\n")
        for r in rows:
            cells = " | ".join(f"{r['mlc_ms'][c]:.3f}" if r["mlc_ms"][c] else "fail" for c in cfgs)
            f.write(f"| {r['what']} | {r['layout']} | {r['M']}x{r['N']}x{r['K']} | {cells} | {r['cublas_ms']:.3f} | "
                    f"{r['best']} | {r['ratio']:.2f} |\n" if r["best"] else f"| {r['what']} | all failed |\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
