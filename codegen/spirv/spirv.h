/* The SPIR-V code generator: one SPIR-V module per distinct kernel, built
 * word by word (no GLSL in between), validated with SPIRV-Tools for the
 * Vulkan environment and optimised with its performance passes, plus the
 * table the runtime needs to run them (runtime/vulkan/kernel.h).
 *
 * Every node that needs a kernel gets one; nodes whose modules come out the
 * same words share one (the twelve layers of a transformer).  Kernels are
 * named mlc_<op>_<xxh64 of the words>.  A module that fails validation is a
 * compiler bug: emit returns false with "internal error: ..." and the
 * validator's message, and nothing is written.
 */
#ifndef MLC_CODEGEN_SPIRV_H
#define MLC_CODEGEN_SPIRV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir/ir.h"
#include "runtime/status.h"
#include "runtime/vulkan/kernel.h"

typedef struct {
  mlc_vk_kernel *kernels;     /* nkernels distinct kernels; words live in the program's arena */
  uint32_t nkernels;
  const mlc_func *funcs[MLC_MAX_FUNCS];
  uint32_t *kernel_of[MLC_MAX_FUNCS]; /* per node of funcs[k]: index into kernels, or UINT32_MAX */
} mlc_spirv_module;

typedef struct {
  bool coopmat;       /* also emit VK_KHR_cooperative_matrix GEMMs (each with a fallback) */
  bool optimize;      /* run SPIRV-Tools' performance passes (validated again after) */
} mlc_spirv_options;

/* Emits the program (after memplan).  Everything lives in p's arena.
 * MLC_INVALID_ARGUMENT when some node cannot be emitted (the message names
 * it), MLC_INTERNAL when a module fails validation (a bug in mlc). */
MLC_MUST_USE mlc_status mlc_spirv_emit(const mlc_program *p, const mlc_spirv_options *o, mlc_spirv_module *out);
/* Whether the emitters have a kernel for op (or it needs none): else
 * mlc_spirv_emit refuses it ("has no kernel for this op"). */
bool mlc_spirv_supports_op(mlc_op op);
/* Whether the kernel for n's op takes n's shapes and dtypes (attention_kv:
 * head dims up to 128, even for 16-bit ones); false with the message. */
bool mlc_spirv_supports_node(const mlc_func *f, const mlc_node *n, char *why, size_t whyn);

/* A namer for mlc_plan_encode (codegen/plan.h): ctx is the module. */
const char *mlc_spirv_kernel_namer(void *ctx, const mlc_func *f, uint32_t node, uint64_t *out_work_items);

/* Validates words for Vulkan 1.2 with SPIRV-Tools; false with the
 * validator's message in err. */
bool mlc_spirv_validate(const uint32_t *words, size_t nwords, char *err, size_t errn);

#endif
