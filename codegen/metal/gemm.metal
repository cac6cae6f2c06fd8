// mlc Metal GEMM (codegen/metal/emit_gemm.c): C[M,N] = A[M,K] B[K,N] for one
// batch index, f32 accumulation, one rounding at the store.
//
// A threadgroup computes a BM x BN tile of C with WM x WN SIMD groups; each
// SIMD group owns a (BM/WM) x (BN/WN) block of 8x8 simdgroup_float8x8
// accumulators.  Per BK-deep step the threadgroup stages A's BM x BK and
// B's BK x BN tiles in threadgroup memory as float (bf16 and f16 widen exactly;
// simdgroup_multiply_accumulate takes one element type for A, B and C, and
// the accumulator must be float), always as A[m][k] and B[k][n] whatever the operands' layout
// (A_KM: A stored [K,M]; B_NK: B stored [N,K]), with the consecutive threads
// walking the operand's contiguous axis; edges are zero-filled, so every
// simdgroup_load reads a whole 8x8 block.  The accumulators go back through
// threadgroup memory (as float) for the converted, predicated store.
//
// smem: the launch's threadgroup memory, max(BM (BK + 4) + BK (BN + 4),
// BM (BN + 4)) floats.
// tid: thread in the threadgroup; sid: SIMD group; BM/WM and BN/WN are
// multiples of 8, and the threadgroup has WM * WN * 32 threads.
// The store: st1(i, col, v) rounds the f32 result v of element i (row * N
// + col) to T and stores it.  A fused GEMM passes its epilogue instead
// (codegen/cuda/emit_fused.c), with the same call.
template <class T> struct mlc_gemm_msl_out {
  device T *c;
  inline void st1(long i, long col, float v) const { (void)col; c[i] = from_f32<T>(v); }
};
template <class T, int BM, int BN, int BK, int WM, int WN, bool A_KM, bool B_NK, long M, long N, long K, class E>
inline void mlc_gemm_msl(device const T *a, device const T *b, const E ep, int tm, int tn,
                         threadgroup uchar *smem, uint tid, uint sid) {
  const int NT = WM * WN * 32;
  const int FM = BM / (WM * 8), FN = BN / (WN * 8);
  const int LDA = BK + 4, LDB = BN + 4, LDC = BN + 4;
  threadgroup float *As = (threadgroup float *)smem;
  threadgroup float *Bs = As + BM * LDA;
  threadgroup float *Cs = (threadgroup float *)smem;
  const long m0 = (long)tm * BM, n0 = (long)tn * BN;
  const int wm = (int)sid / WN, wn = (int)sid % WN;
  simdgroup_float8x8 acc[FM][FN];
  for (int i = 0; i < FM; i++)
    for (int j = 0; j < FN; j++) acc[i][j] = make_filled_simdgroup_matrix<float, 8, 8>(0.f);
  for (long k0 = 0; k0 < K; k0 += BK) {
    for (int e = (int)tid; e < BM * BK; e += NT) {
      const int r = A_KM ? e % BM : e / BK, kk = A_KM ? e / BM : e % BK;
      const long gm = m0 + r, gk = k0 + kk;
      float x = 0.f;
      if (gm < M && gk < K) x = to_f32(a[A_KM ? gk * M + gm : gm * K + gk]);
      As[r * LDA + kk] = x;
    }
    for (int e = (int)tid; e < BK * BN; e += NT) {
      const int n = B_NK ? e / BK : e % BN, kk = B_NK ? e % BK : e / BN;
      const long gn = n0 + n, gk = k0 + kk;
      float x = 0.f;
      if (gn < N && gk < K) x = to_f32(b[B_NK ? gn * K + gk : gk * N + gn]);
      Bs[kk * LDB + n] = x;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (int kk = 0; kk < BK; kk += 8) {
      simdgroup_float8x8 af[FM], bf[FN];
      for (int i = 0; i < FM; i++) simdgroup_load(af[i], As + (wm * FM * 8 + i * 8) * LDA + kk, LDA);
      for (int j = 0; j < FN; j++) simdgroup_load(bf[j], Bs + kk * LDB + wn * FN * 8 + j * 8, LDB);
      for (int i = 0; i < FM; i++)
        for (int j = 0; j < FN; j++) simdgroup_multiply_accumulate(acc[i][j], af[i], bf[j], acc[i][j]);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  for (int i = 0; i < FM; i++)
    for (int j = 0; j < FN; j++)
      simdgroup_store(acc[i][j], Cs + (wm * FM * 8 + i * 8) * LDC + wn * FN * 8 + j * 8, LDC);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (int e = (int)tid; e < BM * BN; e += NT) {
    const int r = e / BN, n = e % BN;
    const long gm = m0 + r, gn = n0 + n;
    if (gm < M && gn < N) ep.st1(gm * N + gn, gn, Cs[r * LDC + n]);
  }
}
