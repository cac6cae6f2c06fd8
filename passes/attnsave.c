/* attnsave (targets whose descriptor has attn_save_max_head: CUDA): an attention whose gradient is in the same
 * function keeps what that gradient needs, as FlashAttention does; and
 * any attention of an in-projection reads it as it lies (packed, below).
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
 * Packed: when q, k and v are the three heads-first views of one
 * in-projection x [b, s, 3 h d] (slice, reshape to [b, s, h, d], transpose
 * to [b, h, s, d]), the output's only user turns it back to [b, s, h, d],
 * the gradient g comes the same way, and dq, dk, dv go back by the mirror
 * image (slice, transpose, concat), then all of those copies go:
 *
 *     s  = attention_save(reshape(x) [b, s, 3h, d])     output in [b, s, h, d] order
 *     o' = view(s) [b, s, h, d]                         for the transpose of o
 *     dx = attention_grad_saved(g' [b, s, h, d], reshape(x), s) [b, s, 3h, d]
 *                                                       reshaped for the concat
 *
 * An attention with no gradient in the function (inference) takes the
 * packed forward alone, when its q, k, v and output are as above.
 *
 * Only where the CUDA kernels take it (codegen/cuda/emit_attention.c; the
 * numbers are the target descriptor's, ir/target.c):
 * q, k, v of one shape, head dim up to 128: 16-bit with a head dim a
 * multiple of 32, or f32 with one a multiple of 8 (on the tensor cores,
 * so not under --f32-matmul ieee).  Other attentions keep the plain ops. */
#include <string.h>

#include "passes/passes.h"

#define NONE UINT32_MAX

static bool saves(const mlc_program *p, const mlc_target *t, const mlc_func *f, const mlc_node *y) {
  const mlc_type *q = &f->nodes[y->in[0]].type;
  /* f32 on the tensor cores (not under --f32-matmul ieee): head dims a multiple of 8 up to 128 */
  bool f32 = q->dtype == MLC_DT_F32 && p->opts.f32_matmul != MLC_F32MM_IEEE;
  if (q->dtype != MLC_DT_BF16 && q->dtype != MLC_DT_F16 && !f32) return false;
  for (int i = 1; i < 3; i++)
    if (!mlc_type_eq(q, &f->nodes[y->in[i]].type)) return false;
  return q->rank == 4 && q->dim[3] % (f32 ? t->attn_save_head_32 : t->attn_save_head_16) == 0 &&
         q->dim[3] <= t->attn_save_max_head;
}

/* For an attention_grad, the attention of the same q, k, v and attributes
 * (autodiff passes the forward's own inputs), or NONE. */
static uint32_t forward_of(const mlc_program *p, const mlc_target *t, const mlc_func *f, uint32_t gi) {
  const mlc_node *g = &f->nodes[gi];
  for (uint32_t y = 0; y < gi; y++) {
    const mlc_node *n = &f->nodes[y];
    if (n->op != MLC_OP_ATTENTION || n->a.causal != g->a.causal || n->a.f != g->a.f) continue;
    if (n->in[0] == g->in[1] && n->in[1] == g->in[2] && n->in[2] == g->in[3] && saves(p, t, f, n)) return y;
  }
  return NONE;
}

static bool is_op(const mlc_func *f, uint32_t i, mlc_op op) { return f->nodes[i].op == op; }
/* transpose(x, 1, 2) of a rank-4 x */
static bool swaps_1_2(const mlc_func *f, uint32_t i) {
  const mlc_node *n = &f->nodes[i];
  return n->op == MLC_OP_TRANSPOSE && n->type.rank == 4 && n->a.axis == 1 && n->a.axis2 == 2;
}

/* One attention and its gradient, and for the packed form the nodes around
 * them (NONE where not packed). */
typedef struct {
  uint32_t y, grad;
  uint32_t x;      /* the in-projection [b, s, 3 h d] */
  uint32_t o_t;    /* transpose(o, 1, 2): the output's only user */
  uint32_t g_bshd; /* the gradient before its transpose to [b, h, s, d] */
  uint32_t concat; /* concat of dq, dk, dv back in [b, s, 3 h d] */
} pair;

/* q, k, v: transpose(reshape(slice(x, last axis, i-th third)), 1, 2)? */
static uint32_t packed_input(const mlc_func *f, const mlc_node *y) {
  uint32_t x = NONE;
  for (int i = 0; i < 3; i++) {
    uint32_t t = y->in[i];
    if (!swaps_1_2(f, t)) return NONE;
    uint32_t r = f->nodes[t].in[0];
    if (!is_op(f, r, MLC_OP_RESHAPE)) return NONE;
    uint32_t sl = f->nodes[r].in[0];
    const mlc_node *s = &f->nodes[sl];
    const mlc_type *rt = &f->nodes[r].type, *xt = &f->nodes[s->in[0]].type;
    int64_t hd = rt->dim[2] * rt->dim[3];
    if (s->op != MLC_OP_SLICE || xt->rank != 3 || s->a.axis != 2 || s->a.start != i * hd || s->a.end != (i + 1) * hd ||
        xt->dim[2] != 3 * hd || xt->dim[0] != rt->dim[0] || xt->dim[1] != rt->dim[1])
      return NONE;
    if (i && s->in[0] != x) return NONE;
    x = s->in[0];
  }
  return x;
}

/* The concat(reshape(transpose(reshape(slice(grad, 0, i)), 1, 2)) for i = 0, 1, 2) of the gradient, or NONE. */
static uint32_t packed_output(const mlc_func *f, const uint32_t *uses, uint32_t grad) {
  for (uint32_t c = grad + 1; c < f->n; c++) {
    const mlc_node *n = &f->nodes[c];
    if (n->op != MLC_OP_CONCAT || n->nin != 3 || n->type.rank != 3 || n->a.axis != 2) continue;
    bool ok = true;
    for (int i = 0; i < 3 && ok; i++) { /* each node's kind is checked before its input is read */
      uint32_t r2 = n->in[i];
      if (!(ok = is_op(f, r2, MLC_OP_RESHAPE) && uses[r2] == 1)) break;
      uint32_t t = f->nodes[r2].in[0];
      if (!(ok = swaps_1_2(f, t) && uses[t] == 1)) break;
      uint32_t r1 = f->nodes[t].in[0];
      if (!(ok = is_op(f, r1, MLC_OP_RESHAPE) && uses[r1] == 1)) break;
      const mlc_node *sl = &f->nodes[f->nodes[r1].in[0]];
      ok = sl->op == MLC_OP_SLICE && sl->in[0] == grad && sl->a.axis == 0 && sl->a.start == i && sl->a.end == i + 1 &&
           uses[f->nodes[r1].in[0]] == 1;
    }
    if (ok) return c;
  }
  return NONE;
}

static void find_packed(const mlc_func *f, const uint32_t *uses, pair *pr) {
  const mlc_node *y = &f->nodes[pr->y], *g = &f->nodes[pr->grad];
  pr->x = pr->o_t = pr->g_bshd = pr->concat = NONE;
  uint32_t x = packed_input(f, y);
  if (x == NONE || uses[pr->y] != 1 || !swaps_1_2(f, g->in[0]) || uses[pr->grad] != 3) return;
  uint32_t ot = NONE;
  for (uint32_t i = pr->y + 1; i < f->n && ot == NONE; i++)
    if (f->nodes[i].nin && f->nodes[i].in[0] == pr->y && swaps_1_2(f, i)) ot = i;
  uint32_t cat = packed_output(f, uses, pr->grad);
  if (ot == NONE || cat == NONE) return;
  pr->x = x, pr->o_t = ot, pr->g_bshd = f->nodes[g->in[0]].in[0], pr->concat = cat;
}

static uint32_t add(mlc_program *p, mlc_func *f, mlc_op op, const uint32_t *in, uint32_t nin, const mlc_attrs *a,
                    const mlc_node *like, const mlc_type *t) {
  return mlc_pass_add_node(p, f, op, in, nin, a, like, t, "attnsave");
}

static uint32_t view(mlc_program *p, mlc_func *f, uint32_t of, const mlc_node *like, const mlc_type *t) {
  mlc_attrs a = {.start = 0, .end = mlc_type_numel(t)};
  return add(p, f, MLC_OP_VIEW, &of, 1, &a, like, t);
}

static void rewrite(mlc_program *p, const mlc_target *t, mlc_func *f) {
  /* role[i]: the pair whose forward (or gradient, transpose of o, concat) node i is */
  uint32_t *role = mlc_arena_alloc(p->arena, (f->n + 1) * sizeof *role);
  pair *pairs = mlc_arena_alloc(p->arena, (f->n + 1) * sizeof *pairs);
  uint32_t *uses = mlc_arena_alloc(p->arena, (f->n + 1) * sizeof *uses);
  memset(uses, 0, (f->n + 1) * sizeof *uses);
  for (uint32_t i = 0; i < f->n; i++)
    for (uint32_t k = 0; k < f->nodes[i].nin; k++) uses[f->nodes[i].in[k]]++;
  for (uint32_t i = 0; i < f->noutputs; i++) uses[f->outputs[i].node]++;
  uint32_t np = 0;
  for (uint32_t i = 0; i < f->n; i++) role[i] = NONE;
  for (uint32_t i = 0; i < f->n; i++) {
    if (f->nodes[i].op != MLC_OP_ATTENTION_GRAD) continue;
    uint32_t y = forward_of(p, t, f, i);
    if (y == NONE || role[y] != NONE) continue;
    pair *pr = &pairs[np];
    pr->y = y, pr->grad = i;
    find_packed(f, uses, pr);
    role[y] = role[i] = np;
    if (pr->x != NONE) role[pr->o_t] = role[pr->concat] = np;
    np++;
  }
  /* Attentions with no gradient here (inference): only the packed form
   * pays, saving the copies around the attention; the statistics it also
   * writes are 4 bytes a row. */
  for (uint32_t i = 0; i < f->n; i++) {
    const mlc_node *y = &f->nodes[i];
    if (y->op != MLC_OP_ATTENTION || role[i] != NONE || !saves(p, t, f, y) || uses[i] != 1) continue;
    pair *pr = &pairs[np];
    *pr = (pair){.y = i, .grad = NONE, .x = packed_input(f, y), .o_t = NONE, .g_bshd = NONE, .concat = NONE};
    for (uint32_t j = i + 1; j < f->n && pr->o_t == NONE; j++)
      if (f->nodes[j].nin && f->nodes[j].in[0] == i && swaps_1_2(f, j)) pr->o_t = j;
    if (pr->x == NONE || pr->o_t == NONE) continue;
    role[i] = role[pr->o_t] = np++;
  }
  if (!np) return;
  mlc_func old = mlc_func_take(f);
  uint32_t *map = mlc_arena_alloc(p->arena, (old.n + 1) * sizeof *map);
  /* per pair: attention_save, the packed qkv, the packed gradient */
  uint32_t *saved = mlc_arena_alloc(p->arena, (np + 1) * sizeof *saved), *qkv = mlc_arena_alloc(p->arena, (np + 1) * sizeof *qkv),
           *grad = mlc_arena_alloc(p->arena, (np + 1) * sizeof *grad);
  for (uint32_t i = 0; i < old.n; i++) {
    const mlc_node *n = &old.nodes[i];
    uint32_t in[5];
    uint32_t *ins = n->nin <= 4 ? in : mlc_arena_alloc(p->arena, n->nin * sizeof *ins);
    /* the packed form's dropped copies map to NONE; nothing live reads them */
    for (uint32_t k = 0; k < n->nin; k++) ins[k] = map[n->in[k]];
    map[i] = NONE;
    const pair *pr = role[i] == NONE ? NULL : &pairs[role[i]];
    bool packed = pr && pr->x != NONE;
    if (pr && i == pr->y) { /* the forward: save; its output is a view */
      if (packed) {
        const mlc_type *xt = &old.nodes[pr->x].type;
        int64_t d = old.nodes[n->in[0]].type.dim[3];
        mlc_type t4 = {.dtype = xt->dtype, .rank = 4, .dim = {xt->dim[0], xt->dim[1], xt->dim[2] / d, d}};
        uint32_t x = map[pr->x];
        qkv[role[i]] = add(p, f, MLC_OP_RESHAPE, &x, 1, NULL, n, &t4);
        saved[role[i]] = add(p, f, MLC_OP_ATTENTION_SAVE, &qkv[role[i]], 1, &n->a, n, &n->type);
        continue; /* the [b, h, s, d] output is not made; o_t reads it */
      }
      saved[role[i]] = add(p, f, MLC_OP_ATTENTION_SAVE, ins, 3, &n->a, n, &n->type);
      map[i] = view(p, f, saved[role[i]], n, &n->type);
      continue;
    }
    if (pr && i == pr->grad) {
      if (packed) {
        uint32_t gi[3] = {map[pr->g_bshd], qkv[role[i]], saved[role[i]]};
        const mlc_type *t4 = &f->nodes[qkv[role[i]]].type;
        grad[role[i]] = add(p, f, MLC_OP_ATTENTION_GRAD_SAVED, gi, 3, &n->a, n, t4);
        continue; /* the [3, b, h, s, d] gradient is not made: its slices go */
      }
      ins[4] = saved[role[i]];
      map[i] = add(p, f, MLC_OP_ATTENTION_GRAD_SAVED, ins, 5, &n->a, n, &n->type);
      continue;
    }
    if (pr && i == pr->o_t) { /* o in [b, s, h, d] order is where it was saved */
      map[i] = view(p, f, saved[role[i]], n, &n->type);
      continue;
    }
    if (pr && i == pr->concat) { /* dq, dk, dv in [b, s, h, d] order, side by side */
      map[i] = add(p, f, MLC_OP_RESHAPE, &grad[role[i]], 1, NULL, n, &n->type);
      continue;
    }
    bool dropped = false;
    for (uint32_t k = 0; k < n->nin; k++) dropped |= ins[k] == NONE;
    if (dropped) continue; /* between the packed gradient and its concat, or after the unmade output */
    map[i] = mlc_func_copy_node(p, f, n, ins);
  }
  for (uint32_t o = 0; o < old.noutputs; o++) {
    MLC_ASSERT(map[old.outputs[o].node] != NONE);
    mlc_func_add_output(p, f, old.outputs[o].name, map[old.outputs[o].node]);
  }
  mlc_func_compact(p, f); /* the packed form's slices, reshapes and transposes of q, k and v */
}

bool mlc_pass_attnsave(mlc_pass_ctx *c) {
  if (!c->target || !c->target->attn_save_max_head) return true;
  for (uint32_t i = 0; i < c->p->nfuncs; i++) rewrite(c->p, c->target, &c->p->funcs[i]);
  return true;
}
