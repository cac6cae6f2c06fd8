/* The SPIR-V module builder (see builder.h): sections of words, interned
 * types and constants, structured control flow, the buffer conventions. */
#include "codegen/spirv/builder.h"

#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

static void push(sb_words *v, uint32_t x) {
  if (v->n == v->cap) {
    v->cap = v->cap ? 2 * v->cap : 256;
    v->w = realloc(v->w, v->cap * sizeof *v->w);
    MLC_ASSERT(v->w);
  }
  v->w[v->n++] = x;
}

/* memcpy of n words, where src may be NULL when n is 0 */
static void copyw(uint32_t *dst, const uint32_t *src, size_t n) {
  if (n) memcpy(dst, src, n * 4);
}

static void append(sb_words *v, const uint32_t *w, size_t n) {
  for (size_t i = 0; i < n; i++) push(v, w[i]);
}

static void inst(sb_words *v, SpvOp op, uint32_t n, const uint32_t *w) {
  push(v, ((n + 1) << 16) | (uint32_t)op);
  append(v, w, n);
}

/* A literal string's words: nul-terminated, zero-padded. */
static uint32_t str_words(const char *s, uint32_t *w, uint32_t max) {
  size_t len = strlen(s) + 1, n = (len + 3) / 4;
  MLC_ASSERT(n <= max);
  memset(w, 0, n * 4);
  memcpy(w, s, len);
  return (uint32_t)n;
}

static uint32_t fresh(sb *b) { return b->bound++; }

void sb_capability(sb *b, uint32_t cap) {
  for (size_t i = 0; i < b->caps.n; i += 2)
    if (b->caps.w[i + 1] == cap) return;
  inst(&b->caps, SpvOpCapability, 1, &cap);
}

void sb_extension(sb *b, const char *name) {
  uint32_t w[16], n = str_words(name, w, 16);
  inst(&b->exts, SpvOpExtension, n, w);
}

/* ---- interning ---- */

static uint32_t intern(sb *b, const uint32_t *key, uint32_t n) {
  for (size_t i = 0; i < b->nient; i++)
    if (b->ient[i].n == n && !memcmp(b->ikeys.w + b->ient[i].off, key, n * 4)) return b->ient[i].id;
  return 0;
}

static void remember(sb *b, const uint32_t *key, uint32_t n, uint32_t id) {
  if (b->nient == b->capient) {
    b->capient = b->capient ? 2 * b->capient : 64;
    b->ient = realloc(b->ient, b->capient * sizeof *b->ient);
    MLC_ASSERT(b->ient);
  }
  b->ient[b->nient++] = (struct sb_intern){b->ikeys.n, n, id};
  append(&b->ikeys, key, n);
}

uint32_t sb_type(sb *b, SpvOp op, uint32_t n, const uint32_t *operands) {
  uint32_t key[16];
  MLC_ASSERT(n < 15);
  key[0] = (uint32_t)op;
  copyw(key + 1, operands, n);
  uint32_t id = intern(b, key, n + 1);
  if (id) return id;
  id = fresh(b);
  uint32_t w[16];
  w[0] = id;
  copyw(w + 1, operands, n);
  inst(&b->globals, op, n + 1, w);
  remember(b, key, n + 1, id);
  return id;
}

uint32_t sb_constant(sb *b, SpvOp op, uint32_t type, uint32_t n, const uint32_t *v) {
  uint32_t key[8] = {(uint32_t)op, type};
  copyw(key + 2, v, n);
  uint32_t id = intern(b, key, n + 2);
  if (id) return id;
  id = fresh(b);
  uint32_t w[8] = {type, id};
  copyw(w + 2, v, n);
  inst(&b->globals, op, n + 2, w);
  remember(b, key, n + 2, id);
  return id;
}

uint32_t sb_ptr(sb *b, SpvStorageClass sc, uint32_t type) {
  uint32_t o[2] = {(uint32_t)sc, type};
  return sb_type(b, SpvOpTypePointer, 2, o);
}

uint32_t sb_array_type(sb *b, uint32_t elem, uint32_t n) {
  uint32_t o[2] = {elem, sb_u32(b, n)};
  return sb_type(b, SpvOpTypeArray, 2, o);
}

uint32_t sb_u32(sb *b, uint32_t v) { return sb_constant(b, SpvOpConstant, b->t_u32, 1, &v); }

uint32_t sb_f32(sb *b, float v) {
  uint32_t w;
  memcpy(&w, &v, 4);
  return sb_constant(b, SpvOpConstant, b->t_f32, 1, &w);
}

bool sb_is_f32(sb *b, uint32_t id, float v) {
  uint32_t key[3] = {SpvOpConstant, b->t_f32};
  memcpy(&key[2], &v, 4);
  return id && intern(b, key, 3) == id; /* looked up, never made */
}

uint32_t sb_u64_type(sb *b) {
  if (!b->t_u64) {
    sb_capability(b, SpvCapabilityInt64);
    uint32_t i64[2] = {64, 0};
    b->t_u64 = sb_type(b, SpvOpTypeInt, 2, i64);
  }
  return b->t_u64;
}

uint32_t sb_u64(sb *b, uint64_t v) {
  sb_u64_type(b);
  uint32_t w[2] = {(uint32_t)v, (uint32_t)(v >> 32)};
  return sb_constant(b, SpvOpConstant, b->t_u64, 2, w);
}

uint32_t sb_bool(sb *b, bool v) { return sb_constant(b, v ? SpvOpConstantTrue : SpvOpConstantFalse, b->t_bool, 0, NULL); }

uint32_t sb_f16_type(sb *b) {
  sb_capability(b, SpvCapabilityFloat16);
  uint32_t w = 16;
  return sb_type(b, SpvOpTypeFloat, 1, &w);
}

uint32_t sb_uvec4_type(sb *b) {
  uint32_t v4[2] = {b->t_u32, 4};
  return sb_type(b, SpvOpTypeVector, 2, v4);
}

static void decorate(sb *b, uint32_t id, SpvDecoration d, uint32_t n, const uint32_t *extra) {
  uint32_t w[4] = {id, (uint32_t)d};
  copyw(w + 2, extra, n);
  inst(&b->annot, SpvOpDecorate, n + 2, w);
}

/* ---- module ---- */

void sb_init(sb *b, uint32_t nbuf) {
  memset(b, 0, sizeof *b);
  MLC_ASSERT(nbuf <= SB_MAX_BIND);
  b->bound = 1;
  sb_capability(b, SpvCapabilityShader);
  b->glsl = fresh(b);
  uint32_t w[8], n = str_words("GLSL.std.450", w + 1, 7);
  w[0] = b->glsl;
  inst(&b->imports, SpvOpExtInstImport, n + 1, w);
  b->t_void = sb_type(b, SpvOpTypeVoid, 0, NULL);
  b->t_bool = sb_type(b, SpvOpTypeBool, 0, NULL);
  uint32_t i32[2] = {32, 0}, f32 = 32;
  b->t_u32 = sb_type(b, SpvOpTypeInt, 2, i32);
  b->t_f32 = sb_type(b, SpvOpTypeFloat, 1, &f32);
  uint32_t v2[2] = {b->t_f32, 2}, v3[2] = {b->t_u32, 3};
  b->t_v2f = sb_type(b, SpvOpTypeVector, 2, v2);
  b->t_v3u = sb_type(b, SpvOpTypeVector, 2, v3);
  b->t_fn = sb_type(b, SpvOpTypeFunction, 1, &b->t_void);
  /* struct { uint w[]; }, Block, in StorageBuffer */
  uint32_t rt = sb_type(b, SpvOpTypeRuntimeArray, 1, &b->t_u32);
  uint32_t four = 4;
  decorate(b, rt, SpvDecorationArrayStride, 1, &four);
  b->t_buf_struct = sb_type(b, SpvOpTypeStruct, 1, &rt);
  decorate(b, b->t_buf_struct, SpvDecorationBlock, 0, NULL);
  uint32_t md[4] = {b->t_buf_struct, 0, SpvDecorationOffset, 0};
  inst(&b->annot, SpvOpMemberDecorate, 4, md);
  b->p_buf = sb_ptr(b, SpvStorageClassStorageBuffer, b->t_buf_struct);
  b->p_sb_u32 = sb_ptr(b, SpvStorageClassStorageBuffer, b->t_u32);
  b->nbuf = nbuf;
  for (uint32_t i = 0; i < nbuf; i++) {
    b->buf[i] = fresh(b);
    uint32_t v[3] = {b->p_buf, b->buf[i], SpvStorageClassStorageBuffer};
    inst(&b->globals, SpvOpVariable, 3, v);
    uint32_t zero = 0;
    decorate(b, b->buf[i], SpvDecorationDescriptorSet, 1, &zero);
    decorate(b, b->buf[i], SpvDecorationBinding, 1, &i);
  }
  uint32_t pin = sb_ptr(b, SpvStorageClassInput, b->t_v3u);
  b->v_wid = fresh(b);
  b->v_lid = fresh(b);
  uint32_t a[3] = {pin, b->v_wid, SpvStorageClassInput}, c[3] = {pin, b->v_lid, SpvStorageClassInput};
  inst(&b->globals, SpvOpVariable, 3, a);
  inst(&b->globals, SpvOpVariable, 3, c);
  uint32_t bw = SpvBuiltInWorkgroupId, bl = SpvBuiltInLocalInvocationId;
  decorate(b, b->v_wid, SpvDecorationBuiltIn, 1, &bw);
  decorate(b, b->v_lid, SpvDecorationBuiltIn, 1, &bl);
}

void sb_free(sb *b) {
  sb_words *all[] = {&b->caps, &b->exts, &b->imports, &b->entries, &b->modes, &b->debug, &b->annot,
                     &b->globals, &b->funcs, &b->fvars, &b->fbody, &b->ikeys};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) free(all[i]->w);
  free(b->ient);
  memset(b, 0, sizeof *b);
}

uint32_t *sb_finish(sb *b, size_t *out_n) {
  sb_words m = {0};
  uint32_t hdr[5] = {SpvMagicNumber, 0x00010300, 0, b->bound, 0};
  append(&m, hdr, 5);
  sb_words *pre[] = {&b->caps, &b->exts, &b->imports};
  for (int i = 0; i < 3; i++) append(&m, pre[i]->w, pre[i]->n);
  uint32_t mm[2] = {SpvAddressingModelLogical, SpvMemoryModelGLSL450};
  inst(&m, SpvOpMemoryModel, 2, mm);
  sb_words *post[] = {&b->entries, &b->modes, &b->debug, &b->annot, &b->globals, &b->funcs};
  for (int i = 0; i < 6; i++) append(&m, post[i]->w, post[i]->n);
  *out_n = m.n;
  return m.w;
}

void sb_entry_begin(sb *b, const char *name, uint32_t lx, uint64_t groups, uint32_t gxy[2]) {
  MLC_ASSERT(b->nentry < SB_MAX_ENTRY);
  b->nentry++;
  uint32_t fn = fresh(b), w[40], n = str_words(name, w + 2, 30);
  w[0] = SpvExecutionModelGLCompute;
  w[1] = fn;
  w[2 + n] = b->v_wid;
  w[3 + n] = b->v_lid;
  inst(&b->entries, SpvOpEntryPoint, n + 4, w);
  uint32_t md[5] = {fn, SpvExecutionModeLocalSize, lx, 1, 1};
  inst(&b->modes, SpvOpExecutionMode, 5, md);
  uint32_t f[4] = {b->t_void, fn, SpvFunctionControlMaskNone, b->t_fn};
  inst(&b->funcs, SpvOpFunction, 4, f);
  uint32_t lab = fresh(b);
  inst(&b->funcs, SpvOpLabel, 1, &lab);
  b->fvars.n = b->fbody.n = 0;
  b->in_fn = true;
  if (groups < 1) groups = 1;
  b->gx = groups > 65535 ? 65535 : (uint32_t)groups;
  b->lsize = lx;
  gxy[0] = b->gx;
  gxy[1] = (uint32_t)((groups + b->gx - 1) / b->gx);
}

void sb_entry_end(sb *b) {
  inst(&b->fbody, SpvOpReturn, 0, NULL);
  append(&b->funcs, b->fvars.w, b->fvars.n);
  append(&b->funcs, b->fbody.w, b->fbody.n);
  inst(&b->funcs, SpvOpFunctionEnd, 0, NULL);
  b->in_fn = false;
}

/* ---- instructions ---- */

uint32_t sb_op(sb *b, SpvOp op, uint32_t type, uint32_t n, const uint32_t *args) {
  uint32_t w[24], id = fresh(b);
  MLC_ASSERT(n <= 22);
  w[0] = type;
  w[1] = id;
  copyw(w + 2, args, n);
  inst(&b->fbody, op, n + 2, w);
  return id;
}

void sb_op0(sb *b, SpvOp op, uint32_t n, const uint32_t *args) { inst(&b->fbody, op, n, args); }

uint32_t sb_op1(sb *b, SpvOp op, uint32_t type, uint32_t x) { return sb_op(b, op, type, 1, &x); }

uint32_t sb_op2(sb *b, SpvOp op, uint32_t type, uint32_t x, uint32_t y) {
  uint32_t a[2] = {x, y};
  return sb_op(b, op, type, 2, a);
}

uint32_t sb_glsl(sb *b, enum GLSLstd450 f, uint32_t type, uint32_t n, const uint32_t *args) {
  uint32_t w[8] = {b->glsl, (uint32_t)f};
  MLC_ASSERT(n <= 6);
  copyw(w + 2, args, n);
  return sb_op(b, SpvOpExtInst, type, n + 2, w);
}

uint32_t sb_glsl1(sb *b, enum GLSLstd450 f, uint32_t type, uint32_t x) { return sb_glsl(b, f, type, 1, &x); }

uint32_t sb_select(sb *b, uint32_t type, uint32_t c, uint32_t x, uint32_t y) {
  uint32_t a[3] = {c, x, y};
  return sb_op(b, SpvOpSelect, type, 3, a);
}

uint32_t sb_add(sb *b, uint32_t x, uint32_t y) { return sb_op2(b, SpvOpIAdd, b->t_u32, x, y); }
uint32_t sb_sub(sb *b, uint32_t x, uint32_t y) { return sb_op2(b, SpvOpISub, b->t_u32, x, y); }
uint32_t sb_mul(sb *b, uint32_t x, uint32_t y) { return sb_op2(b, SpvOpIMul, b->t_u32, x, y); }
uint32_t sb_div(sb *b, uint32_t x, uint32_t y) { return sb_op2(b, SpvOpUDiv, b->t_u32, x, y); }
uint32_t sb_mod(sb *b, uint32_t x, uint32_t y) { return sb_op2(b, SpvOpUMod, b->t_u32, x, y); }
uint32_t sb_shr(sb *b, uint32_t x, uint32_t y) { return sb_op2(b, SpvOpShiftRightLogical, b->t_u32, x, y); }
uint32_t sb_shl(sb *b, uint32_t x, uint32_t y) { return sb_op2(b, SpvOpShiftLeftLogical, b->t_u32, x, y); }
uint32_t sb_and(sb *b, uint32_t x, uint32_t y) { return sb_op2(b, SpvOpBitwiseAnd, b->t_u32, x, y); }
uint32_t sb_or(sb *b, uint32_t x, uint32_t y) { return sb_op2(b, SpvOpBitwiseOr, b->t_u32, x, y); }
uint32_t sb_ult(sb *b, uint32_t x, uint32_t y) { return sb_op2(b, SpvOpULessThan, b->t_bool, x, y); }
uint32_t sb_ieq(sb *b, uint32_t x, uint32_t y) { return sb_op2(b, SpvOpIEqual, b->t_bool, x, y); }
uint32_t sb_land(sb *b, uint32_t x, uint32_t y) { return sb_op2(b, SpvOpLogicalAnd, b->t_bool, x, y); }
uint32_t sb_addc(sb *b, uint32_t x, uint32_t k) { return k ? sb_add(b, x, sb_u32(b, k)) : x; }
uint32_t sb_mulc(sb *b, uint32_t x, uint32_t k) { return k == 1 ? x : sb_mul(b, x, sb_u32(b, k)); }
uint32_t sb_fadd(sb *b, uint32_t x, uint32_t y) { return sb_op2(b, SpvOpFAdd, b->t_f32, x, y); }
uint32_t sb_fsub(sb *b, uint32_t x, uint32_t y) { return sb_op2(b, SpvOpFSub, b->t_f32, x, y); }
uint32_t sb_fmul(sb *b, uint32_t x, uint32_t y) { return sb_op2(b, SpvOpFMul, b->t_f32, x, y); }
uint32_t sb_fdiv(sb *b, uint32_t x, uint32_t y) { return sb_op2(b, SpvOpFDiv, b->t_f32, x, y); }
uint32_t sb_fma(sb *b, uint32_t x, uint32_t y, uint32_t z) {
  uint32_t a[3] = {x, y, z};
  return sb_glsl(b, GLSLstd450Fma, b->t_f32, 3, a);
}
uint32_t sb_fmax(sb *b, uint32_t x, uint32_t y) {
  uint32_t a[2] = {x, y};
  return sb_glsl(b, GLSLstd450FMax, b->t_f32, 2, a);
}
uint32_t sb_exp(sb *b, uint32_t x) { return sb_glsl1(b, GLSLstd450Exp, b->t_f32, x); }
uint32_t sb_flt(sb *b, uint32_t x, uint32_t y) { return sb_op2(b, SpvOpFOrdLessThan, b->t_bool, x, y); }
uint32_t sb_u2f(sb *b, uint32_t x) { return sb_op1(b, SpvOpConvertUToF, b->t_f32, x); }
uint32_t sb_bits2f(sb *b, uint32_t x) { return sb_op1(b, SpvOpBitcast, b->t_f32, x); }
uint32_t sb_f2bits(sb *b, uint32_t x) { return sb_op1(b, SpvOpBitcast, b->t_u32, x); }

/* ---- locals and control flow ---- */

sb_lv sb_local(sb *b, uint32_t type, uint32_t init) {
  MLC_ASSERT(b->in_fn); /* a Function variable belongs to the entry point being written */
  sb_lv v = {fresh(b), type};
  uint32_t w[3] = {sb_ptr(b, SpvStorageClassFunction, type), v.id, SpvStorageClassFunction};
  inst(&b->fvars, SpvOpVariable, 3, w);
  if (init) sb_st(b, v, init);
  return v;
}

sb_lv sb_local_array(sb *b, uint32_t elem, uint32_t n) {
  sb_lv v = sb_local(b, sb_array_type(b, elem, n), 0);
  v.type = elem; /* element type: what sb_arr_ld gives */
  return v;
}

uint32_t sb_ld(sb *b, sb_lv v) { return sb_op1(b, SpvOpLoad, v.type, v.id); }

void sb_st(sb *b, sb_lv v, uint32_t x) {
  uint32_t w[2] = {v.id, x};
  inst(&b->fbody, SpvOpStore, 2, w);
}

static uint32_t elem_ptr(sb *b, SpvStorageClass sc, uint32_t elem, uint32_t base, uint32_t idx) {
  uint32_t a[2] = {base, idx};
  return sb_op(b, SpvOpAccessChain, sb_ptr(b, sc, elem), 2, a);
}

uint32_t sb_arr_ld(sb *b, sb_lv a, uint32_t idx) {
  return sb_op1(b, SpvOpLoad, a.type, elem_ptr(b, SpvStorageClassFunction, a.type, a.id, idx));
}

void sb_arr_st(sb *b, sb_lv a, uint32_t idx, uint32_t x) {
  uint32_t w[2] = {elem_ptr(b, SpvStorageClassFunction, a.type, a.id, idx), x};
  inst(&b->fbody, SpvOpStore, 2, w);
}

static void branch(sb *b, uint32_t to) { inst(&b->fbody, SpvOpBranch, 1, &to); }
static void label(sb *b, uint32_t id) { inst(&b->fbody, SpvOpLabel, 1, &id); }

uint32_t sb_for(sb *b, sb_loop *l, uint32_t start, uint32_t end, uint32_t step) {
  l->var = sb_local(b, b->t_u32, start);
  l->end = end;
  l->step = step;
  l->header = fresh(b);
  uint32_t cond = fresh(b);
  l->body = fresh(b);
  l->cont = fresh(b);
  l->merge = fresh(b);
  branch(b, l->header);
  label(b, l->header);
  uint32_t lm[3] = {l->merge, l->cont, SpvLoopControlMaskNone};
  inst(&b->fbody, SpvOpLoopMerge, 3, lm);
  branch(b, cond);
  label(b, cond);
  uint32_t i = sb_ld(b, l->var);
  uint32_t bc[3] = {sb_ult(b, i, end), l->body, l->merge};
  inst(&b->fbody, SpvOpBranchConditional, 3, bc);
  label(b, l->body);
  return i;
}

void sb_for_end(sb *b, sb_loop *l) {
  branch(b, l->cont);
  label(b, l->cont);
  sb_st(b, l->var, sb_add(b, sb_ld(b, l->var), l->step));
  branch(b, l->header);
  label(b, l->merge);
}

void sb_if_begin(sb *b, sb_if *s, uint32_t cond, bool with_else) {
  uint32_t then = fresh(b);
  s->merge = fresh(b);
  s->has_else = with_else;
  s->els = with_else ? fresh(b) : s->merge;
  uint32_t sm[2] = {s->merge, SpvSelectionControlMaskNone};
  inst(&b->fbody, SpvOpSelectionMerge, 2, sm);
  uint32_t bc[3] = {cond, then, s->els};
  inst(&b->fbody, SpvOpBranchConditional, 3, bc);
  label(b, then);
}

void sb_if_else(sb *b, sb_if *s) {
  MLC_ASSERT(s->has_else);
  branch(b, s->merge);
  label(b, s->els);
}

void sb_if_end(sb *b, sb_if *s) {
  branch(b, s->merge);
  label(b, s->merge);
}

/* ---- builtins, shared memory, barriers ---- */

uint32_t sb_lid(sb *b) {
  uint32_t v = sb_op1(b, SpvOpLoad, b->t_v3u, b->v_lid), a[2] = {v, 0};
  return sb_op(b, SpvOpCompositeExtract, b->t_u32, 2, a);
}

uint32_t sb_group(sb *b) {
  uint32_t v = sb_op1(b, SpvOpLoad, b->t_v3u, b->v_wid), ax[2] = {v, 0}, ay[2] = {v, 1};
  uint32_t x = sb_op(b, SpvOpCompositeExtract, b->t_u32, 2, ax), y = sb_op(b, SpvOpCompositeExtract, b->t_u32, 2, ay);
  return sb_add(b, sb_mulc(b, y, b->gx), x);
}

uint32_t sb_shared(sb *b, uint32_t elem, uint32_t n) {
  uint32_t id = fresh(b), w[3] = {sb_ptr(b, SpvStorageClassWorkgroup, sb_array_type(b, elem, n)), id, SpvStorageClassWorkgroup};
  inst(&b->globals, SpvOpVariable, 3, w);
  return id;
}

uint32_t sb_sh_ld(sb *b, uint32_t var, uint32_t elem, uint32_t idx) {
  return sb_op1(b, SpvOpLoad, elem, elem_ptr(b, SpvStorageClassWorkgroup, elem, var, idx));
}

void sb_sh_st(sb *b, uint32_t var, uint32_t elem, uint32_t idx, uint32_t x) {
  uint32_t w[2] = {elem_ptr(b, SpvStorageClassWorkgroup, elem, var, idx), x};
  inst(&b->fbody, SpvOpStore, 2, w);
}

void sb_subgroup_barrier(sb *b) {
  uint32_t sg = sb_u32(b, SpvScopeSubgroup);
  uint32_t w[3] = {sg, sg, sb_u32(b, SpvMemorySemanticsAcquireReleaseMask | SpvMemorySemanticsWorkgroupMemoryMask)};
  inst(&b->fbody, SpvOpControlBarrier, 3, w);
}

void sb_barrier(sb *b) {
  uint32_t wg = sb_u32(b, SpvScopeWorkgroup);
  uint32_t w[3] = {wg, wg, sb_u32(b, SpvMemorySemanticsAcquireReleaseMask | SpvMemorySemanticsWorkgroupMemoryMask)};
  inst(&b->fbody, SpvOpControlBarrier, 3, w);
}

uint32_t sb_wg_reduce(sb *b, uint32_t sh, uint32_t v, bool is_max) {
  uint32_t lid = sb_lid(b);
  sb_sh_st(b, sh, b->t_f32, lid, v);
  sb_barrier(b);
  for (uint32_t s = b->lsize / 2; s > 0; s /= 2) {
    sb_if c;
    sb_if_begin(b, &c, sb_ult(b, lid, sb_u32(b, s)), false);
    uint32_t x = sb_sh_ld(b, sh, b->t_f32, lid), y = sb_sh_ld(b, sh, b->t_f32, sb_addc(b, lid, s)), r;
    if (is_max) {
      uint32_t take = sb_op2(b, SpvOpLogicalOr, b->t_bool, sb_op2(b, SpvOpFOrdGreaterThan, b->t_bool, y, x),
                             sb_op1(b, SpvOpIsNan, b->t_bool, y));
      r = sb_select(b, b->t_f32, take, y, x);
    } else {
      r = sb_fadd(b, x, y);
    }
    sb_sh_st(b, sh, b->t_f32, lid, r);
    sb_if_end(b, &c);
    sb_barrier(b);
  }
  uint32_t r = sb_sh_ld(b, sh, b->t_f32, sb_u32(b, 0));
  sb_barrier(b); /* sh is free again */
  return r;
}

/* ---- buffers ---- */

uint32_t sb_word_ptr(sb *b, uint32_t bind, uint32_t widx) {
  MLC_ASSERT(bind < b->nbuf);
  uint32_t a[3] = {b->buf[bind], sb_u32(b, 0), widx};
  return sb_op(b, SpvOpAccessChain, b->p_sb_u32, 3, a);
}

uint32_t sb_ldw(sb *b, uint32_t bind, uint32_t widx) { return sb_op1(b, SpvOpLoad, b->t_u32, sb_word_ptr(b, bind, widx)); }

uint32_t sb_ld4(sb *b, uint32_t bind, uint32_t qidx) {
  MLC_ASSERT(bind < b->nbuf);
  uint32_t v4u = sb_uvec4_type(b), rt = sb_type(b, SpvOpTypeRuntimeArray, 1, &v4u);
  uint32_t st = sb_type(b, SpvOpTypeStruct, 1, &rt); /* struct { uvec4 q[]; }, read only */
  if (!b->buf4[bind]) {
    bool first = true;
    for (uint32_t i = 0; i < b->nbuf; i++) first = first && !b->buf4[i];
    if (first) { /* the type's decorations, once */
      uint32_t sixteen = 16, md[4] = {st, 0, SpvDecorationOffset, 0}, nw[3] = {st, 0, SpvDecorationNonWritable};
      decorate(b, rt, SpvDecorationArrayStride, 1, &sixteen);
      decorate(b, st, SpvDecorationBlock, 0, NULL);
      inst(&b->annot, SpvOpMemberDecorate, 4, md);
      inst(&b->annot, SpvOpMemberDecorate, 3, nw);
    }
    b->buf4[bind] = fresh(b);
    uint32_t v[3] = {sb_ptr(b, SpvStorageClassStorageBuffer, st), b->buf4[bind], SpvStorageClassStorageBuffer}, zero = 0;
    inst(&b->globals, SpvOpVariable, 3, v);
    decorate(b, b->buf4[bind], SpvDecorationDescriptorSet, 1, &zero);
    decorate(b, b->buf4[bind], SpvDecorationBinding, 1, &bind);
  }
  uint32_t a[3] = {b->buf4[bind], sb_u32(b, 0), qidx};
  uint32_t p = sb_op(b, SpvOpAccessChain, sb_ptr(b, SpvStorageClassStorageBuffer, v4u), 3, a);
  return sb_op1(b, SpvOpLoad, v4u, p);
}

void sb_stw(sb *b, uint32_t bind, uint32_t widx, uint32_t x) {
  uint32_t w[2] = {sb_word_ptr(b, bind, widx), x};
  inst(&b->fbody, SpvOpStore, 2, w);
}

uint32_t sb_atomic(sb *b, SpvOp op, uint32_t bind, uint32_t widx, uint32_t x) {
  uint32_t a[4] = {sb_word_ptr(b, bind, widx), sb_u32(b, SpvScopeDevice), sb_u32(b, 0), x};
  return sb_op(b, op, b->t_u32, 4, a);
}

static int dt_bytes(int dt) { return mlc_dtype_size((mlc_dtype)dt); }

uint32_t sb_load_bits(sb *b, uint32_t bind, int dt, uint32_t idx, uint32_t *hi) {
  int sz = dt_bytes(dt);
  if (sz == 4) return sb_ldw(b, bind, idx);
  if (sz == 8) {
    uint32_t w = sb_shl(b, idx, sb_u32(b, 1));
    if (hi) *hi = sb_ldw(b, bind, sb_addc(b, w, 1));
    return sb_ldw(b, bind, w);
  }
  uint32_t per = (uint32_t)(4 / sz), lg = sz == 2 ? 1 : 2;
  uint32_t word = sb_ldw(b, bind, sb_shr(b, idx, sb_u32(b, lg)));
  uint32_t sh = sb_shl(b, sb_and(b, idx, sb_u32(b, per - 1)), sb_u32(b, (uint32_t)sz == 2 ? 4 : 3));
  return sb_and(b, sb_shr(b, word, sh), sb_u32(b, sz == 2 ? 0xffffu : 0xffu));
}

void sb_store_bits(sb *b, uint32_t bind, int dt, uint32_t idx, uint32_t lo, uint32_t hi) {
  int sz = dt_bytes(dt);
  if (sz == 4) {
    sb_stw(b, bind, idx, lo);
    return;
  }
  if (sz == 8) {
    uint32_t w = sb_shl(b, idx, sb_u32(b, 1));
    sb_stw(b, bind, w, lo);
    sb_stw(b, bind, sb_addc(b, w, 1), hi);
    return;
  }
  /* A part of a word: clear this element's bits and set them, atomically
   * each, so the other parts of the word (other threads') are untouched. */
  uint32_t per = (uint32_t)(4 / sz), lg = sz == 2 ? 1 : 2, mask = sz == 2 ? 0xffffu : 0xffu;
  uint32_t widx = sb_shr(b, idx, sb_u32(b, lg));
  uint32_t sh = sb_shl(b, sb_and(b, idx, sb_u32(b, per - 1)), sb_u32(b, sz == 2 ? 4 : 3));
  uint32_t keep = sb_op1(b, SpvOpNot, b->t_u32, sb_shl(b, sb_u32(b, mask), sh));
  sb_atomic(b, SpvOpAtomicAnd, bind, widx, keep);
  sb_atomic(b, SpvOpAtomicOr, bind, widx, sb_shl(b, sb_and(b, lo, sb_u32(b, mask)), sh));
}

uint32_t sb_bf16tof(sb *b, uint32_t bits) { return sb_bits2f(b, sb_shl(b, bits, sb_u32(b, 16))); }

/* f16 <-> f32 in integer arithmetic, not GLSL's packHalf2x16 and
 * unpackHalf2x16: those leave rounding, overflow and subnormals to the
 * implementation, and NVIDIA's driver rounds f32 -> f16 differently from
 * round-to-nearest-even, which PyTorch and the other targets use (issue 23). */

/* The f16 in the low 16 bits of `bits` as f32: exact. */
uint32_t sb_f16tof(sb *b, uint32_t bits) {
  uint32_t h = sb_and(b, bits, sb_u32(b, 0xffff));
  uint32_t sign = sb_shl(b, sb_and(b, h, sb_u32(b, 0x8000)), sb_u32(b, 16));
  uint32_t e = sb_and(b, sb_shr(b, h, sb_u32(b, 10)), sb_u32(b, 0x1f)), m = sb_and(b, h, sb_u32(b, 0x3ff));
  uint32_t normal = sb_or(b, sb_shl(b, sb_addc(b, e, 112), sb_u32(b, 23)), sb_shl(b, m, sb_u32(b, 13)));
  uint32_t special = sb_or(b, sb_u32(b, 0x7f800000u), sb_shl(b, m, sb_u32(b, 13))); /* inf, NaN */
  /* subnormal: m * 2^-24, exact in f32 */
  uint32_t sub = sb_f2bits(b, sb_fmul(b, sb_op1(b, SpvOpConvertUToF, b->t_f32, m), sb_f32(b, 0x1p-24f)));
  uint32_t mag = sb_select(b, b->t_u32, sb_ieq(b, e, sb_u32(b, 0)), sub,
                           sb_select(b, b->t_u32, sb_ieq(b, e, sb_u32(b, 31)), special, normal));
  return sb_bits2f(b, sb_or(b, sign, mag));
}

uint32_t sb_f2bf16(sb *b, uint32_t f) {
  uint32_t u = sb_f2bits(b, f);
  uint32_t lsb = sb_and(b, sb_shr(b, u, sb_u32(b, 16)), sb_u32(b, 1));
  uint32_t r = sb_shr(b, sb_add(b, sb_add(b, u, sb_u32(b, 0x7fff)), lsb), sb_u32(b, 16));
  uint32_t q = sb_or(b, sb_shr(b, u, sb_u32(b, 16)), sb_u32(b, 0x40)); /* NaN stays a (quiet) NaN */
  return sb_select(b, b->t_u32, sb_op1(b, SpvOpIsNan, b->t_bool, f), q, r);
}

/* f32 -> f16 bits, round to nearest even: overflow to infinity, subnormals
 * rounded, NaN kept a (quiet) NaN. */
uint32_t sb_f2f16(sb *b, uint32_t f) {
  uint32_t u = sb_f2bits(b, f), a = sb_and(b, u, sb_u32(b, 0x7fffffffu));
  uint32_t sign = sb_and(b, sb_shr(b, u, sb_u32(b, 16)), sb_u32(b, 0x8000));
  /* normal (a >= 2^-14): the exponent rebiased, the 13 bits dropped rounded */
  uint32_t lsb = sb_and(b, sb_shr(b, a, sb_u32(b, 13)), sb_u32(b, 1));
  uint32_t normal = sb_shr(b, sb_add(b, sb_sub(b, a, sb_u32(b, 0x38000000u - 0xfffu)), lsb), sb_u32(b, 13));
  /* subnormal (2^-25 < a < 2^-14): the significand shifted by s = 126 - exponent (14..24), rounded */
  uint32_t e = sb_shr(b, a, sb_u32(b, 23)), small = sb_ult(b, e, sb_u32(b, 102));
  uint32_t sh = sb_select(b, b->t_u32, small, sb_u32(b, 24), sb_sub(b, sb_u32(b, 126), e));
  uint32_t m = sb_or(b, sb_and(b, a, sb_u32(b, 0x7fffffu)), sb_u32(b, 0x800000u));
  uint32_t q = sb_shr(b, m, sh), rem = sb_and(b, m, sb_sub(b, sb_shl(b, sb_u32(b, 1), sh), sb_u32(b, 1)));
  uint32_t half = sb_shl(b, sb_u32(b, 1), sb_sub(b, sh, sb_u32(b, 1)));
  uint32_t up = sb_op2(b, SpvOpLogicalOr, b->t_bool, sb_ult(b, half, rem),
                       sb_land(b, sb_ieq(b, rem, half), sb_ieq(b, sb_and(b, q, sb_u32(b, 1)), sb_u32(b, 1))));
  uint32_t sub = sb_select(b, b->t_u32, small, sb_u32(b, 0), sb_add(b, q, sb_select(b, b->t_u32, up, sb_u32(b, 1), sb_u32(b, 0))));
  uint32_t nan = sb_or(b, sb_u32(b, 0x7e00), sb_and(b, sb_shr(b, a, sb_u32(b, 13)), sb_u32(b, 0x3ff)));
  uint32_t mag = sb_select(b, b->t_u32, sb_ult(b, a, sb_u32(b, 0x38800000u)), sub, normal);
  mag = sb_select(b, b->t_u32, sb_ult(b, a, sb_u32(b, 0x477ff000u)), mag, sb_u32(b, 0x7c00)); /* >= 65520: infinity */
  mag = sb_select(b, b->t_u32, sb_ult(b, sb_u32(b, 0x7f800000u), a), nan, mag);
  return sb_or(b, sign, mag);
}

uint32_t sb_pack_h2(sb *b, uint32_t x0, uint32_t x1) {
  return sb_or(b, sb_f2f16(b, x0), sb_shl(b, sb_f2f16(b, x1), sb_u32(b, 16)));
}

uint32_t sb_load_f(sb *b, uint32_t bind, int dt, uint32_t idx) {
  uint32_t bits = sb_load_bits(b, bind, dt, idx, NULL);
  switch (dt) {
  case MLC_DT_F32: return sb_bits2f(b, bits);
  case MLC_DT_BF16: return sb_bf16tof(b, bits);
  case MLC_DT_F16: return sb_f16tof(b, bits);
  default: MLC_ICE("sb_load_f of a non-float dtype %d", dt);
  }
}

uint32_t sb_f2bits_dt(sb *b, int dt, uint32_t f) {
  switch (dt) {
  case MLC_DT_F32: return sb_f2bits(b, f);
  case MLC_DT_BF16: return sb_f2bf16(b, f);
  case MLC_DT_F16: return sb_f2f16(b, f);
  default: MLC_ICE("a float store to a non-float dtype %d", dt);
  }
}

void sb_store_f(sb *b, uint32_t bind, int dt, uint32_t idx, uint32_t val) {
  sb_store_bits(b, bind, dt, idx, sb_f2bits_dt(b, dt, val), 0);
}

uint32_t sb_load_i(sb *b, uint32_t bind, int dt, uint32_t idx, uint32_t *hi) { return sb_load_bits(b, bind, dt, idx, hi); }
