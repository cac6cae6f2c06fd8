/* `mlc train`: the training loop over a runtime session. */
#ifndef MLC_DRIVER_TRAIN_H
#define MLC_DRIVER_TRAIN_H

#include <stdint.h>
#include <stdio.h>

#include "runtime/session.h"

typedef struct {
  long steps;             /* steps to run now */
  const char *data;       /* token file, or NULL for one fixed synthetic batch */
  const char *data_dtype; /* "u16" or "i32" for a file without llm.c's header; NULL: u16 */
  const char *save;       /* checkpoint written at the end, or NULL */
  FILE *log;              /* one line per step */
  long warmup;            /* mlc profile: steps run (and trained) first, then the profile and the
                             trace start afresh, so the cold first step is not in them */
  bool trace;             /* with warmup: turn the trace on after it */
} mlc_train_args;

/* Runs `steps` optimizer steps of the "train" entry.  With data, the entry
 * must take two integer inputs of one shape [batch, seq] (tokens and
 * targets): each step reads batch * seq + 1 tokens from the file at the
 * position the step count gives, so a resumed run reads what an
 * uninterrupted one would. */
mlc_status mlc_train_loop(mlc_session *s, const mlc_train_args *a);

#endif
