/* NVRTC through dlopen, and the image cache (see compile.h). */
#include "runtime/cuda/compile.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "runtime/profile.h"

bool mlc_cuda_cache_file(char *buf, size_t n, uint64_t key, const char *suffix) {
  char name[64];
  snprintf(name, sizeof name, "cuda/%016llx.%s", (unsigned long long)key, suffix);
  return mlc_cache_path(buf, n, name);
}

typedef int nvrtcResult;
typedef struct nvrtc_prog *nvrtcProgram;
typedef struct {
  void *lib;
  const char *(*GetErrorString)(nvrtcResult);
  nvrtcResult (*CreateProgram)(nvrtcProgram *, const char *, const char *, int, const char *const *, const char *const *);
  nvrtcResult (*CompileProgram)(nvrtcProgram, int, const char *const *);
  nvrtcResult (*GetProgramLogSize)(nvrtcProgram, size_t *);
  nvrtcResult (*GetProgramLog)(nvrtcProgram, char *);
  nvrtcResult (*GetCUBINSize)(nvrtcProgram, size_t *);
  nvrtcResult (*GetCUBIN)(nvrtcProgram, char *);
  nvrtcResult (*DestroyProgram)(nvrtcProgram *);
} nvrtc_api;

static mlc_status load_nvrtc(nvrtc_api *n) {
  memset(n, 0, sizeof *n);
  const char *home = getenv("CUDA_HOME");
  char path[1024] = "";
  if (home && *home) snprintf(path, sizeof path, "%s/lib64/libnvrtc.so", home);
  const char *names[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so", path, "/usr/local/cuda/lib64/libnvrtc.so"};
  for (size_t i = 0; i < sizeof names / sizeof *names && !n->lib; i++)
    if (*names[i]) n->lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (!n->lib)
    return mlc_status_make(MLC_UNIMPLEMENTED, "the artifact holds no compiled GPU code and NVRTC is not installed "
                                              "(libnvrtc.so.13 or .12; set CUDA_HOME, or compile the model where nvcc exists)");
  void *sym;
#define LOAD(field, name)                                                                             \
  if (!(sym = dlsym(n->lib, name))) {                                                                 \
    dlclose(n->lib);                                                                                  \
    n->lib = NULL;                                                                                    \
    return mlc_status_make(MLC_UNIMPLEMENTED, "NVRTC has no %s: it is too old", name);               \
  }                                                                                                   \
  memcpy(&n->field, &sym, sizeof sym);
  LOAD(GetErrorString, "nvrtcGetErrorString")
  LOAD(CreateProgram, "nvrtcCreateProgram")
  LOAD(CompileProgram, "nvrtcCompileProgram")
  LOAD(GetProgramLogSize, "nvrtcGetProgramLogSize")
  LOAD(GetProgramLog, "nvrtcGetProgramLog")
  LOAD(GetCUBINSize, "nvrtcGetCUBINSize")
  LOAD(GetCUBIN, "nvrtcGetCUBIN")
  LOAD(DestroyProgram, "nvrtcDestroyProgram")
#undef LOAD
  return NULL;
}

mlc_status mlc_cuda_compile_nvrtc(const char *source, int major, int minor, FILE *progress, void **out, size_t *out_n) {
  *out = NULL;
  *out_n = 0;
  char arch[64];
  snprintf(arch, sizeof arch, "--gpu-architecture=sm_%d%d%s", major, minor, major == 9 && minor == 0 ? "a" : "");
  const char *opts[] = {arch, "--std=c++17", "-lineinfo"};
  int nopts = (int)(sizeof opts / sizeof *opts);
  XXH64_state_t *h = XXH64_createState();
  if (!h) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory");
  XXH64_reset(h, 0);
  XXH64_update(h, source, strlen(source));
  for (int i = 0; i < nopts; i++) XXH64_update(h, opts[i], strlen(opts[i]) + 1);
  XXH64_update(h, "nvrtc", 5);
  uint64_t key = XXH64_digest(h);
  XXH64_freeState(h);
  char path[1024];
  bool cached = mlc_cuda_cache_file(path, sizeof path, key, "cubin");
  if (cached && (*out = mlc_read_file(path, out_n))) return NULL;

  nvrtc_api n;
  MLC_RETURN_IF_ERROR(load_nvrtc(&n));
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  if (progress) fprintf(progress, "mlc: compiling the CUDA kernels with NVRTC for sm_%d%d ...\n", major, minor);
  nvrtcProgram prog = NULL;
  mlc_status st = NULL;
  nvrtcResult r = n.CreateProgram(&prog, source, "mlc.cu", 0, NULL, NULL);
  if (r) {
    st = mlc_status_make(MLC_INTERNAL, "nvrtcCreateProgram: %s", n.GetErrorString(r));
  } else if ((r = n.CompileProgram(prog, nopts, opts))) {
    size_t ln = 0;
    n.GetProgramLogSize(prog, &ln);
    char *log = malloc(ln + 1);
    if (log) { log[0] = 0; n.GetProgramLog(prog, log); log[ln] = 0; }
    st = mlc_status_make(MLC_INTERNAL, "NVRTC could not compile mlc's CUDA code (a bug in mlc): %s\n%.4000s",
                         n.GetErrorString(r), log ? log : "");
    free(log);
  } else {
    size_t sz = 0;
    n.GetCUBINSize(prog, &sz);
    char *bin = malloc(sz ? sz : 1);
    if (!bin) st = mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory");
    else if ((r = n.GetCUBIN(prog, bin))) { free(bin); st = mlc_status_make(MLC_INTERNAL, "nvrtcGetCUBIN: %s", n.GetErrorString(r)); }
    else { *out = bin; *out_n = sz; }
  }
  if (prog) n.DestroyProgram(&prog);
  dlclose(n.lib);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  if (!st) {
    if (progress)
      fprintf(progress, "mlc: compiled in %.1f s; cached as %s\n", (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec),
              cached ? path : "(no cache directory)");
    if (cached) mlc_write_file(path, *out, *out_n);
  }
  return st;
}
