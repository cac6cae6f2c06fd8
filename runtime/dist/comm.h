/* Communicators: the collectives a sharded session runs between ranks
 * (FSDP's all-gather and reduce-scatter), behind one vtable.
 *
 * Implementations: "local" (one rank, host memory: copies) and "mpi" (Open
 * MPI, host memory: the CPU target under mpirun).  Buffers are device addresses as the device
 * vtable (runtime/device.h) gives them: host pointers for local and MPI.
 *
 * Every call returns a status; under mpirun a rank that dies ends the
 * whole job (MPI's default error handler) rather than hanging the others.
 */
#ifndef MLC_DIST_COMM_H
#define MLC_DIST_COMM_H

#include <stdbool.h>
#include <stdint.h>

#include "runtime/alloc.h"
#include "runtime/dist/bootstrap.h"
#include "runtime/status.h"

typedef struct mlc_comm mlc_comm;

typedef struct {
  const char *name;
  void (*destroy)(mlc_comm *c);
  /* recv[r * bytes, (r + 1) * bytes) = rank r's send[0, bytes), on every rank. */
  mlc_status (*all_gather)(mlc_comm *c, uint64_t send, uint64_t recv, uint64_t bytes, void *stream);
  /* data holds world * count f32 on every rank: afterwards this rank's
   * count values at data + rank * count * 4 are the mean over the ranks. */
  mlc_status (*reduce_scatter_mean)(mlc_comm *c, uint64_t data, uint64_t count, void *stream);
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
/* NCCL (device memory, on the device's stream) is the next step: the
 * CUDA target's sharded kernels exist in the plan, the communicator not yet. */

#endif
