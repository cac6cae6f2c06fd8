#!/usr/bin/env bash
# On the H200 (device tool), in one call: the profiler's GPU half, checked.
#   1. `mlc profile` of the Linear 4096 fp16 example before calibrating (the
#      table's header: NVIDIA's datasheet), then `mlc calibrate --target cuda`;
#   2. `mlc profile` (now with the cached calibration) of the Linear 4096 fp16
#      train step (examples/linear.mdl: x 1024x4096, as torch_baseline.py's
#      linear4096_fwd_bwd) and of the MiniLLM train step (examples/minillm.mdl:
#      bf16 compute, AdamW), each with --trace and --roofline;
#   3. `ncu --set full --clock-control none` on three kernels of ONE MiniLLM
#      train step (`mlc train --steps 1`): the first rmsnorm forward
#      (layers.0.norm1), the largest GEMM (the head's linear, the 49th
#      mlc_linear launch) and the first attention forward (layers.0.attn),
#      selected by kernel name, --launch-skip/--launch-count and the NVTX
#      range "train" that the runtime pushes around the step.
# Needs build-gpu-prof/ carried: a CUDA-only build as tests/gpu/cuda_check.sh
# describes (mlc and lib/), plus BUILD_INFO (what it was built from).
# Logs and files go to $OUT (at most 8 files come back).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/mlc-profile}
mkdir -p "$out"
export LD_LIBRARY_PATH=$PWD/build-gpu-prof/lib:${LD_LIBRARY_PATH:-}
export XDG_CACHE_HOME=/tmp/mlc-cache PYTHONUNBUFFERED=1
export CUDA_MODULE_LOADING=EAGER # no lazy module loading inside the first timed steps
mlc=build-gpu-prof/mlc
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
rc=0
{
  echo "# bench/profile_h200.sh, $(date -u +%FT%TZ); mlc built from $(cat build-gpu-prof/BUILD_INFO 2>/dev/null || echo '?')"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
  echo "## 1. before calibration: the header of the Linear 4096 fp16 profile"
  $mlc profile examples/linear.mdl --target cuda --entry train_step --steps 3 2>&1 | grep -A1 "^ceilings:" || rc=1
  echo "## 1. mlc calibrate --target cuda"
  $mlc calibrate --target cuda || rc=1
  cp "$XDG_CACHE_HOME/mlc/ceilings-cuda.json" "$out/" || rc=1
  echo "## 2. mlc profile examples/linear.mdl --target cuda --entry train_step --steps 50 (fp16, x 1024x4096)"
  $mlc profile examples/linear.mdl --target cuda --entry train_step --steps 50 --trace "$out/linear_trace.json" \
    --roofline "$out/linear_roofline.svg" || rc=1
  echo "## 2. mlc profile examples/minillm.mdl --target cuda --entry train_step --steps 6"
  $mlc profile examples/minillm.mdl --target cuda --entry train_step --steps 6 --trace "$out/minillm_trace.json" \
    --roofline "$out/minillm_roofline.svg" || rc=1
  nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
} > "$out/profile.log" 2>&1
cat "$out/profile.log" | grep -v "^  \|^[a-z_]*%[0-9]" | head -60

# 3. ncu: one kernel per run of one train step.
ncu_one() { # name, kernel regex, launches of it to skip
  local name=$1 re=$2 skip=$3 log=/tmp/ncu_$1.log
  echo "## 3. ncu: $name: kernel regex:$re, launch-skip $skip, launch-count 1, NVTX range train/"
  timeout 170 "$ncu" --set full --clock-control none --nvtx --nvtx-include "train/" -k "regex:$re" --launch-skip "$skip" \
    --launch-count 1 -f -o "/tmp/ncu_$name" $mlc train examples/minillm.mdl --target cuda --steps 1 > "$log" 2>&1
  local r=$?
  if [ $r -ne 0 ] || grep -q "No kernels were profiled" "$log"; then
    echo "(exit status $r or nothing profiled with the NVTX filter: again without it)"
    tail -5 "$log"
    timeout 170 "$ncu" --set full --clock-control none --nvtx -k "regex:$re" --launch-skip "$skip" --launch-count 1 -f \
      -o "/tmp/ncu_$name" $mlc train examples/minillm.mdl --target cuda --steps 1 > "$log" 2>&1 || rc=1
  fi
  grep "==PROF==\|==ERROR==\|==WARNING==" "$log" | head -8
  "$ncu" --import "/tmp/ncu_$name.ncu-rep" --page details 2>&1 || rc=1
  "$ncu" --import "/tmp/ncu_$name.ncu-rep" --page raw --csv --metrics gpu__time_duration.sum,\
sm__throughput.avg.pct_of_peak_sustained_elapsed,gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed,\
gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum 2>&1
}
if [ -z "$ncu" ]; then
  echo "no ncu on this machine" | tee "$out/ncu.log"
  rc=1
else
  {
    "$ncu" --version | tail -1
    ncu_one rmsnorm '^mlc_rmsnorm_[0-9a-f]{16}_0$' 0
    ncu_one gemm_head '^mlc_linear_[0-9a-f]{16}_0$' 48
    ncu_one attention '^mlc_attention_[0-9a-f]{16}_0$' 0
  } > "$out/ncu.log" 2>&1
  grep -E "^## |^  [A-Za-z].*(Throughput|Duration)|==PROF==.*kernel|Disconnected|nothing profiled|^\"" "$out/ncu.log" | head -60
  (cd /tmp && tar czf "$out/ncu_reports.tgz" ncu_*.ncu-rep) || rc=1
fi
exit $rc
