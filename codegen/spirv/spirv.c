/* The driver of the SPIR-V code generator: one module per node, by op,
 * through the emitters of emit_*.c; each module validated, optimised,
 * validated again; identical modules once; the kernel table of
 * runtime/vulkan/kernel.h.  GEMMs asked for with cooperative matrices get
 * two kernels: the cooperative-matrix one, which the plan names, and its
 * portable fallback. */
#include "codegen/spirv/spirv.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "codegen/spirv/attention.h"
#include "codegen/spirv/emit.h"
#include "codegen/spirv/khr.h"

typedef bool (*emitter)(sv *s);

static emitter emitter_of(mlc_op op) {
  switch (op) {
  case MLC_OP_MATMUL: case MLC_OP_LINEAR: case MLC_OP_MATMUL_TN: return sv_emit_gemm;
  case MLC_OP_ATTENTION: case MLC_OP_ATTENTION_GRAD: case MLC_OP_ATTENTION_KV: return sv_emit_attention;
  case MLC_OP_SUM: case MLC_OP_MEAN: case MLC_OP_MAX: case MLC_OP_SOFTMAX: return sv_emit_reduce;
  case MLC_OP_TRANSPOSE: case MLC_OP_SLICE: case MLC_OP_CONCAT: case MLC_OP_SLICE_GRAD: return sv_emit_layout;
  case MLC_OP_RMSNORM: case MLC_OP_LAYERNORM: case MLC_OP_RMSNORM_GRAD_X: case MLC_OP_RMSNORM_GRAD_W:
  case MLC_OP_LAYERNORM_GRAD_X: case MLC_OP_LAYERNORM_GRAD_W:
    return sv_emit_norm;
  case MLC_OP_EMBEDDING: case MLC_OP_EMBEDDING_GRAD: case MLC_OP_CROSS_ENTROPY: case MLC_OP_CROSS_ENTROPY_GRAD:
  case MLC_OP_ADAMW: case MLC_OP_SGD:
    return sv_emit_misc;
  case MLC_OP_BROADCAST: return sv_emit_ew;
  case MLC_OP_FUSED: return sv_emit_fused;
  case MLC_OP_QLINEAR: return sv_emit_qlinear;
  case MLC_OP_ARANGE: return sv_emit_arange;
  default: return (mlc_ops[op].flags & MLC_F_EW) ? sv_emit_ew : NULL;
  }
}

bool sv_fail(sv *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->err, sizeof s->err, fmt, ap);
  va_end(ap);
  return false;
}

bool sv_check_size(sv *s, int64_t numel) {
  if (numel >= ((int64_t)1 << 31)) return sv_fail(s, "a tensor of %lld elements is too large for 32-bit indexing", (long long)numel);
  return true;
}

static const char *const entry_names[MLC_VK_MAX_DISPATCH] = {"main0", "main1", "main2", "main3"};

uint32_t sv_begin(sv *s, uint64_t groups, uint32_t lsize) {
  MLC_ASSERT(s->nd < MLC_VK_MAX_DISPATCH);
  mlc_vk_dispatch *d = &s->d[s->nd];
  uint32_t gxy[2];
  sb_entry_begin(s->b, entry_names[s->nd], lsize, groups, gxy);
  d->entry = entry_names[s->nd];
  d->groups[0] = gxy[0];
  d->groups[1] = gxy[1];
  d->groups[2] = 1;
  d->local[0] = d->local[1] = d->local[2] = 0;
  s->nd++;
  return sb_group(s->b);
}

void sv_end(sv *s) { sb_entry_end(s->b); }

uint32_t sv_gs_begin(sv *s, sv_gs *g, int64_t n) {
  sb *b = s->b;
  uint64_t stride = (uint64_t)b->gx * b->lsize;
  uint32_t start = sb_add(b, sb_mulc(b, sb_group(b), b->lsize), sb_lid(b));
  return sb_for(b, &g->l, start, sb_u32(b, (uint32_t)n), sb_u32(b, (uint32_t)stride));
}

void sv_gs_end(sv *s, sv_gs *g) { sb_for_end(s->b, &g->l); }

uint32_t sv_items_begin(sv *s, sv_gs *g, int64_t n) {
  int64_t groups = sv_ceil_div(n > 0 ? n : 1, SV_THREADS);
  if (groups > SV_MAX_GROUPS) groups = SV_MAX_GROUPS;
  sv_begin(s, (uint64_t)groups, SV_THREADS);
  return sv_gs_begin(s, g, n);
}

void sv_items_end(sv *s, sv_gs *g) {
  sv_gs_end(s, g);
  sv_end(s);
}

uint32_t sv_rows_begin(sv *s, sv_rows *r, int64_t R, uint32_t lsize) {
  uint32_t row = sv_begin(s, (uint64_t)R, lsize);
  sb_if_begin(s->b, &r->guard, sb_ult(s->b, row, sb_u32(s->b, (uint32_t)R)), false);
  return row;
}

void sv_rows_end(sv *s, sv_rows *r) {
  sb_if_end(s->b, &r->guard);
  sv_end(s);
}

static bool is16(int dt) { return mlc_dtype_size((mlc_dtype)dt) == 2; }

/* (lo of a) | (lo of c) << 16 */
static uint32_t pack(sb *b, uint32_t a, uint32_t c) {
  return sb_or(b, sb_and(b, a, sb_u32(b, 0xffffu)), sb_shl(b, c, sb_u32(b, 16)));
}

void sv_items_store(sv *s, int64_t n, uint32_t bind, int dt, sv_bits_fn f, void *ctx) {
  sb *b = s->b;
  sv_gs g;
  uint32_t lo, hi = 0;
  if (!is16(dt)) {
    uint32_t i = sv_items_begin(s, &g, n);
    f(s, ctx, i, &lo, &hi);
    sb_store_bits(b, bind, dt, i, lo, hi);
    sv_items_end(s, &g);
    return;
  }
  uint32_t p = sv_items_begin(s, &g, (n + 1) / 2), i0 = sb_shl(b, p, sb_u32(b, 1)), lo2, hi2;
  sb_if tail;
  if (n % 2) sb_if_begin(b, &tail, sb_ult(b, sb_addc(b, i0, 1), sb_u32(b, (uint32_t)n)), true);
  f(s, ctx, i0, &lo, &hi);
  f(s, ctx, sb_addc(b, i0, 1), &lo2, &hi2);
  sb_stw(b, bind, p, pack(b, lo, lo2));
  if (n % 2) { /* the last element alone: its word's other half is not ours */
    sb_if_else(b, &tail);
    f(s, ctx, i0, &lo, &hi);
    sb_store_bits(b, bind, dt, i0, lo, 0);
    sb_if_end(b, &tail);
  }
  sv_items_end(s, &g);
}

void sv_row_store(sv *s, uint32_t base, int64_t L, uint32_t bind, int dt, sv_bits_fn f, void *ctx) {
  sb *b = s->b;
  uint32_t lid = sb_lid(b), lo, hi = 0, lo2, hi2;
  sb_loop l;
  if (!is16(dt) || L % 2) {
    uint32_t j = sb_for(b, &l, lid, sb_u32(b, (uint32_t)L), sb_u32(b, b->lsize));
    f(s, ctx, j, &lo, &hi);
    sb_store_bits(b, bind, dt, sb_add(b, base, j), lo, hi);
    sb_for_end(b, &l);
    return;
  }
  uint32_t j = sb_for(b, &l, sb_shl(b, lid, sb_u32(b, 1)), sb_u32(b, (uint32_t)L), sb_u32(b, 2 * b->lsize));
  f(s, ctx, j, &lo, &hi);
  f(s, ctx, sb_addc(b, j, 1), &lo2, &hi2);
  sb_stw(b, bind, sb_shr(b, sb_add(b, base, j), sb_u32(b, 1)), pack(b, lo, lo2));
  sb_for_end(b, &l);
}

static bool has_coopmat_cap(const uint32_t *w, size_t n) {
  for (size_t i = 5; i < n;) {
    uint32_t op = w[i] & 0xffff, len = w[i] >> 16;
    if (!len) return false;
    if (op == SpvOpCapability && w[i + 1] == SpvCapabilityCooperativeMatrixNV) return true;
    if (op == SpvOpMemoryModel) return false; /* capabilities come first */
    i += len;
  }
  return false;
}

/* Builds one node's module as the builder writes it (*w malloc'ed). */
static mlc_status make(const mlc_program *p, const mlc_func *f, uint32_t i, const mlc_spirv_options *o, bool coop, sv *s,
                       uint32_t **words, size_t *nwords) {
  const mlc_node *n = &f->nodes[i];
  emitter e = emitter_of((mlc_op)n->op);
  if (!e)
    return mlc_status_make(MLC_INVALID_ARGUMENT, "%s %%%u (%s): the spirv target has no kernel for this op", f->name, i,
                           mlc_ops[n->op].name);
  if (n->nin + 2u > SB_MAX_BIND)
    return mlc_status_make(MLC_INVALID_ARGUMENT, "%s %%%u (%s): %u inputs are more than a Vulkan kernel here takes (%u)",
                           f->name, i, mlc_ops[n->op].name, n->nin, SB_MAX_BIND - 2);
  sb b;
  sb_init(&b, n->nin + 2u);
  memset(s, 0, sizeof *s);
  *s = (sv){.p = p, .f = f, .n = n, .node = i, .o = o, .b = &b, .coopmat_variant = coop};
  if (!e(s)) {
    sb_free(&b);
    return mlc_status_make(MLC_INVALID_ARGUMENT, "%s %%%u (%s): %s", f->name, i, mlc_ops[n->op].name, s->err);
  }
  MLC_ASSERT(s->nd > 0);
  *words = sb_finish(&b, nwords);
  sb_free(&b);
  s->b = NULL;
  return NULL;
}

/* Validates, optimises and validates again a module; *w is replaced by
 * the optimised words (or freed on failure).  A module that fails is a
 * bug in the emitters: MLC_INTERNAL.  With khr, a cooperative-matrix module
 * is translated to its KHR form, and (nv_words not NULL) its validated NV
 * form is kept in *nv_words when it means the same (not a bf16 one, whose
 * NV form holds bf16 bits in f16 matrices), else *nv_words is NULL. */
static mlc_status finalize(const mlc_func *f, uint32_t i, const mlc_spirv_options *o, bool khr, bool bf16, uint32_t **words,
                           size_t *nwords, uint32_t **nv_words, size_t *nv_n) {
  if (nv_words) *nv_words = NULL, *nv_n = 0;
  const mlc_node *n = &f->nodes[i];
  uint32_t *w = *words;
  size_t nw = *nwords;
  bool v13 = has_coopmat_cap(w, nw);
  char verr[512];
  if (!mlc_spirv_validate_env(w, nw, v13, verr, sizeof verr)) {
    free(w);
    return mlc_status_make(MLC_INTERNAL, "internal error: the SPIR-V module of %s %%%u (%s) is invalid: %s", f->name, i,
                           mlc_ops[n->op].name, verr);
  }
  if (!o || o->optimize) {
    uint32_t *ow;
    size_t on;
    if (!mlc_spirv_optimize(w, nw, v13, &ow, &on, verr, sizeof verr)) {
      free(w);
      return mlc_status_make(MLC_INTERNAL, "internal error: %s %%%u (%s): %s", f->name, i, mlc_ops[n->op].name, verr);
    }
    free(w);
    w = ow, nw = on;
    if (!mlc_spirv_validate_env(w, nw, v13, verr, sizeof verr)) {
      free(w);
      return mlc_status_make(MLC_INTERNAL, "internal error: the optimised SPIR-V module of %s %%%u (%s) is invalid: %s",
                             f->name, i, mlc_ops[n->op].name, verr);
    }
  }
  if (khr && v13) { /* --spirv-coopmat=khr: the validated NV module, translated and checked (khr.h) */
    uint32_t *kw;
    size_t kn;
    /* a bf16 GEMM's NV form holds bf16 bits in f16 matrices: only its KHR form says bf16 */
    bool ok = bf16 ? mlc_spirv_nv_to_khr_bf16(w, nw, &kw, &kn, verr, sizeof verr) : mlc_spirv_nv_to_khr(w, nw, &kw, &kn, verr, sizeof verr);
    if (ok && nv_words && !bf16) *nv_words = w, *nv_n = nw;
    else free(w);
    if (!ok)
      return mlc_status_make(MLC_INTERNAL, "internal error: %s %%%u (%s): SPV_KHR_cooperative_matrix: %s", f->name, i,
                             mlc_ops[n->op].name, verr);
    if (!mlc_spirv_khr_check(kw, kn, verr, sizeof verr)) {
      free(kw);
      if (nv_words) free(*nv_words), *nv_words = NULL;
      return mlc_status_make(MLC_INTERNAL, "internal error: the KHR SPIR-V module of %s %%%u (%s) is malformed: %s",
                             f->name, i, mlc_ops[n->op].name, verr);
    }
    w = kw, nw = kn;
  }
  *words = w;
  *nwords = nw;
  return NULL;
}

/* Modules as the builder wrote them, and the kernel each became: the same
 * node in another layer is recognised before validation and optimisation,
 * which are most of the time spent here. */
typedef struct {
  uint64_t h;
  uint32_t *w;
  size_t n;
  uint32_t kernel; /* UINT32_MAX: a cooperative-matrix variant the emitter declined */
} seen;

typedef struct {
  seen *v;
  size_t n, cap;
} seen_set;

static uint32_t *seen_find(const seen_set *ss, const uint32_t *w, size_t n, uint64_t h) {
  for (size_t i = 0; i < ss->n; i++)
    if (ss->v[i].h == h && ss->v[i].n == n && !memcmp(ss->v[i].w, w, n * 4)) return &ss->v[i].kernel;
  return NULL;
}

static void seen_add(seen_set *ss, uint32_t *w, size_t n, uint64_t h, uint32_t kernel) {
  if (ss->n == ss->cap) {
    ss->cap = ss->cap ? 2 * ss->cap : 64;
    ss->v = realloc(ss->v, ss->cap * sizeof *ss->v);
    MLC_ASSERT(ss->v);
  }
  ss->v[ss->n++] = (seen){h, w, n, kernel};
}

static void seen_free(seen_set *ss) {
  for (size_t i = 0; i < ss->n; i++) free(ss->v[i].w);
  free(ss->v);
}

typedef struct {
  mlc_spirv_module *m;
  uint64_t *hashes;
  uint32_t cap;
  mlc_arena *a;
} table;

/* The kernel index of a built module: an existing one with the same words,
 * or a new one (the words copied into the arena). */
static uint32_t add_kernel(table *t, const mlc_node *n, const sv *s, uint32_t *w, size_t nw) {
  mlc_spirv_module *m = t->m;
  uint64_t h = XXH64(w, nw * 4, 0);
  for (uint32_t j = 0; j < m->nkernels; j++)
    if (t->hashes[j] == h && m->kernels[j].nwords == nw && !memcmp(m->kernels[j].words, w, nw * 4)) {
      /* the same words are the same sizes, so the same dispatches */
      MLC_ASSERT(m->kernels[j].ndispatch == s->nd && m->kernels[j].scratch == s->scratch &&
                 !memcmp(m->kernels[j].dispatch, s->d, s->nd * sizeof *s->d));
      free(w);
      return j;
    }
  if (m->nkernels == t->cap) {
    m->kernels = mlc_arena_grow(t->a, m->kernels, t->cap * sizeof *m->kernels, 2 * t->cap * sizeof *m->kernels);
    t->hashes = mlc_arena_grow(t->a, t->hashes, t->cap * sizeof *t->hashes, 2 * t->cap * sizeof *t->hashes);
    t->cap *= 2;
  }
  uint32_t k = m->nkernels++;
  t->hashes[k] = h;
  mlc_vk_kernel *kd = &m->kernels[k];
  memset(kd, 0, sizeof *kd);
  uint32_t *copy = mlc_arena_alloc(t->a, nw * 4);
  memcpy(copy, w, nw * 4);
  free(w);
  kd->symbol = mlc_arena_printf(t->a, "mlc_%s_%016llx", mlc_ops[n->op].name, (unsigned long long)h);
  kd->words = copy;
  kd->nwords = nw;
  kd->nargs = n->nin + 1u;
  kd->scratch = s->scratch;
  kd->ndispatch = s->nd;
  memcpy(kd->dispatch, s->d, sizeof kd->dispatch);
  kd->coopmat = s->coopmat;
  memcpy(kd->coopmat_mnk, s->mnk, sizeof kd->coopmat_mnk);
  kd->fallback = MLC_VK_NO_FALLBACK;
  return k;
}

/* The kernel of node i (coop: its cooperative-matrix variant), built or
 * found; *out UINT32_MAX when the emitter declined the variant. */
static mlc_status kernel_for(table *t, seen_set *ss, const mlc_program *p, const mlc_func *f, uint32_t i,
                             const mlc_spirv_options *o, bool coop, uint32_t *out) {
  sv s;
  uint32_t *w = NULL;
  size_t nw = 0;
  MLC_RETURN_IF_ERROR(make(p, f, i, o, coop, &s, &w, &nw));
  uint64_t h = XXH64(w, nw * 4, 0);
  uint32_t *k = seen_find(ss, w, nw, h);
  if (k) {
    free(w);
    *out = *k;
    return NULL;
  }
  size_t rn = nw;
  uint32_t *raw = malloc(rn * 4);
  MLC_ASSERT(raw);
  memcpy(raw, w, rn * 4);
  if (coop && !s.coopmat) { /* declined (f32): the fallback alone */
    free(w);
    seen_add(ss, raw, rn, h, UINT32_MAX);
    *out = UINT32_MAX;
    return NULL;
  }
  MLC_ASSERT(!s.coop_bf16 || !p->opts.spirv_coopmat_nv); /* never shipped in its NV form */
  uint32_t *nvw;
  size_t nvn;
  mlc_status st = finalize(f, i, o, !p->opts.spirv_coopmat_nv, s.coop_bf16, &w, &nw, &nvw, &nvn);
  if (st) {
    free(raw);
    return st;
  }
  *out = add_kernel(t, &f->nodes[i], &s, w, nw);
  /* the KHR module's NV form, validated, as its fallback for drivers with NV alone */
  if (nvw) { /* add_kernel may move the table: the index first */
    uint32_t nvk = add_kernel(t, &f->nodes[i], &s, nvw, nvn);
    t->m->kernels[*out].fallback = nvk;
  }
  seen_add(ss, raw, rn, h, *out);
  return NULL;
}

mlc_status mlc_spirv_emit(const mlc_program *p, const mlc_spirv_options *o, mlc_spirv_module *out) {
  memset(out, 0, sizeof *out);
  table t = {.m = out, .cap = 64, .a = p->arena};
  seen_set ss = {0};
  out->kernels = mlc_arena_alloc(p->arena, t.cap * sizeof *out->kernels);
  t.hashes = mlc_arena_alloc(p->arena, t.cap * sizeof *t.hashes);
  mlc_status st = NULL;
  for (uint32_t k = 0; k < p->nfuncs && !st; k++) {
    const mlc_func *f = &p->funcs[k];
    out->funcs[k] = f;
    out->kernel_of[k] = mlc_arena_alloc(p->arena, (f->n + 1) * sizeof **out->kernel_of);
    for (uint32_t i = 0; i < f->n && !st; i++) {
      const mlc_node *n = &f->nodes[i];
      out->kernel_of[k][i] = UINT32_MAX;
      if ((mlc_ops[n->op].flags & (MLC_F_LEAF | MLC_F_VIEW)) || mlc_node_in_place(f, i)) continue;
      uint32_t fb, cm = UINT32_MAX;
      st = kernel_for(&t, &ss, p, f, i, o, false, &fb);
      bool mm = n->op == MLC_OP_MATMUL || n->op == MLC_OP_LINEAR || n->op == MLC_OP_MATMUL_TN || n->op == MLC_OP_FUSED ||
                n->op == MLC_OP_ATTENTION || n->op == MLC_OP_ATTENTION_GRAD; /* 16-bit attention: attention_coop.c */
      if (!st && o && o->coopmat && mm) {
        st = kernel_for(&t, &ss, p, f, i, o, true, &cm);
        if (!st && cm != UINT32_MAX) { /* the portable kernel ends the chain (KHR, NV, portable) */
          uint32_t end = cm;
          while (out->kernels[end].coopmat && out->kernels[end].fallback != MLC_VK_NO_FALLBACK) end = out->kernels[end].fallback;
          if (out->kernels[end].coopmat) out->kernels[end].fallback = fb; /* else a found kernel's chain, already whole */
        }
      }
      out->kernel_of[k][i] = cm != UINT32_MAX ? cm : fb;
    }
  }
  seen_free(&ss);
  return st;
}

const char *mlc_spirv_kernel_namer(void *ctx, const mlc_func *f, uint32_t node, uint64_t *out_work_items) {
  const mlc_spirv_module *m = ctx;
  *out_work_items = 0;
  uint32_t k = 0;
  while (k < MLC_MAX_FUNCS && m->funcs[k] != f) k++;
  if (k == MLC_MAX_FUNCS || m->kernel_of[k][node] == UINT32_MAX) return NULL;
  const mlc_vk_kernel *kd = &m->kernels[m->kernel_of[k][node]];
  *out_work_items = (uint64_t)kd->dispatch[0].groups[0] * kd->dispatch[0].groups[1] * kd->dispatch[0].groups[2];
  return kd->symbol;
}

/* The emit loop's own test: no kernel for leaves and views, an emitter for
 * every other op (collectives have none). */
bool mlc_spirv_supports_op(mlc_op op) {
  return (mlc_ops[op].flags & (MLC_F_LEAF | MLC_F_VIEW)) || emitter_of(op);
}

bool mlc_spirv_supports_node(const mlc_func *f, const mlc_node *n, char *why, size_t whyn) {
  if (n->op != MLC_OP_ATTENTION_KV) return true;
  const mlc_type *q = &f->nodes[n->in[0]].type, *v = &f->nodes[n->in[2]].type;
  return attn_kv_fits(q->dtype, q->dim[3], v->dim[3], why, whyn);
}
