#!/usr/bin/env bash
# A rank started by torchrun whose MASTER_ADDR does not resolve must say so
# at once, before compiling or touching a GPU (no GPU is needed here), and
# exit 1.  Usage: bad_master.sh MLC MODEL.mdl
set -uo pipefail
mlc=$1 model=$2
t0=$(date +%s)
err=$(RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 MASTER_ADDR=no-such-host.invalid MASTER_PORT=29555 timeout 60 \
      "$mlc" train "$model" --target cuda-nccl dim=64 layers=2 heads=4 vocab=256 batch=2 seq=32 --steps 1 2>&1)
rc=$?
echo "$err" | sed 's/^/  | /'
[ $rc -eq 1 ] || { echo "FAIL: exit status $rc, expected 1"; exit 1; }
echo "$err" | grep -q "MASTER_ADDR=no-such-host.invalid: cannot resolve it" || { echo "FAIL: no clear message"; exit 1; }
[ $(( $(date +%s) - t0 )) -lt 30 ] || { echo "FAIL: took more than 30 s"; exit 1; }
echo PASS
