/* train_entry: runs one entry point of a .mdl model on the CPU target and
 * writes every output to a raw file, for the gradient checks in
 * grad_check.py.  `mlc run` only runs forward; this runs "train" (or any
 * entry named with --entry) the same way: compile through the passes,
 * codegen/llvm, JIT, a runtime session, weights from safetensors.
 *
 *   train_entry MODEL.mdl OUTDIR [--weights W.safetensors] [--input NAME=FILE]...
 *               [--entry NAME] [--threads N] [--fd K --fd-step H] [NAME=VALUE]...
 *
 * OUTDIR/outputs.txt gets one line per output: name, file, dtype, dims.
 * Files are the raw little-endian values; ':' in a name becomes '_' in its
 * file name ("grad:w" -> grad_w.bin).  Inputs come from raw files, except
 * "opt.step" and "opt.lr", which the runtime keeps.
 *
 * --fd K: central differences of the compiled model's own loss.  For each
 * f32 parameter with a "grad:<name>" output, K elements spread evenly over
 * the tensor are moved by +-H in place and the entry is run again; OUTDIR/
 * fd.txt gets "name index grad fd" per element, so the backward can be
 * checked against the forward it was derived from, with no reference
 * implementation in between.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver/target_cpu.h"
#include "frontend/frontend.h"
#include "passes/passes.h"
#include "runtime/plan.h"
#include "runtime/session.h"

#define MAX_ARGS 64

static void die(const char *fmt, const char *a, const char *b) {
  fprintf(stderr, "train_entry: ");
  fprintf(stderr, fmt, a, b);
  fputc('\n', stderr);
  exit(1);
}

static void check(mlc_status st) {
  if (st) die("%s%s", mlc_status_message(st), "");
}

static char *read_all(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) die("cannot open %s: %s", path, strerror(errno));
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) die("cannot read %s%s", path, "");
  fclose(f);
  buf[n] = 0;
  *len = (size_t)n;
  return buf;
}

static const char *dtype_name(int dt) {
  static const char *names[] = {"?", "f32", "bf16", "f16", "i32", "i64", "bool"};
  return dt >= 0 && dt < 7 ? names[dt] : "?";
}

/* The loss as a double, whatever its float dtype (f32 only, today). */
static double read_loss(mlc_session *s, const char *entry) {
  const void *data;
  const mlc_plan_shape *shape;
  check(mlc_session_output(s, entry, "loss", &data, &shape));
  if (shape->dtype != 1) die("--fd needs an f32 loss%s%s", "", "");
  return *(const float *)data;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: train_entry MODEL.mdl OUTDIR [--weights W] [--input NAME=FILE]... [--entry NAME] "
                    "[--threads N] [--fd K --fd-step H] [NAME=VALUE]...\n");
    return 2;
  }
  const char *model = argv[1], *outdir = argv[2], *weights = NULL, *entry = "train";
  const char *inputs[MAX_ARGS];
  mlc_define defs[MAX_ARGS];
  uint32_t ninputs = 0, ndefs = 0;
  int threads = 1, fd_k = 0;
  double fd_step = 1e-2;
  for (int i = 3; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--weights") && i + 1 < argc) weights = argv[++i];
    else if (!strcmp(a, "--input") && i + 1 < argc && ninputs < MAX_ARGS) inputs[ninputs++] = argv[++i];
    else if (!strcmp(a, "--entry") && i + 1 < argc) entry = argv[++i];
    else if (!strcmp(a, "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
    else if (!strcmp(a, "--fd") && i + 1 < argc) fd_k = atoi(argv[++i]);
    else if (!strcmp(a, "--fd-step") && i + 1 < argc) fd_step = atof(argv[++i]);
    else if (strchr(a, '=') && a[0] != '-' && ndefs < MAX_ARGS) {
      char *eq = strchr(a, '=');
      defs[ndefs++] = (mlc_define){strndup(a, (size_t)(eq - a)), eq + 1};
    } else {
      die("unknown argument '%s'%s", a, "");
    }
  }

  /* Compile: frontend, passes, codegen, JIT. */
  size_t len;
  char *src = read_all(model, &len);
  mlc_arena arena;
  mlc_arena_init(&arena);
  mlc_diag diag;
  mlc_diag_init(&diag, stderr);
  mlc_program prog;
  mlc_program_init(&prog, &arena);
  mlc_lower_options lo = {defs, ndefs, NULL, 0, false, 0, false};
  mlc_pipeline_options po = {.keep_grads = true}; /* the grad:* outputs are what this checks */
  if (!mlc_frontend_run(&prog, &diag, model, src, len, &lo, NULL) || !mlc_pipeline_run(&prog, &diag, &po)) {
    mlc_diag_summary(&diag);
    return 1;
  }
  mlc_cpu_build b;
  mlc_status cst = mlc_cpu_compile(&prog, &b, NULL);
  if (!cst) cst = mlc_cpu_jit(&b);
  if (cst) die("%s%s", mlc_status_message(cst), "");
  mlc_plan *plan;
  check(mlc_plan_parse(b.plan, b.plan_bytes, mlc_allocator_default(), &plan));
  mlc_session_options so = {NULL, mlc_cpu_lookup, &b, threads, false, {0}, NULL};
  mlc_session *s;
  check(mlc_session_create(plan, &so, &s));
  if (weights) check(mlc_session_load_weights(s, weights));
  else mlc_session_init_params(s, 0);

  const mlc_plan_entry *e = mlc_plan_find_entry(plan, entry);
  if (!e) die("the model has no entry point '%s'%s", entry, "");
  for (uint32_t k = 0; k < e->ninputs; k++) {
    const char *name = e->inputs[k].name, *path = NULL;
    for (uint32_t i = 0; i < ninputs; i++)
      if (!strncmp(inputs[i], name, strlen(name)) && inputs[i][strlen(name)] == '=') path = inputs[i] + strlen(name) + 1;
    if (!path && !strncmp(name, "opt.", 4)) continue; /* the runtime's own: step count, learning rate */
    if (!path) die("input '%s' needs --input %s=FILE", name, name);
    size_t n;
    char *data = read_all(path, &n);
    check(mlc_session_set_input(s, entry, name, data, n));
    free(data);
  }
  check(mlc_session_run(s, entry));

  char path[4096];
  snprintf(path, sizeof path, "%s/outputs.txt", outdir);
  FILE *list = fopen(path, "w");
  if (!list) die("cannot write %s: %s", path, strerror(errno));
  for (uint32_t k = 0; k < e->noutputs; k++) {
    const void *data;
    const mlc_plan_shape *shape;
    check(mlc_session_output(s, entry, e->outputs[k].name, &data, &shape));
    char file[1024];
    snprintf(file, sizeof file, "%s.bin", e->outputs[k].name);
    for (char *c = file; *c; c++)
      if (*c == ':' || *c == '/') *c = '_';
    snprintf(path, sizeof path, "%s/%s", outdir, file);
    FILE *f = fopen(path, "wb");
    uint64_t bytes = mlc_plan_shape_bytes(shape);
    if (!f || fwrite(data, 1, (size_t)bytes, f) != bytes || fclose(f)) die("cannot write %s: %s", path, strerror(errno));
    fprintf(list, "%s %s %s", e->outputs[k].name, file, dtype_name(shape->dtype));
    for (int i = 0; i < shape->rank; i++) fprintf(list, " %lld", (long long)shape->dims[i]);
    fputc('\n', list);
  }
  fclose(list);

  if (fd_k > 0) {
    /* An optimizer would move the weights on every run. */
    for (uint32_t k = 0; k < e->noutputs; k++)
      if (!strncmp(e->outputs[k].name, "update:", 7)) die("--fd needs a train block without an optimizer%s%s", "", "");
    /* Copy every gradient first: each run below changes the outputs. */
    float **grads = calloc(plan->nparams + 1, sizeof *grads);
    uint64_t *ng = calloc(plan->nparams + 1, sizeof *ng);
    if (!grads || !ng) die("out of memory%s%s", "", "");
    for (uint32_t p = 0; p < plan->nparams; p++) {
      char gname[1024];
      snprintf(gname, sizeof gname, "grad:%s", plan->params[p].name);
      bool has = false;
      for (uint32_t k = 0; k < e->noutputs; k++) has |= !strcmp(e->outputs[k].name, gname);
      if (!has || plan->params[p].shape.dtype != 1) continue;
      const void *gdata;
      const mlc_plan_shape *gshape;
      check(mlc_session_output(s, entry, gname, &gdata, &gshape));
      ng[p] = mlc_plan_shape_bytes(gshape) / 4;
      grads[p] = malloc(ng[p] * sizeof **grads);
      if (!grads[p]) die("out of memory%s%s", "", "");
      memcpy(grads[p], gdata, ng[p] * sizeof **grads);
    }
    snprintf(path, sizeof path, "%s/fd.txt", outdir);
    FILE *fd = fopen(path, "w");
    if (!fd) die("cannot write %s: %s", path, strerror(errno));
    for (uint32_t p = 0; p < plan->nparams; p++) {
      if (!grads[p]) continue;
      uint64_t n = ng[p];
      float *w = mlc_session_param_data(s, p);
      uint64_t count = (uint64_t)fd_k < n ? (uint64_t)fd_k : n;
      for (uint64_t j = 0; j < count; j++) {
        uint64_t idx = count > 1 ? j * (n - 1) / (count - 1) : 0;
        float w0 = w[idx];
        w[idx] = w0 + (float)fd_step;
        double hp = (double)w[idx] - w0;
        check(mlc_session_run(s, entry));
        double lp = read_loss(s, entry);
        w[idx] = w0 - (float)fd_step;
        double hm = (double)w0 - w[idx];
        check(mlc_session_run(s, entry));
        double lm = read_loss(s, entry);
        w[idx] = w0;
        fprintf(fd, "%s %llu %.9g %.9g\n", plan->params[p].name, (unsigned long long)idx, grads[p][idx], (lp - lm) / (hp + hm));
      }
      free(grads[p]);
    }
    fclose(fd);
    free(grads);
    free(ng);
  }

  mlc_session_destroy(s);
  mlc_plan_free(plan);
  mlc_cpu_build_free(&b);
  mlc_arena_free(&arena);
  free(src);
  for (uint32_t i = 0; i < ndefs; i++) free((char *)defs[i].name);
  return 0;
}
