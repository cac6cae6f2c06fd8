/* Weight-only quantisation's packing (passes/quantize.c makes the
 * parameters, the qlinear kernels read them): a weight w[n, k] in f32
 * becomes i32 [n, mlc_quant_words(k, bits, group, asym)].  Each row holds
 * its k codes, 32 / bits to a word (element j in bits [bits * (j %
 * per_word), + bits) of word j / per_word), then its k / group scales as
 * f32 bits, then (asymmetric only) its k / group mins as f32 bits.
 *
 * Symmetric per group: scale = max |w| / qmax (qmax 127 for int8, 7 for
 * int4; 1 for a group of zeros), code = round(w / scale) clamped to
 * [-qmax, qmax], stored in two's complement; w is read back as code * scale.
 *
 * Asymmetric per group (llama.cpp's Q4_1 form): lo = min w, scale = (max w
 * - lo) / (2^bits - 1) (1 for a group whose max is its min), code =
 * round((w - lo) / scale) clamped to [0, 2^bits - 1], stored unsigned; w
 * is read back as lo + code * scale.
 *
 * Both round half to even.  A NaN weight takes no part in its group's
 * range; its code is -qmax (symmetric) or 0 (asymmetric: read back as lo). */
#ifndef MLC_RUNTIME_QUANT_H
#define MLC_RUNTIME_QUANT_H

#include <stdbool.h>
#include <stdint.h>

/* w [n, k] -> out [n, mlc_quant_words(k, bits, group, asym)]; k a multiple of group, group of 8. */
void mlc_quant_pack(const float *w, int64_t n, int64_t k, int bits, int group, bool asym, int32_t *out);
static inline int64_t mlc_quant_words(int64_t k, int bits, int group, bool asym) {
  return k * bits / 32 + (asym ? 2 : 1) * (k / group);
}

#endif
