#!/usr/bin/env bash
# On the GPU machine (device tool): builds the runtime's CUDA driver loader
# and its test with the plain C compiler (no CMake needed there) and runs it:
# it lists the GPUs, launches a PTX kernel through the dlopen'ed driver API
# and checks the result.  Logs go to $OUT when set.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp}
cc -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Werror -I. -o /tmp/test_cuda_driver \
  runtime/cuda/tests/test_cuda_driver.c runtime/cuda/driver.c runtime/status.c -ldl
nvidia-smi --query-gpu=name,driver_version --format=csv | tee "$out/cuda_driver.log"
/tmp/test_cuda_driver 2>&1 | tee -a "$out/cuda_driver.log"
