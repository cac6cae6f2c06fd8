/* A GEMM as every code generator sees it (CUDA, Metal, SPIR-V):
 *   C[b][M,N] = A[b][M,K] B[b][K,N], f32 accumulation, C dense row-major;
 *   a_km: A stored [K,M] (matmul_tn) else [M,K]; b_nk: B stored [N,K]
 *   (linear's weight) else [K,N]; nb batch dims of sizes bdim[] with element
 *   strides bsa[] (A) and bsb[] (B), 0 along a broadcast one.  A MATMUL whose
 *   B is the same for every batch and whose A is dense has its batch folded
 *   into M; LINEAR flattens x's leading dims into M. */
#ifndef MLC_CODEGEN_GEMM_SHAPE_H
#define MLC_CODEGEN_GEMM_SHAPE_H

#include <stdbool.h>
#include <stdint.h>

#include "ir/ir.h"

typedef struct {
  int dt; /* mlc_dtype of C (the output) */
  int64_t M, N, K;
  bool a_km, b_nk;
  int nb; /* batch dims, outermost first */
  int64_t bdim[MLC_MAX_RANK], bsa[MLC_MAX_RANK], bsb[MLC_MAX_RANK];
} mlc_gemm_shape;

/* For op MATMUL, MATMUL_TN or LINEAR with operands a, b and output o. */
void mlc_gemm_shape_of(int op, const mlc_type *a, const mlc_type *b, const mlc_type *o, mlc_gemm_shape *d);
/* The product of bdim[]. */
int64_t mlc_gemm_batch(const mlc_gemm_shape *d);

#endif
