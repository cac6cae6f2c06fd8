/* views: a slice that is one contiguous range of its input becomes a view
 * of it (no kernel, no copy): memplan gives it its input's bytes at an
 * offset, as it does fsdp's and attnsave's views.
 *
 * A slice on axis a is contiguous when every dim before a is 1: a decode
 * step's q, k and v are slices of the in-projection's one row [1, 1, 3e],
 * three copy kernels a layer on every target until this pass.  The view
 * must start on a 256-byte boundary (memplan's alignment, which every
 * target's vector loads and Vulkan's storage-buffer offsets accept), and
 * its input must live in the arena: not a parameter or a constant, whose
 * bytes are bound outside it, not an entry input, which a caller may bind
 * to its own buffer, and not a collective's result, which memplan keeps in
 * the communication stream's pool.  A slice an entry returns stays a copy.
 */
#include "passes/passes.h"

#define VIEW_ALIGN 256 /* bytes: memplan's alignment of every value */

static bool in_arena(const mlc_func *f, uint32_t v) {
  v = mlc_memplan_root(f, v);
  int op = f->nodes[v].op;
  return op != MLC_OP_PARAM && op != MLC_OP_CONST && op != MLC_OP_INPUT && !(mlc_ops[op].flags & MLC_F_COLL);
}

static bool returned(const mlc_func *f, uint32_t v) {
  for (uint32_t i = 0; i < f->noutputs; i++)
    if (f->outputs[i].node == v) return true;
  return false;
}

/* The element offset of slice n within its input when it is one contiguous
 * range of it that may start a view; else -1. */
static int64_t contiguous_start(const mlc_func *f, const mlc_node *n) {
  const mlc_type *t = &f->nodes[n->in[0]].type;
  int ax = n->a.axis;
  int64_t inner = 1;
  for (int d = 0; d < ax; d++)
    if (t->dim[d] != 1) return -1;
  for (int d = ax + 1; d < t->rank; d++) inner *= t->dim[d];
  int64_t start = n->a.start * inner;
  return (start * mlc_dtype_size(t->dtype)) % VIEW_ALIGN ? -1 : start;
}

bool mlc_pass_views(mlc_pass_ctx *c) {
  for (uint32_t k = 0; k < c->p->nfuncs; k++) {
    mlc_func *f = &c->p->funcs[k];
    for (uint32_t i = 0; i < f->n; i++) {
      mlc_node *n = &f->nodes[i];
      if (n->op != MLC_OP_SLICE || !in_arena(f, n->in[0]) || returned(f, i)) continue;
      int64_t start = contiguous_start(f, n);
      if (start < 0) continue;
      n->op = MLC_OP_VIEW;
      n->a.start = start;
      n->a.end = start + mlc_type_numel(&n->type);
      n->a.axis = 0;
    }
  }
  return true;
}
