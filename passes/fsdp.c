/* fsdp: fully sharded data parallel training, as PyTorch FSDP2's
 * fully_shard on each block and on the root.
 *
 * `shard = fsdp(layers)` makes each element of the module list `layers` a
 * unit (layers.0, layers.1, ...), and every other weight belongs to the
 * root unit.  A unit's weights become one flat parameter "fsdp.<unit>"
 * (f32 master weights, each weight padded to MLC_SHARD_ALIGN elements, laid
 * end to end, rounded up to rows of MLC_SHARD_ROW: see ir/ir.h), held
 * sharded: each rank keeps its rows, and its optimizer state for them.  The
 * weights stay in the program (their names are the state_dict's) with the
 * flat and offset where they live.
 *
 * In each function, at a unit's first use the pass emits
 *
 *     s = param fsdp.<unit>            [R, 4096] f32, this rank's shard
 *     c = cast s                       to the compute dtype (precision), on the shard only
 *     g = all_gather c                 the whole flat buffer, every rank's shard in rank order
 *     w = view g start=..              one per weight, no copy
 *
 * In the train function this happens twice per unit: once for the forward
 * and once more for the backward (nodes after the loss), so the gathered
 * buffer of the forward dies at its last forward use, as FSDP2 frees it
 * after the forward and gathers again for the backward.  Right after the
 * last of a unit's gradients is computed, they are packed into one f32 flat
 * buffer (a concat, zeros in the padding), reduce-scattered (the mean over
 * ranks lands on this rank's rows of that buffer, in place), and the
 * optimizer updates the shard at once, so no unit's full gradient outlives
 * its reduce-scatter.  The "grad:<weight>" outputs of the unit's weights go.
 * precision(reduce=bf16) (or f16) packs the gradients in that dtype
 * instead, as FSDP2's MixedPrecisionPolicy(reduce_dtype=...) does: half the
 * bytes on the wire; the reduced rows are cast back to f32 for the
 * optimizer.
 *
 * clip_grad_norm = C is torch.nn.utils.clip_grad_norm_ over the whole
 * (unsharded) gradient, as without sharding (passes/optimizer.c): here the
 * updates wait until every unit is reduce-scattered; each rank sums the
 * squares of its rows of every unit's reduced gradient, an all_reduce adds
 * the ranks' sums up, and each shard is scaled by min(1, C / (norm + 1e-6))
 * before its update ("grad_norm" is the norm before clipping).  A flat's
 * padding holds zeros, and frozen weights have no gradient, so nothing is
 * counted twice (see clip()).  Every unit's reduced gradient then stays
 * alive until the last one is: the memory of clipping, as unsharded.
 *
 * Frozen weights (mlc_param.frozen: an ONNX graph's buffers and constants,
 * frozen= / trainable=) stay out of the units: each rank holds them whole,
 * as an unsharded program does, read as plain params.  They have no
 * gradient, so sharding them would buy only memory, and would cost a
 * gather per use, flat rows of optimizer state that AdamW's weight decay
 * would then move (the flat's update covers every row), and a place in
 * an f32 flat for integer constants that cannot live there.
 */
#include <string.h>

#include "passes/passes.h"

#define NONE UINT32_MAX

typedef struct {
  const char *name;   /* "layers.3", "root" */
  uint32_t flat;      /* its flat parameter */
  int64_t rows;
  uint32_t *weights;  /* its weights, in parameter order */
  uint32_t nweights;
  uint32_t last_grad; /* old node index of its last gradient, or NONE */
} unit;

typedef struct {
  mlc_program *p;
  mlc_func *f;        /* being rebuilt */
  unit *units;
  uint32_t nunits;
  uint32_t *unit_of;  /* per parameter: its unit, or NONE */
  uint32_t *shard;    /* per unit: the PARAM node of its flat in f, or NONE */
  uint32_t *gathered; /* per unit, phase (2) and compute dtype (MLC_DT_COUNT): the gather, or NONE */
  uint32_t *views;    /* per parameter, phase and dtype: the view, or NONE */
  uint32_t *next;     /* per phase and unit: the unit the function uses next, or NONE (prefetch) */
} fsdp_ctx;

static uint32_t add(fsdp_ctx *c, mlc_op op, const uint32_t *in, uint32_t nin, const mlc_attrs *a, const mlc_type *t,
                    const char *scope) {
  mlc_loc loc = c->p->train.loc;
  uint32_t id = mlc_func_add(c->p, c->f, op, in, nin, a, loc, scope);
  mlc_node *n = &c->f->nodes[id];
  if (t) n->type = *t;
  char err[256];
  mlc_type out;
  if (!(mlc_ops[op].flags & MLC_F_LEAF)) {
    if (!mlc_infer_type(c->p, c->f, n, &out, err, sizeof err)) MLC_ICE("fsdp: %s", err);
    n->type = out;
  }
  return id;
}

/* Unit u's gathered flat buffer for this phase in dtype dt, made here if
 * there is none yet. */
static uint32_t gather(fsdp_ctx *c, uint32_t u, int phase, uint8_t dt) {
  unit *un = &c->units[u];
  const char *scope = un->name;
  uint32_t *g = &c->gathered[((size_t)u * 2 + phase) * MLC_DT_COUNT + dt];
  if (*g == NONE) {
    if (c->shard[u] == NONE) {
      mlc_attrs a = {.param = un->flat};
      c->shard[u] = add(c, MLC_OP_PARAM, NULL, 0, &a, &c->p->params[un->flat].type, "");
    }
    uint32_t src = c->shard[u];
    if (dt != MLC_DT_F32) {
      mlc_type t = c->p->params[un->flat].type;
      t.dtype = dt;
      src = add(c, MLC_OP_CAST, &src, 1, NULL, &t, scope);
    }
    *g = add(c, MLC_OP_ALL_GATHER, &src, 1, NULL, NULL, scope);
  }
  return *g;
}

/* The view of weight `param` for this phase in dtype dt, gathering its unit first if needed. */
static uint32_t weight(fsdp_ctx *c, uint32_t param, int phase, uint8_t dt) {
  uint32_t u = c->unit_of[param];
  uint32_t *v = &c->views[((size_t)param * 2 + phase) * MLC_DT_COUNT + dt];
  if (*v != NONE) return *v;
  uint32_t g = gather(c, u, phase, dt);
  /* Prefetch: as a unit's weights are first used, the next unit's gather
   * goes out, on the communication stream, while this one computes
   * (codegen/schedule.c): one unit ahead, as FSDP2 does. */
  uint32_t nx = c->next[(size_t)phase * c->nunits + u];
  if (nx != NONE) gather(c, nx, phase, dt);
  const char *scope = c->units[u].name;
  const mlc_param *w = &c->p->params[param];
  mlc_type t = w->type;
  t.dtype = dt;
  mlc_attrs a = {.start = w->flat_offset, .end = w->flat_offset + mlc_type_numel(&w->type)};
  return *v = add(c, MLC_OP_VIEW, &g, 1, &a, &t, scope);
}

/* Packs unit u's gradients into one flat buffer of the reduce dtype (f32
 * unless precision(reduce=bf16 or f16)), reduce-scatters it and updates the
 * shard (with clipping, clip() does that later); returns this rank's
 * reduced rows in f32: the reduce-scatter, or its cast to f32, which the
 * optimizer reads, as FSDP2 casts a reduced shard back to the master
 * weights' dtype. */
static uint32_t reduce(fsdp_ctx *c, uint32_t u, const uint32_t *grad_of, uint32_t *step) {
  unit *un = &c->units[u];
  mlc_program *p = c->p;
  uint8_t dt = p->train.reduce_dtype == MLC_DT_BF16 || p->train.reduce_dtype == MLC_DT_F16 ? p->train.reduce_dtype : MLC_DT_F32;
  uint32_t *pieces = mlc_arena_alloc(p->arena, (2 * un->nweights + 2) * sizeof *pieces);
  uint32_t np = 0, zero = NONE;
  int64_t at = 0, total = mlc_gather_numel(un->rows);
  mlc_type scalar = {.dtype = dt, .rank = 0};
  for (uint32_t k = 0; k <= un->nweights; k++) {
    int64_t start = k < un->nweights ? p->params[un->weights[k]].flat_offset : total;
    if (start > at) { /* zeros in the padding */
      if (zero == NONE) zero = add(c, MLC_OP_CONST, NULL, 0, &(mlc_attrs){.f = 0}, &scalar, un->name);
      mlc_type t = {.dtype = dt, .rank = 1, .dim = {start - at}};
      pieces[np++] = add(c, MLC_OP_BROADCAST, &zero, 1, NULL, &t, un->name);
      at = start;
    }
    if (k == un->nweights) break;
    uint32_t w = un->weights[k];
    int64_t n = mlc_type_numel(&p->params[w].type);
    mlc_type t = {.dtype = MLC_DT_F32, .rank = 1, .dim = {n}};
    if (grad_of[w] != NONE) { /* a weight the loss does not depend on keeps a zero gradient */
      /* a gradient computed in the reduce dtype and cast to f32 (bf16
       * compute) is packed from before that cast: the same bits */
      uint32_t src = grad_of[w];
      const mlc_node *gn = &c->f->nodes[src];
      if (dt != MLC_DT_F32 && gn->op == MLC_OP_CAST && c->f->nodes[gn->in[0]].type.dtype == dt) src = gn->in[0];
      t.dtype = c->f->nodes[src].type.dtype;
      uint32_t g = add(c, MLC_OP_RESHAPE, &src, 1, NULL, &t, un->name);
      if (t.dtype != dt) {
        t.dtype = dt;
        g = add(c, MLC_OP_CAST, &g, 1, NULL, &t, un->name);
      }
      pieces[np++] = g;
      at += n;
    }
  }
  uint32_t flat = add(c, MLC_OP_CONCAT, pieces, np, &(mlc_attrs){.axis = 0}, NULL, un->name);
  uint32_t rs = add(c, MLC_OP_REDUCE_SCATTER, &flat, 1, NULL, NULL, un->name);
  if (dt != MLC_DT_F32) {
    mlc_type t = c->f->nodes[rs].type;
    t.dtype = MLC_DT_F32;
    rs = add(c, MLC_OP_CAST, &rs, 1, NULL, &t, un->name); /* this rank's rows only (mlc_node_sharded) */
  }
  if (p->train.opt != MLC_OPT_NONE && !(p->train.clip > 0)) mlc_optimizer_update(p, c->f, un->flat, rs, step);
  return rs;
}

/* clip_grad_norm = C over the units' reduced gradients rs[u] (NONE for a
 * unit without one), then every unit's update.  A rank holds the rows
 * [0, mlc_shard_rows(R, world)) of each: each such row's sum of squares
 * counts, the others (another rank's, stale in this rank's buffer) are
 * dropped by where(), not multiplied by 0, so a NaN there cannot leak in.
 * Row k is this rank's when k < ceil(R / world), that is k * world < R;
 * the world size is a run-time value, the input "opt.world" that the
 * runtime writes as it writes "opt.step".  The padding of a flat is zeros
 * (reduce's concat), so it adds nothing.  The ranks' sums are then added
 * up (all_reduce) and the factor made as the optimizer pass makes it. */
static void clip(fsdp_ctx *c, const uint32_t *rs, uint32_t *step) {
  mlc_program *p = c->p;
  mlc_func *f = c->f;
  mlc_attrs wa = {.name = "opt.world"};
  uint32_t world = mlc_func_add(p, f, MLC_OP_INPUT, NULL, 0, &wa, p->train.clip_loc, "");
  f->nodes[world].type = (mlc_type){.dtype = MLC_DT_I64, .rank = 0};
  mlc_u32vec_push(p->arena, &f->inputs, world);
  mlc_type scalar = {.dtype = MLC_DT_F32, .rank = 0}, count = {.dtype = MLC_DT_I64, .rank = 0};
  uint32_t zero = add(c, MLC_OP_CONST, NULL, 0, &(mlc_attrs){.f = 0}, &scalar, "clip"), local = NONE;
  for (uint32_t u = 0; u < c->nunits; u++) {
    if (rs[u] == NONE) continue;
    int64_t rows = c->units[u].rows;
    uint32_t sq_in[2] = {rs[u], rs[u]};
    uint32_t sq = add(c, MLC_OP_MUL, sq_in, 2, NULL, NULL, "clip");                   /* [R, 4096], this rank's rows */
    uint32_t per_row = add(c, MLC_OP_SUM, &sq, 1, &(mlc_attrs){.axis = 1}, NULL, "clip"); /* [R] */
    mlc_type it = {.dtype = MLC_DT_I64, .rank = 1, .dim = {rows}};
    uint32_t k = add(c, MLC_OP_ARANGE, NULL, 0, NULL, &it, "clip");
    uint32_t kw_in[2] = {k, world};
    uint32_t kw = add(c, MLC_OP_MUL, kw_in, 2, NULL, NULL, "clip");
    uint32_t mine_in[2] = {kw, add(c, MLC_OP_CONST, NULL, 0, &(mlc_attrs){.f = (double)rows}, &count, "clip")};
    uint32_t mine = add(c, MLC_OP_LT, mine_in, 2, NULL, NULL, "clip");
    uint32_t kept_in[3] = {mine, per_row, zero};
    uint32_t kept = add(c, MLC_OP_WHERE, kept_in, 3, NULL, NULL, "clip");
    uint32_t part = add(c, MLC_OP_SUM, &kept, 1, &(mlc_attrs){.axis = 0}, NULL, "clip");
    uint32_t sum_in[2] = {local, part};
    local = local == NONE ? part : add(c, MLC_OP_ADD, sum_in, 2, NULL, NULL, "clip");
  }
  if (local == NONE) return;
  uint32_t total = add(c, MLC_OP_ALL_REDUCE, &local, 1, NULL, NULL, "clip"), norm;
  uint32_t factor = mlc_clip_factor(p, f, total, &norm);
  mlc_func_add_output(p, f, "grad_norm", norm);
  for (uint32_t u = 0; u < c->nunits; u++) {
    if (rs[u] == NONE) continue;
    uint32_t in[2] = {rs[u], factor};
    uint32_t g = add(c, MLC_OP_MUL, in, 2, NULL, NULL, c->units[u].name); /* this rank's rows, as the update's */
    mlc_optimizer_update(p, f, c->units[u].flat, g, step);
  }
}

static bool rebuild(fsdp_ctx *c, mlc_func *f, bool train) {
  mlc_program *p = c->p;
  mlc_func old = mlc_func_take(f);
  c->f = f;
  for (size_t i = 0; i < (size_t)c->nunits * 2 * MLC_DT_COUNT; i++) c->gathered[i] = NONE;
  for (size_t i = 0; i < (size_t)p->nparams * 2 * MLC_DT_COUNT; i++) c->views[i] = NONE;
  for (uint32_t u = 0; u < c->nunits; u++) c->shard[u] = NONE, c->units[u].last_grad = NONE;

  uint32_t loss = NONE;
  for (uint32_t i = 0; i < old.noutputs; i++)
    if (!strcmp(old.outputs[i].name, "loss")) loss = old.outputs[i].node;
  /* out_param[o]: the sharded weight whose "grad:" output o is, or NONE;
   * has_grad[old node]: some such output is it. */
  uint32_t *out_param = mlc_arena_alloc(p->arena, (old.noutputs + 1) * sizeof *out_param);
  bool *has_grad = mlc_arena_alloc(p->arena, (old.n + 1) * sizeof *has_grad);
  memset(has_grad, 0, (old.n + 1) * sizeof *has_grad);
  for (uint32_t o = 0; o < old.noutputs; o++) {
    const char *name = old.outputs[o].name;
    out_param[o] = NONE;
    for (uint32_t k = 0; train && !strncmp(name, "grad:", 5) && k < p->nparams && out_param[o] == NONE; k++)
      if (p->params[k].flat && !strcmp(p->params[k].name, name + 5)) out_param[o] = k;
    if (out_param[o] == NONE) continue;
    uint32_t u = c->unit_of[out_param[o]], node = old.outputs[o].node;
    has_grad[node] = true;
    if (c->units[u].last_grad == NONE || node > c->units[u].last_grad) c->units[u].last_grad = node;
  }
  uint32_t *grad_of = mlc_arena_alloc(p->arena, (p->nparams + 1) * sizeof *grad_of);
  for (uint32_t k = 0; k < p->nparams; k++) grad_of[k] = NONE;
  /* The order in which each phase first uses the units: each unit's gather
   * prefetches the next one's. */
  uint32_t *wp = mlc_arena_alloc(p->arena, (old.n + 1) * sizeof *wp); /* the sharded weight an old node is */
  uint32_t last[2] = {NONE, NONE};
  bool *seen = mlc_arena_alloc(p->arena, 2 * (c->nunits + 1) * sizeof *seen);
  memset(seen, 0, 2 * (c->nunits + 1) * sizeof *seen);
  for (uint32_t k = 0; k < 2 * c->nunits; k++) c->next[k] = NONE;
  for (uint32_t i = 0; i < old.n; i++) {
    const mlc_node *n = &old.nodes[i];
    wp[i] = n->op == MLC_OP_PARAM && p->params[n->a.param].flat ? n->a.param
            : n->op == MLC_OP_CAST && wp[n->in[0]] != NONE     ? wp[n->in[0]]
                                                                : NONE;
    if (wp[i] != NONE) continue;
    int ph = train && loss != NONE && i > loss;
    for (uint32_t k = 0; k < n->nin; k++) {
      if (wp[n->in[k]] == NONE) continue;
      uint32_t u = c->unit_of[wp[n->in[k]]];
      if (seen[ph * c->nunits + u]) continue;
      seen[ph * c->nunits + u] = true;
      if (last[ph] != NONE) c->next[ph * c->nunits + last[ph]] = u;
      last[ph] = u;
    }
  }
  uint32_t *map = mlc_arena_alloc(p->arena, (old.n + 1) * sizeof *map);
  /* param_of[old node]: the sharded weight it is (a param, or its cast to
   * the compute dtype), made at each use as a view of the gather of that
   * phase, so the backward reads a gather of its own. */
  uint32_t *param_of = mlc_arena_alloc(p->arena, (old.n + 1) * sizeof *param_of);
  uint32_t step = NONE;
  uint32_t *rs = mlc_arena_alloc(p->arena, (c->nunits + 1) * sizeof *rs); /* per unit: its reduce-scatter, or NONE */
  for (uint32_t u = 0; u < c->nunits; u++) rs[u] = NONE;
  for (uint32_t i = 0; i < old.n; i++) {
    const mlc_node *n = &old.nodes[i];
    int phase = train && loss != NONE && i > loss;
    param_of[i] = NONE;
    if (n->op == MLC_OP_PARAM && p->params[n->a.param].flat) {
      param_of[i] = n->a.param; /* made on first use, as a view */
      map[i] = NONE;
      continue;
    }
    if (n->op == MLC_OP_CAST && param_of[n->in[0]] != NONE) { /* the precision pass's compute copy */
      param_of[i] = param_of[n->in[0]];
      map[i] = NONE;
      continue;
    }
    uint32_t in[64];
    MLC_ASSERT(n->nin <= 64);
    for (uint32_t k = 0; k < n->nin; k++) {
      uint32_t j = n->in[k];
      in[k] = param_of[j] != NONE ? weight(c, param_of[j], phase, old.nodes[j].type.dtype) : map[j];
    }
    map[i] = mlc_func_copy_node(p, f, n, in);
    if (!has_grad[i]) continue;
    for (uint32_t o = 0; o < old.noutputs; o++)
      if (out_param[o] != NONE && old.outputs[o].node == i) grad_of[out_param[o]] = map[i];
    for (uint32_t u = 0; u < c->nunits; u++)
      if (c->units[u].last_grad == i) rs[u] = reduce(c, u, grad_of, &step);
  }
  if (train && p->train.opt != MLC_OPT_NONE && p->train.clip > 0) clip(c, rs, &step);
  for (uint32_t o = 0; o < old.noutputs; o++) {
    if (out_param[o] != NONE) continue; /* reduced and applied where it was computed */
    uint32_t j = old.outputs[o].node;
    mlc_func_add_output(p, f, old.outputs[o].name,
                        param_of[j] != NONE ? weight(c, param_of[j], 0, old.nodes[j].type.dtype) : map[j]);
  }
  return true;
}

/* Which unit a weight belongs to: "<list>.<k>" for a weight under one of the
 * fsdp lists, else the root. */
static const char *unit_name(mlc_program *p, const char *w) {
  for (uint32_t l = 0; l < p->train.nshard_units; l++) {
    const char *list = p->train.shard_units[l];
    size_t n = strlen(list);
    if (strncmp(w, list, n) || w[n] != '.') continue;
    const char *d = w + n + 1, *e = d;
    while (*e >= '0' && *e <= '9') e++;
    if (e > d && *e == '.') return mlc_arena_printf(p->arena, "%.*s", (int)(e - w), w);
  }
  return "root";
}

bool mlc_pass_fsdp(mlc_pass_ctx *cx) {
  mlc_program *p = cx->p;
  if (!cx->fsdp || !p->train.shard) return true;
  fsdp_ctx c = {.p = p};
  uint32_t nparams = p->nparams;
  c.unit_of = mlc_arena_alloc(p->arena, (nparams + 1) * sizeof *c.unit_of);
  c.units = mlc_arena_alloc(p->arena, (nparams + 1) * sizeof *c.units);
  for (uint32_t k = 0; k < nparams; k++) {
    c.unit_of[k] = NONE;
    if (p->params[k].role != MLC_ROLE_WEIGHT || p->params[k].frozen) continue; /* frozen: whole on every rank (above) */
    const char *name = unit_name(p, p->params[k].name);
    uint32_t u = 0;
    while (u < c.nunits && strcmp(c.units[u].name, name)) u++;
    if (u == c.nunits) {
      c.units[c.nunits++] = (unit){.name = name, .weights = mlc_arena_alloc(p->arena, (nparams + 1) * sizeof(uint32_t))};
    }
    c.units[u].weights[c.units[u].nweights++] = k;
    c.unit_of[k] = u;
  }
  /* The flat parameters, in unit order. */
  for (uint32_t u = 0; u < c.nunits; u++) {
    unit *un = &c.units[u];
    int64_t at = 0;
    for (uint32_t k = 0; k < un->nweights; k++) {
      p->params[un->weights[k]].flat_offset = at;
      int64_t n = mlc_type_numel(&p->params[un->weights[k]].type);
      at += (n + MLC_SHARD_ALIGN - 1) / MLC_SHARD_ALIGN * MLC_SHARD_ALIGN;
    }
    un->rows = (at + MLC_SHARD_ROW - 1) / MLC_SHARD_ROW;
    mlc_param fp = {.name = mlc_arena_printf(p->arena, "fsdp.%s", un->name),
                    .type = {.dtype = MLC_DT_F32, .rank = 2, .dim = {un->rows, MLC_SHARD_ROW}},
                    .role = MLC_ROLE_FLAT, .init = MLC_INIT_ZEROS, .loc = p->train.loc, .sharded = true};
    un->flat = mlc_program_add_param(p, &fp);
    for (uint32_t k = 0; k < un->nweights; k++) p->params[un->weights[k]].flat = un->flat + 1;
  }
  c.shard = mlc_arena_alloc(p->arena, (c.nunits + 1) * sizeof *c.shard);
  c.gathered = mlc_arena_alloc(p->arena, ((size_t)c.nunits * 2 * MLC_DT_COUNT + 1) * sizeof *c.gathered);
  c.views = mlc_arena_alloc(p->arena, ((size_t)p->nparams * 2 * MLC_DT_COUNT + 1) * sizeof *c.views);
  c.next = mlc_arena_alloc(p->arena, (2 * (size_t)c.nunits + 1) * sizeof *c.next);
  for (uint32_t k = 0; k < p->nfuncs; k++)
    if (!rebuild(&c, &p->funcs[k], !strcmp(p->funcs[k].name, "train"))) return false;
  return true;
}
