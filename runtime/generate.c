/* Text generation with a decode block's entries (runtime/generate.h): the
 * loop behind `mlc generate` and an artifact's <name>_generate.
 *
 * The prompt goes through `prefill` in chunks of its static length, the
 * last chunk padded with token 0 (causal attention keeps the padding out of
 * the real positions, and the step overwrites those cache rows before any
 * query can see them); the logits of the prompt's last position give the
 * first new token.  Each further token comes from one `step` at the next
 * position.  Greedy (temperature 0, the default) takes the first largest
 * logit, as torch.argmax does, so it is deterministic; a temperature samples
 * from softmax(logits / T) over the top-k logits with a seeded generator.
 * Every row of the batch gets the same tokens; row 0 is read.
 */
#include "runtime/generate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/plan.h"
#include "runtime/tensor.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* An entry's one input of a name: its shape (NULL if it has none). */
static const mlc_plan_shape *input_shape(const mlc_plan_entry *e, const char *name) {
  for (uint32_t k = 0; k < e->ninputs; k++)
    if (!strcmp(e->inputs[k].name, name)) return &e->values[e->inputs[k].value].shape;
  return NULL;
}

static const mlc_plan_shape *output_shape(const mlc_plan_entry *e, const char *name) {
  for (uint32_t k = 0; k < e->noutputs; k++)
    if (!strcmp(e->outputs[k].name, name)) return &e->values[e->outputs[k].value].shape;
  return NULL;
}

/* The entries the decode block makes, with the shapes generate relies on. */
static mlc_status check_entries(const mlc_plan *plan, const mlc_plan_entry **pre, const mlc_plan_entry **step) {
  *pre = mlc_plan_find_entry(plan, "prefill");
  *step = mlc_plan_find_entry(plan, "step");
  if (!*pre || !*step)
    return mlc_status_make(MLC_INVALID_ARGUMENT, "the model has no decode entries: add a decode block, "
                           "decode MODEL { max_ctx = 256  prefill = 16 } (docs/language.md)");
  for (int k = 0; k < 2; k++) {
    const mlc_plan_entry *e = k ? *step : *pre;
    const mlc_plan_shape *t = input_shape(e, "tokens"), *p = input_shape(e, "pos"), *l = output_shape(e, "logits");
    if (!t || !p || !l || t->rank != 2 || t->dtype != MLC_DTYPE_I32 || p->rank != 0 || p->dtype != MLC_DTYPE_I32 || l->rank != 3 ||
        l->dtype != MLC_DTYPE_F32 || l->dims[1] != t->dims[1] || (k == 1 && t->dims[1] != 1))
      return mlc_status_make(MLC_INVALID_ARGUMENT, "entry %s is not a decode block's (tokens i32[batch, seq], pos i32[] -> "
                             "f32 logits [batch, seq, vocab]); generate needs the model's forward to take i32 token ids "
                             "and return f32 logits", e->name);
  }
  return NULL;
}

static uint64_t next_u64(uint64_t *s) { /* splitmix64 */
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* The next token from one row of logits: greedy, or sampled. */
static int32_t pick(const float *logit, int64_t vocab, const mlc_generate_args *a, uint64_t *rng, double *scratch) {
  int64_t best = 0;
  for (int64_t i = 1; i < vocab; i++)
    if (logit[i] > logit[best] || (isnan(logit[i]) && !isnan(logit[best]))) best = i; /* NaN counts as largest, as argmax */
  if (a->temperature <= 0) return (int32_t)best;
  /* top-k: the k-th largest logit is the threshold (ties at it all stay) */
  double thresh = -INFINITY;
  if (a->top_k > 0 && a->top_k < vocab) {
    for (int64_t i = 0; i < vocab; i++) scratch[i] = logit[i];
    /* k passes of selection, O(k vocab): small beside a step for the k of sampling (tens) */
    int64_t k = a->top_k;
    for (int64_t i = 0; i < k; i++) {
      int64_t m = i;
      for (int64_t j = i + 1; j < vocab; j++)
        if (scratch[j] > scratch[m]) m = j;
      double t = scratch[i];
      scratch[i] = scratch[m], scratch[m] = t;
    }
    thresh = scratch[k - 1];
  }
  double mx = logit[best], sum = 0;
  for (int64_t i = 0; i < vocab; i++) {
    scratch[i] = logit[i] >= thresh ? exp(((double)logit[i] - mx) / a->temperature) : 0;
    sum += scratch[i];
  }
  double u = (double)(next_u64(rng) >> 11) * 0x1.0p-53 * sum, acc = 0;
  for (int64_t i = 0; i < vocab; i++) {
    acc += scratch[i];
    if (u < acc && scratch[i] > 0) return (int32_t)i;
  }
  return (int32_t)best;
}

/* One run of the prefill (tok: batch x chunk tokens) or of the step (tok:
 * batch tokens) at position pos. */
static mlc_status run_at(mlc_session *s, const char *entry, const int32_t *tok, int64_t ntok, int32_t pos) {
  mlc_status st = mlc_session_set_input(s, entry, "tokens", tok, (size_t)ntok * sizeof *tok);
  if (!st) st = mlc_session_set_input(s, entry, "pos", &pos, sizeof pos);
  return st ? st : mlc_session_run(s, entry);
}

mlc_status mlc_generate(mlc_session *s, const mlc_generate_args *a, mlc_generate_result *r) {
  memset(r, 0, sizeof *r);
  const mlc_plan_entry *pre, *step;
  MLC_RETURN_IF_ERROR(check_entries(mlc_session_plan(s), &pre, &step));
  const mlc_plan_shape *pt = input_shape(pre, "tokens");
  int64_t batch = pt->dims[0], chunk = pt->dims[1], vocab = output_shape(pre, "logits")->dims[2];
  /* the positions the caches hold (a model without attention has no limit) */
  const mlc_plan *plan = mlc_session_plan(s);
  int64_t max_ctx = 0;
  for (uint32_t i = 0; i < plan->nparams && !max_ctx; i++)
    if (plan->params[i].role == 3) max_ctx = plan->params[i].shape.dims[2];
  const int32_t *prompt = a->prompt;
  uint32_t n = a->prompt_n;
  mlc_status st = NULL;
  if (!prompt || !n) return mlc_status_make(MLC_INVALID_ARGUMENT, "generate needs a prompt of at least one token");
  if (a->max_new < 0) return mlc_status_make(MLC_INVALID_ARGUMENT, "generate: max_new is %ld", a->max_new);
  for (uint32_t i = 0; i < n && !st; i++)
    if (prompt[i] < 0 || prompt[i] >= vocab)
      st = mlc_status_make(MLC_INVALID_ARGUMENT, "the prompt's token %u is %d, but the vocabulary has %lld tokens (0 to %lld)", i,
                           prompt[i], (long long)vocab, (long long)vocab - 1);
  if (!st && max_ctx > 0 && (int64_t)n + a->max_new - 1 > max_ctx)
    st = mlc_status_make(MLC_INVALID_ARGUMENT, "the prompt's %u tokens and %ld new ones need %lld positions, but the decode "
                         "block's max_ctx is %lld", n, a->max_new, (long long)n + a->max_new - 1, (long long)max_ctx);
  int32_t *tok = st ? NULL : calloc((size_t)(batch * chunk), sizeof *tok);
  double *scratch = st ? NULL : malloc((size_t)vocab * sizeof *scratch);
  r->tokens = st ? NULL : calloc((size_t)a->max_new + 1, sizeof *r->tokens);
  if (!st && (!tok || !scratch || !r->tokens)) st = mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory");
  uint64_t rng = a->seed;
  const float *logits = NULL;
  const mlc_plan_shape *lshape;
  /* the warm-up: the prompt's first chunk at position 0, then a step of its
   * first token at position 0.  The cache rows they write are written again
   * before any step reads them: rows 0 .. chunk - 1 by the prefill below,
   * and each row at or past the prompt's end by the step at that position,
   * which writes its row before it attends to it. */
  if (!st && a->warmup && a->max_new > 0) {
    for (int64_t b = 0; b < batch; b++)
      for (int64_t j = 0; j < chunk; j++) tok[b * chunk + j] = j < (int64_t)n ? prompt[j] : 0;
    st = run_at(s, "prefill", tok, batch * chunk, 0);
    for (int64_t b = 0; b < batch; b++) tok[b] = prompt[0];
    if (!st && a->max_new > 1) st = run_at(s, "step", tok, batch, 0);
  }
  /* prefill, chunk by chunk */
  double t0 = now_s();
  for (uint32_t at = 0; at < n && !st && a->max_new > 0; at += (uint32_t)chunk) {
    int64_t len = n - at < chunk ? n - at : chunk;
    for (int64_t b = 0; b < batch; b++)
      for (int64_t j = 0; j < chunk; j++) tok[b * chunk + j] = j < len ? prompt[at + j] : 0;
    if (!(st = run_at(s, "prefill", tok, batch * chunk, (int32_t)at)) &&
        !(st = mlc_session_output(s, "prefill", "logits", (const void **)&logits, &lshape)))
      logits += (len - 1) * vocab; /* the prompt's last position in this chunk */
  }
  if (!st && a->max_new > 0) {
    r->prefill_s = now_s() - t0;
    r->tokens[r->n++] = pick(logits, vocab, a, &rng, scratch);
    if (a->on_token) a->on_token(a->ctx, logits, vocab);
  }
  /* decode, one token at a time */
  t0 = now_s();
  for (long k = 1; k < a->max_new && !st; k++) {
    for (int64_t b = 0; b < batch; b++) tok[b] = r->tokens[k - 1];
    if ((st = run_at(s, "step", tok, batch, (int32_t)(n + k - 1))) ||
        (st = mlc_session_output(s, "step", "logits", (const void **)&logits, &lshape)))
      break;
    r->tokens[r->n++] = pick(logits, vocab, a, &rng, scratch);
    if (a->on_token) a->on_token(a->ctx, logits, vocab);
  }
  r->decode_s = now_s() - t0;
  r->prompt_n = n;
  free(tok);
  free(scratch);
  if (st) {
    free(r->tokens);
    r->tokens = NULL;
  }
  return st;
}
