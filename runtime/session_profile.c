/* A session's profile output: the table of steps, longest first, each
 * classified against the device's ceilings, the matches that `--ncu`
 * compares with Nsight Compute's, the Chrome trace (one file per rank,
 * merged by rank 0) and the roofline.  session.c times the steps;
 * runtime/profile.c holds the ceilings, the classifier and the writers of
 * both files, which this one feeds. */
#include "runtime/session_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "runtime/ncu.h"
#include "runtime/profile.h"

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
  double written = st->nargs ? (double)mlc_plan_shape_bytes(shapes[n - 1]) : 0; /* the output, last */
  return (mlc_profile_kernel){st->name, st->flops, st->bytes, seconds, shapes, n, (mlc_unit)st->unit, st->products,
                              known && launch->grid ? launch : NULL, written, s->flushing};
}

static void fmt_rate(char *buf, size_t n, double per_s) {
  if (per_s >= 1e12) snprintf(buf, n, "%.2fT", per_s / 1e12);
  else snprintf(buf, n, "%.1fG", per_s / 1e9);
}

/* The time of an entry's steps by op and unit ("fused" on bf16 tensor
 * cores is a GEMM program; on fp32, elementwise): the op is the step's name
 * up to its '%'.  Past 47 groups, the rest share one, "other". */
#define BY_OP_MAX 48
typedef struct {
  char key[40];
  double seconds;
  uint32_t steps;
} by_op;

static void add_by_op(by_op *g, uint32_t *ng, const char *name, const char *unit, double seconds) {
  char key[40];
  int len = (int)strcspn(name, "%");
  snprintf(key, sizeof key, "%.*s (%s)", len > 24 ? 24 : len, name, unit);
  uint32_t i = 0;
  while (i < *ng && strcmp(g[i].key, key)) i++;
  if (i == *ng) {
    if (*ng == BY_OP_MAX) i = BY_OP_MAX - 1, snprintf(g[i].key, sizeof g[i].key, "other");
    else {
      g[i] = (by_op){.seconds = 0, .steps = 0};
      snprintf(g[i].key, sizeof g[i].key, "%s", key);
      (*ng)++;
    }
  }
  g[i].seconds += seconds;
  g[i].steps++;
}

static void print_by_op(by_op *g, uint32_t ng, double total, uint64_t runs, FILE *out) {
  for (uint32_t k = 1; k < ng; k++) /* by time, the longest first */
    for (uint32_t j = k; j > 0 && g[j].seconds > g[j - 1].seconds; j--) {
      by_op t = g[j];
      g[j] = g[j - 1], g[j - 1] = t;
    }
  fprintf(out, "by op (unit):");
  for (uint32_t k = 0; k < ng; k++)
    fprintf(out, "%s %s %.3f ms %.1f%% (%u step%s)", k ? ";" : "", g[k].key, g[k].seconds / (double)runs * 1e3,
            total > 0 ? 100 * g[k].seconds / total : 0, g[k].steps, g[k].steps == 1 ? "" : "s");
  fprintf(out, "\n");
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

void mlc_session_ceilings(const mlc_session *s, mlc_ceilings *c) {
  if (host_memory(s)) {
    mlc_ceilings_load_cpu(c);
    return;
  }
  char name[256];
  s->dev->vt->describe(s->dev, name, sizeof name);
  mlc_ceilings_gpu(name, c);
  if (s->dev->vt->cache_bytes) c->l2_bytes = (double)s->dev->vt->cache_bytes(s->dev);
}

void mlc_session_print_profile(const mlc_session *s, const char *entry, FILE *out) {
  mlc_ceilings c;
  mlc_session_ceilings(s, &c);
  mlc_session_print_profile_ceilings(s, entry, &c, out);
}

void mlc_session_print_profile_ceilings(const mlc_session *s, const char *entry, const mlc_ceilings *c, FILE *out) {
  entry_state *es;
  mlc_status st = mlc_sess_find_entry(s, entry, &es);
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
  if (s->flushing && c->l2_bytes > 0)
    fprintf(out, "  the L2 (%.0f MB) emptied before each kernel: its HBM %% is of the bytes expected to reach DRAM while it runs "
                 "(its last writes stay in the L2: runtime/profile.h, MLC_L2_HELD_SHARE)\n", c->l2_bytes / 1e6);
  fprintf(out, "%-24s %-24s %6s %9s %9s %6s %8s %7s %7s %-7s %-7s %6s  %s\n", "Name", "Scope", "Calls", "Total ms", "Avg ms",
          "% step", "FLOP/s", "GB/s", "FLOP/B", "Unit", "Bound", "% roof", "Hint");
  double by_bound[3] = {0};
  by_op groups[BY_OP_MAX];
  uint32_t ngroups = 0;
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
    add_by_op(groups, &ngroups, stp->name, unit, es->seconds[i]);
    fprintf(out, "%-24.24s %-24.24s %6llu %9.3f %9.4f %5.1f%% %8s %7.2f %7.2f %-7s %-7s %5.1f%%  %s\n", stp->name,
            *stp->scope ? stp->scope : "-", (unsigned long long)es->runs, es->seconds[i] * 1e3, avg * 1e3,
            total > 0 ? 100 * es->seconds[i] / total : 0, rate, v.byte_rate / 1e9, v.intensity, unit,
            mlc_bound_name(v.bound), v.pct_roof, v.hint);
  }
  fprintf(out, "%d steps, %.4f ms per run over %llu runs; time %.0f%% memory-bound, %.0f%% compute-bound, "
               "%.0f%% latency-bound\n", (int)e->nsteps, total / (double)es->runs * 1e3, (unsigned long long)es->runs,
          total > 0 ? 100 * by_bound[MLC_BOUND_MEMORY] / total : 0, total > 0 ? 100 * by_bound[MLC_BOUND_COMPUTE] / total : 0,
          total > 0 ? 100 * by_bound[MLC_BOUND_LATENCY] / total : 0);
  print_by_op(groups, ngroups, total, es->runs, out);
  mlc_allocator_free(s->a, order);
}

/* One distinct kernel of an entry, over its steps: sums of one call's
 * FLOPs, bytes and seconds, and its longest step. */
typedef struct {
  double flops, bytes, written, seconds, longest;
  uint32_t calls, step;
} kernel_sum;

mlc_status mlc_session_ncu_matches(const mlc_session *s, const char *entry, const mlc_ceilings *c, mlc_ncu_match **out,
                                   uint32_t *n) {
  *out = NULL;
  *n = 0;
  entry_state *es;
  MLC_RETURN_IF_ERROR(mlc_sess_find_entry(s, entry, &es));
  const mlc_plan_entry *e = es->e;
  if (!es->runs) return mlc_status_make(MLC_INVALID_ARGUMENT, "--ncu: no profiled runs of %s", entry);
  mlc_ncu_match *m = calloc(e->nsteps + 1, sizeof *m);
  kernel_sum *g = mlc_allocator_alloc_array(s->a, e->nsteps + 1, sizeof *g);
  if (!m || !g) { free(m); mlc_allocator_free(s->a, g); return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory"); }
  uint32_t k = 0;
  for (uint32_t i = 0; i < e->nsteps; i++) {
    const char *sym = s->plan->kernels[e->steps[i].kernel];
    if (!es->kern[i]) continue; /* collectives: NCCL's kernels, not mlc's */
    uint32_t j = 0;
    while (j < k && strcmp(m[j].symbol, sym)) j++;
    if (j == k) m[k].symbol = sym, memset(&g[k], 0, sizeof g[k]), k++;
    double avg = es->seconds[i] / (double)es->runs;
    kernel_sum *t = &g[j];
    const mlc_plan_value *last = e->steps[i].nargs ? &e->values[e->steps[i].args[e->steps[i].nargs - 1]] : NULL;
    t->flops += e->steps[i].flops, t->bytes += e->steps[i].bytes, t->seconds += avg;
    t->written += last ? (double)mlc_plan_shape_bytes(&last->shape) : 0;
    if (!t->calls++ || avg > t->longest) t->longest = avg, t->step = i;
  }
  /* ncu weighs its launches of a kernel by their time; so do these sums. */
  for (uint32_t j = 0; j < k; j++) {
    const kernel_sum *t = &g[j];
    const mlc_plan_shape *shapes[16];
    mlc_profile_launch launch;
    mlc_profile_kernel pk = step_kernel(s, es, t->step, t->longest, shapes, &launch);
    pk.flops = t->flops / t->calls, pk.bytes = t->bytes / t->calls, pk.seconds = t->seconds / t->calls;
    pk.write_bytes = t->written / t->calls;
    mlc_profile_verdict v;
    mlc_profile_classify(&pk, c, &v);
    m[j].label = e->steps[t->step].name, m[j].mlc = v.bound, m[j].mlc_pct = v.pct_roof;
    m[j].mlc_compute = v.pct_compute, m[j].mlc_memory = v.pct_memory, m[j].mlc_bytes = pk.bytes;
    m[j].mlc_dram = v.dram_bytes;
    m[j].nlaunch = launch.nlaunch;
  }
  mlc_allocator_free(s->a, g);
  *out = m;
  *n = k;
  return NULL;
}

void mlc_session_set_trace(mlc_session *s, bool on) { s->trace = on; }

mlc_status mlc_session_set_flush_caches(mlc_session *s, bool on) {
  if (!s->dev->vt->flush_caches) {
    if (!on) return NULL;
    return mlc_status_make(MLC_UNIMPLEMENTED, "the %s device cannot empty its caches before each kernel (CUDA's can)",
                           s->dev->vt->name);
  }
  MLC_RETURN_IF_ERROR(s->dev->vt->flush_caches(s->dev, on));
  s->flushing = on;
  return NULL;
}

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
  char *mine = mlc_sess_shard_path(s, path, s->comm->rank);
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
    char *part = mlc_sess_shard_path(s, path, r), *text = part ? slurp(s->a, part) : NULL;
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
  MLC_RETURN_IF_ERROR(mlc_sess_find_entry(s, entry, &es));
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
