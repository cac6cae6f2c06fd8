/* Tests of the NV -> KHR cooperative-matrix translation (codegen/spirv/khr.h).
 *
 *   test_spirv_khr unit        small NV modules written with the builder,
 *                              validated as NV, translated: the exact KHR
 *                              instructions (types and their uses, the A/B
 *                              split of one f16 type, layout constants,
 *                              operand order), the errors for what cannot
 *                              be inferred, and GEMMs emitted with
 *                              --spirv-coopmat=khr against the NV ones
 *                              translated here;
 *   test_spirv_khr check F...  the .spv files F (what `mlc compile` wrote):
 *                              each one with cooperative matrices is KHR
 *                              and passes mlc_spirv_khr_check and the
 *                              checks below, which do not trust it; prints
 *                              how many (tests/spirv/khr_models.sh).
 *
 * Nothing here runs a KHR module: lavapipe has no cooperative matrices and
 * SPIRV-Tools 2023.1 cannot read the KHR opcodes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "codegen/spirv/builder.h"
#include "codegen/spirv/emit.h" /* mlc_spirv_optimize, mlc_spirv_validate_env */
#include "codegen/spirv/khr.h"
#include "codegen/spirv/spirv.h"
#include "runtime/profile.h" /* mlc_read_file */

/* ---------------------------------------------------------------- reading words */

/* Offset of the instruction defining id (0: none). */
static size_t def_of(const uint32_t *w, size_t n, uint32_t id) {
  for (size_t i = 5; i < n; i += w[i] >> 16) {
    uint32_t op = w[i] & 0xffff;
    if (op == MLC_SPV_OP_TYPE_COOPMAT_KHR || op == SpvOpTypePointer || op == SpvOpTypeInt || op == SpvOpTypeFloat ||
        op == SpvOpTypeCooperativeMatrixNV) {
      if (w[i + 1] == id) return i;
    } else if ((op == SpvOpConstant || op == SpvOpVariable || op == MLC_SPV_OP_COOPMAT_LOAD_KHR ||
                op == MLC_SPV_OP_COOPMAT_MULADD_KHR || op == SpvOpLoad || op == SpvOpConstantComposite ||
                op == SpvOpPhi) && w[i + 2] == id) {
      return i;
    }
  }
  return 0;
}

/* The value of OpConstant id (fails the test when it is none). */
static uint32_t const_value(const uint32_t *w, size_t n, uint32_t id) {
  size_t d = def_of(w, n, id);
  assert_true(d && (w[d] & 0xffff) == SpvOpConstant);
  return w[d + 3];
}

/* The use (0, 1, 2) of KHR type id. */
static uint32_t use_of(const uint32_t *w, size_t n, uint32_t type) {
  size_t d = def_of(w, n, type);
  assert_true(d && (w[d] & 0xffff) == MLC_SPV_OP_TYPE_COOPMAT_KHR);
  return const_value(w, n, w[d + 6]);
}

/* The result type of value id. */
static uint32_t type_of(const uint32_t *w, size_t n, uint32_t id) {
  size_t d = def_of(w, n, id);
  assert_true(d);
  return w[d + 1];
}

static int count_op(const uint32_t *w, size_t n, uint32_t opcode) {
  int c = 0;
  for (size_t i = 5; i < n; i += w[i] >> 16) c += (w[i] & 0xffff) == opcode;
  return c;
}

/* The k-th instruction with opcode (its offset), failing when there is none. */
static size_t nth_op(const uint32_t *w, size_t n, uint32_t opcode, int k) {
  for (size_t i = 5; i < n; i += w[i] >> 16)
    if ((w[i] & 0xffff) == opcode && k-- == 0) return i;
  fail_msg("no opcode %u number %d", opcode, k);
  return 0;
}

/* Checks of a translated module that do not use mlc_spirv_khr_check: no
 * NV left, ids under the bound, and each KHR type in one MulAdd position
 * only, the one its use names. */
static void independent_checks(const uint32_t *w, size_t n) {
  uint32_t bound = w[3];
  bool cap = false;
  for (size_t i = 5; i < n; i += w[i] >> 16) {
    uint32_t op = w[i] & 0xffff, len = w[i] >> 16;
    assert_true(len > 0 && i + len <= n);
    assert_false(op >= SpvOpTypeCooperativeMatrixNV && op <= SpvOpCooperativeMatrixLengthNV);
    if (op == SpvOpCapability) {
      assert_int_not_equal(w[i + 1], SpvCapabilityCooperativeMatrixNV);
      cap |= w[i + 1] == MLC_SPV_CAP_COOPMAT_KHR;
    }
    if (op == MLC_SPV_OP_TYPE_COOPMAT_KHR) assert_true(w[i + 1] < bound);
    if (op == MLC_SPV_OP_COOPMAT_LOAD_KHR || op == MLC_SPV_OP_COOPMAT_MULADD_KHR) assert_true(w[i + 2] < bound);
    if (op == MLC_SPV_OP_COOPMAT_MULADD_KHR) {
      assert_int_equal(len, 6); /* float matrices: no operands mask */
      assert_int_equal(use_of(w, n, w[i + 1]), MLC_COOPMAT_USE_ACC);
      assert_int_equal(use_of(w, n, type_of(w, n, w[i + 3])), MLC_COOPMAT_USE_A);
      assert_int_equal(use_of(w, n, type_of(w, n, w[i + 4])), MLC_COOPMAT_USE_B);
      assert_int_equal(type_of(w, n, w[i + 5]), w[i + 1]);
    }
    if (op == MLC_SPV_OP_COOPMAT_LOAD_KHR || op == MLC_SPV_OP_COOPMAT_STORE_KHR) {
      uint32_t l = const_value(w, n, w[i + (op == MLC_SPV_OP_COOPMAT_LOAD_KHR ? 4 : 3)]);
      assert_true(l == MLC_COOPMAT_ROW_MAJOR || l == MLC_COOPMAT_COLUMN_MAJOR);
    }
  }
  assert_true(cap);
}

static void translate_ok(const uint32_t *w, size_t n, uint32_t **out, size_t *out_n) {
  char err[512];
  if (!mlc_spirv_nv_to_khr(w, n, out, out_n, err, sizeof err)) fail_msg("translate: %s", err);
  if (!mlc_spirv_khr_check(*out, *out_n, err, sizeof err)) fail_msg("check: %s", err);
  independent_checks(*out, *out_n);
}

/* ---------------------------------------------------------------- modules by hand */

typedef enum { M_GEMM, M_SHARED_AB, M_NO_MULADD, M_CONST_C } shape;

/* A one-subgroup kernel on 16 x 16 matrices in shared memory (uvec4 lines
 * of 8 quads): M_GEMM loads A row-major and B column-major from one f16
 * type, C through a Function variable initialised with a zero constant,
 * MulAdd, stores C; M_SHARED_AB multiplies A by itself; M_NO_MULADD copies
 * a matrix without multiplying; M_CONST_C takes the zero as C directly. */
static uint32_t *nv_module(shape s, size_t *n, uint32_t ids[4]) {
  sb b;
  sb_init(&b, 1);
  sb_capability(&b, SpvCapabilityCooperativeMatrixNV);
  sb_extension(&b, "SPV_NV_cooperative_matrix");
  uint32_t h = sb_f16_type(&b), scope = sb_u32(&b, SpvScopeSubgroup), sixteen = sb_u32(&b, 16);
  uint32_t ta[4] = {h, scope, sixteen, sixteen}, tc[4] = {b.t_f32, scope, sixteen, sixteen};
  uint32_t mat_h = sb_type(&b, SpvOpTypeCooperativeMatrixNV, 4, ta), mat_f = sb_type(&b, SpvOpTypeCooperativeMatrixNV, 4, tc);
  uint32_t f0 = sb_f32(&b, 0.f), zero = sb_constant(&b, SpvOpConstantComposite, mat_f, 1, &f0);
  uint32_t q4 = sb_uvec4_type(&b), sh = sb_shared(&b, q4, 512), pq = sb_ptr(&b, SpvStorageClassWorkgroup, q4);
  uint32_t gxy[2];
  sb_entry_begin(&b, "main0", 32, 1, gxy);
  uint32_t stride = sb_u32(&b, 8), ptr[3];
  for (uint32_t k = 0; k < 3; k++) {
    uint32_t pa[2] = {sh, sb_u32(&b, 128 * k)};
    ptr[k] = sb_op(&b, SpvOpAccessChain, pq, 2, pa);
  }
  uint32_t la[3] = {ptr[0], stride, sb_bool(&b, false)}, lb[3] = {ptr[1], stride, sb_bool(&b, true)};
  uint32_t a = sb_op(&b, SpvOpCooperativeMatrixLoadNV, mat_h, 3, la);
  uint32_t bm = sb_op(&b, SpvOpCooperativeMatrixLoadNV, mat_h, 3, lb), out = 0;
  if (s == M_NO_MULADD) {
    out = a;
  } else {
    sb_lv acc = sb_local(&b, mat_f, zero);
    uint32_t ma[3] = {a, s == M_SHARED_AB ? a : bm, s == M_CONST_C ? zero : sb_ld(&b, acc)};
    sb_st(&b, acc, sb_op(&b, SpvOpCooperativeMatrixMulAddNV, mat_f, 3, ma));
    out = sb_ld(&b, acc);
  }
  uint32_t st[4] = {ptr[2], out, stride, sb_bool(&b, false)};
  sb_op0(&b, SpvOpCooperativeMatrixStoreNV, 4, st);
  sb_entry_end(&b);
  uint32_t *w = sb_finish(&b, n);
  sb_free(&b);
  if (ids) ids[0] = mat_h, ids[1] = mat_f, ids[2] = stride, ids[3] = zero;
  char err[512];
  if (!mlc_spirv_validate_env(w, *n, true, err, sizeof err)) fail_msg("the NV module is invalid: %s", err);
  return w;
}

/* The exact KHR form of the hand-written GEMM, as the builder wrote it
 * (Function variables, loads and stores) and optimised (OpPhi-free SSA). */
static void test_gemm_exact(void **state) {
  (void)state;
  size_t n, kn;
  uint32_t ids[4], *kw;
  uint32_t *w = nv_module(M_GEMM, &n, ids);
  uint32_t mat_h = ids[0], mat_f = ids[1], stride = ids[2];
  translate_ok(w, n, &kw, &kn);
  /* one f16 type as A (keeps its id) and a new one as B; f32 as accumulator */
  assert_int_equal(count_op(kw, kn, MLC_SPV_OP_TYPE_COOPMAT_KHR), 3);
  size_t ta = nth_op(kw, kn, MLC_SPV_OP_TYPE_COOPMAT_KHR, 0), tb = nth_op(kw, kn, MLC_SPV_OP_TYPE_COOPMAT_KHR, 1);
  size_t tc = nth_op(kw, kn, MLC_SPV_OP_TYPE_COOPMAT_KHR, 2);
  assert_int_equal(kw[ta] >> 16, 7);
  assert_int_equal(kw[ta + 1], mat_h);
  assert_true(kw[tb + 1] >= w[3]); /* a new id past the old bound */
  assert_int_equal(kw[tc + 1], mat_f);
  assert_memory_equal(kw + ta + 2, kw + tb + 2, 4 * sizeof *kw); /* component, scope, rows, columns */
  assert_int_equal(use_of(kw, kn, kw[ta + 1]), MLC_COOPMAT_USE_A);
  assert_int_equal(use_of(kw, kn, kw[tb + 1]), MLC_COOPMAT_USE_B);
  assert_int_equal(use_of(kw, kn, mat_f), MLC_COOPMAT_USE_ACC);
  /* loads: pointer, layout constant, stride */
  size_t la = nth_op(kw, kn, MLC_SPV_OP_COOPMAT_LOAD_KHR, 0), lb = nth_op(kw, kn, MLC_SPV_OP_COOPMAT_LOAD_KHR, 1);
  assert_int_equal(kw[la] >> 16, 6);
  assert_int_equal(kw[la + 1], mat_h);
  assert_int_equal(const_value(kw, kn, kw[la + 4]), MLC_COOPMAT_ROW_MAJOR);
  assert_int_equal(kw[la + 5], stride);
  assert_int_equal(kw[lb + 1], kw[tb + 1]);
  assert_int_equal(const_value(kw, kn, kw[lb + 4]), MLC_COOPMAT_COLUMN_MAJOR);
  assert_int_equal(kw[lb + 5], stride);
  /* MulAdd: A, B, C in place, no operands mask */
  size_t ma = nth_op(kw, kn, MLC_SPV_OP_COOPMAT_MULADD_KHR, 0);
  assert_int_equal(kw[ma] >> 16, 6);
  assert_int_equal(kw[ma + 1], mat_f);
  assert_int_equal(kw[ma + 3], kw[la + 2]);
  assert_int_equal(kw[ma + 4], kw[lb + 2]);
  /* the store: pointer, object, layout, stride */
  size_t st = nth_op(kw, kn, MLC_SPV_OP_COOPMAT_STORE_KHR, 0);
  assert_int_equal(kw[st] >> 16, 5);
  assert_int_equal(type_of(kw, kn, kw[st + 2]), mat_f);
  assert_int_equal(const_value(kw, kn, kw[st + 3]), MLC_COOPMAT_ROW_MAJOR);
  assert_int_equal(kw[st + 4], stride);
  /* the accumulator's variable: a pointer to the accumulator type */
  bool var = false;
  for (size_t i = 5; i < kn; i += kw[i] >> 16)
    if ((kw[i] & 0xffff) == SpvOpTypePointer && kw[i + 2] == SpvStorageClassFunction && kw[i + 3] == mat_f) var = true;
  assert_true(var);
  /* capability and extension, the bound past every new id */
  assert_int_equal(count_op(kw, kn, SpvOpExtension), 1);
  size_t e = nth_op(kw, kn, SpvOpExtension, 0);
  assert_int_equal(kw[e] >> 16, 8);
  assert_string_equal((const char *)(kw + e + 1), "SPV_KHR_cooperative_matrix");
  assert_true(kw[3] > w[3]);
  free(kw);
  /* the same after SPIRV-Tools' performance passes */
  uint32_t *ow;
  size_t on;
  char err[512];
  if (!mlc_spirv_optimize(w, n, true, &ow, &on, err, sizeof err)) fail_msg("optimize: %s", err);
  translate_ok(ow, on, &kw, &kn);
  assert_int_equal(count_op(kw, kn, MLC_SPV_OP_TYPE_COOPMAT_KHR), 3);
  assert_int_equal(count_op(kw, kn, MLC_SPV_OP_COOPMAT_MULADD_KHR), 1);
  free(kw), free(ow), free(w);
}

/* A constant used in place (MulAdd's C) takes the accumulator's use. */
static void test_constant_operand(void **state) {
  (void)state;
  size_t n, kn;
  uint32_t ids[4], *kw, *w = nv_module(M_CONST_C, &n, ids);
  translate_ok(w, n, &kw, &kn);
  size_t ma = nth_op(kw, kn, MLC_SPV_OP_COOPMAT_MULADD_KHR, 0);
  assert_int_equal(kw[ma + 5], ids[3]);
  assert_int_equal(type_of(kw, kn, ids[3]), ids[1]);
  free(kw), free(w);
}

/* What cannot be inferred is an error that says why; nothing is written. */
static void test_errors(void **state) {
  (void)state;
  size_t n, kn = 7;
  uint32_t *kw = (uint32_t *)&kn, *w = nv_module(M_SHARED_AB, &n, NULL);
  char err[512] = "";
  assert_false(mlc_spirv_nv_to_khr(w, n, &kw, &kn, err, sizeof err));
  assert_non_null(strstr(err, "used both as A and as B"));
  assert_null(kw);
  assert_int_equal(kn, 0);
  free(w);
  w = nv_module(M_NO_MULADD, &n, NULL);
  assert_false(mlc_spirv_nv_to_khr(w, n, &kw, &kn, err, sizeof err));
  assert_non_null(strstr(err, "cannot be inferred"));
  free(w);
  uint32_t junk[6] = {SpvMagicNumber, 0x10500, 0, 10, 0, 0};
  assert_false(mlc_spirv_nv_to_khr(junk, 6, &kw, &kn, err, sizeof err));
  assert_false(mlc_spirv_khr_check(junk, 6, err, sizeof err));
}

/* The checker refuses what a broken translation would produce: an NV
 * opcode left, a B operand whose type says A, an id past the bound. */
static void test_checker_refuses(void **state) {
  (void)state;
  size_t n, kn;
  uint32_t *kw, *w = nv_module(M_GEMM, &n, NULL);
  char err[512];
  translate_ok(w, n, &kw, &kn);
  size_t ma = nth_op(kw, kn, MLC_SPV_OP_COOPMAT_MULADD_KHR, 0);
  uint32_t b = kw[ma + 4];
  kw[ma + 4] = kw[ma + 3];
  assert_false(mlc_spirv_khr_check(kw, kn, err, sizeof err));
  assert_non_null(strstr(err, "MatrixBKHR"));
  kw[ma + 4] = b;
  kw[ma] = (kw[ma] & 0xffff0000u) | SpvOpCooperativeMatrixMulAddNV;
  assert_false(mlc_spirv_khr_check(kw, kn, err, sizeof err));
  kw[ma] = (kw[ma] & 0xffff0000u) | MLC_SPV_OP_COOPMAT_MULADD_KHR;
  kw[3] = kw[ma + 2];
  assert_false(mlc_spirv_khr_check(kw, kn, err, sizeof err));
  free(kw), free(w);
}

/* ---------------------------------------------------------------- emitted kernels */

typedef struct {
  mlc_arena a;
  mlc_program p;
  mlc_func *f;
} prog;

static prog *prog_new(bool khr) {
  prog *g = calloc(1, sizeof *g);
  mlc_arena_init(&g->a);
  mlc_program_init(&g->p, &g->a);
  g->p.opts.spirv_coopmat_nv = !khr;
  g->f = mlc_program_add_func(&g->p, "forward");
  return g;
}

static uint32_t input(prog *g, int dt, int rank, const int64_t *dims) {
  mlc_attrs a = {.name = "x"};
  uint32_t i = mlc_func_add(&g->p, g->f, MLC_OP_INPUT, NULL, 0, &a, (mlc_loc){0, 0, 0}, "");
  mlc_type *t = &g->f->nodes[i].type;
  t->dtype = (uint8_t)dt, t->rank = (uint8_t)rank;
  for (int k = 0; k < rank; k++) t->dim[k] = dims[k];
  return i;
}

static uint32_t node(prog *g, mlc_op op, const uint32_t *in, uint32_t nin, const mlc_attrs *a) {
  uint32_t i = mlc_func_add(&g->p, g->f, op, in, nin, a, (mlc_loc){0, 0, 0}, "");
  mlc_node *nd = &g->f->nodes[i];
  char err[256];
  mlc_type t = nd->type;
  if (!mlc_infer_type(&g->p, g->f, nd, &t, err, sizeof err)) fail_msg("%s: %s", mlc_ops[op].name, err);
  nd->type = t;
  return i;
}

/* f16 GEMMs (matmul with edges, matmul_tn, a fused linear + bias + SiLU),
 * emitted as NV and as KHR: every cooperative-matrix kernel of the KHR
 * build is the NV one translated, its fallback is the NV one, word for
 * word, and that one's fallback the NV build's portable kernel. */
static void test_emitted_gemms(void **state) {
  (void)state;
  mlc_spirv_module m[2];
  prog *g[2];
  uint32_t at[3];
  for (int khr = 0; khr < 2; khr++) {
    g[khr] = prog_new(khr);
    int64_t da[2] = {40, 48}, db[2] = {48, 24}, dt[2] = {40, 24}, dx[2] = {40, 48}, dw[2] = {24, 48}, dbias[1] = {24};
    uint32_t in[2] = {input(g[khr], MLC_DT_F16, 2, da), input(g[khr], MLC_DT_F16, 2, db)};
    at[0] = node(g[khr], MLC_OP_MATMUL, in, 2, NULL);
    uint32_t in2[2] = {input(g[khr], MLC_DT_F16, 2, da), input(g[khr], MLC_DT_F16, 2, dt)};
    at[1] = node(g[khr], MLC_OP_MATMUL_TN, in2, 2, NULL);
    uint32_t fin[3] = {input(g[khr], MLC_DT_F16, 2, dx), input(g[khr], MLC_DT_F16, 2, dw), input(g[khr], MLC_DT_F16, 1, dbias)};
    mlc_attrs fa = {.name = "linear($0, $1); add(#0, $2); silu(#1)"};
    at[2] = node(g[khr], MLC_OP_FUSED, fin, 3, &fa);
    mlc_spirv_options o = {.coopmat = true, .optimize = true};
    mlc_status st = mlc_spirv_emit(&g[khr]->p, &o, &m[khr]);
    if (st) fail_msg("emit: %s", mlc_status_message(st));
  }
  for (int j = 0; j < 3; j++) {
    const mlc_vk_kernel *nv = &m[0].kernels[m[0].kernel_of[0][at[j]]], *kh = &m[1].kernels[m[1].kernel_of[0][at[j]]];
    assert_true(nv->coopmat && kh->coopmat);
    assert_int_equal(count_op(nv->words, nv->nwords, SpvOpCooperativeMatrixMulAddNV) > 0, 1);
    uint32_t *kw;
    size_t kn;
    translate_ok(nv->words, nv->nwords, &kw, &kn);
    assert_int_equal(kn, kh->nwords);
    assert_memory_equal(kw, kh->words, kn * sizeof *kw);
    assert_int_equal(count_op(kw, kn, MLC_SPV_OP_COOPMAT_MULADD_KHR), count_op(nv->words, nv->nwords, SpvOpCooperativeMatrixMulAddNV));
    assert_int_equal(count_op(kw, kn, MLC_SPV_OP_TYPE_COOPMAT_KHR), 3);
    free(kw);
    const mlc_vk_kernel *kn2 = &m[1].kernels[kh->fallback];
    assert_true(kn2->coopmat);
    assert_int_equal(kn2->nwords, nv->nwords);
    assert_memory_equal(kn2->words, nv->words, nv->nwords * sizeof *nv->words);
    const mlc_vk_kernel *fa = &m[0].kernels[nv->fallback], *fb = &m[1].kernels[kn2->fallback];
    assert_false(fb->coopmat);
    assert_int_equal(fa->nwords, fb->nwords);
    assert_memory_equal(fa->words, fb->words, fa->nwords * sizeof *fa->words);
  }
  for (int khr = 0; khr < 2; khr++) mlc_arena_free(&g[khr]->a), free(g[khr]);
}

/* A bf16 GEMM: in the NV build the portable kernel alone; with khr a
 * cooperative-matrix kernel whose A and B are bf16 (SPV_KHR_bfloat16: a new
 * OpTypeFloat 16 BFloat16KHR, its two capabilities and its extension), the
 * accumulator f32, and which the checker refuses without the capabilities. */
static void test_bf16_gemm(void **state) {
  (void)state;
  for (int khr = 0; khr < 2; khr++) {
    prog *g = prog_new(khr);
    int64_t da[2] = {40, 48}, db[2] = {48, 24};
    uint32_t in[2] = {input(g, MLC_DT_BF16, 2, da), input(g, MLC_DT_BF16, 2, db)};
    uint32_t at = node(g, MLC_OP_MATMUL, in, 2, NULL);
    mlc_spirv_module m;
    mlc_spirv_options o = {.coopmat = true, .optimize = true};
    mlc_status st = mlc_spirv_emit(&g->p, &o, &m);
    if (st) fail_msg("emit: %s", mlc_status_message(st));
    const mlc_vk_kernel *k = &m.kernels[m.kernel_of[0][at]];
    assert_int_equal(k->coopmat, khr);
    if (khr) {
      const uint32_t *w = k->words;
      size_t n = k->nwords, bf = 0;
      independent_checks(w, n);
      int caps = 0, ext = 0;
      for (size_t i = 5; i < n; i += w[i] >> 16) {
        uint32_t op = w[i] & 0xffff, len = w[i] >> 16;
        if (op == SpvOpCapability) caps += w[i + 1] == MLC_SPV_CAP_BFLOAT16_TYPE || w[i + 1] == MLC_SPV_CAP_BFLOAT16_COOPMAT;
        if (op == SpvOpExtension) ext += !strcmp((const char *)(w + i + 1), "SPV_KHR_bfloat16");
        if (op == SpvOpTypeFloat && len == 4) {
          assert_int_equal(w[i + 2], 16);
          assert_int_equal(w[i + 3], MLC_SPV_FP_BFLOAT16);
          bf = w[i + 1];
        }
      }
      assert_int_equal(caps, 2);
      assert_int_equal(ext, 1);
      assert_true(bf);
      size_t mad = nth_op(w, n, MLC_SPV_OP_COOPMAT_MULADD_KHR, 0);
      for (int j = 3; j <= 5; j++) {
        size_t t = def_of(w, n, type_of(w, n, w[mad + j]));
        uint32_t comp = w[t + 2];
        if (j < 5) assert_int_equal(comp, bf);
        else assert_int_equal(w[def_of(w, n, comp)] & 0xffff, SpvOpTypeFloat), assert_int_equal(w[def_of(w, n, comp) + 2], 32);
      }
      char err[512];
      assert_true(mlc_spirv_khr_check(w, n, err, sizeof err));
      uint32_t *cut = malloc(n * sizeof *cut); /* the BFloat16CooperativeMatrixKHR capability made Shader again */
      memcpy(cut, w, n * sizeof *cut);
      for (size_t i = 5; i < n; i += cut[i] >> 16)
        if ((cut[i] & 0xffff) == SpvOpCapability && cut[i + 1] == MLC_SPV_CAP_BFLOAT16_COOPMAT) cut[i + 1] = SpvCapabilityShader;
      assert_false(mlc_spirv_khr_check(cut, n, err, sizeof err));
      assert_non_null(strstr(err, "without SPV_KHR_bfloat16's capabilities and extension"));
      free(cut);
      assert_false(m.kernels[k->fallback].coopmat);
    }
    mlc_arena_free(&g->a);
    free(g);
  }
}

/* ---------------------------------------------------------------- files */

static int check_files(int argc, char **argv) {
  int khr = 0, plain = 0;
  for (int i = 0; i < argc; i++) {
    size_t bytes = 0;
    uint32_t *w = mlc_read_file(argv[i], &bytes);
    if (!w) return fprintf(stderr, "cannot read %s\n", argv[i]), 1;
    size_t n = bytes / 4;
    bool coop = false, nv = false;
    for (size_t k = 5; k + 1 < n && (w[k] & 0xffff) == SpvOpCapability; k += w[k] >> 16) {
      coop |= w[k + 1] == MLC_SPV_CAP_COOPMAT_KHR;
      nv |= w[k + 1] == SpvCapabilityCooperativeMatrixNV;
    }
    char err[512];
    if (nv) return fprintf(stderr, "%s: still NV\n", argv[i]), free(w), 1;
    if (coop) {
      if (!mlc_spirv_khr_check(w, n, err, sizeof err)) return fprintf(stderr, "%s: %s\n", argv[i], err), free(w), 1;
      independent_checks(w, n); /* outside a cmocka test a failed assert exits with an error */
      khr++;
    } else {
      plain++;
    }
    free(w);
  }
  printf("%d KHR cooperative-matrix modules checked, %d without cooperative matrices\n", khr, plain);
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "check")) return check_files(argc - 2, argv + 2);
  const struct CMUnitTest unit[] = {
      cmocka_unit_test(test_gemm_exact),      cmocka_unit_test(test_constant_operand),
      cmocka_unit_test(test_errors),          cmocka_unit_test(test_checker_refuses),
      cmocka_unit_test(test_emitted_gemms),   cmocka_unit_test(test_bf16_gemm),
  };
  return cmocka_run_group_tests_name("spirv.khr", unit, NULL, NULL);
}
