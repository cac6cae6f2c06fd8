#!/usr/bin/env bash
# On the GPU machine (device tool): decode on the CUDA target (issue 29),
# written in session 19 (2026-12-05), with session 18's spirv checks.
#   PART=cuda (default):
#   1. The op cases of the new CUDA kernels against PyTorch in float64:
#      gemv (mlc_gemv, linears of at most 4 rows), attention_kv (mlc_attn_kv),
#      and linear (the GEMMs beside them: the gemv cases are among them).
#   2. tests/ref/decode.py --target cuda: 32 greedy tokens and each token's
#      logits against PyTorch's f32 decode of the same weights.
#      tests/ref/quant.py --target cuda: qlinear int8/int4 (mlc_qgemv, one
#      row and seven) against numpy's dequantised product.
#   3. Decode speed against PyTorch eager on the same GPU (static KV cache),
#      bench/decode_cpu.py --target cuda --torch-device cuda, at the
#      MiniLLM's size (vocab 32000, dim 2048, 12 layers, 16 heads, max_ctx
#      1024): bf16, f32 with --quantize int4 (group 128) and int8, and f32,
#      with the bandwidth limit measured in the call; bf16 again with
#      MLC_CUDA_GRAPHS=0 (every launch from the host, no graph).
#   PART=spirv: bench/h200_s18.sh PART=checks (the spirv GEMV, decode and
#      qlinear on NVIDIA's Vulkan driver).
# Carry build-gpu/mlc, build-gpu/lib, build-gpu/codegen/cuda/mlc_opcheck,
# build-gpu/runtime/libmlcrt.a (and .gl for PART=spirv).  Logs in
# $OUT/logs.tgz; a summary on standard output.
set -uo pipefail
cd "$(dirname "$0")/.."
part=${PART:-cuda}
if [ $part = spirv ]; then PART=checks exec bash bench/h200_s18.sh; fi
final=${OUT:-/tmp/mlc-s19}
work=/tmp/s19
rm -rf $work && mkdir -p $work "$final"
. tests/gpu/env.sh $work
export MLC_CUDA_GRAPHS=1 # recorded launches (opt-in until checked here): the op cases' second runs and decode.py too
export PATH=$PATH:/usr/local/cuda/bin
pack() { tar -C $work -czf "$final/logs.tgz" .; }
mlc=$PWD/build-gpu/mlc opcheck=build-gpu/codegen/cuda/mlc_opcheck
rc=0
gpu_header bench/h200_s19.sh $work/env.log
for kw in ${OPS_K:-gemv attention_kv linear}; do
  timeout 200 python3 tests/ops/opcheck.py ops --target cuda --jobs 12 --opcheck $opcheck --work /tmp/ops-$kw -k $kw \
    > $work/ops_$kw.log 2>&1 || rc=1
  echo "cuda op cases -k $kw: $(grep -E 'cases passed' $work/ops_$kw.log)"
  grep -E '^FAIL' $work/ops_$kw.log | head -5 | cut -c1-300
done
pack
timeout 200 python3 tests/ref/decode.py $mlc examples/minillm_causal.mdl $work/decode --target cuda > $work/decode.log 2>&1 || rc=1
echo "cuda decode against PyTorch: $(grep -E 'greedy tokens|logits:|FAIL|ok:' $work/decode.log | tr '\n' ' ' | cut -c1-600)"
timeout 120 python3 tests/ref/quant.py $mlc $work/quant --target cuda > $work/quant.log 2>&1 || rc=1
echo "cuda qlinear against numpy: $(grep -c '^ok' $work/quant.log) ok, $(grep -c '^FAIL' $work/quant.log) FAIL"
grep -E '^FAIL|Traceback|Error' $work/quant.log | head -3 | cut -c1-300
pack
big="vocab=32000 dim=2048 layers=12 heads=16 max_ctx=1024"
# name:dtype:quantize (empty: none); a name ending in -nographs runs with MLC_CUDA_GRAPHS=0
for c in ${SPEED:-bf16:bf16: bf16-nographs:bf16: int4:f32:int4 f32:f32: int8:f32:int8}; do
  IFS=: read -r name dt q <<< "$c"
  g=1; [ "${name%-nographs}" != "$name" ] && g=0
  MLC_CUDA_GRAPHS=$g timeout 150 python3 bench/decode_cpu.py $mlc --target cuda --torch-device cuda --runs 3 --new 128 --dtype $dt \
    ${q:+--quantize $q} $big > $work/speed_$name.log 2>&1 || rc=1
  echo "decode $name: $(grep -E '^run|median|bandwidth' $work/speed_$name.log | cut -c1-260 | tr '\n' ' ')"
  tail -3 $work/speed_$name.log | grep -iE "error|Traceback|exit" | head -3
  pack
done
pack
echo "rc=$rc"
exit $rc
