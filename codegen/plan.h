/* Plan encoding: the compiler's side of runtime/plan.h.  Every target
 * writes its plan through this, so there is one writer of the format. */
#ifndef MLC_CODEGEN_PLAN_H
#define MLC_CODEGEN_PLAN_H

#include "ir/ir.h"

/* Names the kernel that runs node `node` of `f`, or returns NULL when the
 * node needs no step (inputs, parameters, views).  Nodes that return the
 * same name share one kernel entry. */
typedef const char *(*mlc_kernel_namer)(void *ctx, const mlc_func *f, uint32_t node, uint64_t *out_work_items);

/* The arithmetic unit (MLC_PLAN_UNIT_* of runtime/plan.h) that the
 * target's kernel for node `node` runs its FLOPs on, and the unit's
 * products per FLOP of the model (3 for tf32x3). */
typedef uint8_t (*mlc_kernel_unit)(const mlc_program *p, const mlc_func *f, uint32_t node, uint8_t *out_products);

/* Encodes the program (after memplan) as a plan.  The bytes live in the
 * program's arena.  Every step's unit is FP32 (a CPU's). */
void mlc_plan_encode(const mlc_program *p, mlc_kernel_namer namer, void *ctx, uint8_t **out, size_t *out_n);
/* The same, with each step's unit from unit_of. */
void mlc_plan_encode_units(const mlc_program *p, mlc_kernel_namer namer, void *ctx, mlc_kernel_unit unit_of, uint8_t **out,
                           size_t *out_n);
/* A unit rule for targets with matrix units for 16-bit types only (Vulkan's
 * cooperative matrices, Metal's simdgroup matrices): matmul-like ops on
 * bf16/f16 inputs are TC16, everything else FP32. */
uint8_t mlc_plan_unit_16bit_matrix(const mlc_program *p, const mlc_func *f, uint32_t node, uint8_t *out_products);
/* The matrix product a step runs, for the unit rules: node itself when it
 * is matmul-like (MLC_F_MM), or a fused group whose instruction 0 is a GEMM
 * of its inputs 0 and 1 (ir/fused.h).  Sets *op and *a (the first
 * operand's type) and returns true; false for anything else. */
bool mlc_plan_mm_of(const mlc_func *f, uint32_t node, uint16_t *op, const mlc_type **a);

#endif
