/* Tests for runtime/alloc.c: the checked helpers and the failing allocator
 * that the other tests rely on to inject faults.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "runtime/alloc.h"

static void test_default_allocates(void **state) {
  (void)state;
  mlc_allocator a = mlc_allocator_default();
  char *p = mlc_allocator_alloc(a, 100);
  assert_non_null(p);
  memset(p, 1, 100);
  mlc_allocator_free(a, p);
  void *z = mlc_allocator_alloc(a, 0); /* 0 means 1: NULL is reserved for failure */
  assert_non_null(z);
  mlc_allocator_free(a, z);
  mlc_allocator_free(a, NULL);
}

static void test_alloc_array_overflow(void **state) {
  (void)state;
  mlc_allocator a = mlc_allocator_default();
  assert_null(mlc_allocator_alloc_array(a, SIZE_MAX / 2, 3));
  void *p = mlc_allocator_alloc_array(a, 10, 8);
  assert_non_null(p);
  mlc_allocator_free(a, p);
}

static void test_failing_fails_exactly_nth(void **state) {
  (void)state;
  mlc_failing_allocator fa;
  mlc_allocator a = mlc_allocator_failing(&fa, mlc_allocator_default(), 3);
  void *p1 = mlc_allocator_alloc(a, 8), *p2 = mlc_allocator_alloc(a, 8);
  void *p3 = mlc_allocator_alloc(a, 8), *p4 = mlc_allocator_alloc(a, 8);
  assert_non_null(p1);
  assert_non_null(p2);
  assert_null(p3);
  assert_non_null(p4); /* only the 3rd fails; later requests succeed again */
  assert_int_equal(fa.calls, 4);
  assert_int_equal(fa.failed, 1);
  assert_int_equal(fa.live, 3);
  mlc_allocator_free(a, p1);
  mlc_allocator_free(a, p2);
  mlc_allocator_free(a, p3); /* NULL: not counted */
  assert_int_equal(fa.live, 1);
  mlc_allocator_free(a, p4);
  assert_int_equal(fa.live, 0);
}

static void test_failing_zero_never_fails(void **state) {
  (void)state;
  mlc_failing_allocator fa;
  mlc_allocator a = mlc_allocator_failing(&fa, mlc_allocator_default(), 0);
  void *p[50];
  for (int i = 0; i < 50; i++)
    assert_non_null(p[i] = mlc_allocator_alloc(a, 16));
  for (int i = 0; i < 50; i++)
    mlc_allocator_free(a, p[i]);
  assert_int_equal(fa.calls, 50);
  assert_int_equal(fa.failed, 0);
  assert_int_equal(fa.live, 0);
}

/* Failing allocators stack: the outer one counts only what reaches it. */
static void test_failing_stacks(void **state) {
  (void)state;
  mlc_failing_allocator outer, inner;
  mlc_allocator base = mlc_allocator_failing(&outer, mlc_allocator_default(), 2);
  mlc_allocator a = mlc_allocator_failing(&inner, base, 1);
  assert_null(mlc_allocator_alloc(a, 4)); /* inner refuses, outer never asked */
  assert_int_equal(outer.calls, 0);
  void *p = mlc_allocator_alloc(a, 4); /* reaches outer as its 1st */
  assert_non_null(p);
  assert_null(mlc_allocator_alloc(a, 4)); /* outer's 2nd */
  assert_int_equal(inner.failed, 1);
  assert_int_equal(outer.failed, 1);
  mlc_allocator_free(a, p);
  assert_int_equal(inner.live + outer.live, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_default_allocates),
      cmocka_unit_test(test_alloc_array_overflow),
      cmocka_unit_test(test_failing_fails_exactly_nth),
      cmocka_unit_test(test_failing_zero_never_fails),
      cmocka_unit_test(test_failing_stacks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
