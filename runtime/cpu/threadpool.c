/* The CPU thread pool (see threadpool.h).
 *
 * A job is published under the mutex: its fields are set, `open` is raised
 * and `gen` is bumped (release).  Workers notice by spinning on `gen` for a
 * short while, then by sleeping on `wake`.  A worker joins the job only if
 * it is still open, counting itself in `active`; items are claimed with an
 * atomic fetch-add on `next` and counted in `done` when finished.
 *
 * The caller works on the job too, and the job is over when every item is
 * done, not when every worker has looked at it: a worker that is slow to be
 * scheduled (the machine is busy with something else) finds the job closed
 * and goes back to sleep, instead of holding up every kernel.  The caller
 * then closes the job and waits only for the workers that joined it, since
 * they read its fields.
 */
#include "runtime/cpu/threadpool.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "runtime/cpu/kernel.h"

/* Spin iterations before sleeping (a pause is 10 to 140 cycles): enough to
 * bridge the gap between two back-to-back kernels, not enough to burn a
 * core when idle. */
#define SPIN_ITERS 4000

struct mlc_cpu_pool {
  mlc_allocator alloc;
  int nthreads; /* the caller plus nworkers */
  int nworkers;
  pthread_t *workers; /* [nworkers] */
  pthread_mutex_t mu;
  pthread_cond_t wake, idle;
  bool sync_ok; /* mu, wake and idle were initialised */
  /* The current job; written by the caller, under mu, while no worker is
   * active. */
  mlc_cpu_task_fn fn;
  void *ctx;
  int64_t n, chunk;
  bool open;   /* under mu: workers may still join */
  int active;  /* under mu: workers inside the job */
  bool stop;   /* under mu */
  atomic_int_fast64_t next; /* first item not yet claimed */
  atomic_int_fast64_t done; /* items finished */
  atomic_uint_fast64_t gen; /* job counter */
};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

static void run_chunks(mlc_cpu_pool *p) {
  for (;;) {
    int64_t s = atomic_fetch_add_explicit(&p->next, p->chunk, memory_order_relaxed);
    if (s >= p->n) break;
    int64_t e = s + p->chunk < p->n ? s + p->chunk : p->n;
    p->fn(p->ctx, s, e);
    if (atomic_fetch_add_explicit(&p->done, e - s, memory_order_acq_rel) + (e - s) == p->n) {
      pthread_mutex_lock(&p->mu); /* the caller may be asleep waiting for this */
      pthread_cond_broadcast(&p->idle);
      pthread_mutex_unlock(&p->mu);
    }
  }
}

static void *worker_main(void *arg) {
  mlc_cpu_pool *p = arg;
  uint_fast64_t seen = 0;
  for (;;) {
    for (int i = 0; i < SPIN_ITERS && atomic_load_explicit(&p->gen, memory_order_acquire) == seen; i++) cpu_relax();
    pthread_mutex_lock(&p->mu);
    while (atomic_load_explicit(&p->gen, memory_order_acquire) == seen && !p->stop) pthread_cond_wait(&p->wake, &p->mu);
    if (p->stop) {
      pthread_mutex_unlock(&p->mu);
      break;
    }
    seen = atomic_load_explicit(&p->gen, memory_order_acquire);
    bool join = p->open;
    if (join) p->active++;
    pthread_mutex_unlock(&p->mu);
    if (!join) continue; /* woke too late: the caller finished it */
    run_chunks(p);
    pthread_mutex_lock(&p->mu);
    if (--p->active == 0) pthread_cond_broadcast(&p->idle);
    pthread_mutex_unlock(&p->mu);
  }
  return NULL;
}

static void stop_workers(mlc_cpu_pool *p, int started) {
  pthread_mutex_lock(&p->mu);
  p->stop = true;
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->mu);
  for (int i = 0; i < started; i++) pthread_join(p->workers[i], NULL);
}

mlc_status mlc_cpu_pool_create(int nthreads, mlc_allocator a, mlc_cpu_pool **out_pool) {
  *out_pool = NULL;
  if (nthreads < 0 || nthreads > 4096)
    return mlc_status_make(MLC_INVALID_ARGUMENT, "thread pool: %d threads is out of range (0 to 4096)", nthreads);
  if (nthreads == 0) {
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    nthreads = c > 0 && c <= 4096 ? (int)c : 1;
  }
  mlc_cpu_pool *p = mlc_allocator_alloc(a, sizeof *p);
  if (!p) return mlc_status_make(MLC_OUT_OF_MEMORY, "thread pool: out of memory");
  memset(p, 0, sizeof *p);
  p->alloc = a;
  p->nthreads = nthreads;
  p->nworkers = nthreads - 1;
  atomic_init(&p->next, 0);
  atomic_init(&p->done, 0);
  atomic_init(&p->gen, 0);
  if (p->nworkers == 0) {
    *out_pool = p;
    return NULL;
  }
  p->workers = mlc_allocator_alloc_array(a, (size_t)p->nworkers, sizeof *p->workers);
  if (!p->workers) {
    mlc_allocator_free(a, p);
    return mlc_status_make(MLC_OUT_OF_MEMORY, "thread pool: out of memory");
  }
  if (pthread_mutex_init(&p->mu, NULL)) goto sync_fail;
  if (pthread_cond_init(&p->wake, NULL)) { pthread_mutex_destroy(&p->mu); goto sync_fail; }
  if (pthread_cond_init(&p->idle, NULL)) { pthread_cond_destroy(&p->wake); pthread_mutex_destroy(&p->mu); goto sync_fail; }
  p->sync_ok = true;

  pthread_attr_t attr;
  int rc = pthread_attr_init(&attr);
  if (!rc) rc = pthread_attr_setstacksize(&attr, MLC_CPU_STACK_BYTES);
  if (rc) {
    mlc_cpu_pool_destroy(p);
    return mlc_status_make(MLC_INTERNAL, "thread pool: pthread_attr: %s", strerror(rc));
  }
  for (int i = 0; i < p->nworkers; i++) {
    rc = pthread_create(&p->workers[i], &attr, worker_main, p);
    if (rc) {
      pthread_attr_destroy(&attr);
      stop_workers(p, i);
      p->nworkers = 0; /* joined already */
      mlc_cpu_pool_destroy(p);
      return mlc_status_make(rc == EAGAIN ? MLC_OUT_OF_MEMORY : MLC_INTERNAL,
                             "thread pool: cannot start thread %d of %d: %s", i + 1, nthreads, strerror(rc));
    }
  }
  pthread_attr_destroy(&attr);
  *out_pool = p;
  return NULL;

sync_fail:
  mlc_allocator_free(a, p->workers);
  mlc_allocator_free(a, p);
  return mlc_status_make(MLC_INTERNAL, "thread pool: cannot create a mutex or condition variable");
}

void mlc_cpu_pool_destroy(mlc_cpu_pool *p) {
  if (!p) return;
  if (p->sync_ok) {
    stop_workers(p, p->nworkers);
    pthread_cond_destroy(&p->idle);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->mu);
  }
  mlc_allocator_free(p->alloc, p->workers);
  mlc_allocator_free(p->alloc, p);
}

int mlc_cpu_pool_threads(const mlc_cpu_pool *p) { return p->nthreads; }

void mlc_cpu_pool_parallel_for(mlc_cpu_pool *p, int64_t n, int64_t chunk, mlc_cpu_task_fn fn, void *ctx) {
  if (n <= 0) return;
  if (chunk <= 0) {
    chunk = n / ((int64_t)p->nthreads * 8);
    if (chunk < 1) chunk = 1;
  }
  if (p->nworkers == 0 || n <= chunk) {
    fn(ctx, 0, n);
    return;
  }
  pthread_mutex_lock(&p->mu);
  p->fn = fn;
  p->ctx = ctx;
  p->n = n;
  p->chunk = chunk;
  atomic_store_explicit(&p->next, 0, memory_order_relaxed);
  atomic_store_explicit(&p->done, 0, memory_order_relaxed);
  p->open = true;
  atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->mu);

  run_chunks(p);

  for (int i = 0; i < SPIN_ITERS && atomic_load_explicit(&p->done, memory_order_acquire) < n; i++) cpu_relax();
  pthread_mutex_lock(&p->mu);
  while (atomic_load_explicit(&p->done, memory_order_acquire) < n) pthread_cond_wait(&p->idle, &p->mu);
  p->open = false;
  while (p->active > 0) pthread_cond_wait(&p->idle, &p->mu);
  pthread_mutex_unlock(&p->mu);
}
