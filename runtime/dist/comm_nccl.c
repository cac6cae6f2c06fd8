/* The NCCL communicator: FSDP's collectives between GPUs, on the device's
 * stream, NCCL loaded with dlopen (libnccl.so.2) so that nothing links it.
 *
 * Rank 0 makes NCCL's unique id and hands it to the others over TCP on
 * MASTER_ADDR:MASTER_PORT (runtime/dist/bootstrap.c); the communicator is
 * non-blocking.  A watchdog thread polls ncclCommGetAsyncError, and while a
 * step waits for the GPU (mlc_comm_busy) it also keeps the deadline: when a
 * peer has died the wait never ends, so after timeout_s it aborts the
 * communicator (which ends the wait with an error), and if the process is
 * still stuck 10 s later it calls the application's on_hang (mlc: print
 * and exit), since a library must not exit on its own.
 */
#include "runtime/dist/comm.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#ifndef MLC_HAVE_NCCL

mlc_status mlc_comm_nccl_new_id(void *id) {
  (void)id;
  return mlc_comm_nccl_id(NULL, NULL, 0);
}

mlc_status mlc_comm_nccl_id(const mlc_dist_env *e, void *id, double timeout_s) {
  (void)e, (void)id, (void)timeout_s;
  return mlc_status_make(MLC_UNIMPLEMENTED, "this mlc was built without nccl.h: the cuda-nccl target needs NCCL's "
                         "header at build time (libnccl-dev) and libnccl.so.2 at run time");
}

mlc_status mlc_comm_nccl_create(const mlc_dist_env *e, const void *id, double timeout_s, void (*on_hang)(const char *),
                                mlc_allocator a, mlc_comm **out) {
  (void)e, (void)id, (void)timeout_s, (void)on_hang, (void)a, (void)out;
  return mlc_comm_nccl_id(NULL, NULL, 0);
}

void mlc_comm_busy(mlc_comm *c, bool on) { (void)c, (void)on; }

#else
#include <nccl.h>

typedef struct {
  mlc_comm base;
  void *lib;
  ncclComm_t comm;
  __typeof__(ncclGetErrorString) *GetErrorString;
  __typeof__(ncclCommGetAsyncError) *GetAsyncError;
  __typeof__(ncclCommAbort) *Abort;
  __typeof__(ncclCommDestroy) *Destroy;
  __typeof__(ncclAllGather) *AllGather;
  __typeof__(ncclReduceScatter) *ReduceScatter;
  __typeof__(ncclAllReduce) *AllReduce;
  pthread_t watchdog;
  bool have_watchdog;
  atomic_bool stop, aborted;
  atomic_int async_error;
  atomic_llong busy_since_ns; /* 0: not waiting */
  double timeout_s;
  void (*on_hang)(const char *);
  char why[256];
} nccl_comm;

static long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static void *load(const char *name, void **lib) {
  if (!*lib) *lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_GLOBAL);
  return *lib ? dlsym(*lib, name) : NULL;
}

/* Waits out a non-blocking call: ncclInProgress until the communicator settles. */
static ncclResult_t settle(nccl_comm *c, ncclResult_t r) {
  while (r == ncclInProgress && !atomic_load(&c->aborted)) {
    ncclResult_t a = ncclSuccess;
    c->GetAsyncError(c->comm, &a);
    r = a;
  }
  return r;
}

static mlc_status check(nccl_comm *c, ncclResult_t r, const char *what) {
  r = settle(c, r);
  if (r == ncclSuccess) return NULL;
  if (atomic_load(&c->aborted)) return mlc_status_make(MLC_IO, "%s: %s", what, c->why);
  return mlc_status_make(MLC_IO, "%s failed on rank %d of %d: %s", what, c->base.rank, c->base.world, c->GetErrorString(r));
}

static void *watch(void *arg) {
  nccl_comm *c = arg;
  long long aborted_at = 0;
  while (!atomic_load(&c->stop)) {
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
    if (atomic_load(&c->aborted)) {
      if (atomic_load(&c->busy_since_ns) && now_ns() - aborted_at > 10ll * 1000000000ll && c->on_hang) {
        c->on_hang(c->why);
        aborted_at = now_ns(); /* on_hang returned: keep reminding, do not spin */
      }
      continue;
    }
    ncclResult_t a = ncclSuccess;
    c->GetAsyncError(c->comm, &a);
    long long since = atomic_load(&c->busy_since_ns);
    bool late = since && (now_ns() - since) * 1e-9 > c->timeout_s;
    if ((a != ncclSuccess && a != ncclInProgress) || late) {
      if (late)
        snprintf(c->why, sizeof c->why, "rank %d of %d waited %.0f s for its peers (MLC_NCCL_TIMEOUT): a rank has "
                 "died or hangs; the communicator was aborted", c->base.rank, c->base.world, c->timeout_s);
      else
        snprintf(c->why, sizeof c->why, "rank %d of %d: NCCL reported %s; the communicator was aborted", c->base.rank,
                 c->base.world, c->GetErrorString(a));
      atomic_store(&c->aborted, true);
      c->Abort(c->comm);
      aborted_at = now_ns();
    }
  }
  return NULL;
}

void mlc_comm_busy(mlc_comm *base, bool on) {
  if (!base || strcmp(base->vt->name, "nccl")) return;
  atomic_store(&((nccl_comm *)base)->busy_since_ns, on ? now_ns() : 0);
}

static void nc_destroy(mlc_comm *base) {
  nccl_comm *c = (nccl_comm *)base;
  atomic_store(&c->stop, true);
  if (c->have_watchdog) pthread_join(c->watchdog, NULL);
  if (c->comm && !atomic_load(&c->aborted)) c->Destroy(c->comm);
  mlc_allocator_free(base->a, c);
}

static mlc_status nc_all_gather(mlc_comm *base, uint64_t send, uint64_t recv, uint64_t bytes, void *stream) {
  nccl_comm *c = (nccl_comm *)base;
  return check(c, c->AllGather((const void *)(uintptr_t)send, (void *)(uintptr_t)recv, bytes, ncclUint8, c->comm,
                               (cudaStream_t)stream), "ncclAllGather");
}

static mlc_status nc_reduce_scatter(mlc_comm *base, uint64_t data, uint64_t count, int dt, void *stream) {
  nccl_comm *c = (nccl_comm *)base;
  ncclDataType_t t = dt == MLC_COMM_BF16 ? ncclBfloat16 : dt == MLC_COMM_F16 ? ncclFloat16 : ncclFloat32;
  uint64_t size = dt == MLC_COMM_F32 ? 4 : 2;
  unsigned char *d = (unsigned char *)(uintptr_t)data;
  /* In place: the receive buffer is this rank's part of the send buffer.
   * 16-bit values are summed as NCCL sums them, in their own dtype at each
   * step of its ring (FSDP2's reduce_dtype=bfloat16 does the same). */
  return check(c, c->ReduceScatter(d, d + (uint64_t)base->rank * count * size, count, t, ncclAvg, c->comm,
                                   (cudaStream_t)stream), "ncclReduceScatter");
}

static mlc_status nc_all_reduce_sum(mlc_comm *base, uint64_t send, uint64_t recv, uint64_t count, void *stream) {
  nccl_comm *c = (nccl_comm *)base;
  return check(c, c->AllReduce((const void *)(uintptr_t)send, (void *)(uintptr_t)recv, count, ncclFloat32, ncclSum, c->comm,
                               (cudaStream_t)stream), "ncclAllReduce");
}

/* Host values: through a small device buffer would need CUDA here; NCCL
 * takes host memory only with CUDA's unified addressing of registered
 * pages, so the driver averages losses on the GPU side instead. */
static mlc_status nc_all_reduce(mlc_comm *base, double *v, int n) {
  (void)base, (void)v, (void)n;
  return mlc_status_make(MLC_UNIMPLEMENTED, "the NCCL communicator reduces device buffers only");
}

static mlc_status nc_barrier(mlc_comm *base) {
  (void)base;
  return NULL; /* collectives on one stream are ordered; the session synchronises its stream */
}

static const mlc_comm_vt nccl_vt = {
  .name = "nccl",
  .destroy = nc_destroy,
  .all_gather = nc_all_gather,
  .reduce_scatter_mean = nc_reduce_scatter,
  .all_reduce_sum = nc_all_reduce_sum,
  .all_reduce_host = nc_all_reduce,
  .barrier = nc_barrier,
};

mlc_status mlc_comm_nccl_new_id(void *id) {
  void *lib = NULL;
  __typeof__(ncclGetUniqueId) *get = load("ncclGetUniqueId", &lib);
  if (!get) return mlc_status_make(MLC_UNIMPLEMENTED, "the cuda-nccl target needs NCCL (libnccl.so.2): %s", dlerror());
  ncclUniqueId u;
  ncclResult_t r = get(&u);
  if (r != ncclSuccess) return mlc_status_make(MLC_IO, "ncclGetUniqueId failed (%d)", (int)r);
  memcpy(id, &u, sizeof u);
  return NULL;
}

mlc_status mlc_comm_nccl_id(const mlc_dist_env *e, void *id, double timeout_s) {
  if (e->rank == 0) MLC_RETURN_IF_ERROR(mlc_comm_nccl_new_id(id));
  return mlc_dist_share(e, id, sizeof(ncclUniqueId), timeout_s);
}

mlc_status mlc_comm_nccl_create(const mlc_dist_env *e, const void *id, double timeout_s, void (*on_hang)(const char *),
                                mlc_allocator a, mlc_comm **out) {
  *out = NULL;
  nccl_comm *c = mlc_allocator_alloc(a, sizeof *c);
  if (!c) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory for a communicator");
  memset(c, 0, sizeof *c);
  c->base = (mlc_comm){.vt = &nccl_vt, .a = a, .rank = e->rank, .world = e->world, .host_memory = false};
  c->timeout_s = timeout_s;
  c->on_hang = on_hang;
  __typeof__(ncclCommInitRankConfig) *init = load("ncclCommInitRankConfig", &c->lib);
  struct { const char *name; void **at; } syms[] = {
    {"ncclGetErrorString", (void **)&c->GetErrorString}, {"ncclCommGetAsyncError", (void **)&c->GetAsyncError},
    {"ncclCommAbort", (void **)&c->Abort},               {"ncclCommDestroy", (void **)&c->Destroy},
    {"ncclAllGather", (void **)&c->AllGather},           {"ncclReduceScatter", (void **)&c->ReduceScatter},
    {"ncclAllReduce", (void **)&c->AllReduce},
  };
  for (size_t i = 0; i < sizeof syms / sizeof *syms; i++)
    if (!(*syms[i].at = load(syms[i].name, &c->lib))) init = NULL;
  if (!init) {
    mlc_allocator_free(a, c);
    return mlc_status_make(MLC_UNIMPLEMENTED, "the cuda-nccl target needs NCCL 2.14 or later (libnccl.so.2)");
  }
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ncclUniqueId u;
  memcpy(&u, id, sizeof u);
  ncclResult_t r = init(&c->comm, e->world, u, e->rank, &cfg);
  if (r == ncclInvalidArgument) { /* a library older than the header: a blocking communicator, still watched */
    __typeof__(ncclCommInitRank) *init_blocking = load("ncclCommInitRank", &c->lib);
    c->comm = NULL;
    r = init_blocking ? init_blocking(&c->comm, e->world, u, e->rank) : r;
  }
  mlc_status st = check(c, r, "ncclCommInitRankConfig");
  if (!st && pthread_create(&c->watchdog, NULL, watch, c) == 0) c->have_watchdog = true;
  if (st) {
    if (c->comm) c->Abort(c->comm);
    mlc_allocator_free(a, c);
    return st;
  }
  *out = &c->base;
  return NULL;
}
#endif
