/* Unit tests of runtime/cpu without LLVM: the thread pool (every item runs
 * exactly once, for many sizes, chunkings and back-to-back jobs, and a pool
 * whose allocations fail cleans up) and the executor (buffers, views,
 * constants, inputs, parameters and step order, with hand-written kernels
 * that follow kernel.h's ABI).
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "runtime/cpu/exec.h"
#include "runtime/cpu/threadpool.h"

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

/* ---- executor ---- */

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

static void test_exec(void) {
  mlc_arena arena;
  mlc_arena_init(&arena);
  mlc_program p;
  mlc_program_init(&p, &arena);
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

  mlc_cpu_pool *pool;
  mlc_status st = mlc_cpu_pool_create(2, mlc_allocator_default(), &pool);
  CHECK(!st);
  mlc_cpu_step steps[2] = {{add, k_add_scalar, 6, "add"}, {mul, k_mul, 6, "mul"}};

  /* A missing kernel, a kernel for a leaf, and a duplicate are refused. */
  mlc_cpu_exec *e = NULL;
  st = mlc_cpu_exec_create(&p, f, steps, 1, pool, mlc_allocator_default(), &e);
  CHECK(mlc_status_code(st) == MLC_INVALID_ARGUMENT && !e);
  mlc_status_free(st);
  mlc_cpu_step bad[3] = {steps[0], steps[1], {w, k_mul, 6, "leaf"}};
  st = mlc_cpu_exec_create(&p, f, bad, 3, pool, mlc_allocator_default(), &e);
  CHECK(mlc_status_code(st) == MLC_INVALID_ARGUMENT && !e);
  mlc_status_free(st);

  /* Every allocation failure is reported and leaks nothing. */
  for (size_t k = 1;; k++) {
    mlc_failing_allocator fa;
    mlc_allocator a = mlc_allocator_failing(&fa, mlc_allocator_default(), k);
    st = mlc_cpu_exec_create(&p, f, steps, 2, pool, a, &e);
    if (st) {
      CHECK(mlc_status_code(st) == MLC_OUT_OF_MEMORY);
      mlc_status_free(st);
    } else {
      mlc_cpu_exec_destroy(e);
    }
    CHECK(fa.live == 0);
    if (!fa.failed) break;
  }

  st = mlc_cpu_exec_create(&p, f, steps, 2, pool, mlc_allocator_default(), &e);
  CHECK(!st);
  float xin[6] = {0, 1, 2, 3, 4, 5}, win[6] = {1, 2, 3, 4, 5, 6};
  st = mlc_cpu_exec_set_input(e, "x", xin, 5 * sizeof(float));
  CHECK(mlc_status_code(st) == MLC_INVALID_ARGUMENT);
  mlc_status_free(st);
  st = mlc_cpu_exec_set_input(e, "nope", xin, sizeof xin);
  CHECK(mlc_status_code(st) == MLC_NOT_FOUND);
  mlc_status_free(st);
  CHECK(!mlc_cpu_exec_set_input(e, "x", xin, sizeof xin));
  CHECK(!mlc_cpu_exec_set_param(e, pw, win, sizeof win));
  CHECK(!mlc_cpu_exec_run(e));
  const void *out;
  const mlc_type *t;
  CHECK(!mlc_cpu_exec_output(e, "y", &out, &t));
  CHECK(t->rank == 2 && t->dim[0] == 2 && t->dim[1] == 3);
  for (int i = 0; i < 6; i++) CHECK(((const float *)out)[i] == (xin[i] + 1.5f) * win[i]);
  CHECK(mlc_cpu_exec_node_buffer(e, rs) == mlc_cpu_exec_node_buffer(e, add)); /* a view */
  CHECK(((uintptr_t)mlc_cpu_exec_node_buffer(e, mul) & 63) == 0);
  mlc_cpu_exec_destroy(e);
  mlc_cpu_pool_destroy(pool);
  mlc_arena_free(&arena);
}

int main(void) {
  test_pool_items(1);
  test_pool_items(2);
  test_pool_items(5);
  test_pool_items(0);
  test_pool_oom();
  test_exec();
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("runtime/cpu: all checks passed\n");
  return 0;
}
