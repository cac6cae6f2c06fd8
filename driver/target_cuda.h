/* The driver's side of the CUDA target: emits the program's CUDA C through
 * codegen/cuda, compiles it with nvcc into a fatbin (sm_90a code and
 * compute_90 PTX) where nvcc exists, and either writes the artifact or
 * opens a CUDA device on it for a session (mlc run, bench, train).  Without
 * nvcc the runtime compiles the source with NVRTC when the device opens.
 * Fatbins are cached under ~/.cache/mlc/cuda keyed by the xxHash64 of the
 * source, the architectures and the options. */
#ifndef MLC_DRIVER_TARGET_CUDA_H
#define MLC_DRIVER_TARGET_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "codegen/cuda/cuda.h"
#include "runtime/device.h"
#include "runtime/plan.h"
#include "driver/target.h"

typedef struct {
  mlc_program *p;
  mlc_cuda_module mod;
  uint8_t *plan;       /* mlc_plan_encode's bytes, in p's arena */
  size_t plan_bytes;
  void *image;         /* the fatbin (malloc'ed), or NULL without nvcc */
  size_t image_bytes;
  char nvcc[1024];     /* the nvcc used, or "" */
  mlc_plan *parsed;    /* the plan as the device reads its kernels from it (open), or NULL */
} mlc_cuda_build;

/* Emits, builds the fatbin if nvcc exists and `compile` asks for it, and
 * encodes the plan with the fatbin or else the source as its executable. */
MLC_MUST_USE mlc_status mlc_cuda_build_program(mlc_program *p, mlc_cuda_build *b, bool compile, FILE *progress);
MLC_MUST_USE mlc_status mlc_cuda_write_artifact(mlc_cuda_build *b, const char *dir, const char *source);
/* A CUDA device (GPU `ordinal`) with the kernels of the build's plan. */
MLC_MUST_USE mlc_status mlc_cuda_open(mlc_cuda_build *b, int ordinal, FILE *progress, mlc_device **out);
void mlc_cuda_build_free(mlc_cuda_build *b);
/* Runs argv[0] (looked up on PATH) with argv and waits: its exit status, or
 * -1 if it could not run or was killed. */
int mlc_run_tool(const char *const *argv);

/* The descriptor's operations (driver/target.h). */
mlc_status mlc_cuda_target_build(void *b, mlc_program *p, FILE *progress, int rank);
mlc_status mlc_cuda_target_write(void *b, const char *dir, const char *source, mlc_target_files *out);
mlc_status mlc_cuda_target_open(void *b, int ordinal, FILE *progress, int rank, mlc_session_options *so,
                                const uint8_t **plan, size_t *plan_bytes);
bool mlc_cuda_target_supports_op(mlc_op op, char *why, size_t whyn);
void mlc_cuda_target_release(void *b);

#endif
