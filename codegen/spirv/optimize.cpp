// SPIRV-Tools' optimizer for the SPIR-V code generator.  Debian 12's
// SPIRV-Tools (2023.1) has the optimizer only in its C++ API (the C API,
// spvOptimizerCreate and friends, came in 2023.2), so this one function is
// C++: the performance passes (what `spirv-opt -O` runs), with the
// optimizer's own validator on and the bindings kept as they are.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <spirv-tools/optimizer.hpp>

extern "C" bool mlc_spirv_optimize(const uint32_t *words, size_t n, bool vulkan13, uint32_t **out, size_t *out_n,
                                   char *err, size_t errn) {
  spvtools::Optimizer opt(vulkan13 ? SPV_ENV_VULKAN_1_3 : SPV_ENV_VULKAN_1_2);
  std::string msg;
  opt.SetMessageConsumer([&msg](spv_message_level_t level, const char *, const spv_position_t &pos, const char *m) {
    if (level <= SPV_MSG_ERROR && msg.empty()) msg = "word " + std::to_string(pos.index) + ": " + m;
  });
  opt.RegisterPerformancePasses();
  spv_optimizer_options oo = spvOptimizerOptionsCreate();
  spvOptimizerOptionsSetRunValidator(oo, true);
  spvOptimizerOptionsSetPreserveBindings(oo, true);
  std::vector<uint32_t> res;
  bool ok = opt.Run(words, n, &res, oo);
  spvOptimizerOptionsDestroy(oo);
  if (!ok) {
    snprintf(err, errn, "the SPIR-V optimizer failed: %s", msg.empty() ? "(no message)" : msg.c_str());
    return false;
  }
  *out = static_cast<uint32_t *>(malloc(res.size() * sizeof(uint32_t)));
  if (!*out) {
    snprintf(err, errn, "out of memory");
    return false;
  }
  memcpy(*out, res.data(), res.size() * sizeof(uint32_t));
  *out_n = res.size();
  return true;
}
