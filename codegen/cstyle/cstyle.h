/* What the C-like code generators (codegen/cuda/ for CUDA C,
 * codegen/metal/ for MSL) hand the driver: one source text for a whole
 * program, and the launch table its runtime runs the kernels by
 * (runtime/cuda/kernel.h, which Metal's runtime shares).
 *
 * Every node that needs a kernel gets one; nodes whose kernels come out the
 * same text (the twelve layers of a transformer) share it, so the source
 * holds each distinct kernel once.  Kernels are named
 * mlc_<op>_<xxh64 of the text>, and launch k of a kernel is the kernel
 * function <name>_<k>.  codegen/cstyle/cc.h is the emitter behind it.
 */
#ifndef MLC_CODEGEN_CSTYLE_H
#define MLC_CODEGEN_CSTYLE_H

#include <stddef.h>
#include <stdint.h>

#include "ir/ir.h"
#include "runtime/cuda/kernel.h"

typedef struct {
  const mlc_program *p;
  const char *source;         /* the whole .cu or .metal text, NUL-terminated */
  size_t source_len;
  mlc_cuda_kernel *kernels;   /* nkernels distinct kernels */
  uint32_t nkernels;
  const mlc_func *funcs[MLC_MAX_FUNCS];
  uint32_t *kernel_of[MLC_MAX_FUNCS]; /* per node of funcs[k]: index into kernels, or UINT32_MAX */
} mlc_cstyle_module;

/* A namer for mlc_plan_encode (codegen/plan.h): ctx is the module. */
const char *mlc_cstyle_kernel_namer(void *ctx, const mlc_func *f, uint32_t node, uint64_t *out_work_items);

#endif
