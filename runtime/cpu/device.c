/* The CPU device (runtime/device.h): host memory, kernels of the CPU ABI
 * (runtime/cpu/kernel.h) found through a lookup function, each step run
 * over the thread pool, timed with the monotonic clock. */
#include "runtime/cpu/device.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime/cpu/features.h"
#include "runtime/cpu/kernel.h"
#include "runtime/cpu/threadpool.h"
#include "runtime/profile.h"

typedef struct {
  mlc_device base;
  mlc_symbol_lookup lookup;
  void *lookup_ctx;
  mlc_cpu_pool *pool;
  double origin;
  double *sec, *start; /* per slot, since the last finish */
  uint32_t cap;
} cpu_dev;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void cpu_destroy(mlc_device *base) {
  cpu_dev *d = (cpu_dev *)base;
  if (!d) return;
  mlc_cpu_pool_destroy(d->pool);
  mlc_allocator_free(base->a, d->sec);
  mlc_allocator_free(base->a, d->start);
  mlc_allocator_free(base->a, d);
}

/* 64-byte aligned, zeroed; the block's start sits just before the data. */
static mlc_status cpu_alloc(mlc_device *base, uint64_t bytes, uint64_t *out) {
  uint8_t *raw = mlc_allocator_alloc(base->a, bytes + 64 + sizeof(void *));
  if (!raw) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory for %llu bytes", (unsigned long long)bytes);
  uintptr_t u = ((uintptr_t)raw + sizeof(void *) + 63) & ~(uintptr_t)63;
  memcpy((void *)(u - sizeof(void *)), &raw, sizeof raw);
  memset((void *)u, 0, bytes);
  base->allocated += bytes;
  *out = (uint64_t)u;
  return NULL;
}

static void cpu_free(mlc_device *base, uint64_t addr) {
  if (!addr) return;
  void *raw;
  memcpy(&raw, (void *)(uintptr_t)(addr - sizeof(void *)), sizeof raw);
  mlc_allocator_free(base->a, raw);
}

static mlc_status cpu_write(mlc_device *base, uint64_t dst, const void *src, uint64_t n) {
  if (n && (const void *)(uintptr_t)dst != src) memcpy((void *)(uintptr_t)dst, src, n);
  return NULL;
}

static mlc_status cpu_read(mlc_device *base, void *dst, uint64_t src, uint64_t n) {
  if (n && dst != (const void *)(uintptr_t)src) memcpy(dst, (const void *)(uintptr_t)src, n);
  return NULL;
}

static mlc_status cpu_resolve(mlc_device *base, const char *symbol, void **out) {
  cpu_dev *d = (cpu_dev *)base;
  *out = d->lookup ? d->lookup(d->lookup_ctx, symbol) : NULL;
  if (!*out) return mlc_status_make(MLC_NOT_FOUND, "kernel %s is not in the compiled code", symbol);
  return NULL;
}

typedef struct {
  mlc_cpu_kernel_fn fn;
  void **args;
} launch;

static void run_range(void *ctx, int64_t begin, int64_t end) {
  const launch *l = ctx;
  l->fn(l->args, begin, end);
}

static mlc_status grow_slots(cpu_dev *d, uint32_t slot) {
  mlc_device *base = &d->base;
  if (slot < d->cap) return NULL;
  uint32_t cap = d->cap ? d->cap : 256;
  while (cap <= slot) cap *= 2;
  double *sec = mlc_allocator_alloc_array(base->a, cap, sizeof *sec), *start = mlc_allocator_alloc_array(base->a, cap, sizeof *start);
  if (!sec || !start) {
    mlc_allocator_free(base->a, sec);
    mlc_allocator_free(base->a, start);
    return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory for step timings");
  }
  for (uint32_t i = 0; i < cap; i++) sec[i] = start[i] = -1;
  if (d->cap) {
    memcpy(sec, d->sec, d->cap * sizeof *sec);
    memcpy(start, d->start, d->cap * sizeof *start);
  }
  mlc_allocator_free(base->a, d->sec);
  mlc_allocator_free(base->a, d->start);
  d->sec = sec;
  d->start = start;
  d->cap = cap;
  return NULL;
}

static mlc_status cpu_launch(mlc_device *base, void *kernel, uint64_t items, const uint64_t *args, uint32_t nargs,
                             bool timing, uint32_t slot) {
  cpu_dev *d = (cpu_dev *)base;
  void *ptrs[72];
  if (nargs > 72) return mlc_status_make(MLC_INVALID_ARGUMENT, "a step with %u arguments", nargs);
  for (uint32_t i = 0; i < nargs; i++) ptrs[i] = (void *)(uintptr_t)args[i];
  launch l;
  memcpy(&l.fn, &kernel, sizeof kernel);
  l.args = ptrs;
  if (timing) MLC_RETURN_IF_ERROR(grow_slots(d, slot));
  double t0 = timing ? now() : 0;
  mlc_cpu_pool_parallel_for(d->pool, (int64_t)items, 0, run_range, &l);
  if (timing) {
    d->sec[slot] = now() - t0;
    d->start[slot] = t0 - d->origin;
  }
  return NULL;
}

static mlc_status cpu_finish(mlc_device *base, uint32_t nslots, double *seconds, double *start) {
  cpu_dev *d = (cpu_dev *)base;
  for (uint32_t i = 0; i < nslots && i < d->cap; i++) {
    if (d->sec[i] < 0) continue;
    seconds[i] = d->sec[i];
    start[i] = d->start[i];
    d->sec[i] = -1;
  }
  return NULL;
}

static void cpu_describe(mlc_device *base, char *buf, size_t n) { mlc_profile_cpu_model(buf, n); }

/* A collective's time: from its start (stored as a negative seconds marker) to its end. */
static mlc_status cpu_mark(mlc_device *base, uint32_t slot, bool end) {
  cpu_dev *d = (cpu_dev *)base;
  MLC_RETURN_IF_ERROR(grow_slots(d, slot));
  double t = now();
  if (!end) d->start[slot] = t - d->origin;
  else d->sec[slot] = t - d->origin - d->start[slot];
  return NULL;
}

static const mlc_device_vt cpu_vt = {
    "cpu", true, true, cpu_destroy, cpu_alloc, cpu_free, cpu_write, cpu_read, cpu_resolve, cpu_launch, cpu_finish, cpu_describe,
    NULL, NULL, NULL, cpu_mark, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
};

mlc_status mlc_cpu_device_create(mlc_symbol_lookup lookup, void *ctx, int threads, mlc_allocator a, mlc_device **out) {
  *out = NULL;
  cpu_dev *d = mlc_allocator_alloc(a, sizeof *d);
  if (!d) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory");
  memset(d, 0, sizeof *d);
  d->base.vt = &cpu_vt;
  d->base.a = a;
  d->lookup = lookup;
  d->lookup_ctx = ctx;
  d->origin = now();
  mlc_status st = mlc_cpu_pool_create(threads, a, &d->pool);
  if (st) { mlc_allocator_free(a, d); return st; }
  *out = &d->base;
  return NULL;
}

mlc_status mlc_cpu_enumerate(mlc_device_info *out, uint32_t cap, uint32_t *out_n) {
  *out_n = 1;
  if (!cap) return NULL;
  memset(out, 0, sizeof *out);
  mlc_profile_cpu_model(out->name, sizeof out->name);
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  out->memory = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
  char level[400];
  mlc_cpu_host_describe(level, sizeof level);
  snprintf(out->detail, sizeof out->detail, "%s; %ld CPUs online", level, sysconf(_SC_NPROCESSORS_ONLN));
  return NULL;
}
