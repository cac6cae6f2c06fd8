/* Optimizer updates, one fused kernel per parameter: AdamW and SGD with
 * momentum, exactly as torch.optim computes them (single-tensor path):
 *
 *   AdamW, step t:   p  = p * (1 - lr * wd)
 *                    m  = b1 m + (1 - b1) g
 *                    v  = b2 v + (1 - b2) g^2
 *                    p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
 *   SGD:             d  = g + wd p
 *                    buf = momentum buf + d   (buf starts at 0, so step 1 gives buf = d)
 *                    p -= lr * (momentum ? buf : d)
 *
 * The parameter and its state are updated in place (they live outside the
 * arena); the output is a token the kernel leaves alone.  Hyperparameters
 * come from the program's train block, but the learning rate, an f32 input
 * the runtime writes each step from its schedule.  A work item is a row of
 * the parameter's last dimension; the bias corrections and the step size
 * are computed in f64 once per call from the step and lr inputs.
 */
#include <math.h>

#include "codegen/llvm/cg.h"

typedef struct {
  cg_buf p, grad, m, v;
  bool adamw;
  LLVMValueRef base;
  LLVMValueRef decay, b1, nb1, b2, nb2, step_size, inv_sqrt_bc2, eps; /* AdamW, f32 scalars */
  LLVMValueRef wd, mom, lr;                                           /* SGD */
} optim_ctx;

static LLVMValueRef sp(cg *g, LLVMValueRef s) { return cg_splat(g, s, g->vw); }
static LLVMValueRef f32(cg *g, double v) { return LLVMConstReal(g->t_f32, v); }

static void update(cg *g, void *vc, LLVMValueRef j, LLVMValueRef mask) {
  optim_ctx *c = vc;
  LLVMValueRef i = LLVMBuildAdd(g->b, c->base, j, "");
  LLVMValueRef p = cg_load(g, c->p, i, g->vw, mask), gr = cg_load(g, c->grad, i, g->vw, mask);
  LLVMValueRef m = cg_load(g, c->m, i, g->vw, mask);
  if (c->adamw) {
    LLVMValueRef v = cg_load(g, c->v, i, g->vw, mask);
    p = LLVMBuildFMul(g->b, p, sp(g, c->decay), "");
    m = cg_fma(g, sp(g, c->b1), m, LLVMBuildFMul(g->b, sp(g, c->nb1), gr, ""));
    v = cg_fma(g, sp(g, c->b2), v, LLVMBuildFMul(g->b, sp(g, c->nb2), LLVMBuildFMul(g->b, gr, gr, ""), ""));
    LLVMValueRef denom = cg_fma(g, cg_sqrt(g, v), sp(g, c->inv_sqrt_bc2), sp(g, c->eps));
    LLVMValueRef upd = LLVMBuildFDiv(g->b, LLVMBuildFMul(g->b, sp(g, c->step_size), m, ""), denom, "");
    cg_store(g, c->m, i, m, mask);
    cg_store(g, c->v, i, v, mask);
    cg_store(g, c->p, i, LLVMBuildFSub(g->b, p, upd, ""), mask);
  } else {
    LLVMValueRef d = cg_fma(g, sp(g, c->wd), p, gr);
    LLVMValueRef dir = d;
    if (c->mom) {
      m = cg_fma(g, sp(g, c->mom), m, d);
      cg_store(g, c->m, i, m, mask);
      dir = m;
    }
    cg_store(g, c->p, i, LLVMBuildFSub(g->b, p, LLVMBuildFMul(g->b, sp(g, c->lr), dir, ""), ""), mask);
  }
}

bool cg_emit_optim(cg *g) {
  const mlc_node *n = g->n;
  const mlc_train_config *t = &g->p->train;
  const mlc_type *pt = &g->f->nodes[n->in[0]].type;
  int64_t D = pt->rank ? pt->dim[pt->rank - 1] : 1, rows = mlc_type_numel(pt) / D;
  optim_ctx c = {.p = g->in[0], .grad = g->in[1], .m = g->in[2], .adamw = n->op == MLC_OP_ADAMW};
  if (c.adamw) {
    c.v = g->in[3];
    /* Bias corrections from the step, in f64, once per call. */
    LLVMTypeRef f64 = LLVMDoubleTypeInContext(g->ctx);
    LLVMValueRef step = LLVMBuildSIToFP(g->b, cg_load(g, g->in[4], cg_i64(g, 0), 1, NULL), f64, "");
    LLVMValueRef a1[2] = {LLVMConstReal(f64, t->beta1), step}, a2[2] = {LLVMConstReal(f64, t->beta2), step};
    LLVMValueRef bc1 = LLVMBuildFSub(g->b, LLVMConstReal(f64, 1), cg_intrin(g, "llvm.pow", &f64, 1, a1, 2), "");
    LLVMValueRef bc2 = LLVMBuildFSub(g->b, LLVMConstReal(f64, 1), cg_intrin(g, "llvm.pow", &f64, 1, a2, 2), "");
    LLVMValueRef lr = LLVMBuildFPExt(g->b, cg_load(g, g->in[5], cg_i64(g, 0), 1, NULL), f64, "");
    c.step_size = LLVMBuildFPTrunc(g->b, LLVMBuildFDiv(g->b, lr, bc1, ""), g->t_f32, "");
    LLVMValueRef sq = cg_intrin(g, "llvm.sqrt", &f64, 1, &bc2, 1);
    c.inv_sqrt_bc2 = LLVMBuildFPTrunc(g->b, LLVMBuildFDiv(g->b, LLVMConstReal(f64, 1), sq, ""), g->t_f32, "");
    c.decay = LLVMBuildFPTrunc(
        g->b, LLVMBuildFSub(g->b, LLVMConstReal(f64, 1), LLVMBuildFMul(g->b, lr, LLVMConstReal(f64, t->weight_decay), ""), ""),
        g->t_f32, "");
    c.b1 = f32(g, t->beta1), c.nb1 = f32(g, 1 - t->beta1);
    c.b2 = f32(g, t->beta2), c.nb2 = f32(g, 1 - t->beta2);
    c.eps = f32(g, t->eps);
  } else {
    c.wd = f32(g, t->weight_decay), c.lr = cg_load(g, g->in[3], cg_i64(g, 0), 1, NULL);
    c.mom = t->momentum != 0 ? f32(g, t->momentum) : NULL;
  }
  g->items = rows;
  cg_loop items;
  LLVMValueRef row = cg_items_begin(g, &items);
  c.base = LLVMBuildMul(g->b, row, cg_i64(g, D), "");
  cg_row_map(g, D, update, &c);
  cg_end_for(g, &items, NULL);
  return true;
}
