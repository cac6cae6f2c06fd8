/* An artifact's <name>_generate (issue 29), on examples/minillm_causal.mdl
 * compiled for the CPU with one layer: prints the greedy tokens and the
 * sampled ones (temperature 0.8, top-k 20, seed 7) for a prompt of 18
 * tokens (two prefill chunks) as "greedy: ..." and "sampled: ...", which
 * generate_app.sh compares with `mlc generate`'s; then checks the refusals:
 * a token outside the vocabulary, a prompt and max_new past max_ctx, NULL
 * arguments, each with its message and no tokens written.
 * Usage: generate_app NEW WEIGHTS: first saves the weights create drew (seed
 * 0) to WEIGHTS, for mlc generate's --weights (its --seed seeds the sampler
 * and, without --weights, the weights too). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "minillm.h"

static int failed;

static void check(int ok, const char *what, mlc_status st) {
  printf("%s %s%s%s\n", ok ? "ok" : "FAIL", what, st ? ": " : "", st ? mlc_status_message(st) : "");
  failed += !ok;
}

static void print(const char *label, const int32_t *t, int n) {
  printf("%s:", label);
  for (int i = 0; i < n; i++) printf(" %d", t[i]);
  printf("\n");
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 12;
  minillm *m;
  mlc_status st = minillm_create(NULL, &m);
  if (st) {
    printf("FAIL create: %s\n", mlc_status_message(st));
    return 1;
  }
  if (argc > 2 && (st = minillm_save_weights(m, argv[2]))) {
    printf("FAIL save_weights: %s\n", mlc_status_message(st));
    return 1;
  }
  int32_t prompt[18], out[64];
  for (int i = 0; i < 18; i++) prompt[i] = i + 1;
  if ((st = minillm_generate(m, prompt, 18, (uint32_t)n, 0, 0, 0, out))) check(0, "greedy", st);
  else print("greedy", out, n);
  if ((st = minillm_generate(m, prompt, 18, (uint32_t)n, 0.8, 20, 7, out))) check(0, "sampled", st);
  else print("sampled", out, n);

  int32_t bad[2] = {1, 512};
  out[0] = -7;
  st = minillm_generate(m, bad, 2, 4, 0, 0, 0, out);
  check(st && strstr(mlc_status_message(st), "vocabulary") && out[0] == -7, "a token of 512 is refused", st);
  mlc_status_free(st);
  st = minillm_generate(m, prompt, 18, 1000, 0, 0, 0, out);
  check(st && strstr(mlc_status_message(st), "max_ctx") && out[0] == -7, "1000 new tokens are past max_ctx", st);
  mlc_status_free(st);
  st = minillm_generate(m, NULL, 18, 4, 0, 0, 0, out);
  check(st && strstr(mlc_status_message(st), "NULL"), "a NULL prompt is refused", st);
  mlc_status_free(st);
  st = minillm_generate(m, prompt, 0, 4, 0, 0, 0, out);
  check(st && strstr(mlc_status_message(st), "at least one token"), "an empty prompt is refused", st);
  mlc_status_free(st);
  minillm_destroy(m);
  return failed ? 1 : 0;
}
