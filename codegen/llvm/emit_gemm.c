/* GEMM kernels for matmul (a[.., m, k] @ b[.., k, n], batch dims broadcast),
 * linear (x[.., k] @ w[n, k]^T) and scaled_mm (linear's layout on f8
 * operands, decoded and unscaled as they are packed).
 *
 * The structure is the BLIS one, specialised at compile time to the shape:
 *
 *   work item = one MB x NC block of C (and one batch index)
 *     for each KC-deep slice of K:
 *       pack B[k0:k0+KC, n0:n0+NC] into NR-wide panels Bp[panel][k][NR]
 *         (f32, zero-padded past N; the whole Bp sits in L2)
 *       pack A[m0:m0+MB, k0:k0+KC] into MR-row strips Ap[strip][k][MR] (f32)
 *       for each panel (KC x NR, held in L1):
 *         for each strip (streamed from L2):
 *           micro-kernel: an MR x NR tile of C held in MR * NR/vw vector
 *           registers; per k, NR/vw vector loads of Bp and MR broadcasts of
 *           Ap feed MR * NR/vw fused multiply-adds
 *
 * NR is two vectors (32 floats with AVX-512) and MR fills the rest of the
 * register file (12 rows with 32 registers, 6 with 16).  Both packs move
 * vw x vw blocks through an in-register shuffle transpose where the layout
 * turns (A into strips; w^T for linear), and convert bf16/f16 to f32.  C
 * accumulates in place across K slices when it is f32; otherwise into an f32
 * block on the stack that is converted once at the end.  Everything that
 * depends on the shape (block sizes, the M % MR row tail, the N % NR column
 * tail and its store mask) is fixed when the kernel is generated.
 *
 * Each work item packs its own B panels, so B is packed once per M block:
 * choose_blocks keeps M blocks tall unless that would leave too few items
 * for the threads.  A shared pre-packed B (weights are constant) needs
 * scratch memory that the kernel ABI does not have yet.
 *
 * A linear of at most 4 rows (x[.., k], batch 1 decode) is a matrix-vector
 * product instead: emit_gemv.c.
 */
#include "codegen/llvm/cg.h"


typedef struct {
  int64_t M, N, K;
  bool bt;                           /* B is w[n, k] (linear), else b[k, n] */
  int nb;                            /* batch dimensions of C */
  int64_t bd[MLC_MAX_RANK];
  int64_t bs[3][MLC_MAX_RANK];       /* batch strides of C, A, B */
  int64_t MB, NC, KC, NCp;           /* block sizes; NCp = NC rounded up to NR */
  int MR, NR, NRV, vw;
  bool c_scratch;
  cg_buf A, B, C, Ap, Bp, Cp;
  LLVMValueRef sa, sb;               /* scaled_mm: 2^-ea and 2^-eb, which the packs apply to A and B; else NULL */
  /* per item */
  LLVMValueRef aoff, boff, coff, m0, n0, mlen, nlen, k0, kc, first;
} gemm;

/* ---- block sizes ---- */

static void choose_blocks(gemm *G) {
  int64_t batch = 1;
  for (int k = 0; k < G->nb; k++) batch *= G->bd[k];
  G->KC = G->K < 256 ? G->K : 256;
  G->NC = cg_round_up(G->N, G->NR);
  if (G->NC > 8 * G->NR) G->NC = 8 * G->NR;
  int64_t mmax = G->c_scratch ? 20 * G->MR : 40 * G->MR;
  G->MB = cg_round_up(G->M, G->MR);
  if (G->MB > mmax) G->MB = mmax;
  /* Enough blocks for the threads, without making them so small that
   * packing B dominates. */
  for (;;) {
    int64_t items = batch * cg_ceil_div(G->M, G->MB) * cg_ceil_div(G->N, G->NC);
    if (items >= 16) break;
    if (G->MB > 8 * G->MR) G->MB = cg_round_up(G->MB / 2, G->MR);
    else if (G->NC > 2 * G->NR) G->NC = cg_round_up(G->NC / 2, G->NR);
    else break;
  }
  G->NCp = cg_round_up(G->NC, G->NR);
}

/* ---- packing ---- */

/* Elements of A or B in f32, each times its operand's scale (scaled_mm:
 * exact, a power of two times a value of at most 4 significant bits). */
static LLVMValueRef load_scaled(cg *g, cg_buf b, LLVMValueRef s, LLVMValueRef idx, int lanes, LLVMValueRef mask) {
  LLVMValueRef v = cg_load(g, b, idx, lanes, mask);
  return s ? LLVMBuildFMul(g->b, v, lanes > 1 ? cg_splat(g, s, lanes) : s, "") : v;
}

/* Lanes of vector v of an NR-wide panel row that hold real columns when the
 * panel has only nt < NR of them. */
static int lanes_valid(const gemm *G, int v, int64_t nt) {
  int64_t l = nt - (int64_t)v * G->vw;
  return l <= 0 ? 0 : l >= G->vw ? G->vw : (int)l;
}

/* Transposes the n x n matrix held in n vectors of n lanes: log2(n) stages,
 * each swapping the off-diagonal b x b blocks of every 2b x 2b block with
 * one two-source shuffle per vector (vpermt2ps on x86). */
static void transpose(cg *g, LLVMValueRef *rows, int n) {
  for (int b = n / 2; b >= 1; b /= 2)
    for (int r = 0; r < n; r++) {
      if (r & b) continue;
      LLVMValueRef lo[64], hi[64];
      for (int c = 0; c < n; c++) {
        lo[c] = cg_i32(g, (c & b) == 0 ? c : n + c - b);
        hi[c] = cg_i32(g, (c & b) == 0 ? c + b : n + c);
      }
      LLVMValueRef x = rows[r], y = rows[r + b];
      rows[r] = LLVMBuildShuffleVector(g->b, x, y, LLVMConstVector(lo, (unsigned)n), "");
      rows[r + b] = LLVMBuildShuffleVector(g->b, x, y, LLVMConstVector(hi, (unsigned)n), "");
    }
}

/* Panel p of B for the current K slice into Bp[p][k][NR]; nt < NR columns
 * when it is the partial last panel (the rest are zeros). */
static void pack_b_panel(cg *g, gemm *G, LLVMValueRef p, int64_t nt) {
  LLVMValueRef dst = cg_imulc(g, p, G->KC * G->NR);     /* Bp[p][0][0] */
  LLVMValueRef n = cg_idx(g, G->n0, p, G->NR);          /* the panel's first column */
  cg_loop Lk, Lj;
  if (!G->bt) { /* b[k, n]: rows of the panel are contiguous */
    LLVMValueRef k = cg_for(g, &Lk, cg_i64(g, 0), G->kc, 1);
    LLVMValueRef src = cg_iadd(g, cg_idx(g, G->boff, cg_iadd(g, G->k0, k), G->N), n);
    LLVMValueRef d = cg_idx(g, dst, k, G->NR);
    for (int v = 0; v < G->NRV; v++) {
      int nv = lanes_valid(G, v, nt);
      LLVMValueRef x = LLVMConstNull(cg_ctype(g, MLC_DT_F32, G->vw));
      if (nv > 0) x = load_scaled(g, G->B, G->sb, cg_iaddc(g, src, v * G->vw), G->vw, nv < G->vw ? cg_mask(g, G->vw, nv) : NULL);
      cg_store(g, G->Bp, cg_iaddc(g, d, v * G->vw), x, NULL);
    }
    cg_end_for(g, &Lk, NULL);
    return;
  }
  /* w[n, k]: column j of the panel is row n + j of w.  Whole panels go
   * vw x vw blocks at a time through registers; the k tail and partial
   * panels one element at a time. */
  LLVMValueRef kvec = cg_i64(g, 0);
  if (nt == G->NR) {
    kvec = cg_imulc(g, LLVMBuildUDiv(g->b, G->kc, cg_i64(g, G->vw), ""), G->vw);
    LLVMValueRef src[64]; /* w[n + j, k0] */
    for (int j = 0; j < G->NR; j++) src[j] = cg_iadd(g, cg_idx(g, G->boff, cg_iaddc(g, n, j), G->K), G->k0);
    LLVMValueRef k = cg_for(g, &Lk, cg_i64(g, 0), kvec, G->vw);
    for (int v = 0; v < G->NRV; v++) {
      LLVMValueRef rows[64];
      for (int l = 0; l < G->vw; l++) rows[l] = load_scaled(g, G->B, G->sb, cg_iadd(g, src[v * G->vw + l], k), G->vw, NULL);
      transpose(g, rows, G->vw);
      for (int l = 0; l < G->vw; l++)
        cg_store(g, G->Bp, cg_iaddc(g, cg_idx(g, dst, cg_iaddc(g, k, l), G->NR), v * G->vw), rows[l], NULL);
    }
    cg_end_for(g, &Lk, NULL);
  }
  LLVMValueRef j = cg_for(g, &Lj, cg_i64(g, 0), cg_i64(g, nt), 1);
  LLVMValueRef src = cg_iadd(g, cg_idx(g, G->boff, cg_iadd(g, n, j), G->K), G->k0);
  LLVMValueRef k = cg_for(g, &Lk, kvec, G->kc, 1);
  cg_store(g, G->Bp, cg_iadd(g, cg_idx(g, dst, k, G->NR), j), load_scaled(g, G->B, G->sb, cg_iadd(g, src, k), 1, NULL), NULL);
  cg_end_for(g, &Lk, NULL);
  cg_end_for(g, &Lj, NULL);
  if (nt < G->NR) {
    j = cg_for(g, &Lj, cg_i64(g, nt), cg_i64(g, G->NR), 1);
    k = cg_for(g, &Lk, cg_i64(g, 0), G->kc, 1);
    cg_store(g, G->Bp, cg_iadd(g, cg_idx(g, dst, k, G->NR), j), LLVMConstReal(g->t_f32, 0), NULL);
    cg_end_for(g, &Lk, NULL);
    cg_end_for(g, &Lj, NULL);
  }
}

/* One strip of `rows` rows of A (from block row r0) for the current K
 * slice, into Ap[strip][k][MR].  With MR <= vw, vw values of k at a time:
 * load the rows, transpose them in registers, store MR lanes per k. */
static void pack_a_strip(cg *g, gemm *G, LLVMValueRef r0, int rows) {
  int vw = G->vw;
  LLVMValueRef src[16], dst = cg_imulc(g, r0, G->KC); /* Ap[r0 / MR][0][0] */
  for (int i = 0; i < rows; i++) src[i] = cg_iadd(g, cg_idx(g, G->aoff, cg_iadd(g, G->m0, cg_iaddc(g, r0, i)), G->K), G->k0);
  cg_loop Lk;
  LLVMValueRef kvec = cg_i64(g, 0);
  if (G->MR <= vw) {
    kvec = cg_imulc(g, LLVMBuildUDiv(g->b, G->kc, cg_i64(g, vw), ""), vw);
    LLVMValueRef k = cg_for(g, &Lk, cg_i64(g, 0), kvec, vw), v[64], mask = cg_mask(g, vw, G->MR);
    for (int i = 0; i < vw; i++)
      v[i] = i < rows ? load_scaled(g, G->A, G->sa, cg_iadd(g, src[i], k), vw, NULL) : LLVMConstNull(cg_ctype(g, MLC_DT_F32, vw));
    transpose(g, v, vw);
    for (int kk = 0; kk < vw; kk++) cg_store(g, G->Ap, cg_idx(g, dst, cg_iaddc(g, k, kk), G->MR), v[kk], mask);
    cg_end_for(g, &Lk, NULL);
  }
  LLVMValueRef k = cg_for(g, &Lk, kvec, G->kc, 1);
  for (int i = 0; i < rows; i++)
    cg_store(g, G->Ap, cg_iaddc(g, cg_idx(g, dst, k, G->MR), i), load_scaled(g, G->A, G->sa, cg_iadd(g, src[i], k), 1, NULL), NULL);
  cg_end_for(g, &Lk, NULL);
}

/* The block of A for the current K slice, converted to f32, into MR-row
 * strips Ap[strip][k][MR]: a k step of the micro-kernel then reads its MR
 * values of A from one or two cache lines, not from MR rows. */
static void pack_a(cg *g, gemm *G) {
  LLVMValueRef mfull = cg_imulc(g, LLVMBuildUDiv(g->b, G->mlen, cg_i64(g, G->MR), ""), G->MR);
  cg_loop L;
  LLVMValueRef r0 = cg_for(g, &L, cg_i64(g, 0), mfull, G->MR);
  pack_a_strip(g, G, r0, G->MR);
  cg_end_for(g, &L, NULL);
  int mt = (int)(G->M % G->MR);
  if (mt) { /* only the last M block has it */
    cg_if_t t;
    cg_if(g, &t, LLVMBuildICmp(g->b, LLVMIntSLT, mfull, G->mlen, ""));
    pack_a_strip(g, G, mfull, mt);
    cg_endif(g, &t);
  }
}

/* ---- the micro-kernel ---- */

/* C[ir:ir+rows, panel p] (+)= Ap[ir:ir+rows, 0:kc] * Bp[p]; `nt` < NR
 * columns for the partial last panel (masked loads and stores of C). */
static void micro(cg *g, gemm *G, int rows, LLVMValueRef ir, LLVMValueRef p, int64_t nt) {
  int vw = G->vw, NRV = G->NRV;
  LLVMTypeRef vt = cg_ctype(g, MLC_DT_F32, vw);
  /* Where row i of the strip starts in Ap, and in C (or Cp). */
  LLVMValueRef arow[16], crow[16];
  cg_buf Cb = G->c_scratch ? G->Cp : G->C;
  LLVMValueRef col = cg_imulc(g, p, G->NR); /* the panel's first column in the block */
  for (int i = 0; i < rows; i++) {
    LLVMValueRef r = cg_iaddc(g, ir, i);
    arow[i] = cg_iaddc(g, cg_imulc(g, ir, G->KC), i); /* Ap[ir / MR][0][i] = (ir / MR) * KC * MR + i */
    crow[i] = G->c_scratch ? cg_idx(g, col, r, G->NCp)
                           : cg_iadd(g, cg_idx(g, G->coff, cg_iadd(g, G->m0, r), G->N), cg_iadd(g, G->n0, col));
  }
  LLVMValueRef mask[4];
  int nv[4];
  for (int v = 0; v < NRV; v++) {
    nv[v] = lanes_valid(G, v, nt);
    mask[v] = nv[v] < vw ? cg_mask(g, vw, nv[v]) : NULL;
  }
  /* The tile starts from C, or from zero in the first K slice. */
  LLVMValueRef acc[16 * 4], zero = LLVMConstNull(vt);
  for (int i = 0; i < rows; i++)
    for (int v = 0; v < NRV; v++) {
      LLVMValueRef c = nv[v] > 0 ? cg_load(g, Cb, cg_iaddc(g, crow[i], v * vw), vw, mask[v]) : zero;
      acc[i * NRV + v] = LLVMBuildSelect(g->b, G->first, zero, c, "");
    }
  cg_loop L;
  LLVMValueRef k = cg_for(g, &L, cg_i64(g, 0), G->kc, 1);
  LLVMValueRef cur[16 * 4], next[16 * 4], bv[4];
  for (int t = 0; t < rows * NRV; t++) cur[t] = cg_carry(g, &L, acc[t]);
  LLVMValueRef pb = cg_idx(g, cg_imulc(g, p, G->KC * G->NR), k, G->NR); /* Bp[p][k][0] */
  for (int v = 0; v < NRV; v++) {
    bv[v] = cg_load(g, G->Bp, cg_iaddc(g, pb, v * vw), vw, NULL);
    LLVMSetAlignment(bv[v], (unsigned)(4 * vw)); /* Bp is 64-byte aligned and panel rows are NR floats */
  }
  for (int i = 0; i < rows; i++) {
    LLVMValueRef a = cg_splat(g, cg_load(g, G->Ap, cg_idx(g, arow[i], k, G->MR), 1, NULL), vw);
    for (int v = 0; v < NRV; v++) next[i * NRV + v] = cg_fma(g, a, bv[v], cur[i * NRV + v]);
  }
  cg_end_for(g, &L, next);
  for (int i = 0; i < rows; i++)
    for (int v = 0; v < NRV; v++)
      if (nv[v] > 0) cg_store(g, Cb, cg_iaddc(g, crow[i], v * vw), L.phi[i * NRV + v], mask[v]);
}

/* All MR strips of the block for panel p, then the M % MR row tail. */
static void strips(cg *g, gemm *G, LLVMValueRef p, int64_t nt) {
  LLVMValueRef mfull = cg_imulc(g, LLVMBuildUDiv(g->b, G->mlen, cg_i64(g, G->MR), ""), G->MR);
  cg_loop L;
  LLVMValueRef ir = cg_for(g, &L, cg_i64(g, 0), mfull, G->MR);
  micro(g, G, G->MR, ir, p, nt);
  cg_end_for(g, &L, NULL);
  int mt = (int)(G->M % G->MR);
  if (mt) { /* only the last M block has it */
    cg_if_t t;
    cg_if(g, &t, LLVMBuildICmp(g->b, LLVMIntSLT, mfull, G->mlen, ""));
    micro(g, G, mt, mfull, p, nt);
    cg_endif(g, &t);
  }
}

/* ---- the kernel ---- */

static bool setup(cg *g, gemm *G) {
  const mlc_node *n = g->n;
  const mlc_type *at = &g->f->nodes[n->in[0]].type, *bt = &g->f->nodes[n->in[1]].type, *ct = &n->type;
  G->vw = g->vw;
  G->NR = 2 * g->vw;
  G->NRV = 2;
  G->MR = g->mr;
  G->A = g->in[0];
  G->B = g->in[1];
  G->C = g->out;
  if (n->op == MLC_OP_LINEAR || n->op == MLC_OP_SCALED_MM) {
    G->bt = true;
    G->K = at->dim[at->rank - 1];
    G->N = bt->dim[0];
    G->M = mlc_type_numel(at) / G->K;
  } else {
    G->K = at->dim[at->rank - 1];
    G->M = at->dim[at->rank - 2];
    G->N = bt->dim[bt->rank - 1];
    G->nb = ct->rank - 2;
    int64_t as[MLC_MAX_RANK], bs[MLC_MAX_RANK];
    mlc_type_strides(at, as);
    mlc_type_strides(bt, bs);
    mlc_type_strides(ct, G->bs[0]);
    for (int k = 0; k < G->nb; k++) {
      G->bd[k] = ct->dim[k];
      int ia = k - (G->nb - (at->rank - 2)), ib = k - (G->nb - (bt->rank - 2));
      G->bs[1][k] = ia >= 0 && at->dim[ia] != 1 ? as[ia] : 0;
      G->bs[2][k] = ib >= 0 && bt->dim[ib] != 1 ? bs[ib] : 0;
    }
  }
  if (G->MR > 16) return cg_fail(g, "gemm: MR %d is more than 16", G->MR);
  if (n->op == MLC_OP_SCALED_MM) { /* the amaxes' scales, undone as A and B are packed */
    G->sa = cg_f8_scale(g, cg_load(g, g->in[2], cg_i64(g, 0), 1, NULL), at->dtype, true);
    G->sb = cg_f8_scale(g, cg_load(g, g->in[3], cg_i64(g, 0), 1, NULL), bt->dtype, true);
  }
  G->c_scratch = ct->dtype != MLC_DT_F32;
  choose_blocks(G);
  return true;
}

bool cg_emit_gemm(cg *g) {
  if (cg_gemv_fits(g)) return cg_emit_gemv(g); /* a decode step's linear: no packing */
  gemm G = {0};
  if (!setup(g, &G)) return false;
  int64_t mblocks = cg_ceil_div(G.M, G.MB), nblocks = cg_ceil_div(G.N, G.NC);
  G.Bp = cg_alloca(g, MLC_DT_F32, G.KC * G.NCp);
  G.Ap = cg_alloca(g, MLC_DT_F32, G.MB * G.KC);
  if (G.c_scratch) G.Cp = cg_alloca(g, MLC_DT_F32, G.MB * G.NCp);

  /* item -> (batch..., m block, n block) */
  int r = G.nb + 2;
  int64_t dims[MLC_MAX_RANK + 2], st[5][MLC_MAX_RANK] = {{0}};
  for (int k = 0; k < G.nb; k++) {
    dims[k] = G.bd[k];
    for (int s = 0; s < 3; s++) st[s][k] = G.bs[s][k];
  }
  dims[G.nb] = mblocks;
  dims[G.nb + 1] = nblocks;
  st[3][G.nb] = 1;
  st[4][G.nb + 1] = 1;
  g->items = mblocks * nblocks;
  for (int k = 0; k < G.nb; k++) g->items *= G.bd[k];

  cg_loop items;
  LLVMValueRef item = cg_items_begin(g, &items), off[5];
  cg_unflatten(g, item, r, dims, 5, (const int64_t(*)[MLC_MAX_RANK])st, off);
  G.coff = off[0];
  G.aoff = off[1];
  G.boff = off[2];
  G.m0 = cg_imulc(g, off[3], G.MB);
  G.n0 = cg_imulc(g, off[4], G.NC);
  G.mlen = cg_block_len(g, G.m0, G.M, G.MB);
  G.nlen = cg_block_len(g, G.n0, G.N, G.NC);
  LLVMValueRef nfull = LLVMBuildUDiv(g->b, G.nlen, cg_i64(g, G.NR), "");
  int64_t nt = G.N % G.NR;
  LLVMValueRef partial = NULL; /* this block ends in a partial panel */
  if (nt) partial = LLVMBuildICmp(g->b, LLVMIntNE, LLVMBuildURem(g->b, G.nlen, cg_i64(g, G.NR), ""), cg_i64(g, 0), "");

  cg_loop Lk;
  G.k0 = cg_for(g, &Lk, cg_i64(g, 0), cg_i64(g, G.K), G.KC);
  G.kc = cg_block_len(g, G.k0, G.K, G.KC);
  G.first = LLVMBuildICmp(g->b, LLVMIntEQ, G.k0, cg_i64(g, 0), "");
  cg_loop Lp;
  LLVMValueRef p = cg_for(g, &Lp, cg_i64(g, 0), nfull, 1);
  pack_b_panel(g, &G, p, G.NR);
  cg_end_for(g, &Lp, NULL);
  cg_if_t t;
  if (partial) {
    cg_if(g, &t, partial);
    pack_b_panel(g, &G, nfull, nt);
    cg_endif(g, &t);
  }
  pack_a(g, &G);
  p = cg_for(g, &Lp, cg_i64(g, 0), nfull, 1);
  strips(g, &G, p, G.NR);
  cg_end_for(g, &Lp, NULL);
  if (partial) {
    cg_if(g, &t, partial);
    strips(g, &G, nfull, nt);
    cg_endif(g, &t);
  }
  cg_end_for(g, &Lk, NULL);

  if (G.c_scratch) { /* convert the f32 block into C */
    cg_loop Li, Lj;
    LLVMValueRef i = cg_for(g, &Li, cg_i64(g, 0), G.mlen, 1);
    LLVMValueRef crow = cg_iadd(g, cg_idx(g, G.coff, cg_iadd(g, G.m0, i), G.N), G.n0);
    LLVMValueRef prow = cg_imulc(g, i, G.NCp);
    LLVMValueRef j = cg_for(g, &Lj, cg_i64(g, 0), G.nlen, 1);
    cg_store(g, G.C, cg_iadd(g, crow, j), cg_load(g, G.Cp, cg_iadd(g, prow, j), 1, NULL), NULL);
    cg_end_for(g, &Lj, NULL);
    cg_end_for(g, &Li, NULL);
  }
  cg_end_for(g, &items, NULL);
  return true;
}
