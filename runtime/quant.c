/* Packing of quantised weights (see quant.h). */
#include "runtime/quant.h"

#include <math.h>
#include <string.h>

/* x in bf16, rounded away from zero (up: true) or toward it; its bits in the low 16.  NaN and inf keep theirs;
 * a finite x stays finite (away from zero past the largest finite bf16: that one). */
static uint32_t bf16_bits(float x, bool up) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  if (up && (u & 0xffffu) && (u & 0x7f800000u) != 0x7f800000u && ((u >> 16) & 0x7fffu) != 0x7f7fu) u += 0x10000u;
  return u >> 16;
}
static float bf16_value(uint32_t b) {
  uint32_t u = b << 16;
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}

/* One group of the symmetric scheme: its scale (rounded up to bf16 where bf16 is true), and its codes into the
 * row's words. */
static float pack_sym(const float *row, int64_t g0, int group, int bits, bool bf16, uint32_t *codes) {
  int per_word = 32 / bits;
  float qmax = bits == 8 ? 127.0f : 7.0f;
  uint32_t field = (1u << bits) - 1;
  float amax = 0;
  for (int64_t j = g0; j < g0 + group; j++) amax = fmaxf(amax, fabsf(row[j]));
  float scale = amax / qmax > 0 ? amax / qmax : 1.0f; /* 1 for zeros, and where the quotient underflows */
  if (bf16) scale = bf16_value(bf16_bits(scale, true));
  for (int64_t j = g0; j < g0 + group; j++) {
    float q = nearbyintf(row[j] / scale);
    if (!(q >= -qmax)) q = -qmax; /* NaN too: the cast below never sees one out of range */
    if (q > qmax) q = qmax;
    uint32_t bitsv = (uint32_t)(int32_t)q & field;
    codes[j / per_word] |= bitsv << (bits * (j % per_word));
  }
  return scale;
}

/* One group of the asymmetric scheme: its scale and min (in bf16 where bf16 is true: the min rounded down, the
 * scale up), and its codes into the row's words. */
static float pack_asym(const float *row, int64_t g0, int group, int bits, bool bf16, uint32_t *codes, float *out_lo) {
  int per_word = 32 / bits;
  float qmax = (float)((1u << bits) - 1);
  float lo = INFINITY, hi = -INFINITY;
  for (int64_t j = g0; j < g0 + group; j++) lo = fminf(lo, row[j]), hi = fmaxf(hi, row[j]); /* NaNs left out */
  if (!(lo <= hi)) lo = hi = 0; /* every weight NaN */
  if (bf16) lo = bf16_value(bf16_bits(lo, lo < 0)); /* toward -inf */
  float scale = (hi - lo) / qmax > 0 ? (hi - lo) / qmax : 1.0f; /* 1 for a constant group, and on underflow */
  if (bf16) scale = bf16_value(bf16_bits(scale, true));
  for (int64_t j = g0; j < g0 + group; j++) {
    float q = nearbyintf((row[j] - lo) / scale);
    if (!(q >= 0)) q = 0; /* NaN too */
    if (q > qmax) q = qmax;
    codes[j / per_word] |= (uint32_t)q << (bits * (j % per_word));
  }
  *out_lo = lo;
  return scale;
}

void mlc_quant_pack(const float *w, int64_t n, int64_t k, int bits, int group, int scheme, int32_t *out) {
  bool asym = scheme & MLC_PLAN_QUANT_ASYM, bf16 = scheme & MLC_PLAN_QUANT_BF16;
  int64_t words = mlc_quant_words(k, bits, group, scheme), code_words = k * bits / 32, ngroups = k / group;
  for (int64_t r = 0; r < n; r++) {
    const float *row = w + r * k; /* (k) */
    uint32_t *codes = (uint32_t *)(out + r * words); /* (k * bits / 32) */
    uint32_t *tail = codes + code_words;             /* the scales and mins: words - code_words */
    memset(codes, 0, (size_t)words * sizeof *codes);
    for (int64_t g = 0; g < ngroups; g++) {
      float lo = 0, scale = asym ? pack_asym(row, g * group, group, bits, bf16, codes, &lo)
                                 : pack_sym(row, g * group, group, bits, bf16, codes);
      if (!bf16) {
        memcpy(&tail[g], &scale, sizeof scale);
        if (asym) memcpy(&tail[ngroups + g], &lo, sizeof lo);
      } else if (asym) {
        tail[g] = bf16_bits(scale, false) | bf16_bits(lo, false) << 16; /* both exact in bf16 now */
      } else {
        tail[g / 2] |= bf16_bits(scale, false) << (16 * (g % 2));
      }
    }
  }
}
