/* Weight-only quantisation's packing (passes/quantize.c makes the
 * parameters, the CPU's qlinear kernel reads them): a weight w[n, k] in f32
 * becomes i32 [n, k * bits / 32 + k / group].  Each row holds its k codes,
 * 32 / bits to a word (element j in bits [bits * (j % per_word), + bits) of
 * word j / per_word, two's complement), then its k / group scales as f32
 * bits.  Symmetric per group: scale = max |w| / qmax (qmax 127 for int8, 7
 * for int4; 1 for a group of zeros), code = round(w / scale) clamped to
 * [-qmax, qmax]; w is read back as code * scale. */
#ifndef MLC_RUNTIME_QUANT_H
#define MLC_RUNTIME_QUANT_H

#include <stdint.h>

/* w [n, k] -> out [n, mlc_quant_words(k, bits, group)]; k a multiple of group, group of 8. */
void mlc_quant_pack(const float *w, int64_t n, int64_t k, int bits, int group, int32_t *out);
static inline int64_t mlc_quant_words(int64_t k, int bits, int group) { return k * bits / 32 + k / group; }

#endif
