#!/usr/bin/env bash
# On the GPU machine (device tool, nvidia-h200), one short call: the matmul
# op cases with the warp-specialised 3xTF32 GEMM (producer 184 registers,
# consumers 160), then bench/f32_gemm.py's speed table with it and with
# build-gpu/mlc-sync (gemm.cuh and emit_gemm.c of 170bb58), for the A/B in
# the same call.  Needs build-gpu/{mlc,mlc-sync,lib,codegen/cuda/mlc_opcheck}.
set -uo pipefail
cd "$(dirname "$0")/.."
final=${OUT:-/tmp/mlc-wgx-ab2}
work=/tmp/wgx-ab2
rm -rf $work && mkdir -p $work/ws $work/sync "$final"
. tests/gpu/env.sh $work
gpu_header bench/h200_wgx_ab2.sh $work/env.log
rc=0
start=$SECONDS
save() { tar -C $work -czf "$final/logs.tgz" .; }
timeout 50 python3 tests/ops/opcheck.py ops --target cuda --jobs 16 -k matmul \
  --opcheck build-gpu/codegen/cuda/mlc_opcheck --work /tmp/ops-matmul > $work/ops_matmul.log 2>&1 || rc=1
echo "matmul op cases: $(grep -E "cases passed" $work/ops_matmul.log) $(grep -c ^FAIL $work/ops_matmul.log) FAIL ($((SECONDS - start)) s)"
save
for v in ws sync; do
  m=build-gpu/mlc; [ $v = sync ] && m=build-gpu/mlc-sync
  timeout 75 python3 bench/f32_gemm.py --mlc $m --target cuda --out $work/$v --work /tmp/f32_gemm_$v --f32-matmul 3xtf32 \
    --skip-accuracy > $work/$v/f32_gemm.log 2>&1 || { rc=1; echo "$v: exit $?"; tail -3 $work/$v/f32_gemm.log; }
  echo "## $v ($((SECONDS - start)) s)"; grep -E "^\| " $work/$v/f32_gemm.md | cut -d'|' -f2-4,6-8,11 | head -20
  save
done
echo "rc=$rc"
exit $rc
