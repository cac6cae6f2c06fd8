/* Sessions over any device behind runtime/device.h's vtable (CPU, CUDA,
 * Vulkan, Metal): parameters in one block, the optimizer state in another
 * made when a call first needs it, an arena per entry point made at its
 * first use, kernels resolved by name at creation, steps run in order on
 * the device, timed when profiling is on.
 *
 * This file is the core: create and destroy, the two blocks and keeping the
 * host's and the device's copies in step, entries and their arenas, inputs
 * (copied, or a caller's buffers bound in place of the arena for one run),
 * runs (collectives included), outputs.  Weights are in session_weights.c,
 * checkpoints in session_checkpoint.c, the profile and the trace in
 * session_profile.c; session_impl.h holds what they share. */
#include "runtime/session_impl.h"

#include <string.h>
#include <xxhash.h>

#include "runtime/cpu/convert.h"
#include "runtime/cpu/device.h"

static uint64_t align64(uint64_t x) { return (x + 63) & ~(uint64_t)63; }

/* Bytes of this rank's rows of a sharded [rows, 4096] value. */
static uint64_t shard_bytes(const mlc_session *s, const mlc_plan_shape *sh) {
  mlc_plan_shape r = *sh;
  r.dims[0] = (int64_t)mlc_plan_shard_rows((uint64_t)sh->dims[0], s->comm->world);
  return mlc_plan_shape_bytes(&r);
}

/* Frees whatever create managed to allocate. */
void mlc_session_destroy(mlc_session *s) {
  if (!s) return;
  if (s->entries) {
    for (uint32_t k = 0; k < s->plan->nentries; k++) {
      entry_state *es = &s->entries[k];
      if (es->args && es->e)
        for (uint32_t i = 0; i < es->e->nsteps; i++) mlc_allocator_free(s->a, es->args[i]);
      if (es->host && es->e)
        for (uint32_t i = 0; i < es->e->nvalues; i++) mlc_allocator_free(s->a, es->host[i]);
      mlc_allocator_free(s->a, es->args);
      mlc_allocator_free(s->a, es->signal);
      mlc_allocator_free(s->a, es->host);
      mlc_allocator_free(s->a, es->kern);
      mlc_allocator_free(s->a, es->seconds);
      mlc_allocator_free(s->a, es->start);
      mlc_allocator_free(s->a, es->last);
      if (es->label && es->e)
        for (uint32_t i = 0; i < es->e->nsteps; i++) mlc_allocator_free(s->a, (void *)es->label[i]);
      mlc_allocator_free(s->a, (void *)es->label);
      mlc_allocator_free(s->a, es->addr);
      mlc_allocator_free(s->a, es->in_place);
      mlc_allocator_free(s->a, es->moved);
      if (es->rec) s->dev->vt->record_free(s->dev, es->rec);
      if (s->dev && es->arena) s->dev->vt->free(s->dev, es->arena);
    }
  }
  mlc_allocator_free(s->a, s->entries);
  mlc_allocator_free(s->a, s->events);
  if (s->dev && s->sum_buf) s->dev->vt->free(s->dev, s->sum_buf);
  if (s->dev && s->dparams && !host_memory(s)) s->dev->vt->free(s->dev, s->dparams);
  if (s->dev && s->dstate && !host_memory(s)) s->dev->vt->free(s->dev, s->dstate);
  if (s->state) {
    if (s->dev && host_memory(s)) s->dev->vt->free(s->dev, (uint64_t)(uintptr_t)s->state);
    else mlc_allocator_free(s->a, s->state);
  }
  if (s->params) { /* the CPU device's memory, or the session's own host copy */
    if (s->dev && host_memory(s)) s->dev->vt->free(s->dev, (uint64_t)(uintptr_t)s->params);
    else mlc_allocator_free(s->a, s->params);
  }
  mlc_allocator_free(s->a, s->param_off);
  mlc_allocator_free(s->a, s->given_unset);
  mlc_allocator_free(s->a, s->written);
  mlc_allocator_free(s->a, s->pshape);
  if (s->own_comm) s->comm->vt->destroy(s->comm);
  if (s->dev) s->dev->vt->destroy(s->dev);
  mlc_allocator_free(s->a, s);
}

void mlc_sess_store_scalar(void *dst, uint8_t dtype, double v) {
  switch (dtype) {
  case 1: { float f = (float)v; memcpy(dst, &f, 4); break; }
  case 2: { uint16_t h = mlc_f32_to_bf16((float)v); memcpy(dst, &h, 2); break; }
  case 3: { uint16_t h = mlc_f32_to_f16((float)v); memcpy(dst, &h, 2); break; }
  case 4: { int32_t i = (int32_t)v; memcpy(dst, &i, 4); break; }
  case 5: { int64_t i = (int64_t)v; memcpy(dst, &i, 8); break; }
  default: { uint8_t b = v != 0; memcpy(dst, &b, 1); break; }
  }
}

const char *const mlc_sess_dtype_names[] = {"?", "f32", "bf16", "f16", "i32", "i64", "bool", "f8e4m3", "f8e5m2"};

void mlc_sess_shape_str(char *buf, size_t n, int rank, const int64_t *dims) {
  size_t k = (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < rank && k < n; i++) k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)dims[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
}

static mlc_status create_entry(mlc_session *s, entry_state *es) {
  const mlc_plan_entry *e = es->e;
  const mlc_plan *pl = s->plan;
  es->addr = mlc_allocator_alloc_array(s->a, e->nvalues + 1, sizeof *es->addr);
  es->host = mlc_allocator_alloc_array(s->a, e->nvalues + 1, sizeof *es->host);
  es->args = mlc_allocator_alloc_array(s->a, e->nsteps + 1, sizeof *es->args);
  es->kern = mlc_allocator_alloc_array(s->a, e->nsteps + 1, sizeof *es->kern);
  es->seconds = mlc_allocator_alloc_array(s->a, e->nsteps + 1, sizeof *es->seconds);
  es->start = mlc_allocator_alloc_array(s->a, e->nsteps + 1, sizeof *es->start);
  es->last = mlc_allocator_alloc_array(s->a, e->nsteps + 1, sizeof *es->last);
  es->label = mlc_allocator_alloc_array(s->a, e->nsteps + 1, sizeof *es->label);
  es->signal = mlc_allocator_alloc_array(s->a, e->nsteps + 1, sizeof *es->signal);
  es->in_place = mlc_allocator_alloc_array(s->a, e->nvalues + 1, sizeof *es->in_place);
  es->moved = mlc_allocator_alloc_array(s->a, e->nvalues + 1, sizeof *es->moved);
  if (es->signal) {
    memset(es->signal, 0, (e->nsteps + 1) * sizeof *es->signal);
    for (uint32_t i = 0; i < e->nsteps; i++)
      for (uint32_t w = 0; w < e->steps[i].nwait; w++) es->signal[e->steps[i].wait[w]] = true;
  }
  if (es->label) memset((void *)es->label, 0, (e->nsteps + 1) * sizeof *es->label);
  /* Zero the tables first: destroy frees whatever they hold. */
  if (es->args) memset(es->args, 0, (e->nsteps + 1) * sizeof *es->args);
  if (es->host) memset(es->host, 0, (e->nvalues + 1) * sizeof *es->host);
  if (!es->addr || !es->host || !es->args || !es->kern || !es->seconds || !es->start || !es->last || !es->label ||
      !es->signal || !es->in_place || !es->moved)
    return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory for entry %s", e->name);
  memset(es->in_place, 0, (e->nvalues + 1) * sizeof *es->in_place);
  memset(es->moved, 0, (e->nvalues + 1) * sizeof *es->moved);
  memset(es->seconds, 0, (e->nsteps + 1) * sizeof *es->seconds);
  memset(es->start, 0, (e->nsteps + 1) * sizeof *es->start);
  memset(es->last, 0, (e->nsteps + 1) * sizeof *es->last);
  mlc_status st;
  for (uint32_t i = 0; i < e->nsteps; i++) {
    const mlc_plan_step *stp = &e->steps[i];
    const char *sym = pl->kernels[stp->kernel];
    /* Native code (the CPU's, linked into this program) is found by its
     * launch's entry point, as the plan's dispatch record names it. */
    const mlc_plan_dispatch *ds = pl->dispatch ? &pl->dispatch[stp->kernel] : NULL;
    if (ds && ds->executable != MLC_PLAN_NO_EXECUTABLE &&
        !strcmp(pl->executables[ds->executable].format, MLC_PLAN_FORMAT_NATIVE)) {
      if (ds->nlaunch != 1)
        return mlc_status_make(MLC_DATA_LOSS, "corrupt plan: native kernel %s has %u launches, not one", sym, ds->nlaunch);
      sym = ds->launch[0].entry;
    }
    if (!strcmp(sym, MLC_PLAN_ALL_GATHER) || !strcmp(sym, MLC_PLAN_REDUCE_SCATTER) || !strcmp(sym, MLC_PLAN_ALL_REDUCE)) {
      es->kern[i] = NULL; /* a collective: the session runs it */
      if (stp->nargs != 2) return mlc_status_make(MLC_DATA_LOSS, "step %s of %s: a collective takes two values", stp->name, e->name);
    } else if ((st = s->dev->vt->resolve(s->dev, sym, &es->kern[i]))) {
      mlc_status r = mlc_status_make(MLC_NOT_FOUND, "step %s of %s: %s", stp->name, e->name, mlc_status_message(st));
      mlc_status_free(st);
      return r;
    }
    if (s->dev->vt->range_push) {
      size_t n = strlen(stp->scope) + strlen(stp->name) + 2;
      char *l = mlc_allocator_alloc(s->a, n);
      if (!l) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory for step labels");
      snprintf(l, n, "%s%s%s", stp->scope, *stp->scope ? " " : "", stp->name);
      es->label[i] = l;
    }
    es->args[i] = mlc_allocator_alloc_array(s->a, stp->nargs + 1, sizeof **es->args);
    if (!es->args[i]) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory for step arguments");
  }
  return NULL;
}

/* The optimizer state, made (zero, as a fresh optimizer's) at the first
 * call that needs it: the first use of an entry that updates it (train:
 * its input, run or output), loading a checkpoint, putting a training state
 * back, or param_data of a state tensor.  A session that only ever runs
 * forward never holds it.  When the memory is not there, nothing is kept:
 * the error (the device's code, MLC_OUT_OF_MEMORY on the CPU) says how much
 * was asked for, and the session goes on running forward as before. */
mlc_status mlc_sess_ensure_state(mlc_session *s) {
  if (s->state || !s->state_bytes) return NULL;
  bool shadows = false; /* made from the weights below: the host's copy of those brought up to date first */
  for (uint32_t i = 0; i < s->plan->nparams; i++) shadows |= s->plan->params[i].role == 5;
  if (shadows) MLC_RETURN_IF_ERROR(mlc_sess_sync_host(s));
  uint64_t n = s->state_bytes, dev = 0;
  uint8_t *host = NULL;
  mlc_status st = NULL;
  if (host_memory(s)) {
    if (!(st = s->dev->vt->alloc(s->dev, n, &dev))) host = (uint8_t *)(uintptr_t)dev;
  } else if (!(host = mlc_allocator_alloc(s->a, n))) {
    st = mlc_status_make(MLC_OUT_OF_MEMORY, "out of host memory");
  } else if ((st = s->dev->vt->alloc(s->dev, n, &dev))) {
    mlc_allocator_free(s->a, host);
    host = NULL;
  }
  if (st) {
    mlc_status r = mlc_status_make(mlc_status_code(st), "the optimizer state (%llu bytes): %s", (unsigned long long)n,
                                   mlc_status_message(st));
    mlc_status_free(st);
    return r;
  }
  memset(host, 0, n); /* the device's block comes zeroed (device.h) */
  s->state = host;
  s->dstate = dev;
  /* The weights' shadows, made from the weights as they are (the host's copy, brought up to date above); the
   * device's block takes them at the next run. */
  if (shadows) {
    mlc_sess_pack_from(s, UINT32_MAX);
    s->dev_stale = !host_memory(s);
  }
  return NULL;
}

/* The entry's arena, made at its first use (an input, a run, an output) and
 * kept until the session ends: a session that only trains never holds the
 * forward's arena, so what it holds is what `mlc compile --stats` plans for
 * the train entry (parameters, optimizer state, that arena).  Writes the
 * constants and fills in every address. */
static mlc_status bind_entry(mlc_session *s, entry_state *es) {
  if (es->bound) return NULL;
  const mlc_plan_entry *e = es->e;
  bool uses_state = false; /* the train entry: it updates the optimizer state */
  for (uint32_t i = 0; i < e->nvalues && !uses_state; i++)
    uses_state = e->values[i].param != MLC_PLAN_NO_PARAM && in_state_block(s, e->values[i].param);
  if (uses_state) MLC_RETURN_IF_ERROR(mlc_sess_ensure_state(s));
  mlc_status st = es->arena ? NULL : s->dev->vt->alloc(s->dev, e->arena_bytes ? e->arena_bytes : 1, &es->arena);
  if (st) {
    mlc_status r = mlc_status_make(mlc_status_code(st), "the arena of entry %s (%llu bytes): %s", e->name,
                                   (unsigned long long)e->arena_bytes, mlc_status_message(st));
    mlc_status_free(st);
    return r;
  }
  for (uint32_t i = 0; i < e->nvalues; i++) {
    const mlc_plan_value *v = &e->values[i];
    es->addr[i] = v->param != MLC_PLAN_NO_PARAM ? dev_at(s, v->param) : es->arena + (uint64_t)v->offset;
    if (v->rank_slice) { /* this rank's rows of the buffer there */
      uint64_t bytes = shard_bytes(s, &v->shape), end = (uint64_t)v->offset + bytes * (uint64_t)(s->comm->rank + 1);
      if (end > e->arena_bytes)
        return mlc_status_make(MLC_INVALID_ARGUMENT, "entry %s: rank %d's rows of a sharded value lie outside the arena "
                               "(%d ranks; this artifact supports up to 256)", e->name, s->comm->rank, s->comm->world);
      es->addr[i] += bytes * (uint64_t)s->comm->rank;
    }
    if (v->is_const) {
      uint8_t tmp[8];
      mlc_sess_store_scalar(tmp, v->shape.dtype, v->value);
      MLC_RETURN_IF_ERROR(s->dev->vt->write(s->dev, es->addr[i], tmp, mlc_plan_shape_bytes(&v->shape)));
    }
  }
  for (uint32_t i = 0; i < e->nsteps; i++)
    for (uint32_t j = 0; j < e->steps[i].nargs; j++) es->args[i][j] = es->addr[e->steps[i].args[j]];
  es->bound = true;
  return NULL;
}

mlc_status mlc_session_create(const mlc_plan *plan, const mlc_session_options *opt, mlc_session **out_session) {
  *out_session = NULL;
  mlc_allocator a = opt->allocator.alloc ? opt->allocator : mlc_allocator_default();
  mlc_session *s = mlc_allocator_alloc(a, sizeof *s);
  if (!s) {
    if (opt->device) opt->device->vt->destroy(opt->device);
    return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory for a session");
  }
  memset(s, 0, sizeof *s);
  s->plan = plan;
  s->sched_steps = plan->schedule.steps;
  s->a = a;
  s->profile = opt->profile;
  mlc_status st = NULL;
  mlc_cpu_code cpu = {opt->lookup, opt->lookup_ctx, opt->threads};
  mlc_device_options dopt = {.allocator = a, .code_kind = MLC_CODE_CPU, .code = &cpu};
  if (opt->device) s->dev = opt->device;
  else if ((st = mlc_device_create("cpu", 0, &dopt, &s->dev))) {
    mlc_session_destroy(s);
    return st;
  }
  s->param_off = mlc_allocator_alloc_array(a, plan->nparams + 1, sizeof *s->param_off);
  s->given_unset = mlc_allocator_alloc(a, plan->nparams + 1);
  s->written = mlc_allocator_alloc(a, plan->nparams + 1);
  if (!s->param_off || !s->given_unset || !s->written) { mlc_session_destroy(s); return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory"); }
  memset(s->written, 0, plan->nparams + 1);
  mlc_sess_given_reset(s);
  bool sharded = false;
  for (uint32_t i = 0; i < plan->nparams; i++) sharded |= plan->params[i].sharded;
  if (opt->comm) s->comm = opt->comm;
  else if (sharded && !host_memory(s))
    st = mlc_status_make(MLC_INVALID_ARGUMENT, "a sharded (fsdp) model on %s needs a communicator (--target cuda-nccl)",
                         s->dev->vt->name);
  else if (!(st = mlc_comm_local_create(a, &s->comm)))
    s->own_comm = true;
  if (!st && opt->comm && opt->comm->host_memory != host_memory(s))
    st = mlc_status_make(MLC_INVALID_ARGUMENT, "the %s communicator cannot reach %s memory", opt->comm->vt->name, s->dev->vt->name);
  s->pshape = mlc_allocator_alloc_array(a, plan->nparams + 1, sizeof *s->pshape);
  if (!st && !s->pshape) st = mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory");
  if (st) { mlc_session_destroy(s); return st; }
  uint64_t total = 0, state = 0;
  for (uint32_t i = 0; i < plan->nparams; i++) {
    const mlc_plan_param *p = &plan->params[i];
    uint64_t *end = in_state_block(s, i) ? &state : &total;
    s->pshape[i] = p->shape;
    if (p->sharded) s->pshape[i].dims[0] = (int64_t)mlc_plan_shard_rows((uint64_t)p->shape.dims[0], s->comm->world);
    s->param_off[i] = *end;
    if (!p->flat) *end = align64(*end + mlc_plan_shape_bytes(&s->pshape[i]));
  }
  s->params_bytes = total;
  s->state_bytes = state; /* made later, by mlc_sess_ensure_state */
  /* The host block comes from the CPU device's allocator or the session's own. */
  uint64_t host = 0;
  if (host_memory(s)) {
    st = s->dev->vt->alloc(s->dev, total ? total : 1, &host);
    s->params = (uint8_t *)(uintptr_t)host;
    s->dparams = host;
    if (!st) memset(s->params, 0, total); /* KV caches start at zero, whatever is loaded later */
  } else {
    s->params = mlc_allocator_alloc(a, total ? total : 1);
    if (!s->params) st = mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory for %llu bytes of parameters", (unsigned long long)total);
    else memset(s->params, 0, total);
    if (!st) st = s->dev->vt->alloc(s->dev, total ? total : 1, &s->dparams);
  }
  if (st) {
    if (!host_memory(s)) { mlc_allocator_free(a, s->params); s->params = NULL; }
    mlc_session_destroy(s);
    return st;
  }
  s->entries = mlc_allocator_alloc_array(a, plan->nentries + 1, sizeof *s->entries);
  if (!s->entries) {
    mlc_session_destroy(s);
    return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory");
  }
  memset(s->entries, 0, (plan->nentries + 1) * sizeof *s->entries);
  for (uint32_t k = 0; k < plan->nentries; k++) s->entries[k].e = &plan->entries[k];
  for (uint32_t k = 0; k < plan->nentries; k++)
    if ((st = create_entry(s, &s->entries[k]))) {
      mlc_session_destroy(s);
      return st;
    }
  *out_session = s;
  return NULL;
}

const mlc_plan *mlc_session_plan(const mlc_session *s) { return s->plan; }

/* Brings the host copy of the parameters (and the state, if held) up to date. */
mlc_status mlc_sess_sync_host(const mlc_session *cs) {
  mlc_session *s = (mlc_session *)cs;
  if (!s->host_stale) return NULL;
  MLC_RETURN_IF_ERROR(s->dev->vt->read(s->dev, s->params, s->dparams, s->params_bytes));
  if (s->state) MLC_RETURN_IF_ERROR(s->dev->vt->read(s->dev, s->state, s->dstate, s->state_bytes));
  s->host_stale = false;
  return NULL;
}

/* The device's copy of the parameters (and the state, if held) brought up to date. */
static mlc_status sync_device(mlc_session *s) {
  if (!s->dev_stale) return NULL;
  MLC_RETURN_IF_ERROR(s->dev->vt->write(s->dev, s->dparams, s->params, s->params_bytes));
  if (s->state) MLC_RETURN_IF_ERROR(s->dev->vt->write(s->dev, s->dstate, s->state, s->state_bytes));
  s->dev_stale = false;
  return NULL;
}

void *mlc_session_param_data(mlc_session *s, uint32_t param) {
  mlc_status st = mlc_sess_sync_host(s);
  if (!st && in_state_block(s, param)) st = mlc_sess_ensure_state(s); /* the caller may read or write it */
  if (st) { mlc_status_free(st); return NULL; }
  uint64_t lo, hi;
  uint8_t *at = host_at(s, param);
  if (s->plan->params[param].flat && (s->comm->world > 1 || !flat_part(s, param, &lo, &hi, &at))) return NULL;
  s->dev_stale = !host_memory(s); /* the caller may write */
  for (uint32_t i = 0; i < s->plan->nparams && !s->written[param]; i++) /* and packed weights and shadows follow this one */
    s->written[param] = follows_weight(&s->plan->params[i]) && s->plan->params[i].flat_offset == param;
  s->packed_stale |= s->written[param];
  return at;
}

#define SUM_MAX 8 /* values per mlc_session_all_sum */

mlc_status mlc_session_all_sum(mlc_session *s, double *v, int n) {
  if (s->comm->world == 1) return NULL;
  if (n < 1 || n > SUM_MAX) return mlc_status_make(MLC_INVALID_ARGUMENT, "all_sum of %d values (1 to %d)", n, SUM_MAX);
  if (s->comm->host_memory) return s->comm->vt->all_reduce_host(s->comm, v, n);
  /* A device communicator: every rank's values gathered through device memory. */
  uint64_t bytes = (uint64_t)n * sizeof *v, world = (uint64_t)s->comm->world;
  if (!s->sum_buf) MLC_RETURN_IF_ERROR(s->dev->vt->alloc(s->dev, SUM_MAX * 8 * (world + 1), &s->sum_buf));
  MLC_RETURN_IF_ERROR(s->dev->vt->write(s->dev, s->sum_buf, v, bytes));
  void *stream = s->dev->vt->stream ? s->dev->vt->stream(s->dev) : NULL;
  MLC_RETURN_IF_ERROR(s->comm->vt->all_gather(s->comm, s->sum_buf, s->sum_buf + SUM_MAX * 8, bytes, stream));
  double all[SUM_MAX * 257];
  if (world > 256) return mlc_status_make(MLC_INVALID_ARGUMENT, "more than 256 ranks");
  mlc_comm_busy(s->comm, true);
  mlc_status st = s->dev->vt->read(s->dev, all, s->sum_buf + SUM_MAX * 8, bytes * world);
  mlc_comm_busy(s->comm, false);
  if (st) return st;
  for (int i = 0; i < n; i++) {
    v[i] = 0;
    for (uint64_t r = 0; r < world; r++) v[i] += all[r * (uint64_t)n + (uint64_t)i];
  }
  return NULL;
}

int mlc_session_rank(const mlc_session *s) { return s->comm->rank; }
int mlc_session_world(const mlc_session *s) { return s->comm->world; }
mlc_comm *mlc_session_comm(const mlc_session *s) { return s->comm; }

uint64_t mlc_session_step(const mlc_session *s) { return s->step; }

void mlc_session_set_schedule_steps(mlc_session *s, uint64_t steps) {
  s->sched_steps = s->plan->schedule.steps ? s->plan->schedule.steps : steps;
}

uint64_t mlc_session_schedule_steps(const mlc_session *s) { return s->sched_steps; }

double mlc_session_lr(const mlc_session *s) { return mlc_plan_lr(&s->plan->schedule, s->step, s->sched_steps); }

mlc_status mlc_sess_find_entry(const mlc_session *s, const char *name, entry_state **out) {
  *out = NULL;
  for (uint32_t k = 0; k < s->plan->nentries; k++)
    if (!strcmp(s->plan->entries[k].name, name)) {
      *out = &s->entries[k];
      return NULL;
    }
  return mlc_status_make(MLC_NOT_FOUND, "the model has no entry point '%s'", name);
}

/* mlc_sess_find_entry, with its arena made (bind_entry). */
static mlc_status find_bound_entry(const mlc_session *s, const char *name, entry_state **out) {
  MLC_RETURN_IF_ERROR(mlc_sess_find_entry(s, name, out));
  return bind_entry((mlc_session *)s, *out);
}

/* ---- caller's buffers in place of the arena ------------------------------
 * A binding moves a root (a value with storage of its own: the plan's
 * view_of) and every view of it to the caller's buffer, by patching the
 * step arguments that name them; values that only reuse the root's bytes at
 * other times keep the arena's.  unbind puts the arena's addresses back. */

/* The value whose storage v is: v, or the root it views. */
static uint32_t root_of(const mlc_plan_entry *e, uint32_t v) {
  return e->values[v].view_of == MLC_PLAN_NO_VALUE ? v : e->values[v].view_of;
}

/* Points every step argument in root r's storage at `to`, at the same
 * distance from it as in the arena (0: back to the arena). */
static void patch(entry_state *es, uint32_t r, uint64_t to) {
  const mlc_plan_entry *e = es->e;
  for (uint32_t i = 0; i < e->nsteps; i++)
    for (uint32_t j = 0; j < e->steps[i].nargs; j++) {
      uint32_t v = e->steps[i].args[j];
      if (root_of(e, v) == r) es->args[i][j] = to ? to + (es->addr[v] - es->addr[r]) : es->addr[v];
    }
  if (to && !es->in_place[r]) es->nin_place++;
  else if (!to && es->in_place[r]) es->nin_place--;
  es->in_place[r] = to;
}

/* Every binding of the entry undone. */
static void unbind(entry_state *es) {
  for (uint32_t r = 0; r < es->e->nvalues && es->nin_place; r++)
    if (es->in_place[r]) patch(es, r, 0);
}

/* Where value v's bytes are after the last run: the arena's, or a caller's
 * buffer that run wrote in place. */
static uint64_t result_addr(const entry_state *es, uint32_t v) {
  uint32_t r = root_of(es->e, v);
  return es->any_moved && es->moved[r] ? es->moved[r] + (es->addr[v] - es->addr[r]) : es->addr[v];
}

static bool runtime_input(const char *name) {
  return !strcmp(name, "opt.step") || !strcmp(name, "opt.lr") || !strcmp(name, "opt.world");
}

/* Whether root r is the storage of one of the entry's inputs (or outputs). */
static bool io_root(const mlc_plan_entry *e, bool input, uint32_t r) {
  for (uint32_t i = 0; i < (input ? e->ninputs : e->noutputs); i++)
    if (root_of(e, input ? e->inputs[i].value : e->outputs[i].value) == r) return true;
  return false;
}

/* Why value v, an input or output called `name`, cannot have its root
 * bound to a caller's buffer of `bytes` at `data`; NULL if it can. */
static const char *bind_refusal(const mlc_session *s, const entry_state *es, bool input, const char *name, uint32_t v,
                                uint64_t data, uint64_t bytes, bool device) {
  const mlc_plan_entry *e = es->e;
  uint32_t r = root_of(e, v);
  const mlc_plan_value *rv = &e->values[r];
  if (!device && !s->dev->vt->host_pointers) return "this device's kernels take only its own memory";
  if (device && !s->dev->vt->bind_external) return "this device's kernels take only the session's own allocations";
  if (rv->param != MLC_PLAN_NO_PARAM) return "it is a parameter, or a view of one";
  if (rv->is_const) return "it is a constant, which the session writes once";
  if (input && runtime_input(name)) return "the runtime writes it before each run";
  if (es->addr[v] != es->addr[r] || mlc_plan_shape_bytes(&rv->shape) != bytes) return "it is part of a larger value";
  if (io_root(e, !input, r)) return input ? "it is also an output of the entry" : "it is also an input of the entry";
  for (uint32_t i = 0; i < e->nsteps; i++) {
    if (es->kern[i]) continue; /* a kernel's step; collectives have none */
    for (uint32_t j = 0; j < e->steps[i].nargs; j++)
      if (root_of(e, e->steps[i].args[j]) == r) return "a collective, which runs on the arena's addresses, takes it";
  }
  /* A kernel may assume that what it writes overlaps nothing it reads: the
   * buffer of an output overlaps no other bound one (inputs, only read, may
   * share theirs). */
  for (uint32_t o = 0; o < e->nvalues && es->nin_place; o++) {
    uint64_t at = es->in_place[o];
    if (o == r || !at || at >= data + bytes || data >= at + mlc_plan_shape_bytes(&e->values[o].shape)) continue;
    if (!input || io_root(e, false, o)) return "its buffer overlaps another one bound to the entry";
  }
  return NULL;
}

/* mlc_session_bind_input and bind_output (device false: host memory at
 * `at`), and the binding of a tensor in MLC_MEMORY_DEVICE_IN_PLACE memory
 * (device true: memory of the session's device, its GPU `ordinal`). */
static mlc_status bind(mlc_session *s, const char *entry, bool input, const char *name, uint64_t at, size_t bytes,
                       bool device, int ordinal) {
  entry_state *es;
  MLC_RETURN_IF_ERROR(find_bound_entry(s, entry, &es));
  const mlc_plan_entry *e = es->e;
  const char *kind = input ? "input" : "output";
  uint32_t n = input ? e->ninputs : e->noutputs, v = UINT32_MAX;
  for (uint32_t i = 0; i < n && v == UINT32_MAX; i++)
    if (!strcmp(input ? e->inputs[i].name : e->outputs[i].name, name)) v = input ? e->inputs[i].value : e->outputs[i].value;
  if (v == UINT32_MAX) return mlc_status_make(MLC_NOT_FOUND, "entry %s has no %s '%s'", entry, kind, name);
  const mlc_plan_value *pv = &e->values[v];
  uint64_t want = mlc_plan_shape_bytes(&pv->shape);
  if (bytes != want) {
    char sh[128];
    mlc_sess_shape_str(sh, sizeof sh, pv->shape.rank, pv->shape.dims);
    return mlc_status_make(MLC_INVALID_ARGUMENT, "cannot bind %s '%s' of %s: it is %s%s (%llu bytes), got %zu bytes", kind,
                           name, entry, mlc_sess_dtype_names[pv->shape.dtype], sh, (unsigned long long)want, bytes);
  }
  if (!at || at % 16)
    return mlc_status_make(MLC_INVALID_ARGUMENT, "cannot bind %s '%s' of %s: the buffer at 0x%llx is not 16-byte aligned, "
                           "as the kernels' vector loads and tensor maps need (copy it instead)", kind, name, entry,
                           (unsigned long long)at);
  const char *why = bind_refusal(s, es, input, name, v, at, want, device);
  if (why)
    return mlc_status_make(MLC_UNIMPLEMENTED, "cannot bind %s '%s' of %s on the %s: %s (copy it instead)", kind, name, entry,
                           s->dev->vt->name, why);
  if (device) {
    mlc_status st = s->dev->vt->bind_external(s->dev, at, want, ordinal);
    if (st) {
      mlc_status r = mlc_status_make(mlc_status_code(st), "cannot bind %s '%s' of %s, in device memory: %s", kind, name,
                                     entry, mlc_status_message(st));
      mlc_status_free(st);
      return r;
    }
  }
  patch(es, root_of(e, v), at);
  return NULL;
}

mlc_status mlc_session_bind_input(mlc_session *s, const char *entry, const char *name, const void *data, size_t bytes) {
  return bind(s, entry, true, name, (uint64_t)(uintptr_t)data, bytes, false, 0);
}

mlc_status mlc_session_bind_output(mlc_session *s, const char *entry, const char *name, void *data, size_t bytes) {
  return bind(s, entry, false, name, (uint64_t)(uintptr_t)data, bytes, false, 0);
}

bool mlc_session_is_bound(const mlc_session *s, const char *entry, bool input, const char *name) {
  entry_state *es;
  mlc_status st = mlc_sess_find_entry(s, entry, &es);
  if (st) {
    mlc_status_free(st);
    return false;
  }
  const mlc_plan_entry *e = es->e;
  for (uint32_t i = 0; i < (input ? e->ninputs : e->noutputs); i++)
    if (!strcmp(input ? e->inputs[i].name : e->outputs[i].name, name))
      return es->in_place && es->in_place[root_of(e, input ? e->inputs[i].value : e->outputs[i].value)] != 0;
  return false;
}

/* A tensor the call may use in place (MLC_MEMORY_HOST_IN_PLACE or
 * DEVICE_IN_PLACE), bound as the entry's input or output `name` of `bytes`;
 * NULL if bound. */
static mlc_status bind_tensor(mlc_session *s, const char *entry, bool input, const char *name, const mlc_tensor *t,
                              uint64_t bytes) {
  bool device = t->memory == MLC_MEMORY_DEVICE_IN_PLACE;
  return bind(s, entry, input, name, (uint64_t)(uintptr_t)t->data, bytes, device, device ? t->device : 0);
}

static bool in_place(const mlc_tensor *t) {
  return t->memory == MLC_MEMORY_HOST_IN_PLACE || t->memory == MLC_MEMORY_DEVICE_IN_PLACE;
}

static bool device_memory(const mlc_tensor *t) {
  return t->memory == MLC_MEMORY_DEVICE || t->memory == MLC_MEMORY_DEVICE_IN_PLACE;
}

mlc_status mlc_session_unbind(mlc_session *s, const char *entry) {
  entry_state *es;
  MLC_RETURN_IF_ERROR(mlc_sess_find_entry(s, entry, &es));
  if (es->bound) unbind(es);
  return NULL;
}

/* The entry and the value of its input `name`, with any binding of the
 * value's storage undone: what a copy into the arena needs. */
static mlc_status input_for_copy(mlc_session *s, const char *entry, const char *name, entry_state **out_es,
                                  uint32_t *out_v) {
  MLC_RETURN_IF_ERROR(find_bound_entry(s, entry, out_es));
  entry_state *es = *out_es;
  for (uint32_t i = 0; i < es->e->ninputs; i++) {
    if (strcmp(es->e->inputs[i].name, name)) continue;
    *out_v = es->e->inputs[i].value;
    uint32_t r = root_of(es->e, *out_v);
    if (es->in_place[r]) patch(es, r, 0);
    return NULL;
  }
  return mlc_status_make(MLC_NOT_FOUND, "entry %s has no input '%s'", entry, name);
}

mlc_status mlc_session_set_input(mlc_session *s, const char *entry, const char *name, const void *data, size_t bytes) {
  entry_state *es;
  uint32_t iv;
  MLC_RETURN_IF_ERROR(input_for_copy(s, entry, name, &es, &iv));
  const mlc_plan_value *v = &es->e->values[iv];
  uint64_t want = mlc_plan_shape_bytes(&v->shape);
  if (bytes != want) {
    char sh[128];
    mlc_sess_shape_str(sh, sizeof sh, v->shape.rank, v->shape.dims);
    return mlc_status_make(MLC_INVALID_ARGUMENT, "input '%s' of %s is %s%s (%llu bytes), got %zu bytes", name, entry,
                           mlc_sess_dtype_names[v->shape.dtype], sh, (unsigned long long)want, bytes);
  }
  return s->dev->vt->write(s->dev, es->addr[iv], data, bytes);
}

/* A caller's buffer in the device's memory (mlc_tensor's MLC_MEMORY_DEVICE),
 * `bytes` of it: checked by the device, then copied device to device (copy
 * false: checked only). */
static mlc_status external(const mlc_session *s, const char *entry, const char *kind, const char *name,
                           const mlc_tensor *t, uint64_t addr, uint64_t bytes, bool in, bool copy) {
  const mlc_device_vt *vt = s->dev->vt;
  if (!vt->check_external || !vt->copy_external)
    return mlc_status_make(MLC_INVALID_ARGUMENT,
                           "%s '%s' of %s is in device memory (device %d), but the model runs on the %s, which takes "
                           "%s in host memory",
                           kind, name, entry, t->device, vt->name, vt->host_memory ? "tensors" : "a caller's tensors");
  uint64_t ext = (uint64_t)(uintptr_t)t->data;
  mlc_status st = vt->check_external(s->dev, ext, bytes, t->device);
  if (!st && copy) st = vt->copy_external(s->dev, addr, ext, bytes, in);
  if (!st) return NULL;
  mlc_status r = mlc_status_make(mlc_status_code(st), "%s '%s' of %s, in device memory: %s", kind, name, entry,
                                 mlc_status_message(st));
  mlc_status_free(st);
  return r;
}

/* The entry's input or output `name`: its arena address and bytes. */
static mlc_status find_value(const mlc_session *s, const char *entry, bool input, const char *name, uint64_t *addr,
                             uint64_t *bytes) {
  entry_state *es;
  MLC_RETURN_IF_ERROR(find_bound_entry(s, entry, &es));
  uint32_t n = input ? es->e->ninputs : es->e->noutputs;
  for (uint32_t i = 0; i < n; i++) {
    const char *vn = input ? es->e->inputs[i].name : es->e->outputs[i].name;
    uint32_t v = input ? es->e->inputs[i].value : es->e->outputs[i].value;
    if (strcmp(vn, name)) continue;
    *addr = input ? es->addr[v] : result_addr(es, v);
    *bytes = mlc_plan_shape_bytes(&es->e->values[v].shape);
    return NULL;
  }
  return mlc_status_make(MLC_NOT_FOUND, "entry %s has no %s '%s'", entry, input ? "input" : "output", name);
}

/* mlc_session_check_tensor without binding anything. */
static mlc_status check_tensor(const mlc_session *s, const char *entry, bool input, const char *name, const mlc_tensor *t) {
  uint64_t addr = 0, want = 0;
  MLC_RETURN_IF_ERROR(find_value(s, entry, input, name, &addr, &want));
  const char *kind = input ? "input" : "output";
  if (t->bytes < want)
    return mlc_status_make(MLC_INVALID_ARGUMENT, "%s '%s' of %s is %llu bytes, got a buffer of %zu bytes", kind, name,
                           entry, (unsigned long long)want, t->bytes);
  return !device_memory(t) ? NULL : external(s, entry, kind, name, t, addr, want, input, false);
}

mlc_status mlc_session_check_tensor(const mlc_session *s, const char *entry, bool input, const char *name,
                                    const mlc_tensor *t) {
  MLC_RETURN_IF_ERROR(check_tensor(s, entry, input, name, t));
  if (input || !in_place(t)) return NULL;
  uint64_t addr = 0, want = 0;
  MLC_RETURN_IF_ERROR(find_value(s, entry, false, name, &addr, &want));
  /* Where it cannot be bound, the run writes the arena and output_tensor copies. */
  mlc_status_free(bind_tensor((mlc_session *)s, entry, false, name, t, want));
  return NULL;
}

mlc_status mlc_session_set_input_tensor(mlc_session *s, const char *entry, const char *name, const mlc_tensor *t) {
  uint64_t addr = 0, want = 0;
  MLC_RETURN_IF_ERROR(check_tensor(s, entry, true, name, t));
  MLC_RETURN_IF_ERROR(find_value(s, entry, true, name, &addr, &want));
  if (in_place(t)) {
    mlc_status st = bind_tensor(s, entry, true, name, t, want);
    if (!st) return NULL;
    mlc_status_free(st); /* copied instead, below */
  }
  entry_state *es;
  uint32_t v;
  MLC_RETURN_IF_ERROR(input_for_copy(s, entry, name, &es, &v)); /* the arena's again, if bound before */
  if (!device_memory(t)) return s->dev->vt->write(s->dev, es->addr[v], t->data, want);
  return external(s, entry, "input", name, t, addr, want, true, true);
}

mlc_status mlc_session_output_tensor(const mlc_session *s, const char *entry, const char *name, const mlc_tensor *t) {
  uint64_t addr = 0, want = 0;
  MLC_RETURN_IF_ERROR(check_tensor(s, entry, false, name, t));
  MLC_RETURN_IF_ERROR(find_value(s, entry, false, name, &addr, &want));
  if (device_memory(t)) /* unless the run wrote it there, bound */
    return want && t->data == (void *)(uintptr_t)addr ? NULL : external(s, entry, "output", name, t, addr, want, false, true);
  if (host_memory(s)) {
    if (want && t->data != (void *)(uintptr_t)addr) /* else the run wrote it there, bound */
      memcpy(t->data, (const void *)(uintptr_t)addr, want);
    return NULL;
  }
  return s->dev->vt->read(s->dev, t->data, addr, want);
}

/* Appends a trace event; false when out of memory. */
static bool record_event(mlc_session *s, uint32_t entry, uint32_t step, double t0, double dt) {
  if (s->nevents == s->cap_events) {
    size_t cap = s->cap_events ? 2 * s->cap_events : 4096;
    trace_event *ev = mlc_allocator_alloc_array(s->a, cap, sizeof *ev);
    if (!ev) return false;
    if (s->nevents) memcpy(ev, s->events, s->nevents * sizeof *ev);
    mlc_allocator_free(s->a, s->events);
    s->events = ev;
    s->cap_events = cap;
  }
  s->events[s->nevents++] = (trace_event){entry, step, t0, dt};
  return true;
}

/* A collective step: all_gather(shard, flat), reduce_scatter(flat, rank
 * slice) or all_reduce(x, sum of every rank's x). */
static mlc_status collective(mlc_session *s, entry_state *es, uint32_t i) {
  const mlc_plan_entry *e = es->e;
  const mlc_plan_step *st = &e->steps[i];
  const mlc_plan_value *in = &e->values[st->args[0]], *out = &e->values[st->args[1]];
  void *stream = s->dev->vt->stream ? s->dev->vt->stream(s->dev) : NULL;
  mlc_status err;
  const char *sym = s->plan->kernels[st->kernel];
  if (!strcmp(sym, MLC_PLAN_ALL_REDUCE)) {
    if (in->shape.dtype != 1 || out->shape.dtype != 1 || mlc_plan_shape_bytes(&in->shape) != mlc_plan_shape_bytes(&out->shape))
      return mlc_status_make(MLC_DATA_LOSS, "step %s: all_reduce must write f32 values of its input's shape", st->name);
    err = s->comm->vt->all_reduce_sum(s->comm, es->addr[st->args[0]], es->addr[st->args[1]],
                                      mlc_plan_shape_bytes(&in->shape) / 4, stream);
  } else if (!strcmp(sym, MLC_PLAN_ALL_GATHER)) {
    if (in->shape.rank != 2 || in->shape.dims[1] != MLC_PLAN_SHARD_ROW)
      return mlc_status_make(MLC_DATA_LOSS, "step %s: all_gather of a value that is not a shard", st->name);
    uint64_t bytes = shard_bytes(s, &in->shape);
    if (bytes * (uint64_t)s->comm->world > mlc_plan_shape_bytes(&out->shape))
      return mlc_status_make(MLC_INVALID_ARGUMENT, "step %s: %d ranks do not fit the gathered buffer (at most 256)", st->name,
                             s->comm->world);
    err = s->comm->vt->all_gather(s->comm, es->addr[st->args[0]], es->addr[st->args[1]], bytes, stream);
  } else {
    int dt = in->shape.dtype;
    if (!out->rank_slice || (dt != MLC_COMM_F32 && dt != MLC_COMM_BF16 && dt != MLC_COMM_F16) || out->shape.dtype != dt)
      return mlc_status_make(MLC_DATA_LOSS, "step %s: reduce_scatter must write a rank slice of f32, bf16 or f16", st->name);
    uint64_t count = shard_bytes(s, &out->shape) / (dt == MLC_COMM_F32 ? 4 : 2);
    err = s->comm->vt->reduce_scatter_mean(s->comm, es->addr[st->args[0]], count, dt, stream);
  }
  if (err) {
    mlc_status r = mlc_status_make(mlc_status_code(err), "%s %s: %s", st->scope, st->name, mlc_status_message(err));
    mlc_status_free(err);
    return r;
  }
  return NULL;
}

/* A run needs every given weight loaded: zeros in their place would give
 * wrong numbers without an error. */
static mlc_status check_given(const mlc_session *s) {
  if (!s->ngiven_unset) return NULL; /* every run's path: one test */
  char more[40] = "";
  if (s->ngiven_unset > 1) snprintf(more, sizeof more, " (and %u more)", s->ngiven_unset - 1);
  for (uint32_t i = 0; i < s->plan->nparams && s->ngiven_unset; i++)
    if (s->given_unset[i])
      return mlc_status_make(MLC_INVALID_ARGUMENT, "the weight '%s'%s of %s takes its value from the model's file, which "
                             "the plan does not carry: load the weights first (mlc compile -o DIR writes them as "
                             "DIR/%s.safetensors; mlc run --weights FILE, <name>_load_weights)",
                             s->plan->params[i].name, more, s->plan->model, s->plan->model);
  return NULL;
}

/* Whether the entry's launches may be recorded once and replayed (see
 * runtime/device.h's record_begin): every step a kernel on stream 0, none
 * waited for, and not the train entry, whose optimizer steps are left to
 * plain launches.  The key of a recording: its steps' argument addresses. */
static bool recordable(const mlc_session *s, const char *entry, const entry_state *es) {
  if (es->rec_off || s->profile || !s->dev->vt->record_begin || !strcmp(entry, "train")) return false;
  for (uint32_t i = 0; i < es->e->nsteps; i++)
    if (!es->kern[i] || es->e->steps[i].stream || es->e->steps[i].nwait || es->signal[i]) return false;
  return true;
}

static uint64_t args_key(const entry_state *es) {
  uint64_t h = 0; /* each step's hash seeds the next's */
  for (uint32_t i = 0; i < es->e->nsteps; i++) h = XXH64(es->args[i], es->e->steps[i].nargs * sizeof *es->args[i], h);
  return h;
}

/* The steps' launches, each after its stream's waits (plan order). */
static mlc_status launch_steps(mlc_session *s, entry_state *es) {
  const mlc_device_vt *vt = s->dev->vt;
  mlc_status err = NULL;
  for (uint32_t i = 0; i < es->e->nsteps && !err; i++) {
    const mlc_plan_step *st = &es->e->steps[i];
    if (vt->range_push) vt->range_push(s->dev, es->label[i]);
    if (vt->order) err = vt->order(s->dev, st->stream, st->wait, st->nwait); /* streams: see codegen/schedule.c */
    if (!err && !es->kern[i]) {
      bool timed = s->profile && vt->mark;
      if (timed) err = vt->mark(s->dev, i, false);
      if (!err) err = collective(s, es, i);
      if (!err && timed) err = vt->mark(s->dev, i, true);
    } else if (!err) {
      err = vt->launch(s->dev, es->kern[i], st->sharded ? mlc_plan_shard_rows(st->work_items, s->comm->world) : st->work_items,
                       es->args[i], st->nargs, s->profile, i);
    }
    if (!err && es->signal[i] && vt->signal) err = vt->signal(s->dev, i);
    if (vt->range_pop) vt->range_pop(s->dev);
  }
  return err;
}

/* launch_steps, or its recording replayed: recorded on the second run in a
 * row with the same arguments (a caller who binds other buffers every run,
 * as Python's with fresh tensors may, keeps plain launches instead of
 * paying a recording each time), then queued while they stay. */
static mlc_status launch_or_replay(mlc_session *s, const char *entry, entry_state *es) {
  const mlc_device_vt *vt = s->dev->vt;
  if (!recordable(s, entry, es)) return launch_steps(s, es);
  uint64_t key = args_key(es), last = es->last_key;
  es->last_key = key;
  if (es->rec && es->rec_key == key) return vt->replay(s->dev, es->rec);
  if (key != last) return launch_steps(s, es);
  if (es->rec) vt->record_free(s->dev, es->rec);
  es->rec = NULL;
  mlc_status err = vt->record_begin(s->dev);
  if (err && mlc_status_code(err) == MLC_UNIMPLEMENTED) { /* turned off: plain launches from now on */
    mlc_status_free(err);
    es->rec_off = true;
    return launch_steps(s, es);
  }
  MLC_RETURN_IF_ERROR(err);
  err = launch_steps(s, es);
  void *rec = NULL;
  mlc_status end = vt->record_end(s->dev, &rec);
  if (!err) err = end;
  else mlc_status_free(end);
  if (err) {
    if (rec) vt->record_free(s->dev, rec);
    return err;
  }
  es->rec = rec, es->rec_key = key;
  return vt->replay(s->dev, rec);
}

/* mlc_session_run's work, the bindings left to it. */
static mlc_status run(mlc_session *s, const char *entry, entry_state *es) {
  const mlc_device_vt *vt = s->dev->vt;
  MLC_RETURN_IF_ERROR(mlc_sess_pack_stale(s)); /* a weight written through param_data: its packed forms follow it */
  MLC_RETURN_IF_ERROR(sync_device(s));
  /* A run of the train entry is one optimizer step. */
  bool steps_optimizer = !strcmp(entry, "train");
  for (uint32_t i = 0; i < es->e->ninputs; i++)
    if (!strcmp(es->e->inputs[i].name, "opt.step")) {
      int64_t next = (int64_t)s->step + 1;
      MLC_RETURN_IF_ERROR(vt->write(s->dev, es->addr[es->e->inputs[i].value], &next, sizeof next));
    } else if (!strcmp(es->e->inputs[i].name, "opt.lr")) {
      const mlc_plan_schedule *sc = &s->plan->schedule;
      if (sc->decay != MLC_PLAN_DECAY_NONE && !s->sched_steps)
        return mlc_status_make(MLC_INVALID_ARGUMENT,
                               "the learning rate decays over the run, but the run's length is unknown: give steps= "
                               "in the optimizer of the train block, or call mlc_session_set_schedule_steps");
      float lr = (float)mlc_session_lr(s);
      MLC_RETURN_IF_ERROR(vt->write(s->dev, es->addr[es->e->inputs[i].value], &lr, sizeof lr));
    } else if (!strcmp(es->e->inputs[i].name, "opt.world")) { /* fsdp's clipping: which rows of a shard are this rank's */
      int64_t world = s->comm->world;
      MLC_RETURN_IF_ERROR(vt->write(s->dev, es->addr[es->e->inputs[i].value], &world, sizeof world));
    }
  if (vt->range_push) vt->range_push(s->dev, entry);
  mlc_status err = launch_or_replay(s, entry, es);
  if (vt->range_pop) vt->range_pop(s->dev);
  MLC_RETURN_IF_ERROR(err);
  mlc_comm_busy(s->comm, true); /* the watchdog keeps the deadline while the device runs the step */
  err = vt->finish(s->dev, es->e->nsteps, es->last, es->start);
  mlc_comm_busy(s->comm, false);
  MLC_RETURN_IF_ERROR(err);
  if (s->profile) {
    es->runs++;
    for (uint32_t i = 0; i < es->e->nsteps; i++) {
      es->seconds[i] += es->last[i];
      if (s->trace && !record_event(s, (uint32_t)(es - s->entries), i, es->start[i], es->last[i]))
        return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory for the trace (%zu events)", s->nevents);
    }
  }
  if (steps_optimizer) {
    s->step++;
    s->host_stale = !host_memory(s);
  }
  return NULL;
}

mlc_status mlc_session_run(mlc_session *s, const char *entry) {
  entry_state *es;
  MLC_RETURN_IF_ERROR(mlc_sess_find_entry(s, entry, &es));
  mlc_status st = check_given(s);
  if (!st) st = bind_entry(s, es);
  if (!st) st = run(s, entry, es);
  /* The outputs are where this run wrote them (none after a failed run); a
   * binding never outlives the run it was made for. */
  if (es->any_moved || es->nin_place)
    for (uint32_t r = 0; r < es->e->nvalues; r++) es->moved[r] = st ? 0 : es->in_place[r];
  es->any_moved = !st && es->nin_place;
  unbind(es);
  return st;
}

mlc_status mlc_session_output(const mlc_session *s, const char *entry, const char *name, const void **out_data,
                              const mlc_plan_shape **out_shape) {
  entry_state *es;
  MLC_RETURN_IF_ERROR(find_bound_entry(s, entry, &es));
  for (uint32_t i = 0; i < es->e->noutputs; i++)
    if (!strcmp(es->e->outputs[i].name, name)) {
      uint32_t v = es->e->outputs[i].value;
      uint64_t bytes = mlc_plan_shape_bytes(&es->e->values[v].shape);
      *out_shape = &es->e->values[v].shape;
      if (host_memory(s)) {
        *out_data = (const void *)(uintptr_t)result_addr(es, v);
        return NULL;
      }
      if (!es->host[v] && !(es->host[v] = mlc_allocator_alloc(s->a, bytes ? bytes : 1)))
        return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory for output '%s' (%llu bytes)", name, (unsigned long long)bytes);
      MLC_RETURN_IF_ERROR(s->dev->vt->read(s->dev, es->host[v], result_addr(es, v), bytes)); /* a bound output: the caller's */
      *out_data = es->host[v];
      return NULL;
    }
  return mlc_status_make(MLC_NOT_FOUND, "entry %s has no output '%s'", entry, name);
}

uint64_t mlc_session_device_bytes(const mlc_session *s) { return s->dev->allocated; }
