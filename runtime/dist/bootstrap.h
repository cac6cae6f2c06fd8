/* Multi-process bootstrap (groundwork for the cuda-nccl target, issue 6):
 * which rank this process is, how many there are, and a rendezvous that
 * hands every rank the same small blob from rank 0 (NCCL's unique id).
 *
 * The rank, world size and local rank come from the launcher people already
 * use: torchrun (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT;
 * `torchrun --no-python ./app`), Open MPI's mpirun (OMPI_COMM_WORLD_RANK,
 * _SIZE, _LOCAL_RANK) or Slurm's srun (SLURM_PROCID, SLURM_NTASKS,
 * SLURM_LOCALID); with none of them, one process of rank 0.
 *
 * The rendezvous is TCP: rank 0 listens on MASTER_ADDR:MASTER_PORT and
 * sends the blob to each rank that connects; the others connect, retrying
 * until a deadline, and read it.  Every failure is a status that says what
 * to fix (an unresolvable MASTER_ADDR, a port in use, a rank 0 that never
 * answered, a short read), never a hang past the deadline.
 */
#ifndef MLC_DIST_BOOTSTRAP_H
#define MLC_DIST_BOOTSTRAP_H

#include <stddef.h>

#include "runtime/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Under torchrun (TORCHELASTIC_RUN_ID set) the rendezvous uses MASTER_PORT
 * + 1: torchrun's own store already listens on MASTER_PORT. */
typedef struct {
  int rank, world, local_rank;
  char master_addr[256]; /* "" when the launcher gave none */
  int master_port;       /* 0 when none */
  const char *launcher;  /* "torchrun", "mpirun", "slurm" or "none" */
} mlc_dist_env;

/* Reads the launcher's environment; a malformed or inconsistent value
 * (RANK=7 with WORLD_SIZE=4, a port outside 1..65535) is an error. */
MLC_MUST_USE mlc_status mlc_dist_env_read(mlc_dist_env *out);

/* Rank 0 sends blob[0..n) to every other rank; the others receive it into
 * blob.  Gives up after timeout_s seconds. */
MLC_MUST_USE mlc_status mlc_dist_share(const mlc_dist_env *e, void *blob, size_t n, double timeout_s);

#ifdef __cplusplus
}
#endif

#endif
