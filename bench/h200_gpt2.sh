#!/usr/bin/env bash
# On the GPU machine (device tool, nvidia-h200), in one call: issue 27's GPU
# part for examples/gpt2.mdl (llm.c's GPT-2).
#   1. tests/ref/dropout.py with --target cuda: mlc's CUDA dropout against the
#      same Philox masks and PyTorch losses the CPU test (ctest ref.train.dropout)
#      uses ($OUT/dropout.log)
#   2. bench/gpt2_bench.py: GPT-2 124M (vocab 50257, ctx 1024, 12 layers, 12
#      heads, 768 wide, batch 4 x 1024, f32 as the train block declares, AdamW
#      as the train block's), 20 steps of `mlc train --target cuda` against
#      PyTorch eager and torch.compile from the same weights on the same tokens:
#      losses step by step (1e-4 relative), ms/step (median of steps 4..20)
#      ($OUT/gpt2.md, $OUT/gpt2.json, $OUT/gpt2_detail.json, $OUT/gpt2_bench.log)
# Everything also goes into $OUT/logs.tgz.  Needs build-gpu/ as
# tests/gpu/cuda_check.sh says; COMMIT=<hash> names the tree in the header and
# the JSON (the device's copy of .git may be stale).
#
# Expected runtime (cold kernel cache, fresh machine): dropout ~10 s (at the
# time of writing the cuda target has no dropout kernel, so `mlc train` stops at
# compile; with one, three small nvcc compiles, < 1.5 min); GPT-2 124M: ~15 s
# for the initial weights (124M parameters written as safetensors) and tokens,
# ~1 min of nvcc for mlc's 42 kernels plus 20 steps, ~15 s for eager, 1-2.5 min
# for torch.compile's first step: about 4-5 min in all.  The timeouts (100 s +
# 400 s, mlc train alone 240 s) keep it under 9 min; a timeout in the benchmark
# keeps what was written before it (gpt2.json is rewritten after each run).
#
#   COMMIT=$(git rev-parse --short HEAD) bench/h200_gpt2.sh
# A dry run on the CPU (the small config of tests/ref/gpt2.py):
#   OUT=/tmp/gpt2dry TARGET=cpu SMALL=1 MLC=build/mlc PYTHON=/usr/bin/python3 bench/h200_gpt2.sh
set -uo pipefail
cd "$(dirname "$0")/.."
. tests/gpu/env.sh /tmp/mlc-gpt2
mlc=${MLC:-build-gpu/mlc} target=${TARGET:-cuda} py=${PYTHON:-python3}
small=${SMALL:+--small}
commit=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo '?')}
export COMMIT=$commit
rc=0
gpu_header "bench/h200_gpt2.sh (target $target${small:+, small})" "$out/env.log"
$py -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1 | tee -a "$out/env.log"
$mlc --version 2>&1 | tee -a "$out/env.log"
start=$SECONDS

echo "## dropout, mlc --target $target against tests/ref/philox.py's masks"
timeout 100 $py tests/ref/dropout.py "$mlc" . /tmp/gpt2-dropout "$target" > "$out/dropout.log" 2>&1 ||
  { r=$?; rc=1; echo "dropout: FAIL (exit $r$([ $r = 124 ] && echo ", timeout"))"; }
grep -E "^(target|ok|FAIL|skip)|error:" "$out/dropout.log"
echo "(dropout: $((SECONDS - start)) s)"

label=${SMALL:+small}
echo "## GPT-2 ${label:-124M}: mlc train against PyTorch eager and torch.compile"
t=$SECONDS
timeout 400 $py bench/gpt2_bench.py --mlc "$mlc" --target "$target" --out "$out" --commit "$commit" \
  --mlc-timeout 240 --work /tmp/gpt2-bench $small \
  --command "bench/h200_gpt2.sh (device tool, nvidia-h200): bench/gpt2_bench.py${small:+ --small}" \
  > "$out/gpt2_bench.log" 2>&1 || { r=$?; rc=1; echo "gpt2_bench: FAIL (exit $r$([ $r = 124 ] && echo ", timeout"))"; tail -20 "$out/gpt2_bench.log"; }
grep -E "^(mlc train|eager|compile|torch.compile|losses|\{)" "$out/gpt2_bench.log"
sed -n '/^| run /,/^$/p' "$out/gpt2.md" 2>/dev/null
echo "(gpt2: $((SECONDS - t)) s)"

tar czf "$out/logs.tgz" -C "$out" $(cd "$out" && ls *.log *.md *.json 2>/dev/null)
echo "rc=$rc, $((SECONDS - start)) s in all; $out/gpt2.json, $out/logs.tgz"
exit $rc
