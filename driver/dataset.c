/* Datasets for `mlc train --input NAME=FILE` (dataset.h): .npy and
 * safetensors files mapped read-only, checked against the train block's
 * inputs, and cut into batches, in order or shuffled per epoch. */
#include "driver/dataset.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/safetensors.h"

static const char *const dtype_names[] = {"?", "f32", "bf16", "f16", "i32", "i64", "bool"};
static const uint64_t dtype_bytes[] = {0, 4, 2, 2, 4, 8, 1};

/* "f32[32, 64]" */
static void shape_str(char *buf, size_t n, uint8_t dtype, int rank, const int64_t *dims) {
  size_t k = (size_t)snprintf(buf, n, "%s[", dtype < 7 ? dtype_names[dtype] : "?");
  for (int i = 0; i < rank && k < n; i++) k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)dims[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
}

static void dims_str(char *buf, size_t n, int rank, const int64_t *dims) {
  size_t k = (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < rank && k < n; i++) k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)dims[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
}

/* What a file holds, before it is checked against its input. */
typedef struct {
  uint8_t dtype;       /* the plan's code; 0 for a dtype no input can have */
  char dtype_name[48]; /* as the file names it: "float64 ('<f8')", "F64" */
  const char *tensor;  /* safetensors: the tensor's name; NULL for .npy */
  int rank;
  int64_t dims[MLC_PLAN_MAX_RANK];
  const uint8_t *data;
  uint64_t data_bytes; /* what the file holds from `data` on */
} array_info;

/* ---- .npy ---------------------------------------------------------------- */

/* The value after 'key': in a .npy header's dict, or NULL. */
static const char *npy_field(const char *hdr, const char *key) {
  char q[40];
  snprintf(q, sizeof q, "'%s'", key);
  const char *p = strstr(hdr, q);
  if (!p) return NULL;
  p += strlen(q);
  while (*p == ' ') p++;
  if (*p != ':') return NULL;
  p++;
  while (*p == ' ') p++;
  return p;
}

/* numpy's descr ("<f4") as the plan's dtype, and its name for messages. */
static bool npy_dtype(const char *descr, array_info *a, const char *path, mlc_status *err) {
  char order = descr[0], kind = descr[1];
  long size = strtol(descr + 2, NULL, 10);
  const char *kname = kind == 'f' ? "float" : kind == 'i' ? "int" : kind == 'u' ? "uint" : kind == 'b' ? "bool" : NULL;
  if (!kname || size <= 0 || size > 16 || !strchr("<|=>", order)) {
    *err = mlc_status_make(MLC_INVALID_ARGUMENT, "%s: unsupported .npy dtype '%s'", path, descr);
    return false;
  }
  if (kind == 'b') snprintf(a->dtype_name, sizeof a->dtype_name, "bool ('%s')", descr);
  else snprintf(a->dtype_name, sizeof a->dtype_name, "%s%ld ('%s')", kname, size * 8, descr);
  if (order == '>' && size > 1) {
    *err = mlc_status_make(MLC_INVALID_ARGUMENT, "%s: big-endian data ('%s'); save it little-endian (a.astype('<%c%ld'))",
                           path, descr, kind, size);
    return false;
  }
  a->dtype = kind == 'f' && size == 4 ? 1 : kind == 'f' && size == 2 ? 3 : kind == 'i' && size == 4 ? 4
           : kind == 'i' && size == 8 ? 5 : kind == 'b' && size == 1 ? 6 : 0;
  return true;
}

static mlc_status npy_parse(const uint8_t *m, uint64_t n, const char *path, array_info *a) {
  if (n < 10 || memcmp(m, "\x93NUMPY", 6))
    return mlc_status_make(MLC_INVALID_ARGUMENT, "%s: not a .npy file (no \\x93NUMPY magic)", path);
  uint64_t hlen, at;
  if (m[6] == 1) { hlen = (uint64_t)m[8] | (uint64_t)m[9] << 8; at = 10; }
  else if ((m[6] == 2 || m[6] == 3) && n >= 12) { hlen = (uint64_t)m[8] | (uint64_t)m[9] << 8 | (uint64_t)m[10] << 16 | (uint64_t)m[11] << 24; at = 12; }
  else return mlc_status_make(MLC_INVALID_ARGUMENT, "%s: .npy format version %u is not supported (1 to 3 are)", path, m[6]);
  if (at + hlen > n || hlen > 65536) return mlc_status_make(MLC_INVALID_ARGUMENT, "%s: truncated .npy header", path);
  char *hdr = malloc(hlen + 1);
  if (!hdr) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory");
  memcpy(hdr, m + at, hlen);
  hdr[hlen] = 0;
  mlc_status st = NULL;
  const char *descr = npy_field(hdr, "descr"), *fortran = npy_field(hdr, "fortran_order"), *shape = npy_field(hdr, "shape");
  char d[16] = {0};
  if (!descr || !fortran || !shape || (*descr != '\'' && *descr != '"') || *shape != '(') {
    st = mlc_status_make(MLC_INVALID_ARGUMENT, "%s: malformed .npy header (a dict with descr, fortran_order and shape)", path);
    goto out;
  }
  for (size_t i = 0; i + 1 < sizeof d && descr[1 + i] && descr[1 + i] != *descr; i++) d[i] = descr[1 + i];
  if (!strncmp(fortran, "True", 4)) {
    st = mlc_status_make(MLC_INVALID_ARGUMENT, "%s: a Fortran-ordered array; save it C-ordered (numpy.ascontiguousarray)", path);
    goto out;
  }
  if (!npy_dtype(d, a, path, &st)) goto out;
  a->rank = 0;
  for (const char *p = shape + 1; *p && *p != ')';) {
    while (*p == ' ' || *p == ',') p++;
    if (*p == ')') break;
    char *end;
    long long v = strtoll(p, &end, 10);
    if (end == p || v < 0 || a->rank == MLC_PLAN_MAX_RANK) {
      st = mlc_status_make(MLC_INVALID_ARGUMENT, "%s: .npy shape %s is malformed or has more than %d axes", path, shape,
                           MLC_PLAN_MAX_RANK);
      goto out;
    }
    a->dims[a->rank++] = v;
    p = end;
  }
  a->data = m + at + hlen;
  a->data_bytes = n - at - hlen;
out:
  free(hdr);
  return st;
}

/* ---- safetensors ----------------------------------------------------------- */

static uint8_t st_dtype(mlc_safetensors_dtype t) {
  switch (t) {
  case MLC_ST_F32: return 1;
  case MLC_ST_BF16: return 2;
  case MLC_ST_F16: return 3;
  case MLC_ST_I32: return 4;
  case MLC_ST_I64: return 5;
  case MLC_ST_BOOL: return 6;
  default: return 0;
  }
}

/* The tensor named `input`, or the file's only tensor. */
static mlc_status st_parse(mlc_dataset_column *c, const char *path, const char *input, array_info *a) {
  mlc_safetensors *f;
  mlc_status st = mlc_safetensors_open_memory(c->map, c->map_bytes, mlc_allocator_default(), &f);
  if (st) {
    mlc_status r = mlc_status_make(MLC_INVALID_ARGUMENT, "%s: %s", path, mlc_status_message(st));
    mlc_status_free(st);
    return r;
  }
  c->st = f;
  const mlc_safetensors_tensor *t = NULL;
  if ((st = mlc_safetensors_find(f, input, &t))) {
    mlc_status_free(st);
    if (mlc_safetensors_count(f) != 1)
      return mlc_status_make(MLC_INVALID_ARGUMENT, "%s: no tensor named '%s' among its %zu (a file of one tensor may name it otherwise)",
                             path, input, mlc_safetensors_count(f));
    t = mlc_safetensors_tensor_at(f, 0);
  }
  a->dtype = st_dtype(t->dtype);
  a->tensor = t->name;
  snprintf(a->dtype_name, sizeof a->dtype_name, "%s", mlc_safetensors_dtype_name(t->dtype));
  if (t->rank > MLC_PLAN_MAX_RANK)
    return mlc_status_make(MLC_INVALID_ARGUMENT, "%s: tensor '%s' has %d axes, more than %d", path, t->name, t->rank, MLC_PLAN_MAX_RANK);
  a->rank = t->rank;
  for (int i = 0; i < t->rank; i++) a->dims[i] = t->shape[i];
  a->data = t->data;
  a->data_bytes = t->nbytes;
  return NULL;
}

/* ---- opening and checking ------------------------------------------------- */

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && !strcmp(s + n - k, suffix);
}

static mlc_status map_file(mlc_dataset_column *c) {
  int fd = open(c->path, O_RDONLY);
  if (fd < 0) return mlc_status_make(MLC_NOT_FOUND, "%s: cannot open: %s", c->path, strerror(errno));
  struct stat sb;
  mlc_status st = NULL;
  if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) st = mlc_status_make(MLC_INVALID_ARGUMENT, "%s: not a regular file", c->path);
  else if (sb.st_size == 0) st = mlc_status_make(MLC_INVALID_ARGUMENT, "%s: the file is empty", c->path);
  if (!st) {
    void *m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) st = mlc_status_make(MLC_IO, "%s: cannot map it: %s", c->path, strerror(errno));
    else { c->map = m; c->map_bytes = (uint64_t)sb.st_size; }
  }
  close(fd);
  return st;
}

/* Opens column c for input `in` (a value of shape v) and checks it. */
/* A file of a format the dataset cannot read, told by its first bytes: what
 * it is and how to convert it; a .npz also as one .npy per input. */
static mlc_status foreign_file(const mlc_dataset_column *c, const char *in, mlc_safetensors_foreign kind) {
  char what[700];
  mlc_safetensors_foreign_message(kind, c->path, what, sizeof what);
  if (kind == MLC_ST_FOREIGN_NPZ)
    return mlc_status_make(MLC_INVALID_ARGUMENT, "%s: input '%s': %s\nor save each array as its own .npy, one --input "
                           "NAME=FILE.npy per input:\n  numpy.save(\"%s.npy\", numpy.load(\"%s\")[\"%s\"])",
                           c->path, in, what, in, c->path, in);
  return mlc_status_make(MLC_INVALID_ARGUMENT, "%s: input '%s': %s", c->path, in, what);
}

static mlc_status open_column(mlc_dataset_column *c, const char *in, const mlc_plan_shape *v) {
  MLC_RETURN_IF_ERROR(map_file(c));
  /* By content first, so that a torch.save or .npz file is named whatever its name. */
  mlc_safetensors_foreign kind = mlc_safetensors_sniff(c->map, (size_t)c->map_bytes);
  bool npy = kind == MLC_ST_FOREIGN_NPY || (kind == MLC_ST_FOREIGN_NONE && ends_with(c->path, ".npy"));
  if (kind != MLC_ST_FOREIGN_NONE && !npy) return foreign_file(c, in, kind);
  if (!npy && !ends_with(c->path, ".safetensors"))
    return mlc_status_make(MLC_INVALID_ARGUMENT, "%s: input '%s': expected a .npy or .safetensors file", c->path, in);
  array_info a = {0};
  MLC_RETURN_IF_ERROR(npy ? npy_parse(c->map, c->map_bytes, c->path, &a) : st_parse(c, c->path, in, &a));
  char want[160], got[160];
  shape_str(want, sizeof want, v->dtype, v->rank, v->dims);
  dims_str(got, sizeof got, a.rank, a.dims);
  if (v->rank == 0)
    return mlc_status_make(MLC_INVALID_ARGUMENT, "%s: input '%s' is a scalar (%s): it has no rows to take batches of", c->path, in, want);
  char tensor[160] = "";
  if (a.tensor) snprintf(tensor, sizeof tensor, " tensor '%s'", a.tensor);
  if (a.dtype != v->dtype)
    return mlc_status_make(MLC_INVALID_ARGUMENT, "%s:%s holds %s data, input '%s' is %s: convert it (numpy: a.astype(numpy.%s))",
                           c->path, tensor, a.dtype_name, in, want,
                           v->dtype == 1 ? "float32" : v->dtype == 3 ? "float16" : v->dtype == 4 ? "int32" : v->dtype == 5 ? "int64" : v->dtype == 6 ? "bool_" : "?");
  bool rows_match = a.rank == v->rank;
  for (int i = 1; rows_match && i < a.rank; i++) rows_match = a.dims[i] == v->dims[i];
  if (!rows_match) {
    char rows[160];
    size_t k = (size_t)snprintf(rows, sizeof rows, "[rows");
    for (int i = 1; i < v->rank && k < sizeof rows; i++) k += (size_t)snprintf(rows + k, sizeof rows - k, ", %lld", (long long)v->dims[i]);
    if (k < sizeof rows) snprintf(rows + k, sizeof rows - k, "]");
    return mlc_status_make(MLC_INVALID_ARGUMENT, "%s: holds an array of shape %s, input '%s' is %s: expected %s, one row "
                           "(axis 0) per sample", c->path, got, in, want, rows);
  }
  uint64_t rb = dtype_bytes[v->dtype];
  for (int i = 1; i < v->rank; i++) rb *= (uint64_t)v->dims[i];
  c->row_bytes = rb;
  c->nrows = (uint64_t)a.dims[0];
  c->rows = a.data;
  if (rb && c->nrows > a.data_bytes / rb)
    return mlc_status_make(MLC_INVALID_ARGUMENT, "%s: truncated: shape %s needs %llu bytes of data, the file holds %llu", c->path,
                           got, (unsigned long long)(c->nrows * rb), (unsigned long long)a.data_bytes);
  if (c->nrows < (uint64_t)v->dims[0])
    return mlc_status_make(MLC_INVALID_ARGUMENT, "%s: %llu rows, fewer than one batch of input '%s' (%s)", c->path,
                           (unsigned long long)c->nrows, in, want);
  return NULL;
}

/* The entry's inputs a caller supplies ("opt.*" are the runtime's). */
static bool user_input(const mlc_plan_io *io) { return strncmp(io->name, "opt.", 4) != 0; }

mlc_status mlc_dataset_open(mlc_dataset *d, const mlc_plan_entry *e, const char *const *args, uint32_t nargs,
                            const char *flag) {
  memset(d, 0, sizeof *d);
  char names[512];
  size_t k = 0;
  names[0] = 0;
  for (uint32_t i = 0; i < e->ninputs; i++)
    if (user_input(&e->inputs[i]) && k < sizeof names)
      k += (size_t)snprintf(names + k, sizeof names - k, "%s%s", k ? ", " : "", e->inputs[i].name);
  for (uint32_t i = 0; i < nargs; i++) {
    const char *eq = strchr(args[i], '=');
    size_t n = eq ? (size_t)(eq - args[i]) : 0;
    const mlc_plan_io *io = NULL;
    for (uint32_t j = 0; j < e->ninputs && !io; j++)
      if (user_input(&e->inputs[j]) && strlen(e->inputs[j].name) == n && !strncmp(e->inputs[j].name, args[i], n)) io = &e->inputs[j];
    if (!io)
      return mlc_status_make(MLC_NOT_FOUND, "%s %s: the train block has no input of that name (its inputs: %s)", flag, args[i], names);
    for (uint32_t j = 0; j < d->ncols; j++)
      if (!strcmp(d->col[j].input, io->name)) return mlc_status_make(MLC_INVALID_ARGUMENT, "%s %s: input '%s' is given twice", flag, args[i], io->name);
    if (d->ncols == MLC_DATASET_MAX_COLUMNS) return mlc_status_make(MLC_INVALID_ARGUMENT, "%s: too many inputs", flag);
    mlc_dataset_column *c = &d->col[d->ncols++];
    c->input = io->name;
    c->path = strdup(eq + 1);
    if (!c->path) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory");
    const mlc_plan_shape *v = &e->values[io->value].shape;
    MLC_RETURN_IF_ERROR(open_column(c, io->name, v));
    if (d->ncols == 1) d->batch = (uint64_t)v->dims[0];
    else if ((uint64_t)v->dims[0] != d->batch)
      return mlc_status_make(MLC_INVALID_ARGUMENT, "input '%s' takes %lld rows a step, input '%s' %llu: %s needs one batch size",
                             io->name, (long long)v->dims[0], d->col[0].input, (unsigned long long)d->batch, flag);
    if (c->nrows != d->col[0].nrows)
      return mlc_status_make(MLC_INVALID_ARGUMENT, "%s: %llu rows (input '%s'), but %s has %llu (input '%s'): every input needs "
                             "one row per sample", c->path, (unsigned long long)c->nrows, io->name, d->col[0].path,
                             (unsigned long long)d->col[0].nrows, d->col[0].input);
  }
  for (uint32_t j = 0; j < e->ninputs; j++) {
    if (!user_input(&e->inputs[j])) continue;
    bool given = false;
    for (uint32_t i = 0; i < d->ncols && !given; i++) given = !strcmp(d->col[i].input, e->inputs[j].name);
    if (!given) {
      char want[160];
      const mlc_plan_shape *v = &e->values[e->inputs[j].value].shape;
      shape_str(want, sizeof want, v->dtype, v->rank, v->dims);
      return mlc_status_make(MLC_INVALID_ARGUMENT, "input '%s' (%s) needs %s %s=FILE as well: with %s, every input of the train "
                             "block comes from a file", e->inputs[j].name, want, flag, e->inputs[j].name, flag);
    }
  }
  d->nrows = d->ncols ? d->col[0].nrows : 0;
  uint64_t widest = 0;
  for (uint32_t i = 0; i < d->ncols; i++) widest = d->col[i].row_bytes > widest ? d->col[i].row_bytes : widest;
  d->buf = malloc(d->batch * widest > 0 ? d->batch * widest : 1);
  if (!d->buf) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory for a batch");
  return NULL;
}

mlc_status mlc_dataset_split(mlc_dataset *d, double fraction, mlc_dataset *held) {
  memset(held, 0, sizeof *held);
  uint64_t n = (uint64_t)(fraction * (double)d->nrows + 0.5);
  if (n < d->batch || d->nrows - n < d->batch)
    return mlc_status_make(MLC_INVALID_ARGUMENT, "--eval-split %g: %llu of the %llu rows held out and %llu left to train on; "
                           "each needs at least a batch (%llu rows)", fraction, (unsigned long long)n,
                           (unsigned long long)d->nrows, (unsigned long long)(d->nrows - n), (unsigned long long)d->batch);
  *held = *d;
  for (uint32_t i = 0; i < held->ncols; i++) { /* a view: the mappings stay d's */
    held->col[i].map = NULL;
    held->col[i].st = NULL;
    held->col[i].path = NULL;
  }
  held->first = d->first + d->nrows - n;
  held->nrows = n;
  held->shuffle = false;
  held->perm = NULL;
  uint64_t bytes = 1;
  for (uint32_t i = 0; i < d->ncols; i++) bytes = d->batch * d->col[i].row_bytes > bytes ? d->batch * d->col[i].row_bytes : bytes;
  held->buf = malloc(bytes);
  if (!held->buf) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory for a batch");
  d->nrows -= n;
  return NULL;
}

void mlc_dataset_close(mlc_dataset *d) {
  for (uint32_t i = 0; i < d->ncols; i++) {
    mlc_safetensors_close(d->col[i].st);
    if (d->col[i].map) munmap(d->col[i].map, (size_t)d->col[i].map_bytes);
    free(d->col[i].path);
  }
  free(d->perm);
  free(d->buf);
  memset(d, 0, sizeof *d);
}

uint64_t mlc_dataset_batches(const mlc_dataset *d) { return d->batch ? d->nrows / d->batch : 0; }

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* The rows' order in `epoch`: a Fisher-Yates shuffle seeded by the seed and
 * the epoch alone. */
static mlc_status shuffle_epoch(mlc_dataset *d, uint64_t epoch) {
  if (d->perm && d->perm_epoch == epoch) return NULL;
  if (!d->perm && !(d->perm = malloc(d->nrows * sizeof *d->perm)))
    return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory for the order of %llu rows", (unsigned long long)d->nrows);
  uint64_t rng = d->seed ^ (epoch * 0xd1b54a32d192ed03ull);
  for (uint64_t i = 0; i < d->nrows; i++) d->perm[i] = i;
  for (uint64_t i = d->nrows - 1; i > 0; i--) {
    uint64_t j = splitmix64(&rng) % (i + 1), t = d->perm[i];
    d->perm[i] = d->perm[j];
    d->perm[j] = t;
  }
  d->perm_epoch = epoch;
  return NULL;
}

mlc_status mlc_dataset_set_batch(mlc_dataset *d, mlc_session *s, const mlc_plan_entry *e, uint64_t index) {
  uint64_t nb = mlc_dataset_batches(d), epoch = index / nb, j = index % nb;
  if (d->shuffle) MLC_RETURN_IF_ERROR(shuffle_epoch(d, epoch));
  for (uint32_t c = 0; c < d->ncols; c++) {
    const mlc_dataset_column *col = &d->col[c];
    for (uint64_t b = 0; b < d->batch; b++) {
      uint64_t r = j * d->batch + b;
      r = d->first + (d->shuffle ? d->perm[r] : r);
      memcpy(d->buf + b * col->row_bytes, col->rows + r * col->row_bytes, col->row_bytes);
    }
    MLC_RETURN_IF_ERROR(mlc_session_set_input(s, e->name, col->input, d->buf, d->batch * col->row_bytes));
  }
  return NULL;
}
