/* The CPU executor (see exec.h): unused, to be deleted (issue 22, item 7).
 *
 * Buffers are 64-byte aligned, so kernels may use aligned vector accesses
 * on them later and no two buffers share a cache line.  Each step's argument
 * array (inputs then output, as kernel.h fixes) is built once at creation;
 * running is then a loop of parallel_for calls.
 */
#include "runtime/cpu/exec.h"

#include "runtime/cpu/convert.h"

#include <string.h>
#include <time.h>

#define BUF_ALIGN 64

typedef struct {
  mlc_cpu_step step;
  void **bufs; /* [nin + 1] */
  double seconds;
} exec_step;

struct mlc_cpu_exec {
  mlc_allocator alloc;
  const mlc_program *p;
  const mlc_func *f;
  mlc_cpu_pool *pool;
  void **raw;   /* [f->n] blocks as allocated, NULL for views */
  void **buf;   /* [f->n] aligned data pointers; views point at their source */
  exec_step *steps;
  uint32_t nsteps;
  bool profiling;
};

static size_t node_bytes(const mlc_node *n) {
  return (size_t)mlc_type_numel(&n->type) * (size_t)mlc_dtype_size(n->type.dtype);
}

/* A CONST node is a scalar of its dtype, broadcast by its users. */
static void fill_const(void *dst, const mlc_node *n) {
  double v = n->a.f;
  switch (n->type.dtype) {
  case MLC_DT_F32: { float x = (float)v; memcpy(dst, &x, 4); break; }
  case MLC_DT_I32: { int32_t x = (int32_t)v; memcpy(dst, &x, 4); break; }
  case MLC_DT_I64: { int64_t x = (int64_t)v; memcpy(dst, &x, 8); break; }
  case MLC_DT_BOOL: { uint8_t x = v != 0; memcpy(dst, &x, 1); break; }
  case MLC_DT_BF16: { uint16_t h = mlc_f32_to_bf16((float)v); memcpy(dst, &h, 2); break; }
  case MLC_DT_F16: { uint16_t h = mlc_f32_to_f16((float)v); memcpy(dst, &h, 2); break; }
  default: break;
  }
}

void mlc_cpu_exec_destroy(mlc_cpu_exec *e) {
  if (!e) return;
  if (e->raw)
    for (uint32_t i = 0; i < e->f->n; i++) mlc_allocator_free(e->alloc, e->raw[i]);
  if (e->steps)
    for (uint32_t i = 0; i < e->nsteps; i++) mlc_allocator_free(e->alloc, e->steps[i].bufs);
  mlc_allocator_free(e->alloc, e->steps);
  mlc_allocator_free(e->alloc, e->raw);
  mlc_allocator_free(e->alloc, e->buf);
  mlc_allocator_free(e->alloc, e);
}

mlc_status mlc_cpu_exec_create(const mlc_program *p, const mlc_func *f, const mlc_cpu_step *steps, uint32_t nsteps,
                               mlc_cpu_pool *pool, mlc_allocator a, mlc_cpu_exec **out_exec) {
  *out_exec = NULL;
  mlc_cpu_exec *e = mlc_allocator_alloc(a, sizeof *e);
  if (!e) return mlc_status_make(MLC_OUT_OF_MEMORY, "executor: out of memory");
  memset(e, 0, sizeof *e);
  e->alloc = a;
  e->p = p;
  e->f = f;
  e->pool = pool;
  mlc_status st = NULL;
  /* Zeroed as soon as they exist: destroy frees what they point to. */
  if ((e->raw = mlc_allocator_alloc_array(a, f->n ? f->n : 1, sizeof *e->raw)))
    memset(e->raw, 0, (f->n ? f->n : 1) * sizeof *e->raw);
  if ((e->steps = mlc_allocator_alloc_array(a, nsteps ? nsteps : 1, sizeof *e->steps))) {
    memset(e->steps, 0, (nsteps ? nsteps : 1) * sizeof *e->steps);
    e->nsteps = nsteps;
  }
  e->buf = mlc_allocator_alloc_array(a, f->n ? f->n : 1, sizeof *e->buf);
  if (!e->raw || !e->buf || !e->steps) {
    st = mlc_status_make(MLC_OUT_OF_MEMORY, "executor: out of memory");
    goto fail;
  }

  for (uint32_t i = 0; i < f->n; i++) {
    const mlc_node *n = &f->nodes[i];
    if (mlc_ops[n->op].flags & MLC_F_VIEW) {
      e->buf[i] = e->buf[n->in[0]]; /* inputs come first, so it is set */
      continue;
    }
    size_t bytes = node_bytes(n);
    e->raw[i] = mlc_allocator_alloc(a, bytes + BUF_ALIGN);
    if (!e->raw[i]) {
      st = mlc_status_make(MLC_OUT_OF_MEMORY, "executor: out of memory for node %%%u (%zu bytes)", i, bytes);
      goto fail;
    }
    uintptr_t u = ((uintptr_t)e->raw[i] + BUF_ALIGN - 1) & ~(uintptr_t)(BUF_ALIGN - 1);
    e->buf[i] = (void *)u;
    memset(e->buf[i], 0, bytes);
    if (n->op == MLC_OP_CONST) fill_const(e->buf[i], n);
  }

  bool *has = mlc_allocator_alloc_array(a, f->n ? f->n : 1, sizeof *has);
  if (!has) {
    st = mlc_status_make(MLC_OUT_OF_MEMORY, "executor: out of memory");
    goto fail;
  }
  memset(has, 0, (f->n ? f->n : 1) * sizeof *has);
  for (uint32_t s = 0; s < nsteps && !st; s++) {
    const mlc_cpu_step *cs = &steps[s];
    if (cs->node >= f->n || !cs->fn || cs->items < 0) {
      st = mlc_status_make(MLC_INVALID_ARGUMENT, "executor: step %u (%s) is malformed", s, cs->name ? cs->name : "?");
      break;
    }
    const mlc_node *n = &f->nodes[cs->node];
    unsigned fl = mlc_ops[n->op].flags;
    if ((fl & (MLC_F_LEAF | MLC_F_VIEW)) || has[cs->node]) {
      st = mlc_status_make(MLC_INVALID_ARGUMENT, "executor: step %u (%s) is for node %%%u, which %s", s,
                           cs->name ? cs->name : "?", cs->node,
                           has[cs->node] ? "already has a step" : "needs no kernel");
      break;
    }
    has[cs->node] = true;
    exec_step *es = &e->steps[s];
    es->step = *cs;
    es->bufs = mlc_allocator_alloc_array(a, (size_t)n->nin + 1, sizeof *es->bufs);
    if (!es->bufs) {
      st = mlc_status_make(MLC_OUT_OF_MEMORY, "executor: out of memory");
      break;
    }
    for (uint32_t k = 0; k < n->nin; k++) es->bufs[k] = e->buf[n->in[k]];
    es->bufs[n->nin] = e->buf[cs->node];
  }
  for (uint32_t i = 0; i < f->n && !st; i++) {
    unsigned fl = mlc_ops[f->nodes[i].op].flags;
    if (!(fl & (MLC_F_LEAF | MLC_F_VIEW)) && !has[i])
      st = mlc_status_make(MLC_INVALID_ARGUMENT, "executor: node %%%u (%s) has no kernel", i, mlc_ops[f->nodes[i].op].name);
  }
  mlc_allocator_free(a, has);
  if (st) goto fail;
  *out_exec = e;
  return NULL;
fail:
  mlc_cpu_exec_destroy(e);
  return st;
}

mlc_status mlc_cpu_exec_set_input(mlc_cpu_exec *e, const char *name, const void *data, size_t bytes) {
  for (uint32_t i = 0; i < e->f->inputs.n; i++) {
    const mlc_node *n = &e->f->nodes[e->f->inputs.v[i]];
    if (strcmp(n->a.name, name)) continue;
    if (bytes != node_bytes(n))
      return mlc_status_make(MLC_INVALID_ARGUMENT, "input '%s' is %zu bytes, got %zu", name, node_bytes(n), bytes);
    memcpy(e->buf[e->f->inputs.v[i]], data, bytes);
    return NULL;
  }
  return mlc_status_make(MLC_NOT_FOUND, "entry point '%s' has no input named '%s'", e->f->name, name);
}

mlc_status mlc_cpu_exec_set_param(mlc_cpu_exec *e, uint32_t param, const void *data, size_t bytes) {
  if (param >= e->p->nparams)
    return mlc_status_make(MLC_NOT_FOUND, "parameter %u does not exist (the model has %u)", param, e->p->nparams);
  const mlc_type *t = &e->p->params[param].type;
  size_t want = (size_t)mlc_type_numel(t) * (size_t)mlc_dtype_size(t->dtype);
  if (bytes != want)
    return mlc_status_make(MLC_INVALID_ARGUMENT, "parameter '%s' is %zu bytes, got %zu", e->p->params[param].name, want, bytes);
  for (uint32_t i = 0; i < e->f->n; i++) {
    const mlc_node *n = &e->f->nodes[i];
    if (n->op == MLC_OP_PARAM && n->a.param == param) memcpy(e->buf[i], data, bytes);
  }
  return NULL;
}

typedef struct {
  mlc_cpu_kernel_fn fn;
  void **bufs;
} task;

static void run_task(void *ctx, int64_t begin, int64_t end) {
  task *t = ctx;
  t->fn(t->bufs, begin, end);
}

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

mlc_status mlc_cpu_exec_run(mlc_cpu_exec *e) {
  for (uint32_t s = 0; s < e->nsteps; s++) {
    exec_step *es = &e->steps[s];
    task t = {es->step.fn, es->bufs};
    double t0 = e->profiling ? now_seconds() : 0;
    mlc_cpu_pool_parallel_for(e->pool, es->step.items, 0, run_task, &t);
    if (e->profiling) es->seconds += now_seconds() - t0;
  }
  return NULL;
}

void mlc_cpu_exec_set_profiling(mlc_cpu_exec *e, bool on) { e->profiling = on; }

double mlc_cpu_exec_step_seconds(const mlc_cpu_exec *e, uint32_t i) { return i < e->nsteps ? e->steps[i].seconds : 0; }

void *mlc_cpu_exec_node_buffer(const mlc_cpu_exec *e, uint32_t node) { return node < e->f->n ? e->buf[node] : NULL; }

mlc_status mlc_cpu_exec_output(const mlc_cpu_exec *e, const char *name, const void **out_data, const mlc_type **out_type) {
  for (uint32_t i = 0; i < e->f->noutputs; i++) {
    if (strcmp(e->f->outputs[i].name, name)) continue;
    *out_data = e->buf[e->f->outputs[i].node];
    *out_type = &e->f->nodes[e->f->outputs[i].node].type;
    return NULL;
  }
  return mlc_status_make(MLC_NOT_FOUND, "entry point '%s' has no output named '%s'", e->f->name, name);
}
