/* Data movement: transpose (swap two axes), slice, concat, gather,
 * slice_grad (zeros with g written at [start, end) on one axis) and
 * gather_grad.  Bits are copied as
 * they are, so every dtype moves exactly.
 *
 * A thread writes output elements i, i + stride, ...: it splits i into
 * coordinates with literal divisors and reads the element they name, four
 * at a time when the last axis moves in aligned groups of four.  The
 * transpose of the last two axes, the one the backward pass makes for every
 * weight gradient, goes through a 32 x 32 tile in shared memory instead, so
 * that reads and writes both stay coalesced.
 */
#include "codegen/cstyle/cc.h"

#define THREADS 256
#define MAX_BLOCKS 65536
#define TILE 32

/* "for each output element i" with coordinates c0..c<r-1>, V elements at
 * a time (V = 4 when the caller has checked that every 4 consecutive output
 * elements come from 4 consecutive, aligned source elements). */
static void begin_elements(cc *c, const mlc_type *ot, int V) {
  int64_t total = mlc_type_numel(ot) / V, blocks = cc_ceil_div(total, THREADS);
  if (blocks > MAX_BLOCKS) blocks = MAX_BLOCKS;
  cc_begin(c, (uint64_t)blocks, THREADS, 0);
  cc_printf(c, "  for ($i64 q = ($i64)$bid * %d + $tid; q < %lld$ll; q += %lld$ll) {\n", THREADS,
            (long long)total, (long long)blocks * THREADS);
  cc_printf(c, "    $i64 i = q * %d;\n", V);
  int64_t below = 1;
  for (int k = ot->rank - 1; k >= 0; k--) {
    cc_printf(c, "    $i64 c%d = i / %lld$ll %% %lld$ll;\n", k, (long long)below, (long long)ot->dim[k]);
    below *= ot->dim[k];
  }
}

/* out[i..i+V) = src[at..at+V). */
static const char *copy(cc *c, int V, const char *src, const char *at) {
  if (V == 1) return cc_fmt(c, "out[i] = %s[%s];", src, at);
  const char *t = cc_stype(c, c->n->type.dtype);
  return cc_fmt(c, "*(%smlc_x4<%s> *)(out + i) = *(const %smlc_x4<%s> *)(%s + (%s));", c->t->dev, t, c->t->dev, t, src, at);
}

/* 4 when the last dimension moves in whole, aligned groups of 4: it is not
 * `axis`, or every range on it starts and ends at multiples of 4. */
static int width(const mlc_type *ot, int axis, int64_t a, int64_t b) {
  int last = ot->rank - 1;
  if (last < 0 || ot->dim[last] % 4) return 1;
  return axis != last || (a % 4 == 0 && b % 4 == 0) ? 4 : 1;
}

static void end_elements(cc *c) {
  cc_printf(c, "  }\n");
  cc_end(c);
}

/* Offset expression of coordinates c0.. in a tensor of type t, with axis
 * `axis` shifted by `shift` (for slices and concat). */
static const char *offset(cc *c, const mlc_type *t, int axis, int64_t shift) {
  int64_t st[MLC_MAX_RANK];
  mlc_type_strides(t, st);
  const char *e = "0";
  for (int k = 0; k < t->rank; k++) {
    if (k == axis && shift) e = cc_fmt(c, "%s + (c%d + %lld$ll) * %lld$ll", e, k, (long long)shift, (long long)st[k]);
    else e = cc_fmt(c, "%s + c%d * %lld$ll", e, k, (long long)st[k]);
  }
  return e;
}

/* out[b, j, i] = in[b, i, j] for in [B, R, C]: one block per 32 x 32 tile. */
static void transpose_last2(cc *c, int64_t B, int64_t R, int64_t C) {
  int64_t tr = cc_ceil_div(R, TILE), tc = cc_ceil_div(C, TILE);
  const char *t = cc_stype(c, c->n->type.dtype);
  cc_begin(c, (uint64_t)(B * tr * tc), TILE * 8, 0);
  cc_printf(c, "  $shared %s tile[%d][%d];\n", t, TILE, TILE + 1);
  cc_printf(c, "  $i64 blk = $bid, b = blk / %lld$ll, r0 = (blk / %lld$ll %% %lld$ll) * %d, c0 = (blk %% %lld$ll) * %d;\n",
            (long long)(tr * tc), (long long)tc, (long long)tr, TILE, (long long)tc, TILE);
  cc_printf(c, "  int tx = $tid %% %d, ty = $tid / %d;\n", TILE, TILE);
  cc_printf(c, "  const %s%s *src = in0 + b * %lld$ll; %s%s *dst = out + b * %lld$ll;\n", c->t->dev, t, (long long)(R * C), c->t->dev, t,
            (long long)(R * C));
  cc_printf(c, "  for (int y = ty; y < %d; y += 8) {\n", TILE);
  cc_printf(c, "    $i64 r = r0 + y, cc = c0 + tx;\n");
  cc_printf(c, "    if (r < %lld$ll && cc < %lld$ll) tile[y][tx] = src[r * %lld$ll + cc];\n  }\n", (long long)R, (long long)C,
            (long long)C);
  cc_printf(c, "  $barrier;\n");
  cc_printf(c, "  for (int y = ty; y < %d; y += 8) {\n", TILE);
  cc_printf(c, "    $i64 cc = c0 + y, r = r0 + tx;\n");
  cc_printf(c, "    if (r < %lld$ll && cc < %lld$ll) dst[cc * %lld$ll + r] = tile[tx][y];\n  }\n", (long long)R, (long long)C,
            (long long)R);
  cc_end(c);
}

/* The same for 1-byte elements (FP8 codes, issue 30) with R and C
 * multiples of 4: a 64 x 64 tile a block, each thread moving 4 bytes as one
 * word both ways (a byte a thread, the tile above moved FP8's transposes at
 * about a quarter of the memory's speed: 6.8 ms of the MiniLLM's FP8 step on
 * an H100, bench/results/h100-2026-12-06). */
static void transpose_last2_bytes(cc *c, int64_t B, int64_t R, int64_t C) {
  int64_t tr = cc_ceil_div(R, 64), tc = cc_ceil_div(C, 64);
  cc_begin(c, (uint64_t)(B * tr * tc), CC_BYTE_TILE, 0);
  cc_printf(c, "  $shared unsigned int tile[64][17];\n"); /* a row's bytes as words, and a word of padding */
  cc_printf(c, "  $i64 blk = $bid, b = blk / %lld$ll, r0 = (blk / %lld$ll %% %lld$ll) * 64, c0 = (blk %% %lld$ll) * 64;\n",
            (long long)(tr * tc), (long long)tc, (long long)tr, (long long)tc);
  cc_printf(c, "  int tx = $tid %% 16, ty = $tid / 16;\n");
  cc_printf(c, "  const %sunsigned char *src = in0 + b * %lld$ll; %sunsigned char *dst = out + b * %lld$ll;\n", c->t->dev,
            (long long)(R * C), c->t->dev, (long long)(R * C));
  /* input rows r0 + y, 4 bytes from column c0 + 4 tx */
  cc_printf(c, "  for (int y = ty; y < 64; y += %d) {\n", CC_BYTE_TILE / 16);
  cc_printf(c, "    $i64 r = r0 + y, cc = c0 + 4 * tx;\n");
  cc_printf(c, "    if (r < %lld$ll && cc < %lld$ll) tile[y][tx] = *(const %sunsigned int *)(src + r * %lld$ll + cc);\n  }\n",
            (long long)R, (long long)C, c->t->dev, (long long)C);
  cc_byte_tile_store_transposed(c, "dst", R, C);
  cc_end(c);
}

bool cc_emit_layout(cc *c) {
  const mlc_node *n = c->n;
  const mlc_type *ot = &n->type;
  switch (n->op) {
  case MLC_OP_TRANSPOSE: {
    const mlc_type *it = cc_in(c, 0);
    int a = n->a.axis, b = n->a.axis2;
    if (a > b) { int t = a; a = b; b = t; }
    if (a == b) {
      begin_elements(c, ot, 1);
      cc_printf(c, "    out[i] = in0[i];\n");
      end_elements(c);
      return true;
    }
    if (b == it->rank - 1 && a == it->rank - 2) {
      int64_t B = 1;
      for (int k = 0; k < it->rank - 2; k++) B *= it->dim[k];
      if (mlc_dtype_size((mlc_dtype)it->dtype) == 1 && it->dim[a] % 4 == 0 && it->dim[b] % 4 == 0)
        transpose_last2_bytes(c, B, it->dim[a], it->dim[b]);
      else
        transpose_last2(c, B, it->dim[a], it->dim[b]);
      return true;
    }
    /* The input coordinate along a is the output's along b and back; when
     * the last axis stays in place, rows move 4 wide. */
    int64_t st[MLC_MAX_RANK];
    mlc_type_strides(it, st);
    int V = b == it->rank - 1 ? 1 : width(ot, -1, 0, 0);
    begin_elements(c, ot, V);
    cc_printf(c, "    $i64 src = 0");
    for (int k = 0; k < ot->rank; k++) {
      int ik = k == a ? b : k == b ? a : k;
      cc_printf(c, " + c%d * %lld$ll", k, (long long)st[ik]);
    }
    cc_printf(c, ";\n    %s\n", copy(c, V, "in0", "src"));
    end_elements(c);
    return true;
  }
  case MLC_OP_SLICE: {
    int V = width(ot, n->a.axis, n->a.start, cc_in(c, 0)->dim[n->a.axis]);
    begin_elements(c, ot, V);
    cc_printf(c, "    %s\n", copy(c, V, "in0", offset(c, cc_in(c, 0), n->a.axis, n->a.start)));
    end_elements(c);
    return true;
  }
  case MLC_OP_SLICE_GRAD: {
    int ax = n->a.axis, V = width(ot, ax, n->a.start, n->a.end);
    begin_elements(c, ot, V);
    cc_printf(c, "    if (c%d >= %lld$ll && c%d < %lld$ll) %s\n", ax, (long long)n->a.start, ax, (long long)n->a.end,
              copy(c, V, "in0", offset(c, cc_in(c, 0), ax, -n->a.start)));
    /* zero bits are zero in every dtype */
    if (V == 1) cc_printf(c, "    else out[i] = %s{};\n", cc_stype(c, ot->dtype));
    else cc_printf(c, "    else *(%smlc_x4<%s> *)(out + i) = mlc_x4<%s>{};\n", c->t->dev, cc_stype(c, ot->dtype), cc_stype(c, ot->dtype));
    end_elements(c);
    return true;
  }
  case MLC_OP_CONCAT: {
    int ax = n->a.axis, V = 4;
    int64_t at = 0;
    for (uint32_t k = 0; k < n->nin; k++) {
      if (width(ot, ax, at, at + cc_in(c, (int)k)->dim[ax]) == 1) V = 1;
      at += cc_in(c, (int)k)->dim[ax];
    }
    begin_elements(c, ot, V);
    at = 0;
    for (uint32_t k = 0; k < n->nin; k++) {
      const mlc_type *it = cc_in(c, (int)k);
      int64_t len = it->dim[ax];
      cc_printf(c, "    %sif (c%d < %lld$ll) %s\n", k ? "else " : "", ax, (long long)(at + len),
                copy(c, V, cc_fmt(c, "in%u", k), offset(c, it, ax, -at)));
      at += len;
    }
    end_elements(c);
    return true;
  }
  case MLC_OP_GATHER: {
    /* out[c] = in0[c with c[axis] = index[c]]; an index outside the axis gives 0 */
    const mlc_type *xt = cc_in(c, 0);
    int ax = n->a.axis;
    int64_t st[MLC_MAX_RANK];
    mlc_type_strides(xt, st);
    /* begin_elements' loop, without the axis' coordinate (the index gives it) */
    int64_t total = mlc_type_numel(ot), blocks = cc_ceil_div(total, THREADS), below = 1;
    if (blocks > MAX_BLOCKS) blocks = MAX_BLOCKS;
    cc_begin(c, (uint64_t)blocks, THREADS, 0);
    cc_printf(c, "  for ($i64 i = ($i64)$bid * %d + $tid; i < %lld$ll; i += %lld$ll) {\n", THREADS,
              (long long)total, (long long)blocks * THREADS);
    for (int k = ot->rank - 1; k >= 0; k--) {
      if (k != ax) cc_printf(c, "    $i64 c%d = i / %lld$ll %% %lld$ll;\n", k, (long long)below, (long long)ot->dim[k]);
      below *= ot->dim[k];
    }
    cc_printf(c, "    $i64 t = ($i64)in1[i];\n");
    cc_printf(c, "    if (t >= 0 && t < %lld$ll) out[i] = in0[0", (long long)xt->dim[ax]);
    for (int k = 0; k < xt->rank; k++)
      if (k == ax) cc_printf(c, " + t * %lld$ll", (long long)st[k]);
      else cc_printf(c, " + c%d * %lld$ll", k, (long long)st[k]);
    cc_printf(c, "];\n    else out[i] = %s{};\n", cc_stype(c, ot->dtype));
    end_elements(c);
    return true;
  }
  default:
    return cc_bug(c, "%s is not a layout op", mlc_ops[n->op].name);
  }
}

/* gather_grad: zeros of x's shape with g added at the indices along the
 * axis (scatter-add).  One thread per line of the output along the axis:
 * it zeroes the line and walks the index's line in order, so there are no
 * atomics and the sums come out the same every run.  Sums in f32, rounded
 * to the output's dtype at each store. */
bool cc_emit_gather_grad(cc *c) {
  const mlc_node *n = c->n;
  const mlc_type *ot = &n->type, *it = cc_in(c, 1);
  int ax = n->a.axis, dt = ot->dtype;
  int64_t ost[MLC_MAX_RANK], ist[MLC_MAX_RANK], lines = 1, D = ot->dim[ax], R = it->dim[ax];
  mlc_type_strides(ot, ost);
  mlc_type_strides(it, ist);
  for (int k = 0; k < ot->rank; k++)
    if (k != ax) lines *= ot->dim[k];
  int64_t blocks = cc_ceil_div(lines, THREADS);
  if (blocks > MAX_BLOCKS) blocks = MAX_BLOCKS;
  cc_begin(c, (uint64_t)blocks, THREADS, 0);
  cc_printf(c, "  for ($i64 q = ($i64)$bid * %d + $tid; q < %lld$ll; q += %lld$ll) {\n", THREADS,
            (long long)lines, (long long)blocks * THREADS);
  cc_printf(c, "    $i64 o = 0, g = 0;\n    bool inside = true;\n");
  int64_t below = 1;
  for (int k = ot->rank - 1; k >= 0; k--) {
    if (k == ax) continue;
    cc_printf(c, "    { $i64 ck = q / %lld$ll %% %lld$ll; o += ck * %lld$ll; g += ck * %lld$ll;", (long long)below,
              (long long)ot->dim[k], (long long)ost[k], (long long)ist[k]);
    if (it->dim[k] < ot->dim[k]) cc_printf(c, " inside = inside && ck < %lld$ll;", (long long)it->dim[k]);
    cc_printf(c, " }\n");
    below *= ot->dim[k];
  }
  cc_printf(c, "    for ($i64 j = 0; j < %lld$ll; j++) out[o + j * %lld$ll] = %s{};\n", (long long)D, (long long)ost[ax],
            cc_stype(c, dt));
  cc_printf(c, "    if (!inside) continue;\n");
  cc_printf(c, "    for ($i64 j = 0; j < %lld$ll; j++) {\n", (long long)R);
  cc_printf(c, "      $i64 t = ($i64)in1[g + j * %lld$ll];\n", (long long)ist[ax]);
  cc_printf(c, "      if (t < 0 || t >= %lld$ll) continue;\n", (long long)D);
  const char *at = cc_fmt(c, "o + t * %lld$ll", (long long)ost[ax]);
  cc_printf(c, "      %s\n    }\n  }\n",
            cc_store(c, "out", dt, at, cc_fmt(c, "%s + %s", cc_load(c, "out", dt, at),
                                             cc_load(c, "in0", dt, cc_fmt(c, "g + j * %lld$ll", (long long)ist[ax])))));
  cc_end(c);
  return true;
}
