/* Tests of the runtime's cooperative-matrix check (runtime/vulkan/coopmat.h):
 * which multiplies a module does, read from its words, and which kernel the
 * runtime builds on a device with a given list of properties.  No Vulkan:
 * the device lists are synthetic, written as the vendors' drivers report
 * them (issue 23: 16x16x16 f16 on RDNA3, 8x16x16 on Arc, 16x16x16 and
 * 16x8x16 on NVIDIA, bf16 on the H200's KHR list).
 *
 *   test_vk_coopmat unit       the scanner on emitted GEMMs (NV and KHR) and
 *                              on modules written here (bf16, 16x8x16, the
 *                              errors), the list notation, the choice along
 *                              fallback chains and its messages, allocation
 *                              failures;
 *   test_vk_coopmat scan F...  the .spv files F (what `mlc compile` wrote):
 *                              every module with cooperative matrices does
 *                              one multiply, 16x16x16 f16 x f16 + f32 -> f32
 *                              (or bf16 x bf16, KHR only) at subgroup scope,
 *                              which is what the code generator emits
 *                              (tests/spirv/khr_models.sh); prints how many.
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
#include "codegen/spirv/khr.h"
#include "codegen/spirv/spirv.h"
#include "runtime/vulkan/coopmat.h"
#include "runtime/profile.h" /* mlc_read_file */

enum { F16 = MLC_VK_COMPONENT_F16, F32 = MLC_VK_COMPONENT_F32, BF16 = MLC_VK_COMPONENT_BF16, S8 = 3, S32 = 5, SUB = 3 };

#define PROP(m, n, k, a, c) {MLC_VK_STYPE_COOPMAT_PROPERTIES, NULL, m, n, k, a, a, c, c, 0, SUB}
/* as NVIDIA's driver lists them on Hopper (KHR), bf16 included */
static const mlc_vk_coopmat_properties h200[] = {
    PROP(16, 16, 16, F16, F16), PROP(16, 16, 16, F16, F32), PROP(16, 8, 16, F16, F16), PROP(16, 8, 16, F16, F32),
    PROP(16, 8, 8, F16, F16),   PROP(16, 8, 8, F16, F32),   PROP(16, 16, 16, BF16, F32), PROP(16, 8, 32, S8, S32),
};
static const mlc_vk_coopmat_properties rdna3[] = {PROP(16, 16, 16, F16, F32), PROP(16, 16, 16, F16, F16), PROP(16, 16, 16, BF16, F32)};
static const mlc_vk_coopmat_properties arc[] = {PROP(8, 16, 16, F16, F32), PROP(8, 16, 16, BF16, F32)};

/* ---------------------------------------------------------------- modules */

typedef struct {
  mlc_arena a;
  mlc_program p;
  mlc_func *f;
} prog;

static uint32_t input(prog *g, int dt, int64_t r, int64_t c) {
  mlc_attrs a = {.name = "x"};
  uint32_t i = mlc_func_add(&g->p, g->f, MLC_OP_INPUT, NULL, 0, &a, (mlc_loc){0, 0, 0}, "");
  mlc_type *t = &g->f->nodes[i].type;
  t->dtype = (uint8_t)dt, t->rank = 2, t->dim[0] = r, t->dim[1] = c;
  return i;
}

/* An f16 matmul [40,48] @ [48,24] emitted with cooperative matrices (NV or
 * KHR): out->kernels[*at] is the cooperative-matrix kernel. */
static prog *emit_gemm(bool khr, mlc_spirv_module *out, uint32_t *at) {
  prog *g = calloc(1, sizeof *g);
  mlc_arena_init(&g->a);
  mlc_program_init(&g->p, &g->a);
  g->p.opts.spirv_coopmat_nv = !khr;
  g->f = mlc_program_add_func(&g->p, "forward");
  uint32_t in[2] = {input(g, MLC_DT_F16, 40, 48), input(g, MLC_DT_F16, 48, 24)};
  uint32_t i = mlc_func_add(&g->p, g->f, MLC_OP_MATMUL, in, 2, NULL, (mlc_loc){0, 0, 0}, "");
  char err[256];
  mlc_type t = g->f->nodes[i].type;
  if (!mlc_infer_type(&g->p, g->f, &g->f->nodes[i], &t, err, sizeof err)) fail_msg("%s", err);
  g->f->nodes[i].type = t;
  mlc_spirv_options o = {.coopmat = true, .optimize = true};
  mlc_status st = mlc_spirv_emit(&g->p, &o, out);
  if (st) fail_msg("emit: %s", mlc_status_message(st));
  *at = out->kernel_of[0][i];
  return g;
}

static void prog_free(prog *g) {
  mlc_arena_free(&g->a);
  free(g);
}

/* A KHR module by hand, enough for the scanner (not valid SPIR-V: no
 * function): A m x k, B k x n, C and D m x n, of component `ab` (bf16 by
 * the FP encoding of SPV_KHR_bfloat16) and f32; `rows_spec`: A's rows a
 * specialisation constant; `bad_operand`: B an f32 value, not a matrix. */
static size_t khr_module(uint32_t *w, uint32_t m, uint32_t n, uint32_t k, bool bf16, bool rows_spec, bool bad_operand) {
  size_t at = 5;
#define INS(...)                                                              \
  do {                                                                        \
    uint32_t ins_[] = {__VA_ARGS__};                                          \
    uint32_t len_ = (uint32_t)(sizeof ins_ / sizeof *ins_);                   \
    ins_[0] |= len_ << 16;                                                    \
    memcpy(w + at, ins_, sizeof ins_);                                        \
    at += len_;                                                               \
  } while (0)
  enum { U32 = 1, H, F, C3, CM, CN, CK, U0, U1, U2, TA, TB, TC, VA, VB, VC, VD, BOUND };
  INS(SpvOpCapability, SpvCapabilityShader);
  INS(SpvOpCapability, MLC_SPV_CAP_COOPMAT_KHR);
  INS(SpvOpTypeInt, U32, 32, 0);
  if (bf16) INS(SpvOpTypeFloat, H, 16, 0);
  else INS(SpvOpTypeFloat, H, 16);
  INS(SpvOpTypeFloat, F, 32);
  INS(SpvOpConstant, U32, C3, SpvScopeSubgroup);
  INS(rows_spec ? SpvOpSpecConstant : SpvOpConstant, U32, CM, m);
  INS(SpvOpConstant, U32, CN, n);
  INS(SpvOpConstant, U32, CK, k);
  INS(SpvOpConstant, U32, U0, 0);
  INS(SpvOpConstant, U32, U1, 1);
  INS(SpvOpConstant, U32, U2, 2);
  INS(MLC_SPV_OP_TYPE_COOPMAT_KHR, TA, H, C3, CM, CK, U0);
  INS(MLC_SPV_OP_TYPE_COOPMAT_KHR, TB, H, C3, CK, CN, U1);
  INS(MLC_SPV_OP_TYPE_COOPMAT_KHR, TC, F, C3, CM, CN, U2);
  INS(SpvOpUndef, TA, VA);
  INS(SpvOpUndef, bad_operand ? F : TB, VB);
  INS(SpvOpUndef, TC, VC);
  INS(MLC_SPV_OP_COOPMAT_MULADD_KHR, TC, VD, VA, VB, VC);
  INS(MLC_SPV_OP_COOPMAT_MULADD_KHR, TC, VD + 0, VA, VB, VC); /* the same multiply twice: one use */
#undef INS
  w[0] = 0x07230203, w[1] = 0x10600, w[2] = 0, w[3] = BOUND, w[4] = 0;
  return at;
}

static mlc_vk_kernel kernel(const char *symbol, const uint32_t *w, size_t n, bool coopmat, uint32_t fallback) {
  return (mlc_vk_kernel){.symbol = symbol, .words = w, .nwords = n, .coopmat = coopmat, .fallback = fallback};
}

static void use_is(const mlc_vk_coopmat_use *u, uint32_t m, uint32_t n, uint32_t k, int32_t ab, int32_t c) {
  assert_int_equal(u->m, m);
  assert_int_equal(u->n, n);
  assert_int_equal(u->k, k);
  assert_int_equal(u->a, ab);
  assert_int_equal(u->b, ab);
  assert_int_equal(u->c, c);
  assert_int_equal(u->r, c);
  assert_int_equal(u->scope, SUB);
}

/* ---------------------------------------------------------------- tests */

/* The GEMM the code generator emits, in both forms: one multiply,
 * 16x16x16 f16 x f16 + f32 -> f32 at subgroup scope; its fallback none. */
static void test_scan_emitted(void **state) {
  (void)state;
  for (int khr = 0; khr < 2; khr++) {
    mlc_spirv_module m;
    uint32_t at;
    prog *g = emit_gemm(khr, &m, &at);
    const mlc_vk_kernel *k = &m.kernels[at];
    assert_true(k->coopmat);
    mlc_vk_coopmat_use u[4];
    uint32_t nu;
    mlc_vk_coopmat_kind kind;
    mlc_status st = mlc_vk_coopmat_scan(mlc_allocator_default(), k->words, k->nwords, &kind, u, 4, &nu);
    assert_null(st);
    assert_int_equal(kind, khr ? MLC_VK_COOPMAT_KHR : MLC_VK_COOPMAT_NV);
    assert_int_equal(nu, 1);
    use_is(&u[0], 16, 16, 16, F16, F32);
    const mlc_vk_kernel *fb = &m.kernels[k->fallback];
    if (khr) { /* the KHR kernel's NV form, then the portable kernel */
      assert_null(mlc_vk_coopmat_scan(mlc_allocator_default(), fb->words, fb->nwords, &kind, u, 4, &nu));
      assert_int_equal(kind, MLC_VK_COOPMAT_NV);
      use_is(&u[0], 16, 16, 16, F16, F32);
      fb = &m.kernels[fb->fallback];
    }
    assert_false(fb->coopmat);
    assert_null(mlc_vk_coopmat_scan(mlc_allocator_default(), fb->words, fb->nwords, &kind, u, 4, &nu));
    assert_int_equal(nu, 0);
    prog_free(g);
  }
}

static void test_scan_by_hand(void **state) {
  (void)state;
  uint32_t w[256];
  mlc_vk_coopmat_use u[4];
  uint32_t nu;
  mlc_vk_coopmat_kind kind;
  size_t n = khr_module(w, 16, 8, 16, true, false, false);
  assert_null(mlc_vk_coopmat_scan(mlc_allocator_default(), w, n, &kind, u, 4, &nu));
  assert_int_equal(kind, MLC_VK_COOPMAT_KHR);
  assert_int_equal(nu, 1);
  use_is(&u[0], 16, 8, 16, BF16, F32);
  char name[128];
  mlc_vk_coopmat_use_name(&u[0], name, sizeof name);
  assert_string_equal(name, "16x8x16 bf16 x bf16 + f32 -> f32");
  assert_true(mlc_vk_coopmat_offered(&u[0], h200, 8) == false); /* the H200 lists bf16 at 16x16x16 only */
  n = khr_module(w, 16, 16, 16, true, false, false);
  assert_null(mlc_vk_coopmat_scan(mlc_allocator_default(), w, n, &kind, u, 4, &nu));
  assert_true(mlc_vk_coopmat_offered(&u[0], h200, 8));
  assert_true(mlc_vk_coopmat_offered(&u[0], rdna3, 3));
  assert_false(mlc_vk_coopmat_offered(&u[0], arc, 2));

  struct {
    size_t n;
    const char *msg;
  } bad[] = {
      {khr_module(w, 16, 16, 16, false, true, false), "cooperative-matrix type at word 47: its row count is a specialisation constant"},
      {0, "cooperative-matrix multiply at word 77: an operand of no cooperative-matrix type"},
      {0, "malformed SPIR-V: the instruction at word 83 runs past the end"},
      {0, "not a SPIR-V module"},
  };
  for (int i = 0; i < 4; i++) {
    if (i == 1) bad[i].n = khr_module(w, 16, 16, 16, false, false, true);
    if (i == 2) bad[i].n = khr_module(w, 16, 16, 16, false, false, false) - 3;
    if (i == 3) bad[i].n = 4;
    mlc_status st = mlc_vk_coopmat_scan(mlc_allocator_default(), w, bad[i].n, &kind, u, 4, &nu);
    assert_non_null(st);
    assert_int_equal(mlc_status_code(st), MLC_INVALID_ARGUMENT);
    if (!strstr(mlc_status_message(st), bad[i].msg)) fail_msg("case %d: %s", i, mlc_status_message(st));
    assert_int_equal(nu, 0);
    mlc_status_free(st);
  }
}

static void test_list(void **state) {
  (void)state;
  char buf[512];
  mlc_vk_coopmat_list(rdna3, 3, buf, sizeof buf);
  assert_string_equal(buf, "16x16x16 f16->f32, 16x16x16 f16->f16, 16x16x16 bf16->f32");
  mlc_vk_coopmat_properties odd[] = {{MLC_VK_STYPE_COOPMAT_PROPERTIES, NULL, 16, 16, 32, S8, 7, S32, S32, 0, 2}};
  mlc_vk_coopmat_list(odd, 1, buf, sizeof buf);
  assert_string_equal(buf, "16x16x32 s8 x u8 + s32 -> s32, workgroup scope");
  mlc_vk_coopmat_list(NULL, 0, buf, sizeof buf);
  assert_string_equal(buf, "none");
  mlc_vk_coopmat_list(h200, 8, buf, 40); /* cut, never past the end */
  assert_int_equal(strlen(buf), 39);
}

static mlc_status pick(const mlc_vk_coopmat_caps *c, const mlc_vk_kernel *k, uint32_t nk, uint32_t i, uint32_t *out) {
  return mlc_vk_coopmat_pick(mlc_allocator_default(), c, k, nk, i, out);
}

static void expect_error(mlc_status st, mlc_status_code_t code, const char *msg) {
  assert_non_null(st);
  assert_int_equal(mlc_status_code(st), code);
  assert_string_equal(mlc_status_message(st), msg);
  mlc_status_free(st);
}

/* The emitted f16 GEMM (KHR and NV) against the vendors' lists. */
static void test_pick_emitted(void **state) {
  (void)state;
  for (int khr = 0; khr < 2; khr++) {
    mlc_spirv_module m;
    uint32_t at, got;
    prog *g = emit_gemm(khr, &m, &at);
    int kind = khr ? MLC_VK_COOPMAT_KHR : MLC_VK_COOPMAT_NV;
    mlc_vk_coopmat_caps c = {.device = "dev"};
    c.enabled[kind] = true;
    uint32_t port = at; /* the portable kernel: the end of the chain (KHR, NV, portable; or NV, portable) */
    while (m.kernels[port].coopmat) port = m.kernels[port].fallback;
    const struct {
      const mlc_vk_coopmat_properties *p;
      uint32_t n;
      bool runs;
    } devs[] = {{h200, 8, true}, {rdna3, 3, true}, {arc, 2, false}, {NULL, 0, false}};
    for (int d = 0; d < 4; d++) {
      c.props[kind] = devs[d].p, c.nprops[kind] = devs[d].n;
      assert_null(pick(&c, m.kernels, m.nkernels, at, &got));
      assert_int_equal(got, devs[d].runs ? at : port);
    }
    /* the list, but not the extension: the other form where it has one (KHR's NV form), else the portable kernel */
    c.props[kind] = h200, c.nprops[kind] = 8, c.enabled[kind] = false;
    c.enabled[!kind] = true, c.props[!kind] = h200, c.nprops[!kind] = 8;
    assert_null(pick(&c, m.kernels, m.nkernels, at, &got));
    assert_int_equal(got, m.kernels[at].fallback);
    assert_int_equal(m.kernels[got].coopmat, khr);
    /* without its fallback: the message */
    mlc_vk_kernel alone = m.kernels[at];
    alone.symbol = "mlc_matmul_1";
    alone.fallback = MLC_VK_NO_FALLBACK;
    c.enabled[kind] = true, c.props[kind] = arc, c.nprops[kind] = 2, c.device = "Intel(R) Arc(tm) A770 Graphics";
    expect_error(pick(&c, &alone, 1, 0, &got), MLC_UNIMPLEMENTED,
                 khr ? "Vulkan kernel mlc_matmul_1 uses 16x16x16 f16 x f16 + f32 -> f32 cooperative matrices (KHR), which "
                       "Intel(R) Arc(tm) A770 Graphics does not offer (it offers: 8x16x16 f16->f32, 8x16x16 bf16->f32), and "
                       "has no fallback"
                     : "Vulkan kernel mlc_matmul_1 uses 16x16x16 f16 x f16 + f32 -> f32 cooperative matrices (NV), which "
                       "Intel(R) Arc(tm) A770 Graphics does not offer (it offers: 8x16x16 f16->f32, 8x16x16 bf16->f32), and "
                       "has no fallback");
    c.enabled[kind] = false;
    expect_error(pick(&c, &alone, 1, 0, &got), MLC_UNIMPLEMENTED,
                 khr ? "Vulkan kernel mlc_matmul_1 uses cooperative matrices through VK_KHR_cooperative_matrix, which "
                       "Intel(R) Arc(tm) A770 Graphics does not have, and has no fallback"
                     : "Vulkan kernel mlc_matmul_1 uses cooperative matrices through VK_NV_cooperative_matrix, which "
                       "Intel(R) Arc(tm) A770 Graphics does not have, and has no fallback");
    prog_free(g);
  }
}

/* One module per shape: a chain of cooperative-matrix kernels ending in a
 * portable one; the first the device runs is built. */
static void test_pick_chain(void **state) {
  (void)state;
  uint32_t w0[256], w1[256], w2[256], plain[5] = {0x07230203, 0x10300, 0, 1, 0};
  size_t n0 = khr_module(w0, 16, 16, 16, true, false, false);  /* bf16 16x16x16 */
  size_t n1 = khr_module(w1, 8, 16, 16, false, false, false);  /* f16 8x16x16 (Arc's) */
  size_t n2 = khr_module(w2, 16, 16, 16, false, false, false); /* f16 16x16x16 */
  mlc_vk_kernel ks[4] = {kernel("k_bf16", w0, n0, true, 1), kernel("k_8x16", w1, n1, true, 2), kernel("k_16", w2, n2, true, 3),
                         kernel("k_plain", plain, 5, false, MLC_VK_NO_FALLBACK)};
  mlc_vk_coopmat_caps c = {.device = "dev", .enabled = {true, false}};
  const struct {
    const mlc_vk_coopmat_properties *p;
    uint32_t n, want;
  } cases[] = {{h200, 8, 0}, {arc + 0, 1, 1}, {h200, 6, 2}, {NULL, 0, 3}};
  for (int i = 0; i < 4; i++) {
    c.props[0] = cases[i].p, c.nprops[0] = cases[i].n;
    uint32_t got = 99;
    assert_null(pick(&c, ks, 4, 0, &got));
    assert_int_equal(got, cases[i].want);
  }
  /* the chain's end is a cooperative-matrix kernel the device lacks */
  c.props[0] = NULL, c.nprops[0] = 0;
  uint32_t got;
  expect_error(pick(&c, ks, 3, 0, &got), MLC_UNIMPLEMENTED,
               "Vulkan kernel k_bf16: the last of its fallbacks, k_16, uses 16x16x16 f16 x f16 + f32 -> f32 cooperative "
               "matrices (KHR), which dev does not offer (it offers: none), and has none");
  ks[1].fallback = 0; /* k_bf16 -> k_8x16 -> k_bf16 */
  expect_error(pick(&c, ks, 4, 0, &got), MLC_INVALID_ARGUMENT, "Vulkan kernel k_bf16: its fallbacks form a cycle");
  /* a module the scanner cannot read is an error, not a guess */
  ks[1].fallback = 2;
  ks[0].nwords = 4;
  expect_error(pick(&c, ks, 4, 0, &got), MLC_INVALID_ARGUMENT, "Vulkan kernel k_bf16: not a SPIR-V module");
}

/* Every allocation the check makes can fail: out of memory, nothing leaks. */
static void test_alloc_failure(void **state) {
  (void)state;
  uint32_t w[256];
  size_t n = khr_module(w, 16, 16, 16, false, false, false);
  mlc_vk_kernel k = kernel("k", w, n, true, MLC_VK_NO_FALLBACK);
  mlc_vk_coopmat_caps c = {.device = "dev", .enabled = {true, false}, .props = {h200, NULL}, .nprops = {8, 0}};
  for (size_t at = 1;; at++) {
    mlc_failing_allocator fa;
    mlc_allocator a = mlc_allocator_failing(&fa, mlc_allocator_default(), at);
    uint32_t got;
    mlc_status st = mlc_vk_coopmat_pick(a, &c, &k, 1, 0, &got);
    assert_int_equal(fa.live, 0);
    if (!fa.failed) {
      assert_null(st);
      break;
    }
    assert_int_equal(mlc_status_code(st), MLC_OUT_OF_MEMORY);
    mlc_status_free(st);
  }
}

/* ---------------------------------------------------------------- files */

static int scan_files(int argc, char **argv) {
  int f16 = 0, bf16 = 0;
  for (int i = 0; i < argc; i++) {
    size_t bytes = 0;
    uint32_t *w = mlc_read_file(argv[i], &bytes);
    if (!w) return fprintf(stderr, "cannot read %s\n", argv[i]), 1;
    size_t n = bytes / 4;
    mlc_vk_coopmat_use u[8];
    uint32_t nu;
    mlc_vk_coopmat_kind kind;
    mlc_status st = mlc_vk_coopmat_scan(mlc_allocator_default(), w, n, &kind, u, 8, &nu);
    free(w);
    if (st) return fprintf(stderr, "%s: %s\n", argv[i], mlc_status_message(st)), mlc_status_free(st), 1;
    for (uint32_t j = 0; j < nu; j++) {
      char name[128];
      mlc_vk_coopmat_use_name(&u[j], name, sizeof name);
      bool h = !strcmp(name, "16x16x16 f16 x f16 + f32 -> f32"), bh = !strcmp(name, "16x16x16 bf16 x bf16 + f32 -> f32");
      if (nu != 1 || !(h || (bh && kind == MLC_VK_COOPMAT_KHR)))
        return fprintf(stderr, "%s: multiplies %s (%u kinds)\n", argv[i], name, nu), 1;
      f16 += h, bf16 += bh;
    }
  }
  printf("of %d modules, %d multiply 16x16x16 f16 x f16 + f32 -> f32, %d bf16 x bf16 + f32 -> f32, the others none\n",
         argc, f16, bf16);
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "scan")) return scan_files(argc - 2, argv + 2);
  const struct CMUnitTest unit[] = {
      cmocka_unit_test(test_scan_emitted), cmocka_unit_test(test_scan_by_hand), cmocka_unit_test(test_list),
      cmocka_unit_test(test_pick_emitted), cmocka_unit_test(test_pick_chain),   cmocka_unit_test(test_alloc_failure),
  };
  return cmocka_run_group_tests_name("spirv.coopmat", unit, NULL, NULL);
}
