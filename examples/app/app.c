/* A small application that links a compiled model the way a user would:
 *
 *   mlc compile examples/mlp.mdl --target cpu -o build/mlp
 *   cmake -S examples/app -B build/app -DMODEL_DIR=$PWD/build/mlp && cmake --build build/app
 *   build/app/app weights.safetensors x.bin labels.bin logits.bin
 *
 * It loads PyTorch weights, runs the forward pass on the inputs (raw
 * little-endian float32 x[32][784] and int32 labels[32]), takes one training
 * step (forward, backward, SGD with momentum, as the train block says), runs
 * the forward pass again, writes both sets of logits, and prints the loss.
 * Every mlc call returns a status; errors are printed with their message and
 * end the program with status 1. */
#include <stdio.h>
#include <stdlib.h>

#include "mlp.h"

enum { BATCH = 32, INPUTS = 784, CLASSES = 10 };

static int check(mlc_status st, const char *what) {
  if (!st) return 0;
  fprintf(stderr, "app: %s: %s\n", what, mlc_status_message(st));
  mlc_status_free(st);
  return 1;
}

static int read_raw(const char *path, void *dst, size_t bytes) {
  FILE *f = fopen(path, "rb");
  size_t got = f ? fread(dst, 1, bytes, f) : 0;
  if (f) fclose(f);
  if (got != bytes) fprintf(stderr, "app: %s: expected %zu bytes\n", path, bytes);
  return got != bytes;
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: app WEIGHTS.safetensors X.bin LABELS.bin LOGITS_OUT.bin\n");
    return 2;
  }
  static float x[BATCH * INPUTS], logits[2][BATCH * CLASSES];
  static int32_t labels[BATCH];
  if (read_raw(argv[2], x, sizeof x) || read_raw(argv[3], labels, sizeof labels)) return 1;

  mlp *m;
  mlp_options opt = {.threads = 2, .profile = 0};
  if (check(mlp_create(&opt, &m), "create")) return 1;
  float loss;
  int rc = check(mlp_load_weights(m, argv[1]), "load weights") || check(mlp_forward(m, x, logits[0]), "forward") ||
           check(mlp_train_step(m, x, labels, &loss), "train step") || check(mlp_forward(m, x, logits[1]), "forward");
  if (!rc) {
    FILE *f = fopen(argv[4], "wb");
    rc = !f || fwrite(logits, sizeof logits, 1, f) != 1;
    if (f && fclose(f)) rc = 1;
    if (rc) fprintf(stderr, "app: cannot write %s\n", argv[4]);
    else printf("loss %.7g\n", loss);
  }
  mlp_destroy(m);
  return rc;
}
