/* Data movement: transpose (swap two axes), slice, concat, embedding and
 * gather, with the gradients of slice, embedding and gather (slice_grad,
 * embedding_grad, gather_grad).
 *
 * These move bytes without arithmetic, so they copy raw storage (no
 * conversion) and lean on llvm.memcpy, which LLVM expands into vector moves
 * when the size is a small constant.  Long rows are cut into chunks of
 * COPY_CHUNK elements so that a big copy still spreads over the threads.
 *
 * transpose: with dimensions merged where input and output are both
 * contiguous, if the innermost output dimension is still contiguous in the
 * input, every output row is one memcpy.  Otherwise the two axes that are
 * contiguous on either side are copied in TILE x TILE tiles, so reads and
 * writes both stay within a few cache lines.
 */
#include "codegen/llvm/cg.h"

#define COPY_CHUNK 16384
#define TILE 16

static LLVMValueRef imax(cg *g, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntSGT, a, b, ""), a, b, "");
}

/* Item il of a copy of `rows` rows of rowlen elements, each cut into
 * ceil(rowlen / COPY_CHUNK) chunks; the row starts are given as offsets. */
static void copy_chunk(cg *g, LLVMValueRef ch, int64_t rowlen, cg_buf dst, LLVMValueRef dst_row, cg_buf src,
                       LLVMValueRef src_row) {
  int64_t nch = cg_ceil_div(rowlen, COPY_CHUNK);
  LLVMValueRef len = cg_i64(g, rowlen), e0 = cg_i64(g, 0);
  if (nch > 1) {
    e0 = cg_imulc(g, ch, COPY_CHUNK);
    len = cg_block_len(g, e0, rowlen, COPY_CHUNK);
  }
  cg_memcpy(g, dst, cg_iadd(g, dst_row, e0), src, cg_iadd(g, src_row, e0), len);
}

/* Rows with uniform strides: row r of dst starts at r*dst_stride + dst_off. */
static void copy_rows(cg *g, LLVMValueRef il, int64_t rowlen, cg_buf dst, int64_t dst_stride, int64_t dst_off,
                      cg_buf src, int64_t src_stride, int64_t src_off) {
  int64_t nch = cg_ceil_div(rowlen, COPY_CHUNK);
  LLVMValueRef row = il, ch = cg_i64(g, 0);
  if (nch > 1) {
    row = LLVMBuildUDiv(g->b, il, cg_i64(g, nch), "");
    ch = LLVMBuildURem(g->b, il, cg_i64(g, nch), "");
  }
  LLVMValueRef d = cg_iaddc(g, cg_imulc(g, row, dst_stride), dst_off);
  LLVMValueRef s = cg_iaddc(g, cg_imulc(g, row, src_stride), src_off);
  copy_chunk(g, ch, rowlen, dst, d, src, s);
}

static void view3(const mlc_type *t, int axis, int64_t *outer, int64_t *D, int64_t *inner) {
  *outer = *inner = 1;
  for (int k = 0; k < axis; k++) *outer *= t->dim[k];
  for (int k = axis + 1; k < t->rank; k++) *inner *= t->dim[k];
  *D = t->dim[axis];
}

/* ---- transpose ---- */

bool cg_emit_transpose(cg *g) {
  const mlc_node *n = g->n;
  const mlc_type *it = &g->f->nodes[n->in[0]].type, *ot = &n->type;
  int64_t is[MLC_MAX_RANK], st[2][MLC_MAX_RANK], d[MLC_MAX_RANK];
  mlc_type_strides(it, is);
  mlc_type_strides(ot, st[0]);
  int r = 0;
  for (int k = 0; k < ot->rank; k++) {
    int src = k == n->a.axis ? n->a.axis2 : k == n->a.axis2 ? n->a.axis : k;
    if (ot->dim[k] == 1) continue;
    d[r] = ot->dim[k];
    st[0][r] = st[0][k];
    st[1][r] = is[src];
    if (r > 0 && st[0][r - 1] == st[0][r] * d[r] && st[1][r - 1] == st[1][r] * d[r]) {
      d[r - 1] *= d[r];
      st[0][r - 1] = st[0][r];
      st[1][r - 1] = st[1][r];
    } else {
      r++;
    }
  }
  if (r == 0 || st[1][r - 1] == 1) { /* rows that are contiguous on both sides */
    int64_t rowlen = r ? d[r - 1] : 1, nch = cg_ceil_div(rowlen, COPY_CHUNK), rows = 1;
    for (int k = 0; k < r - 1; k++) rows *= d[k];
    g->items = rows * nch;
    cg_loop items;
    LLVMValueRef item = cg_items_begin(g, &items);
    LLVMValueRef row = item, ch = cg_i64(g, 0), off[2];
    if (nch > 1) {
      row = LLVMBuildUDiv(g->b, item, cg_i64(g, nch), "");
      ch = LLVMBuildURem(g->b, item, cg_i64(g, nch), "");
    }
    cg_unflatten(g, row, r > 0 ? r - 1 : 0, d, 2, (const int64_t(*)[MLC_MAX_RANK])st, off);
    copy_chunk(g, ch, rowlen, g->out, off[0], g->in[0], off[1]);
    cg_end_for(g, &items, NULL);
    return true;
  }
  /* Tiles over p (contiguous in the input) and the last axis (contiguous in
   * the output). */
  int p = 0, q = r - 1;
  while (p < r && st[1][p] != 1) p++;
  if (p >= q) return cg_fail(g, "transpose: no contiguous input axis (internal)");
  int64_t td[MLC_MAX_RANK], ts[4][MLC_MAX_RANK] = {{0}}, items = 1;
  for (int k = 0; k < r; k++) {
    bool tiled = k == p || k == q;
    td[k] = tiled ? cg_ceil_div(d[k], TILE) : d[k];
    ts[0][k] = tiled ? TILE * st[0][k] : st[0][k];
    ts[1][k] = tiled ? TILE * st[1][k] : st[1][k];
    items *= td[k];
  }
  ts[2][p] = 1;
  ts[3][q] = 1;
  g->items = items;
  cg_loop il;
  LLVMValueRef item = cg_items_begin(g, &il), off[4];
  cg_unflatten(g, item, r, td, 4, (const int64_t(*)[MLC_MAX_RANK])ts, off);
  LLVMValueRef np = cg_block_len(g, cg_imulc(g, off[2], TILE), d[p], TILE);
  LLVMValueRef nq = cg_block_len(g, cg_imulc(g, off[3], TILE), d[q], TILE);
  cg_loop Li, Lj;
  LLVMValueRef i = cg_for(g, &Li, cg_i64(g, 0), np, 1);
  LLVMValueRef ob = cg_idx(g, off[0], i, st[0][p]), ib = cg_iadd(g, off[1], i);
  LLVMValueRef j = cg_for(g, &Lj, cg_i64(g, 0), nq, 1);
  LLVMValueRef v = cg_load_raw(g, g->in[0], cg_idx(g, ib, j, st[1][q]), 1, NULL);
  cg_store_raw(g, g->out, cg_iadd(g, ob, j), v, NULL);
  cg_end_for(g, &Lj, NULL);
  cg_end_for(g, &Li, NULL);
  cg_end_for(g, &il, NULL);
  return true;
}

/* ---- slice ---- */

bool cg_emit_slice(cg *g) {
  const mlc_node *n = g->n;
  const mlc_type *it = &g->f->nodes[n->in[0]].type;
  int64_t outer, D, inner, Dout = n->a.end - n->a.start;
  view3(it, n->a.axis, &outer, &D, &inner);
  int64_t rowlen = Dout * inner;
  g->items = outer * cg_ceil_div(rowlen, COPY_CHUNK);
  cg_loop items;
  LLVMValueRef item = cg_items_begin(g, &items);
  copy_rows(g, item, rowlen, g->out, rowlen, 0, g->in[0], D * inner, n->a.start * inner);
  cg_end_for(g, &items, NULL);
  return true;
}

/* ---- concat ---- */

bool cg_emit_concat(cg *g) {
  const mlc_node *n = g->n;
  int64_t outer, Dtot, inner;
  view3(&n->type, n->a.axis, &outer, &Dtot, &inner);
  int64_t base[65], off = 0;
  base[0] = 0;
  for (int k = 0; k < n->nin; k++)
    base[k + 1] = base[k] + outer * cg_ceil_div(g->f->nodes[n->in[k]].type.dim[n->a.axis] * inner, COPY_CHUNK);
  g->items = base[n->nin];
  cg_loop items;
  LLVMValueRef item = cg_items_begin(g, &items);
  for (int k = 0; k < n->nin; k++) {
    int64_t Dk = g->f->nodes[n->in[k]].type.dim[n->a.axis];
    cg_if_t t;
    LLVMValueRef in = LLVMBuildAnd(g->b, LLVMBuildICmp(g->b, LLVMIntSGE, item, cg_i64(g, base[k]), ""),
                                   LLVMBuildICmp(g->b, LLVMIntSLT, item, cg_i64(g, base[k + 1]), ""), "");
    cg_if(g, &t, in);
    copy_rows(g, cg_iaddc(g, item, -base[k]), Dk * inner, g->out, Dtot * inner, off * inner,
              g->in[k], Dk * inner, 0);
    cg_endif(g, &t);
    off += Dk;
  }
  cg_end_for(g, &items, NULL);
  return true;
}

/* ---- embedding ---- */

/* out[i, :] = weight[idx[i], :]; an index outside [0, rows) gives a row of
 * zeros (PyTorch raises an error; a kernel has no way to). */
bool cg_emit_embedding(cg *g) {
  const mlc_node *n = g->n;
  const mlc_type *wt = &g->f->nodes[n->in[0]].type;
  int64_t V = wt->dim[0], D = wt->dim[1];
  g->items = mlc_type_numel(&g->f->nodes[n->in[1]].type);
  cg_loop items;
  LLVMValueRef i = cg_items_begin(g, &items);
  LLVMValueRef t = cg_convert(g, cg_load(g, g->in[1], i, 1, NULL), g->in[1].dt, MLC_DT_I64);
  LLVMValueRef ok = LLVMBuildICmp(g->b, LLVMIntULT, t, cg_i64(g, V), "");
  LLVMValueRef dst = cg_imulc(g, i, D);
  cg_if_t c;
  cg_if(g, &c, ok);
  cg_memcpy(g, g->out, dst, g->in[0], cg_imulc(g, t, D), cg_i64(g, D));
  cg_else(g, &c);
  cg_memset0(g, g->out, dst, cg_i64(g, D));
  cg_endif(g, &c);
  cg_end_for(g, &items, NULL);
  return true;
}

/* ---- slice_grad ---- */

/* out = zeros of the node's shape with g at [start, end) on axis.  Viewed as
 * [outer, D * inner], each output row is zeros on [0, s), g's row on [s, e)
 * and zeros on [e, D * inner) (s = start * inner, e = end * inner).  A work
 * item is one chunk of COPY_CHUNK elements of a row; it clamps the three
 * pieces to itself, so every element is written by exactly one item. */
bool cg_emit_slice_grad(cg *g) {
  const mlc_node *n = g->n;
  int64_t outer, D, inner;
  view3(&n->type, n->a.axis, &outer, &D, &inner);
  int64_t rowlen = D * inner, s = n->a.start * inner, e = n->a.end * inner, glen = e - s;
  int64_t nch = cg_ceil_div(rowlen, COPY_CHUNK);
  g->items = outer * nch;
  cg_loop items;
  LLVMValueRef item = cg_items_begin(g, &items);
  LLVMValueRef row = item, c0 = cg_i64(g, 0), c1 = cg_i64(g, rowlen);
  if (nch > 1) {
    row = LLVMBuildUDiv(g->b, item, cg_i64(g, nch), "");
    c0 = cg_imulc(g, LLVMBuildURem(g->b, item, cg_i64(g, nch), ""), COPY_CHUNK);
    c1 = cg_iadd(g, c0, cg_block_len(g, c0, rowlen, COPY_CHUNK));
  }
  LLVMValueRef obase = cg_imulc(g, row, rowlen), gbase = cg_imulc(g, row, glen);
  LLVMValueRef S = cg_i64(g, s), E = cg_i64(g, e), zero = cg_i64(g, 0);
  LLVMValueRef a = c0, b = cg_min_i64(g, c1, S); /* zeros before */
  cg_memset0(g, g->out, cg_iadd(g, obase, a), imax(g, zero, LLVMBuildSub(g->b, b, a, "")));
  a = imax(g, c0, S), b = cg_min_i64(g, c1, E); /* g's row */
  LLVMValueRef len = imax(g, zero, LLVMBuildSub(g->b, b, a, ""));
  cg_memcpy(g, g->out, cg_iadd(g, obase, a), g->in[0], cg_iadd(g, gbase, cg_iaddc(g, a, -s)), len);
  a = imax(g, c0, E), b = c1; /* zeros after */
  cg_memset0(g, g->out, cg_iadd(g, obase, a), imax(g, zero, LLVMBuildSub(g->b, b, a, "")));
  cg_end_for(g, &items, NULL);
  return true;
}

/* ---- embedding_grad ---- */

typedef struct {
  cg_buf acc, src;
  LLVMValueRef abase, sbase;
} addrow_ctx;

static void add_row(cg *g, void *vc, LLVMValueRef j, LLVMValueRef mask) {
  addrow_ctx *c = vc;
  LLVMValueRef ai = cg_iadd(g, c->abase, j);
  LLVMValueRef v = LLVMBuildFAdd(g->b, cg_load(g, c->acc, ai, g->vw, mask), cg_load(g, c->src, cg_iadd(g, c->sbase, j), g->vw, mask), "");
  cg_store(g, c->acc, ai, v, mask);
}

static void copy_row(cg *g, void *vc, LLVMValueRef j, LLVMValueRef mask) {
  addrow_ctx *c = vc;
  cg_store(g, c->acc, cg_iadd(g, c->abase, j), cg_load(g, c->src, cg_iadd(g, c->sbase, j), g->vw, mask), mask);
}

/* dw[v, :] = sum of g[t, :] over the tokens t with idx[t] == v, in token
 * order.  An index outside [0, v) adds nothing, as the forward gives it a row
 * of zeros.  A work item owns a block of VB vocabulary rows: it zeroes them,
 * walks every index and adds the rows that fall in its block.  No two items
 * touch one row, and each row's sum is taken in token order, so the result
 * is the same bits for any split over threads.  The price is that every item
 * reads all indices, so VB is chosen to keep the items at 256 or fewer.
 * Sums are f32: an f32 table accumulates in place; a bf16/f16 table in an
 * f32 tile of the block on the stack, rounded once when it is stored. */
bool cg_emit_embedding_grad(cg *g) {
  const mlc_node *n = g->n;
  int64_t V = n->type.dim[0], D = n->type.dim[1], N = mlc_type_numel(&g->f->nodes[n->in[1]].type);
  bool in_place = g->out.dt == MLC_DT_F32;
  int64_t VB = cg_ceil_div(V, 256);
  if (VB < 16) VB = 16;
  if (!in_place) {
    int64_t fit = ((int64_t)256 << 10) / (4 * D);
    if (fit < 1) return cg_fail(g, "embedding_grad rows of %lld elements do not fit the kernel's stack tile", (long long)D);
    if (VB > fit) VB = fit;
  }
  if (VB > V) VB = V;
  g->items = cg_ceil_div(V, VB);
  cg_buf acc = in_place ? g->out : cg_alloca(g, MLC_DT_F32, VB * D);
  cg_loop items, L;
  LLVMValueRef item = cg_items_begin(g, &items);
  LLVMValueRef v0 = cg_imulc(g, item, VB), nv = cg_block_len(g, v0, V, VB);
  LLVMValueRef abase = in_place ? cg_imulc(g, v0, D) : cg_i64(g, 0);
  cg_memset0(g, acc, abase, cg_imulc(g, nv, D));
  LLVMValueRef t = cg_for(g, &L, cg_i64(g, 0), cg_i64(g, N), 1);
  LLVMValueRef rel = LLVMBuildSub(g->b, cg_convert(g, cg_load(g, g->in[1], t, 1, NULL), g->in[1].dt, MLC_DT_I64), v0, "");
  cg_if_t mine;
  cg_if(g, &mine, LLVMBuildICmp(g->b, LLVMIntULT, rel, nv, "")); /* v0 <= idx < v0 + nv, so 0 <= idx < V */
  addrow_ctx c = {acc, g->in[0], cg_idx(g, abase, rel, D), cg_imulc(g, t, D)};
  cg_row_map(g, D, add_row, &c);
  cg_endif(g, &mine);
  cg_end_for(g, &L, NULL);
  if (!in_place) {
    LLVMValueRef r = cg_for(g, &L, cg_i64(g, 0), nv, 1);
    addrow_ctx w = {g->out, acc, cg_imulc(g, cg_iadd(g, v0, r), D), cg_imulc(g, r, D)};
    cg_row_map(g, D, copy_row, &w);
    cg_end_for(g, &L, NULL);
  }
  cg_end_for(g, &items, NULL);
  return true;
}

/* ---- gather, gather_grad ---- */

/* out[c] = x[c with c[axis] = index[c]] over index's shape (torch.gather).
 * An index outside [0, x.dim[axis]) gives 0 (PyTorch raises an error; a
 * kernel has no way to).  Bits are copied as they are. */
bool cg_emit_gather(cg *g) {
  const mlc_node *n = g->n;
  const mlc_type *xt = &g->f->nodes[n->in[0]].type, *it = &g->f->nodes[n->in[1]].type;
  int ax = n->a.axis;
  int64_t st[1][MLC_MAX_RANK];
  mlc_type_strides(xt, st[0]);
  int64_t axstride = st[0][ax];
  st[0][ax] = 0;
  g->items = mlc_type_numel(it);
  cg_loop items;
  LLVMValueRef item = cg_items_begin(g, &items), off;
  cg_unflatten(g, item, it->rank, it->dim, 1, (const int64_t(*)[MLC_MAX_RANK])st, &off);
  LLVMValueRef t = cg_convert(g, cg_load(g, g->in[1], item, 1, NULL), g->in[1].dt, MLC_DT_I64);
  cg_if_t c;
  cg_if(g, &c, LLVMBuildICmp(g->b, LLVMIntULT, t, cg_i64(g, xt->dim[ax]), ""));
  cg_store_raw(g, g->out, item, cg_load_raw(g, g->in[0], cg_idx(g, off, t, axstride), 1, NULL), NULL);
  cg_else(g, &c);
  cg_memset0(g, g->out, item, cg_i64(g, 1));
  cg_endif(g, &c);
  cg_end_for(g, &items, NULL);
  return true;
}

/* out = zeros of x's shape, then out[c with c[axis] = index[c]] += g[c] for
 * every c of index's shape (scatter-add), indices outside the axis skipped.
 * A work item owns one line of out along the axis: it zeroes it and walks
 * the index's line in order, so no two items write one element and the sums
 * come out the same for any split over threads.  Sums are taken in the
 * output's dtype (an f32 gradient in f32; 16-bit ones round at each add). */
bool cg_emit_gather_grad(cg *g) {
  const mlc_node *n = g->n;
  const mlc_type *ot = &n->type, *it = &g->f->nodes[n->in[1]].type;
  int ax = n->a.axis, r = ot->rank;
  int64_t ost[MLC_MAX_RANK], ist[MLC_MAX_RANK];
  mlc_type_strides(ot, ost);
  mlc_type_strides(it, ist);
  /* the line's coordinates: every axis but `axis`, over out's dims; strides
   * into out, into index (and g), and unit strides for the axes where the
   * index is shorter than out (those lines may lie outside the index) */
  int64_t dims[MLC_MAX_RANK], st[2 + MLC_MAX_RANK][MLC_MAX_RANK] = {{0}};
  int nd = 0, ncheck = 0, check_axis[MLC_MAX_RANK];
  for (int k = 0; k < r; k++) {
    if (k == ax) continue;
    dims[nd] = ot->dim[k];
    st[0][nd] = ost[k];
    st[1][nd] = ist[k];
    if (it->dim[k] < ot->dim[k]) {
      st[2 + ncheck][nd] = 1;
      check_axis[ncheck++] = k;
    }
    nd++;
  }
  int64_t lines = 1, D = ot->dim[ax], R = it->dim[ax];
  for (int k = 0; k < nd; k++) lines *= dims[k];
  g->items = lines;
  cg_loop items, L;
  LLVMValueRef item = cg_items_begin(g, &items), off[2 + MLC_MAX_RANK];
  cg_unflatten(g, item, nd, dims, 2 + ncheck, (const int64_t(*)[MLC_MAX_RANK])st, off);
  LLVMValueRef z = cg_for(g, &L, cg_i64(g, 0), cg_i64(g, D), 1);
  cg_memset0(g, g->out, cg_idx(g, off[0], z, ost[ax]), cg_i64(g, 1));
  cg_end_for(g, &L, NULL);
  LLVMValueRef inside = LLVMConstInt(g->t_i1, 1, 0);
  for (int q = 0; q < ncheck; q++)
    inside = LLVMBuildAnd(g->b, inside, LLVMBuildICmp(g->b, LLVMIntULT, off[2 + q], cg_i64(g, it->dim[check_axis[q]]), ""), "");
  cg_if_t in_index;
  cg_if(g, &in_index, inside);
  LLVMValueRef j = cg_for(g, &L, cg_i64(g, 0), cg_i64(g, R), 1);
  LLVMValueRef gi = cg_idx(g, off[1], j, ist[ax]);
  LLVMValueRef t = cg_convert(g, cg_load(g, g->in[1], gi, 1, NULL), g->in[1].dt, MLC_DT_I64);
  cg_if_t ok;
  cg_if(g, &ok, LLVMBuildICmp(g->b, LLVMIntULT, t, cg_i64(g, D), ""));
  LLVMValueRef oi = cg_idx(g, off[0], t, ost[ax]);
  cg_store(g, g->out, oi, LLVMBuildFAdd(g->b, cg_load(g, g->out, oi, 1, NULL), cg_load(g, g->in[0], gi, 1, NULL), ""), NULL);
  cg_endif(g, &ok);
  cg_end_for(g, &L, NULL);
  cg_endif(g, &in_index);
  cg_end_for(g, &items, NULL);
  return true;
}
