#!/usr/bin/env bash
# On the GPU machine (device tool), in one call: the SPIR-V target's
# cooperative-matrix attention forward (emit_attention.c, fwd_coop) on
# NVIDIA's Vulkan driver.  Logs go to $OUT (else /tmp/mlc-spirv-attn).
#
# Build and carry as bench/spirv_h200.sh's header says (build-vkgpu, .gl,
# build-vkgpu/lib), and check those binaries on lavapipe first, the kernel's
# emulation included:
#   MLC_VK_VALIDATE=1 python3 tests/ops/opcheck.py ops --target spirv --option=--spirv-emulate-coopmat \
#     -k attention --opcheck build-vkgpu/codegen/cuda/mlc_opcheck --work /tmp/o      (and -k mha)
# Steps, each bounded by `timeout`:
#   the attention and mha op cases against PyTorch through NVIDIA's driver
#   (and those of $EXTRA_OPCHECK, a copy of opcheck.py with more cases, -k xattn,
#   if it exists); the MiniLLM forward (bf16, b8 h16 s1024 d128) on spirv with
#   --profile, and on cuda; bench/attention_bf16.mdl's forward on spirv
#   (default, --spirv-attention-rescale=always, --spirv-attention=tiled: the
#   f32 kernel of before) and on cuda, each with --profile.  The variant is
#   off by default until this script has run (emit_attention.c, coop_fits):
#   --spirv-attention=coopmat is given here to every spirv step.
set -uo pipefail
cd "$(dirname "$0")/.."
. tests/gpu/vk_env.sh /tmp/mlc-spirv-attn
coop=--spirv-attention=coopmat
{
  echo "# bench/spirv_attention_h200.sh, $(date -u '+%F %T') UTC, commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  timeout 20 $mlc devices --target spirv
} 2>&1 | tee "$out/env.log"
{
  for k in attention mha; do
    timeout 60 python3 tests/ops/opcheck.py ops --target spirv --option=$coop -k $k --jobs 12 --opcheck $opcheck --work /tmp/ops
  done
  x=${EXTRA_OPCHECK:-}
  if [ -n "$x" ] && [ -f "$x" ]; then
    timeout 40 python3 "$x" ops --target spirv --option=$coop -k xattn --jobs 12 --opcheck $opcheck --work /tmp/opsx
  fi
} > "$out/ops.log" 2>&1
echo "ops: $(grep -c ^PASS "$out/ops.log") passed, $(grep -c ^FAIL "$out/ops.log") failed"
grep -E "^FAIL|rror" "$out/ops.log" | cut -c1-300
{
  echo "## mlc spirv MiniLLM forward bf16"
  timeout 45 $mlc bench bench/minillm_bf16.mdl --target spirv $coop --runs 5 --warmup 1 --profile
  echo "## mlc cuda MiniLLM forward bf16"
  timeout 45 $mlc bench bench/minillm_bf16.mdl --target cuda --runs 5 --warmup 1 --profile
} 2>&1 | grep -v "^mlc: pipeline" | tee "$out/minillm.log" | grep -E "^##|median|^attention" | head -12
{
  echo "## mlc spirv attention alone (bench/attention_bf16.mdl forward), default"
  timeout 20 $mlc bench bench/attention_bf16.mdl --target spirv $coop --runs 5 --warmup 1 --profile
  echo "## the same, --spirv-attention-rescale=always"
  timeout 20 $mlc bench bench/attention_bf16.mdl --target spirv $coop --spirv-attention-rescale=always --runs 5 --warmup 1 --profile
  echo "## the same, --spirv-attention=tiled (the f32 kernel)"
  timeout 20 $mlc bench bench/attention_bf16.mdl --target spirv --runs 3 --warmup 1 --profile
  echo "## mlc cuda attention alone"
  timeout 30 $mlc bench bench/attention_bf16.mdl --target cuda --runs 5 --warmup 1 --profile
} 2>&1 | grep -v "^mlc: pipeline" | tee "$out/attention.log" | grep -E "^##|median|^attention"
