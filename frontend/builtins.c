/* The built-in modules, with PyTorch's semantics, parameter names, shapes and
 * default initialisation (torch.nn as of 2.x):
 *
 *   Linear(in, out, bias=true)      weight [out, in], bias [out]: U(-1/sqrt(in), 1/sqrt(in))
 *   Embedding(num, dim)             weight [num, dim]: N(0, 1)
 *   RMSNorm(dim, eps=)              weight [dim]: ones; eps defaults to finfo(dtype).eps
 *   LayerNorm(dim, eps=1e-5)        weight ones, bias zeros
 *   MultiheadAttention(dim, heads)  in_proj_weight [3 dim, dim]: xavier_uniform,
 *                                   in_proj_bias zeros, out_proj.weight U(-1/sqrt(dim), ..),
 *                                   out_proj.bias zeros; batch_first=True, no mask
 *   SiLU(), GELU(), ReLU()          no parameters
 *   Dropout(p=0.5)                  no parameters; dropout(x, p) in training, x otherwise
 *   Sequential(m, ...)              children 0, 1, ...; calls them in order
 *
 * Every module with parameters also takes dtype= (default f32).
 */
#include <math.h>
#include <string.h>

#include "frontend/lower.h"

/* Common optional argument: dtype=, default f32. */
static bool get_dtype(mlc_lowerer *L, const mlc_call *c, const char *const *spec, uint32_t n, const mlc_value *v,
                      const bool *pr, uint32_t slot, uint8_t *out) {
  *out = MLC_DT_F32;
  if (!pr[slot]) return true;
  if (!mlc_want_dtype(L, v[slot], mlc_arg_loc(c, spec, n, slot), "dtype", out)) return false;
  if (!mlc_dtype_is_float(*out)) {
    mlc_error(mlc_lower_diag(L), mlc_arg_loc(c, spec, n, slot), "%s parameters must have a floating-point dtype", c->callee);
    return false;
  }
  return true;
}

static mlc_type t1(uint8_t dt, int64_t a) { return (mlc_type){.dtype = dt, .rank = 1, .dim = {a}}; }
static mlc_type t2(uint8_t dt, int64_t a, int64_t b) { return (mlc_type){.dtype = dt, .rank = 2, .dim = {a, b}}; }

#define DIM_MAX ((int64_t)1 << 24)

/* ---- Linear ---- */

static bool linear_make(mlc_lowerer *L, mlc_instance *m, const mlc_call *c) {
  static const char *const spec[] = {"in_features", "out_features", "bias=", "dtype="};
  mlc_value v[4];
  bool pr[4];
  m->bias = true;
  if (!mlc_bind(L, c, spec, 4, v, pr)) return false;
  bool ok = mlc_want_int(L, v[0], mlc_arg_loc(c, spec, 4, 0), "in_features", 1, DIM_MAX, &m->dim[0]);
  ok &= mlc_want_int(L, v[1], mlc_arg_loc(c, spec, 4, 1), "out_features", 1, DIM_MAX, &m->dim[1]);
  if (pr[2]) ok &= mlc_want_bool(L, v[2], mlc_arg_loc(c, spec, 4, 2), "bias", &m->bias);
  ok &= get_dtype(L, c, spec, 4, v, pr, 3, &m->dtype);
  if (!ok) return false;
  double bound = 1.0 / sqrt((double)m->dim[0]);
  m->param[0] = mlc_new_param(L, m, "weight", t2(m->dtype, m->dim[1], m->dim[0]), MLC_INIT_UNIFORM, -bound, bound, c->loc);
  if (m->bias) m->param[1] = mlc_new_param(L, m, "bias", t1(m->dtype, m->dim[1]), MLC_INIT_UNIFORM, -bound, bound, c->loc);
  return true;
}

/* y = x @ W^T (+ b) */
static mlc_value linear_apply(mlc_lowerer *L, mlc_value x, uint32_t w, int64_t has_b, uint32_t b, mlc_loc loc) {
  mlc_value in[2] = {x, mlc_param_value(L, w, loc)};
  mlc_value y = mlc_emit(L, MLC_OP_LINEAR, in, 2, NULL, NULL, loc);
  if (!has_b) return y;
  in[0] = y;
  in[1] = mlc_param_value(L, b, loc);
  return mlc_emit(L, MLC_OP_ADD, in, 2, NULL, NULL, loc);
}

static mlc_value linear_forward(mlc_lowerer *L, mlc_instance *m, const mlc_value *args, uint32_t n, mlc_loc loc) {
  (void)n;
  return linear_apply(L, args[0], m->param[0], m->bias, m->param[1], loc);
}

/* ---- Embedding ---- */

static bool embedding_make(mlc_lowerer *L, mlc_instance *m, const mlc_call *c) {
  static const char *const spec[] = {"num_embeddings", "embedding_dim", "dtype="};
  mlc_value v[3];
  bool pr[3];
  if (!mlc_bind(L, c, spec, 3, v, pr)) return false;
  bool ok = mlc_want_int(L, v[0], mlc_arg_loc(c, spec, 3, 0), "num_embeddings", 1, DIM_MAX, &m->dim[0]);
  ok &= mlc_want_int(L, v[1], mlc_arg_loc(c, spec, 3, 1), "embedding_dim", 1, DIM_MAX, &m->dim[1]);
  ok &= get_dtype(L, c, spec, 3, v, pr, 2, &m->dtype);
  if (!ok) return false;
  m->param[0] = mlc_new_param(L, m, "weight", t2(m->dtype, m->dim[0], m->dim[1]), MLC_INIT_NORMAL, 0, 1, c->loc);
  return true;
}

static mlc_value embedding_forward(mlc_lowerer *L, mlc_instance *m, const mlc_value *args, uint32_t n, mlc_loc loc) {
  (void)n;
  mlc_value in[2] = {mlc_param_value(L, m->param[0], loc), args[0]};
  return mlc_emit(L, MLC_OP_EMBEDDING, in, 2, NULL, NULL, loc);
}

/* ---- RMSNorm and LayerNorm ---- */

static bool norm_make(mlc_lowerer *L, mlc_instance *m, const mlc_call *c, bool layer) {
  static const char *const spec[] = {"normalized_shape", "eps=", "elementwise_affine=", "bias=", "dtype="};
  mlc_value v[5];
  bool pr[5], affine = true;
  uint32_t nspec = 5;
  m->bias = layer;
  if (!mlc_bind(L, c, spec, nspec, v, pr)) return false;
  if (!layer && pr[3]) {
    mlc_error(mlc_lower_diag(L), mlc_arg_loc(c, spec, nspec, 3), "RMSNorm has no bias");
    return false;
  }
  bool ok = mlc_want_int(L, v[0], mlc_arg_loc(c, spec, nspec, 0), "normalized_shape", 1, DIM_MAX, &m->dim[0]);
  m->has_eps = pr[1] || layer;
  m->eps = 1e-5;
  if (pr[1]) ok &= mlc_want_float(L, v[1], mlc_arg_loc(c, spec, nspec, 1), "eps", &m->eps);
  if (pr[2]) ok &= mlc_want_bool(L, v[2], mlc_arg_loc(c, spec, nspec, 2), "elementwise_affine", &affine);
  if (pr[3]) ok &= mlc_want_bool(L, v[3], mlc_arg_loc(c, spec, nspec, 3), "bias", &m->bias);
  ok &= get_dtype(L, c, spec, nspec, v, pr, 4, &m->dtype);
  if (!ok) return false;
  if (!(m->eps >= 0)) {
    mlc_error(mlc_lower_diag(L), mlc_arg_loc(c, spec, nspec, 1), "eps must not be negative");
    return false;
  }
  m->dim[1] = affine;
  if (!affine) m->bias = false;
  if (affine) m->param[0] = mlc_new_param(L, m, "weight", t1(m->dtype, m->dim[0]), MLC_INIT_ONES, 0, 0, c->loc);
  if (m->bias) m->param[1] = mlc_new_param(L, m, "bias", t1(m->dtype, m->dim[0]), MLC_INIT_ZEROS, 0, 0, c->loc);
  return true;
}

static bool rmsnorm_make(mlc_lowerer *L, mlc_instance *m, const mlc_call *c) { return norm_make(L, m, c, false); }
static bool layernorm_make(mlc_lowerer *L, mlc_instance *m, const mlc_call *c) { return norm_make(L, m, c, true); }

/* torch.finfo(dtype).eps: RMSNorm's default when eps is not given. */
static double finfo_eps(uint8_t dt) {
  switch (dt) {
  case MLC_DT_BF16: return 0.0078125;
  case MLC_DT_F16: return 0.0009765625;
  default: return 1.1920928955078125e-07;
  }
}

static mlc_value norm_forward(mlc_lowerer *L, mlc_instance *m, const mlc_value *args, uint32_t n, mlc_loc loc) {
  (void)n;
  bool layer = !strcmp(m->type_name, "LayerNorm");
  mlc_value in[3] = {args[0]};
  uint32_t nin = 1;
  if (m->dim[1]) in[nin++] = mlc_param_value(L, m->param[0], loc);
  if (m->bias) in[nin++] = mlc_param_value(L, m->param[1], loc);
  mlc_attrs a = {.f = m->has_eps ? m->eps : finfo_eps(mlc_value_type(L, args[0])->dtype)};
  return mlc_emit(L, layer ? MLC_OP_LAYERNORM : MLC_OP_RMSNORM, in, nin, &a, NULL, loc);
}

/* ---- MultiheadAttention ---- */

static bool mha_make(mlc_lowerer *L, mlc_instance *m, const mlc_call *c) {
  static const char *const spec[] = {"embed_dim", "num_heads", "bias=", "causal=", "dtype="};
  mlc_value v[5];
  bool pr[5];
  m->bias = true;
  if (!mlc_bind(L, c, spec, 5, v, pr)) return false;
  bool ok = mlc_want_int(L, v[0], mlc_arg_loc(c, spec, 5, 0), "embed_dim", 1, DIM_MAX, &m->dim[0]);
  ok &= mlc_want_int(L, v[1], mlc_arg_loc(c, spec, 5, 1), "num_heads", 1, DIM_MAX, &m->dim[1]);
  if (pr[2]) ok &= mlc_want_bool(L, v[2], mlc_arg_loc(c, spec, 5, 2), "bias", &m->bias);
  if (pr[3]) ok &= mlc_want_bool(L, v[3], mlc_arg_loc(c, spec, 5, 3), "causal", &m->causal);
  ok &= get_dtype(L, c, spec, 5, v, pr, 4, &m->dtype);
  if (!ok) return false;
  int64_t e = m->dim[0], h = m->dim[1];
  if (e % h) {
    mlc_error(mlc_lower_diag(L), mlc_arg_loc(c, spec, 5, 1), "embed_dim %lld is not divisible by num_heads %lld",
              (long long)e, (long long)h);
    return false;
  }
  /* Registration order, as nn.MultiheadAttention: in_proj_weight, in_proj_bias, then out_proj. */
  double xavier = sqrt(6.0 / (double)(e + 3 * e));
  m->param[0] = mlc_new_param(L, m, "in_proj_weight", t2(m->dtype, 3 * e, e), MLC_INIT_UNIFORM, -xavier, xavier, c->loc);
  if (m->bias) m->param[1] = mlc_new_param(L, m, "in_proj_bias", t1(m->dtype, 3 * e), MLC_INIT_ZEROS, 0, 0, c->loc);
  /* out_proj is a child module in PyTorch, so its names carry "out_proj.". */
  double kaiming = 1.0 / sqrt((double)e);
  m->param[2] = mlc_new_param(L, m, "out_proj.weight", t2(m->dtype, e, e), MLC_INIT_UNIFORM, -kaiming, kaiming, c->loc);
  if (m->bias) m->param[3] = mlc_new_param(L, m, "out_proj.bias", t1(m->dtype, e), MLC_INIT_ZEROS, 0, 0, c->loc);
  return true;
}

/* x [B, A, C, D] with axes 1 and 2 swapped: a transpose, or where A or C
 * is 1 (a decode step's one token) a reshape, since the bytes stay where
 * they are (no kernel). */
static mlc_value swap12(mlc_lowerer *L, mlc_value x, mlc_loc loc) {
  const mlc_type *t = mlc_value_type(L, x);
  if (t->dim[1] == 1 || t->dim[2] == 1) {
    int64_t d[4] = {t->dim[0], t->dim[2], t->dim[1], t->dim[3]};
    return mlc_reshape(L, x, d, 4, loc);
  }
  mlc_attrs a = {.axis = 1, .axis2 = 2};
  return mlc_emit(L, MLC_OP_TRANSPOSE, &x, 1, &a, NULL, loc);
}

/* [B, S, E] -> [B, H, S, E/H] */
static mlc_value split_heads(mlc_lowerer *L, mlc_value x, int64_t h, mlc_loc loc) {
  if (x.kind != V_TENSOR) return x;
  const mlc_type *t = mlc_value_type(L, x);
  int64_t d[4] = {t->dim[0], t->dim[1], h, t->dim[2] / h};
  return swap12(L, mlc_reshape(L, x, d, 4, loc), loc);
}

static mlc_value mha_forward(mlc_lowerer *L, mlc_instance *m, const mlc_value *args, uint32_t n, mlc_loc loc) {
  int64_t e = m->dim[0], h = m->dim[1];
  if (n == 2) {
    mlc_error(mlc_lower_diag(L), loc, "MultiheadAttention takes query, key and value (or one input for self-attention)");
    return mlc_verr();
  }
  mlc_value q = args[0], k = n == 3 ? args[1] : args[0], v = n == 3 ? args[2] : args[0];
  for (uint32_t i = 0; i < n; i++) {
    const mlc_type *t = mlc_value_type(L, args[i]);
    if (t->rank != 3 || t->dim[2] != e) {
      char b[96];
      mlc_error(mlc_lower_diag(L), loc, "MultiheadAttention(%lld, %lld) needs inputs of shape [batch, seq, %lld], got %s",
                (long long)e, (long long)h, (long long)e, mlc_type_str(t, b, sizeof b));
      return mlc_verr();
    }
  }
  mlc_value w = mlc_param_value(L, m->param[0], loc);
  mlc_value bias = m->bias ? mlc_param_value(L, m->param[1], loc) : mlc_verr();
  mlc_value qkv[3];
  if (q.node == k.node && k.node == v.node) {
    /* Self-attention: one GEMM for q, k and v together, as PyTorch does. */
    mlc_value in[2] = {q, w};
    mlc_value y = mlc_emit(L, MLC_OP_LINEAR, in, 2, NULL, NULL, loc);
    if (m->bias) {
      in[0] = y, in[1] = bias;
      y = mlc_emit(L, MLC_OP_ADD, in, 2, NULL, NULL, loc);
    }
    for (int i = 0; i < 3; i++) {
      mlc_attrs a = {.axis = 2, .start = i * e, .end = (i + 1) * e};
      qkv[i] = mlc_emit(L, MLC_OP_SLICE, &y, 1, &a, NULL, loc);
    }
  } else {
    const mlc_value src[3] = {q, k, v};
    for (int i = 0; i < 3; i++) {
      mlc_attrs a = {.axis = 0, .start = i * e, .end = (i + 1) * e};
      mlc_value in[2] = {src[i], mlc_emit(L, MLC_OP_SLICE, &w, 1, &a, NULL, loc)};
      qkv[i] = mlc_emit(L, MLC_OP_LINEAR, in, 2, NULL, NULL, loc);
      if (m->bias) {
        in[0] = qkv[i];
        in[1] = mlc_emit(L, MLC_OP_SLICE, &bias, 1, &a, NULL, loc);
        qkv[i] = mlc_emit(L, MLC_OP_ADD, in, 2, NULL, NULL, loc);
      }
    }
  }
  for (int i = 0; i < 3; i++) qkv[i] = split_heads(L, qkv[i], h, loc);
  mlc_value o = mlc_attention(L, qkv, m->causal, 1.0 / sqrt((double)(e / h)), loc);
  if (o.kind != V_TENSOR) return o;
  o = swap12(L, o, loc);
  const mlc_type *qt = mlc_value_type(L, q);
  int64_t d[3] = {qt->dim[0], qt->dim[1], e};
  o = mlc_reshape(L, o, d, 3, loc);
  return linear_apply(L, o, m->param[2], m->bias, m->param[3], loc);
}

/* ---- activations ---- */

static bool noargs_make(mlc_lowerer *L, mlc_instance *m, const mlc_call *c) {
  (void)m;
  if (c->nargs) {
    mlc_error(mlc_lower_diag(L), c->args[0].loc, "%s takes no arguments", c->callee);
    return false;
  }
  return true;
}

static mlc_value act_forward(mlc_lowerer *L, mlc_instance *m, const mlc_value *args, uint32_t n, mlc_loc loc) {
  (void)n;
  mlc_op op = !strcmp(m->type_name, "SiLU") ? MLC_OP_SILU : !strcmp(m->type_name, "GELU") ? MLC_OP_GELU : MLC_OP_RELU;
  return mlc_emit(L, op, args, 1, NULL, NULL, loc);
}

/* ---- Dropout ---- */

static bool dropout_make(mlc_lowerer *L, mlc_instance *m, const mlc_call *c) {
  static const char *const spec[] = {"p="};
  mlc_value v[1];
  bool pr[1];
  m->p = 0.5;
  if (!mlc_bind(L, c, spec, 1, v, pr)) return false;
  if (pr[0] && !mlc_want_float(L, v[0], mlc_arg_loc(c, spec, 1, 0), "Dropout's p", &m->p)) return false;
  if (!(m->p >= 0 && m->p < 1)) {
    mlc_error(mlc_lower_diag(L), mlc_arg_loc(c, spec, 1, 0), "Dropout's p must be at least 0 and less than 1, got %g", m->p);
    return false;
  }
  return true;
}

static mlc_value dropout_forward(mlc_lowerer *L, mlc_instance *m, const mlc_value *args, uint32_t n, mlc_loc loc) {
  (void)n;
  return mlc_dropout(L, args[0], m->p, 0, loc, loc);
}

/* ---- Sequential ---- */

static bool sequential_make(mlc_lowerer *L, mlc_instance *m, const mlc_call *c) {
  m->is_list = m->callable = true;
  m->children = mlc_arena_alloc(mlc_lower_arena(L), (c->nargs + 1) * sizeof *m->children);
  bool ok = true;
  for (uint32_t i = 0; i < c->nargs; i++) {
    if (c->args[i].name || c->args[i].value->kind != AST_CALL) {
      mlc_error(mlc_lower_diag(L), c->args[i].loc, "Sequential takes modules, such as Sequential(Linear(4, 4), ReLU())");
      ok = false;
      continue;
    }
    mlc_value ch = mlc_instantiate_child(L, m, mlc_arena_printf(mlc_lower_arena(L), "%u", i), c->args[i].value);
    if (ch.kind != V_MODULE) { ok = false; continue; }
    m->children[m->nchildren++] = ch.mod;
  }
  return ok;
}

static mlc_value sequential_forward(mlc_lowerer *L, mlc_instance *m, const mlc_value *args, uint32_t n, mlc_loc loc) {
  (void)L, (void)m, (void)args, (void)n, (void)loc;
  MLC_ICE("Sequential is called through mlc_call_module");
}

const mlc_builtin mlc_builtins[] = {
  {"Linear", linear_make, linear_forward, 1, 1},
  {"Embedding", embedding_make, embedding_forward, 1, 1},
  {"RMSNorm", rmsnorm_make, norm_forward, 1, 1},
  {"LayerNorm", layernorm_make, norm_forward, 1, 1},
  {"MultiheadAttention", mha_make, mha_forward, 1, 3},
  {"SiLU", noargs_make, act_forward, 1, 1},
  {"GELU", noargs_make, act_forward, 1, 1},
  {"ReLU", noargs_make, act_forward, 1, 1},
  {"Dropout", dropout_make, dropout_forward, 1, 1},
  {"Sequential", sequential_make, sequential_forward, 1, 1},
  {"onnx", mlc_onnx_module_make, mlc_onnx_module_forward, 0, 64},
};
const uint32_t mlc_nbuiltins = sizeof mlc_builtins / sizeof *mlc_builtins;

const mlc_builtin *mlc_builtin_find(const char *name) {
  for (uint32_t i = 0; i < mlc_nbuiltins; i++)
    if (!strcmp(mlc_builtins[i].name, name)) return &mlc_builtins[i];
  return NULL;
}
