#!/usr/bin/env bash
# On the GPU machine (device tool), session 15: the bf16 attention gradient
# (mlc_attn_bwd_wg and its two small launches, codegen/cuda/attention.cuh;
# design note docs/notes/attention-bwd-next.md).
#   PART=probe  step 0 of the note: attention_grad_saved in the train step
#               (mlc profile bench/attention_bf16.mdl --entry train_step) at
#               each of $CASES under each probe macro of mlc_attn_bwd_wg
#               (VARIANTS: "|-DMLC_ATTN_PROBE_BWD_NORED|..."; each reaches nvcc
#               through an $MLC_NVCC wrapper with a kernel cache of its own),
#               and under each build of BUILDS (default build-gpu; e.g.
#               "build-old build-gpu": an older tree's kernels, A/B); SDPA at
#               the same shapes; then Nsight Compute on the three launches of
#               attention_grad_saved at the MiniLLM's shape (durations,
#               --clock-control none; the main one's warp stalls; NCU_CASES:
#               "b=8 h=16 s=1024 d=128|..." other shapes; SKIP_NCU=1 none).  OPS_K=SUBSTR:
#               those op cases first
#   PART=check  every CUDA op case against float64 (the GPU numerics check;
#               SKIP_OPS=1 leaves them out), then bench/cuda_flash.sh check
#               (compute-sanitizer on the attention gradient at odd lengths,
#               attention against SDPA at $CASES)
#   PART=model  bench/cuda_flash.sh model (the MiniLLM train step and bf16
#               forward against eager and torch.compile), SKIP_MINILLM=1
# Carry build-gpu/mlc, build-gpu/lib, build-gpu/codegen/cuda/mlc_opcheck,
# .yardstick and each of BUILDS' mlc.  Logs in $OUT/logs.tgz.
set -uo pipefail
cd "$(dirname "$0")/.."
final=${OUT:-/tmp/mlc-s15}
work=/tmp/s15
rm -rf $work && mkdir -p $work "$final"
. tests/gpu/env.sh $work
export PATH=$PATH:/usr/local/cuda/bin:$(ls -d /opt/nvidia/nsight-compute/* 2>/dev/null | head -1)
pack() { tar -C $work -czf "$final/logs.tgz" .; }
CASES=${CASES:-"minillm:8,16,1024,128:false causal4096:2,16,4096,128:true d64causal:8,16,1000,64:true"}
rc=0
gpu_header "bench/h200_s15.sh PART=${PART:-}" $work/env.log
case ${PART:-} in
probe)
  [ -z "${OPS_K:-}" ] || { timeout 200 python3 tests/ops/opcheck.py ops --target cuda --jobs 16 \
    --opcheck build-gpu/codegen/cuda/mlc_opcheck --work /tmp/ops-sel -k "$OPS_K" > $work/ops.log 2>&1 || rc=1
    grep -E "^FAIL|cases passed" $work/ops.log; }
  VARIANTS=${VARIANTS-"|-DMLC_ATTN_PROBE_BWD_NORED|-DMLC_ATTN_PROBE_BWD_NODQ|-DMLC_ATTN_PROBE_BWD_NOEXP"}
  IFS='|' read -ra vs <<< "$VARIANTS"
  [ ${#vs[@]} -gt 0 ] || vs=("")
  for round in 1 2; do
    for b in ${BUILDS:-build-gpu}; do
      i=0
      for v in "${vs[@]}"; do
        i=$((i + 1))
        printf '#!/bin/sh\nexec /usr/local/cuda/bin/nvcc %s "$@"\n' "$v" > /tmp/nvcc$i && chmod +x /tmp/nvcc$i
        for c in $CASES; do
          IFS=: read -r name shape causal <<< "$c"
          IFS=, read -r bb h s d <<< "$shape"
          r=$(MLC_NVCC=/tmp/nvcc$i XDG_CACHE_HOME=/tmp/cache-$b-$i timeout 120 $b/mlc profile bench/attention_bf16.mdl \
              --target cuda --entry train_step --steps 10 b=$bb h=$h s=$s d=$d causal=$causal 2>&1 |
              tee -a $work/profile-$b-$i.log | grep -E "^attention_grad" | head -1 | cut -c1-100)
          echo "round $round $b [${v:-none}] $name: $r"
        done
      done
    done
  done | tee $work/summary.log
  for c in $CASES; do
    IFS=: read -r name shape causal <<< "$c"
    echo "$name: $(timeout 120 python3 bench/attention_torch.py --shape "$shape" $([ "$causal" = true ] && echo --causal) 2>&1 |
      tee $work/torch-$name.log | grep -E "sdpa" | head -2 | tr '\n' ' ')"
  done | tee -a $work/summary.log
  pack
  [ -n "${SKIP_NCU:-}" ] || for b in ${BUILDS:-build-gpu}; do
    IFS='|' read -ra ncs <<< "${NCU_CASES:-b=8 h=16 s=1024 d=128}"
    for nc in "${ncs[@]}"; do
      l=${nc// /_}
      XDG_CACHE_HOME=/tmp/cache-ncu-$b timeout 240 ncu --clock-control none --kernel-name regex:attention_grad_saved \
        --launch-count 3 --section SpeedOfLight --section WarpStateStats --section LaunchStats --section Occupancy \
        $b/mlc profile bench/attention_bf16.mdl --target cuda --entry train_step --steps 1 $nc \
        > $work/ncu-$b-$l.log 2>&1 || rc=1
      echo "## ncu $b $nc"
      grep -E "mlc_attention|Duration|Compute \(SM\) Throughput|Memory Throughput|Registers Per|Warp Cycles Per Issued" \
        $work/ncu-$b-$l.log | head -30
    done
  done
  ;;
check)
  [ -n "${SKIP_OPS:-}" ] || { timeout 300 python3 tests/ops/opcheck.py ops --target cuda --jobs 16 \
    --opcheck build-gpu/codegen/cuda/mlc_opcheck --work /tmp/ops-all > $work/ops.log 2>&1 || rc=1
    grep -E "^FAIL|cases passed" $work/ops.log; }
  mkdir -p $work/flash
  OUT=$work/flash SKIP_OPS=1 CASES="$CASES" timeout 400 bash bench/cuda_flash.sh check || rc=1
  ;;
model)
  mkdir -p $work/model
  OUT=$work/model SKIP_MINILLM=${SKIP_MINILLM:-1} timeout 400 bash bench/cuda_flash.sh model || rc=1
  ;;
*) echo "usage: PART=probe|check|model bash bench/h200_s15.sh"; exit 2 ;;
esac
pack
echo "rc=$rc"
exit $rc
