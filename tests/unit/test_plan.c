/* The plan format end to end: the compiler encodes the small MiniLLM's plan
 * (codegen/plan.c), the runtime parses it (runtime/plan.c), and what comes
 * back must be what went in.  Then corrupted plans, one fault at a time,
 * must be refused with MLC_DATA_LOSS, and a failing allocator must give a
 * clean error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <xxhash.h>

#include "codegen/plan.h"
#include "frontend/frontend.h"
#include "passes/passes.h"
#include "runtime/plan.h"
#include "runtime/session.h"

static mlc_arena arena;
static mlc_program prog;
static uint8_t *bytes;
static size_t nbytes;

/* Any node that computes something is a step; the kernel is named by op and
 * dtype, so identical ops share one kernel entry. */
static const char *namer(void *ctx, const mlc_func *f, uint32_t node, uint64_t *work) {
  (void)ctx;
  const mlc_node *n = &f->nodes[node];
  if (mlc_ops[n->op].flags & (MLC_F_LEAF | MLC_F_VIEW)) return NULL;
  *work = (uint64_t)mlc_type_numel(&n->type);
  return mlc_arena_printf(&arena, "k_%s_%s", mlc_ops[n->op].name, mlc_dtype_name(n->type.dtype));
}

static int setup(void **state) {
  (void)state;
  mlc_arena_init(&arena);
  mlc_diag diag;
  mlc_diag_init(&diag, stderr);
  mlc_program_init(&prog, &arena);
  FILE *f = fopen(MLC_SOURCE_DIR "/examples/minillm.mdl", "rb");
  if (!f) return -1;
  static char src[8192];
  size_t len = fread(src, 1, sizeof src - 1, f);
  fclose(f);
  mlc_define defs[6] = {{"vocab", "512"}, {"dim", "128"}, {"layers", "2"}, {"heads", "4"}, {"batch", "2"}, {"seq", "64"}};
  mlc_lower_options lo = {defs, 6, NULL, 0, false, 0, false};
  mlc_pipeline_options po = {0};
  if (!mlc_frontend_run(&prog, &diag, "minillm.mdl", src, len, &lo, NULL) || !mlc_pipeline_run(&prog, &diag, &po)) return -1;
  mlc_plan_encode(&prog, namer, NULL, &bytes, &nbytes);
  /* MLC_PLAN_SEED=path writes the payload as a seed for fuzz/fuzz_plan. */
  const char *seed = getenv("MLC_PLAN_SEED");
  if (seed) {
    FILE *o = fopen(seed, "wb");
    if (!o || fwrite(bytes + MLC_PLAN_HEADER_BYTES, 1, nbytes - MLC_PLAN_HEADER_BYTES, o) != nbytes - MLC_PLAN_HEADER_BYTES) return -1;
    fclose(o);
  }
  return 0;
}

static int teardown(void **state) {
  (void)state;
  mlc_arena_free(&arena);
  return 0;
}

static void test_roundtrip(void **state) {
  (void)state;
  mlc_plan *pl;
  mlc_status st = mlc_plan_parse(bytes, nbytes, mlc_allocator_default(), &pl);
  assert_null(st);
  assert_string_equal(pl->model, "minillm");
  assert_int_equal(pl->nparams, prog.nparams);
  for (uint32_t i = 0; i < prog.nparams; i++) {
    assert_string_equal(pl->params[i].name, prog.params[i].name);
    assert_int_equal(pl->params[i].shape.rank, prog.params[i].type.rank);
    assert_int_equal(pl->params[i].shape.dims[0], prog.params[i].type.dim[0]);
    assert_int_equal(pl->params[i].init, prog.params[i].init);
  }
  assert_int_equal(pl->nentries, 2);
  for (uint32_t k = 0; k < 2; k++) {
    const mlc_func *f = &prog.funcs[k];
    const mlc_plan_entry *e = mlc_plan_find_entry(pl, f->name);
    assert_non_null(e);
    assert_int_equal(e->arena_bytes, f->arena_bytes);
    assert_int_equal(e->nvalues, f->n);
    assert_int_equal(e->ninputs, f->inputs.n);
    assert_string_equal(e->outputs[0].name, f->outputs[0].name);
    uint32_t steps = 0;
    for (uint32_t i = 0; i < f->n; i++) {
      const mlc_node *n = &f->nodes[i];
      if (mlc_ops[n->op].flags & (MLC_F_LEAF | MLC_F_VIEW)) continue;
      const mlc_plan_step *s = &e->steps[steps++];
      assert_int_equal(s->nargs, n->nin + 1);
      assert_int_equal(s->args[s->nargs - 1], i);
      assert_string_equal(s->scope, n->scope);
      double fl, by;
      mlc_node_cost(f, n, &fl, &by);
      assert_true(s->flops == fl && s->bytes == by);
      assert_true(e->values[i].offset == f->offset[i] || e->values[i].param != MLC_PLAN_NO_PARAM);
    }
    assert_int_equal(e->nsteps, steps);
  }
  /* Identical ops share a kernel: far fewer kernels than steps. */
  uint32_t total = 0;
  for (uint32_t k = 0; k < pl->nentries; k++) total += pl->entries[k].nsteps;
  assert_true(pl->nkernels < total / 4);
  mlc_plan_free(pl);
}

static mlc_status parse_copy(const uint8_t *b, size_t n, bool fix_checksum) {
  uint8_t *c = malloc(n ? n : 1);
  memcpy(c, b, n);
  if (fix_checksum && n >= MLC_PLAN_HEADER_BYTES) {
    uint64_t len = n - MLC_PLAN_HEADER_BYTES, sum = XXH64(c + MLC_PLAN_HEADER_BYTES, (size_t)len, 0);
    for (int i = 0; i < 8; i++) {
      c[16 + i] = (uint8_t)(len >> (8 * i));
      c[24 + i] = (uint8_t)(sum >> (8 * i));
    }
  }
  mlc_plan *pl = NULL;
  mlc_status st = mlc_plan_parse(c, n, mlc_allocator_default(), &pl);
  mlc_plan_free(pl);
  free(c);
  return st;
}

static void expect_loss(mlc_status st, const char *want) {
  assert_non_null(st);
  assert_int_equal(mlc_status_code(st), MLC_DATA_LOSS);
  if (!strstr(mlc_status_message(st), want)) fail_msg("want '%s' in '%s'", want, mlc_status_message(st));
  mlc_status_free(st);
}

static void test_corrupt(void **state) {
  (void)state;
  uint8_t *c = malloc(nbytes);
  memcpy(c, bytes, nbytes);
  c[nbytes / 2] ^= 0x40;
  expect_loss(parse_copy(c, nbytes, false), "checksum mismatch");
  expect_loss(parse_copy(bytes, nbytes - 1, false), "truncated?");
  expect_loss(parse_copy(bytes, 10, false), "not an mlc plan");
  memcpy(c, bytes, nbytes);
  c[8] = 1;
  expect_loss(parse_copy(c, nbytes, false), "plan format version 1");
  /* With the checksum fixed up, the structural checks must catch it.  The
   * parameter count is the u32 at byte 32 + 4 + len("minillm") = 43. */
  memcpy(c, bytes, nbytes);
  c[45] = 0xff; /* nparams: a huge count */
  c[46] = 0xff;
  expect_loss(parse_copy(c, nbytes, true), "corrupt plan: parameter count too large at byte 47");
  /* Every single-byte truncation of the payload must be refused, not crash. */
  for (size_t n = MLC_PLAN_HEADER_BYTES; n < nbytes; n += 1 + n / 64) {
    mlc_status st = parse_copy(bytes, n, true);
    assert_non_null(st);
    mlc_status_free(st);
  }
  /* Flip every byte in turn: refused or parsed, never a crash (ASan watches). */
  for (size_t i = MLC_PLAN_HEADER_BYTES; i < nbytes; i += 7) {
    memcpy(c, bytes, nbytes);
    c[i] ^= 0xa5;
    mlc_status_free(parse_copy(c, nbytes, true));
  }
  free(c);
}

/* --quantize int4:group=64: each packed weight travels as role 4 with its
 * bits, group and f32 weight, and the reader refuses one whose f32 weight
 * does not match it. */
static void test_quantized(void **state) {
  (void)state;
  mlc_arena a;
  mlc_arena_init(&a);
  mlc_diag diag;
  mlc_diag_init(&diag, stderr);
  mlc_program q;
  mlc_program_init(&q, &a);
  FILE *f = fopen(MLC_SOURCE_DIR "/examples/minillm.mdl", "rb");
  assert_non_null(f);
  static char src[8192];
  size_t len = fread(src, 1, sizeof src - 1, f);
  fclose(f);
  mlc_define defs[6] = {{"vocab", "512"}, {"dim", "128"}, {"layers", "2"}, {"heads", "4"}, {"batch", "2"}, {"seq", "64"}};
  mlc_lower_options lo = {defs, 6, NULL, 0, true, 0, false}; /* no train step: --quantize implies --no-train */
  mlc_pipeline_options po = {0};
  assert_true(mlc_frontend_run(&q, &diag, "minillm.mdl", src, len, &lo, NULL));
  q.opts.quant_bits = 4, q.opts.quant_group = 64;
  assert_true(mlc_pipeline_run(&q, &diag, &po));
  uint8_t *b;
  size_t n;
  mlc_plan_encode(&q, namer, NULL, &b, &n);
  mlc_plan *pl;
  assert_null(mlc_plan_parse(b, n, mlc_allocator_default(), &pl));
  uint32_t packed = 0, last = 0;
  for (uint32_t i = 0; i < pl->nparams; i++) {
    const mlc_plan_param *p = &pl->params[i];
    if (p->role != 4) continue;
    const mlc_plan_param *w = &pl->params[p->flat_offset];
    assert_true(p->a == 4 && p->b == 64 && p->shape.dtype == 4);
    assert_string_equal(p->name + strlen("quant:"), w->name);
    assert_int_equal(p->shape.dims[1], w->shape.dims[1] / 8 + w->shape.dims[1] / 64);
    packed++, last = i;
  }
  assert_int_equal(packed, 2 * 4 + 1); /* per layer: in_proj, out_proj, two ffn linears; and the head */
  mlc_plan_free(pl);
  /* the head's packed weight, pointed at a norm's weight instead */
  for (uint32_t i = 0; i < q.nparams; i++)
    if (q.params[i].type.rank == 1) q.params[last].quant_of = i + 1;
  mlc_plan_encode(&q, namer, NULL, &b, &n);
  expect_loss(parse_copy(b, n, false), "a quantised weight does not match its f32 weight");
  mlc_arena_free(&a); /* the plans' bytes too */
}

static void test_failing_allocator(void **state) {
  (void)state;
  mlc_failing_allocator fa;
  mlc_allocator a = mlc_allocator_failing(&fa, mlc_allocator_default(), 1);
  mlc_plan *pl = NULL;
  mlc_status st = mlc_plan_parse(bytes, nbytes, a, &pl);
  assert_non_null(st);
  assert_int_equal(mlc_status_code(st), MLC_OUT_OF_MEMORY);
  assert_null(pl);
  assert_int_equal(fa.live, 0);
  mlc_status_free(st);
}

/* Session creation and a first run (which makes the entry's arena) through
 * a failing allocator: every allocation they make is refused once, in turn;
 * each refusal must give OUT_OF_MEMORY and leave nothing allocated once the
 * session is gone, and with none refused both must succeed. */
static void dummy_kernel(void **bufs, int64_t begin, int64_t end) {
  (void)bufs, (void)begin, (void)end;
}

static void *dummy_lookup(void *ctx, const char *symbol) {
  (void)ctx, (void)symbol;
  void (*fn)(void **, int64_t, int64_t) = dummy_kernel;
  void *p;
  memcpy(&p, &fn, sizeof p);
  return p;
}

static void test_session_failing_allocator(void **state) {
  (void)state;
  mlc_plan *pl;
  assert_null(mlc_plan_parse(bytes, nbytes, mlc_allocator_default(), &pl));
  size_t n;
  for (n = 1; n < 100000; n++) {
    mlc_failing_allocator fa;
    mlc_session_options so = {NULL, dummy_lookup, NULL, 1, false, mlc_allocator_failing(&fa, mlc_allocator_default(), n), NULL};
    mlc_session *s = NULL;
    mlc_status st = mlc_session_create(pl, &so, &s);
    if (!st) { /* the arena comes at the first run: refused too, in turn */
      st = mlc_session_run(s, "forward");
      mlc_session_destroy(s);
      assert_int_equal(fa.live, 0);
      if (!st) {
        assert_int_equal(fa.failed, 0); /* every allocation succeeded: done */
        break;
      }
      assert_int_equal(mlc_status_code(st), MLC_OUT_OF_MEMORY);
      mlc_status_free(st);
      continue;
    }
    assert_int_equal(mlc_status_code(st), MLC_OUT_OF_MEMORY);
    assert_null(s);
    assert_int_equal(fa.live, 0);
    mlc_status_free(st);
  }
  assert_true(n > 5 && n < 100000);
  /* A kernel the code does not have is a clear error naming it. */
  mlc_session_options none = {0};
  mlc_session *s = NULL;
  mlc_status st = mlc_session_create(pl, &none, &s);
  assert_non_null(st);
  assert_int_equal(mlc_status_code(st), MLC_NOT_FOUND);
  assert_non_null(strstr(mlc_status_message(st), "is not in the compiled code"));
  mlc_status_free(st);
  mlc_plan_free(pl);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_roundtrip),
    cmocka_unit_test(test_corrupt),
    cmocka_unit_test(test_quantized),
    cmocka_unit_test(test_failing_allocator),
    cmocka_unit_test(test_session_failing_allocator),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
