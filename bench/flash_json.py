#!/usr/bin/env python3
"""bench/results/latest/attention.json from bench/cuda_flash.sh's check call
(attn_NAME_profile.log: `mlc profile bench/attention_bf16.mdl`, forward and
train_step entries; attn_NAME_torch.log: bench/attention_torch.py, whose
profiler table names cuDNN's kernels and their CUDA times) and its model call
(mlc.log, torch.log):

    python3 bench/flash_json.py --check DIR --model DIR --commit C --date D --out bench/results/latest/attention.json

or from bench/gpu_s37.sh's attnab part (--attnab NAME: DIR is its attnab folder, the
build NAME's NAME-CASE.log profiles of the train step, whose forward is
attention_save, the minillm case's second round, and torch-CASE.log; the
d64 case, b8 h16 s1024 d64 not causal, too where it was measured), with
--hardware and --command saying where it ran.

Metrics (ratio > 1: mlc better).  fwd_*: cuDNN's fprop kernel over mlc's
attention kernel (forward entry); bwd_*: cuDNN's backward (its bprop kernel,
compute_dot_do_o and convert_dq_to_16bits, from SDPA's profiler table) over
mlc's attention_grad_saved (its three launches: D = dO.o, the main pass,
dq's conversion), mlc's the average over the profiled runs; the SDPA timings
with PyTorch's own overhead are in the torch logs.
train_step_bf16: torch.compile's step over mlc's (the median of steps 3.. of
`mlc train`).
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gemm_json import HARDWARE, torch_cases, train_step_metric, train_step_ms, write_latest  # noqa: E402

CASES = {"minillm": "b8 h16 s1024 d128, not causal", "causal4096": "b2 h16 s4096 d128, causal",
         "d64causal": "b8 h16 s1000 d64, causal", "d64": "b8 h16 s1024 d64, not causal"}
KEYS = {"minillm": "minillm", "causal4096": "causal_4096", "d64causal": "d64_causal_1000", "d64": "d64_1024"}


def mlc_ms(prof, op):
    return float(re.search(r"^%s%%\S+\s+-\s+\d+\s+[0-9.]+\s+([0-9.]+)" % op, prof, re.M).group(1))


def cudnn_us(t, which):
    """cuDNN's time for one forward (fprop) or one backward: its bprop kernel plus the two launches
    around it (compute_dot_do_o, D = dO.o; convert_dq_to_16bits), as mlc's attention_grad_saved
    counts its own three; CUDA total over calls, from the profiler table."""
    pat = {"fprop": r"cudnn\S*_fprop", "bprop": r"(cudnn\S*_bprop|void cudnn::fusion::(compute_dot_do_o|convert_dq))"}[which]
    us, found = 0.0, False
    for m in re.finditer(r"^(%s)\S*.*?([0-9.]+)us\s+[0-9.]+%%\s+([0-9.]+)us\s+([0-9.]+)us\s+(\d+)\s*$" % pat, t, re.M):
        us, found = us + float(m.group(m.lastindex - 2)), True
    return us if found else None


def main():
    ap = argparse.ArgumentParser()
    for a in ("--check", "--model", "--commit", "--date", "--out"):
        ap.add_argument(a, required=True)
    ap.add_argument("--attnab", help="the build NAME of gpu_s37.sh's attnab logs in --check")
    ap.add_argument("--hardware", default=HARDWARE)
    ap.add_argument("--command", default="bench/cuda_flash.sh check; bench/cuda_flash.sh model (device tool, nvidia-h200)")
    a = ap.parse_args()
    mets = {}
    for name, what in CASES.items():
        if a.attnab:
            pf = "%s/%s-%s.log" % (a.check, a.attnab, name + "-2" if name == "minillm" else name)
            tf = "%s/torch-%s.log" % (a.check, name)
        else:
            pf, tf = "%s/attn_%s_profile.log" % (a.check, name), "%s/attn_%s_torch.log" % (a.check, name)
        if not (os.path.exists(pf) and os.path.exists(tf)) and name == "d64":
            continue
        prof, t = open(pf).read(), open(tf).read()
        fw, bw = mlc_ms(prof, "attention_save" if a.attnab else "attention"), mlc_ms(prof, "attention_grad_saved")
        cf, cb = cudnn_us(t, "fprop"), cudnn_us(t, "bprop")
        key = KEYS[name]
        for k, m, r, kern in (("fwd", fw, cf, "fprop"), ("bwd", bw, cb, "bprop")):
            if r is None:
                continue
            mets["%s_%s" % (k, key)] = {"mlc": m, "ref": r / 1000.0, "ratio": r / 1000.0 / m, "unit": "ms",
                                        "ref_name": "cuDNN through PyTorch SDPA, %s bf16: %s" % (
                                            what, "its fprop kernel" if kern == "fprop" else
                                            "its bprop kernel + compute_dot_do_o + convert_dq_to_16bits")}
    mets["train_step_bf16"] = train_step_metric(train_step_ms(open(a.model + "/mlc.log").read()),
                                                torch_cases(a.model + "/torch.log"))
    write_latest(a.out, a.commit, a.date, a.command, mets, a.hardware)


if __name__ == "__main__":
    main()
