/* GEMM kernels for matmul (a[.., m, k] @ b[.., k, n], batch dims broadcast),
 * matmul_tn (a[k, m]^T @ b[k, n], from the fuse pass) and linear
 * (x[.., k] @ w[n, k]^T) on the CUDA target.
 *
 * A node becomes a gemm_desc, the internal descriptor the fused variants
 * will reuse:
 *
 *   C[b][M,N] = A[b][M,K] B[b][K,N], accumulated in f32, rounded to the
 *   dtype once at the store; C dense row-major, batch b at b * M * N;
 *   a_km: A stored [K,M] (a transposed operand, e.g. dW = dY^T X) else [M,K];
 *   b_nk: B stored [N,K] (linear's weight)                   else [K,N];
 *   nb batch dims of sizes bdim[], with element strides bsa[] of A and
 *   bsb[] of B along each (0 along a broadcast one).
 *
 * MATMUL is A[m,k] B[k,n]; when B is the same for every batch index and A
 * is dense, the batch folds into M (x[8,1024,2048] @ w[2048,2048] is one
 * 8192 x 2048 x 2048 product).  LINEAR is A[m,k] B[n,k] with x's leading
 * dims flattened into M.
 *
 * The kernels are C++ templates in cc_gemm_prelude, instantiated with the
 * shape as literals; the emitted __global__ function decodes blockIdx.x
 * into (batch, tile) and calls them:
 *
 *  - bf16/f16: mlc_gemm_tc, tensor cores (mma.sync m16n8k16, f32
 *    accumulate) fed by ldmatrix from a ST-stage cp.async pipeline through
 *    padded shared memory; 128x256 / 128x128 / 64x64 block tiles by problem
 *    size.  Rows whose start is not 16-byte aligned (leading dimension not a
 *    multiple of 8) go through plain 2-byte loads instead of cp.async; edges
 *    are zero-filled (cp.async src-size 0) and stores predicated.
 *  - bf16/f16 on sm_90a, when K % 8 == 0, N % 8 == 0 (and M % 8 == 0 for
 *    a_km) and there is a wave of 128 x 128 tiles (128 x 256 tiles when there
 *    are >= 2 waves of them); edges zero-filled, stores predicated:
 *    mlc_gemm_wg, wgmma.mma_async (f32 accumulate) from 128-byte-swizzled
 *    shared memory (K-major or MN-major per operand, so matmul, linear and
 *    a_km all fit) fed by a multi-stage cp.async pipeline, two warpgroups of
 *    64 x BN each.  The same kernel (256 threads, same smem) runs the
 *    mma.sync mlc_gemm_tc body wherever __CUDA_ARCH_FEAT_SM90_ALL is not
 *    defined (e.g. the compute_90 PTX).
 *  - f32 under --f32-matmul tf32x3 (the default) or tf32: each operand
 *    split into a TF32 high part and residual and three products a step
 *    (3xTF32), or one (tf32); any shape.  With 3/4 of a wave of 128 x 128 tiles:
 *    mlc_gemm_wgx, wgmma.m64n128k8 tf32 on sm_90a from K-major swizzled
 *    tiles that the threads fill through registers (split on the way).
 *    Otherwise mlc_gemm_x3, mma.sync m16n8k8 tf32, 128x64x32 tiles of 8
 *    warps or 64x64x32 of 4, a 3-stage cp.async ring (16-byte copies where
 *    rows are 16-byte aligned, else 4).
 *  - f32 under --f32-matmul ieee: mlc_gemm_f32, exact FMAs on the SIMT
 *    cores, 128x128 or 64x64 block tiles, 8x8 / 4x4 per thread.
 *  - split-K, for a tensor-core f32 matmul_tn (dW = dY^T X: K is the tokens,
 *    thousands, while M x N may be a wave of tiles or less, or just over
 *    one): S slices of K/S as a batch of S products into scratch, each
 *    mlc_gemm_wgx with K/S for K (A and B are [K, *], so slice z starts
 *    z K/S rows on), then a second launch sums the S partials in order
 *    into C.  S divides K, and is chosen when the waves of tiles it gives
 *    (plus the partials' traffic) model a quarter less time than one
 *    product of all of K (gemm_split).
 *
 *  - linear of at most 4 rows (a decode step): mlc_gemv, 1 to 8 warps per
 *    output column reading the weight's row 16 bytes a lane at a time,
 *    exact f32 sums, the fused epilogue per element; any dtype and K.
 *
 * Shared memory is dynamic; the larger tiles need more than 48 KiB, which
 * relies on the runtime raising cudaFuncAttributeMaxDynamicSharedMemorySize
 * to the launch's smem.
 */
#include "codegen/cuda/cuda_cc.h"

#include <string.h>

typedef cc_gemm_desc gemm_desc;

/* A kernel configuration.  tc: BM x BN x BK tiles, WM x WN warps, ST
 * stages; wg (with tc): mlc_gemm_wg, 128 x BN x 64 tiles, ST stages, falling
 * back to 128 x BN x 32 mlc_gemm_tc with 2 x 4 warps and 4 stages; x (with
 * tc, f32): mlc_gemm_x3 with x TF32 products a step; f32: a (16 TM) x
 * (16 TN) tile, BK deep. */
typedef struct {
  bool tc, wg;
  int x;
  int bm, bn, bk, wm, wn, st;
  int tm, tn;
  int occ; /* blocks per multiprocessor that the launch bound asks for (0: 1) */
  int lag; /* wg: k-tiles of wgmma left running (mlc_gemm_wg's LAG; 0 or 1) */
  bool pp;  /* wg: the persistent warp-specialised kernel (mlc_gemm_pp, st stages; bn 128: ping-pong, 128 x 128 a
               consumer warpgroup; bn 256: cooperative, 128 x 256 tiles), where TMA can load A and B; else
               mlc_gemm_wg at 128 x bn */
  bool ts;  /* pp, bn 256: its stores by TMA (--cuda-gemm-tile=cs,ST), where C's rows are 16-byte aligned */
} gemm_cfg;

/* The device code (cc_gemm_prelude) is codegen/cuda/gemm.cuh, embedded at build time. */
#define GEMM_GROUP 8 /* tile-rows per rasterisation group */

static int64_t gemm_tiles(const gemm_desc *d, int bm, int bn) {
  return mlc_gemm_batch(d) * cc_ceil_div(d->M, bm) * cc_ceil_div(d->N, bn);
}

static int64_t gemm_smem(const gemm_desc *d, const gemm_cfg *g) {
  if (!g->tc) return 2 * (int64_t)g->bk * 16 * (g->tm + g->tn) * 4;
  if (g->x && g->wg) { /* mlc_gemm_wgx::SMEM: two stages of hi and lo, or its fallback's */
    gemm_cfg f = {.tc = true, .x = g->x, .bm = 128, .bn = 128, .bk = 32, .wm = 4, .wn = 2, .st = 3};
    int64_t w = 2 * 2 * (int64_t)(g->bm + g->bn) * 128 + 1024, fb = gemm_smem(d, &f);
    return w > fb ? w : fb;
  }
  if (g->x) { /* mlc_gemm_x3::SMEM */
    int64_t a = d->a_km ? (int64_t)g->bk * (g->bm + 4) : (int64_t)g->bm * (g->bk + 8);
    int64_t b = d->b_nk ? (int64_t)g->bn * (g->bk + 8) : (int64_t)g->bk * (g->bn + 4);
    return g->st * (a + b) * 4;
  }
  if (g->pp) { /* mlc_gemm_pp::SMEM: its stages, the cooperative kernel's staging rows (2 x 64 x (bn + 8)
                 16-bit, one set of 64 with 4 stages), two mbarriers a stage, 1024 to align them; or the fallback's */
    gemm_cfg f = {.tc = true, .bm = 128, .bn = g->bn, .bk = 32, .wm = 2, .wn = 4, .st = 4};
    int64_t epi = g->bn != 256 ? 0 : g->ts ? 2 * 2 * 8192 : (g->st >= 4 ? 1 : 2) * 64 * (int64_t)(g->bn + 8) * 2;
    int64_t w = (int64_t)g->st * (128 + g->bn) * 64 * 2 + epi + 16 * g->st + 1024, fb = gemm_smem(d, &f);
    return w > fb ? w : fb;
  }
  if (g->wg) { /* mlc_gemm_wg::SMEM: its stages (+1024 to align them), or the fallback's */
    gemm_cfg f = {.tc = true, .bm = 128, .bn = g->bn, .bk = 32, .wm = 2, .wn = 4, .st = 4};
    int64_t w = (int64_t)g->st * (128 + g->bn) * 64 * 2 + 1024 + 8 * g->st, fb = gemm_smem(d, &f); /* + the TMA mbarriers */
    return w > fb ? w : fb;
  }
  int64_t a = d->a_km ? (int64_t)g->bk * (g->bm + 8) : (int64_t)g->bm * (g->bk + 8);
  int64_t b = d->b_nk ? (int64_t)g->bn * (g->bk + 8) : (int64_t)g->bk * (g->bn + 8);
  return g->st * (a + b) * 2;
}

/* --cuda-gemm-tile=BN,ST,OCC,LAG (checked by mlc_options_set), for
 * measuring the tile table (bench/gemm_tune.py): the choice for every
 * bf16/f16 wgmma GEMM. */
static bool wg_override(const mlc_options *o, gemm_cfg *g) {
  const int16_t *t = o->cuda_gemm_tile;
  if (!t[0]) return false;
  if (t[0] < 0) { /* pp,ST (-128), co,ST (-256) or cs,ST (-256 and 1) */
    *g = (gemm_cfg){.tc = true, .wg = true, .bm = 128, .bn = -t[0], .bk = 64, .wm = 2, .wn = 4, .st = t[1], .lag = 1, .pp = true,
                    .ts = t[2] == 1};
    return true;
  }
  *g = (gemm_cfg){.tc = true, .wg = true, .bm = 128, .bn = t[0], .bk = 64, .wm = 2, .wn = 4, .st = t[1], .occ = t[2], .lag = t[3]};
  return true;
}

/* Whether every row of A and B, in every batch, starts 4-byte aligned: the
 * contiguous extents and the batch strides are even (16-bit elements). */
static bool gemm_rows_even(const gemm_desc *d) {
  if (d->K <= 0 || (d->a_km ? d->M : d->K) % 2 || (d->b_nk ? d->K : d->N) % 2) return false;
  for (int k = 0; k < d->nb; k++)
    if (d->bsa[k] % 2 || d->bsb[k] % 2) return false;
  return true;
}

/* Where the cooperative TMA-store kernel's 128 x 256 tiles suit d: two waves of them or more, or from three
 * quarters of a wave to one (a tile a multiprocessor, where 128 x 128 tiles would take two rounds: the MiniLLM's
 * out_proj dW, 2048 x 2048 x 8192, 0.087 ms against 0.118 on the 128 x 128 kernel and cuBLAS's 0.099 on an H100,
 * bench/results/h100-2026-12-06.md, session 27). */
static bool gemm_cs_waves(const gemm_desc *d, int64_t sms) {
  int64_t t = gemm_tiles(d, 128, 256);
  return t >= 2 * sms || (t >= sms * 3 / 4 && t <= sms);
}

/* The kernel and tile for d; sms: the multiprocessors (cc_cuda_sms), which the waves are counted in. */
static gemm_cfg gemm_pick(const gemm_desc *d, int x, const mlc_options *o, int64_t sms) {
  if (d->dt == MLC_DT_F32 && x) {
    /* wgmma from three quarters of a wave of 128 x 128 tiles (the MLP's 2000 x 1000: 128 tiles) */
    if (gemm_tiles(d, 128, 128) >= sms * 3 / 4)
      return (gemm_cfg){.tc = true, .wg = true, .x = x, .bm = 128, .bn = 128, .bk = 32, .wm = 2, .wn = 4, .st = 2};
    if (gemm_tiles(d, 128, 64) >= sms)
      return (gemm_cfg){.tc = true, .x = x, .bm = 128, .bn = 64, .bk = 32, .wm = 4, .wn = 2, .st = 3};
    return (gemm_cfg){.tc = true, .x = x, .bm = 64, .bn = 64, .bk = 32, .wm = 2, .wn = 2, .st = 3};
  }
  if (d->dt == MLC_DT_F32) {
    if (gemm_tiles(d, 128, 128) >= sms) return (gemm_cfg){.tm = 8, .tn = 8, .bk = 8};
    return (gemm_cfg){.tm = 4, .tn = 4, .bk = 16};
  }
  /* sm_90a wgmma: 128 x BN x 64 tiles, edges zero-filled; rows of A and B
   * 4-byte aligned (copied 16 bytes at a time where they are 16-byte aligned) */
  if (gemm_rows_even(d)) {
    gemm_cfg w;
    if (wg_override(o, &w)) return w;
    /* the persistent cooperative kernel with TMA stores (cs,4) wherever C's rows suit the store: forced on
     * every shape of bench/gemm_shapes.py on the H200, it was best or level at 16 of 18 (up to 8 % ahead,
     * bias epilogues and ragged edges included); with this rule the MiniLLM's 15 shapes run at 1.00-1.22x
     * cuBLAS (bench/results/h200-2026-12-04.md) */
    if (d->N >= 256 && d->N % 8 == 0 && gemm_cs_waves(d, sms) && mlc_gemm_batch(d) == 1)
      return (gemm_cfg){.tc = true, .wg = true, .bm = 128, .bn = 256, .bk = 64, .wm = 2, .wn = 4, .st = 4, .lag = 1, .pp = true,
                        .ts = true};
    if (d->N >= 256 && gemm_tiles(d, 128, 256) >= 2 * sms)
      return (gemm_cfg){.tc = true, .wg = true, .bm = 128, .bn = 256, .bk = 64, .wm = 2, .wn = 4, .st = 4, .lag = 1};
    if (gemm_tiles(d, 128, 128) >= sms)
      return (gemm_cfg){.tc = true, .wg = true, .bm = 128, .bn = 128, .bk = 64, .wm = 2, .wn = 4, .st = 6, .lag = 1};
    /* under a wave of 128 x 128 tiles: the persistent kernel's 128 x 128 tiles (a block a tile, TMA loads; where
       TMA cannot load A or B, mlc_gemm_wg at the same tile) rather than 64 x 64 mma.sync tiles.  On an H100
       (bench/results/h100-2026-12-06.md, session 27), ms against the 64 x 64 kernel and cuBLAS: 1000^3 0.018 /
       0.025 / 0.021, 1024 x 1024 x 4096 0.031 / 0.070 / 0.031, 512 x 2048 x 8192 0.051 / 0.127 / 0.047 */
    if (mlc_gemm_batch(d) == 1)
      return (gemm_cfg){.tc = true, .wg = true, .bm = 128, .bn = 128, .bk = 64, .wm = 2, .wn = 4, .st = 6, .lag = 1, .pp = true};
  }
  if (gemm_tiles(d, 128, 256) >= 2 * sms && d->N >= 256)
    return (gemm_cfg){.tc = true, .bm = 128, .bn = 256, .bk = 32, .wm = 2, .wn = 4, .st = 4};
  if (gemm_tiles(d, 128, 128) >= sms)
    return (gemm_cfg){.tc = true, .bm = 128, .bn = 128, .bk = 32, .wm = 2, .wn = 4, .st = 4};
  return (gemm_cfg){.tc = true, .bm = 64, .bn = 64, .bk = 32, .wm = 2, .wn = 2, .st = 3};
}

/* The model of gemm_split: a 128 x 128 x k wgx tile costs about k + 64
 * k-steps (its prologue and store), a wave of them runs at once, and the
 * partials move at about 3 TB/s, a k-step being about 57 ns (2 * 128 * 128
 * FLOP at 75 TFLOP/s over 132 multiprocessors). */
static double split_cost(const gemm_desc *d, int64_t s, int64_t sms) {
  int64_t tiles = gemm_tiles(d, 128, 128) * s, waves = cc_ceil_div(tiles, sms);
  double steps = (double)waves * (double)(d->K / s + 64);
  if (s > 1) steps += (double)(s + 1) * (double)d->M * (double)d->N * 4 / 3e12 / 57e-9;
  return steps;
}

/* The slices of K for d under g (see the opening comment): 1, or S. */
static int64_t gemm_split(const gemm_desc *d, const gemm_cfg *g, bool fused, int64_t sms) {
  if (fused || d->dt != MLC_DT_F32 || !g->x || !d->a_km || d->b_nk || mlc_gemm_batch(d) != 1) return 1;
  int64_t best = 1;
  double base = split_cost(d, 1, sms), cost = base;
  for (int64_t s = 2; s <= 64 && d->K / s >= 128; s++) {
    if (d->K % s) continue;
    double t = split_cost(d, s, sms);
    if (t < cost) cost = t, best = s;
  }
  return cost < 0.75 * base ? best : 1;
}

static void gemm_emit_one(cc *c, const gemm_desc *d, const gemm_cfg *g, const mlc_fused_prog *pr, const char *dst);

/* Emits the launches of d with configuration g (and s slices of K, from
 * gemm_split); with pr, a FUSED node's GEMM and its epilogue
 * (emit_fused.c), which stores instead of C. */
static void gemm_emit_cfg(cc *c, const gemm_desc *d, const gemm_cfg *g, const mlc_fused_prog *pr, int64_t s) {
  if (s > 1) {
    /* s products of K / s into scratch, as a batch of s whose slices of A
     * and B start K / s rows apart; then their sum into C, in order */
    gemm_desc p = *d;
    p.K = d->K / s;
    p.nb = 1;
    p.bdim[0] = s;
    p.bsa[0] = p.K * d->M;
    p.bsb[0] = p.K * d->N;
    gemm_cfg w = {.tc = true, .wg = true, .x = g->x, .bm = 128, .bn = 128, .bk = 32, .wm = 2, .wn = 4, .st = 2};
    c->scratch = (uint64_t)(s * d->M * d->N * 4);
    gemm_emit_one(c, &p, &w, NULL, "(float *)scratch");
    int64_t mn = d->M * d->N;
    bool v4 = mn % 4 == 0;
    cc_begin(c, (uint64_t)cc_ceil_div(v4 ? mn / 4 : mn, 256), 256, 0);
    cc_printf(c, "  const long long i = (long long)blockIdx.x * 256 + threadIdx.x;\n");
    cc_printf(c, "  if (i >= %lldLL) return;\n", (long long)(v4 ? mn / 4 : mn));
    if (v4) {
      cc_printf(c, "  const float4 *p = (const float4 *)scratch + i;\n  float4 a = p[0];\n");
      cc_printf(c, "  for (int z = 1; z < %lld; z++) {\n", (long long)s);
      cc_printf(c, "    const float4 b = p[(long long)z * %lldLL];\n", (long long)(mn / 4));
      cc_printf(c, "    a.x += b.x; a.y += b.y; a.z += b.z; a.w += b.w;\n  }\n  ((float4 *)out)[i] = a;\n");
    } else {
      cc_printf(c, "  const float *p = (const float *)scratch + i;\n  float a = p[0];\n");
      cc_printf(c, "  for (int z = 1; z < %lld; z++) a += p[(long long)z * %lldLL];\n  out[i] = a;\n", (long long)s,
                (long long)mn);
    }
    cc_end(c);
    return;
  }
  gemm_emit_one(c, d, g, pr, "out");
}

/* One launch of d with configuration g, storing C at dst (with pr: the epilogue's stores). */
static void gemm_emit_one(cc *c, const gemm_desc *d, const gemm_cfg *g, const mlc_fused_prog *pr, const char *dst) {
  int bm = g->tc ? g->bm : 16 * g->tm, bn = g->tc ? g->bn : 16 * g->tn;
  int64_t tmn = cc_ceil_div(d->M, bm), tnn = cc_ceil_div(d->N, bn), batch = mlc_gemm_batch(d);
  uint32_t threads = g->tc ? (uint32_t)(g->wm * g->wn * 32) : 256;
  if (pr) cc_fused_epilogue(c, pr);
  /* The wgmma GEMM loads by TMA where the tensor maps can describe A and B
   * as stored: one product (no batch), rows 16-byte aligned. */
  int64_t lda = d->a_km ? d->M : d->K, ldb = d->b_nk ? d->K : d->N;
  const char *maps = "";
  bool tma = g->wg && !g->x && !c->sharded && c->ntmap + 2 <= MLC_CUDA_MAX_TMAP && batch == 1 && lda % 8 == 0 && ldb % 8 == 0 && d->M < INT32_MAX &&
             d->N < INT32_MAX && d->K < INT32_MAX;
  if (tma) {
    const uint64_t da[2] = {(uint64_t)(d->a_km ? d->M : d->K), (uint64_t)(d->a_km ? d->K : d->M)}, sa[1] = {(uint64_t)(2 * lda)};
    const uint64_t db[2] = {(uint64_t)(d->b_nk ? d->K : d->N), (uint64_t)(d->b_nk ? d->N : d->K)}, sb[1] = {(uint64_t)(2 * ldb)};
    const uint32_t ba[2] = {64, d->a_km ? 64 : 128}, bb[2] = {64, d->b_nk ? (uint32_t)g->bn : 64};
    const char *ma = cc_tmap(c, 0, 0, 2, 2, da, sa, ba, 128), *mb = cc_tmap(c, 1, 0, 2, 2, db, sb, bb, 128);
    maps = cc_fmt(c, ", &%s, &%s", ma, mb);
  }
  gemm_cfg tsc;
  if (g->pp && g->ts && !(tma && d->N % 8 == 0 && c->n->type.dtype == d->dt && c->ntmap + 1 <= MLC_CUDA_MAX_TMAP)) { /* C not for a TMA store */
    tsc = *g;
    tsc.ts = false;
    g = &tsc;
  }
  if (g->pp && tma && g->ts) { /* C by TMA: 64 x 64 boxes, 128-byte swizzle; C is the argument after the inputs */
    const uint64_t dc[2] = {(uint64_t)d->N, (uint64_t)d->M}, sc[1] = {(uint64_t)(2 * d->N)};
    const uint32_t bc[2] = {64, 64};
    maps = cc_fmt(c, "%s, &%s", maps, cc_tmap(c, c->n->nin, 0, 2, 2, dc, sc, bc, 128));
  }
  if (g->pp && tma) { /* persistent: a block a multiprocessor, 384 threads */
    int64_t tiles = tmn * tnn;
    cc_begin(c, cc_cuda_grid(c, tiles, 1), 384, (uint32_t)gemm_smem(d, g));
    cc_printf(c, "  extern __shared__ __align__(16) unsigned char mlc_gemm_sm[];\n");
    cc_printf(c, "  typedef mlc_gemm_pp<%s, %d, %d, %s, %s, %lldLL, %lldLL, %lldLL, %d%s> G;\n", cc_stype(c, d->dt), g->bn, g->st,
              d->a_km ? "true" : "false", d->b_nk ? "true" : "false", (long long)d->M, (long long)d->N, (long long)d->K,
              GEMM_GROUP, g->ts ? ", true" : "");
    if (pr) {
      cc_printf(c, "  const @K@_epi e = %s;\n", cc_fused_epilogue_init(c, pr, "0"));
      cc_printf(c, "  G::run_e(in0, in1, e, mlc_gemm_sm%s);\n", maps);
    } else {
      cc_printf(c, "  G::run(in0, in1, %s, mlc_gemm_sm%s);\n", dst, maps);
    }
    cc_end(c);
    return;
  }
  gemm_cfg wgc;
  if (g->pp) { /* A or B not for TMA: the wgmma kernel at the same tile */
    wgc = *g;
    wgc.pp = false, wgc.st = g->bn == 256 ? 4 : 6;
    g = &wgc;
  }
  cc_begin_min(c, (uint64_t)(batch * tmn * tnn), threads, (uint32_t)gemm_smem(d, g), g->occ > 1 ? (uint32_t)g->occ : 1);
  const char *T = cc_stype(c, d->dt);
  cc_printf(c, "  extern __shared__ __align__(16) unsigned char mlc_gemm_sm[];\n");
  if (g->x && g->wg)
    cc_printf(c, "  typedef mlc_gemm_wgx<%d, %s, %s, %lldLL, %lldLL, %lldLL> G;\n", g->x, d->a_km ? "true" : "false",
              d->b_nk ? "true" : "false", (long long)d->M, (long long)d->N, (long long)d->K);
  else if (g->x)
    cc_printf(c, "  typedef mlc_gemm_x3<%d, %d, %d, %d, %d, %d, %d, %s, %s, %lldLL, %lldLL, %lldLL> G;\n", g->x, g->bm,
              g->bn, g->bk, g->wm, g->wn, g->st, d->a_km ? "true" : "false", d->b_nk ? "true" : "false",
              (long long)d->M, (long long)d->N, (long long)d->K);
  else if (g->wg)
    cc_printf(c, "  typedef mlc_gemm_wg<%s, %d, %d, %d, %s, %s, %lldLL, %lldLL, %lldLL, %s> G;\n", T, g->bn, g->st, g->lag,
              d->a_km ? "true" : "false", d->b_nk ? "true" : "false", (long long)d->M, (long long)d->N,
              (long long)d->K, tma ? "true" : "false");
  else if (g->tc)
    cc_printf(c, "  typedef mlc_gemm_tc<%s, %d, %d, %d, %d, %d, %d, %s, %s, %lldLL, %lldLL, %lldLL> G;\n", T, g->bm,
              g->bn, g->bk, g->wm, g->wn, g->st, d->a_km ? "true" : "false", d->b_nk ? "true" : "false",
              (long long)d->M, (long long)d->N, (long long)d->K);
  else
    cc_printf(c, "  typedef mlc_gemm_f32<%d, %d, %d, %s, %s, %lldLL, %lldLL, %lldLL> G;\n", g->tm, g->tn, g->bk,
              d->a_km ? "true" : "false", d->b_nk ? "true" : "false", (long long)d->M, (long long)d->N,
              (long long)d->K);
  cc_printf(c, "  unsigned t = blockIdx.x;\n");
  const char *oa = "0", *ob = "0", *oc = "0";
  if (batch > 1) {
    cc_printf(c, "  long long b = t / %lldu;\n  t %%= %lldu;\n", (long long)(tmn * tnn), (long long)(tmn * tnn));
    cc_printf(c, "  long long oa = 0, ob = 0, q = b, i;\n");
    for (int k = d->nb - 1; k >= 0; k--) {
      if (d->bdim[k] == 1) continue;
      cc_printf(c, "  i = q %% %lld; q /= %lld;", (long long)d->bdim[k], (long long)d->bdim[k]);
      if (d->bsa[k]) cc_printf(c, " oa += i * %lldLL;", (long long)d->bsa[k]);
      if (d->bsb[k]) cc_printf(c, " ob += i * %lldLL;", (long long)d->bsb[k]);
      cc_printf(c, "\n");
    }
    oa = "oa", ob = "ob", oc = cc_fmt(c, "b * %lldLL", (long long)(d->M * d->N));
  }
  cc_printf(c, "  int tm, tn;\n  mlc_gemm_raster<%lld, %lld, %d>(t, tm, tn);\n", (long long)tmn, (long long)tnn,
            GEMM_GROUP);
  if (pr) {
    cc_printf(c, "  const @K@_epi e = %s;\n", cc_fused_epilogue_init(c, pr, oc));
    cc_printf(c, "  G::run_e(in0 + %s, in1 + %s, e, tm, tn, mlc_gemm_sm%s);\n", oa, ob, maps);
  } else {
    cc_printf(c, "  G::run(in0 + %s, in1 + %s, %s + %s, tm, tn, mlc_gemm_sm%s);\n", oa, ob, dst, oc, maps);
  }
  cc_end(c);
}


/* A linear of at most GEMV_ROWS rows: mlc_gemv, KS warps per output
 * column.  KS doubles (up to GEMV_WARPS) while the product has fewer than
 * GEMV_MIN_WARPS warps and each would still read 4 KiB of the row or more.
 * On the H100 (2026-12-05, ncu, bf16): a warp per column read 8192 x 2048
 * at 2.26 TB/s and 2048 x 8192 at 1.85, which 4 warps a column raised to
 * 1.92; 2 warps a column lowered 6144 x 2048 from 2.18 to 1.88 (2 KiB a
 * warp), so rows of 4 KiB stay whole.  The whole decode step did not move
 * (0.833-0.839 ms both ways).  --cuda-gemv-ks sets KS (for measuring). */
#define GEMV_ROWS 4
#define GEMV_WARPS 8 /* a block's */
#define GEMV_MIN_WARPS 8192
static bool gemv_fits(const cc *c, const gemm_desc *d) {
  return d->b_nk && !d->a_km && mlc_gemm_batch(d) == 1 && d->M >= 1 && d->M <= GEMV_ROWS && d->K >= 1 && !c->sharded && d->N <= INT32_MAX * (int64_t)GEMV_WARPS;
}

static int gemv_ks(const cc *c, const gemm_desc *d, int64_t esize) {
  int ks = c->p->opts.cuda_gemv_ks;
  if (ks) return ks;
  for (ks = 1; ks < GEMV_WARPS && d->N * ks < GEMV_MIN_WARPS && d->K * esize / (2 * ks) >= 4096;) ks *= 2;
  return ks;
}

/* mlc_gemv_rms plays the norm kernel's threads with the GEMV's block */
_Static_assert(CC_ROW_THREADS == 32 * GEMV_WARPS, "a GEMV block is a norm kernel's block");

/* The x argument of mlc_gemv (gemm.cuh) for a GEMM of `rows` rows of K dt
 * elements: in0 as it is, or through pr's rmsnorm prologue. */
static const char *gemv_x(cc *c, const mlc_fused_prog *pr, int dt, int64_t rows, int64_t K) {
  const char *T = cc_stype(c, dt);
  if (!pr || pr->gemm < 1) return cc_fmt(c, "mlc_gemv_x<%s, %lldLL>{in0}", T, (long long)K);
  /* the rmsnorm kernel's row plan (emit_norm.c: blocks of CC_ROW_THREADS), so rstd is its to the bit */
  cc_rowplan rp;
  cc_plan_rows(&rp, rows, K, dt, 0);
  bool w = pr->ins[0].nin == 2;
  return cc_fmt(c, "mlc_gemv_rms<%s, %d, %lldLL, %d, %d, %s>{in0, %s, %s, %s}", T, (int)rows, (long long)K, rp.vec, rp.tpr,
                w ? "true" : "false", w ? "in2" : "nullptr", cc_flit(c, 1.0 / (double)K), cc_flit(c, pr->ins[0].eps));
}

static void gemv_emit(cc *c, const gemm_desc *d, const mlc_fused_prog *pr) {
  if (pr) cc_fused_epilogue(c, pr);
  const int ks = gemv_ks(c, d, mlc_dtype_size(d->dt));
  cc_begin(c, (uint64_t)cc_ceil_div(d->N, GEMV_WARPS / ks), 32 * GEMV_WARPS, 0);
  const char *T = cc_stype(c, d->dt);
  cc_printf(c, "  typedef mlc_gemv<%s, %d, %lldLL, %lldLL, %d, %d> G;\n", T, (int)d->M, (long long)d->N, (long long)d->K, GEMV_WARPS, ks);
  if (pr) cc_printf(c, "  const @K@_epi e = %s;\n", cc_fused_epilogue_init(c, pr, "0"));
  else cc_printf(c, "  const mlc_gemm_out<%s> e = {out};\n", T);
  cc_printf(c, "  G::run(%s, in1, e);\n", gemv_x(c, pr, d->dt, d->M, d->K));
  cc_end(c);
}

/* A GEMM node, or a FUSED node whose program starts with one (its GEMM
 * described as a node of its own; the epilogue from the program). */
bool cc_emit_gemm(cc *c) {
  gemm_desc d;
  mlc_fused_prog pr;
  bool fused;
  if (!cc_gemm_desc_node(c, &d, &pr, &fused)) return false;
  if (gemv_fits(c, &d)) {
    gemv_emit(c, &d, fused ? &pr : NULL);
    return true;
  }
  if (fused && pr.gemm > 0) /* fuse.c: gemv_prologue_rows, GEMV_ROWS here */
    return cc_bug(c, "a GEMM of %lld rows with a prologue: only matrix-vector products take one", (long long)d.M);
  gemm_cfg g = gemm_pick(&d, cc_f32_products(c), &c->p->opts, cc_cuda_sms(c));
  gemm_emit_cfg(c, &d, &g, fused ? &pr : NULL, gemm_split(&d, &g, fused, cc_cuda_sms(c)));
  return true;
}

/* scaled_mm (issue 30, passes/fp8.c): C[m, n] = (A8 B8^T)[m, n] 2^-ea 2^-eb,
 * A8 [M, K] and B8 [N, K] f8 codes (both K-major, as FP8 wgmma wants them),
 * ea and eb the scales' exponents from the two amaxes (mlc_f8_scale),
 * accumulated in f32, stored as the node's dtype (mlc_scaled_out).
 *
 * Where rows are 16-byte aligned (K % 16 == 0): mlc_gemm_pp on mlc_f8x2,
 * two codes a 16-bit element, so that the FP8 product is the 16-bit
 * kernel's [M, K / 2] x [N, K / 2] (its TMA loads, 6 stages) with the FP8
 * wgmma (m64n128k32) in place of the 16-bit one: its F8 mode, 128 x 128
 * tiles whose two consumer warpgroups take 64 rows each and add every
 * k-tile's sums into f32 registers (gemm.cuh); the compute_90 PTX runs the
 * mma.sync fallback (m16n8k32).  Otherwise one thread an output, the codes
 * decoded and summed in f32 (correct, slow: the fp8 pass makes scaled_mm
 * only of linears whose dims are multiples of 16). */
bool cc_emit_scaled_mm(cc *c) {
  const mlc_node *n = c->n;
  const mlc_type *at = cc_in(c, 0), *bt = cc_in(c, 1);
  if (at->rank < 2 || bt->rank != 2 || !mlc_dtype_is_f8(at->dtype) || !mlc_dtype_is_f8(bt->dtype) || c->sharded)
    return cc_bug(c, "scaled_mm of %s[rank %d] and %s[rank %d]", mlc_dtype_name((mlc_dtype)at->dtype), at->rank,
                  mlc_dtype_name((mlc_dtype)bt->dtype), bt->rank);
  const int64_t K = at->dim[at->rank - 1], M = mlc_type_numel(at) / K, N = bt->dim[0];
  const int ea = at->dtype == MLC_DT_F8E5M2, eb = bt->dtype == MLC_DT_F8E5M2;
  const char *P = cc_fmt(c, "mlc_f8x2<%d, %d>", ea, eb);
  const char *scale = cc_fmt(c, "mlc_f8_scale<%d>(in2[0], true) * mlc_f8_scale<%d>(in3[0], true)", ea, eb);
  const char *epi;
  if (n->op == MLC_OP_FUSED) { /* heading an epilogue group: the group's store (emit_fused.c) of the scaled accumulator */
    mlc_fused_prog pr;
    if (!cc_fused_program(c, &pr)) return false;
    cc_fused_epilogue(c, &pr);
    epi = cc_fmt(c, "  const mlc_scaled_epi<@K@_epi> e = {%s, %s};\n", cc_fused_epilogue_init(c, &pr, "0"), scale);
  } else {
    epi = cc_fmt(c, "  const mlc_scaled_out<%s> e = {out, %s};\n", cc_stype(c, n->type.dtype), scale);
  }
  if (K % 16 == 0 && K > 0 && M < INT32_MAX && N < INT32_MAX && c->ntmap + 2 <= MLC_CUDA_MAX_TMAP) {
    const gemm_desc d = {.dt = MLC_DT_BF16, .M = M, .N = N, .K = K / 2, .b_nk = true};
    const gemm_cfg g = {.tc = true, .wg = true, .bm = 128, .bn = 128, .bk = 64, .wm = 2, .wn = 4, .st = 6, .lag = 1, .pp = true};
    const uint64_t da[2] = {(uint64_t)(K / 2), (uint64_t)M}, db[2] = {(uint64_t)(K / 2), (uint64_t)N}, st[1] = {(uint64_t)K};
    const uint32_t box[2] = {64, 128};
    const char *ma = cc_tmap(c, 0, 0, 2, 2, da, st, box, 128), *mb = cc_tmap(c, 1, 0, 2, 2, db, st, box, 128);
    int64_t tiles = cc_ceil_div(M, 128) * cc_ceil_div(N, 128);
    cc_begin(c, cc_cuda_grid(c, tiles, 1), 384, (uint32_t)gemm_smem(&d, &g));
    cc_printf(c, "  extern __shared__ __align__(16) unsigned char mlc_gemm_sm[];\n");
    cc_printf(c, "  typedef mlc_gemm_pp<%s, 128, %d, false, true, %lldLL, %lldLL, %lldLL, %d> G;\n%s", P, g.st, (long long)M,
              (long long)N, (long long)(K / 2), GEMM_GROUP, epi);
    cc_printf(c, "  G::run_e((const %s *)in0, (const %s *)in1, e, mlc_gemm_sm, &%s, &%s);\n", P, P, ma, mb);
    cc_end(c);
    return true;
  }
  const int64_t mn = M * N;
  cc_begin(c, (uint64_t)cc_ceil_div(mn, 256), 256, 0);
  cc_printf(c, "%s  const long long i = (long long)blockIdx.x * 256 + threadIdx.x;\n  if (i >= %lldLL) return;\n", epi, (long long)mn);
  cc_printf(c, "  const long long r = i / %lldLL, col = i %% %lldLL;\n  float acc = 0.f;\n", (long long)N, (long long)N);
  cc_printf(c, "  for (long long k = 0; k < %lldLL; k++) acc += mlc_f8_dec<%d>(in0[r * %lldLL + k]) * mlc_f8_dec<%d>(in1[col * %lldLL + k]);\n",
            (long long)K, ea, (long long)K, eb, (long long)K);
  cc_printf(c, "  e.st1(i, col, acc);\n");
  cc_end(c);
  return true;
}
