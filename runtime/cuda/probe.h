/* What the CUDA device adds to a profiled step (runtime/cuda/device.c):
 *
 * - the SM clock each timed kernel ran at: right after the kernel, in its
 *   stream, a one-thread kernel counts SM cycles (%clock64) between two
 *   ticks of the GPU's nanosecond timer (%globaltimer) at least 4 us apart.
 *   A GPU changes its clock over milliseconds, so this is the clock the
 *   kernel ended at.  The profiler takes a kernel's compute percentage of
 *   the unit's FLOPs per clock at that clock (runtime/profile.h), as
 *   Nsight Compute's per-cycle "% of peak" does.
 * - on request, the caches emptied before each timed kernel, as Nsight
 *   Compute does before each kernel it measures (--cache-control all): a
 *   kernel reads a buffer twice the L2's size (reads: the lines it leaves
 *   are clean, so the timed kernel pays no write-backs of them).
 *
 * Both kernels are PTX here, compiled by the driver when first used; they
 * are not named mlc_*, so `ncu -k regex:^mlc_` skips them. */
#ifndef MLC_CUDA_PROBE_H
#define MLC_CUDA_PROBE_H

#include <stdbool.h>
#include <stdint.h>

#include "runtime/cuda/driver.h"
#include "runtime/device.h"

enum { MLC_CUDA_PROBE_SLOTS = 65536 }; /* timed slots with a clock; steps past it go without */

typedef struct {
  CUmodule mod;           /* 0: not loaded yet */
  CUfunction clock_fn, flush_fn;
  CUdeviceptr clk;        /* [MLC_CUDA_PROBE_SLOTS][2] u64: cycles, nanoseconds */
  CUdeviceptr buf;        /* the flush's buffer, or 0 */
  uint64_t buf_bytes;
  bool flush;             /* flush before each timed launch */
  uint32_t hi;            /* 1 + the highest slot probed since the last read */
  uint8_t *probed;        /* [MLC_CUDA_PROBE_SLOTS] */
  double *mhz;            /* [MLC_CUDA_PROBE_SLOTS]: the last read's clocks, 0 where none */
  int sms, l2_bytes;
} mlc_cuda_probe;

/* Before a timed launch on `stream`: the flush, when asked for. */
MLC_MUST_USE mlc_status mlc_cuda_probe_before(const mlc_cuda_driver *drv, mlc_allocator a, mlc_cuda_probe *p, CUstream stream);
/* After a timed launch: the clock probe of `slot`. */
MLC_MUST_USE mlc_status mlc_cuda_probe_after(const mlc_cuda_driver *drv, mlc_allocator a, mlc_cuda_probe *p, CUstream stream,
                                             uint32_t slot);
/* After the device finished: the probes' clocks into p->mhz. */
MLC_MUST_USE mlc_status mlc_cuda_probe_read(const mlc_cuda_driver *drv, mlc_cuda_probe *p);
/* Flushing on or off; allocates the buffer (2 x L2) when turned on. */
MLC_MUST_USE mlc_status mlc_cuda_probe_set_flush(const mlc_cuda_driver *drv, mlc_allocator a, mlc_cuda_probe *p, bool on);
void mlc_cuda_probe_free(const mlc_cuda_driver *drv, mlc_allocator a, mlc_cuda_probe *p);

#endif
