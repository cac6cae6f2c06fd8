#!/usr/bin/env bash
# On the GPU machine (device tool): the wgmma GEMM's TMA loads against its
# cp.async loads (the same build; -DMLC_GEMM_PROBE_NOTMA through an nvcc
# wrapper, with its own kernel cache), in one call:
#   1. every CUDA op case (opcheck.py ops --target cuda);
#   2. bench/gemm_shapes.py --quick (mlc against cuBLAS through torch), TMA then cp.async;
#   3. the MiniLLM bf16 forward (mlc bench), TMA then cp.async, and PyTorch eager (torch_baseline.py infer);
#   4. the small MiniLLM against PyTorch (bench/cuda_minillm.py --small);
#   5. 12 train steps of examples/minillm.mdl, TMA then cp.async; TRAIN_REF=1: torch_baseline.py train.
# Needs build-gpu/ and .yardstick/. Logs in $OUT/logs.tgz.
set -uo pipefail
cd "$(dirname "$0")/.."
final=${OUT:-/tmp/mlc-tma}
work=/tmp/tma-logs
rm -rf $work && mkdir -p $work "$final"
. tests/gpu/env.sh $work
mlc=$PWD/build-gpu/mlc opcheck=build-gpu/codegen/cuda/mlc_opcheck
rc=0
pack() { tar -C $work -czf "$final/logs.tgz" .; }
gpu_header bench/h200_tma.sh $work/env.log
printf '#!/bin/sh\nexec /usr/local/cuda/bin/nvcc -DMLC_GEMM_PROBE_NOTMA "$@"\n' > /tmp/nvcc-notma && chmod +x /tmp/nvcc-notma
notma() { MLC_NVCC=/tmp/nvcc-notma XDG_CACHE_HOME=/tmp/cache-notma "$@"; }
has() { case " ${PARTS:-1 2 3 4 5} " in *" $1 "*) return 0;; esac; return 1; }
if has 1; then
echo "## 1. every op case"
timeout 150 python3 tests/ops/opcheck.py ops --target cuda --jobs 16 --opcheck $opcheck --work /tmp/ops-all > $work/ops.log 2>&1 || rc=1
grep -E "^FAIL|cases passed" $work/ops.log
pack
fi
if has 2; then
echo "## 2. GEMM shapes, TMA"
mkdir -p $work/shapes-tma $work/shapes-cpasync
timeout 200 python3 bench/gemm_shapes.py --mlc $mlc --out $work/shapes-tma --quick > $work/shapes-tma/log 2>&1 || rc=1
head -30 $work/shapes-tma/gemm_shapes.md
echo "## 2. GEMM shapes, cp.async"
notma timeout 200 python3 bench/gemm_shapes.py --mlc $mlc --out $work/shapes-cpasync --quick > $work/shapes-cpasync/log 2>&1 || rc=1
head -30 $work/shapes-cpasync/gemm_shapes.md
pack
fi
if has 3; then
echo "## 3. forward, bf16: TMA, cp.async, eager"
timeout 120 $mlc bench bench/minillm_bf16.mdl --target cuda --runs 10 --warmup 3 > $work/forward.log 2>&1 || rc=1
grep median $work/forward.log
notma timeout 120 $mlc bench bench/minillm_bf16.mdl --target cuda --runs 10 --warmup 3 > $work/forward_cpasync.log 2>&1 || rc=1
grep median $work/forward_cpasync.log
timeout 60 $mlc profile bench/minillm_bf16.mdl --target cuda --steps 5 > $work/forward_profile.log 2>&1 || rc=1
timeout 150 python3 .yardstick/torch_baseline.py infer > $work/torch_infer.log 2>&1 || rc=1
grep -iE "ms" $work/torch_infer.log | tail -4
pack
fi
if has 4; then
echo "## 4. small MiniLLM against PyTorch"
timeout 150 python3 bench/cuda_minillm.py --small --mlc $mlc --opcheck $opcheck --work /tmp/small > $work/minillm_small.log 2>&1 || rc=1
grep -E "^ok|^FAIL|checks" $work/minillm_small.log | tail -15
pack
fi
if has 5; then
echo "## 5. train step: TMA, cp.async"
python3 -c "import torch; torch.manual_seed(0); torch.randint(0, 32000, (12 * 8 * 1024 + 1,), dtype=torch.int32).numpy().tofile('/tmp/tokens.bin')"
timeout 150 $mlc train examples/minillm.mdl --target cuda --steps 12 --data /tmp/tokens.bin --data-dtype i32 > $work/train.log 2>&1 || rc=1
grep -E "^step (1|12):" $work/train.log
notma timeout 150 $mlc train examples/minillm.mdl --target cuda --steps 12 --data /tmp/tokens.bin --data-dtype i32 > $work/train_cpasync.log 2>&1 || rc=1
grep -E "^step (1|12):" $work/train_cpasync.log
if [ -n "${TRAIN_REF:-}" ]; then
  timeout 280 python3 .yardstick/torch_baseline.py train > $work/torch_train.log 2>&1 || rc=1
  grep -E "^\{" $work/torch_train.log
fi
pack
fi
echo "rc=$rc"
exit $rc
