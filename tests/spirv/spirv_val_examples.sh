#!/usr/bin/env bash
# Every SPIR-V module the spirv target emits for the examples (mlp, linear,
# and the MiniLLM in a small configuration: forward and train step) passes
# the standalone validator, spirv-val, for Vulkan 1.2, and the
# cooperative-matrix GEMMs and attention (emitted with --coopmat --nv, the
# MiniLLM in f16: their NV form, which spirv-val 2023.1 knows; the default KHR
# form is that one translated, checked by spirv.khr.models) for Vulkan 1.3.  The
# compiler validates each module itself through SPIRV-Tools' C API; this
# checks the bytes that are written, with the separate tool.
# Usage: spirv_val_examples.sh MLC_SPIRV_DUMP ROOT WORKDIR
set -euo pipefail
dump=$1 root=$2 work=$3
if ! command -v spirv-val > /dev/null; then echo "no spirv-val (Debian's spirv-tools): skipped"; exit 77; fi
rm -rf "$work" && mkdir -p "$work"
pass=0 fail=0
check() { if eval "$2"; then echo "ok   $1"; pass=$((pass+1)); else echo "FAIL $1"; fail=$((fail+1)); fi; }
small=(-D vocab=512 -D dim=128 -D layers=2 -D heads=4 -D batch=2 -D seq=64)
for m in mlp linear minillm minillm-coopmat; do
  out=$work/$m
  mkdir -p "$out"
  args=()
  case $m in
    minillm) args=("${small[@]}") ;;
    minillm-coopmat) args=("${small[@]}" -D compute=f16 --coopmat --nv) ;; # f16: bf16 GEMMs keep the portable kernel in the NV form
  esac
  "$dump" "$root/examples/${m%-coopmat}.mdl" "$out" "${args[@]}" > "$out.log" 2>&1 || { cat "$out.log"; exit 1; }
  n=0 bad=0
  while read -r sym rest; do
    env=vulkan1.2
    case $rest in *coopmat=*) env=vulkan1.3 ;; esac
    n=$((n+1))
    if ! spirv-val --target-env $env "$out/$sym.spv" > "$out/$sym.val" 2>&1; then
      bad=$((bad+1)); echo "  $sym ($env):"; cat "$out/$sym.val"
    fi
  done < "$out/kernels.txt"
  check "$m: all $n modules pass spirv-val ($bad fail)" "[ $n -gt 0 ] && [ $bad -eq 0 ]"
  # forward and train step: the train step's kernels are there too
  case $m in
    mlp) check "$m: the train step's kernels (cross_entropy_grad, sgd) are among them" \
           "grep -q '^mlc_cross_entropy_grad_' $out/kernels.txt && grep -q '^mlc_sgd_' $out/kernels.txt" ;;
    minillm) check "$m: forward and train-step kernels (attention, attention_grad, adamw, embedding_grad)" \
           "grep -q '^mlc_attention_' $out/kernels.txt && grep -q '^mlc_attention_grad_' $out/kernels.txt && grep -q '^mlc_adamw_' $out/kernels.txt && grep -q '^mlc_embedding_grad_' $out/kernels.txt" ;;
    minillm-coopmat)
      nc=$(grep -c 'coopmat=16x16x16' "$out/kernels.txt" || true)
      check "$m: the f16 GEMMs have cooperative-matrix kernels ($nc), each with a fallback in the table" \
        "[ $nc -gt 0 ] && (for f in \$(grep -o 'fallback=[^ ]*' $out/kernels.txt | cut -d= -f2); do grep -q \"^\$f \" $out/kernels.txt || exit 1; done)"
      check "$m: those modules declare SPV_NV_cooperative_matrix" \
        "(for s in \$(grep coopmat= $out/kernels.txt | cut -d' ' -f1); do spirv-dis $out/\$s.spv > $out/\$s.dis && grep -q 'OpExtension \"SPV_NV_cooperative_matrix\"' $out/\$s.dis || exit 1; done)" ;;
  esac
done
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
