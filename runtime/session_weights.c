/* A session's weights: drawn at random from the plan's initialisers
 * (mlc_session_init_params), loaded from safetensors (a file, or bytes in
 * memory) strictly, with messages that say how to fix a state dict saved
 * under another name, shape or tie, and saved as a torch state_dict
 * (mlc_session_save_weights, which `--export` writes).  The tensor loading
 * and saving here serve checkpoints too (session_checkpoint.c). */
#include "runtime/session_impl.h"

#include <math.h>
#include <string.h>

#include "runtime/cpu/convert.h"
#include "runtime/quant.h"
#include "runtime/safetensors.h"

/* splitmix64: a small, well-mixed generator; enough for initial weights. */
static uint64_t next_u64(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static double next_unit(uint64_t *state) { return (double)(next_u64(state) >> 11) * 0x1.0p-53; }

/* Makes the quantised weights (role 4) and the shadows (role 5) made from
 * f32 weight `param` (UINT32_MAX: every one), from it as it now is: after
 * weights are loaded, drawn or set (runtime/quant.h), and (shadows) when
 * the state's block is made.  A shadow is the weight rounded to bf16 or
 * f16 to nearest even, a NaN quieted, as the kernels' stores round: the
 * values the cast it replaces gave.  Whether there was any. */
bool mlc_sess_pack_from(mlc_session *s, uint32_t param) {
  bool any = false;
  for (uint32_t i = 0; i < s->plan->nparams; i++) {
    const mlc_plan_param *p = &s->plan->params[i];
    if (!follows_weight(p) || (param != UINT32_MAX && p->flat_offset != param) || (p->role == 5 && !s->state)) continue;
    const mlc_plan_param *w = &s->plan->params[p->flat_offset];
    const float *src = (const float *)host_at(s, (uint32_t)p->flat_offset);
    if (p->role == 4) {
      mlc_quant_pack(src, w->shape.dims[0], w->shape.dims[1], (int)p->a, (int)p->b, p->init, (int32_t *)host_at(s, i));
    } else {
      uint16_t *dst = (uint16_t *)host_at(s, i);
      uint64_t n = mlc_plan_shape_bytes(&p->shape) / 2;
      if (p->shape.dtype == 2)
        for (uint64_t k = 0; k < n; k++) dst[k] = mlc_f32_to_bf16(src[k]);
      else
        for (uint64_t k = 0; k < n; k++) dst[k] = mlc_f32_to_f16(src[k]);
    }
    any = true;
  }
  return any;
}

void mlc_sess_pack_quantized(mlc_session *s) {
  mlc_sess_pack_from(s, UINT32_MAX);
  memset(s->written, 0, s->plan->nparams);
  s->packed_stale = false;
}

mlc_status mlc_sess_pack_stale(mlc_session *s) {
  if (!s->packed_stale) return NULL;
  MLC_RETURN_IF_ERROR(mlc_sess_sync_host(s));
  for (uint32_t i = 0; i < s->plan->nparams; i++)
    if (s->written[i]) mlc_sess_pack_from(s, i), s->written[i] = 0;
  s->packed_stale = false;
  s->dev_stale = !host_memory(s);
  return NULL;
}

void mlc_session_init_params(mlc_session *s, uint64_t seed) {
  uint64_t rng = seed;
  s->host_stale = false; /* every byte is rewritten */
  s->dev_stale = !host_memory(s);
  /* Flat parameters and their state start at zero (padding included);
   * their weights are drawn below, in plan order, as they would be unsharded.
   * Optimizer state not yet made is zero when it is (mlc_sess_ensure_state), and its
   * init is zeros, which draws nothing from the RNG. */
  for (uint32_t i = 0; i < s->plan->nparams; i++)
    if (s->plan->params[i].sharded && (s->state || !is_state(s, i))) memset(host_at(s, i), 0, param_bytes(s, i));
  for (uint32_t i = 0; i < s->plan->nparams; i++) {
    const mlc_plan_param *p = &s->plan->params[i];
    if (p->role == 2 || follows_weight(p) || (in_state_block(s, i) && !s->state)) continue; /* packed weights, shadows: below */
    uint8_t *d = host_at(s, i);
    size_t esz = mlc_plan_shape_bytes(&(mlc_plan_shape){.dtype = p->shape.dtype});
    uint64_t n = mlc_plan_shape_bytes(&s->pshape[i]) / (esz ? esz : 1), lo = 0, hi = n;
    if (p->flat && !flat_part(s, i, &lo, &hi, &d)) lo = hi = n;
    for (uint64_t k = 0; k < n; k++) {
      double v = 0;
      switch (p->init) {
      case 1: v = 1; break;
      case 2: v = p->a + (p->b - p->a) * next_unit(&rng); break;
      case 3: { /* Box-Muller */
        double u1 = next_unit(&rng), u2 = next_unit(&rng);
        v = p->a + p->b * sqrt(-2 * log(u1 > 0 ? u1 : 0x1.0p-53)) * cos(6.283185307179586 * u2);
        break;
      }
      default: break;
      }
      if (k >= lo && k < hi) mlc_sess_store_scalar(d + (k - lo) * esz, p->shape.dtype, v);
    }
  }
  mlc_sess_given_reset(s); /* zeros: not their values */
  mlc_sess_pack_quantized(s);
}

static const struct { uint8_t dtype; mlc_safetensors_dtype st; } dtype_map[] = {
  {1, MLC_ST_F32}, {2, MLC_ST_BF16}, {3, MLC_ST_F16}, {4, MLC_ST_I32}, {5, MLC_ST_I64}, {6, MLC_ST_BOOL},
};

static mlc_safetensors_dtype to_st(uint8_t dt) {
  for (size_t i = 0; i < sizeof dtype_map / sizeof *dtype_map; i++)
    if (dtype_map[i].dtype == dt) return dtype_map[i].st;
  return MLC_ST_DTYPE_COUNT;
}


/* Which parameters a file of `role` holds: weights (a state_dict, sharded
 * weights included), or everything a checkpoint needs (a sharded weight is
 * in its flat parameter there). */
bool mlc_sess_in_file(const mlc_plan_param *p, int role) {
  return role == ALL_ROLES ? !p->flat && p->role != 3 && !follows_weight(p) : p->role == role; /* KV caches (3), packed weights
                                                                                                and shadows (4, 5): in neither */
}

/* Each tied name the file has must hold the same tensor as the other names
 * of its weight there, as torch's load_state_dict() leaves one tensor. */
static mlc_status check_ties(const mlc_session *s, mlc_safetensors *f, const char *path) {
  for (uint32_t k = 0; k < s->plan->nties; k++) {
    const mlc_plan_tie *tie = &s->plan->ties[k];
    const mlc_safetensors_tensor *a, *b;
    mlc_status st = mlc_safetensors_find(f, tie->name, &b);
    if (st) { mlc_status_free(st); continue; }
    const char *an = s->plan->params[tie->param].name;
    if ((st = mlc_safetensors_find(f, an, &a))) { /* its own name is absent: compare with an earlier tie */
      mlc_status_free(st);
      a = NULL;
      for (uint32_t j = 0; j < k && !a; j++) {
        if (s->plan->ties[j].param != tie->param) continue;
        if ((st = mlc_safetensors_find(f, s->plan->ties[j].name, &a))) {
          mlc_status_free(st);
          a = NULL;
        } else {
          an = s->plan->ties[j].name;
        }
      }
      if (!a) continue;
    }
    bool same = a->rank == b->rank && a->dtype == b->dtype && a->nbytes == b->nbytes;
    for (int d = 0; same && d < a->rank; d++) same = a->shape[d] == b->shape[d];
    if (!same || memcmp(a->data, b->data, a->nbytes))
      return mlc_status_make(MLC_INVALID_ARGUMENT, "%s: tensors '%s' and '%s' differ, but the model ties them (one shared "
                             "weight): give both the same values, or only one of the names", path, an, tie->name);
  }
  return NULL;
}

/* Whether some parameter of `role` is named `name` exactly. */
static bool model_has(const mlc_session *s, const char *name, int role) {
  for (uint32_t k = 0; k < s->plan->nparams; k++)
    if (mlc_sess_in_file(&s->plan->params[k], role) && !strcmp(s->plan->params[k].name, name)) return true;
  return false;
}

/* The message for a parameter the file lacks.  A state dict saved through
 * a wrapper has every name under a prefix (DDP's "module.", torch.compile's
 * "_orig_mod.", a training loop's "model."), or lacks the model's: where
 * the file has the name under a prefix, or a name the model has under one,
 * say which, and how to rename in Python. */
static mlc_status missing_tensor(const mlc_session *s, mlc_safetensors *f, const char *path, const mlc_plan_param *p,
                                 int role) {
  size_t n = strlen(p->name);
  for (size_t i = 0; i < mlc_safetensors_count(f); i++) {
    const char *name = mlc_safetensors_tensor_at(f, i)->name;
    size_t m = strlen(name);
    if (m > n && name[m - n - 1] == '.' && !strcmp(name + m - n, p->name))
      return mlc_status_make(MLC_NOT_FOUND, "%s: missing tensor '%s' (%s), which the model needs; the file has '%s': "
                             "its names start with '%.*s', which the model's do not; strip it in Python:\n"
                             "  state = {k.removeprefix(\"%.*s\"): v for k, v in state.items()}",
                             path, p->name, mlc_sess_dtype_names[p->shape.dtype], name, (int)(m - n), name, (int)(m - n), name);
    if (n > m && p->name[n - m - 1] == '.' && !strcmp(p->name + n - m, name) && !model_has(s, name, role))
      return mlc_status_make(MLC_NOT_FOUND, "%s: missing tensor '%s' (%s), which the model needs; the file has '%s': "
                             "the model's names start with '%.*s', which the file's do not; add it in Python:\n"
                             "  state = {\"%.*s\" + k: v for k, v in state.items()}",
                             path, p->name, mlc_sess_dtype_names[p->shape.dtype], name, (int)(n - m), p->name, (int)(n - m), p->name);
  }
  return mlc_status_make(MLC_NOT_FOUND, "%s: missing tensor '%s' (%s), which the model needs", path, p->name,
                         mlc_sess_dtype_names[p->shape.dtype]);
}

/* Copies the tensors of `role` (or all) from an open file, strictly: each
 * must be there with its dtype and shape, and nothing else may be. */
mlc_status mlc_sess_load_tensors(mlc_session *s, mlc_safetensors *f, const char *path, int role) {
  mlc_status st = NULL;
  for (uint32_t i = 0; i < s->plan->nparams && !st; i++) {
    const mlc_plan_param *p = &s->plan->params[i];
    if (!mlc_sess_in_file(p, role)) continue;
    const mlc_safetensors_tensor *t;
    if ((st = mlc_safetensors_find(f, p->name, &t))) {
      mlc_status_free(st);
      st = NULL;
      /* A shared weight may come under any of its names. */
      const char *other = NULL;
      for (uint32_t k = 0; role == ROLE_WEIGHT && k < s->plan->nties && !other; k++) {
        if (s->plan->ties[k].param != i) continue;
        if (!(st = mlc_safetensors_find(f, s->plan->ties[k].name, &t))) other = s->plan->ties[k].name;
        mlc_status_free(st);
        st = NULL;
      }
      if (!other) {
        st = missing_tensor(s, f, path, p, role);
        break;
      }
    }
    const mlc_plan_shape *ps = &s->pshape[i];
    bool same = t->rank == ps->rank;
    for (int d = 0; same && d < t->rank; d++) same = t->shape[d] == ps->dims[d];
    char want[128], got[128];
    uint64_t lo, hi;
    uint8_t *at;
    if (!same) {
      mlc_sess_shape_str(want, sizeof want, ps->rank, ps->dims);
      mlc_sess_shape_str(got, sizeof got, t->rank, t->shape);
      /* Hugging Face's GPT-2 keeps its projections as Conv1D weights, [in, out]. */
      if (t->rank == 2 && ps->rank == 2 && t->shape[0] == ps->dims[1] && t->shape[1] == ps->dims[0] && t->shape[0] != t->shape[1])
        st = mlc_status_make(MLC_INVALID_ARGUMENT, "%s: tensor '%s' has shape %s, the model needs %s: it is stored "
                             "transposed ([in, out], as Hugging Face's Conv1D keeps it; Linear keeps [out, in]); transpose "
                             "it in Python:\n  state[\"%s\"] = state[\"%s\"].t().contiguous()",
                             path, p->name, got, want, p->name, p->name);
      else
        st = mlc_status_make(MLC_INVALID_ARGUMENT, "%s: tensor '%s' has shape %s, the model needs %s", path, p->name, got, want);
    } else if (t->dtype != to_st(p->shape.dtype)) {
      st = mlc_status_make(MLC_INVALID_ARGUMENT, "%s: tensor '%s' is %s, the model needs %s", path, p->name,
                           mlc_safetensors_dtype_name(t->dtype), mlc_safetensors_dtype_name(to_st(p->shape.dtype)));
    } else if (!p->flat) {
      memcpy(host_at(s, i), t->data, t->nbytes); /* a checkpoint's state: the caller made it (mlc_sess_ensure_state) */
    } else if (flat_part(s, i, &lo, &hi, &at)) { /* this rank's part of a sharded weight */
      memcpy(at, (const uint8_t *)t->data + lo * 4, (hi - lo) * 4);
    }
  }
  for (size_t i = 0; i < mlc_safetensors_count(f) && !st; i++) {
    const char *name = mlc_safetensors_tensor_at(f, i)->name;
    bool known = false;
    for (uint32_t k = 0; k < s->plan->nparams && !known; k++)
      known = mlc_sess_in_file(&s->plan->params[k], role) && !strcmp(s->plan->params[k].name, name);
    for (uint32_t k = 0; role == ROLE_WEIGHT && k < s->plan->nties && !known; k++) known = !strcmp(s->plan->ties[k].name, name);
    if (!known) st = mlc_status_make(MLC_INVALID_ARGUMENT, "%s: unexpected tensor '%s': the model has no parameter of that name", path, name);
  }
  if (role == ROLE_WEIGHT && !st) st = check_ties(s, f, path);
  return st;
}

/* Loads weights from a file (path) or from the caller's bytes (data, size);
 * `label` starts every error message: the path, or "weights in memory". */
static mlc_status load_weights(mlc_session *s, const char *path, const void *data, size_t size, const char *label) {
  if (!path && !data)
    return mlc_status_make(MLC_INVALID_ARGUMENT, "%s: no data (a NULL pointer of %zu bytes)", label ? label : "weights", size);
  MLC_RETURN_IF_ERROR(mlc_sess_sync_host(s)); /* the optimizer state stays as it is */
  mlc_safetensors *f;
  if (path) MLC_RETURN_IF_ERROR(mlc_safetensors_open_file(path, s->a, &f));
  else MLC_RETURN_IF_ERROR(mlc_status_annotate(mlc_safetensors_open_memory(data, size, s->a, &f), "%s", label));
  s->dev_stale = !host_memory(s);
  mlc_status st = mlc_sess_load_tensors(s, f, label, ROLE_WEIGHT);
  mlc_safetensors_close(f);
  if (!st) mlc_sess_pack_quantized(s);
  if (!st) mlc_sess_given_loaded(s, UINT32_MAX); /* a strict load: every weight */
  return st;
}

mlc_status mlc_session_load_weights(mlc_session *s, const char *path) {
  return load_weights(s, path, NULL, 0, path);
}

mlc_status mlc_session_load_weights_memory(mlc_session *s, const void *data, size_t size) {
  return load_weights(s, NULL, data, size, "weights in memory");
}

mlc_status mlc_session_set_param(mlc_session *s, uint32_t param, const void *data, size_t bytes) {
  if (param >= s->plan->nparams || s->plan->params[param].role != 0)
    return mlc_status_make(MLC_INVALID_ARGUMENT, "parameter %u is not a model weight", param);
  const mlc_plan_param *p = &s->plan->params[param];
  if (bytes != mlc_plan_shape_bytes(&p->shape))
    return mlc_status_make(MLC_INVALID_ARGUMENT, "parameter %s: %zu bytes given, it has %llu", p->name, bytes,
                           (unsigned long long)mlc_plan_shape_bytes(&p->shape));
  MLC_RETURN_IF_ERROR(mlc_sess_sync_host(s));
  uint64_t lo = 0, hi = bytes / 4;
  uint8_t *at = host_at(s, param);
  mlc_sess_given_loaded(s, param);
  if (p->flat && !flat_part(s, param, &lo, &hi, &at)) return NULL; /* another rank holds all of it */
  if (p->flat) memcpy(at, (const uint8_t *)data + lo * 4, (hi - lo) * 4); /* an f32 weight's part (plan.c checks) */
  else memcpy(at, data, bytes);
  mlc_sess_pack_from(s, param); /* the packed forms of it (--quantize) follow it: they were packed from its old values */
  s->dev_stale = !host_memory(s);
  return NULL;
}

/* Writes the tensors of `role` (or all) with the given metadata.  Optimizer
 * state the session has not made (it never trained) is written as the zeros
 * it would start from, out of one zero block the size of its largest tensor,
 * which is freed again: saving does not make the session hold the state. */
mlc_status mlc_sess_save_tensors(const mlc_session *s, const char *path, int role, const mlc_safetensors_kv *meta,
                               size_t nmeta) {
  uint32_t n = 0;
  MLC_RETURN_IF_ERROR(mlc_sess_sync_host(s));
  uint64_t zero_bytes = 0;
  for (uint32_t i = 0; i < s->plan->nparams && !s->state; i++)
    if (mlc_sess_in_file(&s->plan->params[i], role) && is_state(s, i) && param_bytes(s, i) > zero_bytes) zero_bytes = param_bytes(s, i);
  uint8_t *zeros = zero_bytes ? mlc_allocator_alloc(s->a, zero_bytes) : NULL;
  if (zero_bytes && !zeros)
    return mlc_status_make(MLC_OUT_OF_MEMORY, "%s: out of memory for %llu bytes of zero optimizer state", path,
                           (unsigned long long)zero_bytes);
  if (zeros) memset(zeros, 0, zero_bytes);
  mlc_safetensors_entry *ents = mlc_allocator_alloc_array(s->a, s->plan->nparams + s->plan->nties + 1, sizeof *ents);
  if (!ents) {
    mlc_allocator_free(s->a, zeros);
    return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory");
  }
  mlc_status st = NULL;
  for (uint32_t i = 0; i < s->plan->nparams && !st; i++) {
    const mlc_plan_param *p = &s->plan->params[i];
    if (!mlc_sess_in_file(p, role)) continue;
    const uint8_t *data = is_state(s, i) && !s->state ? zeros : host_at(s, i);
    uint64_t lo, hi;
    uint8_t *at;
    if (p->flat) { /* whole only with one rank */
      if (s->comm->world > 1)
        st = mlc_status_make(MLC_UNIMPLEMENTED, "%s: the weights are sharded across %d ranks: save a checkpoint "
                             "(each rank writes its shard) and export it with `mlc export`", path, s->comm->world);
      else if (flat_part(s, i, &lo, &hi, &at))
        data = at;
    }
    ents[n++] = (mlc_safetensors_entry){p->name, to_st(p->shape.dtype), s->pshape[i].rank, s->pshape[i].dims, data};
    /* A shared weight under each of its names, as torch's state_dict(). */
    for (uint32_t k = 0; role == ROLE_WEIGHT && k < s->plan->nties; k++)
      if (s->plan->ties[k].param == i) {
        ents[n] = ents[n - 1];
        ents[n++].name = s->plan->ties[k].name;
      }
  }
  if (!st) st = mlc_safetensors_save(path, ents, n, meta, nmeta, s->a);
  mlc_allocator_free(s->a, ents);
  mlc_allocator_free(s->a, zeros);
  return st;
}

mlc_status mlc_session_save_weights(const mlc_session *s, const char *path) {
  mlc_safetensors_kv meta = {"format", "pt"};
  return mlc_sess_save_tensors(s, path, ROLE_WEIGHT, &meta, 1);
}
