/* The profiler's cache flush on CUDA: see flush.h. */
#include "runtime/cuda/flush.h"

#include <string.h>

/* rt_l2_flush(buf, n, sink): a grid-stride read of n 16-byte vectors
 * through L2 (ld.global.cg), XORed together and stored to sink only if
 * they come to a value the zeroed buffer cannot give, so that nothing
 * removes the loads. */
static const char ptx[] =
    ".version 7.0\n"
    ".target sm_70\n"
    ".address_size 64\n"
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

mlc_status mlc_cuda_flush_set(const mlc_cuda_driver *drv, mlc_cuda_flush *f, bool on) {
  f->on = false;
  if (!on) return NULL;
  if (!f->mod) {
    MLC_RETURN_IF_ERROR(CK(drv, cuModuleLoadData(&f->mod, ptx)));
    mlc_status st = CK(drv, cuModuleGetFunction(&f->fn, f->mod, "rt_l2_flush"));
    if (st) {
      drv->cuModuleUnload(f->mod);
      f->mod = NULL, f->fn = NULL;
      return st;
    }
  }
  if (!f->buf) {
    uint64_t l2 = f->l2_bytes > 0 ? (uint64_t)f->l2_bytes : 128u << 20; /* unknown (the query failed): 128 MiB */
    f->bytes = 2 * l2 < (8u << 20) ? 8u << 20 : 2 * l2;
    mlc_status st = CK(drv, cuMemAlloc(&f->buf, f->bytes + 16)); /* + the sink */
    if (!st) st = CK(drv, cuMemsetD8(f->buf, 0, f->bytes + 16));
    if (st) {
      if (f->buf) drv->cuMemFree(f->buf);
      f->buf = 0;
      mlc_status e = mlc_status_make(mlc_status_code(st), "--flush-l2: a buffer of %llu bytes (twice the L2): %s",
                                     (unsigned long long)f->bytes, mlc_status_message(st));
      mlc_status_free(st);
      return e;
    }
  }
  f->on = true;
  return NULL;
}

mlc_status mlc_cuda_flush_queue(const mlc_cuda_driver *drv, const mlc_cuda_flush *f, CUstream stream) {
  if (!f->on) return NULL;
  unsigned long long n = f->bytes / 16;
  CUdeviceptr buf = f->buf, sink = f->buf + f->bytes;
  void *params[] = {&buf, &n, &sink};
  unsigned grid = (unsigned)(f->sms > 0 ? 4 * f->sms : 512);
  return CK(drv, cuLaunchKernel(f->fn, grid, 1, 1, 512, 1, 1, 0, stream, params, NULL));
}

void mlc_cuda_flush_free(const mlc_cuda_driver *drv, mlc_cuda_flush *f) {
  if (drv->lib) {
    if (f->buf) drv->cuMemFree(f->buf);
    if (f->mod) drv->cuModuleUnload(f->mod);
  }
  memset(f, 0, sizeof *f);
}
