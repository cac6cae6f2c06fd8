/* The profiler: roofline classification and hints from synthetic timings
 * and known costs, the ceilings cache, the SVG roofline, and the Chrome
 * trace of a session run on a hand-built plan (parsed back with cJSON). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <cjson/cJSON.h>

#include "runtime/profile.h"
#include "runtime/session.h"

/* 100 GFLOP/s and 20 GB/s: the ridge at 5 FLOP/byte. */
static mlc_ceilings test_ceilings(void) {
  mlc_ceilings c;
  mlc_ceilings_default(&c);
  c.peak_flops = 100e9;
  c.bandwidth = 20e9;
  return c;
}

static mlc_plan_shape shape(uint8_t dtype, int rank, int64_t d0, int64_t d1, int64_t d2) {
  mlc_plan_shape s = {dtype, (uint8_t)rank, {d0, d1, d2}};
  return s;
}

/* An elementwise add of 1M f32: 1e6 FLOPs over 12 MB, in 1 ms.  Intensity
 * 1/12, roof 1.667 GFLOP/s, achieved 1 GFLOP/s: 60% of the memory roof. */
static void memory_bound_elementwise(void **state) {
  (void)state;
  mlc_ceilings c = test_ceilings();
  mlc_profile_kernel k = {"add%3", 1e6, 12e6, 1e-3, NULL, 0};
  mlc_profile_verdict v;
  mlc_profile_classify(&k, &c, &v);
  assert_int_equal(v.bound, MLC_BOUND_MEMORY);
  assert_float_equal(v.intensity, 1.0 / 12, 1e-12);
  assert_float_equal(v.flop_rate, 1e9, 1);
  assert_float_equal(v.byte_rate, 12e9, 1);
  assert_float_equal(v.roof, 20e9 / 12, 1);
  assert_float_equal(v.pct_roof, 60.0, 1e-9);
  assert_string_equal(v.hint, "fuse with neighbours, quantise (FP8/INT4), or raise the batch");
  assert_string_equal(mlc_bound_name(v.bound), "memory");
}

/* A pure copy (no FLOPs) is measured against the bandwidth: 10 MB in 1 ms
 * is 10 GB/s, half the roof. */
static void copy_uses_bandwidth(void **state) {
  (void)state;
  mlc_ceilings c = test_ceilings();
  mlc_profile_kernel k = {"transpose%9", 0, 10e6, 1e-3, NULL, 0};
  mlc_profile_verdict v;
  mlc_profile_classify(&k, &c, &v);
  assert_int_equal(v.bound, MLC_BOUND_MEMORY);
  assert_float_equal(v.pct_roof, 50.0, 1e-9);
}

/* A 1024^3 GEMM: 2^31 FLOPs over 12 MiB (intensity 170.7), in 40 ms:
 * 53.7 GFLOP/s against the 100 GFLOP/s compute roof; every dim aligned. */
static void compute_bound_gemm(void **state) {
  (void)state;
  mlc_ceilings c = test_ceilings();
  mlc_plan_shape a = shape(1, 2, 1024, 1024, 0), b = shape(1, 2, 1024, 1024, 0), o = shape(1, 2, 1024, 1024, 0);
  const mlc_plan_shape *sh[] = {&a, &b, &o};
  double flops = 2.0 * 1024 * 1024 * 1024, bytes = 3.0 * 4 * 1024 * 1024;
  mlc_profile_kernel k = {"matmul%12", flops, bytes, 0.04, sh, 3};
  mlc_profile_verdict v;
  mlc_profile_classify(&k, &c, &v);
  assert_int_equal(v.bound, MLC_BOUND_COMPUTE);
  assert_float_equal(v.roof, 100e9, 1);
  assert_float_equal(v.pct_roof, 100 * flops / 0.04 / 100e9, 1e-9);
  assert_string_equal(v.hint, "lower precision (bf16/FP8)");
  int64_t m, n, kk;
  assert_true(mlc_profile_gemm_dims(&k, &m, &n, &kk));
  assert_int_equal(m, 1024);
  assert_int_equal(n, 1024);
  assert_int_equal(kk, 1024);
}

/* linear x[8, 128, 768] @ w[1000, 768]^T: M = 1024 (leading dims folded),
 * K = 768, N = 1000: N is the misaligned one. */
static void misaligned_linear_names_n(void **state) {
  (void)state;
  mlc_ceilings c = test_ceilings();
  mlc_plan_shape x = shape(1, 3, 8, 128, 768), w = shape(1, 2, 1000, 768, 0), o = shape(1, 3, 8, 128, 1000);
  const mlc_plan_shape *sh[] = {&x, &w, &o};
  double flops = 2.0 * 1024 * 1000 * 768, bytes = 4.0 * (1024 * 768 + 1000 * 768 + 1024 * 1000);
  mlc_profile_kernel k = {"linear%7", flops, bytes, 0.03, sh, 3};
  int64_t m, n, kk;
  assert_true(mlc_profile_gemm_dims(&k, &m, &n, &kk));
  assert_int_equal(m, 1024);
  assert_int_equal(n, 1000);
  assert_int_equal(kk, 768);
  mlc_profile_verdict v;
  mlc_profile_classify(&k, &c, &v);
  assert_int_equal(v.bound, MLC_BOUND_COMPUTE);
  assert_string_equal(v.hint, "align N (=1000) to a multiple of 64/128");
}

/* matmul a[4, 512, 300] @ b[4, 300, 512]: K = 300. */
static void misaligned_matmul_names_k(void **state) {
  (void)state;
  mlc_ceilings c = test_ceilings();
  mlc_plan_shape a = shape(1, 3, 4, 512, 300), b = shape(1, 3, 4, 300, 512), o = shape(1, 3, 4, 512, 512);
  const mlc_plan_shape *sh[] = {&a, &b, &o};
  double flops = 2.0 * 4 * 512 * 512 * 300, bytes = 4.0 * 4 * (512 * 300 * 2 + 512 * 512);
  mlc_profile_kernel k = {"matmul", flops, bytes, 0.01, sh, 3};
  mlc_profile_verdict v;
  mlc_profile_classify(&k, &c, &v);
  assert_int_equal(v.bound, MLC_BOUND_COMPUTE);
  assert_string_equal(v.hint, "align K (=300) to a multiple of 64/128");
  /* Not a GEMM: a name that only starts like one. */
  mlc_profile_kernel other = {"matmul_grad%3", flops, bytes, 0.01, sh, 3};
  int64_t m, n, kk;
  assert_false(mlc_profile_gemm_dims(&other, &m, &n, &kk));
  mlc_profile_classify(&other, &c, &v);
  assert_string_equal(v.hint, "lower precision (bf16/FP8)");
}

/* Tiny work, or any work in under 20 us, is latency-bound. */
static void latency_bound(void **state) {
  (void)state;
  mlc_ceilings c = test_ceilings();
  mlc_profile_verdict v;
  mlc_profile_kernel tiny = {"add%1", 1000, 8000, 50e-6, NULL, 0};
  mlc_profile_classify(&tiny, &c, &v);
  assert_int_equal(v.bound, MLC_BOUND_LATENCY);
  assert_string_equal(mlc_bound_name(v.bound), "latency");
  assert_string_equal(v.hint, "too small to fill the CPU: fuse with neighbours or batch more work");
  mlc_profile_kernel quick = {"matmul%2", 2e6, 1e6, 10e-6, NULL, 0};
  mlc_profile_classify(&quick, &c, &v);
  assert_int_equal(v.bound, MLC_BOUND_LATENCY);
  quick.seconds = 30e-6; /* the same work over 20 us: intensity 2 is under the ridge */
  mlc_profile_classify(&quick, &c, &v);
  assert_int_equal(v.bound, MLC_BOUND_MEMORY);
}

static void tmp_path(char *buf, size_t n, const char *name) {
  snprintf(buf, n, "/tmp/mlc_test_profile_%d_%s", (int)getpid(), name);
}

/* The cache: one entry per CPU model, others kept; a missing CPU gets the
 * defaults and says so. */
static void ceilings_cache(void **state) {
  (void)state;
  char path[256];
  tmp_path(path, sizeof path, "cache/ceilings-cpu.json");
  mlc_ceilings c = test_ceilings(), got;
  snprintf(c.device, sizeof c.device, "Test CPU \"A\"");
  snprintf(c.source, sizeof c.source, "2026-01-01T00:00:00Z");
  assert_null(mlc_ceilings_save_file(path, &c));
  snprintf(c.device, sizeof c.device, "Test CPU B");
  c.peak_flops = 50e9;
  assert_null(mlc_ceilings_save_file(path, &c));
  mlc_ceilings_load_file(path, "Test CPU \"A\"", &got);
  assert_true(got.calibrated);
  assert_float_equal(got.peak_flops, 100e9, 1);
  assert_float_equal(got.bandwidth, 20e9, 1);
  assert_non_null(strstr(got.source, "cached calibration in"));
  assert_non_null(strstr(got.source, "2026-01-01T00:00:00Z"));
  mlc_ceilings_load_file(path, "Test CPU B", &got);
  assert_float_equal(got.peak_flops, 50e9, 1);
  mlc_ceilings_load_file(path, "Other CPU", &got);
  assert_false(got.calibrated);
  assert_non_null(strstr(got.source, "built-in defaults"));
  char missing[256];
  tmp_path(missing, sizeof missing, "nothing.json");
  mlc_ceilings_load_file(missing, "Test CPU B", &got);
  assert_false(got.calibrated);
  assert_non_null(strstr(got.source, "never calibrated"));
  unlink(path);
  char dir[256];
  tmp_path(dir, sizeof dir, "cache");
  rmdir(dir);
}

static void roofline_svg(void **state) {
  (void)state;
  mlc_ceilings c = test_ceilings();
  mlc_roofline_point pts[] = {
    {"matmul%1", 170, 60e9, 2e-3}, {"add%2", 0.083, 1e9, 1e-3}, {"copy%3", 0, 0, 1e-3}, {"a<b>&c", 1, 5e9, 1e-4},
  };
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_non_null(f);
  mlc_profile_write_roofline_svg(f, &c, pts, 4, 12, "test");
  fclose(f);
  assert_non_null(strstr(buf, "<svg xmlns=\"http://www.w3.org/2000/svg\""));
  assert_non_null(strstr(buf, "compute roof 100.0 GFLOP/s"));
  assert_non_null(strstr(buf, "memory roof 20.0 GB/s"));
  assert_non_null(strstr(buf, ">matmul%1 ("));
  assert_non_null(strstr(buf, ">add%2 ("));
  assert_non_null(strstr(buf, "a&lt;b&gt;&amp;c"));
  assert_null(strstr(buf, "copy%3")); /* no FLOPs: no place on a log-log plot */
  assert_non_null(strstr(buf, "arithmetic intensity (FLOP/byte)"));
  assert_non_null(strstr(buf, "</svg>\n"));
  free(buf);
}

/* A hand-built plan: one entry, three f32[4, 4] values, two steps whose
 * kernel spins a little so that each takes measurable time. */
static void spin_kernel(void **bufs, int64_t begin, int64_t end) {
  volatile double x = 0;
  (void)bufs;
  for (int64_t i = begin; i < end; i++)
    for (int k = 0; k < 20000; k++) x += 1e-9 * k;
  (void)x; /* read it once more: clang counts a volatile only stored to as unused */
}
static void *lookup(void *ctx, const char *symbol) {
  (void)ctx;
  void *p;
  void (*fn)(void **, int64_t, int64_t) = spin_kernel;
  memcpy(&p, &fn, sizeof p);
  return strcmp(symbol, "k0") ? NULL : p;
}

/* A device that forwards to the CPU device and counts the launches that
 * asked for timing: with profiling off there must be none. */
typedef struct {
  mlc_device base;
  mlc_device *cpu;
  int launches, timed;
} counting_dev;

static void cd_destroy(mlc_device *d) {
  counting_dev *c = (counting_dev *)d;
  c->cpu->vt->destroy(c->cpu);
}
static mlc_status cd_alloc(mlc_device *d, uint64_t n, uint64_t *out) {
  return ((counting_dev *)d)->cpu->vt->alloc(((counting_dev *)d)->cpu, n, out);
}
static void cd_free(mlc_device *d, uint64_t p) { ((counting_dev *)d)->cpu->vt->free(((counting_dev *)d)->cpu, p); }
static mlc_status cd_write(mlc_device *d, uint64_t dst, const void *src, uint64_t n) {
  return ((counting_dev *)d)->cpu->vt->write(((counting_dev *)d)->cpu, dst, src, n);
}
static mlc_status cd_read(mlc_device *d, void *dst, uint64_t src, uint64_t n) {
  return ((counting_dev *)d)->cpu->vt->read(((counting_dev *)d)->cpu, dst, src, n);
}
static mlc_status cd_resolve(mlc_device *d, const char *sym, void **out) {
  return ((counting_dev *)d)->cpu->vt->resolve(((counting_dev *)d)->cpu, sym, out);
}
static mlc_status cd_launch(mlc_device *d, void *k, uint64_t items, const uint64_t *args, uint32_t nargs, bool timing,
                            uint32_t slot) {
  counting_dev *c = (counting_dev *)d;
  c->launches++;
  c->timed += timing;
  return c->cpu->vt->launch(c->cpu, k, items, args, nargs, timing, slot);
}
static mlc_status cd_finish(mlc_device *d, uint32_t n, double *sec, double *start) {
  return ((counting_dev *)d)->cpu->vt->finish(((counting_dev *)d)->cpu, n, sec, start);
}
static void cd_describe(mlc_device *d, char *buf, size_t n) { snprintf(buf, n, "counting CPU"); }
static const mlc_device_vt counting_vt = {"counting", true, cd_destroy, cd_alloc, cd_free, cd_write, cd_read, cd_resolve,
                                          cd_launch, cd_finish, cd_describe, NULL, NULL};


/* With profiling off, no step is timed and nothing is recorded; with it
 * on, every step of every run is. */
static void profiling_off_records_nothing(void **state) {
  (void)state;
  mlc_plan_value vals[2];
  for (int i = 0; i < 2; i++) vals[i] = (mlc_plan_value){shape(1, 2, 4, 4, 0), 64 * i, MLC_PLAN_NO_PARAM, 0, 0};
  uint32_t args[] = {0, 1};
  mlc_plan_step steps[] = {{0, "a%1", "", 0, 0, 2, NULL, args, 4, 16, 128}, {0, "b%2", "", 0, 0, 2, NULL, args, 4, 16, 128}};
  mlc_plan_entry entry = {"forward", 128, 2, 0, 0, 2, vals, NULL, NULL, steps};
  const char *kernels[] = {"k0"};
  mlc_plan plan = {"test", 0, 1, 1, NULL, kernels, &entry, {0}};
  for (int profile = 0; profile < 2; profile++) {
    static counting_dev cd;
    memset(&cd, 0, sizeof cd);
    cd.base.vt = &counting_vt;
    assert_null(mlc_cpu_device_create(lookup, NULL, 1, mlc_allocator_default(), &cd.cpu));
    mlc_session_options so = {&cd.base, NULL, NULL, 1, profile, {0}};
    mlc_session *s;
    assert_null(mlc_session_create(&plan, &so, &s));
    mlc_session_set_trace(s, true);
    for (int r = 0; r < 5; r++) assert_null(mlc_session_run(s, "forward"));
    assert_int_equal(cd.launches, 10);
    assert_int_equal(cd.timed, profile ? 10 : 0);
    char *tab = NULL;
    size_t tlen = 0;
    FILE *tf = open_memstream(&tab, &tlen);
    mlc_session_print_profile(s, "forward", tf);
    fclose(tf);
    if (profile) assert_non_null(strstr(tab, "2 steps"));
    else assert_string_equal(tab, "no profiled runs of forward\n");
    free(tab);
    mlc_session_destroy(s);
  }
}

static void trace_json(void **state) {
  (void)state;
  mlc_plan_value vals[3];
  for (int i = 0; i < 3; i++) vals[i] = (mlc_plan_value){shape(1, 2, 4, 4, 0), 64 * i, MLC_PLAN_NO_PARAM, 0, 0};
  vals[2].shape = shape(1, 3, 2, 4, 4);
  uint32_t args[] = {0, 1, 2}, wait0[] = {0};
  mlc_plan_step steps[] = {
    {0, "linear%1", "layers.0.\"ffn\"", 0, 0, 3, NULL, args, 4, 128, 192},
    {0, "add%2", "", 0, 1, 3, wait0, args, 4, 16, 192},
  };
  mlc_plan_entry entry = {"forward", 256, 3, 0, 0, 2, vals, NULL, NULL, steps};
  const char *kernels[] = {"k0"};
  mlc_plan plan = {"test", 0, 1, 1, NULL, kernels, &entry, {0}};
  mlc_session_options so = {NULL, lookup, NULL, 1, true, {0}};
  mlc_session *s;
  assert_null(mlc_session_create(&plan, &so, &s));
  mlc_session_set_trace(s, true);
  for (int r = 0; r < 3; r++) assert_null(mlc_session_run(s, "forward"));
  char path[256];
  tmp_path(path, sizeof path, "trace.json");
  assert_null(mlc_session_write_trace(s, path));
  /* The table, against known ceilings. */
  char *tab = NULL;
  size_t tlen = 0;
  FILE *tf = open_memstream(&tab, &tlen);
  mlc_ceilings c = test_ceilings();
  mlc_session_print_profile_ceilings(s, "forward", &c, tf);
  fclose(tf);
  assert_non_null(strstr(tab, "ceilings: 100.0 GFLOP/s peak, 20.0 GB/s memory (ridge 5.0 FLOP/byte)"));
  assert_non_null(strstr(tab, "linear%1"));
  assert_non_null(strstr(tab, "latency")); /* 128 FLOPs is tiny work */
  assert_non_null(strstr(tab, "2 steps"));
  free(tab);
  mlc_session_destroy(s);

  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  static char text[1 << 16];
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  unlink(path);
  text[n] = 0;
  cJSON *root = cJSON_Parse(text);
  assert_non_null(root);
  const cJSON *evs = cJSON_GetObjectItemCaseSensitive(root, "traceEvents");
  assert_true(cJSON_IsArray(evs));
  int complete = 0, thread_names = 0;
  double last_end = 0;
  const cJSON *ev;
  cJSON_ArrayForEach(ev, evs) {
    const char *ph = cJSON_GetObjectItemCaseSensitive(ev, "ph")->valuestring;
    assert_true(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(ev, "pid")));
    assert_true(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(ev, "tid")));
    if (!strcmp(ph, "M")) {
      thread_names += !strcmp(cJSON_GetObjectItemCaseSensitive(ev, "name")->valuestring, "thread_name");
      continue;
    }
    assert_string_equal(ph, "X");
    const char *name = cJSON_GetObjectItemCaseSensitive(ev, "name")->valuestring;
    bool first = complete % 2 == 0;
    assert_string_equal(name, first ? "linear%1" : "add%2");
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(ev, "tid")->valueint, 0);
    double ts = cJSON_GetObjectItemCaseSensitive(ev, "ts")->valuedouble;
    double dur = cJSON_GetObjectItemCaseSensitive(ev, "dur")->valuedouble;
    assert_true(dur > 0);
    assert_true(ts >= last_end - 1e-3); /* one stream: events in order, not overlapping */
    last_end = ts + dur;
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(ev, "args");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(a, "scope")->valuestring, first ? "layers.0.\"ffn\"" : "");
    assert_float_equal(cJSON_GetObjectItemCaseSensitive(a, "flops")->valuedouble, first ? 128 : 16, 0);
    assert_float_equal(cJSON_GetObjectItemCaseSensitive(a, "bytes")->valuedouble, 192, 0);
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(a, "shapes");
    assert_int_equal(cJSON_GetArraySize(sh), 3);
    assert_string_equal(cJSON_GetArrayItem(sh, 0)->valuestring, "f32[4, 4]");
    assert_string_equal(cJSON_GetArrayItem(sh, 2)->valuestring, "f32[2, 4, 4]");
    complete++;
  }
  assert_int_equal(complete, 6); /* 2 steps x 3 runs */
  assert_int_equal(thread_names, 1);
  cJSON_Delete(root);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(memory_bound_elementwise), cmocka_unit_test(copy_uses_bandwidth),
    cmocka_unit_test(compute_bound_gemm),       cmocka_unit_test(misaligned_linear_names_n),
    cmocka_unit_test(misaligned_matmul_names_k), cmocka_unit_test(latency_bound),
    cmocka_unit_test(ceilings_cache),           cmocka_unit_test(roofline_svg),
    cmocka_unit_test(trace_json), cmocka_unit_test(profiling_off_records_nothing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
