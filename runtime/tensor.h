/* Tensor descriptors: a buffer together with what it is meant to hold.
 *
 * The typed calls of an artifact (<name>_forward(m, x, y)) take bare
 * pointers and trust the caller for their sizes.  Their _tensors forms
 * (<name>_forward_tensors(m, &x, &y)) take an mlc_tensor per input and
 * output instead, and check each one before touching any memory: dtype and
 * shape exactly as the model declares them, and a buffer of at least the
 * tensor's size.  A mismatch is MLC_INVALID_ARGUMENT naming the entry point,
 * the tensor and both sides ("forward: input 'x' is f32[32, 784] (100352
 * bytes), got a buffer of 400 bytes").
 *
 * A tensor's buffer is host memory unless `memory` says it is the memory of
 * the model's device (since 0.2.0): on a CUDA model, a CUdeviceptr on the
 * GPU the model runs on (a torch tensor's data_ptr()), which the runtime
 * checks (cuPointerGetAttribute: device memory, of that GPU, all `bytes` of
 * it in one allocation) and then copies device to device: an input from it
 * into the model's arena, an output from the arena into it, with no host
 * copy.  They are copies on the GPU, not the caller's buffer bound in place
 * of the arena's.  A model on a device without memory of its own (the CPU)
 * refuses device tensors (MLC_INVALID_ARGUMENT).
 */
#ifndef MLC_TENSOR_H
#define MLC_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The plan's dtype codes (runtime/plan.h). */
typedef enum mlc_dtype_code {
  MLC_DTYPE_F32 = 1,
  MLC_DTYPE_BF16 = 2, /* uint16_t bits */
  MLC_DTYPE_F16 = 3,  /* uint16_t bits */
  MLC_DTYPE_I32 = 4,
  MLC_DTYPE_I64 = 5,
  MLC_DTYPE_BOOL = 6, /* one byte */
  MLC_DTYPE_F8E4M3 = 7, /* one byte, OCP e4m3fn: the fp8 pass's values inside a plan (ir/ir.h) */
  MLC_DTYPE_F8E5M2 = 8, /* one byte, OCP e5m2 */
} mlc_dtype_code;

#define MLC_TENSOR_MAX_RANK 6

/* Where a tensor's buffer lives. */
typedef enum mlc_memory {
  MLC_MEMORY_HOST = 0,   /* the process's memory (what {0} gives) */
  MLC_MEMORY_DEVICE = 1, /* the model's device's: on CUDA, a CUdeviceptr on GPU `device` */
  /* Host memory that the call may use in place of the model's own for the
   * length of the call, with no copy: read by the run as it goes (an
   * input) or written by it (an output), where the runtime can bind it
   * (mlc_session_bind_input in runtime/session.h: the CPU, a 16-byte aligned
   * buffer, a value that is no parameter, ...), else copied as
   * MLC_MEMORY_HOST.  Since the runtime that has mlc_session_bind_input (the
   * Python binding asks for that symbol); no other thread may touch the
   * buffer during the call. */
  MLC_MEMORY_HOST_IN_PLACE = 2,
  /* The model's device's memory (as MLC_MEMORY_DEVICE, on GPU `device`),
   * which the call may use in place of the model's own in the same way:
   * bound where the device's kernels can take it (mlc_device_vt's
   * bind_external: CUDA), else copied device to device as
   * MLC_MEMORY_DEVICE.  The work queued on the device before the call (the
   * caller's streams too) is done before the run reads it.  Since the
   * runtime that has mlc_session_is_bound (the Python binding asks for
   * that symbol). */
  MLC_MEMORY_DEVICE_IN_PLACE = 3,
} mlc_memory;

typedef struct mlc_tensor {
  mlc_dtype_code dtype;
  int rank;                          /* 0 to MLC_TENSOR_MAX_RANK */
  int64_t dims[MLC_TENSOR_MAX_RANK]; /* the first `rank` are used */
  void *data;                        /* read for inputs, written for outputs */
  size_t bytes;                      /* the size of the buffer at data */
  mlc_memory memory;                 /* since 0.2.0; 0: host memory */
  int device;                        /* MLC_MEMORY_DEVICE(_IN_PLACE): the device's number (the model's options' device) */
} mlc_tensor;

/* The bytes of a tensor of that dtype and shape (0 for an unknown dtype). */
size_t mlc_tensor_nbytes(mlc_dtype_code dtype, int rank, const int64_t *dims);

/* NULL when `t` describes a tensor of exactly `dtype` and shape
 * dims[0..rank) in a buffer of at least that many bytes, in memory of a
 * known kind; else
 * MLC_INVALID_ARGUMENT saying what differs, naming `entry`, the `kind`
 * ("input" or "output") and `name`. */
MLC_MUST_USE mlc_status mlc_tensor_check(const mlc_tensor *t, const char *entry, const char *kind, const char *name,
                                         mlc_dtype_code dtype, int rank, const int64_t *dims);

#ifdef __cplusplus
}
#endif

#endif
