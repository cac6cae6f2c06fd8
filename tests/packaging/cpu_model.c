/* Creates the model mlpb (examples/mlp.mdl at batch 2, compiled with some
 * --cpu), runs its forward pass on a fixed input with seed 0's weights and
 * writes the output as raw f32 to argv[1], and prints the CPU whose build of
 * the kernels ran (mlpb_cpu).  A failed create prints its
 * status and exits 3, so tests/ref/cpu_targets.py tells it from a crash. */
#include <stdio.h>
#include <stdlib.h>

#include "mlpb.h"

enum { BATCH = 2, IN = 784, OUT = 10 };

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: cpu_model OUT.bin\n");
    return 2;
  }
  static float x[BATCH * IN], y[BATCH * OUT];
  for (int i = 0; i < BATCH * IN; i++) x[i] = (float)((i * 7) % 29) / 29.0f - 0.5f;
  mlpb *m;
  mlc_status st = mlpb_create(NULL, &m);
  if (st) {
    printf("create: %s: %s\n", mlc_status_code_name(mlc_status_code(st)), mlc_status_message(st));
    mlc_status_free(st);
    return 3;
  }
  printf("cpu: %s\n", mlpb_cpu(m)); /* the build create picked */
  st = mlpb_forward(m, x, y);
  FILE *f = st ? NULL : fopen(argv[1], "wb");
  int rc = st || !f || fwrite(y, sizeof y, 1, f) != 1;
  if (f && fclose(f)) rc = 1;
  if (st) printf("forward: %s\n", mlc_status_message(st));
  mlc_status_free(st);
  mlpb_destroy(m);
  return rc;
}
