/* The IR text printer.  Its output is stable (no pointers, no hash-table
 * order), so golden tests can compare dumps byte for byte.
 *
 *   %7 = linear %5, %6 : f32[8, 1024, 6144]  ; layers.0.attn
 *
 * Attributes print after the operands as name=value, only those the op
 * uses (the attrs column of ops.def).
 */
#include <stdio.h>

#include "ir/ir.h"

static const char *init_name[] = {"zeros", "ones", "uniform", "normal", "given"};

static void print_attrs(FILE *out, const mlc_program *p, const mlc_node *n) {
  unsigned m = mlc_ops[n->op].attrs;
  if (m & MLC_A_NAME) fprintf(out, " \"%s\"", n->a.name);
  if (m & MLC_A_PARAM) fprintf(out, " %s", p->params[n->a.param].name);
  if (m & MLC_A_VALUE) fprintf(out, " %.9g", n->a.f);
  if (m & MLC_A_AXIS) fprintf(out, " axis=%d", n->a.axis);
  if (m & MLC_A_AXIS2) fprintf(out, " axis2=%d", n->a.axis2);
  if (m & MLC_A_KEEPDIM) fprintf(out, " keepdim=%d", n->a.keepdim);
  if (n->a.abs_in) fprintf(out, " abs=1");
  if (m & MLC_A_RANGE) fprintf(out, " start=%lld end=%lld", (long long)n->a.start, (long long)n->a.end);
  if (m & MLC_A_EPS) fprintf(out, " eps=%.9g", n->a.f);
  if (m & MLC_A_CAUSAL) fprintf(out, " causal=%d", n->a.causal);
  if (m & MLC_A_SCALE) fprintf(out, " scale=%.9g", n->a.f);
  if (m & MLC_A_QUANT) fprintf(out, " bits=%d group=%d%s%s", n->a.qbits, n->a.qgroup, n->a.qscheme & MLC_QS_ASYM ? " asym=1" : "",
            n->a.qscheme & MLC_QS_BF16 ? "" : " scales=f32");
  if (m & MLC_A_RNG) fprintf(out, " stream=%lld seed=%lld", (long long)n->a.start, (long long)n->a.end);
}

void mlc_print_func(FILE *out, const mlc_program *p, const mlc_func *f) {
  char buf[128];
  fprintf(out, "func %s(", f->name);
  for (uint32_t i = 0; i < f->inputs.n; i++) {
    const mlc_node *n = &f->nodes[f->inputs.v[i]];
    fprintf(out, "%s%s: %s", i ? ", " : "", n->a.name, mlc_type_str(&n->type, buf, sizeof buf));
  }
  fprintf(out, ") {\n");
  if (f->offset) fprintf(out, "  ; arena %lld bytes\n", (long long)f->arena_bytes);
  for (uint32_t i = 0; i < f->n; i++) {
    const mlc_node *n = &f->nodes[i];
    fprintf(out, "  %%%u = %s", i, mlc_ops[n->op].name);
    for (uint32_t k = 0; k < n->nin; k++) fprintf(out, "%s%%%u", k ? ", " : " ", n->in[k]);
    print_attrs(out, p, n);
    fprintf(out, " : %s", mlc_type_str(&n->type, buf, sizeof buf));
    if (f->offset && f->offset[i] >= 0) fprintf(out, " @%lld%s", (long long)f->offset[i], mlc_node_in_place(f, i) ? " in place" : "");
    if (n->scope[0]) fprintf(out, "  ; %s", n->scope);
    fputc('\n', out);
  }
  fprintf(out, "  return");
  for (uint32_t i = 0; i < f->noutputs; i++)
    fprintf(out, "%s %s=%%%u", i ? "," : "", f->outputs[i].name, f->outputs[i].node);
  fprintf(out, "\n}\n");
}

void mlc_print_program(FILE *out, const mlc_program *p) {
  char buf[128];
  fprintf(out, "program %s\n", p->name);
  for (uint32_t i = 0; i < p->nparams; i++) {
    const mlc_param *prm = &p->params[i];
    if (prm->role == MLC_ROLE_QUANT) { /* no initialiser of its own: the runtime packs it */
      fprintf(out, "param %s : %s = int%d(%s, group=%d%s%s)\n", prm->name, mlc_type_str(&prm->type, buf, sizeof buf),
              prm->quant_bits, p->params[prm->quant_of - 1].name, prm->quant_group,
              prm->quant_scheme & MLC_QS_ASYM ? ", asym" : "", prm->quant_scheme & MLC_QS_BF16 ? "" : ", f32 scales");
      continue;
    }
    if (prm->role == MLC_ROLE_SHADOW) { /* made by the runtime from its weight, then written by the update */
      fprintf(out, "param %s : %s = shadow(%s)\n", prm->name, mlc_type_str(&prm->type, buf, sizeof buf),
              p->params[prm->quant_of - 1].name);
      continue;
    }
    fprintf(out, "param %s : %s = %s", prm->name, mlc_type_str(&prm->type, buf, sizeof buf), init_name[prm->init]);
    if (prm->init == MLC_INIT_UNIFORM || prm->init == MLC_INIT_NORMAL)
      fprintf(out, "(%.9g, %.9g)", prm->init_a, prm->init_b);
    fputc('\n', out);
  }
  for (uint32_t i = 0; i < p->nties; i++) fprintf(out, "tie %s = %s\n", p->ties[i].name, p->params[p->ties[i].param].name);
  const mlc_train_config *t = &p->train;
  if (t->present) {
    static const char *opt[] = {"none", "adamw", "sgd"};
    fprintf(out, "train optimizer=%s", opt[t->opt]);
    if (t->opt == MLC_OPT_ADAMW)
      fprintf(out, "(lr=%.9g, betas=(%.9g, %.9g), eps=%.9g, weight_decay=%.9g)", t->lr, t->beta1, t->beta2, t->eps,
              t->weight_decay);
    else if (t->opt == MLC_OPT_SGD)
      fprintf(out, "(lr=%.9g, momentum=%.9g, weight_decay=%.9g)", t->lr, t->momentum, t->weight_decay);
    if (t->param_dtype)
      fprintf(out, " precision(param=%s, reduce=%s)", mlc_dtype_name(t->param_dtype), mlc_dtype_name(t->reduce_dtype));
    if (t->shard) {
      fprintf(out, " shard=%s(", t->shard);
      for (uint32_t i = 0; i < t->nshard_units; i++) fprintf(out, "%s%s", i ? ", " : "", t->shard_units[i]);
      fprintf(out, ")");
    }
    fputc('\n', out);
  }
  for (uint32_t i = 0; i < p->nfuncs; i++) mlc_print_func(out, p, &p->funcs[i]);
}
