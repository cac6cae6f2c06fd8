#!/usr/bin/env bash
# On the GPU machine (device tool), in one call: the seed MiniLLM's training
# memory (issue 21), measured against the plan, against the build before the
# change, and against PyTorch.
#
#   bench/cuda_memory.sh
#
# Needs build-gpu/ (this tree, CUDA only: tests/gpu/cuda_check.sh says how),
# build-gpu-old/mlc (the same, built from the commit to compare with; its
# commit in build-gpu-old/COMMIT) and .yardstick/ (../shared/bench) for
# PyTorch; each part is skipped without its build.  Logs go to $OUT.
#
# For each build (old, new, new with --memory-budget 14GB and 10GB), 20 train steps of
# examples/minillm.mdl on --target cuda on the same tokens, while nvidia-smi
# samples the GPU's used memory every 50 ms:
#   planned   `mlc compile --stats`'s planned total for the train entry
#   held      what mlc's runtime allocated on the device (mlc train prints it)
#   measured  the largest used memory nvidia-smi saw, less what was used
#             before the run (so: the CUDA context and the loaded kernels
#             included, some hundreds of MB more than the tensors)
#   step      the median step time of steps 3..20
#   losses    the 20 losses, which must be the same in every build
# The old and new builds run twice each, alternating, so that a drift of the
# machine shows.  Then PyTorch's train (eager and compiled: peak_gb is
# torch.cuda.max_memory_allocated) and the refusal of --memory-budget 9GB.
set -uo pipefail
cd "$(dirname "$0")/.."
. tests/gpu/env.sh /tmp/mlc-memory
rc=0
{ echo "# bench/cuda_memory.sh, $(date -u '+%F %T') UTC, commit ${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo '?')}"
  echo "# old build: $(cat build-gpu-old/COMMIT 2>/dev/null || echo none)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; } | tee "$out/env.log"

tokens=/tmp/mlc-memory-tokens.bin
python3 -c "import numpy as np; np.random.seed(0); np.random.randint(0, 32000, 20 * 8 * 1024 + 1).astype(np.int32).tofile('$tokens')"

# name, mlc binary, extra flags
run_one() {
  local name=$1 mlc=$2
  shift 2
  [ -x "$mlc" ] || { echo "$name: no $mlc, skipped"; return; }
  timeout 300 $mlc compile examples/minillm.mdl --target cuda --stats "$@" -o /tmp/mlc-memory-art-$name > "$out/stats-$name.log" 2>&1
  local base
  base=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1)
  timeout 400 $mlc train examples/minillm.mdl --target cuda --steps 20 --data $tokens --data-dtype i32 "$@" \
    > "$out/train-$name.log" 2>&1 &
  local pid=$!
  : > "$out/smi-$name.log"
  while kill -0 $pid 2>/dev/null; do
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -1 >> "$out/smi-$name.log"
    sleep 0.05
  done
  wait $pid || rc=1
  python3 - "$name" "$base" "$out" <<'EOF' | tee -a "$out/memory.log"
import json, re, statistics, sys
name, base, out = sys.argv[1], float(sys.argv[2]), sys.argv[3]
def read(f):
    try: return open(f).read()
    except OSError: return ""
stats, train = read(f"{out}/stats-{name}.log"), read(f"{out}/train-{name}.log")
m = re.search(r"planned total: ([\d,]+) bytes .* runs train", stats)
planned = int(m.group(1).replace(",", "")) / 1e9 if m else None
m = re.search(r"device memory held by mlc[^0-9]*([\d.]+) GB", train)
held = float(m.group(1)) if m else None
smi = [float(x) for x in read(f"{out}/smi-{name}.log").split() if x.strip()]
measured = (max(smi) - base) * 2**20 / 1e9 if smi else None
steps = [(float(a), float(b)) for a, b in re.findall(r"^step \d+: loss ([\d.]+) \(([\d.]+) ms", train, re.M)]
losses = [a for a, _ in steps]
step = statistics.median([b for _, b in steps[2:]]) if len(steps) > 2 else None
r = {"name": name, "planned_gb": planned, "held_gb": held, "measured_gb": measured, "step_ms": step, "losses": losses}
print(json.dumps(r))
EOF
}

run_one old1 build-gpu-old/mlc
run_one new1 build-gpu/mlc
run_one budget14 build-gpu/mlc --memory-budget 14GB
run_one budget10 build-gpu/mlc --memory-budget 10GB
run_one old2 build-gpu-old/mlc
run_one new2 build-gpu/mlc

# a budget it cannot reach: the error, with the smallest budget it can
build-gpu/mlc compile examples/minillm.mdl --target cuda --memory-budget 9GB > "$out/budget9.log" 2>&1
echo "--memory-budget 9GB: exit $? ($(head -1 "$out/budget9.log"))" | tee -a "$out/memory.log"

: > "$out/torch.log"
if [ -f .yardstick/torch_baseline.py ]; then
  timeout 400 python3 .yardstick/torch_baseline.py train > "$out/torch.log" 2>&1 || rc=1
  grep -E "peak|step" "$out/torch.log" | tail -6
fi
(cd "$out" && tar czf logs.tgz *.log)
echo "rc=$rc"
exit $rc
