/* Tests for runtime/safetensors.c.
 *
 * - The writer reproduces the byte-exact outputs that the reference
 *   implementation's own tests expect (huggingface/safetensors,
 *   safetensors/src/tensor.rs), and orders tensors as it does.
 * - Save/load round trips compare every byte of every tensor.
 * - Every way a header can be wrong is rejected with the exact message
 *   (which names the tensor) and code.
 * - Every allocation in load, save and serialize is made to fail in turn;
 *   each must give OUT_OF_MEMORY, leave no file behind and leak nothing.
 */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, dirent */

#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "runtime/safetensors.h"

/* ---- Helpers ---------------------------------------------------------- */

static char tmpdir[256];

static int make_tmpdir(void **state) {
  (void)state;
  const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  snprintf(tmpdir, sizeof tmpdir, "%s/mlcrt_test_st.XXXXXX", base);
  return mkdtemp(tmpdir) ? 0 : -1;
}

/* Files in tmpdir, skipping "." and ".."; also the test's leftover check. */
static int count_files(void) {
  DIR *d = opendir(tmpdir);
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d));)
    n += e->d_name[0] != '.';
  if (d)
    closedir(d);
  return n;
}

static int remove_tmpdir(void **state) {
  (void)state;
  DIR *d = opendir(tmpdir);
  char path[512];
  for (struct dirent *e; d && (e = readdir(d));) {
    if (e->d_name[0] == '.')
      continue;
    snprintf(path, sizeof path, "%s/%s", tmpdir, e->d_name);
    unlink(path);
  }
  if (d)
    closedir(d);
  return rmdir(tmpdir);
}

static const char *tmp_path(const char *name) {
  static char path[512];
  snprintf(path, sizeof path, "%s/%s", tmpdir, name);
  return path;
}

static void clear_tmpdir(void) {
  remove_tmpdir(NULL);
  mkdir(tmpdir, 0700);
}

/* A file image: n, the n bytes of `header`, then `data_len` bytes 0,1,2,... */
static uint8_t *make_file_n(const char *header, size_t n, size_t data_len, size_t *out_len) {
  uint8_t *buf = malloc(8 + n + data_len);
  for (int i = 0; i < 8; i++)
    buf[i] = (uint8_t)((uint64_t)n >> (8 * i));
  memcpy(buf + 8, header, n);
  for (size_t i = 0; i < data_len; i++)
    buf[8 + n + i] = (uint8_t)i;
  *out_len = 8 + n + data_len;
  return buf;
}

static uint8_t *make_file(const char *header, size_t data_len, size_t *out_len) {
  return make_file_n(header, strlen(header), data_len, out_len);
}

static uint8_t *read_file(const char *path, size_t *out_len) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *buf = malloc((size_t)n + 1);
  assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  *out_len = (size_t)n;
  return buf;
}

static void write_file(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(data, 1, n, f), n);
  fclose(f);
}

/* Asserts that `st` has `code` and exactly `message`, then frees it. */
static void expect_status(mlc_status st, mlc_status_code_t code, const char *message) {
  if (mlc_status_code(st) != code || strcmp(mlc_status_message(st), message) != 0)
    print_error("want %s \"%s\"\n got %s \"%s\"\n", mlc_status_code_name(code), message,
                mlc_status_code_name(mlc_status_code(st)), mlc_status_message(st));
  assert_int_equal(mlc_status_code(st), code);
  assert_string_equal(mlc_status_message(st), message);
  mlc_status_free(st);
}

static void expect_ok(mlc_status st) {
  if (st)
    print_error("unexpected %s: %s\n", mlc_status_code_name(mlc_status_code(st)),
                mlc_status_message(st));
  assert_null(st);
}

/* ---- dtypes ----------------------------------------------------------- */

static void test_dtypes(void **state) {
  (void)state;
  /* Sizes as the reference's Dtype::bitsize() / 8. */
  static const struct { const char *name; size_t size; } want[] = {
      {"BOOL", 1}, {"U8", 1}, {"I8", 1}, {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"F8_E8M0", 1},
      {"F8_E4M3FNUZ", 1}, {"F8_E5M2FNUZ", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2},
      {"BF16", 2}, {"I32", 4}, {"U32", 4}, {"F32", 4}, {"C64", 8}, {"F64", 8},
      {"I64", 8}, {"U64", 8}};
  assert_int_equal(sizeof want / sizeof *want, MLC_ST_DTYPE_COUNT);
  for (int i = 0; i < MLC_ST_DTYPE_COUNT; i++) {
    assert_string_equal(mlc_safetensors_dtype_name((mlc_safetensors_dtype)i), want[i].name);
    assert_int_equal(mlc_safetensors_dtype_size((mlc_safetensors_dtype)i), want[i].size);
    mlc_safetensors_dtype dt;
    expect_ok(mlc_safetensors_dtype_from_name(want[i].name, &dt));
    assert_int_equal(dt, i);
  }
  mlc_safetensors_dtype dt;
  expect_status(mlc_safetensors_dtype_from_name("f32", &dt), MLC_NOT_FOUND, "unknown dtype 'f32'");
  assert_null(mlc_safetensors_dtype_name(MLC_ST_DTYPE_COUNT));
  assert_int_equal(mlc_safetensors_dtype_size(MLC_ST_DTYPE_COUNT), 0);
}

/* ---- Writer: byte-exact against the reference's tests ----------------- */

/* Serializes and compares with: length n, `header` padded to n, then `data`. */
static void expect_serialized(const mlc_safetensors_entry *t, size_t count,
                              const mlc_safetensors_kv *kv, size_t nkv, uint64_t n,
                              const char *header, const void *data, size_t data_len) {
  void *bytes;
  size_t size;
  expect_ok(mlc_safetensors_serialize(t, count, kv, nkv, mlc_allocator_default(), &bytes, &size));
  assert_int_equal(size, 8 + n + data_len);
  uint8_t *want = calloc(1, size);
  for (int i = 0; i < 8; i++)
    want[i] = (uint8_t)(n >> (8 * i));
  memset(want + 8, ' ', n);
  memcpy(want + 8, header, strlen(header));
  if (data_len)
    memcpy(want + 8 + n, data, data_len);
  assert_memory_equal(bytes, want, size);
  free(want);
  mlc_safetensors *f;
  expect_ok(mlc_safetensors_open_memory(bytes, size, mlc_allocator_default(), &f));
  assert_int_equal(mlc_safetensors_count(f), count);
  mlc_safetensors_close(f);
  mlc_allocator_free(mlc_allocator_default(), bytes);
}

static void test_reference_bytes(void **state) {
  (void)state;
  const float v[6] = {0, 1, 2, 3, 4, 5};
  /* tensor.rs test_serialization: 64-byte header, no padding needed. */
  mlc_safetensors_entry e = {"attn.0", MLC_ST_F32, 3, (const int64_t[]){1, 2, 3}, v};
  expect_serialized(&e, 1, NULL, 0, 64,
                    "{\"attn.0\":{\"dtype\":\"F32\",\"shape\":[1,2,3],\"data_offsets\":[0,24]}}",
                    v, sizeof v);
  /* test_serialization_forced_alignement: 65 bytes of JSON, 7 spaces. */
  e = (mlc_safetensors_entry){"attn0", MLC_ST_F32, 4, (const int64_t[]){1, 1, 2, 3}, v};
  expect_serialized(&e, 1, NULL, 0, 72,
                    "{\"attn0\":{\"dtype\":\"F32\",\"shape\":[1,1,2,3],\"data_offsets\":[0,24]}}",
                    v, sizeof v);
  /* test_empty: no tensors, with and without metadata. */
  expect_serialized(NULL, 0, NULL, 0, 8, "{}", NULL, 0);
  mlc_safetensors_kv kv = {"framework", "pt"};
  expect_serialized(NULL, 0, &kv, 1, 40, "{\"__metadata__\":{\"framework\":\"pt\"}}", NULL, 0);
}

/* The reference's order: descending dtype enum, then name; offsets follow. */
static void test_writer_order(void **state) {
  (void)state;
  const uint8_t u8[3] = {1, 2, 3};
  const float f32 = 1.5f;
  const double f64 = -2.25;
  const uint16_t bf16[2] = {0x3f80, 0xc000};
  const int64_t one[] = {1}, two[] = {2}, three[] = {3};
  mlc_safetensors_entry t[] = {
      {"b", MLC_ST_U8, 1, three, u8},
      {"a", MLC_ST_F32, 1, one, &f32},
      {"c", MLC_ST_F64, 1, one, &f64},
      {"d", MLC_ST_BF16, 1, two, bf16},
      {"aa", MLC_ST_F32, 0, NULL, &f32},
  };
  mlc_safetensors_kv kv[] = {{"z", "last"}, {"format", "pt"}};
  uint8_t data[23];
  memcpy(data, &f64, 8);
  memcpy(data + 8, &f32, 4);
  memcpy(data + 12, &f32, 4);
  memcpy(data + 16, bf16, 4);
  memcpy(data + 20, u8, 3);
  expect_serialized(t, 5, kv, 2, 320, /* 315 bytes of JSON, 5 spaces */
                    "{\"__metadata__\":{\"format\":\"pt\",\"z\":\"last\"},"
                    "\"c\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]},"
                    "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]},"
                    "\"aa\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[12,16]},"
                    "\"d\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[16,20]},"
                    "\"b\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[20,23]}}",
                    data, sizeof data);
}

/* ---- Round trip ------------------------------------------------------- */

/* Tensors of every dtype and of awkward shapes, filled with a byte pattern. */
#define RT_COUNT (MLC_ST_DTYPE_COUNT + 4)
static int64_t rt_shapes[RT_COUNT][3];
static uint8_t *rt_data[RT_COUNT];
static char rt_names[RT_COUNT][32];

static void make_roundtrip_entries(mlc_safetensors_entry *t) {
  for (int i = 0; i < RT_COUNT; i++) {
    mlc_safetensors_dtype dt = (mlc_safetensors_dtype)(i % MLC_ST_DTYPE_COUNT);
    int rank = i % 4;
    int64_t numel = 1;
    for (int d = 0; d < rank; d++)
      numel *= rt_shapes[i][d] = 1 + (i * 7 + d * 3) % 5;
    if (i == MLC_ST_DTYPE_COUNT + 1) /* a zero-size tensor */
      rank = 2, rt_shapes[i][0] = 0, rt_shapes[i][1] = 3, numel = 0;
    size_t n = (size_t)numel * mlc_safetensors_dtype_size(dt);
    rt_data[i] = malloc(n + 1);
    for (size_t b = 0; b < n; b++)
      rt_data[i][b] = (uint8_t)(b * 31 + (size_t)i * 17 + 1);
    snprintf(rt_names[i], sizeof rt_names[i], "layers.%d.%s", i, mlc_safetensors_dtype_name(dt));
    t[i] = (mlc_safetensors_entry){rt_names[i], dt, rank, rt_shapes[i], rt_data[i]};
  }
  /* Names needing JSON escapes and UTF-8 survive too. */
  snprintf(rt_names[RT_COUNT - 1], sizeof rt_names[0], "quote\" back\\ tab\t \xc3\xa9\xe2\x82\xac");
}

static void free_roundtrip_entries(void) {
  for (int i = 0; i < RT_COUNT; i++)
    free(rt_data[i]);
}

static int cmp_entry_name(const void *a, const void *b) {
  return strcmp(((const mlc_safetensors_entry *)a)->name, ((const mlc_safetensors_entry *)b)->name);
}

/* Checks that `f` holds exactly `t` (any order) and the metadata `kv`. */
static void expect_contents(const mlc_safetensors *f, const mlc_safetensors_entry *t, size_t count,
                            const mlc_safetensors_kv *kv, size_t nkv) {
  mlc_safetensors_entry *sorted = malloc(count * sizeof *t + 1);
  memcpy(sorted, t, count * sizeof *t);
  qsort(sorted, count, sizeof *t, cmp_entry_name);
  assert_int_equal(mlc_safetensors_count(f), count);
  for (size_t i = 0; i < count; i++) {
    const mlc_safetensors_tensor *got = mlc_safetensors_tensor_at(f, i), *found;
    const mlc_safetensors_entry *e = &sorted[i];
    assert_string_equal(got->name, e->name); /* iteration is in name order */
    expect_ok(mlc_safetensors_find(f, e->name, &found));
    assert_ptr_equal(found, got);
    assert_int_equal(got->dtype, e->dtype);
    assert_int_equal(got->rank, e->rank);
    uint64_t n = mlc_safetensors_dtype_size(e->dtype);
    for (int d = 0; d < e->rank; d++) {
      assert_int_equal(got->shape[d], e->shape[d]);
      n *= (uint64_t)e->shape[d];
    }
    assert_int_equal(got->nbytes, n);
    if (n)
      assert_memory_equal(got->data, e->data, n);
    /* The writer's order keeps each tensor aligned to its element size. */
    assert_int_equal((uintptr_t)got->data % mlc_safetensors_dtype_size(e->dtype), 0);
  }
  assert_null(mlc_safetensors_tensor_at(f, count));
  assert_int_equal(mlc_safetensors_metadata_count(f), nkv);
  for (size_t i = 0; i < nkv; i++)
    assert_string_equal(mlc_safetensors_metadata_get(f, kv[i].key), kv[i].value);
  for (size_t i = 1; i < nkv; i++) {
    const char *k0, *v0, *k1, *v1;
    mlc_safetensors_metadata_at(f, i - 1, &k0, &v0);
    mlc_safetensors_metadata_at(f, i, &k1, &v1);
    assert_true(strcmp(k0, k1) < 0);
  }
  free(sorted);
}

static void test_roundtrip(void **state) {
  (void)state;
  clear_tmpdir();
  mlc_safetensors_entry t[RT_COUNT];
  make_roundtrip_entries(t);
  mlc_safetensors_kv kv[] = {{"format", "pt"}, {"note", "\xce\xbb = 3e-4\n"}, {"", "empty key"}};
  const char *path = tmp_path("rt.safetensors");
  expect_ok(mlc_safetensors_save(path, t, RT_COUNT, kv, 3, mlc_allocator_default()));
  assert_int_equal(count_files(), 1); /* the temporary is gone */

  mlc_safetensors *f;
  expect_ok(mlc_safetensors_open_file(path, mlc_allocator_default(), &f));
  expect_contents(f, t, RT_COUNT, kv, 3);
  assert_null(mlc_safetensors_metadata_get(f, "absent"));
  const mlc_safetensors_tensor *missing = (const void *)1;
  expect_status(mlc_safetensors_find(f, "absent", &missing), MLC_NOT_FOUND,
                "safetensors: no tensor named 'absent'");
  assert_null(missing);

  /* The file is exactly what serialize produces, and saving a loaded file
   * gives the same bytes again. */
  size_t n1, n2;
  uint8_t *file1 = read_file(path, &n1);
  void *mem;
  size_t mem_size;
  expect_ok(mlc_safetensors_serialize(t, RT_COUNT, kv, 3, mlc_allocator_default(), &mem, &mem_size));
  assert_int_equal(mem_size, n1);
  assert_memory_equal(mem, file1, n1);
  free(mem);
  mlc_safetensors_entry again[RT_COUNT];
  for (size_t i = 0; i < mlc_safetensors_count(f); i++) {
    const mlc_safetensors_tensor *g = mlc_safetensors_tensor_at(f, i);
    again[i] = (mlc_safetensors_entry){g->name, g->dtype, g->rank, g->shape, g->data};
  }
  const char *path2 = tmp_path("rt2.safetensors");
  expect_ok(mlc_safetensors_save(path2, again, RT_COUNT, kv, 3, mlc_allocator_default()));
  uint8_t *file2 = read_file(path2, &n2);
  assert_int_equal(n1, n2);
  assert_memory_equal(file1, file2, n1);
  free(file1);
  free(file2);
  mlc_safetensors_close(f);

  /* Saving over an existing file replaces it. */
  expect_ok(mlc_safetensors_save(path, t, 2, NULL, 0, mlc_allocator_default()));
  expect_ok(mlc_safetensors_open_file(path, mlc_allocator_default(), &f));
  expect_contents(f, t, 2, NULL, 0);
  mlc_safetensors_close(f);
  assert_int_equal(count_files(), 2);
  free_roundtrip_entries();
}

/* ---- Loader: accepted oddities ---------------------------------------- */

static void test_accepts(void **state) {
  (void)state;
  static const struct { const char *header; size_t data_len; size_t count; } ok[] = {
      /* The reference's own doc example: unpadded 60-byte header. */
      {"{\"test\":{\"dtype\":\"I32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}", 16, 1},
      /* Whitespace anywhere JSON allows it; listed out of offset order. */
      {" \n{ \"b\" : {\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[2,4]},\r\n"
       "\t\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]} }\n  ", 4, 2},
      /* Empty tensors may sit anywhere, including where another starts. */
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
       "\"e\":{\"dtype\":\"F64\",\"shape\":[0,3],\"data_offsets\":[4,4]},"
       "\"f\":{\"dtype\":\"F64\",\"shape\":[3,0],\"data_offsets\":[0,0]}}", 4, 3},
      /* Null metadata; unknown fields ignored as the reference does. */
      {"{\"__metadata__\":null,\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4],"
       "\"extra\":[1]}}", 4, 1},
      {"{}", 0, 0},
  };
  for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
    size_t len;
    uint8_t *buf = make_file(ok[i].header, ok[i].data_len, &len);
    mlc_safetensors *f;
    expect_ok(mlc_safetensors_open_memory(buf, len, mlc_allocator_default(), &f));
    assert_int_equal(mlc_safetensors_count(f), ok[i].count);
    mlc_safetensors_close(f);
    free(buf);
  }
  /* Escapes resolve: "\u00e9" and a raw UTF-8 é name the same tensor. */
  size_t len;
  uint8_t *buf = make_file("{\"caf\\u00e9\":{\"dtype\":\"I8\",\"shape\":[3],\"data_offsets\":[0,3]}}", 3, &len);
  mlc_safetensors *f;
  const mlc_safetensors_tensor *t;
  expect_ok(mlc_safetensors_open_memory(buf, len, mlc_allocator_default(), &f));
  expect_ok(mlc_safetensors_find(f, "caf\xc3\xa9", &t));
  assert_int_equal(t->rank, 1);
  assert_int_equal(t->shape[0], 3);
  assert_ptr_equal(t->data, buf + len - 3); /* no copy: points into the buffer */
  mlc_safetensors_close(f);
  free(buf);
}

/* ---- Loader: rejections ----------------------------------------------- */

#define F32_4(name, b, e) "\"" name "\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[" #b "," #e "]}"

static const struct bad_case {
  const char *header;
  size_t data_len;
  mlc_status_code_t code;
  const char *message;
} bad_cases[] = {
    /* JSON level */
    {"", 0, MLC_DATA_LOSS, "safetensors: header is not valid JSON (error near header byte 0)"},
    {"{\"w\":{\"dtype\":\"F32\"", 0, MLC_DATA_LOSS,
     "safetensors: header is not valid JSON (error near header byte 18)"},
    {"[1,2]", 0, MLC_DATA_LOSS, "safetensors: header is a JSON array, not an object"},
    {"\"w\"", 0, MLC_DATA_LOSS, "safetensors: header is a JSON scalar, not an object"},
    {"{} {}", 0, MLC_DATA_LOSS, "safetensors: header has data after the JSON object, at header byte 3"},
    {"{\"\xff\":1}", 0, MLC_DATA_LOSS, "safetensors: header byte 2 is not valid UTF-8"},
    {"{\"\xc0\xaf\":1}", 0, MLC_DATA_LOSS, "safetensors: header byte 2 is not valid UTF-8"}, /* overlong */
    {"{\"\xed\xa0\x80\":1}", 0, MLC_DATA_LOSS, "safetensors: header byte 2 is not valid UTF-8"}, /* surrogate */
    {"{\"a\x01\":1}", 0, MLC_DATA_LOSS,
     "safetensors: header byte 3 is the control character 0x01, which JSON forbids"},
    {"{\"a\x1f\":1}", 0, MLC_DATA_LOSS,
     "safetensors: header byte 3 is the control character 0x1f, which JSON forbids"},
    /* Entry fields */
    {"{\"w\":5}", 0, MLC_DATA_LOSS, "safetensors: tensor 'w': entry is 5, not an object"},
    {"{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, MLC_DATA_LOSS,
     "safetensors: tensor 'w': missing field \"dtype\""},
    {"{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, MLC_DATA_LOSS,
     "safetensors: tensor 'w': missing field \"shape\""},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, MLC_DATA_LOSS,
     "safetensors: tensor 'w': missing field \"data_offsets\""},
    {"{\"w\":{\"dtype\":\"F32\",\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
     MLC_DATA_LOSS, "safetensors: tensor 'w': field \"dtype\" appears twice"},
    {"{\"w\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, MLC_DATA_LOSS,
     "safetensors: tensor 'w': dtype is 7, not a string"},
    {"{\"w\":{\"dtype\":\"F31\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, MLC_DATA_LOSS,
     "safetensors: tensor 'w': unknown dtype 'F31'"},
    {"{\"w\":{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, MLC_DATA_LOSS,
     "safetensors: tensor 'w': unknown dtype 'f32'"},
    {"{\"w\":{\"dtype\":\"F4\",\"shape\":[2],\"data_offsets\":[0,1]}}", 1, MLC_UNIMPLEMENTED,
     "safetensors: tensor 'w': sub-byte dtype F4 is not supported"},
    /* Shapes */
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":\"2\",\"data_offsets\":[0,8]}}", 8, MLC_DATA_LOSS,
     "safetensors: tensor 'w': shape is a string, not an array"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2,-3],\"data_offsets\":[0,8]}}", 8, MLC_DATA_LOSS,
     "safetensors: tensor 'w': shape[1] is -3, not an integer in [0, 2^53)"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,8]}}", 8, MLC_DATA_LOSS,
     "safetensors: tensor 'w': shape[0] is 1.5, not an integer in [0, 2^53)"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[null],\"data_offsets\":[0,8]}}", 8, MLC_DATA_LOSS,
     "safetensors: tensor 'w': shape[0] is null, not an integer in [0, 2^53)"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[9007199254740993],\"data_offsets\":[0,8]}}", 8,
     MLC_DATA_LOSS, "safetensors: tensor 'w': shape[0] is 9007199254740992, not an integer in [0, 2^53)"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1e300],\"data_offsets\":[0,8]}}", 8, MLC_DATA_LOSS,
     "safetensors: tensor 'w': shape[0] is 1.0000000000000001e+300, not an integer in [0, 2^53)"},
    {"{\"w\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}", 8,
     MLC_DATA_LOSS, "safetensors: tensor 'w': element count overflows 64 bits"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[4503599627370496,1024],\"data_offsets\":[0,8]}}", 8,
     MLC_DATA_LOSS, "safetensors: tensor 'w': byte size overflows 64 bits"},
    /* Offsets */
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4, MLC_DATA_LOSS,
     "safetensors: tensor 'w': data_offsets must be an array [begin, end]"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 8, MLC_DATA_LOSS,
     "safetensors: tensor 'w': data_offsets must be an array [begin, end]"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":{}}}", 4, MLC_DATA_LOSS,
     "safetensors: tensor 'w': data_offsets must be an array [begin, end]"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 4, MLC_DATA_LOSS,
     "safetensors: tensor 'w': data_offsets[0] is -4, not an integer in [0, 2^53)"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,\"4\"]}}", 4, MLC_DATA_LOSS,
     "safetensors: tensor 'w': data_offsets[1] is a string, not an integer in [0, 2^53)"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", 8, MLC_DATA_LOSS,
     "safetensors: tensor 'w': data_offsets [8, 4] end before they begin"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,20]}}", 20, MLC_DATA_LOSS,
     "safetensors: tensor 'w': data_offsets [0, 20] hold 20 bytes, but 6 elements of F32 need 24"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, MLC_DATA_LOSS,
     "safetensors: tensor 'w': data_offsets [0, 8] run past the end of the 4-byte data region"},
    /* Layout of the data region */
    {"{" F32_4("a", 0, 4) "," F32_4("b", 2, 6) "}", 6, MLC_DATA_LOSS,
     "safetensors: tensor 'b' at data_offsets [2, 6] overlaps tensor 'a' at [0, 4]"},
    {"{" F32_4("a", 0, 4) "," F32_4("b", 0, 4) "}", 4, MLC_DATA_LOSS,
     "safetensors: tensor 'b' at data_offsets [0, 4] overlaps tensor 'a' at [0, 4]"},
    {"{" F32_4("b", 8, 12) "," F32_4("a", 0, 4) "}", 12, MLC_DATA_LOSS,
     "safetensors: bytes [4, 8) of the data region belong to no tensor (a hole before tensor 'b')"},
    {"{" F32_4("a", 4, 8) "}", 8, MLC_DATA_LOSS,
     "safetensors: bytes [0, 4) of the data region belong to no tensor (a hole before tensor 'a')"},
    {"{" F32_4("a", 0, 4) "}", 7, MLC_DATA_LOSS,
     "safetensors: bytes [4, 7) at the end of the data region belong to no tensor (after tensor 'a')"},
    {"{}", 3, MLC_DATA_LOSS, "safetensors: the header declares no tensors but the data region has 3 bytes"},
    {"{" F32_4("a", 0, 4) "," F32_4("a", 4, 8) "}", 8, MLC_DATA_LOSS,
     "safetensors: tensor 'a' appears twice in the header"},
    /* Metadata */
    {"{\"__metadata__\":[1]}", 0, MLC_DATA_LOSS, "safetensors: __metadata__ is an array, not an object"},
    {"{\"__metadata__\":{\"k\":1}}", 0, MLC_DATA_LOSS,
     "safetensors: __metadata__ key 'k' has a value that is 1, not a string"},
    {"{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", 0, MLC_DATA_LOSS,
     "safetensors: __metadata__ key 'k' appears twice"},
    {"{\"__metadata__\":{},\"__metadata__\":{}}", 0, MLC_DATA_LOSS,
     "safetensors: __metadata__ appears twice in the header"},
};

static void test_rejects(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof bad_cases / sizeof *bad_cases; i++) {
    const struct bad_case *c = &bad_cases[i];
    size_t len;
    uint8_t *buf = make_file(c->header, c->data_len, &len);
    mlc_safetensors *f = (mlc_safetensors *)1;
    mlc_status st = mlc_safetensors_open_memory(buf, len, mlc_allocator_default(), &f);
    if (mlc_status_code(st) != c->code || strcmp(mlc_status_message(st), c->message) != 0)
      print_error("case %zu: header %s\n", i, c->header);
    expect_status(st, c->code, c->message);
    assert_null(f);
    free(buf);
  }
}

/* Failures decided by the 8-byte length, before any JSON is read. */
static void test_rejects_length(void **state) {
  (void)state;
  uint8_t buf[64] = {0};
  mlc_safetensors *f;
  expect_status(mlc_safetensors_open_memory(buf, 5, mlc_allocator_default(), &f), MLC_DATA_LOSS,
                "safetensors: file is 5 bytes, too short for the 8-byte header length");
  expect_status(mlc_safetensors_open_memory(buf, 0, mlc_allocator_default(), &f), MLC_DATA_LOSS,
                "safetensors: file is 0 bytes, too short for the 8-byte header length");
  buf[0] = 100;
  expect_status(mlc_safetensors_open_memory(buf, 28, mlc_allocator_default(), &f), MLC_DATA_LOSS,
                "safetensors: header length 100 runs past the end of the file (20 bytes follow "
                "the length)");
  /* 100000001 = 0x05F5E101: one over the reference's limit; checked before the size. */
  buf[0] = 0x01, buf[1] = 0xE1, buf[2] = 0xF5, buf[3] = 0x05;
  expect_status(mlc_safetensors_open_memory(buf, 64, mlc_allocator_default(), &f), MLC_DATA_LOSS,
                "safetensors: header length 100000001 is over the limit of 100000000 bytes");
  memset(buf, 0xff, 8);
  expect_status(mlc_safetensors_open_memory(buf, 64, mlc_allocator_default(), &f), MLC_DATA_LOSS,
                "safetensors: header length 18446744073709551615 is over the limit of 100000000 bytes");
  assert_null(f);
}

#define TORCH_RECIPE                                                          \
  "  import torch, safetensors.torch\n"                                        \
  "  state = torch.load(\"model.pt\", map_location=\"cpu\")  # or model.state_dict()\n" \
  "  safetensors.torch.save_file(state, \"model.safetensors\")"

/* The files users try first, told by their first bytes (those below are the
 * first 48 bytes of files torch 1.13 and numpy wrote), whatever their names. */
static void test_rejects_other_formats(void **state) {
  (void)state;
  static const struct { const char *what; char bytes[49]; mlc_safetensors_foreign kind; const char *message; } cases[] = {
    {"torch.save", "\x50\x4b\x03\x04\x00\x00\x08\x08\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x0c\x00\x16\x00\x6d\x32\x37\x2f\x64\x61\x74\x61\x2e\x70\x6b\x6c\x46\x42\x12\x00\x5a\x5a", MLC_ST_FOREIGN_TORCH_ZIP,
     "safetensors: this is a PyTorch file (torch.save, zip format), not safetensors; convert it in Python:\n" TORCH_RECIPE},
    {"torch.save legacy", "\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19\x2e\x80\x02\x4d\xe9\x03\x2e\x80\x02\x7d\x71\x00\x28\x58\x10\x00\x00\x00\x70\x72\x6f\x74\x6f\x63\x6f\x6c\x5f\x76\x65\x72\x73\x69\x6f\x6e", MLC_ST_FOREIGN_TORCH_PICKLE,
     "safetensors: this is a PyTorch file (torch.save, legacy pickle format), not safetensors; convert it in Python:\n"
     TORCH_RECIPE},
    {"pickle.dump", "\x80\x04\x95\x0a\x00\x00\x00\x00\x00\x00\x00\x7d\x94\x8c\x01\x61\x94\x4b\x01\x73\x2e", MLC_ST_FOREIGN_PICKLE,
     "safetensors: this is a Python pickle (pickle.dump or torch.save), not safetensors; if PyTorch wrote it, "
     "convert it in Python:\n" TORCH_RECIPE},
    {"numpy.savez", "\x50\x4b\x03\x04\x14\x00\x00\x00\x00\x00\x00\x00\x21\x00\xa9\xf6\x9b\x18\x8c\x00\x00\x00\x8c\x00\x00\x00\x05\x00\x14\x00\x78\x2e\x6e\x70\x79\x01\x00\x10\x00\x8c\x00\x00\x00\x00\x00\x00\x00\x8c", MLC_ST_FOREIGN_NPZ,
     "safetensors: this is a NumPy .npz archive (numpy.savez), not safetensors; convert it in Python:\n"
     "  import numpy, safetensors.numpy\n"
     "  safetensors.numpy.save_file(dict(numpy.load(\"data.npz\")), \"data.safetensors\")"},
    {"numpy.savez_compressed", "\x50\x4b\x03\x04\x14\x00\x00\x00\x08\x00\x00\x00\x21\x00\xa9\xf6\x9b\x18\x47\x00\x00\x00\x8c\x00\x00\x00\x05\x00\x14\x00\x78\x2e\x6e\x70\x79\x01\x00\x10\x00\x8c\x00\x00\x00\x00\x00\x00\x00\x47", MLC_ST_FOREIGN_NPZ, NULL},
    {"numpy.save", "\x93\x4e\x55\x4d\x50\x59\x01\x00\x76\x00\x7b\x27\x64\x65\x73\x63\x72\x27\x3a\x20\x27\x3c\x66\x38\x27\x2c\x20\x27\x66\x6f\x72\x74\x72\x61\x6e\x5f\x6f\x72\x64\x65\x72\x27\x3a\x20\x46\x61\x6c\x73", MLC_ST_FOREIGN_NPY,
     "safetensors: this is a NumPy .npy array, not safetensors; convert it in Python, naming the tensor:\n"
     "  import numpy, safetensors.numpy\n"
     "  safetensors.numpy.save_file({\"NAME\": numpy.load(\"data.npy\")}, \"data.safetensors\")"},
    {"zip -0", "PK\x03\x04\x0a\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\x05\0\0\0a.txt", MLC_ST_FOREIGN_ZIP,
     "safetensors: this is a zip archive, but neither torch.save's nor numpy.savez's, and not safetensors"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    uint8_t buf[64] = {0};
    memcpy(buf, cases[i].bytes, 48);
    assert_int_equal(mlc_safetensors_sniff(buf, sizeof buf), cases[i].kind);
    mlc_safetensors *f;
    mlc_status st = mlc_safetensors_open_memory(buf, sizeof buf, mlc_allocator_default(), &f);
    assert_null(f);
    if (!cases[i].message) {
      mlc_status_free(st);
      continue;
    }
    if (!st || strcmp(mlc_status_message(st), cases[i].message))
      print_error("%s\n", cases[i].what);
    expect_status(st, MLC_INVALID_ARGUMENT, cases[i].message);
  }
  /* Too short to say: plain safetensors errors. */
  expect_status(mlc_safetensors_open_memory("PK\x03\x04\0\0\0\0\0", 9, mlc_allocator_default(), &(mlc_safetensors *){0}),
                MLC_INVALID_ARGUMENT,
                "safetensors: this is a zip archive, but neither torch.save's nor numpy.savez's, and not safetensors");
}

/* NUL bytes, which cJSON would skip as whitespace or cut names at. */
static void test_rejects_nul(void **state) {
  (void)state;
  static const char in_name[] = "{\"a\0b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}";
  static const char trailing[] = "{}\0\0";
  size_t len;
  mlc_safetensors *f;
  uint8_t *buf = make_file_n(in_name, sizeof in_name - 1, 1, &len);
  expect_status(mlc_safetensors_open_memory(buf, len, mlc_allocator_default(), &f), MLC_DATA_LOSS,
                "safetensors: header byte 3 is the control character 0x00, which JSON forbids");
  free(buf);
  /* An escaped NUL is valid JSON but has no C string; an escaped backslash
   * followed by "u0000" is just text. */
  buf = make_file("{\"a\\u0000b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, &len);
  expect_status(mlc_safetensors_open_memory(buf, len, mlc_allocator_default(), &f), MLC_UNIMPLEMENTED,
                "safetensors: header byte 3: strings containing \\u0000 (NUL) are not supported");
  free(buf);
  buf = make_file("{\"a\\\\u0000b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, &len);
  const mlc_safetensors_tensor *t;
  expect_ok(mlc_safetensors_open_memory(buf, len, mlc_allocator_default(), &f));
  expect_ok(mlc_safetensors_find(f, "a\\u0000b", &t));
  mlc_safetensors_close(f);
  free(buf);
  buf = make_file_n(trailing, sizeof trailing - 1, 0, &len);
  expect_status(mlc_safetensors_open_memory(buf, len, mlc_allocator_default(), &f), MLC_DATA_LOSS,
                "safetensors: header byte 2 is the control character 0x00, which JSON forbids");
  free(buf);
}

/* Long names are truncated in messages, not the other way round. */
static void test_long_name_in_message(void **state) {
  (void)state;
  char header[1200], name[1001];
  memset(name, 'n', 1000);
  name[1000] = '\0';
  snprintf(header, sizeof header, "{\"%s\":{\"dtype\":\"F31\",\"shape\":[],\"data_offsets\":[0,4]}}", name);
  size_t len;
  uint8_t *buf = make_file(header, 4, &len);
  mlc_safetensors *f;
  mlc_status st = mlc_safetensors_open_memory(buf, len, mlc_allocator_default(), &f);
  assert_int_equal(mlc_status_code(st), MLC_DATA_LOSS);
  assert_non_null(strstr(mlc_status_message(st), "tensor 'nnnnnnnnnn"));
  assert_true(strlen(mlc_status_message(st)) < 300);
  mlc_status_free(st);
  free(buf);
}

static void test_open_file_errors(void **state) {
  (void)state;
  clear_tmpdir();
  mlc_safetensors *f;
  char want[2048];
  const char *missing = tmp_path("missing.safetensors");
  snprintf(want, sizeof want, "%s: cannot open: No such file or directory", missing);
  expect_status(mlc_safetensors_open_file(missing, mlc_allocator_default(), &f), MLC_NOT_FOUND, want);

  snprintf(want, sizeof want, "%s: not a regular file", tmpdir);
  expect_status(mlc_safetensors_open_file(tmpdir, mlc_allocator_default(), &f), MLC_INVALID_ARGUMENT, want);

  /* A corrupt file's message leads with its path. */
  size_t len;
  uint8_t *buf = make_file("{" F32_4("a", 0, 4) "}", 5, &len);
  const char *path = tmp_path("trailing.safetensors");
  write_file(path, buf, len);
  free(buf);
  snprintf(want, sizeof want, "%s: safetensors: bytes [4, 5) at the end of the data region belong "
           "to no tensor (after tensor 'a')", path);
  expect_status(mlc_safetensors_open_file(path, mlc_allocator_default(), &f), MLC_DATA_LOSS, want);
  assert_null(f);

  /* A torch.save file, whatever its name: the recipe names it. */
  static const uint8_t torch_zip[64] = "PK\x03\x04\0\0\x08\x08\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\x10\0\0\0"
                                       "archive/data.pkl";
  path = tmp_path("w.bin");
  write_file(path, torch_zip, sizeof torch_zip);
  char stem[1024];
  snprintf(stem, sizeof stem, "%.*s", (int)(strlen(path) - 4), path);
  snprintf(want, sizeof want, "%s: safetensors: this is a PyTorch file (torch.save, zip format), not safetensors; "
           "convert it in Python:\n"
           "  import torch, safetensors.torch\n"
           "  state = torch.load(\"%s\", map_location=\"cpu\")  # or model.state_dict()\n"
           "  safetensors.torch.save_file(state, \"%s.safetensors\")", path, path, stem);
  expect_status(mlc_safetensors_open_file(path, mlc_allocator_default(), &f), MLC_INVALID_ARGUMENT, want);
  assert_null(f);
}

/* ---- Writer: rejections ----------------------------------------------- */

static void test_writer_rejects(void **state) {
  (void)state;
  clear_tmpdir();
  const float v[4] = {0};
  const int64_t s2[] = {2}, neg[] = {3, -1}, big[] = {(int64_t)1 << 40, (int64_t)1 << 20};
  static const char bad_utf8[] = "x\xff";
  const struct {
    mlc_safetensors_entry t[2];
    size_t n;
    const char *message;
  } cases[] = {
      {{{"a", MLC_ST_F32, 1, s2, v}, {"a", MLC_ST_I32, 1, s2, v}}, 2,
       "safetensors: tensor 'a' appears twice"},
      {{{"a", MLC_ST_F32, 1, s2, v}, {"__metadata__", MLC_ST_F32, 1, s2, v}}, 2,
       "safetensors: tensor #1: the name '__metadata__' is reserved"},
      {{{NULL, MLC_ST_F32, 1, s2, v}}, 1, "safetensors: tensor #0 has a NULL name"},
      {{{bad_utf8, MLC_ST_F32, 1, s2, v}}, 1, "safetensors: tensor #0: name is not valid UTF-8"},
      {{{"w", (mlc_safetensors_dtype)99, 1, s2, v}}, 1,
       "safetensors: tensor 'w': dtype 99 is not a safetensors dtype"},
      {{{"w", MLC_ST_F32, -1, s2, v}}, 1, "safetensors: tensor 'w': rank -1 is negative"},
      {{{"w", MLC_ST_F32, 2, NULL, v}}, 1, "safetensors: tensor 'w': rank 2 but the shape is NULL"},
      {{{"w", MLC_ST_F32, 2, neg, v}}, 1,
       "safetensors: tensor 'w': shape[1] is -1, not in [0, 2^53)"},
      {{{"w", MLC_ST_F32, 2, big, v}}, 1, "safetensors: tensor 'w': byte size is 2^53 or more"},
      {{{"w", MLC_ST_F32, 1, s2, NULL}}, 1, "safetensors: tensor 'w': data is NULL for 8 bytes"},
  };
  const char *path = tmp_path("w.safetensors");
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    expect_status(mlc_safetensors_save(path, cases[i].t, cases[i].n, NULL, 0, mlc_allocator_default()),
                  MLC_INVALID_ARGUMENT, cases[i].message);
    void *bytes = (void *)1;
    size_t size = 1;
    expect_status(mlc_safetensors_serialize(cases[i].t, cases[i].n, NULL, 0, mlc_allocator_default(),
                                            &bytes, &size),
                  MLC_INVALID_ARGUMENT, cases[i].message);
    assert_null(bytes);
    assert_int_equal(size, 0);
  }
  mlc_safetensors_entry ok = {"w", MLC_ST_F32, 1, s2, v};
  mlc_safetensors_kv dup[] = {{"k", "1"}, {"k", "2"}}, null_value[] = {{"k", NULL}};
  expect_status(mlc_safetensors_save(path, &ok, 1, dup, 2, mlc_allocator_default()),
                MLC_INVALID_ARGUMENT, "safetensors: metadata key 'k' appears twice");
  expect_status(mlc_safetensors_save(path, &ok, 1, null_value, 1, mlc_allocator_default()),
                MLC_INVALID_ARGUMENT, "safetensors: metadata pair #0 has a NULL value");
  /* Two sizes that are each fine but overflow together. */
  const int64_t half[] = {(int64_t)1 << 52};
  mlc_safetensors_entry two[] = {{"a", MLC_ST_U8, 1, half, v}, {"b", MLC_ST_U8, 1, half, v}};
  expect_status(mlc_safetensors_save(path, two, 2, NULL, 0, mlc_allocator_default()),
                MLC_INVALID_ARGUMENT, "safetensors: the tensors total 2^53 bytes or more");
  assert_int_equal(count_files(), 0); /* nothing was written */
}

/* OS failures leave nothing behind and keep the old file. */
static void test_writer_io_errors(void **state) {
  (void)state;
  clear_tmpdir();
  const float v[2] = {1, 2};
  const int64_t s2[] = {2};
  mlc_safetensors_entry e = {"w", MLC_ST_F32, 1, s2, v};
  char path[600], want[1400];
  snprintf(path, sizeof path, "%s/no/such/dir/w.safetensors", tmpdir);
  snprintf(want, sizeof want, "%s.tmp.%ld: cannot create: No such file or directory", path, (long)getpid());
  expect_status(mlc_safetensors_save(path, &e, 1, NULL, 0, mlc_allocator_default()), MLC_IO, want);

  /* Renaming onto a non-empty directory fails after the data is written. */
  snprintf(path, sizeof path, "%s/adir", tmpdir);
  mkdir(path, 0700);
  write_file(tmp_path("adir/keep"), "k", 1);
  mlc_status st = mlc_safetensors_save(path, &e, 1, NULL, 0, mlc_allocator_default());
  assert_int_equal(mlc_status_code(st), MLC_IO);
  assert_non_null(strstr(mlc_status_message(st), "cannot rename"));
  mlc_status_free(st);
  assert_int_equal(count_files(), 1); /* just adir: the temporary was removed */
  unlink(tmp_path("adir/keep"));
  rmdir(path);
}

/* ---- Fault injection -------------------------------------------------- */

static void test_oom_open_memory(void **state) {
  (void)state;
  size_t len;
  uint8_t *buf = make_file("{\"__metadata__\":{\"a\":\"b\"}," F32_4("x", 0, 4) "," F32_4("y", 4, 8) "}", 8, &len);
  size_t n = 1;
  for (;; n++) {
    mlc_failing_allocator fa;
    mlc_allocator a = mlc_allocator_failing(&fa, mlc_allocator_default(), n);
    mlc_safetensors *f;
    mlc_status st = mlc_safetensors_open_memory(buf, len, a, &f);
    if (fa.failed) {
      assert_int_equal(mlc_status_code(st), MLC_OUT_OF_MEMORY);
      assert_null(f);
      mlc_status_free(st);
    } else {
      expect_ok(st);
      assert_int_equal(mlc_safetensors_count(f), 2);
      mlc_safetensors_close(f);
    }
    assert_int_equal(fa.live, 0);
    if (!fa.failed)
      break;
  }
  assert_true(n >= 2); /* at least one allocation was made to fail */
  free(buf);
}

static void test_oom_open_file(void **state) {
  (void)state;
  clear_tmpdir();
  mlc_safetensors_entry t[RT_COUNT];
  make_roundtrip_entries(t);
  const char *path = tmp_path("oom.safetensors");
  expect_ok(mlc_safetensors_save(path, t, RT_COUNT, NULL, 0, mlc_allocator_default()));
  size_t n = 1;
  for (;; n++) {
    mlc_failing_allocator fa;
    mlc_allocator a = mlc_allocator_failing(&fa, mlc_allocator_default(), n);
    mlc_safetensors *f;
    mlc_status st = mlc_safetensors_open_file(path, a, &f);
    if (fa.failed) {
      assert_int_equal(mlc_status_code(st), MLC_OUT_OF_MEMORY);
      assert_non_null(strstr(mlc_status_message(st), path));
      assert_null(f);
      mlc_status_free(st);
    } else {
      expect_ok(st);
      expect_contents(f, t, RT_COUNT, NULL, 0);
      mlc_safetensors_close(f);
    }
    assert_int_equal(fa.live, 0);
    if (!fa.failed)
      break;
  }
  assert_true(n >= 3); /* the file bytes and the table */
  free_roundtrip_entries();
}

static void test_oom_save(void **state) {
  (void)state;
  clear_tmpdir();
  mlc_safetensors_entry t[RT_COUNT];
  make_roundtrip_entries(t);
  mlc_safetensors_kv kv[] = {{"format", "pt"}};
  const char *path = tmp_path("oom.safetensors");
  /* An old file that must survive every failed save. */
  write_file(path, "old", 3);
  size_t n = 1;
  for (;; n++) {
    mlc_failing_allocator fa;
    mlc_allocator a = mlc_allocator_failing(&fa, mlc_allocator_default(), n);
    mlc_status st = mlc_safetensors_save(path, t, RT_COUNT, kv, 1, a);
    assert_int_equal(fa.live, 0);
    if (!fa.failed) {
      expect_ok(st);
      break;
    }
    assert_int_equal(mlc_status_code(st), MLC_OUT_OF_MEMORY);
    mlc_status_free(st);
    size_t len;
    uint8_t *old = read_file(path, &len);
    assert_int_equal(len, 3);
    assert_memory_equal(old, "old", 3);
    free(old);
    assert_int_equal(count_files(), 1);
  }
  assert_true(n >= 3);
  mlc_safetensors *f;
  expect_ok(mlc_safetensors_open_file(path, mlc_allocator_default(), &f));
  expect_contents(f, t, RT_COUNT, kv, 1);
  mlc_safetensors_close(f);

  for (n = 1;; n++) {
    mlc_failing_allocator fa;
    mlc_allocator a = mlc_allocator_failing(&fa, mlc_allocator_default(), n);
    void *bytes;
    size_t size;
    mlc_status st = mlc_safetensors_serialize(t, RT_COUNT, kv, 1, a, &bytes, &size);
    if (!fa.failed) {
      expect_ok(st);
      mlc_allocator_free(a, bytes);
      assert_int_equal(fa.live, 0);
      break;
    }
    assert_int_equal(mlc_status_code(st), MLC_OUT_OF_MEMORY);
    assert_null(bytes);
    mlc_status_free(st);
    assert_int_equal(fa.live, 0);
  }
  assert_true(n >= 3);
  free_roundtrip_entries();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dtypes),
      cmocka_unit_test(test_reference_bytes),
      cmocka_unit_test(test_writer_order),
      cmocka_unit_test(test_roundtrip),
      cmocka_unit_test(test_accepts),
      cmocka_unit_test(test_rejects),
      cmocka_unit_test(test_rejects_length),
      cmocka_unit_test(test_rejects_other_formats),
      cmocka_unit_test(test_rejects_nul),
      cmocka_unit_test(test_long_name_in_message),
      cmocka_unit_test(test_open_file_errors),
      cmocka_unit_test(test_writer_rejects),
      cmocka_unit_test(test_writer_io_errors),
      cmocka_unit_test(test_oom_open_memory),
      cmocka_unit_test(test_oom_open_file),
      cmocka_unit_test(test_oom_save),
  };
  return cmocka_run_group_tests(tests, make_tmpdir, remove_tmpdir);
}
