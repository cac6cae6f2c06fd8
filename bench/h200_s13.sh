#!/usr/bin/env bash
# On the GPU machine (device tool), two calls of about nine minutes each:
#   PART=check  every CUDA op case against PyTorch (float64 references; the
#               GPU numerics check), then bench/cuda_flash.sh check without its
#               op cases: compute-sanitizer on the attention gradient at odd
#               lengths and attention against SDPA at three shapes
#   PART=bench  bench/cuda_f32.sh (f32 GEMM table, the GPT-2-like model and the
#               MLP against eager, f32.json), then bench/cuda_flash.sh model
#               without the gradient check (MiniLLM train step and bf16
#               forward against torch_baseline.py)
#   PART=models the reduction op cases (-k axis), then bench/f32_models.py with
#               profiles (the two f32 models against eager) alone
#   PART=ncu    Nsight Compute on the f32 attention gradient's three launches
#               (gpt2like, one layer): speed of light, warp stalls, occupancy
#   PART=ab     gpt2like (bench/f32_models.py --models gpt2like, with profiles)
#               under build-gpu/mlc and each $VARIANTS build's mlc (carry
#               them too), alternating, twice
# Carry build-gpu/mlc, build-gpu/lib, build-gpu/codegen/cuda/mlc_opcheck and
# .yardstick.  Logs in $OUT/logs.tgz (the device returns 8 files), f32.json beside.
set -uo pipefail
cd "$(dirname "$0")/.."
final=${OUT:-/tmp/mlc-s13}
work=/tmp/s13
rm -rf $work && mkdir -p $work "$final"
. tests/gpu/env.sh $work
pack() { tar -C $work -czf "$final/logs.tgz" .; }
rc=0
case ${PART:-check} in
check)
  echo "## every op case (opcheck.py ops --target cuda)"
  mkdir -p $work/ops
  s=$(date +%s)
  timeout 280 python3 tests/ops/opcheck.py ops --target cuda --jobs 16 \
    --opcheck build-gpu/codegen/cuda/mlc_opcheck --work /tmp/ops-all > $work/ops/ops.log 2>&1 || rc=1
  grep -E "^FAIL|cases passed" $work/ops/ops.log
  echo "($(( $(date +%s) - s )) s)"
  pack
  echo "## attention: sanitizers and timing"
  OUT=$work/flash SKIP_OPS=1 timeout 270 bash bench/cuda_flash.sh check || rc=1
  ;;
bench)
  echo "## f32"
  OUT=$work/f32 OPS_K=sum_axis0_wide timeout 340 bash bench/cuda_f32.sh || rc=1
  cp $work/f32/f32.json "$final/" 2>/dev/null
  pack
  echo "## MiniLLM"
  OUT=$work/model SKIP_MINILLM=1 timeout 220 bash bench/cuda_flash.sh model || rc=1
  ;;
models) # OPS_K=SUBSTR: these op cases first (default: axis, the reductions; "" all)
  mkdir -p $work/f32
  ops=${OPS_K-axis}
  timeout 200 python3 tests/ops/opcheck.py ops --target cuda --jobs 16 --opcheck build-gpu/codegen/cuda/mlc_opcheck \
    --work /tmp/ops-sel ${ops:+-k "$ops"} > $work/f32/ops.log 2>&1 || rc=1
  grep -E "^FAIL|cases passed" $work/f32/ops.log
  timeout 200 python3 bench/f32_models.py --mlc build-gpu/mlc --target cuda --out $work/f32 --profile \
    --f32-matmul 3xtf32 > $work/f32/f32_models.log 2>&1 || rc=1
  grep -E "^(gpt2like|mlp): " $work/f32/f32_models.log
  ;;
ncu)
  export PATH=$PATH:/usr/local/cuda/bin:$(ls -d /opt/nvidia/nsight-compute/* 2>/dev/null | head -1)
  timeout 300 ncu --clock-control none --kernel-name regex:attention_grad_saved --launch-count 3 \
    --section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats \
    --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    build-gpu/mlc profile bench/gpt2like_f32.mdl --target cuda --entry train_step --steps 1 layers=1 \
    > $work/ncu_attention_grad_f32.log 2>&1 || rc=1
  grep -E "mlc_attention|Duration|Compute \(SM\) Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Stall|Issue Slots|Warp Cycles Per Issued" \
    $work/ncu_attention_grad_f32.log | head -60
  ;;
ab)
  for round in 1 2; do
    for b in build-gpu ${VARIANTS:-}; do
      mkdir -p $work/ab-$b-$round
      timeout 120 python3 bench/f32_models.py --mlc $b/mlc --target cuda --out $work/ab-$b-$round --profile \
        --models gpt2like --f32-matmul 3xtf32 --work /tmp/f32ab > $work/ab-$b-$round/f32_models.log 2>&1 || rc=1
      echo "$b round $round: $(grep -E '^gpt2like: ' $work/ab-$b-$round/f32_models.log)"
      grep -E "^attention" $work/ab-$b-$round/gpt2like_profile.log | head -2 | cut -c1-70
    done
  done
  ;;
esac
pack
echo "rc=$rc"
exit $rc
