/* `mlc train`: the training loop over a runtime session. */
#ifndef MLC_DRIVER_TRAIN_H
#define MLC_DRIVER_TRAIN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "runtime/session.h"

typedef struct {
  long steps;             /* steps to run now */
  const char *data;       /* token file, or NULL */
  const char *data_dtype; /* "u16" or "i32" for a file without llm.c's header; NULL: u16 */
  const char *const *inputs;      /* --input NAME=FILE (.npy, safetensors) for every input, or none */
  uint32_t ninputs;
  const char *const *eval_inputs; /* --eval-input NAME=FILE: held-out data, or none */
  uint32_t neval_inputs;
  double eval_split;      /* the share of the --input rows held out (0: none) */
  long eval_every;        /* the validation loss every N steps (and at the end); 0: at the end */
  bool shuffle;           /* --shuffle SEED: the rows in a new order each epoch */
  uint64_t shuffle_seed;
  bool synthetic_ok;      /* mlc profile: no warning about synthetic data */
  const char *save;       /* checkpoint written at the end (and on SIGINT/SIGTERM), or NULL */
  long save_every;        /* also every N steps (0: not) */
  FILE *log;              /* one line per step */
  long warmup;            /* mlc profile: steps run (and trained) first, then the profile and the
                             trace start afresh, so the cold first step is not in them */
  bool trace;             /* with warmup: turn the trace on after it */
} mlc_train_args;

/* Runs `steps` optimizer steps of the "train" entry.  Inputs: with data,
 * the entry must take two integer inputs of one shape [batch, seq] (tokens
 * and targets): each step reads batch * seq + 1 tokens from the file at the
 * position the step count gives.  With inputs, step k takes batch k of the
 * files (driver/dataset.h).  Either way a resumed run reads what an
 * uninterrupted one would.  Without either, one fixed synthetic batch, with
 * a warning.  A SIGINT or SIGTERM stops the loop after the step under way,
 * saves as at the end, and sets *out_signal to the signal (else 0). */
mlc_status mlc_train_loop(mlc_session *s, const mlc_train_args *a, int *out_signal);

#endif
