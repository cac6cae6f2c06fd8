/* Sessions over any device behind runtime/device.h's vtable (CPU, CUDA,
 * Vulkan, Metal): parameters in one block, the optimizer state in another
 * made when a call first needs it, an arena per entry point made at its
 * first use, kernels resolved by name at creation, steps run in order on
 * the device, timed when profiling is on. */
#include "runtime/session.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "runtime/cpu/convert.h"
#include "runtime/cpu/device.h"
#include "runtime/quant.h"
#include "runtime/ncu.h"
#include "runtime/profile.h"
#include "runtime/safetensors.h"

#include <xxhash.h>

typedef struct {
  const mlc_plan_entry *e;
  uint64_t arena;         /* device address of the arena */
  uint64_t *addr;         /* per value: its device address */
  uint64_t **args;        /* per step: its argument addresses */
  void **kern;            /* per step: the device's kernel handle */
  void **host;            /* per value: a host copy of an output (devices with their own memory) */
  double *seconds;        /* per step, summed over profiled runs */
  double *start, *last;   /* per step: start and seconds in the last profiled run */
  const char **label;     /* per step: "scope name", for the device's profiler ranges */
  bool *signal;           /* per step: a later step of another stream waits for it */
  bool bound;             /* the arena is made and every address filled in (bind_entry) */
  uint64_t runs;
} entry_state;

/* One step of one run, for the trace. */
typedef struct {
  uint32_t entry, step;
  double start, seconds; /* start: since the session was created */
} trace_event;

struct mlc_session {
  const mlc_plan *plan;
  mlc_allocator a;
  mlc_device *dev;
  bool profile;
  uint8_t *params;        /* every parameter but the optimizer state, 64-byte aligned each (host) */
  uint64_t dparams;       /* the same on the device (== params on the CPU) */
  uint64_t params_bytes;
  /* The optimizer state (role 1), laid out the same way: NULL (and 0) until
   * a call first needs it (ensure_state), so that a session that only runs
   * forward never holds it. */
  uint8_t *state;
  uint64_t dstate;
  uint64_t state_bytes;   /* what it takes, held or not */
  bool host_stale;        /* the device's parameters (and state) are newer than the host's */
  bool dev_stale;         /* the host's are newer than the device's */
  uint64_t *param_off;    /* per parameter: its offset in its block (params, or state for role 1) */
  mlc_plan_shape *pshape; /* per parameter: its shape here (a sharded one's rows are this rank's) */
  mlc_comm *comm;         /* the ranks' collectives (FSDP) */
  bool own_comm;
  uint64_t sum_buf;       /* device scratch for mlc_session_all_sum on a device communicator */
  uint64_t step;          /* optimizer steps taken */
  uint64_t sched_steps;   /* the learning-rate schedule's length: the plan's, or the caller's */
  entry_state *entries;
  bool trace;
  trace_event *events;    /* (nevents), grows by doubling */
  size_t nevents, cap_events;
};

static uint64_t align64(uint64_t x) { return (x + 63) & ~(uint64_t)63; }

enum { ROLE_STATE = 1 }; /* mlc_plan_param.role of optimizer state */

static bool is_state(const mlc_session *s, uint32_t i) { return s->plan->params[i].role == ROLE_STATE; }

/* A parameter's storage on the host and on the device (for optimizer state:
 * only once ensure_state has made it). */
static uint8_t *host_at(const mlc_session *s, uint32_t i) {
  return (is_state(s, i) ? s->state : s->params) + s->param_off[i];
}
static uint64_t dev_at(const mlc_session *s, uint32_t i) {
  return (is_state(s, i) ? s->dstate : s->dparams) + s->param_off[i];
}

/* Bytes of this rank's rows of a sharded [rows, 4096] value. */
static uint64_t shard_bytes(const mlc_session *s, const mlc_plan_shape *sh) {
  mlc_plan_shape r = *sh;
  r.dims[0] = (int64_t)mlc_plan_shard_rows((uint64_t)sh->dims[0], s->comm->world);
  return mlc_plan_shape_bytes(&r);
}

/* Bytes a parameter's storage holds here (0 for a weight inside a flat). */
static uint64_t param_bytes(const mlc_session *s, uint32_t i) {
  return s->plan->params[i].flat ? 0 : mlc_plan_shape_bytes(&s->pshape[i]);
}

/* For a weight inside a flat: the part of it [lo, hi) (elements of the
 * weight) that this rank holds, and where that part starts in storage.
 * False when the rank holds none of it. */
static bool flat_part(const mlc_session *s, uint32_t i, uint64_t *lo, uint64_t *hi, uint8_t **at) {
  const mlc_plan_param *p = &s->plan->params[i];
  uint32_t fl = p->flat - 1;
  uint64_t per = mlc_plan_shape_bytes(&s->pshape[fl]) / 4, first = per * (uint64_t)s->comm->rank;
  uint64_t n = mlc_plan_shape_bytes(&p->shape) / 4, a = p->flat_offset, b = a + n;
  if (b <= first || a >= first + per) return false;
  uint64_t from = a > first ? a : first, to = b < first + per ? b : first + per;
  *lo = from - a;
  *hi = to - a;
  *at = host_at(s, fl) + (from - first) * 4;
  return true;
}
static bool host_memory(const mlc_session *s) { return s->dev->vt->host_memory; }

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
  mlc_allocator_free(s->a, s->pshape);
  if (s->own_comm) s->comm->vt->destroy(s->comm);
  if (s->dev) s->dev->vt->destroy(s->dev);
  mlc_allocator_free(s->a, s);
}

static void store_scalar(void *dst, uint8_t dtype, double v) {
  switch (dtype) {
  case 1: { float f = (float)v; memcpy(dst, &f, 4); break; }
  case 2: { uint16_t h = mlc_f32_to_bf16((float)v); memcpy(dst, &h, 2); break; }
  case 3: { uint16_t h = mlc_f32_to_f16((float)v); memcpy(dst, &h, 2); break; }
  case 4: { int32_t i = (int32_t)v; memcpy(dst, &i, 4); break; }
  case 5: { int64_t i = (int64_t)v; memcpy(dst, &i, 8); break; }
  default: { uint8_t b = v != 0; memcpy(dst, &b, 1); break; }
  }
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
      !es->signal)
    return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory for entry %s", e->name);
  memset(es->seconds, 0, (e->nsteps + 1) * sizeof *es->seconds);
  memset(es->start, 0, (e->nsteps + 1) * sizeof *es->start);
  memset(es->last, 0, (e->nsteps + 1) * sizeof *es->last);
  mlc_status st;
  for (uint32_t i = 0; i < e->nsteps; i++) {
    const mlc_plan_step *stp = &e->steps[i];
    const char *sym = pl->kernels[stp->kernel];
    if (!strcmp(sym, MLC_PLAN_ALL_GATHER) || !strcmp(sym, MLC_PLAN_REDUCE_SCATTER)) {
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
static mlc_status ensure_state(mlc_session *s) {
  if (s->state || !s->state_bytes) return NULL;
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
    uses_state = e->values[i].param != MLC_PLAN_NO_PARAM && is_state(s, e->values[i].param);
  if (uses_state) MLC_RETURN_IF_ERROR(ensure_state(s));
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
      store_scalar(tmp, v->shape.dtype, v->value);
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
  mlc_device_options dopt = {a, MLC_CODE_CPU, &cpu};
  if (opt->device) s->dev = opt->device;
  else if ((st = mlc_device_create("cpu", 0, &dopt, &s->dev))) {
    mlc_session_destroy(s);
    return st;
  }
  s->param_off = mlc_allocator_alloc_array(a, plan->nparams + 1, sizeof *s->param_off);
  if (!s->param_off) { mlc_session_destroy(s); return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory"); }
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
    uint64_t *end = is_state(s, i) ? &state : &total;
    s->pshape[i] = p->shape;
    if (p->sharded) s->pshape[i].dims[0] = (int64_t)mlc_plan_shard_rows((uint64_t)p->shape.dims[0], s->comm->world);
    s->param_off[i] = *end;
    if (!p->flat) *end = align64(*end + mlc_plan_shape_bytes(&s->pshape[i]));
  }
  s->params_bytes = total;
  s->state_bytes = state; /* made later, by ensure_state */
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
static mlc_status sync_host(const mlc_session *cs) {
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
  mlc_status st = sync_host(s);
  if (!st && is_state(s, param)) st = ensure_state(s); /* the caller may read or write it */
  if (st) { mlc_status_free(st); return NULL; }
  uint64_t lo, hi;
  uint8_t *at = host_at(s, param);
  if (s->plan->params[param].flat && (s->comm->world > 1 || !flat_part(s, param, &lo, &hi, &at))) return NULL;
  s->dev_stale = !host_memory(s); /* the caller may write */
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

/* splitmix64: a small, well-mixed generator; enough for initial weights. */
static uint64_t next_u64(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static double next_unit(uint64_t *state) { return (double)(next_u64(state) >> 11) * 0x1.0p-53; }

/* Packs every quantised weight (role 4) from its f32 weight, as it now is:
 * after weights are loaded or drawn (runtime/quant.h). */
static void pack_quantized(mlc_session *s) {
  for (uint32_t i = 0; i < s->plan->nparams; i++) {
    const mlc_plan_param *p = &s->plan->params[i];
    if (p->role != 4) continue;
    const mlc_plan_param *w = &s->plan->params[p->flat_offset];
    mlc_quant_pack((const float *)host_at(s, (uint32_t)p->flat_offset), w->shape.dims[0], w->shape.dims[1],
                   (int)p->a, (int)p->b, (int32_t *)host_at(s, i));
  }
}

void mlc_session_init_params(mlc_session *s, uint64_t seed) {
  uint64_t rng = seed;
  s->host_stale = false; /* every byte is rewritten */
  s->dev_stale = !host_memory(s);
  /* Flat parameters and their state start at zero (padding included);
   * their weights are drawn below, in plan order, as they would be unsharded.
   * Optimizer state not yet made is zero when it is (ensure_state), and its
   * init is zeros, which draws nothing from the RNG. */
  for (uint32_t i = 0; i < s->plan->nparams; i++)
    if (s->plan->params[i].sharded && (s->state || !is_state(s, i))) memset(host_at(s, i), 0, param_bytes(s, i));
  for (uint32_t i = 0; i < s->plan->nparams; i++) {
    const mlc_plan_param *p = &s->plan->params[i];
    if (p->role == 2 || (is_state(s, i) && !s->state)) continue;
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
      if (k >= lo && k < hi) store_scalar(d + (k - lo) * esz, p->shape.dtype, v);
    }
  }
  pack_quantized(s);
}

static const struct { uint8_t dtype; mlc_safetensors_dtype st; } dtype_map[] = {
  {1, MLC_ST_F32}, {2, MLC_ST_BF16}, {3, MLC_ST_F16}, {4, MLC_ST_I32}, {5, MLC_ST_I64}, {6, MLC_ST_BOOL},
};
static const char *dtype_names[] = {"?", "f32", "bf16", "f16", "i32", "i64", "bool"};

static mlc_safetensors_dtype to_st(uint8_t dt) {
  for (size_t i = 0; i < sizeof dtype_map / sizeof *dtype_map; i++)
    if (dtype_map[i].dtype == dt) return dtype_map[i].st;
  return MLC_ST_DTYPE_COUNT;
}

static void shape_str(char *buf, size_t n, int rank, const int64_t *dims) {
  size_t k = (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < rank && k < n; i++) k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)dims[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
}

enum { ROLE_WEIGHT = 0, ALL_ROLES = 255 };

/* Which parameters a file of `role` holds: weights (a state_dict, sharded
 * weights included), or everything a checkpoint needs (a sharded weight is
 * in its flat parameter there). */
static bool in_file(const mlc_plan_param *p, int role) {
  return role == ALL_ROLES ? !p->flat && p->role != 3 && p->role != 4 : p->role == role; /* KV caches (3), packed weights (4): in neither */
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
    if (in_file(&s->plan->params[k], role) && !strcmp(s->plan->params[k].name, name)) return true;
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
                             path, p->name, dtype_names[p->shape.dtype], name, (int)(m - n), name, (int)(m - n), name);
    if (n > m && p->name[n - m - 1] == '.' && !strcmp(p->name + n - m, name) && !model_has(s, name, role))
      return mlc_status_make(MLC_NOT_FOUND, "%s: missing tensor '%s' (%s), which the model needs; the file has '%s': "
                             "the model's names start with '%.*s', which the file's do not; add it in Python:\n"
                             "  state = {\"%.*s\" + k: v for k, v in state.items()}",
                             path, p->name, dtype_names[p->shape.dtype], name, (int)(n - m), p->name, (int)(n - m), p->name);
  }
  return mlc_status_make(MLC_NOT_FOUND, "%s: missing tensor '%s' (%s), which the model needs", path, p->name,
                         dtype_names[p->shape.dtype]);
}

/* Copies the tensors of `role` (or all) from an open file, strictly: each
 * must be there with its dtype and shape, and nothing else may be. */
static mlc_status load_tensors(mlc_session *s, mlc_safetensors *f, const char *path, int role) {
  mlc_status st = NULL;
  for (uint32_t i = 0; i < s->plan->nparams && !st; i++) {
    const mlc_plan_param *p = &s->plan->params[i];
    if (!in_file(p, role)) continue;
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
      shape_str(want, sizeof want, ps->rank, ps->dims);
      shape_str(got, sizeof got, t->rank, t->shape);
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
      memcpy(host_at(s, i), t->data, t->nbytes); /* a checkpoint's state: the caller made it (ensure_state) */
    } else if (flat_part(s, i, &lo, &hi, &at)) { /* this rank's part of a sharded weight */
      memcpy(at, (const uint8_t *)t->data + lo * 4, (hi - lo) * 4);
    }
  }
  for (size_t i = 0; i < mlc_safetensors_count(f) && !st; i++) {
    const char *name = mlc_safetensors_tensor_at(f, i)->name;
    bool known = false;
    for (uint32_t k = 0; k < s->plan->nparams && !known; k++)
      known = in_file(&s->plan->params[k], role) && !strcmp(s->plan->params[k].name, name);
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
  MLC_RETURN_IF_ERROR(sync_host(s)); /* the optimizer state stays as it is */
  mlc_safetensors *f;
  if (path) MLC_RETURN_IF_ERROR(mlc_safetensors_open_file(path, s->a, &f));
  else MLC_RETURN_IF_ERROR(mlc_status_annotate(mlc_safetensors_open_memory(data, size, s->a, &f), "%s", label));
  s->dev_stale = !host_memory(s);
  mlc_status st = load_tensors(s, f, label, ROLE_WEIGHT);
  mlc_safetensors_close(f);
  if (!st) pack_quantized(s);
  return st;
}

mlc_status mlc_session_load_weights(mlc_session *s, const char *path) {
  return load_weights(s, path, NULL, 0, path);
}

mlc_status mlc_session_load_weights_memory(mlc_session *s, const void *data, size_t size) {
  return load_weights(s, NULL, data, size, "weights in memory");
}

/* Writes the tensors of `role` (or all) with the given metadata.  Optimizer
 * state the session has not made (it never trained) is written as the zeros
 * it would start from, out of one zero block the size of its largest tensor,
 * which is freed again: saving does not make the session hold the state. */
static mlc_status save_tensors(const mlc_session *s, const char *path, int role, const mlc_safetensors_kv *meta,
                               size_t nmeta) {
  uint32_t n = 0;
  MLC_RETURN_IF_ERROR(sync_host(s));
  uint64_t zero_bytes = 0;
  for (uint32_t i = 0; i < s->plan->nparams && !s->state; i++)
    if (in_file(&s->plan->params[i], role) && is_state(s, i) && param_bytes(s, i) > zero_bytes) zero_bytes = param_bytes(s, i);
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
    if (!in_file(p, role)) continue;
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
  return save_tensors(s, path, ROLE_WEIGHT, &meta, 1);
}

/* xxHash64 over every parameter and state tensor, in plan order (state not
 * yet made as the zeros it would start from). */
static uint64_t params_checksum(const mlc_session *s) {
  static const uint8_t zeros[4096];
  XXH64_state_t *h = XXH64_createState();
  if (!h) return 0;
  XXH64_reset(h, 0);
  for (uint32_t i = 0; i < s->plan->nparams; i++) {
    if (s->plan->params[i].role == 4) continue; /* packed weights follow from the others */
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

static char *shard_path(const mlc_session *s, const char *path, int rank) {
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
  MLC_RETURN_IF_ERROR(sync_host(s));
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
  if (s->comm->world == 1) return save_tensors(s, path, ALL_ROLES, meta, nmeta);
  char *file = shard_path(s, path, s->comm->rank);
  if (!file) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory");
  mlc_status st = save_tensors(s, file, ALL_ROLES, meta, nmeta);
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
      if (!in_file(p, ALL_ROLES)) continue;
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

mlc_status mlc_session_load_checkpoint(mlc_session *s, const char *path) {
  char *shard = NULL;
  int world = 0;
  MLC_RETURN_IF_ERROR(read_manifest(s, path, &shard, &world));
  mlc_status est = ensure_state(s); /* a checkpoint carries the optimizer state */
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
    st = load_tensors(s, f, file, ALL_ROLES);
  if (!st) {
    want = strtoull(sum, &end, 16);
    if (*end || params_checksum(s) != want)
      st = mlc_status_make(MLC_DATA_LOSS, "%s: checksum mismatch: the checkpoint is corrupt", file);
  }
  if (!st) s->step = nstep;
  if (!st) pack_quantized(s);
  const char *sched = mlc_safetensors_metadata_get(f, "schedule_steps");
  if (!st && sched && !s->plan->schedule.steps) s->sched_steps = strtoull(sched, NULL, 10);
  mlc_safetensors_close(f);
  mlc_allocator_free(s->a, shard);
  return st;
}

uint64_t mlc_session_step(const mlc_session *s) { return s->step; }

void mlc_session_set_schedule_steps(mlc_session *s, uint64_t steps) {
  s->sched_steps = s->plan->schedule.steps ? s->plan->schedule.steps : steps;
}

uint64_t mlc_session_schedule_steps(const mlc_session *s) { return s->sched_steps; }

double mlc_session_lr(const mlc_session *s) { return mlc_plan_lr(&s->plan->schedule, s->step, s->sched_steps); }

/* The buffer: the parameters' block, the state's block, the step count. */
uint64_t mlc_session_state_bytes(const mlc_session *s) { return s->params_bytes + s->state_bytes + sizeof s->step; }

mlc_status mlc_session_state_save(const mlc_session *s, void *buf, uint64_t bytes) {
  if (bytes != mlc_session_state_bytes(s))
    return mlc_status_make(MLC_INVALID_ARGUMENT, "the training state is %llu bytes, got a buffer of %llu",
                           (unsigned long long)mlc_session_state_bytes(s), (unsigned long long)bytes);
  MLC_RETURN_IF_ERROR(sync_host(s));
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
  MLC_RETURN_IF_ERROR(ensure_state(s));
  const uint8_t *b = buf;
  memcpy(s->params, b, s->params_bytes);
  if (s->state_bytes) memcpy(s->state, b + s->params_bytes, s->state_bytes);
  memcpy(&s->step, b + s->params_bytes + s->state_bytes, sizeof s->step);
  s->host_stale = false;
  s->dev_stale = !host_memory(s);
  return NULL;
}

static mlc_status find_entry(const mlc_session *s, const char *name, entry_state **out) {
  *out = NULL;
  for (uint32_t k = 0; k < s->plan->nentries; k++)
    if (!strcmp(s->plan->entries[k].name, name)) {
      *out = &s->entries[k];
      return NULL;
    }
  return mlc_status_make(MLC_NOT_FOUND, "the model has no entry point '%s'", name);
}

/* find_entry, with its arena made (bind_entry). */
static mlc_status find_bound_entry(const mlc_session *s, const char *name, entry_state **out) {
  MLC_RETURN_IF_ERROR(find_entry(s, name, out));
  return bind_entry((mlc_session *)s, *out);
}

mlc_status mlc_session_set_input(mlc_session *s, const char *entry, const char *name, const void *data, size_t bytes) {
  entry_state *es;
  MLC_RETURN_IF_ERROR(find_bound_entry(s, entry, &es));
  for (uint32_t i = 0; i < es->e->ninputs; i++) {
    if (strcmp(es->e->inputs[i].name, name)) continue;
    const mlc_plan_value *v = &es->e->values[es->e->inputs[i].value];
    uint64_t want = mlc_plan_shape_bytes(&v->shape);
    if (bytes != want) {
      char sh[128];
      shape_str(sh, sizeof sh, v->shape.rank, v->shape.dims);
      return mlc_status_make(MLC_INVALID_ARGUMENT, "input '%s' of %s is %s%s (%llu bytes), got %zu bytes", name, entry,
                             dtype_names[v->shape.dtype], sh, (unsigned long long)want, bytes);
    }
    return s->dev->vt->write(s->dev, es->addr[es->e->inputs[i].value], data, bytes);
  }
  return mlc_status_make(MLC_NOT_FOUND, "entry %s has no input '%s'", entry, name);
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

/* A collective step: all_gather(shard, flat) or reduce_scatter(flat, rank slice). */
static mlc_status collective(mlc_session *s, entry_state *es, uint32_t i) {
  const mlc_plan_entry *e = es->e;
  const mlc_plan_step *st = &e->steps[i];
  const mlc_plan_value *in = &e->values[st->args[0]], *out = &e->values[st->args[1]];
  void *stream = s->dev->vt->stream ? s->dev->vt->stream(s->dev) : NULL;
  mlc_status err;
  if (!strcmp(s->plan->kernels[st->kernel], MLC_PLAN_ALL_GATHER)) {
    if (in->shape.rank != 2 || in->shape.dims[1] != MLC_PLAN_SHARD_ROW)
      return mlc_status_make(MLC_DATA_LOSS, "step %s: all_gather of a value that is not a shard", st->name);
    uint64_t bytes = shard_bytes(s, &in->shape);
    if (bytes * (uint64_t)s->comm->world > mlc_plan_shape_bytes(&out->shape))
      return mlc_status_make(MLC_INVALID_ARGUMENT, "step %s: %d ranks do not fit the gathered buffer (at most 256)", st->name,
                             s->comm->world);
    err = s->comm->vt->all_gather(s->comm, es->addr[st->args[0]], es->addr[st->args[1]], bytes, stream);
  } else {
    if (!out->rank_slice || in->shape.dtype != 1)
      return mlc_status_make(MLC_DATA_LOSS, "step %s: reduce_scatter must write an f32 rank slice", st->name);
    uint64_t count = shard_bytes(s, &out->shape) / 4;
    err = s->comm->vt->reduce_scatter_mean(s->comm, es->addr[st->args[0]], count, stream);
  }
  if (err) {
    mlc_status r = mlc_status_make(mlc_status_code(err), "%s %s: %s", st->scope, st->name, mlc_status_message(err));
    mlc_status_free(err);
    return r;
  }
  return NULL;
}

mlc_status mlc_session_run(mlc_session *s, const char *entry) {
  entry_state *es;
  MLC_RETURN_IF_ERROR(find_bound_entry(s, entry, &es));
  const mlc_device_vt *vt = s->dev->vt;
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
    }
  if (vt->range_push) vt->range_push(s->dev, entry);
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
        *out_data = (const void *)(uintptr_t)es->addr[v];
        return NULL;
      }
      if (!es->host[v] && !(es->host[v] = mlc_allocator_alloc(s->a, bytes ? bytes : 1)))
        return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory for output '%s' (%llu bytes)", name, (unsigned long long)bytes);
      MLC_RETURN_IF_ERROR(s->dev->vt->read(s->dev, es->host[v], es->addr[v], bytes));
      *out_data = es->host[v];
      return NULL;
    }
  return mlc_status_make(MLC_NOT_FOUND, "entry %s has no output '%s'", entry, name);
}

void mlc_session_reset_profile(mlc_session *s) {
  for (uint32_t k = 0; k < s->plan->nentries; k++) {
    memset(s->entries[k].seconds, 0, s->plan->entries[k].nsteps * sizeof(double));
    s->entries[k].runs = 0;
  }
}

/* The classifier's view of step i of an entry: shapes points into `shapes`
 * (room for 16 arguments; a GEMM needs the first and the last), the launch
 * into `launch` (where the device knows it). */
static mlc_profile_kernel step_kernel(const mlc_session *s, const entry_state *es, uint32_t i, double seconds,
                                      const mlc_plan_shape *shapes[16], mlc_profile_launch *launch) {
  const mlc_plan_entry *e = es->e;
  const mlc_plan_step *st = &e->steps[i];
  uint32_t n = st->nargs < 16 ? st->nargs : 16;
  for (uint32_t j = 0; j < n; j++) shapes[j] = &e->values[st->args[j]].shape;
  if (st->nargs > 16) shapes[15] = &e->values[st->args[st->nargs - 1]].shape; /* keep the output last */
  memset(launch, 0, sizeof *launch);
  bool known = es->kern[i] && s->dev->vt->kernel_launch;
  if (known) s->dev->vt->kernel_launch(s->dev, es->kern[i], launch);
  return (mlc_profile_kernel){st->name, st->flops, st->bytes, seconds, shapes, n, (mlc_unit)st->unit, st->products,
                              known && launch->grid ? launch : NULL};
}

static void fmt_rate(char *buf, size_t n, double per_s) {
  if (per_s >= 1e12) snprintf(buf, n, "%.2fT", per_s / 1e12);
  else snprintf(buf, n, "%.1fG", per_s / 1e9);
}

/* Steps of an entry, longest total time first; NULL when out of memory. */
static uint32_t *steps_by_time(const mlc_session *s, const entry_state *es) {
  uint32_t n = es->e->nsteps, *order = mlc_allocator_alloc_array(s->a, n + 1, sizeof *order);
  if (!order) return NULL;
  for (uint32_t i = 0; i < n; i++) order[i] = i;
  for (uint32_t i = 1; i < n; i++) /* insertion sort: a model has few steps */
    for (uint32_t j = i; j > 0 && es->seconds[order[j]] > es->seconds[order[j - 1]]; j--) {
      uint32_t t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
  return order;
}

uint64_t mlc_session_device_bytes(const mlc_session *s) { return s->dev->allocated; }

void mlc_session_ceilings(const mlc_session *s, mlc_ceilings *c) {
  if (host_memory(s)) {
    mlc_ceilings_load_cpu(c);
    return;
  }
  char name[256];
  s->dev->vt->describe(s->dev, name, sizeof name);
  mlc_ceilings_gpu(name, c);
}

void mlc_session_print_profile(const mlc_session *s, const char *entry, FILE *out) {
  mlc_ceilings c;
  mlc_session_ceilings(s, &c);
  mlc_session_print_profile_ceilings(s, entry, &c, out);
}

void mlc_session_print_profile_ceilings(const mlc_session *s, const char *entry, const mlc_ceilings *c, FILE *out) {
  entry_state *es;
  mlc_status st = find_entry(s, entry, &es);
  if (st) { fprintf(out, "%s\n", mlc_status_message(st)); mlc_status_free(st); return; }
  const mlc_plan_entry *e = es->e;
  if (!es->runs) { fprintf(out, "no profiled runs of %s\n", entry); return; }
  uint32_t *order = steps_by_time(s, es);
  if (!order) return;
  double total = 0;
  for (uint32_t i = 0; i < e->nsteps; i++) total += es->seconds[i];
  fprintf(out, "ceilings: %.1f GFLOP/s peak, %.1f GB/s memory (ridge %.1f FLOP/byte), latency-bound under %.0f us; %s\n",
          c->peak_flops / 1e9, c->bandwidth / 1e9, c->peak_flops / c->bandwidth, c->latency_s * 1e6, c->device);
  mlc_profile_print_units(c, out);
  fprintf(out, "  from %s\n", c->source);
  fprintf(out, "  bound (the seed's rule, as ncu's is judged): compute above %.0f%% of the unit's peak with memory under "
               "%.0f%% of HBM; memory above %.0f%% of HBM with compute under %.0f%%; else latency, as under %.0f us\n",
          MLC_RULE_HIGH_PCT, MLC_RULE_COMPUTE_MEM_PCT, MLC_RULE_HIGH_PCT, MLC_RULE_MEMORY_SM_PCT, c->latency_s * 1e6);
  fprintf(out, "%-24s %-24s %6s %9s %9s %6s %8s %7s %7s %-7s %-7s %6s  %s\n", "Name", "Scope", "Calls", "Total ms", "Avg ms",
          "% step", "FLOP/s", "GB/s", "FLOP/B", "Unit", "Bound", "% roof", "Hint");
  double by_bound[3] = {0};
  for (uint32_t r = 0; r < e->nsteps; r++) {
    uint32_t i = order[r];
    const mlc_plan_step *stp = &e->steps[i];
    double avg = es->seconds[i] / (double)es->runs;
    const mlc_plan_shape *shapes[16];
    mlc_profile_launch launch;
    mlc_profile_kernel k = step_kernel(s, es, i, avg, shapes, &launch);
    mlc_profile_verdict v;
    mlc_profile_classify(&k, c, &v);
    by_bound[v.bound] += es->seconds[i];
    char rate[16], unit[16];
    fmt_rate(rate, sizeof rate, v.flop_rate);
    mlc_profile_unit_str(v.unit, stp->products, unit, sizeof unit);
    fprintf(out, "%-24.24s %-24.24s %6llu %9.3f %9.4f %5.1f%% %8s %7.2f %7.2f %-7s %-7s %5.1f%%  %s\n", stp->name,
            *stp->scope ? stp->scope : "-", (unsigned long long)es->runs, es->seconds[i] * 1e3, avg * 1e3,
            total > 0 ? 100 * es->seconds[i] / total : 0, rate, v.byte_rate / 1e9, v.intensity, unit,
            mlc_bound_name(v.bound), v.pct_roof, v.hint);
  }
  fprintf(out, "%d steps, %.4f ms per run over %llu runs; time %.0f%% memory-bound, %.0f%% compute-bound, "
               "%.0f%% latency-bound\n", (int)e->nsteps, total / (double)es->runs * 1e3, (unsigned long long)es->runs,
          total > 0 ? 100 * by_bound[MLC_BOUND_MEMORY] / total : 0, total > 0 ? 100 * by_bound[MLC_BOUND_COMPUTE] / total : 0,
          total > 0 ? 100 * by_bound[MLC_BOUND_LATENCY] / total : 0);
  mlc_allocator_free(s->a, order);
}

mlc_status mlc_session_ncu_matches(const mlc_session *s, const char *entry, const mlc_ceilings *c, mlc_ncu_match **out,
                                   uint32_t *n) {
  *out = NULL;
  *n = 0;
  entry_state *es;
  MLC_RETURN_IF_ERROR(find_entry(s, entry, &es));
  const mlc_plan_entry *e = es->e;
  if (!es->runs) return mlc_status_make(MLC_INVALID_ARGUMENT, "--ncu: no profiled runs of %s", entry);
  mlc_ncu_match *m = calloc(e->nsteps + 1, sizeof *m);
  double *best = mlc_allocator_alloc_array(s->a, e->nsteps + 1, sizeof *best);
  if (!m || !best) { free(m); mlc_allocator_free(s->a, best); return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory"); }
  uint32_t k = 0;
  for (uint32_t i = 0; i < e->nsteps; i++) {
    const char *sym = s->plan->kernels[e->steps[i].kernel];
    if (!es->kern[i]) continue; /* collectives: NCCL's kernels, not mlc's */
    uint32_t j = 0;
    while (j < k && strcmp(m[j].symbol, sym)) j++;
    if (j < k && es->seconds[i] <= best[j]) continue;
    double avg = es->seconds[i] / (double)es->runs;
    const mlc_plan_shape *shapes[16];
    mlc_profile_launch launch;
    mlc_profile_kernel pk = step_kernel(s, es, i, avg, shapes, &launch);
    mlc_profile_verdict v;
    mlc_profile_classify(&pk, c, &v);
    m[j] = (mlc_ncu_match){.symbol = sym, .label = e->steps[i].name, .mlc = v.bound, .mlc_pct = v.pct_roof};
    best[j] = es->seconds[i];
    if (j == k) k++;
  }
  mlc_allocator_free(s->a, best);
  *out = m;
  *n = k;
  return NULL;
}

void mlc_session_set_trace(mlc_session *s, bool on) { s->trace = on; }

static mlc_status write_trace_file(const mlc_session *s, const char *path, const char *shown) {
  FILE *f = fopen(path, "w");
  if (!f) return mlc_status_make(MLC_IO, "--trace %s: cannot open: %s", shown, strerror(errno));
  char title[256], dev[200];
  s->dev->vt->describe(s->dev, dev, sizeof dev);
  snprintf(title, sizeof title, "mlc %s on %s", s->plan->model, dev);
  mlc_trace_writer w;
  mlc_trace_begin(&w, f);
  mlc_trace_options to = {title, s->comm->rank};
  mlc_trace_process(&w, &to);
  for (size_t n = 0; n < s->nevents; n++) {
    const trace_event *ev = &s->events[n];
    const mlc_plan_entry *e = &s->plan->entries[ev->entry];
    const mlc_plan_step *st = &e->steps[ev->step];
    mlc_trace_span sp = {e, st, s->plan->kernels[st->kernel], ev->start, ev->seconds};
    mlc_trace_add(&w, &sp);
  }
  mlc_trace_end(&w);
  if (ferror(f) | fclose(f)) return mlc_status_make(MLC_IO, "--trace %s: cannot write: %s", shown, strerror(errno));
  return NULL;
}

/* Reads a whole file into a block from `a`; NULL if it cannot. */
static char *slurp(mlc_allocator a, const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = NULL;
  long n = fseek(f, 0, SEEK_END) ? -1 : ftell(f);
  if (n >= 0 && !fseek(f, 0, SEEK_SET) && (buf = mlc_allocator_alloc(a, (size_t)n + 1)) &&
      fread(buf, 1, (size_t)n, f) == (size_t)n)
    buf[n] = 0;
  else { mlc_allocator_free(a, buf); buf = NULL; }
  fclose(f);
  return buf;
}

/* With several ranks each writes "<path>.rank<r>", and rank 0 merges them
 * into <path>: one trace, one process (pid) per rank. */
mlc_status mlc_session_write_trace(const mlc_session *cs, const char *path) {
  mlc_session *s = (mlc_session *)cs;
  int world = s->comm->world;
  if (world == 1) return write_trace_file(s, path, path);
  char *mine = shard_path(s, path, s->comm->rank);
  if (!mine) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory");
  mlc_status st = write_trace_file(s, mine, path);
  mlc_allocator_free(s->a, mine);
  double failed = st != NULL;
  mlc_status cst = mlc_session_all_sum(s, &failed, 1);
  if (cst || st || failed > 0 || s->comm->rank) {
    if (!st && !cst && failed > 0) st = mlc_status_make(MLC_IO, "--trace %s: another rank could not write its part", path);
    mlc_status_free(cst ? st : NULL);
    return cst ? cst : st;
  }
  cJSON *all = cJSON_CreateObject(), *events = cJSON_CreateArray();
  cJSON_AddStringToObject(all, "displayTimeUnit", "ms");
  cJSON_AddItemToObject(all, "traceEvents", events);
  for (int r = 0; r < world && !st; r++) {
    char *part = shard_path(s, path, r), *text = part ? slurp(s->a, part) : NULL;
    cJSON *j = text ? cJSON_Parse(text) : NULL, *ev = cJSON_DetachItemFromObject(j, "traceEvents");
    if (!cJSON_IsArray(ev)) st = mlc_status_make(MLC_IO, "--trace %s: rank %d's part is missing or malformed", path, r);
    while (!st && cJSON_GetArraySize(ev) > 0) cJSON_AddItemToArray(events, cJSON_DetachItemFromArray(ev, 0));
    if (!st) remove(part);
    cJSON_Delete(ev);
    cJSON_Delete(j);
    mlc_allocator_free(s->a, text);
    mlc_allocator_free(s->a, part);
  }
  char *out = st ? NULL : cJSON_PrintUnformatted(all);
  cJSON_Delete(all);
  if (!st) {
    FILE *f = out ? fopen(path, "w") : NULL;
    bool ok = f && fputs(out, f) >= 0;
    if (f && fclose(f)) ok = false;
    if (!ok) st = mlc_status_make(MLC_IO, "--trace %s: cannot write: %s", path, strerror(errno));
  }
  free(out);
  return st;
}

mlc_status mlc_session_write_roofline(const mlc_session *s, const char *entry, const mlc_ceilings *c, const char *path) {
  entry_state *es;
  MLC_RETURN_IF_ERROR(find_entry(s, entry, &es));
  const mlc_plan_entry *e = es->e;
  if (!es->runs) return mlc_status_make(MLC_INVALID_ARGUMENT, "--roofline: no profiled runs of %s", entry);
  mlc_roofline_point *pts = mlc_allocator_alloc_array(s->a, e->nsteps + 1, sizeof *pts);
  if (!pts) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory");
  for (uint32_t i = 0; i < e->nsteps; i++) {
    double avg = es->seconds[i] / (double)es->runs;
    const mlc_plan_step *st = &e->steps[i];
    pts[i] = (mlc_roofline_point){st->name, st->bytes > 0 ? st->flops / st->bytes : 0, avg > 0 ? st->flops / avg : 0, avg,
                                  (mlc_unit)st->unit, st->products};
  }
  FILE *f = fopen(path, "w");
  mlc_status r = NULL;
  if (!f) {
    r = mlc_status_make(MLC_IO, "--roofline %s: cannot open: %s", path, strerror(errno));
  } else {
    char title[256];
    snprintf(title, sizeof title, "%s %s on %s: roofline of %u kernels", s->plan->model, entry, c->device, e->nsteps);
    mlc_profile_write_roofline_svg(f, c, pts, e->nsteps, 12, title);
    if (ferror(f) | fclose(f)) r = mlc_status_make(MLC_IO, "--roofline %s: cannot write: %s", path, strerror(errno));
  }
  mlc_allocator_free(s->a, pts);
  return r;
}
