/* embedding and its gradient, cross_entropy and its gradient, and the
 * optimizer updates (adamw, sgd), as the CPU target computes them
 * (codegen/llvm/emit_layout.c, emit_reduce.c, emit_optim.c).
 *
 * embedding: out[i, :] = weight[idx[i], :], a row of zeros for an index
 * outside [0, v).  A grid-stride copy of 16-byte vectors where the row
 * length allows.
 *
 * embedding_grad: dw[k, :] = sum of g[t, :] over the tokens t with
 * idx[t] == k, in token order, so the result is deterministic (and the same
 * bits as the CPU target's) with no float atomics and no sort:
 *   launch 0: head[k] = INT_MAX, last[k] = -1 for every row k (int scratch)
 *   launch 1: head[k] and last[k] = the first and the last token with
 *             index k (atomicMin and atomicMax on ints, whose results do not
 *             depend on the order)
 *   launch 2: a block per (row, column chunk): a row no token names is
 *             written as zeros; otherwise the block walks the indices from
 *             head[k] to last[k] in chunks of 256, compacts the matches in token
 *             order (ballot + prefix over warps) and adds those rows of g in
 *             that order in f32, then stores once.
 *   Indices outside [0, v) add nothing.
 *
 * cross_entropy: mean over rows of logsumexp(row) - row[target]; a target
 * outside [0, C) is skipped and left out of the mean.  Launch 0: a block (a
 * warp for short rows) per row, one pass with an online max and sum of
 * exp, writes the row's loss and whether it counts to scratch; launch 1:
 * one block adds them in f64 in a fixed order.
 *
 * cross_entropy_grad: (softmax(row) - onehot(target)) * g / n, n the number
 * of valid targets, zeros for the other rows.  Launch 0 counts the valid
 * targets (one block); launch 1 is a block per row: the online max and sum,
 * then a second pass over the row that writes the gradient.
 *
 * adamw / sgd: a grid-stride elementwise kernel over the parameter, which
 * is updated in place together with its state (inputs 0, 2, 3); the token
 * output is left alone.  Formulas as torch.optim (see emit_optim.c); the
 * bias corrections are computed in f64 by every thread from the step.
 */
#include "codegen/cstyle/cc.h"

#define THREADS 256
#define MAX_BLOCKS 4096 /* grid-stride kernels */
#define EG_MAX_IT 4     /* embedding_grad: vectors per thread per block */
/* Rows of the cross-entropy kernels: a warp per row up to 128 vectors, else
 * a block of THREADS.  (1024 threads per row, to keep fewer rows in flight
 * so that cross_entropy_grad's second pass hits L2, measured no better on
 * the H200 for [8192, 32000] bf16 grad and 25% slower for the forward.) */

static const char *red(cc *c, const cc_rowplan *rp, const char *op, const char *v) {
  return rp->tpr > 32 ? cc_fmt(c, "mlc_block_%s(%s, sh)", op, v) : cc_fmt(c, "mlc_warp_%s(%s)", op, v);
}

/* Index type and grid of a grid-stride loop over n items. */
static const char *gs_type(const cc *c, int64_t n) { return n > 0xffffffffll ? c->t->i64 : "unsigned"; }
static int64_t gs_grid(int64_t n) {
  int64_t g = cc_ceil_div(n, THREADS);
  return g > MAX_BLOCKS ? MAX_BLOCKS : g < 1 ? 1 : g;
}
static void gs_begin(cc *c, const char *var, int64_t n) {
  const char *IT = gs_type(c, n);
  /* On a shard (AdamW's update of one), the rank's rows bound it: n counts
   * the items of the nominal [R, 4096], so a row holds n / R of them. */
  const char *bound = c->sharded ? cc_fmt(c, "(%s)(rows * %lldull)", IT, (long long)(n * MLC_SHARD_ROW / mlc_type_numel(cc_in(c, 0))))
                                 : cc_fmt(c, "(%s)%lld$ll", IT, (long long)n);
  cc_printf(c, "  for (%s %s = (%s)$bid * %d + $tid; %s < %s; %s += (%s)$gdim * %d) {\n", IT, var, IT,
            THREADS, var, bound, var, IT, THREADS);
}

/* ---- embedding ---- */

static bool emit_embedding(cc *c) {
  const mlc_type *wt = cc_in(c, 0), *it = cc_in(c, 1);
  int dt = wt->dtype;
  int64_t V = wt->dim[0], D = wt->dim[1], N = mlc_type_numel(it);
  int vec = cc_pick_vec(D, mlc_dtype_size((mlc_dtype)dt));
  int64_t nv = D / vec, total = N * nv;
  const char *VT = cc_vtype(vec * mlc_dtype_size((mlc_dtype)dt));
  if (total == 0) return cc_fail(c, "empty embedding");
  cc_begin(c, (uint64_t)gs_grid(total), THREADS, 0);
  cc_printf(c, "  const %s%s *w = (const %s%s *)in0;\n  %s%s *o = (%s%s *)out;\n", c->t->dev, VT, c->t->dev, VT, c->t->dev, VT,
            c->t->dev, VT);
  gs_begin(c, "e", total);
  cc_printf(c, "    const %s t = e / %lldu, v = e %% %lldu;\n", gs_type(c, total), (long long)nv, (long long)nv);
  cc_printf(c, "    const $i64 k = ($i64)in1[t];\n    %s u = {};\n", VT);
  cc_printf(c, "    if ((unsigned $i64)k < %lldull) u = w[k * %lld$ll + v];\n", (long long)V, (long long)nv);
  cc_printf(c, "    o[($i64)t * %lld$ll + v] = u;\n  }\n", (long long)nv);
  cc_end(c);
  return true;
}

static bool emit_embedding_grad(cc *c) {
  const mlc_node *n = c->n;
  const mlc_type *it = cc_in(c, 1);
  int dt = n->type.dtype;
  int64_t V = n->type.dim[0], D = n->type.dim[1], N = mlc_type_numel(it);
  if (N > 0x7fffffffll || V > 0x7fffffffll) return cc_fail(c, "embedding_grad with %lld indices into %lld rows is too large",
                                                          (long long)N, (long long)V);
  int vec = cc_pick_vec(D, mlc_dtype_size((mlc_dtype)dt));
  int64_t nv = D / vec, nit = cc_ceil_div(nv, THREADS);
  if (nit > EG_MAX_IT) nit = EG_MAX_IT;
  int64_t nch = cc_ceil_div(nv, THREADS * nit);
  if (V * nch > 0x7fffffffll) return cc_fail(c, "embedding_grad grid too large");
  c->scratch = (uint64_t)V * 8; /* head [V], then last [V] */

  cc_begin(c, (uint64_t)gs_grid(V), THREADS, 0);
  gs_begin(c, "k", V);
  cc_printf(c, "    ((%sint *)scratch)[k] = 0x7fffffff;\n    ((%sint *)scratch)[%lld$ll + k] = -1;\n  }\n", c->t->dev, c->t->dev,
            (long long)V);
  cc_end(c);

  cc_begin(c, (uint64_t)gs_grid(N > 0 ? N : 1), THREADS, 0);
  gs_begin(c, "t", N > 0 ? N : 1);
  if (N > 0) {
    cc_printf(c, "    const $i64 k = ($i64)in1[t];\n");
    cc_printf(c, "    if (k >= 0 && k < %lld$ll) { atomicMin((%sint *)scratch + k, (int)t); atomicMax((%sint *)scratch + %lld$ll + k, (int)t); }\n",
              (long long)V, c->t->dev, c->t->dev, (long long)V);
  }
  cc_printf(c, "  }\n");
  cc_end(c);

  cc_begin(c, (uint64_t)(V * nch), THREADS, 0);
  cc_printf(c, "  const $i64 k = $bid / %lld;\n  const int ch = $bid %% %lld;\n", (long long)nch, (long long)nch);
  cc_printf(c, "  const int h = ((const %sint *)scratch)[k], last = ((const %sint *)scratch)[%lld$ll + k];\n", c->t->dev, c->t->dev,
            (long long)V);
  cc_printf(c, "  float acc[%lld];\n#pragma unroll\n  for (int i = 0; i < %lld; i++) acc[i] = 0.f;\n", (long long)(nit * vec),
            (long long)(nit * vec));
  cc_printf(c, "  if (h != 0x7fffffff) {\n");
  cc_printf(c, "    $shared int list[%d];\n    $shared int wc[%d];\n", THREADS, THREADS / 32);
  cc_printf(c, "    const int lane = $tid & 31, w = $tid >> 5;\n");
  cc_printf(c, "    for (int t0 = h; t0 <= last; t0 += %d) {\n", THREADS);
  cc_printf(c, "      const int t = t0 + $tid;\n");
  cc_printf(c, "      const bool m = t < %lld && ($i64)in1[t] == k;\n", (long long)N);
  cc_printf(c, "      const unsigned b = __ballot_sync(0xffffffffu, m);\n");
  cc_printf(c, "      if (lane == 0) wc[w] = __popc(b);\n      $barrier;\n");
  cc_printf(c, "      int off = 0, tot = 0;\n#pragma unroll\n      for (int j = 0; j < %d; j++) { off += j < w ? wc[j] : 0; tot += wc[j]; }\n",
            THREADS / 32);
  cc_printf(c, "      if (m) list[off + __popc(b & ((1u << lane) - 1u))] = t;\n      $barrier;\n");
  cc_printf(c, "      for (int j = 0; j < tot; j++) {\n        const $i64 tt = list[j];\n");
  cc_printf(c, "#pragma unroll\n        for (int it = 0; it < %lld; it++) {\n", (long long)nit);
  cc_printf(c, "          const $i64 v = ($i64)ch * %lld + it * %d + $tid;\n", (long long)(nit * THREADS), THREADS);
  cc_printf(c, "          if (v < %lld$ll) {\n      float ga[%d];\n", (long long)nv, vec);
  cc_vec_load(c, vec, dt, "ga", "0", "in0", cc_fmt(c, "tt * %lld$ll + v * %d", (long long)D, vec));
  cc_printf(c, "#pragma unroll\n            for (int q = 0; q < %d; q++) acc[it * %d + q] += ga[q];\n          }\n        }\n      }\n",
            vec, vec);
  cc_printf(c, "      $barrier;\n    }\n  }\n");
  cc_printf(c, "#pragma unroll\n  for (int it = 0; it < %lld; it++) {\n", (long long)nit);
  cc_printf(c, "    const $i64 v = ($i64)ch * %lld + it * %d + $tid;\n", (long long)(nit * THREADS), THREADS);
  cc_printf(c, "    if (v < %lld$ll) {\n      float o[%d];\n#pragma unroll\n      for (int q = 0; q < %d; q++) o[q] = acc[it * %d + q];\n",
            (long long)nv, vec, vec, vec);
  cc_vec_store(c, vec, dt, "out", cc_fmt(c, "k * %lld$ll + v * %d", (long long)D, vec), "o");
  cc_printf(c, "    }\n  }\n");
  cc_end(c);
  return true;
}

/* ---- cross_entropy ---- */

/* Online max m and sum s of exp(x - m) over the row xr, then the row's
 * M and S (every thread of the row gets them). */
static void online_lse(cc *c, const cc_rowplan *rp, int dt) {
  cc_printf(c, "  float m = -MLC_INF, s = 0.f;\n");
  cc_printf(c, "  for (int v = lane; v < %lld; v += %d) {\n    {\n      float xa[%d];\n", (long long)rp->nv, rp->tpr, rp->vec);
  cc_vec_load(c, rp->vec, dt, "xa", "0", "xr", cc_fmt(c, "v * %d", rp->vec));
  cc_printf(c, "      float vm = xa[0];\n#pragma unroll\n      for (int q = 1; q < %d; q++) vm = fmaxf(vm, xa[q]);\n", rp->vec);
  cc_printf(c, "      if (vm > m) { s *= expf(m - vm); m = vm; }\n");
  cc_printf(c, "      if (m != -MLC_INF) {\n#pragma unroll\n        for (int q = 0; q < %d; q++) s += expf(xa[q] - m);\n      }\n",
            rp->vec);
  cc_printf(c, "    }\n  }\n");
  cc_printf(c, "  const float M = %s;\n", red(c, rp, "max", "m"));
  cc_printf(c, "  s = m == -MLC_INF ? 0.f : s * expf(m - M);\n");
  cc_printf(c, "  const float S = %s;\n", red(c, rp, "sum", "s"));
}

static bool emit_cross_entropy(cc *c) {
  const mlc_type *lt = cc_in(c, 0);
  int dt = lt->dtype;
  int64_t C = lt->dim[lt->rank - 1], R = C ? mlc_type_numel(lt) / C : 0;
  if (R == 0 || C == 0) return cc_fail(c, "empty cross_entropy");
  if (C > 0x7fffffffll) return cc_fail(c, "rows too long");
  cc_rowplan rp;
  cc_plan_rows(&rp, R, C, dt, 0);
  int64_t grid = cc_ceil_div(R, rp.rpb);
  if (grid > 0x7fffffffll) return cc_fail(c, "too many rows");
  c->scratch = (uint64_t)R * 8;

  cc_begin(c, (uint64_t)grid, THREADS, 0);
  cc_row_head(c, &rp);
  cc_printf(c, "  const %s%s *xr = in0 + row * %lld$ll;\n", c->t->dev, cc_stype(c, dt), (long long)C);
  online_lse(c, &rp, dt);
  cc_printf(c, "  if (lane == 0) {\n    const $i64 t = ($i64)in1[row];\n");
  cc_printf(c, "    const bool ok = t >= 0 && t < %lld$ll;\n", (long long)C);
  cc_printf(c, "    ((%sfloat *)scratch)[row] = ok ? (M + logf(S)) - to_f32(xr[t]) : 0.f;\n", c->t->dev);
  cc_printf(c, "    ((%sint *)scratch)[%lld$ll + row] = ok;\n  }\n", c->t->dev, (long long)R);
  cc_end(c);

  cc_begin(c, 1, THREADS, 0);
  cc_printf(c, "  const %sfloat *loss = (const %sfloat *)scratch;\n  const %sint *ok = (const %sint *)scratch + %lld$ll;\n", c->t->dev,
            c->t->dev, c->t->dev, c->t->dev, (long long)R);
  cc_printf(c, "  $f64 s = 0.0;\n  $i64 n = 0;\n");
  cc_printf(c, "  for ($i64 r = $tid; r < %lld$ll; r += %d) if (ok[r]) { s += ($f64)loss[r]; n++; }\n", (long long)R,
            THREADS);
  cc_printf(c, "  $shared $f64 ss[%d];\n  $shared $i64 sn[%d];\n", THREADS, THREADS);
  cc_printf(c, "  ss[$tid] = s; sn[$tid] = n;\n  $barrier;\n");
  cc_printf(c, "  for (int o = %d; o > 0; o >>= 1) {\n", THREADS / 2);
  cc_printf(c, "    if ((int)$tid < o) { ss[$tid] += ss[$tid + o]; sn[$tid] += sn[$tid + o]; }\n");
  cc_printf(c, "    $barrier;\n  }\n");
  cc_printf(c, "  if ($tid == 0) out[0] = (float)(ss[0] / ($f64)sn[0]);\n");
  cc_end(c);
  return true;
}

static bool emit_cross_entropy_grad(cc *c) {
  const mlc_node *n = c->n;
  const mlc_type *lt = cc_in(c, 1);
  int dt = lt->dtype, odt = n->type.dtype;
  int64_t C = lt->dim[lt->rank - 1], R = C ? mlc_type_numel(lt) / C : 0;
  if (R == 0 || C == 0) return cc_fail(c, "empty cross_entropy_grad");
  if (C > 0x7fffffffll) return cc_fail(c, "rows too long");
  cc_rowplan rp;
  cc_plan_rows(&rp, R, C, dt, 0);
  int64_t grid = cc_ceil_div(R, rp.rpb);
  if (grid > 0x7fffffffll) return cc_fail(c, "too many rows");
  c->scratch = 8;

  cc_begin(c, 1, THREADS, 0);
  cc_printf(c, "  $i64 n = 0;\n");
  cc_printf(c, "  for ($i64 r = $tid; r < %lld$ll; r += %d) { const $i64 t = ($i64)in2[r]; n += t >= 0 && t < %lld$ll; }\n",
            (long long)R, THREADS, (long long)C);
  cc_printf(c, "  $shared $i64 sn[%d];\n  sn[$tid] = n;\n  $barrier;\n", THREADS);
  cc_printf(c, "  for (int o = %d; o > 0; o >>= 1) {\n", THREADS / 2);
  cc_printf(c, "    if ((int)$tid < o) sn[$tid] += sn[$tid + o];\n    $barrier;\n  }\n");
  cc_printf(c, "  if ($tid == 0) ((%s$i64 *)scratch)[0] = sn[0];\n", c->t->dev);
  cc_end(c);

  cc_begin(c, (uint64_t)grid, THREADS, 0);
  cc_row_head(c, &rp);
  cc_printf(c, "  const %s%s *xr = in1 + row * %lld$ll;\n  %s%s *yr = out + row * %lld$ll;\n", c->t->dev, cc_stype(c, dt), (long long)C,
            c->t->dev, cc_stype(c, odt), (long long)C);
  cc_printf(c, "  const $i64 t = ($i64)in2[row];\n");
  cc_printf(c, "  if (t < 0 || t >= %lld$ll) { /* the whole row (block or warp) */\n", (long long)C);
  cc_printf(c, "    for (int v = lane; v < %lld; v += %d) {\n      float o[%d];\n#pragma unroll\n      for (int q = 0; q < %d; q++) o[q] = 0.f;\n",
            (long long)rp.nv, rp.tpr, rp.vec, rp.vec);
  cc_vec_store(c, rp.vec, odt, "yr", cc_fmt(c, "v * %d", rp.vec), "o");
  cc_printf(c, "    }\n    return;\n  }\n");
  online_lse(c, &rp, dt);
  cc_printf(c, "  const float inv = 1.f / S;\n");
  cc_printf(c, "  const float f = in0[0] / (float)((const %s$i64 *)scratch)[0];\n", c->t->dev);
  cc_printf(c, "  for (int v = lane; v < %lld; v += %d) {\n    {\n      float xa[%d];\n", (long long)rp.nv, rp.tpr, rp.vec);
  cc_vec_load(c, rp.vec, dt, "xa", "0", "xr", cc_fmt(c, "v * %d", rp.vec));
  cc_printf(c, "      float o[%d];\n#pragma unroll\n      for (int q = 0; q < %d; q++) {\n", rp.vec, rp.vec);
  cc_printf(c, "        float p = expf(xa[q] - M) * inv;\n");
  cc_printf(c, "        o[q] = (v * %d + q == t ? p - 1.f : p) * f;\n      }\n", rp.vec);
  cc_vec_store(c, rp.vec, odt, "yr", cc_fmt(c, "v * %d", rp.vec), "o");
  cc_printf(c, "    }\n  }\n");
  cc_end(c);
  return true;
}

/* ---- adamw, sgd ---- */

static bool emit_optim(cc *c) {
  const mlc_node *n = c->n;
  const mlc_train_config *tc = &c->p->train;
  const mlc_type *pt = cc_in(c, 0);
  int dt = pt->dtype;
  bool adamw = n->op == MLC_OP_ADAMW;
  int64_t P = mlc_type_numel(pt);
  if (P == 0) return cc_fail(c, "empty parameter");
  int vec = cc_pick_vec(P, mlc_dtype_size((mlc_dtype)dt));
  if (vec > 4) vec = 4; /* four state streams: keep registers down */
  int64_t nvt = P / vec;
  const char *T = cc_stype(c, dt);
  cc_begin(c, (uint64_t)gs_grid(nvt), THREADS, 0);
  bool mom = !adamw && tc->momentum != 0;
  cc_printf(c, "  %s%s *p = (%s%s *)in0;\n", c->t->dev, T, c->t->dev, T);
  if (adamw || mom) cc_printf(c, "  %s%s *m = (%s%s *)in2;\n", c->t->dev, T, c->t->dev, T);
  if (adamw) {
    cc_printf(c, "  %s%s *vs = (%s%s *)in3;\n", c->t->dev, T, c->t->dev, T);
    cc_printf(c, "  const $f64 step = ($f64)in4[0], lr = ($f64)in5[0];\n");
    cc_printf(c, "  const float step_size = (float)(lr / (1.0 - pow(%.17g, step)));\n", tc->beta1);
    cc_printf(c, "  const float decay = (float)(1.0 - lr * %.17g);\n", tc->weight_decay);
    cc_printf(c, "  const float isb = (float)(1.0 / sqrt(1.0 - pow(%.17g, step)));\n", tc->beta2);
  }
  if (!adamw) cc_printf(c, "  const float lr = in3[0];\n");
  gs_begin(c, "e", nvt);
  const char *at = cc_fmt(c, "($i64)e * %d", vec);
  cc_printf(c, "      float pa[%d], ga[%d];\n", vec, vec);
  if (adamw || mom) cc_printf(c, "      float ma[%d];\n", vec);
  if (adamw) cc_printf(c, "      float va[%d];\n", vec);
  cc_vec_load(c, vec, dt, "pa", "0", "p", at);
  cc_vec_load(c, vec, dt, "ga", "0", "in1", at);
  if (adamw || mom) cc_vec_load(c, vec, dt, "ma", "0", "m", at);
  if (adamw) cc_vec_load(c, vec, dt, "va", "0", "vs", at);
  cc_printf(c, "#pragma unroll\n      for (int q = 0; q < %d; q++) {\n", vec);
  if (adamw) {
    cc_printf(c, "        const float g = ga[q], pp = pa[q] * decay;\n");
    cc_printf(c, "        const float mm = fmaf(%s, ma[q], %s * g);\n", cc_flit(c, tc->beta1), cc_flit(c, 1 - tc->beta1));
    cc_printf(c, "        const float vv = fmaf(%s, va[q], %s * (g * g));\n", cc_flit(c, tc->beta2), cc_flit(c, 1 - tc->beta2));
    cc_printf(c, "        const float den = fmaf(sqrtf(vv), isb, %s);\n", cc_flit(c, tc->eps));
    cc_printf(c, "        pa[q] = pp - (step_size * mm) / den;\n        ma[q] = mm;\n        va[q] = vv;\n");
  } else {
    cc_printf(c, "        const float d = fmaf(%s, pa[q], ga[q]);\n", cc_flit(c, tc->weight_decay));
    if (mom) cc_printf(c, "        ma[q] = fmaf(%s, ma[q], d);\n", cc_flit(c, tc->momentum));
    cc_printf(c, "        pa[q] = pa[q] - lr * %s;\n", mom ? "ma[q]" : "d");
  }
  cc_printf(c, "      }\n");
  cc_vec_store(c, vec, dt, "p", at, "pa");
  if (adamw || mom) cc_vec_store(c, vec, dt, "m", at, "ma");
  if (adamw) cc_vec_store(c, vec, dt, "vs", at, "va");
  cc_printf(c, "  }\n");
  cc_end(c);
  return true;
}

/* ---- adamw_multi, sgd_multi: the updates of up to 16 parameters in one launch ----
 *
 * The same math as emit_optim's, element for element; where a parameter
 * has a 16-bit shadow (the fuse pass's shadow_casts), its new value is
 * stored there too, converted as a cast's store converts.  Blocks of
 * MULTI_CHUNK elements are dealt out tensor after tensor (sizes are static,
 * so the block ranges are literals); a block finds its tensor with a chain
 * of compares, the same for all its threads. */
#define MULTI_CHUNK (THREADS * 4 * 8)

bool cc_emit_update_multi(cc *c) {
  const mlc_node *n = c->n;
  const mlc_train_config *tc = &c->p->train;
  bool adamw = n->op == MLC_OP_ADAMW_MULTI, mom = !adamw && tc->momentum != 0, state = adamw || mom;
  uint32_t per, tail;
  mlc_update_layout(n->op, &per, &tail);
  const uint32_t np = (n->nin - tail) / per;
  /* gdt: the gradients' dtype, the parameters' or (f32 parameters) a 16-bit
   * float the loads widen (the fuse pass's update_grad) */
  int dt = cc_in(c, 0)->dtype, gdt = cc_in(c, 1)->dtype, sdt = 0;
  for (uint32_t t = 0; t < np; t++) {
    if (cc_in(c, (int)(per * t))->dtype != dt || cc_in(c, (int)(per * t + 1))->dtype != gdt)
      return cc_bug(c, "%s over parameters or gradients of different dtypes", mlc_ops[n->op].name);
    /* sdt: the shadows' dtype (the fuse pass's shadow_casts: a 16-bit copy written beside an f32 parameter); a
     * parameter without one has itself in that place */
    int st = cc_in(c, (int)(per * t + per - 1))->dtype;
    if (st != dt && sdt && st != sdt) return cc_bug(c, "%s over shadows of different dtypes", mlc_ops[n->op].name);
    if (st != dt) sdt = st;
  }
  const char *T = cc_stype(c, dt), *GT = cc_stype(c, gdt), *ST = sdt ? cc_stype(c, sdt) : NULL;
  if (adamw) {
    cc_printf(c, "MLC_FN void @K@_upd(float &p, float &m, float &v, float g, float step_size, float isb, float decay) {\n");
    cc_printf(c, "  const float pp = p * decay;\n");
    cc_printf(c, "  const float mm = fmaf(%s, m, %s * g);\n", cc_flit(c, tc->beta1), cc_flit(c, 1 - tc->beta1));
    cc_printf(c, "  const float vv = fmaf(%s, v, %s * (g * g));\n", cc_flit(c, tc->beta2), cc_flit(c, 1 - tc->beta2));
    cc_printf(c, "  const float den = fmaf(sqrtf(vv), isb, %s);\n", cc_flit(c, tc->eps));
    cc_printf(c, "  p = pp - (step_size * mm) / den;\n  m = mm;\n  v = vv;\n}\n");
  } else {
    cc_printf(c, "MLC_FN void @K@_upd(float &p, %sfloat g, float lr) {\n", mom ? "float &m, " : "");
    cc_printf(c, "  const float d = fmaf(%s, p, g);\n", cc_flit(c, tc->weight_decay));
    if (mom) cc_printf(c, "  m = fmaf(%s, m, d);\n", cc_flit(c, tc->momentum));
    cc_printf(c, "  p = p - lr * %s;\n}\n", mom ? "m" : "d");
  }
  int64_t blocks = 0;
  for (uint32_t t = 0; t < np; t++) blocks += cc_ceil_div(mlc_type_numel(cc_in(c, (int)(per * t))), MULTI_CHUNK);
  cc_begin(c, (uint64_t)blocks, THREADS, 0);
  if (adamw) {
    /* The step's scalars, in double, once a block rather than once a thread
     * (ncu on the H200 counted 52 instructions an element, the FP64 pipe 5 %
     * busy, with every thread computing the two pows). */
    cc_printf(c, "  $shared float sc[3];\n  if ($tid == 0) {\n");
    cc_printf(c, "    const $f64 step = ($f64)in%u[0], lr = ($f64)in%u[0];\n", n->nin - 2, n->nin - 1);
    cc_printf(c, "    sc[0] = (float)(lr / (1.0 - pow(%.17g, step)));\n", tc->beta1);
    cc_printf(c, "    sc[1] = (float)(1.0 - lr * %.17g);\n", tc->weight_decay);
    cc_printf(c, "    sc[2] = (float)(1.0 / sqrt(1.0 - pow(%.17g, step)));\n  }\n  $barrier;\n", tc->beta2);
    cc_printf(c, "  const float step_size = sc[0], decay = sc[1], isb = sc[2];\n");
  } else {
    cc_printf(c, "  const float lr = in%u[0];\n", n->nin - 1);
  }
  cc_printf(c, "  const unsigned b = $bid;\n  %s *p%s%s;\n  const %s *g;\n  $i64 base, end;\n", T, state ? ", *m" : "",
            adamw ? ", *vs" : "", GT);
  if (sdt) cc_printf(c, "  %s *s;\n", ST);
  int64_t first = 0;
  for (uint32_t t = 0; t < np; t++) {
    int64_t P = mlc_type_numel(cc_in(c, (int)(per * t))), nb = cc_ceil_div(P, MULTI_CHUNK);
    cc_printf(c, "  %sif (b < %lldu) {\n", t ? "else " : "", (long long)(first + nb));
    cc_printf(c, "    p = (%s *)in%u; g = (const %s *)in%u;", T, per * t, GT, per * t + 1);
    if (state) cc_printf(c, " m = (%s *)in%u;", T, per * t + 2);
    if (adamw) cc_printf(c, " vs = (%s *)in%u;", T, per * t + 3);
    if (sdt && cc_in(c, (int)(per * t + per - 1))->dtype == sdt) cc_printf(c, " s = (%s *)in%u;", ST, per * t + per - 1);
    else if (sdt) cc_printf(c, " s = 0;");
    cc_printf(c, "\n    base = ($i64)(b - %lldu) * %d; end = %lld$ll;\n  }\n", (long long)first, MULTI_CHUNK, (long long)P);
    first += nb;
  }
  cc_printf(c, "  else return;\n");
  cc_printf(c, "  if (end > base + %d) end = base + %d;\n", MULTI_CHUNK, MULTI_CHUNK);
  cc_printf(c, "  for ($i64 e = base + $tid * 4; e < end; e += %d) {\n", THREADS * 4);
  cc_printf(c, "    if (e + 4 <= end) {\n      float pa[4], ga[4]%s%s;\n", state ? ", ma[4]" : "", adamw ? ", va[4]" : "");
  cc_vec_load(c, 4, dt, "pa", "0", "p", "e");
  cc_vec_load(c, 4, gdt, "ga", "0", "g", "e");
  if (state) cc_vec_load(c, 4, dt, "ma", "0", "m", "e");
  if (adamw) cc_vec_load(c, 4, dt, "va", "0", "vs", "e");
  if (adamw)
    cc_printf(c, "#pragma unroll\n      for (int q = 0; q < 4; q++) @K@_upd(pa[q], ma[q], va[q], ga[q], step_size, isb, decay);\n");
  else
    cc_printf(c, "#pragma unroll\n      for (int q = 0; q < 4; q++) @K@_upd(pa[q], %sga[q], lr);\n", mom ? "ma[q], " : "");
  cc_vec_store(c, 4, dt, "p", "e", "pa");
  if (state) cc_vec_store(c, 4, dt, "m", "e", "ma");
  if (adamw) cc_vec_store(c, 4, dt, "vs", "e", "va");
  if (sdt) {
    cc_printf(c, "      if (s)\n");
    cc_vec_store(c, 4, sdt, "s", "e", "pa");
  }
  cc_printf(c, "    } else {\n      for ($i64 q = e; q < end; q++) {\n");
  cc_printf(c, "        float pq = %s;\n", cc_load(c, "p", dt, "q"));
  if (state) cc_printf(c, "        float mq = %s;\n", cc_load(c, "m", dt, "q"));
  if (adamw) {
    cc_printf(c, "        float vq = %s;\n", cc_load(c, "vs", dt, "q"));
    cc_printf(c, "        @K@_upd(pq, mq, vq, %s, step_size, isb, decay);\n", cc_load(c, "g", gdt, "q"));
  } else {
    cc_printf(c, "        @K@_upd(pq, %s%s, lr);\n", mom ? "mq, " : "", cc_load(c, "g", gdt, "q"));
  }
  cc_printf(c, "        %s\n", cc_store(c, "p", dt, "q", "pq"));
  if (state) cc_printf(c, "        %s\n", cc_store(c, "m", dt, "q", "mq"));
  if (adamw) cc_printf(c, "        %s\n", cc_store(c, "vs", dt, "q", "vq"));
  if (sdt) cc_printf(c, "        if (s) %s\n", cc_store(c, "s", sdt, "q", "pq"));
  cc_printf(c, "      }\n    }\n  }\n");
  cc_end(c);
  return true;
}

bool cc_emit_misc(cc *c) {
  switch (c->n->op) {
  case MLC_OP_EMBEDDING: return emit_embedding(c);
  case MLC_OP_EMBEDDING_GRAD: return emit_embedding_grad(c);
  case MLC_OP_CROSS_ENTROPY: return emit_cross_entropy(c);
  case MLC_OP_CROSS_ENTROPY_GRAD: return emit_cross_entropy_grad(c);
  case MLC_OP_ADAMW: case MLC_OP_SGD: return emit_optim(c);
  default: return cc_bug(c, "not a misc op");
  }
}
