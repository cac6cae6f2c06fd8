#!/usr/bin/env bash
# On the GPU machine (device tool), one call: issue 20's f32 benchmarks
# (bench/cuda_f32.sh), issue 21's memory (bench/cuda_memory.sh), and the
# seed MiniLLM's train step against the build before the interleave pass
# (build-gpu-old/, carried, if present), in the same call.  Every log is
# packed into $OUT/logs.tgz; the summaries are copied to $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
final=$OUT
work=/tmp/session-logs
mkdir -p $work/f32 $work/mem $work/old
OUT=$work/f32 bash bench/cuda_f32.sh; rc=$?
OUT=$work/mem bash bench/cuda_memory.sh || rc=1
if [ -x build-gpu-old/mlc ]; then
  . tests/gpu/env.sh $work/old
  echo "## the build before (build-gpu-old): 12 steps of the seed MiniLLM"
  timeout 400 build-gpu-old/mlc train examples/minillm.mdl --target cuda --steps 12 --data /tmp/mlc-memory-tokens.bin \
    --data-dtype i32 > $work/old/train.log 2>&1 || rc=1
  grep -E "^step|device memory" $work/old/train.log
fi
tar -C $work -czf "$final/logs.tgz" .
cp $work/f32/f32.json $work/f32/f32_gemm.md $work/f32/f32_models.md $work/mem/memory.log "$final/" 2>/dev/null
exit $rc
