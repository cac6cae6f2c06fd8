/* Elementwise kernels: add/sub/mul/div with numpy broadcasting, the unary
 * ops, cast, broadcast (a copy to a larger shape) and the activation
 * gradients relu_grad, silu_grad, gelu_grad and gelu_tanh_grad (g, x);
 * issue 27's abs, erf, pow, clamp_min/max, gelu_tanh, the comparisons
 * (bool results) and where (three inputs); arange, which has none.  The
 * arithmetic is the CPU target's (codegen/llvm/emit_ew.c), which follows
 * PyTorch.
 *
 * The iteration space is mlc_ew_layout's (ir/ir.h): merged dimensions and
 * per-operand strides (0 along a broadcast dimension).  A thread takes
 * output elements i, i + stride, ... and finds each operand's element by
 * splitting i over the dimensions with constant divisors.  Float dtypes
 * compute in f32, i32 and bool in 32-bit integers, i64 in 64-bit ones
 * (Int64 capability); CONST operands are constants in the code.
 *
 * erf is not in GLSL.std.450: gelu uses erfc by the Chebyshev fit of
 * Numerical Recipes (erfcc, fractional error below 1.2e-7 everywhere), so
 * the tail for negative x keeps its relative accuracy; erf itself is its
 * Taylor series near 0, where 1 - erfc would lose the digits, and 1 - erfc
 * further out.
 *
 * Where a float's NaN decides the result (clamp lets NaN through, the
 * comparisons are false for NaN but !=), it is tested on the bits: a driver
 * may compile float compares and selects assuming no NaN (see the cast to
 * bool below).
 */
#include <math.h>

#include "codegen/spirv/emit.h"

typedef struct {
  sv *s;
  sb *b;
  uint32_t t; /* compute type of the inputs */
} ewc;

static bool is_f(int dt) { return mlc_dtype_is_float((mlc_dtype)dt); }

static uint32_t ctype(sb *b, int dt) {
  if (is_f(dt)) return b->t_f32;
  if (dt == MLC_DT_I64) return sb_u64_type(b);
  return b->t_u32;
}

uint32_t sv_ew_load(sb *b, uint32_t bind, int dt, uint32_t idx) {
  if (is_f(dt)) return sb_load_f(b, bind, dt, idx);
  if (dt == MLC_DT_I64) {
    uint32_t hi, lo = sb_load_bits(b, bind, dt, idx, &hi), t = sb_u64_type(b);
    uint32_t h = sb_op2(b, SpvOpShiftLeftLogical, t, sb_op1(b, SpvOpUConvert, t, hi), sb_u32(b, 32));
    return sb_op2(b, SpvOpBitwiseOr, t, h, sb_op1(b, SpvOpUConvert, t, lo));
  }
  return sb_load_bits(b, bind, dt, idx, NULL);
}

uint32_t sv_ew_const(sb *b, const mlc_node *k) {
  int dt = k->type.dtype;
  if (is_f(dt)) return sb_f32(b, (float)k->a.f);
  if (dt == MLC_DT_I64) return sb_u64(b, (uint64_t)(int64_t)k->a.f);
  if (dt == MLC_DT_BOOL) return sb_u32(b, k->a.f != 0);
  return sb_u32(b, (uint32_t)(int32_t)(int64_t)k->a.f);
}

static uint32_t fc(sb *b, double v) { return sb_f32(b, (float)v); }

static uint32_t sigmoid(sb *b, uint32_t x) {
  uint32_t e = sb_exp(b, sb_op1(b, SpvOpFNegate, b->t_f32, x));
  return sb_fdiv(b, fc(b, 1), sb_fadd(b, fc(b, 1), e));
}

/* erfc(z) for z >= 0, Numerical Recipes' erfcc. */
static uint32_t erfc_pos(sb *b, uint32_t z) {
  static const double k[10] = {-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806,
                               0.27886807,  -1.13520398, 1.48851587, -0.82215223, 0.17087277};
  uint32_t t = sb_fdiv(b, fc(b, 1), sb_fma(b, fc(b, 0.5), z, fc(b, 1)));
  uint32_t p = fc(b, k[9]);
  for (int i = 8; i >= 0; i--) p = sb_fma(b, t, p, fc(b, k[i]));
  uint32_t e = sb_fsub(b, p, sb_fmul(b, z, z));
  return sb_fmul(b, t, sb_exp(b, e));
}

/* erfc(x) = 2 - erfc(-x) */
static uint32_t erfc_(sb *b, uint32_t x) {
  uint32_t r = erfc_pos(b, sb_glsl1(b, GLSLstd450FAbs, b->t_f32, x));
  return sb_select(b, b->t_f32, sb_op2(b, SpvOpFOrdGreaterThanEqual, b->t_bool, x, fc(b, 0)), r, sb_fsub(b, fc(b, 2), r));
}

/* x's bits with the sign bit of s's */
static uint32_t copysign_(sb *b, uint32_t x, uint32_t s) {
  uint32_t m = sb_and(b, sb_f2bits(b, x), sb_u32(b, 0x7fffffffu));
  return sb_bits2f(b, sb_or(b, m, sb_and(b, sb_f2bits(b, s), sb_u32(b, 0x80000000u))));
}

#define ERF_SERIES 0.75 /* erf by its series below this |x|, by 1 - erfc from it on */

/* erf(x).  For |x| < 0.75, the series 2/sqrt(pi) sum_n (-1)^n x^(2n+1) /
 * (n! (2n+1)) to n = 8: the first term left out is below 1e-9 of x.  From
 * 0.75 on, 1 - erfc(|x|), erfc's error (below 1.2e-7 of erfc(0.75) = 0.29)
 * being below 5e-8 of erf there; the sign of x's (erf is odd). */
static uint32_t erf_(sb *b, uint32_t x) {
  uint32_t z = sb_glsl1(b, GLSLstd450FAbs, b->t_f32, x), z2 = sb_fmul(b, z, z);
  double c[9], fact = 1;
  for (int n = 0; n < 9; n++) {
    if (n) fact *= n;
    c[n] = (n % 2 ? -1.0 : 1.0) * 1.12837916709551257390 / (fact * (2 * n + 1)); /* 2/sqrt(pi) = 1.128... */
  }
  uint32_t p = fc(b, c[8]);
  for (int n = 7; n >= 0; n--) p = sb_fma(b, z2, p, fc(b, c[n]));
  uint32_t near = sb_fmul(b, z, p), far = sb_fsub(b, fc(b, 1), erfc_pos(b, z));
  uint32_t r = sb_select(b, b->t_f32, sb_flt(b, z, fc(b, ERF_SERIES)), near, far);
  return copysign_(b, r, x);
}

/* tanh clamped to [-15, 15]: tanh is +-1 in f32 well before 15, and some
 * drivers compute it through exp, which would overflow to inf / inf */
static uint32_t tanh_(sb *b, uint32_t x) {
  uint32_t a[3] = {x, fc(b, -15), fc(b, 15)};
  return sb_glsl1(b, GLSLstd450Tanh, b->t_f32, sb_glsl(b, GLSLstd450FClamp, b->t_f32, 3, a));
}

/* Whether float x is a NaN, on its bits. */
static uint32_t is_nan(sb *b, uint32_t x) {
  return sb_op2(b, SpvOpUGreaterThan, b->t_bool, sb_and(b, sb_f2bits(b, x), sb_u32(b, 0x7fffffffu)), sb_u32(b, 0x7f800000u));
}

/* Phi(x) = erfc(-x / sqrt 2) / 2 */
static uint32_t Phi(sb *b, uint32_t x) { return sb_fmul(b, fc(b, 0.5), erfc_(b, sb_fmul(b, x, fc(b, -0.70710678118654752440)))); }

static uint32_t int_lt0(sb *b, uint32_t t, uint32_t x) {
  uint32_t zero = t == b->t_u32 ? sb_u32(b, 0) : sb_u64(b, 0);
  return sb_op2(b, SpvOpSLessThan, b->t_bool, x, zero);
}

static uint32_t cast(sb *b, int from, int to, uint32_t x) {
  uint32_t ot = ctype(b, to), it = ctype(b, from);
  if (to == MLC_DT_BOOL) {
    /* a float is nonzero when a bit other than the sign is set: NaN too.  On
     * the bits, since a driver may compile float compares assuming no NaN:
     * with this and relu (below) in their float forms, ONNX's IsNaN gave 0
     * for NaN on NVIDIA's driver (bench/results/h200-2026-12-03d.md). */
    uint32_t nz = is_f(from) ? sb_op2(b, SpvOpINotEqual, b->t_bool, sb_and(b, sb_f2bits(b, x), sb_u32(b, 0x7fffffffu)), sb_u32(b, 0))
                             : sb_op2(b, SpvOpINotEqual, b->t_bool, x, it == b->t_u32 ? sb_u32(b, 0) : sb_u64(b, 0));
    return sb_select(b, b->t_u32, nz, sb_u32(b, 1), sb_u32(b, 0));
  }
  if (is_f(to)) {
    if (is_f(from)) return x; /* rounded at the store */
    return sb_op1(b, from == MLC_DT_BOOL ? SpvOpConvertUToF : SpvOpConvertSToF, b->t_f32, x);
  }
  if (is_f(from)) return sb_op1(b, SpvOpConvertFToS, ot, x);
  if (ot == it) return x;
  return sb_op1(b, from == MLC_DT_BOOL ? SpvOpUConvert : SpvOpSConvert, ot, x);
}

/* Float x op y.  An operation with a constant zero operand is not left to
 * the compilers: SPIRV-Tools' folding rules (spirv-opt -O) rewrite x * 0
 * and 0 / x to 0, x + 0 to x and 0 - x to -x, and lavapipe's code generator
 * does the same with a literal zero even under NoContraction and
 * SignedZeroInfNanPreserve; Vulkan allows it.  IEEE arithmetic differs
 * where x is an infinity, a NaN or a zero (inf * 0 is NaN: ONNX's IsInf is
 * built on it; -0 + 0 is +0), so those cases are computed exactly on the
 * bits of x.  The folds that are exact (x + -0, x - 0, -0 - x, x * 1) are
 * left to the compilers. */
static uint32_t farith(sb *b, SpvOp op, uint32_t x, uint32_t y) {
  bool zx = sb_is_f32(b, x, 0.0f), mx = sb_is_f32(b, x, -0.0f), zy = sb_is_f32(b, y, 0.0f), my = sb_is_f32(b, y, -0.0f);
  uint32_t v = 0; /* the operand other than the zero */
  bool neg = false, add = false;
  if (op == SpvOpFMul && (zx || mx)) v = y, neg = mx;
  else if (op == SpvOpFMul && (zy || my)) v = x, neg = my;
  else if (op == SpvOpFDiv && (zx || mx)) v = y, neg = mx;
  else if (op == SpvOpFAdd && zx) v = y, add = true;
  else if ((op == SpvOpFAdd && zy) || (op == SpvOpFSub && my)) v = x, add = true;
  else if (op == SpvOpFSub && zx) v = y;
  if (!v) return sb_op2(b, op, b->t_f32, x, y);
  uint32_t u = sb_f2bits(b, v), T = b->t_u32, B = b->t_bool;
  uint32_t mag = sb_and(b, u, sb_u32(b, 0x7fffffffu)), sgn = sb_u32(b, 0x80000000u), r;
  if (op == SpvOpFMul || op == SpvOpFDiv) {
    /* a zero with the sign of v's xor the zero's; NaN where v is an
     * infinity or a NaN (x * 0), a zero or a NaN (0 / x) */
    uint32_t s = sb_and(b, u, sgn);
    if (neg) s = sb_op2(b, SpvOpBitwiseXor, T, s, sgn);
    uint32_t nan = op == SpvOpFMul ? sb_op2(b, SpvOpUGreaterThanEqual, B, mag, sb_u32(b, 0x7f800000u))
                                   : sb_op2(b, SpvOpLogicalOr, B, sb_op2(b, SpvOpIEqual, B, mag, sb_u32(b, 0)),
                                            sb_op2(b, SpvOpUGreaterThan, B, mag, sb_u32(b, 0x7f800000u)));
    r = sb_select(b, T, nan, sb_u32(b, 0x7fc00000u), s);
  } else if (add) {
    r = sb_select(b, T, sb_op2(b, SpvOpIEqual, B, u, sgn), sb_u32(b, 0), u); /* v + 0: -0 becomes +0 */
  } else {
    /* 0 - v: -v, but +0 for either zero */
    r = sb_select(b, T, sb_op2(b, SpvOpIEqual, B, mag, sb_u32(b, 0)), sb_u32(b, 0), sb_op2(b, SpvOpBitwiseXor, T, u, sgn));
  }
  return sb_bits2f(b, r);
}

/* x ** p, as the CPU target: products for an integral p up to 64 in size
 * (exact for p = 2, as PyTorch's x * x), sqrt for +-0.5, else exp(p log x).
 * GLSL's Sqrt and Log are undefined below 0 (and Log at 0), so the special
 * bases are decided on the bits: NaN for x < 0 (a fractional power of a
 * negative number; -0 is not below 0) and for NaN; at +-0, 0 for p > 0 and
 * inf for p < 0; at +inf, inf for p > 0 and 0 for p < 0. */
static uint32_t pow_(sb *b, uint32_t x, double p) {
  uint32_t F = b->t_f32, B = b->t_bool, one = fc(b, 1);
  if (p >= -64 && p <= 64 && p == (double)(int)p) {
    unsigned k = (unsigned)(p < 0 ? -p : p);
    uint32_t r = 0, sq = x;
    for (; k; k >>= 1) {
      if (k & 1) r = r ? sb_fmul(b, r, sq) : sq;
      if (k > 1) sq = sb_fmul(b, sq, sq);
    }
    if (!r) return one;
    return p < 0 ? sb_fdiv(b, one, r) : r;
  }
  uint32_t r;
  if (p == 0.5) r = sb_glsl1(b, GLSLstd450Sqrt, F, x);
  else if (p == -0.5) r = sb_fdiv(b, one, sb_glsl1(b, GLSLstd450Sqrt, F, x));
  else r = sb_exp(b, sb_fmul(b, fc(b, p), sb_glsl1(b, GLSLstd450Log, F, x)));
  uint32_t u = sb_f2bits(b, x), mag = sb_and(b, u, sb_u32(b, 0x7fffffffu));
  uint32_t zero = sb_ieq(b, mag, sb_u32(b, 0)), inf = sb_ieq(b, u, sb_u32(b, 0x7f800000u));
  uint32_t bad = sb_op2(b, SpvOpLogicalOr, B, sb_op2(b, SpvOpUGreaterThan, B, mag, sb_u32(b, 0x7f800000u)),
                        sb_op2(b, SpvOpSLessThan, B, u, sb_u32(b, 0))); /* NaN, or the sign set ... */
  bad = sb_op2(b, SpvOpLogicalAnd, B, bad, sb_op1(b, SpvOpLogicalNot, B, zero)); /* ... but not -0 */
  uint32_t big = sb_u32(b, 0x7f800000u), small = sb_u32(b, 0);
  r = sb_f2bits(b, r);
  r = sb_select(b, b->t_u32, zero, p > 0 ? small : big, r);
  r = sb_select(b, b->t_u32, inf, p > 0 ? big : small, r);
  r = sb_select(b, b->t_u32, bad, sb_u32(b, 0x7fc00000u), r);
  return sb_bits2f(b, r);
}

/* x < lo ? lo : x (min) or x > hi ? hi : x (max): a NaN x stays NaN, as
 * torch.clamp. */
static uint32_t clamp_(sb *b, uint32_t x, double v, bool min) {
  uint32_t k = fc(b, v), B = b->t_bool;
  uint32_t past = sb_op2(b, min ? SpvOpFOrdLessThan : SpvOpFOrdGreaterThan, B, x, k);
  past = sb_op2(b, SpvOpLogicalAnd, B, past, sb_op1(b, SpvOpLogicalNot, B, is_nan(b, x)));
  return sb_select(b, b->t_f32, past, k, x);
}

#define GELU_BETA 0.79788456080286535588 /* sqrt(2 / pi) */
#define GELU_KAPPA 0.044715

/* beta (x + kappa x^3), given x^2 */
static uint32_t gelu_inner(sb *b, uint32_t x, uint32_t x2) {
  return sb_fmul(b, fc(b, GELU_BETA), sb_fma(b, sb_fmul(b, x2, x), fc(b, GELU_KAPPA), x));
}

/* A comparison of x[0] and x[1] of dtype dt: 1 or 0, a bool.  Floats
 * compare ordered (false where either is NaN), but for !=, which is true
 * there, as PyTorch. */
static uint32_t compare(sb *b, int op, int dt, const uint32_t *x) {
  uint32_t B = b->t_bool, r;
  bool lt = op == MLC_OP_LT, le = op == MLC_OP_LE; /* else == (!= is its negation) */
  if (is_f(dt)) {
    uint32_t nan = sb_op2(b, SpvOpLogicalOr, B, is_nan(b, x[0]), is_nan(b, x[1]));
    SpvOp f = lt ? SpvOpFOrdLessThan : le ? SpvOpFOrdLessThanEqual : SpvOpFOrdEqual;
    r = sb_op2(b, SpvOpLogicalAnd, B, sb_op1(b, SpvOpLogicalNot, B, nan), sb_op2(b, f, B, x[0], x[1]));
  } else {
    r = sb_op2(b, lt ? SpvOpSLessThan : le ? SpvOpSLessThanEqual : SpvOpIEqual, B, x[0], x[1]);
  }
  if (op == MLC_OP_NE) r = sb_op1(b, SpvOpLogicalNot, B, r);
  return sb_select(b, b->t_u32, r, sb_u32(b, 1), sb_u32(b, 0));
}

/* The op applied to compute-type values x[0..] of input dtype dt (where:
 * the condition's; its branches are of out_dt); a: the node's attributes,
 * which pow and clamp need (NULL in a fused program, which has neither). */
uint32_t sv_ew_value(sb *b, int op, int dt, int out_dt, const mlc_attrs *a, const uint32_t *x) {
  uint32_t F = b->t_f32, T = ctype(b, dt);
  bool fl = is_f(dt);
  switch (op) {
  case MLC_OP_ADD: return fl ? farith(b, SpvOpFAdd, x[0], x[1]) : sb_op2(b, SpvOpIAdd, T, x[0], x[1]);
  case MLC_OP_SUB: return fl ? farith(b, SpvOpFSub, x[0], x[1]) : sb_op2(b, SpvOpISub, T, x[0], x[1]);
  case MLC_OP_MUL: return fl ? farith(b, SpvOpFMul, x[0], x[1]) : sb_op2(b, SpvOpIMul, T, x[0], x[1]);
  case MLC_OP_DIV: {
    if (fl) return farith(b, SpvOpFDiv, x[0], x[1]);
    /* integer division truncates; a zero divisor gives 0, as the CPU target */
    uint32_t zero = T == b->t_u32 ? sb_u32(b, 0) : sb_u64(b, 0), one = T == b->t_u32 ? sb_u32(b, 1) : sb_u64(b, 1);
    uint32_t z = sb_op2(b, SpvOpIEqual, b->t_bool, x[1], zero);
    uint32_t q = sb_op2(b, SpvOpSDiv, T, x[0], sb_select(b, T, z, one, x[1]));
    return sb_select(b, T, z, zero, q);
  }
  case MLC_OP_NEG: return sb_op1(b, fl ? SpvOpFNegate : SpvOpSNegate, T, x[0]);
  case MLC_OP_EXP: return sb_exp(b, x[0]);
  case MLC_OP_LOG: return sb_glsl1(b, GLSLstd450Log, F, x[0]);
  case MLC_OP_SQRT: return sb_glsl1(b, GLSLstd450Sqrt, F, x[0]);
  case MLC_OP_RSQRT: return sb_fdiv(b, fc(b, 1), sb_glsl1(b, GLSLstd450Sqrt, F, x[0]));
  case MLC_OP_TANH: return tanh_(b, x[0]);
  case MLC_OP_SIGMOID: return sigmoid(b, x[0]);
  case MLC_OP_RELU: {
    /* 0 where x < 0, else x: NaN goes through, as torch.relu lets it.  Decided
     * on the bits (sign set, not a NaN), since a driver may turn the float
     * select into max(x, 0), which drops NaN (see the cast to bool above). */
    if (fl) {
      uint32_t u = sb_f2bits(b, x[0]);
      uint32_t neg = sb_op2(b, SpvOpSLessThan, b->t_bool, u, sb_u32(b, 0));
      uint32_t num = sb_op2(b, SpvOpULessThanEqual, b->t_bool, sb_and(b, u, sb_u32(b, 0x7fffffffu)), sb_u32(b, 0x7f800000u));
      return sb_select(b, F, sb_op2(b, SpvOpLogicalAnd, b->t_bool, neg, num), fc(b, 0), x[0]);
    }
    return sb_select(b, T, int_lt0(b, T, x[0]), T == b->t_u32 ? sb_u32(b, 0) : sb_u64(b, 0), x[0]);
  }
  case MLC_OP_SILU: return sb_fdiv(b, x[0], sb_fadd(b, fc(b, 1), sb_exp(b, sb_op1(b, SpvOpFNegate, F, x[0]))));
  case MLC_OP_GELU: return sb_fmul(b, x[0], Phi(b, x[0]));
  case MLC_OP_BROADCAST: return x[0];
  case MLC_OP_CAST: return cast(b, dt, out_dt, x[0]);
  /* threshold_backward: x <= 0 ? 0 : g */
  case MLC_OP_RELU_GRAD:
    return sb_select(b, F, sb_op2(b, SpvOpFOrdLessThanEqual, b->t_bool, x[1], fc(b, 0)), fc(b, 0), x[0]);
  /* g * s * (1 + x (1 - s)) */
  case MLC_OP_SILU_GRAD: {
    uint32_t s = sigmoid(b, x[1]);
    uint32_t t = sb_fma(b, x[1], sb_fsub(b, fc(b, 1), s), fc(b, 1));
    return sb_fmul(b, sb_fmul(b, x[0], s), t);
  }
  /* g * (Phi(x) + x phi(x)) */
  case MLC_OP_GELU_GRAD: {
    uint32_t pdf = sb_fmul(b, fc(b, 0.39894228040143267794), sb_exp(b, sb_fmul(b, fc(b, -0.5), sb_fmul(b, x[1], x[1]))));
    return sb_fmul(b, x[0], sb_fma(b, x[1], pdf, Phi(b, x[1])));
  }
  /* |x|: the sign bit cleared; an integer's negation where it is below 0 */
  case MLC_OP_ABS:
    if (fl) return sb_bits2f(b, sb_and(b, sb_f2bits(b, x[0]), sb_u32(b, 0x7fffffffu)));
    return sb_select(b, T, int_lt0(b, T, x[0]), sb_op1(b, SpvOpSNegate, T, x[0]), x[0]);
  case MLC_OP_ERF: return erf_(b, x[0]);
  case MLC_OP_POW: return a ? pow_(b, x[0], a->f) : 0;
  case MLC_OP_CLAMP_MIN: return a ? clamp_(b, x[0], a->f, true) : 0;
  case MLC_OP_CLAMP_MAX: return a ? clamp_(b, x[0], a->f, false) : 0;
  /* 0.5 x (1 + tanh(beta (x + kappa x^3))) */
  case MLC_OP_GELU_TANH: {
    uint32_t th = tanh_(b, gelu_inner(b, x[0], sb_fmul(b, x[0], x[0]))), h = sb_fmul(b, x[0], fc(b, 0.5));
    return sb_fma(b, h, th, h);
  }
  /* GeluBackward (tanh): g (0.5 (1 + th) + 0.5 x (1 - th^2) beta (1 + 3 kappa x^2)) */
  case MLC_OP_GELU_TANH_GRAD: {
    uint32_t v = x[1], one = fc(b, 1), half = fc(b, 0.5), x2 = sb_fmul(b, v, v);
    uint32_t th = tanh_(b, gelu_inner(b, v, x2));
    uint32_t left_d = sb_fmul(b, half, sb_fadd(b, one, th));
    uint32_t tanh_d = sb_fsub(b, one, sb_fmul(b, th, th));
    uint32_t inner_d = sb_fmul(b, fc(b, GELU_BETA), sb_fma(b, x2, fc(b, 3 * GELU_KAPPA), one));
    uint32_t right_d = sb_fmul(b, sb_fmul(b, sb_fmul(b, half, v), tanh_d), inner_d);
    return sb_fmul(b, x[0], sb_fadd(b, left_d, right_d));
  }
  case MLC_OP_LT: case MLC_OP_LE: case MLC_OP_EQ: case MLC_OP_NE: return compare(b, op, dt, x);
  /* cond (a bool, 0 or 1) ? a : b */
  case MLC_OP_WHERE:
    return sb_select(b, ctype(b, out_dt), sb_op2(b, SpvOpINotEqual, b->t_bool, x[0], sb_u32(b, 0)), x[1], x[2]);
  default: return 0;
  }
}

typedef struct {
  int r;
  int64_t dims[MLC_MAX_RANK], st[MLC_EW_MAX_IN + 1][MLC_MAX_RANK];
} ew_ctx;

/* Element i: the operands, the op, the bits to store. */
static void ew_elem(sv *s, void *vc, uint32_t i, uint32_t *lo, uint32_t *hi) {
  ew_ctx *c = vc;
  sb *b = s->b;
  const mlc_node *n = s->n;
  uint32_t x[MLC_EW_MAX_IN];
  for (int o = 1; o <= n->nin; o++) {
    const mlc_node *in = sv_in_node(s, o - 1);
    if (in->op == MLC_OP_CONST) {
      x[o - 1] = sv_ew_const(b, in);
      continue;
    }
    bool same = true;
    for (int k = 0; k < c->r; k++) same &= c->st[o][k] == c->st[0][k];
    uint32_t off;
    if (same) {
      off = i;
    } else {
      off = sb_u32(b, 0);
      int64_t below = 1;
      for (int k = c->r - 1; k >= 0; k--) {
        if (c->st[o][k]) {
          uint32_t q = below == 1 ? i : sb_div(b, i, sb_u32(b, (uint32_t)below));
          if (k > 0) q = sb_mod(b, q, sb_u32(b, (uint32_t)c->dims[k]));
          off = sb_add(b, off, sb_mulc(b, q, (uint32_t)c->st[o][k]));
        }
        below *= c->dims[k];
      }
    }
    x[o - 1] = sv_ew_load(b, (uint32_t)(o - 1), in->type.dtype, off);
  }
  uint32_t y = sv_ew_value(b, n->op, sv_in(s, 0)->dtype, n->type.dtype, &n->a, x);
  MLC_ASSERT(y);
  sv_ew_bits(b, n->type.dtype, y, lo, hi);
}

void sv_ew_bits(sb *b, int dt, uint32_t y, uint32_t *lo, uint32_t *hi) {
  *hi = 0;
  if (is_f(dt)) {
    *lo = sb_f2bits_dt(b, dt, y);
  } else if (dt == MLC_DT_I64) {
    uint32_t t = sb_u64_type(b);
    *lo = sb_op1(b, SpvOpUConvert, b->t_u32, y);
    *hi = sb_op1(b, SpvOpUConvert, b->t_u32, sb_op2(b, SpvOpShiftRightLogical, t, y, sb_u32(b, 32)));
  } else {
    *lo = y;
  }
}

uint32_t sv_ew_round(sb *b, int dt, uint32_t y) {
  if (dt == MLC_DT_BF16) return sb_bf16tof(b, sb_f2bf16(b, y));
  if (dt == MLC_DT_F16) return sb_f16tof(b, sb_f2f16(b, y));
  return y;
}

static bool is_ew(int op) { return op == MLC_OP_BROADCAST || (mlc_ops[op].flags & MLC_F_EW); }

bool sv_emit_ew(sv *s) {
  const mlc_node *n = s->n;
  int nin = n->nin;
  if (nin < 1 || nin > MLC_EW_MAX_IN || !is_ew(n->op)) return sv_fail(s, "%s is not an elementwise op", mlc_ops[n->op].name);
  int64_t total = mlc_type_numel(&n->type);
  if (!sv_check_size(s, total)) return false;
  for (int k = 0; k < nin; k++)
    if (!sv_check_size(s, mlc_type_numel(sv_in(s, k)))) return false;
  ew_ctx c;
  c.r = mlc_ew_layout(s->f, n, c.dims, c.st);
  sv_items_store(s, total, sv_out(s), n->type.dtype, ew_elem, &c);
  return true;
}

/* arange: element i is i, in the node's dtype (i64 as the frontend makes it). */
static void arange_elem(sv *s, void *ctx, uint32_t i, uint32_t *lo, uint32_t *hi) {
  int dt = s->n->type.dtype;
  (void)ctx;
  sv_ew_bits(s->b, dt, cast(s->b, MLC_DT_I32, dt, i), lo, hi);
}

bool sv_emit_arange(sv *s) {
  int64_t total = mlc_type_numel(&s->n->type);
  if (!sv_check_size(s, total)) return false;
  sv_items_store(s, total, sv_out(s), s->n->type.dtype, arange_elem, NULL);
  return true;
}
