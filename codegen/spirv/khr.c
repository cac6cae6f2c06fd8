/* The NV -> KHR cooperative-matrix translation (khr.h), in three passes over
 * the words:
 *   1. index: each id's result type, the NV matrix types, pointers to them,
 *      constants (the bool ones that are NV's column-major operands, the
 *      32-bit ones KHR's use and layout operands may reuse);
 *   2. infer: union-find over the ids of matrix values and pointers, linked
 *      by the instructions that carry one value into another (loads, stores,
 *      OpPhi, OpSelect, copies, conversions, arithmetic), with MulAdd's
 *      operands fixing a role: A, B, accumulator (C and the result).  A
 *      constant or undef of matrix type links nothing: it takes the role of
 *      each place it is used, and is copied once per role;
 *   3. rewrite: every NV type and pointer type becomes one KHR type per role
 *      its values have (the first role keeps the id), every instruction's
 *      result type follows its value's role, and the NV instructions become
 *      the KHR ones.
 * Instructions that touch a matrix value and are not known here are errors:
 * a module is translated whole or not at all.
 */
#define SPV_ENABLE_UTILITY_CODE /* SpvHasResultAndType */
#include "codegen/spirv/khr.h"

#include <spirv/unified1/spirv.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* spirv.h defines SpvHasResultAndType as a C99 inline function; this is its
 * one external definition (khr_check.c calls it too). */
extern inline void SpvHasResultAndType(SpvOp opcode, bool *hasResult, bool *hasResultType);

enum { K_NONE, K_MAT, K_PTR, K_POLY }; /* an NV type, a pointer to one, a constant/undef of one */
enum { NROLES = 3, MAXPOS = 64 };

typedef struct {
  const uint32_t *w;
  size_t n;
  uint32_t bound, nbound;
  uint32_t *vtype;  /* [bound] the result type of each id (0: none) */
  uint8_t *kind;    /* [bound] K_* */
  uint32_t *ptee;   /* [bound] K_PTR: the NV type pointed to */
  uint8_t *boolv;   /* [bound] 1: OpConstantFalse, 2: OpConstantTrue */
  uint8_t *isint;   /* [bound] OpTypeInt */
  uint32_t *parent; /* [bound] union-find over matrix values and pointers */
  uint8_t *roles;   /* [bound] per class root: the roles (bit r) its uses ask for */
  uint8_t *used;    /* [bound] K_MAT/K_PTR/K_POLY: the roles that need a variant */
  uint32_t (*var)[NROLES]; /* [bound] the id of each role's variant */
  size_t first_mat;        /* offset of the first NV type */
  uint32_t int_t;          /* the 32-bit integer type of the first NV type's rows */
  uint32_t cval[NROLES];   /* ids of int_t constants 0, 1, 2 (existing or new) */
  bool need_val[NROLES];
  bool bf16;               /* A and B hold bf16 bits (mlc_spirv_nv_to_khr_bf16) */
  uint32_t f16_t, bf16_t;  /* the module's OpTypeFloat 16, and the new bf16 type */
  char *err;
  size_t errn;
} xl;

static bool fail(xl *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool fail(xl *x, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(x->err, x->errn, fmt, ap);
  va_end(ap);
  return false;
}

static const char *role_name(int r) { return r == 0 ? "A" : r == 1 ? "B" : "accumulator"; }

static uint32_t find(xl *x, uint32_t id) {
  while (x->parent[id] != id) id = x->parent[id] = x->parent[x->parent[id]];
  return id;
}

static void unite(xl *x, uint32_t a, uint32_t b) {
  a = find(x, a), b = find(x, b);
  if (a == b) return;
  x->parent[b] = a;
  x->roles[a] |= x->roles[b];
}

/* A value or pointer whose type is an NV matrix (or pointer to one). */
static bool is_mat(const xl *x, uint32_t id) {
  return id < x->bound && x->vtype[id] && x->kind[id] != K_POLY &&
         (x->kind[x->vtype[id]] == K_MAT || x->kind[x->vtype[id]] == K_PTR);
}
static bool is_poly(const xl *x, uint32_t id) { return id < x->bound && x->kind[id] == K_POLY; }

/* ---------------------------------------------------------------- pass 1 */

static bool index_module(xl *x) {
  const uint32_t *w = x->w;
  for (size_t i = 5; i < x->n;) {
    uint32_t op = w[i] & 0xffff, len = w[i] >> 16;
    if (!len || i + len > x->n) return fail(x, "malformed instruction at word %zu", i);
    bool has_res, has_type;
    SpvHasResultAndType((SpvOp)op, &has_res, &has_type);
    if (has_res) {
      uint32_t res = w[i + (has_type ? 2 : 1)], ty = has_type ? w[i + 1] : 0;
      if (res >= x->bound || ty >= x->bound) return fail(x, "id past the bound at word %zu", i);
      x->vtype[res] = ty;
    }
    switch (op) {
    case SpvOpTypeCooperativeMatrixNV:
      if (len != 6) return fail(x, "OpTypeCooperativeMatrixNV at word %zu: %u words", i, len);
      x->kind[w[i + 1]] = K_MAT;
      /* integer matrices would need MulAdd's signedness operands, which mlc has no use for */
      if (w[i + 2] < x->bound && x->isint[w[i + 2]]) return fail(x, "%%%u has integer components: not handled", w[i + 1]);
      if (!x->first_mat) {
        x->first_mat = i;
        x->int_t = w[i + 4] < x->bound ? x->vtype[w[i + 4]] : 0; /* rows: a 32-bit integer constant */
        if (!x->int_t) return fail(x, "the rows of %%%u are not a constant", w[i + 1]);
      }
      break;
    case SpvOpTypePointer:
      if (w[i + 3] < x->bound && x->kind[w[i + 3]] == K_MAT) x->kind[w[i + 1]] = K_PTR, x->ptee[w[i + 1]] = w[i + 3];
      break;
    case SpvOpTypeArray: case SpvOpTypeRuntimeArray: case SpvOpTypeStruct: case SpvOpTypeFunction:
      for (uint32_t k = 2; k < len; k++)
        if (w[i + k] < x->bound && x->kind[w[i + k]] != K_NONE)
          return fail(x, "%%%u holds a cooperative matrix type (opcode %u): not handled", w[i + 1], op);
      break;
    case SpvOpTypeInt:
      x->isint[w[i + 1]] = 1;
      break;
    case SpvOpCooperativeMatrixLoadNV: case SpvOpCooperativeMatrixStoreNV: { /* the layout constants KHR needs */
      uint32_t at = op == SpvOpCooperativeMatrixLoadNV ? 5 : 4;
      if (len > at && w[i + at] < x->bound && x->boolv[w[i + at]])
        x->need_val[x->boolv[w[i + at]] == 2 ? MLC_COOPMAT_COLUMN_MAJOR : MLC_COOPMAT_ROW_MAJOR] = true;
      break;
    }
    case SpvOpConstantTrue: case SpvOpConstantFalse:
      x->boolv[w[i + 2]] = op == SpvOpConstantTrue ? 2 : 1;
      break;
    case SpvOpConstantComposite: case SpvOpConstantNull: case SpvOpUndef: case SpvOpSpecConstantComposite:
      if (x->kind[w[i + 1]] == K_MAT) x->kind[w[i + 2]] = K_POLY;
      break;
    default: break;
    }
    i += len;
  }
  return true;
}

/* ---------------------------------------------------------------- links */

/* The operands of one instruction that must share a role: up to three
 * groups of word positions (within the instruction), each with the role
 * MulAdd gives it or -1. */
typedef struct {
  uint16_t pos[MAXPOS];
  int n, role;
} group;

static int add_group(group *g, int ng, int role) {
  g[ng].n = 0, g[ng].role = role;
  return ng;
}

/* Fills g with the instruction's groups; returns their number, or -1 when
 * the instruction touches a matrix in a way not handled here (err set). */
static int links(xl *x, const uint32_t *in, group *g) {
  uint32_t op = in[0] & 0xffff, len = in[0] >> 16;
  bool res_mat = len > 2 && is_mat(x, in[2]);
  int ng = 0;
  switch (op) {
  case SpvOpCooperativeMatrixMulAddNV:
    g[add_group(g, 0, MLC_COOPMAT_USE_A)].pos[g[0].n++] = 3;
    g[add_group(g, 1, MLC_COOPMAT_USE_B)].pos[g[1].n++] = 4;
    add_group(g, 2, MLC_COOPMAT_USE_ACC);
    g[2].pos[g[2].n++] = 2, g[2].pos[g[2].n++] = 5;
    return 3;
  case SpvOpCooperativeMatrixLoadNV: /* the result alone: its role comes from its uses */
    g[add_group(g, 0, -1)].pos[g[0].n++] = 2;
    return 1;
  case SpvOpCooperativeMatrixStoreNV:
    g[add_group(g, 0, -1)].pos[g[0].n++] = 2;
    return 1;
  case SpvOpStore:
    if (!is_mat(x, in[1]) && !is_mat(x, in[2]) && !is_poly(x, in[2])) return 0;
    add_group(g, 0, -1);
    g[0].pos[g[0].n++] = 1, g[0].pos[g[0].n++] = 2;
    return 1;
  case SpvOpVariable:
    if (!res_mat) return 0;
    add_group(g, 0, -1);
    g[0].pos[g[0].n++] = 2;
    if (len > 4) g[0].pos[g[0].n++] = 4;
    return 1;
  case SpvOpPhi:
    if (!res_mat) return 0;
    if ((len - 3) / 2 + 1 > MAXPOS) return fail(x, "OpPhi %%%u: too many incoming values", in[2]), -1;
    add_group(g, 0, -1);
    g[0].pos[g[0].n++] = 2;
    for (uint32_t k = 3; k < len; k += 2) g[0].pos[g[0].n++] = (uint16_t)k;
    return 1;
  case SpvOpSelect:
    if (!res_mat) return 0;
    add_group(g, 0, -1);
    g[0].pos[g[0].n++] = 2, g[0].pos[g[0].n++] = 4, g[0].pos[g[0].n++] = 5;
    return 1;
  case SpvOpLoad: case SpvOpCopyObject: case SpvOpFNegate: case SpvOpSNegate: case SpvOpMatrixTimesScalar:
  case SpvOpFConvert: case SpvOpSConvert: case SpvOpUConvert: case SpvOpConvertFToS: case SpvOpConvertFToU:
  case SpvOpConvertSToF: case SpvOpConvertUToF: case SpvOpBitcast:
    if (!res_mat) return 0;
    add_group(g, 0, -1);
    g[0].pos[g[0].n++] = 2, g[0].pos[g[0].n++] = 3;
    return 1;
  case SpvOpFAdd: case SpvOpFSub: case SpvOpFMul: case SpvOpFDiv: case SpvOpIAdd: case SpvOpISub: case SpvOpIMul:
  case SpvOpSDiv: case SpvOpUDiv:
    if (!res_mat) return 0;
    add_group(g, 0, -1);
    g[0].pos[g[0].n++] = 2, g[0].pos[g[0].n++] = 3, g[0].pos[g[0].n++] = 4;
    return 1;
  case SpvOpCompositeConstruct: /* a fill: the scalar operand is no matrix */
    if (!res_mat) return 0;
    g[add_group(g, 0, -1)].pos[g[0].n++] = 2;
    return 1;
  case SpvOpCompositeInsert:
    if (!res_mat) return 0;
    add_group(g, 0, -1);
    g[0].pos[g[0].n++] = 2, g[0].pos[g[0].n++] = 4;
    return 1;
  case SpvOpCompositeExtract: /* an element: the matrix keeps the role it has elsewhere */
    if (is_poly(x, in[3])) return fail(x, "an element of constant %%%u: its use cannot be inferred", in[3]), -1;
    return 0;
  case SpvOpAccessChain: case SpvOpInBoundsAccessChain: /* an element's pointer: likewise */
  case SpvOpName: case SpvOpDecorate: case SpvOpMemberName: case SpvOpCooperativeMatrixLengthNV:
  case SpvOpTypeCooperativeMatrixNV: case SpvOpTypePointer: /* rewritten per role */
  case SpvOpConstantComposite: case SpvOpConstantNull: case SpvOpUndef: case SpvOpSpecConstantComposite:
    return 0;
  default:
    break;
  }
  /* anything else must not see a matrix (literals equal to such an id are
   * refused too: an error, not a wrong module) */
  uint32_t k = 1;
  if (op == SpvOpFunction || op == SpvOpLabel || op == SpvOpBranch || op == SpvOpBranchConditional ||
      op == SpvOpSwitch || op == SpvOpLoopMerge || op == SpvOpSelectionMerge || op == SpvOpEntryPoint ||
      op == SpvOpExecutionMode || op == SpvOpReturn || op == SpvOpFunctionEnd || op == SpvOpLine ||
      op == SpvOpSource || op == SpvOpString || op == SpvOpExtension || op == SpvOpCapability ||
      op == SpvOpExtInstImport || op == SpvOpMemoryModel || op == SpvOpMemberDecorate || op == SpvOpTypeInt ||
      op == SpvOpTypeFloat || op == SpvOpConstant || op == SpvOpSpecConstant || op == SpvOpTypeVector)
    return ng;
  if (op == SpvOpExtInst) k = 5; /* the set's instruction number is a literal */
  for (; k < len; k++)
    if (is_mat(x, in[k]) || (in[k] < x->bound && x->kind[in[k]] != K_NONE))
      return fail(x, "opcode %u touches cooperative matrix %%%u: not handled", op, in[k]), -1;
  return ng;
}

/* ---------------------------------------------------------------- pass 2 */

/* The role of a group: the one MulAdd fixes, else its values' class. */
static int group_role(xl *x, const uint32_t *in, const group *g) {
  if (g->role >= 0) return g->role;
  for (int j = 0; j < g->n; j++)
    if (!is_poly(x, in[g->pos[j]])) {
      uint8_t r = x->roles[find(x, in[g->pos[j]])];
      return r ? __builtin_ctz(r) : -1;
    }
  return -1;
}

static bool infer(xl *x) {
  group g[3];
  for (uint32_t id = 0; id < x->bound; id++) x->parent[id] = id;
  for (size_t i = 5; i < x->n; i += x->w[i] >> 16) {
    const uint32_t *in = x->w + i;
    int ng = links(x, in, g);
    if (ng < 0) return false;
    for (int k = 0; k < ng; k++) {
      uint32_t root = 0;
      for (int j = 0; j < g[k].n; j++) {
        uint32_t id = in[g[k].pos[j]];
        if (is_poly(x, id)) continue;
        if (!is_mat(x, id)) return fail(x, "opcode %u at word %zu: %%%u is no cooperative matrix", in[0] & 0xffff, i, id);
        if (!root) root = id;
        else unite(x, root, id);
      }
      if (root && g[k].role >= 0) x->roles[find(x, root)] |= (uint8_t)(1u << g[k].role);
    }
  }
  /* every matrix value and pointer has exactly one role */
  for (uint32_t id = 1; id < x->bound; id++) {
    if (!is_mat(x, id)) continue;
    uint8_t r = x->roles[find(x, id)];
    if (!r) return fail(x, "the use (A, B or accumulator) of %%%u cannot be inferred: it never reaches a MulAdd", id);
    if (r & (r - 1)) {
      int a = __builtin_ctz(r), b = __builtin_ctz(r & (r - 1));
      return fail(x, "%%%u is used both as %s and as %s", id, role_name(a), role_name(b));
    }
    uint32_t t = x->vtype[id];
    x->used[t] |= r;
    if (x->kind[t] == K_PTR) x->used[x->ptee[t]] |= r;
  }
  /* constants: each role of each place they are used */
  for (size_t i = 5; i < x->n; i += x->w[i] >> 16) {
    const uint32_t *in = x->w + i;
    int ng = links(x, in, g);
    for (int k = 0; k < ng; k++)
      for (int j = 0; j < g[k].n; j++) {
        uint32_t id = in[g[k].pos[j]];
        if (!is_poly(x, id)) continue;
        int r = group_role(x, in, &g[k]);
        if (r < 0) return fail(x, "the use of constant %%%u cannot be inferred", id);
        x->used[id] |= (uint8_t)(1u << r);
        x->used[x->vtype[id]] |= (uint8_t)(1u << r);
      }
  }
  return true;
}

/* Ids of each role's variant: the first role keeps the id, the others get
 * new ones past the bound. */
static void assign_ids(xl *x) {
  x->nbound = x->bound;
  for (uint32_t id = 1; id < x->bound; id++) {
    if (x->kind[id] == K_NONE) continue;
    bool first = true;
    for (int r = 0; r < NROLES; r++) {
      if (!(x->used[id] >> r & 1)) continue;
      x->var[id][r] = first ? id : x->nbound++;
      first = false;
      if (x->kind[id] == K_MAT) x->need_val[r] = true;
    }
  }
}

/* ---------------------------------------------------------------- pass 3 */

typedef struct {
  uint32_t *w;
  size_t n, cap;
  bool oom;
} vec;

static void put(vec *v, uint32_t word) {
  if (v->n == v->cap) {
    size_t cap = v->cap ? 2 * v->cap : 1024;
    uint32_t *nw = realloc(v->w, cap * sizeof *nw);
    if (!nw) {
      v->oom = true;
      return;
    }
    v->w = nw, v->cap = cap;
  }
  v->w[v->n++] = word;
}

static void put_ins(vec *v, const uint32_t *in, uint32_t len) {
  for (uint32_t k = 0; k < len; k++) put(v, in[k]);
}

/* The role of matrix value id (its class's). */
static int role_of(xl *x, uint32_t id) { return __builtin_ctz(x->roles[find(x, id)]); }

/* The int_t constants 0..2 the KHR operands need, reusing those defined
 * before the first NV type; the missing ones are written there. */
static void constants(xl *x) {
  for (size_t i = 5; i < x->first_mat; i += x->w[i] >> 16) {
    const uint32_t *in = x->w + i;
    if ((in[0] & 0xffff) == SpvOpConstant && in[0] >> 16 == 4 && in[1] == x->int_t && in[3] < NROLES && !x->cval[in[3]])
      x->cval[in[3]] = in[2];
  }
}

static void write_constants(xl *x, vec *v) {
  if (x->bf16) { /* the bf16 component, before the first matrix type */
    x->bf16_t = x->nbound++;
    uint32_t in[4] = {4u << 16 | SpvOpTypeFloat, x->bf16_t, 16, MLC_SPV_FP_BFLOAT16};
    put_ins(v, in, 4);
  }
  for (uint32_t c = 0; c < NROLES; c++) {
    if (!x->need_val[c] || x->cval[c]) continue;
    x->cval[c] = x->nbound++;
    uint32_t in[4] = {4u << 16 | SpvOpConstant, x->int_t, x->cval[c], c};
    put_ins(v, in, 4);
  }
}

/* One instruction, in its KHR form (tmp: room for one instruction). */
static bool rewrite_one(xl *x, vec *v, size_t i, uint32_t *tmp) {
  group g[3];
  const uint32_t *in = x->w + i;
  uint32_t op = in[0] & 0xffff, len = in[0] >> 16;
  memcpy(tmp, in, len * sizeof *in);
  if (i == x->first_mat) write_constants(x, v);
  /* result types follow their value's role */
  bool has_res, has_type;
  SpvHasResultAndType((SpvOp)op, &has_res, &has_type);
  if (has_res && has_type && is_mat(x, in[2])) tmp[1] = x->var[in[1]][role_of(x, in[2])];
  /* constants take the role of the place they are used */
  int ng = links(x, in, g);
  if (ng < 0) return false;
  for (int k = 0; k < ng; k++)
    for (int j = 0; j < g[k].n; j++)
      if (is_poly(x, in[g[k].pos[j]])) tmp[g[k].pos[j]] = x->var[in[g[k].pos[j]]][group_role(x, in, &g[k])];
  switch (op) {
  case SpvOpCapability:
    if (in[1] == SpvCapabilityCooperativeMatrixNV) tmp[1] = MLC_SPV_CAP_COOPMAT_KHR;
    put_ins(v, tmp, len);
    if (in[1] == SpvCapabilityCooperativeMatrixNV && x->bf16) {
      uint32_t caps[4] = {2u << 16 | SpvOpCapability, MLC_SPV_CAP_BFLOAT16_TYPE, 2u << 16 | SpvOpCapability,
                          MLC_SPV_CAP_BFLOAT16_COOPMAT};
      put_ins(v, caps, 4);
    }
    break;
  case SpvOpTypeFloat:
    if (len == 3 && in[2] == 16) x->f16_t = in[1];
    put_ins(v, tmp, len);
    break;
  case SpvOpExtension:
    if (!strncmp((const char *)(in + 1), "SPV_NV_cooperative_matrix", (len - 1) * 4)) {
      static const char name[28] = "SPV_KHR_cooperative_matrix"; /* 26 bytes + NUL, padded to 7 words */
      uint32_t words[7];
      memcpy(words, name, sizeof words);
      put(v, 8u << 16 | SpvOpExtension);
      put_ins(v, words, 7);
      if (x->bf16) {
        static const char bf[20] = "SPV_KHR_bfloat16"; /* 16 bytes + NUL, padded to 5 words */
        uint32_t bw[5];
        memcpy(bw, bf, sizeof bw);
        put(v, 6u << 16 | SpvOpExtension);
        put_ins(v, bw, 5);
      }
    } else {
      put_ins(v, tmp, len);
    }
    break;
  case SpvOpTypeCooperativeMatrixNV: /* (result, component, scope, rows, columns) + use */
    for (int r = 0; r < NROLES; r++)
      if (x->used[in[1]] >> r & 1) {
        uint32_t comp = in[2];
        if (x->bf16 && r != MLC_COOPMAT_USE_ACC) {
          if (!x->f16_t || comp != x->f16_t)
            return fail(x, "the %s matrix %%%u of a bf16 kernel is not of the module's f16 type", role_name(r), in[1]);
          comp = x->bf16_t;
        }
        uint32_t t[7] = {7u << 16 | MLC_SPV_OP_TYPE_COOPMAT_KHR, x->var[in[1]][r], comp, in[3], in[4], in[5], x->cval[r]};
        put_ins(v, t, 7);
      }
    break;
  case SpvOpTypePointer:
  case SpvOpConstantComposite: case SpvOpConstantNull: case SpvOpUndef: case SpvOpSpecConstantComposite: {
    uint32_t id = in[op == SpvOpTypePointer ? 1 : 2];
    if (x->kind[id] == K_NONE) {
      put_ins(v, tmp, len);
      break;
    }
    /* one per role (none at all when nothing uses it) */
    for (int r = 0; r < NROLES; r++)
      if (x->used[id] >> r & 1) {
        if (op == SpvOpTypePointer) tmp[1] = x->var[id][r], tmp[3] = x->var[in[3]][r];
        else tmp[1] = x->var[in[1]][r], tmp[2] = x->var[id][r];
        put_ins(v, tmp, len);
      }
    break;
  }
  case SpvOpName: case SpvOpDecorate: /* names and decorations of what is no longer there go too */
    if (in[1] < x->bound && x->kind[in[1]] != K_NONE && !x->used[in[1]]) break;
    put_ins(v, tmp, len);
    break;
  case SpvOpCooperativeMatrixLoadNV:   /* type result ptr stride colmajor [access] */
  case SpvOpCooperativeMatrixStoreNV: { /* ptr object stride colmajor [access] */
    bool ld = op == SpvOpCooperativeMatrixLoadNV;
    uint32_t at = ld ? 5 : 4; /* the column-major operand */
    if (len <= at || !x->boolv[in[at]])
      return fail(x, "the column-major operand of the %s at word %zu is not a boolean constant", ld ? "load" : "store", i);
    uint32_t layout = x->boolv[in[at]] == 2 ? MLC_COOPMAT_COLUMN_MAJOR : MLC_COOPMAT_ROW_MAJOR;
    tmp[0] = len << 16 | (ld ? MLC_SPV_OP_COOPMAT_LOAD_KHR : MLC_SPV_OP_COOPMAT_STORE_KHR);
    tmp[at - 1] = x->cval[layout], tmp[at] = in[at - 1]; /* layout, then stride */
    put_ins(v, tmp, len);
    break;
  }
  case SpvOpCooperativeMatrixMulAddNV:
    tmp[0] = len << 16 | MLC_SPV_OP_COOPMAT_MULADD_KHR; /* float components: no operands mask */
    put_ins(v, tmp, len);
    break;
  case SpvOpCooperativeMatrixLengthNV: { /* type result matrix-type */
    uint8_t u = in[3] < x->bound ? x->used[in[3]] : 0;
    if (!u || (u & (u - 1)))
      return fail(x, "OpCooperativeMatrixLengthNV of %%%u: the type has %s use, so which KHR type is meant is unknown",
                  in[3], u ? "more than one" : "no");
    tmp[0] = len << 16 | MLC_SPV_OP_COOPMAT_LENGTH_KHR, tmp[3] = x->var[in[3]][__builtin_ctz(u)];
    put_ins(v, tmp, len);
    break;
  }
  default:
    put_ins(v, tmp, len);
  }
  return true;
}

static bool rewrite(xl *x, vec *v) {
  uint32_t *tmp = malloc(65536 * sizeof *tmp); /* one instruction, at most 65535 words */
  if (!tmp) return fail(x, "out of memory");
  put_ins(v, x->w, 5);
  bool ok = true;
  for (size_t i = 5; i < x->n && ok; i += x->w[i] >> 16) ok = rewrite_one(x, v, i, tmp);
  free(tmp);
  if (!ok) return false;
  if (v->oom) return fail(x, "out of memory");
  v->w[3] = x->nbound;
  return true;
}

static bool translate(const uint32_t *words, size_t n, bool bf16, uint32_t **out, size_t *out_n, char *err, size_t errn) {
  *out = NULL, *out_n = 0;
  xl x = {.w = words, .n = n, .err = err, .errn = errn, .bf16 = bf16};
  if (n < 5 || words[0] != SpvMagicNumber) return fail(&x, "not a SPIR-V module");
  x.bound = words[3];
  size_t b = x.bound;
  x.vtype = calloc(b, sizeof *x.vtype), x.kind = calloc(b, 1), x.ptee = calloc(b, sizeof *x.ptee);
  x.boolv = calloc(b, 1), x.isint = calloc(b, 1), x.parent = calloc(b, sizeof *x.parent), x.roles = calloc(b, 1), x.used = calloc(b, 1);
  x.var = calloc(b, sizeof *x.var);
  vec v = {0};
  bool ok = x.vtype && x.kind && x.ptee && x.boolv && x.isint && x.parent && x.roles && x.used && x.var;
  if (!ok) fail(&x, "out of memory");
  ok = ok && index_module(&x);
  if (ok && !x.first_mat) ok = fail(&x, "no OpTypeCooperativeMatrixNV: nothing to translate");
  ok = ok && infer(&x);
  if (ok) {
    assign_ids(&x);
    constants(&x);
    ok = rewrite(&x, &v);
  }
  free(x.vtype), free(x.kind), free(x.ptee), free(x.boolv), free(x.isint), free(x.parent), free(x.roles), free(x.used), free(x.var);
  if (!ok) {
    free(v.w);
    return false;
  }
  *out = v.w, *out_n = v.n;
  return true;
}

bool mlc_spirv_nv_to_khr(const uint32_t *words, size_t n, uint32_t **out, size_t *out_n, char *err, size_t errn) {
  return translate(words, n, false, out, out_n, err, errn);
}

bool mlc_spirv_nv_to_khr_bf16(const uint32_t *words, size_t n, uint32_t **out, size_t *out_n, char *err, size_t errn) {
  return translate(words, n, true, out, out_n, err, errn);
}
