#!/usr/bin/env bash
# On the GPU machine (device tool), one call after changing the GEMM kernels:
#   1. every CUDA op case (opcheck.py ops --target cuda);
#   2. bench/wgx_probe.sh: the 3xTF32 GEMM's speed and accuracy against
#      float64 (its 2026-12-02 run also timed an MLC_WGX_NOPART variant,
#      a trial macro since removed from gemm.cuh);
#   3. bench/gemm_shapes.py: every MiniLLM bf16 GEMM shape against cuBLAS.
# Needs build-gpu/. Everything goes into $OUT/logs.tgz; summaries printed.
set -uo pipefail
cd "$(dirname "$0")/.."
final=${OUT:-/tmp/mlc-s5b}
work=/tmp/s5b-logs
rm -rf $work && mkdir -p $work/wgx "$final"
. tests/gpu/env.sh $work
mlc=build-gpu/mlc opcheck=build-gpu/codegen/cuda/mlc_opcheck
rc=0
pack() { tar -C $work -czf "$final/logs.tgz" .; }
gpu_header bench/h200_s5b.sh $work/env.log
echo "## 1. every op case"
timeout 110 python3 tests/ops/opcheck.py ops --target cuda --jobs 16 --opcheck $opcheck \
  --work /tmp/ops-all > $work/ops.log 2>&1 || rc=1
grep -E "^FAIL|cases passed" $work/ops.log
pack
echo "## 2. 3xTF32 GEMM, speed and accuracy"
OUT=$work/wgx ACCURACY=1 timeout 260 bash bench/wgx_probe.sh 2>&1 | grep -v "^#" || rc=1
pack
echo "## 3. bf16 GEMM shapes"
timeout 200 python3 bench/gemm_shapes.py --mlc $mlc --out $work > $work/gemm_shapes.log 2>&1 || rc=1
cat $work/gemm_shapes.md 2>/dev/null || tail -5 $work/gemm_shapes.log
pack
echo "rc=$rc"
exit $rc
