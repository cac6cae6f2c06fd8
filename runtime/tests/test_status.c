/* Tests for runtime/status.c: codes, messages, annotation, and the
 * preallocated out-of-memory status.
 *
 * This program is linked with -Wl,--wrap=malloc so that a test can make the
 * library's malloc fail; fail_mallocs below is the test's own switch.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "runtime/status.h"

/* How many upcoming mallocs from the library should fail. */
static int fail_mallocs;

void *__real_malloc(size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_malloc(size_t n) {
  if (fail_mallocs > 0) {
    fail_mallocs--;
    return NULL;
  }
  return __real_malloc(n);
}

static void test_ok_is_null(void **state) {
  (void)state;
  mlc_status st = mlc_status_make(MLC_OK, "ignored %d", 1);
  assert_null(st);
  assert_int_equal(mlc_status_code(NULL), MLC_OK);
  assert_string_equal(mlc_status_message(NULL), "OK");
  mlc_status_free(NULL);
}

static void test_make_formats_message(void **state) {
  (void)state;
  mlc_status st = mlc_status_make(MLC_NOT_FOUND, "tensor '%s' (%d of %zu)", "w", 3, (size_t)7);
  assert_non_null(st);
  assert_int_equal(mlc_status_code(st), MLC_NOT_FOUND);
  assert_string_equal(mlc_status_message(st), "tensor 'w' (3 of 7)");
  mlc_status_free(st);

  st = mlc_status_make(MLC_IO, "%s", "");
  assert_int_equal(mlc_status_code(st), MLC_IO);
  assert_string_equal(mlc_status_message(st), "");
  mlc_status_free(st);
}

static void test_long_message(void **state) {
  (void)state;
  char big[5000];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  mlc_status st = mlc_status_make(MLC_DATA_LOSS, "<%s>", big);
  assert_int_equal(strlen(mlc_status_message(st)), sizeof big + 1);
  st = mlc_status_annotate(st, "ctx");
  assert_int_equal(strlen(mlc_status_message(st)), sizeof big + 6);
  assert_memory_equal(mlc_status_message(st), "ctx: <xxx", 9);
  mlc_status_free(st);
}

static void test_annotate_prefixes(void **state) {
  (void)state;
  mlc_status st = mlc_status_make(MLC_DATA_LOSS, "bad offsets");
  st = mlc_status_annotate(st, "loading %s", "w.safetensors");
  st = mlc_status_annotate(st, "rank %d", 3);
  assert_int_equal(mlc_status_code(st), MLC_DATA_LOSS);
  assert_string_equal(mlc_status_message(st), "rank 3: loading w.safetensors: bad offsets");
  mlc_status_free(st);
  assert_null(mlc_status_annotate(NULL, "nothing to annotate"));
}

static mlc_status fails_with(mlc_status_code_t code) {
  return mlc_status_make(code, "failed with %s", mlc_status_code_name(code));
}

static int reached_after;
static mlc_status propagate(mlc_status_code_t code) {
  reached_after = 0;
  MLC_RETURN_IF_ERROR(fails_with(code));
  reached_after = 1;
  return NULL;
}

static void test_return_if_error(void **state) {
  (void)state;
  mlc_status st = propagate(MLC_INTERNAL);
  assert_int_equal(mlc_status_code(st), MLC_INTERNAL);
  assert_string_equal(mlc_status_message(st), "failed with INTERNAL");
  assert_int_equal(reached_after, 0);
  mlc_status_free(st);
  assert_null(propagate(MLC_OK));
  assert_int_equal(reached_after, 1);
}

static void test_code_names(void **state) {
  (void)state;
  const char *names[] = {"OK", "INVALID_ARGUMENT", "NOT_FOUND", "OUT_OF_MEMORY",
                         "DATA_LOSS", "IO", "UNIMPLEMENTED", "INTERNAL"};
  assert_int_equal(sizeof names / sizeof *names, MLC_STATUS_CODE_COUNT);
  for (int c = 0; c < MLC_STATUS_CODE_COUNT; c++)
    assert_string_equal(mlc_status_code_name((mlc_status_code_t)c), names[c]);
  assert_string_equal(mlc_status_code_name(MLC_STATUS_CODE_COUNT), "UNKNOWN");
}

/* When malloc fails, an error is still an error: the static OOM status. */
static void test_oom_fallback(void **state) {
  (void)state;
  fail_mallocs = 1;
  mlc_status st = mlc_status_make(MLC_NOT_FOUND, "lost message");
  assert_int_equal(fail_mallocs, 0);
  assert_non_null(st);
  assert_int_equal(mlc_status_code(st), MLC_OUT_OF_MEMORY);
  assert_non_null(strstr(mlc_status_message(st), "out of memory"));
  /* Annotating or freeing the static status must not touch it. */
  mlc_status st2 = mlc_status_annotate(st, "context");
  assert_ptr_equal(st2, st);
  mlc_status_free(st);
  mlc_status_free(st);
  mlc_status other = mlc_status_make(MLC_IO, "x");
  fail_mallocs = 1;
  assert_ptr_equal(mlc_status_make(MLC_IO, "y"), st); /* the same object each time */
  mlc_status_free(other);
}

/* If annotation cannot allocate, the original error survives unchanged. */
static void test_annotate_oom_keeps_original(void **state) {
  (void)state;
  mlc_status st = mlc_status_make(MLC_DATA_LOSS, "original");
  fail_mallocs = 1;
  mlc_status st2 = mlc_status_annotate(st, "context");
  assert_ptr_equal(st2, st);
  assert_int_equal(mlc_status_code(st2), MLC_DATA_LOSS);
  assert_string_equal(mlc_status_message(st2), "original");
  mlc_status_free(st2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ok_is_null),
      cmocka_unit_test(test_make_formats_message),
      cmocka_unit_test(test_long_message),
      cmocka_unit_test(test_annotate_prefixes),
      cmocka_unit_test(test_return_if_error),
      cmocka_unit_test(test_code_names),
      cmocka_unit_test(test_oom_fallback),
      cmocka_unit_test(test_annotate_oom_keeps_original),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
