/* memplan: liveness-based arena offsets.
 *
 * Every value an entry point computes gets a byte range in one arena per
 * entry point, chosen so that two values alive at the same time never
 * overlap.  The peak size is therefore known at compile time, and the
 * runtime makes a single allocation.
 *
 * A value is alive from the node that defines it to its last use; inputs
 * are alive from the start, outputs to the end, and scalar constants, which
 * the runtime writes once when a session starts, for the whole session (so
 * they are placed before anything else).  A reshape is a view: it shares its
 * input's storage, which then lives as long as either does; so do the fsdp
 * pass's views (at an offset) and reduce-scatters (in place).
 * Parameters live outside the arena (offset -1): they are the model's
 * weights, bound once per session.
 *
 * Placement walks the nodes in order, frees what died at the previous node,
 * and puts each new value in the smallest free gap that fits (best fit),
 * else at the end.  Offsets are aligned to 256 bytes, which suits every
 * target's vector loads.
 *
 * A node's output never shares its inputs' bytes, with one exception where
 * the kernel is known to allow it (the target's ce_grad_in_place: CUDA on one
 * GPU), cross_entropy_grad writes over
 * its logits when they die there (its kernel reads a row whole before it
 * writes the row, each element by the thread that then writes it, and
 * reads no element after it is written, so its __restrict__ pointers stay
 * sound).  For a language model's head that is one [tokens, vocab] buffer
 * less at the start of the backward, where the train step's peak is:
 * 524 MB for the MiniLLM.
 *
 * FSDP's packed gradients are computed in place (issue 31): the concat
 * that packs a unit's gradients for its reduce-scatter (passes/fsdp.c)
 * gets its bytes at its first piece's node, and each piece (a gradient, its
 * cast to the reduce dtype, the zeros of the padding) is placed at its
 * offset inside them, so that the kernel computing it writes it into the
 * flat buffer and the concat copies nothing: it has no kernel
 * (mlc_node_in_place).  A piece qualifies when the concat is its last
 * use, it is computed (no parameter, input, constant or pooled value) and
 * its offset is aligned; the concat is placed so only when all its pieces
 * qualify.  The pieces then live in the pool, as the concat does.
 */
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"

#define ALIGN 256

typedef struct {
  int64_t off, size;
} block;

typedef struct {
  block *v;
  uint32_t n;
} blocklist; /* sorted by offset */

static int64_t align_up(int64_t x) { return (x + ALIGN - 1) / ALIGN * ALIGN; }

static void release(blocklist *fl, int64_t off, int64_t size) {
  uint32_t i = 0;
  while (i < fl->n && fl->v[i].off < off) i++;
  memmove(&fl->v[i + 1], &fl->v[i], (fl->n - i) * sizeof *fl->v);
  fl->v[i] = (block){off, size};
  fl->n++;
  /* Coalesce with the neighbours. */
  if (i + 1 < fl->n && fl->v[i].off + fl->v[i].size == fl->v[i + 1].off) {
    fl->v[i].size += fl->v[i + 1].size;
    memmove(&fl->v[i + 1], &fl->v[i + 2], (fl->n - i - 2) * sizeof *fl->v);
    fl->n--;
  }
  if (i > 0 && fl->v[i - 1].off + fl->v[i - 1].size == fl->v[i].off) {
    fl->v[i - 1].size += fl->v[i].size;
    memmove(&fl->v[i], &fl->v[i + 1], (fl->n - i - 1) * sizeof *fl->v);
    fl->n--;
  }
}

static int64_t place(blocklist *fl, int64_t *top, int64_t size) {
  uint32_t best = UINT32_MAX;
  for (uint32_t i = 0; i < fl->n; i++)
    if (fl->v[i].size >= size && (best == UINT32_MAX || fl->v[i].size < fl->v[best].size)) best = i;
  if (best == UINT32_MAX) {
    /* No gap fits: grow, reusing a free block that ends at the top. */
    if (fl->n && fl->v[fl->n - 1].off + fl->v[fl->n - 1].size == *top) {
      int64_t off = fl->v[--fl->n].off;
      *top = off + size;
      return off;
    }
    int64_t off = *top;
    *top += size;
    return off;
  }
  int64_t off = fl->v[best].off;
  fl->v[best].off += size;
  fl->v[best].size -= size;
  if (fl->v[best].size == 0) {
    memmove(&fl->v[best], &fl->v[best + 1], (fl->n - best - 1) * sizeof *fl->v);
    fl->n--;
  }
  return off;
}

/* Takes what is free of [off, off + size) out of fl, appending each range
 * it took to got (so that release() can give them back). */
static void take(blocklist *fl, int64_t off, int64_t size, block *got, uint32_t *ngot) {
  for (uint32_t i = 0; i < fl->n; i++) {
    block b = fl->v[i];
    int64_t lo = b.off > off ? b.off : off, hi = b.off + b.size < off + size ? b.off + b.size : off + size;
    if (lo >= hi) continue;
    got[(*ngot)++] = (block){lo, hi - lo};
    block keep[2] = {{b.off, lo - b.off}, {hi, b.off + b.size - hi}};
    uint32_t nk = (keep[0].size > 0) + (keep[1].size > 0);
    if (nk == 0) {
      memmove(&fl->v[i], &fl->v[i + 1], (fl->n - i - 1) * sizeof *fl->v);
      fl->n--, i--;
    } else if (nk == 1) {
      fl->v[i] = keep[0].size > 0 ? keep[0] : keep[1];
    } else {
      memmove(&fl->v[i + 2], &fl->v[i + 1], (fl->n - i - 1) * sizeof *fl->v);
      fl->v[i] = keep[0], fl->v[i + 1] = keep[1];
      fl->n++, i++;
    }
  }
}

/* Nodes that use their input's storage: a reshape; the fsdp pass's view
 * (at an offset); a reduce-scatter, whose result is this rank's rows of its
 * input (the runtime adds the rank's offset). */
static bool aliases(const mlc_node *n) {
  return n->op == MLC_OP_RESHAPE || n->op == MLC_OP_VIEW || n->op == MLC_OP_REDUCE_SCATTER;
}

uint32_t mlc_memplan_root(const mlc_func *f, uint32_t node) {
  while (aliases(&f->nodes[node])) node = f->nodes[node].in[0];
  return node;
}

/* FSDP's buffers between the streams (see codegen/schedule.c): a unit's
 * gathered parameters, its packed gradients, and what the communication
 * stream itself writes (the casts of the shards, the updates' tokens,
 * clipping's scaled shards and all_reduce) or reads (all_reduce's input).
 * They get a pool of their own after the rest of the arena, so that no
 * compute kernel reuses their bytes while the communication stream may
 * still read or write them; and a pooled block is reused only after the
 * next pooled values have died too (double buffering), so that a unit's
 * gradients need not wait for the previous unit's reduce-scatter. */
static bool pooled(const mlc_program *p, const mlc_func *f, const uint32_t *users, uint32_t i) {
  const mlc_node *n = &f->nodes[i];
  int user = users[i] < f->n ? f->nodes[users[i]].op : MLC_OP_COUNT; /* its one user's op, if one */
  return n->op == MLC_OP_ALL_GATHER || n->op == MLC_OP_ALL_REDUCE || mlc_node_sharded(p, f, n) ||
         (n->op == MLC_OP_CONCAT && user == MLC_OP_REDUCE_SCATTER) || user == MLC_OP_ALL_REDUCE;
}

static int64_t view_bytes(const mlc_node *n) {
  return n->op == MLC_OP_VIEW ? n->a.start * mlc_dtype_size(n->type.dtype) : 0;
}

/* The input whose bytes node i may write over (see above), or UINT32_MAX. */
static uint32_t in_place(const mlc_target *target, const mlc_func *f, uint32_t i, const uint32_t *root,
                         const uint32_t *last, const bool *inpool) {
  const mlc_node *n = &f->nodes[i];
  if (!target || !target->ce_grad_in_place || n->op != MLC_OP_CROSS_ENTROPY_GRAD) return UINT32_MAX;
  uint32_t x = n->in[1];
  const mlc_node *xn = &f->nodes[x];
  bool ok = root[x] == x && last[x] == i && !inpool[x] && xn->op != MLC_OP_INPUT && xn->op != MLC_OP_CONST &&
            xn->op != MLC_OP_PARAM && mlc_type_eq(&xn->type, &n->type);
  return ok ? x : UINT32_MAX;
}

/* The pieces of FSDP's gradient concats that memplan places inside them
 * (see the top of the file): host[r] is the concat whose bytes root r is
 * placed in (NONE: its own), at byte host_off[r]; first[c] is the first
 * such piece of concat c (NONE: c is placed as any value).  Only a concat
 * along axis 0, the reduce-scatter's input and not the caller's, whose
 * pieces all qualify. */
static void host_pieces(const mlc_func *f, const uint32_t *root, const uint32_t *last, const uint32_t *users,
                        const bool *inpool, const bool *want, uint32_t *host, int64_t *host_off, uint32_t *first) {
  uint32_t n = f->n;
  for (uint32_t i = 0; i < n; i++) host[i] = first[i] = UINT32_MAX;
  for (uint32_t c = 0; c < n; c++) {
    const mlc_node *cn = &f->nodes[c];
    if (!want || !want[c] || cn->op != MLC_OP_CONCAT || cn->a.axis != 0 || !cn->nin || users[c] >= n ||
        f->nodes[users[c]].op != MLC_OP_REDUCE_SCATTER || last[c] == UINT32_MAX || !inpool[c])
      continue;
    int64_t at = 0;
    uint32_t k = 0, lo = c;
    for (; k < cn->nin; k++) {
      uint32_t x = cn->in[k], r = root[x];
      const mlc_node *rn = &f->nodes[r], *xn = &f->nodes[x];
      int64_t bytes = (int64_t)mlc_type_numel(&xn->type) * mlc_dtype_size(xn->type.dtype);
      bool ok = rn->op != MLC_OP_PARAM && rn->op != MLC_OP_INPUT && rn->op != MLC_OP_CONST && rn->op != MLC_OP_CONCAT &&
                rn->op != MLC_OP_CROSS_ENTROPY_GRAD && last[r] == c && !inpool[r] && host[r] == UINT32_MAX &&
                at % ALIGN == 0 && bytes == (int64_t)mlc_type_numel(&rn->type) * mlc_dtype_size(rn->type.dtype);
      if (!ok) break;
      host[r] = c, host_off[r] = at;
      at += bytes;
      if (r < lo) lo = r;
    }
    if (k < cn->nin) { /* not all: none */
      while (k-- > 0) host[root[cn->in[k]]] = UINT32_MAX;
      continue;
    }
    first[c] = lo;
  }
}

/* A value placed by size (by_size, pool_by_size), busy over the nodes
 * [from, to]; a concat packed in place (packed) also keeps off a value the
 * communication stream last used, from its death (dies) to the next
 * reduce-scatter (hot_to; 0: not such a value). */
typedef struct {
  uint32_t node, from, to, dies, hot_to;
  bool packed;
  int64_t size, off;
} sized;

static bool meets(const sized *x, const sized *y) {
  return !(y->from > x->to || x->from > y->to) || (x->packed && y->hot_to && y->dies < x->from && x->from < y->hot_to) ||
         (y->packed && x->hot_to && x->dies < y->from && y->from < x->hot_to);
}

/* Places it[0, m) by size, the largest first (then in order: insertion,
 * few distinct sizes), each at the lowest offset free of the placed ones
 * it meets; returns the end, or limit as soon as the end reaches it (no
 * better, the offsets then partly set). */
static int64_t place_by_size(mlc_arena *a, sized *it, uint32_t m, int64_t limit) {
  uint32_t *ord = mlc_arena_alloc(a, (m + 1) * sizeof *ord), *done = mlc_arena_alloc(a, (m + 1) * sizeof *done);
  block *busy = mlc_arena_alloc(a, (m + 1) * sizeof *busy);
  for (uint32_t k = 0; k < m; k++) ord[k] = k;
  for (uint32_t k = 1; k < m; k++) {
    uint32_t x = ord[k], j = k;
    while (j > 0 && (it[ord[j - 1]].size < it[x].size || (it[ord[j - 1]].size == it[x].size && ord[j - 1] > x))) ord[j] = ord[j - 1], j--;
    ord[j] = x;
  }
  int64_t end = 0;
  uint32_t ndone = 0;
  for (uint32_t k = 0; k < m; k++) {
    sized *x = &it[ord[k]];
    uint32_t nb = 0;
    for (uint32_t d = 0; d < ndone; d++) { /* the placed ones it meets, by offset */
      const sized *y = &it[done[d]];
      if (!meets(x, y)) continue;
      uint32_t j = nb++;
      while (j > 0 && busy[j - 1].off > y->off) busy[j] = busy[j - 1], j--;
      busy[j] = (block){y->off, y->size};
    }
    int64_t off = 0;
    for (uint32_t j = 0; j < nb && busy[j].off < off + x->size; j++)
      if (busy[j].off + busy[j].size > off) off = busy[j].off + busy[j].size;
    x->off = off;
    if (off + x->size > end) end = off + x->size;
    if (end >= limit) return limit;
    done[ndone++] = ord[k];
  }
  return end;
}

/* Under a memory budget (passes/recompute.c), a second placement of the
 * values outside the pool, kept where its arena is smaller: the largest
 * value first, each at the lowest offset free for its whole life.  The walk
 * in order above places a value where the values of the forward have left
 * gaps, so that the values kept for the backward lie scattered and a large
 * one at the head of the backward (the logits) may find no gap that holds
 * it; placed by size, the large ones are placed first.  Lives are as the
 * walk has them: a value is alive from its node (inputs and constants from
 * the start) to its last use, both included, and one whose bytes a node
 * takes over lives on as that node.  Returns the arena's size (the walk's,
 * `top`, if that is the smaller). */
static int64_t by_size(mlc_program *p, mlc_func *f, const uint32_t *root, const uint32_t *last, const bool *inpool,
                       const uint32_t *over_of, int64_t top) {
  uint32_t n = f->n, m = 0;
  sized *it = mlc_arena_alloc(p->arena, (n + 1) * sizeof *it);
  uint32_t *at = mlc_arena_alloc(p->arena, (n + 1) * sizeof *at); /* the item of a root */
  for (uint32_t i = 0; i < n; i++) {
    const mlc_node *nd = &f->nodes[i];
    at[i] = UINT32_MAX;
    if (nd->op == MLC_OP_PARAM || root[i] != i || inpool[i]) continue;
    uint32_t to = last[i] == UINT32_MAX ? n : last[i];
    if (over_of[i] != UINT32_MAX) { /* lives on in the item of the value it took over */
      sized *o = &it[at[over_of[i]]];
      if (to > o->to) o->to = to;
      at[i] = at[over_of[i]];
      continue;
    }
    uint32_t from = nd->op == MLC_OP_CONST || nd->op == MLC_OP_INPUT ? 0 : i;
    it[m] = (sized){.node = i, .from = from, .to = to,
                    .size = align_up((int64_t)mlc_type_numel(&nd->type) * mlc_dtype_size(nd->type.dtype))};
    at[i] = m++;
  }
  int64_t end = place_by_size(p->arena, it, m, top);
  if (end >= top) return top; /* no better */
  for (uint32_t i = 0; i < n; i++) {
    const mlc_node *nd = &f->nodes[i];
    if (nd->op == MLC_OP_PARAM || inpool[i]) continue;
    if (root[i] != i) f->offset[i] = f->offset[nd->in[0]] + view_bytes(nd);
    else f->offset[i] = it[at[i]].off;
  }
  return end;
}

/* The pool placed again by size, kept where it is smaller than the walk's
 * (ptop): the walk reuses a pooled block only a generation after its value
 * dies (see pooled()), and in time order blocks of different sizes leave
 * gaps (the full MiniLLM's pool: 1.04 GB for 0.73 GB ever busy at once).
 * Each pooled value (a concat in place from its first piece) is busy from
 * its node to the node where its block would be released, the next node at
 * which some pooled value dies; a concat placed in place also keeps off the
 * bytes the walk keeps it off (a value the communication stream last used,
 * from its death to the next reduce-scatter).  The largest first, each at
 * the lowest offset free of the placed ones it meets.  Returns the pool's
 * size. */
static int64_t pool_by_size(mlc_program *p, mlc_func *f, const uint32_t *root, const uint32_t *last, const bool *inpool,
                            const uint32_t *host, const int64_t *host_off, const uint32_t *first, int64_t ptop) {
  uint32_t n = f->n, m = 0;
  sized *it = mlc_arena_alloc(p->arena, (n + 1) * sizeof *it);
  uint32_t *event = mlc_arena_alloc(p->arena, (n + 2) * sizeof *event), *rs = mlc_arena_alloc(p->arena, (n + 2) * sizeof *rs);
  bool *pdeath = mlc_arena_alloc(p->arena, (n + 1) * sizeof *pdeath);
  memset(pdeath, 0, (n + 1) * sizeof *pdeath);
  for (uint32_t i = 0; i < n; i++)
    if (root[i] == i && inpool[i] && host[i] == UINT32_MAX && f->nodes[i].op != MLC_OP_PARAM && last[i] < n) pdeath[last[i]] = true;
  event[n] = rs[n] = event[n + 1] = rs[n + 1] = n; /* event[x]: the first pooled death at or after x; rs[x]: reduce-scatter */
  for (uint32_t x = n; x-- > 0;) {
    event[x] = pdeath[x] ? x : event[x + 1];
    rs[x] = f->nodes[x].op == MLC_OP_REDUCE_SCATTER ? x : rs[x + 1];
  }
  for (uint32_t i = 0; i < n; i++) {
    const mlc_node *nd = &f->nodes[i];
    if (root[i] != i || !inpool[i] || host[i] != UINT32_MAX || nd->op == MLC_OP_PARAM) continue;
    uint32_t dies = last[i] < n ? last[i] : n, hot_to = 0;
    if (dies < n) {
      const mlc_node *u = &f->nodes[dies];
      if ((mlc_ops[u->op].flags & MLC_F_COLL) || mlc_node_sharded(p, f, u)) hot_to = rs[dies + 1];
    }
    it[m++] = (sized){.node = i, .from = first[i] != UINT32_MAX ? first[i] : i, .to = dies < n ? event[dies + 1] : n,
                      .dies = dies, .hot_to = hot_to, .packed = first[i] != UINT32_MAX,
                      .size = align_up((int64_t)mlc_type_numel(&nd->type) * mlc_dtype_size(nd->type.dtype))};
  }
  int64_t end = place_by_size(p->arena, it, m, ptop);
  if (end >= ptop) return ptop; /* no better */
  for (uint32_t k = 0; k < m; k++) f->offset[it[k].node] = it[k].off;
  for (uint32_t i = 0; i < n; i++) { /* views and pieces follow their roots and concats */
    const mlc_node *nd = &f->nodes[i];
    if (!inpool[i] || nd->op == MLC_OP_PARAM) continue;
    if (root[i] != i) f->offset[i] = f->offset[nd->in[0]] + view_bytes(nd);
    else if (host[i] != UINT32_MAX) f->offset[i] = f->offset[host[i]] + host_off[i];
  }
  return end;
}

/* One placement, with the concats of want[] (NULL: none) in place where
 * they can be (first[c] then says which were); returns the arena's bytes. */
static int64_t plan_once(mlc_program *p, mlc_func *f, const mlc_target *target, const bool *want, uint32_t *first) {
  uint32_t n = f->n;
  /* root[i]: the node whose storage i uses (itself, or through reshapes). */
  uint32_t *root = mlc_arena_alloc(p->arena, (n + 1) * sizeof *root);
  uint32_t *last = mlc_arena_alloc(p->arena, (n + 1) * sizeof *last); /* per root: last use */
  for (uint32_t i = 0; i < n; i++) {
    const mlc_node *nd = &f->nodes[i];
    root[i] = aliases(nd) ? root[nd->in[0]] : i;
    last[i] = i;
    for (uint32_t k = 0; k < nd->nin; k++) last[root[nd->in[k]]] = i;
  }
  for (uint32_t i = 0; i < f->noutputs; i++) last[root[f->outputs[i].node]] = UINT32_MAX;
  for (uint32_t i = 0; i < f->inputs.n; i++) last[root[f->inputs.v[i]]] = UINT32_MAX; /* the caller's data */
  for (uint32_t i = 0; i < n; i++) /* scalars the runtime writes once, at the start */
    if (f->nodes[i].op == MLC_OP_CONST) last[i] = UINT32_MAX;

  /* dying[k]: roots whose last use is node k, as a linked list through next[]. */
  uint32_t *head = mlc_arena_alloc(p->arena, (n + 1) * sizeof *head);
  uint32_t *next = mlc_arena_alloc(p->arena, (n + 1) * sizeof *next);
  for (uint32_t i = 0; i < n; i++) head[i] = UINT32_MAX;

  f->offset = mlc_arena_alloc(p->arena, (n + 1) * sizeof *f->offset);
  blocklist fl = {mlc_arena_alloc(p->arena, (n + 2) * sizeof *fl.v), 0};
  blocklist pl = {mlc_arena_alloc(p->arena, (2 * n + 4) * sizeof *pl.v), 0}; /* the pool, offsets from its start (take() splits) */
  int64_t top = 0, ptop = 0;
  uint32_t *users = mlc_arena_alloc(p->arena, (n + 1) * sizeof *users); /* the one user; UINT32_MAX: several, - 1: none */
  bool *inpool = mlc_arena_alloc(p->arena, (n + 1) * sizeof *inpool);
  for (uint32_t i = 0; i < n; i++) users[i] = UINT32_MAX - 1;
  for (uint32_t i = 0; i < n; i++)
    for (uint32_t k = 0; k < f->nodes[i].nin; k++) {
      uint32_t *u = &users[f->nodes[i].in[k]];
      *u = *u == UINT32_MAX - 1 ? i : UINT32_MAX;
    }
  for (uint32_t i = 0; i < n; i++) inpool[i] = root[i] == i ? pooled(p, f, users, i) : inpool[root[i]];
  uint32_t *host = mlc_arena_alloc(p->arena, (n + 1) * sizeof *host);
  int64_t *host_off = mlc_arena_alloc(p->arena, (n + 1) * sizeof *host_off);
  host_pieces(f, root, last, users, inpool, want, host, host_off, first);
  for (uint32_t i = 0; i < n; i++) /* a piece lives in its concat's bytes, the pool's */
    if (host[root[i]] != UINT32_MAX) inpool[i] = inpool[host[root[i]]];
  for (uint32_t i = 0; i < n; i++) /* a piece's bytes are its concat's: freed with them */
    if (root[i] == i && last[i] != UINT32_MAX && f->nodes[i].op != MLC_OP_PARAM && host[i] == UINT32_MAX) {
      next[i] = head[last[i]];
      head[last[i]] = i;
    }
  block *pending = mlc_arena_alloc(p->arena, (n + 1) * sizeof *pending); /* pooled blocks dead, not yet free */
  uint32_t *over_of = mlc_arena_alloc(p->arena, (n + 1) * sizeof *over_of); /* the input whose bytes i took, or UINT32_MAX */
  uint32_t npending = 0;
  /* A concat placed at its first piece (host_pieces) is written by compute
   * kernels from there on, long before its own node: it takes no bytes of
   * a pooled value that the communication stream last used (a collective
   * or a sharded op: the previous unit's reduced gradient, its update)
   * since the latest reduce-scatter began, which that stream may still be
   * running, so that the compute stream does not wait for it
   * (codegen/schedule.c orders them anyway).  A gathered parameter last
   * read by the compute stream is free to take. */
  block *dead = mlc_arena_alloc(p->arena, (n + 1) * sizeof *dead), *got = mlc_arena_alloc(p->arena, (n + 1) * sizeof *got);
  uint32_t *dead_at = mlc_arena_alloc(p->arena, (n + 1) * sizeof *dead_at), ndead = 0, last_rs = 0;
  /* Constants (written once, when the session starts) and inputs (written
   * by the caller, or the runtime's step count, before the run) are not
   * written at their own node: they take their bytes before anything else
   * is placed, so no value that dies before their node can share them. */
  for (uint32_t i = 0; i < n; i++)
    if (f->nodes[i].op == MLC_OP_CONST || f->nodes[i].op == MLC_OP_INPUT)
      f->offset[i] = place(&fl, &top, align_up((int64_t)mlc_type_numel(&f->nodes[i].type) * mlc_dtype_size(f->nodes[i].type.dtype)));
  for (uint32_t i = 0; i < n; i++) {
    const mlc_node *nd = &f->nodes[i];
    uint32_t over = UINT32_MAX;
    if (nd->op == MLC_OP_REDUCE_SCATTER) last_rs = i;
    over_of[i] = UINT32_MAX;
    if (nd->op == MLC_OP_PARAM) {
      f->offset[i] = -1;
    } else if (nd->op == MLC_OP_CONST || nd->op == MLC_OP_INPUT) {
      /* placed above */
    } else if (root[i] != i) {
      f->offset[i] = f->offset[nd->in[0]] + view_bytes(nd);
    } else if (host[i] != UINT32_MAX || first[i] != UINT32_MAX) { /* a concat placed at its first piece, or a piece */
      uint32_t c = host[i] != UINT32_MAX ? host[i] : i;
      if (first[c] == i) { /* in the pool, away from what the communication stream may still be using */
        const mlc_node *cn = &f->nodes[c];
        int64_t size = align_up((int64_t)mlc_type_numel(&cn->type) * mlc_dtype_size(cn->type.dtype));
        uint32_t ngot = 0;
        for (uint32_t k = 0; k < ndead; k++)
          if (dead_at[k] >= last_rs) take(&pl, dead[k].off, dead[k].size, got, &ngot);
        f->offset[c] = place(&pl, &ptop, size);
        for (uint32_t k = 0; k < ngot; k++) release(&pl, got[k].off, got[k].size);
      }
      if (c != i) f->offset[i] = f->offset[c] + host_off[i];
    } else if ((over = in_place(target, f, i, root, last, inpool)) != UINT32_MAX) {
      f->offset[i] = f->offset[over]; /* its bytes pass to i: not freed below */
      over_of[i] = over;
    } else {
      int64_t size = align_up((int64_t)mlc_type_numel(&nd->type) * mlc_dtype_size(nd->type.dtype));
      f->offset[i] = inpool[i] ? place(&pl, &ptop, size) : place(&fl, &top, size);
    }
    /* Values whose last use was this node are free for the next one.  A
     * node's output never shares memory with its own inputs: kernels may
     * read inputs after writing parts of the output. */
    bool pool_died = false;
    for (uint32_t d = head[i]; d != UINT32_MAX && !pool_died; d = next[d]) pool_died = inpool[d];
    if (pool_died) { /* the previous generation of pooled blocks is free now */
      for (uint32_t k = 0; k < npending; k++) release(&pl, pending[k].off, pending[k].size);
      npending = 0;
    }
    for (uint32_t d = head[i]; d != UINT32_MAX; d = next[d]) {
      if (d == over) continue;
      const mlc_node *dn = &f->nodes[d];
      int64_t size = align_up((int64_t)mlc_type_numel(&dn->type) * mlc_dtype_size(dn->type.dtype));
      if (inpool[d]) {
        pending[npending++] = (block){f->offset[d], size};
        const mlc_node *u = &f->nodes[i]; /* its last user: on the communication stream? */
        if ((mlc_ops[u->op].flags & MLC_F_COLL) || mlc_node_sharded(p, f, u)) dead[ndead] = pending[npending - 1], dead_at[ndead++] = i;
      }
      else release(&fl, f->offset[d], size);
    }
  }
  if (p->opts.memory_budget > 0) top = by_size(p, f, root, last, inpool, over_of, top);
  ptop = pool_by_size(p, f, root, last, inpool, host, host_off, first, ptop);
  /* The pool goes after the rest. */
  for (uint32_t i = 0; i < n; i++)
    if (inpool[i] && f->nodes[i].op != MLC_OP_PARAM) f->offset[i] += top;
  f->arena_bytes = top + ptop;
  return f->arena_bytes;
}

/* The concats placed in place are chosen one at a time, each kept where the
 * arena does not grow: the pool is an address range of its own, so a
 * piece moved there from the arena's other values costs its bytes where
 * the pool peaks but saves nothing where the rest does not (the head's
 * gradient, computed first in the backward and packed with the
 * embedding's, computed last, lives in the pool through the whole backward). */
void mlc_memplan_func(mlc_program *p, mlc_func *f, const mlc_target *target) {
  uint32_t n = f->n, *first = mlc_arena_alloc(p->arena, (n + 1) * sizeof *first);
  bool *want = mlc_arena_alloc(p->arena, (n + 1) * sizeof *want), any = false;
  for (uint32_t i = 0; i < n; i++) want[i] = true;
  plan_once(p, f, target, want, first); /* which concats can be */
  for (uint32_t i = 0; i < n; i++) any |= want[i] = first[i] != UINT32_MAX;
  if (!any) return;
  bool *on = mlc_arena_alloc(p->arena, (n + 1) * sizeof *on);
  memset(on, 0, (n + 1) * sizeof *on);
  int64_t best = plan_once(p, f, target, on, first);
  bool last_kept = true;
  for (uint32_t c = 0; c < n; c++) {
    if (!want[c]) continue;
    on[c] = true;
    int64_t bytes = plan_once(p, f, target, on, first);
    last_kept = bytes <= best + best / 1000; /* not the alignment of a block more or less */
    if (last_kept) best = bytes < best ? bytes : best;
    else on[c] = false;
  }
  if (!last_kept) plan_once(p, f, target, on, first);
}

bool mlc_pass_memplan(mlc_pass_ctx *c) {
  for (uint32_t k = 0; k < c->p->nfuncs; k++) mlc_memplan_func(c->p, &c->p->funcs[k], c->target);
  return true;
}
