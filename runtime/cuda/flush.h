/* The cache flush of a profiled step on CUDA (runtime/cuda/device.c), on
 * request (`mlc profile --flush-l2`, on with --ncu): before each timed
 * kernel, a kernel reads a buffer twice the L2's size, as Nsight Compute
 * empties the caches before each kernel it measures (--cache-control all).
 * Reads, so that the lines left behind are clean and the timed kernel pays
 * no write-backs of them.  The flush goes on the stream the timed step
 * runs on, once a step: a step of the other stream may overlap it, and a
 * step of several launches is flushed before its first only (ncu flushes
 * before each launch).  The kernel is PTX here, compiled by the driver
 * when first used; it is not named mlc_*, so `ncu -k regex:^mlc_` skips it.
 *
 * (A kernel queued right after each timed one to count SM cycles against
 * %globaltimer was tried as the clock a kernel ran at, on an H100 on
 * 2026-12-06: about 1830 MHz after the MiniLLM's GEMMs, where ncu read
 * 1575-1650 during them.  The GPU's power limit lowers the clock under a
 * tensor-core kernel and lifts it within microseconds of its end, so the
 * clock after a kernel is not the clock during it.) */
#ifndef MLC_CUDA_FLUSH_H
#define MLC_CUDA_FLUSH_H

#include <stdbool.h>
#include <stdint.h>

#include "runtime/cuda/driver.h"

typedef struct {
  CUmodule mod;   /* 0: not loaded yet */
  CUfunction fn;
  CUdeviceptr buf; /* the buffer (2 x L2), then a 16-byte sink */
  uint64_t bytes;
  bool on;
  int sms, l2_bytes; /* the device's, set by its creator */
} mlc_cuda_flush;

/* On or off; loads the kernel and allocates the buffer when first on. */
MLC_MUST_USE mlc_status mlc_cuda_flush_set(const mlc_cuda_driver *drv, mlc_cuda_flush *f, bool on);
/* Queues the flush on `stream` when on. */
MLC_MUST_USE mlc_status mlc_cuda_flush_queue(const mlc_cuda_driver *drv, const mlc_cuda_flush *f, CUstream stream);
void mlc_cuda_flush_free(const mlc_cuda_driver *drv, mlc_cuda_flush *f);

#endif
