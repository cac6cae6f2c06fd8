#!/usr/bin/env bash
# On the GPU machine (device tool), one call: issue 24's agreement with Nsight
# Compute, measured. `mlc calibrate --target cuda` first (mlc's verdicts then
# use the measured ceilings), then `mlc profile --ncu --ncu-json` of the
# 2-layer MiniLLM (bf16) and GPT-2-like (f32, 3xTF32) train steps: ncu runs
# each kernel with --clock-control none, filtered to mlc's NVTX ranges.
# Needs build-gpu/. Writes $OUT/{calibrate.log,minillm_l2.md,.json,gpt2like_l2.md,.json}.
set -uo pipefail
cd "$(dirname "$0")/.."
. tests/gpu/env.sh /tmp/mlc-ncu
export PATH=$PATH:/usr/local/cuda/bin:$(ls -d /opt/nvidia/nsight-compute/* 2>/dev/null | head -1)
mlc=build-gpu/mlc
rc=0
{ echo "# bench/h200_ncu.sh, $(date -u '+%F %T') UTC, commit ${COMMIT:-?}"
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; ncu --version | tail -1
  timeout 100 $mlc calibrate --target cuda; } > "$out/calibrate.log" 2>&1 || rc=1
tail -3 "$out/calibrate.log"
timeout 250 $mlc profile examples/minillm.mdl --target cuda --entry train_step --steps 2 --ncu \
  --ncu-json "$out/minillm_l2.json" layers=2 batch=2 > "$out/minillm_l2.md" 2>&1 || rc=1
grep -E "agree" "$out/minillm_l2.md" | tail -2
timeout 220 $mlc profile bench/gpt2like_f32.mdl --target cuda --entry train_step --steps 2 --ncu \
  --ncu-json "$out/gpt2like_l2.json" layers=2 > "$out/gpt2like_l2.md" 2>&1 || rc=1
grep -E "agree" "$out/gpt2like_l2.md" | tail -2
echo "rc=$rc"
exit $rc
