#!/usr/bin/env python3
"""Replays the verdict rules of runtime/profile.c and runtime/ncu.c on a
measured `mlc profile --ncu` run (its printed table, NAME.md, and its
--ncu-json, NAME.json), so that a change of the rules can be judged on data
already measured before the GPU runs it again.  It measures nothing: the
times, FLOP/s, GB/s and ncu's percentages are those of the run.

    python3 bench/ncu_rule_replay.py bench/results/ncu-2026-12-02b/minillm_l2 ...

Rules replayed (as in the code since commit 660e320): mlc's verdict and
ncu's are the seed's rule (issue 24) on (compute %, memory %): compute when
compute > 75 and memory < 50, memory when memory > 75 and compute < 25,
else latency; mlc's compute % is FLOP/s x products over its unit's peak
(datasheet: fp32 66.9, bf16 989.4, tf32 494.7 TFLOP/s), its memory % bytes/s
over 4.8 TB/s, a call under 5 us is latency; ncu's memory % is DRAM
throughput.  --fused-unit BF16|TF32X3 gives a fused group led by a GEMM
(FLOP/B over 100) that unit, as codegen/plan.c mlc_plan_mm_of now does (the
run being replayed judged it on fp32).
"""
import argparse
import json
import re

UNIT = {"fp32": 66.9e12, "bf16": 989.4e12, "tf32": 494.7e12}


def rate(s):
    m = re.match(r"([0-9.]+)([GTM]?)", s)
    return float(m.group(1)) * {"G": 1e9, "T": 1e12, "M": 1e6, "": 1}[m.group(2)]


def timed_table(md):
    """The rows of the second table (the timed run; the first is the run under ncu)."""
    lines = open(md).read().split("\n")
    start = [i for i, l in enumerate(lines) if l.startswith("Name ")][1]
    rows = {}
    for l in lines[start + 1:]:
        if not re.match(r"^[a-z_]+%\d+", l):
            break
        f = l.split()
        rows[f[0]] = (float(f[4]), rate(f[6]), float(f[7]), float(f[8]), f[9])
    return rows


def rule(compute, memory):
    if compute > 75 and memory < 50:
        return "compute"
    if memory > 75 and compute < 25:
        return "memory"
    return "latency"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="path without .md/.json")
    ap.add_argument("--fused-unit", action="append", default=[], help="RUN=bf16 or RUN=tf32x3")
    a = ap.parse_args()
    fused = dict(x.split("=") for x in a.fused_unit)
    total = agreed_total = 0
    for base in a.runs:
        rows, d = timed_table(base + ".md"), json.load(open(base + ".json"))
        agreed, out = 0, []
        for k in d["kernels"]:
            avg_ms, flops, gbs, intensity, unit = rows[k["step"]]
            u, prod = (unit.split("x")[0], int(unit.split("x")[1])) if "x" in unit else (unit, 1)
            fu = fused.get(base.rsplit("/", 1)[-1])
            if k["step"].startswith("fused") and intensity > 100 and fu:
                u, prod = ("bf16", 1) if fu == "bf16" else ("tf32", 3)
            pc, pm = 100 * flops / (UNIT[u] / prod), 100 * gbs * 1e9 / 4.8e12
            mv = "latency" if avg_ms * 1e-3 < 5e-6 else rule(pc, pm)
            nv = rule(k["sm_pct"], k["dram_pct"] if k["dram_pct"] >= 0 else k["mem_pct"])
            agreed += mv == nv
            out.append("| %s | %s | %.1f | %.1f | %s | %.1f | %.1f | %s |" % (
                k["step"], mv, pc, pm, nv, k["sm_pct"], k["dram_pct"], "" if mv == nv else "**disagree**"))
        n = len(d["kernels"])
        total, agreed_total = total + n, agreed_total + agreed
        print("## %s: %d of %d agree (%.1f%%)\n" % (base, agreed, n, 100.0 * agreed / n))
        print("| step | mlc | compute % | memory % | ncu | SM % | DRAM % | |\n|---|---|---|---|---|---|---|---|")
        print("\n".join(out) + "\n")
    print("all: %d of %d (%.1f%%)" % (agreed_total, total, 100.0 * agreed_total / total))


if __name__ == "__main__":
    main()
