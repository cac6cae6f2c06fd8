/* qlinear on CUDA (--quantize int8|int4): y[m, n] = sum_k x[m, k]
 * dequant(w)[n, k], x and y f32, w packed as runtime/quant.h lays it out.
 * One launch of mlc_qgemv (gemm.cuh): a warp per output column and up to
 * QV_ROWS rows of x, the codes dequantised in registers (no f32 weight is
 * formed), each word's sum scaled once.  A decode step's one row reads the
 * packed weight once; a prefill's rows share each word QV_ROWS at a time. */
#include "codegen/cuda/cuda_cc.h"

#define QV_ROWS 16
#define QV_WARPS 8 /* a block's */

bool cc_emit_qlinear(cc *c) {
  const mlc_type *x = cc_in(c, 0), *w = cc_in(c, 1);
  int bits = c->n->a.qbits;
  int64_t group = c->n->a.qgroup, K = x->rank ? x->dim[x->rank - 1] : 0, N = w->dim[0];
  if (x->dtype != MLC_DT_F32 || (bits != 4 && bits != 8) || group < 8 || group % 8 || K < 1 || K % group ||
      w->dim[1] != K * bits / 32 + K / group)
    return cc_fail(c, "qlinear of %s with %d-bit codes in groups of %lld: not the packed layout", mlc_dtype_name((mlc_dtype)x->dtype),
                   bits, (long long)group);
  int64_t M = mlc_type_numel(x) / K, MB = M < QV_ROWS ? M : QV_ROWS;
  int64_t blocks = cc_ceil_div(N, QV_WARPS) * cc_ceil_div(M, MB);
  if (M < 1 || blocks > INT32_MAX) return cc_fail(c, "qlinear of %lld rows and %lld columns is out of range for the CUDA kernel",
                                                   (long long)M, (long long)N);
  cc_begin(c, (uint64_t)blocks, 32 * QV_WARPS, 0);
  cc_printf(c, "  mlc_qgemv<%d, %d, %lldLL, %lldLL, %lldLL, %lldLL, %d>::run(in1, in0, out);\n", bits, (int)MB, (long long)M,
            (long long)N, (long long)K, (long long)group, QV_WARPS);
  cc_end(c);
  return true;
}
