/* optimizer: appends the parameter updates to the train function.
 *
 * After autodiff, the train function outputs "loss" and one "grad:<name>"
 * per trained parameter.  For each of those this pass adds the optimizer's
 * state as parameters of role MLC_ROLE_OPT_STATE (zero at the start, saved
 * in checkpoints, not in the state_dict) and one fused update op per
 * parameter, AdamW or SGD with momentum, with PyTorch's semantics (see
 * codegen/llvm/emit_optim.c).  AdamW's bias correction needs the step
 * number: the function gets an input "opt.step" (i64[]), which the runtime
 * fills with its own step count, so a user never passes it.  The learning
 * rate is an input too, "opt.lr" (f32[]), which the runtime computes from
 * the schedule in the plan (warmup, decay) at its step count, so a resumed
 * run continues the schedule where it stopped.  Each update's token becomes
 * an output "update:<name>", which keeps it in the schedule.
 *
 * clip_grad_norm = C scales every gradient by min(1, C / (norm + 1e-6)),
 * norm being the 2-norm of all the gradients together, as PyTorch's
 * torch.nn.utils.clip_grad_norm_: the squares are summed per gradient in
 * f32 (sum), the sums added, and the factor's min(1, r) taken as
 * -max(-r, -1) over a two-element concat, exactly.  The norm before
 * clipping is the output "grad_norm".  Every update then waits for every
 * gradient, so the interleave pass cannot free a gradient early: the
 * memory of clipping, as in PyTorch.  Under fsdp the fsdp pass clips
 * (passes/fsdp.c): the sum of squares comes from the ranks' gradient
 * shards, and mlc_clip_factor makes the same factor of it.
 */
#include <string.h>

#include "passes/passes.h"

static uint32_t param_node(mlc_program *p, mlc_func *f, uint32_t param) {
  for (uint32_t i = 0; i < f->n; i++)
    if (f->nodes[i].op == MLC_OP_PARAM && f->nodes[i].a.param == param) return i;
  mlc_attrs a = {.param = param};
  uint32_t id = mlc_func_add(p, f, MLC_OP_PARAM, NULL, 0, &a, p->params[param].loc, "");
  f->nodes[id].type = p->params[param].type;
  return id;
}

static uint32_t add_state(mlc_program *p, mlc_func *f, uint32_t param, const char *suffix) {
  const mlc_param *w = &p->params[param];
  mlc_param st = {.name = mlc_arena_printf(p->arena, "optimizer.%s.%s", w->name, suffix), .type = w->type,
                  .role = MLC_ROLE_OPT_STATE, .init = MLC_INIT_ZEROS, .loc = w->loc, .sharded = w->sharded};
  return param_node(p, f, mlc_program_add_param(p, &st));
}

/* A scalar input the runtime fills itself (a name no user input can take). */
static uint32_t runtime_input(mlc_program *p, mlc_func *f, const char *name, mlc_dtype dt, mlc_loc loc) {
  for (uint32_t i = 0; i < f->inputs.n; i++)
    if (!strcmp(f->nodes[f->inputs.v[i]].a.name, name)) return f->inputs.v[i];
  mlc_attrs a = {.name = name};
  uint32_t id = mlc_func_add(p, f, MLC_OP_INPUT, NULL, 0, &a, loc, "");
  f->nodes[id].type = (mlc_type){.dtype = dt, .rank = 0};
  mlc_u32vec_push(p->arena, &f->inputs, id);
  return id;
}

uint32_t mlc_optimizer_update(mlc_program *p, mlc_func *f, uint32_t param, uint32_t grad, uint32_t *step) {
  uint32_t w = param_node(p, f, param);
  const char *scope = f->nodes[grad].scope;
  mlc_loc loc = p->train.loc;
  uint32_t tok;
  if (p->train.opt == MLC_OPT_ADAMW) {
    if (*step == UINT32_MAX) *step = runtime_input(p, f, "opt.step", MLC_DT_I64, loc);
    uint32_t m = add_state(p, f, param, "exp_avg"), v = add_state(p, f, param, "exp_avg_sq");
    uint32_t lr = runtime_input(p, f, "opt.lr", MLC_DT_F32, loc);
    uint32_t in[6] = {w, grad, m, v, *step, lr};
    tok = mlc_func_add(p, f, MLC_OP_ADAMW, in, 6, NULL, loc, scope);
  } else {
    uint32_t buf = add_state(p, f, param, "momentum_buffer");
    uint32_t in[4] = {w, grad, buf, runtime_input(p, f, "opt.lr", MLC_DT_F32, loc)};
    tok = mlc_func_add(p, f, MLC_OP_SGD, in, 4, NULL, loc, scope);
  }
  char err[256];
  if (!mlc_infer_type(p, f, &f->nodes[tok], &f->nodes[tok].type, err, sizeof err)) MLC_ICE("optimizer: %s", err);
  mlc_func_add_output(p, f, mlc_arena_printf(p->arena, "update:%s", p->params[param].name), tok);
  return tok;
}

/* One node of the clipping, typed by its rule (or `type`, for the ops whose
 * type the builder gives). */
static uint32_t clip_node(mlc_program *p, mlc_func *f, mlc_op op, const uint32_t *in, uint32_t nin, const mlc_attrs *a,
                          const mlc_type *type) {
  uint32_t id = mlc_func_add(p, f, op, in, nin, a, p->train.clip_loc, "clip");
  mlc_node *n = &f->nodes[id];
  if (type) n->type = *type;
  char err[256];
  if (!mlc_infer_type(p, f, n, &n->type, err, sizeof err)) MLC_ICE("optimizer: clipping: %s", err);
  return id;
}

static uint32_t clip_const(mlc_program *p, mlc_func *f, double v) {
  mlc_attrs a = {.f = v};
  mlc_type t = {.dtype = MLC_DT_F32, .rank = 0};
  return clip_node(p, f, MLC_OP_CONST, NULL, 0, &a, &t);
}

static uint32_t clip_reshape(mlc_program *p, mlc_func *f, uint32_t x, int64_t numel) {
  mlc_type t = {.dtype = f->nodes[x].type.dtype, .rank = 1, .dim = {numel}};
  return clip_node(p, f, MLC_OP_RESHAPE, &x, 1, NULL, &t);
}

uint32_t mlc_clip_factor(mlc_program *p, mlc_func *f, uint32_t sumsq, uint32_t *norm) {
  *norm = clip_node(p, f, MLC_OP_SQRT, &sumsq, 1, NULL, NULL);
  uint32_t den_in[2] = {*norm, clip_const(p, f, 1e-6)};
  uint32_t den = clip_node(p, f, MLC_OP_ADD, den_in, 2, NULL, NULL);
  uint32_t r_in[2] = {clip_const(p, f, p->train.clip), den};
  uint32_t r = clip_node(p, f, MLC_OP_DIV, r_in, 2, NULL, NULL);
  /* min(r, 1) = -max(-r, -1), exactly */
  uint32_t pair[2] = {clip_reshape(p, f, clip_node(p, f, MLC_OP_NEG, &r, 1, NULL, NULL), 1),
                      clip_reshape(p, f, clip_const(p, f, -1.0), 1)};
  mlc_attrs ax = {.axis = 0};
  uint32_t both = clip_node(p, f, MLC_OP_CONCAT, pair, 2, &ax, NULL);
  uint32_t mx = clip_node(p, f, MLC_OP_MAX, &both, 1, &ax, NULL);
  return clip_node(p, f, MLC_OP_NEG, &mx, 1, NULL, NULL);
}

/* The factor min(1, max_norm / (norm + 1e-6)) of the gradients grad[0..n),
 * and their norm in *norm. */
static uint32_t clip_factor(mlc_program *p, mlc_func *f, const uint32_t *grad, uint32_t n, uint32_t *norm) {
  uint32_t total = UINT32_MAX;
  for (uint32_t k = 0; k < n; k++) {
    uint32_t g = grad[k];
    if (f->nodes[g].type.dtype != MLC_DT_F32) {
      mlc_type t = f->nodes[g].type;
      t.dtype = MLC_DT_F32;
      mlc_attrs a = {0};
      g = clip_node(p, f, MLC_OP_CAST, &g, 1, &a, &t);
    }
    g = clip_reshape(p, f, g, mlc_type_numel(&f->nodes[g].type));
    uint32_t sq[2] = {g, g};
    uint32_t x = clip_node(p, f, MLC_OP_MUL, sq, 2, NULL, NULL);
    mlc_attrs ax = {.axis = 0};
    uint32_t s = clip_node(p, f, MLC_OP_SUM, &x, 1, &ax, NULL);
    if (total == UINT32_MAX) total = s;
    else {
      uint32_t in[2] = {total, s};
      total = clip_node(p, f, MLC_OP_ADD, in, 2, NULL, NULL);
    }
  }
  return mlc_clip_factor(p, f, total, norm);
}

bool mlc_pass_optimizer(mlc_pass_ctx *c) {
  mlc_program *p = c->p;
  if (p->train.opt == MLC_OPT_NONE) return true;
  mlc_func *f = NULL;
  for (uint32_t k = 0; k < p->nfuncs; k++)
    if (!strcmp(p->funcs[k].name, "train")) f = &p->funcs[k];
  if (!f) return true;
  uint32_t step = UINT32_MAX;
  uint32_t nout = f->noutputs, n = 0;
  uint32_t *param = mlc_arena_alloc(p->arena, (nout + 1) * sizeof *param);
  uint32_t *grad = mlc_arena_alloc(p->arena, (nout + 1) * sizeof *grad);
  for (uint32_t o = 0; o < nout; o++) {
    const char *name = f->outputs[o].name;
    if (strncmp(name, "grad:", 5)) continue;
    param[n] = UINT32_MAX;
    for (uint32_t i = 0; i < p->nparams && param[n] == UINT32_MAX; i++)
      if (p->params[i].role == MLC_ROLE_WEIGHT && !strcmp(p->params[i].name, name + 5)) param[n] = i;
    MLC_ASSERT(param[n] != UINT32_MAX);
    grad[n++] = f->outputs[o].node;
  }
  if (p->train.clip > 0 && n) {
    uint32_t norm, factor = clip_factor(p, f, grad, n, &norm);
    mlc_func_add_output(p, f, "grad_norm", norm);
    for (uint32_t k = 0; k < n; k++) {
      uint32_t s = factor;
      mlc_dtype dt = (mlc_dtype)f->nodes[grad[k]].type.dtype;
      if (dt != MLC_DT_F32) {
        mlc_type t = {.dtype = dt, .rank = 0};
        mlc_attrs a = {0};
        s = clip_node(p, f, MLC_OP_CAST, &s, 1, &a, &t);
      }
      uint32_t in[2] = {grad[k], s};
      grad[k] = clip_node(p, f, MLC_OP_MUL, in, 2, NULL, NULL);
      f->nodes[grad[k]].scope = f->nodes[in[0]].scope;
    }
  }
  for (uint32_t k = 0; k < n; k++) mlc_optimizer_update(p, f, param[k], grad[k], &step);
  return true;
}
