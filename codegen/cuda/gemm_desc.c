/* The GEMM descriptor both C-like targets build from a MATMUL, MATMUL_TN or
 * LINEAR node (see cc.h): sizes, operand layouts and batch strides. */
#include "codegen/cuda/cc.h"

#include <string.h>

int64_t cc_gemm_batch(const cc_gemm_desc *d) {
  int64_t b = 1;
  for (int i = 0; i < d->nb; i++) b *= d->bdim[i];
  return b;
}

bool cc_gemm_desc_of(cc *c, cc_gemm_desc *d) {
  const mlc_type *a = cc_in(c, 0), *b = cc_in(c, 1), *o = cc_outt(c);
  memset(d, 0, sizeof *d);
  d->dt = o->dtype;
  if (d->dt != MLC_DT_F32 && d->dt != MLC_DT_BF16 && d->dt != MLC_DT_F16)
    return cc_fail(c, "no %s GEMM for dtype %s", c->t->name, mlc_dtype_name((mlc_dtype)d->dt));
  if (c->n->op == MLC_OP_MATMUL_TN) { /* a[k, m]^T @ b[k, n]: A read column-wise where it lies */
    d->K = a->dim[0];
    d->M = a->dim[1];
    d->N = b->dim[1];
    d->a_km = true;
    return true;
  }
  if (c->n->op == MLC_OP_LINEAR) {
    d->K = b->dim[1];
    d->N = b->dim[0];
    d->M = d->K ? mlc_type_numel(a) / d->K : 0;
    if (!d->K) { /* no elements to sum: M is x's leading dims */
      d->M = 1;
      for (int i = 0; i + 1 < a->rank; i++) d->M *= a->dim[i];
    }
    d->b_nk = true;
    return true;
  }
  d->M = a->dim[a->rank - 2];
  d->K = a->dim[a->rank - 1];
  d->N = b->dim[b->rank - 1];
  d->nb = o->rank - 2;
  int64_t sa = d->M * d->K, sb = d->K * d->N;
  bool b_shared = true, a_full = true;
  for (int i = d->nb - 1; i >= 0; i--) {
    int ia = i - (o->rank - a->rank), ib = i - (o->rank - b->rank);
    int64_t da = ia >= 0 ? a->dim[ia] : 1, db = ib >= 0 ? b->dim[ib] : 1;
    d->bdim[i] = o->dim[i];
    d->bsa[i] = da == 1 ? 0 : sa;
    d->bsb[i] = db == 1 ? 0 : sb;
    if (d->bsb[i] && o->dim[i] > 1) b_shared = false;
    if (da != o->dim[i]) a_full = false;
    sa *= da;
    sb *= db;
  }
  if (b_shared && a_full) { /* one B for all: the batch is more rows of A */
    d->M *= cc_gemm_batch(d);
    d->nb = 0;
  }
  return true;
}
