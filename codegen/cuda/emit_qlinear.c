/* qlinear on CUDA (--quantize int8|int4[:asym][:scales=f32]): y[m, n] = sum_k x[m, k]
 * dequant(w)[n, k], x and y f32, w packed as runtime/quant.h lays it out.
 * One launch of mlc_qgemv (gemm.cuh; SCHEME the scheme's flags): a
 * block of up to QV_WARPS warps per QV_COLS output columns and up to
 * QV_ROWS rows of x, the warps splitting the row's words, the codes
 * dequantised in registers (no f32 weight is formed), each word's sum
 * scaled once.  A decode step's one row reads the
 * packed weight once; a prefill's rows share each word QV_ROWS at a time.
 * A FUSED node headed by a qlinear (fuse.c, the target's qlinear_epilogues)
 * stores through its epilogue (cc_fused_epilogue: the bias add, SiLU,
 * residual add that follow the layer), as the GEMMs' do.
 * Measured on the H100 (2026-12-05, ncu): a warp per column with each lane
 * on 16 bytes of codes read x 128 bytes apart across the lanes, 32 L1
 * wavefronts a load, and ran at 250-400 GB/s; a lane per word reads x's
 * 16-byte pieces side by side. */
#include "codegen/cuda/cuda_cc.h"

#define QV_ROWS 8
#define QV_COLS 4      /* a block's output columns, which share each load of x */
#define QV_WARPS 8     /* at most, splitting K */
#define QV_WARP_WORDS 128 /* at least, a warp's words of a row where it splits */

bool cc_emit_qlinear(cc *c) {
  cc_qlinear_shape q;
  mlc_fused_prog pr;
  bool fused = c->n->op == MLC_OP_FUSED; /* qlinear with an epilogue (fuse.c): the shape is its head's */
  if (fused) {
    mlc_node gn;
    if (!cc_fused_program(c, &pr) || !cc_fused_gemm_node(c, &pr, &gn)) return false;
    if (pr.gemm > 0) return cc_bug(c, "a qlinear with a prologue"); /* fuse.c makes them for linears only */
    const mlc_node *n = c->n;
    c->n = &gn;
    bool ok = cc_qlinear_shape_of(c, &q);
    c->n = n;
    if (!ok) return false;
  } else if (!cc_qlinear_shape_of(c, &q)) {
    return false;
  }
  int64_t MB = q.m < QV_ROWS ? q.m : QV_ROWS, blocks = q.m < 1 ? 0 : cc_ceil_div(q.n, QV_COLS) * cc_ceil_div(q.m, MB);
  if (q.m < 1 || blocks > INT32_MAX)
    return cc_fail(c, "qlinear of %lld rows and %lld columns is out of range for the CUDA kernel", (long long)q.m, (long long)q.n);
  /* KS warps split the row's words, each keeping 128 or more (4 a lane):
   * on the H100 (ncu, 2026-12-05) at 8 warps of 32 words the rows of 256
   * words ran at 430-770 GB/s and those of 1024 at 1 TB/s */
  int ks = 1;
  while (ks < QV_WARPS && q.k * q.bits / 32 / (2 * ks) >= QV_WARP_WORDS) ks *= 2;
  const char *Q = cc_fmt(c, "mlc_qgemv<%d, %d, %lldLL, %lldLL, %lldLL, %lldLL, %d, %d, %d>", q.bits, (int)MB, (long long)q.m,
                         (long long)q.n, (long long)q.k, (long long)q.group, QV_COLS, ks, q.scheme);
  if (fused) cc_fused_epilogue(c, &pr);
  cc_begin(c, (uint64_t)blocks, 32 * ks, 0);
  if (fused) cc_printf(c, "  const @K@_epi e = %s;\n", cc_fused_epilogue_init(c, &pr, "0"));
  else cc_printf(c, "  const mlc_gemm_out<float> e = {out};\n");
  cc_printf(c, "  %s::run(in1, in0, e);\n", Q);
  cc_end(c);
  return true;
}
