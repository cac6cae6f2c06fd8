/* The GEMM descriptor both C-like targets build from a MATMUL, MATMUL_TN or
 * LINEAR node (or a FUSED group headed by one): the shared shape (codegen/gemm_shape.c), for the dtypes the
 * GEMM kernels have. */
#include "codegen/cstyle/cc.h"

bool cc_gemm_desc_of(cc *c, cc_gemm_desc *d) {
  const mlc_type *o = cc_outt(c);
  if (o->dtype != MLC_DT_F32 && o->dtype != MLC_DT_BF16 && o->dtype != MLC_DT_F16)
    return cc_fail(c, "no %s GEMM for dtype %s", c->t->name, mlc_dtype_name((mlc_dtype)o->dtype));
  mlc_gemm_shape_of(c->n->op, cc_in(c, 0), cc_in(c, 1), o, d);
  return true;
}

bool cc_gemm_desc_node(cc *c, cc_gemm_desc *d, mlc_fused_prog *pr, bool *fused) {
  *fused = c->n->op == MLC_OP_FUSED;
  if (!*fused) return cc_gemm_desc_of(c, d);
  mlc_node gn;
  if (!cc_fused_program(c, pr)) return false;
  if (!cc_fused_gemm_node(c, pr, &gn)) return cc_bug(c, "fused program without a GEMM");
  const mlc_node *n = c->n; /* the GEMM's operands are the group's first inputs */
  c->n = &gn;
  bool ok = cc_gemm_desc_of(c, d);
  c->n = n;
  return ok;
}

bool cc_qlinear_shape_of(cc *c, cc_qlinear_shape *q) {
  const mlc_type *x = cc_in(c, 0), *w = cc_in(c, 1);
  q->bits = c->n->a.qbits;
  q->group = c->n->a.qgroup;
  q->scheme = c->n->a.qscheme;
  q->k = x->rank ? x->dim[x->rank - 1] : 0;
  q->n = w->dim[0];
  if (x->dtype != MLC_DT_F32 || (q->bits != 4 && q->bits != 8) || q->group < 8 || q->group % 8 || q->k < 1 ||
      q->k % q->group || w->dim[1] != mlc_quant_row_words(q->k, q->bits, (int)q->group, q->scheme))
    return cc_fail(c, "qlinear of %s with %d-bit codes in groups of %lld: not the packed layout",
                   mlc_dtype_name((mlc_dtype)x->dtype), q->bits, (long long)q->group);
  q->m = mlc_type_numel(x) / q->k;
  return true;
}
