/* qlinear: y[m, n] = sum_k x[m, k] dequant(w)[n, k], the weight packed as
 * runtime/quant.h lays it out (int8 or int4 codes, a scale per group of a
 * row, and asymmetric a min, bf16 or f32), dequantised in registers: the f32
 * weight is never formed.  The packed words are read as bytes (codes) and
 * as bf16 halves (scales), as a little-endian machine lays them out: bf16
 * scale g of a row is half g of its tail, asymmetric its scale half 2g and
 * its min 2g + 1.
 *
 * A work item is NB rows of w.  For each group of RB rows and each row of
 * x, per group of k: one load of x feeds RB rows' codes, loaded as bytes
 * and converted to f32, into RB group accumulators of L lanes.  int8: L
 * codes in L bytes.  int4: 2L codes in L bytes, the even elements' in the
 * low nibbles and the odd ones' in the high (sign-extended by i32 shifts),
 * so x's 2L elements are split into its even and odd lanes once, and each
 * row takes two FMAs, with no shuffle of its own.  At the group's end each
 * accumulator is scaled by its row's scale into the row's sum.
 * The scale is applied once a group, not once a weight.  L is the vector
 * width, halved until a step (L codes, 2L for int4) divides the group.  Rows past n read the last row
 * and are not stored.  Like the GEMV (emit_gemv.c), this streams the
 * weights once per row of x: it is meant for decode's few rows, and is
 * correct (if slower than a GEMM) for a prefill's or a forward's many.
 *
 * Asymmetric codes (--quantize ...:asym; unsigned: zero-extended, int4's
 * nibbles masked and shifted) add the group's min times the group's sum of
 * x, kept in one more accumulator that the RB rows share:
 * sum_j (lo + code_j s) x_j = s sum_j code_j x_j + lo sum_j x_j.
 */
#include "codegen/llvm/cg.h"

#define NB 16
#define RB 4

/* The low and the high nibbles of <h x i8> bytes as f32, sign-extended by
 * shifts on i32 lanes (x86 has no byte shifts); asymmetric codes unsigned. */
static void nibbles(cg *g, LLVMValueRef b, int h, bool asym, LLVMValueRef *lo, LLVMValueRef *hi) {
  LLVMTypeRef it = cg_vec(g->t_i32, h), ft = cg_vec(g->t_f32, h);
  if (asym) {
    LLVMValueRef v = LLVMBuildZExt(g->b, b, it, "");
    *lo = LLVMBuildSIToFP(g->b, LLVMBuildAnd(g->b, v, cg_const_bits(g, it, 15), ""), ft, "");
    *hi = LLVMBuildSIToFP(g->b, LLVMBuildLShr(g->b, v, cg_const_bits(g, it, 4), ""), ft, "");
    return;
  }
  LLVMValueRef v = LLVMBuildSExt(g->b, b, it, "");
  LLVMValueRef c28 = cg_const_bits(g, it, 28), c24 = cg_const_bits(g, it, 24);
  *lo = LLVMBuildSIToFP(g->b, LLVMBuildAShr(g->b, LLVMBuildShl(g->b, v, c28, ""), c28, ""), ft, "");
  *hi = LLVMBuildSIToFP(g->b, LLVMBuildAShr(g->b, LLVMBuildShl(g->b, v, c24, ""), c28, ""), ft, "");
}

/* Lanes first, first + 2, ... of v (2n lanes) as n lanes. */
static LLVMValueRef every_other(cg *g, LLVMValueRef v, int n, int first) {
  LLVMValueRef idx[32];
  for (int t = 0; t < n; t++) idx[t] = cg_i32(g, 2 * t + first);
  return LLVMBuildShuffleVector(g->b, v, LLVMGetUndef(LLVMTypeOf(v)), LLVMConstVector(idx, (unsigned)n), "");
}

bool cg_emit_qlinear(cg *g) {
  const mlc_node *n = g->n;
  const mlc_type *xt = &g->f->nodes[n->in[0]].type, *wt = &g->f->nodes[n->in[1]].type;
  int bits = n->a.qbits, group = n->a.qgroup, L = g->vw, per = bits == 4 ? 2 : 1; /* elements per lane a step */
  bool asym = n->a.qscheme & MLC_QS_ASYM, bf16 = n->a.qscheme & MLC_QS_BF16;
  while (L > 4 && group % (per * L)) L /= 2;
  if (group % (per * L) || L > 16) return cg_fail(g, "qlinear: a group of %d does not split into vectors", group);
  int64_t K = xt->dim[xt->rank - 1], N = wt->dim[0], M = mlc_type_numel(xt) / K, words = wt->dim[1];
  int64_t code_words = K * bits / 32, ngroups = K / group;
  cg_buf x = g->in[0], y = g->out;
  /* the packed rows as bytes, and as the scales' dtype (bf16: indices in halves) */
  cg_buf bytes = {g->in[1].p, MLC_DT_BOOL}, scales = {g->in[1].p, bf16 ? MLC_DT_BF16 : MLC_DT_F32};
  int64_t sw = bf16 ? 2 : 1;                     /* scales a word */
  int64_t gstep = bf16 && asym ? 2 : 1, minoff = bf16 ? 1 : ngroups; /* group g's scale at gstep g, its min minoff on */
  LLVMTypeRef vt = cg_ctype(g, MLC_DT_F32, L);
  g->items = cg_ceil_div(N, NB);

  cg_loop items, Lr, Lm, Lg, Lj;
  LLVMValueRef item = cg_items_begin(g, &items);
  LLVMValueRef n0 = cg_imulc(g, item, NB);
  LLVMValueRef nlen = cg_block_len(g, n0, N, NB);
  LLVMValueRef r = cg_for(g, &Lr, cg_i64(g, 0), nlen, RB);
  LLVMValueRef row[RB], row_byte[RB], row_scale[RB], row_min[RB];
  for (int i = 0; i < RB; i++) { /* rows past n read the last one; never stored */
    row[i] = cg_min_i64(g, cg_iadd(g, n0, cg_iaddc(g, r, i)), cg_i64(g, N - 1));
    row_byte[i] = cg_imulc(g, row[i], words * 4);
    row_scale[i] = cg_iaddc(g, cg_imulc(g, row[i], words * sw), code_words * sw);
    row_min[i] = asym ? cg_iaddc(g, row_scale[i], minoff) : NULL;
  }
  LLVMValueRef m = cg_for(g, &Lm, cg_i64(g, 0), cg_i64(g, M), 1);
  LLVMValueRef xrow = cg_imulc(g, m, K);
  LLVMValueRef gi = cg_for(g, &Lg, cg_i64(g, 0), cg_i64(g, ngroups), 1);
  LLVMValueRef acc[RB], next[RB + 1];
  for (int i = 0; i < RB; i++) acc[i] = cg_carry(g, &Lg, LLVMConstNull(vt));
  LLVMValueRef k0 = cg_imulc(g, gi, group);
  LLVMValueRef j = cg_for(g, &Lj, k0, cg_iaddc(g, k0, group), per * L);
  LLVMValueRef gacc[RB], xsum = NULL; /* xsum: the group's sum of x so far (asymmetric only) */
  for (int i = 0; i < RB; i++) gacc[i] = cg_carry(g, &Lj, LLVMConstNull(vt));
  if (asym) xsum = cg_carry(g, &Lj, LLVMConstNull(vt));
  if (bits == 8) { /* L codes, L bytes */
    LLVMValueRef xv = cg_load(g, x, cg_iadd(g, xrow, j), L, NULL);
    for (int i = 0; i < RB; i++) {
      LLVMValueRef b = cg_load_raw(g, bytes, cg_iadd(g, row_byte[i], j), L, NULL); /* <L x i8> */
      LLVMTypeRef it = cg_vec(g->t_i32, L);
      LLVMValueRef wi = asym ? LLVMBuildZExt(g->b, b, it, "") : LLVMBuildSExt(g->b, b, it, ""); /* unsigned or two's complement */
      next[i] = cg_fma(g, LLVMBuildSIToFP(g->b, wi, vt, ""), xv, gacc[i]);
    }
    if (asym) next[RB] = LLVMBuildFAdd(g->b, xsum, xv, "");
  } else { /* 2L codes, L bytes: the even elements' codes in the low nibbles, the odd ones' in the high */
    LLVMValueRef xv = cg_load(g, x, cg_iadd(g, xrow, j), 2 * L, NULL);
    LLVMValueRef xe = every_other(g, xv, L, 0), xo = every_other(g, xv, L, 1); /* once for RB rows */
    LLVMValueRef jb = LLVMBuildLShr(g->b, j, cg_i64(g, 1), "");
    for (int i = 0; i < RB; i++) {
      LLVMValueRef lo, hi;
      nibbles(g, cg_load_raw(g, bytes, cg_iadd(g, row_byte[i], jb), L, NULL), L, asym, &lo, &hi);
      next[i] = cg_fma(g, hi, xo, cg_fma(g, lo, xe, gacc[i]));
    }
    if (asym) next[RB] = LLVMBuildFAdd(g->b, LLVMBuildFAdd(g->b, xsum, xe, ""), xo, "");
  }
  cg_end_for(g, &Lj, next);
  LLVMValueRef gs = cg_imulc(g, gi, gstep);
  for (int i = 0; i < RB; i++) {
    LLVMValueRef s = cg_load(g, scales, cg_iadd(g, row_scale[i], gs), 1, NULL);
    next[i] = cg_fma(g, cg_splat(g, s, L), Lj.phi[i], acc[i]);
    if (asym) { /* + the group's min times its sum of x */
      LLVMValueRef lo = cg_load(g, scales, cg_iadd(g, row_min[i], gs), 1, NULL);
      next[i] = cg_fma(g, cg_splat(g, lo, L), Lj.phi[RB], next[i]);
    }
  }
  cg_end_for(g, &Lg, next);
  for (int i = 0; i < RB; i++) {
    cg_if_t in;
    cg_if(g, &in, LLVMBuildICmp(g->b, LLVMIntSLT, cg_iaddc(g, r, i), nlen, ""));
    cg_store(g, y, cg_iadd(g, cg_imulc(g, m, N), cg_iadd(g, n0, cg_iaddc(g, r, i))), cg_hsum(g, MLC_DT_F32, Lg.phi[i]), NULL);
    cg_endif(g, &in);
  }
  cg_end_for(g, &Lm, NULL);
  cg_end_for(g, &Lr, NULL);
  cg_end_for(g, &items, NULL);
  return true;
}
