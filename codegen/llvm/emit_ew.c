/* Elementwise kernels: add/sub/mul/div with numpy broadcasting, the unary
 * ops, cast, broadcast (a copy to a larger shape), and the activation
 * gradients relu_grad, silu_grad, gelu_grad and gelu_tanh_grad (g, x);
 * issue 27's abs, erf, pow, clamp_min/max, gelu_tanh, the comparisons (bool
 * results) and where (three inputs); arange, which has no input;
 * dropout's Philox mask; and issue 30's quant (x and its amax to f8).
 *
 * The output and each input are described by strides over the output's
 * dimensions, an input's stride being 0 along a broadcast dimension.  Size-1
 * dimensions are dropped and neighbouring dimensions merged wherever every
 * operand is contiguous across them, so a plain same-shape add becomes one
 * flat loop and `x[b, s, d] + bias[d]` becomes rows of d.  A work item is a
 * chunk of up to CHUNK elements of one row of the innermost dimension.  The
 * row is walked in vectors; an input that is constant along it (stride 0)
 * is loaded once and splatted, and a CONST input is folded into the code.
 *
 * Each op's arithmetic is one small function in the table `bodies`; it sees
 * the inputs converted to the compute type and works on scalars and vectors
 * alike.
 */
#include <math.h>

#include "codegen/llvm/cg.h"

#define CHUNK 4096 /* elements per work item: a multiple of every vector width */

typedef LLVMValueRef (*ew_body)(cg *g, LLVMValueRef *x, int dt);

static LLVMValueRef b_add(cg *g, LLVMValueRef *x, int dt) {
  return cg_is_float(dt) ? LLVMBuildFAdd(g->b, x[0], x[1], "") : LLVMBuildAdd(g->b, x[0], x[1], "");
}
static LLVMValueRef b_sub(cg *g, LLVMValueRef *x, int dt) {
  return cg_is_float(dt) ? LLVMBuildFSub(g->b, x[0], x[1], "") : LLVMBuildSub(g->b, x[0], x[1], "");
}
static LLVMValueRef b_mul(cg *g, LLVMValueRef *x, int dt) {
  return cg_is_float(dt) ? LLVMBuildFMul(g->b, x[0], x[1], "") : LLVMBuildMul(g->b, x[0], x[1], "");
}
/* Integer division truncates (torch.div(rounding_mode="trunc")); dividing
 * by zero gives 0 instead of trapping. */
static LLVMValueRef b_div(cg *g, LLVMValueRef *x, int dt) {
  if (cg_is_float(dt)) return LLVMBuildFDiv(g->b, x[0], x[1], "");
  LLVMValueRef zero = LLVMConstNull(LLVMTypeOf(x[1])), one = cg_const(g, LLVMTypeOf(x[1]), 1);
  LLVMValueRef z = LLVMBuildICmp(g->b, LLVMIntEQ, x[1], zero, "");
  LLVMValueRef q = LLVMBuildSDiv(g->b, x[0], LLVMBuildSelect(g->b, z, one, x[1], ""), "");
  return LLVMBuildSelect(g->b, z, zero, q, "");
}
static LLVMValueRef b_neg(cg *g, LLVMValueRef *x, int dt) {
  return cg_is_float(dt) ? LLVMBuildFNeg(g->b, x[0], "") : LLVMBuildNeg(g->b, x[0], "");
}
static LLVMValueRef b_exp(cg *g, LLVMValueRef *x, int dt) { return cg_exp(g, x[0]); }
static LLVMValueRef b_log(cg *g, LLVMValueRef *x, int dt) { return cg_log(g, x[0]); }
static LLVMValueRef b_sqrt(cg *g, LLVMValueRef *x, int dt) { return cg_sqrt(g, x[0]); }
static LLVMValueRef b_rsqrt(cg *g, LLVMValueRef *x, int dt) {
  return LLVMBuildFDiv(g->b, cg_const(g, LLVMTypeOf(x[0]), 1.0), cg_sqrt(g, x[0]), "");
}
static LLVMValueRef b_tanh(cg *g, LLVMValueRef *x, int dt) { return cg_tanh(g, x[0]); }
static LLVMValueRef b_sigmoid(cg *g, LLVMValueRef *x, int dt) { return cg_sigmoid(g, x[0]); }
/* x < 0 ? 0 : x, so that NaN passes through as in torch.relu. */
static LLVMValueRef b_relu(cg *g, LLVMValueRef *x, int dt) {
  LLVMValueRef zero = LLVMConstNull(LLVMTypeOf(x[0]));
  LLVMValueRef neg = cg_is_float(dt) ? LLVMBuildFCmp(g->b, LLVMRealOLT, x[0], zero, "")
                                     : LLVMBuildICmp(g->b, LLVMIntSLT, x[0], zero, "");
  return LLVMBuildSelect(g->b, neg, zero, x[0], "");
}
static LLVMValueRef b_silu(cg *g, LLVMValueRef *x, int dt) {
  LLVMValueRef e = cg_exp(g, LLVMBuildFNeg(g->b, x[0], ""));
  return LLVMBuildFDiv(g->b, x[0], LLVMBuildFAdd(g->b, e, cg_const(g, LLVMTypeOf(e), 1.0), ""), "");
}
static LLVMValueRef b_gelu(cg *g, LLVMValueRef *x, int dt) {
  LLVMTypeRef t = LLVMTypeOf(x[0]);
  LLVMValueRef e = cg_erf_abs(g, LLVMBuildFMul(g->b, x[0], cg_const(g, t, 0.70710678118654752440), ""));
  LLVMValueRef h = LLVMBuildFMul(g->b, x[0], cg_const(g, t, 0.5), "");
  return cg_fma(g, h, e, h);
}
static LLVMValueRef b_cast(cg *g, LLVMValueRef *x, int dt) { return cg_convert(g, x[0], dt, g->n->type.dtype); }
/* broadcast: the strides above already repeat the input; the body copies.
 * Loads and stores round-trip exactly for every dtype. */
static LLVMValueRef b_copy(cg *g, LLVMValueRef *x, int dt) { return x[0]; }

/* The activation gradients take (g, x) and compute what PyTorch's backward
 * kernels compute.  relu: threshold_backward, x <= 0 ? 0 : g, so a NaN x
 * passes g through (ops.def's g * (x > 0) would give 0 there, and NaN for
 * an infinite g at x <= 0). */
static LLVMValueRef b_relu_grad(cg *g, LLVMValueRef *x, int dt) {
  LLVMValueRef zero = LLVMConstNull(LLVMTypeOf(x[1]));
  return LLVMBuildSelect(g->b, LLVMBuildFCmp(g->b, LLVMRealOLE, x[1], zero, ""), zero, x[0], "");
}
/* silu_backward: g * s * (1 + x (1 - s)), s = sigmoid(x). */
static LLVMValueRef b_silu_grad(cg *g, LLVMValueRef *x, int dt) {
  LLVMTypeRef t = LLVMTypeOf(x[1]);
  LLVMValueRef s = cg_sigmoid(g, x[1]), one = cg_const(g, t, 1.0);
  LLVMValueRef d = cg_fma(g, x[1], LLVMBuildFSub(g->b, one, s, ""), one);
  return LLVMBuildFMul(g->b, x[0], LLVMBuildFMul(g->b, s, d, ""), "");
}
/* GeluBackward (exact): g * (Phi(x) + x phi(x)), Phi(x) = (1 + erf(x/sqrt2)) / 2,
 * phi(x) = exp(-x^2/2) / sqrt(2 pi). */
static LLVMValueRef b_gelu_grad(cg *g, LLVMValueRef *x, int dt) {
  LLVMTypeRef t = LLVMTypeOf(x[1]);
  LLVMValueRef v = x[1], half = cg_const(g, t, 0.5);
  LLVMValueRef cdf = cg_fma(g, half, cg_erf_abs(g, LLVMBuildFMul(g->b, v, cg_const(g, t, 0.70710678118654752440), "")), half);
  LLVMValueRef e = cg_exp(g, LLVMBuildFMul(g->b, LLVMBuildFMul(g->b, v, v, ""), cg_const(g, t, -0.5), ""));
  LLVMValueRef pdf = LLVMBuildFMul(g->b, e, cg_const(g, t, 0.39894228040143267794), "");
  return LLVMBuildFMul(g->b, x[0], cg_fma(g, v, pdf, cdf), "");
}

static LLVMValueRef b_abs(cg *g, LLVMValueRef *x, int dt) {
  if (cg_is_float(dt)) {
    LLVMTypeRef t = LLVMTypeOf(x[0]);
    return cg_intrin(g, "llvm.fabs", &t, 1, x, 1);
  }
  LLVMValueRef neg = LLVMBuildICmp(g->b, LLVMIntSLT, x[0], LLVMConstNull(LLVMTypeOf(x[0])), "");
  return LLVMBuildSelect(g->b, neg, LLVMBuildNeg(g->b, x[0], ""), x[0], "");
}
static LLVMValueRef b_erf(cg *g, LLVMValueRef *x, int dt) { return cg_erf(g, x[0]); }

/* x ** p: products for an integral p up to 64 in size (exact for p = 2, as
 * PyTorch's x * x), sqrt for +-0.5, else exp(p log x) (NaN for x < 0,
 * 0 or inf at x = 0, as pow). */
static LLVMValueRef b_pow(cg *g, LLVMValueRef *x, int dt) {
  double p = g->n->a.f;
  LLVMTypeRef t = LLVMTypeOf(x[0]);
  LLVMValueRef one = cg_const(g, t, 1.0);
  if (p == 0.5) return cg_sqrt(g, x[0]);
  if (p == -0.5) return LLVMBuildFDiv(g->b, one, cg_sqrt(g, x[0]), "");
  if (p == (double)(int)p && p >= -64 && p <= 64) {
    unsigned k = (unsigned)(p < 0 ? -p : p);
    LLVMValueRef r = NULL, sq = x[0];
    for (; k; k >>= 1) {
      if (k & 1) r = r ? LLVMBuildFMul(g->b, r, sq, "") : sq;
      if (k > 1) sq = LLVMBuildFMul(g->b, sq, sq, "");
    }
    if (!r) return one;
    return p < 0 ? LLVMBuildFDiv(g->b, one, r, "") : r;
  }
  return cg_exp(g, LLVMBuildFMul(g->b, cg_const(g, t, p), cg_log(g, x[0]), ""));
}
/* x < lo ? lo : x and x > hi ? hi : x: a NaN x stays NaN, as torch.clamp. */
static LLVMValueRef b_clamp_min(cg *g, LLVMValueRef *x, int dt) {
  LLVMValueRef lo = cg_const(g, LLVMTypeOf(x[0]), g->n->a.f);
  return LLVMBuildSelect(g->b, LLVMBuildFCmp(g->b, LLVMRealOLT, x[0], lo, ""), lo, x[0], "");
}
static LLVMValueRef b_clamp_max(cg *g, LLVMValueRef *x, int dt) {
  LLVMValueRef hi = cg_const(g, LLVMTypeOf(x[0]), g->n->a.f);
  return LLVMBuildSelect(g->b, LLVMBuildFCmp(g->b, LLVMRealOGT, x[0], hi, ""), hi, x[0], "");
}

#define GELU_BETA 0.79788456080286535588 /* sqrt(2 / pi) */
#define GELU_KAPPA 0.044715
/* 0.5 x (1 + tanh(beta (x + kappa x^3))) */
static LLVMValueRef b_gelu_tanh(cg *g, LLVMValueRef *x, int dt) {
  LLVMTypeRef t = LLVMTypeOf(x[0]);
  LLVMValueRef v = x[0], x3 = LLVMBuildFMul(g->b, LLVMBuildFMul(g->b, v, v, ""), v, "");
  LLVMValueRef th = cg_tanh(g, LLVMBuildFMul(g->b, cg_const(g, t, GELU_BETA), cg_fma(g, x3, cg_const(g, t, GELU_KAPPA), v), ""));
  LLVMValueRef h = LLVMBuildFMul(g->b, v, cg_const(g, t, 0.5), "");
  return cg_fma(g, h, th, h);
}
/* GeluBackward (tanh): g (0.5 (1 + th) + 0.5 x (1 - th^2) beta (1 + 3 kappa x^2)). */
static LLVMValueRef b_gelu_tanh_grad(cg *g, LLVMValueRef *x, int dt) {
  LLVMTypeRef t = LLVMTypeOf(x[1]);
  LLVMValueRef v = x[1], one = cg_const(g, t, 1.0), half = cg_const(g, t, 0.5);
  LLVMValueRef x2 = LLVMBuildFMul(g->b, v, v, "");
  LLVMValueRef inner = LLVMBuildFMul(g->b, cg_const(g, t, GELU_BETA), cg_fma(g, LLVMBuildFMul(g->b, x2, v, ""), cg_const(g, t, GELU_KAPPA), v), "");
  LLVMValueRef th = cg_tanh(g, inner);
  LLVMValueRef left_d = LLVMBuildFMul(g->b, half, LLVMBuildFAdd(g->b, one, th, ""), "");
  LLVMValueRef tanh_d = LLVMBuildFSub(g->b, one, LLVMBuildFMul(g->b, th, th, ""), "");
  LLVMValueRef inner_d = LLVMBuildFMul(g->b, cg_const(g, t, GELU_BETA), cg_fma(g, x2, cg_const(g, t, 3 * GELU_KAPPA), one), "");
  LLVMValueRef right_d = LLVMBuildFMul(g->b, LLVMBuildFMul(g->b, LLVMBuildFMul(g->b, half, v, ""), tanh_d, ""), inner_d, "");
  return LLVMBuildFMul(g->b, x[0], LLVMBuildFAdd(g->b, left_d, right_d, ""), "");
}

/* Comparisons give bool (i8 0 or 1).  Floats compare ordered, but for !=,
 * which is true for NaN, as in PyTorch. */
static LLVMValueRef cmp(cg *g, LLVMValueRef *x, int dt, LLVMRealPredicate fp, LLVMIntPredicate ip) {
  LLVMValueRef c = cg_is_float(dt) ? LLVMBuildFCmp(g->b, fp, x[0], x[1], "") : LLVMBuildICmp(g->b, ip, x[0], x[1], "");
  return LLVMBuildZExt(g->b, c, cg_ctype(g, MLC_DT_BOOL, cg_lanes(c)), "");
}
static LLVMValueRef b_lt(cg *g, LLVMValueRef *x, int dt) { return cmp(g, x, dt, LLVMRealOLT, LLVMIntSLT); }
static LLVMValueRef b_le(cg *g, LLVMValueRef *x, int dt) { return cmp(g, x, dt, LLVMRealOLE, LLVMIntSLE); }
static LLVMValueRef b_eq(cg *g, LLVMValueRef *x, int dt) { return cmp(g, x, dt, LLVMRealOEQ, LLVMIntEQ); }
static LLVMValueRef b_ne(cg *g, LLVMValueRef *x, int dt) { return cmp(g, x, dt, LLVMRealUNE, LLVMIntNE); }
/* where(cond, a, b); dt is the condition's (bool). */
static LLVMValueRef b_where(cg *g, LLVMValueRef *x, int dt) {
  LLVMValueRef c = LLVMBuildICmp(g->b, LLVMIntNE, x[0], LLVMConstNull(LLVMTypeOf(x[0])), "");
  return LLVMBuildSelect(g->b, c, x[1], x[2], "");
}

/* quant(x, amax): x * 2^e, which the store rounds to the node's f8 dtype;
 * NaN everywhere when amax is NaN or infinite. */
static LLVMValueRef b_quant(cg *g, LLVMValueRef *x, int dt) {
  LLVMTypeRef t = LLVMTypeOf(x[1]);
  LLVMValueRef s = cg_f8_scale(g, x[1], g->n->type.dtype, false);
  LLVMValueRef finite = LLVMBuildFCmp(g->b, LLVMRealOLT, cg_intrin(g, "llvm.fabs", &t, 1, &x[1], 1), cg_const(g, t, INFINITY), "");
  return LLVMBuildSelect(g->b, finite, LLVMBuildFMul(g->b, x[0], s, ""), cg_const(g, t, NAN), "");
}

static const ew_body bodies[MLC_OP_COUNT] = {
  [MLC_OP_ADD] = b_add,   [MLC_OP_SUB] = b_sub,   [MLC_OP_MUL] = b_mul,         [MLC_OP_DIV] = b_div,
  [MLC_OP_NEG] = b_neg,   [MLC_OP_EXP] = b_exp,   [MLC_OP_LOG] = b_log,         [MLC_OP_SQRT] = b_sqrt,
  [MLC_OP_RSQRT] = b_rsqrt, [MLC_OP_TANH] = b_tanh, [MLC_OP_SIGMOID] = b_sigmoid, [MLC_OP_RELU] = b_relu,
  [MLC_OP_SILU] = b_silu, [MLC_OP_GELU] = b_gelu, [MLC_OP_CAST] = b_cast,
  [MLC_OP_BROADCAST] = b_copy, [MLC_OP_RELU_GRAD] = b_relu_grad, [MLC_OP_SILU_GRAD] = b_silu_grad,
  [MLC_OP_GELU_GRAD] = b_gelu_grad,
  [MLC_OP_ABS] = b_abs,   [MLC_OP_ERF] = b_erf,   [MLC_OP_POW] = b_pow,
  [MLC_OP_CLAMP_MIN] = b_clamp_min, [MLC_OP_CLAMP_MAX] = b_clamp_max, [MLC_OP_GELU_TANH] = b_gelu_tanh,
  [MLC_OP_GELU_TANH_GRAD] = b_gelu_tanh_grad, [MLC_OP_LT] = b_lt, [MLC_OP_LE] = b_le, [MLC_OP_EQ] = b_eq,
  [MLC_OP_NE] = b_ne, [MLC_OP_WHERE] = b_where, [MLC_OP_QUANT] = b_quant,
};

typedef struct {
  int nin;
  int in_dt;             /* compute dtype of the inputs */
  cg_buf buf[MLC_EW_MAX_IN + 1];         /* out, in0, in1, in2 */
  bool inner_bcast[MLC_EW_MAX_IN + 1];   /* stride 0 along the row */
  const mlc_node *cnst[MLC_EW_MAX_IN + 1]; /* CONST inputs, folded in */
  LLVMValueRef base[MLC_EW_MAX_IN + 1];  /* element offset of the row's start */
  LLVMValueRef splat[MLC_EW_MAX_IN + 1]; /* loaded once per row, for stride-0 inputs */
  ew_body body;
} ew_ctx;

/* A stride-0 input's value for this row, as a scalar. */
static LLVMValueRef row_scalar(cg *g, ew_ctx *c, int k) {
  if (c->cnst[k]) return cg_const(g, cg_ctype(g, c->cnst[k]->type.dtype, 1), c->cnst[k]->a.f);
  return cg_load(g, c->buf[k], c->base[k], 1, NULL);
}

static void ew_step(cg *g, ew_ctx *c, LLVMValueRef j, int lanes, LLVMValueRef mask) {
  LLVMValueRef x[MLC_EW_MAX_IN];
  for (int k = 1; k <= c->nin; k++) {
    if (c->inner_bcast[k]) x[k - 1] = lanes == 1 ? c->splat[k] : cg_splat(g, c->splat[k], lanes);
    else x[k - 1] = cg_load(g, c->buf[k], cg_iadd(g, c->base[k], j), lanes, mask);
  }
  LLVMValueRef y = c->body(g, x, c->in_dt);
  cg_store(g, c->buf[0], cg_iadd(g, c->base[0], j), y, mask);
}

bool cg_emit_ew(cg *g) {
  const mlc_node *n = g->n;
  ew_ctx c = {.nin = n->nin, .body = bodies[n->op]};
  if (!c.body || n->nin < 1 || n->nin > MLC_EW_MAX_IN) return cg_fail(g, "%s is not an elementwise op", mlc_ops[n->op].name);
  c.in_dt = g->f->nodes[n->in[0]].type.dtype;
  c.buf[0] = g->out;

  /* Strides over the output's dimensions: [0] out, [1..] inputs. */
  int64_t dims[MLC_MAX_RANK], st[MLC_EW_MAX_IN + 1][MLC_MAX_RANK];
  int r = mlc_ew_layout(g->f, n, dims, st);
  for (int i = 0; i < c.nin; i++) {
    const mlc_node *in = &g->f->nodes[n->in[i]];
    c.buf[i + 1] = g->in[i];
    if (in->op == MLC_OP_CONST) c.cnst[i + 1] = in;
  }
  if (r == 0) { /* a single element */
    r = 1;
    dims[0] = 1;
    for (int o = 0; o <= c.nin; o++) st[o][0] = o == 0;
  }
  int64_t len = dims[r - 1], nch = cg_ceil_div(len, CHUNK), rows = 1;
  for (int k = 0; k < r - 1; k++) rows *= dims[k];
  for (int o = 1; o <= c.nin; o++) c.inner_bcast[o] = st[o][r - 1] == 0 || c.cnst[o];
  g->items = rows * nch;

  cg_loop items;
  LLVMValueRef item = cg_items_begin(g, &items);
  LLVMValueRef row = item, ch = cg_i64(g, 0);
  if (nch > 1) {
    row = LLVMBuildUDiv(g->b, item, cg_i64(g, nch), "");
    ch = LLVMBuildURem(g->b, item, cg_i64(g, nch), "");
  }
  cg_unflatten(g, row, r - 1, dims, c.nin + 1, (const int64_t(*)[MLC_MAX_RANK])st, c.base);
  LLVMValueRef j0 = cg_imulc(g, ch, CHUNK);
  for (int o = 1; o <= c.nin; o++)
    if (c.inner_bcast[o]) c.splat[o] = row_scalar(g, &c, o);

  /* Whole vectors over the chunk, then the row's tail with a mask.  Every
   * chunk but the last is a multiple of the vector width. */
  int64_t last = len - (nch - 1) * CHUNK, tail = last % g->vw;
  LLVMValueRef vend = cg_i64(g, len - tail); /* where whole vectors end */
  if (nch > 1) {
    vend = cg_iadd(g, j0, cg_block_len(g, j0, len, CHUNK));
    if (tail) vend = LLVMBuildSelect(g->b, cg_eq(g, ch, nch - 1), cg_iaddc(g, vend, -tail), vend, "");
  }
  if (len >= g->vw) {
    cg_loop L;
    LLVMValueRef j = cg_for(g, &L, j0, vend, g->vw);
    ew_step(g, &c, j, g->vw, NULL);
    cg_end_for(g, &L, NULL);
  }
  if (tail) {
    cg_if_t t;
    cg_if(g, &t, nch > 1 ? cg_eq(g, ch, nch - 1) : LLVMConstInt(g->t_i1, 1, 0));
    LLVMValueRef j = cg_i64(g, len - tail);
    if (tail == 1) ew_step(g, &c, j, 1, NULL);
    else ew_step(g, &c, j, g->vw, cg_mask(g, g->vw, (int)tail));
    cg_endif(g, &t);
  }
  cg_end_for(g, &items, NULL);
  return true;
}

/* arange: out[i] = i, as i64. */
bool cg_emit_arange(cg *g) {
  int64_t n = mlc_type_numel(&g->n->type);
  g->items = 1;
  cg_loop items, L;
  cg_items_begin(g, &items);
  LLVMValueRef i = cg_for(g, &L, cg_i64(g, 0), cg_i64(g, n), 1);
  cg_store(g, g->out, i, cg_convert(g, i, MLC_DT_I64, g->n->type.dtype), NULL);
  cg_end_for(g, &L, NULL);
  cg_end_for(g, &items, NULL);
  return true;
}

/* dropout(x, step): Philox4x32-10 per element (ir/ops.def gives the
 * counter and key).  The key schedule is a compile-time constant (stream
 * and seed are attributes); the counter's high words come from the step,
 * read once per work item.  A work item is a chunk of CHUNK elements,
 * walked one element at a time: ten rounds of two 32x32->64 products each
 * outweigh the load and store. */
static LLVMValueRef philox_word0(cg *g, LLVMValueRef c[4], uint32_t k0, uint32_t k1) {
  LLVMValueRef m0 = LLVMConstInt(g->t_i64, 0xD2511F53u, false), m1 = LLVMConstInt(g->t_i64, 0xCD9E8D57u, false);
  LLVMValueRef x[4] = {c[0], c[1], c[2], c[3]};
  for (int r = 0; r < 10; r++) {
    LLVMValueRef p0 = LLVMBuildMul(g->b, LLVMBuildZExt(g->b, x[0], g->t_i64, ""), m0, "");
    LLVMValueRef p1 = LLVMBuildMul(g->b, LLVMBuildZExt(g->b, x[2], g->t_i64, ""), m1, "");
    LLVMValueRef hi0 = LLVMBuildTrunc(g->b, LLVMBuildLShr(g->b, p0, cg_i64(g, 32), ""), g->t_i32, "");
    LLVMValueRef lo0 = LLVMBuildTrunc(g->b, p0, g->t_i32, "");
    LLVMValueRef hi1 = LLVMBuildTrunc(g->b, LLVMBuildLShr(g->b, p1, cg_i64(g, 32), ""), g->t_i32, "");
    LLVMValueRef lo1 = LLVMBuildTrunc(g->b, p1, g->t_i32, "");
    LLVMValueRef y0 = LLVMBuildXor(g->b, LLVMBuildXor(g->b, hi1, x[1], ""), LLVMConstInt(g->t_i32, k0, false), "");
    LLVMValueRef y2 = LLVMBuildXor(g->b, LLVMBuildXor(g->b, hi0, x[3], ""), LLVMConstInt(g->t_i32, k1, false), "");
    x[0] = y0, x[1] = lo1, x[2] = y2, x[3] = lo0;
    k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
  }
  return x[0];
}

bool cg_emit_dropout(cg *g) {
  const mlc_node *n = g->n;
  int64_t numel = mlc_type_numel(&n->type);
  double p = n->a.f;
  double t = floor(p * 4294967296.0);
  uint32_t threshold = t >= 4294967295.0 ? 4294967295u : (uint32_t)t;
  g->items = cg_ceil_div(numel, CHUNK);
  cg_loop items, L;
  LLVMValueRef item = cg_items_begin(g, &items);
  cg_buf step_buf = g->in[1];
  LLVMValueRef step = cg_load(g, step_buf, cg_i64(g, 0), 1, NULL);
  LLVMValueRef c2 = LLVMBuildTrunc(g->b, step, g->t_i32, "");
  LLVMValueRef c3 = LLVMBuildTrunc(g->b, LLVMBuildLShr(g->b, step, cg_i64(g, 32), ""), g->t_i32, "");
  LLVMValueRef start = cg_imulc(g, item, CHUNK);
  LLVMValueRef end = cg_iadd(g, start, cg_block_len(g, start, numel, CHUNK));
  LLVMValueRef i = cg_for(g, &L, start, end, 1);
  LLVMValueRef c[4] = {LLVMBuildTrunc(g->b, i, g->t_i32, ""),
                       LLVMBuildTrunc(g->b, LLVMBuildLShr(g->b, i, cg_i64(g, 32), ""), g->t_i32, ""), c2, c3};
  LLVMValueRef w = philox_word0(g, c, (uint32_t)n->a.start, (uint32_t)n->a.end);
  LLVMValueRef keep = LLVMBuildICmp(g->b, LLVMIntUGE, w, LLVMConstInt(g->t_i32, threshold, false), "");
  LLVMValueRef x = cg_load(g, g->in[0], i, 1, NULL);
  LLVMValueRef scaled = LLVMBuildFMul(g->b, x, cg_const(g, g->t_f32, (float)(1.0 / (1.0 - p))), "");
  cg_store(g, g->out, i, LLVMBuildSelect(g->b, keep, scaled, cg_const(g, g->t_f32, 0.0), ""), NULL);
  cg_end_for(g, &L, NULL);
  cg_end_for(g, &items, NULL);
  return true;
}
