/* Devices: the one vtable every runtime backend sits behind, and the one
 * way to create them (mlc_device_create, over the registry of drivers).
 *
 * A session (session*.c) is written once against this interface: memory on
 * the device, copies to and from it, kernels resolved by symbol, launches
 * in plan order, and per-step timing when profiling.  Addresses are device
 * addresses as 64-bit integers; on the CPU they are host pointers and the
 * copies are memcpy (or nothing, when both sides are the same memory).
 */
#ifndef MLC_DEVICE_H
#define MLC_DEVICE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "runtime/alloc.h"
#include "runtime/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mlc_device mlc_device;

/* A GPU kernel's launch, as the runtime knows it (the CUDA launch table and
 * cuFuncGetAttribute at load).  For a kernel of several launches, the main
 * one: the most registers a thread, then the most shared memory a block
 * (runtime/cuda/device.c, cu_kernel_launch). */
typedef struct {
  uint32_t grid, block;  /* blocks, threads per block; 0: unknown (CPU) */
  uint32_t smem;         /* shared memory per block, dynamic + static, bytes */
  uint32_t regs;         /* registers per thread; 0: unknown */
  uint32_t nlaunch;      /* launches per call */
} mlc_profile_launch;

typedef struct {
  const char *name;            /* "cpu", "cuda" */
  bool host_memory;            /* device addresses are host pointers */
  /* A kernel may take any host pointer as an argument, not only addresses
   * alloc handed out, so that a caller's buffer can stand in for a value of
   * the arena (mlc_session_bind_input): the CPU's.  Metal's addresses are
   * host pointers too, but a launch must find each one in a buffer of its
   * own; CUDA and Vulkan take device memory only. */
  bool host_pointers;
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
  /* A caller's buffer on this device (a torch tensor's data pointer:
   * runtime/tensor.h's MLC_MEMORY_DEVICE), `bytes` long at `ext`:
   * check_external says whether it is memory of this device, which its
   * driver numbers `ordinal`, from its first byte to its last;
   * copy_external copies it device to device to or from the session's
   * memory at `addr` (in: from ext to addr; else from addr to ext), after
   * the work queued before it on the device (the caller's too: torch's
   * streams share the context), done when it returns.  NULL where the device
   * has no memory of its own (the CPU) or takes no caller's buffers (Vulkan,
   * Metal). */
  mlc_status (*check_external)(mlc_device *d, uint64_t ext, uint64_t bytes, int ordinal);
  mlc_status (*copy_external)(mlc_device *d, uint64_t addr, uint64_t ext, uint64_t bytes, bool in);
  /* Recorded launches (CUDA graphs), NULL where the device has none: after
   * record_begin the launches are recorded instead of run, until record_end
   * hands back the recording; replay queues it (as the launches would be,
   * in order); record_free drops one.  record_begin may refuse with
   * MLC_UNIMPLEMENTED (turned off): the session then launches as before.
   * The session records an entry that runs on one stream with no
   * collective and no timing (session.c's recordable) on its second run in
   * a row with the same arguments, and replays it while they stay. */
  mlc_status (*record_begin)(mlc_device *d);
  mlc_status (*record_end)(mlc_device *d, void **out);
  mlc_status (*replay)(mlc_device *d, void *rec);
  void (*record_free)(mlc_device *d, void *rec);
  /* A caller's buffer of this device's memory as a kernel argument in
   * place of the session's own (mlc_session_bind_input, from a tensor in
   * MLC_MEMORY_DEVICE_IN_PLACE memory): checks it as check_external does,
   * then waits for the work queued on the device before it (the caller's
   * streams too), so that a run queued after it reads what the caller
   * wrote.  NULL where kernels take only the device's own allocations
   * (Vulkan) or where device memory is host memory (the CPU, Metal). */
  mlc_status (*bind_external)(mlc_device *d, uint64_t ext, uint64_t bytes, int ordinal);
  /* Turns on or off emptying the caches before each timed launch, as
   * Nsight Compute does before each kernel it measures (CUDA's:
   * runtime/cuda/flush.h); NULL where a device cannot. */
  mlc_status (*flush_caches)(mlc_device *d, bool on);
  /* The size of the device's last-level cache in bytes (CUDA's L2), for
   * the profiler's estimate of what a kernel leaves in it; NULL or 0:
   * unknown. */
  uint64_t (*cache_bytes)(mlc_device *d);
} mlc_device_vt;

struct mlc_device {
  const mlc_device_vt *vt;
  mlc_allocator a;
  uint64_t allocated; /* bytes alloc has handed out so far (a session frees nothing until it ends) */
};

/* Drivers and devices, after IREE's HAL: a driver is a backend as this
 * libmlcrt has it ("cpu", "cuda", "vulkan", "metal"), a device one of the
 * things it runs on, numbered from 0.  One registry (runtime/registry.c)
 * holds every driver, built into this library or not, so that a name it
 * lacks gets a message that says why and what it has instead.
 *
 * A device runs the kernels it is created with, which come in its driver's
 * own form (the kind below), as codegen emitted them:
 *   MLC_CODE_CPU     mlc_cpu_code     (runtime/cpu/device.h)
 *   MLC_CODE_CUDA    mlc_cuda_code    (runtime/cuda/device.h)
 *   MLC_CODE_VULKAN  mlc_vk_code      (runtime/vulkan/device.h)
 *   MLC_CODE_METAL   mlc_metal_code   (runtime/metal/device.h)
 * CUDA's and Vulkan's code may instead name a plan (`plan`), whose
 * executables section holds the kernels (runtime/plan.h).
 * The ordinal of mlc_device_create wins over the code's own `ordinal`.
 *
 * The usual way, and the one that needs nothing of a backend's own: the
 * options' `plan` alone (code NULL, code_kind MLC_CODE_NONE), and the driver
 * NULL to take the one that runs the plan's executables
 * (mlc_driver_for_plan).  How mlc run and generated artifacts create their
 * devices, and all a program that loads a plan file needs (docs/runtime.md). */
typedef enum { MLC_CODE_NONE, MLC_CODE_CPU, MLC_CODE_CUDA, MLC_CODE_VULKAN, MLC_CODE_METAL } mlc_code_kind;

struct mlc_plan;

typedef struct {
  mlc_allocator allocator; /* {0}: malloc */
  mlc_code_kind code_kind; /* must be the driver's; MLC_CODE_NONE with code NULL */
  const void *code;        /* NULL: no kernels (memory and copies only; CUDA refuses), or the plan's */
  /* With code NULL: the plan whose executables section holds the kernels,
   * which must outlive the device.  A plan whose kernels are native code
   * (the CPU's, linked into a program) cannot make a device alone: that
   * takes an mlc_cpu_code with the program's lookup. */
  const struct mlc_plan *plan;
  FILE *progress; /* the driver's notes (compiling CUDA source, which Vulkan device); NULL: quiet */
} mlc_device_options;

/* One device as its driver enumerates it. */
typedef struct {
  int ordinal;       /* what mlc_device_create (and --device N) takes */
  char name[256];    /* "NVIDIA H200", "llvmpipe (LLVM 15.0.6, 256 bits)", the CPU's model name */
  uint64_t memory;   /* bytes: device memory (Vulkan: device-local), the host's RAM for the CPU; 0: unknown */
  char detail[512];  /* driver-specific, one line: the CPU's x86-64 level and features, a GPU's
                        compute capability and SMs, a Vulkan device's kind, API, driver and
                        cooperative-matrix shapes */
} mlc_device_info;

typedef struct {
  const char *name;      /* "cpu", "cuda", "vulkan", "metal" */
  const char *alias;     /* another name it answers to (the compiler target "spirv"); NULL: none */
  const char *what;      /* one line: what it runs on */
  mlc_code_kind code_kind;
  /* The executable formats of a plan it runs (runtime/plan.h), NULL-ended. */
  const char *const *formats;
  /* NULL when this libmlcrt has the driver; else why not and how to build it. */
  const char *not_built;
  /* NULL when not built.  create: `code` is never NULL here (the registry
   * passes a zeroed struct of the driver's kind).  enumerate: writes at most
   * cap devices to out, sets *out_n to how many there are. */
  mlc_status (*create)(int ordinal, const void *code, mlc_allocator a, mlc_device **out);
  /* Writes into *code (its kind's struct, zeroed) the code that runs
   * `plan`'s executables; NULL, or an error saying why not (native code). */
  mlc_status (*plan_code)(const struct mlc_plan *plan, FILE *progress, void *code);
  mlc_status (*enumerate)(mlc_device_info *out, uint32_t cap, uint32_t *out_n);
} mlc_driver;

/* Every driver of the registry, built or not, in a fixed order. */
const mlc_driver *mlc_drivers(uint32_t *out_n);
/* The driver called `name` (or its alias).  MLC_INVALID_ARGUMENT for a name
 * no driver has, MLC_UNIMPLEMENTED for one this libmlcrt was built without;
 * both messages list the drivers it has. */
MLC_MUST_USE mlc_status mlc_driver_find(const char *name, const mlc_driver **out);
/* The driver that runs `plan`'s kernels, from its executables' formats:
 * MLC_INVALID_ARGUMENT for a plan without code or with the formats of two
 * drivers, MLC_UNIMPLEMENTED for a driver this libmlcrt was built without
 * (or a format none has). */
MLC_MUST_USE mlc_status mlc_driver_for_plan(const struct mlc_plan *plan, const mlc_driver **out);
/* Device `ordinal` of driver `driver`, running the kernels in `o` (NULL: no
 * kernels, malloc): its code, or else its plan's.  `driver` NULL: the
 * plan's (mlc_driver_for_plan; o->plan must be set).  The errors of
 * mlc_driver_find, MLC_INVALID_ARGUMENT when the code is not of the
 * driver's kind or the plan's executables are not its own, then the
 * driver's (MLC_UNIMPLEMENTED without its system library, MLC_NOT_FOUND for
 * an ordinal past its devices). */
MLC_MUST_USE mlc_status mlc_device_create(const char *driver, int ordinal, const mlc_device_options *o,
                                          mlc_device **out);
/* The devices of `driver`: at most cap into out, their number in *out_n. */
MLC_MUST_USE mlc_status mlc_device_enumerate(const char *driver, mlc_device_info *out, uint32_t cap, uint32_t *out_n);

#ifdef __cplusplus
}
#endif

#endif
