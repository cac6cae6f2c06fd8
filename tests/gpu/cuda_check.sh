#!/usr/bin/env bash
# On the GPU machine (device tool): the CUDA target's numerics against
# PyTorch.  Needs the CUDA-only build made here beforehand:
#   cmake -S . -B build-gpu -G Ninja -DMLC_BACKEND_CPU=OFF -DBUILD_TESTING=OFF && cmake --build build-gpu
#   mkdir -p build-gpu/lib && cp -L /lib/x86_64-linux-gnu/{libxxhash.so.0,libcjson.so.1} build-gpu/lib/
# and carried: build-gpu/mlc, build-gpu/codegen/cuda/mlc_opcheck, build-gpu/lib.
# Every op case of opcheck.py against PyTorch (float64 references), the
# small MiniLLM's logits, compute-sanitizer on the small MiniLLM's train
# step, and a few training steps.  Logs go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/gpu/env.sh /tmp/mlc-gpu
opcheck=build-gpu/codegen/cuda/mlc_opcheck
small="vocab=512 dim=128 layers=2 heads=4 batch=2 seq=64"
rc=0
{ echo "# $(date -u +%F) commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$out/env.log"
python3 tests/ops/opcheck.py ops --target cuda --jobs 16 --opcheck $opcheck --work /tmp/ops 2>&1 | tee "$out/ops.log" || rc=1
python3 tests/ops/opcheck.py minillm --target cuda --opcheck $opcheck --model examples/minillm.mdl --work /tmp/mini 2>&1 | tee "$out/minillm.log" || rc=1
compute-sanitizer --tool memcheck --error-exitcode 9 $opcheck examples/minillm.mdl /tmp/san --target cuda --func train $small \
  --range tokens=0,512 --range targets=0,512 > "$out/sanitizer.log" 2>&1 || rc=1
tail -5 "$out/sanitizer.log"
build-gpu/mlc train examples/minillm.mdl --target cuda --steps 5 $small 2>&1 | tee "$out/train_small.log" || rc=1
exit $rc
