/* Fused kernels: FUSED nodes from the fuse pass (program format in
 * ir/fused.h).
 *
 * An elementwise program: a thread per output element (a pair for 16-bit
 * outputs), as emit_ew.c's kernels; the output index is split into
 * coordinates, each input read where its shape (aligned right, size-1
 * dimensions broadcast) puts them, CONST inputs folded; the instructions
 * are evaluated in order, each value rounded to its instruction's dtype as
 * the unfused op would have stored it, so the group computes exactly what
 * its parts did; only the last one is stored.
 *
 * A program that starts with a GEMM (of inputs 0 and 1) is that GEMM
 * (emit_gemm.c, both kernels) with the rest as the epilogue of its store:
 * the f32 accumulator rounded to the GEMM's dtype, then the instructions.
 * So is one that starts with a qlinear (emit_qlinear.c), which has no
 * cooperative-matrix variant.
 */
#include "codegen/spirv/emit.h"
#include "ir/fused.h"

typedef struct {
  mlc_fused_prog pr;
  const mlc_type *ot; /* the node's (the last instruction's) type */
} fz;

/* Coordinates of flat output index i. */
static void coords(sb *b, const mlc_type *t, uint32_t i, uint32_t *c) {
  int64_t below = 1;
  for (int k = t->rank - 1; k >= 0; k--) {
    if (t->dim[k] == 1) {
      c[k] = sb_u32(b, 0);
      continue;
    }
    uint32_t q = below == 1 ? i : sb_div(b, i, sb_u32(b, (uint32_t)below));
    c[k] = below * t->dim[k] == mlc_type_numel(t) ? q : sb_mod(b, q, sb_u32(b, (uint32_t)t->dim[k]));
    below *= t->dim[k];
  }
}

/* Node input k at output coordinates c. */
static uint32_t input_at(sv *s, fz *z, int k, const uint32_t *c) {
  sb *b = s->b;
  const mlc_node *in = sv_in_node(s, k);
  if (in->op == MLC_OP_CONST) return sv_ew_const(b, in);
  const mlc_type *t = &in->type;
  int R = z->ot->rank;
  uint32_t off = sb_u32(b, 0);
  int64_t st = 1;
  for (int d = t->rank - 1; d >= 0; d--) {
    if (t->dim[d] != 1) off = sb_add(b, off, sb_mulc(b, c[d + (R - t->rank)], (uint32_t)st));
    st *= t->dim[d];
  }
  return sv_ew_load(b, (uint32_t)k, t->dtype, off);
}

static int operand_dt(sv *s, const fz *z, int arg) {
  return arg >= 0 ? z->pr.ins[arg].type.dtype : sv_in(s, -1 - arg)->dtype;
}

/* Runs instructions from..n-1 at coordinates c (v0: instruction 0's value
 * when it is a GEMM) and gives the last one's bits. */
static void run(sv *s, fz *z, uint32_t from, uint32_t v0, const uint32_t *c, uint32_t *lo, uint32_t *hi) {
  sb *b = s->b;
  uint32_t vals[MLC_FUSED_MAX];
  vals[0] = v0;
  for (uint32_t j = from; j < z->pr.n; j++) {
    const mlc_fused_ins *in = &z->pr.ins[j];
    uint32_t x[MLC_EW_MAX_IN] = {0};
    MLC_ASSERT(in->nin <= MLC_EW_MAX_IN);
    for (int a = 0; a < in->nin; a++) x[a] = in->arg[a] >= 0 ? vals[in->arg[a]] : input_at(s, z, -1 - in->arg[a], c);
    uint32_t y = sv_ew_value(b, in->op, operand_dt(s, z, in->arg[0]), in->type.dtype, NULL, x);
    MLC_ASSERT(y);
    vals[j] = sv_ew_round(b, in->type.dtype, y);
  }
  sv_ew_bits(b, z->pr.ins[z->pr.n - 1].type.dtype, vals[z->pr.n - 1], lo, hi);
}

static void ew_elem(sv *s, void *ctx, uint32_t i, uint32_t *lo, uint32_t *hi) {
  fz *z = ctx;
  uint32_t c[MLC_MAX_RANK];
  coords(s->b, z->ot, i, c);
  run(s, z, 0, 0, c, lo, hi);
}

static void epilogue(sv *s, void *ctx, uint32_t at, uint32_t acc, uint32_t *lo, uint32_t *hi) {
  fz *z = ctx;
  uint32_t c[MLC_MAX_RANK];
  if (z->pr.n > 1) coords(s->b, z->ot, at, c);
  run(s, z, 1, sv_ew_round(s->b, z->pr.ins[0].type.dtype, acc), c, lo, hi);
}

static bool is_gemm(int op) { return op == MLC_OP_MATMUL || op == MLC_OP_LINEAR || op == MLC_OP_MATMUL_TN; }

bool sv_emit_fused(sv *s) {
  fz *z = mlc_arena_alloc(s->p->arena, sizeof *z);
  char err[200];
  if (!mlc_fused_program(s->f, s->n, &z->pr, err, sizeof err)) return sv_fail(s, "%s", err);
  z->ot = &s->n->type;
  for (uint32_t k = 0; k < s->n->nin; k++)
    if (!sv_check_size(s, mlc_type_numel(sv_in(s, (int)k)))) return false;
  if (!sv_check_size(s, mlc_type_numel(z->ot))) return false;
  const mlc_fused_ins *g = &z->pr.ins[0];
  for (uint32_t j = is_gemm(g->op) || g->op == MLC_OP_QLINEAR ? 1 : 0; j < z->pr.n; j++) {
    int op = z->pr.ins[j].op;
    if (op != MLC_OP_BROADCAST && !(mlc_ops[op].flags & MLC_F_EW))
      return sv_fail(s, "a fused program with %s (instruction %u): not elementwise", mlc_ops[op].name, j);
  }
  if (is_gemm(g->op) || g->op == MLC_OP_QLINEAR) {
    if (g->nin != 2 || g->arg[0] != -1 || g->arg[1] != -2) return sv_fail(s, "fused GEMM not of inputs 0 and 1");
    if (g->op != MLC_OP_QLINEAR) return sv_emit_gemm_of(s, g->op, &g->type, epilogue, z, z->ot->dtype);
    if (!s->coopmat_variant) return sv_emit_qlinear_of(s, g->qbits, g->qgroup, g->qscheme, epilogue, z, z->ot->dtype);
  }
  if (s->coopmat_variant) { /* nothing to do with cooperative matrices: declined */
    sb_entry_begin(s->b, "main0", 1, 1, (uint32_t[2]){0, 0});
    sb_entry_end(s->b);
    s->nd = 1;
    return true;
  }
  sv_items_store(s, mlc_type_numel(z->ot), sv_out(s), z->ot->dtype, ew_elem, z);
  return true;
}
