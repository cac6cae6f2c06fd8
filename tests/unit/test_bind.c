/* A caller's buffers in place of the arena (runtime/session.h's
 * mlc_session_bind_input and bind_output) on the CPU, against the copying
 * path of the same session, bit for bit.
 *
 * Two small models, compiled for the CPU and JIT-compiled:
 *   view   input x is reshaped before its matmul (a view: the plan's
 *          view_of), the first output is a reshape of the matmul's result;
 *          input z is also an output (reshaped), and the third output is a
 *          reshape of a parameter;
 *   reuse  three chained matmuls, the last (the output) placed in the bytes
 *          of the first, dead by then (a reuse: not a view).
 * A bound input is read by the run from the caller's buffer: values written
 * there after the binding and before the run are what the run sees (a copy
 * would have kept the old ones).  A bound output is written by the run
 * straight into the caller's buffer, without mlc_session_output_tensor.  A
 * reuse of the output's bytes stays in the arena.  Bindings last one run.
 * Then each refusal, with its status and message, leaving the session as it
 * was; and the tensor path (MLC_MEMORY_HOST_IN_PLACE), which binds where it
 * can and copies where it cannot. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "driver/target_cpu.h"
#include "frontend/frontend.h"
#include "passes/passes.h"
#include "runtime/cpu/device.h"
#include "runtime/plan.h"
#include "runtime/session.h"
#include "tests/unit/compiled.h"

static const char view_src[] =
    "config { n = 8  d = 16 }\n"
    "module V(n, d) {\n"
    "    param w: f32[n, n] = normal(0, 1)\n"
    "    forward(x: f32[n, d], z: f32[n, d]) {\n"
    "        h = reshape(x, [d, n])\n"
    "        y = matmul(h, w)\n"
    "        zf = reshape(z, [n * d])\n"
    "        return reshape(y, [n, d]), zf, reshape(w, [n * n])\n"
    "    }\n"
    "}\n";

static const char reuse_src[] =
    "config { n = 32 }\n"
    "module R(n) {\n"
    "    forward(x: f32[n, n]) {\n"
    "        a = matmul(x, x)\n"
    "        b = matmul(a, x)\n"
    "        c = matmul(b, x)\n"
    "        return c\n"
    "    }\n"
    "}\n";

typedef struct {
  compiled cc;
  mlc_cpu_build b;
  mlc_plan *plan;
  mlc_session *s;
  const mlc_plan_entry *e;
} model;

static void check(mlc_status st) {
  if (st) fail_msg("%s", mlc_status_message(st));
}

/* A refusal: its code, and `part` in its message. */
static void refused(mlc_status st, mlc_status_code_t code, const char *part) {
  if (!st) fail_msg("succeeded; want a refusal with '%s'", part);
  printf("  refused: %s\n", mlc_status_message(st));
  if (mlc_status_code(st) != code || !strstr(mlc_status_message(st), part))
    fail_msg("want %s with '%s', got %s: %s", mlc_status_code_name(code), part, mlc_status_code_name(mlc_status_code(st)),
             mlc_status_message(st));
  mlc_status_free(st);
}

/* own_memory_only: on a CPU device that says its kernels take only its own
 * memory (as CUDA's and Metal's do). */
static void open_model(model *m, const char *src, bool own_memory_only) {
  memset(m, 0, sizeof *m);
  mlc_pipeline_options po = {.target = "cpu"};
  assert_true(compiled_frontend(&m->cc, src, NULL, 0));
  assert_true(mlc_pipeline_run(&m->cc.prog, &m->cc.diag, &po));
  mlc_status st = mlc_cpu_compile(&m->cc.prog, &m->b, NULL);
  if (!st) st = mlc_cpu_jit(&m->b);
  check(st);
  check(mlc_plan_parse(m->b.plan, m->b.plan_bytes, mlc_allocator_default(), &m->plan));
  mlc_device *dev = NULL;
  if (own_memory_only) {
    static mlc_device_vt vt;
    check(mlc_cpu_device_create(mlc_cpu_lookup, &m->b, 1, mlc_allocator_default(), &dev));
    vt = *dev->vt;
    vt.host_pointers = false;
    dev->vt = &vt;
  }
  mlc_session_options so = {dev, mlc_cpu_lookup, &m->b, 1, false, {0}, NULL};
  check(mlc_session_create(m->plan, &so, &m->s));
  mlc_session_init_params(m->s, 1);
  m->e = mlc_plan_find_entry(m->plan, "forward");
  assert_non_null(m->e);
}

static void close_model(model *m) {
  mlc_session_destroy(m->s);
  mlc_plan_free(m->plan);
  mlc_cpu_build_free(&m->b);
  release(&m->cc);
}

static uint32_t input_value(const model *m, const char *name) {
  for (uint32_t i = 0; i < m->e->ninputs; i++)
    if (!strcmp(m->e->inputs[i].name, name)) return m->e->inputs[i].value;
  fail_msg("no input %s", name);
  return 0;
}

static uint32_t output_value(const model *m, const char *name) {
  for (uint32_t i = 0; i < m->e->noutputs; i++)
    if (!strcmp(m->e->outputs[i].name, name)) return m->e->outputs[i].value;
  fail_msg("no output %s", name);
  return 0;
}

/* Whether some step takes value v as an argument. */
static bool step_takes(const model *m, uint32_t v) {
  for (uint32_t i = 0; i < m->e->nsteps; i++)
    for (uint32_t j = 0; j < m->e->steps[i].nargs; j++)
      if (m->e->steps[i].args[j] == v) return true;
  return false;
}

static float *aligned_floats(size_t n) {
  float *p = aligned_alloc(64, (n * sizeof *p + 63) / 64 * 64);
  assert_non_null(p);
  return p;
}

static void fill(float *p, size_t n, float scale) {
  for (size_t i = 0; i < n; i++) p[i] = scale * (float)((int)(i * 37 % 23) - 11) / 11.0f;
}

/* The first output of the view model through the copying path. */
static void view_copied(model *m, const float *x, const float *z, float *out) {
  check(mlc_session_set_input(m->s, "forward", "x", x, 128 * sizeof *x));
  check(mlc_session_set_input(m->s, "forward", "z", z, 128 * sizeof *z));
  check(mlc_session_run(m->s, "forward"));
  const void *data;
  const mlc_plan_shape *shape;
  check(mlc_session_output(m->s, "forward", "output0", &data, &shape));
  memcpy(out, data, 128 * sizeof *out);
}

static void test_view(void **state) {
  (void)state;
  model m;
  open_model(&m, view_src, false);
  /* The plan: a step reads a view of x, and output0 views the matmul's result. */
  uint32_t x = input_value(&m, "x"), out = output_value(&m, "output0"), views_x = 0;
  for (uint32_t v = 0; v < m.e->nvalues; v++)
    if (m.e->values[v].view_of == x && step_takes(&m, v)) views_x++;
  assert_int_equal(views_x, 1);
  assert_int_not_equal(m.e->values[out].view_of, MLC_PLAN_NO_VALUE);
  assert_true(step_takes(&m, m.e->values[out].view_of));

  float *x0 = aligned_floats(128), *x1 = aligned_floats(128), *z = aligned_floats(128);
  float *ref0 = aligned_floats(128), *ref1 = aligned_floats(128), *xbuf = aligned_floats(128), *obuf = aligned_floats(128);
  fill(x0, 128, 1), fill(x1, 128, -0.5f), fill(z, 128, 2);
  view_copied(&m, x1, z, ref1);
  view_copied(&m, x0, z, ref0); /* the arena holds x0 from here on */
  assert_true(memcmp(ref0, ref1, 128 * sizeof *ref0));

  /* Bound, then written: the run must read x1 from the caller's buffer. */
  memcpy(xbuf, x0, 128 * sizeof *xbuf);
  check(mlc_session_bind_input(m.s, "forward", "x", xbuf, 128 * sizeof *xbuf));
  memcpy(xbuf, x1, 128 * sizeof *xbuf);
  memset(obuf, 0, 128 * sizeof *obuf);
  check(mlc_session_bind_output(m.s, "forward", "output0", obuf, 128 * sizeof *obuf));
  check(mlc_session_run(m.s, "forward"));
  assert_memory_equal(obuf, ref1, 128 * sizeof *obuf); /* written by the run, no output_tensor */
  const void *data;
  const mlc_plan_shape *shape;
  check(mlc_session_output(m.s, "forward", "output0", &data, &shape));
  assert_ptr_equal(data, obuf); /* where the run left it */

  /* The bindings are gone after the run: the arena's x0, and the arena's output. */
  fill(obuf, 128, 9);
  memcpy(ref1, obuf, 128 * sizeof *obuf);
  check(mlc_session_run(m.s, "forward"));
  check(mlc_session_output(m.s, "forward", "output0", &data, &shape));
  assert_memory_equal(data, ref0, 128 * sizeof *ref0);
  assert_memory_equal(obuf, ref1, 128 * sizeof *obuf); /* untouched */

  /* mlc_session_unbind, and set_input after a binding, give the arena back. */
  check(mlc_session_bind_input(m.s, "forward", "x", xbuf, 128 * sizeof *xbuf));
  check(mlc_session_unbind(m.s, "forward"));
  check(mlc_session_run(m.s, "forward"));
  check(mlc_session_output(m.s, "forward", "output0", &data, &shape));
  assert_memory_equal(data, ref0, 128 * sizeof *ref0);
  check(mlc_session_bind_input(m.s, "forward", "x", xbuf, 128 * sizeof *xbuf));
  check(mlc_session_set_input(m.s, "forward", "x", x0, 128 * sizeof *x0));
  check(mlc_session_run(m.s, "forward"));
  check(mlc_session_output(m.s, "forward", "output0", &data, &shape));
  assert_memory_equal(data, ref0, 128 * sizeof *ref0);

  free(x0), free(x1), free(z), free(ref0), free(ref1), free(xbuf), free(obuf);
  close_model(&m);
}

/* The output's bytes are those of an earlier value (a reuse, not a view):
 * bound, the output goes to the caller's buffer and the earlier value stays
 * in the arena. */
static void test_reuse(void **state) {
  (void)state;
  model m;
  open_model(&m, reuse_src, false);
  uint32_t c = output_value(&m, "output"), reuses = 0;
  assert_int_equal(m.e->values[c].view_of, MLC_PLAN_NO_VALUE);
  for (uint32_t v = 0; v < c; v++)
    if (m.e->values[v].view_of == MLC_PLAN_NO_VALUE && m.e->values[v].offset == m.e->values[c].offset && step_takes(&m, v))
      reuses++;
  assert_int_equal(reuses, 1);

  enum { N = 32 * 32 };
  float *x = aligned_floats(N), *ref = aligned_floats(N), *obuf = aligned_floats(N);
  fill(x, N, 0.25f);
  check(mlc_session_set_input(m.s, "forward", "x", x, N * sizeof *x));
  check(mlc_session_run(m.s, "forward"));
  const void *data;
  const mlc_plan_shape *shape;
  check(mlc_session_output(m.s, "forward", "output", &data, &shape));
  memcpy(ref, data, N * sizeof *ref);
  uint8_t *arena_c = (uint8_t *)(uintptr_t)data;
  memset(arena_c, 0xff, N * sizeof *x); /* NaNs, which no matmul of these values makes */
  memset(obuf, 0, N * sizeof *obuf);
  check(mlc_session_bind_output(m.s, "forward", "output", obuf, N * sizeof *obuf));
  check(mlc_session_run(m.s, "forward"));
  assert_memory_equal(obuf, ref, N * sizeof *obuf);
  size_t left = 0; /* 4-byte words still 0xff: the earlier value wrote every one */
  for (size_t i = 0; i < N * sizeof *x; i += 4) left += !memcmp(arena_c + i, "\xff\xff\xff\xff", 4);
  assert_int_equal(left, 0);
  assert_memory_not_equal(arena_c, ref, N * sizeof *ref);
  free(x), free(ref), free(obuf);
  close_model(&m);
}

static void test_refusals(void **state) {
  (void)state;
  model m;
  open_model(&m, view_src, false);
  float *x0 = aligned_floats(128), *z = aligned_floats(128), *ref0 = aligned_floats(128), *got = aligned_floats(128);
  float *buf = aligned_floats(256);
  fill(x0, 128, 1), fill(z, 128, 2);
  view_copied(&m, x0, z, ref0);
  size_t n = 128 * sizeof(float);
  refused(mlc_session_bind_input(m.s, "forward", "z", buf, n), MLC_UNIMPLEMENTED,
          "cannot bind input 'z' of forward on the cpu: it is also an output of the entry (copy it instead)");
  refused(mlc_session_bind_output(m.s, "forward", "zf", buf, n), MLC_UNIMPLEMENTED, "it is also an input of the entry");
  refused(mlc_session_bind_output(m.s, "forward", "output2", buf, 64 * sizeof(float)), MLC_UNIMPLEMENTED,
          "it is a parameter, or a view of one");
  refused(mlc_session_bind_input(m.s, "forward", "x", (char *)buf + 4, n), MLC_INVALID_ARGUMENT, "not 16-byte aligned");
  refused(mlc_session_bind_input(m.s, "forward", "x", buf, n - 4), MLC_INVALID_ARGUMENT,
          "cannot bind input 'x' of forward: it is f32[8, 16] (512 bytes), got 508 bytes");
  refused(mlc_session_bind_input(m.s, "forward", "y", buf, n), MLC_NOT_FOUND, "entry forward has no input 'y'");
  refused(mlc_session_bind_input(m.s, "nowhere", "x", buf, n), MLC_NOT_FOUND, "no entry point 'nowhere'");
  /* an output over a bound input: the kernel would read what it writes */
  check(mlc_session_bind_input(m.s, "forward", "x", buf, n));
  refused(mlc_session_bind_output(m.s, "forward", "output0", buf + 64, n), MLC_UNIMPLEMENTED,
          "its buffer overlaps another one bound to the entry");
  check(mlc_session_unbind(m.s, "forward"));
  /* Nothing of the refusals stayed: the copying path as before. */
  view_copied(&m, x0, z, got);
  assert_memory_equal(got, ref0, n);
  close_model(&m);

  /* A device whose kernels take only its own memory: refused whatever the buffer. */
  open_model(&m, view_src, true);
  refused(mlc_session_bind_input(m.s, "forward", "x", buf, n), MLC_UNIMPLEMENTED,
          "cannot bind input 'x' of forward on the cpu: this device's kernels take only its own memory");
  close_model(&m);
  free(x0), free(z), free(ref0), free(got), free(buf);
}

static mlc_tensor f32_tensor(float *data, int rank, int64_t d0, int64_t d1, mlc_memory memory) {
  mlc_tensor t = {MLC_DTYPE_F32, rank, {d0, d1}, data, (size_t)(d0 * (rank > 1 ? d1 : 1)) * sizeof(float), memory, 0};
  return t;
}

/* The artifact's path (runtime/tensor.h): set_input_tensor binds an
 * MLC_MEMORY_HOST_IN_PLACE input, check_tensor such an output, and
 * output_tensor copies nothing; a buffer that cannot be bound is copied. */
static void test_tensors(void **state) {
  (void)state;
  model m;
  open_model(&m, view_src, false);
  float *x0 = aligned_floats(128), *x1 = aligned_floats(128), *z = aligned_floats(128), *ref0 = aligned_floats(128);
  float *ref1 = aligned_floats(128), *xbuf = aligned_floats(132), *obuf = aligned_floats(128);
  fill(x0, 128, 1), fill(x1, 128, -0.5f), fill(z, 128, 2);
  view_copied(&m, x1, z, ref1);
  view_copied(&m, x0, z, ref0);
  memcpy(xbuf, x0, 128 * sizeof *xbuf);
  mlc_tensor tx = f32_tensor(xbuf, 2, 8, 16, MLC_MEMORY_HOST_IN_PLACE);
  mlc_tensor to = f32_tensor(obuf, 2, 8, 16, MLC_MEMORY_HOST_IN_PLACE);
  check(mlc_session_set_input_tensor(m.s, "forward", "x", &tx));
  memcpy(xbuf, x1, 128 * sizeof *xbuf); /* bound: the run sees it */
  memset(obuf, 0, 128 * sizeof *obuf);
  assert_false(mlc_session_is_bound(m.s, "forward", false, "output0"));
  check(mlc_session_check_tensor(m.s, "forward", false, "output0", &to));
  assert_true(mlc_session_is_bound(m.s, "forward", true, "x"));
  assert_true(mlc_session_is_bound(m.s, "forward", false, "output0"));
  assert_false(mlc_session_is_bound(m.s, "forward", true, "output0")); /* no such input */
  assert_false(mlc_session_is_bound(m.s, "forward", true, "nope"));
  assert_false(mlc_session_is_bound(m.s, "nope", true, "x"));
  check(mlc_session_run(m.s, "forward"));
  assert_false(mlc_session_is_bound(m.s, "forward", true, "x")); /* for one run only */
  assert_memory_equal(obuf, ref1, 128 * sizeof *obuf);
  check(mlc_session_output_tensor(m.s, "forward", "output0", &to));
  assert_memory_equal(obuf, ref1, 128 * sizeof *obuf);
  /* 4 bytes off alignment: copied at set_input_tensor, so a later write is not seen */
  float *odd = xbuf + 1;
  memcpy(odd, x0, 128 * sizeof *odd);
  tx = f32_tensor(odd, 2, 8, 16, MLC_MEMORY_HOST_IN_PLACE);
  check(mlc_session_set_input_tensor(m.s, "forward", "x", &tx));
  assert_false(mlc_session_is_bound(m.s, "forward", true, "x"));
  memcpy(odd, x1, 128 * sizeof *odd);
  check(mlc_session_check_tensor(m.s, "forward", false, "output0", &to));
  check(mlc_session_run(m.s, "forward"));
  assert_memory_equal(obuf, ref0, 128 * sizeof *obuf);
  /* A plain host tensor is copied, as before. */
  memcpy(xbuf, x1, 128 * sizeof *xbuf);
  tx = f32_tensor(xbuf, 2, 8, 16, MLC_MEMORY_HOST);
  to = f32_tensor(obuf, 2, 8, 16, MLC_MEMORY_HOST);
  check(mlc_session_set_input_tensor(m.s, "forward", "x", &tx));
  memcpy(xbuf, x0, 128 * sizeof *xbuf);
  memset(obuf, 0, 128 * sizeof *obuf);
  check(mlc_session_check_tensor(m.s, "forward", false, "output0", &to));
  check(mlc_session_run(m.s, "forward"));
  float zero[128] = {0};
  assert_memory_equal(obuf, zero, sizeof zero); /* not written by the run */
  check(mlc_session_output_tensor(m.s, "forward", "output0", &to));
  assert_memory_equal(obuf, ref1, 128 * sizeof *obuf);
  /* Device memory, in place or not, on the CPU: refused, naming it, with nothing bound. */
  for (int k = 0; k < 2; k++) {
    tx = f32_tensor(xbuf, 2, 8, 16, k ? MLC_MEMORY_DEVICE_IN_PLACE : MLC_MEMORY_DEVICE);
    mlc_status st = mlc_session_set_input_tensor(m.s, "forward", "x", &tx);
    assert_non_null(st);
    assert_int_equal(mlc_status_code(st), MLC_INVALID_ARGUMENT);
    assert_non_null(strstr(mlc_status_message(st), "input 'x' of forward is in device memory"));
    mlc_status_free(st);
    assert_false(mlc_session_is_bound(m.s, "forward", true, "x"));
  }
  free(x0), free(x1), free(z), free(ref0), free(ref1), free(xbuf), free(obuf);
  close_model(&m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_view),
    cmocka_unit_test(test_reuse),
    cmocka_unit_test(test_refusals),
    cmocka_unit_test(test_tensors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
