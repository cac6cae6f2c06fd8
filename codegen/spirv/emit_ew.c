/* Elementwise kernels: add/sub/mul/div with numpy broadcasting, the unary
 * ops, cast, broadcast (a copy to a larger shape) and the activation
 * gradients relu_grad, silu_grad, gelu_grad (g, x), with the arithmetic of
 * the CPU target (codegen/llvm/emit_ew.c), which follows PyTorch.
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
 * the tail for negative x keeps its relative accuracy.
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

/* erfc(x), Numerical Recipes' erfcc. */
static uint32_t erfc_(sb *b, uint32_t x) {
  static const double k[10] = {-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806,
                               0.27886807,  -1.13520398, 1.48851587, -0.82215223, 0.17087277};
  uint32_t z = sb_glsl1(b, GLSLstd450FAbs, b->t_f32, x);
  uint32_t t = sb_fdiv(b, fc(b, 1), sb_fma(b, fc(b, 0.5), z, fc(b, 1)));
  uint32_t p = fc(b, k[9]);
  for (int i = 8; i >= 0; i--) p = sb_fma(b, t, p, fc(b, k[i]));
  uint32_t e = sb_fsub(b, p, sb_fmul(b, z, z));
  uint32_t r = sb_fmul(b, t, sb_exp(b, e));
  return sb_select(b, b->t_f32, sb_op2(b, SpvOpFOrdGreaterThanEqual, b->t_bool, x, fc(b, 0)), r, sb_fsub(b, fc(b, 2), r));
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

/* The op applied to compute-type values x[0], x[1] of input dtype dt. */
uint32_t sv_ew_value(sb *b, int op, int dt, int out_dt, const uint32_t *x) {
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
  case MLC_OP_TANH: {
    /* clamped: tanh is +-1 in f32 well before 15, and some drivers compute
     * it through exp, which would overflow to inf / inf */
    uint32_t a[3] = {x[0], fc(b, -15), fc(b, 15)};
    return sb_glsl1(b, GLSLstd450Tanh, F, sb_glsl(b, GLSLstd450FClamp, F, 3, a));
  }
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
  uint32_t x[2];
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
  uint32_t y = sv_ew_value(b, n->op, sv_in(s, 0)->dtype, n->type.dtype, x);
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
  if (nin < 1 || nin > 2 || !is_ew(n->op)) return sv_fail(s, "%s is not an elementwise op", mlc_ops[n->op].name);
  int64_t total = mlc_type_numel(&n->type);
  if (!sv_check_size(s, total)) return false;
  for (int k = 0; k < nin; k++)
    if (!sv_check_size(s, mlc_type_numel(sv_in(s, k)))) return false;
  ew_ctx c;
  c.r = mlc_ew_layout(s->f, n, c.dims, c.st);
  sv_items_store(s, total, sv_out(s), n->type.dtype, ew_elem, &c);
  return true;
}
