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
 *
 * A kernel that loads by TMA (Hopper's tensor memory accelerator) lists
 * the tensor maps it needs in `tmap`: for each, the runtime encodes a tiled
 * map (cuTensorMapEncodeTiled) at `offset` bytes into argument `arg` (or
 * into the scratch block: MLC_CUDA_TMAP_SCRATCH) and passes it by value,
 * 128 bytes, after the work items, in the list's order; a launch that
 * declares them declares the work items too (and ignores them).  Where the
 * device is older than sm_90 the maps are passed zeroed (only sm_90 code
 * reads them).
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

#define MLC_CUDA_MAX_TMAP 8
#define MLC_CUDA_TMAP_SCRATCH 0xffffffffu

/* A tiled tensor map: `rank` dimensions, innermost first, of elements of
 * `elem_bytes` (1, 2 or 4) bytes; strides in bytes of dimensions 1.. (each
 * a multiple of 16); boxes of box[] elements; swizzle 0 (none) or 128 (the
 * 128-byte swizzle of wgmma's shared-memory layout, box[0] x elem_bytes ==
 * 128).  Elements outside the dimensions read as zero. */
typedef struct {
  uint32_t arg, rank, elem_bytes, swizzle;
  uint64_t offset, dim[5], stride[4];
  uint32_t box[5];
} mlc_cuda_tmap;

typedef struct {
  const char *symbol;
  uint64_t scratch;
  uint32_t nlaunch;
  mlc_cuda_launch launch[MLC_CUDA_MAX_LAUNCH];
  uint32_t ntmap;
  mlc_cuda_tmap tmap[MLC_CUDA_MAX_TMAP];
} mlc_cuda_kernel;

#ifdef __cplusplus
}
#endif

#endif
