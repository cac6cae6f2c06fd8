/* Reductions over one axis (sum, mean, max, min), softmax along one axis,
 * and argmax, argmin.
 *
 * The input is viewed as [outer, len, inner] around the axis.  With
 * inner == 1 the axis is contiguous: one block of THREADS threads per row,
 * strided over the row (coalesced), then a block reduction.  With 8
 * columns or more and a long axis, a block takes 8 to 32 adjacent columns
 * (vectors of columns, 16 bytes each, where a row is whole vectors) and
 * its threads split the axis (below).  Otherwise each thread owns one
 * (outer, inner) column and walks the axis; adjacent threads read adjacent
 * columns, so loads stay coalesced.  Sums accumulate
 * in f32 for the float dtypes (in the dtype itself for integers), in a fixed
 * order, so results are reproducible run to run.  max propagates NaN, as
 * torch.amax does.
 */
#include "codegen/cstyle/cc.h"

#define THREADS 256
#define MAX_BLOCKS 65536
#define MIN_BLOCKS 512 /* four of 256 threads on each of the H200's 132 SMs: enough loads in flight */
#define MAX_CHUNKS 64
#define UNROLL 8
#define VUNROLL 4 /* the vector form's: 16-byte loads */
#define CHUNK_MIN 16384 /* elements of a row a block takes at least, where rows are cut into chunks */

/* A load of the reduction's input as it reads it: |v| where the fuse pass
 * folded an abs into a max (abs_in, ir/ir.h). */
static const char *absx(cc *c, const char *v) { return c->n->a.abs_in ? cc_fmt(c, "fabsf(%s)", v) : v; }

/* The block's reduction of x[0 .. n) (x and n declared by the caller; x of
 * dtype dt; abs_in: of |x|, ir/ir.h), left in every thread's `a` (acc): strided over the threads,
 * then across the block (floats: the prelude's block reductions; integers:
 * thread 0 combines the threads' results in order). */
static void block_reduce(cc *c, int dt, const char *acc, const char *init, const char *combine, bool is_max, bool is_min, bool abs_in,
                         int vec) {
  bool fl = mlc_dtype_is_float((mlc_dtype)dt);
  const char *ld = cc_load(c, "x", dt, "j");
  if (abs_in) ld = cc_fmt(c, "fabsf(%s)", ld);
  cc_printf(c, "  %s a = %s;\n", acc, init);
  if (vec > 1) { /* vec elements (16 bytes) a load where x is that aligned; the rest one by one */
    cc_printf(c, "  for ($i64 q = $tid; q < n / %d; q += %d) {\n    float e[%d];\n", vec, THREADS, vec);
    cc_vec_load(c, vec, dt, "e", "0", "x", cc_fmt(c, "q * %d", vec));
    cc_printf(c, "#pragma unroll\n    for (int k = 0; k < %d; k++) { float v = %s; %s }\n  }\n", vec, abs_in ? "fabsf(e[k])" : "e[k]",
              combine);
    cc_printf(c, "  for ($i64 j = n / %d * %d + $tid; j < n; j += %d) { %s v = %s; %s }\n", vec, vec, THREADS, acc, ld, combine);
  } else {
    cc_printf(c, "  for ($i64 j = $tid; j < n; j += %d) { %s v = %s; %s }\n", THREADS, acc, ld, combine);
  }
  if (fl) {
    cc_printf(c, "  $shared float sh[32];\n");
    if (is_min) cc_printf(c, "  a = -mlc_block_max(-a, sh);\n"); /* min(x) = -max(-x), exactly */
    else cc_printf(c, "  a = %s(a, sh);\n", is_max ? "mlc_block_max" : "mlc_block_sum");
  } else {
    cc_printf(c, "  $shared %s part[%d];\n  part[$tid] = a;\n  $barrier;\n", acc, THREADS);
    cc_printf(c, "  if ($tid == 0) { a = part[0]; for (int t = 1; t < %d; t++) { %s v = part[t]; %s } part[0] = a; }\n", THREADS,
              acc, combine);
    cc_printf(c, "  $barrier;\n  a = part[0];\n");
  }
}

/* The column forms' tiling of ncol columns (each a scalar or a vector
 * of them) along an axis of len rows: cw columns a block (32, 16 or 8,
 * the most that still makes MIN_BLOCKS blocks; 32 again where even 8 does
 * not, and then the axis is cut into nchunk chunks of rc rows, whole
 * strides of rows * unroll), cb blocks across, blocks in all. */
typedef struct {
  int64_t cw, cb, rows, nchunk, rc, blocks;
} col_tiling;

static col_tiling tile_columns(int64_t outer, int64_t ncol, int64_t len, int unroll) {
  col_tiling t = {.cw = 32, .nchunk = 1, .rc = len};
  while (t.cw > 8 && outer * cc_ceil_div(ncol, t.cw) < MIN_BLOCKS) t.cw /= 2;
  if (outer * cc_ceil_div(ncol, t.cw) < MIN_BLOCKS && ncol >= 32) t.cw = 32; /* chunks anyway: whole rows of 32 */
  t.cb = cc_ceil_div(ncol, t.cw);
  t.rows = THREADS / t.cw;
  const int64_t step = t.rows * unroll;
  if (outer * t.cb < MIN_BLOCKS) {
    t.nchunk = cc_ceil_div(MIN_BLOCKS, outer * t.cb);
    if (t.nchunk > MAX_CHUNKS) t.nchunk = MAX_CHUNKS;
    t.rc = cc_ceil_div(cc_ceil_div(len, t.nchunk), step) * step;
    t.nchunk = cc_ceil_div(len, t.rc);
  }
  t.blocks = outer * t.cb * t.nchunk;
  return t;
}

/* The column forms' second launch, where the axis was cut into nchunk
 * chunks: each (outer, column) combines its chunks' partials (acc, in
 * scratch) in chunk order. */
static bool chunk_sums(cc *c, int64_t outer, int64_t inner, int64_t nchunk, const char *acc, const char *combine, int odt,
                       const char *scale) {
  int64_t cols = outer * inner;
  if ((uint64_t)cc_ceil_div(cols, THREADS) > 0x7fffffffu) return cc_fail(c, "too many columns (%lld)", (long long)cols);
  cc_begin(c, (uint64_t)cc_ceil_div(cols, THREADS), THREADS, 0);
  cc_printf(c, "  const $i64 i = ($i64)$bid * %d + $tid;\n  if (i >= %lld$ll) return;\n", THREADS, (long long)cols);
  cc_printf(c, "  const %s%s *p = (const %s%s *)scratch + i / %lld$ll * %lld$ll + i %% %lld$ll;\n", c->t->dev, acc, c->t->dev, acc,
            (long long)inner, (long long)(nchunk * inner), (long long)inner);
  cc_printf(c, "  %s a = p[0];\n", acc);
  cc_printf(c, "  for (int k = 1; k < %lld; k++) { %s v = p[k * %lld$ll]; %s }\n", (long long)nchunk, acc, (long long)inner, combine);
  cc_printf(c, "  %s\n", cc_store(c, "out", odt, "i", cc_fmt(c, "a%s", scale)));
  cc_end(c);
  return true;
}

bool cc_emit_reduce(cc *c) {
  const mlc_node *n = c->n;
  const mlc_type *it = cc_in(c, 0);
  int ax = n->a.axis, dt = it->dtype, odt = n->type.dtype;
  int64_t outer = 1, len = it->rank ? it->dim[ax] : 1, inner = 1;
  for (int k = 0; k < ax; k++) outer *= it->dim[k];
  for (int k = ax + 1; k < it->rank; k++) inner *= it->dim[k];
  bool is_max = n->op == MLC_OP_MAX, is_min = n->op == MLC_OP_MIN, is_softmax = n->op == MLC_OP_SOFTMAX;
  const char *acc = mlc_dtype_is_float((mlc_dtype)dt) ? "float" : cc_ctype(c, dt);
  const char *init = is_max ? (mlc_dtype_is_float((mlc_dtype)dt) ? "-MLC_INF"
                               : dt == MLC_DT_I64 ? cc_fmt(c, "(-9223372036854775807$ll - 1)") : dt == MLC_DT_I32 ? "(-2147483647 - 1)" : "0")
                   : is_min ? (mlc_dtype_is_float((mlc_dtype)dt) ? "MLC_INF"
                               : dt == MLC_DT_I64 ? cc_fmt(c, "9223372036854775807$ll") : dt == MLC_DT_I32 ? "2147483647" : "1")
                            : "0";
  const char *combine = is_max ? "a = (v > a || v != v) ? v : a;" : is_min ? "a = (v < a || v != v) ? v : a;" : "a += v;";
  const char *scale = n->op == MLC_OP_MEAN ? cc_fmt(c, " / %s", cc_flit(c, (double)len)) : "";
  if (is_softmax && !mlc_dtype_is_float((mlc_dtype)dt)) return cc_fail(c, "softmax of an integer tensor");

  if (inner == 1) {
    if ((uint64_t)outer > 0x7fffffffu) return cc_fail(c, "too many rows (%lld)", (long long)outer);
    bool fl = mlc_dtype_is_float((mlc_dtype)dt);
    if (!is_softmax) {
      /* Few long rows (a whole tensor's amax, issue 30's FP8 scales: one row
       * of 16 M elements took 8.9 ms on one block): each row cut into NCH
       * chunks of at least CHUNK_MIN, one block each, whose results go to
       * scratch (f32 for floats), and a second launch combines a row's
       * chunks; the same order every run. */
      int64_t nch = 1;
      if (outer < MIN_BLOCKS && len >= 2 * CHUNK_MIN) {
        nch = cc_ceil_div(MIN_BLOCKS, outer);
        if (nch > len / CHUNK_MIN) nch = len / CHUNK_MIN;
      }
      int pdt = fl ? MLC_DT_F32 : dt;
      /* floats 16 bytes a load where rows and chunks start so aligned (a chunk rounded up to whole
         vectors still leaves the last chunk elements: nch <= len / CHUNK_MIN) */
      int vec = fl && len % (16 / mlc_dtype_size((mlc_dtype)dt)) == 0 ? 16 / mlc_dtype_size((mlc_dtype)dt) : 1;
      int64_t chunk = cc_ceil_div(cc_ceil_div(len, nch), vec) * vec;
      if (nch > 1) c->scratch = (uint64_t)(outer * nch) * (uint64_t)mlc_dtype_size((mlc_dtype)pdt);
      const char *pt = cc_stype(c, pdt);
      cc_begin(c, (uint64_t)(outer * nch), THREADS, 0);
      cc_printf(c, "  $i64 row = $bid / %lld$ll, ch = $bid %% %lld$ll;\n", (long long)nch, (long long)nch);
      cc_printf(c, "  const %s%s *x = in0 + row * %lld$ll + ch * %lld$ll;\n", c->t->dev, cc_stype(c, dt), (long long)len,
                (long long)chunk);
      cc_printf(c, "  const $i64 n = ch == %lld$ll ? %lld$ll : %lld$ll;\n", (long long)(nch - 1), (long long)(len - (nch - 1) * chunk),
                (long long)chunk);
      block_reduce(c, dt, acc, init, combine, is_max, is_min, n->a.abs_in, vec);
      if (nch == 1) {
        cc_printf(c, "  if ($tid == 0) %s\n", cc_store(c, "out", odt, "row", cc_fmt(c, "a%s", scale)));
        cc_end(c);
        return true;
      }
      cc_printf(c, "  if ($tid == 0) ((%s%s *)scratch)[$bid] = a;\n", c->t->dev, pt);
      cc_end(c);
      cc_begin(c, (uint64_t)outer, THREADS, 0);
      cc_printf(c, "  $i64 row = $bid;\n  const %s%s *x = (const %s%s *)scratch + row * %lld$ll;\n  const $i64 n = %lld$ll;\n",
                c->t->dev, pt, c->t->dev, pt, (long long)nch, (long long)nch);
      block_reduce(c, pdt, acc, init, combine, is_max, is_min, false, 1);
      cc_printf(c, "  if ($tid == 0) %s\n", cc_store(c, "out", odt, "row", cc_fmt(c, "a%s", scale)));
      cc_end(c);
      return true;
    }
    /* softmax: one block a row */
    cc_begin(c, (uint64_t)outer, THREADS, 0);
    cc_printf(c, "  $shared float sh[32];\n"); /* for the block reductions */
    cc_printf(c, "  $i64 row = $bid;\n");
    cc_printf(c, "  const %s%s *x = in0 + row * %lld$ll;\n", c->t->dev, cc_stype(c, dt), (long long)len);
    cc_printf(c, "  float m = -MLC_INF;\n");
    cc_printf(c, "  for ($i64 j = $tid; j < %lld$ll; j += %d) m = fmaxf(m, %s);\n", (long long)len, THREADS,
              cc_load(c, "x", dt, "j"));
    cc_printf(c, "  m = mlc_block_max(m, sh);\n  float s = 0.f;\n");
    cc_printf(c, "  for ($i64 j = $tid; j < %lld$ll; j += %d) s += expf(%s - m);\n", (long long)len, THREADS,
              cc_load(c, "x", dt, "j"));
    cc_printf(c, "  s = mlc_block_sum(s, sh);\n  float inv = 1.f / s;\n");
    cc_printf(c, "  for ($i64 j = $tid; j < %lld$ll; j += %d) %s\n", (long long)len, THREADS,
              cc_store(c, "out", odt, cc_fmt(c, "row * %lld$ll + j", (long long)len),
                       cc_fmt(c, "expf(%s - m) * inv", cc_load(c, "x", dt, "j"))));
    cc_end(c);
    return true;
  }

  /* The same with 16-byte loads, where a row's columns come in whole
   * vectors of V (8 bf16 or f16, 4 f32) and there are 8 vectors or more:
   * thread t takes vector column t % CW (CW vectors a block) and rows
   * t / CW apart, VUNROLL vectors in flight, V sums each; the block's
   * partials are combined in thread order as below, each of its CW * V
   * columns by one thread.  The scalar form's warps read 2 or 4 bytes a
   * thread (64 to 128 of a row): the MiniLLM's bias gradients (sums over
   * 8192 rows of [8192, 6144] and [8192, 2048] bf16) took 1.0 ms of its
   * step on an H100 for 1.6 GB, about half the bandwidth. */
  const int V = mlc_dtype_is_float((mlc_dtype)dt) ? 16 / mlc_dtype_size((mlc_dtype)dt) : 1;
  if (!is_softmax && V > 1 && inner % V == 0 && inner / V >= 8 && len >= 64) {
    const int64_t vin = inner / V;
    const col_tiling tl = tile_columns(outer, vin, len, VUNROLL);
    const int64_t cw = tl.cw, cb = tl.cb, rows = tl.rows, step = rows * VUNROLL, nchunk = tl.nchunk, rc = tl.rc, blocks = tl.blocks;
    if ((uint64_t)blocks > 0x7fffffffu) return cc_fail(c, "too many columns (%lld)", (long long)(outer * inner));
    if (nchunk > 1) c->scratch = (uint64_t)(outer * nchunk * inner) * 4u;
    cc_begin(c, (uint64_t)blocks, THREADS, 0);
    cc_printf(c, "  $shared float part[%d];\n", THREADS * V);
    cc_printf(c, "  const $i64 chunk = $bid / %lld$ll, ob = $bid %% %lld$ll;\n", (long long)(outer * cb), (long long)(outer * cb));
    cc_printf(c, "  const $i64 o = ob / %lld$ll, c0 = (ob %% %lld$ll) * %lld, vc = c0 + ($tid %% %lld);\n", (long long)cb,
              (long long)cb, (long long)cw, (long long)cw);
    cc_printf(c, "  float r[%d][%d];\n#pragma unroll\n  for (int u = 0; u < %d; u++)\n#pragma unroll\n", VUNROLL, V, VUNROLL);
    cc_printf(c, "    for (int q = 0; q < %d; q++) r[u][q] = %s;\n", V, init);
    cc_printf(c, "  if (vc < %lld$ll) {\n", (long long)vin);
    cc_printf(c, "    const %s%s *x = in0 + o * %lld$ll + vc * %d;\n", c->t->dev, cc_stype(c, dt), (long long)(len * inner), V);
    cc_printf(c, "    $i64 j = chunk * %lld$ll + $tid / %lld, j1 = chunk * %lld$ll + %lld$ll;\n", (long long)rc, (long long)cw,
              (long long)rc, (long long)rc);
    cc_printf(c, "    if (j1 > %lld$ll) j1 = %lld$ll;\n", (long long)len, (long long)len);
    cc_printf(c, "    for (; j + %lld < j1; j += %lld) {\n", (long long)((VUNROLL - 1) * rows), (long long)step);
    cc_printf(c, "      float t[%d][%d];\n#pragma unroll\n      for (int u = 0; u < %d; u++)\n", VUNROLL, V, VUNROLL);
    cc_vec_load(c, V, dt, "t[u]", "0", "x", cc_fmt(c, "(j + u * %lld) * %lld$ll", (long long)rows, (long long)inner));
    cc_printf(c, "#pragma unroll\n      for (int u = 0; u < %d; u++)\n#pragma unroll\n", VUNROLL);
    cc_printf(c, "        for (int q = 0; q < %d; q++) { float a = r[u][q], v = %s; %s r[u][q] = a; }\n    }\n", V, absx(c, "t[u][q]"),
              combine);
    cc_printf(c, "    for (; j < j1; j += %lld) {\n      float t0[%d];\n", (long long)rows, V);
    cc_vec_load(c, V, dt, "t0", "0", "x", cc_fmt(c, "j * %lld$ll", (long long)inner));
    cc_printf(c, "#pragma unroll\n      for (int q = 0; q < %d; q++) { float a = r[0][q], v = %s; %s r[0][q] = a; }\n    }\n  }\n", V,
              absx(c, "t0[q]"), combine);
    cc_printf(c, "#pragma unroll\n  for (int q = 0; q < %d; q++) {\n    float a = r[0][q];\n", V);
    cc_printf(c, "#pragma unroll\n    for (int u = 1; u < %d; u++) { float v = r[u][q]; %s }\n", VUNROLL, combine);
    cc_printf(c, "    part[$tid * %d + q] = a;\n  }\n  $barrier;\n", V);
    /* thread t < CW * V: column c0 * V + t, its partials those of threads t / V + k CW (row k), element t %% V */
    cc_printf(c, "  if ($tid < %lld && c0 * %d + $tid < %lld$ll) {\n", (long long)(cw * V), V, (long long)inner);
    cc_printf(c, "    float a = part[$tid];\n");
    cc_printf(c, "    for (int k = 1; k < %lld; k++) { float v = part[k * %lld + $tid]; %s }\n", (long long)rows,
              (long long)(cw * V), combine);
    if (nchunk == 1)
      cc_printf(c, "    %s\n  }\n", cc_store(c, "out", odt, cc_fmt(c, "o * %lld$ll + c0 * %d + $tid", (long long)inner, V),
                                          cc_fmt(c, "a%s", scale)));
    else
      cc_printf(c, "    ((%sfloat *)scratch)[(o * %lld$ll + chunk) * %lld$ll + c0 * %d + $tid] = a;\n  }\n", c->t->dev,
                (long long)nchunk, (long long)inner, V);
    cc_end(c);
    return nchunk == 1 || chunk_sums(c, outer, inner, nchunk, "float", combine, odt, scale);
  }

  /* Columns along a long axis (the bias gradients: sum over 4000 rows of
   * [4000, 768]): a block takes CW adjacent columns, its 256 threads 256 / CW
   * rows at a time (thread t: column t % CW, row t / CW), with UNROLL
   * partial results a thread so that as many loads are in flight; then the
   * block's partials are combined in thread order.  CW is 32 where that
   * makes MIN_BLOCKS blocks, else 16 or 8 (a 32-byte sector of f32).  Where
   * even 8 leaves fewer blocks, CW is 32 again and the axis is cut into
   * NCHUNK chunks, one block each; the blocks write partial results to
   * scratch and a second launch adds each column's chunks in chunk order.
   * Every sum is so taken in the same order every run.  At 32 columns a
   * block and no chunks, [4000, 768] was 24 blocks and 15 us for 12 MB
   * (bench/results/h200-2026-12-03c/areg-logs.tgz, gpt2like_profile.log);
   * at 8 columns, [2000, 1000] was 125 blocks, 13 us for 8 MB (620 GB/s:
   * too few loads in flight; bench/results/h200-2026-12-04b). */
  if (!is_softmax && inner >= 8 && len >= 64) {
    const col_tiling tl = tile_columns(outer, inner, len, UNROLL);
    const int64_t cw = tl.cw, cb = tl.cb, rows = tl.rows, step = rows * UNROLL, nchunk = tl.nchunk, rc = tl.rc, blocks = tl.blocks;
    if ((uint64_t)blocks > 0x7fffffffu) return cc_fail(c, "too many columns (%lld)", (long long)(outer * inner));
    if (nchunk > 1) c->scratch = (uint64_t)(outer * nchunk * inner) * (mlc_dtype_is_float((mlc_dtype)dt) ? 4u : (uint64_t)mlc_dtype_size((mlc_dtype)dt));
    cc_begin(c, (uint64_t)blocks, THREADS, 0);
    cc_printf(c, "  $shared %s part[%d];\n", acc, THREADS);
    cc_printf(c, "  const $i64 chunk = $bid / %lld$ll, ob = $bid %% %lld$ll;\n", (long long)(outer * cb), (long long)(outer * cb));
    cc_printf(c, "  const $i64 o = ob / %lld$ll, col = (ob %% %lld$ll) * %lld + ($tid %% %lld);\n", (long long)cb,
              (long long)cb, (long long)cw, (long long)cw);
    cc_printf(c, "  %s a = %s;\n", acc, init);
    cc_printf(c, "  if (col < %lld$ll) {\n", (long long)inner);
    cc_printf(c, "    const %s%s *x = in0 + o * %lld$ll + col;\n", c->t->dev, cc_stype(c, dt), (long long)(len * inner));
    cc_printf(c, "    %s r[%d];\n#pragma unroll\n    for (int u = 0; u < %d; u++) r[u] = %s;\n", acc, UNROLL, UNROLL, init);
    cc_printf(c, "    $i64 j = chunk * %lld$ll + $tid / %lld, j1 = chunk * %lld$ll + %lld$ll;\n", (long long)rc, (long long)cw,
              (long long)rc, (long long)rc);
    cc_printf(c, "    if (j1 > %lld$ll) j1 = %lld$ll;\n", (long long)len, (long long)len);
    const char *ld = absx(c, cc_load(c, "x", dt, cc_fmt(c, "(j + u * %lld) * %lld$ll", (long long)rows, (long long)inner)));
    cc_printf(c, "    for (; j + %lld < j1; j += %lld)\n", (long long)((UNROLL - 1) * rows), (long long)step);
    cc_printf(c, "#pragma unroll\n      for (int u = 0; u < %d; u++) { %s a = r[u], v = %s; %s r[u] = a; }\n", UNROLL, acc, ld,
              combine);
    cc_printf(c, "    for (; j < j1; j += %lld) { %s v = %s; %s }\n", (long long)rows, acc,
              absx(c, cc_load(c, "x", dt, cc_fmt(c, "j * %lld$ll", (long long)inner))), combine);
    cc_printf(c, "#pragma unroll\n    for (int u = 0; u < %d; u++) { %s v = r[u]; %s }\n  }\n", UNROLL, acc, combine);
    cc_printf(c, "  part[$tid] = a;\n  $barrier;\n");
    cc_printf(c, "  if ($tid < %lld && col < %lld$ll) {\n", (long long)cw, (long long)inner);
    cc_printf(c, "    a = part[$tid];\n");
    cc_printf(c, "    for (int k = 1; k < %lld; k++) { %s v = part[k * %lld + $tid]; %s }\n", (long long)rows, acc,
              (long long)cw, combine);
    if (nchunk == 1)
      cc_printf(c, "    %s\n  }\n", cc_store(c, "out", odt, cc_fmt(c, "o * %lld$ll + col", (long long)inner), cc_fmt(c, "a%s", scale)));
    else
      cc_printf(c, "    ((%s%s *)scratch)[(o * %lld$ll + chunk) * %lld$ll + col] = a;\n  }\n", c->t->dev, acc, (long long)nchunk,
                (long long)inner);
    cc_end(c);
    return nchunk == 1 || chunk_sums(c, outer, inner, nchunk, acc, combine, odt, scale);
  }

  int64_t cols = outer * inner, blocks = cc_ceil_div(cols, THREADS);
  if (blocks > MAX_BLOCKS) blocks = MAX_BLOCKS;
  cc_begin(c, (uint64_t)blocks, THREADS, 0);
  cc_printf(c, "  for ($i64 col = ($i64)$bid * %d + $tid; col < %lld$ll; col += %lld$ll) {\n", THREADS,
            (long long)cols, (long long)blocks * THREADS);
  cc_printf(c, "    $i64 base = col / %lld$ll * %lld$ll + col %% %lld$ll;\n", (long long)inner, (long long)(len * inner),
            (long long)inner);
  const char *at = cc_fmt(c, "base + j * %lld$ll", (long long)inner);
  if (!is_softmax) {
    cc_printf(c, "    %s a = %s;\n", acc, init);
    cc_printf(c, "    for ($i64 j = 0; j < %lld$ll; j++) { %s v = %s; %s }\n", (long long)len, acc, absx(c, cc_load(c, "in0", dt, at)),
              combine);
    cc_printf(c, "    %s\n", cc_store(c, "out", odt, "col", cc_fmt(c, "a%s", scale)));
  } else {
    cc_printf(c, "    float m = -MLC_INF, s = 0.f;\n");
    cc_printf(c, "    for ($i64 j = 0; j < %lld$ll; j++) m = fmaxf(m, %s);\n", (long long)len, cc_load(c, "in0", dt, at));
    cc_printf(c, "    for ($i64 j = 0; j < %lld$ll; j++) s += expf(%s - m);\n", (long long)len, cc_load(c, "in0", dt, at));
    cc_printf(c, "    float inv = 1.f / s;\n");
    cc_printf(c, "    for ($i64 j = 0; j < %lld$ll; j++) %s\n", (long long)len,
              cc_store(c, "out", odt, at, cc_fmt(c, "expf(%s - m) * inv", cc_load(c, "in0", dt, at))));
  }
  cc_printf(c, "  }\n");
  cc_end(c);
  return true;
}

/* argmax, argmin: one thread per (outer, inner) column walks the axis and
 * keeps the first extreme, a NaN counting as more extreme than anything (as
 * torch.argmax, argmin); i64 indices.  A plain form: no block reduction for
 * long rows. */
bool cc_emit_argreduce(cc *c) {
  const mlc_node *n = c->n;
  const mlc_type *it = cc_in(c, 0);
  int ax = n->a.axis, dt = it->dtype;
  int64_t outer = 1, len = it->dim[ax], inner = 1;
  for (int k = 0; k < ax; k++) outer *= it->dim[k];
  for (int k = ax + 1; k < it->rank; k++) inner *= it->dim[k];
  bool fl = mlc_dtype_is_float((mlc_dtype)dt), is_max = n->op == MLC_OP_ARGMAX;
  const char *take = fl ? (is_max ? "v > best || (v != v && best == best)" : "v < best || (v != v && best == best)")
                        : (is_max ? "v > best" : "v < best");
  int64_t cols = outer * inner, blocks = cc_ceil_div(cols, THREADS);
  if (blocks > MAX_BLOCKS) blocks = MAX_BLOCKS;
  cc_begin(c, (uint64_t)blocks, THREADS, 0);
  cc_printf(c, "  for ($i64 col = ($i64)$bid * %d + $tid; col < %lld$ll; col += %lld$ll) {\n", THREADS,
            (long long)cols, (long long)blocks * THREADS);
  cc_printf(c, "    $i64 base = col / %lld$ll * %lld$ll + col %% %lld$ll, bi = 0;\n", (long long)inner,
            (long long)(len * inner), (long long)inner);
  cc_printf(c, "    %s best = %s;\n", cc_ctype(c, dt), cc_load(c, "in0", dt, "base"));
  cc_printf(c, "    for ($i64 j = 1; j < %lld$ll; j++) {\n", (long long)len);
  cc_printf(c, "      %s v = %s;\n", cc_ctype(c, dt), cc_load(c, "in0", dt, cc_fmt(c, "base + j * %lld$ll", (long long)inner)));
  cc_printf(c, "      if (%s) { best = v; bi = j; }\n    }\n", take);
  cc_printf(c, "    %s\n  }\n", cc_store(c, "out", MLC_DT_I64, "col", "bi"));
  cc_end(c);
  return true;
}
