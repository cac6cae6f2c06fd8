/* The registry of target descriptors (ir/target.h).  The numbers are the
 * limits of each target's kernels as codegen/ and runtime/ have them. */
#include "ir/target.h"

#include <string.h>

static const mlc_target targets[] = {
    /* native code through LLVM: packs GEMM operands and fuses in its own code generator */
    {.name = "cpu"},
    /* one GPU: the CUDA runtime passes at most 72 kernel arguments (AdamW groups of 13: 5 * 13 + 2 inputs, the output and scratch);
       attention_save / attention_grad_saved handle heads up to 256 (codegen/cuda/emit_attention.c);
       a linear of at most 4 rows is a matrix-vector product (codegen/cuda/emit_gemm.c's GEMV_ROWS), whose
       block normalises x for a prologue in static shared memory (48 KiB at most; 32 KiB leaves room) */
    {.name = "cuda", .gpu = true, .epilogues_that_pay = true, .update_groups = true, .qlinear_epilogues = true,
     .scaled_mm_epilogues = true, .quant_both = true,
     .gemv_prologue_rows = 4, .gemv_prologue_bytes = 32768, .max_kernel_args = 72,
     .attn_save_max_head = 256, .attn_save_head_16 = 32, .attn_save_head_32 = 8, .ce_grad_in_place = true,
     .norm_grad_adds = true},
    /* FSDP over NCCL: the fsdp pass places the updates between the collectives itself */
    {.name = "cuda-nccl", .gpu = true, .epilogues_that_pay = true, .qlinear_epilogues = true, .scaled_mm_epilogues = true, .gemv_prologue_rows = 4,
     .gemv_prologue_bytes = 32768, .max_kernel_args = 72,
     .attn_save_max_head = 256, .attn_save_head_16 = 32, .attn_save_head_32 = 8, .sharded = true, .norm_grad_adds = true},
    /* Metal: a kernel takes at most 31 buffers, so AdamW stays one update per tensor */
    {.name = "metal", .gpu = true, .max_kernel_args = 31, .norm_grad_adds = true},
    /* SPIR-V: its qlinear kernels store through an epilogue (codegen/spirv/emit_qlinear.c) */
    {.name = "spirv", .gpu = true, .qlinear_epilogues = true},
};

const mlc_target *mlc_target_find(const char *name) {
  for (unsigned i = 0; name && i < sizeof targets / sizeof *targets; i++)
    if (!strcmp(targets[i].name, name)) return &targets[i];
  return NULL;
}

const mlc_target *mlc_targets(unsigned *n) {
  *n = sizeof targets / sizeof *targets;
  return targets;
}
