/* Attention and its gradient: exact f32 kernels, a thread per row (no S
 * matrix reaches memory), with an online softmax (running max m, sum l,
 * the output rescaled by exp(m_old - m_new)); causal: key j visible to
 * query i when j <= i (PyTorch's is_causal).
 *
 * Head dims d, dv <= 128 (the tiled kernels): a workgroup of 64 threads per
 * 64 rows of one (batch, head); the rows of the other operand pass through
 * shared memory 16 at a time; a thread's scores for a block are registers
 * (the loop over d runs), the weights that multiply the shared rows go
 * through shared memory, and its result row is registers (d unrolled).
 *   attention:      per query row, o += p v over key blocks.
 *   attention_grad -> [3, b, h, s, d] (dq, dk, dv), four dispatches:
 *     0. the forward again per query row, giving L_i (log-sum-exp) and
 *        D_i = dO_i . O_i into scratch;
 *     1. per key row j: dv_j = sum_i P_ij dO_i, P_ij = exp(scale q_i.k_j - L_i);
 *     2. per key row j: dk_j = scale sum_i dS_ij q_i, dS_ij = P_ij (dO_i.v_j - D_i);
 *     3. per query row i: dq_i = scale sum_j dS_ij k_j.
 * Larger heads: the same per thread with rows in private arrays (plain).
 * The forward of 16-bit heads of d <= 128 has a cooperative-matrix variant
 * (fwd_coop below, FlashAttention style; the tiled kernel is its fallback).
 */
#include <stdlib.h>

#include "codegen/spirv/emit.h"

typedef struct {
  sv *s;
  sb *b;
  int dt;
  int64_t BH, SQ, SK, D, DV;
  bool causal;
  float scale;
} attn;

/* Loads n floats from binding bind at base into private array a. */
static void load_row(attn *A, sb_lv a, uint32_t bind, uint32_t base, int64_t n) {
  sb *b = A->b;
  sb_loop l;
  uint32_t d = sb_for(b, &l, sb_u32(b, 0), sb_u32(b, (uint32_t)n), sb_u32(b, 1));
  sb_arr_st(b, a, d, sb_load_f(b, bind, A->dt, sb_add(b, base, d)));
  sb_for_end(b, &l);
}

/* dot(private a, row of binding bind at base), n long */
static uint32_t dot(attn *A, sb_lv a, uint32_t bind, uint32_t base, int64_t n) {
  sb *b = A->b;
  sb_lv acc = sb_local(b, b->t_f32, sb_f32(b, 0.f));
  sb_loop l;
  uint32_t d = sb_for(b, &l, sb_u32(b, 0), sb_u32(b, (uint32_t)n), sb_u32(b, 1));
  sb_st(b, acc, sb_fma(b, sb_arr_ld(b, a, d), sb_load_f(b, bind, A->dt, sb_add(b, base, d)), sb_ld(b, acc)));
  sb_for_end(b, &l);
  return sb_ld(b, acc);
}

/* a[d] = a[d] * x + y * row[d] (row of binding bind at base); x may be 0 (keep a) */
static void axpy(attn *A, sb_lv a, uint32_t x, uint32_t y, uint32_t bind, uint32_t base, int64_t n) {
  sb *b = A->b;
  sb_loop l;
  uint32_t d = sb_for(b, &l, sb_u32(b, 0), sb_u32(b, (uint32_t)n), sb_u32(b, 1));
  uint32_t old = sb_arr_ld(b, a, d);
  if (x) old = sb_fmul(b, old, x);
  sb_arr_st(b, a, d, sb_fma(b, y, sb_load_f(b, bind, A->dt, sb_add(b, base, d)), old));
  sb_for_end(b, &l);
}

static void zero(attn *A, sb_lv a, int64_t n) {
  sb *b = A->b;
  sb_loop l;
  uint32_t d = sb_for(b, &l, sb_u32(b, 0), sb_u32(b, (uint32_t)n), sb_u32(b, 1));
  sb_arr_st(b, a, d, sb_f32(b, 0.f));
  sb_for_end(b, &l);
}

/* The number of keys query qi sees. */
static uint32_t nkeys(attn *A, uint32_t qi) {
  sb *b = A->b;
  uint32_t SK = sb_u32(b, (uint32_t)A->SK);
  if (!A->causal) return SK;
  uint32_t a[2] = {sb_addc(b, qi, 1), SK};
  return sb_glsl(b, GLSLstd450UMin, b->t_u32, 2, a);
}

/* The forward of one query row: o (private, unnormalised), m, l.  qb, kb,
 * vb: bindings of q, k, v. */
static void fwd_row(attn *A, uint32_t row, uint32_t qb, uint32_t kb, uint32_t vb, sb_lv q, sb_lv o, sb_lv m, sb_lv l) {
  sb *b = A->b;
  uint32_t bh = sb_div(b, row, sb_u32(b, (uint32_t)A->SQ)), qi = sb_mod(b, row, sb_u32(b, (uint32_t)A->SQ));
  load_row(A, q, qb, sb_mulc(b, row, (uint32_t)A->D), A->D);
  zero(A, o, A->DV);
  sb_st(b, m, sb_f32(b, -__builtin_inff()));
  sb_st(b, l, sb_f32(b, 0.f));
  uint32_t kbase = sb_mulc(b, bh, (uint32_t)(A->SK * A->D)), vbase = sb_mulc(b, bh, (uint32_t)(A->SK * A->DV));
  sb_loop lp;
  uint32_t j = sb_for(b, &lp, sb_u32(b, 0), nkeys(A, qi), sb_u32(b, 1));
  uint32_t sc = sb_fmul(b, dot(A, q, kb, sb_add(b, kbase, sb_mulc(b, j, (uint32_t)A->D)), A->D), sb_f32(b, A->scale));
  uint32_t mo = sb_ld(b, m), mn = sb_fmax(b, mo, sc);
  uint32_t corr = sb_exp(b, sb_fsub(b, mo, mn)), p = sb_exp(b, sb_fsub(b, sc, mn));
  sb_st(b, l, sb_fma(b, sb_ld(b, l), corr, p));
  sb_st(b, m, mn);
  axpy(A, o, corr, p, vb, sb_add(b, vbase, sb_mulc(b, j, (uint32_t)A->DV)), A->DV);
  sb_for_end(b, &lp);
}

static bool emit_fwd(attn *A) {
  sv *s = A->s;
  sb *b = A->b;
  sv_gs g;
  uint32_t row = sv_items_begin(s, &g, A->BH * A->SQ);
  sb_lv q = sb_local_array(b, b->t_f32, (uint32_t)A->D), o = sb_local_array(b, b->t_f32, (uint32_t)A->DV);
  sb_lv m = sb_local(b, b->t_f32, 0), l = sb_local(b, b->t_f32, 0);
  fwd_row(A, row, 0, 1, 2, q, o, m, l);
  uint32_t inv = sb_fdiv(b, sb_f32(b, 1.f), sb_ld(b, l)), base = sb_mulc(b, row, (uint32_t)A->DV);
  sb_loop lp;
  uint32_t d = sb_for(b, &lp, sb_u32(b, 0), sb_u32(b, (uint32_t)A->DV), sb_u32(b, 1));
  sb_store_f(b, sv_out(s), s->n->type.dtype, sb_add(b, base, d), sb_fmul(b, sb_arr_ld(b, o, d), inv));
  sb_for_end(b, &lp);
  sv_items_end(s, &g);
  return true;
}

static bool emit_grad(attn *A) {
  sv *s = A->s;
  sb *b = A->b;
  int64_t R = A->BH * A->SQ, N = R * A->D, D = A->D;
  uint32_t sc = sv_scratch(s), ot = sv_out(s), odt = s->n->type.dtype;
  s->scratch = (uint64_t)R * 8;
  /* 0: L_i and D_i */
  sv_gs g;
  uint32_t row = sv_items_begin(s, &g, R);
  sb_lv q = sb_local_array(b, b->t_f32, (uint32_t)D), o = sb_local_array(b, b->t_f32, (uint32_t)D);
  sb_lv m = sb_local(b, b->t_f32, 0), l = sb_local(b, b->t_f32, 0);
  fwd_row(A, row, 1, 2, 3, q, o, m, l);
  uint32_t inv = sb_fdiv(b, sb_f32(b, 1.f), sb_ld(b, l));
  uint32_t Di = sb_fmul(b, dot(A, o, 0, sb_mulc(b, row, (uint32_t)D), D), inv);
  sb_stw(b, sc, row, sb_f2bits(b, sb_fadd(b, sb_ld(b, m), sb_glsl1(b, GLSLstd450Log, b->t_f32, sb_ld(b, l)))));
  sb_stw(b, sc, sb_addc(b, row, (uint32_t)R), sb_f2bits(b, Di));
  sv_items_end(s, &g);

  /* 1: dk, dv per key row */
  uint32_t S = sb_u32(b, (uint32_t)A->SQ), scale = sb_f32(b, A->scale);
  row = sv_items_begin(s, &g, R);
  sb_lv kj = sb_local_array(b, b->t_f32, (uint32_t)D), vj = sb_local_array(b, b->t_f32, (uint32_t)D);
  sb_lv dk = sb_local_array(b, b->t_f32, (uint32_t)D), dv = sb_local_array(b, b->t_f32, (uint32_t)D);
  uint32_t bh = sb_div(b, row, S), j = sb_mod(b, row, S), base = sb_mulc(b, bh, (uint32_t)(A->SQ * D));
  load_row(A, kj, 2, sb_mulc(b, row, (uint32_t)D), D);
  load_row(A, vj, 3, sb_mulc(b, row, (uint32_t)D), D);
  zero(A, dk, D);
  zero(A, dv, D);
  sb_loop lp;
  uint32_t i = sb_for(b, &lp, A->causal ? j : sb_u32(b, 0), S, sb_u32(b, 1));
  uint32_t ri = sb_add(b, sb_mulc(b, bh, (uint32_t)A->SQ), i), at = sb_add(b, base, sb_mulc(b, i, (uint32_t)D));
  uint32_t p = sb_exp(b, sb_fsub(b, sb_fmul(b, dot(A, kj, 1, at, D), scale), sb_bits2f(b, sb_ldw(b, sc, ri))));
  uint32_t dp = dot(A, vj, 0, at, D);
  uint32_t ds = sb_fmul(b, p, sb_fsub(b, dp, sb_bits2f(b, sb_ldw(b, sc, sb_addc(b, ri, (uint32_t)R)))));
  axpy(A, dv, 0, p, 0, at, D);
  axpy(A, dk, 0, ds, 1, at, D);
  sb_for_end(b, &lp);
  uint32_t ob = sb_mulc(b, row, (uint32_t)D);
  uint32_t d = sb_for(b, &lp, sb_u32(b, 0), sb_u32(b, (uint32_t)D), sb_u32(b, 1));
  sb_store_f(b, ot, odt, sb_add(b, sb_addc(b, ob, (uint32_t)N), d), sb_fmul(b, sb_arr_ld(b, dk, d), scale));
  sb_store_f(b, ot, odt, sb_add(b, sb_addc(b, ob, (uint32_t)(2 * N)), d), sb_arr_ld(b, dv, d));
  sb_for_end(b, &lp);
  sv_items_end(s, &g);

  /* 2: dq per query row */
  row = sv_items_begin(s, &g, R);
  q = sb_local_array(b, b->t_f32, (uint32_t)D);
  sb_lv gi = sb_local_array(b, b->t_f32, (uint32_t)D), dq = sb_local_array(b, b->t_f32, (uint32_t)D);
  bh = sb_div(b, row, S);
  i = sb_mod(b, row, S);
  base = sb_mulc(b, bh, (uint32_t)(A->SQ * D));
  load_row(A, q, 1, sb_mulc(b, row, (uint32_t)D), D);
  load_row(A, gi, 0, sb_mulc(b, row, (uint32_t)D), D);
  zero(A, dq, D);
  uint32_t Li = sb_bits2f(b, sb_ldw(b, sc, row)), Dq = sb_bits2f(b, sb_ldw(b, sc, sb_addc(b, row, (uint32_t)R)));
  j = sb_for(b, &lp, sb_u32(b, 0), nkeys(A, i), sb_u32(b, 1));
  uint32_t at2 = sb_add(b, base, sb_mulc(b, j, (uint32_t)D));
  p = sb_exp(b, sb_fsub(b, sb_fmul(b, dot(A, q, 2, at2, D), scale), Li));
  ds = sb_fmul(b, p, sb_fsub(b, dot(A, gi, 3, at2, D), Dq));
  axpy(A, dq, 0, ds, 2, at2, D);
  sb_for_end(b, &lp);
  ob = sb_mulc(b, row, (uint32_t)D);
  d = sb_for(b, &lp, sb_u32(b, 0), sb_u32(b, (uint32_t)D), sb_u32(b, 1));
  sb_store_f(b, ot, odt, sb_add(b, ob, d), sb_fmul(b, sb_arr_ld(b, dq, d), scale));
  sb_for_end(b, &lp);
  sv_items_end(s, &g);
  return true;
}

/* The tiled forward: a workgroup of BQ threads per BQ query rows of one
 * (batch, head), a thread per row; keys and values pass through shared
 * memory BKV at a time.  Per block a thread computes its BKV scores (in
 * registers: the loop over d is the runtime one), the online-softmax update,
 * writes p to shared memory, and adds p V into its output row, which lives
 * in registers (dv unrolled).  Needs d, dv <= 128. */
#define BQ 64
#define BKV 16

/* Rows [r0, r0 + nrows) of an [.., n] operand of binding `bind` (rows past
 * `limit` as zeros; base: the element offset of row 0) into shared sh, by
 * the workgroup's BQ threads. */
static void stage_rows(attn *A, uint32_t sh, uint32_t bind, uint32_t base, uint32_t r0, int nrows, uint32_t limit, int64_t n) {
  sb *b = A->b;
  sb_loop ll;
  uint32_t e = sb_for(b, &ll, sb_lid(b), sb_u32(b, (uint32_t)(nrows * n)), sb_u32(b, BQ));
  uint32_t r = sb_add(b, r0, sb_div(b, e, sb_u32(b, (uint32_t)n))), ok = sb_ult(b, r, limit);
  uint32_t at = sb_add(b, base, sb_add(b, sb_mulc(b, r, (uint32_t)n), sb_mod(b, e, sb_u32(b, (uint32_t)n))));
  uint32_t v = sb_load_f(b, bind, A->dt, sb_select(b, b->t_u32, ok, at, sb_u32(b, 0)));
  sb_sh_st(b, sh, b->t_f32, e, sb_select(b, b->t_f32, ok, v, sb_f32(b, 0.f)));
  sb_for_end(b, &ll);
}

/* Stores n register values v[c] * f at element `at` + c of the output
 * (pairs as one word for 16-bit outputs when n and `at` are even). */
static void store_regs(attn *A, uint32_t at, sb_lv *v, int64_t n, uint32_t f) {
  sv *s = A->s;
  sb *b = A->b;
  int odt = s->n->type.dtype;
  bool words = mlc_dtype_size((mlc_dtype)odt) == 2 && n % 2 == 0;
  for (int c = 0; c < n; c += words ? 2 : 1) {
    uint32_t x = sb_addc(b, at, (uint32_t)c), y = sb_fmul(b, sb_ld(b, v[c]), f);
    if (words) {
      uint32_t y2 = sb_fmul(b, sb_ld(b, v[c + 1]), f);
      sb_stw(b, sv_out(s), sb_shr(b, x, sb_u32(b, 1)),
             sb_or(b, sb_f2bits_dt(b, odt, y), sb_shl(b, sb_f2bits_dt(b, odt, y2), sb_u32(b, 16))));
    } else {
      sb_store_f(b, sv_out(s), odt, x, y);
    }
  }
}

/* The tiled forward as one dispatch.  stats (attention_grad's dispatch 0:
 * g, q, k, v at bindings 0..3): instead of the output, each row's
 * L = m + log l and D = dO . O into scratch [L | D]. */
/* The shared memory of the tiled kernels: two tiles of BKV rows and the
 * per-thread weights, declared once per module (Vulkan counts a module's
 * Workgroup variables together, whichever entry point uses them). */
typedef struct {
  uint32_t t0, t1, ps;
} tiles;

static tiles tiles_of(attn *A) {
  sb *b = A->b;
  int64_t n = A->D > A->DV ? A->D : A->DV;
  return (tiles){sb_shared(b, b->t_f32, (uint32_t)(BKV * n)), sb_shared(b, b->t_f32, (uint32_t)(BKV * n)),
                 sb_shared(b, b->t_f32, BQ * (BKV + 1))};
}

static void fwd_tiled(attn *A, const tiles *T, bool stats) {
  sv *s = A->s;
  sb *b = A->b;
  uint32_t qb = stats ? 1 : 0, kb = qb + 1, vb = qb + 2;
  int64_t D = A->D, DV = A->DV, nt = sv_ceil_div(A->SQ, BQ), groups = A->BH * nt;
  uint32_t Ks = T->t0, Vs = T->t1, Ps = T->ps;
  uint32_t grp = sv_begin(s, (uint64_t)groups, BQ);
  sb_if guard;
  sb_if_begin(b, &guard, sb_ult(b, grp, sb_u32(b, (uint32_t)groups)), false);
  uint32_t bh = sb_div(b, grp, sb_u32(b, (uint32_t)nt)), q0 = sb_mulc(b, sb_mod(b, grp, sb_u32(b, (uint32_t)nt)), BQ);
  uint32_t lid = sb_lid(b), qi = sb_add(b, q0, lid), SQ = sb_u32(b, (uint32_t)A->SQ), SK = sb_u32(b, (uint32_t)A->SK);
  uint32_t valid = sb_ult(b, qi, SQ);
  uint32_t row = sb_add(b, sb_mulc(b, bh, (uint32_t)A->SQ), sb_select(b, b->t_u32, valid, qi, sb_u32(b, 0)));
  uint32_t qrow = sb_mulc(b, row, (uint32_t)D);
  sb_lv o[128], sc[BKV];
  for (int c = 0; c < DV; c++) o[c] = sb_local(b, b->t_f32, sb_f32(b, 0.f));
  for (int j = 0; j < BKV; j++) sc[j] = sb_local(b, b->t_f32, 0);
  sb_lv m = sb_local(b, b->t_f32, sb_f32(b, -__builtin_inff())), l = sb_local(b, b->t_f32, sb_f32(b, 0.f));
  uint32_t kend = SK;
  if (A->causal) { /* keys up to the tile's last row */
    uint32_t a[2] = {sb_addc(b, q0, BQ), SQ}, last = sb_glsl(b, GLSLstd450UMin, b->t_u32, 2, a), c2[2] = {last, SK};
    kend = sb_glsl(b, GLSLstd450UMin, b->t_u32, 2, c2);
  }
  sb_loop kl;
  uint32_t k0 = sb_for(b, &kl, sb_u32(b, 0), kend, sb_u32(b, BKV));
  /* the block of keys and values, zeros past sk */
  stage_rows(A, Ks, kb, sb_mulc(b, bh, (uint32_t)(A->SK * D)), k0, BKV, SK, D);
  stage_rows(A, Vs, vb, sb_mulc(b, bh, (uint32_t)(A->SK * DV)), k0, BKV, SK, DV);
  sb_barrier(b);
  /* scores */
  for (int j = 0; j < BKV; j++) sb_st(b, sc[j], sb_f32(b, 0.f));
  sb_loop dl;
  uint32_t c = sb_for(b, &dl, sb_u32(b, 0), sb_u32(b, (uint32_t)D), sb_u32(b, 1));
  uint32_t qc = sb_load_f(b, qb, A->dt, sb_add(b, qrow, c));
  for (int j = 0; j < BKV; j++)
    sb_st(b, sc[j], sb_fma(b, qc, sb_sh_ld(b, Ks, b->t_f32, sb_addc(b, c, (uint32_t)(j * D))), sb_ld(b, sc[j])));
  sb_for_end(b, &dl);
  /* online softmax over the block */
  uint32_t mo = sb_ld(b, m), mx = mo, sv_[BKV];
  for (int j = 0; j < BKV; j++) {
    uint32_t key = sb_addc(b, k0, (uint32_t)j), vis = sb_ult(b, key, SK);
    if (A->causal) vis = sb_land(b, vis, sb_op2(b, SpvOpULessThanEqual, b->t_bool, key, qi));
    sv_[j] = sb_select(b, b->t_f32, vis, sb_fmul(b, sb_ld(b, sc[j]), sb_f32(b, A->scale)), sb_f32(b, -__builtin_inff()));
    mx = sb_fmax(b, mx, sv_[j]);
  }
  uint32_t ninf = sb_op2(b, SpvOpFOrdEqual, b->t_bool, mx, sb_f32(b, -__builtin_inff()));
  uint32_t ms = sb_select(b, b->t_f32, ninf, sb_f32(b, 0.f), mx);
  uint32_t corr = sb_exp(b, sb_fsub(b, mo, ms)), lsum = sb_fmul(b, sb_ld(b, l), corr);
  uint32_t prow = sb_mulc(b, lid, BKV + 1);
  for (int j = 0; j < BKV; j++) {
    uint32_t p = sb_exp(b, sb_fsub(b, sv_[j], ms));
    lsum = sb_fadd(b, lsum, p);
    sb_sh_st(b, Ps, b->t_f32, sb_addc(b, prow, (uint32_t)j), p);
  }
  sb_st(b, l, lsum);
  sb_st(b, m, mx);
  for (int cc = 0; cc < DV; cc++) sb_st(b, o[cc], sb_fmul(b, sb_ld(b, o[cc]), corr));
  sb_loop jl;
  uint32_t j = sb_for(b, &jl, sb_u32(b, 0), sb_u32(b, BKV), sb_u32(b, 1));
  uint32_t pj = sb_sh_ld(b, Ps, b->t_f32, sb_add(b, prow, j)), vrow = sb_mulc(b, j, (uint32_t)DV);
  for (int cc = 0; cc < DV; cc++)
    sb_st(b, o[cc], sb_fma(b, pj, sb_sh_ld(b, Vs, b->t_f32, sb_addc(b, vrow, (uint32_t)cc)), sb_ld(b, o[cc])));
  sb_for_end(b, &jl);
  sb_barrier(b);
  sb_for_end(b, &kl);
  sb_if w;
  sb_if_begin(b, &w, valid, false);
  uint32_t inv = sb_fdiv(b, sb_f32(b, 1.f), sb_ld(b, l));
  if (stats) {
    uint32_t sc2 = sv_scratch(s), R = (uint32_t)(A->BH * A->SQ), dsum = sb_f32(b, 0.f);
    for (int cc = 0; cc < DV; cc++)
      dsum = sb_fma(b, sb_load_f(b, 0, A->dt, sb_addc(b, qrow, (uint32_t)cc)), sb_ld(b, o[cc]), dsum);
    sb_stw(b, sc2, row, sb_f2bits(b, sb_fadd(b, sb_ld(b, m), sb_glsl1(b, GLSLstd450Log, b->t_f32, sb_ld(b, l)))));
    sb_stw(b, sc2, sb_addc(b, row, R), sb_f2bits(b, sb_fmul(b, dsum, inv)));
  } else {
    store_regs(A, sb_mulc(b, row, (uint32_t)DV), o, DV, inv);
  }
  sb_if_end(b, &w);
  sb_if_end(b, &guard);
  sv_end(s);
}

static bool emit_fwd_tiled(attn *A) {
  tiles T = tiles_of(A);
  fwd_tiled(A, &T, false);
  return true;
}

/* attention_grad, tiled (d <= 128): a workgroup of BQ threads per BQ key
 * rows (dispatches 1: dv and 2: dk, a thread per key row j, its result row
 * in registers, query rows and dO through shared memory BKV at a time) or
 * per BQ query rows (3: dq, keys and values through shared memory).  The
 * scores of a block are in registers, the weights that multiply the shared
 * rows (P, or dS = P (dP - D)) go through shared memory per thread. */
static void kv_tiled(attn *A, const tiles *T, bool dk) {
  sv *s = A->s;
  sb *b = A->b;
  int64_t D = A->D, S = A->SQ, R = A->BH * S, nt = sv_ceil_div(S, BQ), groups = A->BH * nt;
  uint32_t Qs = T->t0, Gs = T->t1, Ps = T->ps, sc2 = sv_scratch(s);
  uint32_t grp = sv_begin(s, (uint64_t)groups, BQ);
  sb_if guard;
  sb_if_begin(b, &guard, sb_ult(b, grp, sb_u32(b, (uint32_t)groups)), false);
  uint32_t bh = sb_div(b, grp, sb_u32(b, (uint32_t)nt)), j0 = sb_mulc(b, sb_mod(b, grp, sb_u32(b, (uint32_t)nt)), BQ);
  uint32_t lid = sb_lid(b), kj = sb_add(b, j0, lid), SS = sb_u32(b, (uint32_t)S), valid = sb_ult(b, kj, SS);
  uint32_t rbase = sb_mulc(b, bh, (uint32_t)S), row = sb_add(b, rbase, sb_select(b, b->t_u32, valid, kj, sb_u32(b, 0)));
  uint32_t krow = sb_mulc(b, row, (uint32_t)D), obase = sb_mulc(b, rbase, (uint32_t)D);
  sb_lv acc[128], sc[BKV], dp[BKV];
  for (int c = 0; c < D; c++) acc[c] = sb_local(b, b->t_f32, sb_f32(b, 0.f));
  for (int i = 0; i < BKV; i++) sc[i] = sb_local(b, b->t_f32, 0), dp[i] = sb_local(b, b->t_f32, 0);
  /* causal: queries from the block holding the tile's first key on */
  uint32_t istart = A->causal ? sb_mulc(b, sb_div(b, j0, sb_u32(b, BKV)), BKV) : sb_u32(b, 0);
  sb_loop il;
  uint32_t i0 = sb_for(b, &il, istart, SS, sb_u32(b, BKV));
  stage_rows(A, Qs, 1, obase, i0, BKV, SS, D);
  stage_rows(A, Gs, 0, obase, i0, BKV, SS, D);
  sb_barrier(b);
  for (int i = 0; i < BKV; i++) {
    sb_st(b, sc[i], sb_f32(b, 0.f));
    if (dk) sb_st(b, dp[i], sb_f32(b, 0.f));
  }
  sb_loop dl;
  uint32_t c = sb_for(b, &dl, sb_u32(b, 0), sb_u32(b, (uint32_t)D), sb_u32(b, 1));
  uint32_t kc = sb_load_f(b, 2, A->dt, sb_add(b, krow, c)), vc = dk ? sb_load_f(b, 3, A->dt, sb_add(b, krow, c)) : 0;
  for (int i = 0; i < BKV; i++) {
    uint32_t off = sb_addc(b, c, (uint32_t)(i * D));
    sb_st(b, sc[i], sb_fma(b, sb_sh_ld(b, Qs, b->t_f32, off), kc, sb_ld(b, sc[i])));
    if (dk) sb_st(b, dp[i], sb_fma(b, sb_sh_ld(b, Gs, b->t_f32, off), vc, sb_ld(b, dp[i])));
  }
  sb_for_end(b, &dl);
  uint32_t prow = sb_mulc(b, lid, BKV + 1);
  for (int i = 0; i < BKV; i++) {
    uint32_t qi = sb_addc(b, i0, (uint32_t)i), vis = sb_ult(b, qi, SS);
    if (A->causal) vis = sb_land(b, vis, sb_op2(b, SpvOpULessThanEqual, b->t_bool, kj, qi));
    uint32_t qr = sb_add(b, rbase, sb_select(b, b->t_u32, vis, qi, sb_u32(b, 0)));
    uint32_t p = sb_exp(b, sb_fsub(b, sb_fmul(b, sb_ld(b, sc[i]), sb_f32(b, A->scale)), sb_bits2f(b, sb_ldw(b, sc2, qr))));
    if (dk) p = sb_fmul(b, p, sb_fsub(b, sb_ld(b, dp[i]), sb_bits2f(b, sb_ldw(b, sc2, sb_addc(b, qr, (uint32_t)R)))));
    sb_sh_st(b, Ps, b->t_f32, sb_addc(b, prow, (uint32_t)i), sb_select(b, b->t_f32, vis, p, sb_f32(b, 0.f)));
  }
  sb_loop jl;
  uint32_t i = sb_for(b, &jl, sb_u32(b, 0), sb_u32(b, BKV), sb_u32(b, 1));
  uint32_t w = sb_sh_ld(b, Ps, b->t_f32, sb_add(b, prow, i)), rw = sb_mulc(b, i, (uint32_t)D);
  for (int cc = 0; cc < D; cc++)
    sb_st(b, acc[cc], sb_fma(b, w, sb_sh_ld(b, dk ? Qs : Gs, b->t_f32, sb_addc(b, rw, (uint32_t)cc)), sb_ld(b, acc[cc])));
  sb_for_end(b, &jl);
  sb_barrier(b);
  sb_for_end(b, &il);
  sb_if st;
  sb_if_begin(b, &st, valid, false);
  store_regs(A, sb_addc(b, krow, (uint32_t)((dk ? 1 : 2) * R * D)), acc, D, sb_f32(b, dk ? A->scale : 1.f));
  sb_if_end(b, &st);
  sb_if_end(b, &guard);
  sv_end(s);
}

static void q_tiled(attn *A, const tiles *T) {
  sv *s = A->s;
  sb *b = A->b;
  int64_t D = A->D, S = A->SQ, R = A->BH * S, nt = sv_ceil_div(S, BQ), groups = A->BH * nt;
  uint32_t Ks = T->t0, Vs = T->t1, Ps = T->ps, sc2 = sv_scratch(s);
  uint32_t grp = sv_begin(s, (uint64_t)groups, BQ);
  sb_if guard;
  sb_if_begin(b, &guard, sb_ult(b, grp, sb_u32(b, (uint32_t)groups)), false);
  uint32_t bh = sb_div(b, grp, sb_u32(b, (uint32_t)nt)), q0 = sb_mulc(b, sb_mod(b, grp, sb_u32(b, (uint32_t)nt)), BQ);
  uint32_t lid = sb_lid(b), qi = sb_add(b, q0, lid), SS = sb_u32(b, (uint32_t)S), valid = sb_ult(b, qi, SS);
  uint32_t rbase = sb_mulc(b, bh, (uint32_t)S), row = sb_add(b, rbase, sb_select(b, b->t_u32, valid, qi, sb_u32(b, 0)));
  uint32_t qrow = sb_mulc(b, row, (uint32_t)D), obase = sb_mulc(b, rbase, (uint32_t)D);
  uint32_t Li = sb_bits2f(b, sb_ldw(b, sc2, row)), Di = sb_bits2f(b, sb_ldw(b, sc2, sb_addc(b, row, (uint32_t)R)));
  sb_lv acc[128], sc[BKV], dp[BKV];
  for (int c = 0; c < D; c++) acc[c] = sb_local(b, b->t_f32, sb_f32(b, 0.f));
  for (int j = 0; j < BKV; j++) sc[j] = sb_local(b, b->t_f32, 0), dp[j] = sb_local(b, b->t_f32, 0);
  uint32_t kend = SS;
  if (A->causal) {
    uint32_t a[2] = {sb_addc(b, q0, BQ), SS};
    kend = sb_glsl(b, GLSLstd450UMin, b->t_u32, 2, a);
  }
  sb_loop kl;
  uint32_t k0 = sb_for(b, &kl, sb_u32(b, 0), kend, sb_u32(b, BKV));
  stage_rows(A, Ks, 2, obase, k0, BKV, SS, D);
  stage_rows(A, Vs, 3, obase, k0, BKV, SS, D);
  sb_barrier(b);
  for (int j = 0; j < BKV; j++) sb_st(b, sc[j], sb_f32(b, 0.f)), sb_st(b, dp[j], sb_f32(b, 0.f));
  sb_loop dl;
  uint32_t c = sb_for(b, &dl, sb_u32(b, 0), sb_u32(b, (uint32_t)D), sb_u32(b, 1));
  uint32_t qc = sb_load_f(b, 1, A->dt, sb_add(b, qrow, c)), gc = sb_load_f(b, 0, A->dt, sb_add(b, qrow, c));
  for (int j = 0; j < BKV; j++) {
    uint32_t off = sb_addc(b, c, (uint32_t)(j * D));
    sb_st(b, sc[j], sb_fma(b, qc, sb_sh_ld(b, Ks, b->t_f32, off), sb_ld(b, sc[j])));
    sb_st(b, dp[j], sb_fma(b, gc, sb_sh_ld(b, Vs, b->t_f32, off), sb_ld(b, dp[j])));
  }
  sb_for_end(b, &dl);
  uint32_t prow = sb_mulc(b, lid, BKV + 1);
  for (int j = 0; j < BKV; j++) {
    uint32_t key = sb_addc(b, k0, (uint32_t)j), vis = sb_ult(b, key, SS);
    if (A->causal) vis = sb_land(b, vis, sb_op2(b, SpvOpULessThanEqual, b->t_bool, key, qi));
    uint32_t p = sb_exp(b, sb_fsub(b, sb_fmul(b, sb_ld(b, sc[j]), sb_f32(b, A->scale)), Li));
    uint32_t ds = sb_fmul(b, p, sb_fsub(b, sb_ld(b, dp[j]), Di));
    sb_sh_st(b, Ps, b->t_f32, sb_addc(b, prow, (uint32_t)j), sb_select(b, b->t_f32, vis, ds, sb_f32(b, 0.f)));
  }
  sb_loop jl;
  uint32_t j = sb_for(b, &jl, sb_u32(b, 0), sb_u32(b, BKV), sb_u32(b, 1));
  uint32_t w = sb_sh_ld(b, Ps, b->t_f32, sb_add(b, prow, j)), rw = sb_mulc(b, j, (uint32_t)D);
  for (int cc = 0; cc < D; cc++)
    sb_st(b, acc[cc], sb_fma(b, w, sb_sh_ld(b, Ks, b->t_f32, sb_addc(b, rw, (uint32_t)cc)), sb_ld(b, acc[cc])));
  sb_for_end(b, &jl);
  sb_barrier(b);
  sb_for_end(b, &kl);
  sb_if st;
  sb_if_begin(b, &st, valid, false);
  store_regs(A, qrow, acc, D, sb_f32(b, A->scale));
  sb_if_end(b, &st);
  sb_if_end(b, &guard);
  sv_end(s);
}

static bool emit_grad_tiled(attn *A) {
  A->s->scratch = (uint64_t)(A->BH * A->SQ) * 8;
  tiles T = tiles_of(A);
  fwd_tiled(A, &T, true);
  kv_tiled(A, &T, false);
  kv_tiled(A, &T, true);
  q_tiled(A, &T);
  return true;
}

/* ---- the cooperative-matrix forward (FlashAttention style) ----
 *
 * For 16-bit q, k, v with d == dv, d % 16 == 0, d <= 128, on devices with
 * SPV_NV_cooperative_matrix (the GEMM's 16 x 16 x 16, f16 x f16 + f32; see
 * emit_gemm.c's emit_coopmat): a workgroup of 4 subgroups of 32 per 64 query
 * rows of one (batch, head), subgroup sg owning rows 16 sg.. of them.
 *   - The Q tile is staged once in shared memory as f16 (bf16 converted, as
 *     the GEMM does: 11 bits of mantissa, f16's range), and each subgroup
 *     keeps its 16 x d of it as d / 16 A operands in registers.
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

/* f16 element e (counted from the start of the uvec4 array sh) as f32. */
static uint32_t attn_sh_half(sb *b, uint32_t sh, uint32_t e) {
  uint32_t quad = sb_sh_ld(b, sh, sb_uvec4_type(b), sb_shr(b, e, sb_u32(b, 3)));
  uint32_t a[2] = {quad, sb_and(b, sb_shr(b, e, sb_u32(b, 1)), sb_u32(b, 3))};
  uint32_t w = sb_op(b, SpvOpVectorExtractDynamic, b->t_u32, 2, a);
  return sb_f16tof(b, sb_and(b, sb_shr(b, w, sb_mulc(b, sb_and(b, e, sb_u32(b, 1)), 16)), sb_u32(b, 0xffff)));
}

/* Rows r0.. r0 + nrows - 1 of a [.., D] 16-bit operand (binding bind, row 0
 * at element base, a multiple of 8) into shared sh as f16 lines of c->lq
 * quads from quad dst; rows at or past `limit` as zeros.  All 32 ASG
 * threads take part. */
static void coop_stage(attn *A, const coop_attn *c, uint32_t sh, uint32_t bind, uint32_t base, uint32_t r0, int nrows,
                       uint32_t limit, uint32_t dst) {
  sb *b = A->b;
  uint32_t per = (uint32_t)(A->D / ACQ), total = (uint32_t)nrows * per, threads = 32 * ASG, q4 = sb_uvec4_type(b);
  uint32_t lid = sb_lid(b), qbase = sb_shr(b, base, sb_u32(b, 3)), zero = sb_u32(b, 0);
  for (uint32_t i = 0; i < (total + threads - 1) / threads; i++) {
    uint32_t u = sb_addc(b, lid, i * threads);
    sb_if g;
    if (total % threads) sb_if_begin(b, &g, sb_ult(b, u, sb_u32(b, total)), false);
    uint32_t line = sb_div(b, u, sb_u32(b, per)), q = sb_mod(b, u, sb_u32(b, per)), r = sb_add(b, r0, line);
    uint32_t ok = sb_ult(b, r, limit);
    uint32_t at = sb_add(b, qbase, sb_add(b, sb_mulc(b, r, per), q));
    uint32_t v = sb_ld4(b, bind, sb_select(b, b->t_u32, ok, at, zero)), w[4]; /* out of range: quad 0, zeros stored */
    for (uint32_t k = 0; k < 4; k++) {
      uint32_t a[2] = {v, k}, x = sb_op(b, SpvOpCompositeExtract, b->t_u32, 2, a);
      if (A->dt == MLC_DT_BF16) /* a bf16 pair as an f16 pair */
        x = sb_pack_h2(b, sb_bits2f(b, sb_shl(b, x, sb_u32(b, 16))), sb_bits2f(b, sb_and(b, x, sb_u32(b, 0xffff0000u))));
      w[k] = sb_select(b, b->t_u32, ok, x, zero);
    }
    sb_sh_st(b, sh, q4, sb_add(b, sb_addc(b, sb_mulc(b, line, c->lq), dst), q), sb_op(b, SpvOpCompositeConstruct, q4, 4, w));
    if (total % threads) sb_if_end(b, &g);
  }
}

typedef struct {
  sb *b;
  bool emulate;
  uint32_t sh, mat_h, mat_f, zero, pq;
} coop_ctx;

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

static void fwd_coop(attn *A, bool emulate) {
  sv *s = A->s;
  sb *b = A->b;
  int64_t D = A->D, nt = sv_ceil_div(A->SQ, AQ), groups = A->BH * nt;
  /* blocks of 64 keys where they fit (NVIDIA's 48 KiB, lavapipe's 32) */
  uint32_t limit = emulate ? 32768u : 49152u;
  coop_attn c = coop_attn_of(D, 64);
  if (coop_attn_bytes(&c) + (emulate ? 512 : 0) > limit) c = coop_attn_of(D, 32);
  MLC_ASSERT(coop_attn_bytes(&c) + (emulate ? 512 : 0) <= limit);
  int ak = c.ak, nd = (int)(D / 16), nk = ak / 16;
  bool lazy = !s->p->opts.spirv_rescale_always; /* --spirv-attention-rescale=always: O at every block (for measurements) */
  uint32_t q4 = sb_uvec4_type(b);
  coop_ctx k = {.b = b, .emulate = emulate};
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
  k.sh = sb_shared(b, q4, c.total);                         /* [K | V (Q first)] [ASG][P or scratch] */
  uint32_t mx = sb_shared(b, b->t_f32, 32 * ASG);           /* [ASG * 32]: a lane's row max, then its l */
  uint32_t red = emulate ? sb_shared(b, b->t_f32, 32 * ASG) : 0; /* [ASG * 32]: the emulation's vote */
  uint32_t grp = sv_begin(s, (uint64_t)groups, 32 * ASG);
  sb_if guard;
  sb_if_begin(b, &guard, sb_ult(b, grp, sb_u32(b, (uint32_t)groups)), false);
  uint32_t bh = sb_div(b, grp, sb_u32(b, (uint32_t)nt)), q0 = sb_mulc(b, sb_mod(b, grp, sb_u32(b, (uint32_t)nt)), AQ);
  uint32_t lid = sb_lid(b), sg = sb_shr(b, lid, sb_u32(b, 5)), lane = sb_and(b, lid, sb_u32(b, 31));
  uint32_t r = sb_shr(b, lane, sb_u32(b, 1)), hf = sb_and(b, lane, sb_u32(b, 1)), col = sb_mulc(b, hf, 8);
  uint32_t SQ = sb_u32(b, (uint32_t)A->SQ), SK = sb_u32(b, (uint32_t)A->SK), st0 = sb_u32(b, 0);
  uint32_t qi = sb_add(b, q0, sb_add(b, sb_mulc(b, sg, 16), r)); /* the lane's query row */
  uint32_t scr = sb_addc(b, sb_mulc(b, sg, c.sgq), c.pq);      /* the subgroup's P and scratch */
  uint32_t lat = sb_add(b, scr, sb_add(b, sb_mulc(b, r, 5), sb_shr(b, col, sb_u32(b, 2))));
  uint32_t kvbase = sb_mulc(b, bh, (uint32_t)(A->SK * D));
  uint32_t partner = sb_op2(b, SpvOpBitwiseXor, b->t_u32, lid, sb_u32(b, 1));

  /* the Q tile, into registers */
  coop_stage(A, &c, k.sh, 0, sb_mulc(b, bh, (uint32_t)(A->SQ * D)), q0, AQ, SQ, 0);
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
    sb_arr_st(b, qv, d, attn_sh_half(b, k.sh, sb_add(b, e0, d)));
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
  coop_stage(A, &c, k.sh, 1, kvbase, k0, ak, SK, 0);
  coop_stage(A, &c, k.sh, 2, kvbase, k0, ak, SK, c.vq);
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
    } else {
      for (int e = 0; e < 8; e++) {
        sb_lv a = sb_local(b, b->t_f32, sb_f32(b, 0.f));
        uint32_t e0 = sb_mulc(b, sb_mulc(b, sb_add(b, col, sb_u32(b, (uint32_t)(16 * jb + e))), c.lq), ACQ);
        sb_loop l;
        uint32_t d = sb_for(b, &l, st0, sb_u32(b, (uint32_t)D), sb_u32(b, 1));
        sb_st(b, a, sb_fma(b, sb_arr_ld(b, qv, d), attn_sh_half(b, k.sh, sb_add(b, e0, d)), sb_ld(b, a)));
        sb_for_end(b, &l);
        v[e] = sb_ld(b, a);
      }
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
    for (int e = 0; e < 4; e++) w[e] = sb_pack_h2(b, p[2 * e], p[2 * e + 1]);
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
  } else {
    uint32_t pe = sb_mulc(b, sb_add(b, scr, sb_mulc(b, r, c.pl)), ACQ);
    for (int j = 0; j < nd; j++)
      for (int e = 0; e < 8; e++) {
        sb_lv a = sb_local(b, b->t_f32, sb_f32(b, 0.f));
        uint32_t ve = sb_add(b, sb_u32(b, c.vq * ACQ + (uint32_t)(16 * j + e)), col);
        sb_loop l;
        uint32_t t = sb_for(b, &l, st0, sb_u32(b, (uint32_t)ak), sb_u32(b, 1));
        uint32_t vt = attn_sh_half(b, k.sh, sb_add(b, ve, sb_mulc(b, t, c.lq * ACQ)));
        sb_st(b, a, sb_fma(b, attn_sh_half(b, k.sh, sb_add(b, pe, t)), vt, sb_ld(b, a)));
        sb_for_end(b, &l);
        sb_st(b, o[j][e], sb_fma(b, sb_ld(b, o[j][e]), corr, sb_ld(b, a)));
      }
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
  sb_if w;
  sb_if_begin(b, &w, sb_ult(b, qi, SQ), false);
  uint32_t at = sb_add(b, sb_mulc(b, sb_add(b, sb_mulc(b, bh, (uint32_t)A->SQ), qi), (uint32_t)A->DV), col);
  for (int j = 0; j < nd; j++) store8(A, sb_addc(b, at, (uint32_t)(16 * j)), ov[j], inv);
  sb_if_end(b, &w);
  sb_if_end(b, &guard);
  sv_end(s);
  sv_coopmat16(s, emulate);
}

/* Whether the cooperative-matrix forward takes this attention: as the
 * variant for devices with cooperative matrices only under
 * --spirv-attention=coopmat (it has not yet run on NVIDIA's driver:
 * bench/results/spirv-attention-2026-11-30.md); its emulation under
 * --spirv-emulate-coopmat. */
static bool coop_fits(const attn *A, bool grad, bool variant) {
  if (grad || (variant && !A->s->p->opts.spirv_attention_coopmat)) return false;
  return (A->dt == MLC_DT_BF16 || A->dt == MLC_DT_F16) && A->D == A->DV && A->D % 16 == 0 && A->D <= 128 &&
         A->s->n->type.dtype == A->dt;
}

bool sv_emit_attention(sv *s) {
  bool grad = s->n->op == MLC_OP_ATTENTION_GRAD;
  const mlc_type *qt = sv_in(s, grad ? 1 : 0), *kt = sv_in(s, grad ? 2 : 1), *vt = sv_in(s, grad ? 3 : 2);
  attn A = {.s = s, .b = s->b, .dt = qt->dtype, .BH = qt->dim[0] * qt->dim[1], .SQ = qt->dim[2], .SK = kt->dim[2],
            .D = qt->dim[3], .DV = vt->dim[3], .causal = s->n->a.causal != 0, .scale = (float)s->n->a.f};
  if (!mlc_dtype_is_float((mlc_dtype)A.dt)) return sv_fail(s, "attention of an integer tensor");
  if (!sv_check_size(s, mlc_type_numel(&s->n->type)) || !sv_check_size(s, mlc_type_numel(kt)) || !sv_check_size(s, mlc_type_numel(vt)))
    return false;
  if (A.SK < 1 || A.D < 1 || A.DV < 1) return sv_fail(s, "attention with no keys");
  if (s->coopmat_variant) {
    if (!coop_fits(&A, grad, true)) { /* declined: the kernel below alone */
      sb_entry_begin(s->b, "main0", 1, 1, (uint32_t[2]){0, 0});
      sb_entry_end(s->b);
      s->nd = 1;
      return true;
    }
    fwd_coop(&A, false);
    return true;
  }
  /* the check of the cooperative-matrix kernel on a device without it (fwd_coop) */
  if (coop_fits(&A, grad, false) && s->p->opts.spirv_emulate_coopmat) {
    fwd_coop(&A, true);
    return true;
  }
  if (A.D <= 128 && A.DV <= 128) return grad ? emit_grad_tiled(&A) : emit_fwd_tiled(&A);
  return grad ? emit_grad(&A) : emit_fwd(&A);
}
