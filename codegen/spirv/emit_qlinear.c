/* qlinear (--quantize int8|int4[:asym][:scales=f32]): y[m, n] = sum_k x[m, k] dequant(w)[n, k],
 * w packed as runtime/quant.h lays it out: per row its k codes (int8 four to
 * a word, int4 eight, element j in bits [bits (j % per), +bits), two's
 * complement; asymmetric: unsigned), then a scale per group of k (and,
 * asymmetric, a min per group), bf16 (two to a word; asymmetric, a group's
 * scale and min in one word) or f32 (a word each, the mins after the
 * scales).  A word of codes lies inside one group (groups are multiples of
 * 8), so its codes' sum is scaled once; the
 * asymmetric form adds the group's min times the word's sum of x
 * (sum (lo + code s) x = s sum code x + lo sum x).  Dequantised in
 * registers: no f32 weight is formed.
 *
 * At most 4 rows of x (a decode step): a workgroup of 64 per output column,
 * each thread taking every 64th word of codes of w's row against each row
 * of x, a shared-memory tree adding the threads' sums (as emit_gemm.c's
 * GEMV).  More rows (a prefill): a thread per output, walking the row of
 * codes; correct, and meant for a prompt's few dozen rows.
 *
 * Both store through an epilogue where the qlinear heads a fused group (the
 * fuse pass's qlinear_epilogues: the bias add, activation and residual add
 * after it; emit_fused.c), as the GEMMs' kernels do. */
#include "codegen/spirv/emit.h"

#define QV_MAX_M 4
#define QV_THREADS 64

typedef struct {
  int bits, per;          /* bits a code, codes a word */
  bool asym, bf16;        /* unsigned codes and a min per group; the scales (and mins) bf16 */
  int64_t M, N, K, group;
  int64_t cw, rw;         /* words of codes a row, words a row (codes and scales) */
  int odt;                /* the store: dtype, and the epilogue (NULL: the f32 result) */
  sv_epi_fn epi;
  void *ctx;
} qshape;

/* Stores result v of flat output index at, through the epilogue. */
static void store(sv *s, const qshape *q, uint32_t at, uint32_t v) {
  uint32_t lo = 0, hi = 0;
  if (q->epi) q->epi(s, q->ctx, at, v, &lo, &hi);
  else lo = sb_f2bits(s->b, v);
  sb_store_bits(s->b, sv_out(s), q->odt, at, lo, hi);
}

/* sum over the word's codes of code * x[m][k0 + e] for each row m (xrow[m]:
 * its first element), times the word's group's scale, into acc[m];
 * asymmetric, plus the group's min times the word's sum of x. */
static void word(sv *s, const qshape *q, uint32_t n, uint32_t c, const uint32_t *xrow, int rows, sb_lv *acc) {
  sb *b = s->b;
  uint32_t w = sb_ldw(b, 1, sb_add(b, sb_mulc(b, n, (uint32_t)q->rw), c));
  uint32_t k0 = sb_mulc(b, c, (uint32_t)q->per);
  uint32_t g = sb_div(b, k0, sb_u32(b, (uint32_t)q->group)), tail = sb_addc(b, sb_mulc(b, n, (uint32_t)q->rw), (uint32_t)q->cw);
  uint32_t top = sb_u32(b, 0xffff0000u), scale, lo = 0; /* a bf16 in the top half is its f32 */
  if (q->bf16 && q->asym) { /* word g: the scale low, the min high */
    uint32_t t = sb_ldw(b, 1, sb_add(b, tail, g));
    scale = sb_bits2f(b, sb_shl(b, t, sb_u32(b, 16)));
    lo = sb_bits2f(b, sb_and(b, t, top));
  } else if (q->bf16) { /* group g in half g % 2 of word g / 2: the low half shifted up by 16, the high by 0 */
    uint32_t t = sb_ldw(b, 1, sb_add(b, tail, sb_shr(b, g, sb_u32(b, 1))));
    uint32_t up = sb_mulc(b, sb_and(b, sb_addc(b, g, 1), sb_u32(b, 1)), 16);
    scale = sb_bits2f(b, sb_and(b, sb_shl(b, t, up), top));
  } else {
    scale = sb_bits2f(b, sb_ldw(b, 1, sb_add(b, tail, g)));
    if (q->asym) lo = sb_bits2f(b, sb_ldw(b, 1, sb_add(b, tail, sb_addc(b, g, (uint32_t)(q->K / q->group)))));
  }
  uint32_t code[8];
  if (q->asym) {
    for (int e = 0; e < q->per; e++) /* unsigned: shifted down and masked */
      code[e] = sb_op1(b, SpvOpConvertUToF, b->t_f32, sb_and(b, sb_shr(b, w, sb_u32(b, (uint32_t)(q->bits * e))),
                                                             sb_u32(b, (1u << q->bits) - 1)));
  }
  for (int e = 0; e < q->per && !q->asym; e++) { /* shift the code to the top, then arithmetically back: sign-extended */
    uint32_t up = sb_shl(b, w, sb_u32(b, (uint32_t)(32 - q->bits * (e + 1))));
    code[e] = sb_op1(b, SpvOpConvertSToF, b->t_f32, sb_op2(b, SpvOpShiftRightArithmetic, b->t_u32, up, sb_u32(b, (uint32_t)(32 - q->bits))));
  }
  for (int m = 0; m < rows; m++) {
    uint32_t sum = sb_f32(b, 0.f), at = sb_add(b, xrow[m], k0), xsum = sum;
    for (int e = 0; e < q->per; e++) {
      uint32_t xv = sb_load_f(b, 0, MLC_DT_F32, sb_addc(b, at, (uint32_t)e));
      sum = sb_fma(b, code[e], xv, sum);
      if (q->asym) xsum = sb_fadd(b, xsum, xv);
    }
    uint32_t a = sb_fma(b, sum, scale, sb_ld(b, acc[m]));
    sb_st(b, acc[m], q->asym ? sb_fma(b, xsum, lo, a) : a);
  }
}

static void gemv(sv *s, const qshape *q) {
  sb *b = s->b;
  uint32_t red = sb_shared(b, b->t_f32, QV_THREADS);
  uint32_t n = sv_begin(s, (uint64_t)q->N, QV_THREADS);
  sb_if guard;
  sb_if_begin(b, &guard, sb_ult(b, n, sb_u32(b, (uint32_t)q->N)), false); /* a whole workgroup in or out */
  sb_lv acc[QV_MAX_M];
  uint32_t xrow[QV_MAX_M] = {0};
  for (int m = 0; m < q->M; m++) acc[m] = sb_local(b, b->t_f32, sb_f32(b, 0.f)), xrow[m] = sb_u32(b, (uint32_t)(m * q->K));
  sb_loop l;
  uint32_t c = sb_for(b, &l, sb_lid(b), sb_u32(b, (uint32_t)q->cw), sb_u32(b, QV_THREADS));
  word(s, q, n, c, xrow, (int)q->M, acc);
  sb_for_end(b, &l);
  for (int m = 0; m < q->M; m++) {
    uint32_t sum = sb_wg_reduce(b, red, sb_ld(b, acc[m]), false);
    sb_if first;
    sb_if_begin(b, &first, sb_ieq(b, sb_lid(b), sb_u32(b, 0)), false);
    store(s, q, sb_addc(b, n, (uint32_t)(m * q->N)), sum);
    sb_if_end(b, &first);
  }
  sb_if_end(b, &guard);
  sv_end(s);
}

static void rows(sv *s, const qshape *q) {
  sb *b = s->b;
  sv_gs g;
  uint32_t i = sv_items_begin(s, &g, q->M * q->N), n = sb_mod(b, i, sb_u32(b, (uint32_t)q->N));
  uint32_t xrow = sb_mulc(b, sb_div(b, i, sb_u32(b, (uint32_t)q->N)), (uint32_t)q->K);
  sb_lv acc = sb_local(b, b->t_f32, sb_f32(b, 0.f));
  sb_loop l;
  uint32_t c = sb_for(b, &l, sb_u32(b, 0), sb_u32(b, (uint32_t)q->cw), sb_u32(b, 1));
  word(s, q, n, c, &xrow, 1, &acc);
  sb_for_end(b, &l);
  store(s, q, i, sb_ld(b, acc));
  sv_items_end(s, &g);
}

bool sv_emit_qlinear_of(sv *s, int bits, int group, int scheme, sv_epi_fn epi, void *ctx, int epi_dt) {
  const mlc_type *x = sv_in(s, 0), *w = sv_in(s, 1);
  qshape q = {.bits = bits, .group = group, .asym = scheme & MLC_QS_ASYM, .bf16 = scheme & MLC_QS_BF16,
              .K = x->dim[x->rank - 1], .N = w->dim[0], .odt = epi ? epi_dt : MLC_DT_F32, .epi = epi, .ctx = ctx};
  q.per = 32 / q.bits;
  q.M = mlc_type_numel(x) / q.K;
  q.cw = q.K * q.bits / 32;
  q.rw = w->dim[1];
  if (x->dtype != MLC_DT_F32 || (q.bits != 4 && q.bits != 8) || q.group % 8 || q.K % q.group ||
      q.rw != mlc_quant_row_words(q.K, q.bits, (int)q.group, scheme))
    return sv_fail(s, "qlinear of %s with %d-bit codes in groups of %lld: not the packed layout", mlc_dtype_name((mlc_dtype)x->dtype),
                   q.bits, (long long)q.group);
  if (!sv_check_size(s, mlc_type_numel(x)) || !sv_check_size(s, mlc_type_numel(w)) || !sv_check_size(s, q.M * q.N)) return false;
  if (q.M <= QV_MAX_M) gemv(s, &q);
  else rows(s, &q);
  return true;
}

bool sv_emit_qlinear(sv *s) { return sv_emit_qlinear_of(s, s->n->a.qbits, s->n->a.qgroup, s->n->a.qscheme, NULL, NULL, 0); }
