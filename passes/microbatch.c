/* microbatch: one micro-batch's forward and backward at a time.
 *
 * With `accum = n` the lowerer (frontend/lower.c) slices every input of the
 * train function into n micro-batches along axis 0 and lowers the loss once
 * per micro-batch; autodiff then emits the backward in reverse, so the
 * order is fwd 0, fwd 1, ..., fwd n-1, bwd n-1, ..., bwd 0 and every
 * micro-batch's activations are alive at the turn: the memory of the large
 * batch.  This pass reorders the function so that micro-batch n-1 runs its
 * forward and backward, then micro-batch n-2, and so on: only one
 * micro-batch's activations are alive at a time, with each parameter's
 * gradient summed into its running total as the next micro-batch's
 * contribution comes.  Last to first, because autodiff sums a parameter's
 * contributions in that order ((g[n-1] + g[n-2]) + ...): first to last
 * would keep every micro-batch's gradient alive until the sum could start.
 *
 * The order is a stable sort by a key: a node's key is the latest (in the
 * new order) micro-batch it depends on, through the slices of the inputs;
 * a node that depends on none (a constant, a cast of a weight) takes the
 * smallest key of its users, so it runs no earlier than before relative to
 * them.  Both rules keep every input ahead of its users, and nodes of equal
 * key keep their relative order.  Nothing is added or removed and every
 * node computes what it did, so the results are bit for bit the same.
 *
 * Runs after the optimizer (its updates and the clipping depend on every
 * micro-batch: they stay last) and before interleave, which moves each
 * update to right after its gradient's last sum.  A sharded function
 * (fsdp: collectives) keeps its order: the fsdp pass places its gathers
 * around the one forward and backward it sees.
 */
#include <string.h>

#include "passes/passes.h"

#define NONE UINT32_MAX

/* The micro-batch a node is, if it is a slice of a train input that the
 * lowerer made (rows [k b, (k+1) b) of n b), or NONE. */
static uint32_t micro_of(const mlc_func *f, const mlc_node *nd, int64_t n) {
  if (nd->op != MLC_OP_SLICE || nd->a.axis != 0) return NONE;
  const mlc_node *x = &f->nodes[nd->in[0]];
  if (x->op != MLC_OP_INPUT || x->type.rank == 0) return NONE;
  int64_t b = x->type.dim[0] / n;
  if (b <= 0 || x->type.dim[0] != b * n || nd->a.end - nd->a.start != b || nd->a.start % b) return NONE;
  return (uint32_t)(nd->a.start / b);
}

static void order_func(mlc_program *p, mlc_func *f, int64_t nmicro) {
  uint32_t n = f->n, ngroups = (uint32_t)nmicro;
  for (uint32_t i = 0; i < n; i++)
    if (mlc_ops[f->nodes[i].op].flags & MLC_F_COLL) return;
  /* key[i]: the group node i runs in, 0 .. ngroups-1 (micro-batch n-1-key), or NONE for no dependence yet */
  uint32_t *key = mlc_arena_alloc(p->arena, (n + 1) * sizeof *key);
  bool any = false;
  for (uint32_t i = 0; i < n; i++) {
    const mlc_node *nd = &f->nodes[i];
    uint32_t m = micro_of(f, nd, nmicro);
    key[i] = NONE;
    if (m != NONE) {
      key[i] = ngroups - 1 - m;
      any = true;
      continue;
    }
    for (uint32_t k = 0; k < nd->nin; k++) {
      uint32_t kx = key[nd->in[k]];
      if (kx != NONE && (key[i] == NONE || kx > key[i])) key[i] = kx;
    }
  }
  if (!any) return;
  /* Nodes that depend on no micro-batch: the smallest key of their users
   * (users come later, so walk backwards); 0 if they have none. */
  uint32_t *lazy = mlc_arena_alloc(p->arena, (n + 1) * sizeof *lazy);
  for (uint32_t i = 0; i < n; i++) lazy[i] = NONE;
  for (uint32_t i = n; i-- > 0;) {
    const mlc_node *nd = &f->nodes[i];
    if (key[i] == NONE) key[i] = lazy[i] == NONE ? 0 : lazy[i];
    for (uint32_t k = 0; k < nd->nin; k++)
      if (lazy[nd->in[k]] == NONE || key[i] < lazy[nd->in[k]]) lazy[nd->in[k]] = key[i];
  }
  /* A counting sort, stable. */
  uint32_t *start = mlc_arena_alloc(p->arena, (ngroups + 1) * sizeof *start);
  memset(start, 0, (ngroups + 1) * sizeof *start);
  for (uint32_t i = 0; i < n; i++) start[key[i] + 1]++;
  for (uint32_t g = 0; g < ngroups; g++) start[g + 1] += start[g];
  uint32_t *order = mlc_arena_alloc(p->arena, (n + 1) * sizeof *order);
  for (uint32_t i = 0; i < n; i++) order[start[key[i]]++] = i;
  mlc_func_permute(p, f, order);
}

bool mlc_pass_microbatch(mlc_pass_ctx *c) {
  mlc_program *p = c->p;
  if (!p->train.present || p->train.accum <= 1) return true;
  for (uint32_t k = 0; k < p->nfuncs; k++)
    if (!strcmp(p->funcs[k].name, "train")) order_func(p, &p->funcs[k], p->train.accum);
  return true;
}
