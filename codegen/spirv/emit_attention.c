/* Attention and its gradient: exact f32 kernels, a thread per row (no S
 * matrix reaches memory), with an online softmax (running max m, sum l,
 * the output rescaled by exp(m_old - m_new)); causal: key j visible to
 * query i when j <= i (PyTorch's is_causal).
 *
 * Head dims d, dv <= 128 (the tiled kernels): a workgroup of 64 threads per
 * 64 rows of one (batch, head); the rows of the other operand pass through
 * shared memory 16 at a time; a thread's scores for a block are registers
 * (the loop over d runs), the weights that multiply the shared rows go
 * through shared memory, and its result row is registers (d unrolled).
 *   attention:      per query row, o += p v over key blocks.
 *   attention_grad -> [3, b, h, s, d] (dq, dk, dv), four dispatches:
 *     0. the forward again per query row, giving L_i (log-sum-exp) and
 *        D_i = dO_i . O_i into scratch;
 *     1. per key row j: dv_j = sum_i P_ij dO_i, P_ij = exp(scale q_i.k_j - L_i);
 *     2. per key row j: dk_j = scale sum_i dS_ij q_i, dS_ij = P_ij (dO_i.v_j - D_i);
 *     3. per query row i: dq_i = scale sum_j dS_ij k_j.
 * Larger heads: the same per thread with rows in private arrays (plain).
 * attention_kv (decode): one dispatch copies the chunk's keys and values
 * into cache rows [pos, pos + t), then the tiled forward runs over the
 * caches with the causal mask shifted by pos (d, dv <= 128).
 * The forward of 16-bit heads of d <= 128 has a cooperative-matrix variant
 * (attention_coop.c, FlashAttention style; the tiled kernel is its fallback),
 * and so has the gradient of the same heads: dispatch 0 by that forward
 * (L_i and D_i, not the output), then FlashAttention-2's dispatches per 64
 * key rows (dv and dk) and per 64 query rows (dq), all products on
 * cooperative matrices.
 */
#include "codegen/spirv/attention.h"

bool sv_emit_attention(sv *s) {
  bool grad = s->n->op == MLC_OP_ATTENTION_GRAD, kv = s->n->op == MLC_OP_ATTENTION_KV;
  const mlc_type *qt = sv_in(s, grad ? 1 : 0), *kt = sv_in(s, grad ? 2 : kv ? 3 : 1), *vt = sv_in(s, grad ? 3 : kv ? 4 : 2);
  attn A = {.s = s, .b = s->b, .dt = qt->dtype, .BH = qt->dim[0] * qt->dim[1], .SQ = qt->dim[2], .SK = kt->dim[2],
            .D = qt->dim[3], .DV = vt->dim[3], .causal = kv || s->n->a.causal != 0, .scale = (float)s->n->a.f, .kv = kv,
            .raw = qt->dtype == MLC_DT_BF16 && !s->p->opts.spirv_coopmat_nv};
  if (!mlc_dtype_is_float((mlc_dtype)A.dt)) return sv_fail(s, "attention of an integer tensor");
  if (!sv_check_size(s, mlc_type_numel(&s->n->type)) || !sv_check_size(s, mlc_type_numel(kt)) || !sv_check_size(s, mlc_type_numel(vt)))
    return false;
  if (A.SK < 1 || A.D < 1 || A.DV < 1) return sv_fail(s, "attention with no keys");
  if (kv) return attn_kv_tiled(&A); /* no cooperative-matrix variant (spirv.c asks for none) */
  if (s->coopmat_variant) {
    if (!attn_coop_fits(&A, grad, true)) { /* declined: the kernel below alone */
      sb_entry_begin(s->b, "main0", 1, 1, (uint32_t[2]){0, 0});
      sb_entry_end(s->b);
      s->nd = 1;
      return true;
    }
    if (grad) attn_grad_coop(&A, false);
    else attn_fwd_coop(&A, false);
    return true;
  }
  /* the check of the cooperative-matrix kernels on a device without them */
  if (attn_coop_fits(&A, grad, false) && s->p->opts.spirv_emulate_coopmat) {
    if (grad) attn_grad_coop(&A, true);
    else attn_fwd_coop(&A, true);
    return true;
  }
  if (A.D <= 128 && A.DV <= 128) return grad ? attn_grad_tiled(&A) : attn_fwd_tiled(&A);
  return grad ? attn_grad_plain(&A) : attn_fwd_plain(&A);
}
