/* rmsnorm and layernorm over the last dimension, and their gradients, as
 * the CPU target computes them (codegen/llvm/emit_norm.c):
 *
 *   rmsnorm:   y = x * 1/sqrt(mean(x^2) + eps) [* w]
 *   layernorm: y = (x - mean) * 1/sqrt(var + eps) [* w] [+ b], var biased, two-pass
 *   rmsnorm_grad_x:   dx = r h - x r^3 mean(h x)                     (h = g [* w], r = rstd)
 *   layernorm_grad_x: dx = r h - r mean(h) - xc r^3 mean(h xc)       (xc = x - mean)
 *   *_grad_w:         dw = sum over rows of g * xc * r
 *
 * Statistics are f32, the result is rounded once when it is stored.
 *
 * Row kernels (forward, grad_x, the statistics of grad_w): a row of D
 * elements is read as vectors of VEC elements (16 bytes when D allows),
 * by one warp (8 rows per block) when the row is short, by a block of 256
 * threads otherwise.  When a thread's share of the row is at most CACHE_MAX
 * floats it keeps it in registers, so the row is read from memory once;
 * longer rows are read again on each pass (from L1/L2).
 *
 * grad_w is deterministic, with no atomics.  Where a lane can hold its share
 * of a row's column sums (rows of up to 64 x 32 elements: the MiniLLM's 2048
 * in bf16 or f32), one launch gives each block of eight warps a chunk of
 * rows, a warp per row, which works out the row's statistics and adds
 * g (x - mean) rstd into its lanes' columns, the warps then added in order
 * into the chunk's partial sums in scratch (grad_w_one_pass: x and g read
 * from memory once).  Longer rows take two: launch 0 writes each row's mean
 * and rstd to scratch; launch 1 gives each block a tile of 32 vectors of
 * columns and a chunk of rows, eight row-lanes of threads sum strided rows
 * in a fixed order, and the eight are added in order into one partial sum
 * per (chunk, column) in scratch.  The last launch adds the chunks of each
 * column in a fixed order (eight strided lanes, then the lanes in order).
 */
#include "codegen/cstyle/cc.h"

#define THREADS 256
#define CACHE_MAX 32 /* floats per thread per cached array */
#define WG_BLOCKS 2048 /* grad_w launch 1: blocks aimed at */

typedef struct {
  const char *name; /* register array */
  const char *src;  /* row pointer */
  int dt;
} rowarr;

/* The block's (or warp's) sum of a float expression. */
static const char *red_sum(cc *c, const cc_rowplan *rp, const char *v) {
  return rp->tpr > 32 ? cc_fmt(c, "mlc_block_sum(%s, sh)", v) : cc_fmt(c, "mlc_warp_sum(%s)", v);
}

/* With a cached plan: declares the register arrays and loads the row. */
static void cache_load(cc *c, const cc_rowplan *rp, const rowarr *a, int na) {
  if (!rp->cache) return;
  for (int k = 0; k < na; k++) cc_printf(c, "  float %s[%lld];\n", a[k].name, (long long)(rp->nit * rp->vec));
  cc_printf(c, "#pragma unroll\n  for (int it = 0; it < %lld; it++) {\n    const int v = lane + it * %d;\n    if (v < %lld) {\n",
            (long long)rp->nit, rp->tpr, (long long)rp->nv);
  for (int k = 0; k < na; k++) cc_vec_load(c, rp->vec, a[k].dt, a[k].name, cc_fmt(c, "it * %d", rp->vec), a[k].src, cc_fmt(c, "v * %d", rp->vec));
  cc_printf(c, "    }\n  }\n");
}

/* Opens a pass over the thread's vectors v of the row; element q of a
 * vector of array a is a[B + q], B returned.  Without a cache the arrays
 * are loaded here. */
static const char *pass_begin(cc *c, const cc_rowplan *rp, const rowarr *a, int na) {
  if (rp->cache) {
    cc_printf(c, "#pragma unroll\n  for (int it = 0; it < %lld; it++) {\n    const int v = lane + it * %d;\n    if (v < %lld) {\n",
              (long long)rp->nit, rp->tpr, (long long)rp->nv);
    return cc_fmt(c, "it * %d", rp->vec);
  }
  cc_printf(c, "  for (int v = lane; v < %lld; v += %d) {\n    {\n", (long long)rp->nv, rp->tpr);
  for (int k = 0; k < na; k++) {
    cc_printf(c, "      float %s[%d];\n", a[k].name, rp->vec);
    cc_vec_load(c, rp->vec, a[k].dt, a[k].name, "0", a[k].src, cc_fmt(c, "v * %d", rp->vec));
  }
  return "0";
}

static void pass_end(cc *c) { cc_printf(c, "    }\n  }\n"); }

/* mean (0 for rmsnorm) and rstd of the row in array xa. */
static void row_stats(cc *c, const cc_rowplan *rp, const rowarr *xa, bool layer, double eps) {
  const char *invD = cc_flit(c, 1.0 / (double)rp->D), *B;
  cc_printf(c, "  float mean = 0.f;\n");
  if (layer) {
    cc_printf(c, "  float s1 = 0.f;\n");
    B = pass_begin(c, rp, xa, 1);
    cc_printf(c, "#pragma unroll\n      for (int q = 0; q < %d; q++) s1 += xa[%s + q];\n", rp->vec, B);
    pass_end(c);
    cc_printf(c, "  mean = %s * %s;\n", red_sum(c, rp, "s1"), invD);
  }
  cc_printf(c, "  float s2 = 0.f;\n");
  B = pass_begin(c, rp, xa, 1);
  cc_printf(c, "#pragma unroll\n      for (int q = 0; q < %d; q++) { float d = xa[%s + q] - mean; s2 += d * d; }\n", rp->vec, B);
  pass_end(c);
  cc_printf(c, "  const float rstd = 1.f / sqrtf(%s * %s + %s);\n", red_sum(c, rp, "s2"), invD, cc_flit(c, eps));
}

static bool rows_of(cc *c, const mlc_type *t, int64_t *R, int64_t *D) {
  *D = t->dim[t->rank - 1];
  *R = *D ? mlc_type_numel(t) / *D : 0;
  if (*R == 0 || *D == 0) return cc_fail(c, "empty tensor");
  if (*D > 0x7fffffffll) return cc_fail(c, "rows of %lld elements are too long", (long long)*D);
  return true;
}

static bool emit_fwd(cc *c, bool layer) {
  const mlc_node *n = c->n;
  int dt = n->type.dtype;
  int64_t R, D;
  if (!rows_of(c, &n->type, &R, &D)) return false;
  cc_rowplan rp;
  cc_plan_rows(&rp, R, D, dt, CACHE_MAX);
  int64_t grid = cc_ceil_div(R, rp.rpb);
  if (grid > 0x7fffffffll) return cc_fail(c, "too many rows (%lld)", (long long)R);
  bool has_w = n->nin > 1, has_b = n->nin > 2;
  cc_begin(c, (uint64_t)grid, THREADS, 0);
  cc_row_head(c, &rp);
  cc_printf(c, "  const %s%s *xr = in0 + row * %lld$ll;\n", c->t->dev, cc_stype(c, dt), (long long)D);
  rowarr xa = {"xa", "xr", dt};
  cache_load(c, &rp, &xa, 1);
  row_stats(c, &rp, &xa, layer, n->a.f);
  const char *B = pass_begin(c, &rp, &xa, 1), *vi = cc_fmt(c, "v * %d", rp.vec);
  if (has_w) cc_printf(c, "      float wa[%d];\n", rp.vec), cc_vec_load(c, rp.vec, dt, "wa", "0", "in1", vi);
  if (has_b) cc_printf(c, "      float ba[%d];\n", rp.vec), cc_vec_load(c, rp.vec, dt, "ba", "0", "in2", vi);
  cc_printf(c, "      float o[%d];\n#pragma unroll\n      for (int q = 0; q < %d; q++) {\n", rp.vec, rp.vec);
  cc_printf(c, "        float y = (xa[%s + q] - mean) * rstd;\n", B);
  if (has_w) cc_printf(c, "        y = y * wa[q];\n");
  if (has_b) cc_printf(c, "        y = y + ba[q];\n");
  cc_printf(c, "        o[q] = y;\n      }\n");
  cc_vec_store(c, rp.vec, dt, "out", cc_fmt(c, "row * %lld$ll + v * %d", (long long)D, rp.vec), "o");
  pass_end(c);
  cc_end(c);
  return true;
}

static bool emit_grad_x(cc *c, bool layer) {
  const mlc_node *n = c->n;
  int dt = n->type.dtype;
  int64_t R, D;
  if (!rows_of(c, &n->type, &R, &D)) return false;
  cc_rowplan rp;
  cc_plan_rows(&rp, R, D, dt, CACHE_MAX);
  int64_t grid = cc_ceil_div(R, rp.rpb);
  if (grid > 0x7fffffffll) return cc_fail(c, "too many rows (%lld)", (long long)R);
  bool has_w = n->nin > 2, has_r = n->nin > 3; /* r: the residual the fuse pass adds (norm_grad_adds) */
  const char *invD = cc_flit(c, 1.0 / (double)D), *vi = cc_fmt(c, "v * %d", rp.vec);
  cc_begin(c, (uint64_t)grid, THREADS, 0);
  cc_row_head(c, &rp);
  cc_printf(c, "  const %s%s *gr = in0 + row * %lld$ll;\n", c->t->dev, cc_stype(c, dt), (long long)D);
  cc_printf(c, "  const %s%s *xr = in1 + row * %lld$ll;\n", c->t->dev, cc_stype(c, dt), (long long)D);
  rowarr a[2] = {{"xa", "xr", dt}, {"ga", "gr", dt}};
  cache_load(c, &rp, a, 2);
  row_stats(c, &rp, &a[0], layer, n->a.f);
  cc_printf(c, "  float shx = 0.f, shs = 0.f;\n");
  const char *B = pass_begin(c, &rp, a, 2);
  if (has_w) cc_printf(c, "      float wa[%d];\n", rp.vec), cc_vec_load(c, rp.vec, dt, "wa", "0", "in2", vi);
  cc_printf(c, "#pragma unroll\n      for (int q = 0; q < %d; q++) {\n", rp.vec);
  cc_printf(c, "        float h = ga[%s + q]%s, xc = xa[%s + q] - mean;\n        shx += h * xc; shs += h;\n      }\n", B,
            has_w ? " * wa[q]" : "", B);
  pass_end(c);
  cc_printf(c, "  const float ca = (%s * %s) * (rstd * rstd * rstd);\n", red_sum(c, &rp, "shx"), invD);
  if (layer) cc_printf(c, "  const float cb = (%s * %s) * rstd;\n", red_sum(c, &rp, "shs"), invD);
  else cc_printf(c, "  (void)shs;\n");
  B = pass_begin(c, &rp, a, 2);
  if (has_w) cc_printf(c, "      float wa[%d];\n", rp.vec), cc_vec_load(c, rp.vec, dt, "wa", "0", "in2", vi);
  if (has_r) cc_printf(c, "      float ra[%d];\n", rp.vec), cc_vec_load(c, rp.vec, dt, "ra", "0", "in3", cc_fmt(c, "row * %lld$ll + v * %d", (long long)D, rp.vec));
  cc_printf(c, "      float o[%d];\n#pragma unroll\n      for (int q = 0; q < %d; q++) {\n", rp.vec, rp.vec);
  cc_printf(c, "        float h = ga[%s + q]%s, xc = xa[%s + q] - mean;\n", B, has_w ? " * wa[q]" : "", B);
  cc_printf(c, "        o[q] = h * rstd%s - xc * ca;\n", layer ? " - cb" : "");
  if (has_r) cc_printf(c, "        o[q] = %s + ra[q];\n", cc_rounded(c, dt, "o[q]")); /* dx rounded first, as the add read it */
  cc_printf(c, "      }\n");
  cc_vec_store(c, rp.vec, dt, "out", cc_fmt(c, "row * %lld$ll + v * %d", (long long)D, rp.vec), "o");
  pass_end(c);
  cc_end(c);
  return true;
}

/* grad_w, two-pass form, launches 0 and 1: each row's mean and rstd into
 * scratch, then partial column sums per (tile of 32 vectors of columns,
 * chunk of RC rows) at scratch + 2R. */
static void grad_w_two_pass(cc *c, const cc_rowplan *rp, int64_t R, int64_t D, bool layer, double eps, int64_t ntile,
                            int64_t nchunk, int64_t RC) {
  const int dt = cc_in(c, 1)->dtype, vec = rp->vec, TY = THREADS / 32;
  const int64_t nv = rp->nv;
  const char *T = cc_stype(c, dt);

  /* 0: per-row mean and rstd */
  cc_begin(c, (uint64_t)cc_ceil_div(R, rp->rpb), THREADS, 0);
  cc_row_head(c, rp);
  cc_printf(c, "  const %s%s *xr = in1 + row * %lld$ll;\n", c->t->dev, T, (long long)D);
  rowarr xa = {"xa", "xr", dt};
  cache_load(c, rp, &xa, 1);
  row_stats(c, rp, &xa, layer, eps);
  cc_printf(c, "  if (lane == 0) { %sfloat *st = (%sfloat *)scratch; st[2 * row] = mean; st[2 * row + 1] = rstd; }\n", c->t->dev,
            c->t->dev);
  cc_end(c);

  /* 1: partial column sums per chunk of rows */
  cc_begin(c, (uint64_t)(ntile * nchunk), THREADS, 0);
  cc_printf(c, "  const int tx = $tid & 31, ty = $tid >> 5;\n");
  cc_printf(c, "  const int tile = $bid %% %lld;\n  const $i64 chunk = $bid / %lld;\n", (long long)ntile,
            (long long)ntile);
  cc_printf(c, "  const $i64 v = ($i64)tile * 32 + tx;\n  const %sfloat *st = (const %sfloat *)scratch;\n", c->t->dev,
            c->t->dev);
  cc_printf(c, "  float acc[%d];\n#pragma unroll\n  for (int q = 0; q < %d; q++) acc[q] = 0.f;\n", vec, vec);
  cc_printf(c, "  if (v < %lld$ll) {\n", (long long)nv);
  cc_printf(c, "    $i64 r1 = chunk * %lld$ll + %lld$ll;\n    if (r1 > %lld$ll) r1 = %lld$ll;\n", (long long)RC, (long long)RC,
            (long long)R, (long long)R);
  cc_printf(c, "#pragma unroll 4\n    for ($i64 r = chunk * %lld$ll + ty; r < r1; r += %d) {\n", (long long)RC, TY);
  cc_printf(c, "      const float mean = st[2 * r], rstd = st[2 * r + 1];\n      float ga[%d], xa[%d];\n", vec, vec);
  const char *at = cc_fmt(c, "r * %lld$ll + v * %d", (long long)D, vec);
  cc_vec_load(c, vec, dt, "ga", "0", "in0", at);
  cc_vec_load(c, vec, dt, "xa", "0", "in1", at);
  cc_printf(c, "#pragma unroll\n      for (int q = 0; q < %d; q++) acc[q] = fmaf(ga[q] * (xa[q] - mean), rstd, acc[q]);\n", vec);
  cc_printf(c, "    }\n  }\n");
  cc_printf(c, "  $shared float red[%d];\n", TY * 32 * vec);
  cc_printf(c, "#pragma unroll\n  for (int q = 0; q < %d; q++) red[ty * %d + q * 32 + tx] = acc[q];\n", vec, 32 * vec);
  cc_printf(c, "  $barrier;\n");
  cc_printf(c, "  const int t = $tid;\n  const $i64 col = ($i64)tile * %d + t;\n", 32 * vec);
  cc_printf(c, "  if (t < %d && col < %lld$ll) {\n    float s = 0.f;\n", 32 * vec, (long long)D);
  cc_printf(c, "    for (int y = 0; y < %d; y++) s += red[y * %d + (t %% %d) * 32 + t / %d];\n", TY, 32 * vec, vec, vec);
  cc_printf(c, "    ((%sfloat *)scratch)[%lld$ll + chunk * %lld$ll + col] = s;\n  }\n", c->t->dev, (long long)(2 * R), (long long)D);
  cc_end(c);
}

/* grad_w, one-pass form, one launch in place of the two-pass form's 0 and
 * 1, where a lane can hold its share of a row's column sums (rows of at
 * most ONE_PASS_ACC x 32 elements): a block of eight warps per chunk of RC
 * rows, a warp per row at a time.  The warp loads the row's x and g at
 * once into registers, takes the row's statistics from x (two passes for
 * layernorm's mean), and adds g (x - mean) rstd into the lane's columns
 * (vectors lane + 32 it); so x and g come from memory once, in one wait,
 * and no row's statistics go through memory.  The eight warps' sums are
 * then added in warp order, 32 vectors of columns at a time through shared
 * memory, into the chunk's partial sums at scratch.  Returns the chunks
 * (launch 2 adds them). */
#define ONE_PASS_ACC 64   /* floats a lane accumulates */
#define ONE_PASS_CHUNKS 128 /* blocks aimed at: about one a multiprocessor (264, two a multiprocessor, took 0.971 ms of
                               the MiniLLM's step on an H100 against 0.943: bench/results/s36-2026-12-07.md) */
static int64_t grad_w_one_pass(cc *c, const cc_rowplan *rp, int64_t R, int64_t D, bool layer, double eps) {
  const int dt = cc_in(c, 1)->dtype, vec = rp->vec, TY = THREADS / 32;
  const int64_t nv = rp->nv, nit = cc_ceil_div(nv, 32);
  const char *T = cc_stype(c, dt), *invD = cc_flit(c, 1.0 / (double)D);
  int64_t nchunk = cc_ceil_div(R, 2 * TY);
  if (nchunk > ONE_PASS_CHUNKS) nchunk = ONE_PASS_CHUNKS;
  const int64_t RC = cc_ceil_div(cc_ceil_div(R, nchunk), TY) * TY;
  nchunk = cc_ceil_div(R, RC);
  c->scratch = (uint64_t)(nchunk * D) * 4;
  cc_begin(c, (uint64_t)nchunk, THREADS, 0);
  cc_printf(c, "  const int lane = $tid & 31, w = $tid >> 5;\n");
  cc_printf(c, "  const $i64 r0 = ($i64)$bid * %lld$ll;\n  $i64 r1 = r0 + %lld$ll;\n  if (r1 > %lld$ll) r1 = %lld$ll;\n",
            (long long)RC, (long long)RC, (long long)R, (long long)R);
  cc_printf(c, "  float acc[%lld];\n#pragma unroll\n  for (int q = 0; q < %lld; q++) acc[q] = 0.f;\n", (long long)(nit * vec),
            (long long)(nit * vec));
  cc_printf(c, "  for ($i64 r = r0 + w; r < r1; r += %d) {\n", TY);
  cc_printf(c, "    const %s%s *xr = in1 + r * %lld$ll, *gr = in0 + r * %lld$ll;\n", c->t->dev, T, (long long)D, (long long)D);
  /* The row's x and g, the lane's vectors of each, are loaded at once into
   * xu and gu as they lie in memory (vectors of VT), so that the row costs
   * one wait on memory rather than one a phase; the passes below convert
   * from them. */
  const int vb = vec * mlc_dtype_size((mlc_dtype)dt);
  const char *VT = vec == 1 ? T : cc_vtype(vb);
  cc_printf(c, "    %s xu[%lld], gu[%lld];\n#pragma unroll\n    for (int it = 0; it < %lld; it++) {\n      const int v = lane + it * 32;\n"
               "      if (v < %lld) {\n        xu[it] = *(const %s%s *)(xr + v * %d);\n        gu[it] = *(const %s%s *)(gr + v * %d);\n"
               "      }\n    }\n",
            VT, (long long)nit, (long long)nit, (long long)nit, (long long)nv, c->t->dev, VT, vec, c->t->dev, VT, vec);
  /* a pass over the lane's vectors of the row: x (and g) into xa (ga) */
  const char *open = cc_fmt(c, "#pragma unroll\n    for (int it = 0; it < %lld; it++) {\n      const int v = lane + it * 32;\n"
                               "      if (v < %lld) {\n        float xa[%d];\n", (long long)nit, (long long)nv, vec);
  /* vector it of xu (gu) into xa (ga) as f32 */
  const char *cvt_form = "        {\n          const %s%s *e_ = (const %s%s *)&%cu[it];\n#pragma unroll\n"
                         "          for (int q = 0; q < %d; q++) %ca[q] = to_f32(e_[q]);\n        }\n";
  const char *cvt = cc_fmt(c, cvt_form, c->t->thr, T, c->t->thr, T, 'x', vec, 'x');
  cc_printf(c, "    float mean = 0.f;\n");
  if (layer) {
    cc_printf(c, "    float s1 = 0.f;\n%s%s", open, cvt);
    cc_printf(c, "#pragma unroll\n        for (int q = 0; q < %d; q++) s1 += xa[q];\n      }\n    }\n", vec);
    cc_printf(c, "    mean = mlc_warp_sum(s1) * %s;\n", invD);
  }
  cc_printf(c, "    float s2 = 0.f;\n%s%s", open, cvt);
  cc_printf(c, "#pragma unroll\n        for (int q = 0; q < %d; q++) { float d = xa[q] - mean; s2 += d * d; }\n      }\n    }\n", vec);
  cc_printf(c, "    const float rstd = 1.f / sqrtf(mlc_warp_sum(s2) * %s + %s);\n", invD, cc_flit(c, eps));
  cc_printf(c, "%s        float ga[%d];\n%s", open, vec, cvt);
  cc_printf(c, cvt_form, c->t->thr, T, c->t->thr, T, 'g', vec, 'g');
  cc_printf(c, "#pragma unroll\n        for (int q = 0; q < %d; q++) acc[it * %d + q] = fmaf(ga[q] * (xa[q] - mean), rstd, acc[it * %d + q]);\n"
               "      }\n    }\n  }\n", vec, vec, vec);
  cc_printf(c, "  $shared float red[%d];\n", TY * 32 * vec);
  cc_printf(c, "  %sfloat *part = (%sfloat *)scratch + ($i64)$bid * %lld$ll;\n", c->t->dev, c->t->dev, (long long)D);
  cc_printf(c, "#pragma unroll\n  for (int it = 0; it < %lld; it++) {\n", (long long)nit);
  cc_printf(c, "#pragma unroll\n    for (int q = 0; q < %d; q++) red[w * %d + lane * %d + q] = acc[it * %d + q];\n", vec, 32 * vec,
            vec, vec);
  cc_printf(c, "    $barrier;\n    const $i64 col = ($i64)it * %d + $tid;\n", 32 * vec);
  cc_printf(c, "    if ($tid < %d && col < %lld$ll) {\n      float s = 0.f;\n", 32 * vec, (long long)D);
  cc_printf(c, "      for (int y = 0; y < %d; y++) s += red[y * %d + $tid];\n      part[col] = s;\n    }\n    $barrier;\n  }\n", TY,
            32 * vec);
  cc_end(c);
  return nchunk;
}

static bool emit_grad_w(cc *c, bool layer) {
  const mlc_node *n = c->n;
  const mlc_type *xt = cc_in(c, 1);
  int dt = xt->dtype, odt = n->type.dtype;
  int64_t R, D;
  if (!rows_of(c, xt, &R, &D)) return false;
  cc_rowplan rp;
  cc_plan_rows(&rp, R, D, dt, CACHE_MAX);
  if (cc_ceil_div(R, rp.rpb) > 0x7fffffffll) return cc_fail(c, "too many rows (%lld)", (long long)R);
  const int TY = THREADS / 32;
  int64_t nchunk, part0; /* launch 2's chunks and where their sums start in scratch (floats) */
  if (cc_ceil_div(rp.nv, 32) * rp.vec <= ONE_PASS_ACC) {
    nchunk = grad_w_one_pass(c, &rp, R, D, layer, n->a.f);
    part0 = 0;
  } else {
    /* launch 1's tiling */
    int64_t ntile = cc_ceil_div(rp.nv, 32);
    nchunk = cc_ceil_div(WG_BLOCKS, ntile);
    int64_t maxchunk = cc_ceil_div(R, TY);
    if (nchunk > maxchunk) nchunk = maxchunk;
    if (nchunk < 1) nchunk = 1;
    int64_t RC = cc_ceil_div(cc_ceil_div(R, nchunk), TY) * TY;
    nchunk = cc_ceil_div(R, RC);
    if (ntile * nchunk > 0x7fffffffll) return cc_fail(c, "grid too large");
    c->scratch = (uint64_t)(2 * R + nchunk * D) * 4;
    grad_w_two_pass(c, &rp, R, D, layer, n->a.f, ntile, nchunk, RC);
    part0 = 2 * R;
  }

  /* 2: the chunks of each column: eight lanes of 32 columns, each lane
   * strided over the chunks, the lanes added in order */
  cc_begin(c, (uint64_t)cc_ceil_div(D, 32), THREADS, 0);
  cc_printf(c, "  const int tx = $tid & 31, ty = $tid >> 5;\n");
  cc_printf(c, "  const $i64 col = ($i64)$bid * 32 + tx;\n");
  cc_printf(c, "  const %sfloat *part = (const %sfloat *)scratch + %lld$ll;\n  float s = 0.f;\n", c->t->dev, c->t->dev,
            (long long)part0);
  cc_printf(c, "  if (col < %lld$ll) {\n#pragma unroll 4\n", (long long)D);
  cc_printf(c, "    for ($i64 k = ty; k < %lld$ll; k += %d) s += part[k * %lld$ll + col];\n  }\n", (long long)nchunk, TY,
            (long long)D);
  cc_printf(c, "  $shared float red[%d];\n  red[$tid] = s;\n  $barrier;\n", THREADS);
  cc_printf(c, "  if (ty == 0 && col < %lld$ll) {\n    s = red[tx];\n", (long long)D);
  cc_printf(c, "    for (int y = 1; y < %d; y++) s += red[y * 32 + tx];\n", TY);
  cc_printf(c, "    %s\n  }\n", cc_store(c, "out", odt, "col", "s"));
  cc_end(c);
  return true;
}

bool cc_emit_norm(cc *c) {
  switch (c->n->op) {
  case MLC_OP_RMSNORM: return emit_fwd(c, false);
  case MLC_OP_LAYERNORM: return emit_fwd(c, true);
  case MLC_OP_RMSNORM_GRAD_X: return emit_grad_x(c, false);
  case MLC_OP_LAYERNORM_GRAD_X: return emit_grad_x(c, true);
  case MLC_OP_RMSNORM_GRAD_W: return emit_grad_w(c, false);
  case MLC_OP_LAYERNORM_GRAD_W: return emit_grad_w(c, true);
  default: return cc_bug(c, "not a norm op");
  }
}
