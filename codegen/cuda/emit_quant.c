/* quant and quant_both on CUDA (issue 30, passes/fp8.c): out = the node's f8 dtype of
 * x * 2^e, e = mlc_f8_scale_exp(amax, fmax) (ir/ir.h), every code NaN where
 * amax is NaN or infinite; the CPU target's arithmetic (codegen/llvm/cg.c),
 * bit for bit, through the prelude's mlc_f8_scale and mlc_f8_enc.
 *
 * A grid-stride loop over x, 8 (or 4) elements a thread when the count
 * allows: one vector load of x (16 bytes at most), one 8- or 4-byte store
 * of codes.  Every thread computes the scale from amax itself (one load and a
 * division, against a pass over the tensor).  quant_both: see below. */
#include "codegen/cuda/cuda_cc.h"

#define THREADS 256
#define MAX_BLOCKS 65536

/* One code of x[k] scaled by s, with x's sign (NaN's too), as a word's byte k & 3. */
static const char *code(cc *c, int e5, const char *x) {
  return cc_fmt(c, "(mlc_f8_enc<%d>(%s * s) | (__float_as_uint(%s) >> 24 & 0x80u))", e5, x, x);
}

/* quant_both (the fuse of quant and transpose(quant) that passes/fp8.c
 * makes where dx and dw read both layouts): out[0, R C) = the codes of
 * x [R, C], out[R C, 2 R C) = the same codes transposed.  A block takes a
 * 64 x 64 tile: each thread quantises 4 adjacent elements of a row into a
 * word, stores it in x's layout and in shared memory, and after the barrier
 * stores 4 bytes of a column as a word of the transposed layout
 * (cc_byte_tile_store_transposed, as the byte transpose of emit_layout.c).  x read once, 2 bytes of
 * codes written per element, where quant then transpose read x, wrote 1,
 * read 1 and wrote 1 in two launches. */
static bool quant_both(cc *c, int xd, int e5) {
  const mlc_type *x = cc_in(c, 0);
  const int64_t R = x->dim[0], C = x->dim[1], tr = cc_ceil_div(R, 64), tc = cc_ceil_div(C, 64);
  if (x->rank != 2 || R % 4 || C % 4) return cc_bug(c, "quant_both of %s[%lld, %lld]", mlc_dtype_name((mlc_dtype)xd),
                                                     (long long)R, (long long)C);
  cc_begin(c, (uint64_t)(tr * tc), CC_BYTE_TILE, 0);
  cc_printf(c, "  $shared unsigned int tile[64][17];\n");
  cc_printf(c, "  const float am = in1[0];\n");
  cc_printf(c, "  const float s = fabsf(am) < MLC_INF ? mlc_f8_scale<%d>(am, false) : __int_as_float(0x7fc00000);\n", e5);
  cc_printf(c, "  const $i64 r0 = ($bid / %lld$ll) * 64, c0 = ($bid %% %lld$ll) * 64;\n", (long long)tc, (long long)tc);
  cc_printf(c, "  const int tx = $tid %% 16, ty = $tid / 16;\n");
  /* x's rows r0 + y, 4 elements from column c0 + 4 tx: codes in x's layout and in the tile */
  cc_printf(c, "  for (int y = ty; y < 64; y += %d) {\n", CC_BYTE_TILE / 16);
  cc_printf(c, "    const $i64 r = r0 + y, cc = c0 + 4 * tx;\n");
  cc_printf(c, "    if (r < %lld$ll && cc < %lld$ll) {\n      float x[4];\n", (long long)R, (long long)C);
  cc_vec_load(c, 4, xd, "x", "0", "in0", cc_fmt(c, "r * %lld$ll + cc", (long long)C));
  cc_printf(c, "      const unsigned w = %s | %s << 8 | %s << 16 | %s << 24;\n", code(c, e5, "x[0]"), code(c, e5, "x[1]"),
            code(c, e5, "x[2]"), code(c, e5, "x[3]"));
  cc_printf(c, "      *(unsigned int *)(out + r * %lld$ll + cc) = w;\n      tile[y][tx] = w;\n    }\n  }\n", (long long)C);
  cc_byte_tile_store_transposed(c, cc_fmt(c, "(out + %lld$ll)", (long long)(R * C)), R, C); /* the second half */
  cc_end(c);
  return true;
}

bool cc_emit_quant(cc *c) {
  const mlc_node *n = c->n;
  int xd = cc_in(c, 0)->dtype, e5 = n->type.dtype == MLC_DT_F8E5M2;
  if (!mlc_dtype_is_float((mlc_dtype)xd) || !mlc_dtype_is_f8(n->type.dtype) || cc_in(c, 1)->dtype != MLC_DT_F32 || c->sharded)
    return cc_bug(c, "quant of %s to %s", mlc_dtype_name((mlc_dtype)xd), mlc_dtype_name((mlc_dtype)n->type.dtype));
  if (n->op == MLC_OP_QUANT_BOTH) return quant_both(c, xd, e5);
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
    cc_printf(c, "    out[i] = (unsigned char)%s;\n  }\n", code(c, e5, "x"));
  } else {
    cc_printf(c, "    float x[%d];\n", v);
    cc_vec_load(c, v, xd, "x", "0", "in0", "i");
    cc_printf(c, "    unsigned r[%d] = {0};\n", v / 4);
    cc_printf(c, "#pragma unroll\n    for (int k = 0; k < %d; k++) r[k >> 2] |= %s << 8 * (k & 3);\n", v, code(c, e5, "x[k]"));
    cc_printf(c, "    *(%s *)(out + i) = %s;\n  }\n", v == 8 ? "uint2" : "unsigned", v == 8 ? "make_uint2(r[0], r[1])" : "r[0]");
  }
  cc_end(c);
  return true;
}
