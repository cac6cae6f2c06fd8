/* opcheck: compile a .mdl model for a target, run it once on deterministic
 * pseudo-random inputs and parameters, and write everything to a directory
 * so that opcheck.py can recompute it with PyTorch and compare.
 *
 *   mlc_opcheck MODEL.mdl OUTDIR [options] [NAME=VALUE ...]
 *   mlc_opcheck --op OP OUTDIR --in NAME:TYPE ... [op options] [options]
 *
 * The second form builds a one-op function by hand, for the ops the
 * frontend cannot write (the gradient ops that only autodiff creates): the
 * op's operands in order are the --in inputs and --const constants, and its
 * result is the output `output`.
 *     --in NAME:TYPE       an input, TYPE as in IR: f32[2, 3], i64[], bf16[7]
 *     --const VALUE:TYPE   a CONST operand
 *     --shape D0,D1,...    the node's result shape, for ops that take it
 *                          from the builder (broadcast, slice_grad, ...)
 *     --dtype DT           the node's result dtype, for ops that take it from
 *                          the builder (cast, quant, scaled_mm)
 *     --attr KEY=VALUE     axis, axis2, start, end, keepdim, causal, stream, seed
 *                          (integers), eps, scale, p (reals)
 *     --func NAME          entry point to run (default: forward)
 *     --entry MODULE       module to compile (as mlc compile --entry)
 *     --threads N          thread-pool size (default 1)
 *     --seed S             random seed (default 1)
 *     --range NAME=LO,HI[,int]  values of input NAME are uniform in [LO, HI)
 *                          (integers: LO..HI-1; `int`: floats rounded down to
 *                          integers, so that exact zeros occur); default
 *                          [-2, 2) and 0..15
 *     --input-file NAME=PATH  input NAME's raw bytes (row-major, its dtype)
 *                          instead of random values
 *     --bench N            after the checked run, time N more runs
 *     --target cpu|cuda|metal|spirv  where to run (default cpu); cuda compiles with
 *                          nvcc or NVRTC and runs on GPU 0 through a session;
 *                          metal runs the emitted MSL as C++ on the CPU
 *                          (tests/metal/msl_emu.hpp, clang++ or $MLC_EMU_CXX);
 *                          spirv runs on Vulkan device $MLC_VK_DEVICE (default
 *                          0), exit 77 without a Vulkan driver, and fails on
 *                          any validation message (MLC_VK_VALIDATE=1)
 *     --quantize=Q, --f32-matmul=M, --spirv-*=V, --cuda-*=V  as mlc's options
 *                          (--quantize: the packed weights from the drawn
 *                          f32 ones, as the runtime packs them at load)
 *     --cpu NAME           target this LLVM CPU instead of the host
 *     --features STR       with --cpu: LLVM features, e.g. +avx2,+fma,+f16c
 *                          (default none beyond the CPU's own)
 *     --vw N               f32 lanes per vector (default: from the features)
 *     --emit-ir FILE       also write the optimised LLVM IR
 *     --emit-obj FILE      also write the object file
 *     --so FILE            run the kernels from this shared library (an
 *                          object from --emit-obj, linked with cc -shared)
 *                          instead of the JIT
 *
 * OUTDIR gets <kind>.<name>.bin for every input, parameter and output (raw
 * little-endian, row-major, in the tensor's dtype; bf16 and f16 as their
 * 16-bit patterns) and manifest.txt, one line per tensor
 *     input|param|state|output NAME DTYPE RANK DIM...
 * (state: optimizer state, a parameter outside the state_dict)
 * plus `target CPU VECTOR_WIDTH` (GPUs: `target NAME 0`), `compile BUILD_S
 * OPT_S` and, with --bench, `bench MEDIAN_S MIN_S` (and the session's
 * profile table, per step, on standard output); on the CPU also
 * `kernel NAME ITEMS FLOPS BYTES 0`, one per kernel.
 *
 * Every target runs through a session (runtime/session.h), as mlc run
 * does; on the CPU its memory starts as 0xff bytes rather than zeros, so
 * that an element a kernel forgets to write shows up.
 *
 * Parameters are drawn from their initialiser's distribution, except that
 * `ones` and `zeros` become 1 +- 0.5 and +-0.1 so the test sees them used,
 * and optimizer state is uniform in [0, 0.1).  A run of the train entry
 * also writes every parameter and state tensor after the update as
 * `updated` (updated.NAME.bin), so the optimizer can be checked, and a run
 * of a decode entry (prefill, step) every KV cache after it.
 */
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "frontend/frontend.h"
#include "passes/passes.h"
#include "runtime/cpu/convert.h"
#ifdef MLC_HAVE_CPU
#include "codegen/llvm/llvm.h"
#include "codegen/plan.h"
#include "runtime/cpu/device.h"
#include "runtime/plan.h"
#include "runtime/profile.h"
#include "runtime/session.h"
#endif
#ifdef MLC_HAVE_CUDA
#include "driver/target_cuda.h"
#include "driver/target_metal.h"
#include "runtime/plan.h"
#include "runtime/session.h"
#include "tests/metal/emu_device.h"
#endif
#ifdef MLC_HAVE_SPIRV
#include "driver/target_spirv.h"
#include "runtime/plan.h"
#include "runtime/session.h"
#include "runtime/vulkan/device.h"
#endif

#define MAX_RANGES 64
#define MAX_DEFINES 64

typedef struct {
  const char *name;
  double lo, hi;
  bool integer;
  const char *file; /* --input-file: the input's bytes, not a range */
} range;

#define MAX_OPERANDS 16

/* --op: one operand, an input or a constant. */
typedef struct {
  const char *name; /* NULL for a constant */
  double value;
  mlc_type type;
} operand;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "opcheck: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  exit(1);
}

static void check(mlc_status st, const char *what) {
  if (!st) return;
  fprintf(stderr, "opcheck: %s: %s\n", what, mlc_status_message(st));
  mlc_status_free(st);
  exit(1);
}

/* ---- deterministic random numbers: splitmix64 ---- */

static uint64_t rng_next(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static double rng_uniform(uint64_t *s) { return (double)(rng_next(s) >> 11) * 0x1.0p-53; }

static double rng_normal(uint64_t *s) {
  double u = rng_uniform(s), v = rng_uniform(s);
  return sqrt(-2.0 * log(u > 0 ? u : 1e-300)) * cos(6.283185307179586 * v);
}

/* Fills n elements of dtype dt; gen(i) gives element i as a double. */
typedef double (*gen_fn)(uint64_t *s, const void *ctx);

static void fill(void *dst, int dt, int64_t n, uint64_t *s, gen_fn gen, const void *ctx) {
  for (int64_t i = 0; i < n; i++) {
    double v = gen(s, ctx);
    switch (dt) {
    case MLC_DT_F32: ((float *)dst)[i] = (float)v; break;
    case MLC_DT_BF16: ((uint16_t *)dst)[i] = mlc_f32_to_bf16((float)v); break;
    case MLC_DT_F16: ((uint16_t *)dst)[i] = mlc_f32_to_f16((float)v); break;
    case MLC_DT_I32: ((int32_t *)dst)[i] = (int32_t)v; break;
    case MLC_DT_I64: ((int64_t *)dst)[i] = (int64_t)v; break;
    case MLC_DT_BOOL: ((uint8_t *)dst)[i] = v != 0; break;
    case MLC_DT_F8E4M3: case MLC_DT_F8E5M2: ((uint8_t *)dst)[i] = 0; break; /* f8 inputs come from --input-file */
    default: die("unsupported dtype %d", dt);
    }
  }
}

typedef struct {
  double lo, hi;
  bool integer;
} uni;

static double gen_uniform(uint64_t *s, const void *ctx) {
  const uni *u = ctx;
  double v = u->lo + (u->hi - u->lo) * rng_uniform(s);
  return u->integer ? floor(v) : v;
}

static double gen_param(uint64_t *s, const void *ctx) {
  const mlc_param *p = ctx;
  /* Optimizer state in [0, 0.1): AdamW's second moment must not be negative. */
  if (p->role == MLC_ROLE_OPT_STATE) return 0.1 * rng_uniform(s);
  switch (p->init) {
  case MLC_INIT_NORMAL: return p->init_a + p->init_b * rng_normal(s);
  case MLC_INIT_UNIFORM: return p->init_a + (p->init_b - p->init_a) * rng_uniform(s);
  case MLC_INIT_ONES: return 0.5 + rng_uniform(s);
  default: return 0.2 * rng_uniform(s) - 0.1;
  }
}

static size_t tensor_bytes(const mlc_type *t) { return (size_t)mlc_type_numel(t) * (size_t)mlc_dtype_size(t->dtype); }

static void write_tensor(FILE *man, const char *dir, const char *kind, const char *name, const mlc_type *t,
                         const void *data) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.%s.bin", dir, kind, name);
  FILE *f = fopen(path, "wb");
  if (!f) die("cannot write %s: %s", path, strerror(errno));
  size_t n = tensor_bytes(t);
  if (n && fwrite(data, 1, n, f) != n) die("cannot write %s", path);
  fclose(f);
  fprintf(man, "%s %s %s %d", kind, name, mlc_dtype_name(t->dtype), t->rank);
  for (int i = 0; i < t->rank; i++) fprintf(man, " %lld", (long long)t->dim[i]);
  fprintf(man, "\n");
}

static char *read_all(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) die("cannot open %s: %s", path, strerror(errno));
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) die("cannot read %s", path);
  buf[n] = 0;
  fclose(f);
  *len = (size_t)n;
  return buf;
}

/* "f32[2, 3]" (spaces optional; "f32[]" is a scalar). */
static mlc_type parse_type(const char *s) {
  mlc_type t = {0};
  const char *lb = strchr(s, '[');
  if (!lb || !(t.dtype = mlc_dtype_from_name(s, (size_t)(lb - s)))) die("bad type '%s'", s);
  const char *p = lb + 1;
  while (*p == ' ') p++;
  while (*p != ']') {
    char *end;
    long long d = strtoll(p, &end, 10);
    if (end == p || t.rank == MLC_MAX_RANK) die("bad type '%s'", s);
    t.dim[t.rank++] = d;
    p = end;
    while (*p == ' ' || *p == ',') p++;
    if (!*p) die("bad type '%s'", s);
  }
  return t;
}

/* The --op form: inputs and constants, then the op, as the one output. */
static void build_op(mlc_program *prog, const char *opname, const operand *ops, int nops, const mlc_type *shape,
                     const mlc_attrs *attrs) {
  int op = -1;
  for (int i = 0; i < MLC_OP_COUNT; i++)
    if (!strcmp(mlc_ops[i].name, opname)) op = i;
  if (op < 0) die("no op '%s'", opname);
  mlc_func *f = mlc_program_add_func(prog, "forward");
  uint32_t in[MAX_OPERANDS];
  mlc_loc loc = {0};
  for (int i = 0; i < nops; i++) {
    mlc_attrs a = {.name = ops[i].name, .f = ops[i].value};
    in[i] = mlc_func_add(prog, f, ops[i].name ? MLC_OP_INPUT : MLC_OP_CONST, NULL, 0, &a, loc, "");
    f->nodes[in[i]].type = ops[i].type;
    if (ops[i].name) mlc_u32vec_push(prog->arena, &f->inputs, in[i]);
  }
  mlc_attrs a = *attrs;
  if (mlc_ops[op].attrs & MLC_A_AXIS) { /* the builder's job: normalise to 0..rank-1 */
    int rank = shape->rank ? shape->rank : nops ? ops[0].type.rank : 0;
    if (a.axis < 0) a.axis += rank;
    if (a.axis2 < 0) a.axis2 += rank;
  }
  uint32_t id = mlc_func_add(prog, f, (mlc_op)op, in, (uint32_t)nops, &a, loc, "");
  f->nodes[id].type = *shape;
  mlc_type t;
  char err[256];
  if (!mlc_infer_type(prog, f, &f->nodes[id], &t, err, sizeof err)) die("%s: %s", opname, err);
  f->nodes[id].type = t;
  mlc_func_add_output(prog, f, "output", id);
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Where generated parameters and inputs go: a session (see session_sink). */
typedef struct {
  void (*param)(void *ctx, uint32_t i, const void *data, size_t n);
  void (*input)(void *ctx, const char *name, const void *data, size_t n);
  void *ctx;
} sink;

/* Parameters first, then inputs, each from its own stream; every tensor
 * also goes to the manifest. */
static void generate(const mlc_program *prog, const mlc_func *f, uint64_t seed, const range *ranges, int nranges,
                     FILE *man, const char *outdir, const sink *to) {
  uint64_t s = seed * 0x2545f4914f6cdd1dull;
  for (uint32_t i = 0; i < prog->nparams; i++) {
    const mlc_param *prm = &prog->params[i];
    if (prm->role == MLC_ROLE_QUANT) continue; /* packed from its f32 weight (run_session) */
    size_t n = tensor_bytes(&prm->type);
    void *data = malloc(n ? n : 1);
    fill(data, prm->type.dtype, mlc_type_numel(&prm->type), &s, gen_param, prm);
    to->param(to->ctx, i, data, n);
    /* optimizer state is not in the state_dict the references load */
    write_tensor(man, outdir, prm->role == MLC_ROLE_WEIGHT ? "param" : "state", prm->name, &prm->type, data);
    free(data);
  }
  for (uint32_t i = 0; i < f->inputs.n; i++) {
    const mlc_node *in = &f->nodes[f->inputs.v[i]];
    bool integer = !mlc_dtype_is_float(in->type.dtype);
    uni u = {-2, 2, integer};
    if (integer) u = (uni){0, in->type.dtype == MLC_DT_BOOL ? 2 : 16, true};
    for (int r = 0; r < nranges; r++)
      if (!strcmp(ranges[r].name, in->a.name)) u = (uni){ranges[r].lo, ranges[r].hi, integer || ranges[r].integer};
    size_t n = tensor_bytes(&in->type);
    void *data = malloc(n ? n : 1);
    fill(data, in->type.dtype, mlc_type_numel(&in->type), &s, gen_uniform, &u);
    for (int r = 0; r < nranges; r++) {
      if (!ranges[r].file || strcmp(ranges[r].name, in->a.name)) continue;
      FILE *fp = fopen(ranges[r].file, "rb");
      if (!fp) die("--input-file %s: cannot open %s", in->a.name, ranges[r].file);
      size_t got = fread(data, 1, n, fp);
      bool more = fgetc(fp) != EOF;
      fclose(fp);
      if (got != n || more) die("--input-file %s: %s does not hold exactly the %zu bytes of the input", in->a.name, ranges[r].file, n);
    }
    to->input(to->ctx, in->a.name, data, n);
    write_tensor(man, outdir, "input", in->a.name, &in->type, data);
    free(data);
  }
}

#if defined(MLC_HAVE_CPU) || defined(MLC_HAVE_CUDA) || defined(MLC_HAVE_SPIRV)
typedef struct {
  mlc_session *s;
  const char *entry;
} session_sink;

static void session_param(void *ctx, uint32_t i, const void *data, size_t n) {
  session_sink *k = ctx;
  void *p = mlc_session_param_data(k->s, i);
  if (!p) die("cannot reach the parameters");
  memcpy(p, data, n);
}
static void session_input(void *ctx, const char *name, const void *data, size_t n) {
  session_sink *k = ctx;
  if (!strncmp(name, "opt.", 4)) return; /* the session sets them: step count, learning rate */
  check(mlc_session_set_input(k->s, k->entry, name, data, n), "input");
}

/* Every target: the program through its code generator and a session on
 * its device, then the manifest.  The caller has written its target and
 * compile lines. */
static int run_session(mlc_program *prog, const mlc_func *f, const char *outdir, FILE *man, uint64_t seed,
                       const range *ranges, int nranges, int bench, const uint8_t *plan_bytes, size_t plan_n,
                       mlc_device *dev) {
  mlc_plan *plan;
  check(mlc_plan_parse(plan_bytes, plan_n, mlc_allocator_default(), &plan), "plan");
  mlc_session_options so = {dev, NULL, NULL, 0, bench > 0, {0}, NULL};
  mlc_session *s;
  check(mlc_session_create(plan, &so, &s), "session");
  session_sink k = {s, f->name};
  sink to = {session_param, session_input, &k};
  generate(prog, f, seed, ranges, nranges, man, outdir, &to);
  /* --quantize: the packed weights come from the f32 ones as the runtime
   * packs them at load, so the weights go out to a file and back in. */
  for (uint32_t i = 0; i < prog->nparams; i++) {
    if (prog->params[i].role != MLC_ROLE_QUANT) continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/weights.safetensors", outdir);
    check(mlc_session_save_weights(s, path), "save the weights to pack");
    check(mlc_session_load_weights(s, path), "load the weights to pack");
    break;
  }
  check(mlc_session_run(s, f->name), "run");
  for (uint32_t i = 0; i < f->noutputs; i++) {
    const void *data;
    const mlc_plan_shape *shape;
    check(mlc_session_output(s, f->name, f->outputs[i].name, &data, &shape), "output");
    write_tensor(man, outdir, "output", f->outputs[i].name, &f->nodes[f->outputs[i].node].type, data);
  }
  for (uint32_t i = 0; i < prog->nparams; i++) {
    if (strcmp(f->name, "train") && prog->params[i].role != MLC_ROLE_CACHE) continue;
    const void *data = mlc_session_param_data(s, i);
    if (!data) die("cannot read the parameters back");
    write_tensor(man, outdir, "updated", prog->params[i].name, &prog->params[i].type, data);
  }
  if (bench > 0) {
    double *times = calloc((size_t)bench, sizeof *times);
    check(mlc_session_run(s, f->name), "warm-up run");
    mlc_session_reset_profile(s);
    for (int r = 0; r < bench; r++) {
      double ta = now();
      check(mlc_session_run(s, f->name), "benchmark run");
      times[r] = now() - ta;
    }
    qsort(times, (size_t)bench, sizeof *times, cmp_double);
    fprintf(man, "bench %.9g %.9g\n", times[bench / 2], times[0]);
    free(times);
    mlc_session_print_profile(s, f->name, stdout);
  }
  fclose(man);
  mlc_session_destroy(s);
  mlc_plan_free(plan);
  return 0;
}
#endif

#ifdef MLC_HAVE_CUDA
/* CUDA: nvcc or NVRTC, GPU 0. */
static int run_cuda(mlc_program *prog, const mlc_func *f, const char *outdir, FILE *man, uint64_t seed,
                    const range *ranges, int nranges, int bench) {
  mlc_cuda_build b;
  double t0 = now();
  mlc_status st = mlc_cuda_build_program(prog, &b, true, stderr);
  if (st) die("cuda: %s", mlc_status_message(st));
  double t1 = now();
  mlc_device *dev;
  check(mlc_cuda_open(&b, 0, stderr, &dev), "cuda device");
  fprintf(man, "target cuda 0\ncompile %.6f 0\n", t1 - t0);
  int rc = run_session(prog, f, outdir, man, seed, ranges, nranges, bench, b.plan, b.plan_bytes, dev);
  mlc_cuda_build_free(&b);
  return rc;
}

/* Metal, emulated: the MSL compiled as C++ against tests/metal/msl_emu.hpp
 * (MLC_SOURCE_DIR, or $MLC_MSL_EMU) and run on the CPU. */
static int run_metal(mlc_program *prog, const mlc_func *f, const char *outdir, FILE *man, uint64_t seed,
                     const range *ranges, int nranges, int bench) {
  char metal[4096], so[4096], log[4096], header[4096];
  mlc_metal_build b;
  double t0 = now();
  mlc_status st = mlc_metal_build_program(prog, &b, NULL);
  if (st) die("metal: %s", mlc_status_message(st));
  snprintf(metal, sizeof metal, "%s/model.metal", outdir);
  snprintf(so, sizeof so, "%s/model.so", outdir);
  snprintf(log, sizeof log, "%s/cxx.log", outdir);
  const char *env = getenv("MLC_MSL_EMU");
  snprintf(header, sizeof header, "%s", env && *env ? env : MLC_SOURCE_DIR "/tests/metal/msl_emu.hpp");
  FILE *fm = fopen(metal, "wb");
  if (!fm || fwrite(b.mod.source, 1, b.mod.source_len, fm) != b.mod.source_len || fclose(fm)) die("cannot write %s", metal);
  check(mlc_emu_compile(metal, so, header, log), "metal");
  double t1 = now();
  mlc_device *dev;
  check(mlc_emu_device_create(so, b.mod.kernels, b.mod.nkernels, mlc_allocator_default(), &dev), "emulated metal device");
  fprintf(man, "target metal-emu 0\ncompile %.6f 0\n", t1 - t0);
  return run_session(prog, f, outdir, man, seed, ranges, nranges, bench, b.plan, b.plan_bytes, dev);
}
#endif
#ifdef MLC_HAVE_SPIRV
/* Vulkan: the SPIR-V modules on device $MLC_VK_DEVICE; any validation
 * message fails the case. */
static int run_spirv(mlc_program *prog, const mlc_func *f, const char *outdir, FILE *man, uint64_t seed,
                     const range *ranges, int nranges, int bench) {
  mlc_spirv_build b;
  double t0 = now();
  mlc_status st = mlc_spirv_build_program(prog, &b, NULL);
  if (st) die("spirv: %s", mlc_status_message(st));
  double t1 = now();
  const char *env = getenv("MLC_VK_DEVICE");
  uint32_t messages = 0;
  mlc_plan *pl; /* the device takes its kernels from the plan, as mlc run's does */
  check(mlc_plan_parse(b.plan, b.plan_bytes, mlc_allocator_default(), &pl), "plan");
  mlc_vk_code code = {.ordinal = env && *env ? atoi(env) : 0, .progress = stderr, .messages = &messages, .plan = pl};
  mlc_device *dev;
  st = mlc_vk_device_create(&code, mlc_allocator_default(), &dev);
  if (st && mlc_status_code(st) == MLC_UNIMPLEMENTED && strstr(mlc_status_message(st), "no Vulkan")) {
    fprintf(stderr, "skipped: %s\n", mlc_status_message(st));
    exit(77);
  }
  check(st, "vulkan device");
  fprintf(man, "target spirv 0\ncompile %.6f 0\n", t1 - t0);
  int rc = run_session(prog, f, outdir, man, seed, ranges, nranges, bench, b.plan, b.plan_bytes, dev);
  mlc_plan_free(pl);
  if (messages) die("%u Vulkan validation messages (above)", messages);
  return rc;
}
#endif

#ifdef MLC_HAVE_CPU
/* The CPU: entry point f through the LLVM code generator (--cpu,
 * --features, --vw), its kernels from the JIT or from a shared library
 * (--so), run by a session on a device from the runtime's registry, as
 * `mlc run --target cpu` runs them. */
typedef struct {
  const mlc_func *f;
  mlc_llvm_module *mod;
  uint32_t *kernel_of; /* per node of f: its kernel's index in mod, or UINT32_MAX */
  mlc_llvm_jit *jit;
  void *lib;
} cpu_code;

/* The plan's kernel names: f's, as the module names them; the program's
 * other entry points get no steps (they are never run). */
static const char *cpu_namer(void *ctx, const mlc_func *f, uint32_t node, uint64_t *out_work) {
  cpu_code *c = ctx;
  if (f != c->f || c->kernel_of[node] == UINT32_MAX) return NULL;
  const mlc_llvm_kernel *k = mlc_llvm_kernel_at(c->mod, c->kernel_of[node]);
  *out_work = (uint64_t)k->items;
  return k->name;
}

static void *cpu_lookup(void *ctx, const char *symbol) {
  cpu_code *c = ctx;
  return c->lib ? dlsym(c->lib, symbol) : mlc_llvm_jit_symbol(c->jit, symbol);
}

/* The CPU device with every allocation filled with 0xff bytes (NaN, -1)
 * instead of zeros: what the session writes (parameters, inputs,
 * constants) goes over it, so an element a kernel forgets to write shows
 * up instead of reading as 0. */
static mlc_device_vt poison_vt;
static mlc_status (*zeroed_alloc)(mlc_device *d, uint64_t bytes, uint64_t *out);

static mlc_status poison_alloc(mlc_device *d, uint64_t bytes, uint64_t *out) {
  MLC_RETURN_IF_ERROR(zeroed_alloc(d, bytes, out));
  memset((void *)(uintptr_t)*out, 0xff, bytes);
  return NULL;
}

static int run_cpu(mlc_program *prog, const mlc_func *f, const char *outdir, FILE *man, uint64_t seed,
                   const range *ranges, int nranges, int bench, const mlc_llvm_options *lopt, int threads,
                   const char *so, const char *emit_ir, const char *emit_obj) {
  cpu_code c = {.f = f};
  mlc_status st = mlc_llvm_compile(prog, f, lopt, &c.mod);
  if (st) die("compile: %s", mlc_status_message(st));
  if (emit_ir && (st = mlc_llvm_emit_ir(c.mod, emit_ir))) die("%s", mlc_status_message(st));
  if (emit_obj && (st = mlc_llvm_emit_object(c.mod, emit_obj))) die("%s", mlc_status_message(st));
  if (so) {
    if (!(c.lib = dlopen(so, RTLD_NOW | RTLD_LOCAL))) die("dlopen %s: %s", so, dlerror());
  } else if ((st = mlc_llvm_jit_create(c.mod, &c.jit))) {
    die("jit: %s", mlc_status_message(st));
  }
  uint32_t nk = mlc_llvm_kernel_count(c.mod);
  c.kernel_of = malloc((f->n + 1) * sizeof *c.kernel_of);
  if (!c.kernel_of) die("out of memory");
  for (uint32_t i = 0; i < f->n; i++) c.kernel_of[i] = UINT32_MAX;
  for (uint32_t i = 0; i < nk; i++) {
    const mlc_llvm_kernel *k = mlc_llvm_kernel_at(c.mod, i);
    c.kernel_of[k->node] = i;
    if (c.lib && !dlsym(c.lib, k->name)) die("%s has no kernel %s", so, k->name);
    if (c.jit) { /* the JIT finds each kernel by index and by name alike */
      mlc_cpu_kernel_fn fn = mlc_llvm_jit_kernel(c.jit, i);
      void *by_name = mlc_llvm_jit_symbol(c.jit, k->name);
      if (!fn || memcmp(&fn, &by_name, sizeof fn)) die("jit: kernel %s by name and by index differ", k->name);
    }
  }
  uint8_t *plan;
  size_t plan_n;
  mlc_plan_encode(prog, cpu_namer, &c, &plan, &plan_n);

  mlc_cpu_code code = {cpu_lookup, &c, threads};
  mlc_device_options o = {.allocator = mlc_allocator_default(), .code_kind = MLC_CODE_CPU, .code = &code};
  mlc_device *dev;
  check(mlc_device_create("cpu", 0, &o, &dev), "cpu device");
  poison_vt = *dev->vt;
  zeroed_alloc = poison_vt.alloc;
  poison_vt.alloc = poison_alloc;
  dev->vt = &poison_vt;

  for (uint32_t i = 0; i < nk; i++) {
    const mlc_llvm_kernel *k = mlc_llvm_kernel_at(c.mod, i);
    fprintf(man, "kernel %s %lld %.17g %.17g 0\n", k->name, (long long)k->items, k->flops, k->bytes);
  }
  double tb, to;
  mlc_llvm_compile_seconds(c.mod, &tb, &to);
  fprintf(man, "target %s %d\ncompile %.6f %.6f\n", mlc_llvm_target_cpu(c.mod), mlc_llvm_vector_width(c.mod), tb, to);
  int rc = run_session(prog, f, outdir, man, seed, ranges, nranges, bench, plan, plan_n, dev);
  free(c.kernel_of);
  mlc_llvm_jit_destroy(c.jit);
  if (c.lib) dlclose(c.lib);
  mlc_llvm_module_destroy(c.mod);
  return rc;
}
#endif

int main(int argc, char **argv) {
  const char *model = NULL, *outdir = NULL, *func = "forward", *entry = NULL, *emit_ir = NULL, *emit_obj = NULL;
  const char *so = NULL, *opname = NULL;
  operand operands[MAX_OPERANDS];
  int noperands = 0;
  mlc_type shape = {0};
  mlc_attrs attrs = {0};
  int threads = 1, bench = 0;
  const char *target = "cpu";
#ifdef MLC_HAVE_CPU
  mlc_llvm_options lopt = {0};
#endif
  uint64_t seed = 1;
  mlc_options opts = {0};
  range ranges[MAX_RANGES];
  int nranges = 0;
  mlc_define defines[MAX_DEFINES];
  uint32_t ndefines = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *next = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--threads") && next) threads = atoi(argv[++i]);
    else if (!strcmp(a, "--seed") && next) seed = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(a, "--bench") && next) bench = atoi(argv[++i]);
    else if (!strcmp(a, "--func") && next) func = argv[++i];
    else if (!strcmp(a, "--entry") && next) entry = argv[++i];
    else if (!strcmp(a, "--emit-ir") && next) emit_ir = argv[++i];
    else if (!strcmp(a, "--target") && next) target = argv[++i];
#ifdef MLC_HAVE_CPU
    else if (!strcmp(a, "--cpu") && next) lopt.cpu = argv[++i];
    else if (!strcmp(a, "--features") && next) lopt.features = argv[++i];
    else if (!strcmp(a, "--vw") && next) lopt.vector_width = atoi(argv[++i]);
#endif
    else if (!strncmp(a, "--f32-matmul=", 13) || !strncmp(a, "--spirv-", 8) || !strncmp(a, "--cuda-", 7) ||
             !strncmp(a, "--quantize=", 11)) { /* options of emitted code, as mlc's */
      char name[64], err[256];
      const char *eq = strchr(a, '=');
      snprintf(name, sizeof name, "%.*s", (int)(eq ? eq - a - 2 : (long)strlen(a) - 2), a + 2);
      if (!mlc_options_set(&opts, name, eq ? eq + 1 : NULL, err, sizeof err)) die("%s", err);
    }
    else if (!strcmp(a, "--emit-obj") && next) emit_obj = argv[++i];
    else if (!strcmp(a, "--so") && next) so = argv[++i];
    else if (!strcmp(a, "--range") && next) {
      char *spec = argv[++i], *eq = strchr(spec, '='), *comma = eq ? strchr(eq, ',') : NULL;
      if (!eq || !comma || nranges == MAX_RANGES) die("--range wants NAME=LO,HI[,int], got '%s'", spec);
      *eq = 0;
      char *flag = strchr(comma + 1, ',');
      ranges[nranges++] = (range){spec, atof(eq + 1), atof(comma + 1), flag && !strcmp(flag, ",int"), NULL};
    } else if (!strcmp(a, "--input-file") && next) {
      char *spec = argv[++i], *eq = strchr(spec, '=');
      if (!eq || nranges == MAX_RANGES) die("--input-file wants NAME=PATH, got '%s'", spec);
      *eq = 0;
      ranges[nranges++] = (range){.name = spec, .file = eq + 1};
    } else if (!strcmp(a, "--dtype") && next) {
      shape.dtype = (uint8_t)mlc_dtype_from_name(argv[i + 1], strlen(argv[i + 1]));
      if (!shape.dtype) die("--dtype: no dtype '%s'", argv[i + 1]);
      i++;
    } else if (!strcmp(a, "--op") && next) {
      opname = argv[++i];
    } else if ((!strcmp(a, "--in") || !strcmp(a, "--const")) && next) {
      char *spec = argv[++i], *colon = strchr(spec, ':');
      if (!colon || noperands == MAX_OPERANDS) die("%s wants NAME:TYPE or VALUE:TYPE, got '%s'", a, spec);
      *colon = 0;
      bool in = !strcmp(a, "--in");
      operands[noperands++] = (operand){in ? spec : NULL, in ? 0 : atof(spec), parse_type(colon + 1)};
    } else if (!strcmp(a, "--shape") && next) {
      for (char *p = argv[++i]; *p;) {
        char *end;
        if (shape.rank == MLC_MAX_RANK) die("--shape: too many dimensions");
        shape.dim[shape.rank++] = strtoll(p, &end, 10);
        if (end == p) die("--shape wants D0,D1,..., got '%s'", argv[i]);
        p = *end == ',' ? end + 1 : end;
      }
    } else if (!strcmp(a, "--attr") && next) {
      char *kv = argv[++i], *eq = strchr(kv, '=');
      if (!eq) die("--attr wants KEY=VALUE, got '%s'", kv);
      *eq = 0;
      const char *v = eq + 1;
      if (!strcmp(kv, "axis")) attrs.axis = atoi(v);
      else if (!strcmp(kv, "axis2")) attrs.axis2 = atoi(v);
      else if (!strcmp(kv, "keepdim")) attrs.keepdim = atoi(v);
      else if (!strcmp(kv, "causal")) attrs.causal = atoi(v);
      else if (!strcmp(kv, "start")) attrs.start = atoll(v);
      else if (!strcmp(kv, "end")) attrs.end = atoll(v);
      else if (!strcmp(kv, "eps") || !strcmp(kv, "scale") || !strcmp(kv, "p")) attrs.f = atof(v);
      else if (!strcmp(kv, "stream")) attrs.start = atoll(v);
      else if (!strcmp(kv, "seed")) attrs.end = atoll(v);
      else die("--attr: unknown attribute '%s'", kv);
    } else if (a[0] != '-' && strchr(a, '=')) {
      if (ndefines == MAX_DEFINES) die("too many NAME=VALUE arguments");
      char *eq = strchr(a, '=');
      defines[ndefines].name = strndup(a, (size_t)(eq - a));
      defines[ndefines++].value = eq + 1;
    } else if (a[0] != '-' && !model && !opname) model = a;
    else if (a[0] != '-' && !outdir) outdir = a;
    else die("unexpected argument '%s' (usage: mlc_opcheck MODEL.mdl OUTDIR [options] [NAME=VALUE ...])", a);
  }
#ifdef MLC_HAVE_CPU
  if (lopt.cpu && !lopt.features) lopt.features = "";
  char cache[1024];
  if (mlc_cpu_cache_dir(cache, sizeof cache)) lopt.cache_dir = cache;
#endif
  if (!(model || opname) || !outdir) die("usage: mlc_opcheck MODEL.mdl OUTDIR [options] [NAME=VALUE ...]");
  if (mkdir(outdir, 0777) && errno != EEXIST) die("cannot create %s: %s", outdir, strerror(errno));

  /* front end (or the hand-built op) and passes */
  size_t len = 0;
  char *src = NULL;
  mlc_arena arena;
  mlc_arena_init(&arena);
  mlc_diag diag;
  mlc_diag_init(&diag, stderr);
  mlc_program prog;
  mlc_program_init(&prog, &arena);
  if (opname) {
    build_op(&prog, opname, operands, noperands, &shape, &attrs);
    model = opname;
  } else {
    src = read_all(model, &len);
    /* --quantize is inference only, as in mlc: no train step */
    mlc_lower_options lo = {.defines = defines, .ndefines = ndefines, .entry = entry, .no_train = opts.quant_bits != 0};
    if (!mlc_frontend_run(&prog, &diag, model, src, len, &lo, NULL)) die("%s does not compile", model);
  }
  mlc_options_apply(&prog, &opts);
  /* keep_grads: the train entry's gradients are compared with PyTorch's */
  mlc_pipeline_options po = {.target = target, .keep_grads = true};
  if (!mlc_pipeline_run(&prog, &diag, &po)) die("%s: the passes failed", model);
  const mlc_func *f = NULL;
  for (uint32_t i = 0; i < prog.nfuncs; i++)
    if (!strcmp(prog.funcs[i].name, func)) f = &prog.funcs[i];
  if (!f) die("%s has no entry point '%s'", model, func);

  char path[4096];
  snprintf(path, sizeof path, "%s/manifest.txt", outdir);
  FILE *man = fopen(path, "w");
  if (!man) die("cannot write %s: %s", path, strerror(errno));
  if (!strcmp(target, "cuda") || !strcmp(target, "metal")) {
#ifdef MLC_HAVE_CUDA
    int rc = (!strcmp(target, "cuda") ? run_cuda : run_metal)(&prog, f, outdir, man, seed, ranges, nranges, bench);
    mlc_arena_free(&arena);
    free(src);
    for (uint32_t i = 0; i < ndefines; i++) free((char *)defines[i].name);
    return rc;
#else
    die("this build has no CUDA target");
#endif
  }
  if (!strcmp(target, "spirv")) {
#ifdef MLC_HAVE_SPIRV
    int rc = run_spirv(&prog, f, outdir, man, seed, ranges, nranges, bench);
    mlc_arena_free(&arena);
    free(src);
    for (uint32_t i = 0; i < ndefines; i++) free((char *)defines[i].name);
    return rc;
#else
    die("this build has no SPIR-V target");
#endif
  }
  if (strcmp(target, "cpu")) die("--target %s: expected cpu, cuda, metal or spirv", target);
#ifndef MLC_HAVE_CPU
  (void)threads, (void)so, (void)emit_obj, (void)emit_ir;
  die("this build has no CPU target");
#else
  int rc = run_cpu(&prog, f, outdir, man, seed, ranges, nranges, bench, &lopt, threads, so, emit_ir, emit_obj);
  mlc_arena_free(&arena);
  free(src);
  for (uint32_t i = 0; i < ndefines; i++) free((char *)defines[i].name);
  return rc;
#endif
}
