/* msl_emu.hpp -- run Metal Shading Language compute kernels as C++17 on the CPU.
 *
 * mlc's Metal target emits .metal files.  There is no Mac in CI, so the tests
 * compile each emitted file as C++17 with this header force-included
 *
 *   clang++ -std=c++17 -Wall -Wextra -Werror -pthread \
 *           -include tests/metal/msl_emu.hpp -x c++ kernel.metal
 *
 * and run the kernels with mlc_emu::dispatch().  It defines
 * MLC_MSL_EMULATION 1 so emitted code can tell (e.g. to skip
 * `#include <metal_stdlib>`, which does not exist here).
 *
 * Documents followed (read for semantics; no text copied):
 *   - Apple, "Metal Shading Language Specification", version 3.2 (2024-06-06):
 *       2.2 / 2.4  scalar types: half (IEEE binary16), bfloat (Metal 3.1+),
 *                  ulong is 64-bit; 2.2.1 vector types and components;
 *       4          address spaces device / constant / thread / threadgroup;
 *       5.2.3.6    kernel-function input attributes (thread_position_in_threadgroup,
 *                  threadgroup_position_in_grid, threads_per_threadgroup,
 *                  thread_index_in_simdgroup, simdgroup_index_in_threadgroup);
 *       6.9        synchronization functions: threadgroup_barrier / simdgroup_barrier
 *                  and mem_flags (mem_none, mem_device, mem_threadgroup, ...);
 *       6.9.2      SIMD-group functions: simd_sum / max / min / prefix sums,
 *                  simd_shuffle, _xor, _up, _down, simd_broadcast;
 *       6.7 (2.3 for the type)  SIMD-group matrix functions: simdgroup_matrix<T,Cols,Rows>,
 *                  simdgroup_load / store (elements_per_row, matrix_origin,
 *                  transpose_matrix), simdgroup_multiply(_accumulate),
 *                  make_filled_simdgroup_matrix, thread_elements();
 *       6.15       atomic functions (atomic_int / atomic_uint / atomic_float,
 *                  memory_order_relaxed, *_explicit functions);
 *       6.5 / 7    math functions, precise:: and fast:: variants; 7.7 half / bfloat
 *                  conversion uses round-to-nearest-even.
 *   - Apple, "Metal feature set tables": SIMD-group width is 32 on Apple GPUs;
 *     at most 1024 threads per threadgroup; simdgroup_matrix on Apple7+.
 *   - The spec leaves the lane <-> element mapping of a simdgroup_matrix
 *     implementation-defined (thread_elements() only promises "the two elements
 *     this thread holds").  We use the mapping observed on Apple GPUs and relied on
 *     by MLX (mlx/backend/metal/kernels/steel/gemm/mma.h, BaseMMAFrag::get_coord):
 *         q = lane / 4
 *         row = (q & 4) + (lane / 2) % 4
 *         col = (q & 2) * 2 + (lane % 2) * 2
 *     lane holds elements (row, col) and (row, col + 1), in that order.
 *
 * Execution model of the emulator
 *   - dispatch() runs the threadgroups of a grid ONE AT A TIME, in linear order
 *     (x fastest).  Two executors (mlc_emu::set_mode, or MLC_EMU_MODE):
 *       fibers  (default) every GPU thread is a fiber with its own stack; the
 *               SIMD-groups of a group are spread over W OS threads (set_workers,
 *               MLC_EMU_WORKERS; default 1), each running its fibers until they
 *               park at a barrier.  ~50 ns per thread per barrier: a 10^4 x 256
 *               grid runs in ~0.2 s.
 *       threads one REAL OS thread per GPU thread (a reusable pool; the caller
 *               is thread 0) and a futex-backed generation barrier, so data races
 *               are real races (use it under TSan; it is the default under
 *               ASan/TSan).  ~0.5 ms per barrier with 256 threads on 2 cores.
 *   - Because exactly one threadgroup runs at a time, a threadgroup *variable*
 *     can be a function-local static: emitted kernels declare them as
 *     `__shared__ T name[N];` and __shared__ is `static` here -- one copy, shared
 *     by the threads of the running group.  Like real threadgroup memory its
 *     contents at the start of a group are unspecified (here: what the previous
 *     group left).
 *   - Threads are numbered x-fastest: linear = x + tg.x*(y + tg.y*z); SIMD-group
 *     s holds linear threads [32s, 32s+32).  simd_lane = linear % 32.
 *     Threadgroup sizes must be multiples of 32 (asserted).
 *   - SIMD-group functions are collective: all 32 lanes of the SIMD-group must
 *     call them (mlc never calls them under divergence).  They exchange values
 *     through a per-SIMD-group area and a 32-thread barrier.
 *   - simd_sum & co. reduce in lane order 0..31 (the same value in every lane);
 *     real hardware uses a tree, so float results can differ in the last bits.
 *   - simdgroup_multiply_accumulate accumulates in float, k = 0..7 in order, then
 *     adds C; for half/bfloat the result is rounded once to T.
 *
 * Spelling that differs from MSL (the emitter must use these forms):
 *   - kernel-parameter attributes are macros: MLC_BUFFER(i), MLC_TID, MLC_BID,
 *     MLC_BDIM, MLC_SIMD_LANE, MLC_SIMD_ID, MLC_TGMEM(i); here they expand to
 *     [[maybe_unused]] (so unused ones do not trip -Wextra -Werror).
 *   - no swizzles (.xy), no `h` literal suffix, no `?:` mixing half and float.
 */
#ifndef MLC_MSL_EMU_HPP
#define MLC_MSL_EMU_HPP

#define MLC_MSL_EMULATION 1

/* Every standard header this file (or a test) needs comes first: the MSL
 * keywords below become empty macros, which must not reach library code. */
#include <algorithm>
#include <atomic>
#include <cassert>
#include <chrono>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <new>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>
#if defined(__linux__) && !defined(MLC_EMU_NO_FUTEX)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#define MLC_EMU_FUTEX 1
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#if !defined(__x86_64__) || defined(MLC_EMU_UCONTEXT)
#include <ucontext.h> /* fiber switching where there is no assembly version */
#endif

/* ------------------------------------------------------------------ scalars */
typedef unsigned char uchar;
typedef unsigned short ushort;
typedef unsigned int uint;
typedef unsigned long ulong; /* 64-bit, as in MSL (LP64 hosts) */
static_assert(sizeof(ulong) == 8, "MSL ulong is 64-bit");

namespace mlc_emu {

template <class To, class From>
inline To bit_cast(const From &f) {
  static_assert(sizeof(To) == sizeof(From), "as_type: sizes differ");
  To t;
  std::memcpy(&t, &f, sizeof t);
  return t;
}

/* float -> IEEE binary16, round to nearest even; subnormals, inf, NaN kept. */
inline uint16_t f32_to_f16(float f) {
  uint32_t x = bit_cast<uint32_t>(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) /* inf or NaN (NaN stays NaN: quiet bit set) */
    return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x0200u | ((ax >> 13) & 0x3ffu) : 0u));
  if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to inf */
  if (ax < 0x38800000u) { /* below 2^-14: subnormal half (or zero) */
    /* |f| * 2^24 is exact; rint rounds to nearest even in the default mode. */
    float m = std::nearbyint(bit_cast<float>(ax) * 16777216.0f);
    return (uint16_t)(sign | (uint32_t)m); /* m == 1024 gives the smallest normal */
  }
  uint32_t r = (ax + 0x0fffu + ((ax >> 13) & 1u)) >> 13; /* RNE on the 13 dropped bits */
  return (uint16_t)(sign | (r - (112u << 10)));           /* rebias 127 -> 15 */
}

inline float f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) { /* zero or subnormal: m * 2^-24, exact */
    float v = (float)m * (1.0f / 16777216.0f);
    return bit_cast<float>(bit_cast<uint32_t>(v) | sign);
  }
  if (e == 31) return bit_cast<float>(sign | 0x7f800000u | (m << 13));
  return bit_cast<float>(sign | ((e + 112u) << 23) | (m << 13));
}

/* float -> bfloat16 (8-bit significand), round to nearest even. */
inline uint16_t f32_to_bf16(float f) {
  uint32_t x = bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x0040u); /* quiet NaN */
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
inline float bf16_to_f32(uint16_t b) { return bit_cast<float>((uint32_t)b << 16); }

/* half (Kind 0) and bfloat (Kind 1): 16-bit storage, arithmetic through float
 * rounded back once per operation.  Rounding float results of +,-,*,/ again to
 * 11 (or 8) bits gives the correctly rounded result because float has at least
 * 2p+2 bits (24 >= 2*11+2). */
template <int Kind>
struct fp16 {
  uint16_t bits;
  static float to_f(uint16_t b) { return Kind == 0 ? f16_to_f32(b) : bf16_to_f32(b); }
  static uint16_t from_f(float f) { return Kind == 0 ? f32_to_f16(f) : f32_to_bf16(f); }

  fp16() = default; /* trivial: threadgroup arrays of half stay uninitialised */
  fp16(float f) : bits(from_f(f)) {}
  template <class U, class = typename std::enable_if<std::is_arithmetic<U>::value>::type>
  fp16(U v) : bits(from_f((float)v)) {}
  template <int K2>
  explicit fp16(fp16<K2> o) : bits(from_f((float)o)) {}
  operator float() const { return to_f(bits); }
  static fp16 from_bits(uint16_t b) { fp16 r; r.bits = b; return r; }

  /* half OP half -> half; half OP float -> float; half OP int -> half (MSL rules) */
  template <class U>
  using res = typename std::conditional<std::is_floating_point<U>::value, U, fp16>::type;
#define MLC_FP16_OP(op)                                                                  \
  friend fp16 operator op(fp16 a, fp16 b) { return fp16((float)a op(float) b); }        \
  template <class U, class = typename std::enable_if<std::is_arithmetic<U>::value>::type> \
  friend res<U> operator op(fp16 a, U b) {                                               \
    return std::is_floating_point<U>::value ? res<U>((U)(float)a op b)                   \
                                            : res<U>((float)a op(float) b);              \
  }                                                                                      \
  template <class U, class = typename std::enable_if<std::is_arithmetic<U>::value>::type> \
  friend res<U> operator op(U a, fp16 b) {                                               \
    return std::is_floating_point<U>::value ? res<U>(a op(U)(float) b)                   \
                                            : res<U>((float)a op(float) b);              \
  }                                                                                      \
  template <class U>                                                                     \
  friend fp16 &operator op##=(fp16 &a, U b) {                                            \
    a = fp16((float)a op(float) b);                                                      \
    return a;                                                                            \
  }
  MLC_FP16_OP(+)
  MLC_FP16_OP(-)
  MLC_FP16_OP(*)
  MLC_FP16_OP(/)
#undef MLC_FP16_OP
#define MLC_FP16_CMP(op)                                                                 \
  friend bool operator op(fp16 a, fp16 b) { return (float)a op(float) b; }              \
  template <class U, class = typename std::enable_if<std::is_arithmetic<U>::value>::type> \
  friend bool operator op(fp16 a, U b) { return (float)a op b; }                         \
  template <class U, class = typename std::enable_if<std::is_arithmetic<U>::value>::type> \
  friend bool operator op(U a, fp16 b) { return a op(float) b; }
  MLC_FP16_CMP(==)
  MLC_FP16_CMP(!=)
  MLC_FP16_CMP(<)
  MLC_FP16_CMP(<=)
  MLC_FP16_CMP(>)
  MLC_FP16_CMP(>=)
#undef MLC_FP16_CMP
  friend fp16 operator-(fp16 a) { return from_bits((uint16_t)(a.bits ^ 0x8000u)); }
  friend fp16 operator+(fp16 a) { return a; }
  fp16 &operator++() { return *this = fp16((float)*this + 1.0f); }
  fp16 &operator--() { return *this = fp16((float)*this - 1.0f); }
};

} /* namespace mlc_emu */

typedef mlc_emu::fp16<0> half;
typedef mlc_emu::fp16<1> bfloat;
static_assert(sizeof(half) == 2 && sizeof(bfloat) == 2, "16-bit floats");
static_assert(std::is_trivially_default_constructible<half>::value, "trivial half");

/* ------------------------------------------------------------------ vectors */
namespace metal {

template <class T, int N> struct vec;

template <class T, int N>
struct vec_base;
template <class T> struct vec_base<T, 2> {
  T x, y;
  T &at(int i) { return i ? y : x; }
};
template <class T> struct vec_base<T, 3> {
  T x, y, z;
  T &at(int i) { return i == 0 ? x : i == 1 ? y : z; }
};
template <class T> struct vec_base<T, 4> {
  T x, y, z, w;
  T &at(int i) { return i == 0 ? x : i == 1 ? y : i == 2 ? z : w; }
};

template <class T, int N>
struct vec : vec_base<T, N> {
  typedef T value_type;
  vec() = default;
  vec(T s) { for (int i = 0; i < N; i++) (*this)[i] = s; } /* broadcast (implicit, as in MSL) */
  template <class A, class B, int M = N, class = typename std::enable_if<M == 2>::type>
  vec(A a, B b) { this->x = T(a); this->y = T(b); }
  template <class A, class B, class C, int M = N, class = typename std::enable_if<M == 3>::type>
  vec(A a, B b, C c) { this->x = T(a); this->y = T(b); this->z = T(c); }
  template <class A, class B, class C, class D, int M = N, class = typename std::enable_if<M == 4>::type>
  vec(A a, B b, C c, D d) { this->x = T(a); this->y = T(b); this->z = T(c); this->w = T(d); }
  template <int M = N, class = typename std::enable_if<M == 4>::type>
  vec(vec<T, 2> a, vec<T, 2> b) { this->x = a.x; this->y = a.y; this->z = b.x; this->w = b.y; }
  template <int M = N, class = typename std::enable_if<M == 4>::type>
  vec(vec<T, 3> a, T b) { this->x = a.x; this->y = a.y; this->z = a.z; this->w = b; }
  template <int M = N, class = typename std::enable_if<M == 3>::type>
  vec(vec<T, 2> a, T b) { this->x = a.x; this->y = a.y; this->z = b; }
  template <class U, class = typename std::enable_if<!std::is_same<U, T>::value>::type>
  explicit vec(const vec<U, N> &o) { for (int i = 0; i < N; i++) (*this)[i] = T(o[i]); }

  T &operator[](int i) { return this->at(i); }
  const T &operator[](int i) const { return (*const_cast<vec *>(this))[i]; }

#define MLC_VEC_OP(op)                                                                      \
  friend vec operator op(const vec &a, const vec &b) {                                     \
    vec r;                                                                                 \
    for (int i = 0; i < N; i++) r[i] = T(a[i] op b[i]);                                    \
    return r;                                                                              \
  }                                                                                        \
  friend vec operator op(const vec &a, T b) { return a op vec(b); }                         \
  friend vec operator op(T a, const vec &b) { return vec(a) op b; }                         \
  friend vec &operator op##=(vec &a, const vec &b) { return a = a op b; }
  MLC_VEC_OP(+)
  MLC_VEC_OP(-)
  MLC_VEC_OP(*)
  MLC_VEC_OP(/)
#undef MLC_VEC_OP
  friend vec operator-(const vec &a) {
    vec r;
    for (int i = 0; i < N; i++) r[i] = -a[i];
    return r;
  }
  friend vec<bool, N> operator==(const vec &a, const vec &b) {
    vec<bool, N> r;
    for (int i = 0; i < N; i++) r[i] = a[i] == b[i];
    return r;
  }
};

} /* namespace metal */

using metal::vec;
#define MLC_VEC_TYPES(T, name) \
  typedef metal::vec<T, 2> name##2; typedef metal::vec<T, 3> name##3; typedef metal::vec<T, 4> name##4;
MLC_VEC_TYPES(bool, bool)
MLC_VEC_TYPES(char, char)
MLC_VEC_TYPES(uchar, uchar)
MLC_VEC_TYPES(short, short)
MLC_VEC_TYPES(ushort, ushort)
MLC_VEC_TYPES(int, int)
MLC_VEC_TYPES(uint, uint)
MLC_VEC_TYPES(long, long)
MLC_VEC_TYPES(ulong, ulong)
MLC_VEC_TYPES(float, float)
MLC_VEC_TYPES(half, half)
MLC_VEC_TYPES(bfloat, bfloat)
#undef MLC_VEC_TYPES

template <class To, class From>
inline To as_type(const From &f) { return mlc_emu::bit_cast<To>(f); }

/* --------------------------------------------------------------------- math */
namespace metal {

using std::abs; using std::fabs; using std::exp; using std::exp2; using std::log; using std::log2;
using std::sqrt; using std::tanh; using std::fma; using std::fmax; using std::fmin;
using std::sin; using std::cos; using std::tan; using std::pow; using std::floor; using std::ceil;
using std::round; using std::rint; using std::trunc; using std::isnan; using std::isinf;
using std::isfinite; using std::signbit; using std::copysign; using std::erf; using std::fmod;
using std::atan; using std::atan2; using std::sinh; using std::cosh; using std::log10;

inline float rsqrt(float x) { return 1.0f / std::sqrt(x); }
/* the high 32 bits of the 64-bit product (MSL's integer mulhi) */
inline uint mulhi(uint a, uint b) { return (uint)(((uint64_t)a * b) >> 32); }

/* half / bfloat overloads: compute in float, round once. */
#define MLC_UNARY16(f, expr)                                                        \
  inline half f(half x) { float v = (float)x; (void)v; return half(expr); }         \
  inline bfloat f(bfloat x) { float v = (float)x; (void)v; return bfloat(expr); }
MLC_UNARY16(abs, std::fabs(v)) MLC_UNARY16(fabs, std::fabs(v)) MLC_UNARY16(exp, std::exp(v))
MLC_UNARY16(exp2, std::exp2(v)) MLC_UNARY16(log, std::log(v)) MLC_UNARY16(log2, std::log2(v))
MLC_UNARY16(sqrt, std::sqrt(v)) MLC_UNARY16(rsqrt, 1.0f / std::sqrt(v)) MLC_UNARY16(tanh, std::tanh(v))
MLC_UNARY16(sin, std::sin(v)) MLC_UNARY16(cos, std::cos(v)) MLC_UNARY16(floor, std::floor(v))
MLC_UNARY16(ceil, std::ceil(v)) MLC_UNARY16(round, std::round(v)) MLC_UNARY16(rint, std::rint(v))
MLC_UNARY16(trunc, std::trunc(v)) MLC_UNARY16(erf, std::erf(v))
#undef MLC_UNARY16
inline bool isnan(half x) { return std::isnan((float)x); }
inline bool isnan(bfloat x) { return std::isnan((float)x); }
inline bool isinf(half x) { return std::isinf((float)x); }
inline bool isinf(bfloat x) { return std::isinf((float)x); }
#define MLC_BIN16(T)                                                                     \
  inline T fmax(T a, T b) { return T(std::fmax((float)a, (float)b)); }                   \
  inline T fmin(T a, T b) { return T(std::fmin((float)a, (float)b)); }                   \
  inline T pow(T a, T b) { return T(std::pow((float)a, (float)b)); }                     \
  inline T fma(T a, T b, T c) { return T(std::fma((float)a, (float)b, (float)c)); }
MLC_BIN16(half)
MLC_BIN16(bfloat)
#undef MLC_BIN16

#define MLC_MINMAX(T)                                      \
  inline T min(T a, T b) { return b < a ? b : a; }         \
  inline T max(T a, T b) { return a < b ? b : a; }
MLC_MINMAX(int) MLC_MINMAX(uint) MLC_MINMAX(long) MLC_MINMAX(ulong) MLC_MINMAX(short)
MLC_MINMAX(ushort) MLC_MINMAX(char) MLC_MINMAX(uchar)
#undef MLC_MINMAX
inline float min(float a, float b) { return std::fmin(a, b); }
inline float max(float a, float b) { return std::fmax(a, b); }
inline half min(half a, half b) { return fmin(a, b); }
inline half max(half a, half b) { return fmax(a, b); }
inline bfloat min(bfloat a, bfloat b) { return fmin(a, b); }
inline bfloat max(bfloat a, bfloat b) { return fmax(a, b); }

/* element-wise forms over vectors */
#define MLC_VEC_UNARY(f)                                               \
  template <class T, int N>                                            \
  inline vec<T, N> f(const vec<T, N> &a) {                             \
    vec<T, N> r;                                                       \
    for (int i = 0; i < N; i++) r[i] = T(f(a[i]));                     \
    return r;                                                          \
  }
MLC_VEC_UNARY(abs) MLC_VEC_UNARY(fabs) MLC_VEC_UNARY(exp) MLC_VEC_UNARY(exp2) MLC_VEC_UNARY(log)
MLC_VEC_UNARY(log2) MLC_VEC_UNARY(sqrt) MLC_VEC_UNARY(rsqrt) MLC_VEC_UNARY(tanh) MLC_VEC_UNARY(floor)
MLC_VEC_UNARY(ceil) MLC_VEC_UNARY(round) MLC_VEC_UNARY(trunc) MLC_VEC_UNARY(sin) MLC_VEC_UNARY(cos)
#undef MLC_VEC_UNARY
#define MLC_VEC_BINARY(f)                                              \
  template <class T, int N>                                            \
  inline vec<T, N> f(const vec<T, N> &a, const vec<T, N> &b) {         \
    vec<T, N> r;                                                       \
    for (int i = 0; i < N; i++) r[i] = T(f(a[i], b[i]));               \
    return r;                                                          \
  }
MLC_VEC_BINARY(fmax) MLC_VEC_BINARY(fmin) MLC_VEC_BINARY(min) MLC_VEC_BINARY(max) MLC_VEC_BINARY(pow)
#undef MLC_VEC_BINARY
template <class T, int N>
inline vec<T, N> fma(const vec<T, N> &a, const vec<T, N> &b, const vec<T, N> &c) {
  vec<T, N> r;
  for (int i = 0; i < N; i++) r[i] = T(fma(a[i], b[i], c[i]));
  return r;
}
template <class T, int N>
inline T dot(const vec<T, N> &a, const vec<T, N> &b) {
  T s = T(0);
  for (int i = 0; i < N; i++) s = T(s + a[i] * b[i]);
  return s;
}

/* clamp(x, lo, hi) = min(max(x, lo), hi) (fmin/fmax for floats) */
template <class T>
inline T clamp(T x, T lo, T hi) { return min(max(x, lo), hi); }
/* select(a, b, c) = c ? b : a, element-wise for vectors */
template <class T>
inline T select(T a, T b, bool c) { return c ? b : a; }
template <class T, int N>
inline vec<T, N> select(const vec<T, N> &a, const vec<T, N> &b, const vec<bool, N> &c) {
  vec<T, N> r;
  for (int i = 0; i < N; i++) r[i] = c[i] ? b[i] : a[i];
  return r;
}

namespace precise {
using metal::abs; using metal::fabs; using metal::exp; using metal::exp2; using metal::log; using metal::log2;
using metal::sqrt; using metal::rsqrt; using metal::tanh; using metal::fma; using metal::fmax; using metal::fmin;
using metal::sin; using metal::cos; using metal::pow; using metal::erf; using metal::clamp;
} /* namespace precise */
namespace fast {
using metal::abs; using metal::fabs; using metal::exp; using metal::exp2; using metal::log; using metal::log2;
using metal::sqrt; using metal::rsqrt; using metal::tanh; using metal::fmax; using metal::fmin;
using metal::sin; using metal::cos; using metal::pow; using metal::clamp;
} /* namespace fast */

} /* namespace metal */

/* ---------------------------------------------------------------- executor */
namespace mlc_emu {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

#ifdef MLC_EMU_FUTEX
inline void futex_wait(std::atomic<uint32_t> *a, uint32_t v) {
  syscall(SYS_futex, reinterpret_cast<uint32_t *>(a), FUTEX_WAIT_PRIVATE, v, nullptr, nullptr, 0);
}
inline void futex_wake(std::atomic<uint32_t> *a) {
  syscall(SYS_futex, reinterpret_cast<uint32_t *>(a), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
}
#else
struct cv_parking {
  std::mutex m;
  std::condition_variable cv;
};
inline cv_parking &parking() { static cv_parking p; return p; }
inline void futex_wait(std::atomic<uint32_t> *a, uint32_t v) {
  std::unique_lock<std::mutex> l(parking().m);
  while (a->load() == v) parking().cv.wait(l);
}
inline void futex_wake(std::atomic<uint32_t> *) {
  { std::lock_guard<std::mutex> l(parking().m); }
  parking().cv.notify_all();
}
#endif

/* How long to spin before sleeping: long when every OS thread has a core, a
 * few iterations when the pool oversubscribes the CPU (spinning would only
 * steal the core from the threads we are waiting for). */
inline std::atomic<int> &spin_limit() { static std::atomic<int> s{64}; return s; }

/* Waits until *word != seen: spin, then sleep on the futex. */
inline void wait_change(std::atomic<uint32_t> *word, uint32_t seen, std::atomic<uint32_t> *sleepers) {
  for (int i = spin_limit().load(std::memory_order_relaxed); i > 0; i--) {
    if (word->load(std::memory_order_acquire) != seen) return;
    cpu_relax();
  }
  sleepers->fetch_add(1, std::memory_order_seq_cst);
  while (word->load(std::memory_order_seq_cst) == seen) futex_wait(word, seen);
  sleepers->fetch_sub(1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
}

/* Central generation-counting (sense-reversing) barrier for n OS threads. */
struct barrier {
  alignas(64) std::atomic<uint32_t> count{0};
  alignas(64) std::atomic<uint32_t> gen{0};
  std::atomic<uint32_t> sleepers{0};
  uint32_t n = 0;
  void reset(uint32_t nthreads) { n = nthreads; count.store(0); }
  /* n is read before the arrival: once the last thread arrives, the next
   * dispatch may reset() the barrier while this one is still returning. */
  void arrive_and_wait() {
    const uint32_t need = n;
    uint32_t g = gen.load(std::memory_order_acquire);
    if (count.fetch_add(1, std::memory_order_acq_rel) + 1 == need) {
      count.store(0, std::memory_order_relaxed);
      gen.fetch_add(1, std::memory_order_seq_cst); /* releases everyone's writes */
      if (sleepers.load(std::memory_order_seq_cst)) futex_wake(&gen);
    } else {
      wait_change(&gen, g, &sleepers);
    }
  }
};

/* ---- fibers: user-level contexts, one per GPU thread (fiber mode) ---- */
#if defined(__x86_64__) && !defined(MLC_EMU_UCONTEXT)
#define MLC_EMU_ASM_SWITCH 1
/* mlc_emu_switch(&save_sp, new_sp): saves the callee-saved registers, MXCSR
 * and the x87 control word on the current stack, stores the stack pointer in
 * *save_sp, and resumes the context whose stack pointer is new_sp.  Weak, so
 * several translation units may include this header. */
extern "C" void mlc_emu_switch(void **save_sp, void *new_sp);
__asm__(
    ".text\n"
    ".p2align 4\n"
    ".weak mlc_emu_switch\n"
    ".type mlc_emu_switch,@function\n"
    "mlc_emu_switch:\n"
    "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
    "  subq $8, %rsp\n  stmxcsr (%rsp)\n  fnstcw 4(%rsp)\n"
    "  movq %rsp, (%rdi)\n"
    "  movq %rsi, %rsp\n"
    "  ldmxcsr (%rsp)\n  fldcw 4(%rsp)\n  addq $8, %rsp\n"
    "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
    "  ret\n"
    ".size mlc_emu_switch, .-mlc_emu_switch\n");
#endif

enum fiber_state { F_RUN, F_TGWAIT, F_SIMDWAIT, F_DONE };

struct simd_area;
struct fiber;
struct thread_ctx {
  uint linear = 0, lane = 0, simd = 0;
  uint phase = 0;
  simd_area *sa = nullptr;
  barrier *tg_bar = nullptr; /* threads mode */
  fiber *fib = nullptr;      /* fiber mode */
};
inline thread_local thread_ctx *tls = nullptr;

inline thread_ctx &ctx() {
  assert(tls && "Metal builtin called outside mlc_emu::dispatch");
  return *tls;
}

struct fiber {
#ifdef MLC_EMU_ASM_SWITCH
  void *sp = nullptr;
#else
  ucontext_t uc;
#endif
  std::unique_ptr<char[]> stack;
  size_t stack_size = 0;
  fiber_state state = F_DONE;
  metal::vec<uint, 3> tid;
  thread_ctx ctx;
};

/* Per-SIMD-group exchange area: two alternating buffers of 32 slots, 32 bytes
 * each, and a 32-thread barrier.  One barrier per collective suffices: a lane
 * writes buffer p only after the barrier of the previous collective (which
 * used buffer p^1), and by then every lane has finished reading the collective
 * before that (buffer p). */
struct simd_area {
  barrier bar;          /* threads mode */
  uint fib_arrived = 0; /* fiber mode: lanes at the SIMD barrier */
  fiber *members[32] = {};
  alignas(64) unsigned char buf[2][32][32];
};

typedef std::function<void(metal::vec<uint, 3> tid, metal::vec<uint, 3> bid, metal::vec<uint, 3> bdim, uint simd_lane,
                           uint simd_id, unsigned char *tgmem)>
    kernel_body;

struct job {
  metal::vec<uint, 3> grid, tg;
  uint n;          /* threads per group */
  uint nworkers;   /* OS threads taking part */
  bool fibers;
  uint64_t ngroups;
  unsigned char *tgmem;
  const kernel_body *body;
};

/* One OS thread's fiber scheduler. */
struct sched {
#ifdef MLC_EMU_ASM_SWITCH
  void *sp = nullptr;
#else
  ucontext_t uc;
#endif
  fiber *cur = nullptr;
  const job *j = nullptr;
  metal::vec<uint, 3> bid;
  uint n_done = 0, n_tgwait = 0;
};
inline thread_local sched *tls_sched = nullptr;

[[noreturn]] inline void fatal(const char *msg) {
  std::fprintf(stderr, "mlc_emu: %s\n", msg);
  std::abort();
}

inline void switch_to_sched(fiber *f, sched *s) {
#ifdef MLC_EMU_ASM_SWITCH
  mlc_emu_switch(&f->sp, s->sp);
#else
  swapcontext(&f->uc, &s->uc);
#endif
}
inline void switch_to_fiber(sched *s, fiber *f) {
  s->cur = f;
  tls = &f->ctx;
#ifdef MLC_EMU_ASM_SWITCH
  mlc_emu_switch(&s->sp, f->sp);
#else
  swapcontext(&s->uc, &f->uc);
#endif
}

inline void fiber_main() {
  sched *s = tls_sched;
  fiber *f = s->cur;
  const job &j = *s->j;
  (*j.body)(f->tid, s->bid, j.tg, f->ctx.lane, f->ctx.simd, j.tgmem);
  f->state = F_DONE;
  s->n_done++;
  switch_to_sched(f, tls_sched);
  fatal("finished fiber resumed");
}

/* Points the fiber at the start of fiber_main on a fresh stack. */
inline void fiber_reset(fiber *f) {
  char *lo = f->stack.get();
#ifdef MLC_EMU_ASM_SWITCH
  uintptr_t top = ((uintptr_t)(lo + f->stack_size)) & ~(uintptr_t)15;
  uint64_t *p = (uint64_t *)top;
  *--p = 0;                        /* fake return address of fiber_main */
  *--p = (uint64_t)(uintptr_t)&fiber_main;
  for (int i = 0; i < 6; i++) *--p = 0; /* rbp rbx r12 r13 r14 r15 */
  uint32_t mxcsr;
  uint16_t fpucw;
  __asm__ __volatile__("stmxcsr %0" : "=m"(mxcsr));
  __asm__ __volatile__("fnstcw %0" : "=m"(fpucw));
  *--p = (uint64_t)mxcsr | ((uint64_t)fpucw << 32);
  f->sp = p;
#else
  getcontext(&f->uc);
  f->uc.uc_stack.ss_sp = lo;
  f->uc.uc_stack.ss_size = f->stack_size;
  f->uc.uc_link = nullptr;
  makecontext(&f->uc, (void (*)())fiber_main, 0);
#endif
  f->state = F_RUN;
}

/* threadgroup_barrier in fiber mode: park until the scheduler has seen every
 * thread of the group arrive. */
inline void fiber_tg_wait(thread_ctx &c) {
  sched *s = tls_sched;
  c.fib->state = F_TGWAIT;
  s->n_tgwait++;
  switch_to_sched(c.fib, s);
}
/* SIMD barrier in fiber mode: the 32 lanes live on one OS thread. */
inline void fiber_simd_wait(thread_ctx &c) {
  simd_area *a = c.sa;
  if (++a->fib_arrived == 32) {
    a->fib_arrived = 0;
    for (fiber *m : a->members)
      if (m != c.fib) m->state = F_RUN;
    return;
  }
  c.fib->state = F_SIMDWAIT;
  switch_to_sched(c.fib, tls_sched);
}

inline void tg_sync() {
  thread_ctx &c = ctx();
  if (c.fib) fiber_tg_wait(c);
  else c.tg_bar->arrive_and_wait();
}
inline void simd_sync() {
  thread_ctx &c = ctx();
  if (c.fib) fiber_simd_wait(c);
  else c.sa->bar.arrive_and_wait();
}

/* Collective exchange of one value per lane; get(j) reads lane j's value. */
template <class T>
struct exchanged {
  const unsigned char (*slots)[32];
  T get(uint j) const {
    T v;
    std::memcpy(&v, slots[j & 31u], sizeof v);
    return v;
  }
};
template <class T>
inline exchanged<T> simd_exchange(const T &v) {
  static_assert(sizeof(T) <= 32, "simd exchange: value too large");
  static_assert(std::is_trivially_copyable<T>::value, "simd exchange: trivially copyable only");
  thread_ctx &c = ctx();
  c.phase ^= 1u;
  std::memcpy(c.sa->buf[c.phase][c.lane], &v, sizeof v);
  simd_area *a = c.sa;
  uint p = c.phase;
  simd_sync();
  return exchanged<T>{a->buf[p]};
}

enum class exec_mode { fibers, threads };

inline exec_mode default_mode() {
  const char *e = std::getenv("MLC_EMU_MODE");
  if (e && !std::strcmp(e, "threads")) return exec_mode::threads;
  if (e && !std::strcmp(e, "fibers")) return exec_mode::fibers;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return exec_mode::threads;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
  return exec_mode::threads;
#endif
#endif
  return exec_mode::fibers;
}
inline std::atomic<exec_mode> &mode_setting() { static std::atomic<exec_mode> m{default_mode()}; return m; }
/* Chooses how later dispatches run (default: fibers, or threads under
 * ASan/TSan, overridden by MLC_EMU_MODE=threads|fibers). */
inline void set_mode(exec_mode m) { mode_setting().store(m); }
inline exec_mode get_mode() { return mode_setting().load(); }

inline size_t env_size(const char *name, size_t dflt) {
  const char *e = std::getenv(name);
  return e && *e ? (size_t)std::strtoull(e, nullptr, 10) : dflt;
}
/* Fiber mode: how many OS threads share a threadgroup's SIMD-groups.  1 (the
 * default, or MLC_EMU_WORKERS) is deterministic and fastest; more makes the
 * SIMD-groups of a group run truly in parallel. */
inline std::atomic<unsigned> &workers_setting() {
  static std::atomic<unsigned> w{(unsigned)env_size("MLC_EMU_WORKERS", 1)};
  return w;
}
inline void set_workers(unsigned n) { workers_setting().store(n ? n : 1); }

class pool {
 public:
  static pool &get() { static pool p; return p; }

  void run(metal::vec<uint, 3> grid, metal::vec<uint, 3> tg, size_t tgmem_bytes, const kernel_body &body) {
    if (tls) fatal("nested mlc_emu::dispatch");
    uint64_t n = (uint64_t)tg.x * tg.y * tg.z;
    if (n == 0 || n > 1024 || n % 32 != 0) {
      std::fprintf(stderr, "mlc_emu::dispatch: threadgroup of %llu threads (need 32..1024, a multiple of 32)\n",
                   (unsigned long long)n);
      std::abort();
    }
    uint64_t ngroups = (uint64_t)grid.x * grid.y * grid.z;
    if (ngroups == 0) return;
    std::lock_guard<std::mutex> lock(dispatch_mu_);
    bool fib = get_mode() == exec_mode::fibers;
    unsigned hw = std::thread::hardware_concurrency();
    if (!hw) hw = 1;
    uint nsimd = (uint)(n / 32);
    uint nw = fib ? (uint)std::min<size_t>(std::min<size_t>(workers_setting().load(), nsimd), 64) : (uint)n;
    if (nw == 0) nw = 1;
    ensure_workers(nw);
    spin_limit().store(nw <= hw ? 4000 : 64, std::memory_order_relaxed);
    if (fib) ensure_fibers((uint)n);
    /* fresh, 16-byte aligned threadgroup memory for this dispatch */
    std::unique_ptr<unsigned char[]> mem(new unsigned char[tgmem_bytes + 16]);
    unsigned char *tgmem = mem.get() + ((16 - ((uintptr_t)mem.get() & 15)) & 15);
    job_ = job{grid, tg, (uint)n, nw, fib, ngroups, tgmem, &body};
    group_bar_.reset(nw);
    for (uint s = 0; s < nsimd; s++) {
      simd_[s].bar.reset(32);
      simd_[s].fib_arrived = 0;
      for (uint l = 0; l < 32; l++) simd_[s].members[l] = fib ? fibers_[s * 32 + l].get() : nullptr;
    }
    for (uint i = 1; i < nw; i++) {
      workers_[i]->go.fetch_add(1, std::memory_order_seq_cst);
      if (workers_[i]->sleepers.load(std::memory_order_seq_cst)) futex_wake(&workers_[i]->go);
    }
    work(0);
  }

  ~pool() {
    shutdown_.store(true);
    for (size_t i = 1; i < workers_.size(); i++) {
      workers_[i]->go.fetch_add(1, std::memory_order_seq_cst);
      futex_wake(&workers_[i]->go);
    }
    for (size_t i = 1; i < workers_.size(); i++) workers_[i]->th.join();
  }

 private:
  struct worker {
    alignas(64) std::atomic<uint32_t> go{0};
    std::atomic<uint32_t> sleepers{0};
    std::thread th;
    sched s;
  };

  pool() : simd_(new simd_area[32]) { workers_.emplace_back(new worker); }

  /* A new thread gets its worker's address, not an index into workers_: the
   * vector grows (and moves) while the threads just started run, and a thread
   * that read workers_[i] then read the vector as it was reallocated (the rare
   * segfault of test_msl_emu under load; ThreadSanitizer shows the race). */
  void ensure_workers(uint n) {
    while (workers_.size() < n) {
      uint i = (uint)workers_.size();
      workers_.emplace_back(new worker);
      worker *w = workers_[i].get();
      w->th = std::thread([this, i, w] { loop(i, *w); });
    }
  }
  void ensure_fibers(uint n) {
    size_t ss = env_size("MLC_EMU_STACK_KB", 256) * 1024;
    while (fibers_.size() < n) {
      std::unique_ptr<fiber> f(new fiber);
      f->stack.reset(new char[ss]);
      f->stack_size = ss;
      uint i = (uint)fibers_.size();
      f->ctx.linear = i;
      f->ctx.lane = i % 32;
      f->ctx.simd = i / 32;
      f->ctx.sa = &simd_[i / 32];
      f->ctx.fib = f.get();
      fibers_.push_back(std::move(f));
    }
  }

  void loop(uint i, worker &w) {
    uint32_t seen = 0;
    for (;;) {
      wait_change(&w.go, seen, &w.sleepers);
      seen = w.go.load(std::memory_order_acquire);
      if (shutdown_.load()) return;
      work(i);
    }
  }

  static metal::vec<uint, 3> group_id(const job &j, uint64_t g) {
    return metal::vec<uint, 3>((uint)(g % j.grid.x), (uint)((g / j.grid.x) % j.grid.y),
                               (uint)(g / ((uint64_t)j.grid.x * j.grid.y)));
  }

  void work(uint i) {
    const job j = job_; /* copied: the caller rewrites job_ once all workers pass the last barrier */
    if (j.fibers) work_fibers(i, j);
    else work_thread(i, j);
  }

  /* threads mode: OS thread i is GPU thread i. */
  void work_thread(uint i, const job &j) {
    thread_ctx c;
    c.linear = i;
    c.lane = i % 32;
    c.simd = i / 32;
    c.sa = &simd_[c.simd];
    c.tg_bar = &group_bar_;
    tls = &c;
    metal::vec<uint, 3> tid(i % j.tg.x, (i / j.tg.x) % j.tg.y, i / (j.tg.x * j.tg.y));
    for (uint64_t g = 0; g < j.ngroups; g++) {
      (*j.body)(tid, group_id(j, g), j.tg, c.lane, c.simd, j.tgmem);
      group_bar_.arrive_and_wait(); /* the next group starts when this one is done */
    }
    tls = nullptr;
  }

  /* fiber mode: OS thread i runs the SIMD-groups s with s % nworkers == i,
   * each GPU thread a fiber; a threadgroup barrier is reached when all local
   * fibers are parked at it, then the OS threads meet at group_bar_. */
  void work_fibers(uint i, const job &j) {
    sched &s = workers_[i]->s;
    tls_sched = &s;
    s.j = &j;
    std::vector<fiber *> mine;
    for (uint sg = i; sg < j.n / 32; sg += j.nworkers)
      for (uint l = 0; l < 32; l++) {
        fiber *f = fibers_[sg * 32 + l].get();
        uint lin = sg * 32 + l;
        f->tid = metal::vec<uint, 3>(lin % j.tg.x, (lin / j.tg.x) % j.tg.y, lin / (j.tg.x * j.tg.y));
        mine.push_back(f);
      }
    const uint nlocal = (uint)mine.size();
    for (uint64_t g = 0; g < j.ngroups; g++) {
      s.bid = group_id(j, g);
      for (fiber *f : mine) { fiber_reset(f); f->ctx.phase = 0; }
      s.n_done = 0;
      s.n_tgwait = 0;
      for (;;) {
        bool ran = false;
        for (fiber *f : mine)
          if (f->state == F_RUN) {
            ran = true;
            switch_to_fiber(&s, f);
          }
        if (s.n_done == nlocal) break;
        if (!ran) {
          if (s.n_tgwait != nlocal)
            fatal(s.n_done ? "threadgroup_barrier not reached by every thread of the group"
                           : "SIMD-group function or simdgroup_barrier not reached by all 32 lanes");
          group_bar_.arrive_and_wait();
          for (fiber *f : mine) f->state = F_RUN;
          s.n_tgwait = 0;
        }
      }
      tls = nullptr;
      group_bar_.arrive_and_wait(); /* the next group starts when this one is done */
    }
    tls_sched = nullptr;
  }

  std::mutex dispatch_mu_;
  std::vector<std::unique_ptr<worker>> workers_;
  std::vector<std::unique_ptr<fiber>> fibers_;
  std::unique_ptr<simd_area[]> simd_;
  barrier group_bar_;
  job job_{};
  std::atomic<bool> shutdown_{false};
};

/* Runs every threadgroup of `grid` (counted in threadgroups), one group at a
 * time; `tgmem` is tgmem_bytes of threadgroup memory, 16-byte aligned,
 * uninitialised, fresh per dispatch. */
inline void dispatch(metal::vec<uint, 3> grid, metal::vec<uint, 3> tg, size_t tgmem_bytes, const kernel_body &body) {
  pool::get().run(grid, tg, tgmem_bytes, body);
}

} /* namespace mlc_emu */

/* ------------------------------------------------------------ synchronisation */
namespace metal {

enum class mem_flags : unsigned {
  mem_none = 0,
  mem_device = 1,
  mem_threadgroup = 2,
  mem_texture = 4,
  mem_threadgroup_imageblock = 8,
  mem_object_data = 16,
};
inline mem_flags operator|(mem_flags a, mem_flags b) { return mem_flags((unsigned)a | (unsigned)b); }
inline mem_flags operator&(mem_flags a, mem_flags b) { return mem_flags((unsigned)a & (unsigned)b); }

/* Every thread of the threadgroup must call it; all memory written before it
 * (device or threadgroup, whatever the flags) is visible after it. */
inline void threadgroup_barrier(mem_flags) { mlc_emu::tg_sync(); }
/* Every thread of the SIMD-group must call it. */
inline void simdgroup_barrier(mem_flags) { mlc_emu::simd_sync(); }

/* ---------------------------------------------------- SIMD-group functions */
template <class T>
inline T simd_sum(T v) {
  auto e = mlc_emu::simd_exchange(v);
  T s = e.get(0);
  for (uint j = 1; j < 32; j++) s = T(s + e.get(j));
  return s;
}
template <class T>
inline T simd_product(T v) {
  auto e = mlc_emu::simd_exchange(v);
  T s = e.get(0);
  for (uint j = 1; j < 32; j++) s = T(s * e.get(j));
  return s;
}
template <class T>
inline T simd_max(T v) {
  auto e = mlc_emu::simd_exchange(v);
  T s = e.get(0);
  for (uint j = 1; j < 32; j++) s = max(s, e.get(j));
  return s;
}
template <class T>
inline T simd_min(T v) {
  auto e = mlc_emu::simd_exchange(v);
  T s = e.get(0);
  for (uint j = 1; j < 32; j++) s = min(s, e.get(j));
  return s;
}
template <class T>
inline T simd_and(T v) {
  auto e = mlc_emu::simd_exchange(v);
  T s = e.get(0);
  for (uint j = 1; j < 32; j++) s = T(s & e.get(j));
  return s;
}
template <class T>
inline T simd_or(T v) {
  auto e = mlc_emu::simd_exchange(v);
  T s = e.get(0);
  for (uint j = 1; j < 32; j++) s = T(s | e.get(j));
  return s;
}
template <class T>
inline T simd_xor(T v) {
  auto e = mlc_emu::simd_exchange(v);
  T s = e.get(0);
  for (uint j = 1; j < 32; j++) s = T(s ^ e.get(j));
  return s;
}
/* lane i gets the sum of lanes 0..i-1 (0 for lane 0) */
template <class T>
inline T simd_prefix_exclusive_sum(T v) {
  auto e = mlc_emu::simd_exchange(v);
  T s = T(0);
  for (uint j = 0; j < mlc_emu::ctx().lane; j++) s = T(s + e.get(j));
  return s;
}
template <class T>
inline T simd_prefix_inclusive_sum(T v) {
  auto e = mlc_emu::simd_exchange(v);
  T s = T(0);
  for (uint j = 0; j <= mlc_emu::ctx().lane; j++) s = T(s + e.get(j));
  return s;
}
inline bool simd_all(bool v) { return simd_and((uint)v) != 0; }
inline bool simd_any(bool v) { return simd_or((uint)v) != 0; }

template <class T>
inline T simd_shuffle(T v, ushort lane) { return mlc_emu::simd_exchange(v).get(lane & 31u); }
template <class T>
inline T simd_broadcast(T v, ushort lane) { return mlc_emu::simd_exchange(v).get(lane & 31u); }
template <class T>
inline T simd_broadcast_first(T v) { return mlc_emu::simd_exchange(v).get(0); }
template <class T>
inline T simd_shuffle_xor(T v, ushort mask) {
  return mlc_emu::simd_exchange(v).get(mlc_emu::ctx().lane ^ (mask & 31u));
}
/* lane i reads lane i+delta; the upper `delta` lanes keep their own value */
template <class T>
inline T simd_shuffle_down(T v, ushort delta) {
  uint l = mlc_emu::ctx().lane;
  auto e = mlc_emu::simd_exchange(v);
  return l + delta < 32 ? e.get(l + delta) : v;
}
/* lane i reads lane i-delta; the lower `delta` lanes keep their own value */
template <class T>
inline T simd_shuffle_up(T v, ushort delta) {
  uint l = mlc_emu::ctx().lane;
  auto e = mlc_emu::simd_exchange(v);
  return l >= delta ? e.get(l - delta) : v;
}
template <class T>
inline T simd_shuffle_rotate_down(T v, ushort delta) {
  return mlc_emu::simd_exchange(v).get((mlc_emu::ctx().lane + delta) & 31u);
}

/* ------------------------------------------------- SIMD-group matrices */
/* simdgroup_matrix<T, Cols, Rows>; only 8x8 is provided. */
template <class T, int Cols, int Rows>
struct simdgroup_matrix {
  static_assert(Cols == 8 && Rows == 8, "mlc_emu: only 8x8 simdgroup matrices");
  vec<T, 2> e; /* this lane's elements (row, col) and (row, col + 1) */

  simdgroup_matrix() = default;
  /* diagonal matrix: dval on the diagonal, 0 elsewhere */
  explicit simdgroup_matrix(T dval) {
    uint r = row(), c = col();
    e.x = r == c ? dval : T(0);
    e.y = r == c + 1 ? dval : T(0);
  }
  vec<T, 2> &thread_elements() { return e; }
  const vec<T, 2> &thread_elements() const { return e; }

  /* position of this lane's first element (see the comment at the top) */
  static uint row(uint lane) { uint q = lane / 4; return (q & 4u) + (lane / 2) % 4; }
  static uint col(uint lane) { uint q = lane / 4; return (q & 2u) * 2 + (lane % 2) * 2; }
  static uint row() { return row(mlc_emu::ctx().lane); }
  static uint col() { return col(mlc_emu::ctx().lane); }
};
typedef simdgroup_matrix<float, 8, 8> simdgroup_float8x8;
typedef simdgroup_matrix<half, 8, 8> simdgroup_half8x8;
typedef simdgroup_matrix<bfloat, 8, 8> simdgroup_bfloat8x8;

template <class T, int C, int R>
inline simdgroup_matrix<T, C, R> make_filled_simdgroup_matrix(T v) {
  simdgroup_matrix<T, C, R> m;
  m.e = vec<T, 2>(v);
  return m;
}

/* Element (r, c) of the matrix is src[(origin.y + r) * elements_per_row + origin.x + c],
 * or, with transpose_matrix, src[(origin.y + c) * elements_per_row + origin.x + r]
 * (origin is (column, row) in memory, applied before transposition). */
template <class T, class U, int C, int R>
inline void simdgroup_load(simdgroup_matrix<T, C, R> &m, const U *src, ulong elements_per_row = C,
                           vec<ulong, 2> matrix_origin = vec<ulong, 2>(0), bool transpose_matrix = false) {
  static_assert(std::is_same<typename std::remove_cv<U>::type, T>::value, "simdgroup_load: element type");
  uint r = m.row(), c = m.col();
  const U *base = src + matrix_origin.y * elements_per_row + matrix_origin.x;
  for (uint k = 0; k < 2; k++) {
    ulong off = transpose_matrix ? (c + k) * elements_per_row + r : r * elements_per_row + (c + k);
    m.e[(int)k] = base[off];
  }
}
template <class T, int C, int R>
inline void simdgroup_store(const simdgroup_matrix<T, C, R> &m, T *dst, ulong elements_per_row = C,
                            vec<ulong, 2> matrix_origin = vec<ulong, 2>(0), bool transpose_matrix = false) {
  uint r = m.row(), c = m.col();
  T *base = dst + matrix_origin.y * elements_per_row + matrix_origin.x;
  for (uint k = 0; k < 2; k++) {
    ulong off = transpose_matrix ? (c + k) * elements_per_row + r : r * elements_per_row + (c + k);
    base[off] = m.e[(int)k];
  }
}

namespace detail {
template <class T>
struct ab_pair { vec<T, 2> a, b; };
/* d = a * b (+ c), collective over the SIMD-group */
template <class T, int C, int R>
inline void mma(simdgroup_matrix<T, C, R> &d, const simdgroup_matrix<T, C, R> &a, const simdgroup_matrix<T, C, R> &b,
                const simdgroup_matrix<T, C, R> *c) {
  typedef simdgroup_matrix<T, C, R> M;
  auto ex = mlc_emu::simd_exchange(ab_pair<T>{a.e, b.e});
  float A[8][8], B[8][8];
  for (uint l = 0; l < 32; l++) {
    ab_pair<T> p = ex.get(l);
    uint r = M::row(l), cc = M::col(l);
    A[r][cc] = (float)p.a.x; A[r][cc + 1] = (float)p.a.y;
    B[r][cc] = (float)p.b.x; B[r][cc + 1] = (float)p.b.y;
  }
  uint r = M::row(), c0 = M::col();
  vec<T, 2> out;
  for (uint k = 0; k < 2; k++) {
    float acc = 0.0f;
    for (uint i = 0; i < 8; i++) acc = acc + A[r][i] * B[i][c0 + k];
    if (c) acc = acc + (float)c->e[(int)k];
    out[(int)k] = T(acc);
  }
  d.e = out;
}
} /* namespace detail */

template <class T, int C, int R>
inline void simdgroup_multiply_accumulate(simdgroup_matrix<T, C, R> &d, const simdgroup_matrix<T, C, R> &a,
                                          const simdgroup_matrix<T, C, R> &b, const simdgroup_matrix<T, C, R> &c) {
  simdgroup_matrix<T, C, R> cc = c; /* d may alias c */
  detail::mma(d, a, b, &cc);
}
template <class T, int C, int R>
inline void simdgroup_multiply(simdgroup_matrix<T, C, R> &d, const simdgroup_matrix<T, C, R> &a,
                               const simdgroup_matrix<T, C, R> &b) {
  detail::mma(d, a, b, (const simdgroup_matrix<T, C, R> *)nullptr);
}

} /* namespace metal */

/* -------------------------------------------------------------- atomics */
namespace mlc_emu {
template <class T>
struct atomic_cell {
  std::atomic<T> v;
};
template <class T>
inline T cas_update(std::atomic<T> &a, T operand, T (*f)(T, T)) {
  T old = a.load(std::memory_order_relaxed);
  while (!a.compare_exchange_weak(old, f(old, operand), std::memory_order_relaxed)) {
  }
  return old;
}
} /* namespace mlc_emu */

typedef mlc_emu::atomic_cell<int> atomic_int;
typedef mlc_emu::atomic_cell<uint> atomic_uint;
typedef mlc_emu::atomic_cell<float> atomic_float;
static_assert(sizeof(atomic_int) == 4 && alignof(atomic_int) == 4, "atomic_int layout");
static_assert(sizeof(atomic_uint) == 4 && alignof(atomic_uint) == 4, "atomic_uint layout");
static_assert(sizeof(atomic_float) == 4 && alignof(atomic_float) == 4, "atomic_float layout");
static_assert(std::atomic<int>::is_always_lock_free && std::atomic<float>::is_always_lock_free, "lock-free");

namespace metal {
enum memory_order { memory_order_relaxed = 0, memory_order_seq_cst = 5 };

/* All orders are performed as seq_cst underneath (stronger than asked). */
template <class T>
inline T atomic_load_explicit(const mlc_emu::atomic_cell<T> *o, memory_order) {
  return o->v.load();
}
template <class T, class U>
inline void atomic_store_explicit(mlc_emu::atomic_cell<T> *o, U v, memory_order) {
  o->v.store(T(v));
}
template <class T, class U>
inline T atomic_exchange_explicit(mlc_emu::atomic_cell<T> *o, U v, memory_order) {
  return o->v.exchange(T(v));
}
template <class T, class U>
inline bool atomic_compare_exchange_weak_explicit(mlc_emu::atomic_cell<T> *o, T *expected, U desired, memory_order,
                                                  memory_order) {
  return o->v.compare_exchange_strong(*expected, T(desired));
}
template <class T, class U>
inline T atomic_fetch_add_explicit(mlc_emu::atomic_cell<T> *o, U v, memory_order) {
  return mlc_emu::cas_update<T>(o->v, T(v), [](T a, T b) { return T(a + b); });
}
template <class T, class U>
inline T atomic_fetch_sub_explicit(mlc_emu::atomic_cell<T> *o, U v, memory_order) {
  return mlc_emu::cas_update<T>(o->v, T(v), [](T a, T b) { return T(a - b); });
}
template <class T, class U>
inline T atomic_fetch_min_explicit(mlc_emu::atomic_cell<T> *o, U v, memory_order) {
  return mlc_emu::cas_update<T>(o->v, T(v), [](T a, T b) { return b < a ? b : a; });
}
template <class T, class U>
inline T atomic_fetch_max_explicit(mlc_emu::atomic_cell<T> *o, U v, memory_order) {
  return mlc_emu::cas_update<T>(o->v, T(v), [](T a, T b) { return a < b ? b : a; });
}
template <class T, class U>
inline T atomic_fetch_and_explicit(mlc_emu::atomic_cell<T> *o, U v, memory_order) {
  return o->v.fetch_and(T(v));
}
template <class T, class U>
inline T atomic_fetch_or_explicit(mlc_emu::atomic_cell<T> *o, U v, memory_order) {
  return o->v.fetch_or(T(v));
}
} /* namespace metal */

using namespace metal;

/* ------------------------------------------- MSL keywords and attributes */
/* Address spaces qualify pointers and vanish here; `kernel` marks an entry point. */
#define device
#define constant
#define thread
#define threadgroup
#define kernel
/* Threadgroup variables in emitted kernels: one copy for the one running group. */
#define __shared__ static
/* Kernel-parameter attributes ([[buffer(i)]], [[thread_position_in_threadgroup]], ...). */
#define MLC_BUFFER(i) [[maybe_unused]]
#define MLC_TID [[maybe_unused]]       /* thread_position_in_threadgroup */
#define MLC_BID [[maybe_unused]]       /* threadgroup_position_in_grid */
#define MLC_BDIM [[maybe_unused]]      /* threads_per_threadgroup */
#define MLC_SIMD_LANE [[maybe_unused]] /* thread_index_in_simdgroup */
#define MLC_SIMD_ID [[maybe_unused]]   /* simdgroup_index_in_threadgroup */
#define MLC_TGMEM(i) [[maybe_unused]]  /* threadgroup(i): a threadgroup uchar * */

#endif /* MLC_MSL_EMU_HPP */
