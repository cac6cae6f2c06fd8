/* Structural checks of a KHR cooperative-matrix module (khr.h).
 *
 * SPIRV-Tools 2023.1 knows none of the KHR opcodes, so it can neither
 * validate nor parse these modules.  What is checked here is what the
 * NV -> KHR translation could get wrong; the rest of the module is the NV
 * module spvValidate accepted, word for word but for retyped ids.  Operand
 * kinds are known only for the instructions listed below; for those every
 * id operand must be defined earlier in the module (SPIR-V's block order
 * puts definitions before their non-OpPhi uses), OpPhi's only somewhere.
 */
#define SPV_ENABLE_UTILITY_CODE /* SpvHasResultAndType (defined once, in khr.c) */
#include <spirv/unified1/spirv.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/spirv/khr.h"

typedef struct {
  const uint32_t *w;
  size_t n;
  uint32_t bound;
  size_t *def;      /* [bound] offset of each id's definition (0: none) */
  uint32_t *vtype;  /* [bound] result type of each id */
  bool bf16;        /* SPV_KHR_bfloat16's capabilities and extension are declared */
  char *err;
  size_t errn;
} ck;

static bool bad(ck *c, size_t at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool bad(ck *c, size_t at, const char *fmt, ...) {
  int k = snprintf(c->err, c->errn, "word %zu: ", at);
  va_list ap;
  va_start(ap, fmt);
  if (k >= 0 && (size_t)k < c->errn) vsnprintf(c->err + k, c->errn - (size_t)k, fmt, ap);
  va_end(ap);
  return false;
}

static uint32_t vt(const ck *c, uint32_t id) { return id < c->bound ? c->vtype[id] : 0; }

/* Whether op has a result id and a result type: spirv.h's table, which
 * predates the KHR opcodes, and those. */
static void res_type(uint32_t op, bool *has_res, bool *has_type) {
  SpvHasResultAndType((SpvOp)op, has_res, has_type);
  if (op >= MLC_SPV_OP_TYPE_COOPMAT_KHR && op <= MLC_SPV_OP_COOPMAT_LENGTH_KHR) {
    *has_res = op != MLC_SPV_OP_COOPMAT_STORE_KHR;
    *has_type = *has_res && op != MLC_SPV_OP_TYPE_COOPMAT_KHR;
  }
}

static uint32_t opcode(const ck *c, uint32_t id) { return c->def[id] ? c->w[c->def[id]] & 0xffff : 0; }

/* id is defined at an offset before `at` (a use there). */
static bool before(ck *c, size_t at, uint32_t id) {
  if (id >= c->bound || !c->def[id]) return bad(c, at, "%%%u is used and never defined", id);
  if (c->def[id] >= at) return bad(c, at, "%%%u is used before its definition (word %zu)", id, c->def[id]);
  return true;
}

/* The value of a 32-bit OpConstant, or -1. */
static int64_t const32(const ck *c, uint32_t id) {
  if (id >= c->bound || opcode(c, id) != SpvOpConstant) return -1;
  const uint32_t *in = c->w + c->def[id];
  if (in[0] >> 16 != 4) return -1;
  const uint32_t *t = c->w + c->def[in[1]];
  if ((t[0] & 0xffff) != SpvOpTypeInt || t[2] != 32) return -1;
  return in[3];
}

/* The KHR matrix type id, or NULL when it is none. */
static const uint32_t *khr_type(const ck *c, uint32_t id) {
  return id < c->bound && opcode(c, id) == MLC_SPV_OP_TYPE_COOPMAT_KHR ? c->w + c->def[id] : NULL;
}

/* Instructions whose every operand after the result is an id. */
static bool all_ids(uint32_t op) {
  switch (op) {
  case SpvOpFAdd: case SpvOpFSub: case SpvOpFMul: case SpvOpFDiv: case SpvOpFNegate: case SpvOpIAdd: case SpvOpISub:
  case SpvOpIMul: case SpvOpUDiv: case SpvOpSDiv: case SpvOpUMod: case SpvOpSRem: case SpvOpSMod: case SpvOpFRem:
  case SpvOpFMod: case SpvOpSNegate: case SpvOpMatrixTimesScalar: case SpvOpFConvert: case SpvOpSConvert:
  case SpvOpUConvert: case SpvOpConvertFToS: case SpvOpConvertFToU: case SpvOpConvertSToF: case SpvOpConvertUToF:
  case SpvOpBitcast: case SpvOpCopyObject: case SpvOpSelect: case SpvOpCompositeConstruct: case SpvOpAccessChain:
  case SpvOpInBoundsAccessChain: case SpvOpShiftLeftLogical: case SpvOpShiftRightLogical:
  case SpvOpShiftRightArithmetic: case SpvOpBitwiseAnd: case SpvOpBitwiseOr: case SpvOpBitwiseXor: case SpvOpNot:
  case SpvOpLogicalAnd: case SpvOpLogicalOr: case SpvOpLogicalNot: case SpvOpIEqual: case SpvOpINotEqual:
  case SpvOpULessThan: case SpvOpSLessThan: case SpvOpUGreaterThan: case SpvOpSGreaterThan: case SpvOpULessThanEqual:
  case SpvOpUGreaterThanEqual: case SpvOpFOrdLessThan: case SpvOpFOrdGreaterThan: case SpvOpFOrdEqual:
  case SpvOpFUnordNotEqual: case SpvOpControlBarrier: case SpvOpMemoryBarrier: case SpvOpAtomicAnd: case SpvOpAtomicOr:
  case SpvOpAtomicIAdd: case SpvOpAtomicUMin: case SpvOpAtomicUMax: case SpvOpAtomicExchange:
  case SpvOpConstantComposite: case SpvOpTypePointer: case SpvOpTypeStruct: case SpvOpTypeArray:
  case SpvOpTypeRuntimeArray: case SpvOpTypeFunction: case SpvOpReturnValue:
  case MLC_SPV_OP_TYPE_COOPMAT_KHR: case MLC_SPV_OP_COOPMAT_LOAD_KHR: case MLC_SPV_OP_COOPMAT_MULADD_KHR:
  case MLC_SPV_OP_COOPMAT_LENGTH_KHR:
    return true;
  default:
    return false;
  }
}

static bool check_ids(ck *c, size_t at, const uint32_t *in) {
  uint32_t op = in[0] & 0xffff, len = in[0] >> 16;
  bool has_res, has_type;
  res_type(op, &has_res, &has_type);
  if (has_type && !before(c, at, in[1])) return false;
  uint32_t k = (uint32_t)has_res + (uint32_t)has_type + 1;
  if (op == SpvOpTypePointer) k = 3; /* after the storage class */
  if (op == MLC_SPV_OP_COOPMAT_STORE_KHR) { /* pointer object layout [stride] [memory operand] */
    for (uint32_t j = 1; j <= 4 && j < len; j++)
      if (!before(c, at, in[j])) return false;
    return true;
  }
  if (op == MLC_SPV_OP_COOPMAT_LOAD_KHR) len = len < 6 ? len : 6; /* the memory operand's mask is a literal */
  if (op == SpvOpLoad || op == SpvOpStore) len = op == SpvOpLoad ? 4 : 3;
  if (op == SpvOpPhi) { /* values from any block, possibly later ones */
    for (uint32_t j = 3; j < len; j++)
      if (in[j] >= c->bound || !c->def[in[j]]) return bad(c, at, "OpPhi names %%%u, which is never defined", in[j]);
    return true;
  }
  if (op != SpvOpLoad && op != SpvOpStore && !all_ids(op)) return true;
  for (; k < len; k++)
    if (!before(c, at, in[k])) return false;
  return true;
}

/* The pointee of pointer type p, or 0. */
static uint32_t pointee(const ck *c, uint32_t p) {
  return p < c->bound && opcode(c, p) == SpvOpTypePointer ? c->w[c->def[p] + 3] : 0;
}

/* Where a matrix value flows into another, both have the same type. */
static bool same_type(ck *c, size_t at, uint32_t ta, uint32_t tb, const char *what) {
  if ((khr_type(c, ta) || khr_type(c, tb)) && ta != tb)
    return bad(c, at, "%s: types %%%u and %%%u differ", what, ta, tb);
  return true;
}

static bool check_coop(ck *c, size_t at, const uint32_t *in) {
  uint32_t op = in[0] & 0xffff, len = in[0] >> 16;
  switch (op) {
  case MLC_SPV_OP_TYPE_COOPMAT_KHR: {
    if (len != 7) return bad(c, at, "OpTypeCooperativeMatrixKHR has %u words", len);
    uint32_t ct = in[2] < c->bound ? opcode(c, in[2]) : 0;
    if (ct != SpvOpTypeFloat && ct != SpvOpTypeInt) return bad(c, at, "the component of %%%u is not a scalar type", in[1]);
    const uint32_t *f = c->w + c->def[in[2]];
    if (ct == SpvOpTypeFloat && f[0] >> 16 == 4 && (f[3] != MLC_SPV_FP_BFLOAT16 || !c->bf16))
      return bad(c, at, "the component of %%%u is a float of encoding %u without SPV_KHR_bfloat16's capabilities and extension",
                 in[1], f[3]);
    int64_t use = const32(c, in[6]);
    if (use < 0 || use > 2) return bad(c, at, "the use of %%%u is not a 32-bit constant 0..2", in[1]);
    return true;
  }
  case MLC_SPV_OP_COOPMAT_LOAD_KHR: case MLC_SPV_OP_COOPMAT_STORE_KHR: {
    bool ld = op == MLC_SPV_OP_COOPMAT_LOAD_KHR;
    uint32_t mat_t = ld ? in[1] : vt(c, in[2]), layout = in[ld ? 4 : 3];
    if (len < (ld ? 5u : 4u)) return bad(c, at, "a cooperative-matrix %s of %u words", ld ? "load" : "store", len);
    if (!khr_type(c, mat_t)) return bad(c, at, "a cooperative-matrix %s of a value that is no KHR matrix", ld ? "load" : "store");
    int64_t l = const32(c, layout);
    if (l != MLC_COOPMAT_ROW_MAJOR && l != MLC_COOPMAT_COLUMN_MAJOR)
      return bad(c, at, "layout %%%u is not a 32-bit constant 0 or 1", layout);
    if (!pointee(c, vt(c, in[ld ? 3 : 1]))) return bad(c, at, "the pointer operand is not a pointer");
    return true;
  }
  case MLC_SPV_OP_COOPMAT_MULADD_KHR: {
    const uint32_t *r = khr_type(c, in[1]), *a = khr_type(c, vt(c, in[3])), *b = khr_type(c, vt(c, in[4]));
    const uint32_t *acc = khr_type(c, vt(c, in[5]));
    if (len != 6) return bad(c, at, "OpCooperativeMatrixMulAddKHR with %u words (float matrices take no operands mask)", len);
    if (!r || !a || !b || !acc) return bad(c, at, "a MulAdd operand is no KHR matrix");
    if (const32(c, a[6]) != MLC_COOPMAT_USE_A) return bad(c, at, "MulAdd's A (%%%u) has not the use MatrixAKHR", in[3]);
    if (a[2] != b[2]) return bad(c, at, "MulAdd's A and B have different components (%%%u, %%%u)", a[2], b[2]);
    if (const32(c, b[6]) != MLC_COOPMAT_USE_B) return bad(c, at, "MulAdd's B (%%%u) has not the use MatrixBKHR", in[4]);
    if (const32(c, r[6]) != MLC_COOPMAT_USE_ACC || vt(c, in[5]) != in[1])
      return bad(c, at, "MulAdd's C and result must be the same accumulator type");
    int64_t m = const32(c, a[4]), k = const32(c, a[5]), kb = const32(c, b[4]), nn = const32(c, b[5]);
    if (m < 0 || k != kb || m != const32(c, r[4]) || nn != const32(c, r[5]))
      return bad(c, at, "MulAdd's shapes do not agree: A %lldx%lld, B %lldx%lld", (long long)m, (long long)k,
                 (long long)kb, (long long)nn);
    return true;
  }
  case MLC_SPV_OP_COOPMAT_LENGTH_KHR:
    return khr_type(c, in[3]) ? true : bad(c, at, "OpCooperativeMatrixLengthKHR of %%%u, no KHR matrix type", in[3]);
  case SpvOpStore:
    return same_type(c, at, pointee(c, vt(c, in[1])), vt(c, in[2]), "OpStore");
  case SpvOpLoad:
    return same_type(c, at, pointee(c, vt(c, in[3])), in[1], "OpLoad");
  case SpvOpVariable:
    return len < 5 || same_type(c, at, pointee(c, in[1]), vt(c, in[4]), "OpVariable's initializer");
  case SpvOpCopyObject: case SpvOpFNegate:
    return same_type(c, at, in[1], vt(c, in[3]), "a copy");
  case SpvOpSelect:
    return same_type(c, at, in[1], vt(c, in[4]), "OpSelect") && same_type(c, at, in[1], vt(c, in[5]), "OpSelect");
  case SpvOpFAdd: case SpvOpFSub: case SpvOpFMul: case SpvOpFDiv:
    return same_type(c, at, in[1], vt(c, in[3]), "arithmetic") && same_type(c, at, in[1], vt(c, in[4]), "arithmetic");
  case SpvOpPhi:
    for (uint32_t j = 3; j < len; j += 2)
      if (!same_type(c, at, in[1], vt(c, in[j]), "OpPhi")) return false;
    return true;
  default:
    return true;
  }
}

static bool check(ck *c) {
  const uint32_t *w = c->w;
  bool any_khr = false, cap = false, ext = false, bf_type = false, bf_coop = false, bf_ext = false;
  /* definitions first: OpPhi may name later ones */
  for (size_t i = 5; i < c->n;) {
    uint32_t op = w[i] & 0xffff, len = w[i] >> 16;
    if (!len || i + len > c->n) return bad(c, i, "instruction of %u words past the end (%zu)", len, c->n);
    bool has_res, has_type;
    res_type(op, &has_res, &has_type);
    if (op >= MLC_SPV_OP_TYPE_COOPMAT_KHR && op <= MLC_SPV_OP_COOPMAT_LENGTH_KHR) any_khr = true;
    if (op >= SpvOpTypeCooperativeMatrixNV && op <= SpvOpCooperativeMatrixLengthNV)
      return bad(c, i, "NV cooperative-matrix opcode %u", op);
    if (op == SpvOpCapability && w[i + 1] == SpvCapabilityCooperativeMatrixNV) return bad(c, i, "capability CooperativeMatrixNV");
    if (op == SpvOpCapability && w[i + 1] == MLC_SPV_CAP_COOPMAT_KHR) cap = true;
    if (op == SpvOpCapability && w[i + 1] == MLC_SPV_CAP_BFLOAT16_TYPE) bf_type = true;
    if (op == SpvOpCapability && w[i + 1] == MLC_SPV_CAP_BFLOAT16_COOPMAT) bf_coop = true;
    if (op == SpvOpExtension) {
      const char *name = (const char *)(w + i + 1);
      size_t max = (len - 1) * 4;
      if (!strncmp(name, "SPV_NV_cooperative_matrix", max)) return bad(c, i, "extension SPV_NV_cooperative_matrix");
      if (!strncmp(name, "SPV_KHR_cooperative_matrix", max)) ext = true;
      if (!strncmp(name, "SPV_KHR_bfloat16", max)) bf_ext = true;
    }
    if (has_res) {
      uint32_t id = w[i + (has_type ? 2 : 1)];
      if (!id || id >= c->bound) return bad(c, i, "result id %u outside the bound %u", id, c->bound);
      if (c->def[id]) return bad(c, i, "%%%u is defined twice (also at word %zu)", id, c->def[id]);
      c->def[id] = i;
      c->vtype[id] = has_type ? w[i + 1] : 0;
    }
    i += len;
  }
  if (any_khr && (!cap || !ext)) return bad(c, 0, "KHR cooperative matrices without the capability and the extension");
  c->bf16 = bf_type && bf_coop && bf_ext;
  for (size_t i = 5; i < c->n; i += w[i] >> 16)
    if (!check_ids(c, i, w + i) || !check_coop(c, i, w + i)) return false;
  return true;
}

bool mlc_spirv_khr_check(const uint32_t *words, size_t n, char *err, size_t errn) {
  ck c = {.w = words, .n = n, .err = err, .errn = errn};
  if (n < 5 || words[0] != SpvMagicNumber) return bad(&c, 0, "not a SPIR-V module");
  c.bound = words[3];
  c.def = calloc(c.bound, sizeof *c.def);
  c.vtype = calloc(c.bound, sizeof *c.vtype);
  bool ok = c.def && c.vtype ? check(&c) : bad(&c, 0, "out of memory");
  free(c.def), free(c.vtype);
  return ok;
}
