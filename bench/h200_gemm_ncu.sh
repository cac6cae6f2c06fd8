#!/usr/bin/env bash
# On the GPU machine (device tool), one call: why the bf16 GEMMs at K = 2048
# trail cuBLAS. Nsight Compute (SpeedOfLight, WarpStateStats, Memory and
# Launch sections, the tensor pipe's and L2's utilisation) on one launch each of
#   mlc default / mlc co,4 / cuBLAS (bench/gemm_cublas_one.py, its last launch)
# at in_proj 8192x6144x2048 with bias, in_proj without bias, ffn_up
# 8192x8192x2048 and ffn_down 8192x2048x8192; then mlc bench of the same (ms).
# Needs build-gpu/. Logs in $OUT/logs.tgz.
set -uo pipefail
cd "$(dirname "$0")/.."
final=${OUT:-/tmp/mlc-gemm-ncu}
work=/tmp/gemm-ncu-logs
rm -rf $work && mkdir -p $work "$final"
. tests/gpu/env.sh $work
export PATH=$PATH:/usr/local/cuda/bin:$(ls -d /opt/nvidia/nsight-compute/* 2>/dev/null | head -1)
mlc=$PWD/build-gpu/mlc
rc=0
pack() { tar -C $work -czf "$final/logs.tgz" .; }
gpu_header bench/h200_gemm_ncu.sh $work/env.log
sec="--section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy"
met="--metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,lts__t_sectors.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,sm__cycles_active.avg,gpc__cycles_elapsed.max,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio"
shapes="in_proj:8192:6144:2048:true in_proj_nobias:8192:6144:2048:false ffn_up:8192:8192:2048:false ffn_down:8192:2048:8192:false"
for s in $shapes; do
  IFS=: read name M N K bias <<< "$s"
  for cfg in default co,4; do
    o=""; [ $cfg = default ] || o="--cuda-gemm-tile $cfg"
    $mlc bench bench/gemm_linear.mdl --target cuda --runs 1 --warmup 0 M=$M N=$N K=$K bias=$bias $o > /dev/null 2>&1
    timeout 120 ncu $sec $met -k regex:"mlc_(fused|linear)" --launch-count 1 $mlc bench bench/gemm_linear.mdl --target cuda --runs 1 --warmup 0 \
      M=$M N=$N K=$K bias=$bias $o > $work/ncu_${name}_${cfg/,/}.log 2>&1 || rc=1
    t=$($mlc bench bench/gemm_linear.mdl --target cuda --runs 20 --warmup 3 M=$M N=$N K=$K bias=$bias $o 2>&1 | grep -o 'median [0-9.]* ms')
    echo "$name $cfg: $t; $(grep -E 'Duration|tensor_op_hmma|lts__throughput|stalled_barrier|Registers Per|Achieved Occ' $work/ncu_${name}_${cfg/,/}.log | awk '{print $1, $NF}' | tr '\n' ' ')"
  done
  timeout 120 ncu $sec $met -k regex:nvjet --launch-skip 2 --launch-count 1 python3 bench/gemm_cublas_one.py $M $N $K $bias \
    > $work/ncu_${name}_cublas.log 2>&1 || rc=1
  echo "$name cuBLAS: $(grep -E 'nvjet|Duration|tensor_op_hmma|lts__throughput|stalled_barrier|Registers Per|Achieved Occ|Cluster Size|Grid Size' $work/ncu_${name}_cublas.log | awk '{print $1, $NF}' | tr '\n' ' ')"
  pack
done
echo "rc=$rc"
exit $rc
