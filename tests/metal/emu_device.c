/* The emulated Metal device (see emu_device.h). */
#define _POSIX_C_SOURCE 200809L
#include "tests/metal/emu_device.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "runtime/cpu/device.h"

typedef void (*emu_fn)(void **bufs, unsigned grid, unsigned block, unsigned smem);

typedef struct {
  const mlc_cuda_kernel *k;
  emu_fn fn[MLC_CUDA_MAX_LAUNCH];
} kernel;

typedef struct {
  mlc_device base;
  mlc_device *host; /* the memory: a CPU device */
  void *lib;
  const mlc_cuda_kernel *table;
  uint32_t ntable;
  kernel *kernels;
  uint64_t scratch, scratch_bytes;
  double origin, sec[8192], start[8192];
  bool timed[8192];
} emu_dev;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void emu_destroy(mlc_device *b) {
  emu_dev *d = (emu_dev *)b;
  if (!d) return;
  if (d->host) {
    if (d->scratch) d->host->vt->free(d->host, d->scratch);
    d->host->vt->destroy(d->host);
  }
  if (d->lib) dlclose(d->lib);
  free(d->kernels);
  free(d);
}

static mlc_status emu_alloc(mlc_device *b, uint64_t n, uint64_t *out) {
  emu_dev *d = (emu_dev *)b;
  MLC_RETURN_IF_ERROR(d->host->vt->alloc(d->host, n, out));
  b->allocated += n;
  return NULL;
}
static void emu_free(mlc_device *b, uint64_t p) { ((emu_dev *)b)->host->vt->free(((emu_dev *)b)->host, p); }
static mlc_status emu_write(mlc_device *b, uint64_t dst, const void *src, uint64_t n) {
  return ((emu_dev *)b)->host->vt->write(((emu_dev *)b)->host, dst, src, n);
}
static mlc_status emu_read(mlc_device *b, void *dst, uint64_t src, uint64_t n) {
  return ((emu_dev *)b)->host->vt->read(((emu_dev *)b)->host, dst, src, n);
}

static mlc_status emu_resolve(mlc_device *b, const char *symbol, void **out) {
  emu_dev *d = (emu_dev *)b;
  for (uint32_t i = 0; i < d->ntable; i++) {
    const mlc_cuda_kernel *k = &d->table[i];
    if (strcmp(k->symbol, symbol)) continue;
    kernel *kk = &d->kernels[i];
    if (!kk->k) {
      for (uint32_t l = 0; l < k->nlaunch; l++) {
        char name[512];
        snprintf(name, sizeof name, "%s_emu", k->launch[l].fn);
        void *sym = dlsym(d->lib, name);
        if (!sym) return mlc_status_make(MLC_NOT_FOUND, "the emulated Metal library has no %s", name);
        memcpy(&kk->fn[l], &sym, sizeof sym);
      }
      if (k->scratch > d->scratch_bytes) {
        if (d->scratch) d->host->vt->free(d->host, d->scratch);
        d->scratch = 0;
        MLC_RETURN_IF_ERROR(d->host->vt->alloc(d->host, k->scratch, &d->scratch));
        d->scratch_bytes = k->scratch;
      }
      kk->k = k;
    }
    *out = kk;
    return NULL;
  }
  return mlc_status_make(MLC_NOT_FOUND, "kernel %s is not in the launch table", symbol);
}

static mlc_status emu_launch(mlc_device *b, void *kh, uint64_t items, const uint64_t *args, uint32_t nargs, bool timing,
                             uint32_t slot) {
  emu_dev *d = (emu_dev *)b;
  kernel *k = kh;
  void *bufs[72];
  if (nargs + 1 > 72) return mlc_status_make(MLC_INVALID_ARGUMENT, "too many arguments");
  for (uint32_t i = 0; i < nargs; i++) bufs[i] = (void *)(uintptr_t)args[i];
  bufs[nargs] = k->k->scratch ? (void *)(uintptr_t)d->scratch : NULL;
  double t0 = now();
  for (uint32_t l = 0; l < k->k->nlaunch; l++)
    k->fn[l](bufs, k->k->launch[l].grid, k->k->launch[l].block, k->k->launch[l].smem);
  if (timing && slot < 8192) {
    d->sec[slot] = now() - t0;
    d->start[slot] = t0 - d->origin;
    d->timed[slot] = true;
  }
  (void)items;
  return NULL;
}

static mlc_status emu_finish(mlc_device *b, uint32_t nslots, double *seconds, double *start) {
  emu_dev *d = (emu_dev *)b;
  for (uint32_t i = 0; i < nslots && i < 8192; i++)
    if (d->timed[i]) {
      seconds[i] = d->sec[i];
      start[i] = d->start[i];
      d->timed[i] = false;
    }
  return NULL;
}

static void emu_describe(mlc_device *b, char *buf, size_t n) { snprintf(buf, n, "emulated Metal (MSL as C++ on the CPU)"); }

static const mlc_device_vt emu_vt = {
    "metal-emu", true, false, emu_destroy, emu_alloc, emu_free, emu_write, emu_read, emu_resolve, emu_launch, emu_finish,
    emu_describe, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
};

/* The flags the header is precompiled with and every .metal compiled with:
 * a precompiled header is only used under the same ones. */
#define EMU_FLAGS "-std=c++17 -O1 -Wall -Wextra -Werror -pthread -fPIC"

static bool newer_than(const char *a, const char *b) { /* a exists and is not older than b */
  struct stat sa, sb;
  return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_mtime >= sb.st_mtime;
}

/* With $MLC_EMU_PCH, the header is compiled once into that file (again when
 * the header is newer) and each .metal includes it precompiled: the header
 * is most of a small kernel's compile time.  Jobs that build it at the same
 * time each write their own file and rename it into place. */
static const char *emu_pch(const char *cxx, const char *header, const char *log) {
  const char *pch = getenv("MLC_EMU_PCH");
  if (!pch || !*pch) return NULL;
  /* this binary is newer after a rebuild, which may have changed the flags */
  if (newer_than(pch, header) && newer_than(pch, "/proc/self/exe")) return pch;
  char tmp[4096], cmd[8192];
  snprintf(tmp, sizeof tmp, "%s.%ld.tmp", pch, (long)getpid());
  snprintf(cmd, sizeof cmd, "%s " EMU_FLAGS " -x c++-header '%s' -o '%s' > '%s' 2>&1", cxx, header, tmp, log);
  if (system(cmd) || rename(tmp, pch)) {
    remove(tmp);
    return NULL; /* compile with -include instead, which reports what is wrong */
  }
  return pch;
}

mlc_status mlc_emu_compile(const char *metal, const char *so, const char *header, const char *log) {
  const char *cxx = getenv("MLC_EMU_CXX");
  if (!cxx || !*cxx) cxx = "clang++";
  const char *pch = emu_pch(cxx, header, log);
  char cmd[8192];
  snprintf(cmd, sizeof cmd, "%s " EMU_FLAGS " -shared %s '%s' -x c++ '%s' -o '%s' > '%s' 2>&1", cxx,
           pch ? "-include-pch" : "-include", pch ? pch : header, metal, so, log);
  int rc = system(cmd);
  if (rc && pch) { /* a precompiled header the compiler would not take: the header itself */
    snprintf(cmd, sizeof cmd, "%s " EMU_FLAGS " -shared -include '%s' -x c++ '%s' -o '%s' > '%s' 2>&1", cxx, header, metal, so,
             log);
    rc = system(cmd);
  }
  if (rc) return mlc_status_make(MLC_INTERNAL, "the emitted MSL does not compile against %s (see %s)", header, log);
  return NULL;
}

mlc_status mlc_emu_device_create(const char *so, const mlc_cuda_kernel *kernels, uint32_t nkernels, mlc_allocator a,
                                 mlc_device **out) {
  *out = NULL;
  emu_dev *d = calloc(1, sizeof *d);
  if (!d) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory");
  d->base.vt = &emu_vt;
  d->base.a = a;
  d->table = kernels;
  d->ntable = nkernels;
  d->origin = now();
  d->kernels = calloc(nkernels + 1, sizeof *d->kernels);
  mlc_status st = d->kernels ? mlc_cpu_device_create(NULL, NULL, 1, a, &d->host)
                             : mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory");
  if (!st && !(d->lib = dlopen(so, RTLD_NOW | RTLD_LOCAL)))
    st = mlc_status_make(MLC_NOT_FOUND, "cannot load %s: %s", so, dlerror());
  if (st) {
    emu_destroy(&d->base);
    return st;
  }
  *out = &d->base;
  return NULL;
}
