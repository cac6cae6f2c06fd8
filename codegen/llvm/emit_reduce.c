/* Reductions over one axis: sum, mean and max (keepdim or not), softmax,
 * and cross_entropy.
 *
 * The input is viewed as [outer, R, inner] around the reduced axis.  When
 * the axis is the last one (inner == 1) each work item is a contiguous row
 * of R, reduced with vector accumulators (cg_row_reduce).  Otherwise a work
 * item is one vector of `inner` lanes in one outer slice: the kernel walks
 * the R rows of that column with one vector accumulator, which vectorises
 * across the kept dimension and reads each cache line once.
 *
 * Sums accumulate in f32 (bf16/f16 inputs are widened on load); max drops
 * NaNs as a plain `>` does.  softmax subtracts the row maximum before exp
 * and, for an f32 output, keeps exp(x - max) in the output between passes.
 * cross_entropy is mean over rows of logsumexp(row) - row[target], with a
 * target outside [0, classes) (PyTorch's ignore_index, -100) skipped and
 * left out of the mean; it is a single work item, since its result is one
 * scalar and the kernel ABI has no scratch to combine partial sums in.
 * cross_entropy_grad mirrors that mean: (softmax(row) - onehot(target)) * g
 * / n for the n rows whose target is in range, and zeros for the others.
 */
#include "codegen/llvm/cg.h"

static void view3(const mlc_type *t, int axis, int64_t *outer, int64_t *R, int64_t *inner) {
  *outer = *inner = 1;
  for (int k = 0; k < axis; k++) *outer *= t->dim[k];
  for (int k = axis + 1; k < t->rank; k++) *inner *= t->dim[k];
  *R = t->dim[axis];
}

/* ---- sum, mean, max ---- */

typedef struct {
  cg_buf x;
  LLVMValueRef base;
  int dt, op;
} red_ctx;

static LLVMValueRef red_load(cg *g, void *vc, LLVMValueRef j, LLVMValueRef mask) {
  red_ctx *c = vc;
  return cg_load(g, c->x, LLVMBuildAdd(g->b, c->base, j, ""), g->vw, mask);
}

static LLVMValueRef finish(cg *g, const mlc_node *n, LLVMValueRef v, int64_t R) {
  if (n->op != MLC_OP_MEAN) return v;
  return LLVMBuildFDiv(g->b, v, cg_const(g, LLVMTypeOf(v), (double)R), "");
}

/* One vector column of an inner > 1 reduction: lanes [col, col + vw) of
 * outer slice o, masked when the column is the partial last one. */
static void red_column(cg *g, red_ctx *c, LLVMValueRef o, LLVMValueRef col, int64_t R, int64_t inner,
                       LLVMValueRef mask) {
  const mlc_node *n = g->n;
  LLVMValueRef base = LLVMBuildAdd(g->b, LLVMBuildMul(g->b, o, cg_i64(g, R * inner), ""), col, "");
  LLVMValueRef init = c->op == CG_RED_ADD ? LLVMConstNull(cg_ctype(g, c->dt, g->vw))
                     : c->op == CG_RED_MIN ? cg_highest(g, c->dt, g->vw) : cg_lowest(g, c->dt, g->vw);
  cg_loop L;
  LLVMValueRef r = cg_for(g, &L, cg_i64(g, 0), cg_i64(g, R), 1);
  LLVMValueRef acc = cg_carry(g, &L, init);
  LLVMValueRef x = cg_load(g, c->x, LLVMBuildAdd(g->b, base, LLVMBuildMul(g->b, r, cg_i64(g, inner), ""), ""), g->vw, mask);
  LLVMValueRef next = c->op == CG_RED_ADD ? cg_add(g, c->dt, acc, x) : c->op == CG_RED_MIN ? cg_min(g, c->dt, acc, x) : cg_max(g, c->dt, acc, x);
  cg_end_for(g, &L, &next);
  LLVMValueRef out = LLVMBuildAdd(g->b, LLVMBuildMul(g->b, o, cg_i64(g, inner), ""), col, "");
  cg_store(g, g->out, out, finish(g, n, L.phi[0], R), mask);
}

/* The item loop of an inner > 1 op: item = (o, vector column), with the
 * partial last column of each slice handled by a masked copy of the body. */
typedef void (*column_fn)(cg *g, void *ctx, LLVMValueRef o, LLVMValueRef col, LLVMValueRef mask);

static void for_columns(cg *g, int64_t outer, int64_t inner, column_fn fn, void *ctx) {
  int64_t ncol = cg_ceil_div(inner, g->vw), tail = inner % g->vw;
  g->items = outer * ncol;
  cg_loop items;
  LLVMValueRef item = cg_items_begin(g, &items);
  LLVMValueRef o = LLVMBuildUDiv(g->b, item, cg_i64(g, ncol), "");
  LLVMValueRef ci = LLVMBuildURem(g->b, item, cg_i64(g, ncol), "");
  LLVMValueRef col = LLVMBuildMul(g->b, ci, cg_i64(g, g->vw), "");
  if (tail) {
    cg_if_t t;
    cg_if(g, &t, cg_eq(g, ci, ncol - 1));
    fn(g, ctx, o, col, cg_mask(g, g->vw, (int)tail));
    cg_else(g, &t);
    fn(g, ctx, o, col, NULL);
    cg_endif(g, &t);
  } else {
    fn(g, ctx, o, col, NULL);
  }
  cg_end_for(g, &items, NULL);
}

typedef struct {
  red_ctx rc;
  int64_t R, inner;
} red_col_ctx;

static void red_column_fn(cg *g, void *vc, LLVMValueRef o, LLVMValueRef col, LLVMValueRef mask) {
  red_col_ctx *c = vc;
  red_column(g, &c->rc, o, col, c->R, c->inner, mask);
}

bool cg_emit_reduce(cg *g) {
  const mlc_node *n = g->n;
  const mlc_type *it = &g->f->nodes[n->in[0]].type;
  int64_t outer, R, inner;
  view3(it, n->a.axis, &outer, &R, &inner);
  red_ctx c = {.x = g->in[0], .dt = it->dtype,
               .op = n->op == MLC_OP_MAX ? CG_RED_MAX : n->op == MLC_OP_MIN ? CG_RED_MIN : CG_RED_ADD};
  if (inner == 1) {
    g->items = outer;
    cg_loop items;
    LLVMValueRef o = cg_items_begin(g, &items);
    c.base = LLVMBuildMul(g->b, o, cg_i64(g, R), "");
    LLVMValueRef v = cg_row_reduce(g, R, c.dt, c.op, red_load, &c);
    cg_store(g, g->out, o, finish(g, n, v, R), NULL);
    cg_end_for(g, &items, NULL);
    return true;
  }
  red_col_ctx cc = {c, R, inner};
  for_columns(g, outer, inner, red_column_fn, &cc);
  return true;
}

/* ---- argmax, argmin ---- */

/* out[o, i] = the first r with x[o, r, i] the largest (smallest) along the
 * axis, a NaN counting as larger (smaller) than anything, as torch.argmax
 * and argmin: a scalar walk per (o, i), with the best value and its index
 * carried.  i64 indices. */
bool cg_emit_argreduce(cg *g) {
  const mlc_node *n = g->n;
  const mlc_type *it = &g->f->nodes[n->in[0]].type;
  int64_t outer, R, inner;
  view3(it, n->a.axis, &outer, &R, &inner);
  int dt = it->dtype;
  bool fl = cg_is_float(dt), is_max = n->op == MLC_OP_ARGMAX;
  g->items = outer * inner;
  cg_loop items, L;
  LLVMValueRef item = cg_items_begin(g, &items);
  LLVMValueRef o = LLVMBuildUDiv(g->b, item, cg_i64(g, inner), ""), i = LLVMBuildURem(g->b, item, cg_i64(g, inner), "");
  LLVMValueRef base = cg_iadd(g, cg_imulc(g, o, R * inner), i);
  LLVMValueRef first = cg_load(g, g->in[0], base, 1, NULL);
  LLVMValueRef r = cg_for(g, &L, cg_i64(g, 1), cg_i64(g, R), 1);
  LLVMValueRef best = cg_carry(g, &L, first), bi = cg_carry(g, &L, cg_i64(g, 0));
  LLVMValueRef x = cg_load(g, g->in[0], cg_idx(g, base, r, inner), 1, NULL);
  LLVMValueRef take;
  if (fl) { /* x beats best: strictly better, or x NaN and best not (unordered compare of best with itself) */
    LLVMValueRef better = LLVMBuildFCmp(g->b, is_max ? LLVMRealOGT : LLVMRealOLT, x, best, "");
    LLVMValueRef xnan = LLVMBuildFCmp(g->b, LLVMRealUNO, x, x, ""), bnan = LLVMBuildFCmp(g->b, LLVMRealUNO, best, best, "");
    take = LLVMBuildOr(g->b, better, LLVMBuildAnd(g->b, xnan, LLVMBuildNot(g->b, bnan, ""), ""), "");
  } else {
    take = LLVMBuildICmp(g->b, is_max ? LLVMIntSGT : LLVMIntSLT, x, best, "");
  }
  LLVMValueRef next[2] = {LLVMBuildSelect(g->b, take, x, best, ""), LLVMBuildSelect(g->b, take, r, bi, "")};
  cg_end_for(g, &L, next);
  cg_store(g, g->out, item, L.phi[1], NULL);
  cg_end_for(g, &items, NULL);
  return true;
}

/* ---- softmax ---- */

typedef struct {
  cg_buf x, y;
  LLVMValueRef base, max, inv;
} sm_ctx;

static LLVMValueRef sm_exp(cg *g, void *vc, LLVMValueRef j, LLVMValueRef mask) {
  sm_ctx *c = vc;
  LLVMValueRef x = cg_load(g, c->x, LLVMBuildAdd(g->b, c->base, j, ""), g->vw, mask);
  return cg_exp(g, LLVMBuildFSub(g->b, x, cg_splat(g, c->max, g->vw), ""));
}

/* exp(x - max), also stored to the output (f32 only: it is rescaled in place). */
static LLVMValueRef sm_exp_store(cg *g, void *vc, LLVMValueRef j, LLVMValueRef mask) {
  sm_ctx *c = vc;
  LLVMValueRef e = sm_exp(g, c, j, mask);
  cg_store(g, c->y, cg_iadd(g, c->base, j), e, mask);
  return e;
}

static void sm_rescale(cg *g, void *vc, LLVMValueRef j, LLVMValueRef mask) {
  sm_ctx *c = vc;
  LLVMValueRef idx = cg_iadd(g, c->base, j);
  cg_store(g, c->y, idx, LLVMBuildFMul(g->b, cg_load(g, c->y, idx, g->vw, mask), cg_splat(g, c->inv, g->vw), ""), mask);
}

static void sm_write(cg *g, void *vc, LLVMValueRef j, LLVMValueRef mask) {
  sm_ctx *c = vc;
  LLVMValueRef e = sm_exp(g, c, j, mask);
  cg_store(g, c->y, LLVMBuildAdd(g->b, c->base, j, ""), LLVMBuildFMul(g->b, e, cg_splat(g, c->inv, g->vw), ""), mask);
}

typedef struct {
  int64_t R, inner;
} sm_col_ctx;

/* Three passes down a column: max, sum of exp, write. */
static void sm_column(cg *g, void *vc, LLVMValueRef o, LLVMValueRef col, LLVMValueRef mask) {
  sm_col_ctx *c = vc;
  int vw = g->vw;
  LLVMValueRef base = LLVMBuildAdd(g->b, LLVMBuildMul(g->b, o, cg_i64(g, c->R * c->inner), ""), col, "");
  LLVMValueRef step = cg_i64(g, c->inner);
  cg_loop L;
  LLVMValueRef r = cg_for(g, &L, cg_i64(g, 0), cg_i64(g, c->R), 1);
  LLVMValueRef m = cg_carry(g, &L, cg_lowest(g, MLC_DT_F32, vw));
  LLVMValueRef idx = LLVMBuildAdd(g->b, base, LLVMBuildMul(g->b, r, step, ""), "");
  LLVMValueRef next = cg_max(g, MLC_DT_F32, m, cg_load(g, g->in[0], idx, vw, mask));
  cg_end_for(g, &L, &next);
  LLVMValueRef mx = L.phi[0];

  r = cg_for(g, &L, cg_i64(g, 0), cg_i64(g, c->R), 1);
  LLVMValueRef s = cg_carry(g, &L, LLVMConstNull(cg_ctype(g, MLC_DT_F32, vw)));
  idx = LLVMBuildAdd(g->b, base, LLVMBuildMul(g->b, r, step, ""), "");
  next = LLVMBuildFAdd(g->b, s, cg_exp(g, LLVMBuildFSub(g->b, cg_load(g, g->in[0], idx, vw, mask), mx, "")), "");
  cg_end_for(g, &L, &next);
  LLVMValueRef inv = LLVMBuildFDiv(g->b, cg_const(g, cg_ctype(g, MLC_DT_F32, vw), 1.0), L.phi[0], "");

  r = cg_for(g, &L, cg_i64(g, 0), cg_i64(g, c->R), 1);
  idx = LLVMBuildAdd(g->b, base, LLVMBuildMul(g->b, r, step, ""), "");
  LLVMValueRef e = cg_exp(g, LLVMBuildFSub(g->b, cg_load(g, g->in[0], idx, vw, mask), mx, ""));
  cg_store(g, g->out, idx, LLVMBuildFMul(g->b, e, inv, ""), mask);
  cg_end_for(g, &L, NULL);
}

static LLVMValueRef plain_load(cg *g, void *vc, LLVMValueRef j, LLVMValueRef mask) {
  sm_ctx *c = vc;
  return cg_load(g, c->x, LLVMBuildAdd(g->b, c->base, j, ""), g->vw, mask);
}

bool cg_emit_softmax(cg *g) {
  const mlc_node *n = g->n;
  int64_t outer, R, inner;
  view3(&n->type, n->a.axis, &outer, &R, &inner);
  if (inner == 1) {
    g->items = outer;
    cg_loop items;
    LLVMValueRef o = cg_items_begin(g, &items);
    sm_ctx c = {.x = g->in[0], .y = g->out, .base = LLVMBuildMul(g->b, o, cg_i64(g, R), "")};
    /* An f32 output holds exp(x - max) between the passes; a 16-bit one
     * would round it, so there exp is computed again. */
    bool keep = n->type.dtype == MLC_DT_F32;
    c.max = cg_row_reduce(g, R, MLC_DT_F32, CG_RED_MAX, plain_load, &c);
    LLVMValueRef s = cg_row_reduce(g, R, MLC_DT_F32, CG_RED_ADD, keep ? sm_exp_store : sm_exp, &c);
    c.inv = LLVMBuildFDiv(g->b, cg_const(g, g->t_f32, 1.0), s, "");
    cg_row_map(g, R, keep ? sm_rescale : sm_write, &c);
    cg_end_for(g, &items, NULL);
    return true;
  }
  sm_col_ctx cc = {R, inner};
  for_columns(g, outer, inner, sm_column, &cc);
  return true;
}

/* ---- cross_entropy ---- */

bool cg_emit_cross_entropy(cg *g) {
  const mlc_node *n = g->n;
  const mlc_type *lt = &g->f->nodes[n->in[0]].type;
  int64_t C = lt->dim[lt->rank - 1], rows = mlc_type_numel(lt) / C;
  LLVMTypeRef f64 = LLVMDoubleTypeInContext(g->ctx);
  g->items = 1;
  cg_if_t first;
  cg_if(g, &first, LLVMBuildICmp(g->b, LLVMIntSLT, g->begin, g->end, ""));
  cg_loop L;
  LLVMValueRef row = cg_for(g, &L, cg_i64(g, 0), cg_i64(g, rows), 1);
  LLVMValueRef sum = cg_carry(g, &L, LLVMConstReal(f64, 0));
  LLVMValueRef cnt = cg_carry(g, &L, cg_i64(g, 0));
  sm_ctx c = {.x = g->in[0], .base = LLVMBuildMul(g->b, row, cg_i64(g, C), "")};
  c.max = cg_row_reduce(g, C, MLC_DT_F32, CG_RED_MAX, plain_load, &c);
  LLVMValueRef s = cg_row_reduce(g, C, MLC_DT_F32, CG_RED_ADD, sm_exp, &c);
  LLVMValueRef lse = LLVMBuildFAdd(g->b, c.max, cg_log(g, s), "");
  LLVMValueRef t = cg_convert(g, cg_load(g, g->in[1], row, 1, NULL), g->in[1].dt, MLC_DT_I64);
  LLVMValueRef ok = LLVMBuildAnd(g->b, LLVMBuildICmp(g->b, LLVMIntSGE, t, cg_i64(g, 0), ""),
                                 LLVMBuildICmp(g->b, LLVMIntSLT, t, cg_i64(g, C), ""), "");
  LLVMValueRef tc = LLVMBuildSelect(g->b, ok, t, cg_i64(g, 0), "");
  LLVMValueRef xt = cg_load(g, g->in[0], LLVMBuildAdd(g->b, c.base, tc, ""), 1, NULL);
  LLVMValueRef loss = LLVMBuildFPExt(g->b, LLVMBuildFSub(g->b, lse, xt, ""), f64, "");
  LLVMValueRef next[2] = {
    LLVMBuildFAdd(g->b, sum, LLVMBuildSelect(g->b, ok, loss, LLVMConstReal(f64, 0), ""), ""),
    LLVMBuildAdd(g->b, cnt, LLVMBuildZExt(g->b, ok, g->t_i64, ""), ""),
  };
  cg_end_for(g, &L, next);
  LLVMValueRef mean = LLVMBuildFDiv(g->b, L.phi[0], LLVMBuildSIToFP(g->b, L.phi[1], f64, ""), "");
  cg_store(g, g->out, cg_i64(g, 0), LLVMBuildFPTrunc(g->b, mean, g->t_f32, ""), NULL);
  cg_endif(g, &first);
  return true;
}

/* ---- cross_entropy_grad ---- */

typedef struct {
  cg_buf t;
  int64_t C;
} cnt_ctx;

/* 1 for each target in [0, C), as i64 lanes. */
static LLVMValueRef count_valid(cg *g, void *vc, LLVMValueRef j, LLVMValueRef mask) {
  cnt_ctx *c = vc;
  LLVMValueRef t = cg_convert(g, cg_load(g, c->t, j, g->vw, mask), c->t.dt, MLC_DT_I64);
  LLVMTypeRef vt = cg_ctype(g, MLC_DT_I64, g->vw);
  LLVMValueRef ok = LLVMBuildAnd(g->b, LLVMBuildICmp(g->b, LLVMIntSGE, t, LLVMConstNull(vt), ""),
                                 LLVMBuildICmp(g->b, LLVMIntSLT, t, cg_const(g, vt, (double)c->C), ""), "");
  return LLVMBuildZExt(g->b, ok, vt, "");
}

typedef struct {
  sm_ctx sm;
  LLVMValueRef f; /* g / n */
} ceg_ctx;

static void ceg_write(cg *g, void *vc, LLVMValueRef j, LLVMValueRef mask) {
  ceg_ctx *c = vc;
  LLVMValueRef p = LLVMBuildFMul(g->b, sm_exp(g, &c->sm, j, mask), cg_splat(g, c->sm.inv, g->vw), "");
  cg_store(g, c->sm.y, cg_iadd(g, c->sm.base, j), LLVMBuildFMul(g->b, p, cg_splat(g, c->f, g->vw), ""), mask);
}

/* f32 output: it holds exp(x - max) from the sum pass; scale it in place. */
static void ceg_rescale(cg *g, void *vc, LLVMValueRef j, LLVMValueRef mask) {
  ceg_ctx *c = vc;
  LLVMValueRef idx = cg_iadd(g, c->sm.base, j), k = LLVMBuildFMul(g->b, c->sm.inv, c->f, "");
  cg_store(g, c->sm.y, idx, LLVMBuildFMul(g->b, cg_load(g, c->sm.y, idx, g->vw, mask), cg_splat(g, k, g->vw), ""), mask);
}

/* A work item is a block of rows.  Every item first counts the valid
 * targets of the whole batch (one vectorised pass over the targets, so the
 * items need not share anything), which is why the blocks are few when the
 * rows are short: at most min(256, C) items. */
bool cg_emit_cross_entropy_grad(cg *g) {
  const mlc_node *n = g->n;
  const mlc_type *lt = &n->type;
  int64_t C = lt->dim[lt->rank - 1], rows = mlc_type_numel(lt) / C;
  int64_t nblk = C < 256 ? C : 256;
  if (nblk > rows) nblk = rows;
  int64_t RB = cg_ceil_div(rows, nblk);
  g->items = cg_ceil_div(rows, RB);
  cg_buf gb = g->in[0], x = g->in[1], tb = g->in[2];
  cg_loop items, L;
  LLVMValueRef item = cg_items_begin(g, &items);
  cnt_ctx cc = {tb, C};
  LLVMValueRef cnt = cg_row_reduce(g, rows, MLC_DT_I64, CG_RED_ADD, count_valid, &cc);
  /* cnt is 0 only when every row is skipped, and then f is never used. */
  LLVMValueRef f = LLVMBuildFDiv(g->b, cg_load(g, gb, cg_i64(g, 0), 1, NULL), LLVMBuildSIToFP(g->b, cnt, g->t_f32, ""), "");
  LLVMValueRef r0 = cg_imulc(g, item, RB);
  LLVMValueRef row = cg_for(g, &L, r0, cg_iadd(g, r0, cg_block_len(g, r0, rows, RB)), 1);
  ceg_ctx c = {.sm = {.x = x, .y = g->out, .base = cg_imulc(g, row, C)}, .f = f};
  LLVMValueRef t = cg_convert(g, cg_load(g, tb, row, 1, NULL), tb.dt, MLC_DT_I64);
  LLVMValueRef ok = LLVMBuildAnd(g->b, LLVMBuildICmp(g->b, LLVMIntSGE, t, cg_i64(g, 0), ""),
                                 LLVMBuildICmp(g->b, LLVMIntSLT, t, cg_i64(g, C), ""), "");
  cg_if_t v;
  cg_if(g, &v, ok);
  bool keep = g->out.dt == MLC_DT_F32; /* as in softmax */
  c.sm.max = cg_row_reduce(g, C, MLC_DT_F32, CG_RED_MAX, plain_load, &c.sm);
  LLVMValueRef s = cg_row_reduce(g, C, MLC_DT_F32, CG_RED_ADD, keep ? sm_exp_store : sm_exp, &c.sm);
  c.sm.inv = LLVMBuildFDiv(g->b, cg_const(g, g->t_f32, 1.0), s, "");
  cg_row_map(g, C, keep ? ceg_rescale : ceg_write, &c);
  /* the target's entry: (p - 1) * f, with p computed as in the row */
  LLVMValueRef ti = cg_iadd(g, c.sm.base, t);
  LLVMValueRef xt = cg_load(g, x, ti, 1, NULL);
  LLVMValueRef p = LLVMBuildFMul(g->b, cg_exp(g, LLVMBuildFSub(g->b, xt, c.sm.max, "")), c.sm.inv, "");
  cg_store(g, g->out, ti, LLVMBuildFMul(g->b, LLVMBuildFSub(g->b, p, cg_const(g, g->t_f32, 1.0), ""), f, ""), NULL);
  cg_else(g, &v);
  cg_memset0(g, g->out, c.sm.base, cg_i64(g, C));
  cg_endif(g, &v);
  cg_end_for(g, &L, NULL);
  cg_end_for(g, &items, NULL);
  return true;
}
