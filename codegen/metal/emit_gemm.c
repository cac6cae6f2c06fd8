/* GEMM kernels for matmul (a[.., m, k] @ b[.., k, n], batch dims broadcast),
 * matmul_tn (a[k, m]^T @ b[k, n]) and linear (x[.., k] @ w[n, k]^T) on the
 * Metal target.
 *
 * A node becomes the same descriptor as on CUDA (codegen/cuda/emit_gemm.c):
 *
 *   C[b][M,N] = A[b][M,K] B[b][K,N], accumulated in f32, rounded to the
 *   dtype once at the store; C dense row-major, batch b at b * M * N;
 *   a_km: A stored [K,M] (matmul_tn) else [M,K];
 *   b_nk: B stored [N,K] (linear's weight) else [K,N];
 *   nb batch dims of sizes bdim[], with element strides bsa[] of A and
 *   bsb[] of B along each (0 along a broadcast one).
 *
 * MATMUL with one B for every batch index and a dense A folds the batch
 * into M; LINEAR flattens x's leading dims into M.
 *
 * The kernel is the template mlc_gemm_msl of cc_gemm_prelude_msl
 * (codegen/metal/gemm.metal), instantiated with the shape as literals: 8x8
 * simdgroup_matrix products (simdgroup_multiply_accumulate into
 * simdgroup_float8x8 accumulators) over operands staged in threadgroup
 * memory, 128 threads (2 x 2 SIMD groups) per threadgroup, a 64 x 64 x 16
 * tile when there are enough of them to fill the GPU, else 32 x 32 x 32.
 * All three dtypes stage their operands as float and multiply
 * simdgroup_float8x8 matrices: exact f32 products for f32; bf16 and f16
 * are widened exactly, so the products are those of the stored values with
 * f32 accumulation.  (simdgroup_bfloat8x8 needs newer GPUs, and
 * simdgroup_multiply_accumulate takes one element type for A, B and C, so
 * half or bfloat operands would mean a half or bfloat accumulator.)
 */
#include <string.h>

#include "codegen/metal/metal_cc.h"

#define GEMM_TGS 32 /* threadgroups that keep an Apple GPU busy; only steers the tile choice */

typedef cc_gemm_desc gemm_desc;

typedef struct {
  int bm, bn, bk, wm, wn;
} gemm_cfg;

static int64_t gemm_tiles(const gemm_desc *d, int bm, int bn) {
  return mlc_gemm_batch(d) * cc_ceil_div(d->M, bm) * cc_ceil_div(d->N, bn);
}

static gemm_cfg gemm_pick(const gemm_desc *d) {
  if (d->M >= 64 && d->N >= 64 && gemm_tiles(d, 64, 64) >= GEMM_TGS) return (gemm_cfg){64, 64, 16, 2, 2};
  return (gemm_cfg){32, 32, 32, 2, 2};
}

/* Bytes of threadgroup memory: the staged tiles, or C's tile as float. */
static uint32_t gemm_smem(const gemm_cfg *g) {
  int64_t ab = ((int64_t)g->bm * (g->bk + 4) + (int64_t)g->bk * (g->bn + 4)) * 4;
  int64_t cs = (int64_t)g->bm * (g->bn + 4) * 4;
  int64_t s = ab > cs ? ab : cs;
  return (uint32_t)((s + 15) / 16 * 16);
}

static void gemm_emit_cfg(cc *c, const gemm_desc *d, const gemm_cfg *g, const mlc_fused_prog *pr) {
  int64_t tmn = cc_ceil_div(d->M, g->bm), tnn = cc_ceil_div(d->N, g->bn), batch = mlc_gemm_batch(d);
  if (batch * tmn * tnn == 0) { /* no elements to write */
    cc_begin(c, 1, 32, 0);
    cc_end(c);
    return;
  }
  if (pr) cc_fused_epilogue(c, pr);
  cc_begin(c, (uint64_t)(batch * tmn * tnn), (uint32_t)(g->wm * g->wn * 32), gemm_smem(g));
  cc_printf(c, "  uint t = blockIdx.x;\n");
  const char *oa = "0", *ob = "0", *oc = "0";
  if (batch > 1) {
    cc_printf(c, "  long b = t / %lldu;\n  t %%= %lldu;\n", (long long)(tmn * tnn), (long long)(tmn * tnn));
    cc_printf(c, "  long oa = 0, ob = 0, q = b, i;\n");
    for (int k = d->nb - 1; k >= 0; k--) {
      if (d->bdim[k] == 1) continue;
      cc_printf(c, "  i = q %% %lld; q /= %lld;", (long long)d->bdim[k], (long long)d->bdim[k]);
      if (d->bsa[k]) cc_printf(c, " oa += i * %lldL;", (long long)d->bsa[k]);
      if (d->bsb[k]) cc_printf(c, " ob += i * %lldL;", (long long)d->bsb[k]);
      cc_printf(c, "\n");
    }
    oa = "oa", ob = "ob", oc = cc_fmt(c, "b * %lldL", (long long)(d->M * d->N));
  }
  cc_printf(c, "  int tm = (int)(t / %lldu), tn = (int)(t %% %lldu);\n", (long long)tnn, (long long)tnn);
  const char *e = pr ? cc_fmt(c, "@K@_epi%s", cc_fused_epilogue_init(c, pr, oc))
                     : cc_fmt(c, "mlc_gemm_msl_out<%s>{out + %s}", cc_stype(c, d->dt), oc);
  cc_printf(c, "  mlc_gemm_msl<%s, %d, %d, %d, %d, %d, %s, %s, %lldL, %lldL, %lldL>(in0 + %s, in1 + %s, %s, tm, tn, mlc_smem, threadIdx.x, simd_id);\n",
            cc_stype(c, d->dt), g->bm, g->bn, g->bk, g->wm, g->wn, d->a_km ? "true" : "false",
            d->b_nk ? "true" : "false", (long long)d->M, (long long)d->N, (long long)d->K, oa, ob, e);
  cc_end(c);
}

/* The descriptor of a MATMUL, MATMUL_TN or LINEAR node (as on CUDA). */

bool cc_emit_gemm_msl(cc *c) {
  gemm_desc d;
  mlc_fused_prog pr;
  bool fused;
  if (!cc_gemm_desc_node(c, &d, &pr, &fused)) return false;
  gemm_cfg g = gemm_pick(&d);
  if (gemm_tiles(&d, g.bm, g.bn) > 0x7fffffffLL)
    return cc_fail(c, "a GEMM of %lld tiles is too large for one Metal dispatch", (long long)gemm_tiles(&d, g.bm, g.bn));
  gemm_emit_cfg(c, &d, &g, fused ? &pr : NULL);
  return true;
}

/* qlinear (--quantize int8|int4[:asym][:scales=f32]): one launch of mlc_qgemv_msl
 * (gemm.metal; SCHEME the scheme's flags), a SIMD group per output
 * column and up to QV_ROWS rows of
 * x, QV_SIMDS SIMD groups per threadgroup.  A decode step's one row reads
 * the packed weight once; a prefill's rows share each word QV_ROWS at a
 * time. */
#define QV_ROWS 16
#define QV_SIMDS 8

bool cc_emit_qlinear_msl(cc *c) {
  cc_qlinear_shape q;
  if (!cc_qlinear_shape_of(c, &q)) return false;
  int64_t MB = q.m < QV_ROWS ? q.m : QV_ROWS, groups = q.m < 1 ? 0 : cc_ceil_div(q.n, QV_SIMDS) * cc_ceil_div(q.m, MB);
  if (q.m < 1 || groups > INT32_MAX)
    return cc_fail(c, "qlinear of %lld rows and %lld columns is out of range for the Metal kernel", (long long)q.m, (long long)q.n);
  cc_begin(c, (uint64_t)groups, 32 * QV_SIMDS, 0);
  cc_printf(c, "  mlc_qgemv_msl<%d, %d, %lldL, %lldL, %lldL, %lldL, %d, %d>(in1, in0, out, blockIdx.x, simd_id, simd_lane);\n",
            q.bits, (int)MB, (long long)q.m, (long long)q.n, (long long)q.k, (long long)q.group, QV_SIMDS, q.scheme);
  cc_end(c);
  return true;
}
