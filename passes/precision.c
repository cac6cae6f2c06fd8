/* precision: mixed-precision training, as FSDP2's MixedPrecisionPolicy.
 *
 * With `precision(param=bf16, reduce=f32)` the train function computes in
 * bf16 while the parameters stay f32 (the master weights) and so do the
 * optimizer's state and updates.  The pass rebuilds the train function:
 * every f32 parameter and float input is read through a cast to the compute
 * dtype, f32 scalar constants take the compute dtype, and every other node
 * is re-typed by its shape rule, so bf16 flows through the graph.  Autodiff
 * runs after this pass: the VJP of those casts turns each gradient back
 * into f32 (the reduce dtype) before the optimizer sees it.  Kernels keep
 * their own f32 accumulators (norms, softmax, attention, GEMM); what bf16
 * changes is what is stored between them.  cross_entropy's loss is f32.
 *
 * Where a user's own cast(x, f32) meets the bf16 flow in a binary op, the
 * f32 side is cast to bf16, as autocast would.  The forward entry point is
 * left as written.
 */
#include <string.h>

#include "passes/passes.h"

static uint32_t add_cast(mlc_program *p, mlc_func *f, uint32_t src, uint8_t dt, const mlc_node *like) {
  uint32_t id = mlc_func_add(p, f, MLC_OP_CAST, &src, 1, NULL, like->loc, like->scope);
  f->nodes[id].type = f->nodes[src].type;
  f->nodes[id].type.dtype = dt;
  return id;
}

static bool rebuild(mlc_pass_ctx *c, mlc_func *f, uint8_t dt) {
  mlc_program *p = c->p;
  mlc_func old = *f;
  memset(&f->nodes, 0, sizeof f->nodes);
  f->n = f->cap = 0;
  f->nodes = NULL;
  f->inputs = (mlc_u32vec){0};
  uint32_t *map = mlc_arena_alloc(p->arena, (old.n + 1) * sizeof *map);
  for (uint32_t i = 0; i < old.n; i++) {
    const mlc_node *n = &old.nodes[i];
    uint32_t in[64];
    MLC_ASSERT(n->nin <= 64);
    for (uint32_t k = 0; k < n->nin; k++) in[k] = map[n->in[k]];
    if (mlc_ops[n->op].flags & MLC_F_EW && n->nin == 2) {
      uint8_t a = f->nodes[in[0]].type.dtype, b = f->nodes[in[1]].type.dtype;
      if (a != b && (a == dt || b == dt) && mlc_dtype_is_float(a) && mlc_dtype_is_float(b))
        in[a == dt ? 1 : 0] = add_cast(p, f, in[a == dt ? 1 : 0], dt, n);
    }
    uint32_t id = mlc_func_add(p, f, (mlc_op)n->op, in, n->nin, &n->a, n->loc, n->scope);
    mlc_node *nn = &f->nodes[id];
    nn->type = n->type;
    bool leaf = mlc_ops[n->op].flags & MLC_F_LEAF;
    if (n->op == MLC_OP_CONST && n->type.dtype == MLC_DT_F32) nn->type.dtype = dt;
    if (!leaf) {
      char err[256];
      if (!mlc_infer_type(p, f, nn, &nn->type, err, sizeof err)) {
        mlc_error(c->d, n->loc, "in %s precision: %s", mlc_dtype_name(dt), err);
        return false;
      }
    }
    if (n->op == MLC_OP_INPUT) mlc_u32vec_push(p->arena, &f->inputs, id);
    map[i] = id;
    bool cast = (n->op == MLC_OP_PARAM || n->op == MLC_OP_INPUT) && n->type.dtype == MLC_DT_F32;
    if (cast) map[i] = add_cast(p, f, id, dt, n);
  }
  for (uint32_t i = 0; i < f->noutputs; i++) f->outputs[i].node = map[f->outputs[i].node];
  return true;
}

bool mlc_pass_precision(mlc_pass_ctx *c) {
  mlc_program *p = c->p;
  uint8_t dt = p->train.param_dtype;
  if (!dt || dt == MLC_DT_F32) return true;
  for (uint32_t k = 0; k < p->nfuncs; k++)
    if (!strcmp(p->funcs[k].name, "train") && !rebuild(c, &p->funcs[k], dt)) return false;
  return true;
}
