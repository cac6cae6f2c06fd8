/* The profiler's clock probe and cache flush on CUDA: see probe.h. */
#include "runtime/cuda/probe.h"

#include <string.h>

/* rt_sm_clock(out, slot): waits for a tick of %globaltimer, reads
 * %clock64, waits until the timer has moved at least 4000 ns past that
 * tick (a read that sees it is right after a tick, whatever the timer's
 * resolution), reads %clock64 again and stores the cycles and the
 * nanoseconds at out[2 * slot].
 * rt_l2_flush(buf, n, sink): a grid-stride read of n 16-byte vectors
 * through L2 (ld.global.cg), XORed together and stored to sink only if
 * they come to a value the zeroed buffer cannot give, so that nothing
 * removes the loads. */
static const char ptx[] =
    ".version 7.0\n"
    ".target sm_70\n"
    ".address_size 64\n"
    "\n"
    ".visible .entry rt_sm_clock(.param .u64 out, .param .u32 slot)\n"
    "{\n"
    "  .reg .pred %p;\n"
    "  .reg .u64 %t0, %t1, %t, %dt, %c1, %c2, %dc, %a, %off;\n"
    "  .reg .u32 %s;\n"
    "  mov.u64 %t0, %globaltimer;\n"
    "TICK:\n"
    "  mov.u64 %t1, %globaltimer;\n"
    "  setp.eq.u64 %p, %t1, %t0;\n"
    "  @%p bra TICK;\n"
    "  mov.u64 %c1, %clock64;\n"
    "SPAN:\n"
    "  mov.u64 %t, %globaltimer;\n"
    "  sub.u64 %dt, %t, %t1;\n"
    "  setp.lt.u64 %p, %dt, 4000;\n"
    "  @%p bra SPAN;\n"
    "  mov.u64 %c2, %clock64;\n"
    "  sub.u64 %dc, %c2, %c1;\n"
    "  ld.param.u64 %a, [out];\n"
    "  cvta.to.global.u64 %a, %a;\n"
    "  ld.param.u32 %s, [slot];\n"
    "  mul.wide.u32 %off, %s, 16;\n"
    "  add.u64 %a, %a, %off;\n"
    "  st.global.v2.u64 [%a], {%dc, %dt};\n"
    "  ret;\n"
    "}\n"
    "\n"
    ".visible .entry rt_l2_flush(.param .u64 buf, .param .u64 n, .param .u64 sink)\n"
    "{\n"
    "  .reg .pred %p;\n"
    "  .reg .u64 %base, %i, %n, %stride, %a, %tx64;\n"
    "  .reg .u32 %x, %y, %z, %w, %acc, %tx, %bdim, %bx, %gdim;\n"
    "  ld.param.u64 %base, [buf];\n"
    "  cvta.to.global.u64 %base, %base;\n"
    "  ld.param.u64 %n, [n];\n"
    "  mov.u32 %tx, %tid.x;\n"
    "  mov.u32 %bdim, %ntid.x;\n"
    "  mov.u32 %bx, %ctaid.x;\n"
    "  mov.u32 %gdim, %nctaid.x;\n"
    "  mul.wide.u32 %i, %bx, %bdim;\n"
    "  cvt.u64.u32 %tx64, %tx;\n"
    "  add.u64 %i, %i, %tx64;\n"
    "  mul.wide.u32 %stride, %gdim, %bdim;\n"
    "  mov.u32 %acc, 0;\n"
    "LOOP:\n"
    "  setp.ge.u64 %p, %i, %n;\n"
    "  @%p bra DONE;\n"
    "  shl.b64 %a, %i, 4;\n"
    "  add.u64 %a, %base, %a;\n"
    "  ld.global.cg.v4.u32 {%x, %y, %z, %w}, [%a];\n"
    "  xor.b32 %acc, %acc, %x;\n"
    "  xor.b32 %acc, %acc, %y;\n"
    "  xor.b32 %acc, %acc, %z;\n"
    "  xor.b32 %acc, %acc, %w;\n"
    "  add.u64 %i, %i, %stride;\n"
    "  bra LOOP;\n"
    "DONE:\n"
    "  setp.ne.u32 %p, %acc, 0x9e3779b9;\n"
    "  @%p bra END;\n"
    "  ld.param.u64 %a, [sink];\n"
    "  cvta.to.global.u64 %a, %a;\n"
    "  st.global.u32 [%a], %acc;\n"
    "END:\n"
    "  ret;\n"
    "}\n";

#define CK(drv, call) mlc_cuda_check(drv, (drv)->call, #call)

static mlc_status load(const mlc_cuda_driver *drv, mlc_allocator a, mlc_cuda_probe *p) {
  if (p->mod) return NULL;
  p->probed = mlc_allocator_alloc(a, MLC_CUDA_PROBE_SLOTS);
  p->mhz = mlc_allocator_alloc_array(a, MLC_CUDA_PROBE_SLOTS, sizeof *p->mhz);
  if (!p->probed || !p->mhz) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory for the clock probe");
  memset(p->probed, 0, MLC_CUDA_PROBE_SLOTS);
  memset(p->mhz, 0, MLC_CUDA_PROBE_SLOTS * sizeof *p->mhz);
  MLC_RETURN_IF_ERROR(CK(drv, cuModuleLoadData(&p->mod, ptx)));
  MLC_RETURN_IF_ERROR(CK(drv, cuModuleGetFunction(&p->clock_fn, p->mod, "rt_sm_clock")));
  MLC_RETURN_IF_ERROR(CK(drv, cuModuleGetFunction(&p->flush_fn, p->mod, "rt_l2_flush")));
  MLC_RETURN_IF_ERROR(CK(drv, cuMemAlloc(&p->clk, (size_t)MLC_CUDA_PROBE_SLOTS * 16)));
  return CK(drv, cuMemsetD8(p->clk, 0, (size_t)MLC_CUDA_PROBE_SLOTS * 16));
}

mlc_status mlc_cuda_probe_set_flush(const mlc_cuda_driver *drv, mlc_allocator a, mlc_cuda_probe *p, bool on) {
  MLC_RETURN_IF_ERROR(load(drv, a, p));
  p->flush = on;
  if (!on || p->buf) return NULL;
  uint64_t l2 = p->l2_bytes > 0 ? (uint64_t)p->l2_bytes : 64u << 20; /* unknown: more than any GPU's so far */
  p->buf_bytes = 2 * l2 < (8u << 20) ? 8u << 20 : 2 * l2;
  mlc_status st = CK(drv, cuMemAlloc(&p->buf, p->buf_bytes + 16)); /* + the sink */
  if (!st) st = CK(drv, cuMemsetD8(p->buf, 0, p->buf_bytes + 16));
  if (st) {
    if (p->buf) drv->cuMemFree(p->buf);
    p->buf = 0, p->flush = false;
    mlc_status e = mlc_status_make(mlc_status_code(st), "--flush-l2: a buffer of %llu bytes (twice the L2): %s",
                                   (unsigned long long)p->buf_bytes, mlc_status_message(st));
    mlc_status_free(st);
    return e;
  }
  return NULL;
}

mlc_status mlc_cuda_probe_before(const mlc_cuda_driver *drv, mlc_allocator a, mlc_cuda_probe *p, CUstream stream) {
  (void)a;
  if (!p->flush || !p->buf) return NULL;
  unsigned long long n = p->buf_bytes / 16;
  CUdeviceptr buf = p->buf, sink = p->buf + p->buf_bytes;
  void *params[] = {&buf, &n, &sink};
  unsigned grid = (unsigned)(p->sms > 0 ? 4 * p->sms : 512);
  return CK(drv, cuLaunchKernel(p->flush_fn, grid, 1, 1, 512, 1, 1, 0, stream, params, NULL));
}

mlc_status mlc_cuda_probe_after(const mlc_cuda_driver *drv, mlc_allocator a, mlc_cuda_probe *p, CUstream stream,
                                uint32_t slot) {
  if (slot >= MLC_CUDA_PROBE_SLOTS) return NULL;
  MLC_RETURN_IF_ERROR(load(drv, a, p));
  CUdeviceptr out = p->clk;
  unsigned s = slot;
  void *params[] = {&out, &s};
  MLC_RETURN_IF_ERROR(CK(drv, cuLaunchKernel(p->clock_fn, 1, 1, 1, 1, 1, 1, 0, stream, params, NULL)));
  p->probed[slot] = 1;
  if (slot + 1 > p->hi) p->hi = slot + 1;
  return NULL;
}

mlc_status mlc_cuda_probe_read(const mlc_cuda_driver *drv, mlc_cuda_probe *p) {
  if (!p->mod || !p->hi) return NULL;
  uint64_t pairs[2 * 1024];
  for (uint32_t at = 0; at < p->hi; at += 1024) {
    uint32_t n = p->hi - at < 1024 ? p->hi - at : 1024;
    MLC_RETURN_IF_ERROR(CK(drv, cuMemcpyDtoH(pairs, p->clk + (CUdeviceptr)at * 16, (size_t)n * 16)));
    for (uint32_t i = 0; i < n; i++) {
      uint64_t cycles = pairs[2 * i], ns = pairs[2 * i + 1];
      p->mhz[at + i] = p->probed[at + i] && ns > 0 ? 1e3 * (double)cycles / (double)ns : 0;
      p->probed[at + i] = 0;
    }
  }
  p->hi = 0;
  return NULL;
}

void mlc_cuda_probe_free(const mlc_cuda_driver *drv, mlc_allocator a, mlc_cuda_probe *p) {
  if (drv->lib) {
    if (p->clk) drv->cuMemFree(p->clk);
    if (p->buf) drv->cuMemFree(p->buf);
    if (p->mod) drv->cuModuleUnload(p->mod);
  }
  mlc_allocator_free(a, p->probed);
  mlc_allocator_free(a, p->mhz);
  memset(p, 0, sizeof *p);
}
