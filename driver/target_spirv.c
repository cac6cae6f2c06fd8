/* SPIR-V target glue for the driver (see target_spirv.h). */
#include "driver/target_spirv.h"

#include <errno.h>
#include <string.h>

#include "codegen/artifact.h"
#include "codegen/plan.h"
#include "passes/passes.h"
#include "runtime/vulkan/device.h"

bool mlc_spirv_build_program(mlc_program *p, mlc_spirv_build *b, FILE *progress, char *err, size_t errn) {
  memset(b, 0, sizeof *b);
  b->p = p;
  double t0 = mlc_now();
  mlc_spirv_options o = {.coopmat = true, .optimize = true};
  if (!mlc_spirv_emit(p, &o, &b->mod, err, errn)) return false;
  uint32_t steps = 0;
  size_t words = 0;
  for (uint32_t k = 0; k < p->nfuncs; k++)
    for (uint32_t i = 0; i < p->funcs[k].n; i++) steps += b->mod.kernel_of[k][i] != UINT32_MAX;
  for (uint32_t i = 0; i < b->mod.nkernels; i++) words += b->mod.kernels[i].nwords;
  if (progress)
    fprintf(progress, "mlc: emitted SPIR-V for %u steps: %u distinct kernels, %zu KiB, in %.2f s\n", steps,
            b->mod.nkernels, words * 4 / 1024, mlc_now() - t0);
  mlc_plan_encode_units(p, mlc_spirv_kernel_namer, &b->mod, mlc_plan_unit_16bit_matrix, &b->plan, &b->plan_bytes);
  return true;
}

bool mlc_spirv_write_artifact(mlc_spirv_build *b, const char *dir, const char *source, char *err, size_t errn) {
  mlc_program *p = b->p;
  if (!mlc_artifact_mkdir(dir, err, errn)) return false;
  for (uint32_t i = 0; i < b->mod.nkernels; i++) {
    const mlc_vk_kernel *k = &b->mod.kernels[i];
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.spv", dir, k->symbol);
    FILE *f = fopen(path, "wb");
    bool ok = f && fwrite(k->words, 4, k->nwords, f) == k->nwords;
    if (f) ok &= fclose(f) == 0;
    if (!ok) {
      snprintf(err, errn, "cannot write %s: %s", path, strerror(errno));
      return false;
    }
  }
  mlc_artifact a = {.dir = dir, .source = source, .plan = b->plan, .plan_bytes = b->plan_bytes,
                    .vk_kernels = b->mod.kernels, .nvk_kernels = b->mod.nkernels};
  return mlc_artifact_write(p, &a, err, errn);
}

mlc_status mlc_spirv_open(mlc_spirv_build *b, int ordinal, FILE *progress, mlc_device **out) {
  mlc_vk_code code = {.ordinal = ordinal, .kernels = b->mod.kernels, .nkernels = b->mod.nkernels, .progress = progress};
  return mlc_vk_device_create(&code, mlc_allocator_default(), out);
}
