/* The pipeline as a plain list: shapes first; the train block's passes
 * (precision, autodiff, fp8 under --matmul=fp8, fsdp, optimizer); with accum, one micro-batch's
 * forward and backward after the other (microbatch); attention padded to
 * a head dim the target's kernels take (attnpad); the rewrites that
 * change what the backward keeps (attnsave, where the target's descriptor
 * allows it: CUDA) and when updates run (interleave, on every target);
 * quantize (--quantize only), which turns the linears of an inference
 * program into qlinear over packed weights, before fuse, so that a linear
 * with an epilogue is quantised too (fuse leaves a qlinear a kernel of its
 * own); views, which makes a slice that is one contiguous range of its input
 * (a decode step's q, k and v) a view of it; fuse, which groups nodes into kernels; recompute, which meets a
 * memory budget by computing cheap activations, then whole layers'
 * forwards, again in the backward; memplan
 * last, over the final order.  Each pass is its own file under passes/; --print-after names
 * them as here. */
#include <string.h>
#include <time.h>

#include "passes/passes.h"

static const struct {
  const char *name;
  mlc_pass_fn run;
} pipeline[] = {
  {"shapes", mlc_pass_shapes},
  {"precision", mlc_pass_precision},
  {"autodiff", mlc_pass_autodiff},
  {"fp8", mlc_pass_fp8},
  {"fsdp", mlc_pass_fsdp},
  {"optimizer", mlc_pass_optimizer},
  {"microbatch", mlc_pass_microbatch},
  {"attnpad", mlc_pass_attnpad},
  {"attnsave", mlc_pass_attnsave},
  {"interleave", mlc_pass_interleave},
  {"quantize", mlc_pass_quantize},
  {"views", mlc_pass_views},
  {"fuse", mlc_pass_fuse},
  {"recompute", mlc_pass_recompute},
  {"memplan", mlc_pass_memplan},
};
#define NPASSES (sizeof pipeline / sizeof *pipeline)

uint32_t mlc_pass_add_node(mlc_program *p, mlc_func *f, mlc_op op, const uint32_t *in, uint32_t nin, const mlc_attrs *a,
                           const mlc_node *like, const mlc_type *t, const char *who) {
  uint32_t id = mlc_func_add(p, f, op, in, nin, a, like->loc, like->scope);
  mlc_node *n = &f->nodes[id];
  n->type = *t;
  char err[256];
  if (!mlc_infer_type(p, f, n, &n->type, err, sizeof err)) MLC_ICE("%s: %s", who, err);
  return id;
}

double mlc_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

bool mlc_pipeline_has_pass(const char *name) {
  if (!strcmp(name, "all") || !strcmp(name, "lower")) return true;
  for (size_t i = 0; i < NPASSES; i++)
    if (!strcmp(pipeline[i].name, name)) return true;
  return false;
}

const char *mlc_pipeline_pass_names(void) { return "lower, shapes, precision, autodiff, fp8, fsdp, optimizer, microbatch, attnpad, attnsave, interleave, quantize, views, fuse, recompute, memplan"; }

static void dump(const mlc_pipeline_options *o, const mlc_program *p, const char *name) {
  if (!o->print_after || !o->dump) return;
  if (strcmp(o->print_after, "all") && strcmp(o->print_after, name)) return;
  fprintf(o->dump, "// ----- IR after %s -----\n", name);
  mlc_print_program(o->dump, p);
}

bool mlc_pipeline_run(mlc_program *p, mlc_diag *d, const mlc_pipeline_options *o) {
  if (!mlc_verify_program(p, stderr, "lower")) MLC_ICE("IR verifier failed after lowering");
  dump(o, p, "lower");
  for (size_t i = 0; i < NPASSES; i++) {
    mlc_pass_ctx c = {p, d, mlc_target_find(o->target), o->fsdp, o->keep_grads};
    double t0 = mlc_now();
    bool ok = pipeline[i].run(&c);
    double t1 = mlc_now();
    if (o->timing) fprintf(o->timing, "  %-12s %9.3f ms\n", pipeline[i].name, (t1 - t0) * 1e3);
    if (!ok) return false;
    if (!mlc_verify_program(p, stderr, pipeline[i].name)) MLC_ICE("IR verifier failed after pass %s", pipeline[i].name);
    dump(o, p, pipeline[i].name);
  }
  return true;
}
