/* The plan's schedule: which stream each step runs on, and which earlier
 * steps of the other stream it waits for.
 *
 * FSDP's collectives, the casts of the shards they gather and the updates
 * of the shards run on stream 1 (communication); everything else on stream
 * 0 (compute), so that a unit's all-gather (prefetched by the fsdp pass)
 * and reduce-scatter overlap the other units' kernels.  A step waits for
 * the latest step of the other stream that touches its bytes in a way that
 * matters: one that wrote what it reads or writes, or read what it writes.
 * Bytes are the arena ranges memplan gave (a rank slice counts as its whole
 * buffer) and each parameter's storage.  Streams run in order, so waiting
 * for that step covers every earlier one of its stream; a step waits for
 * nothing the stream has already waited past.  Programs without
 * collectives stay on stream 0 and wait for nothing.
 */
#include "codegen/schedule.h"

#include <string.h>

typedef struct {
  int64_t lo, hi; /* [lo, hi) */
} range;

#define PARAM_SPACE ((int64_t)1 << 56) /* parameters' bytes, apart from the arena's */

static range value_range(const mlc_program *p, const mlc_func *f, uint32_t v) {
  const mlc_node *n = &f->nodes[v];
  if (n->op == MLC_OP_REDUCE_SCATTER) return value_range(p, f, n->in[0]);
  uint32_t root = v;
  while (f->nodes[root].op == MLC_OP_RESHAPE) root = f->nodes[root].in[0];
  int64_t bytes = mlc_type_numel(&n->type) * mlc_dtype_size(n->type.dtype);
  if (f->nodes[root].op == MLC_OP_PARAM) {
    int64_t at = PARAM_SPACE + (int64_t)f->nodes[root].a.param * ((int64_t)1 << 44);
    return (range){at, at + bytes};
  }
  return (range){f->offset[v], f->offset[v] + bytes};
}

static bool overlap(range a, range b) { return a.lo < b.hi && b.lo < a.hi; }

/* The ranges a node reads (its inputs) and writes (its output, and what an
 * optimizer update changes in place: every input but the gradients and the
 * shared scalars, for each parameter of a group).  wr holds nin + 1. */
static uint32_t touches(const mlc_program *p, const mlc_func *f, uint32_t i, range *rd, range *wr, uint32_t *nwr) {
  const mlc_node *n = &f->nodes[i];
  for (uint32_t k = 0; k < n->nin; k++) rd[k] = value_range(p, f, n->in[k]);
  *nwr = 0;
  wr[(*nwr)++] = value_range(p, f, i);
  if (mlc_op_is_update(n->op)) {
    uint32_t per, tail;
    mlc_update_layout(n->op, &per, &tail);
    for (uint32_t k = 0; k + tail < n->nin; k++)
      if (k % per != 1) wr[(*nwr)++] = rd[k];
  }
  return n->nin;
}

/* What one step reads and writes, worked out once. */
typedef struct {
  range *rd, *wr;
  uint32_t nrd, nwr;
} step_io;

/* Must s wait for t: t wrote what s reads or writes, or read what s writes? */
static bool conflict(const step_io *s, const step_io *t) {
  for (uint32_t a = 0; a < t->nwr; a++) {
    for (uint32_t b = 0; b < s->nrd; b++) if (overlap(t->wr[a], s->rd[b])) return true;
    for (uint32_t b = 0; b < s->nwr; b++) if (overlap(t->wr[a], s->wr[b])) return true;
  }
  for (uint32_t a = 0; a < t->nrd; a++)
    for (uint32_t b = 0; b < s->nwr; b++) if (overlap(t->rd[a], s->wr[b])) return true;
  return false;
}

void mlc_schedule(const mlc_program *p, const mlc_func *f, const uint32_t *kid, mlc_sched *out) {
  mlc_arena *a = p->arena;
  uint32_t n = f->n, nsteps = 0;
  out->step_of = mlc_arena_alloc(a, (n + 1) * sizeof *out->step_of);
  out->stream = mlc_arena_alloc(a, (n + 1) * sizeof *out->stream);
  out->wait = mlc_arena_alloc(a, (n + 1) * sizeof *out->wait);
  bool comm = false;
  for (uint32_t i = 0; i < n; i++) comm |= (mlc_ops[f->nodes[i].op].flags & MLC_F_COLL) != 0;
  uint32_t *node_of = mlc_arena_alloc(a, (n + 1) * sizeof *node_of);
  for (uint32_t i = 0; i < n; i++) {
    out->step_of[i] = kid[i] == UINT32_MAX ? UINT32_MAX : nsteps;
    out->wait[i] = UINT32_MAX;
    const mlc_node *nd = &f->nodes[i];
    out->stream[i] = comm && ((mlc_ops[nd->op].flags & MLC_F_COLL) || mlc_node_sharded(p, f, nd)) ? 1 : 0;
    if (kid[i] != UINT32_MAX) node_of[nsteps++] = i;
  }
  if (!comm) return;
  /* covered[s]: the last step of the other stream that stream s has waited for. */
  int64_t covered[2] = {-1, -1};
  step_io *io = mlc_arena_alloc(a, (nsteps + 1) * sizeof *io);
  for (uint32_t s = 0; s < nsteps; s++) {
    io[s].rd = mlc_arena_alloc(a, (f->nodes[node_of[s]].nin + 1) * sizeof *io[s].rd);
    io[s].wr = mlc_arena_alloc(a, (f->nodes[node_of[s]].nin + 1) * sizeof *io[s].wr);
    io[s].nrd = touches(p, f, node_of[s], io[s].rd, io[s].wr, &io[s].nwr);
  }
  for (uint32_t s = 0; s < nsteps; s++) {
    uint32_t i = node_of[s];
    uint8_t st = out->stream[i];
    for (int64_t t = (int64_t)s - 1; t > covered[st]; t--) {
      if (out->stream[node_of[t]] == st) continue;
      if (conflict(&io[s], &io[t])) {
        out->wait[i] = (uint32_t)t;
        covered[st] = t;
        break;
      }
    }
  }
}
