// qlinear of the asymmetric scheme (--quantize int8|int4:asym): y[M][N] =
// x[M][K] dequant(w)^T, x and y f32, w packed as runtime/quant.h lays it
// out: per output column a row of K / (32 / BITS) words of codes (the
// first code in the low bits, each an unsigned BITS-bit integer), then K /
// G f32 scales, then K / G f32 mins.  mlc_qgemv_msl's work split
// (gemm.metal): a SIMD group per output column and up to MB rows of x, its
// lanes taking the row's words 32 apart.  A word lies in one group, so per
// word and row of x, sum (lo + code s) x = s sum code x + lo sum x.
// codegen/metal/metal.c emits this file only into modules that quantise
// asymmetrically, so the symmetric modules' text is what it was.
template <int BITS, int MB, long M, long N, long K, long G, int WPB>
inline void mlc_qgemv_asym_msl(device const int *wq, device const float *x, device float *y, uint bid, uint sid, uint lane) {
  const int PER = 32 / BITS;
  const uint MASK = (1u << BITS) - 1;
  const long CW = K / PER, GW = K / G, RW = CW + 2 * GW, NB = (N + WPB - 1) / WPB;
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
    const float s = as_type<float>(row[CW + k0 / G]), lo = as_type<float>(row[CW + GW + k0 / G]);
    float code[PER];
    for (int e = 0; e < PER; e++) code[e] = (float)(w >> (BITS * e) & MASK);
    for (int m = 0; m < rows; m++) {
      float sum = 0.f, xs = 0.f;
      for (int e = 0; e < PER; e++) {
        const float xv = xr[m * K + k0 + e];
        sum = fma(code[e], xv, sum);
        xs += xv;
      }
      acc[m] = fma(xs, lo, fma(sum, s, acc[m]));
    }
  }
  for (int m = 0; m < MB; m++) acc[m] = simd_sum(acc[m]);
  if (lane == 0)
    for (int m = 0; m < rows; m++) y[(r0 + m) * N + n] = acc[m];
}
