#!/usr/bin/env bash
# On the GPU machine (device tool), one call: the wgmma attention kernels at
# head dim 64 (forward and gradient, first run), then the artifact and the
# Python binding's first GPU runs:
#   1. bench/cuda_flash.sh check (attention and MHA op cases, compute-sanitizer
#      on the train step at d128 and d64, the three shapes against PyTorch's SDPA);
#   2. bench/h200_artifact.sh (issue 25: a CUDA artifact built elsewhere, moved,
#      built with this machine's CMake, pkg-config and cc, run against PyTorch);
#   3. bench/h200_python.sh (issue 26: the binding on torch CUDA tensors).
# Carry build-gpu/mlc, build-gpu/codegen/cuda/mlc_opcheck, build-gpu/lib,
# build-gpu/artifacts (bench/artifact_prep.sh). Logs under $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
final=${OUT:-/tmp/mlc-d64}
mkdir -p "$final/flash"
rc=0
echo "## 1. attention"
OUT=$final/flash bash bench/cuda_flash.sh check || rc=1
echo "## 2. artifact"
bash bench/h200_artifact.sh > "$final/artifact.log" 2>&1 || rc=1
tail -15 "$final/artifact.log"
echo "## 3. python"
bash bench/h200_python.sh > "$final/python_run.log" 2>&1 || rc=1
tail -25 "$final/python_run.log"
echo "rc=$rc"
exit $rc
