#!/usr/bin/env bash
# On the GPU machine (device tool), session 27: the GEMM tile rule's edges
# (issue 18) and attention kernels (issue 19), each beside another tree's
# build (build-gpu/base/mlc, carried; 1f58c77 in session 27) in the same
# call.  PART=one measured e8aaf76's clustered forward and persistent
# gradient, since backed out: on today's tree its A/B compares like with like.
#   PART=one   the op cases of OPS_K; attention at the MiniLLM's shape
#              (`mlc profile`, forward and train_step entries), both builds,
#              two rounds, and SDPA's kernels; compute-sanitizer memcheck and
#              racecheck on the attention train step at SANITIZE; PART=small;
#              then the train step's attention at s4096 causal and d64 causal
#   PART=small bench/gemm_tune.py --set small (GEMMs of less than a wave of
#              128 x 128 tiles) with build-gpu's rule and CONFIGS, and the
#              base's rule, cuBLAS in the same call
#   PART=final the op cases of matmul, linear and fused, bench/gemm_shapes.py,
#              and PART=model with SKIP_MINILLM=1
#   PART=ncu   Nsight Compute on mlc's attention kernels and cuDNN's at the
#              MiniLLM's shape, the same sections for both (not yet run)
#   PART=model the MiniLLM's gradients and 20 steps against PyTorch
#              (bench/cuda_minillm.py; SKIP_MINILLM=1: not), its train step
#              and bf16 forward, torch_baseline.py's eager and torch.compile,
#              then the base's train step and forward
# Carry build-gpu/mlc, build-gpu/lib, build-gpu/codegen/cuda/mlc_opcheck,
# build-gpu/base, .yardstick.  Logs in $OUT/logs.tgz; a summary on standard output.
set -uo pipefail
cd "$(dirname "$0")/.."
dest=${OUT:-/tmp/mlc-s27}
final=/tmp/s27-work # the logs, packed into $OUT/logs.tgz at the end
[ -n "${NESTED:-}" ] || rm -rf $final
mkdir -p "$final" "$dest"
. tests/gpu/env.sh "$final"
rc=0
pack() { tar -C "$final" -czf "$dest/logs.tgz" .; }
small() {
  mkdir -p "$final/small-new" "$final/small-base"
  timeout 200 python3 bench/gemm_tune.py --set small --mlc build-gpu/mlc --out "$final/small-new" \
    --configs "${CONFIGS:-default;pp,4;128,6,1,1}" > "$final/small-new/stdout.log" 2>&1 || rc=1
  timeout 120 python3 bench/gemm_tune.py --set small --mlc build-gpu/base/mlc --out "$final/small-base" \
    --configs default > "$final/small-base/stdout.log" 2>&1 || rc=1
  echo "## new rule"; cat "$final/small-new/gemm_tune.md"
  echo "## base rule"; cat "$final/small-base/gemm_tune.md"
}
# the op cases of -k each of $@ on the GPU, against float64
ops() {
  for k in "$@"; do
    timeout 170 python3 tests/ops/opcheck.py ops --target cuda --jobs 16 --opcheck build-gpu/codegen/cuda/mlc_opcheck \
      --work /tmp/ops-$k -k $k > "$final/ops_$k.log" 2>&1 || rc=1
    echo "op cases -k $k: $(grep -E 'cases passed' "$final/ops_$k.log")"
    grep -E "^FAIL" "$final/ops_$k.log" | head -5 | cut -c1-200
  done
}
# build $1's MiniLLM train step (median of steps 3..12) and bf16 forward (median of 10), round $2
mlcrun() {
  local b=$1 r=$2 l="$final/train-${1//\//_}-$2.log" t f
  XDG_CACHE_HOME=/tmp/cache-m-${b//\//_} timeout 150 $b/mlc train examples/minillm.mdl --target cuda --steps 12 > "$l" 2>&1 || rc=1
  t=$(grep -E '^step' "$l" | awk 'NR>=3 {gsub(/\(/,"",$5); print $5}' | sort -n | awk '{a[NR]=$1} END {print "median", a[int((NR+1)/2)], "ms of", NR, "steps"}')
  f=$(XDG_CACHE_HOME=/tmp/cache-m-${b//\//_} timeout 100 $b/mlc bench bench/minillm_bf16.mdl --target cuda --runs 10 --warmup 3 2>&1 |
    tee "$final/fwd-${b//\//_}-$r.log" | grep -o "median [0-9.]* ms")
  pack
  echo "round $r $b: train [$t] forward [$f] losses $(grep -E '^step' "$l" | awk '{print $4}' | tr '\n' ' ')"
}
# the attention rows of `mlc profile` (forward entry: attention; train_step: attention_save and its gradient)
# under build $1 at config $2, entry $3, into log $4
prof() {
  XDG_CACHE_HOME=/tmp/cache-${1//\//_} timeout 150 $1/mlc profile bench/attention_bf16.mdl --target cuda --steps 10 \
    ${3:+--entry $3} $2 >> "$4" 2>&1 || rc=1
}
case ${PART:-} in
one)
  # correctness first: op cases against float64 (the new build), compute-sanitizer on the attention train step
  ops ${OPS_K:-attention mha matmul linear fused}
  # A/B at the MiniLLM's shape: forward alone, then the train step (attention_save, the gradient's kernels)
  for r in 1 2; do
    for b in build-gpu/base build-gpu; do
      l="$final/ab-minillm-${b//\//_}-$r.log"
      prof $b "b=8 h=16 s=1024 d=128 causal=false" "" "$l"
      prof $b "b=8 h=16 s=1024 d=128 causal=false" train_step "$l"
      echo "round $r $b minillm:"; grep -E "^attention" "$l" | cut -c1-90
    done
  done
  timeout 100 python3 bench/attention_torch.py --shape 8,16,1024,128 > "$final/torch-minillm.log" 2>&1 || rc=1
  grep -E "sdpa" "$final/torch-minillm.log" | head -3
  IFS='|' read -ra scs <<< "${SANITIZE:-b=1 h=2 s=256 causal=false d=128|b=4 h=12 s=390 causal=false d=128|b=4 h=8 s=600 causal=true d=64}"
  for c in "${scs[@]}"; do
    l=${c// /_}
    for tool in memcheck racecheck; do
      timeout 150 compute-sanitizer --tool $tool build-gpu/mlc train bench/attention_bf16.mdl --target cuda --steps 1 $c \
        > "$final/${tool}_$l.log" 2>&1 || rc=1
      echo "compute-sanitizer $tool, attention train step $c: $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$final/${tool}_$l.log" | head -1)"
    done
  done
  small
  for c in "causal4096:b=2 h=16 s=4096 d=128 causal=true:2,16,4096,128 --causal" "d64causal:b=8 h=16 s=1000 d=64 causal=true:8,16,1000,64 --causal"; do
    IFS=: read -r name cfg tshape <<< "$c"
    for b in build-gpu/base build-gpu; do
      l="$final/ab-$name-${b//\//_}.log"
      prof $b "$cfg" train_step "$l"
      echo "$b $name:"; grep -E "^attention" "$l" | cut -c1-90
    done
    timeout 100 python3 bench/attention_torch.py --shape $tshape > "$final/torch-$name.log" 2>&1 || rc=1
    grep -E "sdpa" "$final/torch-$name.log" | head -3
  done
  ;;
small) small ;;
final) # after the attention changes went back (e8aaf76 -> the tree before them): the GEMM rule's op cases, the
       # MiniLLM's GEMM shapes, then PART=model without its gradient check (SKIP_MINILLM=1)
  ops ${OPS_K:-matmul linear fused}
  timeout 200 python3 bench/gemm_shapes.py --mlc build-gpu/mlc --out "$final/shapes" > "$final/shapes.log" 2>&1 || rc=1
  cat "$final/shapes/gemm_shapes.md"; tail -1 "$final/shapes.log"
  pack
  NESTED=1 SKIP_MINILLM=1 PART=model bash "$0" || rc=1
  ;;
model)
  # the MiniLLM's gradients and 20 AdamW steps against PyTorch (the new build; SKIP_MINILLM=1: not)
  [ -n "${SKIP_MINILLM:-}" ] || timeout 240 python3 bench/cuda_minillm.py --skip-forward --mlc build-gpu/mlc --opcheck build-gpu/codegen/cuda/mlc_opcheck \
    --work /tmp/full > "$final/minillm.log" 2>&1 || rc=1
  [ -n "${SKIP_MINILLM:-}" ] || grep -E "^ok|^FAIL|checks" "$final/minillm.log" | tail -8
  rm -rf /tmp/full
  # the new build, PyTorch, then the base (last: where the device time runs out, the comparison with PyTorch is
  # what comes back)
  mlcrun build-gpu 1
  timeout 200 python3 .yardstick/torch_baseline.py train > "$final/torch.log" 2>&1 || rc=1
  timeout 150 python3 .yardstick/torch_baseline.py infer >> "$final/torch.log" 2>&1 || rc=1
  pack
  grep -iE "ms|step" "$final/torch.log" | tail -8
  mlcrun build-gpu/base 1
  ;;
ncu) # Nsight Compute on mlc's attention kernels (the train step's: attention_save, the gradient's three launches)
     # and on cuDNN's (SDPA's fprop, bprop and the kernels around them) at the MiniLLM's shape, the same sections for
     # both, so that where the gradient's main pass loses its time to cuDNN's bprop can be read side by side
  sec="--section SpeedOfLight --section WarpStateStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats"
  XDG_CACHE_HOME=/tmp/cache-ncu timeout 240 ncu --clock-control none $sec -k regex:attention --launch-count 4 \
    build-gpu/mlc profile bench/attention_bf16.mdl --target cuda --entry train_step --steps 1 b=8 h=16 s=1024 d=128 causal=false \
    > "$final/ncu-mlc.log" 2>&1 || rc=1
  timeout 240 ncu --clock-control none $sec -k regex:"cudnn|flash|sdpa" --launch-count 8 \
    python3 bench/attention_torch.py --shape 8,16,1024,128 > "$final/ncu-cudnn.log" 2>&1 || rc=1
  for f in ncu-mlc ncu-cudnn; do
    echo "## $f"
    grep -E "^  [a-zA-Z_].*\(|Duration|Compute \(SM\) Throughput|Memory Throughput|Issue Slots Busy|Executed Ipc Active|Registers Per|Achieved Occupancy|Warp Cycles Per Issued|Stall" \
      "$final/$f.log" | head -60
  done
  ;;
*) echo "usage: PART=one|small|model|final|ncu bash bench/h200_s27.sh"; exit 2 ;;
esac
# every log in one tarball (the device tool returns a limited number of files, none with '=' in its name)
pack
echo "rc=$rc"
exit $rc
