/* Lowering, the primitive functions usable in forward (exp, reshape,
 * slice, attention, dropout, ...), indexing, and calls by name: a module
 * instance's forward or one of prims[].  Each checks its arguments and
 * reports at the argument that is wrong. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/lower_impl.h"

/* ---- primitive ops usable in forward ---- */

typedef mlc_value (*prim_fn)(mlc_lowerer *L, const mlc_ast_expr *e, mlc_op op);

static mlc_value eval_args(mlc_lowerer *L, const mlc_ast_expr *e, const char *const *spec, uint32_t nspec, mlc_value *v,
                           bool *present) {
  mlc_call c = {e->args, e->nargs, e->loc, e->name};
  return mlc_bind(L, &c, spec, nspec, v, present) ? (mlc_value){.kind = V_NONE} : mlc_verr();
}

static mlc_loc argloc(const mlc_ast_expr *e, const char *const *spec, uint32_t nspec, uint32_t which) {
  mlc_call c = {e->args, e->nargs, e->loc, e->name};
  return mlc_arg_loc(&c, spec, nspec, which);
}

/* Python-style axis: negative counts from the end. */
static bool axis_of(mlc_lowerer *L, mlc_value v, mlc_loc loc, int rank, int32_t *out) {
  int64_t ax;
  if (!mlc_want_int(L, v, loc, "an axis", INT64_MIN, INT64_MAX, &ax)) return false;
  if (ax < -(int64_t)rank || ax >= rank) {
    mlc_error(L->d, loc, "axis %lld is out of range for a tensor of rank %d", (long long)v.i, rank);
    return false;
  }
  if (ax < 0) ax += rank;
  *out = (int32_t)ax;
  return true;
}

static mlc_value prim_unary(mlc_lowerer *L, const mlc_ast_expr *e, mlc_op op) {
  static const char *const spec[] = {"x"};
  mlc_value v[1];
  bool pr[1];
  if (eval_args(L, e, spec, 1, v, pr).kind == V_ERR) return mlc_verr();
  if (!mlc_want_tensor(L, v[0], argloc(e, spec, 1, 0), mlc_arena_printf(L->a, "the argument of %s", e->name)))
    return mlc_verr();
  return mlc_emit(L, op, v, 1, NULL, NULL, e->loc);
}

static mlc_value prim_reduce(mlc_lowerer *L, const mlc_ast_expr *e, mlc_op op) {
  static const char *const spec[] = {"x", "dim=", "keepdim="};
  mlc_value v[3];
  bool pr[3], keep = false;
  if (eval_args(L, e, spec, 3, v, pr).kind == V_ERR) return mlc_verr();
  if (!mlc_want_tensor(L, v[0], argloc(e, spec, 3, 0), "the input")) return mlc_verr();
  const mlc_type *t = mlc_value_type(L, v[0]);
  mlc_attrs a = {0};
  if (pr[2] && !mlc_want_bool(L, v[2], argloc(e, spec, 3, 2), "keepdim", &keep)) return mlc_verr();
  a.keepdim = keep;
  if (pr[1]) {
    if (!axis_of(L, v[1], argloc(e, spec, 3, 1), t->rank, &a.axis)) return mlc_verr();
    return mlc_emit(L, op, v, 1, &a, NULL, e->loc);
  }
  if (op == MLC_OP_SOFTMAX) {
    if (!axis_of(L, vnum_i(-1), e->loc, t->rank, &a.axis)) return mlc_verr();
    return mlc_emit(L, op, v, 1, &a, NULL, e->loc);
  }
  /* No dim: reduce over everything, as torch.sum(x) does, one axis at a time. */
  mlc_value r = v[0];
  for (int i = t->rank; i-- > 0 && r.kind == V_TENSOR;) {
    a.axis = i;
    r = mlc_emit(L, op, &r, 1, &a, NULL, e->loc);
  }
  return r;
}

static mlc_value prim_reshape(mlc_lowerer *L, const mlc_ast_expr *e, mlc_op op) {
  (void)op;
  if (e->nargs != 2 || e->args[1].value->kind != AST_LIST || e->args[0].name || e->args[1].name) {
    mlc_error(L->d, e->loc, "reshape takes a tensor and a list of dimensions: reshape(x, [batch, -1])");
    return mlc_verr();
  }
  mlc_value x = lw_eval(L, e->args[0].value);
  if (!mlc_want_tensor(L, x, e->args[0].loc, "the input of reshape")) return mlc_verr();
  const mlc_ast_expr *lst = e->args[1].value;
  if (lst->nargs > MLC_MAX_RANK) {
    mlc_error(L->d, lst->loc, "reshape to %u dimensions; mlc supports at most %d", lst->nargs, MLC_MAX_RANK);
    return mlc_verr();
  }
  int64_t dims[MLC_MAX_RANK], known = 1;
  int infer = -1;
  for (uint32_t i = 0; i < lst->nargs; i++) {
    if (!mlc_want_int(L, lw_eval(L, lst->args[i].value), lst->args[i].loc, "a dimension", -1, MLC_MAX_NUMEL, &dims[i]))
      return mlc_verr();
    if (dims[i] == 0) { mlc_error(L->d, lst->args[i].loc, "a dimension must be positive (or -1 to infer it)"); return mlc_verr(); }
    if (dims[i] == -1) {
      if (infer >= 0) { mlc_error(L->d, lst->args[i].loc, "only one dimension can be -1"); return mlc_verr(); }
      infer = (int)i;
    } else if (dims[i] > MLC_MAX_NUMEL / known) {
      mlc_error(L->d, lst->loc, "this shape has more than 2^48 elements");
      return mlc_verr();
    } else {
      known *= dims[i];
    }
  }
  if (infer >= 0) {
    int64_t total = mlc_type_numel(mlc_value_type(L, x));
    if (total % known) {
      char b[96];
      mlc_error(L->d, lst->args[infer].loc, "cannot infer -1: %lld elements of %s do not divide by %lld", (long long)total,
                mlc_type_str(mlc_value_type(L, x), b, sizeof b), (long long)known);
      return mlc_verr();
    }
    dims[infer] = total / known;
  }
  return mlc_reshape(L, x, dims, (int)lst->nargs, e->loc);
}

static mlc_value prim_transpose(mlc_lowerer *L, const mlc_ast_expr *e, mlc_op op) {
  static const char *const spec[] = {"x", "dim0", "dim1"};
  mlc_value v[3];
  bool pr[3];
  if (eval_args(L, e, spec, 3, v, pr).kind == V_ERR) return mlc_verr();
  if (!mlc_want_tensor(L, v[0], argloc(e, spec, 3, 0), "the input of transpose")) return mlc_verr();
  int rank = mlc_value_type(L, v[0])->rank;
  mlc_attrs a = {0};
  if (!axis_of(L, v[1], argloc(e, spec, 3, 1), rank, &a.axis) || !axis_of(L, v[2], argloc(e, spec, 3, 2), rank, &a.axis2))
    return mlc_verr();
  return mlc_emit(L, op, v, 1, &a, NULL, e->loc);
}

/* x[start:end:step] on one axis, start < end both inside [0, n], step >= 1:
 * the elements start, start + step, ... before end.  There is no strided
 * op: with m elements, the span start .. start + m * step viewed as
 * [m, step] on the axis keeps its first column (a slice, and reshapes,
 * which are views); where that span runs past the axis, the last element is
 * a slice of its own, concatenated.  Data movement only, so the result is
 * exact, and the gradient comes from slice's and concat's rules. */
static mlc_value strided_slice(mlc_lowerer *L, mlc_value x, int axis, int64_t start, int64_t end, int64_t step,
                               mlc_loc loc) {
  const mlc_type t = *mlc_value_type(L, x);
  int64_t m = (end - start + step - 1) / step;
  mlc_attrs a = {.axis = axis, .start = start, .end = start + (step == 1 ? end - start : 1)};
  if (step == 1 || m == 1) return mlc_emit(L, MLC_OP_SLICE, &x, 1, &a, NULL, loc);
  bool fits = start + m * step <= t.dim[axis];
  int64_t full = fits ? m : m - 1; /* rows of [full, step] */
  mlc_value head = x;
  a.start = start, a.end = start + full * step;
  if (a.start != 0 || a.end != t.dim[axis]) head = mlc_emit(L, MLC_OP_SLICE, &x, 1, &a, NULL, loc);
  int64_t dims[MLC_MAX_RANK + 1];
  int r = 0;
  for (int k = 0; k < t.rank; k++) {
    if (k == axis) dims[r++] = full, dims[r++] = step;
    else dims[r++] = t.dim[k];
  }
  if (r > MLC_MAX_RANK) {
    mlc_error(L->d, loc, "a strided slice of a tensor of rank %d needs one more dimension than mlc's %d", t.rank, MLC_MAX_RANK);
    return mlc_verr();
  }
  head = mlc_reshape(L, head, dims, r, loc);
  mlc_attrs col = {.axis = axis + 1, .start = 0, .end = 1};
  head = mlc_emit(L, MLC_OP_SLICE, &head, 1, &col, NULL, loc);
  memcpy(dims, t.dim, sizeof t.dim);
  dims[axis] = full;
  head = mlc_reshape(L, head, dims, t.rank, loc);
  if (fits) return head;
  mlc_attrs last = {.axis = axis, .start = start + full * step, .end = start + full * step + 1};
  mlc_value parts[2] = {head, mlc_emit(L, MLC_OP_SLICE, &x, 1, &last, NULL, loc)};
  mlc_attrs cat = {.axis = axis};
  return mlc_emit(L, MLC_OP_CONCAT, parts, 2, &cat, NULL, loc);
}

/* slice(x, dim, start, end, step=1) */
static mlc_value prim_slice(mlc_lowerer *L, const mlc_ast_expr *e, mlc_op op) {
  (void)op;
  static const char *const spec[] = {"x", "dim", "start", "end", "step="};
  mlc_value v[5];
  bool pr[5];
  if (eval_args(L, e, spec, 5, v, pr).kind == V_ERR) return mlc_verr();
  if (!mlc_want_tensor(L, v[0], argloc(e, spec, 5, 0), "the input of slice")) return mlc_verr();
  const mlc_type *t = mlc_value_type(L, v[0]);
  mlc_attrs a = {0};
  int64_t step = 1;
  if (!axis_of(L, v[1], argloc(e, spec, 5, 1), t->rank, &a.axis)) return mlc_verr();
  int64_t n = t->dim[a.axis];
  if (!mlc_want_int(L, v[2], argloc(e, spec, 5, 2), "start", -n, n, &a.start) ||
      !mlc_want_int(L, v[3], argloc(e, spec, 5, 3), "end", -n, n, &a.end) ||
      (pr[4] && !mlc_want_int(L, v[4], argloc(e, spec, 5, 4), "slice's step", 1, MLC_MAX_NUMEL, &step)))
    return mlc_verr();
  if (a.start < 0) a.start += n;
  if (a.end < 0) a.end += n;
  if (step == 1) return mlc_emit(L, MLC_OP_SLICE, v, 1, &a, NULL, e->loc);
  if (a.start >= a.end) { /* the shape rule's message */
    return mlc_emit(L, MLC_OP_SLICE, v, 1, &a, NULL, e->loc);
  }
  return strided_slice(L, v[0], a.axis, a.start, a.end, step, e->loc);
}

/* x[i, a:b:s, ...]: one item per leading axis, as Python and PyTorch.  An
 * integer picks one element and drops the axis; a slice's bounds are
 * clamped to the axis as Python's are, and its step must be positive (as
 * in PyTorch).  An empty result is an error: mlc has no empty tensors. */
mlc_value lw_eval_index(mlc_lowerer *L, const mlc_ast_expr *e) {
  mlc_value x = lw_eval(L, e->lhs);
  if (x.kind == V_TUPLE) { /* m(x)[1]: one of several returned values */
    const mlc_tuple *t = x.tuple;
    int64_t i;
    if (e->nargs != 1 || e->args[0].value->kind == AST_SLICE) {
      mlc_error(L->d, e->loc, "%s are indexed by one integer, as a Python tuple", lw_kind_name(L, x));
      return mlc_verr();
    }
    if (!mlc_want_int(L, lw_eval(L, e->args[0].value), e->args[0].loc, "an index", -(int64_t)t->n, t->n - 1, &i))
      return mlc_verr();
    return t->v[i < 0 ? i + t->n : i];
  }
  if (!mlc_want_tensor(L, x, e->lhs->loc, "the indexed value")) return mlc_verr();
  const mlc_type t = *mlc_value_type(L, x);
  if (e->nargs > t.rank) {
    mlc_error(L->d, e->args[t.rank].loc, "too many indices: %u for a tensor of rank %d", e->nargs, t.rank);
    return mlc_verr();
  }
  bool drop[MLC_MAX_RANK] = {0};
  for (uint32_t k = 0; k < e->nargs && x.kind == V_TENSOR; k++) {
    const mlc_ast_expr *it = e->args[k].value;
    int64_t n = t.dim[k];
    if (it->kind != AST_SLICE) {
      int64_t i;
      if (!mlc_want_int(L, lw_eval(L, it), e->args[k].loc, "an index", -n, n - 1, &i)) return mlc_verr();
      if (i < 0) i += n;
      mlc_attrs a = {.axis = (int32_t)k, .start = i, .end = i + 1};
      x = mlc_emit(L, MLC_OP_SLICE, &x, 1, &a, NULL, e->args[k].loc);
      drop[k] = true;
      continue;
    }
    int64_t b[3] = {0, n, 1};
    static const char *const what[3] = {"a slice's start", "a slice's end", "a slice's step"};
    for (int j = 0; j < 3; j++) {
      if (!it->args[j].value) continue;
      if (!mlc_want_int(L, lw_eval(L, it->args[j].value), it->args[j].loc, what[j], j == 2 ? 1 : INT64_MIN / 2,
                        j == 2 ? MLC_MAX_NUMEL : INT64_MAX / 2, &b[j]))
        return mlc_verr();
      if (j < 2) { /* Python: negative counts from the end, then clamp to [0, n] */
        if (b[j] < 0) b[j] += n;
        b[j] = b[j] < 0 ? 0 : b[j] > n ? n : b[j];
      }
    }
    if (b[0] >= b[1]) {
      mlc_error(L->d, it->loc, "the slice %lld:%lld of axis %u (size %lld) is empty; mlc has no empty tensors",
                (long long)b[0], (long long)b[1], k, (long long)n);
      return mlc_verr();
    }
    if (b[0] == 0 && b[1] == n && b[2] == 1) continue;
    x = strided_slice(L, x, (int)k, b[0], b[1], b[2], it->loc);
  }
  if (x.kind != V_TENSOR) return mlc_verr();
  const mlc_type *r = mlc_value_type(L, x);
  int64_t dims[MLC_MAX_RANK];
  int rank = 0;
  for (int k = 0; k < r->rank; k++)
    if (!drop[k]) dims[rank++] = r->dim[k];
  return rank == r->rank ? x : mlc_reshape(L, x, dims, rank, e->loc);
}

/* A list of integers (dims of permute and expand) into v; false after an error. */
static bool int_list(mlc_lowerer *L, const mlc_ast_expr *lst, const char *what, int64_t lo, int64_t *v, int *n) {
  if (lst->kind != AST_LIST) {
    mlc_error(L->d, lst->loc, "%s must be a list: [d0, d1, ...]", what);
    return false;
  }
  if (lst->nargs > MLC_MAX_RANK) {
    mlc_error(L->d, lst->loc, "%s has %u entries; mlc supports at most %d dimensions", what, lst->nargs, MLC_MAX_RANK);
    return false;
  }
  for (uint32_t i = 0; i < lst->nargs; i++)
    if (!mlc_want_int(L, lw_eval(L, lst->args[i].value), lst->args[i].loc, "a dimension", lo, MLC_MAX_NUMEL, &v[i]))
      return false;
  *n = (int)lst->nargs;
  return true;
}

/* permute(x, [d0, d1, ...]): output axis k is input axis dk, as
 * torch.permute.  When the axes longer than 1 keep their order it is a
 * reshape (a view); otherwise a chain of transposes (rank minus the
 * permutation's cycles of them, each a copy). */
static mlc_value prim_permute(mlc_lowerer *L, const mlc_ast_expr *e, mlc_op op) {
  (void)op;
  if (e->nargs != 2 || e->args[0].name || e->args[1].name) {
    mlc_error(L->d, e->loc, "permute takes a tensor and a list of axes: permute(x, [0, 2, 1])");
    return mlc_verr();
  }
  mlc_value x = lw_eval(L, e->args[0].value);
  if (!mlc_want_tensor(L, x, e->args[0].loc, "the input of permute")) return mlc_verr();
  const mlc_type t = *mlc_value_type(L, x);
  int64_t raw[MLC_MAX_RANK];
  int n, perm[MLC_MAX_RANK];
  if (!int_list(L, e->args[1].value, "permute's axes", INT64_MIN / 2, raw, &n)) return mlc_verr();
  if (n != t.rank) {
    char b[96];
    mlc_error(L->d, e->args[1].loc, "permute of %s needs %d axes, got %d", mlc_type_str(&t, b, sizeof b), t.rank, n);
    return mlc_verr();
  }
  bool seen[MLC_MAX_RANK] = {0};
  for (int k = 0; k < n; k++) {
    int32_t ax;
    if (!axis_of(L, vnum_i(raw[k]), e->args[1].value->args[k].loc, t.rank, &ax)) return mlc_verr();
    if (seen[ax]) {
      mlc_error(L->d, e->args[1].value->args[k].loc, "axis %d appears twice in permute's axes", ax);
      return mlc_verr();
    }
    seen[ax] = true;
    perm[k] = ax;
  }
  int64_t dims[MLC_MAX_RANK];
  int last = -1;
  bool view = true;
  for (int k = 0; k < n; k++) {
    dims[k] = t.dim[perm[k]];
    if (dims[k] == 1) continue;
    view &= perm[k] > last;
    last = perm[k];
  }
  if (view) return mlc_reshape(L, x, dims, n, e->loc);
  int cur[MLC_MAX_RANK]; /* cur[k]: the input axis now at position k */
  for (int k = 0; k < n; k++) cur[k] = k;
  for (int k = 0; k < n && x.kind == V_TENSOR; k++) {
    int j = k;
    while (cur[j] != perm[k]) j++;
    if (j == k) continue;
    mlc_attrs a = {.axis = k, .axis2 = j};
    x = mlc_emit(L, MLC_OP_TRANSPOSE, &x, 1, &a, NULL, e->loc);
    int s = cur[k];
    cur[k] = cur[j], cur[j] = s;
  }
  return x;
}

/* unsqueeze(x, dim): a new axis of size 1 at dim (-rank-1 <= dim <= rank). */
static mlc_value prim_unsqueeze(mlc_lowerer *L, const mlc_ast_expr *e, mlc_op op) {
  (void)op;
  static const char *const spec[] = {"x", "dim"};
  mlc_value v[2];
  bool pr[2];
  if (eval_args(L, e, spec, 2, v, pr).kind == V_ERR) return mlc_verr();
  if (!mlc_want_tensor(L, v[0], argloc(e, spec, 2, 0), "the input of unsqueeze")) return mlc_verr();
  const mlc_type t = *mlc_value_type(L, v[0]);
  int32_t ax;
  if (t.rank >= MLC_MAX_RANK) {
    mlc_error(L->d, e->loc, "unsqueeze of a tensor of rank %d: mlc supports at most %d dimensions", t.rank, MLC_MAX_RANK);
    return mlc_verr();
  }
  if (!axis_of(L, v[1], argloc(e, spec, 2, 1), t.rank + 1, &ax)) return mlc_verr();
  int64_t dims[MLC_MAX_RANK];
  for (int k = 0, r = 0; k <= t.rank; k++) dims[k] = k == ax ? 1 : t.dim[r++];
  return mlc_reshape(L, v[0], dims, t.rank + 1, e->loc);
}

/* squeeze(x, dim): drops axis dim if its size is 1 (else x as it is, as
 * torch.squeeze); squeeze(x) drops every axis of size 1. */
static mlc_value prim_squeeze(mlc_lowerer *L, const mlc_ast_expr *e, mlc_op op) {
  (void)op;
  static const char *const spec[] = {"x", "dim="};
  mlc_value v[2];
  bool pr[2];
  if (eval_args(L, e, spec, 2, v, pr).kind == V_ERR) return mlc_verr();
  if (!mlc_want_tensor(L, v[0], argloc(e, spec, 2, 0), "the input of squeeze")) return mlc_verr();
  const mlc_type t = *mlc_value_type(L, v[0]);
  int32_t ax = -1;
  if (pr[1] && !axis_of(L, v[1], argloc(e, spec, 2, 1), t.rank, &ax)) return mlc_verr();
  int64_t dims[MLC_MAX_RANK];
  int r = 0;
  for (int k = 0; k < t.rank; k++)
    if (t.dim[k] != 1 || (ax >= 0 && k != ax)) dims[r++] = t.dim[k];
  return r == t.rank ? v[0] : mlc_reshape(L, v[0], dims, r, e->loc);
}

/* expand(x, [d0, ...]): x broadcast to the shape, as torch.expand: -1 keeps
 * an axis, new axes go in front, only axes of size 1 stretch.  It is a
 * broadcast op (a copy), whose gradient sums over the stretched axes. */
static mlc_value prim_expand(mlc_lowerer *L, const mlc_ast_expr *e, mlc_op op) {
  if (e->nargs != 2 || e->args[0].name || e->args[1].name) {
    mlc_error(L->d, e->loc, "expand takes a tensor and a list of dimensions: expand(x, [batch, -1, dim])");
    return mlc_verr();
  }
  mlc_value x = lw_eval(L, e->args[0].value);
  if (!mlc_want_tensor(L, x, e->args[0].loc, "the input of expand")) return mlc_verr();
  const mlc_type t = *mlc_value_type(L, x);
  const mlc_ast_expr *lst = e->args[1].value;
  int64_t dims[MLC_MAX_RANK];
  int n;
  if (!int_list(L, lst, "expand's shape", -1, dims, &n)) return mlc_verr();
  char b[96];
  if (n < t.rank) {
    mlc_error(L->d, lst->loc, "expand of %s to %d dimensions: it cannot drop axes", mlc_type_str(&t, b, sizeof b), n);
    return mlc_verr();
  }
  int lead = n - t.rank;
  for (int k = 0; k < n; k++) {
    int64_t have = k >= lead ? t.dim[k - lead] : 0;
    if (dims[k] == -1 && k < lead) {
      mlc_error(L->d, lst->args[k].loc, "expand: -1 is not allowed for a new leading axis");
      return mlc_verr();
    }
    if (dims[k] == -1) dims[k] = have;
    if (dims[k] == 0) { mlc_error(L->d, lst->args[k].loc, "a dimension must be positive (or -1 to keep it)"); return mlc_verr(); }
    if (k >= lead && have != 1 && have != dims[k]) {
      mlc_error(L->d, lst->args[k].loc, "expand of %s: axis %d has size %lld, which only stretches from 1 (got %lld)",
                mlc_type_str(&t, b, sizeof b), k - lead, (long long)have, (long long)dims[k]);
      return mlc_verr();
    }
  }
  mlc_type o = {.dtype = t.dtype, .rank = (uint8_t)n};
  memcpy(o.dim, dims, sizeof dims);
  if (mlc_type_eq(&o, &t)) return x;
  if (n == t.rank) {
    bool same = true;
    for (int k = 0; k < n; k++) same &= o.dim[k] == t.dim[k];
    if (same) return x;
  }
  int64_t numel = 1;
  for (int k = 0; k < n; k++) numel = numel > MLC_MAX_NUMEL / dims[k] ? MLC_MAX_NUMEL + 1 : numel * dims[k];
  if (numel == mlc_type_numel(&t)) return mlc_reshape(L, x, dims, n, e->loc); /* only new axes of 1 */
  return mlc_emit(L, op, &x, 1, NULL, &o, e->loc);
}

/* gather(x, dim, index): torch.gather. */
static mlc_value prim_gather(mlc_lowerer *L, const mlc_ast_expr *e, mlc_op op) {
  static const char *const spec[] = {"x", "dim", "index"};
  mlc_value v[3];
  bool pr[3];
  if (eval_args(L, e, spec, 3, v, pr).kind == V_ERR) return mlc_verr();
  if (!mlc_want_tensor(L, v[0], argloc(e, spec, 3, 0), "the input of gather") ||
      !mlc_want_tensor(L, v[2], argloc(e, spec, 3, 2), "gather's index"))
    return mlc_verr();
  mlc_attrs a = {0};
  if (!axis_of(L, v[1], argloc(e, spec, 3, 1), mlc_value_type(L, v[0])->rank, &a.axis)) return mlc_verr();
  mlc_value in[2] = {v[0], v[2]};
  const mlc_type *it = mlc_value_type(L, v[2]);
  if (it->dtype != MLC_DT_I32 && it->dtype != MLC_DT_I64) {
    char b[96];
    mlc_error(L->d, argloc(e, spec, 3, 2), "gather's index must be i32 or i64, got %s", mlc_type_str(it, b, sizeof b));
    return mlc_verr();
  }
  return mlc_emit(L, op, in, 2, &a, NULL, e->loc);
}

/* argmax(x, dim=, keepdim=false), argmin: without dim, the index into the
 * flattened x (an i64 scalar), as torch.argmax. */
static mlc_value prim_argreduce(mlc_lowerer *L, const mlc_ast_expr *e, mlc_op op) {
  static const char *const spec[] = {"x", "dim=", "keepdim="};
  mlc_value v[3];
  bool pr[3], keep = false;
  if (eval_args(L, e, spec, 3, v, pr).kind == V_ERR) return mlc_verr();
  if (!mlc_want_tensor(L, v[0], argloc(e, spec, 3, 0), "the input")) return mlc_verr();
  const mlc_type t = *mlc_value_type(L, v[0]);
  mlc_attrs a = {0};
  if (pr[2] && !mlc_want_bool(L, v[2], argloc(e, spec, 3, 2), "keepdim", &keep)) return mlc_verr();
  a.keepdim = keep;
  if (pr[1]) {
    if (!axis_of(L, v[1], argloc(e, spec, 3, 1), t.rank, &a.axis)) return mlc_verr();
    return mlc_emit(L, op, v, 1, &a, NULL, e->loc);
  }
  int64_t numel = mlc_type_numel(&t), ones[MLC_MAX_RANK] = {1, 1, 1, 1, 1, 1};
  mlc_value flat = t.rank == 1 ? v[0] : mlc_reshape(L, v[0], &numel, 1, e->loc);
  a.keepdim = false;
  mlc_value r = mlc_emit(L, op, &flat, 1, &a, NULL, e->loc);
  return keep && t.rank ? mlc_reshape(L, r, ones, t.rank, e->loc) : r;
}

static mlc_value prim_concat(mlc_lowerer *L, const mlc_ast_expr *e, mlc_op op) {
  if (e->nargs < 1 || e->nargs > 2 || e->args[0].value->kind != AST_LIST || e->args[0].value->nargs == 0) {
    mlc_error(L->d, e->loc, "concat takes a non-empty list of tensors and an axis: concat([a, b], dim=-1)");
    return mlc_verr();
  }
  const mlc_ast_expr *lst = e->args[0].value;
  if (lst->nargs > 64) { mlc_error(L->d, lst->loc, "concat of more than 64 tensors"); return mlc_verr(); }
  mlc_value v[64];
  bool ok = true;
  for (uint32_t i = 0; i < lst->nargs; i++) {
    v[i] = lw_eval(L, lst->args[i].value);
    ok &= mlc_want_tensor(L, v[i], lst->args[i].loc, "an element of concat");
  }
  if (!ok) return mlc_verr();
  mlc_attrs a = {0};
  mlc_value axis = vnum_i(0);
  if (e->nargs == 2) {
    if (e->args[1].name && strcmp(e->args[1].name, "dim")) {
      mlc_error(L->d, e->args[1].loc, "concat has no argument named '%s'", e->args[1].name);
      return mlc_verr();
    }
    axis = lw_eval(L, e->args[1].value);
  }
  if (!axis_of(L, axis, e->nargs == 2 ? e->args[1].loc : e->loc, mlc_value_type(L, v[0])->rank, &a.axis)) return mlc_verr();
  return mlc_emit(L, op, v, lst->nargs, &a, NULL, e->loc);
}

static mlc_value prim_cast(mlc_lowerer *L, const mlc_ast_expr *e, mlc_op op) {
  static const char *const spec[] = {"x", "dtype"};
  mlc_value v[2];
  bool pr[2];
  if (eval_args(L, e, spec, 2, v, pr).kind == V_ERR) return mlc_verr();
  uint8_t dt;
  if (!mlc_want_tensor(L, v[0], argloc(e, spec, 2, 0), "the input of cast") ||
      !mlc_want_dtype(L, v[1], argloc(e, spec, 2, 1), "the target", &dt))
    return mlc_verr();
  if (mlc_value_type(L, v[0])->dtype == dt) return v[0];
  mlc_type t = {.dtype = dt};
  return mlc_emit(L, op, v, 1, NULL, &t, e->loc);
}

static mlc_value prim_binary(mlc_lowerer *L, const mlc_ast_expr *e, mlc_op op) {
  static const char *const spec[] = {"a", "b"};
  mlc_value v[2];
  bool pr[2];
  if (eval_args(L, e, spec, 2, v, pr).kind == V_ERR) return mlc_verr();
  if (!mlc_want_tensor(L, v[0], argloc(e, spec, 2, 0), "the first operand") ||
      !mlc_want_tensor(L, v[1], argloc(e, spec, 2, 1), "the second operand"))
    return mlc_verr();
  return mlc_emit(L, op, v, 2, NULL, NULL, e->loc);
}

static mlc_value prim_attention(mlc_lowerer *L, const mlc_ast_expr *e, mlc_op op) {
  static const char *const spec[] = {"q", "k", "v", "causal=", "scale="};
  mlc_value v[5];
  bool pr[5], causal = false;
  if (eval_args(L, e, spec, 5, v, pr).kind == V_ERR) return mlc_verr();
  for (int i = 0; i < 3; i++)
    if (!mlc_want_tensor(L, v[i], argloc(e, spec, 5, (uint32_t)i), spec[i])) return mlc_verr();
  (void)op;
  if (pr[3] && !mlc_want_bool(L, v[3], argloc(e, spec, 5, 3), "causal", &causal)) return mlc_verr();
  const mlc_type *q = mlc_value_type(L, v[0]);
  double scale = q->rank == 4 ? 1.0 / sqrt((double)q->dim[3]) : 1.0;
  if (pr[4] && !mlc_want_float(L, v[4], argloc(e, spec, 5, 4), "scale", &scale)) return mlc_verr();
  return mlc_attention(L, v, causal, scale, e->loc);
}

/* gelu(x, approximate="none"): "tanh" picks PyTorch's tanh form. */
static mlc_value prim_gelu(mlc_lowerer *L, const mlc_ast_expr *e, mlc_op op) {
  static const char *const spec[] = {"x", "approximate="};
  mlc_value v[2];
  bool pr[2];
  if (eval_args(L, e, spec, 2, v, pr).kind == V_ERR) return mlc_verr();
  if (!mlc_want_tensor(L, v[0], argloc(e, spec, 2, 0), "the argument of gelu")) return mlc_verr();
  if (pr[1]) {
    if (v[1].kind != V_STR || (strcmp(v[1].str, "none") && strcmp(v[1].str, "tanh"))) {
      mlc_error(L->d, argloc(e, spec, 2, 1), "approximate must be \"none\" or \"tanh\", got %s", lw_kind_name(L, v[1]));
      return mlc_verr();
    }
    if (!strcmp(v[1].str, "tanh")) op = MLC_OP_GELU_TANH;
  }
  return mlc_emit(L, op, v, 1, NULL, NULL, e->loc);
}

/* pow(x, exponent), as x ** exponent. */
static mlc_value prim_pow(mlc_lowerer *L, const mlc_ast_expr *e, mlc_op op) {
  (void)op;
  static const char *const spec[] = {"x", "exponent"};
  mlc_value v[2];
  bool pr[2];
  if (eval_args(L, e, spec, 2, v, pr).kind == V_ERR) return mlc_verr();
  return lw_power(L, v[0], v[1], e->loc, argloc(e, spec, 2, 1));
}

/* clamp(x, min=, max=): clamp_max(clamp_min(x, min), max), torch.clamp's
 * order, so min > max gives max everywhere as it does in PyTorch. */
static mlc_value prim_clamp(mlc_lowerer *L, const mlc_ast_expr *e, mlc_op op) {
  (void)op;
  static const char *const spec[] = {"x", "min=", "max="};
  mlc_value v[3];
  bool pr[3];
  double lo, hi;
  if (eval_args(L, e, spec, 3, v, pr).kind == V_ERR) return mlc_verr();
  if (!mlc_want_tensor(L, v[0], argloc(e, spec, 3, 0), "the input of clamp")) return mlc_verr();
  if (!pr[1] && !pr[2]) {
    mlc_error(L->d, e->loc, "clamp needs min=, max= or both");
    return mlc_verr();
  }
  if ((pr[1] && !mlc_want_float(L, v[1], argloc(e, spec, 3, 1), "clamp's min", &lo)) ||
      (pr[2] && !mlc_want_float(L, v[2], argloc(e, spec, 3, 2), "clamp's max", &hi)))
    return mlc_verr();
  mlc_value x = v[0];
  mlc_attrs a = {0};
  if (pr[1]) a.f = lo, x = mlc_emit(L, MLC_OP_CLAMP_MIN, &x, 1, &a, NULL, e->loc);
  if (pr[2]) a.f = hi, x = mlc_emit(L, MLC_OP_CLAMP_MAX, &x, 1, &a, NULL, e->loc);
  return x;
}

/* dropout(x, p=0.5, seed=0): in the train entry, the op over the step
 * number the runtime writes into "opt.step" (ir/ops.def gives the mask);
 * each call gets a stream of its own.  In every other entry (forward,
 * prefill, step) it is x, as nn.Dropout in eval mode. */
static mlc_value prim_dropout(mlc_lowerer *L, const mlc_ast_expr *e, mlc_op op) {
  static const char *const spec[] = {"x", "p=", "seed="};
  mlc_value v[3];
  bool pr[3];
  double p = 0.5;
  int64_t seed = 0;
  if (eval_args(L, e, spec, 3, v, pr).kind == V_ERR) return mlc_verr();
  if (!mlc_want_tensor(L, v[0], argloc(e, spec, 3, 0), "the input of dropout")) return mlc_verr();
  if (pr[1] && !mlc_want_float(L, v[1], argloc(e, spec, 3, 1), "dropout's p", &p)) return mlc_verr();
  if (!(p >= 0 && p < 1)) {
    mlc_error(L->d, argloc(e, spec, 3, 1), "dropout's p must be at least 0 and less than 1, got %g", p);
    return mlc_verr();
  }
  if (pr[2] && !mlc_want_int(L, v[2], argloc(e, spec, 3, 2), "dropout's seed", 0, UINT32_MAX, &seed)) return mlc_verr();
  (void)op;
  return mlc_dropout(L, v[0], p, (uint32_t)seed, argloc(e, spec, 3, 0), e->loc);
}

mlc_value mlc_dropout(mlc_lowerer *L, mlc_value x, double p, uint32_t seed, mlc_loc xloc, mlc_loc loc) {
  if (!mlc_dtype_is_float(mlc_value_type(L, x)->dtype)) {
    mlc_error(L->d, xloc, "dropout needs a floating-point tensor, got %s", lw_kind_name(L, x));
    return mlc_verr();
  }
  if (strcmp(L->f->name, "train") || p == 0) return x;
  mlc_value step = {.kind = V_ERR};
  for (uint32_t i = 0; i < L->f->inputs.n; i++)
    if (!strcmp(L->f->nodes[L->f->inputs.v[i]].a.name, "opt.step")) step = vtensor(L->f->inputs.v[i]);
  if (step.kind == V_ERR) {
    mlc_attrs a = {.name = "opt.step"};
    mlc_type t = {.dtype = MLC_DT_I64, .rank = 0};
    step = mlc_emit(L, MLC_OP_INPUT, NULL, 0, &a, &t, loc);
    if (step.kind != V_TENSOR) return mlc_verr();
    mlc_u32vec_push(L->a, &L->f->inputs, step.node);
  }
  mlc_value in[2] = {x, step};
  mlc_attrs a = {.f = p, .start = L->ndropout++, .end = seed};
  return mlc_emit(L, MLC_OP_DROPOUT, in, 2, &a, NULL, loc);
}

/* where(condition, input, other): either branch may be a number. */
static mlc_value prim_where(mlc_lowerer *L, const mlc_ast_expr *e, mlc_op op) {
  static const char *const spec[] = {"condition", "input", "other"};
  mlc_value v[3];
  bool pr[3];
  if (eval_args(L, e, spec, 3, v, pr).kind == V_ERR) return mlc_verr();
  if (!mlc_want_tensor(L, v[0], argloc(e, spec, 3, 0), "where's condition")) return mlc_verr();
  for (int k = 1; k <= 2; k++) {
    if (v[k].kind == V_TENSOR || (v[k].kind == V_NUM && v[3 - k].kind == V_TENSOR)) continue;
    mlc_error(L->d, argloc(e, spec, 3, (uint32_t)k), "where's %s must be a tensor%s, got %s", spec[k],
              v[3 - k].kind == V_TENSOR ? " or a number" : "", lw_kind_name(L, v[k]));
    return mlc_verr();
  }
  if (v[1].kind == V_NUM) v[1] = lw_as_tensor_like(L, v[1], v[2], argloc(e, spec, 3, 1));
  if (v[2].kind == V_NUM) v[2] = lw_as_tensor_like(L, v[2], v[1], argloc(e, spec, 3, 2));
  return mlc_emit(L, op, v, 3, NULL, NULL, e->loc);
}

/* arange(end): i64[end] holding 0, 1, ..., end - 1 (torch.arange's dtype). */
static mlc_value prim_arange(mlc_lowerer *L, const mlc_ast_expr *e, mlc_op op) {
  static const char *const spec[] = {"end"};
  mlc_value v[1];
  bool pr[1];
  int64_t n;
  if (eval_args(L, e, spec, 1, v, pr).kind == V_ERR ||
      !mlc_want_int(L, v[0], argloc(e, spec, 1, 0), "arange's end", 1, MLC_MAX_NUMEL, &n))
    return mlc_verr();
  mlc_type t = {.dtype = MLC_DT_I64, .rank = 1, .dim = {n}};
  return mlc_emit(L, op, NULL, 0, NULL, &t, e->loc);
}

/* The functions whose binding is their own; every op that ops.def marks
 * CALL is also callable by its name (call_binder). */
static const struct {
  const char *name;
  prim_fn fn;
  mlc_op op;
} prims[] = {
  {"gelu", prim_gelu, MLC_OP_GELU},        {"reshape", prim_reshape, MLC_OP_RESHAPE},
  {"transpose", prim_transpose, MLC_OP_TRANSPOSE}, {"slice", prim_slice, MLC_OP_SLICE},
  {"concat", prim_concat, MLC_OP_CONCAT},  {"cast", prim_cast, MLC_OP_CAST},
  {"attention", prim_attention, MLC_OP_ATTENTION},
  {"pow", prim_pow, MLC_OP_POW},           {"clamp", prim_clamp, MLC_OP_CLAMP_MIN},
  {"dropout", prim_dropout, MLC_OP_DROPOUT},
  {"where", prim_where, MLC_OP_WHERE},     {"arange", prim_arange, MLC_OP_ARANGE},
  {"permute", prim_permute, MLC_OP_TRANSPOSE}, {"unsqueeze", prim_unsqueeze, MLC_OP_RESHAPE},
  {"squeeze", prim_squeeze, MLC_OP_RESHAPE}, {"expand", prim_expand, MLC_OP_BROADCAST},
  {"gather", prim_gather, MLC_OP_GATHER},
};

/* How a CALL op's arguments bind (ir/ops.def): two tensors; a reduction's
 * x, dim= and keepdim=; or one tensor.  NULL for an op not callable. */
static prim_fn call_binder(mlc_op op) {
  const mlc_opinfo *o = &mlc_ops[op];
  if (!(o->flags & MLC_F_CALL)) return NULL;
  if (o->arity == 2) return prim_binary;
  if (o->flags & MLC_F_RED) return o->flags & MLC_F_ARG ? prim_argreduce : prim_reduce;
  return prim_unary;
}

mlc_value lw_call(mlc_lowerer *L, const mlc_ast_expr *e) {
  if (!L->f) {
    mlc_error(L->d, e->loc, "'%s(...)' is not a compile-time value; only numbers, bools and dtypes are allowed here", e->name);
    return mlc_verr();
  }
  /* A name bound to a module instance calls its forward. */
  mlc_value *v = lw_scope_get(L->locals, e->name);
  if (!v && L->self) v = lw_scope_get(&L->self->members, e->name);
  if (v && v->kind == V_MODULE) {
    mlc_value args[64];
    if (e->nargs > 64) { mlc_error(L->d, e->loc, "too many arguments"); return mlc_verr(); }
    bool ok = true;
    for (uint32_t i = 0; i < e->nargs; i++) {
      if (e->args[i].name) {
        mlc_error(L->d, e->args[i].loc, "module calls take positional arguments only");
        ok = false;
      }
      args[i] = lw_eval(L, e->args[i].value);
      ok &= args[i].kind != V_ERR;
    }
    return ok ? mlc_call_module(L, v->mod, args, e->nargs, e->loc) : mlc_verr();
  }
  if (v && v->kind != V_ERR) {
    mlc_error(L->d, e->loc, "'%s' is not a module and cannot be called", e->name);
    return mlc_verr();
  }
  for (size_t i = 0; i < sizeof prims / sizeof *prims; i++)
    if (!strcmp(prims[i].name, e->name)) return prims[i].fn(L, e, prims[i].op);
  for (int op = 0; op < MLC_OP_COUNT; op++)
    if (call_binder((mlc_op)op) && !strcmp(mlc_ops[op].name, e->name)) return call_binder((mlc_op)op)(L, e, (mlc_op)op);
  if (lw_find_module(L, e->name) || mlc_builtin_find(e->name)) {
    mlc_error(L->d, e->loc, "module %s must be created as a member of the module (name = %s(...)), not inside forward",
              e->name, e->name);
    return mlc_verr();
  }
  suggest s = {.want = e->name, .dist = 99};
  for (size_t i = 0; i < sizeof prims / sizeof *prims; i++) lw_consider(&s, prims[i].name);
  for (int op = 0; op < MLC_OP_COUNT; op++)
    if (call_binder((mlc_op)op)) lw_consider(&s, mlc_ops[op].name);
  if (L->self) lw_consider_scope(&s, &L->self->members);
  lw_consider_scope(&s, L->locals);
  mlc_error(L->d, e->loc, "unknown function '%s'%s", e->name, lw_hint(L, &s));
  return mlc_verr();
}
