#!/usr/bin/env bash
# On the GPU machine (device tool), one call of at most 8 minutes: the SPIR-V
# target's cooperative-matrix GEMM at 4096^3 over workgroup tiles
# (--spirv-gemm-tile) and both forms (--spirv-coopmat=khr|nv), f16 and bf16,
# beside torch.matmul (cuBLAS) f16 and bf16 in the same call; the fastest
# configuration of each dtype and form checked against torch
# (bench/spirv_gemm_sweep.py says what and in which order).  bf16 runs on
# cooperative matrices with khr only (bf16 matrices, VK_KHR_shader_bfloat16).  Writes $OUT/gemm_sweep.md, gemm_sweep.json,
# env.log and logs/; prints the best per dtype.
#
# Uses build-gpu/mlc (the CUDA-only build, which also runs --target spirv)
# and the Vulkan loader from the carried .gl debs (tests/gpu/env.sh's
# vk_loader), as bench/h200_khr.sh does:
#   run(carry=[.gl, build-gpu/mlc, build-gpu/lib], "COMMIT=<hash> bash bench/h200_spirv_gemm.sh")
# Knobs: TILES="default 128x128x64x64x16x2 ..." (the sweep's tiles; default:
# the list in spirv_gemm_sweep.py), FORMS=khr or nv (default both), BUDGET
# (seconds for cuBLAS and the sweep before the checks, default 330).
set -uo pipefail
cd "$(dirname "$0")/.."
. tests/gpu/env.sh /tmp/mlc-spirv-gemm
vk_loader
mlc=$PWD/build-gpu/mlc
gpu_header bench/h200_spirv_gemm.sh "$out/env.log"
$mlc devices --target spirv 2>&1 | tee -a "$out/env.log"
args=(--mlc "$mlc" --out "$out" --n 4096 --runs 30 --budget "${BUDGET:-330}" --forms "${FORMS:-khr,nv}")
[ -n "${TILES:-}" ] && args+=(--tiles "$TILES")
timeout 450 python3 bench/spirv_gemm_sweep.py "${args[@]}"
rc=$?
echo "rc=$rc"
exit $rc
