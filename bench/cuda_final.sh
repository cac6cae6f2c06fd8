#!/usr/bin/env bash
# The whole GPU check of the CUDA target in one device call (the device's
# time is scarce): the op cases against PyTorch, compute-sanitizer on the
# small MiniLLM's train step, the full MiniLLM's gradients and 20 AdamW
# steps against PyTorch, nvcc/NVRTC/SASS checks with cuobjdump, then the
# benchmarks of bench/cuda_bench.sh with torch_baseline.py in the same call.
# Needs build-gpu/ as tests/gpu/cuda_check.sh says, plus build-gpu/test_nvrtc
# (cc -I. tests/cuda/test_nvrtc.c build-gpu/runtime/libmlcrt.a -lxxhash -lcjson -lm),
# and .yardstick/ (../shared/bench).  Logs go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
. tests/gpu/env.sh /tmp/mlc-final
opcheck=build-gpu/codegen/cuda/mlc_opcheck
rc=0
{
  echo "# bench/cuda_final.sh, $(date -u +%F), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 tests/ops/opcheck.py ops --target cuda --jobs 16 --opcheck $opcheck --work /tmp/ops || rc=1
  compute-sanitizer --tool memcheck --error-exitcode 9 $opcheck examples/minillm.mdl /tmp/san --target cuda --func train \
    vocab=512 dim=128 layers=2 heads=4 batch=2 seq=64 > /tmp/san.log 2>&1 || rc=1
  echo "compute-sanitizer (memcheck), small MiniLLM train step: $(grep 'ERROR SUMMARY' /tmp/san.log)"
  PATH=/usr/local/cuda/bin:$PATH tests/cuda/compile_examples.sh build-gpu/mlc build-gpu/test_nvrtc . /tmp/cc || rc=1
} > "$out/checks.log" 2>&1
cat "$out/checks.log"
python3 bench/cuda_minillm.py --skip-forward --mlc build-gpu/mlc --opcheck $opcheck --work /tmp/full > "$out/minillm.log" 2>&1 || rc=1
cat "$out/minillm.log"
rm -rf /tmp/full
bash bench/cuda_bench.sh
exit $rc
