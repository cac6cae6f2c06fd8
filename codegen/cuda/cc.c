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
    .dev = "",
    .thr = "",
    .tensor_cores = true,
};

/* MSL, through the Metal prelude's names: the kernel parameters are called
 * threadIdx, blockIdx and blockDim, and __shared__ / __syncthreads() are
 * macros for threadgroup variables and barriers. */
const cc_target cc_target_metal = {
    .name = "metal",
    .shared = "__shared__",
    .barrier = "__syncthreads()",
    .thread_idx = "threadIdx.x",
    .block_idx = "blockIdx.x",
    .restrict_kw = "",
    .device_fn = "inline",
    .dev = "device ",
    .thr = "thread ",
    .metal = true,
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

const char *cc_const_lit(cc *c, const mlc_node *k) {
  if (mlc_dtype_is_float((mlc_dtype)k->type.dtype)) return cc_flit(c, k->a.f);
  if (k->type.dtype == MLC_DT_I64) return cc_fmt(c, "%lldll", (long long)k->a.f);
  return cc_fmt(c, "%lld", (long long)k->a.f);
}

const char *cc_flit(cc *c, double v) {
  if (isnan(v)) return "__int_as_float(0x7fc00000)";
  if (isinf(v)) return v > 0 ? "MLC_INF" : "(-MLC_INF)";
  const char *t = cc_fmt(c, "%.9g", (double)(float)v);
  return cc_fmt(c, "%s%sf", t, strpbrk(t, ".e") ? "" : ".0"); /* "0f" is not a float literal */
}

/* The MSL kernel header: buffers 0..n+1, threadgroup memory 0, and the
 * thread-position built-ins under CUDA's names. */
static void begin_metal(cc *c, uint32_t block) {
  uint32_t k = 0;
  cc_printf(c, "kernel void @K@_%u(", c->nlaunch);
  for (; k < c->n->nin; k++) cc_printf(c, "device const %s *in%u MLC_BUFFER(%u), ", cc_stype(cc_in(c, (int)k)->dtype), k, k);
  cc_printf(c, "device %s *out MLC_BUFFER(%u), device uchar *scratch MLC_BUFFER(%u), ", cc_stype(c->n->type.dtype), k, k + 1);
  cc_printf(c, "threadgroup uchar *mlc_smem MLC_TGMEM(0), uint3 threadIdx MLC_TID, uint3 blockIdx MLC_BID, "
               "uint3 blockDim MLC_BDIM, uint3 gridDim MLC_GDIM, uint simd_lane MLC_SIMD_LANE, uint simd_id MLC_SIMD_ID) {\n");
  (void)block;
}

/* After an MSL kernel, for the CPU emulator only (tests/metal): a C entry
 * point that runs it over a grid, with the buffers in kernel order. */
static void end_metal(cc *c) {
  uint32_t l = c->nlaunch - 1, k = 0;
  cc_printf(c, "#ifdef MLC_MSL_EMULATION\n");
  cc_printf(c, "extern \"C\" void @K@_%u_emu(void **b, unsigned grid, unsigned block, unsigned smem) {\n", l);
  cc_printf(c, "  mlc_emu::dispatch(uint3(grid, 1, 1), uint3(block, 1, 1), smem, [&](uint3 t, uint3 g, uint3 d, uint sl, uint si, "
               "threadgroup uchar *m) {\n    @K@_%u(", l);
  for (; k < c->n->nin; k++) cc_printf(c, "(device const %s *)b[%u], ", cc_stype(cc_in(c, (int)k)->dtype), k);
  cc_printf(c, "(device %s *)b[%u], (device uchar *)b[%u], m, t, g, d, uint3(grid, 1, 1), sl, si);\n  });\n}\n#endif\n\n",
            cc_stype(c->n->type.dtype), k, k + 1);
}

void cc_begin(cc *c, uint64_t grid, uint32_t block, uint32_t smem) { cc_begin_min(c, grid, block, smem, 1); }

void cc_begin_min(cc *c, uint64_t grid, uint32_t block, uint32_t smem, uint32_t min_blocks) {
  MLC_ASSERT(c->nlaunch < CC_MAX_LAUNCH);
  c->launch[c->nlaunch] = (cc_launch){grid, block, smem};
  if (c->t->metal) {
    begin_metal(c, block);
    c->nlaunch++;
    return;
  }
  if (min_blocks > 1)
    cc_printf(c, "extern \"C\" __global__ void __launch_bounds__(%u, %u) @K@_%u(", block, min_blocks, c->nlaunch);
  else
    cc_printf(c, "extern \"C\" __global__ void __launch_bounds__(%u) @K@_%u(", block, c->nlaunch);
  for (uint32_t k = 0; k < c->n->nin; k++)
    cc_printf(c, "const %s *%s in%u, ", cc_stype(cc_in(c, (int)k)->dtype), c->t->restrict_kw, k);
  cc_printf(c, "%s *%s out, unsigned char *%s scratch%s", cc_stype(c->n->type.dtype), c->t->restrict_kw,
            c->t->restrict_kw, c->sharded ? ", const unsigned long long rows" : c->ntmap ? ", const unsigned long long" : "");
  for (uint32_t i = 0; i < c->ntmap; i++) cc_printf(c, ", const __grid_constant__ mlc_tmap tm%u", i);
  cc_printf(c, ") {\n");
  c->nlaunch++;
}

const char *cc_tmap(cc *c, uint32_t arg, uint64_t offset, uint32_t rank, uint32_t elem_bytes, const uint64_t *dim,
                    const uint64_t *stride, const uint32_t *box, uint32_t swizzle) {
  MLC_ASSERT(!c->t->metal && !c->sharded && c->ntmap < MLC_CUDA_MAX_TMAP && rank >= 1 && rank <= 5 && offset % 16 == 0);
  mlc_cuda_tmap *m = &c->tmap[c->ntmap];
  memset(m, 0, sizeof *m);
  /* field by field: the padding stays zero for the kernel's hash */
  m->arg = arg, m->offset = offset, m->rank = rank, m->elem_bytes = elem_bytes, m->swizzle = swizzle;
  for (uint32_t d = 0; d < rank; d++) {
    m->dim[d] = dim[d];
    m->box[d] = box[d];
    if (d) m->stride[d - 1] = stride[d - 1];
  }
  return cc_fmt(c, "tm%u", c->ntmap++);
}

void cc_end(cc *c) {
  cc_printf(c, "}\n\n");
  if (c->t->metal) end_metal(c);
}

static bool ident_char(char ch) { return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_'; }

char *cc_metal_text(mlc_arena *a, const char *text, size_t n, size_t *out_n) {
  char *r = mlc_arena_alloc(a, n + 1), *w = r;
  for (size_t i = 0; i < n;) {
    if (!strncmp(text + i, "long long", 9)) { /* the type */
      memcpy(w, "long", 4);
      w += 4;
      i += 9;
    } else if (!strncmp(text + i, "double", 6) && (i == 0 || !ident_char(text[i - 1])) && !ident_char(text[i + 6])) {
      memcpy(w, "float", 5); /* MSL has no double */
      w += 5;
      i += 6;
    } else if (i > 0 && text[i - 1] >= '0' && text[i - 1] <= '9' && !strncmp(text + i, "ll", 2) &&
               !((text[i + 2] >= 'a' && text[i + 2] <= 'z') || (text[i + 2] >= 'A' && text[i + 2] <= 'Z') ||
                 (text[i + 2] >= '0' && text[i + 2] <= '9') || text[i + 2] == '_')) { /* a literal's suffix */
      /* only after a number that starts a token: 8192ll, not x2ll */
      size_t j = i;
      while (j > 0 && text[j - 1] >= '0' && text[j - 1] <= '9') j--;
      bool literal = j == 0 || !((text[j - 1] >= 'a' && text[j - 1] <= 'z') || (text[j - 1] >= 'A' && text[j - 1] <= 'Z') ||
                                 text[j - 1] == '_' || text[j - 1] == '.');
      *w++ = 'l';
      i += 2;
      if (!literal) *w++ = 'l';
    } else {
      *w++ = text[i++];
    }
  }
  *w = 0;
  *out_n = (size_t)(w - r);
  return r;
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
  const char *T = cc_stype(dt), *VT = cc_vtype(vec * mlc_dtype_size((mlc_dtype)dt));
  if (vec == 1) {
    cc_printf(c, "      %s[%s] = to_f32(%s[%s]);\n", dst, off, src, idx);
    return;
  }
  cc_printf(c, "      { %s u_ = *(const %s%s *)(%s + (%s)); const %s%s *e_ = (const %s%s *)&u_;\n", VT, c->t->dev, VT, src, idx,
            c->t->thr, T, c->t->thr, T);
  cc_printf(c, "#pragma unroll\n        for (int q = 0; q < %d; q++) %s[%s + q] = to_f32(e_[q]); }\n", vec, dst, off);
}

void cc_vec_store(cc *c, int vec, int dt, const char *dst, const char *idx, const char *src) {
  const char *T = cc_stype(dt), *VT = cc_vtype(vec * mlc_dtype_size((mlc_dtype)dt));
  if (vec == 1) {
    cc_printf(c, "      %s[%s] = from_f32<%s>(%s[0]);\n", dst, idx, T, src);
    return;
  }
  cc_printf(c, "      { %s u_; %s%s *e_ = (%s%s *)&u_;\n", VT, c->t->thr, T, c->t->thr, T);
  cc_printf(c, "#pragma unroll\n        for (int q = 0; q < %d; q++) e_[q] = from_f32<%s>(%s[q]);\n", vec, T, src);
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
  cc_printf(c, "  const int lane = threadIdx.x %% %d;\n", rp->tpr);
  cc_printf(c, "  const long long row = (long long)blockIdx.x * %d + threadIdx.x / %d;\n", rp->rpb, rp->tpr);
  if (rp->rpb > 1 && rp->R % rp->rpb) cc_printf(c, "  if (row >= %lldll) return; /* whole warps */\n", (long long)rp->R);
  if (rp->tpr > 32) cc_printf(c, "  __shared__ float sh[32];\n");
}
