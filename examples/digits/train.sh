#!/bin/sh
# The digits MLP trained from the command line: prepare the data, train
# examples/mlp.mdl (inputs=64 hidden=64, batch 32) for 1500 SGD steps on 80 %
# of it, shuffled, with the validation loss every 500 steps, export the
# weights and compute the held-out accuracy with numpy.
# Usage: examples/digits/train.sh MLC WORKDIR
set -e
mlc=$1 work=$2 here=$(dirname "$0") py=${PYTHON:-/usr/bin/python3}  # Debian's, with numpy
"$py" "$here/prepare.py" "$work"
"$mlc" train "$here/../mlp.mdl" --target cpu inputs=64 hidden=64 \
    --input x="$work/x.npy" --input labels="$work/y.npy" --shuffle 0 --eval-split 0.2 --eval-every 500 \
    --steps 1500 --save "$work/digits.ckpt" --export "$work/digits.safetensors"
"$py" "$here/accuracy.py" "$work/digits.safetensors" "$work"
