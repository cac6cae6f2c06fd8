#!/usr/bin/env bash
# On the GPU machine (device tool), in one call: the seed MiniLLM's training
# memory (issue 21), measured against the plan.
#
#   bench/cuda_memory.sh            12 train steps of examples/minillm.mdl on --target cuda
#
# Builds nothing: needs build-gpu/ as tests/gpu/cuda_check.sh says (and
# .yardstick/, ../shared/bench, for PyTorch's number; skipped without it).
# Reports, in $OUT/memory.log:
#   planned   `mlc compile --stats`'s planned total for the train entry: its
#             arena, the parameters and the optimizer state (what the plan says
#             the session holds; kernels' scratch is not in it)
#   held      what mlc's runtime allocated on the device (`mlc train` prints it:
#             parameters, optimizer state, the arenas it made, scratch)
#   measured  the largest memory used by mlc's process that nvidia-smi saw,
#             sampled every 50 ms (the CUDA context and the loaded kernels
#             included: some hundreds of MB more than the tensors)
#   torch     torch_baseline.py train's peak_gb (max_memory_allocated), eager and compiled
# and the losses of the 12 steps, to compare with an earlier build's.
set -uo pipefail
cd "$(dirname "$0")/.."
. tests/gpu/env.sh /tmp/mlc-memory
mlc=build-gpu/mlc
rc=0
{ echo "# bench/cuda_memory.sh, $(date -u '+%F %T') UTC, commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; } | tee "$out/env.log"

# 1. the plan
timeout 300 $mlc compile examples/minillm.mdl --target cuda --stats -o /tmp/mlc-memory-art > "$out/stats.log" 2>&1 || rc=1
planned=$(awk '/planned total: .* runs train/ { gsub(",", "", $3); print $3 }' "$out/stats.log")
grep -E "planned (peak|total)" "$out/stats.log"

# 2. the run, with nvidia-smi sampling the process's memory
python3 -c "import numpy as np; np.random.seed(0); np.random.randint(0, 32000, 12 * 8 * 1024 + 1).astype(np.int32).tofile('/tmp/mlc-memory-tokens.bin')" \
  2>/dev/null || python3 -c "import random, struct; random.seed(0); open('/tmp/mlc-memory-tokens.bin', 'wb').write(struct.pack('<%di' % (12 * 8 * 1024 + 1), *[random.randrange(32000) for _ in range(12 * 8 * 1024 + 1)]))"
timeout 400 $mlc train examples/minillm.mdl --target cuda --steps 12 --data /tmp/mlc-memory-tokens.bin --data-dtype i32 \
  > "$out/train.log" 2>&1 &
pid=$!
: > "$out/smi.log"
while kill -0 $pid 2>/dev/null; do
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits 2>/dev/null |
    awk -v p=$pid -v t="$(date +%s.%N)" -F', *' '$1 == p { print t, $2 }' >> "$out/smi.log"
  sleep 0.05
done
wait $pid || rc=1
grep -E "^step|device memory" "$out/train.log"
held=$(awk '/device memory held by mlc/ { print $6 }' "$out/train.log")
peak_mib=$(awk 'BEGIN { m = 0 } $2 > m { m = $2 } END { print m }' "$out/smi.log")

# 3. PyTorch, the same model and batch
: > "$out/torch.log"
if [ -f .yardstick/torch_baseline.py ]; then
  timeout 300 python3 .yardstick/torch_baseline.py train > "$out/torch.log" 2>&1 || rc=1
fi

python3 - "$planned" "$held" "$peak_mib" "$out/torch.log" <<'EOF' | tee "$out/memory.log"
import json, sys
planned, held, peak_mib, torch_log = (sys.argv[1:] + [""] * 4)[:4]
torch_peaks = []
for line in open(torch_log) if torch_log else []:
    try:
        r = json.loads(line)
    except ValueError:
        continue
    if isinstance(r, dict) and "peak_gb" in r:
        torch_peaks.append((r.get("case", "?"), float(r["peak_gb"])))
def gb(x, scale): return float(x) * scale / 1e9 if x else None
p, h = gb(planned, 1), gb(held, 1e9)
m = gb(peak_mib, 2**20)
def show(name, v, note=""):
    if v is None: print("%-44s %s" % (name, "n/a"))
    else: print("%-44s %7.3f GB%s" % (name, v, ("  (%+.1f %% of the plan)" % ((v / p - 1) * 100) if p else "") + note))
show("planned total (train: arena, params, AdamW)", p)
show("held by mlc's runtime", h)
show("measured: nvidia-smi, mlc's process peak", m, "  (CUDA context and kernels included)")
for case, t in torch_peaks:
    print("%-44s %7.3f GB" % ("PyTorch %s (max_memory_allocated)" % case, t))
ok = p is not None and h is not None and abs(h / p - 1) <= 0.05
print("held within 5 %% of the plan: %s" % ("yes" if ok else "NO"))
EOF
echo "rc=$rc"
exit $rc
