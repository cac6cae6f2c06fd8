/* Data movement: transpose (swap two axes), slice, concat and slice_grad
 * (zeros with g written at [start, end) on one axis).  Bits are copied as
 * they are, so every dtype moves exactly.  A thread takes output elements
 * i, i + stride, ..., splits i into coordinates with constant divisors and
 * copies the element they name.
 */
#include "codegen/spirv/emit.h"

/* Coordinates of element i of type t into c[]. */
static void coords(sb *b, const mlc_type *t, uint32_t i, uint32_t *c) {
  int64_t below = 1;
  for (int k = t->rank - 1; k >= 0; k--) {
    uint32_t q = below == 1 ? i : sb_div(b, i, sb_u32(b, (uint32_t)below));
    c[k] = k > 0 ? sb_mod(b, q, sb_u32(b, (uint32_t)t->dim[k])) : q;
    below *= t->dim[k];
  }
}

/* Offset of coordinates c in a tensor of type t; axis `axis` shifted by -shift. */
static uint32_t offset(sb *b, const mlc_type *t, const uint32_t *c, int axis, int64_t shift) {
  int64_t st[MLC_MAX_RANK];
  mlc_type_strides(t, st);
  uint32_t o = sb_u32(b, 0);
  for (int k = 0; k < t->rank; k++) {
    uint32_t ck = c[k];
    if (k == axis && shift) ck = sb_sub(b, ck, sb_u32(b, (uint32_t)shift));
    o = sb_add(b, o, sb_mulc(b, ck, (uint32_t)st[k]));
  }
  return o;
}

/* Element i of the output: the bits of the element it copies (zero where
 * slice_grad has none), through locals, since concat chooses its source by
 * branches. */
static void elem(sv *s, void *ctx, uint32_t i, uint32_t *lo, uint32_t *hi) {
  sb *b = s->b;
  const mlc_node *n = s->n;
  const mlc_type *ot = &n->type;
  int dt = ot->dtype;
  uint32_t c[MLC_MAX_RANK];
  (void)ctx;
  coords(b, ot, i, c);
  sb_lv vlo = sb_local(b, b->t_u32, sb_u32(b, 0)), vhi = sb_local(b, b->t_u32, sb_u32(b, 0));
  uint32_t l, h = 0;
  switch (n->op) {
  case MLC_OP_TRANSPOSE: {
    uint32_t ic[MLC_MAX_RANK];
    for (int k = 0; k < ot->rank; k++) ic[k] = c[k == n->a.axis ? n->a.axis2 : k == n->a.axis2 ? n->a.axis : k];
    l = sb_load_bits(b, 0, dt, offset(b, sv_in(s, 0), ic, -1, 0), &h);
    sb_st(b, vlo, l);
    if (h) sb_st(b, vhi, h);
    break;
  }
  case MLC_OP_SLICE:
    l = sb_load_bits(b, 0, dt, offset(b, sv_in(s, 0), c, n->a.axis, -n->a.start), &h);
    sb_st(b, vlo, l);
    if (h) sb_st(b, vhi, h);
    break;
  case MLC_OP_SLICE_GRAD: {
    int ax = n->a.axis;
    uint32_t in = sb_land(b, sb_op2(b, SpvOpUGreaterThanEqual, b->t_bool, c[ax], sb_u32(b, (uint32_t)n->a.start)),
                          sb_ult(b, c[ax], sb_u32(b, (uint32_t)n->a.end)));
    sb_if f;
    sb_if_begin(b, &f, in, false); /* elsewhere zero bits: zero in every dtype */
    l = sb_load_bits(b, 0, dt, offset(b, sv_in(s, 0), c, ax, n->a.start), &h);
    sb_st(b, vlo, l);
    if (h) sb_st(b, vhi, h);
    sb_if_end(b, &f);
    break;
  }
  case MLC_OP_CONCAT: {
    int ax = n->a.axis;
    int64_t at = 0;
    sb_if f[40];
    uint32_t nf = 0;
    for (uint32_t k = 0; k < n->nin; k++) {
      const mlc_type *it = sv_in(s, (int)k);
      int64_t len = it->dim[ax];
      bool last = k + 1 == n->nin;
      if (!last) {
        MLC_ASSERT(nf < sizeof f / sizeof *f);
        sb_if_begin(b, &f[nf++], sb_ult(b, c[ax], sb_u32(b, (uint32_t)(at + len))), true);
      }
      l = sb_load_bits(b, k, dt, offset(b, it, c, ax, at), &h);
      sb_st(b, vlo, l);
      if (h) sb_st(b, vhi, h);
      if (!last) sb_if_else(b, &f[nf - 1]);
      at += len;
    }
    while (nf) sb_if_end(b, &f[--nf]);
    break;
  }
  default:
    MLC_ICE("%s is not a layout op", mlc_ops[n->op].name);
  }
  *lo = sb_ld(b, vlo);
  *hi = sb_ld(b, vhi);
}

bool sv_emit_layout(sv *s) {
  const mlc_node *n = s->n;
  const mlc_type *ot = &n->type;
  switch (n->op) {
  case MLC_OP_TRANSPOSE: case MLC_OP_SLICE: case MLC_OP_SLICE_GRAD: case MLC_OP_CONCAT: break;
  default: return sv_fail(s, "%s is not a layout op", mlc_ops[n->op].name);
  }
  if (n->nin + 2 > SB_MAX_BIND) return sv_fail(s, "%s of %u inputs: too many bindings", mlc_ops[n->op].name, n->nin);
  int64_t total = mlc_type_numel(ot);
  if (!sv_check_size(s, total)) return false;
  for (uint32_t k = 0; k < n->nin; k++)
    if (!sv_check_size(s, mlc_type_numel(sv_in(s, (int)k)))) return false;
  sv_items_store(s, total, sv_out(s), ot->dtype, elem, NULL);
  return true;
}
