#!/usr/bin/env bash
# The fused CUDA target (passes/fuse.c: elementwise groups, GEMM epilogues,
# adamw_multi) on the GPU in one device call, trimmed from
# bench/cuda_final.sh to what the fusion changes:
#   1. speed: the MiniLLM train step (12 steps) with the fused build, the
#      same with the pre-fusion build when carried (build-gpu/, A/B in the
#      same call), the fused step's per-kernel profile, and PyTorch eager
#      and torch.compile (../shared/bench/torch_baseline.py train, carried
#      as .yardstick/);
#   2. numerics: the full MiniLLM's gradients and 20 AdamW steps against
#      PyTorch (bench/cuda_minillm.py --skip-forward);
#   3. every op case of opcheck.py (the fused-group cases among them)
#      against PyTorch, and compute-sanitizer on the small train step.
# Needs the CUDA-only build of tests/gpu/cuda_check.sh made in $MLC_BUILD
# (default build-gpu-fuse) and carried with its lib/, and optionally
# $MLC_BUILD/cache: a kernel cache (XDG_CACHE_HOME) filled by compiling the
# MiniLLM where the build was made, so the GPU's time is not spent in nvcc.
# Logs go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
B=${MLC_BUILD:-build-gpu-fuse}
out=${OUT:-/tmp/mlc-fused}
mkdir -p "$out"
export XDG_CACHE_HOME=$PWD/$B/cache PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=$PWD/$B/lib:${LD_LIBRARY_PATH:-}
opcheck=$B/codegen/cuda/mlc_opcheck
small="vocab=512 dim=128 layers=2 heads=4 batch=2 seq=64"
rc=0
{
  echo "# bench/cuda_fused.sh, $(date -u '+%F %T'), build $B"
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  echo "## MiniLLM train step, fused (bf16 compute, f32 master weights, AdamW), synthetic batch"
  $B/mlc train examples/minillm.mdl --target cuda --steps 12 || rc=1
  if [ -x build-gpu/mlc ]; then
    echo "## the same with the pre-fusion build (build-gpu/)"
    LD_LIBRARY_PATH=$PWD/build-gpu/lib build-gpu/mlc train examples/minillm.mdl --target cuda --steps 12
  fi
  echo "## fused, profiled (CUDA events around every kernel)"
  $B/mlc train examples/minillm.mdl --target cuda --steps 4 --profile --trace "$out/minillm_train_trace.json" || rc=1
} > "$out/mlc.log" 2>&1
grep -vE '^(fused|matmul|linear|attention|rmsnorm|adamw|cast|add|slice|concat|transpose|sum|embedding|cross|silu)' "$out/mlc.log"
grep -A25 '^Name' "$out/mlc.log"
python3 .yardstick/torch_baseline.py train > "$out/torch.log" 2>&1
cat "$out/torch.log"
python3 bench/cuda_minillm.py --skip-forward --mlc $B/mlc --opcheck $opcheck --work /tmp/full > "$out/minillm.log" 2>&1 || rc=1
tail -8 "$out/minillm.log"
rm -rf /tmp/full
{
  python3 tests/ops/opcheck.py ops --target cuda --jobs 16 --opcheck $opcheck --work /tmp/ops || rc=1
  compute-sanitizer --tool memcheck --error-exitcode 9 $opcheck examples/minillm.mdl /tmp/san --target cuda --func train \
    $small --range tokens=0,512 --range targets=0,512 > /tmp/san.log 2>&1 || rc=1
  echo "compute-sanitizer (memcheck), small MiniLLM train step: $(grep 'ERROR SUMMARY' /tmp/san.log)"
} > "$out/checks.log" 2>&1
grep -E 'FAIL|passed|sanitizer' "$out/checks.log"
echo "rc=$rc"
exit $rc
