/* Metal target glue for the driver (see target_metal.h). */
#include "driver/target_metal.h"
#include "driver/target.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/artifact.h"
#include "codegen/plan.h"
#include "driver/target_cuda.h"
#include "passes/passes.h"
#include "runtime/profile.h" /* mlc_read_file */
#include "runtime/metal/device.h"

/* On macOS: <name>.metal -> .air -> .metallib with Apple's compiler
 * (xcrun metal, xcrun metallib).  Elsewhere there is none, and the runtime
 * compiles the source when it starts.  Returns the metallib (malloc'ed) or
 * NULL. */
static void *build_metallib(const char *dir, const char *name, size_t *out_n) {
  const char *probe[] = {"xcrun", "--find", "metal", NULL};
  if (mlc_run_tool(probe) != 0) return NULL;
  char src[4096], air[4096], lib[4096];
  snprintf(src, sizeof src, "%s/%s.metal", dir, name);
  snprintf(air, sizeof air, "%s/%s.air", dir, name);
  snprintf(lib, sizeof lib, "%s/%s.metallib", dir, name);
  const char *compile[] = {"xcrun", "-sdk", "macosx", "metal", "-c", src, "-o", air, NULL};
  const char *link[] = {"xcrun", "-sdk", "macosx", "metallib", air, "-o", lib, NULL};
  if (mlc_run_tool(compile) != 0 || mlc_run_tool(link) != 0) return NULL;
  remove(air);
  return mlc_read_file(lib, out_n);
}

mlc_status mlc_metal_build_program(mlc_program *p, mlc_metal_build *b, FILE *progress) {
  memset(b, 0, sizeof *b);
  b->p = p;
  double t0 = mlc_now();
  MLC_RETURN_IF_ERROR(mlc_metal_emit(p, &b->mod));
  uint32_t steps = 0;
  for (uint32_t k = 0; k < p->nfuncs; k++)
    for (uint32_t i = 0; i < p->funcs[k].n; i++) steps += b->mod.kernel_of[k][i] != UINT32_MAX;
  if (progress)
    fprintf(progress, "mlc: emitted MSL for %u steps: %u distinct kernels, %zu KiB of source, in %.2f s\n", steps,
            b->mod.nkernels, b->mod.source_len / 1024, mlc_now() - t0);
  /* The plan carries the MSL (the Metal device still reads the artifact's
   * C tables: runtime/metal/device.h). */
  mlc_plan_code code;
  mlc_plan_code_cuda(p->arena, b->mod.kernels, b->mod.nkernels, MLC_PLAN_FORMAT_MSL, b->mod.source, b->mod.source_len,
                     &code);
  mlc_plan_encode_code(p, mlc_cstyle_kernel_namer, &b->mod, mlc_plan_unit_16bit_matrix, &code, &b->plan, &b->plan_bytes);
  return NULL;
}

mlc_status mlc_metal_write_artifact(mlc_metal_build *b, const char *dir, const char *source) {
  mlc_program *p = b->p;
  MLC_RETURN_IF_ERROR(mlc_artifact_mkdir(dir));
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.metal", dir, p->name);
  FILE *f = fopen(path, "wb");
  bool ok = f && fwrite(b->mod.source, 1, b->mod.source_len, f) == b->mod.source_len;
  if (f) ok &= fclose(f) == 0;
  if (!ok) return mlc_status_make(MLC_IO, "cannot write %s: %s", path, strerror(errno));
  size_t nlib = 0;
  void *lib = build_metallib(dir, p->name, &nlib);
  mlc_artifact a = {.dir = dir, .source = source, .plan = b->plan, .plan_bytes = b->plan_bytes, .metal = true,
                    .cuda_kernels = b->mod.kernels, .ncuda_kernels = b->mod.nkernels, .cuda_source = b->mod.source,
                    .cuda_source_len = b->mod.source_len, .cuda_image = lib, .cuda_image_bytes = nlib};
  mlc_status st = mlc_artifact_write(p, &a);
  free(lib);
  return st;
}

/* The descriptor's operations (driver/target.h). */

mlc_status mlc_metal_target_build(void *b, mlc_program *p, FILE *progress, int rank) {
  (void)rank;
  return mlc_metal_build_program(p, b, progress);
}

mlc_status mlc_metal_target_write(void *vb, const char *dir, const char *source, mlc_target_files *out) {
  mlc_metal_build *b = vb;
  out->what = mlc_arena_printf(b->p->arena, "%s.metal (and %s.metallib where Apple's metal compiler exists; else "
                               "the runtime compiles the source)", b->p->name, b->p->name);
  return mlc_metal_write_artifact(b, dir, source);
}

/* A Metal device on Apple platforms; elsewhere MLC_UNIMPLEMENTED, which the
 * driver reports as "not available" (4). */
mlc_status mlc_metal_target_open(void *vb, int ordinal, FILE *progress, int rank, mlc_session_options *so,
                                 const uint8_t **plan, size_t *plan_bytes) {
  mlc_metal_build *b = vb;
  (void)ordinal, (void)rank;
  *plan = b->plan;
  *plan_bytes = b->plan_bytes;
  mlc_metal_code code = {b->mod.source, NULL, 0, b->mod.kernels, b->mod.nkernels, progress};
  return mlc_metal_device_create(&code, mlc_allocator_default(), &so->device);
}

bool mlc_metal_target_supports_op(mlc_op op, char *why, size_t whyn) {
  if (mlc_metal_supports_op(op)) return true;
  snprintf(why, whyn, "%s: the metal target has no kernel for this op", mlc_ops[op].name);
  return false;
}
