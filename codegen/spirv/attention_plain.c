/* Attention, plain: a thread per row, rows in private arrays, any head dim (see attention.h and the overview in emit_attention.c). */
#include <stdlib.h>

#include "codegen/spirv/attention.h"

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

bool attn_fwd_plain(attn *A) {
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

bool attn_grad_plain(attn *A) {
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
