#!/usr/bin/env bash
# On the GPU machine (device tool): what session 18 (2026-12-05, written
# without a GPU) still owes NVIDIA's drivers, and its first numbers there.
#   1. The op cases of the GEMV (linear_gemv_*, one new) and of linear on
#      cuda, and on spirv through NVIDIA's Vulkan driver: the SPIR-V target's
#      new matrix-vector kernel for linears of at most 4 rows (issue 29);
#      spirv's attention cases (attention_tiled.c changed for attention_kv,
#      its other code byte-identical).
#   2. Decode on spirv through NVIDIA's driver: tests/ref/decode.py --target
#      spirv (32 greedy tokens and logits against PyTorch's) and
#      tests/ref/quant.py --target spirv (qlinear int8/int4, GEMV and rows,
#      against numpy's dequantised product).
#   3. Decode speed: bench/decode_cpu.py --target spirv against PyTorch eager
#      on the GPU (f32, static KV cache), at CONFIGS (default the small model
#      and one at dim 1024, 8 layers, vocab 32000), f32 and --quantize
#      int8/int4.
#   4. FP8's ceiling (issue 30, plan step 1's first half): bench/fp8_ceiling.py,
#      cuBLAS's e4m3 GEMM (torch._scaled_mm) against its bf16 one at the
#      MiniLLM's 15 GEMM shapes, fast and promoted accumulation.
# PART=checks runs 1 and 2, PART=speed 3 and 4 (each inside one call's ten
# minutes); unset, all four.
# Carry build-gpu/mlc, build-gpu/lib, build-gpu/codegen/cuda/mlc_opcheck,
# build-gpu/runtime/libmlcrt.a and .gl.  Logs in $OUT/logs.tgz; a summary on
# standard output.
set -uo pipefail
cd "$(dirname "$0")/.."
final=${OUT:-/tmp/mlc-s18}
work=/tmp/s18
rm -rf $work && mkdir -p $work "$final"
. tests/gpu/env.sh $work
vk_loader
export PATH=$PATH:/usr/local/cuda/bin
pack() { tar -C $work -czf "$final/logs.tgz" .; }
mlc=$PWD/build-gpu/mlc opcheck=build-gpu/codegen/cuda/mlc_opcheck
rc=0
gpu_header bench/h200_s18.sh $work/env.log
$mlc devices >> $work/env.log 2>&1
part=${PART:-all}
if [ $part != speed ]; then
for t in cuda spirv; do
  for kw in gemv linear $([ $t = spirv ] && echo attention); do
    timeout 150 python3 tests/ops/opcheck.py ops --target $t --jobs 12 --opcheck $opcheck --work /tmp/ops-$t-$kw -k $kw \
      > $work/ops_${t}_$kw.log 2>&1 || rc=1
    echo "$t op cases -k $kw: $(grep -E 'cases passed' $work/ops_${t}_$kw.log)"
    grep -E '^FAIL' $work/ops_${t}_$kw.log | head -5 | cut -c1-200
  done
done
pack
timeout 240 python3 tests/ref/decode.py $mlc examples/minillm_causal.mdl $work/decode --target spirv > $work/decode.log 2>&1 || rc=1
echo "spirv decode against PyTorch: $(grep -E 'greedy tokens|logits:|FAIL' $work/decode.log | tr '\n' ' ')"
timeout 240 python3 tests/ref/quant.py $mlc $work/quant --target spirv > $work/quant.log 2>&1 || rc=1
echo "spirv qlinear against numpy: $(grep -c '^ok' $work/quant.log) ok, $(grep -c '^FAIL' $work/quant.log) FAIL"
pack
fi
if [ $part != checks ]; then
for c in ${CONFIGS:-"small:" "d1024:dim=1024 layers=8 heads=16 vocab=32000 max_ctx=512"}; do
  name=${c%%:*} defs=${c#*:}
  for q in "" int8 int4:group=64; do
    timeout 240 python3 bench/decode_cpu.py $mlc --target spirv --torch-device cuda --runs 3 ${q:+--quantize $q} $defs \
      > $work/speed_${name}_${q:-f32}.log 2>&1 || rc=1
    echo "decode $name ${q:-f32}: $(grep -E '^run 2|median' $work/speed_${name}_${q:-f32}.log | cut -c1-220 | tr '\n' ' ')"
  done
done
pack
for acc in fast promote; do
  timeout 200 python3 bench/fp8_ceiling.py --accum $acc > $work/fp8_ceiling_$acc.log 2>&1 || rc=1
  echo "fp8 ceiling ($acc): $(tail -1 $work/fp8_ceiling_$acc.log)"
done
pack
fi
echo "rc=$rc"
exit $rc
