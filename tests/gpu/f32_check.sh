#!/usr/bin/env bash
# On the GPU machine (device tool): the f32 tensor-core kernels of issue 20
# (3xTF32 GEMMs, the f32 flash attention and its gradient).
#   tests/gpu/f32_check.sh         op cases, compute-sanitizer, GEMM and model timings
# Needs build-gpu/ as tests/gpu/cuda_check.sh says.  Logs go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/gpu/env.sh /tmp/mlc-f32
mlc=build-gpu/mlc opcheck=build-gpu/codegen/cuda/mlc_opcheck
rc=0
{ echo "# tests/gpu/f32_check.sh, $(date -u '+%F %T') UTC, commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } | tee "$out/env.log"
echo "## op cases (all, CUDA)"
timeout 300 python3 tests/ops/opcheck.py ops --target cuda --jobs 16 --opcheck $opcheck --work /tmp/ops \
  > "$out/ops.log" 2>&1 || rc=1
grep -E "^FAIL|cases passed|f32|attention" "$out/ops.log" | head -60
echo "## compute-sanitizer: a small GPT-2-like f32 train step (causal attention d64, odd lengths)"
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $opcheck bench/gpt2like_f32.mdl /tmp/san --target cuda \
  --func train vocab=203 dim=128 heads=2 layers=1 batch=2 seq=77 --range tokens=0,203 --range targets=0,203 \
  > "$out/sanitizer.log" 2>&1 || rc=1
tail -3 "$out/sanitizer.log"
echo "## f32 GEMMs: mlc per mode, torch.matmul f32 (highest)"
for s in "M=4096 N=4096 K=4096" "M=8192 N=2304 K=768" "M=8000 N=3000 K=1000" "M=2000 N=1000 K=1000"; do
  for m in tf32x3 tf32 ieee; do
    echo "$s $m: $(timeout 60 $mlc bench bench/gemm_f32_linear.mdl --target cuda $s bias=false --f32-matmul $m --runs 20 2>&1 | grep -iE 'median|ms' | tail -1)"
  done
done 2>&1 | tee "$out/gemm.log"
timeout 60 python3 - <<'PY' 2>&1 | tee -a "$out/gemm.log"
import torch, statistics
torch.backends.cuda.matmul.allow_tf32 = False
for M, N, K in [(4096, 4096, 4096), (8192, 2304, 768), (8000, 3000, 1000), (2000, 1000, 1000)]:
    x = torch.randn(M, K, device="cuda"); w = torch.randn(N, K, device="cuda")
    for _ in range(3): x @ w.T
    ts = []
    for _ in range(20):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); x @ w.T; b.record(); b.synchronize(); ts.append(a.elapsed_time(b))
    t = statistics.median(ts)
    print("torch f32 M=%d N=%d K=%d: %.3f ms, %.1f TFLOP/s" % (M, N, K, t, 2 * M * N * K / t / 1e9))
PY
echo "## models: mlc train-step profiles"
for m in bench/gpt2like_f32.mdl bench/mlp_f32.mdl; do
  timeout 150 $mlc profile $m --target cuda --entry train_step --steps 5 > "$out/profile_$(basename $m .mdl).log" 2>&1 || rc=1
  head -30 "$out/profile_$(basename $m .mdl).log"
done
echo "rc=$rc"
exit $rc
