/* Allocators (see alloc.h): the default heap allocator, the checked helpers
 * every runtime module calls, and the fault-injecting test allocator.
 */
#include "runtime/alloc.h"

#include <stdint.h>
#include <stdlib.h>

static void *mlc_allocator_heap_alloc(void *ctx, size_t n) {
  (void)ctx;
  return malloc(n);
}

static void mlc_allocator_heap_free(void *ctx, void *p) {
  (void)ctx;
  free(p);
}

mlc_allocator mlc_allocator_default(void) {
  return (mlc_allocator){mlc_allocator_heap_alloc, mlc_allocator_heap_free, NULL};
}

void *mlc_allocator_alloc(mlc_allocator a, size_t n) {
  return a.alloc(a.ctx, n ? n : 1);
}

void *mlc_allocator_alloc_array(mlc_allocator a, size_t count, size_t size) {
  if (size && count > SIZE_MAX / size)
    return NULL;
  return mlc_allocator_alloc(a, count * size);
}

void mlc_allocator_free(mlc_allocator a, void *p) {
  if (p)
    a.free(a.ctx, p);
}

static void *mlc_allocator_failing_alloc(void *ctx, size_t n) {
  mlc_failing_allocator *fa = ctx;
  if (++fa->calls == fa->fail_at) {
    fa->failed++;
    return NULL;
  }
  void *p = mlc_allocator_alloc(fa->base, n);
  if (p)
    fa->live++;
  return p;
}

static void mlc_allocator_failing_free(void *ctx, void *p) {
  mlc_failing_allocator *fa = ctx;
  fa->live--;
  mlc_allocator_free(fa->base, p);
}

mlc_allocator mlc_allocator_failing(mlc_failing_allocator *state,
                                    mlc_allocator base, size_t fail_at) {
  *state = (mlc_failing_allocator){.base = base, .fail_at = fail_at};
  return (mlc_allocator){mlc_allocator_failing_alloc, mlc_allocator_failing_free,
                         state};
}
