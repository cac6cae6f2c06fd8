/* A session's training state: checkpoints (every parameter, the optimizer
 * state and the step, with a checksum), saved and resumed; with several
 * ranks, FSDP-sharded ones (a shard per rank and a manifest naming them),
 * which one rank can also read, gathering every shard.  And the same state
 * in the caller's memory (mlc_session_state_save, state_restore). */
#include "runtime/session_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "runtime/safetensors.h"

#include <xxhash.h>

/* xxHash64 over every parameter and state tensor, in plan order (state not
 * yet made as the zeros it would start from). */
static uint64_t params_checksum(const mlc_session *s) {
  static const uint8_t zeros[4096];
  XXH64_state_t *h = XXH64_createState();
  if (!h) return 0;
  XXH64_reset(h, 0);
  for (uint32_t i = 0; i < s->plan->nparams; i++) {
    if (follows_weight(&s->plan->params[i])) continue; /* packed weights and shadows follow from the others */
    if (is_state(s, i) && !s->state)
      for (uint64_t left = param_bytes(s, i); left; left -= left < sizeof zeros ? left : sizeof zeros)
        XXH64_update(h, zeros, (size_t)(left < sizeof zeros ? left : sizeof zeros));
    else
      XXH64_update(h, host_at(s, i), (size_t)param_bytes(s, i));
  }
  uint64_t v = XXH64_digest(h);
  XXH64_freeState(h);
  return v;
}

/* A checkpoint of several ranks: each writes "<path>.rank<r>" (its shards
 * of the flat parameters and their state), and rank 0 then writes the
 * manifest at <path>, a small JSON file naming the shards, last. */
#define MANIFEST_FORMAT "mlc-sharded-checkpoint"

char *mlc_sess_shard_path(const mlc_session *s, const char *path, int rank) {
  size_t n = strlen(path) + 32;
  char *p = mlc_allocator_alloc(s->a, n);
  if (p) snprintf(p, n, "%s.rank%d", path, rank);
  return p;
}

static mlc_status write_manifest(const mlc_session *s, const char *path) {
  cJSON *j = cJSON_CreateObject(), *files = cJSON_CreateArray();
  cJSON_AddStringToObject(j, "format", MANIFEST_FORMAT);
  cJSON_AddStringToObject(j, "model", s->plan->model);
  cJSON_AddNumberToObject(j, "world", s->comm->world);
  cJSON_AddNumberToObject(j, "step", (double)s->step);
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  for (int r = 0; r < s->comm->world; r++) {
    char name[4096];
    snprintf(name, sizeof name, "%s.rank%d", base, r);
    cJSON_AddItemToArray(files, cJSON_CreateString(name));
  }
  cJSON_AddItemToObject(j, "shards", files);
  char *text = cJSON_Print(j);
  cJSON_Delete(j);
  if (!text) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory for the checkpoint manifest");
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  mlc_status st = NULL;
  if (!f || fputs(text, f) < 0 || fputc('\n', f) < 0 || fflush(f) || fsync(fileno(f)) || fclose(f))
    st = mlc_status_make(MLC_IO, "%s: cannot write the checkpoint manifest: %s", tmp, strerror(errno));
  else if (rename(tmp, path))
    st = mlc_status_make(MLC_IO, "%s: cannot rename the checkpoint manifest into place: %s", path, strerror(errno));
  free(text);
  return st;
}

mlc_status mlc_session_save_checkpoint(const mlc_session *s, const char *path) {
  char step[32], sum[32], rank[16], world[16];
  MLC_RETURN_IF_ERROR(mlc_sess_sync_host(s));
  snprintf(step, sizeof step, "%llu", (unsigned long long)s->step);
  snprintf(sum, sizeof sum, "%016llx", (unsigned long long)params_checksum(s));
  snprintf(rank, sizeof rank, "%d", s->comm->rank);
  snprintf(world, sizeof world, "%d", s->comm->world);
  char sched[32];
  snprintf(sched, sizeof sched, "%llu", (unsigned long long)s->sched_steps);
  /* A decaying schedule's length goes along, so that a resumed run continues
   * the same schedule whatever --steps it is given. */
  mlc_safetensors_kv meta[] = {{"format", "mlc-checkpoint"}, {"model", s->plan->model}, {"step", step}, {"xxh64", sum},
                               {"rank", rank}, {"world", world}, {"schedule_steps", sched}};
  size_t nmeta = sizeof meta / sizeof *meta - (s->plan->schedule.decay == MLC_PLAN_DECAY_NONE || !s->sched_steps);
  if (s->comm->world == 1) return mlc_sess_save_tensors(s, path, ALL_ROLES, meta, nmeta);
  char *file = mlc_sess_shard_path(s, path, s->comm->rank);
  if (!file) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory");
  mlc_status st = mlc_sess_save_tensors(s, file, ALL_ROLES, meta, nmeta);
  mlc_allocator_free(s->a, file);
  /* Every rank's shard is on disk before the manifest names them. */
  double failed = st != NULL;
  mlc_status cst = mlc_session_all_sum((mlc_session *)s, &failed, 1);
  if (cst) { mlc_status_free(st); return cst; }
  if (!st && failed > 0)
    st = mlc_status_make(MLC_IO, "%s: %g other rank(s) could not write their shard; no manifest written", path, failed);
  if (!st && s->comm->rank == 0) st = write_manifest(s, path);
  double done = 1; /* a barrier: no rank returns before the manifest exists */
  if ((cst = mlc_session_all_sum((mlc_session *)s, &done, 1))) { mlc_status_free(st); return cst; }
  return st;
}

/* Reads a sharded checkpoint's manifest: whether path is one, and if so
 * the shard this rank loads; a checkpoint of several ranks read by one gives
 * rank 0's shard and their number in out_world (every shard is gathered). */
static mlc_status read_manifest(mlc_session *s, const char *path, char **out_shard, int *out_world) {
  *out_shard = NULL;
  *out_world = 0;
  FILE *f = fopen(path, "rb");
  if (!f) return mlc_status_make(MLC_NOT_FOUND, "%s: cannot open: %s", path, strerror(errno));
  char head[2] = {0};
  size_t n = fread(head, 1, 1, f);
  if (n != 1 || head[0] != '{') { /* a safetensors file starts with its header length */
    fclose(f);
    return NULL;
  }
  char buf[1 << 16];
  buf[0] = '{';
  n = 1 + fread(buf + 1, 1, sizeof buf - 2, f);
  buf[n] = 0;
  fclose(f);
  cJSON *j = cJSON_Parse(buf);
  const cJSON *fmt = cJSON_GetObjectItem(j, "format"), *model = cJSON_GetObjectItem(j, "model");
  const cJSON *world = cJSON_GetObjectItem(j, "world"), *shards = cJSON_GetObjectItem(j, "shards");
  mlc_status st = NULL;
  if (!j || !cJSON_IsString(fmt) || strcmp(fmt->valuestring, MANIFEST_FORMAT) || !cJSON_IsString(model) ||
      !cJSON_IsNumber(world) || !cJSON_IsArray(shards) || cJSON_GetArraySize(shards) != world->valueint)
    st = mlc_status_make(MLC_DATA_LOSS, "%s: not an mlc checkpoint manifest", path);
  else if (strcmp(model->valuestring, s->plan->model))
    st = mlc_status_make(MLC_INVALID_ARGUMENT, "%s: a checkpoint of model '%s', not '%s'", path, model->valuestring,
                         s->plan->model);
  else if (world->valueint != s->comm->world && s->comm->world != 1)
    st = mlc_status_make(MLC_INVALID_ARGUMENT, "%s: sharded over %d ranks, but this run has %d: resume with %d ranks, or "
                         "with one (which gathers every shard)", path, world->valueint, s->comm->world, world->valueint);
  else if (world->valueint != s->comm->world)
    *out_world = world->valueint;
  if (!st) {
    const cJSON *name = cJSON_GetArrayItem(shards, *out_world ? 0 : s->comm->rank);
    const char *slash = strrchr(path, '/');
    size_t dir = slash ? (size_t)(slash - path + 1) : 0, len = dir + strlen(cJSON_IsString(name) ? name->valuestring : "") + 1;
    char *p = cJSON_IsString(name) && !strchr(name->valuestring, '/') ? mlc_allocator_alloc(s->a, len) : NULL;
    if (!p) st = mlc_status_make(MLC_DATA_LOSS, "%s: bad shard name for rank %d", path, s->comm->rank);
    else snprintf(p, len, "%.*s%s", (int)dir, path, name->valuestring);
    *out_shard = p;
  }
  cJSON_Delete(j);
  return st;
}

/* One rank reading a checkpoint of `world`: every shard file in turn, each
 * rank's rows of every sharded parameter put where one rank holds them
 * (the rows past the unsharded count are padding, zero). */
static mlc_status load_gathered(mlc_session *s, const char *first, int world) {
  size_t n = strlen(first);
  mlc_status st = NULL;
  unsigned long long nstep = 0;
  for (int r = 0; r < world && !st; r++) {
    char *file = mlc_allocator_alloc(s->a, n + 16);
    if (!file) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory");
    snprintf(file, n + 16, "%.*s%d", (int)(n - 1), first, r); /* first ends in ".rank0" */
    mlc_safetensors *f;
    if ((st = mlc_safetensors_open_file(file, s->a, &f))) { mlc_allocator_free(s->a, file); break; }
    const char *rank = mlc_safetensors_metadata_get(f, "rank"), *sum = mlc_safetensors_metadata_get(f, "xxh64");
    const char *step = mlc_safetensors_metadata_get(f, "step");
    if (!rank || atoi(rank) != r || !sum || !step)
      st = mlc_status_make(MLC_DATA_LOSS, "%s: not rank %d's shard of this checkpoint", file, r);
    XXH64_state_t *h = XXH64_createState();
    if (h) XXH64_reset(h, 0);
    for (uint32_t i = 0; i < s->plan->nparams && !st && h; i++) {
      const mlc_plan_param *p = &s->plan->params[i];
      if (!mlc_sess_in_file(p, ALL_ROLES)) continue;
      const mlc_safetensors_tensor *t;
      if ((st = mlc_safetensors_find(f, p->name, &t))) break;
      XXH64_update(h, t->data, t->nbytes);
      if (!p->sharded) { /* not sharded: every rank holds it whole */
        if (t->nbytes != param_bytes(s, i)) st = mlc_status_make(MLC_DATA_LOSS, "%s: tensor '%s' has the wrong size", file, p->name);
        else if (r == 0) memcpy(host_at(s, i), t->data, t->nbytes);
        continue;
      }
      uint64_t rows = mlc_plan_shard_rows((uint64_t)p->shape.dims[0], world), row = MLC_PLAN_SHARD_ROW * 4;
      uint64_t have = (uint64_t)s->pshape[i].dims[0], from = rows * (uint64_t)r;
      if (t->nbytes != rows * row) { st = mlc_status_make(MLC_DATA_LOSS, "%s: tensor '%s' has the wrong size", file, p->name); break; }
      if (from < have) memcpy(host_at(s, i) + from * row, t->data, (size_t)((from + rows > have ? have - from : rows) * row));
    }
    if (!st && h && strtoull(sum, NULL, 16) != XXH64_digest(h))
      st = mlc_status_make(MLC_DATA_LOSS, "%s: checksum mismatch: the checkpoint is corrupt", file);
    if (h) XXH64_freeState(h);
    nstep = strtoull(step ? step : "0", NULL, 10);
    mlc_safetensors_close(f);
    mlc_allocator_free(s->a, file);
  }
  if (!st) s->step = nstep;
  return st;
}

static mlc_status load_checkpoint(mlc_session *s, const char *path) {
  char *shard = NULL;
  int world = 0;
  MLC_RETURN_IF_ERROR(read_manifest(s, path, &shard, &world));
  mlc_status est = mlc_sess_ensure_state(s); /* a checkpoint carries the optimizer state */
  if (est) { mlc_allocator_free(s->a, shard); return mlc_status_annotate(est, "%s", path); }
  if (world) {
    s->host_stale = false;
    s->dev_stale = !host_memory(s);
    mlc_status st = load_gathered(s, shard, world);
    mlc_allocator_free(s->a, shard);
    return st;
  }
  if (!shard && s->comm->world > 1)
    return mlc_status_make(MLC_INVALID_ARGUMENT, "%s: a checkpoint of one rank, but this run has %d: start from its "
                           "weights (--weights) instead", path, s->comm->world);
  const char *file = shard ? shard : path;
  mlc_safetensors *f;
  mlc_status st = mlc_safetensors_open_file(file, s->a, &f);
  if (st) { mlc_allocator_free(s->a, shard); return st; }
  s->host_stale = false; /* every tensor is rewritten */
  s->dev_stale = !host_memory(s);
  const char *format = mlc_safetensors_metadata_get(f, "format"), *model = mlc_safetensors_metadata_get(f, "model");
  const char *step = mlc_safetensors_metadata_get(f, "step"), *sum = mlc_safetensors_metadata_get(f, "xxh64");
  const char *rank = mlc_safetensors_metadata_get(f, "rank");
  char *end = NULL;
  unsigned long long nstep = step ? strtoull(step, &end, 10) : 0, want = 0;
  if (!format || strcmp(format, "mlc-checkpoint") || !step || !sum || !end || *end)
    st = mlc_status_make(MLC_DATA_LOSS, "%s: not an mlc checkpoint (its metadata lacks format, step or xxh64)", file);
  else if (!model || strcmp(model, s->plan->model))
    st = mlc_status_make(MLC_INVALID_ARGUMENT, "%s: a checkpoint of model '%s', not '%s'", file, model ? model : "?",
                         s->plan->model);
  else if (shard && (!rank || atoi(rank) != s->comm->rank))
    st = mlc_status_make(MLC_DATA_LOSS, "%s: the shard of rank %s, not %d", file, rank ? rank : "?", s->comm->rank);
  else
    st = mlc_sess_load_tensors(s, f, file, ALL_ROLES);
  if (!st) {
    want = strtoull(sum, &end, 16);
    if (*end || params_checksum(s) != want)
      st = mlc_status_make(MLC_DATA_LOSS, "%s: checksum mismatch: the checkpoint is corrupt", file);
  }
  if (!st) s->step = nstep;
  if (!st) mlc_sess_pack_quantized(s);
  const char *sched = mlc_safetensors_metadata_get(f, "schedule_steps");
  if (!st && sched && !s->plan->schedule.steps) s->sched_steps = strtoull(sched, NULL, 10);
  mlc_safetensors_close(f);
  mlc_allocator_free(s->a, shard);
  return st;
}

mlc_status mlc_session_load_checkpoint(mlc_session *s, const char *path) {
  mlc_status st = load_checkpoint(s, path);
  if (!st) mlc_sess_given_loaded(s, UINT32_MAX); /* every weight, as a whole weights file */
  return st;
}

/* The buffer: the parameters' block, the state's block, the step count. */
uint64_t mlc_session_state_bytes(const mlc_session *s) { return s->params_bytes + s->state_bytes + sizeof s->step; }

mlc_status mlc_session_state_save(const mlc_session *s, void *buf, uint64_t bytes) {
  if (bytes != mlc_session_state_bytes(s))
    return mlc_status_make(MLC_INVALID_ARGUMENT, "the training state is %llu bytes, got a buffer of %llu",
                           (unsigned long long)mlc_session_state_bytes(s), (unsigned long long)bytes);
  MLC_RETURN_IF_ERROR(mlc_sess_pack_stale((mlc_session *)s)); /* the packed weights saved follow theirs */
  MLC_RETURN_IF_ERROR(mlc_sess_sync_host(s));
  uint8_t *b = buf;
  memcpy(b, s->params, s->params_bytes);
  if (s->state) memcpy(b + s->params_bytes, s->state, s->state_bytes);
  else memset(b + s->params_bytes, 0, s->state_bytes); /* not made yet: the zeros it starts from */
  memcpy(b + s->params_bytes + s->state_bytes, &s->step, sizeof s->step);
  return NULL;
}

mlc_status mlc_session_state_restore(mlc_session *s, const void *buf, uint64_t bytes) {
  if (bytes != mlc_session_state_bytes(s))
    return mlc_status_make(MLC_INVALID_ARGUMENT, "the training state is %llu bytes, got %llu",
                           (unsigned long long)mlc_session_state_bytes(s), (unsigned long long)bytes);
  MLC_RETURN_IF_ERROR(mlc_sess_ensure_state(s));
  const uint8_t *b = buf;
  memcpy(s->params, b, s->params_bytes);
  if (s->state_bytes) memcpy(s->state, b + s->params_bytes, s->state_bytes);
  memcpy(&s->step, b + s->params_bytes + s->state_bytes, sizeof s->step);
  s->host_stale = false;
  s->dev_stale = !host_memory(s);
  mlc_sess_pack_quantized(s); /* shadows saved by a session that had no state's block yet are zeros there */
  mlc_sess_given_loaded(s, UINT32_MAX);
  return NULL;
}
