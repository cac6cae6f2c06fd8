/* Plan encoding: the compiler's side of runtime/plan.h.  Every target
 * writes its plan through this, so there is one writer of the format. */
#ifndef MLC_CODEGEN_PLAN_H
#define MLC_CODEGEN_PLAN_H

#include "ir/ir.h"

/* Names the kernel that runs node `node` of `f`, or returns NULL when the
 * node needs no step (inputs, parameters, views).  Nodes that return the
 * same name share one kernel entry. */
typedef const char *(*mlc_kernel_namer)(void *ctx, const mlc_func *f, uint32_t node, uint64_t *out_work_items);

/* Encodes the program (after memplan) as a plan.  The bytes live in the
 * program's arena. */
void mlc_plan_encode(const mlc_program *p, mlc_kernel_namer namer, void *ctx, uint8_t **out, size_t *out_n);

#endif
