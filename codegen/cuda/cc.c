/* The shared pieces of the C-like emitter: text, the kernel header, types,
 * loads and stores, literals (see cc.h). */
#include "codegen/cuda/cc.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

const cc_target cc_target_cuda = {
    .name = "cuda",
    .shared = "__shared__",
    .barrier = "__syncthreads()",
    .thread_idx = "threadIdx.x",
    .block_idx = "blockIdx.x",
    .restrict_kw = "__restrict__",
    .device_fn = "__device__ __forceinline__",
    .tensor_cores = true,
};

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

void cc_printf(cc *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  cc_text_vprintf(c->out, fmt, ap);
  va_end(ap);
}

const char *cc_fmt(cc *c, const char *fmt, ...) {
  va_list ap, ap2;
  va_start(ap, fmt);
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  char *s = mlc_arena_alloc(c->p->arena, (size_t)(n > 0 ? n : 0) + 1);
  vsnprintf(s, (size_t)(n > 0 ? n : 0) + 1, fmt, ap);
  va_end(ap);
  return s;
}

bool cc_fail(cc *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->err, sizeof c->err, fmt, ap);
  va_end(ap);
  return false;
}

const char *cc_stype(int dt) {
  switch (dt) {
  case MLC_DT_F32: return "float";
  case MLC_DT_BF16: return "mlc_bf16";
  case MLC_DT_F16: return "mlc_f16";
  case MLC_DT_I32: return "int";
  case MLC_DT_I64: return "long long";
  default: return "unsigned char";
  }
}

const char *cc_ctype(int dt) { return mlc_dtype_is_float((mlc_dtype)dt) ? "float" : cc_stype(dt); }

const char *cc_load(cc *c, const char *buf, int dt, const char *idx) {
  if (mlc_dtype_is_float((mlc_dtype)dt)) return cc_fmt(c, "to_f32(%s[%s])", buf, idx);
  return cc_fmt(c, "%s[%s]", buf, idx);
}

const char *cc_store(cc *c, const char *buf, int dt, const char *idx, const char *val) {
  if (mlc_dtype_is_float((mlc_dtype)dt)) return cc_fmt(c, "%s[%s] = from_f32<%s>(%s);", buf, idx, cc_stype(dt), val);
  return cc_fmt(c, "%s[%s] = (%s)(%s);", buf, idx, cc_stype(dt), val);
}

const char *cc_flit(cc *c, double v) {
  if (isnan(v)) return "__int_as_float(0x7fc00000)";
  if (isinf(v)) return v > 0 ? "MLC_INF" : "(-MLC_INF)";
  const char *t = cc_fmt(c, "%.9g", (double)(float)v);
  return cc_fmt(c, "%s%sf", t, strpbrk(t, ".e") ? "" : ".0"); /* "0f" is not a float literal */
}

void cc_begin(cc *c, uint64_t grid, uint32_t block, uint32_t smem) {
  MLC_ASSERT(c->nlaunch < CC_MAX_LAUNCH);
  c->launch[c->nlaunch] = (cc_launch){grid, block, smem};
  cc_printf(c, "extern \"C\" __global__ void __launch_bounds__(%u) @K@_%u(", block, c->nlaunch);
  for (uint32_t k = 0; k < c->n->nin; k++)
    cc_printf(c, "const %s *%s in%u, ", cc_stype(cc_in(c, (int)k)->dtype), c->t->restrict_kw, k);
  cc_printf(c, "%s *%s out, unsigned char *%s scratch) {\n", cc_stype(c->n->type.dtype), c->t->restrict_kw,
            c->t->restrict_kw);
  c->nlaunch++;
}

void cc_end(cc *c) { cc_printf(c, "}\n\n"); }
