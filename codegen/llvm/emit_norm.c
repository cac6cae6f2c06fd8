/* rmsnorm and layernorm over the last dimension, one row per work item,
 * and their gradients.
 *
 *   rmsnorm:   y = x * 1/sqrt(mean(x^2) + eps) [* w]
 *   layernorm: y = (x - mean) * 1/sqrt(var + eps) [* w] [+ b], var biased
 *
 * as PyTorch computes them (the variance is the two-pass mean of squared
 * deviations, not E[x^2] - E[x]^2, so it does not cancel).  Statistics are
 * in f32; the row is read once per pass, from L1 after the first.
 *
 * The gradients, with r = rstd, h = g * w (h = g without a weight), D the
 * row length and means over the row:
 *
 *   rmsnorm_grad_x:   dx = r h - x r^3 mean(h x)
 *   layernorm_grad_x: dx = r (h - mean(h) - xhat mean(h xhat)),  xhat = (x - mean) r
 *   *_grad_w:         dw = sum over rows of g * x r  (rmsnorm) or g * xhat
 *
 * grad_x is one row per work item, like the forward.  grad_w sums over rows,
 * and the kernel ABI has nowhere to combine partial sums of different items,
 * so a work item owns a block of columns and walks every row, recomputing
 * the row's statistics: at most 8 column blocks, so x is read at most 8
 * times over.  Each column sums in f32 in blocks of 64 rows, then the blocks
 * are added, which keeps the rounding error near that of a pairwise sum.
 */
#include "codegen/llvm/cg.h"

typedef struct {
  cg_buf x, w, b, y;
  bool has_w, has_b;
  LLVMValueRef base, mean, rstd; /* scalars */
} norm_ctx;

static LLVMValueRef ld_x(cg *g, norm_ctx *c, LLVMValueRef j, LLVMValueRef mask) {
  return cg_load(g, c->x, LLVMBuildAdd(g->b, c->base, j, ""), g->vw, mask);
}

static LLVMValueRef v_x(cg *g, void *vc, LLVMValueRef j, LLVMValueRef mask) { return ld_x(g, vc, j, mask); }

static LLVMValueRef v_sq(cg *g, void *vc, LLVMValueRef j, LLVMValueRef mask) {
  LLVMValueRef x = ld_x(g, vc, j, mask);
  return LLVMBuildFMul(g->b, x, x, "");
}

static LLVMValueRef v_dev2(cg *g, void *vc, LLVMValueRef j, LLVMValueRef mask) {
  norm_ctx *c = vc;
  LLVMValueRef d = LLVMBuildFSub(g->b, ld_x(g, c, j, mask), cg_splat(g, c->mean, g->vw), "");
  return LLVMBuildFMul(g->b, d, d, "");
}

static void write_row(cg *g, void *vc, LLVMValueRef j, LLVMValueRef mask) {
  norm_ctx *c = vc;
  LLVMValueRef x = ld_x(g, c, j, mask);
  if (c->mean) x = LLVMBuildFSub(g->b, x, cg_splat(g, c->mean, g->vw), "");
  LLVMValueRef y = LLVMBuildFMul(g->b, x, cg_splat(g, c->rstd, g->vw), "");
  if (c->has_w) y = LLVMBuildFMul(g->b, y, cg_load(g, c->w, j, g->vw, mask), "");
  if (c->has_b) y = LLVMBuildFAdd(g->b, y, cg_load(g, c->b, j, g->vw, mask), "");
  cg_store(g, c->y, LLVMBuildAdd(g->b, c->base, j, ""), y, mask);
}

static LLVMValueRef rstd_of(cg *g, LLVMValueRef meansq, double eps) {
  LLVMValueRef v = LLVMBuildFAdd(g->b, meansq, LLVMConstReal(g->t_f32, eps), "");
  return LLVMBuildFDiv(g->b, LLVMConstReal(g->t_f32, 1.0), cg_sqrt(g, v), "");
}

static bool emit_norm(cg *g, bool layer) {
  const mlc_node *n = g->n;
  int64_t D = n->type.dim[n->type.rank - 1], rows = mlc_type_numel(&n->type) / D;
  norm_ctx c = {.x = g->in[0], .y = g->out, .has_w = n->nin > 1, .has_b = n->nin > 2};
  if (c.has_w) c.w = g->in[1];
  if (c.has_b) c.b = g->in[2];
  LLVMValueRef invD = LLVMConstReal(g->t_f32, 1.0 / (double)D);
  g->items = rows;
  cg_loop items;
  LLVMValueRef row = cg_items_begin(g, &items);
  c.base = LLVMBuildMul(g->b, row, cg_i64(g, D), "");
  if (layer) {
    c.mean = LLVMBuildFMul(g->b, cg_row_reduce(g, D, MLC_DT_F32, CG_RED_ADD, v_x, &c), invD, "");
    LLVMValueRef var = LLVMBuildFMul(g->b, cg_row_reduce(g, D, MLC_DT_F32, CG_RED_ADD, v_dev2, &c), invD, "");
    c.rstd = rstd_of(g, var, n->a.f);
  } else {
    LLVMValueRef ms = LLVMBuildFMul(g->b, cg_row_reduce(g, D, MLC_DT_F32, CG_RED_ADD, v_sq, &c), invD, "");
    c.rstd = rstd_of(g, ms, n->a.f);
  }
  cg_row_map(g, D, write_row, &c);
  cg_end_for(g, &items, NULL);
  return true;
}

bool cg_emit_rmsnorm(cg *g) { return emit_norm(g, false); }
bool cg_emit_layernorm(cg *g) { return emit_norm(g, true); }

/* ---- gradients ---- */

typedef struct {
  cg_buf gr, x, w, out;
  bool has_w, layer;
  LLVMValueRef base, mean, rstd, ca, cb; /* scalars */
} ngrad;

static LLVMValueRef ng_x(cg *g, ngrad *c, LLVMValueRef j, LLVMValueRef mask) {
  return cg_load(g, c->x, cg_iadd(g, c->base, j), g->vw, mask);
}

/* x - mean (layernorm) or x */
static LLVMValueRef ng_xc(cg *g, ngrad *c, LLVMValueRef j, LLVMValueRef mask) {
  LLVMValueRef x = ng_x(g, c, j, mask);
  return c->layer ? LLVMBuildFSub(g->b, x, cg_splat(g, c->mean, g->vw), "") : x;
}

static LLVMValueRef ng_h(cg *g, ngrad *c, LLVMValueRef j, LLVMValueRef mask) {
  LLVMValueRef h = cg_load(g, c->gr, cg_iadd(g, c->base, j), g->vw, mask);
  return c->has_w ? LLVMBuildFMul(g->b, h, cg_load(g, c->w, j, g->vw, mask), "") : h;
}

static LLVMValueRef v_ng_x(cg *g, void *vc, LLVMValueRef j, LLVMValueRef mask) { return ng_x(g, vc, j, mask); }
static LLVMValueRef v_ng_sq(cg *g, void *vc, LLVMValueRef j, LLVMValueRef mask) {
  LLVMValueRef d = ng_xc(g, vc, j, mask);
  return LLVMBuildFMul(g->b, d, d, "");
}
static LLVMValueRef v_ng_h(cg *g, void *vc, LLVMValueRef j, LLVMValueRef mask) { return ng_h(g, vc, j, mask); }
/* h * (x - mean) */
static LLVMValueRef v_ng_hx(cg *g, void *vc, LLVMValueRef j, LLVMValueRef mask) {
  return LLVMBuildFMul(g->b, ng_h(g, vc, j, mask), ng_xc(g, vc, j, mask), "");
}

/* c->mean (layernorm) and c->rstd of the row at c->base. */
static void row_stats(cg *g, ngrad *c, int64_t D, double eps) {
  LLVMValueRef invD = LLVMConstReal(g->t_f32, 1.0 / (double)D);
  c->mean = NULL;
  if (c->layer) c->mean = LLVMBuildFMul(g->b, cg_row_reduce(g, D, MLC_DT_F32, CG_RED_ADD, v_ng_x, c), invD, "");
  LLVMValueRef ms = LLVMBuildFMul(g->b, cg_row_reduce(g, D, MLC_DT_F32, CG_RED_ADD, v_ng_sq, c), invD, "");
  c->rstd = rstd_of(g, ms, eps);
}

/* rmsnorm:   dx = r h - (x - 0) * ca,            ca = r^3 mean(h x)
 * layernorm: dx = r h - cb - (x - mean) * ca,    cb = r mean(h), ca = r^3 mean(h (x - mean))
 * (r xhat mean(h xhat) = (x - mean) r^3 mean(h (x - mean))). */
static void write_dx(cg *g, void *vc, LLVMValueRef j, LLVMValueRef mask) {
  ngrad *c = vc;
  int vw = g->vw;
  LLVMValueRef y = LLVMBuildFMul(g->b, ng_h(g, c, j, mask), cg_splat(g, c->rstd, vw), "");
  if (c->layer) y = LLVMBuildFSub(g->b, y, cg_splat(g, c->cb, vw), "");
  LLVMValueRef t = LLVMBuildFMul(g->b, ng_xc(g, c, j, mask), cg_splat(g, c->ca, vw), "");
  cg_store(g, c->out, cg_iadd(g, c->base, j), LLVMBuildFSub(g->b, y, t, ""), mask);
}

static bool emit_norm_grad_x(cg *g, bool layer) {
  const mlc_node *n = g->n;
  int64_t D = n->type.dim[n->type.rank - 1], rows = mlc_type_numel(&n->type) / D;
  if (n->nin > 3) return cg_fail(g, "%s with a value to add (the fuse pass's, CUDA and Metal only)", mlc_ops[n->op].name);
  ngrad c = {.gr = g->in[0], .x = g->in[1], .out = g->out, .has_w = n->nin > 2, .layer = layer};
  if (c.has_w) c.w = g->in[2];
  LLVMValueRef invD = LLVMConstReal(g->t_f32, 1.0 / (double)D);
  g->items = rows;
  cg_loop items;
  LLVMValueRef row = cg_items_begin(g, &items);
  c.base = cg_imulc(g, row, D);
  row_stats(g, &c, D, n->a.f);
  LLVMValueRef r3 = LLVMBuildFMul(g->b, LLVMBuildFMul(g->b, c.rstd, c.rstd, ""), c.rstd, "");
  LLVMValueRef hx = LLVMBuildFMul(g->b, cg_row_reduce(g, D, MLC_DT_F32, CG_RED_ADD, v_ng_hx, &c), invD, "");
  c.ca = LLVMBuildFMul(g->b, hx, r3, "");
  if (layer) {
    LLVMValueRef h = LLVMBuildFMul(g->b, cg_row_reduce(g, D, MLC_DT_F32, CG_RED_ADD, v_ng_h, &c), invD, "");
    c.cb = LLVMBuildFMul(g->b, h, c.rstd, "");
  }
  cg_row_map(g, D, write_dx, &c);
  cg_end_for(g, &items, NULL);
  return true;
}

typedef struct {
  ngrad *c;
  cg_buf acc, part;
  LLVMValueRef c0; /* first column of the block */
} wcol;

static void wcol_add(cg *g, void *vc, LLVMValueRef j, LLVMValueRef mask) {
  wcol *w = vc;
  ngrad *c = w->c;
  LLVMValueRef col = cg_iadd(g, w->c0, j);
  LLVMValueRef gx = LLVMBuildFMul(g->b, cg_load(g, c->gr, cg_iadd(g, c->base, col), g->vw, mask), ng_xc(g, c, col, mask), "");
  LLVMValueRef p = cg_load(g, w->part, j, g->vw, NULL);
  cg_store(g, w->part, j, cg_fma(g, gx, cg_splat(g, c->rstd, g->vw), p), NULL);
}

static void wcol_fold(cg *g, void *vc, LLVMValueRef j, LLVMValueRef mask) {
  wcol *w = vc;
  LLVMValueRef s = LLVMBuildFAdd(g->b, cg_load(g, w->acc, j, g->vw, NULL), cg_load(g, w->part, j, g->vw, NULL), "");
  cg_store(g, w->acc, j, s, NULL);
}

static void wcol_store(cg *g, void *vc, LLVMValueRef j, LLVMValueRef mask) {
  wcol *w = vc;
  cg_store(g, w->c->out, cg_iadd(g, w->c0, j), cg_load(g, w->acc, j, g->vw, NULL), mask);
}

enum { WROWS = 64 }; /* rows per partial sum */

/* One column block of width cw (static): all rows, blocked sums. */
static void wcol_block(cg *g, wcol *w, int64_t cw, int64_t D, int64_t rows, double eps) {
  int64_t cwp = cg_round_up(cw, g->vw);
  cg_memset0(g, w->acc, cg_i64(g, 0), cg_i64(g, cwp));
  cg_loop Lb, Lr;
  LLVMValueRef rb = cg_for(g, &Lb, cg_i64(g, 0), cg_i64(g, rows), WROWS);
  cg_memset0(g, w->part, cg_i64(g, 0), cg_i64(g, cwp));
  LLVMValueRef r = cg_for(g, &Lr, rb, cg_iadd(g, rb, cg_block_len(g, rb, rows, WROWS)), 1);
  w->c->base = cg_imulc(g, r, D);
  row_stats(g, w->c, D, eps);
  cg_row_map(g, cw, wcol_add, w);
  cg_end_for(g, &Lr, NULL);
  cg_row_map(g, cw, wcol_fold, w);
  cg_end_for(g, &Lb, NULL);
  cg_row_map(g, cw, wcol_store, w);
}

static bool emit_norm_grad_w(cg *g, bool layer) {
  const mlc_type *xt = &g->f->nodes[g->n->in[1]].type;
  int64_t D = xt->dim[xt->rank - 1], rows = mlc_type_numel(xt) / D;
  int64_t CW = cg_round_up(cg_ceil_div(D, 8), g->vw), nblk = cg_ceil_div(D, CW), tail = D - (nblk - 1) * CW;
  ngrad c = {.gr = g->in[0], .x = g->in[1], .out = g->out, .layer = layer};
  wcol w = {&c, cg_alloca(g, MLC_DT_F32, CW), cg_alloca(g, MLC_DT_F32, CW), NULL};
  g->items = nblk;
  cg_loop items;
  LLVMValueRef item = cg_items_begin(g, &items);
  w.c0 = cg_imulc(g, item, CW);
  if (tail != CW) {
    cg_if_t t;
    cg_if(g, &t, cg_eq(g, item, nblk - 1));
    wcol_block(g, &w, tail, D, rows, g->n->a.f);
    cg_else(g, &t);
    wcol_block(g, &w, CW, D, rows, g->n->a.f);
    cg_endif(g, &t);
  } else {
    wcol_block(g, &w, CW, D, rows, g->n->a.f);
  }
  cg_end_for(g, &items, NULL);
  return true;
}

bool cg_emit_rmsnorm_grad_x(cg *g) { return emit_norm_grad_x(g, false); }
bool cg_emit_layernorm_grad_x(cg *g) { return emit_norm_grad_x(g, true); }
bool cg_emit_rmsnorm_grad_w(cg *g) { return emit_norm_grad_w(g, false); }
bool cg_emit_layernorm_grad_w(cg *g) { return emit_norm_grad_w(g, true); }
