#!/usr/bin/env bash
# On the GPU machine (device tool), session 17: the persistent wgmma
# attention forward (mlc_attn_fwd_wg, codegen/cuda/attention.cuh; issue 19).
#   PART=ab     the forward alone (mlc profile bench/attention_bf16.mdl, its
#               `attention` row) at each of $CASES under each build of
#               BUILDS (default "build-base build-gpu": the tree before the
#               change and this one, A/B), two rounds; PyTorch's SDPA at the
#               same shapes; VARIANTS="|-DX|..." build-gpu's forward under
#               each probe macro at PROBE_CASES; NCU=1 Nsight Compute on
#               its forward at the MiniLLM's shape; then the op cases of -k
#               each of OPS_K (default _items: more work items than
#               multiprocessors); SANITIZE="cfg|cfg": compute-sanitizer
#               memcheck and racecheck on the attention train step at each;
#               then bench/h200_s16.sh (every
#               CUDA op case against float64, the SPIR-V op cases on NVIDIA,
#               plan files, clip_grad_norm through NCCL) unless SKIP_S16=1
#   PART=check  bench/cuda_flash.sh check with its op cases (attention, mha)
#   PART=final  check (SKIP_OPS=1: without the op cases), then model
#   PART=model  bench/cuda_flash.sh model (the MiniLLM's gradients against
#               PyTorch unless SKIP_MINILLM=1; train step and bf16 forward
#               against eager and torch.compile)
# Carry build-gpu/mlc, build-gpu/lib, build-gpu/codegen/cuda/mlc_opcheck,
# build-gpu/runtime/libmlcrt.a, .yardstick and each of BUILDS' mlc.  Logs in
# $OUT/logs.tgz; a summary on standard output.
set -uo pipefail
cd "$(dirname "$0")/.."
final=${OUT:-/tmp/mlc-s17}
work=/tmp/s17
rm -rf $work && mkdir -p $work "$final"
. tests/gpu/env.sh $work
export PATH=$PATH:/usr/local/cuda/bin:$(ls -d /opt/nvidia/nsight-compute/* 2>/dev/null | head -1)
pack() { tar -C $work -czf "$final/logs.tgz" .; }
CASES=${CASES:-"minillm:8,16,1024,128:false causal4096:2,16,4096,128:true d64causal:8,16,1000,64:true"}
rc=0
gpu_header "bench/h200_s17.sh PART=${PART:-}" $work/env.log
case ${PART:-} in
ab)
  for round in 1 2; do
    for b in ${BUILDS:-build-base build-gpu}; do
      for c in $CASES; do
        IFS=: read -r name shape causal <<< "$c"
        IFS=, read -r bb h s d <<< "$shape"
        r=$(XDG_CACHE_HOME=/tmp/cache-$b timeout 120 $b/mlc profile bench/attention_bf16.mdl --target cuda --steps 20 \
            b=$bb h=$h s=$s d=$d causal=$causal 2>&1 | tee -a $work/profile-$b.log | grep -E "^attention" | head -1 | cut -c1-100)
        echo "round $round $b $name: $r"
      done
    done
  done | tee $work/summary.log
  for c in $CASES; do
    IFS=: read -r name shape causal <<< "$c"
    echo "$name: $(timeout 120 python3 bench/attention_torch.py --shape "$shape" $([ "$causal" = true ] && echo --causal) 2>&1 |
      tee $work/torch-$name.log | grep -E "sdpa" | head -2 | tr '\n' ' ')"
  done | tee -a $work/summary.log
  pack
  # VARIANTS="|-DX|-DY": build-gpu's forward under each probe macro (through an nvcc wrapper, each with a kernel
  # cache of its own) at PROBE_CASES
  IFS='|' read -ra vs <<< "${VARIANTS:-}"
  i=0
  for v in "${vs[@]}"; do
    i=$((i + 1))
    printf '#!/bin/sh\nexec /usr/local/cuda/bin/nvcc %s "$@"\n' "$v" > /tmp/nvcc$i && chmod +x /tmp/nvcc$i
    for c in ${PROBE_CASES:-minillm:8,16,1024,128:false}; do
      IFS=: read -r name shape causal <<< "$c"
      IFS=, read -r bb h s d <<< "$shape"
      r=$(MLC_NVCC=/tmp/nvcc$i XDG_CACHE_HOME=/tmp/cache-v$i timeout 120 build-gpu/mlc profile bench/attention_bf16.mdl \
          --target cuda --steps 20 b=$bb h=$h s=$s d=$d causal=$causal 2>&1 | tee -a $work/probe-$i.log |
          grep -E "^attention" | head -1 | cut -c1-100)
      echo "variant [${v:-none}] $name: $r"
    done
  done | tee -a $work/summary.log
  # NCU=1: Nsight Compute on build-gpu's forward at the MiniLLM's shape
  if [ -n "${NCU:-}" ]; then
    XDG_CACHE_HOME=/tmp/cache-build-gpu timeout 200 ncu --kernel-name regex:mlc_attention --launch-count 1 \
      --section SpeedOfLight --section WarpStateStats --section ComputeWorkloadAnalysis --section LaunchStats \
      --section Occupancy --section MemoryWorkloadAnalysis build-gpu/mlc profile bench/attention_bf16.mdl --target cuda \
      --steps 1 > $work/ncu.log 2>&1 || rc=1
    grep -E "Duration|Throughput|Stall|Pipe|Issue|Warp Cycles|Eligible|Registers|L2 Hit|Executed Ipc" $work/ncu.log |
      head -50 | tee -a $work/summary.log
  fi
  pack
  for k in ${OPS_K:-_items}; do
    timeout 150 python3 tests/ops/opcheck.py ops --target cuda --jobs 16 --opcheck build-gpu/codegen/cuda/mlc_opcheck \
      --work /tmp/ops-$k -k $k > $work/ops_$k.log 2>&1 || rc=1
    echo "op cases -k $k: $(grep -E 'cases passed' $work/ops_$k.log)"
    grep -E "^FAIL" $work/ops_$k.log | head -5 | cut -c1-200
  done
  # SANITIZE="b=4 h=12 s=300 causal=true d=64|...": compute-sanitizer memcheck and racecheck on the attention
  # train step at each
  IFS='|' read -ra scs <<< "${SANITIZE:-}"
  for c in "${scs[@]}"; do
    l=${c// /_}
    for tool in memcheck racecheck; do
      timeout 120 compute-sanitizer --tool $tool build-gpu/mlc train bench/attention_bf16.mdl --target cuda --steps 1 $c \
        > $work/${tool}_$l.log 2>&1 || rc=1
      echo "compute-sanitizer $tool, attention train step $c: $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' $work/${tool}_$l.log | head -1)"
    done
  done
  pack
  if [ -z "${SKIP_S16:-}" ]; then
    mkdir -p $work/s16
    OUT=$work/s16 timeout 420 bash bench/h200_s16.sh || rc=1
  fi
  ;;
check)
  mkdir -p $work/flash
  OUT=$work/flash CASES="$CASES" timeout 500 bash bench/cuda_flash.sh check || rc=1
  ;;
final) # check without its op cases (SKIP_OPS=1: a caller whose PART=ab ran them all at the same kernels), then model
  mkdir -p $work/flash $work/model
  OUT=$work/flash SKIP_OPS=${SKIP_OPS:-} CASES="$CASES" timeout 260 bash bench/cuda_flash.sh check || rc=1
  pack
  OUT=$work/model SKIP_MINILLM=${SKIP_MINILLM:-} timeout 320 bash bench/cuda_flash.sh model || rc=1
  ;;
model)
  mkdir -p $work/model
  OUT=$work/model SKIP_MINILLM=${SKIP_MINILLM:-} timeout 560 bash bench/cuda_flash.sh model || rc=1
  ;;
*) echo "usage: PART=ab|check|final|model bash bench/h200_s17.sh"; exit 2 ;;
esac
pack
echo "rc=$rc"
exit $rc
