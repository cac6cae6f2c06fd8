/* Loading the CUDA driver through the symbol table of symbols.def. */
#include "runtime/cuda/driver.h"

#include <dlfcn.h>
#include <string.h>

mlc_status mlc_cuda_driver_load(mlc_cuda_driver *out) {
  memset(out, 0, sizeof *out);
  out->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!out->lib)
    return mlc_status_make(MLC_UNIMPLEMENTED, "no NVIDIA driver on this machine: cannot load libcuda.so.1 (%s)", dlerror());
  void *sym;
#define X(name, symbol, params)                                                                      \
  if (!(sym = dlsym(out->lib, symbol))) {                                                            \
    mlc_cuda_driver_unload(out);                                                                     \
    return mlc_status_make(MLC_UNIMPLEMENTED, "the NVIDIA driver has no %s: it is too old", symbol); \
  }                                                                                                  \
  memcpy(&out->name, &sym, sizeof sym);
#include "runtime/cuda/symbols.def"
#undef X
  mlc_status st = mlc_cuda_check(out, out->cuInit(0), "cuInit");
  if (st) mlc_cuda_driver_unload(out);
  return st;
}

void mlc_cuda_driver_unload(mlc_cuda_driver *d) {
  if (d->lib) dlclose(d->lib);
  memset(d, 0, sizeof *d);
}

mlc_status mlc_cuda_check(const mlc_cuda_driver *d, CUresult r, const char *what) {
  if (r == 0) return NULL;
  const char *name = NULL, *text = NULL;
  if (d->cuGetErrorName) d->cuGetErrorName(r, &name);
  if (d->cuGetErrorString) d->cuGetErrorString(r, &text);
  return mlc_status_make(MLC_INTERNAL, "%s: %s (%d): %s", what, name ? name : "CUDA error", r, text ? text : "no description");
}
