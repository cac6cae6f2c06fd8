#!/usr/bin/env bash
# Every cooperative-matrix module mlc emits for the GEMM benches (f16; bf16
# GEMMs have one in the KHR form only, with bf16 matrices, and keep the
# portable kernel alone in the NV build) and for a small f16
# MiniLLM with --spirv-attention=coopmat (GEMMs, fused GEMMs and the
# attention forward and gradient) and for the same MiniLLM in bf16 (bf16
# matrices in the KHR form, the attention's included; in the NV build the
# attention alone, converted to f16), compiled with --spirv-coopmat=khr: each is KHR and
# passes the translator's structural checks (test_spirv_khr check), and
# there are as many as the NV build has.  mlc validated each one as NV with
# spvValidate before translating it.  The KHR build (the default) also ships
# each f16 module's NV form as its fallback: those are the NV build's
# modules byte for byte, one per f16 KHR module (none for bf16 ones).
# With TEST_VK_COOPMAT, the runtime's scanner (runtime/vulkan/coopmat.h)
# reads every module of both forms: each cooperative-matrix one multiplies
# 16x16x16 f16 x f16 (or, KHR, bf16 x bf16) + f32 -> f32 and nothing else, what the device check
# will ask the driver's list for.
# Usage: khr_models.sh MLC TEST_SPIRV_KHR ROOT WORKDIR [TEST_VK_COOPMAT]
set -euo pipefail
mlc=$1 check=$2 root=$3 work=$4 scan=${5:-}
rm -rf "$work" && mkdir -p "$work"
small=(-D vocab=512 -D dim=128 -D layers=2 -D heads=4 -D batch=2 -D seq=64 -D compute=f16 --spirv-attention=coopmat)
fail=0
coopmat_files() { # the modules of directory $1 declaring capability $2 (NV 5357 or KHR 6022)
  python3 - "$1" "$2" <<'PY'
import glob, struct, sys
for f in sorted(glob.glob(sys.argv[1] + "/*.spv")):
    b = open(f, "rb").read(); w = struct.unpack("<%dI" % (len(b) // 4), b); i = 5
    while i < len(w) and w[i] & 0xffff == 17:
        if w[i + 1] == int(sys.argv[2]): print(f)
        i += w[i] >> 16
PY
}
coopmat_count() { coopmat_files "$1" "$2" | wc -l; }
for m in gemm_f16 gemm_bf16 minillm minillm_bf16; do
  case $m in
  minillm) src=$root/examples/minillm.mdl args=("${small[@]}") ;;
  minillm_bf16) src=$root/examples/minillm.mdl args=("${small[@]/compute=f16/compute=bf16}") ;;
  *) src=$root/bench/$m.mdl args=() ;;
  esac
  for form in nv khr; do
    "$mlc" compile "$src" --target spirv --spirv-coopmat=$form "${args[@]}" -o "$work/$m-$form" > "$work/$m-$form.log" 2>&1 ||
      { cat "$work/$m-$form.log"; exit 1; }
  done
  nv=$(coopmat_count "$work/$m-nv" 5357) khr=$(coopmat_count "$work/$m-khr" 6022)
  mapfile -t kf < <(coopmat_files "$work/$m-khr" 6022)
  out=$("$check" check "${kf[@]}") || { echo "FAIL $m: $out"; fail=1; continue; }
  # the NV fallbacks in the KHR build: the NV build's modules, one per f16 KHR module
  fb=0 want_fb=$khr
  case $m in *bf16) want_fb=0 ;; esac
  while read -r f; do
    [ -n "$f" ] || continue
    fb=$((fb + 1))
    same=0
    for g in "$work/$m-nv"/*.spv; do cmp -s "$f" "$g" && same=1 && break; done
    [ $same = 1 ] || { echo "FAIL $m: the KHR build's NV module $(basename "$f") is none of the NV build's"; fail=1; }
  done < <(coopmat_files "$work/$m-khr" 5357)
  [ $fb = $want_fb ] || { echo "FAIL $m: $fb NV fallbacks in the KHR build, not $want_fb"; fail=1; continue; }
  if [ -n "$scan" ]; then
    for form in nv khr; do
      s=$("$scan" scan "$work/$m-$form"/*.spv 2>&1) || { echo "FAIL $m $form scan: $s"; fail=1; continue; }
      # bf16 in the KHR form: every multiply bf16 (the attention's staged as bf16 too, not as f16)
      if [ $m = minillm_bf16 ] && [ $form = khr ] && ! grep -q ' 0 multiply 16x16x16 f16' <<< "$s"; then
        echo "FAIL $m khr: an f16 multiply in a bf16 build: $s"; fail=1; continue
      fi
      echo "ok   $m $form scan: $s"
    done
  fi
  # bf16 GEMMs have cooperative matrices in the KHR form only (bf16
  # matrices, SPV_KHR_bfloat16); their NV build keeps the portable kernel
  want_nv=$khr; [ $m = gemm_bf16 ] && want_nv=0
  least=1 # KHR modules at least
  if [ $m = minillm_bf16 ]; then # the NV build's are the attention's (forward, gradient); the KHR one adds the GEMMs'
    want_nv=2 least=3
  fi
  if [ "$nv" = "$want_nv" ] && [ "$khr" -ge "$least" ]; then
    echo "ok   $m: $out; $nv NV modules in the NV build, $fb of them the KHR build's fallbacks"
  else
    echo "FAIL $m: $khr KHR modules, $nv NV ones"; fail=1
  fi
done
[ $fail -eq 0 ]
