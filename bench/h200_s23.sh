#!/usr/bin/env bash
# On the GPU machine (device tool), session 23 (2026-12-06): a decode step's
# kernels let the next launch at once (mlc_pdl_trigger), its qlinears carry
# their epilogues (issue 29), and the Python binding binds GPU tensors in
# place (issue 26).  At 71ebee4 the GEMVs also prefetched their weights into
# L2 before they waited (-DMLC_NO_PREFETCH turned that off); that was slower
# and is gone since.
#   PART=decode  the numerics (tests/ref/decode.py and quant.py with CUDA
#                graphs, the op cases -k linear and -k attention_kv), the
#                Python binding (as PART=mini), then decode speed at the MiniLLM's size, bf16 and int4, under
#                VARIANTS (name:MLC_CUDA_PDL:nvcc flags[:another mlc, e.g. the
#                commit before's build-gpu/mlc.prev, skipped where not
#                carried]; each its own kernel cache), in turn, two rounds
#                while the time lasts (LIMIT s).
#   PART=prologue (session 24) PART=decode's numerics (OPS_K: linear prologue
#                rmsnorm), bench/gemv_norm_bf16.mdl's kernels alone
#                (mlc profile, this mlc and build-gpu/mlc.prev), then
#                PART=decode's speed.
#   PART=mini    the final tree's numerics: every CUDA op case, decode.py,
#                quant.py, cuda_minillm.py --small; then bench/h200_python.sh
#                (the Python binding from torch CUDA tensors, with no copy)
#                where build-gpu/artifacts was carried; then, while the time
#                lasts, one round of PART=decode's speed (the trigger against
#                none) and on an H200 bench/h200_s22.sh's head-dim table
#                (PART=dims).
# Carry build-gpu/mlc, build-gpu/lib, build-gpu/codegen/cuda/mlc_opcheck,
# build-gpu/runtime/libmlcrt.a and .yardstick (and build-gpu/artifacts, from
# bench/artifact_prep.sh).  Logs in $OUT/logs.tgz; a summary on standard
# output, each step with its seconds.
set -uo pipefail
cd "$(dirname "$0")/.."
part=${PART:-decode}
final=${OUT:-/tmp/mlc-s23}
work=/tmp/s23
rm -rf $work && mkdir -p $work "$final"
. tests/gpu/env.sh $work
export PATH=$PATH:/usr/local/cuda/bin
pack() { tar -C $work -czf "$final/logs.tgz" .; }
mlc=$PWD/build-gpu/mlc opcheck=build-gpu/codegen/cuda/mlc_opcheck
rc=0 t0=$SECONDS
took() { echo "  ($((SECONDS - t0)) s, $SECONDS in all)"; t0=$SECONDS; }
gpu_header "bench/h200_s23.sh PART=$part" $work/env.log
numerics() { # decode.py and quant.py with graphs, then op cases -k each of $1
  MLC_CUDA_GRAPHS=1 timeout 90 python3 tests/ref/decode.py $mlc examples/minillm_causal.mdl $work/decode --target cuda \
    > $work/decode.log 2>&1 || rc=1
  rm -rf $work/decode
  echo "decode against PyTorch: $(grep -E 'greedy tokens|logits:|FAIL' $work/decode.log | tr '\n' ' ' | cut -c1-300)"
  MLC_CUDA_GRAPHS=1 timeout 120 python3 tests/ref/quant.py $mlc $work/quant --target cuda > $work/quant.log 2>&1 || rc=1
  rm -rf $work/quant
  echo "qlinear against numpy: $(grep -c '^ok:' $work/quant.log) ok, $(grep -c '^FAIL' $work/quant.log) FAIL"
  grep -E '^FAIL' $work/quant.log | head -4 | cut -c1-300
  took
  pack
  for k in ${1:-_all}; do
    [ "$k" = _all ] && k=
    timeout ${OPS_TIMEOUT:-240} python3 tests/ops/opcheck.py ops --target cuda --jobs 16 --opcheck $opcheck --work /tmp/ops-$k ${k:+-k $k} \
      > $work/ops_${k:-all}.log 2>&1 || rc=1
    echo "cuda op cases ${k:+-k $k}: $(grep -E 'cases passed' $work/ops_${k:-all}.log)"
    grep -E '^FAIL' $work/ops_${k:-all}.log | head -8 | cut -c1-300
  done
  took
  pack
}
python_binding() { # bench/h200_python.sh, where build-gpu/artifacts was carried
  [ -f build-gpu/artifacts/minillm.tgz ] || return 0
  OUT=$work/python LIMIT=150 bash bench/h200_python.sh > $work/python.log 2>&1 || rc=1
  grep -E '^FAIL|passed,' $work/python.log | cut -c1-300
  took
  pack
}
speed() { # decode speed under VARIANTS, rounds $@ (LIMIT: skip what would end past it)
  export MLC_CUDA_GRAPHS=${GRAPHS:-1}
  for round in "$@"; do
    for v in ${VARIANTS:-wait:1:-DMLC_PDL_NO_TRIGGER trig:1:}; do
      IFS=: read -r n p fl bin <<< "$v"
      vm=$mlc
      if [ -n "$bin" ]; then [ -x "$bin" ] && vm=$PWD/$bin || continue; fi
      printf '#!/bin/sh\nexec /usr/local/cuda/bin/nvcc %s "$@"\n' "${fl//_-/ -}" > /tmp/nvcc-$n
      chmod +x /tmp/nvcc-$n
      for c in ${DTYPES:-bf16:bf16: int4:f32:int4}; do
        IFS=: read -r name dt q <<< "$c"
        [ $((SECONDS + 60)) -lt ${LIMIT:-560} ] || { echo "time's up: $n $name round $round not run"; continue; }
        l=$work/speed_${name}_${n}_r$round.log
        MLC_NVCC=/tmp/nvcc-$n XDG_CACHE_HOME=/tmp/cache-$n MLC_CUDA_PDL=$p timeout 100 python3 bench/decode_cpu.py $vm \
          --target cuda --torch-device cuda --runs ${RUNS:-2} --new 128 --dtype $dt ${q:+--quantize $q} \
          vocab=32000 dim=2048 layers=12 heads=16 max_ctx=1024 > $l 2>&1 || rc=1
        echo "decode $name $n round $round: $(grep -E 'decode mlc/torch|bandwidth' $l | cut -c1-160 | tr '\n' ' ')"
      done
      pack
    done
    took
  done
}
gemv_norm() { # bench/gemv_norm_bf16.mdl's kernels one by one, this mlc and build-gpu/mlc.prev where carried
  for b in mlc mlc.prev; do
    [ -x build-gpu/$b ] || continue
    for n in 6144 8192 32000; do
      XDG_CACHE_HOME=/tmp/cache-gn-$b timeout 60 build-gpu/$b profile bench/gemv_norm_bf16.mdl --target cuda --steps 200 n=$n \
        > $work/gemv_norm_${b}_$n.log 2>&1 || rc=1
      echo "$b n=$n: $(grep -E '^(linear|rmsnorm|fused)' $work/gemv_norm_${b}_$n.log | awk '{print $1, $5 * 1000 " us"}' | tr '\n' ' ')"
    done
  done
  took
  pack
}
case $part in
speed) # PART=decode's speed alone (GRAPHS=0: without CUDA graphs, as mlc runs by default)
  speed 1 2
  ;;
prologue) # session 24: the rmsnorm prologue of the decode step's GEMVs
  numerics "${OPS_K:-linear prologue rmsnorm}"
  gemv_norm
  speed 1 2
  ;;
decode)
  numerics "${OPS_K:-linear attention_kv}"
  python_binding
  speed 1 2
  ;;
mini)
  numerics ""
  timeout 90 python3 bench/cuda_minillm.py --mlc $mlc --opcheck $opcheck --work /tmp/fmini --small --steps 20 \
    > $work/minillm_small.log 2>&1 || rc=1
  echo "cuda_minillm --small: $(grep -c '^ok' $work/minillm_small.log) ok, $(grep -c '^FAIL' $work/minillm_small.log) FAIL"
  took
  pack
  python_binding
  LIMIT=${SPEED_LIMIT:-${LIMIT:-560}} speed 1
  if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && [ $((SECONDS + 150)) -lt ${LIMIT:-560} ]; then
    OUT=$work/dims PART=dims bash bench/h200_s22.sh > $work/dims.log 2>&1 || rc=1
    cat $work/dims.log
  fi
  ;;
esac
pack
echo "rc=$rc"
exit $rc
