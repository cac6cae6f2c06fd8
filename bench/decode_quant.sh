#!/bin/sh
# CPU decode tokens/s in f32, --quantize int8 and --quantize int4 (group 128):
# `mlc generate` on examples/minillm_causal.mdl at the medium config of
# bench/results/decode-cpu-2026-12-02.md (dim 512, 8 layers, 8 heads, vocab
# 8192: 134 MB of f32 weights), batch 1, random weights (PyTorch's init, seed
# 0), a 64-token prompt, 128 new tokens, greedy.  The three modes take turns
# within each run, so that the load of a shared machine falls on all of them.
# Usage: bench/decode_quant.sh MLC [RUNS] [THREADS]
set -e
mlc=$1 runs=${2:-3} threads=${3:-2}
model=$(dirname "$0")/../examples/minillm_causal.mdl
prompt=$(seq -s, 1 64)
cfg="dim=512 layers=8 heads=8 vocab=8192 max_ctx=512 prefill=64"
echo "config: $cfg threads=$threads prompt=64 new=128; $(uptime)"
r=0
while [ "$r" -lt "$runs" ]; do
    for q in f32 int8 int4; do
        opt=""; [ "$q" = f32 ] || opt="--quantize $q"
        line=$("$mlc" generate "$model" $cfg --threads "$threads" --prompt "$prompt" --max-new 128 $opt 2>/dev/null | grep '^decode:')
        echo "run $r $q: $line"
    done
    r=$((r + 1))
done
