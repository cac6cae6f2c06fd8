/* quant on CUDA (issue 30, passes/fp8.c): out = the node's f8 dtype of
 * x * 2^e, e = mlc_f8_scale_exp(amax, fmax) (ir/ir.h), every code NaN where
 * amax is NaN or infinite; the CPU target's arithmetic (codegen/llvm/cg.c),
 * bit for bit, through the prelude's mlc_f8_scale and mlc_f8_enc.
 *
 * A grid-stride loop over x, 8 (or 4) elements a thread when the count
 * allows: one vector load of x (16 bytes at most), one 8- or 4-byte store
 * of codes.  Every thread computes the scale from amax itself (one load and a
 * division, against a pass over the tensor). */
#include "codegen/cuda/cuda_cc.h"

#define THREADS 256
#define MAX_BLOCKS 65536

bool cc_emit_quant(cc *c) {
  const mlc_node *n = c->n;
  int xd = cc_in(c, 0)->dtype, e5 = n->type.dtype == MLC_DT_F8E5M2;
  if (!mlc_dtype_is_float((mlc_dtype)xd) || !mlc_dtype_is_f8(n->type.dtype) || cc_in(c, 1)->dtype != MLC_DT_F32 || c->sharded)
    return cc_bug(c, "quant of %s to %s", mlc_dtype_name((mlc_dtype)xd), mlc_dtype_name((mlc_dtype)n->type.dtype));
  int64_t total = mlc_type_numel(&n->type);
  int v = total % 8 == 0 && mlc_dtype_size((mlc_dtype)xd) <= 2 ? 8 : total % 4 == 0 ? 4 : 1; /* x's load 16 bytes at most */
  int64_t units = total / v, blocks = cc_ceil_div(units, THREADS);
  if (blocks > MAX_BLOCKS) blocks = MAX_BLOCKS;
  if (blocks < 1) blocks = 1;
  cc_begin(c, (uint64_t)blocks, THREADS, 0);
  cc_printf(c, "  const float am = in1[0];\n");
  cc_printf(c, "  const float s = fabsf(am) < MLC_INF ? mlc_f8_scale<%d>(am, false) : __int_as_float(0x7fc00000);\n", e5);
  cc_printf(c, "  for (long long q = (long long)blockIdx.x * %d + threadIdx.x; q < %lldLL; q += %lldLL) {\n", THREADS,
            (long long)units, (long long)blocks * THREADS);
  cc_printf(c, "    const long long i = q * %d;\n", v);
  if (v == 1) {
    cc_printf(c, "    const float x = to_f32(in0[i]);\n");
    cc_printf(c, "    out[i] = (unsigned char)(mlc_f8_enc<%d>(x * s) | (__float_as_uint(x) >> 24 & 0x80u));\n  }\n", e5);
  } else {
    cc_printf(c, "    float x[%d];\n", v);
    cc_vec_load(c, v, xd, "x", "0", "in0", "i");
    cc_printf(c, "    unsigned r[%d] = {0};\n", v / 4);
    cc_printf(c, "#pragma unroll\n    for (int k = 0; k < %d; k++) r[k >> 2] |= (mlc_f8_enc<%d>(x[k] * s) | (__float_as_uint(x[k]) >> 24 & 0x80u)) << 8 * (k & 3);\n", v, e5);
    cc_printf(c, "    *(%s *)(out + i) = %s;\n  }\n", v == 8 ? "uint2" : "unsigned", v == 8 ? "make_uint2(r[0], r[1])" : "r[0]");
  }
  cc_end(c);
  return true;
}
