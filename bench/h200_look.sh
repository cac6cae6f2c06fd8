#!/usr/bin/env bash
# On the GPU machine (device tool), one call that checks main and looks at
# where the bf16 forward and the GEMMs lose time, before changing kernels:
#   1. every CUDA op case (opcheck.py ops --target cuda) for the build carried;
#   2. the MiniLLM bf16 forward: mlc bench, and its per-kernel profile;
#   3. bench/gemm_shapes.py --quick (mlc against cuBLAS through torch);
#   4. Nsight Compute's warp-state (stall) sections on three GEMMs: the
#      in-projection Linear with bias (bf16, 8192x6144x2048), the FFN
#      down-projection (bf16, 8192x2048x8192) and the 3xTF32 f32 GEMM at 4096^3.
# Needs build-gpu/. Everything goes into $OUT/logs.tgz; summaries are printed.
set -uo pipefail
cd "$(dirname "$0")/.."
final=${OUT:-/tmp/mlc-look}
work=/tmp/look-logs
rm -rf $work && mkdir -p $work/ncu "$final"
. tests/gpu/env.sh $work
mlc=build-gpu/mlc opcheck=build-gpu/codegen/cuda/mlc_opcheck
rc=0
pack() { tar -C $work -czf "$final/logs.tgz" .; }
gpu_header bench/h200_look.sh $work/env.log
echo "## 1. every op case"
timeout 100 python3 tests/ops/opcheck.py ops --target cuda --jobs 16 --opcheck $opcheck \
  --work /tmp/ops-all > $work/ops.log 2>&1 || rc=1
grep -E "^FAIL|cases passed" $work/ops.log
pack
echo "## 2. MiniLLM bf16 forward"
timeout 120 $mlc bench bench/minillm_bf16.mdl --target cuda --runs 10 --warmup 3 > $work/forward.log 2>&1 || rc=1
grep -E "median" $work/forward.log
timeout 60 $mlc profile bench/minillm_bf16.mdl --target cuda --steps 5 > $work/forward_profile.log 2>&1 || rc=1
head -40 $work/forward_profile.log | cut -c1-160
pack
echo "## 3. GEMM shapes"
timeout 150 python3 bench/gemm_shapes.py --mlc $mlc --out $work --quick > $work/gemm_shapes.log 2>&1 || rc=1
cat $work/gemm_shapes.md 2>/dev/null | head -30
pack
echo "## 4. ncu warp states"
export PATH=$PATH:/usr/local/cuda/bin:$(ls -d /opt/nvidia/nsight-compute/* 2>/dev/null | head -1)
secs="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\\.ratio"
timeout 90 ncu --clock-control none $secs -k regex:"mlc_(fused|matmul|linear)" --launch-count 1 \
  $mlc bench bench/gemm_linear.mdl --target cuda --runs 1 --warmup 0 M=8192 N=6144 K=2048 bias=true > $work/ncu/inproj.log 2>&1 || rc=1
timeout 90 ncu --clock-control none $secs -k regex:"mlc_(fused|matmul|linear)" --launch-count 1 \
  $mlc bench bench/gemm_linear.mdl --target cuda --runs 1 --warmup 0 M=8192 N=2048 K=8192 bias=false > $work/ncu/down.log 2>&1 || rc=1
timeout 90 ncu --clock-control none $secs -k regex:"mlc_(fused|matmul|linear)" --launch-count 1 \
  $mlc bench bench/gemm_f32_nn.mdl --target cuda --runs 1 --warmup 0 --f32-matmul 3xtf32 > $work/ncu/f32.log 2>&1 || rc=1
for f in inproj down f32; do echo "### $f"; grep -E "mlc_|Duration|Throughput|Stall|Warp Cycles|Issued Warp|Eligible|Active Warps|Registers|Achieved Occ|Block Size|Grid Size|Shared Memory Config|stalled" $work/ncu/$f.log | awk '$NF+0 > 0.05 || !/stalled/' | head -60 | cut -c1-150; done
pack
echo "rc=$rc"
exit $rc
