/* Weight-only quantisation's packing (passes/quantize.c makes the
 * parameters, the qlinear kernels read them): a weight w[n, k] in f32
 * becomes i32 [n, mlc_quant_words(k, bits, group, scheme)].  Each row holds
 * its k codes, 32 / bits to a word (element j in bits [bits * (j %
 * per_word), + bits) of word j / per_word), then its k / group scales and
 * (asymmetric only) mins:
 * - bf16 (MLC_PLAN_QUANT_BF16 in the scheme): symmetric, group g's scale in
 *   bits [16 * (g % 2), +16) of word g / 2 after the codes (the last word's
 *   top half 0 where k / group is odd); asymmetric, word g after the codes
 *   holds group g's scale in its low 16 bits and its min in its high 16;
 * - f32: the k / group scales a word each, then the k / group mins.
 *
 * Symmetric per group: scale = max |w| / qmax (qmax 127 for int8, 7 for
 * int4; 1 for a group of zeros), code = round(w / scale) clamped to
 * [-qmax, qmax], stored in two's complement; w is read back as code * scale.
 *
 * Asymmetric per group (llama.cpp's Q4_1 form): lo = min w, scale = (max w
 * - lo) / (2^bits - 1) (1 for a group whose max is its min, or where the
 * quotient underflows to 0), code =
 * round((w - lo) / scale) clamped to [0, 2^bits - 1], stored unsigned; w
 * is read back as lo + code * scale.
 *
 * In bf16, lo is rounded toward -inf, and the scale (computed from the
 * rounded lo) toward +inf, before the codes are made with them: every
 * weight of a group then lies in [lo, lo + qmax * scale] (symmetric: within
 * qmax * scale of 0), so clamping moves no code by more than f32 rounding,
 * and each weight is read back within scale / 2 (the rounded scale) as in
 * f32.  A value past bf16's largest finite one (3.39e38) is rounded to that
 * one instead of to inf: such a group's lowest weights clamp to code 0.
 * A group far from zero with a narrow range loses precision in bf16 (lo's
 * rounding, up to 2^-8 |lo|, widens the range): weights centred on zero,
 * the usual case, lose none.
 *
 * The codes round half to even.  A NaN weight takes no part in its group's
 * range; its code is -qmax (symmetric) or 0 (asymmetric: read back as lo). */
#ifndef MLC_RUNTIME_QUANT_H
#define MLC_RUNTIME_QUANT_H

#include <stdbool.h>
#include <stdint.h>

#include "runtime/plan.h" /* MLC_PLAN_QUANT_* */

/* w [n, k] -> out [n, mlc_quant_words(k, bits, group, scheme)]; k a multiple of group, group of 8; scheme
 * MLC_PLAN_QUANT_* flags. */
void mlc_quant_pack(const float *w, int64_t n, int64_t k, int bits, int group, int scheme, int32_t *out);
static inline int64_t mlc_quant_words(int64_t k, int bits, int group, int scheme) {
  int64_t halves = (scheme & MLC_PLAN_QUANT_ASYM ? 2 : 1) * (k / group); /* scales and mins */
  return k * bits / 32 + (scheme & MLC_PLAN_QUANT_BF16 ? (halves + 1) / 2 : halves);
}

#endif
