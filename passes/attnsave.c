/* attnsave (CUDA targets): an attention whose gradient is in the same
 * function keeps what that gradient needs, as FlashAttention does.
 *
 *     attention(q, k, v)                      s = attention_save(q, k, v)
 *                                  becomes    o = view(s)    (its users read o)
 *     attention_grad(g, q, k, v)              attention_grad_saved(g, q, k, v, s)
 *
 * s holds the output and each query row's log-sum-exp, so the gradient
 * reads them instead of running the forward a second time (D = rowsum(dO o)
 * comes from the saved output).  The price: the output lives until the
 * gradient, 2 bytes per element plus 4 per row.
 *
 * Only where the CUDA kernels take it (codegen/cuda/emit_attention.c):
 * 16-bit q, k, v of one shape, head dim a multiple of 32 up to 128.  Other
 * attentions keep the plain ops. */
#include <string.h>

#include "passes/passes.h"

#define NONE UINT32_MAX

static bool is_cuda(const char *target) { return target && !strncmp(target, "cuda", 4); }

static bool saves(const mlc_func *f, const mlc_node *y) {
  const mlc_type *q = &f->nodes[y->in[0]].type;
  if (q->dtype != MLC_DT_BF16 && q->dtype != MLC_DT_F16) return false;
  for (int i = 1; i < 3; i++)
    if (!mlc_type_eq(q, &f->nodes[y->in[i]].type)) return false;
  return q->rank == 4 && q->dim[3] % 32 == 0 && q->dim[3] <= 128;
}

/* For each attention_grad, the attention of the same q, k, v and attributes
 * (autodiff passes the forward's own inputs), or NONE. */
static uint32_t forward_of(const mlc_func *f, uint32_t gi) {
  const mlc_node *g = &f->nodes[gi];
  for (uint32_t y = 0; y < gi; y++) {
    const mlc_node *n = &f->nodes[y];
    if (n->op != MLC_OP_ATTENTION || n->a.causal != g->a.causal || n->a.f != g->a.f) continue;
    if (n->in[0] == g->in[1] && n->in[1] == g->in[2] && n->in[2] == g->in[3] && saves(f, n)) return y;
  }
  return NONE;
}

/* A node of type t (the rule checks it, or works it out). */
static uint32_t add(mlc_program *p, mlc_func *f, mlc_op op, const uint32_t *in, uint32_t nin, const mlc_attrs *a,
                    const mlc_node *like, const mlc_type *t) {
  uint32_t id = mlc_func_add(p, f, op, in, nin, a, like->loc, like->scope);
  mlc_node *n = &f->nodes[id];
  n->type = *t;
  char err[256];
  if (!mlc_infer_type(p, f, n, &n->type, err, sizeof err)) MLC_ICE("attnsave: %s", err);
  return id;
}

static void rewrite(mlc_program *p, mlc_func *f) {
  uint32_t *pair = mlc_arena_alloc(p->arena, (f->n + 1) * sizeof *pair); /* grad -> forward, forward -> itself */
  bool any = false;
  for (uint32_t i = 0; i < f->n; i++) pair[i] = NONE;
  for (uint32_t i = 0; i < f->n; i++) {
    if (f->nodes[i].op != MLC_OP_ATTENTION_GRAD) continue;
    uint32_t y = forward_of(f, i);
    if (y == NONE || pair[y] != NONE) continue;
    pair[i] = y;
    pair[y] = y;
    any = true;
  }
  if (!any) return;
  mlc_func old = *f;
  f->nodes = NULL;
  f->n = f->cap = 0;
  f->inputs = (mlc_u32vec){0};
  f->outputs = NULL;
  f->noutputs = 0;
  uint32_t *map = mlc_arena_alloc(p->arena, (old.n + 1) * sizeof *map);
  uint32_t *saved = mlc_arena_alloc(p->arena, (old.n + 1) * sizeof *saved); /* forward -> its attention_save */
  for (uint32_t i = 0; i < old.n; i++) {
    const mlc_node *n = &old.nodes[i];
    uint32_t in[5];
    uint32_t *ins = n->nin <= 4 ? in : mlc_arena_alloc(p->arena, n->nin * sizeof *ins);
    for (uint32_t k = 0; k < n->nin; k++) ins[k] = map[n->in[k]];
    if (pair[i] == i) { /* the forward: save, then its output as a view */
      saved[i] = add(p, f, MLC_OP_ATTENTION_SAVE, ins, 3, &n->a, n, &n->type);
      mlc_attrs va = {.start = 0, .end = mlc_type_numel(&n->type)};
      map[i] = add(p, f, MLC_OP_VIEW, &saved[i], 1, &va, n, &n->type);
      continue;
    }
    if (pair[i] != NONE) { /* the gradient */
      ins[4] = saved[pair[i]];
      map[i] = add(p, f, MLC_OP_ATTENTION_GRAD_SAVED, ins, 5, &n->a, n, &n->type);
      continue;
    }
    uint32_t id = mlc_func_add(p, f, (mlc_op)n->op, ins, n->nin, &n->a, n->loc, n->scope);
    f->nodes[id].type = n->type;
    if (n->op == MLC_OP_INPUT) mlc_u32vec_push(p->arena, &f->inputs, id);
    map[i] = id;
  }
  for (uint32_t o = 0; o < old.noutputs; o++) mlc_func_add_output(p, f, old.outputs[o].name, map[old.outputs[o].node]);
}

bool mlc_pass_attnsave(mlc_pass_ctx *c) {
  if (!is_cuda(c->target)) return true;
  for (uint32_t i = 0; i < c->p->nfuncs; i++) rewrite(c->p, &c->p->funcs[i]);
  return true;
}
