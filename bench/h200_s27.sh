#!/usr/bin/env bash
# On the GPU machine (device tool), session 27: the attention forward in
# clusters of two blocks with k and v multicast (issue 19), and the GEMM
# tile rule's small-grid case (issue 18), each beside the tree before it
# (build-gpu/base/mlc, carried) in the same call.
#   PART=one   bench/h200_s17.sh PART=ab with BUILDS="build-gpu/base build-gpu"
#              (the forward alone at its CASES, two rounds, SDPA's kernels;
#              the op cases of OPS_K; compute-sanitizer on the attention
#              train step at SANITIZE), then PART=small
#   PART=small bench/gemm_tune.py --set small (GEMMs of less than a wave of
#              128 x 128 tiles) with build-gpu's rule and CONFIGS, and the
#              base's rule, cuBLAS in the same call
#   PART=model bench/cuda_flash.sh model (the MiniLLM's gradients against
#              PyTorch, its train step and bf16 forward against eager and
#              torch.compile), then the train step and forward of the base
# Carry build-gpu/mlc, build-gpu/lib, build-gpu/codegen/cuda/mlc_opcheck,
# build-gpu/base, .yardstick.  Logs in $OUT; a summary on standard output.
set -uo pipefail
cd "$(dirname "$0")/.."
final=${OUT:-/tmp/mlc-s27}
mkdir -p "$final"
. tests/gpu/env.sh "$final"
rc=0
small() {
  mkdir -p "$final/small-new" "$final/small-base"
  timeout 200 python3 bench/gemm_tune.py --set small --mlc build-gpu/mlc --out "$final/small-new" \
    --configs "${CONFIGS:-default;pp,4;128,6,1,1}" > "$final/small-new/stdout.log" 2>&1 || rc=1
  timeout 120 python3 bench/gemm_tune.py --set small --mlc build-gpu/base/mlc --out "$final/small-base" \
    --configs default > "$final/small-base/stdout.log" 2>&1 || rc=1
  echo "## new rule"; cat "$final/small-new/gemm_tune.md"
  echo "## base rule"; cat "$final/small-base/gemm_tune.md"
}
case ${PART:-} in
one)
  mkdir -p "$final/ab"
  OUT="$final/ab" BUILDS="build-gpu/base build-gpu" SKIP_S16=1 \
    OPS_K="${OPS_K:-attention mha matmul linear fused}" \
    SANITIZE="${SANITIZE:-b=1 h=2 s=256 causal=false d=128|b=2 h=3 s=500 causal=false d=64}" \
    timeout 420 bash bench/h200_s17.sh || rc=1
  small
  ;;
small) small ;;
model)
  mkdir -p "$final/model"
  OUT="$final/model" SKIP_MINILLM=${SKIP_MINILLM:-} timeout 400 bash bench/cuda_flash.sh model || rc=1
  for r in 1 2; do
    for b in build-gpu/base build-gpu; do
      l="$final/train-${b//\//_}-$r.log"
      XDG_CACHE_HOME=/tmp/cache-m-${b//\//_} timeout 150 $b/mlc train examples/minillm.mdl --target cuda --steps 12 > "$l" 2>&1 || rc=1
      t=$(grep -E '^step' "$l" | awk 'NR>=3 {gsub(/\(/,"",$5); print $5}' | sort -n | awk '{a[NR]=$1} END {print "median", a[int((NR+1)/2)], "ms of", NR, "steps"}')
      f=$(XDG_CACHE_HOME=/tmp/cache-m-${b//\//_} timeout 100 $b/mlc bench bench/minillm_bf16.mdl --target cuda --runs 10 2>&1 |
        tee -a "$final/fwd-${b//\//_}.log" | grep -o "median [0-9.]* ms")
      echo "round $r $b: train [$t] forward [$f]"
    done
  done
  ;;
*) echo "usage: PART=one|small|model bash bench/h200_s27.sh"; exit 2 ;;
esac
echo "rc=$rc"
exit $rc
