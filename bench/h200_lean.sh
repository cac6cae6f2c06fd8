#!/usr/bin/env bash
# On the GPU machine (device tool), one short call when little device time is
# left: every CUDA op case against PyTorch (float64 references), 3 SGD steps
# of tests/cuda/issue27_ops.mdl (issue 27's ops and their gradients; compare
# the losses with the CPU target's), and bench/f32_gemm.py (f32 GEMMs against
# torch.matmul f32, and their accuracy against float64).  Needs build-gpu/.
# Everything goes into $OUT/logs.tgz.
set -uo pipefail
cd "$(dirname "$0")/.."
final=${OUT:-/tmp/mlc-h200-lean}
work=/tmp/h200-lean
rm -rf $work && mkdir -p $work "$final"
. tests/gpu/env.sh $work
rc=0
pack() { tar -C $work -czf "$final/logs.tgz" .; }
echo "## every op case (opcheck.py ops --target cuda), commit ${COMMIT:-?}"
timeout 90 python3 tests/ops/opcheck.py ops --target cuda --jobs 16 \
  --opcheck build-gpu/codegen/cuda/mlc_opcheck --work /tmp/ops-all > $work/ops.log 2>&1 || rc=1
grep -E "^FAIL|cases passed" $work/ops.log
pack
echo "## tests/cuda/issue27_ops.mdl, 3 SGD steps"
timeout 30 build-gpu/mlc train tests/cuda/issue27_ops.mdl --target cuda --steps 3 > $work/issue27_train.log 2>&1 || rc=1
grep -E "^step" $work/issue27_train.log
pack
echo "## f32 GEMMs"
timeout 85 python3 bench/f32_gemm.py --mlc build-gpu/mlc --target cuda --out $work --f32-matmul 3xtf32 > $work/f32_gemm.log 2>&1 || rc=1
grep -E "^\|.*(nn|tn|linear) \||worst" $work/f32_gemm.md | cut -d'|' -f2,4,6,7,9,11
pack
echo "rc=$rc"
exit $rc
