#!/usr/bin/env bash
# On the GPU machine (device tool): the persistent ping-pong GEMM
# (mlc_gemm_pp, codegen/cuda/gemm.cuh; --cuda-gemm-tile=pp,ST), which has
# not run on a GPU before this script, in one call:
#   1. the GEMM, linear and fused op cases with --cuda-gemm-tile=pp,6 (opcheck.py --option);
#   2. compute-sanitizer memcheck, racecheck and synccheck on two pp GEMMs (a fused linear
#      8192x6144x2048 with bias, an nn 2000x2048x1000 with a partial k-tile);
#   3. bench/gemm_tune.py: default against pp,6 / pp,5 / pp,4 (or CONFIGS), beside cuBLAS, at the MiniLLM's shapes;
#   4. the MiniLLM bf16 forward and 12 train steps, default and pp,6 (or PP).
# PP=co,4 CONFIGS="default;co,4;co,3" measures the cooperative kernel instead.
# Needs build-gpu/. Logs in $OUT/logs.tgz.
set -uo pipefail
cd "$(dirname "$0")/.."
final=${OUT:-/tmp/mlc-pp}
work=/tmp/pp-logs
rm -rf $work && mkdir -p $work "$final"
. tests/gpu/env.sh $work
mlc=$PWD/build-gpu/mlc opcheck=build-gpu/codegen/cuda/mlc_opcheck
rc=0
pack() { tar -C $work -czf "$final/logs.tgz" .; }
gpu_header bench/h200_pp.sh $work/env.log
PP=${PP:-pp,6}
echo "## 1. op cases with --cuda-gemm-tile=$PP"
for kw in matmul linear fused mha; do
  timeout 150 python3 tests/ops/opcheck.py ops --target cuda --jobs 16 --opcheck $opcheck --work /tmp/ops-pp-$kw -k $kw \
    --option=--cuda-gemm-tile=$PP || rc=1
done > $work/ops.log 2>&1
grep -E "^FAIL|cases passed" $work/ops.log | cut -c1-300
pack
echo "## 2. compute-sanitizer"
for t in memcheck racecheck synccheck; do
  timeout 120 compute-sanitizer --tool $t --error-exitcode 9 $mlc bench bench/gemm_linear.mdl --target cuda --runs 1 --warmup 0 \
    --cuda-gemm-tile $PP M=8192 N=6144 K=2048 bias=true > $work/san_${t}_linear.log 2>&1 || rc=1
  timeout 120 compute-sanitizer --tool $t --error-exitcode 9 $mlc bench bench/gemm_nn.mdl --target cuda --runs 1 --warmup 0 \
    --cuda-gemm-tile $PP M=2000 N=2048 K=1000 > $work/san_${t}_nn.log 2>&1 || rc=1
  echo "$t: linear $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $work/san_${t}_linear.log | head -1), nn $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $work/san_${t}_nn.log | head -1)"
done
pack
echo "## 3. tiles against cuBLAS"
timeout 360 python3 bench/gemm_tune.py --mlc $mlc --out $work/tune --configs "${CONFIGS:-default;pp,6;pp,5;pp,4}" > $work/tune.log 2>&1 || rc=1
cat $work/tune/gemm_tune.md 2>/dev/null | head -30
pack
echo "## 4. MiniLLM: default, then $PP"
python3 -c "import torch; torch.manual_seed(0); torch.randint(0, 32000, (12 * 8 * 1024 + 1,), dtype=torch.int32).numpy().tofile('/tmp/tokens.bin')"
for o in "" "--cuda-gemm-tile $PP"; do
  timeout 120 $mlc bench bench/minillm_bf16.mdl --target cuda --runs 10 --warmup 3 $o > $work/forward.log 2>&1 || rc=1
  echo "forward [$o]: $(grep -o 'median [0-9.]* ms' $work/forward.log)"
  timeout 150 $mlc train examples/minillm.mdl --target cuda --steps 12 --data /tmp/tokens.bin --data-dtype i32 $o > $work/train.log 2>&1 || rc=1
  echo "train [$o]: $(grep -E '^step' $work/train.log | sed 's/.*(\([0-9.]*\) ms.*/\1/' | tail -10 | sort -n | tr '\n' ' ')"
  grep -E "^step 12" $work/train.log
done
pack
echo "rc=$rc"
exit $rc
