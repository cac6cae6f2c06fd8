/* Lowering: evaluates the AST into the IR program.
 *
 * This runs the model description the way PyTorch would run the Python:
 * config values are computed first (with -D overrides), then the model's
 * module tree is instantiated (constructor arguments bound, parameters
 * created with their state_dict names, in PyTorch's registration order:
 * a module's own parameters, then its submodules'), then each entry point's
 * forward is evaluated with concrete shapes, expanding every module call in
 * place.  Compile-time numbers fold as they go; tensors become IR nodes,
 * each shape-checked as it is built so an error points at the expression
 * that caused it.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/lower_impl.h"


mlc_diag *mlc_lower_diag(mlc_lowerer *L) { return L->d; }
mlc_arena *mlc_lower_arena(mlc_lowerer *L) { return L->a; }
bool mlc_lower_no_files(mlc_lowerer *L) { return L->io && L->io->no_files; }
const char *mlc_lower_entry(mlc_lowerer *L) { return L->f ? L->f->name : NULL; }
void mlc_lower_add_weight(mlc_lowerer *L, mlc_onnx_weight w) {
  if (L->nw == L->wcap) {
    uint32_t cap = L->wcap ? L->wcap * 2 : 16;
    L->w = mlc_arena_grow(L->a, L->w, L->nw * sizeof *L->w, cap * sizeof *L->w);
    L->wcap = cap;
  }
  L->w[L->nw++] = w;
}

void mlc_lower_freeze_param(mlc_lowerer *L, uint32_t param) { L->p->params[param].frozen = true; }

uint32_t mlc_lower_config_ints(mlc_lowerer *L, mlc_define **out) {
  *out = mlc_arena_alloc(L->a, (L->config.n + 1) * sizeof **out);
  uint32_t n = 0;
  for (uint32_t i = 0; i < L->config.n; i++) {
    const mlc_binding *b = &L->config.v[i];
    if (b->v.kind == V_NUM && b->v.is_int) (*out)[n++] = (mlc_define){b->name, mlc_arena_printf(L->a, "%lld", (long long)b->v.i)};
  }
  return n;
}


/* "logits, loss": a tuple's names, for messages. */
const char *lw_tuple_names(mlc_lowerer *L, const mlc_tuple *t) {
  const char *s = t->names[0];
  for (uint32_t i = 1; i < t->n; i++) s = mlc_arena_printf(L->a, "%s, %s", s, t->names[i]);
  return s;
}

const char *lw_kind_name(mlc_lowerer *L, mlc_value v) {
  switch (v.kind) {
  case V_NUM: return v.is_int ? "an integer" : "a number";
  case V_BOOL: return "a bool";
  case V_DTYPE: return "a dtype";
  case V_TENSOR: return mlc_arena_printf(L->a, "a tensor %s", mlc_type_str(mlc_value_type(L, v), (char[96]){0}, 96));
  case V_MODULE: return v.mod->is_list && !v.mod->callable ? "a module list" : "a module";
  case V_NONE: return "none";
  case V_PARAM: return "a parameter";
  case V_STR: return mlc_arena_printf(L->a, "the string \"%s\"", v.str);
  case V_TUPLE: return mlc_arena_printf(L->a, "%u values (%s)", v.tuple->n, lw_tuple_names(L, v.tuple));
  default: return "an error";
  }
}

/* ---- scopes ---- */

void lw_scope_set(mlc_lowerer *L, mlc_scope *s, const char *name, mlc_value v) {
  for (uint32_t i = s->n; i-- > 0;)
    if (!strcmp(s->v[i].name, name)) { s->v[i].v = v; return; }
  if (s->n == s->cap) {
    uint32_t cap = s->cap ? s->cap * 2 : 8;
    s->v = mlc_arena_grow(L->a, s->v, s->n * sizeof *s->v, cap * sizeof *s->v);
    s->cap = cap;
  }
  s->v[s->n++] = (mlc_binding){name, v};
}

mlc_value *lw_scope_get(mlc_scope *s, const char *name) {
  if (!s) return NULL;
  for (uint32_t i = s->n; i-- > 0;)
    if (!strcmp(s->v[i].name, name)) return &s->v[i].v;
  return NULL;
}

/* ---- "did you mean" ---- */

/* Levenshtein distance where swapping two adjacent letters (bacth) also
 * counts as one edit: the optimal string alignment distance. */
static unsigned edit_distance(const char *a, const char *b) {
  size_t n = strlen(a), m = strlen(b);
  if (n > 32 || m > 32) return 99;
  unsigned d[33][33];
  for (size_t i = 0; i <= n; i++) d[i][0] = (unsigned)i;
  for (size_t j = 0; j <= m; j++) d[0][j] = (unsigned)j;
  for (size_t i = 1; i <= n; i++)
    for (size_t j = 1; j <= m; j++) {
      unsigned best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
      if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
      if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
        best = d[i - 2][j - 2] + 1;
      d[i][j] = best;
    }
  return d[n][m];
}

void lw_consider(suggest *s, const char *cand) {
  unsigned d = edit_distance(s->want, cand);
  size_t len = strlen(s->want);
  if (d < s->dist && d <= (len < 4 ? 1 : len / 3)) { s->dist = d; s->best = cand; }
}

void lw_consider_scope(suggest *s, const mlc_scope *sc) {
  if (sc)
    for (uint32_t i = 0; i < sc->n; i++) lw_consider(s, sc->v[i].name);
}

const char *lw_hint(mlc_lowerer *L, suggest *s) {
  return s->best ? mlc_arena_printf(L->a, "; did you mean '%s'?", s->best) : "";
}

/* ---- values and nodes ---- */

const mlc_type *mlc_value_type(mlc_lowerer *L, mlc_value v) { return &L->f->nodes[v.node].type; }

bool mlc_want_tensor(mlc_lowerer *L, mlc_value v, mlc_loc loc, const char *what) {
  if (v.kind == V_TENSOR) return true;
  if (v.kind != V_ERR) mlc_error(L->d, loc, "%s must be a tensor, got %s", what, lw_kind_name(L, v));
  return false;
}

mlc_value mlc_emit(mlc_lowerer *L, mlc_op op, const mlc_value *in, uint32_t nin, const mlc_attrs *a, const mlc_type *preset,
                   mlc_loc loc) {
  uint32_t ids[64] = {0}; /* mlc_func_add reads only ids[0..nin) */
  MLC_ASSERT(nin <= 64);
  for (uint32_t i = 0; i < nin; i++) {
    if (in[i].kind != V_TENSOR) return mlc_verr();
    ids[i] = in[i].node;
  }
  if (L->f->n >= MAX_NODES) {
    if (!L->too_big) mlc_error(L->d, loc, "the model has more than %u operations; mlc's limit per entry point", MAX_NODES);
    L->too_big = true;
    return mlc_verr();
  }
  const char *scope = L->self ? L->self->path : "";
  uint32_t id = mlc_func_add(L->p, L->f, op, ids, nin, a, loc, scope);
  mlc_node *n = &L->f->nodes[id];
  if (preset) n->type = *preset;
  char err[256];
  mlc_type t;
  if (!mlc_infer_type(L->p, L->f, n, &t, err, sizeof err)) {
    mlc_error(L->d, loc, "%s", err);
    L->f->n--; /* drop the bad node: nothing refers to it */
    return mlc_verr();
  }
  L->f->nodes[id].type = t;
  return vtensor(id);
}

mlc_value lw_mk_const(mlc_lowerer *L, double v, uint8_t dtype, mlc_loc loc) {
  mlc_type t = {.dtype = dtype, .rank = 0};
  mlc_attrs a = {.f = v};
  return mlc_emit(L, MLC_OP_CONST, NULL, 0, &a, &t, loc);
}

mlc_value mlc_reshape(mlc_lowerer *L, mlc_value x, const int64_t *dims, int rank, mlc_loc loc) {
  if (x.kind != V_TENSOR) return mlc_verr();
  mlc_type t = {.dtype = mlc_value_type(L, x)->dtype, .rank = (uint8_t)rank};
  memcpy(t.dim, dims, (size_t)rank * sizeof *dims);
  return mlc_emit(L, MLC_OP_RESHAPE, &x, 1, NULL, &t, loc);
}

mlc_value mlc_param_value(mlc_lowerer *L, uint32_t param, mlc_loc loc) {
  while (L->p->params[param].tie) param = L->p->params[param].tie - 1;
  if (L->param_node[param] != UINT32_MAX) return vtensor(L->param_node[param]);
  mlc_attrs a = {.param = param};
  /* A parameter's node belongs to the module that owns it, not to the
   * first module that happens to read it. */
  mlc_instance *self = L->self;
  L->self = NULL;
  mlc_value v = mlc_emit(L, MLC_OP_PARAM, NULL, 0, &a, &L->p->params[param].type, loc);
  L->self = self;
  if (v.kind == V_TENSOR) {
    mlc_node *n = &L->f->nodes[v.node];
    const char *name = L->p->params[param].name, *dot = strrchr(name, '.');
    n->scope = dot ? mlc_arena_strndup(L->a, name, (size_t)(dot - name)) : "";
    L->param_node[param] = v.node;
  }
  return v;
}

uint32_t mlc_new_param(mlc_lowerer *L, mlc_instance *m, const char *name, mlc_type t, int init, double a, double b,
                       mlc_loc loc) {
  mlc_param prm = {
    .name = m->path[0] ? mlc_arena_printf(L->a, "%s.%s", m->path, name) : name,
    .type = t, .init = (uint8_t)init, .init_a = a, .init_b = b, .loc = loc,
  };
  uint32_t id = mlc_program_add_param(L->p, &prm);
  lw_scope_set(L, &m->members, name, (mlc_value){.kind = V_PARAM, .i = id});
  return id;
}

/* The KV caches of the decode entries' i-th attention: made by the first
 * entry (zero-initialised parameters of role MLC_ROLE_CACHE, named after
 * the attention's module: "layers.0.attn.k_cache"), found by the next. */
static bool kv_caches(mlc_lowerer *L, uint32_t i, const mlc_type *ct, mlc_loc loc, uint32_t *out) {
  if (i < L->dec.ncache) {
    *out = L->dec.cache[i];
    if (mlc_type_eq(&L->p->params[*out].type, ct)) return true;
    char a[96], b[96];
    mlc_error(L->d, loc, "this attention needs a KV cache %s in the step entry, but %s in the prefill entry: the model must "
              "attend the same way whatever the sequence length", mlc_type_str(ct, a, sizeof a),
              mlc_type_str(&L->p->params[*out].type, b, sizeof b));
    return false;
  }
  const char *path = L->self && L->self->path[0] ? L->self->path : "";
  uint32_t first = L->p->nparams;
  for (int kv = 0; kv < 2; kv++) {
    const char *base = kv ? "v_cache" : "k_cache";
    const char *name = path[0] ? mlc_arena_printf(L->a, "%s.%s", path, base) : base;
    for (uint32_t k = 0; k < L->p->nparams; k++) /* a module with two attentions: number the second's */
      if (!strcmp(L->p->params[k].name, name)) {
        name = path[0] ? mlc_arena_printf(L->a, "%s.%s%u", path, base, i) : mlc_arena_printf(L->a, "%s%u", base, i);
        break;
      }
    mlc_param prm = {.name = name, .type = *ct, .role = MLC_ROLE_CACHE, .init = MLC_INIT_ZEROS, .loc = loc};
    mlc_program_add_param(L->p, &prm);
  }
  /* The entry's parameter-to-node map has one slot per parameter. */
  uint32_t *pn = mlc_arena_alloc(L->a, (L->p->nparams + 1) * sizeof *pn);
  memcpy(pn, L->param_node, first * sizeof *pn);
  pn[first] = pn[first + 1] = UINT32_MAX;
  L->param_node = pn;
  if (L->dec.ncache == L->dec.cap) {
    uint32_t cap = L->dec.cap ? 2 * L->dec.cap : 16;
    L->dec.cache = mlc_arena_grow(L->a, L->dec.cache, L->dec.cap * sizeof *L->dec.cache, cap * sizeof *L->dec.cache);
    L->dec.cap = cap;
  }
  L->dec.cache[L->dec.ncache++] = first;
  *out = first;
  return true;
}

mlc_value mlc_attention(mlc_lowerer *L, const mlc_value *qkv, bool causal, double scale, mlc_loc loc) {
  mlc_attrs a = {.causal = causal, .f = scale};
  if (!L->dec.on) return mlc_emit(L, MLC_OP_ATTENTION, qkv, 3, &a, NULL, loc);
  for (int i = 0; i < 3; i++)
    if (qkv[i].kind != V_TENSOR) return mlc_verr();
  if (!causal) {
    mlc_error(L->d, loc, "a decode entry attends over a KV cache, so its attention must be causal: use causal=true here");
    return mlc_verr();
  }
  const mlc_type *q = mlc_value_type(L, qkv[0]);
  if (q->rank != 4 || !mlc_type_eq(q, mlc_value_type(L, qkv[1])) || !mlc_type_eq(q, mlc_value_type(L, qkv[2]))) {
    char b0[96], b1[96], b2[96];
    mlc_error(L->d, loc, "attention over a KV cache needs q, k, v of one shape [batch, heads, seq, dim], got %s, %s, %s",
              mlc_type_str(q, b0, sizeof b0), mlc_type_str(mlc_value_type(L, qkv[1]), b1, sizeof b1),
              mlc_type_str(mlc_value_type(L, qkv[2]), b2, sizeof b2));
    return mlc_verr();
  }
  mlc_type ct = *q;
  ct.dim[2] = L->dec.max_ctx;
  uint32_t kc;
  if (!kv_caches(L, L->dec.used++, &ct, loc, &kc)) return mlc_verr();
  mlc_value in[6] = {qkv[0], qkv[1], qkv[2], mlc_param_value(L, kc, loc), mlc_param_value(L, kc + 1, loc), vtensor(L->dec.pos)};
  mlc_attrs ka = {.f = scale};
  return mlc_emit(L, MLC_OP_ATTENTION_KV, in, 6, &ka, NULL, loc);
}

/* ---- compile-time arithmetic ---- */

static mlc_value fold(mlc_lowerer *L, char op, mlc_value a, mlc_value b, mlc_loc loc) {
  if (a.is_int && b.is_int) {
    int64_t r;
    bool ovf = false;
    switch (op) {
    case '+': ovf = __builtin_add_overflow(a.i, b.i, &r); break;
    case '-': ovf = __builtin_sub_overflow(a.i, b.i, &r); break;
    case '*': ovf = __builtin_mul_overflow(a.i, b.i, &r); break;
    case '^': {
      double fr = pow((double)a.i, (double)b.i);
      if (b.i < 0 || !(fabs(fr) < 9007199254740992.0)) return fold(L, op, vnum_f((double)a.i), b, loc);
      return vnum_i((int64_t)fr);
    }
    case '/':
      if (b.i == 0) { mlc_error(L->d, loc, "division by zero"); return mlc_verr(); }
      if (a.i == INT64_MIN && b.i == -1) { ovf = true; break; }
      if (a.i % b.i == 0) return vnum_i(a.i / b.i);
      return vnum_f((double)a.i / (double)b.i);
    default:
      mlc_error(L->d, loc, "'%s' needs tensor operands; both sides are numbers", mlc_ast_op_name(op));
      return mlc_verr();
    }
    if (ovf) { mlc_error(L->d, loc, "integer overflow in '%s'", mlc_ast_op_name(op)); return mlc_verr(); }
    return vnum_i(r);
  }
  double r;
  switch (op) {
  case '^': r = pow(a.f, b.f); break;
  case '+': r = a.f + b.f; break;
  case '-': r = a.f - b.f; break;
  case '*': r = a.f * b.f; break;
  case '/':
    if (b.f == 0) { mlc_error(L->d, loc, "division by zero"); return mlc_verr(); }
    r = a.f / b.f;
    break;
  default:
    mlc_error(L->d, loc, "'%s' needs tensor operands; both sides are numbers", mlc_ast_op_name(op));
    return mlc_verr();
  }
  if (!isfinite(r)) { mlc_error(L->d, loc, "the result of '%s' is not a finite number", mlc_ast_op_name(op)); return mlc_verr(); }
  return vnum_f(r);
}

static mlc_op binop(char op) {
  switch (op) {
  case '+': return MLC_OP_ADD;
  case '-': return MLC_OP_SUB;
  case '*': return MLC_OP_MUL;
  case '/': return MLC_OP_DIV;
  case '<': case '>': return MLC_OP_LT;
  case 'l': case 'g': return MLC_OP_LE;
  case 'e': return MLC_OP_EQ;
  case 'n': return MLC_OP_NE;
  default: return MLC_OP_MATMUL;
  }
}

/* A number next to a tensor becomes a scalar constant of the tensor's dtype. */
mlc_value lw_as_tensor_like(mlc_lowerer *L, mlc_value num, mlc_value t, mlc_loc loc) {
  uint8_t dt = mlc_value_type(L, t)->dtype;
  if (!mlc_dtype_is_float(dt) && !num.is_int) {
    mlc_error(L->d, loc, "cannot combine %s with the non-integer number %g; cast the tensor first",
              lw_kind_name(L, t), num.f);
    return mlc_verr();
  }
  return lw_mk_const(L, num.f, dt, loc);
}

/* x ** p and pow(x, p): the exponent is a number known at compile time. */
mlc_value lw_power(mlc_lowerer *L, mlc_value x, mlc_value p, mlc_loc loc, mlc_loc ploc) {
  if (x.kind == V_ERR || p.kind == V_ERR) return mlc_verr();
  if (x.kind != V_TENSOR) {
    mlc_error(L->d, loc, "the base of a power must be a tensor here, got %s", lw_kind_name(L, x));
    return mlc_verr();
  }
  if (p.kind != V_NUM) {
    mlc_error(L->d, ploc, "the exponent must be a number known at compile time, got %s (a tensor exponent is not supported)",
              lw_kind_name(L, p));
    return mlc_verr();
  }
  mlc_attrs a = {.f = p.f};
  return mlc_emit(L, MLC_OP_POW, &x, 1, &a, NULL, loc);
}

static mlc_value binary(mlc_lowerer *L, char op, mlc_value a, mlc_value b, mlc_loc loc) {
  if (a.kind == V_ERR || b.kind == V_ERR) return mlc_verr();
  if (a.kind == V_NUM && b.kind == V_NUM) return fold(L, op, a, b, loc);
  bool a_ok = a.kind == V_TENSOR || a.kind == V_NUM, b_ok = b.kind == V_TENSOR || b.kind == V_NUM;
  if (!a_ok || !b_ok) {
    mlc_error(L->d, loc, "'%s' cannot take %s and %s", mlc_ast_op_name(op), lw_kind_name(L, a), lw_kind_name(L, b));
    return mlc_verr();
  }
  if (op == '@' && (a.kind != V_TENSOR || b.kind != V_TENSOR)) {
    mlc_error(L->d, loc, "'@' needs two tensors, got %s and %s", lw_kind_name(L, a), lw_kind_name(L, b));
    return mlc_verr();
  }
  if (op == '^') return lw_power(L, a, b, loc, loc);
  if (a.kind == V_NUM) a = lw_as_tensor_like(L, a, b, loc);
  if (b.kind == V_NUM) b = lw_as_tensor_like(L, b, a, loc);
  /* a > b is b < a, and a >= b is b <= a: the IR has lt and le only. */
  bool swap = op == '>' || op == 'g';
  mlc_value in[2] = {swap ? b : a, swap ? a : b};
  return mlc_emit(L, binop(op), in, 2, NULL, NULL, loc);
}

/* ---- expressions ---- */


static mlc_value lookup(mlc_lowerer *L, const char *name, mlc_loc loc) {
  mlc_value *v;
  if ((v = lw_scope_get(L->locals, name))) return *v;
  if (L->self) {
    if ((v = lw_scope_get(&L->self->members, name))) {
      if (v->kind == V_PARAM) {
        if (!L->f) {
          mlc_error(L->d, loc, "parameter '%s' can only be used inside forward", name);
          return mlc_verr();
        }
        return mlc_param_value(L, (uint32_t)v->i, loc);
      }
      return *v;
    }
    if ((v = lw_scope_get(&L->self->args, name))) return *v;
  }
  if ((v = lw_scope_get(&L->config, name))) return *v;
  uint8_t dt = mlc_dtype_from_name(name, strlen(name));
  if (dt) return (mlc_value){.kind = V_DTYPE, .i = dt};
  if (!strcmp(name, "none")) return (mlc_value){.kind = V_NONE};
  suggest s = {.want = name, .dist = 99};
  lw_consider_scope(&s, L->locals);
  if (L->self) { lw_consider_scope(&s, &L->self->members); lw_consider_scope(&s, &L->self->args); }
  lw_consider_scope(&s, &L->config);
  mlc_error(L->d, loc, "unknown name '%s'%s", name, lw_hint(L, &s));
  return mlc_verr();
}

mlc_value lw_eval(mlc_lowerer *L, const mlc_ast_expr *e) {
  if (!e) return mlc_verr();
  switch (e->kind) {
  case AST_INT: return vnum_i(e->ival);
  case AST_FLOAT: return vnum_f(e->fval);
  case AST_BOOL: return (mlc_value){.kind = V_BOOL, .i = e->ival};
  case AST_NAME: return lookup(L, e->name, e->loc);
  case AST_NEG: {
    mlc_value v = lw_eval(L, e->lhs);
    if (v.kind == V_NUM) return v.is_int ? (v.i == INT64_MIN ? (mlc_error(L->d, e->loc, "integer overflow in '-'"), mlc_verr()) : vnum_i(-v.i)) : vnum_f(-v.f);
    if (v.kind == V_TENSOR) return mlc_emit(L, MLC_OP_NEG, &v, 1, NULL, NULL, e->loc);
    if (v.kind != V_ERR) mlc_error(L->d, e->loc, "cannot negate %s", lw_kind_name(L, v));
    return mlc_verr();
  }
  case AST_BINARY: {
    mlc_value a = lw_eval(L, e->lhs), b = lw_eval(L, e->rhs);
    return binary(L, e->op, a, b, e->loc);
  }
  case AST_CALL: return lw_call(L, e);
  case AST_STRING: return (mlc_value){.kind = V_STR, .str = e->name};
  case AST_LIST: mlc_error(L->d, e->loc, "a list is only allowed as an argument of reshape, permute, expand, concat or betas"); return mlc_verr();
  case AST_INDEX: return L->f ? lw_eval_index(L, e) : (mlc_error(L->d, e->loc, "indexing is only allowed inside forward"), mlc_verr());
  case AST_SLICE: mlc_error(L->d, e->loc, "a slice a:b:s is only allowed inside [ ]"); return mlc_verr();
  }
  return mlc_verr();
}

/* ---- argument binding ---- */

static bool spec_match(const char *spec, const char *name) {
  size_t n = strlen(spec);
  if (spec[n - 1] == '=') n--;
  return strlen(name) == n && !memcmp(spec, name, n);
}

mlc_loc mlc_arg_loc(const mlc_call *c, const char *const *spec, uint32_t nspec, uint32_t which) {
  for (uint32_t i = 0; i < c->nargs; i++) {
    if (c->args[i].name ? spec_match(spec[which], c->args[i].name) : i == which) return c->args[i].loc;
  }
  (void)nspec;
  return c->loc;
}

bool mlc_bind(mlc_lowerer *L, const mlc_call *c, const char *const *spec, uint32_t nspec, mlc_value *out, bool *present) {
  bool ok = true;
  for (uint32_t i = 0; i < nspec; i++) present[i] = false, out[i] = (mlc_value){.kind = V_NONE};
  uint32_t pos = 0;
  for (uint32_t i = 0; i < c->nargs; i++) {
    const mlc_ast_arg *arg = &c->args[i];
    uint32_t slot = UINT32_MAX;
    if (arg->name) {
      for (uint32_t k = 0; k < nspec; k++)
        if (spec_match(spec[k], arg->name)) slot = k;
      if (slot == UINT32_MAX) {
        suggest s = {.want = arg->name, .dist = 99};
        for (uint32_t k = 0; k < nspec; k++) {
          const char *nm = spec[k];
          size_t n = strlen(nm);
          lw_consider(&s, nm[n - 1] == '=' ? mlc_arena_strndup(L->a, nm, n - 1) : nm);
        }
        mlc_error(L->d, arg->loc, "%s has no argument named '%s'%s", c->callee, arg->name, lw_hint(L, &s));
        ok = false;
        continue;
      }
    } else {
      if (pos >= nspec || (i > 0 && c->args[i - 1].name)) {
        if (pos >= nspec)
          mlc_error(L->d, arg->loc, "%s takes at most %u arguments, got %u", c->callee, nspec, c->nargs);
        else
          mlc_error(L->d, arg->loc, "positional argument after a named one");
        return false;
      }
      slot = pos++;
    }
    if (present[slot]) {
      mlc_error(L->d, arg->loc, "%s got argument '%.*s' twice", c->callee,
                (int)(strlen(spec[slot]) - (spec[slot][strlen(spec[slot]) - 1] == '=')), spec[slot]);
      ok = false;
      continue;
    }
    present[slot] = true;
    out[slot] = lw_eval(L, arg->value);
    if (out[slot].kind == V_ERR) ok = false;
  }
  for (uint32_t k = 0; k < nspec && ok; k++) {
    size_t n = strlen(spec[k]);
    if (!present[k] && spec[k][n - 1] != '=') {
      mlc_error(L->d, c->loc, "%s is missing argument '%s'", c->callee, spec[k]);
      ok = false;
    }
  }
  return ok;
}

bool mlc_want_int(mlc_lowerer *L, mlc_value v, mlc_loc loc, const char *what, int64_t lo, int64_t hi, int64_t *out) {
  if (v.kind == V_ERR) return false;
  if (v.kind != V_NUM || !v.is_int) {
    if (v.kind == V_NUM) mlc_error(L->d, loc, "%s must be an integer, got %g", what, v.f);
    else mlc_error(L->d, loc, "%s must be an integer, got %s", what, lw_kind_name(L, v));
    return false;
  }
  if (v.i < lo || v.i > hi) {
    mlc_error(L->d, loc, "%s must be between %lld and %lld, got %lld", what, (long long)lo, (long long)hi, (long long)v.i);
    return false;
  }
  *out = v.i;
  return true;
}

bool mlc_want_float(mlc_lowerer *L, mlc_value v, mlc_loc loc, const char *what, double *out) {
  if (v.kind == V_ERR) return false;
  if (v.kind != V_NUM) {
    mlc_error(L->d, loc, "%s must be a number, got %s", what, lw_kind_name(L, v));
    return false;
  }
  *out = v.f;
  return true;
}

bool mlc_want_bool(mlc_lowerer *L, mlc_value v, mlc_loc loc, const char *what, bool *out) {
  if (v.kind == V_ERR) return false;
  if (v.kind != V_BOOL) {
    mlc_error(L->d, loc, "%s must be true or false, got %s", what, lw_kind_name(L, v));
    return false;
  }
  *out = v.i != 0;
  return true;
}

bool mlc_want_dtype(mlc_lowerer *L, mlc_value v, mlc_loc loc, const char *what, uint8_t *out) {
  if (v.kind == V_ERR) return false;
  if (v.kind != V_DTYPE) {
    mlc_error(L->d, loc, "%s must be a dtype (f32, bf16, f16, i32, i64, bool), got %s", what, lw_kind_name(L, v));
    return false;
  }
  *out = (uint8_t)v.i;
  return true;
}

bool lw_eval_type(mlc_lowerer *L, const mlc_ast_type *ty, mlc_type *out) {
  memset(out, 0, sizeof *out);
  out->dtype = ty->dtype;
  out->rank = (uint8_t)ty->rank;
  bool ok = true;
  int64_t numel = 1;
  for (uint32_t i = 0; i < ty->rank; i++) {
    mlc_value v = lw_eval(L, ty->dims[i]);
    if (v.kind == V_NUM && v.is_int && v.i < 1) {
      mlc_error(L->d, ty->dims[i]->loc, "a dimension must be positive, got %lld", (long long)v.i);
      ok = false;
      continue;
    }
    if (!mlc_want_int(L, v, ty->dims[i]->loc, "a dimension", 1, MLC_MAX_NUMEL, &out->dim[i])) { ok = false; continue; }
    if (out->dim[i] > MLC_MAX_NUMEL / numel) {
      mlc_error(L->d, ty->loc, "this tensor would have more than 2^48 elements");
      return false;
    }
    numel *= out->dim[i];
  }
  return ok;
}

/* ---- module instantiation ---- */

const mlc_ast_module *lw_find_module(mlc_lowerer *L, const char *name) {
  for (uint32_t i = 0; i < L->ast->nmodules; i++)
    if (!strcmp(L->ast->modules[i].name, name)) return &L->ast->modules[i];
  return NULL;
}

static mlc_instance *new_instance(mlc_lowerer *L, const char *path, const char *type_name, mlc_loc loc) {
  if (++L->ninstances > MAX_INSTANCES) {
    if (!L->too_big) mlc_error(L->d, loc, "the model has more than %d module instances; mlc's limit", MAX_INSTANCES);
    L->too_big = true;
    return NULL;
  }
  mlc_instance *m = mlc_arena_alloc(L->a, sizeof *m);
  m->path = path;
  m->type_name = type_name;
  return m;
}

static const char *join(mlc_lowerer *L, const char *path, const char *name) {
  return path[0] ? mlc_arena_printf(L->a, "%s.%s", path, name) : name;
}


/* The members of a user module: its own raw parameters first, then the
 * submodules, in source order, which is the order PyTorch's state_dict
 * uses. */
static void instantiate_user(mlc_lowerer *L, mlc_instance *m, const mlc_ast_module *mod, const mlc_call *c) {
  const char **spec = mlc_arena_alloc(L->a, (mod->nparams + 1) * sizeof *spec);
  for (uint32_t i = 0; i < mod->nparams; i++)
    spec[i] = mod->params[i].def ? mlc_arena_printf(L->a, "%s=", mod->params[i].name) : mod->params[i].name;
  mlc_value *vals = mlc_arena_alloc(L->a, (mod->nparams + 1) * sizeof *vals);
  bool *present = mlc_arena_alloc(L->a, (mod->nparams + 1) * sizeof *present);
  if (!mlc_bind(L, c, spec, mod->nparams, vals, present)) return;
  mlc_instance *outer = L->self;
  L->self = m; /* defaults may refer to earlier parameters */
  for (uint32_t i = 0; i < mod->nparams; i++) {
    mlc_value v = present[i] ? vals[i] : lw_eval(L, mod->params[i].def);
    if (v.kind == V_TENSOR) {
      mlc_error(L->d, present[i] ? mlc_arg_loc(c, spec, mod->nparams, i) : mod->params[i].loc,
                "module arguments must be compile-time values, not tensors");
      v = mlc_verr();
    }
    lw_scope_set(L, &m->args, mod->params[i].name, v);
  }
  for (uint32_t pass = 0; pass < 2; pass++) {
    for (uint32_t i = 0; i < mod->nmembers && !L->too_big; i++) {
      const mlc_ast_member *mem = &mod->members[i];
      if ((mem->kind == MEM_PARAM) != (pass == 0)) continue;
      if (mem->kind == MEM_TIE) {
        lw_tie(L, m, mem);
        continue;
      }
      if (lw_scope_get(&m->members, mem->name)) {
        mlc_error(L->d, mem->loc, "'%s' is already defined in module %s", mem->name, mod->name);
        for (uint32_t k = 0; k < i; k++)
          if (!strcmp(mod->members[k].name, mem->name)) {
            mlc_note(L->d, mod->members[k].loc, "the first '%s' is here", mem->name);
            break;
          }
        continue;
      }
      if (mem->kind == MEM_PARAM) {
        mlc_type t;
        if (!lw_eval_type(L, mem->type, &t)) continue;
        int init = MLC_INIT_ZEROS;
        double a = 0, b = 0;
        if (mem->ctor) {
          const mlc_ast_expr *e = mem->ctor;
          const char *nm = e->kind == AST_CALL || e->kind == AST_NAME ? e->name : "";
          static const char *const two[] = {"a", "b"};
          if (!strcmp(nm, "zeros")) init = MLC_INIT_ZEROS;
          else if (!strcmp(nm, "ones")) init = MLC_INIT_ONES;
          else if (!strcmp(nm, "normal") || !strcmp(nm, "uniform")) {
            static const char *const nspec[] = {"mean=", "std="}, *const uspec[] = {"low=", "high="};
            bool isn = !strcmp(nm, "normal");
            mlc_value v[2];
            bool pr[2];
            mlc_call cc = {e->args, e->nargs, e->loc, nm};
            if (e->kind != AST_CALL || !mlc_bind(L, &cc, isn ? nspec : uspec, 2, v, pr)) continue;
            a = isn ? 0 : -1;
            b = 1;
            if (pr[0] && !mlc_want_float(L, v[0], mlc_arg_loc(&cc, two, 2, 0), "the first init argument", &a)) continue;
            if (pr[1] && !mlc_want_float(L, v[1], mlc_arg_loc(&cc, two, 2, 1), "the second init argument", &b)) continue;
            init = isn ? MLC_INIT_NORMAL : MLC_INIT_UNIFORM;
            if (isn ? b < 0 : a > b) {
              mlc_error(L->d, e->loc, isn ? "normal std must not be negative" : "uniform needs low <= high");
              continue;
            }
          } else {
            mlc_error(L->d, e->loc, "expected an initialiser: zeros, ones, normal(mean, std) or uniform(low, high)");
            continue;
          }
          if ((init == MLC_INIT_ZEROS || init == MLC_INIT_ONES) && e->kind == AST_CALL && e->nargs) {
            mlc_error(L->d, e->loc, "%s takes no arguments", nm);
            continue;
          }
        }
        mlc_new_param(L, m, mem->name, t, init, a, b, mem->loc);
        continue;
      }
      const char *cpath = join(L, m->path, mem->name);
      if (mem->repeat) {
        int64_t n;
        if (!mlc_want_int(L, lw_eval(L, mem->repeat), mem->repeat->loc, "the repeat count", 0, MAX_REPEAT, &n)) continue;
        mlc_instance *list = new_instance(L, cpath, "ModuleList", mem->loc);
        if (!list) break;
        list->is_list = true;
        list->children = mlc_arena_alloc(L->a, (size_t)(n + 1) * sizeof *list->children);
        for (int64_t k = 0; k < n && !L->too_big; k++) {
          mlc_instance *ch = lw_instantiate(L, mlc_arena_printf(L->a, "%s.%lld", cpath, (long long)k), mem->ctor);
          if (!ch) break;
          list->children[list->nchildren++] = ch;
        }
        lw_scope_set(L, &m->members, mem->name, (mlc_value){.kind = V_MODULE, .mod = list});
      } else {
        mlc_instance *ch = lw_instantiate(L, cpath, mem->ctor);
        lw_scope_set(L, &m->members, mem->name, ch ? (mlc_value){.kind = V_MODULE, .mod = ch} : mlc_verr());
      }
    }
  }
  L->self = outer;
}

/* ---- weight sharing ---- */

/* The parameter a member path names, from module m: `embed.weight`,
 * `layers.0.attn.in_proj_weight`.  UINT32_MAX after an error. */
static uint32_t resolve_param(mlc_lowerer *L, mlc_instance *m, const mlc_ast_path *pth, const char *side) {
  const char *sofar = "";
  for (uint32_t i = 0; i < pth->n; i++) {
    const char *nm = pth->name[i];
    const char *where = sofar[0] ? mlc_arena_printf(L->a, "'%s' (%s)", sofar, m->type_name)
                                 : mlc_arena_printf(L->a, "module %s", m->type_name);
    mlc_value v = mlc_verr(), *pv;
    if (m->is_list && nm[0] >= '0' && nm[0] <= '9') {
      char *end;
      unsigned long k = strtoul(nm, &end, 10);
      if (*end || k >= m->nchildren) {
        mlc_error(L->d, pth->loc[i], "%s has %u elements, so it has no element %s", where, m->nchildren, nm);
        return UINT32_MAX;
      }
      v = (mlc_value){.kind = V_MODULE, .mod = m->children[k]};
    } else if ((pv = lw_scope_get(&m->members, nm))) {
      v = *pv;
    } else {
      suggest s = {.want = nm, .dist = 99};
      lw_consider_scope(&s, &m->members);
      mlc_error(L->d, pth->loc[i], "%s has no member '%s'%s", where, nm, lw_hint(L, &s));
      return UINT32_MAX;
    }
    sofar = sofar[0] ? mlc_arena_printf(L->a, "%s.%s", sofar, nm) : nm;
    if (v.kind == V_ERR) return UINT32_MAX;
    if (i + 1 == pth->n) {
      if (v.kind == V_PARAM) return (uint32_t)v.i;
      mlc_error(L->d, pth->loc[i], "the %s of a weight tie must be a parameter, such as %s.weight; '%s' is %s", side,
                sofar, sofar, lw_kind_name(L, v));
      return UINT32_MAX;
    }
    if (v.kind != V_MODULE) {
      mlc_error(L->d, pth->loc[i], "'%s' is %s, so it has no member '%s'", sofar, lw_kind_name(L, v), pth->name[i + 1]);
      return UINT32_MAX;
    }
    m = v.mod;
  }
  return UINT32_MAX;
}

static uint32_t tie_root(const mlc_program *p, uint32_t i) {
  while (p->params[i].tie) i = p->params[i].tie - 1;
  return i;
}

/* `head.weight = embed.weight`: from here on, the target's name is one more
 * name of the source's tensor, as PyTorch's assignment of a Parameter. */
void lw_tie(mlc_lowerer *L, mlc_instance *m, const mlc_ast_member *mem) {
  uint32_t dst = resolve_param(L, m, &mem->target, "target");
  uint32_t src = resolve_param(L, m, &mem->source, "source");
  if (dst == UINT32_MAX || src == UINT32_MAX) return;
  mlc_param *d = &L->p->params[dst];
  const mlc_param *s = &L->p->params[tie_root(L->p, src)];
  char a[96], b[96];
  if (!mlc_type_eq(&d->type, &s->type)) {
    mlc_error(L->d, mem->source.loc[0], "cannot tie %s, %s, to %s, %s: tied parameters must have the same shape and dtype",
              d->name, mlc_type_str(&d->type, a, sizeof a), L->p->params[src].name, mlc_type_str(&s->type, b, sizeof b));
    return;
  }
  uint32_t root = tie_root(L->p, src);
  if (root == tie_root(L->p, dst)) return; /* already one tensor */
  d->tie = root + 1;
}

/* After lowering: each tensor that several names share becomes one
 * parameter, named by the first of its names in state_dict order (the one
 * torch's named_parameters() yields) and holding the source's type and
 * initialisation; the other names become ties.  PARAM nodes are renumbered.
 * Returns the renumbering (old index -> new), or NULL when nothing is tied. */
const uint32_t *lw_fold_ties(mlc_program *p) {
  uint32_t n = p->nparams, kept = 0, nties = 0;
  bool any = false;
  for (uint32_t i = 0; i < n; i++) any |= p->params[i].tie != 0;
  if (!any) return NULL;
  uint32_t *to = mlc_arena_alloc(p->arena, n * sizeof *to);
  for (uint32_t i = 0; i < n; i++) to[i] = UINT32_MAX;
  mlc_param *np = mlc_arena_alloc(p->arena, n * sizeof *np);
  mlc_tie *ties = mlc_arena_alloc(p->arena, n * sizeof *ties);
  for (uint32_t i = 0; i < n; i++) {
    uint32_t r = tie_root(p, i);
    if (to[r] == UINT32_MAX) {
      to[r] = kept;
      np[kept] = p->params[r];
      np[kept].name = p->params[i].name;
      np[kept].tie = 0;
      kept++;
    } else {
      ties[nties++] = (mlc_tie){p->params[i].name, to[r], p->params[i].loc};
    }
  }
  for (uint32_t i = 0; i < n; i++) to[i] = to[tie_root(p, i)];
  for (uint32_t k = 0; k < p->nfuncs; k++)
    for (uint32_t j = 0; j < p->funcs[k].n; j++)
      if (p->funcs[k].nodes[j].op == MLC_OP_PARAM) p->funcs[k].nodes[j].a.param = to[p->funcs[k].nodes[j].a.param];
  p->params = np;
  p->nparams = kept;
  p->pcap = n;
  p->ties = ties;
  p->nties = nties;
  return to;
}

mlc_value mlc_instantiate_child(mlc_lowerer *L, mlc_instance *parent, const char *name, const mlc_ast_expr *ctor) {
  mlc_instance *ch = lw_instantiate(L, join(L, parent->path, name), ctor);
  return ch ? (mlc_value){.kind = V_MODULE, .mod = ch} : mlc_verr();
}

mlc_instance *lw_instantiate(mlc_lowerer *L, const char *path, const mlc_ast_expr *ctor) {
  if (ctor->kind != AST_CALL) {
    mlc_error(L->d, ctor->loc, "expected a module constructor such as Linear(16, 16)");
    return NULL;
  }
  mlc_call c = {ctor->args, ctor->nargs, ctor->loc, ctor->name};
  const mlc_ast_module *mod = lw_find_module(L, ctor->name);
  const mlc_builtin *b = mod ? NULL : mlc_builtin_find(ctor->name);
  if (!mod && !b) {
    suggest s = {.want = ctor->name, .dist = 99};
    for (uint32_t i = 0; i < L->ast->nmodules; i++) lw_consider(&s, L->ast->modules[i].name);
    for (uint32_t i = 0; i < mlc_nbuiltins; i++) lw_consider(&s, mlc_builtins[i].name);
    if (s.best) {
      mlc_error(L->d, ctor->loc, "unknown module '%s'%s", ctor->name, lw_hint(L, &s));
    } else {
      const char *names = mlc_builtins[0].name;
      for (uint32_t i = 1; i < mlc_nbuiltins; i++) names = mlc_arena_printf(L->a, "%s, %s", names, mlc_builtins[i].name);
      mlc_error(L->d, ctor->loc, "unknown module '%s': it is not defined in this file, and the built-in modules are %s",
                ctor->name, names);
    }
    return NULL;
  }
  mlc_instance *m = new_instance(L, path, ctor->name, ctor->loc);
  if (!m) return NULL;
  if (b) {
    m->builtin = b;
    return b->make(L, m, &c) ? m : NULL;
  }
  for (uint32_t i = 0; i < L->nstack; i++)
    if (L->stack[i] == mod) {
      const char *cycle = mod->name; /* mutual recursion: say through which modules */
      for (uint32_t k = i + 1; k < L->nstack; k++) cycle = mlc_arena_printf(L->a, "%s -> %s", cycle, L->stack[k]->name);
      if (i + 1 < L->nstack)
        mlc_error(L->d, ctor->loc, "module %s contains itself (%s -> %s): recursive modules have no finite size",
                  mod->name, cycle, mod->name);
      else
        mlc_error(L->d, ctor->loc, "module %s contains itself: recursive modules have no finite size", mod->name);
      return NULL;
    }
  if (L->nstack >= MAX_CALL_DEPTH) {
    mlc_error(L->d, ctor->loc, "modules are nested more than %d deep", MAX_CALL_DEPTH);
    return NULL;
  }
  m->ast = mod;
  L->stack[L->nstack++] = mod;
  instantiate_user(L, m, mod, &c);
  L->nstack--;
  return m;
}

/* ---- forward ---- */

static bool check_type(mlc_lowerer *L, mlc_value v, const mlc_ast_param *prm, mlc_loc loc) {
  if (!prm->type || v.kind == V_ERR) return true;
  mlc_type want;
  if (!lw_eval_type(L, prm->type, &want)) return false;
  if (!mlc_want_tensor(L, v, loc, prm->name)) return false;
  if (!mlc_type_eq(mlc_value_type(L, v), &want)) {
    char a[96], b[96];
    mlc_error(L->d, loc, "argument '%s' is %s, but forward declares %s", prm->name,
              mlc_type_str(mlc_value_type(L, v), a, sizeof a), mlc_type_str(&want, b, sizeof b));
    mlc_note(L->d, prm->loc, "'%s' is declared here", prm->name);
    return false;
  }
  return true;
}

static bool run_stmts(mlc_lowerer *L, mlc_ast_stmt *const *body, uint32_t n, mlc_value *ret, bool *returned);

static mlc_value call_user(mlc_lowerer *L, mlc_instance *m, const mlc_value *args, uint32_t nargs, mlc_loc loc) {
  const mlc_ast_module *mod = m->ast;
  if (!mod->has_forward) {
    mlc_error(L->d, loc, "module %s has no forward", mod->name);
    return mlc_verr();
  }
  if (nargs != mod->nfparams) {
    mlc_error(L->d, loc, "%s.forward takes %u argument%s, got %u", mod->name, mod->nfparams,
              mod->nfparams == 1 ? "" : "s", nargs);
    mlc_note(L->d, mod->forward_loc, "%s.forward is declared here", mod->name);
    return mlc_verr();
  }
  mlc_scope locals = {0};
  mlc_instance *self = L->self;
  mlc_scope *outer = L->locals;
  L->self = m; /* declared types are in terms of the module's own arguments */
  L->locals = NULL;
  bool ok = true;
  for (uint32_t i = 0; i < nargs && ok; i++) {
    /* A decode entry gives the model's forward its own sequence length. */
    if (!(L->dec.on && m == L->dec.root)) ok = check_type(L, args[i], &mod->fparams[i], loc);
    lw_scope_set(L, &locals, mod->fparams[i].name, args[i]);
  }
  L->locals = &locals;
  mlc_value ret = mlc_verr();
  bool returned = !ok;
  if (ok) run_stmts(L, mod->body, mod->nbody, &ret, &returned);
  if (!returned && !L->too_big) mlc_error(L->d, mod->forward_loc, "forward of %s ends without a return", mod->name);
  L->self = self;
  L->locals = outer;
  return ret;
}

mlc_value mlc_call_module(mlc_lowerer *L, mlc_instance *m, const mlc_value *args, uint32_t nargs, mlc_loc loc) {
  if (++L->call_depth > MAX_CALL_DEPTH) {
    mlc_error(L->d, loc, "module calls are nested more than %d deep", MAX_CALL_DEPTH);
    L->call_depth--;
    return mlc_verr();
  }
  mlc_value r;
  if (m->is_list && !m->callable) {
    mlc_error(L->d, loc, "'%s' is a module list and cannot be called; iterate over it with 'for'", m->path);
    r = mlc_verr();
  } else if (m->is_list) { /* Sequential: each child's output feeds the next */
    if (nargs != 1) {
      mlc_error(L->d, loc, "Sequential takes 1 argument, got %u", nargs);
      r = mlc_verr();
    } else {
      r = args[0];
      for (uint32_t i = 0; i < m->nchildren && r.kind != V_ERR; i++) r = mlc_call_module(L, m->children[i], &r, 1, loc);
    }
  } else if (m->builtin) {
    const mlc_builtin *b = m->builtin;
    if ((int)nargs < b->min_args || (int)nargs > b->max_args) {
      if (b->min_args == b->max_args)
        mlc_error(L->d, loc, "%s takes %d argument%s, got %u", b->name, b->min_args, b->min_args == 1 ? "" : "s", nargs);
      else
        mlc_error(L->d, loc, "%s takes %d to %d arguments, got %u", b->name, b->min_args, b->max_args, nargs);
      r = mlc_verr();
    } else {
      bool ok = true;
      for (uint32_t i = 0; i < nargs; i++) ok &= mlc_want_tensor(L, args[i], loc, "a module's input");
      mlc_instance *self = L->self;
      L->self = m;
      r = ok ? b->forward(L, m, args, nargs, loc) : mlc_verr();
      L->self = self;
    }
  } else {
    r = call_user(L, m, args, nargs, loc);
  }
  L->call_depth--;
  return r;
}

/* return a: a tensor.  return a, b, ...: a tuple of tensors, each named
 * after its expression where that is a plain name (`return logits, loss`),
 * else output<i>. */
static mlc_value eval_return(mlc_lowerer *L, const mlc_ast_stmt *s) {
  mlc_value *v = mlc_arena_alloc(L->a, s->nvalues * sizeof *v);
  const char **names = mlc_arena_alloc(L->a, s->nvalues * sizeof *names);
  mlc_loc *locs = mlc_arena_alloc(L->a, s->nvalues * sizeof *locs);
  bool ok = true;
  for (uint32_t k = 0; k < s->nvalues; k++) {
    const mlc_ast_expr *e = s->values[k];
    v[k] = lw_eval(L, e);
    if (v[k].kind != V_TENSOR && v[k].kind != V_ERR) {
      mlc_error(L->d, e->loc, "forward must return %s, got %s", s->nvalues > 1 ? "tensors" : "a tensor", lw_kind_name(L, v[k]));
      v[k] = mlc_verr();
    }
    ok &= v[k].kind == V_TENSOR;
    names[k] = e->kind == AST_NAME ? e->name : mlc_arena_printf(L->a, "output%u", k);
    locs[k] = e->loc;
  }
  if (!ok) return mlc_verr();
  if (s->nvalues == 1) return v[0];
  mlc_tuple *t = mlc_arena_alloc(L->a, sizeof *t);
  *t = (mlc_tuple){.n = s->nvalues, .v = v, .names = names, .locs = locs};
  return (mlc_value){.kind = V_TUPLE, .tuple = t};
}

static bool run_stmts(mlc_lowerer *L, mlc_ast_stmt *const *body, uint32_t n, mlc_value *ret, bool *returned) {
  for (uint32_t i = 0; i < n && !L->too_big; i++) {
    const mlc_ast_stmt *s = body[i];
    if (++L->steps > L->max_steps) {
      mlc_error(L->d, s->loc, "evaluating the model takes more than %llu statements; is a loop nested too deeply?",
                (unsigned long long)L->max_steps);
      L->too_big = true;
      return false;
    }
    if (*returned) {
      mlc_error(L->d, s->loc, "this statement comes after return and would never run");
      return false;
    }
    switch (s->kind) {
    case ST_ASSIGN: {
      mlc_value v = lw_eval(L, s->value);
      if (v.kind == V_MODULE) {
        mlc_error(L->d, s->loc, "cannot assign a module to a name inside forward");
        v = mlc_verr();
      }
      if (s->nnames == 1) {
        lw_scope_set(L, L->locals, s->name, v);
        break;
      }
      /* a, b = m(x): as many names as the tuple has values */
      if (v.kind != V_TUPLE && v.kind != V_ERR) {
        mlc_error(L->d, s->value->loc, "%u names to unpack into, but this is %s, not several values", s->nnames,
                  lw_kind_name(L, v));
        v = mlc_verr();
      } else if (v.kind == V_TUPLE && v.tuple->n != s->nnames) {
        mlc_error(L->d, s->name_locs[0], "%u names to unpack into, but the value has %u (%s)", s->nnames, v.tuple->n,
                  lw_tuple_names(L, v.tuple));
        v = mlc_verr();
      }
      for (uint32_t k = 0; k < s->nnames; k++) {
        for (uint32_t j = 0; j < k; j++)
          if (!strcmp(s->names[j], s->names[k])) mlc_error(L->d, s->name_locs[k], "'%s' is unpacked into twice", s->names[k]);
        lw_scope_set(L, L->locals, s->names[k], v.kind == V_TUPLE ? v.tuple->v[k] : v);
      }
      break;
    }
    case ST_RETURN:
      *ret = eval_return(L, s);
      *returned = true;
      break;
    case ST_FOR: {
      mlc_value it = lookup(L, s->iter, s->iter_loc);
      if (it.kind == V_ERR) break;
      if (it.kind != V_MODULE || !it.mod->is_list) {
        mlc_error(L->d, s->iter_loc, "'for' needs a module list (made with repeat or Sequential), but '%s' is %s",
                  s->iter, lw_kind_name(L, it));
        break;
      }
      for (uint32_t k = 0; k < it.mod->nchildren && !L->too_big; k++) {
        lw_scope_set(L, L->locals, s->name, (mlc_value){.kind = V_MODULE, .mod = it.mod->children[k]});
        run_stmts(L, s->body, s->nbody, ret, returned);
        if (*returned) {
          mlc_error(L->d, s->loc, "return inside a for loop is not supported");
          return false;
        }
      }
      break;
    }
    }
  }
  return true;
}
