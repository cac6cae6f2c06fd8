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
 *   - bf16 scales (the default scheme): symmetric int4, three groups (an odd
 *     count: the last word's top half 0), one scale rounded up (0.1 ->
 *     0x3dcd); asymmetric int4, two groups, a negative min rounded down
 *     (-0.3 -> 0xbe9a) and a positive one (0.3 -> 0x3e99), each word after
 *     the codes a scale (low) and a min (high);
 *   - read back (lo + code * scale) on random rows, every scheme: every
 *     weight within half a step (the scale as stored) of itself, and in f32
 *     each group's min read back exactly. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "runtime/quant.h"

#define ASYM MLC_PLAN_QUANT_ASYM
#define BF16 MLC_PLAN_QUANT_BF16

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
  assert_int_equal(mlc_quant_words(40, 4, 8, ASYM), 5 + 2 * 5);
  int32_t out[15];
  memset(out, 0x55, sizeof out);
  mlc_quant_pack(w, 1, 40, 4, 8, ASYM, out);
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
  mlc_quant_pack(w, 2, 8, 8, 8, ASYM, out);
  const uint32_t want[8] = {0x8080ff00u, 0x01ff0003u, bits_of(1.0f), bits_of(0.0f),
                            0, 0, bits_of(1.0f), bits_of(-8.0f)};
  expect_words(out, want, 8);
}

static void test_sym_int4(void **state) {
  (void)state;
  const float w[8] = {-7, 7, 3.5f, 2.5f, -3.5f, 0, 1, NAN}; /* amax 7, scale 1: -7 7 4 2 -4 0 1, NaN -7 */
  assert_int_equal(mlc_quant_words(8, 4, 8, 0), 2);
  int32_t out[3] = {0, 0, 0x12345678};
  mlc_quant_pack(w, 1, 8, 4, 8, 0, out);
  const uint32_t want[3] = {0x910c2479u, bits_of(1.0f), 0x12345678u}; /* no min: the word after is untouched */
  expect_words(out, want, 3);
}

static void test_bf16_sym_int4(void **state) {
  (void)state;
  const float w[24] = {
      -7, 7, 3.5f, 2.5f, -3.5f, 0, 1, 6,              /* amax 7, scale 1 (0x3f80): -7 7 4 2 -4 0 1 6 */
      0.7f, -0.7f, 0.35f, 0.1f, 0, -0.2f, 0.05f, 0.3f, /* 0.7 / 7 up to 0.10009765625 (0x3dcd): 7 -7 3 1 0 -2 0 3 */
      0, 0, 0, 0, 0, 0, 0, 0,                          /* zeros: scale 1 */
  };
  assert_int_equal(mlc_quant_words(24, 4, 8, BF16), 3 + 2);
  int32_t out[6] = {[5] = 0x12345678};
  memset(out, 0x55, 5 * sizeof *out);
  mlc_quant_pack(w, 1, 24, 4, 8, BF16, out);
  const uint32_t want[6] = {0x610c2479u, 0x30e01397u, 0, 0x3dcd3f80u, 0x00003f80u, 0x12345678u};
  expect_words(out, want, 6);
}

static void test_bf16_asym_int4(void **state) {
  (void)state;
  const float w[16] = {
      -0.3f, 1.2f, 0.5f, 0.1f, -0.1f, 0.9f, 1.0f, 0, /* lo down to -0.30078125, scale 1.50078 / 15 up to 0x3dcd */
      0.3f, 0.45f, 0.6f, 0.3f, 0.31f, 0.5f, 0.4f, 0.59f, /* lo down to 0.298828125, 0.30117 / 15 up to 0x3ca5 */
  };
  assert_int_equal(mlc_quant_words(16, 4, 8, ASYM | BF16), 2 + 2);
  int32_t out[4];
  mlc_quant_pack(w, 1, 16, 4, 8, ASYM | BF16, out);
  /* codes 0 15 8 4 2 12 13 3, then 0 8 15 0 1 10 5 14 */
  const uint32_t want[4] = {0x3dc248f0u, 0xe5a10f80u, 0xbe9a3dcdu, 0x3e993ca5u};
  expect_words(out, want, 4);
}

static float bf16_at(const int32_t *row, int64_t half) {
  return float_of((int32_t)((uint32_t)row[half / 2] >> (16 * (half % 2)) << 16));
}

/* Element j of row r of a packed weight read back (lo + code * scale), and its group's scale. */
static float read_back(const int32_t *packed, int64_t k, int bits, int group, int scheme, int64_t r, int64_t j,
                       float *scale) {
  const int32_t *row = packed + r * mlc_quant_words(k, bits, group, scheme);
  int per = 32 / bits;
  uint32_t field = (uint32_t)row[j / per] >> (bits * (j % per)) & ((1u << bits) - 1);
  float code = scheme & ASYM ? (float)field : (float)((int32_t)(field << (32 - bits)) >> (32 - bits));
  int64_t cw = k * bits / 32, g = j / group;
  float lo = 0;
  if (scheme & BF16) {
    *scale = bf16_at(row + cw, scheme & ASYM ? 2 * g : g);
    if (scheme & ASYM) lo = bf16_at(row + cw, 2 * g + 1);
  } else {
    *scale = float_of(row[cw + g]);
    if (scheme & ASYM) lo = float_of(row[cw + k / group + g]);
  }
  return lo + code * *scale;
}

static void test_read_back(void **state) {
  (void)state;
  enum { N = 3, K = 96 };
  static float w[N * K];
  uint64_t s = 12345;
  for (int i = 0; i < N * K; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    w[i] = (float)((double)(s >> 11) * 0x1.0p-53 * 2 - 0.7); /* [-0.7, 1.3): groups off centre */
  }
  static int32_t out[N * (K + 2 * K / 8)];
  for (int scheme = 0; scheme < 4; scheme++)
    for (int bits = 4; bits <= 8; bits += 4)
      for (int group = 8; group <= K; group *= 2) {
        if (K % group) continue;
        mlc_quant_pack(w, N, K, bits, group, scheme, out);
        for (int64_t r = 0; r < N; r++)
          for (int64_t g0 = 0; g0 < K; g0 += group) {
            float lo = INFINITY;
            for (int64_t j = g0; j < g0 + group; j++) lo = fminf(lo, w[r * K + j]);
            for (int64_t j = g0; j < g0 + group; j++) {
              float v = w[r * K + j], step, back = read_back(out, K, bits, group, scheme, r, j, &step);
              if (!(fabsf(back - v) <= 0.5f * step * 1.0001f))
                fail_msg("scheme %d int%d group %d row %lld element %lld: %g reads back as %g (step %g)", scheme, bits,
                         group, (long long)r, (long long)j, v, back, step);
              if (scheme == ASYM && v == lo) assert_true(back == lo); /* code 0: the min exactly */
            }
          }
      }
}

/* bf16's ends: a min past the largest finite bf16 stays finite (its weight clamps to code 0), and a group of
 * denormals whose scale underflows gets scale 1. */
static void test_bf16_edges(void **state) {
  (void)state;
  const float w[16] = {-3.4e38f, 0, 1, 2, 3, 4, 5, 6, 0x1p-149f, 0x1p-149f, 0x1p-149f, 0x1p-149f, 0x1p-149f, 0x1p-149f,
                       0x1p-149f, 0x1p-148f};
  int32_t out[4];
  mlc_quant_pack(w, 1, 16, 4, 8, ASYM | BF16, out);
  assert_int_equal((uint32_t)out[2] >> 16, 0xff7fu); /* -3.3895e38, not -inf */
  float step;
  for (int j = 0; j < 16; j++) assert_true(isfinite(read_back(out, 16, 4, 8, ASYM | BF16, 0, j, &step)));
  assert_true(read_back(out, 16, 4, 8, ASYM | BF16, 0, 0, &step) == -0x1.fep127f);
  assert_int_equal((uint32_t)out[3] & 0xffffu, 0x3f80u); /* the denormals' scale: 1 */
  mlc_quant_pack(w + 8, 1, 8, 4, 8, BF16, out); /* symmetric: amax / 7 underflows */
  assert_int_equal((uint32_t)out[1] & 0xffffu, 0x3f80u);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_asym_int4),
      cmocka_unit_test(test_asym_int8),
      cmocka_unit_test(test_sym_int4),
      cmocka_unit_test(test_bf16_sym_int4),
      cmocka_unit_test(test_bf16_asym_int4),
      cmocka_unit_test(test_read_back),
      cmocka_unit_test(test_bf16_edges),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
