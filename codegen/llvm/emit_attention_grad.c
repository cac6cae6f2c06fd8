/* attention_grad(g, q, k, v) -> [3, b, h, s, d]: dq, dk and dv of
 * o = softmax(q k^T * scale [causal: key j visible to query i iff j <= i]) v,
 * FlashAttention-2's backward on the CPU.  With P the softmax, dO = g:
 *
 *   dV = P^T dO     dP = dO V^T     D_i = sum_j P_ij dP_ij  (= dO_i . o_i)
 *   dS = P * (dP - D)               dQ = scale dS K         dK = scale dS^T Q
 *
 * Nothing sq x sk is stored: P and dP are recomputed a key block at a time
 * from each row's logsumexp.  A work item is one (batch, head):
 *
 *   1. statistics: an online softmax over key blocks gives every query row
 *      its lse = m + log(l) and D = t / l, where t is the running sum of
 *      P_ij dP_ij (rescaled with l);
 *   2. for each block of KB keys (packed transposed, Kt and Vt [D][KB]):
 *      for each group of QB query rows that sees the block, S and dP in
 *      QB x KB registers, P = exp(S - lse), dS; then dVt += dO^T P and
 *      dKt += Q^T dS in [D][KB] accumulators, stored as dk, dv rows when the
 *      block is done; and dq += dS K, in f32 straight into the output;
 *   3. a bf16/f16 output cannot hold a running f32 sum, so there dq skips
 *      step 2 and is done here instead: per tile of QT query rows, over the
 *      key blocks again, summed in an f32 tile on the stack.
 *
 * Steps 1 and 2 do seven sq x sk x d products (the forward does two); step 3
 * adds three for 16-bit types.
 *
 * Why work items are (batch, head) pairs and not key blocks: every dk/dv
 * block needs lse and D of all the query rows, and the kernel ABI lets no
 * item read what another writes, so key-block items would each redo step 1
 * over the whole sequence.  (An attention_stats node giving lse and D to
 * attention_grad would remove that; see the backend's README.)
 *
 * Row groups have a static size: the full ones loop, and the last, partial
 * one (s % QB rows) is a second copy of the code, so rows past the end are
 * never computed (their zero P would still be summed into dk and dv).
 * With causal masking a key block starts at a multiple of QB, so the groups
 * that see it are exactly those from its first key's row on.
 */
#include "codegen/llvm/cg.h"

#define QB_MAX 8

typedef struct {
  int64_t S, D, KB, QB, QT, Dp, Sfull;
  bool causal, dq_in_out;
  double scale;
  cg_buf go, q, k, v, out;
  cg_buf Kt, Vt;       /* [D][KB]: the key and value blocks, transposed, f32 */
  cg_buf dKt, dVt;     /* [D][KB]: the block's dk and dv sums */
  cg_buf dS;           /* [QB][KB]: scale * dS of the row group */
  cg_buf m, l, t;      /* [S]: running max, sum, sum of P dP; then lse (in m) and D (in t) */
  cg_buf dqt;          /* [QT][Dp]: step 3's dq tile */
  LLVMValueRef base;   /* element offset of the (batch, head) in g, q, k, v */
  LLVMValueRef dqb, dkb, dvb; /* and of its dq, dk, dv in the output */
  LLVMValueRef j0, kbv; /* the key block: first key, keys in it */
  LLVMValueRef i0;     /* step 3: the tile's first row */
} ag;

typedef void (*group_fn)(cg *g, ag *A, LLVMValueRef rb, int nrows);

/* dst[d][jj] = src[j0 + jj][d] for the key block; keys past S are zeros. */
static void pack(cg *g, ag *A, cg_buf src, cg_buf dst) {
  cg_loop Lj, Ld;
  LLVMValueRef jj = cg_for(g, &Lj, cg_i64(g, 0), cg_i64(g, A->KB), 1);
  LLVMValueRef in = LLVMBuildICmp(g->b, LLVMIntSLT, jj, A->kbv, "");
  LLVMValueRef row = cg_idx(g, A->base, cg_iadd(g, A->j0, LLVMBuildSelect(g->b, in, jj, cg_i64(g, 0), "")), A->D);
  LLVMValueRef d = cg_for(g, &Ld, cg_i64(g, 0), cg_i64(g, A->D), 1);
  LLVMValueRef x = LLVMBuildSelect(g->b, in, cg_load(g, src, cg_iadd(g, row, d), 1, NULL), LLVMConstReal(g->t_f32, 0), "");
  cg_store(g, dst, cg_idx(g, jj, d, A->KB), x, NULL);
  cg_end_for(g, &Ld, NULL);
  cg_end_for(g, &Lj, NULL);
}

/* acc[r*2 + v] = sum over d of src[rb + r][d] * packed[d][v*vw .. v*vw + vw):
 * one row group against the key block, in 2 * nrows vector registers. */
static void tile_dot(cg *g, ag *A, cg_buf src, cg_buf packed, LLVMValueRef rb, int nrows, LLVMValueRef *acc) {
  int vw = g->vw;
  LLVMTypeRef vt = cg_ctype(g, MLC_DT_F32, vw);
  LLVMValueRef row[QB_MAX], cur[2 * QB_MAX], next[2 * QB_MAX], kt[2];
  for (int r = 0; r < nrows; r++) row[r] = cg_idx(g, A->base, cg_iaddc(g, rb, r), A->D);
  cg_loop L;
  LLVMValueRef d = cg_for(g, &L, cg_i64(g, 0), cg_i64(g, A->D), 1);
  for (int x = 0; x < 2 * nrows; x++) cur[x] = cg_carry(g, &L, LLVMConstNull(vt));
  for (int v = 0; v < 2; v++) kt[v] = cg_load(g, packed, cg_iaddc(g, cg_imulc(g, d, A->KB), v * vw), vw, NULL);
  for (int r = 0; r < nrows; r++) {
    LLVMValueRef s = cg_splat(g, cg_load(g, src, cg_iadd(g, row[r], d), 1, NULL), vw);
    for (int v = 0; v < 2; v++) next[r * 2 + v] = cg_fma(g, s, kt[v], cur[r * 2 + v]);
  }
  cg_end_for(g, &L, next);
  for (int x = 0; x < 2 * nrows; x++) acc[x] = L.phi[x];
}

/* scale * S of row i with the keys it cannot see at -inf: past S, and
 * j > i when causal. */
static void masked_scores(cg *g, ag *A, LLVMValueRef i, const LLVMValueRef *raw, LLVMValueRef *s) {
  int vw = g->vw;
  LLVMTypeRef vt = cg_ctype(g, MLC_DT_F32, vw);
  LLVMValueRef lanes[64];
  for (int x = 0; x < vw; x++) lanes[x] = cg_i64(g, x);
  LLVMValueRef lane = LLVMConstVector(lanes, (unsigned)vw);
  for (int v = 0; v < 2; v++) {
    LLVMValueRef j = LLVMBuildAdd(g->b, cg_splat(g, cg_iaddc(g, A->j0, v * vw), vw), lane, "");
    LLVMValueRef ok = LLVMBuildICmp(g->b, LLVMIntSLT, j, cg_splat(g, cg_i64(g, A->S), vw), "");
    if (A->causal) ok = LLVMBuildAnd(g->b, ok, LLVMBuildICmp(g->b, LLVMIntSLE, j, cg_splat(g, i, vw), ""), "");
    s[v] = LLVMBuildSelect(g->b, ok, LLVMBuildFMul(g->b, raw[v], cg_const(g, vt, A->scale), ""),
                           cg_const(g, vt, -__builtin_inf()), "");
  }
}

/* Step 1 for one row group: the online update of m, l and t.  Every row of
 * the group sees at least one key of the block, so the block max is finite. */
static void stats_group(cg *g, ag *A, LLVMValueRef rb, int nrows) {
  LLVMValueRef sr[2 * QB_MAX], dp[2 * QB_MAX];
  tile_dot(g, A, A->q, A->Kt, rb, nrows, sr);
  tile_dot(g, A, A->go, A->Vt, rb, nrows, dp);
  for (int r = 0; r < nrows; r++) {
    LLVMValueRef i = cg_iaddc(g, rb, r), s[2], p[2];
    masked_scores(g, A, i, &sr[r * 2], s);
    LLVMValueRef mb = cg_hmax(g, MLC_DT_F32, cg_max(g, MLC_DT_F32, s[0], s[1]));
    LLVMValueRef mo = cg_load(g, A->m, i, 1, NULL);
    LLVMValueRef mn = cg_max(g, MLC_DT_F32, mo, mb);
    LLVMValueRef corr = cg_exp(g, LLVMBuildFSub(g->b, mo, mn, ""));
    for (int v = 0; v < 2; v++) p[v] = cg_exp(g, LLVMBuildFSub(g->b, s[v], cg_splat(g, mn, g->vw), ""));
    LLVMValueRef ps = LLVMBuildFAdd(g->b, p[0], p[1], "");
    LLVMValueRef pd = cg_fma(g, p[1], dp[r * 2 + 1], LLVMBuildFMul(g->b, p[0], dp[r * 2], ""));
    cg_store(g, A->l, i, cg_fma(g, cg_load(g, A->l, i, 1, NULL), corr, cg_hsum(g, MLC_DT_F32, ps)), NULL);
    cg_store(g, A->t, i, cg_fma(g, cg_load(g, A->t, i, 1, NULL), corr, cg_hsum(g, MLC_DT_F32, pd)), NULL);
    cg_store(g, A->m, i, mn, NULL);
  }
}

/* P and scale * dS of a row group from lse and D; dS also goes to the
 * stack tile for the dq product. */
static void probs(cg *g, ag *A, LLVMValueRef rb, int nrows, LLVMValueRef *P, LLVMValueRef *dS) {
  int vw = g->vw;
  LLVMValueRef sr[2 * QB_MAX], dp[2 * QB_MAX];
  tile_dot(g, A, A->q, A->Kt, rb, nrows, sr);
  tile_dot(g, A, A->go, A->Vt, rb, nrows, dp);
  LLVMValueRef scale = cg_const(g, cg_ctype(g, MLC_DT_F32, vw), A->scale);
  for (int r = 0; r < nrows; r++) {
    LLVMValueRef i = cg_iaddc(g, rb, r), s[2];
    masked_scores(g, A, i, &sr[r * 2], s);
    LLVMValueRef lse = cg_splat(g, cg_load(g, A->m, i, 1, NULL), vw), Di = cg_splat(g, cg_load(g, A->t, i, 1, NULL), vw);
    for (int v = 0; v < 2; v++) {
      LLVMValueRef p = cg_exp(g, LLVMBuildFSub(g->b, s[v], lse, ""));
      LLVMValueRef ds = LLVMBuildFMul(g->b, LLVMBuildFMul(g->b, p, scale, ""), LLVMBuildFSub(g->b, dp[r * 2 + v], Di, ""), "");
      if (P) P[r * 2 + v] = p;
      dS[r * 2 + v] = ds;
      cg_store(g, A->dS, cg_iaddc(g, cg_i64(g, r * A->KB), v * vw), ds, NULL);
    }
  }
}

/* acc[d][:] += sum over the group's rows of src[row][d] * w[row][:]:
 * dVt with (dO, P), dKt with (Q, scale dS). */
static void outer_acc(cg *g, ag *A, cg_buf src, cg_buf acc, LLVMValueRef rb, int nrows, const LLVMValueRef *w) {
  int vw = g->vw;
  LLVMValueRef row[QB_MAX];
  for (int r = 0; r < nrows; r++) row[r] = cg_idx(g, A->base, cg_iaddc(g, rb, r), A->D);
  cg_loop L;
  LLVMValueRef d = cg_for(g, &L, cg_i64(g, 0), cg_i64(g, A->D), 1);
  LLVMValueRef a[2], at[2];
  for (int v = 0; v < 2; v++) {
    at[v] = cg_iaddc(g, cg_imulc(g, d, A->KB), v * vw);
    a[v] = cg_load(g, acc, at[v], vw, NULL);
  }
  for (int r = 0; r < nrows; r++) {
    LLVMValueRef x = cg_splat(g, cg_load(g, src, cg_iadd(g, row[r], d), 1, NULL), vw);
    for (int v = 0; v < 2; v++) a[v] = cg_fma(g, x, w[r * 2 + v], a[v]);
  }
  for (int v = 0; v < 2; v++) cg_store(g, acc, at[v], a[v], NULL);
  cg_end_for(g, &L, NULL);
}

/* dq[row] += sum over the block's keys of dS[row][jj] * k[j0 + jj], one
 * vector of d at a time (the last one masked); `dst` holds f32 rows at
 * dst_row(r) = first + r * stride. */
static void dq_acc(cg *g, ag *A, cg_buf dst, LLVMValueRef first, int64_t stride, int nrows) {
  int vw = g->vw;
  int64_t nfull = A->D / vw, tail = A->D % vw;
  for (int part = 0; part < 2; part++) {
    if ((part == 0 && nfull == 0) || (part == 1 && tail == 0)) continue;
    LLVMValueRef mask = part ? cg_mask(g, vw, (int)tail) : NULL;
    cg_loop Lc, Lj;
    LLVMValueRef c = part ? cg_i64(g, nfull * vw) : cg_for(g, &Lc, cg_i64(g, 0), cg_i64(g, nfull * vw), vw);
    LLVMValueRef at[QB_MAX], a[QB_MAX], cur[QB_MAX], next[QB_MAX];
    for (int r = 0; r < nrows; r++) {
      at[r] = cg_iadd(g, cg_iaddc(g, first, r * stride), c);
      a[r] = cg_load(g, dst, at[r], vw, mask);
    }
    LLVMValueRef jj = cg_for(g, &Lj, cg_i64(g, 0), A->kbv, 1);
    for (int r = 0; r < nrows; r++) cur[r] = cg_carry(g, &Lj, a[r]);
    LLVMValueRef kv = cg_load(g, A->k, cg_iadd(g, cg_idx(g, A->base, cg_iadd(g, A->j0, jj), A->D), c), vw, mask);
    for (int r = 0; r < nrows; r++) {
      LLVMValueRef ds = cg_load(g, A->dS, cg_iaddc(g, jj, r * A->KB), 1, NULL);
      next[r] = cg_fma(g, cg_splat(g, ds, vw), kv, cur[r]);
    }
    cg_end_for(g, &Lj, next);
    for (int r = 0; r < nrows; r++) cg_store(g, dst, at[r], Lj.phi[r], mask);
    if (!part) cg_end_for(g, &Lc, NULL);
  }
}

/* Step 2 for one row group. */
static void grad_group(cg *g, ag *A, LLVMValueRef rb, int nrows) {
  LLVMValueRef P[2 * QB_MAX], dS[2 * QB_MAX];
  probs(g, A, rb, nrows, P, dS);
  outer_acc(g, A, A->go, A->dVt, rb, nrows, P);
  outer_acc(g, A, A->q, A->dKt, rb, nrows, dS);
  if (A->dq_in_out) dq_acc(g, A, A->out, cg_idx(g, A->dqb, rb, A->D), A->D, nrows);
}

/* Step 3 for one row group of the tile; with causal masking a group whose
 * last row is above the block's first key has nothing to add. */
static void dq_group(cg *g, ag *A, LLVMValueRef rb, int nrows) {
  cg_if_t vis;
  if (A->causal) cg_if(g, &vis, LLVMBuildICmp(g->b, LLVMIntSLE, A->j0, cg_iaddc(g, rb, nrows - 1), ""));
  LLVMValueRef dS[2 * QB_MAX];
  probs(g, A, rb, nrows, NULL, dS);
  dq_acc(g, A, A->dqt, cg_imulc(g, LLVMBuildSub(g->b, rb, A->i0, ""), A->Dp), A->Dp, nrows);
  if (A->causal) cg_endif(g, &vis);
}

/* The row groups in [lo, hi) with hi <= Sfull, then the partial group at
 * Sfull if there is one and `tail_here` (NULL: always). */
static void groups(cg *g, ag *A, LLVMValueRef lo, LLVMValueRef hi, LLVMValueRef tail_here, group_fn fn) {
  if (A->Sfull > 0) {
    cg_loop L;
    LLVMValueRef rb = cg_for(g, &L, lo, hi, A->QB);
    fn(g, A, rb, (int)A->QB);
    cg_end_for(g, &L, NULL);
  }
  if (A->S > A->Sfull) {
    cg_if_t t;
    if (tail_here) cg_if(g, &t, tail_here);
    fn(g, A, cg_i64(g, A->Sfull), (int)(A->S - A->Sfull));
    if (tail_here) cg_endif(g, &t);
  }
}

/* for (j0 = 0; j0 < end; j0 += KB), with kbv and the packed blocks set. */
static LLVMValueRef key_blocks(cg *g, ag *A, cg_loop *L, LLVMValueRef end) {
  A->j0 = cg_for(g, L, cg_i64(g, 0), end, A->KB);
  A->kbv = cg_block_len(g, A->j0, A->S, A->KB);
  pack(g, A, A->k, A->Kt);
  pack(g, A, A->v, A->Vt);
  return A->j0;
}

/* dst[j0 + jj][d] = acc[d][jj] for the block's keys. */
static void store_block(cg *g, ag *A, cg_buf acc, LLVMValueRef dst_base) {
  cg_loop Lj, Ld;
  LLVMValueRef jj = cg_for(g, &Lj, cg_i64(g, 0), A->kbv, 1);
  LLVMValueRef row = cg_idx(g, dst_base, cg_iadd(g, A->j0, jj), A->D);
  LLVMValueRef d = cg_for(g, &Ld, cg_i64(g, 0), cg_i64(g, A->D), 1);
  cg_store(g, A->out, cg_iadd(g, row, d), cg_load(g, acc, cg_idx(g, jj, d, A->KB), 1, NULL), NULL);
  cg_end_for(g, &Ld, NULL);
  cg_end_for(g, &Lj, NULL);
}

bool cg_emit_attention_grad(cg *g) {
  const mlc_node *n = g->n;
  const mlc_type *qt = &g->f->nodes[n->in[1]].type;
  int vw = g->vw;
  ag A = {
    .S = qt->dim[2], .D = qt->dim[3], .KB = 2 * vw, .QB = vw >= 16 ? 8 : 4,
    .causal = n->a.causal != 0, .scale = n->a.f, .dq_in_out = n->type.dtype == MLC_DT_F32,
    .go = g->in[0], .q = g->in[1], .k = g->in[2], .v = g->in[3], .out = g->out,
  };
  A.Sfull = A.S / A.QB * A.QB;
  A.QT = cg_round_up(A.S < 64 ? A.S : 64, A.QB);
  A.Dp = cg_round_up(A.D, vw);
  int64_t scratch = 4 * (4 * A.D * A.KB + A.QB * A.KB + 3 * A.S + (A.dq_in_out ? 0 : A.QT * A.Dp));
  if (scratch > ((int64_t)2 << 20)) /* kernel.h promises kernels about 2 MiB of stack */
    return cg_fail(g, "attention_grad of seq %lld and head dim %lld needs %lld bytes of scratch; the CPU kernel takes 2 MiB",
                   (long long)A.S, (long long)A.D, (long long)scratch);
  int64_t BH = qt->dim[0] * qt->dim[1], SD = A.S * A.D;
  A.Kt = cg_alloca(g, MLC_DT_F32, A.D * A.KB);
  A.Vt = cg_alloca(g, MLC_DT_F32, A.D * A.KB);
  A.dKt = cg_alloca(g, MLC_DT_F32, A.D * A.KB);
  A.dVt = cg_alloca(g, MLC_DT_F32, A.D * A.KB);
  A.dS = cg_alloca(g, MLC_DT_F32, A.QB * A.KB);
  A.m = cg_alloca(g, MLC_DT_F32, A.S);
  A.l = cg_alloca(g, MLC_DT_F32, A.S);
  A.t = cg_alloca(g, MLC_DT_F32, A.S);
  if (!A.dq_in_out) A.dqt = cg_alloca(g, MLC_DT_F32, A.QT * A.Dp);
  g->items = BH;

  cg_loop items, L, Lk;
  LLVMValueRef bh = cg_items_begin(g, &items);
  A.base = cg_imulc(g, bh, SD);
  A.dqb = cg_imulc(g, bh, SD);
  A.dkb = cg_iaddc(g, A.dqb, BH * SD);
  A.dvb = cg_iaddc(g, A.dqb, 2 * BH * SD);
  LLVMValueRef Sfull = cg_i64(g, A.Sfull), S = cg_i64(g, A.S);

  /* 1: statistics */
  LLVMValueRef i = cg_for(g, &L, cg_i64(g, 0), S, 1);
  cg_store(g, A.m, i, LLVMConstReal(g->t_f32, -__builtin_inf()), NULL);
  cg_store(g, A.l, i, LLVMConstReal(g->t_f32, 0), NULL);
  cg_store(g, A.t, i, LLVMConstReal(g->t_f32, 0), NULL);
  cg_end_for(g, &L, NULL);
  LLVMValueRef j0 = key_blocks(g, &A, &Lk, S);
  groups(g, &A, A.causal ? j0 : cg_i64(g, 0), Sfull, NULL, stats_group);
  cg_end_for(g, &Lk, NULL);
  i = cg_for(g, &L, cg_i64(g, 0), S, 1);
  LLVMValueRef l = cg_load(g, A.l, i, 1, NULL);
  cg_store(g, A.m, i, LLVMBuildFAdd(g->b, cg_load(g, A.m, i, 1, NULL), cg_log(g, l), ""), NULL);
  cg_store(g, A.t, i, LLVMBuildFDiv(g->b, cg_load(g, A.t, i, 1, NULL), l, ""), NULL);
  cg_end_for(g, &L, NULL);

  /* 2: dk and dv per key block, and dq for an f32 output */
  if (A.dq_in_out) cg_memset0(g, A.out, A.dqb, cg_i64(g, SD));
  j0 = key_blocks(g, &A, &Lk, S);
  cg_memset0(g, A.dKt, cg_i64(g, 0), cg_i64(g, A.D * A.KB));
  cg_memset0(g, A.dVt, cg_i64(g, 0), cg_i64(g, A.D * A.KB));
  groups(g, &A, A.causal ? j0 : cg_i64(g, 0), Sfull, NULL, grad_group);
  store_block(g, &A, A.dKt, A.dkb);
  store_block(g, &A, A.dVt, A.dvb);
  cg_end_for(g, &Lk, NULL);

  /* 3: dq for a 16-bit output, a tile of QT rows at a time */
  if (!A.dq_in_out) {
    cg_loop Lt;
    A.i0 = cg_for(g, &Lt, cg_i64(g, 0), S, A.QT);
    LLVMValueRef iend = cg_iadd(g, A.i0, cg_block_len(g, A.i0, A.S, A.QT));
    cg_memset0(g, A.dqt, cg_i64(g, 0), cg_i64(g, A.QT * A.Dp));
    key_blocks(g, &A, &Lk, A.causal ? iend : S);
    LLVMValueRef tail_here = LLVMBuildAnd(g->b, LLVMBuildICmp(g->b, LLVMIntSLE, A.i0, Sfull, ""),
                                          LLVMBuildICmp(g->b, LLVMIntSLT, Sfull, iend, ""), "");
    groups(g, &A, A.i0, cg_min_i64(g, iend, Sfull), tail_here, dq_group);
    cg_end_for(g, &Lk, NULL);
    LLVMValueRef r = cg_for(g, &L, A.i0, iend, 1);
    LLVMValueRef src = cg_imulc(g, LLVMBuildSub(g->b, r, A.i0, ""), A.Dp), dst = cg_idx(g, A.dqb, r, A.D);
    for (int64_t c = 0; c < A.D; c += vw) {
      LLVMValueRef mask = A.D - c < vw ? cg_mask(g, vw, (int)(A.D - c)) : NULL;
      cg_store(g, A.out, cg_iaddc(g, dst, c), cg_load(g, A.dqt, cg_iaddc(g, src, c), vw, NULL), mask);
    }
    cg_end_for(g, &L, NULL);
    cg_end_for(g, &Lt, NULL);
  }
  cg_end_for(g, &items, NULL);
  return true;
}
