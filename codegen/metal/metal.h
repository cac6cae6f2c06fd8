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

/* Emits the program (after memplan): MSL source (`source`) and the launch
 * table.  Everything lives in p's arena.  Returns false with a message in
 * err when some node cannot be emitted. */
bool mlc_metal_emit(const mlc_program *p, mlc_cstyle_module *out, char *err, size_t errn);

/* Whether the emitters have a kernel for op (or it needs none): else
 * mlc_metal_emit refuses it ("has no kernel for this op"). */
bool mlc_metal_supports_op(mlc_op op);

/* The helpers every module starts with (prelude.c). */
extern const char mlc_metal_prelude[];

#endif
