/* mlc compile, and what every model command starts with: read the file,
 * parse and lower it (or import it: frontend/onnx/ for a .onnx file), run
 * the passes.  compile --target then builds for the target and writes the
 * artifact, bundled (bundle.c). */
#define _XOPEN_SOURCE 700 /* fileno */
#include "driver/cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "codegen/artifact.h"
#include "driver/bundle.h"
#include "passes/passes.h"
#include "runtime/dist/bootstrap.h"

#define MAX_SOURCE_BYTES (64u << 20)
#define MAX_ONNX_BYTES (2040u << 20) /* protobuf's limit is 2 GiB */

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

/* The pass pipeline that both frontends end with (below). */
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
  bool ok = mlc_onnx_import(prog, diag, o->file, o->file, (const uint8_t *)src, len, o->defines, o->ndefines, weights);
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

int mlc_cmd_frontend(const options *o, mlc_program *prog, mlc_diag *diag, char **src, onnx_weights *weights) {
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
  /* generate runs the decode entries only: no train step to compile */
  mlc_lower_options lo = {o->defines, o->ndefines, o->entry, 0, o->no_train || o->cmd == CMD_GENERATE, o->accum,
                          o->cmd == CMD_GENERATE};
  mlc_lower_io io = {false, weights};
  bool ok = !diag->errors && mlc_lower_io_run(prog, diag, ast, &lo, &io);
  if (ok && o->artifact_name) prog->name = o->artifact_name;
  /* an artifact's name must be free in its C; --name was checked with the options */
  const char *clash = ok && o->cmd == CMD_COMPILE && o->target && !o->artifact_name ? mlc_artifact_name_clash(prog->name) : NULL;
  if (clash) {
    mlc_error(diag, prog->name_loc, "the model's name '%s' (this module's, in lower case) cannot name the artifact's C type and "
              "functions: it is %s; give the artifact another name with --name NAME", prog->name, clash);
    ok = false;
  }
  mlc_options_apply(prog, &o->cg);
  double t3 = mlc_now();
  if (tf) fprintf(tf, "  %-12s %9.3f ms\n", "lower", (t3 - t2) * 1e3);
  return passes(o, prog, diag, ok, t0);
}

/* A causal attention whose q and k differ in length gets its gradient from
 * primitive ops (passes/autodiff.c), its mask from arange, lt and where:
 * in a train entry, those must have kernels too. */
static bool causal_cross_grad_supported(const mlc_driver_target *tgt, const mlc_func *f, const mlc_node *n, mlc_diag *diag) {
  if (strcmp(f->name, "train") || n->op != MLC_OP_ATTENTION || !n->a.causal ||
      f->nodes[n->in[0]].type.dim[2] == f->nodes[n->in[1]].type.dim[2])
    return true;
  static const mlc_op need[] = {MLC_OP_ARANGE, MLC_OP_LT, MLC_OP_WHERE};
  for (size_t i = 0; i < sizeof need / sizeof *need; i++) {
    char why[160];
    if (tgt->supports_op(need[i], why, sizeof why)) continue;
    mlc_error(diag, n->loc, "the gradient of a causal attention whose query and key lengths differ needs %s, and %s",
              mlc_ops[need[i]].name, why);
    return false;
  }
  return true;
}

/* Every op the frontend made has a kernel on the target, or an error at the
 * op's source.  The passes add only ops of targets that have them (and the
 * gradients of ops checked here), so this runs before them. */
static bool target_supports(const options *o, const mlc_program *prog, mlc_diag *diag) {
  const mlc_driver_target *tgt = o->target ? mlc_driver_target_find(o->target) : NULL;
  if (!tgt || !tgt->supports_op) return true;
  bool ok = true, seen[MLC_OP_COUNT] = {0};
  for (uint32_t k = 0; k < prog->nfuncs; k++)
    for (uint32_t i = 0; i < prog->funcs[k].n; i++) {
      const mlc_node *n = &prog->funcs[k].nodes[i];
      char why[160];
      if (!causal_cross_grad_supported(tgt, &prog->funcs[k], n, diag)) ok = false;
      if (seen[n->op]) continue;
      if (!tgt->supports_op((mlc_op)n->op, why, sizeof why)) {
        seen[n->op] = true; /* once per op */
        mlc_error(diag, n->loc, "%s", why);
        ok = false;
      } else if (tgt->supports_node && !tgt->supports_node(&prog->funcs[k], n, why, sizeof why)) { /* the op, not these shapes */
        mlc_error(diag, n->loc, "%s", why);
        ok = false;
      }
    }
  /* --quantize makes qlinear (passes/quantize.c) of the linears: the target needs its kernel */
  char why[160];
  for (uint32_t k = 0; ok && prog->opts.quant_bits && k < prog->nfuncs; k++)
    for (uint32_t i = 0; ok && i < prog->funcs[k].n; i++)
      if (prog->funcs[k].nodes[i].op == MLC_OP_LINEAR && !tgt->supports_op(MLC_OP_QLINEAR, why, sizeof why)) {
        mlc_error(diag, prog->funcs[k].nodes[i].loc, "--quantize int%d: %s; weight-only quantisation runs on the cpu, spirv, cuda and metal targets",
                  prog->opts.quant_bits, why);
        ok = false;
      }
  /* --matmul=fp8 makes quant and scaled_mm (passes/fp8.c) of a train entry's linears */
  bool train = false;
  for (uint32_t k = 0; k < prog->nfuncs; k++) train |= !strcmp(prog->funcs[k].name, "train");
  if (ok && train && mlc_matmul_is_fp8(prog->opts.matmul) &&
      !(tgt->supports_op(MLC_OP_SCALED_MM, why, sizeof why) && tgt->supports_op(MLC_OP_QUANT, why, sizeof why))) {
    mlc_error(diag, prog->train.loc, "matmul=fp8: %s; FP8 training runs on the cuda target (Hopper's FP8 "
              "tensor cores) and the cpu target (emulated), or train without --matmul=fp8 / precision(matmul=fp8)", why);
    ok = false;
  }
  return ok;
}

/* The pass pipeline after either frontend; -1 to go on, or the exit status. */
static int passes(const options *o, mlc_program *prog, mlc_diag *diag, bool ok, double t0) {
  FILE *tf = o->time_passes ? stderr : NULL;
  mlc_pipeline_options po = {o->print_after, stdout, tf, o->target, sharded(o), false};
  ok = ok && target_supports(o, prog, diag) && mlc_pipeline_run(prog, diag, &po);
  if (tf) fprintf(tf, "  %-12s %9.3f ms\n", "total", (mlc_now() - t0) * 1e3);
  if (!ok) {
    mlc_diag_summary(diag);
    return EXIT_USER;
  }
  if (o->emit && !strcmp(o->emit, "ir")) mlc_print_program(stdout, prog);
  if (o->stats) mlc_print_stats(stdout, prog);
  return -1;
}

#if defined(MLC_HAVE_CPU) || defined(MLC_HAVE_CUDA) || defined(MLC_HAVE_SPIRV)
/* After a target wrote its artifact files: the bundle (bundle.c: lib<name>.a
 * with the runtime inside, and the target's object files), then what it
 * holds (`files`: the target's own). */
static mlc_status bundle(const options *o, const char *dir, const mlc_program *p, const mlc_target_files *files) {
  MLC_RETURN_IF_ERROR(mlc_bundle_artifact(dir, p->name, files->objects, files->nobjects, o->cc ? o->cc : "cc"));
  fprintf(stderr, "mlc: wrote %s/%s.h, %s.c, %s, lib%s.a (all of it and the runtime), %s.cmake and %s.pc\n", dir,
          p->name, p->name, files->what, p->name, p->name, p->name);
  return NULL;
}

#ifdef MLC_HAVE_ONNX
mlc_safetensors_dtype mlc_cli_st_dtype(mlc_dtype dt) {
  switch (dt) {
  case MLC_DT_F32: return MLC_ST_F32;
  case MLC_DT_BF16: return MLC_ST_BF16;
  case MLC_DT_F16: return MLC_ST_F16;
  case MLC_DT_I32: return MLC_ST_I32;
  case MLC_DT_I64: return MLC_ST_I64;
  case MLC_DT_BOOL: return MLC_ST_BOOL;
  default: return MLC_ST_DTYPE_COUNT;
  }
}
#endif

/* The values of an ONNX model's initializers (and Constant tensors), which
 * the plan does not carry (their parameters' init is MLC_INIT_GIVEN), as
 * DIR/<name>.safetensors, under their parameters' names; its name in *out,
 * "" when the model has none. */
static mlc_status write_given(const char *dir, const mlc_program *prog, const onnx_weights *ow, char *out, size_t n) {
  out[0] = 0;
#ifdef MLC_HAVE_ONNX
  if (!ow || !ow->n) return NULL;
  mlc_safetensors_entry *e = calloc(ow->n, sizeof *e);
  if (!e) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory");
  for (uint32_t i = 0; i < ow->n; i++) {
    const mlc_param *p = &prog->params[ow->w[i].param];
    e[i] = (mlc_safetensors_entry){p->name, mlc_cli_st_dtype((mlc_dtype)p->type.dtype), p->type.rank, p->type.dim,
                                   ow->w[i].data};
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.safetensors", dir, prog->name);
  static const mlc_safetensors_kv meta[] = {{"format", "pt"}};
  mlc_status st = mlc_safetensors_save(path, e, ow->n, meta, 1, mlc_allocator_default());
  free(e);
  if (!st) snprintf(out, n, "%s.safetensors", prog->name);
  return st;
#else
  (void)dir, (void)prog, (void)ow, (void)n;
  return NULL;
#endif
}

/* Builds the program for the target, then writes the artifact. */
int mlc_cmd_compile(const options *o, mlc_program *prog, const onnx_weights *ow) {
  const mlc_driver_target *tgt = mlc_driver_target_find(o->target);
  const char *dir = o->outdir ? o->outdir : "out";
  mlc_status st = NULL;
  void *b = calloc(1, tgt->build_bytes);
  mlc_dist_env env;
  mlc_target_files files = {0};
  /* An artifact runs on machines other than this one: a portable CPU unless --cpu says otherwise, and
   * then builds for stronger CPUs beside it, of which create picks one. */
  if (!prog->opts.cpu) {
    prog->opts.cpu = "baseline";
    prog->opts.cpu_versions = true;
  }
  if (!b) st = mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory");
  if (!st) st = mlc_dist_env_read(&env);
  if (!st) st = tgt->build(b, prog, stderr, env.rank);
  if (!st) st = tgt->write(b, dir, o->file, &files);
  char given[300];
  if (!st) st = write_given(dir, prog, ow, given, sizeof given);
  if (!st) st = bundle(o, dir, prog, &files);
  if (!st && given[0])
    fprintf(stderr, "mlc: wrote %s/%s, the values of the model's initializers, which the artifact does not carry: load "
            "them before it runs (%s_load_weights, mlc run --weights)\n", dir, given, prog->name);
  if (b && tgt->release) tgt->release(b);
  free(b);
  return st ? mlc_cli_fail_status(st) : EXIT_OK;
}
#endif
