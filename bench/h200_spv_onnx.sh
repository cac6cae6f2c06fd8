#!/usr/bin/env bash
# On the GPU machine (device tool), one call, most important first, each part
# in its own time box so that the call ends inside LIMIT seconds (default 570):
#   1. bench/h200_khr.sh: the SPIR-V GEMM, linear, fused and attention op cases
#      with --spirv-coopmat=khr (now with bf16 cooperative matrices and the
#      runtime's check of each module's multiplies) and nv, on NVIDIA's driver;
#   2. issue 28's replay of the recorded ONNX tests (build-gpu/onnx-rec.tgz,
#      bench/h200_onnx.sh says how it is made): all of them on --target spirv,
#      the casts on --target cuda (the bf16 NaN store);
#   3. bench/h200_spirv_gemm.sh, the SPIR-V GEMM sweep against cuBLAS, with
#      the time left.
# Carry .gl, build-gpu/mlc, build-gpu/lib, build-gpu/codegen/cuda/mlc_opcheck,
# build-gpu/onnx-rec.tgz.  Logs under $OUT (tarred: the device returns 8 files).
set -uo pipefail
cd "$(dirname "$0")/.."
final=${OUT:-/tmp/mlc-spv-onnx}
work=/tmp/spv-onnx
rm -rf $work && mkdir -p $work "$final"
t0=$(date +%s) limit=${LIMIT:-570}
left() { echo $(( limit - ($(date +%s) - t0) )); }
pack() { tar -C $work -czf "$final/logs.tgz" .; }
rc=0
parts=${PARTS:-123} # PARTS=2: the replay alone
if [[ $parts == *1* ]]; then
echo "## 1. KHR and NV op cases"
OUT=$work/khr timeout 150 bash bench/h200_khr.sh > $work/khr.log 2>&1 || rc=1
grep -vE "^#|^NVIDIA" $work/khr.log
pack
fi
if [[ $parts == *2* ]]; then
echo "## 2. ONNX replay ($(left) s left)"
mkdir -p $work/onnx
OUT=$work/onnx . tests/gpu/env.sh $work/onnx
vk_loader
tar xzf build-gpu/onnx-rec.tgz -C /tmp
echo "recorded: $(ls /tmp/rec/*/ | grep -c test) tests"
timeout 60 python3 tests/onnx/replay.py --mlc build-gpu/mlc --target cuda --bundle /tmp/rec --jobs 16 --timeout 50 \
  --filter cast > $work/onnx/replay-cuda-cast.log 2>&1 || rc=1
grep -v "^PASS" $work/onnx/replay-cuda-cast.log | tail -8
s=$(date +%s)
timeout 210 python3 tests/onnx/replay.py --mlc build-gpu/mlc --target spirv --bundle /tmp/rec --jobs 16 --timeout 100 \
  > $work/onnx/replay-spirv.log 2>&1 || rc=1
grep -v "^PASS" $work/onnx/replay-spirv.log | tail -12
echo "(spirv: $(( $(date +%s) - s )) s)"
pack
fi
b=$(( $(left) - 90 ))
echo "## 3. SPIR-V GEMM sweep ($(left) s left, budget $b s)"
if [[ $parts == *3* ]] && [ $b -gt 40 ]; then
  OUT=$work/sweep BUDGET=$b timeout $(( b + 80 )) bash bench/h200_spirv_gemm.sh > $work/sweep.log 2>&1 || rc=1
  tail -25 $work/sweep.log
fi
pack
echo "rc=$rc"
exit $rc
