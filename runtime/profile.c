/* The profiler's analysis: cached ceilings, roofline classification and
 * hints, and the SVG roofline.  See profile.h. */
#include "runtime/profile.h"
#include "runtime/tensor.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

void mlc_ceilings_default(mlc_ceilings *c) {
  memset(c, 0, sizeof *c);
  c->peak_flops = 100e9;
  c->bandwidth = 20e9;
  c->latency_s = MLC_PROFILE_CPU_LATENCY_S;
  mlc_profile_cpu_model(c->device, sizeof c->device);
  /* unit_flops all 0: a CPU runs every unit's work on its FMA units at peak_flops. */
  snprintf(c->source, sizeof c->source, "built-in defaults: this CPU was never calibrated (run `mlc calibrate --target cpu`)");
}

const char *mlc_unit_name(mlc_unit u) {
  static const char *const names[MLC_NUNITS] = {"fp32", "bf16", "tf32", "fp8"};
  return (unsigned)u < MLC_NUNITS ? names[u] : "?";
}

const char *mlc_ceiling_source_name(mlc_ceiling_source s) {
  return s == MLC_CEIL_MEASURED ? "measured" : s == MLC_CEIL_DATASHEET ? "datasheet" : "default";
}

double mlc_ceilings_unit_peak(const mlc_ceilings *c, mlc_unit u) {
  return (unsigned)u < MLC_NUNITS && c->unit_flops[u] > 0 ? c->unit_flops[u] : c->peak_flops;
}

double mlc_ceilings_rule_peak(const mlc_ceilings *c, mlc_unit u) {
  if ((unsigned)u >= MLC_NUNITS) return mlc_ceilings_unit_peak(c, u);
  if (c->hw_clk_flops[u] > 0 && c->sm_mhz > 0) return c->hw_clk_flops[u] * c->sm_mhz * 1e6;
  return c->hw_flops[u] > 0 ? c->hw_flops[u] : mlc_ceilings_unit_peak(c, u);
}

double mlc_ceilings_rule_bandwidth(const mlc_ceilings *c) { return c->hw_bandwidth > 0 ? c->hw_bandwidth : c->bandwidth; }

const char *mlc_profile_unit_str(mlc_unit u, uint32_t products, char *buf, size_t n) {
  if (products > 1) snprintf(buf, n, "%sx%u", mlc_unit_name(u), products);
  else snprintf(buf, n, "%s", mlc_unit_name(u));
  return buf;
}

static void print_rate(FILE *out, double flops) {
  if (flops >= 1e12) fprintf(out, "%.1f TFLOP/s", flops / 1e12);
  else fprintf(out, "%.1f GFLOP/s", flops / 1e9);
}

void mlc_profile_print_units(const mlc_ceilings *c, FILE *out) {
  fprintf(out, "  units:");
  bool any = false;
  for (int u = 0; u < MLC_NUNITS; u++) {
    if (!(c->unit_flops[u] > 0)) continue;
    fprintf(out, "%s %s ", any ? "," : "", mlc_unit_name((mlc_unit)u));
    print_rate(out, c->unit_flops[u]);
    fprintf(out, " (%s)", mlc_ceiling_source_name(c->unit_from[u]));
    any = true;
  }
  if (!any) {
    fprintf(out, " every unit at ");
    print_rate(out, c->peak_flops);
    fprintf(out, " (%s)", c->calibrated ? "measured" : "default");
  }
  fprintf(out, "; memory %.1f GB/s (%s)", c->bandwidth / 1e9,
          c->calibrated ? "measured" : mlc_ceiling_source_name(c->bandwidth_from));
  if (c->l2_bandwidth > 0) fprintf(out, ", L2 %.1f GB/s (%s)", c->l2_bandwidth / 1e9, mlc_ceiling_source_name(c->l2_from));
  fputc('\n', out);
  if (c->hw_bandwidth > 0) {
    bool per_clock = false;
    for (int u = 0; u < MLC_NUNITS; u++) per_clock |= c->hw_clk_flops[u] > 0;
    if (per_clock) {
      fprintf(out, "  the rule's percentages: of each unit's FLOPs per clock (");
      for (int u = 0, k = 0; u < MLC_NUNITS; u++)
        if (c->hw_clk_flops[u] > 0)
          fprintf(out, "%s%s %.0f", k++ ? ", " : "", mlc_unit_name((mlc_unit)u), c->hw_clk_flops[u] / (c->sms > 0 ? c->sms : 1));
      fprintf(out, " an SM%s) ", c->sms > 0 ? ", x the SMs" : "");
      if (c->sm_mhz > 0) fprintf(out, "at the SM clock measured under load (%.0f MHz)", c->sm_mhz);
      else fprintf(out, "at the datasheet's clocks (the clock under load is not measured: run mlc calibrate)");
    } else {
      fprintf(out, "  the rule's percentages: of the datasheet's peaks");
    }
    fprintf(out, ", HBM %.1f GB/s\n", c->hw_bandwidth / 1e9);
  }
}

void mlc_profile_cpu_model(char *buf, size_t n) {
  snprintf(buf, n, "unknown CPU");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "model name", 10)) continue;
    char *v = strchr(line, ':');
    if (!v) break;
    v++;
    while (*v == ' ' || *v == '\t') v++;
    size_t len = strcspn(v, "\n");
    snprintf(buf, n, "%.*s", (int)len, v);
    break;
  }
  fclose(f);
}

bool mlc_cache_path(char *buf, size_t n, const char *file) {
  const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  int k;
  if (xdg && *xdg) k = snprintf(buf, n, "%s/mlc/%s", xdg, file);
  else if (home && *home) k = snprintf(buf, n, "%s/.cache/mlc/%s", home, file);
  else return false;
  return k > 0 && (size_t)k < n;
}

bool mlc_ceilings_cache_path(char *buf, size_t n) { return mlc_cache_path(buf, n, "ceilings-cpu.json"); }

void *mlc_read_file(const char *path, size_t *out_n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = NULL;
  long len = fseek(f, 0, SEEK_END) ? -1 : ftell(f);
  if (len > 0 && !fseek(f, 0, SEEK_SET) && (buf = malloc((size_t)len + 1))) {
    if (fread(buf, 1, (size_t)len, f) == (size_t)len) {
      buf[len] = 0;
      *out_n = (size_t)len;
    } else {
      free(buf);
      buf = NULL;
    }
  }
  fclose(f);
  return buf;
}

void mlc_write_file(const char *path, const void *data, size_t n) {
  char tmp[1100];
  snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
  mlc_mkdir_parents(path);
  FILE *f = fopen(tmp, "wb");
  if (!f) return;
  bool ok = fwrite(data, 1, n, f) == n;
  ok &= fclose(f) == 0;
  if (!ok || rename(tmp, path)) remove(tmp);
}

bool mlc_cpu_cache_dir(char *buf, size_t n) {
  const char *off = getenv("MLC_CPU_CACHE");
  return !(off && !strcmp(off, "0")) && mlc_cache_path(buf, n, "cpu");
}

void mlc_mkdir_parents(const char *path) {
  char d[1024];
  snprintf(d, sizeof d, "%s", path);
  for (char *p = d + 1; *p; p++)
    if (*p == '/') { *p = 0; mkdir(d, 0755); *p = '/'; }
}

static cJSON *read_json(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = NULL;
  long len = fseek(f, 0, SEEK_END) ? -1 : ftell(f);
  if (len > 0 && len < (1 << 20) && !fseek(f, 0, SEEK_SET) && (buf = malloc((size_t)len + 1))) {
    if (fread(buf, 1, (size_t)len, f) == (size_t)len) buf[len] = 0;
    else { free(buf); buf = NULL; }
  }
  fclose(f);
  cJSON *j = buf ? cJSON_Parse(buf) : NULL;
  free(buf);
  return j;
}

/* The entry `key` of a ceilings cache: peak, bandwidth and when, into out
 * (calibrated, its source naming the file); then, where the entry has them,
 * each unit's peak ("units": {"fp32": {"gflops": .., "from": "measured"}})
 * and the L2 bandwidth.  An entry written before units were cached gives
 * the peak of the bf16 tensor cores on a GPU.  False if the file or the
 * entry is missing; *had_file says which. */
static bool load_entry(const char *path, const char *key, mlc_ceilings *out, bool *had_file) {
  cJSON *root = read_json(path);
  *had_file = root != NULL;
  const cJSON *e = root ? cJSON_GetObjectItemCaseSensitive(root, key) : NULL;
  const cJSON *pk = e ? cJSON_GetObjectItemCaseSensitive(e, "peak_gflops") : NULL;
  const cJSON *bw = e ? cJSON_GetObjectItemCaseSensitive(e, "bandwidth_gbs") : NULL;
  const cJSON *when = e ? cJSON_GetObjectItemCaseSensitive(e, "calibrated") : NULL;
  bool ok = cJSON_IsNumber(pk) && cJSON_IsNumber(bw) && pk->valuedouble > 0 && bw->valuedouble > 0;
  if (ok) {
    out->peak_flops = pk->valuedouble * 1e9;
    out->bandwidth = bw->valuedouble * 1e9;
    out->bandwidth_from = MLC_CEIL_MEASURED;
    out->calibrated = true;
    snprintf(out->source, sizeof out->source, "cached calibration in %s%s%s", path,
             cJSON_IsString(when) ? " from " : "", cJSON_IsString(when) ? when->valuestring : "");
    const cJSON *units = cJSON_GetObjectItemCaseSensitive(e, "units");
    if (!cJSON_IsObject(units) && out->gpu) {
      out->unit_flops[MLC_UNIT_TC16] = out->peak_flops;
      out->unit_from[MLC_UNIT_TC16] = MLC_CEIL_MEASURED;
    }
    for (int u = 0; u < MLC_NUNITS && cJSON_IsObject(units); u++) {
      const cJSON *ue = cJSON_GetObjectItemCaseSensitive(units, mlc_unit_name((mlc_unit)u));
      const cJSON *g = cJSON_GetObjectItemCaseSensitive(ue, "gflops"), *from = cJSON_GetObjectItemCaseSensitive(ue, "from");
      if (!cJSON_IsNumber(g) || !(g->valuedouble > 0)) continue;
      out->unit_flops[u] = g->valuedouble * 1e9;
      out->unit_from[u] = cJSON_IsString(from) && !strcmp(from->valuestring, "measured") ? MLC_CEIL_MEASURED
                          : cJSON_IsString(from) && !strcmp(from->valuestring, "datasheet") ? MLC_CEIL_DATASHEET
                                                                                              : MLC_CEIL_DEFAULT;
    }
    const cJSON *mhz = cJSON_GetObjectItemCaseSensitive(e, "sm_mhz"), *max = cJSON_GetObjectItemCaseSensitive(e, "sm_max_mhz");
    if (cJSON_IsNumber(mhz) && cJSON_IsNumber(max) && mhz->valuedouble > 0 && max->valuedouble >= mhz->valuedouble)
      out->sm_mhz = mhz->valuedouble, out->sm_max_mhz = max->valuedouble;
    const cJSON *l2 = cJSON_GetObjectItemCaseSensitive(e, "l2_gbs");
    if (cJSON_IsNumber(l2) && l2->valuedouble > 0) {
      out->l2_bandwidth = l2->valuedouble * 1e9;
      out->l2_from = MLC_CEIL_MEASURED;
    }
  }
  cJSON_Delete(root);
  return ok;
}

void mlc_ceilings_load_file(const char *path, const char *cpu_model, mlc_ceilings *out) {
  mlc_ceilings_default(out);
  snprintf(out->device, sizeof out->device, "%s", cpu_model);
  bool had_file;
  if (!load_entry(path, cpu_model, out, &had_file) && had_file)
    snprintf(out->source, sizeof out->source, "built-in defaults: %s has no calibration of this CPU (run `mlc calibrate --target cpu`)", path);
}

/* "(sm_90, 132 SMs)" in a GPU's name: its SM count, else 0. */
static int sms_of(const char *name) {
  const char *p = strstr(name, " SMs)");
  if (!p) return 0;
  while (p > name && p[-1] >= '0' && p[-1] <= '9') p--;
  return atoi(p);
}

void mlc_ceilings_gpu_datasheet(const char *name, mlc_ceilings *out) {
  /* NVIDIA's datasheets, dense (no 2:4 sparsity), SXM parts, TFLOP/s and
   * TB/s: the H100/H200 datasheet (the H200 shares the H100's GH100 and
   * clocks, with HBM3e) and the A100 datasheet (80 GB SXM).  NVIDIA
   * publishes no L2 bandwidth: only `mlc calibrate` gives one. */
  static const struct {
    const char *match;
    double bf16, tf32, fp8, fp32, tbs;
    double clk[MLC_NUNITS]; /* dense FLOPs per clock of one SM: fp32, bf16, tf32, fp8 (the architecture's) */
  } known[] = {
    /* sm_90: 128 FP32 lanes and 4 tensor cores of 512 bf16 FMAs a clock (989.4 = 132 x 4096 x 1.83 GHz, 66.9 = 132 x 256 x 1.98 GHz) */
    {"H200", 989.4, 494.7, 1978.9, 66.9, 4.8, {256, 4096, 2048, 8192}},
    {"H100", 989.4, 494.7, 1978.9, 66.9, 3.35, {256, 4096, 2048, 8192}},
    /* sm_80: 64 FP32 lanes, 4 tensor cores of 256 (312 = 108 x 2048 x 1.41 GHz) */
    {"A100", 312, 156, 0, 19.5, 2.039, {128, 2048, 1024, 0}},
  };
  memset(out, 0, sizeof *out);
  snprintf(out->device, sizeof out->device, "%s", name);
  out->gpu = true;
  out->sms = sms_of(name);
  out->latency_s = 5e-6;
  out->peak_flops = 100e12;
  out->bandwidth = 1e12;
  snprintf(out->source, sizeof out->source, "built-in guesses for an unknown GPU (not calibrated: run `mlc calibrate --target cuda`, or `--target spirv` for a Vulkan device)");
  for (size_t i = 0; i < sizeof known / sizeof *known; i++)
    if (strstr(name, known[i].match)) {
      out->peak_flops = known[i].bf16 * 1e12;
      out->bandwidth = known[i].tbs * 1e12;
      out->bandwidth_from = MLC_CEIL_DATASHEET;
      double units[MLC_NUNITS] = {[MLC_UNIT_FP32] = known[i].fp32, [MLC_UNIT_TC16] = known[i].bf16,
                                  [MLC_UNIT_TF32] = known[i].tf32, [MLC_UNIT_FP8] = known[i].fp8};
      for (int u = 0; u < MLC_NUNITS; u++) {
        if (units[u] > 0) out->unit_flops[u] = out->hw_flops[u] = units[u] * 1e12, out->unit_from[u] = MLC_CEIL_DATASHEET;
        out->hw_clk_flops[u] = known[i].clk[u] * out->sms;
      }
      out->hw_bandwidth = out->bandwidth;
      snprintf(out->source, sizeof out->source, "NVIDIA's datasheet for the %s: dense tensor-core and FP32 peaks, HBM "
               "bandwidth (not calibrated on this GPU: run `mlc calibrate --target cuda` or `--target spirv`)", known[i].match);
    }
}

bool mlc_ceilings_gpu_cache_path(char *buf, size_t n) { return mlc_cache_path(buf, n, "ceilings-cuda.json"); }

void mlc_ceilings_gpu_file(const char *path, const char *name, mlc_ceilings *out) {
  mlc_ceilings_gpu_datasheet(name, out);
  bool had_file;
  load_entry(path, name, out, &had_file);
}

void mlc_ceilings_gpu(const char *name, mlc_ceilings *out) {
  char path[1024];
  if (mlc_ceilings_gpu_cache_path(path, sizeof path)) mlc_ceilings_gpu_file(path, name, out);
  else mlc_ceilings_gpu_datasheet(name, out);
}

void mlc_ceilings_load_cpu(mlc_ceilings *out) {
  char path[1024], model[128];
  mlc_profile_cpu_model(model, sizeof model);
  if (!mlc_ceilings_cache_path(path, sizeof path)) { mlc_ceilings_default(out); return; }
  mlc_ceilings_load_file(path, model, out);
}

mlc_status mlc_ceilings_save_file(const char *path, const mlc_ceilings *c) {
  cJSON *root = read_json(path);
  if (!cJSON_IsObject(root)) { cJSON_Delete(root); root = cJSON_CreateObject(); }
  if (!root) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory");
  cJSON_DeleteItemFromObjectCaseSensitive(root, c->device);
  cJSON *e = cJSON_AddObjectToObject(root, c->device);
  if (e) {
    cJSON_AddNumberToObject(e, "peak_gflops", c->peak_flops / 1e9);
    cJSON_AddNumberToObject(e, "bandwidth_gbs", c->bandwidth / 1e9);
    cJSON_AddStringToObject(e, "calibrated", c->source);
    cJSON *units = NULL;
    for (int u = 0; u < MLC_NUNITS; u++) {
      if (!(c->unit_flops[u] > 0)) continue;
      if (!units) units = cJSON_AddObjectToObject(e, "units");
      cJSON *ue = units ? cJSON_AddObjectToObject(units, mlc_unit_name((mlc_unit)u)) : NULL;
      if (!ue) continue;
      cJSON_AddNumberToObject(ue, "gflops", c->unit_flops[u] / 1e9);
      cJSON_AddStringToObject(ue, "from", mlc_ceiling_source_name(c->unit_from[u]));
    }
    if (c->l2_bandwidth > 0 && c->l2_from == MLC_CEIL_MEASURED) cJSON_AddNumberToObject(e, "l2_gbs", c->l2_bandwidth / 1e9);
    if (c->sm_mhz > 0 && c->sm_max_mhz > 0) {
      cJSON_AddNumberToObject(e, "sm_mhz", c->sm_mhz);
      cJSON_AddNumberToObject(e, "sm_max_mhz", c->sm_max_mhz);
    }
  }
  char *text = cJSON_Print(root);
  cJSON_Delete(root);
  if (!text) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory");
  mlc_mkdir_parents(path);
  char tmp[1100];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "wb");
  bool ok = f && fputs(text, f) >= 0 && fputc('\n', f) != EOF;
  if (f && fclose(f)) ok = false;
  free(text);
  if (!ok || rename(tmp, path))
    return mlc_status_make(MLC_IO, "cannot write %s: %s", path, strerror(errno));
  return NULL;
}

const char *mlc_bound_name(mlc_bound b) {
  return b == MLC_BOUND_MEMORY ? "memory" : b == MLC_BOUND_COMPUTE ? "compute" : "latency";
}

const char *mlc_profile_shape_str(const mlc_plan_shape *s, char *buf, size_t n) {
  static const char *dt[] = {"?", "f32", "bf16", "f16", "i32", "i64", "bool"};
  size_t k = (size_t)snprintf(buf, n, "%s[", dt[s->dtype < 7 ? s->dtype : 0]);
  for (int i = 0; i < s->rank && k < n; i++) k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)s->dims[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
  return buf;
}

static bool name_is(const char *name, const char *op) {
  size_t n = strlen(op);
  return !strncmp(name, op, n) && (name[n] == 0 || name[n] == '%');
}

bool mlc_profile_gemm_dims(const mlc_profile_kernel *k, int64_t *m, int64_t *n, int64_t *kk) {
  bool mm = name_is(k->name, "matmul"), lin = name_is(k->name, "linear");
  if ((!mm && !lin) || k->nshapes < 3) return false;
  const mlc_plan_shape *a = k->shapes[0], *out = k->shapes[k->nshapes - 1];
  if (a->rank < 1 || out->rank < 1 || (mm && (a->rank < 2 || out->rank < 2))) return false;
  *kk = a->dims[a->rank - 1];
  *n = out->dims[out->rank - 1];
  if (mm) {
    *m = out->dims[out->rank - 2];
  } else {
    *m = 1;
    for (int i = 0; i + 1 < out->rank; i++) *m *= out->dims[i];
  }
  return true;
}

void mlc_sm_limits_of(const mlc_ceilings *c, mlc_sm_limits *out) {
  /* CUDA C Programming Guide, "Technical Specifications per Compute
   * Capability": 2048 threads, 32 blocks and 64K registers per SM on 8.x
   * and 9.0; shared memory per SM 228 KiB on 9.0, 164 KiB on 8.0. */
  *out = (mlc_sm_limits){2048, 32, 65536, 228 * 1024};
  if (strstr(c->device, "sm_80")) out->smem = 164 * 1024;
  else if (strstr(c->device, "sm_86") || strstr(c->device, "sm_89")) out->max_threads = 1536, out->smem = 100 * 1024;
}

double mlc_profile_occupancy(const mlc_profile_launch *l, const mlc_sm_limits *lim, const char **limiter) {
  *limiter = "";
  if (!l || !l->block || !l->grid) return 0;
  uint32_t warps = (l->block + 31) / 32;
  uint32_t by_threads = lim->max_threads / (warps * 32), best = lim->max_blocks;
  *limiter = "blocks per SM";
  if (by_threads < best) best = by_threads, *limiter = "threads per block";
  if (l->regs) {
    /* Registers go to warps in units of 256 (8 per thread, rounded up). */
    uint32_t per_warp = (l->regs * 32 + 255) / 256 * 256, by_regs = lim->regs / (per_warp * warps);
    if (by_regs < best) best = by_regs, *limiter = "registers";
  }
  if (l->smem) {
    uint32_t by_smem = lim->smem / (l->smem + 1024); /* the runtime reserves 1 KiB per block */
    if (by_smem < best) best = by_smem, *limiter = "shared memory";
  }
  return 100.0 * best * warps / (lim->max_threads / 32.0);
}

/* The hint of a kernel bound by neither: near the memory roof, what would
 * cut its bytes; else what its launch says. */
static void neither_hint(const mlc_profile_kernel *k, const mlc_ceilings *c, mlc_profile_verdict *v) {
  const mlc_profile_launch *l = k->launch;
  if (v->pct_memory >= MLC_PROFILE_NEAR_PCT && v->pct_memory >= v->pct_compute) {
    snprintf(v->hint, sizeof v->hint, "near the memory roof (%.0f%%): fuse with neighbours, quantise, or raise the batch",
             v->pct_memory);
    return;
  }
  if (!l || !l->grid) {
    snprintf(v->hint, sizeof v->hint, "below %.0f%% of both roofs: too little parallel work, or a serial or unvectorised loop",
             MLC_PROFILE_NEAR_PCT);
    return;
  }
  mlc_sm_limits lim;
  mlc_sm_limits_of(c, &lim);
  const char *why;
  v->occupancy = mlc_profile_occupancy(l, &lim, &why);
  if (c->sms > 0 && l->grid < (uint32_t)c->sms)
    snprintf(v->hint, sizeof v->hint, "grid of %u blocks leaves %u of %d SMs idle: split the work into more blocks",
             l->grid, c->sms - l->grid, c->sms);
  else if (v->occupancy > 0 && v->occupancy < MLC_PROFILE_LOW_OCCUPANCY_PCT)
    snprintf(v->hint, sizeof v->hint, "occupancy %.1f%%, limited by %s (%u threads, %u regs, %u B smem a block): "
             "smaller tiles or fewer registers", v->occupancy, why, l->block, l->regs, l->smem);
  else
    snprintf(v->hint, sizeof v->hint, "stalled at %.0f%% occupancy: dependent loads, atomics or a serial loop "
             "(ncu's warp-stall reasons say which)", v->occupancy);
}

/* A GPU kernel that runs off its op's fast path (issue 20): attention or
 * a GEMM on the FP32 cores.  The hint names the kernel and why (the rules
 * are codegen/cuda/unit.c's, which follow the emitters'; docs/cli.md lists
 * them).  False for everything else. */
static bool generic_hint(const mlc_profile_kernel *k, const mlc_ceilings *c, mlc_profile_verdict *v) {
  if (!c->gpu || k->unit != MLC_UNIT_FP32 || !k->nshapes) return false;
  const mlc_plan_shape *a = k->shapes[0];
  bool grad = name_is(k->name, "attention_grad") || name_is(k->name, "attention_grad_saved");
  if (grad || name_is(k->name, "attention") || name_is(k->name, "attention_save")) {
    long long d = a->rank ? (long long)a->dims[a->rank - 1] : 0;
    if (a->dtype == MLC_DTYPE_BF16 || a->dtype == MLC_DTYPE_F16)
      snprintf(v->hint, sizeof v->hint, "generic kernel, a warp per row: 16-bit attention%s takes the tensor cores "
               "at head dim d %% %d == 0, d <= 256 (here %lld)", grad ? " gradient" : "", grad ? 32 : 16, d);
    else
      snprintf(v->hint, sizeof v->hint, "generic kernel, a warp per row: f32 attention%s takes the tensor cores at "
               "head dim d %% 8 == 0, d <= 256 (here %lld), not under --f32-matmul ieee", grad ? " gradient" : "", d);
    return true;
  }
  if (name_is(k->name, "matmul") || name_is(k->name, "linear") || name_is(k->name, "matmul_tn")) {
    /* A linear of at most 4 rows (a decode step's, any dtype) is a matrix-
     * vector product on the FP32 cores by design (codegen/cuda/unit.c):
     * bound by its weight's bytes, which tensor cores would not change; so
     * is a 16-bit one, which has no other FP32 path.  Its bound's hint stays. */
    int64_t rows = 1;
    for (int i = 0; i + 1 < a->rank; i++) rows *= a->dims[i];
    bool gemv = name_is(k->name, "linear") && a->rank && rows <= 4;
    if (gemv || a->dtype != MLC_DTYPE_F32) return false;
    snprintf(v->hint, sizeof v->hint, "f32 GEMM on the FP32 cores (--f32-matmul ieee): tf32x3 runs it on the "
             "tensor cores at f32 accuracy");
    return true;
  }
  return false;
}

mlc_bound mlc_bound_rule(double compute_pct, double memory_pct) {
  if (compute_pct > MLC_RULE_HIGH_PCT && memory_pct < MLC_RULE_COMPUTE_MEM_PCT) return MLC_BOUND_COMPUTE;
  if (memory_pct > MLC_RULE_HIGH_PCT && compute_pct < MLC_RULE_MEMORY_SM_PCT) return MLC_BOUND_MEMORY;
  return MLC_BOUND_LATENCY;
}

double mlc_profile_dram_bytes(const mlc_profile_kernel *k, const mlc_ceilings *c) {
  double b = k->bytes;
  if (!k->cold || !(c->l2_bytes > 0) || !(b > 0) || !(k->write_bytes > 0)) return b;
  double held = MLC_L2_HELD_SHARE * c->l2_bytes; /* the kernel's last bytes, in the L2 at its end */
  return b - fmin(k->write_bytes, b) * fmin(1, held / b);
}

void mlc_profile_classify(const mlc_profile_kernel *k, const mlc_ceilings *c, mlc_profile_verdict *v) {
  memset(v, 0, sizeof *v);
  double t = k->seconds, products = k->products ? k->products : 1;
  v->unit = (unsigned)k->unit < MLC_NUNITS ? k->unit : MLC_UNIT_FP32;
  double peak = mlc_ceilings_unit_peak(c, v->unit) / products; /* FLOP/s of the model's FLOPs */
  v->flop_rate = t > 0 ? k->flops / t : 0;
  v->byte_rate = t > 0 ? k->bytes / t : 0;
  v->intensity = k->bytes > 0 ? k->flops / k->bytes : 0;
  v->roof = fmin(peak, v->intensity * c->bandwidth);
  /* The rule's percentages are of the hardware's peaks (see mlc_ceilings);
   * % of roof is of the roofs, which calibrate measures as reached. */
  v->pct_compute = 100 * v->flop_rate / (mlc_ceilings_rule_peak(c, v->unit) / products);
  v->dram_bytes = mlc_profile_dram_bytes(k, c);
  v->pct_memory = t > 0 ? 100 * v->dram_bytes / t / mlc_ceilings_rule_bandwidth(c) : 0;
  if (k->flops > 0 && v->roof > 0) v->pct_roof = 100 * v->flop_rate / v->roof;
  else v->pct_roof = 100 * v->byte_rate / c->bandwidth;
  bool tiny = k->flops < MLC_PROFILE_TINY_FLOPS && k->bytes < MLC_PROFILE_TINY_BYTES;
  if (t < c->latency_s || tiny) {
    v->bound = MLC_BOUND_LATENCY;
    snprintf(v->hint, sizeof v->hint, "too small to fill the %s: fuse with neighbours or batch more work", c->gpu ? "GPU" : "CPU");
  } else if (name_is(k->name, "all_gather") || name_is(k->name, "reduce_scatter") || name_is(k->name, "all_reduce")) {
    /* A collective moves bytes between GPUs: its roof is the link, not HBM. */
    v->bound = MLC_BOUND_MEMORY;
    snprintf(v->hint, sizeof v->hint, "communication: hide it behind compute (prefetch), or send bf16");
  } else if ((v->bound = mlc_bound_rule(v->pct_compute, v->pct_memory)) == MLC_BOUND_LATENCY) {
    neither_hint(k, c, v);
  } else if (v->bound == MLC_BOUND_MEMORY) {
    snprintf(v->hint, sizeof v->hint, "fuse with neighbours, quantise (FP8/INT4), or raise the batch");
  } else {
    v->bound = MLC_BOUND_COMPUTE;
    int64_t m, n, kk;
    if (mlc_profile_gemm_dims(k, &m, &n, &kk)) {
      const char *names[] = {"M", "N", "K"};
      int64_t dims[] = {m, n, kk};
      for (int i = 0; i < 3; i++)
        if (dims[i] % 64) {
          snprintf(v->hint, sizeof v->hint, "align %s (=%lld) to a multiple of 64/128", names[i], (long long)dims[i]);
          return;
        }
    }
    if (v->unit == MLC_UNIT_TF32 && products > 1)
      snprintf(v->hint, sizeof v->hint, "lower precision: --f32-matmul tf32 (one product, not %.0f) or bf16", products);
    else if (v->unit == MLC_UNIT_TC16) snprintf(v->hint, sizeof v->hint, "lower precision (FP8)");
    else if (v->unit == MLC_UNIT_FP8) snprintf(v->hint, sizeof v->hint, "FP8 already: the lowest precision there is");
    else snprintf(v->hint, sizeof v->hint, "lower precision (bf16/FP8)");
  }
  if (t >= c->latency_s && !tiny) generic_hint(k, c, v); /* what to change first, whatever the bound */
}

void mlc_profile_json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
    else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
    else fputc(ch, f);
  }
  fputc('"', f);
}

static void xml_text(FILE *f, const char *s) {
  for (; *s; s++) {
    if (*s == '<') fputs("&lt;", f);
    else if (*s == '>') fputs("&gt;", f);
    else if (*s == '&') fputs("&amp;", f);
    else if (*s == '"') fputs("&quot;", f);
    else fputc(*s, f);
  }
}

/* The SVG's plot area, in pixels, and its decades. */
typedef struct {
  double x0, y0, w, h;   /* left, top, width, height */
  double lx0, lx1, ly0, ly1; /* log10 ranges */
} frame;

static double px(const frame *fr, double x) { return fr->x0 + (log10(x) - fr->lx0) / (fr->lx1 - fr->lx0) * fr->w; }
static double py(const frame *fr, double y) { return fr->y0 + fr->h - (log10(y) - fr->ly0) / (fr->ly1 - fr->ly0) * fr->h; }

static void tick_label(char *buf, size_t n, int e) {
  if (e >= 0 && e <= 4) snprintf(buf, n, "%.0f", pow(10, e));
  else if (e < 0 && e >= -3) snprintf(buf, n, "%g", pow(10, e));
  else snprintf(buf, n, "1e%d", e);
}

void mlc_profile_write_roofline_svg(FILE *f, const mlc_ceilings *c, const mlc_roofline_point *pts, uint32_t n,
                                    uint32_t nlabel, const char *title) {
  const double W = 1000, H = 680;
  frame fr = {90, 60, 860, 540, 0, 0, 0, 0};
  /* One compute roof per unit (and products per FLOP) the points use; units
   * at one peak (a CPU's) share a roof and its label. */
  enum { MAXR = 8 };
  struct { double peak; char names[48]; } roofs[MAXR];
  uint32_t nr = 0, *roof_of = malloc((n + 1) * sizeof *roof_of);
  if (!roof_of) { fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\"/>\n"); return; }
  for (uint32_t i = 0; i < n; i++) {
    uint32_t prod = pts[i].products ? pts[i].products : 1, r = 0;
    double pk = mlc_ceilings_unit_peak(c, pts[i].unit) / prod / 1e9;
    char name[16];
    mlc_profile_unit_str(pts[i].unit, prod, name, sizeof name);
    while (r < nr && fabs(roofs[r].peak - pk) > 1e-9 * pk) r++;
    if (r == nr && nr < MAXR) roofs[nr].peak = pk, roofs[nr].names[0] = 0, nr++;
    if (r == nr) r = 0; /* more roofs than room: the first one's */
    roof_of[i] = r;
    if (!(pts[i].intensity > 0 && pts[i].flop_rate > 0)) continue; /* not drawn: no roof of its own */
    char *nm = roofs[r].names;
    size_t len = strlen(nm), k = strlen(name);
    bool has = false;
    for (const char *q = nm; (q = strstr(q, name)) && !has; q++) has = (q == nm || q[-1] == '/') && (q[k] == 0 || q[k] == '/');
    if (!has && len + k + 2 < sizeof roofs[r].names) snprintf(nm + len, sizeof roofs[r].names - len, "%s%s", len ? "/" : "", name);
  }
  if (nr == 0) roofs[nr].peak = c->peak_flops / 1e9, roofs[nr].names[0] = 0, nr++;
  static const char *const colours[MAXR] = {"#2e86c1", "#28b463", "#af7ac5", "#d68910", "#5d6d7e", "#17a589", "#cb4335", "#7d3c98"};
  double peak = 0, low = INFINITY, bw = c->bandwidth / 1e9;
  for (uint32_t r = 0; r < nr; r++) peak = fmax(peak, roofs[r].peak), low = fmin(low, roofs[r].peak);
  double ridge = peak / bw;
  double xmin = fmin(ridge, low / bw), xmax = ridge, ymin = low, ymax = peak, tmax = 0, ttot = 0;
  for (uint32_t i = 0; i < n; i++) {
    if (pts[i].intensity <= 0 || pts[i].flop_rate <= 0) continue;
    xmin = fmin(xmin, pts[i].intensity), xmax = fmax(xmax, pts[i].intensity);
    ymin = fmin(ymin, pts[i].flop_rate / 1e9), ymax = fmax(ymax, pts[i].flop_rate / 1e9);
    tmax = fmax(tmax, pts[i].seconds), ttot += pts[i].seconds;
  }
  fr.lx0 = floor(log10(xmin)) - (log10(xmin) - floor(log10(xmin)) < 0.3);
  fr.lx1 = ceil(log10(xmax)) + (ceil(log10(xmax)) - log10(xmax) < 0.3);
  fr.ly0 = floor(log10(ymin)) - (log10(ymin) - floor(log10(ymin)) < 0.3);
  fr.ly1 = ceil(log10(ymax * 3));
  fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
             "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n", W, H, W, H);
  fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n<text x=\"%.0f\" y=\"30\" font-size=\"18\" "
             "text-anchor=\"middle\">", W / 2);
  xml_text(f, title);
  fprintf(f, "</text>\n");
  /* Grid and ticks: one line per decade. */
  char lab[32];
  for (int e = (int)fr.lx0; e <= (int)fr.lx1; e++) {
    double x = px(&fr, pow(10, e));
    tick_label(lab, sizeof lab, e);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", x, fr.y0, x, fr.y0 + fr.h);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\" text-anchor=\"middle\">%s</text>\n", x, fr.y0 + fr.h + 20, lab);
  }
  for (int e = (int)fr.ly0; e <= (int)fr.ly1; e++) {
    double y = py(&fr, pow(10, e));
    tick_label(lab, sizeof lab, e);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", fr.x0, y, fr.x0 + fr.w, y);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\" text-anchor=\"end\">%s</text>\n", fr.x0 - 8, y + 4, lab);
  }
  fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"black\"/>\n", fr.x0, fr.y0, fr.w, fr.h);
  fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"15\" text-anchor=\"middle\">arithmetic intensity (FLOP/byte)</text>\n",
          fr.x0 + fr.w / 2, fr.y0 + fr.h + 48);
  fprintf(f, "<text x=\"25\" y=\"%.1f\" font-size=\"15\" text-anchor=\"middle\" transform=\"rotate(-90 25 %.1f)\">"
             "achieved GFLOP/s</text>\n", fr.y0 + fr.h / 2, fr.y0 + fr.h / 2);
  /* Roofs: the memory roof up to the ridge, then the compute roof. */
  double xl = pow(10, fr.lx0), xr = pow(10, fr.lx1);
  double xs = fmax(xl, pow(10, fr.ly0) / bw); /* where the memory roof enters the plot */
  fprintf(f, "<polyline fill=\"none\" stroke=\"#c0392b\" stroke-width=\"2.5\" points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f\"/>\n",
          px(&fr, xs), py(&fr, xs * bw), px(&fr, ridge), py(&fr, peak), px(&fr, xr), py(&fr, peak));
  for (uint32_t r = 0; r < nr; r++) /* the lower roofs, from their ridges */
    if (roofs[r].peak < peak)
      fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"/>\n",
              px(&fr, roofs[r].peak / bw), py(&fr, roofs[r].peak), px(&fr, xr), py(&fr, roofs[r].peak), colours[r]);
  /* Points, largest first so small ones stay visible; area ~ share of time. */
  uint32_t *order = malloc((n + 1) * sizeof *order), m = 0;
  if (!order) { fprintf(f, "</svg>\n"); free(roof_of); return; }
  for (uint32_t i = 0; i < n; i++)
    if (pts[i].intensity > 0 && pts[i].flop_rate > 0) order[m++] = i;
  for (uint32_t i = 1; i < m; i++)
    for (uint32_t j = i; j > 0 && pts[order[j]].seconds > pts[order[j - 1]].seconds; j--) {
      uint32_t t = order[j]; order[j] = order[j - 1]; order[j - 1] = t;
    }
  for (uint32_t r = 0; r < m; r++) {
    const mlc_roofline_point *p = &pts[order[r]];
    double rad = 3 + 22 * sqrt(tmax > 0 ? p->seconds / tmax : 0);
    fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%.1f\" fill=\"%s\" fill-opacity=\"0.45\" stroke=\"#1b4f72\"><title>",
            px(&fr, p->intensity), py(&fr, p->flop_rate / 1e9), rad, nr > 1 ? colours[roof_of[order[r]]] : colours[0]);
    xml_text(f, p->label);
    fprintf(f, "</title></circle>\n");
  }
  /* Roof labels over the points, with a white halo; their boxes (the
   * rotated one's upright bounding box) stay clear of the kernels' labels. */
  enum { MAXL = 34 };
  double bx[MAXL], by[MAXL], bw_[MAXL], bh_[MAXL], bh = 15;
  uint32_t nb = 0, nl = 0;
  const char *halo = "stroke=\"white\" stroke-width=\"4\" paint-order=\"stroke\"";
  char roof[96];
  for (uint32_t r = 0; r < nr; r++) {
    double pk = roofs[r].peak;
    const char *sep = roofs[r].names[0] ? " " : "";
    if (pk >= 1000) snprintf(roof, sizeof roof, "%s%scompute roof %.1f TFLOP/s", roofs[r].names, sep, pk / 1000);
    else snprintf(roof, sizeof roof, "%s%scompute roof %.1f GFLOP/s", roofs[r].names, sep, pk);
    double cx0 = fmax(px(&fr, pk / bw) - (pk < peak ? -8 : 260), fr.x0 + 8), cy0 = py(&fr, pk) - 10;
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"14\" font-weight=\"bold\" fill=\"%s\" %s>%s</text>\n", cx0, cy0,
            pk < peak ? colours[r] : "#c0392b", halo, roof);
    bx[nb] = cx0, by[nb] = cy0 - 14, bw_[nb] = 8.2 * (double)strlen(roof), bh_[nb] = 18, nb++;
  }
  double xm = pow(10, (log10(xs) * 2 + log10(ridge)) / 3);
  double ang = -atan2(py(&fr, xs * bw) - py(&fr, ridge * bw), px(&fr, ridge) - px(&fr, xs)) * 57.29577951308232;
  if (bw >= 1000) snprintf(roof, sizeof roof, "memory roof %.2f TB/s", bw / 1000);
  else snprintf(roof, sizeof roof, "memory roof %.1f GB/s", bw);
  double mx = px(&fr, xm) - 10, my = py(&fr, xm * bw) - 14;
  fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"14\" font-weight=\"bold\" fill=\"#c0392b\" text-anchor=\"middle\" %s "
             "transform=\"rotate(%.1f %.1f %.1f)\">%s</text>\n", mx, my, halo, ang, mx, my, roof);
  double tw = 8.2 * (double)strlen(roof), th = 18, ca = fabs(cos(ang / 57.29577951308232)), sa = fabs(sin(ang / 57.29577951308232));
  bw_[nb] = tw * ca + th * sa, bh_[nb] = tw * sa + th * ca, bx[nb] = mx - bw_[nb] / 2, by[nb] = my - 5 - bh_[nb] / 2, nb++;
  fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" fill=\"#555\">ceilings: ", fr.x0 + 8, fr.y0 + 18);
  xml_text(f, c->calibrated ? "calibrated (mlc calibrate)" : c->gpu ? "the datasheet's (not calibrated)" : "built-in defaults: not calibrated");
  fprintf(f, "; ridge %.1f FLOP/byte</text>\n", ridge);
  /* Labels of the longest kernels: the first free spot among rings of
   * candidates around each point (above first: the roof leaves room there),
   * with a leader line when the label sits away from its point. */
  static const double dirs[][2] = {{0, -1}, {-0.7, -0.7}, {0.7, -0.7}, {-1, 0}, {1, 0}, {-0.7, 0.7}, {0.7, 0.7}, {0, 1}};
  for (uint32_t r = 0; r < m && r < nlabel && nb < MAXL; r++) {
    const mlc_roofline_point *p = &pts[order[r]];
    double rad = 3 + 22 * sqrt(tmax > 0 ? p->seconds / tmax : 0), cx = px(&fr, p->intensity), cy = py(&fr, p->flop_rate / 1e9);
    char text[160];
    snprintf(text, sizeof text, "%s (%.1f%%)", p->label, ttot > 0 ? 100 * p->seconds / ttot : 0);
    double w = 6.8 * (double)strlen(text) + 4, lx = 0, ly = 0;
    bool found = false;
    for (int ring = 0; ring < 14 && !found; ring++) {
      double d = rad + 6 + 22 * ring;
      for (size_t q = 0; q < sizeof dirs / sizeof *dirs && !found; q++) {
        double ax = cx + dirs[q][0] * d, ay = cy + dirs[q][1] * d;
        /* The box's anchor: centred above/below, flush left/right beside. */
        double x = dirs[q][0] < -0.1 ? ax - w : dirs[q][0] > 0.1 ? ax : ax - w / 2;
        double y = dirs[q][1] < -0.1 ? ay - bh : dirs[q][1] > 0.1 ? ay : ay - bh / 2;
        if (x < fr.x0 + 2 || x + w > fr.x0 + fr.w - 2 || y < fr.y0 + 24 || y + bh > fr.y0 + fr.h - 2) continue;
        bool clash = false;
        for (uint32_t k = 0; k < nb && !clash; k++)
          clash = x < bx[k] + bw_[k] && bx[k] < x + w && y < by[k] + bh_[k] && by[k] < y + bh;
        for (uint32_t k = 0; k < m && k < nlabel && !clash; k++) { /* keep the labelled points' circles clear */
          const mlc_roofline_point *o = &pts[order[k]];
          double qx = px(&fr, o->intensity), qy = py(&fr, o->flop_rate / 1e9);
          double qr = 3 + 22 * sqrt(tmax > 0 ? o->seconds / tmax : 0);
          double ex = fmin(fmax(qx, x), x + w) - qx, ey = fmin(fmax(qy, y), y + bh) - qy;
          clash = ex * ex + ey * ey < qr * qr;
        }
        if (!clash) { lx = x, ly = y, found = true; }
      }
    }
    if (!found) continue;
    bx[nb] = lx, by[nb] = ly, bw_[nb] = w, bh_[nb] = bh, nb++, nl++;
    double tx = lx + w / 2, ty = ly + bh / 2, dx = tx - cx, dy = ty - cy, dist = sqrt(dx * dx + dy * dy);
    if (dist > rad + 18) {
      /* From the circle's edge to the nearest point of the box. */
      double ex = fmin(fmax(cx, lx), lx + w), ey = fmin(fmax(cy, ly), ly + bh);
      fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#555\" stroke-width=\"0.8\"/>\n",
              cx + dx / dist * rad, cy + dy / dist * rad, ex, ey);
    }
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" %s>", lx + 2, ly + 11.5, halo);
    xml_text(f, text);
    fprintf(f, "</text>\n");
  }
  fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" fill=\"#555\" text-anchor=\"end\">point area ~ share of time; "
             "the %u longest kernels labelled (share of the step)</text>\n", fr.x0 + fr.w - 6, fr.y0 + fr.h - 8, nl);
  free(order);
  free(roof_of);
  fprintf(f, "</svg>\n");
}

bool mlc_profile_is_collective(const char *kernel) {
  static const char *const prefixes[] = {"mlc_all_gather", "mlc_reduce_scatter", "mlc_all_reduce"};
  for (size_t i = 0; kernel && i < sizeof prefixes / sizeof *prefixes; i++)
    if (!strncmp(kernel, prefixes[i], strlen(prefixes[i]))) return true;
  return false;
}

const char *mlc_profile_stream_name(uint32_t stream, char *buf, size_t n) {
  if (stream == 0) return "compute";
  if (stream == 1) return "comm";
  snprintf(buf, n, "stream %u", stream);
  return buf;
}

void mlc_trace_begin(mlc_trace_writer *w, FILE *f) {
  memset(w, 0, sizeof *w);
  w->f = f;
  fprintf(f, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [");
}

/* The separator before each event, and a metadata event of the current process. */
static void trace_next(mlc_trace_writer *w) { fputs(w->nevents++ ? ",\n" : "\n", w->f); }

static void trace_meta(mlc_trace_writer *w, const char *name, int64_t tid, const char *key, const char *text, int64_t num) {
  trace_next(w);
  fprintf(w->f, "{\"name\": \"%s\", \"ph\": \"M\", \"pid\": %d, \"tid\": %lld, \"args\": {\"%s\": ", name, w->rank,
          (long long)tid, key);
  if (text) mlc_profile_json_string(w->f, text);
  else fprintf(w->f, "%lld", (long long)num);
  fputs("}}", w->f);
}

void mlc_trace_process(mlc_trace_writer *w, const mlc_trace_options *o) {
  w->rank = o->rank;
  memset(w->named, 0, sizeof w->named);
  char name[320];
  snprintf(name, sizeof name, "%s, rank %d", o->title ? o->title : "mlc", o->rank);
  trace_meta(w, "process_name", 0, "name", name, 0);
  trace_meta(w, "process_sort_index", 0, "sort_index", NULL, o->rank);
}

void mlc_trace_add(mlc_trace_writer *w, const mlc_trace_span *sp) {
  const mlc_plan_step *st = sp->step;
  FILE *f = w->f;
  if (st->stream < 256 && !(w->named[st->stream / 64] >> (st->stream % 64) & 1)) {
    char buf[32];
    w->named[st->stream / 64] |= 1ull << (st->stream % 64);
    trace_meta(w, "thread_name", st->stream, "name", mlc_profile_stream_name(st->stream, buf, sizeof buf), 0);
    trace_meta(w, "thread_sort_index", st->stream, "sort_index", NULL, st->stream);
  }
  bool coll = mlc_profile_is_collective(sp->kernel);
  trace_next(w);
  fputs("{\"name\": ", f);
  mlc_profile_json_string(f, st->name);
  fputs(", \"cat\": ", f);
  mlc_profile_json_string(f, coll ? "collective" : sp->entry->name);
  fprintf(f, ", \"ph\": \"X\", \"pid\": %d, \"tid\": %u, \"ts\": %.3f, \"dur\": %.3f, \"args\": {\"scope\": ", w->rank,
          st->stream, sp->start * 1e6, sp->seconds * 1e6);
  mlc_profile_json_string(f, st->scope);
  fputs(", \"kernel\": ", f);
  mlc_profile_json_string(f, sp->kernel ? sp->kernel : "");
  fprintf(f, ", \"flops\": %.17g", st->flops);
  if (coll) {
    fputs(", \"entry\": ", f);
    mlc_profile_json_string(f, sp->entry->name);
    fprintf(f, ", \"wire_bytes\": %.17g, \"wire_GBps\": %.6g", st->bytes, sp->seconds > 0 ? st->bytes / sp->seconds / 1e9 : 0);
  } else {
    fprintf(f, ", \"bytes\": %.17g, \"intensity\": %.6g", st->bytes, st->bytes > 0 ? st->flops / st->bytes : 0);
  }
  fputs(", \"shapes\": [", f);
  for (uint32_t j = 0; j < st->nargs; j++) {
    char sh[160];
    if (j) fputs(", ", f);
    mlc_profile_json_string(f, mlc_profile_shape_str(&sp->entry->values[st->args[j]].shape, sh, sizeof sh));
  }
  fputs("]}}", f);
}

void mlc_trace_end(mlc_trace_writer *w) { fputs("\n]}\n", w->f); }
