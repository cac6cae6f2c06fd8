/* The arithmetic unit each CUDA kernel runs its FLOPs on, for the plan's
 * steps (codegen/plan.h, mlc_kernel_unit) and so for the profiler's
 * verdicts.
 *
 * This follows the emitters' own rules, as their header comments state
 * them (emit_gemm.c, emit_attention.c): it is kept beside them rather than
 * reported by them so the emitters stay untouched; a change to which
 * kernel an emitter picks must be mirrored here (tests/unit/test_plan.c
 * checks the cases).
 *   GEMMs (matmul, linear, matmul_tn): bf16/f16 on the tensor cores; f32
 *     on TF32 tensor cores under --f32-matmul tf32x3 (3 products) or tf32
 *     (1), on the FP32 FMAs under ieee.
 *   attention forward: 16-bit with d == dv, d % 16 == 0, d <= 256
 *     (MLC_CUDA_ATTN_MAX_HEAD) on the tensor cores; f32 with d == dv,
 *     d % 8 == 0, d <= 256 on TF32 unless ieee; else FP32.
 *   attention gradient: 16-bit with d % 32 == 0, d <= 256 on the tensor
 *     cores; f32 with d % 8 == 0, d <= 256 on TF32 unless ieee; else FP32.
 *     (Its first launch, the forward again, runs on the same unit.)
 *   linear of at most 4 rows (mlc_gemv), attention_kv and qlinear: FP32.
 *   scaled_mm (issue 30): FP8 tensor cores where K % 16 == 0, else FP32.
 *   a fused group led by a GEMM (ir/fused.h): that GEMM's unit.
 *   everything else (elementwise, norms, reductions, softmax, AdamW,
 *     casts, embedding): FP32.
 */
#include <stdint.h>

#include "codegen/cuda/cuda.h"
#include "codegen/plan.h"
#include "runtime/plan.h"

static bool is16(int dt) { return dt == MLC_DT_BF16 || dt == MLC_DT_F16; }

uint8_t mlc_cuda_kernel_unit(const mlc_program *p, const mlc_func *f, uint32_t node, uint8_t *out_products) {
  const mlc_node *n = &f->nodes[node];
  uint16_t op;
  const mlc_type *a;
  *out_products = 1;
  if (!mlc_plan_mm_of(f, node, &op, &a)) return MLC_PLAN_UNIT_FP32; /* a fused group: its GEMM's unit */
  uint8_t f32_products = p->opts.f32_matmul == MLC_F32MM_IEEE ? 0 : p->opts.f32_matmul == MLC_F32MM_TF32 ? 1 : 3;
  if (op == MLC_OP_ATTENTION_KV || op == MLC_OP_QLINEAR) return MLC_PLAN_UNIT_FP32;
  if (op == MLC_OP_SCALED_MM) /* emit_gemm.c: the FP8 wgmma where rows are 16-byte aligned, else one thread an output */
    return a->rank >= 2 && a->dim[a->rank - 1] % 16 == 0 && mlc_type_numel(a) / a->dim[a->rank - 1] < INT32_MAX ? MLC_PLAN_UNIT_FP8
                                                                                                                : MLC_PLAN_UNIT_FP32;
  if (op == MLC_OP_LINEAR && a->rank && mlc_type_numel(a) >= 1 && mlc_type_numel(a) <= 4 * a->dim[a->rank - 1] &&
      !mlc_node_sharded(p, f, n))
    return MLC_PLAN_UNIT_FP32; /* emit_gemm.c's gemv_fits */
  bool grad = op == MLC_OP_ATTENTION_GRAD || op == MLC_OP_ATTENTION_GRAD_SAVED;
  bool attn = grad || op == MLC_OP_ATTENTION || op == MLC_OP_ATTENTION_SAVE;
  if (attn) {
    /* q (or g, or packed qkv) ends in the head dim; v's last dim is dv
     * where v is its own input. */
    int64_t d = a->rank ? a->dim[a->rank - 1] : 0, dv = d;
    if (op == MLC_OP_ATTENTION && n->nin == 3) {
      const mlc_type *v = &f->nodes[n->in[2]].type;
      dv = v->rank ? v->dim[v->rank - 1] : 0;
    }
    if (is16(a->dtype)) {
      bool tc = d <= MLC_CUDA_ATTN_MAX_HEAD && (grad ? d % 32 == 0 : d == dv && d % 16 == 0);
      return tc ? MLC_PLAN_UNIT_TC16 : MLC_PLAN_UNIT_FP32;
    }
    if (a->dtype != MLC_DT_F32 || d != dv || d % 8 || d > MLC_CUDA_ATTN_MAX_HEAD || !f32_products) return MLC_PLAN_UNIT_FP32;
    *out_products = f32_products;
    return MLC_PLAN_UNIT_TF32;
  }
  if (is16(a->dtype)) return MLC_PLAN_UNIT_TC16;
  if (a->dtype != MLC_DT_F32 || !f32_products) return MLC_PLAN_UNIT_FP32;
  *out_products = f32_products;
  return MLC_PLAN_UNIT_TF32;
}
