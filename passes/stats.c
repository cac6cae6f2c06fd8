/* `mlc compile --stats`: what the model holds and costs.
 *
 * Lists every parameter with its state_dict name, dtype and shape, the total
 * count, the op counts of each entry point and its FLOPs and bytes if every
 * op ran as its own kernel.  Later passes add the planned memory. */
#include <stdio.h>
#include <string.h>

#include "passes/passes.h"

static void commas(char *buf, size_t n, double v) {
  char tmp[64];
  snprintf(tmp, sizeof tmp, "%.0f", v);
  size_t len = 0, digits = 0;
  for (const char *c = tmp; *c; c++) digits += *c >= '0' && *c <= '9';
  for (const char *c = tmp; *c && len + 2 < n; c++) {
    buf[len++] = *c;
    digits -= *c >= '0' && *c <= '9';
    if (digits && digits % 3 == 0 && *c >= '0' && *c <= '9') buf[len++] = ',';
  }
  buf[len] = 0;
}

/* Whether f reads the optimizer state (the train entry does). */
static bool uses_state(const mlc_program *p, const mlc_func *f) {
  for (uint32_t i = 0; i < f->n; i++)
    if (f->nodes[i].op == MLC_OP_PARAM && p->params[f->nodes[i].a.param].role == MLC_ROLE_OPT_STATE) return true;
  return false;
}

int64_t mlc_planned_session_bytes(const mlc_program *p, const mlc_func *f) {
  /* as runtime/session.c lays them out: two blocks, the parameters and the
   * optimizer state with the weights' shadows, each parameter (weights
   * inside an fsdp flat excepted) at a 64-byte boundary; the state's block
   * only once an entry that reads it has run */
  int64_t total = 0, state = 0;
  for (uint32_t i = 0; i < p->nparams; i++) {
    int64_t *end = p->params[i].role == MLC_ROLE_OPT_STATE || p->params[i].role == MLC_ROLE_SHADOW ? &state : &total;
    if (!p->params[i].flat)
      *end = (*end + mlc_type_numel(&p->params[i].type) * mlc_dtype_size(p->params[i].type.dtype) + 63) / 64 * 64;
  }
  return total + (uses_state(p, f) ? state : 0) + f->arena_bytes;
}

/* What the recompute pass chose for the memory budget, and its cost. */
static void print_recompute(FILE *out, const mlc_program *p) {
  if (!p->recompute.budget) return;
  double bytes = 0, flops = 0, moved = 0;
  for (uint32_t i = 0; i < p->recompute.n; i++) {
    bytes += (double)p->recompute.v[i].bytes;
    flops += p->recompute.v[i].flops;
    moved += p->recompute.v[i].moved;
  }
  char b[4][32];
  fprintf(out, "  memory budget %s: ", mlc_bytes_str(b[0], 32, (double)p->recompute.budget));
  if (!p->recompute.n) {
    fprintf(out, "met without recomputation (planned total %s)\n", mlc_bytes_str(b[1], 32, (double)p->recompute.before));
    return;
  }
  uint32_t nseg = 0;
  for (uint32_t i = 0; i < p->recompute.n; i++) nseg += p->recompute.v[i].nops > 0;
  fprintf(out, "%u values and %u segments recomputed in the backward, %s kept less, planned total %s -> %s; they cost "
          "%.4g GFLOP (%.2f %% of the step's %.4g GFLOP) and %s moved a step\n", p->recompute.n - nseg, nseg,
          mlc_bytes_str(b[0], 32, bytes), mlc_bytes_str(b[1], 32, (double)p->recompute.before),
          mlc_bytes_str(b[2], 32, (double)p->recompute.after), flops / 1e9,
          p->recompute.step_flops > 0 ? 100 * flops / p->recompute.step_flops : 0, p->recompute.step_flops / 1e9,
          mlc_bytes_str(b[3], 32, moved));
  char buf[128];
  for (uint32_t i = 0; i < p->recompute.n; i++) {
    const mlc_recomputed *r = &p->recompute.v[i];
    if (r->nops) snprintf(buf, sizeof buf, "(its forward: %u ops)", r->nops);
    else mlc_type_str(&r->type, buf, sizeof buf);
    fprintf(out, "    recompute %-9s %-26s %-24s %9s kept less, %9.4g FLOP, %9s moved\n", r->nops ? "segment" : mlc_ops[r->op].name,
            r->scope && *r->scope ? r->scope : "(top)", buf, mlc_bytes_str(b[0], 32, (double)r->bytes), r->flops,
            mlc_bytes_str(b[1], 32, r->moved));
  }
}

/* --matmul=fp8: each linear of the train entry, in FP8 or not and why. */
static void print_fp8(FILE *out, const mlc_program *p) {
  if (!mlc_matmul_is_fp8(p->opts.matmul)) return;
  uint32_t n8 = 0;
  for (uint32_t i = 0; i < p->fp8.n; i++) n8 += !p->fp8.v[i].why;
  fprintf(out, "  fp8 (--matmul=%s): %u of %u linears in FP8, forward and both gradients (x, w e4m3; g %s; a scale "
          "per tensor)\n", mlc_matmul_name((mlc_matmul_mode)p->opts.matmul), n8, p->fp8.n,
          p->opts.matmul == MLC_MATMUL_FP8_E4M3_GRAD ? "e4m3" : "e5m2");
  for (uint32_t i = 0; i < p->fp8.n; i++) {
    const mlc_fp8_linear *l = &p->fp8.v[i];
    char shape[64];
    snprintf(shape, sizeof shape, "%lldx%lldx%lld", (long long)l->m, (long long)l->n, (long long)l->k);
    fprintf(out, "    linear %-30s %-18s %s%s\n", l->scope && *l->scope ? l->scope : "(top)", shape, l->why ? "kept: " : "fp8",
            l->why ? l->why : "");
  }
}

void mlc_print_stats(FILE *out, const mlc_program *p) {
  char buf[128], num[64];
  double total = 0, bytes = 0;
  fprintf(out, "parameters of %s:\n", p->name);
  double state = 0, nstate = 0, nflat = 0, cache = 0, ncache = 0, quant = 0, nquant = 0, shadow = 0, nshadow = 0;
  bool sharded = false;
  for (uint32_t i = 0; i < p->nparams; i++) {
    const mlc_param *prm = &p->params[i];
    double n = (double)mlc_type_numel(&prm->type);
    sharded |= prm->sharded;
    if (prm->role == MLC_ROLE_FLAT) { /* the weights above live in it: counted there */
      nflat++;
      continue;
    }
    if (prm->role == MLC_ROLE_CACHE) { /* a decode block's KV caches: summarised below */
      cache += n * mlc_dtype_size(prm->type.dtype);
      ncache++;
      continue;
    }
    if (prm->role == MLC_ROLE_QUANT) { /* --quantize's packed weights: summarised below */
      quant += n * mlc_dtype_size(prm->type.dtype);
      nquant++;
      continue;
    }
    if (prm->role == MLC_ROLE_SHADOW) { /* the weights' 16-bit copies that the CUDA train step keeps: below */
      shadow += n * mlc_dtype_size(prm->type.dtype);
      nshadow++;
      continue;
    }
    if (prm->role != MLC_ROLE_WEIGHT) { /* optimizer state: summarised below */
      state += n * mlc_dtype_size(prm->type.dtype);
      nstate++;
      continue;
    }
    total += n;
    bytes += n * mlc_dtype_size(prm->type.dtype);
    fprintf(out, "  %-40s %s\n", prm->name, mlc_type_str(&prm->type, buf, sizeof buf));
  }
  /* Shared weights: more state_dict names, no more parameters (torch's parameters() counts them once). */
  for (uint32_t i = 0; i < p->nties; i++)
    fprintf(out, "  %-40s = %s (tied)\n", p->ties[i].name, p->params[p->ties[i].param].name);
  commas(num, sizeof num, total);
  fprintf(out, "total: %s parameters in %u tensors (%.1f MB)\n", num, p->nparams - (uint32_t)(nstate + nflat + ncache + nquant + nshadow), bytes / 1e6);
  if (nstate) fprintf(out, "optimizer state: %.0f tensors (%.1f MB)\n", nstate, state / 1e6);
  if (nshadow)
    fprintf(out, "weight shadows (16-bit copies the train step's forward reads and its update writes, made from the "
            "weights above at load): %.0f tensors (%.1f MB)\n", nshadow, shadow / 1e6);
  if (ncache) fprintf(out, "KV caches: %.0f tensors (%.1f MB)\n", ncache, cache / 1e6);
  if (nquant)
    fprintf(out, "quantised weights (--quantize int%d:group=%d%s, packed at load from the f32 weights above): %.0f tensors "
            "(%.1f MB)\n", p->opts.quant_bits, p->opts.quant_group, mlc_quant_scheme_str(p->opts.quant_scheme), nquant, quant / 1e6);
  if (sharded)
    fprintf(out, "sharded (fsdp): %.0f flat units; each of N ranks holds about 1/N of the parameters and the optimizer "
            "state (and the whole arena below)\n", nflat);
  for (uint32_t k = 0; k < p->nfuncs; k++) {
    const mlc_func *f = &p->funcs[k];
    uint32_t count[MLC_OP_COUNT] = {0};
    double flops = 0, moved = 0;
    for (uint32_t i = 0; i < f->n; i++) {
      double fl, by;
      count[f->nodes[i].op]++;
      mlc_node_cost(f, &f->nodes[i], &fl, &by);
      flops += fl;
      moved += by;
    }
    fprintf(out, "entry %s: %u ops\n", f->name, f->n);
    for (int op = 0; op < MLC_OP_COUNT; op++)
      if (count[op]) fprintf(out, "  %-16s %u\n", mlc_ops[op].name, count[op]);
    fprintf(out, "  %.4g GFLOP, %.4g GB moved by unfused ops\n", flops / 1e9, moved / 1e9);
    if (!strcmp(f->name, "train")) print_fp8(out, p);
    if (f->offset) {
      commas(num, sizeof num, (double)f->arena_bytes);
      fprintf(out, "  planned peak: %s bytes (%.3f GB) of activations, inputs and outputs, plus %.3f GB of parameters%s\n",
              num, (double)f->arena_bytes / 1e9, bytes / 1e9, state && !strcmp(f->name, "train") ? mlc_arena_printf(p->arena, " and %.3f GB of optimizer state%s", (state + shadow) / 1e9, nshadow ? " and weight shadows" : "") : "");
      int64_t held = mlc_planned_session_bytes(p, f);
      commas(num, sizeof num, (double)held);
      fprintf(out, "  planned total: %s bytes (%.3f GB) held by a session that runs %s%s (its arena and every parameter%s)\n",
              num, (double)held / 1e9, f->name, sharded ? " on one rank" : "",
              !state ? "" : uses_state(p, f) ? (nshadow ? ", optimizer state and weight shadows" : " and optimizer state")
                                            : nshadow ? "; no optimizer state or weight shadows until it trains" : "; no optimizer state until it trains");
      uint32_t packs = 0, in_place = 0; /* fsdp's gradient packs (passes/memplan.c) */
      for (uint32_t i = 0; i < f->n; i++)
        if (f->nodes[i].op == MLC_OP_REDUCE_SCATTER && f->nodes[f->nodes[i].in[0]].op == MLC_OP_CONCAT)
          packs++, in_place += mlc_node_in_place(f, f->nodes[i].in[0]);
      if (packs)
        fprintf(out, "  gradients packed in place for their reduce-scatter: %u of %u units (the rest copied by a concat)\n",
                in_place, packs);
      if (!strcmp(f->name, "train")) print_recompute(out, p);
    }
  }
  mlc_options_print(out, &p->opts);
}
