#!/usr/bin/env bash
# On the GPU machine (device tool), in one call: mlc's CUDA target and
# PyTorch (../shared/bench/torch_baseline.py, carried as .yardstick/) timed
# on the same GPU.  Needs the CUDA-only build described in
# tests/gpu/cuda_check.sh, carried.  Logs go to $OUT.  MLC_ONLY=1 skips PyTorch.
#   mlc: GEMM bf16 4096^3 and 8192^3; the Linear 4096 fp16 forward+backward;
#   the MiniLLM forward in bf16 (bench/minillm_bf16.mdl); the MiniLLM train
#   step (bf16 compute, AdamW) on uniform random tokens (torch_baseline.py's
#   distribution), with its per-kernel profile.
set -uo pipefail
cd "$(dirname "$0")/.."
. tests/gpu/env.sh /tmp/mlc-bench
mlc=build-gpu/mlc
{
  echo "# bench/cuda_bench.sh, $(date -u +%F), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  for n in 4096 8192; do $mlc bench bench/gemm_bf16.mdl --target cuda n=$n --runs 20 --warmup 3; done
  echo "## Linear 4096 fp16, x 1024x4096: forward + backward (the train entry of examples/linear.mdl)"
  $mlc train examples/linear.mdl --target cuda --steps 20
  echo "## MiniLLM forward, bf16 parameters"
  $mlc bench bench/minillm_bf16.mdl --target cuda --runs 10 --warmup 3
  echo "## the same, profiled"
  $mlc bench bench/minillm_bf16.mdl --target cuda --runs 3 --warmup 1 --profile | grep -E '^(Name|[a-z_]+%[0-9]+ )' | head -25
  echo "## MiniLLM train step (bf16 compute, f32 master weights, AdamW), uniform random tokens as torch_baseline.py's"
  python3 -c "import torch; torch.manual_seed(0); torch.randint(0, 32000, (12 * 8 * 1024 + 1,), dtype=torch.int32).numpy().tofile('/tmp/tokens.bin')"
  $mlc train examples/minillm.mdl --target cuda --steps 12 --data /tmp/tokens.bin --data-dtype i32
  echo "## the same, profiled (CUDA events around every kernel)"
  $mlc train examples/minillm.mdl --target cuda --steps 4 --data /tmp/tokens.bin --data-dtype i32 --profile \
    --trace "$out/minillm_train_trace.json" --roofline "$out/minillm_train_roofline.svg"
} 2>&1 | tee "$out/mlc.log"
[ -n "${MLC_ONLY:-}" ] || python3 .yardstick/torch_baseline.py all 2>&1 | tee "$out/torch.log"
