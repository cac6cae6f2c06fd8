/* A small pthread pool for the CPU backend: N threads, one parallel_for.
 *
 * The pool is the caller plus N-1 worker threads.  parallel_for(n, chunk)
 * cuts [0, n) into chunks of `chunk` items, and every thread (the caller
 * included) takes the next chunk from a shared counter until none is left,
 * so uneven items balance themselves.  The call returns when all chunks are
 * done.  Workers spin for a few microseconds after a job before they sleep,
 * because a model's kernels come one after another and waking a sleeping
 * thread costs more than a small kernel.
 *
 * No global state: everything lives in the pool object, which comes from the
 * caller's allocator.  One parallel_for at a time per pool; the pool is not
 * meant to be driven from several threads at once.
 */
#ifndef MLC_CPU_THREADPOOL_H
#define MLC_CPU_THREADPOOL_H

#include <stdint.h>

#include "runtime/alloc.h"
#include "runtime/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mlc_cpu_pool mlc_cpu_pool;

/* Work on items [begin, end). */
typedef void (*mlc_cpu_task_fn)(void *ctx, int64_t begin, int64_t end);

/* nthreads counts the caller: 1 makes a pool that runs everything inline.
 * 0 means one per online CPU. */
MLC_MUST_USE mlc_status mlc_cpu_pool_create(int nthreads, mlc_allocator a, mlc_cpu_pool **out_pool);
void mlc_cpu_pool_destroy(mlc_cpu_pool *pool);
int mlc_cpu_pool_threads(const mlc_cpu_pool *pool);

/* Runs fn over [0, n) in chunks of `chunk` items (0: about 8 chunks per
 * thread).  Returns when every item is done. */
void mlc_cpu_pool_parallel_for(mlc_cpu_pool *pool, int64_t n, int64_t chunk, mlc_cpu_task_fn fn, void *ctx);

#ifdef __cplusplus
}
#endif

#endif
