#!/usr/bin/env bash
# On the GPU machine (device tool), session 33 (2026-12-07), one call, each
# step while the call has time ($SECONDS against LIMIT, default 560):
#   1. bench/spirv_attn_probe.sh: the cooperative-matrix attention forward's
#      ablations and candidate changes ($VARIANTS), with register counts;
#   2. the attention op cases on NVIDIA's driver with --spirv-attention=coopmat
#      (the forward and the gradient): the NV form under the Khronos
#      validation layer (a message fails a case) with MLC_VK_COOPMAT=nv (the
#      device without VK_KHR_cooperative_matrix, which Debian 12's layer does
#      not know), then the KHR form with each candidate of $CANDIDATES
#      (MLC_ATTN_PROBE bits, read by mlc_opcheck's code generator too; 0 the
#      committed kernel);
#   3. $PARTS of bench/gpu_s32.sh (default "spvprof spvtrain": the MiniLLM
#      forward on SPIR-V with eager PyTorch, the off-multiple bf16 model's
#      10 steps on cuda and spirv), each while 100 s are left;
#   4. on an H200, issue 24's ncu run (bench/h200_s28.sh) when 300 s are left.
# Carry build-gpu/{mlc,lib,codegen/cuda/mlc_opcheck,runtime/libmlcrt.a}, .gl,
# .yardstick.  Logs packed into $OUT/logs.tgz.
set -uo pipefail
cd "$(dirname "$0")/.."
dest=${OUT:-/tmp/mlc-s33}
work=/tmp/s33-work
mkdir -p "$dest" "$work"
limit=${LIMIT:-560}
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader)
echo "GPU: $gpu; commit ${COMMIT:-?}; $(date -u '+%F %T') UTC"
left() { echo $((limit - SECONDS)); }
OUT=$work bash bench/spirv_attn_probe.sh 2>&1 | tail -40
echo "[probe done $SECONDS s]"
(. tests/gpu/env.sh $work; vk_loader
 opc=build-gpu/codegen/cuda/mlc_opcheck
 ops() { # log, validate, form, probe bits
   [ $(left) -gt 60 ] || { echo "$1: skipped (time)"; return; }
   MLC_VK_COOPMAT=$3 MLC_ATTN_PROBE=$4 MLC_VK_VALIDATE=$2 timeout $(( $(left) - 30 < 170 ? $(left) - 30 : 170 )) python3 tests/ops/opcheck.py ops \
     --target spirv --jobs 12 --opcheck $opc --work /tmp/s33-ops/$1 -k attention --option=--spirv-coopmat=$3 \
     --option=--spirv-attention=coopmat > $work/ops_$1.log 2>&1
   echo "$1 (validate=$2, form $3, probe $4): $(grep -E 'cases passed' $work/ops_$1.log | tr '\n' ' ') [$SECONDS s]"
   grep -E '^FAIL' $work/ops_$1.log | head -4 | cut -c1-200
   grep -iE 'VUID|validation layer' $work/ops_$1.log | head -3 | cut -c1-240
 }
 ops nv_val 1 nv 0
 for pb in ${CANDIDATES:-}; do ops khr_$pb 0 khr $pb; done)
for p in ${PARTS:-spvprof spvtrain}; do
  [ $(left) -gt 100 ] || { echo "$p: skipped (time)"; continue; }
  COMMIT=${COMMIT:-?} FULL=0 PART=$p OUT=$work bash bench/gpu_s32.sh 2>&1 | grep -vE '^\[|^rc='
done
if echo "$gpu" | grep -q H200 && [ $(left) -gt 300 ]; then
  COMMIT=${COMMIT:-?} OUT=$work/ncu bash bench/h200_s28.sh 2>&1 | tail -30
fi
tar -C "$work" -czf "$dest/logs.tgz" .
echo "[done $SECONDS s]"
