/* The host's CPU features against an artifact's (features.h): a table from
 * LLVM's feature names to cpuid bits (Intel SDM vol. 2A, "CPUID"; AMD's
 * APM vol. 3 for leaf 0x80000001). */
#include "runtime/cpu/features.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>

enum { EAX, EBX, ECX, EDX };

/* XCR0 bits the OS must set for a feature's registers to be usable. */
#define XCR0_AVX 0x6u       /* SSE and AVX state */
#define XCR0_AVX512 0xe6u   /* and the opmask and ZMM state */
#define XCR0_AMX 0x60000u   /* XTILECFG and XTILEDATA */

static const struct {
  const char *name; /* LLVM's */
  uint32_t leaf, subleaf;
  uint8_t reg, bit;
  uint32_t xcr0;
} features[] = {
  {"x87", 1, 0, EDX, 0, 0},           {"cx8", 1, 0, EDX, 8, 0},            {"cmov", 1, 0, EDX, 15, 0},
  {"mmx", 1, 0, EDX, 23, 0},          {"fxsr", 1, 0, EDX, 24, 0},          {"sse", 1, 0, EDX, 25, 0},
  {"sse2", 1, 0, EDX, 26, 0},         {"sse3", 1, 0, ECX, 0, 0},           {"pclmul", 1, 0, ECX, 1, 0},
  {"ssse3", 1, 0, ECX, 9, 0},         {"fma", 1, 0, ECX, 12, XCR0_AVX},    {"cx16", 1, 0, ECX, 13, 0},
  {"sse4.1", 1, 0, ECX, 19, 0},       {"sse4.2", 1, 0, ECX, 20, 0},        {"crc32", 1, 0, ECX, 20, 0},
  {"movbe", 1, 0, ECX, 22, 0},        {"popcnt", 1, 0, ECX, 23, 0},        {"aes", 1, 0, ECX, 25, 0},
  {"xsave", 1, 0, ECX, 26, 0},        {"avx", 1, 0, ECX, 28, XCR0_AVX},    {"f16c", 1, 0, ECX, 29, XCR0_AVX},
  {"rdrnd", 1, 0, ECX, 30, 0},
  {"fsgsbase", 7, 0, EBX, 0, 0},      {"bmi", 7, 0, EBX, 3, 0},            {"avx2", 7, 0, EBX, 5, XCR0_AVX},
  {"bmi2", 7, 0, EBX, 8, 0},          {"invpcid", 7, 0, EBX, 10, 0},       {"avx512f", 7, 0, EBX, 16, XCR0_AVX512},
  {"avx512dq", 7, 0, EBX, 17, XCR0_AVX512}, {"rdseed", 7, 0, EBX, 18, 0},  {"adx", 7, 0, EBX, 19, 0},
  {"avx512ifma", 7, 0, EBX, 21, XCR0_AVX512}, {"clflushopt", 7, 0, EBX, 23, 0}, {"clwb", 7, 0, EBX, 24, 0},
  {"avx512cd", 7, 0, EBX, 28, XCR0_AVX512}, {"sha", 7, 0, EBX, 29, 0},     {"avx512bw", 7, 0, EBX, 30, XCR0_AVX512},
  {"avx512vl", 7, 0, EBX, 31, XCR0_AVX512},
  {"avx512vbmi", 7, 0, ECX, 1, XCR0_AVX512}, {"pku", 7, 0, ECX, 3, 0},     {"waitpkg", 7, 0, ECX, 5, 0},
  {"avx512vbmi2", 7, 0, ECX, 6, XCR0_AVX512}, {"shstk", 7, 0, ECX, 7, 0},  {"gfni", 7, 0, ECX, 8, 0},
  {"vaes", 7, 0, ECX, 9, XCR0_AVX},   {"vpclmulqdq", 7, 0, ECX, 10, XCR0_AVX}, {"avx512vnni", 7, 0, ECX, 11, XCR0_AVX512},
  {"avx512bitalg", 7, 0, ECX, 12, XCR0_AVX512}, {"avx512vpopcntdq", 7, 0, ECX, 14, XCR0_AVX512},
  {"rdpid", 7, 0, ECX, 22, 0},        {"cldemote", 7, 0, ECX, 25, 0},      {"movdiri", 7, 0, ECX, 27, 0},
  {"movdir64b", 7, 0, ECX, 28, 0},    {"enqcmd", 7, 0, ECX, 29, 0},
  {"uintr", 7, 0, EDX, 5, 0},         {"avx512vp2intersect", 7, 0, EDX, 8, XCR0_AVX512},
  {"serialize", 7, 0, EDX, 14, 0},    {"tsxldtrk", 7, 0, EDX, 16, 0},      {"pconfig", 7, 0, EDX, 18, 0},
  {"amx-bf16", 7, 0, EDX, 22, XCR0_AMX}, {"avx512fp16", 7, 0, EDX, 23, XCR0_AVX512},
  {"amx-tile", 7, 0, EDX, 24, XCR0_AMX}, {"amx-int8", 7, 0, EDX, 25, XCR0_AMX},
  {"avxvnni", 7, 1, EAX, 4, XCR0_AVX}, {"avx512bf16", 7, 1, EAX, 5, XCR0_AVX512},
  {"xsaveopt", 0xd, 1, EAX, 0, 0},    {"xsavec", 0xd, 1, EAX, 1, 0},       {"xsaves", 0xd, 1, EAX, 3, 0},
  {"sahf", 0x80000001, 0, ECX, 0, 0}, {"lzcnt", 0x80000001, 0, ECX, 5, 0}, {"sse4a", 0x80000001, 0, ECX, 6, 0},
  {"prfchw", 0x80000001, 0, ECX, 8, 0}, {"xop", 0x80000001, 0, ECX, 11, XCR0_AVX},
  {"fma4", 0x80000001, 0, ECX, 16, XCR0_AVX}, {"tbm", 0x80000001, 0, ECX, 21, 0},
};

/* XCR0, or 0 when the OS has not enabled xgetbv (no AVX state at all). */
static uint32_t xcr0(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return 0; /* OSXSAVE */
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return lo;
}

/* 1 when this CPU (and its OS) has the feature of that name (n bytes), 0
 * when not, -1 when the table has no row for it (nothing to check). */
static int has(const char *name, size_t n, uint32_t os) {
  for (size_t i = 0; i < sizeof features / sizeof *features; i++) {
    if (strlen(features[i].name) != n || memcmp(features[i].name, name, n)) continue;
    unsigned r[4] = {0, 0, 0, 0};
    if (!__get_cpuid_count(features[i].leaf, features[i].subleaf, &r[EAX], &r[EBX], &r[ECX], &r[EDX])) return 0;
    return (r[features[i].reg] >> features[i].bit & 1) && (os & features[i].xcr0) == features[i].xcr0;
  }
  return -1;
}

/* How many of list's '+' features this CPU lacks; the first in *first
 * (*first_n bytes). */
static size_t lacks(const char *list, const char **first, size_t *first_n) {
  uint32_t os = xcr0();
  size_t missing = 0;
  for (const char *s = list; *s;) {
    size_t n = strcspn(s, ",");
    if (*s == '+' && has(s + 1, n - 1, os) == 0) {
      if (!missing) *first = s + 1, *first_n = n - 1;
      missing++;
    }
    s += n + (s[n] == ',');
  }
  return missing;
}

mlc_status mlc_cpu_check_features(const char *what, const char *cpu, const char *list) {
  const char *first = NULL;
  size_t first_n = 0, missing = lacks(list, &first, &first_n);
  if (!missing) return NULL;
  char more[64] = "";
  if (missing > 1) snprintf(more, sizeof more, " (and %zu more of its features)", missing - 1);
  return mlc_status_make(MLC_UNIMPLEMENTED, "%s was compiled for the CPU %s, and this CPU lacks its feature %.*s%s: "
                         "compile it again with --cpu native (this machine) or --cpu baseline (any x86-64 since "
                         "about 2009)", what, cpu, (int)first_n, first, more);
}

static bool fits(const mlc_cpu_version *v) {
  const char *first;
  size_t first_n;
  return lacks(v->features, &first, &first_n) == 0;
}

#else

static bool fits(const mlc_cpu_version *v) {
  (void)v;
  return true;
}

mlc_status mlc_cpu_check_features(const char *what, const char *cpu, const char *features) {
  (void)what, (void)cpu, (void)features;
  return NULL;
}

#endif

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/* The x86-64 psABI's levels, in LLVM's feature names. */
static const mlc_cpu_version levels[] = {
  {"x86-64-v2", "+cx16,+sahf,+popcnt,+sse3,+sse4.1,+sse4.2,+ssse3"},
  {"x86-64-v3", "+avx,+avx2,+bmi,+bmi2,+f16c,+fma,+lzcnt,+movbe,+xsave"},
  {"x86-64-v4", "+avx512f,+avx512bw,+avx512cd,+avx512dq,+avx512vl"},
};

/* The features kernels care for, in the order they came. */
static const char *const shown[] = {
  "sse4.2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512vnni", "avx512bf16", "avx512fp16",
  "amx-tile", "amx-bf16", "amx-int8",
};

void mlc_cpu_host_describe(char *buf, size_t n) {
  const char *level = "x86-64";
  for (size_t i = 0; i < sizeof levels / sizeof *levels && fits(&levels[i]); i++) level = levels[i].cpu;
  uint32_t os = xcr0();
  size_t len = (size_t)snprintf(buf, n, "%s:", level);
  for (size_t i = 0; i < sizeof shown / sizeof *shown && len < n; i++)
    if (has(shown[i], strlen(shown[i]), os) == 1) len += (size_t)snprintf(buf + len, n - len, " %s", shown[i]);
}
#else
void mlc_cpu_host_describe(char *buf, size_t n) {
#if defined(__aarch64__)
  snprintf(buf, n, "aarch64");
#else
  snprintf(buf, n, "not x86-64");
#endif
}
#endif

mlc_status mlc_cpu_pick_version(const char *what, const mlc_cpu_version *v, int n, int *out) {
  *out = 0;
  int last = n - 1;
  const char *cap = getenv("MLC_CPU_MAX");
  if (cap && *cap) {
    while (last >= 0 && strcmp(v[last].cpu, cap)) last--;
    if (last < 0) {
      char names[256] = "";
      for (int i = 0, len = 0; i < n && len < (int)sizeof names; i++)
        len += snprintf(names + len, sizeof names - (size_t)len, "%s%s", i ? ", " : "", v[i].cpu);
      return mlc_status_make(MLC_INVALID_ARGUMENT, "MLC_CPU_MAX=%s: %s carries no build for that CPU (it has %s)",
                             cap, what, names);
    }
  }
  /* The baseline's own check gives the message when even it does not fit. */
  MLC_RETURN_IF_ERROR(mlc_cpu_check_features(what, v[0].cpu, v[0].features));
  for (int i = last; i > 0; i--)
    if (fits(&v[i])) {
      *out = i;
      break;
    }
  return NULL;
}
