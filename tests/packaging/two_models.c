/* Two models in one application, each checked the ways issue 25 asks:
 * examples/mlp.mdl compiled twice, as mlp1 (batch 1) and mlp4 (batch 4),
 * both linked here (two lib<name>.a, each with the runtime inside).
 *   - both run: mlp1 on row r of x gives row r of mlp4's output on x;
 *   - the _tensors calls refuse a short buffer, a wrong shape and a wrong
 *     dtype with MLC_INVALID_ARGUMENT and exactly the expected message, and
 *     never read the buffer (ASan in the sanitizer build would say so);
 *   - two threads call mlp4_forward on one model 200 times each with their
 *     own inputs, and every output equals that input's single-thread output
 *     bit for bit (the model's lock serialises them);
 *   - a tensor in device memory is refused by these CPU models, by name;
 *   - the version check names both versions.
 * Prints "N passed, M failed". */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlp1.h"
#include "mlp4.h"
#include "runtime/version.h"

enum { IN = 784, OUT = 10, RUNS = 200 };

static int passed, failed;

static void check(int ok, const char *what) {
  printf("%s %s\n", ok ? "ok" : "FAIL", what);
  if (ok) passed++;
  else failed++;
}

/* The status is an error of `code` whose message is `want`; frees it. */
static void check_status(mlc_status st, mlc_status_code_t code, const char *want, const char *what) {
  int ok = mlc_status_code(st) == code && !strcmp(mlc_status_message(st), want);
  if (!ok) printf("  got %s: %s\n  want %s: %s\n", mlc_status_code_name(mlc_status_code(st)), mlc_status_message(st),
                  mlc_status_code_name(code), want);
  mlc_status_free(st);
  check(ok, what);
}

static float x[2][4 * IN], want[2][4 * OUT];

typedef struct {
  mlp4 *m;
  int which, bad;
} job;

static void *run_forward(void *arg) {
  job *j = arg;
  float y[4 * OUT];
  for (int r = 0; r < RUNS; r++) {
    mlc_status st = mlp4_forward(j->m, x[j->which], y);
    if (st || memcmp(y, want[j->which], sizeof y)) j->bad++;
    mlc_status_free(st);
  }
  return NULL;
}

int main(void) {
  for (int k = 0; k < 2; k++)
    for (int i = 0; i < 4 * IN; i++) x[k][i] = (float)((i * 7 + k * 13) % 29) / 29.0f - 0.5f;
  mlp1 *a;
  mlp4 *b;
  mlc_status st = mlp1_create(NULL, &a);
  if (!st) st = mlp4_create(NULL, &b);
  if (st) {
    printf("FAIL create: %s\n0 passed, 1 failed\n", mlc_status_message(st));
    return 1;
  }

  /* The same parameters (seed 0 for both), one row at a time against four. */
  float y1[OUT], y4[4 * OUT];
  int same = !mlp4_forward(b, x[0], y4);
  double worst = 0;
  for (int r = 0; r < 4 && same; r++) {
    same = !mlp1_forward(a, x[0] + r * IN, y1);
    for (int c = 0; c < OUT; c++) {
      double d = y1[c] - y4[r * OUT + c], s = y4[r * OUT + c];
      d = d < 0 ? -d : d;
      s = s < 0 ? -s : s;
      if (d / (s > 1e-3 ? s : 1e-3) > worst) worst = d / (s > 1e-3 ? s : 1e-3);
    }
  }
  printf("  mlp1 row by row against mlp4: worst relative difference %.3g\n", worst);
  check(same && worst < 1e-5, "two models in one application agree");

  /* The checked calls. */
  static float small[100];
  mlc_tensor tx = {MLC_DTYPE_F32, 2, {1, IN}, small, sizeof small, MLC_MEMORY_HOST, 0};
  mlc_tensor ty = {MLC_DTYPE_F32, 2, {1, OUT}, y1, sizeof y1, MLC_MEMORY_HOST, 0};
  check_status(mlp1_forward_tensors(a, &tx, &ty), MLC_INVALID_ARGUMENT,
               "mlp1_forward: input 'x' is f32[1, 784] (3136 bytes), got a buffer of 400 bytes", "a short input buffer");
  mlc_tensor tx4 = {MLC_DTYPE_F32, 2, {4, IN}, x[0], sizeof x[0], MLC_MEMORY_HOST, 0};
  check_status(mlp1_forward_tensors(a, &tx4, &ty), MLC_INVALID_ARGUMENT,
               "mlp1_forward: input 'x' is f32[1, 784], got f32[4, 784]", "a wrong shape");
  mlc_tensor tx1 = {MLC_DTYPE_F32, 2, {1, IN}, x[0], IN * sizeof(float), MLC_MEMORY_HOST, 0};
  mlc_tensor tyb = {MLC_DTYPE_BF16, 2, {1, OUT}, y1, sizeof y1, MLC_MEMORY_HOST, 0};
  check_status(mlp1_forward_tensors(a, &tx1, &tyb), MLC_INVALID_ARGUMENT,
               "mlp1_forward: output 'output' is f32[1, 10], got bf16[1, 10]", "a wrong dtype");
  float yt[OUT];
  mlc_tensor tyt = {MLC_DTYPE_F32, 2, {1, OUT}, yt, sizeof yt, MLC_MEMORY_HOST, 0};
  st = mlp1_forward_tensors(a, &tx1, &tyt);
  int agree = !st && !mlp1_forward(a, x[0], y1) && !memcmp(yt, y1, sizeof yt);
  mlc_status_free(st);
  check(agree, "the checked call runs the model like the typed one");
  /* A tensor in device memory: the CPU has none, and says so before reading
   * the buffer (a GPU address here would crash a copy); an unknown kind. */
  mlc_tensor txd = {MLC_DTYPE_F32, 2, {1, IN}, x[0], IN * sizeof(float), MLC_MEMORY_DEVICE, 0};
  check_status(mlp1_forward_tensors(a, &txd, &tyt), MLC_INVALID_ARGUMENT,
               "input 'x' of forward is in device memory (device 0), but the model runs on the cpu, which takes "
               "tensors in host memory",
               "a device tensor given to a CPU model");
  mlc_tensor tyd = {MLC_DTYPE_F32, 2, {1, OUT}, yt, sizeof yt, MLC_MEMORY_DEVICE, 1};
  check_status(mlp1_forward_tensors(a, &tx1, &tyd), MLC_INVALID_ARGUMENT,
               "output 'output' of forward is in device memory (device 1), but the model runs on the cpu, which takes "
               "tensors in host memory",
               "a device output given to a CPU model");
  mlc_tensor txk = {MLC_DTYPE_F32, 2, {1, IN}, x[0], IN * sizeof(float), (mlc_memory)7, 0};
  check_status(mlp1_forward_tensors(a, &txk, &tyt), MLC_INVALID_ARGUMENT,
               "mlp1_forward: input 'x': unknown memory kind 7 (0: host, 1: the model's device, 2: host, in place, "
               "3: the model's device, in place)",
               "an unknown memory kind");

  /* Two threads on one model. */
  for (int k = 0; k < 2; k++)
    if ((st = mlp4_forward(b, x[k], want[k]))) {
      printf("FAIL forward: %s\n", mlc_status_message(st));
      return 1;
    }
  job jobs[2] = {{b, 0, 0}, {b, 1, 0}};
  pthread_t t[2];
  for (int k = 0; k < 2; k++) pthread_create(&t[k], NULL, run_forward, &jobs[k]);
  for (int k = 0; k < 2; k++) pthread_join(t[k], NULL);
  printf("  two threads, %d forward passes each: %d and %d wrong\n", RUNS, jobs[0].bad, jobs[1].bad);
  check(!jobs[0].bad && !jobs[1].bad, "two threads calling forward on one model");

  char want_msg[256];
  snprintf(want_msg, sizeof want_msg,
           "the model 'x' was generated by mlc 9.9.9, but the runtime it is linked with is %d.%d.%d: compile the model "
           "again with this mlc, or link the runtime of its own version",
           MLC_VERSION_MAJOR, MLC_VERSION_MINOR, MLC_VERSION_PATCH);
  check_status(mlc_runtime_check_version(90909, "the model 'x'"), MLC_UNIMPLEMENTED, want_msg,
               "an artifact of another version is refused");
  check(mlc_runtime_version() == MLC_VERSION_NUMBER, "the runtime's version is the header's");

  mlp1_destroy(a);
  mlp4_destroy(b);
  printf("%d passed, %d failed\n", passed, failed);
  return failed != 0;
}
