/* Shared IR-building helpers of the LLVM CPU backend (see cg.h): types and
 * constants, loads and stores that convert between storage and compute
 * types, stack buffers, loops and ifs, reductions, and index arithmetic.
 *
 * The module uses LLVM 14's typed pointers; buffers travel as i8* and are
 * cast to the element type at each access, which the optimiser folds away.
 */
#include "codegen/llvm/cg.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

bool cg_fail(cg *g, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g->err, sizeof g->err, fmt, ap);
  va_end(ap);
  return false;
}

int64_t cg_ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t cg_round_up(int64_t a, int64_t b) { return cg_ceil_div(a, b) * b; }

bool cg_is_float(int dt) { return dt == MLC_DT_F32 || dt == MLC_DT_BF16 || dt == MLC_DT_F16 || mlc_dtype_is_f8(dt); }

/* ---- types and constants ---- */

LLVMTypeRef cg_vec(LLVMTypeRef elem, int lanes) { return lanes == 1 ? elem : LLVMVectorType(elem, (unsigned)lanes); }

int cg_lanes(LLVMValueRef v) {
  LLVMTypeRef t = LLVMTypeOf(v);
  return LLVMGetTypeKind(t) == LLVMVectorTypeKind ? (int)LLVMGetVectorSize(t) : 1;
}

LLVMTypeRef cg_ctype(cg *g, int dt, int lanes) {
  LLVMTypeRef e;
  switch (dt) {
  case MLC_DT_I32: e = g->t_i32; break;
  case MLC_DT_I64: e = g->t_i64; break;
  case MLC_DT_BOOL: e = g->t_i8; break;
  default: e = g->t_f32; break;
  }
  return cg_vec(e, lanes);
}

LLVMTypeRef cg_stype(cg *g, int dt) {
  switch (dt) {
  case MLC_DT_BF16: return g->t_i16;
  case MLC_DT_F16: return g->t_f16;
  case MLC_DT_I32: return g->t_i32;
  case MLC_DT_I64: return g->t_i64;
  case MLC_DT_BOOL: case MLC_DT_F8E4M3: case MLC_DT_F8E5M2: return g->t_i8;
  default: return g->t_f32;
  }
}

LLVMValueRef cg_i64(cg *g, int64_t v) { return LLVMConstInt(g->t_i64, (unsigned long long)v, 1); }
LLVMValueRef cg_i32(cg *g, int32_t v) { return LLVMConstInt(g->t_i32, (unsigned long long)(int64_t)v, 1); }

static LLVMValueRef splat_const(LLVMTypeRef ty, LLVMValueRef s) {
  if (LLVMGetTypeKind(ty) != LLVMVectorTypeKind) return s;
  unsigned n = LLVMGetVectorSize(ty);
  LLVMValueRef el[64];
  for (unsigned i = 0; i < n; i++) el[i] = s;
  return LLVMConstVector(el, n);
}

static LLVMTypeRef scalar_of(LLVMTypeRef ty) {
  return LLVMGetTypeKind(ty) == LLVMVectorTypeKind ? LLVMGetElementType(ty) : ty;
}

LLVMValueRef cg_const(cg *g, LLVMTypeRef ty, double v) {
  (void)g;
  LLVMTypeRef e = scalar_of(ty);
  LLVMTypeKind k = LLVMGetTypeKind(e);
  LLVMValueRef s = k == LLVMIntegerTypeKind ? LLVMConstInt(e, (unsigned long long)(long long)v, 1) : LLVMConstReal(e, v);
  return splat_const(ty, s);
}

LLVMValueRef cg_const_bits(cg *g, LLVMTypeRef ty, uint64_t bits) {
  (void)g;
  return splat_const(ty, LLVMConstInt(scalar_of(ty), bits, 0));
}

LLVMValueRef cg_splat(cg *g, LLVMValueRef s, int lanes) {
  if (lanes == 1) return s;
  LLVMTypeRef vt = LLVMVectorType(LLVMTypeOf(s), (unsigned)lanes);
  LLVMValueRef v = LLVMBuildInsertElement(g->b, LLVMGetUndef(vt), s, cg_i32(g, 0), "");
  return LLVMBuildShuffleVector(g->b, v, LLVMGetUndef(vt), LLVMConstNull(LLVMVectorType(g->t_i32, (unsigned)lanes)), "");
}

LLVMValueRef cg_mask(cg *g, int lanes, int nvalid) {
  LLVMValueRef el[64];
  for (int i = 0; i < lanes; i++) el[i] = LLVMConstInt(g->t_i1, i < nvalid, 0);
  return LLVMConstVector(el, (unsigned)lanes);
}

/* ---- intrinsics ---- */

LLVMValueRef cg_intrin(cg *g, const char *name, LLVMTypeRef *over, int nover, LLVMValueRef *args, int nargs) {
  unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
  LLVMValueRef fn = LLVMGetIntrinsicDeclaration(g->mod, id, over, (size_t)nover);
  LLVMTypeRef fty = LLVMIntrinsicGetType(g->ctx, id, over, (size_t)nover);
  return LLVMBuildCall2(g->b, fty, fn, args, (unsigned)nargs, "");
}

LLVMValueRef cg_fma(cg *g, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c) {
  LLVMTypeRef t = LLVMTypeOf(a);
  LLVMValueRef args[3] = {a, b, c};
  return cg_intrin(g, "llvm.fmuladd", &t, 1, args, 3);
}

LLVMValueRef cg_sqrt(cg *g, LLVMValueRef x) {
  LLVMTypeRef t = LLVMTypeOf(x);
  return cg_intrin(g, "llvm.sqrt", &t, 1, &x, 1);
}

LLVMValueRef cg_min_i64(cg *g, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, a, b, ""), a, b, "");
}

LLVMValueRef cg_iadd(cg *g, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildAdd(g->b, a, b, ""); }
LLVMValueRef cg_iaddc(cg *g, LLVMValueRef a, int64_t c) { return c ? LLVMBuildAdd(g->b, a, cg_i64(g, c), "") : a; }
LLVMValueRef cg_imulc(cg *g, LLVMValueRef a, int64_t c) { return c == 1 ? a : LLVMBuildMul(g->b, a, cg_i64(g, c), ""); }
LLVMValueRef cg_idx(cg *g, LLVMValueRef base, LLVMValueRef i, int64_t stride) {
  return cg_iadd(g, base, cg_imulc(g, i, stride));
}

LLVMValueRef cg_block_len(cg *g, LLVMValueRef start, int64_t extent, int64_t block) {
  return cg_min_i64(g, cg_i64(g, block), LLVMBuildSub(g->b, cg_i64(g, extent), start, ""));
}

LLVMValueRef cg_eq(cg *g, LLVMValueRef a, int64_t b) { return LLVMBuildICmp(g->b, LLVMIntEQ, a, cg_i64(g, b), ""); }

LLVMValueRef cg_max(cg *g, int dt, LLVMValueRef a, LLVMValueRef b) {
  LLVMValueRef gt = cg_is_float(dt) ? LLVMBuildFCmp(g->b, LLVMRealOGT, a, b, "") : LLVMBuildICmp(g->b, LLVMIntSGT, a, b, "");
  return LLVMBuildSelect(g->b, gt, a, b, "");
}

LLVMValueRef cg_add(cg *g, int dt, LLVMValueRef a, LLVMValueRef b) {
  return cg_is_float(dt) ? LLVMBuildFAdd(g->b, a, b, "") : LLVMBuildAdd(g->b, a, b, "");
}

/* Halves the vector until one lane is left: log2(lanes) shuffles, and an
 * order of additions that does not depend on fast-math flags. */
static LLVMValueRef hreduce(cg *g, int dt, LLVMValueRef v, LLVMValueRef (*op)(cg *, int, LLVMValueRef, LLVMValueRef)) {
  int n = cg_lanes(v);
  while (n > 1) {
    int h = n / 2;
    LLVMValueRef lo[32], hi[32];
    for (int i = 0; i < h; i++) {
      lo[i] = cg_i32(g, i);
      hi[i] = cg_i32(g, h + i);
    }
    LLVMValueRef a = LLVMBuildShuffleVector(g->b, v, LLVMGetUndef(LLVMTypeOf(v)), LLVMConstVector(lo, (unsigned)h), "");
    LLVMValueRef b = LLVMBuildShuffleVector(g->b, v, LLVMGetUndef(LLVMTypeOf(v)), LLVMConstVector(hi, (unsigned)h), "");
    v = op(g, dt, a, b);
    n = h;
  }
  return LLVMGetTypeKind(LLVMTypeOf(v)) == LLVMVectorTypeKind ? LLVMBuildExtractElement(g->b, v, cg_i32(g, 0), "") : v;
}

LLVMValueRef cg_hsum(cg *g, int dt, LLVMValueRef v) { return hreduce(g, dt, v, cg_add); }
LLVMValueRef cg_hmax(cg *g, int dt, LLVMValueRef v) { return hreduce(g, dt, v, cg_max); }

LLVMValueRef cg_min(cg *g, int dt, LLVMValueRef a, LLVMValueRef b) {
  LLVMValueRef lt = cg_is_float(dt) ? LLVMBuildFCmp(g->b, LLVMRealOLT, a, b, "") : LLVMBuildICmp(g->b, LLVMIntSLT, a, b, "");
  return LLVMBuildSelect(g->b, lt, a, b, "");
}

LLVMValueRef cg_hmin(cg *g, int dt, LLVMValueRef v) { return hreduce(g, dt, v, cg_min); }

LLVMValueRef cg_highest(cg *g, int dt, int lanes) {
  LLVMTypeRef t = cg_ctype(g, dt, lanes);
  switch (dt) {
  case MLC_DT_I32: return cg_const_bits(g, t, 0x7fffffffu);
  case MLC_DT_I64: return cg_const_bits(g, t, 0x7fffffffffffffffull);
  case MLC_DT_BOOL: return cg_const_bits(g, t, 1);
  default: return cg_const(g, t, __builtin_inf());
  }
}

LLVMValueRef cg_lowest(cg *g, int dt, int lanes) {
  LLVMTypeRef t = cg_ctype(g, dt, lanes);
  switch (dt) {
  case MLC_DT_I32: return cg_const_bits(g, t, 0x80000000u);
  case MLC_DT_I64: return cg_const_bits(g, t, 0x8000000000000000ull);
  case MLC_DT_BOOL: return cg_const_bits(g, t, 0);
  default: return cg_const(g, t, -__builtin_inf());
  }
}

LLVMValueRef cg_convert(cg *g, LLVMValueRef v, int from, int to) {
  int lanes = cg_lanes(v);
  LLVMTypeRef tt = cg_ctype(g, to, lanes);
  bool ff = cg_is_float(from), tf = cg_is_float(to);
  if (ff && tf) return v; /* both compute in f32; rounding happens at the store */
  if (ff) {
    if (to == MLC_DT_BOOL)
      return LLVMBuildZExt(g->b, LLVMBuildFCmp(g->b, LLVMRealUNE, v, cg_const(g, LLVMTypeOf(v), 0), ""), tt, "");
    /* Saturating: NaN gives 0 and out-of-range values clamp, instead of
     * LLVM's poison for a plain fptosi. */
    LLVMTypeRef ov[2] = {tt, LLVMTypeOf(v)};
    return cg_intrin(g, "llvm.fptosi.sat", ov, 2, &v, 1);
  }
  if (tf) return from == MLC_DT_BOOL ? LLVMBuildUIToFP(g->b, v, tt, "") : LLVMBuildSIToFP(g->b, v, tt, "");
  if (from == to) return v;
  if (to == MLC_DT_BOOL)
    return LLVMBuildZExt(g->b, LLVMBuildICmp(g->b, LLVMIntNE, v, LLVMConstNull(LLVMTypeOf(v)), ""), tt, "");
  if (from == MLC_DT_BOOL) return LLVMBuildZExt(g->b, v, tt, "");
  return from == MLC_DT_I32 ? LLVMBuildSExt(g->b, v, tt, "") : LLVMBuildTrunc(g->b, v, tt, "");
}

/* ---- memory ---- */

LLVMValueRef cg_elem_ptr(cg *g, cg_buf b, LLVMValueRef idx) {
  LLVMTypeRef st = cg_stype(g, b.dt);
  LLVMValueRef p = LLVMBuildBitCast(g->b, b.p, LLVMPointerType(st, 0), "");
  return LLVMBuildGEP2(g->b, st, p, &idx, 1, "");
}

/* f16 <-> f32 in integer arithmetic, for targets without F16C (LLVM would
 * otherwise call libgcc's __gnu_h2f_ieee, which a JIT may not find).  The
 * f32 -> f16 direction rounds to nearest even: Fabian Giesen's
 * float_to_half_fast3_rtne, with the branches turned into selects. */
static LLVMValueRef f16_to_f32_int(cg *g, LLVMValueRef h) {
  int lanes = cg_lanes(h);
  LLVMTypeRef it = cg_vec(g->t_i32, lanes), ft = cg_vec(g->t_f32, lanes);
  LLVMValueRef u = LLVMBuildZExt(g->b, LLVMBuildBitCast(g->b, h, cg_vec(g->t_i16, lanes), ""), it, "");
  LLVMValueRef sign = LLVMBuildShl(g->b, LLVMBuildAnd(g->b, u, cg_const_bits(g, it, 0x8000), ""), cg_const_bits(g, it, 16), "");
  LLVMValueRef em = LLVMBuildAnd(g->b, u, cg_const_bits(g, it, 0x7fff), "");
  LLVMValueRef sh = LLVMBuildShl(g->b, em, cg_const_bits(g, it, 13), "");
  LLVMValueRef normal = LLVMBuildAdd(g->b, sh, cg_const_bits(g, it, 112u << 23), "");
  LLVMValueRef infnan = LLVMBuildAdd(g->b, sh, cg_const_bits(g, it, 224u << 23), "");
  LLVMValueRef sub = LLVMBuildFMul(g->b, LLVMBuildUIToFP(g->b, em, ft, ""), cg_const(g, ft, 0x1p-24), "");
  LLVMValueRef r = LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntUGE, em, cg_const_bits(g, it, 0x7c00), ""), infnan, normal, "");
  r = LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntULT, em, cg_const_bits(g, it, 0x400), ""),
                      LLVMBuildBitCast(g->b, sub, it, ""), r, "");
  return LLVMBuildBitCast(g->b, LLVMBuildOr(g->b, r, sign, ""), ft, "");
}

static LLVMValueRef f32_to_f16_int(cg *g, LLVMValueRef v) {
  int lanes = cg_lanes(v);
  LLVMTypeRef it = cg_vec(g->t_i32, lanes), ft = cg_vec(g->t_f32, lanes);
  LLVMValueRef x = LLVMBuildBitCast(g->b, v, it, "");
  LLVMValueRef sign = LLVMBuildAnd(g->b, LLVMBuildLShr(g->b, x, cg_const_bits(g, it, 16), ""), cg_const_bits(g, it, 0x8000), "");
  LLVMValueRef ax = LLVMBuildAnd(g->b, x, cg_const_bits(g, it, 0x7fffffff), "");
  LLVMValueRef big = LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntUGT, ax, cg_const_bits(g, it, 0x7f800000), ""),
                                     cg_const_bits(g, it, 0x7e00), cg_const_bits(g, it, 0x7c00), "");
  LLVMValueRef magic = cg_const_bits(g, it, 126u << 23); /* 0.5f */
  LLVMValueRef den = LLVMBuildFAdd(g->b, LLVMBuildBitCast(g->b, ax, ft, ""), LLVMBuildBitCast(g->b, magic, ft, ""), "");
  den = LLVMBuildSub(g->b, LLVMBuildBitCast(g->b, den, it, ""), magic, "");
  LLVMValueRef odd = LLVMBuildAnd(g->b, LLVMBuildLShr(g->b, ax, cg_const_bits(g, it, 13), ""), cg_const_bits(g, it, 1), "");
  LLVMValueRef nrm = LLVMBuildAdd(g->b, ax, cg_const_bits(g, it, (uint32_t)(-(112 << 23)) + 0xfffu), "");
  nrm = LLVMBuildLShr(g->b, LLVMBuildAdd(g->b, nrm, odd, ""), cg_const_bits(g, it, 13), "");
  LLVMValueRef r = LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntULT, ax, cg_const_bits(g, it, 113u << 23), ""), den, nrm, "");
  r = LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntUGE, ax, cg_const_bits(g, it, 0x47800000), ""), big, r, "");
  return LLVMBuildTrunc(g->b, LLVMBuildOr(g->b, r, sign, ""), cg_vec(g->t_i16, lanes), "");
}

/* f8 (ir/ir.h).  Decoding: e5m2 is the top byte of an f16; e4m3's normal
 * codes move their 7 magnitude bits under f32's exponent and rebias it,
 * its subnormals (exponent 0) are m * 2^-9, and S.1111.111 is NaN.
 * Encoding rounds to nearest even on f32's bits: normals keep 3 (e4m3) or 2
 * (e5m2) mantissa bits, subnormals round by one f32 addition whose ulp is
 * the format's subnormal step; a NaN gives the NaN code, and finite values
 * past the largest, and infinities, saturate to it (PTX's cvt.satfinite). */
static LLVMValueRef f8_to_f32(cg *g, LLVMValueRef v, int dt) {
  int lanes = cg_lanes(v);
  LLVMTypeRef it = cg_vec(g->t_i32, lanes), ft = cg_vec(g->t_f32, lanes);
  LLVMValueRef u = LLVMBuildZExt(g->b, v, it, "");
  if (dt == MLC_DT_F8E5M2) {
    LLVMValueRef h = LLVMBuildTrunc(g->b, LLVMBuildShl(g->b, u, cg_const_bits(g, it, 8), ""), cg_vec(g->t_i16, lanes), "");
    return f16_to_f32_int(g, h);
  }
  LLVMValueRef sign = LLVMBuildShl(g->b, LLVMBuildAnd(g->b, u, cg_const_bits(g, it, 0x80), ""), cg_const_bits(g, it, 24), "");
  LLVMValueRef mag = LLVMBuildAnd(g->b, u, cg_const_bits(g, it, 0x7f), "");
  LLVMValueRef normal = LLVMBuildAdd(g->b, LLVMBuildShl(g->b, mag, cg_const_bits(g, it, 20), ""), cg_const_bits(g, it, 120u << 23), "");
  LLVMValueRef sub = LLVMBuildFMul(g->b, LLVMBuildUIToFP(g->b, mag, ft, ""), cg_const(g, ft, 0x1p-9), "");
  LLVMValueRef r = LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntULT, mag, cg_const_bits(g, it, 8), ""),
                                   LLVMBuildBitCast(g->b, sub, it, ""), normal, "");
  r = LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntEQ, mag, cg_const_bits(g, it, 0x7f), ""),
                      cg_const_bits(g, it, 0x7fc00000), r, "");
  return LLVMBuildBitCast(g->b, LLVMBuildOr(g->b, r, sign, ""), ft, "");
}

static LLVMValueRef f32_to_f8(cg *g, LLVMValueRef v, int dt) {
  int lanes = cg_lanes(v);
  bool e4 = dt == MLC_DT_F8E4M3;
  int mbits = e4 ? 3 : 2, bias = e4 ? 7 : 15, shift = 23 - mbits;
  LLVMTypeRef it = cg_vec(g->t_i32, lanes), ft = cg_vec(g->t_f32, lanes);
  LLVMValueRef x = LLVMBuildBitCast(g->b, v, it, "");
  LLVMValueRef sign = LLVMBuildAnd(g->b, LLVMBuildLShr(g->b, x, cg_const_bits(g, it, 24), ""), cg_const_bits(g, it, 0x80), "");
  LLVMValueRef a = LLVMBuildBitCast(g->b, LLVMBuildAnd(g->b, x, cg_const_bits(g, it, 0x7fffffff), ""), ft, "");
  LLVMValueRef fmax = cg_const(g, ft, mlc_f8_max(dt));
  a = LLVMBuildSelect(g->b, LLVMBuildFCmp(g->b, LLVMRealOGT, a, fmax, ""), fmax, a, ""); /* inf too; NaN stays */
  LLVMValueRef ax = LLVMBuildBitCast(g->b, a, it, "");
  /* normal: RNE on the low `shift` bits, then the exponent rebiased */
  LLVMValueRef odd = LLVMBuildAnd(g->b, LLVMBuildLShr(g->b, ax, cg_const_bits(g, it, (uint64_t)shift), ""), cg_const_bits(g, it, 1), "");
  LLVMValueRef nrm = LLVMBuildAdd(g->b, ax, cg_const_bits(g, it, (1u << (shift - 1)) - 1), "");
  nrm = LLVMBuildLShr(g->b, LLVMBuildAdd(g->b, nrm, odd, ""), cg_const_bits(g, it, (uint64_t)shift), "");
  nrm = LLVMBuildSub(g->b, nrm, cg_const_bits(g, it, (uint64_t)(127 - bias) << mbits), "");
  /* subnormal (below 2^(1 - bias)): a + 2^(23 + step exponent) rounds a to a multiple of the step */
  int step = 1 - bias - mbits; /* the subnormal step is 2^step */
  LLVMValueRef magic = cg_const(g, ft, ldexp(1.0, 23 + step));
  LLVMValueRef den = LLVMBuildSub(g->b, LLVMBuildBitCast(g->b, LLVMBuildFAdd(g->b, a, magic, ""), it, ""),
                                  LLVMBuildBitCast(g->b, magic, it, ""), "");
  LLVMValueRef r = LLVMBuildSelect(g->b, LLVMBuildFCmp(g->b, LLVMRealOLT, a, cg_const(g, ft, ldexp(1.0, 1 - bias)), ""), den, nrm, "");
  r = LLVMBuildSelect(g->b, LLVMBuildFCmp(g->b, LLVMRealUNO, a, a, ""), cg_const_bits(g, it, 0x7f), r, "");
  return LLVMBuildTrunc(g->b, LLVMBuildOr(g->b, r, sign, ""), cg_vec(g->t_i8, lanes), "");
}

LLVMValueRef cg_f8_scale(cg *g, LLVMValueRef amax, int dt, bool inverse) {
  LLVMTypeRef ft = LLVMTypeOf(amax), it = cg_vec(g->t_i32, cg_lanes(amax));
  LLVMValueRef tiny = cg_const(g, ft, 1e-12);
  LLVMValueRef a = LLVMBuildSelect(g->b, LLVMBuildFCmp(g->b, LLVMRealOGT, amax, tiny, ""), amax, tiny, "");
  LLVMValueRef r = LLVMBuildFDiv(g->b, cg_const(g, ft, mlc_f8_max(dt)), a, "");
  LLVMValueRef e = LLVMBuildAnd(g->b, LLVMBuildBitCast(g->b, r, it, ""), cg_const_bits(g, it, 0x7f800000), ""); /* 2^e's bits */
  if (inverse) e = LLVMBuildSub(g->b, cg_const_bits(g, it, 254u << 23), e, ""); /* 2^-e */
  return LLVMBuildBitCast(g->b, e, ft, "");
}

static LLVMValueRef from_storage(cg *g, LLVMValueRef v, int dt) {
  int lanes = cg_lanes(v);
  if (dt == MLC_DT_BF16) {
    LLVMValueRef w = LLVMBuildZExt(g->b, v, cg_vec(g->t_i32, lanes), "");
    w = LLVMBuildShl(g->b, w, cg_const_bits(g, cg_vec(g->t_i32, lanes), 16), "");
    return LLVMBuildBitCast(g->b, w, cg_vec(g->t_f32, lanes), "");
  }
  if (dt == MLC_DT_F16) return g->f16c ? LLVMBuildFPExt(g->b, v, cg_vec(g->t_f32, lanes), "") : f16_to_f32_int(g, v);
  if (mlc_dtype_is_f8(dt)) return f8_to_f32(g, v, dt);
  return v;
}

static LLVMValueRef to_storage(cg *g, LLVMValueRef v, int dt) {
  int lanes = cg_lanes(v);
  if (dt == MLC_DT_BF16) {
    /* Round to nearest even on the upper 16 bits; a NaN stays a quiet NaN. */
    LLVMTypeRef it = cg_vec(g->t_i32, lanes);
    LLVMValueRef u = LLVMBuildBitCast(g->b, v, it, "");
    LLVMValueRef odd = LLVMBuildAnd(g->b, LLVMBuildLShr(g->b, u, cg_const_bits(g, it, 16), ""), cg_const_bits(g, it, 1), "");
    LLVMValueRef r = LLVMBuildAdd(g->b, LLVMBuildAdd(g->b, u, cg_const_bits(g, it, 0x7fff), ""), odd, "");
    r = LLVMBuildLShr(g->b, r, cg_const_bits(g, it, 16), "");
    LLVMValueRef qnan = LLVMBuildOr(g->b, LLVMBuildLShr(g->b, u, cg_const_bits(g, it, 16), ""), cg_const_bits(g, it, 0x40), "");
    LLVMValueRef isnan = LLVMBuildFCmp(g->b, LLVMRealUNO, v, v, "");
    r = LLVMBuildSelect(g->b, isnan, qnan, r, "");
    return LLVMBuildTrunc(g->b, r, cg_vec(g->t_i16, lanes), "");
  }
  if (dt == MLC_DT_F16) {
    if (g->f16c) return LLVMBuildFPTrunc(g->b, v, cg_vec(g->t_f16, lanes), "");
    return LLVMBuildBitCast(g->b, f32_to_f16_int(g, v), cg_vec(g->t_f16, lanes), "");
  }
  if (mlc_dtype_is_f8(dt)) return f32_to_f8(g, v, dt);
  return v;
}

LLVMValueRef cg_load_raw(cg *g, cg_buf b, LLVMValueRef idx, int lanes, LLVMValueRef mask) {
  LLVMTypeRef st = cg_stype(g, b.dt);
  unsigned align = (unsigned)mlc_dtype_size(b.dt);
  LLVMValueRef p = cg_elem_ptr(g, b, idx);
  if (lanes == 1) {
    LLVMValueRef v = LLVMBuildLoad2(g->b, st, p, "");
    LLVMSetAlignment(v, align);
    return v;
  }
  LLVMTypeRef vt = LLVMVectorType(st, (unsigned)lanes);
  LLVMValueRef vp = LLVMBuildBitCast(g->b, p, LLVMPointerType(vt, 0), "");
  if (mask) {
    LLVMTypeRef ov[2] = {vt, LLVMPointerType(vt, 0)};
    LLVMValueRef args[4] = {vp, cg_i32(g, (int32_t)align), mask, LLVMConstNull(vt)};
    return cg_intrin(g, "llvm.masked.load", ov, 2, args, 4);
  }
  LLVMValueRef v = LLVMBuildLoad2(g->b, vt, vp, "");
  LLVMSetAlignment(v, align);
  return v;
}

void cg_store_raw(cg *g, cg_buf b, LLVMValueRef idx, LLVMValueRef v, LLVMValueRef mask) {
  unsigned align = (unsigned)mlc_dtype_size(b.dt);
  LLVMValueRef p = cg_elem_ptr(g, b, idx);
  int lanes = cg_lanes(v);
  if (lanes == 1) {
    LLVMSetAlignment(LLVMBuildStore(g->b, v, p), align);
    return;
  }
  LLVMTypeRef vt = LLVMTypeOf(v);
  LLVMValueRef vp = LLVMBuildBitCast(g->b, p, LLVMPointerType(vt, 0), "");
  if (mask) {
    LLVMTypeRef ov[2] = {vt, LLVMPointerType(vt, 0)};
    LLVMValueRef args[4] = {v, vp, cg_i32(g, (int32_t)align), mask};
    cg_intrin(g, "llvm.masked.store", ov, 2, args, 4);
    return;
  }
  LLVMSetAlignment(LLVMBuildStore(g->b, v, vp), align);
}

LLVMValueRef cg_load(cg *g, cg_buf b, LLVMValueRef idx, int lanes, LLVMValueRef mask) {
  return from_storage(g, cg_load_raw(g, b, idx, lanes, mask), b.dt);
}

void cg_store(cg *g, cg_buf b, LLVMValueRef idx, LLVMValueRef v, LLVMValueRef mask) {
  cg_store_raw(g, b, idx, to_storage(g, v, b.dt), mask);
}

cg_buf cg_alloca(cg *g, int dt, int64_t n) {
  LLVMBuilderRef tb = LLVMCreateBuilderInContext(g->ctx);
  LLVMValueRef first = LLVMGetFirstInstruction(g->entry);
  if (first) LLVMPositionBuilderBefore(tb, first);
  else LLVMPositionBuilderAtEnd(tb, g->entry);
  LLVMValueRef a = LLVMBuildAlloca(tb, LLVMArrayType(cg_stype(g, dt), (unsigned)(n > 0 ? n : 1)), "scratch");
  LLVMSetAlignment(a, 64);
  LLVMValueRef p = LLVMBuildBitCast(tb, a, g->t_ptr, "");
  LLVMDisposeBuilder(tb);
  return (cg_buf){p, (uint8_t)dt};
}

void cg_memcpy(cg *g, cg_buf dst, LLVMValueRef di, cg_buf src, LLVMValueRef si, LLVMValueRef nelem) {
  int64_t es = mlc_dtype_size(dst.dt);
  LLVMValueRef d = LLVMBuildGEP2(g->b, g->t_i8, dst.p, (LLVMValueRef[]){LLVMBuildMul(g->b, di, cg_i64(g, es), "")}, 1, "");
  LLVMValueRef s = LLVMBuildGEP2(g->b, g->t_i8, src.p, (LLVMValueRef[]){LLVMBuildMul(g->b, si, cg_i64(g, es), "")}, 1, "");
  LLVMBuildMemCpy(g->b, d, (unsigned)es, s, (unsigned)es, LLVMBuildMul(g->b, nelem, cg_i64(g, es), ""));
}

void cg_memset0(cg *g, cg_buf dst, LLVMValueRef di, LLVMValueRef nelem) {
  int64_t es = mlc_dtype_size(dst.dt);
  LLVMValueRef d = LLVMBuildGEP2(g->b, g->t_i8, dst.p, (LLVMValueRef[]){LLVMBuildMul(g->b, di, cg_i64(g, es), "")}, 1, "");
  LLVMBuildMemSet(g->b, d, LLVMConstInt(g->t_i8, 0, 0), LLVMBuildMul(g->b, nelem, cg_i64(g, es), ""), (unsigned)es);
}

/* ---- control flow ---- */

LLVMValueRef cg_for(cg *g, cg_loop *L, LLVMValueRef start, LLVMValueRef end, int64_t step) {
  memset(L, 0, sizeof *L);
  L->pre = LLVMGetInsertBlock(g->b);
  L->head = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "loop");
  L->body = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "body");
  L->exit = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "done");
  L->step = step;
  L->end = end;
  LLVMBuildBr(g->b, L->head);
  LLVMPositionBuilderAtEnd(g->b, L->head);
  L->iv = LLVMBuildPhi(g->b, g->t_i64, "i");
  LLVMAddIncoming(L->iv, &start, &L->pre, 1);
  LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, L->iv, end, ""), L->body, L->exit);
  LLVMPositionBuilderAtEnd(g->b, L->body);
  return L->iv;
}

LLVMValueRef cg_carry(cg *g, cg_loop *L, LLVMValueRef init) {
  MLC_ASSERT(L->ncarry < CG_MAX_CARRY);
  LLVMBuilderRef tb = LLVMCreateBuilderInContext(g->ctx);
  LLVMValueRef at = LLVMGetFirstInstruction(L->head);
  while (LLVMGetInstructionOpcode(at) == LLVMPHI) at = LLVMGetNextInstruction(at);
  LLVMPositionBuilderBefore(tb, at);
  LLVMValueRef phi = LLVMBuildPhi(tb, LLVMTypeOf(init), "acc");
  LLVMDisposeBuilder(tb);
  LLVMAddIncoming(phi, &init, &L->pre, 1);
  L->phi[L->ncarry++] = phi;
  return phi;
}

void cg_end_for(cg *g, cg_loop *L, const LLVMValueRef *next) {
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(g->b);
  LLVMValueRef ivn = LLVMBuildNSWAdd(g->b, L->iv, cg_i64(g, L->step), "");
  LLVMBuildBr(g->b, L->head);
  LLVMAddIncoming(L->iv, &ivn, &latch, 1);
  for (int k = 0; k < L->ncarry; k++) LLVMAddIncoming(L->phi[k], (LLVMValueRef *)&next[k], &latch, 1);
  LLVMPositionBuilderAtEnd(g->b, L->exit);
}

void cg_if(cg *g, cg_if_t *c, LLVMValueRef cond) {
  c->then_bb = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "then");
  c->else_bb = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "else");
  c->join = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "endif");
  c->has_else = false;
  LLVMBuildCondBr(g->b, cond, c->then_bb, c->else_bb);
  LLVMPositionBuilderAtEnd(g->b, c->then_bb);
}

void cg_else(cg *g, cg_if_t *c) {
  LLVMBuildBr(g->b, c->join);
  LLVMPositionBuilderAtEnd(g->b, c->else_bb);
  c->has_else = true;
}

void cg_endif(cg *g, cg_if_t *c) {
  LLVMBuildBr(g->b, c->join);
  if (!c->has_else) {
    LLVMPositionBuilderAtEnd(g->b, c->else_bb);
    LLVMBuildBr(g->b, c->join);
  }
  LLVMPositionBuilderAtEnd(g->b, c->join);
}

LLVMValueRef cg_items_begin(cg *g, cg_loop *L) { return cg_for(g, L, g->begin, g->end, 1); }

/* ---- shapes ---- */

void cg_unflatten(cg *g, LLVMValueRef item, int rank, const int64_t *dims, int nstride,
                  const int64_t (*stride)[MLC_MAX_RANK], LLVMValueRef *off) {
  for (int s = 0; s < nstride; s++) off[s] = cg_i64(g, 0);
  LLVMValueRef rem = item;
  for (int k = rank; k-- > 0;) {
    LLVMValueRef idx = rem;
    if (k > 0) {
      idx = LLVMBuildURem(g->b, rem, cg_i64(g, dims[k]), "");
      rem = LLVMBuildUDiv(g->b, rem, cg_i64(g, dims[k]), "");
    }
    for (int s = 0; s < nstride; s++)
      if (stride[s][k]) off[s] = LLVMBuildAdd(g->b, off[s], LLVMBuildMul(g->b, idx, cg_i64(g, stride[s][k]), ""), "");
  }
}

/* ---- rows ---- */

void cg_row_map(cg *g, int64_t len, cg_row_fn fn, void *ctx) {
  int64_t full = len / g->vw * g->vw;
  if (full == g->vw) {
    fn(g, ctx, cg_i64(g, 0), NULL);
  } else if (full > 0) {
    cg_loop L;
    LLVMValueRef j = cg_for(g, &L, cg_i64(g, 0), cg_i64(g, full), g->vw);
    fn(g, ctx, j, NULL);
    cg_end_for(g, &L, NULL);
  }
  if (len > full) fn(g, ctx, cg_i64(g, full), cg_mask(g, g->vw, (int)(len - full)));
}

static LLVMValueRef red_op(cg *g, int dt, int op, LLVMValueRef a, LLVMValueRef b) {
  return op == CG_RED_ADD ? cg_add(g, dt, a, b) : op == CG_RED_MIN ? cg_min(g, dt, a, b) : cg_max(g, dt, a, b);
}

static LLVMValueRef red_neutral(cg *g, int dt, int op, int lanes) {
  return op == CG_RED_ADD ? LLVMConstNull(cg_ctype(g, dt, lanes)) : op == CG_RED_MIN ? cg_highest(g, dt, lanes) : cg_lowest(g, dt, lanes);
}

LLVMValueRef cg_row_reduce(cg *g, int64_t len, int dt, int op, cg_row_val_fn fn, void *ctx) {
  enum { NACC = 4 };
  int vw = g->vw;
  LLVMValueRef acc[NACC];
  for (int k = 0; k < NACC; k++) acc[k] = red_neutral(g, dt, op, vw);
  int64_t big = len / (NACC * vw) * (NACC * vw), pos = 0;
  if (big > 0) {
    cg_loop L;
    LLVMValueRef j = cg_for(g, &L, cg_i64(g, 0), cg_i64(g, big), NACC * vw);
    LLVMValueRef cur[NACC], next[NACC];
    for (int k = 0; k < NACC; k++) cur[k] = cg_carry(g, &L, acc[k]);
    for (int k = 0; k < NACC; k++)
      next[k] = red_op(g, dt, op, cur[k], fn(g, ctx, LLVMBuildAdd(g->b, j, cg_i64(g, k * vw), ""), NULL));
    cg_end_for(g, &L, next);
    for (int k = 0; k < NACC; k++) acc[k] = L.phi[k];
    pos = big;
  }
  for (int k = 0; pos + vw <= len; k++, pos += vw) acc[k] = red_op(g, dt, op, acc[k], fn(g, ctx, cg_i64(g, pos), NULL));
  if (pos < len) {
    LLVMValueRef m = cg_mask(g, vw, (int)(len - pos));
    LLVMValueRef v = LLVMBuildSelect(g->b, m, fn(g, ctx, cg_i64(g, pos), m), red_neutral(g, dt, op, vw), "");
    acc[NACC - 1] = red_op(g, dt, op, acc[NACC - 1], v);
  }
  LLVMValueRef v = red_op(g, dt, op, red_op(g, dt, op, acc[0], acc[1]), red_op(g, dt, op, acc[2], acc[3]));
  return op == CG_RED_ADD ? cg_hsum(g, dt, v) : op == CG_RED_MIN ? cg_hmin(g, dt, v) : cg_hmax(g, dt, v);
}
