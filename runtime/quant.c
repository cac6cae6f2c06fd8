/* Packing of quantised weights (see quant.h). */
#include "runtime/quant.h"

#include <math.h>
#include <string.h>

/* One group of the symmetric scheme: its scale, and its codes into the row's words. */
static float pack_sym(const float *row, int64_t g0, int group, int bits, uint32_t *codes) {
  int per_word = 32 / bits;
  float qmax = bits == 8 ? 127.0f : 7.0f;
  uint32_t field = (1u << bits) - 1;
  float amax = 0;
  for (int64_t j = g0; j < g0 + group; j++) amax = fmaxf(amax, fabsf(row[j]));
  float scale = amax > 0 ? amax / qmax : 1.0f;
  for (int64_t j = g0; j < g0 + group; j++) {
    float q = nearbyintf(row[j] / scale);
    if (!(q >= -qmax)) q = -qmax; /* NaN too: the cast below never sees one out of range */
    if (q > qmax) q = qmax;
    uint32_t bitsv = (uint32_t)(int32_t)q & field;
    codes[j / per_word] |= bitsv << (bits * (j % per_word));
  }
  return scale;
}

/* One group of the asymmetric scheme: its scale and min, and its codes into the row's words. */
static float pack_asym(const float *row, int64_t g0, int group, int bits, uint32_t *codes, float *out_lo) {
  int per_word = 32 / bits;
  float qmax = (float)((1u << bits) - 1);
  float lo = INFINITY, hi = -INFINITY;
  for (int64_t j = g0; j < g0 + group; j++) lo = fminf(lo, row[j]), hi = fmaxf(hi, row[j]); /* NaNs left out */
  if (!(lo <= hi)) lo = hi = 0; /* every weight NaN */
  float scale = hi > lo ? (hi - lo) / qmax : 1.0f;
  for (int64_t j = g0; j < g0 + group; j++) {
    float q = nearbyintf((row[j] - lo) / scale);
    if (!(q >= 0)) q = 0; /* NaN too */
    if (q > qmax) q = qmax;
    codes[j / per_word] |= (uint32_t)q << (bits * (j % per_word));
  }
  *out_lo = lo;
  return scale;
}

void mlc_quant_pack(const float *w, int64_t n, int64_t k, int bits, int group, bool asym, int32_t *out) {
  int64_t words = mlc_quant_words(k, bits, group, asym), code_words = k * bits / 32, ngroups = k / group;
  for (int64_t r = 0; r < n; r++) {
    const float *row = w + r * k; /* (k) */
    uint32_t *codes = (uint32_t *)(out + r * words); /* (k * bits / 32) */
    float *scales = (float *)(codes + code_words);   /* (k / group) */
    float *mins = scales + ngroups;                  /* (k / group), asymmetric only */
    memset(codes, 0, (size_t)code_words * sizeof *codes);
    for (int64_t g0 = 0; g0 < k; g0 += group)
      scales[g0 / group] = asym ? pack_asym(row, g0, group, bits, codes, &mins[g0 / group]) : pack_sym(row, g0, group, bits, codes);
  }
}
