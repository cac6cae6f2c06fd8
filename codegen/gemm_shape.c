/* See gemm_shape.h. */
#include "codegen/gemm_shape.h"

#include <string.h>

int64_t mlc_gemm_batch(const mlc_gemm_shape *d) {
  int64_t b = 1;
  for (int i = 0; i < d->nb; i++) b *= d->bdim[i];
  return b;
}

void mlc_gemm_shape_of(int op, const mlc_type *a, const mlc_type *b, const mlc_type *o, mlc_gemm_shape *d) {
  memset(d, 0, sizeof *d);
  d->dt = o->dtype;
  if (op == MLC_OP_MATMUL_TN) { /* a[k, m]^T @ b[k, n]: A read column-wise where it lies */
    d->K = a->dim[0], d->M = a->dim[1], d->N = b->dim[1], d->a_km = true;
    return;
  }
  if (op == MLC_OP_LINEAR) {
    d->K = b->dim[1], d->N = b->dim[0], d->b_nk = true;
    d->M = 1;
    for (int i = 0; i + 1 < a->rank; i++) d->M *= a->dim[i];
    return;
  }
  d->M = a->dim[a->rank - 2], d->K = a->dim[a->rank - 1], d->N = b->dim[b->rank - 1];
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
    d->M *= mlc_gemm_batch(d);
    d->nb = 0;
  }
}
