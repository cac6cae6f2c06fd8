/* The profiler's analysis: ceilings, roofline classification, hints, and
 * the two files it writes (a Chrome trace and an SVG roofline).
 *
 * Everything here is a pure function of numbers the caller gives (FLOP and
 * byte counts from the plan, measured seconds, the device's ceilings, the
 * shapes of a step's arguments), so tests drive it with synthetic timings.
 * The session (runtime/session.c) gathers the numbers; the driver measures
 * the ceilings (`mlc calibrate`) and this file caches them.
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

typedef struct {
  double peak_flops;    /* FLOP/s of the best GEMM (CPU: f32; GPU: bf16 on the tensor cores) */
  double bandwidth;     /* bytes/s of a large copy (CPU: multi-threaded memcpy; GPU: an elementwise kernel) */
  double latency_s;     /* kernels shorter than this are latency-bound */
  char device[128];     /* the CPU's model name, or the GPU's "NVIDIA H200 (sm_90, 132 SMs)" */
  char source[256];     /* where the numbers came from, for the table's header */
  bool calibrated;      /* false: built-in defaults or a datasheet */
  bool gpu;             /* the ceilings of a GPU (the latency hint names it) */
} mlc_ceilings;

/* Built-in defaults: a modest desktop core count; used until calibrated. */
void mlc_ceilings_default(mlc_ceilings *c);
/* "model name" of /proc/cpuinfo, or "unknown CPU". */
void mlc_profile_cpu_model(char *buf, size_t n);
/* $XDG_CACHE_HOME/mlc/FILE, else $HOME/.cache/mlc/FILE: mlc's cache. */
bool mlc_cache_path(char *buf, size_t n, const char *file);
/* Creates the directories above a file's path, as needed. */
void mlc_mkdir_parents(const char *path);
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

typedef enum { MLC_BOUND_MEMORY, MLC_BOUND_COMPUTE, MLC_BOUND_LATENCY } mlc_bound;
const char *mlc_bound_name(mlc_bound b);

typedef struct {
  double flop_rate;  /* achieved FLOP/s */
  double byte_rate;  /* achieved bytes/s */
  double intensity;  /* FLOP/byte; 0 when bytes is 0 */
  double roof;       /* FLOP/s the roofline allows at this intensity */
  double pct_roof;   /* achieved / roof, in percent (bytes/bandwidth for a kernel without FLOPs) */
  mlc_bound bound;
  char hint[96];
} mlc_profile_verdict;

/* A step as the classifier sees it: name (the op name, then "%id"), its
 * costs, the seconds of one call, and its arguments' shapes (inputs, then
 * the output last), which name a GEMM's M, N and K. */
typedef struct {
  const char *name;
  double flops, bytes, seconds;
  const mlc_plan_shape *const *shapes;
  uint32_t nshapes;
} mlc_profile_kernel;

void mlc_profile_classify(const mlc_profile_kernel *k, const mlc_ceilings *c, mlc_profile_verdict *out);

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
} mlc_roofline_point;

/* Log-log roofline, FLOP/byte against GFLOP/s, with both roofs and one point
 * per kernel (area ~ time; the `nlabel` longest are labelled). */
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
