/* A test-only device (runtime/device.h) that runs MSL on the CPU: the
 * .metal file mlc emitted, compiled as C++ against tests/metal/msl_emu.hpp
 * into a shared library, whose <kernel>_emu entry points run each kernel
 * over its grid with real threads and barriers.  Memory is host memory (a
 * CPU device underneath), as on Apple's unified-memory GPUs. */
#ifndef MLC_TESTS_METAL_EMU_DEVICE_H
#define MLC_TESTS_METAL_EMU_DEVICE_H

#include "runtime/cuda/kernel.h"
#include "runtime/device.h"

/* Compiles `metal` (a .metal file) into `so` with $MLC_EMU_CXX (default
 * clang++), -Wall -Wextra -Werror; the compiler's output goes to `log`.  With
 * $MLC_EMU_PCH (a file name) the header is precompiled there once and reused. */
MLC_MUST_USE mlc_status mlc_emu_compile(const char *metal, const char *so, const char *header, const char *log);
MLC_MUST_USE mlc_status mlc_emu_device_create(const char *so, const mlc_cuda_kernel *kernels, uint32_t nkernels,
                                              mlc_allocator a, mlc_device **out);

#endif
