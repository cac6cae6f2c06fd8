#!/usr/bin/env bash
# On the H200 (device tool), in one call, the checks of a session's end:
#   1. tests/gpu/cuda_check.sh: every CUDA op case against PyTorch, the small
#      MiniLLM's logits, compute-sanitizer on its train step, 5 train steps
#      (build-gpu/);
#   2. bench/spirv_drift_h200.sh: the bf16 GPT-2-like on cuda and spirv (and
#      the old build), and the 16-bit op cases on NVIDIA's Vulkan driver
#      (build-vkgpu/, build-vkgpu-old/, .gl);
#   3. issue 24: `mlc profile --ncu` of the MiniLLM train step (bf16) and of the
#      GPT-2-like f32 one: mlc's verdicts beside Nsight Compute's, as JSON.
# Each part writes into a folder of its own under $OUT; one logs.tgz holds all.
set -uo pipefail
cd "$(dirname "$0")/.."
top=${OUT:-/tmp/mlc-final}
mkdir -p "$top"
rc=0
pack() { (cd "$top" && tar czf /tmp/final-logs.tgz --exclude logs.tgz . && mv /tmp/final-logs.tgz logs.tgz); }
echo "## 1. cuda_check"
OUT=$top/cuda timeout 270 bash tests/gpu/cuda_check.sh > "$top/cuda.txt" 2>&1 || rc=1
grep -E "cases passed|^FAIL|ERROR SUMMARY|^step|max" "$top/cuda.txt" | tail -14
pack
echo "## 2. spirv"
OUT=$top/spirv COMMIT=${COMMIT:-?} timeout 150 bash bench/spirv_drift_h200.sh > "$top/spirv.txt" 2>&1 || rc=1
tail -8 "$top/spirv.txt"
pack
echo "## 3. ncu"
mkdir -p "$top/ncu"
export PATH=$PATH:/usr/local/cuda/bin:$(ls -d /opt/nvidia/nsight-compute/* 2>/dev/null | head -1)
export LD_LIBRARY_PATH=$PWD/build-gpu/lib:${LD_LIBRARY_PATH:-} XDG_CACHE_HOME=/tmp/mlc-cache
timeout 90 build-gpu/mlc profile examples/minillm.mdl --target cuda --entry train_step --ncu \
  --ncu-json "$top/ncu/minillm.json" > "$top/ncu/minillm.md" 2>&1 || rc=1
grep -E "agreement|DISAGREE" "$top/ncu/minillm.md" | tail -12
pack
timeout 60 build-gpu/mlc profile bench/gpt2like_f32.mdl --target cuda --entry train_step --f32-matmul tf32x3 --ncu \
  --ncu-json "$top/ncu/gpt2like_f32.json" > "$top/ncu/gpt2like_f32.md" 2>&1 || rc=1
grep -E "agreement|DISAGREE" "$top/ncu/gpt2like_f32.md" | tail -12
pack
echo "rc=$rc"
exit $rc
