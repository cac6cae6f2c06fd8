/* Writes the artifact's C API and glue.  The header is generated from the
 * plan's entry points: one function per entry point with a typed pointer
 * per input and output, each with its shape in a comment, so the C
 * compiler checks what an application passes.  The .c embeds the plan
 * bytes, which on a GPU carry the kernels' code and launches (the device
 * reads them from the plan).  For the CPU it also declares every kernel
 * (by its exact symbol, through an asm label, since symbols carry module
 * scopes with dots) and gives the runtime a lookup over them: function
 * pointers, which no bytes can carry.
 */
#include "codegen/artifact.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "mlc_version.h"
#include "runtime/version.h"

/* The model file's name without its folder: an artifact names no path. */
/* The artifact's C (artifact.c's format strings) declares the model as
 * `typedef struct NAME NAME`; these names are taken there already. */
const char *mlc_artifact_name_clash(const char *name) {
  static const char *const keywords[] = {
      "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else", "enum", "extern", "float",
      "for", "goto", "if", "inline", "int", "long", "register", "restrict", "return", "short", "signed", "sizeof",
      "static", "struct", "switch", "typedef", "union", "unsigned", "void", "volatile", "while", "bool", "true",
      "false", "alignas", "alignof", "and", "and_eq", "asm", "bitand", "bitor", "catch", "char8_t", "char16_t",
      "char32_t", "class", "compl", "concept", "consteval", "constexpr", "constinit", "const_cast", "co_await",
      "co_return", "co_yield", "decltype", "delete", "dynamic_cast", "explicit", "export", "friend", "mutable",
      "namespace", "new", "noexcept", "not", "not_eq", "nullptr", "operator", "or", "or_eq", "private", "protected",
      "public", "reinterpret_cast", "requires", "static_assert", "static_cast", "template", "this", "thread_local",
      "throw", "try", "typeid", "typename", "using", "virtual", "wchar_t", "xor", "xor_eq"};
  static const char *const libc[] = {"FILE", "NULL", "size_t", "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t",
                                     "uint16_t", "uint32_t", "uint64_t", "memcpy", "memset", "strcmp", "stderr",
                                     "malloc", "calloc", "realloc", "free", "main", "errno"};
  /* each one checked by compiling an artifact's C with it (a CPU and a CUDA artifact); the rest of that code's
   * identifiers (m, data, size, ...) coexist with the type */
  static const char *const own[] = {"a", "build", "builds", "cpu_versions", "kernel", "lock", "lookup", "opt", "out",
                                    "plan_bytes", "st", "unlock"};
  for (size_t i = 0; i < sizeof keywords / sizeof *keywords; i++)
    if (!strcmp(name, keywords[i])) return "a C or C++ keyword";
  for (size_t i = 0; i < sizeof libc / sizeof *libc; i++)
    if (!strcmp(name, libc[i])) return "a name of the C library that the artifact's code uses";
  if (!strncmp(name, "pthread_", 8)) return "a name of pthreads, which the artifact's code uses";
  if (!strncmp(name, "mlc_", 4) || !strncmp(name, "MLC_", 4)) return "in the runtime's own prefix (mlc_)";
  if (!strncmp(name, "__", 2)) return "reserved to C implementations (a leading __)";
  for (size_t i = 0; i < sizeof own / sizeof *own; i++)
    if (!strcmp(name, own[i])) return "a name that the artifact's code uses for its own variables and functions";
  /* numbered names of that code: kernels0, plan_bytes1, k0_12 */
  static const char *const numbered[] = {"kernels", "plan_bytes", "k"};
  for (size_t i = 0; i < sizeof numbered / sizeof *numbered; i++) {
    size_t n = strlen(numbered[i]);
    if (strncmp(name, numbered[i], n) || !name[n]) continue;
    const char *c = name + n;
    while ((*c >= '0' && *c <= '9') || *c == '_') c++;
    if (!*c) return "a name that the artifact's code uses for its own variables and functions";
  }
  return NULL;
}

static const char *source_name(const mlc_artifact *a) {
  const char *slash = strrchr(a->source, '/');
  return slash ? slash + 1 : a->source;
}

static const char *ctype(uint8_t dt) {
  switch (dt) {
  case MLC_DT_F32: return "float";
  case MLC_DT_BF16: case MLC_DT_F16: return "uint16_t";
  case MLC_DT_I32: return "int32_t";
  case MLC_DT_I64: return "int64_t";
  default: return "uint8_t";
  }
}

static void shape_comment(FILE *o, const mlc_type *t) {
  char buf[128];
  fprintf(o, "%s", mlc_type_str(t, buf, sizeof buf));
}

static mlc_status open_out(const mlc_artifact *a, const char *name, const char *ext, FILE **out) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s%s", a->dir, name, ext);
  *out = fopen(path, "w");
  return *out ? NULL : mlc_status_make(MLC_IO, "cannot write %s: %s", path, strerror(errno));
}

static mlc_status close_out(FILE *f, const mlc_artifact *a, const char *name, const char *ext) {
  bool ok = !ferror(f);
  ok &= fclose(f) == 0;
  return ok ? NULL : mlc_status_make(MLC_IO, "cannot write %s/%s%s: %s", a->dir, name, ext, strerror(errno));
}

/* The C name of an entry point: forward -> <name>_forward, train ->
 * <name>_train_step.  Inputs the runtime fills itself ("opt.step", "opt.lr") and
 * outputs a caller has no use for (the train step's gradients and update
 * tokens) stay out of the signature. */
/* A decode block's two entries: the artifact then has <name>_generate. */
static bool has_decode(const mlc_program *p) {
  bool pre = false, step = false;
  for (uint32_t k = 0; k < p->nfuncs; k++) {
    pre |= !strcmp(p->funcs[k].name, "prefill");
    step |= !strcmp(p->funcs[k].name, "step");
  }
  return pre && step;
}

static const char *entry_suffix(const mlc_func *f) { return strcmp(f->name, "train") ? f->name : "train_step"; }
static bool user_input(const mlc_node *n) { return strncmp(n->a.name, "opt.", 4) != 0; }
static bool user_output(const mlc_func *f, uint32_t i) {
  return strcmp(f->name, "train") || !strcmp(f->outputs[i].name, "loss");
}

static void entry_signature(FILE *o, const mlc_program *p, const mlc_func *f) {
  fprintf(o, "mlc_status %s_%s(%s *m", p->name, entry_suffix(f), p->name);
  for (uint32_t i = 0; i < f->inputs.n; i++) {
    const mlc_node *n = &f->nodes[f->inputs.v[i]];
    if (user_input(n)) fprintf(o, ", const %s *%s", ctype(n->type.dtype), n->a.name);
  }
  for (uint32_t i = 0; i < f->noutputs; i++)
    if (user_output(f, i)) fprintf(o, ", %s *%s", ctype(f->nodes[f->outputs[i].node].type.dtype), f->outputs[i].name);
  fprintf(o, ")");
}

/* The same entry point with an mlc_tensor per input and output. */
static void tensors_signature(FILE *o, const mlc_program *p, const mlc_func *f) {
  fprintf(o, "mlc_status %s_%s_tensors(%s *m", p->name, entry_suffix(f), p->name);
  for (uint32_t i = 0; i < f->inputs.n; i++) {
    const mlc_node *n = &f->nodes[f->inputs.v[i]];
    if (user_input(n)) fprintf(o, ", const mlc_tensor *%s", n->a.name);
  }
  for (uint32_t i = 0; i < f->noutputs; i++)
    if (user_output(f, i)) fprintf(o, ", const mlc_tensor *%s", f->outputs[i].name);
  fprintf(o, ")");
}

/* The _tensors form: each tensor checked against the model's type, then,
 * under the lock, each input set from its tensor, the run, and each output
 * copied into its tensor (host memory, or the device's: runtime/tensor.h). */
static void write_tensors_entry(FILE *o, const mlc_program *p, const mlc_func *f) {
  tensors_signature(o, p, f);
  fprintf(o, " {\n  mlc_status st;\n");
  for (uint32_t i = 0; i < f->inputs.n + f->noutputs; i++) {
    bool in = i < f->inputs.n;
    const mlc_node *nd = in ? &f->nodes[f->inputs.v[i]] : &f->nodes[f->outputs[i - f->inputs.n].node];
    if (in ? !user_input(nd) : !user_output(f, i - f->inputs.n)) continue;
    const char *name = in ? nd->a.name : f->outputs[i - f->inputs.n].name;
    fprintf(o, "  static const int64_t %s_dims[%d] = {", name, nd->type.rank ? nd->type.rank : 1);
    for (int d = 0; d < nd->type.rank; d++) fprintf(o, "%s%lld", d ? ", " : "", (long long)nd->type.dim[d]);
    fprintf(o, "%s};\n", nd->type.rank ? "" : "0");
    fprintf(o, "  if ((st = mlc_tensor_check(%s, \"%s_%s\", \"%s\", \"%s\", (mlc_dtype_code)%d, %d, %s_dims))) return st;\n",
            name, p->name, entry_suffix(f), in ? "input" : "output", name, (int)nd->type.dtype, nd->type.rank, name);
  }
  fprintf(o, "  lock(m);\n  st = NULL;\n");
  for (uint32_t i = 0; i < f->inputs.n; i++) {
    const mlc_node *nd = &f->nodes[f->inputs.v[i]];
    if (user_input(nd))
      fprintf(o, "  if (!st) st = mlc_session_set_input_tensor(m->session, \"%s\", \"%s\", %s);\n", f->name, nd->a.name,
              nd->a.name);
  }
  for (uint32_t i = 0; i < f->noutputs; i++) /* before the run, which a train step cannot undo */
    if (user_output(f, i))
      fprintf(o, "  if (!st) st = mlc_session_check_tensor(m->session, \"%s\", false, \"%s\", %s);\n", f->name,
              f->outputs[i].name, f->outputs[i].name);
  fprintf(o, "  if (!st) st = mlc_session_run(m->session, \"%s\");\n", f->name);
  for (uint32_t i = 0; i < f->noutputs; i++)
    if (user_output(f, i))
      fprintf(o, "  if (!st) st = mlc_session_output_tensor(m->session, \"%s\", \"%s\", %s);\n", f->name,
              f->outputs[i].name, f->outputs[i].name);
  fprintf(o, "  unlock(m);\n  return st;\n}\n\n");
}

static void write_header(FILE *o, const mlc_program *p, const mlc_artifact *a) {
  const char *n = p->name;
  fprintf(o, "/* %s.h: generated by mlc %s from %s.  Do not edit.\n *\n", n, MLC_VERSION, source_name(a));
  fprintf(o, " * Every function that can fail returns an mlc_status: NULL on success, else\n"
             " * an error whose text is mlc_status_message(st); free it with\n"
             " * mlc_status_free(st).  bf16 and f16 tensors are passed as uint16_t bits.\n"
             " *\n"
             " * Link with lib%s.a (the model and the mlc runtime), through the CMake\n"
             " * fragment %s.cmake (target %s), the pkg-config file %s.pc, or by hand:\n"
             " *   cc app.c -IDIR DIR/lib%s.a -l:libcjson.so.1 -lpthread -lm -ldl\n"
             " *\n"
             " * Threads: every call on one model takes the model's lock, so calls from\n"
             " * several threads are safe and run one at a time (a forward pass already\n"
             " * uses all of the model's worker threads).  Models share nothing: for\n"
             " * passes that run side by side, create a model per thread.\n"
             " *\n"
             " * The typed calls (%s_forward(m, x, ...)) trust the caller for the size of\n"
             " * every buffer.  Their _tensors forms take an mlc_tensor per input and\n"
             " * output (runtime/tensor.h) and check dtype, shape and buffer size first:\n"
             " * MLC_INVALID_ARGUMENT naming the tensor and both sides.  On a GPU model a\n"
             " * tensor may also be in the GPU's memory (memory = MLC_MEMORY_DEVICE): copied\n"
             " * device to device into and out of the model, with no host copy. */\n", n, n, n, n, n, n);
  fprintf(o, "#ifndef MLC_MODEL_%s_H\n#define MLC_MODEL_%s_H\n\n", n, n);
  fprintf(o, "#include <stddef.h>\n#include <stdint.h>\n#include <stdio.h>\n\n#include \"runtime/alloc.h\"\n#include \"runtime/status.h\"\n#include \"runtime/tensor.h\"\n\n");
  fprintf(o, "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n");
  fprintf(o, "typedef struct %s %s;\n\n", n, n);
  fprintf(o, "typedef struct {\n  int threads; /* CPU: worker threads, 0: one per CPU */\n  int profile; /* time every kernel */\n"
             "  int device;  /* CUDA: which GPU; Vulkan: which device (mlc devices --target spirv) */\n"
             "  /* Every host allocation of the model (parameters, arenas, tables)\n"
             "   * until destroy; {0}: malloc and free.  Error statuses and cJSON's\n"
             "   * temporary trees come from the C heap (runtime/alloc.h). */\n"
             "  mlc_allocator allocator;\n} %s_options;\n\n", n);
  fprintf(o, "/* opt may be NULL.  Parameters start at PyTorch's default initialisation\n"
             " * (seed 0); load weights to replace them.  Fails (MLC_UNIMPLEMENTED) when the\n"
             " * runtime linked in is not of the mlc version that generated this model.\n"
             " * Memory is taken as it is first needed: the parameters here, an entry's\n"
             " * arena at its first call, and the optimizer state at the first train step\n"
             " * or load_checkpoint (that call returns MLC_OUT_OF_MEMORY if it cannot be\n"
             " * had, and forward goes on working); a model that only runs forward never\n"
             " * holds it. */\n");
  fprintf(o, "mlc_status %s_create(const %s_options *opt, %s **out);\n", n, n, n);
  bool given = false;
  for (uint32_t i = 0; i < p->nparams; i++) given |= p->params[i].init == MLC_INIT_GIVEN;
  if (given)
    fprintf(o, "/* The model's values (its ONNX initializers) are not in the plan: mlc\n"
               " * compile -o wrote them beside this file, as the file named here.  Load\n"
               " * them (%s_load_weights) before the first run, which fails until then. */\n"
               "#define MLC_MODEL_%s_WEIGHTS \"%s.safetensors\"\n", n, n, n);
  fprintf(o, "void %s_destroy(%s *m);\n\n", n, n);
  fprintf(o, "void %s_init_weights(%s *m, uint64_t seed);\n", n, n);
  fprintf(o, "/* safetensors with PyTorch's state_dict names, dtypes and shapes. */\n");
  fprintf(o, "mlc_status %s_load_weights(%s *m, const char *path);\n", n, n);
  fprintf(o, "/* The same from the bytes of a safetensors file in memory (size bytes at\n"
             " * data), with the same checks; the bytes are copied, not kept. */\n");
  fprintf(o, "mlc_status %s_load_weights_memory(%s *m, const void *data, size_t size);\n", n, n);
  fprintf(o, "mlc_status %s_save_weights(const %s *m, const char *path);\n", n, n);
  fprintf(o, "/* Parameters, optimizer state (zeros before the first train step) and step\n"
             " * count, written atomically with a checksum that loading verifies. */\n");
  fprintf(o, "mlc_status %s_save_checkpoint(const %s *m, const char *path);\n", n, n);
  fprintf(o, "mlc_status %s_load_checkpoint(%s *m, const char *path);\n", n, n);
  fprintf(o, "/* Optimizer steps taken. */\nuint64_t %s_steps(const %s *m);\n", n, n);
  fprintf(o, "/* The learning-rate schedule: its length in steps, needed when it decays and\n"
             " * the optimizer gives no steps= (set it before the first train step; a\n"
             " * checkpoint carries it), and the rate the next train step takes. */\n");
  fprintf(o, "void %s_set_schedule_steps(%s *m, uint64_t steps);\n", n, n);
  fprintf(o, "uint64_t %s_schedule_steps(const %s *m);\n", n, n);
  fprintf(o, "double %s_lr(const %s *m);\n\n", n, n);
  for (uint32_t k = 0; k < p->nfuncs; k++) {
    const mlc_func *f = &p->funcs[k];
    fprintf(o, "/* Entry point '%s'.\n", f->name);
    for (uint32_t i = 0; i < f->inputs.n; i++) {
      const mlc_node *nd = &f->nodes[f->inputs.v[i]];
      if (!user_input(nd)) continue;
      fprintf(o, " *   in  %-10s ", nd->a.name);
      shape_comment(o, &nd->type);
      fputc('\n', o);
    }
    for (uint32_t i = 0; i < f->noutputs; i++) {
      if (!user_output(f, i)) continue;
      fprintf(o, " *   out %-10s ", f->outputs[i].name);
      shape_comment(o, &f->nodes[f->outputs[i].node].type);
      fputc('\n', o);
    }
    if (!strcmp(f->name, "train"))
      fprintf(o, " * One training step: forward, backward and the optimizer's update of the\n"
                 " * parameters; the loss is that of the parameters before the update.\n");
    fprintf(o, " */\n");
    entry_signature(o, p, f);
    fprintf(o, ";\n");
    tensors_signature(o, p, f);
    fprintf(o, ";\n\n");
  }
  if (has_decode(p))
    fprintf(o, "/* Text generation, as `mlc generate` (docs/cli.md): the prompt's prompt_n\n"
               " * token ids through prefill (in chunks of its length, the last padded),\n"
               " * then max_new tokens, each from one step, into tokens_out.  Temperature 0\n"
               " * is greedy (the first largest logit); above 0 samples from softmax(logits\n"
               " * / temperature) over the top_k largest (0: all), seeded by seed, as the\n"
               " * CLI's --seed.  An error status for a token outside the vocabulary, or a\n"
               " * prompt and max_new past the decode block's max_ctx. */\n"
               "mlc_status %s_generate(%s *m, const int32_t *prompt, uint32_t prompt_n, uint32_t max_new, double temperature,\n"
               "                       uint32_t top_k, uint64_t seed, int32_t *tokens_out);\n\n", n, n);
  if (!a->cuda_kernels && !a->device_driver) {
    fprintf(o, "/* The CPU the running kernels were compiled for: of the builds this model\n"
               " * carries (%s", a->cpu ? a->cpu : "");
    for (uint32_t b = 0; b < a->ncpu_more; b++) fprintf(o, ", %s", a->cpu_more[b].cpu);
    fprintf(o, "), the last whose features this\n"
               " * machine has, picked at create; the environment variable MLC_CPU_MAX=NAME\n"
               " * caps the pick at the build for NAME. */\n"
               "const char *%s_cpu(const %s *m);\n\n", n, n);
  }
  fprintf(o, "/* With profile on: one row per kernel, longest first. */\n");
  fprintf(o, "void %s_profile_print(const %s *m, const char *entry, FILE *out);\n\n", n, n);
  fprintf(o, "#ifdef __cplusplus\n}\n#endif\n\n#endif\n");
}

static void write_bytes(FILE *o, const char *name, const void *data, size_t n, bool nul) {
  const unsigned char *b = data;
  fprintf(o, "static const unsigned char %s[%zu] = {", name, n + nul);
  for (size_t i = 0; i < n; i++) fprintf(o, "%s%u,", i % 24 ? "" : "\n  ", b[i]);
  fprintf(o, "%s\n};\n\n", nul ? "0" : "");
}

/* The CPU's kernels: symbols linked from the object files, found by name,
 * and the plan, one of each per build (the baseline's and, with
 * multiversioning, those for stronger CPUs), of which create picks one. */
static void write_cpu_kernels(FILE *o, const mlc_artifact *a) {
  uint32_t nb = 1 + a->ncpu_more;
  mlc_artifact_cpu_build base = {a->cpu ? a->cpu : "", a->cpu_features ? a->cpu_features : "", a->plan, a->plan_bytes,
                                 a->kernels, a->nkernels};
  fprintf(o, "/* The CPUs the kernels were compiled for (the most portable first) and their\n"
             " * features: create runs the last build this CPU has every feature of. */\n"
             "static const mlc_cpu_version cpu_versions[%u] = {\n", nb);
  for (uint32_t b = 0; b < nb; b++) {
    const mlc_artifact_cpu_build *B = b ? &a->cpu_more[b - 1] : &base;
    fprintf(o, "  {\"%s\", \"%s\"},\n", B->cpu, B->features);
  }
  fprintf(o, "};\n\n");
  fprintf(o, "typedef void (*kernel_fn)(void **bufs, int64_t begin, int64_t end);\n"
             "typedef struct {\n  const char *name;\n  kernel_fn fn;\n} kernel;\n\n");
  for (uint32_t b = 0; b < nb; b++) {
    const mlc_artifact_cpu_build *B = b ? &a->cpu_more[b - 1] : &base;
    fprintf(o, "/* Build %u: %s. */\n", b, B->cpu);
    for (uint32_t i = 0; i < B->nkernels; i++)
      fprintf(o, "extern void k%u_%u(void **, int64_t, int64_t) __asm__(\"%s\");\n", b, i, B->kernels[i]);
    fprintf(o, "\nstatic const kernel kernels%u[] = {\n", b);
    for (uint32_t i = 0; i < B->nkernels; i++) fprintf(o, "  {\"%s\", k%u_%u},\n", B->kernels[i], b, i);
    if (!B->nkernels) fprintf(o, "  {\"\", 0},\n");
    fprintf(o, "};\n\n");
    char name[32];
    snprintf(name, sizeof name, "plan_bytes%u", b);
    write_bytes(o, name, B->plan, B->plan_bytes, false);
  }
  fprintf(o, "static const struct build {\n  const kernel *kernels;\n  size_t nkernels;\n"
             "  const unsigned char *plan;\n  size_t plan_bytes;\n} builds[%u] = {\n", nb);
  for (uint32_t b = 0; b < nb; b++)
    fprintf(o, "  {kernels%u, sizeof kernels%u / sizeof *kernels%u, plan_bytes%u, sizeof plan_bytes%u},\n", b, b, b,
            b, b);
  fprintf(o, "};\n\n");
  fprintf(o,
          "/* ctx: the build create picked. */\n"
          "static void *lookup(void *ctx, const char *symbol) {\n"
          "  const struct build *b = ctx;\n"
          "  for (size_t i = 0; i < b->nkernels; i++)\n"
          "    if (b->kernels[i].fn && !strcmp(b->kernels[i].name, symbol)) {\n"
          "      void *p;\n"
          "      memcpy(&p, &b->kernels[i].fn, sizeof p);\n"
          "      return p;\n"
          "    }\n"
          "  return NULL;\n"
          "}\n\n");
}

/* Metal: the launch table, the MSL source, the metallib if there is one. */
static void write_metal_kernels(FILE *o, const mlc_artifact *a) {
  fprintf(o, "static const mlc_cuda_kernel kernels[%u] = {\n", a->ncuda_kernels ? a->ncuda_kernels : 1);
  for (uint32_t i = 0; i < a->ncuda_kernels; i++) {
    const mlc_cuda_kernel *k = &a->cuda_kernels[i];
    fprintf(o, "  {\"%s\", %lluu, %u, {", k->symbol, (unsigned long long)k->scratch, k->nlaunch);
    for (uint32_t l = 0; l < k->nlaunch; l++)
      fprintf(o, "%s{\"%s\", %u, %u, %u}", l ? ", " : "", k->launch[l].fn, k->launch[l].grid, k->launch[l].block,
              k->launch[l].smem);
    fprintf(o, "}, %u, {", k->ntmap);
    for (uint32_t t = 0; t < k->ntmap; t++) {
      const mlc_cuda_tmap *m = &k->tmap[t];
      fprintf(o, "%s{%uu, %u, %u, %u, %lluu, {", t ? ", " : "", m->arg, m->rank, m->elem_bytes, m->swizzle,
              (unsigned long long)m->offset);
      for (int d = 0; d < 5; d++) fprintf(o, "%s%lluu", d ? ", " : "", (unsigned long long)m->dim[d]);
      fprintf(o, "}, {");
      for (int d = 0; d < 4; d++) fprintf(o, "%s%lluu", d ? ", " : "", (unsigned long long)m->stride[d]);
      fprintf(o, "}, {");
      for (int d = 0; d < 5; d++) fprintf(o, "%s%uu", d ? ", " : "", m->box[d]);
      fprintf(o, "}}");
    }
    fprintf(o, "%s}},\n", k->ntmap ? "" : "{0}");
  }
  fprintf(o, "};\n\n");
  write_bytes(o, "cuda_source", a->cuda_source, a->cuda_source_len, true);
  if (a->cuda_image) write_bytes(o, "cuda_image", a->cuda_image, a->cuda_image_bytes, false);
}

static void write_source(FILE *o, const mlc_program *p, const mlc_artifact *a) {
  const char *n = p->name;
  bool metal = a->metal, gpu = metal || a->device_driver;
  fprintf(o, "/* %s.c: generated by mlc %s from %s.  Do not edit. */\n", n, MLC_VERSION, source_name(a));
  fprintf(o, "#include \"%s.h\"\n\n#include <pthread.h>\n#include <stdlib.h>\n#include <string.h>\n\n", n);
  fprintf(o, "#include \"runtime/plan.h\"\n#include \"runtime/session.h\"\n#include \"runtime/version.h\"\n");
  if (has_decode(p)) fprintf(o, "#include \"runtime/generate.h\"\n");
  if (metal) fprintf(o, "#include \"runtime/metal/device.h\"\n");
  else if (gpu) fprintf(o, "#include \"runtime/device.h\"\n");
  else fprintf(o, "#include \"runtime/cpu/features.h\"\n");
  fprintf(o, "\n");
  if (metal) write_metal_kernels(o, a);
  else if (!gpu) write_cpu_kernels(o, a);
  bool cpu = !gpu;
  /* A GPU's plan holds its code (the executables section): nothing else to embed. */
  if (gpu) write_bytes(o, "plan_bytes", a->plan, a->plan_bytes, false);
  fprintf(o, "struct %s {\n  mlc_allocator a; /* the options' or malloc's: the model came from it */\n"
             "  mlc_plan *plan;\n  mlc_session *session;\n%s"
             "  pthread_mutex_t lock; /* every call holds it (the header's \"Threads\") */\n};\n\n", n,
          cpu ? "  int build; /* which of builds[] runs */\n" : "");
  fprintf(o, "/* The model's lock; const calls take it too. */\n"
             "static void lock(const %s *m) { pthread_mutex_lock((pthread_mutex_t *)&m->lock); }\n"
             "static void unlock(const %s *m) { pthread_mutex_unlock((pthread_mutex_t *)&m->lock); }\n\n", n, n);
  /* The CPU's kernels need the features they were compiled for: the best
   * build this CPU has them all for. */
  char cpu_check[192] = "";
  if (cpu)
    snprintf(cpu_check, sizeof cpu_check,
             "  int build = 0;\n"
             "  if (!st) st = mlc_cpu_pick_version(\"the model '%s'\", cpu_versions, %u, &build);\n", n,
             1 + a->ncpu_more);
  fprintf(o,
          "mlc_status %s_create(const %s_options *opt, %s **out) {\n"
          "  *out = NULL;\n"
          "  mlc_status st = mlc_runtime_check_version(%d, \"the model '%s'\");\n"
          "%s"
          "  if (st) return st;\n"
          "  mlc_allocator a = opt && opt->allocator.alloc ? opt->allocator : mlc_allocator_default();\n"
          "  %s *m = mlc_allocator_alloc(a, sizeof *m);\n"
          "  if (!m) return mlc_status_make(MLC_OUT_OF_MEMORY, \"out of memory\");\n"
          "  memset(m, 0, sizeof *m);\n"
          "  m->a = a;\n"
          "  if (pthread_mutex_init(&m->lock, NULL)) {\n"
          "    mlc_allocator_free(a, m);\n"
          "    return mlc_status_make(MLC_OUT_OF_MEMORY, \"cannot create the model's lock\");\n"
          "  }\n"
          "%s"
          "  st = mlc_plan_parse(%s, a, &m->plan);\n",
          n, n, n, MLC_VERSION_NUMBER, n, cpu_check, n, cpu ? "  m->build = build;\n" : "",
          cpu ? "builds[build].plan, builds[build].plan_bytes" : "plan_bytes, sizeof plan_bytes");
  if (metal) {
    fprintf(o,
            "  mlc_device *dev = NULL;\n"
            "  mlc_metal_code code = {(const char *)cuda_source, %s, %zu, kernels, %u, stderr};\n"
            "  if (!st) st = mlc_metal_device_create(&code, a, &dev);\n"
            "  mlc_session_options so = {dev, NULL, NULL, 0, opt && opt->profile, a, NULL};\n",
            a->cuda_image ? "cuda_image" : "NULL", a->cuda_image ? a->cuda_image_bytes : 0, a->ncuda_kernels);
  } else if (gpu) {
    /* The device, of the driver the plan's code is for, reads its kernels from the plan. */
    fprintf(o,
            "  mlc_device *dev = NULL;\n"
            "  mlc_device_options dopt = {.allocator = a, .plan = m->plan, .progress = stderr};\n"
            "  if (!st) st = mlc_device_create(NULL, opt ? opt->device : 0, &dopt, &dev);\n"
            "  mlc_session_options so = {dev, NULL, NULL, 0, opt && opt->profile, a, NULL};\n");
  } else {
    fprintf(o, "  mlc_session_options so = {NULL, lookup, (void *)&builds[build], opt ? opt->threads : 0, opt && opt->profile, "
               "a, NULL};\n");
  }
  fprintf(o,
          "  if (!st) st = mlc_session_create(m->plan, &so, &m->session);\n"
          "  if (st) {\n    %s_destroy(m);\n    return st;\n  }\n"
          "  mlc_session_init_params(m->session, 0);\n"
          "  *out = m;\n  return NULL;\n}\n\n",
          n);
  if (cpu) fprintf(o, "const char *%s_cpu(const %s *m) { return cpu_versions[m->build].cpu; }\n\n", n, n);
  fprintf(o, "void %s_destroy(%s *m) {\n  if (!m) return;\n  mlc_session_destroy(m->session);\n  mlc_plan_free(m->plan);\n"
             "  pthread_mutex_destroy(&m->lock);\n  mlc_allocator_free(m->a, m);\n}\n\n", n, n);
  /* The calls that wrap one session call: the lock around it. */
  static const struct { const char *ret, *fn, *params, *call, *args; } wraps[] = {
    {"void", "init_weights", "%s *m, uint64_t seed", "mlc_session_init_params", "seed"},
    {"mlc_status", "load_weights", "%s *m, const char *path", "mlc_session_load_weights", "path"},
    {"mlc_status", "load_weights_memory", "%s *m, const void *data, size_t size", "mlc_session_load_weights_memory",
     "data, size"},
    {"mlc_status", "save_weights", "const %s *m, const char *path", "mlc_session_save_weights", "path"},
    {"mlc_status", "save_checkpoint", "const %s *m, const char *path", "mlc_session_save_checkpoint", "path"},
    {"mlc_status", "load_checkpoint", "%s *m, const char *path", "mlc_session_load_checkpoint", "path"},
    {"uint64_t", "steps", "const %s *m", "mlc_session_step", NULL},
    {"void", "set_schedule_steps", "%s *m, uint64_t steps", "mlc_session_set_schedule_steps", "steps"},
    {"uint64_t", "schedule_steps", "const %s *m", "mlc_session_schedule_steps", NULL},
    {"double", "lr", "const %s *m", "mlc_session_lr", NULL},
    {"void", "profile_print", "const %s *m, const char *entry, FILE *out", "mlc_session_print_profile", "entry, out"},
  };
  for (size_t i = 0; i < sizeof wraps / sizeof *wraps; i++) {
    bool isvoid = !strcmp(wraps[i].ret, "void");
    fprintf(o, "%s %s_%s(", wraps[i].ret, n, wraps[i].fn);
    fprintf(o, wraps[i].params, n);
    fprintf(o, ") {\n  lock(m);\n  %s%s%s(m->session%s%s);\n  unlock(m);\n%s}\n\n", isvoid ? "" : wraps[i].ret,
            isvoid ? "" : " r = ", wraps[i].call, wraps[i].args ? ", " : "", wraps[i].args ? wraps[i].args : "",
            isvoid ? "" : "  return r;\n");
  }
  for (uint32_t k = 0; k < p->nfuncs; k++) {
    const mlc_func *f = &p->funcs[k];
    fprintf(o, "static mlc_status %s_%s_locked(%s *m", n, entry_suffix(f), n);
    for (uint32_t i = 0; i < f->inputs.n; i++) {
      const mlc_node *nd = &f->nodes[f->inputs.v[i]];
      if (user_input(nd)) fprintf(o, ", const %s *%s", ctype(nd->type.dtype), nd->a.name);
    }
    for (uint32_t i = 0; i < f->noutputs; i++)
      if (user_output(f, i)) fprintf(o, ", %s *%s", ctype(f->nodes[f->outputs[i].node].type.dtype), f->outputs[i].name);
    fprintf(o, ") {\n  mlc_status st;\n");
    for (uint32_t i = 0; i < f->inputs.n; i++) {
      const mlc_node *nd = &f->nodes[f->inputs.v[i]];
      if (!user_input(nd)) continue;
      fprintf(o, "  if ((st = mlc_session_set_input(m->session, \"%s\", \"%s\", %s, %lldu))) return st;\n", f->name,
              nd->a.name, nd->a.name, (long long)(mlc_type_numel(&nd->type) * mlc_dtype_size(nd->type.dtype)));
    }
    fprintf(o, "  if ((st = mlc_session_run(m->session, \"%s\"))) return st;\n", f->name);
    for (uint32_t i = 0; i < f->noutputs; i++) {
      if (!user_output(f, i)) continue;
      const mlc_type *t = &f->nodes[f->outputs[i].node].type;
      fprintf(o, "  const void *out%u;\n  const mlc_plan_shape *shape%u;\n", i, i);
      fprintf(o, "  if ((st = mlc_session_output(m->session, \"%s\", \"%s\", &out%u, &shape%u))) return st;\n", f->name,
              f->outputs[i].name, i, i);
      fprintf(o, "  memcpy(%s, out%u, %lldu);\n", f->outputs[i].name, i,
              (long long)(mlc_type_numel(t) * mlc_dtype_size(t->dtype)));
    }
    fprintf(o, "  return NULL;\n}\n\n");
    entry_signature(o, p, f);
    fprintf(o, " {\n  lock(m);\n  mlc_status st = %s_%s_locked(m", n, entry_suffix(f));
    for (uint32_t i = 0; i < f->inputs.n; i++) {
      const mlc_node *nd = &f->nodes[f->inputs.v[i]];
      if (user_input(nd)) fprintf(o, ", %s", nd->a.name);
    }
    for (uint32_t i = 0; i < f->noutputs; i++)
      if (user_output(f, i)) fprintf(o, ", %s", f->outputs[i].name);
    fprintf(o, ");\n  unlock(m);\n  return st;\n}\n\n");
    write_tensors_entry(o, p, f);
  }
  if (has_decode(p))
    fprintf(o, "mlc_status %s_generate(%s *m, const int32_t *prompt, uint32_t prompt_n, uint32_t max_new, double temperature,\n"
               "                       uint32_t top_k, uint64_t seed, int32_t *tokens_out) {\n"
               "  if (!m || !prompt || !tokens_out)\n"
               "    return mlc_status_make(MLC_INVALID_ARGUMENT, \"%s_generate: the model, the prompt and tokens_out must not be NULL\");\n"
               "  mlc_generate_args a = {.prompt = prompt, .prompt_n = prompt_n, .max_new = (long)max_new, .temperature = temperature,\n"
               "                         .top_k = (long)top_k, .seed = seed};\n"
               "  mlc_generate_result r;\n"
               "  lock(m);\n"
               "  mlc_status st = mlc_generate(m->session, &a, &r);\n"
               "  unlock(m);\n"
               "  if (!st) memcpy(tokens_out, r.tokens, (size_t)r.n * sizeof *tokens_out);\n"
               "  free(r.tokens);\n"
               "  return st;\n}\n\n", n, n, n);
}

/* The link line past lib<name>.a: cJSON by its run-time file name (the
 * libcjson1 package, not the development one), threads, libm, dlopen. */
#define DEPS_LINK "-l:libcjson.so.1 -lpthread -lm -ldl"

/* <name>.cmake: lib<name>.a (driver/bundle.c made it: the glue, the kernels
 * and the runtime) as an imported library; every path is relative to the
 * fragment, so the folder can move. */
static void write_cmake(FILE *o, const mlc_program *p, const mlc_artifact *a) {
  (void)a;
  const char *n = p->name;
  fprintf(o, "# %s.cmake: generated by mlc %s.  include() it, then link the target %s:\n"
             "# lib%s.a in this folder, which holds the model and the mlc runtime.\n", n, MLC_VERSION, n, n);
  fprintf(o, "if(TARGET %s)\n"
             "  get_target_property(_mlc_location %s IMPORTED_LOCATION)\n"
             "  if(_mlc_location STREQUAL \"${CMAKE_CURRENT_LIST_DIR}/lib%s.a\")\n"
             "    return() # included twice\n"
             "  endif()\n"
             "  message(FATAL_ERROR \"${CMAKE_CURRENT_LIST_FILE}: a target named %s exists already; give each model its own \"\n"
             "                      \"name with mlc compile --name NAME\")\n"
             "endif()\n", n, n, n, n);
  fprintf(o, "find_package(Threads REQUIRED)\n");
  fprintf(o, "add_library(%s STATIC IMPORTED)\n", n);
  fprintf(o, "set_target_properties(%s PROPERTIES\n"
             "  IMPORTED_LOCATION \"${CMAKE_CURRENT_LIST_DIR}/lib%s.a\"\n"
             "  INTERFACE_INCLUDE_DIRECTORIES \"${CMAKE_CURRENT_LIST_DIR}\"\n"
             "  INTERFACE_LINK_LIBRARIES \"-l:libcjson.so.1;Threads::Threads;m;${CMAKE_DL_LIBS}\")\n", n, n);
  if (MLC_RUNTIME_LINK_OPTIONS[0])
    fprintf(o, "set_target_properties(%s PROPERTIES INTERFACE_LINK_OPTIONS \"%s\")\n", n, MLC_RUNTIME_LINK_OPTIONS);
}

/* <name>.pc: the same, relative to the .pc file (pkg-config's pcfiledir). */
static void write_pc(FILE *o, const mlc_program *p, const mlc_artifact *a) {
  (void)a;
  fprintf(o, "# %s.pc: generated by mlc %s.  PKG_CONFIG_PATH=DIR pkg-config --cflags --libs %s\n", p->name, MLC_VERSION,
          p->name);
  fprintf(o, "prefix=${pcfiledir}\n\n");
  fprintf(o, "Name: %s\nDescription: %s compiled by mlc, with the mlc runtime\nVersion: %s\n", p->name, p->name,
          MLC_VERSION);
  fprintf(o, "Cflags: -I${prefix}\nLibs: ${prefix}/lib%s.a %s %s\n", p->name, DEPS_LINK, MLC_RUNTIME_LINK_OPTIONS);
}

mlc_status mlc_artifact_mkdir(const char *dir) {
  /* Like mkdir -p: each prefix that ends at a '/' first. */
  char path[4096];
  size_t n = strlen(dir);
  if (n == 0 || n >= sizeof path) return mlc_status_make(MLC_INVALID_ARGUMENT, "bad output folder '%s'", dir);
  memcpy(path, dir, n + 1);
  for (size_t i = 1; i <= n; i++) {
    if (path[i] != '/' && path[i] != 0) continue;
    char c = path[i];
    path[i] = 0;
    struct stat st;
    if (mkdir(path, 0777) && !(errno == EEXIST && stat(path, &st) == 0 && S_ISDIR(st.st_mode)))
      return mlc_status_make(MLC_IO, "cannot create the folder %s: %s", path,
                             errno == EEXIST ? "a file of that name exists" : strerror(errno));
    path[i] = c;
  }
  return NULL;
}

mlc_status mlc_artifact_write(const mlc_program *p, const mlc_artifact *a) {
  MLC_RETURN_IF_ERROR(mlc_artifact_mkdir(a->dir));
  static const char *const ext[] = {".h", ".c", ".cmake", ".pc"};
  void (*const writer[])(FILE *, const mlc_program *, const mlc_artifact *) = {write_header, write_source, write_cmake, write_pc};
  for (int i = 0; i < 4; i++) {
    FILE *o;
    MLC_RETURN_IF_ERROR(open_out(a, p->name, ext[i], &o));
    writer[i](o, p, a);
    MLC_RETURN_IF_ERROR(close_out(o, a, p->name, ext[i]));
  }
  if (!a->device_driver) return NULL;
  /* The plan carries the GPU's code: as a file of its own too, which runs
   * with the runtime alone (mlc run DIR/<name>.mlcplan, mlc_plan_read_file). */
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.mlcplan", a->dir, p->name);
  FILE *f = fopen(path, "wb");
  bool ok = f && fwrite(a->plan, 1, a->plan_bytes, f) == a->plan_bytes;
  if (f) ok &= fclose(f) == 0;
  return ok ? NULL : mlc_status_make(MLC_IO, "cannot write %s: %s", path, strerror(errno));
}
