/* Attention and its gradient on Metal, flash style: no sq x sk matrix in
 * device memory.
 *
 * The kernels are templates in cc_attention_prelude_msl
 * (codegen/metal/attention.metal); the launches emitted here instantiate
 * them with every shape as a template argument.  All arithmetic is f32 on
 * the SIMT lanes (bf16/f16 widened on load, rounded once at the store);
 * every threadgroup is 4 SIMD groups (128 threads), each owning RPW rows
 * of the threadgroup's block, the other operand streaming through
 * threadgroup memory BS rows at a time.  RPW and BS are the largest that
 * keep the threadgroup memory within 32 KiB, Metal's guaranteed size.
 *
 * attention(q, k, v): one threadgroup per (batch * head, 4 RPW query rows),
 * online softmax over key blocks (mlc_attn_fwd_msl).
 *
 * attention_grad(g, q, k, v) -> [3, b, h, s, d] (dq, dk, dv), three
 * launches, deterministic (no atomics):
 *   0. the forward again per query block, writing each row's log-sum-exp
 *      and D = dO . o into scratch (2 * b * h * s floats);
 *   1. per key block: P and dS again over all query rows; dk and dv;
 *   2. per query block: P and dS again over the keys; dq.
 */
#include <stdint.h>
#include <stdio.h>

#include "codegen/metal/metal_cc.h"

#define ATTN_SMEM 32768 /* bytes of threadgroup memory every Metal GPU has */

typedef struct {
  int rpw, bs;
} attn_cfg;

/* Candidates, best first: more rows per threadgroup and longer streamed
 * blocks mean fewer loads per row. */
static const attn_cfg attn_cands[] = {{4, 32}, {2, 32}, {4, 16}, {2, 16}, {1, 32}, {1, 16},
                                      {2, 8},  {1, 8},  {1, 4},  {1, 2},  {1, 1}};

enum { K_FWD, K_KV, K_Q };

static int64_t attn_smem(int kind, attn_cfg g, int64_t d, int64_t dv) {
  int64_t own = 4 * (int64_t)g.rpw * d, ld = (d > dv ? d : dv) + 1, f;
  switch (kind) {
  case K_FWD: f = own + g.bs * ld; break;
  case K_KV: f = 2 * own + 2 * g.bs * (d + 1) + 2 * g.bs; break;
  default: f = 2 * own + 2 * g.bs * (d + 1); break;
  }
  return (4 * f + 15) / 16 * 16;
}

static bool attn_pick(cc *c, int kind, int64_t d, int64_t dv, attn_cfg *out) {
  for (size_t i = 0; i < sizeof attn_cands / sizeof *attn_cands; i++)
    if (attn_smem(kind, attn_cands[i], d, dv) <= ATTN_SMEM) {
      *out = attn_cands[i];
      return true;
    }
  return cc_fail(c, "head dims %lld and %lld are too large for the Metal attention kernels", (long long)d, (long long)dv);
}

static const char *const TAIL = "mlc_smem, blockIdx.x, threadIdx.x, simd_id, simd_lane);\n";

static bool emit_fwd(cc *c) {
  const mlc_type *qt = cc_in(c, 0), *kt = cc_in(c, 1), *vt = cc_in(c, 2);
  const char *T = cc_stype(c, qt->dtype);
  int64_t BH = qt->dim[0] * qt->dim[1], SQ = qt->dim[2], SK = kt->dim[2], D = qt->dim[3], DV = vt->dim[3];
  int causal = c->n->a.causal != 0;
  if (BH * SQ > INT32_MAX / 2 || BH * SK > INT32_MAX / 2 || SK < 1 || D < 1 || DV < 1)
    return cc_fail(c, "attention of %lld x %lld query rows and %lld keys (head dims %lld, %lld) is out of range for the Metal kernel",
                   (long long)BH, (long long)SQ, (long long)SK, (long long)D, (long long)DV);
  if (BH * SQ == 0) { /* nothing to write */
    cc_begin(c, 1, 32, 0);
    cc_end(c);
    return true;
  }
  attn_cfg g;
  if (!attn_pick(c, K_FWD, D, DV, &g)) return false;
  cc_begin(c, (uint64_t)(BH * cc_ceil_div(SQ, 4 * g.rpw)), 128, (uint32_t)attn_smem(K_FWD, g, D, DV));
  cc_printf(c, "  mlc_attn_fwd_msl<%s, %lld, %lld, %lld, %lld, %lld, %d, 0, %d, %d>(in0, in1, in2, out, in0, (device float *)scratch, %s, %s",
            T, (long long)D, (long long)DV, (long long)BH, (long long)SQ, (long long)SK, causal, g.rpw, g.bs,
            cc_flit(c, c->n->a.f), TAIL);
  cc_end(c);
  return true;
}

static bool emit_grad(cc *c) {
  const mlc_type *gt = cc_in(c, 0);
  const char *T = cc_stype(c, gt->dtype);
  int64_t BH = gt->dim[0] * gt->dim[1], S = gt->dim[2], D = gt->dim[3];
  int causal = c->n->a.causal != 0;
  if (BH * S > INT32_MAX / 2 || D < 1)
    return cc_fail(c, "attention_grad of %lld x %lld rows (head dim %lld) is out of range for the Metal kernel",
                   (long long)BH, (long long)S, (long long)D);
  if (BH * S == 0) {
    cc_begin(c, 1, 32, 0);
    cc_end(c);
    return true;
  }
  const char *sc = cc_flit(c, c->n->a.f);
  attn_cfg g;
  c->scratch = (uint64_t)(8 * BH * S); /* lse [BH * S], then dsum [BH * S] */
  if (!attn_pick(c, K_FWD, D, D, &g)) return false;
  cc_begin(c, (uint64_t)(BH * cc_ceil_div(S, 4 * g.rpw)), 128, (uint32_t)attn_smem(K_FWD, g, D, D));
  cc_printf(c, "  mlc_attn_fwd_msl<%s, %lld, %lld, %lld, %lld, %lld, %d, 1, %d, %d>(in1, in2, in3, out, in0, (device float *)scratch, %s, %s",
            T, (long long)D, (long long)D, (long long)BH, (long long)S, (long long)S, causal, g.rpw, g.bs, sc, TAIL);
  cc_end(c);
  if (!attn_pick(c, K_KV, D, D, &g)) return false;
  cc_begin(c, (uint64_t)(BH * cc_ceil_div(S, 4 * g.rpw)), 128, (uint32_t)attn_smem(K_KV, g, D, D));
  cc_printf(c, "  mlc_attn_bwd_kv_msl<%s, %lld, %lld, %lld, %d, %d, %d>(in0, in1, in2, in3, out, (device const float *)scratch, %s, %s",
            T, (long long)D, (long long)BH, (long long)S, causal, g.rpw, g.bs, sc, TAIL);
  cc_end(c);
  if (!attn_pick(c, K_Q, D, D, &g)) return false;
  cc_begin(c, (uint64_t)(BH * cc_ceil_div(S, 4 * g.rpw)), 128, (uint32_t)attn_smem(K_Q, g, D, D));
  cc_printf(c, "  mlc_attn_bwd_q_msl<%s, %lld, %lld, %lld, %d, %d, %d>(in0, in1, in2, in3, out, (device const float *)scratch, %s, %s",
            T, (long long)D, (long long)BH, (long long)S, causal, g.rpw, g.bs, sc, TAIL);
  cc_end(c);
  return true;
}

/* attention_kv(q, k, v, k_cache, v_cache, pos), one launch of
 * mlc_attn_kv_msl: a threadgroup of KV_W SIMD groups per (batch * head,
 * query row of the chunk).  Threadgroup memory: 2 KV_W + KV_W D floats. */
#define KV_W 4
#define KV_MAX_D 256

bool cc_attn_kv_fits_msl(int64_t d, char *why, size_t whyn) {
  if (d >= 1 && d <= KV_MAX_D) return true;
  snprintf(why, whyn, "attention_kv: heads of dim %lld; the metal kernel takes up to %d", (long long)d, KV_MAX_D);
  return false;
}

bool cc_emit_attention_kv_msl(cc *c) {
  const mlc_type *qt = cc_in(c, 0), *ct = cc_in(c, 3);
  int64_t BH = qt->dim[0] * qt->dim[1], SQ = qt->dim[2], SK = ct->dim[2], D = qt->dim[3];
  char why[160];
  if (!cc_attn_kv_fits_msl(D, why, sizeof why)) return cc_fail(c, "%s", why);
  if (BH * SQ > INT32_MAX || SK * D > INT32_MAX || SQ > SK || SQ < 1)
    return cc_fail(c, "attention_kv of %lld x %lld rows over %lld cached is out of range for the Metal kernel", (long long)BH,
                   (long long)SQ, (long long)SK);
  const char *T = cc_stype(c, qt->dtype);
  cc_begin(c, (uint64_t)(BH * SQ), 32 * KV_W, (uint32_t)(4 * (2 * KV_W + KV_W * D)));
  cc_printf(c, "  mlc_attn_kv_msl<%s, %lld, %lld, %lld, %d>(in0, in1, in2, (device %s *)in3, (device %s *)in4, in5, out, %s, %s", T,
            (long long)D, (long long)SQ, (long long)SK, KV_W, T, T, cc_flit(c, c->n->a.f * 1.4426950408889634), TAIL);
  cc_end(c);
  return true;
}

bool cc_emit_attention_msl(cc *c) {
  switch (c->n->op) {
  case MLC_OP_ATTENTION: return emit_fwd(c);
  case MLC_OP_ATTENTION_GRAD: return emit_grad(c);
  default: return cc_bug(c, "cc_emit_attention_msl: not an attention op");
  }
}
