/* What the session's four files share (runtime/session.h is the API; only
 * these files include this header):
 *   session.c             the core: create and destroy, the parameter and
 *                         optimizer-state blocks, entries and their arenas,
 *                         inputs, runs, outputs, the ranks' sums
 *   session_weights.c     initial weights, weights from safetensors (a file
 *                         or memory), saving them (export)
 *   session_checkpoint.c  checkpoints, saved and resumed; FSDP-sharded ones
 *                         (a shard per rank, read back by as many ranks or
 *                         gathered by one); the training state in memory
 *                         (state_save, state_restore)
 *   session_profile.c     the profile table, ncu matches, the trace, the
 *                         roofline (the classifier itself is runtime/profile.c)
 * The functions one file defines for the others are mlc_sess_*: libmlcrt
 * exports them, but only this header, which is not installed, declares them.
 */
#ifndef MLC_SESSION_IMPL_H
#define MLC_SESSION_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/safetensors.h"
#include "runtime/session.h"

typedef struct {
  const mlc_plan_entry *e;
  uint64_t arena;         /* device address of the arena */
  uint64_t *addr;         /* per value: its device address */
  uint64_t **args;        /* per step: its argument addresses */
  void **kern;            /* per step: the device's kernel handle */
  void **host;            /* per value: a host copy of an output (devices with their own memory) */
  double *seconds;        /* per step, summed over profiled runs */
  double *start, *last;   /* per step: start and seconds in the last profiled run */
  const char **label;     /* per step: "scope name", for the device's profiler ranges */
  bool *signal;           /* per step: a later step of another stream waits for it */
  bool bound;             /* the arena is made and every address filled in (bind_entry) */
  uint64_t runs;
  /* Caller's buffers in place of the arena (mlc_session_bind_input and
   * bind_output), per value with storage of its own (a root: the plan's
   * view_of): where the next run takes its bytes (0: the arena), and where
   * the last run left them.  Undone after every run (session.c's unbind). */
  uint64_t *in_place;     /* per value */
  uint64_t *moved;        /* per value */
  uint32_t nin_place;     /* roots with in_place set */
  bool any_moved;
  /* The device's recording of the steps' launches (vt->record_begin: CUDA
   * graphs), replayed while the arguments hash to rec_key; last_key: the
   * arguments of the run before (a recording is made on the second run in
   * a row with the same ones); rec_off: this entry is not recorded (the
   * device refused). */
  void *rec;
  uint64_t rec_key, last_key;
  bool rec_off;
} entry_state;

/* One step of one run, for the trace. */
typedef struct {
  uint32_t entry, step;
  double start, seconds; /* start: since the session was created */
} trace_event;

struct mlc_session {
  const mlc_plan *plan;
  mlc_allocator a;
  mlc_device *dev;
  bool profile;
  uint8_t *params;        /* every parameter but the optimizer state, 64-byte aligned each (host) */
  uint64_t dparams;       /* the same on the device (== params on the CPU) */
  uint64_t params_bytes;
  /* The optimizer state (role 1) and the weights' shadows (role 5), laid
   * out the same way: NULL (and 0) until a call first needs them
   * (mlc_sess_ensure_state), so that a session that only runs forward never
   * holds them. */
  uint8_t *state;
  uint64_t dstate;
  uint64_t state_bytes;   /* what it takes, held or not */
  bool host_stale;        /* the device's parameters (and state) are newer than the host's */
  bool dev_stale;         /* the host's are newer than the device's */
  uint8_t *written;       /* per parameter: a weight handed out by mlc_session_param_data since its packed forms and
                             shadow were made (packed_stale: any) */
  bool packed_stale;      /* a weight that packed ones or a shadow (role 4, 5) follow may have been written through
                             mlc_session_param_data since they were packed: they are packed again before the next run */
  uint64_t *param_off;    /* per parameter: its offset in its block (params, or state for role 1) */
  /* Given weights (init 4: the model file's values, which the plan does not
   * carry) not loaded since the session started or init_params: per
   * parameter, and how many; a run refuses while any is (session.c's check_given). */
  uint8_t *given_unset;
  uint32_t ngiven_unset;
  mlc_plan_shape *pshape; /* per parameter: its shape here (a sharded one's rows are this rank's) */
  mlc_comm *comm;         /* the ranks' collectives (FSDP) */
  bool own_comm;
  uint64_t sum_buf;       /* device scratch for mlc_session_all_sum on a device communicator */
  uint64_t step;          /* optimizer steps taken */
  uint64_t sched_steps;   /* the learning-rate schedule's length: the plan's, or the caller's */
  entry_state *entries;
  bool trace;
  bool flushing;          /* the caches are emptied before each timed kernel (mlc_session_set_flush_caches) */
  trace_event *events;    /* (nevents), grows by doubling */
  size_t nevents, cap_events;
};

enum { ROLE_STATE = 1 }; /* mlc_plan_param.role of optimizer state */

/* The given weights' bookkeeping: `param` loaded (UINT32_MAX: every one, as
 * a whole weights file or checkpoint loads them), or all unloaded again
 * (reset: init_params, which leaves them zero). */
static inline void mlc_sess_given_loaded(mlc_session *s, uint32_t param) {
  for (uint32_t i = 0; i < s->plan->nparams && s->ngiven_unset; i++)
    if ((param == UINT32_MAX || i == param) && s->given_unset[i]) {
      s->given_unset[i] = 0;
      s->ngiven_unset--;
    }
}
static inline void mlc_sess_given_reset(mlc_session *s) {
  s->ngiven_unset = 0;
  for (uint32_t i = 0; i < s->plan->nparams; i++)
    s->ngiven_unset += s->given_unset[i] = s->plan->params[i].init == MLC_PLAN_INIT_GIVEN;
}

enum { ROLE_WEIGHT = 0, ALL_ROLES = 255 }; /* a file's `role`: weights, or all a checkpoint holds (mlc_sess_in_file) */

static inline bool is_state(const mlc_session *s, uint32_t i) { return s->plan->params[i].role == ROLE_STATE; }
/* Made by the runtime from a weight (flat_offset): a packed one (role 4), or a shadow (5). */
static inline bool follows_weight(const mlc_plan_param *p) { return p->role == 4 || p->role == 5; }
/* In the state's block: the optimizer state, and the weights' shadows, which only the train step reads. */
static inline bool in_state_block(const mlc_session *s, uint32_t i) {
  return s->plan->params[i].role == ROLE_STATE || s->plan->params[i].role == 5;
}

/* A parameter's storage on the host and on the device (in the state's
 * block: only once mlc_sess_ensure_state has made it). */
static inline uint8_t *host_at(const mlc_session *s, uint32_t i) {
  return (in_state_block(s, i) ? s->state : s->params) + s->param_off[i];
}
static inline uint64_t dev_at(const mlc_session *s, uint32_t i) {
  return (in_state_block(s, i) ? s->dstate : s->dparams) + s->param_off[i];
}

/* Bytes a parameter's storage holds here (0 for a weight inside a flat). */
static inline uint64_t param_bytes(const mlc_session *s, uint32_t i) {
  return s->plan->params[i].flat ? 0 : mlc_plan_shape_bytes(&s->pshape[i]);
}

/* For a weight inside a flat: the part of it [lo, hi) (elements of the
 * weight) that this rank holds, and where that part starts in storage.
 * False when the rank holds none of it. */
static inline bool flat_part(const mlc_session *s, uint32_t i, uint64_t *lo, uint64_t *hi, uint8_t **at) {
  const mlc_plan_param *p = &s->plan->params[i];
  uint32_t fl = p->flat - 1;
  uint64_t per = mlc_plan_shape_bytes(&s->pshape[fl]) / 4, first = per * (uint64_t)s->comm->rank;
  uint64_t n = mlc_plan_shape_bytes(&p->shape) / 4, a = p->flat_offset, b = a + n;
  if (b <= first || a >= first + per) return false;
  uint64_t from = a > first ? a : first, to = b < first + per ? b : first + per;
  *lo = from - a;
  *hi = to - a;
  *at = host_at(s, fl) + (from - first) * 4;
  return true;
}
static inline bool host_memory(const mlc_session *s) { return s->dev->vt->host_memory; }

/* session.c */
void mlc_sess_store_scalar(void *dst, uint8_t dtype, double v);
extern const char *const mlc_sess_dtype_names[9]; /* by plan dtype: "?", "f32", "bf16", "f16", "i32", "i64", "bool", "f8e4m3", "f8e5m2" */
void mlc_sess_shape_str(char *buf, size_t n, int rank, const int64_t *dims); /* "[2, 3]" */
mlc_status mlc_sess_ensure_state(mlc_session *s);     /* the optimizer state, made at the first call that needs it */
mlc_status mlc_sess_sync_host(const mlc_session *cs); /* the host copy of the parameters brought up to date */
mlc_status mlc_sess_find_entry(const mlc_session *s, const char *name, entry_state **out);

/* session_weights.c */
void mlc_sess_pack_quantized(mlc_session *s); /* every packed weight and shadow (role 4, 5) from its f32 weight */
/* The packed weights and shadows (role 4, 5; shadows only once the state's block is made) made from weight `param`
 * (UINT32_MAX: all) made again from it; whether any is. */
bool mlc_sess_pack_from(mlc_session *s, uint32_t param);
/* Where weights were written through mlc_session_param_data since their
 * packed forms and shadows were made (packed_stale): those made again. */
mlc_status mlc_sess_pack_stale(mlc_session *s);
bool mlc_sess_in_file(const mlc_plan_param *p, int role);
mlc_status mlc_sess_load_tensors(mlc_session *s, mlc_safetensors *f, const char *path, int role);
mlc_status mlc_sess_save_tensors(const mlc_session *s, const char *path, int role, const mlc_safetensors_kv *meta,
                                 size_t nmeta);

/* session_checkpoint.c */
char *mlc_sess_shard_path(const mlc_session *s, const char *path, int rank); /* "<path>.rank<r>", from s->a */

#endif
