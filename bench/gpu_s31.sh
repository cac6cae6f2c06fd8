#!/usr/bin/env bash
# On the GPU machine (device tool), session 31 (2026-12-06/07), in this order:
#  1. On an H200: bench/h200_s28.sh (issue 24, mlc's verdicts against ncu's).
#     On any other GPU: bench/spirv_gpu_time.sh (issue 23: the SPIR-V GEMM
#     timed by the host and by GPU timestamps, beside cuBLAS; the MiniLLM
#     forward; quant.py --target spirv on NVIDIA's driver).
#     PART overrides the choice ("ncu", "spirv", "decode": the MiniLLM-size
#     bf16 decode step with and without --profile; "proto": step 4 here).
#     CHECKS=0: only this.
#  2. tests/ref/quant.py --target cuda: 935000d's hoist in mlc_qgemv (the
#     word's group once a word) had not run on a GPU.
#  3. tests/dist/fsdp_reduce.py cuda-nccl (issue 31: reduce=bf16|f16 on
#     NCCL with one rank).
#  4. bench/proto/decode_persist.cu (issue 29: the decode step's GEMVs as
#     one launch each or as one persistent kernel), twice.
# Carry build-gpu/{mlc,lib,codegen/cuda/mlc_opcheck,runtime/libmlcrt.a},
# .yardstick, .gl.  Logs under $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
dest=${OUT:-/tmp/mlc-s31}
mkdir -p "$dest/quant" "$dest/proto"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader)
echo "GPU: $gpu; commit ${COMMIT:-?}"
rc=0
part=${PART:-}
[ -n "$part" ] || { if echo "$gpu" | grep -q H200; then part="ncu decode proto"; else part="decode proto spirv"; fi; }
for p in $part; do
  case $p in
  ncu) OUT=$dest/ncu COMMIT=${COMMIT:-?} bash bench/h200_s28.sh || rc=1 ;;
  spirv) OUT=$dest/spirv bash bench/spirv_gpu_time.sh || rc=1 ;;
  decode) # the MiniLLM-size bf16 decode step under --profile: each kernel's time, beside the proto's GEMVs
    mkdir -p $dest/decode
    (. tests/gpu/env.sh /tmp/s31-dec
     prompt=$(python3 -c "print(','.join(str(7 * i % 32000) for i in range(64)))")
     for prof in "" --profile; do
       timeout 240 build-gpu/mlc generate bench/minillm_causal_bf16.mdl --target cuda vocab=32000 dim=2048 layers=12 \
         heads=16 max_ctx=1024 --prompt $prompt --max-new 128 $prof
     done) > $dest/decode/generate_bf16.log 2>&1 || rc=1
    grep -iE "tok/s|token" $dest/decode/generate_bf16.log | head -4
    grep -E "^(fused|attention_kv|linear|embedding|cast)" $dest/decode/generate_bf16.log | head -12 ;;
  proto) # step 4 below, in this slot
    (export PATH=$PATH:/usr/local/cuda/bin
     nvcc -O3 -arch sm_90a -std=c++17 bench/proto/decode_persist.cu -o /tmp/s31-dp && timeout 60 /tmp/s31-dp) \
      > $dest/proto/decode_persist.log 2>&1 || rc=1
    cat $dest/proto/decode_persist.log ;;
  esac
  echo "[$SECONDS s]"
done
[ "${CHECKS:-1}" = 1 ] || { echo "rc=$rc [$SECONDS s]"; exit $rc; }
(. tests/gpu/env.sh /tmp/s31-quant
 nvidia-smi > $dest/quant/nvidia-smi.log 2>&1
 timeout 150 python3 tests/ref/quant.py build-gpu/mlc /tmp/s31-quant/w --target cuda > $dest/quant/quant_cuda.log 2>&1) || rc=1
echo "quant.py --target cuda: $(grep -c '^ok' $dest/quant/quant_cuda.log) ok, $(grep -c '^FAIL' $dest/quant/quant_cuda.log) FAIL [$SECONDS s]"
grep -E '^FAIL' $dest/quant/quant_cuda.log | head -4 | cut -c1-200
(. tests/gpu/env.sh /tmp/s31-red
 timeout 120 python3 tests/dist/fsdp_reduce.py build-gpu/mlc /tmp/s31-red/w cuda-nccl) > $dest/quant/fsdp_reduce.log 2>&1 || rc=1
echo "fsdp_reduce.py cuda-nccl: $(grep -c '^ok' $dest/quant/fsdp_reduce.log) ok, $(grep -c '^FAIL' $dest/quant/fsdp_reduce.log) FAIL [$SECONDS s]"
grep -E '^FAIL' $dest/quant/fsdp_reduce.log | head -4 | cut -c1-200
(export PATH=$PATH:/usr/local/cuda/bin
 nvcc -O3 -arch sm_90a -std=c++17 bench/proto/decode_persist.cu -o /tmp/s31-dp && for r in 1 2; do timeout 60 /tmp/s31-dp; done) \
  > $dest/proto/decode_persist.log 2>&1 || rc=1
cat $dest/proto/decode_persist.log
echo "rc=$rc [$SECONDS s]"
exit $rc
