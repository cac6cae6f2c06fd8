/* Writes the binary plan described in runtime/plan.h from the IR: one value
 * per node (its arena offset from memplan, or its parameter, and the value
 * whose storage it views, if any), the entry point's inputs and outputs,
 * and one step per node that the target runs as a kernel, with its inputs
 * then its output as arguments; and the code the target emitted
 * (executables and dispatch records), taken from its kernel table, so that
 * the plan alone is what the runtime needs. */
#include "codegen/plan.h"

#include <string.h>
#include <xxhash.h>

#include "codegen/schedule.h"
#include "ir/fused.h"
#include "passes/passes.h"
#include "runtime/plan.h"

typedef struct {
  mlc_arena *a;
  uint8_t *buf;
  size_t n, cap;
} wbuf;

static void put(wbuf *w, const void *src, size_t n) {
  if (!n) return;
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
  if (n->op != MLC_OP_FUSED || !mlc_fused_program(f, n, &pr, err, sizeof err) || pr.gemm < 0 ||
      !(mlc_ops[pr.ins[pr.gemm].op].flags & MLC_F_MM))
    return false;
  /* the GEMM's operands are $0 and $1 (after a prologue: its norm of $0, of $0's type) */
  *op = pr.ins[pr.gemm].op, *a = &f->nodes[n->in[0]].type;
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
  mlc_plan_encode_code(p, namer, ctx, unit_of, NULL, out, out_n);
}

/* CUDA's tensor maps, as runtime/plan.h lays out the extra bytes. */
static void cuda_extra(mlc_arena *a, const mlc_cuda_kernel *k, mlc_plan_kernel_code *r) {
  if (!k->ntmap) return;
  wbuf w = {.a = a};
  put_u32(&w, k->ntmap);
  for (uint32_t t = 0; t < k->ntmap; t++) {
    const mlc_cuda_tmap *m = &k->tmap[t];
    put_u32(&w, m->arg);
    put_u32(&w, m->rank);
    put_u32(&w, m->elem_bytes);
    put_u32(&w, m->swizzle);
    put_u64(&w, m->offset);
    for (int d = 0; d < 5; d++) put_u64(&w, m->dim[d]);
    for (int d = 0; d < 4; d++) put_u64(&w, m->stride[d]);
    for (int d = 0; d < 5; d++) put_u32(&w, m->box[d]);
  }
  r->extra = w.buf;
  r->extra_bytes = (uint32_t)w.n;
}

void mlc_plan_code_cuda(mlc_arena *a, const mlc_cuda_kernel *k, uint32_t n, const char *format, const void *code,
                        size_t bytes, mlc_plan_code *out) {
  mlc_plan_executable *x = mlc_arena_alloc(a, sizeof *x);
  MLC_ASSERT(bytes <= UINT32_MAX);
  *x = (mlc_plan_executable){format, code, (uint32_t)bytes};
  mlc_plan_kernel_code *r = mlc_arena_alloc(a, (n + 1) * sizeof *r);
  for (uint32_t i = 0; i < n; i++) {
    MLC_ASSERT(k[i].nlaunch >= 1 && k[i].nlaunch <= MLC_PLAN_MAX_LAUNCH);
    r[i] = (mlc_plan_kernel_code){.symbol = k[i].symbol, .scratch = k[i].scratch, .nlaunch = k[i].nlaunch};
    for (uint32_t l = 0; l < k[i].nlaunch; l++) /* grids are 1-D */
      r[i].launch[l] = (mlc_plan_launch){k[i].launch[l].fn, {k[i].launch[l].grid, 1, 1}, {k[i].launch[l].block, 1, 1},
                                         k[i].launch[l].smem};
    cuda_extra(a, &k[i], &r[i]);
  }
  *out = (mlc_plan_code){1, x, n, r, false};
}

void mlc_plan_code_vulkan(mlc_arena *a, const mlc_vk_kernel *k, uint32_t n, mlc_plan_code *out) {
  mlc_plan_executable *x = mlc_arena_alloc(a, (n + 1) * sizeof *x);
  mlc_plan_kernel_code *r = mlc_arena_alloc(a, (n + 1) * sizeof *r);
  for (uint32_t i = 0; i < n; i++) {
    MLC_ASSERT(k[i].ndispatch >= 1 && k[i].ndispatch <= MLC_PLAN_MAX_LAUNCH && k[i].nwords <= UINT32_MAX / 4);
    /* The words as little-endian bytes, whatever the compiler's host. */
    wbuf code = {.a = a};
    for (size_t j = 0; j < k[i].nwords; j++) put_u32(&code, k[i].words[j]);
    x[i] = (mlc_plan_executable){MLC_PLAN_FORMAT_SPIRV, code.buf, (uint32_t)code.n};
    r[i] = (mlc_plan_kernel_code){.symbol = k[i].symbol, .executable = i, .nargs = k[i].nargs, .scratch = k[i].scratch,
                                  .nlaunch = k[i].ndispatch};
    for (uint32_t l = 0; l < k[i].ndispatch; l++) {
      const mlc_vk_dispatch *d = &k[i].dispatch[l];
      r[i].launch[l] = (mlc_plan_launch){d->entry, {d->groups[0], d->groups[1], d->groups[2]},
                                         {d->local[0], d->local[1], d->local[2]}, 0};
    }
    wbuf w = {.a = a};
    put_u8(&w, k[i].coopmat);
    for (int j = 0; j < 3; j++) put_u32(&w, k[i].coopmat_mnk[j]);
    put_u32(&w, k[i].fallback); /* a kernel index here is one of the plan (mlc_plan_code) */
    r[i].extra = w.buf;
    r[i].extra_bytes = (uint32_t)w.n;
  }
  *out = (mlc_plan_code){n, x, n, r, false};
}

void mlc_plan_encode_code(const mlc_program *p, mlc_kernel_namer namer, void *ctx, mlc_kernel_unit unit_of,
                          const mlc_plan_code *code, uint8_t **out, size_t *out_n) {
  mlc_arena *a = p->arena;
  static const mlc_plan_code none = {0};
  if (!code) code = &none;
  /* Kernels first, so the table can precede the entries that use them:
   * the code's own in its order, then those only steps name. */
  names kernels = {0};
  for (uint32_t i = 0; i < code->nkernels; i++) MLC_ASSERT(intern(a, &kernels, code->kernels[i].symbol) == i);
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
                         : n->op == MLC_OP_ALL_REDUCE     ? MLC_PLAN_ALL_REDUCE
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
    bool quant = prm->role == MLC_ROLE_QUANT; /* a packed weight: its scheme, bits, group and source in these fields */
    bool from = quant || prm->role == MLC_ROLE_SHADOW; /* made from a weight (its index in flat_offset's place) */
    _Static_assert(MLC_QS_ASYM == MLC_PLAN_QUANT_ASYM && MLC_QS_BF16 == MLC_PLAN_QUANT_BF16, "one scheme's flags");
    put_u8(&w, quant ? prm->quant_scheme : prm->init);
    put_f64(&w, quant ? prm->quant_bits : prm->init_a);
    put_f64(&w, quant ? prm->quant_group : prm->init_b);
    put_u8(&w, prm->role);
    put_u8(&w, prm->sharded);
    put_u32(&w, prm->flat);
    put_u64(&w, from ? prm->quant_of - 1 : (uint64_t)prm->flat_offset);
  }
  put_u32(&w, p->nties);
  for (uint32_t i = 0; i < p->nties; i++) {
    put_str(&w, p->ties[i].name);
    put_u32(&w, p->ties[i].param);
  }
  /* Every kernel's argument count, from the steps that run it. */
  uint32_t *nargs = mlc_arena_alloc(a, (kernels.n + 1) * sizeof *nargs);
  memset(nargs, 0, (kernels.n + 1) * sizeof *nargs);
  for (uint32_t k = 0; k < p->nfuncs; k++)
    for (uint32_t i = 0; i < p->funcs[k].n; i++) {
      uint32_t id = kid[k][i], n = p->funcs[k].nodes[i].nin + 1u;
      if (id == UINT32_MAX) continue;
      MLC_ASSERT(!nargs[id] || nargs[id] == n); /* one kernel, one signature */
      nargs[id] = n;
    }
  bool native = code->native;
  put_u32(&w, code->nexecutables + native);
  for (uint32_t i = 0; i < code->nexecutables; i++) {
    const mlc_plan_executable *x = &code->executables[i];
    put_str(&w, x->format);
    put_u32(&w, x->bytes);
    put(&w, x->code, x->bytes);
  }
  if (native) {
    put_str(&w, MLC_PLAN_FORMAT_NATIVE);
    put_u32(&w, 0);
  }
  put_u32(&w, kernels.n);
  for (uint32_t i = 0; i < kernels.n; i++) {
    const char *sym = kernels.v[i];
    put_str(&w, sym);
    bool coll = !strcmp(sym, MLC_PLAN_ALL_GATHER) || !strcmp(sym, MLC_PLAN_REDUCE_SCATTER) || !strcmp(sym, MLC_PLAN_ALL_REDUCE);
    if (i < code->nkernels) {
      const mlc_plan_kernel_code *r = &code->kernels[i];
      MLC_ASSERT(r->executable < code->nexecutables && r->nlaunch >= 1 && r->nlaunch <= MLC_PLAN_MAX_LAUNCH);
      MLC_ASSERT(!r->nargs || !nargs[i] || r->nargs == nargs[i]);
      put_u32(&w, r->executable);
      put_u32(&w, r->nargs ? r->nargs : nargs[i]);
      put_u64(&w, r->scratch);
      put_u32(&w, r->nlaunch);
      for (uint32_t l = 0; l < r->nlaunch; l++) {
        const mlc_plan_launch *L = &r->launch[l];
        put_str(&w, L->entry);
        for (int j = 0; j < 3; j++) put_u32(&w, L->grid[j]);
        for (int j = 0; j < 3; j++) put_u32(&w, L->block[j]);
        put_u32(&w, L->smem);
      }
      put_u32(&w, r->extra_bytes);
      put(&w, r->extra, r->extra_bytes);
    } else if (native && !coll) { /* one launch of the symbol itself */
      put_u32(&w, code->nexecutables);
      put_u32(&w, nargs[i]);
      put_u64(&w, 0);
      put_u32(&w, 1);
      put_str(&w, sym);
      for (int j = 0; j < 7; j++) put_u32(&w, 0);
      put_u32(&w, 0);
    } else { /* a collective, or a plan without code */
      MLC_ASSERT(coll || !code->nexecutables);
      put_u32(&w, MLC_PLAN_NO_EXECUTABLE);
      put_u32(&w, nargs[i]);
      put_u64(&w, 0);
      put_u32(&w, 0);
      put_u32(&w, 0);
    }
  }
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
      uint32_t storage = mlc_memplan_root(f, i); /* views told from reuses of the same bytes */
      put_u32(&w, storage == i ? MLC_PLAN_NO_VALUE : storage);
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
