/* Shape, dtype and cost rules, one function per rule named in ops.def.
 *
 * A shape rule computes a node's result type from its inputs' types and its
 * attributes, or says in one line what is wrong.  The frontend runs the rule
 * as it builds each node (so it can report the error at the user's source
 * and so later lowering steps know the shapes), and the shapes pass runs
 * every rule again over the finished graph to check that nothing drifted.
 *
 * A cost rule gives the FLOPs and the bytes a node moves if it ran as its
 * own kernel: the numbers the profiler puts on a roofline.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "ir/ir.h"
#include "ir/fused.h"

typedef struct {
  const mlc_type *in[8]; /* first 8 inputs; variadic rules walk the node */
  const mlc_func *f;
  const mlc_node *n;
  mlc_type *out;
  char *err;
  size_t errn;
} rule_ctx;

static bool fail(rule_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool fail(rule_ctx *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->err, c->errn, fmt, ap);
  va_end(ap);
  return false;
}

#define TSTR(t) mlc_type_str((t), (char[96]){0}, 96)

static bool check_numel(rule_ctx *c, const mlc_type *t) {
  if (t->rank > MLC_MAX_RANK) return fail(c, "rank %d is more than the %d dimensions mlc supports", t->rank, MLC_MAX_RANK);
  int64_t n = 1;
  for (int i = 0; i < t->rank; i++) {
    if (t->dim[i] <= 0) return fail(c, "dimension %d of %s is not positive", i, TSTR(t));
    if (t->dim[i] > MLC_MAX_NUMEL / n) return fail(c, "tensor %s has more than 2^48 elements", TSTR(t));
    n *= t->dim[i];
  }
  return true;
}

static bool need_float(rule_ctx *c, const mlc_type *t, const char *what) {
  if (!mlc_dtype_is_float(t->dtype))
    return fail(c, "%s needs a floating-point tensor, got %s", what, TSTR(t));
  return true;
}

static bool same_dtype(rule_ctx *c, const mlc_type *a, const mlc_type *b, const char *what) {
  if (a->dtype != b->dtype)
    return fail(c, "%s operands have different dtypes: %s and %s (use cast())", what,
                mlc_dtype_name(a->dtype), mlc_dtype_name(b->dtype));
  return true;
}

static bool shape_leaf(rule_ctx *c) {
  if (c->n->type.dtype == MLC_DT_INVALID || c->n->type.dtype >= MLC_DT_COUNT) return fail(c, "invalid dtype");
  *c->out = c->n->type;
  return check_numel(c, c->out);
}

/* numpy's broadcast of a and b's shapes into o (a's dtype). */
static bool broadcast2(rule_ctx *c, const mlc_type *a, const mlc_type *b, mlc_type *out) {
  mlc_type o = {.dtype = a->dtype, .rank = a->rank > b->rank ? a->rank : b->rank};
  for (int i = 0; i < o.rank; i++) { /* align from the right, as numpy does */
    int ia = i - (o.rank - a->rank), ib = i - (o.rank - b->rank);
    int64_t da = ia >= 0 ? a->dim[ia] : 1, db = ib >= 0 ? b->dim[ib] : 1;
    if (da != db && da != 1 && db != 1)
      return fail(c, "cannot broadcast %s with %s: dimension %d is %lld against %lld", TSTR(a), TSTR(b),
                  i, (long long)da, (long long)db);
    o.dim[i] = da == 1 ? db : da;
  }
  *out = o;
  return true;
}

static bool shape_broadcast(rule_ctx *c) {
  const mlc_type *a = c->in[0], *b = c->in[1];
  const char *opname = mlc_ops[c->n->op].name;
  if (!same_dtype(c, a, b, opname)) return false;
  if (a->dtype == MLC_DT_BOOL) return fail(c, "%s is not defined for bool tensors", opname);
  return broadcast2(c, a, b, c->out);
}

/* Comparisons: both operands of one dtype, broadcasting; the result is bool. */
static bool shape_compare(rule_ctx *c) {
  const mlc_type *a = c->in[0], *b = c->in[1];
  if (!same_dtype(c, a, b, mlc_ops[c->n->op].name)) return false;
  mlc_type o;
  if (!broadcast2(c, a, b, &o)) return false;
  o.dtype = MLC_DT_BOOL;
  *c->out = o;
  return true;
}

/* where(cond, a, b): cond bool, a and b of one dtype, the three broadcasting
 * together. */
static bool shape_where(rule_ctx *c) {
  const mlc_type *k = c->in[0], *a = c->in[1], *b = c->in[2];
  if (k->dtype != MLC_DT_BOOL) return fail(c, "where's condition must be a bool tensor, got %s (compare with < > == ...)", TSTR(k));
  if (!same_dtype(c, a, b, "where")) return false;
  mlc_type ab, o;
  if (!broadcast2(c, a, b, &ab) || !broadcast2(c, k, &ab, &o)) return false;
  o.dtype = a->dtype;
  *c->out = o;
  return true;
}

static bool shape_unary(rule_ctx *c) {
  if (c->in[0]->dtype == MLC_DT_BOOL) return fail(c, "%s is not defined for bool tensors", mlc_ops[c->n->op].name);
  *c->out = *c->in[0];
  return true;
}

static bool shape_unary_float(rule_ctx *c) {
  if (!need_float(c, c->in[0], mlc_ops[c->n->op].name)) return false;
  *c->out = *c->in[0];
  return true;
}

static bool shape_dropout(rule_ctx *c) {
  if (!need_float(c, c->in[0], "dropout")) return false;
  if (c->in[1]->dtype != MLC_DT_I64 || c->in[1]->rank != 0) return fail(c, "dropout's step must be i64[], got %s", TSTR(c->in[1]));
  if (!(c->n->a.f >= 0 && c->n->a.f < 1)) return fail(c, "dropout's p must be in [0, 1), got %g", c->n->a.f);
  *c->out = *c->in[0];
  return true;
}

static bool shape_cast(rule_ctx *c) {
  uint8_t dt = c->n->type.dtype; /* read first: out may be the node's own type */
  if (dt == MLC_DT_INVALID || dt >= MLC_DT_COUNT) return fail(c, "cast to an invalid dtype");
  *c->out = *c->in[0];
  c->out->dtype = dt;
  return true;
}

static bool check_axis(rule_ctx *c, const mlc_type *t, int axis) {
  if (axis < 0 || axis >= t->rank)
    return fail(c, "axis %d is out of range for %s (rank %d)", axis, TSTR(t), t->rank);
  return true;
}

static bool shape_reduce(rule_ctx *c) {
  const mlc_type *t = c->in[0];
  if (!check_axis(c, t, c->n->a.axis)) return false;
  if (c->n->op == MLC_OP_MEAN && !need_float(c, t, "mean")) return false;
  if (t->dtype == MLC_DT_BOOL) return fail(c, "%s is not defined for bool tensors", mlc_ops[c->n->op].name);
  mlc_type o = {.dtype = t->dtype};
  if (c->n->a.abs_in && c->n->type.dtype == MLC_DT_F32 && mlc_dtype_is_float(t->dtype)) o.dtype = MLC_DT_F32; /* ir/ir.h */
  for (int i = 0; i < t->rank; i++) {
    if (i == c->n->a.axis && !c->n->a.keepdim) continue;
    o.dim[o.rank++] = i == c->n->a.axis ? 1 : t->dim[i];
  }
  *c->out = o;
  return true;
}

/* argmax, argmin: a reduction's shape, as i64 (torch's index dtype). */
static bool shape_arg_reduce(rule_ctx *c) {
  if (!shape_reduce(c)) return false;
  c->out->dtype = MLC_DT_I64;
  return true;
}

static bool shape_softmax(rule_ctx *c) {
  if (!check_axis(c, c->in[0], c->n->a.axis) || !need_float(c, c->in[0], "softmax")) return false;
  *c->out = *c->in[0];
  return true;
}

static bool shape_reshape(rule_ctx *c) {
  mlc_type o = c->n->type;
  o.dtype = c->in[0]->dtype;
  if (!check_numel(c, &o)) return false;
  if (mlc_type_numel(&o) != mlc_type_numel(c->in[0]))
    return fail(c, "cannot reshape %s (%lld elements) to %s (%lld elements)", TSTR(c->in[0]),
                (long long)mlc_type_numel(c->in[0]), TSTR(&o), (long long)mlc_type_numel(&o));
  *c->out = o;
  return true;
}

static bool shape_view(rule_ctx *c) {
  mlc_type o = c->n->type;
  o.dtype = c->in[0]->dtype;
  if (!check_numel(c, &o)) return false;
  int64_t n = mlc_type_numel(c->in[0]);
  if (c->n->a.start < 0 || c->n->a.start + mlc_type_numel(&o) > n)
    return fail(c, "view of %lld elements at %lld is outside %s", (long long)mlc_type_numel(&o),
                (long long)c->n->a.start, TSTR(c->in[0]));
  *c->out = o;
  return true;
}

static bool shape_all_gather(rule_ctx *c) {
  const mlc_type *t = c->in[0];
  if (t->rank != 2 || t->dim[1] != MLC_SHARD_ROW) return fail(c, "all_gather takes a shard [rows, %d], not %s", MLC_SHARD_ROW, TSTR(t));
  *c->out = (mlc_type){.dtype = t->dtype, .rank = 1, .dim = {mlc_gather_numel(t->dim[0])}};
  return true;
}

static bool shape_reduce_scatter(rule_ctx *c) {
  const mlc_type *t = c->in[0];
  int64_t rows = t->rank == 1 && t->dim[0] % MLC_SHARD_ROW == 0 ? t->dim[0] / MLC_SHARD_ROW - (MLC_SHARD_MAX_WORLD - 1) : 0;
  if (rows < 1 || !mlc_dtype_is_float(t->dtype))
    return fail(c, "reduce_scatter takes a gathered flat buffer of floats, not %s", TSTR(t));
  *c->out = (mlc_type){.dtype = t->dtype, .rank = 2, .dim = {rows, MLC_SHARD_ROW}};
  return true;
}

static bool shape_all_reduce(rule_ctx *c) {
  if (c->in[0]->dtype != MLC_DT_F32) return fail(c, "all_reduce sums f32 values, not %s", TSTR(c->in[0]));
  *c->out = *c->in[0];
  return true;
}

static bool shape_transpose(rule_ctx *c) {
  const mlc_type *t = c->in[0];
  if (!check_axis(c, t, c->n->a.axis) || !check_axis(c, t, c->n->a.axis2)) return false;
  *c->out = *t;
  c->out->dim[c->n->a.axis] = t->dim[c->n->a.axis2];
  c->out->dim[c->n->a.axis2] = t->dim[c->n->a.axis];
  return true;
}

static bool shape_slice(rule_ctx *c) {
  const mlc_type *t = c->in[0];
  int ax = c->n->a.axis;
  if (!check_axis(c, t, ax)) return false;
  if (c->n->a.start < 0 || c->n->a.start >= c->n->a.end || c->n->a.end > t->dim[ax])
    return fail(c, "slice [%lld, %lld) is empty or outside 0..%lld on axis %d of %s", (long long)c->n->a.start,
                (long long)c->n->a.end, (long long)t->dim[ax], ax, TSTR(t));
  *c->out = *t;
  c->out->dim[ax] = c->n->a.end - c->n->a.start;
  return true;
}

static bool shape_concat(rule_ctx *c) {
  const mlc_node *n = c->n;
  const mlc_type *t0 = &c->f->nodes[n->in[0]].type;
  int ax = n->a.axis;
  if (!check_axis(c, t0, ax)) return false;
  mlc_type o = *t0;
  for (uint32_t k = 1; k < n->nin; k++) {
    const mlc_type *t = &c->f->nodes[n->in[k]].type;
    if (!same_dtype(c, t0, t, "concat")) return false;
    if (t->rank != t0->rank) return fail(c, "concat of %s and %s: ranks differ", TSTR(t0), TSTR(t));
    for (int i = 0; i < t->rank; i++)
      if (i != ax && t->dim[i] != t0->dim[i])
        return fail(c, "concat on axis %d of %s and %s: dimension %d differs", ax, TSTR(t0), TSTR(t), i);
    o.dim[ax] += t->dim[ax];
  }
  *c->out = o;
  return check_numel(c, &o);
}

static bool shape_matmul(rule_ctx *c) {
  const mlc_type *a = c->in[0], *b = c->in[1];
  if (!same_dtype(c, a, b, "@") || !need_float(c, a, "@")) return false;
  if (a->rank < 2 || b->rank < 2) return fail(c, "@ needs operands of rank 2 or more, got %s and %s", TSTR(a), TSTR(b));
  if (a->dim[a->rank - 1] != b->dim[b->rank - 2])
    return fail(c, "@ of %s and %s: inner dimensions %lld and %lld differ", TSTR(a), TSTR(b),
                (long long)a->dim[a->rank - 1], (long long)b->dim[b->rank - 2]);
  mlc_type o = {.dtype = a->dtype, .rank = a->rank > b->rank ? a->rank : b->rank};
  for (int i = 0; i < o.rank - 2; i++) {
    int ia = i - (o.rank - a->rank), ib = i - (o.rank - b->rank);
    int64_t da = ia >= 0 ? a->dim[ia] : 1, db = ib >= 0 ? b->dim[ib] : 1;
    if (da != db && da != 1 && db != 1)
      return fail(c, "@ of %s and %s: batch dimension %d is %lld against %lld", TSTR(a), TSTR(b), i,
                  (long long)da, (long long)db);
    o.dim[i] = da == 1 ? db : da;
  }
  o.dim[o.rank - 2] = a->dim[a->rank - 2];
  o.dim[o.rank - 1] = b->dim[b->rank - 1];
  *c->out = o;
  return check_numel(c, &o);
}

static bool shape_matmul_tn(rule_ctx *c) {
  const mlc_type *a = c->in[0], *b = c->in[1];
  if (!same_dtype(c, a, b, "matmul_tn") || !need_float(c, a, "matmul_tn")) return false;
  if (a->rank != 2 || b->rank != 2 || a->dim[0] != b->dim[0])
    return fail(c, "matmul_tn of %s and %s: needs a[k, m] and b[k, n]", TSTR(a), TSTR(b));
  *c->out = (mlc_type){.dtype = a->dtype, .rank = 2, .dim = {a->dim[1], b->dim[1]}};
  return check_numel(c, c->out);
}

static bool shape_linear(rule_ctx *c) {
  const mlc_type *x = c->in[0], *w = c->in[1];
  if (!same_dtype(c, x, w, "linear") || !need_float(c, x, "linear")) return false;
  if (w->rank != 2) return fail(c, "linear weight must have rank 2, got %s", TSTR(w));
  if (x->rank < 1 || x->dim[x->rank - 1] != w->dim[1])
    return fail(c, "linear of %s with weight %s: input features %lld do not match in_features %lld", TSTR(x),
                TSTR(w), (long long)(x->rank ? x->dim[x->rank - 1] : 0), (long long)w->dim[1]);
  *c->out = *x;
  c->out->dim[x->rank - 1] = w->dim[0];
  return check_numel(c, c->out);
}

static bool shape_qlinear(rule_ctx *c) {
  const mlc_type *x = c->in[0], *w = c->in[1];
  int bits = c->n->a.qbits, group = c->n->a.qgroup;
  int scheme = c->n->a.qscheme;
  if (x->dtype != MLC_DT_F32 || x->rank < 1) return fail(c, "qlinear input must be f32 [.., k], got %s", TSTR(x));
  int64_t k = x->dim[x->rank - 1];
  if ((bits != 4 && bits != 8) || group <= 0 || group % 8 || k % group)
    return fail(c, "qlinear of %s: %d bits in groups of %d do not fit", TSTR(x), bits, group);
  if (w->dtype != MLC_DT_I32 || w->rank != 2 || w->dim[1] != mlc_quant_row_words(k, bits, group, scheme))
    return fail(c, "qlinear of %s: packed weight %s is not i32 [n, %lld]", TSTR(x), TSTR(w),
                (long long)mlc_quant_row_words(k, bits, group, scheme));
  *c->out = *x;
  c->out->dim[x->rank - 1] = w->dim[0];
  return check_numel(c, c->out);
}

static bool is_amax(const mlc_type *t) { return t->dtype == MLC_DT_F32 && t->rank == 0; }

static bool shape_quant(rule_ctx *c) {
  const mlc_type *x = c->in[0];
  uint8_t dt = c->n->type.dtype; /* read first: out may be the node's own type */
  if (!mlc_dtype_is_f8(dt)) return fail(c, "quant must give f8e4m3 or f8e5m2, not %s", mlc_dtype_name(dt));
  if (!need_float(c, x, "quant")) return false;
  if (!is_amax(c->in[1])) return fail(c, "quant's amax must be f32[], got %s", TSTR(c->in[1]));
  *c->out = *x;
  c->out->dtype = dt;
  return true;
}

static bool shape_quant_both(rule_ctx *c) {
  const mlc_type *x = c->in[0];
  if (x->rank != 2) return fail(c, "quant_both takes a matrix, not %s", TSTR(x));
  if (!shape_quant(c)) return false;
  *c->out = (mlc_type){.dtype = c->out->dtype, .rank = 1, .dim = {2 * x->dim[0] * x->dim[1]}};
  return check_numel(c, c->out);
}

static bool shape_scaled_mm(rule_ctx *c) {
  const mlc_type *a = c->in[0], *b = c->in[1];
  uint8_t dt = c->n->type.dtype;
  if (!mlc_dtype_is_float(dt)) return fail(c, "scaled_mm gives f32, bf16 or f16, not %s", mlc_dtype_name(dt));
  if (!mlc_dtype_is_f8(a->dtype) || !mlc_dtype_is_f8(b->dtype) || a->rank < 2 || b->rank != 2 || a->dim[a->rank - 1] != b->dim[1])
    return fail(c, "scaled_mm needs f8 operands a[.., k] and b[n, k], got %s and %s", TSTR(a), TSTR(b));
  if (!is_amax(c->in[2]) || !is_amax(c->in[3]))
    return fail(c, "scaled_mm's amaxes must be f32[], got %s and %s", TSTR(c->in[2]), TSTR(c->in[3]));
  *c->out = *a; /* a's leading dims, as linear's */
  c->out->dtype = dt;
  c->out->dim[a->rank - 1] = b->dim[0];
  return true;
}

static bool is_int(const mlc_type *t) { return t->dtype == MLC_DT_I32 || t->dtype == MLC_DT_I64; }

static bool shape_embedding(rule_ctx *c) {
  const mlc_type *w = c->in[0], *idx = c->in[1];
  if (w->rank != 2 || !mlc_dtype_is_float(w->dtype)) return fail(c, "embedding weight must be a float matrix, got %s", TSTR(w));
  if (!is_int(idx)) return fail(c, "embedding indices must be i32 or i64, got %s", TSTR(idx));
  if (idx->rank >= MLC_MAX_RANK) return fail(c, "embedding indices %s have too many dimensions", TSTR(idx));
  *c->out = *idx;
  c->out->dtype = w->dtype;
  c->out->dim[c->out->rank++] = w->dim[1];
  return check_numel(c, c->out);
}

/* gather(x, axis, index): index has x's rank and, off the axis, no
 * dimension larger than x's (torch.gather's rule); the result has index's
 * shape and x's dtype. */
static bool shape_gather(rule_ctx *c) {
  const mlc_type *x = c->in[0], *idx = c->in[1];
  int ax = c->n->a.axis;
  if (!check_axis(c, x, ax)) return false;
  if (!is_int(idx)) return fail(c, "gather's index must be i32 or i64, got %s", TSTR(idx));
  if (idx->rank != x->rank) return fail(c, "gather's index %s must have the rank of the input %s", TSTR(idx), TSTR(x));
  for (int i = 0; i < x->rank; i++)
    if (i != ax && idx->dim[i] > x->dim[i])
      return fail(c, "gather's index %s is larger than the input %s in dimension %d", TSTR(idx), TSTR(x), i);
  *c->out = *idx;
  c->out->dtype = x->dtype;
  return true;
}

static bool shape_norm(rule_ctx *c) {
  const mlc_type *x = c->in[0];
  const char *what = mlc_ops[c->n->op].name;
  if (!need_float(c, x, what)) return false;
  if (x->rank < 1) return fail(c, "%s needs a tensor of rank 1 or more", what);
  if (c->n->nin > (c->n->op == MLC_OP_RMSNORM ? 2 : 3)) return fail(c, "%s has too many inputs", what);
  for (int k = 1; k < c->n->nin; k++) {
    const mlc_type *w = c->in[k];
    if (!same_dtype(c, x, w, what)) return false;
    if (w->rank != 1 || w->dim[0] != x->dim[x->rank - 1])
      return fail(c, "%s of %s: %s %s must be [%lld]", what, TSTR(x), k == 1 ? "weight" : "bias", TSTR(w),
                  (long long)x->dim[x->rank - 1]);
  }
  *c->out = *x;
  return true;
}

static bool shape_attention(rule_ctx *c) {
  const mlc_type *q = c->in[0], *k = c->in[1], *v = c->in[2];
  if (!same_dtype(c, q, k, "attention") || !same_dtype(c, q, v, "attention") || !need_float(c, q, "attention"))
    return false;
  if (q->rank != 4 || k->rank != 4 || v->rank != 4)
    return fail(c, "attention needs q, k, v of shape [batch, heads, seq, dim], got %s, %s, %s", TSTR(q), TSTR(k), TSTR(v));
  if (q->dim[0] != k->dim[0] || q->dim[1] != k->dim[1] || q->dim[3] != k->dim[3] || !(k->dim[0] == v->dim[0] &&
      k->dim[1] == v->dim[1] && k->dim[2] == v->dim[2]))
    return fail(c, "attention shapes do not agree: q %s, k %s, v %s", TSTR(q), TSTR(k), TSTR(v));
  *c->out = *q;
  c->out->dim[3] = v->dim[3];
  return true;
}

/* attention_kv: q, k, v [b, h, t, d], the caches [b, h, c, d] (c >= t), pos an i32 scalar. */
static bool shape_attention_kv(rule_ctx *c) {
  if (!shape_attention(c)) return false;
  const mlc_type *q = c->in[0], *k = c->in[1], *v = c->in[2], *kc = c->in[3], *vc = c->in[4], *pos = c->in[5];
  if (k->dim[2] != q->dim[2] || v->dim[3] != q->dim[3])
    return fail(c, "attention_kv needs q, k, v of one shape, got %s, %s, %s", TSTR(q), TSTR(k), TSTR(v));
  if (kc->rank != 4 || !mlc_type_eq(kc, vc) || kc->dtype != q->dtype || kc->dim[0] != q->dim[0] || kc->dim[1] != q->dim[1] ||
      kc->dim[3] != q->dim[3] || kc->dim[2] < q->dim[2])
    return fail(c, "attention_kv's caches must be [batch, heads, max_ctx, dim] of q's dtype with max_ctx >= %lld, got %s and %s "
                "for q %s", (long long)q->dim[2], TSTR(kc), TSTR(vc), TSTR(q));
  if (pos->dtype != MLC_DT_I32 || pos->rank != 0) return fail(c, "attention_kv's position must be an i32 scalar, got %s", TSTR(pos));
  return true;
}

/* attention_save's flat result: the output [b, h, s, d], then an f32 per row
 * (in two slots of a 16-bit type, one of f32). */
static int64_t attention_saved_numel(const mlc_type *q) {
  int64_t rows = q->dim[0] * q->dim[1] * q->dim[2];
  return rows * q->dim[3] + 4 / mlc_dtype_size(q->dtype) * rows;
}

/* A packed qkv [b, s, 3h, d] as q's [b, h, s, d]. */
static mlc_type unpacked_q(const mlc_type *x) {
  return (mlc_type){.dtype = x->dtype, .rank = 4, .dim = {x->dim[0], x->dim[2] / 3, x->dim[1], x->dim[3]}};
}

static bool shape_attention_save(rule_ctx *c) {
  if (c->n->nin == 1) {
    const mlc_type *x = c->in[0];
    if (!need_float(c, x, "attention_save") || x->rank != 4 || x->dim[2] % 3)
      return fail(c, "attention_save of one input needs a packed qkv [batch, seq, 3 * heads, dim], got %s", TSTR(x));
    mlc_type q = unpacked_q(x);
    *c->out = (mlc_type){.dtype = x->dtype, .rank = 1, .dim = {attention_saved_numel(&q)}};
    return check_numel(c, c->out);
  }
  if (c->n->nin != 3) return fail(c, "attention_save takes q, k, v or one packed qkv, got %u inputs", c->n->nin);
  if (!shape_attention(c)) return false;
  const mlc_type *q = c->in[0], *v = c->in[2];
  if (v->dim[3] != q->dim[3] || q->dim[2] != c->in[1]->dim[2])
    return fail(c, "attention_save needs q, k, v of one shape, got %s, %s, %s", TSTR(q), TSTR(c->in[1]), TSTR(v));
  *c->out = (mlc_type){.dtype = q->dtype, .rank = 1, .dim = {attention_saved_numel(q)}};
  return check_numel(c, c->out);
}

/* attention_grad_saved's packed form: g [b, s, h, d], qkv [b, s, 3h, d], saved -> [b, s, 3h, d]. */
static bool shape_attention_grad_packed(rule_ctx *c) {
  const mlc_type *g = c->in[0], *x = c->in[1], *sv = c->in[2];
  if (!mlc_dtype_is_float(g->dtype) || x->dtype != g->dtype || g->rank != 4 || x->rank != 4 || x->dim[0] != g->dim[0] ||
      x->dim[1] != g->dim[1] || x->dim[2] != 3 * g->dim[2] || x->dim[3] != g->dim[3])
    return fail(c, "attention_grad_saved needs a float g [batch, seq, heads, dim] and qkv [batch, seq, 3 * heads, dim], got %s and %s",
                TSTR(g), TSTR(x));
  mlc_type q = unpacked_q(x);
  if (sv->dtype != g->dtype || sv->rank != 1 || sv->dim[0] != attention_saved_numel(&q))
    return fail(c, "attention_grad_saved needs attention_save's result for %s, got %s", TSTR(x), TSTR(sv));
  *c->out = *x;
  return true;
}

static bool shape_cross_entropy(rule_ctx *c) {
  const mlc_type *x = c->in[0], *t = c->in[1];
  if (!need_float(c, x, "cross_entropy")) return false;
  if (!is_int(t)) return fail(c, "cross_entropy targets must be i32 or i64, got %s", TSTR(t));
  if (x->rank < 1) return fail(c, "cross_entropy needs logits of rank 1 or more, got %s", TSTR(x));
  bool ok = t->rank == x->rank - 1;
  for (int i = 0; ok && i < t->rank; i++) ok = t->dim[i] == x->dim[i];
  if (!ok) {
    mlc_type want = {.dtype = t->dtype, .rank = (uint8_t)(x->rank - 1)};
    memcpy(want.dim, x->dim, want.rank * sizeof *want.dim);
    return fail(c, "cross_entropy of logits %s needs targets of shape %s (the logits' shape without the class axis), got %s",
                TSTR(x), TSTR(&want), TSTR(t));
  }
  *c->out = (mlc_type){.dtype = MLC_DT_F32, .rank = 0};
  return true;
}

/* ---- gradient ops (created by autodiff) ---- */

static bool shape_broadcast_to(rule_ctx *c) {
  const mlc_type *x = c->in[0];
  mlc_type o = c->n->type;
  o.dtype = x->dtype;
  if (!check_numel(c, &o)) return false;
  if (x->rank > o.rank) return fail(c, "cannot broadcast %s to the lower rank of %s", TSTR(x), TSTR(&o));
  for (int i = 0; i < x->rank; i++) {
    int64_t d = x->dim[i], t = o.dim[i + o.rank - x->rank];
    if (d != t && d != 1) return fail(c, "cannot broadcast %s to %s", TSTR(x), TSTR(&o));
  }
  *c->out = o;
  return true;
}

static bool shape_grad_ew(rule_ctx *c) {
  const char *what = mlc_ops[c->n->op].name;
  if (!need_float(c, c->in[1], what) || !same_dtype(c, c->in[0], c->in[1], what)) return false;
  if (!mlc_type_eq(c->in[0], c->in[1])) return fail(c, "%s of %s and %s: shapes differ", what, TSTR(c->in[0]), TSTR(c->in[1]));
  *c->out = *c->in[1];
  return true;
}

static bool shape_slice_grad(rule_ctx *c) {
  const mlc_type *g = c->in[0];
  mlc_type o = c->n->type;
  o.dtype = g->dtype;
  int ax = c->n->a.axis;
  if (!check_numel(c, &o) || !check_axis(c, &o, ax)) return false;
  bool ok = g->rank == o.rank && c->n->a.start >= 0 && c->n->a.end <= o.dim[ax] && c->n->a.end - c->n->a.start == g->dim[ax];
  for (int i = 0; ok && i < o.rank; i++) ok = i == ax || g->dim[i] == o.dim[i];
  if (!ok) return fail(c, "slice_grad of %s into %s at [%lld, %lld) on axis %d does not fit", TSTR(g), TSTR(&o),
                       (long long)c->n->a.start, (long long)c->n->a.end, ax);
  *c->out = o;
  return true;
}

static bool shape_embedding_grad(rule_ctx *c) {
  const mlc_type *g = c->in[0], *idx = c->in[1];
  mlc_type o = c->n->type;
  o.dtype = g->dtype;
  if (!need_float(c, g, "embedding_grad") || !is_int(idx)) return fail(c, "embedding_grad needs a float gradient and int indices");
  bool ok = o.rank == 2 && g->rank == idx->rank + 1 && g->dim[g->rank - 1] == o.dim[1];
  for (int i = 0; ok && i < idx->rank; i++) ok = g->dim[i] == idx->dim[i];
  if (!ok) return fail(c, "embedding_grad of %s with indices %s into %s: shapes do not agree", TSTR(g), TSTR(idx), TSTR(&o));
  *c->out = o;
  return check_numel(c, &o);
}

static bool shape_gather_grad(rule_ctx *c) {
  const mlc_type *g = c->in[0], *idx = c->in[1];
  mlc_type o = c->n->type;
  o.dtype = g->dtype;
  int ax = c->n->a.axis;
  if (!need_float(c, g, "gather_grad") || !is_int(idx)) return fail(c, "gather_grad needs a float gradient and int indices");
  if (!check_numel(c, &o) || !check_axis(c, &o, ax)) return false;
  bool ok = g->rank == o.rank && idx->rank == o.rank;
  for (int i = 0; ok && i < o.rank; i++) ok = g->dim[i] == idx->dim[i] && (i == ax || idx->dim[i] <= o.dim[i]);
  if (!ok) return fail(c, "gather_grad of %s with index %s into %s: shapes do not agree", TSTR(g), TSTR(idx), TSTR(&o));
  *c->out = o;
  return true;
}

static bool shape_norm_grad_x(rule_ctx *c) {
  const mlc_type *g = c->in[0], *x = c->in[1];
  const char *what = mlc_ops[c->n->op].name;
  if (c->n->nin < 2 || c->n->nin > 4)
    return fail(c, "%s takes g, x, an optional weight and (after the weight) a value to add", what);
  if (!need_float(c, x, what) || !same_dtype(c, g, x, what)) return false;
  if (!mlc_type_eq(g, x) || x->rank < 1) return fail(c, "%s of %s and %s: shapes differ", what, TSTR(g), TSTR(x));
  if (c->n->nin >= 3 && (c->in[2]->rank != 1 || c->in[2]->dim[0] != x->dim[x->rank - 1] || c->in[2]->dtype != x->dtype))
    return fail(c, "%s: weight %s does not match %s", what, TSTR(c->in[2]), TSTR(x));
  if (c->n->nin == 4 && !mlc_type_eq(c->in[3], x)) /* the fuse pass's residual add (norm_grad_adds) */
    return fail(c, "%s: the value added %s does not match %s", what, TSTR(c->in[3]), TSTR(x));
  *c->out = *x;
  return true;
}

static bool shape_norm_grad_w(rule_ctx *c) {
  const mlc_type *g = c->in[0], *x = c->in[1];
  const char *what = mlc_ops[c->n->op].name;
  if (!need_float(c, x, what) || !same_dtype(c, g, x, what)) return false;
  if (!mlc_type_eq(g, x) || x->rank < 1) return fail(c, "%s of %s and %s: shapes differ", what, TSTR(g), TSTR(x));
  *c->out = (mlc_type){.dtype = x->dtype, .rank = 1, .dim = {x->dim[x->rank - 1]}};
  return true;
}

static bool shape_attention_grad(rule_ctx *c) {
  if (c->n->op == MLC_OP_ATTENTION_GRAD_SAVED && c->n->nin == 3) return shape_attention_grad_packed(c);
  if (c->n->nin != (c->n->op == MLC_OP_ATTENTION_GRAD_SAVED ? 5 : 4))
    return fail(c, "%s has %u inputs", mlc_ops[c->n->op].name, c->n->nin);
  const mlc_type *g = c->in[0];
  for (int i = 1; i < 4; i++)
    if (!mlc_type_eq(g, c->in[i])) return fail(c, "attention_grad needs g, q, k, v of one shape, got %s and %s", TSTR(g), TSTR(c->in[i]));
  if (!need_float(c, g, "attention_grad")) return false;
  if (g->rank != 4) return fail(c, "attention_grad needs [batch, heads, seq, dim] tensors, got %s", TSTR(g));
  if (c->n->nin == 5) {
    const mlc_type *sv = c->in[4];
    if (!mlc_dtype_is_float(g->dtype) || sv->dtype != g->dtype || sv->rank != 1 || sv->dim[0] != attention_saved_numel(g))
      return fail(c, "attention_grad_saved needs attention_save's result for %s, got %s", TSTR(g), TSTR(sv));
  }
  mlc_type o = {.dtype = g->dtype, .rank = 5, .dim = {3, g->dim[0], g->dim[1], g->dim[2], g->dim[3]}};
  *c->out = o;
  return check_numel(c, &o);
}

static bool shape_cross_entropy_grad(rule_ctx *c) {
  const mlc_type *g = c->in[0];
  if (g->rank != 0 || g->dtype != MLC_DT_F32) return fail(c, "cross_entropy_grad needs an f32 scalar gradient, got %s", TSTR(g));
  rule_ctx inner = *c;
  inner.in[0] = c->in[1];
  inner.in[1] = c->in[2];
  mlc_type scalar;
  inner.out = &scalar;
  if (!shape_cross_entropy(&inner)) return false;
  *c->out = *c->in[1];
  return true;
}

static bool shape_update(rule_ctx *c) {
  const mlc_type *p = c->in[0];
  const char *what = mlc_ops[c->n->op].name;
  if (!need_float(c, p, what)) return false;
  int nstate = c->n->op == MLC_OP_ADAMW ? 3 : 2;
  for (int i = 1; i <= nstate; i++)
    if (!mlc_type_eq(p, c->in[i]))
      return fail(c, "%s of parameter %s with %s: the gradient and state must have the parameter's type", what, TSTR(p),
                  TSTR(c->in[i]));
  if (c->n->op == MLC_OP_ADAMW && (c->in[4]->dtype != MLC_DT_I64 || c->in[4]->rank != 0))
    return fail(c, "adamw's step must be an i64 scalar, got %s", TSTR(c->in[4]));
  const mlc_type *lr = c->in[c->n->op == MLC_OP_ADAMW ? 5 : 3];
  if (lr->dtype != MLC_DT_F32 || lr->rank != 0) return fail(c, "%s's learning rate must be an f32 scalar, got %s", what, TSTR(lr));
  *c->out = (mlc_type){.dtype = MLC_DT_F32, .rank = 0};
  return true;
}

/* ---- costs ---- */

typedef struct {
  const mlc_func *f;
  const mlc_node *n;
  double flops, bytes;
} cost_ctx;

static double tbytes(const mlc_type *t) { return (double)mlc_type_numel(t) * mlc_dtype_size(t->dtype); }
static double tnumel(const mlc_type *t) { return (double)mlc_type_numel(t); }
static const mlc_type *in_type(cost_ctx *c, int i) { return &c->f->nodes[c->n->in[i]].type; }

/* Read every input once and write the output once: the floor for an
 * unfused kernel. */
static double io_bytes(cost_ctx *c) {
  double b = tbytes(&c->n->type);
  for (int i = 0; i < c->n->nin; i++) b += tbytes(in_type(c, i));
  return b;
}

static void cost_none(cost_ctx *c) { (void)c; }
static void cost_ew(cost_ctx *c) { c->flops = tnumel(&c->n->type); c->bytes = io_bytes(c); }
static void cost_reduce(cost_ctx *c) { c->flops = tnumel(in_type(c, 0)); c->bytes = io_bytes(c); }
static void cost_softmax(cost_ctx *c) { c->flops = 5 * tnumel(&c->n->type); c->bytes = io_bytes(c); }
static void cost_copy(cost_ctx *c) { c->bytes = io_bytes(c); }
/* Collectives: the bytes of the whole flat buffer (each rank receives all
 * but its own shard of it); the runtime knows the world size. */
static void cost_all_gather(cost_ctx *c) { c->bytes = tbytes(in_type(c, 0)); }
static void cost_reduce_scatter(cost_ctx *c) { c->flops = tnumel(&c->n->type); c->bytes = tbytes(&c->n->type); }
static void cost_all_reduce(cost_ctx *c) { c->flops = tnumel(&c->n->type); c->bytes = tbytes(&c->n->type); }
static void cost_norm(cost_ctx *c) { c->flops = 4 * tnumel(&c->n->type); c->bytes = io_bytes(c); }
static void cost_cross_entropy(cost_ctx *c) { c->flops = 4 * tnumel(in_type(c, 0)); c->bytes = io_bytes(c); }

static void cost_matmul(cost_ctx *c) {
  const mlc_type *a = in_type(c, 0);
  c->flops = 2 * tnumel(&c->n->type) * (double)a->dim[a->rank - 1];
  c->bytes = io_bytes(c);
}

static void cost_matmul_tn(cost_ctx *c) {
  c->flops = 2 * tnumel(&c->n->type) * (double)in_type(c, 0)->dim[0];
  c->bytes = io_bytes(c);
}

static void cost_linear(cost_ctx *c) {
  c->flops = 2 * tnumel(&c->n->type) * (double)in_type(c, 1)->dim[1];
  c->bytes = io_bytes(c);
}

/* The packed weight is what a decode step streams: a quarter (int8) or an
 * eighth (int4) of the f32 weight's bytes, plus the scales. */
static void cost_qlinear(cost_ctx *c) {
  const mlc_type *x = in_type(c, 0);
  c->flops = 2 * tnumel(&c->n->type) * (double)x->dim[x->rank - 1];
  c->bytes = io_bytes(c);
}

static void cost_scaled_mm(cost_ctx *c) {
  c->flops = 2 * tnumel(&c->n->type) * (double)in_type(c, 1)->dim[1]; /* K: b8 [n, k] */
  c->bytes = io_bytes(c);
}

static void cost_embedding(cost_ctx *c) {
  /* Only the gathered rows are read, not the whole table. */
  c->bytes = 2 * tbytes(&c->n->type) + tbytes(in_type(c, 1));
}

/* An attention's batch x heads, query rows, keys, head dim and value dim,
 * from its first inputs: q, k, v [b, h, s, d], or a packed qkv [b, s, 3h, d]
 * (attention_save of one input; attention_grad_saved's second). */
static void attn_dims(cost_ctx *c, int first, double *bh, double *sq, double *sk, double *d, double *dv) {
  const mlc_type *q = in_type(c, first);
  bool packed = (c->n->op == MLC_OP_ATTENTION_SAVE && c->n->nin == 1) || (c->n->op == MLC_OP_ATTENTION_GRAD_SAVED && c->n->nin == 3);
  if (packed) {
    *bh = (double)q->dim[0] * (q->dim[2] / 3), *sq = *sk = (double)q->dim[1], *d = *dv = (double)q->dim[3];
    return;
  }
  *bh = (double)q->dim[0] * q->dim[1], *sq = (double)q->dim[2], *sk = (double)in_type(c, first + 1)->dim[2];
  *d = (double)q->dim[3], *dv = (double)in_type(c, first + 2)->dim[3];
}

static void cost_attention(cost_ctx *c) {
  double bh, sq, sk, d, dv;
  attn_dims(c, 0, &bh, &sq, &sk, &d, &dv);
  double f = 2.0 * bh * sq * sk * (d + dv);
  c->flops = c->n->a.causal ? f / 2 : f;
  c->bytes = io_bytes(c);
}

/* attention_kv: the chunk against the whole cache at most (the valid prefix
 * is a run-time length; the static count takes its worst case), plus
 * writing the chunk's keys and values into the caches and reading them. */
static void cost_attention_kv(cost_ctx *c) {
  const mlc_type *q = in_type(c, 0), *kc = in_type(c, 3);
  double bh = (double)q->dim[0] * q->dim[1], t = (double)q->dim[2], ctx = (double)kc->dim[2], d = (double)q->dim[3];
  c->flops = 4.0 * bh * t * ctx * d;
  c->bytes = 2 * tbytes(in_type(c, 0)) + 4 * tbytes(in_type(c, 1)) + 2 * tbytes(kc);
}

static void cost_embedding_grad(cost_ctx *c) {
  /* Read the gradient rows and indices, zero the table, add the rows in. */
  c->flops = tnumel(in_type(c, 0));
  c->bytes = 2 * tbytes(in_type(c, 0)) + tbytes(in_type(c, 1)) + tbytes(&c->n->type);
}

/* gather reads the index and one element of x per output element. */
static void cost_gather(cost_ctx *c) { c->bytes = 2 * tbytes(&c->n->type) + tbytes(in_type(c, 1)); }

/* gather_grad: each output element walks the index along the axis (the
 * deterministic form of a scatter-add; codegen says why). */
static void cost_gather_grad(cost_ctx *c) {
  c->flops = tnumel(in_type(c, 0));
  c->bytes = io_bytes(c);
}

static void cost_cross_entropy_grad(cost_ctx *c) { c->flops = 4 * tnumel(in_type(c, 1)); c->bytes = io_bytes(c); }

static void cost_attention_grad(cost_ctx *c) {
  /* Recompute q k^T, then dv, dp, dq and dk: five products to the forward's two. */
  double bh, sq, sk, d, dv;
  attn_dims(c, 1, &bh, &sq, &sk, &d, &dv);
  double f = 2.0 * bh * sq * sk * d * 5;
  c->flops = c->n->a.causal ? f / 2 : f;
  c->bytes = io_bytes(c);
}

static void cost_update(cost_ctx *c) {
  /* Read the parameter, the gradient and the state, write the parameter and the state. */
  const mlc_type *p = in_type(c, 0);
  int tensors = c->n->op == MLC_OP_ADAMW ? 4 : 3;
  c->flops = (c->n->op == MLC_OP_ADAMW ? 14 : 4) * tnumel(p);
  c->bytes = (2 * tensors - 1) * tbytes(p);
}

/* ---- fused nodes (ir/fused.h) and the multi-tensor AdamW, both made by the fuse pass ---- */

static bool shape_of(rule_ctx *c);

static const char *fused_skip(const char *s) {
  while (*s == ' ') s++;
  return s;
}

/* "op(args)", "cast.dt(args)", "qlinear.bits.group[.asym][.sf32](args)" or "rmsnorm.eps(args)" instructions separated by ";". */
static bool fused_parse(rule_ctx *c, mlc_fused_prog *pr) {
  const char *s = c->n->a.name;
  if (!s) return fail(c, "fused node without a program");
  pr->n = 0;
  for (s = fused_skip(s); *s;) {
    if (pr->n == MLC_FUSED_MAX) return fail(c, "fused program longer than %d instructions", MLC_FUSED_MAX);
    mlc_fused_ins *in = &pr->ins[pr->n];
    memset(in, 0, sizeof *in);
    size_t len = strcspn(s, ".( ");
    int op = -1;
    for (int k = 0; k < MLC_OP_COUNT && op < 0; k++)
      if (strlen(mlc_ops[k].name) == len && !strncmp(mlc_ops[k].name, s, len)) op = k;
    if (op < 0) return fail(c, "fused program: unknown op '%.*s'", (int)len, s);
    in->op = (uint16_t)op;
    s += len;
    if (op == MLC_OP_QLINEAR) {
      char *end = (char *)s;
      long b = *s == '.' ? strtol(s + 1, &end, 10) : 0, g = 0;
      if (b > 0 && *end == '.') g = strtol(end + 1, &end, 10);
      if (b <= 0 || b > 32 || g <= 0 || g > INT32_MAX) return fail(c, "fused program: qlinear without .<bits>.<group>");
      in->qbits = (int32_t)b, in->qgroup = (int32_t)g;
      s = end;
      if (!strncmp(s, ".asym", 5)) in->qscheme |= MLC_QS_ASYM, s += 5;
      in->qscheme |= MLC_QS_BF16;
      if (!strncmp(s, ".sf32", 5)) in->qscheme &= (uint8_t)~MLC_QS_BF16, s += 5; /* :scales=f32 */
    } else if (op == MLC_OP_RMSNORM) {
      char *end = (char *)s;
      in->eps = *s == '.' ? strtod(s + 1, &end) : -1.0;
      if (end == s + 1 || !(in->eps >= 0.0)) return fail(c, "fused program: rmsnorm without .<eps>");
      s = end;
    } else if (*s == '.') {
      size_t dl = strcspn(s + 1, "( ");
      in->type.dtype = (uint8_t)mlc_dtype_from_name(s + 1, dl);
      if ((op != MLC_OP_CAST && op != MLC_OP_SCALED_MM) || in->type.dtype == MLC_DT_INVALID)
        return fail(c, "fused program: bad dtype '%.*s'", (int)dl, s + 1);
      s += 1 + dl;
    } else if (op == MLC_OP_CAST || op == MLC_OP_SCALED_MM) {
      return fail(c, "fused program: %s without a dtype", mlc_ops[op].name);
    }
    if (*s != '(') return fail(c, "fused program: '(' expected after %s", mlc_ops[op].name);
    s = fused_skip(s + 1);
    while (*s != ')') {
      if (in->nin == (op == MLC_OP_SCALED_MM ? 4 : 2))
        return fail(c, "fused program: more than %s operands", op == MLC_OP_SCALED_MM ? "four" : "two");
      char kind = *s;
      char *end;
      long v = strtol(s + 1, &end, 10);
      if ((kind != '$' && kind != '#') || end == s + 1 || v < 0) return fail(c, "fused program: operand expected at '%s'", s);
      if (kind == '$' && v >= c->n->nin) return fail(c, "fused program: $%ld but the node has %u inputs", v, c->n->nin);
      if (kind == '#' && v >= (long)pr->n) return fail(c, "fused program: #%ld used before it is defined", v);
      in->arg[in->nin++] = (int16_t)(kind == '$' ? -1 - v : v);
      s = fused_skip(end);
      if (*s == ',') s = fused_skip(s + 1);
      else if (*s != ')') return fail(c, "fused program: ',' or ')' expected at '%s'", s);
    }
    s = fused_skip(s + 1);
    pr->n++;
    if (*s == ';') s = fused_skip(s + 1);
    else if (*s) return fail(c, "fused program: ';' expected at '%s'", s);
  }
  if (pr->n == 0) return fail(c, "empty fused program");
  return true;
}

/* Types every instruction with its op's own shape rule. */
static bool fused_types(rule_ctx *c, mlc_fused_prog *pr) {
  if (!fused_parse(c, pr)) return false;
  /* a prologue: rmsnorm($0[, $2]) before a linear of #0 and $1 */
  const mlc_fused_ins *p0 = &pr->ins[0];
  bool pro = p0->op == MLC_OP_RMSNORM;
  if (pro && (p0->arg[0] != -1 || (p0->nin == 2 && p0->arg[1] != -3) || pr->n < 2 || pr->ins[1].op != MLC_OP_LINEAR))
    return fail(c, "fused program: a prologue is rmsnorm($0[, $2]) before a linear of #0 and $1");
  pr->gemm = pro ? 1 : -1;
  for (uint32_t i = pro; i < pr->n; i++) {
    mlc_fused_ins *in = &pr->ins[i];
    unsigned fl = mlc_ops[in->op].flags;
    bool sm = in->op == MLC_OP_SCALED_MM;
    bool gemm = in->op == MLC_OP_MATMUL || in->op == MLC_OP_LINEAR || in->op == MLC_OP_MATMUL_TN || in->op == MLC_OP_QLINEAR || sm;
    bool args = sm ? !pro && in->nin == 4 && in->arg[0] == -1 && in->arg[1] == -2 && in->arg[2] == -3 && in->arg[3] == -4
                   : in->nin == 2 && in->arg[0] == (pro ? 0 : -1) && in->arg[1] == -2;
    if (gemm ? i != (uint32_t)pro || !args : !(fl & MLC_F_EW))
      return fail(c, "fused program: %s at instruction %u (only a GEMM of $0, $1 (scaled_mm: $0 .. $3) first, then elementwise ops)",
                  mlc_ops[in->op].name, i);
    if (gemm) pr->gemm = (int32_t)i;
    for (int k = 0; pro && i > 1 && k < in->nin; k++)
      if (in->arg[k] == 0) return fail(c, "fused program: the epilogue reads the prologue's #0");
  }
  pr->epi_in = pr->gemm < 0 ? 0 : pro ? 2u + (p0->nin == 2) : pr->ins[pr->gemm].op == MLC_OP_SCALED_MM ? 4u : 2u;
  for (uint32_t i = 0; i < pr->n; i++) {
    mlc_fused_ins *in = &pr->ins[i];
    if (mlc_ops[in->op].arity >= 0 && in->nin != mlc_ops[in->op].arity) return fail(c, "fused program: %s takes %d operands", mlc_ops[in->op].name, mlc_ops[in->op].arity);
    mlc_node fk = {.op = in->op, .nin = in->nin};
    fk.type.dtype = in->type.dtype;
    fk.a.qbits = in->qbits, fk.a.qgroup = in->qgroup, fk.a.qscheme = in->qscheme, fk.a.f = in->eps;
    rule_ctx rc = {.f = c->f, .n = &fk, .out = &in->type, .err = c->err, .errn = c->errn};
    for (int k = 0; k < in->nin; k++)
      rc.in[k] = in->arg[k] < 0 ? &c->f->nodes[c->n->in[-1 - in->arg[k]]].type : &pr->ins[in->arg[k]].type;
    if (!shape_of(&rc)) return false;
  }
  const mlc_fused_ins *g = &pr->ins[pr->gemm < 0 ? 0 : pr->gemm], *last = &pr->ins[pr->n - 1];
  if (pr->gemm >= 0 && (g->type.rank != last->type.rank ||
      memcmp(g->type.dim, last->type.dim, sizeof g->type.dim[0] * g->type.rank)))
    return fail(c, "fused program: the epilogue of a GEMM [%s] must keep its shape, got %s", TSTR(&g->type), TSTR(&last->type));
  return true;
}

bool mlc_fused_program(const mlc_func *f, const mlc_node *n, mlc_fused_prog *pr, char *err, size_t errn) {
  rule_ctx c = {.f = f, .n = n, .err = err, .errn = errn};
  return fused_types(&c, pr);
}

static bool shape_fused(rule_ctx *c) {
  mlc_fused_prog pr;
  if (c->n->nin > MLC_FUSED_MAX_IN) return fail(c, "fused node with %u inputs (at most %d)", c->n->nin, MLC_FUSED_MAX_IN);
  if (!fused_types(c, &pr)) return false;
  *c->out = pr.ins[pr.n - 1].type;
  return check_numel(c, c->out);
}

/* Whether an f32 parameter's gradient g is a 16-bit float of its shape,
 * which a multi update widens as it loads (the fuse pass's update_grad). */
static bool update_grad16(const mlc_type *p, const mlc_type *g) {
  mlc_type w = *g;
  w.dtype = MLC_DT_F32;
  return p->dtype == MLC_DT_F32 && (g->dtype == MLC_DT_BF16 || g->dtype == MLC_DT_F16) && mlc_type_eq(p, &w);
}

/* adamw_multi: (param, grad, m, v, shadow) per parameter, then the step and
 * the learning rate; sgd_multi: (param, grad, momentum buffer, shadow) per
 * parameter, then the learning rate.  An f32 parameter's gradient may be
 * bf16 or f16 (update_grad16), and so may its shadow (the fuse pass's
 * shadow_casts; the parameter's own type where it has none). */
static bool shape_update_multi(rule_ctx *c) {
  const mlc_node *n = c->n;
  bool adamw = n->op == MLC_OP_ADAMW_MULTI;
  uint32_t per, tail;
  mlc_update_layout(n->op, &per, &tail);
  const char *what = mlc_ops[n->op].name;
  if (n->nin < per + tail || (n->nin - tail) % per)
    return fail(c, "%s takes %u inputs per parameter, then %s, got %u", what, per,
                adamw ? "the step and the learning rate" : "the learning rate", n->nin);
  for (uint32_t k = 0; k + tail < n->nin; k += per) {
    const mlc_type *p = &c->f->nodes[n->in[k]].type;
    if (!need_float(c, p, what)) return false;
    for (uint32_t i = 1; i < per; i++) {
      const mlc_type *t = &c->f->nodes[n->in[k + i]].type;
      if ((i == 1 || i == per - 1) && update_grad16(p, t)) continue;
      if (!mlc_type_eq(p, t))
        return fail(c, "%s of parameter %s: the gradient%s and state must have the parameter's type", what, TSTR(p),
                    i == per - 1 ? ", shadow" : "");
    }
  }
  const mlc_type *st = &c->f->nodes[n->in[n->nin - 2]].type, *lr = &c->f->nodes[n->in[n->nin - 1]].type;
  if (adamw && (st->dtype != MLC_DT_I64 || st->rank != 0)) return fail(c, "adamw_multi's step must be an i64 scalar, got %s", TSTR(st));
  if (lr->dtype != MLC_DT_F32 || lr->rank != 0)
    return fail(c, "%s's learning rate must be an f32 scalar, got %s", what, TSTR(lr));
  *c->out = (mlc_type){.dtype = MLC_DT_F32, .rank = 0};
  return true;
}

static bool shape_of(rule_ctx *c) {
  switch (c->n->op) {
#define X(e, name, arity, flags, attrs, shape, cost, vjp) case MLC_OP_##e: return shape(c);
#include "ir/ops.def"
#undef X
  }
  return fail(c, "unknown op %d", c->n->op);
}

/* The parts' FLOPs; bytes: only what the group reads from outside and writes. */
static void cost_fused(cost_ctx *c) {
  mlc_fused_prog pr;
  char err[160];
  c->bytes = io_bytes(c);
  if (!mlc_fused_program(c->f, c->n, &pr, err, sizeof err)) return;
  for (uint32_t i = 0; i < pr.n; i++) {
    const mlc_fused_ins *in = &pr.ins[i];
    double n = tnumel(&in->type);
    if (in->op == MLC_OP_MATMUL) n *= 2.0 * (double)in_type(c, 0)->dim[in_type(c, 0)->rank - 1];
    else if (in->op == MLC_OP_LINEAR) n *= 2.0 * (double)in_type(c, 1)->dim[1];
    else if (in->op == MLC_OP_MATMUL_TN) n *= 2.0 * (double)in_type(c, 0)->dim[0];
    else if (in->op == MLC_OP_QLINEAR || in->op == MLC_OP_SCALED_MM) n *= 2.0 * (double)in_type(c, 0)->dim[in_type(c, 0)->rank - 1];
    c->flops += n;
  }
}

/* as cost_update's, per parameter */
static void cost_update_multi(cost_ctx *c) {
  bool adamw = c->n->op == MLC_OP_ADAMW_MULTI;
  uint32_t per, tail;
  mlc_update_layout(c->n->op, &per, &tail);
  for (uint32_t k = 0; k + tail < c->n->nin; k += per) {
    const mlc_type *p = in_type(c, (int)k);
    c->flops += (adamw ? 14 : 4) * tnumel(p);
    c->bytes += (adamw ? 6 : 4) * tbytes(p) + tbytes(in_type(c, (int)k + 1)); /* the gradient: maybe 16-bit */
    if (in_type(c, (int)(k + per - 1))->dtype != p->dtype) c->bytes += tbytes(in_type(c, (int)(k + per - 1))); /* a shadow */
  }
}

bool mlc_infer_type(const mlc_program *p, const mlc_func *f, const mlc_node *n, mlc_type *out, char *err,
                    size_t errn) {
  (void)p;
  rule_ctx c = {.f = f, .n = n, .out = out, .err = err, .errn = errn};
  for (int i = 0; i < n->nin && i < 8; i++) c.in[i] = &f->nodes[n->in[i]].type;
  /* f8 is storage only: made by quant (and quant_both), read by scaled_mm (alone or heading a fused group's
   * epilogue) and moved by the layout ops (and an input's, for mlc_opcheck's cases of those two) */
  bool f8_ok = n->op == MLC_OP_QUANT || n->op == MLC_OP_QUANT_BOTH || n->op == MLC_OP_SCALED_MM || n->op == MLC_OP_TRANSPOSE ||
               n->op == MLC_OP_RESHAPE || n->op == MLC_OP_VIEW || n->op == MLC_OP_INPUT || n->op == MLC_OP_FUSED;
  for (int i = 0; i < n->nin && !f8_ok; i++)
    if (mlc_dtype_is_f8(f->nodes[n->in[i]].type.dtype))
      return fail(&c, "%s cannot read %s: the f8 formats hold the operands of the FP8 GEMMs that precision(matmul=fp8) "
                  "makes, and no op computes in them", mlc_ops[n->op].name, mlc_dtype_name(f->nodes[n->in[i]].type.dtype));
  if (!f8_ok && mlc_dtype_is_f8(n->type.dtype))
    return fail(&c, "%s cannot give %s: the f8 formats hold the operands of the FP8 GEMMs that precision(matmul=fp8) "
                "makes, and no op computes in them", mlc_ops[n->op].name, mlc_dtype_name(n->type.dtype));
  switch (n->op) {
#define X(e, name, arity, flags, attrs, shape, cost, vjp) case MLC_OP_##e: return shape(&c);
#include "ir/ops.def"
#undef X
  }
  return fail(&c, "unknown op %d", n->op);
}

void mlc_node_cost(const mlc_func *f, const mlc_node *n, double *flops, double *bytes) {
  cost_ctx c = {.f = f, .n = n};
  switch (n->op) {
#define X(e, name, arity, flags, attrs, shape, cost, vjp) case MLC_OP_##e: cost(&c); break;
#include "ir/ops.def"
#undef X
  }
  *flops = c.flops;
  *bytes = c.bytes;
}
