/* Attention, the cooperative-matrix forward and gradient of 16-bit heads (see attention.h and the overview in
 * emit_attention.c). */
#include <stdlib.h>

#include "codegen/spirv/attention.h"

/* ---- the cooperative-matrix forward (FlashAttention style) ----
 *
 * For 16-bit q, k, v with d == dv, d % 16 == 0, d <= 128, on devices with
 * SPV_NV_cooperative_matrix (the GEMM's 16 x 16 x 16, f16 x f16 + f32; see
 * emit_gemm.c's emit_coopmat): a workgroup of 4 subgroups of 32 per 64 query
 * rows of one (batch, head), subgroup sg owning rows 16 sg.. of them.
 *   - The Q tile is staged once in shared memory as f16 (bf16 converted, as
 *     the NV GEMM does: 11 bits of mantissa, f16's range; with
 *     --spirv-coopmat=khr, bf16 heads are staged as their own bits and the
 *     matrices are bf16 (A->raw, s->coop_bf16; P then bf16 too): no
 *     conversion, no range lost; in a probe on an H100, 2026-12-07, the
 *     kernel without the conversion ran 2.8x faster), and each
 *     subgroup keeps its 16 x d of it as d / 16 A operands in registers.
 *   - Per block of AK keys (64, or 32 where 64 would not fit), K and V are
 *     staged as f16, a 16-byte quad at a time, in lines of d padded by a
 *     quad; rows past sk are zeros.
 *   - S = Q K^T: AK / 16 accumulators (K as the column-major B operand), each
 *     stored through a 16 x 16 f32 scratch of the subgroup's own, from which
 *     lane (r, h) = (lane / 2, lane % 2) takes row r's 8 columns 8 h.. .
 *   - Online softmax in the lanes, base 2 (scores times scale log2 e): the
 *     row's block max from the two lanes of a row through shared memory; a
 *     lane keeps its row's reference max m and its part of l (the two parts
 *     are added at the end); masked scores (keys past sk; causal: key > row)
 *     are -inf.  m moves only when some row of the subgroup has grown past
 *     its m by more than ALAZY (the subgroup votes), so the rescale of O, an
 *     accumulator's trip through the scratch and back, is rare; in between
 *     P = exp2(s - m) <= 2^ALAZY, which f16 holds.
 *   - P (f16, 16 x AK) goes to the subgroup's shared memory, is loaded as
 *     AK / 16 A operands, and O += P V runs on d / 16 accumulators (V the
 *     row-major B operand) that live through the whole loop.
 *   - At the end O through the scratch to the lanes, O / l, rounded once, a
 *     word (two neighbours) at a time.
 * Shared memory: K and V blocks (the Q tile before the loop, in their
 * place), per subgroup P (its scratch in the same place: S is read before P
 * is written, O's rescale is done before P is written, P is in registers
 * before the next block's S is stored), and the row maxima.
 *
 * emulate (--spirv-emulate-coopmat, for lavapipe, as the GEMM's): the
 * same staging, softmax and vote, P in shared memory, masking and store,
 * with each lane's 8 values of every accumulator computed by scalar FMAs
 * from the shared memory (Q from a private copy of the lane's row; O kept
 * by the lanes), no cooperative matrices; the subgroup's synchronisation
 * and vote become the workgroup's (lavapipe's subgroups are narrower than
 * 32; a rescale more is no error).  Its shared memory limit is lavapipe's
 * 32 KiB, so d > 64 takes blocks of 32 keys there, 64 on NVIDIA (same code,
 * one constant).  What it does not check: the cooperative loads, stores and
 * products themselves and the scratch's layout (as for the GEMM).
 *
 * Not yet measured or checked on NVIDIA's driver, so off by default:
 * --spirv-attention=coopmat turns the variant on;
 * --spirv-attention-rescale=always rescales O at every block (for
 * measurements).  These are the program's options (mlc_options). */

#define AQ 64          /* query rows per workgroup */
#define ASG 4          /* subgroups of 32 per workgroup */
#define ACQ 8          /* f16 in a quad (uvec4) */
#define ASCR (16 * 5)  /* quads of a 16 x 16 f32 scratch: lines of 4 quads and a quad of padding */

typedef struct {
  int ak;        /* keys per block */
  uint32_t lq;   /* quads per line of Q, K, V (d / 8 + 1) */
  uint32_t pl;   /* quads per line of P (ak / 8 + 1) */
  uint32_t vq;   /* V's first quad */
  uint32_t sgq;  /* quads per subgroup (P, or the scratch) */
  uint32_t pq;   /* the first subgroup's first quad */
  uint32_t total;
} coop_attn;

static coop_attn coop_attn_of(int64_t D, int ak) {
  coop_attn c = {.ak = ak, .lq = (uint32_t)(D / ACQ + 1), .pl = (uint32_t)(ak / ACQ + 1)};
  c.vq = (uint32_t)ak * c.lq;
  c.pq = 2 * c.vq;
  c.sgq = 16 * c.pl > ASCR ? 16 * c.pl : ASCR;
  c.total = c.pq + ASG * c.sgq;
  MLC_ASSERT(AQ * c.lq <= c.pq); /* the Q tile fits where K and V go */
  return c;
}

/* The bytes of shared memory of the kernel: the quads and the row maxima. */
static uint32_t coop_attn_bytes(const coop_attn *c) { return 16 * c->total + 4 * 32 * ASG; }

/* 16-bit element e (counted from the start of the uvec4 array sh) as f32: f16, or bf16 when raw. */
static uint32_t attn_sh_half(const attn *A, uint32_t sh, uint32_t e) {
  sb *b = A->b;
  uint32_t quad = sb_sh_ld(b, sh, sb_uvec4_type(b), sb_shr(b, e, sb_u32(b, 3)));
  uint32_t a[2] = {quad, sb_and(b, sb_shr(b, e, sb_u32(b, 1)), sb_u32(b, 3))};
  uint32_t w = sb_op(b, SpvOpVectorExtractDynamic, b->t_u32, 2, a);
  uint32_t h = sb_and(b, sb_shr(b, w, sb_mulc(b, sb_and(b, e, sb_u32(b, 1)), 16)), sb_u32(b, 0xffff));
  return A->raw ? sb_bf16tof(b, h) : sb_f16tof(b, h);
}

/* Two weights (P or dS) as one word of the kernel's 16-bit matrices: f16,
 * or bf16 when its matrices are bf16 (A->raw), each rounded to nearest even. */
static uint32_t attn_pack2(const attn *A, uint32_t x, uint32_t y) {
  sb *b = A->b;
  if (!A->raw) return sb_pack_h2(b, x, y);
  return sb_or(b, sb_f2bf16(b, x), sb_shl(b, sb_f2bf16(b, y), sb_u32(b, 16)));
}

/* Rows r0.. r0 + nrows - 1 of a [.., D] 16-bit operand (binding bind, row 0
 * at element base, a multiple of 8) into shared sh as lines of lq quads
 * (f16, or bf16 bits when A->raw) from quad dst; rows at or past `limit` as
 * zeros.  All 32 ASG threads take part: each loads all its quads (bf16
 * pairs converted to f16 pairs unless A->raw), then stores them. */
static void coop_stage(attn *A, uint32_t lq, uint32_t sh, uint32_t bind, uint32_t base, uint32_t r0, int nrows,
                       uint32_t limit, uint32_t dst) {
  sb *b = A->b;
  uint32_t per = (uint32_t)(A->D / ACQ), total = (uint32_t)nrows * per, threads = 32 * ASG, q4 = sb_uvec4_type(b);
  uint32_t lid = sb_lid(b), qbase = sb_shr(b, base, sb_u32(b, 3)), zero = sb_u32(b, 0);
  uint32_t n = (total + threads - 1) / threads, q[64], to[64], in[64];
  MLC_ASSERT(n <= 64);
  for (uint32_t i = 0; i < n; i++) {
    uint32_t u = sb_addc(b, lid, i * threads);
    uint32_t line = sb_div(b, u, sb_u32(b, per)), qq = sb_mod(b, u, sb_u32(b, per)), r = sb_add(b, r0, line);
    uint32_t ok = sb_ult(b, r, limit);
    in[i] = total % threads ? sb_ult(b, u, sb_u32(b, total)) : 0; /* u past the last quad: nothing loaded or stored */
    if (in[i]) ok = sb_land(b, ok, in[i]);
    uint32_t at = sb_add(b, qbase, sb_add(b, sb_mulc(b, r, per), qq));
    uint32_t v = sb_ld4(b, bind, sb_select(b, b->t_u32, ok, at, zero)), w[4]; /* out of range: quad 0, zeros kept */
    for (uint32_t k = 0; k < 4; k++) {
      uint32_t a[2] = {v, k}, x = sb_op(b, SpvOpCompositeExtract, b->t_u32, 2, a);
      if (A->dt == MLC_DT_BF16 && !A->raw) /* a bf16 pair as an f16 pair */
        x = sb_pack_h2(b, sb_bits2f(b, sb_shl(b, x, sb_u32(b, 16))), sb_bits2f(b, sb_and(b, x, sb_u32(b, 0xffff0000u))));
      w[k] = sb_select(b, b->t_u32, ok, x, zero);
    }
    q[i] = sb_op(b, SpvOpCompositeConstruct, q4, 4, w);
    to[i] = sb_add(b, sb_addc(b, sb_mulc(b, line, lq), dst), qq);
  }
  for (uint32_t i = 0; i < n; i++) {
    sb_if g;
    if (in[i]) sb_if_begin(b, &g, in[i], false);
    sb_sh_st(b, sh, q4, to[i], q[i]);
    if (in[i]) sb_if_end(b, &g);
  }
}

typedef struct {
  sb *b;
  bool emulate;
  uint32_t sh, mat_h, mat_f, zero, pq;
} coop_ctx;

/* The context of a kernel with `quads` uvec4 of shared memory: the
 * matrix types (f16 operands, f32 accumulators) and their zero, unless
 * emulating. */
static coop_ctx coop_ctx_of(sb *b, bool emulate, uint32_t quads) {
  coop_ctx k = {.b = b, .emulate = emulate};
  uint32_t q4 = sb_uvec4_type(b);
  if (!emulate) {
    sb_capability(b, SpvCapabilityCooperativeMatrixNV);
    sb_extension(b, "SPV_NV_cooperative_matrix");
    uint32_t h = sb_f16_type(b), scope = sb_u32(b, SpvScopeSubgroup), sixteen = sb_u32(b, 16);
    uint32_t ta[4] = {h, scope, sixteen, sixteen}, tc[4] = {b->t_f32, scope, sixteen, sixteen};
    k.mat_h = sb_type(b, SpvOpTypeCooperativeMatrixNV, 4, ta);
    k.mat_f = sb_type(b, SpvOpTypeCooperativeMatrixNV, 4, tc);
    uint32_t f0 = sb_f32(b, 0.f);
    k.zero = sb_constant(b, SpvOpConstantComposite, k.mat_f, 1, &f0);
  }
  k.pq = sb_ptr(b, SpvStorageClassWorkgroup, q4);
  k.sh = sb_shared(b, q4, quads);
  return k;
}

/* The start of a kernel of `groups` workgroups, nt of 64 rows to a (batch,
 * head): those past the end skip the body (sb_if_end(b, &L->guard) closes
 * it); bh and row0 are the workgroup's (batch * head) and first row, sg the
 * lane's subgroup, r its row of the subgroup's 16 and hf its half of it
 * (columns col .. col + 7). */
typedef struct {
  sb_if guard;
  uint32_t bh, row0, lid, sg, lane, r, hf, col;
} coop_lanes;

static void coop_lanes_begin(attn *A, int64_t groups, int64_t nt, coop_lanes *L) {
  sb *b = A->b;
  uint32_t grp = sv_begin(A->s, (uint64_t)groups, 32 * ASG);
  sb_if_begin(b, &L->guard, sb_ult(b, grp, sb_u32(b, (uint32_t)groups)), false);
  L->bh = sb_div(b, grp, sb_u32(b, (uint32_t)nt));
  L->row0 = sb_mulc(b, sb_mod(b, grp, sb_u32(b, (uint32_t)nt)), AQ);
  L->lid = sb_lid(b), L->sg = sb_shr(b, L->lid, sb_u32(b, 5)), L->lane = sb_and(b, L->lid, sb_u32(b, 31));
  L->r = sb_shr(b, L->lane, sb_u32(b, 1)), L->hf = sb_and(b, L->lane, sb_u32(b, 1)), L->col = sb_mulc(b, L->hf, 8);
}

/* The synchronisation among a subgroup's lanes (the workgroup's when
 * emulating: the "subgroup" of 32 is not lavapipe's). */
static void csync(const coop_ctx *k) {
  if (k->emulate) sb_barrier(k->b);
  else sb_subgroup_barrier(k->b);
}

/* A 16 x 16 f16 matrix from shared quad q (a uniform id), lines `stride`
 * quads apart, column-major or not. */
static uint32_t cload(const coop_ctx *k, uint32_t q, uint32_t stride, bool colmajor) {
  sb *b = k->b;
  uint32_t pa[2] = {k->sh, q};
  uint32_t la[3] = {sb_op(b, SpvOpAccessChain, k->pq, 2, pa), sb_u32(b, stride), sb_bool(b, colmajor)};
  return sb_op(b, SpvOpCooperativeMatrixLoadNV, k->mat_h, 3, la);
}

/* Accumulator acc through the scratch at quad scr to the lane: row r's
 * columns col..col + 7 (at = scr + r * 5 + col / 4, the lane's first quad). */
static void cthrough(const coop_ctx *k, uint32_t acc, uint32_t scr, uint32_t at, uint32_t *v) {
  sb *b = k->b;
  uint32_t pc[2] = {k->sh, scr};
  uint32_t st[4] = {sb_op(b, SpvOpAccessChain, k->pq, 2, pc), acc, sb_u32(b, 5), sb_bool(b, false)};
  sb_op0(b, SpvOpCooperativeMatrixStoreNV, 4, st);
  csync(k);
  for (uint32_t h = 0; h < 2; h++) {
    uint32_t quad = sb_sh_ld(b, k->sh, sb_uvec4_type(b), sb_addc(b, at, h));
    for (uint32_t c = 0; c < 4; c++) {
      uint32_t a[2] = {quad, c};
      v[4 * h + c] = sb_bits2f(b, sb_op(b, SpvOpCompositeExtract, b->t_u32, 2, a));
    }
  }
  csync(k); /* read before the next accumulator (or P) overwrites it */
}

/* Stores 8 values v[e] * f at output element `at` + e (`at` even; pairs as
 * one word for 16-bit outputs). */
static void store8(attn *A, uint32_t at, const uint32_t *v, uint32_t f) {
  sv *s = A->s;
  sb *b = A->b;
  int odt = s->n->type.dtype;
  for (int e = 0; e < 8; e += 2) {
    uint32_t x = sb_addc(b, at, (uint32_t)e), y = sb_fmul(b, v[e], f), y2 = sb_fmul(b, v[e + 1], f);
    if (mlc_dtype_size((mlc_dtype)odt) == 2) {
      sb_stw(b, sv_out(s), sb_shr(b, x, sb_u32(b, 1)),
             sb_or(b, sb_f2bits_dt(b, odt, y), sb_shl(b, sb_f2bits_dt(b, odt, y2), sb_u32(b, 16))));
    } else {
      sb_store_f(b, sv_out(s), odt, x, y);
      sb_store_f(b, sv_out(s), odt, sb_addc(b, x, 1), y2);
    }
  }
}

#define ALAZY 8.f /* the rescale is skipped while no row's max grew past its reference by more (base 2): P <= 2^8 */

/* The forward's blocks of keys: 32 (on an H100, KHR, bf16 matrices, blocks
 * of 64 took 1.43x as long at d = 128, at 255 registers a thread, and 1.56x
 * at d = 64 in short runs: bench/results/s34-2026-12-07.md), or 64
 * (--spirv-attention-keys, for measuring) where they fit (NVIDIA's 48 KiB,
 * lavapipe's 32). */
static coop_attn fwd_blocks(const attn *A, bool emulate) {
  uint32_t limit = emulate ? 32768u : 49152u;
  int want = A->s->p->opts.spirv_attention_keys;
  coop_attn c = coop_attn_of(A->D, want ? want : 32);
  if (coop_attn_bytes(&c) + (emulate ? 512 : 0) > limit) c = coop_attn_of(A->D, 32);
  MLC_ASSERT(coop_attn_bytes(&c) + (emulate ? 512 : 0) <= limit);
  return c;
}

/* The forward as one dispatch, in blocks c, on the shared memory of k (at
 * least c.total quads).  stats (attention_grad's dispatch 0: g, q, k, v at
 * bindings 0..3): instead of the output, each row's L = m + ln l and
 * D = dO . O (O unrounded) into the scratch [L | D], as the tiled kernel's
 * dispatch 0 gives them. */
static void fwd_coop(attn *A, bool emulate, bool stats, const coop_attn *cp, const coop_ctx *kp) {
  sv *s = A->s;
  sb *b = A->b;
  int64_t D = A->D, nt = sv_ceil_div(A->SQ, AQ), groups = A->BH * nt;
  coop_attn c = *cp;
  coop_ctx k = *kp;                                         /* [K | V (Q first)] [ASG][P or scratch] */
  uint32_t qb = stats ? 1 : 0;                              /* q's binding; k and v follow */
  int ak = c.ak, nd = (int)(D / 16), nk = ak / 16;
  bool lazy = !s->p->opts.spirv_rescale_always; /* --spirv-attention-rescale=always: O at every block (for measurements) */
  uint32_t q4 = sb_uvec4_type(b);
  uint32_t mx = sb_shared(b, b->t_f32, 32 * ASG);           /* [ASG * 32]: a lane's row max, then its l */
  uint32_t red = emulate ? sb_shared(b, b->t_f32, 32 * ASG) : 0; /* [ASG * 32]: the emulation's vote */
  coop_lanes wg;
  coop_lanes_begin(A, groups, nt, &wg);
  uint32_t bh = wg.bh, q0 = wg.row0, lid = wg.lid, sg = wg.sg, r = wg.r, hf = wg.hf, col = wg.col;
  uint32_t SQ = sb_u32(b, (uint32_t)A->SQ), SK = sb_u32(b, (uint32_t)A->SK), st0 = sb_u32(b, 0);
  uint32_t qi = sb_add(b, q0, sb_add(b, sb_mulc(b, sg, 16), r)); /* the lane's query row */
  uint32_t scr = sb_addc(b, sb_mulc(b, sg, c.sgq), c.pq);      /* the subgroup's P and scratch */
  uint32_t lat = sb_add(b, scr, sb_add(b, sb_mulc(b, r, 5), sb_shr(b, col, sb_u32(b, 2))));
  uint32_t kvbase = sb_mulc(b, bh, (uint32_t)(A->SK * D));
  uint32_t partner = sb_op2(b, SpvOpBitwiseXor, b->t_u32, lid, sb_u32(b, 1));

  /* the Q tile, into registers */
  coop_stage(A, c.lq, k.sh, qb, sb_mulc(b, bh, (uint32_t)(A->SQ * D)), q0, AQ, SQ, 0);
  sb_barrier(b);
  uint32_t qm[8];
  sb_lv qv = {0};
  uint32_t qline = sb_mulc(b, sb_mulc(b, sg, 16), c.lq); /* the subgroup's first line of Q */
  if (!emulate) {
    for (int t = 0; t < nd; t++) qm[t] = cload(&k, sb_addc(b, qline, (uint32_t)(2 * t)), c.lq, false);
  } else {
    qv = sb_local_array(b, b->t_f32, (uint32_t)D);
    uint32_t e0 = sb_mulc(b, sb_add(b, qline, sb_mulc(b, r, c.lq)), ACQ);
    sb_loop l;
    uint32_t d = sb_for(b, &l, st0, sb_u32(b, (uint32_t)D), sb_u32(b, 1));
    sb_arr_st(b, qv, d, attn_sh_half(A, k.sh, sb_add(b, e0, d)));
    sb_for_end(b, &l);
  }
  sb_barrier(b); /* the Q tile is read: K and V may overwrite it */

  /* O: d / 16 accumulators (emulating: the lane's 8 values of each) */
  sb_lv oacc[8], o[8][8], m = sb_local(b, b->t_f32, sb_f32(b, -__builtin_inff())), lsum = sb_local(b, b->t_f32, sb_f32(b, 0.f));
  for (int j = 0; j < nd; j++) {
    if (!emulate) oacc[j] = sb_local(b, k.mat_f, k.zero);
    else
      for (int e = 0; e < 8; e++) o[j][e] = sb_local(b, b->t_f32, sb_f32(b, 0.f));
  }
  uint32_t kend = SK;
  if (A->causal) { /* keys up to the tile's last row */
    uint32_t a[2] = {sb_addc(b, q0, AQ), SQ}, last = sb_glsl(b, GLSLstd450UMin, b->t_u32, 2, a), c2[2] = {last, SK};
    kend = sb_glsl(b, GLSLstd450UMin, b->t_u32, 2, c2);
  }
  sb_loop kl;
  uint32_t k0 = sb_for(b, &kl, st0, kend, sb_u32(b, (uint32_t)ak));
  coop_stage(A, c.lq, k.sh, qb + 1, kvbase, k0, ak, SK, 0);
  coop_stage(A, c.lq, k.sh, qb + 2, kvbase, k0, ak, SK, c.vq);
  sb_barrier(b);

  /* S: the lane's 8 scores of each 16 keys, scaled to base 2, masked */
  uint32_t sc[4][8], ninf = sb_f32(b, -__builtin_inff()), scale2 = sb_f32(b, A->scale * 1.4426950408889634f);
  uint32_t bmax = ninf;
  for (int jb = 0; jb < nk; jb++) {
    uint32_t v[8];
    if (!emulate) {
      uint32_t acc = k.zero;
      for (int t = 0; t < nd; t++) { /* K's lines 16 jb.., d 16 t..: K^T's 16 x 16 piece, column-major */
        uint32_t kb = cload(&k, sb_u32(b, (uint32_t)(16 * jb) * c.lq + (uint32_t)(2 * t)), c.lq, true);
        uint32_t ma[3] = {qm[t], kb, acc};
        acc = sb_op(b, SpvOpCooperativeMatrixMulAddNV, k.mat_f, 3, ma);
      }
      cthrough(&k, acc, scr, lat, v);
    } else { /* one d an iteration, the lane's 8 keys at once (lavapipe's loop limiter: see the gradient's emulation) */
      sb_lv a[8];
      for (int e = 0; e < 8; e++) a[e] = sb_local(b, b->t_f32, sb_f32(b, 0.f));
      uint32_t e0 = sb_mulc(b, sb_mulc(b, sb_add(b, col, sb_u32(b, (uint32_t)(16 * jb))), c.lq), ACQ);
      sb_loop l;
      uint32_t d = sb_for(b, &l, st0, sb_u32(b, (uint32_t)D), sb_u32(b, 1)), qd = sb_arr_ld(b, qv, d);
      for (int e = 0; e < 8; e++)
        sb_st(b, a[e], sb_fma(b, qd, attn_sh_half(A, k.sh, sb_add(b, sb_addc(b, e0, (uint32_t)e * c.lq * ACQ), d)), sb_ld(b, a[e])));
      sb_for_end(b, &l);
      for (int e = 0; e < 8; e++) v[e] = sb_ld(b, a[e]);
    }
    for (int e = 0; e < 8; e++) {
      uint32_t key = sb_add(b, k0, sb_add(b, col, sb_u32(b, (uint32_t)(16 * jb + e)))), vis = sb_ult(b, key, SK);
      if (A->causal) vis = sb_land(b, vis, sb_op2(b, SpvOpULessThanEqual, b->t_bool, key, qi));
      sc[jb][e] = sb_select(b, b->t_f32, vis, sb_fmul(b, v[e], scale2), ninf);
      bmax = sb_fmax(b, bmax, sc[jb][e]);
    }
  }
  /* the row's max: this lane's and its neighbour's (lane ^ 1) */
  sb_sh_st(b, mx, b->t_f32, lid, bmax);
  csync(&k);
  bmax = sb_fmax(b, bmax, sb_sh_ld(b, mx, b->t_f32, partner));
  /* The reference max m moves to the row's max when, for some row of the
   * subgroup, that grew past m by more than ALAZY (then O and l are
   * rescaled by exp2(m_old - m_new)); else m stays and P <= 2^ALAZY (f16
   * holds it).  Rows with nothing visible yet keep m = -inf and use 0 in its
   * place, so that no inf - inf appears. */
  uint32_t mo = sb_ld(b, m), mn = sb_fmax(b, mo, bmax), re = sb_bool(b, true);
  if (lazy) {
    uint32_t need = sb_op2(b, SpvOpFOrdGreaterThan, b->t_bool, mn, sb_fadd(b, mo, sb_f32(b, ALAZY)));
    if (!emulate) { /* the subgroup's vote */
      sb_capability(b, SpvCapabilityGroupNonUniformVote);
      re = sb_op2(b, SpvOpGroupNonUniformAny, b->t_bool, sb_u32(b, SpvScopeSubgroup), need);
    } else { /* the workgroup's (a rescale more is no error) */
      uint32_t any = sb_wg_reduce(b, red, sb_select(b, b->t_f32, need, sb_f32(b, 1.f), sb_f32(b, 0.f)), true);
      re = sb_op2(b, SpvOpFOrdGreaterThan, b->t_bool, any, sb_f32(b, 0.5f));
    }
    mn = sb_select(b, b->t_f32, re, mn, mo);
  }
  uint32_t ms = sb_select(b, b->t_f32, sb_op2(b, SpvOpFOrdEqual, b->t_bool, mn, ninf), sb_f32(b, 0.f), mn);
  uint32_t corr = sb_glsl1(b, GLSLstd450Exp2, b->t_f32, sb_fsub(b, mo, ms)), ls = sb_fmul(b, sb_ld(b, lsum), corr);
  sb_st(b, m, mn);
  if (!emulate) { /* O's rows times corr, through the scratch (before P takes its place) */
    sb_if rs;
    if (lazy) sb_if_begin(b, &rs, re, false);
    for (int j = 0; j < nd; j++) {
      uint32_t pc[2] = {k.sh, scr};
      uint32_t st[4] = {sb_op(b, SpvOpAccessChain, k.pq, 2, pc), sb_ld(b, oacc[j]), sb_u32(b, 5), sb_bool(b, false)};
      sb_op0(b, SpvOpCooperativeMatrixStoreNV, 4, st);
      csync(&k);
      for (uint32_t h = 0; h < 2; h++) {
        uint32_t qa = sb_addc(b, lat, h), quad = sb_sh_ld(b, k.sh, q4, qa), w[4];
        for (uint32_t e = 0; e < 4; e++) {
          uint32_t a[2] = {quad, e};
          w[e] = sb_f2bits(b, sb_fmul(b, sb_bits2f(b, sb_op(b, SpvOpCompositeExtract, b->t_u32, 2, a)), corr));
        }
        sb_sh_st(b, k.sh, q4, qa, sb_op(b, SpvOpCompositeConstruct, q4, 4, w));
      }
      csync(&k);
      uint32_t pl[2] = {k.sh, scr};
      uint32_t la[3] = {sb_op(b, SpvOpAccessChain, k.pq, 2, pl), sb_u32(b, 5), sb_bool(b, false)};
      sb_st(b, oacc[j], sb_op(b, SpvOpCooperativeMatrixLoadNV, k.mat_f, 3, la));
      csync(&k); /* loaded before the next one is stored */
    }
    if (lazy) sb_if_end(b, &rs);
  }
  /* P as f16: row r, keys 16 jb + col.. a quad */
  uint32_t prow = sb_add(b, scr, sb_add(b, sb_mulc(b, r, c.pl), hf));
  for (int jb = 0; jb < nk; jb++) {
    uint32_t p[8], w[4];
    for (int e = 0; e < 8; e++) {
      p[e] = sb_glsl1(b, GLSLstd450Exp2, b->t_f32, sb_fsub(b, sc[jb][e], ms));
      ls = sb_fadd(b, ls, p[e]);
    }
    for (int e = 0; e < 4; e++) w[e] = attn_pack2(A, p[2 * e], p[2 * e + 1]);
    sb_sh_st(b, k.sh, q4, sb_addc(b, prow, (uint32_t)(2 * jb)), sb_op(b, SpvOpCompositeConstruct, q4, 4, w));
  }
  sb_st(b, lsum, ls);
  csync(&k);
  /* O += P V, 16 columns of d at a time */
  if (!emulate) {
    uint32_t pm[4];
    for (int t = 0; t < nk; t++) pm[t] = cload(&k, sb_addc(b, scr, (uint32_t)(2 * t)), c.pl, false);
    for (int j = 0; j < nd; j++) {
      uint32_t acc = sb_ld(b, oacc[j]);
      for (int t = 0; t < nk; t++) { /* V's lines 16 t.., d 16 j.. */
        uint32_t vb = cload(&k, sb_u32(b, c.vq + (uint32_t)(16 * t) * c.lq + (uint32_t)(2 * j)), c.lq, false);
        uint32_t ma[3] = {pm[t], vb, acc};
        acc = sb_op(b, SpvOpCooperativeMatrixMulAddNV, k.mat_f, 3, ma);
      }
      sb_st(b, oacc[j], acc);
    }
  } else { /* O times corr, then one key an iteration, the lane's 8 columns of each 16 of d at once */
    uint32_t pe = sb_mulc(b, sb_add(b, scr, sb_mulc(b, r, c.pl)), ACQ);
    for (int j = 0; j < nd; j++)
      for (int e = 0; e < 8; e++) sb_st(b, o[j][e], sb_fmul(b, sb_ld(b, o[j][e]), corr));
    sb_loop l;
    uint32_t t = sb_for(b, &l, st0, sb_u32(b, (uint32_t)ak), sb_u32(b, 1)), pt = attn_sh_half(A, k.sh, sb_add(b, pe, t));
    uint32_t vrow = sb_add(b, sb_u32(b, c.vq * ACQ), sb_add(b, col, sb_mulc(b, t, c.lq * ACQ)));
    for (int j = 0; j < nd; j++)
      for (int e = 0; e < 8; e++) {
        uint32_t vt = attn_sh_half(A, k.sh, sb_addc(b, vrow, (uint32_t)(16 * j + e)));
        sb_st(b, o[j][e], sb_fma(b, pt, vt, sb_ld(b, o[j][e])));
      }
    sb_for_end(b, &l);
  }
  sb_barrier(b); /* K, V and P are read: the next block may overwrite them */
  sb_for_end(b, &kl);

  /* l: this lane's part and its neighbour's */
  sb_sh_st(b, mx, b->t_f32, lid, sb_ld(b, lsum));
  csync(&k);
  uint32_t l2 = sb_fadd(b, sb_ld(b, lsum), sb_sh_ld(b, mx, b->t_f32, partner));
  uint32_t inv = sb_fdiv(b, sb_f32(b, 1.f), l2), ov[8][8];
  for (int j = 0; j < nd; j++) { /* through the scratch outside the store's condition (subgroup-wide) */
    if (!emulate) cthrough(&k, sb_ld(b, oacc[j]), scr, lat, ov[j]);
    else
      for (int e = 0; e < 8; e++) ov[j][e] = sb_ld(b, o[j][e]);
  }
  uint32_t row = sb_add(b, sb_mulc(b, bh, (uint32_t)A->SQ), qi), at = sb_add(b, sb_mulc(b, row, (uint32_t)A->DV), col);
  if (stats) { /* D: this lane's 8 columns of each 16 against dO's, then its neighbour's part */
    uint32_t in = sb_ult(b, qi, SQ), dsum = sb_f32(b, 0.f);
    for (int j = 0; j < nd; j++)
      for (int e = 0; e < 8; e++) {
        uint32_t g = sb_load_f(b, 0, A->dt, sb_select(b, b->t_u32, in, sb_addc(b, at, (uint32_t)(16 * j + e)), st0));
        dsum = sb_fma(b, g, ov[j][e], dsum);
      }
    csync(&k); /* l is read from mx */
    sb_sh_st(b, mx, b->t_f32, lid, dsum);
    csync(&k);
    dsum = sb_fadd(b, dsum, sb_sh_ld(b, mx, b->t_f32, partner));
    sb_if w;
    sb_if_begin(b, &w, sb_land(b, in, sb_ieq(b, hf, st0)), false);
    uint32_t sc2 = sv_scratch(s), R = (uint32_t)(A->BH * A->SQ);
    /* m is base 2 of the scaled scores: L = ln 2 (m + log2 l) */
    uint32_t L = sb_fmul(b, sb_f32(b, 0.6931471805599453f), sb_fadd(b, sb_ld(b, m), sb_glsl1(b, GLSLstd450Log2, b->t_f32, l2)));
    sb_stw(b, sc2, row, sb_f2bits(b, L));
    sb_stw(b, sc2, sb_addc(b, row, R), sb_f2bits(b, sb_fmul(b, dsum, inv)));
    sb_if_end(b, &w);
  } else {
    sb_if w;
    sb_if_begin(b, &w, sb_ult(b, qi, SQ), false);
    for (int j = 0; j < nd; j++) store8(A, sb_addc(b, at, (uint32_t)(16 * j)), ov[j], inv);
    sb_if_end(b, &w);
  }
  sb_if_end(b, &wg.guard);
  sv_end(s);
}

void attn_fwd_coop(attn *A, bool emulate) {
  coop_attn c = fwd_blocks(A, emulate);
  coop_ctx k = coop_ctx_of(A->b, emulate, c.total);
  fwd_coop(A, emulate, false, &c, &k);
  sv_coopmat16(A->s, emulate, A->raw);
}

/* ---- the cooperative-matrix gradient (FlashAttention-2's backward) ----
 *
 * attention_grad of the heads the forward takes, three dispatches: 0 is the
 * forward above with L_i and D_i into scratch in place of the output (the
 * tiled kernel's f32 forward did it until 2026-12-07: the gradient took
 * 26.5 ms at the MiniLLM's shape on an H100 then, 2.2 ms since); 1 gives dv and dk, 2 dq, so
 * that nothing is added by atomics.  Dispatch 1: a workgroup of 4
 * subgroups of 32 per 64 key rows of one (batch, head), subgroup sg owning
 * keys 16 sg.. of them; lane (r, h) as in the forward, with key row r.
 *   - K's and V's 16 x d of the subgroup are d / 16 A operands each in
 *     registers (the 64 rows staged as f16 as the forward stages, K then V in
 *     one place).
 *   - Per block of GQ queries (causal: from the block of the first key on),
 *     Q and dO are staged as f16; S^T = K Q^T and dP^T = V dO^T on GQ / 16
 *     accumulators each (Q, dO the column-major B operands), through the
 *     subgroup's scratch to the lanes; P^T = exp(scale s - L_i) and
 *     dS^T = P^T (dP^T - D_i), zero where masked (queries past s; causal:
 *     key > query).
 *   - P^T as f16 through the subgroup's shared memory into dV += P^T dO, then
 *     dS^T in the same place into dK += dS^T Q (dO and Q row-major B), on d / 16
 *     f32 accumulators each, which live through the loop; at the end through
 *     the scratch to the lanes, dk times scale.
 * Dispatch 2 is the same with the roles swapped: 64 query rows, Q and dO in
 * registers, K and V streamed (causal: up to the rows' last query), S and
 * dP recomputed, and dS alone into dQ += dS K, times scale.
 * As in the forward, bf16 operands are staged as f16 (11 bits, f16's range:
 * values under 2^-24, such as tiny gradients dO, are lost), and so are P and
 * dS, except with --spirv-coopmat=khr, where they stay bf16 (A->raw) and P
 * and dS are rounded to bf16.  GQ is 32 past d = 64 (64 there would take
 * 44 KiB of shared memory, and registers), else 64, or the largest of 32
 * and 16 that fits (NVIDIA's 48 KiB, lavapipe's 32) beside the forward's
 * row maxima; dispatch 0's keys, values and P use the same shared memory as
 * 1 and 2.  emulate: as the forward's, each lane's values by scalar
 * FMAs, from its K and V rows read from memory (rounded to f16 as staging
 * rounds them) and the shared Q, dO, P and dS, a quad of d (or a query) per
 * loop iteration: lavapipe counts the iterations of all of an invocation's
 * loops together and ends every loop past 65535 (gallivm's loop limiter,
 * LP_MAX_TGSI_LOOP_ITERATIONS), which a loop per element hit after 16 blocks
 * of 16 queries at d = 128 (queries silently lost).  The forward's emulation
 * (and so dispatch 0's) carries a lane's 8 scores, or its O, across one
 * loop over d, or over the block's keys (2 d + 32 iterations per block of
 * 32 keys at d = 128: good for about 8000 keys there). */

typedef struct {
  int gq;        /* queries per block */
  uint32_t lq;   /* quads per line of Q, dO, K, V (d / 8 + 1) */
  uint32_t pl;   /* quads per line of P and dS (gq / 8 + 1) */
  uint32_t gq0;  /* dO's first quad (Q's is 0) */
  uint32_t sgq;  /* quads per subgroup (P, dS, the scratch) */
  uint32_t pq;   /* the first subgroup's first quad */
  uint32_t total;
} coop_grad;

static coop_grad coop_grad_of(int64_t D, int gq, bool emulate) {
  coop_grad c = {.gq = gq, .lq = (uint32_t)(D / ACQ + 1), .pl = (uint32_t)(gq / ACQ + 1)};
  c.gq0 = (uint32_t)gq * c.lq;
  c.pq = 2 * c.gq0;
  c.sgq = 16 * c.pl;
  if (!emulate && c.sgq < ASCR) c.sgq = ASCR;
  c.total = c.pq + ASG * c.sgq;
  if (!emulate && c.total < AQ * c.lq) c.total = AQ * c.lq; /* K's and V's 64 rows before the loop */
  return c;
}

/* x rounded to f16, as staging rounds it. */
static uint32_t attn_round_h(sb *b, uint32_t x) { return sb_f16tof(b, sb_and(b, sb_pack_h2(b, x, x), sb_u32(b, 0xffff))); }

/* The 8 values of a quad of 16-bit elements of dtype dt as f32 (round: bf16
 * rounded to f16, as staging rounds it unless the kernel's matrices are bf16). */
static void quad_vals(sb *b, int dt, bool round, uint32_t quad, uint32_t *x) {
  for (uint32_t w = 0; w < 4; w++) {
    uint32_t a[2] = {quad, w}, wd = sb_op(b, SpvOpCompositeExtract, b->t_u32, 2, a);
    if (dt == MLC_DT_BF16) {
      x[2 * w] = sb_bits2f(b, sb_shl(b, wd, sb_u32(b, 16)));
      x[2 * w + 1] = sb_bits2f(b, sb_and(b, wd, sb_u32(b, 0xffff0000u)));
      if (round) x[2 * w] = attn_round_h(b, x[2 * w]), x[2 * w + 1] = attn_round_h(b, x[2 * w + 1]);
    } else {
      x[2 * w] = sb_f16tof(b, sb_and(b, wd, sb_u32(b, 0xffff)));
      x[2 * w + 1] = sb_f16tof(b, sb_shr(b, wd, sb_u32(b, 16)));
    }
  }
}

/* One dispatch of the gradient: dq false, dv and dk per 64 key rows (the
 * rows' K and V in registers, Q and dO streamed); dq true, dq per 64 query
 * rows (Q and dO in registers, K and V streamed, dS alone multiplied). */
static void coop_grad_pass(attn *A, const coop_grad *cg, const coop_ctx *kc, bool dq) {
  sv *s = A->s;
  sb *b = A->b;
  bool emulate = kc->emulate;
  coop_grad c = *cg;
  coop_ctx k = *kc;
  int64_t D = A->D, S = A->SQ, R = A->BH * S, nt = sv_ceil_div(S, AQ), groups = A->BH * nt;
  int gq = c.gq, nd = (int)(D / 16), ng = gq / 16, g0 = dq ? 1 : 0;
  uint32_t q4 = sb_uvec4_type(b);
  int sh16 = A->raw ? MLC_DT_BF16 : MLC_DT_F16; /* what shared memory's 16-bit values are */
  /* the bindings of the rows' operands (S's, dP's) and of the streamed ones */
  uint32_t own[2] = {dq ? 1u : 2u, dq ? 0u : 3u}, str[2] = {dq ? 2u : 1u, dq ? 3u : 0u};

  coop_lanes wg;
  coop_lanes_begin(A, groups, nt, &wg);
  uint32_t bh = wg.bh, j0 = wg.row0, sg = wg.sg, r = wg.r, hf = wg.hf, col = wg.col;
  uint32_t SS = sb_u32(b, (uint32_t)S), st0 = sb_u32(b, 0), sc2 = sv_scratch(s);
  uint32_t kj = sb_add(b, j0, sb_add(b, sb_mulc(b, sg, 16), r)); /* the lane's row (key, or query for dq) */
  uint32_t scr = sb_addc(b, sb_mulc(b, sg, c.sgq), c.pq);      /* the subgroup's P, dS and scratch */
  uint32_t lat = sb_add(b, scr, sb_add(b, sb_mulc(b, r, 5), sb_shr(b, col, sb_u32(b, 2))));
  uint32_t rbase = sb_mulc(b, bh, (uint32_t)S), obase = sb_mulc(b, rbase, (uint32_t)D);

  /* K's and V's rows of the subgroup, into registers */
  uint32_t km[8], vm[8];
  if (!emulate) {
    uint32_t line = sb_mulc(b, sb_mulc(b, sg, 16), c.lq);
    for (int which = 0; which < 2; which++) {
      coop_stage(A, c.lq, k.sh, own[which], obase, j0, AQ, SS, 0);
      sb_barrier(b);
      for (int t = 0; t < nd; t++) (which ? vm : km)[t] = cload(&k, sb_addc(b, line, (uint32_t)(2 * t)), c.lq, false);
      sb_barrier(b); /* read before the next staging overwrites it */
    }
  }
  /* emulating: the lane's key row (its element d read where it is used, rounded as staging rounds it; rows past s: 0) */
  uint32_t kok = sb_ult(b, kj, SS), kat = sb_mulc(b, sb_add(b, rbase, sb_select(b, b->t_u32, kok, kj, st0)), (uint32_t)D);

  /* dV and dK: d / 16 accumulators each (emulating: the lane's 8 values of each) */
  sb_lv acc[2][8], ev[2][8][8];
  for (int g = g0; g < 2; g++)
    for (int j = 0; j < nd; j++) {
      if (!emulate) acc[g][j] = sb_local(b, k.mat_f, k.zero);
      else
        for (int e = 0; e < 8; e++) ev[g][j][e] = sb_local(b, b->t_f32, sb_f32(b, 0.f));
    }
  sb_loop il;
  uint32_t istart = st0, iend = SS; /* causal: from the block of the first key (gq divides 64), or to the last query */
  if (A->causal && !dq) istart = j0;
  if (A->causal && dq) {
    uint32_t a[2] = {sb_addc(b, j0, AQ), SS};
    iend = sb_glsl(b, GLSLstd450UMin, b->t_u32, 2, a);
  }
  uint32_t i0 = sb_for(b, &il, istart, iend, sb_u32(b, (uint32_t)gq));
  coop_stage(A, c.lq, k.sh, str[0], obase, i0, gq, SS, 0);
  coop_stage(A, c.lq, k.sh, str[1], obase, i0, gq, SS, c.gq0);
  sb_barrier(b);

  /* S^T and dP^T: the lane's 8 of each 16 queries; P^T and dS^T */
  uint32_t p[4][8], ds[4][8], scale = sb_f32(b, A->scale);
  for (int jb = 0; jb < ng; jb++) {
    uint32_t v[2][8];
    for (int g = 0; g < 2; g++) { /* g 0: S^T = K Q^T, 1: dP^T = V dO^T */
      uint32_t src = g ? c.gq0 : 0;
      if (!emulate) {
        uint32_t a = k.zero;
        for (int t = 0; t < nd; t++) { /* lines 16 jb.., d 16 t..: the 16 x 16 piece of Q^T (dO^T), column-major */
          uint32_t bm = cload(&k, sb_u32(b, src + (uint32_t)(16 * jb) * c.lq + (uint32_t)(2 * t)), c.lq, true);
          uint32_t ma[3] = {(g ? vm : km)[t], bm, a};
          a = sb_op(b, SpvOpCooperativeMatrixMulAddNV, k.mat_f, 3, ma);
        }
        cthrough(&k, a, scr, lat, v[g]);
      } else { /* a quad of d at a time (few loop iterations: lavapipe ends loops after 65535 in all) */
        sb_lv a[8];
        for (int e = 0; e < 8; e++) a[e] = sb_local(b, b->t_f32, sb_f32(b, 0.f));
        uint32_t line0 = sb_addc(b, sb_mulc(b, sb_addc(b, col, (uint32_t)(16 * jb)), c.lq), src);
        sb_loop l;
        uint32_t dq4 = sb_for(b, &l, st0, sb_u32(b, (uint32_t)(D / ACQ)), sb_u32(b, 1)), kx[8];
        quad_vals(b, A->dt, !A->raw, sb_ld4(b, own[g], sb_add(b, sb_shr(b, kat, sb_u32(b, 3)), dq4)), kx);
        for (int e = 0; e < 8; e++) {
          uint32_t qx[8], x = sb_ld(b, a[e]);
          quad_vals(b, sh16, false, sb_sh_ld(b, k.sh, q4, sb_add(b, sb_addc(b, line0, (uint32_t)e * c.lq), dq4)), qx);
          for (int t = 0; t < 8; t++) x = sb_fma(b, sb_select(b, b->t_f32, kok, kx[t], sb_f32(b, 0.f)), qx[t], x);
          sb_st(b, a[e], x);
        }
        sb_for_end(b, &l);
        for (int e = 0; e < 8; e++) v[g][e] = sb_ld(b, a[e]);
      }
    }
    for (int e = 0; e < 8; e++) { /* qn: the column (query, or key for dq) */
      uint32_t qn = sb_add(b, i0, sb_add(b, col, sb_u32(b, (uint32_t)(16 * jb + e)))), vis = sb_ult(b, qn, SS);
      if (A->causal) vis = sb_land(b, vis, sb_op2(b, SpvOpULessThanEqual, b->t_bool, dq ? qn : kj, dq ? kj : qn));
      if (dq) vis = sb_land(b, vis, kok);
      uint32_t qr = sb_add(b, rbase, sb_select(b, b->t_u32, vis, dq ? kj : qn, st0));
      uint32_t L = sb_bits2f(b, sb_ldw(b, sc2, qr)), Di = sb_bits2f(b, sb_ldw(b, sc2, sb_addc(b, qr, (uint32_t)R)));
      uint32_t pe = sb_exp(b, sb_fsub(b, sb_fmul(b, v[0][e], scale), L));
      p[jb][e] = sb_select(b, b->t_f32, vis, pe, sb_f32(b, 0.f));
      ds[jb][e] = sb_fmul(b, p[jb][e], sb_fsub(b, v[1][e], Di));
    }
  }
  /* dV += P^T dO, then dK += dS^T Q: the weights as f16 in the subgroup's
   * place (row r, queries 16 jb + col.. a quad) */
  uint32_t prow = sb_add(b, scr, sb_add(b, sb_mulc(b, r, c.pl), hf));
  for (int g = g0; g < 2; g++) {
    for (int jb = 0; jb < ng; jb++) {
      uint32_t w[4];
      for (int e = 0; e < 4; e++) w[e] = attn_pack2(A, (g ? ds : p)[jb][2 * e], (g ? ds : p)[jb][2 * e + 1]);
      sb_sh_st(b, k.sh, q4, sb_addc(b, prow, (uint32_t)(2 * jb)), sb_op(b, SpvOpCompositeConstruct, q4, 4, w));
    }
    csync(&k);
    uint32_t src = g ? 0 : c.gq0; /* dV's B operand is dO, dK's Q, dQ's K */
    if (!emulate) {
      uint32_t pm[4];
      for (int t = 0; t < ng; t++) pm[t] = cload(&k, sb_addc(b, scr, (uint32_t)(2 * t)), c.pl, false);
      for (int j = 0; j < nd; j++) {
        uint32_t a = sb_ld(b, acc[g][j]);
        for (int t = 0; t < ng; t++) { /* lines 16 t.., d 16 j.. */
          uint32_t bm = cload(&k, sb_u32(b, src + (uint32_t)(16 * t) * c.lq + (uint32_t)(2 * j)), c.lq, false);
          uint32_t ma[3] = {pm[t], bm, a};
          a = sb_op(b, SpvOpCooperativeMatrixMulAddNV, k.mat_f, 3, ma);
        }
        sb_st(b, acc[g][j], a);
      }
    } else {
      /* per query t: the lane's weight, and its 8 columns of each 16 of the row (a quad) */
      uint32_t pe = sb_mulc(b, sb_add(b, scr, sb_mulc(b, r, c.pl)), ACQ), cq = sb_shr(b, col, sb_u32(b, 3));
      sb_loop l;
      uint32_t t = sb_for(b, &l, st0, sb_u32(b, (uint32_t)gq), sb_u32(b, 1));
      uint32_t wt = attn_sh_half(A, k.sh, sb_add(b, pe, t)), line = sb_add(b, sb_addc(b, sb_mulc(b, t, c.lq), src), cq);
      for (int j = 0; j < nd; j++) {
        uint32_t x[8];
        quad_vals(b, sh16, false, sb_sh_ld(b, k.sh, q4, sb_addc(b, line, (uint32_t)(2 * j))), x);
        for (int e = 0; e < 8; e++) sb_st(b, ev[g][j][e], sb_fma(b, wt, x[e], sb_ld(b, ev[g][j][e])));
      }
      sb_for_end(b, &l);
    }
    csync(&k); /* P read before dS takes its place (dS before the next block's scratch) */
  }
  sb_barrier(b); /* Q and dO are read: the next block may overwrite them */
  sb_for_end(b, &il);

  /* the lanes' values (through the scratch outside the store's condition) and the stores: dq at [0], dk at [1], dv at [2] */
  uint32_t out[2][8][8];
  for (int g = g0; g < 2; g++)
    for (int j = 0; j < nd; j++) {
      if (!emulate) cthrough(&k, sb_ld(b, acc[g][j]), scr, lat, out[g][j]);
      else
        for (int e = 0; e < 8; e++) out[g][j][e] = sb_ld(b, ev[g][j][e]);
    }
  sb_if w;
  sb_if_begin(b, &w, sb_ult(b, kj, SS), false);
  uint32_t krow = sb_add(b, sb_mulc(b, sb_add(b, rbase, kj), (uint32_t)D), col);
  for (int j = 0; j < nd; j++) {
    if (!dq) store8(A, sb_addc(b, krow, (uint32_t)(2 * R * D + 16 * j)), out[0][j], sb_f32(b, 1.f));
    store8(A, sb_addc(b, krow, (uint32_t)((dq ? 0 : R * D) + 16 * j)), out[1][j], scale);
  }
  sb_if_end(b, &w);
  sb_if_end(b, &wg.guard);
  sv_end(s);
}

void attn_grad_coop(attn *A, bool emulate) {
  A->s->scratch = (uint64_t)(A->BH * A->SQ) * 8; /* [L | D], f32 per query row */
  coop_attn f = fwd_blocks(A, emulate);
  /* blocks of 32 queries past d = 64 (64 would take 44 KiB and more registers), 64 up to it, fewer where
   * they do not fit beside the forward's row maxima */
  uint32_t limit = (emulate ? 32768u : 49152u) - 4 * 32 * ASG - (emulate ? 512 : 0);
  coop_grad c = coop_grad_of(A->D, A->D > 64 ? 32 : 64, emulate);
  if (16 * c.total > limit) c = coop_grad_of(A->D, 32, emulate);
  if (16 * c.total > limit) c = coop_grad_of(A->D, 16, emulate);
  MLC_ASSERT(16 * c.total <= limit);
  /* [Q | dO (K | V)] [ASG][P, dS or scratch]; the rows' first; dispatch 0's K, V and P in the same place */
  coop_ctx k = coop_ctx_of(A->b, emulate, c.total > f.total ? c.total : f.total);
  fwd_coop(A, emulate, true, &f, &k);
  coop_grad_pass(A, &c, &k, false);
  coop_grad_pass(A, &c, &k, true);
  sv_coopmat16(A->s, emulate, A->raw);
}

/* Whether the cooperative-matrix forward (grad: gradient) takes this attention: as the
 * variant for devices with cooperative matrices only under
 * --spirv-attention=coopmat (it has not yet run on NVIDIA's driver:
 * bench/results/spirv-attention-2026-11-30.md); its emulation under
 * --spirv-emulate-coopmat. */
bool attn_coop_fits(const attn *A, bool grad, bool variant) {
  if (variant && A->s->p->opts.spirv_attention_tiled) return false;
  if (grad && (sv_in(A->s, 0)->dtype != A->dt || A->SQ != A->SK)) return false; /* dO of q's dtype */
  return (A->dt == MLC_DT_BF16 || A->dt == MLC_DT_F16) && A->D == A->DV && A->D % 16 == 0 && A->D <= 128 &&
         A->s->n->type.dtype == A->dt;
}
