/* Validation of emitted modules with SPIRV-Tools' C API, for the Vulkan
 * environment the kernel needs: Vulkan 1.2 for the portable kernels, 1.3
 * for the cooperative-matrix ones. */
#include <spirv-tools/libspirv.h>
#include <stdio.h>

#include "codegen/spirv/emit.h"

bool mlc_spirv_validate_env(const uint32_t *words, size_t nwords, bool vulkan13, char *err, size_t errn) {
  spv_context ctx = spvContextCreate(vulkan13 ? SPV_ENV_VULKAN_1_3 : SPV_ENV_VULKAN_1_2);
  spv_validator_options vo = spvValidatorOptionsCreate();
  spv_const_binary_t bin = {words, nwords};
  spv_diagnostic diag = NULL;
  spv_result_t r = spvValidateWithOptions(ctx, vo, &bin, &diag);
  bool ok = r == SPV_SUCCESS;
  if (!ok)
    snprintf(err, errn, "%s (word %zu)", diag && diag->error ? diag->error : "invalid SPIR-V", diag ? diag->position.index : (size_t)0);
  spvDiagnosticDestroy(diag);
  spvValidatorOptionsDestroy(vo);
  spvContextDestroy(ctx);
  return ok;
}

bool mlc_spirv_validate(const uint32_t *words, size_t nwords, char *err, size_t errn) {
  return mlc_spirv_validate_env(words, nwords, false, err, errn);
}
