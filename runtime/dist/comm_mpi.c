/* The local (one rank) and MPI communicators, both on host memory.
 *
 * MPI is Open MPI's (Debian's libopenmpi3), loaded with dlopen so that no
 * program links it: its handles (MPI_COMM_WORLD, MPI_FLOAT, MPI_SUM) are
 * the addresses of Open MPI's predefined objects, found by name.  MPI's
 * default error handler aborts the whole job with mpirun's report when a
 * rank dies, so a dead peer ends every rank rather than hanging them.
 */
#include "runtime/dist/comm.h"

#include <dlfcn.h>
#include <string.h>

#include "runtime/cpu/convert.h"

/* ---- local: one rank ---- */

static void local_destroy(mlc_comm *c) { mlc_allocator_free(c->a, c); }

static mlc_status local_all_gather(mlc_comm *c, uint64_t send, uint64_t recv, uint64_t bytes, void *stream) {
  (void)c, (void)stream;
  if (send != recv) memmove((void *)(uintptr_t)recv, (const void *)(uintptr_t)send, bytes);
  return NULL;
}

static mlc_status local_reduce_scatter(mlc_comm *c, uint64_t data, uint64_t count, int dt, void *stream) {
  (void)c, (void)data, (void)count, (void)dt, (void)stream; /* the mean over one rank is the data itself */
  return NULL;
}

static mlc_status local_all_reduce_sum(mlc_comm *c, uint64_t send, uint64_t recv, uint64_t count, void *stream) {
  (void)c, (void)stream; /* the sum over one rank is the data itself */
  if (send != recv) memmove((void *)(uintptr_t)recv, (const void *)(uintptr_t)send, count * sizeof(float));
  return NULL;
}

static mlc_status local_all_reduce(mlc_comm *c, double *v, int n) {
  (void)c, (void)v, (void)n;
  return NULL;
}

static mlc_status local_barrier(mlc_comm *c) {
  (void)c;
  return NULL;
}

static const mlc_comm_vt local_vt = {
  .name = "local",
  .destroy = local_destroy,
  .all_gather = local_all_gather,
  .reduce_scatter_mean = local_reduce_scatter,
  .all_reduce_sum = local_all_reduce_sum,
  .all_reduce_host = local_all_reduce,
  .barrier = local_barrier,
};

mlc_status mlc_comm_local_create(mlc_allocator a, mlc_comm **out) {
  mlc_comm *c = mlc_allocator_alloc(a, sizeof *c);
  if (!c) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory for a communicator");
  *c = (mlc_comm){.vt = &local_vt, .a = a, .rank = 0, .world = 1, .host_memory = true};
  *out = c;
  return NULL;
}

/* ---- MPI ---- */

typedef void *MPI_Comm, *MPI_Datatype, *MPI_Op;
#define MPI_IN_PLACE ((void *)1) /* Open MPI's value */
#define MPI_THREAD_FUNNELED 1

typedef struct {
  mlc_comm base;
  void *lib;
  bool finalize; /* we initialised MPI, so we finalise it */
  MPI_Comm world;
  MPI_Datatype byte, f32, f64;
  MPI_Op sum;
  int (*Initialized)(int *);
  int (*Init_thread)(int *, char ***, int, int *);
  int (*Finalize)(void);
  int (*Comm_rank)(MPI_Comm, int *);
  int (*Comm_size)(MPI_Comm, int *);
  int (*Allgather)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm);
  int (*Reduce_scatter_block)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm);
  int (*Allreduce)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm);
  int (*Barrier)(MPI_Comm);
} mpi_comm;

static void mpi_destroy(mlc_comm *base) {
  mpi_comm *c = (mpi_comm *)base;
  if (c->finalize && c->Finalize) c->Finalize();
  /* libmpi stays loaded: its atexit handlers may still run. */
  mlc_allocator_free(base->a, c);
}

static mlc_status mpi_err(const char *what, int rc) {
  return rc ? mlc_status_make(MLC_IO, "MPI_%s failed (error %d)", what, rc) : NULL;
}

/* MPI counts are ints: move big buffers in pieces of at most 1 GiB. */
#define MPI_PIECE ((uint64_t)1 << 30)

static mlc_status mpi_all_gather(mlc_comm *base, uint64_t send, uint64_t recv, uint64_t bytes, void *stream) {
  mpi_comm *c = (mpi_comm *)base;
  (void)stream;
  if (bytes > MPI_PIECE)
    return mlc_status_make(MLC_UNIMPLEMENTED, "all_gather of %llu bytes per rank: the MPI path moves at most 1 GiB per rank",
                           (unsigned long long)bytes);
  return mpi_err("Allgather", c->Allgather((const void *)(uintptr_t)send, (int)bytes, c->byte, (void *)(uintptr_t)recv,
                                           (int)bytes, c->byte, c->world));
}

static mlc_status mpi_reduce_scatter(mlc_comm *base, uint64_t data, uint64_t count, int dt, void *stream) {
  mpi_comm *c = (mpi_comm *)base;
  (void)stream;
  if (count > MPI_PIECE / 4)
    return mlc_status_make(MLC_UNIMPLEMENTED, "reduce_scatter of %llu values per rank: the MPI path moves at most 2^28",
                           (unsigned long long)count);
  /* 16-bit values (reduce=bf16, f16) are widened to f32 here, summed and
   * averaged in f32, and rounded once (to nearest even) into this rank's
   * rows: the CPU's stand-in for NCCL's 16-bit reduction, which rounds at
   * each step of its ring instead. */
  uint64_t n = count * (uint64_t)base->world;
  float *d = (float *)(uintptr_t)data;
  uint16_t *h = (uint16_t *)(uintptr_t)data;
  if (dt != MLC_COMM_F32) {
    d = mlc_allocator_alloc(base->a, n * sizeof *d);
    if (!d) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory for a reduce_scatter of %llu values", (unsigned long long)n);
    for (uint64_t i = 0; i < n; i++) d[i] = dt == MLC_COMM_BF16 ? mlc_bf16_to_f32(h[i]) : mlc_f16_to_f32(h[i]);
  }
  /* In place, MPI leaves this rank's block at the start; move it to the rank's rows. */
  mlc_status st = mpi_err("Reduce_scatter_block", c->Reduce_scatter_block(MPI_IN_PLACE, d, (int)count, c->f32, c->sum, c->world));
  if (!st) {
    const float inv = 1.0f / (float)base->world;
    const uint64_t at = (uint64_t)base->rank * count;
    if (dt == MLC_COMM_F32) {
      if (at) memmove(d + at, d, count * sizeof *d);
      for (uint64_t i = 0; i < count; i++) d[at + i] *= inv;
    } else {
      for (uint64_t i = 0; i < count; i++) h[at + i] = dt == MLC_COMM_BF16 ? mlc_f32_to_bf16(d[i] * inv) : mlc_f32_to_f16(d[i] * inv);
    }
  }
  if (dt != MLC_COMM_F32) mlc_allocator_free(base->a, d);
  return st;
}

static mlc_status mpi_all_reduce_sum(mlc_comm *base, uint64_t send, uint64_t recv, uint64_t count, void *stream) {
  mpi_comm *c = (mpi_comm *)base;
  (void)stream;
  if (count > MPI_PIECE / 4)
    return mlc_status_make(MLC_UNIMPLEMENTED, "all_reduce of %llu values: the MPI path moves at most 2^28",
                           (unsigned long long)count);
  float *d = (float *)(uintptr_t)recv;
  if (send != recv) memmove(d, (const void *)(uintptr_t)send, count * sizeof *d);
  return mpi_err("Allreduce", c->Allreduce(MPI_IN_PLACE, d, (int)count, c->f32, c->sum, c->world));
}

static mlc_status mpi_all_reduce(mlc_comm *base, double *v, int n) {
  mpi_comm *c = (mpi_comm *)base;
  return mpi_err("Allreduce", c->Allreduce(MPI_IN_PLACE, v, n, c->f64, c->sum, c->world));
}

static mlc_status mpi_barrier(mlc_comm *base) {
  mpi_comm *c = (mpi_comm *)base;
  return mpi_err("Barrier", c->Barrier(c->world));
}

static const mlc_comm_vt mpi_vt = {
  .name = "mpi",
  .destroy = mpi_destroy,
  .all_gather = mpi_all_gather,
  .reduce_scatter_mean = mpi_reduce_scatter,
  .all_reduce_sum = mpi_all_reduce_sum,
  .all_reduce_host = mpi_all_reduce,
  .barrier = mpi_barrier,
};

mlc_status mlc_comm_mpi_create(mlc_allocator a, mlc_comm **out) {
  *out = NULL;
  /* RTLD_GLOBAL: Open MPI's own plugins look up libmpi's symbols. */
  void *lib = dlopen("libmpi.so.40", RTLD_NOW | RTLD_GLOBAL);
  if (!lib)
    return mlc_status_make(MLC_UNIMPLEMENTED, "the CPU target's collectives need Open MPI (libmpi.so.40, Debian's "
                           "libopenmpi3): %s", dlerror());
  mpi_comm *c = mlc_allocator_alloc(a, sizeof *c);
  if (!c) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory for a communicator");
  memset(c, 0, sizeof *c);
  c->base = (mlc_comm){.vt = &mpi_vt, .a = a, .host_memory = true};
  c->lib = lib;
  struct { const char *name; void **at; } syms[] = {
    {"MPI_Initialized", (void **)&c->Initialized}, {"MPI_Init_thread", (void **)&c->Init_thread},
    {"MPI_Finalize", (void **)&c->Finalize},       {"MPI_Comm_rank", (void **)&c->Comm_rank},
    {"MPI_Comm_size", (void **)&c->Comm_size},     {"MPI_Allgather", (void **)&c->Allgather},
    {"MPI_Reduce_scatter_block", (void **)&c->Reduce_scatter_block},
    {"MPI_Allreduce", (void **)&c->Allreduce},     {"MPI_Barrier", (void **)&c->Barrier},
    {"ompi_mpi_comm_world", &c->world},            {"ompi_mpi_byte", &c->byte},
    {"ompi_mpi_float", &c->f32},                    {"ompi_mpi_double", &c->f64},
    {"ompi_mpi_op_sum", &c->sum},
  };
  for (size_t i = 0; i < sizeof syms / sizeof *syms; i++) {
    *syms[i].at = dlsym(lib, syms[i].name);
    if (!*syms[i].at) {
      mlc_allocator_free(a, c);
      return mlc_status_make(MLC_UNIMPLEMENTED, "libmpi.so.40 has no %s: mlc needs Open MPI 4", syms[i].name);
    }
  }
  int inited = 0, provided = 0;
  c->Initialized(&inited);
  if (!inited) {
    int rc = c->Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
    if (rc) {
      mlc_allocator_free(a, c);
      return mlc_status_make(MLC_IO, "MPI_Init_thread failed (error %d)", rc);
    }
    c->finalize = true;
  }
  c->Comm_rank(c->world, &c->base.rank);
  c->Comm_size(c->world, &c->base.world);
  *out = &c->base;
  return NULL;
}
