/* mlc: the command-line driver.
 *
 *   mlc compile FILE [options]     parse, lower, run the passes, emit
 *   mlc run|bench|train|profile FILE --target cpu [options]
 *   mlc run|bench|train|profile DIR/NAME.mlcplan [options]   a compiled plan, on its code's device
 *   mlc generate FILE --weights W --prompt TOKENS --max-new N   a decode block's text generation
 *   mlc calibrate --target cpu|cuda|spirv  measure and cache the roofline's ceilings (GPUs: calibrate.c)
 *   mlc devices [--target T]       list the devices of every runtime driver (cmd_devices.c)
 *   mlc --help | --version
 *
 * Exit codes (also in --help and docs/cli.md):
 *   0 success, 1 error in the model (diagnostics printed), 2 usage error,
 *   3 internal error (a bug in mlc), 4 not available (the target is not in this build, or what it needs is not on this machine).
 *
 * This file picks the command; each has a file of its own (driver/cli.h
 * lists them).
 */
#define _XOPEN_SOURCE 700 /* sigaltstack */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driver/cli.h"
#include "mlc_version.h"

static void on_crash(int sig) {
  static const char msg[] = "mlc: internal error: the compiler crashed. This is a bug in mlc; please report it.\n";
  if (sig != SIGABRT) { ssize_t r = write(2, msg, sizeof msg - 1); (void)r; }
  _exit(EXIT_INTERNAL);
}

/* compile, run, bench, train and profile: the options, the frontend and
 * the passes, then the target's build, written out or run. */
static int cmd_main(command cmd, const char *name, int argc, char **argv) {
  options o = {.cmd = cmd, .name = name, .warmup = -1, .flush_l2 = -1};
  int rc = mlc_cli_parse_args(&o, argc, argv);
  char ncu_csv[1100];
  if (rc < 0 && o.ncu) rc = mlc_cmd_profile_ncu(&o, argc, argv, ncu_csv, sizeof ncu_csv);
  if (rc < 0 && mlc_cli_is_plan(o.file)) { /* compiled already: no frontend, no target's build */
#if defined(MLC_HAVE_CPU) || defined(MLC_HAVE_CUDA) || defined(MLC_HAVE_SPIRV)
    rc = mlc_cmd_run_plan(&o);
#else
    fprintf(stderr, "mlc: this mlc has no runtime to run %s: it was built without a target\n", o.file);
    rc = EXIT_NO_TARGET;
#endif
  }
  if (rc < 0) {
    mlc_arena arena;
    mlc_arena_init(&arena);
    mlc_diag diag;
    mlc_diag_init(&diag, stderr);
    mlc_program prog;
    mlc_program_init(&prog, &arena);
    char *src = NULL;
    onnx_weights ow = {0};
    rc = mlc_cmd_frontend(&o, &prog, &diag, &src, &ow);
    if (rc < 0) {
      rc = EXIT_OK;
      const mlc_driver_target *t = mlc_driver_target_find(o.target);
      if (t && t->build) {
#if defined(MLC_HAVE_CPU) || defined(MLC_HAVE_CUDA) || defined(MLC_HAVE_SPIRV)
        rc = o.cmd == CMD_COMPILE ? mlc_cmd_compile(&o, &prog, &ow) : mlc_cmd_run(&o, &prog, &ow);
#endif
      } else if (t) {
        fprintf(stderr, "mlc: %s\n", t->not_built);
        rc = EXIT_NO_TARGET;
      } else if (o.target) {
        rc = mlc_cli_no_target(o.target);
      }
    }
    mlc_arena_free(&arena);
    free(src);
  }
  for (uint32_t i = 0; i < o.ndefines; i++) free((char *)o.defines[i].name);
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
    mlc_cli_usage(stderr);
    return EXIT_USAGE;
  }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
    mlc_cli_usage(stdout);
    return EXIT_OK;
  }
  if (!strcmp(cmd, "--version") || !strcmp(cmd, "-V")) {
    printf("mlc %s\n", MLC_VERSION);
    return EXIT_OK;
  }
  if (!strcmp(cmd, "compile")) return cmd_main(CMD_COMPILE, cmd, argc - 1, argv + 1);
  if (!strcmp(cmd, "run")) return cmd_main(CMD_RUN, cmd, argc - 1, argv + 1);
  if (!strcmp(cmd, "bench")) return cmd_main(CMD_BENCH, cmd, argc - 1, argv + 1);
  if (!strcmp(cmd, "train")) return cmd_main(CMD_TRAIN, cmd, argc - 1, argv + 1);
  if (!strcmp(cmd, "profile")) return cmd_main(CMD_PROFILE, cmd, argc - 1, argv + 1);
  if (!strcmp(cmd, "generate")) return cmd_main(CMD_GENERATE, cmd, argc - 1, argv + 1);
  if (!strcmp(cmd, "devices")) return mlc_cmd_devices(argc - 1, argv + 1);
  if (!strcmp(cmd, "calibrate")) return mlc_cmd_calibrate(argc - 1, argv + 1);
  return mlc_cli_usage_error("unknown command '%s' (commands: compile, run, bench, train, profile, generate, calibrate, devices)", cmd);
}
