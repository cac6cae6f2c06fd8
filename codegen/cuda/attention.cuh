// mlc attention helpers (codegen/cuda/emit_attention.c)
extern __shared__ __align__(16) unsigned char mlc_attn_sm[];
template <class T> struct mlc_attn_isbf { static const bool v = false; };
template <> struct mlc_attn_isbf<mlc_bf16> { static const bool v = true; };
MLC_FN unsigned mlc_attn_saddr(const void *p) {
  unsigned r;
  asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(r) : "l"(p));
  return r; }
MLC_FN void mlc_attn_cp16(unsigned dst, const void *src, bool ok) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(dst), "l"(src), "r"(ok ? 16 : 0) : "memory"); }
MLC_FN void mlc_attn_cp4(unsigned dst, const void *src, bool ok) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" :: "r"(dst), "l"(src), "r"(ok ? 4 : 0) : "memory"); }
MLC_FN void mlc_attn_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
MLC_FN void mlc_attn_wait() { asm volatile("cp.async.wait_all;" ::: "memory"); }
// waits until at most N of this thread's latest cp.async groups are in flight
template <int N> MLC_FN void mlc_attn_wait_group() { asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory"); }
MLC_FN void mlc_attn_ldm(unsigned *r, unsigned a) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a)); }
MLC_FN void mlc_attn_ldmt(unsigned *r, unsigned a) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a)); }
// c[16x8] += a[16x16] b[16x8], f32 accumulators (mma.sync m16n8k16)
template <bool BF> MLC_FN void mlc_attn_mma(float *c, const unsigned *a, unsigned b0, unsigned b1) {
  if (BF)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1)); }
// Two floats as a bf16x2 / f16x2 word, lo at the lower address.
template <bool BF> MLC_FN unsigned mlc_attn_pack(float lo, float hi) {
  unsigned r;
  if (BF) asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  else asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r; }
template <bool BF> MLC_FN float mlc_attn_lo(unsigned w) {
  if (BF) return __int_as_float((int)(w << 16));
  mlc_f16 h; h.x = (unsigned short)(w & 0xffffu); return to_f32(h); }
template <bool BF> MLC_FN float mlc_attn_hi(unsigned w) {
  if (BF) return __int_as_float((int)(w & 0xffff0000u));
  mlc_f16 h; h.x = (unsigned short)(w >> 16); return to_f32(h); }
// Rows [r0, r0+R) of an S-row 16-bit matrix of D columns whose rows lie RS
// elements apart into shared memory with row pitch D+8 elements, by
// cp.async; rows past S read as zeros.
template <int D, int R, int NTH, int S, int RS = D>
MLC_FN void mlc_attn_ld(unsigned short *s, const void *g, int r0) {
  const int CH = D / 8, LD = D + 8;
  const unsigned short *gb = (const unsigned short *)g;
  for (int c = threadIdx.x; c < R * CH; c += NTH) {
    int r = c / CH, cc = c - r * CH, gr = r0 + r;
    bool ok = gr < S;
    mlc_attn_cp16(mlc_attn_saddr(s + r * LD + cc * 8), gb + (size_t)(ok ? gr : 0) * RS + cc * 8, ok);
  } }
// Where row i of head bh (batch x heads) starts: [BH][S][D] when H == 0;
// else packed, rows of batch b are RS elements apart and head h starts at
// column h*D (q, k, v in a [b, s, 3h, d] in-projection; o, dO [b, s, h, d]).
template <int H, int S, int D, int RS> MLC_FN size_t mlc_attn_row(int bh, int i) {
  constexpr int HH = H ? H : 1; /* no division by zero where H == 0 is compiled but not taken */
  if (H == 0) return ((size_t)bh * S + i) * D;
  return ((size_t)(bh / HH) * S + i) * RS + (size_t)(bh % HH) * D;
}

// Two adjacent columns of a gradient row: f32 as a float2, 16-bit as one
// packed word; pair p is columns 2p, 2p + 1.
MLC_FN void mlc_attn_st2(float *row, int p, float a, float b) { ((float2 *)row)[p] = make_float2(a, b); }
template <class T> MLC_FN void mlc_attn_st2(T *row, int p, float a, float b) {
  ((unsigned *)row)[p] = mlc_attn_pack<mlc_attn_isbf<T>::v>(a, b);
}
// A thread's part of key `key`'s dk (times scale) and dv rows in
// attention_grad's output ([3][BH][S][D]: dq, dk, dv; packed: dk and dv in
// [b, s, 3H, D]): columns 8t + 2 tq (+1) from acc[4t + 2r] (+1), r the half
// of the accumulator tile the key is in.
// PART 1 stores dv alone, PART 2 dk alone (the other pointer unread).
template <class T, int D, int BH, int S, int H, int PART = 0>
MLC_FN void mlc_attn_store_dkv(T *out, int bh, int key, int r, int tq, const float *dk, const float *dv, float scale) {
  const size_t N = (size_t)BH * S * D, hb = (size_t)bh * S * D;
  T *kr = H ? out + mlc_attn_row<H, S, D, 3 * H * D>(bh, key) + H * D : out + N + hb + (size_t)key * D;
  T *vr = H ? kr + H * D : out + 2 * N + hb + (size_t)key * D;
#pragma unroll
  for (int t = 0; t < D / 8; t++) {
    if constexpr (PART != 1) mlc_attn_st2(kr, t * 4 + tq, dk[4 * t + 2 * r] * scale, dk[4 * t + 2 * r + 1] * scale);
    if constexpr (PART != 2) mlc_attn_st2(vr, t * 4 + tq, dv[4 * t + 2 * r], dv[4 * t + 2 * r + 1]);
  }
}

// The online softmax's step for a thread's two rows: mx (its partial maxima of
// this block's scores, the running maxima mrow folded in) becomes the row's
// maximum over the 4 lanes that share the row; ms is that maximum (0 for a
// row with no key yet, so exp2 of -inf stays 0), corr the factor for what
// was summed under the old maximum; mrow takes the new one.
// 2^x, flushing results below 2^-126 to zero: one MUFU.EX2 (exp2f adds a range fix-up)
MLC_FN float mlc_ex2(float x) { float r; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x)); return r; }
MLC_FN void mlc_attn_rowmax(float *mx, float *mrow, float *ms, float *corr) {
#pragma unroll
  for (int r = 0; r < 2; r++) {
    mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
    mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
    ms[r] = mx[r] == -MLC_INF ? 0.f : mx[r];
    corr[r] = exp2f(mrow[r] - ms[r]);
    mrow[r] = mx[r];
  }
}

// Forward on tensor cores (16-bit T, head dim D % 16 == 0, dv == D).  A block
// is 16*MT*W query rows of one (batch, head), W warps of MT row tiles of 16;
// keys and values stream through shared memory BK at a time, double-buffered
// with cp.async.  S = q k^T and o += p v by mma.sync, each k or v fragment
// loaded once for the warp's MT row tiles; q's fragments come from shared
// memory as needed (registers go to the accumulators).  Online softmax in
// registers, in base 2 (sl2 = scale * log2 e).
// MODE 0: out = o.  MODE 2 (attention_save): out = o and stats[row] = lse2.
// MODE 1 (attention_grad's statistics; g = dO): writes
// stats[row] = lse2 (max + log2 sum, base 2), stats[BH*SQ + row] = dO.o, and
// zeroes the row of dq (f32 [BH*SQ][D]).
// H > 0: packed (mlc_attn_row): q, k, v are one [b, s, 3H, D] (SQ == SK) and
// out is [b, s, H, D].
template <class T, int D, int W, int MT, int BK, int BH, int SQ, int SK, int CAUSAL, int MODE, int H = 0>
MLC_FN void mlc_attn_fwd_tc(const T *q, const T *k, const T *v, T *out, const T *g, float *stats, float *dq, float sl2,
                            int item = -1) {
  const bool BF = mlc_attn_isbf<T>::v;
  const int BM = 16 * MT * W, LD = D + 8, NT = (SQ + BM - 1) / BM, NTH = 32 * W, RSI = H ? 3 * H * D : D, RSO = H ? H * D : D;
  static_assert(BK % 16 == 0 && (H == 0 || (SQ == SK && MODE != 1)), "attention tile");
  const int it = item < 0 ? (int)blockIdx.x : item; /* the work item: blockIdx.x, or a persistent launch's */
  int tile, bh;
  if (CAUSAL) { tile = NT - 1 - it / BH; bh = it % BH; }
  else { tile = it % NT; bh = it / NT; }
  const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5, gq = lane >> 2, tq = lane & 3;
  const int m0 = tile * BM, wr = w * 16 * MT; /* the warp's first row in the block */
  const T *qb = q + mlc_attn_row<H, SQ, D, RSI>(bh, 0);
  const T *kb = H ? qb + H * D : k + (size_t)bh * SK * D, *vb = H ? qb + 2 * H * D : v + (size_t)bh * SK * D;
  unsigned short *sQ = (unsigned short *)mlc_attn_sm, *sK = sQ + BM * LD, *sV = sK + 2 * BK * LD;
  int nkb = (SK + BK - 1) / BK;
  if (CAUSAL) { int lim = ((m0 + BM < SQ ? m0 + BM : SQ) + BK - 1) / BK; nkb = lim < nkb ? lim : nkb; }
  mlc_attn_ld<D, BM, NTH, SQ, RSI>(sQ, qb, m0);
  mlc_attn_ld<D, BK, NTH, SK, RSI>(sK, kb, 0);
  mlc_attn_ld<D, BK, NTH, SK, RSI>(sV, vb, 0);
  mlc_attn_commit();
  float o[MT][D / 8][4];
#pragma unroll
  for (int mt = 0; mt < MT; mt++)
#pragma unroll
    for (int t = 0; t < D / 8; t++) o[mt][t][0] = o[mt][t][1] = o[mt][t][2] = o[mt][t][3] = 0.f;
  float mrow[MT][2], lrow[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; mt++) mrow[mt][0] = mrow[mt][1] = -MLC_INF, lrow[mt][0] = lrow[mt][1] = 0.f;
  for (int kbi = 0; kbi < nkb; kbi++) {
    mlc_attn_wait();
    __syncthreads();
    if (kbi + 1 < nkb) {
      int nb = (kbi + 1) & 1;
      mlc_attn_ld<D, BK, NTH, SK, RSI>(sK + nb * BK * LD, kb, (kbi + 1) * BK);
      mlc_attn_ld<D, BK, NTH, SK, RSI>(sV + nb * BK * LD, vb, (kbi + 1) * BK);
      mlc_attn_commit();
    }
    const unsigned short *cK = sK + (kbi & 1) * BK * LD, *cV = sV + (kbi & 1) * BK * LD;
    float s[MT][BK / 8][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
      for (int t = 0; t < BK / 8; t++) s[mt][t][0] = s[mt][t][1] = s[mt][t][2] = s[mt][t][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
      unsigned qa[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; mt++)
        mlc_attn_ldm(qa[mt], mlc_attn_saddr(sQ + (wr + mt * 16 + (lane & 15)) * LD + kk * 16 + (lane >> 4) * 8));
#pragma unroll
      for (int nn = 0; nn < BK / 16; nn++) {
        unsigned b[4];
        mlc_attn_ldm(b, mlc_attn_saddr(cK + (nn * 16 + (lane & 7) + ((lane >> 4) << 3)) * LD + kk * 16 + ((lane >> 3) & 1) * 8));
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
          mlc_attn_mma<BF>(s[mt][2 * nn], qa[mt], b[0], b[1]);
          mlc_attn_mma<BF>(s[mt][2 * nn + 1], qa[mt], b[2], b[3]);
        }
      }
    }
    const int j0 = kbi * BK;
    unsigned pa[MT][BK / 16][4]; /* p as the A operand of p v */
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
      const int ra = m0 + wr + mt * 16 + gq; /* this thread's rows: ra, ra + 8 */
      const bool need = (j0 + BK > SK) || (CAUSAL && j0 + BK - 1 > m0 + wr + mt * 16);
      float mx[2] = {mrow[mt][0], mrow[mt][1]};
#pragma unroll
      for (int t = 0; t < BK / 8; t++) {
#pragma unroll
        for (int e = 0; e < 4; e++) {
          float x = s[mt][t][e] * sl2;
          if (need) {
            int key = j0 + t * 8 + 2 * tq + (e & 1), row = ra + (e >> 1) * 8;
            if (key >= SK || (CAUSAL && key > row)) x = -MLC_INF;
          }
          s[mt][t][e] = x;
        }
        mx[0] = fmaxf(mx[0], fmaxf(s[mt][t][0], s[mt][t][1]));
        mx[1] = fmaxf(mx[1], fmaxf(s[mt][t][2], s[mt][t][3]));
      }
      float corr[2], ms[2], ls[2] = {0.f, 0.f};
      mlc_attn_rowmax(mx, mrow[mt], ms, corr);
#pragma unroll
      for (int t = 0; t < BK / 8; t++) {
        s[mt][t][0] = exp2f(s[mt][t][0] - ms[0]); s[mt][t][1] = exp2f(s[mt][t][1] - ms[0]);
        s[mt][t][2] = exp2f(s[mt][t][2] - ms[1]); s[mt][t][3] = exp2f(s[mt][t][3] - ms[1]);
        ls[0] += s[mt][t][0] + s[mt][t][1];
        ls[1] += s[mt][t][2] + s[mt][t][3];
      }
      lrow[mt][0] = lrow[mt][0] * corr[0] + ls[0];
      lrow[mt][1] = lrow[mt][1] * corr[1] + ls[1];
#pragma unroll
      for (int t = 0; t < D / 8; t++) {
        o[mt][t][0] *= corr[0]; o[mt][t][1] *= corr[0]; o[mt][t][2] *= corr[1]; o[mt][t][3] *= corr[1];
      }
#pragma unroll
      for (int kk = 0; kk < BK / 16; kk++) {
        pa[mt][kk][0] = mlc_attn_pack<BF>(s[mt][2 * kk][0], s[mt][2 * kk][1]);
        pa[mt][kk][1] = mlc_attn_pack<BF>(s[mt][2 * kk][2], s[mt][2 * kk][3]);
        pa[mt][kk][2] = mlc_attn_pack<BF>(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
        pa[mt][kk][3] = mlc_attn_pack<BF>(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
      }
    }
#pragma unroll
    for (int kk = 0; kk < BK / 16; kk++) {
#pragma unroll
      for (int dn = 0; dn < D / 16; dn++) {
        unsigned b[4];
        mlc_attn_ldmt(b, mlc_attn_saddr(cV + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * LD + dn * 16 + (lane >> 4) * 8));
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
          mlc_attn_mma<BF>(o[mt][2 * dn], pa[mt][kk], b[0], b[1]);
          mlc_attn_mma<BF>(o[mt][2 * dn + 1], pa[mt][kk], b[2], b[3]);
        }
      }
    }
  }
#pragma unroll
  for (int mt = 0; mt < MT; mt++) {
    const int ra = m0 + wr + mt * 16 + gq;
    float inv[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
      lrow[mt][r] += __shfl_xor_sync(0xffffffffu, lrow[mt][r], 1);
      lrow[mt][r] += __shfl_xor_sync(0xffffffffu, lrow[mt][r], 2);
      inv[r] = lrow[mt][r] > 0.f ? 1.f / lrow[mt][r] : 0.f;
    }
    if (MODE != 1) {
#pragma unroll
      for (int r = 0; r < 2; r++) {
        int row = ra + r * 8;
        if (row < SQ) {
          unsigned *orow = (unsigned *)(out + mlc_attn_row<H, SQ, D, RSO>(bh, row));
#pragma unroll
          for (int t = 0; t < D / 8; t++) orow[t * 4 + tq] = mlc_attn_pack<BF>(o[mt][t][2 * r] * inv[r], o[mt][t][2 * r + 1] * inv[r]);
          if (MODE == 2 && tq == 0) stats[(size_t)bh * SQ + row] = mrow[mt][r] + log2f(lrow[mt][r]);
        }
      }
    } else {
#pragma unroll
      for (int r = 0; r < 2; r++) {
        int row = ra + r * 8;
        bool ok = row < SQ;
        size_t base = ((size_t)bh * SQ + (ok ? row : 0)) * D;
        const unsigned *grow = (const unsigned *)(g + base);
        float dsum = 0.f;
#pragma unroll
        for (int t = 0; t < D / 8; t++) {
          unsigned gw = ok ? grow[t * 4 + tq] : 0u;
          dsum += mlc_attn_lo<BF>(gw) * o[mt][t][2 * r] + mlc_attn_hi<BF>(gw) * o[mt][t][2 * r + 1];
          if (ok) { dq[base + t * 8 + 2 * tq] = 0.f; dq[base + t * 8 + 2 * tq + 1] = 0.f; }
        }
        dsum += __shfl_xor_sync(0xffffffffu, dsum, 1);
        dsum += __shfl_xor_sync(0xffffffffu, dsum, 2);
        if (ok && tq == 0) {
          stats[(size_t)bh * SQ + row] = mrow[mt][r] + log2f(lrow[mt][r]);
          stats[(size_t)BH * SQ + (size_t)bh * SQ + row] = dsum * inv[r];
        }
      }
    }
  }
}

// attention_grad's main pass on tensor cores (16-bit T, D % 32 == 0): a block
// is 16*W keys of one (batch, head), W warps of 16 keys; it walks the query
// rows BQ at a time (causal: from its first key on), recomputing
// S^T = k q^T and dP^T = v dO^T, then P = exp2(S sl2 - lse2),
// dS = P (dP - D); dV += P^T dO and dK += dS^T q in registers, and
// dq += dS k by f32 atomics (red.v4 on sm_90) into dq (scaled later).  Writes dk, dv.
// More keys per block means fewer passes over q and dO and fewer dq atomics.
// H > 0: packed (mlc_attn_row): q, k, v one [b, s, 3H, D], g [b, s, H, D],
// and dk, dv written into out [b, s, 3H, D] (dq's accumulator stays [BH][S][D]).
// PART 0: all of that.  Past head dim 128 a warp's 16 keys of dk and dv
// would take D registers a thread (D / 2 each), so two launches share the work:
// PART 1 sums dv alone (S, P, P^T dO: no dP, no dq), PART 2 dk and dq.
template <class T, int D, int W, int BQ, int BH, int S, int CAUSAL, int H = 0, int PART = 0>
MLC_FN void mlc_attn_bwd_tc(const T *g, const T *q, const T *k, const T *v, T *out, const float *lse2, const float *dsum,
                            float *dq, float scale, float sl2) {
  const bool BF = mlc_attn_isbf<T>::v;
  const int BN = 16 * W, LD = D + 8, LDS = BQ + 8, NTH = 32 * W, NJ = (S + BN - 1) / BN, NI = (S + BQ - 1) / BQ;
  /* dq's product: BQ / 16 row tiles, the warps of each taking COLS columns */
  const int RT = BQ / 16, COLS = D / (W / RT);
  /* ... CH of them at a time (one chunk at head dims up to 128) */
  const int CH = COLS <= 64 ? COLS : COLS % 64 == 0 ? 64 : COLS % 32 == 0 ? 32 : 16;
  constexpr bool DK = PART != 1, DV = PART != 2;
  static_assert(W % RT == 0 && COLS % 16 == 0 && 2 * BQ <= NTH && PART >= 0 && PART <= 2, "attention_grad tile");
  int jt, bh;
  if (CAUSAL) { jt = (int)(blockIdx.x / BH); bh = (int)(blockIdx.x % BH); }
  else { jt = (int)(blockIdx.x % NJ); bh = (int)(blockIdx.x / NJ); }
  const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5, gq = lane >> 2, tq = lane & 3;
  const int j0 = jt * BN;
  const int RSI = H ? 3 * H * D : D, RSG = H ? H * D : D;
  const size_t hb = (size_t)bh * S * D;
  const T *qb = q + mlc_attn_row<H, S, D, RSI>(bh, 0), *gb = g + mlc_attn_row<H, S, D, RSG>(bh, 0);
  const T *kb = H ? qb + H * D : k + hb, *vb = H ? qb + 2 * H * D : v + hb;
  unsigned short *sK = (unsigned short *)mlc_attn_sm, *sV = sK + BN * LD, *sQ = sV + BN * LD, *sG = sQ + 2 * BQ * LD,
                 *sS = sG + 2 * BQ * LD;
  float *sL = (float *)(sS + BN * LDS); /* [2][2][BQ]: lse2, D */
  const float *lse = lse2 + (size_t)bh * S, *dsm = dsum + (size_t)bh * S;
  const int ib = CAUSAL ? j0 / BQ : 0;
  mlc_attn_ld<D, BN, NTH, S, RSI>(sK, kb, j0);
  if constexpr (DK) mlc_attn_ld<D, BN, NTH, S, RSI>(sV, vb, j0);
  mlc_attn_ld<D, BQ, NTH, S, RSI>(sQ, qb, ib * BQ);
  mlc_attn_ld<D, BQ, NTH, S, RSG>(sG, gb, ib * BQ);
  mlc_attn_commit();
  if (tid < 2 * BQ) {
    int i = ib * BQ + (tid & (BQ - 1));
    sL[tid] = i < S ? (tid < BQ ? lse[i] : dsm[i]) : 0.f;
  }
  float dk[DK ? D / 8 : 1][4], dv[DV ? D / 8 : 1][4];
#pragma unroll
  for (int t = 0; t < D / 8; t++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      if constexpr (DK) dk[t][e] = 0.f;
      if constexpr (DV) dv[t][e] = 0.f;
    }
  const int ka = j0 + w * 16 + gq; /* this thread's keys: ka, ka + 8 */
  for (int it = ib; it < NI; it++) {
    const int buf = (it - ib) & 1, i0 = it * BQ;
    mlc_attn_wait();
    __syncthreads();
    if (it + 1 < NI) {
      mlc_attn_ld<D, BQ, NTH, S, RSI>(sQ + (buf ^ 1) * BQ * LD, qb, i0 + BQ);
      mlc_attn_ld<D, BQ, NTH, S, RSG>(sG + (buf ^ 1) * BQ * LD, gb, i0 + BQ);
      mlc_attn_commit();
      if (tid < 2 * BQ) {
        int i = i0 + BQ + (tid & (BQ - 1));
        sL[(buf ^ 1) * 2 * BQ + tid] = i < S ? (tid < BQ ? lse[i] : dsm[i]) : 0.f;
      }
    }
    const unsigned short *cQ = sQ + buf * BQ * LD, *cG = sG + buf * BQ * LD;
    const float *cL = sL + buf * 2 * BQ;
    float st[BQ / 8][4], dp[BQ / 8][4];
#pragma unroll
    for (int t = 0; t < BQ / 8; t++)
#pragma unroll
      for (int e = 0; e < 4; e++) st[t][e] = dp[t][e] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
      unsigned ak[4], av[4];
      mlc_attn_ldm(ak, mlc_attn_saddr(sK + (w * 16 + (lane & 15)) * LD + kk * 16 + (lane >> 4) * 8));
      if constexpr (DK) mlc_attn_ldm(av, mlc_attn_saddr(sV + (w * 16 + (lane & 15)) * LD + kk * 16 + (lane >> 4) * 8));
#pragma unroll
      for (int nn = 0; nn < BQ / 16; nn++) {
        unsigned b[4];
        int off = (nn * 16 + (lane & 7) + ((lane >> 4) << 3)) * LD + kk * 16 + ((lane >> 3) & 1) * 8;
        mlc_attn_ldm(b, mlc_attn_saddr(cQ + off));
        mlc_attn_mma<BF>(st[2 * nn], ak, b[0], b[1]);
        mlc_attn_mma<BF>(st[2 * nn + 1], ak, b[2], b[3]);
        if constexpr (DK) {
          mlc_attn_ldm(b, mlc_attn_saddr(cG + off));
          mlc_attn_mma<BF>(dp[2 * nn], av, b[0], b[1]);
          mlc_attn_mma<BF>(dp[2 * nn + 1], av, b[2], b[3]);
        }
      }
    }
#pragma unroll
    for (int t = 0; t < BQ / 8; t++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        int qi = t * 8 + 2 * tq + (e & 1), qg = i0 + qi, key = ka + (e >> 1) * 8;
        float p = exp2f(st[t][e] * sl2 - cL[qi]);
        if (qg >= S || key >= S || (CAUSAL && key > qg)) p = 0.f;
        st[t][e] = p;
        if constexpr (DK) dp[t][e] = p * (dp[t][e] - cL[BQ + qi]);
      }
#pragma unroll
    for (int kk = 0; kk < BQ / 16; kk++) {
      unsigned ap[4], as[4];
      ap[0] = mlc_attn_pack<BF>(st[2 * kk][0], st[2 * kk][1]);
      ap[1] = mlc_attn_pack<BF>(st[2 * kk][2], st[2 * kk][3]);
      ap[2] = mlc_attn_pack<BF>(st[2 * kk + 1][0], st[2 * kk + 1][1]);
      ap[3] = mlc_attn_pack<BF>(st[2 * kk + 1][2], st[2 * kk + 1][3]);
      if constexpr (DK) {
        as[0] = mlc_attn_pack<BF>(dp[2 * kk][0], dp[2 * kk][1]);
        as[1] = mlc_attn_pack<BF>(dp[2 * kk][2], dp[2 * kk][3]);
        as[2] = mlc_attn_pack<BF>(dp[2 * kk + 1][0], dp[2 * kk + 1][1]);
        as[3] = mlc_attn_pack<BF>(dp[2 * kk + 1][2], dp[2 * kk + 1][3]);
        unsigned *srow = (unsigned *)(sS + (w * 16 + gq) * LDS + kk * 16 + 2 * tq);
        srow[0] = as[0];
        srow[4 * LDS] = as[1];
        srow[4] = as[2];
        srow[4 * LDS + 4] = as[3];
      }
#pragma unroll
      for (int dn = 0; dn < D / 16; dn++) {
        unsigned b[4];
        int off = (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * LD + dn * 16 + (lane >> 4) * 8;
        if constexpr (DV) {
          mlc_attn_ldmt(b, mlc_attn_saddr(cG + off));
          mlc_attn_mma<BF>(dv[2 * dn], ap, b[0], b[1]);
          mlc_attn_mma<BF>(dv[2 * dn + 1], ap, b[2], b[3]);
        }
        if constexpr (DK) {
          mlc_attn_ldmt(b, mlc_attn_saddr(cQ + off));
          mlc_attn_mma<BF>(dk[2 * dn], as, b[0], b[1]);
          mlc_attn_mma<BF>(dk[2 * dn + 1], as, b[2], b[3]);
        }
      }
    }
    if constexpr (!DK) continue; /* PART 1: no dq */
    __syncthreads();
    /* dq[i0 .. i0+BQ][:] += dS k: warp w takes 16 rows (w % RT) and COLS columns (w / RT), CH at a time */
    for (int c0 = 0; c0 < COLS; c0 += CH) {
      const int qt = w % RT, dh = w / RT;
      float acc[CH / 8][4];
#pragma unroll
      for (int t = 0; t < CH / 8; t++) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0.f;
#pragma unroll
      for (int kk = 0; kk < BN / 16; kk++) {
        unsigned a[4];
        mlc_attn_ldmt(a, mlc_attn_saddr(sS + (kk * 16 + ((lane >> 4) << 3) + (lane & 7)) * LDS + qt * 16 + ((lane >> 3) & 1) * 8));
#pragma unroll
        for (int dn = 0; dn < CH / 16; dn++) {
          unsigned b[4];
          mlc_attn_ldmt(b, mlc_attn_saddr(sK + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * LD + dh * COLS + c0 + dn * 16 + (lane >> 4) * 8));
          mlc_attn_mma<BF>(acc[2 * dn], a, b[0], b[1]);
          mlc_attn_mma<BF>(acc[2 * dn + 1], a, b[2], b[3]);
        }
      }
#if __CUDA_ARCH__ >= 900
      { /* lane pairs swap halves so that each adds 4 columns of one row: red.v4 */
        const bool odd = tq & 1;
        const int row = i0 + qt * 16 + gq + (odd ? 8 : 0);
        float *dr = dq + ((size_t)bh * S + (row < S ? row : 0)) * D + dh * COLS + c0 + 2 * (tq & ~1);
#pragma unroll
        for (int t = 0; t < CH / 8; t++) {
          float r0 = __shfl_xor_sync(0xffffffffu, odd ? acc[t][0] : acc[t][2], 1);
          float r1 = __shfl_xor_sync(0xffffffffu, odd ? acc[t][1] : acc[t][3], 1);
          float v0 = odd ? r0 : acc[t][0], v1 = odd ? r1 : acc[t][1], v2 = odd ? acc[t][2] : r0, v3 = odd ? acc[t][3] : r1;
          if (row < S)
            asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" :: "l"(dr + t * 8), "f"(v0), "f"(v1), "f"(v2), "f"(v3) : "memory");
        }
      }
#else
#pragma unroll
      for (int r = 0; r < 2; r++) {
        int row = i0 + qt * 16 + gq + r * 8;
        if (row < S) {
          float *dr = dq + ((size_t)bh * S + row) * D + dh * COLS + c0 + 2 * tq;
#pragma unroll
          for (int t = 0; t < CH / 8; t++) {
            atomicAdd(dr + t * 8, acc[t][2 * r]);
            atomicAdd(dr + t * 8 + 1, acc[t][2 * r + 1]);
          }
        }
      }
#endif
    }
  }
#pragma unroll
  for (int r = 0; r < 2; r++)
    if (ka + r * 8 < S) mlc_attn_store_dkv<T, D, BH, S, H, PART>(out, bh, ka + r * 8, r, tq, &dk[0][0], &dv[0][0], scale);
}

// attention_grad_saved's first pass: dsum[row] = dO . o (o: the saved
// forward output), and that row of dq's f32 accumulator zeroed (dq != 0).
// L lanes a row (a power of two, at most 32), 32 / L rows a warp, 8 warps a
// block; where D % 4 == 0 each lane reads 4 elements at a time.
// H > 0: g and o packed [b, s, H, D].
// The accumulator has RP >= ROWS rows of D (mlc_attn_bwd_wg's FR: the query
// tiles padded to 64 rows), all zeroed; the grid covers RP rows.
template <class T, int D, int ROWS, int S, int H = 0, int L = 32, int RP = ROWS>
MLC_FN void mlc_attn_prep(const T *g, const T *o, float *dsum, float *dq) {
  static_assert(L > 0 && L <= 32 && (L & (L - 1)) == 0 && RP >= ROWS, "lanes a row");
  const int lane = threadIdx.x & 31, l = lane % L;
  const int row = ((int)blockIdx.x * 8 + (int)(threadIdx.x >> 5)) * (32 / L) + lane / L;
  const bool in = row < ROWS; /* no early return before the shuffles, which take every lane */
  float acc = 0.f;
  if (in) {
    const size_t at = mlc_attn_row<H, S, D, H * D>(row / S, row % S);
    if constexpr (D % 4 == 0) {
      const mlc_x4<T> *gr = (const mlc_x4<T> *)(g + at), *orow = (const mlc_x4<T> *)(o + at);
#pragma unroll
      for (int e = l; e < D / 4; e += L) {
        const mlc_x4<T> a = gr[e], b = orow[e];
#pragma unroll
        for (int j = 0; j < 4; j++) acc += to_f32(a.v[j]) * to_f32(b.v[j]);
      }
    } else {
#pragma unroll
      for (int e = l; e < D; e += L) acc += to_f32(g[at + e]) * to_f32(o[at + e]);
    }
  }
#pragma unroll
  for (int m = L / 2; m > 0; m >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, m);
  if (in && l == 0) dsum[row] = acc;
  if (!dq || row >= RP) return; /* the f32 gradient has no accumulator to zero */
  float4 *z = (float4 *)(dq + (size_t)row * D);
  for (int e = l; e < D / 4; e += L) z[e] = make_float4(0.f, 0.f, 0.f, 0.f);
}

// out[i] = x[i] * scale in T, for the n = BH * S * D elements of dq
// (dq's conversion); H > 0: into dq's place in a packed [b, s, 3H, D].
// Where D % 4 == 0, 4 elements a thread at a time: one float4 in, 4 T out.
// FR (D 64 or 128, sm_90a, where mlc_attn_bwd_wg wrote x in fragment
// order): a warp takes one row pair of a 64-row chunk, lane (8 columns o,
// tq) the float4 o x 128 + tq of that pair's 4 (as the kernel's threads
// wrote them), and stores 2 columns of each row: a row's 64 columns in one
// store instruction of the warp.
template <class T, int D = 1, int S = 1, int H = 0, int FR = 0>
MLC_FN void mlc_attn_cvt(const float *x, T *out, size_t n, float scale) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if constexpr (FR) {
    constexpr int NC = D / 64, NI = (S + 63) / 64;
    const size_t warps = n / ((size_t)S * D) * NI * NC * 32; /* (bh, tile, chunk) x 32 row pairs */
    const int lane = threadIdx.x & 31, o = lane >> 2, tq = lane & 3;
    for (size_t gw = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; gw < warps; gw += ((size_t)gridDim.x * blockDim.x) >> 5) {
      const size_t ch = gw / 32;
      const int wq = (int)(gw % 32) /* 8 w + gq */, c = (int)(ch % NC) * 64 + 8 * o + 2 * tq;
      const int bh = (int)(ch / (NC * NI)), row = (int)(ch / NC % NI) * 64 + (wq >> 3) * 16 + (wq & 7);
      const float4 a = ((const float4 *)x)[ch * 1024 + o * 128 + wq * 4 + tq];
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const int r = row + 8 * h;
        if (r < S)
          mlc_attn_st2(out + mlc_attn_row<H, S, D, 3 * H * D>(bh, r), c / 2,
                       (h ? a.z : a.x) * scale, (h ? a.w : a.y) * scale);
      }
    }
    return;
  }
#endif
  constexpr int V = D % 4 == 0 ? 4 : 1;
  for (size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * V; i < n; i += (size_t)gridDim.x * blockDim.x * V) {
    size_t r = i / D, to = H ? mlc_attn_row<H, S, D, 3 * H * D>((int)(r / S), (int)(r % S)) + i % D : i;
    if constexpr (V == 4) {
      const float4 a = *(const float4 *)(x + i);
      mlc_x4<T> b;
      b.v[0] = from_f32<T>(a.x * scale), b.v[1] = from_f32<T>(a.y * scale);
      b.v[2] = from_f32<T>(a.z * scale), b.v[3] = from_f32<T>(a.w * scale);
      *(mlc_x4<T> *)(out + to) = b;
    } else {
      out[to] = from_f32<T>(x[i] * scale);
    }
  }
}

// The SIMT forms (any float T, any head dims), one warp per row, exact f32.
// Forward: a warp per query row; lanes take keys 32 at a time, then columns
// of v.  MODE 1: attention_grad's statistics (natural log): stats[row] = lse,
// stats[BH*SQ + row] = dO.o.
template <class T, int D, int DV, int BH, int SQ, int SK, int CAUSAL, int MODE>
MLC_FN void mlc_attn_fwd_simt(const T *q, const T *k, const T *v, T *out, const T *g, float *stats, float scale) {
  const int NV = (DV + 31) / 32;
  const int row = (int)blockIdx.x * 4 + (int)(threadIdx.x >> 5), lane = threadIdx.x & 31;
  if (row >= BH * SQ) return;
  const int bh = row / SQ, i = row - bh * SQ;
  const T *qr = q + (size_t)row * D, *kb = k + (size_t)bh * SK * D, *vb = v + (size_t)bh * SK * DV;
  float acc[NV];
#pragma unroll
  for (int t = 0; t < NV; t++) acc[t] = 0.f;
  float m = -MLC_INF, l = 0.f;
  const int nk = CAUSAL ? (i + 1 < SK ? i + 1 : SK) : SK;
  for (int j0 = 0; j0 < nk; j0 += 32) {
    const int j = j0 + lane;
    float s = -MLC_INF;
    if (j < nk) {
      const T *kr = kb + (size_t)j * D;
      float a = 0.f;
      for (int d = 0; d < D; d++) a = fmaf(to_f32(qr[d]), to_f32(kr[d]), a);
      s = a * scale;
    }
    const float mx = fmaxf(m, mlc_warp_max(s));
    const float corr = expf(m - mx);
    const float p = j < nk ? expf(s - mx) : 0.f;
    l = l * corr + mlc_warp_sum(p);
    m = mx;
#pragma unroll
    for (int t = 0; t < NV; t++) acc[t] *= corr;
    const int cnt = nk - j0 < 32 ? nk - j0 : 32;
    for (int jj = 0; jj < cnt; jj++) {
      const float pj = __shfl_sync(0xffffffffu, p, jj);
      const T *vr = vb + (size_t)(j0 + jj) * DV;
#pragma unroll
      for (int t = 0; t < NV; t++)
        if (lane + 32 * t < DV) acc[t] = fmaf(pj, to_f32(vr[lane + 32 * t]), acc[t]);
    }
  }
  const float inv = 1.f / l;
  if (MODE == 0) {
#pragma unroll
    for (int t = 0; t < NV; t++)
      if (lane + 32 * t < DV) out[(size_t)row * DV + lane + 32 * t] = from_f32<T>(acc[t] * inv);
  } else {
    float ds = 0.f;
#pragma unroll
    for (int t = 0; t < NV; t++)
      if (lane + 32 * t < DV) ds = fmaf(to_f32(g[(size_t)row * DV + lane + 32 * t]), acc[t] * inv, ds);
    ds = mlc_warp_sum(ds);
    if (lane == 0) { stats[row] = m + logf(l); stats[(size_t)BH * SQ + row] = ds; }
  }
}

// P and dS of query i against key j (SIMT backward), from the statistics.
template <class T, int D>
MLC_FN void mlc_attn_pds(const T *qi, const T *gi, const T *kj, const T *vj, float lse, float dsum, float scale,
                         float *p, float *ds) {
  float s = 0.f, dp = 0.f;
  for (int d = 0; d < D; d++) {
    s = fmaf(to_f32(qi[d]), to_f32(kj[d]), s);
    dp = fmaf(to_f32(gi[d]), to_f32(vj[d]), dp);
  }
  *p = expf(s * scale - lse);
  *ds = *p * (dp - dsum);
}

// dk, dv: a warp per key row; lanes take queries 32 at a time, then columns.
template <class T, int D, int BH, int S, int CAUSAL>
MLC_FN void mlc_attn_bwd_kv_simt(const T *g, const T *q, const T *k, const T *v, T *out, const float *stats, float scale) {
  const int NV = (D + 31) / 32;
  const int row = (int)blockIdx.x * 4 + (int)(threadIdx.x >> 5), lane = threadIdx.x & 31;
  if (row >= BH * S) return;
  const int bh = row / S, j = row - bh * S;
  const size_t hb = (size_t)bh * S * D, N = (size_t)BH * S * D;
  const T *kj = k + (size_t)row * D, *vj = v + (size_t)row * D;
  float dk[NV], dv[NV];
#pragma unroll
  for (int t = 0; t < NV; t++) dk[t] = dv[t] = 0.f;
  for (int i0 = CAUSAL ? j : 0; i0 < S; i0 += 32) {
    const int i = i0 + lane;
    float p = 0.f, ds = 0.f;
    if (i < S)
      mlc_attn_pds<T, D>(q + hb + (size_t)i * D, g + hb + (size_t)i * D, kj, vj, stats[(size_t)bh * S + i],
                         stats[N / D + (size_t)bh * S + i], scale, &p, &ds);
    const int cnt = S - i0 < 32 ? S - i0 : 32;
    for (int ii = 0; ii < cnt; ii++) {
      const float pi = __shfl_sync(0xffffffffu, p, ii), dsi = __shfl_sync(0xffffffffu, ds, ii);
      const T *qr = q + hb + (size_t)(i0 + ii) * D, *gr = g + hb + (size_t)(i0 + ii) * D;
#pragma unroll
      for (int t = 0; t < NV; t++)
        if (lane + 32 * t < D) {
          dv[t] = fmaf(pi, to_f32(gr[lane + 32 * t]), dv[t]);
          dk[t] = fmaf(dsi, to_f32(qr[lane + 32 * t]), dk[t]);
        }
    }
  }
#pragma unroll
  for (int t = 0; t < NV; t++)
    if (lane + 32 * t < D) {
      out[N + (size_t)row * D + lane + 32 * t] = from_f32<T>(dk[t] * scale);
      out[2 * N + (size_t)row * D + lane + 32 * t] = from_f32<T>(dv[t]);
    }
}

// dq: a warp per query row; lanes take keys 32 at a time, then columns.
template <class T, int D, int BH, int S, int CAUSAL>
MLC_FN void mlc_attn_bwd_q_simt(const T *g, const T *q, const T *k, const T *v, T *out, const float *stats, float scale) {
  const int NV = (D + 31) / 32;
  const int row = (int)blockIdx.x * 4 + (int)(threadIdx.x >> 5), lane = threadIdx.x & 31;
  if (row >= BH * S) return;
  const int bh = row / S, i = row - bh * S;
  const size_t hb = (size_t)bh * S * D;
  const float lse = stats[row], dsum = stats[(size_t)BH * S + row];
  const T *qi = q + (size_t)row * D, *gi = g + (size_t)row * D;
  float acc[NV];
#pragma unroll
  for (int t = 0; t < NV; t++) acc[t] = 0.f;
  const int nk = CAUSAL ? i + 1 : S;
  for (int j0 = 0; j0 < nk; j0 += 32) {
    const int j = j0 + lane;
    float p = 0.f, ds = 0.f;
    if (j < nk) mlc_attn_pds<T, D>(qi, gi, k + hb + (size_t)j * D, v + hb + (size_t)j * D, lse, dsum, scale, &p, &ds);
    const int cnt = nk - j0 < 32 ? nk - j0 : 32;
    for (int jj = 0; jj < cnt; jj++) {
      const float dsj = __shfl_sync(0xffffffffu, ds, jj);
      const T *kr = k + hb + (size_t)(j0 + jj) * D;
#pragma unroll
      for (int t = 0; t < NV; t++)
        if (lane + 32 * t < D) acc[t] = fmaf(dsj, to_f32(kr[lane + 32 * t]), acc[t]);
    }
  }
#pragma unroll
  for (int t = 0; t < NV; t++)
    if (lane + 32 * t < D) out[(size_t)row * D + lane + 32 * t] = from_f32<T>(acc[t] * scale);
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// wgmma m64nNk16 (N 128 or 64) with A from registers (four 16-bit pairs,
// mma.sync's A fragment layout) and B from a shared-memory descriptor; f32
// accumulators.
template <bool BF, int N = 128> struct mlc_attn_wgr;
template <> struct mlc_attn_wgr<true, 128> {
  template <int TB> static MLC_FN void mma(float *d, const unsigned *a, unsigned long long b) {
    asm volatile("{ .reg .pred p; setp.ne.b32 p, %69, 0; wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, {%64,%65,%66,%67}, %68, p, 1, 1, %70; }"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1), "n"(TB)); }
};
template <> struct mlc_attn_wgr<false, 128> {
  template <int TB> static MLC_FN void mma(float *d, const unsigned *a, unsigned long long b) {
    asm volatile("{ .reg .pred p; setp.ne.b32 p, %69, 0; wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, {%64,%65,%66,%67}, %68, p, 1, 1, %70; }"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1), "n"(TB)); }
};
template <> struct mlc_attn_wgr<true, 64> {
  template <int TB> static MLC_FN void mma(float *d, const unsigned *a, unsigned long long b) {
    asm volatile("{ .reg .pred p; setp.ne.b32 p, %37, 0; wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, {%32,%33,%34,%35}, %36, p, 1, 1, %38; }"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1), "n"(TB)); }
};
template <> struct mlc_attn_wgr<false, 64> {
  template <int TB> static MLC_FN void mma(float *d, const unsigned *a, unsigned long long b) {
    asm volatile("{ .reg .pred p; setp.ne.b32 p, %37, 0; wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, {%32,%33,%34,%35}, %36, p, 1, 1, %38; }"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1), "n"(TB)); }
};
#endif
// Forward on Hopper's wgmma (sm_90a; 16-bit T, D 128 or 64; MODE 0 or 2 as
// mlc_attn_fwd_tc's; causal: each work item stops at its diagonal, the last
// tiles first).  A work item is 128 query rows of one (batch, head); the
// block is persistent and takes one item of each round of gridDim.x items,
// rounds in turn forwards and backwards (the launch: at most a block a
// multiprocessor).  Two consumer warpgroups of
// 64 rows and a producer warpgroup (384 threads; the producer gives up
// registers by setmaxnreg, the consumers take them).  Producer warp 0 loads
// keys and values 128 at a time into an NS-stage ring by TMA, the blocks of
// all the block's items one after another; warp 1 loads each item's q once
// both consumers have issued their last scores of the previous item, so the
// next item's q and first keys land under this one's last products and
// stores (tensor maps mq, mk, mv: boxes of 64 columns x 128 rows x 1 of
// [BH][S][D], or packed of [b][S][3 H D]; D / 64 a tile), each stage's
// bytes counted on its mbarrier; a stage is refilled once both consumers
// have released it: the consumers never wait on each other.  Rows past S
// read as zeros (the map's bounds).  Tiles lie in
// 128-byte-swizzled shared memory: each 128 x D tile is D / 64 64-column
// blocks of 128 rows x 128 bytes (a 16-byte chunk c of row r at block
// c / 8, r * 128, swizzled by r % 8), which is q's and k's K-major layout
// for S = q k^T and, read the other way, v's MN-major one for o += p v.
// S is one wgmma chain from shared memory; p stays in registers as the A
// operand of p v (the S accumulators' layout is the A fragment's).  Online
// softmax in base 2 as mlc_attn_fwd_tc's.
// Elsewhere than sm_90a the same launch runs mlc_attn_fwd_tc with 8 warps
// on each of the block's items in turn, keys 64 at a time (the producer
// warpgroup returns).
// Shared memory: (1 + 2 NS) x D / 4 KiB, the barriers, 1 KiB of alignment
// (attn_wg_smem in emit_attention.c).
// Rows [r0, r0 + R) of 128 16-bit columns (rows RS elements apart, rows
// past S zero) into that layout by NTH threads: two 64-column blocks of R
// rows x 128 bytes, block 1 at R * 128 bytes.
template <int R, int S, int RS, int NTH = 256, int UNROLL = R * 16 / NTH>
MLC_FN void mlc_attn_ldsw(unsigned base, const unsigned short *g, int r0, int tid) {
#pragma unroll UNROLL
  for (int i = 0; i < R * 16 / NTH; i++) {
    int ch = tid + i * NTH, r = ch >> 4, c = ch & 15, gr = r0 + r;
    bool ok = gr < S;
    mlc_attn_cp16(base + (c >> 3) * (R * 128) + r * 128 + (((c & 7) ^ (r & 7)) << 4), g + (size_t)(ok ? gr : 0) * RS + c * 8, ok);
  }
}
template <class T, int D, int NS, int BH, int SQ, int SK, int CAUSAL, int MODE, int H = 0>
MLC_FN void mlc_attn_fwd_wg(const T *q, const T *k, const T *v, T *out, const T *g, float *stats, float *dq, float sl2,
                            const mlc_tmap &mq, const mlc_tmap &mk, const mlc_tmap &mv) {
  constexpr int BM = 128, NT = (SQ + BM - 1) / BM, TILES = NT * BH;
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int BKV = 128, TILE = BM * D * 2, NB = D / 64, RSO = H ? H * D : D, NKB = (SK + BKV - 1) / BKV;
  constexpr bool BF = mlc_attn_isbf<T>::v;
  static_assert(MODE != 1 && (H == 0 || SQ == SK) && (D == 64 || D == 128), "attention tile");
  (void)g, (void)dq, (void)q, (void)k, (void)v;
  /* work item t: a 128-row query tile of one (batch, head); causal: the longest (last) tiles first */
  auto tile_of = [](int t) { return CAUSAL ? NT - 1 - t / BH : t % NT; };
  /* the block's item of round r: rounds of gridDim.x items, taken in turn forwards and backwards (so that, causal,
     a block that had one of the longest items of a round has one of the shortest of the next), past TILES none */
  auto item = [](int r) { return r * (int)gridDim.x + (r & 1 ? (int)gridDim.x - 1 - (int)blockIdx.x : (int)blockIdx.x); };
  auto bh_of = [](int t) { return CAUSAL ? t % BH : t / NT; };
  auto nkb_of = [](int tile) {
    int n = NKB;
    if (CAUSAL) { int lim = ((tile * BM + BM < SQ ? tile * BM + BM : SQ) + BKV - 1) / BKV; n = lim < n ? lim : n; }
    return n;
  };
  const int tid = threadIdx.x, wg = tid >> 7, lane = tid & 31, w = (tid >> 5) & 3, gq = lane >> 2, tq = lane & 3;
  const unsigned sb = mlc_attn_saddr(mlc_attn_sm), s0 = (sb + 1023) & ~1023u, sQ = s0;
  auto sK = [&](int b) { return s0 + TILE * (1 + b); };
  auto sV = [&](int b) { return s0 + TILE * (1 + NS + b); };
  /* mbarriers after the tiles: full[NS] (k and v of a stage landed), empty[NS] (both consumers done with it),
     q's (landed) and q's empty (both consumers' last scores of the tile are done) */
  const unsigned bar = s0 + TILE * (1 + 2 * NS);
  auto full = [&](int b) { return bar + 8 * b; };
  auto empty = [&](int b) { return bar + 8 * (NS + b); };
  const unsigned qbar = bar + 16 * NS, qempty = qbar + 8;
  if (tid == 0) {
    for (int b = 0; b < NS; b++) { mlc_mbar_init(full(b), 1); mlc_mbar_init(empty(b), 256); }
    mlc_mbar_init(qbar, 1);
    mlc_mbar_init(qempty, 256);
    mlc_mbar_fence_init();
  }
  __syncthreads();
  /* The block is persistent: it takes the items item(0), item(1), ... (the launch: at most one block a
     multiprocessor), so that the next item's q and first keys and values load while this one's last products,
     normalisation and stores run.  Warp 0 of the producer loads k and v, NS blocks ahead of the consumers, the
     blocks of all items in one ring; warp 1 loads each item's q once the consumers are done with the last. */
  if (wg == 2) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (tid == 256 || tid == 288) {
      constexpr int HH = H ? H : 1;
      if (tid == 256) mlc_tma_prefetch(mk), mlc_tma_prefetch(mv);
      else mlc_tma_prefetch(mq);
      int it = 0; /* k and v blocks issued, over all items */
#pragma unroll 1
      for (int r = 0, n = 0; r * (int)gridDim.x < TILES; r++, n++) {
        const int t = item(r);
        if (t >= TILES) continue; /* the last round's */
        const int tile = tile_of(t), bh = bh_of(t), nkb = nkb_of(tile);
        /* q's, k's and v's first column and the third coordinate of this (batch, head) */
        const int z = H ? bh / HH : bh, qc = H ? (bh % HH) * D : 0, kc = H ? H * D + qc : 0, vc = H ? 2 * H * D + qc : 0;
        if (tid == 288) {
          if (n) mlc_mbar_wait(qempty, (n - 1) & 1);
          mlc_mbar_expect_tx(qbar, TILE);
#pragma unroll
          for (int c = 0; c < NB; c++) mlc_tma_load3(sQ + c * 16384, mq, qc + 64 * c, tile * BM, z, qbar);
          continue;
        }
#pragma unroll 1
        for (int j = 0; j < nkb; j++, it++) {
          const int b = it % NS;
          if (it >= NS) mlc_mbar_wait(empty(b), ((it / NS) - 1) & 1);
#ifndef MLC_ATTN_PROBE_NOLOAD /* bench/attn_probe.sh: the consumers' speed without the loads */
          mlc_mbar_expect_tx(full(b), 2 * TILE);
#pragma unroll
          for (int c = 0; c < NB; c++) {
            mlc_tma_load3(sK(b) + c * 16384, mk, kc + 64 * c, j * BKV, z, full(b));
            mlc_tma_load3(sV(b) + c * 16384, mv, vc + 64 * c, j * BKV, z, full(b));
          }
#else
          mlc_mbar_arrive(full(b));
#endif
        }
      }
    }
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
  // Two consumer warpgroups of 64 rows.  Block j's S = q k^T is issued
  // before block j - 1's o += p v, and its softmax runs while that product
  // does; o is rescaled once that product is done.
  constexpr int NO = D / 2; /* o's accumulators a thread */
  float o[NO], s[64], mrow[2] = {-MLC_INF, -MLC_INF}, lrow[2] = {0.f, 0.f}, corr[2] = {1.f, 1.f}; /* and each item's */
  unsigned pa[8][4];
  /* the work item's tile, (batch, head), key blocks, this thread's rows (r0, r0 + 8), and the ring index of its
     first key block */
  int tile = 0, bh = 0, nkb = 0, r0 = 0, it0 = 0;
  // scores of block j into s (issued, not waited for)
  auto issue_s = [&](int j) {
    const int b = (it0 + j) % NS;
    mlc_mbar_wait(full(b), ((it0 + j) / NS) & 1);
    mlc_fence_async_smem();
#pragma unroll
    for (int i = 0; i < 64; i++) {
      if constexpr (CAUSAL) s[i] = 0.f;
      mlc_wg_fence_operand(s[i]);
    }
    mlc_wg_fence();
    /* not causal, the first k-step overwrites s (acc 0): no zeroing, 64 instructions a thread a key block fewer.
       Causal, s is zeroed and every k-step adds: on an H100 the acc-0 form made the causal forward slower (d 64,
       s 1000: 0.0714-0.0725 -> 0.0761-0.0773 ms; d 128, s 4096: 0.2516-0.2536 -> 0.2533-0.2601) while it made the
       others faster (d 128, s 1024: 0.1365-0.1382 -> 0.1308-0.1311; d 64: 0.0964-0.0972 -> 0.0905-0.0915):
       bench/results/s38-2026-12-07.md */
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
      unsigned off = (unsigned)((kk >> 2) * 16384 + (kk & 3) * 32);
      mlc_wgmma<T, 128>::template mma<0, 0>(s, mlc_wg_desc(sQ + wg * 8192 + off, 16), mlc_wg_desc(sK(b) + off, 16),
                                            CAUSAL || kk > 0);
    }
    mlc_wg_commit();
  };
  // block j's softmax on s (waited for): the new maxima, corr, s = exp2(...), lrow
  auto softmax = [&](int j) {
#pragma unroll
    for (int i = 0; i < 64; i++) mlc_wg_fence_operand(s[i]);
    // s[4i + e]: row r0 (+8 for e >= 2), key j0 + 8i + 2 tq (+1 for odd e)
    const int j0 = j * BKV;
    /* the maxima of the raw scores, then each p = ex2.approx.ftz(s sl2 - m) as one FFMA and one MUFU op (no
       exp2f denormal fix-ups, no separate scaling pass).  On the H200 (bench/results/attention-2026-12-03.md):
       b8 h16 s1024 d128 0.1433 -> 0.1378 ms, causal s4096 0.2824 -> 0.2608 ms, against exp2f of scaled scores. */
    float mx[2] = {-MLC_INF, -MLC_INF};
#pragma unroll
    for (int i = 0; i < 16; i++) {
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int key = j0 + 8 * i + 2 * tq + (e & 1);
        if ((SK % BKV && key >= SK) || (CAUSAL && key > r0 + (e >> 1) * 8)) s[4 * i + e] = -MLC_INF;
      }
      mx[0] = fmaxf(mx[0], fmaxf(s[4 * i], s[4 * i + 1]));
      mx[1] = fmaxf(mx[1], fmaxf(s[4 * i + 2], s[4 * i + 3]));
    }
    float ms[2], ls[2] = {0.f, 0.f};
#pragma unroll
    for (int r = 0; r < 2; r++) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
      const float m = fmaxf(mrow[r], mx[r] * sl2); /* sl2 > 0: the scaled maximum */
      ms[r] = m == -MLC_INF ? 0.f : m;
      corr[r] = exp2f(mrow[r] - ms[r]);
      mrow[r] = m;
    }
#pragma unroll
    for (int i = 0; i < 16; i++) {
#pragma unroll
      for (int e = 0; e < 4; e++) {
#ifndef MLC_ATTN_PROBE_NOEXP /* bench/attn_probe.sh: the speed without the exponentials */
        s[4 * i + e] = mlc_ex2(fmaf(s[4 * i + e], sl2, -ms[e >> 1]));
#else
        s[4 * i + e] = fmaf(s[4 * i + e], sl2, -ms[e >> 1]);
#endif
      }
      ls[0] += s[4 * i] + s[4 * i + 1];
      ls[1] += s[4 * i + 2] + s[4 * i + 3];
    }
    lrow[0] = lrow[0] * corr[0] + ls[0];
    lrow[1] = lrow[1] * corr[1] + ls[1];
  };
  // o *= corr, and p (s as the A operand of p v: keys 16 kk .. 16 kk + 15)
  auto rescale_pack = [&]() {
#pragma unroll
    for (int i = 0; i < NO / 4; i++) {
      o[4 * i] *= corr[0]; o[4 * i + 1] *= corr[0]; o[4 * i + 2] *= corr[1]; o[4 * i + 3] *= corr[1];
    }
#pragma unroll
    for (int kk = 0; kk < 8; kk++)
#pragma unroll
      for (int r = 0; r < 4; r++) pa[kk][r] = mlc_attn_pack<BF>(s[8 * kk + 2 * r], s[8 * kk + 2 * r + 1]);
  };
  // o += p v for block j (issued)
  auto issue_pv = [&](int j) {
#pragma unroll
    for (int i = 0; i < NO; i++) mlc_wg_fence_operand(o[i]);
    mlc_wg_fence();
#pragma unroll
    for (int kk = 0; kk < 8; kk++) mlc_attn_wgr<BF, D>::template mma<1>(o, pa[kk], mlc_wg_desc(sV((it0 + j) % NS) + kk * 2048, 16384));
    mlc_wg_commit();
  };
  // Ping-pong: the warpgroups take turns to issue their products (named
  // barriers 1 and 2), so that one's softmax runs under the other's
  // products.  Each turn waits for the other's signal and then signals it;
  // warpgroup 1 signals first and leaves out its last signal, so that every
  // wait has its signal.
#ifndef MLC_ATTN_PROBE_NOTURN /* bench/attn_probe.sh: without the ping-pong */
  auto turn = [&]() { asm volatile("bar.sync %0, 256;" :: "r"(1 + wg) : "memory"); };
  auto pass = [&](bool last) {
    if (!(wg == 1 && last)) asm volatile("bar.arrive %0, 256;" :: "r"(2 - wg) : "memory");
  };
  if (wg == 1) asm volatile("bar.arrive 1, 256;" ::: "memory");
#else
  auto turn = [&]() {};
  auto pass = [&](bool) {};
#endif
#pragma unroll 1
  for (int r = 0, n = 0; r * (int)gridDim.x < TILES; r++, n++) {
    const int t = item(r);
    if (t >= TILES) continue; /* the last round's */
    tile = tile_of(t), bh = bh_of(t), nkb = nkb_of(tile), r0 = tile * BM + wg * 64 + w * 16 + gq;
    const bool final = item(r + 1) >= TILES; /* this block's last item (only the last round can lack one) */
#pragma unroll
    for (int i = 0; i < NO; i++) { o[i] = 0.f; mlc_wg_fence_operand(o[i]); }
#pragma unroll
    for (int r = 0; r < 2; r++) mrow[r] = -MLC_INF, lrow[r] = 0.f, corr[r] = 1.f;
    mlc_mbar_wait(qbar, n & 1);
    turn();
    issue_s(0);
    pass(false);
    mlc_wg_wait<0>();
    if (nkb == 1) mlc_mbar_arrive(qempty); /* q's last read */
    softmax(0);
    rescale_pack();
    /* the same groups in flight on every path (the last block peeled), so that ptxas sees which wait retires which */
#pragma unroll 1
    for (int j = 0; j + 1 < nkb; j++) {
      turn();
      issue_s(j + 1);
      issue_pv(j);
      pass(false);
      mlc_wg_wait<1>();
      if (j + 2 == nkb) mlc_mbar_arrive(qempty); /* q's last read */
      softmax(j + 1);
      mlc_wg_wait<0>();
#pragma unroll
      for (int i = 0; i < NO; i++) mlc_wg_fence_operand(o[i]);
      mlc_mbar_arrive(empty((it0 + j) % NS));
      rescale_pack();
    }
    turn();
    issue_pv(nkb - 1);
    pass(final);
    mlc_wg_wait<0>();
#pragma unroll
    for (int i = 0; i < NO; i++) mlc_wg_fence_operand(o[i]);
    mlc_mbar_arrive(empty((it0 + nkb - 1) % NS));
    it0 += nkb;
    // o[4i + e]: row r0 (+8 for e >= 2), column 8i + 2 tq (+1 for odd e)
#pragma unroll
    for (int r = 0; r < 2; r++) {
      lrow[r] += __shfl_xor_sync(0xffffffffu, lrow[r], 1);
      lrow[r] += __shfl_xor_sync(0xffffffffu, lrow[r], 2);
      float inv = lrow[r] > 0.f ? 1.f / lrow[r] : 0.f;
      int row = r0 + 8 * r;
      /* the row's columns 8 i + 2 tq, +1 (i < NO / 4) packed, then transposed within the quad (the four lanes of
         the row), 4 x 4 at a time, so that lane tq holds the 16 bytes of columns 8 (4 g + tq) .. + 7 for each g:
         a store of 16 bytes a lane, 64 contiguous bytes a quad, in place of four 4-byte stores.  Every lane takes
         part in the shuffles, rows past SQ too. */
      unsigned ot[NO / 4];
#pragma unroll
      for (int i = 0; i < NO / 4; i++) ot[i] = mlc_attn_pack<BF>(o[4 * i + 2 * r] * inv, o[4 * i + 2 * r + 1] * inv);
#pragma unroll
      for (int g = 0; g < NO / 16; g++) {
        unsigned *x = ot + 4 * g;
#pragma unroll
        for (int m = 2; m > 0; m >>= 1) /* swap the off-diagonal blocks of 2 x 2 (m = 2), then within them (m = 1) */
#pragma unroll
          for (int c = 0; c < 4; c++) {
            if (c & m) continue;
            const bool hi = tq & m;
            const unsigned got = __shfl_xor_sync(0xffffffffu, hi ? x[c] : x[c + m], m);
            if (hi) x[c] = got;
            else x[c + m] = got;
          }
      }
#ifdef MLC_ATTN_PROBE_NOSTORE /* bench/attn_probe.sh: the speed without o's stores (o kept live and transposed, never stored) */
      if (row < SQ && o[0] == 1.5e30f) {
#else
      if (row < SQ) {
#endif
        uint4 *orow = (uint4 *)(out + mlc_attn_row<H, SQ, D, RSO>(bh, row));
#pragma unroll
        for (int g = 0; g < NO / 16; g++) orow[g * 4 + tq] = make_uint4(ot[4 * g], ot[4 * g + 1], ot[4 * g + 2], ot[4 * g + 3]);
        if (MODE == 2 && tq == 0) stats[(size_t)bh * SQ + row] = mrow[r] + log2f(lrow[r]);
      }
    }
  }
#else
  (void)mq, (void)mk, (void)mv;
  if (threadIdx.x >= 256) return; /* the producer warpgroup of the sm_90a kernel */
#pragma unroll 1
  for (int t = blockIdx.x; t < TILES; t += gridDim.x) {
    mlc_attn_fwd_tc<T, D, 8, 1, 64, BH, SQ, SK, CAUSAL, MODE, H>(q, k, v, out, g, stats, dq, sl2, t);
    __syncthreads(); /* as mlc_attn_fwd_tc's own: its shared memory is the next item's */
  }
#endif
}

// An L2 policy: keep these lines (dq's accumulator, which the key blocks of
// a head add into one after another).
MLC_FN unsigned long long mlc_l2_evict_last() {
  unsigned long long p;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(p));
  return p; }

// The gradient's main pass on Hopper's wgmma (sm_90a; 16-bit T, D 128 or 64;
// arguments as mlc_attn_bwd_tc's, whose launch it shares: a block per 128
// keys of one (batch, head), 256 threads).  Warpgroup wg owns keys
// j0 + 64 wg .. + 63 and walks the query rows 64 at a time (causal: from
// the block's first key on), q, dO, lse2 and D triple-buffered by TMA
// from one thread (lse2 and D by cp.async where S % 4 != 0: a TMA box's
// innermost start must be 16-byte aligned), two tiles ahead, q and dO in the forward's
// 128-byte-swizzled layout (k and v loaded once, 128 rows; tensor maps mq,
// mk, mv, mg of boxes 64 columns x 64 rows x 1 as the forward's, ml and md
// of 64 floats of lse2 and D, flat [BH * S]):
//   S^T = k q^T and dP^T = v dO^T: two m64n64 chains from shared memory,
//   two commit groups, so that P^T = exp2(S^T sl2 - lse2) runs while dP^T's
//   chain does; dS^T = P^T (dP^T - D), both in registers, which
//   are the A operands of dV += P^T dO and dK += dS^T q (m64n128, B = dO
//   and q read MN-major); dV's is issued before dS^T is stored, swizzled,
//   as a [128 keys][64 queries] tile (one of two, by the tile's parity),
//   at head dim 128 dK's after dq's product, so that it runs while dq is
//   staged and added (wait<1> retires dV's and dq's; the tile ends in a
//   wait<0>), at 64 dK's right after dV's (DK_LATE);
//   dq[64 rows] += dS k: warpgroup wg takes columns 64 wg .. + 63 (head dim
//   64: warpgroup 0 alone), A = that tile read MN-major (transposed), B =
//   k's column block wg.  FR: the 64 x 64 result is stored to a staging
//   chunk of shared memory in fragment order and one thread of the
//   warpgroup adds it into dq's f32 accumulator with one bulk reduce-add
//   (cp.reduce.async.bulk .add.f32, 16 KiB; the accumulator in fragment
//   order, read back by mlc_attn_cvt); else f32 red.v4 from every thread
//   into a row-major accumulator, as mlc_attn_bwd_tc's.  (On the H200 at
//   b8 h16 s1024 d128 the red.v4 cost a third of the kernel's time.)
// dK and dV stay in registers (D / 2 + D / 2 a thread) until the end.
// One block barrier a tile, after the dS^T stores: past it both warpgroups
// are done with the previous tile, so its q, dO, lse2 and D buffer is
// refilled there (with the tile two ahead), and the dS^T tile that the
// next tile overwrites was last read two tiles back.
// Shared memory: k, v D / 4 KiB each, dS^T 2 x 16 KiB, q and dO 3 x D / 8 KiB
// each (loaded two tiles ahead), lse2 and D 1.5 KiB, 4 mbarriers, FR: the
// staging chunks (D / 64 x 16 KiB), aligned to 1 KiB (attn_bwd_wg_smem in
// emit_attention.c; 226.6 KiB at D 128).
template <class T, int D, int BH, int S, int CAUSAL, int H = 0, int FR = 0>
MLC_FN void mlc_attn_bwd_wg(const T *g, const T *q, const T *k, const T *v, T *out, const float *lse2, const float *dsum,
                            float *dq, float scale, float sl2, const mlc_tmap &mq, const mlc_tmap &mk, const mlc_tmap &mv,
                            const mlc_tmap &mg, const mlc_tmap &ml, const mlc_tmap &md) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int BN = 128, BQ = 64, NJ = (S + BN - 1) / BN, NI = (S + BQ - 1) / BQ, NC = D / 64 /* 64-column blocks */;
  constexpr int KT = BN * D * 2, QT = BQ * D * 2, ST = BN * BQ * 2, NA = D / 2 /* dk's and dv's accumulators a thread */;
  static_assert(D == 64 || D == 128, "attention_grad tile");
  constexpr bool BF = mlc_attn_isbf<T>::v;
  int jt, bh;
  if (CAUSAL) { jt = (int)(blockIdx.x / BH); bh = (int)(blockIdx.x % BH); }
  else { jt = (int)(blockIdx.x % NJ); bh = (int)(blockIdx.x / NJ); }
  const int tid = threadIdx.x, wg = tid >> 7, lane = tid & 31, w = (tid >> 5) & 3, gq = lane >> 2, tq = lane & 3;
  const int j0 = jt * BN;
  (void)g, (void)q, (void)k, (void)v;
  /* lse2 and D by TMA where each row's start is 16-byte aligned (S % 4 == 0), as a box's innermost start must be;
     else by cp.async from 128 threads, arriving on the same mbarrier */
  constexpr bool LT = S % 4 == 0;
  const float *lse = lse2 + (size_t)bh * S, *dsm = dsum + (size_t)bh * S;
  const unsigned sb = mlc_attn_saddr(mlc_attn_sm), s0 = (sb + 1023) & ~1023u, sK = s0, sV = s0 + KT, sT = s0 + 2 * KT;
  unsigned char *g0 = mlc_attn_sm + (s0 - sb); /* s0 as a generic pointer */
  /* two dS^T tiles at sT; NB buffers of q, dO, and lse2 and D ([NB][2][BQ] f32), filled two query tiles ahead */
  constexpr int NB = 3;
  auto sQ = [&](int b) { return sT + 2 * ST + b * QT; };
  auto sG = [&](int b) { return sT + 2 * ST + (NB + b) * QT; };
  const unsigned sL = sT + 2 * ST + 2 * NB * QT;
  const float *fL = (const float *)(g0 + 2 * KT + 2 * ST + 2 * NB * QT);
  const int ib = CAUSAL ? j0 / BQ : 0;
  /* mbarriers after lse2 and D: full[NB] (a query tile's q, dO, lse2, D landed), k and v's; FR: then dq's
     staging chunks, 16 KiB a warpgroup that takes dq columns, 128-byte aligned */
  const unsigned bar = sL + NB * 2 * BQ * 4, kvbar = bar + 8 * NB, sZ = (kvbar + 8 + 127) & ~127u;
  /* the tensor maps' coordinates for this (batch, head): q's, k's, v's and dO's first column, the third coordinate */
  constexpr int HH = H ? H : 1;
  const int z = H ? bh / HH : bh, hc = H ? (bh % HH) * D : 0, kc = H ? H * D + hc : 0, vc = H ? 2 * H * D + hc : 0;
  // query tile it's q, dO (and lse2 and D if LT) into buffer b by TMA (one thread; nothing past the last tile)
  auto load = [&](int it, int b) {
    if (it >= NI) return;
    const unsigned fb = bar + 8 * b;
    mlc_mbar_expect_tx(fb, 2 * QT + (LT ? 2 * BQ * 4 : 0));
#pragma unroll
    for (int h = 0; h < NC; h++) {
      mlc_tma_load3(sQ(b) + h * (BQ * 128), mq, hc + 64 * h, it * BQ, z, fb);
      mlc_tma_load3(sG(b) + h * (BQ * 128), mg, hc + 64 * h, it * BQ, z, fb);
    }
    if (LT) {
      mlc_tma_load1(sL + 4 * (b * 2 * BQ), ml, bh * S + it * BQ, fb);
      mlc_tma_load1(sL + 4 * (b * 2 * BQ + BQ), md, bh * S + it * BQ, fb);
    }
  };
  // !LT: tile it's lse2 and D by cp.async from threads 0..127, each arriving on buffer b's mbarrier once its copy lands
  auto load_l = [&](int it, int b) {
    if (LT || it >= NI || tid >= 2 * BQ) return;
    const int i = it * BQ + (tid & (BQ - 1));
    mlc_attn_cp4(sL + 4 * (b * 2 * BQ + tid), (tid < BQ ? lse : dsm) + (i < S ? i : 0), i < S);
    mlc_mbar_cp_arrive(bar + 8 * b);
  };
  if (tid == 0) {
    for (int b = 0; b < NB; b++) mlc_mbar_init(bar + 8 * b, LT ? 1 : 1 + 2 * BQ);
    mlc_mbar_init(kvbar, 1);
    mlc_mbar_fence_init();
    mlc_tma_prefetch(mq), mlc_tma_prefetch(mk), mlc_tma_prefetch(mv), mlc_tma_prefetch(mg);
    /* k and v: 128 rows each as D / 64 64-column blocks, each loaded as two boxes of 64 rows */
    mlc_mbar_expect_tx(kvbar, 2 * KT);
#pragma unroll
    for (int h = 0; h < NC; h++)
#pragma unroll
      for (int p = 0; p < 2; p++) {
        mlc_tma_load3(sK + h * (BN * 128) + p * 8192, mk, kc + 64 * h, j0 + 64 * p, z, kvbar);
        mlc_tma_load3(sV + h * (BN * 128) + p * 8192, mv, vc + 64 * h, j0 + 64 * p, z, kvbar);
      }
    load(ib, 0);
    load(ib + 1, 1);
  }
  __syncthreads(); /* the barriers are initialised */
  load_l(ib, 0);
  load_l(ib + 1, 1);
  mlc_mbar_wait(kvbar, 0);
  float dk[NA], dv[NA];
#pragma unroll
  for (int i = 0; i < NA; i++) dk[i] = dv[i] = 0.f;
  const int kl = wg * 64 + w * 16 + gq, ka = j0 + kl; /* this thread's keys: ka, ka + 8 (kl, kl + 8 in the block) */
#pragma unroll 1
  for (int it = ib; it < NI; it++) {
    const int buf = (it - ib) % NB, i0 = it * BQ, tb = (it & 1) * ST /* this tile's dS^T, at sT + tb */;
    mlc_mbar_wait(bar + 8 * buf, ((it - ib) / NB) & 1); /* tile it landed */
    const float *cL = fL + buf * 2 * BQ;
    float st[32], dp[32]; /* overwritten by their chains' first k-step (acc 0) */
#pragma unroll
    for (int i = 0; i < 32; i++) { mlc_wg_fence_operand(st[i]); mlc_wg_fence_operand(dp[i]); }
    mlc_wg_fence();
    /* S^T's chain, then dP^T's, each its own commit group, so that wait<1> retires S^T's alone and P^T's
       exponentials run under dP^T's.  Every path reaches this point with no group in flight (each tile ends in a
       wait<0>): ptxas must see which wait retires which, or it serialises the wgmma (C7514). */
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
      const unsigned ok = (unsigned)((kk >> 2) * (BN * 128) + (kk & 3) * 32), oq = (unsigned)((kk >> 2) * (BQ * 128) + (kk & 3) * 32);
      mlc_wgmma<T, 64>::template mma<0, 0>(st, mlc_wg_desc(sK + wg * 8192 + ok, 16), mlc_wg_desc(sQ(buf) + oq, 16), kk > 0);
    }
    mlc_wg_commit();
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
      const unsigned ok = (unsigned)((kk >> 2) * (BN * 128) + (kk & 3) * 32), oq = (unsigned)((kk >> 2) * (BQ * 128) + (kk & 3) * 32);
      mlc_wgmma<T, 64>::template mma<0, 0>(dp, mlc_wg_desc(sV + wg * 8192 + ok, 16), mlc_wg_desc(sG(buf) + oq, 16), kk > 0);
    }
    mlc_wg_commit();
    mlc_wg_wait<1>();
#pragma unroll
    for (int i = 0; i < 32; i++) mlc_wg_fence_operand(st[i]);
    // st[4i + e]: key ka (+8 for e >= 2), query i0 + 8i + 2 tq (+1 for odd e); P^T in place while dP^T runs
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int qi = 8 * i + 2 * tq + (e & 1), qg = i0 + qi, key = ka + (e >> 1) * 8;
#ifndef MLC_ATTN_PROBE_BWD_NOEXP /* bench/h200_s15.sh probe: the speed without the exponentials */
        float p = mlc_ex2(fmaf(st[4 * i + e], sl2, -cL[qi])); /* as the forward: one FFMA, one MUFU op */
#else
        float p = fmaf(st[4 * i + e], sl2, -cL[qi]);
#endif
        if ((S % BQ && qg >= S) || (S % BN && key >= S) || (CAUSAL && key > qg)) p = 0.f;
        st[4 * i + e] = p;
      }
    mlc_wg_wait<0>();
#pragma unroll
    for (int i = 0; i < 32; i++) mlc_wg_fence_operand(dp[i]);
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
      for (int e = 0; e < 4; e++) dp[4 * i + e] = st[4 * i + e] * (dp[4 * i + e] - cL[BQ + 8 * i + 2 * tq + (e & 1)]);
    unsigned pa[4][4], sa[4][4]; /* P^T and dS^T as A operands: queries 16 kk .. 16 kk + 15 */
#pragma unroll
    for (int kk = 0; kk < 4; kk++)
#pragma unroll
      for (int r = 0; r < 4; r++) {
        pa[kk][r] = mlc_attn_pack<BF>(st[8 * kk + 2 * r], st[8 * kk + 2 * r + 1]);
        sa[kk][r] = mlc_attn_pack<BF>(dp[8 * kk + 2 * r], dp[8 * kk + 2 * r + 1]);
      }
#pragma unroll
    for (int i = 0; i < NA; i++) { mlc_wg_fence_operand(dv[i]); mlc_wg_fence_operand(dk[i]); }
    mlc_wg_fence();
#pragma unroll
    for (int kk = 0; kk < 4; kk++) mlc_attn_wgr<BF, D>::template mma<1>(dv, pa[kk], mlc_wg_desc(sG(buf) + kk * 2048, BQ * 128));
    mlc_wg_commit();
    /* dK += dS^T q: at head dim 128 issued after dq's product (below), so that it runs while dq is staged and
       added; at 64, here, after dV's (issued late it made the MiniLLM-sized gradient at d 64 19 % slower on an
       H100: bench/results/s38-2026-12-07.md) */
    constexpr bool DK_LATE = D > 64;
    auto issue_dk = [&]() {
#pragma unroll
      for (int kk = 0; kk < 4; kk++) mlc_attn_wgr<BF, D>::template mma<1>(dk, sa[kk], mlc_wg_desc(sQ(buf) + kk * 2048, BQ * 128));
      mlc_wg_commit();
    };
    /* dS^T into [128 keys][64 queries], row kl at kl * 128, its 16-byte chunk c at c ^ (kl % 8): sa[kk][r] is the
       8 x 8 block of rows kl - gq + 8 (r & 1), chunk 2 kk + (r >> 1), in stmatrix's fragment layout (row gq, columns
       2 tq, 2 tq + 1), so one stmatrix .x4 stores a kk's four, lane l giving row l % 8 of block l / 8 */
    {
      const int mr = wg * 64 + w * 16 + ((lane >> 3) & 1) * 8 + (lane & 7);
#pragma unroll
      for (int kk = 0; kk < 4; kk++)
        asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};"
                     :: "r"(sT + tb + mr * 128 + (((2 * kk + (lane >> 4)) ^ (lane & 7)) << 4)), "r"(sa[kk][0]), "r"(sa[kk][1]),
                        "r"(sa[kk][2]), "r"(sa[kk][3]) : "memory");
    }
    if constexpr (!DK_LATE) { /* after the stores that read sa, dK's A operand, so that none reads it in flight */
      mlc_wg_fence();
      issue_dk();
    }
    mlc_fence_async_smem();
    /* both warpgroups' dS^T stored, and both done with tile it - 1 (its wgmma waited for), so tile it - 1's buffer
       takes tile it + 2.  This is the tile's only block barrier: a warpgroup gets at most one tile ahead of the other,
       and the dS^T tile that tile it + 1 writes was last read by tile it - 1's dq product, which both have waited for. */
    if (FR && (tid & 127) == 0) mlc_bulk_wait_read<0>(); /* this warpgroup's staging chunk read by the last reduce-add */
    __syncthreads();
    if (tid == 0) load(it + 2, (buf + 2) % NB);
    load_l(it + 2, (buf + 2) % NB);
#ifdef MLC_ATTN_PROBE_BWD_NODQ /* bench/h200_s15.sh probe: the speed without dq's product and reductions */
    if (true) {
#else
    if (D == 64 && wg == 1) { /* head dim 64: warpgroup 0 takes all of dq's 64 columns */
#endif
      if constexpr (DK_LATE) issue_dk();
      mlc_wg_wait<0>();
#pragma unroll
      for (int i = 0; i < NA; i++) { mlc_wg_fence_operand(dv[i]); mlc_wg_fence_operand(dk[i]); }
      continue;
    }
    float dqa[32]; /* overwritten by the first k-step (acc 0) */
#pragma unroll
    for (int i = 0; i < 32; i++) mlc_wg_fence_operand(dqa[i]);
    mlc_wg_fence();
#pragma unroll
    for (int kk = 0; kk < BN / 16; kk++)
      mlc_wgmma<T, 64>::template mma<1, 1>(dqa, mlc_wg_desc(sT + tb + kk * 2048, BN * 128), mlc_wg_desc(sK + wg * (BN * 128) + kk * 2048, BN * 128),
                                          kk > 0);
    mlc_wg_commit();
    if constexpr (DK_LATE) issue_dk();
    /* groups retire in order: dV's and dq's are done, a late dK's may still run (retired by the wait<0> at the
       tile's end) */
    mlc_wg_wait<DK_LATE ? 1 : 0>();
#pragma unroll
    for (int i = 0; i < 32; i++) mlc_wg_fence_operand(dqa[i]);
#pragma unroll
    for (int i = 0; i < NA; i++) { mlc_wg_fence_operand(dv[i]); if constexpr (!DK_LATE) mlc_wg_fence_operand(dk[i]); }
    if constexpr (FR) {
      /* FR: dq's accumulator is in fragment order, a 16 KiB chunk per (bh, query tile, warpgroup), in which this
         thread's float4 t holds dqa[4t .. 4t + 3] at (128 t + tid % 128) x 16 bytes (mlc_attn_cvt reads it so).
         Staged so (consecutive threads, consecutive 16 bytes: no bank conflict), then one thread adds the whole
         chunk into L2 with one bulk reduce-add, which runs while the next tile's products do. */
      float4 *z = (float4 *)(g0 + (sZ - s0) + wg * 16384);
#pragma unroll
      for (int t = 0; t < 8; t++) z[t * 128 + (tid & 127)] = make_float4(dqa[4 * t], dqa[4 * t + 1], dqa[4 * t + 2], dqa[4 * t + 3]);
      mlc_fence_async_smem(); /* the stores, visible to the bulk copy (the async proxy) */
      asm volatile("bar.sync %0, 128;" :: "r"(1 + wg) : "memory");
      if ((tid & 127) == 0) {
        float *gz = dq + ((size_t)(bh * NI + it) * NC + wg) * 4096;
        /* evict_last: 1 % faster at the three shapes of bench/results/h200-2026-12-04d.md §7 (hints on the
           q/dO loads gave nothing) */
        asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.L2::cache_hint.add.f32 [%0], [%1], 16384, %2;"
                     :: "l"(gz), "r"(sZ + wg * 16384), "l"(mlc_l2_evict_last()) : "memory");
        mlc_bulk_commit();
      }
    } else { /* dqa[4t + e]: query i0 + 16 w + gq (+8 for e >= 2), column 64 wg + 8t + 2 tq (+1 for odd e); lane pairs
         swap halves so that each adds 4 columns of one row (red.v4) */
      const bool odd = tq & 1;
      const int row = i0 + w * 16 + gq + (odd ? 8 : 0);
      float *dr = dq + ((size_t)bh * S + (row < S ? row : 0)) * D + wg * 64 + 2 * (tq & ~1);
#pragma unroll
      for (int t = 0; t < 8; t++) {
        float r0 = __shfl_xor_sync(0xffffffffu, odd ? dqa[4 * t] : dqa[4 * t + 2], 1);
        float r1 = __shfl_xor_sync(0xffffffffu, odd ? dqa[4 * t + 1] : dqa[4 * t + 3], 1);
        float v0 = odd ? r0 : dqa[4 * t], v1 = odd ? r1 : dqa[4 * t + 1], v2 = odd ? dqa[4 * t + 2] : r0, v3 = odd ? dqa[4 * t + 3] : r1;
#ifdef MLC_ATTN_PROBE_BWD_NORED /* bench/h200_s15.sh probe: dq's product without its reductions */
        if (row < 0)
#else
        if (row < S)
#endif
          asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" :: "l"(dr + t * 8), "f"(v0), "f"(v1), "f"(v2), "f"(v3) : "memory");
      }
    }
    if constexpr (DK_LATE) {
      mlc_wg_wait<0>(); /* dK's group: no group in flight at the next tile's first product */
#pragma unroll
      for (int i = 0; i < NA; i++) mlc_wg_fence_operand(dk[i]);
    }
  }
  if (FR && (tid & 127) == 0) mlc_bulk_wait_all<0>(); /* the last reduce-add done before the block's shared memory goes */
#pragma unroll
  for (int r = 0; r < 2; r++)
    if (ka + r * 8 < S) mlc_attn_store_dkv<T, D, BH, S, H>(out, bh, ka + r * 8, r, tq, dk, dv, scale);
#else
  (void)mq, (void)mk, (void)mv, (void)mg, (void)ml, (void)md;
  mlc_attn_bwd_tc<T, D, 8, 64, BH, S, CAUSAL, H>(g, q, k, v, out, lse2, dsum, dq, scale, sl2);
#endif
}

// f32 attention on the tensor cores: the products of mlc_attn_fwd_tc and
// the gradient on mma.sync m16n8k8 tf32, each operand split as mlc_mma_x
// does (X = 3: 3xTF32, about f32's accuracy; X = 1: one TF32 product).
// Shared rows are D + 4 floats apart, so both fragment reads below hit 32
// distinct banks: (row g, column t) and (row 2t, column g).
// Rows [r0, r0+R) of an S-row f32 matrix of D columns (rows RS floats apart)
// into shared memory with pitch D + 4, 16 bytes a cp.async; rows past S zero.
template <int D, int R, int NTH, int S, int RS = D>
MLC_FN void mlc_attn_ld32(float *s, const float *g, int r0) {
  const int CH = D / 4, LD = D + 4;
  for (int c = threadIdx.x; c < R * CH; c += NTH) {
    int r = c / CH, cc = c - r * CH, gr = r0 + r;
    bool ok = gr < S;
    mlc_attn_cp16(mlc_attn_saddr(s + r * LD + cc * 4), g + (size_t)(ok ? gr : 0) * RS + cc * 4, ok);
  } }
// Split on load: the R x D tile at s (pitch D + 4) in place into its TF32
// high parts, the residuals to lo (same pitch), by the block's NTH threads,
// so that the warps sharing the tile read ready operands.
template <int X, int D, int R, int NTH> MLC_FN void mlc_attn_x_split(float *s, float *lo) {
  const int CH = D / 4, LD = D + 4;
  for (int c = threadIdx.x; c < R * CH; c += NTH) {
    int r = c / CH, o = r * LD + (c - r * CH) * 4;
    float4 v = *(const float4 *)(s + o);
    unsigned h[4], l[4];
    mlc_tf32_split<X>(v.x, h[0], l[0]); mlc_tf32_split<X>(v.y, h[1], l[1]);
    mlc_tf32_split<X>(v.z, h[2], l[2]); mlc_tf32_split<X>(v.w, h[3], l[3]);
    *(uint4 *)(s + o) = make_uint4(h[0], h[1], h[2], h[3]);
    if (X == 3) *(uint4 *)(lo + o) = make_uint4(l[0], l[1], l[2], l[3]);
  } }
// element i of a B operand: PB (split on load) its parts from s and sl, else split here
template <int X, bool PB> MLC_FN void mlc_attn_x_get(const float *s, const float *sl, int i, unsigned &h, unsigned &l) {
  if (PB) { h = __float_as_uint(s[i]); if (X == 3) l = __float_as_uint(sl[i]); }
  else mlc_tf32_split<X>(s[i], h, l); }
// acc[16 x N] += A[16 x D] B[N x D]^T: A's 16 rows at sa, B's N rows at sb,
// both in shared memory with pitch D + 4; PB: B split on load, residuals at sbl.
template <int X, int D, int N, bool PB = false>
MLC_FN void mlc_attn_x_abt(float (*acc)[4], const float *sa, const float *sb, int g, int t, const float *sbl = nullptr) {
  const int P = D + 4;
#pragma unroll
  for (int kk = 0; kk < D; kk += 8) {
    unsigned ah[4], al[4];
    mlc_tf32_split<X>(sa[g * P + kk + t], ah[0], al[0]);
    mlc_tf32_split<X>(sa[(g + 8) * P + kk + t], ah[1], al[1]);
    mlc_tf32_split<X>(sa[g * P + kk + t + 4], ah[2], al[2]);
    mlc_tf32_split<X>(sa[(g + 8) * P + kk + t + 4], ah[3], al[3]);
#pragma unroll
    for (int n = 0; n < N / 8; n++) {
      unsigned bh[2], bl[2];
      mlc_attn_x_get<X, PB>(sb, sbl, (n * 8 + g) * P + kk + t, bh[0], bl[0]);
      mlc_attn_x_get<X, PB>(sb, sbl, (n * 8 + g) * P + kk + t + 4, bh[1], bl[1]);
      mlc_mma_x<X>(acc[n], ah, al, bh, bl);
    }
  } }
// acc[16 x D] += C[16 x K] B[K x D]: C in registers as mma's accumulator
// fragments (c[j]: rows g, g + 8, columns 8j + 2t, + 1; they are the A
// fragment of the 8-deep step j with k slots t, t + 4 as columns 2t, 2t + 1),
// B's K rows at sb with pitch D + 4 (PB: split on load, residuals at sbl).
template <int X, int K, int D, bool PB = false>
MLC_FN void mlc_attn_x_cb(float (*acc)[4], const float (*c)[4], const float *sb, int g, int t, const float *sbl = nullptr) {
  const int P = D + 4;
#pragma unroll
  for (int j = 0; j < K / 8; j++) {
    unsigned ah[4], al[4];
    mlc_tf32_split<X>(c[j][0], ah[0], al[0]);
    mlc_tf32_split<X>(c[j][2], ah[1], al[1]);
    mlc_tf32_split<X>(c[j][1], ah[2], al[2]);
    mlc_tf32_split<X>(c[j][3], ah[3], al[3]);
    const int b = (8 * j + 2 * t) * P + g;
#pragma unroll
    for (int dn = 0; dn < D / 8; dn++) {
      unsigned bh[2], bl[2];
      mlc_attn_x_get<X, PB>(sb, sbl, b + dn * 8, bh[0], bl[0]);
      mlc_attn_x_get<X, PB>(sb, sbl, b + P + dn * 8, bh[1], bl[1]);
      mlc_mma_x<X>(acc[dn], ah, al, bh, bl);
    }
  } }
// Forward, f32 (D % 8 == 0, dv == D): a block is 16 W query rows of one
// (batch, head), a warp 16 of them; keys and values BK at a time,
// double-buffered by cp.async; S = q k^T and o += p v as above, the online
// softmax of mlc_attn_fwd_tc.  MODE 0: out = o; MODE 2 (attention_save):
// also stats[row] = lse2; MODE 1 (attention_grad's statistics; g = dO):
// stats[row] = lse2 and stats[BH*SQ + row] = dO . o, no output.
// H > 0: packed as for mlc_attn_fwd_tc.  PS: k and v split on load (the
// four warps read them; mlc_attn_x_split), residuals after the two buffers.
template <int X, int D, int W, int BK, int BH, int SQ, int SK, int CAUSAL, int MODE, int H = 0, int PS = 0>
MLC_FN void mlc_attn_fwd_x(const float *q, const float *k, const float *v, float *out, const float *g, float *stats, float sl2) {
  const int BM = 16 * W, LD = D + 4, NT = (SQ + BM - 1) / BM, NTH = 32 * W, RSI = H ? 3 * H * D : D, RSO = H ? H * D : D;
  static_assert(D % 8 == 0 && BK % 8 == 0 && (H == 0 || (SQ == SK && MODE != 1)), "attention tile");
  int tile, bh;
  if (CAUSAL) { tile = NT - 1 - (int)(blockIdx.x / BH); bh = (int)(blockIdx.x % BH); }
  else { tile = (int)(blockIdx.x % NT); bh = (int)(blockIdx.x / NT); }
  const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5, gq = lane >> 2, tq = lane & 3;
  const int m0 = tile * BM;
  const float *qb = q + mlc_attn_row<H, SQ, D, RSI>(bh, 0);
  const float *kb = H ? qb + H * D : k + (size_t)bh * SK * D, *vb = H ? qb + 2 * H * D : v + (size_t)bh * SK * D;
  float *sQ = (float *)mlc_attn_sm, *sK = sQ + BM * LD, *sV = sK + 2 * BK * LD, *sKl = sV + 2 * BK * LD, *sVl = sKl + BK * LD;
  int nkb = (SK + BK - 1) / BK;
  if (CAUSAL) { int lim = ((m0 + BM < SQ ? m0 + BM : SQ) + BK - 1) / BK; nkb = lim < nkb ? lim : nkb; }
  mlc_attn_ld32<D, BM, NTH, SQ, RSI>(sQ, qb, m0);
  mlc_attn_ld32<D, BK, NTH, SK, RSI>(sK, kb, 0);
  mlc_attn_ld32<D, BK, NTH, SK, RSI>(sV, vb, 0);
  mlc_attn_commit();
  float o[D / 8][4];
#pragma unroll
  for (int t = 0; t < D / 8; t++) o[t][0] = o[t][1] = o[t][2] = o[t][3] = 0.f;
  float mrow[2] = {-MLC_INF, -MLC_INF}, lrow[2] = {0.f, 0.f};
  const int ra = m0 + w * 16 + gq; /* this thread's rows: ra, ra + 8 */
  for (int kbi = 0; kbi < nkb; kbi++) {
    mlc_attn_wait();
    __syncthreads();
    if (kbi + 1 < nkb) {
      int nb = (kbi + 1) & 1;
      mlc_attn_ld32<D, BK, NTH, SK, RSI>(sK + nb * BK * LD, kb, (kbi + 1) * BK);
      mlc_attn_ld32<D, BK, NTH, SK, RSI>(sV + nb * BK * LD, vb, (kbi + 1) * BK);
      mlc_attn_commit();
    }
    float *cK = sK + (kbi & 1) * BK * LD, *cV = sV + (kbi & 1) * BK * LD;
    if (PS) {
      mlc_attn_x_split<X, D, BK, NTH>(cK, sKl);
      mlc_attn_x_split<X, D, BK, NTH>(cV, sVl);
      __syncthreads();
    }
    float s[BK / 8][4];
#pragma unroll
    for (int t = 0; t < BK / 8; t++) s[t][0] = s[t][1] = s[t][2] = s[t][3] = 0.f;
    mlc_attn_x_abt<X, D, BK, PS>(s, sQ + w * 16 * LD, cK, gq, tq, sKl);
    const int j0 = kbi * BK;
    const bool need = (j0 + BK > SK) || (CAUSAL && j0 + BK - 1 > m0 + w * 16);
    float mx[2] = {mrow[0], mrow[1]};
#pragma unroll
    for (int t = 0; t < BK / 8; t++) {
#pragma unroll
      for (int e = 0; e < 4; e++) {
        float x = s[t][e] * sl2;
        if (need) {
          int key = j0 + t * 8 + 2 * tq + (e & 1), row = ra + (e >> 1) * 8;
          if (key >= SK || (CAUSAL && key > row)) x = -MLC_INF;
        }
        s[t][e] = x;
      }
      mx[0] = fmaxf(mx[0], fmaxf(s[t][0], s[t][1]));
      mx[1] = fmaxf(mx[1], fmaxf(s[t][2], s[t][3]));
    }
    float corr[2], ms[2], ls[2] = {0.f, 0.f};
    mlc_attn_rowmax(mx, mrow, ms, corr);
#pragma unroll
    for (int t = 0; t < BK / 8; t++) {
      s[t][0] = exp2f(s[t][0] - ms[0]); s[t][1] = exp2f(s[t][1] - ms[0]);
      s[t][2] = exp2f(s[t][2] - ms[1]); s[t][3] = exp2f(s[t][3] - ms[1]);
      ls[0] += s[t][0] + s[t][1];
      ls[1] += s[t][2] + s[t][3];
    }
    lrow[0] = lrow[0] * corr[0] + ls[0];
    lrow[1] = lrow[1] * corr[1] + ls[1];
    if (D <= 128) { /* p v summed apart and added rounded (the tensor cores truncate as they add; see mlc_gemm_x3) */
      float pv[D / 8][4];
#pragma unroll
      for (int t = 0; t < D / 8; t++) pv[t][0] = pv[t][1] = pv[t][2] = pv[t][3] = 0.f;
      mlc_attn_x_cb<X, BK, D, PS>(pv, s, cV, gq, tq, sVl);
#pragma unroll
      for (int t = 0; t < D / 8; t++) {
        o[t][0] = o[t][0] * corr[0] + pv[t][0]; o[t][1] = o[t][1] * corr[0] + pv[t][1];
        o[t][2] = o[t][2] * corr[1] + pv[t][2]; o[t][3] = o[t][3] * corr[1] + pv[t][3];
      }
    } else { /* registers: no room for a second accumulator */
#pragma unroll
      for (int t = 0; t < D / 8; t++) { o[t][0] *= corr[0]; o[t][1] *= corr[0]; o[t][2] *= corr[1]; o[t][3] *= corr[1]; }
      mlc_attn_x_cb<X, BK, D, PS>(o, s, cV, gq, tq, sVl);
    }
  }
  float inv[2];
#pragma unroll
  for (int r = 0; r < 2; r++) {
    lrow[r] += __shfl_xor_sync(0xffffffffu, lrow[r], 1);
    lrow[r] += __shfl_xor_sync(0xffffffffu, lrow[r], 2);
    inv[r] = lrow[r] > 0.f ? 1.f / lrow[r] : 0.f;
  }
#pragma unroll
  for (int r = 0; r < 2; r++) {
    int row = ra + r * 8;
    bool ok = row < SQ;
    if (MODE != 1) {
      if (ok) {
        float2 *orow = (float2 *)(out + mlc_attn_row<H, SQ, D, RSO>(bh, row));
#pragma unroll
        for (int t = 0; t < D / 8; t++) orow[t * 4 + tq] = make_float2(o[t][2 * r] * inv[r], o[t][2 * r + 1] * inv[r]);
        if (MODE == 2 && tq == 0) stats[(size_t)bh * SQ + row] = mrow[r] + log2f(lrow[r]);
      }
    } else {
      const float2 *grow = (const float2 *)(g + ((size_t)bh * SQ + (ok ? row : 0)) * D);
      float dsum = 0.f;
#pragma unroll
      for (int t = 0; t < D / 8; t++) {
        float2 gw = ok ? grow[t * 4 + tq] : make_float2(0.f, 0.f);
        dsum += gw.x * o[t][2 * r] + gw.y * o[t][2 * r + 1];
      }
      dsum += __shfl_xor_sync(0xffffffffu, dsum, 1);
      dsum += __shfl_xor_sync(0xffffffffu, dsum, 2);
      if (ok && tq == 0) {
        stats[(size_t)bh * SQ + row] = mrow[r] + log2f(lrow[r]);
        stats[(size_t)BH * SQ + (size_t)bh * SQ + row] = dsum * inv[r];
      }
    }
  }
}
// The gradient in f32, in two launches that each recompute S and dP (no
// atomics, no dS through shared memory), given lse2 and D = dO . o per
// query row:
//  - mlc_attn_bwd_kv_x: a block is 16 W keys, a warp 16 of them; over the
//    query rows BQ at a time (causal: from its first key on), S^T = k q^T,
//    dP^T = v dO^T, P^T, dS^T = P^T (dP^T - D); dv += P^T dO, dk += dS^T q
//    in registers; writes dk (times scale) and dv.
//  - mlc_attn_bwd_q_x: a block is 16 W query rows; over the keys BK at a
//    time (causal: up to its last row), S, dP, dS; dq += dS k; writes dq
//    times scale.
// out is [3, BH, S, D] (dq, dk, dv); H > 0: q, k, v one [b, s, 3H, D], g
// [b, s, H, D], and dq, dk, dv written into out [b, s, 3H, D].  PS: the
// tiles the four warps share (q and dO here, k and v in the dq launch) split
// on load (mlc_attn_x_split), their residuals after the two buffers.
// DQ: one pass, no dq launch.  Each query tile's dS^T goes through shared
// memory ([16 W keys][BQ + 4]), and the block's four warps take dq's part
// from these keys, dS k (16 rows and D / 2 columns each), adding it by
// red.global.add.v2.f32 into the f32 accumulator dqa ([BH S][D], zeroed
// before; scaled and stored by mlc_attn_cvt after).
// PART as mlc_attn_bwd_tc's: past head dim 128, PART 1 sums dv alone and
// PART 2 dk alone (two launches, each under 255 registers a thread).
template <int X, int D, int W, int BQ, int BH, int S, int CAUSAL, int H = 0, int PS = 0, int DQ = 0, int PART = 0>
MLC_FN void mlc_attn_bwd_kv_x(const float *g, const float *q, const float *k, const float *v, float *out,
                              const float *lse2, const float *dsum, float scale, float sl2, float *dqa = nullptr) {
  const int BN = 16 * W, LD = D + 4, NTH = 32 * W, NJ = (S + BN - 1) / BN, NI = (S + BQ - 1) / BQ;
  static_assert(D % 8 == 0 && BQ % 8 == 0 && 2 * BQ <= NTH, "attention_grad tile");
  int jt, bh;
  if (CAUSAL) { jt = (int)(blockIdx.x / BH); bh = (int)(blockIdx.x % BH); }
  else { jt = (int)(blockIdx.x % NJ); bh = (int)(blockIdx.x / NJ); }
  const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5, gq = lane >> 2, tq = lane & 3;
  const int j0 = jt * BN, RSI = H ? 3 * H * D : D, RSG = H ? H * D : D;
  const size_t hb = (size_t)bh * S * D;
  const float *qb = q + mlc_attn_row<H, S, D, RSI>(bh, 0), *gb = g + mlc_attn_row<H, S, D, RSG>(bh, 0);
  const float *kb = H ? qb + H * D : k + hb, *vb = H ? qb + 2 * H * D : v + hb;
  float *sK = (float *)mlc_attn_sm, *sV = sK + BN * LD, *sQ = sV + BN * LD, *sG = sQ + 2 * BQ * LD;
  float *sL = sG + 2 * BQ * LD; /* [2][2][BQ]: lse2, D */
  float *sQl = sL + 4 * BQ, *sGl = sQl + BQ * LD, *sD = sL + 4 * BQ + (PS ? 2 * BQ * LD : 0);
  const int PQ = BQ + 4; /* sD's pitch: both of its reads below hit 32 banks */
  static_assert(!DQ || (W == 4 && BQ == 32 && D % 16 == 0 && PART == 0), "attention_grad one pass: 4 warps, 32 query rows a step");
  constexpr bool DK = PART != 1, DV = PART != 2;
  const float *lse = lse2 + (size_t)bh * S, *dsm = dsum + (size_t)bh * S;
  const int ib = CAUSAL ? j0 / BQ : 0;
  mlc_attn_ld32<D, BN, NTH, S, RSI>(sK, kb, j0);
  if constexpr (DK) mlc_attn_ld32<D, BN, NTH, S, RSI>(sV, vb, j0);
  mlc_attn_ld32<D, BQ, NTH, S, RSI>(sQ, qb, ib * BQ);
  mlc_attn_ld32<D, BQ, NTH, S, RSG>(sG, gb, ib * BQ);
  mlc_attn_commit();
  if (tid < 2 * BQ) {
    int i = ib * BQ + tid % BQ;
    sL[tid] = i < S ? (tid < BQ ? lse[i] : dsm[i]) : 0.f;
  }
  float dk[DK ? D / 8 : 1][4], dv[DV ? D / 8 : 1][4];
#pragma unroll
  for (int t = 0; t < D / 8; t++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      if constexpr (DK) dk[t][e] = 0.f;
      if constexpr (DV) dv[t][e] = 0.f;
    }
  const int ka = j0 + w * 16 + gq; /* this thread's keys: ka, ka + 8 */
  for (int it = ib; it < NI; it++) {
    const int buf = (it - ib) & 1, i0 = it * BQ;
    mlc_attn_wait();
    __syncthreads();
    if (it + 1 < NI) {
      mlc_attn_ld32<D, BQ, NTH, S, RSI>(sQ + (buf ^ 1) * BQ * LD, qb, i0 + BQ);
      mlc_attn_ld32<D, BQ, NTH, S, RSG>(sG + (buf ^ 1) * BQ * LD, gb, i0 + BQ);
      mlc_attn_commit();
      if (tid < 2 * BQ) {
        int i = i0 + BQ + tid % BQ;
        sL[(buf ^ 1) * 2 * BQ + tid] = i < S ? (tid < BQ ? lse[i] : dsm[i]) : 0.f;
      }
    }
    float *cQ = sQ + buf * BQ * LD, *cG = sG + buf * BQ * LD, *cL = sL + buf * 2 * BQ;
    if (PS) {
      mlc_attn_x_split<X, D, BQ, NTH>(cQ, sQl);
      mlc_attn_x_split<X, D, BQ, NTH>(cG, sGl);
      __syncthreads();
    }
    float st[BQ / 8][4], dp[BQ / 8][4];
#pragma unroll
    for (int t = 0; t < BQ / 8; t++)
#pragma unroll
      for (int e = 0; e < 4; e++) st[t][e] = dp[t][e] = 0.f;
    mlc_attn_x_abt<X, D, BQ, PS>(st, sK + w * 16 * LD, cQ, gq, tq, sQl);
    if constexpr (DK) mlc_attn_x_abt<X, D, BQ, PS>(dp, sV + w * 16 * LD, cG, gq, tq, sGl);
#pragma unroll
    for (int t = 0; t < BQ / 8; t++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        int qi = t * 8 + 2 * tq + (e & 1), qg = i0 + qi, key = ka + (e >> 1) * 8;
        float p = exp2f(st[t][e] * sl2 - cL[qi]);
        if (qg >= S || key >= S || (CAUSAL && key > qg)) p = 0.f;
        st[t][e] = p;
        if constexpr (DK) dp[t][e] = p * (dp[t][e] - cL[BQ + qi]);
      }
    if (DQ) /* dS^T, this warp's 16 keys */
#pragma unroll
      for (int t = 0; t < BQ / 8; t++)
#pragma unroll
        for (int r = 0; r < 2; r++)
          *(float2 *)(sD + (w * 16 + gq + 8 * r) * PQ + t * 8 + 2 * tq) = make_float2(dp[t][2 * r], dp[t][2 * r + 1]);
    if constexpr (DV) mlc_attn_x_cb<X, BQ, D, PS>(dv, st, cG, gq, tq, sGl);
    if constexpr (DK) mlc_attn_x_cb<X, BQ, D, PS>(dk, dp, cQ, gq, tq, sQl);
    if (DQ) {
      __syncthreads();
      /* dq[i0 + q0 .. + 16][c0 .. + D / 2] += dS k over the block's keys: A = dS (sD read transposed), B = k
         (sK), k slots t and t + 4 taken as keys 8j + 2t and 8j + 2t + 1 as in mlc_attn_x_cb */
      const int q0 = (w & 1) * 16, c0 = (w >> 1) * (D / 2);
      float acc[D >= 16 ? D / 16 : 1][4]; /* (instantiated, unused, at smaller D without DQ) */
#pragma unroll
      for (int n = 0; n < D / 16; n++) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;
#pragma unroll
      for (int j = 0; j < BN / 8; j++) {
        const float *a = sD + (8 * j + 2 * tq) * PQ + q0 + gq;
        unsigned ah[4], al[4];
        mlc_tf32_split<X>(a[0], ah[0], al[0]);
        mlc_tf32_split<X>(a[8], ah[1], al[1]);
        mlc_tf32_split<X>(a[PQ], ah[2], al[2]);
        mlc_tf32_split<X>(a[PQ + 8], ah[3], al[3]);
        const float *b = sK + (8 * j + 2 * tq) * LD + c0 + gq;
#pragma unroll
        for (int n = 0; n < D / 16; n++) {
          unsigned bh[2], bl[2];
          mlc_tf32_split<X>(b[n * 8], bh[0], bl[0]);
          mlc_tf32_split<X>(b[LD + n * 8], bh[1], bl[1]);
          mlc_mma_x<X>(acc[n], ah, al, bh, bl);
        }
      }
#pragma unroll
      for (int r = 0; r < 2; r++) {
        const int row = i0 + q0 + gq + 8 * r;
        if (row < S) {
          float *dr = dqa + ((size_t)bh * S + row) * D + c0 + 2 * tq;
#pragma unroll
          for (int n = 0; n < D / 16; n++)
            asm volatile("red.global.add.v2.f32 [%0], {%1, %2};" :: "l"(dr + n * 8), "f"(acc[n][2 * r]), "f"(acc[n][2 * r + 1]) : "memory");
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < 2; r++)
    if (ka + r * 8 < S) mlc_attn_store_dkv<float, D, BH, S, H, PART>(out, bh, ka + r * 8, r, tq, &dk[0][0], &dv[0][0], scale);
}
template <int X, int D, int W, int BK, int BH, int S, int CAUSAL, int H = 0, int PS = 0>
MLC_FN void mlc_attn_bwd_q_x(const float *g, const float *q, const float *k, const float *v, float *out,
                             const float *lse2, const float *dsum, float scale, float sl2) {
  const int BM = 16 * W, LD = D + 4, NTH = 32 * W, NT = (S + BM - 1) / BM, RSI = H ? 3 * H * D : D, RSG = H ? H * D : D;
  static_assert(D % 8 == 0 && BK % 8 == 0, "attention_grad tile");
  int tile, bh;
  if (CAUSAL) { tile = NT - 1 - (int)(blockIdx.x / BH); bh = (int)(blockIdx.x % BH); }
  else { tile = (int)(blockIdx.x % NT); bh = (int)(blockIdx.x / NT); }
  const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5, gq = lane >> 2, tq = lane & 3;
  const int m0 = tile * BM;
  const size_t hb = (size_t)bh * S * D;
  const float *qb = q + mlc_attn_row<H, S, D, RSI>(bh, 0), *gb = g + mlc_attn_row<H, S, D, RSG>(bh, 0);
  const float *kb = H ? qb + H * D : k + hb, *vb = H ? qb + 2 * H * D : v + hb;
  float *sQ = (float *)mlc_attn_sm, *sG = sQ + BM * LD, *sK = sG + BM * LD, *sV = sK + 2 * BK * LD;
  float *sKl = sV + 2 * BK * LD, *sVl = sKl + BK * LD;
  int nkb = (S + BK - 1) / BK;
  if (CAUSAL) { int lim = ((m0 + BM < S ? m0 + BM : S) + BK - 1) / BK; nkb = lim < nkb ? lim : nkb; }
  mlc_attn_ld32<D, BM, NTH, S, RSI>(sQ, qb, m0);
  mlc_attn_ld32<D, BM, NTH, S, RSG>(sG, gb, m0);
  mlc_attn_ld32<D, BK, NTH, S, RSI>(sK, kb, 0);
  mlc_attn_ld32<D, BK, NTH, S, RSI>(sV, vb, 0);
  mlc_attn_commit();
  const int ra = m0 + w * 16 + gq; /* this thread's rows: ra, ra + 8 */
  float l2[2], ds[2];
#pragma unroll
  for (int r = 0; r < 2; r++) {
    int row = ra + r * 8;
    l2[r] = row < S ? lse2[(size_t)bh * S + row] : 0.f;
    ds[r] = row < S ? dsum[(size_t)bh * S + row] : 0.f;
  }
  float dq[D / 8][4];
#pragma unroll
  for (int t = 0; t < D / 8; t++) dq[t][0] = dq[t][1] = dq[t][2] = dq[t][3] = 0.f;
  for (int kbi = 0; kbi < nkb; kbi++) {
    mlc_attn_wait();
    __syncthreads();
    if (kbi + 1 < nkb) {
      int nb = (kbi + 1) & 1;
      mlc_attn_ld32<D, BK, NTH, S, RSI>(sK + nb * BK * LD, kb, (kbi + 1) * BK);
      mlc_attn_ld32<D, BK, NTH, S, RSI>(sV + nb * BK * LD, vb, (kbi + 1) * BK);
      mlc_attn_commit();
    }
    float *cK = sK + (kbi & 1) * BK * LD, *cV = sV + (kbi & 1) * BK * LD;
    if (PS) {
      mlc_attn_x_split<X, D, BK, NTH>(cK, sKl);
      mlc_attn_x_split<X, D, BK, NTH>(cV, sVl);
      __syncthreads();
    }
    float s[BK / 8][4], dp[BK / 8][4];
#pragma unroll
    for (int t = 0; t < BK / 8; t++)
#pragma unroll
      for (int e = 0; e < 4; e++) s[t][e] = dp[t][e] = 0.f;
    mlc_attn_x_abt<X, D, BK, PS>(s, sQ + w * 16 * LD, cK, gq, tq, sKl);
    mlc_attn_x_abt<X, D, BK, PS>(dp, sG + w * 16 * LD, cV, gq, tq, sVl);
    const int j0 = kbi * BK;
#pragma unroll
    for (int t = 0; t < BK / 8; t++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        int key = j0 + t * 8 + 2 * tq + (e & 1), r = e >> 1, row = ra + r * 8;
        float p = exp2f(s[t][e] * sl2 - l2[r]);
        if (row >= S || key >= S || (CAUSAL && key > row)) p = 0.f;
        dp[t][e] = p * (dp[t][e] - ds[r]);
      }
    mlc_attn_x_cb<X, BK, D, PS>(dq, dp, cK, gq, tq, sKl);
  }
#pragma unroll
  for (int r = 0; r < 2; r++) {
    int row = ra + r * 8;
    if (row < S) {
      float2 *dr = (float2 *)(H ? out + mlc_attn_row<H, S, D, 3 * H * D>(bh, row) : out + hb + (size_t)row * D);
#pragma unroll
      for (int t = 0; t < D / 8; t++) dr[t * 4 + tq] = make_float2(dq[t][2 * r] * scale, dq[t][2 * r + 1] * scale);
    }
  }
}

// attention_kv (a decode block's prefill and step), one launch: a block of
// W warps per (batch * head, query row i) of a chunk of SQ rows at position
// off = pos clamped to [0, SK - SQ].  Query i sees keys j <= off + i: rows
// j < off from the caches, rows off .. off + i from the chunk's own k and v.
// The block also copies the chunk's row i of k and v into cache row off + i.
// No block reads a cache row that this launch writes, so the copy needs no
// ordering against the reads.  Each warp takes KB keys at a time (warp w
// the keys w KB .. w KB + KB - 1 of every W KB), its lanes splitting the head
// dim (E elements each, one vector load where D is 32 E and E a power of
// two), the KB dot products summed across the warp together; an online
// softmax in base 2 per warp, the warps' (max, sum, row) merged at the end
// through shared memory.  Exact f32 arithmetic on 16-bit or f32 storage.
template <int BYTES> struct mlc_kv_vec;
template <> struct mlc_kv_vec<2> { typedef unsigned short t; };
template <> struct mlc_kv_vec<4> { typedef unsigned t; };
template <> struct mlc_kv_vec<8> { typedef uint2 t; };
template <> struct mlc_kv_vec<16> { typedef uint4 t; };
// Elements p[0 .. E) as f32: vector loads of up to 16 bytes (VEC: p is
// aligned to E elements, E a power of two), else element by element up to n.
template <class T, int E, bool VEC> MLC_FN void mlc_kv_ld(const T *p, int n, float *f) {
  if constexpr (VEC) { // not instantiated otherwise: E * sizeof(T) need not be a vector's size
    constexpr int B = E * (int)sizeof(T) >= 16 ? 16 : E * (int)sizeof(T), PER = B / (int)sizeof(T);
#pragma unroll
    for (int c = 0; c < E / PER; c++) {
      union { typename mlc_kv_vec<B>::t v; T e[PER]; } u;
      u.v = *(const typename mlc_kv_vec<B>::t *)(p + c * PER);
#pragma unroll
      for (int e = 0; e < PER; e++) f[c * PER + e] = to_f32(u.e[e]);
    }
  } else {
#pragma unroll
    for (int e = 0; e < E; e++) f[e] = e < n ? to_f32(p[e]) : 0.f;
  }
}
template <class T, int D, int SQ, int SK, int W>
MLC_FN void mlc_attn_kv(const T *q, const T *k, const T *v, T *kc, T *vc, const int *pos, T *out, float sl2) {
  constexpr int E = (D + 31) / 32, KB = 8;
  constexpr bool VEC = D % 32 == 0 && (E & (E - 1)) == 0;
  __shared__ float s_m[W], s_l[W], s_o[W][D];
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, i = (int)(blockIdx.x % SQ);
  const long long bh = blockIdx.x / SQ;
  const int p0 = *pos, off = p0 < 0 ? 0 : p0 > SK - SQ ? SK - SQ : p0, kend = off + i + 1;
  const T *kq = k + bh * SQ * D, *vq = v + bh * SQ * D;
  T *kb = kc + bh * SK * D, *vb = vc + bh * SK * D;
  for (int d = threadIdx.x; d < D; d += W * 32) {
    kb[(long long)(off + i) * D + d] = kq[(long long)i * D + d];
    vb[(long long)(off + i) * D + d] = vq[(long long)i * D + d];
  }
  const int d0 = lane * E, n = D - d0; // this lane's elements: d0 .. d0 + min(E, n)
  float qf[E], acc[E];
  if (n > 0) mlc_kv_ld<T, E, VEC>(q + (bh * SQ + i) * D + d0, n, qf);
  else
#pragma unroll
    for (int e = 0; e < E; e++) qf[e] = 0.f;
#pragma unroll
  for (int e = 0; e < E; e++) acc[e] = 0.f;
  float m = -MLC_INF, l = 0.f;
  for (int j0 = w * KB; j0 < kend; j0 += W * KB) {
    float s[KB], vf[KB][E];
#pragma unroll
    for (int t = 0; t < KB; t++) {
      const int j = j0 + t;
      float kf[E];
      if (j < kend && n > 0) {
        const long long kr = j < off ? (long long)j * D : 0, cr = (long long)(j - off) * D;
        mlc_kv_ld<T, E, VEC>(j < off ? kb + kr + d0 : kq + cr + d0, n, kf);
        mlc_kv_ld<T, E, VEC>(j < off ? vb + kr + d0 : vq + cr + d0, n, vf[t]);
      } else {
#pragma unroll
        for (int e = 0; e < E; e++) kf[e] = vf[t][e] = 0.f;
      }
      float part = 0.f;
#pragma unroll
      for (int e = 0; e < E; e++) part += qf[e] * kf[e];
      s[t] = part;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
#pragma unroll
      for (int t = 0; t < KB; t++) s[t] += __shfl_xor_sync(0xffffffffu, s[t], o);
    float mb = -MLC_INF;
#pragma unroll
    for (int t = 0; t < KB; t++) {
      s[t] = j0 + t < kend ? s[t] * sl2 : -MLC_INF;
      mb = fmaxf(mb, s[t]);
    }
    const float mn = fmaxf(m, mb), corr = exp2f(m - mn);
    l *= corr;
#pragma unroll
    for (int e = 0; e < E; e++) acc[e] *= corr;
#pragma unroll
    for (int t = 0; t < KB; t++) {
      const float p = exp2f(s[t] - mn);
      l += p;
#pragma unroll
      for (int e = 0; e < E; e++) acc[e] += p * vf[t][e];
    }
    m = mn;
  }
  if (lane == 0) s_m[w] = m, s_l[w] = l;
#pragma unroll
  for (int e = 0; e < E; e++)
    if (e < n) s_o[w][d0 + e] = acc[e];
  __syncthreads();
  float mx = -MLC_INF;
#pragma unroll
  for (int u = 0; u < W; u++) mx = fmaxf(mx, s_m[u]);
  for (int d = threadIdx.x; d < D; d += W * 32) {
    float sum = 0.f, o = 0.f;
#pragma unroll
    for (int u = 0; u < W; u++) {
      const float c = s_m[u] == -MLC_INF ? 0.f : exp2f(s_m[u] - mx);
      sum += s_l[u] * c;
      o += s_o[u][d] * c;
    }
    out[(bh * SQ + i) * D + d] = mlc_store_cvt<T>(o / sum);
  }
}
