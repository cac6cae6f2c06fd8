/* Devices: the one vtable every runtime backend sits behind.
 *
 * A session (session.c) is written once against this interface: memory on
 * the device, copies to and from it, kernels resolved by symbol, launches
 * in plan order, and per-step timing when profiling.  Addresses are device
 * addresses as 64-bit integers; on the CPU they are host pointers and the
 * copies are memcpy (or nothing, when both sides are the same memory).
 */
#ifndef MLC_DEVICE_H
#define MLC_DEVICE_H

#include <stdbool.h>
#include <stdint.h>

#include "runtime/alloc.h"
#include "runtime/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mlc_device mlc_device;

/* A GPU kernel's launch, as the runtime knows it (the CUDA launch table and
 * cuFuncGetAttribute at load).  For a kernel of several launches, the one
 * with the most threads. */
typedef struct {
  uint32_t grid, block;  /* blocks, threads per block; 0: unknown (CPU) */
  uint32_t smem;         /* shared memory per block, dynamic + static, bytes */
  uint32_t regs;         /* registers per thread; 0: unknown */
  uint32_t nlaunch;      /* launches per call */
} mlc_profile_launch;

typedef struct {
  const char *name;            /* "cpu", "cuda" */
  bool host_memory;            /* device addresses are host pointers */
  void (*destroy)(mlc_device *d);
  mlc_status (*alloc)(mlc_device *d, uint64_t bytes, uint64_t *out_addr); /* zeroed */
  void (*free)(mlc_device *d, uint64_t addr);
  mlc_status (*write)(mlc_device *d, uint64_t dst, const void *src, uint64_t bytes);
  mlc_status (*read)(mlc_device *d, void *dst, uint64_t src, uint64_t bytes);
  /* Resolves the kernel `symbol` into an opaque handle. */
  mlc_status (*resolve)(mlc_device *d, const char *symbol, void **out_kernel);
  /* Queues one step: kernel over work_items with the argument addresses.
   * With timing, `slot` names where its time goes (see finish). */
  mlc_status (*launch)(mlc_device *d, void *kernel, uint64_t work_items, const uint64_t *args, uint32_t nargs,
                       bool timing, uint32_t slot);
  /* Waits for everything queued; for each slot timed since the last
   * finish, writes its seconds to seconds[slot] and its start (seconds
   * since the device was created, on the device's clock) to start[slot]. */
  mlc_status (*finish)(mlc_device *d, uint32_t nslots, double *seconds, double *start);
  /* Ceilings for the profile: peak FLOP/s of the fastest dtype, bytes/s,
   * and a one-line description of the device. */
  void (*describe)(mlc_device *d, char *buf, size_t n);
  /* Named ranges around a run and each step, for the vendor's profilers
   * (NVTX on CUDA: nsys and ncu --nvtx show mlc's names); NULL if none. */
  void (*range_push)(mlc_device *d, const char *name);
  void (*range_pop)(mlc_device *d);
  /* The queue collectives are enqueued on (CUDA: the CUstream), or NULL
   * where launches finish before they return (the CPU). */
  void *(*stream)(mlc_device *d);
  /* Brackets work the session queues itself (a collective) in timing slot
   * `slot`, as launch does for a kernel; NULL: such steps go untimed. */
  mlc_status (*mark)(mlc_device *d, uint32_t slot, bool end);
  /* Streams (the plan's): what follows goes to `stream`, after the listed
   * earlier steps (each of which was signalled); signal marks the point a
   * later step may wait for.  NULL on devices that run steps in order. */
  mlc_status (*order)(mlc_device *d, uint32_t stream, const uint32_t *wait, uint32_t nwait);
  mlc_status (*signal)(mlc_device *d, uint32_t step);
  /* The launch of a resolved kernel as the profiler judges it (grid,
   * block, shared memory, registers); NULL where there is none to know
   * (the CPU). */
  void (*kernel_launch)(mlc_device *d, void *kernel, mlc_profile_launch *out);
} mlc_device_vt;

struct mlc_device {
  const mlc_device_vt *vt;
  mlc_allocator a;
  uint64_t allocated; /* bytes alloc has handed out so far (a session frees nothing until it ends) */
};

#ifdef __cplusplus
}
#endif

#endif
