/* Sessions: the runtime's generic C API.
 *
 * A session runs one plan on one device.  It owns the model's parameters
 * (one block, in the plan's order), the optimizer state (another block,
 * made at the first call that needs it: see below), one arena per entry
 * point (the size the compiler planned, made at the entry's first use), and
 * the resolved kernels.  A session that only ever runs forward holds the
 * parameters and the forward's arena, nothing of the train step's.  The typed API that
 * `mlc compile -o` generates (<name>.h) wraps these calls.
 *
 * The device sits behind runtime/device.h, made by mlc_device_create: the
 * CPU (kernels of runtime/cpu/kernel.h over a thread pool, found by name
 * through a lookup function: the ORC JIT's for `mlc run`, a table of linked
 * symbols for an artifact), CUDA, Vulkan or Metal.  Parameters always have a host
 * copy; on a device with its own memory the session keeps the two in step,
 * copying only when one side has changed (a train run changes the
 * device's; loading, initialising or param_data the host's).  Where the
 * device's kernels take host pointers (the CPU), a caller's buffers can
 * stand in for an entry's inputs and outputs for one run, with no copy
 * (mlc_session_bind_input).
 *
 * Every call returns a status (NULL is OK); nothing prints unless asked to,
 * and nothing exits.
 */
#ifndef MLC_SESSION_H
#define MLC_SESSION_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "runtime/alloc.h"
#include "runtime/cpu/device.h"
#include "runtime/device.h"
#include "runtime/dist/comm.h"
#include "runtime/plan.h"
#include "runtime/profile.h"
#include "runtime/status.h"
#include "runtime/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mlc_session mlc_session;

typedef struct {
  /* The device to run on (mlc_device_create); the session owns it from
   * here on (it is destroyed with the session, or at once if creation
   * fails).  NULL: the registry's "cpu" device, with kernels found through
   * `lookup` and run on `threads` threads. */
  mlc_device *device;
  mlc_symbol_lookup lookup;
  void *lookup_ctx;
  int threads;            /* 0: one per online CPU */
  bool profile;           /* time every step (costs nothing when off) */
  mlc_allocator allocator; /* {0}: malloc */
  /* The ranks a sharded (fsdp) plan runs across; the caller keeps it and
   * destroys it after the session.  NULL: one rank. */
  mlc_comm *comm;
} mlc_session_options;

/* The plan must outlive the session. */
MLC_MUST_USE mlc_status mlc_session_create(const mlc_plan *plan, const mlc_session_options *opt,
                                           mlc_session **out_session);
void mlc_session_destroy(mlc_session *s);
const mlc_plan *mlc_session_plan(const mlc_session *s);

/* This process's rank and the number of ranks (1 without a communicator),
 * and the communicator itself. */
int mlc_session_rank(const mlc_session *s);
int mlc_session_world(const mlc_session *s);
/* v[0..n) (n <= 8) summed over the ranks, on every rank (losses; agreeing
 * that every rank wrote its checkpoint shard).  Nothing with one rank. */
MLC_MUST_USE mlc_status mlc_session_all_sum(mlc_session *s, double *v, int n);
mlc_comm *mlc_session_comm(const mlc_session *s);

/* Parameters: PyTorch's default initialisation from a seeded RNG (the
 * distributions are PyTorch's; the random stream is mlc's own), or a
 * safetensors file with PyTorch's names, dtypes and shapes.  Loading is
 * strict, like load_state_dict(strict=True): every parameter must be in the
 * file with its exact dtype and shape, and the file may hold nothing else. */
void mlc_session_init_params(mlc_session *s, uint64_t seed);
MLC_MUST_USE mlc_status mlc_session_load_weights(mlc_session *s, const char *path);
/* The same from safetensors bytes in the caller's memory, with the same
 * checks; nothing is read outside [data, data + size), and the bytes are
 * not kept.  Errors start "weights in memory:" where the file's name the
 * file. */
MLC_MUST_USE mlc_status mlc_session_load_weights_memory(mlc_session *s, const void *data, size_t size);
MLC_MUST_USE mlc_status mlc_session_save_weights(const mlc_session *s, const char *path);
/* The block a parameter lives in, for direct access (the host copy, brought up
 * to date first; the session then treats it as changed, and packs the
 * quantised weights made from it again before its next run).  NULL if the
 * device's copy cannot be read back, or the parameter is a weight sharded
 * across ranks (fsdp): no rank holds it whole. */
void *mlc_session_param_data(mlc_session *s, uint32_t param);
/* Sets a model weight (role 0) from its whole tensor, `bytes` its size in
 * the plan; a weight sharded across ranks keeps this rank's part of it.  The
 * quantised weights made from it (--quantize) are packed again from it. */
MLC_MUST_USE mlc_status mlc_session_set_param(mlc_session *s, uint32_t param, const void *data, size_t bytes);

/* Checkpoints: every parameter and the optimizer's state, with the step
 * count and an xxHash64 checksum of all the data in the metadata, written
 * atomically (temporary file, fsync, rename).  Loading verifies the
 * checksum and refuses a corrupt, truncated or mismatched file.
 *
 * The optimizer state (AdamW's moments) is made, zero, at the first call
 * that needs it: the first use of the train entry (an input, a run, an
 * output), loading a checkpoint, mlc_session_state_restore, or
 * mlc_session_param_data of a state tensor.  If its memory is not there,
 * that call fails (MLC_OUT_OF_MEMORY, or the device's own code) and the
 * session runs forward as before.  Saving a checkpoint of a session that
 * never made it writes the zeros it would start from (a valid checkpoint,
 * the same as before the change that made the state lazy), without making
 * the session hold it. */
MLC_MUST_USE mlc_status mlc_session_save_checkpoint(const mlc_session *s, const char *path);
MLC_MUST_USE mlc_status mlc_session_load_checkpoint(mlc_session *s, const char *path);
/* Optimizer steps taken: each successful run of the "train" entry is one,
 * and its runtime-managed input "opt.step" (AdamW's) is this plus one; "opt.lr"
 * is the schedule's rate at this step (below). */
uint64_t mlc_session_step(const mlc_session *s);
/* The learning-rate schedule (runtime/plan.h): its length in steps, when
 * the train block's optimizer gives none (steps=; then that one stays), and
 * the rate of the next step, the one the next run of "train" takes.  The
 * schedule is a function of the step count alone, so a session resumed from
 * a checkpoint continues it. */
void mlc_session_set_schedule_steps(mlc_session *s, uint64_t steps);
uint64_t mlc_session_schedule_steps(const mlc_session *s);
double mlc_session_lr(const mlc_session *s);

/* The whole training state (parameters, optimizer state, step count) copied
 * out into `bytes` bytes at `buf` (mlc_session_state_bytes of them, the
 * state counted whether it is held yet or not: zeros if not), and put
 * back (which makes the state).  mlc train's validation loss runs the train entry on held-out
 * batches (its loss is that of the state before the update) and puts the
 * state back after each, so evaluating changes nothing. */
uint64_t mlc_session_state_bytes(const mlc_session *s);
MLC_MUST_USE mlc_status mlc_session_state_save(const mlc_session *s, void *buf, uint64_t bytes);
MLC_MUST_USE mlc_status mlc_session_state_restore(mlc_session *s, const void *buf, uint64_t bytes);

/* Copies an input; `bytes` must be its exact size.  An input bound to a
 * caller's buffer (below) is the arena's again from here on. */
MLC_MUST_USE mlc_status mlc_session_set_input(mlc_session *s, const char *entry, const char *name, const void *data,
                                              size_t bytes);
/* The same from a caller's tensor (runtime/tensor.h; its dtype and shape
 * checked already, by mlc_tensor_check): host memory is copied as above;
 * MLC_MEMORY_HOST_IN_PLACE memory is bound for the next run
 * (mlc_session_bind_input) where it can be, else copied;
 * memory of the session's device (MLC_MEMORY_DEVICE) is checked and copied
 * device to device by the device (mlc_device_vt's copy_external), and
 * refused with MLC_INVALID_ARGUMENT by a device without memory of its own;
 * MLC_MEMORY_DEVICE_IN_PLACE memory is checked, then bound for the next run
 * where the device's kernels can take it (mlc_device_vt's bind_external:
 * CUDA) and bind_input's rules allow, else copied as MLC_MEMORY_DEVICE. */
MLC_MUST_USE mlc_status mlc_session_set_input_tensor(mlc_session *s, const char *entry, const char *name,
                                                     const mlc_tensor *t);
/* What those two check of a caller's tensor for the entry's input (or
 * output) `name`, without copying: its size, and device memory where the
 * device can take it (the driver's check of the address).  The artifact
 * checks its outputs so before a run, so that a train step that cannot
 * write its loss does not take the step.  Being the one call it makes for an
 * output before the run, this also binds an output in
 * MLC_MEMORY_HOST_IN_PLACE or DEVICE_IN_PLACE memory where it can (mlc_session_bind_output;
 * where not, the run writes the arena and output_tensor copies), as
 * set_input_tensor binds such an input. */
MLC_MUST_USE mlc_status mlc_session_check_tensor(const mlc_session *s, const char *entry, bool input, const char *name,
                                                 const mlc_tensor *t);
/* A caller's buffer in place of the arena, for the entry's next run only:
 * the run reads input `name` from `data` (bytes: its exact size) as it
 * goes, with no copy, so what the caller writes there before the run is
 * what the run sees; bind_output has the run write the output there (no
 * mlc_session_output_tensor needed).  The session moves the value and every
 * view of its storage (the plan's view_of: a reshape of the input, say),
 * and only those; for an output, the value whose storage it views, whose
 * every write and read then uses the buffer.  The buffer must stay alive
 * and, for an output, untouched until the run is done.
 *
 * A binding lasts until the end of the entry's next run, failed or not,
 * or until mlc_session_unbind, or, for an input, until set_input or
 * set_input_tensor copies into it.  After a run, mlc_session_output and
 * output_tensor read a bound output from the caller's buffer, until the
 * next run.
 *
 * Refused, with nothing bound, so that the caller copies instead:
 * MLC_INVALID_ARGUMENT when `bytes` is not the value's size or `data` is
 * not 16-byte aligned (the kernels' vector loads); MLC_UNIMPLEMENTED when
 * the device's kernels take only its own memory (mlc_device_vt's
 * host_pointers: all but the CPU), the value is a parameter or a view of
 * one, a constant, an input the runtime writes itself ("opt.step",
 * "opt.lr", "opt.world"), part of a larger value, both an input and an
 * output (`return x`, or a reshape of it), taken by a collective (fsdp), or
 * when the buffer overlaps another one bound to the entry that a run
 * writes; MLC_NOT_FOUND for a name the entry does not have.  A second
 * binding of the same storage replaces the first. */
MLC_MUST_USE mlc_status mlc_session_bind_input(mlc_session *s, const char *entry, const char *name, const void *data,
                                               size_t bytes);
MLC_MUST_USE mlc_status mlc_session_bind_output(mlc_session *s, const char *entry, const char *name, void *data,
                                                size_t bytes);
/* Whether the entry's input (or output) `name` is bound to a caller's
 * buffer for its next run (false for a name it does not have). */
bool mlc_session_is_bound(const mlc_session *s, const char *entry, bool input, const char *name);
/* Every binding of the entry undone (for a caller that binds, then does
 * not run). */
MLC_MUST_USE mlc_status mlc_session_unbind(mlc_session *s, const char *entry);
MLC_MUST_USE mlc_status mlc_session_run(mlc_session *s, const char *entry);
/* The output's bytes (valid until the next run: the arena's, or the
 * caller's buffer the run wrote it to) and shape. */
MLC_MUST_USE mlc_status mlc_session_output(const mlc_session *s, const char *entry, const char *name,
                                           const void **out_data, const mlc_plan_shape **out_shape);

/* An output copied into a caller's tensor after a run: to host memory
 * (read from the device straight into it; nothing when the run wrote it
 * there, bound), or device to device as mlc_session_set_input_tensor
 * copies inputs. */
MLC_MUST_USE mlc_status mlc_session_output_tensor(const mlc_session *s, const char *entry, const char *name,
                                                  const mlc_tensor *t);

/* With profiling on: a table in the style of torch.profiler's
 * key_averages(), one row per step, sorted by total time, with each step's
 * place on the roofline (runtime/profile.h): achieved rates, intensity,
 * what bounds it, the share of its roof, and a hint.  The first form uses
 * this CPU's cached calibration (or built-in defaults, and says so). */
void mlc_session_print_profile(const mlc_session *s, const char *entry, FILE *out);
/* Bytes of device memory the session holds now: the parameters, the
 * arenas of the entries used so far, kernels' scratch, and the optimizer
 * state once a call has made it (a session that only runs forward never
 * does). */
uint64_t mlc_session_device_bytes(const mlc_session *s);
/* The ceilings the first form uses: this CPU's calibration, or a GPU's datasheet figures. */
void mlc_session_ceilings(const mlc_session *s, mlc_ceilings *c);
void mlc_session_print_profile_ceilings(const mlc_session *s, const char *entry, const mlc_ceilings *c, FILE *out);
struct mlc_ncu_match_s; /* runtime/ncu.h */
/* mlc's verdict of each distinct kernel of a profiled entry, for comparing
 * with Nsight Compute (runtime/ncu.h): one match per kernel symbol, judged
 * on its steps' FLOPs, bytes and time summed (ncu weighs its launches by
 * time), its longest step naming it; *out is freed with free(). */
MLC_MUST_USE mlc_status mlc_session_ncu_matches(const mlc_session *s, const char *entry, const mlc_ceilings *c,
                                                struct mlc_ncu_match_s **out, uint32_t *n);
void mlc_session_reset_profile(mlc_session *s);
/* With profiling on, empty the caches before each timed step, as Nsight
 * Compute does before each kernel it measures (CUDA: the L2, by reading a
 * buffer twice its size); MLC_UNIMPLEMENTED on a device that cannot. */
MLC_MUST_USE mlc_status mlc_session_set_flush_caches(mlc_session *s, bool on);
/* With profiling on, also keep every step's start and duration, for
 * mlc_session_write_trace (which the reset does not clear). */
void mlc_session_set_trace(mlc_session *s, bool on);
/* Chrome trace event JSON (Perfetto, chrome://tracing): one track per
 * stream, one complete event per step per run, with scope, FLOPs, bytes and
 * argument shapes. */
MLC_MUST_USE mlc_status mlc_session_write_trace(const mlc_session *s, const char *path);
/* The entry's profiled steps on an SVG roofline. */
MLC_MUST_USE mlc_status mlc_session_write_roofline(const mlc_session *s, const char *entry, const mlc_ceilings *c,
                                                   const char *path);

#ifdef __cplusplus
}
#endif

#endif
