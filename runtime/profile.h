/* The profiler's analysis: ceilings, roofline classification, hints, and
 * the two files it writes (a Chrome trace and an SVG roofline).
 *
 * Everything here is a pure function of numbers the caller gives (FLOP and
 * byte counts from the plan, measured seconds, the device's ceilings, the
 * shapes of a step's arguments), so tests drive it with synthetic timings.
 * The session gathers the numbers (runtime/session.c) and hands them here
 * (runtime/session_profile.c); the driver measures the ceilings
 * (`mlc calibrate`) and this file caches them.
 *
 * The roofline model: a kernel doing F FLOPs over B bytes has arithmetic
 * intensity I = F / B.  The best it can reach is min(peak, I * bandwidth):
 * below the ridge (peak / bandwidth) memory bounds it, above it the ALUs.
 * A kernel too short to fill the machine is bound by launch latency instead.
 */
#ifndef MLC_PROFILE_H
#define MLC_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "runtime/device.h"
#include "runtime/plan.h"
#include "runtime/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Below this a CPU kernel is latency-bound: the pool's wake-up and the
 * chunking cost about as much as the work. */
#define MLC_PROFILE_CPU_LATENCY_S 20e-6
/* Work this small cannot fill a multi-core CPU whatever its time. */
#define MLC_PROFILE_TINY_FLOPS 1e5
#define MLC_PROFILE_TINY_BYTES 65536.0

/* The arithmetic units a kernel can run on.  The plan names each step's
 * (codegen decides it: runtime/plan.h); each has its own peak.  A CPU, and
 * a GPU's device without a known per-unit peak, runs all of them at its one
 * measured peak. */
typedef enum {
  MLC_UNIT_FP32 = MLC_PLAN_UNIT_FP32, /* FP32 FMA on the SIMT cores (CPU: the vector FMA units) */
  MLC_UNIT_TC16 = MLC_PLAN_UNIT_TC16, /* tensor cores, bf16/f16 inputs, f32 accumulation */
  MLC_UNIT_TF32 = MLC_PLAN_UNIT_TF32, /* tensor cores, TF32 (f32 GEMMs under --f32-matmul tf32 or tf32x3) */
  MLC_UNIT_FP8 = MLC_PLAN_UNIT_FP8,   /* tensor cores, fp8 inputs (CUDA's scaled_mm; its peak is the datasheet's) */
  MLC_NUNITS = MLC_PLAN_NUNITS
} mlc_unit;
/* "fp32", "bf16", "tf32", "fp8": the table's and the cache's name of a unit. */
const char *mlc_unit_name(mlc_unit u);

/* Where a ceiling came from. */
typedef enum { MLC_CEIL_DEFAULT, MLC_CEIL_DATASHEET, MLC_CEIL_MEASURED } mlc_ceiling_source;
const char *mlc_ceiling_source_name(mlc_ceiling_source s); /* "default", "datasheet", "measured" */

typedef struct {
  double peak_flops;    /* FLOP/s of the best GEMM (CPU: f32; GPU: bf16 on the tensor cores) */
  double bandwidth;     /* bytes/s of a large copy (CPU: multi-threaded memcpy; GPU: HBM, an elementwise kernel) */
  double latency_s;     /* kernels shorter than this are latency-bound */
  double unit_flops[MLC_NUNITS];              /* each unit's peak FLOP/s; 0: the unit runs at peak_flops */
  mlc_ceiling_source unit_from[MLC_NUNITS];   /* where each came from */
  mlc_ceiling_source bandwidth_from;
  double l2_bandwidth;                        /* bytes/s of a copy that stays in L2; 0: unknown */
  double l2_bytes;                            /* the L2's size (the device's); 0: unknown */
  mlc_ceiling_source l2_from;
  /* The hardware's peaks, against which the seed's rule judges a kernel (as
   * Nsight Compute's "% of peak" does, per cycle): each unit's FLOPs per
   * clock over the whole GPU (its SMs times an SM's rate, from the
   * architecture) times the SM clock measured under load (sm_mhz: mlc
   * calibrate's, while its GEMM ran, which is the clock ncu reads under
   * the tensor-core kernels the rule's compute side is about); without
   * that clock, the datasheet's peaks (hw_flops) as they are.  NVIDIA's
   * datasheets take their tensor-core peaks at 1830 MHz and their FP32
   * peak at 1980 MHz (H100, H200), so a datasheet peak scaled by one clock
   * ratio is off by 8% for one or the other.  0: the roofs above (a CPU). */
  double hw_clk_flops[MLC_NUNITS];
  double hw_flops[MLC_NUNITS];
  double hw_bandwidth;
  double sm_mhz, sm_max_mhz; /* the SM clock under load (mlc calibrate, NVML) and its maximum; 0: unknown */
  int sms;              /* the GPU's SM count (from its name), 0 on a CPU */
  char device[128];     /* the CPU's model name, or the GPU's "NVIDIA H200 (sm_90, 132 SMs)" */
  char source[384];     /* where the numbers came from, for the table's header */
  bool calibrated;      /* false: built-in defaults or a datasheet */
  bool gpu;             /* the ceilings of a GPU (the latency hint names it) */
} mlc_ceilings;

/* The peak FLOP/s of unit u: its own, else peak_flops. */
double mlc_ceilings_unit_peak(const mlc_ceilings *c, mlc_unit u);
/* The peaks the seed's rule takes percentages of: unit u's FLOP/s (the
 * hardware's at the clock measured under load, else the datasheet's, else
 * the unit's roof) and bytes/s. */
double mlc_ceilings_rule_peak(const mlc_ceilings *c, mlc_unit u);
double mlc_ceilings_rule_bandwidth(const mlc_ceilings *c);
/* "bf16", "fp32", "tf32x3": a unit and its products per FLOP; returns buf. */
const char *mlc_profile_unit_str(mlc_unit u, uint32_t products, char *buf, size_t n);
/* The line "  units: bf16 989.4 TFLOP/s (datasheet), ..., HBM 4800 GB/s (measured), L2 .." of a profile's header. */
void mlc_profile_print_units(const mlc_ceilings *c, FILE *out);

/* Built-in defaults: a modest desktop core count; used until calibrated. */
void mlc_ceilings_default(mlc_ceilings *c);
/* "model name" of /proc/cpuinfo, or "unknown CPU". */
void mlc_profile_cpu_model(char *buf, size_t n);
/* $XDG_CACHE_HOME/mlc/FILE, else $HOME/.cache/mlc/FILE: mlc's cache. */
bool mlc_cache_path(char *buf, size_t n, const char *file);
/* Creates the directories above a file's path, as needed. */
void mlc_mkdir_parents(const char *path);
/* Reads a whole file (malloc'ed, with a 0 after its bytes), or returns NULL. */
void *mlc_read_file(const char *path, size_t *out_n);
/* Writes a file atomically (its folders made, a temporary file, then
 * rename), as mlc's caches do; best effort. */
void mlc_write_file(const char *path, const void *data, size_t n);
/* The CPU target's object cache, mlc's cache's cpu/ (mlc_write_file makes
 * it): false where there is none to use, or MLC_CPU_CACHE=0 turns it off. */
bool mlc_cpu_cache_dir(char *buf, size_t n);
/* $XDG_CACHE_HOME/mlc/ceilings-cpu.json, else $HOME/.cache/mlc/ceilings-cpu.json. */
bool mlc_ceilings_cache_path(char *buf, size_t n);
/* The cached calibration of this CPU, or the defaults (source says which). */
void mlc_ceilings_load_cpu(mlc_ceilings *out);
/* A GPU's ceilings from its name ("NVIDIA H200 (sm_90, 132 SMs)"): the
 * datasheet's dense bf16 tensor-core rate and memory bandwidth for the GPUs
 * mlc knows, else conservative guesses; `source` says which. */
void mlc_ceilings_gpu_datasheet(const char *name, mlc_ceilings *out);
/* $XDG_CACHE_HOME/mlc/ceilings-cuda.json, else $HOME/.cache/mlc/ceilings-cuda.json:
 * `mlc calibrate --target cuda`'s results, one entry per GPU name (which
 * holds the sm and the SM count). */
bool mlc_ceilings_gpu_cache_path(char *buf, size_t n);
/* A GPU's ceilings: its cached calibration, else the datasheet's. */
void mlc_ceilings_gpu(const char *name, mlc_ceilings *out);
/* Same, from explicit files (tests). */
void mlc_ceilings_gpu_file(const char *path, const char *name, mlc_ceilings *out);
void mlc_ceilings_load_file(const char *path, const char *cpu_model, mlc_ceilings *out);
/* Stores c under its device name, keeping other devices' entries; creates the directory. */
MLC_MUST_USE mlc_status mlc_ceilings_save_file(const char *path, const mlc_ceilings *c);

/* The verdict's three outcomes.  MLC_BOUND_LATENCY is "neither": the
 * kernel is far below both of its roofs (or too short to measure against
 * them), so latency, occupancy or serialisation bounds it. */
typedef enum { MLC_BOUND_MEMORY, MLC_BOUND_COMPUTE, MLC_BOUND_LATENCY } mlc_bound;
const char *mlc_bound_name(mlc_bound b); /* "memory", "compute", "latency" */

/* The verdict is the seed's rule (issue 24), applied alike to mlc's own
 * estimates (compute: its FLOP rate against its unit's peak; memory: its
 * byte rate against HBM) and to Nsight Compute's readings (runtime/ncu.c:
 * SM throughput and DRAM throughput): compute-bound when compute is above
 * MLC_RULE_HIGH_PCT with memory under MLC_RULE_COMPUTE_MEM_PCT;
 * memory-bound when memory is above MLC_RULE_HIGH_PCT with compute under
 * MLC_RULE_MEMORY_SM_PCT; otherwise neither (latency). */
#define MLC_RULE_HIGH_PCT 75.0
#define MLC_RULE_COMPUTE_MEM_PCT 50.0
#define MLC_RULE_MEMORY_SM_PCT 25.0
mlc_bound mlc_bound_rule(double compute_pct, double memory_pct);
/* A kernel bound by neither that reaches this share of a roof is named as
 * near that roof in its hint; below it on both, its launch says why. */
#define MLC_PROFILE_NEAR_PCT 50.0
/* Occupancy under this (resident warps / the SM's maximum) is named as the
 * likely cause of a kernel bound by neither roof. */
#define MLC_PROFILE_LOW_OCCUPANCY_PCT 25.0

/* An SM's limits (Hopper and Ampere share them but shared memory). */
typedef struct {
  uint32_t max_threads, max_blocks, regs, smem; /* per SM */
} mlc_sm_limits;
/* The limits of the GPU the ceilings describe (sm_80/sm_90 values). */
void mlc_sm_limits_of(const mlc_ceilings *c, mlc_sm_limits *out);
/* Resident warps per SM over the maximum, in percent, and what limits it
 * ("threads", "registers", "shared memory", "blocks"); 0 when unknown. */
double mlc_profile_occupancy(const mlc_profile_launch *l, const mlc_sm_limits *lim, const char **limiter);

typedef struct {
  double flop_rate;  /* achieved FLOP/s */
  double byte_rate;  /* achieved bytes/s */
  double intensity;  /* FLOP/byte; 0 when bytes is 0 */
  double roof;       /* FLOP/s the roofline allows at this intensity */
  double pct_roof;   /* achieved / roof, in percent (bytes/bandwidth for a kernel without FLOPs) */
  double pct_compute; /* achieved FLOP/s x products over the unit's peak, percent */
  double pct_memory;  /* the DRAM bytes/s while it ran (dram_bytes) over the memory bandwidth, percent */
  double dram_bytes;  /* of the kernel's bytes, those that reach DRAM while it runs (mlc_profile_dram_bytes) */
  double occupancy;   /* percent; 0 when the launch is unknown */
  mlc_unit unit;
  mlc_bound bound;
  char hint[160];
} mlc_profile_verdict;

/* A step as the classifier sees it: name (the op name, then "%id"), its
 * costs, the seconds of one call, and its arguments' shapes (inputs, then
 * the output last), which name a GEMM's M, N and K. */
typedef struct {
  const char *name;
  double flops, bytes, seconds;
  const mlc_plan_shape *const *shapes;
  uint32_t nshapes;
  mlc_unit unit;                    /* where its FLOPs run (the plan's step unit) */
  uint32_t products;                /* the unit's products per FLOP (3 for tf32x3); 0 means 1 */
  const mlc_profile_launch *launch; /* NULL: unknown */
  double write_bytes;               /* of `bytes`, those it writes (its output's) */
  bool cold;                        /* the caches were emptied before it ran (mlc profile --flush-l2) */
} mlc_profile_kernel;

void mlc_profile_classify(const mlc_profile_kernel *k, const mlc_ceilings *c, mlc_profile_verdict *out);

/* The bytes of kernel k that reach DRAM while it runs, the memory side of
 * its verdict.  A kernel started on an emptied L2 (k->cold, as under Nsight
 * Compute) ends with the last of its traffic still in the L2, and of that
 * its writes are dirty lines written back later, in another kernel's time:
 * the L2 is taken to hold the last MLC_L2_HELD_SHARE of its size of the
 * kernel's bytes, dirty in the share the kernel writes (all of its writes
 * when its bytes fit).  Measured on an H100 (bench/results/ncu-2026-12-06.md,
 * ncu's dram__bytes over the plan's bytes): the large elementwise kernels
 * left 32-42 MB of 50, median 35.  Warm (in a running step) a kernel pays
 * its predecessor's dirty lines instead of its own, about as many: all of
 * its bytes count. */
#define MLC_L2_HELD_SHARE 0.7
double mlc_profile_dram_bytes(const mlc_profile_kernel *k, const mlc_ceilings *c);

/* A GEMM's M, N, K from the step name and its argument shapes: matmul
 * (a[..,m,k] @ b[..,k,n]) and linear (x[..,k] @ w[n,k]^T, M folds the
 * leading dims).  False for any other kernel. */
bool mlc_profile_gemm_dims(const mlc_profile_kernel *k, int64_t *m, int64_t *n, int64_t *kk);

/* "f32[2, 64, 128]" */
const char *mlc_profile_shape_str(const mlc_plan_shape *s, char *buf, size_t n);

/* One kernel's point on the roofline. */
typedef struct {
  const char *label;
  double intensity, flop_rate, seconds;
  mlc_unit unit;
  uint32_t products; /* 0 means 1; tf32x3's points sit under a roof of a third of TF32's peak */
} mlc_roofline_point;

/* Log-log roofline, FLOP/byte against GFLOP/s: the memory roof, one
 * compute roof per unit the points use (labelled with the unit's name and
 * peak), and one point per kernel coloured by its unit (area ~ time; the
 * `nlabel` longest are labelled). */
void mlc_profile_write_roofline_svg(FILE *f, const mlc_ceilings *c, const mlc_roofline_point *pts, uint32_t n,
                                    uint32_t nlabel, const char *title);

/* Writes s as a JSON string literal, escaped. */
void mlc_profile_json_string(FILE *f, const char *s);

/* The Chrome trace (trace event JSON; Perfetto and chrome://tracing open
 * it).  One process per rank (pid = rank), one track per stream (tid = the
 * plan step's stream: 0 "compute", 1 "comm"), one complete event ("X") per
 * step run:
 *   compute:    cat = the entry point's name; args: scope, kernel, flops,
 *               bytes, intensity (FLOP/byte) and the arguments' shapes;
 *   collective: a step whose kernel symbol starts with mlc_all_gather,
 *               mlc_reduce_scatter or mlc_all_reduce; cat = "collective";
 *               args: scope, kernel, entry, wire_bytes (the plan's bytes of a
 *               collective are its bytes on the wire), the achieved GB/s on
 *               the wire, and the shapes.
 * Times are microseconds from the device's origin.  Each rank of a
 * multi-rank run writes its own file; their traceEvents arrays concatenate
 * into one trace with a process per rank. */
typedef struct {
  const char *title; /* the process's name; ", rank N" is appended */
  int rank;          /* the pid; 0 for a single process */
} mlc_trace_options;

typedef struct {
  const mlc_plan_entry *entry; /* where the step's argument shapes and its category come from */
  const mlc_plan_step *step;
  const char *kernel;          /* the step's kernel symbol */
  double start, seconds;       /* from the device's origin, and the duration */
} mlc_trace_span;

typedef struct {
  FILE *f;
  int rank;
  uint64_t nevents;
  uint64_t named[4]; /* streams 0..255 whose track has its name in the current process */
} mlc_trace_writer;

/* A collective's kernel symbol: mlc_all_gather*, mlc_reduce_scatter*, mlc_all_reduce*. */
bool mlc_profile_is_collective(const char *kernel);
/* "compute" (0), "comm" (1), else "stream N". */
const char *mlc_profile_stream_name(uint32_t stream, char *buf, size_t n);
void mlc_trace_begin(mlc_trace_writer *w, FILE *f);
/* Starts a rank's process: its name and sort order; later spans belong to it. */
void mlc_trace_process(mlc_trace_writer *w, const mlc_trace_options *o);
/* One span; the first on a stream of this process also names its track. */
void mlc_trace_add(mlc_trace_writer *w, const mlc_trace_span *sp);
void mlc_trace_end(mlc_trace_writer *w);

#ifdef __cplusplus
}
#endif

#endif
