#!/usr/bin/env bash
# On the GPU machine (device tool), session 30 (2026-12-06).
#   PART=ncu     bench/h200_s28.sh (issue 24: mlc's verdicts against ncu's,
#                the 2-layer MiniLLM and GPT-2-like train steps), on an H200
#                only (the H100's were measured in session 29).
#   PART=quant   issue 29 with bf16 scales (df677a0): tests/ref/quant.py
#                --target cuda (bf16 and f32 scales), decode.py, the linear
#                op cases; then the MiniLLM-size decode step, bf16 and int4
#                with bf16 scales, int4 with f32 scales, int4:asym, while the
#                time lasts (LIMIT, seconds from the start).
#   PART=graphs  whether CUDA graphs can become the default (issue 29): every
#                CUDA op case and bench/cuda_minillm.py --small with
#                MLC_CUDA_GRAPHS=1.
#   PART is a list; the default "ncu quant graphs" (each part's share of
#   LIMIT: QUANT_S seconds for quant, the rest after it).
# Carry build-gpu/mlc, build-gpu/lib, build-gpu/codegen/cuda/mlc_opcheck,
# build-gpu/runtime/libmlcrt.a and .yardstick.  Logs under $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
dest=${OUT:-/tmp/mlc-s30}
mkdir -p "$dest"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader)
echo "GPU: $gpu; commit ${COMMIT:-?}"
rc=0
for part in ${PART:-ncu quant graphs}; do
  case $part in
  ncu)
    if echo "$gpu" | grep -q H200; then
      OUT=$dest/ncu COMMIT=${COMMIT:-?} bash bench/h200_s28.sh || rc=1
    else
      echo "ncu: not an H200; skipped"
    fi ;;
  quant)
    OUT=$dest/quant PART=decode OPS_K=linear VARIANTS=trig:1: RUNS=${RUNS:-2} \
      DTYPES="bf16:bf16: int4:f32:int4 int4s32:f32:int4:scales=f32 int4a:f32:int4:asym" \
      LIMIT=${QUANT_S:-300} bash bench/h200_s23.sh | grep -v '^  (' || rc=1 ;;
  graphs)
    mkdir -p $dest/graphs
    . tests/gpu/env.sh /tmp/s30-graphs
    export MLC_CUDA_GRAPHS=1
    left=$((${LIMIT:-540} - SECONDS - 100))
    [ $left -gt 60 ] || { echo "graphs: no time left"; continue; }
    timeout $left python3 tests/ops/opcheck.py ops --target cuda --jobs 16 --opcheck build-gpu/codegen/cuda/mlc_opcheck \
      --work /tmp/ops-graphs > $dest/graphs/ops_all.log 2>&1 || rc=1
    echo "cuda op cases, graphs on: $(grep -E 'cases passed' $dest/graphs/ops_all.log)"
    grep -E '^FAIL' $dest/graphs/ops_all.log | head -8 | cut -c1-300
    timeout 90 python3 bench/cuda_minillm.py --mlc build-gpu/mlc --opcheck build-gpu/codegen/cuda/mlc_opcheck \
      --work /tmp/fmini-graphs --small --steps 20 > $dest/graphs/minillm_small.log 2>&1 || rc=1
    echo "cuda_minillm --small, graphs on: $(grep -c '^ok' $dest/graphs/minillm_small.log) ok, $(grep -c '^FAIL' $dest/graphs/minillm_small.log) FAIL"
    unset MLC_CUDA_GRAPHS ;;
  esac
done
echo "rc=$rc"
exit $rc
