/* The driver's side of the SPIR-V target: emits the program's kernels as
 * SPIR-V modules through codegen/spirv (validated, optimised), and either
 * writes the artifact (<name>.c embedding the modules and the kernel table,
 * plus each module as <symbol>.spv) or opens a Vulkan device on them for a
 * session (mlc run, bench, train, profile).  `mlc devices --target spirv`
 * lists the devices that --device N picks from. */
#ifndef MLC_DRIVER_TARGET_SPIRV_H
#define MLC_DRIVER_TARGET_SPIRV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "codegen/spirv/spirv.h"
#include "runtime/device.h"
#include "runtime/plan.h"
#include "driver/target.h"

typedef struct {
  mlc_program *p;
  mlc_spirv_module mod;
  uint8_t *plan;       /* mlc_plan_encode's bytes, in p's arena */
  size_t plan_bytes;
  mlc_plan *parsed;    /* the plan as the device reads its kernels from it (open), or NULL */
} mlc_spirv_build;

MLC_MUST_USE mlc_status mlc_spirv_build_program(mlc_program *p, mlc_spirv_build *b, FILE *progress);
MLC_MUST_USE mlc_status mlc_spirv_write_artifact(mlc_spirv_build *b, const char *dir, const char *source);
/* A Vulkan device (number `ordinal`) with the kernels of the build's plan;
 * validation as MLC_VK_VALIDATE says. */
MLC_MUST_USE mlc_status mlc_spirv_open(mlc_spirv_build *b, int ordinal, FILE *progress, mlc_device **out);
/* Frees what open parsed (after the device is gone). */
void mlc_spirv_build_free(mlc_spirv_build *b);

/* The descriptor's operations (driver/target.h). */
mlc_status mlc_spirv_target_build(void *b, mlc_program *p, FILE *progress, int rank);
mlc_status mlc_spirv_target_write(void *b, const char *dir, const char *source, mlc_target_files *out);
mlc_status mlc_spirv_target_open(void *b, int ordinal, FILE *progress, int rank, mlc_session_options *so,
                                const uint8_t **plan, size_t *plan_bytes);
void mlc_spirv_target_release(void *b);
bool mlc_spirv_target_supports_op(mlc_op op, char *why, size_t whyn);

#endif
