/* Fused kernels (FUSED nodes from the fuse pass; program format in
 * ir/fused.h), for CUDA C and MSL alike.
 *
 * An elementwise program runs as emit_ew.c's kernels do: each operand
 * described by strides over the output's dimensions (0 along a broadcast
 * one), neighbouring dimensions merged where every operand allows, a
 * grid-stride loop four elements at a time when the innermost dimension
 * allows it; the program's instructions are evaluated in registers, each
 * value rounded to its instruction's dtype as the unfused op would have
 * stored it, so the group computes exactly what its parts did, and only the
 * last one is stored.
 *
 * A program that starts with a GEMM is that GEMM with the rest as its
 * epilogue: the dialects' GEMM emitters (codegen/cuda/emit_gemm.c,
 * codegen/metal/emit_gemm.c; a qlinear head: codegen/cuda/emit_qlinear.c)
 * call cc_fused_epilogue for a struct @K@_epi
 * that the GEMM's store calls per
 * element (st1), per pair of neighbouring columns (st2) with the f32
 * accumulator, or (CUDA's wgmma GEMM) per eight columns of the GEMM's
 * 16-bit values (st8), each with the flat index and the column; it rounds
 * that to the GEMM's dtype, runs the epilogue and stores the result.
 */
#include "codegen/cstyle/cc.h"

#include <string.h>

#include "ir/fused.h"

#define THREADS 256
#define MAX_BLOCKS 65536

/* The node's operands over the output's dimensions: dims[0..r) and st[k]
 * the element strides of input k (st[n->nin] the output's), merged. */
typedef struct {
  int r;
  int64_t dims[MLC_MAX_RANK];
  int64_t st[MLC_FUSED_MAX_IN + 1][MLC_MAX_RANK];
} layout;

/* Inputs before `first` (a GEMM's operands, not read by index) count as laid out as the output. */
static void plan_layout(const cc *c, layout *L, int first) {
  const mlc_type *o = cc_outt(c);
  int nin = c->n->nin, R = o->rank;
  int64_t st[MLC_FUSED_MAX_IN + 1][MLC_MAX_RANK];
  for (int k = 0; k <= nin; k++) {
    const mlc_type *t = k < first ? o : k < nin ? cc_in(c, k) : o;
    int64_t s = 1;
    for (int d = R - 1; d >= 0; d--) {
      int td = d - (R - t->rank);
      int64_t n = td >= 0 ? t->dim[td] : 1;
      st[k][d] = n == 1 ? 0 : s;
      s *= n;
    }
  }
  /* size-1 dimensions go; an outer dimension q merges with the next inner
   * one d where every operand's stride along q is its stride along d times
   * d's size (contiguous across, or broadcast along both) */
  L->r = 0;
  for (int d = 0; d < R; d++) {
    if (o->dim[d] == 1) continue;
    int q = L->r - 1;
    bool merge = q >= 0;
    for (int k = 0; k <= nin && merge; k++) merge = L->st[k][q] == st[k][d] * o->dim[d];
    if (!merge) q = L->r++, L->dims[q] = 1;
    L->dims[q] *= o->dim[d];
    for (int k = 0; k <= nin; k++) L->st[k][q] = st[k][d];
  }
}

/* The element offset of input k for the output's flat index idx.  col: the
 * name of idx's column within the innermost merged dimension when that
 * dimension is ncol long (a GEMM epilogue's column of its N: a bias is
 * in[col], with no division by N), else NULL. */
static const char *offset_of(cc *c, const layout *L, int k, const char *idx, const char *col, int64_t ncol) {
  int o = c->n->nin;
  bool same = true;
  for (int q = 0; q < L->r; q++) same &= L->st[k][q] == L->st[o][q];
  if (same) return idx;
  bool by_col = col && L->r && L->dims[L->r - 1] == ncol;
  const char *e = "";
  int64_t below = 1;
  for (int q = L->r - 1; q >= 0; q--) {
    if (L->st[k][q]) {
      const char *co = by_col && q == L->r - 1 ? col : below == 1 ? idx : cc_fmt(c, "%s / %lld$ll", idx, (long long)below);
      if (q > 0 && !(by_col && q == L->r - 1)) co = cc_fmt(c, "(%s %% %lld$ll)", co, (long long)L->dims[q]);
      else co = cc_fmt(c, "(%s)", co);
      e = L->st[k][q] == 1 ? cc_fmt(c, "%s%s%s", e, *e ? " + " : "", co)
                           : cc_fmt(c, "%s%s%s * %lld$ll", e, *e ? " + " : "", co, (long long)L->st[k][q]);
    }
    below *= L->dims[q];
  }
  return *e ? cc_fmt(c, "(%s)", e) : "0";
}

static int arg_dtype(const cc *c, const mlc_fused_prog *pr, int arg) {
  return arg < 0 ? cc_in(c, -1 - arg)->dtype : pr->ins[arg].type.dtype;
}

/* Prints instructions from..n-1 as locals t<j> (x[k]: input k's value,
 * t0 already there when from is 1); returns the last one's name. */
static const char *eval(cc *c, const mlc_fused_prog *pr, uint32_t from, const char *const *x, const char *ind) {
  for (uint32_t j = from; j < pr->n; j++) {
    const mlc_fused_ins *in = &pr->ins[j];
    const char *a[2];
    for (int k = 0; k < in->nin; k++) a[k] = in->arg[k] < 0 ? x[-1 - in->arg[k]] : cc_fmt(c, "t%d", in->arg[k]);
    const char *e = cc_ew_expr(c, in->op, arg_dtype(c, pr, in->arg[0]), in->type.dtype, NULL, a);
    MLC_ASSERT(e);
    if (j + 1 < pr->n) e = cc_rounded(c, in->type.dtype, e);
    cc_printf(c, "%s%s t%u = %s;\n", ind, cc_ctype(c, in->type.dtype), j, e);
  }
  return cc_fmt(c, "t%u", pr->n - 1);
}

bool cc_fused_program(cc *c, mlc_fused_prog *pr) {
  char err[200];
  if (!mlc_fused_program(c->f, c->n, pr, err, sizeof err)) return cc_bug(c, "%s", err);
  return true;
}

bool cc_fused_gemm_node(cc *c, const mlc_fused_prog *pr, mlc_node *g) {
  if (pr->gemm < 0) return false;
  const mlc_fused_ins *in = &pr->ins[pr->gemm];
  memset(g, 0, sizeof *g);
  g->op = in->op;
  g->nin = 2;
  g->in = c->n->in; /* x (before its prologue: the norm keeps its type) and the weight */
  g->type = in->type;
  g->scope = c->n->scope;
  g->a.qbits = in->qbits, g->a.qgroup = in->qgroup, g->a.qscheme = in->qscheme;
  return true;
}

void cc_fused_epilogue(cc *c, const mlc_fused_prog *pr) {
  const char *dev = c->t->dev;
  int nin = c->n->nin, odt = c->n->type.dtype, g = pr->gemm, gdt = pr->ins[g].type.dtype, e0 = (int)pr->epi_in;
  const mlc_type *ot = cc_outt(c);
  int64_t N = ot->rank ? ot->dim[ot->rank - 1] : 1;
  layout L;
  plan_layout(c, &L, e0);
  cc_printf(c, "struct @K@_epi {\n");
  for (int k = e0; k < nin; k++) cc_printf(c, "  %sconst %s *in%d;\n", dev, cc_stype(c, cc_in(c, k)->dtype), k);
  cc_printf(c, "  %s%s *out;\n  $i64 b0;\n", dev, cc_stype(c, odt));
  /* fx: the program on the accumulator and the inputs' values; f: the
   * same, loading the inputs of the element at flat index i, column col */
  const char *x[MLC_FUSED_MAX_IN] = {0}, *off[MLC_FUSED_MAX_IN] = {0}, *params = "", *args = "";
  for (int k = e0; k < nin; k++) {
    const mlc_node *src = &c->f->nodes[c->n->in[k]];
    if (src->op == MLC_OP_CONST) {
      x[k] = cc_const_lit(c, src);
      continue;
    }
    off[k] = offset_of(c, &L, k, "(b0 + i)", "col", N);
    x[k] = cc_fmt(c, "x%d", k);
    params = cc_fmt(c, "%s, %s x%d", params, cc_ctype(c, src->type.dtype), k);
    args = cc_fmt(c, "%s, x%d", args, k);
  }
  cc_printf(c, "  MLC_FN %s fx(float acc%s) const {\n", cc_ctype(c, odt), params);
  cc_printf(c, "    float t%d = %s;\n", g, cc_rounded(c, gdt, "acc"));
  cc_printf(c, "    return %s;\n  }\n", eval(c, pr, (uint32_t)g + 1, x, "    "));
  cc_printf(c, "  MLC_FN %s f($i64 i, $i64 col, float acc) const {\n    (void)i, (void)col;\n", cc_ctype(c, odt));
  for (int k = e0; k < nin; k++)
    if (off[k])
      cc_printf(c, "    %s x%d = %s;\n", cc_ctype(c, cc_in(c, k)->dtype), k, cc_load(c, cc_fmt(c, "in%d", k), cc_in(c, k)->dtype, off[k]));
  cc_printf(c, "    return fx(acc%s);\n  }\n", args);
  cc_printf(c, "  MLC_FN void st1($i64 i, $i64 col, float v) const { %s }\n",
            cc_store(c, "out", odt, "b0 + i", "f(i, col, v)"));
  int osz = (int)mlc_dtype_size((mlc_dtype)odt);
  if (osz == 2)
    cc_printf(c, "  MLC_FN void st2($i64 i, $i64 col, float v0, float v1) const {\n"
                 "    %s a = from_f32<%s>(f(i, col, v0)), b = from_f32<%s>(f(i + 1, col + 1, v1));\n"
                 "    *(%sunsigned *)(out + b0 + i) = (unsigned)a.x | (unsigned)b.x << 16;\n  }\n",
              cc_stype(c, odt), cc_stype(c, odt), cc_stype(c, odt), dev);
  else
    cc_printf(c, "  MLC_FN void st2($i64 i, $i64 col, float v0, float v1) const { st1(i, col, v0); "
                 "st1(i + 1, col + 1, v1); }\n");
  /* CUDA's wgmma GEMM hands over eight neighbouring columns at a time, as
   * the GEMM's 16-bit values (already rounded) read from shared memory;
   * the result goes out in 16-byte stores */
  if (c->t->epilogue_st8 && mlc_dtype_size((mlc_dtype)gdt) == 2) {
    const char *G = cc_stype(c, gdt);
    /* a 16-bit input laid out as the output, or a bias along the columns,
     * comes as one 16-byte load where its address is 16-byte aligned
     * (i and col are multiples of 8 here), else element by element */
    cc_printf(c, "  MLC_FN void st8($i64 i, $i64 col, uint4 raw) const {\n"
                 "    const unsigned w[4] = {raw.x, raw.y, raw.z, raw.w};\n");
    bool vec[MLC_FUSED_MAX_IN] = {0};
    for (int k = e0; k < nin; k++) {
      if (!off[k]) continue;
      int dt = cc_in(c, k)->dtype;
      vec[k] = mlc_dtype_size((mlc_dtype)dt) == 2 && (!strcmp(off[k], "(b0 + i)") || !strcmp(off[k], "((col))"));
      if (vec[k]) {
        const char *S = cc_stype(c, dt);
        cc_printf(c, "    const %s *p%d = in%d + %s;\n    unsigned u%d[4];\n", S, k, k, off[k], k);
        cc_printf(c, "    if (((unsigned long long)p%d & 15) == 0) {\n"
                     "      const uint4 q = *(const uint4 *)p%d;\n"
                     "      u%d[0] = q.x, u%d[1] = q.y, u%d[2] = q.z, u%d[3] = q.w;\n"
                     "    } else {\n#pragma unroll\n"
                     "      for (int k = 0; k < 4; k++) u%d[k] = (unsigned)p%d[2 * k].x | (unsigned)p%d[2 * k + 1].x << 16;\n"
                     "    }\n", k, k, k, k, k, k, k, k, k);
      }
    }
    cc_printf(c, "    %s v[8];\n#pragma unroll\n    for (int k = 0; k < 8; k++) {\n"
                 "      %s g; g.x = (unsigned short)(w[k / 2] >> (k %% 2 * 16));\n"
                 "      const $i64 ik = i + k, ck = col + k;\n      (void)ik, (void)ck;\n", cc_ctype(c, odt), G);
    for (int k = e0; k < nin; k++) {
      if (!off[k]) continue;
      int dt = cc_in(c, k)->dtype;
      if (vec[k])
        cc_printf(c, "      %s h%d; h%d.x = (unsigned short)(u%d[k / 2] >> (k %% 2 * 16));\n      %s x%d = to_f32(h%d);\n",
                  cc_stype(c, dt), k, k, k, cc_ctype(c, dt), k, k);
      else
        cc_printf(c, "      %s x%d = %s;\n", cc_ctype(c, dt), k,
                  cc_load(c, cc_fmt(c, "in%d", k), dt, offset_of(c, &L, k, "(b0 + ik)", "ck", N)));
    }
    cc_printf(c, "      v[k] = fx(to_f32(g)%s);\n    }\n", args);
    if (osz == 2)
      cc_printf(c, "    unsigned r[4];\n#pragma unroll\n    for (int k = 0; k < 4; k++)\n"
                   "      r[k] = (unsigned)from_f32<%s>(v[2 * k]).x | (unsigned)from_f32<%s>(v[2 * k + 1]).x << 16;\n"
                   "    *(uint4 *)(out + b0 + i) = make_uint4(r[0], r[1], r[2], r[3]);\n  }\n",
                cc_stype(c, odt), cc_stype(c, odt));
    else /* wider outputs (not made today: passes/fuse.c keeps widening epilogues apart on CUDA) */
      cc_printf(c, "#pragma unroll\n    for (int k = 0; k < 8; k++) %s\n  }\n",
                cc_store(c, "out", odt, "b0 + i + k", "v[k]"));
  }
  cc_printf(c, "};\n");
}

const char *cc_fused_epilogue_init(cc *c, const mlc_fused_prog *pr, const char *boff) {
  const char *s = "{";
  for (int k = (int)pr->epi_in; k < c->n->nin; k++) s = cc_fmt(c, "%sin%d, ", s, k);
  return cc_fmt(c, "%sout, %s}", s, boff);
}

bool cc_emit_fused(cc *c) {
  mlc_fused_prog pr;
  if (!cc_fused_program(c, &pr)) return false;
  if (pr.gemm > 0 && !c->t->gemv_prologues) /* fuse.c makes these only for targets with gemv_prologue_rows */
    return cc_fail(c, "a GEMM with a prologue: the %s target has no kernel for it", c->t->name);
  if (pr.gemm >= 0 && pr.ins[pr.gemm].op == MLC_OP_QLINEAR) /* fuse.c makes these only for targets with qlinear_epilogues */
    return c->t->emit_qlinear ? c->t->emit_qlinear(c) : cc_fail(c, "a fused qlinear: the %s target has no kernel", c->t->name);
  if (pr.gemm >= 0 && pr.ins[pr.gemm].op == MLC_OP_SCALED_MM) /* fuse.c makes these only where scaled_mm_epilogues (CUDA) */
    return c->t->emit_scaled_mm ? c->t->emit_scaled_mm(c) : cc_fail(c, "a fused scaled_mm: the %s target has no kernel", c->t->name);
  if (pr.gemm >= 0) return c->t->emit_gemm(c);
  const mlc_node *n = c->n;
  int nin = n->nin, out_dt = n->type.dtype;
  layout L;
  plan_layout(c, &L, 0);
  int r = L.r;
  const mlc_node *cnst[MLC_FUSED_MAX_IN] = {0};
  for (int k = 0; k < nin; k++)
    if (c->f->nodes[n->in[k]].op == MLC_OP_CONST) cnst[k] = &c->f->nodes[n->in[k]];
  /* four elements per thread when every operand is contiguous or constant along the innermost dimension */
  bool vec = r >= 1 && L.dims[r - 1] % 4 == 0;
  for (int k = 0; k < nin && vec; k++) vec = cnst[k] || L.st[k][r - 1] == 0 || L.st[k][r - 1] == 1;
  int V = vec ? 4 : 1;
  int64_t units = mlc_type_numel(&n->type) / V;
  int64_t blocks = cc_ceil_div(units, THREADS);
  if (blocks > MAX_BLOCKS) blocks = MAX_BLOCKS;
  if (blocks < 1) blocks = 1;
  cc_begin(c, (uint64_t)blocks, THREADS, 0);
  cc_printf(c, "  for ($i64 q = ($i64)$bid * %d + $tid; q < %lld$ll; q += %lld$ll) {\n", THREADS,
            (long long)units, (long long)blocks * THREADS);
  cc_printf(c, "    $i64 i = q * %d;\n", V);
  const char *x[MLC_FUSED_MAX_IN];
  for (int k = 0; k < nin; k++) {
    if (cnst[k]) {
      x[k] = cc_const_lit(c, cnst[k]);
      continue;
    }
    int dt = cc_in(c, k)->dtype;
    const char *off = offset_of(c, &L, k, "i", NULL, 0), *in = cc_fmt(c, "in%d", k);
    if (vec && L.st[k][r - 1] == 1) {
      cc_printf(c, "    mlc_x4<%s> v%d = *(const %smlc_x4<%s> *)(%s + %s);\n", cc_stype(c, dt), k, c->t->dev, cc_stype(c, dt), in, off);
      x[k] = cc_load(c, cc_fmt(c, "v%d.v", k), dt, "k");
    } else {
      cc_printf(c, "    %s x%d = %s;\n", cc_ctype(c, dt), k, cc_load(c, in, dt, off));
      x[k] = cc_fmt(c, "x%d", k);
    }
  }
  if (vec) {
    cc_printf(c, "    mlc_x4<%s> r;\n#pragma unroll\n    for (int k = 0; k < 4; k++) {\n", cc_stype(c, out_dt));
    const char *y = eval(c, &pr, 0, x, "      ");
    cc_printf(c, "      %s\n    }\n", cc_store(c, "r.v", out_dt, "k", y));
    cc_printf(c, "    *(%smlc_x4<%s> *)(out + i) = r;\n  }\n", c->t->dev, cc_stype(c, out_dt));
  } else {
    const char *y = eval(c, &pr, 0, x, "    ");
    cc_printf(c, "    %s\n  }\n", cc_store(c, "out", out_dt, "i", y));
  }
  cc_end(c);
  return true;
}
