// mlc Metal attention (codegen/metal/emit_attention.c), flash style: no
// sq x sk matrix in device memory, exact f32 arithmetic (SIMT, no
// simdgroup_matrix), bf16/f16 widened on load and rounded once at the store.
//
// Every kernel has 4 SIMD groups (128 threads); a SIMD group owns RPW rows
// (query rows, or key rows for dk/dv) of the threadgroup's block of 4 * RPW,
// staged once in threadgroup memory as float.  The other side streams
// through threadgroup memory BS rows at a time (BS a power of two <= 32,
// rows padded to an odd float count so lanes that walk rows do not
// collide).  A dot product of an own row with the BS streamed rows takes
// the SIMD group once: lane l works on streamed row l % BS and on every
// (32 / BS)-th column from l / BS, and a butterfly over the high lane bits
// completes the sums.  Sums over the streamed rows (o += p v, dk += ds q)
// then give each lane columns lane, lane + 32, ... with the row's weight
// broadcast by simd_shuffle.  Causal masking (key j visible to query i iff
// j <= i) stops the key loop at the block's last row and skips rows that
// see none of a block.
//
// Row statistics for the gradient (stats, in scratch): lse[BH * SQ] =
// max + log(sum) of the scaled scores, then dsum[BH * SQ] = dO . O.

// The dot product of own row x with streamed row lane % BS, over D columns.
template <int D, int BS>
inline float mlc_attn_dot(threadgroup const float *x, threadgroup const float *y, uint lane) {
  float s = 0.f;
  for (int d = (int)lane / BS; d < D; d += 32 / BS) s = fma(x[d], y[d], s);
  for (ushort o = 16; o >= BS; o >>= 1) s += simd_shuffle_xor(s, o);
  return s;
}

// Rows [r0, r0 + R) of a [rows][C] tensor into threadgroup memory [R][LD] as
// float, zeros past the last row.
template <class T, int C, int LD>
inline void mlc_attn_stage(threadgroup float *dst, device const T *src, long r0, int R, long rows, uint tid) {
  for (int e = (int)tid; e < R * C; e += 128) {
    const int r = e / C, col = e - r * C;
    dst[r * LD + col] = r0 + r < rows ? to_f32(src[(r0 + r) * C + col]) : 0.f;
  }
}

// Forward: one threadgroup per (batch * head, block of 4 * RPW query rows).
// MODE 0 writes out[BH][SQ][DV]; MODE 1 (the gradient's first launch) writes
// only the statistics of each row, with g = dO.
// Threadgroup memory: Q [4 RPW][D], then K or V [BS][max(D, DV) + 1] floats.
template <class T, int D, int DV, int BH, int SQ, int SK, int CAUSAL, int MODE, int RPW, int BS>
inline void mlc_attn_fwd_msl(device const T *q, device const T *k, device const T *v, device T *out,
                             device const T *g, device float *stats, float scale, threadgroup uchar *smem,
                             uint bid, uint tid, uint sid, uint lane) {
  const int BQ = 4 * RPW, NQB = (SQ + BQ - 1) / BQ, NV = (DV + 31) / 32, LD = (D > DV ? D : DV) + 1;
  const int bh = (int)bid / NQB, i0 = ((int)bid - bh * NQB) * BQ;
  threadgroup float *Qs = (threadgroup float *)smem, *KV = Qs + BQ * D;
  mlc_attn_stage<T, D, D>(Qs, q + (long)bh * SQ * D, i0, BQ, SQ, tid);
  float m[RPW], l[RPW], acc[RPW][NV], p[RPW], corr[RPW];
  for (int r = 0; r < RPW; r++) {
    m[r] = -MLC_INF;
    l[r] = 0.f;
    for (int t = 0; t < NV; t++) acc[r][t] = 0.f;
  }
  const int nk = CAUSAL ? (i0 + BQ < SK ? i0 + BQ : SK) : SK;
  for (int j0 = 0; j0 < nk; j0 += BS) {
    threadgroup_barrier(mem_flags::mem_threadgroup);
    mlc_attn_stage<T, D, LD>(KV, k + (long)bh * SK * D, j0, BS, SK, tid);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    const int jj = (int)lane % BS, j = j0 + jj;
    for (int r = 0; r < RPW; r++) {
      const int row = (int)sid * RPW + r, i = i0 + row;
      const float s = mlc_attn_dot<D, BS>(Qs + row * D, KV + jj * LD, lane) * scale;
      const bool ok = i < SQ && j < SK && (!CAUSAL || j <= i);
      const float mx = simd_max(ok ? s : -MLC_INF);
      if (mx == -MLC_INF) { // the row sees none of the block
        p[r] = 0.f;
        corr[r] = 1.f;
        continue;
      }
      const float mn = max(m[r], mx);
      corr[r] = precise::exp(m[r] - mn);
      p[r] = ok ? precise::exp(s - mn) : 0.f;
      l[r] = l[r] * corr[r] + simd_sum((int)lane < BS ? p[r] : 0.f);
      m[r] = mn;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    mlc_attn_stage<T, DV, LD>(KV, v + (long)bh * SK * DV, j0, BS, SK, tid);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    const int cnt = nk - j0 < BS ? nk - j0 : BS;
    for (int r = 0; r < RPW; r++) {
      for (int t = 0; t < NV; t++) acc[r][t] *= corr[r];
      for (int u = 0; u < cnt; u++) {
        const float pu = simd_shuffle(p[r], (ushort)u);
        for (int t = 0; t < NV; t++)
          if ((int)lane + 32 * t < DV) acc[r][t] = fma(pu, KV[u * LD + (int)lane + 32 * t], acc[r][t]);
      }
    }
  }
  for (int r = 0; r < RPW; r++) {
    const int i = i0 + (int)sid * RPW + r;
    if (i >= SQ) continue;
    const long row = (long)bh * SQ + i;
    const float inv = 1.f / l[r];
    if (MODE == 0) {
      for (int t = 0; t < NV; t++)
        if ((int)lane + 32 * t < DV) out[row * DV + (int)lane + 32 * t] = from_f32<T>(acc[r][t] * inv);
    } else {
      float ds = 0.f;
      for (int t = 0; t < NV; t++)
        if ((int)lane + 32 * t < DV) ds = fma(to_f32(g[row * DV + (int)lane + 32 * t]), acc[r][t] * inv, ds);
      ds = simd_sum(ds);
      if (lane == 0) {
        stats[row] = m[r] + precise::log(l[r]);
        stats[(long)BH * SQ + row] = ds;
      }
    }
  }
}

// dk, dv (out[1], out[2] of [3][BH][S][D]): one threadgroup per (batch *
// head, block of 4 * RPW key rows), over the query rows BS at a time.
// Threadgroup memory: K, V [4 RPW][D]; Q, dO [BS][D + 1]; lse, dsum [BS].
template <class T, int D, int BH, int S, int CAUSAL, int RPW, int BS>
inline void mlc_attn_bwd_kv_msl(device const T *g, device const T *q, device const T *k, device const T *v,
                                device T *out, device const float *stats, float scale, threadgroup uchar *smem,
                                uint bid, uint tid, uint sid, uint lane) {
  const int BK = 4 * RPW, NKB = (S + BK - 1) / BK, NV = (D + 31) / 32, LD = D + 1;
  const int bh = (int)bid / NKB, j0 = ((int)bid - bh * NKB) * BK;
  const long hb = (long)bh * S * D, N = (long)BH * S * D;
  threadgroup float *Ks = (threadgroup float *)smem, *Vs = Ks + BK * D, *Qs = Vs + BK * D, *Gs = Qs + BS * LD;
  threadgroup float *Ls = Gs + BS * LD, *Ds = Ls + BS;
  mlc_attn_stage<T, D, D>(Ks, k + hb, j0, BK, S, tid);
  mlc_attn_stage<T, D, D>(Vs, v + hb, j0, BK, S, tid);
  float dk[RPW][NV], dv[RPW][NV];
  for (int r = 0; r < RPW; r++)
    for (int t = 0; t < NV; t++) dk[r][t] = dv[r][t] = 0.f;
  for (int i0 = CAUSAL ? j0 / BS * BS : 0; i0 < S; i0 += BS) {
    threadgroup_barrier(mem_flags::mem_threadgroup);
    mlc_attn_stage<T, D, LD>(Qs, q + hb, i0, BS, S, tid);
    mlc_attn_stage<T, D, LD>(Gs, g + hb, i0, BS, S, tid);
    if ((int)tid < BS) {
      const bool ok = i0 + (int)tid < S;
      Ls[tid] = ok ? stats[(long)bh * S + i0 + tid] : 0.f;
      Ds[tid] = ok ? stats[(long)BH * S + (long)bh * S + i0 + tid] : 0.f;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    const int ii = (int)lane % BS, i = i0 + ii, cnt = S - i0 < BS ? S - i0 : BS;
    for (int r = 0; r < RPW; r++) {
      const int row = (int)sid * RPW + r, j = j0 + row;
      if (j >= S || (CAUSAL && i0 + BS - 1 < j)) continue; // no query of the block sees key j
      const float s = mlc_attn_dot<D, BS>(Ks + row * D, Qs + ii * LD, lane);
      const float dp = mlc_attn_dot<D, BS>(Vs + row * D, Gs + ii * LD, lane);
      const bool ok = i < S && (!CAUSAL || j <= i);
      const float pp = ok ? precise::exp(s * scale - Ls[ii]) : 0.f, ds = pp * (dp - Ds[ii]);
      for (int u = 0; u < cnt; u++) {
        const float pu = simd_shuffle(pp, (ushort)u), du = simd_shuffle(ds, (ushort)u);
        for (int t = 0; t < NV; t++) {
          const int col = (int)lane + 32 * t;
          if (col < D) {
            dv[r][t] = fma(pu, Gs[u * LD + col], dv[r][t]);
            dk[r][t] = fma(du, Qs[u * LD + col], dk[r][t]);
          }
        }
      }
    }
  }
  for (int r = 0; r < RPW; r++) {
    const int j = j0 + (int)sid * RPW + r;
    if (j >= S) continue;
    for (int t = 0; t < NV; t++) {
      const int col = (int)lane + 32 * t;
      if (col < D) {
        out[N + hb + (long)j * D + col] = from_f32<T>(dk[r][t] * scale);
        out[2 * N + hb + (long)j * D + col] = from_f32<T>(dv[r][t]);
      }
    }
  }
}

// dq (out[0]): one threadgroup per (batch * head, block of 4 * RPW query
// rows), over the keys BS at a time.
// Threadgroup memory: Q, dO [4 RPW][D]; K, V [BS][D + 1].
template <class T, int D, int BH, int S, int CAUSAL, int RPW, int BS>
inline void mlc_attn_bwd_q_msl(device const T *g, device const T *q, device const T *k, device const T *v,
                               device T *out, device const float *stats, float scale, threadgroup uchar *smem,
                               uint bid, uint tid, uint sid, uint lane) {
  const int BQ = 4 * RPW, NQB = (S + BQ - 1) / BQ, NV = (D + 31) / 32, LD = D + 1;
  const int bh = (int)bid / NQB, i0 = ((int)bid - bh * NQB) * BQ;
  const long hb = (long)bh * S * D;
  threadgroup float *Qs = (threadgroup float *)smem, *Gs = Qs + BQ * D, *Ks = Gs + BQ * D, *Vs = Ks + BS * LD;
  mlc_attn_stage<T, D, D>(Qs, q + hb, i0, BQ, S, tid);
  mlc_attn_stage<T, D, D>(Gs, g + hb, i0, BQ, S, tid);
  float acc[RPW][NV], lse[RPW], dsum[RPW];
  for (int r = 0; r < RPW; r++) {
    const int i = i0 + (int)sid * RPW + r;
    lse[r] = i < S ? stats[(long)bh * S + i] : 0.f;
    dsum[r] = i < S ? stats[(long)BH * S + (long)bh * S + i] : 0.f;
    for (int t = 0; t < NV; t++) acc[r][t] = 0.f;
  }
  const int nk = CAUSAL ? (i0 + BQ < S ? i0 + BQ : S) : S;
  for (int j0 = 0; j0 < nk; j0 += BS) {
    threadgroup_barrier(mem_flags::mem_threadgroup);
    mlc_attn_stage<T, D, LD>(Ks, k + hb, j0, BS, S, tid);
    mlc_attn_stage<T, D, LD>(Vs, v + hb, j0, BS, S, tid);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    const int jj = (int)lane % BS, j = j0 + jj, cnt = nk - j0 < BS ? nk - j0 : BS;
    for (int r = 0; r < RPW; r++) {
      const int row = (int)sid * RPW + r, i = i0 + row;
      if (i >= S || (CAUSAL && j0 > i)) continue; // the row sees none of the block
      const float s = mlc_attn_dot<D, BS>(Qs + row * D, Ks + jj * LD, lane);
      const float dp = mlc_attn_dot<D, BS>(Gs + row * D, Vs + jj * LD, lane);
      const bool ok = j < S && (!CAUSAL || j <= i);
      const float ds = ok ? precise::exp(s * scale - lse[r]) * (dp - dsum[r]) : 0.f;
      for (int u = 0; u < cnt; u++) {
        const float du = simd_shuffle(ds, (ushort)u);
        for (int t = 0; t < NV; t++)
          if ((int)lane + 32 * t < D) acc[r][t] = fma(du, Ks[u * LD + (int)lane + 32 * t], acc[r][t]);
      }
    }
  }
  for (int r = 0; r < RPW; r++) {
    const int i = i0 + (int)sid * RPW + r;
    if (i >= S) continue;
    for (int t = 0; t < NV; t++)
      if ((int)lane + 32 * t < D) out[hb + (long)i * D + (int)lane + 32 * t] = from_f32<T>(acc[r][t] * scale);
  }
}

// attention_kv (a decode block's prefill and step): one threadgroup of W
// SIMD groups per (batch * head, query row i of the chunk of SQ rows at
// pos).  Query i sees the caches' rows before pos and the chunk's own rows
// pos .. pos + i; the threadgroup also copies its chunk row into the caches
// at pos + i, which no threadgroup of this launch reads.  A SIMD group takes
// keys W apart, lane l columns l, l + 32, ...; its online softmax (base 2:
// sl2 is the scale times log2 e) meets the others' in threadgroup memory:
// [W] maxima, [W] sums, then [W][D] partial rows.  pos is clamped to
// [0, SK - SQ] as on the other targets.
template <class T, int D, int SQ, int SK, int W>
inline void mlc_attn_kv_msl(device const T *q, device const T *k, device const T *v, device T *kc, device T *vc,
                            device const int *pos, device T *out, float sl2, threadgroup uchar *smem, uint bid,
                            uint tid, uint sid, uint lane) {
  const int E = (D + 31) / 32, i = (int)bid % SQ;
  const long bh = (long)bid / SQ;
  threadgroup float *s_m = (threadgroup float *)smem, *s_l = s_m + W, *s_o = s_l + W;
  const int p0 = *pos, off = p0 < 0 ? 0 : p0 > SK - SQ ? SK - SQ : p0, kend = off + i + 1;
  device const T *kq = k + bh * SQ * D, *vq = v + bh * SQ * D;
  device T *kb = kc + bh * SK * D, *vb = vc + bh * SK * D;
  for (int d = (int)tid; d < D; d += W * 32) {
    kb[(long)(off + i) * D + d] = kq[(long)i * D + d];
    vb[(long)(off + i) * D + d] = vq[(long)i * D + d];
  }
  float qf[E], acc[E];
  for (int e = 0; e < E; e++) {
    const int d = (int)lane + 32 * e;
    qf[e] = d < D ? to_f32(q[(bh * SQ + i) * D + d]) : 0.f;
    acc[e] = 0.f;
  }
  float m = -MLC_INF, l = 0.f;
  for (int j = (int)sid; j < kend; j += W) {
    device const T *kr = j < off ? kb + (long)j * D : kq + (long)(j - off) * D;
    device const T *vr = j < off ? vb + (long)j * D : vq + (long)(j - off) * D;
    float part = 0.f;
    for (int e = 0; e < E; e++) {
      const int d = (int)lane + 32 * e;
      if (d < D) part = fma(qf[e], to_f32(kr[d]), part);
    }
    const float s = simd_sum(part) * sl2, mn = max(m, s), corr = precise::exp2(m - mn), p = precise::exp2(s - mn);
    l = l * corr + p;
    for (int e = 0; e < E; e++) {
      const int d = (int)lane + 32 * e;
      acc[e] = acc[e] * corr + (d < D ? p * to_f32(vr[d]) : 0.f);
    }
    m = mn;
  }
  if (lane == 0) s_m[sid] = m, s_l[sid] = l;
  for (int e = 0; e < E; e++)
    if ((int)lane + 32 * e < D) s_o[sid * D + lane + 32 * e] = acc[e];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  float mx = -MLC_INF;
  for (int u = 0; u < W; u++) mx = max(mx, s_m[u]);
  for (int d = (int)tid; d < D; d += W * 32) {
    float sum = 0.f, o = 0.f;
    for (int u = 0; u < W; u++) {
      const float c = s_m[u] == -MLC_INF ? 0.f : precise::exp2(s_m[u] - mx);
      sum += s_l[u] * c;
      o += s_o[u * D + d] * c;
    }
    out[(bh * SQ + i) * D + d] = from_f32<T>(o / sum);
  }
}
