#!/usr/bin/env bash
# On the GPU machine (device tool), the checks that session 16's changes
# (2026-12-04, written without a GPU) still owe the H200:
#   1. every CUDA op case against float64 (the GPU numerics check: the
#      driver now makes its CUDA and Vulkan devices through
#      mlc_device_create with the plan, issue 22); SKIP_OPS=1 leaves them out;
#   2. the SPIR-V op cases of matmul, linear and attention on NVIDIA's
#      driver (the same change, the Vulkan side);
#   3. tests/spirv/plan_file.sh for cuda and for spirv: <name>.mlcplan run by
#      a program linked against libmlcrt alone (tests/spirv/plan_app.c,
#      compiled here against build-gpu's libmlcrt.a) and by mlc run and
#      train, byte-identical to the .mdl's;
#   4. tests/dist/fsdp_clip.py with cuda-nccl: clip_grad_norm under fsdp on
#      one GPU through NCCL with one rank (the sharded kernels and the
#      all_reduce, written and reviewed without a GPU), against PyTorch.
# Carry build-gpu/mlc, build-gpu/lib, build-gpu/runtime/libmlcrt.a and
# build-gpu/codegen/cuda/mlc_opcheck.  Logs in $OUT/logs.tgz; a summary on
# standard output.
set -uo pipefail
cd "$(dirname "$0")/.."
final=${OUT:-/tmp/mlc-s16}
work=/tmp/s16
rm -rf $work && mkdir -p $work "$final"
. tests/gpu/env.sh $work
vk_loader
export PATH=$PATH:/usr/local/cuda/bin
pack() { tar -C $work -czf "$final/logs.tgz" .; }
mlc=$PWD/build-gpu/mlc opcheck=build-gpu/codegen/cuda/mlc_opcheck
rc=0
gpu_header bench/h200_s16.sh $work/env.log
$mlc devices >> $work/env.log 2>&1
if [ -z "${SKIP_OPS:-}" ]; then
  timeout 300 python3 tests/ops/opcheck.py ops --target cuda --jobs 16 --opcheck $opcheck --work /tmp/ops-cuda \
    > $work/ops_cuda.log 2>&1 || rc=1
  echo "cuda op cases: $(grep -E 'cases passed' $work/ops_cuda.log | tr '\n' ' ')"
  grep -E '^FAIL' $work/ops_cuda.log | head -5 | cut -c1-200
fi
for kw in matmul linear attention; do
  timeout 90 python3 tests/ops/opcheck.py ops --target spirv --jobs 12 --opcheck $opcheck --work /tmp/ops-spv-$kw -k $kw \
    || rc=1
done > $work/ops_spirv.log 2>&1
echo "spirv op cases: $(grep -E 'cases passed' $work/ops_spirv.log | tr '\n' ' ')"
grep -E '^FAIL' $work/ops_spirv.log | head -5 | cut -c1-200
cc -std=c11 -O2 -I. -o $work/plan_app tests/spirv/plan_app.c build-gpu/runtime/libmlcrt.a -Lbuild-gpu/lib \
  -l:libcjson.so.1 -lpthread -lm -ldl > $work/plan_app_build.log 2>&1 || { rc=1; cat $work/plan_app_build.log; }
for t in cuda spirv; do
  LD_LIBRARY_PATH=$PWD/build-gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} XDG_CACHE_HOME=$work/cache \
    timeout 240 sh tests/spirv/plan_file.sh $mlc . $work/plan_$t $work/plan_app $t > $work/plan_file_$t.log 2>&1
  r=$?
  [ $r -eq 0 ] || rc=1
  echo "plan_file.sh $t: exit $r ($(tail -1 $work/plan_file_$t.log | cut -c1-160))"
done
PATH=$PATH:/usr/local/cuda/bin XDG_CACHE_HOME=$work/cache timeout 200 python3 tests/dist/fsdp_clip.py $mlc $work/clip \
  cuda-nccl > $work/fsdp_clip.log 2>&1 || rc=1
echo "fsdp_clip.py cuda-nccl: $(tail -1 $work/fsdp_clip.log)"
grep -E "^FAIL" $work/fsdp_clip.log | head -5
pack
echo "rc=$rc"
exit $rc
