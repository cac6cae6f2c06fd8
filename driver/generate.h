/* mlc generate's loop (generate.c): a prompt through a decode block's
 * prefill entry, then new tokens one step at a time, greedy or sampled. */
#ifndef MLC_DRIVER_GENERATE_H
#define MLC_DRIVER_GENERATE_H

#include <stdint.h>

#include "runtime/session.h"
#include "runtime/status.h"

typedef struct {
  const char *prompt;  /* token ids: "1,2,3" or "1 2 3" */
  long max_new;        /* tokens to generate */
  double temperature;  /* 0: greedy (the first largest logit) */
  long top_k;          /* sampling: only the k largest logits (0: all) */
  uint64_t seed;       /* sampling */
  /* Called with each new token's logits (row 0), before the next step. */
  void (*on_token)(void *ctx, const float *logits, int64_t vocab);
  void *ctx;
} mlc_generate_args;

typedef struct {
  int32_t *tokens;     /* the n new tokens (malloc'd: the caller frees them) */
  long n;
  uint32_t prompt_n;
  double prefill_s, decode_s; /* wall time of the prefill calls, and of the steps (n - 1 of them) */
} mlc_generate_result;

/* Token ids separated by commas or white space, "1,2,3" or "1 2 3", into
 * *out (malloc'd) and *out_n. */
mlc_status mlc_generate_parse_prompt(const char *s, int32_t **out, uint32_t *out_n);
mlc_status mlc_generate(mlc_session *s, const mlc_generate_args *a, mlc_generate_result *r);

#endif
