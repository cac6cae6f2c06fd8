/* Times one artifact's forward pass on each of the CPU builds it carries.
 *
 * The artifact is examples/mlp.mdl compiled as `mlp` (bench/cpu_versions.sh
 * does that and builds this file with -DBATCH, -DIN and -DOUT).  The
 * program runs itself once per build with MLC_CPU_MAX set to that build's
 * CPU, so each measurement is its own process with its own model; each one
 * prints the build create picked, the median and best of the timed
 * forwards, and a checksum of the output, whose relative difference from
 * the baseline build's it also prints.
 *
 *   cpu_versions [ITERS]         every build: x86-64-v2, x86-64-v3, x86-64-v4
 *   cpu_versions --one ITERS     the build create picks under the current MLC_CPU_MAX */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, popen */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mlp.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static int one(int iters) {
  static float x[BATCH * IN], y[BATCH * OUT]; /* (BATCH, IN), (BATCH, OUT) */
  for (int i = 0; i < BATCH * IN; i++) x[i] = (float)((i * 7) % 29) / 29.0f - 0.5f;
  mlp *m;
  mlc_status st = mlp_create(NULL, &m);
  if (st) {
    printf("create: %s\n", mlc_status_message(st));
    mlc_status_free(st);
    return 3;
  }
  double *t = malloc((size_t)iters * sizeof *t);
  for (int i = 0; i < 3 && !st; i++) st = mlp_forward(m, x, y); /* warm up: caches, threads */
  for (int i = 0; i < iters && !st; i++) {
    double t0 = now();
    st = mlp_forward(m, x, y);
    t[i] = now() - t0;
  }
  if (st) {
    printf("forward: %s\n", mlc_status_message(st));
    mlc_status_free(st);
    return 1;
  }
  qsort(t, (size_t)iters, sizeof *t, cmp);
  double sum = 0, asum = 0;
  for (int i = 0; i < BATCH * OUT; i++) sum += y[i], asum += fabs(y[i]);
  printf("%s %.4f %.4f %.9g %.9g\n", mlp_cpu(m), 1e3 * t[iters / 2], 1e3 * t[0], sum, asum);
  free(t);
  mlp_destroy(m);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "--one")) return one(atoi(argv[2]));
  int iters = argc > 1 ? atoi(argv[1]) : 50;
  static const char *const cpus[] = {"x86-64-v2", "x86-64-v3", "x86-64-v4"};
  double flops = 2.0 * BATCH * ((double)IN * HIDDEN + (double)HIDDEN * HIDDEN + (double)HIDDEN * OUT);
  double base_sum = 0, base_ms = 0;
  printf("mlp forward, batch %d, %d-%d-%d-%d, %.3g GFLOP; median of %d\n", BATCH, IN, HIDDEN, HIDDEN, OUT, flops / 1e9,
         iters);
  printf("%-12s %-12s %10s %10s %8s %9s %12s\n", "MLC_CPU_MAX", "ran", "median ms", "best ms", "GFLOP/s", "speedup",
         "output diff");
  for (int c = 0; c < 3; c++) {
    char cmd[4096], line[256];
    snprintf(cmd, sizeof cmd, "MLC_CPU_MAX=%s '%s' --one %d", cpus[c], argv[0], iters);
    FILE *p = popen(cmd, "r");
    if (!p || !fgets(line, sizeof line, p)) return 1;
    pclose(p);
    char ran[32];
    double med, best, sum, asum;
    if (sscanf(line, "%31s %lf %lf %lf %lf", ran, &med, &best, &sum, &asum) != 5) {
      printf("%-12s %s", cpus[c], line);
      continue;
    }
    if (!c) base_sum = sum, base_ms = med;
    printf("%-12s %-12s %10.3f %10.3f %8.1f %8.2fx %12.2g\n", cpus[c], ran, med, best, flops / (med * 1e-3) / 1e9,
           base_ms / med, fabs(sum - base_sum) / asum);
  }
  return 0;
}
