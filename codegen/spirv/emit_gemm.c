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
 * validate it): a workgroup of four 32-wide subgroups (NVIDIA's width; the
 * extension is NVIDIA's) per 64 x 64 tile of C, each subgroup a 32 x 32
 * quadrant as 2 x 2 accumulators of 16 x 16 f32; A and B tiles 32 deep are
 * staged in shared memory as f16 (bf16 inputs are converted to f16, which
 * keeps 11 bits of mantissa but only f16's range), multiplied with
 * OpCooperativeMatrixMulAddNV (16 x 16 x 16, f16 x f16 + f32), and C goes
 * through shared memory to the (bounds-checked, converted) store.  Only for
 * bf16 and f16 GEMMs; f32 ones keep the portable kernel alone.
 *
 * Both kernels take an epilogue for fused programs (emit_fused.c): what is
 * stored for each accumulator.
 */
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

#define CT 64  /* cooperative-matrix tile: CT x CT of C per workgroup */
#define CK 32  /* depth of a staged tile */
#define CW 128 /* threads: four subgroups of 32, one CT/2 x CT/2 quadrant each */

static bool emit_coopmat(sv *s, const gemm_desc *d) {
  sb *b = s->b;
  sb_capability(b, SpvCapabilityCooperativeMatrixNV);
  sb_extension(b, "SPV_NV_cooperative_matrix");
  uint32_t h = sb_f16_type(b);
  uint32_t scope = sb_u32(b, SpvScopeSubgroup), sixteen = sb_u32(b, 16);
  uint32_t ta[4] = {h, scope, sixteen, sixteen}, tc[4] = {b->t_f32, scope, sixteen, sixteen};
  uint32_t mat_h = sb_type(b, SpvOpTypeCooperativeMatrixNV, 4, ta), mat_f = sb_type(b, SpvOpTypeCooperativeMatrixNV, 4, tc);
  /* a cooperative matrix constant has one constituent, for every element */
  uint32_t f0 = sb_f32(b, 0.f), zero = sb_constant(b, SpvOpConstantComposite, mat_f, 1, &f0);
  int64_t groups = batch_of(d) * sv_ceil_div(d->g.M, CT) * sv_ceil_div(d->g.N, CT);
  uint32_t As = sb_shared(b, h, CT * CK), Bs = sb_shared(b, h, CK * CT), Cs = sb_shared(b, b->t_f32, CT * CT);
  uint32_t grp = sv_begin(s, (uint64_t)groups, CW);
  sb_if guard;
  sb_if_begin(b, &guard, sb_ult(b, grp, sb_u32(b, (uint32_t)groups)), false);
  tile_pos t;
  tile_of(b, d, grp, CT, CT, &t);
  operand A, B;
  operands(s, d, &t, &A, &B);
  uint32_t lid = sb_lid(b), sg = sb_div(b, lid, sb_u32(b, 32));
  uint32_t qm = sb_mulc(b, sb_div(b, sg, sb_u32(b, 2)), CT / 2), qn = sb_mulc(b, sb_mod(b, sg, sb_u32(b, 2)), CT / 2);
  sb_lv acc[2][2];
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++) acc[i][j] = sb_local(b, mat_f, zero);
  uint32_t fals = sb_bool(b, false), ph = sb_ptr(b, SpvStorageClassWorkgroup, h), pf = sb_ptr(b, SpvStorageClassWorkgroup, b->t_f32);
  sb_loop l;
  uint32_t k0 = sb_for(b, &l, sb_u32(b, 0), sb_u32(b, (uint32_t)d->g.K), sb_u32(b, CK));
  /* A as [CT rows of m][CK] row-major, B as [CK][CT] row-major (k-major) */
  stage(b, &A, k0, lid, CW, CT, CK, As, h, false, true);
  stage(b, &B, k0, lid, CW, CT, CK, Bs, h, true, true);
  sb_barrier(b);
  for (int kk = 0; kk < CK; kk += 16) {
    uint32_t am[2], bm[2];
    for (int i = 0; i < 2; i++) {
      uint32_t pa[2] = {As, sb_addc(b, sb_mulc(b, qm, CK), (uint32_t)(i * 16 * CK + kk))};
      uint32_t la[3] = {sb_op(b, SpvOpAccessChain, ph, 2, pa), sb_u32(b, CK), fals};
      am[i] = sb_op(b, SpvOpCooperativeMatrixLoadNV, mat_h, 3, la);
      uint32_t pb[2] = {Bs, sb_addc(b, qn, (uint32_t)(kk * CT + i * 16))};
      uint32_t lb[3] = {sb_op(b, SpvOpAccessChain, ph, 2, pb), sb_u32(b, CT), fals};
      bm[i] = sb_op(b, SpvOpCooperativeMatrixLoadNV, mat_h, 3, lb);
    }
    for (int i = 0; i < 2; i++)
      for (int j = 0; j < 2; j++) {
        uint32_t ma[3] = {am[i], bm[j], sb_ld(b, acc[i][j])};
        sb_st(b, acc[i][j], sb_op(b, SpvOpCooperativeMatrixMulAddNV, mat_f, 3, ma));
      }
  }
  sb_barrier(b);
  sb_for_end(b, &l);
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++) {
      uint32_t pc[2] = {Cs, sb_add(b, sb_mulc(b, sb_addc(b, qm, (uint32_t)(i * 16)), CT), sb_addc(b, qn, (uint32_t)(j * 16)))};
      uint32_t st[4] = {sb_op(b, SpvOpAccessChain, pf, 2, pc), sb_ld(b, acc[i][j]), sb_u32(b, CT), fals};
      sb_op0(b, SpvOpCooperativeMatrixStoreNV, 4, st);
    }
  sb_barrier(b);
  int odt = d->odt;
  bool words = mlc_dtype_size((mlc_dtype)odt) == 2 && d->g.N % 2 == 0;
  int V = words ? 2 : 1;
  for (int q = 0; q < CT * CT / CW / V; q++) {
    uint32_t e = sb_mulc(b, sb_addc(b, lid, (uint32_t)(q * CW)), (uint32_t)V);
    uint32_t m = sb_add(b, t.m0, sb_div(b, e, sb_u32(b, CT))), n = sb_add(b, t.n0, sb_mod(b, e, sb_u32(b, CT)));
    sb_if w;
    sb_if_begin(b, &w, sb_land(b, sb_ult(b, m, sb_u32(b, (uint32_t)d->g.M)), sb_ult(b, n, sb_u32(b, (uint32_t)d->g.N))), false);
    uint32_t at = sb_add(b, t.oc, sb_add(b, sb_mulc(b, m, (uint32_t)d->g.N), n)), lo, hi, lo2, hi2;
    out_bits(s, d, at, sb_sh_ld(b, Cs, b->t_f32, e), &lo, &hi);
    if (words) { /* n even, N even: the pair is one word */
      out_bits(s, d, sb_addc(b, at, 1), sb_sh_ld(b, Cs, b->t_f32, sb_addc(b, e, 1)), &lo2, &hi2);
      sb_stw(b, sv_out(s), sb_shr(b, at, sb_u32(b, 1)), sb_or(b, lo, sb_shl(b, lo2, sb_u32(b, 16))));
    } else {
      sb_store_bits(b, sv_out(s), odt, at, lo, hi);
    }
    sb_if_end(b, &w);
  }
  sb_if_end(b, &guard);
  sv_end(s);
  s->coopmat = true;
  s->mnk[0] = s->mnk[1] = s->mnk[2] = 16;
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
  if (s->coopmat_variant) {
    if (dt == MLC_DT_F32) { /* no f16 rounding of f32 GEMMs: the portable kernel only */
      sb_entry_begin(s->b, "main0", 1, 1, (uint32_t[2]){0, 0});
      sb_entry_end(s->b);
      s->nd = 1;
      return true;
    }
    return emit_coopmat(s, &d);
  }
  return emit_tiled(s, &d);
}

bool sv_emit_gemm(sv *s) { return sv_emit_gemm_of(s, s->n->op, &s->n->type, NULL, NULL, 0); }
