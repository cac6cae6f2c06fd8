/* mlc's command line (cli.h): --help, with the target lists from the
 * registry (driver/target.c); the options of the model commands and their
 * checks; the helpers that print a usage error or a status. */
#define _XOPEN_SOURCE 700 /* strndup */
#include "driver/cli.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/artifact.h"
#include "driver/generate.h"
#include "passes/passes.h"

/* --help: the target lists come from the registry (driver/target.c). */
void mlc_cli_usage(FILE *o) {
  char run[128], bench[128], train[128], profile[128], all[128];
  unsigned nt;
  const mlc_driver_target *ts = mlc_driver_targets(&nt);
  fprintf(o,
          "usage: mlc compile FILE.mdl [options] [NAME=VALUE ...]\n"
          "       mlc run FILE.mdl --target %s [--weights W] --input NAME=FILE ... [options]\n"
          "       mlc bench FILE.mdl --target %s [--runs N] [options]\n"
          "       mlc train FILE.mdl --target %s --steps N [--data TOKENS | --input NAME=FILE ...] [--weights W] [--save CKPT] [--resume CKPT]\n"
          "       mlc profile FILE.mdl --target %s [--entry forward|train_step] [--steps N] [--trace F] [--roofline F]\n"
          "                    [--ncu | --ncu-csv F] [--ncu-json F]\n"
          "       mlc generate FILE.mdl [--target cpu] [--weights W] --prompt TOKENS --max-new N\n"
          "                    [--temperature T --top-k K --seed S] [--logits FILE]\n"
          "       mlc run|bench|train|profile DIR/NAME.mlcplan [options]   a compiled plan (compile -o writes one\n"
          "                    for cuda and spirv), run without compiling, on the device its code is for\n"
          "       mlc calibrate --target cpu [--threads N] | --target cuda|spirv [--device N]\n"
          "       mlc devices [--target T]       list the devices of every runtime driver built (cpu, cuda,\n"
          "                                      vulkan, metal), numbered as --device N takes them\n"
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
          "      --no-train        (compile, run, bench) no train step: the train block's model and\n"
          "                        config, but no optimizer state (a smaller artifact); the forward and\n"
          "                        a decode block's prefill and step stay\n"
          "      --time-passes     print how long each phase took, to standard error\n"
          "      --fsdp            shard the train block's fsdp(...) units across ranks (implied by\n"
          "                        --target cuda-nccl, and by a launcher that starts several ranks)\n"
          "      --f32-matmul M    how f32 matrix products run on tensor cores (cuda): tf32x3 (or 3xtf32;\n"
          "                        three TF32 products, about f32's accuracy; the default), ieee (f32\n"
          "                        FMAs, no tensor cores) or tf32 (one TF32 product); overrides the\n"
          "                        train block's precision(f32_matmul=...)\n"
          "      --matmul M        (cpu, cuda; compile, train) the train step's linears: fp8 (forward and\n"
          "                        both gradient GEMMs on e4m3 x and w and e5m2 gradients, a power-of-two\n"
          "                        scale per tensor; CUDA's FP8 tensor cores, emulated on the CPU),\n"
          "                        fp8:grad=e4m3, or plain (the compute dtype's GEMMs); overrides\n"
          "                        precision(matmul=fp8, fp8_grad=...);\n"
          "                        the head and linears off multiples of 16 stay plain (--stats lists them)\n"
          "      --fp8-keep S      under --matmul=fp8, the linears that stay plain: comma-separated scopes\n"
          "                        (a linear at or below one: layers.0,head) in place of the default, the\n"
          "                        linear that feeds the loss; \"\" converts that one too; overrides\n"
          "                        precision(fp8_keep=[...])\n"
          "      --accum N         (compile, train, profile) gradient accumulation: each step takes N\n"
          "                        micro-batches of the declared batch and updates with the mean of their\n"
          "                        gradients; overrides the train block's accum = ...\n"
          "      --memory-budget B the bytes a training session may hold (14GB, 12.5GiB, 9e9): the\n"
          "                        compiler recomputes cheap activations (casts, norms, SiLU), then\n"
          "                        whole layers' forwards, in the backward until the plan fits, or\n"
          "                        says the smallest it can reach;\n"
          "                        overrides the train block's memory_budget = ...; --stats lists them\n"
          "      --quantize Q      (cpu, spirv, cuda, metal; compile, run, bench, generate) weight-only quantisation of the\n"
          "                        linear layers: int8 or int4, symmetric, a bf16 scale per group of G\n"
          "                        weights of a row (int4:group=64; default group 128); :asym for\n"
          "                        unsigned codes and a bf16 min beside each scale (int4:asym,\n"
          "                        int4:group=64:asym); :scales=f32 for f32 scales and mins\n"
          "                        (int4:asym:scales=f32); packed from the f32 weights at load;\n"
          "                        inference only: implies --no-train\n",
          mlc_driver_target_names(MLC_CMD_RUN, "|", "|", run, sizeof run),
          mlc_driver_target_names(MLC_CMD_BENCH, "|", "|", bench, sizeof bench),
          mlc_driver_target_names(MLC_CMD_TRAIN, "|", "|", train, sizeof train),
          mlc_driver_target_names(MLC_CMD_PROFILE, "|", "|", profile, sizeof profile),
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
          "         and HBM: memory, compute, or latency (neither: the rule in docs/cli.md)\n"
          "      --ncu             (cuda) also run the step under Nsight Compute (ncu on PATH) and put its\n"
          "                        verdict (SM and memory throughput) beside mlc's, with the agreement\n"
          "      --ncu-csv FILE    the same from a CSV of `ncu --csv --page raw` (see docs/cli.md)\n"
          "      --ncu-json FILE   write that comparison as JSON\n"
          "      --flush-l2[=no]   (cuda) empty the L2 before each timed kernel, as ncu does before each it\n"
          "                        measures (on with --ncu and --ncu-csv: their comparison is cold to cold)\n"
          "generate: a model with a decode block (docs/language.md): the prompt through its prefill entry,\n"
          "          then one step per new token over the KV caches; prints the new token ids, and tokens/s\n"
          "          of the prefill and of the decode, separately\n"
          "      --prompt TOKENS   the prompt's token ids, separated by commas or spaces (1,2,3)\n"
          "      --max-new N       how many tokens to generate; the prompt and N - 1 of them must fit in\n"
          "                        the decode block's max_ctx\n"
          "      --temperature T   0 (the default): greedy, the first largest logit (deterministic);\n"
          "                        above 0: sample from softmax(logits / T)\n"
          "      --top-k K         (with --temperature) sample from the K largest logits only\n"
          "      --seed S          the sampling's seed (and the initial weights' without --weights)\n"
          "      --logits FILE     write each new token's logits, raw f32 [N, vocab]\n"
          "      --weights, --threads, --profile  as for run\n"
          "calibrate: measure this CPU's memory bandwidth and f32 GEMM peak, cache them in\n"
          "           ~/.cache/mlc/ceilings-cpu.json for --profile and --roofline; --target cuda|spirv:\n"
          "           device N's bandwidth and bf16 GEMM peak (mlc's own kernels), in ceilings-cuda.json\n"
          "\n"
          "exit status: 0 success, 1 error in the model or its data, 2 usage error,\n"
          "             3 internal error, 4 not available (in this build or on this machine),\n"
          "             128+N train stopped by signal N (130 SIGINT, 143 SIGTERM)\n",
          mlc_pipeline_pass_names());
}

int mlc_cli_usage_error(const char *fmt, const char *arg) {
  fprintf(stderr, "mlc: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\nTry 'mlc --help'.\n");
  return EXIT_USAGE;
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

enum {
  OPT_EMIT = 256, OPT_NO_TRAIN, OPT_PRINT_AFTER, OPT_TIME, OPT_STATS, OPT_ENTRY, OPT_WEIGHTS, OPT_INPUT, OPT_PROFILE, OPT_THREADS,
  OPT_SEED, OPT_RUNS, OPT_WARMUP, OPT_STEPS, OPT_DATA, OPT_DATA_DTYPE, OPT_SAVE, OPT_RESUME, OPT_TRACE, OPT_ROOFLINE,
  OPT_DEVICE, OPT_FSDP, OPT_EXPORT, OPT_NAME, OPT_CC, OPT_NCU, OPT_NCU_CSV, OPT_NCU_JSON, OPT_FLUSH_L2,
  OPT_EVAL_INPUT, OPT_EVAL_SPLIT, OPT_EVAL_EVERY, OPT_SHUFFLE, OPT_SAVE_EVERY, OPT_ACCUM,
  OPT_PROMPT, OPT_MAX_NEW, OPT_TEMPERATURE, OPT_TOP_K, OPT_LOGITS,
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
  case OPT_SEED: return cmd == CMD_RUN || cmd == CMD_TRAIN || cmd == CMD_PROFILE || cmd == CMD_GENERATE;
  case OPT_PROMPT: case OPT_MAX_NEW: case OPT_TEMPERATURE: case OPT_TOP_K: case OPT_LOGITS: return cmd == CMD_GENERATE;
  case OPT_STEPS: case OPT_DATA: case OPT_DATA_DTYPE: return cmd == CMD_TRAIN || cmd == CMD_PROFILE;
  case OPT_SAVE: case OPT_RESUME: case OPT_EXPORT: return cmd == CMD_TRAIN;
  case OPT_WEIGHTS: case OPT_PROFILE: case OPT_THREADS: case OPT_TRACE: case OPT_ROOFLINE: case OPT_DEVICE:
    return cmd != CMD_COMPILE;
  case OPT_RUNS: case OPT_WARMUP: return cmd == CMD_BENCH || cmd == CMD_PROFILE;
  case OPT_NCU: case OPT_NCU_CSV: case OPT_NCU_JSON: case OPT_FLUSH_L2: return cmd == CMD_PROFILE;
  default: return false;
  }
}

/* The options that say how to compile, which a compiled plan has no use for. */
static bool compile_only(int opt) {
  switch (opt) {
  case 'D': case OPT_ENTRY: case OPT_TIME: case OPT_FSDP: case OPT_CODEGEN: case OPT_EMIT: case OPT_PRINT_AFTER:
  case OPT_STATS: case OPT_NO_TRAIN: case OPT_ACCUM: return true;
  default: return false;
  }
}

bool mlc_cli_is_plan(const char *file) {
  size_t n = file ? strlen(file) : 0;
  return n > 8 && !strcmp(file + n - 8, ".mlcplan");
}

bool mlc_cli_parse_int(const char *s, long lo, long hi, long *out) {
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
int mlc_cli_parse_args(options *o, int argc, char **argv) {
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
    {"ncu-json", required_argument, 0, OPT_NCU_JSON}, {"flush-l2", optional_argument, 0, OPT_FLUSH_L2},
    {"prompt", required_argument, 0, OPT_PROMPT}, {"max-new", required_argument, 0, OPT_MAX_NEW},
    {"temperature", required_argument, 0, OPT_TEMPERATURE}, {"top-k", required_argument, 0, OPT_TOP_K},
    {"logits", required_argument, 0, OPT_LOGITS},
    /* the options of emitted code (mlc_options_set) */
    {"f32-matmul", required_argument, 0, OPT_CODEGEN}, {"memory-budget", required_argument, 0, OPT_CODEGEN},
    {"quantize", required_argument, 0, OPT_CODEGEN}, {"matmul", required_argument, 0, OPT_CODEGEN},
    {"fp8-keep", required_argument, 0, OPT_CODEGEN},
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
      else if (o->ndefines < MAX_DEFINES && parse_define(arg, &o->defines[o->ndefines])) {
        o->ndefines++;
        if (!o->compile_only[0]) snprintf(o->compile_only, sizeof o->compile_only, "%s", arg);
      }
      else if (o->file) return mlc_cli_usage_error("unexpected argument '%s' (only one model file is compiled at a time)", arg);
      else return mlc_cli_usage_error("'%s' is not a NAME=VALUE override", arg);
      continue;
    }
    if (c == '?') { fprintf(stderr, "Try 'mlc --help'.\n"); return EXIT_USAGE; }
    if (!takes(o->cmd, c)) {
      fprintf(stderr, "mlc: %s does not take %s%s\nTry 'mlc --help'.\n", o->name, c < 256 ? "-" : "--",
              c < 256 ? (char[2]){(char)c, 0} : opts[idx].name);
      return EXIT_USAGE;
    }
    /* (profile's --entry picks the entry point to time, not what to compile) */
    if (compile_only(c) && !(c == OPT_ENTRY && o->cmd == CMD_PROFILE) && !o->compile_only[0]) {
      if (c < 256) snprintf(o->compile_only, sizeof o->compile_only, "-%c", c);
      else snprintf(o->compile_only, sizeof o->compile_only, "--%s", opts[idx].name);
    }
    switch (c) {
    case 't': o->target = optarg; break;
    case 'o':
      if (o->cmd == CMD_COMPILE) o->outdir = optarg;
      else if (o->noutputs < 64) o->outputs[o->noutputs++] = optarg;
      break;
    case 'D':
      if (o->ndefines >= MAX_DEFINES) return mlc_cli_usage_error("%s", "too many -D options");
      if (!parse_define(optarg, &o->defines[o->ndefines])) return mlc_cli_usage_error("-D %s: expected NAME=VALUE", optarg);
      o->ndefines++;
      break;
    case OPT_EMIT: o->emit = optarg; break;
    case OPT_NAME: {
      if (!c_identifier(optarg)) return mlc_cli_usage_error("--name %s: expected a C identifier of at most 64 characters", optarg);
      const char *clash = mlc_artifact_name_clash(optarg);
      if (clash) {
        char msg[300];
        snprintf(msg, sizeof msg, "--name %s: cannot name an artifact's C type and functions: it is %s; choose another",
                 optarg, clash);
        return mlc_cli_usage_error("%s", msg);
      }
      o->artifact_name = optarg;
      break;
    }
    case OPT_CC: o->cc = optarg; break;
    case OPT_NCU: o->ncu = true; break;
    case OPT_NCU_CSV: o->ncu_csv = optarg; break;
    case OPT_NCU_JSON: o->ncu_json = optarg; break;
    case OPT_FLUSH_L2:
      if (optarg && strcmp(optarg, "yes") && strcmp(optarg, "no"))
        return mlc_cli_usage_error("--flush-l2=%s: expected yes or no", optarg);
      o->flush_l2 = !optarg || !strcmp(optarg, "yes");
      break;
    case OPT_PRINT_AFTER: o->print_after = optarg; break;
    case OPT_TIME: o->time_passes = true; break;
    case OPT_NO_TRAIN: o->no_train = true; break;
    case OPT_STATS: o->stats = true; break;
    case OPT_ENTRY: o->entry = optarg; break;
    case OPT_WEIGHTS: o->weights = optarg; break;
    case OPT_INPUT:
      if (o->ninputs == 64) return mlc_cli_usage_error("%s", "more than 64 --input options");
      o->inputs[o->ninputs++] = optarg;
      break;
    case OPT_EVAL_INPUT:
      if (o->neval_inputs == 64) return mlc_cli_usage_error("%s", "more than 64 --eval-input options");
      o->eval_inputs[o->neval_inputs++] = optarg;
      break;
    case OPT_EVAL_SPLIT: {
      char *end;
      errno = 0;
      o->eval_split = strtod(optarg, &end);
      if (!*optarg || *end || errno || !(o->eval_split > 0 && o->eval_split < 1))
        return mlc_cli_usage_error("--eval-split %s: expected the share of the rows to hold out, between 0 and 1 (0.2)", optarg);
      break;
    }
    case OPT_EVAL_EVERY:
      if (!mlc_cli_parse_int(optarg, 1, 100000000, &v)) return mlc_cli_usage_error("--eval-every %s: expected a number of steps", optarg);
      o->eval_every = v;
      break;
    case OPT_SAVE_EVERY:
      if (!mlc_cli_parse_int(optarg, 1, 100000000, &v)) return mlc_cli_usage_error("--save-every %s: expected a number of steps", optarg);
      o->save_every = v;
      break;
    case OPT_ACCUM:
      if (!mlc_cli_parse_int(optarg, 1, 65536, &v))
        return mlc_cli_usage_error("--accum %s: expected a number of micro-batches, 1 to 65536", optarg);
      o->accum = v;
      break;
    case OPT_SHUFFLE:
      if (!mlc_cli_parse_int(optarg, 0, LONG_MAX, &v))
        return mlc_cli_usage_error("--shuffle %s: expected a seed (a non-negative integer)", optarg);
      o->shuffle = true;
      o->shuffle_seed = (unsigned long long)v;
      break;
    case OPT_PROFILE: o->profile = true; break;
    case OPT_FSDP: o->fsdp = true; break;
    case OPT_THREADS:
      if (!mlc_cli_parse_int(optarg, 0, 1024, &v))
        return mlc_cli_usage_error("--threads %s: expected a number from 0 (all CPUs) to 1024", optarg);
      o->threads = (int)v;
      break;
    case OPT_DEVICE:
      if (!mlc_cli_parse_int(optarg, 0, 1023, &v)) return mlc_cli_usage_error("--device %s: expected a GPU number (0, 1, ...)", optarg);
      o->device = (int)v;
      o->device_set = true;
      break;
    case OPT_SEED:
      if (!mlc_cli_parse_int(optarg, 0, LONG_MAX, &v)) return mlc_cli_usage_error("--seed %s: expected a non-negative integer", optarg);
      o->seed = (unsigned long long)v;
      break;
    case OPT_RUNS:
      if (!mlc_cli_parse_int(optarg, 1, 100000, &v)) return mlc_cli_usage_error("--runs %s: expected a number from 1 to 100000", optarg);
      o->runs = (int)v;
      break;
    case OPT_WARMUP:
      if (!mlc_cli_parse_int(optarg, 0, 100000, &v)) return mlc_cli_usage_error("--warmup %s: expected a number from 0 to 100000", optarg);
      o->warmup = (int)v;
      break;
    case OPT_STEPS:
      if (!mlc_cli_parse_int(optarg, 0, 100000000, &v)) return mlc_cli_usage_error("--steps %s: expected a number of steps", optarg);
      o->steps = v;
      break;
    case OPT_DATA: o->data = optarg; break;
    case OPT_DATA_DTYPE:
      if (strcmp(optarg, "u16") && strcmp(optarg, "i32")) return mlc_cli_usage_error("--data-dtype %s: expected u16 or i32", optarg);
      o->data_dtype = optarg;
      break;
    case OPT_SAVE: o->save = optarg; break;
    case OPT_PROMPT: o->prompt = optarg; break;
    case OPT_LOGITS: o->logits_out = optarg; break;
    case OPT_MAX_NEW:
      if (!mlc_cli_parse_int(optarg, 1, 1 << 24, &o->max_new)) return mlc_cli_usage_error("--max-new %s: expected a number of tokens, 1 or more", optarg);
      break;
    case OPT_TOP_K:
      if (!mlc_cli_parse_int(optarg, 0, INT32_MAX, &o->top_k)) return mlc_cli_usage_error("--top-k %s: expected a number of tokens (0: all)", optarg);
      break;
    case OPT_TEMPERATURE: {
      char *end;
      errno = 0;
      o->temperature = strtod(optarg, &end);
      if (!*optarg || *end || errno || !(o->temperature >= 0) || o->temperature > 1e6)
        return mlc_cli_usage_error("--temperature %s: expected a number, 0 (greedy) or more", optarg);
      break;
    }
    case OPT_CODEGEN: {
      char err[256];
      if (!mlc_options_set(&o->cg, opts[idx].name, optarg, err, sizeof err)) return mlc_cli_usage_error("%s", err);
      break;
    }
    case OPT_EXPORT: o->export_weights = optarg; break;
    case OPT_RESUME: o->resume = optarg; break;
    case OPT_TRACE: o->trace = optarg; break;
    case OPT_ROOFLINE: o->roofline = optarg; break;
    case 'h': mlc_cli_usage(stdout); return EXIT_OK;
    }
  }
  if (o->cg.quant_bits && o->cmd == CMD_TRAIN)
    return mlc_cli_usage_error("%s", "--quantize: quantised graphs are inference only (qlinear has no gradient): train in "
                                     "f32, then run or generate with --quantize and the trained weights");
  if (o->cg.quant_bits) o->no_train = true; /* inference only: the forward and the decode entries */
  if (o->cmd == CMD_TRAIN && o->steps <= 0 && !o->save && !o->export_weights) return mlc_cli_usage_error("%s", "train needs --steps N");
  if (o->cmd == CMD_TRAIN) {
    if (o->data && o->ninputs) return mlc_cli_usage_error("%s", "--data and --input are two ways to give the data: use one");
    if ((o->shuffle || o->eval_split > 0 || o->neval_inputs) && !o->ninputs)
      return mlc_cli_usage_error("%s", o->shuffle ? "--shuffle needs --input" : o->neval_inputs ? "--eval-input needs --input"
                                                                                              : "--eval-split needs --input");
    if (o->eval_split > 0 && o->neval_inputs)
      return mlc_cli_usage_error("%s", "--eval-split and --eval-input both give held-out data: use one");
    if (o->eval_every && !o->eval_split && !o->neval_inputs)
      return mlc_cli_usage_error("%s", "--eval-every needs held-out data: --eval-split FRACTION or --eval-input NAME=FILE");
    if (o->save_every && !o->save) return mlc_cli_usage_error("%s", "--save-every needs --save CKPT (the file it writes)");
  }
  if (o->cmd == CMD_PROFILE) {
    /* profile: --entry names the entry point to time (forward, or train /
     * train_step); it then runs as bench or train with --profile. */
    const char *ep = o->entry ? o->entry : "forward";
    o->entry = NULL;
    const mlc_driver_target *t = mlc_driver_target_find(o->target);
    if ((o->ncu || o->ncu_csv) && (!t || !t->ncu))
      return mlc_cli_usage_error("%s", "--ncu and --ncu-csv compare CUDA kernels: they need --target cuda");
    if (o->ncu && o->ncu_csv) return mlc_cli_usage_error("%s", "--ncu runs ncu itself; --ncu-csv reads its CSV instead: give one");
    if (o->ncu_json && !o->ncu && !o->ncu_csv) return mlc_cli_usage_error("%s", "--ncu-json needs --ncu or --ncu-csv");
    if (o->flush_l2 > 0 && (!t || !t->ncu))
      return mlc_cli_usage_error("%s", "--flush-l2 empties a GPU's caches before each kernel: it needs --target cuda");
    /* ncu measures each kernel with the caches flushed (its --cache-control
     * all): mlc times its kernels the same way for the comparison, unless
     * told --flush-l2=no. */
    if ((o->ncu || o->ncu_csv) && o->flush_l2 < 0) o->flush_l2 = 1;
    o->profile = true;
    if (!strcmp(ep, "train") || !strcmp(ep, "train_step")) {
      o->cmd = CMD_TRAIN;
      if (o->steps <= 0) o->steps = 10;
      o->profile_warmup = o->warmup >= 0 ? o->warmup : 1; /* the first step loads and warms up */
    } else if (!strcmp(ep, "forward")) {
      o->cmd = CMD_BENCH;
      if (o->steps > 0) o->runs = (int)o->steps;
    } else {
      return mlc_cli_usage_error("profile --entry %s: expected forward or train_step", ep);
    }
  }
  if (o->cmd == CMD_GENERATE) {
    if (!o->target) o->target = mlc_driver_default_target();
    if (!o->prompt) return mlc_cli_usage_error("%s", "generate needs --prompt TOKENS (token ids: --prompt 1,2,3)");
    int32_t *ids;
    uint32_t nids;
    mlc_status st = mlc_generate_parse_prompt(o->prompt, &ids, &nids);
    if (st) {
      int rc = mlc_cli_usage_error("%s", mlc_status_message(st));
      mlc_status_free(st);
      return rc;
    }
    free(ids);
    if (!o->max_new) return mlc_cli_usage_error("%s", "generate needs --max-new N (the tokens to generate)");
    if (o->top_k && o->temperature == 0) return mlc_cli_usage_error("%s", "--top-k samples: it needs --temperature T (above 0)");
  }
  if (!o->file) return mlc_cli_usage_error("%s needs a model file", o->name);
  if (mlc_cli_is_plan(o->file)) {
    /* A compiled plan (mlc compile -o DIR writes DIR/<name>.mlcplan): its
     * code is made, and its device is the one its code is for. */
    if (o->cmd == CMD_COMPILE || o->cmd == CMD_GENERATE)
      return mlc_cli_usage_error("%s is a compiled plan, which mlc run, bench, train and profile take; "
                                 "compile and generate take the model's .mdl", o->file);
    if (o->compile_only[0]) {
      char msg[400];
      snprintf(msg, sizeof msg, "%s says how to compile, but %s is compiled already (give it to mlc compile with the "
               "model's .mdl)", o->compile_only, o->file);
      return mlc_cli_usage_error("%s", msg);
    }
    if (o->ncu || o->ncu_csv) return mlc_cli_usage_error("%s", "--ncu and --ncu-csv take the model's .mdl, not a plan");
  }
  if (o->emit && strcmp(o->emit, "ast") && strcmp(o->emit, "ir")) return mlc_cli_usage_error("--emit %s: expected ast or ir", o->emit);
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
    return mlc_cli_usage_error("%s", "-o needs --target: without a target there is no artifact");
  if (o->cmd != CMD_COMPILE && !o->target && !mlc_cli_is_plan(o->file))
    return mlc_cli_usage_error("%s needs --target (cpu or cuda)", o->name);
  for (uint32_t i = 0; i < o->ninputs + o->noutputs + o->neval_inputs; i++) {
    bool in = i < o->ninputs, out = !in && i < o->ninputs + o->noutputs;
    const char *a = in ? o->inputs[i] : out ? o->outputs[i - o->ninputs] : o->eval_inputs[i - o->ninputs - o->noutputs];
    const char *eq = strchr(a, '=');
    if (!eq || eq == a || !eq[1])
      return mlc_cli_usage_error(in ? "--input %s: expected NAME=FILE" : out ? "--output %s: expected NAME=FILE"
                                                                             : "--eval-input %s: expected NAME=FILE", a);
  }
  for (uint32_t i = 0; i < o->ndefines; i++)
    for (uint32_t k = 0; k < i; k++)
      if (!strcmp(o->defines[i].name, o->defines[k].name)) return mlc_cli_usage_error("-D %s is given twice", o->defines[i].name);
  return -1;
}

int mlc_cli_no_target(const char *target) {
  fprintf(stderr, "mlc: target '%s' is not built into this mlc yet: its code generator does not exist "
          "(the model was checked; no artifact was written)\n", target);
  return EXIT_NO_TARGET;
}

int mlc_cli_fail_status(mlc_status st) {
  fprintf(stderr, "mlc: %s\n", mlc_status_message(st));
  mlc_status_code_t code = mlc_status_code(st);
  mlc_status_free(st);
  return mlc_exit_status(code);
}
