#!/usr/bin/env bash
# On the GPU machine (device tool): where a CUDA decode step's time goes
# (issue 29), at the MiniLLM's size (vocab 32000, dim 2048, 12 layers, 16
# heads, max_ctx 1024), PyTorch's init weights (no --weights).
#   1. mlc generate with --max-new 2, 34, 130 and 258 from a 64-token prompt:
#      the decode's milliseconds, so the steady step is the difference and
#      the first step's one-time cost shows.
#   2. Nsight Compute on a 16-token prompt and --max-new 3 (one prefill
#      chunk, two steps), MLC_CUDA_GRAPHS=0: each kernel's duration, DRAM
#      bytes read and DRAM throughput, as CSV.
# CASES="name:model:quantize ..." (default bf16 and f32 with int4).  Carry
# build-gpu/mlc, build-gpu/lib.  Logs in $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
. tests/gpu/env.sh /tmp/mlc-probe
export PATH=$PATH:/usr/local/cuda/bin
mlc=$PWD/build-gpu/mlc
big="vocab=32000 dim=2048 layers=12 heads=16 max_ctx=1024 prefill=16 batch=1"
gpu_header bench/decode_probe.sh "$out/env.log"
p64=$(python3 -c "print(','.join(str(i * 37 % 32000) for i in range(64)))")
p16=$(python3 -c "print(','.join(str(i * 37 % 32000) for i in range(16)))")
rc=0
for c in ${CASES:-bf16:bench/minillm_causal_bf16.mdl: int4:examples/minillm_causal.mdl:int4}; do
  IFS=: read -r name mdl q <<< "$c"
  for n in 2 34 130 258; do
    timeout 120 $mlc generate $mdl --target cuda --prompt $p64 --max-new $n ${q:+--quantize $q} $big > "$out/gen_${name}_$n.log" 2>&1 || rc=1
    echo "$name max-new $n: $(grep -E '^(prefill|decode):' "$out/gen_${name}_$n.log" | tr '\n' ' ')"
  done
  MLC_CUDA_GRAPHS=0 timeout 200 ncu --csv --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed \
    $mlc generate $mdl --target cuda --prompt $p16 --max-new 3 ${q:+--quantize $q} $big > "$out/ncu_$name.csv" 2> "$out/ncu_$name.err" || rc=1
  echo "$name ncu: $(grep -c gpu__time_duration "$out/ncu_$name.csv") kernels"
done
echo "rc=$rc"
exit $rc
