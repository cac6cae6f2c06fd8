/* Memory planning of the train step: the optimizer inside the backward
 * (passes/interleave.c, and the AdamW groups of passes/fuse.c).
 *
 * Checked on the IR after the whole pipeline, with no code generated:
 *   - no update runs before a node that still reads what it writes (the
 *     parameter, its state, or a view of them): results cannot change;
 *   - on the CPU target (one update per parameter) each update comes right
 *     after the last node it waits for; on CUDA the groups run inside the
 *     backward, the first long before it ends;
 *   - the "grad:" outputs are gone unless asked for (keep_grads), and
 *     memplan then reuses each gradient's bytes: a model whose gradients
 *     dominate plans far less memory than with every gradient kept. */
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

/* Compiles src through the pipeline for target; its train function, or NULL on any error. */
static const mlc_func *compile(compiled *c, const char *src, const mlc_define *defs, uint32_t ndefs, const char *target,
                               bool keep_grads) {
  mlc_pipeline_options po = {.target = target, .keep_grads = keep_grads};
  bool ok = compiled_frontend(c, src, defs, ndefs) && mlc_pipeline_run(&c->prog, &c->diag, &po);
  fflush(c->errf);
  if (!ok) fprintf(stderr, "%s", c->err);
  return ok ? compiled_func(&c->prog, "train") : NULL;
}

static bool is_leaf(const mlc_node *n) { return (mlc_ops[n->op].flags & MLC_F_LEAF) != 0; }

/* The parameter node a value's storage is (through views), or UINT32_MAX. */
static uint32_t param_of(const mlc_func *f, uint32_t v) {
  while (v != UINT32_MAX && f->nodes[v].op != MLC_OP_PARAM)
    v = (mlc_ops[f->nodes[v].op].flags & MLC_F_VIEW) && f->nodes[v].nin ? f->nodes[v].in[0] : UINT32_MAX;
  return v;
}

/* Does update u write parameter node w in place (the parameter, its state or its shadow)? */
static bool writes(const mlc_func *f, uint32_t u, uint32_t w) {
  const mlc_node *n = &f->nodes[u];
  bool sgd = n->op == MLC_OP_SGD || n->op == MLC_OP_SGD_MULTI;
  uint32_t per, tail;
  mlc_update_layout(n->op, &per, &tail);
  const uint32_t ngroups = (n->nin - tail) / per;
  for (uint32_t g = 0; g < ngroups; g++) {
    const uint32_t *in = n->in + per * g;
    if (param_of(f, in[0]) == w || param_of(f, in[2]) == w) return true;
    if (!sgd && param_of(f, in[3]) == w) return true;
    if ((n->op == MLC_OP_ADAMW_MULTI || n->op == MLC_OP_SGD_MULTI) && param_of(f, in[per - 1]) == w) return true; /* a shadow */
  }
  return false;
}

/* No node after an update reads what the update wrote. */
static void check_no_late_reads(const mlc_func *f) {
  for (uint32_t u = 0; u < f->n; u++) {
    if (!mlc_op_is_update(f->nodes[u].op)) continue;
    for (uint32_t i = u + 1; i < f->n; i++) {
      const mlc_node *n = &f->nodes[i];
      if (mlc_op_is_update(n->op)) continue;
      for (uint32_t k = 0; k < n->nin; k++) {
        uint32_t w = param_of(f, n->in[k]);
        if (w != UINT32_MAX && writes(f, u, w))
          fail_msg("%%%u (%s) reads parameter %%%u after its update %%%u", i, mlc_ops[n->op].name, w, u);
      }
    }
  }
}

/* The plan itself: two values alive at once never share bytes, except a
 * view and what it views, (CUDA) cross_entropy_grad over the logits
 * that die at it, and the pieces of a concat packed in place (fsdp) inside
 * it, which is alive from its first piece on.  Returns how many such
 * in-place pairs there were (the pieces not counted). */
static uint32_t check_plan_disjoint(const mlc_func *f, bool cuda) {
  uint32_t n = f->n, inplace = 0;
  uint32_t *root = malloc(n * sizeof *root), *last = malloc(n * sizeof *last), *born = malloc(n * sizeof *born);
  for (uint32_t i = 0; i < n; i++) {
    const mlc_node *nd = &f->nodes[i];
    root[i] = (nd->op == MLC_OP_RESHAPE || nd->op == MLC_OP_VIEW || nd->op == MLC_OP_REDUCE_SCATTER) ? root[nd->in[0]] : i;
    last[i] = i;
    born[i] = nd->op == MLC_OP_INPUT || nd->op == MLC_OP_CONST ? 0 : i; /* alive from the start */
    for (uint32_t k = 0; k < nd->nin; k++) last[root[nd->in[k]]] = i;
  }
  for (uint32_t i = 0; i < n; i++)
    if (mlc_node_in_place(f, i))
      for (uint32_t k = 0; k < f->nodes[i].nin; k++)
        if (root[f->nodes[i].in[k]] < born[i]) born[i] = root[f->nodes[i].in[k]];
  for (uint32_t o = 0; o < f->noutputs; o++) last[root[f->outputs[o].node]] = n;
  for (uint32_t i = 0; i < n; i++)
    if (f->nodes[i].op == MLC_OP_INPUT || f->nodes[i].op == MLC_OP_CONST) last[i] = n;
  for (uint32_t b = 0; b < n; b++) {
    const mlc_node *bn = &f->nodes[b];
    if (root[b] != b || bn->op == MLC_OP_PARAM) continue;
    int64_t bs = mlc_type_numel(&bn->type) * mlc_dtype_size(bn->type.dtype);
    for (uint32_t a = 0; a < n; a++) {
      const mlc_node *an = &f->nodes[a];
      if (a == b || root[a] != a || an->op == MLC_OP_PARAM) continue;
      if (born[a] > born[b] || (born[a] == born[b] && a > b)) continue; /* each pair once, a the earlier born */
      if (last[a] < born[b]) continue;
      int64_t as = mlc_type_numel(&an->type) * mlc_dtype_size(an->type.dtype);
      if (f->offset[a] >= f->offset[b] + bs || f->offset[b] >= f->offset[a] + as) continue;
      if (cuda && bn->op == MLC_OP_CROSS_ENTROPY_GRAD && bn->in[1] == a && last[a] == b && f->offset[a] == f->offset[b]) {
        inplace++;
        continue;
      }
      bool piece = false; /* a piece of a concat packed in place, inside it */
      for (uint32_t k = 0; k < bn->nin && !piece; k++) piece = mlc_node_in_place(f, b) && root[bn->in[k]] == a && last[a] == b;
      for (uint32_t k = 0; k < an->nin && !piece; k++) piece = mlc_node_in_place(f, a) && root[an->in[k]] == b && last[b] == a;
      if (piece) continue;
      fail_msg("%%%u (%s) and %%%u (%s) are alive at once and share bytes", a, mlc_ops[an->op].name, b, mlc_ops[bn->op].name);
    }
  }
  free(root);
  free(last);
  free(born);
  return inplace;
}

static uint32_t count_grad_outputs(const mlc_func *f) {
  uint32_t n = 0;
  for (uint32_t o = 0; o < f->noutputs; o++) n += !strncmp(f->outputs[o].name, "grad:", 5);
  return n;
}

static const mlc_define small[6] = {{"vocab", "512"}, {"dim", "128"}, {"layers", "3"}, {"heads", "4"}, {"batch", "2"}, {"seq", "64"}};

/* CPU target, f32 and bf16: one update per parameter, each right after the
 * last node it waits for. */
static void test_cpu_updates_at_ready_points(void **state) {
  (void)state;
  const char *src = compiled_read(MLC_SOURCE_DIR "/examples/minillm.mdl");
  assert_non_null(src);
  for (int bf16 = 0; bf16 < 2; bf16++) {
    mlc_define defs[7];
    memcpy(defs, small, sizeof small);
    defs[6] = (mlc_define){"compute", bf16 ? "bf16" : "f32"};
    compiled c;
    const mlc_func *f = compile(&c, src, defs, 7, "cpu", false);
    assert_non_null(f);
    check_no_late_reads(f);
    assert_int_equal(count_grad_outputs(f), 0);
    uint32_t nupd = 0;
    for (uint32_t u = 0; u < f->n; u++) {
      const mlc_node *n = &f->nodes[u];
      if (n->op != MLC_OP_ADAMW) continue;
      nupd++;
      /* the node it waits for: its latest computed input, or the last reader of the parameter */
      uint32_t ready = 0;
      for (uint32_t k = 0; k < n->nin; k++)
        if (!is_leaf(&f->nodes[n->in[k]]) && n->in[k] > ready) ready = n->in[k];
      for (uint32_t i = 0; i < u; i++)
        for (uint32_t k = 0; k < f->nodes[i].nin; k++)
          if (!mlc_op_is_update(f->nodes[i].op) && param_of(f, f->nodes[i].in[k]) == n->in[0] && i > ready) ready = i;
      for (uint32_t i = ready + 1; i < u; i++)
        if (!is_leaf(&f->nodes[i]) && !mlc_op_is_update(f->nodes[i].op))
          fail_msg("compute=%s: update %%%u waits for %%%u but comes after %%%u (%s)", bf16 ? "bf16" : "f32", u, ready, i,
                   mlc_ops[f->nodes[i].op].name);
    }
    assert_int_equal(nupd, 3 * 8 + 2); /* every weight: 8 a block, the embedding and the head */
    release(&c);
  }
}

/* CUDA: AdamW in groups by readiness, inside the backward. */
static void test_cuda_groups_inside_backward(void **state) {
  (void)state;
  const char *src = compiled_read(MLC_SOURCE_DIR "/examples/minillm.mdl");
  assert_non_null(src);
  compiled c;
  const mlc_func *f = compile(&c, src, small, 6, "cuda", false);
  assert_non_null(f);
  check_no_late_reads(f);
  assert_int_equal(count_grad_outputs(f), 0);
  uint32_t groups = 0, members = 0, first = UINT32_MAX, last_compute = 0;
  for (uint32_t i = 0; i < f->n; i++) {
    const mlc_node *n = &f->nodes[i];
    if (n->op == MLC_OP_ADAMW) fail_msg("an adamw left out of the groups at %%%u", i);
    if (n->op == MLC_OP_ADAMW_MULTI) {
      groups++;
      members += n->nin / 5;
      if (first == UINT32_MAX) first = i;
    } else if (!is_leaf(n)) {
      last_compute = i;
    }
  }
  assert_int_equal(members, 3 * 8 + 2);
  assert_true(groups >= 2); /* 13 a group at most (5 inputs each within 72 arguments) */
  /* the first group runs while the backward still computes the gradients
   * of later groups */
  assert_true(first < last_compute);
  uint32_t later = 0;
  for (uint32_t i = first + 1; i < f->n; i++)
    if (f->nodes[i].op == MLC_OP_ADAMW_MULTI)
      for (uint32_t k = 1; k < f->nodes[i].nin; k += 5) later += f->nodes[i].in[k] > first;
  assert_true(later > 0);
  release(&c);
}

/* The residual adds after the norms' input gradients go into the norm
 * kernels on CUDA and Metal (the fuse pass's norm_grad_adds): two a layer,
 * no add left that reads a norm's gradient; SPIR-V keeps the adds. */
static void test_norm_grad_adds(void **state) {
  (void)state;
  const char *src = compiled_read(MLC_SOURCE_DIR "/examples/minillm.mdl");
  assert_non_null(src);
  const char *targets[] = {"cuda", "metal", "spirv"};
  for (int t = 0; t < 3; t++) {
    compiled c;
    const mlc_func *f = compile(&c, src, small, 6, targets[t], false);
    assert_non_null(f);
    uint32_t with = 0, adds = 0;
    for (uint32_t i = 0; i < f->n; i++) {
      const mlc_node *n = &f->nodes[i];
      if (n->op == MLC_OP_RMSNORM_GRAD_X) {
        with += n->nin == 4;
        if (n->nin == 4) assert_true(mlc_type_eq(&f->nodes[n->in[3]].type, &n->type));
      }
      if (n->op == MLC_OP_ADD)
        for (uint32_t k = 0; k < n->nin; k++) adds += f->nodes[n->in[k]].op == MLC_OP_RMSNORM_GRAD_X;
    }
    assert_int_equal(with, t < 2 ? 2 * 3 : 0); /* two norms a layer, three layers */
    assert_int_equal(adds, t < 2 ? 0 : 2 * 3);
    check_no_late_reads(f);
    release(&c);
  }
}

/* Gradients that dominate memory (wide layers, two rows a batch): with the
 * updates inside the backward, memplan holds about one gradient at a time,
 * not all of them; under AdamW and under SGD (on CUDA, adamw_multi and
 * sgd_multi groups). */
static void test_gradients_freed(void **state) {
  (void)state;
  static const char fmt[] =
      "config { batch = 2  width = 2048 }\n"
      "module Deep(width) {\n"
      "    net = Sequential(Linear(width, width), ReLU(), Linear(width, width), ReLU(), Linear(width, width), ReLU(),\n"
      "                     Linear(width, width), ReLU(), Linear(width, width), ReLU(), Linear(width, width))\n"
      "    forward(x: f32[batch, width]) { return net(x) }\n"
      "}\n"
      "train Deep {\n"
      "    input x: f32[batch, width]\n"
      "    input labels: i32[batch]\n"
      "    loss = cross_entropy(model(x), labels)\n"
      "    optimizer = %s\n"
      "}\n";
  const char *targets[] = {"cpu", "cuda"}, *optimizers[] = {"AdamW(lr=0.001)", "SGD(lr=0.001, momentum=0.9)"};
  int64_t weight = 2048 * 2048 * 4; /* one weight's f32 gradient: 16 MiB */
  for (int t = 0; t < 4; t++) {
    char src[sizeof fmt + 64];
    snprintf(src, sizeof src, fmt, optimizers[t / 2]);
    compiled freed, kept;
    const mlc_func *ff = compile(&freed, src, NULL, 0, targets[t % 2], false), *fk = compile(&kept, src, NULL, 0, targets[t % 2], true);
    assert_non_null(ff);
    assert_non_null(fk);
    assert_int_equal(count_grad_outputs(ff), 0);
    assert_int_equal(count_grad_outputs(fk), 12);
    check_no_late_reads(ff);
    /* six weight gradients alive at the end when kept; otherwise the one
     * being made, and on CUDA those of the update group waiting for it
     * (32 MiB: two of these) */
    assert_true(fk->arena_bytes >= 6 * weight);
    assert_true(ff->arena_bytes <= (t % 2 ? 3 : 1) * weight + weight / 4);
    if (t % 2) {
      uint32_t groups = 0;
      for (uint32_t i = 0; i < ff->n; i++) groups += ff->nodes[i].op == (t / 2 ? MLC_OP_SGD_MULTI : MLC_OP_ADAMW_MULTI);
      assert_true(groups >= 2);
    }
    release(&freed);
    release(&kept);
  }
}

/* A memory budget (passes/recompute.c), on the CPU and CUDA pipelines:
 * too small a one is refused with the smallest budget the model reaches;
 * that one is then met, as is one halfway, with fewer recomputations; a
 * budget the plan already meets changes nothing.  The recomputations read
 * no parameter after its update. */
static const mlc_func *compile_budget(compiled *c, const char *src, const char *target, int64_t budget) {
  mlc_define defs[7];
  memcpy(defs, small, sizeof small);
  defs[6] = (mlc_define){"compute", "bf16"};
  mlc_pipeline_options po = {.target = target};
  if (!compiled_frontend(c, src, defs, 7)) return NULL;
  c->prog.opts.memory_budget = budget;
  bool ok = mlc_pipeline_run(&c->prog, &c->diag, &po);
  fflush(c->errf);
  return ok ? compiled_func(&c->prog, "train") : NULL;
}

static uint32_t count_segments(const mlc_program *p) {
  uint32_t k = 0;
  for (uint32_t i = 0; i < p->recompute.n; i++) k += p->recompute.v[i].nops > 0;
  return k;
}

static void test_budget(void **state) {
  (void)state;
  const char *src = compiled_read(MLC_SOURCE_DIR "/examples/minillm.mdl");
  assert_non_null(src);
  const char *targets[] = {"cpu", "cuda"};
  for (int t = 0; t < 2; t++) {
    compiled c0, c1, c2, c3, c4;
    const mlc_func *f0 = compile_budget(&c0, src, targets[t], 0);
    assert_non_null(f0);
    int64_t before = mlc_planned_session_bytes(&c0.prog, f0);
    assert_int_equal(c0.prog.recompute.n, 0);

    assert_null(compile_budget(&c1, src, targets[t], 1)); /* 1 byte */
    const char *at = strstr(c1.err, "(--memory-budget ");
    if (!at) fail_msg("%s: no smallest budget in: %s", targets[t], c1.err);
    char num[32] = {0};
    sscanf(at + strlen("(--memory-budget "), "%31s", num);
    int64_t smallest = mlc_bytes_parse(num);
    printf("  %s: planned %lld bytes, the smallest budget %s\n", targets[t], (long long)before, num);
    assert_true(smallest > 0 && smallest < before * 19 / 20); /* recomputation buys 5 % at least */

    const mlc_func *f2 = compile_budget(&c2, src, targets[t], smallest);
    if (!f2) fail_msg("%s: the budget it named (%s) is refused: %s", targets[t], num, c2.err);
    assert_true(mlc_planned_session_bytes(&c2.prog, f2) <= smallest);
    assert_true(c2.prog.recompute.n > 0);
    assert_true(count_segments(&c2.prog) >= 1); /* the least budget needs a layer's forward run again */
    check_no_late_reads(f2);
    assert_int_equal(check_plan_disjoint(f0, t == 1), t == 1); /* CUDA: the head's gradient over its logits */
    assert_int_equal(check_plan_disjoint(f2, t == 1), t == 1);

    int64_t half = (smallest + before) / 2;
    const mlc_func *f3 = compile_budget(&c3, src, targets[t], half);
    assert_non_null(f3);
    assert_true(mlc_planned_session_bytes(&c3.prog, f3) <= half);
    assert_true(c3.prog.recompute.n > 0 && c3.prog.recompute.n <= c2.prog.recompute.n);
    check_no_late_reads(f3);

    const mlc_func *f4 = compile_budget(&c4, src, targets[t], before);
    assert_non_null(f4);
    assert_int_equal(c4.prog.recompute.n, 0);
    assert_int_equal(f4->n, f0->n);
    /* under a budget memplan also places by size, and keeps the smaller arena */
    assert_true(f4->arena_bytes <= f0->arena_bytes);
    assert_int_equal(check_plan_disjoint(f4, t == 1), t == 1);
    release(&c0), release(&c1), release(&c2), release(&c3), release(&c4);
  }
}

/* The seed's MiniLLM (bf16, one H200) in 10 GB, which recomputing cheap
 * values alone cannot reach (parameters and AdamW state are 8.82 GB):
 * whole layers' forwards run again in the backward, each right before its
 * own gradient, and each reads only what the layer before it kept (the
 * residual stream) and parameters not yet updated. */
static void test_budget_segments_seed(void **state) {
  (void)state;
  const char *src = compiled_read(MLC_SOURCE_DIR "/examples/minillm.mdl");
  assert_non_null(src);
  compiled c;
  mlc_pipeline_options po = {.target = "cuda"};
  assert_true(compiled_frontend(&c, src, NULL, 0));
  c.prog.opts.memory_budget = 10000000000;
  if (!mlc_pipeline_run(&c.prog, &c.diag, &po)) {
    fflush(c.errf);
    fail_msg("10GB refused: %s", c.err);
  }
  const mlc_func *f = compiled_func(&c.prog, "train");
  assert_non_null(f);
  int64_t held = mlc_planned_session_bytes(&c.prog, f);
  uint32_t segs = count_segments(&c.prog);
  double added = 0;
  for (uint32_t i = 0; i < c.prog.recompute.n; i++) added += c.prog.recompute.v[i].flops;
  printf("  10GB: planned %lld bytes, %u segments, %.2f %% more FLOPs\n", (long long)held, segs,
         100 * added / c.prog.recompute.step_flops);
  assert_true(held <= 10000000000);
  assert_true(segs > 0 && segs <= 12);
  assert_true(added > 0 && added < 0.35 * c.prog.recompute.step_flops); /* at most a forward of the layers again */
  for (uint32_t i = 0; i < c.prog.recompute.n; i++)
    if (c.prog.recompute.v[i].nops) assert_true(!strncmp(c.prog.recompute.v[i].scope, "layers.", 7));
  check_no_late_reads(f);
  assert_int_equal(check_plan_disjoint(f, true), 1);
  release(&c);
}

/* The passes follow the target's descriptor (ir/target.h), not its name:
 * the head's gradient over its logits where ce_grad_in_place says so
 * (cuda), nowhere else (cuda-nccl, spirv, cpu); the registry's names are
 * unique and an unknown one has no descriptor. */
static void test_target_descriptors(void **state) {
  (void)state;
  unsigned n;
  const mlc_target *all = mlc_targets(&n);
  assert_true(n >= 5);
  for (unsigned i = 0; i < n; i++) {
    assert_ptr_equal(mlc_target_find(all[i].name), &all[i]);
    if (all[i].update_groups) assert_true(!all[i].max_kernel_args || 5 * 4 + 2 + 2 <= all[i].max_kernel_args);
  }
  assert_null(mlc_target_find("hip"));
  assert_null(mlc_target_find(NULL));
  const char *src = compiled_read(MLC_SOURCE_DIR "/examples/minillm.mdl");
  assert_non_null(src);
  const char *names[] = {"cuda", "cuda-nccl", "spirv", "cpu"};
  for (int t = 0; t < 4; t++) {
    compiled c;
    const mlc_func *f = compile(&c, src, small, 6, names[t], false);
    assert_non_null(f);
    assert_int_equal(check_plan_disjoint(f, true), mlc_target_find(names[t])->ce_grad_in_place ? 1 : 0);
    release(&c);
  }
}

/* FSDP's plans (cuda-nccl and cpu, reduce f32 and bf16): values alive at
 * once never share bytes, the gradients packed in place aside
 * (passes/memplan.c); and some unit is packed in place. */
static void test_fsdp_plan_disjoint(void **state) {
  (void)state;
  const char *src = compiled_read(MLC_SOURCE_DIR "/examples/minillm.mdl");
  assert_non_null(src);
  const char *names[] = {"cuda-nccl", "cpu"}, *reduce[] = {"f32", "bf16"};
  for (int t = 0; t < 4; t++) {
    mlc_define defs[7];
    memcpy(defs, small, sizeof small);
    defs[6] = (mlc_define){"reduce", reduce[t / 2]};
    compiled c;
    mlc_pipeline_options po = {.target = names[t % 2], .fsdp = true};
    bool ok = compiled_frontend(&c, src, defs, 7) && mlc_pipeline_run(&c.prog, &c.diag, &po);
    fflush(c.errf);
    if (!ok) fail_msg("%s", c.err);
    const mlc_func *f = compiled_func(&c.prog, "train");
    assert_non_null(f);
    assert_int_equal(check_plan_disjoint(f, true), mlc_target_find(names[t % 2])->ce_grad_in_place ? 1 : 0);
    uint32_t packed = 0;
    for (uint32_t i = 0; i < f->n; i++) packed += mlc_node_in_place(f, i);
    assert_true(packed >= 1);
    release(&c);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_target_descriptors),
      cmocka_unit_test(test_fsdp_plan_disjoint),
      cmocka_unit_test(test_cpu_updates_at_ready_points),
      cmocka_unit_test(test_cuda_groups_inside_backward),
      cmocka_unit_test(test_norm_grad_adds),
      cmocka_unit_test(test_gradients_freed),
      cmocka_unit_test(test_budget),
      cmocka_unit_test(test_budget_segments_seed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
