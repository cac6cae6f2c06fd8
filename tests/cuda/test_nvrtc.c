/* Compiles a CUDA source that mlc emitted with NVRTC, as the runtime does
 * on a machine without nvcc (runtime/cuda/compile.c), for sm_90a, twice: the
 * second time must come from the cache with the same bytes.  Writes the
 * cubin for cuobjdump.  Usage: test_nvrtc SOURCE.cu OUT.cubin */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cuda/compile.h"
#include "runtime/profile.h"

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: test_nvrtc SOURCE.cu OUT.cubin\n");
    return 2;
  }
  size_t n = 0;
  char *src = mlc_read_file(argv[1], &n);
  if (!src) {
    fprintf(stderr, "cannot read %s\n", argv[1]);
    return 1;
  }
  void *img = NULL, *again = NULL;
  size_t ni = 0, na = 0;
  mlc_status st = mlc_cuda_compile_nvrtc(src, 9, 0, stdout, &img, &ni);
  if (!st) st = mlc_cuda_compile_nvrtc(src, 9, 0, stdout, &again, &na);
  int rc = 0;
  if (st) {
    fprintf(stderr, "FAIL: %s\n", mlc_status_message(st));
    mlc_status_free(st);
    rc = 1;
  } else if (ni == 0 || ni != na || memcmp(img, again, ni)) {
    fprintf(stderr, "FAIL: the cached cubin differs from the compiled one\n");
    rc = 1;
  } else {
    FILE *f = fopen(argv[2], "wb");
    if (!f || fwrite(img, 1, ni, f) != ni || fclose(f)) rc = 1;
    printf("cubin: %zu bytes\n", ni);
  }
  free(src);
  free(img);
  free(again);
  return rc;
}
