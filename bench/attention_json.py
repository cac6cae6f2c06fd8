#!/usr/bin/env python3
"""bench/results/latest/attention.json from bench/cuda_gemm.sh's attn call
(attn_profile.log: `mlc profile bench/attention_bf16.mdl`, forward and
train_step; attn_torch.log: bench/attention_torch.py) and its model call
(mlc.log, torch.log):

    python3 bench/attention_json.py --attn DIR --model DIR --commit C --date D --out bench/results/latest/attention.json

Metrics (ratio > 1: mlc better): fwd_minillm and bwd_minillm (SDPA's time over
mlc's: the forward kernel of the forward entry; the gradient kernel
attention_grad_saved against SDPA's forward+backward less its forward), and
train_step_bf16 (torch.compile's step over mlc's, mlc's the median of steps
3.. of `mlc train`).  The causal 4096 keys are written only when measured.
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gemm_json import torch_cases, train_step_metric, train_step_ms, write_latest  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    for a in ("--attn", "--model", "--commit", "--date", "--out"):
        ap.add_argument(a, required=True)
    a = ap.parse_args()
    prof = open(a.attn + "/attn_profile.log").read()
    fwd = float(re.search(r"^attention%\S+\s+-\s+\d+\s+[0-9.]+\s+([0-9.]+)", prof, re.M).group(1))
    bwd = float(re.search(r"^attention_grad_saved%\S+\s+-\s+\d+\s+[0-9.]+\s+([0-9.]+)", prof, re.M).group(1))
    t = open(a.attn + "/attn_torch.log").read()
    m = re.search(r"forward ([0-9.]+) ms .*forward\+backward ([0-9.]+) ms", t)
    sf, sfb = float(m.group(1)), float(m.group(2))
    backend = "cuDNN" if "cudnn_generated" in t else "flash" if "flash" in t.split("\n", 1)[1] else "SDPA"
    step = train_step_ms(open(a.model + "/mlc.log").read())
    tc = torch_cases(a.model + "/torch.log")
    ref = "PyTorch SDPA (%s), b8 h16 s1024 d128 bf16, not causal" % backend
    mets = {
        "fwd_minillm": {"mlc": fwd, "ref": sf, "ref_name": ref, "ratio": sf / fwd, "unit": "ms"},
        "bwd_minillm": {"mlc": bwd, "ref": sfb - sf, "ref_name": ref + ", forward+backward less forward",
                        "ratio": (sfb - sf) / bwd, "unit": "ms"},
        "train_step_bf16": train_step_metric(step, tc),
    }
    write_latest(a.out, a.commit, a.date, "bench/cuda_gemm.sh attn; bench/cuda_gemm.sh model (device tool, nvidia-h200)", mets)


if __name__ == "__main__":
    main()
