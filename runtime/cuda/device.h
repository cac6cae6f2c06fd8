/* The CUDA device (runtime/device.h) on the driver API: one context (the
 * device's primary one), one stream, one module holding every kernel of the
 * plan, launches as runtime/cuda/kernel.h describes, CUDA events around
 * each step when profiling.
 *
 * The module comes from a compiled image (a fatbin, cubin or PTX text that
 * cuModuleLoadData takes) or, without one, from the CUDA C source, which is
 * compiled with NVRTC for the device's architecture on first use and cached
 * (runtime/cuda/compile.h).
 */
#ifndef MLC_CUDA_DEVICE_H
#define MLC_CUDA_DEVICE_H

#include <stddef.h>
#include <stdio.h>

#include "runtime/cuda/kernel.h"
#include "runtime/device.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  int ordinal;                    /* which GPU */
  const void *image;              /* fatbin/cubin/PTX, or NULL */
  size_t image_size;
  const char *source;             /* CUDA C, compiled with NVRTC when image is NULL */
  const mlc_cuda_kernel *kernels; /* the launch table */
  uint32_t nkernels;
  FILE *progress;                 /* NULL: quiet */
  /* The plan whose executables section holds the kernels (a "cuda-fatbin"
   * or "cuda-source" executable and its kernels' dispatch records): then
   * image, source and kernels above are unused.  It must outlive the
   * device. */
  const struct mlc_plan *plan;
} mlc_cuda_code;

MLC_MUST_USE mlc_status mlc_cuda_device_create(const mlc_cuda_code *code, mlc_allocator a, mlc_device **out);
/* The GPUs the driver API sees (runtime/device.h): MLC_UNIMPLEMENTED
 * without libcuda.so.1. */
MLC_MUST_USE mlc_status mlc_cuda_enumerate(mlc_device_info *out, uint32_t cap, uint32_t *out_n);

#ifdef __cplusplus
}
#endif

#endif
