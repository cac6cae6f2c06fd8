// mlc gemm: tensor-core wrappers (sm_80+, inline PTX) and the GEMM main loops
MLC_FN unsigned mlc_gemm_smem_u32(const void *p) {
  unsigned r;
  asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(r) : "l"(p));
  return r; }
// FP8 operands (scaled_mm, issue 30): two e4m3 (E 0) or e5m2 (E 1) codes of consecutive k as one
// 16-bit element, so that an [M, K] FP8 matrix is an [M, K / 2] matrix of these and the 16-bit
// kernels' K-major tiles, swizzles, TMA boxes and ldmatrix reads move its bytes unchanged: a k16
// step of 16-bit elements is 32 bytes, the k of one m64nNk32 FP8 wgmma or m16n8k32 mma.sync, whose
// fragments hold the same bytes in the same registers.  Only K-major A and B (FP8 wgmma has no
// transpose), and nothing converts these elements: the epilogue gets the f32 accumulators.
template <int EA, int EB> struct mlc_f8x2 { unsigned short x; };
template <class T> struct mlc_is_f8x2 { static constexpr bool v = false; };
template <int EA, int EB> struct mlc_is_f8x2<mlc_f8x2<EA, EB>> { static constexpr bool v = true; };
template <class T> MLC_FN void mlc_gemm_mma(float *d, const unsigned *a, const unsigned *b);
template <> MLC_FN void mlc_gemm_mma<mlc_bf16>(float *d, const unsigned *a, const unsigned *b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
    : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1])); }
template <> MLC_FN void mlc_gemm_mma<mlc_f16>(float *d, const unsigned *a, const unsigned *b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
    : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1])); }
// the same for FP8 codes (two a 16-bit element, mlc_f8x2): m16n8k32, A's and B's formats spelled out
#define MLC_GEMM_MMA_F8(EA, EB, A, B) \
  template <> MLC_FN void mlc_gemm_mma<mlc_f8x2<EA, EB>>(float *d, const unsigned *a, const unsigned *b) { \
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f32." A "." B ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};" \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1])); }
MLC_GEMM_MMA_F8(0, 0, "e4m3", "e4m3")
MLC_GEMM_MMA_F8(0, 1, "e4m3", "e5m2")
MLC_GEMM_MMA_F8(1, 0, "e5m2", "e4m3")
MLC_GEMM_MMA_F8(1, 1, "e5m2", "e5m2")
#undef MLC_GEMM_MMA_F8
MLC_FN void mlc_gemm_ldsm_x4(unsigned *r, unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
    : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr) : "memory"); }
MLC_FN void mlc_gemm_ldsm_x4_t(unsigned *r, unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
    : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr) : "memory"); }
// 16 bytes global -> shared, asynchronously; zero-filled when !ok (src not read).
MLC_FN void mlc_gemm_cp16(unsigned dst, const void *src, bool ok) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(dst), "l"(src), "r"(ok ? 16 : 0) : "memory"); }
// 4 bytes global -> shared, asynchronously; zero-filled when !ok.
MLC_FN void mlc_gemm_cp4(unsigned dst, const void *src, bool ok) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" :: "r"(dst), "l"(src), "r"(ok ? 4 : 0) : "memory"); }
MLC_FN void mlc_gemm_cp_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> MLC_FN void mlc_gemm_cp_wait() { asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory"); }
// Grouped rasterisation: consecutive blocks walk G tile-rows down one
// tile-column before moving right, so their A and B tiles share the L2.
template <int TM, int TN, int G> MLC_FN void mlc_gemm_raster(unsigned t, int &tm, int &tn) {
  unsigned per = (unsigned)G * TN, first = t / per * G, r = t % per;
  unsigned gs = TM - first < (unsigned)G ? TM - first : (unsigned)G;
  tm = (int)(first + r % gs); tn = (int)(r / gs); }
// One ROWS x COLS tile (COLS contiguous, a multiple of 8) of a row-major
// matrix with leading dimension LD and RMAX x CMAX valid elements, from
// (r0, c0), into shared memory with row pitch P (elements).  VEC: rows are
// 16-byte aligned (LD % 8 == 0): cp.async, zero-filled outside; else plain
// 2-byte loads.
// The store of C: st1(i, col, v) rounds the f32 accumulator v of element i
// (row * N + col) to T and stores it; st2(i, col, v0, v1) elements i, i + 1
// (i even); st8(i, col, raw) the eight T values (already rounded) packed in
// raw to elements i .. i + 7 (i a multiple of 8).  Fused GEMMs pass their
// own (codegen/cuda/emit_fused.c: the epilogue of a FUSED node) with the
// same calls.
template <class T> struct mlc_gemm_out {
  T *C;
  MLC_FN float f(long long, long long, float v) const { return v; } // the value to store (epilogues: after their program)
  MLC_FN void st1(long long i, long long, float v) const { C[i] = from_f32<T>(v); }
  MLC_FN void st2(long long i, long long, float v0, float v1) const {
    T a = from_f32<T>(v0), b = from_f32<T>(v1);
    *(unsigned *)(C + i) = (unsigned)a.x | (unsigned)b.x << 16;
  }
  MLC_FN void st8(long long i, long long, uint4 raw) const { *(uint4 *)(C + i) = raw; }
};
// scaled_mm's store: the accumulator times s (2^-ea 2^-eb, the operands' inverse scales: exact),
// rounded to O (f32, bf16 or f16).  mlc_gemm_pp's F8 mode, mlc_gemm_tc and the SIMT kernel call only
// st1 and st2.
template <class O> struct mlc_scaled_out {
  O *C;
  float s;
  MLC_FN void st1(long long i, long long, float v) const { C[i] = from_f32<O>(v * s); }
  MLC_FN void st2(long long i, long long, float v0, float v1) const { // i even
    if constexpr (sizeof(O) == 4) {
      *(float2 *)(C + i) = make_float2(v0 * s, v1 * s);
    } else {
      const O a = from_f32<O>(v0 * s), b = from_f32<O>(v1 * s);
      *(unsigned *)(C + i) = (unsigned)a.x | (unsigned)b.x << 16;
    }
  }
};
// The same before a fused group's epilogue E (emit_fused.c): E stores the group's result of the
// scaled accumulator.
template <class E> struct mlc_scaled_epi {
  E e;
  float s;
  MLC_FN float f(long long i, long long c, float v) const { return e.f(i, c, v * s); }
  MLC_FN void st1(long long i, long long c, float v) const { e.st1(i, c, v * s); }
  MLC_FN void st2(long long i, long long c, float v0, float v1) const { e.st2(i, c, v0 * s, v1 * s); }
};
template <bool WIDE> struct mlc_gemm_index { typedef int type; };
template <> struct mlc_gemm_index<true> { typedef long long type; };
template <int ROWS, int COLS, int P, bool VEC, int NT, long long LD, long long RMAX, long long CMAX>
MLC_FN void mlc_gemm_load_tile(unsigned short *s, const unsigned short *g, long long r0, long long c0, int tid) {
  // 32-bit offsets where the matrix allows
  typedef typename mlc_gemm_index<(RMAX + ROWS) * LD + COLS >= 0x7fffffffLL>::type I;
  constexpr int CPR = COLS / 8, CH = ROWS * CPR;
#pragma unroll
  for (int i = 0; i < (CH + NT - 1) / NT; i++) {
    int ch = tid + i * NT;
    if (CH % NT == 0 || ch < CH) {
      int r = ch / CPR, c = ch % CPR * 8;
      I gr = (I)(r0 + r), gc = (I)(c0 + c);
      unsigned short *d = s + r * P + c;
      if (VEC) {
        bool ok = gr < RMAX && gc < CMAX;
        mlc_gemm_cp16(mlc_gemm_smem_u32(d), ok ? g + gr * (I)LD + gc : g, ok);
      } else {
        unsigned v[4];
#pragma unroll
        for (int j = 0; j < 4; j++) {
          unsigned lo = gr < RMAX && gc + 2 * j < CMAX ? g[gr * (I)LD + gc + 2 * j] : 0;
          unsigned hi = gr < RMAX && gc + 2 * j + 1 < CMAX ? g[gr * (I)LD + gc + 2 * j + 1] : 0;
          v[j] = lo | hi << 16;
        }
        *(uint4 *)d = make_uint4(v[0], v[1], v[2], v[3]);
      }
    }
  }
}
// C[M,N] = A B for one BM x BN tile (tm, tn), bf16/f16 in, f32 accumulate.
// A is [M,K] row-major (AKM: stored [K,M]), B is [K,N] (BNK: stored [N,K]),
// C is [M,N] row-major.  WARPS_M x WARPS_N warps, ST-stage cp.async
// pipeline, BK-deep k-steps; shared rows padded by 16 bytes (ldmatrix reads
// of 8 rows hit 8 different bank quads).  sm: SMEM bytes, 16-byte aligned.
template <class T, int BM, int BN, int BK, int WARPS_M, int WARPS_N, int ST, bool AKM, bool BNK, long long M,
          long long N, long long K>
struct mlc_gemm_tc {
  static constexpr int NT = WARPS_M * WARPS_N * 32, WTM = BM / WARPS_M, WTN = BN / WARPS_N;
  static constexpr int FM = WTM / 16, FN = WTN / 8;
  static constexpr int A_ROWS = AKM ? BK : BM, A_P = (AKM ? BM : BK) + 8;
  static constexpr int B_ROWS = BNK ? BN : BK, B_P = (BNK ? BK : BN) + 8;
  static constexpr int A_ST = A_ROWS * A_P, B_ST = B_ROWS * B_P;
  static constexpr int SMEM = ST * (A_ST + B_ST) * 2;
  static constexpr long long LDA = AKM ? M : K, LDB = BNK ? K : N;
  static constexpr int KT = (int)((K + BK - 1) / BK);
  static MLC_FN void load(unsigned short *sA, unsigned short *sB, const unsigned short *A, const unsigned short *B,
                          long long m0, long long n0, int kt, int tid) {
    long long k0 = (long long)kt * BK;
    if (AKM) mlc_gemm_load_tile<BK, BM, A_P, LDA % 8 == 0, NT, LDA, K, M>(sA, A, k0, m0, tid);
    else mlc_gemm_load_tile<BM, BK, A_P, LDA % 8 == 0, NT, LDA, M, K>(sA, A, m0, k0, tid);
    if (BNK) mlc_gemm_load_tile<BN, BK, B_P, LDB % 8 == 0, NT, LDB, N, K>(sB, B, n0, k0, tid);
    else mlc_gemm_load_tile<BK, BN, B_P, LDB % 8 == 0, NT, LDB, K, N>(sB, B, k0, n0, tid);
  }
  // The A and B fragments of k-step kk (elements) of a stage, at this lane's ldmatrix addresses.
  static MLC_FN void frag(unsigned a_s, unsigned b_s, int kk, unsigned (&af)[FM][4], unsigned (&bf)[FN / 2][4]) {
#pragma unroll
    for (int i = 0; i < FM; i++) {
      if (AKM) mlc_gemm_ldsm_x4_t(af[i], a_s + 2 * (kk * A_P + i * 16));
      else mlc_gemm_ldsm_x4(af[i], a_s + 2 * (i * 16 * A_P + kk));
    }
#pragma unroll
    for (int j = 0; j < FN / 2; j++) {
      if (BNK) mlc_gemm_ldsm_x4(bf[j], b_s + 2 * (j * 16 * B_P + kk));
      else mlc_gemm_ldsm_x4_t(bf[j], b_s + 2 * (kk * B_P + j * 16));
    }
  }
  // The accumulators: acc[i][j][0..3] holds rows m0 + wm*WTM + 16i + g (+8
  // for [2],[3]) and columns n0 + wn*WTN + 8j + 2t (+1 for [1],[3]), with
  // g = lane / 4, t = lane % 4.
  static MLC_FN void mainloop(const T *A_, const T *B_, int tm, int tn, unsigned short *sm, float (&acc)[FM][FN][4]) {
    const unsigned short *A = (const unsigned short *)A_, *B = (const unsigned short *)B_;
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    int wm = warp / WARPS_N, wn = warp % WARPS_N;
    long long m0 = (long long)tm * BM, n0 = (long long)tn * BN;
    unsigned short *sA = sm, *sB = sm + ST * A_ST;
#pragma unroll
    for (int i = 0; i < FM; i++)
#pragma unroll
      for (int j = 0; j < FN; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) acc[i][j][e] = 0.f;
#pragma unroll
    for (int s = 0; s < ST - 1; s++) {
      if (s < KT) load(sA + s * A_ST, sB + s * B_ST, A, B, m0, n0, s, tid);
      mlc_gemm_cp_commit();
    }
    // ldmatrix lane addresses: lane supplies row r of 8x8 matrix q.
    int q = lane >> 3, r = lane & 7;
    // A fragments: matrices (mn 0-7,k 0-7), (mn 8-15,k 0-7), (mn 0-7,k 8-15), (mn 8-15,k 8-15)
    int a_mn = (q & 1) * 8, a_k = (q >> 1) * 8;
    // B fragments (two n8 tiles): (n 0-7,k 0-7), (n 0-7,k 8-15), (n 8-15,k 0-7), (n 8-15,k 8-15)
    int b_mn = (q >> 1) * 8, b_k = (q & 1) * 8;
    unsigned a_off = AKM ? (unsigned)((a_k + r) * A_P + wm * WTM + a_mn) : (unsigned)((wm * WTM + a_mn + r) * A_P + a_k);
    unsigned b_off = BNK ? (unsigned)((wn * WTN + b_mn + r) * B_P + b_k) : (unsigned)((b_k + r) * B_P + wn * WTN + b_mn);
    const unsigned a_base = mlc_gemm_smem_u32(sA) + 2 * a_off, b_base = mlc_gemm_smem_u32(sB) + 2 * b_off;
    // Software pipeline (as CUTLASS's multistage main loop): the fragments
    // of k-step kk+1 are read from shared memory while the mma of step kk
    // run; the barrier before the last step of a k-tile makes the next
    // stage visible and frees the stage the new cp.async group overwrites.
    constexpr int KK = BK / 16;
    unsigned af[2][FM][4], bf[2][FN / 2][4];
    int rs = 0, ws = ST - 1;
    mlc_gemm_cp_wait<ST - 2>();
    __syncthreads();
    frag(a_base, b_base, 0, af[0], bf[0]);
#pragma unroll 1
    for (int kt = 0; kt < KT; kt++) {
#pragma unroll
      for (int kk = 0; kk < KK; kk++) {
        if (kk == KK - 1) {
          mlc_gemm_cp_wait<ST - 2>();
          __syncthreads();
          rs = rs + 1 == ST ? 0 : rs + 1;
        }
        frag(a_base + 2 * rs * A_ST, b_base + 2 * rs * B_ST, (kk + 1) % KK * 16, af[(kk + 1) & 1], bf[(kk + 1) & 1]);
        if (kk == 0) {
          int nk = kt + ST - 1;
          if (nk < KT) load(sA + ws * A_ST, sB + ws * B_ST, A, B, m0, n0, nk, tid);
          mlc_gemm_cp_commit();
          ws = ws + 1 == ST ? 0 : ws + 1;
        }
#pragma unroll
        for (int i = 0; i < FM; i++)
#pragma unroll
          for (int j = 0; j < FN; j++) mlc_gemm_mma<T>(acc[i][j], af[kk & 1][i], &bf[kk & 1][j / 2][(j & 1) * 2]);
      }
    }
    mlc_gemm_cp_wait<0>();
  }
  // Hands the accumulators to the store E (ldc = N).
  template <class E> static MLC_FN void store(const E &e, int tm, int tn, float (&acc)[FM][FN][4]) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int wm = warp / WARPS_N, wn = warp % WARPS_N;
    long long rb = (long long)tm * BM + wm * WTM + (lane >> 2), cb = (long long)tn * BN + wn * WTN + 2 * (lane & 3);
#pragma unroll
    for (int i = 0; i < FM; i++)
#pragma unroll
      for (int h = 0; h < 2; h++) {
        long long row = rb + i * 16 + h * 8;
        if (M % BM == 0 || row < M) {
#pragma unroll
          for (int j = 0; j < FN; j++) {
            long long col = cb + j * 8;
            float v0 = acc[i][j][2 * h], v1 = acc[i][j][2 * h + 1];
            if (N % 2 == 0) {
              if (N % BN == 0 || col < N) e.st2(row * N + col, col, v0, v1);
            } else {
              if (col < N) e.st1(row * N + col, col, v0);
              if (col + 1 < N) e.st1(row * N + col + 1, col + 1, v1);
            }
          }
        }
      }
  }
  template <class E> static MLC_FN void run_e(const T *A, const T *B, const E &e, int tm, int tn, unsigned char *sm) {
    float acc[FM][FN][4];
    mainloop(A, B, tm, tn, (unsigned short *)sm, acc);
    store(e, tm, tn, acc);
  }
  static MLC_FN void run(const T *A, const T *B, T *C, int tm, int tn, unsigned char *sm) {
    run_e(A, B, mlc_gemm_out<T>{C}, tm, tn, sm);
  }
};
// Hopper (sm_90a): C[M,N] = A B for one 128 x BN tile through wgmma.mma_async.
// Two warpgroups, each a 64 x BN slice of C in registers (f32); BK = 64; an
// ST-stage cp.async pipeline into shared memory in the 128-byte-swizzled
// layouts the wgmma matrix descriptors read (tile bases 1024-aligned; a
// 16-byte chunk at byte offset o lands at o ^ ((o >> 7) & 7) << 4):
//  - K-major operand (A [M,K], B [N,K]): row r (M or N) of 64 k at r * 128;
//    descriptor SBO = 1024 (8-row groups), k-step of 16 = +32 bytes.
//  - MN-major operand (A stored [K,M], B [K,N]): 64-wide MN blocks of
//    BK x 128 bytes each (k-row at k * 128); LBO = the block size (next 64
//    MN), SBO = 1024 (next 8 k), k-step of 16 = +2048 bytes; transpose bit set.
// Used when every operand row starts 16-byte aligned (K % 8 == 0, N % 8 ==
// 0, and M % 8 == 0 where A is stored [K,M]); partial tiles at the M, N and
// K edges are zero-filled on load and predicated at the store (eight
// columns at a time).  Elsewhere than sm_90a (the compute_90 PTX, other
// targets) the same launch (256 threads, SMEM bytes) runs mlc_gemm_tc.
// mma's acc 0: d = a b, d's old values ignored (the first k-step of a sum
// needs no zeroed accumulator); 1: d += a b.
template <class T, int BN> struct mlc_wgmma;
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
template <> struct mlc_wgmma<mlc_bf16, 256> {
  template <int TA, int TB> static MLC_FN void mma(float *d, unsigned long long a, unsigned long long b, int acc = 1) {
    asm volatile("{ .reg .pred p; setp.ne.b32 p, %130, 0; wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127}, %128, %129, p, 1, 1, %131, %132; }"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(a), "l"(b), "r"(acc), "n"(TA), "n"(TB)); } };
template <> struct mlc_wgmma<mlc_f16, 256> {
  template <int TA, int TB> static MLC_FN void mma(float *d, unsigned long long a, unsigned long long b, int acc = 1) {
    asm volatile("{ .reg .pred p; setp.ne.b32 p, %130, 0; wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127}, %128, %129, p, 1, 1, %131, %132; }"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(a), "l"(b), "r"(acc), "n"(TA), "n"(TB)); } };
template <> struct mlc_wgmma<mlc_bf16, 128> {
  template <int TA, int TB> static MLC_FN void mma(float *d, unsigned long long a, unsigned long long b, int acc = 1) {
    asm volatile("{ .reg .pred p; setp.ne.b32 p, %66, 0; wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, %64, %65, p, 1, 1, %67, %68; }"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(a), "l"(b), "r"(acc), "n"(TA), "n"(TB)); } };
template <> struct mlc_wgmma<mlc_f16, 128> {
  template <int TA, int TB> static MLC_FN void mma(float *d, unsigned long long a, unsigned long long b, int acc = 1) {
    asm volatile("{ .reg .pred p; setp.ne.b32 p, %66, 0; wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, %64, %65, p, 1, 1, %67, %68; }"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(a), "l"(b), "r"(acc), "n"(TA), "n"(TB)); } };
template <> struct mlc_wgmma<mlc_bf16, 64> {
  template <int TA, int TB> static MLC_FN void mma(float *d, unsigned long long a, unsigned long long b, int acc = 1) {
    asm volatile("{ .reg .pred p; setp.ne.b32 p, %34, 0; wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1, %35, %36; }"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(a), "l"(b), "r"(acc), "n"(TA), "n"(TB)); } };
template <> struct mlc_wgmma<mlc_f16, 64> {
  template <int TA, int TB> static MLC_FN void mma(float *d, unsigned long long a, unsigned long long b, int acc = 1) {
    asm volatile("{ .reg .pred p; setp.ne.b32 p, %34, 0; wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1, %35, %36; }"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(a), "l"(b), "r"(acc), "n"(TA), "n"(TB)); } };
// FP8 (mlc_f8x2): m64n128k32, K-major A and B only (no transpose operands); acc 0 overwrites d
#define MLC_WGMMA_F8(EA, EB, A, B) \
  template <> struct mlc_wgmma<mlc_f8x2<EA, EB>, 128> { \
    template <int TA, int TB> static MLC_FN void mma(float *d, unsigned long long a, unsigned long long b, int acc = 1) { \
      static_assert(TA == 0 && TB == 0, "FP8 wgmma reads K-major operands only"); \
      asm volatile("{ .reg .pred p; setp.ne.b32 p, %66, 0; wgmma.mma_async.sync.aligned.m64n128k32.f32." A "." B " {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, %64, %65, p, 1, 1; }" \
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]) \
        : "l"(a), "l"(b), "r"(acc)); } };
MLC_WGMMA_F8(0, 0, "e4m3", "e4m3")
MLC_WGMMA_F8(0, 1, "e4m3", "e5m2")
MLC_WGMMA_F8(1, 0, "e5m2", "e4m3")
MLC_WGMMA_F8(1, 1, "e5m2", "e5m2")
#undef MLC_WGMMA_F8
MLC_FN void mlc_wg_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
MLC_FN void mlc_wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N> MLC_FN void mlc_wg_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory"); }
MLC_FN void mlc_fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
// Pins accumulator r in place: the wgmma asm writes its registers at once as
// far as the compiler knows, so without this it may move a read of them (the
// epilogue's conversion) above the wgmma.wait_group that makes them valid,
// and ptxas then serialises every wgmma (C7514).
MLC_FN void mlc_wg_fence_operand(float &r) { asm volatile("" : "+f"(r) :: "memory"); }
// A wgmma shared-memory matrix descriptor: 128-byte swizzle, SBO 1024 (the
// next 8 rows), LBO lbo, at shared address addr (1024-aligned tiles).
MLC_FN unsigned long long mlc_wg_desc(unsigned addr, unsigned lbo) {
  return (unsigned long long)((addr & 0x3FFFF) >> 4) | (unsigned long long)(lbo >> 4) << 16 |
         (unsigned long long)(1024 >> 4) << 32 | 1ull << 62;
}
// mbarriers in shared memory (addr: a shared address, 8-byte aligned)
MLC_FN void mlc_mbar_init(unsigned addr, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(addr), "r"(count) : "memory"); }
MLC_FN void mlc_mbar_fence_init() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
MLC_FN void mlc_mbar_arrive(unsigned addr) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(addr) : "memory"); }
// arrives once this thread's cp.async so far have landed (the barrier counts it among its expected arrivals)
MLC_FN void mlc_mbar_cp_arrive(unsigned addr) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" :: "r"(addr) : "memory"); }
// arrives once, and expects `bytes` more from the bulk copies that complete on it
MLC_FN void mlc_mbar_expect_tx(unsigned addr, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(addr), "r"(bytes) : "memory"); }
// TMA: the box at (c0, c1, c2) of tensor map m (a __grid_constant__
// parameter) into shared memory at dst (1024-aligned where m swizzles by
// 128 bytes), its bytes counted on mbarrier bar
MLC_FN void mlc_tma_load3(unsigned dst, const mlc_tmap &m, int c0, int c1, int c2, unsigned bar) {
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];"
               :: "r"(dst), "l"((unsigned long long)&m), "r"(c0), "r"(c1), "r"(c2), "r"(bar) : "memory"); }
MLC_FN void mlc_tma_load1(unsigned dst, const mlc_tmap &m, int c0, unsigned bar) {
  asm volatile("cp.async.bulk.tensor.1d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2}], [%3];"
               :: "r"(dst), "l"((unsigned long long)&m), "r"(c0), "r"(bar) : "memory"); }
MLC_FN void mlc_tma_load2(unsigned dst, const mlc_tmap &m, int c0, int c1, unsigned bar) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
               :: "r"(dst), "l"((unsigned long long)&m), "r"(c0), "r"(c1), "r"(bar) : "memory"); }
// TMA store: the box at (c0, c1) of tensor map m from shared memory at src, in this thread's bulk
// group; commit closes the group, wait_read<N> waits until at most N groups still read shared memory
// (the buffer may be written again), wait_all<N> until they are complete.
MLC_FN void mlc_tma_store2(unsigned src, const mlc_tmap &m, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];"
               :: "l"((unsigned long long)&m), "r"(c0), "r"(c1), "r"(src) : "memory"); }
MLC_FN void mlc_bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
template <int N> MLC_FN void mlc_bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read %0;" :: "n"(N) : "memory"); }
template <int N> MLC_FN void mlc_bulk_wait_all() { asm volatile("cp.async.bulk.wait_group %0;" :: "n"(N) : "memory"); }
MLC_FN void mlc_tma_prefetch(const mlc_tmap &m) {
  asm volatile("prefetch.tensormap [%0];" :: "l"((unsigned long long)&m) : "memory"); }
MLC_FN void mlc_mbar_wait(unsigned addr, int parity) {
  asm volatile("{ .reg .pred p; W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1; @!p bra W; }"
               :: "r"(addr), "r"(parity) : "memory"); }
#endif
// LAG: the k-tiles whose wgmma may still run when the next is issued (1:
// wait<1>, ST - 2 tiles loaded ahead; 0: wait<0>, ST - 1 tiles ahead, for two
// blocks a multiprocessor, where the other block keeps the tensor cores busy).
// TMA: A and B come by TMA (tensor maps ma, mb over A and B as stored, 2-D,
// 128-byte swizzle: K-major boxes of 64 x R, MN-major ones of 64 x 64), one
// thread issuing each stage's loads, which complete on the stage's
// mbarrier (after the stages); else by cp.async from every thread.
#ifdef MLC_GEMM_PROBE_NOTMA /* bench probes: cp.async in place of TMA, to compare in one run */
#define MLC_GEMM_TMA_OK false
#else
#define MLC_GEMM_TMA_OK true
#endif
template <class T, int BN, int ST, int LAG, bool AKM, bool BNK, long long M, long long N, long long K, bool TMA_ = false>
struct mlc_gemm_wg {
  static constexpr bool TMA = TMA_ && MLC_GEMM_TMA_OK;
  static constexpr int BM = 128, BK = 64, NT = 256;
  static constexpr int A_BYTES = BM * BK * 2, B_BYTES = BN * BK * 2, STAGE = A_BYTES + B_BYTES;
  typedef mlc_gemm_tc<T, BM, BN, 32, 2, 4, 4, AKM, BNK, M, N, K> F; // the fallback
  static constexpr int SMEM_WG = ST * STAGE + 1024 + 8 * ST;
  static_assert(BM * (BN + 8) * 2 <= ST * STAGE, "the staged epilogue tile fits in the stages");
  static constexpr int SMEM = SMEM_WG > F::SMEM ? SMEM_WG : F::SMEM;
  static constexpr long long LDA = AKM ? M : K, LDB = BNK ? K : N;
  static constexpr int KT = (int)((K + BK - 1) / BK);
  // The staged epilogue (the wgmma kernels' stores): a warpgroup's 64 x BN
  // accumulators d, rounded to T, into shared memory at sc (64 rows of CP
  // elements, padded by 16 bytes so that the pair stores of a warp hit 32
  // different banks); then ROWS x BN of them back in 16-byte chunks, a warp
  // along a row, to the epilogue's st8 and coalesced global stores, rows
  // from m0 (NTH threads, t this thread's index among them).
  // d[4i + e]: row 16 * warp + lane / 4 (+8 for e >= 2), column 8i + 2 (lane % 4) (+1 for odd e)
  static constexpr int CP = BN + 8;
  static MLC_FN void stage(const float *d, unsigned short *sc, int lt) {
    const int lane = lt & 31, w = lt >> 5;
    const int r0 = w * 16 + (lane >> 2), c0 = 2 * (lane & 3);
#pragma unroll
    for (int i = 0; i < BN / 8; i++) {
      T a = from_f32<T>(d[4 * i]), b = from_f32<T>(d[4 * i + 1]);
      T a8 = from_f32<T>(d[4 * i + 2]), b8 = from_f32<T>(d[4 * i + 3]);
      *(unsigned *)(sc + r0 * CP + c0 + 8 * i) = (unsigned)a.x | (unsigned)b.x << 16;
      *(unsigned *)(sc + (r0 + 8) * CP + c0 + 8 * i) = (unsigned)a8.x | (unsigned)b8.x << 16;
    }
  }
  template <int ROWS, int NTH, class E>
  static MLC_FN void drain(const E &e, const unsigned short *sc, long long m0, long long n0, int t) {
    constexpr int CPR = BN / 8; // 16-byte chunks per row
#pragma unroll 4
    for (int ch = t; ch < ROWS * CPR; ch += NTH) {
      int r = ch / CPR, cc = ch % CPR * 8;
      uint4 raw = *(const uint4 *)(sc + r * CP + cc);
      long long row = m0 + r, col = n0 + cc;
      if ((M % BM == 0 || row < M) && (N % BN == 0 || col < N)) {
        if (N % 8 == 0) {
          e.st8(row * N + col, col, raw);
        } else { // rows not 16-byte aligned: the chunk's elements one by one, up to column N
          const unsigned w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
          for (int j = 0; j < 8; j++)
            if (col + j < N) {
              T v;
              v.x = (unsigned short)(w[j >> 1] >> (16 * (j & 1)));
              e.st1(row * N + col + j, col + j, to_f32(v));
            }
        }
      }
    }
  }
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  // One operand: R (MN extent, MN valid) x BK; KM: K-major.  This thread's
  // chunks: a global element offset (at k-tile 0), a shared byte offset and
  // its coordinates (mn, k) in the operand at k-tile 0, then constant
  // strides per chunk i.  Chunks past MN or K are zero-filled (cp.async
  // src-size 0, reading nothing), checked only where MN % R or K % BK leave
  // a partial tile.  Rows 16-byte aligned (LD % 8 == 0) copy a chunk at
  // once; rows only 4-byte aligned (LD even) copy it in four pairs, each
  // checked against the contiguous extent (K if KM, else MN).
  template <int R, bool KM, long long LD, long long MN> struct op {
    static constexpr int CPR = KM ? 8 : R / 8;            // 16-byte chunks per global row
    static constexpr int RPI = NT / CPR;                   // global rows per pass
    static constexpr int NI = R * BK / 8 / NT;             // passes
    static constexpr long long GI = RPI * LD;              // global elements per pass
    static constexpr int SI = KM ? RPI * 128 : RPI * 128;  // shared bytes per pass
    static constexpr long long GK = KM ? BK : BK * LD;     // global elements per k-tile
    static constexpr bool FULL_MN = MN % R == 0, FULL_K = K % BK == 0;
    static MLC_FN void at(int tid, long long mn0, long long &g, unsigned &s, long long &mn, int &k) {
      int r = tid / CPR, cc = tid % CPR, c = cc & 7;
      if (KM) { g = (mn0 + r) * LD + cc * 8; s = (unsigned)(r * 128 + ((c ^ (r & 7)) << 4)); mn = mn0 + r; k = cc * 8; }
      else {
        g = (long long)r * LD + mn0 + cc * 8; s = (unsigned)((cc >> 3) * (BK * 128) + r * 128 + ((c ^ (r & 7)) << 4));
        mn = mn0 + cc * 8; k = r;
      }
    }
    static constexpr bool V16 = LD % 8 == 0;
    static MLC_FN void load(unsigned s, const unsigned short *g, const unsigned short *base, long long mn, int k, int kt) {
      long long k0 = (long long)kt * BK + k;
#pragma unroll
      for (int i = 0; i < NI; i++) {
        bool ok = KM ? (FULL_MN || mn + i * RPI < MN) && (FULL_K || k0 < K)
                     : (FULL_K || k0 + i * RPI < K) && (FULL_MN || mn < MN);
        if (V16) {
          mlc_gemm_cp16(s + i * SI, ok ? g + i * GI : base, ok);
        } else {
#pragma unroll
          for (int j = 0; j < 4; j++) {
            bool in = ok && (KM ? k0 + 2 * j < K : mn + 2 * j < MN);
            mlc_gemm_cp4(s + i * SI + 4 * j, in ? g + i * GI + 2 * j : base, in);
          }
        }
      }
    }
  };
  typedef op<BM, !AKM, LDA, M> OA;
  typedef op<BN, BNK, LDB, N> OB;
  // TMA: k-tile kt of A and B into stage st, counted on its mbarrier (one thread)
  static MLC_FN void tma_stage(unsigned s, unsigned bar, const mlc_tmap &ma, const mlc_tmap &mb, int m0, int n0, int kt) {
    const int k0 = kt * BK;
    mlc_mbar_expect_tx(bar, STAGE);
    if (!AKM) mlc_tma_load2(s, ma, k0, m0, bar);
    else
#pragma unroll
      for (int c = 0; c < BM / 64; c++) mlc_tma_load2(s + c * (BK * 128), ma, m0 + 64 * c, k0, bar);
    if (BNK) mlc_tma_load2(s + A_BYTES, mb, k0, n0, bar);
    else
#pragma unroll
      for (int c = 0; c < BN / 64; c++) mlc_tma_load2(s + A_BYTES + c * (BK * 128), mb, n0 + 64 * c, k0, bar);
  }
  template <class E> static MLC_FN void run_e(const T *A_, const T *B_, const E &e, int tm, int tn, unsigned char *smraw,
                                              const mlc_tmap *ma = nullptr, const mlc_tmap *mb = nullptr) {
    const unsigned short *A = (const unsigned short *)A_, *B = (const unsigned short *)B_;
    int tid = threadIdx.x, wg = tid >> 7;
    long long m0 = (long long)tm * BM, n0 = (long long)tn * BN;
    unsigned s0 = (mlc_gemm_smem_u32(smraw) + 1023) & ~1023u;
    const unsigned bar = s0 + ST * STAGE; /* TMA: the stages' mbarriers */
    long long ga, gb;
    unsigned sa, sb;
    long long ma_, nb;
    int ka, kb;
    OA::at(tid, m0, ga, sa, ma_, ka);
    OB::at(tid, n0, gb, sb, nb, kb);
    const unsigned short *pa = A + ga, *pb = B + gb;
    constexpr int BN2 = BN / 2;
    float d[BN2];
#pragma unroll
    for (int i = 0; i < BN2; i++) d[i] = 0.f;
    if (TMA) {
      if (tid == 0) {
        for (int s = 0; s < ST; s++) mlc_mbar_init(bar + 8 * s, 1);
        mlc_mbar_fence_init();
        mlc_tma_prefetch(*ma), mlc_tma_prefetch(*mb);
        for (int s = 0; s < ST - 1 - LAG && s < KT; s++) tma_stage(s0 + s * STAGE, bar + 8 * s, *ma, *mb, (int)m0, (int)n0, s);
      }
      __syncthreads();
    } else {
#pragma unroll
      for (int s = 0; s < ST - 1 - LAG; s++) {
        if (s < KT) {
          OA::load(s0 + s * STAGE + sa, pa + s * OA::GK, A, ma_, ka, s);
          OB::load(s0 + s * STAGE + A_BYTES + sb, pb + s * OB::GK, B, nb, kb, s);
        }
        mlc_gemm_cp_commit();
      }
    }
    // this warpgroup's A rows: 64 * wg (K-major: 64 rows of 128 bytes; MN-major: MN block wg)
    const unsigned long long da0 = mlc_wg_desc(s0 + wg * 8192, AKM ? BK * 128 : 16), db0 = mlc_wg_desc(s0 + A_BYTES, BNK ? 16 : BK * 128);
    constexpr unsigned KSA = AKM ? 2048 : 32, KSB = BNK ? 32 : 2048;
#pragma unroll 1
    for (int kt = 0; kt < KT; kt++) {
      if (TMA) {
        // tile kt has landed; every warpgroup has finished the wgmma of tile kt - 1 - LAG: refill its stage
        mlc_mbar_wait(bar + 8 * (kt % ST), (kt / ST) & 1);
        __syncthreads();
        int nk = kt + ST - 1 - LAG;
        if (tid == 0 && nk < KT) tma_stage(s0 + (nk % ST) * STAGE, bar + 8 * (nk % ST), *ma, *mb, (int)m0, (int)n0, nk);
      } else {
        // tile kt has landed (this thread's copies); make it visible to the async proxy and the block
        mlc_gemm_cp_wait<ST - 2 - LAG>();
        mlc_fence_async_smem();
        __syncthreads();
        // every warpgroup has finished the wgmma of tile kt - 1 - LAG: refill its stage
        int nk = kt + ST - 1 - LAG, st = nk % ST;
        if (nk < KT) {
          OA::load(s0 + st * STAGE + sa, pa + nk * OA::GK, A, ma_, ka, nk);
          OB::load(s0 + st * STAGE + A_BYTES + sb, pb + nk * OB::GK, B, nb, kb, nk);
        }
        mlc_gemm_cp_commit();
      }
      unsigned so = (unsigned)(kt % ST) * STAGE >> 4;
      mlc_wg_fence();
#pragma unroll
      for (int kk = 0; kk < BK / 16; kk++)
        mlc_wgmma<T, BN>::template mma<AKM ? 1 : 0, BNK ? 0 : 1>(d, da0 + so + (kk * KSA >> 4), db0 + so + (kk * KSB >> 4));
      mlc_wg_commit();
      mlc_wg_wait<LAG>();
    }
    mlc_wg_wait<0>();
#pragma unroll
    for (int i = 0; i < BN2; i++) mlc_wg_fence_operand(d[i]);
    mlc_gemm_cp_wait<0>();
    // The epilogue goes through shared memory (the stages are free once
    // every warpgroup is past its last wgmma): stage, then drain.
    __syncthreads();
    unsigned short *sc = (unsigned short *)(smraw + (s0 - mlc_gemm_smem_u32(smraw)));
    stage(d, sc + wg * 64 * CP, tid & 127);
    __syncthreads();
    drain<BM, NT>(e, sc, m0, n0, tid);
  }
#else
  template <class E> static MLC_FN void run_e(const T *A, const T *B, const E &e, int tm, int tn, unsigned char *sm,
                                              const mlc_tmap * = nullptr, const mlc_tmap * = nullptr) {
    F::run_e(A, B, e, tm, tn, sm);
  }
#endif
  static MLC_FN void run(const T *A, const T *B, T *C, int tm, int tn, unsigned char *sm, const mlc_tmap *ma = nullptr,
                         const mlc_tmap *mb = nullptr) {
    run_e(A, B, mlc_gemm_out<T>{C}, tm, tn, sm, ma, mb);
  }
};
// A persistent, warp-specialised GEMM (sm_90a; 16-bit T; C = A B as
// mlc_gemm_wg's, which it shares its TMA stage loads with): 384 threads a
// block, a block a multiprocessor, walking tiles blockIdx.x, + gridDim.x,
// ... (grouped rasterisation, G tile-rows a group).  Warpgroup 0 is the
// producer: one thread loads every tile's k-tiles of A and B by TMA into
// an ST-stage ring, in order (a tile's k-tiles, then the next tile's).
// BN 128, ping-pong: warpgroups 1 and 2 take the block's tiles in turn (1
// the even ones of its sequence, 2 the odd ones), each a 128 x 128 tile of
// its own (two m64n128 accumulators: 128 registers), so that one stores its
// tile (the epilogue: from the accumulators, st2 per pair of columns) while
// the other's wgmmas run.  A consumer starts its main loop only once the
// other has issued its last k-tile (named barriers 1 and 2, as the
// attention forward's ping-pong): then every earlier use of each ring slot
// has been waited for, so that its parity waits are never two phases ahead.
// BN 256, cooperative: both consumers work on every 128 x 256 tile, each on
// 64 rows of it (one m64n256 accumulator: 128 registers), and store their
// halves together, each through its own staging rows after the ring (as
// mlc_gemm_wg's epilogue: 16-byte stores), or with 4 stages through one set
// of rows that they take in turn (the first may go on with its next tile's
// products meanwhile); the producer meanwhile loads the next tile's first
// k-tiles, so that only the stores leave the tensor cores idle.
// Barriers after the ring: full[ST] (a stage's bytes) and empty[ST] (its
// consumers' wgmmas done: one arrival a consumer that reads the stage).
// Elsewhere than sm_90a threads 0..255 run mlc_gemm_tc on each tile in turn.
template <class T, int BN_, int ST, bool AKM, bool BNK, long long M, long long N, long long K, int G, bool TS = false>
struct mlc_gemm_pp {
  static constexpr int BM = 128, BN = BN_, BK = 64, NT = 384;
  static constexpr bool CO = BN == 256; /* cooperative; else ping-pong */
  // F8 (mlc_f8x2 operands, scaled_mm): cooperative 128 x 128 tiles, consumer c the tile's rows 64 c ..
  // 64 c + 63, whose each k-tile (128 codes of k, four m64n128k32 wgmmas) sums into registers of its own
  // and is then added into the f32 accumulators: Hopper's FP8 products keep about 14 bits as they sum
  // (DeepSeek-V3's report, section 3.5.2), so a long K summed inside the tensor core loses precision
  // (4e-3 to 9e-3 of the largest |C| at the MiniLLM's shapes, bench/results/h100-2026-12-06)
  static constexpr bool F8 = mlc_is_f8x2<T>::v;
  static_assert(!F8 || (BN == 128 && AKM == false && BNK == true), "mlc_gemm_pp: FP8 takes 128-column tiles of K-major A and B");
  static_assert(BN == 128 || BN == 256, "mlc_gemm_pp: 128 (ping-pong) or 256 (cooperative) columns a tile");
  typedef mlc_gemm_wg<T, BN, ST, 1, AKM, BNK, M, N, K, true> W; // its stage layout and TMA loads
  static constexpr int STAGE = W::STAGE, A_BYTES = W::A_BYTES;
  static constexpr int TM = (int)((M + BM - 1) / BM), TN = (int)((N + BN - 1) / BN), TILES = TM * TN;
  static constexpr int KT = (int)((K + BK - 1) / BK);
  typedef mlc_gemm_tc<T, BM, BN, 32, 2, 4, 4, AKM, BNK, M, N, K> F; // the fallback
  // cooperative: each consumer stages its 64 x BN half for the epilogue (W::stage, W::drain) after the
  // ring, in rows of its own, or (SHARE: 4 stages, where two sets of rows do not fit) in the same rows in turn
  // TS (cooperative only, --cuda-gemm-tile=cs,ST): the stores by TMA from two 8 KiB buffers a consumer
  // (64 x 64 subtiles, 128-byte swizzled: row r's 16-byte chunk q at q ^ (r % 8)), through tensor map mc
  // over C, so that a consumer goes on to its next tile while the last subtiles are written out
  static_assert(!TS || BN == 256, "mlc_gemm_pp: TMA stores only in the cooperative kernel");
  static constexpr bool SHARE = CO && !TS && ST >= 4;
  static constexpr int EPI = TS ? 2 * 2 * 8192 : CO ? (SHARE ? 1 : 2) * 64 * W::CP * 2 : 0;
  static constexpr int SMEM_PP = ST * STAGE + EPI + 16 * ST + 1024;
  static constexpr int SMEM = SMEM_PP > F::SMEM ? SMEM_PP : F::SMEM;
  // store the consumer's tile (tm, tn): d[h][4i + e] is row 64 h + 16 w + lane / 4 (+8 for e >= 2),
  // column 8 i + 2 (lane % 4) (+1 for odd e)
  template <class E> static MLC_FN void store(const E &e, const float (&d0)[64], const float (&d1)[64], int tm, int tn, int lt) {
    const int w = lt >> 5, lane = lt & 31;
#pragma unroll
    for (int h = 0; h < 2; h++)
#pragma unroll
      for (int i = 0; i < 16; i++)
#pragma unroll
        for (int r = 0; r < 2; r++) {
          const long long row = (long long)tm * BM + 64 * h + 16 * w + (lane >> 2) + 8 * r;
          const long long col = (long long)tn * BN + 8 * i + 2 * (lane & 3);
          const float v0 = h ? d1[4 * i + 2 * r] : d0[4 * i + 2 * r], v1 = h ? d1[4 * i + 2 * r + 1] : d0[4 * i + 2 * r + 1];
          if ((M % BM && row >= M) || (N % BN && col >= N)) continue;
          if (N % 2 == 0) e.st2(row * N + col, col, v0, v1);
          else {
            e.st1(row * N + col, col, v0);
            if (col + 1 < N) e.st1(row * N + col + 1, col + 1, v1);
          }
        }
  }
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  // A consumer's k-tile pos of the ring: wait for its bytes; its stage's offset (16-byte units) for the descriptors
  static MLC_FN unsigned ktile(unsigned full, int pos) {
    const int s = pos % ST;
    mlc_mbar_wait(full + 8 * s, (pos / ST) & 1);
    mlc_wg_fence();
    return (unsigned)(s * STAGE) >> 4;
  }
  // after issuing k-tile pos's wgmmas: commit them, wait for the k-tile before (unless this is the tile's
  // first), and give its slot back to the producer (one arrival a consumer)
  static MLC_FN void release(unsigned empty, int pos, bool first, int lt) {
    mlc_wg_commit();
    mlc_wg_wait<1>();
    if (!first && lt == 0) mlc_mbar_arrive(empty + 8 * ((pos - 1) % ST));
  }
  // TS: consumer c's half of tile (tm, tn), its accumulators d (as W::stage reads them), through
  // f (the epilogue's program; rows past M and columns past N are zeros that the TMA store clips)
  // into subtile buffers at buf, stored by its thread 0 (lt)
  template <class E> static MLC_FN void store_tma(const E &e, const float *d, unsigned char *smraw, unsigned buf,
                                                  const mlc_tmap &mc, int tm, int tn, int c, int lt) {
    const int w = lt >> 5, lane = lt & 31, r0 = w * 16 + (lane >> 2);
    const long long row0 = (long long)tm * BM + 64 * c;
    unsigned char *gbuf = smraw + (buf - mlc_gemm_smem_u32(smraw));
#pragma unroll
    for (int q = 0; q < BN / 64; q++) {
      // the store that last read this buffer (two subtiles ago, perhaps of the tile before) is done reading
      if (lt == 0) mlc_bulk_wait_read<1>();
      asm volatile("bar.sync %0, 128;" :: "r"(1 + c) : "memory");
      const unsigned bo = (unsigned)(q & 1) * 8192;
#pragma unroll
      for (int ii = 0; ii < 8; ii++) {
        const int i = 8 * q + ii;
#pragma unroll
        for (int h = 0; h < 2; h++) {
          const int r = r0 + 8 * h;
          const long long grow = row0 + r, gcol = (long long)tn * BN + 8 * i + 2 * (lane & 3);
          const bool in = (M % BM == 0 || grow < M) && (N % BN == 0 || gcol < N);
          const T a = from_f32<T>(in ? e.f(grow * N + gcol, gcol, d[4 * i + 2 * h]) : 0.f);
          const T b = from_f32<T>(in ? e.f(grow * N + gcol + 1, gcol + 1, d[4 * i + 2 * h + 1]) : 0.f);
          *(unsigned *)(gbuf + bo + r * 128 + ((ii ^ (r & 7)) << 4) + 4 * (lane & 3)) = (unsigned)a.x | (unsigned)b.x << 16;
        }
      }
      mlc_fence_async_smem(); // this thread's writes, before the async proxy reads them
      asm volatile("bar.sync %0, 128;" :: "r"(1 + c) : "memory");
      if (lt == 0) {
        mlc_tma_store2(buf + bo, mc, (int)(tn * BN + 64 * q), (int)row0);
        mlc_bulk_commit();
      }
    }
  }
  template <class E> static MLC_FN void run_e(const T *, const T *, const E &e, unsigned char *smraw, const mlc_tmap *ma,
                                              const mlc_tmap *mb, const mlc_tmap *mc = nullptr) {
    const int tid = threadIdx.x, wg = tid >> 7;
    const unsigned s0 = (mlc_gemm_smem_u32(smraw) + 1023) & ~1023u, full = s0 + ST * STAGE + EPI, empty = full + 8 * ST;
    if (tid == 0) {
      for (int s = 0; s < ST; s++) { mlc_mbar_init(full + 8 * s, 1); mlc_mbar_init(empty + 8 * s, CO || F8 ? 2 : 1); }
      mlc_mbar_fence_init();
    }
    __syncthreads();
    if (wg == 0) { /* the producer */
      asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
      if (tid == 0) {
        mlc_tma_prefetch(*ma), mlc_tma_prefetch(*mb);
        int pos = 0;
        for (int t = blockIdx.x; t < TILES; t += gridDim.x) {
          int tm, tn;
          mlc_gemm_raster<TM, TN, G>((unsigned)t, tm, tn);
#pragma unroll 1
          for (int kt = 0; kt < KT; kt++, pos++) {
            const int s = pos % ST;
            if (pos >= ST) mlc_mbar_wait(empty + 8 * s, ((pos / ST) - 1) & 1);
            W::tma_stage(s0 + s * STAGE, full + 8 * s, *ma, *mb, tm * BM, tn * BN, kt);
          }
        }
      }
      return;
    }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    const int c = wg - 1, lt = tid & 127;
    const int nseq = blockIdx.x < TILES ? (TILES - 1 - (int)blockIdx.x) / (int)gridDim.x + 1 : 0; /* this block's tiles */
    constexpr unsigned KSA = AKM ? 2048 : 32, KSB = BNK ? 32 : 2048;
    if constexpr (F8) {
      const unsigned long long da = mlc_wg_desc(s0 + c * 8192, BK * 128), db = mlc_wg_desc(s0 + A_BYTES, 16);
      // k-tile pos's four wgmmas into p (the first overwrites it), committed as a group
      auto issue = [&](float (&p)[64], int pos) {
        const unsigned so = ktile(full, pos);
#pragma unroll
        for (int kk = 0; kk < BK / 16; kk++)
          mlc_wgmma<T, 128>::template mma<0, 0>(p, da + so + (kk * KSA >> 4), db + so + (kk * KSB >> 4), kk > 0);
        mlc_wg_commit();
      };
      // the k-tile in p (pos) is done: into acc, and its slot back
      auto promote = [&](float (&acc)[64], float (&p)[64], int pos) {
#pragma unroll
        for (int j = 0; j < 64; j++) { mlc_wg_fence_operand(p[j]); acc[j] += p[j]; }
        if (lt == 0) mlc_mbar_arrive(empty + 8 * (pos % ST));
      };
#pragma unroll 1
      for (int i = 0; i < nseq; i++) {
        int tm, tn;
        mlc_gemm_raster<TM, TN, G>((unsigned)(blockIdx.x + i * gridDim.x), tm, tn);
        float acc[64], p[64];
#pragma unroll
        for (int j = 0; j < 64; j++) { acc[j] = 0.f; p[j] = 0.f; mlc_wg_fence_operand(p[j]); }
        // each k-tile summed apart in p, then added into acc, the other consumer's wgmmas keeping the tensor
        // cores busy meanwhile.  A second p, so that this consumer's next k-tile runs while it adds (9c40de4,
        // the k-loop unrolled whole), was within 1 % of this on an H100 and took nvcc 129 s instead of 16 for
        // the MiniLLM's step (bench/results/h100-2026-12-06.md, session 26)
        const int base = i * KT;
#pragma unroll 1
        for (int kt = 0; kt < KT; kt++) {
          issue(p, base + kt);
          mlc_wg_wait<0>();
          promote(acc, p, base + kt);
        }
        // consumer c's 64 x 128: acc[4i + e] is row 16 w + lane / 4 (+8 for e >= 2), column 8 i + 2 (lane % 4) (+1 for odd e)
        const int w = lt >> 5, lane = lt & 31;
#pragma unroll
        for (int ii = 0; ii < 16; ii++)
#pragma unroll
          for (int r = 0; r < 2; r++) {
            const long long row = (long long)tm * BM + 64 * c + 16 * w + (lane >> 2) + 8 * r;
            const long long col = (long long)tn * BN + 8 * ii + 2 * (lane & 3);
            if ((M % BM && row >= M) || (N % BN && col >= N)) continue;
            if (N % 2 == 0) e.st2(row * N + col, col, acc[4 * ii + 2 * r], acc[4 * ii + 2 * r + 1]);
            else {
              e.st1(row * N + col, col, acc[4 * ii + 2 * r]);
              if (col + 1 < N) e.st1(row * N + col + 1, col + 1, acc[4 * ii + 2 * r + 1]);
            }
          }
      }
    } else if constexpr (CO) {
      // this consumer's 64 rows of A: K-major, 64 rows of 128 bytes; MN-major, MN block c (BK x 128 bytes)
      const unsigned long long da = mlc_wg_desc(s0 + c * 8192, AKM ? BK * 128 : 16);
      const unsigned long long db = mlc_wg_desc(s0 + A_BYTES, BNK ? 16 : BK * 128);
      unsigned short *sc = (unsigned short *)(smraw + (s0 + ST * STAGE - mlc_gemm_smem_u32(smraw))) + (SHARE ? 0 : c * 64 * W::CP);
#pragma unroll 1
      for (int i = 0; i < nseq; i++) {
        int tm, tn;
        mlc_gemm_raster<TM, TN, G>((unsigned)(blockIdx.x + i * gridDim.x), tm, tn);
        float d[128];
#pragma unroll
        for (int j = 0; j < 128; j++) { d[j] = 0.f; mlc_wg_fence_operand(d[j]); }
        int pos = i * KT;
#pragma unroll 1
        for (int kt = 0; kt < KT; kt++, pos++) {
          const unsigned so = ktile(full, pos);
#pragma unroll
          for (int kk = 0; kk < BK / 16; kk++)
            mlc_wgmma<T, 256>::template mma<AKM ? 1 : 0, BNK ? 0 : 1>(d, da + so + (kk * KSA >> 4), db + so + (kk * KSB >> 4));
          release(empty, pos, kt == 0, lt);
        }
        mlc_wg_wait<0>();
#pragma unroll
        for (int j = 0; j < 128; j++) mlc_wg_fence_operand(d[j]);
        if (lt == 0) mlc_mbar_arrive(empty + 8 * ((pos - 1) % ST));
        if constexpr (TS) {
          store_tma(e, d, smraw, s0 + ST * STAGE + c * 16384, *mc, tm, tn, c, lt);
          continue;
        }
        // the epilogue through the staging rows (named barrier 1 + c: this consumer's 128 threads); shared
        // rows are taken in turn: consumer 0 once 1 has drained the tile before (barrier 3), 1 after 0 (4)
        if (SHARE && c == 0 && i > 0) asm volatile("bar.sync 3, 256;" ::: "memory");
        if (SHARE && c == 1) asm volatile("bar.sync 4, 256;" ::: "memory");
        W::stage(d, sc, lt);
        asm volatile("bar.sync %0, 128;" :: "r"(1 + c) : "memory");
        W::template drain<64, 128>(e, sc, (long long)tm * BM + 64 * c, (long long)tn * BN, lt);
        asm volatile("bar.sync %0, 128;" :: "r"(1 + c) : "memory");
        if (SHARE && c == 0) asm volatile("bar.arrive 4, 256;" ::: "memory");
        if (SHARE && c == 1 && i + 1 < nseq) asm volatile("bar.arrive 3, 256;" ::: "memory");
      }
      if (TS && lt == 0) mlc_bulk_wait_all<0>(); /* the last stores complete before the block ends */
    } else {
      // this consumer's turn to issue a main loop (named barrier 1 + c), and the other's after it (2 - c)
      auto turn = [&]() { asm volatile("bar.sync %0, 256;" :: "r"(1 + c) : "memory"); };
      auto pass = [&]() { asm volatile("bar.arrive %0, 256;" :: "r"(2 - c) : "memory"); };
      if (c == 1) asm volatile("bar.arrive 1, 256;" ::: "memory"); /* consumer 0 goes first */
      const unsigned long long da0 = mlc_wg_desc(s0, AKM ? BK * 128 : 16), da1 = mlc_wg_desc(s0 + 8192, AKM ? BK * 128 : 16);
      const unsigned long long db = mlc_wg_desc(s0 + A_BYTES, BNK ? 16 : BK * 128);
#pragma unroll 1
      for (int i = c; i < nseq; i += 2) {
        int tm, tn;
        mlc_gemm_raster<TM, TN, G>((unsigned)(blockIdx.x + i * gridDim.x), tm, tn);
        float d0[64], d1[64];
#pragma unroll
        for (int j = 0; j < 64; j++) { d0[j] = d1[j] = 0.f; mlc_wg_fence_operand(d0[j]); mlc_wg_fence_operand(d1[j]); }
        turn();
        int pos = i * KT;
#pragma unroll 1
        for (int kt = 0; kt < KT; kt++, pos++) {
          const unsigned so = ktile(full, pos);
#pragma unroll
          for (int kk = 0; kk < BK / 16; kk++) {
            mlc_wgmma<T, BN>::template mma<AKM ? 1 : 0, BNK ? 0 : 1>(d0, da0 + so + (kk * KSA >> 4), db + so + (kk * KSB >> 4));
            mlc_wgmma<T, BN>::template mma<AKM ? 1 : 0, BNK ? 0 : 1>(d1, da1 + so + (kk * KSA >> 4), db + so + (kk * KSB >> 4));
          }
          release(empty, pos, kt == 0, lt);
        }
        if (i + 1 < nseq) pass(); /* the other consumer's main loop may start */
        mlc_wg_wait<0>();
#pragma unroll
        for (int j = 0; j < 64; j++) { mlc_wg_fence_operand(d0[j]); mlc_wg_fence_operand(d1[j]); }
        if (lt == 0) mlc_mbar_arrive(empty + 8 * ((pos - 1) % ST));
        store(e, d0, d1, tm, tn, lt);
      }
    }
  }
#else
  template <class E> static MLC_FN void run_e(const T *A, const T *B, const E &e, unsigned char *sm, const mlc_tmap *,
                                              const mlc_tmap *, const mlc_tmap * = nullptr) {
    if (threadIdx.x >= F::NT) return;
    for (int t = blockIdx.x; t < TILES; t += gridDim.x) {
      int tm, tn;
      mlc_gemm_raster<TM, TN, G>((unsigned)t, tm, tn);
      F::run_e(A, B, e, tm, tn, sm);
      __syncthreads();
    }
  }
#endif
  static MLC_FN void run(const T *A, const T *B, T *C, unsigned char *sm, const mlc_tmap *ma, const mlc_tmap *mb,
                         const mlc_tmap *mc = nullptr) {
    run_e(A, B, mlc_gemm_out<T>{C}, sm, ma, mb, mc);
  }
};
// f32: exact FMAs on the SIMT cores.  A 16 x 16 thread grid, each thread
// TM x TN outputs strided by 16 (rows ty + 16i, columns tx + 16j); BK-deep
// k-steps through shared memory held k-major (As[k][m], Bs[k][n]), loaded
// through registers one step ahead.
template <int TM, int TN, int BK, bool AKM, bool BNK, long long M, long long N, long long K>
struct mlc_gemm_f32 {
  static constexpr int BM = 16 * TM, BN = 16 * TN, NT = 256;
  static constexpr int LA = BM * BK / NT, LB = BN * BK / NT;
  static constexpr int SMEM = 2 * BK * (BM + BN) * 4;
  static constexpr long long LDA = AKM ? M : K, LDB = BNK ? K : N;
  // element e of this thread's share of the A tile: (m, k) in the tile
  static MLC_FN void a_at(int e, int tid, int &m, int &k) {
    int idx = tid + e * NT;
    if (AKM) { k = idx / BM; m = idx % BM; } else { m = idx / BK; k = idx % BK; }
  }
  static MLC_FN void b_at(int e, int tid, int &n, int &k) {
    int idx = tid + e * NT;
    if (BNK) { n = idx / BK; k = idx % BK; } else { k = idx / BN; n = idx % BN; }
  }
  static MLC_FN void run(const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ C, int tm, int tn,
                         unsigned char *smraw) {
    run_e(A, B, mlc_gemm_out<float>{C}, tm, tn, smraw);
  }
  template <class E>
  static MLC_FN void run_e(const float *__restrict__ A, const float *__restrict__ B, const E &e, int tm, int tn,
                           unsigned char *smraw) {
    float *sm = (float *)smraw;
    int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
    long long m0 = (long long)tm * BM, n0 = (long long)tn * BN;
    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; i++)
#pragma unroll
      for (int j = 0; j < TN; j++) acc[i][j] = 0.f;
    float ra[LA], rb[LB];
    constexpr int KT = (int)((K + BK - 1) / BK);
    auto fetch = [&](int kt) {
#pragma unroll
      for (int e = 0; e < LA; e++) {
        int m, k;
        a_at(e, tid, m, k);
        long long gm = m0 + m, gk = (long long)kt * BK + k;
        ra[e] = gm < M && gk < K ? A[AKM ? gk * LDA + gm : gm * LDA + gk] : 0.f;
      }
#pragma unroll
      for (int e = 0; e < LB; e++) {
        int n, k;
        b_at(e, tid, n, k);
        long long gn = n0 + n, gk = (long long)kt * BK + k;
        rb[e] = gn < N && gk < K ? B[BNK ? gn * LDB + gk : gk * LDB + gn] : 0.f;
      }
    };
    auto put = [&](int buf) {
      float *As = sm + buf * BK * (BM + BN), *Bs = As + BK * BM;
#pragma unroll
      for (int e = 0; e < LA; e++) {
        int m, k;
        a_at(e, tid, m, k);
        As[k * BM + m] = ra[e];
      }
#pragma unroll
      for (int e = 0; e < LB; e++) {
        int n, k;
        b_at(e, tid, n, k);
        Bs[k * BN + n] = rb[e];
      }
    };
    fetch(0);
    put(0);
    __syncthreads();
#pragma unroll 1
    for (int kt = 0; kt < KT; kt++) {
      if (kt + 1 < KT) fetch(kt + 1);
      const float *As = sm + (kt & 1) * BK * (BM + BN), *Bs = As + BK * BM;
#pragma unroll
      for (int k = 0; k < BK; k++) {
        float a[TM], b[TN];
#pragma unroll
        for (int i = 0; i < TM; i++) a[i] = As[k * BM + ty + 16 * i];
#pragma unroll
        for (int j = 0; j < TN; j++) b[j] = Bs[k * BN + tx + 16 * j];
#pragma unroll
        for (int i = 0; i < TM; i++)
#pragma unroll
          for (int j = 0; j < TN; j++) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
      }
      if (kt + 1 < KT) put((kt + 1) & 1);
      __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; i++) {
      long long row = m0 + ty + 16 * i;
      if (M % BM == 0 || row < M)
#pragma unroll
        for (int j = 0; j < TN; j++) {
          long long col = n0 + tx + 16 * j;
          if (N % BN == 0 || col < N) e.st1(row * N + col, col, acc[i][j]);
        }
    }
  }
};
// f32 on the tensor cores (mma.sync m16n8k8 tf32, f32 accumulate).  X = 3
// (3xTF32): each operand x splits into big = tf32(x) and small =
// x - big (read by the tensor cores as TF32), and a b is taken as a_small b_big + a_big b_small +
// a_big b_big, which keeps about 21 of f32's 24 significant bits (the
// dropped a_small b_small is below 2^-22 of the product); X = 1: one TF32
// product (10 bits).  Fragments of an 8-deep k-step: thread (g = lane / 4,
// t = lane % 4) holds a[g][t], a[g+8][t], a[g][t+4], a[g+8][t+4] and
// b[t][g], b[t+4][g]; the k slots t and t + 4 are taken as elements 2t and
// 2t + 1 of the step (the sum over k is the same in any order), so a
// K-contiguous row gives both with one 8-byte load, and a C fragment's
// pair of columns (2t, 2t+1) is the A fragment of a product over them.
MLC_FN unsigned mlc_tf32(float x) {
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r; }
// x's TF32 parts: hi = tf32(x) (cvt.rna: an add and a mask on sm_90); X ==
// 3: lo = x - hi as it is, for the tensor cores read a TF32 operand's top 19
// bits and so truncate it there (below 2^-21 of x where rounding it too gives
// 2^-22; CUTLASS's fast-accurate f32 takes its small part so).  The split is
// most of the f32 kernels' integer work: rounding lo as well (-DMLC_TF32_SPLIT=0,
// three instructions more) made gpt2like's train step 6 % slower.
#ifndef MLC_TF32_SPLIT
#define MLC_TF32_SPLIT 1
#endif
template <int X> MLC_FN void mlc_tf32_split(float x, unsigned &hi, unsigned &lo) {
  hi = mlc_tf32(x);
  if (X == 3) lo = MLC_TF32_SPLIT ? __float_as_uint(x - __uint_as_float(hi)) : mlc_tf32(x - __uint_as_float(hi));
}
MLC_FN void mlc_mma_tf32(float *d, const unsigned *a, const unsigned *b) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
    : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1])); }
// d += a b in X TF32 products; ah/al: A's parts (4 registers each), bh/bl: B's (2).
template <int X> MLC_FN void mlc_mma_x(float *d, const unsigned *ah, const unsigned *al, const unsigned *bh, const unsigned *bl) {
  if (X == 3) { mlc_mma_tf32(d, al, bh); mlc_mma_tf32(d, ah, bl); }
  mlc_mma_tf32(d, ah, bh); }
// A ROWS x COLS tile of a row-major f32 matrix (leading dimension LD, RMAX x
// CMAX valid) from (r0, c0) into shared memory with row pitch P floats, by
// cp.async: 16 bytes a copy where rows are 16-byte aligned (LD % 4 == 0),
// else 4; zero-filled outside the matrix.
template <int ROWS, int COLS, int P, int NT, long long LD, long long RMAX, long long CMAX>
MLC_FN void mlc_gemm_load_f32(float *s, const float *g, long long r0, long long c0, int tid) {
  typedef typename mlc_gemm_index<(RMAX + ROWS) * LD + COLS >= 0x7fffffffLL>::type I;
  if (LD % 4 == 0) { // CMAX % 4 == 0 too, so a chunk is all in or all out
    constexpr int CPR = COLS / 4, CH = ROWS * CPR;
#pragma unroll
    for (int i = 0; i < (CH + NT - 1) / NT; i++) {
      int ch = tid + i * NT;
      if (CH % NT == 0 || ch < CH) {
        int r = ch / CPR, c = ch % CPR * 4;
        I gr = (I)(r0 + r), gc = (I)(c0 + c);
        bool ok = gr < RMAX && gc < CMAX;
        mlc_gemm_cp16(mlc_gemm_smem_u32(s + r * P + c), ok ? g + gr * (I)LD + gc : g, ok);
      }
    }
  } else { // a column of the thread's own a pass, down the rows (not unrolled: registers)
    constexpr int RPI = NT / COLS;
    static_assert(NT % COLS == 0 && ROWS % RPI == 0, "f32 tile loads");
    const int c = tid % COLS;
    const I gc = (I)(c0 + c);
    unsigned d = mlc_gemm_smem_u32(s + tid / COLS * P + c);
    I gr = (I)(r0 + tid / COLS);
#pragma unroll 4
    for (int i = 0; i < ROWS / RPI; i++, gr += RPI, d += RPI * P * 4) {
      bool ok = gr < RMAX && gc < CMAX;
      mlc_gemm_cp4(d, ok ? g + gr * (I)LD + gc : g, ok);
    }
  }
}
// C[M,N] = A B in f32 on the tensor cores, X TF32 products a step (see
// mlc_mma_x), for one BM x BN tile; WARPS_M x WARPS_N warps, BK-deep
// k-tiles through an ST-stage cp.async ring.  Shared rows are padded so the
// fragment loads of a warp hit distinct banks: a K-contiguous operand
// (A [M,K], B [N,K]) has pitch BK + 8 (8-byte loads of (row g, k 2t));
// an MN-contiguous one (A stored [K,M], B [K,N]) pitch MN + 4 (4-byte loads
// of (k 2t, column g)).  Any M, N, K: edges zero-filled, stores predicated.
template <int X, int BM, int BN, int BK, int WARPS_M, int WARPS_N, int ST, bool AKM, bool BNK, long long M,
          long long N, long long K>
struct mlc_gemm_x3 {
  static constexpr int NT = WARPS_M * WARPS_N * 32, WTM = BM / WARPS_M, WTN = BN / WARPS_N;
  static constexpr int FM = WTM / 16, FN = WTN / 8;
  static constexpr int A_P = AKM ? BM + 4 : BK + 8, B_P = BNK ? BK + 8 : BN + 4;
  static constexpr int A_ST = (AKM ? BK : BM) * A_P, B_ST = (BNK ? BN : BK) * B_P;
  static constexpr int SMEM = ST * (A_ST + B_ST) * 4;
  static constexpr long long LDA = AKM ? M : K, LDB = BNK ? K : N;
  static constexpr int KT = (int)((K + BK - 1) / BK);
  static_assert(BK % 8 == 0 && WTM % 16 == 0 && WTN % 8 == 0, "tile shape");
  static MLC_FN void load(float *sA, float *sB, const float *A, const float *B, long long m0, long long n0, int kt, int tid) {
    long long k0 = (long long)kt * BK;
    if (AKM) mlc_gemm_load_f32<BK, BM, A_P, NT, LDA, K, M>(sA, A, k0, m0, tid);
    else mlc_gemm_load_f32<BM, BK, A_P, NT, LDA, M, K>(sA, A, m0, k0, tid);
    if (BNK) mlc_gemm_load_f32<BN, BK, B_P, NT, LDB, N, K>(sB, B, n0, k0, tid);
    else mlc_gemm_load_f32<BK, BN, B_P, NT, LDB, K, N>(sB, B, k0, n0, tid);
  }
  template <class E> static MLC_FN void run_e(const float *A, const float *B, const E &e, int tm, int tn, unsigned char *smraw) {
    float *sA = (float *)smraw, *sB = sA + ST * A_ST;
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
    int wm = warp / WARPS_N, wn = warp % WARPS_N;
    long long m0 = (long long)tm * BM, n0 = (long long)tn * BN;
    float acc[FM][FN][4];
#pragma unroll
    for (int i = 0; i < FM; i++)
#pragma unroll
      for (int j = 0; j < FN; j++) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.f;
#pragma unroll
    for (int s = 0; s < ST - 1; s++) {
      if (s < KT) load(sA + s * A_ST, sB + s * B_ST, A, B, m0, n0, s, tid);
      mlc_gemm_cp_commit();
    }
    // this thread's first fragment element in a stage: A (row wm*WTM + g, k 2t), B (k 2t, column wn*WTN + g)
    const int a_off = AKM ? 2 * t * A_P + wm * WTM + g : (wm * WTM + g) * A_P + 2 * t;
    const int b_off = BNK ? (wn * WTN + g) * B_P + 2 * t : 2 * t * B_P + wn * WTN + g;
#pragma unroll 1
    for (int kt = 0; kt < KT; kt++) {
      mlc_gemm_cp_wait<ST - 2>();
      __syncthreads();
      {
        int nk = kt + ST - 1, st = nk % ST;
        if (nk < KT) load(sA + st * A_ST, sB + st * B_ST, A, B, m0, n0, nk, tid);
        mlc_gemm_cp_commit();
      }
      const float *as = sA + kt % ST * A_ST + a_off, *bs = sB + kt % ST * B_ST + b_off;
      // The tensor cores add into their accumulator with truncation, which
      // over K = 8192 costs 3xTF32 its accuracy (about 5e-5 on the H200);
      // so a k-tile's products sum in part[] and join acc by a rounded add.
      float part[FM][FN][4];
#pragma unroll
      for (int i = 0; i < FM; i++)
#pragma unroll
        for (int j = 0; j < FN; j++) part[i][j][0] = part[i][j][1] = part[i][j][2] = part[i][j][3] = 0.f;
#pragma unroll
      for (int kk = 0; kk < BK; kk += 8) {
        unsigned ah[FM][4], al[FM][4], bh[FN][2], bl[FN][2];
#pragma unroll
        for (int i = 0; i < FM; i++) {
          float v[4]; // (g, 2t), (g+8, 2t), (g, 2t+1), (g+8, 2t+1)
          if (AKM) {
            const float *p = as + kk * A_P + i * 16;
            v[0] = p[0]; v[1] = p[8]; v[2] = p[A_P]; v[3] = p[A_P + 8];
          } else {
            const float *p = as + i * 16 * A_P + kk;
            float2 lo = *(const float2 *)p, hi = *(const float2 *)(p + 8 * A_P);
            v[0] = lo.x; v[2] = lo.y; v[1] = hi.x; v[3] = hi.y;
          }
#pragma unroll
          for (int r = 0; r < 4; r++) mlc_tf32_split<X>(v[r], ah[i][r], al[i][r]);
        }
#pragma unroll
        for (int j = 0; j < FN; j++) {
          float v0, v1; // (k 2t, n g), (k 2t+1, n g)
          if (BNK) {
            float2 p = *(const float2 *)(bs + j * 8 * B_P + kk);
            v0 = p.x; v1 = p.y;
          } else {
            const float *p = bs + kk * B_P + j * 8;
            v0 = p[0]; v1 = p[B_P];
          }
          mlc_tf32_split<X>(v0, bh[j][0], bl[j][0]);
          mlc_tf32_split<X>(v1, bh[j][1], bl[j][1]);
        }
#pragma unroll
        for (int i = 0; i < FM; i++)
#pragma unroll
          for (int j = 0; j < FN; j++) mlc_mma_x<X>(part[i][j], ah[i], al[i], bh[j], bl[j]);
      }
#pragma unroll
      for (int i = 0; i < FM; i++)
#pragma unroll
        for (int j = 0; j < FN; j++)
#pragma unroll
          for (int e = 0; e < 4; e++) acc[i][j][e] += part[i][j][e];
    }
    mlc_gemm_cp_wait<0>();
    // c[i][j]: rows g, g + 8 of row tile i, columns 2t, 2t + 1 of column tile j
    long long rb = m0 + wm * WTM + g, cb = n0 + wn * WTN + 2 * t;
#pragma unroll
    for (int i = 0; i < FM; i++)
#pragma unroll
      for (int h = 0; h < 2; h++) {
        long long row = rb + i * 16 + h * 8;
        if (M % BM == 0 || row < M)
#pragma unroll
          for (int j = 0; j < FN; j++) {
            long long col = cb + j * 8;
            if (N % BN == 0 || col < N) e.st1(row * N + col, col, acc[i][j][2 * h]);
            if (N % BN == 0 || col + 1 < N) e.st1(row * N + col + 1, col + 1, acc[i][j][2 * h + 1]);
          }
      }
  }
  static MLC_FN void run(const float *A, const float *B, float *C, int tm, int tn, unsigned char *sm) {
    run_e(A, B, mlc_gemm_out<float>{C}, tm, tn, sm);
  }
};
// f32 on Hopper's wgmma (sm_90a): C[M,N] = A B for one 128 x 128 tile, X
// TF32 products a step as mlc_mma_x (X = 3: 3xTF32).  wgmma takes TF32
// operands only K-major, so both come through registers: each thread loads
// its share of the next k-tile (32 deep) while the tensor cores work on this
// one, splits it into TF32 high parts and residuals, and stores both into
// K-major 128-byte-swizzled tiles (a row of 32 k at 128 bytes, chunk c of
// row r at (c ^ (r & 7)) * 16), whatever the operand's layout in memory:
// K-contiguous rows 16 bytes a thread, MN-contiguous ones a thread a
// column of 4 k (coalesced across the warp).  Two stages; two warpgroups of
// 64 rows, wgmma.m64n128k8; a k-tile's 12 products sum apart and join the
// accumulators rounded (the tensor cores truncate as they add).  Any
// shape: edges zero-filled, stores predicated.  Elsewhere than sm_90a the
// launch runs mlc_gemm_x3.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
template <int SD> MLC_FN void mlc_wgmma_tf32(float *d, unsigned long long a, unsigned long long b) {
  asm volatile("{ .reg .pred p; setp.ne.b32 p, %66, 0; wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, %64, %65, p, 1, 1; }"
    : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
    : "l"(a), "l"(b), "r"(SD)); }
#endif
template <int X, bool AKM, bool BNK, long long M, long long N, long long K>
struct mlc_gemm_wgx {
  static constexpr int BM = 128, BN = 128, BK = 32, NT = 256;
  static constexpr int A_T = BM * 128, B_T = BN * 128;   // bytes of one part of a tile
  static constexpr int STAGE = 2 * (A_T + B_T);           // hi and lo of A and B
  typedef mlc_gemm_x3<X, 128, 128, 32, 4, 2, 3, AKM, BNK, M, N, K> F; // the fallback
  static constexpr int SMEM_WG = 2 * STAGE + 1024;
  static constexpr int SMEM = SMEM_WG > F::SMEM ? SMEM_WG : F::SMEM;
  static constexpr long long LDA = AKM ? M : K, LDB = BNK ? K : N;
  static constexpr int KT = (int)((K + BK - 1) / BK);
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  // One operand's R x 32 tile: KM (K-contiguous in memory, leading
  // dimension LD) or not; MN valid rows.  Each thread holds 4 chunks of 4.
  template <bool KM, long long LD, long long MN> struct op {
    static constexpr int R = 128, NC = R * BK / 4 / NT;
    // the largest offset formed: rows of LD are MN + R long (K-contiguous) or K + BK long
    typedef typename mlc_gemm_index<(KM ? (MN + R) * LD + K + BK : (K + BK) * LD + MN + R) >= 0x7fffffffLL>::type I;
    // chunk i of this thread: (row r of the tile, k-chunk q of 4)
    static MLC_FN void at(int tid, int i, int &r, int &q) {
      int c = tid + i * NT;
      if (KM) { r = c >> 3; q = c & 7; } else { r = c % R; q = c / R; }
    }
    static MLC_FN void fetch(float (&v)[NC][4], const float *g, long long mn0, int kt, int tid) {
      long long k0 = (long long)kt * BK;
#pragma unroll
      for (int i = 0; i < NC; i++) {
        int r, q;
        at(tid, i, r, q);
        I mn = (I)(mn0 + r), k = (I)(k0 + 4 * q);
        if (KM && LD % 4 == 0) {
          bool ok = mn < MN && k < K; // K % 4 == 0 here, so all four or none
          float4 t = ok ? *(const float4 *)(g + mn * (I)LD + k) : make_float4(0.f, 0.f, 0.f, 0.f);
          v[i][0] = t.x; v[i][1] = t.y; v[i][2] = t.z; v[i][3] = t.w;
        } else {
#pragma unroll
          for (int j = 0; j < 4; j++) {
            bool ok = mn < MN && k + j < K;
            v[i][j] = ok ? g[KM ? mn * (I)LD + k + j : (k + j) * (I)LD + mn] : 0.f;
          }
        }
      }
    }
    // the held chunks, split, into the stage's hi and lo tiles (byte addresses)
    static MLC_FN void put(const float (&v)[NC][4], unsigned hi, unsigned lo, int tid) {
#pragma unroll
      for (int i = 0; i < NC; i++) {
        int r, q;
        at(tid, i, r, q);
        unsigned o = (unsigned)(r * 128 + ((q ^ (r & 7)) << 4));
        unsigned h[4], l[4];
#pragma unroll
        for (int j = 0; j < 4; j++) mlc_tf32_split<3>(v[i][j], h[j], l[j]);
        asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" :: "r"(hi + o), "r"(h[0]), "r"(h[1]), "r"(h[2]), "r"(h[3]) : "memory");
        if (X == 3)
          asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" :: "r"(lo + o), "r"(l[0]), "r"(l[1]), "r"(l[2]), "r"(l[3]) : "memory");
      }
    }
  };
  typedef op<!AKM, LDA, M> OA;
  typedef op<BNK, LDB, N> OB;
  template <class E> static MLC_FN void run_e(const float *A, const float *B, const E &e, int tm, int tn, unsigned char *smraw) {
    int tid = threadIdx.x, wg = tid >> 7;
    long long m0 = (long long)tm * BM, n0 = (long long)tn * BN;
    unsigned s0 = (mlc_gemm_smem_u32(smraw) + 1023) & ~1023u;
    // stage s: A hi, A lo, B hi, B lo.  The registers va, vb carry tile
    // kt + 1 from global memory: fetched while tile kt - 1's products run,
    // split into the free stage while tile kt's run, so that a load's
    // latency is hidden behind a whole tile of products.
    float va[OA::NC][4], vb[OB::NC][4];
    OA::fetch(va, A, m0, 0, tid);
    OB::fetch(vb, B, n0, 0, tid);
    OA::put(va, s0, s0 + A_T, tid);
    OB::put(vb, s0 + 2 * A_T, s0 + 2 * A_T + B_T, tid);
    mlc_fence_async_smem();
    if (1 < KT) { OA::fetch(va, A, m0, 1, tid); OB::fetch(vb, B, n0, 1, tid); }
    __syncthreads();
    // part: this k-tile's products, added to acc once they are done.  Adding
    // them straight into acc is 6-9 % faster but 10-50x less accurate
    // (bench/results/h200-2026-12-02f.md): the tensor cores' sums into a
    // large accumulator lose low bits that an f32 add keeps.
    float acc[64], part[64];
#pragma unroll
    for (int i = 0; i < 64; i++) acc[i] = 0.f;
#pragma unroll 1
    for (int kt = 0; kt < KT; kt++) {
      unsigned st = s0 + (unsigned)(kt & 1) * STAGE;
      // this warpgroup's 64 rows of A: 64 * 128 bytes on
      const unsigned long long ah = mlc_wg_desc(st + wg * 8192, 16), al = mlc_wg_desc(st + A_T + wg * 8192, 16);
      const unsigned long long bh = mlc_wg_desc(st + 2 * A_T, 16), bl = mlc_wg_desc(st + 2 * A_T + B_T, 16);
      mlc_wg_fence();
#pragma unroll
      for (int kk = 0; kk < BK / 8; kk++) { // k-step of 8 = 32 bytes = 2 in the descriptor
        const bool fresh = kk == 0; // the first product of a tile starts the partial sum afresh
        if (X == 3) {
          if (fresh) mlc_wgmma_tf32<0>(part, al, bh);
          else mlc_wgmma_tf32<1>(part, al + 2 * kk, bh + 2 * kk);
          mlc_wgmma_tf32<1>(part, ah + 2 * kk, bl + 2 * kk);
          mlc_wgmma_tf32<1>(part, ah + 2 * kk, bh + 2 * kk);
        } else {
          if (fresh) mlc_wgmma_tf32<0>(part, ah, bh);
          else mlc_wgmma_tf32<1>(part, ah + 2 * kk, bh + 2 * kk);
        }
      }
      mlc_wg_commit();
      if (kt + 1 < KT) { // the other stage was last read by tile kt - 1's products, all finished
        unsigned nx = s0 + (unsigned)((kt + 1) & 1) * STAGE;
        OA::put(va, nx, nx + A_T, tid);
        OB::put(vb, nx + 2 * A_T, nx + 2 * A_T + B_T, tid);
        mlc_fence_async_smem();
      }
      if (kt + 2 < KT) { OA::fetch(va, A, m0, kt + 2, tid); OB::fetch(vb, B, n0, kt + 2, tid); }
      mlc_wg_wait<0>();
#pragma unroll
      for (int i = 0; i < 64; i++) { mlc_wg_fence_operand(part[i]); acc[i] += part[i]; }
      __syncthreads();
    }
    // acc[4i + e]: row 16 * warp + lane / 4 (+8 for e >= 2), column 8i + 2 (lane % 4) (+1 for odd e)
    int lane = tid & 31, w = (tid >> 5) & 3;
    long long r0 = m0 + wg * 64 + w * 16 + (lane >> 2), c0 = n0 + 2 * (lane & 3);
#pragma unroll
    for (int i = 0; i < 16; i++)
#pragma unroll
      for (int x = 0; x < 4; x++) {
        long long row = r0 + (x >> 1) * 8, col = c0 + 8 * i + (x & 1);
        if ((M % BM == 0 || row < M) && (N % BN == 0 || col < N)) e.st1(row * N + col, col, acc[4 * i + x]);
      }
  }
#else
  template <class E> static MLC_FN void run_e(const float *A, const float *B, const E &e, int tm, int tn, unsigned char *sm) {
    F::run_e(A, B, e, tm, tn, sm);
  }
#endif
  static MLC_FN void run(const float *A, const float *B, float *C, int tm, int tn, unsigned char *sm) {
    run_e(A, B, mlc_gemm_out<float>{C}, tm, tn, sm);
  }
};

// x of mlc_gemv as it is stored: from init(r0) on, the 16 bytes of row
// r0 + m from element k (16-byte aligned), or one element, as floats.
template <class T, long long K> struct mlc_gemv_x {
  static constexpr int V = 16 / (int)sizeof(T);
  const T *x;
  MLC_FN void init(long long r0) { x += r0 * K; }
  MLC_FN void vec(int m, long long k, float *o) const {
    union { uint4 u; T e[V]; } a;
    a.u = __ldg((const uint4 *)(x + m * K + k));
#pragma unroll
    for (int j = 0; j < V; j++) o[j] = to_f32(a.e[j]);
  }
  MLC_FN float one(int m, long long k) const { return to_f32(x[m * K + k]); }
};

// x through an rmsnorm, the prologue of a fused group (ir/fused.h): the
// block normalises x's M rows into shared memory once, y = x * rstd(x)
// [* w] rounded to T as the rmsnorm kernel stores it, and the GEMV reads
// them from there.  rstd is that kernel's to the bit
// (codegen/cstyle/emit_norm.c, the same row plan: RV-element vectors, TPR
// threads a row): with TPR 256 (the GEMV's block) each thread plays the
// norm kernel's thread of its number, mlc_block_sum adds the same way;
// with TPR 32 warp m plays row m's warp.  M * K elements of T fit the
// block's static shared memory (the target's gemv_prologue_bytes).
template <class T, int M, long long K, int RV, int TPR, bool W> struct mlc_gemv_rms {
  static constexpr int V = 16 / (int)sizeof(T);
  static constexpr long long NV = K / RV, NIT = (NV + TPR - 1) / TPR;
  const T *x, *w;
  float invd, eps;
  const T *ys;
  // thread t's sum of squares of row xr, in the norm kernel's order
  MLC_FN float squares(const T *xr, int t) const {
    const float mean = 0.f;
    float s2 = 0.f;
    for (long long it = 0; it < NIT; it++) {
      const long long v = t + it * TPR;
      if (v < NV) {
        union { uint4 u; T e[V]; } a;
        if (RV == V) a.u = __ldg((const uint4 *)(xr + v * RV)); // the kernel's 16-byte vectors
#pragma unroll
        for (int q = 0; q < RV; q++) {
          float d = to_f32(RV == V ? a.e[q] : xr[v * RV + q]) - mean;
          s2 += d * d;
        }
      }
    }
    return s2;
  }
  MLC_FN void init(long long r0) {
    __shared__ __align__(16) T sy[M * K];
    __shared__ float rs[M];
    const T *xb = x + r0 * K;
    const int tid = threadIdx.x;
    if (TPR > 32) { // TPR == blockDim.x: mlc_block_sum as the norm kernel's
      __shared__ float sh[32];
#pragma unroll
      for (int m = 0; m < M; m++) {
        const float s = mlc_block_sum(squares(xb + m * K, tid), sh);
        if (tid == 0) rs[m] = 1.f / sqrtf(s * invd + eps);
      }
    } else if (tid / 32 < M) {
      const int m = tid / 32;
      const float s = mlc_warp_sum(squares(xb + m * K, tid % 32));
      if (tid % 32 == 0) rs[m] = 1.f / sqrtf(s * invd + eps);
    }
    __syncthreads();
    const float mean = 0.f;
    if (K % V == 0) { // 16 bytes a thread at a time
      for (long long i = (long long)tid * V; i < M * K; i += (long long)blockDim.x * V) {
        const int m = (int)(i / K);
        union { uint4 u; T e[V]; } a, b, y;
        a.u = __ldg((const uint4 *)(xb + i));
        if (W) b.u = __ldg((const uint4 *)(w + (i - m * K)));
#pragma unroll
        for (int j = 0; j < V; j++) {
          float r = (to_f32(a.e[j]) - mean) * rs[m];
          if (W) r = r * to_f32(b.e[j]);
          y.e[j] = from_f32<T>(r);
        }
        *(uint4 *)(sy + i) = y.u;
      }
    } else {
      for (long long i = tid; i < M * K; i += blockDim.x) {
        const int m = (int)(i / K);
        float r = (to_f32(xb[i]) - mean) * rs[m];
        if (W) r = r * to_f32(w[i - m * K]);
        sy[i] = from_f32<T>(r);
      }
    }
    __syncthreads();
    ys = sy;
  }
  MLC_FN void vec(int m, long long k, float *o) const {
    union { uint4 u; T e[V]; } a;
    a.u = *(const uint4 *)(ys + m * K + k);
#pragma unroll
    for (int j = 0; j < V; j++) o[j] = to_f32(a.e[j]);
  }
  MLC_FN float one(int m, long long k) const { return to_f32(ys[m * K + k]); }
};

// linear of at most 4 rows (a decode step's x [1, 1, k]): a matrix-vector
// product, bound by reading the weight once.  KS warps per output column n
// (a block's WPB warps take WPB / KS columns), each warp a span of the row
// in whole STEP pieces: its lanes read w's row 16 bytes at a time (VEC: K
// a multiple of 8 16-bit or 4 f32 elements, so every row starts 16-byte
// aligned), each lane's loads issued before its sums, x's M rows (small,
// in L1) beside them; the lanes' partial sums meet by shuffles, the KS
// warps' in shared memory in a fixed order, and one lane stores the M
// results through the epilogue e (st1, as the GEMMs').  KS > 1 where K is
// long: more warps, each with fewer loads in a row to wait for.  x reads
// its values through X: mlc_gemv_x, or mlc_gemv_rms for a norm before it.
template <class T, int M, long long N, long long K, int WPB, int KS> struct mlc_gemv {
  static constexpr int V = 16 / (int)sizeof(T), CPB = WPB / KS;
  static constexpr bool VEC = K % V == 0;
  static constexpr long long STEP = 32LL * V, PIECES = (K + STEP - 1) / STEP, SPAN = (PIECES + KS - 1) / KS * STEP;
  union vec { uint4 u; T e[16 / sizeof(T)]; };
  // elements k .. k + V - 1 of the weight's row against x's rows, into acc
  template <class X> static MLC_FN void step(const X &x, const T *wr, long long k, float *acc) {
    vec wv;
    wv.u = __ldg((const uint4 *)(wr + k));
#pragma unroll
    for (int m = 0; m < M; m++) {
      float xv[V];
      x.vec(m, k, xv);
#pragma unroll
      for (int j = 0; j < V; j++) acc[m] += xv[j] * to_f32(wv.e[j]);
    }
  }
  template <class X, class Ep> static MLC_FN void run(X x, const T *w, const Ep &e) {
    x.init(0);
    const int lane = threadIdx.x & 31, wi = threadIdx.x >> 5, ks = wi % KS;
    const long long n = (long long)blockIdx.x * CPB + wi / KS;
    const T *wr = w + (n < N ? n : N - 1) * K;
    float acc[M];
#pragma unroll
    for (int m = 0; m < M; m++) acc[m] = 0.f;
    const long long lo = ks * SPAN, hi = lo + SPAN < K ? lo + SPAN : K;
    if (n < N && lo < K) { // a split past the row's end (KS SPAN may pass K) reads nothing
      if (VEC) {
        const long long full = lo + (hi - lo) / STEP * STEP; // whole pieces end here; the tail is K % STEP / V lanes
#pragma unroll 8
        for (long long k = lo + lane * V; k < full; k += STEP) step(x, wr, k, acc);
        if (full + lane * V < hi) step(x, wr, full + lane * V, acc);
      } else {
        for (long long k = lo + lane; k < hi; k += 32) {
          const float wk = to_f32(wr[k]);
#pragma unroll
          for (int m = 0; m < M; m++) acc[m] += x.one(m, k) * wk;
        }
      }
    }
#pragma unroll
    for (int m = 0; m < M; m++) acc[m] = mlc_warp_sum(acc[m]);
    if (KS > 1) {
      __shared__ float red[WPB][M];
      if (lane == 0)
#pragma unroll
        for (int m = 0; m < M; m++) red[wi][m] = acc[m];
      __syncthreads();
      if (ks == 0 && lane == 0)
#pragma unroll
        for (int m = 0; m < M; m++) {
          acc[m] = red[wi][m];
#pragma unroll
          for (int k = 1; k < KS; k++) acc[m] += red[wi + k][m];
        }
    }
    if (n < N && ks == 0 && lane == 0)
#pragma unroll
      for (int m = 0; m < M; m++) e.st1(m * N + n, n, acc[m]);
  }
};

// qlinear (--quantize int8|int4): y[m][n] = sum_k x[m][k] code[n][k] scale
// (stored through the epilogue e's st1, as the GEMMs' are),
// w packed as runtime/quant.h lays it out (per row its K codes, PER = 32 /
// BITS to a word, element j in bits [BITS (j % PER), + BITS), two's
// complement; then the K / G scales).  SCHEME holds ir/ir.h's MLC_QS_*
// flags: ASYM (1, --quantize ...:asym): the codes unsigned, with K / G mins
// beside the scales, and y = sum_k x (lo + code scale): a word lies in one
// group, so per word s sum code x + lo sum x, the word's sum of x taken once
// for the C columns.  BF16 (2, the default): the scales (and mins) bf16, two
// to a word (asymmetric: a group's scale and min in one word); else f32, a
// word each, the mins after the scales.  x and y f32.  A block of KS warps
// takes C output columns and MB rows of x.  Its warps split each row's CW
// words of codes into KS spans of whole 128-byte lines; a warp's lanes take
// consecutive words (one coalesced 128-byte load a column), so the PER
// floats of x a word multiplies (16-byte loads, a lane's next to its
// neighbour's) are read once for the C columns.  Each word is dequantised in
// registers and scaled once (a word lies in one group: G is a multiple of
// 8); the lanes' sums meet by shuffles, the warps' in shared memory, in a
// fixed order.  More rows take more blocks (blockIdx.x / NB).
template <int BITS, int MB, long long M, long long N, long long K, long long G, int C, int KS, int SCHEME = 0> struct mlc_qgemv {
  static constexpr bool ASYM = SCHEME & 1, BF16 = SCHEME & 2;
  static constexpr int PER = 32 / BITS;
  static constexpr long long CW = K / PER, GW = K / G, HALVES = (ASYM ? 2 : 1) * GW,
                             RW = CW + (BF16 ? (HALVES + 1) / 2 : HALVES), NB = (N + C - 1) / C;
  static constexpr long long SPAN = ((CW + KS - 1) / KS + 31) / 32 * 32; // a warp's words
  // codes as floats without I2F (a quarter-rate conversion): the word with
  // each code's sign bit flipped holds code + HALF unsigned; OR'd into 2^23's
  // mantissa that is 2^23 + code + HALF exactly, and one subtraction leaves
  // the code.  Unsigned codes (ASYM) need no flip.
  static constexpr unsigned MASK = (1u << BITS) - 1, HALF = ASYM ? 0 : 1u << (BITS - 1),
                            FLIP = ASYM ? 0 : BITS == 4 ? 0x88888888u : 0x80808080u;
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
      const long long g = k0 / G; // the word's group
#pragma unroll
      for (int j = 0; j < C; j++) {
        const unsigned u = __ldg(row[j] + c) ^ FLIP;
        if constexpr (BF16 && ASYM) {
          const unsigned t = __ldg(row[j] + CW + g); // the scale low, the min high
          s[j] = __uint_as_float(t << 16), lo[j] = __uint_as_float(t & 0xffff0000u);
        } else if constexpr (BF16) {
          const unsigned t = __ldg(row[j] + CW + g / 2);
          s[j] = __uint_as_float(g & 1 ? t & 0xffff0000u : t << 16);
        } else {
          s[j] = __uint_as_float(__ldg(row[j] + CW + g));
          if constexpr (ASYM) lo[j] = __uint_as_float(__ldg(row[j] + CW + GW + g));
        }
#pragma unroll
        for (int e = 0; e < PER; e++) code[j][e] = __uint_as_float(0x4B000000u | (u >> (BITS * e) & MASK)) - (8388608.0f + HALF);
      }
#pragma unroll
      for (int m = 0; m < MB; m++) {
        if (m >= rows) break;
        const float4 *xr = (const float4 *)(x + m * K + k0);
        float xv[PER];
#pragma unroll
        for (int q = 0; q < PER / 4; q++) {
          const float4 v = __ldg(xr + q);
          xv[4 * q] = v.x, xv[4 * q + 1] = v.y, xv[4 * q + 2] = v.z, xv[4 * q + 3] = v.w;
        }
        float xs = 0.f;
        if constexpr (ASYM)
#pragma unroll
          for (int e = 0; e < PER; e++) xs += xv[e];
#pragma unroll
        for (int j = 0; j < C; j++) {
          float sum = 0.f;
#pragma unroll
          for (int e = 0; e < PER; e++) sum += code[j][e] * xv[e];
          if constexpr (ASYM) acc[j][m] += sum * s[j] + xs * lo[j];
          else acc[j][m] += sum * s[j];
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
