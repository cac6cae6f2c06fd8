/* rmsnorm and layernorm over the last dimension, one row per work item.
 *
 *   rmsnorm:   y = x * 1/sqrt(mean(x^2) + eps) [* w]
 *   layernorm: y = (x - mean) * 1/sqrt(var + eps) [* w] [+ b], var biased
 *
 * as PyTorch computes them (the variance is the two-pass mean of squared
 * deviations, not E[x^2] - E[x]^2, so it does not cancel).  Statistics are
 * in f32; the row is read once per pass, from L1 after the first.
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
