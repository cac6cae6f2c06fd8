/* The C half of the PyTorch cross-check (see make_reference_st.py).
 *
 *   st_xcheck TORCH_FILE EXPECTED_JSON OUT_FILE
 *
 * Loads TORCH_FILE, written by hand from torch tensors, and compares every
 * tensor with EXPECTED_JSON: dtype, shape, byte count, FNV-1a of the bytes,
 * and every value converted to double, compared bit for bit (the dtypes used
 * convert to double exactly).  It then serializes what it loaded and checks
 * the result equals TORCH_FILE byte for byte, since both follow the reference
 * writer's layout.  Finally it saves the loaded tensors plus a few computed
 * here to OUT_FILE, for the Python side to read back.
 */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/safetensors.h"

static int failures;

#define CHECK(cond, ...)                    \
  do {                                      \
    if (!(cond)) {                          \
      fprintf(stderr, "MISMATCH: " __VA_ARGS__); \
      fputc('\n', stderr);                  \
      failures++;                           \
    }                                       \
  } while (0)

static int ok(mlc_status st, const char *what) {
  if (!st)
    return 1;
  fprintf(stderr, "%s: %s: %s\n", what, mlc_status_code_name(mlc_status_code(st)),
          mlc_status_message(st));
  mlc_status_free(st);
  return 0;
}

static char *slurp(const char *path, size_t *out_len) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  if (buf && fread(buf, 1, (size_t)n, f) == (size_t)n) {
    buf[n] = '\0';
    *out_len = (size_t)n;
  } else {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  return buf;
}

static uint64_t fnv1a64(const uint8_t *p, uint64_t n) {
  uint64_t h = 0xcbf29ce484222325u;
  for (uint64_t i = 0; i < n; i++)
    h = (h ^ p[i]) * 0x100000001b3u;
  return h;
}

static double f16_to_double(uint16_t h) {
  int exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  double v = exp == 0    ? ldexp(mant, -24) /* subnormal */
             : exp == 31 ? (mant ? NAN : INFINITY)
                         : ldexp(mant + 1024, exp - 25);
  return h >> 15 ? -v : v;
}

/* Element i of t as a double; exact for the dtypes this check uses. */
static double element(const mlc_safetensors_tensor *t, uint64_t i) {
  const uint8_t *p = (const uint8_t *)t->data + i * mlc_safetensors_dtype_size(t->dtype);
  uint16_t u16;
  uint32_t u32;
  float f;
  int32_t i32;
  switch (t->dtype) {
  case MLC_ST_F32: memcpy(&f, p, 4); return f;
  case MLC_ST_F16: memcpy(&u16, p, 2); return f16_to_double(u16);
  case MLC_ST_BF16:
    memcpy(&u16, p, 2);
    u32 = (uint32_t)u16 << 16;
    memcpy(&f, &u32, 4);
    return f;
  case MLC_ST_I32: memcpy(&i32, p, 4); return i32;
  default: return NAN;
  }
}

static void check_tensor(const mlc_safetensors *file, const cJSON *want, size_t *values) {
  const char *name = want->string;
  const mlc_safetensors_tensor *t;
  if (!ok(mlc_safetensors_find(file, name, &t), name)) {
    failures++;
    return;
  }
  const char *dtype = cJSON_GetObjectItem(want, "dtype")->valuestring;
  CHECK(strcmp(mlc_safetensors_dtype_name(t->dtype), dtype) == 0, "%s: dtype %s, want %s", name,
        mlc_safetensors_dtype_name(t->dtype), dtype);
  const cJSON *shape = cJSON_GetObjectItem(want, "shape");
  CHECK(t->rank == cJSON_GetArraySize(shape), "%s: rank %d, want %d", name, t->rank,
        cJSON_GetArraySize(shape));
  for (int d = 0; d < t->rank && d < cJSON_GetArraySize(shape); d++)
    CHECK(t->shape[d] == (int64_t)cJSON_GetArrayItem(shape, d)->valuedouble, "%s: shape[%d]", name, d);
  CHECK(t->nbytes == (uint64_t)cJSON_GetObjectItem(want, "nbytes")->valuedouble, "%s: nbytes %" PRIu64,
        name, t->nbytes);
  char hash[17];
  snprintf(hash, sizeof hash, "%016" PRIx64, fnv1a64(t->data, t->nbytes));
  CHECK(strcmp(hash, cJSON_GetObjectItem(want, "fnv1a64")->valuestring) == 0, "%s: fnv1a64 %s", name, hash);
  const cJSON *v = cJSON_GetObjectItem(want, "values");
  uint64_t numel = t->nbytes / mlc_safetensors_dtype_size(t->dtype);
  CHECK(numel == (uint64_t)cJSON_GetArraySize(v), "%s: %" PRIu64 " values, want %d", name, numel,
        cJSON_GetArraySize(v));
  uint64_t i = 0;
  const cJSON *item;
  cJSON_ArrayForEach(item, v) {
    if (i >= numel)
      break;
    double got = element(t, i), exp = item->valuedouble;
    /* Bitwise, so -0.0 must stay -0.0. */
    CHECK(memcmp(&got, &exp, sizeof got) == 0, "%s[%" PRIu64 "] = %.17g, want %.17g", name, i, got, exp);
    i++;
    (*values)++;
  }
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s TORCH_FILE EXPECTED_JSON OUT_FILE\n", argv[0]);
    return 2;
  }
  mlc_allocator a = mlc_allocator_default();
  mlc_safetensors *file;
  if (!ok(mlc_safetensors_open_file(argv[1], a, &file), "load"))
    return 1;
  size_t json_len, file_len;
  char *json_text = slurp(argv[2], &json_len);
  cJSON *expected = json_text ? cJSON_Parse(json_text) : NULL;
  if (!expected) {
    fprintf(stderr, "%s: cannot read or parse\n", argv[2]);
    return 1;
  }
  const cJSON *want_tensors = cJSON_GetObjectItem(expected, "tensors"), *want;
  size_t values = 0;
  CHECK(mlc_safetensors_count(file) == (size_t)cJSON_GetArraySize(want_tensors),
        "%zu tensors, want %d", mlc_safetensors_count(file), cJSON_GetArraySize(want_tensors));
  cJSON_ArrayForEach(want, want_tensors)
    check_tensor(file, want, &values);
  const cJSON *kv;
  cJSON_ArrayForEach(kv, cJSON_GetObjectItem(expected, "metadata")) {
    const char *got = mlc_safetensors_metadata_get(file, kv->string);
    CHECK(got && strcmp(got, kv->valuestring) == 0, "metadata %s", kv->string);
  }

  /* The loaded tensors, plus tensors whose values torch can recompute. */
  size_t n = mlc_safetensors_count(file), nm = mlc_safetensors_metadata_count(file);
  mlc_safetensors_entry entries[64];
  mlc_safetensors_kv meta[9];
  if (n + 6 > 64 || nm + 1 > 9) {
    fprintf(stderr, "too many tensors or metadata pairs for this check\n");
    return 1;
  }
  for (size_t i = 0; i < n; i++) {
    const mlc_safetensors_tensor *t = mlc_safetensors_tensor_at(file, i);
    entries[i] = (mlc_safetensors_entry){t->name, t->dtype, t->rank, t->shape, t->data};
  }
  for (size_t i = 0; i < nm; i++)
    mlc_safetensors_metadata_at(file, i, &meta[i].key, &meta[i].value);

  void *bytes;
  size_t size;
  char *torch_bytes = slurp(argv[1], &file_len);
  if (ok(mlc_safetensors_serialize(entries, n, meta, nm, a, &bytes, &size), "serialize")) {
    CHECK(size == file_len && memcmp(bytes, torch_bytes, size) == 0,
          "serializing the loaded tensors does not reproduce %s byte for byte", argv[1]);
    mlc_allocator_free(a, bytes);
  } else {
    failures++;
  }

  int64_t arange[24], shape_arange[] = {2, 3, 4}, shape10[] = {10}, shape256[] = {256},
                      shape16[] = {16};
  double eighths[10];
  uint8_t u8[256], mask[10];
  int8_t i8[16];
  int16_t i16[10];
  for (int i = 0; i < 256; i++) {
    u8[i] = (uint8_t)i;
    if (i < 24)
      arange[i] = i;
    if (i < 16)
      i8[i] = (int8_t)(-128 + 16 * i);
    if (i < 10) {
      eighths[i] = i / 8.0 - 1;
      i16[i] = (int16_t)((i - 5) * 1000);
      mask[i] = i % 3 == 0;
    }
  }
  entries[n++] = (mlc_safetensors_entry){"c.arange_i64", MLC_ST_I64, 3, shape_arange, arange};
  entries[n++] = (mlc_safetensors_entry){"c.eighths_f64", MLC_ST_F64, 1, shape10, eighths};
  entries[n++] = (mlc_safetensors_entry){"c.u8", MLC_ST_U8, 1, shape256, u8};
  entries[n++] = (mlc_safetensors_entry){"c.i8", MLC_ST_I8, 1, shape16, i8};
  entries[n++] = (mlc_safetensors_entry){"c.i16", MLC_ST_I16, 1, shape10, i16};
  entries[n++] = (mlc_safetensors_entry){"c.mask", MLC_ST_BOOL, 1, shape10, mask};
  meta[nm++] = (mlc_safetensors_kv){"written_by", "mlcrt"};
  if (!ok(mlc_safetensors_save(argv[3], entries, n, meta, nm, a), "save"))
    failures++;

  printf("st_xcheck: %zu tensors, %zu values compared bit for bit; re-serialized file %s; "
         "wrote %zu tensors to %s: %s\n",
         mlc_safetensors_count(file), values, failures ? "checked" : "identical", n, argv[3],
         failures ? "FAIL" : "ok");
  free(torch_bytes);
  free(json_text);
  cJSON_Delete(expected);
  mlc_safetensors_close(file);
  return failures ? 1 : 0;
}
