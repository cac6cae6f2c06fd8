/* The profiler: roofline classification and hints from synthetic timings
 * and known costs, the ceilings cache, the SVG roofline, and the Chrome
 * trace of a session run on a hand-built plan (parsed back with cJSON). */
#include <math.h>
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

#include "runtime/ncu.h"
#include "runtime/profile.h"
#include "runtime/tensor.h"
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

/* The DRAM bytes of a kernel started on an emptied L2 (mlc profile
 * --flush-l2, as under ncu): its writes still in the L2 at its end do not
 * count.  The numbers are the H100's (50 MiB L2) and the MiniLLM's bf16 to
 * f32 cast of 16M elements (32 MiB in, 64 MiB out), where ncu measured
 * 0.79 of the plan's bytes (bench/results/ncu-2026-12-06.md, cast%130). */
static void dram_bytes_after_flush(void **state) {
  (void)state;
  mlc_ceilings c = test_ceilings();
  c.l2_bytes = 50.0 * (1 << 20);
  double in = 32.0 * (1 << 20), out = 64.0 * (1 << 20), held = 0.7 * c.l2_bytes;
  mlc_profile_kernel k = {"cast%130", 0, in + out, 1e-3, NULL, 0, MLC_UNIT_FP32, 1, NULL, out, true};
  /* the last 35 MiB of its 96 MiB are in the L2 at its end, two thirds of them written */
  assert_float_equal(mlc_profile_dram_bytes(&k, &c), in + out - out * held / (in + out), 1);
  assert_float_equal(mlc_profile_dram_bytes(&k, &c) / (in + out), 0.757, 1e-3);
  /* one that fits in the L2: none of its writes reach DRAM while it runs */
  k.bytes = 24.0 * (1 << 20), k.write_bytes = 8.0 * (1 << 20);
  assert_float_equal(mlc_profile_dram_bytes(&k, &c), 16.0 * (1 << 20), 1e-6);
  /* warm (no flush), no known L2, or nothing written: every byte */
  k.cold = false;
  assert_float_equal(mlc_profile_dram_bytes(&k, &c), k.bytes, 0);
  k.cold = true, c.l2_bytes = 0;
  assert_float_equal(mlc_profile_dram_bytes(&k, &c), k.bytes, 0);
  c.l2_bytes = 50.0 * (1 << 20), k.write_bytes = 0;
  assert_float_equal(mlc_profile_dram_bytes(&k, &c), k.bytes, 0);
  /* the verdict follows: 16 of the 20 GB/s of test_ceilings with every byte
   * counted is memory-bound; cold, a kernel writing 9 of its 12 MB (they fit)
   * moves 3 MB to DRAM, 4 GB/s: neither */
  mlc_profile_kernel add = {"add%3", 1e6, 12e6, 0.75e-3, NULL, 0, MLC_UNIT_FP32, 1, NULL, 9e6, false};
  mlc_profile_verdict v;
  mlc_profile_classify(&add, &c, &v);
  assert_int_equal(v.bound, MLC_BOUND_MEMORY);
  assert_float_equal(v.dram_bytes, 12e6, 0);
  add.cold = true;
  mlc_profile_classify(&add, &c, &v);
  assert_int_equal(v.bound, MLC_BOUND_LATENCY);
  assert_float_equal(v.dram_bytes, 3e6, 1e-6);
  assert_float_equal(v.pct_memory, 20.0, 1e-9);
  assert_float_equal(v.byte_rate, 16e9, 1); /* the plan's bytes over its time, as before */
}

/* An elementwise add of 1M f32: 1e6 FLOPs over 12 MB, in 0.75 ms.
 * Intensity 1/12, roof 1.667 GFLOP/s, achieved 1.333 GFLOP/s: 80% of the
 * memory roof (16 of 20 GB/s) and 1.3% of the compute one. */
static void memory_bound_elementwise(void **state) {
  (void)state;
  mlc_ceilings c = test_ceilings();
  mlc_profile_kernel k = {"add%3", 1e6, 12e6, 0.75e-3, NULL, 0, MLC_UNIT_FP32, 1, NULL, 0, false};
  mlc_profile_verdict v;
  mlc_profile_classify(&k, &c, &v);
  assert_int_equal(v.bound, MLC_BOUND_MEMORY);
  assert_float_equal(v.intensity, 1.0 / 12, 1e-12);
  assert_float_equal(v.flop_rate, 1e9 / 0.75, 1);
  assert_float_equal(v.byte_rate, 16e9, 1);
  assert_float_equal(v.roof, 20e9 / 12, 1);
  assert_float_equal(v.pct_roof, 80.0, 1e-9);
  assert_string_equal(v.hint, "fuse with neighbours, quantise (FP8/INT4), or raise the batch");
  assert_string_equal(mlc_bound_name(v.bound), "memory");
  /* The same in 1 ms: 60% of the memory roof, under the seed's 75%:
   * neither, and the hint says it is near the memory roof. */
  k.seconds = 1e-3;
  mlc_profile_classify(&k, &c, &v);
  assert_int_equal(v.bound, MLC_BOUND_LATENCY);
  assert_float_equal(v.pct_roof, 60.0, 1e-9);
  assert_string_equal(v.hint, "near the memory roof (60%): fuse with neighbours, quantise, or raise the batch");
}

/* Attention off its fast path, and f32 GEMMs under --f32-matmul ieee, run
 * a generic kernel on the GPU's FP32 cores (issue 20): the hint names it,
 * whatever the bound.  On tensor cores, or on the CPU, it does not. */
static void generic_kernel_hint(void **state) {
  (void)state;
  mlc_ceilings c = test_ceilings();
  c.gpu = true;
  mlc_plan_shape q16 = shape(MLC_DTYPE_BF16, 3, 4, 300, 200), q32 = shape(MLC_DTYPE_F32, 3, 4, 300, 300);
  const mlc_plan_shape *s16[] = {&q16, &q16, &q16, &q16}, *s32[] = {&q32, &q32, &q32, &q32, &q32};
  mlc_profile_kernel k = {"attention%5", 1e9, 1e8, 0.1, s16, 4, MLC_UNIT_FP32, 1, NULL, 0, false};
  mlc_profile_verdict v;
  mlc_profile_classify(&k, &c, &v);
  assert_string_equal(v.hint, "generic kernel, a warp per row: 16-bit attention takes the tensor cores at head dim "
                              "d % 16 == 0, d <= 256 (here 200)");
  mlc_profile_kernel g = {"attention_grad%9", 1e9, 1e8, 0.1, s32, 5, MLC_UNIT_FP32, 1, NULL, 0, false};
  mlc_profile_classify(&g, &c, &v);
  assert_string_equal(v.hint, "generic kernel, a warp per row: f32 attention gradient takes the tensor cores at head "
                              "dim d % 8 == 0, d <= 256 (here 300), not under --f32-matmul ieee");
  mlc_profile_kernel l = {"linear%3", 1e9, 1e8, 0.1, s32, 3, MLC_UNIT_FP32, 1, NULL, 0, false};
  mlc_profile_classify(&l, &c, &v);
  assert_string_equal(v.hint, "f32 GEMM on the FP32 cores (--f32-matmul ieee): tf32x3 runs it on the tensor cores at "
                              "f32 accuracy");
  /* A decode step's linear (at most 4 rows, bf16 or f32) is a matrix-vector
   * product on the FP32 cores by design: memory-bound, its bound's hint, not
   * tf32x3's (the H100's decode profile of 2026-12-07 said tf32x3 for the
   * bf16 head). */
  mlc_plan_shape x1 = shape(MLC_DTYPE_BF16, 2, 1, 2048, 0), w1 = shape(MLC_DTYPE_BF16, 2, 32000, 2048, 0);
  const mlc_plan_shape *sg[] = {&x1, &w1};
  mlc_profile_kernel gv = {"linear%317", 131e6, 131e6, 131e6 / 18e9, sg, 2, MLC_UNIT_FP32, 1, NULL, 0, false};
  mlc_profile_classify(&gv, &c, &v); /* 90% of the test's 20 GB/s */
  assert_int_equal(v.bound, MLC_BOUND_MEMORY);
  assert_string_equal(v.hint, "fuse with neighbours, quantise (FP8/INT4), or raise the batch");
  x1.dtype = w1.dtype = MLC_DTYPE_F32, x1.dims[0] = 4;
  mlc_profile_classify(&gv, &c, &v);
  assert_null(strstr(v.hint, "tf32x3"));
  k.unit = MLC_UNIT_TC16; /* the fast path */
  mlc_profile_classify(&k, &c, &v);
  assert_null(strstr(v.hint, "generic"));
  k.unit = MLC_UNIT_FP32;
  c.gpu = false; /* the CPU has no other kernel */
  mlc_profile_classify(&k, &c, &v);
  assert_null(strstr(v.hint, "generic"));
}

/* The seed's rule itself (issue 24), at and beside each threshold. */
static void seed_rule(void **state) {
  (void)state;
  assert_int_equal(mlc_bound_rule(75.1, 49.9), MLC_BOUND_COMPUTE);
  assert_int_equal(mlc_bound_rule(75.0, 10), MLC_BOUND_LATENCY);
  assert_int_equal(mlc_bound_rule(90, 50.0), MLC_BOUND_LATENCY);
  assert_int_equal(mlc_bound_rule(24.9, 75.1), MLC_BOUND_MEMORY);
  assert_int_equal(mlc_bound_rule(25.0, 90), MLC_BOUND_LATENCY);
  assert_int_equal(mlc_bound_rule(10, 75.0), MLC_BOUND_LATENCY);
  assert_int_equal(mlc_bound_rule(80, 80), MLC_BOUND_LATENCY);
  assert_int_equal(mlc_bound_rule(1, 1), MLC_BOUND_LATENCY);
}

/* A collective (FSDP's all_gather, reduce_scatter) gets the communication
 * hint, not the fusion one: its bytes cross the link between GPUs. */
static void collective_hint(void **state) {
  (void)state;
  mlc_ceilings c = test_ceilings();
  const char *names[] = {"all_gather%4", "reduce_scatter%12"};
  for (int i = 0; i < 2; i++) {
    mlc_profile_kernel k = {names[i], i ? 1e6 : 0, 50e6, 1e-3, NULL, 0, MLC_UNIT_FP32, 1, NULL, 0, false};
    mlc_profile_verdict v;
    mlc_profile_classify(&k, &c, &v);
    assert_int_equal(v.bound, MLC_BOUND_MEMORY);
    assert_string_equal(v.hint, "communication: hide it behind compute (prefetch), or send bf16");
  }
  mlc_profile_kernel k = {"all_gathered%4", 0, 50e6, 1e-3, NULL, 0, MLC_UNIT_FP32, 1, NULL, 0, false}; /* only the op's own name */
  mlc_profile_verdict v;
  mlc_profile_classify(&k, &c, &v);
  assert_string_equal(v.hint, "fuse with neighbours, quantise (FP8/INT4), or raise the batch");
}

/* A pure copy (no FLOPs) is measured against the bandwidth: 10 MB in
 * 0.625 ms is 16 GB/s, 80% of the roof. */
static void copy_uses_bandwidth(void **state) {
  (void)state;
  mlc_ceilings c = test_ceilings();
  mlc_profile_kernel k = {"transpose%9", 0, 10e6, 0.625e-3, NULL, 0, MLC_UNIT_FP32, 1, NULL, 0, false};
  mlc_profile_verdict v;
  mlc_profile_classify(&k, &c, &v);
  assert_int_equal(v.bound, MLC_BOUND_MEMORY);
  assert_float_equal(v.pct_roof, 80.0, 1e-9);
}

/* A 1024^3 GEMM: 2^31 FLOPs over 12 MiB (intensity 170.7), in 25 ms:
 * 85.9 GFLOP/s against the 100 GFLOP/s compute roof (memory 2.5%); every
 * dim aligned. */
static void compute_bound_gemm(void **state) {
  (void)state;
  mlc_ceilings c = test_ceilings();
  mlc_plan_shape a = shape(1, 2, 1024, 1024, 0), b = shape(1, 2, 1024, 1024, 0), o = shape(1, 2, 1024, 1024, 0);
  const mlc_plan_shape *sh[] = {&a, &b, &o};
  double flops = 2.0 * 1024 * 1024 * 1024, bytes = 3.0 * 4 * 1024 * 1024;
  mlc_profile_kernel k = {"matmul%12", flops, bytes, 0.025, sh, 3, MLC_UNIT_FP32, 1, NULL, 0, false};
  mlc_profile_verdict v;
  mlc_profile_classify(&k, &c, &v);
  assert_int_equal(v.bound, MLC_BOUND_COMPUTE);
  assert_float_equal(v.roof, 100e9, 1);
  assert_float_equal(v.pct_roof, 100 * flops / 0.025 / 100e9, 1e-9);
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
  mlc_profile_kernel k = {"linear%7", flops, bytes, 0.018, sh, 3, MLC_UNIT_FP32, 1, NULL, 0, false}; /* 87% */
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
  mlc_profile_kernel k = {"matmul", flops, bytes, 0.007, sh, 3, MLC_UNIT_FP32, 1, NULL, 0, false}; /* 90% */
  mlc_profile_verdict v;
  mlc_profile_classify(&k, &c, &v);
  assert_int_equal(v.bound, MLC_BOUND_COMPUTE);
  assert_string_equal(v.hint, "align K (=300) to a multiple of 64/128");
  /* Not a GEMM: a name that only starts like one. */
  mlc_profile_kernel other = {"matmul_grad%3", flops, bytes, 0.007, sh, 3, MLC_UNIT_FP32, 1, NULL, 0, false};
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
  mlc_profile_kernel tiny = {"add%1", 1000, 8000, 50e-6, NULL, 0, MLC_UNIT_FP32, 1, NULL, 0, false};
  mlc_profile_classify(&tiny, &c, &v);
  assert_int_equal(v.bound, MLC_BOUND_LATENCY);
  assert_string_equal(mlc_bound_name(v.bound), "latency");
  assert_string_equal(v.hint, "too small to fill the CPU: fuse with neighbours or batch more work");
  mlc_profile_kernel quick = {"matmul%2", 2e5, 1e6, 10e-6, NULL, 0, MLC_UNIT_FP32, 1, NULL, 0, false};
  mlc_profile_classify(&quick, &c, &v);
  assert_int_equal(v.bound, MLC_BOUND_LATENCY);
  quick.seconds = 60e-6; /* the same work over 20 us: 83% of the bandwidth, 3% of the FLOPs */
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
    {"matmul%1", 170, 60e9, 2e-3, MLC_UNIT_FP32, 1}, {"add%2", 0.083, 1e9, 1e-3, MLC_UNIT_FP32, 1},
    {"copy%3", 0, 0, 1e-3, MLC_UNIT_FP32, 1}, {"a<b>&c", 1, 5e9, 1e-4, MLC_UNIT_FP32, 1},
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
  /* record_begin .. record_end (recording_vt): the launches kept, not run */
  bool recording;
  int nrec, records, replays, frees;
  struct { void *k; uint64_t items, args[4]; uint32_t nargs; } rec[8];
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
  if (c->recording) {
    assert_true(c->nrec < 8 && nargs <= 4 && !timing);
    c->rec[c->nrec].k = k, c->rec[c->nrec].items = items, c->rec[c->nrec].nargs = nargs;
    memcpy(c->rec[c->nrec++].args, args, nargs * sizeof *args);
    return NULL;
  }
  c->launches++;
  c->timed += timing;
  return c->cpu->vt->launch(c->cpu, k, items, args, nargs, timing, slot);
}
static mlc_status cd_finish(mlc_device *d, uint32_t n, double *sec, double *start) {
  return ((counting_dev *)d)->cpu->vt->finish(((counting_dev *)d)->cpu, n, sec, start);
}
static void cd_describe(mlc_device *d, char *buf, size_t n) { snprintf(buf, n, "counting CPU"); }
static const mlc_device_vt counting_vt = {"counting", true, false, cd_destroy, cd_alloc, cd_free, cd_write, cd_read, cd_resolve,
                                          cd_launch, cd_finish, cd_describe, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                                          NULL, NULL, NULL, NULL, NULL, NULL, NULL};

/* The same with recorded launches, as CUDA graphs give them: one recording
 * (the handle is the device itself), replayed by running its launches. */
static mlc_status cd_record_begin(mlc_device *d) {
  counting_dev *c = (counting_dev *)d;
  assert_false(c->recording);
  c->recording = true, c->nrec = 0;
  return NULL;
}
static mlc_status cd_record_end(mlc_device *d, void **out) {
  counting_dev *c = (counting_dev *)d;
  c->recording = false;
  c->records++;
  *out = c;
  return NULL;
}
static mlc_status cd_replay(mlc_device *d, void *rec) {
  counting_dev *c = rec;
  c->replays++;
  for (int i = 0; i < c->nrec; i++)
    MLC_RETURN_IF_ERROR(c->cpu->vt->launch(c->cpu, c->rec[i].k, c->rec[i].items, c->rec[i].args, c->rec[i].nargs, false, 0));
  return NULL;
}
static void cd_record_free(mlc_device *d, void *rec) { ((counting_dev *)d)->frees++; }
static const mlc_device_vt recording_vt = {"recording", true, true, cd_destroy, cd_alloc, cd_free, cd_write, cd_read, cd_resolve,
                                           cd_launch, cd_finish, cd_describe, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                                           cd_record_begin, cd_record_end, cd_replay, cd_record_free, NULL, NULL, NULL};


/* A session of plan on cd, a counting device of table vt over the CPU
 * device with the kernels of look. */
static mlc_session *counting_session(counting_dev *cd, const mlc_device_vt *vt, mlc_symbol_lookup look, const mlc_plan *plan,
                                     bool profile) {
  memset(cd, 0, sizeof *cd);
  cd->base.vt = vt;
  assert_null(mlc_cpu_device_create(look, NULL, 1, mlc_allocator_default(), &cd->cpu));
  mlc_session_options so = {&cd->base, NULL, NULL, 1, profile, {0}, NULL};
  mlc_session *s;
  assert_null(mlc_session_create(plan, &so, &s));
  return s;
}

/* A device that says each step took (slot + 1) ms. */
static mlc_status cd_finish_fixed(mlc_device *d, uint32_t n, double *sec, double *start) {
  MLC_RETURN_IF_ERROR(((counting_dev *)d)->cpu->vt->finish(((counting_dev *)d)->cpu, n, sec, start));
  for (uint32_t i = 0; i < n; i++) sec[i] = (i + 1) * 1e-3;
  return NULL;
}
static void cd_describe_gpu(mlc_device *d, char *buf, size_t n) { snprintf(buf, n, "NVIDIA H200 (sm_90, 132 SMs)"); }
static const mlc_device_vt fixed_vt = {"fixed", true, false, cd_destroy, cd_alloc, cd_free, cd_write, cd_read, cd_resolve,
                                       cd_launch, cd_finish_fixed, cd_describe_gpu, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                                       NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};

/* Two steps of one kernel: mlc's verdict beside ncu's is of the kernel as
 * a whole (its steps' FLOPs, bytes and seconds summed, as ncu weighs its
 * launches by time), named by its longer step; a device that cannot empty
 * its caches says so. */
static void kernel_sums(void **state) {
  (void)state;
  mlc_plan_value vals[2];
  for (int i = 0; i < 2; i++) vals[i] = (mlc_plan_value){shape(1, 2, 4, 4, 0), 64 * i, MLC_PLAN_NO_PARAM, 0, 0, 0, MLC_PLAN_NO_VALUE};
  uint32_t args[] = {0, 1};
  /* 1 ms and 2 ms: 2 GFLOP and 2 GB, then 4 GFLOP and 10 GB */
  mlc_plan_step steps[] = {{0, "add%1", "", 0, 0, 2, NULL, args, 4, 2e9, 2e9, 0, MLC_PLAN_UNIT_FP32, 1},
                           {0, "add%2", "", 0, 0, 2, NULL, args, 4, 4e9, 10e9, 0, MLC_PLAN_UNIT_FP32, 1}};
  mlc_plan_entry entry = {"forward", 128, 2, 0, 0, 2, vals, NULL, NULL, steps};
  const char *kernels[] = {"k0"};
  mlc_plan plan = {"test", 0, 1, 1, NULL, kernels, &entry, {0, 0, 0, 0, 0}, {0}, 0, NULL, 0, NULL, NULL};
  static counting_dev cd;
  mlc_session *s = counting_session(&cd, &fixed_vt, lookup, &plan, true);
  mlc_status st = mlc_session_set_flush_caches(s, true);
  assert_int_equal(mlc_status_code(st), MLC_UNIMPLEMENTED);
  assert_non_null(strstr(mlc_status_message(st), "the fixed device cannot empty its caches"));
  mlc_status_free(st);
  assert_null(mlc_session_set_flush_caches(s, false));
  for (int r = 0; r < 3; r++) assert_null(mlc_session_run(s, "forward"));
  mlc_ceilings c;
  mlc_ceilings_gpu_datasheet("NVIDIA H200 (sm_90, 132 SMs)", &c);
  c.sm_mhz = 1700, c.sm_max_mhz = 1980;
  mlc_ncu_match *m = NULL;
  uint32_t n = 0;
  assert_null(mlc_session_ncu_matches(s, "forward", &c, &m, &n));
  assert_int_equal(n, 1);
  assert_string_equal(m[0].symbol, "k0");
  assert_string_equal(m[0].label, "add%2"); /* the longer step names it */
  /* 6 GFLOP in 3 ms at 132 x 256 FLOPs a clock at 1700 MHz (3.5%); 12 GB
   * in 3 ms of 4.8 TB/s (83.3%): memory.  The second step alone would be
   * 104% of HBM, the first 42%. */
  assert_float_equal(m[0].mlc_compute, 100 * (6e9 / 3e-3) / (132 * 256 * 1700e6), 1e-9);
  assert_float_equal(m[0].mlc_memory, 100 * (12e9 / 3e-3) / 4.8e12, 1e-9);
  assert_int_equal(m[0].mlc, MLC_BOUND_MEMORY);
  free(m);
  mlc_session_destroy(s);
}

/* With profiling off, no step is timed and nothing is recorded; with it
 * on, every step of every run is. */
static void profiling_off_records_nothing(void **state) {
  (void)state;
  mlc_plan_value vals[2];
  for (int i = 0; i < 2; i++) vals[i] = (mlc_plan_value){shape(1, 2, 4, 4, 0), 64 * i, MLC_PLAN_NO_PARAM, 0, 0, 0, MLC_PLAN_NO_VALUE};
  uint32_t args[] = {0, 1};
  mlc_plan_step steps[] = {{0, "a%1", "", 0, 0, 2, NULL, args, 4, 16, 128, 0, MLC_PLAN_UNIT_FP32, 1}, {0, "b%2", "", 0, 0, 2, NULL, args, 4, 16, 128, 0, MLC_PLAN_UNIT_FP32, 1}};
  mlc_plan_entry entry = {"forward", 128, 2, 0, 0, 2, vals, NULL, NULL, steps};
  const char *kernels[] = {"k0"};
  mlc_plan plan = {"test", 0, 1, 1, NULL, kernels, &entry, {0, 0, 0, 0, 0}, {0}, 0, NULL, 0, NULL, NULL};
  for (int profile = 0; profile < 2; profile++) {
    static counting_dev cd;
    mlc_session *s = counting_session(&cd, &counting_vt, lookup, &plan, profile);
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

/* Recorded launches (runtime/device.h's record_begin): an entry's launches
 * are recorded on its second run with the same arguments and replayed from
 * then on, with its outputs as plain launches give them; other arguments (a
 * caller's buffer bound in place) launch plainly, and a recording is made
 * again once they repeat; a profiled session never records. */
static void add_kernel(void **bufs, int64_t begin, int64_t end) {
  const float *a = bufs[0];
  float *o = bufs[1];
  for (int64_t i = begin; i < end; i++) o[i] = a[i] + 1.f;
}
static void *add_lookup(void *ctx, const char *symbol) {
  (void)ctx;
  void *p;
  void (*fn)(void **, int64_t, int64_t) = add_kernel;
  memcpy(&p, &fn, sizeof p);
  return strcmp(symbol, "k0") ? NULL : p;
}
static void recorded_launches_replay(void **state) {
  (void)state;
  mlc_plan_value vals[3];
  for (int i = 0; i < 3; i++) vals[i] = (mlc_plan_value){shape(1, 1, 4, 0, 0), 64 * i, MLC_PLAN_NO_PARAM, 0, 0, 0, MLC_PLAN_NO_VALUE};
  uint32_t a01[] = {0, 1}, a12[] = {1, 2};
  mlc_plan_step steps[] = {{0, "a%1", "", 0, 0, 2, NULL, a01, 4, 16, 32, 0, MLC_PLAN_UNIT_FP32, 1},
                           {0, "b%2", "", 0, 0, 2, NULL, a12, 4, 16, 32, 0, MLC_PLAN_UNIT_FP32, 1}};
  mlc_plan_io in = {"x", 0}, out = {"y", 2};
  mlc_plan_entry entry = {"forward", 192, 3, 1, 1, 2, vals, &in, &out, steps};
  const char *kernels[] = {"k0"};
  mlc_plan plan = {"test", 0, 1, 1, NULL, kernels, &entry, {0, 0, 0, 0, 0}, {0}, 0, NULL, 0, NULL, NULL};
  for (int profile = 0; profile < 2; profile++) {
    static counting_dev cd;
    mlc_session *s = counting_session(&cd, &recording_vt, add_lookup, &plan, profile);
    for (int r = 0; r < 5; r++) {
      const float x[4] = {(float)r, 1, 2, 3};
      assert_null(mlc_session_set_input(s, "forward", "x", x, sizeof x));
      assert_null(mlc_session_run(s, "forward"));
      const void *y;
      const mlc_plan_shape *sh;
      assert_null(mlc_session_output(s, "forward", "y", &y, &sh));
      assert_float_equal(((const float *)y)[0], (float)r + 2, 0);
      assert_float_equal(((const float *)y)[3], 5, 0);
    }
    /* profiled: five runs of two plain launches; else one plain run, then a recording replayed four times */
    assert_int_equal(cd.launches, profile ? 10 : 2);
    assert_int_equal(cd.records, profile ? 0 : 1);
    assert_int_equal(cd.replays, profile ? 0 : 4);
    if (!profile) {
      /* a caller's output buffer moves the arguments: plain launches, then a recording again */
      float mine[4];
      for (int r = 0; r < 3; r++) {
        assert_null(mlc_session_bind_output(s, "forward", "y", mine, sizeof mine));
        assert_null(mlc_session_run(s, "forward"));
        assert_float_equal(mine[0], 6, 0);
      }
      assert_int_equal(cd.launches, 4);
      assert_int_equal(cd.records, 2);
      assert_int_equal(cd.replays, 6);
      assert_int_equal(cd.frees, 1);
    }
    mlc_session_destroy(s);
    if (!profile) assert_int_equal(cd.frees, 2);
  }
}

static void trace_json(void **state) {
  (void)state;
  mlc_plan_value vals[3];
  for (int i = 0; i < 3; i++) vals[i] = (mlc_plan_value){shape(1, 2, 4, 4, 0), 64 * i, MLC_PLAN_NO_PARAM, 0, 0, 0, MLC_PLAN_NO_VALUE};
  vals[2].shape = shape(1, 3, 2, 4, 4);
  uint32_t args[] = {0, 1, 2}, wait0[] = {0};
  mlc_plan_step steps[] = {
    {0, "linear%1", "layers.0.\"ffn\"", 0, 0, 3, NULL, args, 4, 128, 192, 0, MLC_PLAN_UNIT_FP32, 1},
    {0, "add%2", "", 0, 1, 3, wait0, args, 4, 16, 192, 0, MLC_PLAN_UNIT_FP32, 1},
  };
  mlc_plan_entry entry = {"forward", 256, 3, 0, 0, 2, vals, NULL, NULL, steps};
  const char *kernels[] = {"k0"};
  mlc_plan plan = {"test", 0, 1, 1, NULL, kernels, &entry, {0, 0, 0, 0, 0}, {0}, 0, NULL, 0, NULL, NULL};
  mlc_session_options so = {NULL, lookup, NULL, 1, true, {0}, NULL};
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
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(ev, "pid")->valueint, 0); /* rank 0 */
    if (!strcmp(ph, "M")) {
      const char *mname = cJSON_GetObjectItemCaseSensitive(ev, "name")->valuestring;
      const cJSON *ma = cJSON_GetObjectItemCaseSensitive(ev, "args");
      if (!strcmp(mname, "thread_name")) {
        thread_names++;
        assert_string_equal(cJSON_GetObjectItemCaseSensitive(ma, "name")->valuestring, "compute");
      } else if (!strcmp(mname, "process_name")) {
        char want[300], cpu[128];
        mlc_profile_cpu_model(cpu, sizeof cpu);
        snprintf(want, sizeof want, "mlc test on %s, rank 0", cpu);
        assert_string_equal(cJSON_GetObjectItemCaseSensitive(ma, "name")->valuestring, want);
      }
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
    assert_float_equal(cJSON_GetObjectItemCaseSensitive(a, "intensity")->valuedouble, first ? 128.0 / 192 : 16.0 / 192, 1e-6);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(a, "kernel")->valuestring, "k0");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(ev, "cat")->valuestring, "forward");
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


/* A GPU's ceilings: the cached calibration of that GPU (name, sm, SMs),
 * else NVIDIA's datasheet, else guesses; the latency hint names the GPU. */
static void gpu_ceilings(void **state) {
  (void)state;
  char path[256];
  tmp_path(path, sizeof path, "gcache/ceilings-cuda.json");
  const char *h200 = "NVIDIA H200 (sm_90, 132 SMs)";
  mlc_ceilings c, got;
  mlc_ceilings_gpu_datasheet(h200, &c);
  assert_true(c.gpu);
  assert_false(c.calibrated);
  assert_float_equal(c.peak_flops, 989.4e12, 1e6);
  assert_float_equal(c.bandwidth, 4.8e12, 1e6);
  assert_non_null(strstr(c.source, "NVIDIA's datasheet for the H200"));
  c.peak_flops = 760e12;
  c.bandwidth = 4.2e12;
  c.calibrated = true;
  snprintf(c.source, sizeof c.source, "2026-11-30T06:00:00Z (mlc calibrate)");
  assert_null(mlc_ceilings_save_file(path, &c));
  mlc_ceilings_gpu_file(path, h200, &got);
  assert_true(got.calibrated);
  assert_true(got.gpu);
  assert_float_equal(got.peak_flops, 760e12, 1e3);
  assert_float_equal(got.bandwidth, 4.2e12, 1e3);
  assert_float_equal(got.latency_s, 5e-6, 1e-12);
  assert_string_equal(got.device, h200);
  char want[512];
  snprintf(want, sizeof want, "cached calibration in %s from 2026-11-30T06:00:00Z (mlc calibrate)", path);
  assert_string_equal(got.source, want);
  /* Another sm or SM count is another GPU: the datasheet again. */
  mlc_ceilings_gpu_file(path, "NVIDIA H200 (sm_90, 66 SMs)", &got);
  assert_false(got.calibrated);
  assert_float_equal(got.peak_flops, 989.4e12, 1e6);
  mlc_ceilings_gpu_file(path, "Some GPU (sm_75, 40 SMs)", &got);
  assert_false(got.calibrated);
  assert_non_null(strstr(got.source, "built-in guesses"));
  mlc_profile_verdict v;
  mlc_profile_kernel tiny = {"add%1", 1000, 8000, 50e-6, NULL, 0, MLC_UNIT_FP32, 1, NULL, 0, false};
  mlc_profile_classify(&tiny, &got, &v);
  assert_int_equal(v.bound, MLC_BOUND_LATENCY);
  assert_string_equal(v.hint, "too small to fill the GPU: fuse with neighbours or batch more work");
  unlink(path);
  char dir[256];
  tmp_path(dir, sizeof dir, "gcache");
  rmdir(dir);
}


/* The H200's datasheet ceilings: each unit's peak, HBM, 132 SMs. */
static mlc_ceilings h200(void) {
  mlc_ceilings c;
  mlc_ceilings_gpu_datasheet("NVIDIA H200 (sm_90, 132 SMs)", &c);
  return c;
}

static mlc_profile_verdict judge(const char *name, double flops, double bytes, double seconds, mlc_unit unit, uint32_t products,
                                 const mlc_profile_launch *launch, const mlc_ceilings *c) {
  mlc_profile_kernel k = {name, flops, bytes, seconds, NULL, 0, unit, products, launch, 0, false};
  mlc_profile_verdict v;
  mlc_profile_classify(&k, c, &v);
  return v;
}

/* One GEMM of 8192^3 (1.0995e12 FLOPs; 402.7 MB of bf16, 805.3 MB of f32)
 * per unit, each judged against its own unit's peak: the same rate is
 * compute-bound on one unit and bound by neither on a faster one. */
static void units_per_dtype(void **state) {
  (void)state;
  mlc_ceilings c = h200();
  assert_int_equal(c.sms, 132);
  assert_float_equal(mlc_ceilings_unit_peak(&c, MLC_UNIT_TC16), 989.4e12, 1e6);
  assert_float_equal(mlc_ceilings_unit_peak(&c, MLC_UNIT_TF32), 494.7e12, 1e6);
  assert_float_equal(mlc_ceilings_unit_peak(&c, MLC_UNIT_FP8), 1978.9e12, 1e6);
  assert_float_equal(mlc_ceilings_unit_peak(&c, MLC_UNIT_FP32), 66.9e12, 1e6);
  double f = 2.0 * 8192 * 8192 * 8192, b16 = 3.0 * 8192 * 8192 * 2, b32 = 2 * b16;
  /* bf16 at 800 TFLOP/s: 80.9% of the bf16 tensor cores. */
  mlc_profile_verdict v = judge("matmul%1", f, b16, f / 800e12, MLC_UNIT_TC16, 1, NULL, &c);
  assert_int_equal(v.bound, MLC_BOUND_COMPUTE);
  assert_int_equal(v.unit, MLC_UNIT_TC16);
  assert_float_equal(v.pct_compute, 100 * 800 / 989.4, 1e-6);
  assert_float_equal(v.pct_roof, v.pct_compute, 1e-9);
  assert_string_equal(v.hint, "lower precision (FP8)");
  /* FP8 (scaled_mm) at 1600 TFLOP/s: 80.9% of the FP8 tensor cores, compute-bound, and no lower
   * precision to suggest; at 900 TFLOP/s (above every other unit's peak) 45.5%: neither bound. */
  v = judge("scaled_mm%1", f, b16 / 2, f / 1600e12, MLC_UNIT_FP8, 1, NULL, &c);
  assert_int_equal(v.bound, MLC_BOUND_COMPUTE);
  assert_float_equal(v.pct_compute, 100 * 1600 / 1978.9, 1e-6);
  assert_string_equal(v.hint, "FP8 already: the lowest precision there is");
  v = judge("scaled_mm%1", f, b16 / 2, f / 900e12, MLC_UNIT_FP8, 1, NULL, &c);
  assert_int_not_equal(v.bound, MLC_BOUND_COMPUTE);
  assert_float_equal(v.pct_compute, 100 * 900 / 1978.9, 1e-6);
  /* f32 under tf32x3 at 140 TFLOP/s: three TF32 products a FLOP, so the
   * roof is 494.7 / 3 = 164.9 TFLOP/s and it is at 84.9% of it. */
  v = judge("matmul%2", f, b32, f / 140e12, MLC_UNIT_TF32, 3, NULL, &c);
  assert_int_equal(v.bound, MLC_BOUND_COMPUTE);
  assert_float_equal(v.roof, 494.7e12 / 3, 1e6);
  assert_float_equal(v.pct_compute, 100 * 140 * 3 / 494.7, 1e-6);
  assert_string_equal(v.hint, "lower precision: --f32-matmul tf32 (one product, not 3) or bf16");
  /* The same f32 GEMM under tf32 (one product): 28.3% of TF32, neither. */
  v = judge("matmul%2", f, b32, f / 140e12, MLC_UNIT_TF32, 1, NULL, &c);
  assert_int_equal(v.bound, MLC_BOUND_LATENCY);
  /* f32 under ieee at 55 TFLOP/s: 82.2% of the FP32 FMAs; against the bf16
   * peak (the old single roof) it would have been 5.6%. */
  v = judge("matmul%3", f, b32, f / 55e12, MLC_UNIT_FP32, 1, NULL, &c);
  assert_int_equal(v.bound, MLC_BOUND_COMPUTE);
  assert_float_equal(v.pct_compute, 100 * 55 / 66.9, 1e-6);
  assert_string_equal(v.hint, "lower precision (bf16/FP8)");
  /* fp8 at 1600 TFLOP/s: 80.9% of its 1978.9. */
  v = judge("matmul%4", f, b16 / 2, f / 1600e12, MLC_UNIT_FP8, 1, NULL, &c);
  assert_int_equal(v.bound, MLC_BOUND_COMPUTE);
  assert_float_equal(v.pct_compute, 100 * 1600 / 1978.9, 1e-6);
  /* An RMSNorm of 8192 x 2048 f32 (read and write: 134.2 MB, 5 FLOPs an
   * element) at 4 TB/s: 83.3% of HBM, memory-bound on any unit. */
  double nb = 2.0 * 8192 * 2048 * 4, nf = 5.0 * 8192 * 2048;
  for (int u = 0; u < MLC_NUNITS; u++) {
    v = judge("rmsnorm%5", nf, nb, nb / 4e12, (mlc_unit)u, 1, NULL, &c);
    assert_int_equal(v.bound, MLC_BOUND_MEMORY);
    assert_float_equal(v.pct_memory, 100 * 4 / 4.8, 1e-6);
    assert_float_equal(v.pct_roof, v.pct_memory, 1e-9);
  }
}

/* Calibrated ceilings with the SM clock measured under load (the H200 on
 * 2026-12-02: bf16 718 TFLOP/s and 4296.7 GB/s reached by calibrate's own
 * kernels, the SM at 1620 of 1980 MHz while its GEMM ran).  The rule takes
 * percentages of each unit's FLOPs per clock (sm_90: 4096 bf16, 256 FP32
 * an SM) at that clock, as ncu's "% of peak sustained elapsed" counts per
 * cycle (and ncu read 1575-1650 MHz under the MiniLLM's GEMMs on an H100
 * whose calibration held 1575); and of the datasheet's HBM.
 * % of roof stays of the reached roofs. */
static void rule_peaks_at_clock(void **state) {
  (void)state;
  mlc_ceilings c = h200();
  c.calibrated = true;
  c.peak_flops = c.unit_flops[MLC_UNIT_TC16] = 718e12;
  c.bandwidth = 4296.7e9;
  assert_float_equal(c.hw_clk_flops[MLC_UNIT_TC16], 4096.0 * 132, 1e-9);
  assert_float_equal(c.hw_clk_flops[MLC_UNIT_FP32], 256.0 * 132, 1e-9);
  assert_float_equal(c.hw_clk_flops[MLC_UNIT_TF32], 2048.0 * 132, 1e-9);
  assert_float_equal(c.hw_clk_flops[MLC_UNIT_FP8], 8192.0 * 132, 1e-9);
  /* The datasheet's peaks are these rates at 1830 MHz (tensor cores) and
   * 1980 MHz (FP32): */
  assert_float_equal(c.hw_clk_flops[MLC_UNIT_TC16] * 1830e6, 989.4e12, 0.1e12);
  assert_float_equal(c.hw_clk_flops[MLC_UNIT_FP32] * 1980e6, 66.9e12, 0.1e12);
  /* before any clock is known: the datasheet's peaks as they are */
  assert_float_equal(mlc_ceilings_rule_peak(&c, MLC_UNIT_TC16), 989.4e12, 1e6);
  c.sm_mhz = 1620, c.sm_max_mhz = 1980;
  double tc = 4096.0 * 132 * 1620e6; /* 875.9 TFLOP/s */
  assert_float_equal(mlc_ceilings_rule_peak(&c, MLC_UNIT_TC16), tc, 1e6);
  assert_float_equal(mlc_ceilings_rule_peak(&c, MLC_UNIT_FP32), 256.0 * 132 * 1620e6, 1e6);
  assert_float_equal(mlc_ceilings_rule_bandwidth(&c), 4.8e12, 1e3);
  /* A bf16 GEMM at 624 TFLOP/s (fused%29 of the MiniLLM on 2026-12-02,
   * ncu's SM 71.1%): 86.9% of the reached roof, 71.2% of the hardware at
   * 1620 MHz: bound by neither.  (The datasheet's 989.4 scaled by
   * 1620/1980 made it 77.1%: compute, against ncu.) */
  double f = 2.0 * 4096 * 4096 * 2048, b = 2.0 * (4096.0 * 2048 * 2 + 4096.0 * 4096);
  mlc_profile_verdict v = judge("matmul%1", f, b, f / 624e12, MLC_UNIT_TC16, 1, NULL, &c);
  assert_float_equal(v.pct_roof, 100 * 624 / 718.0, 1e-6);
  assert_float_equal(v.pct_compute, 100 * 624e12 / tc, 1e-6);
  assert_int_equal(v.bound, MLC_BOUND_LATENCY);
  /* at 695 TFLOP/s (linear%57, ncu's SM 78.4%): 79.3%: compute */
  v = judge("matmul%1", f, b, f / 695e12, MLC_UNIT_TC16, 1, NULL, &c);
  assert_float_equal(v.pct_compute, 100 * 695e12 / tc, 1e-6);
  assert_int_equal(v.bound, MLC_BOUND_COMPUTE);
  /* An add at 3.5 TB/s: 81.5% of the reached 4296.7 GB/s, 72.9% of HBM:
   * neither; at 3.7 TB/s (77.1% of HBM): memory. */
  double nb = 3.0 * 8192 * 8192 * 4;
  v = judge("add%2", nb / 12, nb, nb / 3.5e12, MLC_UNIT_FP32, 1, NULL, &c);
  assert_float_equal(v.pct_roof, 100 * 3.5e12 / 4296.7e9, 1e-6);
  assert_float_equal(v.pct_memory, 100 * 3.5 / 4.8, 1e-6);
  assert_int_equal(v.bound, MLC_BOUND_LATENCY);
  v = judge("add%2", nb / 12, nb, nb / 3.7e12, MLC_UNIT_FP32, 1, NULL, &c);
  assert_int_equal(v.bound, MLC_BOUND_MEMORY);
  /* The clock survives the cache and the header says what the rule takes. */
  char path[256];
  tmp_path(path, sizeof path, "clock/ceilings-cuda.json");
  assert_null(mlc_ceilings_save_file(path, &c));
  mlc_ceilings got;
  mlc_ceilings_gpu_file(path, c.device, &got);
  assert_float_equal(got.sm_mhz, 1620, 1e-9);
  assert_float_equal(got.sm_max_mhz, 1980, 1e-9);
  assert_float_equal(got.hw_flops[MLC_UNIT_TC16], 989.4e12, 1e6);
  char *buf = NULL;
  size_t len = 0;
  FILE *f2 = open_memstream(&buf, &len);
  mlc_profile_print_units(&got, f2);
  fclose(f2);
  assert_non_null(strstr(buf, "\n  the rule's percentages: of each unit's FLOPs per clock (fp32 256, bf16 4096, tf32 2048, "
                              "fp8 8192 an SM, x the SMs) at the SM clock measured under load (1620 MHz), HBM 4800.0 GB/s\n"));
  free(buf);
  unlink(path);
  char dir[256];
  tmp_path(dir, sizeof dir, "clock");
  rmdir(dir);
}

/* Below MLC_PROFILE_NEAR_PCT of both roofs: bound by neither, and the
 * launch names the likely cause.  The numbers are the f32
 * attention_grad on the H200: 0.44 TFLOP/s and 2.45 GB/s. */
static void neither_roof(void **state) {
  (void)state;
  mlc_ceilings c = h200();
  double f = 4.4e9, b = 24.5e6, t = 10e-3;
  mlc_profile_verdict v = judge("attention_grad%7", f, b, t, MLC_UNIT_TF32, 3, NULL, &c);
  assert_int_equal(v.bound, MLC_BOUND_LATENCY);
  assert_true(v.pct_compute < 1 && v.pct_memory < 1);
  assert_string_equal(v.hint, "below 50% of both roofs: too little parallel work, or a serial or unvectorised loop");
  /* A grid smaller than the SM count. */
  mlc_profile_launch small = {64, 128, 0, 64, 3};
  v = judge("attention_grad%7", f, b, t, MLC_UNIT_TF32, 3, &small, &c);
  assert_int_equal(v.bound, MLC_BOUND_LATENCY);
  assert_string_equal(v.hint, "grid of 64 blocks leaves 68 of 132 SMs idle: split the work into more blocks");
  /* Registers: 255 a thread x 256 threads leave room for one block an SM:
   * 8 warps of 64, 12.5% occupancy. */
  mlc_profile_launch regs = {4096, 256, 0, 255, 1};
  v = judge("attention_grad%7", f, b, t, MLC_UNIT_TF32, 3, &regs, &c);
  assert_float_equal(v.occupancy, 12.5, 1e-9);
  assert_string_equal(v.hint, "occupancy 12.5%, limited by registers (256 threads, 255 regs, 0 B smem a block): "
                              "smaller tiles or fewer registers");
  /* Shared memory: 100 KiB a block of 128 threads, two blocks an SM (228 KiB, 1 KiB reserved each): 12.5%. */
  mlc_profile_launch smem = {4096, 128, 100 * 1024, 32, 1};
  v = judge("attention%8", f, b, t, MLC_UNIT_TC16, 1, &smem, &c);
  assert_float_equal(v.occupancy, 12.5, 1e-9);
  assert_non_null(strstr(v.hint, "limited by shared memory"));
  /* Full occupancy and a full grid, still far from both roofs: stalled. */
  mlc_profile_launch full = {4096, 256, 0, 32, 1};
  v = judge("attention_grad%7", f, b, t, MLC_UNIT_TF32, 3, &full, &c);
  assert_float_equal(v.occupancy, 100, 1e-9);
  assert_string_equal(v.hint, "stalled at 100% occupancy: dependent loads, atomics or a serial loop (ncu's warp-stall reasons say which)");
  /* On memory: 49% of HBM is far from it (the launch's hint), 74% near it
   * (neither, the memory hint), 76% past the seed's 75% (memory). */
  v = judge("add%9", 1e6, 0.49 * 4.8e12 * 1e-3, 1e-3, MLC_UNIT_FP32, 1, &full, &c);
  assert_int_equal(v.bound, MLC_BOUND_LATENCY);
  assert_non_null(strstr(v.hint, "stalled at 100% occupancy"));
  v = judge("add%9", 1e6, 0.74 * 4.8e12 * 1e-3, 1e-3, MLC_UNIT_FP32, 1, &full, &c);
  assert_int_equal(v.bound, MLC_BOUND_LATENCY);
  assert_string_equal(v.hint, "near the memory roof (74%): fuse with neighbours, quantise, or raise the batch");
  v = judge("add%9", 1e6, 0.76 * 4.8e12 * 1e-3, 1e-3, MLC_UNIT_FP32, 1, &full, &c);
  assert_int_equal(v.bound, MLC_BOUND_MEMORY);
  /* The f32 GEMM at 15 TFLOP/s is no longer "compute-bound at 1.6%":
   * on the FP32 FMAs (ieee) it is 22% of 66.9 TFLOP/s, neither. */
  double gf = 2.0 * 4096 * 4096 * 4096;
  v = judge("matmul%1", gf, 3.0 * 4096 * 4096 * 4, gf / 15e12, MLC_UNIT_FP32, 1, &full, &c);
  assert_int_equal(v.bound, MLC_BOUND_LATENCY);
  assert_float_equal(v.pct_roof, 100 * 15 / 66.9, 1e-6);
}

/* Per-unit peaks and the L2 bandwidth survive the cache; an entry from
 * before units were cached is the bf16 peak, the rest the datasheet's. */
static void unit_ceilings_cache(void **state) {
  (void)state;
  char path[256];
  tmp_path(path, sizeof path, "ucache/ceilings-cuda.json");
  const char *name = "NVIDIA H200 (sm_90, 132 SMs)";
  mlc_ceilings c = h200(), got;
  c.calibrated = true;
  c.peak_flops = c.unit_flops[MLC_UNIT_TC16] = 700e12;
  c.unit_flops[MLC_UNIT_FP32] = 50e12;
  c.unit_from[MLC_UNIT_TC16] = c.unit_from[MLC_UNIT_FP32] = MLC_CEIL_MEASURED;
  c.bandwidth = 4.1e12;
  c.l2_bandwidth = 9e12;
  c.l2_from = MLC_CEIL_MEASURED;
  assert_null(mlc_ceilings_save_file(path, &c));
  mlc_ceilings_gpu_file(path, name, &got);
  assert_true(got.calibrated);
  assert_float_equal(got.unit_flops[MLC_UNIT_TC16], 700e12, 1e3);
  assert_int_equal(got.unit_from[MLC_UNIT_TC16], MLC_CEIL_MEASURED);
  assert_float_equal(got.unit_flops[MLC_UNIT_FP32], 50e12, 1e3);
  assert_float_equal(got.unit_flops[MLC_UNIT_TF32], 494.7e12, 1e3);
  assert_int_equal(got.unit_from[MLC_UNIT_TF32], MLC_CEIL_DATASHEET);
  assert_int_equal(got.unit_from[MLC_UNIT_FP8], MLC_CEIL_DATASHEET);
  assert_float_equal(got.l2_bandwidth, 9e12, 1e3);
  assert_int_equal(got.l2_from, MLC_CEIL_MEASURED);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  mlc_profile_print_units(&got, f);
  fclose(f);
  assert_string_equal(buf, "  units: fp32 50.0 TFLOP/s (measured), bf16 700.0 TFLOP/s (measured), tf32 494.7 TFLOP/s "
                           "(datasheet), fp8 1978.9 TFLOP/s (datasheet); memory 4100.0 GB/s (measured), L2 9000.0 GB/s (measured)\n"
                           "  the rule's percentages: of each unit's FLOPs per clock (fp32 256, bf16 4096, tf32 2048, fp8 8192 an SM, "
                           "x the SMs) at the datasheet's clocks (the clock under load is not measured: run mlc calibrate), "
                           "HBM 4800.0 GB/s\n");
  free(buf);
  /* An old entry: no "units". */
  FILE *o = fopen(path, "w");
  assert_non_null(o);
  fprintf(o, "{\"%s\": {\"peak_gflops\": 760000, \"bandwidth_gbs\": 4200, \"calibrated\": \"then\"}}\n", name);
  fclose(o);
  mlc_ceilings_gpu_file(path, name, &got);
  assert_float_equal(got.unit_flops[MLC_UNIT_TC16], 760e12, 1e3);
  assert_int_equal(got.unit_from[MLC_UNIT_TC16], MLC_CEIL_MEASURED);
  assert_float_equal(got.unit_flops[MLC_UNIT_FP32], 66.9e12, 1e3);
  assert_int_equal(got.unit_from[MLC_UNIT_FP32], MLC_CEIL_DATASHEET);
  unlink(path);
  char dir[256];
  tmp_path(dir, sizeof dir, "ucache");
  rmdir(dir);
}

/* One labelled roof per unit in use (tf32x3 at a third of TF32's peak);
 * none for a unit no kernel uses. */
static void roofline_roof_per_unit(void **state) {
  (void)state;
  mlc_ceilings c = h200();
  mlc_roofline_point pts[] = {
    {"matmul%1", 1000, 600e12, 2e-3, MLC_UNIT_TC16, 1}, {"matmul%2", 1000, 100e12, 2e-3, MLC_UNIT_TF32, 3},
    {"rmsnorm%3", 0.6, 2e12, 1e-3, MLC_UNIT_FP32, 1}, {"add%4", 0.1, 0.4e12, 1e-3, MLC_UNIT_FP32, 1},
  };
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  mlc_profile_write_roofline_svg(f, &c, pts, 4, 12, "units");
  fclose(f);
  assert_non_null(strstr(buf, ">bf16 compute roof 989.4 TFLOP/s<"));
  assert_non_null(strstr(buf, ">tf32x3 compute roof 164.9 TFLOP/s<"));
  assert_non_null(strstr(buf, ">fp32 compute roof 66.9 TFLOP/s<"));
  assert_null(strstr(buf, "fp8"));
  assert_non_null(strstr(buf, "memory roof 4.80 TB/s"));
  free(buf);
  /* A CPU: every unit at one peak, one roof naming the units on it. */
  mlc_ceilings cpu = test_ceilings();
  pts[0].flop_rate = 60e9, pts[1].flop_rate = 50e9, pts[2].flop_rate = 1e9, pts[3].flop_rate = 1e9;
  pts[1].products = 1;
  f = open_memstream(&buf, &len);
  mlc_profile_write_roofline_svg(f, &cpu, pts, 4, 12, "cpu");
  fclose(f);
  assert_non_null(strstr(buf, ">bf16/tf32/fp32 compute roof 100.0 GFLOP/s<"));
  free(buf);
}


/* A sample of `ncu --csv --page raw --metrics MLC_NCU_METRICS` as ncu
 * writes it: its own "==PROF==" lines, the header (fixed columns, then the
 * metrics), the units row, one row per launch, quoted, with thousands
 * separators.  attention_grad is three launches; a kernel that is not
 * mlc's is ignored. */
static const char ncu_raw[] =
  "==PROF== Connected to process 4242 (/work/build/mlc)\n"
  "==PROF== Profiling \"mlc_matmul_00112233445566aa_0\": 0%....50%....100% - 1 pass\n"
  "\"ID\",\"Process ID\",\"Process Name\",\"Host Name\",\"Kernel Name\",\"Context\",\"Stream\",\"Block Size\",\"Grid Size\","
  "\"Device\",\"CC\",\"dram__throughput.avg.pct_of_peak_sustained_elapsed\","
  "\"gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed\",\"gpu__time_duration.sum\","
  "\"sm__throughput.avg.pct_of_peak_sustained_elapsed\"\n"
  "\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"%\",\"%\",\"usecond\",\"%\"\n"
  "\"0\",\"4242\",\"mlc\",\"127.0.0.1\",\"mlc_matmul_00112233445566aa_0\",\"1\",\"13\",\"(256, 1, 1)\",\"(1056, 1, 1)\",\"0\",\"9.0\","
  "\"12.3\",\"35.2\",\"1,234.5\",\"88.1\"\n"
  "\"1\",\"4242\",\"mlc\",\"127.0.0.1\",\"mlc_rmsnorm_0123456789abcdef_0\",\"1\",\"13\",\"(256, 1, 1)\",\"(8192, 1, 1)\",\"0\",\"9.0\","
  "\"84.0\",\"85.5\",\"40.1\",\"20.0\"\n"
  "\"2\",\"4242\",\"mlc\",\"127.0.0.1\",\"mlc_attention_grad_aaaaaaaaaaaaaaaa_0\",\"1\",\"13\",\"(128, 1, 1)\",\"(512, 1, 1)\",\"0\","
  "\"9.0\",\"10\",\"20\",\"100\",\"30\"\n"
  "\"3\",\"4242\",\"mlc\",\"127.0.0.1\",\"mlc_attention_grad_aaaaaaaaaaaaaaaa_1\",\"1\",\"13\",\"(256, 1, 1)\",\"(256, 1, 1)\",\"0\","
  "\"9.0\",\"20\",\"30\",\"300\",\"40\"\n"
  "\"4\",\"4242\",\"mlc\",\"127.0.0.1\",\"mlc_attention_grad_aaaaaaaaaaaaaaaa_2\",\"1\",\"13\",\"(128, 1, 1)\",\"(512, 1, 1)\",\"0\","
  "\"9.0\",\"55\",\"60\",\"100\",\"10\"\n"
  "\"5\",\"4242\",\"mlc\",\"127.0.0.1\",\"void cutlass::Kernel<int>(Params)\",\"1\",\"13\",\"(128, 1, 1)\",\"(1, 1, 1)\",\"0\","
  "\"9.0\",\"1\",\"1\",\"2\",\"1\"\n"
  "\"6\",\"4242\",\"mlc\",\"127.0.0.1\",\"mlc_adamw_bbbbbbbbbbbbbbbb_0\",\"1\",\"13\",\"(256, 1, 1)\",\"(4096, 1, 1)\",\"0\",\"9.0\","
  "\"69.0\",\"70.0\",\"10\",\"22.0\"\n"
  "\"7\",\"4242\",\"mlc\",\"127.0.0.1\",\"mlc_matmul_00112233445566aa_0\",\"1\",\"13\",\"(256, 1, 1)\",\"(1056, 1, 1)\",\"0\",\"9.0\","
  "\"12.3\",\"35.2\",\"1,234.5\",\"86.1\"\n"
  "==PROF== Disconnected from process 4242\n";

/* What ncu really printed, on the H200 on 2026-12-02 (tests/unit/data/ncu_raw_h200.csv:
 * `ncu --csv --page raw --metrics ` MLC_NCU_METRICS ` -k regex:^mlc_ mlc train
 * examples/minillm.mdl --target cuda --steps 1` with the small config, stdout
 * as it came): the program's own lines before the header, 285 columns, a
 * units row, 62 launches. */
static void ncu_csv_h200(void **state) {
  (void)state;
  FILE *f = fopen(MLC_SOURCE_DIR "/tests/unit/data/ncu_raw_h200.csv", "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  rewind(f);
  char *text = malloc((size_t)n + 1);
  assert_non_null(text);
  assert_int_equal(fread(text, 1, (size_t)n, f), (size_t)n);
  text[n] = 0;
  fclose(f);
  mlc_ncu_table t;
  mlc_status st = mlc_ncu_parse_csv(text, &t);
  if (st) fail_msg("%s", mlc_status_message(st));
  assert_int_equal(t.n, 62);
  assert_string_equal(t.rows[0].kernel, "mlc_cast_7a2944370524b599_0");
  assert_true(t.rows[0].sm_pct == 0.61 && t.rows[0].mem_pct == 2.24 && t.rows[0].dram_pct >= 0);
  assert_true(fabs(t.rows[0].seconds - 2560e-9) < 1e-15); /* "2,560" ns */
  for (uint32_t i = 0; i < t.n; i++) assert_true(t.rows[i].sm_pct >= 0 && t.rows[i].mem_pct >= 0 && t.rows[i].seconds > 0);
  mlc_ncu_table_free(&t);
  free(text);
}

static void ncu_csv_raw(void **state) {
  (void)state;
  mlc_ncu_table t;
  assert_null(mlc_ncu_parse_csv(ncu_raw, &t));
  assert_int_equal(t.n, 8);
  assert_string_equal(t.rows[0].kernel, "mlc_matmul_00112233445566aa_0");
  assert_float_equal(t.rows[0].sm_pct, 88.1, 1e-9);
  assert_float_equal(t.rows[0].mem_pct, 35.2, 1e-9);
  assert_float_equal(t.rows[0].dram_pct, 12.3, 1e-9);
  assert_float_equal(t.rows[0].seconds, 1234.5e-6, 1e-12);
  assert_string_equal(t.rows[5].kernel, "void cutlass::Kernel<int>");
  char sym[64];
  assert_true(mlc_ncu_symbol("mlc_attention_grad_aaaaaaaaaaaaaaaa_2", sym, sizeof sym));
  assert_string_equal(sym, "mlc_attention_grad_aaaaaaaaaaaaaaaa");
  assert_false(mlc_ncu_symbol("void cutlass::Kernel<int>", sym, sizeof sym));
  assert_false(mlc_ncu_symbol("mlc_matmul", sym, sizeof sym));
  /* mlc's verdicts of five kernels; ncu's from the rule. */
  mlc_ncu_match m[] = {
    {"mlc_matmul_00112233445566aa", "matmul%3", MLC_BOUND_COMPUTE, 80, 0, 0, 0, 0, 0, false, 81.5, 20, 4e6, 1, 0, 0, 4e6},
    {"mlc_rmsnorm_0123456789abcdef", "rmsnorm%1", MLC_BOUND_MEMORY, 83, 0, 0, 0, 0, 0, false, 3, 80, 0, 0, 0, 0, 0},
    {"mlc_attention_grad_aaaaaaaaaaaaaaaa", "attention_grad%9", MLC_BOUND_LATENCY, 2, 0, 0, 0, 0, 0, false, 2, 1, 0, 0, 0, 0, 0},
    {"mlc_adamw_bbbbbbbbbbbbbbbb", "adamw%20", MLC_BOUND_MEMORY, 66, 0, 0, 0, 0, 0, false, 4, 77, 0, 0, 0, 0, 0},
    {"mlc_cast_cccccccccccccccc", "cast%2", MLC_BOUND_MEMORY, 70, 0, 0, 0, 0, 0, false, 1, 76, 0, 0, 0, 0, 0},
  };
  double agree;
  assert_int_equal(mlc_ncu_compare(&t, m, 5, &agree), 4);
  assert_float_equal(agree, 0.75, 1e-12);
  assert_int_equal(m[0].launches, 2);
  assert_float_equal(m[0].sm_pct, 87.1, 1e-9); /* two calls of equal length */
  assert_int_equal(m[0].ncu, MLC_BOUND_COMPUTE);
  assert_true(m[0].agree);
  assert_int_equal(m[1].ncu, MLC_BOUND_MEMORY);
  /* attention_grad: its three launches weighted by time (100, 300, 100 us). */
  assert_int_equal(m[2].launches, 3);
  assert_float_equal(m[2].sm_pct, 32, 1e-9);
  assert_float_equal(m[2].mem_pct, 34, 1e-9);
  assert_int_equal(m[2].ncu, MLC_BOUND_LATENCY);
  assert_true(m[2].agree);
  /* adamw at 70% memory is not over 75: neither, which mlc called memory. */
  assert_int_equal(m[3].ncu, MLC_BOUND_LATENCY);
  assert_false(m[3].agree);
  assert_int_equal(m[4].launches, 0);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  mlc_ncu_print(m, 5, f);
  fclose(f);
  assert_non_null(strstr(buf, "adamw%20"));
  assert_non_null(strstr(buf, "<- DISAGREE"));
  assert_non_null(strstr(buf, "(not profiled by ncu)"));
  assert_non_null(strstr(buf, "agreement: 3 of 4 kernels (75.0%)\n"));
  free(buf);
  f = open_memstream(&buf, &len);
  mlc_ncu_write_json(m, 5, "NVIDIA H200 (sm_90, 132 SMs)", f);
  fclose(f);
  cJSON *j = cJSON_Parse(buf);
  assert_non_null(j);
  assert_float_equal(cJSON_GetObjectItem(j, "agreement")->valuedouble, 0.75, 1e-9);
  assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "kernels")), 5);
  cJSON_Delete(j);
  free(buf);
  mlc_ncu_table_free(&t);
}

/* The seed's rule at its edges, the details page, and CSVs it refuses. */
static void ncu_rule_and_formats(void **state) {
  (void)state;
  assert_int_equal(mlc_ncu_verdict(24.9, 75.1), MLC_BOUND_MEMORY);
  assert_int_equal(mlc_ncu_verdict(25.0, 90), MLC_BOUND_LATENCY);
  assert_int_equal(mlc_ncu_verdict(10, 75.0), MLC_BOUND_LATENCY);
  assert_int_equal(mlc_ncu_verdict(75.1, 49.9), MLC_BOUND_COMPUTE);
  assert_int_equal(mlc_ncu_verdict(90, 50.0), MLC_BOUND_LATENCY);
  assert_int_equal(mlc_ncu_verdict(12.5, 3), MLC_BOUND_LATENCY);
  static const char details[] =
    "\"ID\",\"Process ID\",\"Process Name\",\"Host Name\",\"Kernel Name\",\"Context\",\"Stream\",\"Section Name\","
    "\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n"
    "\"0\",\"7\",\"mlc\",\"h\",\"mlc_softmax_1111111111111111_0(float*)\",\"1\",\"7\",\"Command line profiler metrics\","
    "\"gpu__time_duration.sum\",\"msecond\",\"1.5\"\n"
    "\"0\",\"7\",\"mlc\",\"h\",\"mlc_softmax_1111111111111111_0(float*)\",\"1\",\"7\",\"Command line profiler metrics\","
    "\"sm__throughput.avg.pct_of_peak_sustained_elapsed\",\"%\",\"18.5\"\n"
    "\"0\",\"7\",\"mlc\",\"h\",\"mlc_softmax_1111111111111111_0(float*)\",\"1\",\"7\",\"Command line profiler metrics\","
    "\"gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed\",\"%\",\"91.25\"\n"
    "\"0\",\"7\",\"mlc\",\"h\",\"mlc_softmax_1111111111111111_0(float*)\",\"1\",\"7\",\"Command line profiler metrics\","
    "\"sm__cycles_elapsed.avg.per_second\",\"hz\",\"1,955,877,476.12\"\n"
    "\"0\",\"7\",\"mlc\",\"h\",\"mlc_softmax_1111111111111111_0(float*)\",\"1\",\"7\",\"Command line profiler metrics\","
    "\"dram__bytes.sum\",\"Mbyte\",\"64.5\"\n"
    "\"1\",\"7\",\"mlc\",\"h\",\"mlc_softmax_1111111111111111_0(float*)\",\"1\",\"7\",\"Command line profiler metrics\","
    "\"sm__throughput.avg.pct_of_peak_sustained_elapsed\",\"%\",\"19.5\"\n"
    "\"1\",\"7\",\"mlc\",\"h\",\"mlc_softmax_1111111111111111_0(float*)\",\"1\",\"7\",\"Command line profiler metrics\","
    "\"gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed\",\"%\",\"90\"\n";
  mlc_ncu_table t;
  assert_null(mlc_ncu_parse_csv(details, &t));
  assert_int_equal(t.n, 2);
  assert_string_equal(t.rows[0].kernel, "mlc_softmax_1111111111111111_0");
  assert_float_equal(t.rows[0].seconds, 1.5e-3, 1e-12);
  assert_float_equal(t.rows[0].sm_pct, 18.5, 1e-9);
  assert_float_equal(t.rows[0].mem_pct, 91.25, 1e-9);
  assert_float_equal(t.rows[1].sm_pct, 19.5, 1e-9);
  /* ncu's SM clock and DRAM bytes, as this ncu prints them (optional: the second launch has none) */
  assert_float_equal(t.rows[0].mhz, 1955.87747612, 1e-6);
  assert_float_equal(t.rows[0].bytes, 64.5e6, 1e-3);
  assert_float_equal(t.rows[1].mhz, 0, 0);
  assert_float_equal(t.rows[1].bytes, -1, 0);
  mlc_ncu_match sm = {"mlc_softmax_1111111111111111", "softmax%4", MLC_BOUND_MEMORY, 90, 0, 0, 0, 0, 0, false, 1, 80, 80e6, 1, 0, 0, 80e6};
  double agree;
  assert_int_equal(mlc_ncu_compare(&t, &sm, 1, &agree), 1);
  assert_float_equal(sm.ncu_bytes, -1, 0); /* a launch without it: unknown */
  t.rows[1].bytes = 35.5e6, t.rows[1].mhz = 1900;
  mlc_ncu_compare(&t, &sm, 1, &agree);
  assert_float_equal(sm.ncu_bytes, 50e6, 1e-3); /* the mean of a launch, one launch a call */
  assert_float_equal(sm.ncu_mhz, (1955.87747612 * 1.5e-3 + 1900 * 1e-6) / (1.5e-3 + 1e-6), 1e-6); /* by time; no time: 1 us */
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  mlc_ncu_print(&sm, 1, f);
  fclose(f);
  assert_non_null(strstr(buf, " 0.62 ")); /* DRAM bytes over the plan's: 50 of 80 MB */
  free(buf);
  mlc_ncu_table_free(&t);
  mlc_status st = mlc_ncu_parse_csv("==PROF== nothing profiled\n", &t);
  assert_non_null(st);
  assert_non_null(strstr(mlc_status_message(st), "no header with a \"Kernel Name\" column"));
  mlc_status_free(st);
  st = mlc_ncu_parse_csv("\"ID\",\"Kernel Name\",\"sm__throughput.avg.pct_of_peak_sustained_elapsed\"\n\"0\",\"mlc_x_1_0\",\"5\"\n", &t);
  assert_non_null(st);
  assert_non_null(strstr(mlc_status_message(st), "kernel mlc_x_1_0 has no gpu__compute_memory_throughput"));
  mlc_status_free(st);
}

static void collective_names(void **state) {
  (void)state;
  assert_true(mlc_profile_is_collective("mlc_all_gather"));
  assert_true(mlc_profile_is_collective("mlc_all_gather_bf16_4"));
  assert_true(mlc_profile_is_collective("mlc_reduce_scatter_f32"));
  assert_true(mlc_profile_is_collective("mlc_all_reduce_f32"));
  assert_false(mlc_profile_is_collective("mlc_k_all_gather"));
  assert_false(mlc_profile_is_collective("mlc_all_gathe"));
  assert_false(mlc_profile_is_collective("k0"));
  assert_false(mlc_profile_is_collective(NULL));
  char buf[32];
  assert_string_equal(mlc_profile_stream_name(0, buf, sizeof buf), "compute");
  assert_string_equal(mlc_profile_stream_name(1, buf, sizeof buf), "comm");
  assert_string_equal(mlc_profile_stream_name(7, buf, sizeof buf), "stream 7");
}

/* A synthetic FSDP-like train entry on two streams, run by two ranks: an
 * all-gather of a bf16 weight (comm), the GEMM that uses it (compute) and
 * a reduce-scatter of its f32 gradient (comm), overlapping the GEMM. */
enum { SYN_STEPS = 3 };
static const double syn_start[SYN_STEPS] = {0.001, 0.0012, 0.0013}, syn_dur[SYN_STEPS] = {0.0002, 0.0004, 0.0003};

static void write_synthetic_trace(FILE *f) {
  static mlc_plan_value vals[6];
  vals[0] = (mlc_plan_value){shape(2, 2, 1024, 2048, 0), 0, MLC_PLAN_NO_PARAM, 0, 0, 0, MLC_PLAN_NO_VALUE};
  vals[1] = (mlc_plan_value){shape(2, 2, 4096, 2048, 0), 0, MLC_PLAN_NO_PARAM, 0, 0, 0, MLC_PLAN_NO_VALUE};
  vals[2] = (mlc_plan_value){shape(2, 3, 8, 512, 2048), 0, MLC_PLAN_NO_PARAM, 0, 0, 0, MLC_PLAN_NO_VALUE};
  vals[3] = (mlc_plan_value){shape(2, 3, 8, 512, 4096), 0, MLC_PLAN_NO_PARAM, 0, 0, 0, MLC_PLAN_NO_VALUE};
  vals[4] = (mlc_plan_value){shape(1, 2, 4096, 2048, 0), 0, MLC_PLAN_NO_PARAM, 0, 0, 0, MLC_PLAN_NO_VALUE};
  vals[5] = (mlc_plan_value){shape(1, 2, 1024, 2048, 0), 0, MLC_PLAN_NO_PARAM, 0, 0, 0, MLC_PLAN_NO_VALUE};
  static const uint32_t ag[] = {0, 1}, lin[] = {2, 1, 3}, rs[] = {4, 5};
  static mlc_plan_step steps[SYN_STEPS];
  steps[0] = (mlc_plan_step){0, "all_gather%1", "layers.0", 1, 0, 2, NULL, ag, 1, 0, 12582912, 0, MLC_PLAN_UNIT_FP32, 1};
  steps[1] = (mlc_plan_step){1, "linear%2", "layers.0.ffn.0", 0, 0, 3, NULL, lin, 1, 68719476736.0, 67108864, 0, MLC_PLAN_UNIT_FP32, 1};
  steps[2] = (mlc_plan_step){2, "reduce_scatter%3", "layers.0", 1, 0, 2, NULL, rs, 1, 6291456, 25165824, 0, MLC_PLAN_UNIT_FP32, 1};
  static const mlc_plan_entry entry = {"train", 0, 6, 0, 0, SYN_STEPS, vals, NULL, NULL, steps};
  static const char *const kernels[] = {"mlc_all_gather_bf16", "mlc_k_linear_bf16", "mlc_reduce_scatter_f32"};
  mlc_trace_writer w;
  mlc_trace_begin(&w, f);
  for (int rank = 0; rank < 2; rank++) {
    mlc_trace_options o = {"mlc synthetic on GPU", rank};
    mlc_trace_process(&w, &o);
    for (int i = 0; i < SYN_STEPS; i++) {
      mlc_trace_span sp = {&entry, &steps[i], kernels[steps[i].kernel], syn_start[i] + 0.0005 * rank, syn_dur[i]};
      mlc_trace_add(&w, &sp);
    }
  }
  mlc_trace_end(&w);
}

/* The object's keys are exactly these, in this order. */
static void expect_keys(const cJSON *o, const char *const *keys, int n) {
  const cJSON *k = o->child;
  for (int i = 0; i < n; i++, k = k->next) {
    assert_non_null(k);
    assert_string_equal(k->string, keys[i]);
  }
  assert_null(k);
}

static void expect_meta(const cJSON *ev, const char *name, int pid, int tid, const char *key, const char *text, int num) {
  static const char *const mk[] = {"name", "ph", "pid", "tid", "args"};
  expect_keys(ev, mk, 5);
  assert_string_equal(cJSON_GetObjectItemCaseSensitive(ev, "name")->valuestring, name);
  assert_string_equal(cJSON_GetObjectItemCaseSensitive(ev, "ph")->valuestring, "M");
  assert_int_equal(cJSON_GetObjectItemCaseSensitive(ev, "pid")->valueint, pid);
  assert_int_equal(cJSON_GetObjectItemCaseSensitive(ev, "tid")->valueint, tid);
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(ev, "args");
  const char *ak[] = {key};
  expect_keys(a, ak, 1);
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(a, key);
  if (text) assert_string_equal(v->valuestring, text);
  else assert_int_equal(v->valueint, num);
}

static void expect_shapes(const cJSON *sh, const char *const *want, int n) {
  assert_int_equal(cJSON_GetArraySize(sh), n);
  for (int i = 0; i < n; i++) assert_string_equal(cJSON_GetArrayItem(sh, i)->valuestring, want[i]);
}

static void trace_ranks_streams_collectives(void **state) {
  (void)state;
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_non_null(f);
  write_synthetic_trace(f);
  fclose(f);
  cJSON *root = cJSON_Parse(buf);
  assert_non_null(root);
  static const char *const rk[] = {"displayTimeUnit", "traceEvents"};
  expect_keys(root, rk, 2);
  const cJSON *evs = cJSON_GetObjectItemCaseSensitive(root, "traceEvents");
  assert_int_equal(cJSON_GetArraySize(evs), 2 * 9);
  static const char *const xk[] = {"name", "cat", "ph", "pid", "tid", "ts", "dur", "args"};
  static const char *const ck[] = {"scope", "kernel", "flops", "entry", "wire_bytes", "wire_GBps", "shapes"};
  static const char *const gk[] = {"scope", "kernel", "flops", "bytes", "intensity", "shapes"};
  static const char *const ag_sh[] = {"bf16[1024, 2048]", "bf16[4096, 2048]"};
  static const char *const lin_sh[] = {"bf16[8, 512, 2048]", "bf16[4096, 2048]", "bf16[8, 512, 4096]"};
  static const char *const rs_sh[] = {"f32[4096, 2048]", "f32[1024, 2048]"};
  for (int rank = 0; rank < 2; rank++) {
    int b = rank * 9;
    char pname[64];
    snprintf(pname, sizeof pname, "mlc synthetic on GPU, rank %d", rank);
    expect_meta(cJSON_GetArrayItem(evs, b + 0), "process_name", rank, 0, "name", pname, 0);
    expect_meta(cJSON_GetArrayItem(evs, b + 1), "process_sort_index", rank, 0, "sort_index", NULL, rank);
    expect_meta(cJSON_GetArrayItem(evs, b + 2), "thread_name", rank, 1, "name", "comm", 0);
    expect_meta(cJSON_GetArrayItem(evs, b + 3), "thread_sort_index", rank, 1, "sort_index", NULL, 1);
    expect_meta(cJSON_GetArrayItem(evs, b + 5), "thread_name", rank, 0, "name", "compute", 0);
    expect_meta(cJSON_GetArrayItem(evs, b + 6), "thread_sort_index", rank, 0, "sort_index", NULL, 0);
    const int at[SYN_STEPS] = {b + 4, b + 7, b + 8};
    static const char *const names[] = {"all_gather%1", "linear%2", "reduce_scatter%3"};
    static const char *const kern[] = {"mlc_all_gather_bf16", "mlc_k_linear_bf16", "mlc_reduce_scatter_f32"};
    static const int tids[] = {1, 0, 1};
    for (int i = 0; i < SYN_STEPS; i++) {
      const cJSON *ev = cJSON_GetArrayItem(evs, at[i]);
      expect_keys(ev, xk, 8);
      assert_string_equal(cJSON_GetObjectItemCaseSensitive(ev, "name")->valuestring, names[i]);
      assert_string_equal(cJSON_GetObjectItemCaseSensitive(ev, "cat")->valuestring, i == 1 ? "train" : "collective");
      assert_string_equal(cJSON_GetObjectItemCaseSensitive(ev, "ph")->valuestring, "X");
      assert_int_equal(cJSON_GetObjectItemCaseSensitive(ev, "pid")->valueint, rank);
      assert_int_equal(cJSON_GetObjectItemCaseSensitive(ev, "tid")->valueint, tids[i]);
      assert_float_equal(cJSON_GetObjectItemCaseSensitive(ev, "ts")->valuedouble, (syn_start[i] + 0.0005 * rank) * 1e6, 1e-3);
      assert_float_equal(cJSON_GetObjectItemCaseSensitive(ev, "dur")->valuedouble, syn_dur[i] * 1e6, 1e-3);
      const cJSON *a = cJSON_GetObjectItemCaseSensitive(ev, "args");
      assert_string_equal(cJSON_GetObjectItemCaseSensitive(a, "scope")->valuestring, i == 1 ? "layers.0.ffn.0" : "layers.0");
      assert_string_equal(cJSON_GetObjectItemCaseSensitive(a, "kernel")->valuestring, kern[i]);
      double flops = cJSON_GetObjectItemCaseSensitive(a, "flops")->valuedouble;
      if (i == 1) {
        expect_keys(a, gk, 6);
        assert_float_equal(flops, 68719476736.0, 0);
        assert_float_equal(cJSON_GetObjectItemCaseSensitive(a, "bytes")->valuedouble, 67108864, 0);
        assert_float_equal(cJSON_GetObjectItemCaseSensitive(a, "intensity")->valuedouble, 1024, 0);
        expect_shapes(cJSON_GetObjectItemCaseSensitive(a, "shapes"), lin_sh, 3);
      } else {
        expect_keys(a, ck, 7);
        double wire = i == 0 ? 12582912 : 25165824;
        assert_float_equal(flops, i == 0 ? 0 : 6291456, 0);
        assert_string_equal(cJSON_GetObjectItemCaseSensitive(a, "entry")->valuestring, "train");
        assert_float_equal(cJSON_GetObjectItemCaseSensitive(a, "wire_bytes")->valuedouble, wire, 0);
        /* 12582912 B in 200 us: 62.91456 GB/s; 25165824 B in 300 us: 83.88608 GB/s */
        assert_float_equal(cJSON_GetObjectItemCaseSensitive(a, "wire_GBps")->valuedouble, i == 0 ? 62.9146 : 83.8861, 1e-9);
        expect_shapes(cJSON_GetObjectItemCaseSensitive(a, "shapes"), i == 0 ? ag_sh : rs_sh, 2);
      }
    }
  }
  cJSON_Delete(root);
  free(buf);
}

/* With a path: writes the synthetic two-rank trace there, for check_trace.py. */
int main(int argc, char **argv) {
  if (argc == 2) {
    FILE *f = fopen(argv[1], "w");
    if (!f) return 1;
    write_synthetic_trace(f);
    return fclose(f) ? 1 : 0;
  }
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(memory_bound_elementwise),
      cmocka_unit_test(dram_bytes_after_flush),
    cmocka_unit_test(seed_rule), cmocka_unit_test(generic_kernel_hint),
      cmocka_unit_test(collective_hint), cmocka_unit_test(copy_uses_bandwidth),
    cmocka_unit_test(compute_bound_gemm),       cmocka_unit_test(misaligned_linear_names_n),
    cmocka_unit_test(misaligned_matmul_names_k), cmocka_unit_test(latency_bound),
    cmocka_unit_test(ceilings_cache),           cmocka_unit_test(roofline_svg),
    cmocka_unit_test(trace_json), cmocka_unit_test(profiling_off_records_nothing),
    cmocka_unit_test(gpu_ceilings), cmocka_unit_test(collective_names),
    cmocka_unit_test(trace_ranks_streams_collectives),
    cmocka_unit_test(units_per_dtype), cmocka_unit_test(recorded_launches_replay),
    cmocka_unit_test(rule_peaks_at_clock), cmocka_unit_test(kernel_sums), cmocka_unit_test(neither_roof), cmocka_unit_test(unit_ceilings_cache),
    cmocka_unit_test(roofline_roof_per_unit), cmocka_unit_test(ncu_csv_raw), cmocka_unit_test(ncu_csv_h200), cmocka_unit_test(ncu_rule_and_formats),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
