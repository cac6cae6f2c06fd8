#!/usr/bin/env bash
# On the GPU machine (device tool), session 14: the f32 attention with its
# shared tiles split on load (codegen/cuda/emit_attention.c f32_ps) and the
# TF32 split's variants (codegen/cuda/gemm.cuh MLC_TF32_SPLIT), A/B.
#   PART=ab    VARIANTS="name:builddir:split ..." (default: nops:build-nops:0
#             ps:build-gpu:0 ps1:build-gpu:1): per variant the f32 attention
#             op cases (-k attention) against float64, then gpt2like
#             (bench/f32_models.py --models gpt2like, with profiles) under
#             each, alternating, twice.  split N reaches nvcc as
#             -DMLC_TF32_SPLIT=N through an $MLC_NVCC wrapper, with a kernel
#             cache of the variant's own.
#   PART=dims  issue 20 item 3: attention alone (bench/attention_bf16.mdl, and
#              in f32) at head dims 8 to 256, forward and train step, per-kernel
#              profiles: which kernel each takes, its FLOP/s and its hint
#              (DTS and DIMS narrow it)
#   PART=sass  the SASS of mlc_tf32_split under each MLC_TF32_SPLIT (cuobjdump)
#   PART=check every CUDA op case against float64 (the GPU numerics check),
#              then compute-sanitizer memcheck and racecheck on f32 attention
#              train steps (bench/attention_bf16.mdl in f32) at odd lengths,
#              head dim 36 (padded to 40 by passes/attnpad.c),
#              head dims 64 (split on load) and 128
#   PART=bench bench/cuda_f32.sh: the f32 GEMM table and accuracy, the two f32
#              models against eager, f32.json (copied to $OUT)
# Carry build-gpu/mlc, build-gpu/lib, build-gpu/codegen/cuda/mlc_opcheck,
# .yardstick and each variant's builddir/mlc.  Logs in $OUT/logs.tgz.
set -uo pipefail
cd "$(dirname "$0")/.."
final=${OUT:-/tmp/mlc-s14}
work=/tmp/s14
rm -rf $work && mkdir -p $work "$final"
. tests/gpu/env.sh $work
export PATH=$PATH:/usr/local/cuda/bin
pack() { tar -C $work -czf "$final/logs.tgz" .; }
# use NAME SPLIT: nvcc with -DMLC_TF32_SPLIT=SPLIT, a cache per variant
use() {
  printf '#!/bin/sh\nexec /usr/local/cuda/bin/nvcc -DMLC_TF32_SPLIT=%s "$@"\n' "$2" > /tmp/nvcc-$1
  chmod +x /tmp/nvcc-$1
  export MLC_NVCC=/tmp/nvcc-$1 XDG_CACHE_HOME=/tmp/cache-$1
}
rc=0
case ${PART:-ab} in
ab)
  vs=${VARIANTS:-nops:build-nops:0 ps:build-gpu:0 ps1:build-gpu:1}
  for v in $vs; do
    IFS=: read -r n b sp <<< "$v"
    use $n $sp
    mkdir -p $work/ops-$n
    timeout 150 python3 tests/ops/opcheck.py ops --target cuda --jobs 16 --opcheck build-gpu/codegen/cuda/mlc_opcheck \
      --work /tmp/ops-$n -k ${OPS_K:-attention} > $work/ops-$n/ops.log 2>&1 || rc=1
    echo "$n ops: $(grep -E '^FAIL|cases passed' $work/ops-$n/ops.log | tr '\n' ' ')"
  done
  pack
  for round in 1 2; do
    for v in $vs; do
      IFS=: read -r n b sp <<< "$v"
      use $n $sp
      d=$work/ab-$n-$round
      mkdir -p $d
      timeout 120 python3 bench/f32_models.py --mlc $b/mlc --target cuda --out $d --profile \
        --models gpt2like --f32-matmul 3xtf32 --work /tmp/f32ab-$n > $d/f32_models.log 2>&1 || rc=1
      echo "$n round $round: $(grep -E '^gpt2like: ' $d/f32_models.log)"
      grep -E "^attention" $d/gpt2like_profile.log | head -2 | cut -c1-70
    done
    pack
  done
  ;;
check) # SKIP_OPS=1: the sanitizers alone; SAN="s=.. d=.." one configuration
  mkdir -p $work/ops $work/san
  [ -n "${SKIP_OPS:-}" ] || timeout 280 python3 tests/ops/opcheck.py ops --target cuda --jobs 16 \
    --opcheck build-gpu/codegen/cuda/mlc_opcheck --work /tmp/ops-all > $work/ops/ops.log 2>&1 || rc=1
  [ -n "${SKIP_OPS:-}" ] || grep -E "^FAIL|cases passed" $work/ops/ops.log
  pack
  sed 's/bf16/f32/g' bench/attention_bf16.mdl > /tmp/attention_f32.mdl
  cfgs=("s=333 causal=true d=64" "s=300 causal=false d=64" "s=333 causal=true d=128" "s=200 causal=true d=36")
  [ -z "${SAN:-}" ] || cfgs=("$SAN")
  for c in "${cfgs[@]}"; do
    l=${c// /_}
    timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 build-gpu/mlc train /tmp/attention_f32.mdl --target cuda \
      --steps 1 b=1 h=2 $c > $work/san/memcheck_$l.log 2>&1 || rc=1
    echo "memcheck f32 attention train step b1 h2 $c: $(grep 'ERROR SUMMARY' $work/san/memcheck_$l.log)"
    timeout 100 compute-sanitizer --tool racecheck --error-exitcode 9 build-gpu/mlc train /tmp/attention_f32.mdl --target cuda \
      --steps 1 b=1 h=2 $c > $work/san/racecheck_$l.log 2>&1 || rc=1
    echo "racecheck f32 attention train step b1 h2 $c: $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' $work/san/racecheck_$l.log | head -1)"
  done
  ;;
bench)
  OUT=$work/f32 OPS_K=attention timeout 360 bash bench/cuda_f32.sh || rc=1
  cp $work/f32/f32.json "$final/" 2>/dev/null
  ;;
dims)
  mkdir -p $work/dims
  sed 's/bf16/f32/g' bench/attention_bf16.mdl > /tmp/attention_f32.mdl
  cp bench/attention_bf16.mdl /tmp/attention_bf16.mdl
  for dt in ${DTS:-f32 bf16}; do
    for d in ${DIMS:-8 36 64 128 136 200 256}; do
      l=$work/dims/${dt}_d$d.log
      timeout 60 build-gpu/mlc profile /tmp/attention_$dt.mdl --target cuda --entry train_step --steps 3 \
        b=4 h=8 s=1024 d=$d causal=true > $l 2>&1 || { rc=1; tail -3 $l; }
      echo "== $dt d=$d"
      grep -E "^attention" $l | tr -s ' ' | cut -c1-260
    done
  done
  ;;
sass)
  for sp in 0 1; do
    cat > $work/s$sp.cu <<CU
#define MLC_FN __device__ __forceinline__
#define MLC_TF32_SPLIT $sp
$(sed -n '/^MLC_FN unsigned mlc_tf32(float x)/,/^}/p' codegen/cuda/gemm.cuh)
extern "C" __global__ void k(const float *a, unsigned *o) {
  unsigned h, l;
  mlc_tf32_split<3>(a[threadIdx.x], h, l);
  o[threadIdx.x] = h; o[threadIdx.x + 32] = l; }
CU
    nvcc -arch=sm_90a -cubin -o $work/s$sp.cubin $work/s$sp.cu > $work/s$sp.log 2>&1 || rc=1
    echo "## MLC_TF32_SPLIT=$sp"
    cuobjdump -sass $work/s$sp.cubin 2>&1 | grep -E "^\s+/\*[0-9a-f]{4}\*/" | sed 's/ *\/\* 0x[0-9a-f]* \*\///' | tee $work/s$sp.sass
  done
  ;;
esac
pack
echo "rc=$rc"
exit $rc
