/* Packing of quantised weights (see quant.h). */
#include "runtime/quant.h"

#include <math.h>
#include <string.h>

void mlc_quant_pack(const float *w, int64_t n, int64_t k, int bits, int group, int32_t *out) {
  int64_t words = mlc_quant_words(k, bits, group), code_words = k * bits / 32;
  int per_word = 32 / bits;
  float qmax = bits == 8 ? 127.0f : 7.0f;
  uint32_t field = (1u << bits) - 1;
  for (int64_t r = 0; r < n; r++) {
    const float *row = w + r * k; /* (k) */
    uint32_t *codes = (uint32_t *)(out + r * words); /* (k * bits / 32) */
    float *scales = (float *)(codes + code_words);   /* (k / group) */
    memset(codes, 0, (size_t)code_words * sizeof *codes);
    for (int64_t g0 = 0; g0 < k; g0 += group) {
      float amax = 0;
      for (int64_t j = g0; j < g0 + group; j++) amax = fmaxf(amax, fabsf(row[j]));
      float scale = amax > 0 ? amax / qmax : 1.0f;
      scales[g0 / group] = scale;
      for (int64_t j = g0; j < g0 + group; j++) {
        float q = nearbyintf(row[j] / scale);
        if (!(q >= -qmax)) q = -qmax; /* NaN too: the cast below never sees one out of range */
        if (q > qmax) q = qmax;
        uint32_t bitsv = (uint32_t)(int32_t)q & field;
        codes[j / per_word] |= bitsv << (bits * (j % per_word));
      }
    }
  }
}
