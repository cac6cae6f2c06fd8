/* recompute: a memory budget for training (--memory-budget, or the train
 * block's memory_budget = ...).
 *
 * The backward reads values the forward made: a layer's norm outputs, its
 * activations, the compute-dtype copies of its weights.  Each is kept from
 * its last use in the forward to its first use in the backward, and at the
 * start of the backward all of them are alive at once: that is the peak of
 * a training step.  A cheap one can be computed again instead, right
 * before its first use in the backward, from inputs that are alive there
 * anyway; its bytes are then free for the whole time between.
 *
 * Cheap means: a cast, a norm (rmsnorm, layernorm) or an elementwise
 * activation (silu, gelu, relu, sigmoid, tanh), of 4 KiB or more and at
 * least 1/1024 of the largest such value, whose inputs are
 *   - parameters that no update has written yet at that point (an update
 *     runs inside the backward: passes/interleave.c), constants or the
 *     step's inputs; or
 *   - values the backward keeps anyway until that point, which are not
 *     candidates themselves (so that a recomputation never needs another).
 *
 * When those are not enough, whole segments (activation checkpointing): a
 * segment is the forward of one repeated unit, the nodes whose scope
 * starts with "name.N" ("layers.3": its norms, GEMMs, attention, casts).
 * Of its values the forward keeps only those read outside the unit (its
 * output: the residual stream, which the next unit reads); the rest that
 * the unit's backward reads, with what they are computed from, run again
 * in the backward, each right before the first node that reads it or a
 * value made from it (so the first GEMM of the layer's backward does not
 * wait for its attention), reading the kept residual of the unit before
 * and parameters not yet updated there.  A unit's activations are then
 * alive only during its own backward.  An attention that keeps its
 * log-sum-exp (passes/attnsave.c) keeps the one of its new run.  Units
 * that gather their weights (fsdp) or run a collective are left alone, and
 * so is a step of several micro-batches.
 *
 * A plan over its budget first gives up the weights' shadows (the CUDA
 * train step's 16-bit copies of its weights: passes/fuse.c), whose casts
 * come back, and are candidates like any other.
 *
 * Single values come first, in order of bytes saved per FLOP spent (ties:
 * the larger first), then the segments in the same order (a GEMM costs far
 * more FLOPs per byte), and each one that makes the planned total smaller
 * (the entry's arena, as passes/memplan.c places it, every parameter and
 * the optimizer state: mlc_planned_session_bytes) is kept, until that
 * total is within the budget; then each one the budget is met without goes
 * again, the dearest first.  If all of them do not get there, the pass
 * stops with an error that names the smallest total it reached.  Without
 * a budget, or within it already, it does nothing.
 *
 * Runs last before memplan, on the nodes the target runs (after fuse), so
 * that the plan it checks is the plan the runtime gets.  What it chose is
 * kept in the program for --stats (passes/stats.c).
 */
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"

#define NONE UINT32_MAX
#define MIN_BYTES 4096 /* and 1/1024 of the largest: smaller values save nothing worth a kernel */

static bool cheap_op(const mlc_node *n) {
  switch (n->op) {
  case MLC_OP_CAST: case MLC_OP_RMSNORM: case MLC_OP_LAYERNORM: case MLC_OP_SILU: case MLC_OP_GELU:
  case MLC_OP_RELU: case MLC_OP_SIGMOID: case MLC_OP_TANH:
    return true;
  default:
    return false;
  }
}

static int64_t node_bytes(const mlc_node *n) { return mlc_type_numel(&n->type) * mlc_dtype_size(n->type.dtype); }

typedef struct {
  uint32_t node, first; /* the value (a segment: its first node), and its first user in the backward */
  uint32_t seg;         /* a segment's index in the segment table, or NONE for a single value */
  int64_t bytes;
  double flops, moved;  /* of one recomputation */
} cand;

/* A segment: the forward nodes of one repeated unit ("layers.3") that its
 * backward needs, directly or to compute those, less what leaves the unit
 * in the forward (its residual output: the next unit's input). */
typedef struct {
  const char *scope;
  uint32_t *nodes, n; /* in order */
  uint32_t *pos;      /* nodes[t] runs again right before node pos[t]: its first reader in the backward, or before
                         that, that of what needs it (so that what the unit's backward reads late is made late) */
  uint32_t first;     /* the least of them */
} segment;

static int by_ratio(const void *a, const void *b) {
  const cand *x = a, *y = b;
  double rx = (double)x->bytes / (x->flops > 1 ? x->flops : 1), ry = (double)y->bytes / (y->flops > 1 ? y->flops : 1);
  if (rx != ry) return rx > ry ? -1 : 1;
  if (x->bytes != y->bytes) return x->bytes > y->bytes ? -1 : 1;
  return x->node < y->node ? -1 : x->node > y->node;
}

/* The candidates of f, whose backward starts after node `loss`. */
static uint32_t candidates(mlc_program *p, const mlc_func *f, uint32_t loss, cand *out) {
  uint32_t n = f->n;
  /* root[i]: the node whose storage i is (through views); last[r]: the last user of root r; pr[i]: the
   * parameter i is (or a view of), or NONE; first[i]: i's first user in the backward */
  uint32_t *root = mlc_arena_alloc(p->arena, (n + 1) * sizeof *root), *last = mlc_arena_alloc(p->arena, (n + 1) * sizeof *last);
  uint32_t *pr = mlc_arena_alloc(p->arena, (n + 1) * sizeof *pr), *first = mlc_arena_alloc(p->arena, (n + 1) * sizeof *first);
  bool *view_to_bw = mlc_arena_alloc(p->arena, (n + 1) * sizeof *view_to_bw); /* a view of it is read in the backward */
  bool *output = mlc_arena_alloc(p->arena, (n + 1) * sizeof *output);
  for (uint32_t i = 0; i < n; i++) {
    const mlc_node *nd = &f->nodes[i];
    bool view = (mlc_ops[nd->op].flags & MLC_F_VIEW) && nd->nin;
    root[i] = view ? root[nd->in[0]] : i;
    pr[i] = nd->op == MLC_OP_PARAM ? i : view ? pr[nd->in[0]] : NONE;
    last[i] = i;
    first[i] = NONE;
    view_to_bw[i] = output[i] = false;
    for (uint32_t k = 0; k < nd->nin; k++) {
      uint32_t x = nd->in[k];
      last[root[x]] = i;
      if (i > loss && first[x] == NONE) first[x] = i;
      if (i > loss && x <= loss && root[x] != x) view_to_bw[root[x]] = true; /* a view made in the forward */
    }
  }
  for (uint32_t o = 0; o < f->noutputs; o++) output[root[f->outputs[o].node]] = true;
  bool *big_cheap = mlc_arena_alloc(p->arena, (n + 1) * sizeof *big_cheap);
  int64_t largest = 0;
  for (uint32_t i = 0; i < loss; i++)
    if (cheap_op(&f->nodes[i]) && node_bytes(&f->nodes[i]) > largest) largest = node_bytes(&f->nodes[i]);
  for (uint32_t i = 0; i < n; i++)
    big_cheap[i] = cheap_op(&f->nodes[i]) && node_bytes(&f->nodes[i]) >= MIN_BYTES && node_bytes(&f->nodes[i]) >= largest / 1024;
  uint32_t m = 0;
  for (uint32_t v = 0; v < loss; v++) {
    const mlc_node *nd = &f->nodes[v];
    uint32_t u = first[v];
    if (!big_cheap[v] || u == NONE || view_to_bw[v] || output[v] || root[v] != v) continue;
    bool ok = true;
    for (uint32_t k = 0; k < nd->nin && ok; k++) {
      uint32_t x = nd->in[k];
      if (pr[x] != NONE) { /* a parameter: not yet updated at u */
        for (uint32_t w = loss + 1; w < u && ok; w++)
          if (mlc_op_is_update(f->nodes[w].op))
            for (uint32_t j = 0; j < f->nodes[w].nin; j++) ok &= pr[f->nodes[w].in[j]] != pr[x];
      } else if (!(mlc_ops[f->nodes[x].op].flags & MLC_F_LEAF)) { /* kept anyway up to u, and not recomputed itself */
        ok = !big_cheap[x] && (last[root[x]] >= u || output[root[x]]);
      }
    }
    if (!ok) continue;
    cand c = {v, u, NONE, node_bytes(nd), 0, 0};
    mlc_node_cost(f, nd, &c.flops, &c.moved);
    out[m++] = c;
  }
  qsort(out, m, sizeof *out, by_ratio);
  return m;
}

/* The length of the unit part of a scope: up to and including its first
 * component that is a number ("layers.3" of "layers.3.attn"); 0 if none. */
static size_t unit_len(const char *scope) {
  if (!scope) return 0;
  for (const char *c = scope; *c;) {
    const char *e = c;
    while (*e >= '0' && *e <= '9') e++;
    if (e > c && (*e == '.' || !*e)) return (size_t)(e - scope);
    while (*c && *c != '.') c++;
    if (*c) c++;
  }
  return 0;
}

/* The segments of f (each unit's forward, to be run again right before the
 * first backward node that reads it), as candidates appended to out[]
 * from index m, sorted among themselves; returns the new count.  A unit
 * qualifies when its nodes read no collective's result and run none (fsdp
 * gathers its weights again anyway), every parameter it reads is not
 * updated yet at that point, and running it again spares something. */
static uint32_t segments(mlc_program *p, const mlc_func *f, uint32_t loss, cand *out, uint32_t m, segment **out_segs) {
  uint32_t n = f->n;
  if (p->train.accum > 1) return m; /* before the loss lie earlier micro-batches' backwards */
  uint32_t *root = mlc_arena_alloc(p->arena, (n + 1) * sizeof *root), *pr = mlc_arena_alloc(p->arena, (n + 1) * sizeof *pr);
  uint32_t *first = mlc_arena_alloc(p->arena, (n + 1) * sizeof *first), *unit = mlc_arena_alloc(p->arena, (n + 1) * sizeof *unit);
  uint32_t *upd = mlc_arena_alloc(p->arena, (n + 1) * sizeof *upd); /* per parameter: its first update after the loss */
  bool *out_of_unit = mlc_arena_alloc(p->arena, (n + 1) * sizeof *out_of_unit), *need = mlc_arena_alloc(p->arena, (n + 1) * sizeof *need);
  bool *bw_read = mlc_arena_alloc(p->arena, (n + 1) * sizeof *bw_read); /* per root: the backward reads it */
  segment *segs = mlc_arena_alloc(p->arena, (n + 1) * sizeof *segs);
  uint32_t nseg = 0;
  for (uint32_t i = 0; i < n; i++) {
    const mlc_node *nd = &f->nodes[i];
    bool view = (mlc_ops[nd->op].flags & MLC_F_VIEW) && nd->nin;
    root[i] = view ? root[nd->in[0]] : i;
    pr[i] = nd->op == MLC_OP_PARAM ? i : view ? pr[nd->in[0]] : NONE;
    first[i] = upd[i] = unit[i] = NONE;
    out_of_unit[i] = need[i] = bw_read[i] = false;
  }
  for (uint32_t i = 0; i < loss; i++) { /* the units of the forward's computing nodes */
    const mlc_node *nd = &f->nodes[i];
    size_t l = unit_len(nd->scope);
    if (!l || (mlc_ops[nd->op].flags & MLC_F_LEAF)) continue;
    uint32_t s = 0;
    while (s < nseg && (strlen(segs[s].scope) != l || strncmp(segs[s].scope, nd->scope, l))) s++;
    if (s == nseg) segs[nseg++] = (segment){mlc_arena_strndup(p->arena, nd->scope, l), NULL, 0, NULL, NONE};
    unit[i] = s;
  }
  if (!nseg) return m;
  bool *bad = mlc_arena_alloc(p->arena, (nseg + 1) * sizeof *bad);
  memset(bad, 0, (nseg + 1) * sizeof *bad);
  for (uint32_t i = 0; i < n; i++) {
    const mlc_node *nd = &f->nodes[i];
    if (i < loss && unit[i] != NONE && (mlc_ops[nd->op].flags & MLC_F_COLL)) bad[unit[i]] = true;
    for (uint32_t k = 0; k < nd->nin; k++) {
      uint32_t x = nd->in[k];
      if (i > loss) {
        if (first[x] == NONE) first[x] = i;
        bw_read[root[x]] = true;
        if (mlc_op_is_update(nd->op) && pr[x] != NONE && upd[pr[x]] == NONE) upd[pr[x]] = i;
      } else if (unit[x] != NONE && unit[x] != unit[i]) {
        out_of_unit[x] = out_of_unit[root[x]] = true; /* leaves its unit: kept */
      }
      if (i < loss && unit[i] != NONE && (mlc_ops[f->nodes[root[x]].op].flags & MLC_F_COLL)) bad[unit[i]] = true;
    }
  }
  for (uint32_t o = 0; o < f->noutputs; o++) out_of_unit[root[f->outputs[o].node]] = true;
  for (uint32_t i = 0; i < loss; i++) /* a view of a kept value is read as it is */
    if (unit[i] != NONE && out_of_unit[root[i]]) out_of_unit[i] = true;
  /* What each unit's backward needs: read there, or read by what is needed;
   * and where it is needed first. */
  uint32_t *pos = mlc_arena_alloc(p->arena, (n + 1) * sizeof *pos);
  memcpy(pos, first, n * sizeof *pos);
  for (uint32_t i = loss; i-- > 0;) {
    if (unit[i] == NONE || out_of_unit[i]) continue;
    need[i] = need[i] || first[i] != NONE;
    if (!need[i]) continue;
    const mlc_node *nd = &f->nodes[i];
    for (uint32_t k = 0; k < nd->nin; k++) {
      uint32_t x = nd->in[k];
      if (unit[x] == unit[i] && !out_of_unit[x]) {
        need[x] = true;
        if (pos[i] < pos[x]) pos[x] = pos[i];
      }
    }
  }
  for (uint32_t i = 0; i < loss; i++) {
    if (!need[i]) continue;
    segment *sg = &segs[unit[i]];
    sg->n++;
    if (pos[i] < sg->first) sg->first = pos[i];
  }
  uint32_t m0 = m;
  for (uint32_t s = 0; s < nseg; s++) {
    segment *sg = &segs[s];
    if (!sg->n || bad[s] || sg->first == NONE) continue;
    sg->nodes = mlc_arena_alloc(p->arena, sg->n * sizeof *sg->nodes);
    sg->pos = mlc_arena_alloc(p->arena, sg->n * sizeof *sg->pos);
    cand c = {NONE, sg->first, s, 0, 0, 0};
    uint32_t k = 0;
    bool ok = true;
    for (uint32_t i = 0; i < loss && ok; i++) {
      if (!need[i] || unit[i] != s) continue;
      const mlc_node *nd = &f->nodes[i];
      for (uint32_t j = 0; j < nd->nin; j++) /* a parameter it reads: not updated yet */
        if (pr[nd->in[j]] != NONE && upd[pr[nd->in[j]]] != NONE && upd[pr[nd->in[j]]] < pos[i]) ok = false;
      if (c.node == NONE) c.node = i;
      sg->pos[k] = pos[i];
      sg->nodes[k++] = i;
      double fl, mv;
      mlc_node_cost(f, nd, &fl, &mv);
      c.flops += fl;
      c.moved += mv;
      if (root[i] == i && bw_read[i]) c.bytes += node_bytes(nd);
    }
    if (ok && c.bytes >= MIN_BYTES) out[m++] = c;
  }
  qsort(out + m0, m - m0, sizeof *out, by_ratio);
  *out_segs = segs;
  return m;
}

/* A copy of nd in f, reading the latest copies of its inputs. */
static uint32_t copy_of(mlc_program *p, mlc_func *f, const mlc_node *nd, const uint32_t *clone, const uint32_t *map, uint32_t **in,
                        uint32_t *incap) {
  if (nd->nin > *incap) {
    *in = mlc_arena_alloc(p->arena, nd->nin * sizeof **in);
    *incap = nd->nin;
  }
  for (uint32_t j = 0; j < nd->nin; j++) (*in)[j] = clone[nd->in[j]] != NONE ? clone[nd->in[j]] : map[nd->in[j]];
  return mlc_func_copy_node(p, f, nd, *in);
}

/* f, rebuilt from `orig` with the candidates cs[c] that on[c] says recomputed:
 * before each node i, the segments' nodes whose place is i (in order), then
 * the single values whose first reader i is.  A single value inside a
 * segment is made again only when the segment made it before i (its copy
 * then dies sooner).  Every node after the loss reads the latest copy. */
static void rebuild(mlc_program *p, mlc_func *f, const mlc_func *orig, uint32_t loss, const cand *cs, const segment *segs,
                    const bool *on, uint32_t k) {
  uint32_t n = orig->n;
  uint32_t *map = mlc_arena_alloc(p->arena, (n + 1) * sizeof *map), *clone = mlc_arena_alloc(p->arena, (n + 1) * sizeof *clone);
  uint32_t *made = mlc_arena_alloc(p->arena, (n + 1) * sizeof *made); /* where clone[v] was made */
  uint32_t *head = mlc_arena_alloc(p->arena, (n + 1) * sizeof *head), *next = mlc_arena_alloc(p->arena, (k + 1) * sizeof *next);
  /* per node: the segments' nodes to make before it, a list through snext in node order */
  uint32_t *shead = mlc_arena_alloc(p->arena, (n + 1) * sizeof *shead), *stail = mlc_arena_alloc(p->arena, (n + 1) * sizeof *stail);
  uint32_t *snext = mlc_arena_alloc(p->arena, (n + 1) * sizeof *snext);
  uint32_t *in = mlc_arena_alloc(p->arena, 256 * sizeof *in);
  uint32_t incap = 256;
  for (uint32_t i = 0; i < n; i++) head[i] = clone[i] = shead[i] = NONE;
  for (uint32_t c = k; c-- > 0;) { /* each list in candidate order */
    if (!on[c] || cs[c].seg != NONE) continue;
    next[c] = head[cs[c].first];
    head[cs[c].first] = c;
  }
  for (uint32_t c = 0; c < k; c++) {
    if (!on[c] || cs[c].seg == NONE) continue;
    const segment *sg = &segs[cs[c].seg];
    for (uint32_t t = 0; t < sg->n; t++) { /* in node order: units never read one another's copies */
      uint32_t v = sg->nodes[t], at = sg->pos[t];
      snext[v] = NONE;
      if (shead[at] == NONE) shead[at] = v;
      else snext[stail[at]] = v;
      stail[at] = v;
    }
  }
  for (uint32_t i = 0; i < n; i++) {
    for (uint32_t v = shead[i]; v != NONE; v = snext[v]) {
      clone[v] = copy_of(p, f, &orig->nodes[v], clone, map, &in, &incap);
      made[v] = i;
    }
    for (uint32_t c = head[i]; c != NONE; c = next[c]) {
      uint32_t v = cs[c].node;
      if (clone[v] != NONE && made[v] == i) continue; /* its segment made it here */
      clone[v] = copy_of(p, f, &orig->nodes[v], clone, map, &in, &incap);
      made[v] = i;
    }
    const mlc_node *nd = &orig->nodes[i];
    if (nd->nin > incap) {
      in = mlc_arena_alloc(p->arena, nd->nin * sizeof *in);
      incap = nd->nin;
    }
    for (uint32_t j = 0; j < nd->nin; j++) {
      uint32_t x = nd->in[j];
      in[j] = i > loss && clone[x] != NONE ? clone[x] : map[x];
    }
    map[i] = mlc_func_copy_node(p, f, nd, in);
  }
  for (uint32_t o = 0; o < orig->noutputs; o++) mlc_func_add_output(p, f, orig->outputs[o].name, map[orig->outputs[o].node]);
}

/* x rounded up to four significant digits, as mlc_bytes_str prints it */
static double round_up4(int64_t x) {
  int64_t d = 1;
  while (x / d >= 10000) d *= 10;
  return (double)((x + d - 1) / d * d);
}

/* f rebuilt with the candidates on[] chooses, and planned: its planned total. */
static int64_t plan_with(mlc_program *p, const mlc_target *target, mlc_func *f, const mlc_func *orig, uint32_t loss, const cand *cs,
                         const segment *segs, const bool *on, uint32_t k) {
  mlc_func_take(f);
  rebuild(p, f, orig, loss, cs, segs, on, k);
  mlc_memplan_func(p, f, target);
  return mlc_planned_session_bytes(p, f);
}

/* The weights' shadows (passes/fuse.c's shadow_casts) back to the casts
 * they replaced.  A shadow holds 2 bytes a weight for the whole session,
 * where a cast's copy lives from the forward to its last use in the
 * backward and may be computed again there; so a plan over its budget
 * gives them up first.  They are the program's last parameters (fuse adds
 * them after every other pass that adds one), and they go.  Whether there
 * were any. */
static bool drop_shadows(mlc_program *p, mlc_func *f) {
  uint32_t first = p->nparams;
  while (first > 0 && p->params[first - 1].role == MLC_ROLE_SHADOW) first--;
  if (first == p->nparams) return false;
  for (uint32_t i = 0; i < p->nparams; i++) MLC_ASSERT(i >= first || p->params[i].role != MLC_ROLE_SHADOW);
  for (uint32_t i = 0; i < f->n; i++) {
    mlc_node *g = &f->nodes[i];
    if (g->op != MLC_OP_ADAMW_MULTI && g->op != MLC_OP_SGD_MULTI) continue;
    uint32_t per, tail;
    mlc_update_layout(g->op, &per, &tail);
    for (uint32_t k = 0; k + tail < g->nin; k += per) {
      uint32_t w = g->in[k], sh = g->in[k + per - 1];
      if (sh == w) continue;
      mlc_node *n = &f->nodes[sh];
      MLC_ASSERT(n->op == MLC_OP_PARAM && n->a.param >= first && w < sh);
      n->op = MLC_OP_CAST;
      n->nin = 1;
      n->in = mlc_arena_alloc(p->arena, sizeof *n->in);
      n->in[0] = w;
      n->a = (mlc_attrs){0};
      g->in[k + per - 1] = w;
    }
  }
  p->nparams = first;
  return true;
}

static bool recompute_func(mlc_pass_ctx *c, mlc_func *f, int64_t budget) {
  mlc_program *p = c->p;
  uint32_t loss = NONE;
  for (uint32_t o = 0; o < f->noutputs; o++)
    if (!strcmp(f->outputs[o].name, "loss")) loss = f->outputs[o].node;
  if (loss == NONE) return true; /* no backward */
  mlc_memplan_func(p, f, c->target);
  int64_t before = mlc_planned_session_bytes(p, f);
  if (before > budget && drop_shadows(p, f)) {
    mlc_memplan_func(p, f, c->target);
    before = mlc_planned_session_bytes(p, f);
  }
  p->recompute.budget = budget;
  p->recompute.before = p->recompute.after = before;
  if (before <= budget) return true;
  cand *cs = mlc_arena_alloc(p->arena, (2 * f->n + 1) * sizeof *cs);
  segment *segs = NULL;
  uint32_t m = candidates(p, f, loss, cs);
  m = segments(p, f, loss, cs, m, &segs); /* after the cheap ones: they cost GEMMs */
  p->recompute.step_flops = 0;
  for (uint32_t i = 0; i < f->n; i++) {
    double fl, mv;
    mlc_node_cost(f, &f->nodes[i], &fl, &mv);
    p->recompute.step_flops += fl;
  }
  mlc_func orig = mlc_func_take(f);
  /* Greedily, in that order: a candidate stays unless the plan gets
   * larger with it (the copy lives from its first use in the backward,
   * which may be where the backward's own peak is; and one that changes
   * nothing alone may with the next: the last unit's segment), until the
   * plan fits.  Then each one that the plan fits without goes again, the
   * dearest first. */
  bool *on = mlc_arena_alloc(p->arena, (m + 1) * sizeof *on);
  memset(on, 0, (m + 1) * sizeof *on);
  int64_t total = before;
  for (uint32_t i = 0; i < m && total > budget; i++) {
    on[i] = true;
    int64_t t = plan_with(p, c->target, f, &orig, loss, cs, segs, on, m);
    if (t <= total) total = t;
    else on[i] = false;
  }
  for (uint32_t i = m; i-- > 0 && total <= budget;) {
    if (!on[i]) continue;
    on[i] = false;
    int64_t t = plan_with(p, c->target, f, &orig, loss, cs, segs, on, m);
    if (t <= budget) total = t;
    else on[i] = true;
  }
  uint32_t k = 0, kseg = 0, mseg = 0;
  for (uint32_t i = 0; i < m; i++) {
    k += on[i];
    kseg += on[i] && cs[i].seg != NONE;
    mseg += cs[i].seg != NONE;
  }
  if (total > budget) {
    char b[4][32];
    /* which segments there were, or none (no repeated units; fsdp; accum) */
    const char *segs_str = mseg ? mlc_arena_printf(p->arena, "; then the forwards of %u of %u layers", kseg, mseg)
                                : "; no layer whose forward can run again";
    mlc_error(c->d, p->train.loc,
              "memory budget %s cannot be met: the planned total is %s, and recomputing in the backward (%u of %u "
              "cheap values: casts, norms, activations%s) brings it to %s at the least (--memory-budget %s or more; a "
              "smaller batch or sequence needs less)",
              mlc_bytes_str(b[0], 32, (double)budget), mlc_bytes_str(b[1], 32, (double)before), k - kseg, m - mseg,
              segs_str, mlc_bytes_str(b[2], 32, (double)total), mlc_bytes_str(b[3], 32, round_up4(total)));
    return false;
  }
  plan_with(p, c->target, f, &orig, loss, cs, segs, on, m);
  p->recompute.after = total;
  p->recompute.n = k;
  p->recompute.v = mlc_arena_alloc(p->arena, (k + 1) * sizeof *p->recompute.v);
  for (uint32_t i = 0, j = 0; i < m; i++) {
    if (!on[i]) continue;
    const mlc_node *v = &orig.nodes[cs[i].node];
    bool seg = cs[i].seg != NONE;
    p->recompute.v[j++] = (mlc_recomputed){(mlc_op)v->op, v->type, seg ? segs[cs[i].seg].scope : v->scope, seg ? segs[cs[i].seg].n : 0,
                                           cs[i].bytes, cs[i].flops, cs[i].moved};
  }
  return true;
}

bool mlc_pass_recompute(mlc_pass_ctx *c) {
  int64_t budget = c->p->opts.memory_budget;
  if (budget <= 0) return true;
  for (uint32_t k = 0; k < c->p->nfuncs; k++)
    if (!strcmp(c->p->funcs[k].name, "train") && !recompute_func(c, &c->p->funcs[k], budget)) return false;
  return true;
}
