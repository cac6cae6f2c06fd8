/* CPU target glue for the driver.  Each entry point is one LLVM module (and
 * one object file); kernel symbols carry the model and entry point as a
 * prefix, so every symbol is unique in the program that links them. */
#include "driver/target_cpu.h"
#include "driver/target.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/artifact.h"
#include "codegen/plan.h"
#include "passes/passes.h"
#include "runtime/cpu/features.h"
#include "runtime/profile.h"

static const char *namer(void *ctx, const mlc_func *f, uint32_t node, uint64_t *out_work) {
  mlc_cpu_build *b = ctx;
  uint32_t k = (uint32_t)(f - b->p->funcs);
  uint32_t id = b->kernel_of[k][node];
  if (id == UINT32_MAX) return NULL;
  const mlc_llvm_kernel *kern = mlc_llvm_kernel_at(b->mods[k], id);
  *out_work = (uint64_t)kern->items;
  return kern->name;
}

/* One build: every function of p for `cpu`, its kernels' symbols prefixed
 * "<model>.<entry>." (the baseline) or "<model>.<tag>.<entry>." (a build for
 * a stronger CPU: model names are C identifiers and entry names fixed, so
 * no two builds' symbols meet), and its plan. */
static mlc_status compile_for(mlc_program *p, mlc_cpu_build *b, const char *cpu, const char *tag, FILE *progress) {
  b->p = p;
  b->tag = tag;
  for (uint32_t k = 0; k < p->nfuncs; k++) {
    const mlc_func *f = &p->funcs[k];
    double t0 = mlc_now();
    if (progress) {
      fprintf(progress, "mlc: [%u/%u] compiling %s (%u ops) for the CPU...", k + 1, p->nfuncs, f->name, f->n);
      fflush(progress);
    }
    const char *prefix = tag ? mlc_arena_printf(p->arena, "%s.%s.%s.", p->name, tag, f->name)
                             : mlc_arena_printf(p->arena, "%s.%s.", p->name, f->name);
    char cache[1024];
    mlc_llvm_options o = {.triple = p->opts.triple, .cpu = cpu, .symbol_prefix = prefix,
                          .cache_dir = mlc_cpu_cache_dir(cache, sizeof cache) ? cache : NULL};
    mlc_status st = mlc_llvm_compile(p, f, &o, &b->mods[k]);
    if (st) {
      if (progress) fprintf(progress, "\n");
      return st;
    }
    b->kernel_of[k] = mlc_arena_alloc(p->arena, (f->n + 1) * sizeof *b->kernel_of[k]);
    for (uint32_t i = 0; i < f->n; i++) b->kernel_of[k][i] = UINT32_MAX;
    uint32_t nk = mlc_llvm_kernel_count(b->mods[k]);
    for (uint32_t i = 0; i < nk; i++) b->kernel_of[k][mlc_llvm_kernel_at(b->mods[k], i)->node] = i;
    if (progress) {
      uint32_t unique = 0; /* nodes that share a kernel share its name */
      for (uint32_t i = 0; i < nk; i++) {
        bool first = true;
        for (uint32_t j = 0; j < i && first; j++)
          first = strcmp(mlc_llvm_kernel_at(b->mods[k], j)->name, mlc_llvm_kernel_at(b->mods[k], i)->name) != 0;
        unique += first;
      }
      fprintf(progress, " %u kernels (%u distinct) for %s in %.1f s\n", nk, unique, mlc_llvm_target_cpu(b->mods[k]),
              mlc_now() - t0);
    }
  }
  /* The code is linked into the host program: a "native" executable, each
   * kernel launched under its own symbol. */
  mlc_plan_code native = {.native = true};
  mlc_plan_encode_code(p, namer, b, NULL, &native, &b->plan, &b->plan_bytes);
  return NULL;
}

mlc_status mlc_cpu_compile(mlc_program *p, mlc_cpu_build *b, FILE *progress) {
  memset(b, 0, sizeof *b);
  MLC_RETURN_IF_ERROR(compile_for(p, b, p->opts.cpu, NULL, progress));
  /* Multiversioning, only over the x86-64 baseline: --cpu NAME (baseline
   * included) or another architecture means one build. */
  static const struct { const char *cpu, *tag; } more[MLC_CPU_MORE] = {{"x86-64-v3", "v3"}, {"x86-64-v4", "v4"}};
  if (!p->opts.cpu_versions || !b->mods[0] || strcmp(mlc_llvm_target_cpu(b->mods[0]), "x86-64-v2")) return NULL;
  for (int v = 0; v < MLC_CPU_MORE; v++) {
    mlc_cpu_build *m = calloc(1, sizeof *m);
    if (!m) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory");
    b->more[b->nmore++] = m;
    MLC_RETURN_IF_ERROR(compile_for(p, m, more[v].cpu, more[v].tag, progress));
  }
  return NULL;
}

/* The object file of entry point k in build b: <model>.<entry>.o, or <model>.<tag>.<entry>.o. */
static const char *object_name(const mlc_cpu_build *b, uint32_t k) {
  const mlc_program *p = b->p;
  return b->tag ? mlc_arena_printf(p->arena, "%s.%s.%s.o", p->name, b->tag, p->funcs[k].name)
                : mlc_arena_printf(p->arena, "%s.%s.o", p->name, p->funcs[k].name);
}

/* The symbols of one build's kernels (each once: nodes that share a kernel
 * share its symbol) into syms, its object files (written into dir) into
 * objs; counts in *nsyms and *nobjs. */
static mlc_status write_objects(mlc_cpu_build *b, const char *dir, const char **syms, uint32_t *nsyms, const char **objs,
                                uint32_t *nobjs) {
  mlc_program *p = b->p;
  uint32_t n = 0;
  for (uint32_t k = 0; k < p->nfuncs; k++) {
    for (uint32_t i = 0; i < mlc_llvm_kernel_count(b->mods[k]); i++) {
      const char *sym = mlc_llvm_kernel_at(b->mods[k], i)->name;
      bool seen = false;
      for (uint32_t j = 0; j < n && !seen; j++) seen = !strcmp(syms[j], sym);
      if (!seen) syms[n++] = sym;
    }
    const char *obj = object_name(b, k);
    objs[(*nobjs)++] = obj;
    MLC_RETURN_IF_ERROR(mlc_llvm_emit_object(b->mods[k], mlc_arena_printf(p->arena, "%s/%s", dir, obj)));
  }
  *nsyms = n;
  return NULL;
}

static uint32_t kernel_total(const mlc_cpu_build *b) {
  uint32_t total = 0;
  for (uint32_t k = 0; k < b->p->nfuncs; k++) total += mlc_llvm_kernel_count(b->mods[k]);
  return total;
}

mlc_status mlc_cpu_write_artifact(mlc_cpu_build *b, const char *dir, const char *source) {
  mlc_program *p = b->p;
  const char **objs = mlc_arena_alloc(p->arena, ((1 + b->nmore) * p->nfuncs + 1) * sizeof *objs);
  const char **syms = mlc_arena_alloc(p->arena, (kernel_total(b) + 1) * sizeof *syms);
  mlc_artifact_cpu_build *more = mlc_arena_alloc(p->arena, (b->nmore + 1) * sizeof *more);
  mlc_artifact a = {.dir = dir, .source = source, .plan = b->plan, .plan_bytes = b->plan_bytes, .kernels = syms,
                    .objects = objs, .cpu = mlc_llvm_target_cpu(b->mods[0]),
                    .cpu_features = mlc_llvm_target_features(b->mods[0]), .cpu_more = more, .ncpu_more = b->nmore};
  MLC_RETURN_IF_ERROR(mlc_artifact_mkdir(dir));
  MLC_RETURN_IF_ERROR(write_objects(b, dir, syms, &a.nkernels, objs, &a.nobjects));
  for (uint32_t v = 0; v < b->nmore; v++) {
    mlc_cpu_build *m = b->more[v];
    const char **msyms = mlc_arena_alloc(p->arena, (kernel_total(m) + 1) * sizeof *msyms);
    more[v] = (mlc_artifact_cpu_build){.cpu = mlc_llvm_target_cpu(m->mods[0]),
                                       .features = mlc_llvm_target_features(m->mods[0]), .plan = m->plan,
                                       .plan_bytes = m->plan_bytes, .kernels = msyms};
    MLC_RETURN_IF_ERROR(write_objects(m, dir, msyms, &more[v].nkernels, objs, &a.nobjects));
  }
  return mlc_artifact_write(p, &a);
}

mlc_status mlc_cpu_jit(mlc_cpu_build *b) {
  for (uint32_t k = 0; k < b->p->nfuncs; k++) MLC_RETURN_IF_ERROR(mlc_llvm_jit_create(b->mods[k], &b->jits[k]));
  return NULL;
}

void *mlc_cpu_lookup(void *build, const char *symbol) {
  mlc_cpu_build *b = build;
  for (uint32_t k = 0; k < b->p->nfuncs; k++) {
    void *fn = b->jits[k] ? mlc_llvm_jit_symbol(b->jits[k], symbol) : NULL;
    if (fn) return fn;
  }
  return NULL;
}

void mlc_cpu_build_free(mlc_cpu_build *b) {
  for (uint32_t v = 0; v < b->nmore; v++) {
    mlc_cpu_build_free(b->more[v]);
    free(b->more[v]);
  }
  for (uint32_t k = 0; k < MLC_MAX_FUNCS; k++) {
    if (b->jits[k]) mlc_llvm_jit_destroy(b->jits[k]);
    if (b->mods[k]) mlc_llvm_module_destroy(b->mods[k]);
  }
  memset(b, 0, sizeof *b);
}

/* The descriptor's operations (driver/target.h). */

mlc_status mlc_cpu_target_build(void *b, mlc_program *p, FILE *progress, int rank) {
  return mlc_cpu_compile(p, b, rank ? NULL : progress);
}

/* Each entry point's kernels are one object file, <name>.<entry>.o, which
 * the bundle archives. */
mlc_status mlc_cpu_target_write(void *vb, const char *dir, const char *source, mlc_target_files *out) {
  mlc_cpu_build *b = vb;
  mlc_program *p = b->p;
  MLC_RETURN_IF_ERROR(mlc_cpu_write_artifact(b, dir, source));
  uint32_t nobj = 0;
  for (uint32_t v = 0; v <= b->nmore; v++) {
    const mlc_cpu_build *m = v ? b->more[v - 1] : b;
    for (uint32_t k = 0; k < p->nfuncs && out->nobjects < 64; k++, nobj++)
      out->objects[out->nobjects++] = object_name(m, k);
  }
  out->what = mlc_arena_printf(p->arena, "%u object file%s", nobj, nobj == 1 ? "" : "s");
  if (b->nmore) {
    out->what = mlc_arena_printf(p->arena, "%s (the kernels for %s", out->what, mlc_llvm_target_cpu(b->mods[0]));
    for (uint32_t v = 0; v < b->nmore; v++)
      out->what = mlc_arena_printf(p->arena, "%s, %s", out->what, mlc_llvm_target_cpu(b->more[v]->mods[0]));
    out->what = mlc_arena_printf(p->arena, "%s)", out->what);
  }
  return NULL;
}

/* No device: the session finds the JIT's kernels through the lookup. */
mlc_status mlc_cpu_target_open(void *vb, int ordinal, FILE *progress, int rank, mlc_session_options *so,
                               const uint8_t **plan, size_t *plan_bytes) {
  mlc_cpu_build *b = vb;
  (void)ordinal, (void)progress, (void)rank;
  /* --cpu NAME: the same check as an artifact's create, before the kernels can die of SIGILL. */
  if (b->mods[0])
    MLC_RETURN_IF_ERROR(mlc_cpu_check_features("the model", mlc_llvm_target_cpu(b->mods[0]),
                                               mlc_llvm_target_features(b->mods[0])));
  MLC_RETURN_IF_ERROR(mlc_cpu_jit(b));
  *plan = b->plan;
  *plan_bytes = b->plan_bytes;
  so->lookup = mlc_cpu_lookup;
  so->lookup_ctx = b;
  return NULL;
}

void mlc_cpu_target_release(void *b) { mlc_cpu_build_free(b); }

bool mlc_cpu_target_supports_op(mlc_op op, char *why, size_t whyn) {
  if (mlc_llvm_supports_op(op)) return true;
  snprintf(why, whyn, "the CPU backend has no kernel for op '%s'", mlc_ops[op].name);
  return false;
}
