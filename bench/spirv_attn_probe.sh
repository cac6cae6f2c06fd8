#!/usr/bin/env bash
# On the GPU machine (device tool): where the SPIR-V cooperative-matrix
# attention forward's time goes (issue 23).  bench/attention_bf16.mdl's
# forward (b 8, h 16, s 1024, d 128, bf16), `mlc profile --entry forward`,
# once per variant given as FORM:BITS[:KEYS] in $VARIANTS (FORM nv or khr; KEYS
# --spirv-attention-keys; BITS the
# MLC_ATTN_PROBE ablation mask of the probe build, bench/results/s33/
# attn_probe.patch: 1 S not read back by the lanes, 2 no bf16->f16
# conversion in staging, 4 no exp2, 8 no O += P V, 16 no S products,
# 32 no global loads in staging, 64 S's products interleaved, 128 blocks of
# 32 keys, 256 the next block's keys and values fetched during the products,
# 512 S's whole 16 x 32 block through the scratch at once; with the committed
# build only 0 means anything),
# with the driver's register count for the kernel
# (MLC_VK_PIPELINE_STATS=1), 50 runs each; then PyTorch's SDPA at the same shape.
# Carry build-gpu/{mlc,lib}, .gl, .yardstick.  Logs under $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
. tests/gpu/env.sh /tmp/attn-probe
vk_loader
mkdir -p "$out/probe"
for v in ${VARIANTS:-khr:0 nv:0 khr:0:32 nv:0:32}; do
  IFS=: read -r f pb keys <<< "$v"
  l=$out/probe/${f}_${pb}${keys:+_$keys}.log
  MLC_VK_PIPELINE_STATS=1 MLC_ATTN_PROBE=$pb timeout 60 build-gpu/mlc profile bench/attention_bf16.mdl --target spirv \
    --spirv-coopmat=$f --spirv-attention=coopmat ${keys:+--spirv-attention-keys=$keys} --entry forward --steps 50 > $l 2>&1
  printf '%-8s %s | %s [%s s]\n' "$v" "$(grep -E '^attention%' $l | awk '{print $5 " ms, " $7}')" \
    "$(grep -E 'pipeline mlc_attention_[0-9a-f]+ ' $l | grep -oE 'Register Count=[0-9]+|Shared Memory Size=[0-9]+' | tr '\n' ' ')" $SECONDS
  grep -E 'error|rror:' $l | head -2
done
timeout 60 python3 bench/attention_torch.py --runs 20 2>&1 | grep -v '^#' | tail -3
