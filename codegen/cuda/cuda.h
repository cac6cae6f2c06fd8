/* The CUDA code generator: one CUDA C source for a whole program, and the
 * launch table the runtime needs to run its kernels (runtime/cuda/kernel.h).
 *
 * Every node that needs a kernel gets one; nodes whose kernels come out the
 * same text (the twelve layers of a transformer) share it, so the source
 * holds each distinct kernel once.  Kernels are named
 * mlc_<op>_<xxh64 of the text>, and launch k of a kernel is the __global__
 * function <name>_<k>.
 */
#ifndef MLC_CODEGEN_CUDA_H
#define MLC_CODEGEN_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir/ir.h"
#include "runtime/cuda/kernel.h"

typedef struct {
  const mlc_program *p;
  const char *source;         /* the whole .cu text, NUL-terminated */
  size_t source_len;
  mlc_cuda_kernel *kernels;   /* nkernels distinct kernels */
  uint32_t nkernels;
  const mlc_func *funcs[MLC_MAX_FUNCS];
  uint32_t *kernel_of[MLC_MAX_FUNCS]; /* per node of funcs[k]: index into kernels, or UINT32_MAX */
} mlc_cuda_module;

/* Emits the program (after memplan).  Everything lives in p's arena.
 * Returns false with a message in err when some node cannot be emitted. */
bool mlc_cuda_emit(const mlc_program *p, mlc_cuda_module *out, char *err, size_t errn);

/* The same for Metal: MSL source (`source`), the same launch table. */
bool mlc_metal_emit(const mlc_program *p, mlc_cuda_module *out, char *err, size_t errn);
/* Whether the emitters have a kernel for op (or it needs none): else
 * mlc_cuda_emit / mlc_metal_emit refuse it ("has no kernel for this op"). */
bool mlc_cuda_supports_op(mlc_op op);
bool mlc_metal_supports_op(mlc_op op);

/* A namer for mlc_plan_encode (codegen/plan.h): ctx is the module. */
const char *mlc_cuda_kernel_namer(void *ctx, const mlc_func *f, uint32_t node, uint64_t *out_work_items);

/* The unit rule of the CUDA kernels for mlc_plan_encode_units (codegen/cuda/unit.c). */
uint8_t mlc_cuda_kernel_unit(const mlc_program *p, const mlc_func *f, uint32_t node, uint8_t *out_products);

/* The helpers every module starts with. */
extern const char mlc_cuda_prelude[];
extern const char mlc_metal_prelude[];
extern const char mlc_cc_math_prelude[]; /* after either of them */

#endif
