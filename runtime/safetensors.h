/* Safetensors files: how weights and checkpoints enter and leave mlc.
 *
 * The format (huggingface/safetensors): an 8-byte little-endian length N, N
 * bytes of JSON mapping each tensor name to {"dtype", "shape",
 * "data_offsets": [begin, end]} (offsets relative to the data region) plus an
 * optional "__metadata__" string-to-string map, then the data region.
 *
 * The loader is strict, because a checkpoint that loads wrongly is worse than
 * one that fails.  It accepts what the reference implementation accepts, less
 * three things: duplicate tensor names or metadata keys (the reference keeps
 * the last silently), integers of 2^53 or more (JSON reaches cJSON as
 * doubles), and strings containing \u0000 (no C string holds them).  Every
 * rejection is MLC_DATA_LOSS (MLC_UNIMPLEMENTED for sub-byte dtypes and NUL)
 * with a message that names the tensor concerned.  A loaded file is a read-only
 * view: tensor data points into the file bytes, and is aligned to its element
 * size only if the writer aligned it (this writer does; use memcpy if unsure).
 *
 * The writer produces the same bytes as the reference's serialize(): tensors
 * ordered by descending dtype (the reference's enum order, which keeps each
 * tensor aligned to its element size) then by name, compact JSON with
 * "__metadata__" first, padded with spaces to a multiple of 8.  Files are
 * written atomically: a reader sees the old file or the new one, never half.
 *
 * Thread safety: distinct objects may be used from distinct threads, but
 * cJSON records parse errors in a process-global, so concurrent loads race
 * on that (harmless to us: we never read it).
 */
#ifndef MLC_SAFETENSORS_H
#define MLC_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/alloc.h"
#include "runtime/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Element types, in the reference implementation's enum order (the writer
 * sorts by it).  Sub-byte types (F4, F6_*) are recognised by the loader but
 * rejected as MLC_UNIMPLEMENTED.
 *      enum          name           bytes */
#define MLC_SAFETENSORS_DTYPES(X)       \
  X(BOOL,         "BOOL",         1)    \
  X(U8,           "U8",           1)    \
  X(I8,           "I8",           1)    \
  X(F8_E5M2,      "F8_E5M2",      1)    \
  X(F8_E4M3,      "F8_E4M3",      1)    \
  X(F8_E8M0,      "F8_E8M0",      1)    \
  X(F8_E4M3FNUZ,  "F8_E4M3FNUZ",  1)    \
  X(F8_E5M2FNUZ,  "F8_E5M2FNUZ",  1)    \
  X(I16,          "I16",          2)    \
  X(U16,          "U16",          2)    \
  X(F16,          "F16",          2)    \
  X(BF16,         "BF16",         2)    \
  X(I32,          "I32",          4)    \
  X(U32,          "U32",          4)    \
  X(F32,          "F32",          4)    \
  X(C64,          "C64",          8)    \
  X(F64,          "F64",          8)    \
  X(I64,          "I64",          8)    \
  X(U64,          "U64",          8)

typedef enum mlc_safetensors_dtype {
#define X(e, name, bytes) MLC_ST_##e,
  MLC_SAFETENSORS_DTYPES(X)
#undef X
  MLC_ST_DTYPE_COUNT
} mlc_safetensors_dtype;

/* "F32"; NULL for a value outside the enum. */
const char *mlc_safetensors_dtype_name(mlc_safetensors_dtype dtype);
/* Bytes per element; 0 for a value outside the enum. */
size_t mlc_safetensors_dtype_size(mlc_safetensors_dtype dtype);
/* Exact, case-sensitive match; MLC_NOT_FOUND if `name` is no dtype. */
MLC_MUST_USE mlc_status mlc_safetensors_dtype_from_name(
    const char *name, mlc_safetensors_dtype *out_dtype);

/* ---- Reading ---------------------------------------------------------- */

/* One tensor of a loaded file.  Everything it points to lives as long as the
 * mlc_safetensors it came from. */
typedef struct mlc_safetensors_tensor {
  const char *name;
  mlc_safetensors_dtype dtype;
  int rank;
  const int64_t *shape; /* (rank); rank 0 is a scalar of one element */
  const void *data;     /* (nbytes), little-endian, row-major */
  uint64_t nbytes;
} mlc_safetensors_tensor;

typedef struct mlc_safetensors mlc_safetensors;

/* Parses a file held in memory without copying it: `data` must outlive the
 * result.  The tensor table itself comes from `allocator`. */
MLC_MUST_USE mlc_status mlc_safetensors_open_memory(
    const void *data, size_t size, mlc_allocator allocator,
    mlc_safetensors **out_file);

/* What a file that is not safetensors is, told by its first bytes: the
 * formats users try first.  open_memory refuses them with MLC_INVALID_ARGUMENT
 * and foreign_message's text, which says how to convert the file. */
typedef enum {
  MLC_ST_FOREIGN_NONE,         /* nothing known: maybe safetensors */
  MLC_ST_FOREIGN_TORCH_ZIP,    /* torch.save since PyTorch 1.6 */
  MLC_ST_FOREIGN_TORCH_PICKLE, /* torch.save(_use_new_zipfile_serialization=False) */
  MLC_ST_FOREIGN_PICKLE,       /* any other pickle, protocol 2 to 5 */
  MLC_ST_FOREIGN_NPZ,          /* numpy.savez, savez_compressed */
  MLC_ST_FOREIGN_NPY,          /* numpy.save */
  MLC_ST_FOREIGN_ZIP,          /* some other zip */
} mlc_safetensors_foreign;
mlc_safetensors_foreign mlc_safetensors_sniff(const void *data, size_t size);
/* What `kind` is and how to convert it, with `path` (or a placeholder, for
 * NULL) in the Python recipe, into buf as snprintf does; no "safetensors: "
 * prefix.  Returns snprintf's length: 0, and "", for MLC_ST_FOREIGN_NONE. */
int mlc_safetensors_foreign_message(mlc_safetensors_foreign kind, const char *path, char *buf, size_t n);

/* Reads the whole file at `path` into memory from `allocator`, then parses
 * it.  Errors are prefixed with the path. */
MLC_MUST_USE mlc_status mlc_safetensors_open_file(
    const char *path, mlc_allocator allocator, mlc_safetensors **out_file);

/* Accepts NULL. */
void mlc_safetensors_close(mlc_safetensors *file);

/* Tensors are indexed 0..count-1 in name order (strcmp). */
size_t mlc_safetensors_count(const mlc_safetensors *file);
const mlc_safetensors_tensor *mlc_safetensors_tensor_at(
    const mlc_safetensors *file, size_t index);
/* MLC_NOT_FOUND, naming the tensor, if there is none called `name`. */
MLC_MUST_USE mlc_status mlc_safetensors_find(
    const mlc_safetensors *file, const char *name,
    const mlc_safetensors_tensor **out_tensor);

/* The "__metadata__" map, indexed 0..count-1 in key order. */
size_t mlc_safetensors_metadata_count(const mlc_safetensors *file);
void mlc_safetensors_metadata_at(const mlc_safetensors *file, size_t index,
                                 const char **out_key, const char **out_value);
/* NULL if the key is absent. */
const char *mlc_safetensors_metadata_get(const mlc_safetensors *file,
                                         const char *key);

/* ---- Writing ---------------------------------------------------------- */

/* A tensor to write; nothing is copied before the file is written. */
typedef struct mlc_safetensors_entry {
  const char *name; /* UTF-8, not "__metadata__" */
  mlc_safetensors_dtype dtype;
  int rank;
  const int64_t *shape; /* (rank) */
  const void *data;     /* (numel * dtype size) bytes; may be NULL if 0 */
} mlc_safetensors_entry;

typedef struct mlc_safetensors_kv {
  const char *key;
  const char *value;
} mlc_safetensors_kv;

/* Writes `count` tensors and `metadata_count` metadata pairs (written in key
 * order; an empty map is omitted, as the reference does) to `path`,
 * atomically: the bytes go to "<path>.tmp.<pid>", which is fsynced, renamed
 * over `path`, and the directory fsynced.  On failure the temporary is
 * removed and any existing file at `path` is untouched.  Bad entries
 * (duplicate or invalid names, bad dtypes, negative dims, missing data) are
 * MLC_INVALID_ARGUMENT naming the tensor. */
MLC_MUST_USE mlc_status mlc_safetensors_save(
    const char *path, const mlc_safetensors_entry *tensors, size_t count,
    const mlc_safetensors_kv *metadata, size_t metadata_count,
    mlc_allocator allocator);

/* The same bytes as mlc_safetensors_save writes, in one block from
 * `allocator` that the caller frees with mlc_allocator_free. */
MLC_MUST_USE mlc_status mlc_safetensors_serialize(
    const mlc_safetensors_entry *tensors, size_t count,
    const mlc_safetensors_kv *metadata, size_t metadata_count,
    mlc_allocator allocator, void **out_bytes, size_t *out_size);

#ifdef __cplusplus
}
#endif

#endif /* MLC_SAFETENSORS_H */
