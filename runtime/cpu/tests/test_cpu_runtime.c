/* Unit tests of runtime/cpu without LLVM: the thread pool (every item runs
 * exactly once, for many sizes, chunkings and back-to-back jobs, and a pool
 * whose allocations fail cleans up) and the CPU device under a session
 * (a plan encoded from a small graph: arena, view, constant, input,
 * parameter and step order, with hand-written kernels that follow
 * kernel.h's ABI).  The graph and its plan come from the compiler's side
 * (ir/, passes' memplan, codegen/plan.c); the runtime sees only the plan.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/plan.h"
#include "ir/ir.h"
#include "ir/target.h"
#include "passes/passes.h"
#include "runtime/cpu/kernel.h"
#include "runtime/cpu/threadpool.h"
#include "runtime/plan.h"
#include "runtime/session.h"

static int failures;
#define CHECK(c)                                                         \
  do {                                                                   \
    if (!(c)) {                                                          \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
      failures++;                                                        \
    }                                                                    \
  } while (0)

/* ---- thread pool ---- */

typedef struct {
  atomic_int *hits;
  int64_t n;
  atomic_int bad_range;
} count_ctx;

static void count_items(void *vc, int64_t b, int64_t e) {
  count_ctx *c = vc;
  if (b < 0 || e > c->n || b >= e) atomic_fetch_add(&c->bad_range, 1);
  for (int64_t i = b; i < e && i < c->n; i++) atomic_fetch_add(&c->hits[i], 1);
}

static void test_pool_items(int threads) {
  mlc_cpu_pool *pool;
  mlc_status st = mlc_cpu_pool_create(threads, mlc_allocator_default(), &pool);
  CHECK(st == NULL);
  if (st) {
    mlc_status_free(st);
    return;
  }
  CHECK(mlc_cpu_pool_threads(pool) == (threads ? threads : mlc_cpu_pool_threads(pool)));
  static const int64_t sizes[] = {0, 1, 2, 3, 7, 64, 1000, 4097};
  static const int64_t chunks[] = {0, 1, 3, 1000};
  atomic_int *hits = calloc(4097, sizeof *hits);
  for (int rep = 0; rep < 200; rep++)
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
      for (size_t ci = 0; ci < sizeof chunks / sizeof *chunks; ci++) {
        int64_t n = sizes[si];
        for (int64_t i = 0; i < n; i++) atomic_store(&hits[i], 0);
        count_ctx c = {hits, n, 0};
        mlc_cpu_pool_parallel_for(pool, n, chunks[ci], count_items, &c);
        int ok = atomic_load(&c.bad_range) == 0;
        for (int64_t i = 0; i < n; i++) ok &= atomic_load(&hits[i]) == 1;
        CHECK(ok);
        if (!ok) goto out;
      }
out:
  free(hits);
  mlc_cpu_pool_destroy(pool);
}

static void test_pool_oom(void) {
  for (size_t k = 1;; k++) {
    mlc_failing_allocator fa;
    mlc_allocator a = mlc_allocator_failing(&fa, mlc_allocator_default(), k);
    mlc_cpu_pool *pool = NULL;
    mlc_status st = mlc_cpu_pool_create(3, a, &pool);
    if (st) {
      CHECK(mlc_status_code(st) == MLC_OUT_OF_MEMORY);
      CHECK(pool == NULL);
      mlc_status_free(st);
    } else {
      mlc_cpu_pool_destroy(pool);
    }
    CHECK(fa.live == 0);
    if (!fa.failed) break;
  }
  mlc_cpu_pool *pool = NULL;
  mlc_status st = mlc_cpu_pool_create(-1, mlc_allocator_default(), &pool);
  CHECK(mlc_status_code(st) == MLC_INVALID_ARGUMENT);
  mlc_status_free(st);
}

/* ---- the CPU device under a session ---- */

/* out[i] = a[i] + b[0]: b is a scalar (a CONST node). */
static void k_add_scalar(void **bufs, int64_t b, int64_t e) {
  const float *x = bufs[0], *s = bufs[1];
  float *y = bufs[2];
  for (int64_t i = b; i < e; i++) y[i] = x[i] + s[0];
}

/* out[i] = a[i] * w[i] */
static void k_mul(void **bufs, int64_t b, int64_t e) {
  const float *x = bufs[0], *w = bufs[1];
  float *y = bufs[2];
  for (int64_t i = b; i < e; i++) y[i] = x[i] * w[i];
}

typedef struct {
  uint32_t add, mul;
  bool lose_mul; /* the lookup does not find k_mul */
} kernels;

/* The plan's kernel names: the two computing nodes; the rest (input,
 * constant, view, parameter) take no step. */
static const char *namer(void *ctx, const mlc_func *f, uint32_t node, uint64_t *out_work) {
  const kernels *k = ctx;
  (void)f;
  *out_work = 6;
  return node == k->add ? "k_add_scalar" : node == k->mul ? "k_mul" : NULL;
}

static void *lookup(void *ctx, const char *symbol) {
  const kernels *k = ctx;
  mlc_cpu_kernel_fn fn = !strcmp(symbol, "k_add_scalar") ? k_add_scalar
                         : !strcmp(symbol, "k_mul") && !k->lose_mul ? k_mul : NULL;
  void *p;
  memcpy(&p, &fn, sizeof p);
  return p;
}

/* y = reshape(x + 1.5, [2, 3]) * w through the plan, a session and the CPU
 * device (what replaced the IR-walking executor, runtime/cpu/exec.c, which
 * linked the IR into the runtime). */
static void test_session(void) {
  mlc_arena arena;
  mlc_arena_init(&arena);
  mlc_program p;
  mlc_program_init(&p, &arena);
  p.name = "t";
  mlc_param prm = {.name = "w", .type = {.dtype = MLC_DT_F32, .rank = 2, .dim = {2, 3}}};
  uint32_t pw = mlc_program_add_param(&p, &prm);
  mlc_func *f = mlc_program_add_func(&p, "forward");
  mlc_loc loc = {0};
  mlc_attrs ax = {.name = "x"}, ac = {.f = 1.5}, ap = {.param = pw};
  uint32_t x = mlc_func_add(&p, f, MLC_OP_INPUT, NULL, 0, &ax, loc, "");
  f->nodes[x].type = (mlc_type){.dtype = MLC_DT_F32, .rank = 1, .dim = {6}};
  mlc_u32vec_push(&arena, &f->inputs, x);
  uint32_t c = mlc_func_add(&p, f, MLC_OP_CONST, NULL, 0, &ac, loc, "");
  f->nodes[c].type = (mlc_type){.dtype = MLC_DT_F32};
  uint32_t add = mlc_func_add(&p, f, MLC_OP_ADD, (uint32_t[]){x, c}, 2, NULL, loc, "");
  f->nodes[add].type = f->nodes[x].type;
  uint32_t rs = mlc_func_add(&p, f, MLC_OP_RESHAPE, (uint32_t[]){add}, 1, NULL, loc, "");
  f->nodes[rs].type = (mlc_type){.dtype = MLC_DT_F32, .rank = 2, .dim = {2, 3}};
  uint32_t w = mlc_func_add(&p, f, MLC_OP_PARAM, NULL, 0, &ap, loc, "");
  f->nodes[w].type = prm.type;
  uint32_t mul = mlc_func_add(&p, f, MLC_OP_MUL, (uint32_t[]){rs, w}, 2, NULL, loc, "");
  f->nodes[mul].type = prm.type;
  mlc_func_add_output(&p, f, "y", mul);
  mlc_memplan_func(&p, f, mlc_target_find("cpu"));
  kernels k = {add, mul, false};
  uint8_t *bytes;
  size_t n;
  mlc_plan_encode(&p, namer, &k, &bytes, &n);
  mlc_plan *plan;
  mlc_status st = mlc_plan_parse(bytes, n, mlc_allocator_default(), &plan);
  CHECK(!st);
  if (st) {
    mlc_status_free(st);
    mlc_arena_free(&arena);
    return;
  }

  /* A kernel the lookup cannot find is refused at creation. */
  mlc_session *s = NULL;
  k.lose_mul = true;
  mlc_session_options so = {.lookup = lookup, .lookup_ctx = &k, .threads = 2};
  st = mlc_session_create(plan, &so, &s);
  CHECK(mlc_status_code(st) == MLC_NOT_FOUND && !s && strstr(mlc_status_message(st), "k_mul"));
  mlc_status_free(st);
  k.lose_mul = false;

  /* Every allocation failure is reported and leaks nothing. */
  for (size_t i = 1;; i++) {
    mlc_failing_allocator fa;
    so.allocator = mlc_allocator_failing(&fa, mlc_allocator_default(), i);
    float xin[6] = {0};
    st = mlc_session_create(plan, &so, &s);
    if (!st) st = mlc_session_set_input(s, "forward", "x", xin, sizeof xin);
    if (!st) st = mlc_session_run(s, "forward");
    if (st) {
      CHECK(mlc_status_code(st) == MLC_OUT_OF_MEMORY);
      mlc_status_free(st);
    }
    mlc_session_destroy(s);
    s = NULL;
    CHECK(fa.live == 0);
    if (!fa.failed) break;
  }
  so.allocator = (mlc_allocator){0};

  st = mlc_session_create(plan, &so, &s);
  CHECK(!st);
  float xin[6] = {0, 1, 2, 3, 4, 5}, win[6] = {1, 2, 3, 4, 5, 6};
  st = mlc_session_set_input(s, "forward", "x", xin, 5 * sizeof(float));
  CHECK(mlc_status_code(st) == MLC_INVALID_ARGUMENT);
  mlc_status_free(st);
  st = mlc_session_set_input(s, "forward", "nope", xin, sizeof xin);
  CHECK(mlc_status_code(st) == MLC_NOT_FOUND);
  mlc_status_free(st);
  CHECK(!mlc_session_set_input(s, "forward", "x", xin, sizeof xin));
  float *wp = mlc_session_param_data(s, pw);
  CHECK(wp != NULL);
  if (wp) memcpy(wp, win, sizeof win);
  CHECK(!mlc_session_run(s, "forward"));
  const void *out = NULL;
  const mlc_plan_shape *shape = NULL;
  CHECK(!mlc_session_output(s, "forward", "y", &out, &shape));
  CHECK(shape && shape->rank == 2 && shape->dims[0] == 2 && shape->dims[1] == 3);
  for (int i = 0; out && i < 6; i++) CHECK(((const float *)out)[i] == (xin[i] + 1.5f) * win[i]);
  /* The same weight through mlc_session_set_param: the whole tensor or an error. */
  float w2[6] = {-1, 0.5f, 2, -3, 7, 0.25f};
  st = mlc_session_set_param(s, pw, w2, 5 * sizeof(float));
  CHECK(mlc_status_code(st) == MLC_INVALID_ARGUMENT);
  mlc_status_free(st);
  st = mlc_session_set_param(s, plan->nparams, w2, sizeof w2);
  CHECK(mlc_status_code(st) == MLC_INVALID_ARGUMENT);
  mlc_status_free(st);
  CHECK(!mlc_session_set_param(s, pw, w2, sizeof w2));
  CHECK(!mlc_session_run(s, "forward"));
  CHECK(!mlc_session_output(s, "forward", "y", &out, &shape));
  for (int i = 0; out && i < 6; i++) CHECK(((const float *)out)[i] == (xin[i] + 1.5f) * w2[i]);
  mlc_session_destroy(s);
  mlc_plan_free(plan);
  mlc_arena_free(&arena);
}

int main(void) {
  test_pool_items(1);
  test_pool_items(2);
  test_pool_items(5);
  test_pool_items(0);
  test_pool_oom();
  test_session();
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("runtime/cpu: all checks passed\n");
  return 0;
}
