/* libFuzzer harness for the safetensors loader (built with MLC_FUZZ=ON).
 *
 * Any input the loader accepts must be self-consistent: every tensor found
 * by name, its bytes inside the input, and serializing it then loading the
 * result must give the same tensors back.  Inputs it rejects must come back
 * as an error status, never a crash, leak or sanitizer report.  The first
 * input byte also picks an allocation to fail, so error paths get fuzzed too.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/safetensors.h"

/* Aborting is how a libFuzzer harness reports a broken property. */
#define FUZZ_CHECK(cond) \
  do {                   \
    if (!(cond))         \
      abort();           \
  } while (0)

static void check_same(const mlc_safetensors *a, const mlc_safetensors *b) {
  FUZZ_CHECK(mlc_safetensors_count(a) == mlc_safetensors_count(b));
  for (size_t i = 0; i < mlc_safetensors_count(a); i++) {
    const mlc_safetensors_tensor *x = mlc_safetensors_tensor_at(a, i);
    const mlc_safetensors_tensor *y = mlc_safetensors_tensor_at(b, i);
    FUZZ_CHECK(strcmp(x->name, y->name) == 0 && x->dtype == y->dtype && x->rank == y->rank &&
               x->nbytes == y->nbytes);
    FUZZ_CHECK(x->rank == 0 || memcmp(x->shape, y->shape, (size_t)x->rank * sizeof *x->shape) == 0);
    FUZZ_CHECK(x->nbytes == 0 || memcmp(x->data, y->data, (size_t)x->nbytes) == 0);
  }
  FUZZ_CHECK(mlc_safetensors_metadata_count(a) == mlc_safetensors_metadata_count(b));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  mlc_failing_allocator fa;
  mlc_allocator a = mlc_allocator_default();
  /* 1 in 8 inputs runs with its first or second allocation failing. */
  if (size > 0 && data[0] % 8 == 0)
    a = mlc_allocator_failing(&fa, a, 1 + data[0] / 8 % 2);

  mlc_safetensors *f;
  mlc_status st = mlc_safetensors_open_memory(data, size, a, &f);
  if (st) {
    FUZZ_CHECK(f == NULL && mlc_status_code(st) != MLC_OK && mlc_status_message(st)[0]);
    mlc_status_free(st);
    return 0;
  }
  size_t n = mlc_safetensors_count(f), nm = mlc_safetensors_metadata_count(f);
  mlc_safetensors_entry *entries = calloc(n + 1, sizeof *entries);
  mlc_safetensors_kv *kv = calloc(nm + 1, sizeof *kv);
  FUZZ_CHECK(entries && kv);
  for (size_t i = 0; i < n; i++) {
    const mlc_safetensors_tensor *t = mlc_safetensors_tensor_at(f, i), *found;
    const uint8_t *p = t->data;
    FUZZ_CHECK(p >= data + 8 && p + t->nbytes <= data + size);
    FUZZ_CHECK(i == 0 || strcmp(mlc_safetensors_tensor_at(f, i - 1)->name, t->name) < 0);
    mlc_status fs = mlc_safetensors_find(f, t->name, &found);
    FUZZ_CHECK(fs == NULL && found == t);
    entries[i] = (mlc_safetensors_entry){t->name, t->dtype, t->rank, t->shape, t->data};
  }
  for (size_t i = 0; i < nm; i++) {
    mlc_safetensors_metadata_at(f, i, &kv[i].key, &kv[i].value);
    FUZZ_CHECK(strcmp(mlc_safetensors_metadata_get(f, kv[i].key), kv[i].value) == 0);
  }

  /* Whatever loads must write and load back the same. */
  void *bytes;
  size_t nbytes;
  st = mlc_safetensors_serialize(entries, n, kv, nm, a, &bytes, &nbytes);
  if (!st) {
    mlc_safetensors *g;
    st = mlc_safetensors_open_memory(bytes, nbytes, a, &g);
    FUZZ_CHECK(st == NULL || mlc_status_code(st) == MLC_OUT_OF_MEMORY);
    if (!st) {
      check_same(f, g);
      mlc_safetensors_close(g);
    }
    mlc_allocator_free(a, bytes);
  }
  FUZZ_CHECK(st == NULL || mlc_status_code(st) == MLC_OUT_OF_MEMORY);
  mlc_status_free(st);
  free(entries);
  free(kv);
  mlc_safetensors_close(f);
  return 0;
}
