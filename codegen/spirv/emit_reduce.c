/* Reductions over one axis (sum, mean, max) and softmax along one axis.
 *
 * The input is viewed as [outer, len, inner] around the axis.  With
 * inner == 1 the axis is contiguous: one workgroup of 256 threads per row,
 * strided over the row, then a shared-memory tree reduction.  Otherwise a
 * thread owns one (outer, inner) column and walks the axis (adjacent threads
 * read adjacent columns); a long axis (128 or more) is walked in chunks of
 * 64 by a thread per (chunk, column), the chunks then combined in order.  Float sums accumulate in f32, integer ones in
 * 32-bit (i32) or 64-bit (i64) integers, in a fixed order, so results are
 * the same every run; max propagates NaN, as torch.amax.  A max with
 * abs_in (the fuse pass's max(abs(x)), ir/ir.h) takes |x| as it loads.
 */
#include "codegen/spirv/emit.h"

#define RED_ROWS 64 /* a long axis across columns is summed in chunks of this many */

static bool is_f(int dt) { return mlc_dtype_is_float((mlc_dtype)dt); }

/* a = combine(a, v) for a float max / sum */
static uint32_t fcombine(sb *b, bool is_max, uint32_t a, uint32_t v) {
  if (!is_max) return sb_fadd(b, a, v);
  uint32_t take = sb_op2(b, SpvOpLogicalOr, b->t_bool, sb_op2(b, SpvOpFOrdGreaterThan, b->t_bool, v, a),
                         sb_op1(b, SpvOpIsNan, b->t_bool, v));
  return sb_select(b, b->t_f32, take, v, a);
}

/* Float element idx of the input: |x| for a max with abs_in. */
static uint32_t fload(sv *s, int dt, uint32_t idx) {
  uint32_t x = sb_load_f(s->b, 0, dt, idx);
  return s->n->a.abs_in ? sv_ew_value(s->b, MLC_OP_ABS, MLC_DT_F32, MLC_DT_F32, NULL, &x) : x; /* abs's own kernel code */
}

/* Integers: i32 and bool in u32, i64 in u64. */
static uint32_t iload(sb *b, int dt, uint32_t idx) {
  if (dt != MLC_DT_I64) return sb_load_bits(b, 0, dt, idx, NULL);
  uint32_t hi, lo = sb_load_bits(b, 0, dt, idx, &hi), t = sb_u64_type(b);
  return sb_op2(b, SpvOpBitwiseOr, t, sb_op2(b, SpvOpShiftLeftLogical, t, sb_op1(b, SpvOpUConvert, t, hi), sb_u32(b, 32)),
                sb_op1(b, SpvOpUConvert, t, lo));
}

static void istore(sb *b, uint32_t bind, int dt, uint32_t idx, uint32_t v) {
  if (dt != MLC_DT_I64) {
    sb_store_bits(b, bind, dt, idx, v, 0);
    return;
  }
  uint32_t t = sb_u64_type(b);
  sb_store_bits(b, bind, dt, idx, sb_op1(b, SpvOpUConvert, b->t_u32, v),
                sb_op1(b, SpvOpUConvert, b->t_u32, sb_op2(b, SpvOpShiftRightLogical, t, v, sb_u32(b, 32))));
}

/* Integer sum, max, or mean (truncating division). */
static uint32_t icombine(sb *b, int dt, bool is_max, uint32_t a, uint32_t v) {
  uint32_t t = dt == MLC_DT_I64 ? sb_u64_type(b) : b->t_u32;
  if (is_max) return sb_select(b, t, sb_op2(b, dt == MLC_DT_BOOL ? SpvOpUGreaterThan : SpvOpSGreaterThan, b->t_bool, v, a), v, a);
  return sb_op2(b, SpvOpIAdd, t, a, v);
}

static uint32_t iinit(sb *b, int dt, bool is_max) {
  if (dt == MLC_DT_I64) return sb_u64(b, is_max ? (uint64_t)1 << 63 : 0);
  if (dt == MLC_DT_I32) return sb_u32(b, is_max ? 0x80000000u : 0);
  return sb_u32(b, 0);
}

typedef struct {
  uint32_t base, M, inv;
  int dt;
} softmax_ctx;

static void softmax_elem(sv *s, void *vc, uint32_t j, uint32_t *lo, uint32_t *hi) {
  softmax_ctx *c = vc;
  sb *b = s->b;
  uint32_t x = sb_load_f(b, 0, c->dt, sb_add(b, c->base, j));
  *lo = sb_f2bits_dt(b, s->n->type.dtype, sb_fmul(b, sb_exp(b, sb_fsub(b, x, c->M)), c->inv));
  *hi = 0;
}

bool sv_emit_reduce(sv *s) {
  sb *b = s->b;
  const mlc_node *n = s->n;
  const mlc_type *it = sv_in(s, 0);
  int ax = n->a.axis, dt = it->dtype, odt = n->type.dtype;
  int64_t outer = 1, len = it->rank ? it->dim[ax] : 1, inner = 1;
  for (int k = 0; k < ax; k++) outer *= it->dim[k];
  for (int k = ax + 1; k < it->rank; k++) inner *= it->dim[k];
  if (!sv_check_size(s, mlc_type_numel(it))) return false;
  bool is_max = n->op == MLC_OP_MAX, softmax = n->op == MLC_OP_SOFTMAX, mean = n->op == MLC_OP_MEAN, fl = is_f(dt);
  if (softmax && !fl) return sv_fail(s, "softmax of an integer tensor");
  uint32_t ot = sv_out(s);

  if (!fl) { /* integers: a thread per output element, in order */
    uint32_t t = dt == MLC_DT_I64 ? sb_u64_type(b) : b->t_u32;
    sv_gs g;
    uint32_t col = sv_items_begin(s, &g, outer * inner);
    uint32_t base = sb_add(b, sb_mulc(b, sb_div(b, col, sb_u32(b, (uint32_t)inner)), (uint32_t)(len * inner)),
                           sb_mod(b, col, sb_u32(b, (uint32_t)inner)));
    sb_lv a = sb_local(b, t, iinit(b, dt, is_max));
    sb_loop l;
    uint32_t j = sb_for(b, &l, sb_u32(b, 0), sb_u32(b, (uint32_t)len), sb_u32(b, 1));
    sb_st(b, a, icombine(b, dt, is_max, sb_ld(b, a), iload(b, dt, sb_add(b, base, sb_mulc(b, j, (uint32_t)inner)))));
    sb_for_end(b, &l);
    uint32_t r = sb_ld(b, a);
    if (mean) {
      uint32_t d = dt == MLC_DT_I64 ? sb_u64(b, (uint64_t)len) : sb_u32(b, (uint32_t)len);
      r = sb_op2(b, SpvOpSDiv, t, r, d);
    }
    istore(b, ot, odt, col, r);
    sv_items_end(s, &g);
    return true;
  }

  uint32_t init = is_max ? sb_f32(b, -__builtin_inff()) : sb_f32(b, 0.f);
  if (inner == 1) {
    uint32_t sh = sb_shared(b, b->t_f32, SV_THREADS);
    sv_rows rw;
    uint32_t row = sv_rows_begin(s, &rw, outer, SV_THREADS);
    uint32_t lid = sb_lid(b), base = sb_mulc(b, row, (uint32_t)len), L = sb_u32(b, (uint32_t)len), T = sb_u32(b, SV_THREADS);
    sb_loop l;
    if (!softmax) {
      sb_lv a = sb_local(b, b->t_f32, init);
      uint32_t j = sb_for(b, &l, lid, L, T);
      sb_st(b, a, fcombine(b, is_max, sb_ld(b, a), fload(s, dt, sb_add(b, base, j))));
      sb_for_end(b, &l);
      uint32_t r = sb_wg_reduce(b, sh, sb_ld(b, a), is_max);
      if (mean) r = sb_fdiv(b, r, sb_f32(b, (float)len));
      sb_if w;
      sb_if_begin(b, &w, sb_ieq(b, lid, sb_u32(b, 0)), false);
      sb_store_f(b, ot, odt, row, r);
      sb_if_end(b, &w);
    } else {
      sb_lv m = sb_local(b, b->t_f32, init);
      uint32_t j = sb_for(b, &l, lid, L, T);
      sb_st(b, m, sb_fmax(b, sb_ld(b, m), sb_load_f(b, 0, dt, sb_add(b, base, j))));
      sb_for_end(b, &l);
      uint32_t M = sb_wg_reduce(b, sh, sb_ld(b, m), true);
      sb_lv a = sb_local(b, b->t_f32, sb_f32(b, 0.f));
      j = sb_for(b, &l, lid, L, T);
      sb_st(b, a, sb_fadd(b, sb_ld(b, a), sb_exp(b, sb_fsub(b, sb_load_f(b, 0, dt, sb_add(b, base, j)), M))));
      sb_for_end(b, &l);
      softmax_ctx c = {base, M, sb_fdiv(b, sb_f32(b, 1.f), sb_wg_reduce(b, sh, sb_ld(b, a), false)), dt};
      sv_row_store(s, base, len, ot, odt, softmax_elem, &c);
    }
    sv_rows_end(s, &rw);
    return true;
  }

  int64_t cols = outer * inner;
  if (!softmax && len >= 2 * RED_ROWS && cols * sv_ceil_div(len, RED_ROWS) < ((int64_t)1 << 31)) {
    /* long axes (bias gradients: a sum over every token): the axis in
     * chunks of RED_ROWS, a thread per (chunk, column) into scratch, then a
     * thread per column combines its chunks in order */
    int64_t nch = sv_ceil_div(len, RED_ROWS), ncb = sv_ceil_div(cols, SV_THREADS);
    uint32_t sc = sv_scratch(s);
    s->scratch = (uint64_t)(nch * cols) * 4;
    uint32_t grp = sv_begin(s, (uint64_t)(nch * ncb), SV_THREADS);
    uint32_t chunk = sb_div(b, grp, sb_u32(b, (uint32_t)ncb));
    uint32_t col = sb_add(b, sb_mulc(b, sb_mod(b, grp, sb_u32(b, (uint32_t)ncb)), SV_THREADS), sb_lid(b));
    sb_if in;
    sb_if_begin(b, &in, sb_land(b, sb_ult(b, chunk, sb_u32(b, (uint32_t)nch)), sb_ult(b, col, sb_u32(b, (uint32_t)cols))), false);
    uint32_t base = sb_add(b, sb_mulc(b, sb_div(b, col, sb_u32(b, (uint32_t)inner)), (uint32_t)(len * inner)),
                           sb_mod(b, col, sb_u32(b, (uint32_t)inner)));
    uint32_t j0 = sb_mulc(b, chunk, RED_ROWS), lim[2] = {sb_addc(b, j0, RED_ROWS), sb_u32(b, (uint32_t)len)};
    sb_lv a = sb_local(b, b->t_f32, init);
    sb_loop l;
    uint32_t j = sb_for(b, &l, j0, sb_glsl(b, GLSLstd450UMin, b->t_u32, 2, lim), sb_u32(b, 1));
    sb_st(b, a, fcombine(b, is_max, sb_ld(b, a), fload(s, dt, sb_add(b, base, sb_mulc(b, j, (uint32_t)inner)))));
    sb_for_end(b, &l);
    sb_stw(b, sc, sb_add(b, sb_mulc(b, chunk, (uint32_t)cols), col), sb_f2bits(b, sb_ld(b, a)));
    sb_if_end(b, &in);
    sv_end(s);
    sv_gs g;
    col = sv_items_begin(s, &g, cols);
    a = sb_local(b, b->t_f32, init);
    uint32_t k = sb_for(b, &l, sb_u32(b, 0), sb_u32(b, (uint32_t)nch), sb_u32(b, 1));
    sb_st(b, a, fcombine(b, is_max, sb_ld(b, a), sb_bits2f(b, sb_ldw(b, sc, sb_add(b, sb_mulc(b, k, (uint32_t)cols), col)))));
    sb_for_end(b, &l);
    uint32_t r = sb_ld(b, a);
    if (mean) r = sb_fdiv(b, r, sb_f32(b, (float)len));
    sb_store_f(b, ot, odt, col, r);
    sv_items_end(s, &g);
    return true;
  }

  sv_gs g;
  uint32_t col = sv_items_begin(s, &g, cols);
  uint32_t base = sb_add(b, sb_mulc(b, sb_div(b, col, sb_u32(b, (uint32_t)inner)), (uint32_t)(len * inner)),
                         sb_mod(b, col, sb_u32(b, (uint32_t)inner)));
  uint32_t L = sb_u32(b, (uint32_t)len), one = sb_u32(b, 1);
  sb_loop l;
  if (!softmax) {
    sb_lv a = sb_local(b, b->t_f32, init);
    uint32_t j = sb_for(b, &l, sb_u32(b, 0), L, one);
    sb_st(b, a, fcombine(b, is_max, sb_ld(b, a), fload(s, dt, sb_add(b, base, sb_mulc(b, j, (uint32_t)inner)))));
    sb_for_end(b, &l);
    uint32_t r = sb_ld(b, a);
    if (mean) r = sb_fdiv(b, r, sb_f32(b, (float)len));
    sb_store_f(b, ot, odt, col, r);
  } else {
    sb_lv m = sb_local(b, b->t_f32, init), a = sb_local(b, b->t_f32, sb_f32(b, 0.f));
    uint32_t j = sb_for(b, &l, sb_u32(b, 0), L, one);
    sb_st(b, m, sb_fmax(b, sb_ld(b, m), sb_load_f(b, 0, dt, sb_add(b, base, sb_mulc(b, j, (uint32_t)inner)))));
    sb_for_end(b, &l);
    uint32_t M = sb_ld(b, m);
    j = sb_for(b, &l, sb_u32(b, 0), L, one);
    sb_st(b, a, sb_fadd(b, sb_ld(b, a), sb_exp(b, sb_fsub(b, sb_load_f(b, 0, dt, sb_add(b, base, sb_mulc(b, j, (uint32_t)inner))), M))));
    sb_for_end(b, &l);
    uint32_t inv = sb_fdiv(b, sb_f32(b, 1.f), sb_ld(b, a));
    j = sb_for(b, &l, sb_u32(b, 0), L, one);
    uint32_t at = sb_add(b, base, sb_mulc(b, j, (uint32_t)inner));
    sb_store_f(b, ot, odt, at, sb_fmul(b, sb_exp(b, sb_fsub(b, sb_load_f(b, 0, dt, at), M)), inv));
    sb_for_end(b, &l);
  }
  sv_items_end(s, &g);
  return true;
}
