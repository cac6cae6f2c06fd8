/* GEMM kernels for matmul (a[.., m, k] @ b[.., k, n], batch dims broadcast)
 * and linear (x[.., k] @ w[n, k]^T) on the CUDA target.
 *
 * A node becomes a gemm_desc, the internal descriptor the fused variants
 * will reuse:
 *
 *   C[b][M,N] = A[b][M,K] B[b][K,N], accumulated in f32, rounded to the
 *   dtype once at the store; C dense row-major, batch b at b * M * N;
 *   a_km: A stored [K,M] (a transposed operand, e.g. dW = dY^T X) else [M,K];
 *   b_nk: B stored [N,K] (linear's weight)                   else [K,N];
 *   nb batch dims of sizes bdim[], with element strides bsa[] of A and
 *   bsb[] of B along each (0 along a broadcast one).
 *
 * MATMUL is A[m,k] B[k,n]; when B is the same for every batch index and A
 * is dense, the batch folds into M (x[8,1024,2048] @ w[2048,2048] is one
 * 8192 x 2048 x 2048 product).  LINEAR is A[m,k] B[n,k] with x's leading
 * dims flattened into M.
 *
 * The kernels are C++ templates in cc_gemm_prelude, instantiated with the
 * shape as literals; the emitted __global__ function decodes blockIdx.x
 * into (batch, tile) and calls them:
 *
 *  - bf16/f16: mlc_gemm_tc, tensor cores (mma.sync m16n8k16, f32
 *    accumulate) fed by ldmatrix from a ST-stage cp.async pipeline through
 *    padded shared memory; 128x256 / 128x128 / 64x64 block tiles by problem
 *    size.  Rows whose start is not 16-byte aligned (leading dimension not a
 *    multiple of 8) go through plain 2-byte loads instead of cp.async; edges
 *    are zero-filled (cp.async src-size 0) and stores predicated.
 *  - f32: mlc_gemm_f32, exact FMAs on the SIMT cores (no TF32), 128x128 or
 *    64x64 block tiles, 8x8 / 4x4 per thread.
 *
 * Shared memory is dynamic; the larger tiles need more than 48 KiB, which
 * relies on the runtime raising cudaFuncAttributeMaxDynamicSharedMemorySize
 * to the launch's smem.
 */
#include "codegen/cuda/cc.h"

#include <string.h>

typedef struct {
  int dt;                 /* mlc_dtype of A, B and C */
  int64_t M, N, K;
  bool a_km, b_nk;
  int nb;                 /* batch dims, outermost first */
  int64_t bdim[MLC_MAX_RANK], bsa[MLC_MAX_RANK], bsb[MLC_MAX_RANK];
} gemm_desc;

/* A kernel configuration.  tc: BM x BN x BK tiles, WM x WN warps, ST
 * stages; f32: a (16 TM) x (16 TN) tile, BK deep. */
typedef struct {
  bool tc;
  int bm, bn, bk, wm, wn, st;
  int tm, tn;
} gemm_cfg;

/* Device code pasted once at the top of every module, after the base prelude. */
const char cc_gemm_prelude[] =
    "// mlc gemm: tensor-core wrappers (sm_80+, inline PTX) and the GEMM main loops\n"
    "MLC_FN unsigned mlc_gemm_smem_u32(const void *p) {\n"
    "  unsigned r;\n"
    "  asm(\"{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }\" : \"=r\"(r) : \"l\"(p));\n"
    "  return r; }\n"
    "template <class T> MLC_FN void mlc_gemm_mma(float *d, const unsigned *a, const unsigned *b);\n"
    "template <> MLC_FN void mlc_gemm_mma<mlc_bf16>(float *d, const unsigned *a, const unsigned *b) {\n"
    "  asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\"\n"
    "    : \"+f\"(d[0]), \"+f\"(d[1]), \"+f\"(d[2]), \"+f\"(d[3])\n"
    "    : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b[0]), \"r\"(b[1])); }\n"
    "template <> MLC_FN void mlc_gemm_mma<mlc_f16>(float *d, const unsigned *a, const unsigned *b) {\n"
    "  asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\"\n"
    "    : \"+f\"(d[0]), \"+f\"(d[1]), \"+f\"(d[2]), \"+f\"(d[3])\n"
    "    : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b[0]), \"r\"(b[1])); }\n"
    "MLC_FN void mlc_gemm_ldsm_x4(unsigned *r, unsigned addr) {\n"
    "  asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\"\n"
    "    : \"=r\"(r[0]), \"=r\"(r[1]), \"=r\"(r[2]), \"=r\"(r[3]) : \"r\"(addr) : \"memory\"); }\n"
    "MLC_FN void mlc_gemm_ldsm_x4_t(unsigned *r, unsigned addr) {\n"
    "  asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\"\n"
    "    : \"=r\"(r[0]), \"=r\"(r[1]), \"=r\"(r[2]), \"=r\"(r[3]) : \"r\"(addr) : \"memory\"); }\n"
    "// 16 bytes global -> shared, asynchronously; zero-filled when !ok (src not read).\n"
    "MLC_FN void mlc_gemm_cp16(unsigned dst, const void *src, bool ok) {\n"
    "  asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16, %2;\" :: \"r\"(dst), \"l\"(src), \"r\"(ok ? 16 : 0) : \"memory\"); }\n"
    "MLC_FN void mlc_gemm_cp_commit() { asm volatile(\"cp.async.commit_group;\" ::: \"memory\"); }\n"
    "template <int N> MLC_FN void mlc_gemm_cp_wait() { asm volatile(\"cp.async.wait_group %0;\" :: \"n\"(N) : \"memory\"); }\n"
    "// Grouped rasterisation: consecutive blocks walk G tile-rows down one\n"
    "// tile-column before moving right, so their A and B tiles share the L2.\n"
    "template <int TM, int TN, int G> MLC_FN void mlc_gemm_raster(unsigned t, int &tm, int &tn) {\n"
    "  unsigned per = (unsigned)G * TN, first = t / per * G, r = t % per;\n"
    "  unsigned gs = TM - first < (unsigned)G ? TM - first : (unsigned)G;\n"
    "  tm = (int)(first + r % gs); tn = (int)(r / gs); }\n"
    "// One ROWS x COLS tile (COLS contiguous, a multiple of 8) of a row-major\n"
    "// matrix with leading dimension LD and RMAX x CMAX valid elements, from\n"
    "// (r0, c0), into shared memory with row pitch P (elements).  VEC: rows are\n"
    "// 16-byte aligned (LD % 8 == 0): cp.async, zero-filled outside; else plain\n"
    "// 2-byte loads.\n"
    "template <bool WIDE> struct mlc_gemm_index { typedef int type; };\n"
    "template <> struct mlc_gemm_index<true> { typedef long long type; };\n"
    "template <int ROWS, int COLS, int P, bool VEC, int NT, long long LD, long long RMAX, long long CMAX>\n"
    "MLC_FN void mlc_gemm_load_tile(unsigned short *s, const unsigned short *g, long long r0, long long c0, int tid) {\n"
    "  // 32-bit offsets where the matrix allows\n"
    "  typedef typename mlc_gemm_index<(RMAX + ROWS) * LD + COLS >= 0x7fffffffLL>::type I;\n"
    "  constexpr int CPR = COLS / 8, CH = ROWS * CPR;\n"
    "#pragma unroll\n"
    "  for (int i = 0; i < (CH + NT - 1) / NT; i++) {\n"
    "    int ch = tid + i * NT;\n"
    "    if (CH % NT == 0 || ch < CH) {\n"
    "      int r = ch / CPR, c = ch % CPR * 8;\n"
    "      I gr = (I)(r0 + r), gc = (I)(c0 + c);\n"
    "      unsigned short *d = s + r * P + c;\n"
    "      if (VEC) {\n"
    "        bool ok = gr < RMAX && gc < CMAX;\n"
    "        mlc_gemm_cp16(mlc_gemm_smem_u32(d), ok ? g + gr * (I)LD + gc : g, ok);\n"
    "      } else {\n"
    "        unsigned v[4];\n"
    "#pragma unroll\n"
    "        for (int j = 0; j < 4; j++) {\n"
    "          unsigned lo = gr < RMAX && gc + 2 * j < CMAX ? g[gr * (I)LD + gc + 2 * j] : 0;\n"
    "          unsigned hi = gr < RMAX && gc + 2 * j + 1 < CMAX ? g[gr * (I)LD + gc + 2 * j + 1] : 0;\n"
    "          v[j] = lo | hi << 16;\n"
    "        }\n"
    "        *(uint4 *)d = make_uint4(v[0], v[1], v[2], v[3]);\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n"
    "// C[M,N] = A B for one BM x BN tile (tm, tn), bf16/f16 in, f32 accumulate.\n"
    "// A is [M,K] row-major (AKM: stored [K,M]), B is [K,N] (BNK: stored [N,K]),\n"
    "// C is [M,N] row-major.  WARPS_M x WARPS_N warps, ST-stage cp.async\n"
    "// pipeline, BK-deep k-steps; shared rows padded by 16 bytes (ldmatrix reads\n"
    "// of 8 rows hit 8 different bank quads).  sm: SMEM bytes, 16-byte aligned.\n"
    "template <class T, int BM, int BN, int BK, int WARPS_M, int WARPS_N, int ST, bool AKM, bool BNK, long long M,\n"
    "          long long N, long long K>\n"
    "struct mlc_gemm_tc {\n"
    "  static constexpr int NT = WARPS_M * WARPS_N * 32, WTM = BM / WARPS_M, WTN = BN / WARPS_N;\n"
    "  static constexpr int FM = WTM / 16, FN = WTN / 8;\n"
    "  static constexpr int A_ROWS = AKM ? BK : BM, A_P = (AKM ? BM : BK) + 8;\n"
    "  static constexpr int B_ROWS = BNK ? BN : BK, B_P = (BNK ? BK : BN) + 8;\n"
    "  static constexpr int A_ST = A_ROWS * A_P, B_ST = B_ROWS * B_P;\n"
    "  static constexpr int SMEM = ST * (A_ST + B_ST) * 2;\n"
    "  static constexpr long long LDA = AKM ? M : K, LDB = BNK ? K : N;\n"
    "  static constexpr int KT = (int)((K + BK - 1) / BK);\n"
    "  static MLC_FN void load(unsigned short *sA, unsigned short *sB, const unsigned short *A, const unsigned short *B,\n"
    "                          long long m0, long long n0, int kt, int tid) {\n"
    "    long long k0 = (long long)kt * BK;\n"
    "    if (AKM) mlc_gemm_load_tile<BK, BM, A_P, LDA % 8 == 0, NT, LDA, K, M>(sA, A, k0, m0, tid);\n"
    "    else mlc_gemm_load_tile<BM, BK, A_P, LDA % 8 == 0, NT, LDA, M, K>(sA, A, m0, k0, tid);\n"
    "    if (BNK) mlc_gemm_load_tile<BN, BK, B_P, LDB % 8 == 0, NT, LDB, N, K>(sB, B, n0, k0, tid);\n"
    "    else mlc_gemm_load_tile<BK, BN, B_P, LDB % 8 == 0, NT, LDB, K, N>(sB, B, k0, n0, tid);\n"
    "  }\n"
    "  // The A and B fragments of k-step kk (elements) of a stage, at this lane's ldmatrix addresses.\n"
    "  static MLC_FN void frag(unsigned a_s, unsigned b_s, int kk, unsigned (&af)[FM][4], unsigned (&bf)[FN / 2][4]) {\n"
    "#pragma unroll\n"
    "    for (int i = 0; i < FM; i++) {\n"
    "      if (AKM) mlc_gemm_ldsm_x4_t(af[i], a_s + 2 * (kk * A_P + i * 16));\n"
    "      else mlc_gemm_ldsm_x4(af[i], a_s + 2 * (i * 16 * A_P + kk));\n"
    "    }\n"
    "#pragma unroll\n"
    "    for (int j = 0; j < FN / 2; j++) {\n"
    "      if (BNK) mlc_gemm_ldsm_x4(bf[j], b_s + 2 * (j * 16 * B_P + kk));\n"
    "      else mlc_gemm_ldsm_x4_t(bf[j], b_s + 2 * (kk * B_P + j * 16));\n"
    "    }\n"
    "  }\n"
    "  // The accumulators: acc[i][j][0..3] holds rows m0 + wm*WTM + 16i + g (+8\n"
    "  // for [2],[3]) and columns n0 + wn*WTN + 8j + 2t (+1 for [1],[3]), with\n"
    "  // g = lane / 4, t = lane % 4.\n"
    "  static MLC_FN void mainloop(const T *A_, const T *B_, int tm, int tn, unsigned short *sm, float (&acc)[FM][FN][4]) {\n"
    "    const unsigned short *A = (const unsigned short *)A_, *B = (const unsigned short *)B_;\n"
    "    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;\n"
    "    int wm = warp / WARPS_N, wn = warp % WARPS_N;\n"
    "    long long m0 = (long long)tm * BM, n0 = (long long)tn * BN;\n"
    "    unsigned short *sA = sm, *sB = sm + ST * A_ST;\n"
    "#pragma unroll\n"
    "    for (int i = 0; i < FM; i++)\n"
    "#pragma unroll\n"
    "      for (int j = 0; j < FN; j++)\n"
    "#pragma unroll\n"
    "        for (int e = 0; e < 4; e++) acc[i][j][e] = 0.f;\n"
    "#pragma unroll\n"
    "    for (int s = 0; s < ST - 1; s++) {\n"
    "      if (s < KT) load(sA + s * A_ST, sB + s * B_ST, A, B, m0, n0, s, tid);\n"
    "      mlc_gemm_cp_commit();\n"
    "    }\n"
    "    // ldmatrix lane addresses: lane supplies row r of 8x8 matrix q.\n"
    "    int q = lane >> 3, r = lane & 7;\n"
    "    // A fragments: matrices (mn 0-7,k 0-7), (mn 8-15,k 0-7), (mn 0-7,k 8-15), (mn 8-15,k 8-15)\n"
    "    int a_mn = (q & 1) * 8, a_k = (q >> 1) * 8;\n"
    "    // B fragments (two n8 tiles): (n 0-7,k 0-7), (n 0-7,k 8-15), (n 8-15,k 0-7), (n 8-15,k 8-15)\n"
    "    int b_mn = (q >> 1) * 8, b_k = (q & 1) * 8;\n"
    "    unsigned a_off = AKM ? (unsigned)((a_k + r) * A_P + wm * WTM + a_mn) : (unsigned)((wm * WTM + a_mn + r) * A_P + a_k);\n"
    "    unsigned b_off = BNK ? (unsigned)((wn * WTN + b_mn + r) * B_P + b_k) : (unsigned)((b_k + r) * B_P + wn * WTN + b_mn);\n"
    "    const unsigned a_base = mlc_gemm_smem_u32(sA) + 2 * a_off, b_base = mlc_gemm_smem_u32(sB) + 2 * b_off;\n"
    "    // Software pipeline (as CUTLASS's multistage main loop): the fragments\n"
    "    // of k-step kk+1 are read from shared memory while the mma of step kk\n"
    "    // run; the barrier before the last step of a k-tile makes the next\n"
    "    // stage visible and frees the stage the new cp.async group overwrites.\n"
    "    constexpr int KK = BK / 16;\n"
    "    unsigned af[2][FM][4], bf[2][FN / 2][4];\n"
    "    int rs = 0, ws = ST - 1;\n"
    "    mlc_gemm_cp_wait<ST - 2>();\n"
    "    __syncthreads();\n"
    "    frag(a_base, b_base, 0, af[0], bf[0]);\n"
    "#pragma unroll 1\n"
    "    for (int kt = 0; kt < KT; kt++) {\n"
    "#pragma unroll\n"
    "      for (int kk = 0; kk < KK; kk++) {\n"
    "        if (kk == KK - 1) {\n"
    "          mlc_gemm_cp_wait<ST - 2>();\n"
    "          __syncthreads();\n"
    "          rs = rs + 1 == ST ? 0 : rs + 1;\n"
    "        }\n"
    "        frag(a_base + 2 * rs * A_ST, b_base + 2 * rs * B_ST, (kk + 1) % KK * 16, af[(kk + 1) & 1], bf[(kk + 1) & 1]);\n"
    "        if (kk == 0) {\n"
    "          int nk = kt + ST - 1;\n"
    "          if (nk < KT) load(sA + ws * A_ST, sB + ws * B_ST, A, B, m0, n0, nk, tid);\n"
    "          mlc_gemm_cp_commit();\n"
    "          ws = ws + 1 == ST ? 0 : ws + 1;\n"
    "        }\n"
    "#pragma unroll\n"
    "        for (int i = 0; i < FM; i++)\n"
    "#pragma unroll\n"
    "          for (int j = 0; j < FN; j++) mlc_gemm_mma<T>(acc[i][j], af[kk & 1][i], &bf[kk & 1][j / 2][(j & 1) * 2]);\n"
    "      }\n"
    "    }\n"
    "    mlc_gemm_cp_wait<0>();\n"
    "  }\n"
    "  // Rounds the accumulators to T once and stores them into C (ldc = N).\n"
    "  static MLC_FN void store(T *C, int tm, int tn, float (&acc)[FM][FN][4]) {\n"
    "    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n"
    "    int wm = warp / WARPS_N, wn = warp % WARPS_N;\n"
    "    long long rb = (long long)tm * BM + wm * WTM + (lane >> 2), cb = (long long)tn * BN + wn * WTN + 2 * (lane & 3);\n"
    "#pragma unroll\n"
    "    for (int i = 0; i < FM; i++)\n"
    "#pragma unroll\n"
    "      for (int h = 0; h < 2; h++) {\n"
    "        long long row = rb + i * 16 + h * 8;\n"
    "        if (M % BM == 0 || row < M) {\n"
    "#pragma unroll\n"
    "          for (int j = 0; j < FN; j++) {\n"
    "            long long col = cb + j * 8;\n"
    "            T v0 = from_f32<T>(acc[i][j][2 * h]), v1 = from_f32<T>(acc[i][j][2 * h + 1]);\n"
    "            if (N % 2 == 0) {\n"
    "              if (N % BN == 0 || col < N)\n"
    "                *(unsigned *)(C + row * N + col) = (unsigned)v0.x | (unsigned)v1.x << 16;\n"
    "            } else {\n"
    "              if (col < N) C[row * N + col] = v0;\n"
    "              if (col + 1 < N) C[row * N + col + 1] = v1;\n"
    "            }\n"
    "          }\n"
    "        }\n"
    "      }\n"
    "  }\n"
    "  static MLC_FN void run(const T *A, const T *B, T *C, int tm, int tn, unsigned char *sm) {\n"
    "    float acc[FM][FN][4];\n"
    "    mainloop(A, B, tm, tn, (unsigned short *)sm, acc);\n"
    "    store(C, tm, tn, acc);\n"
    "  }\n"
    "};\n"
    "// f32: exact FMAs on the SIMT cores.  A 16 x 16 thread grid, each thread\n"
    "// TM x TN outputs strided by 16 (rows ty + 16i, columns tx + 16j); BK-deep\n"
    "// k-steps through shared memory held k-major (As[k][m], Bs[k][n]), loaded\n"
    "// through registers one step ahead.\n"
    "template <int TM, int TN, int BK, bool AKM, bool BNK, long long M, long long N, long long K>\n"
    "struct mlc_gemm_f32 {\n"
    "  static constexpr int BM = 16 * TM, BN = 16 * TN, NT = 256;\n"
    "  static constexpr int LA = BM * BK / NT, LB = BN * BK / NT;\n"
    "  static constexpr int SMEM = 2 * BK * (BM + BN) * 4;\n"
    "  static constexpr long long LDA = AKM ? M : K, LDB = BNK ? K : N;\n"
    "  // element e of this thread's share of the A tile: (m, k) in the tile\n"
    "  static MLC_FN void a_at(int e, int tid, int &m, int &k) {\n"
    "    int idx = tid + e * NT;\n"
    "    if (AKM) { k = idx / BM; m = idx % BM; } else { m = idx / BK; k = idx % BK; }\n"
    "  }\n"
    "  static MLC_FN void b_at(int e, int tid, int &n, int &k) {\n"
    "    int idx = tid + e * NT;\n"
    "    if (BNK) { n = idx / BK; k = idx % BK; } else { k = idx / BN; n = idx % BN; }\n"
    "  }\n"
    "  static MLC_FN void run(const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ C, int tm, int tn,\n"
    "                         unsigned char *smraw) {\n"
    "    float *sm = (float *)smraw;\n"
    "    int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;\n"
    "    long long m0 = (long long)tm * BM, n0 = (long long)tn * BN;\n"
    "    float acc[TM][TN];\n"
    "#pragma unroll\n"
    "    for (int i = 0; i < TM; i++)\n"
    "#pragma unroll\n"
    "      for (int j = 0; j < TN; j++) acc[i][j] = 0.f;\n"
    "    float ra[LA], rb[LB];\n"
    "    constexpr int KT = (int)((K + BK - 1) / BK);\n"
    "    auto fetch = [&](int kt) {\n"
    "#pragma unroll\n"
    "      for (int e = 0; e < LA; e++) {\n"
    "        int m, k;\n"
    "        a_at(e, tid, m, k);\n"
    "        long long gm = m0 + m, gk = (long long)kt * BK + k;\n"
    "        ra[e] = gm < M && gk < K ? A[AKM ? gk * LDA + gm : gm * LDA + gk] : 0.f;\n"
    "      }\n"
    "#pragma unroll\n"
    "      for (int e = 0; e < LB; e++) {\n"
    "        int n, k;\n"
    "        b_at(e, tid, n, k);\n"
    "        long long gn = n0 + n, gk = (long long)kt * BK + k;\n"
    "        rb[e] = gn < N && gk < K ? B[BNK ? gn * LDB + gk : gk * LDB + gn] : 0.f;\n"
    "      }\n"
    "    };\n"
    "    auto put = [&](int buf) {\n"
    "      float *As = sm + buf * BK * (BM + BN), *Bs = As + BK * BM;\n"
    "#pragma unroll\n"
    "      for (int e = 0; e < LA; e++) {\n"
    "        int m, k;\n"
    "        a_at(e, tid, m, k);\n"
    "        As[k * BM + m] = ra[e];\n"
    "      }\n"
    "#pragma unroll\n"
    "      for (int e = 0; e < LB; e++) {\n"
    "        int n, k;\n"
    "        b_at(e, tid, n, k);\n"
    "        Bs[k * BN + n] = rb[e];\n"
    "      }\n"
    "    };\n"
    "    fetch(0);\n"
    "    put(0);\n"
    "    __syncthreads();\n"
    "#pragma unroll 1\n"
    "    for (int kt = 0; kt < KT; kt++) {\n"
    "      if (kt + 1 < KT) fetch(kt + 1);\n"
    "      const float *As = sm + (kt & 1) * BK * (BM + BN), *Bs = As + BK * BM;\n"
    "#pragma unroll\n"
    "      for (int k = 0; k < BK; k++) {\n"
    "        float a[TM], b[TN];\n"
    "#pragma unroll\n"
    "        for (int i = 0; i < TM; i++) a[i] = As[k * BM + ty + 16 * i];\n"
    "#pragma unroll\n"
    "        for (int j = 0; j < TN; j++) b[j] = Bs[k * BN + tx + 16 * j];\n"
    "#pragma unroll\n"
    "        for (int i = 0; i < TM; i++)\n"
    "#pragma unroll\n"
    "          for (int j = 0; j < TN; j++) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);\n"
    "      }\n"
    "      if (kt + 1 < KT) put((kt + 1) & 1);\n"
    "      __syncthreads();\n"
    "    }\n"
    "#pragma unroll\n"
    "    for (int i = 0; i < TM; i++) {\n"
    "      long long row = m0 + ty + 16 * i;\n"
    "      if (M % BM == 0 || row < M)\n"
    "#pragma unroll\n"
    "        for (int j = 0; j < TN; j++) {\n"
    "          long long col = n0 + tx + 16 * j;\n"
    "          if (N % BN == 0 || col < N) C[row * N + col] = acc[i][j];\n"
    "        }\n"
    "    }\n"
    "  }\n"
    "};\n";

#define GEMM_SMS 132 /* multiprocessors of an H100/H200; only steers the tile choice */
#define GEMM_GROUP 8 /* tile-rows per rasterisation group */

static int64_t gemm_batch(const gemm_desc *d) {
  int64_t b = 1;
  for (int i = 0; i < d->nb; i++) b *= d->bdim[i];
  return b;
}

static int64_t gemm_tiles(const gemm_desc *d, int bm, int bn) {
  return gemm_batch(d) * cc_ceil_div(d->M, bm) * cc_ceil_div(d->N, bn);
}

static int64_t gemm_smem(const gemm_desc *d, const gemm_cfg *g) {
  if (!g->tc) return 2 * (int64_t)g->bk * 16 * (g->tm + g->tn) * 4;
  int64_t a = d->a_km ? (int64_t)g->bk * (g->bm + 8) : (int64_t)g->bm * (g->bk + 8);
  int64_t b = d->b_nk ? (int64_t)g->bn * (g->bk + 8) : (int64_t)g->bk * (g->bn + 8);
  return g->st * (a + b) * 2;
}

static gemm_cfg gemm_pick(const gemm_desc *d) {
  if (d->dt == MLC_DT_F32) {
    if (gemm_tiles(d, 128, 128) >= GEMM_SMS) return (gemm_cfg){.tm = 8, .tn = 8, .bk = 8};
    return (gemm_cfg){.tm = 4, .tn = 4, .bk = 16};
  }
  if (gemm_tiles(d, 128, 256) >= 2 * GEMM_SMS && d->N >= 256)
    return (gemm_cfg){.tc = true, .bm = 128, .bn = 256, .bk = 32, .wm = 2, .wn = 4, .st = 4};
  if (gemm_tiles(d, 128, 128) >= GEMM_SMS)
    return (gemm_cfg){.tc = true, .bm = 128, .bn = 128, .bk = 32, .wm = 2, .wn = 4, .st = 4};
  return (gemm_cfg){.tc = true, .bm = 64, .bn = 64, .bk = 32, .wm = 2, .wn = 2, .st = 3};
}

/* Emits the one launch of d with configuration g. */
static void gemm_emit_cfg(cc *c, const gemm_desc *d, const gemm_cfg *g) {
  int bm = g->tc ? g->bm : 16 * g->tm, bn = g->tc ? g->bn : 16 * g->tn;
  int64_t tmn = cc_ceil_div(d->M, bm), tnn = cc_ceil_div(d->N, bn), batch = gemm_batch(d);
  uint32_t threads = g->tc ? (uint32_t)(g->wm * g->wn * 32) : 256;
  cc_begin(c, (uint64_t)(batch * tmn * tnn), threads, (uint32_t)gemm_smem(d, g));
  const char *T = cc_stype(d->dt);
  cc_printf(c, "  extern __shared__ __align__(16) unsigned char mlc_gemm_sm[];\n");
  if (g->tc)
    cc_printf(c, "  typedef mlc_gemm_tc<%s, %d, %d, %d, %d, %d, %d, %s, %s, %lldLL, %lldLL, %lldLL> G;\n", T, g->bm,
              g->bn, g->bk, g->wm, g->wn, g->st, d->a_km ? "true" : "false", d->b_nk ? "true" : "false",
              (long long)d->M, (long long)d->N, (long long)d->K);
  else
    cc_printf(c, "  typedef mlc_gemm_f32<%d, %d, %d, %s, %s, %lldLL, %lldLL, %lldLL> G;\n", g->tm, g->tn, g->bk,
              d->a_km ? "true" : "false", d->b_nk ? "true" : "false", (long long)d->M, (long long)d->N,
              (long long)d->K);
  cc_printf(c, "  unsigned t = blockIdx.x;\n");
  const char *oa = "0", *ob = "0", *oc = "0";
  if (batch > 1) {
    cc_printf(c, "  long long b = t / %lldu;\n  t %%= %lldu;\n", (long long)(tmn * tnn), (long long)(tmn * tnn));
    cc_printf(c, "  long long oa = 0, ob = 0, q = b, i;\n");
    for (int k = d->nb - 1; k >= 0; k--) {
      if (d->bdim[k] == 1) continue;
      cc_printf(c, "  i = q %% %lld; q /= %lld;", (long long)d->bdim[k], (long long)d->bdim[k]);
      if (d->bsa[k]) cc_printf(c, " oa += i * %lldLL;", (long long)d->bsa[k]);
      if (d->bsb[k]) cc_printf(c, " ob += i * %lldLL;", (long long)d->bsb[k]);
      cc_printf(c, "\n");
    }
    oa = "oa", ob = "ob", oc = cc_fmt(c, "b * %lldLL", (long long)(d->M * d->N));
  }
  cc_printf(c, "  int tm, tn;\n  mlc_gemm_raster<%lld, %lld, %d>(t, tm, tn);\n", (long long)tmn, (long long)tnn,
            GEMM_GROUP);
  cc_printf(c, "  G::run(in0 + %s, in1 + %s, out + %s, tm, tn, mlc_gemm_sm);\n", oa, ob, oc);
  cc_end(c);
}

/* The descriptor of a MATMUL or LINEAR node. */
static bool gemm_desc_of(cc *c, gemm_desc *d) {
  const mlc_type *a = cc_in(c, 0), *b = cc_in(c, 1), *o = cc_outt(c);
  memset(d, 0, sizeof *d);
  d->dt = o->dtype;
  if (d->dt != MLC_DT_F32 && d->dt != MLC_DT_BF16 && d->dt != MLC_DT_F16)
    return cc_fail(c, "no CUDA GEMM for dtype %s", mlc_dtype_name((mlc_dtype)d->dt));
  if (c->n->op == MLC_OP_LINEAR) {
    d->K = b->dim[1];
    d->N = b->dim[0];
    d->M = d->K ? mlc_type_numel(a) / d->K : 0;
    if (!d->K) { /* no elements to sum: M is x's leading dims */
      d->M = 1;
      for (int i = 0; i + 1 < a->rank; i++) d->M *= a->dim[i];
    }
    d->b_nk = true;
    return true;
  }
  d->M = a->dim[a->rank - 2];
  d->K = a->dim[a->rank - 1];
  d->N = b->dim[b->rank - 1];
  d->nb = o->rank - 2;
  int64_t sa = d->M * d->K, sb = d->K * d->N;
  bool b_shared = true, a_full = true;
  for (int i = d->nb - 1; i >= 0; i--) {
    int ia = i - (o->rank - a->rank), ib = i - (o->rank - b->rank);
    int64_t da = ia >= 0 ? a->dim[ia] : 1, db = ib >= 0 ? b->dim[ib] : 1;
    d->bdim[i] = o->dim[i];
    d->bsa[i] = da == 1 ? 0 : sa;
    d->bsb[i] = db == 1 ? 0 : sb;
    if (d->bsb[i] && o->dim[i] > 1) b_shared = false;
    if (da != o->dim[i]) a_full = false;
    sa *= da;
    sb *= db;
  }
  if (b_shared && a_full) { /* one B for all: the batch is more rows of A */
    d->M *= gemm_batch(d);
    d->nb = 0;
  }
  return true;
}

static bool gemm_emit(cc *c, const gemm_desc *d) {
  gemm_cfg g = gemm_pick(d);
  gemm_emit_cfg(c, d, &g);
  return true;
}

bool cc_emit_gemm(cc *c) {
  gemm_desc d;
  if (!gemm_desc_of(c, &d)) return false;
  return gemm_emit(c, &d);
}
