#!/usr/bin/env bash
# On the GPU machine (device tool), one call: the tile rule that picks the
# persistent cooperative GEMM with TMA stores (cs,4) for 16-bit GEMMs with at
# least two waves of 128 x 256 tiles (codegen/cuda/emit_gemm.c, gemm_pick).
#   1. every CUDA op case with the default kernels;
#   2. bench/gemm_tune.py "default;256,4,1,1" beside cuBLAS (256,4,1,1: the
#      128 x 256 non-persistent kernel, the rule before);
#   3. the MiniLLM bf16 forward and 12 train steps, default and 256,4,1,1,
#      twice, then torch_baseline.py train and infer (carried as .yardstick/);
#   4. with .gl carried: bench/h200_khr.sh's KHR cooperative-matrix cases.
# Needs build-gpu/. Logs in $OUT/logs.tgz (rewritten after each part).
set -uo pipefail
cd "$(dirname "$0")/.."
final=${OUT:-/tmp/mlc-cs}
work=/tmp/cs-logs
rm -rf $work && mkdir -p $work "$final"
. tests/gpu/env.sh $work
mlc=$PWD/build-gpu/mlc opcheck=build-gpu/codegen/cuda/mlc_opcheck
rc=0
pack() { tar -C $work -czf "$final/logs.tgz" .; }
gpu_header bench/h200_cs.sh $work/env.log
echo "## 1. op cases"
timeout 150 python3 tests/ops/opcheck.py ops --target cuda --jobs 16 --opcheck $opcheck --work /tmp/ops > $work/ops.log 2>&1 || rc=1
echo "default: $(grep -E 'cases passed' $work/ops.log)"; grep -E "^FAIL" $work/ops.log | cut -c1-200
pack
echo "## 2. tiles against cuBLAS"
timeout 200 python3 bench/gemm_tune.py --mlc $mlc --out $work/tune --configs "default;256,4,1,1" > $work/tune.log 2>&1 || rc=1
cat $work/tune/gemm_tune.md
pack
echo "## 3. MiniLLM"
python3 -c "import torch; torch.manual_seed(0); torch.randint(0, 32000, (12 * 8 * 1024 + 1,), dtype=torch.int32).numpy().tofile('/tmp/tokens.bin')"
for r in 1 2; do
  for o in "" "--cuda-gemm-tile 256,4,1,1"; do
    tag=${o:+old}; tag=${tag:-rule}_$r
    timeout 90 $mlc train examples/minillm.mdl --target cuda --steps 12 --data /tmp/tokens.bin --data-dtype i32 $o > "$work/train_$tag.log" 2>&1 || rc=1
    echo "train $tag: $(grep -E '^step' "$work/train_$tag.log" | sed 's/.*(\([0-9.]*\) ms.*/\1/' | tail -10 | sort -n | tr '\n' ' ') | $(grep -E '^step 12' "$work/train_$tag.log")"
    timeout 60 $mlc bench bench/minillm_bf16.mdl --target cuda --runs 10 --warmup 3 $o > "$work/forward_$tag.log" 2>&1 || rc=1
    echo "forward $tag: $(grep -o 'median [0-9.]* ms' "$work/forward_$tag.log")"
  done
done
timeout 200 python3 .yardstick/torch_baseline.py train > $work/torch.log 2>&1 || rc=1
timeout 200 python3 .yardstick/torch_baseline.py infer >> $work/torch.log 2>&1 || rc=1
grep -E '^\{' $work/torch.log
pack
if [ -d .gl ]; then
  echo "## 4. KHR cooperative matrices"
  OUT=$work/khr bash bench/h200_khr.sh > $work/khr.log 2>&1 || rc=1
  grep -vE "^#|^NVIDIA" $work/khr.log
  pack
fi
echo "rc=$rc"
exit $rc
