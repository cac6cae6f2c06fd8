/* The ONNX frontend: reads a ModelProto with protobuf-c and lowers its graph
 * into mlc's IR (see onnx.h for the contract).
 *
 * Each ONNX tensor name maps to a `val`: an IR node, data known at compile
 * time, or both.  Known data is made into a node only when a runtime op
 * reads it: a scalar becomes a CONST, anything larger a parameter (an
 * initializer keeps its name).  Ops are lowered by the handlers in the
 * table at the end of the file; an op that is not in it, or an attribute a
 * handler does not list, is an error naming the node.
 */
#define _XOPEN_SOURCE 700 /* fileno, fseeko */
#include "frontend/onnx/onnx.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "onnx.pb-c.h"

#define NONE UINT32_MAX
#define MAX_GRAPH_NODES (1u << 18)
#define MAX_FOLD_NUMEL (1 << 20) /* compile-time tensors made by folding, in elements */

typedef struct {
  const char *name;
  uint32_t node;       /* IR node, NONE until a runtime op reads it */
  mlc_type type;
  const uint8_t *data; /* known at compile time: numel * dtype size bytes, or NULL */
  bool init;           /* a graph initializer */
  bool graph_input;
} val;

typedef struct {
  mlc_program *p;
  mlc_diag *d;
  mlc_arena *a;
  mlc_func *f;
  const char *file;
  const char *dir; /* the .onnx file's directory, for external data; NULL: the model comes from no file */
  mlc_loc at; /* a .mdl file's onnx("...") call, or {0} */
  int opset;
  const Onnx__NodeProto *n; /* the node being lowered, for messages */
  uint32_t ni;
  const Onnx__GraphProto *g;
  bool *done; /* [g->n_node]: nodes a pattern already lowered (GELU) */
  val *v;
  uint32_t nv, cap;
  uint32_t *hash; /* open addressing over v: index + 1, 0 empty */
  uint32_t hcap;
  const mlc_define *defs;
  uint32_t ndefs;
  mlc_onnx_weight *w;
  uint32_t nw, wcap;
  uint32_t nk; /* compile-time tensors the lowering made, for their names */
} imp;

/* ---- messages ---- */

static void nerr(imp *I, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void nerr(imp *I, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (I->n)
    mlc_error(I->d, I->at, "%s: node %u '%s' (%s, opset %d): %s", I->file, I->ni, I->n->name ? I->n->name : "",
              I->n->op_type ? I->n->op_type : "", I->opset, msg);
  else
    mlc_error(I->d, I->at, "%s: %s", I->file, msg);
}

/* ---- dtypes ---- */

static const char *const onnx_dtype_names[] = {
  "undefined", "float", "uint8", "int8", "uint16", "int16", "int32", "int64", "string", "bool",
  "float16", "double", "uint32", "uint64", "complex64", "complex128", "bfloat16",
};

static const char *onnx_dtype_name(int t) {
  return t >= 0 && t < (int)(sizeof onnx_dtype_names / sizeof *onnx_dtype_names) ? onnx_dtype_names[t] : "unknown";
}

static mlc_dtype dtype_of(int t) {
  switch (t) {
  case 1: return MLC_DT_F32;
  case 6: return MLC_DT_I32;
  case 7: return MLC_DT_I64;
  case 9: return MLC_DT_BOOL;
  case 10: return MLC_DT_F16;
  case 16: return MLC_DT_BF16;
  default: return MLC_DT_INVALID;
  }
}

/* The dtype of ONNX type t, or an error naming what: "unsupported dtype double". */
static bool want_dtype(imp *I, int t, const char *what, uint8_t *out) {
  mlc_dtype d = dtype_of(t);
  if (d == MLC_DT_INVALID) {
    nerr(I, "%s: unsupported dtype %s (mlc has float, float16, bfloat16, int32, int64 and bool)", what,
         onnx_dtype_name(t));
    return false;
  }
  *out = (uint8_t)d;
  return true;
}

static float half_to_float(uint16_t h) {
  uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31, m = h & 1023, bits;
  if (e == 0) {
    float f = ldexpf((float)m, -24);
    return s ? -f : f;
  }
  if (e == 31) bits = s | 0x7f800000u | (m << 13);
  else bits = s | ((e + 112) << 23) | (m << 13);
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

/* Element i of known data as a double or an int64. */
static double get_f(const val *x, int64_t i) {
  const uint8_t *p = x->data + (size_t)i * (size_t)mlc_dtype_size((mlc_dtype)x->type.dtype);
  switch (x->type.dtype) {
  case MLC_DT_F32: { float f; memcpy(&f, p, 4); return f; }
  case MLC_DT_F16: { uint16_t h; memcpy(&h, p, 2); return half_to_float(h); }
  case MLC_DT_BF16: { uint32_t b = (uint32_t)p[0] << 16 | (uint32_t)p[1] << 24; float f; memcpy(&f, &b, 4); return f; }
  case MLC_DT_I32: { int32_t v; memcpy(&v, p, 4); return v; }
  case MLC_DT_I64: { int64_t v; memcpy(&v, p, 8); return (double)v; }
  case MLC_DT_BOOL: return p[0] != 0;
  default: return 0;
  }
}

static int64_t get_i(const val *x, int64_t i) {
  const uint8_t *p = x->data + (size_t)i * (size_t)mlc_dtype_size((mlc_dtype)x->type.dtype);
  if (x->type.dtype == MLC_DT_I64) { int64_t v; memcpy(&v, p, 8); return v; }
  if (x->type.dtype == MLC_DT_I32) { int32_t v; memcpy(&v, p, 4); return v; }
  if (x->type.dtype == MLC_DT_BOOL) return p[0] != 0;
  double f = get_f(x, i);
  return f != f ? 0 : f > 9.2e18 ? INT64_MAX : f < -9.2e18 ? INT64_MIN : (int64_t)f;
}

/* Stores v as element i of data of dtype dt. */
static void put(uint8_t *data, uint8_t dt, int64_t i, double v, int64_t iv, bool is_int) {
  uint8_t *p = data + (size_t)i * (size_t)mlc_dtype_size((mlc_dtype)dt);
  switch (dt) {
  case MLC_DT_F32: { float f = (float)v; memcpy(p, &f, 4); break; }
  case MLC_DT_I32: { int32_t x = is_int ? (int32_t)iv : (int32_t)v; memcpy(p, &x, 4); break; }
  case MLC_DT_I64: { int64_t x = is_int ? iv : (int64_t)v; memcpy(p, &x, 8); break; }
  case MLC_DT_BOOL: p[0] = is_int ? iv != 0 : v != 0; break;
  case MLC_DT_BF16: { float f = (float)v; uint32_t b; memcpy(&b, &f, 4); b += 0x7fff + ((b >> 16) & 1); p[0] = (uint8_t)(b >> 16); p[1] = (uint8_t)(b >> 24); break; }
  case MLC_DT_F16: {
    /* round to nearest even through float's bits; subnormals flush towards zero */
    float f = (float)v;
    uint32_t b;
    memcpy(&b, &f, 4);
    uint32_t s = (b >> 16) & 0x8000, e = (b >> 23) & 255, m = b & 0x7fffff;
    uint16_t h;
    if (e == 255) h = (uint16_t)(s | 0x7c00 | (m ? 0x200 : 0));
    else if (e > 142) h = (uint16_t)(s | 0x7c00);
    else if (e < 113) h = (uint16_t)s;
    else {
      uint32_t r = ((e - 112) << 10) | (m >> 13), rest = m & 0x1fff;
      if (rest > 0x1000 || (rest == 0x1000 && (r & 1))) r++;
      h = (uint16_t)(s | r);
    }
    memcpy(p, &h, 2);
    break;
  }
  default: break;
  }
}

/* ---- the value table ---- */

static uint32_t hash_str(const char *s) {
  uint32_t h = 2166136261u;
  for (; *s; s++) h = (h ^ (uint8_t)*s) * 16777619u;
  return h;
}

static val *find(imp *I, const char *name) {
  if (!I->hcap) return NULL;
  for (uint32_t h = hash_str(name) & (I->hcap - 1);; h = (h + 1) & (I->hcap - 1)) {
    if (!I->hash[h]) return NULL;
    if (!strcmp(I->v[I->hash[h] - 1].name, name)) return &I->v[I->hash[h] - 1];
  }
}

/* A new value named `name`; NULL (with an error) if the name is taken. */
static val *define(imp *I, const char *name) {
  if (find(I, name)) {
    nerr(I, "tensor '%s' is defined twice (ONNX graphs are single assignment)", name);
    return NULL;
  }
  if (I->nv == I->cap) {
    uint32_t cap = I->cap ? I->cap * 2 : 256;
    I->v = mlc_arena_grow(I->a, I->v, I->nv * sizeof *I->v, cap * sizeof *I->v);
    I->cap = cap;
  }
  if (2 * (I->nv + 1) > I->hcap) {
    uint32_t hcap = I->hcap ? I->hcap * 2 : 512;
    I->hash = mlc_arena_alloc(I->a, hcap * sizeof *I->hash);
    I->hcap = hcap;
    for (uint32_t i = 0; i < I->nv; i++) {
      uint32_t h = hash_str(I->v[i].name) & (hcap - 1);
      while (I->hash[h]) h = (h + 1) & (hcap - 1);
      I->hash[h] = i + 1;
    }
  }
  val *x = &I->v[I->nv];
  memset(x, 0, sizeof *x);
  x->name = name;
  x->node = NONE;
  uint32_t h = hash_str(name) & (I->hcap - 1);
  while (I->hash[h]) h = (h + 1) & (I->hcap - 1);
  I->hash[h] = ++I->nv;
  return x;
}

/* ---- building IR ---- */

static const mlc_type *type_of(imp *I, uint32_t node) { return &I->f->nodes[node].type; }

/* Adds a node and runs its shape rule; NONE (with an error naming the ONNX
 * node) if the rule refuses it or an input already failed. */
static uint32_t emit(imp *I, mlc_op op, const uint32_t *in, uint32_t nin, const mlc_attrs *a, const mlc_type *preset) {
  for (uint32_t i = 0; i < nin; i++)
    if (in[i] == NONE) return NONE;
  if (I->f->n >= MAX_GRAPH_NODES * 4) {
    nerr(I, "the model needs more than %u IR operations", MAX_GRAPH_NODES * 4);
    return NONE;
  }
  uint32_t id = mlc_func_add(I->p, I->f, op, in, nin, a, (mlc_loc){0}, "");
  if (preset) I->f->nodes[id].type = *preset;
  char err[256];
  mlc_type t;
  if (!mlc_infer_type(I->p, I->f, &I->f->nodes[id], &t, err, sizeof err)) {
    nerr(I, "%s", err);
    I->f->n--;
    return NONE;
  }
  I->f->nodes[id].type = t;
  return id;
}

static uint32_t emit1(imp *I, mlc_op op, uint32_t x) { return emit(I, op, &x, 1, NULL, NULL); }
static uint32_t emit2(imp *I, mlc_op op, uint32_t x, uint32_t y) {
  uint32_t in[2] = {x, y};
  return emit(I, op, in, 2, NULL, NULL);
}

static uint32_t scalar(imp *I, double v, uint8_t dtype) {
  mlc_type t = {.dtype = dtype, .rank = 0};
  mlc_attrs a = {.f = v};
  return emit(I, MLC_OP_CONST, NULL, 0, &a, &t);
}

/* A scalar of x's dtype. */
static uint32_t like(imp *I, uint32_t x, double v) { return x == NONE ? NONE : scalar(I, v, type_of(I, x)->dtype); }

static uint32_t reshape(imp *I, uint32_t x, const int64_t *dims, int rank) {
  if (x == NONE) return NONE;
  mlc_type t = {.dtype = type_of(I, x)->dtype, .rank = (uint8_t)rank};
  memcpy(t.dim, dims, (size_t)rank * sizeof *dims);
  if (mlc_type_eq(&t, type_of(I, x))) return x;
  return emit(I, MLC_OP_RESHAPE, &x, 1, NULL, &t);
}

static uint32_t transpose2(imp *I, uint32_t x, int a0, int a1) {
  mlc_attrs a = {.axis = a0, .axis2 = a1};
  return emit(I, MLC_OP_TRANSPOSE, &x, 1, &a, NULL);
}

/* Output dim i is input dim perm[i]: a sequence of two-axis transposes. */
static uint32_t permute(imp *I, uint32_t x, const int *perm, int rank) {
  int cur[MLC_MAX_RANK];
  for (int i = 0; i < rank; i++) cur[i] = i;
  for (int i = 0; i < rank && x != NONE; i++) {
    int j = i;
    while (cur[j] != perm[i]) j++;
    if (j == i) continue;
    x = transpose2(I, x, i, j);
    int t = cur[i];
    cur[i] = cur[j], cur[j] = t;
  }
  return x;
}

static uint32_t reduce(imp *I, mlc_op op, uint32_t x, int axis, bool keepdim) {
  mlc_attrs a = {.axis = axis, .keepdim = keepdim};
  return emit(I, op, &x, 1, &a, NULL);
}

static uint32_t slice(imp *I, uint32_t x, int axis, int64_t start, int64_t end) {
  if (x == NONE) return NONE;
  if (start == 0 && end == type_of(I, x)->dim[axis]) return x;
  mlc_attrs a = {.axis = axis, .start = start, .end = end};
  return emit(I, MLC_OP_SLICE, &x, 1, &a, NULL);
}

/* max(x, 0) and friends from relu: |x| = relu(x) + relu(-x). */
static uint32_t vabs(imp *I, uint32_t x) {
  return emit2(I, MLC_OP_ADD, emit1(I, MLC_OP_RELU, x), emit1(I, MLC_OP_RELU, emit1(I, MLC_OP_NEG, x)));
}

/* ---- values: reading inputs, setting outputs ---- */

static uint32_t add_weight(imp *I, const char *name, const val *x) {
  /* A Constant node's tensor is part of the graph: never trained. */
  mlc_param prm = {.name = name, .type = x->type, .role = MLC_ROLE_WEIGHT, .init = MLC_INIT_GIVEN, .frozen = !x->init};
  uint32_t id = mlc_program_add_param(I->p, &prm);
  if (I->nw == I->wcap) {
    uint32_t cap = I->wcap ? I->wcap * 2 : 16;
    I->w = mlc_arena_grow(I->a, I->w, I->nw * sizeof *I->w, cap * sizeof *I->w);
    I->wcap = cap;
  }
  I->w[I->nw++] = (mlc_onnx_weight){id, x->data,
                                    (size_t)mlc_type_numel(&x->type) * (size_t)mlc_dtype_size((mlc_dtype)x->type.dtype),
                                    x->init};
  return id;
}

/* The IR node of a value, made from its data the first time a runtime op
 * reads it. */
static uint32_t node_of(imp *I, val *x) {
  if (x->node != NONE || !x->data) return x->node;
  if (!x->init && mlc_type_numel(&x->type) == 1) {
    double v = get_f(x, 0);
    bool exact = x->type.dtype != MLC_DT_I64 || (double)get_i(x, 0) == v;
    if (exact) {
      uint32_t c = scalar(I, v, x->type.dtype);
      x->node = reshape(I, c, x->type.dim, x->type.rank);
      return x->node;
    }
  }
  mlc_attrs a = {.param = add_weight(I, x->name, x)};
  x->node = emit(I, MLC_OP_PARAM, NULL, 0, &a, &x->type);
  return x->node;
}

/* Input k of the current node; NULL if absent (optional and empty). */
static val *in_val(imp *I, uint32_t k) {
  if (k >= I->n->n_input || !I->n->input[k] || !I->n->input[k][0]) return NULL;
  val *x = find(I, I->n->input[k]);
  if (!x) nerr(I, "input %u '%s' is not defined before this node", k, I->n->input[k]);
  return x;
}

static bool has_in(imp *I, uint32_t k) { return k < I->n->n_input && I->n->input[k] && I->n->input[k][0]; }

/* Input k as an IR node; an error if it is missing. */
static uint32_t in(imp *I, uint32_t k) {
  if (!has_in(I, k)) {
    nerr(I, "input %u is missing", k);
    return NONE;
  }
  val *x = in_val(I, k);
  return x ? node_of(I, x) : NONE;
}

/* Input k as data known at compile time. */
static val *in_const(imp *I, uint32_t k, const char *what) {
  val *x = in_val(I, k);
  if (!x) {
    if (!has_in(I, k)) nerr(I, "input %u (%s) is missing", k, what);
    return NULL;
  }
  if (!x->data) {
    if (x->graph_input)
      nerr(I, "input %u (%s) is graph input '%s', which must be known at compile time: mlc needs it as an "
           "initializer or a Constant", k, what, x->name);
    else
      nerr(I, "input %u (%s) '%s' must be known at compile time (an initializer, a Constant or computed from "
           "them and static shapes)", k, what, x->name);
    return NULL;
  }
  return x;
}

/* Input k as a list of integers known at compile time (1-D or a scalar). */
static bool in_ints(imp *I, uint32_t k, const char *what, int64_t *out, int max, int *n) {
  val *x = in_const(I, k, what);
  if (!x) return false;
  int64_t numel = mlc_type_numel(&x->type);
  if (x->type.rank > 1 || numel > max || mlc_dtype_is_float((mlc_dtype)x->type.dtype)) {
    nerr(I, "input %u (%s) must be a 1-D integer tensor of at most %d values", k, what, max);
    return false;
  }
  for (int64_t i = 0; i < numel; i++) out[i] = get_i(x, i);
  *n = (int)numel;
  return true;
}

static val *out_val(imp *I, uint32_t k) {
  if (k >= I->n->n_output || !I->n->output[k] || !I->n->output[k][0]) return NULL;
  return define(I, mlc_arena_strdup(I->a, I->n->output[k])); /* the message is freed after lowering */
}

static bool set_out(imp *I, uint32_t k, uint32_t node) {
  if (node == NONE) return false;
  val *x = out_val(I, k);
  if (!x) return k >= I->n->n_output || !I->n->output[k] || !I->n->output[k][0];
  x->node = node;
  x->type = *type_of(I, node);
  return true;
}

/* A compile-time output: type t, data (numel * size bytes, in the arena). */
static bool set_const(imp *I, uint32_t k, const mlc_type *t, const uint8_t *data) {
  val *x = out_val(I, k);
  if (!x) return false;
  x->type = *t;
  x->data = data;
  return true;
}

static uint8_t *alloc_data(imp *I, const mlc_type *t) {
  return mlc_arena_alloc(I->a, (size_t)mlc_type_numel(t) * (size_t)mlc_dtype_size((mlc_dtype)t->dtype) + 1);
}

/* Only output 0 may be used (Dropout's mask, LayerNormalization's Mean ...). */
static bool only_outputs(imp *I, uint32_t n) {
  for (uint32_t k = n; k < I->n->n_output; k++)
    if (I->n->output[k] && I->n->output[k][0]) {
      nerr(I, "output %u ('%s') is not supported", k, I->n->output[k]);
      return false;
    }
  return true;
}

/* ---- attributes ---- */

static const Onnx__AttributeProto *attr(const Onnx__NodeProto *n, const char *name) {
  for (size_t i = 0; i < n->n_attribute; i++)
    if (n->attribute[i]->name && !strcmp(n->attribute[i]->name, name)) return n->attribute[i];
  return NULL;
}

static int64_t attr_i(const Onnx__NodeProto *n, const char *name, int64_t def) {
  const Onnx__AttributeProto *a = attr(n, name);
  return a && a->has_i ? a->i : def;
}

static double attr_f(const Onnx__NodeProto *n, const char *name, double def) {
  const Onnx__AttributeProto *a = attr(n, name);
  return a && a->has_f ? a->f : def;
}

static bool attr_s(const Onnx__NodeProto *n, const char *name, const char *want_default, const char *is) {
  const Onnx__AttributeProto *a = attr(n, name);
  if (!a || !a->has_s) return !strcmp(want_default, is);
  return strlen(is) == a->s.len && !memcmp(a->s.data, is, a->s.len);
}

/* An attribute that became an input in opset `became_input`: read it
 * (at most max values) before that opset, refuse it from then on. */
static bool attr_ints(imp *I, const char *name, int became_input, int64_t *out, int max, int *n) {
  const Onnx__AttributeProto *a = attr(I->n, name);
  if (!a) return true;
  if (I->opset >= became_input) {
    nerr(I, "%s is an input from opset %d on, not an attribute", name, became_input);
    return false;
  }
  if (a->n_ints > (size_t)max) {
    nerr(I, "%s has more than %d values", name, max);
    return false;
  }
  for (size_t i = 0; i < a->n_ints; i++) out[i] = a->ints[i];
  *n = (int)a->n_ints;
  return true;
}

/* Normalises axis (ONNX allows -rank..rank-1); false with an error if out of range. */
static bool norm_axis(imp *I, int64_t axis, int rank, int *out) {
  if (axis < -rank || axis >= rank) {
    nerr(I, "axis %lld is out of range for rank %d", (long long)axis, rank);
    return false;
  }
  *out = (int)(axis < 0 ? axis + rank : axis);
  return true;
}

/* ---- reading tensors ---- */

static bool dims_numel(imp *I, const int64_t *dims, size_t n, const char *what, mlc_type *t) {
  if (n > MLC_MAX_RANK) {
    nerr(I, "%s has rank %zu; mlc supports at most %d", what, n, MLC_MAX_RANK);
    return false;
  }
  t->rank = (uint8_t)n;
  int64_t numel = 1;
  for (size_t i = 0; i < n; i++) {
    if (dims[i] < 1) {
      nerr(I, "%s has dimension %zu of size %lld; mlc needs positive sizes", what, i, (long long)dims[i]);
      return false;
    }
    if (dims[i] > MLC_MAX_NUMEL / numel) {
      nerr(I, "%s has more than 2^48 elements", what);
      return false;
    }
    numel *= dims[i];
    t->dim[i] = dims[i];
  }
  return true;
}

/* ---- external data ---- */

/* A non-negative decimal integer, as external_data's offset and length are written. */
static bool parse_size(const char *s, uint64_t *out) {
  if (!s || !*s) return false;
  uint64_t v = 0;
  for (; *s; s++) {
    if (*s < '0' || *s > '9' || v > (UINT64_MAX - 9) / 10) return false;
    v = v * 10 + (uint64_t)(*s - '0');
  }
  *out = v;
  return true;
}

/* A tensor whose bytes lie in a file of their own (data_location EXTERNAL):
 * external_data's `location` is a path relative to the .onnx file's
 * directory, `offset` and `length` (both optional; without length the data
 * runs to the end of the file) say where, and `checksum` (a SHA-1 of the
 * file) is accepted but not checked.  The bytes are read into the arena, as
 * raw_data's are copied, so nothing points into the file once it is closed.
 * Like onnx.checker, an absolute location or one with a '..' component is
 * refused: a model must not name files outside its directory. */
static bool read_external(imp *I, const Onnx__TensorProto *tp, const char *what, size_t bytes, const uint8_t **out) {
  const char *loc = NULL, *off_s = NULL, *len_s = NULL;
  for (size_t i = 0; i < tp->n_external_data; i++) {
    const char *k = tp->external_data[i]->key ? tp->external_data[i]->key : "";
    const char *v = tp->external_data[i]->value ? tp->external_data[i]->value : "";
    if (!strcmp(k, "location")) loc = v;
    else if (!strcmp(k, "offset")) off_s = v;
    else if (!strcmp(k, "length")) len_s = v;
    else if (strcmp(k, "checksum")) {
      nerr(I, "%s: unknown external_data key '%s' (ONNX has location, offset, length and checksum)", what, k);
      return false;
    }
  }
  if (!loc || !loc[0]) {
    nerr(I, "%s: its data is external but external_data has no location", what);
    return false;
  }
  if (!I->dir) {
    nerr(I, "%s: data in external files ('%s') is not read here: the model does not come from a file", what, loc);
    return false;
  }
  if (loc[0] == '/') {
    nerr(I, "%s: external data location '%s' is an absolute path; ONNX wants one relative to the model's "
         "directory (onnx.checker refuses it too)", what, loc);
    return false;
  }
  for (const char *c = loc; *c;) {
    size_t n = strcspn(c, "/");
    if (n == 2 && c[0] == '.' && c[1] == '.') {
      nerr(I, "%s: external data location '%s' leaves the model's directory with '..' (onnx.checker refuses it "
           "too)", what, loc);
      return false;
    }
    c += n + (c[n] == '/');
  }
  uint64_t off = 0, len = 0;
  if (off_s && !parse_size(off_s, &off)) {
    nerr(I, "%s: external data offset '%s' is not a byte count", what, off_s);
    return false;
  }
  if (len_s && !parse_size(len_s, &len)) {
    nerr(I, "%s: external data length '%s' is not a byte count", what, len_s);
    return false;
  }
  const char *path = I->dir[0] ? mlc_arena_printf(I->a, "%s/%s", I->dir, loc) : loc;
  FILE *f = fopen(path, "rb");
  struct stat st;
  if (!f) {
    nerr(I, "%s: cannot read external data '%s': %s", what, path, strerror(errno));
    return false;
  }
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
    nerr(I, "%s: external data '%s' is not a regular file", what, path);
    fclose(f);
    return false;
  }
  uint64_t size = (uint64_t)st.st_size;
  if (off > size || (len_s && len > size - off)) {
    if (len_s)
      nerr(I, "%s: external data '%s' has %llu bytes; offset %llu and length %llu reach past its end", what, path,
           (unsigned long long)size, (unsigned long long)off, (unsigned long long)len);
    else
      nerr(I, "%s: external data '%s' has %llu bytes; offset %llu is past its end", what, path,
           (unsigned long long)size, (unsigned long long)off);
    fclose(f);
    return false;
  }
  if (!len_s) len = size - off;
  if (len != bytes) {
    nerr(I, "%s: external data '%s' holds %llu bytes (offset %llu), its shape needs %zu", what, path,
         (unsigned long long)len, (unsigned long long)off, bytes);
    fclose(f);
    return false;
  }
  /* the size is checked against the file above, so this room is backed by data */
  uint8_t *data = mlc_arena_alloc(I->a, bytes + 1);
  bool ok = fseeko(f, (off_t)off, SEEK_SET) == 0 && fread(data, 1, bytes, f) == bytes;
  if (!ok) nerr(I, "%s: cannot read %zu bytes at offset %llu of external data '%s'", what, bytes, (unsigned long long)off, path);
  fclose(f);
  *out = data;
  return ok;
}

/* A TensorProto's type and its data, copied into the arena. */
static bool read_tensor(imp *I, const Onnx__TensorProto *tp, const char *what, mlc_type *t, const uint8_t **out) {
  if (!want_dtype(I, tp->has_data_type ? tp->data_type : 0, what, &t->dtype)) return false;
  if (!dims_numel(I, tp->dims, tp->n_dims, what, t)) return false;
  int64_t numel = mlc_type_numel(t);
  size_t esz = (size_t)mlc_dtype_size((mlc_dtype)t->dtype), bytes = (size_t)numel * esz;
  if (tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
    return read_external(I, tp, what, bytes, out);
  /* the data must be there before its room is taken: a shape alone may claim terabytes */
  size_t have = t->dtype == MLC_DT_F32 ? tp->n_float_data : t->dtype == MLC_DT_I64 ? tp->n_int64_data : tp->n_int32_data;
  if (tp->has_raw_data && tp->raw_data.len != bytes) {
    nerr(I, "%s: raw_data has %zu bytes, its shape needs %zu", what, tp->raw_data.len, bytes);
    return false;
  }
  if (!tp->has_raw_data && have != (size_t)numel) {
    nerr(I, "%s: holds %zu values, its shape needs %lld", what, have, (long long)numel);
    return false;
  }
  uint8_t *data = mlc_arena_alloc(I->a, bytes + 1);
  if (tp->has_raw_data) {
    memcpy(data, tp->raw_data.data, bytes);
  } else {
    for (int64_t i = 0; i < numel; i++) {
      uint8_t *p = data + (size_t)i * esz;
      if (t->dtype == MLC_DT_F32) memcpy(p, &tp->float_data[i], 4);
      else if (t->dtype == MLC_DT_I64) memcpy(p, &tp->int64_data[i], 8);
      else if (t->dtype == MLC_DT_I32) memcpy(p, &tp->int32_data[i], 4);
      else if (t->dtype == MLC_DT_BOOL) p[0] = tp->int32_data[i] != 0;
      else { uint16_t h = (uint16_t)tp->int32_data[i]; memcpy(p, &h, 2); } /* f16, bf16: the bits */
    }
  }
  *out = data;
  return true;
}

/* ---- op handlers ---- */

typedef struct op_def op_def;
typedef bool (*op_fn)(imp *I, const op_def *d);
struct op_def {
  const char *name;
  op_fn fn;
  const char *attrs; /* the attributes the handler reads, space separated */
  int k;             /* handler-specific: an IR op, a variant */
  int since;         /* the first opset whose definition of the op this handler follows */
};

#define N (I->n)

static bool op_unary(imp *I, const op_def *d) { return set_out(I, 0, emit1(I, (mlc_op)d->k, in(I, 0))); }

static bool op_identity(imp *I, const op_def *d) {
  (void)d;
  val *x = in_val(I, 0);
  if (!x) return has_in(I, 0) ? false : (nerr(I, "input 0 is missing"), false);
  if (x->data && x->node == NONE) return set_const(I, 0, &x->type, x->data);
  return set_out(I, 0, node_of(I, x));
}

/* ---- GELU: the erf form exporters write, as the IR's exact gelu ---- */

/* The value `name` as one float known from the graph itself (an
 * initializer or a Constant node), without lowering anything. */
static bool graph_scalar(imp *I, const char *name, double *out) {
  const Onnx__TensorProto *tp = NULL;
  for (size_t i = 0; i < I->g->n_initializer && !tp; i++)
    if (I->g->initializer[i]->name && !strcmp(I->g->initializer[i]->name, name)) tp = I->g->initializer[i];
  for (size_t i = 0; i < I->g->n_node && !tp; i++) {
    const Onnx__NodeProto *n = I->g->node[i];
    if (!n->op_type || strcmp(n->op_type, "Constant") || n->n_output != 1 || strcmp(n->output[0], name)) continue;
    if (n->n_attribute != 1 || !n->attribute[0]->name) return false;
    if (!strcmp(n->attribute[0]->name, "value_float")) { *out = n->attribute[0]->f; return true; }
    if (strcmp(n->attribute[0]->name, "value")) return false;
    tp = n->attribute[0]->t;
  }
  if (!tp || !tp->has_data_type || tp->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT) return false;
  for (size_t i = 0; i < tp->n_dims; i++)
    if (tp->dims[i] != 1) return false;
  if (tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) return false;
  float f;
  if (tp->has_raw_data && tp->raw_data.len == 4) memcpy(&f, tp->raw_data.data, 4);
  else if (!tp->has_raw_data && tp->n_float_data == 1) f = tp->float_data[0];
  else return false;
  *out = f;
  return true;
}

/* The node after node `from` that reads `name`, with the value's other
 * operand in *other (binary nodes); -1 unless exactly one input of exactly
 * one node reads it and it is not a graph output. */
static int64_t sole_reader(imp *I, size_t from, const char *name, const char *op, const char **other) {
  int64_t at = -1;
  for (size_t i = 0; i < I->g->n_output; i++)
    if (I->g->output[i]->name && !strcmp(I->g->output[i]->name, name)) return -1;
  for (size_t i = from + 1; i < I->g->n_node; i++) {
    const Onnx__NodeProto *n = I->g->node[i];
    for (size_t k = 0; k < n->n_input; k++) {
      if (!n->input[k] || strcmp(n->input[k], name)) continue;
      if (at >= 0) return -1;
      at = (int64_t)i;
      if (other) *other = n->n_input == 2 ? n->input[1 - k] : NULL;
    }
  }
  if (at < 0) return -1;
  const Onnx__NodeProto *n = I->g->node[at];
  if (!n->op_type || strcmp(n->op_type, op) || n->n_output != 1 || n->n_attribute ||
      (n->domain && n->domain[0] && strcmp(n->domain, "ai.onnx")))
    return -1;
  return at;
}

static bool near(double v, double want) { return fabs(v - want) <= 1e-6 * fabs(want); }

/* At a Div(x, sqrt 2) or Mul(x, 1/sqrt 2) (the current node): whether it
 * starts x * (erf(x / sqrt 2) + 1) * 0.5, the exact GELU as torch.onnx
 * writes it (Div, Erf, Add 1, Mul x, Mul 0.5, each read by the next alone).
 * If so, the last Mul's output is gelu(x) and the nodes up to it are done.
 * Any other use of erf is lowered as Erf itself. */
static bool gelu_pattern(imp *I, bool *matched) {
  const Onnx__NodeProto *n = I->n;
  *matched = false;
  if (n->n_input != 2 || n->n_output != 1 || !n->input[0] || !n->input[1] || !n->output[0][0]) return true;
  double c, one, half;
  bool div = !strcmp(n->op_type, "Div");
  if (!graph_scalar(I, n->input[1], &c) || !near(c, div ? 1.4142135623730951 : 0.7071067811865476)) return true;
  const char *x = n->input[0], *o1, *o2, *o3;
  int64_t e = sole_reader(I, I->ni, n->output[0], "Erf", NULL);
  if (e < 0 || I->g->node[e]->n_input != 1) return true;
  int64_t a = sole_reader(I, (size_t)e, I->g->node[e]->output[0], "Add", &o1);
  if (a < 0 || !o1 || !graph_scalar(I, o1, &one) || one != 1) return true;
  int64_t m1 = sole_reader(I, (size_t)a, I->g->node[a]->output[0], "Mul", &o2);
  if (m1 < 0 || !o2 || strcmp(o2, x)) return true;
  int64_t m2 = sole_reader(I, (size_t)m1, I->g->node[m1]->output[0], "Mul", &o3);
  if (m2 < 0 || !o3 || !graph_scalar(I, o3, &half) || half != 0.5) return true;
  val *xv = in_val(I, 0), *out;
  if (!xv || !mlc_dtype_is_float((mlc_dtype)xv->type.dtype)) return true;
  uint32_t xn = node_of(I, xv), y = emit1(I, MLC_OP_GELU, xn);
  if (y == NONE) return false;
  /* The Div's own output is read by the Erf alone, which is done too. */
  if (!(out = define(I, mlc_arena_strdup(I->a, I->g->node[m2]->output[0])))) return false;
  out->node = y, out->type = *type_of(I, y);
  I->done[e] = I->done[a] = I->done[m1] = I->done[m2] = true;
  *matched = true;
  return true;
}

/* ---- folding: integer shape arithmetic known at compile time ---- */

/* Exporters compute shapes at run time (Shape, Gather, Add, Div, Concat,
 * then a Reshape) even where every shape is static.  Those integer values
 * are folded into data, so that the Reshape can read them.  Floats are never
 * folded here: a float initializer is a weight that --weights may replace. */

static bool broadcast_shape(const mlc_type *a, const int64_t *b, int rb, mlc_type *out);

static bool foldable(const val *x) {
  return x && x->data && (x->type.dtype == MLC_DT_I64 || x->type.dtype == MLC_DT_I32) &&
         mlc_type_numel(&x->type) <= MAX_FOLD_NUMEL;
}

/* The flat index into x, broadcast (numpy's rules) to t, of element i of t. */
static int64_t bcast_index(const mlc_type *x, const mlc_type *t, int64_t i) {
  int64_t off = 0, stride = 1;
  for (int k = t->rank - 1, j = x->rank - 1; k >= 0; k--, j--) {
    int64_t c = i % t->dim[k];
    i /= t->dim[k];
    if (j < 0) continue;
    if (x->dim[j] != 1) off += c * stride;
    stride *= x->dim[j];
  }
  return off;
}

/* Add, Sub, Mul, Div of two integer tensors known now: wrapping, and Div
 * truncating towards zero (C's, and onnxruntime's). *done is false where
 * the node is not folded. */
static bool fold_binary(imp *I, mlc_op op, bool *done) {
  val *a = in_val(I, 0), *b = in_val(I, 1);
  mlc_type t;
  *done = false;
  if (!foldable(a) || !foldable(b) || a->type.dtype != b->type.dtype ||
      !broadcast_shape(&a->type, b->type.dim, b->type.rank, &t) || mlc_type_numel(&t) > MAX_FOLD_NUMEL)
    return true; /* lowered as an op, whose shape rule reports a mismatch */
  uint8_t *data = alloc_data(I, &t);
  for (int64_t i = 0; i < mlc_type_numel(&t); i++) {
    uint64_t x = (uint64_t)get_i(a, bcast_index(&a->type, &t, i)), y = (uint64_t)get_i(b, bcast_index(&b->type, &t, i));
    uint64_t r;
    switch (op) {
    case MLC_OP_ADD: r = x + y; break;
    case MLC_OP_SUB: r = x - y; break;
    case MLC_OP_MUL: r = x * y; break;
    default:
      if (!y) { nerr(I, "integer division by zero in values known at compile time"); return false; }
      r = (int64_t)y == -1 ? 0 - x : (uint64_t)((int64_t)x / (int64_t)y);
      break;
    }
    put(data, t.dtype, i, 0, (int64_t)r, true);
  }
  *done = true;
  return set_const(I, 0, &t, data);
}

static bool op_binary(imp *I, const op_def *d) {
  bool folded;
  if (!fold_binary(I, (mlc_op)d->k, &folded)) return false;
  if (folded) return true;
  if (d->k == MLC_OP_DIV || d->k == MLC_OP_MUL) {
    bool matched;
    if (!gelu_pattern(I, &matched)) return false;
    if (matched) return true;
  }
  return set_out(I, 0, emit2(I, (mlc_op)d->k, in(I, 0), in(I, 1)));
}

enum { V_ABS, V_RECIP, V_SOFTPLUS, V_SOFTSIGN, V_ELU, V_SELU, V_CELU, V_LEAKY, V_HSIG, V_HSWISH };

/* Activations built from relu, exp and arithmetic. */
static bool op_act(imp *I, const op_def *d) {
  uint32_t x = in(I, 0), y = NONE;
  if (x == NONE) return false;
  double alpha;
  switch (d->k) {
  case V_ABS: y = vabs(I, x); break;
  case V_RECIP: y = emit2(I, MLC_OP_DIV, like(I, x, 1), x); break;
  case V_SOFTPLUS: y = emit1(I, MLC_OP_LOG, emit2(I, MLC_OP_ADD, emit1(I, MLC_OP_EXP, x), like(I, x, 1))); break;
  case V_SOFTSIGN: y = emit2(I, MLC_OP_DIV, x, emit2(I, MLC_OP_ADD, vabs(I, x), like(I, x, 1))); break;
  case V_ELU: case V_SELU: case V_CELU: {
    /* relu(x) + alpha * (exp(min(x, 0) / c) - 1), min(x, 0) = -relu(-x) */
    alpha = attr_f(N, "alpha", d->k == V_SELU ? 1.67326319217681884765625 : 1.0);
    uint32_t neg = emit1(I, MLC_OP_NEG, emit1(I, MLC_OP_RELU, emit1(I, MLC_OP_NEG, x)));
    if (d->k == V_CELU) neg = emit2(I, MLC_OP_DIV, neg, like(I, x, alpha));
    uint32_t e = emit2(I, MLC_OP_MUL, emit2(I, MLC_OP_SUB, emit1(I, MLC_OP_EXP, neg), like(I, x, 1)), like(I, x, alpha));
    y = emit2(I, MLC_OP_ADD, emit1(I, MLC_OP_RELU, x), e);
    if (d->k == V_SELU) y = emit2(I, MLC_OP_MUL, y, like(I, x, attr_f(N, "gamma", 1.05070102214813232421875)));
    break;
  }
  case V_LEAKY:
    alpha = attr_f(N, "alpha", 0.01);
    y = emit2(I, MLC_OP_SUB, emit1(I, MLC_OP_RELU, x),
              emit2(I, MLC_OP_MUL, emit1(I, MLC_OP_RELU, emit1(I, MLC_OP_NEG, x)), like(I, x, alpha)));
    break;
  case V_HSIG: case V_HSWISH: {
    /* clamp(alpha x + beta, 0, 1) = relu(t) - relu(t - 1) */
    double a = d->k == V_HSIG ? attr_f(N, "alpha", 0.2) : 1.0 / 6, b = d->k == V_HSIG ? attr_f(N, "beta", 0.5) : 0.5;
    uint32_t t = emit2(I, MLC_OP_ADD, emit2(I, MLC_OP_MUL, x, like(I, x, a)), like(I, x, b));
    y = emit2(I, MLC_OP_SUB, emit1(I, MLC_OP_RELU, t), emit1(I, MLC_OP_RELU, emit2(I, MLC_OP_SUB, t, like(I, x, 1))));
    if (d->k == V_HSWISH) y = emit2(I, MLC_OP_MUL, x, y);
    break;
  }
  }
  return set_out(I, 0, y);
}

/* PRelu: relu(x) - slope * relu(-x), slope broadcast (unidirectionally) to x. */
static bool op_prelu(imp *I, const op_def *d) {
  (void)d;
  uint32_t x = in(I, 0), s = in(I, 1);
  uint32_t y = emit2(I, MLC_OP_SUB, emit1(I, MLC_OP_RELU, x),
                     emit2(I, MLC_OP_MUL, emit1(I, MLC_OP_RELU, emit1(I, MLC_OP_NEG, x)), s));
  return set_out(I, 0, y);
}

/* Clip: x clamped to [min, max] (each optional, a scalar known at compile time). */
static bool op_clip(imp *I, const op_def *d) {
  (void)d;
  uint32_t x = in(I, 0);
  if (x == NONE) return false;
  double lo = -INFINITY, hi = INFINITY;
  if (has_in(I, 1)) { val *v = in_const(I, 1, "min"); if (!v) return false; lo = get_f(v, 0); }
  if (has_in(I, 2)) { val *v = in_const(I, 2, "max"); if (!v) return false; hi = get_f(v, 0); }
  uint32_t y = x;
  /* max(y, lo) = lo + relu(y - lo); min(y, hi) = hi - relu(hi - y) */
  if (lo > -INFINITY) y = emit2(I, MLC_OP_ADD, emit1(I, MLC_OP_RELU, emit2(I, MLC_OP_SUB, y, like(I, x, lo))), like(I, x, lo));
  if (hi < INFINITY) y = emit2(I, MLC_OP_SUB, like(I, x, hi), emit1(I, MLC_OP_RELU, emit2(I, MLC_OP_SUB, like(I, x, hi), y)));
  if (y == x) y = emit2(I, MLC_OP_ADD, x, like(I, x, 0));
  return set_out(I, 0, y);
}

/* Max, Min, Sum, Mean of any number of inputs, broadcasting. */
static bool op_variadic(imp *I, const op_def *d) {
  if (!I->n->n_input) { nerr(I, "needs at least one input"); return false; }
  uint32_t y = in(I, 0);
  for (uint32_t k = 1; k < I->n->n_input && y != NONE; k++) {
    uint32_t b = in(I, k);
    if (d->k == 'S' || d->k == 'M') y = emit2(I, MLC_OP_ADD, y, b);
    else if (d->k == '>') y = emit2(I, MLC_OP_ADD, y, emit1(I, MLC_OP_RELU, emit2(I, MLC_OP_SUB, b, y)));
    else y = emit2(I, MLC_OP_SUB, y, emit1(I, MLC_OP_RELU, emit2(I, MLC_OP_SUB, y, b)));
  }
  if (d->k == 'M' && I->n->n_input > 1) y = emit2(I, MLC_OP_DIV, y, like(I, y, (double)I->n->n_input));
  if (I->n->n_input == 1) y = emit2(I, MLC_OP_ADD, y, like(I, y, 0)); /* a copy, not the input itself */
  return set_out(I, 0, y);
}

/* Pow with an exponent known at compile time that products and roots express. */
static bool op_pow(imp *I, const op_def *d) {
  (void)d;
  uint32_t x = in(I, 0);
  val *e = in_const(I, 1, "exponent");
  if (x == NONE || !e) return false;
  if (mlc_type_numel(&e->type) != 1) { nerr(I, "the exponent must be a single value"); return false; }
  double p = get_f(e, 0);
  uint32_t y = NONE;
  if (p == 1) y = emit2(I, MLC_OP_MUL, x, like(I, x, 1));
  else if (p == 2) y = emit2(I, MLC_OP_MUL, x, x);
  else if (p == 3) y = emit2(I, MLC_OP_MUL, emit2(I, MLC_OP_MUL, x, x), x);
  else if (p == 0.5) y = emit1(I, MLC_OP_SQRT, x);
  else if (p == -0.5) y = emit1(I, MLC_OP_RSQRT, x);
  else if (p == -1) y = emit2(I, MLC_OP_DIV, like(I, x, 1), x);
  else { nerr(I, "unsupported exponent %g (mlc lowers Pow for exponents -1, -0.5, 0.5, 1, 2 and 3)", p); return false; }
  return set_out(I, 0, y);
}

static bool op_cast(imp *I, const op_def *d) {
  uint8_t dt;
  int to = d->k ? 0 : (int)attr_i(N, "to", 0);
  if (d->k) { /* CastLike */
    val *t = in_val(I, 1);
    if (!t) return false;
    dt = t->type.dtype;
  } else if (!want_dtype(I, to, "'to'", &dt)) {
    return false;
  }
  val *x = in_val(I, 0);
  if (!x) return false;
  if (x->data && x->node == NONE && mlc_type_numel(&x->type) <= MAX_FOLD_NUMEL) {
    mlc_type t = x->type;
    t.dtype = dt;
    uint8_t *data = alloc_data(I, &t);
    bool is_int = !mlc_dtype_is_float((mlc_dtype)x->type.dtype);
    for (int64_t i = 0; i < mlc_type_numel(&t); i++) put(data, dt, i, get_f(x, i), is_int ? get_i(x, i) : 0, is_int);
    return set_const(I, 0, &t, data);
  }
  uint32_t xn = node_of(I, x);
  if (xn == NONE) return false;
  if (type_of(I, xn)->dtype == dt) return set_out(I, 0, xn); /* as Identity: x + 0 is no copy for bool, nor of -0 */
  mlc_type t = {.dtype = dt};
  return set_out(I, 0, emit(I, MLC_OP_CAST, &xn, 1, NULL, &t));
}

/* MatMul with numpy's rules for 1-D operands. */
static bool op_matmul(imp *I, const op_def *d) {
  (void)d;
  uint32_t a = in(I, 0), b = in(I, 1);
  if (a == NONE || b == NONE) return false;
  mlc_type ta = *type_of(I, a), tb = *type_of(I, b);
  if (ta.rank == 1) { int64_t dm[2] = {1, ta.dim[0]}; a = reshape(I, a, dm, 2); }
  if (tb.rank == 1) { int64_t dm[2] = {tb.dim[0], 1}; b = reshape(I, b, dm, 2); }
  uint32_t y = emit2(I, MLC_OP_MATMUL, a, b);
  if (y != NONE && (ta.rank == 1 || tb.rank == 1)) {
    mlc_type t = *type_of(I, y);
    int64_t dm[MLC_MAX_RANK];
    int r = 0;
    for (int i = 0; i < t.rank; i++) {
      if (ta.rank == 1 && i == t.rank - 2) continue;
      if (tb.rank == 1 && i == t.rank - 1) continue;
      dm[r++] = t.dim[i];
    }
    y = reshape(I, y, dm, r);
  }
  return set_out(I, 0, y);
}

/* Gemm: alpha * A' B' + beta * C. */
static bool op_gemm(imp *I, const op_def *d) {
  (void)d;
  uint32_t a = in(I, 0), b = in(I, 1);
  if (a == NONE || b == NONE) return false;
  if (type_of(I, a)->rank != 2 || type_of(I, b)->rank != 2) { nerr(I, "A and B must be matrices"); return false; }
  if (attr_i(N, "transA", 0)) a = transpose2(I, a, 0, 1);
  uint32_t y = attr_i(N, "transB", 0) ? emit2(I, MLC_OP_LINEAR, a, b) : emit2(I, MLC_OP_MATMUL, a, b);
  double alpha = attr_f(N, "alpha", 1), beta = attr_f(N, "beta", 1);
  if (alpha != 1) y = emit2(I, MLC_OP_MUL, y, like(I, y, alpha));
  if (has_in(I, 2) && beta != 0) {
    uint32_t c = in(I, 2);
    if (beta != 1) c = emit2(I, MLC_OP_MUL, c, like(I, c, beta));
    y = emit2(I, MLC_OP_ADD, y, c);
  }
  return set_out(I, 0, y);
}

static bool op_softmax(imp *I, const op_def *d) {
  uint32_t x = in(I, 0);
  if (x == NONE) return false;
  int axis;
  mlc_type t = *type_of(I, x);
  if (!norm_axis(I, attr_i(N, "axis", I->opset < 13 ? 1 : -1), t.rank, &axis)) return false;
  if (I->opset < 13) {
    /* Before opset 13: over the input seen as [outer, inner], split at axis. */
    int64_t d2[2] = {1, 1};
    for (int i = 0; i < t.rank; i++) d2[i >= axis] *= t.dim[i];
    x = reshape(I, x, d2, 2);
    axis = 1;
  }
  mlc_attrs a = {.axis = axis};
  if (d->k == 0) return set_out(I, 0, reshape(I, emit(I, MLC_OP_SOFTMAX, &x, 1, &a, NULL), t.dim, t.rank));
  /* log softmax: x - m - log(sum(exp(x - m))), m the max along the axis */
  uint32_t s = emit2(I, MLC_OP_SUB, x, reduce(I, MLC_OP_MAX, x, axis, true));
  uint32_t l = emit1(I, MLC_OP_LOG, reduce(I, MLC_OP_SUM, emit1(I, MLC_OP_EXP, s), axis, true));
  return set_out(I, 0, reshape(I, emit2(I, MLC_OP_SUB, s, l), t.dim, t.rank));
}

enum { R_SUM, R_MEAN, R_MAX, R_MIN, R_SUMSQ, R_L1, R_L2, R_LOGSUM, R_LOGSUMEXP, R_PROD };

/* Reduces x over the marked axes, one axis at a time, keeping dims. */
static uint32_t reduce_axes(imp *I, mlc_op op, uint32_t x, const bool *axes, int rank) {
  for (int i = 0; i < rank && x != NONE; i++)
    if (axes[i] && (type_of(I, x)->dim[i] != 1 || op == MLC_OP_SUM)) x = reduce(I, op, x, i, true);
  return x;
}

/* The product over axis, as a tree of products of halves (exact operands,
 * log2(n) multiplications per element). */
static uint32_t prod_axis(imp *I, uint32_t x, int axis) {
  int64_t n = x == NONE ? 1 : type_of(I, x)->dim[axis];
  while (n > 1 && x != NONE) {
    int64_t h = n / 2;
    uint32_t p = emit2(I, MLC_OP_MUL, slice(I, x, axis, 0, h), slice(I, x, axis, h, 2 * h));
    if (n & 1) {
      uint32_t two[2] = {p, slice(I, x, axis, 2 * h, n)};
      mlc_attrs a = {.axis = axis};
      p = emit(I, MLC_OP_CONCAT, two, 2, &a, NULL);
    }
    x = p, n = h + (n & 1);
  }
  return x;
}

static bool op_reduce(imp *I, const op_def *d) {
  uint32_t x = in(I, 0);
  if (x == NONE) return false;
  mlc_type t = *type_of(I, x);
  int64_t ax[MLC_MAX_RANK];
  int nax = 0;
  bool axes_input = d->k == R_SUM ? I->opset >= 13 : I->opset >= 18;
  if (axes_input) {
    if (has_in(I, 1) && !in_ints(I, 1, "axes", ax, MLC_MAX_RANK, &nax)) return false;
    if (attr(N, "axes")) { nerr(I, "axes is an input from opset %d on, not an attribute", d->k == R_SUM ? 13 : 18); return false; }
  } else {
    const Onnx__AttributeProto *a = attr(N, "axes");
    if (a) {
      if (a->n_ints > MLC_MAX_RANK) { nerr(I, "too many axes"); return false; }
      for (size_t i = 0; i < a->n_ints; i++) ax[nax++] = a->ints[i];
    }
  }
  bool sel[MLC_MAX_RANK] = {0};
  if (nax == 0) {
    if (attr_i(N, "noop_with_empty_axes", 0)) return set_out(I, 0, emit2(I, MLC_OP_ADD, x, like(I, x, 0)));
    for (int i = 0; i < t.rank; i++) sel[i] = true;
  }
  for (int i = 0; i < nax; i++) {
    int a;
    if (!norm_axis(I, ax[i], t.rank, &a)) return false;
    sel[a] = true;
  }
  uint32_t y = NONE;
  switch (d->k) {
  case R_SUM: y = reduce_axes(I, MLC_OP_SUM, x, sel, t.rank); break;
  case R_MEAN: y = reduce_axes(I, MLC_OP_MEAN, x, sel, t.rank); break;
  case R_MAX: y = reduce_axes(I, MLC_OP_MAX, x, sel, t.rank); break;
  case R_MIN: y = emit1(I, MLC_OP_NEG, reduce_axes(I, MLC_OP_MAX, emit1(I, MLC_OP_NEG, x), sel, t.rank)); break;
  case R_SUMSQ: y = reduce_axes(I, MLC_OP_SUM, emit2(I, MLC_OP_MUL, x, x), sel, t.rank); break;
  case R_L1: y = reduce_axes(I, MLC_OP_SUM, vabs(I, x), sel, t.rank); break;
  case R_L2: y = emit1(I, MLC_OP_SQRT, reduce_axes(I, MLC_OP_SUM, emit2(I, MLC_OP_MUL, x, x), sel, t.rank)); break;
  case R_LOGSUM: y = emit1(I, MLC_OP_LOG, reduce_axes(I, MLC_OP_SUM, x, sel, t.rank)); break;
  case R_PROD:
    if (t.dtype == MLC_DT_BOOL) { nerr(I, "the input must not be bool"); return false; }
    y = x;
    for (int i = 0; i < t.rank; i++)
      if (sel[i]) y = prod_axis(I, y, i);
    break;
  case R_LOGSUMEXP: {
    uint32_t m = reduce_axes(I, MLC_OP_MAX, x, sel, t.rank);
    y = emit2(I, MLC_OP_ADD, emit1(I, MLC_OP_LOG, reduce_axes(I, MLC_OP_SUM, emit1(I, MLC_OP_EXP, emit2(I, MLC_OP_SUB, x, m)), sel, t.rank)), m);
    break;
  }
  }
  if (y == NONE) return false;
  if (y == x) y = emit2(I, MLC_OP_ADD, x, like(I, x, 0));
  if (!attr_i(N, "keepdims", 1)) {
    int64_t dm[MLC_MAX_RANK];
    int r = 0;
    for (int i = 0; i < t.rank; i++)
      if (!sel[i]) dm[r++] = t.dim[i];
    y = reshape(I, y, dm, r);
  }
  return set_out(I, 0, y);
}

/* ---- layout ---- */

static bool reshape_out(imp *I, val *x, const int64_t *dims, int rank) {
  mlc_type t = x->type;
  t.rank = (uint8_t)rank;
  memcpy(t.dim, dims, (size_t)rank * sizeof *dims);
  if (mlc_type_numel(&t) != mlc_type_numel(&x->type)) {
    char a[96], b[96];
    nerr(I, "cannot reshape %s to %s", mlc_type_str(&x->type, a, sizeof a), mlc_type_str(&t, b, sizeof b));
    return false;
  }
  if (x->data && x->node == NONE) return set_const(I, 0, &t, x->data);
  uint32_t n = node_of(I, x);
  if (n == NONE) return false;
  if (mlc_type_eq(&t, &x->type)) return set_out(I, 0, emit2(I, MLC_OP_ADD, n, like(I, n, 0)));
  return set_out(I, 0, reshape(I, n, dims, rank));
}

static bool op_reshape(imp *I, const op_def *d) {
  (void)d;
  val *x = in_val(I, 0);
  int64_t s[MLC_MAX_RANK + 1];
  int n;
  if (!x || !in_ints(I, 1, "shape", s, MLC_MAX_RANK + 1, &n)) return false;
  if (n > MLC_MAX_RANK) { nerr(I, "reshape to rank %d; mlc supports at most %d", n, MLC_MAX_RANK); return false; }
  bool allowzero = attr_i(N, "allowzero", 0);
  int infer = -1;
  int64_t known = 1;
  for (int i = 0; i < n; i++) {
    if (s[i] == 0 && !allowzero) {
      if (i >= x->type.rank) { nerr(I, "shape[%d] is 0 but the input has rank %d", i, x->type.rank); return false; }
      s[i] = x->type.dim[i];
    }
    if (s[i] == -1) {
      if (infer >= 0) { nerr(I, "more than one -1 in the shape"); return false; }
      infer = i;
    } else if (s[i] < 1 || s[i] > MLC_MAX_NUMEL / known) {
      nerr(I, "shape[%d] is %lld; mlc needs positive sizes", i, (long long)s[i]);
      return false;
    } else {
      known *= s[i];
    }
  }
  if (infer >= 0) {
    int64_t total = mlc_type_numel(&x->type);
    if (total % known) { nerr(I, "cannot infer the -1 in the shape: %lld elements", (long long)total); return false; }
    s[infer] = total / known;
  }
  return reshape_out(I, x, s, n);
}

static bool op_flatten(imp *I, const op_def *d) {
  (void)d;
  val *x = in_val(I, 0);
  if (!x) return false;
  int r = x->type.rank, axis;
  int64_t ax = attr_i(N, "axis", 1);
  if (ax < -r || ax > r) { nerr(I, "axis %lld is out of range for rank %d", (long long)ax, r); return false; }
  axis = (int)(ax < 0 ? ax + r : ax);
  int64_t dm[2] = {1, 1};
  for (int i = 0; i < r; i++) dm[i >= axis] *= x->type.dim[i];
  return reshape_out(I, x, dm, 2);
}

/* Squeeze (k 0) and Unsqueeze (k 1), axes from the input (opset 13). */
static bool op_squeeze(imp *I, const op_def *d) {
  val *x = in_val(I, 0);
  if (!x) return false;
  int64_t ax[MLC_MAX_RANK];
  int nax = 0, r = x->type.rank;
  if (has_in(I, 1) && !in_ints(I, 1, "axes", ax, MLC_MAX_RANK, &nax)) return false;
  if (!attr_ints(I, "axes", 13, ax, MLC_MAX_RANK, &nax)) return false;
  if (d->k == 1 && nax == 0) { nerr(I, "Unsqueeze needs axes"); return false; }
  int out_r = d->k ? r + nax : r;
  if (out_r > MLC_MAX_RANK) { nerr(I, "the result has rank %d; mlc supports at most %d", out_r, MLC_MAX_RANK); return false; }
  bool sel[MLC_MAX_RANK] = {0};
  for (int i = 0; i < nax; i++) {
    int a;
    if (!norm_axis(I, ax[i], d->k ? out_r : r, &a)) return false;
    if (sel[a]) { nerr(I, "axis %lld is given twice", (long long)ax[i]); return false; }
    sel[a] = true;
  }
  int64_t dm[MLC_MAX_RANK];
  int n = 0;
  if (d->k) {
    for (int i = 0, j = 0; i < out_r; i++) dm[n++] = sel[i] ? 1 : x->type.dim[j++];
  } else {
    for (int i = 0; i < r; i++) {
      if (nax == 0 ? x->type.dim[i] == 1 : sel[i]) {
        if (x->type.dim[i] != 1) { nerr(I, "cannot squeeze axis %d of size %lld", i, (long long)x->type.dim[i]); return false; }
        continue;
      }
      dm[n++] = x->type.dim[i];
    }
  }
  return reshape_out(I, x, dm, n);
}

static bool op_transpose(imp *I, const op_def *d) {
  (void)d;
  uint32_t x = in(I, 0);
  if (x == NONE) return false;
  int r = type_of(I, x)->rank, perm[MLC_MAX_RANK];
  const Onnx__AttributeProto *a = attr(N, "perm");
  bool seen[MLC_MAX_RANK] = {0};
  if (a && (int)a->n_ints != r) { nerr(I, "perm has %zu entries for rank %d", a->n_ints, r); return false; }
  for (int i = 0; i < r; i++) {
    int64_t p = a ? a->ints[i] : r - 1 - i;
    if (p < 0 || p >= r || seen[p]) { nerr(I, "perm is not a permutation of 0..%d", r - 1); return false; }
    seen[p] = true;
    perm[i] = (int)p;
  }
  uint32_t y = permute(I, x, perm, r);
  if (y == x) y = emit2(I, MLC_OP_ADD, x, like(I, x, 0));
  return set_out(I, 0, y);
}

/* Integer tensors known now, concatenated at compile time. */
static bool fold_concat(imp *I, bool *done) {
  *done = false;
  val *v[64];
  uint32_t n = (uint32_t)I->n->n_input;
  for (uint32_t k = 0; k < n; k++)
    if (!foldable(v[k] = in_val(I, k)) || v[k]->type.dtype != v[0]->type.dtype || v[k]->type.rank != v[0]->type.rank)
      return true;
  mlc_type t = v[0]->type;
  int axis;
  if (!attr(N, "axis")) { nerr(I, "the attribute axis is required"); return false; }
  if (!norm_axis(I, attr_i(N, "axis", 0), t.rank, &axis)) return false;
  t.dim[axis] = 0;
  for (uint32_t k = 0; k < n; k++) {
    for (int i = 0; i < t.rank; i++)
      if (i != axis && v[k]->type.dim[i] != t.dim[i]) return true; /* the op reports it */
    t.dim[axis] += v[k]->type.dim[axis];
  }
  if (mlc_type_numel(&t) > MAX_FOLD_NUMEL) return true;
  int64_t outer = 1, inner = 1, o = 0;
  for (int i = 0; i < axis; i++) outer *= t.dim[i];
  for (int i = axis + 1; i < t.rank; i++) inner *= t.dim[i];
  uint8_t *data = alloc_data(I, &t);
  for (int64_t r = 0; r < outer; r++)
    for (uint32_t k = 0; k < n; k++) {
      int64_t len = v[k]->type.dim[axis] * inner;
      for (int64_t j = 0; j < len; j++) put(data, t.dtype, o++, 0, get_i(v[k], r * len + j), true);
    }
  *done = true;
  return set_const(I, 0, &t, data);
}

static bool op_concat(imp *I, const op_def *d) {
  (void)d;
  uint32_t ins[64], n = 0;
  if (I->n->n_input == 0 || I->n->n_input > 64) { nerr(I, "needs 1 to 64 inputs"); return false; }
  bool folded;
  if (!fold_concat(I, &folded)) return false;
  if (folded) return true;
  for (uint32_t k = 0; k < I->n->n_input; k++) {
    ins[n] = in(I, k);
    if (ins[n] == NONE) return false;
    n++;
  }
  mlc_attrs a = {0};
  if (!attr(N, "axis")) { nerr(I, "the attribute axis is required"); return false; }
  if (!norm_axis(I, attr_i(N, "axis", 0), type_of(I, ins[0])->rank, &a.axis)) return false;
  if (n == 1) return set_out(I, 0, emit2(I, MLC_OP_ADD, ins[0], like(I, ins[0], 0)));
  return set_out(I, 0, emit(I, MLC_OP_CONCAT, ins, n, &a, NULL));
}

static bool op_slice(imp *I, const op_def *d) {
  (void)d;
  uint32_t x = in(I, 0);
  if (x == NONE) return false;
  mlc_type t = *type_of(I, x);
  int64_t st[MLC_MAX_RANK], en[MLC_MAX_RANK], ax[MLC_MAX_RANK], sp[MLC_MAX_RANK];
  int ns, ne, na = 0, nst = 0;
  if (!in_ints(I, 1, "starts", st, MLC_MAX_RANK, &ns) || !in_ints(I, 2, "ends", en, MLC_MAX_RANK, &ne)) return false;
  if (has_in(I, 3) && !in_ints(I, 3, "axes", ax, MLC_MAX_RANK, &na)) return false;
  if (has_in(I, 4) && !in_ints(I, 4, "steps", sp, MLC_MAX_RANK, &nst)) return false;
  if (ne != ns || (has_in(I, 3) && na != ns) || (has_in(I, 4) && nst != ns)) {
    nerr(I, "starts, ends, axes and steps must have the same length");
    return false;
  }
  bool seen[MLC_MAX_RANK] = {0};
  uint32_t y = x;
  for (int i = 0; i < ns && y != NONE; i++) {
    int axis;
    if (!norm_axis(I, has_in(I, 3) ? ax[i] : i, t.rank, &axis)) return false;
    if (seen[axis]) { nerr(I, "axis %d is sliced twice", axis); return false; }
    seen[axis] = true;
    if (has_in(I, 4) && sp[i] != 1) { nerr(I, "unsupported step %lld (mlc slices with step 1 only)", (long long)sp[i]); return false; }
    int64_t n = t.dim[axis], s = st[i], e = en[i];
    s = s < 0 ? (s < -n ? 0 : s + n) : (s > n ? n : s);
    e = e < 0 ? (e < -n ? 0 : e + n) : (e > n ? n : e);
    if (e <= s) { nerr(I, "the slice of axis %d is empty; mlc has no empty tensors", axis); return false; }
    y = slice(I, y, axis, s, e);
  }
  if (y == x) y = emit2(I, MLC_OP_ADD, x, like(I, x, 0));
  return set_out(I, 0, y);
}

static bool op_split(imp *I, const op_def *d) {
  (void)d;
  uint32_t x = in(I, 0);
  if (x == NONE) return false;
  mlc_type t = *type_of(I, x);
  int axis;
  if (!norm_axis(I, attr_i(N, "axis", 0), t.rank, &axis)) return false;
  uint32_t nout = (uint32_t)I->n->n_output;
  int64_t sz[64];
  int n = 0;
  if (nout == 0 || nout > 64) { nerr(I, "needs 1 to 64 outputs"); return false; }
  if (!attr_ints(I, "split", 13, sz, 64, &n)) return false;
  if (has_in(I, 1) || n) {
    if (!n && !in_ints(I, 1, "split", sz, 64, &n)) return false;
    if ((uint32_t)n != nout) { nerr(I, "split has %d sizes for %u outputs", n, nout); return false; }
  } else {
    int64_t parts = attr(N, "num_outputs") ? attr_i(N, "num_outputs", 1) : nout;
    if (parts != (int64_t)nout) { nerr(I, "num_outputs is %lld but the node has %u outputs", (long long)parts, nout); return false; }
    int64_t each = (t.dim[axis] + parts - 1) / parts;
    for (uint32_t k = 0; k < nout; k++) sz[k] = k + 1 < nout ? each : t.dim[axis] - each * (nout - 1);
    n = (int)nout;
  }
  int64_t at = 0;
  for (int k = 0; k < n; k++) {
    if (sz[k] < 1 || at + sz[k] > t.dim[axis]) { nerr(I, "split sizes do not add up to dimension %d (%lld)", axis, (long long)t.dim[axis]); return false; }
    uint32_t y = slice(I, x, axis, at, at + sz[k]);
    if (y == x) y = emit2(I, MLC_OP_ADD, x, like(I, x, 0));
    if (!set_out(I, (uint32_t)k, y)) return false;
    at += sz[k];
  }
  if (at != t.dim[axis]) { nerr(I, "split sizes add up to %lld, not %lld", (long long)at, (long long)t.dim[axis]); return false; }
  return true;
}

/* numpy broadcast of two shapes; false if they do not broadcast. */
static bool broadcast_shape(const mlc_type *a, const int64_t *b, int rb, mlc_type *out) {
  int r = a->rank > rb ? a->rank : rb;
  *out = (mlc_type){.dtype = a->dtype, .rank = (uint8_t)r};
  for (int i = 0; i < r; i++) {
    int64_t x = i - (r - a->rank) >= 0 ? a->dim[i - (r - a->rank)] : 1, y = i - (r - rb) >= 0 ? b[i - (r - rb)] : 1;
    if (x != y && x != 1 && y != 1) return false;
    out->dim[i] = x == 1 ? y : x;
  }
  return true;
}

static bool op_expand(imp *I, const op_def *d) {
  (void)d;
  uint32_t x = in(I, 0);
  int64_t s[MLC_MAX_RANK];
  int n;
  if (x == NONE || !in_ints(I, 1, "shape", s, MLC_MAX_RANK, &n)) return false;
  mlc_type t;
  if (!broadcast_shape(type_of(I, x), s, n, &t)) { nerr(I, "the input does not broadcast to the shape"); return false; }
  for (int i = 0; i < t.rank; i++)
    if (t.dim[i] < 1) { nerr(I, "the shape has a dimension of %lld", (long long)t.dim[i]); return false; }
  if (mlc_type_eq(&t, type_of(I, x))) return set_out(I, 0, emit2(I, MLC_OP_ADD, x, like(I, x, 0)));
  return set_out(I, 0, emit(I, MLC_OP_BROADCAST, &x, 1, NULL, &t));
}

static bool op_tile(imp *I, const op_def *d) {
  (void)d;
  uint32_t x = in(I, 0);
  int64_t rep[MLC_MAX_RANK];
  int n;
  if (x == NONE || !in_ints(I, 1, "repeats", rep, MLC_MAX_RANK, &n)) return false;
  int r = type_of(I, x)->rank;
  if (n != r) { nerr(I, "repeats has %d values for rank %d", n, r); return false; }
  uint32_t y = x;
  for (int i = 0; i < r && y != NONE; i++) {
    if (rep[i] < 1 || rep[i] > 64) { nerr(I, "unsupported repeat count %lld (1 to 64)", (long long)rep[i]); return false; }
    if (rep[i] == 1) continue;
    uint32_t ins[64];
    for (int k = 0; k < rep[i]; k++) ins[k] = y;
    mlc_attrs a = {.axis = i};
    y = emit(I, MLC_OP_CONCAT, ins, (uint32_t)rep[i], &a, NULL);
  }
  if (y == x) y = emit2(I, MLC_OP_ADD, x, like(I, x, 0));
  return set_out(I, 0, y);
}

/* DepthToSpace (k 0) and SpaceToDepth (k 1) as reshape, transpose, reshape. */
static bool op_depth_space(imp *I, const op_def *d) {
  uint32_t x = in(I, 0);
  if (x == NONE) return false;
  mlc_type t = *type_of(I, x);
  int64_t b = attr_i(N, "blocksize", 0);
  if (t.rank != 4 || b < 1) { nerr(I, "needs a 4-D input and a positive blocksize"); return false; }
  int64_t n = t.dim[0], c = t.dim[1], h = t.dim[2], w = t.dim[3];
  if (d->k == 0) {
    if (c % (b * b)) { nerr(I, "channels %lld do not divide by blocksize^2", (long long)c); return false; }
    bool crd = attr_s(N, "mode", "DCR", "CRD");
    int64_t s1[6] = {n, b, b, c / (b * b), h, w}, s2[6] = {n, c / (b * b), b, b, h, w};
    static const int p1[6] = {0, 3, 4, 1, 5, 2}, p2[6] = {0, 1, 4, 2, 5, 3};
    uint32_t y = permute(I, reshape(I, x, crd ? s2 : s1, 6), crd ? p2 : p1, 6);
    int64_t o[4] = {n, c / (b * b), h * b, w * b};
    return set_out(I, 0, reshape(I, y, o, 4));
  }
  if (h % b || w % b) { nerr(I, "height and width must divide by the blocksize"); return false; }
  int64_t s[6] = {n, c, h / b, b, w / b, b};
  static const int p[6] = {0, 3, 5, 1, 2, 4};
  uint32_t y = permute(I, reshape(I, x, s, 6), p, 6);
  int64_t o[4] = {n, c * b * b, h / b, w / b};
  return set_out(I, 0, reshape(I, y, o, 4));
}

/* Gather along axis: the embedding op on data seen as [n, rest]. */
static bool op_gather(imp *I, const op_def *d) {
  (void)d;
  uint32_t x = in(I, 0);
  val *iv = in_val(I, 1);
  if (x == NONE || !iv) return false;
  mlc_type t = *type_of(I, x), ti = iv->type;
  int axis;
  if (!norm_axis(I, attr_i(N, "axis", 0), t.rank, &axis)) return false;
  if (mlc_dtype_is_float((mlc_dtype)ti.dtype) || ti.dtype == MLC_DT_BOOL) { nerr(I, "indices must be integers"); return false; }
  if (t.rank - 1 + ti.rank > MLC_MAX_RANK) { nerr(I, "the result has rank above %d", MLC_MAX_RANK); return false; }
  val *xv = in_val(I, 0);
  if (iv->data && foldable(xv) && mlc_type_numel(&ti) <= MAX_FOLD_NUMEL) {
    /* Integers known now (a Shape's dims): gathered at compile time. */
    mlc_type o = {.dtype = t.dtype};
    int64_t outer = 1, inner = 1, ni = mlc_type_numel(&ti), D = t.dim[axis], w = 0;
    for (int i = 0; i < axis; i++) o.dim[o.rank++] = t.dim[i], outer *= t.dim[i];
    for (int i = 0; i < ti.rank; i++) o.dim[o.rank++] = ti.dim[i];
    for (int i = axis + 1; i < t.rank; i++) o.dim[o.rank++] = t.dim[i], inner *= t.dim[i];
    if (mlc_type_numel(&o) <= MAX_FOLD_NUMEL) {
      uint8_t *data = alloc_data(I, &o);
      for (int64_t r = 0; r < outer; r++)
        for (int64_t j = 0; j < ni; j++) {
          int64_t k = get_i(iv, j);
          if (k < -D || k >= D) { nerr(I, "index %lld is out of range for dimension %lld", (long long)k, (long long)D); return false; }
          if (k < 0) k += D;
          for (int64_t c = 0; c < inner; c++) put(data, o.dtype, w++, 0, get_i(xv, (r * D + k) * inner + c), true);
        }
      return set_const(I, 0, &o, data);
    }
  }
  uint32_t idx;
  if (iv->data) {
    /* Indices known now: negative ones counted from the end, all checked. */
    uint8_t *data = alloc_data(I, &ti);
    bool negative = false;
    for (int64_t i = 0; i < mlc_type_numel(&ti); i++) {
      int64_t k = get_i(iv, i);
      if (k < -t.dim[axis] || k >= t.dim[axis]) { nerr(I, "index %lld is out of range for dimension %lld", (long long)k, (long long)t.dim[axis]); return false; }
      negative |= k < 0;
      put(data, ti.dtype, i, 0, k < 0 ? k + t.dim[axis] : k, true);
    }
    val tmp = {.name = mlc_arena_printf(I->a, "%s.from_start", iv->name), .node = NONE, .type = ti, .data = data};
    idx = negative ? node_of(I, &tmp) : node_of(I, iv);
  } else {
    /* Indices known at run time: i + n * [i < 0], with [i < 0] = min(relu(-i), 1)
     * in integer arithmetic. */
    idx = node_of(I, iv);
    uint32_t neg = emit1(I, MLC_OP_RELU, emit1(I, MLC_OP_NEG, idx));
    uint32_t ind = emit2(I, MLC_OP_SUB, neg, emit1(I, MLC_OP_RELU, emit2(I, MLC_OP_SUB, neg, like(I, idx, 1))));
    idx = emit2(I, MLC_OP_ADD, idx, emit2(I, MLC_OP_MUL, ind, like(I, idx, (double)t.dim[axis])));
  }
  /* Move the axis to the front, gather rows of [n, rest], move it back. */
  int perm[MLC_MAX_RANK], r = t.rank;
  perm[0] = axis;
  for (int i = 0, j = 1; i < r; i++)
    if (i != axis) perm[j++] = i;
  uint32_t xt = permute(I, x, perm, r);
  int64_t rest = 1;
  for (int i = 1; i < r; i++) rest *= type_of(I, xt == NONE ? x : xt)->dim[i];
  int64_t dm[2] = {t.dim[axis], rest};
  uint32_t y = emit2(I, MLC_OP_EMBEDDING, reshape(I, xt, dm, 2), idx);
  if (y == NONE) return false;
  /* y: indices' dims, then the other dims of x in order */
  int64_t od[MLC_MAX_RANK];
  int n = 0;
  for (int i = 0; i < ti.rank; i++) od[n++] = ti.dim[i];
  for (int i = 0; i < r; i++)
    if (i != axis) od[n++] = t.dim[i];
  if (n == 0) od[n++] = 1;
  y = reshape(I, y, od, n);
  if (axis > 0 && ti.rank > 0) {
    /* bring the indices' dims to position axis */
    int p2[MLC_MAX_RANK], q = 0;
    for (int i = 0; i < axis; i++) p2[q++] = ti.rank + i;
    for (int i = 0; i < ti.rank; i++) p2[q++] = i;
    for (int i = ti.rank + axis; i < n; i++) p2[q++] = i;
    y = permute(I, y, p2, n);
  }
  if (ti.rank == 0 && r == 1) y = reshape(I, y, od, 0);
  return set_out(I, 0, y);
}

/* ---- normalisations ---- */

/* Channel parameter p[C] reshaped to broadcast against x[N, C, ...]. */
static uint32_t per_channel(imp *I, uint32_t p, int rank) {
  if (p == NONE) return NONE;
  const mlc_type *t = type_of(I, p);
  int64_t dm[MLC_MAX_RANK] = {t->dim[0]};
  for (int i = 1; i < rank - 1; i++) dm[i] = 1;
  return reshape(I, p, dm, rank - 1);
}

static bool op_batchnorm(imp *I, const op_def *d) {
  (void)d;
  if (attr_i(N, "training_mode", 0)) { nerr(I, "unsupported attribute value training_mode=1 (mlc lowers inference only)"); return false; }
  if (!only_outputs(I, 1)) return false;
  uint32_t x = in(I, 0);
  if (x == NONE) return false;
  int r = type_of(I, x)->rank;
  if (r < 2) { nerr(I, "the input must have a channel dimension"); return false; }
  uint32_t sc = per_channel(I, in(I, 1), r), b = per_channel(I, in(I, 2), r), m = per_channel(I, in(I, 3), r),
           v = per_channel(I, in(I, 4), r);
  uint32_t k = emit2(I, MLC_OP_MUL, sc, emit1(I, MLC_OP_RSQRT, emit2(I, MLC_OP_ADD, v, like(I, v, attr_f(N, "epsilon", 1e-5)))));
  return set_out(I, 0, emit2(I, MLC_OP_ADD, emit2(I, MLC_OP_MUL, emit2(I, MLC_OP_SUB, x, m), k), b));
}

/* Normalises x over the marked axes: (x - mean) / sqrt(var + eps); also
 * gives the mean and 1/sqrt(var + eps), with the axes kept. */
static uint32_t normalize(imp *I, uint32_t x, const bool *sel, int r, double eps, uint32_t *mean, uint32_t *rstd) {
  uint32_t m = reduce_axes(I, MLC_OP_MEAN, x, sel, r);
  uint32_t c = emit2(I, MLC_OP_SUB, x, m);
  uint32_t var = reduce_axes(I, MLC_OP_MEAN, emit2(I, MLC_OP_MUL, c, c), sel, r);
  uint32_t rs = emit1(I, MLC_OP_RSQRT, emit2(I, MLC_OP_ADD, var, like(I, var, eps)));
  if (mean) *mean = m;
  if (rstd) *rstd = rs;
  return emit2(I, MLC_OP_MUL, c, rs);
}

static bool op_layernorm(imp *I, const op_def *d) {
  (void)d;
  uint32_t x = in(I, 0);
  if (x == NONE) return false;
  mlc_type t = *type_of(I, x);
  int axis;
  if (!norm_axis(I, attr_i(N, "axis", -1), t.rank, &axis)) return false;
  if (attr_i(N, "stash_type", 1) != 1) { nerr(I, "unsupported attribute value stash_type=%lld", (long long)attr_i(N, "stash_type", 1)); return false; }
  double eps = attr_f(N, "epsilon", 1e-5);
  /* [outer, inner]: the IR's layernorm normalises the last axis. */
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < t.rank; i++) *(i < axis ? &outer : &inner) *= t.dim[i];
  int64_t d2[2] = {outer, inner};
  uint32_t x2 = reshape(I, x, d2, 2);
  mlc_attrs a = {.f = eps};
  uint32_t y = reshape(I, emit(I, MLC_OP_LAYERNORM, &x2, 1, &a, NULL), t.dim, t.rank);
  y = emit2(I, MLC_OP_MUL, y, in(I, 1));
  if (has_in(I, 2)) y = emit2(I, MLC_OP_ADD, y, in(I, 2));
  if (!set_out(I, 0, y)) return false;
  if (I->n->n_output > 1) {
    /* Mean and InvStdDev: the statistics, with the normalised axes kept as 1. */
    bool sel[2] = {false, true};
    uint32_t m, rs;
    normalize(I, x2, sel, 2, eps, &m, &rs);
    int64_t sd[MLC_MAX_RANK];
    for (int i = 0; i < t.rank; i++) sd[i] = i < axis ? t.dim[i] : 1;
    if (!set_out(I, 1, reshape(I, m, sd, t.rank))) return false;
    if (I->n->n_output > 2 && !set_out(I, 2, reshape(I, rs, sd, t.rank))) return false;
  }
  return true;
}

static bool op_instancenorm(imp *I, const op_def *d) {
  (void)d;
  uint32_t x = in(I, 0);
  if (x == NONE) return false;
  int r = type_of(I, x)->rank;
  if (r < 3) { nerr(I, "the input must be [N, C, D1, ...]"); return false; }
  bool sel[MLC_MAX_RANK] = {0};
  for (int i = 2; i < r; i++) sel[i] = true;
  uint32_t y = normalize(I, x, sel, r, attr_f(N, "epsilon", 1e-5), NULL, NULL);
  y = emit2(I, MLC_OP_ADD, emit2(I, MLC_OP_MUL, y, per_channel(I, in(I, 1), r)), per_channel(I, in(I, 2), r));
  return set_out(I, 0, y);
}

static bool op_mvn(imp *I, const op_def *d) {
  (void)d;
  uint32_t x = in(I, 0);
  if (x == NONE) return false;
  int r = type_of(I, x)->rank;
  bool sel[MLC_MAX_RANK] = {0};
  const Onnx__AttributeProto *a = attr(N, "axes");
  int64_t def[3] = {0, 2, 3};
  size_t n = a ? a->n_ints : 3;
  for (size_t i = 0; i < n; i++) {
    int ax;
    if (!norm_axis(I, a ? a->ints[i] : def[i], r, &ax)) return false;
    sel[ax] = true;
  }
  /* ONNX's definition: (x - E[x]) / sqrt(E[(x - E[x])^2]) with eps 1e-9 */
  return set_out(I, 0, normalize(I, x, sel, r, 1e-9, NULL, NULL));
}

static bool op_lpnorm(imp *I, const op_def *d) {
  (void)d;
  uint32_t x = in(I, 0);
  if (x == NONE) return false;
  int axis;
  int64_t p = attr_i(N, "p", 2);
  if (!norm_axis(I, attr_i(N, "axis", -1), type_of(I, x)->rank, &axis)) return false;
  if (p != 1 && p != 2) { nerr(I, "unsupported attribute value p=%lld", (long long)p); return false; }
  uint32_t nrm = p == 1 ? reduce(I, MLC_OP_SUM, vabs(I, x), axis, true)
                        : emit1(I, MLC_OP_SQRT, reduce(I, MLC_OP_SUM, emit2(I, MLC_OP_MUL, x, x), axis, true));
  return set_out(I, 0, emit2(I, MLC_OP_DIV, x, nrm));
}

static bool op_global_pool(imp *I, const op_def *d) {
  uint32_t x = in(I, 0);
  if (x == NONE) return false;
  int r = type_of(I, x)->rank;
  if (r < 3) { nerr(I, "the input must be [N, C, D1, ...]"); return false; }
  bool sel[MLC_MAX_RANK] = {0};
  for (int i = 2; i < r; i++) sel[i] = true;
  return set_out(I, 0, reduce_axes(I, (mlc_op)d->k, x, sel, r));
}

static bool op_dropout(imp *I, const op_def *d) {
  (void)d;
  if (!only_outputs(I, 1)) return false;
  if (has_in(I, 2)) {
    val *tm = in_const(I, 2, "training_mode");
    if (!tm) return false;
    if (get_i(tm, 0)) { nerr(I, "unsupported training_mode true (mlc lowers inference only)"); return false; }
  }
  uint32_t x = in(I, 0);
  return set_out(I, 0, emit2(I, MLC_OP_ADD, x, like(I, x, 0)));
}

/* ---- compile-time tensors ---- */

static bool op_constant(imp *I, const op_def *d) {
  (void)d;
  if (I->n->n_attribute != 1) { nerr(I, "needs exactly one value attribute"); return false; }
  const Onnx__AttributeProto *a = I->n->attribute[0];
  const char *an = a->name ? a->name : "";
  mlc_type t = {0};
  uint8_t *data;
  if (!strcmp(an, "value") && a->t) {
    const uint8_t *dd;
    if (!read_tensor(I, a->t, "value", &t, &dd)) return false;
    return set_const(I, 0, &t, dd);
  }
  if (!strcmp(an, "value_float") || !strcmp(an, "value_int")) {
    t.dtype = an[6] == 'f' ? MLC_DT_F32 : MLC_DT_I64;
    data = alloc_data(I, &t);
    put(data, t.dtype, 0, a->f, a->i, t.dtype == MLC_DT_I64);
    return set_const(I, 0, &t, data);
  }
  if (!strcmp(an, "value_floats") || !strcmp(an, "value_ints")) {
    bool f = an[6] == 'f';
    size_t n = f ? a->n_floats : a->n_ints;
    if (n == 0) { nerr(I, "an empty %s; mlc has no empty tensors", an); return false; }
    t = (mlc_type){.dtype = f ? MLC_DT_F32 : MLC_DT_I64, .rank = 1, .dim = {(int64_t)n}};
    data = alloc_data(I, &t);
    for (size_t i = 0; i < n; i++) put(data, t.dtype, (int64_t)i, f ? a->floats[i] : 0, f ? 0 : a->ints[i], !f);
    return set_const(I, 0, &t, data);
  }
  nerr(I, "unsupported attribute '%s'", an);
  return false;
}

static bool op_shape(imp *I, const op_def *d) {
  val *x = in_val(I, 0);
  if (!x) return false;
  int r = x->type.rank;
  mlc_type t = {.dtype = MLC_DT_I64, .rank = d->k ? 0 : 1};
  if (d->k) { /* Size */
    uint8_t *data = alloc_data(I, &t);
    put(data, t.dtype, 0, 0, mlc_type_numel(&x->type), true);
    return set_const(I, 0, &t, data);
  }
  int64_t s = attr_i(N, "start", 0), e = attr_i(N, "end", r);
  s = s < 0 ? (s + r < 0 ? 0 : s + r) : (s > r ? r : s);
  e = e < 0 ? (e + r < 0 ? 0 : e + r) : (e > r ? r : e);
  if (e <= s) { nerr(I, "the shape slice is empty; mlc has no empty tensors"); return false; }
  t.dim[0] = e - s;
  uint8_t *data = alloc_data(I, &t);
  for (int64_t i = s; i < e; i++) put(data, t.dtype, i - s, 0, x->type.dim[i], true);
  return set_const(I, 0, &t, data);
}

static bool op_constant_of_shape(imp *I, const op_def *d) {
  (void)d;
  int64_t s[MLC_MAX_RANK];
  int n;
  if (!in_ints(I, 0, "shape", s, MLC_MAX_RANK, &n)) return false;
  mlc_type t = {.dtype = MLC_DT_F32};
  if (!dims_numel(I, s, (size_t)n, "the shape", &t)) return false;
  val v = {.type = {.dtype = MLC_DT_F32}, .data = (const uint8_t *)"\0\0\0\0"};
  const Onnx__AttributeProto *a = attr(N, "value");
  if (a && a->t) {
    mlc_type vt;
    const uint8_t *vd;
    if (!read_tensor(I, a->t, "value", &vt, &vd)) return false;
    if (mlc_type_numel(&vt) != 1) { nerr(I, "value must hold one element"); return false; }
    v.type = vt, v.data = vd;
  }
  t.dtype = v.type.dtype;
  if (mlc_type_numel(&t) > MAX_FOLD_NUMEL) {
    /* too large to hold: a scalar broadcast at run time */
    uint32_t c = scalar(I, get_f(&v, 0), t.dtype);
    return set_out(I, 0, emit(I, MLC_OP_BROADCAST, &c, 1, NULL, &t));
  }
  uint8_t *data = alloc_data(I, &t);
  size_t esz = (size_t)mlc_dtype_size((mlc_dtype)t.dtype);
  for (int64_t i = 0; i < mlc_type_numel(&t); i++) memcpy(data + (size_t)i * esz, v.data, esz);
  return set_const(I, 0, &t, data);
}

static bool op_range(imp *I, const op_def *d) {
  (void)d;
  val *s = in_const(I, 0, "start"), *l = in_const(I, 1, "limit"), *dl = in_const(I, 2, "delta");
  if (!s || !l || !dl) return false;
  double a = get_f(s, 0), b = get_f(l, 0), st = get_f(dl, 0);
  if (st == 0) { nerr(I, "delta is 0"); return false; }
  double cnt = ceil((b - a) / st);
  if (!(cnt >= 1) || cnt > MAX_FOLD_NUMEL) { nerr(I, "the range has %g elements (mlc needs 1 to %d)", cnt, MAX_FOLD_NUMEL); return false; }
  mlc_type t = {.dtype = s->type.dtype, .rank = 1, .dim = {(int64_t)cnt}};
  uint8_t *data = alloc_data(I, &t);
  bool is_int = !mlc_dtype_is_float((mlc_dtype)t.dtype);
  for (int64_t i = 0; i < t.dim[0]; i++)
    put(data, t.dtype, i, a + (double)i * st, is_int ? get_i(s, 0) + i * get_i(dl, 0) : 0, is_int);
  return set_const(I, 0, &t, data);
}

static bool op_eyelike(imp *I, const op_def *d) {
  (void)d;
  val *x = in_val(I, 0);
  if (!x) return false;
  if (x->type.rank != 2) { nerr(I, "the input must be a matrix"); return false; }
  mlc_type t = x->type;
  if (attr(N, "dtype") && !want_dtype(I, (int)attr_i(N, "dtype", 1), "dtype", &t.dtype)) return false;
  if (mlc_type_numel(&t) > MAX_FOLD_NUMEL) { nerr(I, "more than %d elements", MAX_FOLD_NUMEL); return false; }
  int64_t k = attr_i(N, "k", 0);
  uint8_t *data = alloc_data(I, &t);
  for (int64_t i = 0; i < t.dim[0]; i++)
    for (int64_t j = 0; j < t.dim[1]; j++) put(data, t.dtype, i * t.dim[1] + j, j - i == k, j - i == k, true);
  return set_const(I, 0, &t, data);
}

/* ---- comparisons, logic and selection ----
 *
 * The IR has no comparison or select op, so these are built from relu, cast
 * and integer arithmetic, exactly.  A flag is an i32 tensor of 0s and 1s.
 * The building block is pos(x) = [relu(x) != 0]: x > 0, and also true for a
 * NaN (relu lets NaN through, and a cast to bool counts NaN as nonzero). */

static uint32_t cast_to(imp *I, uint32_t x, uint8_t dt) {
  if (x == NONE || type_of(I, x)->dtype == dt) return x;
  mlc_type t = {.dtype = dt};
  return emit(I, MLC_OP_CAST, &x, 1, NULL, &t);
}

static uint32_t f_nz(imp *I, uint32_t x) { return cast_to(I, cast_to(I, x, MLC_DT_BOOL), MLC_DT_I32); }
static uint32_t f_pos(imp *I, uint32_t x) { return f_nz(I, emit1(I, MLC_OP_RELU, x)); }
static uint32_t f_not(imp *I, uint32_t f) { return emit2(I, MLC_OP_SUB, like(I, f, 1), f); }
static uint32_t f_and(imp *I, uint32_t f, uint32_t g) { return emit2(I, MLC_OP_MUL, f, g); }

/* Floats: x is NaN when both relu(x) and relu(-x) are nonzero. */
static uint32_t f_isnan(imp *I, uint32_t x) { return f_and(I, f_pos(I, x), f_pos(I, emit1(I, MLC_OP_NEG, x))); }
/* Floats: x * 0 is NaN for an infinity and a NaN only. */
static uint32_t f_isinf(imp *I, uint32_t x) {
  return f_and(I, f_isnan(I, emit2(I, MLC_OP_MUL, x, like(I, x, 0))), f_not(I, f_isnan(I, x)));
}

/* Integers: x >= 0 (exact for every value, INT_MIN included). */
static uint32_t f_nonneg(imp *I, uint32_t x) { return emit2(I, MLC_OP_ADD, f_pos(I, x), f_not(I, f_nz(I, x))); }

enum { C_EQ, C_LT, C_LE, C_GT, C_GE };

/* [a > b] (k C_GT), [a >= b] (C_GE) or [a == b] (C_EQ), broadcasting.
 * Floats: d = a - b has the sign of the comparison (IEEE subtraction gives 0
 * only for equal operands), and NaN where an operand is NaN or both are the
 * same infinity; that last case is added back.  Integers: d can wrap, so
 * operands of different signs are compared by their signs. */
static uint32_t compare(imp *I, int k, uint32_t a, uint32_t b) {
  if (a == NONE || b == NONE) return NONE;
  uint8_t dt = type_of(I, a)->dtype;
  if (dt != type_of(I, b)->dtype) { nerr(I, "the inputs have different dtypes"); return NONE; }
  if (dt == MLC_DT_BOOL) a = cast_to(I, a, MLC_DT_I32), b = cast_to(I, b, MLC_DT_I32), dt = MLC_DT_I32;
  if (dt == MLC_DT_F16 || dt == MLC_DT_BF16) a = cast_to(I, a, MLC_DT_F32), b = cast_to(I, b, MLC_DT_F32), dt = MLC_DT_F32;
  uint32_t d = emit2(I, MLC_OP_SUB, a, b);
  if (mlc_dtype_is_float((mlc_dtype)dt)) {
    uint32_t gt0 = f_pos(I, d), lt0 = f_pos(I, emit1(I, MLC_OP_NEG, d)); /* both 1 for NaN */
    if (k == C_GT) return f_and(I, gt0, f_not(I, lt0));
    uint32_t same_inf = f_and(I, f_and(I, f_isinf(I, a), f_isinf(I, b)),
                              f_not(I, f_nz(I, emit2(I, MLC_OP_SUB, f_pos(I, a), f_pos(I, b)))));
    uint32_t base = k == C_GE ? f_not(I, lt0) : f_and(I, f_not(I, gt0), f_not(I, lt0));
    return emit2(I, MLC_OP_ADD, base, same_inf);
  }
  if (k == C_EQ) return f_not(I, f_nz(I, d));
  if (k == C_GE) return f_not(I, compare(I, C_GT, b, a));
  uint32_t na = f_nonneg(I, a), nb = f_nonneg(I, b);
  uint32_t same = f_not(I, f_nz(I, emit2(I, MLC_OP_SUB, na, nb)));
  return emit2(I, MLC_OP_ADD, f_and(I, na, f_not(I, nb)), f_and(I, same, f_pos(I, d)));
}

/* Equal, Less, LessOrEqual, Greater, GreaterOrEqual. */
static bool op_compare(imp *I, const op_def *d) {
  uint32_t a = in(I, 0), b = in(I, 1), f;
  if (a == NONE || b == NONE) return false;
  switch (d->k) {
  case C_LT: f = compare(I, C_GT, b, a); break;
  case C_LE: f = compare(I, C_GE, b, a); break;
  default: f = compare(I, d->k, a, b); break;
  }
  return set_out(I, 0, cast_to(I, f, MLC_DT_BOOL));
}

static bool need_bool(imp *I, uint32_t x, uint32_t k) {
  if (x == NONE) return false;
  if (type_of(I, x)->dtype != MLC_DT_BOOL) { nerr(I, "input %u must be bool", k); return false; }
  return true;
}

/* And, Or, Xor, Not on bool tensors, as i32 arithmetic. */
static bool op_logic(imp *I, const op_def *d) {
  uint32_t a = in(I, 0);
  if (!need_bool(I, a, 0)) return false;
  a = cast_to(I, a, MLC_DT_I32);
  if (d->k == '!') return set_out(I, 0, cast_to(I, f_not(I, a), MLC_DT_BOOL));
  uint32_t b = in(I, 1);
  if (!need_bool(I, b, 1)) return false;
  b = cast_to(I, b, MLC_DT_I32);
  uint32_t y = d->k == '&' ? emit2(I, MLC_OP_MUL, a, b) : d->k == '|' ? emit2(I, MLC_OP_ADD, a, b) : emit2(I, MLC_OP_SUB, a, b);
  return set_out(I, 0, cast_to(I, y, MLC_DT_BOOL));
}

/* IsNaN (k 0) and IsInf (k 1, detect_positive, detect_negative). */
static bool op_isnan(imp *I, const op_def *d) {
  uint32_t x = in(I, 0);
  if (x == NONE) return false;
  if (!mlc_dtype_is_float((mlc_dtype)type_of(I, x)->dtype)) { nerr(I, "the input must be a float tensor"); return false; }
  x = cast_to(I, x, MLC_DT_F32);
  if (d->k == 0) return set_out(I, 0, cast_to(I, f_isnan(I, x), MLC_DT_BOOL));
  bool pos = attr_i(N, "detect_positive", 1), neg = attr_i(N, "detect_negative", 1);
  uint32_t inf = f_isinf(I, x), sign = f_pos(I, x); /* an infinity is +inf where relu keeps it */
  if (!pos && !neg) inf = emit2(I, MLC_OP_MUL, inf, like(I, inf, 0));
  else if (!neg) inf = f_and(I, inf, sign);
  else if (!pos) inf = f_and(I, inf, f_not(I, sign));
  return set_out(I, 0, cast_to(I, inf, MLC_DT_BOOL));
}

/* A tensor known at compile time (data in the arena) as an IR node; its
 * name, if it becomes a parameter, is the node's first output's plus what. */
static uint32_t data_node(imp *I, const mlc_type *t, const uint8_t *data, const char *what) {
  const char *base = I->n->n_output && I->n->output[0] && I->n->output[0][0] ? I->n->output[0] : "onnx";
  val tmp = {.name = mlc_arena_printf(I->a, "%s.%s%u", base, what, I->nk++), .node = NONE, .type = *t, .data = data};
  return node_of(I, &tmp);
}

/* 0, 1, ..., n-1 as a compile-time i64 tensor [n]. */
static uint32_t iota(imp *I, int64_t n) {
  if (n > MAX_FOLD_NUMEL) { nerr(I, "the tensor has more than %d elements", MAX_FOLD_NUMEL); return NONE; }
  mlc_type t = {.dtype = MLC_DT_I64, .rank = 1, .dim = {n}};
  uint8_t *data = alloc_data(I, &t);
  for (int64_t i = 0; i < n; i++) put(data, t.dtype, i, 0, i, true);
  return data_node(I, &t, data, "iota");
}

static uint32_t broadcast_to(imp *I, uint32_t x, const mlc_type *t) {
  if (x == NONE) return NONE;
  mlc_type o = *t;
  o.dtype = type_of(I, x)->dtype;
  if (mlc_type_eq(&o, type_of(I, x))) return x;
  return emit(I, MLC_OP_BROADCAST, &x, 1, NULL, &o);
}

/* c ? x : y elementwise, broadcasting (c nonzero is true).  Integers: y +
 * c (x - y), exact in wrapping arithmetic.  Floats, where that would turn an
 * unselected infinity into NaN: x and y stacked as the rows of [2n, 1] and
 * gathered (embedding) at i + n [c == 0]. */
static uint32_t select(imp *I, uint32_t c, uint32_t x, uint32_t y) {
  if (c == NONE || x == NONE || y == NONE) return NONE;
  uint8_t dt = type_of(I, x)->dtype;
  if (dt != type_of(I, y)->dtype) { nerr(I, "the two branches have different dtypes"); return NONE; }
  uint32_t f = f_nz(I, c);
  if (dt == MLC_DT_BOOL) return cast_to(I, select(I, f, cast_to(I, x, MLC_DT_I32), cast_to(I, y, MLC_DT_I32)), MLC_DT_BOOL);
  if (!mlc_dtype_is_float((mlc_dtype)dt))
    return emit2(I, MLC_OP_ADD, y, emit2(I, MLC_OP_MUL, cast_to(I, f, dt), emit2(I, MLC_OP_SUB, x, y)));
  mlc_type t, t2;
  const mlc_type *tx = type_of(I, x), *ty = type_of(I, y), *tc = type_of(I, c);
  if (!broadcast_shape(tx, ty->dim, ty->rank, &t2) || !broadcast_shape(&t2, tc->dim, tc->rank, &t)) {
    nerr(I, "the condition and the branches do not broadcast");
    return NONE;
  }
  int64_t n = mlc_type_numel(&t), d1[2] = {n, 1}, dn[1] = {n};
  uint32_t rows[2] = {reshape(I, broadcast_to(I, x, &t), d1, 2), reshape(I, broadcast_to(I, y, &t), d1, 2)};
  mlc_attrs a = {.axis = 0};
  uint32_t stack = emit(I, MLC_OP_CONCAT, rows, 2, &a, NULL);
  uint32_t off = emit2(I, MLC_OP_MUL, cast_to(I, broadcast_to(I, f_not(I, f), &t), MLC_DT_I64), scalar(I, (double)n, MLC_DT_I64));
  uint32_t idx = emit2(I, MLC_OP_ADD, iota(I, n), reshape(I, off, dn, 1));
  return reshape(I, emit2(I, MLC_OP_EMBEDDING, stack, idx), t.dim, t.rank);
}

static bool op_where(imp *I, const op_def *d) {
  (void)d;
  uint32_t c = in(I, 0);
  if (!need_bool(I, c, 0)) return false;
  return set_out(I, 0, select(I, c, in(I, 1), in(I, 2)));
}

/* Erf, f32 (f16 and bf16 through f32): x P(x^2) / Q(x^2), the rational
 * approximation of Eigen and XLA (within 4.5e-7 of erf, relatively, on
 * [-4, 4], subnormal x included).  Where |x| >= 4, erf is +-1 in
 * f32, taken from the sign; the two are selected rather than blended, so
 * that an infinity gives +-1, not NaN.  NaN stays NaN. */
static uint32_t erf_f32(imp *I, uint32_t x) {
  static const double alpha[] = {-1.60960333262415e-02, -2.95459980854025e-03, -7.34990630326855e-04,
                                 -5.69250639462346e-05, -2.10102402082508e-06, 2.77068142495902e-08,
                                 -2.72614225801306e-10}; /* x^1, x^3, ... x^13 */
  static const double beta[] = {-1.42647390514189e-02, -7.37332916720468e-03, -1.68282697438203e-03,
                                -2.13374055278905e-04, -1.45660718464996e-05}; /* x^0, x^2, ... x^8 */
  uint32_t x2 = emit2(I, MLC_OP_MUL, x, x), p = like(I, x, alpha[6]), q = like(I, x, beta[4]);
  for (int i = 5; i >= 0; i--) p = emit2(I, MLC_OP_ADD, emit2(I, MLC_OP_MUL, p, x2), like(I, x, alpha[i]));
  for (int i = 3; i >= 0; i--) q = emit2(I, MLC_OP_ADD, emit2(I, MLC_OP_MUL, q, x2), like(I, x, beta[i]));
  uint32_t r = emit2(I, MLC_OP_MUL, x, emit2(I, MLC_OP_DIV, p, q)); /* one rounding at x: subnormal x keep their bits */
  uint32_t sign = cast_to(I, emit2(I, MLC_OP_SUB, f_pos(I, x), f_pos(I, emit1(I, MLC_OP_NEG, x))), MLC_DT_F32);
  /* [4 - |x| > 0 or NaN]: the rational branch, which keeps NaN */
  uint32_t inside = f_pos(I, emit2(I, MLC_OP_SUB, like(I, x, 4), vabs(I, x)));
  return select(I, inside, r, sign);
}

static bool op_erf(imp *I, const op_def *d) {
  (void)d;
  uint32_t x = in(I, 0);
  if (x == NONE) return false;
  uint8_t dt = type_of(I, x)->dtype;
  if (!mlc_dtype_is_float((mlc_dtype)dt)) { nerr(I, "the input must be a float tensor"); return false; }
  return set_out(I, 0, cast_to(I, erf_f32(I, cast_to(I, x, MLC_DT_F32)), dt));
}

/* ---- arg max, gathers, losses ---- */

/* ArgMax (k 0), ArgMin (k 1), Hardmax (k 2).  The extreme value m along the
 * axis, the positions equal to it (or NaN, which numpy's argmax picks), and
 * the first (or last) of them as the max over the axis of hit * (D - i) (or
 * hit * (i + 1)), in f32: indices are exact there below 2^24. */
static bool op_argmax(imp *I, const op_def *d) {
  uint32_t x = in(I, 0);
  if (x == NONE) return false;
  mlc_type t = *type_of(I, x);
  int axis;
  if (!norm_axis(I, attr_i(N, "axis", d->k == 2 ? -1 : 0), t.rank, &axis)) return false;
  if (t.dtype == MLC_DT_BOOL) { nerr(I, "the input must not be bool"); return false; }
  bool last = d->k != 2 && attr_i(N, "select_last_index", 0), keep = d->k == 2 || attr_i(N, "keepdims", 1);
  int64_t D = t.dim[axis];
  if (D > MAX_FOLD_NUMEL) { nerr(I, "axis %d has %lld elements; mlc finds indices along at most %d", axis, (long long)D, MAX_FOLD_NUMEL); return false; }
  bool fl = mlc_dtype_is_float((mlc_dtype)t.dtype);
  uint32_t v = fl ? cast_to(I, x, MLC_DT_F32) : x;
  /* the min as a max: -x for floats, -1 - x (~x) for integers, where -x overflows */
  if (d->k == 1) v = fl ? emit1(I, MLC_OP_NEG, v) : emit2(I, MLC_OP_SUB, like(I, v, -1), v);
  uint32_t m = reduce(I, MLC_OP_MAX, v, axis, true);
  uint32_t hit = compare(I, C_EQ, v, m);
  if (fl) hit = f_nz(I, emit2(I, MLC_OP_ADD, hit, f_isnan(I, v)));
  /* the position along the axis as [D, 1, ..., 1], in f32 */
  int64_t pd[MLC_MAX_RANK];
  int pr = t.rank - axis;
  pd[0] = D;
  for (int i = 1; i < pr; i++) pd[i] = 1;
  mlc_type pt = {.dtype = MLC_DT_F32, .rank = (uint8_t)pr};
  memcpy(pt.dim, pd, sizeof pd);
  uint8_t *data = alloc_data(I, &pt);
  for (int64_t i = 0; i < D; i++) put(data, MLC_DT_F32, i, last ? (double)(i + 1) : (double)(D - i), 0, false);
  uint32_t score = emit2(I, MLC_OP_MUL, cast_to(I, hit, MLC_DT_F32), data_node(I, &pt, data, "position"));
  uint32_t s = reduce(I, MLC_OP_MAX, score, axis, true);
  uint32_t idx = last ? emit2(I, MLC_OP_SUB, s, scalar(I, 1, MLC_DT_F32)) : emit2(I, MLC_OP_SUB, scalar(I, (double)D, MLC_DT_F32), s);
  if (d->k == 2) {
    uint8_t *pos = alloc_data(I, &pt);
    for (int64_t i = 0; i < D; i++) put(pos, MLC_DT_F32, i, (double)i, 0, false);
    uint32_t one = compare(I, C_EQ, data_node(I, &pt, pos, "position"), idx);
    return set_out(I, 0, cast_to(I, one, t.dtype));
  }
  uint32_t y = cast_to(I, idx, MLC_DT_I64);
  if (!keep) {
    int64_t dm[MLC_MAX_RANK];
    int r = 0;
    for (int i = 0; i < t.rank; i++)
      if (i != axis) dm[r++] = t.dim[i];
    y = reshape(I, y, dm, r);
  }
  return set_out(I, 0, y);
}

/* out[p] = x[p with p[axis] = idx[p]]: the embedding op over x as [numel, 1]
 * at flat offsets computed here (the offset of p without its axis is known at
 * compile time).  Negative indices count from the end; an index still out of
 * range gives 0 (offset -1: the embedding op's zero row). */
static uint32_t gather_elements(imp *I, uint32_t x, uint32_t idx, int axis) {
  if (x == NONE || idx == NONE) return NONE;
  mlc_type tx = *type_of(I, x), ti = *type_of(I, idx);
  if (!mlc_dtype_is_float((mlc_dtype)tx.dtype)) { nerr(I, "the data must be a float tensor (mlc gathers floats)"); return NONE; }
  if (mlc_dtype_is_float((mlc_dtype)ti.dtype) || ti.dtype == MLC_DT_BOOL) { nerr(I, "indices must be integers"); return NONE; }
  if (ti.rank != tx.rank) { nerr(I, "indices have rank %d, the data %d", ti.rank, tx.rank); return NONE; }
  int64_t stride[MLC_MAX_RANK], s = 1;
  for (int i = tx.rank - 1; i >= 0; i--) {
    if (i != axis && ti.dim[i] > tx.dim[i]) { nerr(I, "indices dimension %d (%lld) is larger than the data's (%lld)", i, (long long)ti.dim[i], (long long)tx.dim[i]); return NONE; }
    stride[i] = s, s *= tx.dim[i];
  }
  int64_t ni = mlc_type_numel(&ti), D = tx.dim[axis];
  if (ni > MAX_FOLD_NUMEL) { nerr(I, "more than %d indices", MAX_FOLD_NUMEL); return NONE; }
  mlc_type bt = ti;
  bt.dtype = MLC_DT_I64;
  uint8_t *base = alloc_data(I, &bt);
  for (int64_t i = 0; i < ni; i++) {
    int64_t rem = i, off = 0;
    for (int k = ti.rank - 1; k >= 0; k--) {
      if (k != axis) off += (rem % ti.dim[k]) * stride[k];
      rem /= ti.dim[k];
    }
    put(base, MLC_DT_I64, i, 0, off, true);
  }
  uint32_t k = cast_to(I, idx, MLC_DT_I64);
  k = emit2(I, MLC_OP_ADD, k, emit2(I, MLC_OP_MUL, cast_to(I, f_not(I, f_nonneg(I, k)), MLC_DT_I64), scalar(I, (double)D, MLC_DT_I64)));
  uint32_t ok = f_and(I, f_nonneg(I, k), f_nonneg(I, emit2(I, MLC_OP_SUB, scalar(I, (double)(D - 1), MLC_DT_I64), k)));
  uint32_t flat = emit2(I, MLC_OP_ADD, data_node(I, &bt, base, "offset"), emit2(I, MLC_OP_MUL, k, scalar(I, (double)stride[axis], MLC_DT_I64)));
  flat = select(I, ok, flat, scalar(I, -1, MLC_DT_I64));
  int64_t dx[2] = {mlc_type_numel(&tx), 1}, dn[1] = {ni};
  uint32_t y = emit2(I, MLC_OP_EMBEDDING, reshape(I, x, dx, 2), reshape(I, flat, dn, 1));
  return reshape(I, y, ti.dim, ti.rank);
}

static bool op_gather_elements(imp *I, const op_def *d) {
  (void)d;
  uint32_t x = in(I, 0), idx = in(I, 1);
  if (x == NONE || idx == NONE) return false;
  int axis;
  if (!norm_axis(I, attr_i(N, "axis", 0), type_of(I, x)->rank, &axis)) return false;
  return set_out(I, 0, gather_elements(I, x, idx, axis));
}

/* Sum of x over every axis, as a scalar. */
static uint32_t sum_all(imp *I, uint32_t x) {
  if (x == NONE) return NONE;
  bool sel[MLC_MAX_RANK];
  int r = type_of(I, x)->rank;
  int64_t none[1] = {1};
  for (int i = 0; i < r; i++) sel[i] = true;
  return reshape(I, reduce_axes(I, MLC_OP_SUM, x, sel, r), none, 0);
}

/* The negative log likelihood of x[N, C, d...] (log-probabilities) at the
 * classes t[N, d...], weighted by w[C] (NONE: 1); targets equal to
 * ignore_index weigh 0.  Reduction 'none', 'sum' or 'mean' (the weighted
 * mean: divided by the sum of the weights used). */
static uint32_t nll(imp *I, uint32_t x, uint32_t t, uint32_t w) {
  if (x == NONE || t == NONE || (has_in(I, 2) && w == NONE)) return NONE;
  mlc_type tx = *type_of(I, x), tt = *type_of(I, t);
  bool ok = tx.rank >= 2 && tt.rank == tx.rank - 1 && tt.dim[0] == tx.dim[0];
  for (int i = 1; ok && i < tt.rank; i++) ok = tt.dim[i] == tx.dim[i + 1];
  if (!ok) { nerr(I, "the input must be [N, C, d1, ...] and the target [N, d1, ...]"); return NONE; }
  if (mlc_dtype_is_float((mlc_dtype)tt.dtype) || tt.dtype == MLC_DT_BOOL) { nerr(I, "the target must be integers"); return NONE; }
  if (w != NONE && (type_of(I, w)->rank != 1 || type_of(I, w)->dim[0] != tx.dim[1])) { nerr(I, "the weight must be [C]"); return NONE; }
  bool mean = attr_s(N, "reduction", "mean", "mean"), sum = attr_s(N, "reduction", "mean", "sum");
  if (!mean && !sum && !attr_s(N, "reduction", "mean", "none")) { nerr(I, "unsupported reduction (mlc has none, sum and mean)"); return NONE; }
  uint32_t t64 = cast_to(I, t, MLC_DT_I64), keep = NONE;
  if (attr(N, "ignore_index")) {
    /* an ignored target becomes -1: the gathers below give 0 there */
    keep = f_not(I, compare(I, C_EQ, t64, scalar(I, (double)attr_i(N, "ignore_index", 0), MLC_DT_I64)));
    t64 = select(I, keep, t64, scalar(I, -1, MLC_DT_I64));
  }
  int64_t d1[MLC_MAX_RANK];
  d1[0] = tt.dim[0], d1[1] = 1;
  for (int i = 1; i < tt.rank; i++) d1[i + 1] = tt.dim[i];
  uint32_t picked = reshape(I, gather_elements(I, x, reshape(I, t64, d1, tx.rank), 1), tt.dim, tt.rank);
  uint32_t wt = NONE;
  if (w != NONE) {
    int64_t dw[2] = {tx.dim[1], 1};
    wt = reshape(I, emit2(I, MLC_OP_EMBEDDING, reshape(I, w, dw, 2), t64), tt.dim, tt.rank);
  } else if (keep != NONE) {
    wt = cast_to(I, keep, tx.dtype);
  }
  uint32_t loss = emit1(I, MLC_OP_NEG, picked);
  if (wt != NONE) loss = emit2(I, MLC_OP_MUL, loss, wt);
  if (sum) return sum_all(I, loss);
  if (mean) {
    uint32_t den = wt != NONE ? sum_all(I, wt) : scalar(I, (double)mlc_type_numel(&tt), tx.dtype);
    return emit2(I, MLC_OP_DIV, sum_all(I, loss), den);
  }
  return loss;
}

static bool op_nll(imp *I, const op_def *d) {
  (void)d;
  uint32_t x = in(I, 0), t = in(I, 1), w = has_in(I, 2) ? in(I, 2) : NONE;
  return set_out(I, 0, nll(I, x, t, w));
}

/* SoftmaxCrossEntropyLoss: nll of log_softmax over the classes (axis 1);
 * output 1, if asked for, is that log_softmax. */
static bool op_sce(imp *I, const op_def *d) {
  (void)d;
  uint32_t x = in(I, 0), t = in(I, 1), w = has_in(I, 2) ? in(I, 2) : NONE;
  if (x == NONE || t == NONE) return false;
  if (type_of(I, x)->rank < 2) { nerr(I, "the scores must be [N, C, d1, ...]"); return false; }
  uint32_t s = emit2(I, MLC_OP_SUB, x, reduce(I, MLC_OP_MAX, x, 1, true));
  uint32_t lp = emit2(I, MLC_OP_SUB, s, emit1(I, MLC_OP_LOG, reduce(I, MLC_OP_SUM, emit1(I, MLC_OP_EXP, s), 1, true)));
  if (!set_out(I, 0, nll(I, lp, t, w))) return false;
  return I->n->n_output < 2 || set_out(I, 1, lp);
}

/* Trilu: x with the elements outside the triangle (of the last two axes) 0;
 * the mask is known at compile time. */
static bool op_trilu(imp *I, const op_def *d) {
  (void)d;
  uint32_t x = in(I, 0);
  if (x == NONE) return false;
  mlc_type t = *type_of(I, x);
  if (t.rank < 2) { nerr(I, "the input must have rank 2 or more"); return false; }
  int64_t k = 0;
  if (has_in(I, 1)) {
    val *kv = in_const(I, 1, "k");
    if (!kv) return false;
    k = get_i(kv, 0);
  }
  bool upper = attr_i(N, "upper", 1);
  int64_t R = t.dim[t.rank - 2], C = t.dim[t.rank - 1];
  mlc_type mt = {.dtype = MLC_DT_BOOL, .rank = 2, .dim = {R, C}};
  if (R * C > MAX_FOLD_NUMEL) { nerr(I, "the matrices have more than %d elements", MAX_FOLD_NUMEL); return false; }
  uint8_t *mask = alloc_data(I, &mt);
  for (int64_t i = 0; i < R; i++)
    for (int64_t j = 0; j < C; j++) mask[i * C + j] = upper ? j - i >= k : j - i <= k;
  return set_out(I, 0, select(I, data_node(I, &mt, mask, "mask"), x, like(I, x, 0)));
}

/* ---- convolution and pooling, from slices and a matmul ----
 *
 * Each offset of the kernel reads a strided window of the padded input:
 * x[n, c, o * stride + k * dilation] for every output position o.  A window
 * is a slice of the padded input (padded at the end as far as the last
 * stride needs), with a stride s taken as a reshape of the axis into
 * (out, s) and a slice of index 0 of the second.  Pooling reduces the
 * windows stacked on a new axis; Conv stacks them as the columns of an
 * im2col matrix and multiplies with the weight. */

#define MAX_SPATIAL 3
#define WIN_CHUNK 16 /* windows per concat */

typedef struct {
  int k;                                                    /* spatial axes */
  int64_t size[MAX_SPATIAL], kern[MAX_SPATIAL], str[MAX_SPATIAL], dil[MAX_SPATIAL];
  int64_t pb[MAX_SPATIAL], pe[MAX_SPATIAL], out[MAX_SPATIAL]; /* pads before, after; output size */
} window;

#define MAX_WINDOW_ATTR (1 << 24) /* kernel, stride, dilation and pad sizes: products stay far from overflow */

/* An attribute of k ints in [min, MAX_WINDOW_ATTR] (default: def), or an error naming it. */
static bool attr_k(imp *I, const char *name, int k, int64_t def, int64_t min, int64_t *out) {
  const Onnx__AttributeProto *a = attr(I->n, name);
  for (int i = 0; i < k; i++) out[i] = def;
  if (!a) return true;
  if ((int)a->n_ints != k) { nerr(I, "%s has %zu values for %d spatial axes", name, a->n_ints, k); return false; }
  for (int i = 0; i < k; i++) {
    if (a->ints[i] < min || a->ints[i] > MAX_WINDOW_ATTR) { nerr(I, "unsupported %s value %lld", name, (long long)a->ints[i]); return false; }
    out[i] = a->ints[i];
  }
  return true;
}

/* The window geometry of a Conv or pool over x [N, C, D1, ...]; kern from
 * the weight (Conv) or NULL (kernel_shape, required). */
static bool window_of(imp *I, const mlc_type *t, const int64_t *kern, bool ceil_ok, window *w) {
  memset(w, 0, sizeof *w);
  w->k = t->rank - 2;
  if (w->k < 1 || w->k > MAX_SPATIAL) { nerr(I, "the input must be [N, C, D1, ...] with 1 to %d spatial axes", MAX_SPATIAL); return false; }
  int k = w->k;
  for (int i = 0; i < k; i++) w->size[i] = t->dim[2 + i];
  if (!attr_k(I, "kernel_shape", k, 0, 1, w->kern)) return false;
  if (kern) {
    for (int i = 0; i < k; i++) {
      if (attr(I->n, "kernel_shape") && w->kern[i] != kern[i]) { nerr(I, "kernel_shape differs from the weight's shape"); return false; }
      w->kern[i] = kern[i];
    }
  } else if (!attr(I->n, "kernel_shape")) {
    nerr(I, "the attribute kernel_shape is required");
    return false;
  }
  int64_t pads[2 * MAX_SPATIAL];
  if (!attr_k(I, "strides", k, 1, 1, w->str) || !attr_k(I, "dilations", k, 1, 1, w->dil) ||
      !attr_k(I, "pads", 2 * k, 0, 0, pads))
    return false;
  bool ceil = attr_i(I->n, "ceil_mode", 0);
  if (ceil && !ceil_ok) { nerr(I, "unsupported attribute value ceil_mode=1"); return false; }
  const Onnx__AttributeProto *ap = attr(I->n, "auto_pad");
  bool same_upper = attr_s(I->n, "auto_pad", "NOTSET", "SAME_UPPER"), same_lower = attr_s(I->n, "auto_pad", "NOTSET", "SAME_LOWER");
  bool valid = attr_s(I->n, "auto_pad", "NOTSET", "VALID"), notset = attr_s(I->n, "auto_pad", "NOTSET", "NOTSET");
  if (!same_upper && !same_lower && !valid && !notset) { nerr(I, "unsupported auto_pad value"); return false; }
  if (ap && !notset && attr(I->n, "pads")) { nerr(I, "auto_pad and pads are both given"); return false; }
  for (int i = 0; i < k; i++) {
    int64_t eff = (w->kern[i] - 1) * w->dil[i] + 1, S = w->size[i];
    if (same_upper || same_lower) {
      w->out[i] = (S + w->str[i] - 1) / w->str[i];
      int64_t total = (w->out[i] - 1) * w->str[i] + eff - S;
      if (total < 0) total = 0;
      w->pb[i] = same_upper ? total / 2 : total - total / 2;
      w->pe[i] = total - w->pb[i];
      continue;
    }
    w->pb[i] = valid ? 0 : pads[i], w->pe[i] = valid ? 0 : pads[k + i];
    int64_t span = S + w->pb[i] + w->pe[i] - eff;
    if (span < 0) { nerr(I, "the kernel (%lld with dilation) is larger than the padded input (%lld)", (long long)eff, (long long)(S + w->pb[i] + w->pe[i])); return false; }
    w->out[i] = (ceil ? (span + w->str[i] - 1) / w->str[i] : span / w->str[i]) + 1;
    /* ceil_mode: a last window that would start in the end padding is dropped (as PyTorch) */
    if (ceil && (w->out[i] - 1) * w->str[i] >= S + w->pb[i]) w->out[i]--;
  }
  return true;
}

/* x padded on axis with `before` and `after` copies of the scalar v. */
static uint32_t pad_axis(imp *I, uint32_t x, int axis, int64_t before, int64_t after, double v) {
  if (x == NONE || (before == 0 && after == 0)) return x;
  uint32_t parts[3];
  int n = 0;
  mlc_type t = *type_of(I, x);
  if (before) { t.dim[axis] = before; parts[n++] = broadcast_to(I, like(I, x, v), &t); }
  parts[n++] = x;
  if (after) { t.dim[axis] = after; parts[n++] = broadcast_to(I, like(I, x, v), &t); }
  mlc_attrs a = {.axis = axis};
  return emit(I, MLC_OP_CONCAT, parts, (uint32_t)n, &a, NULL);
}

/* The windows of x [N, C, D...], each [N, C, out...], in row-major order of
 * the kernel offsets; pad value v.  Returns how many (prod of kern). */
static int64_t windows(imp *I, uint32_t x, const window *w, double v, uint32_t *out, int64_t max) {
  int64_t nwin = 1;
  for (int i = 0; i < w->k && nwin <= max; i++) nwin *= w->kern[i];
  if (nwin > max) { nerr(I, "the kernel has more than %lld positions, the most mlc lowers", (long long)max); return -1; }
  for (int i = 0; i < w->k; i++) {
    int64_t need = (w->kern[i] - 1) * w->dil[i] + w->out[i] * w->str[i], have = w->size[i] + w->pb[i] + w->pe[i];
    x = pad_axis(I, x, 2 + i, w->pb[i], (need > have ? need : have) - w->size[i] - w->pb[i], v);
  }
  for (int64_t j = 0; j < nwin; j++) {
    uint32_t y = x;
    int64_t rem = j;
    for (int i = w->k - 1; i >= 0; i--) {
      int64_t o = rem % w->kern[i], s = w->str[i];
      rem /= w->kern[i];
      int ax = 2 + i;
      y = slice(I, y, ax, o * w->dil[i], o * w->dil[i] + w->out[i] * s);
      if (s > 1 && y != NONE) {
        mlc_type t = *type_of(I, y);
        int64_t d[MLC_MAX_RANK];
        int r = 0;
        for (int q = 0; q < t.rank; q++) {
          if (q == ax) d[r++] = w->out[i], d[r++] = s;
          else d[r++] = t.dim[q];
        }
        y = slice(I, reshape(I, y, d, r), ax + 1, 0, 1);
        t.dim[ax] = w->out[i];
        y = reshape(I, y, t.dim, t.rank);
      }
    }
    out[j] = y;
  }
  return nwin;
}

/* parts concatenated on axis, WIN_CHUNK at a time. */
static uint32_t concat_many(imp *I, const uint32_t *parts, int64_t n, int axis) {
  uint32_t level[256];
  int64_t m = 0;
  mlc_attrs a = {.axis = axis};
  for (int64_t i = 0; i < n; i += WIN_CHUNK) {
    int64_t c = n - i < WIN_CHUNK ? n - i : WIN_CHUNK;
    level[m++] = c == 1 ? parts[i] : emit(I, MLC_OP_CONCAT, parts + i, (uint32_t)c, &a, NULL);
  }
  return m == 1 ? level[0] : concat_many(I, level, m, axis);
}

#define MAX_WINDOWS 4096

/* MaxPool (k MLC_OP_MAX) and AveragePool (k MLC_OP_SUM). */
static bool op_pool(imp *I, const op_def *d) {
  if (!only_outputs(I, 1)) return false;
  uint32_t x = in(I, 0);
  if (x == NONE) return false;
  mlc_type t = *type_of(I, x);
  if (!mlc_dtype_is_float((mlc_dtype)t.dtype)) { nerr(I, "the input must be a float tensor"); return false; }
  window w;
  if (!window_of(I, &t, NULL, true, &w)) return false;
  bool max = d->k == MLC_OP_MAX;
  uint32_t *win = mlc_arena_alloc(I->a, MAX_WINDOWS * sizeof *win);
  int64_t nw = windows(I, x, &w, max ? -INFINITY : 0, win, MAX_WINDOWS);
  if (nw < 0) return false;
  int64_t rows = t.dim[0] * t.dim[1], dr[2] = {0, 1};
  for (int i = 0; i < w.k; i++) rows *= w.out[i];
  dr[0] = rows;
  for (int64_t j = 0; j < nw; j++) win[j] = reshape(I, win[j], dr, 2);
  /* reduce WIN_CHUNK windows at a time, then the partial results */
  int64_t n = nw;
  while (n > 1) {
    int64_t m = 0;
    for (int64_t i = 0; i < n; i += WIN_CHUNK) {
      int64_t c = n - i < WIN_CHUNK ? n - i : WIN_CHUNK;
      win[m++] = c == 1 ? win[i] : reduce(I, (mlc_op)d->k, concat_many(I, win + i, c, 1), 1, true);
    }
    n = m;
  }
  mlc_type ot = t;
  for (int i = 0; i < w.k; i++) ot.dim[2 + i] = w.out[i];
  uint32_t y = reshape(I, win[0], ot.dim, ot.rank);
  if (!max) {
    /* divide by the number of window positions inside the input (or inside
     * the explicit padding, count_include_pad), known at compile time */
    bool incl = attr_i(N, "count_include_pad", 0);
    mlc_type ct = {.dtype = t.dtype, .rank = t.rank};
    int64_t cnt = 1;
    for (int i = 0; i < t.rank; i++) ct.dim[i] = i < 2 ? 1 : w.out[i - 2], cnt *= ct.dim[i];
    if (cnt > MAX_FOLD_NUMEL) { nerr(I, "the output has more than %d positions", MAX_FOLD_NUMEL); return false; }
    uint8_t *data = alloc_data(I, &ct);
    for (int64_t p = 0; p < cnt; p++) {
      int64_t rem = p;
      double c = 1;
      for (int i = w.k - 1; i >= 0; i--) {
        int64_t o = rem % w.out[i], inside = 0;
        rem /= w.out[i];
        int64_t lo = incl ? -w.pb[i] : 0, hi = incl ? w.size[i] + w.pe[i] : w.size[i];
        for (int64_t j = 0; j < w.kern[i]; j++) {
          int64_t pos = o * w.str[i] - w.pb[i] + j * w.dil[i];
          inside += pos >= lo && pos < hi;
        }
        c *= (double)inside;
      }
      put(data, ct.dtype, p, c, 0, false);
    }
    y = emit2(I, MLC_OP_DIV, y, data_node(I, &ct, data, "count"));
  }
  return set_out(I, 0, y);
}

/* Conv: im2col (the windows as [N, C * K, out]) and a matmul per group. */
static bool op_conv(imp *I, const op_def *d) {
  (void)d;
  uint32_t x = in(I, 0), wt = in(I, 1), b = has_in(I, 2) ? in(I, 2) : NONE;
  if (x == NONE || wt == NONE || (has_in(I, 2) && b == NONE)) return false;
  mlc_type t = *type_of(I, x), tw = *type_of(I, wt);
  if (!mlc_dtype_is_float((mlc_dtype)t.dtype)) { nerr(I, "the input must be a float tensor"); return false; }
  int64_t g = attr_i(N, "group", 1), C = t.rank >= 2 ? t.dim[1] : 0, M = tw.dim[0];
  if (tw.rank != t.rank || g < 1 || C % g || M % g || tw.dim[1] != C / g) {
    nerr(I, "the weight must be [M, C / group, k...] for the input [N, C, ...] (group %lld)", (long long)g);
    return false;
  }
  window w;
  if (!window_of(I, &t, tw.dim + 2, false, &w)) return false;
  uint32_t *win = mlc_arena_alloc(I->a, MAX_WINDOWS * sizeof *win);
  int64_t nw = windows(I, x, &w, 0, win, MAX_WINDOWS);
  if (nw < 0) return false;
  int64_t of = 1;
  for (int i = 0; i < w.k; i++) of *= w.out[i];
  int64_t d4[4] = {t.dim[0], C, 1, of};
  for (int64_t j = 0; j < nw; j++) win[j] = reshape(I, win[j], d4, 4);
  uint32_t col = concat_many(I, win, nw, 2); /* [N, C, K, out] */
  if (g > MAX_WINDOWS) { nerr(I, "group %lld: mlc lowers at most %d groups", (long long)g, MAX_WINDOWS); return false; }
  uint32_t *ys = mlc_arena_alloc(I->a, (size_t)g * sizeof *ys);
  int64_t cg = C / g, mg = M / g, dc[3] = {t.dim[0], cg * nw, of}, dw[2] = {mg, cg * nw};
  for (int64_t q = 0; q < g; q++) {
    uint32_t cq = reshape(I, slice(I, col, 1, q * cg, (q + 1) * cg), dc, 3);
    uint32_t wq = reshape(I, slice(I, wt, 0, q * mg, (q + 1) * mg), dw, 2);
    ys[q] = emit2(I, MLC_OP_MATMUL, wq, cq); /* [N, M / g, out] */
  }
  uint32_t y = g == 1 ? ys[0] : concat_many(I, ys, g, 1);
  if (b != NONE) {
    int64_t db[2] = {M, 1};
    if (type_of(I, b)->rank != 1 || type_of(I, b)->dim[0] != M) { nerr(I, "the bias must be [M]"); return false; }
    y = emit2(I, MLC_OP_ADD, y, reshape(I, b, db, 2));
  }
  mlc_type ot = t;
  ot.dim[1] = M;
  for (int i = 0; i < w.k; i++) ot.dim[2 + i] = w.out[i];
  return set_out(I, 0, reshape(I, y, ot.dim, ot.rank));
}

#undef N

static const op_def op_table[] = {
  {"Relu", op_unary, "", MLC_OP_RELU, 6},
  {"Sigmoid", op_unary, "", MLC_OP_SIGMOID, 6},
  {"Tanh", op_unary, "", MLC_OP_TANH, 6},
  {"Exp", op_unary, "", MLC_OP_EXP, 6},
  {"Log", op_unary, "", MLC_OP_LOG, 6},
  {"Sqrt", op_unary, "", MLC_OP_SQRT, 6},
  {"Neg", op_unary, "", MLC_OP_NEG, 6},
  {"Erf", op_erf, "", 0, 13},
  {"Identity", op_identity, "", 0, 1},
  {"Abs", op_act, "", V_ABS, 6},
  {"Reciprocal", op_act, "", V_RECIP, 6},
  {"Softplus", op_act, "", V_SOFTPLUS, 1},
  {"Softsign", op_act, "", V_SOFTSIGN, 1},
  {"Elu", op_act, "alpha", V_ELU, 6},
  {"Selu", op_act, "alpha gamma", V_SELU, 6},
  {"Celu", op_act, "alpha", V_CELU, 12},
  {"LeakyRelu", op_act, "alpha", V_LEAKY, 6},
  {"HardSigmoid", op_act, "alpha beta", V_HSIG, 6},
  {"HardSwish", op_act, "", V_HSWISH, 14},
  {"PRelu", op_prelu, "", 0, 7},
  {"Clip", op_clip, "", 0, 11},
  {"Add", op_binary, "", MLC_OP_ADD, 7},
  {"Sub", op_binary, "", MLC_OP_SUB, 7},
  {"Mul", op_binary, "", MLC_OP_MUL, 7},
  {"Div", op_binary, "", MLC_OP_DIV, 7},
  {"Pow", op_pow, "", 0, 7},
  {"Max", op_variadic, "", '>', 8},
  {"Min", op_variadic, "", '<', 8},
  {"Sum", op_variadic, "", 'S', 8},
  {"Mean", op_variadic, "", 'M', 8},
  {"Cast", op_cast, "to saturate", 0, 6},
  {"CastLike", op_cast, "saturate", 1, 15},
  {"MatMul", op_matmul, "", 0, 1},
  {"Gemm", op_gemm, "alpha beta transA transB", 0, 7},
  {"Softmax", op_softmax, "axis", 0, 1},
  {"LogSoftmax", op_softmax, "axis", 1, 1},
  {"ReduceSum", op_reduce, "axes keepdims noop_with_empty_axes", R_SUM, 1},
  {"ReduceMean", op_reduce, "axes keepdims noop_with_empty_axes", R_MEAN, 1},
  {"ReduceMax", op_reduce, "axes keepdims noop_with_empty_axes", R_MAX, 1},
  {"ReduceMin", op_reduce, "axes keepdims noop_with_empty_axes", R_MIN, 1},
  {"ReduceSumSquare", op_reduce, "axes keepdims noop_with_empty_axes", R_SUMSQ, 1},
  {"ReduceL1", op_reduce, "axes keepdims noop_with_empty_axes", R_L1, 1},
  {"ReduceL2", op_reduce, "axes keepdims noop_with_empty_axes", R_L2, 1},
  {"ReduceLogSum", op_reduce, "axes keepdims noop_with_empty_axes", R_LOGSUM, 1},
  {"ReduceLogSumExp", op_reduce, "axes keepdims noop_with_empty_axes", R_LOGSUMEXP, 1},
  {"ReduceProd", op_reduce, "axes keepdims noop_with_empty_axes", R_PROD, 1},
  {"Reshape", op_reshape, "allowzero", 0, 5},
  {"Flatten", op_flatten, "axis", 0, 1},
  {"Squeeze", op_squeeze, "axes", 0, 1},
  {"Unsqueeze", op_squeeze, "axes", 1, 1},
  {"Transpose", op_transpose, "perm", 0, 1},
  {"Concat", op_concat, "axis", 0, 4},
  {"Slice", op_slice, "", 0, 10},
  {"Split", op_split, "axis num_outputs split", 0, 2},
  {"Expand", op_expand, "", 0, 8},
  {"Tile", op_tile, "", 0, 6},
  {"DepthToSpace", op_depth_space, "blocksize mode", 0, 1},
  {"SpaceToDepth", op_depth_space, "blocksize", 1, 1},
  {"Gather", op_gather, "axis", 0, 1},
  {"BatchNormalization", op_batchnorm, "epsilon momentum training_mode", 0, 9},
  {"LayerNormalization", op_layernorm, "axis epsilon stash_type", 0, 17},
  {"InstanceNormalization", op_instancenorm, "epsilon", 0, 6},
  {"MeanVarianceNormalization", op_mvn, "axes", 0, 9},
  {"LpNormalization", op_lpnorm, "axis p", 0, 1},
  {"GlobalAveragePool", op_global_pool, "", MLC_OP_MEAN, 1},
  {"GlobalMaxPool", op_global_pool, "", MLC_OP_MAX, 1},
  {"Dropout", op_dropout, "seed", 0, 12},
  {"Constant", op_constant, "value value_float value_floats value_int value_ints", 0, 9},
  {"Shape", op_shape, "start end", 0, 1},
  {"Size", op_shape, "", 1, 1},
  {"ConstantOfShape", op_constant_of_shape, "value", 0, 9},
  {"Range", op_range, "", 0, 11},
  {"EyeLike", op_eyelike, "dtype k", 0, 9},
  {"Equal", op_compare, "", C_EQ, 11},
  {"Less", op_compare, "", C_LT, 9},
  {"LessOrEqual", op_compare, "", C_LE, 12},
  {"Greater", op_compare, "", C_GT, 9},
  {"GreaterOrEqual", op_compare, "", C_GE, 12},
  {"And", op_logic, "", '&', 7},
  {"Or", op_logic, "", '|', 7},
  {"Xor", op_logic, "", '^', 7},
  {"Not", op_logic, "", '!', 1},
  {"IsNaN", op_isnan, "", 0, 9},
  {"IsInf", op_isnan, "detect_negative detect_positive", 1, 10},
  {"Where", op_where, "", 0, 9},
  {"ArgMax", op_argmax, "axis keepdims select_last_index", 0, 11},
  {"ArgMin", op_argmax, "axis keepdims select_last_index", 1, 11},
  {"Hardmax", op_argmax, "axis", 2, 13},
  {"GatherElements", op_gather_elements, "axis", 0, 11},
  {"NegativeLogLikelihoodLoss", op_nll, "ignore_index reduction", 0, 12},
  {"SoftmaxCrossEntropyLoss", op_sce, "ignore_index reduction", 0, 12},
  {"Trilu", op_trilu, "upper", 0, 14},
  {"MaxPool", op_pool, "auto_pad ceil_mode dilations kernel_shape pads storage_order strides", MLC_OP_MAX, 1},
  {"AveragePool", op_pool, "auto_pad ceil_mode count_include_pad kernel_shape pads strides", MLC_OP_SUM, 1},
  {"Conv", op_conv, "auto_pad dilations group kernel_shape pads strides", 0, 1},
};

static bool attr_listed(const char *list, const char *name) {
  size_t n = strlen(name);
  for (const char *p = list; *p;) {
    const char *e = strchr(p, ' ');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len == n && !memcmp(p, name, n)) return true;
    if (!e) break;
    p = e + 1;
  }
  return false;
}

static bool lower_node(imp *I) {
  const Onnx__NodeProto *n = I->n;
  if (!n->op_type || !n->op_type[0]) { nerr(I, "the node has no op_type"); return false; }
  if (n->domain && n->domain[0] && strcmp(n->domain, "ai.onnx")) {
    nerr(I, "unsupported op (domain '%s')", n->domain);
    return false;
  }
  for (size_t i = 0; i < sizeof op_table / sizeof *op_table; i++) {
    const op_def *d = &op_table[i];
    if (strcmp(d->name, n->op_type)) continue;
    if (I->opset < d->since) {
      nerr(I, "unsupported opset: mlc lowers %s as defined from opset %d on", d->name, d->since);
      return false;
    }
    for (size_t k = 0; k < n->n_attribute; k++) {
      const char *an = n->attribute[k]->name ? n->attribute[k]->name : "";
      if (!attr_listed(d->attrs, an)) {
        nerr(I, "unsupported attribute '%s'", an);
        return false;
      }
    }
    for (size_t k = 0; k < n->n_output; k++)
      if (!n->output[k]) { nerr(I, "output %zu has no name", k); return false; }
    int errors = I->d->errors;
    bool ok = d->fn(I, d);
    if (!ok && I->d->errors == errors) nerr(I, "could not be lowered"); /* every failure gets a message */
    return ok;
  }
  nerr(I, "unsupported op");
  return false;
}

/* ---- the graph ---- */

const char *mlc_onnx_c_name(mlc_arena *a, const char *s) {
  size_t n = strlen(s);
  char *o = mlc_arena_alloc(a, n + 2), *p = o;
  if (!n || (s[0] >= '0' && s[0] <= '9')) *p++ = 't';
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    *p++ = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ? c : '_';
  }
  return o;
}

/* The type of a graph input, with symbolic dims bound by -D. */
static bool input_type(imp *I, const Onnx__ValueInfoProto *vi, mlc_type *t) {
  const char *nm = vi->name;
  if (!vi->type || vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !vi->type->tensor_type) {
    nerr(I, "graph input '%s' is not a tensor", nm);
    return false;
  }
  const Onnx__TypeProto__Tensor *tt = vi->type->tensor_type;
  char what[300];
  snprintf(what, sizeof what, "graph input '%s'", nm);
  if (!want_dtype(I, tt->has_elem_type ? tt->elem_type : 0, what, &t->dtype)) return false;
  if (!tt->shape) { nerr(I, "graph input '%s' has no shape; mlc needs static shapes", nm); return false; }
  int64_t dims[MLC_MAX_RANK];
  if (tt->shape->n_dim > MLC_MAX_RANK) { nerr(I, "graph input '%s' has rank %zu; mlc supports at most %d", nm, tt->shape->n_dim, MLC_MAX_RANK); return false; }
  for (size_t i = 0; i < tt->shape->n_dim; i++) {
    const Onnx__TensorShapeProto__Dimension *dm = tt->shape->dim[i];
    if (dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
      dims[i] = dm->dim_value;
      continue;
    }
    const char *sym = dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM ? dm->dim_param : NULL;
    if (!sym || !sym[0]) {
      nerr(I, "dimension %zu of graph input '%s' has no size; mlc needs static shapes", i, nm);
      return false;
    }
    const mlc_define *def = NULL;
    for (uint32_t k = 0; k < I->ndefs; k++)
      if (!strcmp(I->defs[k].name, sym)) def = &I->defs[k];
    if (!def && I->at.file) {
      nerr(I, "dimension %zu of graph input '%s' is the symbolic dimension '%s': bind it with a config value, "
           "config { %s = N } (which -D %s=N overrides)", i, nm, sym, sym, sym);
      return false;
    }
    if (!def) {
      nerr(I, "dimension %zu of graph input '%s' is the symbolic dimension '%s': bind it with -D %s=VALUE", i, nm, sym, sym);
      return false;
    }
    char *end;
    long long v = strtoll(def->value, &end, 10);
    if (*end || end == def->value || v < 1) {
      nerr(I, "%s %s%s%s: a dimension must be a positive integer", I->at.file ? "config value" : "-D", sym,
           I->at.file ? " = " : "=", def->value);
      return false;
    }
    dims[i] = v;
  }
  return dims_numel(I, dims, tt->shape->n_dim, what, t);
}

/* Checks a graph output against its declared element type and static dims. */
static bool check_output(imp *I, const Onnx__ValueInfoProto *vi, const mlc_type *t) {
  if (!vi->type || vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !vi->type->tensor_type) return true;
  const Onnx__TypeProto__Tensor *tt = vi->type->tensor_type;
  char a[96];
  if (tt->has_elem_type && dtype_of(tt->elem_type) != t->dtype) {
    nerr(I, "graph output '%s' is declared %s but computes as %s", vi->name, onnx_dtype_name(tt->elem_type),
         mlc_type_str(t, a, sizeof a));
    return false;
  }
  if (!tt->shape) return true;
  bool bad = tt->shape->n_dim != t->rank;
  for (size_t i = 0; !bad && i < tt->shape->n_dim; i++)
    bad = tt->shape->dim[i]->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE &&
          tt->shape->dim[i]->dim_value != t->dim[i];
  if (bad) nerr(I, "graph output '%s' computes as %s, which does not match its declared shape", vi->name, mlc_type_str(t, a, sizeof a));
  return !bad;
}

static void lower_graph(imp *I, const Onnx__ModelProto *m) {
  const Onnx__GraphProto *g = m->graph;
  if (!g) { nerr(I, "the model has no graph"); return; }
  if (g->n_node > MAX_GRAPH_NODES) { nerr(I, "the graph has %zu nodes; mlc's limit is %u", g->n_node, MAX_GRAPH_NODES); return; }
  I->f = mlc_program_add_func(I->p, "forward");
  for (size_t i = 0; i < g->n_initializer; i++) {
    const Onnx__TensorProto *tp = g->initializer[i];
    if (!tp->name || !tp->name[0]) { nerr(I, "initializer %zu has no name", i); return; }
    char what[300];
    snprintf(what, sizeof what, "initializer '%s'", tp->name);
    mlc_type t = {0};
    const uint8_t *data;
    if (!read_tensor(I, tp, what, &t, &data)) return;
    val *x = define(I, mlc_arena_strdup(I->a, tp->name));
    if (!x) return;
    x->type = t, x->data = data, x->init = true;
  }
  for (size_t i = 0; i < g->n_input; i++) {
    const Onnx__ValueInfoProto *vi = g->input[i];
    if (!vi->name || !vi->name[0]) { nerr(I, "graph input %zu has no name", i); return; }
    if (find(I, vi->name)) continue; /* an initializer listed as an input too (IR version < 4) */
    mlc_type t = {0};
    if (!input_type(I, vi, &t)) return;
    const char *cn = mlc_onnx_c_name(I->a, vi->name);
    for (uint32_t k = 0; k < I->f->inputs.n; k++)
      if (!strcmp(I->f->nodes[I->f->inputs.v[k]].a.name, cn)) { nerr(I, "graph inputs '%s' and another one are both '%s' as C names", vi->name, cn); return; }
    mlc_attrs a = {.name = cn};
    uint32_t node = emit(I, MLC_OP_INPUT, NULL, 0, &a, &t);
    if (node == NONE) return;
    mlc_u32vec_push(I->a, &I->f->inputs, node);
    val *x = define(I, mlc_arena_strdup(I->a, vi->name));
    if (!x) return;
    x->node = node, x->type = t, x->graph_input = true;
  }
  I->g = g;
  I->done = mlc_arena_alloc(I->a, g->n_node + 1);
  for (size_t i = 0; i < g->n_node; i++) {
    if (I->done[i]) continue;
    I->n = g->node[i];
    I->ni = (uint32_t)i;
    if (!lower_node(I)) return;
  }
  I->n = NULL;
  if (!g->n_output) { nerr(I, "the graph has no outputs"); return; }
  for (size_t i = 0; i < g->n_output; i++) {
    const Onnx__ValueInfoProto *vi = g->output[i];
    val *x = vi->name ? find(I, vi->name) : NULL;
    if (!x) { nerr(I, "graph output '%s' is never computed", vi->name ? vi->name : ""); return; }
    uint32_t node = node_of(I, x);
    if (node == NONE) return;
    /* An output is a value of its own, never an input or a parameter itself. */
    mlc_op op = (mlc_op)I->f->nodes[node].op;
    if (op == MLC_OP_INPUT || op == MLC_OP_PARAM || op == MLC_OP_CONST || op == MLC_OP_RESHAPE)
      node = type_of(I, node)->dtype == MLC_DT_BOOL ? node : emit2(I, MLC_OP_ADD, node, like(I, node, 0));
    if (node == NONE || !check_output(I, vi, type_of(I, node))) return;
    const char *cn = mlc_onnx_c_name(I->a, vi->name);
    for (uint32_t k = 0; k < I->f->noutputs; k++)
      if (!strcmp(I->f->outputs[k].name, cn)) { nerr(I, "graph output '%s' is listed twice", vi->name); return; }
    mlc_func_add_output(I->p, I->f, cn, node);
  }
}

static void *pb_alloc(void *ctx, size_t n) { return malloc(n ? n : 1); }
static void pb_free(void *ctx, void *p) { free(p); }

bool mlc_onnx_import(mlc_program *p, mlc_diag *d, const char *name, const char *path, const uint8_t *buf, size_t len,
                     const mlc_define *defines, uint32_t ndefines, mlc_onnx_weights *out_w) {
  return mlc_onnx_import_at(p, d, (mlc_loc){0}, name, path, buf, len, defines, ndefines, out_w);
}

bool mlc_onnx_import_at(mlc_program *p, mlc_diag *d, mlc_loc at, const char *name, const char *path,
                        const uint8_t *buf, size_t len, const mlc_define *defines, uint32_t ndefines,
                        mlc_onnx_weights *out_w) {
  imp I = {.p = p, .d = d, .a = p->arena, .file = name, .at = at, .defs = defines, .ndefs = ndefines};
  if (path) { /* external data is relative to the .onnx file's own directory ("" for the current one) */
    const char *slash = strrchr(path, '/');
    I.dir = !slash ? "" : slash == path ? "/" : mlc_arena_printf(p->arena, "%.*s", (int)(slash - path), path);
  }
  int errors0 = d->errors;
  ProtobufCAllocator al = {pb_alloc, pb_free, NULL};
  Onnx__ModelProto *m = onnx__model_proto__unpack(&al, len, buf);
  if (!m) {
    nerr(&I, "not a valid ONNX model (the protobuf does not parse as a ModelProto)");
    return false;
  }
  I.opset = -1;
  for (size_t i = 0; i < m->n_opset_import; i++) {
    const char *dom = m->opset_import[i]->domain;
    if (!dom || !dom[0] || !strcmp(dom, "ai.onnx")) I.opset = (int)m->opset_import[i]->version;
  }
  if (I.opset < 0 && m->n_opset_import == 0) I.opset = 1; /* IR version 2 models: opset 1 implied */
  if (I.opset < 1) {
    nerr(&I, "the model imports no opset of the default domain (ai.onnx); mlc reads its ops only");
  } else {
    p->name = "model";
    if (m->graph && m->graph->name && m->graph->name[0]) {
      char *nm = (char *)mlc_onnx_c_name(p->arena, m->graph->name);
      for (char *c = nm; *c; c++)
        if (*c >= 'A' && *c <= 'Z') *c = (char)(*c - 'A' + 'a');
      p->name = nm;
    }
    lower_graph(&I, m);
  }
  onnx__model_proto__free_unpacked(m, &al);
  if (out_w) *out_w = (mlc_onnx_weights){I.w, I.nw};
  return d->errors == errors0;
}
