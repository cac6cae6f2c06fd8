#!/usr/bin/env bash
# On the GPU machine (device tool): the GEMM work of issue 18 in two calls.
#   bench/cuda_gemm.sh check   every op case against PyTorch, compute-sanitizer
#                              on the small MiniLLM's train step, and the GEMM
#                              shape sweep (bench/gemm_shapes.py) against cuBLAS
#   bench/cuda_gemm.sh attn    the attention op cases, the small MiniLLM, and
#                              attention alone against SDPA (bench/attention_torch.py)
#   bench/cuda_gemm.sh model   the full MiniLLM's gradients and 20 AdamW steps
#                              against PyTorch (bench/cuda_minillm.py), then the
#                              bf16 forward and the train step, mlc and
#                              torch_baseline.py (eager, torch.compile) in the same call
# Needs build-gpu/ as tests/gpu/cuda_check.sh says, and .yardstick/ (../shared/bench)
# for `model`.  Logs go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
. tests/gpu/env.sh /tmp/mlc-gemm
mlc=build-gpu/mlc opcheck=build-gpu/codegen/cuda/mlc_opcheck
rc=0
{ echo "# bench/cuda_gemm.sh ${1:-}, $(date -u '+%F %T') UTC, commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } | tee "$out/env.log"
case ${1:-} in
check)
  timeout 300 python3 tests/ops/opcheck.py ops --target cuda --jobs 16 --opcheck $opcheck --work /tmp/ops \
    > "$out/ops.log" 2>&1 || rc=1
  grep -E "^FAIL|cases passed" "$out/ops.log"
  timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $opcheck examples/minillm.mdl /tmp/san --target cuda \
    --func train vocab=512 dim=128 layers=2 heads=4 batch=2 seq=64 > /tmp/san.log 2>&1 || rc=1
  echo "compute-sanitizer (memcheck), small MiniLLM train step: $(grep 'ERROR SUMMARY' /tmp/san.log)" | tee "$out/sanitizer.log"
  timeout 240 python3 bench/gemm_shapes.py --mlc $mlc --out "$out" ${QUICK:+--quick} 2>&1 | tail -3 || rc=1
  cat "$out/gemm_shapes.md" 2>/dev/null
  ;;
attn)
  # the wgmma attention forward (head dim 128, not causal): its op cases, the small MiniLLM,
  # attention alone at the MiniLLM's shape against SDPA
  for kw in attention mha; do
    timeout 150 python3 tests/ops/opcheck.py ops --target cuda --jobs 16 --opcheck $opcheck --work /tmp/ops-$kw -k $kw || rc=1
  done > "$out/attn_ops.log" 2>&1
  grep -E "^FAIL|cases passed" "$out/attn_ops.log"
  timeout 150 python3 bench/cuda_minillm.py --small --mlc $mlc --opcheck $opcheck --work /tmp/small > "$out/minillm_small.log" 2>&1 || rc=1
  grep -E "^ok|^FAIL|checks" "$out/minillm_small.log"
  timeout 100 $mlc profile bench/attention_bf16.mdl --target cuda --steps 10 > "$out/attn_profile.log" 2>&1 || rc=1
  timeout 100 $mlc profile bench/attention_bf16.mdl --target cuda --entry train_step --steps 10 >> "$out/attn_profile.log" 2>&1 || rc=1
  grep -E "^attention|^Name" "$out/attn_profile.log"
  timeout 100 python3 bench/attention_torch.py > "$out/attn_torch.log" 2>&1 || rc=1
  grep sdpa "$out/attn_torch.log"
  ;;
model)
  timeout 300 python3 bench/cuda_minillm.py --skip-forward --mlc $mlc --opcheck $opcheck --work /tmp/full \
    > "$out/minillm.log" 2>&1 || rc=1
  grep -E "^ok|^FAIL|checks|ms" "$out/minillm.log" | tail -12
  rm -rf /tmp/full
  {
    echo "## MiniLLM forward, bf16 parameters"
    $mlc bench bench/minillm_bf16.mdl --target cuda --runs 10 --warmup 3
    $mlc bench bench/minillm_bf16.mdl --target cuda --runs 3 --warmup 1 --profile > "$out/forward_profile.log" 2>&1
    grep -E '^(Name|[a-z_]+%[0-9]+ )' "$out/forward_profile.log" | head -25
    echo "## MiniLLM train step (bf16 compute, f32 master weights, AdamW), uniform random tokens"
    python3 -c "import torch; torch.manual_seed(0); torch.randint(0, 32000, (12 * 8 * 1024 + 1,), dtype=torch.int32).numpy().tofile('/tmp/tokens.bin')"
    $mlc train examples/minillm.mdl --target cuda --steps 12 --data /tmp/tokens.bin --data-dtype i32
  } > "$out/mlc.log" 2>&1 || rc=1
  grep -E "median|^step 12|^[a-z_]+%[0-9]+ " "$out/mlc.log" | head -20
  timeout 240 python3 .yardstick/torch_baseline.py infer > "$out/torch.log" 2>&1 || rc=1
  timeout 200 python3 .yardstick/torch_baseline.py train >> "$out/torch.log" 2>&1 || rc=1
  cat "$out/torch.log"
  ;;
*) echo "usage: bench/cuda_gemm.sh check|attn|model"; exit 2 ;;
esac
echo "rc=$rc"
exit $rc
