/* rmsnorm and layernorm over the last dimension, and their gradients, as
 * the CPU target computes them (codegen/llvm/emit_norm.c):
 *
 *   rmsnorm:   y = x * 1/sqrt(mean(x^2) + eps) [* w]
 *   layernorm: y = (x - mean) * 1/sqrt(var + eps) [* w] [+ b], var biased, two-pass
 *   rmsnorm_grad_x:   dx = r h - x r^3 mean(h x)                     (h = g [* w], r = rstd)
 *   layernorm_grad_x: dx = r h - r mean(h) - xc r^3 mean(h xc)       (xc = x - mean)
 *   *_grad_w:         dw = sum over rows of g * xc * r
 *
 * Statistics are f32; the result is rounded once when it is stored.  Row
 * kernels are a workgroup of 256 threads per row, strided over the row,
 * with shared-memory tree reductions; each pass reads the row again.
 * grad_w, deterministic: dispatch 0 writes each row's mean and rstd to
 * scratch; dispatch 1 sums each column over chunks of 64 rows (a thread per
 * chunk and column, rows in order) into scratch; dispatch 2 adds each
 * column's chunks in order.
 */
#include "codegen/spirv/emit.h"

#define WG_ROWS 64 /* grad_w: rows per partial sum */

typedef struct {
  sb *b;
  uint32_t sh, lid, base, L, T;
  int64_t D;
} rowc;

/* mean (0 for rmsnorm) and rstd of the row of x at binding xb. */
static void stats(rowc *r, uint32_t xb, int dt, bool layer, double eps, uint32_t *mean, uint32_t *rstd) {
  sb *b = r->b;
  sb_loop l;
  *mean = sb_f32(b, 0.f);
  if (layer) {
    sb_lv a = sb_local(b, b->t_f32, sb_f32(b, 0.f));
    uint32_t j = sb_for(b, &l, r->lid, r->L, r->T);
    sb_st(b, a, sb_fadd(b, sb_ld(b, a), sb_load_f(b, xb, dt, sb_add(b, r->base, j))));
    sb_for_end(b, &l);
    *mean = sb_fmul(b, sb_wg_reduce(b, r->sh, sb_ld(b, a), false), sb_f32(b, (float)(1.0 / (double)r->D)));
  }
  sb_lv a = sb_local(b, b->t_f32, sb_f32(b, 0.f));
  uint32_t j = sb_for(b, &l, r->lid, r->L, r->T);
  uint32_t d = sb_fsub(b, sb_load_f(b, xb, dt, sb_add(b, r->base, j)), *mean);
  sb_st(b, a, sb_fma(b, d, d, sb_ld(b, a)));
  sb_for_end(b, &l);
  uint32_t var = sb_fmul(b, sb_wg_reduce(b, r->sh, sb_ld(b, a), false), sb_f32(b, (float)(1.0 / (double)r->D)));
  *rstd = sb_fdiv(b, sb_f32(b, 1.f), sb_glsl1(b, GLSLstd450Sqrt, b->t_f32, sb_fadd(b, var, sb_f32(b, (float)eps))));
}

static bool rows_of(sv *s, const mlc_type *t, int64_t *R, int64_t *D) {
  *D = t->dim[t->rank - 1];
  *R = *D ? mlc_type_numel(t) / *D : 0;
  if (*R == 0 || *D == 0) return sv_fail(s, "empty tensor");
  return sv_check_size(s, *R * *D);
}

static uint32_t row_begin(sv *s, sv_rows *rw, rowc *r, int64_t R, int64_t D) {
  sb *b = s->b;
  r->b = b;
  r->sh = sb_shared(b, b->t_f32, SV_THREADS);
  uint32_t row = sv_rows_begin(s, rw, R, SV_THREADS);
  r->lid = sb_lid(b);
  r->base = sb_mulc(b, row, (uint32_t)D);
  r->L = sb_u32(b, (uint32_t)D);
  r->T = sb_u32(b, SV_THREADS);
  r->D = D;
  return row;
}

typedef struct {
  uint32_t base, mean, rstd, ca, cb;
  int xd, gd, wd, bd;
  bool has_w, has_b, layer;
} norm_ctx;

static void fwd_elem(sv *s, void *vc, uint32_t j, uint32_t *lo, uint32_t *hi) {
  norm_ctx *c = vc;
  sb *b = s->b;
  uint32_t y = sb_fmul(b, sb_fsub(b, sb_load_f(b, 0, c->xd, sb_add(b, c->base, j)), c->mean), c->rstd);
  if (c->has_w) y = sb_fmul(b, y, sb_load_f(b, 1, c->wd, j));
  if (c->has_b) y = sb_fadd(b, y, sb_load_f(b, 2, c->bd, j));
  *lo = sb_f2bits_dt(b, s->n->type.dtype, y);
  *hi = 0;
}

static bool emit_fwd(sv *s, bool layer) {
  const mlc_node *n = s->n;
  int dt = n->type.dtype;
  int64_t R, D;
  if (!rows_of(s, &n->type, &R, &D)) return false;
  sv_rows rw;
  rowc r;
  row_begin(s, &rw, &r, R, D);
  norm_ctx c = {.base = r.base, .xd = sv_in(s, 0)->dtype, .has_w = n->nin > 1, .has_b = n->nin > 2};
  if (c.has_w) c.wd = sv_in(s, 1)->dtype;
  if (c.has_b) c.bd = sv_in(s, 2)->dtype;
  stats(&r, 0, c.xd, layer, n->a.f, &c.mean, &c.rstd);
  sv_row_store(s, r.base, D, sv_out(s), dt, fwd_elem, &c);
  sv_rows_end(s, &rw);
  return true;
}

/* dx = h r [- cb] - xc ca, h = g [* w], xc = x - mean */
static void grad_x_elem(sv *s, void *vc, uint32_t j, uint32_t *lo, uint32_t *hi) {
  norm_ctx *c = vc;
  sb *b = s->b;
  uint32_t at = sb_add(b, c->base, j);
  uint32_t h = sb_load_f(b, 0, c->gd, at);
  if (c->has_w) h = sb_fmul(b, h, sb_load_f(b, 2, c->wd, j));
  uint32_t xc = sb_fsub(b, sb_load_f(b, 1, c->xd, at), c->mean);
  uint32_t o = sb_fmul(b, h, c->rstd);
  if (c->layer) o = sb_fsub(b, o, c->cb);
  o = sb_fsub(b, o, sb_fmul(b, xc, c->ca));
  *lo = sb_f2bits_dt(b, s->n->type.dtype, o);
  *hi = 0;
}

static bool emit_grad_x(sv *s, bool layer) {
  sb *b = s->b;
  const mlc_node *n = s->n;
  int dt = n->type.dtype, gd = sv_in(s, 0)->dtype, xd = sv_in(s, 1)->dtype;
  if (n->nin > 3) return sv_fail(s, "%s with a value to add (the fuse pass's, CUDA and Metal only)", mlc_ops[n->op].name);
  bool has_w = n->nin > 2;
  int wd = has_w ? sv_in(s, 2)->dtype : 0;
  int64_t R, D;
  if (!rows_of(s, &n->type, &R, &D)) return false;
  sv_rows rw;
  rowc r;
  row_begin(s, &rw, &r, R, D);
  uint32_t mean, rstd, invD = sb_f32(b, (float)(1.0 / (double)D));
  stats(&r, 1, xd, layer, n->a.f, &mean, &rstd);
  sb_lv shx = sb_local(b, b->t_f32, sb_f32(b, 0.f)), shs = sb_local(b, b->t_f32, sb_f32(b, 0.f));
  sb_loop l;
  uint32_t j = sb_for(b, &l, r.lid, r.L, r.T), at = sb_add(b, r.base, j);
  uint32_t h = sb_load_f(b, 0, gd, at);
  if (has_w) h = sb_fmul(b, h, sb_load_f(b, 2, wd, j));
  uint32_t xc = sb_fsub(b, sb_load_f(b, 1, xd, at), mean);
  sb_st(b, shx, sb_fma(b, h, xc, sb_ld(b, shx)));
  sb_st(b, shs, sb_fadd(b, sb_ld(b, shs), h));
  sb_for_end(b, &l);
  uint32_t r3 = sb_fmul(b, sb_fmul(b, rstd, rstd), rstd);
  uint32_t ca = sb_fmul(b, sb_fmul(b, sb_wg_reduce(b, r.sh, sb_ld(b, shx), false), invD), r3);
  uint32_t cb = layer ? sb_fmul(b, sb_fmul(b, sb_wg_reduce(b, r.sh, sb_ld(b, shs), false), invD), rstd) : 0;
  norm_ctx c = {.base = r.base, .mean = mean, .rstd = rstd, .ca = ca, .cb = cb, .xd = xd, .gd = gd, .wd = wd, .has_w = has_w,
                .layer = layer};
  sv_row_store(s, r.base, D, sv_out(s), dt, grad_x_elem, &c);
  sv_rows_end(s, &rw);
  return true;
}

static bool emit_grad_w(sv *s, bool layer) {
  sb *b = s->b;
  const mlc_node *n = s->n;
  const mlc_type *xt = sv_in(s, 1);
  int gd = sv_in(s, 0)->dtype, xd = xt->dtype, odt = n->type.dtype;
  int64_t R, D;
  if (!rows_of(s, xt, &R, &D)) return false;
  uint32_t sc = sv_scratch(s);
  sv_rows rw;
  rowc r;
  uint32_t row = row_begin(s, &rw, &r, R, D), mean, rstd;
  stats(&r, 1, xd, layer, n->a.f, &mean, &rstd);
  sb_if w;
  sb_if_begin(b, &w, sb_ieq(b, r.lid, sb_u32(b, 0)), false);
  sb_stw(b, sc, sb_mulc(b, row, 2), sb_f2bits(b, mean));
  sb_stw(b, sc, sb_addc(b, sb_mulc(b, row, 2), 1), sb_f2bits(b, rstd));
  sb_if_end(b, &w);
  sv_rows_end(s, &rw);

  /* 1: a thread per (chunk of WG_ROWS rows, column): the chunk's sum, in row order */
  int64_t nch = sv_ceil_div(R, WG_ROWS), ncb = sv_ceil_div(D, SV_THREADS);
  if (!sv_check_size(s, 2 * R + nch * D)) return false;
  s->scratch = (uint64_t)(2 * R + nch * D) * 4;
  uint32_t grp = sv_begin(s, (uint64_t)(nch * ncb), SV_THREADS);
  uint32_t chunk = sb_div(b, grp, sb_u32(b, (uint32_t)ncb));
  uint32_t col = sb_add(b, sb_mulc(b, sb_mod(b, grp, sb_u32(b, (uint32_t)ncb)), SV_THREADS), sb_lid(b));
  sb_if in;
  sb_if_begin(b, &in, sb_land(b, sb_ult(b, chunk, sb_u32(b, (uint32_t)nch)), sb_ult(b, col, sb_u32(b, (uint32_t)D))), false);
  sb_lv acc = sb_local(b, b->t_f32, sb_f32(b, 0.f));
  uint32_t r0 = sb_mulc(b, chunk, WG_ROWS), a[2] = {sb_addc(b, r0, WG_ROWS), sb_u32(b, (uint32_t)R)};
  sb_loop l;
  uint32_t rr = sb_for(b, &l, r0, sb_glsl(b, GLSLstd450UMin, b->t_u32, 2, a), sb_u32(b, 1));
  uint32_t at = sb_add(b, sb_mulc(b, rr, (uint32_t)D), col);
  uint32_t mu = sb_bits2f(b, sb_ldw(b, sc, sb_mulc(b, rr, 2))), rs = sb_bits2f(b, sb_ldw(b, sc, sb_addc(b, sb_mulc(b, rr, 2), 1)));
  uint32_t gx = sb_fmul(b, sb_load_f(b, 0, gd, at), sb_fsub(b, sb_load_f(b, 1, xd, at), mu));
  sb_st(b, acc, sb_fma(b, gx, rs, sb_ld(b, acc)));
  sb_for_end(b, &l);
  sb_stw(b, sc, sb_addc(b, sb_add(b, sb_mulc(b, chunk, (uint32_t)D), col), (uint32_t)(2 * R)), sb_f2bits(b, sb_ld(b, acc)));
  sb_if_end(b, &in);
  sv_end(s);

  /* 2: a thread per column adds the chunks in order */
  sv_gs g;
  col = sv_items_begin(s, &g, D);
  acc = sb_local(b, b->t_f32, sb_f32(b, 0.f));
  uint32_t k = sb_for(b, &l, sb_u32(b, 0), sb_u32(b, (uint32_t)nch), sb_u32(b, 1));
  uint32_t part = sb_bits2f(b, sb_ldw(b, sc, sb_addc(b, sb_add(b, sb_mulc(b, k, (uint32_t)D), col), (uint32_t)(2 * R))));
  sb_st(b, acc, sb_fadd(b, sb_ld(b, acc), part));
  sb_for_end(b, &l);
  sb_store_f(b, sv_out(s), odt, col, sb_ld(b, acc));
  sv_items_end(s, &g);
  return true;
}

bool sv_emit_norm(sv *s) {
  switch (s->n->op) {
  case MLC_OP_RMSNORM: return emit_fwd(s, false);
  case MLC_OP_LAYERNORM: return emit_fwd(s, true);
  case MLC_OP_RMSNORM_GRAD_X: return emit_grad_x(s, false);
  case MLC_OP_LAYERNORM_GRAD_X: return emit_grad_x(s, true);
  case MLC_OP_RMSNORM_GRAD_W: return emit_grad_w(s, false);
  case MLC_OP_LAYERNORM_GRAD_W: return emit_grad_w(s, true);
  default: return sv_fail(s, "not a norm op");
  }
}
