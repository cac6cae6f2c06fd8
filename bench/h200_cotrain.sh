#!/usr/bin/env bash
# On the GPU machine (device tool), a short call: the MiniLLM train step (12
# steps) with the tile rule that picks the persistent cooperative GEMM
# (co,4) for unfused GEMMs, then with --cuda-gemm-tile 256,4,1,1 (every
# 16-bit GEMM on the 128 x 256 non-persistent kernel), then the bf16 forward.
# Needs build-gpu/. Logs in $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
. tests/gpu/env.sh /tmp/cotrain
mlc=$PWD/build-gpu/mlc
gpu_header bench/h200_cotrain.sh $out/env.log
python3 -c "import numpy as np; np.random.seed(0); np.random.randint(0, 32000, 12 * 8 * 1024 + 1).astype(np.int32).tofile('/tmp/tokens.bin')"
for o in "" "--cuda-gemm-tile 256,4,1,1"; do
  timeout 60 $mlc train examples/minillm.mdl --target cuda --steps 12 --data /tmp/tokens.bin --data-dtype i32 $o > "$out/train${o:+_forced}.log" 2>&1
  echo "train [$o]: $(grep -E '^step' "$out/train${o:+_forced}.log" | sed 's/.*(\([0-9.]*\) ms.*/\1/' | tail -10 | sort -n | tr '\n' ' ') | $(grep -E '^step 12' "$out/train${o:+_forced}.log")"
done
timeout 40 $mlc bench bench/minillm_bf16.mdl --target cuda --runs 10 --warmup 3 > $out/forward.log 2>&1
echo "forward: $(grep -o 'median [0-9.]* ms' $out/forward.log)"
