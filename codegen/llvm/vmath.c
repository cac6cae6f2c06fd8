/* Vector math for the CPU kernels: exp, log, erf, tanh and sigmoid in f32,
 * emitted inline as LLVM IR so that they vectorise (libm calls would not).
 *
 * exp and log are Cephes' expf and logf (range reduction plus a minimax
 * polynomial, about 1 ulp), with the special cases done by selects: exp
 * overflows to +inf and underflows through the subnormals to 0; log gives
 * -inf at 0 and NaN below it.  erf is Abramowitz and Stegun 7.1.26 (absolute
 * error below 1.5e-7), the same formula PyTorch's vectorised CPU erf uses.
 * tanh is Cephes' tanhf: a polynomial below 0.625, 1 - 2/(exp(2x)+1) above.
 * Every function takes an f32 scalar or vector and returns the same type.
 */
#include "codegen/llvm/cg.h"

static LLVMValueRef fc(cg *g, LLVMValueRef like, double v) { return cg_const(g, LLVMTypeOf(like), v); }

static LLVMValueRef horner(cg *g, LLVMValueRef x, const double *c, int n) {
  LLVMValueRef y = fc(g, x, c[0]);
  for (int i = 1; i < n; i++) y = cg_fma(g, y, x, fc(g, x, c[i]));
  return y;
}

static LLVMValueRef fabs_(cg *g, LLVMValueRef x) {
  LLVMTypeRef t = LLVMTypeOf(x);
  return cg_intrin(g, "llvm.fabs", &t, 1, &x, 1);
}

static LLVMValueRef copysign_(cg *g, LLVMValueRef mag, LLVMValueRef sgn) {
  LLVMTypeRef t = LLVMTypeOf(mag);
  LLVMValueRef a[2] = {mag, sgn};
  return cg_intrin(g, "llvm.copysign", &t, 1, a, 2);
}

static LLVMValueRef fmin_(cg *g, LLVMValueRef a, LLVMValueRef b) {
  LLVMTypeRef t = LLVMTypeOf(a);
  LLVMValueRef x[2] = {a, b};
  return cg_intrin(g, "llvm.minnum", &t, 1, x, 2);
}

static LLVMValueRef fmax_(cg *g, LLVMValueRef a, LLVMValueRef b) {
  LLVMTypeRef t = LLVMTypeOf(a);
  LLVMValueRef x[2] = {a, b};
  return cg_intrin(g, "llvm.maxnum", &t, 1, x, 2);
}

static LLVMTypeRef ivec(cg *g, LLVMValueRef like) { return cg_vec(g->t_i32, cg_lanes(like)); }

/* 2^n for an integer-valued float n in [-150, 128], as two factors so that
 * each stays a normal float. */
static LLVMValueRef pow2(cg *g, LLVMValueRef n) {
  LLVMTypeRef it = ivec(g, n);
  LLVMValueRef ni = LLVMBuildFPToSI(g->b, n, it, "");
  LLVMValueRef n1 = LLVMBuildAShr(g->b, ni, cg_const_bits(g, it, 1), "");
  LLVMValueRef n2 = LLVMBuildSub(g->b, ni, n1, "");
  LLVMValueRef c127 = cg_const_bits(g, it, 127), c23 = cg_const_bits(g, it, 23);
  LLVMValueRef s1 = LLVMBuildShl(g->b, LLVMBuildAdd(g->b, n1, c127, ""), c23, "");
  LLVMValueRef s2 = LLVMBuildShl(g->b, LLVMBuildAdd(g->b, n2, c127, ""), c23, "");
  LLVMTypeRef ft = LLVMTypeOf(n);
  return LLVMBuildFMul(g->b, LLVMBuildBitCast(g->b, s1, ft, ""), LLVMBuildBitCast(g->b, s2, ft, ""), "");
}

LLVMValueRef cg_exp(cg *g, LLVMValueRef x) {
  static const double p[] = {1.9875691500E-4, 1.3981999507E-3, 8.3334519073E-3,
                             4.1665795894E-2, 1.6666665459E-1, 5.0000001201E-1};
  LLVMValueRef xc = fmin_(g, fmax_(g, x, fc(g, x, -104.0)), fc(g, x, 88.8));
  LLVMTypeRef t = LLVMTypeOf(x);
  LLVMValueRef nf = LLVMBuildFMul(g->b, xc, fc(g, x, 1.44269504088896341), "");
  nf = cg_intrin(g, "llvm.rint", &t, 1, &nf, 1);
  LLVMValueRef r = cg_fma(g, nf, fc(g, x, -0.693359375), xc);
  r = cg_fma(g, nf, fc(g, x, 2.12194440e-4), r);
  LLVMValueRef y = horner(g, r, p, 6);
  y = cg_fma(g, y, LLVMBuildFMul(g->b, r, r, ""), r);
  y = LLVMBuildFAdd(g->b, y, fc(g, x, 1.0), "");
  y = LLVMBuildFMul(g->b, y, pow2(g, nf), "");
  y = LLVMBuildSelect(g->b, LLVMBuildFCmp(g->b, LLVMRealOGT, x, fc(g, x, 88.72283935546875), ""), fc(g, x, __builtin_inf()), y, "");
  y = LLVMBuildSelect(g->b, LLVMBuildFCmp(g->b, LLVMRealOLT, x, fc(g, x, -103.972076416015625), ""), fc(g, x, 0.0), y, "");
  return LLVMBuildSelect(g->b, LLVMBuildFCmp(g->b, LLVMRealUNO, x, x, ""), x, y, "");
}

LLVMValueRef cg_log(cg *g, LLVMValueRef x0) {
  static const double p[] = {7.0376836292E-2, -1.1514610310E-1, 1.1676998740E-1, -1.2420140846E-1, 1.4249322787E-1,
                             -1.6668057665E-1, 2.0000714765E-1, -2.4999993993E-1, 3.3333331174E-1};
  LLVMTypeRef it = ivec(g, x0), ft = LLVMTypeOf(x0);
  /* Subnormals: scale into the normal range first. */
  LLVMValueRef sub = LLVMBuildFCmp(g->b, LLVMRealOLT, x0, fc(g, x0, 1.17549435e-38), "");
  LLVMValueRef x = LLVMBuildSelect(g->b, sub, LLVMBuildFMul(g->b, x0, fc(g, x0, 8388608.0), ""), x0, "");
  LLVMValueRef eadj = LLVMBuildSelect(g->b, sub, fc(g, x0, -23.0), fc(g, x0, 0.0), "");
  LLVMValueRef u = LLVMBuildBitCast(g->b, x, it, "");
  LLVMValueRef ei = LLVMBuildSub(g->b, LLVMBuildLShr(g->b, u, cg_const_bits(g, it, 23), ""), cg_const_bits(g, it, 126), "");
  LLVMValueRef e = LLVMBuildFAdd(g->b, LLVMBuildSIToFP(g->b, ei, ft, ""), eadj, "");
  LLVMValueRef m = LLVMBuildOr(g->b, LLVMBuildAnd(g->b, u, cg_const_bits(g, it, 0x007fffff), ""), cg_const_bits(g, it, 0x3f000000), "");
  m = LLVMBuildBitCast(g->b, m, ft, ""); /* [0.5, 1) */
  LLVMValueRef small = LLVMBuildFCmp(g->b, LLVMRealOLT, m, fc(g, x0, 0.707106781186547524), "");
  e = LLVMBuildSelect(g->b, small, LLVMBuildFSub(g->b, e, fc(g, x0, 1.0), ""), e, "");
  m = LLVMBuildSelect(g->b, small, LLVMBuildFAdd(g->b, m, m, ""), m, "");
  m = LLVMBuildFSub(g->b, m, fc(g, x0, 1.0), "");
  LLVMValueRef z = LLVMBuildFMul(g->b, m, m, "");
  LLVMValueRef y = LLVMBuildFMul(g->b, LLVMBuildFMul(g->b, horner(g, m, p, 9), m, ""), z, "");
  y = cg_fma(g, e, fc(g, x0, -2.12194440e-4), y);
  y = cg_fma(g, z, fc(g, x0, -0.5), y);
  LLVMValueRef r = LLVMBuildFAdd(g->b, m, y, "");
  r = cg_fma(g, e, fc(g, x0, 0.693359375), r);
  r = LLVMBuildSelect(g->b, LLVMBuildFCmp(g->b, LLVMRealOEQ, x0, fc(g, x0, __builtin_inf()), ""), x0, r, "");
  r = LLVMBuildSelect(g->b, LLVMBuildFCmp(g->b, LLVMRealOEQ, x0, fc(g, x0, 0.0), ""), fc(g, x0, -__builtin_inf()), r, "");
  return LLVMBuildSelect(g->b, LLVMBuildFCmp(g->b, LLVMRealULT, x0, fc(g, x0, 0.0), ""), fc(g, x0, __builtin_nan("")), r, "");
}

/* erf by Abramowitz and Stegun 7.1.26: absolute error under 1.5e-7, which
 * is what GELU's 1 + erf needs (cg_erf_abs); the erf op's values near 0
 * need a relative one (cg_erf): below |x| = 0.75 the series 2/sqrt(pi)
 * sum_n (-1)^n x^(2n+1) / (n! (2n+1)) to n = 8 (the first term left out is
 * under 1e-9 of x), 7.1.26 from there on. */
static LLVMValueRef erf_as(cg *g, LLVMValueRef x, bool series) {
  static const double a[] = {1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592};
  LLVMValueRef ax = fabs_(g, x);
  LLVMValueRef t = LLVMBuildFDiv(g->b, fc(g, x, 1.0), cg_fma(g, ax, fc(g, x, 0.3275911), fc(g, x, 1.0)), "");
  LLVMValueRef y = LLVMBuildFMul(g->b, horner(g, t, a, 5), t, "");
  LLVMValueRef e = cg_exp(g, LLVMBuildFNeg(g->b, LLVMBuildFMul(g->b, ax, ax, ""), ""));
  LLVMValueRef r = LLVMBuildFSub(g->b, fc(g, x, 1.0), LLVMBuildFMul(g->b, y, e, ""), "");
  if (series) {
    double c[9], fact = 1; /* the series' coefficients in x^2, highest first (horner's order) */
    for (int n = 0; n < 9; n++) {
      if (n) fact *= n;
      c[8 - n] = (n % 2 ? -1.0 : 1.0) * 1.12837916709551257390 / (fact * (2 * n + 1));
    }
    LLVMValueRef near = LLVMBuildFMul(g->b, ax, horner(g, LLVMBuildFMul(g->b, ax, ax, ""), c, 9), "");
    r = LLVMBuildSelect(g->b, LLVMBuildFCmp(g->b, LLVMRealOLT, ax, fc(g, x, 0.75), ""), near, r, "");
  }
  return copysign_(g, r, x);
}

LLVMValueRef cg_erf(cg *g, LLVMValueRef x) { return erf_as(g, x, true); }
LLVMValueRef cg_erf_abs(cg *g, LLVMValueRef x) { return erf_as(g, x, false); }

LLVMValueRef cg_tanh(cg *g, LLVMValueRef x) {
  static const double p[] = {-5.70498872745E-3, 2.06390887954E-2, -5.37397155531E-2, 1.33314422036E-1,
                             -3.33332819422E-1};
  LLVMValueRef ax = fabs_(g, x);
  LLVMValueRef z = LLVMBuildFMul(g->b, x, x, "");
  LLVMValueRef small = cg_fma(g, LLVMBuildFMul(g->b, horner(g, z, p, 5), z, ""), x, x);
  LLVMValueRef e = cg_exp(g, LLVMBuildFAdd(g->b, ax, ax, ""));
  LLVMValueRef big = LLVMBuildFSub(g->b, fc(g, x, 1.0),
                                   LLVMBuildFDiv(g->b, fc(g, x, 2.0), LLVMBuildFAdd(g->b, e, fc(g, x, 1.0), ""), ""), "");
  big = copysign_(g, big, x);
  return LLVMBuildSelect(g->b, LLVMBuildFCmp(g->b, LLVMRealOLT, ax, fc(g, x, 0.625), ""), small, big, "");
}

LLVMValueRef cg_sigmoid(cg *g, LLVMValueRef x) {
  LLVMValueRef e = cg_exp(g, LLVMBuildFNeg(g->b, x, ""));
  return LLVMBuildFDiv(g->b, fc(g, x, 1.0), LLVMBuildFAdd(g->b, e, fc(g, x, 1.0), ""), "");
}
