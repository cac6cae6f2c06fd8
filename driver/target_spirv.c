/* SPIR-V target glue for the driver (see target_spirv.h). */
#include "driver/target_spirv.h"
#include "driver/target.h"

#include <errno.h>
#include <string.h>

#include "codegen/artifact.h"
#include "codegen/plan.h"
#include "passes/passes.h"
#include "runtime/vulkan/device.h"

mlc_status mlc_spirv_build_program(mlc_program *p, mlc_spirv_build *b, FILE *progress) {
  memset(b, 0, sizeof *b);
  b->p = p;
  double t0 = mlc_now();
  mlc_spirv_options o = {.coopmat = true, .optimize = true};
  MLC_RETURN_IF_ERROR(mlc_spirv_emit(p, &o, &b->mod));
  uint32_t steps = 0;
  size_t words = 0;
  for (uint32_t k = 0; k < p->nfuncs; k++)
    for (uint32_t i = 0; i < p->funcs[k].n; i++) steps += b->mod.kernel_of[k][i] != UINT32_MAX;
  for (uint32_t i = 0; i < b->mod.nkernels; i++) words += b->mod.kernels[i].nwords;
  if (progress)
    fprintf(progress, "mlc: emitted SPIR-V for %u steps: %u distinct kernels, %zu KiB, in %.2f s\n", steps,
            b->mod.nkernels, words * 4 / 1024, mlc_now() - t0);
  mlc_plan_code code; /* the plan carries every module */
  mlc_plan_code_vulkan(p->arena, b->mod.kernels, b->mod.nkernels, &code);
  mlc_plan_encode_code(p, mlc_spirv_kernel_namer, &b->mod, mlc_plan_unit_16bit_matrix, &code, &b->plan, &b->plan_bytes);
  return NULL;
}

mlc_status mlc_spirv_write_artifact(mlc_spirv_build *b, const char *dir, const char *source) {
  mlc_program *p = b->p;
  MLC_RETURN_IF_ERROR(mlc_artifact_mkdir(dir));
  for (uint32_t i = 0; i < b->mod.nkernels; i++) {
    const mlc_vk_kernel *k = &b->mod.kernels[i];
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.spv", dir, k->symbol);
    FILE *f = fopen(path, "wb");
    bool ok = f && fwrite(k->words, 4, k->nwords, f) == k->nwords;
    if (f) ok &= fclose(f) == 0;
    if (!ok) return mlc_status_make(MLC_IO, "cannot write %s: %s", path, strerror(errno));
  }
  mlc_artifact a = {.dir = dir, .source = source, .plan = b->plan, .plan_bytes = b->plan_bytes,
                    .device_driver = "vulkan"};
  return mlc_artifact_write(p, &a);
}

mlc_status mlc_spirv_open(mlc_spirv_build *b, int ordinal, FILE *progress, mlc_device **out) {
  if (!b->parsed) MLC_RETURN_IF_ERROR(mlc_plan_parse(b->plan, b->plan_bytes, mlc_allocator_default(), &b->parsed));
  mlc_device_options o = {.allocator = mlc_allocator_default(), .plan = b->parsed, .progress = progress};
  return mlc_device_create("vulkan", ordinal, &o, out);
}

void mlc_spirv_build_free(mlc_spirv_build *b) {
  mlc_plan_free(b->parsed);
  b->parsed = NULL;
}

/* The descriptor's operations (driver/target.h). */

void mlc_spirv_target_release(void *b) { mlc_spirv_build_free(b); }

mlc_status mlc_spirv_target_build(void *b, mlc_program *p, FILE *progress, int rank) {
  (void)rank;
  return mlc_spirv_build_program(p, b, progress);
}

mlc_status mlc_spirv_target_write(void *vb, const char *dir, const char *source, mlc_target_files *out) {
  mlc_spirv_build *b = vb;
  out->what = mlc_arena_printf(b->p->arena, "%u SPIR-V modules (<symbol>.spv, also embedded in %s.c), %s.mlcplan (the "
                               "plan with its kernels)", b->mod.nkernels, b->p->name, b->p->name);
  return mlc_spirv_write_artifact(b, dir, source);
}

/* Without Vulkan here: MLC_UNIMPLEMENTED, which the driver reports as "not available" (4). */
mlc_status mlc_spirv_target_open(void *vb, int ordinal, FILE *progress, int rank, mlc_session_options *so,
                                 const uint8_t **plan, size_t *plan_bytes) {
  mlc_spirv_build *b = vb;
  (void)rank;
  *plan = b->plan;
  *plan_bytes = b->plan_bytes;
  return mlc_spirv_open(b, ordinal, progress, &so->device);
}

bool mlc_spirv_target_supports_op(mlc_op op, char *why, size_t whyn) {
  if (mlc_spirv_supports_op(op)) return true;
  snprintf(why, whyn, "%s: the spirv target has no kernel for this op", mlc_ops[op].name);
  return false;
}
