/* The fsdp pass and the schedule on the small MiniLLM (cuda-nccl's
 * pipeline, no GPU needed): which stream each step gets, and that no step
 * can run before what it depends on.
 *
 * The check is independent of codegen/schedule.c's search: it replays the
 * two in-order streams with the waits the schedule gave and asks, for every
 * pair of steps on different streams that touch the same bytes (one of them
 * writing), whether the later one is ordered after the earlier: it waited
 * for that step or a later one of that stream, directly or through a chain
 * of waits.  Bytes come from memplan's offsets, read here from the IR. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "codegen/schedule.h"
#include "frontend/frontend.h"
#include "passes/passes.h"

static mlc_arena arena;
static mlc_program prog;
static const mlc_func *train;

static int setup(void **state) {
  (void)state;
  mlc_arena_init(&arena);
  mlc_diag diag;
  mlc_diag_init(&diag, stderr);
  mlc_program_init(&prog, &arena);
  FILE *f = fopen(MLC_SOURCE_DIR "/examples/minillm.mdl", "rb");
  if (!f) return -1;
  static char src[8192];
  size_t len = fread(src, 1, sizeof src - 1, f);
  fclose(f);
  mlc_define defs[6] = {{"vocab", "512"}, {"dim", "128"}, {"layers", "3"}, {"heads", "4"}, {"batch", "2"}, {"seq", "64"}};
  mlc_lower_options lo = {defs, 6, NULL, 0, false, 0, false};
  mlc_pipeline_options po = {.target = "cuda-nccl", .fsdp = true};
  if (!mlc_frontend_run(&prog, &diag, "minillm.mdl", src, len, &lo, NULL) || !mlc_pipeline_run(&prog, &diag, &po)) return -1;
  for (uint32_t k = 0; k < prog.nfuncs; k++)
    if (!strcmp(prog.funcs[k].name, "train")) train = &prog.funcs[k];
  return train ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  mlc_arena_free(&arena);
  return 0;
}

/* A node that has a kernel: not a leaf or a view, nor a concat whose pieces
 * memplan placed inside it (codegen emits none for those). */
static bool is_step(const mlc_func *f, uint32_t i) {
  return !(mlc_ops[f->nodes[i].op].flags & (MLC_F_LEAF | MLC_F_VIEW)) && !mlc_node_in_place(f, i);
}

typedef struct {
  int64_t lo, hi;
} span;

/* The bytes a value occupies: its own, except a reduce-scatter's rank slice,
 * which may be anywhere in its input; parameters apart from the arena. */
static span bytes_of(const mlc_func *f, uint32_t v) {
  const mlc_node *n = &f->nodes[v];
  if (n->op == MLC_OP_REDUCE_SCATTER) return bytes_of(f, n->in[0]);
  uint32_t r = v;
  while (f->nodes[r].op == MLC_OP_RESHAPE) r = f->nodes[r].in[0];
  int64_t size = mlc_type_numel(&n->type) * mlc_dtype_size(n->type.dtype);
  if (f->nodes[r].op == MLC_OP_PARAM) {
    int64_t at = ((int64_t)1 << 60) + (int64_t)f->nodes[r].a.param * ((int64_t)1 << 40);
    return (span){at, at + size};
  }
  return (span){f->offset[v], f->offset[v] + size};
}

static bool meet(span a, span b) { return a.lo < b.hi && b.lo < a.hi; }

/* Does step node j write bytes that i reads or writes, or read bytes i writes? */
static bool hazard(const mlc_func *f, uint32_t i, uint32_t j) {
  span wi[4], wj[4];
  uint32_t nwi = 0, nwj = 0;
  const mlc_node *a = &f->nodes[i], *b = &f->nodes[j];
  wi[nwi++] = bytes_of(f, i);
  wj[nwj++] = bytes_of(f, j);
  /* AdamW also writes its parameter and moments (inputs 0, 2 and 3) in place. */
  if (a->op == MLC_OP_ADAMW) for (int k = 0; k < 4; k++) if (k != 1) wi[nwi++] = bytes_of(f, a->in[k]);
  if (b->op == MLC_OP_ADAMW) for (int k = 0; k < 4; k++) if (k != 1) wj[nwj++] = bytes_of(f, b->in[k]);
  for (uint32_t x = 0; x < nwj; x++) {
    for (uint32_t k = 0; k < a->nin; k++) if (meet(wj[x], bytes_of(f, a->in[k]))) return true;
    for (uint32_t y = 0; y < nwi; y++) if (meet(wj[x], wi[y])) return true;
  }
  for (uint32_t k = 0; k < b->nin; k++)
    for (uint32_t y = 0; y < nwi; y++) if (meet(bytes_of(f, b->in[k]), wi[y])) return true;
  return false;
}

static void streams_and_order(void **state) {
  (void)state;
  const mlc_func *f = train;
  uint32_t n = f->n;
  uint32_t *kid = calloc(n + 1, sizeof *kid), *node_of = calloc(n + 1, sizeof *node_of), nsteps = 0;
  for (uint32_t i = 0; i < n; i++) {
    kid[i] = is_step(f, i) ? 0 : UINT32_MAX;
    if (kid[i] != UINT32_MAX) node_of[nsteps++] = i;
  }
  mlc_sched sc;
  mlc_schedule(&prog, f, kid, &sc);
  /* Streams: the collectives and the shards' casts and updates communicate. */
  uint32_t ngather = 0, nrs = 0, nwait = 0;
  for (uint32_t s = 0; s < nsteps; s++) {
    const mlc_node *nd = &f->nodes[node_of[s]];
    bool comm = (mlc_ops[nd->op].flags & MLC_F_COLL) || mlc_node_sharded(&prog, f, nd);
    assert_int_equal(sc.stream[node_of[s]], comm ? 1 : 0);
    assert_int_equal(sc.step_of[node_of[s]], s);
    ngather += nd->op == MLC_OP_ALL_GATHER;
    nrs += nd->op == MLC_OP_REDUCE_SCATTER;
    nwait += sc.wait[node_of[s]] != UINT32_MAX;
    if (sc.wait[node_of[s]] != UINT32_MAX) { /* waits point back, to the other stream */
      assert_true(sc.wait[node_of[s]] < s);
      assert_int_not_equal(sc.stream[node_of[sc.wait[node_of[s]]]], sc.stream[node_of[s]]);
    }
  }
  assert_int_equal(ngather, 2 * 4); /* root and 3 blocks, forward and backward */
  assert_int_equal(nrs, 4);
  assert_true(nwait > 0 && nwait < nsteps / 2);
  /* done[s][t]: the last step of stream t known finished when step s starts. */
  int64_t (*done)[2] = calloc(nsteps + 1, sizeof *done);
  int64_t last[2] = {-1, -1}; /* per stream: its latest step so far */
  for (uint32_t s = 0; s < nsteps; s++) {
    uint32_t st = sc.stream[node_of[s]];
    int64_t d[2] = {-1, -1};
    if (last[st] >= 0) { d[0] = done[last[st]][0]; d[1] = done[last[st]][1]; }
    d[st] = (int64_t)s - 1; /* in order on its own stream (s - 1 is at most the stream's previous step) */
    uint32_t w = sc.wait[node_of[s]];
    if (w != UINT32_MAX) {
      uint32_t ws = sc.stream[node_of[w]];
      if ((int64_t)w > d[ws]) d[ws] = w;
      if (done[w][1 - ws] > d[1 - ws]) d[1 - ws] = done[w][1 - ws];
    }
    done[s][0] = d[0];
    done[s][1] = d[1];
    last[st] = s;
    for (uint32_t t = 0; t < s; t++) {
      if (sc.stream[node_of[t]] == st || !hazard(f, node_of[s], node_of[t])) continue;
      if ((int64_t)t > d[sc.stream[node_of[t]]])
        fail_msg("step %u (%s %%%u, stream %u) may run before step %u (%s %%%u), which touches its bytes", s,
                 mlc_ops[f->nodes[node_of[s]].op].name, node_of[s], st, t, mlc_ops[f->nodes[node_of[t]].op].name, node_of[t]);
    }
  }
  free(done);
  free(kid);
  free(node_of);
}

/* The prefetch: the forward gather of each block after the first is issued
 * before the previous unit's compute, not at its own first use. */
static void gathers_are_prefetched(void **state) {
  (void)state;
  const mlc_func *f = train;
  uint32_t gathers = 0, prefetched = 0;
  for (uint32_t i = 0; i < f->n; i++) {
    if (f->nodes[i].op != MLC_OP_ALL_GATHER) continue;
    gathers++;
    /* compute steps between the gather and the first step that reads a view of it */
    uint32_t between = 0, first = UINT32_MAX;
    for (uint32_t j = i + 1; j < f->n && first == UINT32_MAX; j++) {
      const mlc_node *m = &f->nodes[j];
      for (uint32_t k = 0; k < m->nin && first == UINT32_MAX; k++)
        if (f->nodes[m->in[k]].op == MLC_OP_VIEW && f->nodes[m->in[k]].in[0] == i) first = j;
      if (first == UINT32_MAX && is_step(f, j) && !(mlc_ops[m->op].flags & MLC_F_COLL) && !mlc_node_sharded(&prog, f, m)) between++;
    }
    prefetched += between > 0;
  }
  assert_int_equal(gathers, 8);
  assert_true(prefetched >= 4); /* in each direction, every unit but the first one gathered */
}

/* FSDP's gradient packs that memplan placed in place (passes/memplan.c):
 * there are some, they have no step, and the kernels that write their
 * pieces wait for no collective but a gather (never for a reduce-scatter
 * or an update still running on the communication stream). */
static void packs_in_place(void **state) {
  (void)state;
  const mlc_func *f = train;
  uint32_t n = f->n, *kid = calloc(n + 1, sizeof *kid), packs = 0, in_place = 0, pieces = 0;
  for (uint32_t i = 0; i < n; i++) kid[i] = is_step(f, i) ? 0 : UINT32_MAX;
  mlc_sched sc;
  mlc_schedule(&prog, f, kid, &sc);
  uint32_t *node_of = calloc(n + 1, sizeof *node_of);
  for (uint32_t i = 0; i < n; i++)
    if (kid[i] != UINT32_MAX) node_of[sc.step_of[i]] = i;
  for (uint32_t c = 0; c < n; c++) {
    const mlc_node *cn = &f->nodes[c];
    bool packs_rs = false;
    for (uint32_t j = c + 1; j < n && !packs_rs; j++) packs_rs = f->nodes[j].op == MLC_OP_REDUCE_SCATTER && f->nodes[j].in[0] == c;
    if (cn->op != MLC_OP_CONCAT || !packs_rs) continue;
    packs++;
    if (!mlc_node_in_place(f, c)) continue;
    in_place++;
    assert_int_equal(kid[c], UINT32_MAX);
    for (uint32_t k = 0; k < cn->nin; k++) {
      uint32_t r = mlc_memplan_root(f, cn->in[k]);
      assert_int_not_equal(kid[r], UINT32_MAX);
      assert_int_equal(sc.stream[r], 0);
      pieces++;
      if (sc.wait[r] != UINT32_MAX && f->nodes[node_of[sc.wait[r]]].op != MLC_OP_ALL_GATHER)
        fail_msg("piece %%%u (%s) of %%%u waits for %%%u (%s)", r, mlc_ops[f->nodes[r].op].name, c, node_of[sc.wait[r]],
                 mlc_ops[f->nodes[node_of[sc.wait[r]]].op].name);
    }
  }
  print_message("%u of %u gradient packs in place, %u pieces\n", in_place, packs, pieces);
  assert_int_equal(packs, 4);
  assert_true(in_place >= 1);
  free(kid);
  free(node_of);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(streams_and_order),
    cmocka_unit_test(gathers_are_prefetched),
    cmocka_unit_test(packs_in_place),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
