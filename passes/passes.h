/* The pass pipeline.  Every pass has one signature and lives in its own
 * file; the pipeline is the plain list in pipeline.c.  The verifier runs
 * after every pass. */
#ifndef MLC_PASSES_H
#define MLC_PASSES_H

#include <stdio.h>

#include "ir/ir.h"
#include "ir/target.h"

typedef struct {
  mlc_program *p;
  mlc_diag *d;
  const mlc_target *target; /* --target's descriptor (ir/target.h), or NULL without code generation */
  bool fsdp;          /* shard the train block's fsdp units (cuda-nccl, or cpu with --fsdp / several ranks) */
  bool keep_grads;    /* keep the "grad:" outputs after the optimizer (tests that compare gradients) */
} mlc_pass_ctx;

typedef bool (*mlc_pass_fn)(mlc_pass_ctx *c);

/* For a pass that adds nodes (passes/pipeline.c): op of `in` with loc and
 * scope of `like`, of type t, which the op's rule checks (or works out, for
 * ops whose rule gives it); a failure is an internal error of pass `who`. */
uint32_t mlc_pass_add_node(mlc_program *p, mlc_func *f, mlc_op op, const uint32_t *in, uint32_t nin, const mlc_attrs *a,
                           const mlc_node *like, const mlc_type *t, const char *who);

typedef struct {
  const char *print_after; /* pass name, "all", or NULL */
  FILE *dump;              /* where --print-after goes */
  FILE *timing;            /* --time-passes table, or NULL */
  const char *target;      /* --target, or NULL (no code generation) */
  bool fsdp;               /* run the fsdp pass (see mlc_pass_ctx) */
  bool keep_grads;         /* see mlc_pass_ctx */
} mlc_pipeline_options;

/* Runs the passes in order.  False if a pass reported a user error; a
 * verifier failure is an internal error and does not return. */
bool mlc_pipeline_run(mlc_program *p, mlc_diag *d, const mlc_pipeline_options *o);
/* For --print-after: is this a pass name (or "lower", or "all")? */
bool mlc_pipeline_has_pass(const char *name);
/* The pass names, comma-separated, for --help and error messages. */
const char *mlc_pipeline_pass_names(void);
/* Monotonic seconds, for --time-passes. */
double mlc_now(void);

bool mlc_pass_shapes(mlc_pass_ctx *c);
/* Reverse mode over the train function: one "grad:<param>" output per
 * parameter the loss depends on (passes/autodiff.c). */
bool mlc_pass_autodiff(mlc_pass_ctx *c);
bool mlc_pass_memplan(mlc_pass_ctx *c);
/* The memory plan of one function (f->offset, f->arena_bytes) for a target (or NULL). */
void mlc_memplan_func(mlc_program *p, mlc_func *f, const mlc_target *target);
/* The node whose storage `node` uses, as memplan places it: the node
 * itself, or the root its chain of views (reshape, view, reduce-scatter)
 * leads to.  The plan's view_of (codegen/plan.c). */
uint32_t mlc_memplan_root(const mlc_func *f, uint32_t node);
/* Slices that are one contiguous range of their input, as views of it (passes/views.c). */
bool mlc_pass_views(mlc_pass_ctx *c);
/* A memory budget: cheap activations, then whole layers' forwards, recomputed in the
 * backward (passes/recompute.c). */
bool mlc_pass_recompute(mlc_pass_ctx *c);
bool mlc_pass_optimizer(mlc_pass_ctx *c);
/* Appends the train block's update of `param` by `grad` (its state as new
 * parameters, the update op, an "update:<name>" output) where the function
 * now ends; *step is the "opt.step" input, found or made on first need. */
uint32_t mlc_optimizer_update(mlc_program *p, mlc_func *f, uint32_t param, uint32_t grad, uint32_t *step);
/* clip_grad_norm: from the gradients' sum of squares sumsq (f32[]), their
 * norm in *norm and the factor min(1, C / (norm + 1e-6)) that scales them,
 * as torch.nn.utils.clip_grad_norm_ (nodes of scope "clip"). */
uint32_t mlc_clip_factor(mlc_program *p, mlc_func *f, uint32_t sumsq, uint32_t *norm);
/* Training with `shard = fsdp(...)` on a sharded target (passes/fsdp.c). */
bool mlc_pass_fsdp(mlc_pass_ctx *c);
bool mlc_pass_precision(mlc_pass_ctx *c);
/* --matmul=fp8: the train entry's linears' three GEMMs as scaled_mm of quantised operands (passes/fp8.c). */
bool mlc_pass_fp8(mlc_pass_ctx *c);
/* --quantize: linear layers' f32 weights -> qlinear over packed int8/int4 (passes/quantize.c). */
bool mlc_pass_quantize(mlc_pass_ctx *c);
/* The optimizer inside the backward: each update right after its gradient
 * is complete, the "grad:" outputs dropped (passes/interleave.c). */
bool mlc_pass_interleave(mlc_pass_ctx *c);
/* accum = n: each micro-batch's forward and backward before the next's
 * (passes/microbatch.c). */
bool mlc_pass_microbatch(mlc_pass_ctx *c);
/* CUDA targets: attention at a head dim its kernels do not take runs zero-padded to one they do (passes/attnpad.c). */
bool mlc_pass_attnpad(mlc_pass_ctx *c);
/* CUDA targets: attention keeps its log-sum-exp for its gradient (passes/attnsave.c). */
bool mlc_pass_attnsave(mlc_pass_ctx *c);
/* GPU targets: matmul(transpose(a), b) -> matmul_tn(a, b), then dead nodes go. */
bool mlc_pass_fuse(mlc_pass_ctx *c);

/* --stats (passes/stats.c): parameters, op counts, FLOPs. */
void mlc_print_stats(FILE *out, const mlc_program *p);
/* The device memory a session that runs only entry f holds, as planned:
 * f's arena and every parameter, and the optimizer state when f reads it
 * (the runtime makes the state at the first use of such an entry; one rank). */
int64_t mlc_planned_session_bytes(const mlc_program *p, const mlc_func *f);

#endif
