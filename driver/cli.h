/* The driver's command line, shared by its commands: the options of a
 * model command (compile, run, bench, train, profile) and their parsing
 * (cli.c), the helpers that print a usage error or a status, and each
 * command's entry point, one file each:
 *
 *   main.c           the dispatcher: `mlc COMMAND ...` to the command below
 *   cli.c            --help, the options and their checks, the exit-status helpers
 *   cmd_compile.c    what every model command starts with (read the file, the .mdl
 *                    or ONNX frontend, the passes) and compile's artifact
 *   cmd_run.c        run, bench, train and generate: a session on the target's build
 *   generate.c       generate's loop: prefill, then one step per new token
 *   cmd_profile.c    the --profile table, --trace, --roofline, and profile --ncu
 *   cmd_calibrate.c  calibrate: the target's own (calibrate.c for GPUs), the CPU's here
 *   cmd_devices.c    devices: the targets' devices, as --device numbers them
 *
 * Functions that return "-1 to go on, or the exit status" let the caller
 * carry on with -1. */
#ifndef MLC_DRIVER_CLI_H
#define MLC_DRIVER_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "frontend/frontend.h"
#ifdef MLC_HAVE_ONNX
#include "frontend/onnx/onnx.h"
#endif
#include "driver/target.h"
#include "ir/ir.h"
#include "runtime/safetensors.h"
#include "runtime/session.h"
#include "runtime/status.h"

/* The exit statuses (driver/target.h), by their short names. */
enum {
  EXIT_OK = MLC_EXIT_OK, EXIT_USER = MLC_EXIT_USER, EXIT_USAGE = MLC_EXIT_USAGE, EXIT_INTERNAL = MLC_EXIT_INTERNAL,
  EXIT_NO_TARGET = MLC_EXIT_NO_TARGET,
};

#define MAX_DEFINES 256 /* -D and NAME=VALUE overrides */

/* The model commands; profile becomes bench or train once parsed. */
typedef enum { CMD_COMPILE, CMD_RUN, CMD_BENCH, CMD_TRAIN, CMD_PROFILE, CMD_GENERATE } command;

/* Everything the command line says. */
typedef struct {
  command cmd;
  const char *name; /* "compile", "run", "bench" */
  const char *target, *outdir, *emit, *print_after, *entry, *file, *weights;
  const char *data, *data_dtype, *save, *resume, *export_weights; /* train */
  const char *trace, *roofline;                   /* run, bench, train */
  bool ncu;                                       /* profile --ncu: run the step under Nsight Compute too */
  int flush_l2;                                   /* profile --flush-l2[=no]: 1 cold caches per kernel, 0 not, -1 unsaid */
  const char *ncu_csv, *ncu_json;                 /* profile: ncu's CSV to compare with; the comparison as JSON */
  const char *artifact_name, *cc;                 /* compile */
  const char *prompt, *logits_out;                /* generate: --prompt, --logits */
  long max_new, top_k;                            /* generate: --max-new, --top-k */
  double temperature;                             /* generate: --temperature (0: greedy) */
  long steps;
  const char *inputs[64], *outputs[64], *eval_inputs[64]; /* NAME=FILE */
  uint32_t ninputs, noutputs, neval_inputs;
  double eval_split;                  /* train: --eval-split */
  long eval_every, save_every;        /* train */
  long accum;                         /* --accum: micro-batches per step; 0: the train block's */
  bool shuffle;                       /* train: --shuffle SEED */
  unsigned long long shuffle_seed;
  bool time_passes, stats, profile, fsdp, device_set, no_train;
  char compile_only[64]; /* the first option given that says how to compile ("-D", "--f32-matmul") */
  mlc_options cg; /* the flags that change emitted code; f32_matmul 0: as the model says */
  long profile_warmup; /* mlc profile --entry train_step: steps before the profile starts */
  int threads, runs, warmup, device;
  unsigned long long seed;
  mlc_define defines[MAX_DEFINES];
  uint32_t ndefines;
} options;

/* An ONNX model's initializers: the values of its parameters. */
typedef mlc_onnx_weights onnx_weights;

/* --help, to o. */
void mlc_cli_usage(FILE *o);
/* Prints "mlc: " fmt (with arg) and the hint to --help; EXIT_USAGE. */
int mlc_cli_usage_error(const char *fmt, const char *arg);
/* A decimal integer from lo to hi, into *out; false if s is not one. */
bool mlc_cli_parse_int(const char *s, long lo, long hi, long *out);
/* The options of o->cmd after the command name (argv[0]); -1 to go on, or
 * the exit status (help printed, or a usage error).  o->defines' names are
 * the caller's to free. */
int mlc_cli_parse_args(options *o, int argc, char **argv);
/* Whether `file` names a compiled plan (FILE.mlcplan) rather than a model. */
bool mlc_cli_is_plan(const char *file);
/* Prints why `target` has no code generator; EXIT_NO_TARGET. */
int mlc_cli_no_target(const char *target);
/* Prints st's message and frees it; the exit status of its code (mlc_exit_status). */
int mlc_cli_fail_status(mlc_status st);

/* cmd_compile.c: reads o->file, parses and lowers it (or imports it, .onnx)
 * and runs the passes; -1 to go on, or the exit status (diagnostics
 * printed).  *src holds the file for the caller to free. */
int mlc_cmd_frontend(const options *o, mlc_program *prog, mlc_diag *diag, char **src, onnx_weights *weights);
/* cmd_compile.c: compile --target: builds the program for o->target and
 * writes the artifact; the exit status. */
int mlc_cmd_compile(const options *o, mlc_program *prog, const onnx_weights *ow);
#ifdef MLC_HAVE_ONNX
/* The safetensors dtype of an IR dtype (MLC_ST_DTYPE_COUNT: none). */
mlc_safetensors_dtype mlc_cli_st_dtype(mlc_dtype dt);
#endif
/* cmd_run.c: run, bench and train (profile runs as bench or train): builds
 * for o->target and runs a session on it; the exit status. */
int mlc_cmd_run(const options *o, mlc_program *prog, const onnx_weights *ow);
/* cmd_run.c: the same for a compiled plan, o->file (FILE.mlcplan), on the
 * device of the driver its code is for; the exit status. */
int mlc_cmd_run_plan(const options *o);
/* cmd_profile.c: after the runs, the --profile table, the --trace and
 * --roofline files and the comparison with ncu, for entry. */
mlc_status mlc_cmd_profile_outputs(const options *o, mlc_session *s, const char *entry);
/* cmd_profile.c: profile --ncu: the same profile under Nsight Compute, whose
 * CSV (in csv) becomes o->ncu_csv; -1 to go on, or the exit status. */
int mlc_cmd_profile_ncu(options *o, int argc, char **argv, char *csv, size_t csvn);
/* cmd_calibrate.c, cmd_devices.c: the commands, argv[0] their name. */
int mlc_cmd_calibrate(int argc, char **argv);
int mlc_cmd_devices(int argc, char **argv);

#endif
