/* The plan must be true: the device memory `mlc compile --stats` plans for
 * a session (mlc_planned_session_bytes: the entry's arena, every parameter
 * and the optimizer state) is what a session on the CPU target really
 * holds, within 5 %.
 *
 * The session gets an allocator (runtime/alloc.h: every byte libmlcrt
 * takes goes through it) that counts the bytes alive and their peak; the
 * small MiniLLM is compiled for the CPU, JIT-compiled, and its train entry
 * run for two steps (and, in a session of its own, its forward once).  The
 * peak over the whole session, its tables and the CPU device's own
 * included, must be within 5 % of the plan; so must the bytes the device
 * reports (mlc_session_device_bytes).  A session that only trains must not
 * hold the forward's arena; one that only runs forward holds neither the
 * train entry's arena nor the optimizer state, which the first train step
 * makes (test_forward_then_train, to the byte). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "driver/target_cpu.h"
#include "frontend/frontend.h"
#include "passes/passes.h"
#include "runtime/plan.h"
#include "tests/unit/compiled.h"

typedef struct {
  size_t live, peak;
  size_t refuse_from; /* refuse every request of at least this many bytes; 0: none */
} counter;

static void *count_alloc(void *ctx, size_t n) {
  counter *c = ctx;
  if (c->refuse_from && n >= c->refuse_from) return NULL;
  size_t *b = malloc(n + 16); /* the size in front, 16 bytes keep the alignment */
  if (!b) return NULL;
  b[0] = n;
  c->live += n;
  if (c->live > c->peak) c->peak = c->live;
  return (char *)b + 16;
}

static void count_free(void *ctx, void *p) {
  counter *c = ctx;
  size_t *b = (size_t *)((char *)p - 16);
  c->live -= b[0];
  free(b);
}

static void check(mlc_status st) {
  if (st) fail_msg("%s", mlc_status_message(st));
}

static void within(const char *what, double got, double planned, double tol) {
  double rel = (got - planned) / planned;
  printf("  %-40s %12.0f bytes, planned %12.0f (%+.2f %%)\n", what, got, planned, rel * 100);
  if (rel > tol || rel < -tol) fail_msg("%s: %.0f bytes, the plan says %.0f (%.1f %% off)", what, got, planned, rel * 100);
}

/* The program compiled for this CPU and JIT-linked into b; its plan. */
static mlc_plan *jit_plan(mlc_program *prog, mlc_cpu_build *b) {
  mlc_status st = mlc_cpu_compile(prog, b, NULL);
  if (!st) st = mlc_cpu_jit(b);
  if (st) fail_msg("%s", mlc_status_message(st));
  mlc_plan *plan;
  check(mlc_plan_parse(b->plan, b->plan_bytes, mlc_allocator_default(), &plan));
  return plan;
}

/* The plan: two values alive at once never share bytes (a view shares
 * what it views). */
static void check_disjoint(const mlc_func *f) {
  uint32_t n = f->n;
  uint32_t *root = malloc((n + 1) * sizeof *root), *last = malloc((n + 1) * sizeof *last);
  for (uint32_t i = 0; i < n; i++) {
    const mlc_node *nd = &f->nodes[i];
    root[i] = (nd->op == MLC_OP_RESHAPE || nd->op == MLC_OP_VIEW || nd->op == MLC_OP_REDUCE_SCATTER) ? root[nd->in[0]] : i;
    last[i] = i;
    for (uint32_t k = 0; k < nd->nin; k++) last[root[nd->in[k]]] = i;
  }
  for (uint32_t o = 0; o < f->noutputs; o++) last[root[f->outputs[o].node]] = n;
  for (uint32_t i = 0; i < n; i++)
    if (f->nodes[i].op == MLC_OP_INPUT || f->nodes[i].op == MLC_OP_CONST) last[i] = n;
  for (uint32_t b = 0; b < n; b++) {
    const mlc_node *bn = &f->nodes[b];
    if (root[b] != b || bn->op == MLC_OP_PARAM) continue;
    int64_t bs = mlc_type_numel(&bn->type) * mlc_dtype_size(bn->type.dtype);
    bool born_early = bn->op == MLC_OP_INPUT || bn->op == MLC_OP_CONST;
    for (uint32_t a = 0; a < b; a++) {
      const mlc_node *an = &f->nodes[a];
      if (root[a] != a || an->op == MLC_OP_PARAM || (last[a] < b && !born_early)) continue;
      int64_t as = mlc_type_numel(&an->type) * mlc_dtype_size(an->type.dtype);
      if (f->offset[a] < f->offset[b] + bs && f->offset[b] < f->offset[a] + as)
        fail_msg("%%%u (%s) and %%%u (%s) are alive at once and share bytes", a, mlc_ops[an->op].name, b, mlc_ops[bn->op].name);
    }
  }
  free(root);
  free(last);
}

/* Runs `entry` of the small MiniLLM (compute dtype `compute`; with a
 * memory budget, if not 0, which the recompute pass meets) in a session of
 * its own and compares what it held with the plan.  Returns the first
 * output's first value (the loss of the second step, for train). */
static float run_case(const char *entry, const char *compute, int64_t budget, uint32_t *segments) {
  const char *src = compiled_read(MLC_SOURCE_DIR "/examples/minillm.mdl");
  assert_non_null(src);
  mlc_define defs[7] = {{"vocab", "512"}, {"dim", "128"}, {"layers", "2"}, {"heads", "4"},
                        {"batch", "2"}, {"seq", "64"}, {"compute", compute}};
  compiled cc;
  mlc_pipeline_options po = {.target = "cpu"};
  assert_true(compiled_frontend(&cc, src, defs, 7));
  cc.prog.opts.memory_budget = budget;
  assert_true(mlc_pipeline_run(&cc.prog, &cc.diag, &po));
  mlc_program *prog = &cc.prog;
  const mlc_func *f = compiled_func(prog, entry), *other = compiled_func(prog, strcmp(entry, "train") ? "train" : "forward");
  assert_non_null(f);
  assert_non_null(other);
  double planned = (double)mlc_planned_session_bytes(prog, f);
  mlc_cpu_build b;
  mlc_plan *plan = jit_plan(prog, &b);

  counter c = {0, 0, 0};
  mlc_session_options so = {NULL, mlc_cpu_lookup, &b, 2, false, {count_alloc, count_free, &c}, NULL};
  mlc_session *s;
  check(mlc_session_create(plan, &so, &s));
  mlc_session_init_params(s, 1);
  const mlc_plan_entry *e = mlc_plan_find_entry(plan, entry);
  assert_non_null(e);
  int32_t ids[2 * 64];
  for (int i = 0; i < 2 * 64; i++) ids[i] = (i * 37) % 512;
  for (uint32_t k = 0; k < e->ninputs; k++)
    if (strncmp(e->inputs[k].name, "opt.", 4)) check(mlc_session_set_input(s, entry, e->inputs[k].name, ids, sizeof ids));
  int runs = strcmp(entry, "train") ? 1 : 2;
  for (int r = 0; r < runs; r++) check(mlc_session_run(s, entry));
  const void *out;
  const mlc_plan_shape *shape;
  check(mlc_session_output(s, entry, e->outputs[0].name, &out, &shape));
  printf("%s, compute=%s, budget %lld bytes, %u recomputed (the other entry's arena: %lld bytes)\n", entry, compute,
         (long long)budget, prog->recompute.n, (long long)other->arena_bytes);
  if (budget) assert_true(planned <= (double)budget && prog->recompute.n > 0);
  if (segments) {
    *segments = 0;
    for (uint32_t i = 0; i < prog->recompute.n; i++) *segments += prog->recompute.v[i].nops > 0;
  }
  check_disjoint(f);
  float first = shape->dtype == MLC_DT_F32 ? *(const float *)out : NAN;
  /* with a budget, tighter: the device's bytes are the plan's (0.3 %), and
   * the allocator's peak adds only the session's own tables (about 29 KB:
   * 0.4 % of this small model; 0.5 %) */
  within("peak through the allocator", (double)c.peak, planned, budget ? 0.005 : 0.05);
  within("mlc_session_device_bytes", (double)mlc_session_device_bytes(s), planned, budget ? 0.003 : 0.05);
  /* the other entry's arena was never made */
  assert_true((double)c.peak < planned + (double)other->arena_bytes * 0.9);
  mlc_session_destroy(s);
  assert_int_equal(c.live, 0);
  mlc_plan_free(plan);
  mlc_cpu_build_free(&b);
  release(&cc);
  return first;
}

static void test_train_bf16(void **state) {
  (void)state;
  run_case("train", "bf16", 0, NULL);
}

/* With a budget 6.5 % under the plan: recomputation, a plan as true, and the
 * same loss to the bit (a value computed again is the same value). */
static void test_train_bf16_budget(void **state) {
  (void)state;
  float plain = run_case("train", "bf16", 0, NULL);
  uint32_t segs;
  float budgeted = run_case("train", "bf16", 8200000, &segs); /* the plan without: 8.77 MB; all recomputed: 7.23 MB */
  printf("  loss %.9g, with the budget %.9g\n", plain, budgeted);
  assert_true(plain == plain && memcmp(&plain, &budgeted, sizeof plain) == 0);
  assert_int_equal(segs, 0); /* cheap values are enough */
}

/* A budget that cheap values alone cannot meet (they reach 7.85 MB): the
 * first layer's forward runs again in the backward, GEMMs and attention
 * included, before its gradient; the kernels are the same on the same
 * inputs, so the loss after two AdamW steps is the same to the bit. */
static void test_train_bf16_budget_segments(void **state) {
  (void)state;
  float plain = run_case("train", "bf16", 0, NULL);
  uint32_t segs;
  float budgeted = run_case("train", "bf16", 7400000, &segs);
  printf("  loss %.9g, with the budget %.9g (%u segments)\n", plain, budgeted, segs);
  assert_true(segs >= 1);
  assert_true(plain == plain && memcmp(&plain, &budgeted, sizeof plain) == 0);
}

static void test_train_f32(void **state) {
  (void)state;
  run_case("train", "f32", 0, NULL);
}

static void test_forward(void **state) {
  (void)state;
  run_case("forward", "bf16", 0, NULL);
}

/* The two blocks of a session as runtime/session.c lays them out, computed
 * here from the plan: every parameter but the optimizer state (fsdp weights
 * inside a flat excepted), and the state, each at a 64-byte boundary. */
static void blocks(const mlc_plan *plan, uint64_t *params, uint64_t *state) {
  *params = *state = 0;
  for (uint32_t i = 0; i < plan->nparams; i++) {
    const mlc_plan_param *p = &plan->params[i];
    uint64_t *end = p->role == 1 ? state : params;
    if (!p->flat) *end = (*end + mlc_plan_shape_bytes(&p->shape) + 63) / 64 * 64;
  }
}

static void set_ids(mlc_session *s, const mlc_plan_entry *e, const int32_t *ids, size_t bytes) {
  for (uint32_t k = 0; k < e->ninputs; k++)
    if (strncmp(e->inputs[k].name, "opt.", 4)) check(mlc_session_set_input(s, e->name, e->inputs[k].name, ids, bytes));
}

static float output0(mlc_session *s, const mlc_plan_entry *e) {
  const void *out;
  const mlc_plan_shape *shape;
  check(mlc_session_output(s, e->name, e->outputs[0].name, &out, &shape));
  assert_int_equal(shape->dtype, 1);
  return *(const float *)out;
}

/* A session of a model with a train step that runs only forward holds the
 * parameters and the forward's arena, to the byte, and no optimizer state;
 * saving a checkpoint then still makes none.  When the state's memory is
 * not there, the first train step fails with MLC_OUT_OF_MEMORY and forward
 * runs on, unchanged.  The first train step that gets it holds the state
 * and the train arena too.  The checkpoint saved before it (zero state) is
 * valid: a fresh session that loads it holds the state at once, and its
 * train step has the same loss to the bit. */
static void test_forward_then_train(void **state) {
  (void)state;
  const char *src = compiled_read(MLC_SOURCE_DIR "/examples/minillm.mdl");
  assert_non_null(src);
  mlc_define defs[7] = {{"vocab", "512"}, {"dim", "128"}, {"layers", "2"}, {"heads", "4"},
                        {"batch", "2"}, {"seq", "64"}, {"compute", "f32"}};
  compiled cc;
  mlc_pipeline_options po = {.target = "cpu"};
  assert_true(compiled_frontend(&cc, src, defs, 7));
  assert_true(mlc_pipeline_run(&cc.prog, &cc.diag, &po));
  mlc_cpu_build b;
  mlc_plan *plan = jit_plan(&cc.prog, &b);
  const mlc_plan_entry *fwd = mlc_plan_find_entry(plan, "forward"), *train = mlc_plan_find_entry(plan, "train");
  assert_non_null(fwd);
  assert_non_null(train);
  uint64_t params, opt;
  blocks(plan, &params, &opt);
  printf("parameters %llu bytes, optimizer state %llu, forward arena %llu, train arena %llu\n", (unsigned long long)params,
         (unsigned long long)opt, (unsigned long long)fwd->arena_bytes, (unsigned long long)train->arena_bytes);
  assert_true(opt > params); /* AdamW: two moments per weight */
  assert_int_equal(mlc_planned_session_bytes(&cc.prog, compiled_func(&cc.prog, "forward")), params + fwd->arena_bytes);
  assert_int_equal(mlc_planned_session_bytes(&cc.prog, compiled_func(&cc.prog, "train")), params + opt + train->arena_bytes);

  counter c = {0, 0, 0};
  mlc_session_options so = {NULL, mlc_cpu_lookup, &b, 2, false, {count_alloc, count_free, &c}, NULL};
  mlc_session *s;
  check(mlc_session_create(plan, &so, &s));
  mlc_session_init_params(s, 1);
  int32_t ids[2 * 64];
  for (int i = 0; i < 2 * 64; i++) ids[i] = (i * 37) % 512;
  set_ids(s, fwd, ids, sizeof ids);
  check(mlc_session_run(s, "forward"));
  float logit = output0(s, fwd);
  uint64_t held = mlc_session_device_bytes(s);
  printf("  forward only: %llu bytes held, peak through the allocator %zu\n", (unsigned long long)held, c.peak);
  assert_int_equal(held, params + fwd->arena_bytes);
  assert_true(c.peak < params + fwd->arena_bytes + opt / 10); /* the session's tables: tens of KB */

  char ckpt[] = "/tmp/mlc_lazy_state_XXXXXX";
  int fd = mkstemp(ckpt);
  assert_true(fd >= 0);
  close(fd);
  check(mlc_session_save_checkpoint(s, ckpt));
  assert_int_equal(mlc_session_device_bytes(s), held);

  c.refuse_from = opt; /* the state's block: the only request that large */
  mlc_status st = mlc_session_run(s, "train"); /* its first use: the arena and the state are made here */
  assert_non_null(st);
  printf("  train step without the memory: %s: %s\n", mlc_status_code_name(mlc_status_code(st)), mlc_status_message(st));
  assert_int_equal(mlc_status_code(st), MLC_OUT_OF_MEMORY);
  assert_non_null(strstr(mlc_status_message(st), "optimizer state"));
  mlc_status_free(st);
  assert_int_equal(mlc_session_device_bytes(s), held);
  assert_int_equal(mlc_session_step(s), 0);
  check(mlc_session_run(s, "forward"));
  float again = output0(s, fwd);
  assert_memory_equal(&logit, &again, sizeof logit);
  c.refuse_from = 0;

  set_ids(s, train, ids, sizeof ids);
  check(mlc_session_run(s, "train"));
  float loss = output0(s, train);
  printf("  after one train step: %llu bytes held (loss %.9g)\n", (unsigned long long)mlc_session_device_bytes(s), loss);
  assert_int_equal(mlc_session_device_bytes(s), params + fwd->arena_bytes + opt + train->arena_bytes);
  assert_int_equal(mlc_session_step(s), 1);
  mlc_session_destroy(s);
  assert_int_equal(c.live, 0);

  mlc_session *r;
  check(mlc_session_create(plan, &so, &r));
  check(mlc_session_load_checkpoint(r, ckpt));
  assert_int_equal(mlc_session_device_bytes(r), params + opt);
  set_ids(r, train, ids, sizeof ids);
  check(mlc_session_run(r, "train"));
  float resumed = output0(r, train);
  assert_memory_equal(&loss, &resumed, sizeof loss);
  mlc_session_destroy(r);
  assert_int_equal(c.live, 0);
  remove(ckpt);
  mlc_plan_free(plan);
  mlc_cpu_build_free(&b);
  release(&cc);
}

/* The weights' shadows (role 5: the bf16 copies a CUDA train step's
 * forward reads and its update writes) as the runtime keeps them: here
 * added by hand to the small MiniLLM's program for the CPU, whose kernels
 * never read them, one for each f32 weight.  They live in the state's
 * block (the plan's total for train counts them, a forward-only session
 * holds none), and follow their weights to the bit: when the block is made
 * (param_data of one here), after set_param, after a write through
 * param_data and a run, after loading a checkpoint (which holds none of
 * them, and whose checksum leaves them out) and after state_restore of a
 * buffer saved before any state was made (whose shadows are zeros). */
static bool shadows_follow(mlc_session *s, const mlc_plan *plan) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < plan->nparams; i++) {
    const mlc_plan_param *p = &plan->params[i];
    if (p->role != 5) continue;
    const float *w = mlc_session_param_data(s, (uint32_t)p->flat_offset);
    const uint16_t *sh = mlc_session_param_data(s, i);
    assert_non_null(w);
    assert_non_null(sh);
    uint64_t k = mlc_plan_shape_bytes(&p->shape) / 2;
    for (uint64_t j = 0; j < k; j++) {
      uint32_t u;
      memcpy(&u, &w[j], 4);
      uint16_t want = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16); /* to nearest even: no NaN here */
      if (sh[j] != want) return false;
    }
    n++;
  }
  assert_true(n > 0);
  return true;
}

static void test_shadows_follow_weights(void **state) {
  (void)state;
  const char *src = compiled_read(MLC_SOURCE_DIR "/examples/minillm.mdl");
  assert_non_null(src);
  mlc_define defs[6] = {{"vocab", "512"}, {"dim", "128"}, {"layers", "2"}, {"heads", "4"}, {"batch", "2"}, {"seq", "64"}};
  compiled cc;
  mlc_pipeline_options po = {.target = "cpu"};
  assert_true(compiled_frontend(&cc, src, defs, 6));
  assert_true(mlc_pipeline_run(&cc.prog, &cc.diag, &po));
  uint32_t nw = cc.prog.nparams, nshadow = 0;
  for (uint32_t i = 0; i < nw; i++) {
    mlc_param w = cc.prog.params[i];
    if (w.role != MLC_ROLE_WEIGHT || w.flat || w.type.dtype != MLC_DT_F32) continue;
    mlc_param sh = {.name = mlc_arena_printf(cc.prog.arena, "bf16:%s", w.name), .type = w.type, .role = MLC_ROLE_SHADOW,
                    .loc = w.loc, .quant_of = i + 1};
    sh.type.dtype = MLC_DT_BF16;
    mlc_program_add_param(&cc.prog, &sh);
    nshadow++;
  }
  assert_true(nshadow >= 10);
  mlc_cpu_build b;
  mlc_plan *plan = jit_plan(&cc.prog, &b);
  const mlc_plan_entry *fwd = mlc_plan_find_entry(plan, "forward"), *train = mlc_plan_find_entry(plan, "train");
  uint64_t params = 0, opt = 0;
  for (uint32_t i = 0; i < plan->nparams; i++) { /* the state's block: optimizer state and shadows */
    const mlc_plan_param *p = &plan->params[i];
    uint64_t *end = p->role == 1 || p->role == 5 ? &opt : &params;
    if (!p->flat) *end = (*end + mlc_plan_shape_bytes(&p->shape) + 63) / 64 * 64;
  }
  assert_int_equal(mlc_planned_session_bytes(&cc.prog, compiled_func(&cc.prog, "train")), params + opt + train->arena_bytes);
  assert_int_equal(mlc_planned_session_bytes(&cc.prog, compiled_func(&cc.prog, "forward")), params + fwd->arena_bytes);

  mlc_session_options so = {NULL, mlc_cpu_lookup, &b, 2, false, {0}, NULL};
  mlc_session *s, *r;
  check(mlc_session_create(plan, &so, &s));
  mlc_session_init_params(s, 7);
  int32_t ids[2 * 64];
  for (int i = 0; i < 2 * 64; i++) ids[i] = (i * 37 + 11) % 512;
  set_ids(s, fwd, ids, sizeof ids);
  check(mlc_session_run(s, "forward"));
  assert_int_equal(mlc_session_device_bytes(s), params + fwd->arena_bytes); /* no state's block, no shadows */
  assert_true(shadows_follow(s, plan)); /* made with the block, at the first param_data of one */
  assert_int_equal(mlc_session_device_bytes(s), params + fwd->arena_bytes + opt);

  /* set_param, then a write through param_data and a run */
  uint32_t w0 = UINT32_MAX, w1 = UINT32_MAX;
  for (uint32_t i = 0; i < plan->nparams; i++)
    if (plan->params[i].role == 5) w0 == UINT32_MAX ? (void)(w0 = (uint32_t)plan->params[i].flat_offset) : (void)(w1 = (uint32_t)plan->params[i].flat_offset);
  uint64_t n0 = mlc_plan_shape_bytes(&plan->params[w0].shape) / 4;
  float *v = malloc(n0 * 4);
  for (uint64_t j = 0; j < n0; j++) v[j] = (float)j * 0.001f - 0.3f;
  check(mlc_session_set_param(s, w0, v, n0 * 4));
  free(v);
  assert_true(shadows_follow(s, plan));
  float *w = mlc_session_param_data(s, w1);
  w[0] = 1.2345678f, w[1] = -7.654321f;
  check(mlc_session_run(s, "forward"));
  assert_true(shadows_follow(s, plan));

  /* a checkpoint: none of the shadows in it; made again at the load */
  char ckpt[] = "/tmp/mlc_test_shadowsXXXXXX";
  int fd = mkstemp(ckpt);
  assert_true(fd >= 0);
  close(fd);
  check(mlc_session_save_checkpoint(s, ckpt));
  check(mlc_session_create(plan, &so, &r));
  check(mlc_session_load_checkpoint(r, ckpt));
  assert_true(shadows_follow(r, plan));
  mlc_session_destroy(r);
  remove(ckpt);

  /* state_save of a session without the state's block: its shadows are zeros there, and restore makes them */
  check(mlc_session_create(plan, &so, &r));
  mlc_session_init_params(r, 9);
  uint64_t nb = mlc_session_state_bytes(r);
  void *buf = malloc(nb);
  check(mlc_session_state_save(r, buf, nb));
  mlc_session_destroy(r);
  check(mlc_session_state_restore(s, buf, nb));
  free(buf);
  assert_true(shadows_follow(s, plan));
  mlc_session_destroy(s);
  mlc_plan_free(plan);
  mlc_cpu_build_free(&b);
  release(&cc);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_train_bf16),
      cmocka_unit_test(test_shadows_follow_weights),
      cmocka_unit_test(test_train_f32),
      cmocka_unit_test(test_train_bf16_budget),
      cmocka_unit_test(test_train_bf16_budget_segments),
      cmocka_unit_test(test_forward),
      cmocka_unit_test(test_forward_then_train),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
