#!/usr/bin/env bash
# On two GPUs: a rank that dies must not hang the other.  Two ranks started
# by hand (the environment torchrun would set, without torchrun's agent,
# which would itself kill the survivor), the small MiniLLM training with
# --target cuda-nccl; rank 1 is killed at step 3; rank 0's watchdog must
# abort NCCL and exit non-zero with a message within 60 s
# (MLC_NCCL_TIMEOUT=20).  Needs build-gpu/ as bench/fsdp_h200x2.sh says.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/gpu/env.sh /tmp/mlc-kill
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29611 MLC_NCCL_TIMEOUT=20
mlc=$PWD/build-gpu/mlc
args=(train examples/minillm.mdl --target cuda-nccl vocab=512 dim=128 layers=2 heads=4 batch=2 seq=64 --steps 100000)
$mlc compile examples/minillm.mdl --target cuda-nccl -o /tmp/k vocab=512 dim=128 layers=2 heads=4 batch=2 seq=64 >/dev/null 2>&1
RANK=0 LOCAL_RANK=0 $mlc "${args[@]}" > $out/rank0.log 2>&1 & r0=$!
RANK=1 LOCAL_RANK=1 $mlc "${args[@]}" > $out/rank1.log 2>&1 & r1=$!
for _ in $(seq 600); do grep -q "^step 3:" $out/rank0.log && break; sleep 0.1; done
grep -q "^step 3:" $out/rank0.log || { echo "FAIL: never reached step 3"; tail $out/rank0.log $out/rank1.log; kill -9 $r0 $r1; exit 1; }
t0=$(date +%s); kill -9 $r1
for _ in $(seq 700); do kill -0 $r0 2>/dev/null || break; sleep 0.1; done
if kill -0 $r0 2>/dev/null; then echo "FAIL: rank 0 still runs 70 s after rank 1 died"; kill -9 $r0; tail -3 $out/rank0.log; exit 1; fi
wait $r0; rc=$?
echo "rank 1 killed; rank 0 exited after $(( $(date +%s) - t0 )) s with status $rc; its last lines:"
tail -3 $out/rank0.log | sed 's/^/  | /'
[ $rc -ne 0 ] && echo PASS || { echo "FAIL: status 0"; exit 1; }
