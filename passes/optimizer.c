/* optimizer: appends the parameter updates to the train function.
 *
 * After autodiff, the train function outputs "loss" and one "grad:<name>"
 * per trained parameter.  For each of those this pass adds the optimizer's
 * state as parameters of role MLC_ROLE_OPT_STATE (zero at the start, saved
 * in checkpoints, not in the state_dict) and one fused update op per
 * parameter, AdamW or SGD with momentum, with PyTorch's semantics (see
 * codegen/llvm/emit_optim.c).  AdamW's bias correction needs the step
 * number: the function gets an input "opt.step" (i64[]), which the runtime
 * fills with its own step count, so a user never passes it.  Each update's
 * token becomes an output "update:<name>", which keeps it in the schedule.
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

uint32_t mlc_optimizer_update(mlc_program *p, mlc_func *f, uint32_t param, uint32_t grad, uint32_t *step) {
  uint32_t w = param_node(p, f, param);
  const char *scope = f->nodes[grad].scope;
  mlc_loc loc = p->train.loc;
  uint32_t tok;
  if (p->train.opt == MLC_OPT_ADAMW) {
    if (*step == UINT32_MAX) {
      for (uint32_t i = 0; i < f->inputs.n; i++)
        if (!strcmp(f->nodes[f->inputs.v[i]].a.name, "opt.step")) *step = f->inputs.v[i];
    }
    if (*step == UINT32_MAX) {
      mlc_attrs a = {.name = "opt.step"}; /* not an identifier: no user input can take it */
      *step = mlc_func_add(p, f, MLC_OP_INPUT, NULL, 0, &a, loc, "");
      f->nodes[*step].type = (mlc_type){.dtype = MLC_DT_I64, .rank = 0};
      mlc_u32vec_push(p->arena, &f->inputs, *step);
    }
    uint32_t m = add_state(p, f, param, "exp_avg"), v = add_state(p, f, param, "exp_avg_sq");
    uint32_t in[5] = {w, grad, m, v, *step};
    tok = mlc_func_add(p, f, MLC_OP_ADAMW, in, 5, NULL, loc, scope);
  } else {
    uint32_t buf = add_state(p, f, param, "momentum_buffer");
    uint32_t in[3] = {w, grad, buf};
    tok = mlc_func_add(p, f, MLC_OP_SGD, in, 3, NULL, loc, scope);
  }
  char err[256];
  if (!mlc_infer_type(p, f, &f->nodes[tok], &f->nodes[tok].type, err, sizeof err)) MLC_ICE("optimizer: %s", err);
  mlc_func_add_output(p, f, mlc_arena_printf(p->arena, "update:%s", p->params[param].name), tok);
  return tok;
}

bool mlc_pass_optimizer(mlc_pass_ctx *c) {
  mlc_program *p = c->p;
  if (p->train.opt == MLC_OPT_NONE) return true;
  mlc_func *f = NULL;
  for (uint32_t k = 0; k < p->nfuncs; k++)
    if (!strcmp(p->funcs[k].name, "train")) f = &p->funcs[k];
  if (!f) return true;
  uint32_t step = UINT32_MAX;
  uint32_t nout = f->noutputs;
  for (uint32_t o = 0; o < nout; o++) {
    const char *name = f->outputs[o].name;
    if (strncmp(name, "grad:", 5)) continue;
    uint32_t param = UINT32_MAX;
    for (uint32_t i = 0; i < p->nparams && param == UINT32_MAX; i++)
      if (p->params[i].role == MLC_ROLE_WEIGHT && !strcmp(p->params[i].name, name + 5)) param = i;
    MLC_ASSERT(param != UINT32_MAX);
    mlc_optimizer_update(p, f, param, f->outputs[o].node, &step);
  }
  return true;
}
