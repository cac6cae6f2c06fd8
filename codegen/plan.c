/* Writes the binary plan described in runtime/plan.h from the IR: one value
 * per node (its arena offset from memplan, or its parameter), the entry
 * point's inputs and outputs, and one step per node that the target runs
 * as a kernel, with its inputs then its output as arguments. */
#include "codegen/plan.h"

#include <string.h>
#include <xxhash.h>

#include "codegen/schedule.h"
#include "ir/fused.h"
#include "runtime/plan.h"

typedef struct {
  mlc_arena *a;
  uint8_t *buf;
  size_t n, cap;
} wbuf;

static void put(wbuf *w, const void *src, size_t n) {
  if (w->n + n > w->cap) {
    size_t cap = w->cap ? w->cap * 2 : 4096;
    while (cap < w->n + n) cap *= 2;
    w->buf = mlc_arena_grow(w->a, w->buf, w->n, cap);
    w->cap = cap;
  }
  memcpy(w->buf + w->n, src, n);
  w->n += n;
}

static void put_u8(wbuf *w, uint8_t v) { put(w, &v, 1); }
static void put_u32(wbuf *w, uint32_t v) {
  uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
  put(w, b, 4);
}
static void put_u64(wbuf *w, uint64_t v) {
  put_u32(w, (uint32_t)v);
  put_u32(w, (uint32_t)(v >> 32));
}
static void put_f64(wbuf *w, double v) {
  uint64_t bits;
  memcpy(&bits, &v, sizeof bits);
  put_u64(w, bits);
}
static void put_str(wbuf *w, const char *s) {
  size_t n = strlen(s);
  put_u32(w, (uint32_t)n);
  put(w, s, n);
}
static void put_shape(wbuf *w, const mlc_type *t) {
  put_u8(w, t->dtype);
  put_u8(w, t->rank);
  for (int i = 0; i < t->rank; i++) put_u64(w, (uint64_t)t->dim[i]);
}

typedef struct {
  const char **v;
  uint32_t n, cap;
} names;

static uint32_t intern(mlc_arena *a, names *k, const char *s) {
  for (uint32_t i = 0; i < k->n; i++)
    if (!strcmp(k->v[i], s)) return i;
  if (k->n == k->cap) {
    uint32_t cap = k->cap ? k->cap * 2 : 64;
    k->v = mlc_arena_grow(a, k->v, k->n * sizeof *k->v, cap * sizeof *k->v);
    k->cap = cap;
  }
  k->v[k->n] = s;
  return k->n++;
}

bool mlc_plan_mm_of(const mlc_func *f, uint32_t node, uint16_t *op, const mlc_type **a) {
  const mlc_node *n = &f->nodes[node];
  if (n->nin == 0) return false;
  if (mlc_ops[n->op].flags & MLC_F_MM) {
    *op = n->op, *a = &f->nodes[n->in[0]].type;
    return true;
  }
  mlc_fused_prog pr;
  char err[128];
  if (n->op != MLC_OP_FUSED || !mlc_fused_program(f, n, &pr, err, sizeof err) || !pr.n ||
      !(mlc_ops[pr.ins[0].op].flags & MLC_F_MM))
    return false;
  *op = pr.ins[0].op, *a = &f->nodes[n->in[0]].type; /* instruction 0's operands are $0 and $1 */
  return true;
}

uint8_t mlc_plan_unit_16bit_matrix(const mlc_program *p, const mlc_func *f, uint32_t node, uint8_t *out_products) {
  (void)p;
  uint16_t op;
  const mlc_type *a;
  *out_products = 1;
  if (!mlc_plan_mm_of(f, node, &op, &a)) return MLC_PLAN_UNIT_FP32;
  return a->dtype == MLC_DT_BF16 || a->dtype == MLC_DT_F16 ? MLC_PLAN_UNIT_TC16 : MLC_PLAN_UNIT_FP32;
}

void mlc_plan_encode(const mlc_program *p, mlc_kernel_namer namer, void *ctx, uint8_t **out, size_t *out_n) {
  mlc_plan_encode_units(p, namer, ctx, NULL, out, out_n);
}

void mlc_plan_encode_units(const mlc_program *p, mlc_kernel_namer namer, void *ctx, mlc_kernel_unit unit_of, uint8_t **out,
                           size_t *out_n) {
  mlc_arena *a = p->arena;
  /* Kernels first, so the table can precede the entries that use them. */
  names kernels = {0};
  uint32_t **kid = mlc_arena_alloc(a, (p->nfuncs + 1) * sizeof *kid);
  uint64_t **work = mlc_arena_alloc(a, (p->nfuncs + 1) * sizeof *work);
  for (uint32_t k = 0; k < p->nfuncs; k++) {
    const mlc_func *f = &p->funcs[k];
    MLC_ASSERT(f->offset); /* memplan ran */
    kid[k] = mlc_arena_alloc(a, (f->n + 1) * sizeof **kid);
    work[k] = mlc_arena_alloc(a, (f->n + 1) * sizeof **work);
    for (uint32_t i = 0; i < f->n; i++) {
      const mlc_node *n = &f->nodes[i];
      const char *name = n->op == MLC_OP_ALL_GATHER       ? MLC_PLAN_ALL_GATHER
                         : n->op == MLC_OP_REDUCE_SCATTER ? MLC_PLAN_REDUCE_SCATTER
                                                          : namer(ctx, f, i, &work[k][i]);
      if (mlc_ops[n->op].flags & MLC_F_COLL) work[k][i] = 1;
      kid[k][i] = name ? intern(a, &kernels, name) : UINT32_MAX;
    }
  }

  wbuf w = {.a = a};
  put(&w, MLC_PLAN_MAGIC "\0", 8);
  put_u32(&w, MLC_PLAN_VERSION);
  put_u32(&w, 0);
  put_u64(&w, 0); /* payload size and checksum, filled in below */
  put_u64(&w, 0);
  put_str(&w, p->name);
  put_u32(&w, p->nparams);
  for (uint32_t i = 0; i < p->nparams; i++) {
    const mlc_param *prm = &p->params[i];
    put_str(&w, prm->name);
    put_shape(&w, &prm->type);
    put_u8(&w, prm->init);
    bool quant = prm->role == MLC_ROLE_QUANT; /* a packed weight: its bits, group and source in these fields */
    put_f64(&w, quant ? prm->quant_bits : prm->init_a);
    put_f64(&w, quant ? prm->quant_group : prm->init_b);
    put_u8(&w, prm->role);
    put_u8(&w, prm->sharded);
    put_u32(&w, prm->flat);
    put_u64(&w, quant ? prm->quant_of - 1 : (uint64_t)prm->flat_offset);
  }
  put_u32(&w, p->nties);
  for (uint32_t i = 0; i < p->nties; i++) {
    put_str(&w, p->ties[i].name);
    put_u32(&w, p->ties[i].param);
  }
  put_u32(&w, kernels.n);
  for (uint32_t i = 0; i < kernels.n; i++) put_str(&w, kernels.v[i]);
  put_u32(&w, p->nfuncs);
  for (uint32_t k = 0; k < p->nfuncs; k++) {
    const mlc_func *f = &p->funcs[k];
    put_str(&w, f->name);
    put_u64(&w, (uint64_t)f->arena_bytes);
    put_u32(&w, f->n);
    for (uint32_t i = 0; i < f->n; i++) {
      const mlc_node *n = &f->nodes[i];
      /* A view of a parameter is the parameter itself, reshaped. */
      uint32_t root = i;
      while (f->nodes[root].op == MLC_OP_RESHAPE) root = f->nodes[root].in[0];
      bool is_param = f->nodes[root].op == MLC_OP_PARAM;
      put_shape(&w, &n->type);
      put_u64(&w, is_param ? 0 : (uint64_t)f->offset[i]);
      put_u32(&w, is_param ? f->nodes[root].a.param : MLC_PLAN_NO_PARAM);
      put_u8(&w, n->op == MLC_OP_CONST);
      put_f64(&w, n->op == MLC_OP_CONST ? n->a.f : 0);
      put_u8(&w, n->op == MLC_OP_REDUCE_SCATTER);
    }
    put_u32(&w, f->inputs.n);
    for (uint32_t i = 0; i < f->inputs.n; i++) {
      put_str(&w, f->nodes[f->inputs.v[i]].a.name);
      put_u32(&w, f->inputs.v[i]);
    }
    put_u32(&w, f->noutputs);
    for (uint32_t i = 0; i < f->noutputs; i++) {
      put_str(&w, f->outputs[i].name);
      put_u32(&w, f->outputs[i].node);
    }
    uint32_t nsteps = 0;
    for (uint32_t i = 0; i < f->n; i++) nsteps += kid[k][i] != UINT32_MAX;
    mlc_sched sc;
    mlc_schedule(p, f, kid[k], &sc);
    put_u32(&w, nsteps);
    for (uint32_t i = 0; i < f->n; i++) {
      if (kid[k][i] == UINT32_MAX) continue;
      const mlc_node *n = &f->nodes[i];
      double flops, bytes;
      mlc_node_cost(f, n, &flops, &bytes);
      put_u32(&w, kid[k][i]);
      put_str(&w, mlc_arena_printf(a, "%s%%%u", mlc_ops[n->op].name, i));
      put_str(&w, n->scope);
      put_u32(&w, sc.stream[i]);
      put_u32(&w, sc.wait[i] != UINT32_MAX);
      if (sc.wait[i] != UINT32_MAX) put_u32(&w, sc.wait[i]);
      put_u32(&w, n->nin + 1u);
      for (uint32_t j = 0; j < n->nin; j++) put_u32(&w, n->in[j]);
      put_u32(&w, i);
      put_u64(&w, work[k][i]);
      put_f64(&w, flops);
      put_f64(&w, bytes);
      put_u8(&w, mlc_node_sharded(p, f, n));
      uint8_t products = 1, unit = unit_of ? unit_of(p, f, i, &products) : MLC_PLAN_UNIT_FP32;
      MLC_ASSERT(unit < MLC_PLAN_NUNITS && products >= 1 && products <= 3);
      put_u8(&w, unit);
      put_u8(&w, products);
    }
  }
  const mlc_train_config *tc = &p->train;
  bool sched = tc->opt != MLC_OPT_NONE;
  put_f64(&w, sched ? tc->lr : 0);
  put_f64(&w, sched ? tc->min_lr : 0);
  put_u64(&w, sched ? (uint64_t)tc->warmup : 0);
  put_u64(&w, sched ? (uint64_t)tc->lr_steps : 0);
  put_u8(&w, sched ? tc->decay : 0);
  uint64_t len = w.n - MLC_PLAN_HEADER_BYTES, sum = XXH64(w.buf + MLC_PLAN_HEADER_BYTES, (size_t)len, 0);
  for (int i = 0; i < 8; i++) {
    w.buf[16 + i] = (uint8_t)(len >> (8 * i));
    w.buf[24 + i] = (uint8_t)(sum >> (8 * i));
  }
  *out = w.buf;
  *out_n = w.n;
}
