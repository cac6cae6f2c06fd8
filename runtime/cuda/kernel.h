/* The CUDA kernel ABI: the contract between codegen/cuda and runtime/cuda.
 *
 * A plan step names a kernel by symbol.  On CUDA a kernel is one or more
 * launches of __global__ functions of one module, run in order on the
 * step's stream, each with the same arguments: the device addresses of the
 * step's arguments (the node's inputs, then its output), then a scratch
 * block of `scratch` bytes (0: a null pointer) that only this step uses,
 * then the step's work items as an unsigned long long (only kernels on a
 * rank's shard of a flat parameter declare it: their rows).
 * Grids are 1-D.  Buffers are dense, row-major, 256-byte aligned.
 */
#ifndef MLC_CUDA_KERNEL_H
#define MLC_CUDA_KERNEL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MLC_CUDA_MAX_LAUNCH 4

typedef struct {
  const char *fn;         /* the __global__ function's name */
  uint32_t grid, block;   /* blocks, threads per block */
  uint32_t smem;          /* dynamic shared memory, bytes */
} mlc_cuda_launch;

typedef struct {
  const char *symbol;
  uint64_t scratch;
  uint32_t nlaunch;
  mlc_cuda_launch launch[MLC_CUDA_MAX_LAUNCH];
} mlc_cuda_kernel;

#ifdef __cplusplus
}
#endif

#endif
