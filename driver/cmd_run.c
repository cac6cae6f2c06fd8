/* mlc run, bench and train (and profile, which runs as bench or train):
 * builds the program for the target, opens its device and runs a session:
 * run's forward and its outputs, bench's timed forwards, or train's steps
 * (the loop is train.c's).  Several ranks share NCCL's id first.  A compiled
 * plan (FILE.mlcplan) skips the build: its device is the one of the driver
 * its code is for, made from the plan alone. */
#define _XOPEN_SOURCE 700 /* _exit */
#include "driver/cli.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driver/generate.h"
#include "driver/train.h"
#include "passes/passes.h"
#include "runtime/dist/bootstrap.h"
#include "runtime/plan.h"
#include "runtime/safetensors.h"

#if defined(MLC_HAVE_CPU) || defined(MLC_HAVE_CUDA) || defined(MLC_HAVE_SPIRV)
/* Why a raw input file of the wrong size is so, when its first bytes say it
 * is a .npy, .npz or torch.save file, with the Python that writes raw data;
 * "" otherwise. */
static const char *raw_hint(const uint8_t *b, size_t n, const char *path, const char *name, uint8_t dtype, char *buf,
                            size_t size) {
  /* numpy's names for the plan's dtype codes; bf16 has none. */
  static const char *const np_names[] = {NULL, "float32", NULL, "float16", "int32", "int64", "bool_"};
  const char *np = dtype < 7 ? np_names[dtype] : NULL;
  char conv[64] = "";
  if (np) snprintf(conv, sizeof conv, ".astype(numpy.%s)", np);
  switch (mlc_safetensors_sniff(b, n)) {
  case MLC_ST_FOREIGN_NPY:
    snprintf(buf, size, "\nit is a NumPy .npy file, which has a header; write the raw data in Python:\n"
             "  numpy.load(\"%s\")%s.tofile(\"%s.bin\")", path, conv, name);
    return buf;
  case MLC_ST_FOREIGN_NPZ:
    snprintf(buf, size, "\nit is a NumPy .npz archive (numpy.savez); write each input's raw data in Python:\n"
             "  numpy.load(\"%s\")[\"%s\"]%s.tofile(\"%s.bin\")", path, name, conv, name);
    return buf;
  case MLC_ST_FOREIGN_TORCH_ZIP:
  case MLC_ST_FOREIGN_TORCH_PICKLE:
    snprintf(buf, size, "\nit is a PyTorch file (torch.save); write the tensor's raw data in Python:\n"
             "  torch.load(\"%s\").numpy()%s.tofile(\"%s.bin\")  # torch.load(...)[\"%s\"] for a dict",
             path, conv, name, name);
    return buf;
  default: return "";
  }
}

/* Reads a raw input file of exactly `bytes` bytes into dst. */
static mlc_status read_exact(const char *path, const char *name, void *dst, uint64_t bytes, const char *shape,
                             uint8_t dtype) {
  FILE *f = fopen(path, "rb");
  if (!f) return mlc_status_make(MLC_NOT_FOUND, "--input %s=%s: cannot open: %s", name, path, strerror(errno));
  size_t got = fread(dst, 1, (size_t)bytes, f);
  int extra = fgetc(f);
  fclose(f);
  char hint[768];
  if (got != bytes || extra != EOF)
    return mlc_status_make(MLC_INVALID_ARGUMENT, "--input %s=%s: input '%s' is %s, %llu bytes of raw little-endian data; "
                           "the file has %s%s", name, path, name, shape, (unsigned long long)bytes,
                           got < bytes ? "fewer" : "more", raw_hint(dst, got, path, name, dtype, hint, sizeof hint));
  return NULL;
}

static const char *value_desc(const mlc_plan_value *v, char *buf, size_t n) {
  /* A plan's dtype codes are mlc_dtype's. */
  size_t k = (size_t)snprintf(buf, n, "%s[", mlc_dtype_name((mlc_dtype)v->shape.dtype));
  for (int i = 0; i < v->shape.rank && k < n; i++) k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)v->shape.dims[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
  return buf;
}

static const char *find_arg(const char *const *list, uint32_t n, const char *name) {
  size_t len = strlen(name);
  for (uint32_t i = 0; i < n; i++)
    if (!strncmp(list[i], name, len) && list[i][len] == '=') return list[i] + len + 1;
  return NULL;
}

/* Fills the inputs of `entry`: from files (run) or random values (bench). */
static mlc_status set_inputs(const options *o, mlc_session *s, const mlc_plan_entry *e) {
  for (uint32_t i = 0; i < o->ninputs; i++) {
    bool known = false;
    for (uint32_t k = 0; k < e->ninputs; k++) known |= !strncmp(o->inputs[i], e->inputs[k].name, strlen(e->inputs[k].name)) && o->inputs[i][strlen(e->inputs[k].name)] == '=';
    if (!known) return mlc_status_make(MLC_NOT_FOUND, "--input %s: %s has no input of that name", o->inputs[i], e->name);
  }
  uint64_t rng = 0x6d6c63;
  for (uint32_t k = 0; k < e->ninputs; k++) {
    const mlc_plan_value *v = &e->values[e->inputs[k].value];
    uint64_t bytes = mlc_plan_shape_bytes(&v->shape);
    uint8_t *buf = malloc(bytes ? bytes : 1);
    if (!buf) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory for input %s", e->inputs[k].name);
    char desc[160];
    mlc_status st = NULL;
    const char *path = find_arg(o->inputs, o->ninputs, e->inputs[k].name);
    if (path) {
      st = read_exact(path, e->inputs[k].name, buf, bytes, value_desc(v, desc, sizeof desc), v->shape.dtype);
    } else if (o->cmd == CMD_BENCH) {
      /* Random data: floats in [-1, 1), integers in [0, 64) (valid token ids for any vocabulary of 64 or more). */
      int esz = mlc_dtype_size((mlc_dtype)v->shape.dtype);
      for (uint64_t j = 0; j < bytes / (uint64_t)esz; j++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t r = (uint32_t)(rng >> 33);
        if (v->shape.dtype == 1) { float f = (float)r / 2147483648.0f - 1.0f; memcpy(buf + j * 4, &f, 4); }
        else if (v->shape.dtype == 4) { int32_t x = (int32_t)(r % 64); memcpy(buf + j * 4, &x, 4); }
        else if (v->shape.dtype == 5) { int64_t x = r % 64; memcpy(buf + j * 8, &x, 8); }
        else if (v->shape.dtype == 6) buf[j] = (uint8_t)(r & 1);
        else { uint16_t h = (uint16_t)(0x3c00 | (r & 0x3ff)); memcpy(buf + j * 2, &h, 2); } /* values in [1, 2) for f16 */
      }
    } else {
      st = mlc_status_make(MLC_INVALID_ARGUMENT, "input '%s' (%s, %llu bytes) needs --input %s=FILE", e->inputs[k].name,
                           value_desc(v, desc, sizeof desc), (unsigned long long)bytes, e->inputs[k].name);
    }
    if (!st) st = mlc_session_set_input(s, e->name, e->inputs[k].name, buf, (size_t)bytes);
    free(buf);
    if (st) return st;
  }
  return NULL;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void print_output(const char *name, const void *data, const mlc_plan_value *v) {
  char desc[160];
  uint64_t n = mlc_plan_shape_bytes(&v->shape) / (uint64_t)mlc_dtype_size((mlc_dtype)v->shape.dtype);
  printf("%s: %s", name, value_desc(v, desc, sizeof desc));
  if (v->shape.dtype == 1) {
    const float *f = data;
    double sum = 0, asum = 0;
    for (uint64_t i = 0; i < n; i++) sum += f[i], asum += fabs(f[i]);
    printf("  mean %.6g  mean|x| %.6g  first", sum / (double)n, asum / (double)n);
    for (uint64_t i = 0; i < n && i < 4; i++) printf(" %.6g", f[i]);
  }
  printf("\n");
}

/* Seconds a rank waits for its peers before the watchdog gives up on them:
 * MLC_NCCL_TIMEOUT, else 45, so that a dead peer ends the others within a
 * minute (a healthy step waits well under a second). */
static double nccl_timeout(void) {
  const char *e = getenv("MLC_NCCL_TIMEOUT");
  double t = e ? atof(e) : 0;
  return t > 0 ? t : 45;
}

/* NCCL's id on every rank: over TCP from rank 0 at MASTER_ADDR:MASTER_PORT,
 * or, under mpirun without MASTER_ADDR, through MPI (an all-gather of the
 * ids, keeping rank 0's). */
static mlc_status nccl_id(const mlc_dist_env *env, uint8_t *id) {
  if (env->world == 1 || env->master_addr[0] || strcmp(env->launcher, "mpirun")) return mlc_comm_nccl_id(env, id, nccl_timeout());
  mlc_comm *mpi;
  MLC_RETURN_IF_ERROR(mlc_comm_mpi_create(mlc_allocator_default(), &mpi));
  uint8_t *all = calloc((size_t)env->world, MLC_NCCL_ID_BYTES);
  mlc_status st = all ? NULL : mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory");
  if (!st && env->rank == 0) st = mlc_comm_nccl_new_id(id);
  if (!st) st = mpi->vt->all_gather(mpi, (uint64_t)(uintptr_t)id, (uint64_t)(uintptr_t)all, MLC_NCCL_ID_BYTES, NULL);
  if (!st) memcpy(id, all, MLC_NCCL_ID_BYTES);
  free(all);
  mpi->vt->destroy(mpi);
  return st;
}

#ifdef MLC_HAVE_CUDA
/* The watchdog aborted the communicator and the GPU still does not return:
 * this process cannot go on. */
static void nccl_hang(const char *why) {
  fprintf(stderr, "mlc: %s; exiting\n", why);
  _exit(EXIT_USER);
}
#endif

/* --logits FILE: each new token's logits, appended as they come. */
typedef struct {
  FILE *f;
  bool failed;
} logits_sink;

static void write_logits(void *ctx, const float *logits, int64_t vocab) {
  logits_sink *k = ctx;
  if (k->f && fwrite(logits, sizeof *logits, (size_t)vocab, k->f) != (size_t)vocab) k->failed = true;
}

/* generate: the new tokens on one line, then the prefill's and the
 * decode's rates on their own. */
static mlc_status generate(const options *o, mlc_session *s) {
  logits_sink sink = {0};
  if (o->logits_out && !(sink.f = fopen(o->logits_out, "wb")))
    return mlc_status_make(MLC_IO, "--logits %s: cannot write: %s", o->logits_out, strerror(errno));
  int32_t *prompt;
  uint32_t nprompt;
  mlc_status st = mlc_generate_parse_prompt(o->prompt, &prompt, &nprompt);
  if (st) {
    if (sink.f) fclose(sink.f);
    return st;
  }
  mlc_generate_args a = {.prompt = prompt, .prompt_n = nprompt, .max_new = o->max_new, .temperature = o->temperature,
                         .top_k = o->top_k, .seed = o->seed, .on_token = write_logits, .ctx = &sink, .warmup = true};
  mlc_generate_result r;
  st = mlc_generate(s, &a, &r);
  free(prompt);
  if (sink.f && fclose(sink.f)) sink.failed = true;
  if (!st && sink.failed) st = mlc_status_make(MLC_IO, "--logits %s: cannot write: %s", o->logits_out, strerror(errno));
  if (st) return st;
  printf("tokens:");
  for (long i = 0; i < r.n; i++) printf(" %d", r.tokens[i]);
  printf("\n");
  printf("prefill: %u tokens in %.3f ms, %.1f tok/s\n", r.prompt_n, r.prefill_s * 1e3, r.prompt_n / r.prefill_s);
  if (r.n > 1)
    printf("decode: %ld tokens in %.3f ms, %.1f tok/s (%.3f ms per token)\n", r.n - 1, r.decode_s * 1e3,
           (double)(r.n - 1) / r.decode_s, r.decode_s * 1e3 / (double)(r.n - 1));
  else
    printf("decode: no steps (--max-new 1: the prefill gives the first token)\n");
  free(r.tokens);
  return NULL;
}

#ifdef MLC_HAVE_ONNX

/* --weights for a model with ONNX values (a .onnx model, or onnx(...)
 * modules): the tensors that are never trained (integer tensors, Constant
 * nodes' tensors, frozen initializers) are part of the graph, so the file
 * may leave them out, as a torch state_dict does, and they keep the graph's
 * values.  The file's tensors and those go to the session as one file in
 * memory; everything else is the session's strict load (a trainable tensor
 * that is missing is an error naming it). */
static mlc_status load_weights(mlc_session *s, const mlc_program *prog, const onnx_weights *ow, const char *path) {
  mlc_safetensors *f;
  MLC_RETURN_IF_ERROR(mlc_safetensors_open_file(path, mlc_allocator_default(), &f));
  size_t nf = mlc_safetensors_count(f), n = 0;
  mlc_safetensors_entry *e = calloc(nf + ow->n + 1, sizeof *e);
  if (!e) {
    mlc_safetensors_close(f);
    return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory");
  }
  for (size_t i = 0; i < nf; i++) {
    const mlc_safetensors_tensor *t = mlc_safetensors_tensor_at(f, i);
    e[n++] = (mlc_safetensors_entry){t->name, t->dtype, t->rank, t->shape, t->data};
  }
  for (uint32_t i = 0; i < ow->n; i++) {
    const mlc_param *p = &prog->params[ow->w[i].param];
    const mlc_safetensors_tensor *t;
    if (!p->frozen && mlc_dtype_is_float((mlc_dtype)p->type.dtype)) continue; /* trained: the file's */
    mlc_status miss = mlc_safetensors_find(f, p->name, &t);
    if (!miss) continue;
    mlc_status_free(miss);
    e[n++] = (mlc_safetensors_entry){p->name, mlc_cli_st_dtype((mlc_dtype)p->type.dtype), p->type.rank, p->type.dim,
                                     ow->w[i].data};
  }
  mlc_status st = NULL;
  if (n == nf) {
    st = mlc_session_load_weights(s, path);
  } else {
    void *bytes = NULL;
    size_t size = 0;
    st = mlc_safetensors_serialize(e, n, NULL, 0, mlc_allocator_default(), &bytes, &size);
    if (!st) st = mlc_session_load_weights_memory(s, bytes, size);
    if (bytes) mlc_allocator_free(mlc_allocator_default(), bytes);
    static const char label[] = "weights in memory";
    const char *m = st ? mlc_status_message(st) : "";
    if (st && !strncmp(m, label, sizeof label - 1)) { /* the messages name the user's file */
      mlc_status named = mlc_status_make(mlc_status_code(st), "%s%s", path, m + sizeof label - 1);
      mlc_status_free(st);
      st = named;
    }
  }
  free(e);
  mlc_safetensors_close(f);
  return st;
}
#endif

/* Everything after the device is open: a session over `plan` on
 * so->device (the session's from here on, made or not), its weights, then
 * run's outputs, bench's timed forwards, generate's tokens or train's steps.
 * `prog` and `ow` are the program's, NULL for a compiled plan (an ONNX
 * model's graph values come from them); `where` names the device in bench's
 * line, and `device_memory` says to print what it holds.  The exit status. */
static int run_session(const options *o, const mlc_plan *plan, mlc_session_options *so, const mlc_program *prog,
                       const onnx_weights *ow, const char *where, bool device_memory) {
  mlc_session *s = NULL;
  mlc_status st = mlc_session_create(plan, so, &s);
  so->device = NULL; /* the session owns it now, or has destroyed it */
  int rc = EXIT_OK;
  if (st) goto fail;
  if (o->flush_l2 > 0 && so->profile && (st = mlc_session_set_flush_caches(s, true))) goto fail;
  /* bench: the timed runs only; profile's train steps: after the warm-up step */
  if (o->trace && o->cmd != CMD_BENCH && !o->profile_warmup) mlc_session_set_trace(s, true);
  if (o->weights) {
#ifdef MLC_HAVE_ONNX
    if ((st = ow && ow->n ? load_weights(s, prog, ow, o->weights) : mlc_session_load_weights(s, o->weights))) goto fail;
#else
    if ((st = mlc_session_load_weights(s, o->weights))) goto fail;
#endif
  } else {
    mlc_session_init_params(s, o->seed);
#ifdef MLC_HAVE_ONNX
    /* The model's own values, not random ones (each rank its part of a sharded one). */
    for (uint32_t i = 0; ow && i < ow->n; i++)
      if ((st = mlc_session_set_param(s, ow->w[i].param, ow->w[i].data, ow->w[i].bytes))) goto fail;
#else
    (void)prog;
    (void)ow;
#endif
  }
  if (o->resume && (st = mlc_session_load_checkpoint(s, o->resume))) goto fail;
  if (o->cmd == CMD_GENERATE) {
    if ((st = generate(o, s))) goto fail;
    if ((st = mlc_cmd_profile_outputs(o, s, "step"))) goto fail;
    goto out;
  }
  if (o->cmd == CMD_TRAIN) {
    mlc_train_args ta = {
      .steps = o->steps, .data = o->data, .data_dtype = o->data_dtype, .inputs = o->inputs, .ninputs = o->ninputs,
      .eval_inputs = o->eval_inputs, .neval_inputs = o->neval_inputs, .eval_split = o->eval_split,
      .eval_every = o->eval_every, .shuffle = o->shuffle, .shuffle_seed = o->shuffle_seed,
      .synthetic_ok = !strcmp(o->name, "profile"), .save = o->save, .save_every = o->save_every, .log = stdout,
      .warmup = o->profile_warmup, .trace = o->trace != NULL,
    };
    if (mlc_session_rank(s)) ta.log = NULL; /* rank 0 prints the mean loss over the ranks */
    int sig;
    if ((st = mlc_train_loop(s, &ta, &sig))) goto fail;
    if (sig) { /* stopped by SIGINT or SIGTERM, after saving */
      rc = 128 + sig;
      goto out;
    }
    if (o->export_weights && (st = mlc_session_save_weights(s, o->export_weights))) goto fail;
    if (device_memory) printf("device memory held by mlc: %.2f GB (parameters, optimizer state, arenas, scratch)\n",
                     mlc_session_device_bytes(s) / 1e9);
    if ((st = mlc_cmd_profile_outputs(o, s, "train"))) goto fail;
    goto out;
  }
  const mlc_plan_entry *e = mlc_plan_find_entry(plan, "forward");
  if (!e) { st = mlc_status_make(MLC_NOT_FOUND, "the model has no forward"); goto fail; }
  for (uint32_t i = 0; i < o->noutputs; i++) {
    bool known = false;
    for (uint32_t k = 0; k < e->noutputs; k++)
      known |= !strncmp(o->outputs[i], e->outputs[k].name, strlen(e->outputs[k].name)) && o->outputs[i][strlen(e->outputs[k].name)] == '=';
    if (!known) {
      char names[512] = "";
      size_t len = 0;
      for (uint32_t k = 0; k < e->noutputs && len < sizeof names; k++)
        len += (size_t)snprintf(names + len, sizeof names - len, "%s'%s'", k ? ", " : "", e->outputs[k].name);
      st = mlc_status_make(MLC_NOT_FOUND, "--output %s: forward has no output of that name (it has %s)", o->outputs[i], names);
      goto fail;
    }
  }
  if ((st = set_inputs(o, s, e))) goto fail;
  if (o->cmd == CMD_RUN) {
    if ((st = mlc_session_run(s, "forward"))) goto fail;
    for (uint32_t k = 0; k < e->noutputs; k++) {
      const void *data;
      const mlc_plan_shape *shape;
      if ((st = mlc_session_output(s, "forward", e->outputs[k].name, &data, &shape))) goto fail;
      const mlc_plan_value *v = &e->values[e->outputs[k].value];
      print_output(e->outputs[k].name, data, v);
      const char *path = find_arg(o->outputs, o->noutputs, e->outputs[k].name);
      if (path) {
        FILE *f = fopen(path, "wb");
        uint64_t n = mlc_plan_shape_bytes(shape);
        if (!f || fwrite(data, 1, (size_t)n, f) != n || fclose(f)) {
          st = mlc_status_make(MLC_IO, "--output %s=%s: cannot write: %s", e->outputs[k].name, path, strerror(errno));
          goto fail;
        }
      }
    }
  } else {
    int warm = o->warmup >= 0 ? o->warmup : 3, runs = o->runs ? o->runs : 10;
    for (int i = 0; i < warm; i++)
      if ((st = mlc_session_run(s, "forward"))) goto fail;
    mlc_session_reset_profile(s);
    if (o->trace) mlc_session_set_trace(s, true);
    double *t = malloc((size_t)runs * sizeof *t);
    if (!t) { st = mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory"); goto fail; }
    for (int i = 0; i < runs && !st; i++) {
      double t0 = mlc_now();
      st = mlc_session_run(s, "forward");
      t[i] = (mlc_now() - t0) * 1e3;
    }
    if (!st) {
      qsort(t, (size_t)runs, sizeof *t, cmp_double);
      double flops = 0;
      for (uint32_t i = 0; i < e->nsteps; i++) flops += e->steps[i].flops;
      double med = runs % 2 ? t[runs / 2] : (t[runs / 2 - 1] + t[runs / 2]) / 2;
      printf("%s forward on %s: median %.3f ms, min %.3f, max %.3f over %d runs after %d warm-up; %.1f GFLOP/s\n",
             plan->model, where, med, t[0], t[runs - 1], runs, warm, flops / (med * 1e-3) / 1e9);
      if (device_memory) printf("device memory held by mlc: %.2f GB (parameters, arenas, scratch)\n", mlc_session_device_bytes(s) / 1e9);
    }
    free(t);
    if (st) goto fail;
  }
  if ((st = mlc_cmd_profile_outputs(o, s, "forward"))) goto fail;
  goto out;
fail:
  rc = mlc_cli_fail_status(st);
out:
  mlc_session_destroy(s);
  return rc;
}

int mlc_cmd_run(const options *o, mlc_program *prog, const onnx_weights *ow) {
  const mlc_driver_target *tgt = mlc_driver_target_find(o->target);
  bool nccl = tgt->nccl;
  mlc_comm *comm = NULL;
  mlc_status st = NULL;
  void *b = calloc(1, tgt->build_bytes);
  const uint8_t *plan_bytes = NULL;
  size_t plan_n = 0;
  int rc = EXIT_OK;
  mlc_plan *plan = NULL;
  /* --trace and --roofline need the per-step timing that --profile turns on. */
  mlc_session_options so = {NULL, NULL, NULL, o->threads, o->profile || o->trace || o->roofline, {0}, NULL};
  mlc_dist_env env;
  if (!b) { st = mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory"); goto fail; }
  if ((st = mlc_dist_env_read(&env))) goto fail;
  /* One GPU per rank: the launcher's local rank picks it unless --device does. */
  int device = o->device_set ? o->device : nccl ? env.local_rank : o->device;
  /* NCCL's id reaches every rank (TCP on MASTER_ADDR) first: a bad address
   * fails at once, before compiling or touching a GPU. */
  uint8_t id[MLC_NCCL_ID_BYTES] = {0};
  if (nccl && (st = nccl_id(&env, id))) goto fail;
  if ((st = tgt->build(b, prog, stderr, env.rank))) goto fail;
  if ((st = tgt->open(b, device, stderr, env.rank, &so, &plan_bytes, &plan_n))) goto fail;
#ifdef MLC_HAVE_CUDA
  if (nccl && (st = mlc_comm_nccl_create(&env, id, nccl_timeout(), nccl_hang, mlc_allocator_default(), &comm))) goto fail;
#endif
  if ((st = mlc_plan_parse(plan_bytes, plan_n, mlc_allocator_default(), &plan))) goto fail;
  if (!comm && env.world > 1) {
    if (tgt->one_device || !prog->train.shard)
      st = mlc_status_make(MLC_INVALID_ARGUMENT, "%d ranks started, but %s; use --target cuda-nccl, or the CPU target "
                           "with a train block that has shard = fsdp(...)", env.world,
                           tgt->one_device ? mlc_arena_printf(prog->arena, "--target %s runs on one GPU", tgt->name)
                                         : "the model is not sharded");
    else if (strcmp(env.launcher, "mpirun"))
      st = mlc_status_make(MLC_INVALID_ARGUMENT, "the CPU target's collectives run over MPI: start the %d ranks with "
                           "mpirun, not %s", env.world, env.launcher);
    else
      st = mlc_comm_mpi_create(mlc_allocator_default(), &comm);
    if (st) goto fail;
  }
  so.comm = comm;
  rc = run_session(o, plan, &so, prog, ow, o->target, tgt->device_memory);
  goto out;
fail:
  rc = mlc_cli_fail_status(st);
out:
  if (so.device) so.device->vt->destroy(so.device);
  if (comm) comm->vt->destroy(comm);
  mlc_plan_free(plan);
  if (b && tgt->release) tgt->release(b);
  free(b);
  return rc;
}

/* The --target whose sessions run on driver `d` (spirv for vulkan); NULL: none. */
static const mlc_driver_target *target_of_driver(const mlc_driver *d) {
  unsigned n;
  const mlc_driver_target *t = mlc_driver_targets(&n);
  for (unsigned i = 0; i < n; i++)
    if (t[i].device_driver && !strcmp(t[i].device_driver, d->name)) return &t[i];
  return NULL;
}

int mlc_cmd_run_plan(const options *o) {
  mlc_plan *plan = NULL;
  mlc_session_options so = {NULL, NULL, NULL, o->threads, o->profile || o->trace || o->roofline, {0}, NULL};
  mlc_dist_env env;
  const mlc_driver *d;
  mlc_status st = mlc_dist_env_read(&env);
  if (!st && env.world > 1)
    st = mlc_status_make(MLC_INVALID_ARGUMENT, "%d ranks started, but a compiled plan runs on one: start one process, "
                         "or give the ranks the model's .mdl", env.world);
  if (!st) st = mlc_plan_read_file(o->file, mlc_allocator_default(), &plan);
  if (!st) st = mlc_driver_for_plan(plan, &d);
  const mlc_driver_target *tgt = st ? NULL : target_of_driver(d);
  if (!st && o->target && (!tgt || strcmp(mlc_driver_target_find(o->target)->device_driver, d->name)))
    st = mlc_status_make(MLC_INVALID_ARGUMENT, "--target %s: %s holds code for the %s driver%s%s%s (or leave --target "
                         "out: a plan's code says where it runs)", o->target, o->file, d->name, tgt ? " (--target " : "",
                         tgt ? tgt->name : "", tgt ? ")" : "");
  if (!st) {
    mlc_device_options dopt = {.allocator = mlc_allocator_default(), .plan = plan, .progress = stderr};
    st = mlc_device_create(NULL, o->device, &dopt, &so.device);
  }
  /* An ONNX model's plan needs the model's values, which compile -o wrote
   * beside it as <model>.safetensors: taken from there without --weights. */
  options with = *o;
  char values[4096];
  bool given = false;
  for (uint32_t i = 0; !st && i < plan->nparams; i++) given |= plan->params[i].init == MLC_PLAN_INIT_GIVEN;
  if (!st && given && !o->weights) {
    const char *slash = strrchr(o->file, '/');
    int dir = slash ? (int)(slash - o->file) : 1;
    snprintf(values, sizeof values, "%.*s/%s.safetensors", dir, slash ? o->file : ".", plan->model);
    if (!access(values, R_OK)) {
      with.weights = values;
      fprintf(stderr, "mlc: the model's values from %s (compile -o wrote them beside the plan)\n", values);
    }
  }
  int rc = st ? mlc_cli_fail_status(st)
              : run_session(&with, plan, &so, NULL, NULL, tgt ? tgt->name : d->name, !so.device->vt->host_memory);
  mlc_plan_free(plan);
  return rc;
}
#endif
