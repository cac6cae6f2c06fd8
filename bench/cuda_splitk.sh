#!/usr/bin/env bash
# On the GPU machine (device tool), in one call: split-K for tensor-core f32
# matmul_tn (issue 20).  Needs build-gpu/ (this tree) and build-gpu-old/mlc
# (the commit before, in build-gpu-old/COMMIT).  Logs go to $OUT.
#   1. bench/cuda_f32.sh with OPS_K=matmul: the matmul op cases against PyTorch,
#      the f32 GEMM table, the f32 models (GPT-2-like, MLP) with this build
#   2. bench/f32_models.py with the old build in the same call, for the ratio
set -uo pipefail
cd "$(dirname "$0")/.."
. tests/gpu/env.sh /tmp/mlc-splitk
rc=0
OPS_K=${OPS_K:-matmul} bash bench/cuda_f32.sh || rc=1
if [ -x build-gpu-old/mlc ]; then
  mkdir -p "$out/old"
  echo "## models, old build $(cat build-gpu-old/COMMIT 2>/dev/null)"
  timeout 180 python3 bench/f32_models.py --mlc build-gpu-old/mlc --target cuda --out "$out/old" --profile \
    --f32-matmul 3xtf32 > "$out/old/f32_models.log" 2>&1 || { rc=1; tail -5 "$out/old/f32_models.log"; }
  grep -E "^(gpt2like|mlp): " "$out/old/f32_models.log"
fi
(cd "$out" && tar czf logs.tgz $(find . -name "*.log" -o -name "*.md" -o -name "*.json" | grep -v logs.tgz))
echo "rc=$rc"
exit $rc
