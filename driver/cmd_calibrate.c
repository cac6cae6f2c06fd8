/* mlc calibrate: the target's own calibrate (its descriptor's; the GPUs'
 * is calibrate.c), and the CPU's: its memory bandwidth and f32 GEMM peak,
 * the roofline's two ceilings, cached in ceilings-cpu.json. */
#define _XOPEN_SOURCE 700 /* gmtime_r */
#include "driver/calibrate.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "driver/cli.h"
#include "passes/passes.h"
#include "runtime/plan.h"
#include "runtime/profile.h"
#ifdef MLC_HAVE_CPU
#include "driver/target_cpu.h"
#include "runtime/cpu/threadpool.h"
#endif

/* calibrate's own arguments (--target, --threads, --help): -1 to go on, or
 * the exit status (help printed, or a usage error). */
static int calibrate_args(int argc, char **argv, const char **target, long *threads) {
  *target = NULL, *threads = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if ((!strcmp(a, "--target") || !strcmp(a, "-t")) && i + 1 < argc) *target = argv[++i];
    else if (!strncmp(a, "--target=", 9)) *target = a + 9;
    else if (!strcmp(a, "--threads") && i + 1 < argc) {
      if (!mlc_cli_parse_int(argv[++i], 0, 1024, threads))
        return mlc_cli_usage_error("--threads %s: expected a number from 0 (all CPUs) to 1024", argv[i]);
    } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) { mlc_cli_usage(stdout); return EXIT_OK; }
    else return mlc_cli_usage_error("calibrate does not take '%s'", a);
  }
  if (!*target) return mlc_cli_usage_error("%s", "calibrate needs --target (cpu or cuda)");
  return -1;
}

#ifdef MLC_HAVE_CPU
/* calibrate: the two ceilings of the roofline. */

typedef struct {
  uint8_t *dst;
  const uint8_t *src;
  size_t chunk, total;
} copy_job;

static void copy_range(void *ctx, int64_t begin, int64_t end) {
  const copy_job *j = ctx;
  for (int64_t i = begin; i < end; i++) {
    size_t off = (size_t)i * j->chunk, n = off + j->chunk <= j->total ? j->chunk : j->total - off;
    memcpy(j->dst + off, j->src + off, n);
  }
}

/* Bytes/s of a multi-threaded copy of 256 MiB (read + write counted, as
 * STREAM's copy does), best of 5. */
static mlc_status measure_bandwidth(int threads, double *out) {
  const size_t total = 256u << 20, chunk = 1u << 20;
  mlc_cpu_pool *pool;
  MLC_RETURN_IF_ERROR(mlc_cpu_pool_create(threads, mlc_allocator_default(), &pool));
  uint8_t *a = malloc(total), *b = malloc(total);
  mlc_status st = NULL;
  if (!a || !b) {
    st = mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory for 512 MiB of copy buffers");
  } else {
    copy_job j = {b, a, chunk, total};
    memset(a, 1, total);
    memset(b, 0, total);
    double best = 1e30;
    for (int r = 0; r < 6; r++) {
      double t0 = mlc_now();
      mlc_cpu_pool_parallel_for(pool, (int64_t)(total / chunk), 1, copy_range, &j);
      double dt = mlc_now() - t0;
      if (r && dt < best) best = dt; /* the first run warms up the pool */
    }
    *out = 2.0 * (double)total / best;
  }
  free(a);
  free(b);
  mlc_cpu_pool_destroy(pool);
  return st;
}

/* FLOP/s of mlc's own f32 GEMM at 2048^3, through the whole pipeline, best of 3. */
static mlc_status measure_gemm(const char *target, int threads, double *out) {
  static const char src[] =
    "config { n = 2048 }\n"
    "module Gemm(n) {\n"
    "    forward(a: f32[n, n], b: f32[n, n]) {\n"
    "        return a @ b\n"
    "    }\n"
    "}\n";
  mlc_arena arena;
  mlc_arena_init(&arena);
  mlc_diag diag;
  mlc_diag_init(&diag, stderr);
  mlc_program prog;
  mlc_program_init(&prog, &arena);
  mlc_cpu_build b;
  memset(&b, 0, sizeof b);
  bool built = false;
  mlc_plan *plan = NULL;
  mlc_session *s = NULL;
  mlc_status st = NULL;
  float *buf = NULL;
  mlc_lower_options lo = {NULL, 0, NULL, 0, false, 0, false};
  mlc_pipeline_options po = {NULL, stdout, NULL, target, false, false};
  if (!mlc_frontend_run(&prog, &diag, "<calibrate>", src, sizeof src - 1, &lo, NULL) ||
      !mlc_pipeline_run(&prog, &diag, &po)) {
    st = mlc_status_make(MLC_INTERNAL, "the calibration GEMM does not compile");
    goto out;
  }
  built = true; /* freed after a failure too */
  if ((st = mlc_cpu_compile(&prog, &b, NULL)) || (st = mlc_cpu_jit(&b))) goto out;
  if ((st = mlc_plan_parse(b.plan, b.plan_bytes, mlc_allocator_default(), &plan))) goto out;
  mlc_session_options so = {NULL, mlc_cpu_lookup, &b, threads, false, {0}, NULL};
  if ((st = mlc_session_create(plan, &so, &s))) goto out;
  const size_t n = 2048u * 2048u;
  if (!(buf = malloc(n * sizeof *buf))) { st = mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory"); goto out; }
  for (size_t i = 0; i < n; i++) buf[i] = (float)(i % 17) * 0.125f - 1.0f;
  const mlc_plan_entry *e = mlc_plan_find_entry(plan, "forward");
  for (uint32_t k = 0; k < e->ninputs && !st; k++) st = mlc_session_set_input(s, "forward", e->inputs[k].name, buf, n * sizeof *buf);
  double flops = 0, best = 1e30;
  for (uint32_t i = 0; i < e->nsteps; i++) flops += e->steps[i].flops;
  for (int r = 0; r < 4 && !st; r++) {
    double t0 = mlc_now();
    st = mlc_session_run(s, "forward");
    double dt = mlc_now() - t0;
    if (r && dt < best) best = dt; /* the first run pages the arena in */
  }
  if (!st) *out = flops / best;
out:
  free(buf);
  mlc_session_destroy(s);
  mlc_plan_free(plan);
  if (built) mlc_cpu_build_free(&b);
  mlc_arena_free(&arena);
  return st;
}

/* The CPU target's calibrate (driver/target.h). */
int mlc_calibrate_cpu(const mlc_driver_target *t, int argc, char **argv) {
  const char *target;
  long threads;
  int rc = calibrate_args(argc, argv, &target, &threads);
  if (rc >= 0) return rc;
  mlc_ceilings c;
  mlc_ceilings_default(&c);
  char path[1024];
  if (!mlc_ceilings_cache_path(path, sizeof path)) {
    fprintf(stderr, "mlc: neither XDG_CACHE_HOME nor HOME is set: nowhere to cache the ceilings\n");
    return EXIT_USER;
  }
  fprintf(stderr, "mlc: calibrating %s: memory bandwidth (256 MiB copy)...\n", c.device);
  mlc_status st = measure_bandwidth((int)threads, &c.bandwidth);
  if (!st) {
    fprintf(stderr, "mlc: peak f32 GEMM rate (2048^3 through mlc's own CPU code)...\n");
    st = measure_gemm(t->name, (int)threads, &c.peak_flops);
  }
  if (st) return mlc_cli_fail_status(st);
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  char when[64];
  strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
  snprintf(c.source, sizeof c.source, "%s", when);
  c.calibrated = true;
  if ((st = mlc_ceilings_save_file(path, &c))) return mlc_cli_fail_status(st);
  printf("%s: %.1f GFLOP/s peak (f32 GEMM), %.1f GB/s memory copy; ridge %.1f FLOP/byte\ncached in %s\n", c.device,
         c.peak_flops / 1e9, c.bandwidth / 1e9, c.peak_flops / c.bandwidth, path);
  return EXIT_OK;
}
#endif

/* The --target of a command's arguments (after the command), or NULL. */
static const char *target_arg(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if ((!strcmp(argv[i], "--target") || !strcmp(argv[i], "-t")) && i + 1 < argc) return argv[i + 1];
    if (!strncmp(argv[i], "--target=", 9)) return argv[i] + 9;
  }
  return NULL;
}

/* calibrate: the target's own (its descriptor's calibrate), or why there is
 * none after the arguments are checked. */
int mlc_cmd_calibrate(int argc, char **argv) {
  const mlc_driver_target *t = mlc_driver_target_find(target_arg(argc, argv));
  if (t && t->calibrate && (t->listed & MLC_CMD_CALIBRATE)) return t->calibrate(t, argc, argv);
  const char *target;
  long threads;
  int rc = calibrate_args(argc, argv, &target, &threads);
  if (rc >= 0) return rc;
  if (t && t->calibrate_missing) {
    fprintf(stderr, "mlc: %s\n", t->calibrate_missing);
    return EXIT_NO_TARGET;
  }
  if (t && !t->build && (t->listed & MLC_CMD_CALIBRATE)) {
    fprintf(stderr, "mlc: calibrate --target %s: %s\n", t->name, t->not_built);
    return EXIT_NO_TARGET;
  }
  return mlc_cli_no_target(target);
}
