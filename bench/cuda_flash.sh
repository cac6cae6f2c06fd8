#!/usr/bin/env bash
# On the GPU machine (device tool): issue 19's attention (the wgmma forward,
# causal or not, and the wgmma gradient at head dim 128) in one call each.
#   bench/cuda_flash.sh check   the attention and MHA op cases against PyTorch
#                               (float64), compute-sanitizer (memcheck, and
#                               racecheck for the record) on the gradient at
#                               odd lengths, then attention alone against
#                               PyTorch's SDPA at each shape of $CASES
#                               (mlc profile, forward and train_step entries;
#                               bench/attention_torch.py)
#   bench/cuda_flash.sh model   the full MiniLLM's gradients and 20 AdamW steps
#                               against PyTorch (bench/cuda_minillm.py), the
#                               MiniLLM train step and bf16 forward, mlc and
#                               torch_baseline.py (eager, torch.compile)
# Needs build-gpu/ as tests/gpu/cuda_check.sh says, .yardstick/ for `model`.
# Logs go to $OUT (packed into one tarball by the caller if need be).
set -uo pipefail
cd "$(dirname "$0")/.."
. tests/gpu/env.sh /tmp/mlc-flash
mlc=build-gpu/mlc opcheck=build-gpu/codegen/cuda/mlc_opcheck
rc=0
{ echo "# bench/cuda_flash.sh ${1:-}, $(date -u '+%F %T') UTC, commit ${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo '?')}"
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } | tee "$out/env.log"
# name:b,h,s,d:causal
CASES=${CASES:-"minillm:8,16,1024,128:false causal4096:2,16,4096,128:true d64causal:8,16,1000,64:true"}
case ${1:-} in
check) # SKIP_OPS=1: without the op cases (a caller that ran them all)
  [ -n "${SKIP_OPS:-}" ] || for kw in attention mha; do
    timeout 200 python3 tests/ops/opcheck.py ops --target cuda --jobs 16 --opcheck $opcheck --work /tmp/ops-$kw -k $kw || rc=1
  done > "$out/ops.log" 2>&1
  [ -n "${SKIP_OPS:-}" ] || grep -E "^FAIL|cases passed" "$out/ops.log"
  # the last: more forward work items (144) than multiprocessors, so the persistent forward's blocks take two
  for c in "b=1 h=2 s=333 causal=true" "b=1 h=2 s=300 causal=false" "b=1 h=2 s=333 causal=true d=64" \
           "b=4 h=12 s=300 causal=true d=64"; do
    l=${c// /_}
    timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $mlc train bench/attention_bf16.mdl --target cuda \
      --steps 1 $c > "$out/memcheck_$l.log" 2>&1 || rc=1
    echo "compute-sanitizer memcheck, attention train step $c: $(grep 'ERROR SUMMARY' "$out/memcheck_$l.log")"
    grep "=========" "$out/memcheck_$l.log" | grep -v "COMPUTE-SANITIZER\|SUMMARY" | head -12
    timeout 120 compute-sanitizer --tool racecheck $mlc train bench/attention_bf16.mdl --target cuda \
      --steps 1 $c > "$out/racecheck_$l.log" 2>&1
    echo "compute-sanitizer racecheck, attention train step $c: $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$out/racecheck_$l.log" | head -1)"
  done | tee "$out/sanitizer.log"
  for c in $CASES; do
    IFS=: read -r name shape causal <<< "$c"
    IFS=, read -r b h s d <<< "$shape"
    cfg="b=$b h=$h s=$s d=$d causal=$causal"
    { timeout 120 $mlc profile bench/attention_bf16.mdl --target cuda --steps 10 $cfg
      timeout 120 $mlc profile bench/attention_bf16.mdl --target cuda --entry train_step --steps 10 $cfg
    } > "$out/attn_${name}_profile.log" 2>&1 || rc=1
    echo "## $name: $cfg"
    grep -E "^attention" "$out/attn_${name}_profile.log" | cut -c1-100
    timeout 120 python3 bench/attention_torch.py --shape "$shape" $([ "$causal" = true ] && echo --causal) \
      > "$out/attn_${name}_torch.log" 2>&1 || rc=1
    grep sdpa "$out/attn_${name}_torch.log"
  done
  ;;
model) # SKIP_MINILLM=1: without the gradient check against PyTorch (bench/cuda_minillm.py), to save time
  [ -n "${SKIP_MINILLM:-}" ] || timeout 300 python3 bench/cuda_minillm.py --skip-forward --mlc $mlc --opcheck $opcheck --work /tmp/full \
    > "$out/minillm.log" 2>&1 || rc=1
  [ -n "${SKIP_MINILLM:-}" ] || grep -E "^ok|^FAIL|checks|ms" "$out/minillm.log" | tail -12
  rm -rf /tmp/full
  {
    echo "## MiniLLM train step (bf16 compute, f32 master weights, AdamW), uniform random tokens"
    python3 -c "import torch; torch.manual_seed(0); torch.randint(0, 32000, (12 * 8 * 1024 + 1,), dtype=torch.int32).numpy().tofile('/tmp/tokens.bin')"
    $mlc train examples/minillm.mdl --target cuda --steps 12 --data /tmp/tokens.bin --data-dtype i32
    echo "## MiniLLM forward, bf16 parameters"
    $mlc bench bench/minillm_bf16.mdl --target cuda --runs 10 --warmup 3
  } > "$out/mlc.log" 2>&1 || rc=1
  grep -E "median|^step 12" "$out/mlc.log"
  timeout 200 python3 .yardstick/torch_baseline.py train > "$out/torch.log" 2>&1 || rc=1
  timeout 200 python3 .yardstick/torch_baseline.py infer >> "$out/torch.log" 2>&1 || rc=1
  grep -iE "ms|step" "$out/torch.log" | tail -12
  ;;
*) echo "usage: bench/cuda_flash.sh check|model"; exit 2 ;;
esac
echo "rc=$rc"
exit $rc
