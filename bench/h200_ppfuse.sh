#!/usr/bin/env bash
# On the GPU machine (device tool), one call:
#   1. the trial attention softmax (-DMLC_ATTN_FAST_SOFTMAX, the default since 547ac7a, so that today
#      both variants are the same kernel): attn_probe.sh timing beside the
#      unchanged kernel, and the attention op cases built with it (nvcc wrapper, own cache);
#   2. the op cases (matmul, linear, fused) with --cuda-gemm-tile=$PP, under which passes/fuse.c
#      now puts activations (SiLU, GELU, their gradients) into the GEMM's epilogue;
#   3. the MiniLLM bf16 forward and 12 train steps: default, pp,4 and pp,5.
# Needs build-gpu/.  Logs in $OUT/logs.tgz.
set -uo pipefail
cd "$(dirname "$0")/.."
final=${OUT:-/tmp/mlc-ppfuse}
work=/tmp/ppfuse-logs
rm -rf $work && mkdir -p $work "$final"
. tests/gpu/env.sh $work
mlc=$PWD/build-gpu/mlc opcheck=build-gpu/codegen/cuda/mlc_opcheck
rc=0
pack() { tar -C $work -czf "$final/logs.tgz" .; }
gpu_header bench/h200_ppfuse.sh $work/env.log
PP=${PP:-pp,4}
echo "## 1. attention: FAST_SOFTMAX"
VARIANTS="|-DMLC_ATTN_FAST_SOFTMAX" OUT=$work/probe bash bench/attn_probe.sh > $work/probe.log 2>&1 || rc=1
tail -12 $work/probe.log
MLC_NVCC=/tmp/nvcc2 XDG_CACHE_HOME=/tmp/attn-cache2 timeout 200 python3 tests/ops/opcheck.py ops --target cuda --jobs 16 \
  --opcheck $opcheck --work /tmp/ops-fs -k attention > $work/ops_fast_softmax.log 2>&1 || rc=1
grep -E "^FAIL|cases passed" $work/ops_fast_softmax.log | cut -c1-300
pack
echo "## 2. op cases with --cuda-gemm-tile=$PP (activation epilogues)"
for kw in matmul linear fused; do
  timeout 150 python3 tests/ops/opcheck.py ops --target cuda --jobs 16 --opcheck $opcheck --work /tmp/ops-pp-$kw -k $kw \
    --option=--cuda-gemm-tile=$PP || rc=1
done > $work/ops_pp.log 2>&1
grep -E "^FAIL|cases passed" $work/ops_pp.log | cut -c1-300
pack
echo "## 3. MiniLLM: default, pp,4, pp,5"
python3 -c "import torch; torch.manual_seed(0); torch.randint(0, 32000, (12 * 8 * 1024 + 1,), dtype=torch.int32).numpy().tofile('/tmp/tokens.bin')"
for o in "" "--cuda-gemm-tile pp,4" "--cuda-gemm-tile pp,5" ""; do
  n=$(echo "x$o" | tr -c 'a-z0-9\n' _)
  timeout 120 $mlc bench bench/minillm_bf16.mdl --target cuda --runs 10 --warmup 3 $o > $work/forward$n.log 2>&1 || rc=1
  echo "forward [$o]: $(grep -o 'median [0-9.]* ms' $work/forward$n.log)"
  timeout 150 $mlc train examples/minillm.mdl --target cuda --steps 12 --data /tmp/tokens.bin --data-dtype i32 $o > $work/train$n.log 2>&1 || rc=1
  echo "train [$o]: $(grep -E '^step' $work/train$n.log | sed 's/.*(\([0-9.]*\) ms.*/\1/' | tail -10 | sort -n | tr '\n' ' ')"
  grep -E "^step 12" $work/train$n.log
done
timeout 200 $mlc profile bench/minillm_bf16.mdl --target cuda --steps 5 --cuda-gemm-tile $PP > $work/profile_pp.log 2>&1
pack
echo "rc=$rc"
exit $rc
