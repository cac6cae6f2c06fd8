#!/usr/bin/env bash
# On the GPU machine (device tool): issue 23's GEMM timed two ways, and
# issue 29's qlinear on NVIDIA's Vulkan driver.
#  1. The SPIR-V cooperative-matrix GEMM at 4096^3 (KHR form; bf16 and f16;
#     the default tile and the two best of bench/results/h200-2026-12-04's
#     sweep), each timed by `mlc bench` (the host's clock around each run:
#     submit, the GPU's work and the fence's wait, as the sweep timed it)
#     and by `mlc profile` (the kernel's GPU timestamps), beside cuBLAS
#     (torch.matmul between CUDA events) in the same call.
#  3. The MiniLLM bf16 forward on SPIR-V (KHR), both attentions, and eager
#     PyTorch's.
#  2. tests/ref/quant.py --target spirv (the qlinear kernels, bf16 and f32
#     scales, their epilogues) on NVIDIA's driver.
# Carry .gl (libvulkan1), build-gpu/mlc, build-gpu/lib.  Logs in $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
. tests/gpu/env.sh /tmp/mlc-spv-time
vk_loader
mlc=$PWD/build-gpu/mlc
rc=0
gpu_header bench/spirv_gpu_time.sh "$out/env.log"
$mlc devices --target spirv >> "$out/env.log" 2>&1 || { echo "no Vulkan device"; cat "$out/env.log"; exit 1; }
python3 - <<'PY' > "$out/cublas.log" 2>&1 || rc=1
import torch
for dt in (torch.bfloat16, torch.float16):
    a = torch.randn(4096, 4096, device="cuda", dtype=dt); b = torch.randn(4096, 4096, device="cuda", dtype=dt)
    for _ in range(10): a @ b
    ts = []
    for _ in range(50):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); a @ b; e.record(); torch.cuda.synchronize(); ts.append(s.elapsed_time(e))
    ts.sort()
    print(f"cublas {str(dt).split('.')[-1]} median {ts[len(ts) // 2]:.4f} ms min {ts[0]:.4f}")
PY
cat "$out/cublas.log"
for dt in bf16 f16; do
  for tile in default 256x128x64x64x32x1 128x128x64x64x32x1; do
    t=${tile/default/}
    l=$out/gemm_${dt}_$tile
    timeout 60 $mlc bench bench/gemm_$dt.mdl --target spirv n=4096 --runs 30 --warmup 5 --spirv-coopmat=khr \
      ${t:+--spirv-gemm-tile=$t} > $l.bench.log 2>&1 || rc=1
    timeout 60 $mlc profile bench/gemm_$dt.mdl --target spirv n=4096 --steps 30 --spirv-coopmat=khr \
      ${t:+--spirv-gemm-tile=$t} > $l.profile.log 2>&1 || rc=1
    echo "$dt $tile: host $(grep -o 'median [0-9.]* ms, min [0-9.]*' $l.bench.log); kernel $(grep -E '^matmul' $l.profile.log | awk '{print "avg", $5, "ms"}')"
  done
done
# 3. the MiniLLM bf16 forward (issue 23's forward_minillm_bf16): KHR GEMMs, the default attention and
#    --spirv-attention=coopmat; eager PyTorch beside it
for attn in default coopmat; do
  a=; [ $attn = default ] || a=--spirv-attention=$attn
  timeout 90 $mlc bench bench/minillm_bf16.mdl --target spirv --spirv-coopmat=khr $a \
    --runs 10 --warmup 2 > $out/minillm_spirv_$attn.log 2>&1 || rc=1
  echo "minillm forward spirv khr, attention $attn: $(grep -o 'median [0-9.]* ms, min [0-9.]*' $out/minillm_spirv_$attn.log)"
done
timeout 60 python3 bench/spirv_torch.py minillm --runs 10 > $out/minillm_torch.log 2>&1 || rc=1
grep -v '^#' $out/minillm_torch.log | tail -3
timeout 150 python3 tests/ref/quant.py $mlc /tmp/spv-quant --target spirv > "$out/quant_spirv.log" 2>&1 || rc=1
echo "quant.py --target spirv: $(grep -c '^ok:' $out/quant_spirv.log) ok, $(grep -c '^FAIL' $out/quant_spirv.log) FAIL"
grep -E '^FAIL|no spirv' "$out/quant_spirv.log" | head -4 | cut -c1-200
echo "rc=$rc"
exit $rc
