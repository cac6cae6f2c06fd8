#!/usr/bin/env bash
# On the GPU machine (device tool), one short call: every CUDA op case with
# the default kernels (the wgmma GEMM's epilogue now in stage/drain helpers),
# the GEMM op cases and compute-sanitizer racecheck with --cuda-gemm-tile=co,4
# (the cooperative kernel's consumers taking one set of staging rows in
# turn), and bench/gemm_tune.py "default;co,4" beside cuBLAS.
# Needs build-gpu/. Logs in $OUT/logs.tgz.
set -uo pipefail
cd "$(dirname "$0")/.."
final=${OUT:-/tmp/mlc-co4}
work=/tmp/co4-logs
rm -rf $work && mkdir -p $work "$final"
. tests/gpu/env.sh $work
mlc=$PWD/build-gpu/mlc opcheck=build-gpu/codegen/cuda/mlc_opcheck
rc=0
pack() { tar -C $work -czf "$final/logs.tgz" .; }
gpu_header bench/h200_co4.sh $work/env.log
timeout 150 python3 tests/ops/opcheck.py ops --target cuda --jobs 16 --opcheck $opcheck --work /tmp/ops > $work/ops.log 2>&1 || rc=1
echo "default: $(grep -E 'cases passed' $work/ops.log)"; grep -E "^FAIL" $work/ops.log | cut -c1-200
for kw in matmul linear fused; do
  timeout 90 python3 tests/ops/opcheck.py ops --target cuda --jobs 16 --opcheck $opcheck --work /tmp/ops-co-$kw -k $kw \
    --option=--cuda-gemm-tile=co,4 || rc=1
done > $work/ops_co4.log 2>&1
echo "co,4: $(grep -E 'cases passed' $work/ops_co4.log | tr '\n' ' ')"; grep -E "^FAIL" $work/ops_co4.log | cut -c1-200
timeout 90 compute-sanitizer --tool racecheck --error-exitcode 9 $mlc bench bench/gemm_linear.mdl --target cuda --runs 1 --warmup 0 \
  --cuda-gemm-tile co,4 M=8192 N=6144 K=2048 bias=true > $work/san_racecheck_co4.log 2>&1 || rc=1
echo "racecheck co,4: $(grep -E 'RACECHECK SUMMARY' $work/san_racecheck_co4.log)"
pack
timeout 150 python3 bench/gemm_tune.py --mlc $mlc --out $work/tune --configs "default;co,4" > $work/tune.log 2>&1 || rc=1
cat $work/tune/gemm_tune.md
pack
echo "rc=$rc"
exit $rc
