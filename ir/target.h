/* What the passes may know of a target: a descriptor per code generator, in
 * one registry (ir/target.c), so that no pass compares target names.
 *
 * Each field is a capability or a limit of the target's kernels and
 * runtime that changes what a pass does; the code generators themselves
 * stay behind the driver (issue 22: the emitters, the artifact writers and
 * the devices are still chosen by name there).  A pipeline run without
 * code generation (`mlc compile` without --target) has no descriptor: the
 * passes then do only what every target needs. */
#ifndef MLC_IR_TARGET_H
#define MLC_IR_TARGET_H

#include <stdbool.h>

typedef struct {
  const char *name;          /* as --target spells it */
  bool gpu;                  /* passes/fuse.c rewrites for it: matmul_tn, elementwise groups, GEMM epilogues */
  bool epilogues_that_pay;   /* fuse.c: only the GEMM epilogues its GEMM stores gain from (CUDA's; see
                                epilogue_pays), not every one */
  bool update_groups;        /* fuse.c: AdamW and SGD updates in groups (adamw_multi, sgd_multi), one launch each */
  bool qlinear_epilogues;    /* fuse.c: a qlinear (--quantize) heads an epilogue group as a GEMM does (its
                                kernel stores through the group's epilogue: CUDA's mlc_qgemv) */
  bool scaled_mm_epilogues;  /* fuse.c: so does a scaled_mm (--matmul=fp8; CUDA's mlc_scaled_out) */
  bool quant_both;           /* fp8.c: a tensor that FP8 GEMMs read in both layouts is quantised into both in
                                one kernel (quant_both, CUDA's emit_quant.c) */
  int gemv_prologue_rows;    /* fuse.c: an rmsnorm whose only reader is a linear of at most this many rows ... */
  int gemv_prologue_bytes;   /* ... and of at most this many bytes of x becomes its prologue (ir/fused.h;
                                CUDA's mlc_gemv normalises x into shared memory); 0: never */
  int max_kernel_args;       /* arguments a kernel launch takes (CUDA's runtime: 72); 0: no limit */
  int attn_save_max_head;    /* passes/attnsave.c: an attention keeps its log-sum-exp for its gradient
                                when its head dim is at most this (0: never) ... */
  int attn_save_head_16;     /* ... and a multiple of this for bf16/f16 ... */
  int attn_save_head_32;     /* ... or of this for f32 on tensor cores (not under --f32-matmul ieee) */
  bool ce_grad_in_place;     /* passes/memplan.c: cross_entropy_grad may write over its logits */
  bool norm_grad_adds;       /* fuse.c: a norm's input gradient takes the residual add after it (norm_grad_adds) */
  bool sharded;              /* the fsdp pass shards always (cuda-nccl) */
} mlc_target;

/* The descriptor of --target NAME; NULL if there is none of that name. */
const mlc_target *mlc_target_find(const char *name);
/* Every descriptor, for --help and `mlc devices`: n of them. */
const mlc_target *mlc_targets(unsigned *n);

#endif
