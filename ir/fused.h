/* The sub-program of a FUSED node (made by the fuse pass, GPU targets only).
 *
 * A fused node stands for a group of ops that run as one kernel, one pass
 * over memory.  Its inputs are the group's inputs from outside; its result
 * is the group's last op's; what happens in between is a short program in
 * the node's name attribute (an arena string), printed with the node, one
 * op per instruction, separated by "; ":
 *
 *   %31 = fused %28, %29, %4 "cast.bf16($1); add($0, #0); add($2, #1)" : bf16[8, 1024, 2048]
 *
 * An instruction is an op name from ir/ops.def (for cast and scaled_mm,
 * ".<dtype>" names the result dtype) and its operands: $k the node's input k, #j the result
 * of instruction j < this one.  Every op is elementwise (EW flag), except
 * that instruction 0 may be a GEMM (matmul, linear, matmul_tn, or, on CUDA,
 * qlinear, written "qlinear.<bits>.<group>", then ".asym" for the
 * asymmetric scheme and ".sf32" for f32 scales) of $0 and $1, or (CUDA) a
 * scaled_mm of $0 .. $3 (the FP8 operands and their amaxes; written
 * "scaled_mm.<dtype>"): the rest of the
 * program is then that GEMM's epilogue, applied as its results are stored.
 * On CUDA a GEMM may also have a prologue: instruction 0 an rmsnorm of $0
 * (weight $2 if it has one), written "rmsnorm.<eps>", and instruction 1 a
 * linear of #0 and $1 with at most the target's gemv_prologue_rows rows:
 * the matrix-vector kernel normalises x first, so a decode step's norm is
 * no launch of its own.  The epilogue's own inputs then start at $3 ($2
 * without a norm weight).
 * Each instruction's type comes from its op's shape
 * rule (ir/shape.c), so the op table stays the one source of truth; values
 * are rounded to each instruction's dtype as the unfused ops would have
 * stored them, so a fused group computes exactly what its parts did.
 */
#ifndef MLC_IR_FUSED_H
#define MLC_IR_FUSED_H

#include "ir/ir.h"

#define MLC_FUSED_MAX 32 /* instructions */
#define MLC_FUSED_MAX_IN 16 /* inputs of a fused node */

typedef struct {
  uint16_t op;     /* mlc_op */
  uint8_t nin;
  int16_t arg[4];  /* >= 0: instruction; < 0: node input -1 - arg (four: scaled_mm's; else two at most) */
  mlc_type type;   /* from the op's shape rule (cast: dtype from the text) */
  int32_t qbits, qgroup; /* qlinear: from the text, as the node's attributes */
  uint8_t qscheme;       /* qlinear: MLC_QS_*: ".asym" after the group, then ".sf32" for f32 scales (bf16 without) */
  double eps;            /* rmsnorm (a prologue): from the text */
} mlc_fused_ins;

typedef struct {
  uint32_t n;
  int32_t gemm;   /* the GEMM's instruction: 0, 1 after a prologue, -1 in an elementwise program */
  uint32_t epi_in; /* the first input the epilogue reads (2 after a GEMM, 4 after a scaled_mm, 3 after a prologue with a norm weight) */
  mlc_fused_ins ins[MLC_FUSED_MAX];
} mlc_fused_prog;

/* Parses n's program and types every instruction (ir/shape.c).  On failure
 * writes a one-line message to err and returns false. */
bool mlc_fused_program(const mlc_func *f, const mlc_node *n, mlc_fused_prog *pr, char *err, size_t errn);

#endif
