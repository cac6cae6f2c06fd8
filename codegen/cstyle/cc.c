/* The shared pieces of the C-like emitter: text and its templates, the
 * launches, types, loads and stores, literals (see cc.h). */
#include "codegen/cstyle/cc.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

void cc_text_vprintf(cc_text *t, const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (n < 0) return;
  if (t->n + (size_t)n + 1 > t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 4096;
    while (cap < t->n + (size_t)n + 1) cap *= 2;
    t->s = mlc_arena_grow(t->a, t->s, t->n, cap);
    t->cap = cap;
  }
  vsnprintf(t->s + t->n, (size_t)n + 1, fmt, ap);
  t->n += (size_t)n;
}

void cc_text_printf(cc_text *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  cc_text_vprintf(t, fmt, ap);
  va_end(ap);
}

/* What a template may name, and the dialect's field that spells it. */
static const struct {
  const char *name;
  size_t field;
} spellings[] = {
    {"$i64", offsetof(cc_dialect, i64)},       {"$ll", offsetof(cc_dialect, i64_suffix)},
    {"$f64", offsetof(cc_dialect, f64)},       {"$tid", offsetof(cc_dialect, thread_idx)},
    {"$bid", offsetof(cc_dialect, block_idx)}, {"$gdim", offsetof(cc_dialect, grid_dim)},
    {"$barrier", offsetof(cc_dialect, barrier)}, {"$shared", offsetof(cc_dialect, shared)},
};

/* The template with the dialect's spellings in place of the names above;
 * fmt itself when it has none (most have).  The template is the emitter's
 * own text, never what its %s arguments bring. */
static const char *spell(const cc *c, const char *fmt) {
  if (!strchr(fmt, '$')) return fmt;
  cc_text t = {.a = c->p->arena};
  const char *s = fmt, *d;
  while ((d = strchr(s, '$'))) {
    size_t k = 0, n = sizeof spellings / sizeof *spellings;
    while (k < n && strncmp(d, spellings[k].name, strlen(spellings[k].name))) k++;
    MLC_ASSERT(k < n); /* a template names no other */
    const char *w = *(const char *const *)((const char *)c->t + spellings[k].field);
    cc_text_printf(&t, "%.*s%s", (int)(d - s), s, w);
    s = d + strlen(spellings[k].name);
  }
  cc_text_printf(&t, "%s", s);
  return t.s;
}

void cc_printf(cc *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  cc_text_vprintf(c->out, spell(c, fmt), ap);
  va_end(ap);
}

const char *cc_fmt(cc *c, const char *fmt, ...) {
  va_list ap, ap2;
  const char *tpl = spell(c, fmt);
  va_start(ap, fmt);
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, tpl, ap2);
  va_end(ap2);
  char *s = mlc_arena_alloc(c->p->arena, (size_t)(n > 0 ? n : 0) + 1);
  vsnprintf(s, (size_t)(n > 0 ? n : 0) + 1, tpl, ap);
  va_end(ap);
  return s;
}

void cc_error(cc *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->err, sizeof c->err, fmt, ap);
  va_end(ap);
}

int cc_f32_products(const cc *c) {
  switch (c->p->opts.f32_matmul) {
  case MLC_F32MM_IEEE: return 0;
  case MLC_F32MM_TF32: return 1;
  default: return 3;
  }
}

const char *cc_stype(const cc *c, int dt) {
  switch (dt) {
  case MLC_DT_F32: return "float";
  case MLC_DT_BF16: return "mlc_bf16";
  case MLC_DT_F16: return "mlc_f16";
  case MLC_DT_I32: return "int";
  case MLC_DT_I64: return c->t->i64;
  default: return "unsigned char";
  }
}

const char *cc_ctype(const cc *c, int dt) { return mlc_dtype_is_float((mlc_dtype)dt) ? "float" : cc_stype(c, dt); }

const char *cc_load(cc *c, const char *buf, int dt, const char *idx) {
  if (mlc_dtype_is_float((mlc_dtype)dt)) return cc_fmt(c, "to_f32(%s[%s])", buf, idx);
  return cc_fmt(c, "%s[%s]", buf, idx);
}

const char *cc_store(cc *c, const char *buf, int dt, const char *idx, const char *val) {
  if (mlc_dtype_is_float((mlc_dtype)dt)) return cc_fmt(c, "%s[%s] = mlc_store_cvt<%s>(%s);", buf, idx, cc_stype(c, dt), val);
  return cc_fmt(c, "%s[%s] = (%s)(%s);", buf, idx, cc_stype(c, dt), val);
}

const char *cc_rounded(cc *c, int dt, const char *v) {
  if (!mlc_dtype_is_float((mlc_dtype)dt) || dt == MLC_DT_F32) return v;
  return cc_fmt(c, "to_f32(from_f32<%s>(%s))", cc_stype(c, dt), v);
}

const char *cc_const_lit(cc *c, const mlc_node *k) {
  if (mlc_dtype_is_float((mlc_dtype)k->type.dtype)) return cc_flit(c, k->a.f);
  if (k->type.dtype == MLC_DT_I64) return cc_fmt(c, "%lld$ll", (long long)k->a.f);
  return cc_fmt(c, "%lld", (long long)k->a.f);
}

const char *cc_flit(cc *c, double v) {
  if (isnan(v)) return "__int_as_float(0x7fc00000)";
  if (isinf(v)) return v > 0 ? "MLC_INF" : "(-MLC_INF)";
  const char *t = cc_fmt(c, "%.9g", (double)(float)v);
  return cc_fmt(c, "%s%sf", t, strpbrk(t, ".e") ? "" : ".0"); /* "0f" is not a float literal */
}

void cc_begin(cc *c, uint64_t grid, uint32_t block, uint32_t smem) { cc_begin_min(c, grid, block, smem, 1); }

void cc_begin_min(cc *c, uint64_t grid, uint32_t block, uint32_t smem, uint32_t min_blocks) {
  MLC_ASSERT(c->nlaunch < CC_MAX_LAUNCH);
  c->launch[c->nlaunch] = (cc_launch){grid, block, smem};
  c->t->kernel_begin(c, block, min_blocks);
  c->nlaunch++;
}

void cc_end(cc *c) {
  cc_printf(c, "}\n\n");
  if (c->t->kernel_end) c->t->kernel_end(c);
}

int cc_pick_vec(int64_t n, int es) {
  for (int v = 16 / es; v > 1; v /= 2)
    if (n % v == 0) return v;
  return 1;
}

const char *cc_vtype(int bytes) {
  switch (bytes) {
  case 16: return "uint4";
  case 8: return "uint2";
  case 4: return "unsigned int";
  default: return "unsigned short";
  }
}

void cc_vec_load(cc *c, int vec, int dt, const char *dst, const char *off, const char *src, const char *idx) {
  const char *T = cc_stype(c, dt), *VT = cc_vtype(vec * mlc_dtype_size((mlc_dtype)dt));
  if (vec == 1) {
    cc_printf(c, "      %s[%s] = to_f32(%s[%s]);\n", dst, off, src, idx);
    return;
  }
  cc_printf(c, "      { %s u_ = *(const %s%s *)(%s + (%s)); const %s%s *e_ = (const %s%s *)&u_;\n", VT, c->t->dev, VT, src, idx,
            c->t->thr, T, c->t->thr, T);
  cc_printf(c, "#pragma unroll\n        for (int q = 0; q < %d; q++) %s[%s + q] = to_f32(e_[q]); }\n", vec, dst, off);
}

void cc_byte_tile_store_transposed(cc *c, const char *dst, int64_t R, int64_t C) {
  cc_printf(c, "  $barrier;\n");
  /* output rows c0 + y (input columns), 4 bytes from column r0 + 4 tx (input rows) */
  cc_printf(c, "  for (int y = ty; y < 64; y += %d) {\n", CC_BYTE_TILE / 16);
  cc_printf(c, "    const $i64 cc = c0 + y, r = r0 + 4 * tx;\n    const int w = y >> 2, sh = 8 * (y & 3);\n");
  cc_printf(c, "    if (r < %lld$ll && cc < %lld$ll) *(%sunsigned int *)(%s + cc * %lld$ll + r) = (tile[4 * tx][w] >> sh & 0xffu) | "
               "(tile[4 * tx + 1][w] >> sh & 0xffu) << 8 | (tile[4 * tx + 2][w] >> sh & 0xffu) << 16 | (tile[4 * tx + 3][w] >> sh) << 24;\n  }\n",
            (long long)R, (long long)C, c->t->dev, dst, (long long)R);
}

void cc_vec_store(cc *c, int vec, int dt, const char *dst, const char *idx, const char *src) {
  const char *T = cc_stype(c, dt), *VT = cc_vtype(vec * mlc_dtype_size((mlc_dtype)dt));
  if (vec == 1) {
    cc_printf(c, "      %s[%s] = mlc_store_cvt<%s>(%s[0]);\n", dst, idx, T, src);
    return;
  }
  cc_printf(c, "      { %s u_; %s%s *e_ = (%s%s *)&u_;\n", VT, c->t->thr, T, c->t->thr, T);
  cc_printf(c, "#pragma unroll\n        for (int q = 0; q < %d; q++) e_[q] = mlc_store_cvt<%s>(%s[q]);\n", vec, T, src);
  cc_printf(c, "        *(%s%s *)(%s + (%s)) = u_; }\n", c->t->dev, VT, dst, idx);
}

void cc_plan_rows(cc_rowplan *rp, int64_t R, int64_t D, int dt, int cache_max) {
  rp->R = R, rp->D = D;
  rp->vec = cc_pick_vec(D, mlc_dtype_size((mlc_dtype)dt));
  rp->nv = D / rp->vec;
  rp->tpr = rp->nv <= 128 ? 32 : CC_ROW_THREADS;
  rp->rpb = CC_ROW_THREADS / rp->tpr;
  rp->nit = cc_ceil_div(rp->nv, rp->tpr);
  rp->cache = cache_max > 0 && rp->nit * rp->vec <= cache_max;
}

void cc_row_head(cc *c, const cc_rowplan *rp) {
  cc_printf(c, "  const int lane = $tid %% %d;\n", rp->tpr);
  cc_printf(c, "  const $i64 row = ($i64)$bid * %d + $tid / %d;\n", rp->rpb, rp->tpr);
  if (rp->rpb > 1 && rp->R % rp->rpb) cc_printf(c, "  if (row >= %lld$ll) return; /* whole warps */\n", (long long)rp->R);
  if (rp->tpr > 32) cc_printf(c, "  $shared float sh[32];\n");
}
