/* --quantize's packing (runtime/quant.c) against words worked out by hand:
 *   - asymmetric int4, one row of five groups of 8: a constant group (scale
 *     1, codes 0, min the constant), a group with a NaN (code 0) and two
 *     halves (rounded to even), a negative-only, a positive-only and a
 *     mixed group; codes eight to a word, element 0 in the low nibble,
 *     then the five scales, then the five mins;
 *   - asymmetric int8, two rows: element 0 in the low byte, unsigned codes
 *     up to 255, halves to even, a NaN;
 *   - symmetric int4, its layout as before: two's complement codes, one
 *     scale a group and no mins;
 *   - asymmetric read back (lo + code * scale) on random rows: every weight
 *     within half a step of itself, and each group's min read back exactly. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "runtime/quant.h"

static uint32_t bits_of(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static float float_of(int32_t w) {
  float f;
  memcpy(&f, &w, sizeof f);
  return f;
}

static void expect_words(const int32_t *got, const uint32_t *want, int n) {
  for (int i = 0; i < n; i++)
    if ((uint32_t)got[i] != want[i]) fail_msg("word %d: 0x%08x, expected 0x%08x", i, (unsigned)got[i], (unsigned)want[i]);
}

static void test_asym_int4(void **state) {
  (void)state;
  const float w[40] = {
      0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f,          /* constant: scale 1, codes 0, min 0.5 */
      0, 15, NAN, 2.5f, 3.5f, 7, 1, 14.5f,                     /* lo 0, hi 15, scale 1: 0 15 0 2 4 7 1 14 */
      -3, -1.5f, -0.75f, -2.25f, -3, -1.5f, -2, -2.5f,         /* lo -3, scale 2.25 / 15: 0 10 15 5 0 10 7 3 */
      1, 2, 3, 4, 5, 6, 7, 8.5f,                               /* lo 1, scale 0.5: 0 2 4 6 8 10 12 15 */
      -1, 2, 0, 0.4f, -0.4f, 1, 1.2f, -0.8f,                   /* lo -1, scale 0.2: 0 15 5 7 3 10 11 1 */
  };
  assert_int_equal(mlc_quant_words(40, 4, 8, true), 5 + 2 * 5);
  int32_t out[15];
  memset(out, 0x55, sizeof out);
  mlc_quant_pack(w, 1, 40, 4, 8, true, out);
  const uint32_t want[15] = {
      0x00000000u, 0xe17420f0u, 0x37a05fa0u, 0xfca86420u, 0x1ba375f0u, /* codes */
      bits_of(1.0f), bits_of(1.0f), bits_of(2.25f / 15), bits_of(0.5f), bits_of(3.0f / 15), /* scales */
      bits_of(0.5f), bits_of(0.0f), bits_of(-3.0f), bits_of(1.0f), bits_of(-1.0f),          /* mins */
  };
  expect_words(out, want, 15);
}

static void test_asym_int8(void **state) {
  (void)state;
  const float w[16] = {
      0, 255, 128.5f, 127.5f, 3, NAN, 254.6f, 1, /* lo 0, hi 255, scale 1: 0 255 128 128 3 0 255 1 */
      -8, -8, -8, -8, -8, -8, -8, -8,            /* constant and negative: scale 1, min -8 */
  };
  int32_t out[2 * 4];
  mlc_quant_pack(w, 2, 8, 8, 8, true, out);
  const uint32_t want[8] = {0x8080ff00u, 0x01ff0003u, bits_of(1.0f), bits_of(0.0f),
                            0, 0, bits_of(1.0f), bits_of(-8.0f)};
  expect_words(out, want, 8);
}

static void test_sym_int4(void **state) {
  (void)state;
  const float w[8] = {-7, 7, 3.5f, 2.5f, -3.5f, 0, 1, NAN}; /* amax 7, scale 1: -7 7 4 2 -4 0 1, NaN -7 */
  assert_int_equal(mlc_quant_words(8, 4, 8, false), 2);
  int32_t out[3] = {0, 0, 0x12345678};
  mlc_quant_pack(w, 1, 8, 4, 8, false, out);
  const uint32_t want[3] = {0x910c2479u, bits_of(1.0f), 0x12345678u}; /* no min: the word after is untouched */
  expect_words(out, want, 3);
}

/* lo + code * scale of element j of row r of a packed asymmetric weight. */
static float read_back(const int32_t *packed, int64_t k, int bits, int group, int64_t r, int64_t j) {
  const int32_t *row = packed + r * mlc_quant_words(k, bits, group, true);
  int per = 32 / bits;
  uint32_t code = (uint32_t)row[j / per] >> (bits * (j % per)) & ((1u << bits) - 1);
  int64_t cw = k * bits / 32, g = j / group;
  return float_of(row[cw + k / group + g]) + (float)code * float_of(row[cw + g]);
}

static void test_asym_read_back(void **state) {
  (void)state;
  enum { N = 3, K = 96 };
  static float w[N * K];
  uint64_t s = 12345;
  for (int i = 0; i < N * K; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    w[i] = (float)((double)(s >> 11) * 0x1.0p-53 * 2 - 0.7); /* [-0.7, 1.3): groups off centre */
  }
  static int32_t out[N * (K + 2 * K / 8)];
  for (int bits = 4; bits <= 8; bits += 4)
    for (int group = 8; group <= K; group *= 2) {
      if (K % group) continue;
      mlc_quant_pack(w, N, K, bits, group, true, out);
      for (int64_t r = 0; r < N; r++)
        for (int64_t g0 = 0; g0 < K; g0 += group) {
          float lo = INFINITY, hi = -INFINITY;
          for (int64_t j = g0; j < g0 + group; j++) lo = fminf(lo, w[r * K + j]), hi = fmaxf(hi, w[r * K + j]);
          float step = (hi - lo) / (float)((1 << bits) - 1);
          for (int64_t j = g0; j < g0 + group; j++) {
            float v = w[r * K + j], back = read_back(out, K, bits, group, r, j);
            if (!(fabsf(back - v) <= 0.5f * step * 1.0001f))
              fail_msg("int%d group %d row %lld element %lld: %g reads back as %g (step %g)", bits, group, (long long)r,
                       (long long)j, v, back, step);
            if (v == lo) assert_true(back == lo); /* code 0: the min exactly */
          }
        }
    }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_asym_int4),
      cmocka_unit_test(test_asym_int8),
      cmocka_unit_test(test_sym_int4),
      cmocka_unit_test(test_asym_read_back),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
