/* Tests of msl_emu.hpp against documented Metal semantics, with exact values.
 *
 *   g++ -std=c++17 -O2 -Wall -Wextra -Werror -pthread tests/metal/test_msl_emu.cpp -o test_msl_emu
 *   clang++ (same flags)
 *
 * Prints one line per check, then "N passed, N failed"; exits non-zero on
 * any failure.  The kernels are written as mlc emits MSL (kernel, device,
 * threadgroup, __shared__, MLC_* attribute macros), so this also checks that
 * the header accepts that spelling. */
#include "msl_emu.hpp"

static int g_pass, g_fail;
static const char *g_mode = "";
static void check(bool ok, const char *name, const std::string &detail = std::string()) {
  if (ok) g_pass++; else g_fail++;
  std::printf("%s  %s%s%s%s\n", ok ? "PASS" : "FAIL", g_mode, name, detail.empty() ? "" : "  -- ", detail.c_str());
}
static std::string fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static std::string fmt(const char *f, ...) {
  char b[512];
  va_list ap;
  va_start(ap, f);
  std::vsnprintf(b, sizeof b, f, ap);
  va_end(ap);
  return b;
}
static double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/* Wraps a kernel taking the standard mlc builtins into a dispatch body. */
#define LAUNCH(grid, tg, smem, call)                                                                \
  mlc_emu::dispatch(grid, tg, smem, [&](uint3 tid, uint3 bid, uint3 bdim, uint lane, uint sid,     \
                                        uchar *tgm) { (void)tid; (void)bid; (void)bdim; (void)lane; \
                                                      (void)sid; (void)tgm; call; })

/* ============================================================ barriers */
/* 8 rounds: write a threadgroup slot, barrier, read another thread's slot,
 * barrier.  Any missed write shows up as a wrong sum. */
kernel void k_barrier_rounds(device uint *out MLC_BUFFER(0), uint3 tid MLC_TID, uint3 bid MLC_BID,
                             uint3 bdim MLC_BDIM) {
  __shared__ uint sh[256];
  uint n = bdim.x, t = tid.x;
  uint acc = 0;
  for (uint r = 0; r < 8; r++) {
    sh[t] = bid.x * 100000u + r * 1000u + t;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    acc += sh[(t * 7u + 3u + r * 31u) % n];
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  out[bid.x * n + t] = acc;
}

/* device-memory ordering: write out[], barrier(mem_device), read a neighbour's */
kernel void k_barrier_device(device uint *buf MLC_BUFFER(0), device uint *out MLC_BUFFER(1), uint3 tid MLC_TID,
                             uint3 bid MLC_BID, uint3 bdim MLC_BDIM) {
  uint base = bid.x * bdim.x;
  buf[base + tid.x] = bid.x * 7u + tid.x * tid.x;
  threadgroup_barrier(mem_flags::mem_device | mem_flags::mem_threadgroup);
  out[base + tid.x] = buf[base + (bdim.x - 1u - tid.x)];
}

/* 3-D threadgroups and grids: every thread of the grid runs exactly once,
 * with x-fastest numbering and SIMD-groups of 32 consecutive linear ids. */
kernel void k_ids(device uint *hits MLC_BUFFER(0), device uint *bad MLC_BUFFER(1), uint3 tid MLC_TID,
                  uint3 bid MLC_BID, uint3 bdim MLC_BDIM, uint lane MLC_SIMD_LANE, uint sid MLC_SIMD_ID,
                  uint3 grid) {
  uint lin = tid.x + bdim.x * (tid.y + bdim.y * tid.z);
  uint g = bid.x + grid.x * (bid.y + grid.y * bid.z);
  uint n = bdim.x * bdim.y * bdim.z;
  if (lane != lin % 32u || sid != lin / 32u) bad[0] = 1u;
  hits[g * n + lin] += 1u; /* each slot owned by one thread */
}

/* dynamic threadgroup memory: block sum through tgmem */
kernel void k_tgmem_sum(device const int *in MLC_BUFFER(0), device int *out MLC_BUFFER(1), uint3 tid MLC_TID,
                        uint3 bid MLC_BID, uint3 bdim MLC_BDIM, threadgroup uchar *tgm MLC_TGMEM(0)) {
  threadgroup int *s = (threadgroup int *)tgm;
  s[tid.x] = in[bid.x * bdim.x + tid.x];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (uint h = bdim.x / 2; h > 0; h /= 2) {
    if (tid.x < h) s[tid.x] += s[tid.x + h];
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  if (tid.x == 0) out[bid.x] = s[0];
}

static void test_barriers() {
  const uint G = 64, N = 256;
  std::vector<uint> out(G * N);
  LAUNCH(uint3(G, 1, 1), uint3(N, 1, 1), 0, k_barrier_rounds(out.data(), tid, bid, bdim));
  uint bad = 0;
  for (uint b = 0; b < G; b++)
    for (uint t = 0; t < N; t++) {
      uint acc = 0;
      for (uint r = 0; r < 8; r++) acc += b * 100000u + r * 1000u + (t * 7u + 3u + r * 31u) % N;
      bad += out[b * N + t] != acc;
    }
  check(bad == 0, "threadgroup_barrier: threadgroup writes visible after barrier (64 groups x 256, 8 rounds)",
        fmt("%u wrong", bad));

  std::vector<uint> buf(G * N), o2(G * N);
  LAUNCH(uint3(G, 1, 1), uint3(N, 1, 1), 0, k_barrier_device(buf.data(), o2.data(), tid, bid, bdim));
  bad = 0;
  for (uint b = 0; b < G; b++)
    for (uint t = 0; t < N; t++) bad += o2[b * N + t] != b * 7u + (N - 1 - t) * (N - 1 - t);
  check(bad == 0, "threadgroup_barrier(mem_device|mem_threadgroup): device writes visible", fmt("%u wrong", bad));

  uint3 grid(3, 2, 2), tg(8, 4, 4);
  std::vector<uint> hits(12 * 128), badf(1);
  LAUNCH(grid, tg, 0, k_ids(hits.data(), badf.data(), tid, bid, bdim, lane, sid, grid));
  bool once = std::all_of(hits.begin(), hits.end(), [](uint h) { return h == 1u; });
  check(once && !badf[0], "3-D grid (3,2,2) x threadgroup (8,4,4): each thread once, lane/simd from x-fastest id");

  const uint G2 = 37, N2 = 512;
  std::vector<int> in(G2 * N2), bs(G2);
  for (uint i = 0; i < G2 * N2; i++) in[i] = (int)(i * 2654435761u % 1000u) - 500;
  LAUNCH(uint3(G2, 1, 1), uint3(N2, 1, 1), N2 * sizeof(int), k_tgmem_sum(in.data(), bs.data(), tid, bid, bdim, tgm));
  bad = 0;
  for (uint b = 0; b < G2; b++) {
    int s = 0;
    for (uint t = 0; t < N2; t++) s += in[b * N2 + t];
    bad += bs[b] != s;
  }
  check(bad == 0, "dynamic threadgroup memory: tree sum over 512 threads, 37 groups", fmt("%u wrong", bad));
  uintptr_t align = 0;
  LAUNCH(uint3(1, 1, 1), uint3(32, 1, 1), 5, if (tid.x == 0) align = (uintptr_t)tgm);
  check(align % 16 == 0, "tgmem is 16-byte aligned");
}

/* ============================================================ SIMD-groups */
struct simd_res {
  int sum_lane, sum_grp, max_i, min_i, pre;
  uint xor1, xor2, xor4, xor8, xor16, xor31, bc, down3, up5, shuf;
  float fsum, fmaxv, fshuf;
};
kernel void k_simd(device simd_res *out MLC_BUFFER(0), uint3 tid MLC_TID, uint lane MLC_SIMD_LANE,
                   uint sid MLC_SIMD_ID) {
  simd_res r;
  r.sum_lane = simd_sum((int)lane);
  r.sum_grp = simd_sum((int)(sid * 100u + lane));
  r.max_i = simd_max((int)lane * 3 - 40);
  r.min_i = simd_min((int)lane * 3 - 40);
  r.pre = simd_prefix_exclusive_sum((int)lane);
  r.xor1 = simd_shuffle_xor(lane, 1);
  r.xor2 = simd_shuffle_xor(lane, 2);
  r.xor4 = simd_shuffle_xor(lane, 4);
  r.xor8 = simd_shuffle_xor(lane, 8);
  r.xor16 = simd_shuffle_xor(lane, 16);
  r.xor31 = simd_shuffle_xor(lane + sid * 1000u, 31);
  r.bc = simd_broadcast(lane * 3u + sid, 5);
  r.down3 = simd_shuffle_down(lane, 3);
  r.up5 = simd_shuffle_up(lane, 5);
  r.shuf = simd_shuffle(lane, (ushort)(31u - lane));
  r.fsum = simd_sum(0.5f * (float)lane);
  r.fmaxv = simd_max(-(float)lane);
  r.fshuf = simd_shuffle_xor(0.25f * (float)lane, 7);
  out[tid.x] = r;
}

/* warp-style reduction with shuffle_down then a cross-SIMD step via simd_barrier-free tg memory */
kernel void k_simd_reduce(device const float *in MLC_BUFFER(0), device float *out MLC_BUFFER(1), uint3 tid MLC_TID,
                          uint3 bid MLC_BID, uint3 bdim MLC_BDIM, uint lane MLC_SIMD_LANE, uint sid MLC_SIMD_ID) {
  __shared__ float part[32];
  float v = in[bid.x * bdim.x + tid.x];
  for (ushort d = 16; d > 0; d /= 2) v += simd_shuffle_down(v, d);
  if (lane == 0) part[sid] = v;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (sid == 0) {
    float w = lane < bdim.x / 32 ? part[lane] : 0.0f;
    w = simd_sum(w);
    if (lane == 0) out[bid.x] = w;
  }
}

static void test_simd() {
  const uint N = 256;
  std::vector<simd_res> out(N);
  LAUNCH(uint3(3, 1, 1), uint3(N, 1, 1), 0, k_simd(out.data(), tid, lane, sid));
  int bad_sum = 0, bad_grp = 0, bad_mm = 0, bad_pre = 0, bad_xor = 0, bad_bc = 0, bad_down = 0, bad_up = 0,
      bad_shuf = 0, bad_f = 0;
  for (uint t = 0; t < N; t++) {
    const simd_res &r = out[t];
    uint l = t % 32, s = t / 32;
    bad_sum += r.sum_lane != 496;
    bad_grp += r.sum_grp != (int)(s * 3200u + 496u);
    bad_mm += r.max_i != 31 * 3 - 40 || r.min_i != -40;
    bad_pre += r.pre != (int)(l * (l - 1) / 2 + (l == 0 ? 0 : 0));
    bad_xor += r.xor1 != (l ^ 1) || r.xor2 != (l ^ 2) || r.xor4 != (l ^ 4) || r.xor8 != (l ^ 8) ||
               r.xor16 != (l ^ 16) || r.xor31 != (l ^ 31) + s * 1000u;
    bad_bc += r.bc != 15u + s;
    bad_down += r.down3 != (l < 29 ? l + 3 : l);
    bad_up += r.up5 != (l >= 5 ? l - 5 : l);
    bad_shuf += r.shuf != 31 - l;
    bad_f += r.fsum != 248.0f || r.fmaxv != 0.0f || r.fshuf != 0.25f * (float)(l ^ 7);
  }
  check(bad_sum == 0, "simd_sum(lane) == 496 in every SIMD-group of a 256-thread group (width 32)",
        fmt("%d wrong, lane0 got %d", bad_sum, out[0].sum_lane));
  check(bad_grp == 0, "simd_sum stays inside its SIMD-group (simd_id*3200 + 496)", fmt("%d wrong", bad_grp));
  check(bad_mm == 0, "simd_max / simd_min (int)", fmt("%d wrong", bad_mm));
  check(bad_pre == 0, "simd_prefix_exclusive_sum(lane) == lane*(lane-1)/2", fmt("%d wrong", bad_pre));
  check(bad_xor == 0, "simd_shuffle_xor masks 1,2,4,8,16,31", fmt("%d wrong", bad_xor));
  check(bad_bc == 0, "simd_broadcast(v, 5)", fmt("%d wrong", bad_bc));
  check(bad_down == 0, "simd_shuffle_down(lane, 3): upper 3 lanes keep their value", fmt("%d wrong", bad_down));
  check(bad_up == 0, "simd_shuffle_up(lane, 5): lower 5 lanes keep their value", fmt("%d wrong", bad_up));
  check(bad_shuf == 0, "simd_shuffle(v, 31 - lane)", fmt("%d wrong", bad_shuf));
  check(bad_f == 0, "float simd_sum / simd_max / simd_shuffle_xor", fmt("%d wrong", bad_f));

  const uint G = 50, T = 1024;
  std::vector<float> in(G * T), o(G);
  for (uint i = 0; i < G * T; i++) in[i] = (float)((int)(i % 97u) - 48);
  LAUNCH(uint3(G, 1, 1), uint3(T, 1, 1), 0, k_simd_reduce(in.data(), o.data(), tid, bid, bdim, lane, sid));
  int bad = 0;
  for (uint b = 0; b < G; b++) {
    float s = 0;
    for (uint t = 0; t < T; t++) s += in[b * T + t];
    bad += o[b] != s;
  }
  check(bad == 0, "shuffle_down tree + simd_sum block reduction, 1024-thread groups", fmt("%d wrong", bad));
}

/* ============================================================ simdgroup_matrix */
struct lane_elems { float e0, e1; };
kernel void k_mat_layout(device const float *a MLC_BUFFER(0), device lane_elems *out MLC_BUFFER(1), uint lane MLC_SIMD_LANE,
                         uint sid MLC_SIMD_ID) {
  simdgroup_float8x8 m;
  simdgroup_load(m, a + sid * 64, 8);
  float2 e = m.thread_elements();
  out[sid * 32 + lane] = lane_elems{e.x, e.y};
}

kernel void k_mat_mma(device const float *a MLC_BUFFER(0), device const float *b MLC_BUFFER(1),
                      device const float *c MLC_BUFFER(2), device float *d MLC_BUFFER(3), device float *ia MLC_BUFFER(4),
                      device float *ai MLC_BUFFER(5), device float *ab MLC_BUFFER(6), device float *at MLC_BUFFER(7),
                      device float *big MLC_BUFFER(8), uint sid MLC_SIMD_ID) {
  /* each SIMD-group of the threadgroup works on its own matrices */
  const device float *A = a + sid * 64, *B = b + sid * 64, *C = c + sid * 64;
  simdgroup_float8x8 ma, mb, mc, md, id = simdgroup_float8x8(1.0f);
  simdgroup_load(ma, A, 8);
  simdgroup_load(mb, B, 8);
  simdgroup_load(mc, C, 8);
  simdgroup_multiply_accumulate(md, ma, mb, mc);
  simdgroup_store(md, d + sid * 64, 8);
  simdgroup_multiply(md, id, ma);
  simdgroup_store(md, ia + sid * 64, 8);
  simdgroup_multiply(md, ma, id);
  simdgroup_store(md, ai + sid * 64, 8);
  /* accumulate in place: mc = a*b + mc, twice */
  simdgroup_float8x8 acc = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
  simdgroup_multiply_accumulate(acc, ma, mb, acc);
  simdgroup_multiply_accumulate(acc, ma, mb, acc);
  simdgroup_store(acc, ab + sid * 64, 8);
  simdgroup_float8x8 mt;
  simdgroup_load(mt, A, 8, ulong2(0, 0), true);
  simdgroup_store(mt, at + sid * 64, 8);
  /* origin: place ma in the lower-right 8x8 block of a 16x16 buffer */
  simdgroup_store(ma, big + sid * 256, 16, ulong2(8, 8));
  simdgroup_float8x8 back;
  simdgroup_load(back, big + sid * 256, 16, ulong2(8, 8));
  simdgroup_store(back, big + sid * 256, 16, ulong2(0, 0));
}

kernel void k_mat_half(device const half *a MLC_BUFFER(0), device const half *b MLC_BUFFER(1),
                       device half *d MLC_BUFFER(2), device half *fill MLC_BUFFER(3), uint3 tid MLC_TID) {
  simdgroup_half8x8 ma, mb, md;
  simdgroup_load(ma, a, 8);
  simdgroup_load(mb, b, 8, ulong2(0, 0), true);
  simdgroup_multiply(md, ma, mb);
  simdgroup_store(md, d, 8);
  simdgroup_half8x8 f = make_filled_simdgroup_matrix<half, 8, 8>(half(1.5f));
  simdgroup_store(f, fill, 8);
  (void)tid;
}

static void test_matrix() {
  const uint S = 4; /* SIMD-groups per threadgroup */
  std::mt19937 rng(12345);
  std::uniform_int_distribution<int> dist(-8, 8);
  std::vector<float> A(S * 64), B(S * 64), C(S * 64);
  for (uint i = 0; i < S * 64; i++) {
    A[i] = (float)dist(rng) * 0.5f;
    B[i] = (float)dist(rng) * 0.25f;
    C[i] = (float)dist(rng);
  }
  std::vector<float> lin(S * 64);
  for (uint i = 0; i < S * 64; i++) lin[i] = (float)(i % 64) + 1000.0f * (float)(i / 64);
  std::vector<lane_elems> le(S * 32);
  LAUNCH(uint3(1, 1, 1), uint3(S * 32, 1, 1), 0, k_mat_layout(lin.data(), le.data(), lane, sid));
  int bad = 0;
  for (uint s = 0; s < S; s++)
    for (uint l = 0; l < 32; l++) {
      uint q = l / 4, row = (q & 4) + (l / 2) % 4, col = (q & 2) * 2 + (l % 2) * 2;
      float e0 = (float)(row * 8 + col) + 1000.0f * (float)s;
      bad += le[s * 32 + l].e0 != e0 || le[s * 32 + l].e1 != e0 + 1.0f;
    }
  check(bad == 0, "thread_elements(): lane holds (row,col),(row,col+1), row=(q&4)+(lane/2)%4, col=(q&2)*2+(lane%2)*2",
        fmt("%d wrong; lane 1 holds %g,%g", bad, (double)le[1].e0, (double)le[1].e1));
  {
    std::vector<int> seen(64, 0);
    for (uint l = 0; l < 32; l++) { seen[(int)le[l].e0]++; seen[(int)le[l].e1]++; }
    check(std::all_of(seen.begin(), seen.end(), [](int v) { return v == 1; }),
          "simdgroup_matrix: the 64 elements are spread over the 32 lanes, 2 each, no overlap");
  }

  std::vector<float> D(S * 64), IA(S * 64), AI(S * 64), AB(S * 64), AT(S * 64), BIG(S * 256, -1.0f);
  LAUNCH(uint3(2, 1, 1), uint3(S * 32, 1, 1), 0,
         k_mat_mma(A.data(), B.data(), C.data(), D.data(), IA.data(), AI.data(), AB.data(), AT.data(), BIG.data(), sid));
  int bd = 0, bi = 0, bab = 0, bt = 0, bbig = 0;
  for (uint s = 0; s < S; s++) {
    const float *a = &A[s * 64], *b = &B[s * 64], *c = &C[s * 64];
    for (uint r = 0; r < 8; r++)
      for (uint k = 0; k < 8; k++) {
        float p = 0;
        for (uint i = 0; i < 8; i++) p += a[r * 8 + i] * b[i * 8 + k];
        bd += D[s * 64 + r * 8 + k] != p + c[r * 8 + k];
        bab += AB[s * 64 + r * 8 + k] != 2.0f * p;
        bi += IA[s * 64 + r * 8 + k] != a[r * 8 + k] || AI[s * 64 + r * 8 + k] != a[r * 8 + k];
        bt += AT[s * 64 + r * 8 + k] != a[k * 8 + r];
        const float *bg = &BIG[s * 256];
        bbig += bg[(8 + r) * 16 + 8 + k] != a[r * 8 + k] || bg[r * 16 + k] != a[r * 8 + k] ||
                bg[r * 16 + 8 + k] != -1.0f || bg[(8 + r) * 16 + k] != -1.0f;
      }
  }
  check(bd == 0, "simdgroup_multiply_accumulate: D = A*B + C exact vs reference (4 SIMD-groups, random)",
        fmt("%d wrong", bd));
  check(bi == 0, "simdgroup_multiply with diagonal matrix simdgroup_float8x8(1.0f): I*A == A*I == A",
        fmt("%d wrong", bi));
  check(bab == 0, "multiply_accumulate with d aliasing c accumulates (2*A*B)", fmt("%d wrong", bab));
  check(bt == 0, "simdgroup_load(transpose_matrix = true) gives A^T", fmt("%d wrong", bt));
  check(bbig == 0, "simdgroup_store/load with elements_per_row 16 and origin (8,8)", fmt("%d wrong", bbig));

  std::vector<half> ha(64), hb(64), hd(64), hf(64);
  for (uint i = 0; i < 64; i++) { ha[i] = half((float)dist(rng)); hb[i] = half((float)dist(rng) * 0.125f); }
  LAUNCH(uint3(1, 1, 1), uint3(32, 1, 1), 0, k_mat_half(ha.data(), hb.data(), hd.data(), hf.data(), tid));
  bad = 0;
  for (uint r = 0; r < 8; r++)
    for (uint k = 0; k < 8; k++) {
      float p = 0;
      for (uint i = 0; i < 8; i++) p += (float)ha[r * 8 + i] * (float)hb[k * 8 + i]; /* B loaded transposed */
      bad += hd[r * 8 + k].bits != half(p).bits || hf[r * 8 + k] != 1.5f;
    }
  check(bad == 0, "simdgroup_half8x8: multiply (B transposed) and make_filled exact", fmt("%d wrong", bad));
}

/* ============================================================ half / bfloat */
static void test_fp16() {
  struct { float f; uint16_t h; const char *what; } hc[] = {
      {1.0f, 0x3c00, "1"},
      {1.0f + 0x1p-11f, 0x3c00, "1+2^-11 (tie) -> 1 (even)"},
      {1.0f + 3 * 0x1p-11f, 0x3c02, "1+3*2^-11 (tie) -> 1+2^-9 (even)"},
      {1.0f + 0x1p-11f + 0x1p-20f, 0x3c01, "just above the tie rounds up"},
      {65504.0f, 0x7bff, "65504 = max half"},
      {65519.99f, 0x7bff, "65519.99 -> 65504"},
      {65520.0f, 0x7c00, "65520 (tie with 2^16) -> inf"},
      {-65520.0f, 0xfc00, "-65520 -> -inf"},
      {1e9f, 0x7c00, "1e9 -> inf"},
      {0x1p-24f, 0x0001, "2^-24 smallest subnormal"},
      {0x1p-25f, 0x0000, "2^-25 (tie) -> 0 (even)"},
      {3 * 0x1p-26f, 0x0001, "1.5*2^-25 -> 2^-24"},
      {3 * 0x1p-25f, 0x0002, "3*2^-25 (tie) -> 2*2^-24 (even)"},
      {0x1p-14f - 0x1p-25f, 0x0400, "2^-14 - 2^-25 (tie) -> smallest normal (even)"},
      {-0.0f, 0x8000, "-0"},
      {INFINITY, 0x7c00, "inf"},
  };
  for (auto &c : hc) {
    uint16_t got = half(c.f).bits;
    check(got == c.h, (std::string("half: ") + c.what).c_str(), fmt("got 0x%04x want 0x%04x", got, c.h));
  }
  check(std::isnan((float)half(NAN)), "half: NaN stays NaN");
  struct { float f; uint16_t b; const char *what; } bc[] = {
      {1.0f, 0x3f80, "1"},
      {1.0f + 0x1p-8f, 0x3f80, "1+2^-8 (tie) -> 1 (even)"},
      {1.0f + 3 * 0x1p-8f, 0x3f82, "1+3*2^-8 (tie) -> 1+2^-6 (even)"},
      {1.0f + 0x1p-8f + 0x1p-23f, 0x3f81, "just above the tie rounds up"},
      {as_type<float>(0x7f7fffffu), 0x7f80, "FLT_MAX -> inf"},
      {as_type<float>(0x7f7f7fffu), 0x7f7f, "just below the tie keeps max bfloat"},
      {-2.0f, 0xc000, "-2"},
      {as_type<float>(0x00018000u), 0x0002, "subnormal tie -> even"},
  };
  for (auto &c : bc) {
    uint16_t got = bfloat(c.f).bits;
    check(got == c.b, (std::string("bfloat: ") + c.what).c_str(), fmt("got 0x%04x want 0x%04x", got, c.b));
  }
  check(std::isnan((float)bfloat(NAN)), "bfloat: NaN stays NaN");

  /* exhaustive: every finite value round-trips, and the midpoint to the next
   * value (and one float ulp either side) rounds as RNE demands */
  int bad_h = 0, bad_b = 0;
  for (uint32_t k = 0; k < 0x7bff; k++) { /* the last finite value's neighbour is inf */
    float v = (float)half::from_bits((uint16_t)k), nx = (float)half::from_bits((uint16_t)(k + 1));
    if (half(v).bits != k || half(-v).bits != (k | 0x8000u)) bad_h++;
    float mid = v + (nx - v) * 0.5f; /* exact in float */
    uint16_t even = (k & 1) ? (uint16_t)(k + 1) : (uint16_t)k;
    if (half(mid).bits != even) bad_h++;
    if (half(std::nextafter(mid, 0.0f)).bits != k) bad_h++;
    if (half(std::nextafter(mid, INFINITY)).bits != k + 1) bad_h++;
  }
  for (uint32_t k = 0; k < 0x7f7f; k++) {
    float v = (float)bfloat::from_bits((uint16_t)k), nx = (float)bfloat::from_bits((uint16_t)(k + 1));
    if (bfloat(v).bits != k) bad_b++;
    float mid = v + (nx - v) * 0.5f;
    uint16_t even = (k & 1) ? (uint16_t)(k + 1) : (uint16_t)k;
    if (bfloat(mid).bits != even) bad_b++;
    if (bfloat(std::nextafter(mid, 0.0f)).bits != k) bad_b++;
    if (bfloat(std::nextafter(mid, INFINITY)).bits != k + 1) bad_b++;
  }
  check(bad_h == 0, "half: exhaustive round-trip and RNE at every midpoint", fmt("%d wrong", bad_h));
  check(bad_b == 0, "bfloat: exhaustive round-trip and RNE at every midpoint", fmt("%d wrong", bad_b));

  half a = half(2048.0f), one = half(1.0f);
  check((a + one).bits == half(2048.0f).bits && (half(2048.0f) + half(3.0f)).bits == half(2052.0f).bits,
        "half arithmetic rounds each result to half (2048+1 = 2048, 2048+3 = 2052)");
  check(std::is_same<decltype(a + 1.0f), float>::value && std::is_same<decltype(a * 2), half>::value &&
            std::is_same<decltype(a + one), half>::value,
        "half op float -> float, half op int -> half, half op half -> half");
  check(as_type<uint>(1.0f) == 0x3f800000u && as_type<half>((ushort)0x3c00) == 1.0f &&
            as_type<float>(0x40490fdbu) == 3.14159274f,
        "as_type<T> is a bit cast");
  float4 v4(1.0f, 2.0f, 3.0f, 4.0f);
  float4 w4 = v4 * 2.0f + float4(1.0f);
  uint2 u2(3u, 4u);
  check(w4.x == 3.0f && w4.y == 5.0f && w4.z == 7.0f && w4.w == 9.0f && w4[2] == 7.0f && u2.x + u2.y == 7u &&
            dot(v4, v4) == 30.0f,
        "vector types: components, arithmetic, broadcast, dot");
  check(metal::exp(0.0f) == 1.0f && metal::precise::sqrt(16.0f) == 4.0f && rsqrt(4.0f) == 0.5f &&
            metal::fast::exp(0.0f) == 1.0f && clamp(5.0f, 0.0f, 1.0f) == 1.0f && clamp(-3, 0, 7) == 0 &&
            select(1.0f, 2.0f, true) == 2.0f && metal::fmax(half(1.0f), half(2.0f)) == 2.0f &&
            metal::abs(-3) == 3 && metal::abs(-2.5f) == 2.5f && metal::tanh(0.0f) == 0.0f &&
            metal::fma(2.0f, 3.0f, 1.0f) == 7.0f && metal::fmin(1.0f, 2.0f) == 1.0f,
        "metal:: math (exp, sqrt, rsqrt, clamp, select, fmax, abs, tanh, fma, fmin; precise::, fast::)");
}

/* ============================================================ atomics */
kernel void k_atomics(device atomic_int *ci MLC_BUFFER(0), device atomic_uint *cu MLC_BUFFER(1),
                      device atomic_float *cf MLC_BUFFER(2), device int *mx MLC_BUFFER(3), device uint *ret MLC_BUFFER(4),
                      uint3 tid MLC_TID, uint3 bid MLC_BID, uint3 bdim MLC_BDIM) {
  uint g = bid.x * bdim.x + tid.x;
  atomic_fetch_add_explicit(&ci[0], 1, memory_order_relaxed);
  ret[g] = atomic_fetch_add_explicit(&cu[0], 1u, memory_order_relaxed);
  atomic_fetch_add_explicit(&cf[0], 1.0f, memory_order_relaxed);
  int key = (int)((g * 2654435761u) % 100003u) - 50000;
  atomic_fetch_max_explicit((device atomic_int *)&mx[0], key, memory_order_relaxed);
  atomic_fetch_min_explicit((device atomic_int *)&mx[1], key, memory_order_relaxed);
  atomic_fetch_max_explicit(&cu[1], g, memory_order_relaxed);
  atomic_exchange_explicit(&ci[1], 7, memory_order_relaxed);
  atomic_store_explicit(&ci[2], 5, memory_order_relaxed);
  (void)atomic_load_explicit(&ci[2], memory_order_relaxed);
}

static void test_atomics() {
  const uint G = 16, N = 256, T = G * N;
  std::vector<int> ci(3, 0), mx{INT_MIN, INT_MAX};
  std::vector<uint> cu(2, 0), ret(T);
  std::vector<float> cf(1, 0.0f);
  LAUNCH(uint3(G, 1, 1), uint3(N, 1, 1), 0,
         k_atomics((atomic_int *)ci.data(), (atomic_uint *)cu.data(), (atomic_float *)cf.data(), mx.data(), ret.data(),
                   tid, bid, bdim));
  check(ci[0] == 4096 && cu[0] == 4096u, "atomic_fetch_add_explicit: 4096 threads adding 1 gives 4096",
        fmt("int %d uint %u", ci[0], cu[0]));
  check(cf[0] == 4096.0f, "atomic_float fetch_add: 4096.0", fmt("%g", (double)cf[0]));
  std::vector<int> seen(T, 0);
  for (uint i = 0; i < T; i++) if (ret[i] < T) seen[ret[i]]++;
  check(std::all_of(seen.begin(), seen.end(), [](int v) { return v == 1; }),
        "atomic_fetch_add returns each old value 0..4095 exactly once");
  int kmax = INT_MIN, kmin = INT_MAX;
  for (uint g = 0; g < T; g++) {
    int key = (int)((g * 2654435761u) % 100003u) - 50000;
    kmax = std::max(kmax, key);
    kmin = std::min(kmin, key);
  }
  check(mx[0] == kmax && mx[1] == kmin && cu[1] == T - 1, "atomic_fetch_max/min_explicit (int, uint)",
        fmt("max %d/%d min %d/%d", mx[0], kmax, mx[1], kmin));
  check(ci[1] == 7 && ci[2] == 5, "atomic_exchange / store / load");
}

/* ============================================================ speed */
kernel void k_axpy(device const float *x MLC_BUFFER(0), device float *y MLC_BUFFER(1), uint3 tid MLC_TID,
                   uint3 bid MLC_BID, uint3 bdim MLC_BDIM) {
  uint i = bid.x * bdim.x + tid.x;
  y[i] = 2.0f * x[i] + y[i];
}
static void test_speed() {
  const uint G = 10000, N = 256;
  std::vector<float> x(G * N, 1.0f), y(G * N, 0.5f);
  double t0 = now_s();
  LAUNCH(uint3(G, 1, 1), uint3(N, 1, 1), 0, k_axpy(x.data(), y.data(), tid, bid, bdim));
  double t1 = now_s();
  bool ok = std::all_of(y.begin(), y.end(), [](float v) { return v == 2.5f; });
  check(ok, "speed: 10^4 groups x 256 threads, barrier-free kernel", fmt("%.2f s", t1 - t0));
  int bad = 0;
  std::vector<uint> out(64 * 256);
  t0 = now_s();
  for (int rep = 0; rep < 200; rep++) {
    LAUNCH(uint3(64, 1, 1), uint3(256, 1, 1), 0, k_barrier_rounds(out.data(), tid, bid, bdim));
    bad += out[5] == 0;
  }
  t1 = now_s();
  check(bad == 0, "speed: 200 dispatches of 64 groups x 256 threads, 16 barriers each", fmt("%.2f s", t1 - t0));
}

/* Both executors: fibers (default; GPU threads as fibers over one OS thread
 * per core) and threads (one OS thread per GPU thread, as under TSan). */
int main() {
  test_fp16();
  for (int cfg = 0; cfg < 3; cfg++) {
    mlc_emu::set_mode(cfg < 2 ? mlc_emu::exec_mode::fibers : mlc_emu::exec_mode::threads);
    mlc_emu::set_workers(cfg == 1 ? 2 : 1);
    g_mode = cfg == 0 ? "[fibers] " : cfg == 1 ? "[fibers x2] " : "[threads] ";
    double t0 = now_s();
    test_barriers();
    test_simd();
    test_matrix();
    test_atomics();
    if (cfg == 0) test_speed();
    std::printf("     %s%.2f s\n", g_mode, now_s() - t0);
  }
  std::printf("%d passed, %d failed\n", g_pass, g_fail);
  return g_fail ? 1 : 0;
}
