/* The driver of the C-like code generators (CUDA C and MSL): one kernel
 * per node, by op, through the shared emitters of emit_*.c and the
 * dialect's own (cc_dialect: GEMM, attention); identical kernels once; the
 * launch table. */
#include "codegen/cstyle/cstyle.h"

#include <stdio.h>
#include <string.h>
#include <xxhash.h>

#include "codegen/cstyle/cc.h"

static cc_emitter emitter_of(const cc_dialect *t, mlc_op op) {
  unsigned fl = mlc_ops[op].flags;
  switch (op) {
  case MLC_OP_MATMUL: case MLC_OP_LINEAR: case MLC_OP_MATMUL_TN: return t->emit_gemm;
  case MLC_OP_ATTENTION: case MLC_OP_ATTENTION_GRAD: return t->emit_attention;
  case MLC_OP_ATTENTION_SAVE: case MLC_OP_ATTENTION_GRAD_SAVED: return t->emit_attention_saved;
  case MLC_OP_ATTENTION_KV: return t->emit_attention_kv;
  case MLC_OP_QLINEAR: return t->emit_qlinear;
  case MLC_OP_QUANT: case MLC_OP_QUANT_BOTH: return t->emit_quant;
  case MLC_OP_SCALED_MM: return t->emit_scaled_mm;
  case MLC_OP_SUM: case MLC_OP_MEAN: case MLC_OP_MAX: case MLC_OP_SOFTMAX: return cc_emit_reduce;
  case MLC_OP_TRANSPOSE: case MLC_OP_SLICE: case MLC_OP_CONCAT: case MLC_OP_SLICE_GRAD:
    return cc_emit_layout;
  case MLC_OP_RMSNORM: case MLC_OP_LAYERNORM: case MLC_OP_RMSNORM_GRAD_X: case MLC_OP_RMSNORM_GRAD_W:
  case MLC_OP_LAYERNORM_GRAD_X: case MLC_OP_LAYERNORM_GRAD_W:
    return cc_emit_norm;
  case MLC_OP_EMBEDDING: case MLC_OP_EMBEDDING_GRAD: case MLC_OP_CROSS_ENTROPY: case MLC_OP_CROSS_ENTROPY_GRAD:
  case MLC_OP_ADAMW: case MLC_OP_SGD:
    return cc_emit_misc;
  case MLC_OP_BROADCAST: return cc_emit_ew;
  case MLC_OP_ARANGE: return cc_emit_arange;
  case MLC_OP_DROPOUT: return cc_emit_dropout;
  case MLC_OP_FUSED: return cc_emit_fused;
  case MLC_OP_ADAMW_MULTI: case MLC_OP_SGD_MULTI: return t->emit_update_multi;
  case MLC_OP_MIN: return cc_emit_reduce;
  case MLC_OP_ARGMAX: case MLC_OP_ARGMIN: return cc_emit_argreduce;
  case MLC_OP_GATHER: return cc_emit_layout;
  case MLC_OP_GATHER_GRAD: return cc_emit_gather_grad;
  default: return (fl & MLC_F_EW) ? cc_emit_ew : NULL;
  }
}

/* Replaces every "@K@" in text with sym. */
static char *name_kernel(mlc_arena *a, const char *text, size_t n, const char *sym, size_t *out_n) {
  size_t count = 0, sl = strlen(sym);
  for (const char *s = text; (s = strstr(s, "@K@")); s += 3) count++;
  size_t len = n + count * sl - count * 3;
  char *r = mlc_arena_alloc(a, len + 1), *w = r;
  const char *s = text, *hit;
  while ((hit = strstr(s, "@K@"))) {
    memcpy(w, s, (size_t)(hit - s));
    w += hit - s;
    memcpy(w, sym, sl);
    w += sl;
    s = hit + 3;
  }
  memcpy(w, s, strlen(s) + 1);
  *out_n = len;
  return r;
}

mlc_status cc_emit_module(const mlc_program *p, const cc_dialect *t, mlc_cstyle_module *m) {
  memset(m, 0, sizeof *m);
  m->p = p;
  mlc_arena *a = p->arena;
  cc_text src = {.a = a};
  t->module_begin(&src, p);
  uint32_t cap = 64;
  m->kernels = mlc_arena_alloc(a, cap * sizeof *m->kernels);
  uint64_t *hashes = mlc_arena_alloc(a, cap * sizeof *hashes);
  for (uint32_t k = 0; k < p->nfuncs; k++) {
    const mlc_func *f = &p->funcs[k];
    m->funcs[k] = f;
    m->kernel_of[k] = mlc_arena_alloc(a, (f->n + 1) * sizeof **m->kernel_of);
    bool decode = false;
    for (uint32_t i = 0; i < f->n; i++) decode |= f->nodes[i].op == MLC_OP_ATTENTION_KV;
    for (uint32_t i = 0; i < f->n; i++) {
      const mlc_node *n = &f->nodes[i];
      m->kernel_of[k][i] = UINT32_MAX;
      if ((mlc_ops[n->op].flags & (MLC_F_LEAF | MLC_F_VIEW | MLC_F_COLL)) || mlc_node_in_place(f, i)) continue;
      bool sharded = mlc_node_sharded(p, f, n);
      cc_emitter e = sharded && n->op == MLC_OP_CAST ? cc_emit_shard_cast : emitter_of(t, (mlc_op)n->op);
      cc_text body = {.a = a};
      cc c = {.t = t, .p = p, .f = f, .n = n, .node = i, .out = &body, .sharded = sharded, .decode = decode};
      if (!e)
        return mlc_status_make(MLC_INVALID_ARGUMENT, "%s %%%u (%s): the %s target has no kernel for this op", f->name, i,
                               mlc_ops[n->op].name, t->name);
      if (!e(&c))
        return mlc_status_make(c.internal ? MLC_INTERNAL : MLC_INVALID_ARGUMENT, "%s %%%u (%s): %s", f->name, i,
                               mlc_ops[n->op].name, c.err);
      MLC_ASSERT(c.nlaunch > 0 && body.s);
      /* The text and the launch shapes make the kernel. */
      XXH3_state_t *h = XXH3_createState();
      MLC_ASSERT(h);
      XXH3_64bits_reset(h);
      XXH3_64bits_update(h, body.s, body.n);
      XXH3_64bits_update(h, c.launch, c.nlaunch * sizeof *c.launch);
      XXH3_64bits_update(h, &c.scratch, sizeof c.scratch);
      XXH3_64bits_update(h, c.tmap, c.ntmap * sizeof *c.tmap);
      uint64_t hv = XXH3_64bits_digest(h);
      XXH3_freeState(h);
      uint32_t found = UINT32_MAX;
      for (uint32_t j = 0; j < m->nkernels && found == UINT32_MAX; j++)
        if (hashes[j] == hv) found = j;
      if (found == UINT32_MAX) {
        if (m->nkernels == cap) {
          m->kernels = mlc_arena_grow(a, m->kernels, cap * sizeof *m->kernels, 2 * cap * sizeof *m->kernels);
          hashes = mlc_arena_grow(a, hashes, cap * sizeof *hashes, 2 * cap * sizeof *hashes);
          cap *= 2;
        }
        found = m->nkernels++;
        hashes[found] = hv;
        char *sym = mlc_arena_printf(a, "mlc_%s_%016llx", mlc_ops[n->op].name, (unsigned long long)hv);
        mlc_cuda_kernel *kd = &m->kernels[found];
        memset(kd, 0, sizeof *kd);
        kd->symbol = sym;
        kd->scratch = c.scratch;
        kd->nlaunch = c.nlaunch;
        kd->ntmap = c.ntmap;
        memcpy(kd->tmap, c.tmap, c.ntmap * sizeof *c.tmap);
        for (uint32_t l = 0; l < c.nlaunch; l++) {
          if (c.launch[l].grid > 0x7fffffffu)
            return mlc_status_make(MLC_INVALID_ARGUMENT, "%s %%%u (%s): a grid of %llu blocks is too large", f->name, i,
                                   mlc_ops[n->op].name, (unsigned long long)c.launch[l].grid);
          kd->launch[l] = (mlc_cuda_launch){mlc_arena_printf(a, "%s_%u", sym, l), (uint32_t)c.launch[l].grid,
                                            c.launch[l].block, c.launch[l].smem};
        }
        size_t tn;
        char *text = name_kernel(a, body.s, body.n, sym, &tn);
        cc_text_printf(&src, "// %s %%%u %s (%s)\n%s", f->name, i, mlc_ops[n->op].name, *n->scope ? n->scope : "-", text);
      }
      m->kernel_of[k][i] = found;
    }
  }
  m->source = src.s;
  m->source_len = src.n;
  return NULL;
}

const char *mlc_cstyle_kernel_namer(void *ctx, const mlc_func *f, uint32_t node, uint64_t *out_work_items) {
  const mlc_cstyle_module *m = ctx;
  *out_work_items = 0;
  uint32_t k = 0; /* f is one of the program's functions: find which */
  while (k < MLC_MAX_FUNCS && m->funcs[k] != f) k++;
  if (k == MLC_MAX_FUNCS || m->kernel_of[k][node] == UINT32_MAX) return NULL;
  const mlc_cuda_kernel *kd = &m->kernels[m->kernel_of[k][node]];
  /* A shard's kernels take the rank's rows at run time: the plan gives the nominal rows. */
  *out_work_items = mlc_node_sharded(m->p, f, &f->nodes[node]) ? (uint64_t)f->nodes[f->nodes[node].in[0]].type.dim[0] : kd->launch[0].grid;
  return kd->symbol;
}

/* The emit loop's own test: no kernel for leaves, views and collectives,
 * and an emitter for every other op. */
bool cc_supports_op(const cc_dialect *t, mlc_op op) {
  return (mlc_ops[op].flags & (MLC_F_LEAF | MLC_F_VIEW | MLC_F_COLL)) || emitter_of(t, op);
}
