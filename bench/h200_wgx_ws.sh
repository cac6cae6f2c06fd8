#!/usr/bin/env bash
# On the GPU machine (device tool, nvidia-h200), one call: the 3xTF32 GEMM
# (mlc_gemm_wgx, as build-gpu/ has it) checked and measured.  Written for
# the warp-specialised kernel (a producer warpgroup, two consumers, a ring
# of 3 stages; branch wgx-ws), measured 2026-12-03 in
# bench/results/h200-2026-12-03b.md; main kept the kernel before it.
#   1. every CUDA op case against PyTorch (the GPU numerics check), and
#      tests/ref/dropout.py on cuda
#   2. bench/cuda_f32.sh: the f32 GEMM table and accuracy against
#      torch.matmul f32, the GPT-2-like and MLP models against eager, f32.json
#   3. compute-sanitizer memcheck and racecheck on an f32 GEMM with edges
# Needs build-gpu/.  Logs in $OUT/logs.tgz (rewritten after each part), f32.json beside it.
set -uo pipefail
cd "$(dirname "$0")/.."
final=${OUT:-/tmp/mlc-wgx-ws}
work=/tmp/wgx-ws
rm -rf $work && mkdir -p $work/ops $work/f32 $work/san "$final"
. tests/gpu/env.sh $work
export PATH=$PATH:/usr/local/cuda/bin
gpu_header bench/h200_wgx_ws.sh $work/env.log
rc=0
echo "## every op case (opcheck.py ops --target cuda)"
t0=$(date +%s)
timeout 240 python3 tests/ops/opcheck.py ops --target cuda --jobs 16 \
  --opcheck build-gpu/codegen/cuda/mlc_opcheck --work /tmp/ops-all > $work/ops/ops.log 2>&1 || rc=1
grep -E "^FAIL|cases passed" $work/ops/ops.log; echo "ops: $(( $(date +%s) - t0 )) s"
echo "## dropout on cuda (tests/ref/dropout.py against PyTorch and the CPU's Philox masks)"
timeout 100 python3 tests/ref/dropout.py build-gpu/mlc . $work/dropout cuda > $work/dropout.log 2>&1 || rc=1
grep -E "^(ok|FAIL|not ok)|passed|failed" $work/dropout.log | tail -12
tar -C $work -czf "$final/logs.tgz" .
OUT=$work/f32 OPS_K=${OPS_K:-matmul_tn_f32_split} bash bench/cuda_f32.sh || rc=1
cp $work/f32/f32.json "$final/" 2>/dev/null
echo "f32 done: $(( $(date +%s) - t0 )) s"
tar -C $work -czf "$final/logs.tgz" .
echo "## compute-sanitizer on nn 1300x1290x100 (121 tiles: mlc_gemm_wgx) (3xTF32, edges in M, N and K)"
for tool in memcheck racecheck synccheck; do
  timeout 60 compute-sanitizer --tool $tool build-gpu/mlc bench bench/gemm_f32_nn.mdl --target cuda --runs 1 --warmup 0 \
    M=1300 N=1290 K=100 > $work/san/$tool.log 2>&1 || rc=1
  echo "$tool: $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $work/san/$tool.log | tail -1)"
done
tar -C $work -czf "$final/logs.tgz" .
echo "rc=$rc"
exit $rc
