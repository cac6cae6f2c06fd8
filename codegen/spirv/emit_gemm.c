/* GEMMs: matmul (a[.., m, k] @ b[.., k, n], batch dims broadcast),
 * matmul_tn (a[k, m]^T @ b[k, n], from the fuse pass) and linear
 * (x[.., k] @ w[n, k]^T), f32 accumulation, rounded once at the store.
 *
 * A node becomes a descriptor (as codegen/cuda/gemm_desc.c's):
 *   C[b][M,N] = A[b][M,K] B[b][K,N], C dense row-major;
 *   a_km: A stored [K,M] (matmul_tn) else [M,K]; b_nk: B stored [N,K]
 *   (linear's weight) else [K,N]; batch dims with element strides per
 *   operand (0 along a broadcast one).  A matmul whose B is the same for
 *   every batch and whose A is dense folds the batch into M.
 *
 * The portable kernel (Vulkan 1.2 compute, nothing else): a workgroup of
 * 16 x 16 threads per 64 x 64 tile of C (128 x 128 for large problems);
 * 64 x 16 tiles of A and 16 x 64 of B (128 x 16, 16 x 128) go through shared
 * memory (converted to f32 there, each loaded along its contiguous
 * dimension), each thread accumulates 4 x 4 (8 x 8) outputs with FMAs, in
 * columns paired so that a 16-bit C is stored a word at a time.
 *
 * The cooperative-matrix kernel (SPV_NV_cooperative_matrix: Debian 12's
 * SPIRV-Tools 2023.1 predates SPV_KHR_cooperative_matrix and could not
 * validate it), for f16 GEMMs (f32 and bf16 ones keep the portable kernel
 * alone: NV cooperative matrices multiply f16, and a bf16 operand staged as
 * f16 loses everything under f16's range, 2^-24: the softmax part of a
 * language model's head gradient, (p - onehot) / tokens, is about
 * 1 / (vocab * tokens), 3e-8 for 8003 x 4000, which NVIDIA's driver flushes,
 * and bf16 training drifted from PyTorch by 0.03 in 4 steps (issue 23)):
 * a workgroup of 32-wide subgroups (NVIDIA's width; the extension is
 * NVIDIA's) per tile of C, 128 x 256 for large problems (coop_tile_of), each
 * subgroup owning 64 x 64 of it as 4 x 4 accumulators of 16 x 16 f32.  Slices
 * of A and B 32 deep are read a 16-byte quad (8 f16) at a time and staged in
 * shared memory as f16, in lines along their contiguous dimension padded by
 * a quad (bf16 inputs are converted to f16, which keeps 11 bits of mantissa
 * but only f16's range); the next slice's quads are loaded into registers
 * before the current slice's products.  The subgroups load 16 x 16 pieces
 * with OpCooperativeMatrixLoadNV (row- or column-major, whichever the
 * operand's layout gives), multiply with OpCooperativeMatrixMulAddNV
 * (16 x 16 x 16, f16 x f16 + f32), and store each accumulator through a
 * scratch of their own in shared memory to the bounds-checked, converted
 * store.  Shapes that are not whole tiles or quads take checked loads.
 *
 * A linear of at most 4 rows (a decode step's) takes a matrix-vector kernel
 * instead (emit_gemv): a workgroup per output column, w's row read once.
 *
 * The kernels take an epilogue for fused programs (emit_fused.c): what is
 * stored for each accumulator.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/gemm_shape.h"
#include "codegen/spirv/emit.h"

typedef struct {
  mlc_gemm_shape g; /* codegen/gemm_shape.h */
  /* the store: dtype, and the epilogue (NULL: the accumulator rounded to odt) */
  int odt;
  sv_epi_fn epi;
  void *ctx;
} gemm_desc;

/* The bits to store for accumulator acc at flat output index at. */
static void out_bits(sv *s, const gemm_desc *d, uint32_t at, uint32_t acc, uint32_t *lo, uint32_t *hi) {
  if (d->epi) {
    d->epi(s, d->ctx, at, acc, lo, hi);
    return;
  }
  *lo = sb_f2bits_dt(s->b, d->odt, acc);
  *hi = 0;
}

static int64_t batch_of(const gemm_desc *d) { return mlc_gemm_batch(&d->g); }

typedef struct {
  uint32_t oa, ob, oc; /* element offsets of this batch's A, B, C */
  uint32_t m0, n0;     /* the tile's first row and column */
} tile_pos;

/* Decodes the flat group index into batch and tile, BMxBN tiles. */
static void tile_of(sb *b, const gemm_desc *d, uint32_t grp, int bm, int bn, tile_pos *t) {
  int64_t tm = sv_ceil_div(d->g.M, bm), tn = sv_ceil_div(d->g.N, bn);
  uint32_t tiles = sb_u32(b, (uint32_t)(tm * tn));
  uint32_t bi = sb_div(b, grp, tiles), r = sb_mod(b, grp, tiles);
  t->m0 = sb_mulc(b, sb_div(b, r, sb_u32(b, (uint32_t)tn)), (uint32_t)bm);
  t->n0 = sb_mulc(b, sb_mod(b, r, sb_u32(b, (uint32_t)tn)), (uint32_t)bn);
  t->oa = t->ob = sb_u32(b, 0);
  t->oc = sb_mulc(b, bi, (uint32_t)(d->g.M * d->g.N));
  uint32_t q = bi;
  for (int k = d->g.nb - 1; k >= 0; k--) {
    if (d->g.bdim[k] == 1) continue;
    uint32_t i = sb_mod(b, q, sb_u32(b, (uint32_t)d->g.bdim[k]));
    q = sb_div(b, q, sb_u32(b, (uint32_t)d->g.bdim[k]));
    if (d->g.bsa[k]) t->oa = sb_add(b, t->oa, sb_mulc(b, i, (uint32_t)d->g.bsa[k]));
    if (d->g.bsb[k]) t->ob = sb_add(b, t->ob, sb_mulc(b, i, (uint32_t)d->g.bsb[k]));
  }
}

/* Stages a tile of an operand into shared memory: `rows` x `depth`
 * elements (rows of M for A, of N for B), element (r, kk) at
 * sh[kk * rows + r] (kmajor) or sh[r * depth + kk].  The operand is
 * "row-contiguous" when its memory runs along k (A [M,K], B [N,K]):
 * consecutive threads then take consecutive kk.  f16: the shared array holds
 * f16 (converted from the f32 value). */
typedef struct {
  uint32_t bind;
  int dt;
  uint32_t off;      /* batch offset */
  bool along_k;      /* memory contiguous along k */
  int64_t ld;        /* elements between rows (along_k) or between k's */
  int64_t rows_total, K;
  uint32_t r0;       /* first row of the tile */
} operand;

static void stage(sb *b, const operand *o, uint32_t k0, uint32_t lid, uint32_t nthreads, int rows, int depth, uint32_t sh,
                  uint32_t sh_elem, bool kmajor, bool to_f16) {
  /* 16-bit operands whose contiguous dimension has an even length (and so
   * do the tile and the batch offsets): a word, two neighbours, per load */
  int64_t along = o->along_k ? o->K : o->rows_total;
  int V = mlc_dtype_size((mlc_dtype)o->dt) == 2 && along % 2 == 0 && o->ld % 2 == 0 ? 2 : 1;
  int wide = o->along_k ? depth : rows; /* the tile's extent along memory */
  int per = rows * depth / V / (int)nthreads;
  MLC_ASSERT(per * V * (int)nthreads == rows * depth && wide % V == 0);
  for (int q = 0; q < per; q++) {
    uint32_t e = sb_addc(b, lid, (uint32_t)q * nthreads), r, kk;
    /* e counts V-element units; the unit's first element is at (r, kk) */
    uint32_t u = sb_mulc(b, sb_mod(b, e, sb_u32(b, (uint32_t)(wide / V))), (uint32_t)V), line = sb_div(b, e, sb_u32(b, (uint32_t)(wide / V)));
    if (o->along_k) r = line, kk = u;
    else kk = line, r = u;
    uint32_t gr = sb_add(b, o->r0, r), gk = sb_add(b, k0, kk);
    /* with V = 2 the pair's second element is in range when the first is */
    uint32_t ok = sb_land(b, sb_ult(b, gr, sb_u32(b, (uint32_t)o->rows_total)), sb_ult(b, gk, sb_u32(b, (uint32_t)o->K)));
    uint32_t at = o->along_k ? sb_add(b, sb_mulc(b, gr, (uint32_t)o->ld), gk) : sb_add(b, sb_mulc(b, gk, (uint32_t)o->ld), gr);
    at = sb_select(b, b->t_u32, ok, sb_add(b, o->off, at), sb_u32(b, 0)); /* out of range: read index 0, count zero */
    uint32_t v[2];
    if (V == 1) {
      v[0] = sb_load_f(b, o->bind, o->dt, at);
    } else {
      uint32_t w = sb_ldw(b, o->bind, sb_shr(b, at, sb_u32(b, 1))), m16 = sb_u32(b, 0xffffu), h = sb_shr(b, w, sb_u32(b, 16));
      if (o->dt == MLC_DT_BF16) v[0] = sb_bf16tof(b, sb_and(b, w, m16)), v[1] = sb_bf16tof(b, h);
      else v[0] = sb_f16tof(b, sb_and(b, w, m16)), v[1] = sb_f16tof(b, h);
    }
    for (int k = 0; k < V; k++) {
      uint32_t x = sb_select(b, b->t_f32, ok, v[k], sb_f32(b, 0.f));
      if (to_f16) x = sb_op1(b, SpvOpFConvert, sh_elem, x);
      uint32_t rk = o->along_k ? r : sb_addc(b, r, (uint32_t)k), kk2 = o->along_k ? sb_addc(b, kk, (uint32_t)k) : kk;
      uint32_t si = kmajor ? sb_add(b, sb_mulc(b, kk2, (uint32_t)rows), rk) : sb_add(b, sb_mulc(b, rk, (uint32_t)depth), kk2);
      sb_sh_st(b, sh, sh_elem, si, x);
    }
  }
}

static void operands(sv *s, const gemm_desc *d, const tile_pos *t, operand *A, operand *B) {
  *A = (operand){0, sv_in(s, 0)->dtype, t->oa, !d->g.a_km, d->g.a_km ? d->g.M : d->g.K, d->g.M, d->g.K, t->m0};
  *B = (operand){1, sv_in(s, 1)->dtype, t->ob, d->g.b_nk, d->g.b_nk ? d->g.K : d->g.N, d->g.N, d->g.K, t->n0};
}

#define BK 16
#define GEMM_BIG_TILES 132 /* 128 x 128 tiles once there are this many (an H100/H200's SMs; only steers the choice) */

/* T x T outputs per thread, 16 x 16 threads: a (16 T) x (16 T) tile of C. */
static bool emit_tiled(sv *s, const gemm_desc *d) {
  sb *b = s->b;
  int T = batch_of(d) * sv_ceil_div(d->g.M, 128) * sv_ceil_div(d->g.N, 128) >= GEMM_BIG_TILES ? 8 : 4, BT = 16 * T;
  int64_t groups = batch_of(d) * sv_ceil_div(d->g.M, BT) * sv_ceil_div(d->g.N, BT);
  uint32_t As = sb_shared(b, b->t_f32, (uint32_t)(BK * BT)), Bs = sb_shared(b, b->t_f32, (uint32_t)(BK * BT));
  uint32_t grp = sv_begin(s, (uint64_t)groups, 256);
  sb_if guard;
  sb_if_begin(b, &guard, sb_ult(b, grp, sb_u32(b, (uint32_t)groups)), false);
  tile_pos t;
  tile_of(b, d, grp, BT, BT, &t);
  operand A, B;
  operands(s, d, &t, &A, &B);
  uint32_t lid = sb_lid(b), tx = sb_mod(b, lid, sb_u32(b, 16)), ty = sb_div(b, lid, sb_u32(b, 16));
  sb_lv acc[8][8];
  for (int i = 0; i < T; i++)
    for (int j = 0; j < T; j++) acc[i][j] = sb_local(b, b->t_f32, sb_f32(b, 0.f));
  sb_loop l;
  uint32_t k0 = sb_for(b, &l, sb_u32(b, 0), sb_u32(b, (uint32_t)d->g.K), sb_u32(b, BK));
  stage(b, &A, k0, lid, 256, BT, BK, As, b->t_f32, true, false);
  stage(b, &B, k0, lid, 256, BT, BK, Bs, b->t_f32, true, false);
  sb_barrier(b);
  /* thread (ty, tx) owns rows ty + 16 i and columns 2 tx + 32 (j / 2) + j % 2:
   * pairs of neighbours, so a 16-bit C is stored a word at a time */
  for (int kk = 0; kk < BK; kk++) {
    uint32_t av[8], bv[8];
    for (int i = 0; i < T; i++) av[i] = sb_sh_ld(b, As, b->t_f32, sb_addc(b, ty, (uint32_t)(kk * BT + 16 * i)));
    for (int j = 0; j < T; j++) bv[j] = sb_sh_ld(b, Bs, b->t_f32, sb_addc(b, sb_mulc(b, tx, 2), (uint32_t)(kk * BT + 32 * (j / 2) + j % 2)));
    for (int i = 0; i < T; i++)
      for (int j = 0; j < T; j++) sb_st(b, acc[i][j], sb_fma(b, av[i], bv[j], sb_ld(b, acc[i][j])));
  }
  sb_barrier(b);
  sb_for_end(b, &l);
  int odt = d->odt;
  bool words = mlc_dtype_size((mlc_dtype)odt) == 2 && d->g.N % 2 == 0;
  for (int i = 0; i < T; i++) {
    uint32_t m = sb_add(b, t.m0, sb_addc(b, ty, (uint32_t)(16 * i)));
    for (int j = 0; j < T; j += words ? 2 : 1) {
      uint32_t n = sb_add(b, t.n0, sb_addc(b, sb_mulc(b, tx, 2), (uint32_t)(32 * (j / 2) + j % 2)));
      sb_if w;
      sb_if_begin(b, &w, sb_land(b, sb_ult(b, m, sb_u32(b, (uint32_t)d->g.M)), sb_ult(b, n, sb_u32(b, (uint32_t)d->g.N))), false);
      uint32_t at = sb_add(b, t.oc, sb_add(b, sb_mulc(b, m, (uint32_t)d->g.N), n)), lo, hi, lo2, hi2;
      out_bits(s, d, at, sb_ld(b, acc[i][j]), &lo, &hi);
      if (words) { /* n is even and N too: n + 1 < N, and the pair is one word */
        out_bits(s, d, sb_addc(b, at, 1), sb_ld(b, acc[i][j + 1]), &lo2, &hi2);
        sb_stw(b, sv_out(s), sb_shr(b, at, sb_u32(b, 1)), sb_or(b, lo, sb_shl(b, lo2, sb_u32(b, 16))));
      } else {
        sb_store_bits(b, sv_out(s), odt, at, lo, hi);
      }
      sb_if_end(b, &w);
    }
  }
  sb_if_end(b, &guard);
  sv_end(s);
  return true;
}

/* ---- the matrix-vector kernel ---- */

#define GEMV_MAX_M 4     /* rows of A: a decode step's batch */
#define GEMV_THREADS 64

/* A linear of at most GEMV_MAX_M rows (x [m, k] @ w [n, k]^T, no batch):
 * the tiles above would spend all but m of their 64 or 128 rows. */
static bool gemv_fits(const gemm_desc *d) { return batch_of(d) == 1 && d->g.M <= GEMV_MAX_M && !d->g.a_km && d->g.b_nk; }

/* A workgroup of GEMV_THREADS per output column n: each thread sums every
 * GEMV_THREADS-th k of w's row n (a word, two neighbours, at a time for
 * 16-bit operands with an even k: w is read once, in order, across the
 * workgroup) against each row of x, the workgroup adds the threads' sums,
 * and thread 0 stores the m outputs through the epilogue. */
static bool emit_gemv(sv *s, const gemm_desc *d) {
  sb *b = s->b;
  int64_t M = d->g.M, N = d->g.N, K = d->g.K;
  int adt = sv_in(s, 0)->dtype, bdt = sv_in(s, 1)->dtype;
  bool pairs = adt == bdt && mlc_dtype_size((mlc_dtype)adt) == 2 && K % 2 == 0;
  uint32_t red = sb_shared(b, b->t_f32, GEMV_THREADS);
  uint32_t n = sv_begin(s, (uint64_t)N, GEMV_THREADS);
  sb_if guard;
  sb_if_begin(b, &guard, sb_ult(b, n, sb_u32(b, (uint32_t)N)), false); /* a whole workgroup in or out */
  sb_lv acc[GEMV_MAX_M];
  for (int m = 0; m < M; m++) acc[m] = sb_local(b, b->t_f32, sb_f32(b, 0.f));
  int64_t units = pairs ? K / 2 : K;
  sb_loop l;
  uint32_t u = sb_for(b, &l, sb_lid(b), sb_u32(b, (uint32_t)units), sb_u32(b, GEMV_THREADS));
  if (pairs) {
    uint32_t m16 = sb_u32(b, 0xffffu), s16 = sb_u32(b, 16);
    uint32_t (*half)(sb *, uint32_t) = adt == MLC_DT_BF16 ? sb_bf16tof : sb_f16tof;
    uint32_t wb = sb_ldw(b, 1, sb_add(b, sb_mulc(b, n, (uint32_t)units), u));
    uint32_t b0 = half(b, sb_and(b, wb, m16)), b1 = half(b, sb_shr(b, wb, s16));
    for (int m = 0; m < M; m++) {
      uint32_t wa = sb_ldw(b, 0, sb_addc(b, u, (uint32_t)(m * units)));
      uint32_t a0 = half(b, sb_and(b, wa, m16)), a1 = half(b, sb_shr(b, wa, s16));
      sb_st(b, acc[m], sb_fma(b, a1, b1, sb_fma(b, a0, b0, sb_ld(b, acc[m]))));
    }
  } else {
    uint32_t bv = sb_load_f(b, 1, bdt, sb_add(b, sb_mulc(b, n, (uint32_t)K), u));
    for (int m = 0; m < M; m++)
      sb_st(b, acc[m], sb_fma(b, sb_load_f(b, 0, adt, sb_addc(b, u, (uint32_t)(m * K))), bv, sb_ld(b, acc[m])));
  }
  sb_for_end(b, &l);
  for (int m = 0; m < M; m++) {
    uint32_t sum = sb_wg_reduce(b, red, sb_ld(b, acc[m]), false);
    sb_if first;
    sb_if_begin(b, &first, sb_ieq(b, sb_lid(b), sb_u32(b, 0)), false);
    uint32_t at = sb_addc(b, n, (uint32_t)(m * N)), lo, hi;
    out_bits(s, d, at, sum, &lo, &hi);
    sb_store_bits(b, sv_out(s), d->odt, at, lo, hi);
    sb_if_end(b, &first);
  }
  sb_if_end(b, &guard);
  sv_end(s);
  return true;
}

/* ---- the cooperative-matrix kernel ---- */

#define CQ 8       /* f16 elements in a quad, 16 bytes (a uvec4): the unit staged and addressed in shared memory */
#define CPAD 1     /* quads of padding per line of shared memory */
#define CSHARED 49152 /* bytes of shared memory a kernel may use (maxComputeSharedMemorySize on NVIDIA) */

typedef struct {
  int bm, bn; /* the workgroup's tile of C */
  int wm, wn; /* a subgroup's part of it, as (wm / 16) x (wn / 16) accumulators */
  int bk;     /* depth of a k-slice staged in shared memory: 16, 32 or 64 */
  int stages; /* 2: slice t + 1 is stored while slice t is read, one barrier a slice; 1: two */
} coop_tile;

/* An operand's k-slice in shared memory: `lines` lines of `lineq` quads
 * (CPAD of them padding, so that the 8 rows a cooperative load reads at a
 * time, 16 bytes each, fall in different banks).  A line runs along the
 * operand's contiguous dimension: k for A [M,K] and B [N,K] (rows lines of
 * bk), m or n else (bk lines of rows). */
typedef struct {
  operand o;
  int rows;      /* bm (A) or bn (B) */
  int bk;
  int lines, lineq;
  uint32_t base; /* its first quad in a stage */
  bool quad;     /* whole quads in range or out: one 16-byte load each */
  bool raw;      /* bf16 staged as its own bits (the KHR bf16 kernel), not converted to f16 */
  bool exact;    /* quads, and tiles that divide the operand: every quad read is in range */
} coop_operand;

static void coop_layout(coop_operand *c, int rows, int bk, uint32_t base) {
  c->rows = rows;
  c->bk = bk;
  c->lines = c->o.along_k ? rows : bk;
  c->lineq = (c->o.along_k ? bk : rows) / CQ + CPAD;
  c->base = base;
}

/* The quads of an operand's k-slice of `rows` rows, whichever its layout. */
static int coop_quads_most(int rows, int bk) {
  int along_k = rows * (bk / CQ + CPAD), across = bk * (rows / CQ + CPAD);
  return along_k > across ? along_k : across;
}

/* Whether a tile fits: 16 x 16 pieces, subgroups of 32 that stage whole
 * quads evenly (at most 16 each), at most 16 accumulators each, the stages
 * in CSHARED bytes. */
static bool coop_tile_ok(coop_tile t) {
  if (t.wm < 16 || t.wn < 16 || t.wm % 16 || t.wn % 16 || t.bm % t.wm || t.bn % t.wn) return false;
  if ((t.bk != 16 && t.bk != 32 && t.bk != 64) || (t.stages != 1 && t.stages != 2)) return false;
  int threads = 32 * (t.bm / t.wm) * (t.bn / t.wn);
  if (threads > 1024 || (t.wm / 16) * (t.wn / 16) > 16) return false;
  if ((t.bm * t.bk / CQ) % threads || (t.bn * t.bk / CQ) % threads) return false;
  if (t.bm * t.bk / CQ / threads > 16 || t.bn * t.bk / CQ / threads > 16) return false;
  return t.stages * (coop_quads_most(t.bm, t.bk) + coop_quads_most(t.bn, t.bk)) * 16 <= CSHARED;
}

/* The largest of these tiles that still makes GEMM_BIG_TILES workgroups
 * (the last if none does).  On the H200 (NVIDIA's driver, 4096^3 f16, see
 * bench/results/spirv-gemm-2026-11-30.md) each of them runs one workgroup
 * per SM, registers being the limit, so the most work per slice and barrier
 * is the fastest: 128 x 256 with subgroups of 64 x 64 and one stage of
 * 32, then 128 x 128 with one stage of 64.
 * --spirv-gemm-tile=BMxBNxWMxWN[xBK[xSTAGES]] overrides it (for
 * experiments: a tile that does not fit is ignored). */
static coop_tile coop_tile_of(const mlc_program *p, const gemm_desc *d) {
  static const coop_tile tiles[] = {{128, 256, 64, 64, 32, 1}, {128, 128, 64, 32, 64, 1}, {64, 64, 32, 32, 32, 2}};
  int n = (int)(sizeof tiles / sizeof *tiles), i = 0;
  while (i < n - 1 && batch_of(d) * sv_ceil_div(d->g.M, tiles[i].bm) * sv_ceil_div(d->g.N, tiles[i].bn) < GEMM_BIG_TILES) i++;
  coop_tile t = tiles[i], e = t;
  const int16_t *o = p->opts.spirv_gemm_tile;
  if (o[0]) {
    e = (coop_tile){o[0], o[1], o[2], o[3], o[4] ? o[4] : e.bk, o[5] ? o[5] : e.stages};
    if (coop_tile_ok(e)) t = e;
  }
  MLC_ASSERT(coop_tile_ok(t));
  return t;
}

/* Whether operand k (0: A, 1: B) can be read a quad at a time: 16-bit, and
 * every quad's first element a multiple of 8 (the contiguous extent, the
 * leading dimension and the batch strides are). */
static bool coop_quads(sv *s, const gemm_desc *d, const operand *o, int k) {
  int64_t along = o->along_k ? o->K : o->rows_total;
  if (mlc_dtype_size((mlc_dtype)sv_in(s, k)->dtype) != 2 || along % CQ || o->ld % CQ) return false;
  for (int i = 0; i < d->g.nb; i++)
    if ((k ? d->g.bsb[i] : d->g.bsa[i]) % CQ) return false;
  return true;
}

/* Quad u of the operand's k-slice at k0, as 8 f16 (a uvec4), or 8 bf16
 * when c->raw; elements out of range are zeros. */
static uint32_t coop_fetch(sb *b, const coop_operand *c, uint32_t k0, uint32_t u) {
  const operand *o = &c->o;
  uint32_t q4 = sb_uvec4_type(b), per = sb_u32(b, (uint32_t)((o->along_k ? c->bk : c->rows) / CQ));
  uint32_t line = sb_div(b, u, per), q = sb_mulc(b, sb_mod(b, u, per), CQ);
  uint32_t gr = sb_add(b, o->r0, o->along_k ? line : q), gk = sb_add(b, k0, o->along_k ? q : line);
  uint32_t rows = sb_u32(b, (uint32_t)o->rows_total), K = sb_u32(b, (uint32_t)o->K), w[4];
  if (c->exact) { /* no checks (k0 is at most K - bk here) */
    uint32_t at = o->along_k ? sb_add(b, sb_mulc(b, gr, (uint32_t)o->ld), gk) : sb_add(b, sb_mulc(b, gk, (uint32_t)o->ld), gr);
    uint32_t v = sb_ld4(b, o->bind, sb_shr(b, sb_add(b, o->off, at), sb_u32(b, 3)));
    if (o->dt != MLC_DT_BF16 || c->raw) return v;
    for (uint32_t i = 0; i < 4; i++) { /* a bf16 pair as an f16 pair */
      uint32_t a[2] = {v, i}, x = sb_op(b, SpvOpCompositeExtract, b->t_u32, 2, a);
      w[i] = sb_pack_h2(b, sb_bits2f(b, sb_shl(b, x, sb_u32(b, 16))), sb_bits2f(b, sb_and(b, x, sb_u32(b, 0xffff0000u))));
    }
    return sb_op(b, SpvOpCompositeConstruct, q4, 4, w);
  }
  if (c->quad) {
    uint32_t ok = sb_land(b, sb_ult(b, gr, rows), sb_ult(b, gk, K));
    uint32_t at = o->along_k ? sb_add(b, sb_mulc(b, gr, (uint32_t)o->ld), gk) : sb_add(b, sb_mulc(b, gk, (uint32_t)o->ld), gr);
    at = sb_shr(b, sb_add(b, o->off, at), sb_u32(b, 3));
    uint32_t v = sb_ld4(b, o->bind, sb_select(b, b->t_u32, ok, at, sb_u32(b, 0))); /* out of range: read quad 0, count zeros */
    for (uint32_t i = 0; i < 4; i++) {
      uint32_t a[2] = {v, i}, x = sb_op(b, SpvOpCompositeExtract, b->t_u32, 2, a);
      if (o->dt == MLC_DT_BF16 && !c->raw) /* a bf16 pair as an f16 pair */
        x = sb_pack_h2(b, sb_bits2f(b, sb_shl(b, x, sb_u32(b, 16))), sb_bits2f(b, sb_and(b, x, sb_u32(b, 0xffff0000u))));
      w[i] = sb_select(b, b->t_u32, ok, x, sb_u32(b, 0));
    }
    return sb_op(b, SpvOpCompositeConstruct, q4, 4, w);
  }
  uint32_t x[CQ];
  for (uint32_t e = 0; e < CQ; e++) { /* element by element, each in range or not */
    uint32_t r = o->along_k ? gr : sb_addc(b, gr, e), k = o->along_k ? sb_addc(b, gk, e) : gk;
    uint32_t ok = sb_land(b, sb_ult(b, r, rows), sb_ult(b, k, K));
    uint32_t at = o->along_k ? sb_add(b, sb_mulc(b, r, (uint32_t)o->ld), k) : sb_add(b, sb_mulc(b, k, (uint32_t)o->ld), r);
    at = sb_select(b, b->t_u32, ok, sb_add(b, o->off, at), sb_u32(b, 0));
    x[e] = sb_select(b, b->t_f32, ok, sb_load_f(b, o->bind, o->dt, at), sb_f32(b, 0.f));
  }
  for (int i = 0; i < 4; i++)
    if (c->raw) /* bf16 values are f32s with zero low halves: their bits are the upper ones */
      w[i] = sb_or(b, sb_shr(b, sb_f2bits(b, x[2 * i]), sb_u32(b, 16)), sb_and(b, sb_f2bits(b, x[2 * i + 1]), sb_u32(b, 0xffff0000u)));
    else
      w[i] = sb_pack_h2(b, x[2 * i], x[2 * i + 1]);
  return sb_op(b, SpvOpCompositeConstruct, q4, 4, w);
}

/* The quads this thread stages of an operand's k-slice at k0, into the
 * registers v[] (uvec4 locals), and their store into the stage whose first
 * quad is `stage`. */
static void coop_fetch_all(sb *b, const coop_operand *c, uint32_t k0, uint32_t lid, int threads, const sb_lv *v) {
  int n = c->rows * c->bk / CQ / threads;
  for (int i = 0; i < n; i++) sb_st(b, v[i], coop_fetch(b, c, k0, sb_addc(b, lid, (uint32_t)(i * threads))));
}

static void coop_store_all(sb *b, const coop_operand *c, uint32_t sh, uint32_t stage, uint32_t lid, int threads, const sb_lv *v) {
  int n = c->rows * c->bk / CQ / threads;
  uint32_t per = sb_u32(b, (uint32_t)((c->o.along_k ? c->bk : c->rows) / CQ));
  for (int i = 0; i < n; i++) {
    uint32_t u = sb_addc(b, lid, (uint32_t)(i * threads));
    uint32_t at = sb_add(b, sb_mulc(b, sb_div(b, u, per), (uint32_t)c->lineq), sb_mod(b, u, per));
    sb_sh_st(b, sh, sb_uvec4_type(b), sb_add(b, stage, sb_addc(b, at, c->base)), sb_ld(b, v[i]));
  }
}

/* 16-bit element e (counted from the start of sh) as f32, an f16 or (raw)
 * a bf16: the emulation's read (see emit_coopmat). */
static uint32_t sh_half(sb *b, uint32_t sh, uint32_t e, bool raw) {
  uint32_t quad = sb_sh_ld(b, sh, sb_uvec4_type(b), sb_shr(b, e, sb_u32(b, 3)));
  uint32_t a[2] = {quad, sb_and(b, sb_shr(b, e, sb_u32(b, 1)), sb_u32(b, 3))};
  uint32_t w = sb_op(b, SpvOpVectorExtractDynamic, b->t_u32, 2, a);
  uint32_t h = sb_and(b, sb_shr(b, w, sb_mulc(b, sb_and(b, e, sb_u32(b, 1)), 16)), sb_u32(b, 0xffff));
  return raw ? sb_bits2f(b, sb_shl(b, h, sb_u32(b, 16))) : sb_f16tof(b, h);
}

/* The cooperative-matrix kernel (see the top of the file): a workgroup of
 * (bm / wm) x (bn / wn) subgroups of 32 per bm x bn tile of C.  Each k-slice
 * of bk goes through shared memory; the quads of slice t + 1 are read from
 * memory into registers before slice t's products, so that the loads'
 * latency hides behind them, and written to shared memory after them: to
 * the other stage with two stages (one barrier a slice), else to the one
 * stage between two barriers.  Subgroup (sy, sx) owns rows
 * sy * wm.. and columns sx * wn.. of the tile; each accumulator goes through
 * a 16 x 16 scratch of the subgroup's own (in the stages' memory, free after
 * the loop) to the store, each lane storing 8 neighbours of a row.
 *
 * emulate: the same kernel with each lane's 8 outputs of every accumulator
 * computed by scalar FMAs from the same shared memory, no cooperative
 * matrices: a check of the staging and the store on a device without them
 * (--spirv-emulate-coopmat makes it the portable kernel of f16
 * GEMMs, which lavapipe runs). */
static bool emit_coopmat(sv *s, const gemm_desc *d, bool emulate, bool bf16) {
  sb *b = s->b;
  coop_tile ct = coop_tile_of(s->p, d);
  int sx_n = ct.bn / ct.wn, threads = 32 * (ct.bm / ct.wm) * sx_n, ti = ct.wm / 16, tj = ct.wn / 16;
  uint32_t q4 = sb_uvec4_type(b), mat_h = 0, mat_f = 0, zero = 0;
  if (!emulate) {
    sb_capability(b, SpvCapabilityCooperativeMatrixNV);
    sb_extension(b, "SPV_NV_cooperative_matrix");
    uint32_t h = sb_f16_type(b), scope = sb_u32(b, SpvScopeSubgroup), sixteen = sb_u32(b, 16);
    uint32_t ta[4] = {h, scope, sixteen, sixteen}, tc[4] = {b->t_f32, scope, sixteen, sixteen};
    mat_h = sb_type(b, SpvOpTypeCooperativeMatrixNV, 4, ta);
    mat_f = sb_type(b, SpvOpTypeCooperativeMatrixNV, 4, tc);
    /* a cooperative matrix constant has one constituent, for every element */
    uint32_t f0 = sb_f32(b, 0.f);
    zero = sb_constant(b, SpvOpConstantComposite, mat_f, 1, &f0);
  }
  coop_operand A = {.o.along_k = !d->g.a_km, .raw = bf16}, B = {.o.along_k = d->g.b_nk, .raw = bf16};
  coop_layout(&A, ct.bm, ct.bk, 0);
  coop_layout(&B, ct.bn, ct.bk, (uint32_t)(A.lines * A.lineq));
  uint32_t stage_q = B.base + (uint32_t)(B.lines * B.lineq), scratch_q = 16 * (16 / 4 + CPAD); /* a subgroup's 16 x 16 f32 */
  uint32_t total_q = (uint32_t)ct.stages * stage_q, scratch_all = (uint32_t)(threads / 32) * scratch_q;
  if (total_q < scratch_all) total_q = scratch_all;
  MLC_ASSERT(total_q * 16 <= CSHARED);
  int64_t groups = batch_of(d) * sv_ceil_div(d->g.M, ct.bm) * sv_ceil_div(d->g.N, ct.bn);
  uint32_t sh = sb_shared(b, q4, total_q); /* [stages][A's lines, B's lines] */
  uint32_t grp = sv_begin(s, (uint64_t)groups, (uint32_t)threads);
  sb_if guard;
  sb_if_begin(b, &guard, sb_ult(b, grp, sb_u32(b, (uint32_t)groups)), false);
  tile_pos t;
  tile_of(b, d, grp, ct.bm, ct.bn, &t);
  operands(s, d, &t, &A.o, &B.o);
  A.quad = coop_quads(s, d, &A.o, 0);
  B.quad = coop_quads(s, d, &B.o, 1);
  bool k_exact = d->g.K > 0 && d->g.K % ct.bk == 0;
  A.exact = A.quad && k_exact && d->g.M % ct.bm == 0;
  B.exact = B.quad && k_exact && d->g.N % ct.bn == 0;
  uint32_t lid = sb_lid(b), sg = sb_div(b, lid, sb_u32(b, 32)), lane = sb_mod(b, lid, sb_u32(b, 32));
  uint32_t wm0 = sb_mulc(b, sb_div(b, sg, sb_u32(b, (uint32_t)sx_n)), (uint32_t)ct.wm);
  uint32_t wn0 = sb_mulc(b, sb_mod(b, sg, sb_u32(b, (uint32_t)sx_n)), (uint32_t)ct.wn);
  uint32_t row = sb_shr(b, lane, sb_u32(b, 1)), col = sb_mulc(b, sb_and(b, lane, sb_u32(b, 1)), 8); /* a lane's 8 outputs */
  /* the subgroup's first quad of A and of B in a stage */
  uint32_t abase = A.o.along_k ? sb_mulc(b, wm0, (uint32_t)A.lineq) : sb_shr(b, wm0, sb_u32(b, 3));
  uint32_t bbase = sb_addc(b, B.o.along_k ? sb_mulc(b, wn0, (uint32_t)B.lineq) : sb_shr(b, wn0, sb_u32(b, 3)), B.base);
  sb_lv acc[16], eacc[16][8]; /* [ti * tj], ti * tj <= 16 (coop_tile_ok) */
  for (int i = 0; i < ti; i++)
    for (int j = 0; j < tj; j++) {
      if (!emulate) acc[i * tj + j] = sb_local(b, mat_f, zero);
      else
        for (int c = 0; c < 8; c++) eacc[i * tj + j][c] = sb_local(b, b->t_f32, sb_f32(b, 0.f));
    }
  sb_lv va[16], vb[16]; /* the quads in flight */
  for (int i = 0; i < 16; i++) va[i] = sb_local(b, q4, 0), vb[i] = sb_local(b, q4, 0);
  uint32_t st0 = sb_u32(b, 0), stq = sb_u32(b, stage_q), cur = st0, nxt = st0;
  coop_fetch_all(b, &A, st0, lid, threads, va);
  coop_fetch_all(b, &B, st0, lid, threads, vb);
  if (ct.stages == 2) {
    coop_store_all(b, &A, sh, st0, lid, threads, va);
    coop_store_all(b, &B, sh, st0, lid, threads, vb);
    sb_barrier(b);
  }
  sb_loop l;
  uint32_t k0 = sb_for(b, &l, st0, sb_u32(b, (uint32_t)d->g.K), sb_u32(b, (uint32_t)ct.bk));
  if (ct.stages == 2) { /* slice k0 / bk is in stage (k0 / bk) % 2 */
    uint32_t lg = ct.bk == 16 ? 4 : ct.bk == 32 ? 5 : 6;
    cur = sb_mulc(b, sb_and(b, sb_shr(b, k0, sb_u32(b, lg)), sb_u32(b, 1)), stage_q), nxt = sb_sub(b, stq, cur);
  } else { /* the last slice's products are done (the barrier at the loop's end) */
    coop_store_all(b, &A, sh, st0, lid, threads, va);
    coop_store_all(b, &B, sh, st0, lid, threads, vb);
    sb_barrier(b);
  }
  /* the next slice; after the last, zeros (or, when K is whole slices, the
   * last again: in range, so that exact operands need no checks), stored
   * and never read */
  uint32_t k1 = sb_addc(b, k0, (uint32_t)ct.bk);
  if (k_exact) {
    uint32_t mm[2] = {k1, sb_u32(b, (uint32_t)(d->g.K - ct.bk))};
    k1 = sb_glsl(b, GLSLstd450UMin, b->t_u32, 2, mm);
  }
  coop_fetch_all(b, &A, k1, lid, threads, va);
  coop_fetch_all(b, &B, k1, lid, threads, vb);
  if (!emulate) {
    uint32_t ab = sb_add(b, cur, abase), bb = sb_add(b, cur, bbase), pq = sb_ptr(b, SpvStorageClassWorkgroup, q4);
    for (int kk = 0; kk < ct.bk; kk += 16) {
      uint32_t am[16], bm[16];
      for (int i = 0; i < ti; i++) { /* A's rows wm0 + 16 i.., k kk.. */
        uint32_t off = A.o.along_k ? (uint32_t)(16 * i * A.lineq + kk / CQ) : (uint32_t)(kk * A.lineq + 16 * i / CQ);
        uint32_t pa[2] = {sh, sb_addc(b, ab, off)};
        uint32_t la[3] = {sb_op(b, SpvOpAccessChain, pq, 2, pa), sb_u32(b, (uint32_t)A.lineq), sb_bool(b, !A.o.along_k)};
        am[i] = sb_op(b, SpvOpCooperativeMatrixLoadNV, mat_h, 3, la);
      }
      for (int j = 0; j < tj; j++) { /* B's k kk.., columns wn0 + 16 j.. */
        uint32_t off = B.o.along_k ? (uint32_t)(16 * j * B.lineq + kk / CQ) : (uint32_t)(kk * B.lineq + 16 * j / CQ);
        uint32_t pb[2] = {sh, sb_addc(b, bb, off)};
        uint32_t lb[3] = {sb_op(b, SpvOpAccessChain, pq, 2, pb), sb_u32(b, (uint32_t)B.lineq), sb_bool(b, B.o.along_k)};
        bm[j] = sb_op(b, SpvOpCooperativeMatrixLoadNV, mat_h, 3, lb);
      }
      for (int i = 0; i < ti; i++)
        for (int j = 0; j < tj; j++) {
          uint32_t ma[3] = {am[i], bm[j], sb_ld(b, acc[i * tj + j])};
          sb_st(b, acc[i * tj + j], sb_op(b, SpvOpCooperativeMatrixMulAddNV, mat_f, 3, ma));
        }
    }
  } else {
    sb_loop lk;
    uint32_t kk = sb_for(b, &lk, st0, sb_u32(b, (uint32_t)ct.bk), sb_u32(b, 1)), qa = cur, qb = sb_addc(b, cur, B.base);
    for (int i = 0; i < ti; i++) {
      uint32_t m = sb_add(b, wm0, sb_addc(b, row, (uint32_t)(16 * i)));
      uint32_t ea = A.o.along_k ? sb_add(b, sb_mulc(b, sb_add(b, qa, sb_mulc(b, m, (uint32_t)A.lineq)), CQ), kk)
                                : sb_add(b, sb_mulc(b, sb_add(b, qa, sb_mulc(b, kk, (uint32_t)A.lineq)), CQ), m);
      uint32_t a = sh_half(b, sh, ea, bf16);
      for (int j = 0; j < tj; j++)
        for (int c = 0; c < 8; c++) {
          uint32_t n = sb_add(b, wn0, sb_addc(b, col, (uint32_t)(16 * j + c)));
          uint32_t eb = B.o.along_k ? sb_add(b, sb_mulc(b, sb_add(b, qb, sb_mulc(b, n, (uint32_t)B.lineq)), CQ), kk)
                                    : sb_add(b, sb_mulc(b, sb_add(b, qb, sb_mulc(b, kk, (uint32_t)B.lineq)), CQ), n);
          sb_st(b, eacc[i * tj + j][c], sb_fma(b, a, sh_half(b, sh, eb, bf16), sb_ld(b, eacc[i * tj + j][c])));
        }
    }
    sb_for_end(b, &lk);
  }
  if (ct.stages == 2) {
    coop_store_all(b, &A, sh, nxt, lid, threads, va);
    coop_store_all(b, &B, sh, nxt, lid, threads, vb);
  }
  sb_barrier(b); /* the products are done: the next stores, or the scratch below, may overwrite */
  sb_for_end(b, &l);
  /* the store: lane (row, col) takes outputs (row, col..col + 7) of each
   * accumulator, neighbours in pairs, so that a 16-bit C is stored a word at
   * a time */
  int odt = d->odt;
  bool words = mlc_dtype_size((mlc_dtype)odt) == 2 && d->g.N % 2 == 0;
  uint32_t scr = sb_mulc(b, sg, scratch_q), pq = sb_ptr(b, SpvStorageClassWorkgroup, q4);
  uint32_t M = sb_u32(b, (uint32_t)d->g.M), N = sb_u32(b, (uint32_t)d->g.N);
  for (int i = 0; i < ti; i++)
    for (int j = 0; j < tj; j++) {
      uint32_t v[8];
      if (!emulate) {
        uint32_t pc[2] = {sh, scr};
        uint32_t st[4] = {sb_op(b, SpvOpAccessChain, pq, 2, pc), sb_ld(b, acc[i * tj + j]), sb_u32(b, 16 / 4 + CPAD), sb_bool(b, false)};
        sb_op0(b, SpvOpCooperativeMatrixStoreNV, 4, st);
        sb_subgroup_barrier(b);
        uint32_t at = sb_add(b, scr, sb_add(b, sb_mulc(b, row, 16 / 4 + CPAD), sb_shr(b, col, sb_u32(b, 2))));
        for (int h = 0; h < 2; h++) {
          uint32_t quad = sb_sh_ld(b, sh, q4, sb_addc(b, at, (uint32_t)h));
          for (uint32_t c = 0; c < 4; c++) {
            uint32_t a[2] = {quad, c};
            v[4 * h + c] = sb_bits2f(b, sb_op(b, SpvOpCompositeExtract, b->t_u32, 2, a));
          }
        }
        sb_subgroup_barrier(b); /* all read before the next accumulator overwrites them */
      } else {
        for (int c = 0; c < 8; c++) v[c] = sb_ld(b, eacc[i * tj + j][c]);
      }
      uint32_t m = sb_add(b, t.m0, sb_add(b, wm0, sb_addc(b, row, (uint32_t)(16 * i))));
      uint32_t n = sb_add(b, t.n0, sb_add(b, wn0, sb_addc(b, col, (uint32_t)(16 * j))));
      uint32_t mok = sb_ult(b, m, M), rowat = sb_add(b, t.oc, sb_mulc(b, m, (uint32_t)d->g.N));
      for (int c = 0; c < 8; c += words ? 2 : 1) {
        uint32_t nc = sb_addc(b, n, (uint32_t)c), lo, hi, lo2, hi2;
        sb_if w;
        sb_if_begin(b, &w, sb_land(b, mok, sb_ult(b, nc, N)), false);
        uint32_t at = sb_add(b, rowat, nc);
        out_bits(s, d, at, v[c], &lo, &hi);
        if (words) { /* nc even, N even: nc + 1 < N, and the pair is one word */
          out_bits(s, d, sb_addc(b, at, 1), v[c + 1], &lo2, &hi2);
          sb_stw(b, sv_out(s), sb_shr(b, at, sb_u32(b, 1)), sb_or(b, lo, sb_shl(b, lo2, sb_u32(b, 16))));
        } else {
          sb_store_bits(b, sv_out(s), odt, at, lo, hi);
        }
        sb_if_end(b, &w);
      }
    }
  sb_if_end(b, &guard);
  sv_end(s);
  sv_coopmat16(s, emulate, bf16);
  return true;
}

bool sv_emit_gemm_of(sv *s, int op, const mlc_type *otype, sv_epi_fn epi, void *ctx, int epi_dt) {
  gemm_desc d;
  int dt = otype->dtype;
  if (!mlc_dtype_is_float((mlc_dtype)dt)) return sv_fail(s, "no GEMM for dtype %s", mlc_dtype_name((mlc_dtype)dt));
  memset(&d, 0, sizeof d);
  mlc_gemm_shape_of(op, sv_in(s, 0), sv_in(s, 1), otype, &d.g);
  d.odt = epi ? epi_dt : dt;
  d.epi = epi;
  d.ctx = ctx;
  for (int k = 0; k < 2; k++)
    if (!sv_check_size(s, mlc_type_numel(sv_in(s, k)))) return false;
  if (!sv_check_size(s, mlc_type_numel(otype))) return false;
  /* f16 operands, and bf16 ones in the KHR form (bf16 matrices, staged as
   * their own bits); f32 ones, and bf16 ones as f16, would lose precision
   * or range (see the top) */
  bool f16 = sv_in(s, 0)->dtype == MLC_DT_F16 && sv_in(s, 1)->dtype == MLC_DT_F16;
  bool bf16 = sv_in(s, 0)->dtype == MLC_DT_BF16 && sv_in(s, 1)->dtype == MLC_DT_BF16 && !s->p->opts.spirv_coopmat_nv;
  if (s->coopmat_variant) {
    if ((!f16 && !bf16) || gemv_fits(&d)) { /* the portable kernel (or the GEMV) only */
      sb_entry_begin(s->b, "main0", 1, 1, (uint32_t[2]){0, 0});
      sb_entry_end(s->b);
      s->nd = 1;
      return true;
    }
    return emit_coopmat(s, &d, false, bf16);
  }
  /* the check of the cooperative-matrix kernel's staging and store (emit_coopmat) */
  if (gemv_fits(&d)) return emit_gemv(s, &d);
  if ((f16 || bf16) && s->p->opts.spirv_emulate_coopmat) return emit_coopmat(s, &d, true, bf16);
  return emit_tiled(s, &d);
}

bool sv_emit_gemm(sv *s) { return sv_emit_gemm_of(s, s->n->op, &s->n->type, NULL, NULL, 0); }
