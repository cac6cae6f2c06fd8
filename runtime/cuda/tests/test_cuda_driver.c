/* The CUDA driver loader, end to end.  Without a driver (CI, the dev box):
 * loading must fail with MLC_UNIMPLEMENTED and a clear message.  With one
 * (the lent H200): list the devices, load a hand-written PTX kernel that adds
 * 1 to every element of a 1000-float buffer, launch it, copy back and check
 * every element exactly.  Exit status 0 on success. */
#include <stdio.h>
#include <string.h>

#include "runtime/cuda/driver.h"

static const char ptx[] =
    ".version 8.0\n.target sm_80\n.address_size 64\n"
    ".visible .entry add_one(.param .u64 p, .param .u32 n) {\n"
    "  .reg .b32 %r<6>; .reg .b64 %rd<5>; .reg .f32 %f<3>; .reg .pred %p1;\n"
    "  ld.param.u64 %rd1, [p];\n  ld.param.u32 %r1, [n];\n"
    "  mov.u32 %r2, %ctaid.x;\n  mov.u32 %r3, %ntid.x;\n  mov.u32 %r4, %tid.x;\n"
    "  mad.lo.s32 %r5, %r2, %r3, %r4;\n  setp.ge.u32 %p1, %r5, %r1;\n  @%p1 bra DONE;\n"
    "  cvta.to.global.u64 %rd2, %rd1;\n  mul.wide.u32 %rd3, %r5, 4;\n  add.s64 %rd4, %rd2, %rd3;\n"
    "  ld.global.f32 %f1, [%rd4];\n  add.f32 %f2, %f1, 0f3F800000;\n  st.global.f32 [%rd4], %f2;\n"
    "DONE:\n  ret;\n}\n";

static int fail(mlc_status st) {
  fprintf(stderr, "FAIL: %s\n", mlc_status_message(st));
  mlc_status_free(st);
  return 1;
}

int main(void) {
  mlc_cuda_driver d;
  mlc_status st = mlc_cuda_driver_load(&d);
  if (st) {
    int ok = mlc_status_code(st) == MLC_UNIMPLEMENTED && strstr(mlc_status_message(st), "NVIDIA driver");
    printf("%s: no driver: %s\n", ok ? "ok" : "FAIL", mlc_status_message(st));
    mlc_status_free(st);
    return !ok;
  }
  int n = 0;
  if ((st = mlc_cuda_check(&d, d.cuDeviceGetCount(&n), "cuDeviceGetCount"))) return fail(st);
  for (int i = 0; i < n; i++) {
    CUdevice dev;
    char name[256];
    int major = 0, minor = 0;
    if ((st = mlc_cuda_check(&d, d.cuDeviceGet(&dev, i), "cuDeviceGet"))) return fail(st);
    if ((st = mlc_cuda_check(&d, d.cuDeviceGetName(name, sizeof name, dev), "cuDeviceGetName"))) return fail(st);
    d.cuDeviceGetAttribute(&major, 75, dev); /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR */
    d.cuDeviceGetAttribute(&minor, 76, dev);
    printf("device %d: %s, sm_%d%d\n", i, name, major, minor);
  }
  CUdevice dev;
  CUcontext ctx;
  CUmodule mod;
  CUfunction fn;
  CUdeviceptr buf;
  float host[1000];
  for (int i = 0; i < 1000; i++) host[i] = (float)i * 0.5f;
  unsigned count = 1000;
  if ((st = mlc_cuda_check(&d, d.cuDeviceGet(&dev, 0), "cuDeviceGet")) ||
      (st = mlc_cuda_check(&d, d.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain")) ||
      (st = mlc_cuda_check(&d, d.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")) ||
      (st = mlc_cuda_check(&d, d.cuModuleLoadData(&mod, ptx), "cuModuleLoadData")) ||
      (st = mlc_cuda_check(&d, d.cuModuleGetFunction(&fn, mod, "add_one"), "cuModuleGetFunction")) ||
      (st = mlc_cuda_check(&d, d.cuMemAlloc(&buf, sizeof host), "cuMemAlloc")) ||
      (st = mlc_cuda_check(&d, d.cuMemcpyHtoD(buf, host, sizeof host), "cuMemcpyHtoD")))
    return fail(st);
  void *params[] = {&buf, &count};
  if ((st = mlc_cuda_check(&d, d.cuLaunchKernel(fn, 4, 1, 1, 256, 1, 1, 0, NULL, params, NULL), "cuLaunchKernel")) ||
      (st = mlc_cuda_check(&d, d.cuCtxSynchronize(), "cuCtxSynchronize")) ||
      (st = mlc_cuda_check(&d, d.cuMemcpyDtoH(host, buf, sizeof host), "cuMemcpyDtoH")))
    return fail(st);
  int bad = 0;
  for (int i = 0; i < 1000; i++) bad += host[i] != (float)i * 0.5f + 1.0f;
  d.cuMemFree(buf);
  d.cuModuleUnload(mod);
  d.cuDevicePrimaryCtxRelease(dev);
  /* A driver error becomes a status naming the call and the driver's error. */
  st = mlc_cuda_check(&d, d.cuModuleGetFunction(&fn, NULL, "nope"), "cuModuleGetFunction");
  int msg_ok = st && strstr(mlc_status_message(st), "cuModuleGetFunction: CUDA_ERROR_");
  printf("error message: %s\n", st ? mlc_status_message(st) : "(none)");
  mlc_status_free(st);
  mlc_cuda_driver_unload(&d);
  printf("%s: PTX kernel on the GPU, %d of 1000 elements wrong; error text %s\n", bad || !msg_ok ? "FAIL" : "ok", bad,
         msg_ok ? "ok" : "wrong");
  return bad || !msg_ok;
}
