#!/usr/bin/env bash
# On the GPU machine (device tool): what bounds the wgmma attention forward
# (mlc_attn_fwd_wg, codegen/cuda/attention.cuh)?  The same kernel built with
# parts changed by the probe macros there (MLC_ATTN_PROBE_NOLOAD: the
# producer loads no k/v; _NOEXP: no exponentials; _NOTURN: no ping-pong;
# _NOSTORE: o computed and transposed but not stored, its 16-byte stores gone;
# the trial MLC_ATTN_FAST_SOFTMAX of 2026-12-03 is now the default and names nothing),
# given as VARIANTS="|-DX|-DY" through an nvcc wrapper (MLC_NVCC), each with
# its own kernel cache, timed by `mlc profile` at each of $CASES; PyTorch's
# SDPA at the same shapes; with NCU=1 Nsight Compute's warp-state and memory
# sections on the unchanged forward.  Needs build-gpu/.  Logs in $OUT/logs.tgz.
set -uo pipefail
cd "$(dirname "$0")/.."
final=${OUT:-/tmp/mlc-attn-probe}
work=/tmp/attn-probe-logs
rm -rf $work && mkdir -p $work "$final"
. tests/gpu/env.sh $work
mlc=$PWD/build-gpu/mlc
gpu_header bench/attn_probe.sh $work/env.log
CASES=${CASES:-"8,16,1024,128:false 2,16,4096,128:true"}
VARIANTS=${VARIANTS:-""}
IFS='|' read -ra vs <<< "$VARIANTS"
i=0
for v in "${vs[@]}"; do
  i=$((i + 1))
  printf '#!/bin/sh\nexec /usr/local/cuda/bin/nvcc %s "$@"\n' "$v" > /tmp/nvcc$i && chmod +x /tmp/nvcc$i
  for c in $CASES; do
    IFS=: read -r shape causal <<< "$c"
    IFS=, read -r b h s d <<< "$shape"
    r=$(MLC_NVCC=/tmp/nvcc$i XDG_CACHE_HOME=/tmp/attn-cache$i timeout 120 $mlc profile bench/attention_bf16.mdl --target cuda \
        --steps 10 b=$b h=$h s=$s d=$d causal=$causal 2>&1 | tee -a $work/profile$i.log | grep -E "^attention" | head -1 | cut -c1-110)
    echo "variant [${v:-none}] b$b h$h s$s d$d causal=$causal: $r"
  done
done | tee $work/summary.log
for c in $CASES; do
  IFS=: read -r shape causal <<< "$c"
  timeout 120 python3 bench/attention_torch.py --shape "$shape" $([ "$causal" = true ] && echo --causal) 2>&1 | grep -E "sdpa|fprop|flash" | head -3
done | tee -a $work/summary.log
if [ -n "${NCU:-}" ]; then
  XDG_CACHE_HOME=/tmp/attn-cache-ncu timeout 240 ncu -k regex:attention --launch-count 1 --section SpeedOfLight \
    --section WarpStateStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section Occupancy \
    $mlc profile bench/attention_bf16.mdl --target cuda --steps 1 > $work/ncu.log 2>&1
  grep -E "Duration|Throughput|Stall|Pipe|Issue|Warp Cycles|Active|L2|Eligible" $work/ncu.log | head -60 | tee -a $work/summary.log
fi
tar -C $work -czf "$final/logs.tgz" .
