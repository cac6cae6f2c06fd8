/* Elementwise kernels: add/sub/mul/div with numpy broadcasting, the unary
 * ops, cast, broadcast (a copy to a larger shape) and the activation
 * gradients relu_grad, silu_grad, gelu_grad (g, x), with the arithmetic of
 * the CPU target (codegen/llvm/emit_ew.c), which follows PyTorch; issue 27's
 * abs, erf, pow, clamp_min/max, gelu_tanh (and its gradient), the
 * comparisons (bool results), where (three inputs) and arange (none).
 *
 * Each operand is described by strides over the output's dimensions (0
 * along a broadcast one), merged as far as every operand allows
 * (mlc_ew_layout, ir/ir.h: a same-shape add is one flat index and
 * x[b, s, d] + bias[d] two).  A thread computes
 * output elements i, i + stride, ... over a grid of at most MAX_BLOCKS
 * blocks, four at a time (one vector load per operand) when the innermost
 * dimension is a multiple of 4; CONST operands are folded into the code as
 * literals.
 */
#include "codegen/cstyle/cc.h"

#include <math.h>
#include <string.h>

#define THREADS 256
#define MAX_BLOCKS 65536

const char *cc_ew_expr(cc *c, int op, int in_dt, int out_dt, const mlc_attrs *a, const char *const *x) {
  bool fl = mlc_dtype_is_float((mlc_dtype)in_dt);
  switch (op) {
  case MLC_OP_ABS: return fl ? cc_fmt(c, "fabsf(%s)", x[0]) : cc_fmt(c, "(%s < 0 ? -%s : %s)", x[0], x[0], x[0]);
  case MLC_OP_ERF: return cc_fmt(c, "erff(%s)", x[0]);
  /* x * x for p = 2, as PyTorch; powf otherwise. */
  case MLC_OP_POW:
    if (!a) return NULL;
    if (a->f == 2) return cc_fmt(c, "(%s * %s)", x[0], x[0]);
    if (a->f == 0.5) return cc_fmt(c, "sqrtf(%s)", x[0]);
    return cc_fmt(c, "powf(%s, %s)", x[0], cc_flit(c, a->f));
  /* a NaN x stays NaN, as torch.clamp */
  case MLC_OP_CLAMP_MIN: return a ? cc_fmt(c, "(%s < %s ? %s : %s)", x[0], cc_flit(c, a->f), cc_flit(c, a->f), x[0]) : NULL;
  case MLC_OP_CLAMP_MAX: return a ? cc_fmt(c, "(%s > %s ? %s : %s)", x[0], cc_flit(c, a->f), cc_flit(c, a->f), x[0]) : NULL;
  case MLC_OP_GELU_TANH: return cc_fmt(c, "mlc_gelu_tanh(%s)", x[0]);
  case MLC_OP_GELU_TANH_GRAD: return cc_fmt(c, "mlc_gelu_tanh_grad(%s, %s)", x[0], x[1]);
  case MLC_OP_LT: return cc_fmt(c, "(%s < %s)", x[0], x[1]);
  case MLC_OP_LE: return cc_fmt(c, "(%s <= %s)", x[0], x[1]);
  case MLC_OP_EQ: return cc_fmt(c, "(%s == %s)", x[0], x[1]);
  case MLC_OP_NE: return cc_fmt(c, "(%s != %s)", x[0], x[1]);
  case MLC_OP_WHERE: return cc_fmt(c, "(%s ? %s : %s)", x[0], x[1], x[2]);
  case MLC_OP_ADD: return cc_fmt(c, "(%s + %s)", x[0], x[1]);
  case MLC_OP_SUB: return cc_fmt(c, "(%s - %s)", x[0], x[1]);
  case MLC_OP_MUL: return cc_fmt(c, "(%s * %s)", x[0], x[1]);
  /* Integer division truncates and gives 0 for a zero divisor, as the CPU target. */
  case MLC_OP_DIV:
    return fl ? cc_fmt(c, "(%s / %s)", x[0], x[1])
              : cc_fmt(c, "(%s == 0 ? (%s)0 : %s / %s)", x[1], cc_ctype(c, in_dt), x[0], x[1]);
  case MLC_OP_NEG: return cc_fmt(c, "(-%s)", x[0]);
  case MLC_OP_EXP: return cc_fmt(c, "expf(%s)", x[0]);
  case MLC_OP_LOG: return cc_fmt(c, "logf(%s)", x[0]);
  case MLC_OP_SQRT: return cc_fmt(c, "sqrtf(%s)", x[0]);
  case MLC_OP_RSQRT: return cc_fmt(c, "(1.f / sqrtf(%s))", x[0]);
  case MLC_OP_TANH: return cc_fmt(c, "tanhf(%s)", x[0]);
  case MLC_OP_SIGMOID: return cc_fmt(c, "mlc_sigmoid(%s)", x[0]);
  /* x < 0 ? 0 : x lets NaN through, as torch.relu does. */
  case MLC_OP_RELU: return cc_fmt(c, "(%s < 0 ? (%s)0 : %s)", x[0], cc_ctype(c, in_dt), x[0]);
  case MLC_OP_SILU: return cc_fmt(c, "mlc_silu(%s)", x[0]); /* each prelude's */
  case MLC_OP_GELU: return cc_fmt(c, "(0.5f * %s * (1.f + erff(%s * 0.707106781f)))", x[0], x[0]);
  case MLC_OP_BROADCAST: return x[0];
  case MLC_OP_CAST:
    if (out_dt == MLC_DT_BOOL) return cc_fmt(c, "(%s != 0)", x[0]);
    return cc_fmt(c, "(%s)(%s)", cc_ctype(c, out_dt), x[0]);
  /* threshold_backward: x <= 0 ? 0 : g. */
  case MLC_OP_RELU_GRAD: return cc_fmt(c, "(%s <= 0.f ? 0.f : %s)", x[1], x[0]);
  /* silu_backward: g * s * (1 + x (1 - s)), s = sigmoid(x). */
  case MLC_OP_SILU_GRAD:
    return cc_fmt(c, "mlc_silu_grad(%s, %s)", x[0], x[1]);
  /* exact GeluBackward: g * (Phi(x) + x phi(x)). */
  case MLC_OP_GELU_GRAD:
    return cc_fmt(c, "mlc_gelu_grad(%s, %s)", x[0], x[1]);
  default: return NULL;
  }
}

/* A CONST operand's value as a literal of its compute type. */
static const char *const_lit(cc *c, const mlc_node *k) {
  if (mlc_dtype_is_float((mlc_dtype)k->type.dtype)) return cc_flit(c, k->a.f);
  if (k->type.dtype == MLC_DT_I64) return cc_fmt(c, "%lld$ll", (long long)k->a.f);
  return cc_fmt(c, "%lld", (long long)k->a.f);
}

bool cc_emit_ew(cc *c) {
  const mlc_node *n = c->n;
  int nin = n->nin;
  if (nin < 1 || nin > MLC_EW_MAX_IN) return cc_bug(c, "%s is not an elementwise op", mlc_ops[n->op].name);
  /* where's operands are its branches; its condition is bool */
  int in_dt = cc_in(c, n->op == MLC_OP_WHERE ? 1 : 0)->dtype, out_dt = n->type.dtype;
  const mlc_type *ot = &n->type;
  int64_t dims[MLC_MAX_RANK], st[MLC_EW_MAX_IN + 1][MLC_MAX_RANK];
  int r = mlc_ew_layout(c->f, n, dims, st);
  const mlc_node *cnst[MLC_EW_MAX_IN + 1] = {0};
  for (int i = 0; i < nin; i++)
    if (c->f->nodes[n->in[i]].op == MLC_OP_CONST) cnst[i + 1] = &c->f->nodes[n->in[i]];
  /* Four elements per thread when the innermost dimension allows it: each
   * operand then is either contiguous along it (one 4-wide load) or
   * constant along it (one scalar load). */
  bool vec = r >= 1 && dims[r - 1] % 4 == 0;
  for (int o = 1; o <= nin && vec; o++) vec = cnst[o] || st[o][r - 1] == 0 || st[o][r - 1] == 1;
  int V = vec ? 4 : 1;
  int64_t total = mlc_type_numel(ot), units = total / V;
  int64_t blocks = cc_ceil_div(units, THREADS);
  if (blocks > MAX_BLOCKS) blocks = MAX_BLOCKS;
  cc_begin(c, (uint64_t)blocks, THREADS, 0);
  /* On a shard (fsdp's clipping: a mul of a reduce-scatter's rows), the
   * rank's rows bound it, as in emit_misc.c's gs_begin. */
  if (c->sharded && (ot->rank != 2 || ot->dim[1] != MLC_SHARD_ROW)) return cc_bug(c, "a sharded %s that is not [rows, %d]",
                                                                                 mlc_ops[n->op].name, MLC_SHARD_ROW);
  const char *bound = c->sharded ? cc_fmt(c, "($i64)rows * %d$ll", MLC_SHARD_ROW / V) : cc_fmt(c, "%lld$ll", (long long)units);
  cc_printf(c, "  for ($i64 q = ($i64)$bid * %d + $tid; q < %s; q += %lld$ll) {\n", THREADS, bound, (long long)blocks * THREADS);
  cc_printf(c, "    $i64 i = q * %d;\n", V);
  const char *x[MLC_EW_MAX_IN];
  for (int o = 1; o <= nin; o++) {
    if (cnst[o]) {
      x[o - 1] = const_lit(c, cnst[o]);
      continue;
    }
    /* The operand's offset: the output's index decomposed over the merged
     * dimensions, each coordinate times the operand's stride. */
    bool same = true;
    for (int k = 0; k < r; k++) same &= st[o][k] == st[0][k];
    cc_printf(c, "    $i64 o%d = ", o);
    if (same) {
      cc_printf(c, "i;\n");
    } else {
      bool any = false;
      int64_t below = 1;
      for (int k = r - 1; k >= 0; k--) {
        if (st[o][k]) {
          cc_printf(c, "%s(i / %lld$ll %% %lld$ll) * %lld$ll", any ? " + " : "", (long long)below, (long long)dims[k],
                    (long long)st[o][k]);
          any = true;
        }
        below *= dims[k];
      }
      cc_printf(c, "%s;\n", any ? "" : "0");
    }
    const mlc_type *it = cc_in(c, o - 1);
    const char *in = cc_fmt(c, "in%d", o - 1);
    if (vec && st[o][r - 1] == 1) {
      cc_printf(c, "    mlc_x4<%s> v%d = *(const %smlc_x4<%s> *)(%s + o%d);\n", cc_stype(c, it->dtype), o, c->t->dev,
                cc_stype(c, it->dtype), in, o);
      x[o - 1] = cc_load(c, cc_fmt(c, "v%d.v", o), it->dtype, "k");
    } else {
      cc_printf(c, "    %s x%d = %s;\n", cc_ctype(c, it->dtype), o, cc_load(c, in, it->dtype, cc_fmt(c, "o%d", o)));
      x[o - 1] = cc_fmt(c, "x%d", o);
    }
  }
  const char *y = cc_ew_expr(c, n->op, in_dt, out_dt, &n->a, x);
  if (!y) return cc_bug(c, "%s is not an elementwise op", mlc_ops[n->op].name);
  if (vec) {
    cc_printf(c, "    mlc_x4<%s> r;\n#pragma unroll\n    for (int k = 0; k < 4; k++) %s\n", cc_stype(c, out_dt),
              cc_store(c, "r.v", out_dt, "k", y));
    cc_printf(c, "    *(%smlc_x4<%s> *)(out + i) = r;\n  }\n", c->t->dev, cc_stype(c, out_dt));
  } else {
    cc_printf(c, "    %s\n  }\n", cc_store(c, "out", out_dt, "i", y));
  }
  cc_end(c);
  return true;
}

/* arange: out[i] = i. */
bool cc_emit_arange(cc *c) {
  int64_t total = mlc_type_numel(&c->n->type), blocks = cc_ceil_div(total, THREADS);
  if (blocks > MAX_BLOCKS) blocks = MAX_BLOCKS;
  cc_begin(c, (uint64_t)blocks, THREADS, 0);
  cc_printf(c, "  for ($i64 i = ($i64)$bid * %d + $tid; i < %lld$ll; i += %lld$ll) out[i] = (%s)i;\n",
            THREADS, (long long)total, (long long)blocks * THREADS, cc_stype(c, c->n->type.dtype));
  cc_end(c);
  return true;
}

/* dropout(x, step): element i is kept where the first word of Philox4x32-10
 * (mlc_philox0) of counter (i low, i high, step low, step high) under key
 * (stream, seed), the attributes, is at least p 2^32, and scaled by
 * 1 / (1 - p): the CPU target's mask (codegen/llvm/emit_ew.c), bit for bit,
 * so that a model drops the same elements on every target. */
bool cc_emit_dropout(cc *c) {
  const mlc_node *n = c->n;
  int64_t total = mlc_type_numel(&n->type), blocks = cc_ceil_div(total, THREADS);
  if (blocks > MAX_BLOCKS) blocks = MAX_BLOCKS;
  double p = n->a.f, t = floor(p * 4294967296.0);
  unsigned threshold = t >= 4294967295.0 ? 4294967295u : (unsigned)t;
  int dt = n->type.dtype;
  cc_begin(c, (uint64_t)blocks, THREADS, 0);
  cc_printf(c, "  const $i64 step = in1[0];\n");
  cc_printf(c, "  const unsigned s0 = (unsigned)step, s1 = (unsigned)(step >> 32);\n");
  cc_printf(c, "  for ($i64 i = ($i64)$bid * %d + $tid; i < %lld$ll; i += %lld$ll) {\n", THREADS, (long long)total,
            (long long)blocks * THREADS);
  cc_printf(c, "    const bool keep = mlc_philox0((unsigned)i, (unsigned)(i >> 32), s0, s1, %uu, %uu) >= %uu;\n",
            (unsigned)n->a.start, (unsigned)n->a.end, threshold);
  cc_printf(c, "    %s\n  }\n",
            cc_store(c, "out", dt, "i", cc_fmt(c, "(keep ? %s * %s : 0.f)", cc_load(c, "in0", dt, "i"), cc_flit(c, (float)(1.0 / (1.0 - p))))));
  cc_end(c);
  return true;
}
