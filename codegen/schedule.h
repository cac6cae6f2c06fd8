/* The plan's schedule (codegen/schedule.c): a stream per step and the one
 * step of the other stream it waits for. */
#ifndef MLC_CODEGEN_SCHEDULE_H
#define MLC_CODEGEN_SCHEDULE_H

#include <stdint.h>

#include "ir/ir.h"

typedef struct {
  uint32_t *step_of; /* per node: its step index, or UINT32_MAX (no kernel) */
  uint8_t *stream;   /* per node: 0 compute, 1 communication */
  uint32_t *wait;    /* per node: the step index it waits for, or UINT32_MAX */
} mlc_sched;

/* kid[i] != UINT32_MAX marks the nodes that are steps.  Lives in p's arena. */
void mlc_schedule(const mlc_program *p, const mlc_func *f, const uint32_t *kid, mlc_sched *out);

#endif
