/* Attention and its gradient on CUDA, FlashAttention-2 style: no sq x sk
 * matrix ever reaches device memory.
 *
 * The kernels live in the prelude below as templates (mlc_attn_*); the
 * emitted launches call them with every shape as a template argument, so
 * all loop bounds and strides are constants.
 *
 * attention(q, k, v), 16-bit types with d == dv, d % 16 == 0 and d <= 256:
 * a block per 128 query rows of one (batch, head) (causal, or d > 128: 64),
 * 4 warps of 2 row tiles of 16 (causal or d > 128: 4 of 1, where a tile's
 * o takes d / 2 registers a thread), so each k and v fragment feeds two
 * row tiles; keys and values stream through shared memory 32 rows at a time
 * (causal at d <= 128: 64; cp.async, double-buffered); S = q k^T and o += p v on the
 * tensor cores (mma.sync m16n8k16, f32 accumulators), the online softmax in
 * registers in base 2.  Causal tiles stop at their diagonal.  Head dim 128
 * or 64 on sm_90a: mlc_attn_fwd_wg instead (wgmma, a producer warpgroup
 * feeding a 3-stage TMA/mbarrier ring, two consumer warpgroups of 64 rows
 * taking turns, each issuing the next block's q k^T before this block's
 * softmax).
 * f32 on the tensor cores: below.  Everything else: a warp per query row,
 * exact f32; passes/attnpad.c pads head dims up to 256 that the tensor-core
 * kernels do not take, so this is left to head dims past 256 and
 * --f32-matmul ieee.
 *
 * attention_save(q, k, v) (passes/attnsave.c): the forward, also writing
 * each row's log-sum-exp (base 2) after the output.  attention_save(qkv),
 * packed: q, k, v read from the in-projection [b, s, 3h, d] as they lie,
 * the output written in [b, s, h, d] order (mlc_attn_row).
 *
 * attention_grad(g, q, k, v) -> [3, b, h, s, d] (dq, dk, dv), three launches:
 *   0. per query tile: the forward again, giving each row's log-sum-exp and
 *      D = dO . o into scratch (and, on tensor cores, zeroing dq's f32
 *      accumulator);
 *   1. 16-bit, d % 32 == 0, d <= 256: per 128 keys (8 warps of 16), over
 *      the query rows 64 at a time, S and dP again, P, dS; dk and dv summed
 *      in registers and stored, dq summed by f32 atomics into scratch
 *      (red.global.add.v4 on sm_90, scalar atomicAdd before); head dim 128
 *      or 64 on sm_90a: the same on wgmma (mlc_attn_bwd_wg: two warpgroups
 *      of 64 keys, q and dO three tiles deep).  Past d = 128: 64 keys (4
 *      warps), 32 query rows a step, in two launches (dv alone, then dk and
 *      dq: a warp's 16 keys of both would be d registers a thread).
 *      Otherwise: a warp per key row
 *      (dk, dv);
 *   2. tensor cores: dq's accumulator times scale, converted; otherwise a
 *      warp per query row computes dq.
 * f32 on the tensor cores (d % 8 == 0, d <= 256): launch 0 as above, then
 * mlc_attn_bwd_kv_x (per 64 keys: dk, dv; past d = 128 a launch for dv and
 * one for dk) and mlc_attn_bwd_q_x (per 64
 * query rows: dq), each recomputing S and dP; with the statistics saved and
 * d % 16 == 0, d <= 64: one pass instead, mlc_attn_bwd_kv_x also adding dq
 * by f32 atomics into scratch (zeroed by launch 0), then mlc_attn_cvt.
 * attention_grad_saved(g, q, k, v, saved): launch 0 is only D = dO . o from
 * the saved output (and dq's zeroing); lse2 is read from what was saved.
 * There mlc_attn_bwd_wg stages each warpgroup's dq block in shared memory
 * and adds it with one bulk reduce-add into an accumulator in fragment
 * order (query tiles padded to 64 rows), which launch 2 reads back.
 * Packed, attention_grad_saved(g [b, s, h, d], qkv [b, s, 3h, d], saved):
 * the same launches reading and writing [b, s, ...] rows, dq, dk, dv into
 * [b, s, 3h, d].
 *
 * attention_kv(q, k, v, k_cache, v_cache, pos) (a decode block's prefill
 * and step), one launch, mlc_attn_kv: a block per query row of the chunk,
 * its warps splitting the keys, each warp 8 keys at a time with its lanes
 * splitting the head dim (up to 256); it also writes the chunk's row into
 * the caches.  Exact f32 arithmetic.
 *
 * The tiles were chosen on the H200 (bench/results/cuda-attention-2026-11-30.md);
 * -DMLC_ATTN_FWD_W/_MT/_BK and -DMLC_ATTN_BWD_W/_BQ build others, to compare.
 *
 * Blocks that ask for more than 48 KB of dynamic shared memory need the
 * function's CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES raised.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "codegen/cuda/cuda_cc.h"

/* The device code (cc_attention_prelude) is codegen/cuda/attention.cuh, embedded at build time. */

/* The forward's block: W warps of MT row tiles of 16 query rows, keys BK
 * at a time.  Causal blocks stay at 64 rows, which balances the triangle
 * better (H200, b8 h16 s1024 d128: 0.188 ms against 0.202 with 128). */
#ifndef MLC_ATTN_FWD_W
#define MLC_ATTN_FWD_W 4
#endif
#ifndef MLC_ATTN_FWD_MT
#define MLC_ATTN_FWD_MT 2
#endif
#ifndef MLC_ATTN_FWD_BK
#define MLC_ATTN_FWD_BK 32
#endif
/* Head dim 128 or 64: the wgmma forward on sm_90a (mlc_attn_fwd_wg: two
 * consumer warpgroups and a producer, persistent; its shared memory: q and
 * MLC_ATTN_WG_STAGES stages of k and v, 128 x D each, the stages' and q's
 * mbarriers, aligned to 1 KiB).  -DMLC_ATTN_FWD_WG=0 turns it off, to
 * compare. */
#ifndef MLC_ATTN_FWD_WG
#define MLC_ATTN_FWD_WG 1
#endif
#ifndef MLC_ATTN_WG_STAGES
#define MLC_ATTN_WG_STAGES 3
#endif
static uint32_t attn_wg_smem(int64_t d) { return (uint32_t)((1 + 2 * MLC_ATTN_WG_STAGES) * 256 * d + 16 * MLC_ATTN_WG_STAGES + 16 + 1024); }
typedef struct { int64_t w, mt, bk; } fwd_tile;
static fwd_tile fwd_tile_of(bool causal, int64_t d) {
  if (d > 128) return (fwd_tile){4, 1, 32}; /* a warp's 16 rows of o: d / 2 registers a thread */
  if (causal) return (fwd_tile){4, 1, 64};
  return (fwd_tile){MLC_ATTN_FWD_W, MLC_ATTN_FWD_MT, MLC_ATTN_FWD_BK};
}

static bool is16(int dt) { return dt == MLC_DT_BF16 || dt == MLC_DT_F16; }

/* Past head dim 128 the gradients sum dv in one launch and dk (and dq) in
 * another, the kernels' PART 1 and 2 (mlc_attn_bwd_tc, mlc_attn_bwd_kv_x);
 * else both in one, PART 0. */
static bool dkv_split(int64_t d) { return d > 128; }

/* f32 on the tensor cores: the TF32 products per product (3 or 1), or 0
 * where the SIMT kernels run (--f32-matmul ieee, or a head dim past the
 * kernels': d % 8 == 0 up to MLC_CUDA_ATTN_MAX_HEAD). */
static int f32_x(const cc *c, int dt, int64_t d, int64_t dv) {
  if (dt != MLC_DT_F32 || d != dv || d % 8 || d > MLC_CUDA_ATTN_MAX_HEAD) return 0;
  return cc_f32_products(c);
}

/* Split on load (the kernels' PS): up to this head dim, the tiles that a
 * block's four warps share are split into TF32 parts once, as they arrive,
 * in place, their residuals in one more tile; 0 splits every read. */
#ifndef MLC_ATTN_X_PRESPLIT
#define MLC_ATTN_X_PRESPLIT 64
#endif
static int f32_ps(int64_t d) { return d <= MLC_ATTN_X_PRESPLIT; }

/* The f32 tiles: keys (forward, dq) or query rows (dk, dv) a step, by head
 * dim; split on load takes three tiles of a step where two are loaded. */
static int64_t f32_step(int64_t d) { return d <= 64 ? (f32_ps(d) ? 32 : 64) : d <= 128 ? 32 : 16; }

/* The f32 gradient in one pass (mlc_attn_bwd_kv_x's DQ: dq by atomics
 * into an f32 accumulator, no second launch over the query rows), where
 * the statistics are saved and the tiles split on load; -DMLC_ATTN_X_DQ=0
 * keeps two passes, to compare. */
#ifndef MLC_ATTN_X_DQ
#define MLC_ATTN_X_DQ 1
#endif
static bool f32_one_pass(int64_t d) { return MLC_ATTN_X_DQ && f32_ps(d) && f32_step(d) == 32 && d % 16 == 0; }

/* The f32 forward (mlc_attn_fwd_x), one launch of 4 warps; args as fwd_tc's less dq. */
static void fwd_x(cc *c, int x, int64_t D, int64_t BH, int64_t SQ, int64_t SK, int causal, int mode, int64_t H,
                  const char *args, double scale) {
  int64_t W = 4, BK = f32_step(D), BM = 16 * W, LD = D + 4, ps = f32_ps(D);
  cc_begin(c, (uint64_t)(BH * cc_ceil_div(SQ, BM)), (uint32_t)(32 * W), (uint32_t)(4 * (BM + (4 + 2 * ps) * BK) * LD));
  cc_printf(c, "  mlc_attn_fwd_x<%d, %lld, %lld, %lld, %lld, %lld, %lld, %d, %d, %lld, %d>(%s, %s);\n", x, (long long)D,
            (long long)W, (long long)BK, (long long)BH, (long long)SQ, (long long)SK, causal, mode, (long long)H, (int)ps,
            args, cc_flit(c, scale * 1.4426950408889634));
  cc_end(c);
}

/* dq's f32 accumulator times scale, converted into out's dq (packed, H > 0:
 * its place in [b, s, 3H, D]); a grid-stride launch of at most 16 blocks an SM. */
static void dq_cvt(cc *c, const char *T, int64_t D, int64_t BH, int64_t S, int64_t H, const char *dq, const char *sc, bool fr) {
  int64_t N = BH * S * D, blocks = cc_ceil_div(N, 256 * (D % 4 ? 1 : 4)); /* 4 elements a thread where D % 4 == 0 */
  cc_begin(c, cc_cuda_grid(c, blocks, 16), 256, 0);
  cc_printf(c, "  mlc_attn_cvt<%s, %lld, %lld, %lld, %d>(%s, out, %lldull, %s);\n", T, (long long)D, (long long)S, (long long)H,
            (int)fr, dq, (long long)N, sc);
  cc_end(c);
}

/* attention_grad_saved's first launch (mlc_attn_prep): D = dO . o into
 * dsum, and dq's f32 accumulator of `rows` rows (at least BH * S) zeroed
 * where dq is not "(float *)0".  L lanes a row: D / 4 (4 elements each)
 * rounded down to a power of two, at most 32; 8 warps a block, 32 / L rows
 * a warp. */
static void prep(cc *c, const char *T, int64_t D, int64_t BH, int64_t S, int64_t H, const char *o, const char *dsum,
                 const char *dq, int64_t rows) {
  int64_t L = 32;
  if (D % 4 == 0)
    while (L > D / 4 && L > 1) L /= 2;
  cc_begin(c, (uint64_t)cc_ceil_div(rows, 8 * (32 / L)), 256, 0);
  cc_printf(c, "  mlc_attn_prep<%s, %lld, %lld, %lld, %lld, %lld, %lld>(in0, %s, %s, %s);\n", T, (long long)D,
            (long long)(BH * S), (long long)S, (long long)H, (long long)L, (long long)rows, o, dsum, dq);
  cc_end(c);
}

/* The f32 gradient's launches given lse2 and D: dk and dv, then dq; or,
 * given dq's zeroed f32 accumulator dqa, dk, dv and dq's sum in one pass,
 * then dq scaled into place (mlc_attn_cvt); dv and dk split as dkv_split says. */
static void bwd_x(cc *c, int x, int64_t D, int64_t BH, int64_t S, int causal, int64_t H, const char *args,
                  const char *lse2, const char *dsum, const char *dqa, double scale) {
  int64_t W = 4, B = 16 * W, ST = f32_step(D), LD = D + 4, ps = f32_ps(D), tiles = (2 * B + (4 + 2 * ps) * ST) * LD;
  const char *sc = cc_flit(c, scale), *sl2 = cc_flit(c, scale * 1.4426950408889634);
  for (int part = dkv_split(D); part <= 2 * dkv_split(D); part++) {
    cc_begin(c, (uint64_t)(BH * cc_ceil_div(S, B)), (uint32_t)(32 * W), (uint32_t)(4 * (tiles + 4 * ST + (dqa ? B * (ST + 4) : 0))));
    cc_printf(c, "  mlc_attn_bwd_kv_x<%d, %lld, %lld, %lld, %lld, %lld, %d, %lld, %d, %d, %d>(%s, out, %s, %s, %s, %s%s%s);\n", x,
              (long long)D, (long long)W, (long long)ST, (long long)BH, (long long)S, causal, (long long)H, (int)ps, dqa != NULL,
              part, args, lse2, dsum, sc, sl2, dqa ? ", " : "", dqa ? dqa : "");
    cc_end(c);
  }
  if (dqa) {
    dq_cvt(c, "float", D, BH, S, H, dqa, sc, false);
    return;
  }
  cc_begin(c, (uint64_t)(BH * cc_ceil_div(S, B)), (uint32_t)(32 * W), (uint32_t)(4 * tiles));
  cc_printf(c, "  mlc_attn_bwd_q_x<%d, %lld, %lld, %lld, %lld, %lld, %d, %lld, %d>(%s, out, %s, %s, %s, %s);\n", x,
            (long long)D, (long long)W, (long long)ST, (long long)BH, (long long)S, causal, (long long)H, (int)ps, args, lse2,
            dsum, sc, sl2);
  cc_end(c);
}

/* The tensor-core forward, one launch; args: q, k, v, out, dO, stats, dq.
 * H > 0: packed (heads H). */
static void fwd_tc(cc *c, const char *T, int64_t D, int64_t BH, int64_t SQ, int64_t SK, int causal, int mode, int64_t H,
                   const char *args, double scale) {
  if (MLC_ATTN_FWD_WG && (D == 128 || D == 64) && mode != 1) { /* mlc_attn_fwd_wg: 128 rows, 384 threads */
    /* its loads' tensor maps: q, k, v of [BH][S][D], or all three of packed [b][S][3 H D] */
    const uint32_t box[3] = {64, 128, 1};
    const char *tm[3];
    for (uint32_t i = 0; i < 3; i++) {
      int64_t s = i ? SK : SQ, cols = H ? 3 * H * D : D, z = H ? BH / H : BH;
      const uint64_t dim[3] = {(uint64_t)cols, (uint64_t)s, (uint64_t)z}, stride[2] = {(uint64_t)(2 * cols), (uint64_t)(2 * cols * s)};
      tm[i] = cc_tmap(c, H ? 0 : i, 0, 3, 2, dim, stride, box, 128);
    }
    int64_t items = BH * cc_ceil_div(SQ, 128);
    /* persistent: a block a multiprocessor (cc_cuda_sms), each taking one item of every gridDim.x */
    cc_begin(c, cc_cuda_grid(c, items, 1), 384, attn_wg_smem(D));
    cc_printf(c, "  mlc_attn_fwd_wg<%s, %lld, %d, %lld, %lld, %lld, %d, %d, %lld>(%s, %s, %s, %s, %s);\n", T, (long long)D,
              MLC_ATTN_WG_STAGES, (long long)BH, (long long)SQ, (long long)SK, causal, mode, (long long)H, args,
              cc_flit(c, scale * 1.4426950408889634), tm[0], tm[1], tm[2]);
    cc_end(c);
    return;
  }
  fwd_tile t = fwd_tile_of(causal, D);
  int64_t BM = 16 * t.mt * t.w, LD = D + 8;
  cc_begin(c, (uint64_t)(BH * cc_ceil_div(SQ, BM)), (uint32_t)(32 * t.w), (uint32_t)(2 * (BM * LD + 4 * t.bk * LD)));
  cc_printf(c, "  mlc_attn_fwd_tc<%s, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %d, %d, %lld>(%s, %s);\n", T, (long long)D,
            (long long)t.w, (long long)t.mt, (long long)t.bk, (long long)BH, (long long)SQ, (long long)SK, causal, mode,
            (long long)H, args, cc_flit(c, scale * 1.4426950408889634));
  cc_end(c);
}

#ifndef MLC_ATTN_BWD_W
#define MLC_ATTN_BWD_W 8
#endif
#ifndef MLC_ATTN_BWD_BQ
#define MLC_ATTN_BWD_BQ 64
#endif
/* Head dim 128 or 64: the gradient's main pass on wgmma (mlc_attn_bwd_wg;
 * its shared memory: k, v 128 x D, two dS^T 128 x 64, three buffers each
 * of q, dO 64 x D, lse2 and D, aligned to 1 KiB: 194.5 KiB at D 128).
 * -DMLC_ATTN_BWD_WG=0 turns it off, to compare. */
#ifndef MLC_ATTN_BWD_WG
#define MLC_ATTN_BWD_WG 1
#endif
/* dq's reduce-add in mlc_attn_bwd_wg (FR, with the statistics saved): each
 * warpgroup's 64 x 64 block of a query tile is staged in shared memory and
 * added into an f32 accumulator in fragment order by one bulk reduce-add
 * (16 KiB of shared memory a warpgroup that takes dq columns, D / 64 of
 * them), which mlc_attn_cvt reads back; -DMLC_ATTN_BWD_BULK=0 keeps the
 * red.global.add.v4.f32 of every thread into a row-major accumulator. */
#ifndef MLC_ATTN_BWD_BULK
#define MLC_ATTN_BWD_BULK 1
#endif
static int64_t attn_bwd_wg_smem(int64_t d, bool fr) {
  return 2 * 256 * d + 2 * 16384 + 6 * 128 * d + 1536 + 32 + 1024 + (fr ? 96 + d / 64 * 16384 : 0);
}
/* Whether bwd_tc's launch takes mlc_attn_bwd_wg at head dim d. */
static bool bwd_wg(int64_t d) { return MLC_ATTN_BWD_WG && (d == 128 || d == 64) && MLC_ATTN_BWD_W == 8 && MLC_ATTN_BWD_BQ == 64; }

/* Where a kernel's f32 vector lies, for its tensor map: `off` bytes into
 * input `arg` or into scratch (MLC_CUDA_TMAP_SCRATCH). */
typedef struct { uint32_t arg; uint64_t off; } at;

/* The tensor-core gradient's main pass and dq's conversion, given each
 * row's lse2 and D = dO . o (at lse_at and dsum_at too), and dq's zeroed
 * f32 accumulator.  A block: W warps of 16 keys, over BQ query rows at a
 * time.  args: g, q, k, v (inputs 0..3, or 0, 1 packed); H > 0: packed
 * (heads H). */
static void bwd_tc(cc *c, const char *T, int64_t D, int64_t BH, int64_t S, int causal, int64_t H, const char *args,
                   const char *lse2, const char *dsum, at lse_at, at dsum_at, const char *dq, double scale, bool fr) {
  int64_t W = MLC_ATTN_BWD_W, BQ = MLC_ATTN_BWD_BQ;
  /* a -D tile with too few columns per warp for dq's product; or split
   * (never wg), where 64 keys and 32 query rows a step keep the shared
   * memory under 141 KiB (D 256) */
  if ((D / (W / (BQ / 16))) % 16 || dkv_split(D)) W = 4, BQ = 32;
  int64_t LD = D + 8, BN = 16 * W;
  int64_t smem = 2 * (2 * BN * LD + 4 * BQ * LD + BN * (BQ + 8)) + 4 * 4 * BQ;
  const char *sc = cc_flit(c, scale);
  /* mlc_attn_bwd_wg shares mlc_attn_bwd_tc's launch at W = 8, BQ = 64 (its fallback off sm_90a) */
  bool wg = bwd_wg(D) && W == 8 && BQ == 64;
  fr = fr && wg;
  if (wg && smem < attn_bwd_wg_smem(D, fr)) smem = attn_bwd_wg_smem(D, fr);
  const char *tm[6];
  if (wg) { /* its loads' tensor maps: q, k, v, dO as [BH][S][D] (packed: [b][S][3 H D] and [b][S][H D]), lse2 and D flat */
    const uint32_t box[3] = {64, 64, 1};
    for (uint32_t i = 0; i < 4; i++) {
      int64_t cols = H ? (i ? 3 : 1) * H * D : D, z = H ? BH / H : BH;
      const uint64_t dim[3] = {(uint64_t)cols, (uint64_t)S, (uint64_t)z}, stride[2] = {(uint64_t)(2 * cols), (uint64_t)(2 * cols * S)};
      tm[(i + 3) % 4] = cc_tmap(c, H ? (i ? 1 : 0) : i, 0, 3, 2, dim, stride, box, 128); /* dO first: tm[3] */
    }
    const uint64_t flat[1] = {(uint64_t)(BH * S)};
    const uint32_t fbox[1] = {64};
    /* where S % 4 != 0 the kernel loads lse2 and D by cp.async, and D may
     * not start 16-byte aligned: the lse2 map stands in for D's */
    tm[4] = cc_tmap(c, lse_at.arg, lse_at.off, 1, 4, flat, NULL, fbox, 0);
    tm[5] = S % 4 ? tm[4] : cc_tmap(c, dsum_at.arg, dsum_at.off, 1, 4, flat, NULL, fbox, 0);
  }
  for (int part = dkv_split(D); part <= 2 * dkv_split(D); part++) {
    cc_begin(c, (uint64_t)(BH * cc_ceil_div(S, BN)), (uint32_t)(32 * W), (uint32_t)smem);
    if (wg)
      cc_printf(c, "  mlc_attn_bwd_wg<%s, %lld, %lld, %lld, %d, %lld, %d>(%s, out, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s);\n", T,
                (long long)D, (long long)BH, (long long)S, causal, (long long)H, (int)fr, args, lse2, dsum, dq, sc,
                cc_flit(c, scale * 1.4426950408889634), tm[0], tm[1], tm[2], tm[3], tm[4], tm[5]);
    else
      cc_printf(c, "  mlc_attn_bwd_tc<%s, %lld, %lld, %lld, %lld, %lld, %d, %lld, %d>(%s, out, %s, %s, %s, %s, %s);\n", T,
                (long long)D, (long long)W, (long long)BQ, (long long)BH, (long long)S, causal, (long long)H, part, args, lse2,
                dsum, dq, sc, cc_flit(c, scale * 1.4426950408889634));
    cc_end(c);
  }
  dq_cvt(c, T, D, BH, S, H, dq, sc, fr);
}

static bool emit_fwd(cc *c) {
  int causal = c->n->a.causal != 0;
  double scale = c->n->a.f;
  if (c->n->op == MLC_OP_ATTENTION_SAVE && c->n->nin == 1) { /* packed qkv [b, s, 3h, d] */
    const mlc_type *xt = cc_in(c, 0);
    const char *T = cc_stype(c, xt->dtype);
    int64_t H = xt->dim[2] / 3, BH = xt->dim[0] * H, S = xt->dim[1], D = xt->dim[3];
    int x = f32_x(c, xt->dtype, D, D);
    if (BH * S > INT32_MAX / 4 || S < 1 || D % (x ? 8 : 16) || D > MLC_CUDA_ATTN_MAX_HEAD || !(is16(xt->dtype) || x))
      return cc_fail(c, "attention_save of %lld x %lld rows is out of range for the CUDA kernel", (long long)BH, (long long)S);
    const char *args = cc_fmt(c, "in0, in0, in0, out, (const %s *)0, (float *)(out + %lld)", T, (long long)(BH * S * D));
    if (x) fwd_x(c, x, D, BH, S, S, causal, 2, H, args, scale);
    else fwd_tc(c, T, D, BH, S, S, causal, 2, H, cc_fmt(c, "%s, (float *)0", args), scale);
    return true;
  }
  const mlc_type *qt = cc_in(c, 0), *kt = cc_in(c, 1), *vt = cc_in(c, 2);
  const char *T = cc_stype(c, qt->dtype);
  int64_t BH = qt->dim[0] * qt->dim[1], SQ = qt->dim[2], SK = kt->dim[2], D = qt->dim[3], DV = vt->dim[3];
  if (BH * SQ > INT32_MAX / 4 || BH * SK > INT32_MAX / 4 || SK < 1)
    return cc_fail(c, "attention of q %lld x %lld rows and %lld keys is out of range for the CUDA kernel",
                   (long long)BH, (long long)SQ, (long long)SK);
  bool save = c->n->op == MLC_OP_ATTENTION_SAVE;
  if (is16(qt->dtype) && D == DV && D % 16 == 0 && D <= MLC_CUDA_ATTN_MAX_HEAD) {
    fwd_tc(c, T, D, BH, SQ, SK, causal, save ? 2 : 0, 0,
           save ? cc_fmt(c, "in0, in1, in2, out, (const %s *)0, (float *)(out + %lld), (float *)0", T, (long long)(BH * SQ * D))
                : cc_fmt(c, "in0, in1, in2, out, (const %s *)0, (float *)0, (float *)0", T),
           scale);
    return true;
  }
  int x = f32_x(c, qt->dtype, D, DV);
  if (x) {
    fwd_x(c, x, D, BH, SQ, SK, causal, save ? 2 : 0, 0,
          save ? cc_fmt(c, "in0, in1, in2, out, (const float *)0, (float *)(out + %lld)", (long long)(BH * SQ * D))
               : "in0, in1, in2, out, (const float *)0, (float *)0",
          scale);
    return true;
  }
  if (save) return cc_bug(c, "attention_save of %s is not a tensor-core shape (passes/attnsave.c should not have made it)", T);
  int64_t rows = BH * SQ;
  cc_begin(c, (uint64_t)(rows > 0 ? cc_ceil_div(rows, 4) : 1), 128, 0);
  cc_printf(c, "  mlc_attn_fwd_simt<%s, %lld, %lld, %lld, %lld, %lld, %d, 0>(in0, in1, in2, out, (const %s *)0, (float *)0, %s);\n",
            T, (long long)D, (long long)DV, (long long)BH, (long long)SQ, (long long)SK, causal, T, cc_flit(c, scale));
  cc_end(c);
  return true;
}

static bool emit_grad(cc *c) {
  bool packed = c->n->op == MLC_OP_ATTENTION_GRAD_SAVED && c->n->nin == 3; /* g [b, s, h, d], qkv [b, s, 3h, d], saved */
  const mlc_type *gt = cc_in(c, 0);
  const char *T = cc_stype(c, gt->dtype);
  int64_t H = packed ? gt->dim[2] : 0, BH = gt->dim[0] * (packed ? gt->dim[2] : gt->dim[1]),
          S = packed ? gt->dim[1] : gt->dim[2], D = gt->dim[3], N = BH * S * D;
  int causal = c->n->a.causal != 0;
  double scale = c->n->a.f;
  if (BH * S > INT32_MAX / 4 || S < 1)
    return cc_fail(c, "attention_grad of %lld x %lld rows is out of range for the CUDA kernel", (long long)BH, (long long)S);
  bool tc = is16(gt->dtype) && D % 32 == 0 && D <= MLC_CUDA_ATTN_MAX_HEAD;
  int x = f32_x(c, gt->dtype, D, D);
  if (x) {
    /* scratch: lse2 [BH*S] (unless saved) and D [BH*S]; in one pass
     * (saved only), dq's f32 accumulator [BH*S][D] before them */
    bool saved = c->n->op == MLC_OP_ATTENTION_GRAD_SAVED, one = saved && f32_one_pass(D);
    const char *sv = packed ? "in2" : "in4", *args = packed ? "in0, in1, in1, in1" : "in0, in1, in2, in3";
    const char *lse2 = saved ? cc_fmt(c, "(const float *)(%s + %lld)", sv, (long long)N) : "(const float *)scratch";
    const char *dsum = cc_fmt(c, "(float *)scratch + %lld", (long long)(saved ? (one ? N : 0) : BH * S));
    c->scratch = (uint64_t)((saved ? 4 : 8) * BH * S + (one ? 4 * N : 0));
    if (saved) {
      prep(c, "float", D, BH, S, H, sv, dsum, one ? "(float *)scratch" : "(float *)0", BH * S);
    } else {
      fwd_x(c, x, D, BH, S, S, causal, 1, 0, "in1, in2, in3, out, in0, (float *)scratch", scale);
    }
    bwd_x(c, x, D, BH, S, causal, H, args, lse2, dsum, one ? "(float *)scratch" : NULL, scale);
    return true;
  }
  if (c->n->op == MLC_OP_ATTENTION_GRAD_SAVED) {
    /* scratch: dq's f32 accumulator [BH*S][D] (FR: [BH][S rounded up to 64][D]
     * in fragment order), then D [BH*S]; the saved input holds the forward's
     * output and then lse2 [BH*S] */
    if (!tc) return cc_bug(c, "attention_grad_saved of %s is not a tensor-core shape", T);
    bool fr = MLC_ATTN_BWD_BULK && bwd_wg(D);
    int64_t rows = fr ? BH * cc_ceil_div(S, 64) * 64 : BH * S, A = 4 * rows * D;
    const char *sv = packed ? "in2" : "in4";
    c->scratch = (uint64_t)(A + 4 * BH * S);
    const char *dsum = cc_fmt(c, "(float *)(scratch + %lld)", (long long)A);
    prep(c, T, D, BH, S, H, sv, dsum, "(float *)scratch", rows);
    bwd_tc(c, T, D, BH, S, causal, H, packed ? "in0, in1, in1, in1" : "in0, in1, in2, in3",
           cc_fmt(c, "(const float *)(%s + %lld)", sv, (long long)N), dsum, (at){packed ? 2 : 4, (uint64_t)(2 * N)},
           (at){MLC_CUDA_TMAP_SCRATCH, (uint64_t)A}, "(float *)scratch", scale, fr);
    return true;
  }
  if (tc) {
    /* scratch: dq's f32 accumulator [BH*S][D], then lse2 [BH*S] and D [BH*S],
     * both from the forward run again (phase 0) */
    c->scratch = (uint64_t)(4 * N + 8 * BH * S);
    const char *st = cc_fmt(c, "(float *)(scratch + %lld)", (long long)(4 * N));
    fwd_tc(c, T, D, BH, S, S, causal, 1, 0, cc_fmt(c, "in1, in2, in3, out, in0, %s, (float *)scratch", st), scale);
    bwd_tc(c, T, D, BH, S, causal, 0, "in0, in1, in2, in3", st, cc_fmt(c, "%s + %lld", st, (long long)(BH * S)),
           (at){MLC_CUDA_TMAP_SCRATCH, (uint64_t)(4 * N)}, (at){MLC_CUDA_TMAP_SCRATCH, (uint64_t)(4 * (N + BH * S))},
           "(float *)scratch", scale, false);
    return true;
  }
  const char *sc = cc_flit(c, scale);
  c->scratch = (uint64_t)(8 * BH * S);
  uint64_t grid = (uint64_t)cc_ceil_div(BH * S, 4);
  cc_begin(c, grid, 128, 0);
  cc_printf(c, "  mlc_attn_fwd_simt<%s, %lld, %lld, %lld, %lld, %lld, %d, 1>(in1, in2, in3, out, in0, (float *)scratch, %s);\n",
            T, (long long)D, (long long)D, (long long)BH, (long long)S, (long long)S, causal, sc);
  cc_end(c);
  cc_begin(c, grid, 128, 0);
  cc_printf(c, "  mlc_attn_bwd_kv_simt<%s, %lld, %lld, %lld, %d>(in0, in1, in2, in3, out, (const float *)scratch, %s);\n", T,
            (long long)D, (long long)BH, (long long)S, causal, sc);
  cc_end(c);
  cc_begin(c, grid, 128, 0);
  cc_printf(c, "  mlc_attn_bwd_q_simt<%s, %lld, %lld, %lld, %d>(in0, in1, in2, in3, out, (const float *)scratch, %s);\n", T,
            (long long)D, (long long)BH, (long long)S, causal, sc);
  cc_end(c);
  return true;
}

/* attention_kv's one launch (mlc_attn_kv): a block of W warps per query
 * row of the chunk, each (batch, head) taking the caches' rows before pos
 * and the chunk's own rows after, so the copy into the caches and the
 * reads need no order between them.  W is 4, or 16 where the blocks are
 * fewer than two a multiprocessor (cc_cuda_sms: the H100's 132) and a lane holds at
 * most 4 elements (d <= 128), so a few blocks walk the keys in fewer
 * rounds.  Measured on the H100 (ncu, 2026-12-05, the MiniLLM's decode
 * step: 16 blocks, 17 keys): 8.8 us at 4 warps, 8.6 at 16; the time there
 * is latency (pos, then the rows, then the merge), not the keys' loop. */
#define MLC_ATTN_KV_W 4
#define MLC_ATTN_KV_W_FEW 16
bool cc_attn_kv_fits(int64_t d, char *why, size_t whyn) {
  if (d >= 1 && d <= 256) return true;
  snprintf(why, whyn, "attention_kv: heads of dim %lld; the cuda kernel takes up to 256", (long long)d);
  return false;
}

bool cc_emit_attention_kv(cc *c) {
  const mlc_type *qt = cc_in(c, 0), *ct = cc_in(c, 3);
  int64_t BH = qt->dim[0] * qt->dim[1], SQ = qt->dim[2], SK = ct->dim[2], D = qt->dim[3];
  char why[160];
  if (!cc_attn_kv_fits(D, why, sizeof why)) return cc_fail(c, "%s", why);
  if (BH * SQ > INT32_MAX || SK * D > INT32_MAX || SQ > SK)
    return cc_fail(c, "attention_kv of %lld x %lld rows over %lld cached is out of range for the CUDA kernel", (long long)BH,
                   (long long)SQ, (long long)SK);
  const char *T = cc_stype(c, qt->dtype);
  const int W = BH * SQ < 2 * cc_cuda_sms(c) && D <= 128 ? MLC_ATTN_KV_W_FEW : MLC_ATTN_KV_W;
  cc_begin(c, (uint64_t)(BH * SQ), 32 * W, 0);
  cc_printf(c, "  mlc_attn_kv<%s, %lld, %lld, %lld, %d>(in0, in1, in2, (%s *)in3, (%s *)in4, in5, out, %s);\n", T, (long long)D,
            (long long)SQ, (long long)SK, W, T, T, cc_flit(c, c->n->a.f * 1.4426950408889634));
  cc_end(c);
  return true;
}

bool cc_emit_attention(cc *c) {
  switch (c->n->op) {
  case MLC_OP_ATTENTION: case MLC_OP_ATTENTION_SAVE: return emit_fwd(c);
  case MLC_OP_ATTENTION_GRAD: case MLC_OP_ATTENTION_GRAD_SAVED: return emit_grad(c);
  default: return cc_bug(c, "cc_emit_attention: not an attention op");
  }
}
