#!/usr/bin/env python3
"""bench/results/latest/gemm.json from the logs of bench/cuda_gemm.sh's two
calls (check: gemm_shapes.json; model: mlc.log and torch.log):

    python3 bench/gemm_json.py --shapes DIR/gemm_shapes.json --mlc-log DIR/mlc.log \
        --torch-log DIR/torch.log --commit C --date D --out bench/results/latest/gemm.json

Metrics (ratio > 1: mlc better): worst_shape and median_shape (cuBLAS time
over mlc's, over every shape of the sweep), forward_bf16 (PyTorch eager's
forward over mlc's), train_step_bf16 (torch.compile's step over mlc's, mlc's
the median of steps 3.. of `mlc train`), and one entry per shape.
"""
import argparse
import json
import re
import statistics


def torch_cases(path):
    """torch_baseline.py's JSON lines, by case."""
    return {r["case"]: r for r in (json.loads(l) for l in open(path) if l.startswith("{"))}


def train_step_ms(log):
    """The median of steps 3.. of `mlc train` in log (its text)."""
    return statistics.median(float(ms) for n, ms in re.findall(r"step (\d+): loss [-0-9.e]+ \(([0-9.]+) ms[,)]", log)
                             if int(n) >= 3)


HARDWARE = "NVIDIA H200 (one GPU), torch 2.11.0+cu130"


def train_step_metric(step, tc):
    """train_step_bf16: torch.compile's step (torch_baseline.py's train_compile case) over mlc's."""
    ref = tc["train_compile"]["step_ms"]
    return {"mlc": step, "ref": ref, "ref_name": "torch.compile", "ratio": ref / step, "unit": "ms"}


def write_latest(path, commit, date, command, metrics, hardware=HARDWARE):
    """A bench/results/latest/NAME.json, in DEVELOPERS.md's format; prints the ratios."""
    with open(path, "w") as f:
        json.dump({"commit": commit, "date": date, "hardware": hardware, "command": command, "metrics": metrics}, f, indent=1)
        f.write("\n")
    print(json.dumps({k: round(v["ratio"], 3) for k, v in metrics.items()}))


def main():
    ap = argparse.ArgumentParser()
    for a in ("--shapes", "--mlc-log", "--torch-log", "--commit", "--date", "--out"):
        ap.add_argument(a, required=True)
    ap.add_argument("--hardware", default=HARDWARE)
    ap.add_argument("--command", default="bench/cuda_gemm.sh check; bench/cuda_gemm.sh model (device tool, nvidia-h200)")
    a = ap.parse_args()
    rows = json.load(open(a.shapes))
    log = open(a.mlc_log).read()
    tc = torch_cases(a.torch_log)
    fwd = float(re.search(r"minillm forward on cuda: median ([0-9.]+) ms", log).group(1))
    step = train_step_ms(log)
    worst = min(rows, key=lambda r: r["ratio"])
    med = statistics.median(r["ratio"] for r in rows)
    m = {
        "worst_shape": {"mlc": worst["mlc_ms"], "ref": worst["cublas_ms"], "ref_name": "cuBLAS (torch) " + worst["what"],
                        "ratio": worst["ratio"], "unit": "ms"},
        "median_shape": {"mlc": None, "ref": None, "ref_name": "cuBLAS (torch), median over %d shapes" % len(rows),
                         "ratio": med, "unit": "ratio"},
        "forward_bf16": {"mlc": fwd, "ref": tc["infer_eager"]["step_ms"], "ref_name": "PyTorch eager",
                         "ratio": tc["infer_eager"]["step_ms"] / fwd, "unit": "ms"},
        "forward_bf16_compile": {"mlc": fwd, "ref": tc["infer_compile"]["step_ms"], "ref_name": "torch.compile",
                                 "ratio": tc["infer_compile"]["step_ms"] / fwd, "unit": "ms"},
        "train_step_bf16": {"mlc": step, "ref": tc["train_compile"]["step_ms"], "ref_name": "torch.compile",
                            "ratio": tc["train_compile"]["step_ms"] / step, "unit": "ms"},
        "train_step_bf16_eager": {"mlc": step, "ref": tc["train_eager"]["step_ms"], "ref_name": "PyTorch eager",
                                  "ratio": tc["train_eager"]["step_ms"] / step, "unit": "ms"},
    }
    for r in rows:
        key = "%s_%s_%dx%dx%d" % (r["what"].replace(" ", "_"), r["layout"], r["M"], r["N"], r["K"])
        m[key] = {"mlc": r["mlc_ms"], "ref": r["cublas_ms"], "ref_name": "cuBLAS (torch)", "ratio": r["ratio"], "unit": "ms"}
    out = {"commit": a.commit, "date": a.date, "hardware": a.hardware,
           "command": a.command, "metrics": m}
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(json.dumps({k: round(v["ratio"], 3) for k, v in m.items() if k in
                      ("worst_shape", "median_shape", "forward_bf16", "forward_bf16_compile", "train_step_bf16",
                       "train_step_bf16_eager")}))


if __name__ == "__main__":
    main()
