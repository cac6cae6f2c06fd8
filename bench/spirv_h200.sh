#!/usr/bin/env bash
# On the GPU machine (device tool), in one call: mlc's SPIR-V target on
# NVIDIA's Vulkan driver, against mlc's CUDA target and PyTorch on the same
# GPU.  Logs go to $OUT (else /tmp/mlc-spirv).
#
# Nothing is built there (no Vulkan headers, no SPIRV-Tools): build here,
# with SPIRV-Tools linked statically, and carry the binaries, their two
# shared libraries, and the Vulkan loader's debs (.gl, as the device's
# README.md says):
#   cmake -S . -B build-vkgpu -G Ninja -DMLC_BACKEND_CPU=OFF -DMLC_BACKEND_CUDA=ON -DMLC_BACKEND_SPIRV=ON
#   ninja -C build-vkgpu mlc mlc_opcheck
#   mkdir -p build-vkgpu/lib && cp -L /lib/x86_64-linux-gnu/{libxxhash.so.0,libcjson.so.1} build-vkgpu/lib/
#   carry: .gl build-vkgpu/mlc build-vkgpu/codegen/cuda/mlc_opcheck build-vkgpu/lib
# and check those very binaries here on lavapipe first (a call spent on a
# broken build measures nothing):
#   python3 tests/ops/opcheck.py ops --target spirv -k matmul --opcheck build-vkgpu/codegen/cuda/mlc_opcheck --work /tmp/o
#   build-vkgpu/mlc bench bench/gemm_f16.mdl --target spirv n=256 --runs 2
# Steps (each bounded, so that one slow step cannot eat the call):
#   the devices mlc sees; every op case against PyTorch (opcheck.py --target
#   spirv); the 4096^3 GEMM in f16 and bf16 (cooperative matrices where the
#   driver offers them) against torch.matmul (cuBLAS); the full MiniLLM
#   forward in bf16 on spirv, on cuda, and in PyTorch.
set -uo pipefail
cd "$(dirname "$0")/.."
. tests/gpu/vk_env.sh /tmp/mlc-spirv
{
  echo "# bench/spirv_h200.sh, $(date -u '+%F %T') UTC, commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  echo "VK_DRIVER_FILES=${VK_DRIVER_FILES:-}"
  $mlc devices --target spirv
} 2>&1 | tee "$out/env.log"
if [ -z "${SKIP_OPS:-}" ]; then # SKIP_OPS=1: the timings alone (the ops were checked on lavapipe)
  timeout 75 python3 tests/ops/opcheck.py ops --target spirv --jobs 12 --opcheck $opcheck --work /tmp/ops \
    > "$out/ops.log" 2>&1
  echo "ops: exit $?; $(tail -1 "$out/ops.log")"
fi
{
  for dt in f16 bf16; do
    echo "## mlc spirv GEMM $dt 4096^3"
    timeout 30 $mlc bench bench/gemm_$dt.mdl --target spirv n=4096 --runs 20 --warmup 3
  done
  echo "## mlc cuda GEMM bf16 4096^3"
  timeout 25 $mlc bench bench/gemm_bf16.mdl --target cuda n=4096 --runs 20 --warmup 3
  echo "## torch"
  timeout 25 python3 bench/spirv_torch.py gemm --n 4096
} 2>&1 | tee "$out/gemm.log"
{
  echo "## mlc spirv MiniLLM forward bf16"
  timeout 65 $mlc bench bench/minillm_bf16.mdl --target spirv --runs 10 --warmup 2 --profile
  echo "## mlc cuda MiniLLM forward bf16"
  timeout 40 $mlc bench bench/minillm_bf16.mdl --target cuda --runs 10 --warmup 2
  echo "## torch"
  timeout 30 python3 bench/spirv_torch.py minillm --runs 10
} 2>&1 | tee "$out/minillm.log"
