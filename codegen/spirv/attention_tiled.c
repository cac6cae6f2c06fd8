/* Attention, tiled: rows through shared memory, head dims up to 128 (see attention.h and the overview in emit_attention.c). */
#include <stdio.h>
#include <stdlib.h>

#include "codegen/spirv/attention.h"

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

/* attention_kv's pos (binding 5, i32) clamped to [0, sk - t], as the CPU's kernel clamps it. */
static uint32_t kv_offset(attn *A) {
  sb *b = A->b;
  uint32_t a[2] = {sb_ldw(b, 5, sb_u32(b, 0)), sb_u32(b, 0)};
  uint32_t c[2] = {sb_glsl(b, GLSLstd450SMax, b->t_u32, 2, a), sb_u32(b, (uint32_t)(A->SK - A->SQ))};
  return sb_glsl(b, GLSLstd450UMin, b->t_u32, 2, c);
}

/* The tiled forward as one dispatch.  stats (attention_grad's dispatch 0:
 * g, q, k, v at bindings 0..3): instead of the output, each row's
 * L = m + log l and D = dO . O into scratch [L | D]. */
static void fwd_tiled(attn *A, const tiles *T, bool stats) {
  sv *s = A->s;
  sb *b = A->b;
  uint32_t qb = stats ? 1 : 0, kb = A->kv ? 3 : qb + 1, vb = A->kv ? 4 : qb + 2;
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
  uint32_t kend = SK, off = A->kv ? kv_offset(A) : 0; /* attention_kv: query i sees keys up to off + i */
  if (A->causal) { /* keys up to the tile's last row */
    uint32_t a[2] = {sb_addc(b, q0, BQ), SQ}, last = sb_glsl(b, GLSLstd450UMin, b->t_u32, 2, a);
    uint32_t c2[2] = {A->kv ? sb_add(b, last, off) : last, SK};
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
    if (A->causal) vis = sb_land(b, vis, sb_op2(b, SpvOpULessThanEqual, b->t_bool, key, A->kv ? sb_add(b, qi, off) : qi));
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

bool attn_fwd_tiled(attn *A) {
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

bool attn_grad_tiled(attn *A) {
  A->s->scratch = (uint64_t)(A->BH * A->SQ) * 8;
  tiles T = tiles_of(A);
  fwd_tiled(A, &T, true);
  kv_tiled(A, &T, false);
  kv_tiled(A, &T, true);
  q_tiled(A, &T);
  return true;
}

/* Rows of the chunk (binding src, [BH, t, w words]) into cache rows
 * [off, off + t) (binding dst, [BH, sk, w words]), a word a thread. */
static void kv_copy(attn *A, uint32_t src, uint32_t dst, int64_t w, uint32_t off) {
  sv *s = A->s;
  sb *b = A->b;
  sv_gs g;
  uint32_t i = sv_gs_begin(s, &g, A->BH * A->SQ * w), per = sb_u32(b, (uint32_t)(A->SQ * w));
  uint32_t at = sb_add(b, sb_mulc(b, sb_div(b, i, per), (uint32_t)(A->SK * w)), sb_add(b, sb_mulc(b, off, (uint32_t)w), sb_mod(b, i, per)));
  sb_stw(b, dst, at, sb_ldw(b, src, i));
  sv_gs_end(s, &g);
}

bool attn_kv_fits(int dt, int64_t d, int64_t dv, char *why, size_t whyn) {
  int es = mlc_dtype_size((mlc_dtype)dt);
  if (d > 128 || dv > 128)
    snprintf(why, whyn, "attention_kv: heads of dims %lld and %lld; the spirv kernel takes up to 128", (long long)d, (long long)dv);
  else if ((d * es) % 4 || (dv * es) % 4)
    snprintf(why, whyn, "attention_kv: %s heads of an odd dim (%lld, %lld) do not fill whole words of the caches on spirv",
             mlc_dtype_name((mlc_dtype)dt), (long long)d, (long long)dv);
  else
    return true;
  return false;
}

bool attn_kv_tiled(attn *A) {
  sv *s = A->s;
  int es = mlc_dtype_size((mlc_dtype)A->dt);
  char why[200];
  if (!attn_kv_fits(A->dt, A->D, A->DV, why, sizeof why)) return sv_fail(s, "%s", why);
  int64_t wk = A->D * es / 4, wv = A->DV * es / 4, n = A->BH * A->SQ * (wk > wv ? wk : wv);
  int64_t groups = sv_ceil_div(n, SV_THREADS);
  tiles T = tiles_of(A); /* the module's shared memory, before its first entry point (as attn_grad_tiled) */
  sv_begin(s, (uint64_t)(groups < SV_MAX_GROUPS ? groups : SV_MAX_GROUPS), SV_THREADS);
  uint32_t off = kv_offset(A);
  kv_copy(A, 1, 3, wk, off);
  kv_copy(A, 2, 4, wv, off);
  sv_end(s);
  fwd_tiled(A, &T, false);
  return true;
}
