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

#include "frontend/lower.h"

#define MAX_INSTANCES 100000
#define MAX_NODES (1u << 20)
#define MAX_STEPS 10000000 /* statements evaluated: bounds nested for loops that build nothing */
#define MAX_REPEAT 100000
#define MAX_CALL_DEPTH 64

struct mlc_lowerer {
  mlc_program *p;
  mlc_diag *d;
  mlc_arena *a;
  mlc_scope config;
  mlc_func *f;                 /* function being built, or NULL while instantiating */
  uint32_t *param_node;        /* per param: its PARAM node in f, or UINT32_MAX */
  mlc_instance *self;          /* module whose members and arguments are visible */
  mlc_scope *locals;           /* forward locals, or NULL */
  const mlc_ast_file *ast;
  const mlc_ast_module *stack[MAX_CALL_DEPTH]; /* modules being instantiated, for recursion */
  uint32_t nstack;
  uint32_t ninstances;
  uint32_t call_depth;
  uint64_t steps, max_steps;
  int64_t accum_flag; /* --accum, 0 if not given */
  struct {              /* a decode block's entries (lower_decode) */
    bool on;            /* lowering prefill or step: attention goes over the KV caches */
    uint32_t pos;       /* the entry's pos input */
    int64_t max_ctx;
    mlc_instance *root; /* the model, whose forward's declared input the entry replaces */
    uint32_t used;      /* attentions lowered so far in this entry */
    uint32_t *cache;    /* per attention, in call order: its k cache (its v cache is the next parameter) */
    uint32_t ncache, cap;
  } dec;
  bool too_big;                /* a size limit was hit and reported: stop */
  uint32_t ndropout;           /* dropouts lowered into the train entry: the next one's RNG stream */
  const mlc_lower_io *io;      /* may be NULL */
  mlc_onnx_weight *w;          /* onnx(...) modules' initial values */
  uint32_t nw, wcap;
};

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

uint32_t mlc_lower_config_ints(mlc_lowerer *L, mlc_define **out) {
  *out = mlc_arena_alloc(L->a, (L->config.n + 1) * sizeof **out);
  uint32_t n = 0;
  for (uint32_t i = 0; i < L->config.n; i++) {
    const mlc_binding *b = &L->config.v[i];
    if (b->v.kind == V_NUM && b->v.is_int) (*out)[n++] = (mlc_define){b->name, mlc_arena_printf(L->a, "%lld", (long long)b->v.i)};
  }
  return n;
}

static mlc_value vnum_i(int64_t i) { return (mlc_value){.kind = V_NUM, .is_int = true, .i = i, .f = (double)i}; }
static mlc_value vnum_f(double f) { return (mlc_value){.kind = V_NUM, .f = f}; }
static mlc_value vtensor(uint32_t n) { return (mlc_value){.kind = V_TENSOR, .node = n}; }

/* "logits, loss": a tuple's names, for messages. */
static const char *tuple_names(mlc_lowerer *L, const mlc_tuple *t) {
  const char *s = t->names[0];
  for (uint32_t i = 1; i < t->n; i++) s = mlc_arena_printf(L->a, "%s, %s", s, t->names[i]);
  return s;
}

static const char *kind_name(mlc_lowerer *L, mlc_value v) {
  switch (v.kind) {
  case V_NUM: return v.is_int ? "an integer" : "a number";
  case V_BOOL: return "a bool";
  case V_DTYPE: return "a dtype";
  case V_TENSOR: return mlc_arena_printf(L->a, "a tensor %s", mlc_type_str(mlc_value_type(L, v), (char[96]){0}, 96));
  case V_MODULE: return v.mod->is_list && !v.mod->callable ? "a module list" : "a module";
  case V_NONE: return "none";
  case V_PARAM: return "a parameter";
  case V_STR: return mlc_arena_printf(L->a, "the string \"%s\"", v.str);
  case V_TUPLE: return mlc_arena_printf(L->a, "%u values (%s)", v.tuple->n, tuple_names(L, v.tuple));
  default: return "an error";
  }
}

/* ---- scopes ---- */

static void scope_set(mlc_lowerer *L, mlc_scope *s, const char *name, mlc_value v) {
  for (uint32_t i = s->n; i-- > 0;)
    if (!strcmp(s->v[i].name, name)) { s->v[i].v = v; return; }
  if (s->n == s->cap) {
    uint32_t cap = s->cap ? s->cap * 2 : 8;
    s->v = mlc_arena_grow(L->a, s->v, s->n * sizeof *s->v, cap * sizeof *s->v);
    s->cap = cap;
  }
  s->v[s->n++] = (mlc_binding){name, v};
}

static mlc_value *scope_get(mlc_scope *s, const char *name) {
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

typedef struct {
  const char *want, *best;
  unsigned dist;
} suggest;

static void consider(suggest *s, const char *cand) {
  unsigned d = edit_distance(s->want, cand);
  size_t len = strlen(s->want);
  if (d < s->dist && d <= (len < 4 ? 1 : len / 3)) { s->dist = d; s->best = cand; }
}

static void consider_scope(suggest *s, const mlc_scope *sc) {
  if (sc)
    for (uint32_t i = 0; i < sc->n; i++) consider(s, sc->v[i].name);
}

static const char *hint(mlc_lowerer *L, suggest *s) {
  return s->best ? mlc_arena_printf(L->a, "; did you mean '%s'?", s->best) : "";
}

/* ---- values and nodes ---- */

const mlc_type *mlc_value_type(mlc_lowerer *L, mlc_value v) { return &L->f->nodes[v.node].type; }

bool mlc_want_tensor(mlc_lowerer *L, mlc_value v, mlc_loc loc, const char *what) {
  if (v.kind == V_TENSOR) return true;
  if (v.kind != V_ERR) mlc_error(L->d, loc, "%s must be a tensor, got %s", what, kind_name(L, v));
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

static mlc_value mk_const(mlc_lowerer *L, double v, uint8_t dtype, mlc_loc loc) {
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
  scope_set(L, &m->members, name, (mlc_value){.kind = V_PARAM, .i = id});
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
static mlc_value as_tensor_like(mlc_lowerer *L, mlc_value num, mlc_value t, mlc_loc loc) {
  uint8_t dt = mlc_value_type(L, t)->dtype;
  if (!mlc_dtype_is_float(dt) && !num.is_int) {
    mlc_error(L->d, loc, "cannot combine %s with the non-integer number %g; cast the tensor first",
              kind_name(L, t), num.f);
    return mlc_verr();
  }
  return mk_const(L, num.f, dt, loc);
}

/* x ** p and pow(x, p): the exponent is a number known at compile time. */
static mlc_value power(mlc_lowerer *L, mlc_value x, mlc_value p, mlc_loc loc, mlc_loc ploc) {
  if (x.kind == V_ERR || p.kind == V_ERR) return mlc_verr();
  if (x.kind != V_TENSOR) {
    mlc_error(L->d, loc, "the base of a power must be a tensor here, got %s", kind_name(L, x));
    return mlc_verr();
  }
  if (p.kind != V_NUM) {
    mlc_error(L->d, ploc, "the exponent must be a number known at compile time, got %s (a tensor exponent is not supported)",
              kind_name(L, p));
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
    mlc_error(L->d, loc, "'%s' cannot take %s and %s", mlc_ast_op_name(op), kind_name(L, a), kind_name(L, b));
    return mlc_verr();
  }
  if (op == '@' && (a.kind != V_TENSOR || b.kind != V_TENSOR)) {
    mlc_error(L->d, loc, "'@' needs two tensors, got %s and %s", kind_name(L, a), kind_name(L, b));
    return mlc_verr();
  }
  if (op == '^') return power(L, a, b, loc, loc);
  if (a.kind == V_NUM) a = as_tensor_like(L, a, b, loc);
  if (b.kind == V_NUM) b = as_tensor_like(L, b, a, loc);
  /* a > b is b < a, and a >= b is b <= a: the IR has lt and le only. */
  bool swap = op == '>' || op == 'g';
  mlc_value in[2] = {swap ? b : a, swap ? a : b};
  return mlc_emit(L, binop(op), in, 2, NULL, NULL, loc);
}

/* ---- expressions ---- */

static mlc_value eval(mlc_lowerer *L, const mlc_ast_expr *e);
static mlc_value eval_index(mlc_lowerer *L, const mlc_ast_expr *e);
static mlc_value call(mlc_lowerer *L, const mlc_ast_expr *e);

static mlc_value lookup(mlc_lowerer *L, const char *name, mlc_loc loc) {
  mlc_value *v;
  if ((v = scope_get(L->locals, name))) return *v;
  if (L->self) {
    if ((v = scope_get(&L->self->members, name))) {
      if (v->kind == V_PARAM) {
        if (!L->f) {
          mlc_error(L->d, loc, "parameter '%s' can only be used inside forward", name);
          return mlc_verr();
        }
        return mlc_param_value(L, (uint32_t)v->i, loc);
      }
      return *v;
    }
    if ((v = scope_get(&L->self->args, name))) return *v;
  }
  if ((v = scope_get(&L->config, name))) return *v;
  uint8_t dt = mlc_dtype_from_name(name, strlen(name));
  if (dt) return (mlc_value){.kind = V_DTYPE, .i = dt};
  if (!strcmp(name, "none")) return (mlc_value){.kind = V_NONE};
  suggest s = {.want = name, .dist = 99};
  consider_scope(&s, L->locals);
  if (L->self) { consider_scope(&s, &L->self->members); consider_scope(&s, &L->self->args); }
  consider_scope(&s, &L->config);
  mlc_error(L->d, loc, "unknown name '%s'%s", name, hint(L, &s));
  return mlc_verr();
}

static mlc_value eval(mlc_lowerer *L, const mlc_ast_expr *e) {
  if (!e) return mlc_verr();
  switch (e->kind) {
  case AST_INT: return vnum_i(e->ival);
  case AST_FLOAT: return vnum_f(e->fval);
  case AST_BOOL: return (mlc_value){.kind = V_BOOL, .i = e->ival};
  case AST_NAME: return lookup(L, e->name, e->loc);
  case AST_NEG: {
    mlc_value v = eval(L, e->lhs);
    if (v.kind == V_NUM) return v.is_int ? (v.i == INT64_MIN ? (mlc_error(L->d, e->loc, "integer overflow in '-'"), mlc_verr()) : vnum_i(-v.i)) : vnum_f(-v.f);
    if (v.kind == V_TENSOR) return mlc_emit(L, MLC_OP_NEG, &v, 1, NULL, NULL, e->loc);
    if (v.kind != V_ERR) mlc_error(L->d, e->loc, "cannot negate %s", kind_name(L, v));
    return mlc_verr();
  }
  case AST_BINARY: {
    mlc_value a = eval(L, e->lhs), b = eval(L, e->rhs);
    return binary(L, e->op, a, b, e->loc);
  }
  case AST_CALL: return call(L, e);
  case AST_STRING: return (mlc_value){.kind = V_STR, .str = e->name};
  case AST_LIST: mlc_error(L->d, e->loc, "a list is only allowed as an argument of reshape, permute, expand, concat or betas"); return mlc_verr();
  case AST_INDEX: return L->f ? eval_index(L, e) : (mlc_error(L->d, e->loc, "indexing is only allowed inside forward"), mlc_verr());
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
          consider(&s, nm[n - 1] == '=' ? mlc_arena_strndup(L->a, nm, n - 1) : nm);
        }
        mlc_error(L->d, arg->loc, "%s has no argument named '%s'%s", c->callee, arg->name, hint(L, &s));
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
    out[slot] = eval(L, arg->value);
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
    else mlc_error(L->d, loc, "%s must be an integer, got %s", what, kind_name(L, v));
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
    mlc_error(L->d, loc, "%s must be a number, got %s", what, kind_name(L, v));
    return false;
  }
  *out = v.f;
  return true;
}

bool mlc_want_bool(mlc_lowerer *L, mlc_value v, mlc_loc loc, const char *what, bool *out) {
  if (v.kind == V_ERR) return false;
  if (v.kind != V_BOOL) {
    mlc_error(L->d, loc, "%s must be true or false, got %s", what, kind_name(L, v));
    return false;
  }
  *out = v.i != 0;
  return true;
}

bool mlc_want_dtype(mlc_lowerer *L, mlc_value v, mlc_loc loc, const char *what, uint8_t *out) {
  if (v.kind == V_ERR) return false;
  if (v.kind != V_DTYPE) {
    mlc_error(L->d, loc, "%s must be a dtype (f32, bf16, f16, i32, i64, bool), got %s", what, kind_name(L, v));
    return false;
  }
  *out = (uint8_t)v.i;
  return true;
}

static bool eval_type(mlc_lowerer *L, const mlc_ast_type *ty, mlc_type *out) {
  memset(out, 0, sizeof *out);
  out->dtype = ty->dtype;
  out->rank = (uint8_t)ty->rank;
  bool ok = true;
  int64_t numel = 1;
  for (uint32_t i = 0; i < ty->rank; i++) {
    mlc_value v = eval(L, ty->dims[i]);
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

static const mlc_ast_module *find_module(mlc_lowerer *L, const char *name) {
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

static mlc_instance *instantiate(mlc_lowerer *L, const char *path, const mlc_ast_expr *ctor);
static void tie(mlc_lowerer *L, mlc_instance *m, const mlc_ast_member *mem);

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
    mlc_value v = present[i] ? vals[i] : eval(L, mod->params[i].def);
    if (v.kind == V_TENSOR) {
      mlc_error(L->d, present[i] ? mlc_arg_loc(c, spec, mod->nparams, i) : mod->params[i].loc,
                "module arguments must be compile-time values, not tensors");
      v = mlc_verr();
    }
    scope_set(L, &m->args, mod->params[i].name, v);
  }
  for (uint32_t pass = 0; pass < 2; pass++) {
    for (uint32_t i = 0; i < mod->nmembers && !L->too_big; i++) {
      const mlc_ast_member *mem = &mod->members[i];
      if ((mem->kind == MEM_PARAM) != (pass == 0)) continue;
      if (mem->kind == MEM_TIE) {
        tie(L, m, mem);
        continue;
      }
      if (scope_get(&m->members, mem->name)) {
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
        if (!eval_type(L, mem->type, &t)) continue;
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
        if (!mlc_want_int(L, eval(L, mem->repeat), mem->repeat->loc, "the repeat count", 0, MAX_REPEAT, &n)) continue;
        mlc_instance *list = new_instance(L, cpath, "ModuleList", mem->loc);
        if (!list) break;
        list->is_list = true;
        list->children = mlc_arena_alloc(L->a, (size_t)(n + 1) * sizeof *list->children);
        for (int64_t k = 0; k < n && !L->too_big; k++) {
          mlc_instance *ch = instantiate(L, mlc_arena_printf(L->a, "%s.%lld", cpath, (long long)k), mem->ctor);
          if (!ch) break;
          list->children[list->nchildren++] = ch;
        }
        scope_set(L, &m->members, mem->name, (mlc_value){.kind = V_MODULE, .mod = list});
      } else {
        mlc_instance *ch = instantiate(L, cpath, mem->ctor);
        scope_set(L, &m->members, mem->name, ch ? (mlc_value){.kind = V_MODULE, .mod = ch} : mlc_verr());
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
    } else if ((pv = scope_get(&m->members, nm))) {
      v = *pv;
    } else {
      suggest s = {.want = nm, .dist = 99};
      consider_scope(&s, &m->members);
      mlc_error(L->d, pth->loc[i], "%s has no member '%s'%s", where, nm, hint(L, &s));
      return UINT32_MAX;
    }
    sofar = sofar[0] ? mlc_arena_printf(L->a, "%s.%s", sofar, nm) : nm;
    if (v.kind == V_ERR) return UINT32_MAX;
    if (i + 1 == pth->n) {
      if (v.kind == V_PARAM) return (uint32_t)v.i;
      mlc_error(L->d, pth->loc[i], "the %s of a weight tie must be a parameter, such as %s.weight; '%s' is %s", side,
                sofar, sofar, kind_name(L, v));
      return UINT32_MAX;
    }
    if (v.kind != V_MODULE) {
      mlc_error(L->d, pth->loc[i], "'%s' is %s, so it has no member '%s'", sofar, kind_name(L, v), pth->name[i + 1]);
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
static void tie(mlc_lowerer *L, mlc_instance *m, const mlc_ast_member *mem) {
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
static const uint32_t *fold_ties(mlc_program *p) {
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
  mlc_instance *ch = instantiate(L, join(L, parent->path, name), ctor);
  return ch ? (mlc_value){.kind = V_MODULE, .mod = ch} : mlc_verr();
}

static mlc_instance *instantiate(mlc_lowerer *L, const char *path, const mlc_ast_expr *ctor) {
  if (ctor->kind != AST_CALL) {
    mlc_error(L->d, ctor->loc, "expected a module constructor such as Linear(16, 16)");
    return NULL;
  }
  mlc_call c = {ctor->args, ctor->nargs, ctor->loc, ctor->name};
  const mlc_ast_module *mod = find_module(L, ctor->name);
  const mlc_builtin *b = mod ? NULL : mlc_builtin_find(ctor->name);
  if (!mod && !b) {
    suggest s = {.want = ctor->name, .dist = 99};
    for (uint32_t i = 0; i < L->ast->nmodules; i++) consider(&s, L->ast->modules[i].name);
    for (uint32_t i = 0; i < mlc_nbuiltins; i++) consider(&s, mlc_builtins[i].name);
    if (s.best) {
      mlc_error(L->d, ctor->loc, "unknown module '%s'%s", ctor->name, hint(L, &s));
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
  if (!eval_type(L, prm->type, &want)) return false;
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
    scope_set(L, &locals, mod->fparams[i].name, args[i]);
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
    v[k] = eval(L, e);
    if (v[k].kind != V_TENSOR && v[k].kind != V_ERR) {
      mlc_error(L->d, e->loc, "forward must return %s, got %s", s->nvalues > 1 ? "tensors" : "a tensor", kind_name(L, v[k]));
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
      mlc_value v = eval(L, s->value);
      if (v.kind == V_MODULE) {
        mlc_error(L->d, s->loc, "cannot assign a module to a name inside forward");
        v = mlc_verr();
      }
      if (s->nnames == 1) {
        scope_set(L, L->locals, s->name, v);
        break;
      }
      /* a, b = m(x): as many names as the tuple has values */
      if (v.kind != V_TUPLE && v.kind != V_ERR) {
        mlc_error(L->d, s->value->loc, "%u names to unpack into, but this is %s, not several values", s->nnames,
                  kind_name(L, v));
        v = mlc_verr();
      } else if (v.kind == V_TUPLE && v.tuple->n != s->nnames) {
        mlc_error(L->d, s->name_locs[0], "%u names to unpack into, but the value has %u (%s)", s->nnames, v.tuple->n,
                  tuple_names(L, v.tuple));
        v = mlc_verr();
      }
      for (uint32_t k = 0; k < s->nnames; k++) {
        for (uint32_t j = 0; j < k; j++)
          if (!strcmp(s->names[j], s->names[k])) mlc_error(L->d, s->name_locs[k], "'%s' is unpacked into twice", s->names[k]);
        scope_set(L, L->locals, s->names[k], v.kind == V_TUPLE ? v.tuple->v[k] : v);
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
                  s->iter, kind_name(L, it));
        break;
      }
      for (uint32_t k = 0; k < it.mod->nchildren && !L->too_big; k++) {
        scope_set(L, L->locals, s->name, (mlc_value){.kind = V_MODULE, .mod = it.mod->children[k]});
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
  mlc_value x = eval(L, e->args[0].value);
  if (!mlc_want_tensor(L, x, e->args[0].loc, "the input of reshape")) return mlc_verr();
  const mlc_ast_expr *lst = e->args[1].value;
  if (lst->nargs > MLC_MAX_RANK) {
    mlc_error(L->d, lst->loc, "reshape to %u dimensions; mlc supports at most %d", lst->nargs, MLC_MAX_RANK);
    return mlc_verr();
  }
  int64_t dims[MLC_MAX_RANK], known = 1;
  int infer = -1;
  for (uint32_t i = 0; i < lst->nargs; i++) {
    if (!mlc_want_int(L, eval(L, lst->args[i].value), lst->args[i].loc, "a dimension", -1, MLC_MAX_NUMEL, &dims[i]))
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
static mlc_value eval_index(mlc_lowerer *L, const mlc_ast_expr *e) {
  mlc_value x = eval(L, e->lhs);
  if (x.kind == V_TUPLE) { /* m(x)[1]: one of several returned values */
    const mlc_tuple *t = x.tuple;
    int64_t i;
    if (e->nargs != 1 || e->args[0].value->kind == AST_SLICE) {
      mlc_error(L->d, e->loc, "%s are indexed by one integer, as a Python tuple", kind_name(L, x));
      return mlc_verr();
    }
    if (!mlc_want_int(L, eval(L, e->args[0].value), e->args[0].loc, "an index", -(int64_t)t->n, t->n - 1, &i))
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
      if (!mlc_want_int(L, eval(L, it), e->args[k].loc, "an index", -n, n - 1, &i)) return mlc_verr();
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
      if (!mlc_want_int(L, eval(L, it->args[j].value), it->args[j].loc, what[j], j == 2 ? 1 : INT64_MIN / 2,
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
    if (!mlc_want_int(L, eval(L, lst->args[i].value), lst->args[i].loc, "a dimension", lo, MLC_MAX_NUMEL, &v[i]))
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
  mlc_value x = eval(L, e->args[0].value);
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
  mlc_value x = eval(L, e->args[0].value);
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
    v[i] = eval(L, lst->args[i].value);
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
    axis = eval(L, e->args[1].value);
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
      mlc_error(L->d, argloc(e, spec, 2, 1), "approximate must be \"none\" or \"tanh\", got %s", kind_name(L, v[1]));
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
  return power(L, v[0], v[1], e->loc, argloc(e, spec, 2, 1));
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
    mlc_error(L->d, xloc, "dropout needs a floating-point tensor, got %s", kind_name(L, x));
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
              v[3 - k].kind == V_TENSOR ? " or a number" : "", kind_name(L, v[k]));
    return mlc_verr();
  }
  if (v[1].kind == V_NUM) v[1] = as_tensor_like(L, v[1], v[2], argloc(e, spec, 3, 1));
  if (v[2].kind == V_NUM) v[2] = as_tensor_like(L, v[2], v[1], argloc(e, spec, 3, 2));
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

static const struct {
  const char *name;
  prim_fn fn;
  mlc_op op;
} prims[] = {
  {"exp", prim_unary, MLC_OP_EXP},         {"log", prim_unary, MLC_OP_LOG},
  {"sqrt", prim_unary, MLC_OP_SQRT},       {"rsqrt", prim_unary, MLC_OP_RSQRT},
  {"tanh", prim_unary, MLC_OP_TANH},       {"sigmoid", prim_unary, MLC_OP_SIGMOID},
  {"relu", prim_unary, MLC_OP_RELU},       {"silu", prim_unary, MLC_OP_SILU},
  {"gelu", prim_gelu, MLC_OP_GELU},        {"softmax", prim_reduce, MLC_OP_SOFTMAX},
  {"sum", prim_reduce, MLC_OP_SUM},        {"mean", prim_reduce, MLC_OP_MEAN},
  {"max", prim_reduce, MLC_OP_MAX},        {"reshape", prim_reshape, MLC_OP_RESHAPE},
  {"transpose", prim_transpose, MLC_OP_TRANSPOSE}, {"slice", prim_slice, MLC_OP_SLICE},
  {"concat", prim_concat, MLC_OP_CONCAT},  {"cast", prim_cast, MLC_OP_CAST},
  {"matmul", prim_binary, MLC_OP_MATMUL},  {"cross_entropy", prim_binary, MLC_OP_CROSS_ENTROPY},
  {"attention", prim_attention, MLC_OP_ATTENTION},
  {"abs", prim_unary, MLC_OP_ABS},         {"erf", prim_unary, MLC_OP_ERF},
  {"pow", prim_pow, MLC_OP_POW},           {"clamp", prim_clamp, MLC_OP_CLAMP_MIN},
  {"dropout", prim_dropout, MLC_OP_DROPOUT},
  {"where", prim_where, MLC_OP_WHERE},     {"arange", prim_arange, MLC_OP_ARANGE},
  {"permute", prim_permute, MLC_OP_TRANSPOSE}, {"unsqueeze", prim_unsqueeze, MLC_OP_RESHAPE},
  {"squeeze", prim_squeeze, MLC_OP_RESHAPE}, {"expand", prim_expand, MLC_OP_BROADCAST},
  {"gather", prim_gather, MLC_OP_GATHER},  {"min", prim_reduce, MLC_OP_MIN},
  {"argmax", prim_argreduce, MLC_OP_ARGMAX}, {"argmin", prim_argreduce, MLC_OP_ARGMIN},
};

static mlc_value call(mlc_lowerer *L, const mlc_ast_expr *e) {
  if (!L->f) {
    mlc_error(L->d, e->loc, "'%s(...)' is not a compile-time value; only numbers, bools and dtypes are allowed here", e->name);
    return mlc_verr();
  }
  /* A name bound to a module instance calls its forward. */
  mlc_value *v = scope_get(L->locals, e->name);
  if (!v && L->self) v = scope_get(&L->self->members, e->name);
  if (v && v->kind == V_MODULE) {
    mlc_value args[64];
    if (e->nargs > 64) { mlc_error(L->d, e->loc, "too many arguments"); return mlc_verr(); }
    bool ok = true;
    for (uint32_t i = 0; i < e->nargs; i++) {
      if (e->args[i].name) {
        mlc_error(L->d, e->args[i].loc, "module calls take positional arguments only");
        ok = false;
      }
      args[i] = eval(L, e->args[i].value);
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
  if (find_module(L, e->name) || mlc_builtin_find(e->name)) {
    mlc_error(L->d, e->loc, "module %s must be created as a member of the module (name = %s(...)), not inside forward",
              e->name, e->name);
    return mlc_verr();
  }
  suggest s = {.want = e->name, .dist = 99};
  for (size_t i = 0; i < sizeof prims / sizeof *prims; i++) consider(&s, prims[i].name);
  if (L->self) consider_scope(&s, &L->self->members);
  consider_scope(&s, L->locals);
  mlc_error(L->d, e->loc, "unknown function '%s'%s", e->name, hint(L, &s));
  return mlc_verr();
}

/* ---- config, entry points, train block ---- */

static mlc_value parse_define(mlc_lowerer *L, const mlc_define *def) {
  const char *s = def->value;
  char *end;
  if (!strcmp(s, "true") || !strcmp(s, "false")) return (mlc_value){.kind = V_BOOL, .i = !strcmp(s, "true")};
  uint8_t dt = mlc_dtype_from_name(s, strlen(s));
  if (dt) return (mlc_value){.kind = V_DTYPE, .i = dt};
  errno = 0;
  long long i = strtoll(s, &end, 10);
  if (*s && !*end && errno == 0) return vnum_i(i);
  if (*s && !*end) {
    mlc_error(L->d, (mlc_loc){0}, "-D %s=%s: the integer is too large (the limit is 2^63-1)", def->name, s);
    return mlc_verr();
  }
  errno = 0;
  double f = strtod(s, &end);
  if (*s && !*end && errno == 0 && isfinite(f)) return vnum_f(f);
  mlc_error(L->d, (mlc_loc){0}, "-D %s=%s: '%s' is not a number, true/false or a dtype", def->name, s, s);
  return mlc_verr();
}

static void eval_config(mlc_lowerer *L, const mlc_lower_options *opt) {
  const mlc_ast_file *f = L->ast;
  bool *used = mlc_arena_alloc(L->a, (opt->ndefines + 1) * sizeof *used);
  for (uint32_t i = 0; i < f->nconfig; i++) {
    const mlc_ast_config *c = &f->config[i];
    if (scope_get(&L->config, c->name)) {
      mlc_error(L->d, c->loc, "config value '%s' is defined twice", c->name);
      for (uint32_t k = 0; k < i; k++)
        if (!strcmp(f->config[k].name, c->name)) { mlc_note(L->d, f->config[k].loc, "the first '%s' is here", c->name); break; }
      continue;
    }
    mlc_value v = eval(L, c->value);
    for (uint32_t k = 0; k < opt->ndefines; k++)
      if (!strcmp(opt->defines[k].name, c->name)) {
        v = parse_define(L, &opt->defines[k]);
        used[k] = true;
      }
    if (v.kind == V_TENSOR || v.kind == V_MODULE) {
      mlc_error(L->d, c->value->loc, "a config value must be a number, a bool or a dtype");
      v = mlc_verr();
    }
    scope_set(L, &L->config, c->name, v);
  }
  for (uint32_t k = 0; k < opt->ndefines; k++) {
    if (used[k]) continue;
    suggest s = {.want = opt->defines[k].name, .dist = 99};
    consider_scope(&s, &L->config);
    mlc_error(L->d, (mlc_loc){0}, "-D %s: the model has no config value named '%s'%s", opt->defines[k].name,
              opt->defines[k].name, hint(L, &s));
  }
}

/* The model's constructor call: explicit arguments from the train block, or
 * each constructor parameter taken from the config value of the same name. */
static mlc_instance *instantiate_root(mlc_lowerer *L, const mlc_ast_module *mod, const mlc_ast_train *t, mlc_loc loc) {
  mlc_ast_expr *ctor = mlc_arena_alloc(L->a, sizeof *ctor);
  ctor->kind = AST_CALL;
  ctor->loc = loc;
  ctor->name = mod->name;
  if (t && t->has_args) {
    ctor->args = t->args;
    ctor->nargs = t->nargs;
  } else {
    ctor->args = mlc_arena_alloc(L->a, (mod->nparams + 1) * sizeof *ctor->args);
    bool ok = true;
    for (uint32_t i = 0; i < mod->nparams; i++) {
      if (!scope_get(&L->config, mod->params[i].name)) {
        if (!mod->params[i].def) {
          mlc_error(L->d, mod->params[i].loc, "model parameter '%s' has no value: add it to config, give it a default, "
                    "or pass it in the train block", mod->params[i].name);
          ok = false;
        }
        continue;
      }
      mlc_ast_expr *name = mlc_arena_alloc(L->a, sizeof *name);
      *name = (mlc_ast_expr){.kind = AST_NAME, .loc = mod->params[i].loc, .name = mod->params[i].name};
      ctor->args[ctor->nargs++] = (mlc_ast_arg){.name = mod->params[i].name, .loc = mod->params[i].loc, .value = name};
    }
    if (!ok) return NULL;
  }
  return instantiate(L, "", ctor);
}

static void begin_func(mlc_lowerer *L, const char *name) {
  L->f = mlc_program_add_func(L->p, name);
  L->param_node = mlc_arena_alloc(L->a, (L->p->nparams + 1) * sizeof *L->param_node);
  for (uint32_t i = 0; i < L->p->nparams; i++) L->param_node[i] = UINT32_MAX;
}

/* An entry's inputs and outputs are parameters of the generated C
 * functions (<name>_forward(m, x, ..., logits, loss)), which take the model
 * as `m` and keep a status in `st`: those names, and C's keywords, cannot
 * name them. */
static bool c_param_name_ok(mlc_lowerer *L, const char *name, mlc_loc loc, const char *what) {
  static const char *const c_words[] = {
    "m", "st", "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else", "enum",
    "extern", "float", "for", "goto", "if", "inline", "int", "long", "register", "restrict", "return", "short",
    "signed", "sizeof", "static", "struct", "switch", "typedef", "union", "unsigned", "void", "volatile", "while"};
  for (size_t i = 0; i < sizeof c_words / sizeof *c_words; i++)
    if (!strcmp(name, c_words[i])) {
      mlc_error(L->d, loc, "%s '%s' would be a parameter of the generated C API, where %s; give it another name", what,
                name, i < 2 ? "'m' is the model and 'st' a status" : "it is a C keyword");
      return false;
    }
  return true;
}

static mlc_value add_input(mlc_lowerer *L, const mlc_ast_param *prm) {
  mlc_type t;
  if (!c_param_name_ok(L, prm->name, prm->loc, "input")) return mlc_verr();
  if (!eval_type(L, prm->type, &t)) return mlc_verr();
  for (uint32_t i = 0; i < L->f->inputs.n; i++)
    if (!strcmp(L->f->nodes[L->f->inputs.v[i]].a.name, prm->name)) {
      mlc_error(L->d, prm->loc, "input '%s' is declared twice", prm->name);
      return mlc_verr();
    }
  mlc_attrs a = {.name = prm->name};
  mlc_value v = mlc_emit(L, MLC_OP_INPUT, NULL, 0, &a, &t, prm->loc);
  if (v.kind == V_TENSOR) mlc_u32vec_push(L->a, &L->f->inputs, v.node);
  return v;
}

static void lower_forward(mlc_lowerer *L, mlc_instance *root) {
  const mlc_ast_module *mod = root->ast;
  if (!mod->has_forward) {
    mlc_error(L->d, mod->loc, "module %s has no forward", mod->name);
    return;
  }
  begin_func(L, "forward");
  mlc_value args[64];
  if (mod->nfparams > 64) { mlc_error(L->d, mod->forward_loc, "forward has more than 64 inputs"); return; }
  bool ok = true;
  for (uint32_t i = 0; i < mod->nfparams; i++) {
    const mlc_ast_param *prm = &mod->fparams[i];
    if (!prm->type) {
      mlc_error(L->d, prm->loc, "input '%s' of the model's forward needs a type, such as %s: f32[batch, 64]", prm->name,
                prm->name);
      ok = false;
      continue;
    }
    L->self = root; /* dims may use the model's arguments */
    args[i] = add_input(L, prm);
    L->self = NULL;
    ok &= args[i].kind == V_TENSOR;
  }
  if (!ok) return;
  mlc_value out = mlc_call_module(L, root, args, mod->nfparams, mod->forward_loc);
  if (out.kind == V_TENSOR) mlc_func_add_output(L->p, L->f, "output", out.node);
  if (out.kind != V_TUPLE) return;
  /* Several outputs: their names are the C API's parameters beside the
   * inputs', so they must differ from one another and from the inputs. */
  const mlc_tuple *t = out.tuple;
  for (uint32_t k = 0; k < t->n; k++) {
    bool clash = false;
    for (uint32_t j = 0; j < k && !clash; j++)
      if (!strcmp(t->names[j], t->names[k])) {
        mlc_error(L->d, t->locs[k], "the forward's outputs are named after what it returns, and '%s' is returned twice; "
                  "give the second a name of its own", t->names[k]);
        clash = true;
      }
    for (uint32_t i = 0; i < mod->nfparams && !clash; i++)
      if (!strcmp(mod->fparams[i].name, t->names[k])) {
        mlc_error(L->d, t->locs[k], "output '%s' would have the name of the forward's input '%s'; give it a name of its own",
                  t->names[k], t->names[k]);
        clash = true;
      }
    if (!clash && c_param_name_ok(L, t->names[k], t->locs[k], "output")) mlc_func_add_output(L->p, L->f, t->names[k], t->v[k].node);
  }
}

/* The schedule's arguments of either optimizer, spec[first..first+3):
 * warmup=, min_lr=, steps= (decay= names a curve, a word: taken out before
 * binding, as betas= is). */
static void lower_schedule(mlc_lowerer *L, const mlc_call *c, const char *const *spec, int nspec, int first,
                           const mlc_value *v, const bool *pr) {
  mlc_train_config *tc = &L->p->train;
  if (pr[first]) mlc_want_int(L, v[first], mlc_arg_loc(c, spec, nspec, first), "warmup (steps)", 0, (int64_t)1 << 40, &tc->warmup);
  if (pr[first + 1]) {
    mlc_loc at = mlc_arg_loc(c, spec, nspec, first + 1);
    if (mlc_want_float(L, v[first + 1], at, "min_lr", &tc->min_lr) && !(tc->min_lr >= 0 && tc->min_lr <= tc->lr))
      mlc_error(L->d, at, "min_lr must be between 0 and lr (%g), got %g", tc->lr, tc->min_lr);
    else if (tc->decay == MLC_DECAY_NONE)
      mlc_error(L->d, at, "min_lr is where the rate decays to: it needs decay=cosine or decay=linear");
  }
  if (pr[first + 2]) {
    mlc_loc at = mlc_arg_loc(c, spec, nspec, first + 2);
    if (mlc_want_int(L, v[first + 2], at, "steps", 1, (int64_t)1 << 40, &tc->lr_steps) && tc->decay != MLC_DECAY_NONE &&
        tc->lr_steps <= tc->warmup)
      mlc_error(L->d, at, "steps (%lld) must be more than warmup (%lld): the rate decays between them",
                (long long)tc->lr_steps, (long long)tc->warmup);
  }
}

/* Takes decay= out of an optimizer's arguments, into args[0..*n) the rest. */
static void take_decay(mlc_lowerer *L, const mlc_ast_expr *e, mlc_ast_arg *args, uint32_t *n, const mlc_ast_expr **betas) {
  mlc_train_config *tc = &L->p->train;
  for (uint32_t i = 0; i < e->nargs && *n < 12; i++) {
    const mlc_ast_arg *a = &e->args[i];
    if (betas && a->name && !strcmp(a->name, "betas")) *betas = a->value;
    else if (a->name && !strcmp(a->name, "decay")) {
      const char *w = a->value->kind == AST_NAME ? a->value->name : "";
      if (!strcmp(w, "cosine")) tc->decay = MLC_DECAY_COSINE;
      else if (!strcmp(w, "linear")) tc->decay = MLC_DECAY_LINEAR;
      else if (!strcmp(w, "none")) tc->decay = MLC_DECAY_NONE;
      else mlc_error(L->d, a->value->loc, "decay must be cosine, linear or none");
    } else args[(*n)++] = *a;
  }
}

static void lower_train_config(mlc_lowerer *L, const mlc_ast_train *t, mlc_instance *root) {
  mlc_train_config *tc = &L->p->train;
  tc->present = true;
  tc->loc = t->loc;
  tc->accum = 1;
  if (t->optimizer) {
    const mlc_ast_expr *e = t->optimizer;
    int errors0 = L->d->errors;
    mlc_ast_arg args[12];
    uint32_t n = 0;
    if (e->kind == AST_CALL && !strcmp(e->name, "AdamW")) {
      static const char *const spec[] = {"lr=", "betas=", "eps=", "weight_decay=", "warmup=", "min_lr=", "steps="};
      /* betas is a list: bind it by hand, the rest through mlc_bind. */
      const mlc_ast_expr *betas = NULL;
      take_decay(L, e, args, &n, &betas);
      mlc_call cc = {args, n, e->loc, "AdamW"};
      mlc_value v[7];
      bool pr[7];
      tc->opt = MLC_OPT_ADAMW;
      tc->lr = 1e-3, tc->beta1 = 0.9, tc->beta2 = 0.999, tc->eps = 1e-8, tc->weight_decay = 0.01;
      if (mlc_bind(L, &cc, spec, 7, v, pr)) {
        if (pr[0]) mlc_want_float(L, v[0], mlc_arg_loc(&cc, spec, 7, 0), "lr", &tc->lr);
        if (pr[2]) mlc_want_float(L, v[2], mlc_arg_loc(&cc, spec, 7, 2), "eps", &tc->eps);
        if (pr[3]) mlc_want_float(L, v[3], mlc_arg_loc(&cc, spec, 7, 3), "weight_decay", &tc->weight_decay);
        lower_schedule(L, &cc, spec, 7, 4, v, pr);
      }
      if (betas) {
        if (betas->kind != AST_LIST || betas->nargs != 2) mlc_error(L->d, betas->loc, "betas must be a list of two numbers: [0.9, 0.999]");
        else {
          mlc_want_float(L, eval(L, betas->args[0].value), betas->args[0].loc, "beta1", &tc->beta1);
          mlc_want_float(L, eval(L, betas->args[1].value), betas->args[1].loc, "beta2", &tc->beta2);
        }
      }
    } else if (e->kind == AST_CALL && !strcmp(e->name, "SGD")) {
      static const char *const spec[] = {"lr", "momentum=", "weight_decay=", "warmup=", "min_lr=", "steps="};
      take_decay(L, e, args, &n, NULL);
      mlc_call c = {args, n, e->loc, e->name};
      mlc_value v[6];
      bool pr[6];
      tc->opt = MLC_OPT_SGD;
      if (mlc_bind(L, &c, spec, 6, v, pr)) {
        mlc_want_float(L, v[0], mlc_arg_loc(&c, spec, 6, 0), "lr", &tc->lr);
        if (pr[1]) mlc_want_float(L, v[1], mlc_arg_loc(&c, spec, 6, 1), "momentum", &tc->momentum);
        if (pr[2]) mlc_want_float(L, v[2], mlc_arg_loc(&c, spec, 6, 2), "weight_decay", &tc->weight_decay);
        lower_schedule(L, &c, spec, 6, 3, v, pr);
      }
    } else if (e->kind == AST_NAME && (!strcmp(e->name, "AdamW") || !strcmp(e->name, "SGD"))) {
      mlc_error(L->d, e->loc, "the optimizer is a call: %s(lr=...)", e->name);
    } else if (e->kind == AST_CALL || e->kind == AST_NAME) {
      suggest s = {.want = e->name, .dist = 99};
      consider(&s, "AdamW");
      consider(&s, "SGD");
      mlc_error(L->d, e->loc, "unknown optimizer '%s'%s", e->name,
                s.best ? hint(L, &s) : ": expected AdamW(lr=...) or SGD(lr=...)");
    } else {
      mlc_error(L->d, e->loc, "expected an optimizer: AdamW(lr=...) or SGD(lr=...)");
    }
    if (tc->opt && L->d->errors == errors0 && !(tc->lr > 0)) {
      mlc_loc at = e->loc; /* point at lr=, given by name or first */
      for (uint32_t i = 0; i < e->nargs; i++)
        if (e->args[i].name ? !strcmp(e->args[i].name, "lr") : i == 0) at = e->args[i].loc;
      mlc_error(L->d, at, "the learning rate must be positive, got %g", tc->lr);
    }
  }
  if (t->precision) {
    const mlc_ast_expr *e = t->precision;
    static const char *const spec[] = {"param", "reduce="};
    /* f32_matmul= names a mode (a word, not a value): taken out before the rest is bound */
    mlc_ast_arg *rest = mlc_arena_alloc(L->a, (e->nargs + 1) * sizeof *rest);
    uint32_t nrest = 0;
    bool mm = false;
    for (uint32_t i = 0; e->kind == AST_CALL && i < e->nargs; i++) {
      const mlc_ast_arg *a = &e->args[i];
      if (!a->name || strcmp(a->name, "f32_matmul")) { rest[nrest++] = *a; continue; }
      mlc_f32_matmul m = a->value->kind == AST_NAME ? mlc_f32_matmul_parse(a->value->name) : MLC_F32MM_DEFAULT;
      if (m == MLC_F32MM_DEFAULT)
        mlc_error(L->d, a->value->loc, "f32_matmul must be tf32x3, ieee or tf32");
      L->p->opts.f32_matmul = (uint8_t)m;
      mm = true;
    }
    mlc_call c = {rest, nrest, e->loc, "precision"};
    mlc_value v[2];
    bool pr[2];
    if (e->kind != AST_CALL) mlc_error(L->d, e->loc, "expected precision(param=bf16, reduce=f32)");
    else if (mm && nrest == 0) { /* precision(f32_matmul=...) alone */ }
    else if (mlc_bind(L, &c, spec, 2, v, pr) && mlc_want_dtype(L, v[0], mlc_arg_loc(&c, spec, 2, 0), "param", &tc->param_dtype)) {
      tc->reduce_dtype = MLC_DT_F32;
      if (pr[1]) mlc_want_dtype(L, v[1], mlc_arg_loc(&c, spec, 2, 1), "reduce", &tc->reduce_dtype);
      if (!mlc_dtype_is_float(tc->param_dtype) || !mlc_dtype_is_float(tc->reduce_dtype))
        mlc_error(L->d, e->loc, "precision dtypes must be floating point (f32, bf16, f16)");
    }
  }
  if (t->clip_grad_norm) {
    double cl = 0;
    tc->clip_loc = t->clip_grad_norm->loc;
    if (mlc_want_float(L, eval(L, t->clip_grad_norm), t->clip_grad_norm->loc, "clip_grad_norm", &cl)) {
      if (!(cl > 0 && cl < 1e30)) mlc_error(L->d, t->clip_grad_norm->loc, "clip_grad_norm is the largest gradient norm and must be positive, got %g", cl);
      else if (!t->optimizer) mlc_error(L->d, t->clip_grad_norm->loc, "clip_grad_norm clips the gradients the optimizer takes: it needs an optimizer");
      else tc->clip = cl;
    }
  }
  if (t->accum) {
    tc->accum_loc = t->accum->loc;
    mlc_want_int(L, eval(L, t->accum), t->accum->loc, "accum (micro-batches per step)", 1, 1 << 16, &tc->accum);
  }
  if (L->accum_flag) tc->accum = L->accum_flag;
  if (t->memory_budget) {
    double b = 0;
    if (mlc_want_float(L, eval(L, t->memory_budget), t->memory_budget->loc, "memory_budget", &b)) {
      if (!(b >= 1 && b < 9.2e18)) mlc_error(L->d, t->memory_budget->loc, "memory_budget is a size in bytes, such as 14e9; got %g", b);
      else L->p->opts.memory_budget = (int64_t)b;
    }
  }
  if (t->shard) {
    const mlc_ast_expr *e = t->shard;
    if (e->kind != AST_CALL || strcmp(e->name, "fsdp")) {
      mlc_error(L->d, e->loc, "unknown sharding: expected fsdp(list, ...) naming the model's module lists");
    } else {
      tc->shard = "fsdp";
      tc->shard_units = mlc_arena_alloc(L->a, (e->nargs + 1) * sizeof *tc->shard_units);
      for (uint32_t i = 0; i < e->nargs; i++) {
        const mlc_ast_expr *a = e->args[i].value;
        mlc_value *m = a->kind == AST_NAME && !e->args[i].name ? scope_get(&root->members, a->name) : NULL;
        if (a->kind == AST_NAME && !e->args[i].name && !m) {
          suggest s = {.want = a->name, .dist = 99};
          consider_scope(&s, &root->members);
          mlc_error(L->d, e->args[i].loc, "fsdp: model %s has no submodule named '%s'%s", root->type_name, a->name,
                    hint(L, &s));
          continue;
        }
        if (m && m->kind == V_PARAM) {
          mlc_error(L->d, e->args[i].loc, "fsdp: '%s' is a parameter of %s, not a submodule; fsdp takes submodules, "
                    "such as fsdp(layers)", a->name, root->type_name);
          continue;
        }
        if (!m || m->kind != V_MODULE) {
          mlc_error(L->d, e->args[i].loc, "fsdp needs the names of the model's submodules, such as fsdp(layers)");
          continue;
        }
        tc->shard_units[tc->nshard_units++] = a->name;
      }
    }
  }
}

/* The loss of one micro-batch: micro k of n takes rows [k b, (k + 1) b) of
 * every input (b = rows / n, the declared rows); n = 1 takes them whole. */
static mlc_value micro_loss(mlc_lowerer *L, const mlc_ast_train *t, mlc_instance *root, const mlc_value *in, int64_t k,
                            int64_t n) {
  mlc_scope locals = {0};
  scope_set(L, &locals, "model", (mlc_value){.kind = V_MODULE, .mod = root});
  for (uint32_t i = 0; i < t->ninputs; i++) {
    if (in[i].kind != V_TENSOR) continue;
    mlc_value v = in[i];
    if (n > 1) {
      int64_t b = mlc_value_type(L, v)->dim[0] / n;
      mlc_attrs a = {.axis = 0, .start = k * b, .end = (k + 1) * b};
      v = mlc_emit(L, MLC_OP_SLICE, &in[i], 1, &a, NULL, t->inputs[i].loc);
    }
    scope_set(L, &locals, t->inputs[i].name, v);
  }
  L->locals = &locals;
  mlc_value loss = eval(L, t->loss);
  L->locals = NULL;
  if (loss.kind == V_ERR) return loss;
  if (!mlc_want_tensor(L, loss, t->loss->loc, "the loss")) return mlc_verr();
  const mlc_type *lt = mlc_value_type(L, loss);
  if (lt->rank != 0 || !mlc_dtype_is_float(lt->dtype)) {
    char b[96];
    mlc_error(L->d, t->loss->loc, "the loss must be a floating-point scalar, got %s; reduce it with sum() or mean()",
              mlc_type_str(lt, b, sizeof b));
    return mlc_verr();
  }
  return loss;
}

/* train: the loss over the inputs.  With accum = n > 1, a declared input
 * (x: f32[batch, 64]) is one micro-batch: the step's input holds n of them
 * along the first axis (f32[n * batch, 64]), each micro-batch's loss is
 * lowered on its own (the forward n times over, on its rows), and the step's
 * loss is their mean.  The gradients are then the mean of the micro-batches'
 * gradients, as llm.c's and nanoGPT's loss / grad_accum_steps give them,
 * and for a loss that is a mean over rows the same as one batch n times as
 * large. */
static void lower_train(mlc_lowerer *L, const mlc_ast_train *t, mlc_instance *root) {
  begin_func(L, "train");
  lower_train_config(L, t, root);
  int64_t n = L->p->train.accum;
  mlc_value *in = mlc_arena_alloc(L->a, (t->ninputs + 1) * sizeof *in);
  for (uint32_t i = 0; i < t->ninputs; i++) {
    in[i] = mlc_verr();
    if (!strcmp(t->inputs[i].name, "model")) {
      mlc_error(L->d, t->inputs[i].loc, "'model' is reserved for the model in a train block");
      continue;
    }
    in[i] = add_input(L, &t->inputs[i]);
    if (n > 1 && in[i].kind == V_TENSOR) {
      mlc_type *ty = &L->f->nodes[in[i].node].type;
      char b[96];
      if (ty->rank == 0 || mlc_type_numel(ty) > MLC_MAX_NUMEL / n) {
        mlc_error(L->d, t->inputs[i].loc, "accum = %lld stacks %lld micro-batches of every input along its first axis, "
                  "but input '%s' is %s%s", (long long)n, (long long)n, t->inputs[i].name, mlc_type_str(ty, b, sizeof b),
                  ty->rank ? ": too large" : ", a scalar");
        if (!L->accum_flag && t->accum) mlc_note(L->d, t->accum->loc, "accum is set here");
        in[i] = mlc_verr();
      } else {
        ty->dim[0] *= n; /* the leaf has no users yet */
      }
    }
  }
  if (!t->loss) {
    mlc_error(L->d, t->loc, "the train block needs a loss: loss = cross_entropy(model(tokens), targets)");
    return;
  }
  mlc_value loss = mlc_verr();
  for (int64_t k = 0; k < n; k++) {
    mlc_value l = micro_loss(L, t, root, in, k, n);
    if (l.kind == V_ERR) return;
    if (k == 0) loss = l;
    else {
      mlc_value ab[2] = {loss, l};
      loss = mlc_emit(L, MLC_OP_ADD, ab, 2, NULL, NULL, t->loss->loc);
    }
  }
  if (n > 1) {
    mlc_value ab[2] = {loss, mk_const(L, (double)n, mlc_value_type(L, loss)->dtype, t->loss->loc)};
    loss = mlc_emit(L, MLC_OP_DIV, ab, 2, NULL, NULL, t->loss->loc);
  }
  if (loss.kind == V_ERR) return;
  mlc_func_add_output(L->p, L->f, "loss", loss.node);
}

/* decode M { max_ctx = C  prefill = P }: two entries over the model's
 * forward, which takes token ids [batch, seq] and returns logits
 * [batch, seq, vocab]:
 *   prefill(tokens i32[batch, P], pos i32[]) -> logits [batch, P, vocab]
 *   step(tokens i32[batch, 1], pos i32[])    -> logits [batch, 1, vocab]
 * Both run the forward at positions pos, pos + 1, ...: every causal
 * attention becomes attention_kv over its own KV caches [batch, heads, C,
 * dim] (mlc_attention), which the two entries share and update in place.  A
 * prompt goes through prefill P tokens at a time (the last chunk padded:
 * causality keeps the padding out of the real rows, and the step
 * overwrites its cache rows before anything reads them); each new token
 * through step. */
static void lower_decode(mlc_lowerer *L, const mlc_ast_decode *dc, mlc_instance *root) {
  const mlc_ast_module *mod = root->ast;
  int64_t max_ctx = 0, prefill = 0;
  if (!dc->max_ctx) {
    mlc_error(L->d, dc->loc, "the decode block needs max_ctx = N: how many positions (prompt and generated tokens) its KV "
              "caches hold");
    return;
  }
  L->self = root; /* values may use the model's arguments, as its types do */
  bool ok = mlc_want_int(L, eval(L, dc->max_ctx), dc->max_ctx->loc, "max_ctx", 1, (int64_t)1 << 24, &max_ctx);
  prefill = max_ctx < 64 ? max_ctx : 64;
  if (ok && dc->prefill) ok = mlc_want_int(L, eval(L, dc->prefill), dc->prefill->loc, "prefill (tokens per call, at most max_ctx)",
                                           1, max_ctx, &prefill);
  L->self = NULL;
  if (!ok) return;
  if (!mod->has_forward || mod->nfparams != 1 || !mod->fparams[0].type) {
    mlc_error(L->d, mod->has_forward ? mod->forward_loc : mod->loc, "a decode block needs the model's forward to take one "
              "typed input of token ids, such as forward(idx: i32[batch, seq])");
    mlc_note(L->d, dc->model_loc, "the decode block is here");
    return;
  }
  const mlc_ast_param *prm = &mod->fparams[0];
  mlc_type t;
  L->self = root;
  ok = eval_type(L, prm->type, &t);
  L->self = NULL;
  if (!ok) return;
  if (t.dtype != MLC_DT_I32 || t.rank != 2) {
    char b[96];
    mlc_error(L->d, prm->loc, "a decode block needs the model's forward to take token ids i32[batch, seq], but '%s' is %s",
              prm->name, mlc_type_str(&t, b, sizeof b));
    mlc_note(L->d, dc->model_loc, "the decode block is here");
    return;
  }
  static const char *const names[2] = {"prefill", "step"};
  const int64_t len[2] = {prefill, 1};
  for (int e = 0; e < 2; e++) {
    begin_func(L, names[e]);
    mlc_type tt = t;
    tt.dim[1] = len[e];
    mlc_attrs a = {.name = "tokens"};
    mlc_value tok = mlc_emit(L, MLC_OP_INPUT, NULL, 0, &a, &tt, prm->loc);
    mlc_type pt = {.dtype = MLC_DT_I32, .rank = 0};
    a.name = "pos";
    mlc_value pos = mlc_emit(L, MLC_OP_INPUT, NULL, 0, &a, &pt, dc->loc);
    if (tok.kind != V_TENSOR || pos.kind != V_TENSOR) return;
    mlc_u32vec_push(L->a, &L->f->inputs, tok.node);
    mlc_u32vec_push(L->a, &L->f->inputs, pos.node);
    L->dec.on = true, L->dec.pos = pos.node, L->dec.max_ctx = max_ctx, L->dec.root = root, L->dec.used = 0;
    mlc_value out = mlc_call_module(L, root, &tok, 1, mod->forward_loc);
    L->dec.on = false;
    if (out.kind == V_TUPLE)
      mlc_error(L->d, out.tuple->locs[0], "a decode block needs the model's forward to return logits only, but it returns "
                "%u values (%s)", out.tuple->n, tuple_names(L, out.tuple));
    if (out.kind != V_TENSOR) return;
    const mlc_type *ot = mlc_value_type(L, out);
    if (!mlc_dtype_is_float(ot->dtype) || ot->rank != 3 || ot->dim[0] != t.dim[0] || ot->dim[1] != len[e]) {
      char b[96];
      mlc_error(L->d, mod->forward_loc, "a decode block needs the model's forward to return logits [batch, seq, vocab], but "
                "for %lld tokens it returns %s", (long long)len[e], mlc_type_str(ot, b, sizeof b));
      return;
    }
    if (e == 1 && L->dec.used != L->dec.ncache) {
      mlc_error(L->d, mod->forward_loc, "the step entry runs %u attentions over KV caches but the prefill entry %u: the model "
                "must attend the same way whatever the sequence length", L->dec.used, L->dec.ncache);
      return;
    }
    mlc_func_add_output(L->p, L->f, "logits", out.node);
  }
}

bool mlc_lower(mlc_program *p, mlc_diag *d, const mlc_ast_file *ast, const mlc_lower_options *opt) {
  return mlc_lower_io_run(p, d, ast, opt, NULL);
}

bool mlc_lower_io_run(mlc_program *p, mlc_diag *d, const mlc_ast_file *ast, const mlc_lower_options *opt,
                      const mlc_lower_io *io) {
  mlc_lowerer L = {.p = p, .d = d, .a = p->arena, .ast = ast, .max_steps = opt->max_steps ? opt->max_steps : MAX_STEPS,
                   .accum_flag = opt->accum, .io = io};
  int errors0 = d->errors;
  eval_config(&L, opt);
  /* Module names must be unique and must not shadow built-ins. */
  for (uint32_t i = 0; i < ast->nmodules; i++) {
    if (mlc_builtin_find(ast->modules[i].name))
      mlc_error(d, ast->modules[i].loc, "module %s has the name of a built-in module", ast->modules[i].name);
    for (uint32_t k = 0; k < i; k++)
      if (!strcmp(ast->modules[k].name, ast->modules[i].name)) {
        mlc_error(d, ast->modules[i].loc, "module %s is defined twice", ast->modules[i].name);
        mlc_note(d, ast->modules[k].loc, "the first module %s is here", ast->modules[k].name);
        break;
      }
  }
  const char *entry = opt->entry ? opt->entry : ast->train ? ast->train->model : ast->decode ? ast->decode->model : NULL;
  mlc_loc entry_loc = opt->entry ? (mlc_loc){0} : ast->train ? ast->train->model_loc : ast->decode ? ast->decode->model_loc
                                                                                                     : (mlc_loc){0};
  const mlc_ast_module *mod = NULL;
  if (entry) {
    mod = find_module(&L, entry);
    if (!mod) {
      if (mlc_builtin_find(entry))
        mlc_error(d, entry_loc, "the model must be a module defined in the file; wrap built-in %s in a module", entry);
      else {
        suggest s = {.want = entry, .dist = 99};
        for (uint32_t i = 0; i < ast->nmodules; i++) consider(&s, ast->modules[i].name);
        if (opt->entry)
          mlc_error(d, entry_loc, "--entry %s: the file defines no module named '%s'%s", entry, entry, hint(&L, &s));
        else
          mlc_error(d, entry_loc, "unknown module '%s'%s", entry, hint(&L, &s));
      }
      return false;
    }
  } else if (ast->nmodules) {
    mod = &ast->modules[ast->nmodules - 1];
  } else {
    mlc_error(d, (mlc_loc){0}, "the file defines no module, so there is no model to compile");
    return false;
  }
  if (d->errors > errors0) return false;
  char *lname = mlc_arena_strdup(L.a, mod->name);
  for (char *c = lname; *c; c++)
    if (*c >= 'A' && *c <= 'Z') *c = (char)(*c - 'A' + 'a');
  p->name = lname;
  /* The constructor's arguments: the train block's, else the decode block's. */
  mlc_ast_train dargs = {0};
  const mlc_ast_train *ctor = ast->train;
  if (!ctor && ast->decode) {
    dargs.has_args = ast->decode->has_args, dargs.args = ast->decode->args, dargs.nargs = ast->decode->nargs;
    ctor = &dargs;
  }
  mlc_instance *root = instantiate_root(&L, mod, opt->entry ? NULL : ctor, mod->loc);
  if (!root || d->errors > errors0) return false;
  if (!(opt->decode_only && ast->decode)) lower_forward(&L, root);
  if (ast->train && !opt->no_train && (!opt->entry || !strcmp(opt->entry, ast->train->model)))
    lower_train(&L, ast->train, root);
  if (ast->decode && d->errors == errors0 && (!opt->entry || !strcmp(opt->entry, ast->decode->model))) {
    if (strcmp(ast->decode->model, mod->name))
      mlc_error(d, ast->decode->model_loc, "the decode block names %s, but the model compiled is %s", ast->decode->model,
                mod->name);
    else
      lower_decode(&L, ast->decode, root);
  }
  if (d->errors != errors0) return false;
  /* An onnx(...) parameter tied to another takes that one's value. */
  uint32_t nw = 0;
  for (uint32_t i = 0; i < L.nw; i++)
    if (!p->params[L.w[i].param].tie) L.w[nw++] = L.w[i];
  const uint32_t *to = fold_ties(p);
  for (uint32_t i = 0; to && i < nw; i++) L.w[i].param = to[L.w[i].param];
  if (io && io->weights) *io->weights = (mlc_onnx_weights){L.w, nw};
  return true;
}

bool mlc_frontend_run(mlc_program *p, mlc_diag *d, const char *name, const char *src, size_t len,
                      const mlc_lower_options *opt, mlc_ast_file **out_ast) {
  return mlc_frontend_run_io(p, d, name, src, len, opt, NULL, out_ast);
}

bool mlc_frontend_run_io(mlc_program *p, mlc_diag *d, const char *name, const char *src, size_t len,
                         const mlc_lower_options *opt, const mlc_lower_io *io, mlc_ast_file **out_ast) {
  uint32_t file = mlc_diag_add_source(d, name, src, len);
  uint32_t ntoks;
  mlc_token *toks = mlc_lex(p->arena, d, file, src, len, &ntoks);
  mlc_ast_file *ast = mlc_parse(p->arena, d, toks, ntoks);
  if (out_ast) *out_ast = ast;
  if (d->errors) return false;
  return mlc_lower_io_run(p, d, ast, opt, io);
}
