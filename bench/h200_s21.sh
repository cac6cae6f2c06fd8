#!/usr/bin/env bash
# On the GPU machine (device tool), session 21 (2026-12-05): the GPU checks
# owed by sessions 19 and 20, whose changes (the views pass, quantize before
# fuse, CUDA decode kernels) ran on nvcc only.
#   PART=check   every CUDA op case against PyTorch in float64; the MiniLLM's
#                logits (opcheck minillm); compute-sanitizer memcheck on the
#                small MiniLLM's train step; tests/ref/decode.py and
#                tests/ref/quant.py on --target cuda, with MLC_CUDA_GRAPHS=1.
#   PART=model   bench/cuda_flash.sh model: the MiniLLM's gradients and 20
#                AdamW steps against PyTorch, then the train step and the bf16
#                forward against eager and torch.compile.
#   PART=kernels the decode kernels changed after the first calls (mlc_qgemv,
#                mlc_gemv's split, attention_kv's warps): the linear and
#                attention_kv op cases, quant.py and decode.py on cuda, decode
#                speed (bf16, int4, int8), --cuda-gemv-ks 1 against the rule
#                (two rounds), and ncu's per-kernel times of a step.
#   PART=final   after PART=kernels: quant.py and decode.py on cuda, then
#                decode speed (int4, bf16, int8; two runs each).
#   PART=decode  decode speed against PyTorch eager (bench/decode_cpu.py) at the
#                MiniLLM's size: SPEED="name:dtype:quantize ..." (a name ending
#                in -nographs runs with MLC_CUDA_GRAPHS=0).
# Carry build-gpu/mlc, build-gpu/lib, build-gpu/codegen/cuda/mlc_opcheck,
# build-gpu/runtime/libmlcrt.a and .yardstick.  Logs in $OUT/logs.tgz; a
# summary on standard output, each step with its seconds.
set -uo pipefail
cd "$(dirname "$0")/.."
part=${PART:-check}
final=${OUT:-/tmp/mlc-s21}
work=/tmp/s21
rm -rf $work && mkdir -p $work "$final"
. tests/gpu/env.sh $work
export PATH=$PATH:/usr/local/cuda/bin
pack() { tar -C $work -czf "$final/logs.tgz" .; }
mlc=$PWD/build-gpu/mlc opcheck=build-gpu/codegen/cuda/mlc_opcheck
rc=0
t0=$SECONDS
took() { echo "  ($((SECONDS - t0)) s)"; t0=$SECONDS; }
# tests/ref/quant.py and tests/ref/decode.py on cuda, each with a time limit
quant_decode() { # quant's seconds, decode's seconds
  timeout $1 python3 tests/ref/quant.py $mlc $work/quant --target cuda > $work/quant.log 2>&1 || rc=1
  echo "cuda qlinear against numpy: $(grep -c '^ok:' $work/quant.log) ok, $(grep -c '^FAIL' $work/quant.log) FAIL"
  grep -E '^FAIL|Traceback|Error' $work/quant.log | head -3 | cut -c1-300; took
  timeout $2 python3 tests/ref/decode.py $mlc examples/minillm_causal.mdl $work/decode --target cuda > $work/decode.log 2>&1 || rc=1
  echo "cuda decode against PyTorch: $(grep -E 'greedy tokens|logits:|FAIL' $work/decode.log | tr '\n' ' ' | cut -c1-300)"; took
  pack
}
# bench/decode_cpu.py at the MiniLLM's size: runs, seconds each, then name:dtype:quantize ...
speed() {
  local runs=$1 limit=$2 c name dt q
  shift 2
  for c in "$@"; do
    IFS=: read -r name dt q <<< "$c"
    timeout $limit python3 bench/decode_cpu.py $mlc --target cuda --torch-device cuda --runs $runs --new 128 \
      --dtype $dt ${q:+--quantize $q} vocab=32000 dim=2048 layers=12 heads=16 max_ctx=1024 > $work/speed_$name.log 2>&1 || rc=1
    echo "decode $name: $(grep -E '^run|median|bandwidth' $work/speed_$name.log | cut -c1-200 | tr '\n' ' ')"; took
    pack
  done
}
gpu_header "bench/h200_s21.sh PART=$part" $work/env.log
case $part in
check)
  timeout 260 python3 tests/ops/opcheck.py ops --target cuda --jobs 16 --opcheck $opcheck --work /tmp/ops \
    > $work/ops.log 2>&1 || rc=1
  echo "cuda op cases: $(grep -E 'cases passed' $work/ops.log)"; grep -E '^FAIL' $work/ops.log | head -8 | cut -c1-300; took
  pack
  timeout 90 python3 tests/ops/opcheck.py minillm --target cuda --opcheck $opcheck --model examples/minillm.mdl --work /tmp/mini \
    > $work/minillm.log 2>&1 || rc=1
  echo "minillm logits: $(tail -2 $work/minillm.log | tr '\n' ' ' | cut -c1-300)"; took
  small="vocab=512 dim=128 layers=2 heads=4 batch=2 seq=64"
  timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $opcheck examples/minillm.mdl /tmp/san --target cuda \
    --func train $small --range tokens=0,512 --range targets=0,512 > $work/sanitizer.log 2>&1 || rc=1
  echo "memcheck train step: $(grep -E 'ERROR SUMMARY' $work/sanitizer.log | tail -1)"; took
  pack
  export MLC_CUDA_GRAPHS=1
  timeout 120 python3 tests/ref/decode.py $mlc examples/minillm_causal.mdl $work/decode --target cuda > $work/decode.log 2>&1 || rc=1
  echo "cuda decode against PyTorch: $(grep -E 'greedy tokens|logits:|FAIL|ok' $work/decode.log | tr '\n' ' ' | cut -c1-500)"; took
  quant_decode 90 90
  speed 3 100 bf16:bf16: int4:f32:int4 int8:f32:int8
  big="vocab=32000 dim=2048 layers=12 heads=16 max_ctx=1024"
  p64=$(python3 -c "print(','.join(str(i * 37 % 32000) for i in range(64)))")
  for r in 1 2; do for ks in 1 auto; do
    timeout 60 $mlc generate bench/minillm_causal_bf16.mdl --target cuda --prompt $p64 --max-new 130 $big prefill=16 batch=1 \
      $([ $ks = auto ] || echo --cuda-gemv-ks $ks) > $work/ab_ks${ks}_$r.log 2>&1 || rc=1
    echo "bf16 gemv ks=$ks round $r: $(grep -E '^decode' $work/ab_ks${ks}_$r.log)"
  done; done; took
  p16=$(python3 -c "print(','.join(str(i * 37 % 32000) for i in range(16)))")
  for c in bf16:bench/minillm_causal_bf16.mdl: int4:examples/minillm_causal.mdl:int4; do
    IFS=: read -r name mdl q <<< "$c"
    MLC_CUDA_GRAPHS=0 timeout 100 ncu --csv --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed \
      $mlc generate $mdl --target cuda --prompt $p16 --max-new 3 ${q:+--quantize $q} $big prefill=16 batch=1 > $work/ncu_$name.csv 2> $work/ncu_$name.err || rc=1
  done; took
  ;;
final) # the last device minutes: qgemv without I2F and fewer warps, the GEMV's rule at 4 KiB a warp
  export MLC_CUDA_GRAPHS=1
  quant_decode 60 40
  speed 2 70 int4:f32:int4 bf16:bf16: int8:f32:int8
  ;;
*) echo "usage: PART=check|model|decode|kernels|final bash bench/h200_s21.sh"; exit 2 ;;
esac
pack
echo "rc=$rc"
exit $rc
