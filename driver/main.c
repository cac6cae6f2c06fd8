/* mlc: the command-line driver.
 *
 *   mlc compile FILE [options]     parse, lower, run the passes, emit
 *   mlc run|bench|train FILE --target cpu [options]
 *   mlc calibrate --target cpu|cuda|spirv  measure and cache the roofline's ceilings (GPUs: calibrate.c)
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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <limits.h>
#include <math.h>

#include "frontend/frontend.h"
#ifdef MLC_HAVE_ONNX
#include "frontend/onnx/onnx.h"
#endif
#include "mlc_version.h"
#include "passes/passes.h"
#include "runtime/status.h"
#include "driver/bundle.h"
#include "driver/train.h"
#include "runtime/plan.h"
#include "runtime/ncu.h"
#include "runtime/profile.h"
#include "runtime/dist/bootstrap.h"
#include "runtime/session.h"
#include "driver/calibrate.h"
#include "driver/target.h"
#ifdef MLC_HAVE_CPU
#include "driver/target_cpu.h"
#include "runtime/cpu/threadpool.h"
#endif

enum {
  EXIT_OK = MLC_EXIT_OK, EXIT_USER = MLC_EXIT_USER, EXIT_USAGE = MLC_EXIT_USAGE, EXIT_INTERNAL = MLC_EXIT_INTERNAL,
  EXIT_NO_TARGET = MLC_EXIT_NO_TARGET,
};

#define MAX_SOURCE_BYTES (64u << 20)
#define MAX_ONNX_BYTES (2040u << 20) /* protobuf's limit is 2 GiB */
#define MAX_DEFINES 256

/* --help: the target lists come from the registry (driver/target.c). */
static void usage(FILE *o) {
  char run[128], bench[128], train[128], profile[128], devices[128], all[128];
  unsigned nt;
  const mlc_driver_target *ts = mlc_driver_targets(&nt);
  fprintf(o,
          "usage: mlc compile FILE.mdl [options] [NAME=VALUE ...]\n"
          "       mlc run FILE.mdl --target %s [--weights W] --input NAME=FILE ... [options]\n"
          "       mlc bench FILE.mdl --target %s [--runs N] [options]\n"
          "       mlc train FILE.mdl --target %s --steps N [--data TOKENS | --input NAME=FILE ...] [--weights W] [--save CKPT] [--resume CKPT]\n"
          "       mlc profile FILE.mdl --target %s [--entry forward|train_step] [--steps N] [--trace F] [--roofline F]\n"
          "                    [--ncu | --ncu-csv F] [--ncu-json F]\n"
          "       mlc calibrate --target cpu [--threads N] | --target cuda|spirv [--device N]\n"
          "       mlc devices --target %s     list the Vulkan devices that --device N picks from\n"
          "       mlc --help | --version\n"
          "\n"
          "Compiles a model written in .mdl (see docs/language.md and docs/cli.md).\n"
          "\n"
          "common options:\n"
          "  -t, --target T        %s (cpu, cuda, spirv and metal are built today;\n"
          "                        metal runs on Apple platforms only)\n"
          "  -D NAME=VALUE         override a config value (repeatable); a bare NAME=VALUE\n"
          "                        argument after FILE does the same\n"
          "      --entry MODULE    compile this module instead of the train block's (or the last)\n"
          "      --no-train        (compile, run, bench) the forward alone: the train block's model and\n"
          "                        config, but no train step, no optimizer state (a smaller artifact)\n"
          "      --time-passes     print how long each phase took, to standard error\n"
          "      --fsdp            shard the train block's fsdp(...) units across ranks (implied by\n"
          "                        --target cuda-nccl, and by a launcher that starts several ranks)\n"
          "      --f32-matmul M    how f32 matrix products run on tensor cores (cuda): tf32x3 (or 3xtf32;\n"
          "                        three TF32 products, about f32's accuracy; the default), ieee (f32\n"
          "                        FMAs, no tensor cores) or tf32 (one TF32 product); overrides the\n"
          "                        train block's precision(f32_matmul=...)\n"
          "      --accum N         (compile, train, profile) gradient accumulation: each step takes N\n"
          "                        micro-batches of the declared batch and updates with the mean of their\n"
          "                        gradients; overrides the train block's accum = ...\n"
          "      --memory-budget B the bytes a training session may hold (14GB, 12.5GiB, 9e9): the\n"
          "                        compiler recomputes cheap activations (casts, norms, SiLU) in the\n"
          "                        backward until the plan fits, or says the smallest it can reach;\n"
          "                        overrides the train block's memory_budget = ...; --stats lists them\n",
          mlc_driver_target_names(MLC_CMD_RUN, "|", "|", run, sizeof run),
          mlc_driver_target_names(MLC_CMD_BENCH, "|", "|", bench, sizeof bench),
          mlc_driver_target_names(MLC_CMD_TRAIN, "|", "|", train, sizeof train),
          mlc_driver_target_names(MLC_CMD_PROFILE, "|", "|", profile, sizeof profile),
          mlc_driver_target_names(MLC_CMD_DEVICES, "|", "|", devices, sizeof devices),
          mlc_driver_target_names(0, ", ", " or ", all, sizeof all));
  for (unsigned i = 0; i < nt; i++)
    if (ts[i].options_help) fputs(ts[i].options_help, o);
  fprintf(o,
          "  -h, --help            this text\n"
          "  -V, --version         the version\n"
          "compile:\n"
          "  -o, --output DIR      where the artifact goes (default out/; needs --target): the C API,\n"
          "                        lib<name>.a with the runtime inside, <name>.cmake and <name>.pc\n"
          "      --name NAME       the artifact's name: its files, symbols (NAME_create...) and CMake\n"
          "                        target (default: the model's, in lower case), so that several\n"
          "                        models link into one application\n"
          "      --cc CC           the C compiler that compiles the artifact's glue (default cc)\n"
          "      --emit ast|ir     print the AST or the final IR to standard output\n"
          "      --print-after P   print the IR after pass P (%s) or after all\n"
          "      --stats           print parameters (state_dict names and shapes), op counts, FLOPs\n"
          "                        and the planned memory\n"
          "run and bench (forward):\n"
          "      --weights FILE    safetensors with PyTorch's names; default: PyTorch's init, --seed\n"
          "      --input NAME=FILE raw little-endian data for an input (run needs every input)\n"
          "  -o, --output NAME=FILE  (run) write an output's raw data\n"
          "      --seed N          (run) seed of the initial weights without --weights (default 0)\n"
          "      --threads N       (cpu) worker threads, 0 for one per CPU (default)\n"
          "      --device N        (cuda, spirv) which GPU (default 0; spirv: as mlc devices lists them)\n"
          "      --profile         print per-kernel time, GFLOP/s, GB/s, roofline bound and a hint\n"
          "      --trace FILE      write a Chrome trace (JSON; Perfetto opens it) of every step\n"
          "      --roofline FILE   write an SVG roofline of the kernels (ceilings: mlc calibrate)\n"
          "      --runs N, --warmup N  (bench) timed runs (default 10) after warm-up runs (default 3)\n"
          "train (the train block's step: forward, backward, optimizer):\n"
          "      --steps N         optimizer steps to run; the loss of each is printed\n"
          "      --data FILE       tokens: llm.c's .bin format, or a flat file of u16 (default) or\n"
          "                        i32 (--data-dtype i32) tokens\n"
          "      --input NAME=FILE the whole dataset of an input, rows along axis 0: .npy, or safetensors\n"
          "                        (the tensor NAME, or the only one); memory-mapped; step k takes batch k,\n"
          "                        wrapping around; every input needs one. Without --data or --input,\n"
          "                        one synthetic batch of random numbers (with a warning)\n"
          "      --shuffle SEED    (--input) the rows in a new order each epoch, from SEED and the epoch\n"
          "      --eval-split F    (--input) hold out the last share F of the rows (0 < F < 1)\n"
          "      --eval-input NAME=FILE  (--input) held-out data, one per input, as --input\n"
          "      --eval-every N    the validation loss (mean over the held-out batches) every N steps;\n"
          "                        with held-out data it is printed at the end in any case\n"
          "      --save CKPT       write a checkpoint (weights, optimizer state, step) at the end, and\n"
          "                        on SIGINT or SIGTERM after the step under way (exit status 128+signal)\n"
          "      --save-every N    (--save) also every N steps\n"
          "      --resume CKPT     start from a checkpoint (a sharded one: with as many ranks, or with\n"
          "                        one, which gathers every rank's shard)\n"
          "      --export FILE     write the weights at the end as safetensors with PyTorch's names\n"
          "                        (--steps 0 --resume CKPT --export W turns a checkpoint into weights)\n"
          "      --weights, --seed, --threads, --device, --profile, --trace, --roofline  as for run\n"
          "profile: the --profile table of an entry point (--entry forward, the default, or\n"
          "         train_step) over --steps N runs (default 10) after --warmup N (default 3 runs of\n"
          "         forward, 1 train step, which trains but is not timed), as bench or train would run it;\n"
          "         each kernel is judged against the roof of the unit it runs on (fp32, bf16, tf32, fp8)\n"
          "         and HBM: memory, compute, or latency (below 50%% of both roofs)\n"
          "      --ncu             (cuda) also run the step under Nsight Compute (ncu on PATH) and put its\n"
          "                        verdict (SM and memory throughput) beside mlc's, with the agreement\n"
          "      --ncu-csv FILE    the same from a CSV of `ncu --csv --page raw` (see docs/cli.md)\n"
          "      --ncu-json FILE   write that comparison as JSON\n"
          "calibrate: measure this CPU's memory bandwidth and f32 GEMM peak, cache them in\n"
          "           ~/.cache/mlc/ceilings-cpu.json for --profile and --roofline; --target cuda|spirv:\n"
          "           device N's bandwidth and bf16 GEMM peak (mlc's own kernels), in ceilings-cuda.json\n"
          "\n"
          "exit status: 0 success, 1 error in the model or its data, 2 usage error,\n"
          "             3 internal error, 4 target not available in this build,\n"
          "             128+N train stopped by signal N (130 SIGINT, 143 SIGTERM)\n",
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
static char *read_file(const char *path, size_t max, size_t *out_len) {
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
    if (len > max) {
      fprintf(stderr, "mlc: '%s' is larger than %zu MB; that is not a model description\n", path, max >> 20);
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

typedef enum { CMD_COMPILE, CMD_RUN, CMD_BENCH, CMD_TRAIN, CMD_PROFILE } command;

/* Everything the command line says. */
typedef struct {
  command cmd;
  const char *name; /* "compile", "run", "bench" */
  const char *target, *outdir, *emit, *print_after, *entry, *file, *weights;
  const char *data, *data_dtype, *save, *resume, *export_weights; /* train */
  const char *trace, *roofline;                   /* run, bench, train */
  bool ncu;                                       /* profile --ncu: run the step under Nsight Compute too */
  const char *ncu_csv, *ncu_json;                 /* profile: ncu's CSV to compare with; the comparison as JSON */
  const char *artifact_name, *cc;                 /* compile */
  long steps;
  const char *inputs[64], *outputs[64], *eval_inputs[64]; /* NAME=FILE */
  uint32_t ninputs, noutputs, neval_inputs;
  double eval_split;                  /* train: --eval-split */
  long eval_every, save_every;        /* train */
  long accum;                         /* --accum: micro-batches per step; 0: the train block's */
  bool shuffle;                       /* train: --shuffle SEED */
  unsigned long long shuffle_seed;
  bool time_passes, stats, profile, fsdp, device_set, no_train;
  mlc_options cg; /* the flags that change emitted code; f32_matmul 0: as the model says */
  long profile_warmup; /* mlc profile --entry train_step: steps before the profile starts */
  int threads, runs, warmup, device;
  unsigned long long seed;
  mlc_define defines[MAX_DEFINES];
  uint32_t ndefines;
} options;

enum {
  OPT_EMIT = 256, OPT_NO_TRAIN, OPT_PRINT_AFTER, OPT_TIME, OPT_STATS, OPT_ENTRY, OPT_WEIGHTS, OPT_INPUT, OPT_PROFILE, OPT_THREADS,
  OPT_SEED, OPT_RUNS, OPT_WARMUP, OPT_STEPS, OPT_DATA, OPT_DATA_DTYPE, OPT_SAVE, OPT_RESUME, OPT_TRACE, OPT_ROOFLINE,
  OPT_DEVICE, OPT_FSDP, OPT_EXPORT, OPT_NAME, OPT_CC, OPT_NCU, OPT_NCU_CSV, OPT_NCU_JSON,
  OPT_EVAL_INPUT, OPT_EVAL_SPLIT, OPT_EVAL_EVERY, OPT_SHUFFLE, OPT_SAVE_EVERY, OPT_ACCUM,
  OPT_CODEGEN = MLC_OPT_CODEGEN, /* the options of emitted code, the targets' own among them */
};

/* Which options each command takes: a letter or OPT_ value per entry. */
static bool takes(command cmd, int opt) {
  switch (opt) {
  case 't': case 'D': case 'h': case OPT_ENTRY: case OPT_TIME: case OPT_FSDP: case OPT_CODEGEN: return true;
  case OPT_EMIT: case OPT_PRINT_AFTER: case OPT_STATS: case OPT_NAME: case OPT_CC: return cmd == CMD_COMPILE;
  case OPT_NO_TRAIN: return cmd == CMD_COMPILE || cmd == CMD_RUN || cmd == CMD_BENCH;
  case OPT_ACCUM: return cmd == CMD_COMPILE || cmd == CMD_TRAIN || cmd == CMD_PROFILE;
  case 'o': return cmd == CMD_COMPILE || cmd == CMD_RUN;
  case OPT_INPUT: return cmd == CMD_RUN || cmd == CMD_TRAIN;
  case OPT_EVAL_INPUT: case OPT_EVAL_SPLIT: case OPT_EVAL_EVERY: case OPT_SHUFFLE: case OPT_SAVE_EVERY:
    return cmd == CMD_TRAIN;
  case OPT_SEED: return cmd == CMD_RUN || cmd == CMD_TRAIN || cmd == CMD_PROFILE;
  case OPT_STEPS: case OPT_DATA: case OPT_DATA_DTYPE: return cmd == CMD_TRAIN || cmd == CMD_PROFILE;
  case OPT_SAVE: case OPT_RESUME: case OPT_EXPORT: return cmd == CMD_TRAIN;
  case OPT_WEIGHTS: case OPT_PROFILE: case OPT_THREADS: case OPT_TRACE: case OPT_ROOFLINE: case OPT_DEVICE:
    return cmd != CMD_COMPILE;
  case OPT_RUNS: case OPT_WARMUP: return cmd == CMD_BENCH || cmd == CMD_PROFILE;
  case OPT_NCU: case OPT_NCU_CSV: case OPT_NCU_JSON: return cmd == CMD_PROFILE;
  default: return false;
  }
}

static bool parse_int(const char *s, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (!*s || *end || errno || v < lo || v > hi) return false;
  *out = v;
  return true;
}

/* [A-Za-z_][A-Za-z0-9_]*, at most 64 characters: an artifact's name. */
static bool c_identifier(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > 64 || (*s >= '0' && *s <= '9')) return false;
  for (; *s; s++)
    if (!(*s == '_' || (*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z'))) return false;
  return true;
}

/* Returns -1 to go on, or the exit status. */
static int parse_args(options *o, int argc, char **argv) {
  static const struct option common[] = {
    {"target", required_argument, 0, 't'},      {"output", required_argument, 0, 'o'},
    {"emit", required_argument, 0, OPT_EMIT},   {"print-after", required_argument, 0, OPT_PRINT_AFTER},
    {"no-train", no_argument, 0, OPT_NO_TRAIN}, {"time-passes", no_argument, 0, OPT_TIME},  {"stats", no_argument, 0, OPT_STATS},
    {"entry", required_argument, 0, OPT_ENTRY}, {"weights", required_argument, 0, OPT_WEIGHTS},
    {"input", required_argument, 0, OPT_INPUT}, {"profile", no_argument, 0, OPT_PROFILE},
    {"threads", required_argument, 0, OPT_THREADS}, {"seed", required_argument, 0, OPT_SEED},
    {"runs", required_argument, 0, OPT_RUNS},   {"warmup", required_argument, 0, OPT_WARMUP},
    {"steps", required_argument, 0, OPT_STEPS}, {"data", required_argument, 0, OPT_DATA},
    {"data-dtype", required_argument, 0, OPT_DATA_DTYPE}, {"save", required_argument, 0, OPT_SAVE},
    {"resume", required_argument, 0, OPT_RESUME},
    {"trace", required_argument, 0, OPT_TRACE}, {"roofline", required_argument, 0, OPT_ROOFLINE},
    {"device", required_argument, 0, OPT_DEVICE}, {"fsdp", no_argument, 0, OPT_FSDP},
    {"export", required_argument, 0, OPT_EXPORT},
    {"eval-input", required_argument, 0, OPT_EVAL_INPUT}, {"eval-split", required_argument, 0, OPT_EVAL_SPLIT},
    {"eval-every", required_argument, 0, OPT_EVAL_EVERY}, {"shuffle", required_argument, 0, OPT_SHUFFLE},
    {"save-every", required_argument, 0, OPT_SAVE_EVERY}, {"accum", required_argument, 0, OPT_ACCUM},
    {"name", required_argument, 0, OPT_NAME},   {"cc", required_argument, 0, OPT_CC},
    {"ncu", no_argument, 0, OPT_NCU}, {"ncu-csv", required_argument, 0, OPT_NCU_CSV},
    {"ncu-json", required_argument, 0, OPT_NCU_JSON},
    /* the options of emitted code (mlc_options_set) */
    {"f32-matmul", required_argument, 0, OPT_CODEGEN}, {"memory-budget", required_argument, 0, OPT_CODEGEN},
    {"help", no_argument, 0, 'h'},
  };
  /* the common options, then each target's own (the registry's) */
  struct option opts[sizeof common / sizeof *common + 32];
  size_t nopts = 0;
  for (; nopts < sizeof common / sizeof *common; nopts++) opts[nopts] = common[nopts];
  unsigned nt;
  const mlc_driver_target *ts = mlc_driver_targets(&nt);
  for (unsigned t = 0; t < nt; t++)
    for (const struct option *x = ts[t].options; x && x->name && nopts + 1 < sizeof opts / sizeof *opts; x++) opts[nopts++] = *x;
  opts[nopts] = (struct option){0, 0, 0, 0};
  optind = 1;
  argv[0] = (char *)"mlc"; /* getopt's own messages start with argv[0], which is the command here */
  int c, idx;
  long v;
  while ((c = getopt_long(argc, argv, "+t:o:D:h", opts, &idx)) != -1 || optind < argc) {
    if (c == -1) { /* a positional argument: the file, or NAME=VALUE */
      const char *arg = argv[optind++];
      if (!o->file && !strchr(arg, '=')) o->file = arg;
      else if (o->ndefines < MAX_DEFINES && parse_define(arg, &o->defines[o->ndefines])) o->ndefines++;
      else if (o->file) return usage_error("unexpected argument '%s' (only one model file is compiled at a time)", arg);
      else return usage_error("'%s' is not a NAME=VALUE override", arg);
      continue;
    }
    if (c == '?') { fprintf(stderr, "Try 'mlc --help'.\n"); return EXIT_USAGE; }
    if (!takes(o->cmd, c)) {
      fprintf(stderr, "mlc: %s does not take %s%s\nTry 'mlc --help'.\n", o->name, c < 256 ? "-" : "--",
              c < 256 ? (char[2]){(char)c, 0} : opts[idx].name);
      return EXIT_USAGE;
    }
    switch (c) {
    case 't': o->target = optarg; break;
    case 'o':
      if (o->cmd == CMD_COMPILE) o->outdir = optarg;
      else if (o->noutputs < 64) o->outputs[o->noutputs++] = optarg;
      break;
    case 'D':
      if (o->ndefines >= MAX_DEFINES) return usage_error("%s", "too many -D options");
      if (!parse_define(optarg, &o->defines[o->ndefines])) return usage_error("-D %s: expected NAME=VALUE", optarg);
      o->ndefines++;
      break;
    case OPT_EMIT: o->emit = optarg; break;
    case OPT_NAME:
      if (!c_identifier(optarg)) return usage_error("--name %s: expected a C identifier of at most 64 characters", optarg);
      o->artifact_name = optarg;
      break;
    case OPT_CC: o->cc = optarg; break;
    case OPT_NCU: o->ncu = true; break;
    case OPT_NCU_CSV: o->ncu_csv = optarg; break;
    case OPT_NCU_JSON: o->ncu_json = optarg; break;
    case OPT_PRINT_AFTER: o->print_after = optarg; break;
    case OPT_TIME: o->time_passes = true; break;
    case OPT_NO_TRAIN: o->no_train = true; break;
    case OPT_STATS: o->stats = true; break;
    case OPT_ENTRY: o->entry = optarg; break;
    case OPT_WEIGHTS: o->weights = optarg; break;
    case OPT_INPUT:
      if (o->ninputs == 64) return usage_error("%s", "more than 64 --input options");
      o->inputs[o->ninputs++] = optarg;
      break;
    case OPT_EVAL_INPUT:
      if (o->neval_inputs == 64) return usage_error("%s", "more than 64 --eval-input options");
      o->eval_inputs[o->neval_inputs++] = optarg;
      break;
    case OPT_EVAL_SPLIT: {
      char *end;
      errno = 0;
      o->eval_split = strtod(optarg, &end);
      if (!*optarg || *end || errno || !(o->eval_split > 0 && o->eval_split < 1))
        return usage_error("--eval-split %s: expected the share of the rows to hold out, between 0 and 1 (0.2)", optarg);
      break;
    }
    case OPT_EVAL_EVERY:
      if (!parse_int(optarg, 1, 100000000, &v)) return usage_error("--eval-every %s: expected a number of steps", optarg);
      o->eval_every = v;
      break;
    case OPT_SAVE_EVERY:
      if (!parse_int(optarg, 1, 100000000, &v)) return usage_error("--save-every %s: expected a number of steps", optarg);
      o->save_every = v;
      break;
    case OPT_ACCUM:
      if (!parse_int(optarg, 1, 65536, &v)) return usage_error("--accum %s: expected a number of micro-batches, 1 to 65536", optarg);
      o->accum = v;
      break;
    case OPT_SHUFFLE:
      if (!parse_int(optarg, 0, LONG_MAX, &v)) return usage_error("--shuffle %s: expected a seed (a non-negative integer)", optarg);
      o->shuffle = true;
      o->shuffle_seed = (unsigned long long)v;
      break;
    case OPT_PROFILE: o->profile = true; break;
    case OPT_FSDP: o->fsdp = true; break;
    case OPT_THREADS:
      if (!parse_int(optarg, 0, 1024, &v)) return usage_error("--threads %s: expected a number from 0 (all CPUs) to 1024", optarg);
      o->threads = (int)v;
      break;
    case OPT_DEVICE:
      if (!parse_int(optarg, 0, 1023, &v)) return usage_error("--device %s: expected a GPU number (0, 1, ...)", optarg);
      o->device = (int)v;
      o->device_set = true;
      break;
    case OPT_SEED:
      if (!parse_int(optarg, 0, LONG_MAX, &v)) return usage_error("--seed %s: expected a non-negative integer", optarg);
      o->seed = (unsigned long long)v;
      break;
    case OPT_RUNS:
      if (!parse_int(optarg, 1, 100000, &v)) return usage_error("--runs %s: expected a number from 1 to 100000", optarg);
      o->runs = (int)v;
      break;
    case OPT_WARMUP:
      if (!parse_int(optarg, 0, 100000, &v)) return usage_error("--warmup %s: expected a number from 0 to 100000", optarg);
      o->warmup = (int)v;
      break;
    case OPT_STEPS:
      if (!parse_int(optarg, 0, 100000000, &v)) return usage_error("--steps %s: expected a number of steps", optarg);
      o->steps = v;
      break;
    case OPT_DATA: o->data = optarg; break;
    case OPT_DATA_DTYPE:
      if (strcmp(optarg, "u16") && strcmp(optarg, "i32")) return usage_error("--data-dtype %s: expected u16 or i32", optarg);
      o->data_dtype = optarg;
      break;
    case OPT_SAVE: o->save = optarg; break;
    case OPT_CODEGEN: {
      char err[256];
      if (!mlc_options_set(&o->cg, opts[idx].name, optarg, err, sizeof err)) return usage_error("%s", err);
      break;
    }
    case OPT_EXPORT: o->export_weights = optarg; break;
    case OPT_RESUME: o->resume = optarg; break;
    case OPT_TRACE: o->trace = optarg; break;
    case OPT_ROOFLINE: o->roofline = optarg; break;
    case 'h': usage(stdout); return EXIT_OK;
    }
  }
  if (o->cmd == CMD_TRAIN && o->steps <= 0 && !o->save && !o->export_weights) return usage_error("%s", "train needs --steps N");
  if (o->cmd == CMD_TRAIN) {
    if (o->data && o->ninputs) return usage_error("%s", "--data and --input are two ways to give the data: use one");
    if ((o->shuffle || o->eval_split > 0 || o->neval_inputs) && !o->ninputs)
      return usage_error("%s", o->shuffle ? "--shuffle needs --input" : o->neval_inputs ? "--eval-input needs --input"
                                                                                      : "--eval-split needs --input");
    if (o->eval_split > 0 && o->neval_inputs) return usage_error("%s", "--eval-split and --eval-input both give held-out data: use one");
    if (o->eval_every && !o->eval_split && !o->neval_inputs)
      return usage_error("%s", "--eval-every needs held-out data: --eval-split FRACTION or --eval-input NAME=FILE");
    if (o->save_every && !o->save) return usage_error("%s", "--save-every needs --save CKPT (the file it writes)");
  }
  if (o->cmd == CMD_PROFILE) {
    /* profile: --entry names the entry point to time (forward, or train /
     * train_step); it then runs as bench or train with --profile. */
    const char *ep = o->entry ? o->entry : "forward";
    o->entry = NULL;
    const mlc_driver_target *t = mlc_driver_target_find(o->target);
    if ((o->ncu || o->ncu_csv) && (!t || !t->ncu))
      return usage_error("%s", "--ncu and --ncu-csv compare CUDA kernels: they need --target cuda");
    if (o->ncu && o->ncu_csv) return usage_error("%s", "--ncu runs ncu itself; --ncu-csv reads its CSV instead: give one");
    if (o->ncu_json && !o->ncu && !o->ncu_csv) return usage_error("%s", "--ncu-json needs --ncu or --ncu-csv");
    o->profile = true;
    if (!strcmp(ep, "train") || !strcmp(ep, "train_step")) {
      o->cmd = CMD_TRAIN;
      if (o->steps <= 0) o->steps = 10;
      o->profile_warmup = o->warmup >= 0 ? o->warmup : 1; /* the first step loads and warms up */
    } else if (!strcmp(ep, "forward")) {
      o->cmd = CMD_BENCH;
      if (o->steps > 0) o->runs = (int)o->steps;
    } else {
      return usage_error("profile --entry %s: expected forward or train_step", ep);
    }
  }
  if (!o->file) return usage_error("%s needs a model file", o->name);
  if (o->emit && strcmp(o->emit, "ast") && strcmp(o->emit, "ir")) return usage_error("--emit %s: expected ast or ir", o->emit);
  if (o->print_after && !mlc_pipeline_has_pass(o->print_after)) {
    fprintf(stderr, "mlc: --print-after %s: no such pass (passes: %s, or all)\n", o->print_after, mlc_pipeline_pass_names());
    return EXIT_USAGE;
  }
  if (o->target && !mlc_driver_target_find(o->target)) {
    char names[128];
    fprintf(stderr, "mlc: --target %s: unknown target (targets: %s)\nTry 'mlc --help'.\n", o->target,
            mlc_driver_target_names(0, ", ", ", ", names, sizeof names));
    return EXIT_USAGE;
  }
  if (o->cmd == CMD_COMPILE && o->outdir && !o->target)
    return usage_error("%s", "-o needs --target: without a target there is no artifact");
  if (o->cmd != CMD_COMPILE && !o->target) return usage_error("%s needs --target (cpu or cuda)", o->name);
  for (uint32_t i = 0; i < o->ninputs + o->noutputs + o->neval_inputs; i++) {
    bool in = i < o->ninputs, out = !in && i < o->ninputs + o->noutputs;
    const char *a = in ? o->inputs[i] : out ? o->outputs[i - o->ninputs] : o->eval_inputs[i - o->ninputs - o->noutputs];
    const char *eq = strchr(a, '=');
    if (!eq || eq == a || !eq[1])
      return usage_error(in ? "--input %s: expected NAME=FILE" : out ? "--output %s: expected NAME=FILE"
                                                                     : "--eval-input %s: expected NAME=FILE", a);
  }
  for (uint32_t i = 0; i < o->ndefines; i++)
    for (uint32_t k = 0; k < i; k++)
      if (!strcmp(o->defines[i].name, o->defines[k].name)) return usage_error("-D %s is given twice", o->defines[i].name);
  return -1;
}

/* An ONNX model's initializers: the values of its parameters. */
#ifdef MLC_HAVE_ONNX
typedef mlc_onnx_weights onnx_weights;
#else
typedef struct { uint32_t n; } onnx_weights;
#endif

/* Whether the fsdp pass shards the train block's units: always for a
 * target whose descriptor says so (cuda-nccl); on the CPU with --fsdp, or
 * when a launcher started several ranks (the artifact itself runs at any
 * world size). */
static bool sharded(const options *o) {
  const mlc_target *t = mlc_target_find(o->target);
  if (o->fsdp || (t && t->sharded)) return true;
  mlc_dist_env e;
  mlc_status st = mlc_dist_env_read(&e);
  if (st) { mlc_status_free(st); return false; }
  return e.world > 1;
}

/* Reads, parses, lowers and runs the passes.  Returns -1 to go on, or the
 * exit status (diagnostics printed). */
static int passes(const options *o, mlc_program *prog, mlc_diag *diag, bool ok, double t0);

static bool is_onnx(const char *path) {
  size_t n = strlen(path);
  return n >= 5 && !strcmp(path + n - 5, ".onnx");
}

/* model.onnx: frontend/onnx/ instead of the .mdl frontend; the passes are the same. */
static int onnx_frontend(const options *o, mlc_program *prog, mlc_diag *diag, const char *src, size_t len, double t0,
                         double t1, onnx_weights *weights) {
  if (o->entry || (o->emit && !strcmp(o->emit, "ast"))) {
    fprintf(stderr, "mlc: %s does not apply to an ONNX model\n", o->entry ? "--entry" : "--emit ast");
    return EXIT_USAGE;
  }
#ifdef MLC_HAVE_ONNX
  bool ok = mlc_onnx_import(prog, diag, o->file, (const uint8_t *)src, len, o->defines, o->ndefines, weights);
  mlc_options_apply(prog, &o->cg);
  if (o->time_passes) fprintf(stderr, "mlc: time per phase\n  %-12s %9.3f ms\n  %-12s %9.3f ms\n", "read",
                              (t1 - t0) * 1e3, "import", (mlc_now() - t1) * 1e3);
  return passes(o, prog, diag, ok, t0);
#else
  (void)prog, (void)diag, (void)src, (void)len, (void)t0, (void)t1, (void)weights;
  fprintf(stderr, "mlc: this mlc was built without the ONNX frontend (configure with -DMLC_FRONTEND_ONNX=ON, which "
          "needs libprotobuf-c-dev, protobuf-c-compiler and libonnx-dev)\n");
  return EXIT_NO_TARGET;
#endif
}

static int frontend(const options *o, mlc_program *prog, mlc_diag *diag, char **src, onnx_weights *weights) {
  FILE *tf = o->time_passes ? stderr : NULL;
  double t0 = mlc_now();
  size_t len;
  bool onnx = is_onnx(o->file);
  *src = read_file(o->file, onnx ? MAX_ONNX_BYTES : MAX_SOURCE_BYTES, &len);
  if (!*src) return EXIT_USER;
  double t1 = mlc_now();
  if (onnx) return onnx_frontend(o, prog, diag, *src, len, t0, t1, weights);
  uint32_t fid = mlc_diag_add_source(diag, o->file, *src, len), ntoks;
  mlc_token *toks = mlc_lex(prog->arena, diag, fid, *src, len, &ntoks);
  /* After a lexing error the parser would only report its consequences. */
  mlc_ast_file *ast = diag->errors ? NULL : mlc_parse(prog->arena, diag, toks, ntoks);
  double t2 = mlc_now();
  if (tf) fprintf(tf, "mlc: time per phase\n  %-12s %9.3f ms\n  %-12s %9.3f ms\n", "read", (t1 - t0) * 1e3, "parse", (t2 - t1) * 1e3);
  if (!diag->errors && o->emit && !strcmp(o->emit, "ast")) mlc_ast_print(stdout, ast);
  mlc_lower_options lo = {o->defines, o->ndefines, o->entry, 0, o->no_train, o->accum};
  bool ok = !diag->errors && mlc_lower(prog, diag, ast, &lo);
  if (ok && o->artifact_name) prog->name = o->artifact_name;
  mlc_options_apply(prog, &o->cg);
  double t3 = mlc_now();
  if (tf) fprintf(tf, "  %-12s %9.3f ms\n", "lower", (t3 - t2) * 1e3);
  return passes(o, prog, diag, ok, t0);
}

/* The pass pipeline after either frontend; -1 to go on, or the exit status. */
static int passes(const options *o, mlc_program *prog, mlc_diag *diag, bool ok, double t0) {
  FILE *tf = o->time_passes ? stderr : NULL;
  mlc_pipeline_options po = {o->print_after, stdout, tf, o->target, sharded(o), false};
  ok = ok && mlc_pipeline_run(prog, diag, &po);
  if (tf) fprintf(tf, "  %-12s %9.3f ms\n", "total", (mlc_now() - t0) * 1e3);
  if (!ok) {
    mlc_diag_summary(diag);
    return EXIT_USER;
  }
  if (o->emit && !strcmp(o->emit, "ir")) mlc_print_program(stdout, prog);
  if (o->stats) mlc_print_stats(stdout, prog);
  return -1;
}

static int no_target(const char *target) {
  fprintf(stderr, "mlc: target '%s' is not built into this mlc yet: its code generator does not exist "
          "(the model was checked; no artifact was written)\n", target);
  return EXIT_NO_TARGET;
}


#if defined(MLC_HAVE_CPU) || defined(MLC_HAVE_CUDA) || defined(MLC_HAVE_SPIRV)
static int fail_status(mlc_status st) {
  fprintf(stderr, "mlc: %s\n", mlc_status_message(st));
  mlc_status_code_t code = mlc_status_code(st);
  mlc_status_free(st);
  return code == MLC_INTERNAL ? EXIT_INTERNAL : EXIT_USER;
}

/* Reads a raw input file of exactly `bytes` bytes into dst. */
static mlc_status read_exact(const char *path, const char *name, void *dst, uint64_t bytes, const char *shape) {
  FILE *f = fopen(path, "rb");
  if (!f) return mlc_status_make(MLC_NOT_FOUND, "--input %s=%s: cannot open: %s", name, path, strerror(errno));
  size_t got = fread(dst, 1, (size_t)bytes, f);
  int extra = fgetc(f);
  fclose(f);
  if (got != bytes || extra != EOF)
    return mlc_status_make(MLC_INVALID_ARGUMENT, "--input %s=%s: input '%s' is %s, %llu bytes of raw little-endian data; "
                           "the file has %s", name, path, name, shape, (unsigned long long)bytes,
                           got < bytes ? "fewer" : "more");
  return NULL;
}

static const char *value_desc(const mlc_plan_value *v, char *buf, size_t n) {
  /* A plan's dtype codes are mlc_dtype's. */
  size_t k = (size_t)snprintf(buf, n, "%s[", mlc_dtype_name((mlc_dtype)v->shape.dtype));
  for (int i = 0; i < v->shape.rank && k < n; i++) k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)v->shape.dims[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
  return buf;
}

static const char *find_arg(const char *const *list, uint32_t n, const char *name) {
  size_t len = strlen(name);
  for (uint32_t i = 0; i < n; i++)
    if (!strncmp(list[i], name, len) && list[i][len] == '=') return list[i] + len + 1;
  return NULL;
}

/* Fills the inputs of `entry`: from files (run) or random values (bench). */
static mlc_status set_inputs(const options *o, mlc_session *s, const mlc_plan_entry *e) {
  for (uint32_t i = 0; i < o->ninputs; i++) {
    bool known = false;
    for (uint32_t k = 0; k < e->ninputs; k++) known |= !strncmp(o->inputs[i], e->inputs[k].name, strlen(e->inputs[k].name)) && o->inputs[i][strlen(e->inputs[k].name)] == '=';
    if (!known) return mlc_status_make(MLC_NOT_FOUND, "--input %s: %s has no input of that name", o->inputs[i], e->name);
  }
  uint64_t rng = 0x6d6c63;
  for (uint32_t k = 0; k < e->ninputs; k++) {
    const mlc_plan_value *v = &e->values[e->inputs[k].value];
    uint64_t bytes = mlc_plan_shape_bytes(&v->shape);
    uint8_t *buf = malloc(bytes ? bytes : 1);
    if (!buf) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory for input %s", e->inputs[k].name);
    char desc[160];
    mlc_status st = NULL;
    const char *path = find_arg(o->inputs, o->ninputs, e->inputs[k].name);
    if (path) {
      st = read_exact(path, e->inputs[k].name, buf, bytes, value_desc(v, desc, sizeof desc));
    } else if (o->cmd == CMD_BENCH) {
      /* Random data: floats in [-1, 1), integers in [0, 64) (valid token ids for any vocabulary of 64 or more). */
      int esz = mlc_dtype_size((mlc_dtype)v->shape.dtype);
      for (uint64_t j = 0; j < bytes / (uint64_t)esz; j++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t r = (uint32_t)(rng >> 33);
        if (v->shape.dtype == 1) { float f = (float)r / 2147483648.0f - 1.0f; memcpy(buf + j * 4, &f, 4); }
        else if (v->shape.dtype == 4) { int32_t x = (int32_t)(r % 64); memcpy(buf + j * 4, &x, 4); }
        else if (v->shape.dtype == 5) { int64_t x = r % 64; memcpy(buf + j * 8, &x, 8); }
        else if (v->shape.dtype == 6) buf[j] = (uint8_t)(r & 1);
        else { uint16_t h = (uint16_t)(0x3c00 | (r & 0x3ff)); memcpy(buf + j * 2, &h, 2); } /* values in [1, 2) for f16 */
      }
    } else {
      st = mlc_status_make(MLC_INVALID_ARGUMENT, "input '%s' (%s, %llu bytes) needs --input %s=FILE", e->inputs[k].name,
                           value_desc(v, desc, sizeof desc), (unsigned long long)bytes, e->inputs[k].name);
    }
    if (!st) st = mlc_session_set_input(s, e->name, e->inputs[k].name, buf, (size_t)bytes);
    free(buf);
    if (st) return st;
  }
  return NULL;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void print_output(const char *name, const void *data, const mlc_plan_value *v) {
  char desc[160];
  uint64_t n = mlc_plan_shape_bytes(&v->shape) / (uint64_t)mlc_dtype_size((mlc_dtype)v->shape.dtype);
  printf("%s: %s", name, value_desc(v, desc, sizeof desc));
  if (v->shape.dtype == 1) {
    const float *f = data;
    double sum = 0, asum = 0;
    for (uint64_t i = 0; i < n; i++) sum += f[i], asum += fabs(f[i]);
    printf("  mean %.6g  mean|x| %.6g  first", sum / (double)n, asum / (double)n);
    for (uint64_t i = 0; i < n && i < 4; i++) printf(" %.6g", f[i]);
  }
  printf("\n");
}

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
static mlc_status profile_outputs(const options *o, mlc_session *s, const char *entry) {
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

/* After a target wrote an artifact: the bundle (bundle.c: lib<name>.a with
 * the runtime inside, and the target's object files), then what it holds
 * (`files`: the target's own), or what went wrong; the exit status. */
static int wrote(const options *o, bool ok, char *err, size_t errn, const char *dir, const mlc_program *p,
                 const mlc_target_files *files) {
  if (ok) ok = mlc_bundle_artifact(dir, p->name, files->objects, files->nobjects, o->cc ? o->cc : "cc", err, errn);
  if (!ok) {
    fprintf(stderr, "mlc: %s\n", err);
    return EXIT_USER;
  }
  fprintf(stderr, "mlc: wrote %s/%s.h, %s.c, %s, lib%s.a (all of it and the runtime), %s.cmake and %s.pc\n", dir,
          p->name, p->name, files->what, p->name, p->name, p->name);
  return EXIT_OK;
}

/* Seconds a rank waits for its peers before the watchdog gives up on them:
 * MLC_NCCL_TIMEOUT, else 45, so that a dead peer ends the others within a
 * minute (a healthy step waits well under a second). */
static double nccl_timeout(void) {
  const char *e = getenv("MLC_NCCL_TIMEOUT");
  double t = e ? atof(e) : 0;
  return t > 0 ? t : 45;
}

/* NCCL's id on every rank: over TCP from rank 0 at MASTER_ADDR:MASTER_PORT,
 * or, under mpirun without MASTER_ADDR, through MPI (an all-gather of the
 * ids, keeping rank 0's). */
static mlc_status nccl_id(const mlc_dist_env *env, uint8_t *id) {
  if (env->world == 1 || env->master_addr[0] || strcmp(env->launcher, "mpirun")) return mlc_comm_nccl_id(env, id, nccl_timeout());
  mlc_comm *mpi;
  MLC_RETURN_IF_ERROR(mlc_comm_mpi_create(mlc_allocator_default(), &mpi));
  uint8_t *all = calloc((size_t)env->world, MLC_NCCL_ID_BYTES);
  mlc_status st = all ? NULL : mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory");
  if (!st && env->rank == 0) st = mlc_comm_nccl_new_id(id);
  if (!st) st = mpi->vt->all_gather(mpi, (uint64_t)(uintptr_t)id, (uint64_t)(uintptr_t)all, MLC_NCCL_ID_BYTES, NULL);
  if (!st) memcpy(id, all, MLC_NCCL_ID_BYTES);
  free(all);
  mpi->vt->destroy(mpi);
  return st;
}

#ifdef MLC_HAVE_CUDA
/* The watchdog aborted the communicator and the GPU still does not return:
 * this process cannot go on. */
static void nccl_hang(const char *why) {
  fprintf(stderr, "mlc: %s; exiting\n", why);
  _exit(EXIT_USER);
}
#endif

/* Compiles for the target, then writes the artifact (compile) or runs a
 * session on it (run, bench, train). */
static int run_target(const options *o, mlc_program *prog, const onnx_weights *ow) {
  char err[512];
  const mlc_driver_target *tgt = mlc_driver_target_find(o->target);
  bool nccl = tgt->nccl;
  mlc_comm *comm = NULL;
  mlc_status st = NULL;
  void *b = calloc(1, tgt->build_bytes);
  const uint8_t *plan_bytes = NULL;
  size_t plan_n = 0;
  int rc = EXIT_OK;
  mlc_plan *plan = NULL;
  mlc_session *s = NULL;
  /* --trace and --roofline need the per-step timing that --profile turns on. */
  mlc_session_options so = {NULL, NULL, NULL, o->threads, o->profile || o->trace || o->roofline, {0}, NULL};
  const char *dir = o->outdir ? o->outdir : "out";
  mlc_dist_env env;
  if (!b) { st = mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory"); goto fail; }
  if ((st = mlc_dist_env_read(&env))) goto fail;
  /* One GPU per rank: the launcher's local rank picks it unless --device does. */
  int device = o->device_set ? o->device : nccl ? env.local_rank : o->device;
  /* NCCL's id reaches every rank (TCP on MASTER_ADDR) first: a bad address
   * fails at once, before compiling or touching a GPU. */
  uint8_t id[MLC_NCCL_ID_BYTES] = {0};
  if (nccl && o->cmd != CMD_COMPILE && (st = nccl_id(&env, id))) goto fail;
  if ((rc = tgt->build(b, prog, stderr, env.rank))) goto out;
  if (o->cmd == CMD_COMPILE) {
    mlc_target_files files = {0};
    rc = wrote(o, tgt->write(b, dir, o->file, &files, err, sizeof err), err, sizeof err, dir, prog, &files);
    goto out;
  }
  if ((rc = tgt->open(b, device, stderr, env.rank, &so, &plan_bytes, &plan_n)) >= 0) goto out;
  rc = EXIT_OK;
#ifdef MLC_HAVE_CUDA
  if (nccl && (st = mlc_comm_nccl_create(&env, id, nccl_timeout(), nccl_hang, mlc_allocator_default(), &comm))) goto fail;
#endif
  if ((st = mlc_plan_parse(plan_bytes, plan_n, mlc_allocator_default(), &plan))) goto fail;
  if (!comm && env.world > 1) {
    if (tgt->one_device || !prog->train.shard)
      st = mlc_status_make(MLC_INVALID_ARGUMENT, "%d ranks started, but %s; use --target cuda-nccl, or the CPU target "
                           "with a train block that has shard = fsdp(...)", env.world,
                           tgt->one_device ? mlc_arena_printf(prog->arena, "--target %s runs on one GPU", tgt->name)
                                         : "the model is not sharded");
    else if (strcmp(env.launcher, "mpirun"))
      st = mlc_status_make(MLC_INVALID_ARGUMENT, "the CPU target's collectives run over MPI: start the %d ranks with "
                           "mpirun, not %s", env.world, env.launcher);
    else
      st = mlc_comm_mpi_create(mlc_allocator_default(), &comm);
    if (st) goto fail;
  }
  so.comm = comm;
  st = mlc_session_create(plan, &so, &s);
  so.device = NULL; /* the session owns it now, or has destroyed it */
  if (st) goto fail;
  /* bench: the timed runs only; profile's train steps: after the warm-up step */
  if (o->trace && o->cmd != CMD_BENCH && !o->profile_warmup) mlc_session_set_trace(s, true);
  if (o->weights) {
    if ((st = mlc_session_load_weights(s, o->weights))) goto fail;
  } else {
    mlc_session_init_params(s, o->seed);
#ifdef MLC_HAVE_ONNX
    for (uint32_t i = 0; i < ow->n; i++) { /* the model's own values, not random ones */
      void *at = mlc_session_param_data(s, ow->w[i].param);
      if (!at) { st = mlc_status_make(MLC_INTERNAL, "cannot write parameter %u", ow->w[i].param); goto fail; }
      memcpy(at, ow->w[i].data, ow->w[i].bytes);
    }
#else
    (void)ow;
#endif
  }
  if (o->resume && (st = mlc_session_load_checkpoint(s, o->resume))) goto fail;
  if (o->cmd == CMD_TRAIN) {
    mlc_train_args ta = {
      .steps = o->steps, .data = o->data, .data_dtype = o->data_dtype, .inputs = o->inputs, .ninputs = o->ninputs,
      .eval_inputs = o->eval_inputs, .neval_inputs = o->neval_inputs, .eval_split = o->eval_split,
      .eval_every = o->eval_every, .shuffle = o->shuffle, .shuffle_seed = o->shuffle_seed,
      .synthetic_ok = !strcmp(o->name, "profile"), .save = o->save, .save_every = o->save_every, .log = stdout,
      .warmup = o->profile_warmup, .trace = o->trace != NULL,
    };
    if (mlc_session_rank(s)) ta.log = NULL; /* rank 0 prints the mean loss over the ranks */
    int sig;
    if ((st = mlc_train_loop(s, &ta, &sig))) goto fail;
    if (sig) { /* stopped by SIGINT or SIGTERM, after saving */
      rc = 128 + sig;
      goto out;
    }
    if (o->export_weights && (st = mlc_session_save_weights(s, o->export_weights))) goto fail;
    if (tgt->device_memory) printf("device memory held by mlc: %.2f GB (parameters, optimizer state, arenas, scratch)\n",
                     mlc_session_device_bytes(s) / 1e9);
    if ((st = profile_outputs(o, s, "train"))) goto fail;
    goto out;
  }
  const mlc_plan_entry *e = mlc_plan_find_entry(plan, "forward");
  if (!e) { st = mlc_status_make(MLC_NOT_FOUND, "the model has no forward"); goto fail; }
  for (uint32_t i = 0; i < o->noutputs; i++) {
    bool known = false;
    for (uint32_t k = 0; k < e->noutputs; k++)
      known |= !strncmp(o->outputs[i], e->outputs[k].name, strlen(e->outputs[k].name)) && o->outputs[i][strlen(e->outputs[k].name)] == '=';
    if (!known) { st = mlc_status_make(MLC_NOT_FOUND, "--output %s: forward has no output of that name (it has '%s')", o->outputs[i], e->outputs[0].name); goto fail; }
  }
  if ((st = set_inputs(o, s, e))) goto fail;
  if (o->cmd == CMD_RUN) {
    if ((st = mlc_session_run(s, "forward"))) goto fail;
    for (uint32_t k = 0; k < e->noutputs; k++) {
      const void *data;
      const mlc_plan_shape *shape;
      if ((st = mlc_session_output(s, "forward", e->outputs[k].name, &data, &shape))) goto fail;
      const mlc_plan_value *v = &e->values[e->outputs[k].value];
      print_output(e->outputs[k].name, data, v);
      const char *path = find_arg(o->outputs, o->noutputs, e->outputs[k].name);
      if (path) {
        FILE *f = fopen(path, "wb");
        uint64_t n = mlc_plan_shape_bytes(shape);
        if (!f || fwrite(data, 1, (size_t)n, f) != n || fclose(f)) {
          st = mlc_status_make(MLC_IO, "--output %s=%s: cannot write: %s", e->outputs[k].name, path, strerror(errno));
          goto fail;
        }
      }
    }
  } else {
    int warm = o->warmup >= 0 ? o->warmup : 3, runs = o->runs ? o->runs : 10;
    for (int i = 0; i < warm; i++)
      if ((st = mlc_session_run(s, "forward"))) goto fail;
    mlc_session_reset_profile(s);
    if (o->trace) mlc_session_set_trace(s, true);
    double *t = malloc((size_t)runs * sizeof *t);
    if (!t) { st = mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory"); goto fail; }
    for (int i = 0; i < runs && !st; i++) {
      double t0 = mlc_now();
      st = mlc_session_run(s, "forward");
      t[i] = (mlc_now() - t0) * 1e3;
    }
    if (!st) {
      qsort(t, (size_t)runs, sizeof *t, cmp_double);
      double flops = 0;
      for (uint32_t i = 0; i < e->nsteps; i++) flops += e->steps[i].flops;
      double med = runs % 2 ? t[runs / 2] : (t[runs / 2 - 1] + t[runs / 2]) / 2;
      printf("%s forward on %s: median %.3f ms, min %.3f, max %.3f over %d runs after %d warm-up; %.1f GFLOP/s\n",
             prog->name, o->target, med, t[0], t[runs - 1], runs, warm, flops / (med * 1e-3) / 1e9);
      if (tgt->device_memory) printf("device memory held by mlc: %.2f GB (parameters, arenas, scratch)\n", mlc_session_device_bytes(s) / 1e9);
    }
    free(t);
    if (st) goto fail;
  }
  if ((st = profile_outputs(o, s, "forward"))) goto fail;
  goto out;
fail:
  rc = fail_status(st);
out:
  if (!s && so.device) so.device->vt->destroy(so.device);
  mlc_session_destroy(s);
  if (comm) comm->vt->destroy(comm);
  mlc_plan_free(plan);
  if (b && tgt->release) tgt->release(b);
  free(b);
  return rc;
}
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
      if (!parse_int(argv[++i], 0, 1024, threads)) return usage_error("--threads %s: expected a number from 0 (all CPUs) to 1024", argv[i]);
    } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return EXIT_OK; }
    else return usage_error("calibrate does not take '%s'", a);
  }
  if (!*target) return usage_error("%s", "calibrate needs --target (cpu or cuda)");
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
  char err[512];
  mlc_lower_options lo = {NULL, 0, NULL, 0, false, 0};
  mlc_pipeline_options po = {NULL, stdout, NULL, target, false, false};
  if (!mlc_frontend_run(&prog, &diag, "<calibrate>", src, sizeof src - 1, &lo, NULL) ||
      !mlc_pipeline_run(&prog, &diag, &po)) {
    st = mlc_status_make(MLC_INTERNAL, "the calibration GEMM does not compile");
    goto out;
  }
  if (!(built = mlc_cpu_compile(&prog, &b, NULL, err, sizeof err)) || !mlc_cpu_jit(&b, err, sizeof err)) {
    st = mlc_status_make(MLC_INTERNAL, "%s", err);
    goto out;
  }
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
  if (st) return fail_status(st);
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  char when[64];
  strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
  snprintf(c.source, sizeof c.source, "%s", when);
  c.calibrated = true;
  if ((st = mlc_ceilings_save_file(path, &c))) return fail_status(st);
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
static int cmd_calibrate(int argc, char **argv) {
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
  return no_target(target);
}

/* devices --target T: the devices of the targets that list them (the
 * Vulkan ones), numbered as --device takes them. */
static int cmd_devices(int argc, char **argv) {
  const char *target = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if ((!strcmp(a, "--target") || !strcmp(a, "-t")) && i + 1 < argc) target = argv[++i];
    else if (!strncmp(a, "--target=", 9)) target = a + 9;
    else if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return EXIT_OK; }
    else return usage_error("devices does not take '%s'", a);
  }
  if (!target) return usage_error("%s", "devices needs --target (spirv lists Vulkan devices; nvidia-smi lists CUDA GPUs)");
  const mlc_driver_target *t = mlc_driver_target_find(target);
  if (!t || !(t->listed & MLC_CMD_DEVICES)) {
    unsigned nt;
    const mlc_driver_target *ts = mlc_driver_targets(&nt);
    char names[128];
    fprintf(stderr, "mlc: devices --target %s: only %s is listed", target,
            mlc_driver_target_names(MLC_CMD_DEVICES, ", ", " and ", names, sizeof names));
    for (unsigned i = 0; i < nt; i++)
      if (ts[i].devices_hint) fprintf(stderr, " (%s)", ts[i].devices_hint);
    fprintf(stderr, "\nTry 'mlc --help'.\n");
    return EXIT_USAGE;
  }
  if (!t->list_devices) {
    fprintf(stderr, "mlc: %s\n", t->not_built);
    return EXIT_NO_TARGET;
  }
  mlc_status st = t->list_devices(stdout);
  if (!st) return EXIT_OK;
  fprintf(stderr, "mlc: %s\n", mlc_status_message(st));
  int rc = mlc_status_code(st) == MLC_UNIMPLEMENTED ? EXIT_NO_TARGET : EXIT_INTERNAL;
  mlc_status_free(st);
  return rc;
}

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
static int run_ncu(options *o, int argc, char **argv, char *csv, size_t csvn) {
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
    if (!strcmp(a, "--ncu")) continue;
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

static int cmd_main(command cmd, const char *name, int argc, char **argv) {
  options o = {.cmd = cmd, .name = name, .warmup = -1};
  int rc = parse_args(&o, argc, argv);
  char ncu_csv[1100];
  if (rc < 0 && o.ncu) rc = run_ncu(&o, argc, argv, ncu_csv, sizeof ncu_csv);
  if (rc < 0) {
    mlc_arena arena;
    mlc_arena_init(&arena);
    mlc_diag diag;
    mlc_diag_init(&diag, stderr);
    mlc_program prog;
    mlc_program_init(&prog, &arena);
    char *src = NULL;
    onnx_weights ow = {0};
    rc = frontend(&o, &prog, &diag, &src, &ow);
    if (rc < 0) {
      rc = EXIT_OK;
      const mlc_driver_target *t = mlc_driver_target_find(o.target);
      if (t && t->build) {
#if defined(MLC_HAVE_CPU) || defined(MLC_HAVE_CUDA) || defined(MLC_HAVE_SPIRV)
        rc = run_target(&o, &prog, &ow);
#endif
      } else if (t) {
        fprintf(stderr, "mlc: %s\n", t->not_built);
        rc = EXIT_NO_TARGET;
      } else if (o.target) {
        rc = no_target(o.target);
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
  if (!strcmp(cmd, "compile")) return cmd_main(CMD_COMPILE, cmd, argc - 1, argv + 1);
  if (!strcmp(cmd, "run")) return cmd_main(CMD_RUN, cmd, argc - 1, argv + 1);
  if (!strcmp(cmd, "bench")) return cmd_main(CMD_BENCH, cmd, argc - 1, argv + 1);
  if (!strcmp(cmd, "train")) return cmd_main(CMD_TRAIN, cmd, argc - 1, argv + 1);
  if (!strcmp(cmd, "profile")) return cmd_main(CMD_PROFILE, cmd, argc - 1, argv + 1);
  if (!strcmp(cmd, "devices")) return cmd_devices(argc - 1, argv + 1);
  if (!strcmp(cmd, "calibrate")) return cmd_calibrate(argc - 1, argv + 1);
  return usage_error("unknown command '%s' (commands: compile, run, bench, train, profile, calibrate, devices)", cmd);
}
