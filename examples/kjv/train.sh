#!/bin/sh
# A small causal language model (examples/gpt2.mdl at vocab 256, 2 layers,
# 4 heads, width 96, context 128, tied embeddings: 0.26M parameters)
# trained byte by byte on the King James Bible (Debian's bible-kjv and
# bible-kjv-text), on the CPU, batch 16, AdamW at 2e-3: the last 1 % of the
# text held out, its loss every 100 steps; then the curve as an SVG
# (plot.py).
# Usage: examples/kjv/train.sh MLC WORKDIR [STEPS]
set -e
mlc=$1 work=$2 steps=${3:-3000} here=$(dirname "$0") py=${PYTHON:-/usr/bin/python3}  # Debian's, with numpy
"$py" "$here/prepare.py" "$work" 128
"$mlc" train "$here/../gpt2.mdl" --target cpu vocab_size=256 block_size=128 n_layer=2 n_head=4 n_embd=96 \
    batch=16 seq=128 learning_rate=2e-3 \
    --input idx="$work/idx.npy" --input targets="$work/targets.npy" --eval-split 0.01 --eval-every 100 \
    --steps "$steps" --save "$work/kjv.ckpt" | tee "$work/train.log"
"$py" "$here/plot.py" "$work/train.log" "$work/loss.svg"
