#!/usr/bin/env bash
# On the GPU machine (device tool), one call that looks before building:
#   1. bench/cuda_flash.sh check (issue 19's attention op cases, sanitizers,
#      attention against SDPA) for the build being carried;
#   2. per-kernel profiles of the two f32 models of issue 20 (mlc profile,
#      train step; bench/mlp_f32.mdl and bench/gpt2like_f32.mdl);
#   3. for issue 24, what makes up Nsight Compute's SM % on the kernels where
#      mlc's verdict and ncu's differed (the multi-tensor AdamW, an
#      elementwise add of the GPT-2-like model): ncu's breakdown of
#      sm__throughput and of the DRAM throughput, one launch each;
#   4. mlc calibrate --target cuda: the measured ceilings beside the datasheet.
# Needs build-gpu/ (tests/gpu/cuda_check.sh says how). Everything goes into
# $OUT/logs.tgz; the summaries are printed.
set -uo pipefail
cd "$(dirname "$0")/.."
final=${OUT:-/tmp/mlc-probe}
work=/tmp/probe-logs
rm -rf $work && mkdir -p $work/flash $work/f32 $work/ncu
rc=0
pack() { tar -C $work -czf "$final/logs.tgz" .; }
echo "## 1. attention (bench/cuda_flash.sh check)"
OUT=$work/flash timeout 330 bash bench/cuda_flash.sh check || rc=1
pack
. tests/gpu/env.sh $work
mlc=build-gpu/mlc
echo "## 2. f32 profiles"
timeout 60 $mlc profile bench/mlp_f32.mdl --target cuda --entry train_step --steps 10 > $work/f32/mlp.log 2>&1 || rc=1
timeout 90 $mlc profile bench/gpt2like_f32.mdl --target cuda --entry train_step --steps 10 > $work/f32/gpt2like.log 2>&1 || rc=1
for m in mlp gpt2like; do echo "### $m"; head -30 $work/f32/$m.log | cut -c1-150; done
pack
echo "## 3. ncu breakdowns"
export PATH=$PATH:/usr/local/cuda/bin:$(ls -d /opt/nvidia/nsight-compute/* 2>/dev/null | head -1)
bd="breakdown:sm__throughput.avg.pct_of_peak_sustained_elapsed,breakdown:gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"
bd="$bd,sm__inst_executed.sum,sm__instruction_throughput.avg.pct_of_peak_sustained_active,gpu__time_duration.sum"
timeout 120 ncu --clock-control none --metrics "$bd" -k regex:adamw_multi --launch-count 1 \
  $mlc train examples/minillm.mdl --target cuda --steps 1 layers=2 batch=2 > $work/ncu/adamw.log 2>&1 || rc=1
timeout 120 ncu --clock-control none --metrics "$bd" -k regex:'mlc_(add|mul)_' --launch-count 2 \
  $mlc train bench/gpt2like_f32.mdl --target cuda --steps 1 layers=2 > $work/ncu/ew.log 2>&1 || rc=1
grep -vE "^==PROF==|^step|^ *$" $work/ncu/adamw.log $work/ncu/ew.log | grep -E "pct|inst|duration|mlc_" | cut -c1-160 | head -80
pack
echo "## 4. calibrate"
timeout 120 $mlc calibrate --target cuda > $work/calibrate.log 2>&1 || rc=1
cat $work/calibrate.log | head -30
cp /tmp/mlc-cache/mlc/ceilings-cuda.json $work/ 2>/dev/null
pack
echo "rc=$rc"
exit $rc
