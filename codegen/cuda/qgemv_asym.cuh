// qlinear of the asymmetric scheme (--quantize int8|int4:asym): y[m][n] =
// sum_k x[m][k] (lo + code[n][k] scale) (stored through the epilogue e's
// st1), w packed as runtime/quant.h lays it out: per row its K codes,
// unsigned, PER = 32 / BITS to a word, element j in bits [BITS (j % PER),
// + BITS); then K / G f32 scales; then K / G f32 mins.  The work is split
// as mlc_qgemv's (gemm.cuh): KS warps a block over C output columns and MB
// rows of x, a lane per word.  A word lies in one group, so per word and
// row of x, sum (lo + code s) x = s sum code x + lo sum x: the word's sum of
// x is taken once for the C columns, and each column adds its scale times
// its codes' sum and its min times that.  codegen/cuda/cuda.c emits this
// file only into modules that quantise asymmetrically, so the symmetric
// modules' text is what it was.
template <int BITS, int MB, long long M, long long N, long long K, long long G, int C, int KS> struct mlc_qgemv_asym {
  static constexpr int PER = 32 / BITS;
  static constexpr long long CW = K / PER, GW = K / G, RW = CW + 2 * GW, NB = (N + C - 1) / C;
  static constexpr long long SPAN = ((CW + KS - 1) / KS + 31) / 32 * 32; // a warp's words
  // codes as floats without I2F: a code OR'd into 2^23's mantissa is 2^23 +
  // code exactly, and one subtraction leaves it
  static constexpr unsigned MASK = (1u << BITS) - 1;
  template <class Ep> static MLC_FN void run(const int *wq, const float *x, const Ep &e) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const long long n0 = (long long)(blockIdx.x % NB) * C, r0 = (long long)(blockIdx.x / NB) * MB;
    const int rows = M - r0 < MB ? (int)(M - r0) : MB;
    const unsigned *row[C];
#pragma unroll
    for (int j = 0; j < C; j++) row[j] = (const unsigned *)wq + (n0 + j < N ? n0 + j : N - 1) * RW;
    x += r0 * K;
    float acc[C][MB];
#pragma unroll
    for (int j = 0; j < C; j++)
#pragma unroll
      for (int m = 0; m < MB; m++) acc[j][m] = 0.f;
    const long long hi = (w + 1) * SPAN < CW ? (w + 1) * SPAN : CW;
#pragma unroll 4
    for (long long c = w * SPAN + lane; c < hi; c += 32) {
      const long long k0 = c * PER;
      float code[C][PER], s[C], lo[C];
#pragma unroll
      for (int j = 0; j < C; j++) {
        const unsigned u = __ldg(row[j] + c);
        s[j] = __uint_as_float(__ldg(row[j] + CW + k0 / G));
        lo[j] = __uint_as_float(__ldg(row[j] + CW + GW + k0 / G));
#pragma unroll
        for (int i = 0; i < PER; i++) code[j][i] = __uint_as_float(0x4B000000u | (u >> (BITS * i) & MASK)) - 8388608.0f;
      }
#pragma unroll
      for (int m = 0; m < MB; m++) {
        if (m >= rows) break;
        const float4 *xr = (const float4 *)(x + m * K + k0);
        float xv[PER], xs = 0.f;
#pragma unroll
        for (int q = 0; q < PER / 4; q++) {
          const float4 v = __ldg(xr + q);
          xv[4 * q] = v.x, xv[4 * q + 1] = v.y, xv[4 * q + 2] = v.z, xv[4 * q + 3] = v.w;
        }
#pragma unroll
        for (int i = 0; i < PER; i++) xs += xv[i];
#pragma unroll
        for (int j = 0; j < C; j++) {
          float sum = 0.f;
#pragma unroll
          for (int i = 0; i < PER; i++) sum += code[j][i] * xv[i];
          acc[j][m] += sum * s[j] + xs * lo[j];
        }
      }
    }
    __shared__ float red[KS][C * MB];
#pragma unroll
    for (int j = 0; j < C; j++)
#pragma unroll
      for (int m = 0; m < MB; m++) {
        const float v = mlc_warp_sum(acc[j][m]);
        if (lane == 0) red[w][j * MB + m] = v;
      }
    __syncthreads();
    for (int t = threadIdx.x; t < C * MB; t += 32 * KS) {
      const int j = t / MB, m = t % MB;
      if (n0 + j >= N || m >= rows) continue;
      float v = 0.f;
#pragma unroll
      for (int k = 0; k < KS; k++) v += red[k][t];
      e.st1((r0 + m) * N + n0 + j, n0 + j, v);
    }
  }
};
