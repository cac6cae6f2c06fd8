/* mlc: the command-line driver.
 *
 *   mlc compile FILE [options]     parse, lower, run the passes, emit
 *   mlc --help | --version
 *
 * Exit codes (also in --help and docs/cli.md):
 *   0 success, 1 error in the model (diagnostics printed), 2 usage error,
 *   3 internal error (a bug in mlc), 4 the target is not available in this build.
 */
#define _XOPEN_SOURCE 700 /* sigaltstack */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "frontend/frontend.h"
#include "mlc_version.h"
#include "passes/passes.h"

enum { EXIT_OK = 0, EXIT_USER = 1, EXIT_USAGE = 2, EXIT_INTERNAL = 3, EXIT_NO_TARGET = 4 };

#define MAX_SOURCE_BYTES (64u << 20)
#define MAX_DEFINES 256

static const struct {
  const char *name, *option, *what;
} targets[] = {
  {"cpu", "MLC_BACKEND_CPU", "native CPU code through the LLVM C API"},
  {"cuda", "MLC_BACKEND_CUDA", "CUDA C for one GPU"},
  {"cuda-nccl", "MLC_BACKEND_CUDA", "CUDA C with NCCL, FSDP-sharded over several GPUs"},
  {"spirv", "MLC_BACKEND_SPIRV", "SPIR-V for Vulkan compute"},
  {"metal", "MLC_BACKEND_METAL", "Metal Shading Language"},
};

static void usage(FILE *o) {
  fprintf(o,
          "usage: mlc compile FILE.mdl [options] [NAME=VALUE ...]\n"
          "       mlc --help | --version\n"
          "\n"
          "Compiles a model written in .mdl (see docs/language.md).\n"
          "\n"
          "compile options:\n"
          "  -t, --target T        cpu, cuda, cuda-nccl, spirv or metal; without it mlc\n"
          "                        checks the model and prints what --emit/--stats ask for\n"
          "  -o, --output DIR      where the artifact goes (needs --target)\n"
          "  -D NAME=VALUE         override a config value (repeatable); a bare NAME=VALUE\n"
          "                        argument after FILE does the same\n"
          "      --entry MODULE    compile this module instead of the train block's (or the last)\n"
          "      --emit ast|ir     print the AST or the final IR to standard output\n"
          "      --print-after P   print the IR after pass P (%s) or after all\n"
          "      --time-passes     print how long each phase took, to standard error\n"
          "      --stats           print parameters (state_dict names and shapes), op counts, FLOPs\n"
          "  -h, --help            this text\n"
          "  -V, --version         the version\n"
          "\n"
          "exit status: 0 success, 1 error in the model, 2 usage error, 3 internal error,\n"
          "             4 target not available in this build\n",
          mlc_pipeline_pass_names());
}

static int usage_error(const char *fmt, const char *arg) {
  fprintf(stderr, "mlc: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\nTry 'mlc --help'.\n");
  return EXIT_USAGE;
}

static void on_crash(int sig) {
  static const char msg[] = "mlc: internal error: the compiler crashed. This is a bug in mlc; please report it.\n";
  if (sig != SIGABRT) { ssize_t r = write(2, msg, sizeof msg - 1); (void)r; }
  _exit(EXIT_INTERNAL);
}

/* Reads the whole file; NULL with a message on failure. */
static char *read_file(const char *path, size_t *out_len) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "mlc: cannot open '%s': %s\n", path, strerror(errno));
    return NULL;
  }
  struct stat st;
  if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
    fprintf(stderr, "mlc: '%s' is a directory, not a model file\n", path);
    fclose(f);
    return NULL;
  }
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap + 1);
  for (;;) {
    if (!buf) { fprintf(stderr, "mlc: out of memory reading '%s'\n", path); fclose(f); return NULL; }
    size_t got = fread(buf + len, 1, cap - len, f);
    len += got;
    if (len > MAX_SOURCE_BYTES) {
      fprintf(stderr, "mlc: '%s' is larger than %u MB; that is not a model description\n", path, MAX_SOURCE_BYTES >> 20);
      free(buf);
      fclose(f);
      return NULL;
    }
    if (got == 0) break;
    if (len == cap) {
      cap *= 2;
      char *nb = realloc(buf, cap + 1);
      if (!nb) free(buf);
      buf = nb;
    }
  }
  if (ferror(f)) {
    fprintf(stderr, "mlc: cannot read '%s': %s\n", path, strerror(errno));
    free(buf);
    fclose(f);
    return NULL;
  }
  fclose(f);
  buf[len] = 0;
  *out_len = len;
  return buf;
}

static bool parse_define(const char *arg, mlc_define *out) {
  const char *eq = strchr(arg, '=');
  if (!eq || eq == arg) return false;
  for (const char *c = arg; c < eq; c++)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || *c == '_' || (c > arg && *c >= '0' && *c <= '9')))
      return false;
  out->name = strndup(arg, (size_t)(eq - arg));
  out->value = eq + 1;
  return out->name != NULL;
}

static int cmd_compile(int argc, char **argv) {
  enum { OPT_EMIT = 256, OPT_PRINT_AFTER, OPT_TIME, OPT_STATS, OPT_ENTRY };
  static const struct option opts[] = {
    {"target", required_argument, 0, 't'},    {"output", required_argument, 0, 'o'},
    {"emit", required_argument, 0, OPT_EMIT}, {"print-after", required_argument, 0, OPT_PRINT_AFTER},
    {"time-passes", no_argument, 0, OPT_TIME}, {"stats", no_argument, 0, OPT_STATS},
    {"entry", required_argument, 0, OPT_ENTRY}, {"help", no_argument, 0, 'h'},
    {0, 0, 0, 0},
  };
  const char *target = NULL, *outdir = NULL, *emit = NULL, *print_after = NULL, *entry = NULL, *file = NULL;
  bool time_passes = false, stats = false;
  mlc_define defines[MAX_DEFINES];
  uint32_t ndefines = 0;
  int rc = EXIT_OK;
  optind = 1;
  argv[0] = (char *)"mlc"; /* getopt's own messages start with argv[0], which is "compile" here */
  int c;
  while ((c = getopt_long(argc, argv, "+t:o:D:h", opts, NULL)) != -1 || optind < argc) {
    if (c == -1) { /* a positional argument: the file, or NAME=VALUE */
      const char *arg = argv[optind++];
      if (!file && !strchr(arg, '=')) file = arg;
      else if (ndefines < MAX_DEFINES && parse_define(arg, &defines[ndefines])) ndefines++;
      else if (file) { rc = usage_error("unexpected argument '%s' (only one model file is compiled at a time)", arg); goto out; }
      else { rc = usage_error("'%s' is not a NAME=VALUE override", arg); goto out; }
      continue;
    }
    switch (c) {
    case 't': target = optarg; break;
    case 'o': outdir = optarg; break;
    case 'D':
      if (ndefines >= MAX_DEFINES) { rc = usage_error("%s", "too many -D options"); goto out; }
      if (!parse_define(optarg, &defines[ndefines])) { rc = usage_error("-D %s: expected NAME=VALUE", optarg); goto out; }
      ndefines++;
      break;
    case OPT_EMIT: emit = optarg; break;
    case OPT_PRINT_AFTER: print_after = optarg; break;
    case OPT_TIME: time_passes = true; break;
    case OPT_STATS: stats = true; break;
    case OPT_ENTRY: entry = optarg; break;
    case 'h': usage(stdout); goto out;
    default: rc = EXIT_USAGE; fprintf(stderr, "Try 'mlc --help'.\n"); goto out;
    }
  }
  if (!file) { rc = usage_error("%s", "compile needs a model file"); goto out; }
  if (emit && strcmp(emit, "ast") && strcmp(emit, "ir")) { rc = usage_error("--emit %s: expected ast or ir", emit); goto out; }
  if (print_after && !mlc_pipeline_has_pass(print_after)) {
    fprintf(stderr, "mlc: --print-after %s: no such pass (passes: %s, or all)\n", print_after, mlc_pipeline_pass_names());
    rc = EXIT_USAGE;
    goto out;
  }
  if (target) {
    size_t i = 0;
    while (i < sizeof targets / sizeof *targets && strcmp(targets[i].name, target)) i++;
    if (i == sizeof targets / sizeof *targets) {
      rc = usage_error("--target %s: unknown target (targets: cpu, cuda, cuda-nccl, spirv, metal)", target);
      goto out;
    }
  }
  if (outdir && !target) { rc = usage_error("%s", "-o needs --target: without a target there is no artifact"); goto out; }
  for (uint32_t i = 0; i < ndefines; i++)
    for (uint32_t k = 0; k < i; k++)
      if (!strcmp(defines[i].name, defines[k].name)) { rc = usage_error("-D %s is given twice", defines[i].name); goto out; }

  double t0 = mlc_now();
  size_t len;
  char *src = read_file(file, &len);
  if (!src) { rc = EXIT_USER; goto out; }
  mlc_arena arena;
  mlc_arena_init(&arena);
  mlc_diag diag;
  mlc_diag_init(&diag, stderr);
  mlc_program prog;
  mlc_program_init(&prog, &arena);
  FILE *tf = time_passes ? stderr : NULL;
  double t1 = mlc_now();
  uint32_t fid = mlc_diag_add_source(&diag, file, src, len), ntoks;
  mlc_token *toks = mlc_lex(&arena, &diag, fid, src, len, &ntoks);
  /* After a lexing error the parser would only report its consequences. */
  mlc_ast_file *ast = diag.errors ? NULL : mlc_parse(&arena, &diag, toks, ntoks);
  double t2 = mlc_now();
  if (tf) fprintf(tf, "mlc: time per phase\n  %-12s %9.3f ms\n  %-12s %9.3f ms\n", "read", (t1 - t0) * 1e3, "parse", (t2 - t1) * 1e3);
  if (!diag.errors && emit && !strcmp(emit, "ast")) mlc_ast_print(stdout, ast);
  mlc_lower_options lo = {defines, ndefines, entry, 0};
  bool ok = !diag.errors && mlc_lower(&prog, &diag, ast, &lo);
  double t3 = mlc_now();
  if (tf) fprintf(tf, "  %-12s %9.3f ms\n", "lower", (t3 - t2) * 1e3);
  mlc_pipeline_options po = {print_after, stdout, tf};
  ok = ok && mlc_pipeline_run(&prog, &diag, &po);
  if (tf) fprintf(tf, "  %-12s %9.3f ms\n", "total", (mlc_now() - t0) * 1e3);
  if (ok) {
    if (emit && !strcmp(emit, "ir")) mlc_print_program(stdout, &prog);
    if (stats) mlc_print_stats(stdout, &prog);
    if (target) {
      fprintf(stderr, "mlc: target '%s' is not built into this mlc yet: its code generator does not exist "
              "(the model was checked; no artifact was written)\n", target);
      rc = EXIT_NO_TARGET;
    }
  } else {
    mlc_diag_summary(&diag);
    rc = EXIT_USER;
  }
  mlc_arena_free(&arena);
  free(src);
out:
  for (uint32_t i = 0; i < ndefines; i++) free((char *)defines[i].name);
  return rc;
}

int main(int argc, char **argv) {
  /* The crash handler runs on a stack of its own, so that a stack overflow
   * still ends with the internal-error status and message. */
  static char altstack[64 * 1024];
  stack_t ss = {.ss_sp = altstack, .ss_size = sizeof altstack};
  sigaltstack(&ss, NULL);
  struct sigaction sa = {.sa_handler = on_crash, .sa_flags = SA_ONSTACK};
  sigemptyset(&sa.sa_mask);
  int sigs[] = {SIGABRT, SIGSEGV, SIGBUS, SIGFPE};
  for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) sigaction(sigs[i], &sa, NULL);
  if (argc < 2) {
    usage(stderr);
    return EXIT_USAGE;
  }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
    usage(stdout);
    return EXIT_OK;
  }
  if (!strcmp(cmd, "--version") || !strcmp(cmd, "-V")) {
    printf("mlc %s\n", MLC_VERSION);
    return EXIT_OK;
  }
  if (!strcmp(cmd, "compile")) return cmd_compile(argc - 1, argv + 1);
  if (!strcmp(cmd, "run") || !strcmp(cmd, "train") || !strcmp(cmd, "bench")) {
    fprintf(stderr, "mlc: '%s' needs a runtime target, and none is built into this mlc yet\n", cmd);
    return EXIT_NO_TARGET;
  }
  return usage_error("unknown command '%s' (commands: compile)", cmd);
}
