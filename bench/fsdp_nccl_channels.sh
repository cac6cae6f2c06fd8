#!/usr/bin/env bash
# How NCCL's share of the SMs changes mlc's overlapped FSDP step on two
# H200s: the seed config, 10 steps, at NCCL's default and at a few
# NCCL_MAX_NCHANNELS values (fewer channels: slower collectives, less taken
# from the compute kernels they overlap).  Logs go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
. tests/gpu/env.sh /tmp/mlc-ch
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mlc=$PWD/build-gpu/mlc
python3 bench/fsdp_torch.py init --yardstick .yardstick --work /tmp/seed --steps 10 >/dev/null
$mlc compile examples/minillm.mdl --target cuda-nccl -o /tmp/seed/art >/dev/null 2>&1
for ch in default 2 4 8; do
  if [ $ch = default ]; then unset NCCL_MAX_NCHANNELS; else export NCCL_MAX_NCHANNELS=$ch; fi
  timeout 200 torchrun --nproc_per_node=2 --no-python $mlc train examples/minillm.mdl --target cuda-nccl \
    --weights /tmp/seed/init.safetensors --data /tmp/seed/tokens.i32 --data-dtype i32 --steps 10 > $out/ch_$ch.log 2>&1
  python3 - $out/ch_$ch.log $ch <<'PY'
import re, statistics, sys
t = open(sys.argv[1]).read()
ms = [float(x) for x in re.findall(r"^step \d+: loss \S+ \(([0-9.]+) ms[,)]", t, re.M)]
print("NCCL_MAX_NCHANNELS=%s: median step %.1f ms over steps 3..10 (%d steps)" % (sys.argv[2], statistics.median(ms[2:]) if len(ms) > 3 else -1, len(ms)))
PY
done 2>&1 | tee $out/channels.log
