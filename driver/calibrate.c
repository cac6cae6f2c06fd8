/* mlc calibrate --target cuda: see calibrate.h.
 *
 * Two tiny models go through the whole pipeline and the CUDA target (nvcc
 * or NVRTC, as for `mlc run`) and run in a session on the GPU with
 * profiling on, so that each step is timed with the profiler's own CUDA
 * events:
 *   peak matrix rate: a bf16 GEMM of 8192^3 (f32 accumulation), the plan's FLOPs;
 *   copy bandwidth:   an f32 add of two 16384 x 8192 tensors (512 MiB each),
 *                     the plan's bytes (both inputs read, the output written);
 * then the roof of each other unit a kernel can run on, where the target
 * has it:
 *   FP32 cores:       an f32 GEMM of 4096^3 under --f32-matmul ieee (CUDA;
 *                     SPIR-V's f32 GEMM is its FP32 kernel anyway);
 *   TF32 tensor cores: an f32 GEMM of 8192^3 under --f32-matmul tf32 (CUDA);
 *   FP8 tensor cores: a train step under --matmul fp8 whose linear is
 *                     8192 x 8192 over 8192 rows (CUDA): its steps on the FP8
 *                     unit (the forward's and the weight gradient's
 *                     scaled_mm; no forward of the language runs on FP8)
 *                     alone are timed, against their FLOPs;
 *   L2 bandwidth:     an f32 add whose inputs and output fill half the L2
 *                     (its size from the device: CUDA's), read and written
 *                     in the L2 after the first run.
 * A unit whose probe fails keeps the datasheet's peak (the L2 stays
 * unknown), with a message.
 * Inputs are random (never zeros: a GEMM runs faster on zeros).  Each is
 * run for at least 300 ms to warm up the clocks, then 20 times; the ceiling
 * is the median rate (the best is printed beside it).  While the GEMM's
 * timed runs go, a thread samples the SM clock (NVML, where the target can
 * read it): the seed's rule judges kernels against the datasheet's peaks at
 * that clock (runtime/profile.h).
 */
#include "driver/calibrate.h"

#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "driver/nvml.h"
#include "frontend/frontend.h"
#include "passes/passes.h"
#include "runtime/cuda/driver.h"
#include "runtime/profile.h"
#include "runtime/session.h"

enum { EXIT_OK = MLC_EXIT_OK, EXIT_USER = MLC_EXIT_USER, EXIT_USAGE = MLC_EXIT_USAGE, EXIT_INTERNAL = MLC_EXIT_INTERNAL };
enum { TIMED_RUNS = 20 };
#define WARMUP_SECONDS 0.3

/* A device that forwards everything to the CUDA device and adds up the
 * seconds of the steps each finish reports (the profiler's CUDA events). */
typedef struct {
  mlc_device base;
  mlc_device *in;
  const bool *counted; /* the steps whose seconds count (the FP8 probe's GEMMs); NULL: all */
  double last;         /* seconds of the last run's counted steps */
} timed_dev;

static mlc_device *in_of(mlc_device *d) { return ((timed_dev *)d)->in; }
static void td_destroy(mlc_device *d) {
  in_of(d)->vt->destroy(in_of(d));
  free(d);
}
static mlc_status td_alloc(mlc_device *d, uint64_t n, uint64_t *out) { return in_of(d)->vt->alloc(in_of(d), n, out); }
static void td_free(mlc_device *d, uint64_t p) { in_of(d)->vt->free(in_of(d), p); }
static mlc_status td_write(mlc_device *d, uint64_t dst, const void *src, uint64_t n) {
  return in_of(d)->vt->write(in_of(d), dst, src, n);
}
static mlc_status td_read(mlc_device *d, void *dst, uint64_t src, uint64_t n) {
  return in_of(d)->vt->read(in_of(d), dst, src, n);
}
static mlc_status td_resolve(mlc_device *d, const char *sym, void **out) {
  return in_of(d)->vt->resolve(in_of(d), sym, out);
}
static mlc_status td_launch(mlc_device *d, void *k, uint64_t items, const uint64_t *args, uint32_t nargs, bool timing,
                            uint32_t slot) {
  return in_of(d)->vt->launch(in_of(d), k, items, args, nargs, timing, slot);
}
static mlc_status td_finish(mlc_device *d, uint32_t n, double *sec, double *start) {
  MLC_RETURN_IF_ERROR(in_of(d)->vt->finish(in_of(d), n, sec, start));
  const bool *counted = ((timed_dev *)d)->counted;
  double t = 0;
  for (uint32_t i = 0; i < n; i++) t += !counted || counted[i] ? sec[i] : 0;
  ((timed_dev *)d)->last = t;
  return NULL;
}
static void td_describe(mlc_device *d, char *buf, size_t n) { in_of(d)->vt->describe(in_of(d), buf, n); }
static void td_push(mlc_device *d, const char *name) {
  if (in_of(d)->vt->range_push) in_of(d)->vt->range_push(in_of(d), name);
}
static void td_pop(mlc_device *d) {
  if (in_of(d)->vt->range_pop) in_of(d)->vt->range_pop(in_of(d));
}
static void *td_stream(mlc_device *d) { return in_of(d)->vt->stream ? in_of(d)->vt->stream(in_of(d)) : NULL; }
static mlc_status td_mark(mlc_device *d, uint32_t slot, bool end) {
  return in_of(d)->vt->mark ? in_of(d)->vt->mark(in_of(d), slot, end) : NULL;
}
static mlc_status td_order(mlc_device *d, uint32_t stream, const uint32_t *wait, uint32_t nwait) {
  return in_of(d)->vt->order ? in_of(d)->vt->order(in_of(d), stream, wait, nwait) : NULL;
}
static mlc_status td_signal(mlc_device *d, uint32_t step) {
  return in_of(d)->vt->signal ? in_of(d)->vt->signal(in_of(d), step) : NULL;
}
static void td_kernel_launch(mlc_device *d, void *k, mlc_profile_launch *out) {
  if (in_of(d)->vt->kernel_launch) in_of(d)->vt->kernel_launch(in_of(d), k, out);
}
static mlc_status td_check_external(mlc_device *d, uint64_t ext, uint64_t bytes, int ordinal) {
  return in_of(d)->vt->check_external(in_of(d), ext, bytes, ordinal); /* the CUDA device's: it has them */
}
static mlc_status td_copy_external(mlc_device *d, uint64_t addr, uint64_t ext, uint64_t bytes, bool in) {
  return in_of(d)->vt->copy_external(in_of(d), addr, ext, bytes, in);
}
static const mlc_device_vt timed_vt = {"cuda", false, false, td_destroy, td_alloc, td_free, td_write, td_read, td_resolve,
                                       td_launch, td_finish, td_describe, td_push, td_pop, td_stream, td_mark,
                                       td_order, td_signal, td_kernel_launch, td_check_external, td_copy_external,
                                       NULL, NULL, NULL, NULL, NULL, NULL, NULL}; /* timing every launch: none recorded, nothing bound */

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Random inputs: floats in [-1, 1) in the input's dtype (f32, bf16, f16). */
static void fill_random(uint8_t *buf, uint64_t bytes, uint8_t dtype, uint64_t *rng) {
  uint64_t esz = dtype == 1 ? 4 : 2;
  for (uint64_t j = 0; j < bytes / esz; j++) {
    *rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
    float f = (float)(uint32_t)(*rng >> 33) / 2147483648.0f - 1.0f;
    uint32_t bits;
    memcpy(&bits, &f, 4);
    if (dtype == 1) memcpy(buf + j * 4, &f, 4);
    else if (dtype == 2) { uint16_t h = (uint16_t)(bits >> 16); memcpy(buf + j * 2, &h, 2); }
    else { uint16_t h = (uint16_t)(0x3c00 | (bits >> 13 & 0x3ff)); memcpy(buf + j * 2, &h, 2); } /* f16 in [1, 2) */
  }
}

typedef struct {
  const char *what;   /* for messages */
  const char *source; /* the model */
  bool flops;         /* the rate of FLOPs, else of bytes */
  const char *opt, *val; /* an option of emitted code to compile it with (--opt=val), or NULL */
  const char *entry;  /* the entry it runs: "forward", or "train" (the FP8 probe) */
  int unit;           /* only the steps on this unit (mlc_unit) count; -1: every step */
} probe;

/* What a probe learnt of the device: its description, and the L2's size
 * (0: unknown) that sizes the L2 probe. */
typedef struct {
  char name[256];
  uint64_t l2_bytes;
} dev_facts;

/* The probe's model built for the target and opened on device `ordinal`
 * (the build in b, which the caller releases). */
static mlc_status open_probe(const mlc_driver_target *t, mlc_program *prog, void *b, int ordinal, mlc_device **dev,
                             const uint8_t **plan, size_t *plan_bytes) {
  FILE *progress = t->calibrate_grows ? NULL : stderr;
  mlc_session_options so = {0};
  mlc_status st = t->build(b, prog, progress, 0);
  if (st) return mlc_status_annotate(st, "the calibration probe does not build for --target %s", t->name);
  st = t->open(b, ordinal, progress, 0, &so, plan, plan_bytes);
  if (st) return mlc_status_annotate(st, "cannot open device %d for --target %s", ordinal, t->name);
  *dev = so.device;
  return NULL;
}

/* The SM clock, sampled every millisecond by a thread of its own while the
 * timed runs go (the GPU drops its clock under load: power and heat). */
enum { CLOCK_SAMPLES = 8192 };
typedef struct {
  mlc_nvml *nvml;
  atomic_bool stop;
  unsigned mhz[CLOCK_SAMPLES], max_mhz;
  int n;
} clock_sampler;

static void *sample_clock(void *arg) {
  clock_sampler *cs = arg;
  while (!atomic_load(&cs->stop) && cs->n < CLOCK_SAMPLES) {
    unsigned now, max;
    if (mlc_nvml_sm_clock(cs->nvml, &now, &max)) cs->mhz[cs->n++] = now, cs->max_mhz = max;
    nanosleep(&(struct timespec){0, 1000000}, NULL);
  }
  return NULL;
}

static int cmp_unsigned(const void *a, const void *b) {
  unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
  return (x > y) - (x < y);
}

/* Per-run seconds of the probe's forward (runs of them: at most TIMED_RUNS),
 * timed by the device's own timers (CUDA events, Vulkan timestamps); its
 * work (FLOPs or bytes) from the plan.  *name: the device's description. */
static mlc_status run_probe(const mlc_driver_target *t, const probe *pr, int ordinal, int runs, double *seconds, double *work,
                            dev_facts *facts, clock_sampler *clock) {
  mlc_arena arena;
  mlc_arena_init(&arena);
  mlc_diag diag;
  mlc_diag_init(&diag, stderr);
  mlc_program prog;
  mlc_program_init(&prog, &arena);
  void *b = calloc(1, t->build_bytes);
  mlc_plan *plan = NULL;
  mlc_session *s = NULL;
  mlc_status st = NULL;
  timed_dev *td = NULL;
  bool *counted = NULL;
  const char *entry = pr->entry ? pr->entry : "forward";
  mlc_lower_options lo = {NULL, 0, NULL, 0, false, 0, false};
  mlc_pipeline_options po = {.dump = stdout, .target = t->name};
  mlc_options flags = {0};
  char err[256];
  if (pr->opt && !mlc_options_set(&flags, pr->opt, pr->val, err, sizeof err)) {
    st = mlc_status_make(MLC_INTERNAL, "the calibration's %s: %s", pr->what, err);
    goto out;
  }
  bool ok = mlc_frontend_run(&prog, &diag, "<calibrate>", pr->source, strlen(pr->source), &lo, NULL);
  if (ok && pr->opt) mlc_options_apply(&prog, &flags); /* as `mlc compile --opt=val` would */
  if (!ok || !mlc_pipeline_run(&prog, &diag, &po)) {
    st = mlc_status_make(MLC_INTERNAL, "the calibration's %s does not compile", pr->what);
    goto out;
  }
  const uint8_t *plan_bytes = NULL;
  size_t plan_n = 0;
  if (!b || !(td = calloc(1, sizeof *td))) { st = mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory"); goto out; }
  if ((st = open_probe(t, &prog, b, ordinal, &td->in, &plan_bytes, &plan_n))) { free(td); goto out; }
  td->base.vt = &timed_vt;
  td->base.a = mlc_allocator_default();
  td_describe(&td->base, facts->name, sizeof facts->name);
  facts->l2_bytes = td->in->vt->cache_bytes ? td->in->vt->cache_bytes(td->in) : 0;
  if ((st = mlc_plan_parse(plan_bytes, plan_n, mlc_allocator_default(), &plan))) { td_destroy(&td->base); goto out; }
  const mlc_plan_entry *e = mlc_plan_find_entry(plan, entry);
  if (!e || !(counted = calloc(e->nsteps + 1, sizeof *counted))) {
    st = e ? mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory") : mlc_status_make(MLC_INTERNAL, "the calibration's %s has no %s entry", pr->what, entry);
    td_destroy(&td->base);
    goto out;
  }
  *work = 0;
  for (uint32_t i = 0; i < e->nsteps; i++) {
    counted[i] = pr->unit < 0 || e->steps[i].unit == pr->unit;
    if (counted[i]) *work += pr->flops ? e->steps[i].flops : e->steps[i].bytes;
  }
  td->counted = counted;
  mlc_session_options so = {&td->base, NULL, NULL, 0, true, {0}, NULL};
  if ((st = mlc_session_create(plan, &so, &s))) goto out; /* the session destroyed the device */
  uint64_t rng = 0x63616c6962;
  for (uint32_t k = 0; k < e->ninputs && !st; k++) {
    const mlc_plan_value *v = &e->values[e->inputs[k].value];
    if (!strncmp(e->inputs[k].name, "opt.", 4)) continue; /* the step and learning rate: the session's */
    uint64_t bytes = mlc_plan_shape_bytes(&v->shape);
    uint8_t *buf = calloc(1, bytes);
    if (!buf) { st = mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory for %llu bytes", (unsigned long long)bytes); break; }
    if (v->shape.dtype != MLC_DT_I32) fill_random(buf, bytes, v->shape.dtype, &rng); /* labels: class 0 */
    st = mlc_session_set_input(s, entry, e->inputs[k].name, buf, (size_t)bytes);
    free(buf);
  }
  if (!st && !(*work > 0)) st = mlc_status_make(MLC_INTERNAL, "the calibration's %s has no step to time", pr->what);
  double t0 = mlc_now();
  for (int r = 0; !st && (r < 3 || mlc_now() - t0 < WARMUP_SECONDS); r++) st = mlc_session_run(s, entry);
  pthread_t sampler;
  bool sampling = clock && clock->nvml && !st && !pthread_create(&sampler, NULL, sample_clock, clock);
  for (int r = 0; r < runs && !st; r++) {
    st = mlc_session_run(s, entry);
    seconds[r] = td->last;
  }
  if (sampling) {
    atomic_store(&clock->stop, true);
    pthread_join(sampler, NULL);
  }
out:
  mlc_session_destroy(s);
  free(counted);
  mlc_plan_free(plan);
  if (b && t->release) t->release(b);
  free(b);
  mlc_arena_free(&arena);
  return st;
}

static int fail(mlc_status st) {
  fprintf(stderr, "mlc: %s\n", mlc_status_message(st));
  int rc = mlc_exit_status(mlc_status_code(st));
  mlc_status_free(st);
  return rc;
}

/* The probes at a size: a GEMM of n^3 in `dtype`, an f32 add of two m x n
 * tensors (dtype NULL), or (fp8) a train step whose first linear, n x n
 * over n rows, runs on FP8 (the fp8 pass's scaled_mm: its forward and its
 * weight gradient are the steps on the FP8 unit; the head, which feeds the
 * loss, stays f32). */
static char *probe_source(const char *dtype, bool fp8, long long m, long long n) {
  enum { N = 640 };
  char *s = malloc(N);
  if (!s) return NULL;
  if (fp8)
    snprintf(s, N, "config { n = %lld }\nmodule Fp8(n) {\n    l1 = Linear(n, n)\n    head = Linear(n, 16)\n"
                   "    forward(x: f32[n, n]) {\n        return head(l1(x))\n    }\n}\n"
                   "train Fp8 {\n    input x: f32[n, n]\n    input labels: i32[n]\n"
                   "    loss = cross_entropy(model(x), labels)\n    optimizer = SGD(lr=0.001)\n    precision(matmul=fp8)\n}\n", n);
  else if (dtype)
    snprintf(s, N, "config { n = %lld }\nmodule Gemm(n) {\n    forward(a: %s[n, n], b: %s[n, n]) {\n"
                   "        return a @ b\n    }\n}\n", n, dtype, dtype);
  else
    snprintf(s, N, "config { m = %lld  n = %lld }\nmodule Copy(m, n) {\n    forward(x: f32[m, n], y: f32[m, n]) {\n"
                   "        return x + y\n    }\n}\n", m, n);
  return s;
}

/* One ceiling to measure: a GEMM in `dtype` (NULL: the f32 add; fp8: the
 * FP8 train step's GEMMs), compiled with --opt=val where given, up to `max`
 * (n of the GEMM, rows of the add). */
typedef struct {
  const char *what, *dtype, *opt, *val;
  long long max;
  bool fp8;
} kind;

/* Measures k's rate (FLOP/s of a GEMM, bytes/s of the add): the median and
 * the best of TIMED_RUNS runs, at *size.  A target whose probes grow
 * (Vulkan) doubles the size from small until one run takes long enough to
 * time well, or the maximum is reached. */
static mlc_status measure(const mlc_driver_target *t, const kind *k, int ordinal, long long copy_cols, clock_sampler *clock,
                          dev_facts *facts, double *med, double *best, long long *size) {
  bool gemm = k->dtype != NULL || k->fp8, grow = t->calibrate_grows;
  long long sz = grow ? (gemm ? 256 : 64) : k->max;
  double sec[TIMED_RUNS], work = 0, enough = gemm ? 0.02 : 0.005;
  mlc_status st = NULL;
  for (;;) {
    bool last = !grow || sz >= k->max;
    char *src = probe_source(k->dtype, k->fp8, sz, gemm ? sz : copy_cols);
    if (!src) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory");
    probe pr = {k->what, src, gemm, k->opt, k->val, k->fp8 ? "train" : "forward", k->fp8 ? MLC_UNIT_FP8 : -1};
    st = run_probe(t, &pr, ordinal, last ? TIMED_RUNS : 1, sec, &work, facts, last ? clock : NULL);
    if (!st && !last && sec[0] >= enough) { /* long enough: now measure at this size */
      last = true;
      st = run_probe(t, &pr, ordinal, TIMED_RUNS, sec, &work, facts, clock);
    }
    free(src);
    if (st || last) break;
    sz *= 2;
  }
  if (st) return st;
  *size = sz;
  char with[96] = "";
  if (k->opt) snprintf(with, sizeof with, " (--%s=%s)", k->opt, k->val);
  if (gemm) fprintf(stderr, "mlc: %s: %s %lld^3%s, median of %d runs\n", facts->name, k->what, sz, with, TIMED_RUNS);
  else fprintf(stderr, "mlc: %s: %s of two %lld x %lld tensors, median of %d runs\n", facts->name, k->what, sz, copy_cols,
               TIMED_RUNS);
  qsort(sec, TIMED_RUNS, sizeof *sec, cmp_double);
  double m = (sec[TIMED_RUNS / 2 - 1] + sec[TIMED_RUNS / 2]) / 2;
  if (!(m > 0) || !(work > 0)) return mlc_status_make(MLC_INTERNAL, "the %s took no time", k->what);
  *med = work / m;
  *best = work / sec[0];
  return NULL;
}

/* Caches c with its note of how it was measured: the bf16 GEMM's n, the
 * add's size, then `units` (", fp32 f32 GEMM 4096^3 --f32-matmul=ieee"...). */
static mlc_status save(const char *path, mlc_ceilings *c, const char *when, const char *target, const long long size[2],
                       long long copy_cols, const char *units) {
  int len = snprintf(c->source, sizeof c->source, "%s (mlc calibrate --target %s: mlc's bf16 GEMM %lld^3 and f32 add of 2 x "
                     "%lld x %lld%s, median of %d)", when, target, size[0], size[1], copy_cols, units, TIMED_RUNS);
  if (len >= (int)sizeof c->source) fprintf(stderr, "mlc: the cache's note of how the ceilings were measured is cut short\n");
  return mlc_ceilings_save_file(path, c);
}

int mlc_calibrate_gpu(const mlc_driver_target *t, int argc, char **argv) {
  static const struct option opts[] = {
    {"target", required_argument, NULL, 't'}, {"device", required_argument, NULL, 'd'}, {"help", no_argument, NULL, 'h'}, {0},
  };
  const char *target = t->name;
  long ordinal = 0;
  int c;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "+t:h", opts, NULL)) != -1) {
    char *end;
    switch (c) {
    case 't': break; /* how we got here */
    case 'd':
      ordinal = strtol(optarg, &end, 10);
      if (!*optarg || *end || ordinal < 0 || ordinal > 1023) {
        fprintf(stderr, "mlc: --device %s: expected a GPU number from 0\nTry 'mlc --help'.\n", optarg);
        return EXIT_USAGE;
      }
      break;
    case 'h':
      printf("usage: mlc calibrate --target cuda|spirv [--device N]\n"
             "measures device N's peak bf16 matrix rate, memory bandwidth and the roofs of its FP32 cores (and, on\n"
             "CUDA, its TF32 and FP8 tensor cores and its L2 bandwidth) with mlc's own kernels and caches them in\n"
             "~/.cache/mlc/ceilings-cuda.json (by device name) for --profile and --roofline\n");
      return EXIT_OK;
    default:
      fprintf(stderr, "mlc: calibrate --target %s does not take '%s'\nTry 'mlc --help'.\n", target, argv[optind - 1]);
      return EXIT_USAGE;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "mlc: calibrate does not take '%s'\nTry 'mlc --help'.\n", argv[optind]);
    return EXIT_USAGE;
  }
  char path[1024];
  if (!mlc_ceilings_gpu_cache_path(path, sizeof path)) {
    fprintf(stderr, "mlc: neither XDG_CACHE_HOME nor HOME is set: nowhere to cache the ceilings\n");
    return EXIT_USER;
  }
  mlc_status st = NULL;
  if (t->available && (st = t->available())) return fail(st); /* without a driver, say so before compiling anything */
  /* CUDA: the sizes that fill an H200.  Vulkan devices range from a GPU to
   * lavapipe on two CPU cores: the probes grow (GEMM n and the add's rows,
   * doubling) until one run takes long enough to time well, or the CUDA size
   * is reached. */
  const long long max_n = 8192, max_rows = 16384, copy_cols = 8192;
  clock_sampler *clock = calloc(1, sizeof *clock);
  if (!clock) return fail(mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory"));
  clock->nvml = t->clock_open ? t->clock_open((int)ordinal) : NULL;
  /* the bf16 GEMM (the SM clock sampled while it runs), then the add */
  double med[2], best[2];
  long long size[2];
  dev_facts facts = {0};
  const char *name = facts.name;
  kind kinds[2] = {{"bf16 GEMM", "bf16", NULL, NULL, max_n, false}, {"f32 add", NULL, NULL, NULL, max_rows, false}};
  for (int p = 0; p < 2 && !st; p++)
    st = measure(t, &kinds[p], (int)ordinal, copy_cols, p == 0 ? clock : NULL, &facts, &med[p], &best[p], &size[p]);
  /* the median SM clock while the GEMM ran */
  unsigned sm_mhz = 0, sm_max_mhz = clock->max_mhz;
  if (clock->n) {
    qsort(clock->mhz, (size_t)clock->n, sizeof *clock->mhz, cmp_unsigned);
    sm_mhz = clock->mhz[clock->n / 2];
  }
  mlc_nvml_close(clock->nvml);
  free(clock);
  if (st) return fail(st);
  mlc_ceilings cl;
  mlc_ceilings_gpu_datasheet(name, &cl);
  cl.peak_flops = med[0];
  cl.bandwidth = med[1];
  cl.calibrated = true;
  /* Measured: the bf16 tensor cores and HBM, then the other units and the
   * L2 where the target has them (a probe that fails leaves the datasheet's
   * figure, or none for the L2, and the cache says which). */
  cl.unit_flops[MLC_UNIT_TC16] = med[0];
  cl.unit_from[MLC_UNIT_TC16] = MLC_CEIL_MEASURED;
  cl.bandwidth_from = MLC_CEIL_MEASURED;
  if (sm_mhz && sm_max_mhz >= sm_mhz) cl.sm_mhz = sm_mhz, cl.sm_max_mhz = sm_max_mhz;
  /* cached now, and again with the other units: a calibrate stopped
   * while their probes run (a time limit) still leaves bf16 and HBM */
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  char when[64];
  strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
  char measured[256] = "";
  if ((st = save(path, &cl, when, target, size, copy_cols, measured))) return fail(st);
  bool cuda = !strncmp(target, "cuda", 4);
  /* The L2: an f32 add whose two inputs and output fill half of it, so that
   * after the first run every byte is read from and written to the L2. */
  long long l2_rows = facts.l2_bytes ? (long long)(facts.l2_bytes / (6ull * (uint64_t)copy_cols * 4)) : 0;
  enum { L2 = MLC_NUNITS }; /* the L2's row below: not a unit */
  const struct { int unit; kind k; } units[] = {
    {MLC_UNIT_FP32, {"f32 GEMM", "f32", cuda ? "f32-matmul" : NULL, "ieee", 4096, false}},
    {MLC_UNIT_TF32, {"f32 GEMM", "f32", "f32-matmul", "tf32", 8192, false}},
    {MLC_UNIT_FP8, {"FP8 GEMMs of a train step", NULL, NULL, NULL, 8192, true}},
    {L2, {"f32 add in L2", NULL, NULL, NULL, l2_rows > 0 ? l2_rows : 1, false}},
  };
  for (size_t u = 0; u < sizeof units / sizeof *units; u++) {
    int unit = units[u].unit;
    if ((unit == MLC_UNIT_TF32 || unit == MLC_UNIT_FP8) && !cuda) continue; /* neither in SPIR-V */
    if (unit == L2 && l2_rows <= 0) {
      fprintf(stderr, "mlc: the L2's bandwidth is not measured: the device does not say how large its L2 is\n");
      continue;
    }
    double um = 0, ub = 0;
    long long usz = 0;
    const kind k = units[u].k;
    mlc_status ust = measure(t, &k, (int)ordinal, copy_cols, NULL, &facts, &um, &ub, &usz);
    if (ust) {
      if (unit == L2) fprintf(stderr, "mlc: the L2's bandwidth is not measured (%s)\n", mlc_status_message(ust));
      else fprintf(stderr, "mlc: the %s roof is not measured (%s): the datasheet's stays\n", mlc_unit_name((mlc_unit)unit),
                   mlc_status_message(ust));
      mlc_status_free(ust);
      continue;
    }
    size_t len = strlen(measured);
    if (unit == L2) {
      cl.l2_bandwidth = um, cl.l2_from = MLC_CEIL_MEASURED;
      snprintf(measured + len, sizeof measured - len, ", L2 f32 add of 2 x %lld x %lld", usz, copy_cols);
      continue;
    }
    cl.unit_flops[unit] = um;
    cl.unit_from[unit] = MLC_CEIL_MEASURED;
    if (k.fp8) snprintf(measured + len, sizeof measured - len, ", fp8 train step's GEMMs %lld^3 (--matmul=fp8)", usz);
    else snprintf(measured + len, sizeof measured - len, ", %s f32 GEMM %lld^3%s%s", mlc_unit_name((mlc_unit)unit), usz,
                  k.opt ? " --f32-matmul=" : "", k.opt ? k.val : "");
  }
  if ((st = save(path, &cl, when, target, size, copy_cols, measured))) return fail(st);
  bool tera = med[0] >= 1e12; /* lavapipe measures GFLOP/s */
  printf("%s: %.1f %s peak (bf16 GEMM %lld^3; best run %.1f), %.1f GB/s memory (f32 add, read + write; best run "
         "%.1f); ridge %.1f FLOP/byte\ncached in %s\n",
         name, med[0] / (tera ? 1e12 : 1e9), tera ? "TFLOP/s" : "GFLOP/s", size[0], best[0] / (tera ? 1e12 : 1e9),
         med[1] / 1e9, best[1] / 1e9, med[0] / med[1], path);
  mlc_profile_print_units(&cl, stdout);
  return EXIT_OK;
}

mlc_nvml *mlc_calibrate_cuda_clock(int ordinal) {
  mlc_cuda_driver drv;
  mlc_status st = mlc_cuda_driver_load(&drv);
  char bus[64] = "";
  CUdevice dev;
  if (!st && !drv.cuDeviceGet(&dev, ordinal) && drv.cuDeviceGetPCIBusId(bus, sizeof bus, dev)) bus[0] = 0;
  mlc_cuda_driver_unload(&drv);
  mlc_nvml *n = NULL;
  if (!st && bus[0]) st = mlc_nvml_open(bus, &n);
  if (st) fprintf(stderr, "mlc: the SM clock under load is not measured: %s\n", mlc_status_message(st));
  mlc_status_free(st);
  return n;
}

mlc_status mlc_calibrate_cuda_available(void) {
  mlc_cuda_driver drv;
  MLC_RETURN_IF_ERROR(mlc_cuda_driver_load(&drv));
  mlc_cuda_driver_unload(&drv);
  return NULL;
}
