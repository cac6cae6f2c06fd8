#!/usr/bin/env bash
# The CUDA target without a GPU: every example compiles to CUDA C that nvcc
# builds for sm_90a (mlc compile runs nvcc itself, with an empty cache so
# that it really does), the GEMMs are tensor-core code (f32 too, but not
# under --f32-matmul ieee), and NVRTC
# compiles the same source with no include path.  Tensor cores are checked
# in the SASS (HMMA/HGMMA, with cuobjdump) where cuobjdump is installed, and
# otherwise in the PTX nvcc writes for sm_90a (mma.sync / wgmma).  ptxas
# must not warn that it serialised a kernel's wgmma (C7514).
# Usage: compile_examples.sh MLC TEST_NVRTC ROOT WORKDIR
set -euo pipefail
mlc=$1 test_nvrtc=$2 root=$3 work=$4
nvcc=${MLC_NVCC:-/usr/local/cuda/bin/nvcc}
cuobjdump=$(dirname "$nvcc")/cuobjdump
if [ ! -x "$nvcc" ]; then echo "no nvcc at $nvcc: skipped"; exit 77; fi
rm -rf "$work" && mkdir -p "$work"
export XDG_CACHE_HOME=$work/cache MLC_NVCC=$nvcc
pass=0 fail=0
check() { if eval "$2"; then echo "ok   $1"; pass=$((pass+1)); else echo "FAIL $1"; fail=$((fail+1)); fi; }
for m in mlp linear minillm; do
  out=$work/$m
  "$mlc" compile "$root/examples/$m.mdl" --target cuda -o "$out" 2> "$work/$m.log" || { cat "$work/$m.log"; exit 1; }
  name=$(basename "$(ls "$out"/*.cu)" .cu)
  # ptxas's C7514 and its kin ("wgmma.mma_async instructions are serialized
  # due to ..."): a wgmma kernel that runs at a fraction of its speed
  check "$m: ptxas reports no performance loss (C7514 and the like)" "! grep -E 'Potential Performance Loss|C75[0-9][0-9]' \"$work/$m.log\""
  check "$m: nvcc built a fatbin ($(stat -c %s "$out/$name.fatbin") bytes)" "[ -s $out/$name.fatbin ]"
  if [ -x "$cuobjdump" ]; then
    what="HMMA/HGMMA instructions in the SASS"
    tc=$("$cuobjdump" -sass "$out/$name.fatbin" | grep -c -E 'HMMA|HGMMA' || true)
    check "$m: the fatbin carries PTX too (for GPUs after sm_90)" "\"$cuobjdump\" -lptx \"$out/$name.fatbin\" | grep -q -i ptx"
  else
    what="mma.sync/wgmma instructions in the sm_90a PTX (no cuobjdump here)"
    "$nvcc" -ptx -arch=sm_90a -std=c++17 -o "$work/$m.ptx" "$out/$name.cu"
    tc=$(grep -c -E 'mma\.sync\.aligned|wgmma\.mma_async' "$work/$m.ptx" || true)
  fi
  # mlp is f32: on the tensor cores too, as 3xTF32 (--f32-matmul tf32x3, the default)
  check "$m: its GEMMs use tensor cores ($tc $what)" "[ $tc -gt 0 ]"
  # detect_leaks=0: libnvrtc keeps a 72 KiB allocation from its start-up to
  # the end, which LeakSanitizer (the sanitizer build of this test) reports.
  check "$m: NVRTC compiles the same source for sm_90a" "ASAN_OPTIONS=detect_leaks=0 \"$test_nvrtc\" \"$out/$name.cu\" \"$work/$m.cubin\" > \"$work/$m.nvrtc.log\" 2>&1"
  # programmatic dependent launch (runtime/cuda/device.c) is safe only if every kernel waits first
  kernels=$(grep -c '__global__ void' "$out/$name.cu")
  # (a decode step's kernels trigger the next one first)
  waits=$(awk '/__global__ void/ { k = 1; next } k && /^  mlc_pdl_trigger\(\);$/ { next }
    k && /^  mlc_pdl_enter\(\);$/ { n++ } { k = 0 } END { print n + 0 }' "$out/$name.cu")
  check "$m: each of its $kernels kernels opens with mlc_pdl_enter ($waits)" "[ $kernels -gt 0 ] && [ $waits -eq $kernels ]"
  if [ $m = minillm ]; then
    # the tile rule (emit_gemm.c, gemm_pick): each of its 14 distinct bf16 GEMMs of two or more waves of 128 x 256
    # tiles (the projections, FFN and head, forward, dX and dW), and out_proj's dW (2048 x 2048 x 8192: one wave of
    # 128 such tiles), on the cooperative kernel with TMA stores (cs,4)
    cs=$(grep -o 'mlc_gemm_pp<mlc_bf16, 256, 4, [a-z]*, [a-z]*, [0-9]*LL, [0-9]*LL, [0-9]*LL, 8, true>' "$out/$name.cu" | sort -u | wc -l)
    check "$m: its 15 big bf16 GEMMs on the cooperative TMA-store kernel ($cs)" "[ $cs -eq 15 ]"
    one=$(grep -c 'mlc_gemm_pp<mlc_bf16, 256, 4, true, false, 2048LL, 2048LL, 8192LL, 8, true>' "$out/$name.cu" || true)
    check "$m: out_proj's dW, one wave of 128 x 256 tiles, among them ($one)" "[ $one -gt 0 ]"
  fi
  if [ $m = minillm ] && [ -x "$cuobjdump" ]; then
    check "$m: the NVRTC cubin uses tensor cores too" "\"$cuobjdump\" -sass \"$work/$m.cubin\" | grep -q -E 'HMMA|HGMMA'"
  fi
done
# A decode step (examples/minillm_causal.mdl, f32, --quantize int4 and int4:asym): each of its kernels
# lets the next launch at once (mlc_pdl_trigger, codegen/cuda/prelude.c), the forward's do not
for q in "" int4 int4:asym; do
  m=minillm_causal${q:+_${q/:/_}} out=$work/minillm_causal${q:+_${q/:/_}}
  "$mlc" compile "$root/examples/minillm_causal.mdl" --target cuda -o "$out" ${q:+--quantize $q} 2> "$work/$m.log" || { cat "$work/$m.log"; exit 1; }
  kernels=$(grep -c '__global__ void' "$out/minillm.cu")
  waits=$(awk '/__global__ void/ { k = 1; next } k && /^  mlc_pdl_trigger\(\);$/ { next }
    k && /^  mlc_pdl_enter\(\);$/ { n++ } { k = 0 } END { print n + 0 }' "$out/minillm.cu")
  check "$m: each of its $kernels kernels opens with mlc_pdl_enter ($waits)" "[ $kernels -gt 0 ] && [ $waits -eq $kernels ]"
  step=$(awk '/^\/\/ step %/ { s = 1 } /^\/\/ [a-z_]+ %/ && !/^\/\/ step %/ { s = 0 } s && /__global__ void/ { k++ } s && /^  mlc_pdl_trigger\(\);$/ { t++ }
    END { print k + 0, t + 0 }' "$out/minillm.cu")
  read -r sk st <<< "$step"
  check "$m: every one of the step's $sk kernels triggers the next ($st)" "[ $sk -gt 0 ] && [ $sk -eq $st ]"
  fwd=$(awk '/^\/\/ forward %/ { s = 1 } /^\/\/ [a-z_]+ %/ && !/^\/\/ forward %/ { s = 0 } s && /^  mlc_pdl_trigger\(\);$/ { t++ } END { print t + 0 }' "$out/minillm.cu")
  check "$m: no kernel of the forward triggers early ($fwd)" "[ $fwd -eq 0 ]"
  # int4: the qlinears carry the adds and the SiLU that follow them (fuse.c, qlinear_epilogues)
  lone=$(grep -c -E '^// step %[0-9]+ (add|silu) ' "$out/minillm.cu" || true)
  [ -z "$q" ] || check "$m: no add or SiLU of the step in a kernel of its own ($lone)" "[ $lone -eq 0 ]"
  # int4:asym: every qlinear is mlc_qgemv's asymmetric form with bf16 scales (its last template argument,
  # the scheme's flags, 3), int4's the symmetric one (2)
  sym=$(grep -c -E 'mlc_qgemv<[^>]*, 2>::run' "$out/minillm.cu" || true)
  asym=$(grep -c -E 'mlc_qgemv<[^>]*, 3>::run' "$out/minillm.cu" || true)
  case $q in
  *asym) check "$m: its qlinears are asymmetric ($asym; symmetric $sym)" "[ $asym -gt 1 ] && [ $sym -eq 0 ]" ;;
  int4) check "$m: its qlinears are symmetric ($sym; asymmetric $asym)" "[ $sym -gt 1 ] && [ $asym -eq 0 ]" ;;
  esac
  # f32: the step's norms are its GEMVs' prologues (fuse.c, gemv_prologue_rows), the forward's are
  # kernels; int4: the qlinears take none
  norms=$(grep -c -E '^// step %[0-9]+ rmsnorm ' "$out/minillm.cu" || true)
  pro=$(grep -c -E 'mlc_gemv_rms<' "$out/minillm.cu" || true)
  fnorms=$(grep -c -E '^// forward %[0-9]+ rmsnorm ' "$out/minillm.cu" || true)
  if [ -z "$q" ]; then
    check "$m: no rmsnorm of the step in a kernel of its own ($norms; $pro GEMVs normalise x, the forward has $fnorms norms)" \
      "[ $norms -eq 0 ] && [ $pro -gt 0 ] && [ $fnorms -gt 0 ]"
  else
    check "$m: the step's rmsnorms before qlinears stay kernels ($norms; $pro prologues)" "[ $norms -gt 0 ] && [ $pro -eq 0 ]"
  fi
done
# issue 27's ops, forward and backward (train entry): mlc's nvcc run builds them
for t in "$root"/tests/cuda/issue27_*.mdl; do
  m=$(basename "$t" .mdl)
  "$mlc" compile "$t" --target cuda -o "$work/$m" 2> "$work/$m.log" || { cat "$work/$m.log"; exit 1; }
  check "$m: nvcc built a fatbin, with no warning" "[ -s $work/$m/net.fatbin ] && ! grep -q -i warning \"$work/$m.log\""
done
# --matmul=fp8 (issue 30): the MiniLLM's train step at a small size whose FP8 GEMMs run several k-tiles
# (the promotion loop of mlc_gemm_pp), compute in bf16: no serialised wgmma, FP8 wgmma in the PTX
m=minillm_fp8
"$mlc" compile "$root/examples/minillm.mdl" --target cuda --matmul=fp8 -o "$work/$m" vocab=512 dim=512 layers=1 heads=4 batch=4 seq=128 \
  compute=bf16 2> "$work/$m.log" || { cat "$work/$m.log"; exit 1; }
check "$m: nvcc built a fatbin, and ptxas reports no performance loss (C7514 and the like)" \
  "[ -s $work/$m/minillm.fatbin ] && ! grep -E 'Potential Performance Loss|C75[0-9][0-9]|warning' \"$work/$m.log\""
"$nvcc" -ptx -arch=sm_90a -std=c++17 -o "$work/$m.ptx" "$work/$m/minillm.cu"
f8=$(grep -c -E 'wgmma\.mma_async\.sync\.aligned\.m64n128k32\.f32\.e(4m3|5m2)\.e4m3' "$work/$m.ptx" || true)
check "$m: FP8 wgmma in the sm_90a PTX ($f8)" "[ $f8 -gt 0 ]"
# its bf16 GEMMs of 512 x 512 x 512 (the head's three: 16 tiles of 128 x 128, under a wave) on the persistent
# kernel's 128 x 128 tiles (gemm_pick's small-grid case), not 64 x 64 mma.sync tiles
pp=$(grep -o 'mlc_gemm_pp<mlc_bf16, 128, 6, [a-z]*, [a-z]*, 512LL, 512LL, 512LL, 8>' "$work/$m/minillm.cu" | sort -u | wc -l)
check "$m: its three bf16 GEMMs under a wave of tiles on the persistent 128 x 128 kernel ($pp)" "[ $pp -eq 3 ]"
# --f32-matmul ieee: f32 FMAs, no tensor-core instruction in the f32 MLP
"$mlc" compile "$root/examples/mlp.mdl" --target cuda --f32-matmul ieee -o "$work/mlp_ieee" 2> "$work/mlp_ieee.log" ||
  { cat "$work/mlp_ieee.log"; exit 1; }
"$nvcc" -ptx -arch=sm_90a -std=c++17 -o "$work/mlp_ieee.ptx" "$work/mlp_ieee/mlp.cu"
tc=$(grep -c -E 'mma\.sync\.aligned|wgmma\.mma_async' "$work/mlp_ieee.ptx" || true)
check "mlp --f32-matmul ieee: no tensor-core instructions ($tc in the sm_90a PTX)" "[ $tc -eq 0 ]"
"$mlc" compile "$root/examples/minillm.mdl" --target cuda -o "$work/again" > "$work/again.log" 2>&1
check "a second compile of the MiniLLM comes from the cache" "grep -q 'from the cache' \"$work/again.log\""
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
