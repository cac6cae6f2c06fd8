/* fuse: rewrites for the GPU targets (CUDA, Metal), after the optimizer and before the
 * memory plan (so that what it removes is never allocated).
 *
 * Today one rewrite: the weight gradients of linear layers come out of
 * autodiff as matmul(transpose(dY), X), with dY [tokens, out] transposed
 * into a fresh [out, tokens] buffer first.  A GPU GEMM can read dY
 * column-wise as it is, so the pair becomes matmul_tn(dY, X) and the
 * transpose goes, with its traffic (two passes over dY; 1 GB for the
 * MiniLLM's head).  Then every node that nothing uses any more is dropped.
 *
 * The CPU target packs GEMM operands into its own layout anyway and does
 * not run this pass; no other pass sees matmul_tn.
 */
#include <string.h>

#include "passes/passes.h"

static bool is_gpu(const char *target) { return target && (!strncmp(target, "cuda", 4) || !strcmp(target, "metal")); }

/* Drops the nodes that no output depends on (inputs stay: they are the
 * signature), renumbering the rest in order. */
static void compact(mlc_program *p, mlc_func *f) {
  bool *live = mlc_arena_alloc(p->arena, (f->n + 1) * sizeof *live);
  uint32_t *map = mlc_arena_alloc(p->arena, (f->n + 1) * sizeof *map);
  memset(live, 0, (f->n + 1) * sizeof *live);
  for (uint32_t i = 0; i < f->noutputs; i++) live[f->outputs[i].node] = true;
  for (uint32_t i = 0; i < f->inputs.n; i++) live[f->inputs.v[i]] = true;
  for (uint32_t i = f->n; i-- > 0;)
    if (live[i])
      for (uint32_t k = 0; k < f->nodes[i].nin; k++) live[f->nodes[i].in[k]] = true;
  uint32_t m = 0;
  for (uint32_t i = 0; i < f->n; i++) {
    if (!live[i]) continue;
    map[i] = m;
    mlc_node n = f->nodes[i];
    for (uint32_t k = 0; k < n.nin; k++) n.in[k] = map[n.in[k]]; /* inputs come first: mapped already */
    f->nodes[m++] = n;
  }
  f->n = m;
  for (uint32_t i = 0; i < f->inputs.n; i++) f->inputs.v[i] = map[f->inputs.v[i]];
  for (uint32_t i = 0; i < f->noutputs; i++) f->outputs[i].node = map[f->outputs[i].node];
}

bool mlc_pass_fuse(mlc_pass_ctx *c) {
  if (!is_gpu(c->target)) return true;
  for (uint32_t k = 0; k < c->p->nfuncs; k++) {
    mlc_func *f = &c->p->funcs[k];
    bool changed = false;
    for (uint32_t i = 0; i < f->n; i++) {
      mlc_node *n = &f->nodes[i];
      if (n->op != MLC_OP_MATMUL || n->type.rank != 2) continue;
      const mlc_node *t = &f->nodes[n->in[0]], *b = &f->nodes[n->in[1]];
      if (t->op != MLC_OP_TRANSPOSE || t->type.rank != 2 || b->type.rank != 2) continue;
      n->op = MLC_OP_MATMUL_TN;
      n->in[0] = t->in[0];
      changed = true;
    }
    if (changed) compact(c->p, f);
  }
  return true;
}
