/* CUDA target glue for the driver (see target_cuda.h). */
#define _DEFAULT_SOURCE /* mkdtemp */
#include "driver/target_cuda.h"
#include "driver/target.h"

#include <errno.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include "codegen/artifact.h"
#include "codegen/plan.h"
#include "passes/passes.h"
#include "runtime/cuda/compile.h"
#include "runtime/profile.h"
#include "runtime/cuda/device.h"

extern char **environ;

/* The code nvcc builds: sm_90a machine code for the H100/H200 and PTX that
 * the driver can compile for later GPUs. */
static const char *const nvcc_flags[] = {"-fatbin", "-O3", "-lineinfo", "-std=c++17",
                                         "-gencode", "arch=compute_90a,code=sm_90a",
                                         "-gencode", "arch=compute_90,code=compute_90"};
#define NFLAGS (sizeof nvcc_flags / sizeof *nvcc_flags)

static bool is_exec(const char *p) { return access(p, X_OK) == 0; }

int mlc_run_tool(const char *const *argv) {
  pid_t pid;
  int status = 0;
  if (posix_spawnp(&pid, argv[0], NULL, NULL, (char *const *)argv, environ)) return -1;
  if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

/* $MLC_NVCC, nvcc on PATH, $CUDA_HOME/bin/nvcc, /usr/local/cuda/bin/nvcc. */
static bool find_nvcc(char *buf, size_t n) {
  const char *env = getenv("MLC_NVCC");
  if (env && *env) {
    snprintf(buf, n, "%s", env);
    return is_exec(buf);
  }
  const char *path = getenv("PATH");
  while (path && *path) {
    size_t len = strcspn(path, ":");
    snprintf(buf, n, "%.*s/nvcc", (int)len, path);
    if (len && is_exec(buf)) return true;
    path += len + (path[len] == ':');
  }
  const char *home = getenv("CUDA_HOME");
  if (home && *home) {
    snprintf(buf, n, "%s/bin/nvcc", home);
    if (is_exec(buf)) return true;
  }
  snprintf(buf, n, "/usr/local/cuda/bin/nvcc");
  return is_exec(buf);
}

static mlc_status write_all(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  bool ok = f && fwrite(data, 1, n, f) == n;
  if (f) ok &= fclose(f) == 0;
  return ok ? NULL : mlc_status_make(MLC_IO, "cannot write %s: %s", path, strerror(errno));
}

/* Runs nvcc on the source; the fatbin comes back malloc'ed. */
static mlc_status run_nvcc(mlc_cuda_build *b, FILE *progress) {
  XXH64_state_t *h = XXH64_createState();
  XXH64_reset(h, 0);
  XXH64_update(h, b->mod.source, b->mod.source_len);
  for (size_t i = 0; i < NFLAGS; i++) XXH64_update(h, nvcc_flags[i], strlen(nvcc_flags[i]) + 1);
  uint64_t key = XXH64_digest(h);
  XXH64_freeState(h);
  char cache[1024];
  bool cached = mlc_cuda_cache_file(cache, sizeof cache, key, "fatbin");
  if (cached && (b->image = mlc_read_file(cache, &b->image_bytes))) {
    if (progress) fprintf(progress, "mlc: CUDA kernels from the cache (%s)\n", cache);
    return NULL;
  }
  char dir[] = "/tmp/mlc-nvcc-XXXXXX";
  if (!mkdtemp(dir)) return mlc_status_make(MLC_IO, "cannot make a temporary directory for nvcc: %s", strerror(errno));
  char src[64], out[64];
  snprintf(src, sizeof src, "%s/mlc.cu", dir);
  snprintf(out, sizeof out, "%s/mlc.fatbin", dir);
  mlc_status st = write_all(src, b->mod.source, b->mod.source_len);
  if (!st) {
    const char *argv[NFLAGS + 6];
    size_t k = 0;
    argv[k++] = b->nvcc;
    for (size_t i = 0; i < NFLAGS; i++) argv[k++] = nvcc_flags[i];
    argv[k++] = "-o";
    argv[k++] = out;
    argv[k++] = src;
    argv[k] = NULL;
    double t0 = mlc_now();
    if (progress) {
      fprintf(progress, "mlc: compiling %u CUDA kernels with %s for sm_90a (+ compute_90 PTX)...", b->mod.nkernels, b->nvcc);
      fflush(progress);
    }
    int rc = mlc_run_tool(argv);
    if (rc < 0) st = mlc_status_make(MLC_IO, "cannot run %s", b->nvcc);
    else if (rc)
      st = mlc_status_make(MLC_INTERNAL, "internal error: nvcc could not compile mlc's CUDA code (a bug in mlc); the "
                           "source is %s", src);
    if (progress) fprintf(progress, !st ? " %.1f s\n" : "\n", mlc_now() - t0);
    if (!st && !(b->image = mlc_read_file(out, &b->image_bytes)))
      st = mlc_status_make(MLC_INTERNAL, "nvcc wrote no %s", out);
    if (!st && cached) mlc_write_file(cache, b->image, b->image_bytes);
  }
  if (!st) {
    remove(src);
    remove(out);
    rmdir(dir);
  }
  return st;
}

mlc_status mlc_cuda_build_program(mlc_program *p, mlc_cuda_build *b, bool compile, FILE *progress) {
  memset(b, 0, sizeof *b);
  b->p = p;
  double t0 = mlc_now();
  MLC_RETURN_IF_ERROR(mlc_cuda_emit(p, &b->mod));
  uint32_t steps = 0;
  for (uint32_t k = 0; k < p->nfuncs; k++)
    for (uint32_t i = 0; i < p->funcs[k].n; i++) steps += b->mod.kernel_of[k][i] != UINT32_MAX;
  if (progress)
    fprintf(progress, "mlc: emitted CUDA C for %u steps: %u distinct kernels, %zu KiB of source, in %.2f s\n", steps,
            b->mod.nkernels, b->mod.source_len / 1024, mlc_now() - t0);
  if (compile && find_nvcc(b->nvcc, sizeof b->nvcc)) {
    MLC_RETURN_IF_ERROR(run_nvcc(b, progress));
  } else {
    if (compile && progress) fprintf(progress, "mlc: no nvcc found: the runtime will compile the kernels with NVRTC\n");
    b->nvcc[0] = 0;
  }
  /* The plan carries the code: the fatbin, or the source for NVRTC. */
  mlc_plan_code code;
  if (b->image)
    mlc_plan_code_cuda(p->arena, b->mod.kernels, b->mod.nkernels, MLC_PLAN_FORMAT_CUDA_FATBIN, b->image, b->image_bytes,
                       &code);
  else
    mlc_plan_code_cuda(p->arena, b->mod.kernels, b->mod.nkernels, MLC_PLAN_FORMAT_CUDA_SOURCE, b->mod.source,
                       b->mod.source_len, &code);
  mlc_plan_encode_code(p, mlc_cuda_kernel_namer, &b->mod, mlc_cuda_kernel_unit, &code, &b->plan, &b->plan_bytes);
  return NULL;
}

mlc_status mlc_cuda_write_artifact(mlc_cuda_build *b, const char *dir, const char *source) {
  mlc_program *p = b->p;
  MLC_RETURN_IF_ERROR(mlc_artifact_mkdir(dir));
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.cu", dir, p->name);
  MLC_RETURN_IF_ERROR(write_all(path, b->mod.source, b->mod.source_len));
  if (b->image) {
    snprintf(path, sizeof path, "%s/%s.fatbin", dir, p->name);
    MLC_RETURN_IF_ERROR(write_all(path, b->image, b->image_bytes));
  }
  mlc_artifact a = {.dir = dir, .source = source, .plan = b->plan, .plan_bytes = b->plan_bytes,
                    .device_driver = "cuda"};
  return mlc_artifact_write(p, &a);
}

mlc_status mlc_cuda_open(mlc_cuda_build *b, int ordinal, FILE *progress, mlc_device **out) {
  if (!b->parsed) MLC_RETURN_IF_ERROR(mlc_plan_parse(b->plan, b->plan_bytes, mlc_allocator_default(), &b->parsed));
  mlc_device_options o = {.allocator = mlc_allocator_default(), .plan = b->parsed, .progress = progress};
  return mlc_device_create("cuda", ordinal, &o, out);
}

void mlc_cuda_build_free(mlc_cuda_build *b) {
  free(b->image);
  b->image = NULL;
  mlc_plan_free(b->parsed);
  b->parsed = NULL;
}

/* The descriptor's operations (driver/target.h). */

mlc_status mlc_cuda_target_build(void *b, mlc_program *p, FILE *progress, int rank) {
  (void)rank;
  return mlc_cuda_build_program(p, b, true, progress);
}

mlc_status mlc_cuda_target_write(void *vb, const char *dir, const char *source, mlc_target_files *out) {
  mlc_cuda_build *b = vb;
  mlc_program *p = b->p;
  out->what = b->image ? mlc_arena_printf(p->arena, "%s.cu, %s.fatbin, %s.mlcplan (the plan with its kernels)", p->name,
                                          p->name, p->name)
                       : mlc_arena_printf(p->arena, "%s.cu (no nvcc: NVRTC compiles it at run time), %s.mlcplan (the "
                                          "plan with its kernels)", p->name, p->name);
  return mlc_cuda_write_artifact(b, dir, source);
}

mlc_status mlc_cuda_target_open(void *vb, int ordinal, FILE *progress, int rank, mlc_session_options *so,
                                const uint8_t **plan, size_t *plan_bytes) {
  mlc_cuda_build *b = vb;
  *plan = b->plan;
  *plan_bytes = b->plan_bytes;
  return mlc_cuda_open(b, ordinal, rank ? NULL : progress, &so->device);
}

void mlc_cuda_target_release(void *b) { mlc_cuda_build_free(b); }

bool mlc_cuda_target_supports_op(mlc_op op, char *why, size_t whyn) {
  if (mlc_cuda_supports_op(op)) return true;
  snprintf(why, whyn, "%s: the cuda target has no kernel for this op", mlc_ops[op].name);
  return false;
}
