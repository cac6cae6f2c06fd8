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

MLC_MUST_USE mlc_status mlc_cpu_device_create(mlc_symbol_lookup lookup, void *ctx, int threads, mlc_allocator a,
                                              mlc_device **out);

#ifdef __cplusplus
}
#endif

#endif
