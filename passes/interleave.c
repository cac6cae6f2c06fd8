/* interleave: the optimizer inside the backward.
 *
 * The optimizer pass appends every parameter's update (adamw, sgd) after
 * the whole backward, and autodiff makes each gradient an output
 * ("grad:<name>"), so every gradient is alive at once at the end of the
 * step: 2.9 GB of f32 for the MiniLLM.  This pass moves each update to the
 * earliest point where it may run, and drops the gradient outputs, so that
 * a gradient dies at its update and memplan reuses its bytes for the rest
 * of the backward.
 *
 * An update may run once
 *   - its inputs are computed (the gradient, above all), and
 *   - nothing else will read what it writes in place: the parameter (a
 *     backward GEMM may read the f32 weight itself, dX = dY W) and its
 *     state, directly or through a view (reshape) of them.
 * Every other node keeps its relative order; each update goes right after
 * the last node it waits for, and the leaves only it reads (its state, the
 * step count) just before it.  Results do not change: an update reads a
 * complete gradient, and every read of the old parameter comes before it,
 * as when the updates ran last.
 *
 * An update of a shard (fsdp) is left where the fsdp pass put it, after its
 * reduce-scatter.  With `keep_grads` (tests that compare gradients, through
 * the pipeline options) the "grad:" outputs stay, and with them the
 * gradients' memory; the order is the same.
 *
 * Runs before fuse, which groups the AdamW updates on CUDA in the order
 * this pass leaves them, that is by readiness (passes/fuse.c).
 */
#include <string.h>

#include "passes/passes.h"

#define NONE UINT32_MAX

static bool is_update(const mlc_program *p, const mlc_func *f, const mlc_node *n) {
  return mlc_op_is_update(n->op) && !mlc_node_sharded(p, f, n);
}

static bool is_leaf(const mlc_node *n) { return (mlc_ops[n->op].flags & MLC_F_LEAF) != 0; }

typedef struct {
  mlc_program *p;
  mlc_func *f;
  uint32_t *order, norder; /* the new order: old node indices */
  bool *done;
  uint32_t *head, *next; /* per node: the updates placed right after it (a list through next) */
} ctx;

static void emit(ctx *c, uint32_t i);

static void emit_update(ctx *c, uint32_t u) {
  const mlc_node *n = &c->f->nodes[u];
  for (uint32_t k = 0; k < n->nin; k++) emit(c, n->in[k]); /* its state and the step count, if not yet out */
  MLC_ASSERT(!c->done[u]);
  c->done[u] = true;
  c->order[c->norder++] = u;
}

static void emit(ctx *c, uint32_t i) {
  if (c->done[i]) return;
  MLC_ASSERT(is_leaf(&c->f->nodes[i])); /* anything else is emitted in order, after its inputs */
  c->done[i] = true;
  c->order[c->norder++] = i;
}

static void interleave_func(mlc_program *p, mlc_func *f, bool keep_grads) {
  uint32_t n = f->n, nupd = 0;
  for (uint32_t i = 0; i < n; i++) nupd += is_update(p, f, &f->nodes[i]);
  if (!nupd) return;
  /* pr[i]: the parameter node whose storage node i is (itself, or a view of it), or NONE */
  uint32_t *pr = mlc_arena_alloc(p->arena, (n + 1) * sizeof *pr);
  uint32_t *last_read = mlc_arena_alloc(p->arena, (n + 1) * sizeof *last_read); /* per parameter node */
  for (uint32_t i = 0; i < n; i++) {
    const mlc_node *nd = &f->nodes[i];
    pr[i] = nd->op == MLC_OP_PARAM ? i : (mlc_ops[nd->op].flags & MLC_F_VIEW) && nd->nin ? pr[nd->in[0]] : NONE;
    last_read[i] = NONE;
    if (is_update(p, f, nd)) continue;
    for (uint32_t k = 0; k < nd->nin; k++)
      if (pr[nd->in[k]] != NONE) last_read[pr[nd->in[k]]] = i;
  }
  ctx c = {p, f, mlc_arena_alloc(p->arena, (n + 1) * sizeof *c.order), 0, mlc_arena_alloc(p->arena, (n + 1) * sizeof *c.done),
           mlc_arena_alloc(p->arena, (n + 1) * sizeof *c.head), mlc_arena_alloc(p->arena, (n + 1) * sizeof *c.next)};
  memset(c.done, 0, (n + 1) * sizeof *c.done);
  for (uint32_t i = 0; i < n; i++) c.head[i] = NONE;
  bool *moved = mlc_arena_alloc(p->arena, (n + 1) * sizeof *moved);
  for (uint32_t u = n; u-- > 0;) { /* backwards, so that each list comes out in the old order */
    const mlc_node *nd = &f->nodes[u];
    moved[u] = false;
    if (!is_update(p, f, nd)) continue;
    uint32_t ready = NONE;
    for (uint32_t k = 0; k < nd->nin; k++) {
      uint32_t x = nd->in[k];
      if (!is_leaf(&f->nodes[x]) && (ready == NONE || x > ready)) ready = x;
      if (pr[x] != NONE && last_read[pr[x]] != NONE && (ready == NONE || last_read[pr[x]] > ready)) ready = last_read[pr[x]];
    }
    if (ready == NONE) continue; /* nothing to wait for: it stays where it is */
    MLC_ASSERT(ready < u && !is_update(p, f, &f->nodes[ready]));
    moved[u] = true;
    c.next[u] = c.head[ready];
    c.head[ready] = u;
  }
  for (uint32_t i = 0; i < n; i++) {
    if (moved[i] || c.done[i]) continue;
    if (is_update(p, f, &f->nodes[i])) {
      emit_update(&c, i);
      continue;
    }
    c.done[i] = true;
    c.order[c.norder++] = i;
    for (uint32_t u = c.head[i]; u != NONE; u = c.next[u]) emit_update(&c, u);
  }
  MLC_ASSERT(c.norder == n);
  mlc_func_permute(p, f, c.order);
  if (keep_grads) return;
  /* The gradients the updates read are theirs alone now. */
  bool *read = mlc_arena_alloc(p->arena, (n + 1) * sizeof *read);
  memset(read, 0, (n + 1) * sizeof *read);
  for (uint32_t i = 0; i < n; i++)
    if (is_update(p, f, &f->nodes[i]))
      for (uint32_t k = 0; k < f->nodes[i].nin; k++) read[f->nodes[i].in[k]] = true;
  uint32_t m = 0;
  for (uint32_t o = 0; o < f->noutputs; o++)
    if (strncmp(f->outputs[o].name, "grad:", 5) || !read[f->outputs[o].node]) f->outputs[m++] = f->outputs[o];
  f->noutputs = m;
}

bool mlc_pass_interleave(mlc_pass_ctx *c) {
  for (uint32_t k = 0; k < c->p->nfuncs; k++) interleave_func(c->p, &c->p->funcs[k], c->keep_grads);
  return true;
}
