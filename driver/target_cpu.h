/* The driver's side of the CPU target: compiles every entry point through
 * codegen/llvm, then either writes the artifact (mlc compile -o) or JITs
 * the kernels and opens a runtime session on them (mlc run, mlc bench). */
#ifndef MLC_DRIVER_TARGET_CPU_H
#define MLC_DRIVER_TARGET_CPU_H

#include <stdbool.h>
#include <stddef.h>

#include "codegen/llvm/llvm.h"
#include "runtime/session.h"
#include "driver/target.h"

/* The CPUs an x86-64 artifact carries builds for beside its x86-64-v2
 * baseline when p->opts.cpu_versions is set (mlc compile -o without --cpu). */
#define MLC_CPU_MORE 2

typedef struct mlc_cpu_build {
  mlc_program *p;
  const char *tag;                     /* in the symbols of a build for a stronger CPU ("v3"); NULL: the baseline */
  mlc_llvm_module *mods[MLC_MAX_FUNCS];
  mlc_llvm_jit *jits[MLC_MAX_FUNCS];
  uint32_t *kernel_of[MLC_MAX_FUNCS]; /* per node: its kernel in mods[k], or UINT32_MAX */
  uint8_t *plan;                       /* mlc_plan_encode's bytes, in p's arena */
  size_t plan_bytes;
  /* Function multiversioning: the same program compiled for x86-64-v3 and
   * x86-64-v4, each with its own plan (GEMM block sizes, and so the work
   * items, follow the vector width) and its own symbols; only the artifact
   * uses them. */
  struct mlc_cpu_build *more[MLC_CPU_MORE];
  uint32_t nmore;
} mlc_cpu_build;

/* Compiles every function of p, printing progress to `progress` (may be
 * NULL), and encodes the plan; with p->opts.cpu_versions, and a baseline
 * for x86-64-v2, the builds for stronger CPUs too. */
MLC_MUST_USE mlc_status mlc_cpu_compile(mlc_program *p, mlc_cpu_build *b, FILE *progress);
MLC_MUST_USE mlc_status mlc_cpu_write_artifact(mlc_cpu_build *b, const char *dir, const char *source);
/* JITs every module; then mlc_cpu_lookup finds kernels for a session. */
MLC_MUST_USE mlc_status mlc_cpu_jit(mlc_cpu_build *b);
void *mlc_cpu_lookup(void *build, const char *symbol);
void mlc_cpu_build_free(mlc_cpu_build *b);

/* The descriptor's operations (driver/target.h). */
mlc_status mlc_cpu_target_build(void *b, mlc_program *p, FILE *progress, int rank);
mlc_status mlc_cpu_target_write(void *b, const char *dir, const char *source, mlc_target_files *out);
mlc_status mlc_cpu_target_open(void *b, int ordinal, FILE *progress, int rank, mlc_session_options *so,
                                const uint8_t **plan, size_t *plan_bytes);
bool mlc_cpu_target_supports_op(mlc_op op, char *why, size_t whyn);
void mlc_cpu_target_release(void *b);

#endif
