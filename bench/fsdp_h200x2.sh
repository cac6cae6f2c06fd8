#!/usr/bin/env bash
# Issue 6 on two H200s in one device call (nvidia-h200-x2): mlc's cuda-nccl
# target against PyTorch FSDP2.  Needs the CUDA-only build-gpu/ of
# tests/gpu/cuda_check.sh (configured here where /usr/local/cuda has nccl.h)
# and .yardstick/ (a copy of ../shared/bench).  Logs go to $OUT.
#   1. small MiniLLM: 2 ranks (torchrun --no-python) against one GPU with
#      the whole batch, same seed and tokens: losses within 1e-2 relative;
#      the same 2 ranks under mpirun when the machine has it;
#   2. seed config (735M parameters, batch 8 x 1024 per GPU) from the same
#      safetensors and tokens as bench/fsdp_torch.py (FSDP2): 10 steps'
#      losses within 2e-2 relative (bf16 compute in both, different
#      rounding), step time and peak memory per GPU;
#   3. torch_baseline.py fsdp in the same call; a trace of mlc's rank 0 and 1.
# MLC_ONLY=1 runs mlc's parts alone (the PyTorch logs of an earlier call kept).
set -uo pipefail
cd "$(dirname "$0")/.."
. tests/gpu/env.sh /tmp/mlc-fsdp
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mlc=$PWD/build-gpu/mlc
rc=0
small="vocab=512 dim=128 layers=2 heads=4 seq=64"
compare() { python3 bench/compare_losses.py "$1" "$2" "$3"; } # A.log B.log TOL: every step's loss
{
  echo "# bench/fsdp_h200x2.sh, $(date -u +%F), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?') $(git status --short 2>/dev/null | grep -q . && echo '+ uncommitted changes')"
  nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
  nvidia-smi topo -m 2>/dev/null | head -4
  echo "mpirun: $(command -v mpirun || echo 'not installed')"
  python3 -c "import numpy as np; np.random.default_rng(1).integers(0, 512, 200000, dtype=np.int32).tofile('/tmp/small.i32')"
  echo "== 1. small MiniLLM: 2 ranks against one GPU"
  $mlc train examples/minillm.mdl --target cuda $small batch=4 --seed 1 --steps 10 --data /tmp/small.i32 --data-dtype i32 > $out/small_one.log 2>&1 || rc=1
  timeout 300 torchrun --nproc_per_node=2 --no-python $mlc train examples/minillm.mdl --target cuda-nccl $small batch=2 --seed 1 --steps 10 \
    --data /tmp/small.i32 --data-dtype i32 > $out/small_two.log 2>&1 || rc=1
  tail -3 $out/small_two.log
  compare $out/small_two.log $out/small_one.log 1e-2 || rc=1
  if command -v mpirun >/dev/null && [ -z "${MLC_ONLY:-}" ]; then
    timeout 300 mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH -x XDG_CACHE_HOME $mlc train examples/minillm.mdl \
      --target cuda-nccl $small batch=2 --seed 1 --steps 10 --data /tmp/small.i32 --data-dtype i32 > $out/small_mpirun.log 2>&1 || rc=1
    tail -2 $out/small_mpirun.log; compare $out/small_mpirun.log $out/small_one.log 1e-2 || rc=1
  fi
  echo "== 2. seed config: mlc cuda-nccl against PyTorch FSDP2 from the same weights and tokens"
  python3 bench/fsdp_torch.py init --yardstick .yardstick --work /tmp/seed --steps 10
  $mlc compile examples/minillm.mdl --target cuda-nccl -o /tmp/seed/art > $out/seed_compile.log 2>&1 || rc=1   # fills the kernel cache once
  tail -2 $out/seed_compile.log
  timeout 400 torchrun --nproc_per_node=2 --no-python $mlc train examples/minillm.mdl --target cuda-nccl \
    --weights /tmp/seed/init.safetensors --data /tmp/seed/tokens.i32 --data-dtype i32 --steps 10 > $out/seed_mlc.log 2>&1 || rc=1
  # the same with --profile (events around every step) for the per-kernel table and the trace of both ranks
  timeout 400 torchrun --nproc_per_node=2 --no-python $mlc train examples/minillm.mdl --target cuda-nccl \
    --weights /tmp/seed/init.safetensors --data /tmp/seed/tokens.i32 --data-dtype i32 --steps 6 --profile \
    --trace $out/mlc_fsdp_trace.json > $out/seed_mlc_profile.log 2>&1 || rc=1
  grep -E "^step|device memory|error|mlc:" $out/seed_mlc.log | grep -v "profile\|^ " | head -20
  [ -n "${MLC_ONLY:-}" ] || timeout 400 torchrun --nproc_per_node=2 bench/fsdp_torch.py train --yardstick .yardstick --work /tmp/seed --steps 10 > $out/seed_torch.log 2>&1 || rc=1
  grep -E "^step|torch fsdp2|Error" $out/seed_torch.log 2>/dev/null
  [ -n "${MLC_ONLY:-}" ] || compare $out/seed_mlc.log $out/seed_torch.log 2e-2 || rc=1
  python3 - $out/seed_mlc.log <<'PY'
import re, statistics, sys
ms = [float(x) for x in re.findall(r"^step \d+: loss \S+ \(([0-9.]+) ms[,)]", open(sys.argv[1]).read(), re.M)]
if len(ms) > 3:
    m = statistics.median(ms[2:]); print("mlc cuda-nccl: 2 ranks, median step %.1f ms over steps 3..%d, %.0f tok/s per GPU" % (m, len(ms), 8192 / m * 1e3))
PY
  echo "== 3. torch_baseline.py fsdp (the yardstick), same call"
  [ -n "${MLC_ONLY:-}" ] || timeout 300 torchrun --nproc_per_node=2 .yardstick/torch_baseline.py fsdp 2>&1 | grep -v Warning | tail -3
} 2>&1 | tee $out/fsdp.log
exit $rc
