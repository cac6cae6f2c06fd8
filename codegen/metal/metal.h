/* The Metal code generator: one Metal Shading Language source for a whole
 * program, and the launch table its runtime runs the kernels by, written by
 * the C-like emitter (codegen/cstyle/) in the MSL dialect (metal.c), with
 * this directory's simdgroup_matrix GEMM and attention.
 */
#ifndef MLC_CODEGEN_METAL_H
#define MLC_CODEGEN_METAL_H

#include <stdbool.h>
#include <stddef.h>

#include "codegen/cstyle/cstyle.h"
#include "ir/ir.h"
#include "runtime/status.h"

/* Emits the program (after memplan): MSL source (`source`) and the launch
 * table.  Everything lives in p's arena.  NULL, or the status of the node
 * that cannot be emitted (as mlc_cuda_emit's). */
MLC_MUST_USE mlc_status mlc_metal_emit(const mlc_program *p, mlc_cstyle_module *out);

/* Whether the emitters have a kernel for op (or it needs none): else
 * mlc_metal_emit refuses it ("has no kernel for this op"). */
bool mlc_metal_supports_op(mlc_op op);
/* Whether a supported op's kernel takes this node's shapes (attention_kv's
 * head dim); else false with the reason in why. */
bool mlc_metal_supports_node(const mlc_func *f, const mlc_node *n, char *why, size_t whyn);

/* The helpers every module starts with (prelude.c). */
extern const char mlc_metal_prelude[];

#endif
