/* The CUDA code generator: one CUDA C source for a whole program, and the
 * launch table the runtime needs to run its kernels (runtime/cuda/kernel.h),
 * written by the C-like emitter (codegen/cstyle/) in the CUDA dialect
 * (cuda.c), with this directory's tensor-core GEMM and attention.
 */
#ifndef MLC_CODEGEN_CUDA_H
#define MLC_CODEGEN_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codegen/cstyle/cstyle.h"
#include "ir/ir.h"
#include "runtime/cuda/kernel.h"
#include "runtime/status.h"

/* The module: the .cu text and its launch table (codegen/cstyle/cstyle.h). */
typedef mlc_cstyle_module mlc_cuda_module;

/* Emits the program (after memplan).  Everything lives in p's arena.
 * NULL, or the status of the node that cannot be emitted (its message
 * names the node; the codes are cc_emit_module's, codegen/cstyle/cc.h). */
MLC_MUST_USE mlc_status mlc_cuda_emit(const mlc_program *p, mlc_cuda_module *out);

/* Whether the emitters have a kernel for op (or it needs none): else
 * mlc_cuda_emit refuses it ("has no kernel for this op"). */
bool mlc_cuda_supports_op(mlc_op op);
/* Whether the kernel of n's op takes its shapes (attention_kv: head dims up
 * to 256), else why not, for an error at n's source. */
bool mlc_cuda_supports_node(const mlc_func *f, const mlc_node *n, char *why, size_t whyn);

/* A namer for mlc_plan_encode (codegen/plan.h): ctx is the module
 * (mlc_cstyle_kernel_namer, under the name the driver calls it by). */
const char *mlc_cuda_kernel_namer(void *ctx, const mlc_func *f, uint32_t node, uint64_t *out_work_items);

/* The largest head dim of the tensor-core attention kernels (forward and
 * gradient; emit_attention.c says which tiles take which); unit.c's rule
 * and the targets' attn_save_max_head (ir/target.c) follow it. */
#define MLC_CUDA_ATTN_MAX_HEAD 256

/* The unit rule of the CUDA kernels for mlc_plan_encode_units (codegen/cuda/unit.c). */
uint8_t mlc_cuda_kernel_unit(const mlc_program *p, const mlc_func *f, uint32_t node, uint8_t *out_products);

/* The helpers every module starts with (prelude.c). */
extern const char mlc_cuda_prelude[];

#endif
