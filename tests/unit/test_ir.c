/* Unit tests of the IR: dtypes, types, the arena, shape rules, the verifier
 * and the structural hash.  Models are built through the real frontend from
 * source strings, so these also exercise lowering. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "frontend/frontend.h"
#include "passes/passes.h"
#include "tests/unit/compiled.h"

static bool compile(compiled *c, const char *src, const mlc_define *defs, uint32_t ndefs) {
  bool ok = compiled_frontend(c, src, defs, ndefs);
  fflush(c->errf);
  return ok;
}

static void test_dtypes(void **state) {
  (void)state;
  assert_int_equal(mlc_dtype_size(MLC_DT_BF16), 2);
  assert_int_equal(mlc_dtype_size(MLC_DT_F32), 4);
  assert_int_equal(mlc_dtype_from_name("bf16", 4), MLC_DT_BF16);
  assert_int_equal(mlc_dtype_from_name("bf1", 3), MLC_DT_INVALID);
  assert_true(mlc_dtype_is_float(MLC_DT_F16));
  assert_false(mlc_dtype_is_float(MLC_DT_I32));
  mlc_type t = {.dtype = MLC_DT_F32, .rank = 3, .dim = {8, 1024, 2048}};
  char buf[64];
  assert_string_equal(mlc_type_str(&t, buf, sizeof buf), "f32[8, 1024, 2048]");
  assert_int_equal(mlc_type_numel(&t), 8 * 1024 * 2048);
  mlc_type s = {.dtype = MLC_DT_I32};
  assert_string_equal(mlc_type_str(&s, buf, sizeof buf), "i32[]");
}

static void test_arena(void **state) {
  (void)state;
  mlc_arena a;
  mlc_arena_init(&a);
  mlc_u32vec v = {0};
  for (uint32_t i = 0; i < 100000; i++) mlc_u32vec_push(&a, &v, i * 3);
  for (uint32_t i = 0; i < 100000; i++) assert_int_equal(v.v[i], i * 3);
  char *big = mlc_arena_alloc(&a, 10 << 20); /* a block of its own */
  big[(10 << 20) - 1] = 1;
  char *s = mlc_arena_printf(&a, "%s.%d", "layers", 3);
  assert_string_equal(s, "layers.3");
  unsigned char *z = mlc_arena_alloc(&a, 100);
  for (int i = 0; i < 100; i++) assert_int_equal(z[i], 0);
  assert_int_equal((uintptr_t)z % 16, 0);
  mlc_arena_free(&a);
}

static const char *block_src =
    "config { dim = 64  heads = 4  layers = 3 }\n"
    "module Block(dim, heads) {\n"
    "  n = RMSNorm(dim)\n"
    "  attn = MultiheadAttention(dim, heads)\n"
    "  forward(x) { h = n(x)\n return x + attn(h, h, h) }\n"
    "}\n"
    "module M(dim, heads, layers) {\n"
    "  layers = repeat(layers) Block(dim, heads)\n"
    "  forward(x: f32[2, 16, dim]) {\n"
    "    for l in layers { x = l(x) }\n"
    "    return x\n"
    "  }\n"
    "}\n";

/* Node indices of the forward whose scope is `prefix` or under it. */
static uint32_t nodes_under(const mlc_func *f, const char *prefix, uint32_t *out) {
  uint32_t n = 0;
  size_t len = strlen(prefix);
  for (uint32_t i = 0; i < f->n; i++) {
    const char *s = f->nodes[i].scope;
    if (!strncmp(s, prefix, len) && (s[len] == 0 || s[len] == '.')) out[n++] = i;
  }
  return n;
}

static void test_hash_equal_layers(void **state) {
  (void)state;
  compiled c;
  assert_true(compile(&c, block_src, NULL, 0));
  const mlc_func *f = &c.prog.funcs[0];
  uint32_t a[512], b[512], d[512];
  uint32_t na = nodes_under(f, "layers.0", a), nb = nodes_under(f, "layers.1", b), nd = nodes_under(f, "layers.2", d);
  assert_true(na > 10);
  assert_int_equal(na, nb);
  uint64_t h0 = mlc_hash_nodes(&c.prog, f, a, na);
  assert_true(h0 == mlc_hash_nodes(&c.prog, f, b, nb));
  assert_true(h0 == mlc_hash_nodes(&c.prog, f, d, nd));
  /* A group is not the same as a shorter one, nor as its nodes in another order. */
  assert_true(h0 != mlc_hash_nodes(&c.prog, f, a, na - 1));
  uint32_t tmp = a[3];
  a[3] = a[4];
  a[4] = tmp;
  assert_true(h0 != mlc_hash_nodes(&c.prog, f, a, na));

  /* A different width gives a different hash. */
  compiled c2;
  mlc_define def = {"dim", "128"};
  assert_true(compile(&c2, block_src, &def, 1));
  const mlc_func *f2 = &c2.prog.funcs[0];
  uint32_t e[512];
  uint32_t ne = nodes_under(f2, "layers.0", e);
  assert_int_equal(ne, nb);
  assert_true(h0 != mlc_hash_nodes(&c2.prog, f2, e, ne));
  release(&c2);
  release(&c);
}

static const char *mlp_src =
    "module P {\n"
    "  a = Linear(8, 16)\n"
    "  forward(x: f32[4, 8]) { return relu(a(x)) }\n"
    "}\n";

static bool verify_quiet(const mlc_program *p, char **msg) {
  size_t len;
  FILE *f = open_memstream(msg, &len);
  bool ok = mlc_verify_program(p, f, "test");
  fclose(f);
  return ok;
}

static void test_verifier(void **state) {
  (void)state;
  compiled c;
  assert_true(compile(&c, mlp_src, NULL, 0));
  char *msg = NULL;
  assert_true(verify_quiet(&c.prog, &msg));
  free(msg);
  mlc_func *f = &c.prog.funcs[0];
  /* %2 = linear %0, %1: make it use itself (a cycle). */
  uint32_t lin = 2;
  assert_int_equal(f->nodes[lin].op, MLC_OP_LINEAR);
  uint32_t saved = f->nodes[lin].in[0];
  f->nodes[lin].in[0] = lin;
  assert_false(verify_quiet(&c.prog, &msg));
  assert_non_null(strstr(msg, "node %2: input 0 refers to %2, not defined before it"));
  free(msg);
  f->nodes[lin].in[0] = saved;
  /* A stored type the shape rule disagrees with. */
  f->nodes[lin].type.dim[1] = 17;
  assert_false(verify_quiet(&c.prog, &msg));
  assert_non_null(strstr(msg, "linear: stored type f32[4, 17] but the shape rule gives f32[4, 16]"));
  free(msg);
  f->nodes[lin].type.dim[1] = 16;
  /* Wrong arity. */
  f->nodes[lin].nin = 1;
  assert_false(verify_quiet(&c.prog, &msg));
  assert_non_null(strstr(msg, "linear has 1 inputs, expected 2"));
  free(msg);
  f->nodes[lin].nin = 2;
  assert_true(verify_quiet(&c.prog, &msg));
  free(msg);
  release(&c);
}

/* Each case: a forward body and the exact first diagnostic. */
static void expect_error(const char *body_decl, const char *want) {
  char src[1024];
  snprintf(src, sizeof src, "module T {\n  forward(%s\n}\n", body_decl);
  compiled c;
  assert_false(compile(&c, src, NULL, 0));
  if (!strstr(c.err, want)) fail_msg("want '%s' in:\n%s", want, c.err);
  release(&c);
}

static void test_shape_errors(void **state) {
  (void)state;
  expect_error("a: f32[3, 2], b: f32[4]) { return a + b }",
               "t.mdl:2:47: error: cannot broadcast f32[3, 2] with f32[4]: dimension 1 is 2 against 4");
  expect_error("a: f32[3, 2], b: f32[3, 2]) { return a @ b }",
               "error: @ of f32[3, 2] and f32[3, 2]: inner dimensions 2 and 3 differ");
  expect_error("a: f32[3, 2], b: bf16[3, 2]) { return a * b }",
               "error: mul operands have different dtypes: f32 and bf16 (use cast())");
  expect_error("a: f32[3, 2]) { return reshape(a, [5]) }", "error: cannot reshape f32[3, 2] (6 elements) to f32[5] (5 elements)");
  expect_error("a: f32[3, 2]) { return softmax(a, dim=2) }", "error: axis 2 is out of range for a tensor of rank 2");
  expect_error("a: f32[3, 5], t: i32[5]) { return cross_entropy(a, t) }",
               "error: cross_entropy of logits f32[3, 5] needs targets of shape i32[3] (the logits' shape without the class axis), got i32[5]");
  expect_error("a: i32[3]) { return exp(a) }", "error: exp needs a floating-point tensor, got i32[3]");
  expect_error("a: f32[3, 4]) { return slice(a, 1, 3, 2) }", "error: slice [3, 2) is empty or outside 0..4 on axis 1 of f32[3, 4]");
}

static void test_shape_ok(void **state) {
  (void)state;
  compiled c;
  assert_true(compile(&c,
                      "module T {\n forward(a: f32[3, 1], b: f32[1, 4], q: f32[2, 4, 8, 16]) {\n"
                      "  c = a + b\n d = sum(c, dim=-1, keepdim=true)\n e = reshape(q, [2, -1, 16])\n"
                      "  f = transpose(e, 0, 2)\n g = concat([f, f], dim=1)\n h = attention(q, q, q, causal=true)\n"
                      "  return slice(g, 0, -4, 16) }\n}\n",
                      NULL, 0));
  const mlc_func *f = &c.prog.funcs[0];
  char buf[64];
  const char *want[] = {NULL, NULL, NULL, "f32[3, 4]", "f32[3, 1]", "f32[2, 32, 16]", "f32[16, 32, 2]",
                        "f32[16, 64, 2]", "f32[2, 4, 8, 16]", "f32[4, 64, 2]"};
  assert_int_equal(f->n, 10);
  for (uint32_t i = 3; i < f->n; i++) assert_string_equal(mlc_type_str(&f->nodes[i].type, buf, sizeof buf), want[i]);
  assert_int_equal(f->nodes[9].a.start, 12);
  assert_true(f->nodes[8].a.causal);
  release(&c);
}

static void test_several_errors(void **state) {
  (void)state;
  compiled c;
  assert_false(compile(&c, "module T {\n  a = Linear(4, 4, bogus=1)\n  b = Lineer(4, 4)\n  forward(x: f32[2, 4]) { return a(x) }\n}\n",
                       NULL, 0));
  assert_int_equal(c.diag.errors, 2);
  assert_non_null(strstr(c.err, "t.mdl:2:20: error: Linear has no argument named 'bogus'"));
  assert_non_null(strstr(c.err, "t.mdl:3:7: error: unknown module 'Lineer'; did you mean 'Linear'?"));
  release(&c);
}

static void test_costs(void **state) {
  (void)state;
  compiled c;
  assert_true(compile(&c, "module T {\n l = Linear(64, 32, bias=false)\n forward(x: f32[8, 64]) { return l(x) }\n}\n", NULL, 0));
  const mlc_func *f = &c.prog.funcs[0];
  double flops, bytes;
  mlc_node_cost(f, &f->nodes[2], &flops, &bytes);
  assert_true(flops == 2.0 * 8 * 32 * 64);
  assert_true(bytes == 4.0 * (8 * 64 + 32 * 64 + 8 * 32));
  release(&c);
}

/* Independent check of a memory plan: recompute every value's lifetime the
 * simple way and test all pairs for overlap in both time and bytes. */
static void check_plan(const mlc_func *f) {
  uint32_t n = f->n;
  uint32_t *first = calloc(n, sizeof *first), *lastu = calloc(n, sizeof *lastu), *store = calloc(n, sizeof *store);
  for (uint32_t i = 0; i < n; i++) {
    /* a reshape or a view (at an offset, within its input: ir/shape.c) uses its input's bytes */
    store[i] = f->nodes[i].op == MLC_OP_RESHAPE || f->nodes[i].op == MLC_OP_VIEW ? store[f->nodes[i].in[0]] : i;
    first[i] = i;
    lastu[i] = i;
  }
  for (uint32_t i = 0; i < n; i++)
    for (uint32_t k = 0; k < f->nodes[i].nin; k++) {
      uint32_t s = store[f->nodes[i].in[k]];
      if (lastu[s] < i) lastu[s] = i;
    }
  for (uint32_t i = 0; i < f->noutputs; i++) lastu[store[f->outputs[i].node]] = n;
  for (uint32_t i = 0; i < f->inputs.n; i++) lastu[f->inputs.v[i]] = n, first[f->inputs.v[i]] = 0; /* written before the run */
  for (uint32_t i = 0; i < n; i++)
    if (f->nodes[i].op == MLC_OP_CONST) lastu[i] = n, first[i] = 0; /* written when the session starts */
  int64_t live_max = 0;
  for (uint32_t t = 0; t < n; t++) {
    int64_t live = 0;
    for (uint32_t i = 0; i < n; i++)
      if (store[i] == i && f->offset[i] >= 0 && first[i] <= t && t <= lastu[i])
        live += mlc_type_numel(&f->nodes[i].type) * mlc_dtype_size(f->nodes[i].type.dtype);
    if (live > live_max) live_max = live;
  }
  for (uint32_t i = 0; i < n; i++) {
    if (store[i] != i || f->offset[i] < 0) continue;
    int64_t si = mlc_type_numel(&f->nodes[i].type) * mlc_dtype_size(f->nodes[i].type.dtype);
    assert_true(f->offset[i] % 256 == 0);
    assert_true(f->offset[i] + si <= f->arena_bytes);
    for (uint32_t j = i + 1; j < n; j++) {
      if (store[j] != j || f->offset[j] < 0) continue;
      bool time = first[j] <= lastu[i] && first[i] <= lastu[j];
      int64_t sj = mlc_type_numel(&f->nodes[j].type) * mlc_dtype_size(f->nodes[j].type.dtype);
      bool space = f->offset[i] < f->offset[j] + sj && f->offset[j] < f->offset[i] + si;
      if (time && space) fail_msg("%%%u and %%%u are alive together and overlap", i, j);
    }
  }
  /* The plan can't beat the live set, and best fit should stay near it. */
  assert_true(f->arena_bytes >= live_max);
  assert_true(f->arena_bytes <= live_max + live_max / 2 + 256 * (int64_t)n);
  free(first);
  free(lastu);
  free(store);
}

static void test_memplan(void **state) {
  (void)state;
  compiled c;
  mlc_define defs[6] = {{"vocab", "512"}, {"dim", "128"}, {"layers", "2"}, {"heads", "4"}, {"batch", "2"}, {"seq", "64"}};
  FILE *f = fopen(MLC_SOURCE_DIR "/examples/minillm.mdl", "rb");
  assert_non_null(f);
  char src[8192];
  size_t len = fread(src, 1, sizeof src - 1, f);
  fclose(f);
  src[len] = 0;
  assert_true(compile(&c, src, defs, 6));
  mlc_pipeline_options po = {0};
  assert_true(mlc_pipeline_run(&c.prog, &c.diag, &po));
  for (uint32_t k = 0; k < c.prog.nfuncs; k++) check_plan(&c.prog.funcs[k]);
  release(&c);

  /* A chain of equal-sized values needs two slots, not one per value. */
  assert_true(compile(&c, "module T {\n forward(x: f32[64]) {\n a = exp(x)\n b = exp(a)\n c = exp(b)\n return exp(c) }\n}\n", NULL, 0));
  assert_true(mlc_pipeline_run(&c.prog, &c.diag, &po));
  check_plan(&c.prog.funcs[0]);
  assert_int_equal(c.prog.funcs[0].arena_bytes, 3 * 256); /* input, plus two alternating */
  release(&c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_dtypes),       cmocka_unit_test(test_arena),        cmocka_unit_test(test_hash_equal_layers),
    cmocka_unit_test(test_verifier),     cmocka_unit_test(test_shape_errors), cmocka_unit_test(test_shape_ok),
    cmocka_unit_test(test_several_errors), cmocka_unit_test(test_costs),  cmocka_unit_test(test_memplan),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
