/* The CPU features an artifact's kernels were compiled for, checked against
 * the machine it runs on.
 *
 * `mlc compile --cpu NAME` records the CPU and its features (LLVM's names,
 * "+avx2,+fma,...,-avx512f") in the artifact, whose create calls this first:
 * kernels built for a feature the machine lacks would die of SIGILL at the
 * first forward pass, so the model refuses to start instead and names the
 * feature.  `mlc run --cpu NAME` checks the same before it runs the JIT's
 * kernels.
 *
 * Only x86-64 is checked, through cpuid and xgetbv (the OS must also save
 * the AVX and AVX-512 registers); features it has no cpuid bit for (sgx,
 * retpoline and the like, which code generation does not use) are passed
 * over.  Elsewhere every call succeeds. */
#ifndef MLC_CPU_FEATURES_H
#define MLC_CPU_FEATURES_H

#include <stddef.h>

#include "runtime/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* NULL when this CPU has every '+' feature of `features`; else
 * MLC_UNIMPLEMENTED naming `what` ("the model 'mlp'"), the CPU it was
 * compiled for and the first feature missing. */
MLC_MUST_USE mlc_status mlc_cpu_check_features(const char *what, const char *cpu, const char *features);

/* One build of an artifact's kernels: the CPU it was compiled for and its
 * features, as mlc_cpu_check_features takes them. */
typedef struct mlc_cpu_version {
  const char *cpu, *features;
} mlc_cpu_version;

/* Function multiversioning: an artifact may carry its kernels compiled
 * several times, v[0] for the most portable CPU (x86-64-v2) and each later
 * one for a stronger one (x86-64-v3, x86-64-v4).  *out is the last of the
 * n whose every '+' feature this CPU has.  The environment variable
 * MLC_CPU_MAX, set to one of their CPU names, caps the choice at that build,
 * so a machine can run (and test) a lower one than its best.  Errors: this
 * CPU lacks a feature of v[0] (mlc_cpu_check_features' message), or
 * MLC_CPU_MAX names none of the builds (MLC_INVALID_ARGUMENT, listing them). */
MLC_MUST_USE mlc_status mlc_cpu_pick_version(const char *what, const mlc_cpu_version *v, int n, int *out);

/* This CPU as `mlc devices` shows it: its x86-64 microarchitecture level
 * ("x86-64-v3": the psABI's levels, each checked as mlc_cpu_check_features
 * does, the OS's register state included) and the features of those that
 * kernels use ("sse4.2 avx avx2 fma f16c"), as "x86-64-v3: sse4.2 avx ...".
 * Elsewhere than x86-64: the architecture only. */
void mlc_cpu_host_describe(char *buf, size_t n);

#ifdef __cplusplus
}
#endif

#endif
