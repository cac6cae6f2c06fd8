/* Communicators: the collectives a sharded session runs between ranks
 * (FSDP's all-gather and reduce-scatter, and the all-reduce of clipping),
 * behind one vtable.
 *
 * Implementations: "local" (one rank, host memory: copies), "mpi" (Open
 * MPI, host memory: the CPU target under mpirun) and "nccl" (device memory,
 * enqueued on the device's stream).  Buffers are device addresses as the device
 * vtable (runtime/device.h) gives them: host pointers for local and MPI.
 *
 * Every call returns a status; a rank that dies does not hang the others:
 * under mpirun MPI's default error handler ends the whole job, and NCCL's
 * communicator has a watchdog (below).
 */
#ifndef MLC_DIST_COMM_H
#define MLC_DIST_COMM_H

#include <stdbool.h>
#include <stdint.h>

#include "runtime/alloc.h"
#include "runtime/dist/bootstrap.h"
#include "runtime/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mlc_comm mlc_comm;

/* The dtypes a reduce-scatter takes: ir/ir.h's mlc_dtype codes, as a plan
 * carries them (runtime/plan.h). */
enum { MLC_COMM_F32 = 1, MLC_COMM_BF16 = 2, MLC_COMM_F16 = 3 };

typedef struct {
  const char *name;
  void (*destroy)(mlc_comm *c);
  /* recv[r * bytes, (r + 1) * bytes) = rank r's send[0, bytes), on every rank. */
  mlc_status (*all_gather)(mlc_comm *c, uint64_t send, uint64_t recv, uint64_t bytes, void *stream);
  /* data holds world * count values of dtype dt (MLC_COMM_F32, _BF16 or
   * _F16) on every rank: afterwards this rank's count values at data + rank
   * * count values are the mean over the ranks, in that dtype. */
  mlc_status (*reduce_scatter_mean)(mlc_comm *c, uint64_t data, uint64_t count, int dt, void *stream);
  /* recv[0, count) = the sum over the ranks of send[0, count), f32, on
   * every rank (clip_grad_norm's sum of squares under fsdp). */
  mlc_status (*all_reduce_sum)(mlc_comm *c, uint64_t send, uint64_t recv, uint64_t count, void *stream);
  /* Host values summed over the ranks (losses, agreeing on errors). */
  mlc_status (*all_reduce_host)(mlc_comm *c, double *v, int n);
  mlc_status (*barrier)(mlc_comm *c);
} mlc_comm_vt;

struct mlc_comm {
  const mlc_comm_vt *vt;
  mlc_allocator a;
  int rank, world;
  bool host_memory; /* buffers are host pointers */
};

/* One rank, host memory. */
MLC_MUST_USE mlc_status mlc_comm_local_create(mlc_allocator a, mlc_comm **out);
/* Open MPI's libmpi.so.40, loaded with dlopen (so nothing links MPI); needs
 * the process to have been started by mpirun.  Initialises MPI. */
MLC_MUST_USE mlc_status mlc_comm_mpi_create(mlc_allocator a, mlc_comm **out);
/* NCCL's libnccl.so.2, loaded with dlopen (needs nccl.h at build time:
 * MLC_HAVE_NCCL).  First every rank calls mlc_comm_nccl_id: rank 0 makes
 * the unique id, and it reaches the others over TCP on MASTER_ADDR:
 * MASTER_PORT (mlc_dist_share; a bad address is a clear error here, before
 * any GPU is touched).  Then, with the rank's GPU current, create: a
 * non-blocking communicator and a watchdog thread that polls NCCL's
 * asynchronous error and, while the session waits for the GPU
 * (mlc_comm_busy), the deadline timeout_s; it aborts the communicator, so
 * a dead peer gives an error instead of a hang, and calls on_hang (if not
 * NULL) when the process is still stuck 10 s after that. */
#define MLC_NCCL_ID_BYTES 128
MLC_MUST_USE mlc_status mlc_comm_nccl_id(const mlc_dist_env *e, void *id, double timeout_s);
/* Rank 0's part alone (under mpirun the id goes out through MPI instead). */
MLC_MUST_USE mlc_status mlc_comm_nccl_new_id(void *id);
MLC_MUST_USE mlc_status mlc_comm_nccl_create(const mlc_dist_env *e, const void *id, double timeout_s,
                                             void (*on_hang)(const char *why), mlc_allocator a, mlc_comm **out);
/* Marks the time the session waits for the device (the watchdog's deadline). */
void mlc_comm_busy(mlc_comm *c, bool on);

#ifdef __cplusplus
}
#endif

#endif
