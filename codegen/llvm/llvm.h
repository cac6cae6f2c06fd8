/* The CPU target: native code through the LLVM C API.
 *
 * mlc_llvm_compile turns one IR function into one LLVM module with a kernel
 * per node that computes something (leaves and reshapes, which is a view,
 * get none), optimised with LLVM's default<O3> pipeline for a target
 * machine, by default the host CPU with all its features.  The module then
 * leaves either as an object file (mlc_llvm_emit_object) or through an
 * in-process ORC LLJIT that hands back function pointers (mlc_llvm_jit_create).
 *
 * Every kernel has the ABI of runtime/cpu/kernel.h:
 *     void kernel(void **bufs, int64_t begin, int64_t end)
 * and is described by an mlc_llvm_kernel: its symbol, named after the op,
 * the scope and the node (`layers.0.attn.linear_22`), its number of work
 * items, and its FLOP and byte counts from the op table's cost rule.
 *
 * Errors (an op or dtype this backend does not support, LLVM refusing the
 * target) come back as false with a one-line message in err.
 */
#ifndef MLC_CODEGEN_LLVM_H
#define MLC_CODEGEN_LLVM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir/ir.h"
#include "runtime/status.h"
#include "runtime/cpu/kernel.h"

typedef struct {
  const char *triple;   /* LLVM target triple; NULL: the host's (LLVMGetDefaultTargetTriple) */
  const char *cpu;      /* LLVM CPU name ("haswell", "x86-64-v3"); NULL or "native": the host's CPU with
                           its features; "baseline": the portable one (x86-64-v2 on x86-64, else
                           "generic") */
  const char *features; /* "+avx2,+fma,...": with a named CPU, added to its own; NULL: none added
                           (the host's with the host's CPU) */
  int vector_width;     /* f32 lanes per vector; 0: 16 with AVX-512, 8 with AVX2, else 4 */
  bool no_opt;          /* skip default<O3>, to read the generated IR */
  const char *cache_dir; /* where object code is kept by a hash of the module (before default<O3>),
                            the target machine and LLVM's version: a module seen before skips
                            LLVM's optimiser and code generator.  NULL: no cache */
  const char *symbol_prefix; /* prepended to every kernel symbol ("minillm.forward."), so
                                several entry points and models link into one program */
} mlc_llvm_options;

typedef struct {
  const char *name; /* symbol name */
  uint32_t node;    /* the node it computes */
  int64_t items;    /* work items */
  double flops, bytes;
} mlc_llvm_kernel;

typedef struct mlc_llvm_module mlc_llvm_module;
typedef struct mlc_llvm_jit mlc_llvm_jit;

/* Builds and optimises the module.  p and f are only read during the call. */
/* Whether the code generator has a kernel for op (or it needs none): else
 * mlc_llvm_compile refuses it ("has no kernel for op"). */
bool mlc_llvm_supports_op(mlc_op op);
/* MLC_INVALID_ARGUMENT for a --triple or --cpu LLVM lacks, or a node the
 * emitters refuse (the message names it); MLC_INTERNAL for a module that
 * does not verify or an LLVM failure; MLC_OUT_OF_MEMORY. */
MLC_MUST_USE mlc_status mlc_llvm_compile(const mlc_program *p, const mlc_func *f, const mlc_llvm_options *o,
                                         mlc_llvm_module **out);
void mlc_llvm_module_destroy(mlc_llvm_module *m);

uint32_t mlc_llvm_kernel_count(const mlc_llvm_module *m);
const mlc_llvm_kernel *mlc_llvm_kernel_at(const mlc_llvm_module *m, uint32_t i);
/* The target it was compiled for: "sapphirerapids", its features
 * ("+avx512f,+avx2,...,-amx-tile": LLVM's names; a '-' one is off), and the
 * vector width. */
const char *mlc_llvm_target_cpu(const mlc_llvm_module *m);
const char *mlc_llvm_target_features(const mlc_llvm_module *m);
int mlc_llvm_vector_width(const mlc_llvm_module *m);
/* Seconds spent building the IR and in LLVM's optimiser. */
void mlc_llvm_compile_seconds(const mlc_llvm_module *m, double *build, double *optimise);

/* Writes a relocatable (PIC) object file, or the textual IR (.ll); MLC_IO
 * when it cannot. */
MLC_MUST_USE mlc_status mlc_llvm_emit_object(mlc_llvm_module *m, const char *path);
MLC_MUST_USE mlc_status mlc_llvm_emit_ir(mlc_llvm_module *m, const char *path);

/* Compiles the module to machine code in this process.  The module stays
 * usable (for emit_*) and must outlive nothing: the JIT owns its own copy of
 * the code. */
MLC_MUST_USE mlc_status mlc_llvm_jit_create(mlc_llvm_module *m, mlc_llvm_jit **out);
/* The function pointer of kernel i (in mlc_llvm_kernel_at order). */
mlc_cpu_kernel_fn mlc_llvm_jit_kernel(const mlc_llvm_jit *j, uint32_t i);
/* A kernel by symbol name, NULL if there is none; `jit` is an
 * mlc_llvm_jit *.  The signature is runtime/session.h's mlc_symbol_lookup. */
void *mlc_llvm_jit_symbol(void *jit, const char *symbol);
void mlc_llvm_jit_destroy(mlc_llvm_jit *j);

#endif
