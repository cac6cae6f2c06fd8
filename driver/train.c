/* The training loop: inputs from a token file (llm.c's format, or a flat
 * file of u16 or i32 tokens), from one .npy or safetensors file per input
 * (driver/dataset.c), or a fixed synthetic batch; one train step per
 * iteration with its loss and throughput printed, a validation loss on
 * held-out data, checkpoints every N steps, on SIGINT/SIGTERM and at the
 * end. */
#include "driver/train.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "driver/dataset.h"
#include "runtime/cpu/convert.h"
#include "runtime/safetensors.h"

#define LLMC_MAGIC 20240520 /* llm.c's token files: 256 int32 of header, then uint16 tokens */

typedef struct {
  int32_t *tok; /* the whole file, as int32 */
  uint64_t n;
} tokens;

/* numpy's name for --data-dtype's tokens (u16 unless i32). */
static const char *esz_name(const char *dtype) { return dtype && !strcmp(dtype, "i32") ? "int32" : "uint16"; }

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
  /* Read as tokens, a .npy or torch.save file would train on its header and
   * pickle bytes without a word: refuse the formats users try, by content. */
  mlc_safetensors_foreign kind = mlc_safetensors_sniff(buf, (size_t)size);
  if (kind != MLC_ST_FOREIGN_NONE) {
    free(buf);
    const char *load = kind == MLC_ST_FOREIGN_NPY ? "numpy.load(\"%s\")"
                     : kind == MLC_ST_FOREIGN_NPZ ? "numpy.load(\"%s\")[\"tokens\"]"
                     : kind == MLC_ST_FOREIGN_ZIP ? NULL : "torch.load(\"%s\").numpy()";
    char line[600] = "";
    if (load) {
      char src[400];
      snprintf(src, sizeof src, load, path);
      snprintf(line, sizeof line, "; write them in Python:\n  %s.astype(numpy.%s).tofile(\"tokens.bin\")%s", src,
               esz_name(dtype), kind == MLC_ST_FOREIGN_NPZ ? "  # the tokens' key in the archive" : "");
    }
    return mlc_status_make(MLC_INVALID_ARGUMENT, "--data %s: this is %s, not a token file; --data takes llm.c's .bin "
                           "or raw little-endian %s tokens%s", path,
                           kind == MLC_ST_FOREIGN_NPY ? "a NumPy .npy file" : kind == MLC_ST_FOREIGN_NPZ ? "a NumPy .npz archive"
                           : kind == MLC_ST_FOREIGN_ZIP ? "a zip archive" : kind == MLC_ST_FOREIGN_PICKLE ? "a Python pickle"
                           : "a PyTorch file (torch.save)", esz_name(dtype), line);
  }
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

/* The loss, a floating-point scalar of the train entry's dtype: f32, or
 * bf16 or f16 where precision(param=...) computes it in 16 bits. */
static float loss_value(const void *p, const mlc_plan_shape *shape) {
  uint16_t h;
  float f;
  switch (shape->dtype) {
  case 2: memcpy(&h, p, 2); return mlc_bf16_to_f32(h);
  case 3: memcpy(&h, p, 2); return mlc_f16_to_f32(h);
  default: memcpy(&f, p, 4); return f;
  }
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

/* The signal that asked the loop to stop (SIGINT, SIGTERM), or 0.  A second
 * one finds the default action back in place and ends the process. */
static volatile sig_atomic_t stop_signal;

static void on_stop(int sig) {
  stop_signal = sig;
  signal(sig, SIG_DFL);
}

/* Rows a step takes: dims[0] of the first input (the batch). */
static uint64_t batch_rows(const mlc_plan_entry *e) {
  uint32_t idx[64];
  if (!user_inputs(e, idx)) return 0;
  const mlc_plan_shape *sh = &e->values[e->inputs[idx[0]].value].shape;
  return sh->rank ? (uint64_t)sh->dims[0] : 1;
}

/* The validation loss: the mean of the train entry's loss over every batch
 * of the held-out rows, with the training state put back after each (the
 * entry's loss is that of the state before its update). */
static mlc_status evaluate(mlc_session *s, const mlc_plan_entry *e, mlc_dataset *held, double *out_loss) {
  uint64_t bytes = mlc_session_state_bytes(s), nb = mlc_dataset_batches(held);
  void *state = malloc(bytes);
  if (!state) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory for a copy of the training state (%llu bytes)",
                                     (unsigned long long)bytes);
  double sum = 0;
  mlc_status st = mlc_session_state_save(s, state, bytes);
  for (uint64_t b = 0; b < nb && !st; b++) {
    const void *loss;
    const mlc_plan_shape *shape;
    if ((st = mlc_dataset_set_batch(held, s, e, b)) || (st = mlc_session_run(s, "train")) ||
        (st = mlc_session_output(s, "train", "loss", &loss, &shape)))
      break;
    sum += loss_value(loss, shape);
    st = mlc_session_state_restore(s, state, bytes);
  }
  free(state);
  *out_loss = nb ? sum / (double)nb : 0;
  return st;
}

/* Opens the --input and held-out data. */
static mlc_status open_data(const mlc_train_args *a, const mlc_plan_entry *e, mlc_dataset *train, mlc_dataset *held) {
  MLC_RETURN_IF_ERROR(mlc_dataset_open(train, e, a->inputs, a->ninputs, "--input"));
  train->shuffle = a->shuffle;
  train->seed = a->shuffle_seed;
  if (a->neval_inputs) {
    MLC_RETURN_IF_ERROR(mlc_dataset_open(held, e, a->eval_inputs, a->neval_inputs, "--eval-input"));
    return NULL;
  }
  if (a->eval_split > 0) return mlc_dataset_split(train, a->eval_split, held);
  return NULL;
}

static mlc_status save(mlc_session *s, const char *path, FILE *log) {
  MLC_RETURN_IF_ERROR(mlc_session_save_checkpoint(s, path));
  if (log) {
    fprintf(log, "saved %s at step %llu\n", path, (unsigned long long)mlc_session_step(s));
    fflush(log);
  }
  return NULL;
}

static mlc_status loop(mlc_session *s, const mlc_train_args *a, const mlc_plan_entry *e, mlc_dataset *train,
                       mlc_dataset *held, tokens *d) {
  mlc_status st = NULL;
  uint64_t world = (uint64_t)mlc_session_world(s), rank = (uint64_t)mlc_session_rank(s);
  /* Throughput: tokens with a token file, else samples (rows of a batch), over every rank. */
  double per_step = (double)world * (double)batch_rows(e);
  if (a->data) {
    uint32_t idx[64];
    if (user_inputs(e, idx)) {
      const mlc_plan_shape *sh = &e->values[e->inputs[idx[0]].value].shape;
      for (int i = 1; i < sh->rank; i++) per_step *= (double)sh->dims[i];
    }
  }
  const char *unit = a->data ? "tok/s" : "samples/s";
  bool have_held = held->ncols > 0;
  const mlc_plan_schedule *sc = &mlc_session_plan(s)->schedule;
  bool show_lr = sc->warmup || sc->decay != MLC_PLAN_DECAY_NONE, show_norm = false;
  for (uint32_t k = 0; k < e->noutputs; k++) show_norm |= !strcmp(e->outputs[k].name, "grad_norm");
  long since_eval = 0;
  for (long i = 0; i < a->warmup + a->steps && !st; i++) {
    if (a->warmup && i == a->warmup) { /* the profile starts now */
      mlc_session_reset_profile(s);
      if (a->trace) mlc_session_set_trace(s, true);
    }
    uint64_t step = mlc_session_step(s);
    if (a->data && (st = data_inputs(s, e, d, step, a->data))) break;
    if (train->ncols && (st = mlc_dataset_set_batch(train, s, e, step * world + rank))) break;
    double lr = mlc_session_lr(s), t0 = now();
    if ((st = mlc_session_run(s, "train"))) break;
    double sec = now() - t0, ms = sec * 1e3;
    const void *loss;
    const mlc_plan_shape *shape;
    if ((st = mlc_session_output(s, "train", "loss", &loss, &shape))) break;
    float l = loss_value(loss, shape);
    double flags[2] = {l, stop_signal};
    if (world > 1) { /* the mean loss over the ranks, as FSDP's would be logged; any rank's signal stops all */
      if ((st = mlc_session_all_sum(s, flags, 2))) break;
      l = (float)(flags[0] / (double)world);
    }
    float norm = 0;
    if (show_norm) {
      if ((st = mlc_session_output(s, "train", "grad_norm", &loss, &shape))) break;
      memcpy(&norm, loss, sizeof norm);
    }
    if (a->log) {
      char extra[96] = "";
      int k = 0;
      if (show_lr) k += snprintf(extra + k, sizeof extra - (size_t)k, ", lr %.4e", lr);
      if (show_norm) snprintf(extra + k, sizeof extra - (size_t)k, ", grad norm %.4f", norm);
      fprintf(a->log, ms < 10 ? "step %llu: loss %.6f%s (%.3f ms, %.0f %s)\n" : "step %llu: loss %.6f%s (%.1f ms, %.0f %s)\n",
              (unsigned long long)step + 1, l, extra, ms, sec > 0 ? per_step / sec : 0.0, unit);
      fflush(a->log);
    }
    since_eval++;
    bool last = i + 1 == a->warmup + a->steps;
    if (have_held && ((a->eval_every && (step + 1) % (uint64_t)a->eval_every == 0) || (last && since_eval))) {
      double vl = 0;
      if ((st = evaluate(s, e, held, &vl))) break;
      since_eval = 0;
      if (a->log) {
        fprintf(a->log, "step %llu: validation %.6f (mean over %llu held-out batches of %llu)\n", (unsigned long long)step + 1,
                vl, (unsigned long long)mlc_dataset_batches(held), (unsigned long long)held->batch);
        fflush(a->log);
      }
    }
    if (flags[1] != 0) break;
    if (a->save && a->save_every && (step + 1) % (uint64_t)a->save_every == 0 && !last && (st = save(s, a->save, a->log))) break;
  }
  return st;
}

mlc_status mlc_train_loop(mlc_session *s, const mlc_train_args *a, int *out_signal) {
  *out_signal = 0;
  const mlc_plan_entry *e = mlc_plan_find_entry(mlc_session_plan(s), "train");
  if (!e) return mlc_status_make(MLC_INVALID_ARGUMENT, "the model has no train block to train with");
  /* The schedule's length: the optimizer's steps=, else a resumed
   * checkpoint's, else this run's last step. */
  if (!mlc_session_schedule_steps(s)) mlc_session_set_schedule_steps(s, mlc_session_step(s) + (uint64_t)(a->warmup + a->steps));
  tokens d = {0};
  mlc_dataset train = {0}, held = {0};
  mlc_status st = NULL;
  if (a->data) {
    st = read_tokens(a->data, a->data_dtype, &d);
  } else if (a->ninputs) {
    st = open_data(a, e, &train, &held);
  } else {
    if (!a->synthetic_ok && mlc_session_rank(s) == 0)
      fprintf(stderr, "mlc: warning: no --data or --input: every step trains on the same synthetic batch of random "
                      "numbers, not on data\n");
    st = synthetic_inputs(s, e);
  }
  struct sigaction act = {0}, old_int, old_term;
  act.sa_handler = on_stop;
  sigemptyset(&act.sa_mask);
  stop_signal = 0;
  sigaction(SIGINT, &act, &old_int);
  sigaction(SIGTERM, &act, &old_term);
  if (!st) st = loop(s, a, e, &train, &held, &d);
  if (!st && a->save) st = save(s, a->save, a->log);
  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGTERM, &old_term, NULL);
  if (!st && stop_signal && mlc_session_rank(s) == 0)
    fprintf(stderr, "mlc: %s: stopped after step %llu; %s%s%s\n", stop_signal == SIGINT ? "SIGINT" : "SIGTERM",
            (unsigned long long)mlc_session_step(s), a->save ? "saved " : "no --save, so nothing was saved",
            a->save ? a->save : "", a->save ? " (continue with --resume)" : "");
  *out_signal = stop_signal;
  mlc_dataset_close(&held);
  mlc_dataset_close(&train);
  free(d.tok);
  return st;
}
