/* Text generation with a decode block's entries (runtime/generate.c): a
 * prompt through the `prefill` entry, then new tokens one `step` at a time,
 * greedy or sampled.  `mlc generate` and an artifact's <name>_generate run
 * this loop on a session whose plan has both entries (docs/cli.md). */
#ifndef MLC_RUNTIME_GENERATE_H
#define MLC_RUNTIME_GENERATE_H

#include <stdbool.h>
#include <stdint.h>

#include "runtime/session.h"
#include "runtime/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  const int32_t *prompt; /* token ids, each in [0, vocab) */
  uint32_t prompt_n;     /* at least 1 */
  long max_new;          /* tokens to generate; prompt_n + max_new - 1 positions must fit the caches */
  double temperature;    /* 0: greedy (the first largest logit) */
  long top_k;            /* sampling: only the k largest logits (0: all) */
  uint64_t seed;         /* sampling: splitmix64's seed */
  /* Called with each new token's logits (row 0), before the next step; may be NULL. */
  void (*on_token)(void *ctx, const float *logits, int64_t vocab);
  void *ctx;
  /* One untimed prefill chunk and step before the timed ones, so that a
   * device's one-time costs of an entry's first run (kernels loaded on first
   * launch, a graph captured) are not counted as the prefill's and the first
   * step's; the tokens are the same either way.  mlc generate sets it. */
  bool warmup;
} mlc_generate_args;

typedef struct {
  int32_t *tokens;     /* the n new tokens (malloc'd: the caller frees them; NULL after an error) */
  long n;
  uint32_t prompt_n;
  double prefill_s, decode_s; /* wall time of the prefill calls, and of the steps (n - 1 of them) */
} mlc_generate_result;

/* An error status, with nothing generated, for a plan without prefill and
 * step entries of the decode block's shapes, a token outside the
 * vocabulary, or a prompt and max_new past the caches' max_ctx. */
mlc_status mlc_generate(mlc_session *s, const mlc_generate_args *a, mlc_generate_result *r);

#ifdef __cplusplus
}
#endif

#endif
