/* Safetensors loading and saving (see safetensors.h).
 *
 * Loading parses the JSON header with cJSON in two passes over the tree: the
 * first validates every entry and sizes the table, the second fills one
 * allocation holding the object, its tensors, their shapes and all strings,
 * so a loaded file is at most two blocks (plus the file bytes when read from
 * a path).  The data region is then checked as a whole: tensors sorted by
 * offset must tile it exactly, with no overlap and no hole.
 *
 * Saving validates the entries, plans the file order and header, and streams
 * the pieces to a temporary file that is renamed into place.
 */
#define _POSIX_C_SOURCE 200809L /* open flags, fsync, getpid under -std=c11 */

#include "runtime/safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The reference implementation refuses larger headers; so do we. */
#define MLC_ST_MAX_HEADER 100000000u
/* JSON numbers reach cJSON as doubles, so integers are accepted only below
 * 2^53: there every integer is exact, and nothing larger rounds into range. */
#define MLC_ST_INT_LIMIT ((uint64_t)1 << 53)
/* Names are printed in messages truncated, as they may be megabytes long. */
#define NAME "'%.200s'"

static const struct {
  const char *name;
  size_t size;
} mlc_st_dtypes[] = {
#define X(e, name, bytes) {name, bytes},
    MLC_SAFETENSORS_DTYPES(X)
#undef X
};

const char *mlc_safetensors_dtype_name(mlc_safetensors_dtype dtype) {
  return (unsigned)dtype < MLC_ST_DTYPE_COUNT ? mlc_st_dtypes[dtype].name : NULL;
}

size_t mlc_safetensors_dtype_size(mlc_safetensors_dtype dtype) {
  return (unsigned)dtype < MLC_ST_DTYPE_COUNT ? mlc_st_dtypes[dtype].size : 0;
}

mlc_status mlc_safetensors_dtype_from_name(const char *name,
                                           mlc_safetensors_dtype *out_dtype) {
  for (int i = 0; i < MLC_ST_DTYPE_COUNT; i++) {
    if (strcmp(name, mlc_st_dtypes[i].name) == 0) {
      *out_dtype = (mlc_safetensors_dtype)i;
      return NULL;
    }
  }
  return mlc_status_make(MLC_NOT_FOUND, "unknown dtype " NAME, name);
}

/* Length of the valid UTF-8 sequence at s[0..n), or 0: rejects what Rust's
 * str::from_utf8 rejects (overlong forms, surrogates, past U+10FFFF). */
static size_t mlc_st_utf8_len(const uint8_t *s, size_t n) {
  uint8_t c = s[0];
  size_t len;
  uint32_t cp, min;
  if (c < 0x80)
    return 1;
  else if ((c & 0xE0) == 0xC0)
    len = 2, cp = c & 0x1F, min = 0x80;
  else if ((c & 0xF0) == 0xE0)
    len = 3, cp = c & 0x0F, min = 0x800;
  else if ((c & 0xF8) == 0xF0)
    len = 4, cp = c & 0x07, min = 0x10000;
  else
    return 0;
  if (len > n)
    return 0;
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xC0) != 0x80)
      return 0;
    cp = cp << 6 | (s[i] & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
    return 0;
  return len;
}

/* Offset of the first invalid UTF-8 sequence in s[0..n), or n. */
static size_t mlc_st_utf8_check(const char *s, size_t n) {
  size_t i = 0, len;
  while (i < n && (len = mlc_st_utf8_len((const uint8_t *)s + i, n - i)))
    i += len;
  return i;
}

/* Every message starts "safetensors: " so that, annotated with a path or a
 * caller's context, it still says which format was at fault. */
static mlc_status mlc_st_error(mlc_status_code_t code, const char *fmt, ...)
    MLC_STATUS_PRINTF(2, 3);
static mlc_status mlc_st_error(mlc_status_code_t code, const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return mlc_status_make(code, "safetensors: %s", msg);
}
#define mlc_st_corrupt(...) mlc_st_error(MLC_DATA_LOSS, __VA_ARGS__)
#define mlc_st_invalid(...) mlc_st_error(MLC_INVALID_ARGUMENT, __VA_ARGS__)

/* Whether s is entirely valid UTF-8. */
static bool mlc_st_is_utf8(const char *s) {
  size_t n = strlen(s);
  return mlc_st_utf8_check(s, n) == n;
}

/* JSON whitespace; cJSON itself skips every byte up to ' ', NUL included. */
static bool mlc_st_is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static uint64_t mlc_st_load_le64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

/* ---- Loading ---------------------------------------------------------- */

struct mlc_safetensors {
  mlc_allocator allocator;
  void *owned; /* the file bytes when opened from a path, else NULL */
  size_t count;
  mlc_safetensors_tensor *tensors; /* (count) in name order */
  size_t metadata_count;
  const char **metadata; /* (2 * metadata_count) key, value; in key order */
};

/* Sizes gathered by the validating pass, to lay out the one allocation. */
typedef struct mlc_st_sizes {
  size_t tensors, dims, metadata, chars;
} mlc_st_sizes;

/* An integer a JSON double holds exactly; anything else (negative,
 * fractional, huge, not a number) is refused. */
static bool mlc_st_json_uint(const cJSON *v, uint64_t *out) {
  if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0) ||
      v->valuedouble >= (double)MLC_ST_INT_LIMIT)
    return false;
  *out = (uint64_t)v->valuedouble;
  return (double)*out == v->valuedouble;
}

/* "a string", "-3", ... for messages about a JSON value of the wrong kind. */
static const char *mlc_st_json_what(const cJSON *v, char *buf, size_t n) {
  if (cJSON_IsNumber(v))
    snprintf(buf, n, "%.17g", v->valuedouble);
  else
    snprintf(buf, n, "%s", cJSON_IsString(v) ? "a string" : cJSON_IsArray(v) ? "an array"
                           : cJSON_IsObject(v) ? "an object" : cJSON_IsBool(v) ? "a boolean"
                                                                                : "null");
  return buf;
}

/* Checks one tensor entry of the header against a data region of
 * `region_size` bytes.  With `out` NULL it only validates and counts dims
 * into *sizes; otherwise it fills *out and `dims` (known valid by then). */
static mlc_status mlc_st_parse_tensor(const cJSON *item, const uint8_t *region,
                                      uint64_t region_size, mlc_st_sizes *sizes,
                                      mlc_safetensors_tensor *out, int64_t *dims) {
  const char *name = item->string;
  char what[40];
  if (!cJSON_IsObject(item))
    return mlc_st_corrupt("tensor " NAME ": entry is %s, not an object", name,
                          mlc_st_json_what(item, what, sizeof what));
  const cJSON *dtype = NULL, *shape = NULL, *offsets = NULL, *f;
  cJSON_ArrayForEach(f, item) {
    const cJSON **slot = strcmp(f->string, "dtype") == 0  ? &dtype
                         : strcmp(f->string, "shape") == 0 ? &shape
                         : strcmp(f->string, "data_offsets") == 0 ? &offsets
                                                                  : NULL;
    if (slot && *slot)
      return mlc_st_corrupt("tensor " NAME ": field \"%s\" appears twice", name, f->string);
    if (slot)
      *slot = f;
  }
  if (!dtype || !shape || !offsets)
    return mlc_st_corrupt("tensor " NAME ": missing field \"%s\"", name,
                          !dtype ? "dtype" : !shape ? "shape" : "data_offsets");

  if (!cJSON_IsString(dtype))
    return mlc_st_corrupt("tensor " NAME ": dtype is %s, not a string", name,
                          mlc_st_json_what(dtype, what, sizeof what));
  mlc_safetensors_dtype dt = MLC_ST_U8; /* gcc -O3 cannot see that success sets it */
  mlc_status st = mlc_safetensors_dtype_from_name(dtype->valuestring, &dt);
  if (st) {
    mlc_status_free(st);
    const char *s = dtype->valuestring;
    if (strcmp(s, "F4") == 0 || strcmp(s, "F6_E2M3") == 0 || strcmp(s, "F6_E3M2") == 0)
      return mlc_st_error(MLC_UNIMPLEMENTED, "tensor " NAME ": sub-byte dtype %s is not supported",
                          name, s);
    return mlc_st_corrupt("tensor " NAME ": unknown dtype " NAME, name, s);
  }

  if (!cJSON_IsArray(shape))
    return mlc_st_corrupt("tensor " NAME ": shape is %s, not an array", name,
                          mlc_st_json_what(shape, what, sizeof what));
  uint64_t numel = 1, d;
  int rank = 0;
  cJSON_ArrayForEach(f, shape) {
    if (!mlc_st_json_uint(f, &d))
      return mlc_st_corrupt("tensor " NAME ": shape[%d] is %s, not an integer in [0, 2^53)",
                            name, rank, mlc_st_json_what(f, what, sizeof what));
    if (__builtin_mul_overflow(numel, d, &numel))
      return mlc_st_corrupt("tensor " NAME ": element count overflows 64 bits", name);
    if (dims)
      dims[rank] = (int64_t)d;
    rank++;
  }

  uint64_t off[2];
  if (!cJSON_IsArray(offsets) || cJSON_GetArraySize(offsets) != 2)
    return mlc_st_corrupt("tensor " NAME ": data_offsets must be an array [begin, end]", name);
  for (int i = 0; i < 2; i++) {
    const cJSON *v = cJSON_GetArrayItem(offsets, i);
    if (!mlc_st_json_uint(v, &off[i]))
      return mlc_st_corrupt("tensor " NAME ": data_offsets[%d] is %s, not an integer in [0, 2^53)",
                            name, i, mlc_st_json_what(v, what, sizeof what));
  }
  if (off[1] < off[0])
    return mlc_st_corrupt("tensor " NAME ": data_offsets [%" PRIu64 ", %" PRIu64
                          "] end before they begin", name, off[0], off[1]);
  uint64_t nbytes;
  if (__builtin_mul_overflow(numel, mlc_st_dtypes[dt].size, &nbytes))
    return mlc_st_corrupt("tensor " NAME ": byte size overflows 64 bits", name);
  if (off[1] - off[0] != nbytes)
    return mlc_st_corrupt("tensor " NAME ": data_offsets [%" PRIu64 ", %" PRIu64 "] hold %" PRIu64
                          " bytes, but %" PRIu64 " elements of %s need %" PRIu64,
                          name, off[0], off[1], off[1] - off[0], numel, mlc_st_dtypes[dt].name,
                          nbytes);
  if (off[1] > region_size)
    return mlc_st_corrupt("tensor " NAME ": data_offsets [%" PRIu64 ", %" PRIu64
                          "] run past the end of the %" PRIu64 "-byte data region",
                          name, off[0], off[1], region_size);
  if (!out) {
    sizes->tensors++;
    sizes->dims += (size_t)rank;
    sizes->chars += strlen(name) + 1;
    return NULL;
  }
  *out = (mlc_safetensors_tensor){.dtype = dt, .rank = rank, .shape = dims,
                                  .data = region + off[0], .nbytes = nbytes};
  return NULL;
}

/* Checks "__metadata__" (a string-to-string map, or null) and counts it. */
static mlc_status mlc_st_check_metadata(const cJSON *item, mlc_st_sizes *sizes) {
  char what[40];
  if (cJSON_IsNull(item))
    return NULL;
  if (!cJSON_IsObject(item))
    return mlc_st_corrupt("__metadata__ is %s, not an object",
                          mlc_st_json_what(item, what, sizeof what));
  const cJSON *kv;
  cJSON_ArrayForEach(kv, item) {
    if (!cJSON_IsString(kv))
      return mlc_st_corrupt("__metadata__ key " NAME " has a value that is %s, not a string",
                            kv->string, mlc_st_json_what(kv, what, sizeof what));
    sizes->metadata++;
    sizes->chars += strlen(kv->string) + strlen(kv->valuestring) + 2;
  }
  return NULL;
}

static char *mlc_st_copy(char **pool, const char *s) {
  size_t n = strlen(s) + 1;
  char *dst = memcpy(*pool, s, n);
  *pool += n;
  return dst;
}

static int mlc_st_cmp_name(const void *a, const void *b) {
  return strcmp(((const mlc_safetensors_tensor *)a)->name,
                ((const mlc_safetensors_tensor *)b)->name);
}

static int mlc_st_cmp_offset(const void *a, const void *b) {
  const mlc_safetensors_tensor *x = a, *y = b;
  uintptr_t px = (uintptr_t)x->data, py = (uintptr_t)y->data;
  if (px != py)
    return px < py ? -1 : 1;
  return x->nbytes < y->nbytes ? -1 : x->nbytes > y->nbytes;
}

static int mlc_st_cmp_key(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Whole-file checks once every entry is valid on its own: unique names,
 * unique metadata keys, and tensors that tile the data region exactly. */
static mlc_status mlc_st_check_layout(mlc_safetensors *f, const uint8_t *region,
                                      uint64_t region_size) {
  for (size_t i = 1; i < f->metadata_count; i++)
    if (strcmp(f->metadata[2 * i - 2], f->metadata[2 * i]) == 0)
      return mlc_st_corrupt("__metadata__ key " NAME " appears twice", f->metadata[2 * i]);
  mlc_safetensors_tensor *t = f->tensors;
  qsort(t, f->count, sizeof *t, mlc_st_cmp_name);
  for (size_t i = 1; i < f->count; i++)
    if (strcmp(t[i - 1].name, t[i].name) == 0)
      return mlc_st_corrupt("tensor " NAME " appears twice in the header", t[i].name);

  qsort(t, f->count, sizeof *t, mlc_st_cmp_offset);
  uint64_t pos = 0;
  for (size_t i = 0; i < f->count; i++) {
    uint64_t begin = (uint64_t)((const uint8_t *)t[i].data - region);
    if (begin < pos) {
      uint64_t pbegin = (uint64_t)((const uint8_t *)t[i - 1].data - region);
      return mlc_st_corrupt("tensor " NAME " at data_offsets [%" PRIu64 ", %" PRIu64
                            "] overlaps tensor " NAME " at [%" PRIu64 ", %" PRIu64 "]",
                            t[i].name, begin, begin + t[i].nbytes, t[i - 1].name, pbegin, pos);
    }
    if (begin > pos)
      return mlc_st_corrupt("bytes [%" PRIu64 ", %" PRIu64 ") of the data region belong to no "
                            "tensor (a hole before tensor " NAME ")", pos, begin, t[i].name);
    pos = begin + t[i].nbytes;
  }
  if (pos != region_size) {
    if (f->count == 0)
      return mlc_st_corrupt("the header declares no tensors but the data region has %" PRIu64
                            " bytes", region_size);
    return mlc_st_corrupt("bytes [%" PRIu64 ", %" PRIu64 ") at the end of the data region belong "
                          "to no tensor (after tensor " NAME ")",
                          pos, region_size, t[f->count - 1].name);
  }
  qsort(t, f->count, sizeof *t, mlc_st_cmp_name);
  return NULL;
}

/* Builds the object from a parsed, individually valid header. */
static mlc_status mlc_st_build(const cJSON *root, const mlc_st_sizes *sz, const uint8_t *region,
                               uint64_t region_size, mlc_allocator a, mlc_safetensors **out) {
  /* One block: the object, tensors (n), dims (total rank), metadata pointers
   * (2 per pair), then the characters of every string.  Sizes are bounded
   * by the 100 MB header, so the sums cannot overflow. */
  size_t o_tensors = sizeof(mlc_safetensors);
  size_t o_dims = o_tensors + sz->tensors * sizeof(mlc_safetensors_tensor);
  size_t o_meta = o_dims + sz->dims * sizeof(int64_t);
  size_t o_chars = o_meta + 2 * sz->metadata * sizeof(char *);
  char *block = mlc_allocator_alloc(a, o_chars + sz->chars);
  if (!block)
    return mlc_st_error(MLC_OUT_OF_MEMORY, "out of memory for a %zu-tensor table", sz->tensors);
  mlc_safetensors *f = (mlc_safetensors *)block;
  *f = (mlc_safetensors){.allocator = a,
                         .tensors = (mlc_safetensors_tensor *)(block + o_tensors),
                         .metadata = (const char **)(block + o_meta)};
  int64_t *dims = (int64_t *)(block + o_dims);
  char *pool = block + o_chars;
  const cJSON *item;
  cJSON_ArrayForEach(item, root) {
    if (strcmp(item->string, "__metadata__") == 0) {
      const cJSON *kv;
      cJSON_ArrayForEach(kv, item) {
        f->metadata[2 * f->metadata_count] = mlc_st_copy(&pool, kv->string);
        f->metadata[2 * f->metadata_count++ + 1] = mlc_st_copy(&pool, kv->valuestring);
      }
      continue;
    }
    mlc_safetensors_tensor *t = &f->tensors[f->count++];
    mlc_status st = mlc_st_parse_tensor(item, region, region_size, NULL, t, dims);
    if (st) { /* cannot happen: the first pass accepted this entry */
      mlc_allocator_free(a, block);
      mlc_status_free(st);
      return mlc_st_error(MLC_INTERNAL, "second pass rejected tensor " NAME, item->string);
    }
    t->name = mlc_st_copy(&pool, item->string);
    dims += t->rank;
  }
  /* Pairs sort as units because each key is unique and compared first. */
  qsort(f->metadata, f->metadata_count, 2 * sizeof(char *), mlc_st_cmp_key);
  mlc_status st = mlc_st_check_layout(f, region, region_size);
  if (st) {
    mlc_allocator_free(a, block);
    return st;
  }
  *out = f;
  return NULL;
}

mlc_safetensors_foreign mlc_safetensors_sniff(const void *data, size_t size) {
  const uint8_t *b = data;
  /* A zip's first local header: the name's length at 26, the name at 30.
   * torch.save writes "<archive>/data.pkl" first; numpy.savez "<key>.npy". */
  if (size >= 4 && !memcmp(b, "PK\x03\x04", 4)) {
    size_t n = size >= 30 ? (size_t)b[26] | (size_t)b[27] << 8 : 0;
    const char *name = (const char *)b + 30;
    if (n == 0 || 30 + n > size) return MLC_ST_FOREIGN_ZIP;
    if (n >= 4 && !memcmp(name + n - 4, ".npy", 4)) return MLC_ST_FOREIGN_NPZ;
    if (n >= 8 && !memcmp(name + n - 8, "data.pkl", 8)) return MLC_ST_FOREIGN_TORCH_ZIP;
    return MLC_ST_FOREIGN_ZIP;
  }
  /* Legacy torch.save pickles its magic number (a long) right after PROTO 2. */
  static const uint8_t torch_magic[] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
  if (size >= sizeof torch_magic && !memcmp(b, torch_magic, sizeof torch_magic)) return MLC_ST_FOREIGN_TORCH_PICKLE;
  if (size >= 2 && b[0] == 0x80 && b[1] >= 2 && b[1] <= 5) return MLC_ST_FOREIGN_PICKLE;
  if (size >= 6 && !memcmp(b, "\x93NUMPY", 6)) return MLC_ST_FOREIGN_NPY;
  return MLC_ST_FOREIGN_NONE;
}

/* `path` for a Python string literal, and its name with .safetensors in place
 * of its extension; placeholders where it is unknown or would need escapes. */
static void mlc_st_paths(const char *path, const char *placeholder, char *in, char *out, size_t n) {
  bool plain = path && *path && strlen(path) < n - 16;
  for (const char *p = path; plain && *p; p++)
    plain = (uint8_t)*p >= 0x20 && (uint8_t)*p < 0x7f && *p != '"' && *p != '\\';
  snprintf(in, n, "%s", plain ? path : placeholder);
  const char *slash = strrchr(in, '/'), *dot = strrchr(in, '.');
  size_t stem = dot && dot > (slash ? slash + 1 : in) ? (size_t)(dot - in) : strlen(in);
  snprintf(out, n, "%.*s.safetensors", (int)stem, in);
}

int mlc_safetensors_foreign_message(mlc_safetensors_foreign kind, const char *path, char *buf, size_t n) {
  char in[256], out[256];
  const char *torch = "  import torch, safetensors.torch\n"
                      "  state = torch.load(\"%s\", map_location=\"cpu\")  # or model.state_dict()\n"
                      "  safetensors.torch.save_file(state, \"%s\")";
  char recipe[768];
  switch (kind) {
  case MLC_ST_FOREIGN_TORCH_ZIP:
  case MLC_ST_FOREIGN_TORCH_PICKLE:
  case MLC_ST_FOREIGN_PICKLE:
    mlc_st_paths(path, "model.pt", in, out, sizeof in);
    snprintf(recipe, sizeof recipe, torch, in, out);
    return snprintf(buf, n, "%s, not safetensors; %s in Python:\n%s",
                    kind == MLC_ST_FOREIGN_TORCH_ZIP ? "this is a PyTorch file (torch.save, zip format)"
                    : kind == MLC_ST_FOREIGN_TORCH_PICKLE ? "this is a PyTorch file (torch.save, legacy pickle format)"
                                                          : "this is a Python pickle (pickle.dump or torch.save)",
                    kind == MLC_ST_FOREIGN_PICKLE ? "if PyTorch wrote it, convert it" : "convert it", recipe);
  case MLC_ST_FOREIGN_NPZ:
    mlc_st_paths(path, "data.npz", in, out, sizeof in);
    return snprintf(buf, n, "this is a NumPy .npz archive (numpy.savez), not safetensors; convert it in Python:\n"
                    "  import numpy, safetensors.numpy\n"
                    "  safetensors.numpy.save_file(dict(numpy.load(\"%s\")), \"%s\")", in, out);
  case MLC_ST_FOREIGN_NPY:
    mlc_st_paths(path, "data.npy", in, out, sizeof in);
    return snprintf(buf, n, "this is a NumPy .npy array, not safetensors; convert it in Python, naming the tensor:\n"
                    "  import numpy, safetensors.numpy\n"
                    "  safetensors.numpy.save_file({\"NAME\": numpy.load(\"%s\")}, \"%s\")", in, out);
  case MLC_ST_FOREIGN_ZIP:
    return snprintf(buf, n, "this is a zip archive, but neither torch.save's nor numpy.savez's, and not safetensors");
  case MLC_ST_FOREIGN_NONE: break;
  }
  if (n) *buf = 0;
  return 0;
}

/* open_memory, with the file's path (or NULL) for the conversion recipes. */
static mlc_status mlc_st_open(const void *data, size_t size, const char *path, mlc_allocator allocator,
                              mlc_safetensors **out_file);

mlc_status mlc_safetensors_open_memory(const void *data, size_t size, mlc_allocator allocator,
                                       mlc_safetensors **out_file) {
  return mlc_st_open(data, size, NULL, allocator, out_file);
}

static mlc_status mlc_st_open(const void *data, size_t size, const char *path, mlc_allocator allocator,
                              mlc_safetensors **out_file) {
  *out_file = NULL;
  const uint8_t *bytes = data;
  if (size < 8)
    return mlc_st_corrupt("file is %zu bytes, too short for the 8-byte header length", size);
  /* Told by their first bytes, before their header length is read as ours:
   * the files users try first. */
  char foreign[700];
  if (mlc_safetensors_foreign_message(mlc_safetensors_sniff(bytes, size), path, foreign, sizeof foreign))
    return mlc_st_invalid("%s", foreign);
  uint64_t n = mlc_st_load_le64(bytes);
  if (n > MLC_ST_MAX_HEADER)
    return mlc_st_corrupt("header length %" PRIu64 " is over the limit of %u bytes", n,
                          MLC_ST_MAX_HEADER);
  if (n > size - 8)
    return mlc_st_corrupt("header length %" PRIu64 " runs past the end of the file (%zu bytes "
                          "follow the length)", n, size - 8);
  const char *header = (const char *)bytes + 8;
  size_t bad = mlc_st_utf8_check(header, (size_t)n);
  if (bad != n)
    return mlc_st_corrupt("header byte %zu is not valid UTF-8", bad);
  /* Raw control characters are invalid JSON, but cJSON would skip them as
   * whitespace.  An escaped NUL is valid JSON, but would silently cut a C
   * string short, so that is refused too. */
  size_t backslashes = 0;
  for (size_t i = 0; i < n; i++) {
    if ((uint8_t)header[i] < 0x20 && !mlc_st_is_space(header[i]))
      return mlc_st_corrupt("header byte %zu is the control character 0x%02x, which JSON forbids",
                            i, header[i]);
    if (header[i] == 'u' && backslashes % 2 && n - i > 4 && memcmp(header + i + 1, "0000", 4) == 0)
      return mlc_st_error(MLC_UNIMPLEMENTED, "header byte %zu: strings containing \\u0000 (NUL) "
                          "are not supported", i - 1);
    backslashes = header[i] == '\\' ? backslashes + 1 : 0;
  }

  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(header, (size_t)n, &end, 0);
  if (!root) /* cJSON cannot tell "bad JSON" from "out of memory"; the former is likely */
    return mlc_st_corrupt("header is not valid JSON (error near header byte %td)",
                          end ? end - header : (ptrdiff_t)0);
  mlc_status st = NULL;
  for (const char *p = end; p < header + n && !st; p++)
    if (!mlc_st_is_space(*p))
      st = mlc_st_corrupt("header has data after the JSON object, at header byte %td", p - header);
  if (!st && !cJSON_IsObject(root))
    st = mlc_st_corrupt("header is a JSON %s, not an object",
                        cJSON_IsArray(root) ? "array" : "scalar");

  const uint8_t *region = bytes + 8 + n;
  uint64_t region_size = size - 8 - n;
  mlc_st_sizes sizes = {0};
  bool seen_metadata = false;
  const cJSON *item;
  cJSON_ArrayForEach(item, root) {
    if (st)
      break;
    if (strcmp(item->string, "__metadata__") == 0) {
      st = seen_metadata ? mlc_st_corrupt("__metadata__ appears twice in the header")
                         : mlc_st_check_metadata(item, &sizes);
      seen_metadata = true;
    } else {
      st = mlc_st_parse_tensor(item, region, region_size, &sizes, NULL, NULL);
    }
  }
  if (!st)
    st = mlc_st_build(root, &sizes, region, region_size, allocator, out_file);
  cJSON_Delete(root);
  return st;
}

/* Reads all of `fd` (a regular file of `size` bytes) into a new block. */
static mlc_status mlc_st_read_all(int fd, uint64_t size, mlc_allocator a, uint8_t **out) {
  if (size > SIZE_MAX)
    return mlc_status_make(MLC_OUT_OF_MEMORY, "file of %" PRIu64 " bytes does not fit in memory",
                           size);
  uint8_t *buf = mlc_allocator_alloc(a, (size_t)size);
  if (!buf)
    return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory reading %" PRIu64 " bytes", size);
  size_t done = 0;
  while (done < size) {
    size_t chunk = size - done < ((size_t)1 << 30) ? size - done : (size_t)1 << 30;
    ssize_t r = read(fd, buf + done, chunk);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0) {
      mlc_allocator_free(a, buf);
      return r < 0 ? mlc_status_make(MLC_IO, "read failed: %s", strerror(errno))
                   : mlc_status_make(MLC_IO, "file shrank while being read");
    }
    done += (size_t)r;
  }
  *out = buf;
  return NULL;
}

mlc_status mlc_safetensors_open_file(const char *path, mlc_allocator allocator,
                                     mlc_safetensors **out_file) {
  *out_file = NULL;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return mlc_status_make(errno == ENOENT ? MLC_NOT_FOUND : MLC_IO, "%s: cannot open: %s",
                           path, strerror(errno));
  struct stat sb;
  uint8_t *bytes = NULL;
  mlc_status st = NULL;
  if (fstat(fd, &sb) != 0)
    st = mlc_status_make(MLC_IO, "fstat failed: %s", strerror(errno));
  else if (!S_ISREG(sb.st_mode))
    st = mlc_status_make(MLC_INVALID_ARGUMENT, "not a regular file");
  else
    st = mlc_st_read_all(fd, (uint64_t)sb.st_size, allocator, &bytes);
  close(fd);
  if (!st) {
    st = mlc_st_open(bytes, (size_t)sb.st_size, path, allocator, out_file);
    if (st)
      mlc_allocator_free(allocator, bytes);
    else
      (*out_file)->owned = bytes;
  }
  return st ? mlc_status_annotate(st, "%s", path) : NULL;
}

void mlc_safetensors_close(mlc_safetensors *file) {
  if (!file)
    return;
  mlc_allocator a = file->allocator;
  mlc_allocator_free(a, file->owned);
  mlc_allocator_free(a, file);
}

size_t mlc_safetensors_count(const mlc_safetensors *file) { return file->count; }

const mlc_safetensors_tensor *mlc_safetensors_tensor_at(const mlc_safetensors *file,
                                                        size_t index) {
  return index < file->count ? &file->tensors[index] : NULL;
}

mlc_status mlc_safetensors_find(const mlc_safetensors *file, const char *name,
                                const mlc_safetensors_tensor **out_tensor) {
  mlc_safetensors_tensor key = {.name = name};
  *out_tensor = bsearch(&key, file->tensors, file->count, sizeof key, mlc_st_cmp_name);
  if (!*out_tensor)
    return mlc_st_error(MLC_NOT_FOUND, "no tensor named " NAME, name);
  return NULL;
}

size_t mlc_safetensors_metadata_count(const mlc_safetensors *file) {
  return file->metadata_count;
}

void mlc_safetensors_metadata_at(const mlc_safetensors *file, size_t index,
                                 const char **out_key, const char **out_value) {
  bool ok = index < file->metadata_count;
  *out_key = ok ? file->metadata[2 * index] : NULL;
  *out_value = ok ? file->metadata[2 * index + 1] : NULL;
}

const char *mlc_safetensors_metadata_get(const mlc_safetensors *file, const char *key) {
  const char **kv = bsearch(&key, file->metadata, file->metadata_count, 2 * sizeof(char *),
                            mlc_st_cmp_key);
  return kv ? kv[1] : NULL;
}

/* ---- Saving ----------------------------------------------------------- */

/* What to write, decided before anything touches the disk. */
typedef struct mlc_st_plan {
  const mlc_safetensors_entry **order; /* (count) tensors in file order */
  uint64_t *nbytes;                    /* (count) size of order[i] */
  char *header;                        /* (header_len) JSON padded with spaces */
  size_t header_len;
  uint64_t data_size;
} mlc_st_plan;

static int mlc_st_cmp_entry_name(const void *a, const void *b) {
  return strcmp((*(const mlc_safetensors_entry *const *)a)->name,
                (*(const mlc_safetensors_entry *const *)b)->name);
}

/* The reference's file order: descending dtype, then name. */
static int mlc_st_cmp_entry_order(const void *a, const void *b) {
  const mlc_safetensors_entry *x = *(const mlc_safetensors_entry *const *)a;
  const mlc_safetensors_entry *y = *(const mlc_safetensors_entry *const *)b;
  if (x->dtype != y->dtype)
    return x->dtype > y->dtype ? -1 : 1;
  return strcmp(x->name, y->name);
}

static int mlc_st_cmp_kv(const void *a, const void *b) {
  return strcmp((*(const mlc_safetensors_kv *const *)a)->key,
                (*(const mlc_safetensors_kv *const *)b)->key);
}

static mlc_status mlc_st_check_entry(const mlc_safetensors_entry *e, size_t i) {
  if (!e->name)
    return mlc_st_invalid("tensor #%zu has a NULL name", i);
  if (!mlc_st_is_utf8(e->name))
    return mlc_st_invalid("tensor #%zu: name is not valid UTF-8", i);
  if (strcmp(e->name, "__metadata__") == 0)
    return mlc_st_invalid("tensor #%zu: the name '__metadata__' is reserved", i);
  if ((unsigned)e->dtype >= MLC_ST_DTYPE_COUNT)
    return mlc_st_invalid("tensor " NAME ": dtype %d is not a safetensors dtype", e->name,
                          (int)e->dtype);
  if (e->rank < 0)
    return mlc_st_invalid("tensor " NAME ": rank %d is negative", e->name, e->rank);
  if (e->rank > 0 && !e->shape)
    return mlc_st_invalid("tensor " NAME ": rank %d but the shape is NULL", e->name, e->rank);
  uint64_t n = mlc_st_dtypes[e->dtype].size;
  for (int d = 0; d < e->rank; d++) {
    if (e->shape[d] < 0 || (uint64_t)e->shape[d] >= MLC_ST_INT_LIMIT)
      return mlc_st_invalid("tensor " NAME ": shape[%d] is %" PRId64 ", not in [0, 2^53)",
                            e->name, d, e->shape[d]);
    if (__builtin_mul_overflow(n, (uint64_t)e->shape[d], &n) || n >= MLC_ST_INT_LIMIT)
      return mlc_st_invalid("tensor " NAME ": byte size is 2^53 or more", e->name);
  }
  if (!e->data && n > 0)
    return mlc_st_invalid("tensor " NAME ": data is NULL for %" PRIu64 " bytes", e->name, n);
  return NULL;
}

static cJSON *mlc_st_json_uint_raw(uint64_t v) {
  char buf[24];
  snprintf(buf, sizeof buf, "%" PRIu64, v);
  return cJSON_CreateRaw(buf); /* exact, where a double would not be past 2^53 */
}

/* Appends `item` to the array `arr`; frees it if that fails. */
static bool mlc_st_json_push(cJSON *arr, cJSON *item) {
  if (item && cJSON_AddItemToArray(arr, item))
    return true;
  cJSON_Delete(item);
  return false;
}

/* The compact JSON header for the planned order, from cJSON's malloc; NULL if
 * cJSON ran out of memory.  Every node is attached to the root as soon as it
 * is made, so deleting the root frees everything on any failure. */
static char *mlc_st_json_header(const mlc_st_plan *p, size_t count,
                                const mlc_safetensors_kv **kv, size_t nkv) {
  cJSON *root = cJSON_CreateObject(), *meta = NULL;
  bool ok = root && (!nkv || (meta = cJSON_AddObjectToObject(root, "__metadata__")));
  for (size_t i = 0; ok && i < nkv; i++)
    ok = cJSON_AddStringToObject(meta, kv[i]->key, kv[i]->value) != NULL;
  uint64_t offset = 0;
  for (size_t i = 0; ok && i < count; i++) {
    const mlc_safetensors_entry *e = p->order[i];
    cJSON *t = cJSON_AddObjectToObject(root, e->name), *shape = NULL, *offs = NULL;
    ok = t && cJSON_AddStringToObject(t, "dtype", mlc_st_dtypes[e->dtype].name) &&
         (shape = cJSON_AddArrayToObject(t, "shape"));
    for (int d = 0; ok && d < e->rank; d++)
      ok = mlc_st_json_push(shape, mlc_st_json_uint_raw((uint64_t)e->shape[d]));
    ok = ok && (offs = cJSON_AddArrayToObject(t, "data_offsets")) &&
         mlc_st_json_push(offs, mlc_st_json_uint_raw(offset)) &&
         mlc_st_json_push(offs, mlc_st_json_uint_raw(offset + p->nbytes[i]));
    offset += p->nbytes[i];
  }
  char *json = ok ? cJSON_PrintUnformatted(root) : NULL;
  cJSON_Delete(root);
  return json;
}

static void mlc_st_plan_free(mlc_st_plan *p, mlc_allocator a) {
  mlc_allocator_free(a, p->order);
  mlc_allocator_free(a, p->header);
  *p = (mlc_st_plan){0};
}

/* Validates the entries and metadata and decides the file's layout. */
static mlc_status mlc_st_plan_make(const mlc_safetensors_entry *tensors, size_t count,
                                   const mlc_safetensors_kv *metadata, size_t nkv,
                                   mlc_allocator a, mlc_st_plan *p) {
  *p = (mlc_st_plan){0};
  /* One block: the order (count pointers), the sizes (count), and the sorted
   * metadata (nkv pointers). */
  size_t n = count + nkv;
  if (n < count || n > SIZE_MAX / (sizeof(void *) + sizeof(uint64_t)))
    return mlc_st_invalid("%zu tensors and %zu metadata pairs are too many", count, nkv);
  char *block = mlc_allocator_alloc(a, n * (sizeof(void *) + sizeof(uint64_t)));
  if (!block)
    return mlc_st_error(MLC_OUT_OF_MEMORY, "out of memory planning %zu tensors", count);
  p->order = (const mlc_safetensors_entry **)block;
  p->nbytes = (uint64_t *)(block + n * sizeof(void *));
  const mlc_safetensors_kv **kv = (const mlc_safetensors_kv **)(p->order + count);
  mlc_status st = NULL;

  for (size_t i = 0; i < count && !st; i++) {
    p->order[i] = &tensors[i];
    st = mlc_st_check_entry(&tensors[i], i);
  }
  for (size_t i = 0; i < nkv && !st; i++) {
    kv[i] = &metadata[i];
    if (!metadata[i].key || !metadata[i].value)
      st = mlc_st_invalid("metadata pair #%zu has a NULL %s", i, metadata[i].key ? "value" : "key");
    else if (!mlc_st_is_utf8(metadata[i].key) || !mlc_st_is_utf8(metadata[i].value))
      st = mlc_st_invalid("metadata pair #%zu is not valid UTF-8", i);
  }
  if (!st) {
    qsort(kv, nkv, sizeof *kv, mlc_st_cmp_kv);
    for (size_t i = 1; i < nkv && !st; i++)
      if (strcmp(kv[i - 1]->key, kv[i]->key) == 0)
        st = mlc_st_invalid("metadata key " NAME " appears twice", kv[i]->key);
    qsort(p->order, count, sizeof *p->order, mlc_st_cmp_entry_name);
    for (size_t i = 1; i < count && !st; i++)
      if (strcmp(p->order[i - 1]->name, p->order[i]->name) == 0)
        st = mlc_st_invalid("tensor " NAME " appears twice", p->order[i]->name);
  }
  if (st) {
    mlc_st_plan_free(p, a);
    return st;
  }
  qsort(p->order, count, sizeof *p->order, mlc_st_cmp_entry_order);
  for (size_t i = 0; i < count; i++) {
    const mlc_safetensors_entry *e = p->order[i];
    p->nbytes[i] = mlc_st_dtypes[e->dtype].size; /* no overflow: checked above */
    for (int d = 0; d < e->rank; d++)
      p->nbytes[i] *= (uint64_t)e->shape[d];
    if (p->data_size + p->nbytes[i] >= MLC_ST_INT_LIMIT && !st)
      st = mlc_st_invalid("the tensors total 2^53 bytes or more");
    p->data_size += p->nbytes[i];
  }

  char *json = st ? NULL : mlc_st_json_header(p, count, kv, nkv);
  if (!st && !json)
    st = mlc_st_error(MLC_OUT_OF_MEMORY, "out of memory printing the header");
  size_t len = json ? strlen(json) : 0;
  if (!st && len > MLC_ST_MAX_HEADER)
    st = mlc_st_invalid("the header would be %zu bytes, over the %u-byte limit readers accept",
                        len, MLC_ST_MAX_HEADER);
  if (!st) {
    /* Spaces to a multiple of 8 keep the data region 8-byte aligned, as the
     * reference does. */
    p->header_len = (len + 7) & ~(size_t)7;
    p->header = mlc_allocator_alloc(a, p->header_len);
    if (!p->header)
      st = mlc_st_error(MLC_OUT_OF_MEMORY, "out of memory for a %zu-byte header", len);
    else {
      memcpy(p->header, json, len);
      memset(p->header + len, ' ', p->header_len - len);
    }
  }
  cJSON_free(json);
  if (st)
    mlc_st_plan_free(p, a);
  return st;
}

static void mlc_st_store_le64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

mlc_status mlc_safetensors_serialize(const mlc_safetensors_entry *tensors, size_t count,
                                     const mlc_safetensors_kv *metadata, size_t metadata_count,
                                     mlc_allocator allocator, void **out_bytes, size_t *out_size) {
  *out_bytes = NULL;
  *out_size = 0;
  mlc_st_plan p;
  MLC_RETURN_IF_ERROR(mlc_st_plan_make(tensors, count, metadata, metadata_count, allocator, &p));
  uint64_t total = 8 + p.header_len + p.data_size; /* < 2^54: no overflow */
  uint8_t *out = total <= SIZE_MAX ? mlc_allocator_alloc(allocator, (size_t)total) : NULL;
  if (!out) {
    mlc_st_plan_free(&p, allocator);
    return mlc_st_error(MLC_OUT_OF_MEMORY, "out of memory for %" PRIu64 " bytes", total);
  }
  mlc_st_store_le64(out, p.header_len);
  memcpy(out + 8, p.header, p.header_len);
  uint8_t *dst = out + 8 + p.header_len;
  for (size_t i = 0; i < count; i++) {
    if (p.nbytes[i])
      memcpy(dst, p.order[i]->data, (size_t)p.nbytes[i]);
    dst += p.nbytes[i];
  }
  mlc_st_plan_free(&p, allocator);
  *out_bytes = out;
  *out_size = (size_t)total;
  return NULL;
}

static mlc_status mlc_st_write_all(int fd, const void *data, uint64_t n, const char *path) {
  const uint8_t *p = data;
  while (n > 0) {
    size_t chunk = n < ((size_t)1 << 30) ? (size_t)n : (size_t)1 << 30;
    ssize_t w = write(fd, p, chunk);
    if (w < 0 && errno == EINTR)
      continue;
    if (w < 0)
      return mlc_status_make(MLC_IO, "%s: write failed: %s", path, strerror(errno));
    p += w;
    n -= (uint64_t)w;
  }
  return NULL;
}

/* Writes the planned file to `tmp` and makes it durable. */
static mlc_status mlc_st_write_file(const mlc_st_plan *p, size_t count, const char *tmp) {
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0)
    return mlc_status_make(MLC_IO, "%s: cannot create: %s", tmp, strerror(errno));
  uint8_t len[8];
  mlc_st_store_le64(len, p->header_len);
  mlc_status st = mlc_st_write_all(fd, len, 8, tmp);
  if (!st)
    st = mlc_st_write_all(fd, p->header, p->header_len, tmp);
  for (size_t i = 0; i < count && !st; i++)
    st = mlc_st_write_all(fd, p->order[i]->data, p->nbytes[i], tmp);
  if (!st && fsync(fd) != 0)
    st = mlc_status_make(MLC_IO, "%s: fsync failed: %s", tmp, strerror(errno));
  /* close can report a delayed write error (NFS), so it is checked too. */
  if (close(fd) != 0 && !st)
    st = mlc_status_make(MLC_IO, "%s: close failed: %s", tmp, strerror(errno));
  return st;
}

/* Makes the rename durable.  Filesystems that cannot fsync a directory say
 * EINVAL; there is nothing more to do on those. */
static mlc_status mlc_st_sync_dir(const char *dir) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return mlc_status_make(MLC_IO, "%s: cannot open directory to fsync: %s", dir, strerror(errno));
  mlc_status st = NULL;
  if (fsync(fd) != 0 && errno != EINVAL)
    st = mlc_status_make(MLC_IO, "%s: fsync of directory failed: %s", dir, strerror(errno));
  close(fd);
  return st;
}

mlc_status mlc_safetensors_save(const char *path, const mlc_safetensors_entry *tensors,
                                size_t count, const mlc_safetensors_kv *metadata,
                                size_t metadata_count, mlc_allocator allocator) {
  mlc_st_plan p;
  MLC_RETURN_IF_ERROR(mlc_st_plan_make(tensors, count, metadata, metadata_count, allocator, &p));
  /* "<path>.tmp.<pid>" and the directory part of path, in one block. */
  size_t plen = strlen(path);
  char *tmp = mlc_allocator_alloc(allocator, 2 * plen + 32);
  if (!tmp) {
    mlc_st_plan_free(&p, allocator);
    return mlc_status_make(MLC_OUT_OF_MEMORY, "%s: out of memory", path);
  }
  snprintf(tmp, plen + 30, "%s.tmp.%ld", path, (long)getpid());
  char *dir = tmp + plen + 30;
  const char *slash = strrchr(path, '/');
  if (!slash)
    strcpy(dir, ".");
  else if (slash == path)
    strcpy(dir, "/");
  else
    memcpy(dir, path, (size_t)(slash - path)), dir[slash - path] = '\0';

  mlc_status st = mlc_st_write_file(&p, count, tmp);
  if (!st && rename(tmp, path) != 0)
    st = mlc_status_make(MLC_IO, "%s: cannot rename %s into place: %s", path, tmp, strerror(errno));
  if (st)
    unlink(tmp); /* best effort; the error already says what went wrong */
  else
    st = mlc_st_sync_dir(dir);
  mlc_allocator_free(allocator, tmp);
  mlc_st_plan_free(&p, allocator);
  return st;
}
