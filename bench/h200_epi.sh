#!/usr/bin/env bash
# On the GPU machine (device tool): the GEMM epilogue changes of 2026-12-03
# (16-byte loads of a bias or residual in the wgmma GEMM's st8; SiLU on the
# special-function unit, fused into the FFN's GEMM), against the build
# before them (build-gpu/base/mlc, carried), in one call:
#   1. every CUDA op case, and the small MiniLLM's logits against PyTorch;
#   2. bench/gemm_tune.py (default tiles) with each build, cuBLAS beside;
#   3. the MiniLLM bf16 forward and 12 train steps with each build (twice,
#      alternating), then torch_baseline.py train and infer (.yardstick/).
# Needs build-gpu/ (and build-gpu/base/mlc). Logs in $OUT/logs.tgz.
set -uo pipefail
cd "$(dirname "$0")/.."
final=${OUT:-/tmp/mlc-epi}
work=/tmp/epi-logs
rm -rf $work && mkdir -p $work "$final"
. tests/gpu/env.sh $work
new=$PWD/build-gpu/mlc base=$PWD/build-gpu/base/mlc opcheck=build-gpu/codegen/cuda/mlc_opcheck
rc=0
pack() { tar -C $work -czf "$final/logs.tgz" .; }
gpu_header bench/h200_epi.sh $work/env.log
echo "## 1. numerics"
timeout 240 python3 tests/ops/opcheck.py ops --target cuda --jobs 16 --opcheck $opcheck --work /tmp/ops > $work/ops.log 2>&1 || rc=1
grep -E "^FAIL|cases passed" $work/ops.log | cut -c1-300
timeout 60 python3 tests/ops/opcheck.py minillm --target cuda --opcheck $opcheck --model examples/minillm.mdl \
  --work /tmp/mini > $work/minillm.log 2>&1 || rc=1
tail -3 $work/minillm.log
pack
echo "## 2. GEMM shapes (default tiles): base, then new"
for b in base new; do
  timeout 200 python3 bench/gemm_tune.py --mlc ${!b} --out $work/tune_$b --configs "default" > $work/tune_$b.log 2>&1 || rc=1
done
paste -d'|' <(cut -d'|' -f2-5,6 $work/tune_base/gemm_tune.md) <(cut -d'|' -f5,6 $work/tune_new/gemm_tune.md) | head -22
pack
echo "## 3. MiniLLM: base, new, base, new; then PyTorch"
python3 -c "import torch; torch.manual_seed(0); torch.randint(0, 32000, (12 * 8 * 1024 + 1,), dtype=torch.int32).numpy().tofile('/tmp/tokens.bin')"
for r in 1 2; do
  for b in base new; do
    timeout 120 ${!b} bench bench/minillm_bf16.mdl --target cuda --runs 10 --warmup 3 > $work/forward_${b}_$r.log 2>&1 || rc=1
    echo "forward $b: $(grep -o 'median [0-9.]* ms' $work/forward_${b}_$r.log)"
    timeout 150 ${!b} train examples/minillm.mdl --target cuda --steps 12 --data /tmp/tokens.bin --data-dtype i32 > $work/train_${b}_$r.log 2>&1 || rc=1
    echo "train $b: $(grep -E '^step' $work/train_${b}_$r.log | sed 's/.*(\([0-9.]*\) ms.*/\1/' | tail -10 | sort -n | tr '\n' ' ') | $(grep -E '^step 12' $work/train_${b}_$r.log)"
  done
done
pack
timeout 200 python3 .yardstick/torch_baseline.py train > $work/torch.log 2>&1 || rc=1
timeout 200 python3 .yardstick/torch_baseline.py infer >> $work/torch.log 2>&1 || rc=1
grep -iE "ms|step" $work/torch.log | tail -12
pack
echo "rc=$rc"
exit $rc
