#!/usr/bin/env bash
# On the GPU machine (device tool), sessions 36 and 37 (2026-12-07;
# bench/gpu_s35.sh and bench/gpu_s36.sh folded in: the same parts), each
# build against build-gpu/base/mlc (the tree before the change) in the same
# call.  PARTS (default "det minillm step prof"), each while LIMIT (default
# 560) - 60 s are left:
#   det      tests/gpu/update16.mdl (no atomics in its step), 10 AdamW steps
#            with --save: the base build twice, then $DETNEW (default the new
#            one); the three checkpoints must be byte-identical (session 36:
#            the weights' bf16 shadows, which the forward reads in place of
#            casting the weight); then that build 5 steps, --save, --resume,
#            5 more: byte-identical to its 10; then all of it with SGD
#            (momentum 0.9)
#   minillm  bench/cuda_minillm.py --small --skip-forward with the new build:
#            one step's gradients and 20 AdamW steps against PyTorch
#   step     the MiniLLM train step (examples/minillm.mdl, 12 steps, median
#            of steps 3..12) with both builds in turn, two rounds, with the
#            device memory each holds; torch_baseline.py train (eager and
#            torch.compile) in the same call
#   fp8      issue 30: the FP8 step (--matmul=fp8) of both builds beside the new
#            build's bf16 step, two rounds; the FP8 step by op
#   prof     `mlc profile` of both builds' train step, kernel time summed
#            by op
#   ops      the CUDA op cases of -k each of OPS_K (default norm_grad)
#   attnab   issue 19, the builds of AB (default "base v5", from the carried
#            build-gpu/ab.tar.xz that bench/ab_bundle.sh packs) in turn: attention's train step at the
#            MiniLLM's shape, two rounds; SDPA; the attention and mha op cases;
#            compute-sanitizer on build-gpu/mlc; s4096 causal, d64 causal
#            and not (each build)
#   final    bench/h200_s27.sh PART=final: issue 18's GEMM shapes, train step
#            and forward against PyTorch (gemm.json's inputs), both builds
#   ncu      issue 24 on this machine (bench/h200_s28.sh's minillm and gpt2)
#   attnncu  issue 19: ncu's sections for build-gpu/mlc's attention kernels and cuDNN's at
#            the MiniLLM's shape (ATTN_NCU_CFG, ATTN_NCU_SHAPE for another)
# H200_PARTS: parts run after PARTS only where the GPU is an H200.
# Carry build-gpu/mlc, build-gpu/base/mlc, build-gpu/lib,
# build-gpu/codegen/cuda/mlc_opcheck, .yardstick.  Logs in $OUT/logs.tgz;
# key lines on standard output.
set -uo pipefail
cd "$(dirname "$0")/.."
. tests/gpu/env.sh /tmp/s37-work
gpu_session s37 560
rc=0
pack() { tar -C "$work" -czf "$dest/logs.tgz" .; }
new=build-gpu/mlc base=build-gpu/base/mlc
detnew=${DETNEW:-$new} # det's build against base: the shadows alone (build-gpu/shadow/mlc) where new has more
# $1: build, $2: log name, then mlc train's own options; the MiniLLM's train step, its median of steps 3..12 and the memory it holds
step() {
  local b=$1 l=$work/step/$2.log
  mkdir -p $work/step
  XDG_CACHE_HOME=/tmp/cache-${b//\//_} timeout 200 $b train examples/minillm.mdl --target cuda --steps 12 "${@:3}" > $l 2>&1 || rc=1
  printf '%-28s median %s ms | %s | losses %s\n' "$2" \
    "$(grep -E '^step' $l | awk 'NR>=3 {gsub(/\(/,"",$5); print $5}' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')" \
    "$(grep -oE 'device memory held by mlc: [0-9.]+ GB' $l)" "$(grep -E '^step' $l | awk '{print $4}' | head -4 | tr '\n' ' ')"
}
parts=${PARTS:-det minillm step prof}
case $gpu in *H200*) parts="$parts ${H200_PARTS:-}" ;; esac # parts owed on the H200 alone, where one came
for p in $parts; do
  [ $(left) -gt 60 ] || { echo "$p: skipped (time)"; continue; }
  mkdir -p $work/$p
  case $p in
  det)
    # AdamW as the file has it, then SGD with momentum (the same model, sgd_multi's path)
    sed 's/optimizer = AdamW(lr=1e-3)/optimizer = SGD(lr=1e-2, momentum=0.9)/' tests/gpu/update16.mdl > $work/update16_sgd.mdl
    for m in tests/gpu/update16.mdl $work/update16_sgd.mdl; do
      o=$(basename $m .mdl) i=0
      for b in $base $base $detnew; do
        i=$((i + 1))
        XDG_CACHE_HOME=/tmp/cache-${b//\//_} timeout 120 $b train $m --target cuda --steps 10 \
          --save $work/det/$o-$i.ckpt > $work/det/$o-$i.log 2>&1 || rc=1
        echo "det $o run $i ($b): $(sha256sum < $work/det/$o-$i.ckpt | cut -c1-16) losses $(grep -E '^step' $work/det/$o-$i.log | awk '{print $4}' | tr '\n' ' ')"
      done
      if cmp -s $work/det/$o-1.ckpt $work/det/$o-2.ckpt; then
        cmp -s $work/det/$o-1.ckpt $work/det/$o-3.ckpt && echo "det $o: base, base and new checkpoints byte-identical" ||
          { echo "det $o: FAIL: new differs from base (base twice identical)"; rc=1; }
      else
        echo "det $o: base twice differs: no byte check possible"; rc=1
      fi
      # that build: 5 steps, save, resume, 5 more; against its own 10
      XDG_CACHE_HOME=/tmp/cache-${detnew//\//_} timeout 120 $detnew train $m --target cuda --steps 5 \
        --save $work/det/$o-half.ckpt > $work/det/$o-half.log 2>&1 || rc=1
      XDG_CACHE_HOME=/tmp/cache-${detnew//\//_} timeout 120 $detnew train $m --target cuda --steps 5 --resume $work/det/$o-half.ckpt \
        --save $work/det/$o-resumed.ckpt > $work/det/$o-resumed.log 2>&1 || rc=1
      echo "det $o resumed: $(sha256sum < $work/det/$o-resumed.ckpt | cut -c1-16) losses $(grep -E '^step' $work/det/$o-resumed.log | awk '{print $4}' | tr '\n' ' ')"
      cmp -s $work/det/$o-3.ckpt $work/det/$o-resumed.ckpt && echo "det $o: new, 5 + resume + 5 byte-identical to its 10" ||
        { echo "det $o: FAIL: resumed differs"; rc=1; }
      rm -f $work/det/*.ckpt # 50 MB each: too large to come back
    done ;;
  ops)
    for k in ${OPS_K:-norm_grad}; do
      timeout 170 python3 tests/ops/opcheck.py ops --target cuda --jobs 16 --opcheck build-gpu/codegen/cuda/mlc_opcheck \
        --work /tmp/s37-ops-$k -k $k > $work/ops/$k.log 2>&1 || rc=1
      echo "op cases -k $k: $(grep -E 'cases passed' $work/ops/$k.log)"
      grep -E "^FAIL" $work/ops/$k.log | head -5 | cut -c1-200
    done ;;
  attnab)
    # issue 19, several builds at once: build-gpu/ab.tar.xz (carried; xz keeps six builds inside the tree's 64 MiB)
    # holds build-gpu/NAME/mlc for each NAME of AB; `mlc profile` of bench/attention_bf16.mdl's train step at the
    # MiniLLM's shape (attention_save: the forward; attention_grad_saved: the gradient's three launches), each
    # build in turn, two rounds, after the op cases of attention and mha (build-gpu's mlc_opcheck, and each later
    # build's where ab_bundle.sh packed one); SDPA's
    # kernels; compute-sanitizer memcheck and racecheck on build-gpu/mlc's attention train step at two
    # shapes, and each build of AB at s4096 causal, d64 causal and d64
    [ -f build-gpu/ab.tar.xz ] && tar -xJf build-gpu/ab.tar.xz -C build-gpu
    ab=(${AB:-base v5})
    mm="b=8 h=16 s=1024 d=128 causal=false"
    abprof() { # $1 build name, $2 log, $3... config
      XDG_CACHE_HOME=/tmp/cache-ab-$1 timeout 100 build-gpu/$1/mlc profile bench/attention_bf16.mdl --target cuda \
        --entry train_step --steps 10 "${@:3}" > $2 2>&1 || rc=1
      echo "$(grep -E '^attention' $2 | awk '{printf "%s %s ms; ", $1, $5}')"
    }
    # correctness first (a call short of device time gets at least these): build-gpu's mlc_opcheck, then that of
    # each build of AB after the first that bench/ab_bundle.sh packed one for (a candidate not in the tree)
    opck=(build-gpu/codegen/cuda/mlc_opcheck)
    for v in "${ab[@]:1}"; do [ -x build-gpu/$v/mlc_opcheck ] && opck+=(build-gpu/$v/mlc_opcheck); done
    for oc in "${opck[@]}"; do
      for k in attention mha; do
        [ $(left) -gt 60 ] || break
        l=$work/attnab/ops-$k-$(basename $(dirname $oc)).log
        timeout 170 python3 tests/ops/opcheck.py ops --target cuda --jobs 16 --opcheck $oc \
          --work /tmp/s37-ops-$k-$(basename $(dirname $oc)) -k $k > $l 2>&1 || rc=1
        echo "op cases -k $k ($oc): $(grep -E 'cases passed' $l)"
        grep -E "^FAIL" $l | head -5 | cut -c1-200
        pack
      done
    done
    for r in 1 2; do
      for v in "${ab[@]}"; do
        [ $(left) -gt 30 ] || break
        echo "round $r $v minillm: $(abprof $v $work/attnab/$v-minillm-$r.log $mm)"
      done
      pack
      [ $r = 2 ] || [ $(left) -lt 40 ] || { timeout 60 python3 bench/attention_torch.py --shape 8,16,1024,128 > $work/attnab/torch-minillm.log 2>&1 || rc=1
        grep -E "sdpa" $work/attnab/torch-minillm.log | head -3; }
    done
    pack
    for c in "b=4 h=12 s=390 causal=false d=128" "b=4 h=8 s=600 causal=true d=64"; do
      for tool in memcheck racecheck; do
        [ $(left) -gt 60 ] || break
        timeout 120 compute-sanitizer --tool $tool build-gpu/mlc train bench/attention_bf16.mdl --target cuda --steps 1 $c \
          > "$work/attnab/${tool}_${c// /_}.log" 2>&1 || rc=1
        echo "compute-sanitizer $tool, attention train step $c: $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$work/attnab/${tool}_${c// /_}.log" | head -1)"
      done
    done
    for c in "causal4096:b=2 h=16 s=4096 d=128 causal=true:2,16,4096,128 --causal" "d64causal:b=8 h=16 s=1000 d=64 causal=true:8,16,1000,64 --causal" \
             "d64:b=8 h=16 s=1024 d=64 causal=false:8,16,1024,64"; do
      IFS=: read -r name cfg tshape <<< "$c"
      for v in "${ab[@]}"; do
        [ $(left) -gt 40 ] || break
        echo "$v $name: $(abprof $v $work/attnab/$v-$name.log $cfg)"
      done
      [ $(left) -gt 40 ] || break
      timeout 60 python3 bench/attention_torch.py --shape $tshape > $work/attnab/torch-$name.log 2>&1 || rc=1
      grep -E "sdpa" $work/attnab/torch-$name.log | head -3
    done ;;
  final)
    # issue 18's numbers at this commit: bench/h200_s27.sh PART=final (op cases of matmul, linear and fused;
    # bench/gemm_shapes.py; the train step and bf16 forward of both builds; torch_baseline.py train and infer)
    OUT=$work/final OPS_K=${FINAL_OPS_K:-"matmul linear fused"} PART=final bash bench/h200_s27.sh > $work/final/summary.log 2>&1 || rc=1
    cat $work/final/summary.log ;;
  minillm)
    timeout 300 python3 bench/cuda_minillm.py --small --skip-forward --mlc $new --opcheck build-gpu/codegen/cuda/mlc_opcheck \
      --work /tmp/s37-minillm > $work/minillm/small.log 2>&1 || rc=1
    grep -E "^ok|^FAIL|checks|step" $work/minillm/small.log | tail -8 ;;
  fp8)
    # issue 30: the FP8 step (--matmul=fp8) of both builds and the new build's bf16 step, two rounds; then the
    # new build's FP8 step by op
    for r in 1 2; do
      step $base base-fp8-$r --matmul=fp8
      step $new new-fp8-$r --matmul=fp8
      step $new new-bf16-$r
    done
    XDG_CACHE_HOME=/tmp/cache-${new//\//_} timeout 150 $new profile examples/minillm.mdl --target cuda --entry train_step \
      --steps 3 --matmul=fp8 > $work/fp8/prof.log 2>&1 || rc=1
    awk '$3 ~ /^[0-9]+$/ && $4 ~ /^[0-9.]+$/ { split($1, a, "%"); t[a[1]] += $4 / $3; s += $4 / $3 }
         END { for (k in t) printf "%-24s %8.3f\n", k, t[k]; printf "%-24s %8.3f\n", "ALL", s }' $work/fp8/prof.log |
      sort -k2 -nr | head -14 ;;
  step)
    for r in 1 2; do
      step $base base-$r
      step $new new-$r
    done
    timeout 220 python3 .yardstick/torch_baseline.py train > $work/step/torch.log 2>&1 || rc=1
    grep -iE "ms|step" $work/step/torch.log | tail -6 ;;
  prof)
    XDG_CACHE_HOME=/tmp/cache-${new//\//_} timeout 150 $new profile examples/minillm.mdl --target cuda --entry train_step \
      --steps 3 > $work/prof/new.log 2>&1 || rc=1
    XDG_CACHE_HOME=/tmp/cache-${base//\//_} timeout 150 $base profile examples/minillm.mdl --target cuda --entry train_step \
      --steps 3 > $work/prof/base.log 2>&1 || rc=1
    for b in base new; do
      echo "== $b: kernel time by op, ms a step (Total ms / Calls)"
      awk '$3 ~ /^[0-9]+$/ && $4 ~ /^[0-9.]+$/ { split($1, a, "%"); t[a[1]] += $4 / $3; s += $4 / $3 }
           END { for (k in t) printf "%-24s %8.3f\n", k, t[k]; printf "%-24s %8.3f\n", "ALL", s }' $work/prof/$b.log |
        sort -k2 -nr | head -16
    done ;;
  ncu)
    OUT=$work/ncu bash bench/h200_s28.sh > $work/ncu/summary.log 2>&1 || rc=1
    cat $work/ncu/summary.log ;;
  attnncu)
    # issue 19: ncu of the attention kernels at the MiniLLM's shape (ATTN_NCU_CFG: mlc's config, ATTN_NCU_SHAPE:
    # SDPA's, the causal flag included), build-gpu/mlc's (the forward and the gradient's three launches of one
    # train step, after a step that compiles) and cuDNN's (SDPA, the fourth run's kernels); the sections that
    # say where the time goes, the full pages in the logs
    cfg=${ATTN_NCU_CFG:-"b=8 h=16 s=1024 d=128 causal=false"} tsh=${ATTN_NCU_SHAPE:-"8,16,1024,128"}
    secs="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis --section Occupancy --section LaunchStats"
    XDG_CACHE_HOME=/tmp/cache-ncu timeout 120 $new train bench/attention_bf16.mdl --target cuda --steps 1 $cfg > $work/attnncu/warm.log 2>&1 || rc=1
    XDG_CACHE_HOME=/tmp/cache-ncu timeout 150 ncu $secs -k regex:mlc_attention -c 4 \
      $new train bench/attention_bf16.mdl --target cuda --steps 1 $cfg > $work/attnncu/mlc.log 2>&1 || rc=1
    [ $(left) -gt 60 ] && { timeout 150 ncu $secs -k regex:'cudnn|flash' --launch-skip 12 -c 4 \
      python3 bench/attention_torch.py --runs 3 --shape $tsh > $work/attnncu/cudnn.log 2>&1 || rc=1; }
    for f in mlc cudnn; do
      echo "== attnncu $f ($cfg)"
      grep -E "^  (void )?[a-z_:]*(attention|cudnn|flash|compute_dot|convert_dq)|Duration|Compute \(SM\) Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Warp Cycles Per Issued|Issue Slots Busy|No Eligible|Executed Ipc Active" \
        $work/attnncu/$f.log 2>/dev/null | cut -c1-120 | head -60
    done ;;
  esac
  pack
done
pack
echo "rc=$rc"
exit $rc
