#!/usr/bin/env bash
# On the GPU machine (device tool, nvidia-h200), in one call: the f32 work of
# issue 20, mlc and PyTorch (f32 at its default precision, "highest") side by side.
#   1. every op case against PyTorch (opcheck.py ops --target cuda; OPS_K=SUBSTR
#      narrows them, e.g. OPS_K=matmul)
#   2. bench/f32_gemm.py: f32 GEMMs against torch.matmul f32 (TFLOP/s), and
#      the accuracy of ieee, 3xtf32, tf32 and torch against float64
#   3. bench/f32_models.py: the GPT-2-like model and the deep MLP, 20 steps
#      against PyTorch from the same weights and data, step times
#   4. bench/f32_json.py: $OUT/f32.json, to be copied to bench/results/latest/
# MODE (default 3xtf32) goes to mlc as --f32-matmul where this mlc has it.
# Needs build-gpu/ as tests/gpu/cuda_check.sh says.  Logs go to $OUT.
# A dry run with tiny dims on the CPU: OUT=/tmp/f32 TARGET=cpu SMALL=1 OPS_K=matmul JOBS=1
#   MLC=build/mlc OPCHECK=build/codegen/llvm/mlc_opcheck bench/cuda_f32.sh
set -uo pipefail
cd "$(dirname "$0")/.."
. tests/gpu/env.sh /tmp/mlc-f32
mlc=${MLC:-build-gpu/mlc} opcheck=${OPCHECK:-build-gpu/codegen/cuda/mlc_opcheck} target=${TARGET:-cuda}
small=${SMALL:+--small}
f32=""
$mlc --help | grep -- --f32-matmul > /dev/null && f32="--f32-matmul ${MODE:-3xtf32}"
commit=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo '?')}
rc=0
{ echo "# bench/cuda_f32.sh, $(date -u '+%F %T') UTC, commit $commit, mlc ${f32:-(no --f32-matmul)}"
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader 2>&1; } | tee "$out/env.log"

echo "## op cases"
timeout 100 python3 tests/ops/opcheck.py ops --target $target --jobs ${JOBS:-16} --opcheck $opcheck --work /tmp/ops \
  ${OPS_K:+-k "$OPS_K"} > "$out/ops.log" 2>&1 || rc=1
grep -E "^FAIL|cases passed" "$out/ops.log"

echo "## f32 GEMMs"
timeout 150 python3 bench/f32_gemm.py --mlc $mlc --target $target --out "$out" $small $f32 > "$out/f32_gemm.log" 2>&1 ||
  { rc=1; tail -5 "$out/f32_gemm.log"; }
cat "$out/f32_gemm.md" 2>/dev/null

echo "## models"
timeout 180 python3 bench/f32_models.py --mlc $mlc --target $target --out "$out" --profile $small $f32 > "$out/f32_models.log" 2>&1 ||
  { rc=1; tail -5 "$out/f32_models.log"; }
grep -E "^(gpt2like|mlp): " "$out/f32_models.log"
grep -E "^\| (model|gpt2like|mlp) \|" "$out/f32_models.md" 2>/dev/null

echo "## f32.json"
timeout 20 python3 bench/f32_json.py --models "$out/f32_models.json" --gemm "$out/f32_gemm.json" \
  --commit "$commit" --date "$(date -u +%F)" --out "$out/f32.json" || rc=1
echo "rc=$rc"
exit $rc
