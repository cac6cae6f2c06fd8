/* The driver's side of the Metal target: emits the program as MSL through
 * the shared C-like emitter (codegen/cstyle, Metal's dialect), encodes the
 * plan, and writes the artifact: <name>.metal, and <name>.c embedding it
 * with the launch table.  On macOS, where `xcrun metal` exists, it also
 * builds <name>.metallib and embeds that. */
#ifndef MLC_DRIVER_TARGET_METAL_H
#define MLC_DRIVER_TARGET_METAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "codegen/metal/metal.h"
#include "driver/target.h"

typedef struct {
  mlc_program *p;
  mlc_cstyle_module mod; /* source: the MSL */
  uint8_t *plan;
  size_t plan_bytes;
} mlc_metal_build;

MLC_MUST_USE mlc_status mlc_metal_build_program(mlc_program *p, mlc_metal_build *b, FILE *progress);
MLC_MUST_USE mlc_status mlc_metal_write_artifact(mlc_metal_build *b, const char *dir, const char *source);

/* The descriptor's operations (driver/target.h). */
mlc_status mlc_metal_target_build(void *b, mlc_program *p, FILE *progress, int rank);
mlc_status mlc_metal_target_write(void *b, const char *dir, const char *source, mlc_target_files *out);
mlc_status mlc_metal_target_open(void *b, int ordinal, FILE *progress, int rank, mlc_session_options *so,
                                const uint8_t **plan, size_t *plan_bytes);
bool mlc_metal_target_supports_op(mlc_op op, char *why, size_t whyn);

#endif
