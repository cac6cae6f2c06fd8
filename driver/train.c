/* The training loop: inputs from a token file (llm.c's format, or a flat
 * file of u16 or i32 tokens) or a fixed synthetic batch, one train step per
 * iteration with its loss printed, and a checkpoint at the end. */
#include "driver/train.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LLMC_MAGIC 20240520 /* llm.c's token files: 256 int32 of header, then uint16 tokens */

typedef struct {
  int32_t *tok; /* the whole file, as int32 */
  uint64_t n;
} tokens;

static mlc_status read_tokens(const char *path, const char *dtype, tokens *out) {
  FILE *f = fopen(path, "rb");
  if (!f) return mlc_status_make(MLC_NOT_FOUND, "--data %s: cannot open: %s", path, strerror(errno));
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *buf = malloc(size > 0 ? (size_t)size : 1);
  if (!buf || fread(buf, 1, (size_t)size, f) != (size_t)size) {
    fclose(f);
    free(buf);
    return mlc_status_make(MLC_IO, "--data %s: cannot read it", path);
  }
  fclose(f);
  int32_t hdr[3] = {0};
  if (size >= 1024) memcpy(hdr, buf, sizeof hdr);
  size_t off = 0, esz = dtype && !strcmp(dtype, "i32") ? 4 : 2;
  uint64_t n;
  if (hdr[0] == LLMC_MAGIC) { /* header: magic, version, token count */
    off = 1024;
    esz = 2;
    n = (uint64_t)(uint32_t)hdr[2];
    if (off + n * esz > (uint64_t)size) {
      free(buf);
      return mlc_status_make(MLC_DATA_LOSS, "--data %s: the llm.c header promises %llu tokens, the file holds fewer", path,
                             (unsigned long long)n);
    }
  } else {
    n = (uint64_t)size / esz;
  }
  out->tok = malloc((n ? n : 1) * sizeof *out->tok);
  if (!out->tok) {
    free(buf);
    return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory for %llu tokens", (unsigned long long)n);
  }
  for (uint64_t i = 0; i < n; i++) {
    if (esz == 2) {
      uint16_t t;
      memcpy(&t, buf + off + i * 2, 2);
      out->tok[i] = t;
    } else {
      memcpy(&out->tok[i], buf + off + i * 4, 4);
    }
  }
  out->n = n;
  free(buf);
  return NULL;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The entry's inputs a caller supplies ("opt.*" are the runtime's). */
static uint32_t user_inputs(const mlc_plan_entry *e, uint32_t *idx) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < e->ninputs; i++)
    if (strncmp(e->inputs[i].name, "opt.", 4)) idx[n++] = i;
  return n;
}

/* How many ids value v may take: the rows of the embeddings it indexes and
 * the classes of the cross-entropies it is the targets of (the fewest), from
 * the steps' names ("embedding%12") and arguments (inputs, then the
 * output); 0 if it is none of those. */
static int64_t id_range(const mlc_plan_entry *e, uint32_t v) {
  int64_t n = 0;
  for (uint32_t i = 0; i < e->nsteps; i++) {
    const mlc_plan_step *st = &e->steps[i];
    const char *name = st->name ? st->name : "";
    int64_t r = 0;
    if (!strncmp(name, "embedding%", 10) && st->nargs == 3 && st->args[1] == v) /* weight [V, D], ids, out */
      r = e->values[st->args[0]].shape.dims[0];
    else if (!strncmp(name, "embedding_grad%", 15) && st->nargs == 3 && st->args[1] == v) /* g, ids, dw [V, D] */
      r = e->values[st->args[2]].shape.dims[0];
    else if ((!strncmp(name, "cross_entropy%", 14) && st->nargs == 3 && st->args[1] == v) ||
             (!strncmp(name, "cross_entropy_grad%", 19) && st->nargs == 4 && st->args[2] == v)) { /* logits [.., C] */
      const mlc_plan_shape *l = &e->values[st->args[!strncmp(name, "cross_entropy%", 14) ? 0 : 1]].shape;
      r = l->rank ? l->dims[l->rank - 1] : 0;
    }
    if (r > 0 && (n == 0 || r < n)) n = r;
  }
  return n;
}

/* A fixed synthetic batch, the same every step: floats in [-1, 1); integers
 * uniform over the ids they may take (id_range: a vocabulary's tokens, as
 * real data and torch_baseline.py's randint spread them), else in [0, 2). */
static mlc_status synthetic_inputs(mlc_session *s, const mlc_plan_entry *e) {
  uint32_t idx[64];
  uint32_t n = user_inputs(e, idx);
  uint64_t rng = 0x747261696e;
  for (uint32_t k = 0; k < n; k++) {
    const mlc_plan_value *v = &e->values[e->inputs[idx[k]].value];
    int64_t ids = id_range(e, e->inputs[idx[k]].value);
    uint64_t range = ids > 0 && ids <= INT32_MAX ? (uint64_t)ids : 2;
    uint64_t bytes = mlc_plan_shape_bytes(&v->shape);
    uint8_t *buf = calloc(1, bytes ? bytes : 1);
    if (!buf) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory");
    for (uint64_t j = 0; j < bytes / 4 && (v->shape.dtype == 1 || v->shape.dtype == 4); j++) {
      rng = rng * 6364136223846793005ull + 1442695040888963407ull;
      uint32_t r = (uint32_t)(rng >> 33);
      if (v->shape.dtype == 1) { float x = (float)r / 2147483648.0f - 1.0f; memcpy(buf + j * 4, &x, 4); }
      else { int32_t x = (int32_t)(r % range); memcpy(buf + j * 4, &x, 4); }
    }
    mlc_status st = mlc_session_set_input(s, e->name, e->inputs[idx[k]].name, buf, (size_t)bytes);
    free(buf);
    if (st) return st;
  }
  return NULL;
}

/* tokens[b, t] = data[p + b*T + t], targets[b, t] = data[p + b*T + t + 1],
 * from position p = step * B * T, wrapping around the file. */
static mlc_status data_inputs(mlc_session *s, const mlc_plan_entry *e, const tokens *d, uint64_t step, const char *path) {
  uint32_t idx[64];
  uint32_t n = user_inputs(e, idx);
  const mlc_plan_value *a = n == 2 ? &e->values[e->inputs[idx[0]].value] : NULL;
  const mlc_plan_value *b = n == 2 ? &e->values[e->inputs[idx[1]].value] : NULL;
  if (!a || a->shape.rank != 2 || a->shape.dtype != 4 || b->shape.dtype != 4 || b->shape.rank != 2 ||
      a->shape.dims[0] != b->shape.dims[0] || a->shape.dims[1] != b->shape.dims[1])
    return mlc_status_make(MLC_INVALID_ARGUMENT, "--data needs a train block whose inputs are two i32 tensors "
                           "[batch, seq] (tokens, then targets)");
  uint64_t B = (uint64_t)a->shape.dims[0], T = (uint64_t)a->shape.dims[1];
  if (d->n < B * T + 1)
    return mlc_status_make(MLC_INVALID_ARGUMENT, "--data %s: %llu tokens, but a step needs %llu", path,
                           (unsigned long long)d->n, (unsigned long long)(B * T + 1));
  int32_t *x = malloc(B * T * 2 * sizeof *x);
  if (!x) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory");
  /* Each rank reads its own batch: together they read what one process
   * with a batch world times larger would. */
  uint64_t world = (uint64_t)mlc_session_world(s), rank = (uint64_t)mlc_session_rank(s);
  uint64_t windows = (d->n - 1) / (B * T), p = ((step * world + rank) % windows) * B * T;
  for (uint64_t i = 0; i < B * T; i++) {
    x[i] = d->tok[p + i];
    x[B * T + i] = d->tok[p + i + 1];
  }
  mlc_status st = mlc_session_set_input(s, e->name, e->inputs[idx[0]].name, x, B * T * 4);
  if (!st) st = mlc_session_set_input(s, e->name, e->inputs[idx[1]].name, x + B * T, B * T * 4);
  free(x);
  return st;
}

mlc_status mlc_train_loop(mlc_session *s, const mlc_train_args *a) {
  const mlc_plan_entry *e = mlc_plan_find_entry(mlc_session_plan(s), "train");
  if (!e) return mlc_status_make(MLC_INVALID_ARGUMENT, "the model has no train block to train with");
  tokens d = {0};
  mlc_status st = a->data ? read_tokens(a->data, a->data_dtype, &d) : synthetic_inputs(s, e);
  for (long i = 0; i < a->warmup + a->steps && !st; i++) {
    if (a->warmup && i == a->warmup) { /* the profile starts now */
      mlc_session_reset_profile(s);
      if (a->trace) mlc_session_set_trace(s, true);
    }
    uint64_t step = mlc_session_step(s);
    if (a->data && (st = data_inputs(s, e, &d, step, a->data))) break;
    double t0 = now();
    if ((st = mlc_session_run(s, "train"))) break;
    double ms = (now() - t0) * 1e3;
    const void *loss;
    const mlc_plan_shape *shape;
    if ((st = mlc_session_output(s, "train", "loss", &loss, &shape))) break;
    float l;
    memcpy(&l, loss, sizeof l);
    if (mlc_session_world(s) > 1) { /* the mean over the ranks, as FSDP's loss would be logged */
      double sum = l;
      if ((st = mlc_session_all_sum(s, &sum, 1))) break;
      l = (float)(sum / mlc_session_world(s));
    }
    if (!a->log) continue;
    fprintf(a->log, ms < 10 ? "step %llu: loss %.6f (%.3f ms)\n" : "step %llu: loss %.6f (%.1f ms)\n", (unsigned long long)step + 1, l, ms);
    fflush(a->log);
  }
  free(d.tok);
  if (!st && a->save) st = mlc_session_save_checkpoint(s, a->save);
  return st;
}
