/* attnpad (targets whose descriptor has attn_save_max_head: CUDA): an
 * attention whose head dim the tensor-core kernels do not take, but would
 * take with zero columns added up to the next multiple they need, runs so:
 *
 *     attention(q, k, v)            slice(attention(pad(q), pad(k), pad(v)), last axis, [0, dv))
 *     attention_grad(g, q, k, v)    slice(attention_grad(pad(g), pad(q), pad(k), pad(v)), last axis, [0, d))
 *
 * pad(x) is slice_grad: zeros of the padded shape with x in its first
 * columns.  Zero columns of q and k add nothing to q k^T, and those of v
 * give zero columns of the output, which the slice drops; the scale is the
 * node's attribute (1/sqrt of the unpadded d), so the result is the same.
 * A tensor padded for the forward is the same node for its gradient, so
 * attnsave, which runs next, still pairs them and the forward keeps its
 * log-sum-exp.  The copies are memory-bound and small against attention's
 * s^2 d work: on the H200, f32 at d = 36 went from a warp per row (the
 * generic kernel, 1-2 TFLOP/s) to the tensor cores (issue 20, item 3).
 *
 * Which attentions: rank-4 q, k, v (and g) of bf16/f16, or f32 on the
 * tensor cores (not under --f32-matmul ieee); a head dim that is not a
 * multiple of the target's (attn_save_head_16 or _32: the gradient's
 * kernels', also taken by the forward's), padded to one that is, at most
 * attn_save_max_head (a 16-bit forward with no gradient stays at a
 * multiple of 16, which its kernel takes).  Past that (d > 256) the generic kernels
 * stay, and the profile's hint names them (codegen/cuda/unit.c). */
#include "passes/passes.h"

#define NONE UINT32_MAX

/* The head dim that attention node n (attention or attention_grad) runs at
 * after padding, or 0 where it stays as it is. */
static int64_t padded_dim(const mlc_program *p, const mlc_target *t, const mlc_func *f, const mlc_node *n) {
  uint32_t first = n->op == MLC_OP_ATTENTION_GRAD; /* g, then q, k, v */
  const mlc_type *q = &f->nodes[n->in[first]].type;
  bool f32 = q->dtype == MLC_DT_F32 && p->opts.f32_matmul != MLC_F32MM_IEEE;
  if (q->dtype != MLC_DT_BF16 && q->dtype != MLC_DT_F16 && !f32) return 0;
  int64_t d = 0;
  for (uint32_t i = 0; i < n->nin; i++) {
    const mlc_type *x = &f->nodes[n->in[i]].type;
    if (x->rank != 4 || x->dtype != q->dtype) return 0;
    if (x->dim[3] > d) d = x->dim[3];
  }
  int64_t m = f32 ? t->attn_save_head_32 : t->attn_save_head_16, dp = m > 0 ? (d + m - 1) / m * m : 0;
  bool even = true; /* every head dim already a multiple: nothing to do */
  for (uint32_t i = 0; i < n->nin; i++) even &= f->nodes[n->in[i]].type.dim[3] == dp;
  return !even && dp <= t->attn_save_max_head ? dp : 0;
}

/* A 16-bit forward the forward kernel takes as it is (one head dim, a
 * multiple of 16) and no gradient reads: padded, it would only cost. */
static bool forward_fits(const mlc_func *f, uint32_t y) {
  const mlc_node *n = &f->nodes[y];
  const mlc_type *q = &f->nodes[n->in[0]].type;
  if (n->op != MLC_OP_ATTENTION || q->dtype == MLC_DT_F32 || q->dim[3] % 16) return false;
  for (uint32_t i = 1; i < 3; i++)
    if (f->nodes[n->in[i]].type.dim[3] != q->dim[3]) return false;
  for (uint32_t i = y + 1; i < f->n; i++)
    if (f->nodes[i].op == MLC_OP_ATTENTION_GRAD && f->nodes[i].in[1] == n->in[0]) return false;
  return true;
}

static uint32_t add(mlc_program *p, mlc_func *f, mlc_op op, const uint32_t *in, uint32_t nin, const mlc_attrs *a,
                    const mlc_node *like, const mlc_type *t) {
  return mlc_pass_add_node(p, f, op, in, nin, a, like, t, "attnpad");
}

/* x (new node ids) with its last axis zero-padded to dp; one node per
 * (x, dp), kept in pad[] and pad_dp[] by x's old id. */
static uint32_t pad_of(mlc_program *p, mlc_func *f, uint32_t old, uint32_t x, int64_t dp, uint32_t *pad, int64_t *pad_dp,
                       const mlc_node *like) {
  if (pad[old] != NONE && pad_dp[old] == dp) return pad[old];
  mlc_type t = f->nodes[x].type;
  mlc_attrs a = {.axis = t.rank - 1, .start = 0, .end = t.dim[t.rank - 1]};
  if (t.dim[t.rank - 1] == dp) return x;
  t.dim[t.rank - 1] = dp;
  pad[old] = add(p, f, MLC_OP_SLICE_GRAD, &x, 1, &a, like, &t), pad_dp[old] = dp;
  return pad[old];
}

static void rewrite(mlc_program *p, const mlc_target *t, mlc_func *f) {
  uint32_t n0 = f->n;
  int64_t *dps = mlc_arena_alloc(p->arena, (n0 + 1) * sizeof *dps); /* the head dim each node runs at padded, or 0 */
  bool any = false;
  for (uint32_t i = 0; i < n0; i++) {
    const mlc_node *n = &f->nodes[i];
    dps[i] = (n->op == MLC_OP_ATTENTION || n->op == MLC_OP_ATTENTION_GRAD) && !forward_fits(f, i) ? padded_dim(p, t, f, n) : 0;
    any |= dps[i] != 0;
  }
  if (!any) return;
  mlc_func old = mlc_func_take(f);
  uint32_t *map = mlc_arena_alloc(p->arena, (n0 + 1) * sizeof *map), *pad = mlc_arena_alloc(p->arena, (n0 + 1) * sizeof *pad);
  int64_t *pad_dp = mlc_arena_alloc(p->arena, (n0 + 1) * sizeof *pad_dp);
  for (uint32_t i = 0; i < n0; i++) pad[i] = NONE, pad_dp[i] = 0;
  for (uint32_t i = 0; i < old.n; i++) {
    const mlc_node *n = &old.nodes[i];
    uint32_t in[4];
    uint32_t *ins = n->nin <= 4 ? in : mlc_arena_alloc(p->arena, n->nin * sizeof *ins);
    for (uint32_t k = 0; k < n->nin; k++) ins[k] = map[n->in[k]];
    if (!dps[i]) {
      map[i] = mlc_func_copy_node(p, f, n, ins);
      continue;
    }
    for (uint32_t k = 0; k < n->nin; k++) ins[k] = pad_of(p, f, n->in[k], ins[k], dps[i], pad, pad_dp, n);
    mlc_type ty = n->type;
    int last = ty.rank - 1;
    int64_t keep = ty.dim[last];
    ty.dim[last] = dps[i];
    uint32_t y = add(p, f, n->op, ins, n->nin, &n->a, n, &ty);
    mlc_attrs a = {.axis = last, .start = 0, .end = keep};
    map[i] = add(p, f, MLC_OP_SLICE, &y, 1, &a, n, &n->type);
  }
  for (uint32_t o = 0; o < old.noutputs; o++) mlc_func_add_output(p, f, old.outputs[o].name, map[old.outputs[o].node]);
}

bool mlc_pass_attnpad(mlc_pass_ctx *c) {
  if (!c->target || !c->target->attn_save_max_head) return true;
  for (uint32_t i = 0; i < c->p->nfuncs; i++) rewrite(c->p, c->target, &c->p->funcs[i]);
  return true;
}
