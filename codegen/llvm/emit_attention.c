/* Attention: out = softmax(q k^T * scale [+ causal mask]) v for q [b, h, sq, d],
 * k [b, h, sk, d], v [b, h, sk, dv], streamed over the keys with an online
 * softmax (FlashAttention's recurrence), so no sq x sk matrix is ever stored.
 *
 * A work item is a tile of QT query rows of one (batch, head).  For each
 * block of KB keys (two vectors' worth) the kernel
 *   - packs k[j0:j0+KB, :] transposed into Kt[d][KB] (f32), once per tile,
 *   - for each group of QB rows: computes S = q k^T in QB x KB registers
 *     (per d, two vector loads of Kt and QB broadcasts of q), scales and
 *     masks it (keys past sk, and j > i when causal), and updates each row's
 *     running max m and sum l:  m' = max(m, max S);  P = exp(S - m');
 *     l = l * exp(m - m') + sum P,
 *   - then acc = acc * exp(m - m') + P v, in vectors along dv.
 * At the end out = acc / l.  Causal tiles stop at their last row's
 * diagonal, and row groups wholly above a key block skip it.  The causal
 * mask is PyTorch's is_causal one: key j is visible to query i when j <= i.
 *
 * attention_kv (a decode block's prefill and step) is the same loop over a
 * KV cache: a work item is one (batch, head); it first copies the chunk's
 * t keys and values into cache rows [pos, pos + t), then runs each query
 * tile against the cache with the causal mask shifted by pos (key j is
 * visible to query i when j <= pos + i), so the rows past the valid prefix
 * are never read.  pos is read at run time and clamped to [0, max_ctx - t].
 */
#include "codegen/llvm/cg.h"

typedef struct {
  int64_t Sq, Sk, D, Dv, QT, QB, KB, Dvp;
  bool causal;
  double scale;
  cg_buf q, k, v, o;
  cg_buf Kt;                /* [D][KB]: the key block, transposed */
  cg_buf P;                 /* [QT][KB]: exp(S - m) of the key block */
  cg_buf acc;               /* [QT][Dvp]: the unnormalised output rows */
  cg_buf m, l, corr;        /* [QT]: running max, running sum, exp(m_old - m_new) */
  /* per item / key block */
  LLVMValueRef qbase, kbase, vbase, obase, i0, j0, kbv;
  LLVMValueRef off;         /* attention_kv: the chunk's position (query i sees keys j <= off + i); NULL: 0 */
} attn;

/* i, shifted to its position in the sequence. */
static LLVMValueRef at_pos(cg *g, const attn *A, LLVMValueRef i) { return A->off ? cg_iadd(g, i, A->off) : i; }

/* S for rows [i0+rb, i0+rb+QB) against the packed key block, then the
 * online-softmax update of m and l; leaves P and corr on the stack. */
static void scores(cg *g, attn *A, LLVMValueRef rb) {
  int vw = g->vw, QB = (int)A->QB;
  LLVMTypeRef vt = cg_ctype(g, MLC_DT_F32, vw);
  LLVMValueRef qrow[16];
  for (int r = 0; r < QB; r++) {
    LLVMValueRef i = cg_iadd(g, A->i0, cg_iaddc(g, rb, r));
    i = cg_min_i64(g, i, cg_i64(g, A->Sq - 1)); /* rows past the end read the last one; never stored */
    qrow[r] = cg_idx(g, A->qbase, i, A->D);
  }
  cg_loop L;
  LLVMValueRef d = cg_for(g, &L, cg_i64(g, 0), cg_i64(g, A->D), 1);
  LLVMValueRef cur[32], next[32], kt[2];
  for (int t = 0; t < QB * 2; t++) cur[t] = cg_carry(g, &L, LLVMConstNull(vt));
  for (int v = 0; v < 2; v++) kt[v] = cg_load(g, A->Kt, cg_iaddc(g, cg_imulc(g, d, A->KB), v * vw), vw, NULL);
  for (int r = 0; r < QB; r++) {
    LLVMValueRef qv = cg_splat(g, cg_load(g, A->q, cg_iadd(g, qrow[r], d), 1, NULL), vw);
    for (int v = 0; v < 2; v++) next[r * 2 + v] = cg_fma(g, qv, kt[v], cur[r * 2 + v]);
  }
  cg_end_for(g, &L, next);

  LLVMValueRef lanes[64];
  for (int x = 0; x < vw; x++) lanes[x] = cg_i64(g, x);
  LLVMValueRef lane = LLVMConstVector(lanes, (unsigned)vw);
  LLVMValueRef ninf = cg_const(g, vt, -__builtin_inf()), scale = cg_const(g, vt, A->scale);
  for (int r = 0; r < QB; r++) {
    LLVMValueRef tr = cg_iaddc(g, rb, r); /* row within the tile */
    LLVMValueRef i = cg_iadd(g, A->i0, tr);
    LLVMValueRef s[2];
    for (int v = 0; v < 2; v++) { /* key j is visible if j < Sk (and j <= i when causal) */
      LLVMValueRef j = LLVMBuildAdd(g->b, cg_splat(g, cg_iaddc(g, A->j0, v * vw), vw), lane, "");
      LLVMValueRef ok = LLVMBuildICmp(g->b, LLVMIntSLT, j, cg_splat(g, cg_i64(g, A->Sk), vw), "");
      if (A->causal) ok = LLVMBuildAnd(g->b, ok, LLVMBuildICmp(g->b, LLVMIntSLE, j, cg_splat(g, at_pos(g, A, i), vw), ""), "");
      s[v] = LLVMBuildSelect(g->b, ok, LLVMBuildFMul(g->b, L.phi[r * 2 + v], scale, ""), ninf, "");
    }
    LLVMValueRef mb = cg_hmax(g, MLC_DT_F32, cg_max(g, MLC_DT_F32, s[0], s[1]));
    LLVMValueRef mo = cg_load(g, A->m, tr, 1, NULL);
    LLVMValueRef mn = cg_max(g, MLC_DT_F32, mo, mb);
    LLVMValueRef corr = cg_exp(g, LLVMBuildFSub(g->b, mo, mn, ""));
    LLVMValueRef mnv = cg_splat(g, mn, vw), sum = NULL;
    for (int v = 0; v < 2; v++) {
      LLVMValueRef p = cg_exp(g, LLVMBuildFSub(g->b, s[v], mnv, ""));
      cg_store(g, A->P, cg_iaddc(g, cg_imulc(g, tr, A->KB), v * vw), p, NULL);
      sum = sum ? LLVMBuildFAdd(g->b, sum, p, "") : p;
    }
    LLVMValueRef l = cg_load(g, A->l, tr, 1, NULL);
    cg_store(g, A->l, tr, cg_fma(g, l, corr, cg_hsum(g, MLC_DT_F32, sum)), NULL);
    cg_store(g, A->m, tr, mn, NULL);
    cg_store(g, A->corr, tr, corr, NULL);
  }
}

/* acc[rows] = acc * corr + P v over the key block, one vector of dv at a
 * time (the last one masked when dv is not a multiple of vw). */
static void accumulate(cg *g, attn *A, LLVMValueRef rb) {
  int vw = g->vw, QB = (int)A->QB;
  int64_t nfull = A->Dv / vw, tail = A->Dv % vw;
  for (int part = 0; part < 2; part++) {
    if ((part == 0 && nfull == 0) || (part == 1 && tail == 0)) continue;
    LLVMValueRef mask = part ? cg_mask(g, vw, (int)tail) : NULL;
    cg_loop Lc, Lj;
    LLVMValueRef c = part ? cg_i64(g, nfull * vw) : cg_for(g, &Lc, cg_i64(g, 0), cg_i64(g, nfull * vw), vw);
    LLVMValueRef arow[16], a[16], cur[16], next[16];
    for (int r = 0; r < QB; r++) {
      LLVMValueRef tr = cg_iaddc(g, rb, r);
      arow[r] = cg_idx(g, c, tr, A->Dvp);
      LLVMValueRef corr = cg_splat(g, cg_load(g, A->corr, tr, 1, NULL), vw);
      a[r] = LLVMBuildFMul(g->b, cg_load(g, A->acc, arow[r], vw, NULL), corr, "");
    }
    LLVMValueRef jj = cg_for(g, &Lj, cg_i64(g, 0), A->kbv, 1);
    for (int r = 0; r < QB; r++) cur[r] = cg_carry(g, &Lj, a[r]);
    LLVMValueRef vrow = cg_idx(g, A->vbase, cg_iadd(g, A->j0, jj), A->Dv);
    LLVMValueRef vv = cg_load(g, A->v, cg_iadd(g, vrow, c), vw, mask);
    for (int r = 0; r < QB; r++) {
      LLVMValueRef p = cg_load(g, A->P, cg_idx(g, jj, cg_iaddc(g, rb, r), A->KB), 1, NULL);
      next[r] = cg_fma(g, cg_splat(g, p, vw), vv, cur[r]);
    }
    cg_end_for(g, &Lj, next);
    for (int r = 0; r < QB; r++) cg_store(g, A->acc, arow[r], Lj.phi[r], NULL);
    if (!part) cg_end_for(g, &Lc, NULL);
  }
}

/* Kt[d][jj] = k[j0 + jj][d] for the key block; keys past Sk are zeros. */
static void pack_keys(cg *g, attn *A) {
  cg_loop Lj, Ld;
  LLVMValueRef jj = cg_for(g, &Lj, cg_i64(g, 0), cg_i64(g, A->KB), 1);
  LLVMValueRef in = LLVMBuildICmp(g->b, LLVMIntSLT, jj, A->kbv, "");
  LLVMValueRef krow = cg_idx(g, A->kbase, cg_iadd(g, A->j0, LLVMBuildSelect(g->b, in, jj, cg_i64(g, 0), "")), A->D);
  LLVMValueRef d = cg_for(g, &Ld, cg_i64(g, 0), cg_i64(g, A->D), 1);
  LLVMValueRef x = cg_load(g, A->k, cg_iadd(g, krow, d), 1, NULL);
  x = LLVMBuildSelect(g->b, in, x, LLVMConstReal(g->t_f32, 0), "");
  cg_store(g, A->Kt, cg_idx(g, jj, d, A->KB), x, NULL);
  cg_end_for(g, &Ld, NULL);
  cg_end_for(g, &Lj, NULL);
}

/* One query tile [i0, i0 + QT) of one (batch, head), its bases set. */
static void tile(cg *g, attn *A) {
  int vw = g->vw;
  cg_loop L, Lk;
  LLVMValueRef r = cg_for(g, &L, cg_i64(g, 0), cg_i64(g, A->QT), 1);
  cg_store(g, A->m, r, LLVMConstReal(g->t_f32, -__builtin_inf()), NULL);
  cg_store(g, A->l, r, LLVMConstReal(g->t_f32, 0), NULL);
  cg_end_for(g, &L, NULL);
  cg_memset0(g, A->acc, cg_i64(g, 0), cg_i64(g, A->QT * A->Dvp));

  /* Key blocks; a causal tile needs keys up to its last row only. */
  LLVMValueRef nkeys = cg_i64(g, A->Sk);
  if (A->causal) nkeys = cg_min_i64(g, nkeys, at_pos(g, A, cg_iaddc(g, A->i0, A->QT)));
  A->j0 = cg_for(g, &Lk, cg_i64(g, 0), nkeys, A->KB);
  A->kbv = cg_block_len(g, A->j0, A->Sk, A->KB);
  pack_keys(g, A);
  LLVMValueRef rb = cg_for(g, &L, cg_i64(g, 0), cg_i64(g, A->QT), A->QB);
  cg_if_t vis;
  if (A->causal) { /* skip a row group that sees none of the block: its last row is above the first key */
    LLVMValueRef last = at_pos(g, A, cg_iadd(g, A->i0, cg_iaddc(g, rb, A->QB - 1)));
    cg_if(g, &vis, LLVMBuildICmp(g->b, LLVMIntSLE, A->j0, last, ""));
  }
  scores(g, A, rb);
  accumulate(g, A, rb);
  if (A->causal) cg_endif(g, &vis);
  cg_end_for(g, &L, NULL);
  cg_end_for(g, &Lk, NULL);

  /* out = acc / l for the tile's rows that exist. */
  LLVMValueRef nrows = cg_block_len(g, A->i0, A->Sq, A->QT);
  r = cg_for(g, &L, cg_i64(g, 0), nrows, 1);
  LLVMValueRef inv = cg_splat(g, LLVMBuildFDiv(g->b, LLVMConstReal(g->t_f32, 1.0), cg_load(g, A->l, r, 1, NULL), ""), vw);
  LLVMValueRef arow = cg_imulc(g, r, A->Dvp);
  LLVMValueRef orow = cg_idx(g, A->obase, cg_iadd(g, A->i0, r), A->Dv);
  for (int64_t c = 0; c < A->Dv; c += vw) {
    LLVMValueRef mask = A->Dv - c < vw ? cg_mask(g, vw, (int)(A->Dv - c)) : NULL;
    LLVMValueRef a = cg_load(g, A->acc, cg_iaddc(g, arow, c), vw, NULL);
    cg_store(g, A->o, cg_iaddc(g, orow, c), LLVMBuildFMul(g->b, a, inv, ""), mask);
  }
  cg_end_for(g, &L, NULL);
}

bool cg_emit_attention(cg *g) {
  const mlc_node *n = g->n;
  bool kv = n->op == MLC_OP_ATTENTION_KV;
  const mlc_type *qt = &g->f->nodes[n->in[0]].type, *kt = &g->f->nodes[n->in[kv ? 3 : 1]].type;
  int vw = g->vw;
  attn A = {
    .Sq = qt->dim[2], .Sk = kt->dim[2], .D = qt->dim[3], .Dv = n->type.dim[3],
    .causal = kv || n->a.causal != 0, .scale = n->a.f, .KB = 2 * vw, .QB = vw >= 16 ? 8 : 4,
    .q = g->in[0], .k = g->in[kv ? 3 : 1], .v = g->in[kv ? 4 : 2], .o = g->out,
  };
  A.QT = cg_round_up(A.Sq < 64 ? A.Sq : 64, A.QB);
  A.Dvp = cg_round_up(A.Dv, vw);
  int64_t scratch = 4 * (A.D * A.KB + A.QT * (A.KB + A.Dvp + 3));
  if (scratch > ((int64_t)2 << 20)) /* kernel.h promises kernels about 2 MiB of stack */
    return cg_fail(g, "attention head dims %lld and %lld need %lld bytes of scratch; the CPU kernel takes 2 MiB",
                   (long long)A.D, (long long)A.Dv, (long long)scratch);
  int64_t BH = qt->dim[0] * qt->dim[1], ntiles = cg_ceil_div(A.Sq, A.QT);
  A.Kt = cg_alloca(g, MLC_DT_F32, A.D * A.KB);
  A.P = cg_alloca(g, MLC_DT_F32, A.QT * A.KB);
  A.acc = cg_alloca(g, MLC_DT_F32, A.QT * A.Dvp);
  A.m = cg_alloca(g, MLC_DT_F32, A.QT);
  A.l = cg_alloca(g, MLC_DT_F32, A.QT);
  A.corr = cg_alloca(g, MLC_DT_F32, A.QT);
  if (kv) {
    /* pos, clamped so that the chunk's rows lie inside the cache */
    LLVMValueRef pos = LLVMBuildSExt(g->b, cg_load(g, g->in[5], cg_i64(g, 0), 1, NULL), g->t_i64, "");
    pos = cg_max(g, MLC_DT_I64, pos, cg_i64(g, 0));
    A.off = cg_min_i64(g, pos, cg_i64(g, A.Sk - A.Sq));
  }
  g->items = kv ? BH : BH * ntiles;

  /* item -> (batch * head, query tile); attention_kv: (batch * head), its tiles in turn */
  cg_loop items, Lt;
  LLVMValueRef item = cg_items_begin(g, &items);
  LLVMValueRef bh = kv ? item : LLVMBuildUDiv(g->b, item, cg_i64(g, ntiles), "");
  A.qbase = cg_imulc(g, bh, A.Sq * A.D);
  A.kbase = cg_imulc(g, bh, A.Sk * A.D);
  A.vbase = cg_imulc(g, bh, A.Sk * A.Dv);
  A.obase = cg_imulc(g, bh, A.Sq * A.Dv);
  if (kv) {
    /* the chunk's keys and values into cache rows [pos, pos + t) */
    LLVMValueRef src = cg_imulc(g, bh, A.Sq * A.D);
    cg_memcpy(g, A.k, cg_iadd(g, A.kbase, cg_imulc(g, A.off, A.D)), g->in[1], src, cg_i64(g, A.Sq * A.D));
    cg_memcpy(g, A.v, cg_iadd(g, A.vbase, cg_imulc(g, A.off, A.Dv)), g->in[2], src, cg_i64(g, A.Sq * A.Dv));
    LLVMValueRef t = cg_for(g, &Lt, cg_i64(g, 0), cg_i64(g, ntiles), 1);
    A.i0 = cg_imulc(g, t, A.QT);
    tile(g, &A);
    cg_end_for(g, &Lt, NULL);
  } else {
    A.i0 = cg_imulc(g, LLVMBuildURem(g->b, item, cg_i64(g, ntiles), ""), A.QT);
    tile(g, &A);
  }
  cg_end_for(g, &items, NULL);
  return true;
}
