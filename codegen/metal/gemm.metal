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

// qlinear (--quantize int8|int4): y[M][N] = x[M][K] dequant(w)^T, x and y
// f32, w packed as runtime/quant.h lays it out: per output column a row of
// K / (32 / BITS) words of codes (the first code in the low bits, each a
// signed BITS-bit integer) then K / G f32 scales.  A SIMD group per output
// column and up to MB rows of x; its lanes take the row's words 32 apart,
// dequantise each in registers (no f32 weight is formed) against the rows
// of x, scale each word's sum once (a word lies in one group: G is a
// multiple of 8) and meet by simd_sum.  WPB SIMD groups per threadgroup.
// SCHEME holds ir/ir.h's MLC_QS_* flags.  ASYM (1, --quantize ...:asym):
// the codes unsigned, a min per group beside its scale, and per word s sum
// code x + lo sum x (w read back as lo + code s).  BF16 (2, the default):
// the scales (and mins) bf16, two to a word (asymmetric: a group's scale low
// and its min high); else f32, a word each, the K / G mins after the scales.
template <int BITS, int MB, long M, long N, long K, long G, int WPB, int SCHEME = 0>
inline void mlc_qgemv_msl(device const int *wq, device const float *x, device float *y, uint bid, uint sid, uint lane) {
  const int PER = 32 / BITS;
  const uint MASK = (1u << BITS) - 1;
  const bool ASYM = SCHEME & 1, BF16 = SCHEME & 2;
  const long CW = K / PER, GW = K / G, HALVES = (ASYM ? 2 : 1) * GW, RW = CW + (BF16 ? (HALVES + 1) / 2 : HALVES),
             NB = (N + WPB - 1) / WPB;
  const long n = (long)(bid % NB) * WPB + sid, r0 = (long)(bid / NB) * MB;
  if (n >= N) return;
  const int rows = M - r0 < MB ? (int)(M - r0) : MB;
  device const uint *row = (device const uint *)wq + n * RW;
  device const float *xr = x + r0 * K;
  float acc[MB];
  for (int m = 0; m < MB; m++) acc[m] = 0.f;
  for (long c = lane; c < CW; c += 32) {
    const uint w = row[c];
    const long k0 = c * PER;
    const long g = k0 / G;
    const uint t = row[CW + (BF16 && !ASYM ? g / 2 : g)]; // f32: the scale; bf16: the scale and the min, or two scales
    const float s = !BF16 ? as_type<float>(t) : as_type<float>(!ASYM && (g & 1) ? t & 0xffff0000u : t << 16);
    const float lo = !ASYM ? 0.f : BF16 ? as_type<float>(t & 0xffff0000u) : as_type<float>(row[CW + GW + g]);
    float code[PER];
    for (int e = 0; e < PER; e++)
      code[e] = ASYM ? (float)(w >> (BITS * e) & MASK) : (float)((int)(w << (32 - BITS * (e + 1))) >> (32 - BITS));
    for (int m = 0; m < rows; m++) {
      float sum = 0.f, xs = 0.f;
      for (int e = 0; e < PER; e++) {
        const float xv = xr[m * K + k0 + e];
        sum = fma(code[e], xv, sum);
        if (ASYM) xs += xv;
      }
      acc[m] = ASYM ? fma(xs, lo, fma(sum, s, acc[m])) : fma(sum, s, acc[m]);
    }
  }
  for (int m = 0; m < MB; m++) acc[m] = simd_sum(acc[m]);
  if (lane == 0)
    for (int m = 0; m < rows; m++) y[(r0 + m) * N + n] = acc[m];
}
