#!/usr/bin/env bash
# On the GPU machine (device tool): the bf16 wgmma GEMM's configurations
# (bench/gemm_tune.py) on every MiniLLM shape beside cuBLAS, and the GEMM
# op cases under the two-blocks-a-multiprocessor configuration. Needs
# build-gpu/. Everything goes into $OUT/logs.tgz; summaries are printed.
set -uo pipefail
cd "$(dirname "$0")/.."
final=${OUT:-/tmp/mlc-tune}
work=/tmp/tune-logs
rm -rf $work && mkdir -p $work "$final"
. tests/gpu/env.sh $work
mlc=build-gpu/mlc opcheck=build-gpu/codegen/cuda/mlc_opcheck
rc=0
pack() { tar -C $work -czf "$final/logs.tgz" .; }
{ echo "# bench/h200_tune.sh, $(date -u '+%F %T') UTC, commit ${COMMIT:-?}"
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } | tee $work/env.log
for cfg in ${CHECK_CFGS:-128,3,2,0}; do
  for kw in matmul linear; do
    MLC_CUDA_GEMM_WG=$cfg timeout 100 python3 codegen/llvm/tests/opcheck.py ops --target cuda --jobs 16 \
      --opcheck $opcheck --work /tmp/ops-$kw-$cfg -k $kw > $work/ops-$kw-$cfg.log 2>&1 || rc=1
    echo "op cases -k $kw, MLC_CUDA_GEMM_WG=$cfg: $(grep -E '^FAIL|cases passed' $work/ops-$kw-$cfg.log | tr '\n' ' ')"
  done
done
pack
timeout ${TUNE_S:-420} python3 bench/gemm_tune.py --mlc $mlc --out $work ${CONFIGS:+--configs "$CONFIGS"} ${ONLY:+--only "$ONLY"} \
  > $work/gemm_tune.log 2>&1 || rc=1
cat $work/gemm_tune.md 2>/dev/null || tail -5 $work/gemm_tune.log
pack
echo "rc=$rc"
exit $rc
