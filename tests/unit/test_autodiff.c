/* Unit tests of the autodiff pass: the gradient graph's outputs, names,
 * shapes, scopes and locations, and its errors.  Models are built from .mdl
 * source strings through the real frontend and the whole pipeline, so the
 * verifier checks every gradient node's shape rule too.  The numbers are
 * checked elsewhere: tests/ref/grad_check.py. */
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

/* Frontend, shapes and autodiff, with the verifier after each (so every
 * gradient node's stored type is what its shape rule gives); with `full`,
 * the whole pipeline instead.  False (diagnostics in c->err) on error. */
static bool compile_with(compiled *c, const char *src, const mlc_define *defs, uint32_t ndefs, bool full) {
  bool ok = compiled_frontend(c, src, defs, ndefs);
  c->nfwd = 0;
  for (uint32_t k = 0; k < c->prog.nfuncs; k++)
    if (!strcmp(c->prog.funcs[k].name, "train")) c->nfwd = c->prog.funcs[k].n;
  if (full) {
    mlc_pipeline_options po = {.keep_grads = true}; /* the gradients are what these tests look at */
    ok = ok && mlc_pipeline_run(&c->prog, &c->diag, &po);
  } else {
    mlc_pass_ctx pc = {&c->prog, &c->diag, NULL, false, false};
    ok = ok && mlc_pass_shapes(&pc) && mlc_verify_program(&c->prog, stderr, "shapes");
    ok = ok && mlc_pass_autodiff(&pc);
    if (ok && !mlc_verify_program(&c->prog, stderr, "autodiff")) fail_msg("the verifier failed after autodiff");
  }
  fflush(c->errf);
  return ok;
}

static bool compile(compiled *c, const char *src, const mlc_define *defs, uint32_t ndefs) {
  return compile_with(c, src, defs, ndefs, false);
}

static const mlc_func *func(const compiled *c, const char *name) {
  for (uint32_t k = 0; k < c->prog.nfuncs; k++)
    if (!strcmp(c->prog.funcs[k].name, name)) return &c->prog.funcs[k];
  fail_msg("no function %s", name);
  return NULL;
}

static const char *tstr(const mlc_type *t) {
  static char buf[4][96];
  static int i;
  i = (i + 1) % 4;
  return mlc_type_str(t, buf[i], sizeof buf[i]);
}

static const mlc_param *param_named(const mlc_program *p, const char *name) {
  for (uint32_t i = 0; i < p->nparams; i++)
    if (!strcmp(p->params[i].name, name)) return &p->params[i];
  return NULL;
}

/* Outputs are "loss" then "grad:<param>" for each listed parameter, in that
 * order, each of its parameter's type. */
static void expect_outputs(const compiled *c, const char *const *params, uint32_t n) {
  const mlc_func *f = func(c, "train");
  if (f->noutputs != n + 1) {
    for (uint32_t i = 0; i < f->noutputs; i++) fprintf(stderr, "  output %s\n", f->outputs[i].name);
    fail_msg("%u outputs, want %u", f->noutputs, n + 1);
  }
  assert_string_equal(f->outputs[0].name, "loss");
  for (uint32_t i = 0; i < n; i++) {
    char want[256];
    snprintf(want, sizeof want, "grad:%s", params[i]);
    assert_string_equal(f->outputs[i + 1].name, want);
    const mlc_param *prm = param_named(&c->prog, params[i]);
    assert_non_null(prm);
    const mlc_type *t = &f->nodes[f->outputs[i + 1].node].type;
    if (!mlc_type_eq(t, &prm->type)) fail_msg("%s is %s, want %s", want, tstr(t), tstr(&prm->type));
  }
}

/* Every gradient node carries a scope and location taken from a forward node. */
static void expect_provenance(const compiled *c) {
  const mlc_func *f = func(c, "train");
  for (uint32_t i = c->nfwd; i < f->n; i++) {
    const mlc_node *g = &f->nodes[i];
    assert_true(g->loc.line > 0);
    bool found = false;
    for (uint32_t j = 0; j < c->nfwd && !found; j++) {
      const mlc_node *x = &f->nodes[j];
      found = !strcmp(x->scope, g->scope) && x->loc.line == g->loc.line && x->loc.col == g->loc.col &&
              x->loc.file == g->loc.file;
    }
    if (!found) fail_msg("gradient node %%%u (%s) has a scope/location of no forward node", i, mlc_ops[g->op].name);
  }
}

static uint32_t count_op(const mlc_func *f, mlc_op op, uint32_t from) {
  uint32_t n = 0;
  for (uint32_t i = from; i < f->n; i++) n += f->nodes[i].op == op;
  return n;
}

/* ---- outputs: names, order, which parameters get one ---- */

static void test_outputs_and_unused(void **state) {
  (void)state;
  compiled c;
  assert_true(compile(&c,
                      "module T {\n"
                      "  param unused: f32[4] = ones\n"
                      "  a = Linear(6, 4)\n"
                      "  param scale: f32[4] = ones\n"
                      "  forward(x: f32[3, 6]) { return a(x) * scale }\n"
                      "}\n"
                      "train T {\n"
                      "  input x: f32[3, 6]\n"
                      "  input t: i32[3]\n"
                      "  loss = cross_entropy(model(x), t)\n"
                      "}\n",
                      NULL, 0));
  static const char *const want[] = {"scale", "a.weight", "a.bias"};
  /* Parameter order is the state_dict's: own params first, then children's. */
  assert_string_equal(c.prog.params[0].name, "unused");
  assert_string_equal(c.prog.params[1].name, "scale");
  expect_outputs(&c, want, 3);
  expect_provenance(&c);
  /* forward is left alone. */
  const mlc_func *fw = func(&c, "forward");
  assert_int_equal(fw->noutputs, 1);
  assert_int_equal(count_op(fw, MLC_OP_CROSS_ENTROPY_GRAD, 0), 0);
  /* The input x gets no gradient: no matmul computes d(loss)/dx. */
  const mlc_func *f = func(&c, "train");
  assert_int_equal(count_op(f, MLC_OP_MATMUL, c.nfwd), 1); /* dW only */
  assert_int_equal(count_op(f, MLC_OP_CROSS_ENTROPY_GRAD, c.nfwd), 1);
  release(&c);
}

/* A model without a train block has no train function and nothing changes. */
static void test_no_train(void **state) {
  (void)state;
  compiled c;
  assert_true(compile(&c, "module T {\n a = Linear(6, 4)\n forward(x: f32[3, 6]) { return a(x) }\n}\n", NULL, 0));
  assert_int_equal(c.prog.nfuncs, 1);
  assert_int_equal(c.prog.funcs[0].noutputs, 1);
  release(&c);
}

/* A loss that depends on no parameter has no gradient outputs. */
static void test_loss_without_params(void **state) {
  (void)state;
  compiled c;
  assert_true(compile(&c,
                      "module T {\n param w: f32[4] = ones\n forward(x: f32[4]) { return x }\n}\n"
                      "train T {\n input x: f32[4]\n loss = sum(model(x))\n}\n",
                      NULL, 0));
  const mlc_func *f = func(&c, "train");
  assert_int_equal(f->noutputs, 1);
  assert_int_equal(f->n, c.nfwd);
  release(&c);
}

/* ---- the MiniLLM ---- */

static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  static char src[16384];
  size_t len = fread(src, 1, sizeof src - 1, f);
  fclose(f);
  src[len] = 0;
  return src;
}

static void test_minillm(void **state) {
  (void)state;
  compiled c;
  mlc_define defs[6] = {{"vocab", "512"}, {"dim", "128"}, {"layers", "2"}, {"heads", "4"}, {"batch", "2"}, {"seq", "64"}};
  assert_true(compile(&c, read_file(MLC_SOURCE_DIR "/examples/minillm.mdl"), defs, 6));
  /* Every parameter, in state_dict order. */
  const char *want[64];
  for (uint32_t i = 0; i < c.prog.nparams; i++) want[i] = c.prog.params[i].name;
  assert_int_equal(c.prog.nparams, 18);
  expect_outputs(&c, want, c.prog.nparams);
  expect_provenance(&c);
  const mlc_func *f = func(&c, "train");
  /* One gradient op per forward op of each kind. */
  assert_int_equal(count_op(f, MLC_OP_ATTENTION_GRAD, c.nfwd), 2);
  assert_int_equal(count_op(f, MLC_OP_RMSNORM_GRAD_X, c.nfwd), 4);
  assert_int_equal(count_op(f, MLC_OP_RMSNORM_GRAD_W, c.nfwd), 4);
  assert_int_equal(count_op(f, MLC_OP_SILU_GRAD, c.nfwd), 2);
  /* q, k, v are slices that tile the in_proj output: their gradients go
   * back as one concat, not three zero-padded slice_grads and two adds. */
  assert_int_equal(count_op(f, MLC_OP_SLICE_GRAD, c.nfwd), 0);
  assert_int_equal(count_op(f, MLC_OP_CONCAT, c.nfwd), 2);
  assert_int_equal(count_op(f, MLC_OP_EMBEDDING_GRAD, c.nfwd), 1);
  assert_int_equal(count_op(f, MLC_OP_CROSS_ENTROPY_GRAD, c.nfwd), 1);
  /* linear: dx and dW per linear (9 linears; dx of none is skipped since all
   * inputs depend on the embedding). */
  assert_int_equal(count_op(f, MLC_OP_MATMUL, c.nfwd), 2 * 9);
  /* No gradient op reads the integer inputs except embedding_grad and
   * cross_entropy_grad. */
  for (uint32_t i = c.nfwd; i < f->n; i++)
    for (uint32_t k = 0; k < f->nodes[i].nin; k++)
      if (f->nodes[f->nodes[i].in[k]].op == MLC_OP_INPUT)
        assert_true(f->nodes[i].op == MLC_OP_EMBEDDING_GRAD || f->nodes[i].op == MLC_OP_CROSS_ENTROPY_GRAD);
  /* The head's dW is a GEMM in the head's scope at the head's location. */
  uint32_t head = f->outputs[f->noutputs - 1].node;
  assert_string_equal(f->outputs[f->noutputs - 1].name, "grad:head.weight");
  assert_int_equal(f->nodes[head].op, MLC_OP_MATMUL);
  assert_string_equal(f->nodes[head].scope, "head");
  release(&c);

  /* Through the whole pipeline with keep_grads (as the gradient checks ask;
   * without it the interleave pass drops them: tests/unit/test_memory.c),
   * the gradients stay outputs (later passes may add more after them) and
   * memplan gives each a place in the arena. */
  assert_true(compile_with(&c, read_file(MLC_SOURCE_DIR "/examples/minillm.mdl"), defs, 6, true));
  f = func(&c, "train");
  assert_true(f->noutputs >= 19);
  for (uint32_t i = 0; i < 18; i++) {
    char gname[256];
    snprintf(gname, sizeof gname, "grad:%s", c.prog.params[i].name);
    assert_string_equal(f->outputs[i + 1].name, gname);
    const mlc_node *g = &f->nodes[f->outputs[i + 1].node];
    assert_true(f->offset[f->outputs[i + 1].node] >= 0);
    assert_true(f->offset[f->outputs[i + 1].node] + mlc_type_numel(&g->type) * 4 <= f->arena_bytes);
  }
  release(&c);
}

/* ---- one model per op with a VJP rule ---- */

typedef struct {
  const char *name;
  const char *src; /* module body after "module T {" up to the train block */
  const char *inputs; /* train inputs, model call */
  const char *params[8];
} op_case;

static const op_case cases[] = {
  {"add_sub", "param a: f32[3, 1, 5]\n param b: f32[4, 5]\n param c: f32[5]\n param d: f32[1, 4, 1]\n"
              " forward() { return a + b - d + c }", "", {"a", "b", "c", "d"}},
  {"mul_div", "param a: f32[4, 5]\n param b: f32[5] = ones\n param c: f32[4, 1] = ones\n"
              " forward() { return a * b * a / c }", "", {"a", "b", "c"}},
  {"unary", "param x: f32[2, 3] = ones\n forward() { return -exp(x) + log(x) + sqrt(x) + rsqrt(x) + tanh(x) +"
            " sigmoid(x) + relu(x) + silu(x) + gelu(x) }", "", {"x"}},
  {"cast", "param x: f32[2, 3]\n forward() { return cast(cast(x, bf16) * cast(x, bf16), f32) }", "", {"x"}},
  {"issue27", "param x: f32[2, 3] = ones\n param w: f32[3]\n forward() { return abs(x) + erf(x) + pow(x, 1.5) + x ** 2 +"
              " clamp(x, min=0.1, max=2.0) + gelu(x, approximate=\"tanh\") + where(x < w, x, w) + where(x <= w, w, x) +"
              " where(x == w, x, 0.0) + where(x != w, 1.0, w) }", "", {"x", "w"}},
  {"dropout", "param x: f32[2, 3]\n forward() { return dropout(x, p=0.3) * dropout(x, seed=7) }", "", {"x"}},
  {"reductions", "param x: f32[3, 4, 5]\n forward() { return sum(x, dim=1, keepdim=true) + mean(x, dim=2, keepdim=true) +"
                 " sum(mean(x, dim=0), dim=0) + reshape(sum(x, dim=1), [3, 1, 5]) }", "", {"x"}},
  {"softmax", "param x: f32[3, 4]\n forward() { return softmax(x, dim=0) * softmax(x) }", "", {"x"}},
  {"layout", "param x: f32[2, 3, 4]\n param y: f32[2, 3, 2]\n"
             " forward() { return transpose(reshape(concat([x, y, slice(x, 2, 1, 3)], dim=2), [6, 8]), 0, 1) }",
   "", {"x", "y"}},
  {"matmul", "param a: f32[2, 1, 3, 4]\n param b: f32[5, 4, 6]\n param w: f32[6, 2]\n param m: f32[3, 2]\n"
             " forward() { return (a @ b) @ w + m @ transpose(w, 0, 1) @ w }", "", {"a", "b", "w", "m"}},
  {"linear", "param x: f32[2, 3, 6]\n param v: f32[6]\n l = Linear(6, 5)\n"
             " forward() { return l(x) + l(v) }", "", {"x", "v", "l.weight", "l.bias"}},
  {"embedding", "e = Embedding(10, 4)\n forward(i: i32[2, 3]) { return e(i) }", "input i: i32[2, 3]\n", {"e.weight"}},
  {"norms", "param x: f32[2, 3, 8]\n n1 = RMSNorm(8)\n n2 = LayerNorm(8)\n n3 = LayerNorm(8, elementwise_affine=false)\n"
            " forward() { return n1(x) + n2(x) + n3(x) }", "", {"x", "n1.weight", "n2.weight", "n2.bias"}},
  {"issue27_index", "param x: f32[3, 1, 5]\n"
                    " forward(i: i64[3, 4, 2]) { return gather(expand(x, [3, 4, 5]), 2, i) * max(x, dim=2, keepdim=true) + min(x)"
                    " + permute(x, [2, 1, 0])[1:, 0, ::2]"
                    " + cast(argmax(x, dim=2, keepdim=true) + argmin(x, dim=2, keepdim=true), f32) }",
   "input i: i64[3, 4, 2]\n", {"x"}},
  {"attention", "param x: f32[2, 5, 8]\n param y: f32[2, 5, 8]\n a = MultiheadAttention(8, 2, causal=true)\n"
                " b = MultiheadAttention(8, 2, bias=false)\n forward() { return a(x) + b(x, y, y) }", "",
   {"x", "y", "a.in_proj_weight", "a.in_proj_bias", "a.out_proj.weight", "a.out_proj.bias", "b.in_proj_weight",
    "b.out_proj.weight"}},
};

/* Ops whose rule is a real VJP (not vjp_leaf or vjp_none), from ops.def. */
static bool has_rule(int op) {
  static const char *const rule[MLC_OP_COUNT] = {
#define X(e, name, arity, flags, attrs, shape, cost, vjp) [MLC_OP_##e] = #vjp,
#include "ir/ops.def"
#undef X
  };
  return strcmp(rule[op], "vjp_leaf") && strcmp(rule[op], "vjp_none");
}

static void test_every_rule(void **state) {
  (void)state;
  bool seen[MLC_OP_COUNT] = {0};
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    const op_case *oc = &cases[k];
    /* The output's shape, for r: compile the module alone first. */
    compiled fw;
    char src[4096];
    snprintf(src, sizeof src, "module T {\n %s\n}\n", oc->src);
    if (!compile(&fw, src, NULL, 0)) fail_msg("%s: %s", oc->name, fw.err);
    const mlc_func *f0 = &fw.prog.funcs[0];
    const mlc_type *yt = &f0->nodes[f0->outputs[0].node].type;
    char dims[96] = "";
    for (int i = 0; i < yt->rank; i++)
      snprintf(dims + strlen(dims), sizeof dims - strlen(dims), "%s%lld", i ? ", " : "", (long long)yt->dim[i]);
    release(&fw);
    /* The loss weights every output element differently: sum(y * r). */
    char full[4096];
    snprintf(full, sizeof full, "module T {\n %s\n}\ntrain T {\n %s input r: f32[%s]\n loss = sum(model(%s) * r)\n}\n",
             oc->src, oc->inputs, dims, oc->inputs[0] ? "i" : "");
    compiled c;
    if (!compile(&c, full, NULL, 0)) fail_msg("%s: %s\n%s", oc->name, c.err, full);
    uint32_t n = 0;
    while (n < 8 && oc->params[n]) n++;
    expect_outputs(&c, oc->params, n);
    expect_provenance(&c);
    const mlc_func *f = func(&c, "train");
    for (uint32_t i = 0; i < c.nfwd; i++) seen[f->nodes[i].op] = true;
    release(&c);
  }
  for (int op = 0; op < MLC_OP_COUNT; op++)
    /* cross_entropy makes the loss itself: test_outputs_and_unused and test_minillm have it. */
    if (has_rule(op) && !seen[op] && op != MLC_OP_CROSS_ENTROPY) fail_msg("no case exercises the VJP of %s", mlc_ops[op].name);
}

/* ---- details of the gradient graph ---- */

/* A value used twice gets its gradients summed; broadcasting is undone by
 * a sum over the stretched axes and a reshape. */
static void test_accumulate_and_unbroadcast(void **state) {
  (void)state;
  compiled c;
  assert_true(compile(&c,
                      "module T {\n param a: f32[3, 4, 5]\n param b: f32[5]\n param d: f32[3, 1, 5]\n"
                      " forward() { return a * a + b + d }\n}\n"
                      "train T {\n input r: f32[3, 4, 5]\n loss = sum(model() * r)\n}\n",
                      NULL, 0));
  const mlc_func *f = func(&c, "train");
  /* grad b: g viewed as [12, 5], summed over axis 0. */
  const mlc_node *gb = &f->nodes[f->outputs[2].node];
  assert_string_equal(f->outputs[2].name, "grad:b");
  assert_int_equal(gb->op, MLC_OP_SUM);
  assert_int_equal(gb->a.axis, 0);
  assert_string_equal(tstr(&f->nodes[gb->in[0]].type), "f32[12, 5]");
  /* grad d: a keepdim sum over axis 1. */
  const mlc_node *gd = &f->nodes[f->outputs[3].node];
  assert_int_equal(gd->op, MLC_OP_SUM);
  assert_int_equal(gd->a.axis, 1);
  assert_true(gd->a.keepdim);
  /* grad a = g a + g a: one add of two products. */
  const mlc_node *ga = &f->nodes[f->outputs[1].node];
  assert_int_equal(ga->op, MLC_OP_ADD);
  assert_int_equal(f->nodes[ga->in[0]].op, MLC_OP_MUL);
  assert_int_equal(f->nodes[ga->in[1]].op, MLC_OP_MUL);
  release(&c);
}

/* Slices that tile their input give their gradients back as one concat, in
 * window order, plus whatever else reads the input; other slices each get
 * a slice_grad. */
static void test_slice_windows(void **state) {
  (void)state;
  compiled c;
  assert_true(compile(&c,
                      "module T {\n param x: f32[3, 6]\n"
                      " forward() { return concat([slice(x, 1, 3, 6), slice(x, 1, 0, 3)], dim=1) * x }\n}\n"
                      "train T {\n input r: f32[3, 6]\n loss = sum(model() * r)\n}\n",
                      NULL, 0));
  const mlc_func *f = func(&c, "train");
  const mlc_node *gx = &f->nodes[f->outputs[1].node];
  assert_int_equal(gx->op, MLC_OP_ADD); /* the mul's share plus the slices' */
  const mlc_node *cat = &f->nodes[gx->in[1]];
  assert_int_equal(cat->op, MLC_OP_CONCAT);
  assert_int_equal(cat->nin, 2);
  /* window [0, 3) first: the gradient of slice(x, 1, 0, 3) */
  assert_int_equal(f->nodes[cat->in[0]].op, MLC_OP_SLICE);
  assert_int_equal(f->nodes[cat->in[0]].a.start, 3);
  assert_int_equal(f->nodes[cat->in[1]].a.start, 0);
  assert_int_equal(count_op(f, MLC_OP_SLICE_GRAD, c.nfwd), 0);
  release(&c);

  assert_true(compile(&c,
                      "module T {\n param x: f32[3, 6]\n"
                      " forward() { return slice(x, 1, 1, 4) + slice(x, 1, 3, 6) }\n}\n"
                      "train T {\n input r: f32[3, 3]\n loss = sum(model() * r)\n}\n",
                      NULL, 0));
  f = func(&c, "train");
  assert_int_equal(count_op(f, MLC_OP_SLICE_GRAD, c.nfwd), 2);
  assert_int_equal(count_op(f, MLC_OP_CONCAT, c.nfwd), 0);
  release(&c);
}

/* Integer values carry no gradient, and ops on them alone need no rule: a
 * max over an input is fine; a max the parameters flow through shares its
 * gradient among ties (eq, cast, sum, div, mul), as torch.amax. */
static void test_max(void **state) {
  (void)state;
  compiled c;
  assert_true(compile(&c,
                      "module T {\n param w: f32[4]\n forward(x: f32[3, 4]) { return w * max(x, dim=0) }\n}\n"
                      "train T {\n input x: f32[3, 4]\n loss = sum(model(x))\n}\n",
                      NULL, 0));
  static const char *const want[] = {"w"};
  expect_outputs(&c, want, 1);
  release(&c);

  assert_true(compile(&c,
                      "module T {\n param w: f32[3, 4]\n forward() {\n  return max(w * 2.0, dim=0)\n }\n}\n"
                      "train T {\n loss = sum(model())\n}\n",
                      NULL, 0));
  static const char *const want_w[] = {"w"};
  expect_outputs(&c, want_w, 1);
  const mlc_func *f = func(&c, "train");
  bool eq = false;
  for (uint32_t i = c.nfwd; i < f->n; i++) eq |= f->nodes[i].op == MLC_OP_EQ;
  assert_true(eq);
  release(&c);
}

/* Cross-attention (q and k of different lengths) has no gradient op: its
 * gradient is composed of matmuls around a recomputed softmax, the causal
 * mask made with arange, lt and where.  (tests/ref/grad_check.py checks
 * its numbers.) */
static void test_attention_cross(void **state) {
  (void)state;
  for (int causal = 0; causal < 2; causal++) {
    compiled c;
    char src[512];
    snprintf(src, sizeof src,
             "module T {\n param q: f32[1, 2, 4, 8]\n param k: f32[1, 2, 6, 8]\n param v: f32[1, 2, 6, 3]\n"
             " forward() { return attention(q, k, v, causal=%s) }\n}\n"
             "train T {\n loss = sum(model())\n}\n", causal ? "true" : "false");
    if (!compile(&c, src, NULL, 0)) fail_msg("%s", c.err);
    const char *names[] = {"q", "k", "v"};
    expect_outputs(&c, names, 3);
    const mlc_func *f = func(&c, "train");
    assert_int_equal(count_op(f, MLC_OP_ATTENTION_GRAD, c.nfwd), 0);
    assert_int_equal(count_op(f, MLC_OP_SOFTMAX, c.nfwd), 1);
    assert_int_equal(count_op(f, MLC_OP_MATMUL, c.nfwd), 5); /* s, dv, dp, dq, dk */
    assert_int_equal(count_op(f, MLC_OP_WHERE, c.nfwd), causal);
    assert_int_equal(count_op(f, MLC_OP_ARANGE, c.nfwd), 2 * causal);
    release(&c);
  }
}

/* The seed is a constant 1 of the loss's dtype; a loss computed in f16 and
 * cast to f32 gets its gradient cast back. */
static void test_seed_and_cast(void **state) {
  (void)state;
  compiled c;
  assert_true(compile(&c,
                      "module T {\n l = Linear(8, 8, dtype=f16)\n forward(x: f16[4, 8]) { return l(x) }\n}\n"
                      "train T {\n input x: f16[4, 8]\n loss = cast(sum(model(x)), f32)\n}\n",
                      NULL, 0));
  const mlc_func *f = func(&c, "train");
  const mlc_node *seed = &f->nodes[c.nfwd];
  assert_int_equal(seed->op, MLC_OP_CONST);
  assert_true(seed->a.f == 1.0);
  assert_int_equal(seed->type.dtype, MLC_DT_F32);
  assert_int_equal(seed->type.rank, 0);
  assert_int_equal(f->nodes[c.nfwd + 1].op, MLC_OP_CAST);
  assert_int_equal(f->nodes[c.nfwd + 1].type.dtype, MLC_DT_F16);
  static const char *const want[] = {"l.weight", "l.bias"};
  expect_outputs(&c, want, 2);
  release(&c);
}

/* --print-after=autodiff shows the train function with its new outputs. */
static void test_print_after(void **state) {
  (void)state;
  assert_true(mlc_pipeline_has_pass("autodiff"));
  assert_non_null(strstr(mlc_pipeline_pass_names(), "precision, autodiff,"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_outputs_and_unused), cmocka_unit_test(test_no_train),
    cmocka_unit_test(test_loss_without_params), cmocka_unit_test(test_minillm),
    cmocka_unit_test(test_every_rule),      cmocka_unit_test(test_accumulate_and_unbroadcast),
    cmocka_unit_test(test_slice_windows),   cmocka_unit_test(test_max),
    cmocka_unit_test(test_attention_cross),
    cmocka_unit_test(test_seed_and_cast),   cmocka_unit_test(test_print_after),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
