#!/usr/bin/env bash
# On the GPU machine (device tool, nvidia-h200), a short call (about 3 minutes):
# every CUDA op case, every SPIR-V op case on NVIDIA's Vulkan driver, and the
# recorded ONNX tests of the float kernels (casts, IsNaN, IsInf, Relu, Mul; see
# bench/h200_onnx.sh for the recording) on spirv and cuda.  Carry: .gl
# build-gpu/mlc build-gpu/codegen/cuda/mlc_opcheck build-gpu/lib
# build-gpu/onnx-rec.tgz.  Logs in $OUT/logs.tgz after each part.
set -uo pipefail
cd "$(dirname "$0")/.."
final=${OUT:-/tmp/mlc-check}
work=/tmp/check
rm -rf $work && mkdir -p $work "$final"
. tests/gpu/env.sh $work
vk_loader
gpu_header bench/h200_check.sh $work/env.log
rc=0 t0=$(date +%s)
save() { tar -C $work -czf "$final/logs.tgz" . 2>/dev/null; echo "(at $(( $(date +%s) - t0 )) s)"; }
opcheck=build-gpu/codegen/cuda/mlc_opcheck
tar xzf build-gpu/onnx-rec.tgz -C /tmp
for t in spirv cuda; do
  timeout 40 python3 tests/onnx/replay.py --mlc build-gpu/mlc --target $t --bundle /tmp/rec --jobs 16 \
    --filter "cast|isnan|isinf|relu|Relu|_mul" > $work/replay-$t.log 2>&1 || rc=1
  tail -1 $work/replay-$t.log; grep -E "^(FAIL|ERROR)" $work/replay-$t.log
done
save
for t in cuda spirv; do
  timeout ${OPS_LIMIT:-80} python3 tests/ops/opcheck.py ops --target $t --jobs 16 --opcheck $opcheck --work /tmp/ops-$t \
    > $work/ops-$t.log 2>&1 || rc=1
  echo "$t: $(grep -E "cases passed" $work/ops-$t.log)"; grep -E "^FAIL" $work/ops-$t.log | head; save
done
echo "rc=$rc"
exit $rc
