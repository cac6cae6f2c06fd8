#!/usr/bin/env bash
# On the GPU machine (device tool), in one call: issue 23's bf16 drift on
# NVIDIA's Vulkan driver.  A GPT-2-like model off the tile multiples
# (bench/gpt2like_f32.mdl with precision(param=bf16, reduce=f32): vocab 8003,
# dim 768, heads of 64, seq 1000, batch 4) trains 4 steps on the same tokens
#   - on --target cuda (which follows torch.autocast within 5e-4, issue 23),
#   - on --target spirv with this build (bf16 GEMMs on the portable kernel),
#   - on --target spirv with the old build (build-vkgpu-old: bf16 GEMMs on
#     f16 cooperative matrices),
# then the bf16/f16 op cases on spirv.  Build and carry as bench/spirv_h200.sh
# says (build-vkgpu/, .gl), plus build-vkgpu-old/mlc.  Logs go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
. tests/gpu/vk_env.sh /tmp/mlc-drift
rc=0
{ echo "# bench/spirv_drift_h200.sh, $(date -u '+%F %T') UTC, commit ${COMMIT:-?}, old $(cat build-vkgpu-old/COMMIT 2>/dev/null)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; $mlc devices --target spirv; } 2>&1 | tee "$out/env.log"
sed 's/^    optimizer = AdamW(lr=lr)/    optimizer = AdamW(lr=lr)\n    precision(param=bf16, reduce=f32)/' bench/gpt2like_f32.mdl > /tmp/gpt2like_bf16.mdl
python3 -c "import numpy as np; np.random.seed(0); np.random.randint(0, 8003, 4 * 4 * 1000 + 1).astype(np.int32).tofile('/tmp/drift-tokens.bin')"
run() { # name, mlc, target
  timeout 240 $2 train /tmp/gpt2like_bf16.mdl --target $3 --steps 4 --data /tmp/drift-tokens.bin --data-dtype i32 > "$out/train-$1.log" 2>&1 || rc=1
  echo "$1: $(grep -E '^step' "$out/train-$1.log" | sed -E 's/^step [0-9]+: loss ([0-9.]+).*/\1/' | tr '\n' ' ')"
}
{ run cuda $mlc cuda; run spirv-new $mlc spirv; run spirv-old build-vkgpu-old/mlc spirv; } | tee "$out/losses.log"
timeout 200 python3 tests/ops/opcheck.py ops --target spirv --jobs 8 --opcheck $opcheck --work /tmp/ops -k 16 \
  > "$out/ops.log" 2>&1 || rc=1
grep -E "^FAIL|cases passed" "$out/ops.log"
(cd "$out" && tar czf logs.tgz *.log)
echo "rc=$rc"
exit $rc
