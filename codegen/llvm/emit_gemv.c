/* linear with few rows: y[m, n] = sum_k x[m, k] w[n, k] for x with at most
 * GEMV_MAX_M rows (a decode step's projections, batch 1).  The GEMM's
 * packing (w transposed into panels, x into strips of MR rows) costs more
 * than the product there, and most of the micro-tile's rows are empty; this
 * kernel streams w once, row by row, as it lies.
 *
 * A work item is NB rows of w.  For each group of RB rows and each row of
 * x, RB accumulators of vw lanes run along k: one load of x feeds RB fused
 * multiply-adds with RB rows of w (the last vector masked when vw does not
 * divide k), then each accumulator is summed across its lanes.  Rows past n
 * read the last row and are not stored.
 */
#include "codegen/llvm/cg.h"

#define GEMV_MAX_M 4
#define RB 4

bool cg_gemv_fits(const cg *g) {
  const mlc_node *n = g->n;
  if (n->op != MLC_OP_LINEAR) return false;
  const mlc_type *xt = &g->f->nodes[n->in[0]].type;
  int64_t K = xt->dim[xt->rank - 1];
  return K > 0 && mlc_type_numel(xt) / K <= GEMV_MAX_M;
}

bool cg_emit_gemv(cg *g) {
  const mlc_node *n = g->n;
  const mlc_type *xt = &g->f->nodes[n->in[0]].type, *wt = &g->f->nodes[n->in[1]].type;
  int vw = g->vw;
  int64_t K = xt->dim[xt->rank - 1], N = wt->dim[0], M = mlc_type_numel(xt) / K;
  int64_t NB = 64, kfull = K / vw * vw, ktail = K - kfull;
  cg_buf x = g->in[0], w = g->in[1], y = g->out;
  LLVMTypeRef vt = cg_ctype(g, MLC_DT_F32, vw);
  g->items = cg_ceil_div(N, NB);

  cg_loop items, Lr, Lk;
  LLVMValueRef item = cg_items_begin(g, &items);
  LLVMValueRef n0 = cg_imulc(g, item, NB);
  LLVMValueRef nlen = cg_block_len(g, n0, N, NB);
  LLVMValueRef r = cg_for(g, &Lr, cg_i64(g, 0), nlen, RB);
  LLVMValueRef wrow[RB];
  for (int i = 0; i < RB; i++) /* rows past n read the last one; never stored */
    wrow[i] = cg_imulc(g, cg_min_i64(g, cg_iadd(g, n0, cg_iaddc(g, r, i)), cg_i64(g, N - 1)), K);
  for (int64_t m = 0; m < M; m++) {
    LLVMValueRef acc[RB], next[RB];
    for (int i = 0; i < RB; i++) acc[i] = LLVMConstNull(vt);
    if (kfull) {
      LLVMValueRef j = cg_for(g, &Lk, cg_i64(g, 0), cg_i64(g, kfull), vw);
      LLVMValueRef cur[RB];
      for (int i = 0; i < RB; i++) cur[i] = cg_carry(g, &Lk, acc[i]);
      LLVMValueRef xv = cg_load(g, x, cg_iaddc(g, j, m * K), vw, NULL);
      for (int i = 0; i < RB; i++) next[i] = cg_fma(g, cg_load(g, w, cg_iadd(g, wrow[i], j), vw, NULL), xv, cur[i]);
      cg_end_for(g, &Lk, next);
      for (int i = 0; i < RB; i++) acc[i] = Lk.phi[i];
    }
    if (ktail) { /* masked lanes load as 0 */
      LLVMValueRef mask = cg_mask(g, vw, (int)ktail);
      LLVMValueRef xv = cg_load(g, x, cg_i64(g, m * K + kfull), vw, mask);
      for (int i = 0; i < RB; i++)
        acc[i] = cg_fma(g, cg_load(g, w, cg_iaddc(g, wrow[i], kfull), vw, mask), xv, acc[i]);
    }
    for (int i = 0; i < RB; i++) {
      cg_if_t in;
      cg_if(g, &in, LLVMBuildICmp(g->b, LLVMIntSLT, cg_iaddc(g, r, i), nlen, ""));
      cg_store(g, y, cg_iadd(g, cg_i64(g, m * N), cg_iadd(g, n0, cg_iaddc(g, r, i))), cg_hsum(g, MLC_DT_F32, acc[i]), NULL);
      cg_endif(g, &in);
    }
  }
  cg_end_for(g, &Lr, NULL);
  cg_end_for(g, &items, NULL);
  return true;
}
