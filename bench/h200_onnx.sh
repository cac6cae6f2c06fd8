#!/usr/bin/env bash
# On the GPU machine (device tool, nvidia-h200), one call: issue 28's GPU part.
# The ONNX tests that pass on the CPU, replayed on --target cuda and on
# --target spirv (NVIDIA's Vulkan driver), and the end-to-end transformer on
# cuda where the device's torch can export it.
#
# The GPU machine has neither Debian's libonnx-testdata nor (perhaps) the onnx
# package, so the tests are recorded here first, on the CPU target:
#   tests/onnx/run_conformance.py --mlc build/mlc --jobs 2 --record /tmp/rec
#   tar czf build-gpu/onnx-rec.tgz -C /tmp rec
# build-gpu/ is the CUDA-only build with the ONNX frontend on
# (-DMLC_FRONTEND_ONNX=ON), with libprotobuf-c.so.1 beside the other two
# libraries in build-gpu/lib.  Carry: .gl (the Vulkan loader's debs, see
# tests/gpu/vk_env.sh), build-gpu/mlc, build-gpu/lib, build-gpu/onnx-rec.tgz.
# Logs in $OUT/logs.tgz (rewritten after each part); COMMIT=<hash> names the tree.
set -uo pipefail
cd "$(dirname "$0")/.."
final=${OUT:-/tmp/mlc-onnx}
work=/tmp/onnx-h200
rm -rf $work && mkdir -p $work "$final"
. tests/gpu/env.sh $work
vk_loader
gpu_header bench/h200_onnx.sh $work/env.log
rc=0
save() { tar -C $work -czf "$final/logs.tgz" .; }
build-gpu/mlc devices 2>&1 | tee -a $work/env.log
python3 -c 'import onnx; print("onnx", onnx.__version__)' >> $work/env.log 2>&1 || echo "no onnx package" >> $work/env.log
tar xzf build-gpu/onnx-rec.tgz -C /tmp
echo "recorded: $(ls /tmp/rec/*/ | grep -c test) tests"
for t in cuda spirv; do
  s=$(date +%s)
  timeout ${LIMIT:-240} python3 tests/onnx/replay.py --mlc build-gpu/mlc --target $t --bundle /tmp/rec --jobs 16 \
    --timeout 120 > $work/replay-$t.log 2>&1 || rc=1
  grep -v "^PASS" $work/replay-$t.log | tail -40
  echo "($t: $(( $(date +%s) - s )) s)"
  save
done
echo "## e2e transformer (torch.onnx.export on the device's torch) on cuda"
timeout 120 python3 tests/onnx/e2e_transformer.py --mlc build-gpu/mlc --target cuda --work $work/e2e > $work/e2e.log 2>&1
echo "e2e: exit $?"; tail -8 $work/e2e.log
save
echo "rc=$rc"
exit $rc
