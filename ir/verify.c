/* The IR verifier: the structural invariants every pass must keep.  It runs
 * between passes; a failure means a pass (not the user's model) is wrong,
 * so the message names the pass and the node.
 *
 * Checked: op in range; arity; inputs defined before use (which also rules
 * out cycles); parameter indices valid; INPUT nodes listed as inputs;
 * outputs valid; every node's stored type equals what its shape rule
 * computes from its inputs.
 */
#include <stdarg.h>
#include <stdio.h>

#include "ir/ir.h"

typedef struct {
  FILE *out;
  const char *pass;
  const mlc_func *f;
  bool ok;
} vctx;

static void bad(vctx *v, uint32_t node, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void bad(vctx *v, uint32_t node, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(v->out, "mlc: IR verifier failed after pass '%s', func %s, node %%%u: ", v->pass, v->f->name, node);
  vfprintf(v->out, fmt, ap);
  fputc('\n', v->out);
  va_end(ap);
  v->ok = false;
}

static void verify_func(vctx *v, const mlc_program *p, const mlc_func *f) {
  v->f = f;
  uint32_t ninputs = 0;
  for (uint32_t i = 0; i < f->n; i++) {
    const mlc_node *n = &f->nodes[i];
    if (n->op >= MLC_OP_COUNT) { bad(v, i, "op %u out of range", n->op); continue; }
    const mlc_opinfo *info = &mlc_ops[n->op];
    if (info->arity >= 0 ? n->nin != info->arity : n->nin < 1) {
      bad(v, i, "%s has %u inputs, expected %d", info->name, n->nin, info->arity);
      continue;
    }
    bool inputs_ok = true;
    for (uint32_t k = 0; k < n->nin; k++)
      if (n->in[k] >= i) { bad(v, i, "input %u refers to %%%u, not defined before it", k, n->in[k]); inputs_ok = false; }
    if (!inputs_ok) continue;
    if (n->op == MLC_OP_PARAM && n->a.param >= p->nparams) { bad(v, i, "param index %u out of range", n->a.param); continue; }
    if (n->op == MLC_OP_PARAM && !mlc_type_eq(&n->type, &p->params[n->a.param].type)) bad(v, i, "param type differs from its declaration");
    if (n->op == MLC_OP_INPUT) {
      if (ninputs >= f->inputs.n || f->inputs.v[ninputs] != i) bad(v, i, "input node not listed in the signature in order");
      ninputs++;
    }
    mlc_type t;
    char err[256];
    if (!mlc_infer_type(p, f, n, &t, err, sizeof err)) bad(v, i, "%s: %s", info->name, err);
    else if (!mlc_type_eq(&t, &n->type)) {
      char a[96], b[96];
      bad(v, i, "%s: stored type %s but the shape rule gives %s", info->name, mlc_type_str(&n->type, a, sizeof a),
          mlc_type_str(&t, b, sizeof b));
    }
  }
  if (ninputs != f->inputs.n) bad(v, 0, "signature lists %u inputs, graph has %u", f->inputs.n, ninputs);
  for (uint32_t i = 0; i < f->noutputs; i++)
    if (f->outputs[i].node >= f->n) bad(v, 0, "output %s refers to %%%u, out of range", f->outputs[i].name, f->outputs[i].node);
}

bool mlc_verify_program(const mlc_program *p, FILE *out, const char *after_pass) {
  vctx v = {.out = out, .pass = after_pass, .ok = true};
  for (uint32_t i = 0; i < p->nfuncs; i++) verify_func(&v, p, &p->funcs[i]);
  return v.ok;
}
