/* Tests for runtime/registry.c: the drivers, mlc_device_create's errors
 * (unknown names, drivers not built, code of the wrong kind, ordinals past
 * the devices), a CPU device made through it that runs a kernel, its
 * behaviour when each allocation fails in turn, and enumeration.  The GPU
 * drivers are only asked what they answer on any machine: a clear error
 * without their library, never a device made from no code.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "runtime/cpu/device.h"
#include "runtime/cpu/kernel.h"
#include "runtime/device.h"

/* Asserts st has the code and its message contains `part`, then frees it. */
static void fails(mlc_status st, mlc_status_code_t code, const char *part) {
  assert_non_null(st);
  if (mlc_status_code(st) != code || !strstr(mlc_status_message(st), part))
    fail_msg("expected %s with '%s', got %s: %s", mlc_status_code_name(code), part,
             mlc_status_code_name(mlc_status_code(st)), mlc_status_message(st));
  mlc_status_free(st);
}

static const mlc_driver *find(const char *name) {
  uint32_t n;
  const mlc_driver *d = mlc_drivers(&n);
  for (uint32_t i = 0; i < n; i++)
    if (!strcmp(d[i].name, name)) return &d[i];
  return NULL;
}

static void test_registry_rows(void **state) {
  (void)state;
  uint32_t n;
  const mlc_driver *d = mlc_drivers(&n);
  assert_int_equal(n, 4);
  const char *names[] = {"cpu", "cuda", "vulkan", "metal"};
  for (uint32_t i = 0; i < n; i++) {
    assert_string_equal(d[i].name, names[i]);
    assert_non_null(d[i].what);
    /* a row has its operations exactly when it is built */
    assert_int_equal(d[i].create == NULL, d[i].not_built != NULL);
  }
  assert_null(find("cpu")->not_built); /* always built, as is cuda (libcuda is loaded at run time) */
  assert_null(find("cuda")->not_built);
  assert_string_equal(find("vulkan")->alias, "spirv");
}

static void test_unknown_and_not_built(void **state) {
  (void)state;
  const mlc_driver *d;
  fails(mlc_driver_find("hip", &d), MLC_INVALID_ARGUMENT, "no device driver 'hip': this libmlcrt has cpu, cuda");
  assert_null(d);
  fails(mlc_driver_find(NULL, &d), MLC_INVALID_ARGUMENT, "no device driver");
  mlc_device *dev = (mlc_device *)&d; /* not NULL: create must clear it */
  fails(mlc_device_create("hip", 0, NULL, &dev), MLC_INVALID_ARGUMENT, "this libmlcrt has");
  assert_null(dev);
  mlc_device_info info[2];
  uint32_t count = 7;
  fails(mlc_device_enumerate("hip", info, 2, &count), MLC_INVALID_ARGUMENT, "no device driver 'hip'");
  assert_int_equal(count, 0);
  uint32_t n;
  const mlc_driver *all = mlc_drivers(&n);
  for (uint32_t i = 0; i < n; i++) {
    if (!all[i].not_built) continue;
    fails(mlc_driver_find(all[i].name, &d), MLC_UNIMPLEMENTED, all[i].not_built);
    fails(mlc_device_create(all[i].name, 0, NULL, &dev), MLC_UNIMPLEMENTED, "its drivers are cpu, cuda");
  }
}

static void test_alias(void **state) {
  (void)state;
  const mlc_driver *d;
  mlc_status st = mlc_driver_find("spirv", &d);
  if (find("vulkan")->not_built) {
    fails(st, MLC_UNIMPLEMENTED, "without Vulkan");
    return;
  }
  assert_null(st);
  assert_ptr_equal(d, find("vulkan"));
}

static void test_wrong_code_kind(void **state) {
  (void)state;
  int dummy = 0;
  mlc_device *dev;
  mlc_device_options o = {.code_kind = MLC_CODE_CUDA, .code = &dummy};
  fails(mlc_device_create("cpu", 0, &o, &dev), MLC_INVALID_ARGUMENT, "device driver 'cpu' runs code of kind");
  o.code = NULL;
  fails(mlc_device_create("cpu", 0, &o, &dev), MLC_INVALID_ARGUMENT, "not its own");
  fails(mlc_device_create("cpu", 1, NULL, &dev), MLC_NOT_FOUND, "no CPU device 1");
  assert_null(dev);
}

/* out[i] = 2 * in[i] + 1 over f32, as a compiled kernel would (kernel.h). */
static void twice_plus_one(void **args, int64_t begin, int64_t end) {
  const float *in = args[0];
  float *out = args[1];
  for (int64_t i = begin; i < end; i++) out[i] = 2 * in[i] + 1;
}

static void *lookup(void *ctx, const char *symbol) {
  (void)ctx;
  if (strcmp(symbol, "twice_plus_one")) return NULL;
  void *p;
  mlc_cpu_kernel_fn fn = twice_plus_one;
  memcpy(&p, &fn, sizeof p);
  return p;
}

/* A CPU device through the registry: memory, copies, a kernel by name. */
static mlc_status run_cpu(mlc_allocator a, float *out) {
  mlc_cpu_code code = {lookup, NULL, 2};
  mlc_device_options o = {.allocator = a, .code_kind = MLC_CODE_CPU, .code = &code};
  mlc_device *d;
  MLC_RETURN_IF_ERROR(mlc_device_create("cpu", 0, &o, &d));
  mlc_status st = NULL;
  uint64_t buf[2] = {0, 0};
  float in[5] = {0, 1, 2, 3, 4};
  void *k;
  if (!(st = d->vt->alloc(d, sizeof in, &buf[0])) && !(st = d->vt->alloc(d, sizeof in, &buf[1])) &&
      !(st = d->vt->write(d, buf[0], in, sizeof in)) && !(st = d->vt->resolve(d, "twice_plus_one", &k)) &&
      !(st = d->vt->launch(d, k, 5, buf, 2, false, 0)) && !(st = d->vt->finish(d, 0, NULL, NULL)))
    st = d->vt->read(d, out, buf[1], sizeof in);
  d->vt->free(d, buf[0]);
  d->vt->free(d, buf[1]);
  d->vt->destroy(d);
  return st;
}

static void test_cpu_device_runs(void **state) {
  (void)state;
  float out[5];
  assert_null(run_cpu(mlc_allocator_default(), out));
  for (int i = 0; i < 5; i++) assert_true(out[i] == 2.0f * (float)i + 1);
  /* no code: a device for memory only, whose kernels are not found */
  mlc_device *d;
  assert_null(mlc_device_create("cpu", 0, NULL, &d));
  assert_string_equal(d->vt->name, "cpu");
  void *k;
  fails(d->vt->resolve(d, "twice_plus_one", &k), MLC_NOT_FOUND, "twice_plus_one");
  d->vt->destroy(d);
}

static void test_cpu_device_allocation_failures(void **state) {
  (void)state;
  for (size_t n = 1;; n++) {
    mlc_failing_allocator fa;
    mlc_allocator a = mlc_allocator_failing(&fa, mlc_allocator_default(), n);
    float out[5];
    mlc_status st = run_cpu(a, out);
    if (st) {
      assert_int_equal(mlc_status_code(st), MLC_OUT_OF_MEMORY);
      mlc_status_free(st);
    }
    assert_int_equal(fa.live, 0);
    if (!fa.failed) break;
  }
}

static void test_cpu_enumerate(void **state) {
  (void)state;
  mlc_device_info info[4];
  uint32_t n = 0;
  assert_null(mlc_device_enumerate("cpu", info, 4, &n));
  assert_int_equal(n, 1);
  assert_int_equal(info[0].ordinal, 0);
  assert_true(info[0].name[0]);
  assert_true(info[0].memory > 0);
  assert_non_null(strstr(info[0].detail, "CPUs online"));
#ifdef __x86_64__
  assert_true(!strncmp(info[0].detail, "x86-64", 6)); /* "x86-64-v3: sse4.2 avx ..." */
#endif
  /* no room: the count only */
  assert_null(mlc_device_enumerate("cpu", NULL, 0, &n));
  assert_int_equal(n, 1);
}

/* Without code, no GPU driver makes a device: an error that names the
 * missing library on a machine without one, or the missing code. */
static void test_gpu_drivers_without_code(void **state) {
  (void)state;
  const char *gpus[] = {"cuda", "vulkan"};
  for (int i = 0; i < 2; i++) {
    if (find(gpus[i])->not_built) continue;
    mlc_device_info info[8];
    uint32_t n = 0;
    mlc_status st = mlc_device_enumerate(gpus[i], info, 8, &n);
    if (st) {
      /* no driver library or no device: MLC_UNIMPLEMENTED */
      assert_int_equal(mlc_status_code(st), MLC_UNIMPLEMENTED);
      assert_int_equal(n, 0);
      mlc_status_free(st);
    }
    for (uint32_t j = 0; j < n && j < 8; j++) assert_int_equal(info[j].ordinal, (int)j);
    mlc_device *d = NULL;
    st = mlc_device_create(gpus[i], 1000, NULL, &d);
    assert_non_null(st); /* no driver, or no device 1000 */
    assert_null(d);
    assert_true(mlc_status_code(st) == MLC_UNIMPLEMENTED || mlc_status_code(st) == MLC_NOT_FOUND);
    mlc_status_free(st);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_registry_rows),
    cmocka_unit_test(test_unknown_and_not_built),
    cmocka_unit_test(test_alias),
    cmocka_unit_test(test_wrong_code_kind),
    cmocka_unit_test(test_cpu_device_runs),
    cmocka_unit_test(test_cpu_device_allocation_failures),
    cmocka_unit_test(test_cpu_enumerate),
    cmocka_unit_test(test_gpu_drivers_without_code),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
