#!/usr/bin/env bash
# On the GPU machine (device tool), session 25 (2026-12-06): FP8 on CUDA
# (issue 30): quant and scaled_mm kernels, the MiniLLM train step under
# --matmul=fp8.
#   PART=fp8     tests/ref/fp8.py --target cuda (quant byte for byte, scaled_mm
#                against float64, two SGD steps against numpy's recipe);
#                bench/fp8_gemm.py (scaled_mm at the step's shapes beside
#                torch._scaled_mm and bf16 cuBLAS); then the MiniLLM train
#                step, bf16 and --matmul=fp8 (STEPS steps each, losses and
#                ms), and mlc profile of the fp8 step's kernels.
#                build-gpu/base/mlc, where carried, is the previous commit's mlc: its fp8 step too.
#   PART=quick   fp8.py --target cuda and the two train steps, alone.
#   PART=torch8  bench/fp8_torch_step.py (PyTorch's FP8 and bf16 steps, eager and compiled), then mlc's two.
#   PART=ncu8    ncu's stall reasons and pipe use on one scaled_mm (the FFN-up's forward shape).
#   PART=loss    300 steps of the MiniLLM on the KJV bytes, bf16 and --matmul=fp8 (carry
#                build-gpu/kjv.txt).
#   PART=ops     every CUDA op case (OPS_K to pick), as the GPU numerics check.
# Carry build-gpu/mlc, build-gpu/lib, build-gpu/codegen/cuda/mlc_opcheck and
# .yardstick.  Logs in $OUT/logs.tgz; a summary on standard output.
set -uo pipefail
cd "$(dirname "$0")/.."
part=${PART:-fp8}
final=${OUT:-/tmp/mlc-s25}
work=/tmp/s25
rm -rf $work && mkdir -p $work "$final"
. tests/gpu/env.sh $work
export PATH=$PATH:/usr/local/cuda/bin
pack() { tar -C $work -czf "$final/logs.tgz" .; }
mlc=$PWD/build-gpu/mlc opcheck=$PWD/build-gpu/codegen/cuda/mlc_opcheck
rc=0 t0=$SECONDS
took() { echo "  ($((SECONDS - t0)) s, $SECONDS in all)"; t0=$SECONDS; }
gpu_header "bench/h200_s25.sh PART=$part" $work/env.log
train() { # $1 name, rest: extra options; median of steps 3..
  timeout ${TRAIN_TIMEOUT:-150} ${MLCBIN:-$mlc} train examples/minillm.mdl --target cuda --steps ${STEPS:-12} "${@:2}" > $work/train_$1.log 2>&1 || rc=1
  echo "train $1: $(grep -E '^step' $work/train_$1.log | awk 'NR>=3 {gsub(/\(/,"",$5); print $5}' | sort -n | awk '{a[NR]=$1} END {print "median", a[int((NR+1)/2)], "ms of", NR, "steps"}')," \
    "losses $(grep -E '^step' $work/train_$1.log | awk '{print $4}' | tr '\n' ' ' | cut -c1-200)"
  grep -E "error|FAIL" $work/train_$1.log | head -3
}
fp8check() { # tests/ref/fp8.py on CUDA's kernels: quant, quant_both, scaled_mm, two SGD steps
  timeout 240 python3 tests/ref/fp8.py $opcheck $mlc . $work/fp8 --target cuda > $work/fp8_check.log 2>&1 || rc=1
  echo "fp8.py --target cuda: $(grep -c '^ok' $work/fp8_check.log) ok, $(grep -c '^FAIL' $work/fp8_check.log) FAIL"
  grep -E '^FAIL' $work/fp8_check.log | head -8 | cut -c1-400
}
case $part in
fp8)
  fp8check
  tail -3 $work/fp8_check.log | cut -c1-300
  took; pack
  timeout 300 python3 bench/fp8_gemm.py $opcheck $work/gemm --json $work/fp8_gemm.json > $work/fp8_gemm.log 2>&1 || rc=1
  cat $work/fp8_gemm.log | cut -c1-200
  rm -rf $work/gemm
  took; pack
  train bf16
  train fp8 --matmul=fp8
  # the previous commit's mlc, where carried (build-gpu/base/mlc), for the same step in the same call
  [ -x build-gpu/base/mlc ] && MLCBIN=$PWD/build-gpu/base/mlc train fp8_base --matmul=fp8
  took; pack
  XDG_CACHE_HOME=/tmp/cache-prof timeout 150 $mlc profile examples/minillm.mdl --target cuda --entry train_step --matmul=fp8 --steps 3 \
    > $work/profile_fp8.log 2>&1 || rc=1
  head -40 $work/profile_fp8.log | cut -c1-200
  took
  for k in ${OPS_K:-chunks sum max min}; do
    timeout 120 python3 tests/ops/opcheck.py ops --target cuda --jobs 16 --opcheck $opcheck --work /tmp/ops-$k -k $k > $work/ops_$k.log 2>&1 || rc=1
    echo "cuda op cases -k $k: $(grep -E 'cases passed' $work/ops_$k.log)"
    grep -E '^FAIL' $work/ops_$k.log | head -4 | cut -c1-300
  done
  took
  ;;
quick) # PART=fp8's numerics (fp8.py) and the two train steps alone (and the base's fp8 step; PROFILE=1: the profile too)
  fp8check
  took; pack
  train bf16
  train fp8 --matmul=fp8
  [ -x build-gpu/base/mlc ] && MLCBIN=$PWD/build-gpu/base/mlc train fp8_base --matmul=fp8
  took; pack
  if [ "${PROFILE:-0}" = 1 ]; then
    XDG_CACHE_HOME=/tmp/cache-prof timeout 150 $mlc profile examples/minillm.mdl --target cuda --entry train_step --matmul=fp8 --steps 3 \
      > $work/profile_fp8.log 2>&1 || rc=1
    awk 'NR>12 && $3 ~ /^[0-9]+$/ {split($1,a,"%"); s[a[1]]+=$4/$3; n[a[1]]++} END {for (k in s) printf "  %-24s %4d kernels %8.3f ms a step\n", k, n[k], s[k]}' \
      $work/profile_fp8.log | sort -k4 -nr | head -14
    took
  fi
  ;;
loss) # 300 steps of the MiniLLM on the King James Bible's bytes (build-gpu/kjv.txt, carried: examples/kjv/prepare.py's
  # text), windows of 1024 in the book's order, the last 2 % held out: bf16 and --matmul=fp8, the same init and batches
  python3 - build-gpu/kjv.txt $work/kjv <<'PY'
import os, sys
import numpy as np
b = np.frombuffer(open(sys.argv[1], "rb").read(), dtype=np.uint8).astype(np.int32)
n = (len(b) - 1) // 1024
os.makedirs(sys.argv[2], exist_ok=True)
np.save(f"{sys.argv[2]}/idx.npy", b[:n * 1024].reshape(n, 1024))
np.save(f"{sys.argv[2]}/targets.npy", b[1:n * 1024 + 1].reshape(n, 1024))
print(f"{len(b)} bytes, {n} windows of 1024")
PY
  for mode in ${LOSS_MODES:-bf16 fp8}; do
    timeout 280 $mlc train examples/minillm.mdl --target cuda --steps ${STEPS:-300} --input tokens=$work/kjv/idx.npy \
      --input targets=$work/kjv/targets.npy --eval-split 0.02 --eval-every 100 $([ $mode = fp8 ] && echo --matmul=fp8) \
      > $work/loss_$mode.log 2>&1 || rc=1
    echo "$mode: $(grep -E '^step' $work/loss_$mode.log | tail -1) / $(grep -E 'validation' $work/loss_$mode.log | tr '\n' ' ')"
    grep -E "error" $work/loss_$mode.log | head -3
    took; pack
  done
  ;;
torch8) # PyTorch's FP8 step (torchao where it imports, else torch._scaled_mm) beside its bf16 step, eager and compiled;
  # then mlc's two steps in the same call
  python3 -c "import torchao; print('torchao', torchao.__version__)" > $work/torchao.log 2>&1; head -1 $work/torchao.log | cut -c1-120
  timeout ${TORCH_TIMEOUT:-420} python3 bench/fp8_torch_step.py --steps 8 --compile ${TORCH_COMPILE:-both} > $work/torch8.log 2>&1 || rc=1
  cut -c1-400 $work/torch8.log | grep -v "^ *$" | tail -12
  took; pack
  if [ "${NO_MLC:-0}" != 1 ]; then train bf16; train fp8 --matmul=fp8; fi
  took
  ;;
ncu8) # Nsight Compute on one FP8 GEMM (scaled_mm 8192 x 8192 x 2048, e4m3, bf16 out, the FFN-up's forward, at 0.75x of
  # cuBLAS's FP8 in sessions 25-26): where its warps stall, its tensor-pipe and memory throughput (ncu_scaled_mm.csv).
  # Written in session 26 without a GPU left to run it: the metric names are from ncu's docs, not yet tried here.
  d=$work/ncu8 && mkdir -p $d
  python3 - $d <<'PY'
import sys
import numpy as np
d = sys.argv[1]
rng = np.random.default_rng(0)
rng.integers(0, 0x7e, (8192, 2048), dtype=np.uint8).tofile(f"{d}/a.raw")  # finite e4m3 codes
rng.integers(0, 0x7e, (8192, 2048), dtype=np.uint8).tofile(f"{d}/b.raw")
np.array(448.0, np.float32).tofile(f"{d}/aa.raw")
np.array(448.0, np.float32).tofile(f"{d}/ab.raw")
PY
  timeout 300 ncu --csv --kernel-name regex:mlc --launch-skip 2 --launch-count 1 \
    --metrics gpu__time_duration.sum,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed,smsp__average_warp_latency_issue_stalled_barrier,smsp__average_warp_latency_issue_stalled_long_scoreboard,smsp__average_warp_latency_issue_stalled_wait,smsp__average_warp_latency_issue_stalled_math_pipe_throttle,smsp__average_warp_latency_issue_stalled_sleeping,launch__registers_per_thread,launch__occupancy_limit_registers \
    $opcheck --op scaled_mm $d/run --dtype bf16 --target cuda --bench 3 --in "a:f8e4m3[8192, 2048]" --in "b:f8e4m3[8192, 2048]" \
    --in "aa:f32[]" --in "ab:f32[]" --input-file a=$d/a.raw --input-file b=$d/b.raw --input-file aa=$d/aa.raw --input-file ab=$d/ab.raw \
    > $work/ncu_scaled_mm.csv 2> $work/ncu_scaled_mm.err || rc=1
  rm -f $d/*.raw
  grep -E '"(gpu__time|sm__pipe|dram__|sm__throughput|smsp__average|launch__)' $work/ncu_scaled_mm.csv | awk -F'","' '{print $(NF-2), $(NF-1), $NF}' | head -20
  tail -3 $work/ncu_scaled_mm.err
  took
  ;;
ops)
  timeout ${OPS_TIMEOUT:-400} python3 tests/ops/opcheck.py ops --target cuda --jobs 16 --opcheck $opcheck --work /tmp/ops ${OPS_K:+-k $OPS_K} \
    > $work/ops.log 2>&1 || rc=1
  echo "cuda op cases: $(grep -E 'cases passed' $work/ops.log)"
  grep -E '^FAIL' $work/ops.log | head -8 | cut -c1-300
  took
  ;;
esac
pack
echo "rc=$rc"
exit $rc
