/* The CPU device (runtime/device.h): kernels of runtime/cpu/kernel.h,
 * found by name through `lookup`, run over a thread pool of `threads`
 * workers (0: one per online CPU). */
#ifndef MLC_CPU_DEVICE_H
#define MLC_CPU_DEVICE_H

#include "runtime/device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Returns the address of kernel `symbol`, or NULL if there is none. */
typedef void *(*mlc_symbol_lookup)(void *ctx, const char *symbol);

/* The CPU's code for mlc_device_create (MLC_CODE_CPU). */
typedef struct {
  mlc_symbol_lookup lookup; /* NULL: no kernels */
  void *lookup_ctx;
  int threads;              /* 0: one per online CPU */
} mlc_cpu_code;

MLC_MUST_USE mlc_status mlc_cpu_device_create(mlc_symbol_lookup lookup, void *ctx, int threads, mlc_allocator a,
                                              mlc_device **out);
/* The one CPU device (ordinal 0): its model name, the host's memory, and in
 * `detail` its x86-64 level, features and online CPUs. */
MLC_MUST_USE mlc_status mlc_cpu_enumerate(mlc_device_info *out, uint32_t cap, uint32_t *out_n);

#ifdef __cplusplus
}
#endif

#endif
