/* Metal target glue for the driver (see target_metal.h). */
#include "driver/target_metal.h"

#include <errno.h>
#include <string.h>

#include "codegen/artifact.h"
#include "codegen/plan.h"
#include "passes/passes.h"

bool mlc_metal_build_program(mlc_program *p, mlc_metal_build *b, FILE *progress, char *err, size_t errn) {
  memset(b, 0, sizeof *b);
  b->p = p;
  double t0 = mlc_now();
  if (!mlc_metal_emit(p, &b->mod, err, errn)) return false;
  uint32_t steps = 0;
  for (uint32_t k = 0; k < p->nfuncs; k++)
    for (uint32_t i = 0; i < p->funcs[k].n; i++) steps += b->mod.kernel_of[k][i] != UINT32_MAX;
  if (progress)
    fprintf(progress, "mlc: emitted MSL for %u steps: %u distinct kernels, %zu KiB of source, in %.2f s\n", steps,
            b->mod.nkernels, b->mod.source_len / 1024, mlc_now() - t0);
  mlc_plan_encode(p, mlc_cuda_kernel_namer, &b->mod, &b->plan, &b->plan_bytes);
  return true;
}

bool mlc_metal_write_artifact(mlc_metal_build *b, const char *dir, const char *source, char *err, size_t errn) {
  mlc_program *p = b->p;
  if (!mlc_artifact_mkdir(dir, err, errn)) return false;
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.metal", dir, p->name);
  FILE *f = fopen(path, "wb");
  bool ok = f && fwrite(b->mod.source, 1, b->mod.source_len, f) == b->mod.source_len;
  if (f) ok &= fclose(f) == 0;
  if (!ok) {
    snprintf(err, errn, "cannot write %s: %s", path, strerror(errno));
    return false;
  }
  /* A .metallib needs Apple's compiler (xcrun metal), which exists only on
   * macOS; without one the runtime compiles the source when it starts. */
  mlc_artifact a = {.dir = dir, .source = source, .plan = b->plan, .plan_bytes = b->plan_bytes, .metal = true,
                    .cuda_kernels = b->mod.kernels, .ncuda_kernels = b->mod.nkernels, .cuda_source = b->mod.source,
                    .cuda_source_len = b->mod.source_len};
  return mlc_artifact_write(p, &a, err, errn);
}
