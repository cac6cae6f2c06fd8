/* The Metal device (runtime/device.h), for Apple GPUs: one MTLDevice, one
 * command queue, one compute pipeline per kernel function, buffers in
 * MTLResourceStorageModeShared (unified memory: the CPU and the GPU use the
 * same bytes, so nothing is staged), GPU timestamps per step for the
 * profile.  The kernels are MSL from codegen (mlc compile --target metal),
 * with the launch table of runtime/cuda/kernel.h (1-D grids of
 * threadgroups, `block` threads each, `smem` bytes of threadgroup memory).
 *
 * It is built only on Apple platforms (MLC_BACKEND_METAL, runtime/metal/
 * device.m).  Elsewhere mlc_metal_device_create says so.  No part of it has
 * run on Apple hardware yet: see README.md.
 */
#ifndef MLC_METAL_DEVICE_H
#define MLC_METAL_DEVICE_H

#include <stddef.h>
#include <stdio.h>

#include "runtime/cuda/kernel.h"
#include "runtime/device.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  const char *source;             /* the MSL, compiled with newLibraryWithSource when metallib is NULL */
  const void *metallib;           /* a compiled library (xcrun metal + metallib), or NULL */
  size_t metallib_size;
  const mlc_cuda_kernel *kernels; /* the launch table */
  uint32_t nkernels;
  FILE *progress;
} mlc_metal_code;

MLC_MUST_USE mlc_status mlc_metal_device_create(const mlc_metal_code *code, mlc_allocator a, mlc_device **out);

#ifdef __cplusplus
}
#endif

#endif
