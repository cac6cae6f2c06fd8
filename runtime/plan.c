/* Plan reader: parses and validates the binary format described in plan.h.
 *
 * The parser runs twice over the bytes.  The first run checks everything
 * and counts the memory the parsed plan needs; the second, over one block of
 * exactly that size, fills it in.  So a plan costs one allocation, a failed
 * parse costs none, and the failing-allocator tests have one case to try.
 */
#include "runtime/plan.h"
#include "runtime/quant.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <xxhash.h>

typedef struct {
  const uint8_t *base, *p, *end;
  uint8_t *mem;   /* NULL in the counting run */
  size_t used;
  mlc_status err;
} rd;

static bool bad(rd *r, const char *what) {
  if (!r->err) r->err = mlc_status_make(MLC_DATA_LOSS, "corrupt plan: %s at byte %zu", what, (size_t)(r->p - r->base));
  return false;
}

static void *take(rd *r, size_t n) {
  size_t off = (r->used + 15) & ~(size_t)15;
  r->used = off + n;
  return r->mem ? r->mem + off : NULL;
}

static bool need(rd *r, size_t n, const char *what) {
  if ((size_t)(r->end - r->p) < n) return bad(r, what);
  return true;
}

static bool u8(rd *r, uint8_t *v) {
  if (!need(r, 1, "truncated")) return false;
  *v = *r->p++;
  return true;
}

static bool u32(rd *r, uint32_t *v) {
  if (!need(r, 4, "truncated")) return false;
  *v = (uint32_t)r->p[0] | (uint32_t)r->p[1] << 8 | (uint32_t)r->p[2] << 16 | (uint32_t)r->p[3] << 24;
  r->p += 4;
  return true;
}

static bool u64(rd *r, uint64_t *v) {
  uint32_t lo, hi;
  if (!u32(r, &lo) || !u32(r, &hi)) return false;
  *v = (uint64_t)hi << 32 | lo;
  return true;
}

static bool f64(rd *r, double *v) {
  uint64_t bits;
  if (!u64(r, &bits)) return false;
  memcpy(v, &bits, sizeof *v);
  return true;
}

/* A count of records, each at least `min_bytes` long: refuses counts the
 * remaining bytes cannot hold, so a corrupt count never drives a huge
 * allocation. */
static bool count(rd *r, uint32_t *n, size_t min_bytes, const char *what) {
  if (!u32(r, n)) return false;
  if ((uint64_t)*n * min_bytes > (uint64_t)(r->end - r->p)) return bad(r, what);
  return true;
}

static bool str(rd *r, const char **s) {
  uint32_t n;
  if (!u32(r, &n) || !need(r, n, "string runs past the end")) return false;
  if (memchr(r->p, 0, n)) return bad(r, "string contains a NUL byte");
  char *d = take(r, (size_t)n + 1);
  if (d) {
    memcpy(d, r->p, n);
    d[n] = 0;
  }
  *s = d;
  r->p += n;
  return true;
}

uint64_t mlc_plan_shape_bytes(const mlc_plan_shape *s) {
  static const uint8_t size[] = {0, 4, 2, 2, 4, 8, 1, 1, 1};
  uint64_t n = s->dtype < sizeof size ? size[s->dtype] : 0;
  for (int i = 0; i < s->rank; i++) n *= (uint64_t)s->dims[i];
  return n;
}

static bool shape(rd *r, mlc_plan_shape *s) {
  memset(s, 0, sizeof *s);
  if (!u8(r, &s->dtype) || !u8(r, &s->rank)) return false;
  if (s->dtype < 1 || s->dtype > 8) return bad(r, "unknown dtype");
  if (s->rank > MLC_PLAN_MAX_RANK) return bad(r, "rank above 6");
  uint64_t numel = 1;
  for (int i = 0; i < s->rank; i++) {
    uint64_t d;
    if (!u64(r, &d)) return false;
    if (d == 0 || d > ((uint64_t)1 << 48) || numel * d > ((uint64_t)1 << 48)) return bad(r, "dimension out of range");
    s->dims[i] = (int64_t)d;
    numel *= d;
  }
  return true;
}

static bool ids(rd *r, uint32_t n, uint32_t limit, const uint32_t **out, const char *what) {
  uint32_t *v = take(r, (size_t)n * sizeof *v + 1);
  for (uint32_t i = 0; i < n; i++) {
    uint32_t x;
    if (!u32(r, &x)) return false;
    if (x >= limit) return bad(r, what);
    if (v) v[i] = x;
  }
  *out = v;
  return true;
}

static bool entry(rd *r, mlc_plan_entry *e, const mlc_plan *pl) {
  if (!str(r, &e->name) || !u64(r, &e->arena_bytes)) return false;
  if (!count(r, &e->nvalues, 27, "value count too large")) return false;
  mlc_plan_value *vals = take(r, (size_t)e->nvalues * sizeof *vals + 1);
  for (uint32_t i = 0; i < e->nvalues; i++) {
    mlc_plan_value v;
    uint64_t off;
    if (!shape(r, &v.shape) || !u64(r, &off) || !u32(r, &v.param) || !u8(r, &v.is_const) || !f64(r, &v.value) ||
        !u8(r, &v.rank_slice) || !u32(r, &v.view_of))
      return false;
    if (v.view_of != MLC_PLAN_NO_VALUE && v.view_of >= i) return bad(r, "a value views itself or a later value");
    if (v.rank_slice > 1 || (v.rank_slice && (v.param != MLC_PLAN_NO_PARAM || v.shape.rank != 2 ||
                                              v.shape.dims[1] != MLC_PLAN_SHARD_ROW)))
      return bad(r, "a rank slice must be an arena value [rows, 4096]");
    v.offset = (int64_t)off;
    if (v.is_const > 1 || (v.is_const && (v.shape.rank != 0 || v.param != MLC_PLAN_NO_PARAM)))
      return bad(r, "a constant must be an arena scalar");
    if (v.param == MLC_PLAN_NO_PARAM) {
      uint64_t size = mlc_plan_shape_bytes(&v.shape);
      if (off > e->arena_bytes || size > e->arena_bytes - off) return bad(r, "value outside the arena");
    } else if (v.param >= pl->nparams) {
      return bad(r, "value refers to a parameter that does not exist");
    }
    if (vals) vals[i] = v;
  }
  e->values = vals;
  for (int io = 0; io < 2; io++) {
    uint32_t *n = io ? &e->noutputs : &e->ninputs;
    if (!count(r, n, 8, "input/output count too large")) return false;
    mlc_plan_io *v = take(r, (size_t)*n * sizeof *v + 1);
    for (uint32_t i = 0; i < *n; i++) {
      mlc_plan_io x;
      if (!str(r, &x.name) || !u32(r, &x.value)) return false;
      if (x.value >= e->nvalues) return bad(r, "input or output refers to a value that does not exist");
      if (v) v[i] = x;
    }
    if (io) e->outputs = v;
    else e->inputs = v;
  }
  if (!count(r, &e->nsteps, 48, "step count too large")) return false;
  mlc_plan_step *steps = take(r, (size_t)e->nsteps * sizeof *steps + 1);
  for (uint32_t i = 0; i < e->nsteps; i++) {
    mlc_plan_step s;
    if (!u32(r, &s.kernel) || !str(r, &s.name) || !str(r, &s.scope) || !u32(r, &s.stream)) return false;
    if (s.kernel >= pl->nkernels) return bad(r, "step refers to a kernel that does not exist");
    if (!count(r, &s.nwait, 4, "wait count too large") || !ids(r, s.nwait, i, &s.wait, "step waits on a later step")) return false;
    if (!count(r, &s.nargs, 4, "argument count too large") ||
        !ids(r, s.nargs, e->nvalues, &s.args, "step argument refers to a value that does not exist"))
      return false;
    if (!u64(r, &s.work_items) || !f64(r, &s.flops) || !f64(r, &s.bytes) || !u8(r, &s.sharded) || !u8(r, &s.unit) ||
        !u8(r, &s.products))
      return false;
    if (s.sharded > 1) return bad(r, "bad sharded flag");
    if (s.unit >= MLC_PLAN_NUNITS || s.products < 1 || s.products > 3) return bad(r, "bad unit or products of a step");
    if (steps) steps[i] = s;
  }
  e->steps = steps;
  return true;
}

/* A blob: like a string, but any bytes, copied 16-byte aligned with a NUL
 * after them. */
static bool blob(rd *r, const uint8_t **out, uint32_t *out_n) {
  uint32_t n;
  if (!u32(r, &n) || !need(r, n, "blob runs past the end")) return false;
  uint8_t *d = take(r, (size_t)n + 1);
  if (d) {
    memcpy(d, r->p, n);
    d[n] = 0; /* so that source text is a C string */
  }
  *out = d;
  *out_n = n;
  r->p += n;
  return true;
}

static bool executables(rd *r, mlc_plan *pl) {
  if (!count(r, &pl->nexecutables, 8, "executable count too large")) return false;
  mlc_plan_executable *x = take(r, (size_t)pl->nexecutables * sizeof *x + 1);
  for (uint32_t i = 0; i < pl->nexecutables; i++) {
    mlc_plan_executable e;
    if (!str(r, &e.format) || !blob(r, &e.code, &e.bytes)) return false;
    if (e.format && !*e.format) return bad(r, "an executable without a format");
    if (x) x[i] = e;
  }
  pl->executables = x;
  return true;
}

/* The kernel table: each kernel's symbol and dispatch record. */
static bool kernels(rd *r, mlc_plan *pl) {
  if (!count(r, &pl->nkernels, 28, "kernel count too large")) return false;
  const char **names = take(r, (size_t)pl->nkernels * sizeof *names + 1);
  mlc_plan_dispatch *ds = take(r, (size_t)pl->nkernels * sizeof *ds + 1);
  for (uint32_t i = 0; i < pl->nkernels; i++) {
    const char *k;
    mlc_plan_dispatch d;
    if (!str(r, &k) || !u32(r, &d.executable) || !u32(r, &d.nargs) || !u64(r, &d.scratch)) return false;
    if (d.executable >= pl->nexecutables && d.executable != MLC_PLAN_NO_EXECUTABLE)
      return bad(r, "a kernel's executable does not exist");
    if (d.scratch > ((uint64_t)1 << 48)) return bad(r, "a kernel's scratch block is out of range");
    if (!count(r, &d.nlaunch, 32, "launch count too large")) return false;
    if (d.nlaunch > MLC_PLAN_MAX_LAUNCH) return bad(r, "a kernel has more launches than MLC_PLAN_MAX_LAUNCH");
    if (d.executable != MLC_PLAN_NO_EXECUTABLE && !d.nlaunch) return bad(r, "a kernel with an executable has no launch");
    mlc_plan_launch *ls = take(r, (size_t)d.nlaunch * sizeof *ls + 1);
    for (uint32_t l = 0; l < d.nlaunch; l++) {
      mlc_plan_launch L;
      if (!str(r, &L.entry)) return false;
      for (int j = 0; j < 3; j++)
        if (!u32(r, &L.grid[j])) return false;
      for (int j = 0; j < 3; j++)
        if (!u32(r, &L.block[j])) return false;
      if (!u32(r, &L.smem)) return false;
      if (L.entry && !*L.entry) return bad(r, "a launch without an entry point");
      /* Either a grid of at least one block in each dimension, or none at
       * all (native code, whose work items decide). */
      bool none = !L.grid[0] && !L.grid[1] && !L.grid[2], some = L.grid[0] && L.grid[1] && L.grid[2];
      if (!none && !some) return bad(r, "a launch's grid has an empty dimension");
      if ((uint64_t)L.block[0] * L.block[1] * L.block[2] > 65536 || L.block[0] > 65536 || L.block[1] > 65536 ||
          L.block[2] > 65536)
        return bad(r, "a launch's block is too large");
      if (ls) ls[l] = L;
    }
    d.launch = ls;
    if (!blob(r, &d.extra, &d.extra_bytes)) return false;
    if (names) names[i] = k;
    if (ds) ds[i] = d;
  }
  pl->kernels = names;
  pl->dispatch = ds;
  return true;
}

static bool payload(rd *r, mlc_plan *pl) {
  if (!str(r, &pl->model)) return false;
  if (!count(r, &pl->nparams, 24, "parameter count too large")) return false;
  mlc_plan_param *params = take(r, (size_t)pl->nparams * sizeof *params + 1);
  for (uint32_t i = 0; i < pl->nparams; i++) {
    mlc_plan_param p;
    if (!str(r, &p.name) || !shape(r, &p.shape) || !u8(r, &p.init) || !f64(r, &p.a) || !f64(r, &p.b) || !u8(r, &p.role) ||
        !u8(r, &p.sharded) || !u32(r, &p.flat) || !u64(r, &p.flat_offset))
      return false;
    if (p.init > 4) return bad(r, "unknown initialiser");
    if (p.role > 5) return bad(r, "unknown parameter role");
    if (p.role == 5 && (p.flat || p.sharded || (p.shape.dtype != 2 && p.shape.dtype != 3) || p.flat_offset >= pl->nparams))
      return bad(r, "a weight's shadow must be bf16 or f16, of a weight of its own");
    if (p.role == 4 && (p.flat || p.sharded || p.shape.dtype != 4 || p.shape.rank != 2 || (p.a != 4 && p.a != 8) ||
                        !(p.b >= 8 && p.b <= 65536) || p.flat_offset >= pl->nparams || p.init > (MLC_PLAN_QUANT_ASYM | MLC_PLAN_QUANT_BF16)))
      return bad(r, "a quantised weight must be i32 [n, words] of 4 or 8 bits, with a group, a scheme and its f32 weight");
    if (p.sharded > 1 || (p.sharded && (p.shape.rank != 2 || p.shape.dims[1] != MLC_PLAN_SHARD_ROW || p.shape.dtype != 1)))
      return bad(r, "a sharded parameter must be f32 [rows, 4096]");
    if (p.flat > pl->nparams) return bad(r, "a weight's flat parameter does not exist");
    if (params) params[i] = p;
  }
  pl->params = params;
  for (uint32_t i = 0; params && i < pl->nparams; i++) {
    const mlc_plan_param *p = &params[i];
    if (p->role == 4) {
      const mlc_plan_param *w = &params[p->flat_offset];
      int64_t k = w->shape.rank == 2 ? w->shape.dims[1] : 0, g = (int64_t)p->b;
      if (w->role != 0 || w->flat || w->shape.dtype != 1 || w->shape.dims[0] != p->shape.dims[0] || k % g ||
          p->shape.dims[1] != mlc_quant_words(k, (int)p->a, (int)g, p->init))
        return bad(r, "a quantised weight does not match its f32 weight");
      continue;
    }
    if (p->role == 5) {
      const mlc_plan_param *w = &params[p->flat_offset];
      bool same = w->shape.rank == p->shape.rank;
      for (int d = 0; same && d < p->shape.rank; d++) same = w->shape.dims[d] == p->shape.dims[d];
      if (w->role != 0 || w->flat || w->shape.dtype != 1 || !same) return bad(r, "a weight's shadow does not match its f32 weight");
      continue;
    }
    if (!p->flat) continue;
    const mlc_plan_param *fl = &params[p->flat - 1];
    uint64_t n = mlc_plan_shape_bytes(&p->shape) / 4, cap = (uint64_t)fl->shape.dims[0] * MLC_PLAN_SHARD_ROW;
    if (!fl->sharded || fl->role != 2 || p->shape.dtype != 1 || p->flat_offset > cap || n > cap - p->flat_offset)
      return bad(r, "a weight does not fit in its flat parameter");
  }
  if (!count(r, &pl->nties, 8, "tie count too large")) return false;
  mlc_plan_tie *ties = take(r, (size_t)pl->nties * sizeof *ties + 1);
  for (uint32_t i = 0; i < pl->nties; i++) {
    mlc_plan_tie t;
    if (!str(r, &t.name) || !u32(r, &t.param)) return false;
    if (t.param >= pl->nparams || (params && params[t.param].role != 0)) return bad(r, "a tie names no model weight");
    if (ties) ties[i] = t;
  }
  pl->ties = ties;
  if (!executables(r, pl) || !kernels(r, pl)) return false;
  if (!count(r, &pl->nentries, 28, "entry count too large")) return false;
  mlc_plan_entry *entries = take(r, (size_t)pl->nentries * sizeof *entries + 1);
  for (uint32_t i = 0; i < pl->nentries; i++) {
    mlc_plan_entry e;
    memset(&e, 0, sizeof e);
    if (!entry(r, &e, pl)) return false;
    if (entries) entries[i] = e;
  }
  pl->entries = entries;
  mlc_plan_schedule *sc = &pl->schedule;
  if (!f64(r, &sc->lr) || !f64(r, &sc->min_lr) || !u64(r, &sc->warmup) || !u64(r, &sc->steps) || !u8(r, &sc->decay))
    return false;
  if (!(sc->lr >= 0 && sc->lr < 1e30) || !(sc->min_lr >= 0 && sc->min_lr <= sc->lr) || sc->decay > MLC_PLAN_DECAY_LINEAR ||
      sc->warmup > (1ull << 62) || sc->steps > (1ull << 62))
    return bad(r, "a learning-rate schedule out of range");
  if (r->p != r->end) return bad(r, "trailing bytes after the schedule");
  return true;
}

/* What is wrong with value i of e as a view (NULL: nothing, or no view):
 * its root must have storage of its own, in the same place, around the
 * view's bytes.  A rank slice's bytes are its nominal [rows, 4096], of
 * which each rank holds a part. */
static const char *view_error(const mlc_plan_entry *e, uint32_t i) {
  const mlc_plan_value *v = &e->values[i];
  if (v->view_of == MLC_PLAN_NO_VALUE) return NULL;
  const mlc_plan_value *root = &e->values[v->view_of];
  if (root->view_of != MLC_PLAN_NO_VALUE) return "views a value that is a view itself";
  if (root->param != v->param) return "views a value in another place (the arena, or another parameter)";
  if (v->param != MLC_PLAN_NO_PARAM) return NULL; /* the whole parameter: checked below */
  uint64_t bytes = mlc_plan_shape_bytes(&v->shape), rbytes = mlc_plan_shape_bytes(&root->shape);
  if (v->offset < root->offset || (uint64_t)(v->offset - root->offset) > rbytes ||
      bytes > rbytes - (uint64_t)(v->offset - root->offset))
    return "views bytes outside its root";
  return NULL;
}

mlc_status mlc_plan_parse(const void *bytes, size_t n, mlc_allocator a, mlc_plan **out_plan) {
  *out_plan = NULL;
  const uint8_t *b = bytes;
  if (n < MLC_PLAN_HEADER_BYTES || memcmp(b, MLC_PLAN_MAGIC, 8))
    return mlc_status_make(MLC_DATA_LOSS, "not an mlc plan (bad magic or shorter than its header)");
  rd h = {b, b + 8, b + MLC_PLAN_HEADER_BYTES, NULL, 0, NULL};
  uint32_t version, reserved;
  uint64_t len, sum;
  if (!u32(&h, &version) || !u32(&h, &reserved) || !u64(&h, &len) || !u64(&h, &sum)) return h.err;
  if (version != MLC_PLAN_VERSION)
    return mlc_status_make(MLC_DATA_LOSS, "plan format version %u; this runtime reads version %u (recompile the model)",
                           version, MLC_PLAN_VERSION);
  if (len != n - MLC_PLAN_HEADER_BYTES)
    return mlc_status_make(MLC_DATA_LOSS, "plan payload is %llu bytes but %zu follow the header (truncated?)",
                           (unsigned long long)len, n - MLC_PLAN_HEADER_BYTES);
  if (XXH64(b + MLC_PLAN_HEADER_BYTES, (size_t)len, 0) != sum)
    return mlc_status_make(MLC_DATA_LOSS, "plan checksum mismatch: the plan is corrupt");
  mlc_plan tmp;
  memset(&tmp, 0, sizeof tmp);
  rd r = {b, b + MLC_PLAN_HEADER_BYTES, b + n, NULL, 0, NULL};
  if (!payload(&r, &tmp)) return r.err;
  size_t total = ((sizeof(mlc_plan) + 15) & ~(size_t)15) + r.used + 16;
  uint8_t *mem = mlc_allocator_alloc(a, total);
  if (!mem) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory for a %zu-byte plan", total);
  mlc_plan *pl = (mlc_plan *)mem;
  memset(pl, 0, sizeof *pl);
  rd r2 = {b, b + MLC_PLAN_HEADER_BYTES, b + n, mem + ((sizeof(mlc_plan) + 15) & ~(size_t)15), 0, NULL};
  if (!payload(&r2, pl)) { /* cannot happen: the same bytes passed above */
    mlc_allocator_free(a, mem);
    return r2.err;
  }
  pl->allocator = a;
  /* Checks that need the parameters and kernels, which the counting run had
   * not kept. */
  for (uint32_t k = 0; k < pl->nentries; k++) {
    for (uint32_t i = 0; i < pl->entries[k].nsteps; i++) {
      const mlc_plan_step *s = &pl->entries[k].steps[i];
      if (s->nargs == pl->dispatch[s->kernel].nargs) continue;
      mlc_status st = mlc_status_make(MLC_DATA_LOSS, "corrupt plan: step %s of entry %s passes %u arguments to kernel %s, "
                                      "which takes %u", s->name, pl->entries[k].name, s->nargs, pl->kernels[s->kernel],
                                      pl->dispatch[s->kernel].nargs);
      mlc_allocator_free(a, mem);
      return st;
    }
    for (uint32_t i = 0; i < pl->entries[k].nvalues; i++) {
      const char *why = view_error(&pl->entries[k], i);
      if (!why) continue;
      mlc_status st = mlc_status_make(MLC_DATA_LOSS, "corrupt plan: value %u of entry %s %s", i, pl->entries[k].name, why);
      mlc_allocator_free(a, mem);
      return st;
    }
    for (uint32_t i = 0; i < pl->entries[k].nvalues; i++) {
      const mlc_plan_value *v = &pl->entries[k].values[i];
      if (v->param == MLC_PLAN_NO_PARAM) continue;
      /* A value may view a parameter with another shape (a reshape), but
       * not with another dtype or size. */
      const mlc_plan_shape *ps = &pl->params[v->param].shape;
      if (ps->dtype != v->shape.dtype || mlc_plan_shape_bytes(ps) != mlc_plan_shape_bytes(&v->shape)) {
        mlc_status st = mlc_status_make(MLC_DATA_LOSS, "corrupt plan: entry %s views parameter %s with another dtype or size",
                                        pl->entries[k].name, pl->params[v->param].name);
        mlc_allocator_free(a, mem);
        return st;
      }
    }
  }
  *out_plan = pl;
  return NULL;
}

void mlc_plan_free(mlc_plan *plan) {
  if (plan) mlc_allocator_free(plan->allocator, plan);
}

const mlc_plan_entry *mlc_plan_find_entry(const mlc_plan *plan, const char *name) {
  for (uint32_t i = 0; i < plan->nentries; i++)
    if (!strcmp(plan->entries[i].name, name)) return &plan->entries[i];
  return NULL;
}

const mlc_plan_dispatch *mlc_plan_find_kernel(const mlc_plan *plan, const char *symbol) {
  for (uint32_t i = 0; i < plan->nkernels; i++)
    if (!strcmp(plan->kernels[i], symbol)) return &plan->dispatch[i];
  return NULL;
}

bool mlc_plan_read_u8(mlc_plan_cursor *c, uint8_t *v) {
  if (c->end - c->p < 1) return false;
  *v = *c->p++;
  return true;
}

bool mlc_plan_read_u32(mlc_plan_cursor *c, uint32_t *v) {
  if (c->end - c->p < 4) return false;
  *v = (uint32_t)c->p[0] | (uint32_t)c->p[1] << 8 | (uint32_t)c->p[2] << 16 | (uint32_t)c->p[3] << 24;
  c->p += 4;
  return true;
}

bool mlc_plan_read_u64(mlc_plan_cursor *c, uint64_t *v) {
  uint32_t lo, hi;
  if (c->end - c->p < 8) return false;
  mlc_plan_read_u32(c, &lo);
  mlc_plan_read_u32(c, &hi);
  *v = (uint64_t)hi << 32 | lo;
  return true;
}

double mlc_plan_lr(const mlc_plan_schedule *s, uint64_t step, uint64_t total) {
  if (step < s->warmup) return s->lr * (double)(step + 1) / (double)s->warmup;
  if (s->decay == MLC_PLAN_DECAY_NONE) return s->lr;
  if (total <= s->warmup || step >= total) return s->min_lr;
  double r = (double)(step - s->warmup) / (double)(total - s->warmup);
  double coeff = s->decay == MLC_PLAN_DECAY_COSINE ? 0.5 * (1.0 + cos(3.14159265358979323846 * r)) : 1.0 - r;
  return s->min_lr + coeff * (s->lr - s->min_lr);
}

mlc_status mlc_plan_read_file(const char *path, mlc_allocator a, mlc_plan **out_plan) {
  *out_plan = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) return mlc_status_make(errno == ENOENT ? MLC_NOT_FOUND : MLC_IO, "%s: cannot open: %s", path, strerror(errno));
  uint8_t head[MLC_PLAN_HEADER_BYTES];
  size_t got = fread(head, 1, sizeof head, f);
  mlc_status st = NULL;
  uint64_t len = 0;
  if (got < sizeof head || memcmp(head, MLC_PLAN_MAGIC, 8)) {
    st = ferror(f) ? mlc_status_make(MLC_IO, "%s: cannot read: %s", path, strerror(errno))
                   : mlc_status_make(MLC_DATA_LOSS, "%s: not an mlc plan (it does not start with \"%s\"); "
                                     "mlc compile --target cuda|spirv -o DIR writes one as DIR/<name>.mlcplan", path,
                                     MLC_PLAN_MAGIC);
  } else {
    for (int i = 7; i >= 0; i--) len = len << 8 | head[16 + i]; /* payload_bytes, little-endian */
    /* The file's size first, so that a corrupt length allocates nothing. */
    long size = fseek(f, 0, SEEK_END) ? -1 : ftell(f);
    if (size < 0 || fseek(f, (long)sizeof head, SEEK_SET))
      st = mlc_status_make(MLC_IO, "%s: cannot read: %s", path, strerror(errno));
    else if ((uint64_t)size - sizeof head != len)
      st = mlc_status_make(MLC_DATA_LOSS, "%s: its header says %llu bytes of plan follow it, but %llu do (truncated, or "
                           "not written whole?)", path, (unsigned long long)len,
                           (unsigned long long)((uint64_t)size - sizeof head));
  }
  uint8_t *buf = st ? NULL : mlc_allocator_alloc(a, (size_t)len + sizeof head);
  if (!st && !buf)
    st = mlc_status_make(MLC_OUT_OF_MEMORY, "%s: out of memory for a %llu-byte plan", path, (unsigned long long)len);
  if (!st) {
    memcpy(buf, head, sizeof head);
    size_t n = sizeof head + fread(buf + sizeof head, 1, (size_t)len, f);
    if (ferror(f)) st = mlc_status_make(MLC_IO, "%s: cannot read: %s", path, strerror(errno));
    else if ((st = mlc_plan_parse(buf, n, a, out_plan))) st = mlc_status_annotate(st, "%s", path);
  }
  if (buf) mlc_allocator_free(a, buf);
  fclose(f);
  return st;
}
