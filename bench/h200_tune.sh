#!/usr/bin/env bash
# On the GPU machine (device tool): the bf16 wgmma GEMM's configurations
# (bench/gemm_tune.py) on every MiniLLM shape beside cuBLAS. (Its first run,
# at 0d2ed3b, also passed the matmul and linear op cases under 128,3,2,0,
# through an environment variable that --cuda-gemm-tile has replaced.)
# Needs build-gpu/. Everything goes into $OUT/logs.tgz; summaries are printed.
set -uo pipefail
cd "$(dirname "$0")/.."
final=${OUT:-/tmp/mlc-tune}
work=/tmp/tune-logs
rm -rf $work && mkdir -p $work "$final"
. tests/gpu/env.sh $work
mlc=build-gpu/mlc opcheck=build-gpu/codegen/cuda/mlc_opcheck
rc=0
pack() { tar -C $work -czf "$final/logs.tgz" .; }
gpu_header bench/h200_tune.sh $work/env.log
pack
timeout ${TUNE_S:-420} python3 bench/gemm_tune.py --mlc $mlc --out $work ${CONFIGS:+--configs "$CONFIGS"} ${ONLY:+--only "$ONLY"} \
  > $work/gemm_tune.log 2>&1 || rc=1
cat $work/gemm_tune.md 2>/dev/null || tail -5 $work/gemm_tune.log
pack
echo "rc=$rc"
exit $rc
