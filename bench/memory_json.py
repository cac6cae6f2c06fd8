#!/usr/bin/env python3
"""bench/results/latest/memory.json and a markdown table from bench/cuda_memory.sh's logs.

    bench/memory_json.py LOGDIR COMMIT DATE > table.md      (writes bench/results/latest/memory.json)

peak_gb_seed: mlc = the device memory its runtime held in the seed MiniLLM's 20 train steps
(parameters, AdamW state, arenas, scratch; what torch.cuda.max_memory_allocated counts for
PyTorch), ref = PyTorch eager's max_memory_allocated in the same call.
step_time_vs_before: mlc = this build's median step, ref = the old build's (build-gpu-old), each the
median over its two runs; ratio = old / new (> 1: faster now).
"""
import json, os, statistics, sys

logdir, commit, date = sys.argv[1:4]
runs = {}
for line in open(os.path.join(logdir, "memory.log")):
    if line.startswith("{"):
        r = json.loads(line)
        runs[r["name"]] = r
torch = {}
for line in open(os.path.join(logdir, "torch.log")):
    try:
        r = json.loads(line)
    except ValueError:
        continue
    if isinstance(r, dict) and "case" in r:
        torch[r["case"]] = r
env = open(os.path.join(logdir, "env.log")).read().splitlines()
gpu = env[-1].split(",")
hardware = "%s (one GPU), driver %s" % (gpu[0].strip(), gpu[1].strip())

def med(names, key):
    v = [runs[n][key] for n in names if n in runs and runs[n][key] is not None]
    return statistics.median(v) if v else None

new_ms, old_ms = med(["new1", "new2"], "step_ms"), med(["old1", "old2"], "step_ms")
held, ref = runs["new1"]["held_gb"], torch["train_eager"]["peak_gb"]
metrics = {
    "peak_gb_seed": {"mlc": held, "ref": ref, "ratio": ref / held, "unit": "GB",
                     "ref_name": "PyTorch eager (torch_baseline.py train, torch.cuda.max_memory_allocated), same call; "
                                 "mlc: the device memory its runtime held (parameters, AdamW state, arenas, scratch), "
                                 "no recomputation; nvidia-smi saw %.2f GB more than before the run (CUDA context included)"
                                 % runs["new1"]["measured_gb"]},
    "peak_gb_budget14": {"mlc": runs["budget14"]["held_gb"], "ref": ref, "ratio": ref / runs["budget14"]["held_gb"],
                         "unit": "GB", "ref_name": "--memory-budget 14GB (recomputation) against PyTorch eager's peak"},
}
if old_ms is not None:  # only where build-gpu-old ran
    metrics["step_time_vs_before"] = {
        "mlc": new_ms, "ref": old_ms, "ratio": old_ms / new_ms, "unit": "ms",
        "ref_name": "the same seed MiniLLM train step built at %s (before this change), same call, "
                    "median of steps 3-20 of two runs each" % env[1].split(":")[-1].strip()}
for b in ["budget14", "budget10"]:
    if b in runs:
        metrics["peak_gb_" + b] = {"mlc": runs[b]["held_gb"], "ref": ref, "ratio": ref / runs[b]["held_gb"], "unit": "GB",
                                   "ref_name": "--memory-budget %sGB (recomputation) against PyTorch eager's peak" % b[6:]}
        metrics["step_time_" + b] = {"mlc": runs[b]["step_ms"], "ref": new_ms, "ratio": new_ms / runs[b]["step_ms"],
                                     "unit": "ms", "ref_name": "the step under --memory-budget %sGB against the same "
                                     "build without a budget (median of two runs), same call" % b[6:]}
out = {"commit": commit, "date": date, "hardware": hardware,
       "command": "bench/cuda_memory.sh (device tool, nvidia-h200); bench/memory_json.py", "metrics": metrics}
os.makedirs("bench/results/latest", exist_ok=True)
json.dump(out, open("bench/results/latest/memory.json", "w"), indent=1)

print("| build | planned GB | held GB | nvidia-smi GB (context included) | step ms (median 3-20) | loss 20 |")
print("|---|---|---|---|---|---|")
for n in ["old1", "old2", "new1", "new2", "budget14", "budget10"]:
    r = runs.get(n)
    if r:
        print("| %s | %.3f | %.2f | %.2f | %.2f | %.6f |" % (n, r["planned_gb"], r["held_gb"], r["measured_gb"], r["step_ms"], r["losses"][-1]))
for c in ["train_eager", "train_compile"]:
    t = torch.get(c)
    if t:
        print("| PyTorch %s | | %.2f (max_memory_allocated) | | %.2f | |" % (c[6:], t["peak_gb"], t["step_ms"]))
