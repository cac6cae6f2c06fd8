/* The artifact's C API past file paths (issue 25), on examples/mlp.mdl
 * compiled as mlpb (batch 2):
 *   - weights from memory: loaded from the bytes of a safetensors file, the
 *     outputs equal those after loading the file, bit for bit;
 *   - truncated and corrupted bytes give the status the file gives (code and
 *     message, past the prefix naming the source), naming the tensor where
 *     one is at fault; every buffer is an exact-size heap copy, so reading
 *     past its end fails under ASan in the sanitizer build;
 *   - an allocator passed in: a counting allocator sees every host
 *     allocation of a model freed at destroy, and the outputs equal malloc's;
 *     one that refuses its Nth request, for every N, gives a clean
 *     OUT_OF_MEMORY from create and leaks nothing.
 * Prints "N passed, M failed". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlpb.h"

enum { BATCH = 2, IN = 784, OUT = 10 };

static int passed, failed;
static const char *work;

static void check(int ok, const char *what) {
  printf("%s %s\n", ok ? "ok" : "FAIL", what);
  if (ok) passed++;
  else failed++;
}

static void die(mlc_status st, const char *what) {
  printf("FAIL %s: %s\n%d passed, %d failed\n", what, mlc_status_message(st), passed, failed + 1);
  exit(1);
}

static void path_of(char *buf, size_t n, const char *name) { snprintf(buf, n, "%s/%s", work, name); }

static unsigned char *read_all(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  unsigned char *buf = NULL;
  long n = f && !fseek(f, 0, SEEK_END) ? ftell(f) : -1;
  if (n > 0 && !fseek(f, 0, SEEK_SET) && (buf = malloc((size_t)n)) && fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  if (f) fclose(f);
  *size = (size_t)n;
  return buf;
}

static void write_all(const char *path, const void *data, size_t size) {
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(data, 1, size, f) != size || fclose(f)) {
    printf("FAIL cannot write %s\n", path);
    exit(1);
  }
}

/* The first `needle` in the n bytes at `hay` (memmem is not C11). */
static unsigned char *find(unsigned char *hay, size_t n, const char *needle) {
  size_t k = strlen(needle);
  for (size_t i = 0; i + k <= n; i++)
    if (!memcmp(hay + i, needle, k)) return hay + i;
  printf("FAIL the header has no %s\n", needle);
  exit(1);
}

/* Counts the blocks and bytes it hands out and takes back. */
typedef struct {
  size_t calls, live, bytes;
} counter;

static void *count_alloc(void *ctx, size_t n) {
  counter *c = ctx;
  void *p = malloc(n);
  if (p) c->calls++, c->live++, c->bytes += n;
  return p;
}

static void count_free(void *ctx, void *p) {
  counter *c = ctx;
  c->live--;
  free(p);
}

static float x[BATCH * IN];

/* The forward pass's output on x. */
static void forward(mlpb *m, float *y) {
  mlc_status st = mlpb_forward(m, x, y);
  if (st) die(st, "forward");
}

/* Loads `size` bytes of `bytes` from memory (an exact-size copy) and from a
 * file holding them: both fail with the same code and the same message past
 * their prefixes ("weights in memory: ", "PATH: "), which contains `want`. */
static void check_bad(mlpb *m, const unsigned char *bytes, size_t size, mlc_status_code_t code, const char *want,
                      const char *what) {
  unsigned char *copy = malloc(size ? size : 1);
  memcpy(copy, bytes, size);
  mlc_status mem = mlpb_load_weights_memory(m, copy, size);
  free(copy);
  char path[4096];
  path_of(path, sizeof path, "bad.safetensors");
  write_all(path, bytes, size);
  mlc_status file = mlpb_load_weights(m, path);
  const char *mm = mlc_status_message(mem), *fm = mlc_status_message(file);
  size_t pl = strlen(path);
  int ok = mlc_status_code(mem) == code && mlc_status_code(file) == code && !strncmp(mm, "weights in memory: ", 19) &&
           !strncmp(fm, path, pl) && !strncmp(fm + pl, ": ", 2) && !strcmp(mm + 19, fm + pl + 2) && strstr(mm, want);
  if (!ok)
    printf("  memory: %s: %s\n  file:   %s: %s\n  want %s containing \"%s\"\n", mlc_status_code_name(mlc_status_code(mem)),
           mm, mlc_status_code_name(mlc_status_code(file)), fm, mlc_status_code_name(code), want);
  else
    printf("  %s\n", mm);
  mlc_status_free(mem);
  mlc_status_free(file);
  check(ok, what);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: artifact_api WORKDIR\n");
    return 2;
  }
  work = argv[1];
  for (int i = 0; i < BATCH * IN; i++) x[i] = (float)((i * 7) % 29) / 29.0f - 0.5f;

  /* Weights to load: seed 7's, saved to a file. */
  mlpb *src, *from_file, *from_mem;
  mlc_status st = mlpb_create(NULL, &src);
  if (!st) st = mlpb_create(NULL, &from_file);
  if (!st) st = mlpb_create(NULL, &from_mem);
  if (st) die(st, "create");
  mlpb_init_weights(src, 7);
  char wpath[4096];
  path_of(wpath, sizeof wpath, "w.safetensors");
  if ((st = mlpb_save_weights(src, wpath))) die(st, "save weights");
  size_t size;
  unsigned char *bytes = read_all(wpath, &size);
  if (!bytes) {
    printf("FAIL cannot read %s\n", wpath);
    return 1;
  }

  /* From the file and from memory: the same outputs as the model that saved them. */
  float want[BATCH * OUT], y_file[BATCH * OUT], y_mem[BATCH * OUT];
  forward(src, want);
  if ((st = mlpb_load_weights(from_file, wpath))) die(st, "load weights");
  if ((st = mlpb_load_weights_memory(from_mem, bytes, size))) die(st, "load weights from memory");
  forward(from_file, y_file);
  forward(from_mem, y_mem);
  check(!memcmp(y_file, want, sizeof want) && !memcmp(y_mem, y_file, sizeof y_mem),
        "weights from memory give the file's outputs, bit for bit");

  /* Truncated: every cut through the length, the header and the data. */
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; i--) hlen = hlen << 8 | bytes[i];
  check_bad(from_mem, bytes, 0, MLC_DATA_LOSS, "too short for the 8-byte header length", "an empty buffer");
  check_bad(from_mem, bytes, 5, MLC_DATA_LOSS, "too short for the 8-byte header length", "a buffer cut in the length");
  check_bad(from_mem, bytes, 8 + hlen / 2, MLC_DATA_LOSS, "runs past the end of the file", "a buffer cut in the header");
  check_bad(from_mem, bytes, 8 + hlen, MLC_DATA_LOSS, "tensor '", "a buffer with the header and no data");
  check_bad(from_mem, bytes, size - 1, MLC_DATA_LOSS, "run past the end of the", "a buffer one byte short");
  int all = 1;
  for (size_t cut = 0; cut < size && all; cut += 997) {
    unsigned char *copy = malloc(cut ? cut : 1);
    memcpy(copy, bytes, cut);
    st = mlpb_load_weights_memory(from_mem, copy, cut);
    free(copy);
    all = mlc_status_code(st) == MLC_DATA_LOSS;
    if (!all) printf("  cut at %zu bytes: %s\n", cut, mlc_status_message(st));
    mlc_status_free(st);
  }
  check(all, "every cut every 997 bytes is refused as DATA_LOSS");

  /* Corrupted: the header's JSON broken, a dtype changed (F32 -> I32 keeps
   * every size, so the file parses and the model refuses it), one tensor's
   * shape changed. */
  unsigned char *bad = malloc(size);
  memcpy(bad, bytes, size);
  bad[8] = '[';
  check_bad(from_mem, bad, size, MLC_DATA_LOSS, "header is not valid JSON", "a header that is not JSON");
  memcpy(bad, bytes, size);
  find(bad + 8, hlen, "\"F32\"")[1] = 'I';
  check_bad(from_mem, bad, size, MLC_INVALID_ARGUMENT, "is I32, the model needs F32", "a tensor of the wrong dtype");
  memcpy(bad, bytes, size);
  memcpy(find(bad + 8, hlen, "[256,784]"), "[784,256]", 9);
  check_bad(from_mem, bad, size, MLC_INVALID_ARGUMENT, "has shape [784, 256], the model needs [256, 784]",
            "a tensor of the wrong shape");
  free(bad);
  st = mlpb_load_weights_memory(from_mem, NULL, 16);
  check(mlc_status_code(st) == MLC_INVALID_ARGUMENT, "a NULL buffer is refused");
  mlc_status_free(st);

  /* Failed loads leave a model that loads and runs. */
  if ((st = mlpb_load_weights_memory(from_mem, bytes, size))) die(st, "load weights from memory again");
  forward(from_mem, y_mem);
  check(!memcmp(y_mem, want, sizeof want), "the model runs after failed loads");

  /* An allocator passed in. */
  counter c = {0, 0, 0};
  mlpb_options opt = {.threads = 2, .allocator = {count_alloc, count_free, &c}};
  mlpb *counted;
  if ((st = mlpb_create(&opt, &counted))) die(st, "create with a counting allocator");
  size_t at_create = c.calls;
  float y_counted[BATCH * OUT], loss;
  int32_t labels[BATCH] = {3, 7};
  if ((st = mlpb_load_weights_memory(counted, bytes, size))) die(st, "load weights with a counting allocator");
  forward(counted, y_counted);
  if ((st = mlpb_train_step(counted, x, labels, &loss))) die(st, "train step with a counting allocator");
  size_t before_destroy = c.live;
  mlpb_destroy(counted);
  printf("  %zu allocations (%zu at create, %zu bytes in all), %zu live before destroy, %zu after\n", c.calls, at_create,
         c.bytes, before_destroy, c.live);
  check(at_create > 0 && c.bytes > 1000000 && c.live == 0, "a counting allocator sees every allocation freed at destroy");
  check(!memcmp(y_counted, want, sizeof want), "outputs with the allocator passed in equal malloc's");

  /* Refuse the Nth request of create, for every N. */
  int clean = 1;
  size_t n = 1;
  for (;; n++) {
    mlc_failing_allocator fa;
    opt.allocator = mlc_allocator_failing(&fa, mlc_allocator_default(), n);
    mlpb *m = NULL;
    st = mlpb_create(&opt, &m);
    if (st && (mlc_status_code(st) != MLC_OUT_OF_MEMORY || m)) clean = 0;
    if (!st) mlpb_destroy(m);
    if (fa.live) clean = 0;
    if (!clean) printf("  refusing request %zu: %s, %zu blocks leaked\n", n, mlc_status_message(st), fa.live);
    mlc_status_free(st);
    if (!fa.failed || !clean) break;
  }
  printf("  create makes %zu requests\n", n - 1);
  check(clean && n > 2, "refusing any one request of create gives OUT_OF_MEMORY and leaks nothing");

  free(bytes);
  mlpb_destroy(src);
  mlpb_destroy(from_file);
  mlpb_destroy(from_mem);
  printf("%d passed, %d failed\n", passed, failed);
  return failed != 0;
}
