/* quantize: weight-only INT8/INT4 (--quantize int8|int4[:group=G][:asym][:scales=bf16|f32]).
 *
 * Every linear whose weight is an f32 model parameter w[n, k] becomes a
 * qlinear over a new parameter of role MLC_ROLE_QUANT: w's packed form
 * (ir/ir.h, mlc_quant_row_words), codes with a scale per G weights of a
 * row (bf16, or f32 with :scales=f32): symmetric, or with :asym unsigned
 * codes and a min beside each scale.  The runtime packs it from w whenever w is loaded or
 * initialised (runtime/session.c), so weights files stay PyTorch's f32
 * state_dicts.  One packed parameter per weight, however many linears read
 * it.  Embeddings stay f32 (a decode step reads one row of the table); the
 * head, a linear, is quantised like every other.
 *
 * Quantised graphs are inference only: qlinear has no VJP, so a program
 * with a train entry is refused (the driver compiles none with --quantize).
 * A group that does not divide a weight's k is an error at that weight.
 */
#include <string.h>

#include "passes/passes.h"

#define NONE UINT32_MAX

/* The packed parameter of weight `w`, made on first need; NONE (with an
 * error) if its k does not split into groups. */
static uint32_t packed_param(mlc_pass_ctx *c, uint32_t *packed, uint32_t w) {
  mlc_program *p = c->p;
  if (packed[w] != NONE) return packed[w];
  int bits = p->opts.quant_bits, group = p->opts.quant_group;
  int scheme = p->opts.quant_scheme;
  mlc_param src = p->params[w]; /* a copy: adding a parameter may move the array */
  int64_t n = src.type.dim[0], k = src.type.dim[1];
  if (k % group) {
    mlc_error(c->d, src.loc, "--quantize int%d:group=%d%s: the group does not divide %s's %lld input features "
              "(its shape is [%lld, %lld]); pick a group that divides every linear layer's",
              bits, group, mlc_quant_scheme_str(scheme), src.name, (long long)k, (long long)n, (long long)k);
    return NONE;
  }
  mlc_param q = {
    .name = mlc_arena_printf(p->arena, "quant:%s", src.name),
    .type = {.dtype = MLC_DT_I32, .rank = 2, .dim = {n, mlc_quant_row_words(k, bits, group, scheme)}},
    .role = MLC_ROLE_QUANT,
    .init = MLC_INIT_ZEROS,
    .loc = src.loc,
    .quant_of = w + 1,
    .quant_bits = bits,
    .quant_group = group,
    .quant_scheme = (uint8_t)scheme,
  };
  return packed[w] = mlc_program_add_param(p, &q);
}

/* Is n a linear this pass rewrites: f32 x, its weight an f32 matrix parameter? */
static bool eligible(const mlc_program *p, const mlc_func *f, const mlc_node *n) {
  if (n->op != MLC_OP_LINEAR) return false;
  const mlc_node *w = &f->nodes[n->in[1]];
  return w->op == MLC_OP_PARAM && p->params[w->a.param].role == MLC_ROLE_WEIGHT && w->type.dtype == MLC_DT_F32 &&
         w->type.rank == 2 && f->nodes[n->in[0]].type.dtype == MLC_DT_F32;
}

static bool rewrite(mlc_pass_ctx *c, mlc_func *f, uint32_t *packed) {
  mlc_program *p = c->p;
  bool any = false;
  for (uint32_t i = 0; i < f->n && !any; i++) any = eligible(p, f, &f->nodes[i]);
  if (!any) return true;
  mlc_func old = mlc_func_take(f);
  uint32_t *map = mlc_arena_alloc(p->arena, (old.n + 1) * sizeof *map);
  bool ok = true;
  for (uint32_t i = 0; i < old.n; i++) {
    const mlc_node *n = &old.nodes[i];
    uint32_t in[8];
    uint32_t *ins = n->nin <= 8 ? in : mlc_arena_alloc(p->arena, n->nin * sizeof *ins);
    for (uint32_t k = 0; k < n->nin; k++) ins[k] = map[n->in[k]];
    bool quantize = eligible(p, &old, n);
    uint32_t q = quantize ? packed_param(c, packed, old.nodes[n->in[1]].a.param) : NONE;
    if (q == NONE) { /* not a linear over an f32 weight, or (an error) its k does not split into groups */
      ok = ok && !quantize;
      map[i] = mlc_func_copy_node(p, f, n, ins);
      continue;
    }
    mlc_attrs pa = {.param = q};
    uint32_t wq = mlc_func_add(p, f, MLC_OP_PARAM, NULL, 0, &pa, n->loc, old.nodes[n->in[1]].scope);
    f->nodes[wq].type = p->params[q].type;
    mlc_attrs qa = {.qbits = p->opts.quant_bits, .qgroup = p->opts.quant_group, .qscheme = p->opts.quant_scheme};
    uint32_t qin[2] = {ins[0], wq};
    map[i] = mlc_func_add(p, f, MLC_OP_QLINEAR, qin, 2, &qa, n->loc, n->scope);
    char err[256];
    if (!mlc_infer_type(p, f, &f->nodes[map[i]], &f->nodes[map[i]].type, err, sizeof err)) MLC_ICE("quantize: %s", err);
  }
  for (uint32_t o = 0; o < old.noutputs; o++) mlc_func_add_output(p, f, old.outputs[o].name, map[old.outputs[o].node]);
  mlc_func_compact(p, f); /* the f32 weights' parameter nodes nothing reads now */
  return ok;
}

bool mlc_pass_quantize(mlc_pass_ctx *c) {
  mlc_program *p = c->p;
  if (!p->opts.quant_bits) return true;
  for (uint32_t i = 0; i < p->nfuncs; i++)
    if (!strcmp(p->funcs[i].name, "train")) {
      mlc_error(c->d, p->train.loc, "--quantize: quantised graphs are inference only (qlinear has no gradient); "
                "train without --quantize, or compile with --no-train");
      return false;
    }
  uint32_t nweights = p->nparams;
  uint32_t *packed = mlc_arena_alloc(p->arena, (nweights + 1) * sizeof *packed);
  for (uint32_t i = 0; i < nweights; i++) packed[i] = NONE;
  bool ok = true;
  for (uint32_t i = 0; i < p->nfuncs; i++) ok &= rewrite(c, &p->funcs[i], packed);
  return ok;
}
