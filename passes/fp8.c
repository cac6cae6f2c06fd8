/* fp8: the train entry's linears multiply in FP8 (issue 30; --matmul=fp8,
 * or precision(matmul=fp8) in the train block).
 *
 * Runs right after autodiff, when the three GEMMs of each linear are
 * explicit: the forward y = x w^T, and the two matmuls autodiff tagged
 * (ir/ir.h, mm_of), dx = g w and dw = g^T x.  Each becomes a scaled_mm of
 * two K-major f8 operands:
 *
 *   forward  scaled_mm(quant(x), quant(w))        x [m, k], w [n, k]
 *   dx       scaled_mm(quant(g), quant(w)^T)      g [m, n], w^T [k, n]
 *   dw       scaled_mm(quant(g)^T, quant(x)^T)    g^T [n, m], x^T [k, m]
 *
 * x and w are e4m3, g is e5m2 (or e4m3 with fp8_grad=e4m3): torchao's
 * tensorwise recipe.  Each tensor has one scale, a power of two from its
 * amax = max |v| (an all-axes max, then f32), computed and quantised once
 * however many GEMMs read it; the transposed layouts are transposes of the
 * f8 tensor, or, on a target with quant_both (CUDA), a tensor read in both
 * layouts is quantised into both by one kernel, whose halves two views
 * take (x, w and g of each linear whose three GEMMs all run in FP8).  The
 * GEMMs' outputs keep the dtypes they had (the compute dtype), and
 * everything else (master weights, optimizer state, norms, attention, the
 * loss) is untouched.
 *
 * Which linears: every linear over a 2-D parameter (or its cast to the
 * compute dtype) with an input of rank 2 or more, except
 * - the one whose output feeds the loss (the head: torchao's recipes and
 *   torchtitan leave the last layer in high precision), or, given
 *   fp8_keep (--fp8-keep), those whose scope is one of its scopes or below
 *   one, in place of that rule, and
 * - one whose m, n or k is not a multiple of 16 (the GPU's FP8 tiles load
 *   16-byte rows of each operand and of its transpose).
 * --stats lists every linear with its verdict (mlc_program.fp8).
 */
#include <string.h>

#include "passes/passes.h"

#define NONE UINT32_MAX

typedef struct {
  mlc_program *p;
  mlc_func *f;          /* being rebuilt */
  const mlc_func *old;
  uint32_t *map;        /* old node -> new node */
  uint32_t *amax;       /* old base node -> its amax in f (f32[]), or NONE */
  uint32_t *q[2], *qt[2]; /* by f8 dtype (e4m3, e5m2): old base node -> its [rows, cols] f8 tensor, and that transposed */
  uint8_t *both[2];     /* by f8 dtype: old base node -> 1 (read in that layout), 2 (transposed), 3 (both) */
  bool quant_both;      /* the target's: both layouts from one kernel */
  uint8_t grad_dt;      /* g's f8 dtype */
} fp8;

static const char *const WHO = "fp8";

/* The tensor a 2-D view [numel / last, last] of v really is: through
 * reshapes that keep the last dimension (autodiff's reshape2 of x and g for
 * dw), so that dw's operands are the forward's quantised x and dx's g. */
static uint32_t base(const mlc_func *f, uint32_t v) {
  for (;;) {
    const mlc_node *n = &f->nodes[v];
    if (n->op != MLC_OP_RESHAPE) return v;
    const mlc_type *t = &n->type, *s = &f->nodes[n->in[0]].type;
    if (t->rank != 2 || s->rank < 1 || s->dim[s->rank - 1] != t->dim[1]) return v;
    v = n->in[0];
  }
}

static uint32_t add(fp8 *c, mlc_op op, const uint32_t *in, uint32_t nin, const mlc_attrs *a, const mlc_node *like,
                    mlc_type t) {
  return mlc_pass_add_node(c->p, c->f, op, in, nin, a, like, &t, WHO);
}

static mlc_type type_of(const fp8 *c, uint32_t id) { return c->f->nodes[id].type; }

/* New node x viewed as t's dims (x's dtype); x itself if it already is. */
static uint32_t reshape(fp8 *c, uint32_t x, const mlc_type *dims, const mlc_node *like) {
  mlc_type t = *dims, tx = type_of(c, x);
  t.dtype = tx.dtype;
  if (mlc_type_eq(&t, &tx)) return x;
  return add(c, MLC_OP_RESHAPE, &x, 1, NULL, like, t);
}

/* max |v| over every element of old base v, as f32[]. */
static uint32_t amax_of(fp8 *c, uint32_t v, const mlc_node *like) {
  if (c->amax[v] != NONE) return c->amax[v];
  uint32_t x = c->map[v];
  mlc_type t = type_of(c, x), flat = {.dtype = t.dtype, .rank = 1, .dim = {mlc_type_numel(&t)}};
  uint32_t r = reshape(c, x, &flat, like);
  r = add(c, MLC_OP_ABS, &r, 1, NULL, like, flat);
  mlc_attrs all = {.axis = 0};
  r = add(c, MLC_OP_MAX, &r, 1, &all, like, (mlc_type){.dtype = t.dtype});
  if (t.dtype != MLC_DT_F32) r = add(c, MLC_OP_CAST, &r, 1, NULL, like, (mlc_type){.dtype = MLC_DT_F32});
  return c->amax[v] = r;
}

/* Old value v as an f8 matrix [numel / last, last] of dtype dt, quantised
 * once; transposed: [last, numel / last]. */
static uint32_t quant(fp8 *c, uint32_t v, uint8_t dt, bool transposed, const mlc_node *like) {
  uint32_t b = base(c->old, v), *q = &c->q[dt - MLC_DT_F8E4M3][b], *qt = &c->qt[dt - MLC_DT_F8E4M3][b];
  if (*q == NONE) {
    uint32_t x = c->map[b];
    mlc_type t = type_of(c, x);
    int64_t cols = t.dim[t.rank - 1], rows = mlc_type_numel(&t) / cols;
    mlc_type m = {.dtype = dt, .rank = 2, .dim = {rows, cols}};
    uint32_t in[2] = {reshape(c, x, &m, like), amax_of(c, b, like)};
    if (c->quant_both && c->both[dt - MLC_DT_F8E4M3][b] == 3) { /* one kernel, both layouts: views of its halves */
      uint32_t qb = add(c, MLC_OP_QUANT_BOTH, in, 2, NULL, like, (mlc_type){.dtype = dt, .rank = 1, .dim = {2 * rows * cols}});
      mlc_attrs lo = {.start = 0, .end = rows * cols}, hi = {.start = rows * cols, .end = 2 * rows * cols};
      *q = add(c, MLC_OP_VIEW, &qb, 1, &lo, like, m);
      *qt = add(c, MLC_OP_VIEW, &qb, 1, &hi, like, (mlc_type){.dtype = dt, .rank = 2, .dim = {cols, rows}});
    } else {
      *q = add(c, MLC_OP_QUANT, in, 2, NULL, like, m);
    }
  }
  if (!transposed) return *q;
  if (*qt == NONE) {
    mlc_type m = type_of(c, *q);
    mlc_attrs a = {.axis = 0, .axis2 = 1};
    *qt = add(c, MLC_OP_TRANSPOSE, q, 1, &a, like, (mlc_type){.dtype = m.dtype, .rank = 2, .dim = {m.dim[1], m.dim[0]}});
  }
  return *qt;
}

/* scaled_mm(a8, b8) of old operands a and b (their bases' amaxes), in
 * `like`'s dtype and shape: where like is a8's rows with b8's rows as its
 * last dim (the forward's and dx's [.., n]), a8 is viewed with like's
 * leading dims and the product has like's shape, as linear's, so that the
 * ops after it read it as they read the linear (and, on CUDA, take it as
 * their epilogue group's head); else a 2-D product, reshaped. */
static uint32_t scaled_mm(fp8 *c, uint32_t a8, uint32_t a, uint32_t b8, uint32_t b, const mlc_node *like) {
  mlc_type ta = type_of(c, a8), tb = type_of(c, b8);
  const mlc_type *lt = &like->type;
  uint32_t in[4] = {a8, b8, amax_of(c, base(c->old, a), like), amax_of(c, base(c->old, b), like)};
  if (lt->rank > 2 && lt->dim[lt->rank - 1] == tb.dim[0] && mlc_type_numel(lt) == ta.dim[0] * tb.dim[0]) {
    mlc_type av = *lt;
    av.dim[av.rank - 1] = ta.dim[1];
    in[0] = reshape(c, a8, &av, like);
    return add(c, MLC_OP_SCALED_MM, in, 4, NULL, like, *lt);
  }
  uint32_t mm = add(c, MLC_OP_SCALED_MM, in, 4, NULL, like,
                    (mlc_type){.dtype = lt->dtype, .rank = 2, .dim = {ta.dim[0], tb.dim[0]}});
  return reshape(c, mm, lt, like);
}

/* Whether scope is the n-character scope k, or below it. */
static bool under(const char *scope, const char *k, size_t n) {
  return n && !strncmp(scope, k, n) && (scope[n] == 0 || scope[n] == '.');
}

/* Whether scope is one of the comma-separated scopes of keep, or below one. */
static bool kept(const char *keep, const char *scope) {
  for (const char *k = keep; *k; k += strcspn(k, ",") + (k[strcspn(k, ",")] == ','))
    if (under(scope, k, strcspn(k, ","))) return true;
  return false;
}

/* NULL if linear n of `f` goes to FP8, else why not; feeds_loss marks the head. */
static const char *verdict(const mlc_program *p, const mlc_func *f, const mlc_node *n, bool feeds_loss) {
  const mlc_node *x = &f->nodes[n->in[0]], *w = &f->nodes[n->in[1]];
  if (w->op == MLC_OP_CAST) w = &f->nodes[w->in[0]];
  if (w->op != MLC_OP_PARAM || p->params[w->a.param].type.rank != 2) return "weight is not a parameter";
  if (x->type.rank < 2) return "input is a vector";
  if (p->opts.fp8_keep ? kept(p->opts.fp8_keep, n->scope ? n->scope : "") : feeds_loss)
    return p->opts.fp8_keep ? "fp8_keep" : "feeds the loss";
  int64_t k = x->type.dim[x->type.rank - 1], m = mlc_type_numel(&x->type) / k, nn = n->type.dim[n->type.rank - 1];
  if (m % 16 || nn % 16 || k % 16) return "m, n or k % 16";
  return NULL;
}

/* Marks the linears whose output reaches a cross_entropy's logits through
 * reshapes, casts and the add of a bias (the operand of the add's shape). */
static void mark_head(const mlc_func *f, bool *head) {
  for (uint32_t i = 0; i < f->n; i++) {
    if (f->nodes[i].op != MLC_OP_CROSS_ENTROPY) continue;
    uint32_t v = f->nodes[i].in[0];
    for (;;) {
      const mlc_node *n = &f->nodes[v];
      if (n->op == MLC_OP_RESHAPE || n->op == MLC_OP_CAST) v = n->in[0];
      else if (n->op == MLC_OP_ADD) v = mlc_type_eq(&f->nodes[n->in[0]].type, &n->type) ? n->in[0] : n->in[1];
      else break;
    }
    if (f->nodes[v].op == MLC_OP_LINEAR) head[v] = true;
  }
}

static void record(mlc_program *p, const mlc_func *f, const mlc_node *n, const char *why) {
  const mlc_type *x = &f->nodes[n->in[0]].type;
  int64_t k = x->dim[x->rank - 1];
  if (p->fp8.n == p->fp8.cap) {
    uint32_t cap = p->fp8.cap ? 2 * p->fp8.cap : 16;
    p->fp8.v = mlc_arena_grow(p->arena, p->fp8.v, p->fp8.n * sizeof *p->fp8.v, cap * sizeof *p->fp8.v);
    p->fp8.cap = cap;
  }
  p->fp8.v[p->fp8.n++] = (mlc_fp8_linear){n->scope, mlc_type_numel(x) / k, n->type.dim[n->type.rank - 1], k, why};
}

/* Which of an FP8 linear's three GEMMs old node nd is (fp: the linears that
 * go to FP8), and its two operands as old values: forward x, w; dx g, w;
 * dw g (under autodiff's transpose), x.  The first operand is e4m3 in the
 * forward and g's dtype in the gradients, the second e4m3; transposed are
 * w for dx, g and x for dw. */
typedef enum { NOT_FP8, FWD, DX, DW } gemm_kind;

static gemm_kind fp8_gemm(const mlc_func *old, const bool *fp, const mlc_node *nd, uint32_t *a, uint32_t *b) {
  uint32_t of = nd->op == MLC_OP_MATMUL && nd->a.mm_of ? nd->a.mm_of - 1 : NONE;
  gemm_kind k = nd->op == MLC_OP_LINEAR ? (fp[nd - old->nodes] ? FWD : NOT_FP8)
                : of == NONE || !fp[of] ? NOT_FP8
                : nd->a.mm_role == MLC_MM_DX ? DX
                : nd->a.mm_role == MLC_MM_DW && old->nodes[nd->in[0]].op == MLC_OP_TRANSPOSE ? DW : NOT_FP8;
  if (k != NOT_FP8) *a = k == DW ? old->nodes[nd->in[0]].in[0] : nd->in[0], *b = nd->in[1];
  return k;
}

static void rewrite(mlc_program *p, mlc_func *f, uint8_t grad_dt, bool quant_both) {
  mlc_func old = mlc_func_take(f);
  uint32_t n = old.n;
  fp8 c = {.p = p, .f = f, .old = &old, .quant_both = quant_both, .grad_dt = grad_dt};
  c.map = mlc_arena_alloc(p->arena, (n + 1) * sizeof *c.map);
  c.amax = mlc_arena_alloc(p->arena, (n + 1) * sizeof *c.amax);
  for (int d = 0; d < 2; d++) {
    c.q[d] = mlc_arena_alloc(p->arena, (n + 1) * sizeof *c.q[d]);
    c.qt[d] = mlc_arena_alloc(p->arena, (n + 1) * sizeof *c.qt[d]);
    c.both[d] = mlc_arena_alloc(p->arena, (n + 1) * sizeof *c.both[d]);
    memset(c.both[d], 0, (n + 1) * sizeof *c.both[d]);
  }
  bool *head = mlc_arena_alloc(p->arena, (n + 1) * sizeof *head), *fp = mlc_arena_alloc(p->arena, (n + 1) * sizeof *fp);
  for (uint32_t i = 0; i < n; i++) c.amax[i] = c.q[0][i] = c.q[1][i] = c.qt[0][i] = c.qt[1][i] = NONE;
  mark_head(&old, head);
  for (uint32_t i = 0; i < n; i++) {
    const mlc_node *nd = &old.nodes[i];
    if (nd->op != MLC_OP_LINEAR) continue;
    const char *why = verdict(p, &old, nd, head[i]);
    fp[i] = !why;
    record(p, &old, nd, why);
  }
  /* which layouts each quantised tensor is read in (bit 0: as it is, bit 1: transposed), then the rewrite */
  for (uint32_t i = 0; i < n; i++) {
    uint32_t a, b;
    gemm_kind k = fp8_gemm(&old, fp, &old.nodes[i], &a, &b);
    if (k == NOT_FP8) continue;
    c.both[(k == FWD ? MLC_DT_F8E4M3 : grad_dt) - MLC_DT_F8E4M3][base(&old, a)] |= k == DW ? 2 : 1;
    c.both[0][base(&old, b)] |= k == FWD ? 1 : 2;
  }
  for (uint32_t i = 0; i < n; i++) {
    const mlc_node *nd = &old.nodes[i];
    uint32_t a, b;
    gemm_kind k = fp8_gemm(&old, fp, nd, &a, &b);
    if (k != NOT_FP8) { /* y = x w^T; dx = g w; dw = (g [rows, n])^T x [rows, k] */
      /* b's first: the node order of the programs measured on the GPU (the calls' arguments, right to left) */
      uint32_t b8 = quant(&c, b, MLC_DT_F8E4M3, k != FWD, nd), a8 = quant(&c, a, k == FWD ? MLC_DT_F8E4M3 : grad_dt, k == DW, nd);
      c.map[i] = scaled_mm(&c, a8, a, b8, b, nd);
      continue;
    }
    uint32_t in[8];
    uint32_t *ins = nd->nin <= 8 ? in : mlc_arena_alloc(p->arena, nd->nin * sizeof *ins);
    for (uint32_t j = 0; j < nd->nin; j++) ins[j] = c.map[nd->in[j]];
    c.map[i] = mlc_func_copy_node(p, f, nd, ins);
  }
  for (uint32_t o = 0; o < old.noutputs; o++) mlc_func_add_output(p, f, old.outputs[o].name, c.map[old.outputs[o].node]);
  mlc_func_compact(p, f); /* the bf16 GEMMs and the transposes of g they read */
}

/* Each scope of fp8_keep must name some linear of the train step: a typo
 * would keep nothing and say nothing. */
static bool keep_scopes_match(mlc_pass_ctx *c) {
  const mlc_program *p = c->p;
  bool ok = true;
  for (const char *k = p->opts.fp8_keep; k && *k;) {
    size_t n = strcspn(k, ",");
    bool hit = false;
    for (uint32_t i = 0; i < p->fp8.n && !hit; i++) hit = under(p->fp8.v[i].scope ? p->fp8.v[i].scope : "", k, n);
    if (!hit && n) {
      mlc_error(c->d, p->train.loc, "fp8_keep: '%.*s' is the scope of no linear of the train step (--stats lists them "
                "under --matmul=fp8)", (int)n, k);
      ok = false;
    }
    k += n + (k[n] == ',');
  }
  return ok;
}

bool mlc_pass_fp8(mlc_pass_ctx *c) {
  mlc_program *p = c->p;
  if (!mlc_matmul_is_fp8(p->opts.matmul)) return true;
  uint8_t grad_dt = p->opts.matmul == MLC_MATMUL_FP8_E4M3_GRAD ? MLC_DT_F8E4M3 : MLC_DT_F8E5M2;
  bool train = false;
  for (uint32_t i = 0; i < p->nfuncs; i++)
    if (!strcmp(p->funcs[i].name, "train")) rewrite(p, &p->funcs[i], grad_dt, c->target && c->target->quant_both), train = true;
  return !train || keep_scopes_match(c);
}
