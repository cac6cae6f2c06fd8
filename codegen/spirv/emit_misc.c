/* embedding and its gradient, cross_entropy and its gradient, and the
 * optimizer updates (adamw, sgd), as the CPU target computes them
 * (codegen/llvm/emit_layout.c, emit_reduce.c, emit_optim.c).
 *
 * embedding: out[t, :] = weight[idx[t], :], zeros for an index outside
 * [0, v); a thread per output element, bits copied.
 *
 * embedding_grad: dw[k, :] = sum of g[t, :] over the tokens t with
 * idx[t] == k, in token order (deterministic, the CPU target's order, no
 * float atomics):
 *   0: head[k] = INT_MAX (scratch, int per row);
 *   1: head[idx[t]] = min over t (atomic min on ints: order-free);
 *   2: a workgroup per (row k, 256 columns): zeros when no token names k,
 *      else the tokens from head[k] on, in order, adding those equal to k.
 *
 * cross_entropy: mean over rows of logsumexp(row) - row[target]; rows with
 * a target outside [0, C) are skipped and left out of the mean.
 *   0: a workgroup per row (max, then sum of exp, tree reductions), the
 *      row's loss and whether it counts into scratch;
 *   1: one workgroup adds them (a fixed order) and divides.
 * cross_entropy_grad: (softmax(row) - onehot(target)) * g / n, n the number
 * of valid targets, zero rows for the others.
 *   0: one workgroup counts the valid targets into scratch;
 *   1: a workgroup per row.
 *
 * adamw / sgd: a thread per element of the parameter, which is updated in
 * place with its state (inputs 0, 2, 3); the token output is left alone.
 * The bias corrections 1 - beta^t are computed per thread in f32 as
 * -expm1(t ln beta) (a short series where |t ln beta| < 0.5), which keeps
 * their relative error near f32's epsilon where 1 - pow() would cancel.
 */
#include <math.h>

#include "codegen/spirv/emit.h"

/* An index element of an i32 / i64 tensor: *k its value as u32, returns
 * whether it lies in [0, n). */
static uint32_t index_at(sb *b, uint32_t bind, int dt, uint32_t at, int64_t n, uint32_t *k) {
  uint32_t hi = 0;
  *k = sb_load_i(b, bind, dt, at, dt == MLC_DT_I64 ? &hi : NULL);
  uint32_t ok = sb_ult(b, *k, sb_u32(b, (uint32_t)n));
  if (dt == MLC_DT_I64) ok = sb_land(b, ok, sb_ieq(b, hi, sb_u32(b, 0)));
  return ok;
}

static void embedding_elem(sv *s, void *ctx, uint32_t i, uint32_t *lo, uint32_t *hi) {
  sb *b = s->b;
  const mlc_type *wt = sv_in(s, 0), *it = sv_in(s, 1);
  int64_t V = wt->dim[0], D = wt->dim[1];
  (void)ctx;
  uint32_t t = sb_div(b, i, sb_u32(b, (uint32_t)D)), d = sb_mod(b, i, sb_u32(b, (uint32_t)D)), k;
  uint32_t ok = index_at(b, 1, it->dtype, t, V, &k);
  uint32_t at = sb_select(b, b->t_u32, ok, sb_add(b, sb_mulc(b, k, (uint32_t)D), d), sb_u32(b, 0)), h = 0;
  uint32_t l = sb_load_bits(b, 0, wt->dtype, at, &h), zero = sb_u32(b, 0);
  *lo = sb_select(b, b->t_u32, ok, l, zero);
  *hi = h ? sb_select(b, b->t_u32, ok, h, zero) : 0;
}

static bool emit_embedding(sv *s) {
  const mlc_type *wt = sv_in(s, 0), *it = sv_in(s, 1);
  int64_t V = wt->dim[0], D = wt->dim[1], N = mlc_type_numel(it);
  if (!sv_check_size(s, N * D) || !sv_check_size(s, V * D)) return false;
  sv_items_store(s, N * D, sv_out(s), wt->dtype, embedding_elem, NULL);
  return true;
}

static bool emit_embedding_grad(sv *s) {
  sb *b = s->b;
  const mlc_node *n = s->n;
  const mlc_type *gt = sv_in(s, 0), *it = sv_in(s, 1);
  int64_t V = n->type.dim[0], D = n->type.dim[1], N = mlc_type_numel(it);
  if (!sv_check_size(s, V * D) || !sv_check_size(s, N * D)) return false;
  uint32_t sc = sv_scratch(s), INTMAX = sb_u32(b, 0x7fffffffu);
  s->scratch = (uint64_t)V * 4;
  sv_gs g;
  uint32_t k = sv_items_begin(s, &g, V);
  sb_stw(b, sc, k, INTMAX);
  sv_items_end(s, &g);

  uint32_t t = sv_items_begin(s, &g, N > 0 ? N : 1);
  if (N > 0) {
    uint32_t ok = index_at(b, 1, it->dtype, t, V, &k);
    sb_if f;
    sb_if_begin(b, &f, ok, false);
    sb_atomic(b, SpvOpAtomicSMin, sc, k, t);
    sb_if_end(b, &f);
  }
  sv_items_end(s, &g);

  int64_t nch = sv_ceil_div(D, SV_THREADS);
  sv_rows rw;
  uint32_t blk = sv_rows_begin(s, &rw, V * nch, SV_THREADS);
  k = sb_div(b, blk, sb_u32(b, (uint32_t)nch));
  uint32_t col = sb_add(b, sb_mulc(b, sb_mod(b, blk, sb_u32(b, (uint32_t)nch)), SV_THREADS), sb_lid(b));
  uint32_t h = sb_ldw(b, sc, k);
  sb_lv acc = sb_local(b, b->t_f32, sb_f32(b, 0.f));
  sb_if named;
  sb_if_begin(b, &named, sb_op2(b, SpvOpINotEqual, b->t_bool, h, INTMAX), false);
  sb_loop l;
  uint32_t tt = sb_for(b, &l, h, sb_u32(b, (uint32_t)N), sb_u32(b, 1)), kk;
  uint32_t ok = index_at(b, 1, it->dtype, tt, V, &kk);
  sb_if m;
  sb_if_begin(b, &m, sb_land(b, sb_land(b, ok, sb_ieq(b, kk, k)), sb_ult(b, col, sb_u32(b, (uint32_t)D))), false);
  sb_st(b, acc, sb_fadd(b, sb_ld(b, acc), sb_load_f(b, 0, gt->dtype, sb_add(b, sb_mulc(b, tt, (uint32_t)D), col))));
  sb_if_end(b, &m);
  sb_for_end(b, &l);
  sb_if_end(b, &named);
  sb_if w;
  sb_if_begin(b, &w, sb_ult(b, col, sb_u32(b, (uint32_t)D)), false);
  sb_store_f(b, sv_out(s), n->type.dtype, sb_add(b, sb_mulc(b, k, (uint32_t)D), col), sb_ld(b, acc));
  sb_if_end(b, &w);
  sv_rows_end(s, &rw);
  return true;
}

/* The row's max M and sum of exp(x - M) S (every thread gets them). */
static void row_lse(sb *b, uint32_t sh, uint32_t bind, int dt, uint32_t base, int64_t C, uint32_t *M, uint32_t *S) {
  uint32_t lid = sb_lid(b), L = sb_u32(b, (uint32_t)C), T = sb_u32(b, SV_THREADS);
  sb_lv m = sb_local(b, b->t_f32, sb_f32(b, -__builtin_inff())), a = sb_local(b, b->t_f32, sb_f32(b, 0.f));
  sb_loop l;
  uint32_t j = sb_for(b, &l, lid, L, T);
  sb_st(b, m, sb_fmax(b, sb_ld(b, m), sb_load_f(b, bind, dt, sb_add(b, base, j))));
  sb_for_end(b, &l);
  *M = sb_wg_reduce(b, sh, sb_ld(b, m), true);
  j = sb_for(b, &l, lid, L, T);
  sb_st(b, a, sb_fadd(b, sb_ld(b, a), sb_exp(b, sb_fsub(b, sb_load_f(b, bind, dt, sb_add(b, base, j)), *M))));
  sb_for_end(b, &l);
  *S = sb_wg_reduce(b, sh, sb_ld(b, a), false);
}

static bool emit_cross_entropy(sv *s) {
  sb *b = s->b;
  const mlc_type *lt = sv_in(s, 0), *tt = sv_in(s, 1);
  int dt = lt->dtype;
  int64_t C = lt->dim[lt->rank - 1], R = C ? mlc_type_numel(lt) / C : 0;
  if (R == 0 || C == 0) return sv_fail(s, "empty cross_entropy");
  if (!sv_check_size(s, R * C)) return false;
  uint32_t sc = sv_scratch(s), sh = sb_shared(b, b->t_f32, SV_THREADS);
  s->scratch = (uint64_t)R * 8;
  sv_rows rw;
  uint32_t row = sv_rows_begin(s, &rw, R, SV_THREADS), M, S, k;
  uint32_t base = sb_mulc(b, row, (uint32_t)C);
  row_lse(b, sh, 0, dt, base, C, &M, &S);
  sb_if w;
  sb_if_begin(b, &w, sb_ieq(b, sb_lid(b), sb_u32(b, 0)), false);
  uint32_t ok = index_at(b, 1, tt->dtype, row, C, &k);
  uint32_t kc = sb_select(b, b->t_u32, ok, k, sb_u32(b, 0));
  uint32_t loss = sb_fsub(b, sb_fadd(b, M, sb_glsl1(b, GLSLstd450Log, b->t_f32, S)), sb_load_f(b, 0, dt, sb_add(b, base, kc)));
  sb_stw(b, sc, row, sb_f2bits(b, sb_select(b, b->t_f32, ok, loss, sb_f32(b, 0.f))));
  sb_stw(b, sc, sb_addc(b, row, (uint32_t)R), sb_f2bits(b, sb_select(b, b->t_f32, ok, sb_f32(b, 1.f), sb_f32(b, 0.f))));
  sb_if_end(b, &w);
  sv_rows_end(s, &rw);

  sv_begin(s, 1, SV_THREADS);
  uint32_t lid = sb_lid(b);
  sb_lv a = sb_local(b, b->t_f32, sb_f32(b, 0.f)), c = sb_local(b, b->t_f32, sb_f32(b, 0.f));
  sb_loop l;
  uint32_t r = sb_for(b, &l, lid, sb_u32(b, (uint32_t)R), sb_u32(b, SV_THREADS));
  sb_st(b, a, sb_fadd(b, sb_ld(b, a), sb_bits2f(b, sb_ldw(b, sc, r))));
  sb_st(b, c, sb_fadd(b, sb_ld(b, c), sb_bits2f(b, sb_ldw(b, sc, sb_addc(b, r, (uint32_t)R)))));
  sb_for_end(b, &l);
  uint32_t sum = sb_wg_reduce(b, sh, sb_ld(b, a), false), cnt = sb_wg_reduce(b, sh, sb_ld(b, c), false);
  sb_if_begin(b, &w, sb_ieq(b, lid, sb_u32(b, 0)), false);
  sb_store_f(b, sv_out(s), s->n->type.dtype, sb_u32(b, 0), sb_fdiv(b, sum, cnt));
  sb_if_end(b, &w);
  sv_end(s);
  return true;
}

typedef struct {
  uint32_t base, M, inv, k, f;
  int dt;
} ce_ctx;

/* (softmax - onehot) * g / n */
static void ce_grad_elem(sv *s, void *vc, uint32_t j, uint32_t *lo, uint32_t *hi) {
  ce_ctx *c = vc;
  sb *b = s->b;
  uint32_t p = sb_fmul(b, sb_exp(b, sb_fsub(b, sb_load_f(b, 1, c->dt, sb_add(b, c->base, j)), c->M)), c->inv);
  p = sb_select(b, b->t_f32, sb_ieq(b, j, c->k), sb_fsub(b, p, sb_f32(b, 1.f)), p);
  *lo = sb_f2bits_dt(b, s->n->type.dtype, sb_fmul(b, p, c->f));
  *hi = 0;
}

static void zero_elem(sv *s, void *ctx, uint32_t j, uint32_t *lo, uint32_t *hi) {
  (void)ctx, (void)j;
  *lo = sb_u32(s->b, 0);
  *hi = 0;
}

static bool emit_cross_entropy_grad(sv *s) {
  sb *b = s->b;
  const mlc_node *n = s->n;
  const mlc_type *lt = sv_in(s, 1), *tt = sv_in(s, 2);
  int dt = lt->dtype, odt = n->type.dtype;
  int64_t C = lt->dim[lt->rank - 1], R = C ? mlc_type_numel(lt) / C : 0;
  if (R == 0 || C == 0) return sv_fail(s, "empty cross_entropy_grad");
  if (!sv_check_size(s, R * C)) return false;
  uint32_t sc = sv_scratch(s), sh = sb_shared(b, b->t_f32, SV_THREADS);
  s->scratch = 8;

  sv_begin(s, 1, SV_THREADS);
  uint32_t lid = sb_lid(b), k;
  sb_lv cnt_v = sb_local(b, b->t_f32, sb_f32(b, 0.f));
  sb_loop l;
  uint32_t r = sb_for(b, &l, lid, sb_u32(b, (uint32_t)R), sb_u32(b, SV_THREADS));
  uint32_t ok = index_at(b, 2, tt->dtype, r, C, &k);
  sb_st(b, cnt_v, sb_fadd(b, sb_ld(b, cnt_v), sb_select(b, b->t_f32, ok, sb_f32(b, 1.f), sb_f32(b, 0.f))));
  sb_for_end(b, &l);
  uint32_t cnt = sb_wg_reduce(b, sh, sb_ld(b, cnt_v), false);
  sb_if w;
  sb_if_begin(b, &w, sb_ieq(b, lid, sb_u32(b, 0)), false);
  sb_stw(b, sc, sb_u32(b, 0), sb_f2bits(b, cnt));
  sb_if_end(b, &w);
  sv_end(s);

  sv_rows rw;
  uint32_t row = sv_rows_begin(s, &rw, R, SV_THREADS);
  lid = sb_lid(b);
  uint32_t base = sb_mulc(b, row, (uint32_t)C);
  ok = index_at(b, 2, tt->dtype, row, C, &k);
  sb_if v;
  sb_if_begin(b, &v, ok, true);
  uint32_t M, S;
  row_lse(b, sh, 1, dt, base, C, &M, &S);
  ce_ctx cc = {.base = base, .M = M, .inv = sb_fdiv(b, sb_f32(b, 1.f), S), .k = k, .dt = dt,
               .f = sb_fdiv(b, sb_load_f(b, 0, sv_in(s, 0)->dtype, sb_u32(b, 0)), sb_bits2f(b, sb_ldw(b, sc, sb_u32(b, 0))))};
  sv_row_store(s, base, C, sv_out(s), odt, ce_grad_elem, &cc);
  sb_if_else(b, &v);
  sv_row_store(s, base, C, sv_out(s), odt, zero_elem, NULL);
  sb_if_end(b, &v);
  sv_rows_end(s, &rw);
  return true;
}

/* 1 - beta^t for f32 t, as -expm1(t ln beta). */
static uint32_t one_minus_pow(sb *b, uint32_t t, double beta) {
  uint32_t x = sb_fmul(b, t, sb_f32(b, (float)log(beta)));
  uint32_t p = sb_f32(b, 1.f);
  for (int k = 7; k >= 2; k--) p = sb_fma(b, sb_fmul(b, x, sb_f32(b, 1.f / (float)k)), p, sb_f32(b, 1.f));
  uint32_t series = sb_fmul(b, sb_op1(b, SpvOpFNegate, b->t_f32, x), p);
  uint32_t direct = sb_fsub(b, sb_f32(b, 1.f), sb_exp(b, x));
  uint32_t small = sb_flt(b, sb_glsl1(b, GLSLstd450FAbs, b->t_f32, x), sb_f32(b, 0.5f));
  return sb_select(b, b->t_f32, small, series, direct);
}

static bool emit_optim(sv *s) {
  sb *b = s->b;
  const mlc_node *n = s->n;
  const mlc_train_config *tc = &s->p->train;
  bool adamw = n->op == MLC_OP_ADAMW, mom = !adamw && tc->momentum != 0;
  int64_t P = mlc_type_numel(sv_in(s, 0));
  if (P == 0) return sv_fail(s, "empty parameter");
  if (!sv_check_size(s, P)) return false;
  int pd = sv_in(s, 0)->dtype, gd = sv_in(s, 1)->dtype, md = (adamw || mom) ? sv_in(s, 2)->dtype : 0;
  sv_gs g;
  uint32_t i = sv_items_begin(s, &g, P);
  uint32_t p = sb_load_f(b, 0, pd, i), gr = sb_load_f(b, 1, gd, i);
  if (adamw) {
    int vd = sv_in(s, 3)->dtype;
    uint32_t step = sb_op1(b, SpvOpConvertSToF, b->t_f32, sb_load_i(b, 4, sv_in(s, 4)->dtype, sb_u32(b, 0), NULL));
    uint32_t lr = sb_load_f(b, 5, sv_in(s, 5)->dtype, sb_u32(b, 0));
    uint32_t step_size = sb_fdiv(b, lr, one_minus_pow(b, step, tc->beta1));
    uint32_t isb = sb_glsl1(b, GLSLstd450InverseSqrt, b->t_f32, one_minus_pow(b, step, tc->beta2));
    uint32_t m = sb_load_f(b, 2, md, i), v = sb_load_f(b, 3, vd, i);
    uint32_t pp = sb_fmul(b, p, sb_fsub(b, sb_f32(b, 1.f), sb_fmul(b, lr, sb_f32(b, (float)tc->weight_decay))));
    m = sb_fma(b, sb_f32(b, (float)tc->beta1), m, sb_fmul(b, sb_f32(b, (float)(1 - tc->beta1)), gr));
    v = sb_fma(b, sb_f32(b, (float)tc->beta2), v, sb_fmul(b, sb_f32(b, (float)(1 - tc->beta2)), sb_fmul(b, gr, gr)));
    uint32_t den = sb_fma(b, sb_glsl1(b, GLSLstd450Sqrt, b->t_f32, v), isb, sb_f32(b, (float)tc->eps));
    p = sb_fsub(b, pp, sb_fdiv(b, sb_fmul(b, step_size, m), den));
    sb_store_f(b, 2, md, i, m);
    sb_store_f(b, 3, vd, i, v);
  } else {
    uint32_t d = sb_fma(b, sb_f32(b, (float)tc->weight_decay), p, gr);
    if (mom) {
      d = sb_fma(b, sb_f32(b, (float)tc->momentum), sb_load_f(b, 2, md, i), d);
      sb_store_f(b, 2, md, i, d);
    }
    p = sb_fsub(b, p, sb_fmul(b, sb_load_f(b, 3, sv_in(s, 3)->dtype, sb_u32(b, 0)), d));
  }
  sb_store_f(b, 0, pd, i, p);
  sv_items_end(s, &g);
  return true;
}

bool sv_emit_misc(sv *s) {
  switch (s->n->op) {
  case MLC_OP_EMBEDDING: return emit_embedding(s);
  case MLC_OP_EMBEDDING_GRAD: return emit_embedding_grad(s);
  case MLC_OP_CROSS_ENTROPY: return emit_cross_entropy(s);
  case MLC_OP_CROSS_ENTROPY_GRAD: return emit_cross_entropy_grad(s);
  case MLC_OP_ADAMW: case MLC_OP_SGD: return emit_optim(s);
  default: return sv_fail(s, "not a misc op");
  }
}
