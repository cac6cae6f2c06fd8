/* mlc_spirv_dump MODEL.mdl OUTDIR [--coopmat] [--nv] [--no-opt] [-D NAME=VALUE]...
 *
 * Compiles a model for the spirv target (both entry points: forward and,
 * with a train block, the train step) and writes each distinct kernel's
 * module as OUTDIR/<symbol>.spv, and OUTDIR/kernels.txt: one line per
 * kernel with its symbol, arguments, scratch bytes, dispatches
 * (entry:gx,gy,gz) and, for cooperative-matrix kernels, "coopmat" and the
 * fallback's symbol.  --nv: the cooperative-matrix modules in their NV form
 * alone (mlc's --spirv-coopmat=nv), which spirv-val knows.  For spirv-val (tests/spirv/spirv_val_examples.sh) and
 * for reading what the code generator emits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/spirv/spirv.h"
#include "frontend/frontend.h"
#include "passes/passes.h"

static char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)len + 1);
  if (s && fread(s, 1, (size_t)len, f) != (size_t)len) {
    free(s);
    s = NULL;
  }
  fclose(f);
  if (s) s[len] = 0, *n = (size_t)len;
  return s;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: mlc_spirv_dump MODEL.mdl OUTDIR [--coopmat] [--nv] [--no-opt] [-D NAME=VALUE]...\n");
    return 2;
  }
  mlc_spirv_options so = {.coopmat = false, .optimize = true};
  mlc_define defs[32];
  uint32_t nd = 0;
  bool nv = false;
  for (int i = 3; i < argc; i++) {
    if (!strcmp(argv[i], "--coopmat")) so.coopmat = true;
    else if (!strcmp(argv[i], "--nv")) nv = true;
    else if (!strcmp(argv[i], "--no-opt")) so.optimize = false;
    else if (!strcmp(argv[i], "-D") && i + 1 < argc && nd < 32) {
      char *d = argv[++i], *eq = strchr(d, '=');
      if (!eq) return fprintf(stderr, "-D %s: expected NAME=VALUE\n", d), 2;
      *eq = 0;
      defs[nd++] = (mlc_define){d, eq + 1};
    } else {
      return fprintf(stderr, "mlc_spirv_dump: unknown argument %s\n", argv[i]), 2;
    }
  }
  size_t len;
  char *src = slurp(argv[1], &len);
  if (!src) return fprintf(stderr, "mlc_spirv_dump: cannot read %s\n", argv[1]), 1;
  mlc_arena arena;
  mlc_arena_init(&arena);
  mlc_diag diag;
  mlc_diag_init(&diag, stderr);
  mlc_program prog;
  mlc_program_init(&prog, &arena);
  mlc_lower_options lo = {defs, nd, NULL, 0, false, 0, false};
  mlc_pipeline_options po = {.dump = stdout, .target = "spirv"};
  int rc = 0;
  if (!mlc_frontend_run(&prog, &diag, argv[1], src, len, &lo, NULL) || !mlc_pipeline_run(&prog, &diag, &po)) {
    rc = 1;
    goto out;
  }
  prog.opts.spirv_coopmat_nv = nv;
  mlc_spirv_module m;
  mlc_status st = mlc_spirv_emit(&prog, &so, &m);
  if (st) {
    fprintf(stderr, "mlc_spirv_dump: %s\n", mlc_status_message(st));
    mlc_status_free(st);
    rc = 1;
    goto out;
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/kernels.txt", argv[2]);
  FILE *t = fopen(path, "w");
  if (!t) {
    fprintf(stderr, "mlc_spirv_dump: cannot write %s\n", path);
    rc = 1;
    goto out;
  }
  for (uint32_t k = 0; k < m.nkernels; k++) {
    const mlc_vk_kernel *kd = &m.kernels[k];
    snprintf(path, sizeof path, "%s/%s.spv", argv[2], kd->symbol);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(kd->words, 4, kd->nwords, f) != kd->nwords) {
      fprintf(stderr, "mlc_spirv_dump: cannot write %s\n", path);
      rc = 1;
    }
    if (f) fclose(f);
    fprintf(t, "%s nargs=%u scratch=%llu", kd->symbol, kd->nargs, (unsigned long long)kd->scratch);
    for (uint32_t d = 0; d < kd->ndispatch; d++)
      fprintf(t, " %s:%u,%u,%u", kd->dispatch[d].entry, kd->dispatch[d].groups[0], kd->dispatch[d].groups[1],
              kd->dispatch[d].groups[2]);
    if (kd->coopmat)
      fprintf(t, " coopmat=%ux%ux%u fallback=%s", kd->coopmat_mnk[0], kd->coopmat_mnk[1], kd->coopmat_mnk[2],
              m.kernels[kd->fallback].symbol);
    fprintf(t, "\n");
  }
  fclose(t);
  printf("%u kernels\n", m.nkernels);
out:
  mlc_arena_free(&arena);
  free(src);
  return rc;
}
