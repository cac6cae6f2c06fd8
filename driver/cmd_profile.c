/* mlc profile's outputs: after the runs of bench or train, the --profile
 * table, the --trace and --roofline files, and Nsight Compute's verdicts
 * beside mlc's (profile --ncu runs ncu; --ncu-csv reads its CSV).  cli.c
 * checks profile's options and turns it into bench or train. */
#define _XOPEN_SOURCE 700 /* readlink, fork */
#include "driver/cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/ncu.h"
#include "runtime/profile.h"

#if defined(MLC_HAVE_CPU) || defined(MLC_HAVE_CUDA) || defined(MLC_HAVE_SPIRV)
/* profile --ncu-csv (or --ncu's own CSV): ncu's verdicts beside mlc's. */
static mlc_status ncu_compare(const options *o, mlc_session *s, const char *entry, const mlc_ceilings *c) {
  FILE *f = fopen(o->ncu_csv, "rb");
  if (!f) return mlc_status_make(MLC_IO, "--ncu-csv %s: cannot open: %s", o->ncu_csv, strerror(errno));
  size_t cap = 1 << 16, len = 0;
  char *text = malloc(cap);
  while (text) {
    len += fread(text + len, 1, cap - len - 1, f);
    if (len + 1 < cap) break;
    char *t = realloc(text, cap *= 2);
    if (!t) { free(text); text = NULL; }
    else text = t;
  }
  fclose(f);
  if (!text) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory reading %s", o->ncu_csv);
  text[len] = 0;
  mlc_ncu_table t;
  mlc_status st = mlc_ncu_parse_csv(text, &t);
  free(text);
  if (st) return st;
  mlc_ncu_match *m = NULL;
  uint32_t n = 0;
  if (!(st = mlc_session_ncu_matches(s, entry, c, &m, &n))) {
    double agree;
    uint32_t compared = mlc_ncu_compare(&t, m, n, &agree);
    mlc_ncu_print(m, n, stdout);
    if (!compared) fprintf(stderr, "mlc: %s has no launches of this model's kernels (mlc_<op>_<hash>_<n>)\n", o->ncu_csv);
    if (o->ncu_json) {
      FILE *j = fopen(o->ncu_json, "w");
      if (j) mlc_ncu_write_json(m, n, c->device, j);
      if (!j || ferror(j) | fclose(j)) st = mlc_status_make(MLC_IO, "--ncu-json %s: cannot write", o->ncu_json);
      else fprintf(stderr, "mlc: wrote the comparison with ncu to %s\n", o->ncu_json);
    }
  }
  free(m);
  mlc_ncu_table_free(&t);
  return st;
}

/* After the runs: the --profile table, the --trace and --roofline files,
 * all against the same ceilings. */
mlc_status mlc_cmd_profile_outputs(const options *o, mlc_session *s, const char *entry) {
  mlc_ceilings c;
  mlc_session_ceilings(s, &c);
  if (o->profile) mlc_session_print_profile_ceilings(s, entry, &c, stdout);
  if (o->trace) {
    MLC_RETURN_IF_ERROR(mlc_session_write_trace(s, o->trace));
    fprintf(stderr, "mlc: wrote the trace to %s (open it in https://ui.perfetto.dev)\n", o->trace);
  }
  if (o->roofline) {
    MLC_RETURN_IF_ERROR(mlc_session_write_roofline(s, entry, &c, o->roofline));
    fprintf(stderr, "mlc: wrote the roofline to %s (ceilings: %s)\n", o->roofline, c.calibrated ? "calibrated" : "built-in defaults");
  }
  if (o->ncu_csv) MLC_RETURN_IF_ERROR(ncu_compare(o, s, entry, &c));
  return NULL;
}
#endif

/* An executable on PATH, into buf; false if none. */
static bool on_path(const char *exe, char *buf, size_t n) {
  const char *path = getenv("PATH");
  while (path && *path) {
    size_t len = strcspn(path, ":");
    snprintf(buf, n, "%.*s/%s", (int)len, path, exe);
    if (len && access(buf, X_OK) == 0) return true;
    path += len + (path[len] == ':');
  }
  return false;
}

/* profile --ncu: runs this same profile (less the ncu options, one
 * profiled step) under Nsight Compute, every mlc kernel (-k regex:^mlc_;
 * --nvtx so its report carries mlc's ranges), into a CSV that then goes to
 * --ncu-csv.  Returns -1 to go on, or the exit status. */
int mlc_cmd_profile_ncu(options *o, int argc, char **argv, char *csv, size_t csvn) {
  char ncu[1024], self[1024];
  if (!on_path("ncu", ncu, sizeof ncu)) {
    fprintf(stderr, "mlc: --ncu: Nsight Compute's `ncu` is not on PATH (it comes with the CUDA toolkit, e.g. "
                    "/usr/local/cuda/bin); or run it yourself and pass its CSV with --ncu-csv FILE:\n"
                    "  ncu --csv --page raw --metrics %s --clock-control none -k regex:^mlc_ --log-file FILE -- mlc profile ...\n",
            MLC_NCU_METRICS);
    return EXIT_USER;
  }
  ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
  if (k <= 0) { fprintf(stderr, "mlc: --ncu: cannot find this mlc's own path\n"); return EXIT_INTERNAL; }
  self[k] = 0;
  snprintf(csv, csvn, "%s/mlc-ncu-%d.csv", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
  const char **av = calloc((size_t)argc + 24, sizeof *av);
  if (!av) return EXIT_INTERNAL;
  int n = 0;
  /* --clock-control none: the GPU's own clocks, as in mlc's timed run (ncu
   * locks them to base by default, which moves every percentage) */
  const char *fixed[] = {ncu, "--csv", "--page", "raw", "--metrics", MLC_NCU_METRICS, "--clock-control", "none", "--nvtx",
                         "-k", "regex:^mlc_", "--log-file", csv, "--", self, "profile"};
  for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++) av[n++] = fixed[i];
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--ncu") || !strncmp(a, "--flush", 7)) continue; /* ncu empties the caches itself (getopt takes --flush for --flush-l2) */
    if (!strcmp(a, "--ncu-json") || !strcmp(a, "--trace") || !strcmp(a, "--roofline") || !strcmp(a, "--steps")) { i++; continue; }
    if (!strncmp(a, "--ncu-json=", 11) || !strncmp(a, "--trace=", 8) || !strncmp(a, "--roofline=", 11) || !strncmp(a, "--steps=", 8))
      continue;
    av[n++] = a;
  }
  av[n++] = "--steps";
  av[n++] = "2"; /* train_step: the warm-up step and one profiled; forward: two runs */
  fprintf(stderr, "mlc: --ncu: running the profile under %s (every kernel replayed per metric pass: slow)\n", ncu);
  pid_t pid = fork();
  if (pid == 0) {
    execv(ncu, (char *const *)av);
    _exit(127);
  }
  free(av);
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status)) {
    fprintf(stderr, "mlc: --ncu: %s failed (exit status %d); its log is in %s\n", ncu, WIFEXITED(status) ? WEXITSTATUS(status) : -1,
            csv);
    return EXIT_USER;
  }
  o->ncu_csv = csv;
  return -1;
}
