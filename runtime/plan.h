/* The plan: the one contract between the compiler and the runtime.
 *
 * A plan lists the model's parameters and, per entry point (forward,
 * train), the values it touches, its named inputs and outputs, and the steps
 * to run in order.  A value lives either at an offset in the entry point's
 * arena (one allocation whose size the compiler planned) or in a parameter.
 * A step launches one kernel on a stream over a number of independent work
 * items, with value ids as arguments, after waiting on the listed steps; it
 * carries the kernel's name, the module scope it came from, and its FLOP
 * and byte counts for the profiler.
 *
 * Binary layout, all integers little-endian:
 *
 *   header   "MLCPLAN\0"  u32 version  u32 reserved  u64 payload_bytes  u64 xxh64(payload, seed 0)
 *   payload  str model
 *            u32 nparams   { str name, dtype, shape, u8 init, f64 a, f64 b, u8 role,
 *                            u8 sharded, u32 flat, u64 flat_offset }
 *            u32 nties     { str name, u32 param }   (weight sharing: another state_dict name of a weight)
 *            u32 nexecutables { str format, blob code }
 *            u32 nkernels  { str symbol, u32 executable, u32 nargs, u64 scratch,
 *                            u32 nlaunches { str entry, u32 grid[3], u32 block[3], u32 smem },
 *                            blob extra }
 *            u32 nentries  { str name, u64 arena_bytes,
 *                            u32 nvalues  { dtype, shape, i64 offset, u32 param (0xffffffff: arena),
 *                                           u8 is_const, f64 value (a scalar the runtime writes once),
 *                                           u8 rank_slice, u32 view_of (0xffffffff: none) }
 *                            u32 ninputs  { str name, u32 value }
 *                            u32 noutputs { str name, u32 value }
 *                            u32 nsteps   { u32 kernel, str name, str scope, u32 stream,
 *                                           u32 nwait { u32 step }, u32 nargs { u32 value },
 *                                           u64 work_items, f64 flops, f64 bytes, u8 sharded,
 *                                           u8 unit, u8 products } }
 *            schedule f64 lr, f64 min_lr, u64 warmup, u64 steps, u8 decay
 *   str   = u32 length, then that many bytes (no NUL)
 *   blob  = u32 length, then that many bytes (any)
 *   dtype = u8 (mlc_dtype of ir/ir.h: 1 f32, 2 bf16, 3 f16, 4 i32, 5 i64, 6 bool, 7 f8e4m3, 8 f8e5m2)
 *   shape = u8 rank (<= 6), then rank x i64 dims (> 0)
 *
 * A step's `unit` is the arithmetic unit its FLOPs run on, as the target's
 * code generator chose it (MLC_PLAN_UNIT_*), and `products` (1..3) the
 * unit's products per FLOP of the model (3: an f32 GEMM as three TF32
 * products, --f32-matmul tf32x3).  The profiler judges the step against
 * that unit's peak.
 *
 * Sharding (FSDP, passes/fsdp.c): a `sharded` parameter is a flat
 * parameter of nominal shape [R, 4096] (or its optimizer state) of which
 * each of `world` ranks holds mlc_shard_rows(R, world) rows (ir/ir.h); a
 * weight with `flat` = 1 + i lives in parameter i from element
 * `flat_offset` on and has no storage of its own.  A `rank_slice` value
 * [R, 4096] is this rank's rows of the arena buffer at its offset (the
 * runtime adds rank x its shard's bytes).  A `sharded` step runs
 * mlc_shard_rows(work_items, world) work items.  Steps whose kernel is
 * "mlc_all_gather", "mlc_reduce_scatter" or "mlc_all_reduce" (an f32
 * value summed over the ranks: clip_grad_norm's sum of squares) are
 * collectives the runtime carries out itself, arguments (input, output).
 * An entry's i64[] input "opt.world" is the number of ranks, which the
 * runtime writes before each run.
 *
 * Executables (the code a plan runs, so that the plan is the whole
 * contract between compiler and runtime): each is a code blob with a
 * format tag saying which backend loads it and how:
 *   "cuda-fatbin"  a fatbin (cubin/PTX) for cuModuleLoadData, every kernel's functions in it
 *   "cuda-source"  CUDA C, compiled with NVRTC at first use (no nvcc at compile time)
 *   "spirv"        one SPIR-V module (a whole number of 32-bit words), one kernel's entry points
 *   "msl"          Metal Shading Language source ("metallib": Apple's compiled form)
 *   "native"       empty: the code is linked into the host program (the CPU's
 *                  kernels), launches resolved by their entry names
 * Each kernel then has a dispatch record: the executable its code is in
 * (MLC_PLAN_NO_EXECUTABLE: none in this plan, as for the collectives the
 * runtime carries out itself or a plan made without code), its argument
 * count (every step of the kernel passes that many values), the bytes of
 * the scratch block a step of it gets to itself, and its launches, run in
 * order with the same arguments: the entry point (a __global__ function,
 * an OpEntryPoint, a native symbol), the grid (blocks or workgroups in x, y,
 * z, each >= 1; all 0 for "native", whose work items a thread pool cuts),
 * the block (threads in x, y, z; on SPIR-V the local-size specialisation
 * constants, 0: the module's own) and the dynamic shared memory in bytes.
 * `extra` holds what only one backend needs, in that backend's encoding,
 * read and checked by it (little-endian, like the rest):
 *   cuda-*  u32 ntmaps { u32 arg, u32 rank, u32 elem_bytes, u32 swizzle, u64 offset,
 *                        u64 dim[5], u64 stride[4], u32 box[5] }   (runtime/cuda/kernel.h)
 *   spirv   u8 coopmat, u32 m, u32 n, u32 k, u32 fallback (a kernel of this plan;
 *           0xffffffff: none)                                      (runtime/vulkan/kernel.h)
 *   others  empty
 *
 * Views (v8): a value whose storage is another's (a reshape, fsdp's view
 * at an offset, a reduce-scatter's rank slice: passes/memplan.c) names that
 * value, its root, in `view_of`; a value with storage of its own has
 * MLC_PLAN_NO_VALUE.  Two values at the same bytes are either views of one
 * root, or live at different times (memplan reuses a dead value's bytes):
 * the offsets alone cannot tell the two apart, and a session that moves a
 * value to a caller's buffer (mlc_session_bind_input) must move its views
 * and only them.
 *
 * The schedule is the train block's learning rate over the steps
 * (mlc_plan_lr): the runtime writes it into an entry's input "opt.lr" before
 * each run, as it writes its step count into "opt.step".  `steps` 0: the
 * schedule's length is the caller's (mlc_session_set_schedule_steps).
 *
 * The reader checks everything against the bytes it was given: the
 * checksum, every count and length, dtypes, shapes, that arena values fit in
 * the arena, that a value viewing a parameter has its dtype and size, and
 * that every id refers to something that exists (a step may only wait on an
 * earlier step), that each kernel's executable exists, that its launches
 * are 1..MLC_PLAN_MAX_LAUNCH with grids and blocks in range, and that every
 * step passes its kernel's argument count.  A plan that fails any check is refused
 * with MLC_DATA_LOSS and a message saying what is wrong.
 */
#ifndef MLC_PLAN_H
#define MLC_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/alloc.h"
#include "runtime/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MLC_PLAN_MAGIC "MLCPLAN"
/* 9: the same layout as 8; every CUDA kernel of a version-9 plan opens
 * with griddepcontrol.wait (codegen/cuda/prelude.c), so the runtime may
 * launch it with programmatic dependent launch (runtime/cuda/device.c). */
#define MLC_PLAN_VERSION 9u
#define MLC_PLAN_HEADER_BYTES 32u
#define MLC_PLAN_MAX_RANK 6
#define MLC_PLAN_NO_PARAM 0xffffffffu
#define MLC_PLAN_NO_VALUE 0xffffffffu /* mlc_plan_value.view_of of a value with storage of its own */
#define MLC_PLAN_SHARD_ROW 4096 /* MLC_SHARD_ROW of ir/ir.h */
#define MLC_PLAN_ALL_GATHER "mlc_all_gather"
#define MLC_PLAN_REDUCE_SCATTER "mlc_reduce_scatter"
#define MLC_PLAN_ALL_REDUCE "mlc_all_reduce"
#define MLC_PLAN_NO_EXECUTABLE 0xffffffffu
#define MLC_PLAN_MAX_LAUNCH 8
#define MLC_PLAN_INIT_GIVEN 4 /* mlc_plan_param.init: the model file's value, which a session must load */
/* mlc_plan_param.init of a quantised weight (role 4), which the runtime packs
 * and so needs no initialiser: its scheme, flags, 0 symmetric with f32 scales
 * (as every plan before the asymmetric one had it), MLC_PLAN_QUANT_ASYM
 * asymmetric (a min per group), MLC_PLAN_QUANT_BF16 bf16 scales (and mins)
 * (runtime/quant.h; ir/ir.h's MLC_QS_*). */
#define MLC_PLAN_QUANT_ASYM 1
#define MLC_PLAN_QUANT_BF16 2

/* Executable format tags (see above). */
#define MLC_PLAN_FORMAT_CUDA_FATBIN "cuda-fatbin"
#define MLC_PLAN_FORMAT_CUDA_SOURCE "cuda-source"
#define MLC_PLAN_FORMAT_SPIRV "spirv"
#define MLC_PLAN_FORMAT_MSL "msl"
#define MLC_PLAN_FORMAT_METALLIB "metallib"
#define MLC_PLAN_FORMAT_NATIVE "native"

/* The arithmetic units of a step (runtime/profile.h's mlc_unit). */
enum {
  MLC_PLAN_UNIT_FP32, /* FP32 FMAs (SIMT cores; a CPU's vector units) */
  MLC_PLAN_UNIT_TC16, /* tensor cores, bf16/f16 */
  MLC_PLAN_UNIT_TF32, /* tensor cores, TF32 */
  MLC_PLAN_UNIT_FP8,  /* tensor cores, fp8 */
  MLC_PLAN_NUNITS
};

/* Rows of a sharded [rows, 4096] value that each of `world` ranks holds. */
static inline uint64_t mlc_plan_shard_rows(uint64_t rows, int world) { return (rows + (uint64_t)world - 1) / (uint64_t)world; }

typedef struct {
  uint8_t dtype, rank;
  int64_t dims[MLC_PLAN_MAX_RANK];
} mlc_plan_shape;

typedef struct {
  const char *name;
  mlc_plan_shape shape;
  uint8_t init; /* 0 zeros, 1 ones, 2 uniform(a, b), 3 normal(mean a, std b), 4 given: the model file's value
                  (an ONNX initializer), which the plan does not carry: a session runs only once it is loaded */
  double a, b;
  uint8_t role; /* 0 a model weight (in the state_dict), 1 optimizer state (in checkpoints only), 2 a flat parameter, 3 a KV cache (in neither),
                  4 a quantised weight (in neither): i32 [n, words] packed by the runtime from the f32 weight
                  [n, k] whose index is flat_offset, a bits (4 or 8) and b weights per scale, init its scheme:
                  MLC_PLAN_QUANT_* flags (runtime/quant.h); 5 a shadow (in neither): the bf16 or f16 copy of the f32
                  weight [same dims] whose index is flat_offset, made by the runtime from it and then written by the
                  train step's update beside it; it lives in the state's block (only a session that trains holds it) */
  uint8_t sharded;
  uint32_t flat;        /* 1 + the flat parameter it lives in; 0: its own storage */
  uint64_t flat_offset; /* elements */
} mlc_plan_param;

/* Weight sharing (`head.weight = embed.weight`): one more state_dict name
 * of a model weight.  Weights files carry the tensor under every name, as
 * torch's state_dict() does; loading checks that the names agree. */
typedef struct {
  const char *name;
  uint32_t param; /* a weight (role 0) */
} mlc_plan_tie;

typedef struct {
  mlc_plan_shape shape;
  int64_t offset;  /* in the arena, when param == MLC_PLAN_NO_PARAM */
  uint32_t param;
  uint8_t is_const; /* a scalar constant: the runtime stores `value` at the offset once */
  double value;
  uint8_t rank_slice; /* this rank's rows of the buffer at offset */
  uint32_t view_of;   /* the value whose storage this one views (its root); MLC_PLAN_NO_VALUE: its own */
} mlc_plan_value;

typedef struct {
  const char *name;
  uint32_t value;
} mlc_plan_io;

typedef struct {
  uint32_t kernel;
  const char *name, *scope;
  uint32_t stream;
  uint32_t nwait, nargs;
  const uint32_t *wait, *args;
  uint64_t work_items;
  double flops, bytes;
  uint8_t sharded;   /* work_items are a flat parameter's rows: a rank runs its share */
  uint8_t unit;      /* MLC_PLAN_UNIT_* */
  uint8_t products;  /* the unit's products per FLOP, 1..3 */
} mlc_plan_step;

/* Code in one format (MLC_PLAN_FORMAT_*). */
typedef struct {
  const char *format;
  const uint8_t *code; /* 16-byte aligned, with a NUL after the bytes (source text is a C string) */
  uint32_t bytes;
} mlc_plan_executable;

typedef struct {
  const char *entry;
  uint32_t grid[3], block[3];
  uint32_t smem; /* dynamic shared memory, bytes */
} mlc_plan_launch;

/* How kernel i of the plan runs: mlc_plan.dispatch[i]. */
typedef struct {
  uint32_t executable; /* MLC_PLAN_NO_EXECUTABLE: none */
  uint32_t nargs;
  uint64_t scratch;
  uint32_t nlaunch;
  const mlc_plan_launch *launch;
  const uint8_t *extra; /* the format's own (see above) */
  uint32_t extra_bytes;
} mlc_plan_dispatch;

typedef struct {
  const char *name;
  uint64_t arena_bytes;
  uint32_t nvalues, ninputs, noutputs, nsteps;
  const mlc_plan_value *values;
  const mlc_plan_io *inputs, *outputs;
  const mlc_plan_step *steps;
} mlc_plan_entry;

/* A learning-rate schedule: `warmup` steps of linear warmup, then constant
 * (decay 0), a half cosine (1) or a line (2) down to min_lr at step `steps`,
 * and min_lr after it, as llm.c's and nanoGPT's. */
enum { MLC_PLAN_DECAY_NONE, MLC_PLAN_DECAY_COSINE, MLC_PLAN_DECAY_LINEAR };
typedef struct {
  double lr, min_lr;
  uint64_t warmup, steps;
  uint8_t decay;
} mlc_plan_schedule;

/* The learning rate of the step taken after `step` steps (the runtime's
 * "opt.lr" when its "opt.step" is step + 1), over a schedule of `total` steps. */
double mlc_plan_lr(const mlc_plan_schedule *s, uint64_t step, uint64_t total);

typedef struct mlc_plan {
  const char *model;
  uint32_t nparams, nkernels, nentries;
  const mlc_plan_param *params;
  const char *const *kernels;
  const mlc_plan_entry *entries;
  mlc_plan_schedule schedule;
  mlc_allocator allocator; /* what the plan was allocated with */
  uint32_t nties;
  const mlc_plan_tie *ties;
  uint32_t nexecutables;
  const mlc_plan_executable *executables;
  const mlc_plan_dispatch *dispatch; /* [nkernels]: kernels[i]'s record */
} mlc_plan;

/* Parses and validates a plan.  The result does not point into `bytes`. */
MLC_MUST_USE mlc_status mlc_plan_parse(const void *bytes, size_t n, mlc_allocator a, mlc_plan **out_plan);
/* The same from a file (`mlc compile -o DIR` writes DIR/<name>.mlcplan for
 * the GPU targets): errors name the path; MLC_NOT_FOUND for a missing file,
 * MLC_DATA_LOSS for one that is not a whole plan. */
MLC_MUST_USE mlc_status mlc_plan_read_file(const char *path, mlc_allocator a, mlc_plan **out_plan);
void mlc_plan_free(mlc_plan *plan);
const mlc_plan_entry *mlc_plan_find_entry(const mlc_plan *plan, const char *name);
/* The executable of kernel `symbol` and its record, for a backend taking its
 * kernels from the plan; NULL when the plan has no such kernel. */
const mlc_plan_dispatch *mlc_plan_find_kernel(const mlc_plan *plan, const char *symbol);
/* A reader over a dispatch record's extra bytes, for the backends: each
 * call returns false (and reads nothing) when too few bytes remain. */
typedef struct {
  const uint8_t *p, *end;
} mlc_plan_cursor;
bool mlc_plan_read_u8(mlc_plan_cursor *c, uint8_t *v);
bool mlc_plan_read_u32(mlc_plan_cursor *c, uint32_t *v);
bool mlc_plan_read_u64(mlc_plan_cursor *c, uint64_t *v);
/* Bytes of one value of this shape. */
uint64_t mlc_plan_shape_bytes(const mlc_plan_shape *s);

#ifdef __cplusplus
}
#endif

#endif
