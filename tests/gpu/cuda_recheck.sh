#!/usr/bin/env bash
# On the GPU machine (device tool), one short call after a change to the
# attention or embedding kernels: their op cases (and MultiheadAttention's,
# which run the packed attention) against PyTorch, the small MiniLLM's
# gradients and steps against PyTorch (packed attention with its gradient,
# head dim 32), and the train step's profile on the synthetic batch, whose
# tokens are all 0 or 1 (embedding_grad's worst case: two rows of 4096
# tokens each).  Needs build-gpu/ as tests/gpu/cuda_check.sh says, and
# build-gpu-v/cache when carried (a kernel cache filled where it was built).
# Logs go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/gpu/env.sh /tmp/mlc-recheck
[ -d build-gpu-v/cache ] && mkdir -p "$XDG_CACHE_HOME" && cp -r build-gpu-v/cache/. "$XDG_CACHE_HOME/"
opcheck=build-gpu/codegen/cuda/mlc_opcheck
rc=0
{ echo "# $(date -u '+%F %T') UTC, commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$out/env.log"
for k in mha embedding attention; do
  timeout 100 python3 tests/ops/opcheck.py ops --target cuda --jobs 16 --opcheck $opcheck --work /tmp/ops-$k -k $k || rc=1
done 2>&1 | tee "$out/ops.log" | grep -E "FAIL|passed"
timeout 120 python3 bench/cuda_minillm.py --small --mlc build-gpu/mlc --opcheck $opcheck --work /tmp/small > "$out/minillm_small.log" 2>&1 || rc=1
grep -E "^ok|^FAIL|checks" "$out/minillm_small.log"
timeout 90 build-gpu/mlc train examples/minillm.mdl --target cuda --steps 4 --profile > "$out/train_synthetic.log" 2>&1 || rc=1
grep -E "^step|^embedding_grad|ms per run" "$out/train_synthetic.log"
echo "rc=$rc"
exit $rc
