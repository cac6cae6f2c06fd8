#!/usr/bin/env bash
# On the GPU machine (device tool): what bounds the 3xTF32 GEMM
# (mlc_gemm_wgx, codegen/cuda/gemm.cuh)? The same kernel built with parts of
# its k-loop changed by macros that a trial adds to gemm.cuh (2026-12-02:
# MLC_WGX_NOLOAD, _NOPART, _NOSYNC, _LATE; bench/results/h200-2026-12-02f.md),
# given as VARIANTS="|-DX|-DY" through an nvcc wrapper (MLC_NVCC), each with its own
# kernel cache; plus the 1xTF32 mode, and with ACCURACY=1 each variant's
# accuracy against float64 (bench/f32_gemm.py --skip-speed). Needs
# build-gpu/. Logs in $OUT/logs.tgz.
set -uo pipefail
cd "$(dirname "$0")/.."
final=${OUT:-/tmp/mlc-wgx}
work=/tmp/wgx-logs
rm -rf $work && mkdir -p $work "$final"
. tests/gpu/env.sh $work
mlc=$PWD/build-gpu/mlc
gpu_header bench/wgx_probe.sh $work/env.log
i=0
VARIANTS=${VARIANTS:-""}
IFS='|' read -ra vs <<< "$VARIANTS"
for v in "${vs[@]}"; do
  i=$((i + 1))
  printf '#!/bin/sh\nexec /usr/local/cuda/bin/nvcc %s "$@"\n' "$v" > /tmp/nvcc$i && chmod +x /tmp/nvcc$i
  for shape in "nn M=4096 N=4096 K=4096" "nn M=8192 N=2048 K=8192" "tn M=2048 N=2048 K=8192"; do
    set -- $shape
    l=$1; shift
    r=$(MLC_NVCC=/tmp/nvcc$i XDG_CACHE_HOME=/tmp/wgx-cache$i timeout 60 $mlc bench bench/gemm_f32_$l.mdl --target cuda \
        --f32-matmul 3xtf32 --runs 20 --warmup 3 "$@" 2>&1 | tee -a $work/bench.log | grep -o "median [0-9.]* ms")
    M=${1#M=} N=${2#N=} K=${3#K=} ms=${r#median }; ms=${ms% ms}
    echo "variant [${v:-none}] $l ${M}x${N}x${K}: $r, $(python3 -c "print(f'{2*$M*$N*$K/$ms/1e9:.1f}')" 2>/dev/null) TFLOP/s (3xTF32-equivalent)"
  done
done | tee $work/summary.log
for shape in "M=4096 N=4096 K=4096"; do
  r=$(timeout 60 $mlc bench bench/gemm_f32_nn.mdl --target cuda --f32-matmul tf32 --runs 20 --warmup 3 $shape 2>&1 | grep -o "median [0-9.]* ms")
  echo "1xTF32 nn $shape: $r"
done | tee -a $work/summary.log
# ACCURACY=1: f32_gemm.py's accuracy table (against float64) for each variant
if [ -n "${ACCURACY:-}" ]; then
  i=0
  for v in "${vs[@]}"; do
    i=$((i + 1))
    mkdir -p $work/acc$i
    MLC_NVCC=/tmp/nvcc$i XDG_CACHE_HOME=/tmp/wgx-cache$i timeout 150 python3 bench/f32_gemm.py --mlc $mlc --target cuda \
      --skip-speed --out $work/acc$i --work /tmp/f32acc$i > $work/acc$i/log 2>&1
    echo "### accuracy, variant [${v:-none}]"; grep -E "^\|" $work/acc$i/f32_gemm.md | head -20
  done | tee -a $work/summary.log
fi
tar -C $work -czf "$final/logs.tgz" .
