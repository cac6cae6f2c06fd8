/* Unit tests of fused nodes (ir/fused.h) and the fuse pass (passes/fuse.c):
 * the groups it makes for Metal and CUDA, exactly as printed; the shape
 * rule's errors for malformed programs; the cost rule; adamw_multi.  And the
 * attnsave pass (passes/attnsave.c): which attentions keep their statistics;
 * the attnpad pass (passes/attnpad.c): which run zero-padded. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "codegen/plan.h"
#include "frontend/frontend.h"
#include "ir/fused.h"
#include "passes/passes.h"
#include "tests/unit/compiled.h"

/* linear (+ bias), relu, residual add: one GEMM and three elementwise ops */
static const char *mlp_src =
    "module M {\n"
    "  lin = Linear(64, 16)\n"
    "  forward(x: f32[32, 64], r: f32[32, 16]) {\n"
    "    return relu(lin(x)) + r\n"
    "  }\n"
    "}\n";

/* Two linear layers trained with optimizer %s (AdamW or SGD: the update groups). */
static const char *update_src =
    "module M {\n"
    "  a = Linear(8, 8)\n"
    "  b = Linear(8, 4, bias=false)\n"
    "  forward(x: f32[2, 8]) { return b(a(x)) }\n"
    "}\n"
    "train M {\n"
    "  input x: f32[2, 8]\n"
    "  loss = sum(model(x))\n"
    "  optimizer = %s\n"
    "%s" /* more of the train block */
    "}\n";

/* Runs the pipeline for target and returns the function's text. */
static char *run(compiled *c, const char *src, const char *target, const char *func) {
  assert_true(compiled_frontend(c, src, NULL, 0));
  mlc_pipeline_options o = {.target = target};
  assert_true(mlc_pipeline_run(&c->prog, &c->diag, &o));
  for (uint32_t k = 0; k < c->prog.nfuncs; k++) {
    if (strcmp(c->prog.funcs[k].name, func)) continue;
    char *s = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&s, &n);
    mlc_print_func(f, &c->prog, &c->prog.funcs[k]);
    fclose(f);
    return s;
  }
  fail_msg("no function %s", func);
  return NULL;
}

static int count(const char *s, const char *what) {
  int n = 0;
  for (const char *p = s; (p = strstr(p, what)); p += strlen(what)) n++;
  return n;
}

/* Metal: the whole group is the GEMM's epilogue. */
static void test_metal_epilogue(void **state) {
  (void)state;
  compiled c;
  char *s = run(&c, mlp_src, "metal", "forward");
  assert_non_null(strstr(s, "%4 = fused %0, %2, %3, %1 \"linear($0, $1); add(#0, $2); relu(#1); add(#2, $3)\" : f32[32, 16]"));
  assert_int_equal(count(s, " = linear "), 0);
  assert_int_equal(count(s, " = add "), 0);
  /* cost: the parts' FLOPs, only the group's outside bytes */
  const mlc_func *f = &c.prog.funcs[0];
  double fl, by;
  mlc_node_cost(f, &f->nodes[4], &fl, &by);
  assert_true(fl == 2.0 * 32 * 16 * 64 + 3 * 32 * 16);
  assert_true(by == 4.0 * (32 * 64 + 16 * 64 + 16 + 32 * 16 + 32 * 16));
  /* the unit rules see the GEMM that leads the group (codegen/plan.h) */
  uint16_t op = 0;
  const mlc_type *a = NULL;
  assert_true(mlc_plan_mm_of(f, 4, &op, &a));
  assert_int_equal(op, MLC_OP_LINEAR);
  assert_int_equal(a->dtype, MLC_DT_F32);
  assert_false(mlc_plan_mm_of(f, 0, &op, &a)); /* an input */
  free(s);
  release(&c);
}

/* the same with tanh, an activation CUDA's GEMM store does not take */
static const char *tanh_src =
    "module M {\n"
    "  lin = Linear(64, 16)\n"
    "  forward(x: f32[32, 64], r: f32[32, 16]) {\n"
    "    return tanh(lin(x)) + r\n"
    "  }\n"
    "}\n";

/* A deep ReLU MLP's train step: relu's gradient reads relu's output */
static const char *relu_train_src =
    "module M {\n"
    "  a = Linear(64, 64)\n"
    "  b = Linear(64, 64)\n"
    "  c = Linear(64, 4)\n"
    "  forward(x: f32[32, 64]) { return c(relu(b(relu(a(x))))) }\n"
    "}\n"
    "train M {\n"
    "  input x: f32[32, 64]\n"
    "  loss = sum(model(x))\n"
    "  optimizer = SGD(lr=1e-3, momentum=0.9)\n"
    "}\n";

/* CUDA: tanh is not taken into the GEMM's store (epilogue_pays), so the
 * linear stays and the three elementwise ops are one kernel; relu (a
 * compare and a select) is, as on Metal; in the train step each input
 * gradient's GEMM takes relu's gradient, though the weight's update comes
 * between the GEMM and relu_grad (the group then sits at the GEMM). */
static void test_cuda_policy(void **state) {
  (void)state;
  compiled c;
  char *s = run(&c, mlp_src, "cuda", "forward");
  assert_non_null(strstr(s, "\"linear($0, $1); add(#0, $2); relu(#1); add(#2, $3)\" : f32[32, 16]"));
  assert_int_equal(count(s, " = linear "), 0);
  free(s);
  release(&c);
  s = run(&c, relu_train_src, "cuda", "train");
  assert_int_equal(count(s, "\"linear($0, $1); add(#0, $2); relu(#1)\" : f32[32, 64]"), 2);
  assert_int_equal(count(s, "\"matmul($0, $1); relu_grad(#0, $2)\" : f32[32, 64]"), 2);
  assert_int_equal(count(s, " = relu"), 0);
  free(s);
  release(&c);
  s = run(&c, tanh_src, "cuda", "forward");
  assert_non_null(strstr(s, " = linear %0, %2 : f32[32, 16]"));
  assert_non_null(strstr(s, "\"add($0, $1); tanh(#0); add(#1, $2)\" : f32[32, 16]"));
  assert_int_equal(count(s, " = fused "), 1);
  /* an elementwise group runs on no matrix unit; the linear does */
  const mlc_func *f = &c.prog.funcs[0];
  for (uint32_t i = 0; i < f->n; i++) {
    uint16_t op;
    const mlc_type *a;
    bool mm = mlc_plan_mm_of(f, i, &op, &a);
    if (f->nodes[i].op == MLC_OP_FUSED) assert_false(mm);
    if (f->nodes[i].op == MLC_OP_LINEAR) assert_true(mm && op == MLC_OP_LINEAR);
  }
  free(s);
  release(&c);
  /* CPU: no fuse pass */
  s = run(&c, mlp_src, "cpu", "forward");
  assert_int_equal(count(s, " = fused "), 0);
  free(s);
  release(&c);
}

/* --quantize int4 (groups of 32): on CUDA and SPIR-V the qlinear heads the group of its
 * bias add, ReLU and residual add ("qlinear.<bits>.<group>", the target's
 * qlinear_epilogues); Metal keeps the qlinear on its own. */
static void test_qlinear_epilogue(void **state) {
  (void)state;
  const char *targets[] = {"cuda", "metal", "spirv"};
  for (int t = 0; t < 3; t++) {
    compiled c;
    assert_true(compiled_frontend(&c, mlp_src, NULL, 0));
    c.prog.opts.quant_bits = 4;
    c.prog.opts.quant_group = 32;
    c.prog.opts.quant_scheme = MLC_QS_BF16; /* the option's default */
    mlc_pipeline_options o = {.target = targets[t]};
    assert_true(mlc_pipeline_run(&c.prog, &c.diag, &o));
    char *s = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&s, &n);
    mlc_print_func(f, &c.prog, &c.prog.funcs[0]);
    fclose(f);
    if (t != 1) { /* cuda and spirv; Metal's qlinear stores alone */
      assert_non_null(strstr(s, "\"qlinear.4.32($0, $1); add(#0, $2); relu(#1); add(#2, $3)\" : f32[32, 16]"));
      assert_int_equal(count(s, " = qlinear "), 0);
      const mlc_func *fn = &c.prog.funcs[0];
      for (uint32_t i = 0; i < fn->n; i++) { /* its unit: the qlinear's (FP32), its FLOPs: 2 k a result */
        uint16_t op;
        const mlc_type *a;
        if (fn->nodes[i].op != MLC_OP_FUSED) continue;
        assert_true(mlc_plan_mm_of(fn, i, &op, &a) && op == MLC_OP_QLINEAR);
        double flops = 0, bytes = 0;
        mlc_node_cost(fn, &fn->nodes[i], &flops, &bytes);
        assert_true(flops >= 2.0 * 32 * 16 * 64);
      }
    } else {
      assert_int_equal(count(s, " = qlinear "), 1);
      assert_null(strstr(s, "qlinear."));
    }
    free(s);
    release(&c);
  }
}

/* A norm read only by a linear: with at most 4 rows (a decode step's) the
 * norm becomes the GEMM's prologue on CUDA, inputs x, weight, the norm's
 * weight, then the epilogue's; with 32 rows, or on Metal and SPIR-V, it
 * stays a node of its own. */
static const char *norm_src =
    "module M {\n"
    "  norm = RMSNorm(64)\n"
    "  lin = Linear(64, 16)\n"
    "  forward(x: f32[%d, 64], r: f32[%d, 16]) {\n"
    "    return silu(lin(norm(x))) + r\n"
    "  }\n"
    "}\n";

static void test_gemv_prologue(void **state) {
  (void)state;
  const char *targets[] = {"cuda", "cuda", "metal", "spirv"};
  const int rows[] = {2, 32, 2, 2};
  for (int t = 0; t < 4; t++) {
    char src[512];
    snprintf(src, sizeof src, norm_src, rows[t], rows[t]);
    compiled c;
    char *s = run(&c, src, targets[t], "forward");
    if (t == 0) {
      /* eps = finfo(f32).eps, printed to be read back exactly */
      assert_non_null(strstr(s, "= fused %0, %3, %2, %4, %1 \"rmsnorm.1.1920928955078125e-07($0, $2); linear(#0, $1); "
                                "add(#1, $3); silu(#2); add(#3, $4)\" : f32[2, 16]"));
      assert_int_equal(count(s, " = rmsnorm "), 0);
      const mlc_func *fn = &c.prog.funcs[0];
      for (uint32_t i = 0; i < fn->n; i++) { /* the plan's GEMM: the linear, of x */
        uint16_t op;
        const mlc_type *a;
        if (fn->nodes[i].op != MLC_OP_FUSED) continue;
        assert_true(mlc_plan_mm_of(fn, i, &op, &a) && op == MLC_OP_LINEAR && a->dim[0] == 2 && a->dim[1] == 64);
        mlc_fused_prog pr;
        char err[200];
        assert_true(mlc_fused_program(fn, &fn->nodes[i], &pr, err, sizeof err));
        assert_int_equal(pr.gemm, 1);
        assert_int_equal(pr.epi_in, 3);
        assert_true(pr.ins[0].eps == 1.1920928955078125e-07);
      }
    } else {
      assert_int_equal(count(s, " = rmsnorm "), 1);
      assert_null(strstr(s, "rmsnorm."));
    }
    free(s);
    release(&c);
  }
}

/* The shape rule of a hand-made fused node: message for each malformation. */
static void expect(compiled *c, const uint32_t *in, uint16_t nin, const char *prog, const char *want) {
  mlc_func *f = &c->prog.funcs[0];
  mlc_attrs a = {.name = prog};
  uint32_t id = mlc_func_add(&c->prog, f, MLC_OP_FUSED, in, nin, &a, (mlc_loc){0}, "");
  char err[256] = "";
  mlc_type t;
  bool ok = mlc_infer_type(&c->prog, f, &f->nodes[id], &t, err, sizeof err);
  if (!want) {
    if (!ok) fail_msg("'%s': %s", prog, err);
    f->n--;
    return;
  }
  if (ok) fail_msg("'%s' accepted", prog);
  if (!strstr(err, want)) fail_msg("'%s': want '%s' in '%s'", prog, want, err);
  f->n--;
}

static void test_shape_rule(void **state) {
  (void)state;
  compiled c;
  free(run(&c, mlp_src, NULL, "forward"));
  /* %0 x f32[32, 64], %1 r f32[32, 16], %2 weight f32[16, 64], %3 bias f32[16] */
  uint32_t xwb[3] = {0, 2, 3}, rb[2] = {1, 3}, xr[2] = {0, 1};
  expect(&c, xwb, 3, "linear($0, $1); add(#0, $2)", NULL);
  expect(&c, rb, 2, "mul($0, $1); cast.bf16(#0); exp(#1)", NULL);
  expect(&c, rb, 2, "add($0, $5)", "$5 but the node has 2 inputs");
  expect(&c, rb, 2, "add(#1, $0)", "#1 used before it is defined");
  expect(&c, rb, 2, "frob($0)", "unknown op 'frob'");
  expect(&c, rb, 2, "cast($0)", "cast without a dtype");
  expect(&c, rb, 2, "cast.f33($0)", "bad dtype");
  expect(&c, rb, 2, "add($0)", "add takes 2 operands");
  expect(&c, rb, 2, "add($0, $1) mul(#0, $1)", "';' expected");
  expect(&c, rb, 2, "exp($0); linear($0, $1)", "linear at instruction 1");
  expect(&c, xr, 2, "add($0, $1)", "cannot broadcast");
  uint32_t xwr[3] = {0, 2, 1};
  expect(&c, xwr, 3, "linear($0, $1); add(#0, $2)", NULL);
  uint32_t xwx[3] = {0, 2, 0};
  expect(&c, xwx, 3, "linear($0, $1); add(#0, $2)", "cannot broadcast");
  expect(&c, rb, 2, "", "empty fused program");
  expect(&c, xwb, 3, "qlinear($0, $1); add(#0, $2)", "qlinear without .<bits>.<group>");
  expect(&c, xwb, 3, "qlinear.4($0, $1); add(#0, $2)", "qlinear without .<bits>.<group>");
  expect(&c, xwb, 3, "qlinear.4.x($0, $1); add(#0, $2)", "qlinear without .<bits>.<group>");
  expect(&c, xwb, 3, "qlinear.4.32($0, $1); add(#0, $2)", "packed weight"); /* an f32 weight is not the packed one */
  expect(&c, rb, 2, "exp($0); qlinear.4.32($0, $1)", "qlinear at instruction 1");
  /* prologues: x %0 [32, 64], weight %2 [16, 64], a norm weight and a bias (%3 [16] stands in: the
   * norm's must be [64], so the last one fails on its shape) */
  uint32_t xw[2] = {0, 2}, xwbb[4] = {0, 2, 3, 3};
  expect(&c, xw, 2, "rmsnorm.1e-5($0); linear(#0, $1)", NULL);
  expect(&c, xw, 2, "rmsnorm($0); linear(#0, $1)", "rmsnorm without .<eps>");
  expect(&c, xw, 2, "rmsnorm.-1($0); linear(#0, $1)", "rmsnorm without .<eps>");
  expect(&c, xw, 2, "rmsnorm.1e-5($0)", "a prologue is rmsnorm");
  expect(&c, xw, 2, "rmsnorm.1e-5($1); linear(#0, $1)", "a prologue is rmsnorm");
  expect(&c, xw, 2, "rmsnorm.1e-5($0); matmul(#0, $1)", "a prologue is rmsnorm");
  expect(&c, xw, 2, "rmsnorm.1e-5($0); linear($0, $1)", "linear at instruction 1");
  expect(&c, xw, 2, "rmsnorm.1e-5($0); linear(#0, $1); add(#1, #0)", "reads the prologue");
  expect(&c, xw, 2, "linear($0, $1); rmsnorm.1e-5(#0)", "rmsnorm at instruction 1");
  expect(&c, xwbb, 4, "rmsnorm.1e-5($0, $2); linear(#0, $1); add(#1, $3)", "weight");
  release(&c);
}

/* CUDA: one group node (multi) for the three parameters' updates (one),
 * nin inputs, every update output its token; Metal keeps one per tensor. */
static void check_update_multi(const char *optimizer, mlc_op one, mlc_op multi, uint32_t nin) {
  compiled c;
  char src[512];
  snprintf(src, sizeof src, update_src, optimizer, "");
  char pat1[32], patm[32];
  snprintf(pat1, sizeof pat1, " = %s ", mlc_ops[one].name);
  snprintf(patm, sizeof patm, " = %s ", mlc_ops[multi].name);
  char *s = run(&c, src, "cuda", "train");
  assert_int_equal(count(s, patm), 1);
  assert_int_equal(count(s, pat1), 0);
  const mlc_func *f = NULL;
  for (uint32_t k = 0; k < c.prog.nfuncs; k++)
    if (!strcmp(c.prog.funcs[k].name, "train")) f = &c.prog.funcs[k];
  uint32_t tok = UINT32_MAX, nupd = 0;
  for (uint32_t i = 0; i < f->n; i++)
    if (f->nodes[i].op == multi) tok = i;
  assert_int_equal(f->nodes[tok].nin, nin);
  for (uint32_t o = 0; o < f->noutputs; o++)
    if (!strncmp(f->outputs[o].name, "update:", 7)) {
      assert_int_equal(f->outputs[o].node, tok);
      nupd++;
    }
  assert_int_equal(nupd, 3);
  free(s);
  release(&c);
  s = run(&c, src, "metal", "train");
  assert_int_equal(count(s, patm), 0);
  assert_int_equal(count(s, pat1), 3);
  free(s);
  release(&c);
}

/* 3 parameters (a.weight, a.bias, b.weight): adamw_multi takes 5 inputs
 * each (the last the parameter itself: no shadow in f32), the step and the
 * rate; sgd_multi 4 each and the rate. */
static void test_adamw_multi(void **state) {
  (void)state;
  check_update_multi("AdamW(lr=1e-3)", MLC_OP_ADAMW, MLC_OP_ADAMW_MULTI, 17);
}
static void test_sgd_multi(void **state) {
  (void)state;
  check_update_multi("SGD(lr=1e-3, momentum=0.9)", MLC_OP_SGD, MLC_OP_SGD_MULTI, 13);
}

/* precision(param=bf16): each weight's gradient is bf16, widened to f32 by
 * a cast only its update reads.  The group reads the bf16 values (the
 * kernel widens them as it loads) and the casts go; with clip_grad_norm the
 * sum of squares reads the cast too, so it stays, and the group reads f32.
 * The shape rule takes a 16-bit gradient of an f32 parameter only in that
 * form. */
static void test_update_grad16(void **state) {
  (void)state;
  for (int clip = 0; clip < 2; clip++) {
    compiled c;
    char src[1024];
    snprintf(src, sizeof src, update_src, "AdamW(lr=1e-3)",
             clip ? "  precision(param=bf16, reduce=f32)\n  clip_grad_norm = 1.0\n" : "  precision(param=bf16, reduce=f32)\n");
    char *s = run(&c, src, "cuda", "train");
    const mlc_func *f = NULL;
    for (uint32_t k = 0; k < c.prog.nfuncs; k++)
      if (!strcmp(c.prog.funcs[k].name, "train")) f = &c.prog.funcs[k];
    uint32_t groups = 0, wide = 0;
    for (uint32_t i = 0; i < f->n; i++) {
      const mlc_node *n = &f->nodes[i];
      if (n->op == MLC_OP_CAST && n->type.dtype == MLC_DT_F32 && f->nodes[n->in[0]].type.dtype == MLC_DT_BF16) wide++;
      if (n->op != MLC_OP_ADAMW_MULTI) continue;
      groups++;
      assert_int_equal(n->nin, 17);
      for (uint32_t k = 0; k < 3; k++) {
        assert_int_equal(f->nodes[n->in[5 * k]].type.dtype, MLC_DT_F32);
        assert_int_equal(f->nodes[n->in[5 * k + 1]].type.dtype, clip ? MLC_DT_F32 : MLC_DT_BF16);
        assert_int_equal(f->nodes[n->in[5 * k + 2]].type.dtype, MLC_DT_F32);
      }
    }
    assert_int_equal(groups, 1);
    if (!clip) assert_int_equal(wide, 0);
    else assert_true(wide >= 3);
    if (!clip) { /* the rule: a 16-bit gradient of another shape is refused */
      mlc_func *fm = (mlc_func *)f;
      for (uint32_t i = 0; i < fm->n; i++) {
        mlc_node *n = &fm->nodes[i];
        if (n->op != MLC_OP_ADAMW_MULTI) continue;
        uint32_t keep = n->in[1];
        mlc_type out;
        char err[256];
        assert_true(mlc_infer_type(&c.prog, fm, n, &out, err, sizeof err));
        for (uint32_t k = 1; k < 3; k++) /* another member's bf16 gradient, of another shape */
          if (!mlc_type_eq(&fm->nodes[n->in[5 * k + 1]].type, &fm->nodes[keep].type)) n->in[1] = n->in[5 * k + 1];
        assert_int_not_equal(n->in[1], keep);
        assert_false(mlc_infer_type(&c.prog, fm, n, &out, err, sizeof err));
        assert_non_null(strstr(err, "the gradient and state must have the parameter's type"));
        n->in[1] = keep;
      }
    }
    free(s);
    release(&c);
  }
}

/* precision(param=bf16) on CUDA: the forward's casts of the two weights
 * to bf16 become their shadows (MLC_ROLE_SHADOW), which the group writes:
 * each member's last input is its weight's shadow, or (the bias, whose
 * cast is a GEMM epilogue's) the parameter itself.  No node after the group
 * reads a shadow, nor does the forward entry; f32 compute has no shadows.
 * The shape rule refuses a shadow of another shape. */
static void test_weight_shadows(void **state) {
  (void)state;
  for (int opt = 0; opt < 3; opt++) {
    compiled c;
    char src[1024];
    snprintf(src, sizeof src, update_src, opt == 1 ? "SGD(lr=1e-3, momentum=0.9)" : "AdamW(lr=1e-3)",
             opt == 2 ? "" : "  precision(param=bf16, reduce=f32)\n");
    free(run(&c, src, "cuda", "train"));
    const mlc_func *f = NULL, *fwd = NULL;
    for (uint32_t k = 0; k < c.prog.nfuncs; k++) {
      if (!strcmp(c.prog.funcs[k].name, "train")) f = &c.prog.funcs[k];
      if (!strcmp(c.prog.funcs[k].name, "forward")) fwd = &c.prog.funcs[k];
    }
    assert_non_null(f);
    assert_non_null(fwd);
    uint32_t shadows = 0, casts = 0, fwd_shadows = 0, group = UINT32_MAX;
    for (uint32_t i = 0; i < c.prog.nparams; i++) {
      const mlc_param *prm = &c.prog.params[i];
      if (prm->role != MLC_ROLE_SHADOW) continue;
      shadows++;
      const mlc_param *w = &c.prog.params[prm->quant_of - 1];
      assert_int_equal(prm->type.dtype, MLC_DT_BF16);
      assert_int_equal(w->type.dtype, MLC_DT_F32);
      assert_true(!strcmp(w->name, "a.weight") || !strcmp(w->name, "b.weight"));
    }
    assert_int_equal(shadows, opt == 2 ? 0 : 2);
    for (uint32_t i = 0; i < f->n; i++) {
      const mlc_node *n = &f->nodes[i];
      casts += n->op == MLC_OP_CAST && f->nodes[n->in[0]].op == MLC_OP_PARAM && n->type.dtype == MLC_DT_BF16;
      if (n->op == MLC_OP_ADAMW_MULTI || n->op == MLC_OP_SGD_MULTI) group = i;
    }
    for (uint32_t i = 0; i < fwd->n; i++)
      fwd_shadows += fwd->nodes[i].op == MLC_OP_PARAM && c.prog.params[fwd->nodes[i].a.param].role == MLC_ROLE_SHADOW;
    assert_int_equal(casts, 0);
    assert_int_equal(fwd_shadows, 0);
    assert_int_not_equal(group, UINT32_MAX);
    mlc_node *g = &f->nodes[group];
    uint32_t per, tail, with = 0, other = UINT32_MAX, mine = UINT32_MAX;
    mlc_update_layout(g->op, &per, &tail);
    assert_int_equal(g->nin, 3 * per + tail);
    for (uint32_t k = 0; k < 3; k++) {
      const mlc_node *sh = &f->nodes[g->in[per * k + per - 1]], *w = &f->nodes[g->in[per * k]];
      if (g->in[per * k + per - 1] == g->in[per * k]) continue;
      with++;
      assert_int_equal(sh->op, MLC_OP_PARAM);
      assert_int_equal(c.prog.params[sh->a.param].role, MLC_ROLE_SHADOW);
      assert_int_equal(c.prog.params[sh->a.param].quant_of, w->a.param + 1);
      for (uint32_t i = group + 1; i < f->n; i++)
        for (uint32_t j = 0; j < f->nodes[i].nin; j++) assert_int_not_equal(f->nodes[i].in[j], g->in[per * k + per - 1]);
      if (mine == UINT32_MAX) mine = per * k + per - 1;
      else other = g->in[per * k + per - 1];
    }
    assert_int_equal(with, opt == 2 ? 0 : 2);
    if (opt != 0) {
      release(&c);
      continue;
    }
    /* the rule: the other weight's shadow ([4, 8] against [8, 8]) in this one's place */
    mlc_type out;
    char err[256];
    assert_true(mlc_infer_type(&c.prog, f, g, &out, err, sizeof err));
    uint32_t keep = g->in[mine];
    g->in[mine] = other;
    assert_false(mlc_infer_type(&c.prog, f, g, &out, err, sizeof err));
    assert_non_null(strstr(err, "the gradient, shadow and state must have the parameter's type"));
    g->in[mine] = keep;
    release(&c);
  }
}

/* attention of bf16 [1, 2, 16, D] parameters, trained */
static char *attn_src(char *buf, size_t n, const char *dt, int d) {
  snprintf(buf, n,
           "module A {\n"
           "  param q: %s[1, 2, 16, %d] = normal(0, 1)\n"
           "  param k: %s[1, 2, 16, %d] = normal(0, 1)\n"
           "  param v: %s[1, 2, 16, %d] = normal(0, 1)\n"
           "  forward(r: %s[1, 2, 16, %d]) { return attention(q, k, v) * r }\n"
           "}\n"
           "train A {\n"
           "  input r: %s[1, 2, 16, %d]\n"
           "  loss = cast(sum(model(r)), f32)\n"
           "}\n",
           dt, d, dt, d, dt, d, dt, d, dt, d);
  return buf;
}

static void test_attnsave(void **state) {
  (void)state;
  char src[1024];
  compiled c;
  /* CUDA, bf16, head dim 32: the forward saves, the gradient reads it */
  char *s = run(&c, attn_src(src, sizeof src, "bf16", 32), "cuda", "train");
  assert_int_equal(count(s, " = attention_save "), 1);
  assert_int_equal(count(s, " = attention_grad_saved "), 1);
  assert_int_equal(count(s, " = attention "), 0);
  assert_int_equal(count(s, " = attention_grad "), 0);
  assert_non_null(strstr(s, "causal=0 scale=0.176776695 : bf16[1088]")); /* 1*2*16*32 outputs, then 2 slots for each of 32 rows */
  /* the saved output's view, and dq, dk and dv as views of the gradient's [3, ...] (passes/views.c) */
  assert_int_equal(count(s, " = view "), 4);
  assert_int_equal(count(s, " = slice "), 0);
  free(s);
  release(&c);
  s = run(&c, attn_src(src, sizeof src, "bf16", 32), "cuda", "forward"); /* nothing to save for */
  assert_int_equal(count(s, " = attention "), 1);
  assert_int_equal(count(s, " = attention_save "), 0);
  free(s);
  release(&c);
  /* packed: q, k, v straight from the in-projection, no slices, transposes or concat around them */
  static const char *mha =
      "module B {\n"
      "  attn = MultiheadAttention(64, 2)\n"
      "  forward(x: f32[2, 16, 64]) { return attn(x, x, x) }\n"
      "}\n"
      "train B {\n"
      "  input x: f32[2, 16, 64]\n"
      "  loss = sum(model(x))\n"
      "  precision(param=bf16, reduce=f32)\n"
      "}\n";
  s = run(&c, mha, "cuda", "train");
  assert_non_null(strstr(s, "  %6 = reshape %5 : bf16[2, 16, 6, 32] "));
  assert_non_null(strstr(s, "  %7 = attention_save %6 causal=0 scale=0.176776695 : bf16[2176] "));
  assert_non_null(strstr(s, "  %8 = view %7 start=0 end=2048 : bf16[2, 16, 2, 32] "));
  assert_non_null(strstr(s, "  %9 = reshape %8 : bf16[2, 16, 64] "));
  assert_non_null(strstr(s, " = attention_grad_saved %31, %6, %7 causal=0 scale=0.176776695 : bf16[2, 16, 6, 32]"));
  assert_int_equal(count(s, " = slice "), 0);
  assert_int_equal(count(s, " = concat "), 0);
  assert_int_equal(count(s, "axis=1 axis2=2"), 0);
  free(s);
  release(&c);
  /* inference: the packed forward alone */
  static const char *infer =
      "module C {\n"
      "  attn = MultiheadAttention(64, 2, dtype=bf16)\n"
      "  forward(x: bf16[2, 16, 64]) { return attn(x, x, x) }\n"
      "}\n";
  s = run(&c, infer, "cuda", "forward");
  assert_non_null(strstr(s, " = attention_save %4 causal=0 scale=0.176776695 : bf16[2176] "));
  assert_int_equal(count(s, " = slice "), 0);
  assert_int_equal(count(s, "axis=1 axis2=2"), 0);
  free(s);
  release(&c);
  s = run(&c, infer, "metal", "forward");
  assert_int_equal(count(s, " = attention "), 1);
  assert_int_equal(count(s, " = attention_save "), 0);
  free(s);
  release(&c);
  /* what the CUDA kernels do not take, and the other targets: unchanged */
  /* f32 on CUDA (3xTF32 tensor cores, the default --f32-matmul): head dims a multiple of 8 */
  s = run(&c, attn_src(src, sizeof src, "f32", 40), "cuda", "train");
  assert_int_equal(count(s, " = attention_save "), 1);
  assert_int_equal(count(s, " = attention_grad_saved "), 1);
  free(s);
  release(&c);
  const struct { const char *dt, *target; int d; } keep[] = {{"bf16", "metal", 32}, {"bf16", "cuda", 288}, {"f16", "cpu", 64}};
  for (size_t i = 0; i < sizeof keep / sizeof *keep; i++) {
    s = run(&c, attn_src(src, sizeof src, keep[i].dt, keep[i].d), keep[i].target, "train");
    assert_int_equal(count(s, " = attention_save "), 0);
    assert_int_equal(count(s, " = attention_grad "), 1);
    free(s);
    release(&c);
  }
}

/* attnpad (passes/attnpad.c): on CUDA, head dims the tensor-core kernels do
 * not take run zero-padded to the next multiple (8 for f32, 32 for 16 bits),
 * the pads shared by the forward and its gradient, so attnsave still pairs
 * them; the outputs are sliced back. */
static void test_attnpad(void **state) {
  (void)state;
  char src[1024];
  compiled c;
  const struct { const char *dt; int d; const char *save; } pad[] = {
      {"f32", 20, "causal=0 scale=0.223606798 : f32[800]"},   /* 1*2*16*24, then a slot for each of 32 rows */
      {"bf16", 24, "causal=0 scale=0.204124145 : bf16[1088]"}, /* 1*2*16*32, then 2 slots for each of 32 rows */
  };
  for (size_t i = 0; i < sizeof pad / sizeof *pad; i++) {
    char *s = run(&c, attn_src(src, sizeof src, pad[i].dt, pad[i].d), "cuda", "train");
    assert_int_equal(count(s, " = slice_grad "), 4); /* q, k, v and the output's gradient */
    assert_int_equal(count(s, " = attention_save "), 1);
    assert_non_null(strstr(s, pad[i].save));
    assert_int_equal(count(s, " = attention_grad_saved "), 1);
    char want[64];
    snprintf(want, sizeof want, "axis=4 start=0 end=%d : %s[3, 1, 2, 16, %d]", pad[i].d, pad[i].dt, pad[i].d);
    assert_non_null(strstr(s, want)); /* dq, dk, dv sliced back */
    free(s);
    release(&c);
  }
  /* a 16-bit forward its kernel takes (d % 16 == 0) with no gradient: as it is; trained: padded to 64 */
  char *s = run(&c, attn_src(src, sizeof src, "bf16", 48), "cuda", "forward");
  assert_int_equal(count(s, " = slice_grad "), 0);
  assert_int_equal(count(s, " = attention "), 1);
  free(s);
  release(&c);
  s = run(&c, attn_src(src, sizeof src, "bf16", 48), "cuda", "train");
  assert_int_equal(count(s, " = slice_grad "), 4);
  assert_non_null(strstr(s, ": bf16[1, 2, 16, 64]"));
  free(s);
  release(&c);
  /* past 128, up to the kernels' 256 (MLC_CUDA_ATTN_MAX_HEAD): padded too */
  const struct { const char *dt; int d; const char *shape; } big[] = {{"bf16", 136, ": bf16[1, 2, 16, 160]"},
                                                                       {"f32", 130, ": f32[1, 2, 16, 136]"}};
  for (size_t i = 0; i < sizeof big / sizeof *big; i++) {
    s = run(&c, attn_src(src, sizeof src, big[i].dt, big[i].d), "cuda", "train");
    assert_int_equal(count(s, " = slice_grad "), 4);
    assert_non_null(strstr(s, big[i].shape));
    assert_int_equal(count(s, " = attention_save "), 1);
    assert_int_equal(count(s, " = attention_grad_saved "), 1);
    free(s);
    release(&c);
  }
  /* other targets and head dims past 256: unchanged */
  s = run(&c, attn_src(src, sizeof src, "f32", 20), "metal", "train");
  assert_int_equal(count(s, " = slice_grad "), 0);
  free(s);
  release(&c);
  s = run(&c, attn_src(src, sizeof src, "f32", 260), "cuda", "train");
  assert_int_equal(count(s, " = slice_grad "), 0);
  assert_int_equal(count(s, " = attention_grad "), 1);
  free(s);
  release(&c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_metal_epilogue),
      cmocka_unit_test(test_cuda_policy),
      cmocka_unit_test(test_shape_rule),
      cmocka_unit_test(test_qlinear_epilogue),
      cmocka_unit_test(test_gemv_prologue),
      cmocka_unit_test(test_adamw_multi),
      cmocka_unit_test(test_sgd_multi),
      cmocka_unit_test(test_update_grad16),
      cmocka_unit_test(test_weight_shadows),
      cmocka_unit_test(test_attnsave),
      cmocka_unit_test(test_attnpad),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
