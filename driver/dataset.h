/* Datasets for `mlc train --input NAME=FILE`: one file per input of the
 * train block, each holding the whole dataset as one array whose axis 0
 * runs over the samples (a .npy file, or a safetensors file with a tensor
 * named after the input or a single tensor), memory-mapped, never read
 * whole.  Step k of a run takes batch k: `batch` consecutive rows, or rows
 * of a shuffled order that is a function of the seed and the epoch alone,
 * so a resumed run reads what an uninterrupted one would.  Each epoch uses
 * rows / batch whole batches; the rows left over are not used in that
 * epoch (with --shuffle, different rows each epoch). */
#ifndef MLC_DRIVER_DATASET_H
#define MLC_DRIVER_DATASET_H

#include <stdbool.h>
#include <stdint.h>

#include "runtime/plan.h"
#include "runtime/session.h"

#define MLC_DATASET_MAX_COLUMNS 64

typedef struct {
  const char *input;   /* the train block's input it feeds */
  char *path;          /* the file it came from */
  const uint8_t *rows; /* (nrows, row_bytes): the array's data, inside the mapping */
  uint64_t row_bytes, nrows;
  void *map;           /* the whole file, mapped read-only; NULL in a view */
  uint64_t map_bytes;
  void *st;            /* mlc_safetensors over the mapping, or NULL */
} mlc_dataset_column;

typedef struct {
  mlc_dataset_column col[MLC_DATASET_MAX_COLUMNS];
  uint32_t ncols;
  uint64_t first, nrows; /* the rows this dataset uses: [first, first + nrows) of every column */
  uint64_t batch;        /* rows a step takes (dims[0] of the inputs) */
  bool shuffle;
  uint64_t seed;
  uint64_t *perm;        /* (nrows): the order of `perm_epoch`, with shuffle */
  uint64_t perm_epoch;
  uint8_t *buf;          /* (batch * row_bytes of the widest column): one batch */
} mlc_dataset;

/* Opens the NAME=FILE arguments `args` (as given to `flag`, "--input") for
 * the inputs of `e`: each must name an input, and each input ("opt.*"
 * excepted) must be named once.  Checks every file against its input: the
 * dtype, the shape of a row (the input's shape without axis 0), enough
 * rows for one batch, and as many rows in every file.  Errors name the
 * file and the input. */
MLC_MUST_USE mlc_status mlc_dataset_open(mlc_dataset *d, const mlc_plan_entry *e, const char *const *args,
                                         uint32_t nargs, const char *flag);
/* Moves the last `fraction` of d's rows into `held`, a view that shares
 * d's mappings (close it too; d must outlive it).  Each side must keep at
 * least a batch. */
MLC_MUST_USE mlc_status mlc_dataset_split(mlc_dataset *d, double fraction, mlc_dataset *held);
void mlc_dataset_close(mlc_dataset *d);

/* Batches in one pass over the rows. */
uint64_t mlc_dataset_batches(const mlc_dataset *d);
/* Sets every input of entry `e` to batch `index` (batch index % batches of
 * epoch index / batches). */
MLC_MUST_USE mlc_status mlc_dataset_set_batch(mlc_dataset *d, mlc_session *s, const mlc_plan_entry *e,
                                              uint64_t index);

#endif
