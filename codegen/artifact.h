/* The artifact `mlc compile --target T -o DIR` writes for an application to
 * link: <name>.h (a typed C API), <name>.c (the plan bytes, which carry the
 * GPU's code, and the glue; the CPU's symbols, which cannot be bytes), the target's compiled kernels, and <name>.cmake and
 * <name>.pc to link it all with CMake or pkg-config. */
#ifndef MLC_CODEGEN_ARTIFACT_H
#define MLC_CODEGEN_ARTIFACT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir/ir.h"
#include "runtime/status.h"
#include "runtime/cuda/kernel.h"

/* CPU, function multiversioning: the same kernels compiled for a stronger
 * CPU than the baseline's, with that build's plan (its GEMM block sizes,
 * and so the work items, follow the vector width) and its symbols. */
typedef struct {
  const char *cpu, *features;
  const uint8_t *plan;
  size_t plan_bytes;
  const char *const *kernels;
  uint32_t nkernels;
} mlc_artifact_cpu_build;

typedef struct {
  const char *dir;               /* output folder; created if missing */
  const char *source;            /* the .mdl it came from, for the header comment */
  const uint8_t *plan;           /* mlc_plan_encode's bytes */
  size_t plan_bytes;
  const char *const *kernels;    /* every kernel symbol the plan names */
  uint32_t nkernels;
  const char *const *objects;    /* object files already written into dir (file names) */
  uint32_t nobjects;
  /* CPU: the CPU the kernels are for and its features (LLVM's names), which
   * <name>_create checks the machine for (runtime/cpu/features.h). */
  const char *cpu, *cpu_features;
  /* CPU: builds for stronger CPUs, weakest first; create runs the best the
   * machine has (runtime/cpu/features.h: mlc_cpu_pick_version). */
  const mlc_artifact_cpu_build *cpu_more;
  uint32_t ncpu_more;
  /* GPUs: the runtime driver whose device runs the plan ("cuda", "vulkan"),
   * which takes every kernel from the plan's executables section (the
   * artifact also writes the plan as <name>.mlcplan); NULL: the CPU's
   * kernels (linked, found by name) or Metal's. */
  const char *device_driver;
  /* Metal (metal set), which still takes its kernels from C tables: the
   * launch table (kernels above are then unused), the MSL source and, when
   * Apple's metal compiler built one, the metallib, embedded in <name>.c. */
  bool metal;
  const mlc_cuda_kernel *cuda_kernels;
  uint32_t ncuda_kernels;
  const char *cuda_source;
  size_t cuda_source_len;
  const void *cuda_image;
  size_t cuda_image_bytes;
} mlc_artifact;

/* Why `name` cannot name an artifact (its C type and its functions' prefix):
 * a C or C++ keyword, a name of the C library or pthreads that the artifact's
 * code uses, or one of that code's own identifiers; NULL where it can. */
const char *mlc_artifact_name_clash(const char *name);
/* Creates dir unless it exists (MLC_IO when it cannot). */
MLC_MUST_USE mlc_status mlc_artifact_mkdir(const char *dir);
/* MLC_IO on a failure to write. */
MLC_MUST_USE mlc_status mlc_artifact_write(const mlc_program *p, const mlc_artifact *a);

#endif
