// The features an x86 CPU name stands for, as LLVM knows them.  LLVM 14's C
// API gives the host's features (LLVMGetHostCPUFeatures) but not those of a
// CPU named with --cpu, and mlc needs them twice: the code generator picks
// its vector width from them, and the artifact records them so that a
// machine without one is refused at create instead of dying of SIGILL.  So
// this one function is C++ (as codegen/spirv/optimize.cpp is, for the same
// reason), over LLVM's own table in X86TargetParser.
#include <cstdio>
#include <cstring>

#include <llvm/ADT/STLExtras.h>
#include <llvm/ADT/SmallVector.h>
#include <llvm/ADT/StringMap.h>
#include <llvm/ADT/StringRef.h>
#include <llvm/Support/X86TargetParser.h>

// "+popcnt,+sse,+sse2,+sse4.2,..." for a 64-bit x86 CPU name into out (n
// bytes); false when LLVM knows no such CPU, or out is too small.  The
// CPU's own list comes first, then (sorted) the features it implies that the
// list leaves out: LLVM 14's x86-64-v4 lists avx512vl, bw, dq and cd but not
// avx512f, which the code generator's vector width asks for.
extern "C" bool mlc_llvm_x86_cpu_features(const char *cpu, char *out, size_t n) {
  if (llvm::X86::parseArchX86(cpu, /*Only64Bit=*/true) == llvm::X86::CK_None) return false;
  llvm::SmallVector<llvm::StringRef, 64> features;
  llvm::X86::getFeaturesForCPU(cpu, features);
  llvm::StringMap<bool> implied;
  for (llvm::StringRef f : features) llvm::X86::updateImpliedFeatures(f, /*Enabled=*/true, implied);
  for (llvm::StringRef f : features) implied.erase(f);
  llvm::SmallVector<llvm::StringRef, 64> more;
  for (const auto &kv : implied)
    if (kv.getValue()) more.push_back(kv.getKey());
  llvm::sort(more);
  features.append(more.begin(), more.end());
  size_t len = 0;
  out[0] = 0;
  for (llvm::StringRef f : features) {
    int k = snprintf(out + len, n - len, "%s+%.*s", len ? "," : "", static_cast<int>(f.size()), f.data());
    if (k < 0 || static_cast<size_t>(k) >= n - len) return false;
    len += static_cast<size_t>(k);
  }
  return true;
}
