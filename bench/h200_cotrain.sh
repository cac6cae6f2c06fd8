#!/usr/bin/env bash
# On the GPU machine (device tool), one call: the MiniLLM with the tile rule
# that picks the persistent cooperative GEMM (co,4) for unfused 16-bit GEMMs
# (e344084), against --cuda-gemm-tile 256,4,1,1 (every 16-bit GEMM on the
# 128 x 256 non-persistent kernel, the rule before it at the model's large
# shapes), alternating: 12 train steps and the bf16 forward each; then
# torch_baseline.py train and infer (carried as .yardstick/) in the same call.
# Needs build-gpu/. Logs in $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
. tests/gpu/env.sh /tmp/cotrain
mlc=$PWD/build-gpu/mlc
rc=0
gpu_header bench/h200_cotrain.sh $out/env.log
python3 -c "import torch; torch.manual_seed(0); torch.randint(0, 32000, (12 * 8 * 1024 + 1,), dtype=torch.int32).numpy().tofile('/tmp/tokens.bin')"
for r in 1 2; do
  for o in "" "--cuda-gemm-tile 256,4,1,1"; do
    tag=${o:+forced}; tag=${tag:-rule}_$r
    timeout 90 $mlc train examples/minillm.mdl --target cuda --steps 12 --data /tmp/tokens.bin --data-dtype i32 $o > "$out/train_$tag.log" 2>&1 || rc=1
    echo "train $tag: $(grep -E '^step' "$out/train_$tag.log" | sed 's/.*(\([0-9.]*\) ms.*/\1/' | tail -10 | sort -n | tr '\n' ' ') | $(grep -E '^step 12' "$out/train_$tag.log")"
    timeout 60 $mlc bench bench/minillm_bf16.mdl --target cuda --runs 10 --warmup 3 $o > "$out/forward_$tag.log" 2>&1 || rc=1
    echo "forward $tag: $(grep -o 'median [0-9.]* ms' "$out/forward_$tag.log")"
  done
done
timeout 200 python3 .yardstick/torch_baseline.py train > $out/torch.log 2>&1 || rc=1
timeout 200 python3 .yardstick/torch_baseline.py infer >> $out/torch.log 2>&1 || rc=1
grep -E '^\{' $out/torch.log
echo "rc=$rc"
exit $rc
