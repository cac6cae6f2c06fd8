#!/usr/bin/env bash
# On the GPU machine (device tool), session 22 (2026-12-05): attention at
# head dims 129 to 256 on the tensor cores (issue 20 item 3).
#   PART=attn   the numerics, then the speed:
#               - every attention and mha op case on --target cuda against
#                 PyTorch in float64 (OPS_K narrows);
#               - bench/cuda_minillm.py --small at heads of 256 and of 160
#                 (the packed attention_save and attention_grad_saved of a
#                 real model: logits, gradients, 20 AdamW steps against PyTorch);
#               - compute-sanitizer memcheck and racecheck on attention train
#                 steps (bench/attention_bf16.mdl, and in f32) at head dims
#                 256 and 160, odd lengths;
#               - PART=dims's table.
#   PART=dims   attention alone (bench/attention_bf16.mdl, and in f32), b4 h8
#               s1024 causal, `mlc profile --entry train_step`: each kernel's
#               FLOP/s at head dims DIMS (default 64 128 136 200 256), both
#               dtypes (DTS), and PyTorch SDPA's bf16 forward and backward at
#               d 128 and 256 for scale.
#   PART=pdl    programmatic dependent launch (MLC_CUDA_PDL=1), CUDA graphs on:
#               its numerics (the attention, linear and attention_kv op cases,
#               tests/ref/decode.py, cuda_minillm.py --small), then decode speed
#               (bf16 and int4 at the MiniLLM's size, PDL 0 and 1 alternating,
#               two rounds) and the MiniLLM train step and bf16 forward under
#               each.
#   PART=pdl2   VARIANTS (name:MLC_CUDA_PDL:nvcc flags, alternating, two rounds):
#               decode bf16 and the train step.  Run on 2026-12-05 with a prelude
#               whose mlc_pdl_enter also triggered launch_dependents unless
#               -DMLC_PDL_NO_TRIGGER (the "notrig" variant); the trigger is gone
#               since, so "on" and "notrig" now build the same kernels.
#   PART=final  the GPU numerics of the final tree (PDL on, its default): every
#               CUDA op case, tests/ref/decode.py and quant.py (graphs on),
#               cuda_minillm.py --small, memcheck of the small MiniLLM's train
#               step; decode bf16 and the MiniLLM train step with
#               MLC_CUDA_PDL=0 and without; on an H200, PART=dims's table.
#   PART=mini   PART=final's numerics alone: every CUDA op case, decode.py,
#               cuda_minillm.py --small.
# Carry build-gpu/mlc, build-gpu/lib, build-gpu/codegen/cuda/mlc_opcheck,
# build-gpu/runtime/libmlcrt.a and .yardstick.  Logs in $OUT/logs.tgz; a
# summary on standard output, each step with its seconds.
set -uo pipefail
cd "$(dirname "$0")/.."
part=${PART:-attn}
final=${OUT:-/tmp/mlc-s22}
work=/tmp/s22
rm -rf $work && mkdir -p $work "$final"
. tests/gpu/env.sh $work
export PATH=$PATH:/usr/local/cuda/bin
pack() { tar -C $work -czf "$final/logs.tgz" .; }
mlc=$PWD/build-gpu/mlc opcheck=build-gpu/codegen/cuda/mlc_opcheck
rc=0
t0=$SECONDS
took() { echo "  ($((SECONDS - t0)) s)"; t0=$SECONDS; }
sed 's/bf16/f32/g' bench/attention_bf16.mdl > /tmp/attention_f32.mdl
cp bench/attention_bf16.mdl /tmp/attention_bf16.mdl
dims() {
  mkdir -p $work/dims
  for dt in ${DTS:-bf16 f32}; do
    for d in ${DIMS:-64 128 136 200 256}; do
      l=$work/dims/${dt}_d$d.log
      timeout 90 $mlc profile /tmp/attention_$dt.mdl --target cuda --entry train_step --steps 3 \
        b=4 h=8 s=1024 d=$d causal=true > $l 2>&1 || { rc=1; tail -3 $l; }
      echo "== $dt d=$d"
      grep -E "^attention" $l | tr -s ' ' | cut -c1-200
    done
    took
    pack
  done
  for d in 128 256; do
    timeout 60 python3 bench/attention_torch.py --shape 4,8,1024,$d --causal > $work/dims/torch_d$d.log 2>&1 || rc=1
    echo "== torch SDPA bf16 d=$d: $(grep -vE '^#|^$' $work/dims/torch_d$d.log | tr '\n' ' ' | cut -c1-300)"
  done
  took
}
gpu_header "bench/h200_s22.sh PART=$part" $work/env.log
case $part in
attn)
  for k in ${OPS_K:-attention mha}; do
    timeout 200 python3 tests/ops/opcheck.py ops --target cuda --jobs 16 --opcheck $opcheck --work /tmp/ops-$k -k $k \
      > $work/ops_$k.log 2>&1 || rc=1
    echo "cuda op cases -k $k: $(grep -E 'cases passed' $work/ops_$k.log)"; grep -E '^FAIL' $work/ops_$k.log | head -8 | cut -c1-300
  done
  took
  pack
  for c in "d256:512:2:300" "d160:320:2:200"; do
    IFS=: read -r n dim heads seq <<< "$c"
    timeout 150 python3 bench/cuda_minillm.py --mlc $mlc --opcheck $opcheck --work /tmp/mini-$n --small --steps 20 \
      --set dim=$dim --set heads=$heads --set seq=$seq > $work/minillm_$n.log 2>&1 || rc=1
    echo "cuda_minillm --small dim $dim heads $heads seq $seq: $(grep -cE '^ok|^PASS' $work/minillm_$n.log) ok," \
      "$(grep -cE '^FAIL' $work/minillm_$n.log) FAIL; $(tail -1 $work/minillm_$n.log | cut -c1-200)"
    grep -E '^FAIL|Traceback|Error' $work/minillm_$n.log | head -4 | cut -c1-300
  done
  took
  pack
  mkdir -p $work/san
  for c in "bf16:s=333 causal=true d=256" "bf16:s=200 causal=false d=160" "f32:s=200 causal=true d=256" "f32:s=150 causal=false d=200"; do
    dt=${c%%:*} cfg=${c#*:} l=${dt}_${cfg// /_}
    for tool in memcheck racecheck; do
      timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 $mlc train /tmp/attention_$dt.mdl --target cuda \
        --steps 1 b=1 h=2 $cfg > $work/san/${tool}_$l.log 2>&1 || rc=1
      echo "$tool $dt attention train step b1 h2 $cfg: $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' $work/san/${tool}_$l.log | head -1)"
    done
  done
  took
  pack
  dims
  ;;
pdl)
  export MLC_CUDA_GRAPHS=1
  for k in attention linear attention_kv; do
    MLC_CUDA_PDL=1 timeout 200 python3 tests/ops/opcheck.py ops --target cuda --jobs 16 --opcheck $opcheck --work /tmp/pops-$k \
      -k $k > $work/pdl_ops_$k.log 2>&1 || rc=1
    echo "PDL cuda op cases -k $k: $(grep -E 'cases passed' $work/pdl_ops_$k.log)"; grep -E '^FAIL' $work/pdl_ops_$k.log | head -5 | cut -c1-300
  done
  MLC_CUDA_PDL=1 timeout 120 python3 tests/ref/decode.py $mlc examples/minillm_causal.mdl $work/decode --target cuda > $work/pdl_decode.log 2>&1 || rc=1
  echo "PDL decode against PyTorch: $(grep -E 'greedy tokens|logits:|FAIL' $work/pdl_decode.log | tr '\n' ' ' | cut -c1-300)"
  MLC_CUDA_PDL=1 timeout 150 python3 bench/cuda_minillm.py --mlc $mlc --opcheck $opcheck --work /tmp/pmini --small --steps 20 \
    > $work/pdl_minillm.log 2>&1 || rc=1
  echo "PDL cuda_minillm --small: $(grep -c '^ok' $work/pdl_minillm.log) ok, $(grep -c '^FAIL' $work/pdl_minillm.log) FAIL"
  took
  pack
  for round in 1 2; do
    for p in 0 1; do
      for c in bf16:bf16: int4:f32:int4; do
        IFS=: read -r name dt q <<< "$c"
        l=$work/speed_${name}_pdl${p}_r$round.log
        MLC_CUDA_PDL=$p timeout 100 python3 bench/decode_cpu.py $mlc --target cuda --torch-device cuda --runs 3 --new 128 \
          --dtype $dt ${q:+--quantize $q} vocab=32000 dim=2048 layers=12 heads=16 max_ctx=1024 > $l 2>&1 || rc=1
        echo "decode $name PDL=$p round $round: $(grep -E 'median|ms/token|bandwidth' $l | cut -c1-160 | tr '\n' ' ')"
      done
    done
    pack
  done
  took
  python3 -c "import torch; torch.manual_seed(0); torch.randint(0, 32000, (12 * 8 * 1024 + 1,), dtype=torch.int32).numpy().tofile('/tmp/tokens.bin')"
  for p in 0 1 0 1; do
    l=$work/model_pdl$p.log
    { MLC_CUDA_PDL=$p timeout 120 $mlc train examples/minillm.mdl --target cuda --steps 12 --data /tmp/tokens.bin --data-dtype i32
      MLC_CUDA_PDL=$p timeout 120 $mlc bench bench/minillm_bf16.mdl --target cuda --runs 10 --warmup 3; } >> $l 2>&1 || rc=1
    echo "MiniLLM PDL=$p: $(grep -E 'median|^step 12' $l | tail -2 | tr '\n' ' ' | cut -c1-250)"
  done
  took
  ;;
pdl2) # VARIANTS of name:MLC_CUDA_PDL:nvcc flags, alternating, two rounds: decode bf16, the train step
  export MLC_CUDA_GRAPHS=1
  python3 -c "import torch; torch.manual_seed(0); torch.randint(0, 32000, (12 * 8 * 1024 + 1,), dtype=torch.int32).numpy().tofile('/tmp/tokens.bin')"
  for round in 1 2; do
    for v in ${VARIANTS:-off:0: on:1: notrig:1:-DMLC_PDL_NO_TRIGGER}; do
      IFS=: read -r n p fl <<< "$v"
      printf '#!/bin/sh\nexec /usr/local/cuda/bin/nvcc %s "$@"\n' "$fl" > /tmp/nvcc-$n
      chmod +x /tmp/nvcc-$n
      l=$work/pdl2_${n}_r$round.log
      { MLC_NVCC=/tmp/nvcc-$n XDG_CACHE_HOME=/tmp/cache-$n MLC_CUDA_PDL=$p timeout 100 python3 bench/decode_cpu.py $mlc --target cuda \
          --torch-device cuda --runs 3 --new 128 --dtype bf16 vocab=32000 dim=2048 layers=12 heads=16 max_ctx=1024
        MLC_NVCC=/tmp/nvcc-$n XDG_CACHE_HOME=/tmp/cache-$n MLC_CUDA_PDL=$p timeout 120 $mlc train examples/minillm.mdl --target cuda \
          --steps 12 --data /tmp/tokens.bin --data-dtype i32; } > $l 2>&1 || rc=1
      echo "$n round $round: $(grep -E 'mlc at|^step 1[12]' $l | cut -c1-160 | tr '\n' ' ')"
    done
    pack
  done
  ;;
final|mini) # mini: the numerics alone (every op case, decode.py, cuda_minillm.py --small), for a short budget
  timeout 200 python3 tests/ops/opcheck.py ops --target cuda --jobs 16 --opcheck $opcheck --work /tmp/ops > $work/ops.log 2>&1 || rc=1
  echo "cuda op cases: $(grep -E 'cases passed' $work/ops.log)"; grep -E '^FAIL' $work/ops.log | head -8 | cut -c1-300
  took
  pack
  MLC_CUDA_GRAPHS=1 timeout 60 python3 tests/ref/decode.py $mlc examples/minillm_causal.mdl $work/decode --target cuda \
    > $work/decode.log 2>&1 || rc=1
  rm -rf $work/decode
  echo "decode against PyTorch: $(grep -E 'greedy tokens|logits:|FAIL' $work/decode.log | tr '\n' ' ' | cut -c1-300)"
  pack
  timeout 60 python3 bench/cuda_minillm.py --mlc $mlc --opcheck $opcheck --work /tmp/fmini --small --steps 20 \
    > $work/minillm_small.log 2>&1 || rc=1
  echo "cuda_minillm --small: $(grep -c '^ok' $work/minillm_small.log) ok, $(grep -c '^FAIL' $work/minillm_small.log) FAIL"
  took
  pack
  [ $part = final ] || { echo "rc=$rc"; exit $rc; }
  MLC_CUDA_GRAPHS=1 timeout 90 python3 tests/ref/quant.py $mlc $work/quant --target cuda > $work/quant.log 2>&1 || rc=1
  rm -rf $work/quant
  echo "qlinear against numpy: $(grep -c '^ok:' $work/quant.log) ok, $(grep -c '^FAIL' $work/quant.log) FAIL"
  small="vocab=512 dim=128 layers=2 heads=4 batch=2 seq=64"
  timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $opcheck examples/minillm.mdl /tmp/san --target cuda \
    --func train $small --range tokens=0,512 --range targets=0,512 > $work/memcheck_minillm.log 2>&1 || rc=1
  echo "memcheck small MiniLLM train step: $(grep -E 'ERROR SUMMARY' $work/memcheck_minillm.log | tail -1)"
  took
  pack
  export MLC_CUDA_GRAPHS=1
  python3 -c "import torch; torch.manual_seed(0); torch.randint(0, 32000, (12 * 8 * 1024 + 1,), dtype=torch.int32).numpy().tofile('/tmp/tokens.bin')"
  for p in 0 1; do
    l=$work/final_pdl$p.log
    { MLC_CUDA_PDL=$p timeout 100 python3 bench/decode_cpu.py $mlc --target cuda --torch-device cuda --runs 3 --new 128 \
        --dtype bf16 vocab=32000 dim=2048 layers=12 heads=16 max_ctx=1024
      MLC_CUDA_PDL=$p timeout 120 $mlc train examples/minillm.mdl --target cuda --steps 12 --data /tmp/tokens.bin --data-dtype i32
    } > $l 2>&1 || rc=1
    echo "MLC_CUDA_PDL=$p: $(grep -E 'mlc at|^step 1[12]' $l | cut -c1-140 | tr '\n' ' ')"
    pack
  done
  took
  ! nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || dims # the table, on an H200 only
  ;;
dims) dims ;;
esac
pack
echo "rc=$rc"
exit $rc
