/* Compiling CUDA C at run time with NVRTC, and mlc's cache of compiled
 * images.
 *
 * NVRTC is loaded with dlopen (libnvrtc.so.13, .12, or from $CUDA_HOME /
 * /usr/local/cuda), so nothing links it at build time.  Images are cached
 * under ~/.cache/mlc/cuda/ (see mlc_cache_path), keyed by the xxHash64 of
 * the source, the architecture and the options; a cached image is used as
 * it is, and a new one is written atomically.
 */
#ifndef MLC_CUDA_COMPILE_H
#define MLC_CUDA_COMPILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "runtime/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The cache file for a key and suffix ("cubin", "fatbin"), or false when
 * there is no home directory. */
bool mlc_cuda_cache_file(char *buf, size_t n, uint64_t key, const char *suffix);

/* Compiles `source` for compute capability major.minor (sm_90 becomes
 * sm_90a) into a cubin, or takes it from the cache.  *out is malloc'ed. */
MLC_MUST_USE mlc_status mlc_cuda_compile_nvrtc(const char *source, int major, int minor, FILE *progress, void **out,
                                               size_t *out_n);

#ifdef __cplusplus
}
#endif

#endif
