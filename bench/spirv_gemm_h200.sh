#!/usr/bin/env bash
# On the GPU machine (device tool), in one call: the SPIR-V target's
# cooperative-matrix GEMM on NVIDIA's Vulkan driver at 4096^3, for several
# workgroup tiles, against torch.matmul (cuBLAS) on the same GPU; before the
# timings, the GEMM op cases against PyTorch through the same driver (the
# cooperative-matrix kernels run only there: lavapipe has none).  Logs go to
# $OUT (else /tmp/mlc-spirv-gemm).
#
# Build and carry as bench/spirv_h200.sh's header says (build-vkgpu, .gl,
# build-vkgpu/lib), and check those binaries on lavapipe first, the
# cooperative-matrix kernel's staging and store included (its emulation):
#   python3 tests/ops/opcheck.py ops --option=--spirv-emulate-coopmat --option=--spirv-gemm-tile=64x64x32x32 \
#     --target spirv -k mat --opcheck build-vkgpu/codegen/cuda/mlc_opcheck --work /tmp/o
# Knobs: TILES="default BMxBNxWMxWN ..." (--spirv-gemm-tile of each f16
# run; "default" is the code generator's choice), SKIP_OPS=1 (no op cases),
# MINILLM=1 (also the MiniLLM forward on spirv, cuda and torch, as
# bench/spirv_h200.sh times it), STATS=1 (what the driver reports of each
# GEMM pipeline: registers and so on, MLC_VK_PIPELINE_STATS; and the first
# tile's internal representations, if it gives any, as ir.tgz).
set -uo pipefail
cd "$(dirname "$0")/.."
. tests/gpu/vk_env.sh /tmp/mlc-spirv-gemm
{
  echo "# bench/spirv_gemm_h200.sh, $(date -u '+%F %T') UTC, commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  $mlc devices --target spirv
} 2>&1 | tee "$out/env.log"
if [ -z "${SKIP_OPS:-}" ]; then
  for k in mat lin; do # the matmul, matmul_tn, linear and fused-GEMM cases
    timeout 90 python3 tests/ops/opcheck.py ops --target spirv -k $k --jobs 12 --opcheck $opcheck --work /tmp/ops
  done > "$out/ops.log" 2>&1
  echo "ops: $(grep -c ^PASS "$out/ops.log") passed, $(grep -c ^FAIL "$out/ops.log") failed"
  grep ^FAIL "$out/ops.log" | cut -c1-300
fi
if [ -n "${STATS:-}" ]; then # the driver's statistics of each pipeline; the first tile's code too
  export MLC_VK_PIPELINE_STATS=1 MLC_VK_PIPELINE_IR=/tmp/ir
  mkdir -p /tmp/ir
fi
{
  for t in ${TILES:-default}; do
    echo "## mlc spirv GEMM f16 4096^3, tile $t"
    tile=; [ "$t" = default ] || tile=--spirv-gemm-tile=$t
    timeout 30 $mlc bench bench/gemm_f16.mdl --target spirv n=4096 $tile --runs 20 --warmup 3
    rc=$?
    if [ $rc -ne 0 ] && [ -n "${MLC_VK_PIPELINE_STATS:-}" ]; then # no statistics then, but the time
      echo "(exit $rc with statistics on: again without)"
      unset MLC_VK_PIPELINE_STATS
      timeout 30 $mlc bench bench/gemm_f16.mdl --target spirv n=4096 $tile --runs 20 --warmup 3
    fi
    unset MLC_VK_PIPELINE_IR
  done
  if [ -n "${STATS:-}" ]; then tar czf "$out/ir.tgz" -C /tmp ir; ls -la /tmp/ir; fi
  unset MLC_VK_PIPELINE_STATS
  echo "## mlc spirv GEMM bf16 4096^3, tile default"
  timeout 30 $mlc bench bench/gemm_bf16.mdl --target spirv n=4096 --runs 20 --warmup 3
  echo "## torch"
  timeout 25 python3 bench/spirv_torch.py gemm --n 4096
} 2>&1 | tee "$out/gemm.log"
if [ -n "${MINILLM:-}" ]; then
  {
    echo "## mlc spirv MiniLLM forward bf16"
    timeout 65 $mlc bench bench/minillm_bf16.mdl --target spirv --runs 10 --warmup 2 --profile
    echo "## mlc cuda MiniLLM forward bf16"
    timeout 40 $mlc bench bench/minillm_bf16.mdl --target cuda --runs 10 --warmup 2
    echo "## torch"
    timeout 30 python3 bench/spirv_torch.py minillm --runs 10
  } 2>&1 | tee "$out/minillm.log"
fi
