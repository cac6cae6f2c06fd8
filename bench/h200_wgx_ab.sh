#!/usr/bin/env bash
# On the GPU machine (device tool, nvidia-h200), one call:
#   1. the f32 GEMM op cases (matmul, linear, fused) with the warp-specialised
#      3xTF32 GEMM (mlc_gemm_wgx: a producer warpgroup with two k-tiles in
#      registers, setmaxnreg 192/160)
#   2. bench/cuda_f32.sh with it: GEMM table, accuracy, models, f32.json
#   3. bench/f32_gemm.py with build-gpu/mlc-sync (the same tree with
#      gemm.cuh and emit_gemm.c of 170bb58: every thread loads and
#      multiplies in turn), for the A/B in the same call
#   4. bench/gpt2_bench.py: GPT-2 124M (examples/gpt2.mdl) against PyTorch
#      eager and torch.compile (issue 27), with what time is left
# Needs build-gpu/ with mlc-sync beside mlc.  Logs in $OUT/logs.tgz.
set -uo pipefail
cd "$(dirname "$0")/.."
final=${OUT:-/tmp/mlc-wgx-ab}
work=/tmp/wgx-ab
rm -rf $work && mkdir -p $work/ops $work/f32 $work/sync $work/gpt2 "$final"
. tests/gpu/env.sh $work
gpu_header bench/h200_wgx_ab.sh $work/env.log
rc=0
start=$SECONDS
save() { tar -C $work -czf "$final/logs.tgz" .; }
echo "## f32 GEMM op cases"
for k in matmul linear fused; do
  timeout 60 python3 tests/ops/opcheck.py ops --target cuda --jobs 16 -k $k \
    --opcheck build-gpu/codegen/cuda/mlc_opcheck --work /tmp/ops-$k > $work/ops/$k.log 2>&1 || rc=1
  echo "$k: $(grep -E "cases passed" $work/ops/$k.log) $(grep -c ^FAIL $work/ops/$k.log) FAIL"
done
echo "(ops: $((SECONDS - start)) s)"; save
OUT=$work/f32 OPS_K=matmul_tn_f32_split bash bench/cuda_f32.sh || rc=1
cp $work/f32/f32.json "$final/" 2>/dev/null
echo "(f32: $((SECONDS - start)) s)"; save
echo "## the same GEMMs with mlc-sync (170bb58's kernel)"
timeout 120 python3 bench/f32_gemm.py --mlc build-gpu/mlc-sync --target cuda --out $work/sync --work /tmp/f32_gemm_sync --f32-matmul 3xtf32 \
  > $work/sync/f32_gemm.log 2>&1 || { rc=1; tail -5 $work/sync/f32_gemm.log; }
grep -E "^\| " $work/sync/f32_gemm.md | head -20
echo "(sync: $((SECONDS - start)) s)"; save
left=$((570 - (SECONDS - start)))
echo "## GPT-2 124M: mlc train against PyTorch eager and torch.compile ($left s left)"
if [ $left -gt 120 ]; then
  timeout $left python3 bench/gpt2_bench.py --mlc build-gpu/mlc --target cuda --out $work/gpt2 --commit "${COMMIT:-?}" \
    --mlc-timeout 240 --work /tmp/gpt2-bench \
    --command "bench/h200_wgx_ab.sh (device tool, nvidia-h200): bench/gpt2_bench.py" > $work/gpt2/gpt2_bench.log 2>&1 ||
    { rc=1; echo "gpt2_bench: exit $?"; tail -20 $work/gpt2/gpt2_bench.log; }
  grep -E "^(mlc train|eager|compile|torch.compile|losses|\{)" $work/gpt2/gpt2_bench.log
  sed -n '/^| run /,/^$/p' $work/gpt2/gpt2.md 2>/dev/null
  cp $work/gpt2/gpt2.json "$final/" 2>/dev/null
fi
echo "(all: $((SECONDS - start)) s)"; save
echo "rc=$rc"
exit $rc
