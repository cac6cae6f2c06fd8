/* The CPU target's driver: from an IR function to an optimised LLVM module,
 * then to an object file or to JIT-compiled function pointers.
 *
 * Each node that computes something becomes two functions: the kernel with
 * the runtime's ABI, which loads its buffer pointers from `bufs` and calls
 * the body; and the body, which takes every buffer as a `noalias` pointer
 * (buffers never overlap, and saying so lets LLVM keep values in registers
 * across stores) and is always inlined into the kernel.  The body comes from
 * the op's emitter, found in the table `emitters` below.
 *
 * The JIT compiles the optimised module to an object in memory with the same
 * target machine that writes object files, and links that into an ORC
 * LLJIT, so both ways out run identical machine code.
 *
 * With options' cache_dir, that object is kept in a file named by XXH3 of
 * the unoptimised module's text, the CPU, its features and LLVM's version
 * (what decides the machine code).  A module seen before skips default<O3>
 * and code generation, most of a compile; the file carries its key, its
 * length and its hash, and one that does not match them (torn, truncated,
 * edited, another module's) is compiled again and replaced.
 */
#include "codegen/llvm/llvm.h"

#include <llvm-c/Analysis.h>
#include <llvm-c/Core.h>
#include <llvm-c/Error.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Orc.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>
#include <llvm/Config/llvm-config.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#include "codegen/llvm/cg.h"
#include "runtime/profile.h" /* mlc_read_file, mlc_write_file */

typedef bool (*emit_fn)(cg *g);

/* One emitter per op that gets a kernel.  Leaves and views have none. */
static const emit_fn emitters[MLC_OP_COUNT] = {
  [MLC_OP_ADD] = cg_emit_ew,        [MLC_OP_SUB] = cg_emit_ew,         [MLC_OP_MUL] = cg_emit_ew,
  [MLC_OP_DIV] = cg_emit_ew,        [MLC_OP_NEG] = cg_emit_ew,         [MLC_OP_EXP] = cg_emit_ew,
  [MLC_OP_LOG] = cg_emit_ew,        [MLC_OP_SQRT] = cg_emit_ew,        [MLC_OP_RSQRT] = cg_emit_ew,
  [MLC_OP_TANH] = cg_emit_ew,       [MLC_OP_SIGMOID] = cg_emit_ew,     [MLC_OP_RELU] = cg_emit_ew,
  [MLC_OP_SILU] = cg_emit_ew,       [MLC_OP_GELU] = cg_emit_ew,        [MLC_OP_CAST] = cg_emit_ew,
  [MLC_OP_SUM] = cg_emit_reduce,    [MLC_OP_MEAN] = cg_emit_reduce,    [MLC_OP_MAX] = cg_emit_reduce,
  [MLC_OP_SOFTMAX] = cg_emit_softmax,
  [MLC_OP_TRANSPOSE] = cg_emit_transpose, [MLC_OP_SLICE] = cg_emit_slice, [MLC_OP_CONCAT] = cg_emit_concat,
  [MLC_OP_MATMUL] = cg_emit_gemm,   [MLC_OP_LINEAR] = cg_emit_gemm,    [MLC_OP_EMBEDDING] = cg_emit_embedding,
  [MLC_OP_RMSNORM] = cg_emit_rmsnorm, [MLC_OP_LAYERNORM] = cg_emit_layernorm,
  [MLC_OP_ATTENTION] = cg_emit_attention, [MLC_OP_CROSS_ENTROPY] = cg_emit_cross_entropy,
  [MLC_OP_ATTENTION_KV] = cg_emit_attention,
  [MLC_OP_QLINEAR] = cg_emit_qlinear,
  [MLC_OP_QUANT] = cg_emit_ew,      [MLC_OP_SCALED_MM] = cg_emit_gemm,
  /* gradients */
  [MLC_OP_BROADCAST] = cg_emit_ew,  [MLC_OP_RELU_GRAD] = cg_emit_ew,   [MLC_OP_SILU_GRAD] = cg_emit_ew,
  [MLC_OP_GELU_GRAD] = cg_emit_ew,  [MLC_OP_SLICE_GRAD] = cg_emit_slice_grad,
  [MLC_OP_EMBEDDING_GRAD] = cg_emit_embedding_grad,
  [MLC_OP_RMSNORM_GRAD_X] = cg_emit_rmsnorm_grad_x, [MLC_OP_RMSNORM_GRAD_W] = cg_emit_rmsnorm_grad_w,
  [MLC_OP_LAYERNORM_GRAD_X] = cg_emit_layernorm_grad_x, [MLC_OP_LAYERNORM_GRAD_W] = cg_emit_layernorm_grad_w,
  [MLC_OP_ATTENTION_GRAD] = cg_emit_attention_grad, [MLC_OP_CROSS_ENTROPY_GRAD] = cg_emit_cross_entropy_grad,
  /* optimizer updates */
  [MLC_OP_ADAMW] = cg_emit_optim,   [MLC_OP_SGD] = cg_emit_optim,
  /* issue 27 */
  [MLC_OP_ABS] = cg_emit_ew,        [MLC_OP_ERF] = cg_emit_ew,         [MLC_OP_POW] = cg_emit_ew,
  [MLC_OP_CLAMP_MIN] = cg_emit_ew,  [MLC_OP_CLAMP_MAX] = cg_emit_ew,   [MLC_OP_GELU_TANH] = cg_emit_ew,
  [MLC_OP_LT] = cg_emit_ew,         [MLC_OP_LE] = cg_emit_ew,          [MLC_OP_EQ] = cg_emit_ew,
  [MLC_OP_NE] = cg_emit_ew,         [MLC_OP_WHERE] = cg_emit_ew,       [MLC_OP_ARANGE] = cg_emit_arange,
  [MLC_OP_GELU_TANH_GRAD] = cg_emit_ew,   [MLC_OP_MIN] = cg_emit_reduce,    [MLC_OP_ARGMAX] = cg_emit_argreduce,
  [MLC_OP_ARGMIN] = cg_emit_argreduce,  [MLC_OP_GATHER] = cg_emit_gather, [MLC_OP_GATHER_GRAD] = cg_emit_gather_grad,
  [MLC_OP_DROPOUT] = cg_emit_dropout,
};

struct mlc_llvm_module {
  bool f16c;
  LLVMContextRef ctx;
  LLVMModuleRef mod;
  LLVMTargetMachineRef tm;
  char *cpu, *features;
  int vw;
  mlc_llvm_kernel *kernels;
  uint32_t nkernels;
  double t_build, t_opt;
  bool optimised;        /* default<O3> ran (or no_opt asked for none) */
  char *cache_file;      /* the object's file in the cache; NULL: no cache */
  uint64_t cache_key;    /* XXH3 of what decides the object (the file's name) */
  LLVMMemoryBufferRef obj; /* the object from the cache, where it had one */
};

struct mlc_llvm_jit {
  LLVMOrcLLJITRef jit;
  mlc_cpu_kernel_fn *fns;
  uint32_t n;
};

static mlc_status fail(mlc_status_code_t code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static mlc_status fail(mlc_status_code_t code, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return mlc_status_make(code, "%s", msg);
}

/* Takes the message out of an LLVMErrorRef (consuming it): a failure
 * inside LLVM on code mlc generated, so MLC_INTERNAL. */
static mlc_status fail_llvm(const char *what, LLVMErrorRef e) {
  char *m = LLVMGetErrorMessage(e);
  mlc_status st = fail(MLC_INTERNAL, "%s: %s", what, m);
  LLVMDisposeErrorMessage(m);
  return st;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static bool has_feature(const char *features, const char *f) {
  size_t n = strlen(f);
  for (const char *s = features; (s = strstr(s, f)); s += n)
    if ((s == features || s[-1] == ',') && (s[n] == ',' || s[n] == 0)) return true;
  return false;
}

static void add_attr(cg *g, LLVMValueRef fn, unsigned idx, const char *name) {
  unsigned kind = LLVMGetEnumAttributeKindForName(name, strlen(name));
  LLVMAddAttributeAtIndex(fn, idx, LLVMCreateEnumAttribute(g->ctx, kind, 0));
}

static void add_str_attr(cg *g, LLVMValueRef fn, const char *k, const char *v) {
  LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                          LLVMCreateStringAttribute(g->ctx, k, (unsigned)strlen(k), v, (unsigned)strlen(v)));
}

/* "minillm.forward.layers.0.attn.linear_22": prefix, scope, op, node. */
static char *kernel_name(const char *prefix, const mlc_node *n, uint32_t id) {
  const char *op = mlc_ops[n->op].name, *scope = n->scope ? n->scope : "";
  size_t len = strlen(prefix) + strlen(scope) + strlen(op) + 16;
  char *s = malloc(len);
  if (s) snprintf(s, len, "%s%s%s%s_%u", prefix, scope, *scope ? "." : "", op, id);
  return s;
}

static bool emit_kernel(cg *g, mlc_llvm_module *m, uint32_t id) {
  const mlc_node *n = &g->f->nodes[id];
  emit_fn emit = emitters[n->op];
  if (!emit) return cg_fail(g, "the CPU backend has no kernel for op '%s'", mlc_ops[n->op].name);
  mlc_llvm_kernel *k = &m->kernels[m->nkernels];
  k->name = kernel_name(g->symbol_prefix, n, id);
  if (!k->name) return cg_fail(g, "out of memory");
  k->node = id;
  mlc_node_cost(g->f, n, &k->flops, &k->bytes);
  m->nkernels++;

  char vwbuf[16];
  snprintf(vwbuf, sizeof vwbuf, "%d", g->vw * 32);
  /* body(in0, ..., out, begin, end) */
  LLVMTypeRef params[66];
  int np = n->nin + 1;
  for (int i = 0; i < np; i++) params[i] = g->t_ptr;
  params[np] = params[np + 1] = g->t_i64;
  char *bname = malloc(strlen(k->name) + 6);
  if (!bname) return cg_fail(g, "out of memory");
  sprintf(bname, "%s.body", k->name);
  LLVMValueRef body = LLVMAddFunction(g->mod, bname, LLVMFunctionType(g->t_void, params, (unsigned)np + 2, 0));
  free(bname);
  LLVMSetLinkage(body, LLVMInternalLinkage);
  for (int i = 0; i < np; i++) add_attr(g, body, (unsigned)i + 1, "noalias");
  add_attr(g, body, LLVMAttributeFunctionIndex, "alwaysinline");
  add_attr(g, body, LLVMAttributeFunctionIndex, "nounwind");
  add_str_attr(g, body, "prefer-vector-width", vwbuf);
  add_str_attr(g, body, "min-legal-vector-width", vwbuf);

  g->n = n;
  g->node = id;
  g->fn = body;
  g->entry = LLVMAppendBasicBlockInContext(g->ctx, body, "entry");
  LLVMPositionBuilderAtEnd(g->b, g->entry);
  for (int i = 0; i < n->nin; i++) g->in[i] = (cg_buf){LLVMGetParam(body, (unsigned)i), g->f->nodes[n->in[i]].type.dtype};
  g->out = (cg_buf){LLVMGetParam(body, (unsigned)n->nin), n->type.dtype};
  g->begin = LLVMGetParam(body, (unsigned)np);
  g->end = LLVMGetParam(body, (unsigned)np + 1);
  g->items = 0;
  if (!emit(g)) return false;
  LLVMBuildRetVoid(g->b);
  k->items = g->items;

  /* kernel(bufs, begin, end) */
  LLVMTypeRef kp[3] = {LLVMPointerType(g->t_ptr, 0), g->t_i64, g->t_i64};
  LLVMValueRef kfn = LLVMAddFunction(g->mod, k->name, LLVMFunctionType(g->t_void, kp, 3, 0));
  add_attr(g, kfn, LLVMAttributeFunctionIndex, "nounwind");
  add_str_attr(g, kfn, "prefer-vector-width", vwbuf);
  add_str_attr(g, kfn, "min-legal-vector-width", vwbuf);
  LLVMPositionBuilderAtEnd(g->b, LLVMAppendBasicBlockInContext(g->ctx, kfn, "entry"));
  LLVMValueRef args[66];
  for (int i = 0; i < np; i++) {
    LLVMValueRef slot = LLVMBuildGEP2(g->b, g->t_ptr, LLVMGetParam(kfn, 0), (LLVMValueRef[]){cg_i64(g, i)}, 1, "");
    args[i] = LLVMBuildLoad2(g->b, g->t_ptr, slot, "");
  }
  args[np] = LLVMGetParam(kfn, 1);
  args[np + 1] = LLVMGetParam(kfn, 2);
  LLVMBuildCall2(g->b, LLVMGlobalGetValueType(body), body, args, (unsigned)np + 2, "");
  LLVMBuildRetVoid(g->b);
  return true;
}

/* cpu_features.cpp */
bool mlc_llvm_x86_cpu_features(const char *cpu, char *out, size_t n);

/* The target machine for o's triple and CPU (llvm.h says what NULL,
 * "native" and "baseline" mean), with the CPU's features spelled out in
 * m->features, which the artifact records. */
static mlc_status make_target(mlc_llvm_module *m, const mlc_llvm_options *o) {
  LLVMInitializeNativeTarget();
  LLVMInitializeNativeAsmPrinter();
  char *triple = o && o->triple ? LLVMNormalizeTargetTriple(o->triple) : LLVMGetDefaultTargetTriple();
  LLVMTargetRef target;
  char *msg = NULL;
  if (LLVMGetTargetFromTriple(triple, &target, &msg)) {
    char host[128];
    char *h = LLVMGetDefaultTargetTriple();
    snprintf(host, sizeof host, "%s", h);
    LLVMDisposeMessage(h);
    mlc_status st = fail(MLC_INVALID_ARGUMENT, "--triple %s: this mlc's LLVM has no target for it (it generates code for "
                         "its host, %s)", o && o->triple ? o->triple : triple, host);
    LLVMDisposeMessage(msg);
    LLVMDisposeMessage(triple);
    return st;
  }
  bool x86_64 = !strncmp(triple, "x86_64-", 7);
  const char *cpu = o ? o->cpu : NULL;
  if (cpu && !strcmp(cpu, "baseline")) cpu = x86_64 ? "x86-64-v2" : "generic";
  if (!cpu || !strcmp(cpu, "native")) {
    char *c = LLVMGetHostCPUName(), *f = LLVMGetHostCPUFeatures();
    m->cpu = strdup(c);
    m->features = strdup(o && o->features ? o->features : f);
    LLVMDisposeMessage(c);
    LLVMDisposeMessage(f);
  } else {
    char own[4096] = "";
    if (x86_64 && !mlc_llvm_x86_cpu_features(cpu, own, sizeof own)) {
      LLVMDisposeMessage(triple);
      return fail(MLC_INVALID_ARGUMENT, "--cpu %s: not an x86-64 CPU that LLVM knows (try native, x86-64-v2, x86-64-v3, "
                  "x86-64-v4, haswell, skylake-avx512, znver3 or sapphirerapids)", cpu);
    }
    const char *extra = o && o->features ? o->features : "";
    size_t n = strlen(own) + strlen(extra) + 2;
    m->cpu = strdup(cpu);
    m->features = malloc(n);
    if (m->features) snprintf(m->features, n, "%s%s%s", own, *own && *extra ? "," : "", extra);
  }
  if (!m->cpu || !m->features) {
    LLVMDisposeMessage(triple);
    return fail(MLC_OUT_OF_MEMORY, "out of memory");
  }
  m->tm = LLVMCreateTargetMachine(target, triple, m->cpu, m->features, LLVMCodeGenLevelAggressive, LLVMRelocPIC,
                                  LLVMCodeModelDefault);
  LLVMSetTarget(m->mod, triple);
  LLVMDisposeMessage(triple);
  if (!m->tm) return fail(MLC_INVALID_ARGUMENT, "LLVM cannot make a target machine for cpu '%s'", m->cpu);
  LLVMTargetDataRef dl = LLVMCreateTargetDataLayout(m->tm);
  LLVMSetModuleDataLayout(m->mod, dl);
  LLVMDisposeTargetData(dl);
  if (o && o->vector_width) m->vw = o->vector_width;
  else if (has_feature(m->features, "+avx512f")) m->vw = 16;
  else if (has_feature(m->features, "+avx2") && has_feature(m->features, "+fma")) m->vw = 8;
  else m->vw = 4;
  m->f16c = has_feature(m->features, "+f16c");
  return NULL;
}

/* The object cache's file format: magic, the key (the file's name), the
 * object's length and its XXH3, then the object. */
#define OBJ_MAGIC "mlc-cpu-obj-1\n"
enum { OBJ_HEAD = sizeof OBJ_MAGIC - 1 + 24 };

/* m's file in dir: XXH3 of the module's text (before default<O3>), the
 * target machine's CPU and features, and LLVM's version. */
static char *cache_file_of(mlc_llvm_module *m, const char *dir) {
  char *text = LLVMPrintModuleToString(m->mod);
  if (!text) return NULL;
  XXH3_state_t *st = XXH3_createState();
  if (!st) {
    LLVMDisposeMessage(text);
    return NULL;
  }
  XXH3_64bits_reset(st);
  const char *parts[] = {OBJ_MAGIC, LLVM_VERSION_STRING, m->cpu, m->features, text};
  for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) XXH3_64bits_update(st, parts[i], strlen(parts[i]) + 1);
  unsigned long long h = (unsigned long long)XXH3_64bits_digest(st);
  m->cache_key = h;
  XXH3_freeState(st);
  LLVMDisposeMessage(text);
  size_t n = strlen(dir) + 40;
  char *path = malloc(n);
  if (path) snprintf(path, n, "%s/%016llx.o", dir, h);
  return path;
}

static void put_u64(unsigned char *b, uint64_t v) {
  for (int i = 0; i < 8; i++) b[i] = (unsigned char)(v >> (8 * i));
}
static uint64_t get_u64(const unsigned char *b) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)b[i] << (8 * i);
  return v;
}

/* The cached object at path, or NULL (none, or one that does not check:
 * another key's, or torn). */
static LLVMMemoryBufferRef cache_read(const char *path, uint64_t key) {
  size_t n = 0;
  unsigned char *f = mlc_read_file(path, &n);
  LLVMMemoryBufferRef buf = NULL;
  if (f && n > OBJ_HEAD && !memcmp(f, OBJ_MAGIC, OBJ_HEAD - 24) && get_u64(f + OBJ_HEAD - 24) == key &&
      get_u64(f + OBJ_HEAD - 16) == n - OBJ_HEAD && XXH3_64bits(f + OBJ_HEAD, n - OBJ_HEAD) == get_u64(f + OBJ_HEAD - 8))
    buf = LLVMCreateMemoryBufferWithMemoryRangeCopy((const char *)f + OBJ_HEAD, n - OBJ_HEAD, "cached object");
  free(f);
  return buf;
}

/* The object into the cache (mlc_write_file: whole or not at all, for
 * processes sharing the cache; a failure is no error, the cache being only
 * a shortcut). */
static void cache_write(const char *path, uint64_t key, LLVMMemoryBufferRef obj) {
  size_t len = LLVMGetBufferSize(obj);
  unsigned char *f = malloc(OBJ_HEAD + len);
  if (!f) return;
  memcpy(f, OBJ_MAGIC, OBJ_HEAD - 24);
  put_u64(f + OBJ_HEAD - 24, key);
  put_u64(f + OBJ_HEAD - 16, len);
  put_u64(f + OBJ_HEAD - 8, XXH3_64bits(LLVMGetBufferStart(obj), len));
  memcpy(f + OBJ_HEAD, LLVMGetBufferStart(obj), len);
  mlc_write_file(path, f, OBJ_HEAD + len);
  free(f);
}

/* default<O3> on m's module, once. */
static mlc_status optimise(mlc_llvm_module *m) {
  if (m->optimised) return NULL;
  double t1 = now();
  LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
  LLVMPassBuilderOptionsSetLoopVectorization(po, 1);
  LLVMPassBuilderOptionsSetSLPVectorization(po, 1);
  LLVMPassBuilderOptionsSetLoopUnrolling(po, 1);
  LLVMPassBuilderOptionsSetLoopInterleaving(po, 1);
  LLVMErrorRef e = LLVMRunPasses(m->mod, "default<O3>", m->tm, po);
  LLVMDisposePassBuilderOptions(po);
  m->t_opt += now() - t1;
  if (e) return fail_llvm("LLVM optimisation", e);
  m->optimised = true;
  return NULL;
}

/* m's object code, in a buffer the caller owns: from the cache, or
 * optimised and generated now (and then kept in the cache). */
static mlc_status object_of(mlc_llvm_module *m, LLVMMemoryBufferRef *out) {
  *out = NULL;
  if (m->obj) {
    *out = LLVMCreateMemoryBufferWithMemoryRangeCopy(LLVMGetBufferStart(m->obj), LLVMGetBufferSize(m->obj), "object");
    return *out ? NULL : fail(MLC_OUT_OF_MEMORY, "out of memory");
  }
  MLC_RETURN_IF_ERROR(optimise(m));
  char *msg = NULL;
  if (LLVMTargetMachineEmitToMemoryBuffer(m->tm, m->mod, LLVMObjectFile, &msg, out)) {
    mlc_status st = fail(MLC_INTERNAL, "LLVM code generation: %s", msg ? msg : "?");
    LLVMDisposeMessage(msg);
    return st;
  }
  if (m->cache_file) cache_write(m->cache_file, m->cache_key, *out);
  return NULL;
}

mlc_status mlc_llvm_compile(const mlc_program *p, const mlc_func *f, const mlc_llvm_options *o, mlc_llvm_module **out) {
  *out = NULL;
  double t0 = now();
  mlc_llvm_module *m = calloc(1, sizeof *m);
  if (!m) return fail(MLC_OUT_OF_MEMORY, "out of memory");
  m->ctx = LLVMContextCreate();
  m->mod = LLVMModuleCreateWithNameInContext(p->name ? p->name : "model", m->ctx);
  m->kernels = calloc(f->n ? f->n : 1, sizeof *m->kernels);
  mlc_status st = m->kernels ? make_target(m, o) : fail(MLC_OUT_OF_MEMORY, "out of memory");
  if (st) {
    mlc_llvm_module_destroy(m);
    return st;
  }
  cg g = {.ctx = m->ctx, .mod = m->mod, .p = p, .f = f, .vw = m->vw, .f16c = m->f16c,
          .symbol_prefix = o && o->symbol_prefix ? o->symbol_prefix : ""};
  g.b = LLVMCreateBuilderInContext(m->ctx);
  g.t_void = LLVMVoidTypeInContext(m->ctx);
  g.t_i1 = LLVMInt1TypeInContext(m->ctx);
  g.t_i8 = LLVMInt8TypeInContext(m->ctx);
  g.t_i16 = LLVMInt16TypeInContext(m->ctx);
  g.t_i32 = LLVMInt32TypeInContext(m->ctx);
  g.t_i64 = LLVMInt64TypeInContext(m->ctx);
  g.t_f16 = LLVMHalfTypeInContext(m->ctx);
  g.t_f32 = LLVMFloatTypeInContext(m->ctx);
  g.t_ptr = LLVMPointerType(g.t_i8, 0);
  /* Accumulator rows of the GEMM micro-tile: 2 * mr vector registers, plus
   * two for B, must fit the register file (32 with AVX-512, else 16). */
  g.mr = g.vw >= 16 ? 12 : 6;

  /* Identical kernels are emitted once: a node whose structural hash (op,
   * attributes, types, and the values of constant inputs, which emitters
   * fold into the code) matches an earlier kernel's reuses its function, so
   * twelve identical layers give one set of kernels. */
  uint64_t *hash = calloc(f->n ? f->n : 1, sizeof *hash);
  if (!hash) st = fail(MLC_OUT_OF_MEMORY, "out of memory");
  for (uint32_t i = 0; i < f->n && !st; i++) {
    const mlc_node *n = &f->nodes[i];
    unsigned fl = mlc_ops[n->op].flags;
    if ((fl & (MLC_F_LEAF | MLC_F_VIEW | MLC_F_COLL)) || mlc_node_in_place(f, i)) continue; /* in place: no copy */
    if (n->nin > 64) {
      cg_fail(&g, "%u inputs; the CPU backend takes at most 64", n->nin);
      st = fail(MLC_INVALID_ARGUMENT, "node %%%u (%s): %s", i, mlc_ops[n->op].name, g.err);
      break;
    }
    uint32_t group[65], ng = 0;
    for (uint32_t k = 0; k < n->nin; k++)
      if (f->nodes[n->in[k]].op == MLC_OP_CONST) group[ng++] = n->in[k];
    group[ng++] = i;
    uint64_t h = mlc_hash_nodes(p, f, group, ng);
    uint32_t same = UINT32_MAX;
    for (uint32_t k = 0; k < m->nkernels && same == UINT32_MAX; k++)
      if (hash[k] == h && f->nodes[m->kernels[k].node].op == n->op) same = k;
    hash[m->nkernels] = h;
    if (same != UINT32_MAX) {
      mlc_llvm_kernel *k = &m->kernels[m->nkernels];
      *k = m->kernels[same];
      k->name = strdup(m->kernels[same].name);
      k->node = i;
      mlc_node_cost(f, n, &k->flops, &k->bytes);
      m->nkernels++;
      if (!k->name) st = fail(MLC_OUT_OF_MEMORY, "out of memory");
      continue;
    }
    if (!emit_kernel(&g, m, i)) st = fail(MLC_INVALID_ARGUMENT, "node %%%u (%s): %s", i, mlc_ops[n->op].name, g.err);
  }
  free(hash);
  LLVMDisposeBuilder(g.b);
  if (st) {
    mlc_llvm_module_destroy(m);
    return st;
  }
  char *vmsg = NULL;
  if (LLVMVerifyModule(m->mod, LLVMReturnStatusAction, &vmsg)) {
    st = fail(MLC_INTERNAL, "internal error: the generated LLVM module does not verify: %.200s", vmsg ? vmsg : "?");
    LLVMDisposeMessage(vmsg);
    mlc_llvm_module_destroy(m);
    return st;
  }
  LLVMDisposeMessage(vmsg);
  m->t_build = now() - t0;
  m->optimised = o && o->no_opt;
  /* a module with no_opt is for reading its IR: never cached */
  if (o && o->cache_dir && *o->cache_dir && !m->optimised) {
    m->cache_file = cache_file_of(m, o->cache_dir);
    m->obj = m->cache_file ? cache_read(m->cache_file, m->cache_key) : NULL;
  }
  /* default<O3> now, unless the cache has the object: the module's IR is
   * then left unoptimised, and mlc_llvm_emit_ir optimises it first */
  if (!m->obj && (st = optimise(m))) {
    mlc_llvm_module_destroy(m);
    return st;
  }
  *out = m;
  return NULL;
}

void mlc_llvm_module_destroy(mlc_llvm_module *m) {
  if (!m) return;
  for (uint32_t i = 0; i < m->nkernels; i++) free((char *)m->kernels[i].name);
  free(m->kernels);
  if (m->tm) LLVMDisposeTargetMachine(m->tm);
  if (m->mod) LLVMDisposeModule(m->mod);
  if (m->ctx) LLVMContextDispose(m->ctx);
  if (m->obj) LLVMDisposeMemoryBuffer(m->obj);
  free(m->cache_file);
  free(m->cpu);
  free(m->features);
  free(m);
}

uint32_t mlc_llvm_kernel_count(const mlc_llvm_module *m) { return m->nkernels; }
const mlc_llvm_kernel *mlc_llvm_kernel_at(const mlc_llvm_module *m, uint32_t i) {
  return i < m->nkernels ? &m->kernels[i] : NULL;
}
const char *mlc_llvm_target_cpu(const mlc_llvm_module *m) { return m->cpu; }
const char *mlc_llvm_target_features(const mlc_llvm_module *m) { return m->features; }
int mlc_llvm_vector_width(const mlc_llvm_module *m) { return m->vw; }
void mlc_llvm_compile_seconds(const mlc_llvm_module *m, double *build, double *optimise) {
  *build = m->t_build;
  *optimise = m->t_opt;
}

mlc_status mlc_llvm_emit_object(mlc_llvm_module *m, const char *path) {
  LLVMMemoryBufferRef obj;
  MLC_RETURN_IF_ERROR(object_of(m, &obj));
  FILE *fp = fopen(path, "wb");
  size_t len = LLVMGetBufferSize(obj);
  bool ok = fp && fwrite(LLVMGetBufferStart(obj), 1, len, fp) == len;
  if (fp && fclose(fp)) ok = false;
  LLVMDisposeMemoryBuffer(obj);
  return ok ? NULL : fail(MLC_IO, "cannot write %s", path);
}

mlc_status mlc_llvm_emit_ir(mlc_llvm_module *m, const char *path) {
  MLC_RETURN_IF_ERROR(optimise(m)); /* a module whose object came from the cache was not optimised */
  char *msg = NULL;
  if (LLVMPrintModuleToFile(m->mod, path, &msg)) {
    mlc_status st = fail(MLC_IO, "cannot write %s: %s", path, msg ? msg : "?");
    LLVMDisposeMessage(msg);
    return st;
  }
  return NULL;
}

mlc_status mlc_llvm_jit_create(mlc_llvm_module *m, mlc_llvm_jit **out) {
  *out = NULL;
  LLVMMemoryBufferRef obj;
  MLC_RETURN_IF_ERROR(object_of(m, &obj));
  mlc_llvm_jit *j = calloc(1, sizeof *j);
  if (!j || !(j->fns = calloc(m->nkernels ? m->nkernels : 1, sizeof *j->fns))) {
    free(j);
    LLVMDisposeMemoryBuffer(obj);
    return fail(MLC_OUT_OF_MEMORY, "out of memory");
  }
  j->n = m->nkernels;
  LLVMErrorRef e = LLVMOrcCreateLLJIT(&j->jit, LLVMOrcCreateLLJITBuilder());
  if (e) {
    LLVMDisposeMemoryBuffer(obj);
    free(j->fns);
    free(j);
    return fail_llvm("cannot create the LLJIT", e);
  }
  LLVMOrcJITDylibRef jd = LLVMOrcLLJITGetMainJITDylib(j->jit);
  /* memcpy and memset, which LLVM may call for large copies, come from
   * this process. */
  LLVMOrcDefinitionGeneratorRef gen;
  e = LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(&gen, LLVMOrcLLJITGetGlobalPrefix(j->jit), NULL, NULL);
  if (e) {
    LLVMDisposeMemoryBuffer(obj);
    mlc_llvm_jit_destroy(j);
    return fail_llvm("LLJIT process symbols", e);
  }
  LLVMOrcJITDylibAddGenerator(jd, gen);
  e = LLVMOrcLLJITAddObjectFile(j->jit, jd, obj); /* takes obj */
  if (e) {
    mlc_llvm_jit_destroy(j);
    return fail_llvm("LLJIT cannot add the object", e);
  }
  for (uint32_t i = 0; i < m->nkernels; i++) {
    LLVMOrcExecutorAddress addr = 0;
    e = LLVMOrcLLJITLookup(j->jit, &addr, m->kernels[i].name);
    if (e) {
      mlc_llvm_jit_destroy(j);
      return fail_llvm("LLJIT lookup", e);
    }
    j->fns[i] = (mlc_cpu_kernel_fn)(uintptr_t)addr;
  }
  *out = j;
  return NULL;
}

mlc_cpu_kernel_fn mlc_llvm_jit_kernel(const mlc_llvm_jit *j, uint32_t i) { return i < j->n ? j->fns[i] : NULL; }

void *mlc_llvm_jit_symbol(void *jit, const char *symbol) {
  mlc_llvm_jit *j = jit;
  LLVMOrcExecutorAddress addr = 0;
  LLVMErrorRef e = LLVMOrcLLJITLookup(j->jit, &addr, symbol);
  if (e) {
    LLVMConsumeError(e);
    return NULL;
  }
  return (void *)(uintptr_t)addr;
}

void mlc_llvm_jit_destroy(mlc_llvm_jit *j) {
  if (!j) return;
  if (j->jit) {
    LLVMErrorRef e = LLVMOrcDisposeLLJIT(j->jit);
    if (e) LLVMConsumeError(e);
  }
  free(j->fns);
  free(j);
}

/* The compile loop's own test: no kernel for leaves, views and
 * collectives, an emitter for every other op. */
bool mlc_llvm_supports_op(mlc_op op) {
  return (mlc_ops[op].flags & (MLC_F_LEAF | MLC_F_VIEW | MLC_F_COLL)) || emitters[op];
}
