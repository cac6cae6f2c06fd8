/* Scalar conversions between f32 and the 16-bit float formats, as the CPU
 * kernels do them: round to nearest even, NaN stays NaN, overflow goes to
 * infinity.  Used where the host fills or reads bf16/f16 buffers (constants,
 * test data); the kernels themselves convert in LLVM IR. */
#ifndef MLC_CPU_CONVERT_H
#define MLC_CPU_CONVERT_H

#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

static inline uint32_t mlc_f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

static inline float mlc_f32_from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static inline uint16_t mlc_f32_to_bf16(float f) {
  uint32_t u = mlc_f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static inline float mlc_bf16_to_f32(uint16_t h) { return mlc_f32_from_bits((uint32_t)h << 16); }

static inline uint16_t mlc_f32_to_f16(float f) {
  uint32_t x = mlc_f32_bits(f);
  uint32_t sign = (x >> 16) & 0x8000u, e8 = (x >> 23) & 0xffu, mant = x & 0x7fffffu;
  if (e8 == 0xff) return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0));
  int32_t e = (int32_t)e8 - 127 + 15;
  if (e >= 31) return (uint16_t)(sign | 0x7c00u);
  if (e <= 0) { /* a half subnormal, or zero */
    if (e < -10) return (uint16_t)sign;
    mant |= 0x800000u;
    int shift = 14 - e;
    uint32_t h = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) h++;
    return (uint16_t)(sign | h);
  }
  uint32_t h = ((uint32_t)e << 10) | (mant >> 13), rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++; /* a carry rounds up into the exponent */
  return (uint16_t)(sign | h);
}

static inline float mlc_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (e == 0x1f) return mlc_f32_from_bits(sign | 0x7f800000u | (mant << 13));
  if (e == 0) {
    if (!mant) return mlc_f32_from_bits(sign);
    int sh = 0;
    while (!(mant & 0x400u)) { mant <<= 1; sh++; }
    return mlc_f32_from_bits(sign | ((uint32_t)(113 - sh) << 23) | ((mant & 0x3ffu) << 13));
  }
  return mlc_f32_from_bits(sign | ((e + 112) << 23) | (mant << 13));
}

#ifdef __cplusplus
}
#endif

#endif
