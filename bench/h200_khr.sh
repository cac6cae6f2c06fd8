#!/usr/bin/env bash
# On the GPU machine (device tool), one call: the SPIR-V target's
# cooperative-matrix kernels in their KHR form (--spirv-coopmat=khr, the
# NV -> KHR translation of codegen/spirv/khr.c) on NVIDIA's Vulkan driver,
# which has never run them: the GEMM and attention op cases with khr and with
# nv (the cooperative-matrix attention asked for with --spirv-attention=coopmat),
# then the f16 GEMM at 4096^3 in both forms beside cuBLAS.  Uses build-gpu
# (SPIRV-Tools static) and the Vulkan loader from .gl (tests/gpu/env.sh's
# vk_loader).  Logs in $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
. tests/gpu/env.sh /tmp/mlc-khr
vk_loader
mlc=$PWD/build-gpu/mlc opcheck=build-gpu/codegen/cuda/mlc_opcheck
rc=0
gpu_header bench/h200_khr.sh $out/env.log
$mlc devices --target spirv >> $out/env.log 2>&1
for form in khr nv; do
  for kw in matmul linear fused attention; do
    o="--option=--spirv-coopmat=$form"
    [ $kw = attention ] && o="$o --option=--spirv-attention=coopmat"
    timeout 90 python3 tests/ops/opcheck.py ops --target spirv --jobs 12 --opcheck $opcheck --work /tmp/ops-$form-$kw -k $kw $o || rc=1
  done > $out/ops_$form.log 2>&1
  echo "$form: $(grep -E 'cases passed' $out/ops_$form.log | tr '\n' ' ')"; grep -E '^FAIL' $out/ops_$form.log | head -5 | cut -c1-200
  timeout 40 $mlc bench bench/gemm_f16.mdl --target spirv n=4096 --runs 20 --warmup 3 --spirv-coopmat=$form > $out/gemm_$form.log 2>&1 || rc=1
  echo "gemm f16 4096^3 $form: $(grep -o 'median [0-9.]* ms' $out/gemm_$form.log)"
done
python3 -c "
import torch
a = torch.randn(4096, 4096, device='cuda', dtype=torch.float16); b = torch.randn(4096, 4096, device='cuda', dtype=torch.float16)
for _ in range(3): a @ b
s, e = torch.cuda.Event(True), torch.cuda.Event(True); ts = []
for _ in range(20):
    s.record(); a @ b; e.record(); torch.cuda.synchronize(); ts.append(s.elapsed_time(e))
print('cuBLAS f16 4096^3: median %.3f ms' % sorted(ts)[10])" 2>&1 | tee -a $out/gemm_torch.log
echo "rc=$rc"
exit $rc
