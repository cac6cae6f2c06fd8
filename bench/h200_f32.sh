#!/usr/bin/env bash
# On the GPU machine (device tool), one call: every CUDA op case against
# PyTorch (float64 references; the GPU numerics check), then issue 20's f32
# benchmarks (bench/cuda_f32.sh: the f32 GEMM table and accuracy, the
# GPT-2-like and MLP models against eager, f32.json).  Needs build-gpu/.
# Everything goes into $OUT/logs.tgz, f32.json beside it.
set -uo pipefail
cd "$(dirname "$0")/.."
final=${OUT:-/tmp/mlc-h200-f32}
work=/tmp/h200-f32
rm -rf $work && mkdir -p $work/ops $work/f32 "$final"
. tests/gpu/env.sh $work
rc=0
echo "## every op case (opcheck.py ops --target cuda)"
timeout 260 python3 tests/ops/opcheck.py ops --target cuda --jobs 16 \
  --opcheck build-gpu/codegen/cuda/mlc_opcheck --work /tmp/ops-all > $work/ops/ops.log 2>&1 || rc=1
grep -E "^FAIL|cases passed" $work/ops/ops.log
tar -C $work -czf "$final/logs.tgz" .
OUT=$work/f32 OPS_K=${OPS_K:-matmul_tn_f32_split} bash bench/cuda_f32.sh || rc=1
cp $work/f32/f32.json "$final/" 2>/dev/null
tar -C $work -czf "$final/logs.tgz" .
echo "rc=$rc"
exit $rc
