// A standalone experiment for issue 29 (not part of mlc): does a persistent
// decode kernel beat one launch per GEMV?  The MiniLLM's decode step without
// its attention (dim 2048, 12 layers, FFN 8192, vocab 32000, batch 1, bf16):
// per layer the in-projection (6144 x 2048, RMSNorm before it), the
// out-projection (2048 x 2048, residual after), the up-projection (8192 x
// 2048, RMSNorm before, SiLU after), the down-projection (2048 x 8192,
// residual after); then the head (32000 x 2048).  1.34 GB of weights a step.
// Four ways to run it, each timed over 50 steps (CUDA events, median):
//   graph        one kernel a GEMV, captured in a CUDA graph
//   graph+pdl    the same with programmatic dependent launch (each kernel
//                triggers its successor at entry, waits before reading x)
//   persist      one kernel a step: a block per SM slot, the GEMVs one after
//                another with a grid barrier between them
//   persist+pf   the same, each warp loading its first column's weights
//                before the barrier (weights do not depend on x)
// Each way's y is checked against the graph's (the same sums in the same
// order: bit for bit).  Also the device-to-device copy's bandwidth, and the
// bytes a step over it (the limit); then each kind of GEMV alone, 200
// launched back to back, the 12 layers' copies in turn (so that the weights
// come from memory, not the 50 MB L2): the bandwidth one GEMV reaches at
// each size, launch gaps included.
//   nvcc -O3 -arch sm_90a -std=c++17 bench/proto/decode_persist.cu -o /tmp/dp && /tmp/dp
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1); } } while (0)

constexpr int DIM = 2048, FF = 8192, LAYERS = 12, VOCAB = 32000, WARPS = 8, THREADS = 32 * WARPS;
enum { PRE_NONE = 0, PRE_RMS = 1 };
enum { EPI_STORE = 0, EPI_RESID = 1, EPI_SILU = 2 };
struct Op {
  const __nv_bfloat16 *w; // [n, k]
  const __nv_bfloat16 *x; // [k]
  __nv_bfloat16 *y;       // [n]
  const __nv_bfloat16 *r; // residual [n] (EPI_RESID)
  int n, k, pre, epi;
};
constexpr int MAXOPS = 4 * LAYERS + 1;
__constant__ Op c_ops[MAXOPS];

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
// x (k values) into shared memory as f32, RMS-normalised when asked (the
// norm's weight is 1: the experiment is about the traffic, not the values).
__device__ void load_x(const Op &op, float *sx, float *sred) {
  float ss = 0.f;
  for (int i = threadIdx.x * 8; i < op.k; i += THREADS * 8) {
    uint4 u = *(const uint4 *)(op.x + i);
    const __nv_bfloat16 *e = (const __nv_bfloat16 *)&u;
#pragma unroll
    for (int j = 0; j < 8; j++) { float f = __bfloat162float(e[j]); sx[i + j] = f; ss += f * f; }
  }
  if (op.pre == PRE_RMS) {
    ss = warp_sum(ss);
    if ((threadIdx.x & 31) == 0) sred[threadIdx.x >> 5] = ss;
    __syncthreads();
    float t = 0.f;
    for (int w = 0; w < WARPS; w++) t += sred[w];
    const float rs = rsqrtf(t / op.k + 1e-5f);
    __syncthreads();
    for (int i = threadIdx.x; i < op.k; i += THREADS) sx[i] = __bfloat162float(__float2bfloat16(sx[i] * rs));
  }
  __syncthreads();
}
// One column n: the warp's lanes read w's row 16 bytes at a time, PF of the
// pieces already in registers (prefetched).
constexpr int PF = 8;
__device__ __forceinline__ void column(const Op &op, int n, const float *sx, const uint4 *pre, int npre) {
  const int lane = threadIdx.x & 31;
  const __nv_bfloat16 *wr = op.w + (size_t)n * op.k;
  float acc = 0.f;
  const int pieces = op.k / 256;
  auto dot = [&](uint4 u, int p) {
    const __nv_bfloat16 *e = (const __nv_bfloat16 *)&u;
    const float *xv = sx + p * 256 + lane * 8;
#pragma unroll
    for (int j = 0; j < 8; j++) acc += xv[j] * __bfloat162float(e[j]);
  };
#pragma unroll
  for (int p = 0; p < PF; p++)
    if (p < npre) dot(pre[p], p);
  for (int p0 = npre; p0 < pieces; p0 += 8) {
    uint4 u[8];
#pragma unroll
    for (int q = 0; q < 8; q++) if (p0 + q < pieces) u[q] = __ldg((const uint4 *)(wr + (p0 + q) * 256 + lane * 8));
#pragma unroll
    for (int q = 0; q < 8; q++) if (p0 + q < pieces) dot(u[q], p0 + q);
  }
  acc = warp_sum(acc);
  if (lane == 0) {
    float v = __bfloat162float(__float2bfloat16(acc));
    if (op.epi == EPI_RESID) v = v + __bfloat162float(op.r[n]);
    if (op.epi == EPI_SILU) v = v / (1.f + __expf(-v));
    op.y[n] = __float2bfloat16(v);
  }
}

// ---- one kernel a GEMV ----
// WFIRST: the warp's first weights are loaded before x (they do not depend on it)
template <bool PDL, bool WFIRST = false> __global__ void __launch_bounds__(THREADS) gemv_kernel(int i) {
  if (PDL) asm volatile("griddepcontrol.launch_dependents;");
  if (PDL) asm volatile("griddepcontrol.wait;" ::: "memory");
  __shared__ float sx[FF], sred[WARPS];
  const Op &op = c_ops[i];
  const int n = blockIdx.x * WARPS + (threadIdx.x >> 5), lane = threadIdx.x & 31;
  uint4 pre[PF];
  int npre = 0;
  if (WFIRST && n < op.n) {
    npre = op.k / 256 < PF ? op.k / 256 : PF;
#pragma unroll
    for (int p = 0; p < PF; p++)
      if (p < npre) pre[p] = __ldg((const uint4 *)(op.w + (size_t)n * op.k + p * 256 + lane * 8));
  }
  load_x(op, sx, sred);
  if (n < op.n) column(op, n, sx, pre, npre);
}

// ---- one kernel a step ----
__device__ unsigned g_bar;
__device__ __forceinline__ void grid_barrier(unsigned &target) {
  __syncthreads();
  target += gridDim.x;
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(&g_bar, 1u);
    unsigned v;
    do { asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(v) : "l"(&g_bar)); } while ((int)(v - target) < 0);
  }
  __syncthreads();
}
template <bool PREFETCH> __global__ void __launch_bounds__(THREADS) persist_kernel(int nops, unsigned base) {
  extern __shared__ float sx[];
  __shared__ float sred[WARPS];
  unsigned target = base;
  const int gw = blockIdx.x * WARPS + (threadIdx.x >> 5), nw = gridDim.x * WARPS, lane = threadIdx.x & 31;
  for (int i = 0; i < nops; i++) {
    const Op op = c_ops[i];
    uint4 pre[PF];
    int npre = 0;
    if (PREFETCH && gw < op.n) {
      npre = op.k / 256 < PF ? op.k / 256 : PF;
      const __nv_bfloat16 *wr = op.w + (size_t)gw * op.k;
#pragma unroll
      for (int p = 0; p < PF; p++) if (p < npre) pre[p] = __ldg((const uint4 *)(wr + p * 256 + lane * 8));
    }
    if (i > 0) grid_barrier(target); // op i - 1's outputs are written
    load_x(op, sx, sred);
    bool first = true;
    for (int n = gw; n < op.n; n += nw) {
      column(op, n, sx, pre, first ? npre : 0);
      first = false;
    }
    __syncthreads(); // sx is the next op's
  }
}

__global__ void fill(__nv_bfloat16 *p, size_t n, unsigned seed, float scale) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    h ^= h >> 13; h *= 0x5bd1e995u; h ^= h >> 15;
    p[i] = __float2bfloat16(((h & 0xffff) / 65536.f - 0.5f) * scale);
  }
}

int main() {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  printf("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  // weights, one allocation
  std::vector<Op> ops;
  size_t wtotal = (size_t)LAYERS * (3 * DIM * DIM + DIM * DIM + 2 * (size_t)FF * DIM) + (size_t)VOCAB * DIM;
  __nv_bfloat16 *W, *act;
  CK(cudaMalloc(&W, wtotal * 2));
  fill<<<1024, 256>>>(W, wtotal, 1234u, 0.05f);
  // activations: x (residual stream) two buffers, h [3 DIM], a [DIM], u [FF], logits [VOCAB]
  CK(cudaMalloc(&act, (size_t)(4 * DIM + 3 * DIM + FF + VOCAB) * 2));
  __nv_bfloat16 *x0 = act, *x1 = x0 + DIM, *x2 = x1 + DIM, *h = x2 + 2 * DIM, *u = h + 3 * DIM, *lg = u + FF;
  fill<<<8, 256>>>(x0, DIM, 99u, 2.f);
  size_t off = 0;
  __nv_bfloat16 *xa = x0, *xb = x1;
  for (int l = 0; l < LAYERS; l++) {
    // the attention's output is emulated by the in-projection's first DIM values (h)
    ops.push_back({W + off, xa, h, nullptr, 3 * DIM, DIM, PRE_RMS, EPI_STORE}); off += 3 * (size_t)DIM * DIM;
    ops.push_back({W + off, h, xb, xa, DIM, DIM, PRE_NONE, EPI_RESID}); off += (size_t)DIM * DIM;
    ops.push_back({W + off, xb, u, nullptr, FF, DIM, PRE_RMS, EPI_SILU}); off += (size_t)FF * DIM;
    ops.push_back({W + off, u, xa, xb, DIM, FF, PRE_NONE, EPI_RESID}); off += (size_t)FF * DIM;
  }
  ops.push_back({W + off, xa, lg, nullptr, VOCAB, DIM, PRE_RMS, EPI_STORE});
  off += (size_t)VOCAB * DIM;
  if (off != wtotal) { printf("layout\n"); return 1; }
  const int nops = (int)ops.size();
  CK(cudaMemcpyToSymbol(c_ops, ops.data(), nops * sizeof(Op)));
  // x0 is overwritten by the layers: each run starts from the same x, kept here
  __nv_bfloat16 *xsave;
  CK(cudaMalloc(&xsave, DIM * 2));
  CK(cudaMemcpy(xsave, x0, DIM * 2, cudaMemcpyDeviceToDevice));
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  std::vector<__nv_bfloat16> ref(VOCAB), got(VOCAB);

  // copy bandwidth (1 GiB each way, median of 10)
  float copy_gbs;
  {
    void *a, *b;
    size_t n = 1ull << 30;
    CK(cudaMalloc(&a, n)); CK(cudaMalloc(&b, n));
    std::vector<float> t;
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0); cudaEventCreate(&e1);
    for (int r = 0; r < 12; r++) {
      cudaEventRecord(e0, st); cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, st); cudaEventRecord(e1, st);
      CK(cudaEventSynchronize(e1));
      float ms; cudaEventElapsedTime(&ms, e0, e1);
      if (r >= 2) t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
    copy_gbs = 2.0 * n / (t[t.size() / 2] * 1e-3) / 1e9;
    cudaFree(a); cudaFree(b);
  }
  const double bytes = wtotal * 2.0;
  const double limit_ms = bytes / (copy_gbs * 1e9) * 1e3;
  printf("weights %.3f GB a step; device copy %.0f GB/s; limit %.4f ms\n", bytes / 1e9, copy_gbs, limit_ms);

  auto launch_graph = [&](bool pdl) {
    for (int i = 0; i < nops; i++) {
      cudaLaunchConfig_t cfg = {};
      cfg.gridDim = dim3((ops[i].n + WARPS - 1) / WARPS);
      cfg.blockDim = dim3(THREADS);
      cfg.stream = st;
      cudaLaunchAttribute at[1];
      at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      at[0].val.programmaticStreamSerializationAllowed = 1;
      cfg.attrs = at;
      cfg.numAttrs = pdl ? 1 : 0;
      if (pdl) CK(cudaLaunchKernelEx(&cfg, gemv_kernel<true>, i));
      else CK(cudaLaunchKernelEx(&cfg, gemv_kernel<false>, i));
    }
  };
  int per_sm = 0;
  const size_t psmem = FF * sizeof(float);
  CK(cudaFuncSetAttribute(persist_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)psmem));
  CK(cudaFuncSetAttribute(persist_kernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)psmem));
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, persist_kernel<true>, THREADS, psmem));
  const int bps = std::min(per_sm, 4);
  printf("persistent: %d blocks an SM resident (using %d)\n", per_sm, bps);
  unsigned bar_base = 0; // g_bar counts up forever; each launch starts from its value
  const char *names[4] = {"graph", "graph+pdl", "persist", "persist+pf"};
  for (int way = 0; way < 4; way++) {
    cudaGraphExec_t ge = nullptr;
    if (way < 2) {
      cudaGraph_t g;
      CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
      CK(cudaMemcpyAsync(x0, xsave, DIM * 2, cudaMemcpyDeviceToDevice, st));
      launch_graph(way == 1);
      CK(cudaStreamEndCapture(st, &g));
      CK(cudaGraphInstantiate(&ge, g, 0));
    }
    const int grid = prop.multiProcessorCount * bps;
    auto step = [&]() {
      if (ge) { CK(cudaGraphLaunch(ge, st)); return; }
      CK(cudaMemcpyAsync(x0, xsave, DIM * 2, cudaMemcpyDeviceToDevice, st));
      if (way == 2) persist_kernel<false><<<grid, THREADS, psmem, st>>>(nops, bar_base);
      else persist_kernel<true><<<grid, THREADS, psmem, st>>>(nops, bar_base);
      CK(cudaGetLastError());
      bar_base += (unsigned)(grid * (nops - 1));
    };
    std::vector<float> t;
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0); cudaEventCreate(&e1);
    for (int r = 0; r < 60; r++) {
      cudaEventRecord(e0, st); step(); cudaEventRecord(e1, st);
      CK(cudaEventSynchronize(e1));
      float ms; cudaEventElapsedTime(&ms, e0, e1);
      if (r >= 10) t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
    CK(cudaMemcpy(way ? got.data() : ref.data(), lg, VOCAB * 2, cudaMemcpyDeviceToHost));
    int bad = 0;
    if (way)
      for (int i = 0; i < VOCAB; i++) bad += memcmp(&got[i], &ref[i], 2) != 0;
    const float med = t[t.size() / 2];
    printf("%-11s median %.4f ms  min %.4f  (%.3f of the limit)  logits %s\n", names[way], med, t[0], limit_ms / med,
           way ? (bad ? "DIFFER" : "same bits as graph") : "reference");
    if (bad) printf("  %d of %d logits differ\n", bad, VOCAB);
  }
  // each kind of GEMV alone: one kernel, 200 launched back to back (no graph), the layers' copies in turn
  {
    const char *kind[5] = {"in-proj 6144x2048", "out-proj 2048x2048", "ffn up 8192x2048", "ffn down 2048x8192",
                           "head 32000x2048"};
    const int at[5] = {0, 1, 2, 3, nops - 1};
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0); cudaEventCreate(&e1);
    for (int q = 0; q < 5; q++) {
      const Op &op = ops[at[q]];
      const int grid = (op.n + WARPS - 1) / WARPS, reps = 200;
      // the 12 layers' copies in turn (12 x 8 MB and more: past the 50 MB L2)
      auto which = [&](int r) { return q < 4 ? 4 * (r % LAYERS) + q : at[q]; };
      for (int wf = 0; wf < 2; wf++) {
        auto go = [&](int r) {
          if (wf) gemv_kernel<false, true><<<grid, THREADS, 0, st>>>(which(r));
          else gemv_kernel<false><<<grid, THREADS, 0, st>>>(which(r));
        };
        for (int r = 0; r < 12; r++) go(r);
        cudaEventRecord(e0, st);
        for (int r = 0; r < reps; r++) go(r);
        cudaEventRecord(e1, st);
        CK(cudaEventSynchronize(e1));
        float ms; cudaEventElapsedTime(&ms, e0, e1);
        const double us = ms * 1e3 / reps, mb = (double)op.n * op.k * 2 / 1e6;
        printf("alone%s: %-19s %7.1f MB  %7.2f us  %6.0f GB/s  (%.3f of the copy)\n", wf ? ", weights first" : "", kind[q],
               mb, us, mb * 1e3 / us, mb * 1e3 / us / copy_gbs);
      }
    }
  }
  return 0;
}
