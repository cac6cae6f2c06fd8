#!/usr/bin/env bash
# Attention on the H200 in one device call (the device's time is scarce):
# the attnsave pass (the forward keeps each row's log-sum-exp, so the
# gradient does not run the forward again) and attention_grad's tile.
#   1. numerics: every op case of opcheck.py against PyTorch, compute-sanitizer
#      on the small MiniLLM's train step, the small and the full MiniLLM's
#      gradients and AdamW steps against PyTorch (bench/cuda_minillm.py);
#   2. attention alone at the MiniLLM's shape (bench/attention_bf16.mdl,
#      per-kernel profile) with the build's tile and with each variant build
#      in build-gpu-v/bin/mlc-* (made with -DMLC_ATTN_BWD_W=.. -DMLC_ATTN_BWD_BQ=..),
#      against PyTorch's SDPA (bench/attention_torch.py);
#   3. bench/cuda_bench.sh: GEMMs, the Linear, the MiniLLM forward and train
#      step (uniform random tokens, as torch_baseline.py's; the synthetic
#      batch's tokens are only 0 and 1) with its profile, and
#      ../shared/bench/torch_baseline.py all (carried as .yardstick/), in the
#      same call.
# QUICK=1: only the attention op cases for numerics, and the train step of
# each variant instead of step 3 (for choosing among variants; the chosen
# build then runs it all).
# Needs build-gpu/ as tests/gpu/cuda_check.sh says; build-gpu-v/cache, when
# carried, is a kernel cache filled where the builds were made (nvcc 13.0 on
# both), so the GPU's time is not spent in nvcc.  Logs go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
. tests/gpu/env.sh /tmp/mlc-attn
[ -d build-gpu-v/cache ] && mkdir -p "$XDG_CACHE_HOME" && cp -r build-gpu-v/cache/. "$XDG_CACHE_HOME/"
mlc=build-gpu/mlc
opcheck=build-gpu/codegen/cuda/mlc_opcheck
small="vocab=512 dim=128 layers=2 heads=4 batch=2 seq=64"
rc=0
{
  echo "# bench/cuda_attention.sh, $(date -u '+%F %T') UTC, commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
} | tee "$out/env.log"
if [ -n "${QUICK:-}" ]; then
  timeout 100 python3 tests/ops/opcheck.py ops --target cuda --jobs 16 --opcheck $opcheck --work /tmp/ops -k attention \
    > "$out/checks.log" 2>&1 || rc=1
  tail -1 "$out/checks.log"
else
{
  timeout 150 python3 tests/ops/opcheck.py ops --target cuda --jobs 16 --opcheck $opcheck --work /tmp/ops || rc=1
  timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $opcheck examples/minillm.mdl /tmp/san --target cuda --func train \
    $small --range tokens=0,512 --range targets=0,512 > /tmp/san.log 2>&1 || rc=1
  echo "compute-sanitizer (memcheck), small MiniLLM train step: $(grep 'ERROR SUMMARY' /tmp/san.log)"
  echo "## small MiniLLM against PyTorch"
  timeout 90 python3 bench/cuda_minillm.py --small --mlc $mlc --opcheck $opcheck --work /tmp/small || rc=1
} > "$out/checks.log" 2>&1
grep -E 'FAIL|passed|sanitizer|PASS|fail' "$out/checks.log" | tail -12
timeout 200 python3 bench/cuda_minillm.py --skip-forward --mlc $mlc --opcheck $opcheck --work /tmp/full > "$out/minillm.log" 2>&1 || rc=1
tail -8 "$out/minillm.log"
rm -rf /tmp/full
fi
variants="$mlc $(ls build-gpu-v/bin/mlc-* 2>/dev/null)"
{
  for m in $variants; do
    echo "## $m: attention alone, forward + backward, b8 h16 s1024 d128 bf16"
    timeout 60 $m train bench/attention_bf16.mdl --target cuda --steps 6 --profile | grep -E '^(Name|attention|  )|ms/step|step'
  done
  echo "## PyTorch SDPA"
  timeout 60 python3 bench/attention_torch.py
} > "$out/attention.log" 2>&1
cat "$out/attention.log"
if [ -n "${QUICK:-}" ]; then
  python3 -c "import torch; torch.manual_seed(0); torch.randint(0, 32000, (12 * 8 * 1024 + 1,), dtype=torch.int32).numpy().tofile('/tmp/tokens.bin')"
  for m in $variants; do
    echo "## $m: MiniLLM train step (bf16 compute, f32 master weights, AdamW), uniform random tokens"
    timeout 60 $m train examples/minillm.mdl --target cuda --steps 12 --data /tmp/tokens.bin --data-dtype i32
  done > "$out/mlc.log" 2>&1
  grep -E '^##|^step' "$out/mlc.log"
else
  OUT=$out/bench bash bench/cuda_bench.sh > "$out/bench.log" 2>&1
  grep -vE '^(fused|matmul|linear|attention|rmsnorm|adamw|cast|add|slice|concat|transpose|sum|embedding|cross|silu|view)' "$out/bench.log" | tail -60
fi
echo "rc=$rc"
exit $rc
