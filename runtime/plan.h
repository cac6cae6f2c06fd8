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
 *            u32 nkernels  { str symbol }
 *            u32 nentries  { str name, u64 arena_bytes,
 *                            u32 nvalues  { dtype, shape, i64 offset, u32 param (0xffffffff: arena),
 *                                           u8 is_const, f64 value (a scalar the runtime writes once),
 *                                           u8 rank_slice }
 *                            u32 ninputs  { str name, u32 value }
 *                            u32 noutputs { str name, u32 value }
 *                            u32 nsteps   { u32 kernel, str name, str scope, u32 stream,
 *                                           u32 nwait { u32 step }, u32 nargs { u32 value },
 *                                           u64 work_items, f64 flops, f64 bytes, u8 sharded,
 *                                           u8 unit, u8 products } }
 *            schedule f64 lr, f64 min_lr, u64 warmup, u64 steps, u8 decay
 *   str   = u32 length, then that many bytes (no NUL)
 *   dtype = u8 (mlc_dtype of ir/ir.h: 1 f32, 2 bf16, 3 f16, 4 i32, 5 i64, 6 bool)
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
 * "mlc_all_gather" or "mlc_reduce_scatter" are collectives the runtime
 * carries out itself, arguments (input, output).
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
 * earlier step).  A plan that fails any check is refused
 * with MLC_DATA_LOSS and a message saying what is wrong.
 */
#ifndef MLC_PLAN_H
#define MLC_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/alloc.h"
#include "runtime/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MLC_PLAN_MAGIC "MLCPLAN"
#define MLC_PLAN_VERSION 5u
#define MLC_PLAN_HEADER_BYTES 32u
#define MLC_PLAN_MAX_RANK 6
#define MLC_PLAN_NO_PARAM 0xffffffffu
#define MLC_PLAN_SHARD_ROW 4096 /* MLC_SHARD_ROW of ir/ir.h */
#define MLC_PLAN_ALL_GATHER "mlc_all_gather"
#define MLC_PLAN_REDUCE_SCATTER "mlc_reduce_scatter"

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
  uint8_t init; /* 0 zeros, 1 ones, 2 uniform(a, b), 3 normal(mean a, std b) */
  double a, b;
  uint8_t role; /* 0 a model weight (in the state_dict), 1 optimizer state (in checkpoints only), 2 a flat parameter, 3 a KV cache (in neither),
                  4 a quantised weight (in neither): i32 [n, words] packed by the runtime from the f32 weight
                  [n, k] whose index is flat_offset, a bits (4 or 8) and b weights per scale (runtime/quant.h) */
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
} mlc_plan;

/* Parses and validates a plan.  The result does not point into `bytes`. */
MLC_MUST_USE mlc_status mlc_plan_parse(const void *bytes, size_t n, mlc_allocator a, mlc_plan **out_plan);
void mlc_plan_free(mlc_plan *plan);
const mlc_plan_entry *mlc_plan_find_entry(const mlc_plan *plan, const char *name);
/* Bytes of one value of this shape. */
uint64_t mlc_plan_shape_bytes(const mlc_plan_shape *s);

#ifdef __cplusplus
}
#endif

#endif
