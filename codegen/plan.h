/* Plan encoding: the compiler's side of runtime/plan.h.  Every target
 * writes its plan through this, so there is one writer of the format. */
#ifndef MLC_CODEGEN_PLAN_H
#define MLC_CODEGEN_PLAN_H

#include "ir/ir.h"
#include "runtime/cuda/kernel.h"
#include "runtime/plan.h"
#include "runtime/vulkan/kernel.h"

/* Names the kernel that runs node `node` of `f`, or returns NULL when the
 * node needs no step (inputs, parameters, views).  Nodes that return the
 * same name share one kernel entry. */
typedef const char *(*mlc_kernel_namer)(void *ctx, const mlc_func *f, uint32_t node, uint64_t *out_work_items);

/* The arithmetic unit (MLC_PLAN_UNIT_* of runtime/plan.h) that the
 * target's kernel for node `node` runs its FLOPs on, and the unit's
 * products per FLOP of the model (3 for tf32x3). */
typedef uint8_t (*mlc_kernel_unit)(const mlc_program *p, const mlc_func *f, uint32_t node, uint8_t *out_products);

/* A kernel's dispatch record as a target hands it to the encoder (the
 * plan's own is runtime/plan.h's mlc_plan_dispatch). */
typedef struct {
  const char *symbol;
  uint32_t executable; /* index into mlc_plan_code.executables */
  uint32_t nargs;      /* 0: that of the steps that run it */
  uint64_t scratch;
  uint32_t nlaunch;
  mlc_plan_launch launch[MLC_PLAN_MAX_LAUNCH];
  const uint8_t *extra; /* the format's own bytes (runtime/plan.h) */
  uint32_t extra_bytes;
} mlc_plan_kernel_code;

/* The code a plan carries: executables, and the records of the kernels in
 * them, which come first in the plan's kernel table and in this order (so
 * that a record may name another kernel by its index here: a Vulkan
 * fallback).  With `native` set instead, every kernel a step names runs
 * from one "native" executable under its own symbol (the CPU's). */
typedef struct {
  uint32_t nexecutables;
  const mlc_plan_executable *executables;
  uint32_t nkernels;
  const mlc_plan_kernel_code *kernels;
  bool native;
} mlc_plan_code;

/* The code of the targets' kernel tables, in the program's arena: CUDA's
 * (one executable of `format`, a fatbin or the source), Vulkan's (one SPIR-V
 * executable per kernel) and Metal's (as CUDA's, in MSL or a metallib). */
void mlc_plan_code_cuda(mlc_arena *a, const mlc_cuda_kernel *k, uint32_t n, const char *format, const void *code,
                        size_t bytes, mlc_plan_code *out);
void mlc_plan_code_vulkan(mlc_arena *a, const mlc_vk_kernel *k, uint32_t n, mlc_plan_code *out);

/* Encodes the program (after memplan) as a plan.  The bytes live in the
 * program's arena.  Every step's unit is FP32 (a CPU's). */
void mlc_plan_encode(const mlc_program *p, mlc_kernel_namer namer, void *ctx, uint8_t **out, size_t *out_n);
/* The same, with each step's unit from unit_of. */
void mlc_plan_encode_units(const mlc_program *p, mlc_kernel_namer namer, void *ctx, mlc_kernel_unit unit_of, uint8_t **out,
                           size_t *out_n);
/* The same, with the code the target emitted (NULL: none, every kernel's
 * executable MLC_PLAN_NO_EXECUTABLE). */
void mlc_plan_encode_code(const mlc_program *p, mlc_kernel_namer namer, void *ctx, mlc_kernel_unit unit_of,
                          const mlc_plan_code *code, uint8_t **out, size_t *out_n);
/* A unit rule for targets with matrix units for 16-bit types only (Vulkan's
 * cooperative matrices, Metal's simdgroup matrices): matmul-like ops on
 * bf16/f16 inputs are TC16, everything else FP32. */
uint8_t mlc_plan_unit_16bit_matrix(const mlc_program *p, const mlc_func *f, uint32_t node, uint8_t *out_products);
/* The matrix product a step runs, for the unit rules: node itself when it
 * is matmul-like (MLC_F_MM), or a fused group whose instruction 0 is a GEMM
 * of its inputs 0 and 1 (ir/fused.h).  Sets *op and *a (the first
 * operand's type) and returns true; false for anything else. */
bool mlc_plan_mm_of(const mlc_func *f, uint32_t node, uint16_t *op, const mlc_type **a);

#endif
