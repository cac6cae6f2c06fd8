/* Diagnostics: user errors at file:line:col with the source line and a caret.
 *
 * Every token, AST node and IR node carries an mlc_loc, so an error found in
 * any pass (a shape mismatch found long after parsing, say) still points at
 * the user's source.  Errors are collected, not fatal: the frontend goes on
 * to report the next one, and the driver stops after the phase that failed.
 * Output goes to a FILE* chosen by the caller (stderr, or a memory stream in
 * tests and fuzzers).
 */
#ifndef MLC_DIAG_H
#define MLC_DIAG_H

#include <stdint.h>
#include <stdio.h>

typedef struct {
  uint32_t file; /* index into mlc_diag.files; 0 means "no location" */
  uint32_t line; /* 1-based */
  uint32_t col;  /* 1-based, in bytes */
} mlc_loc;

typedef struct {
  const char *name;
  const char *text; /* NUL-terminated; may contain other NULs for binary input */
  size_t len;
} mlc_source;

#define MLC_MAX_SOURCES 16
#define MLC_MAX_ERRORS 20 /* after this many, stop: the rest are usually noise */

typedef struct {
  FILE *out;
  mlc_source files[MLC_MAX_SOURCES]; /* files[0] is unused */
  uint32_t nfiles;
  int errors;
  int suppressed; /* errors not printed after MLC_MAX_ERRORS */
} mlc_diag;

void mlc_diag_init(mlc_diag *d, FILE *out);
/* Register a source buffer; returns its file index for mlc_loc. */
uint32_t mlc_diag_add_source(mlc_diag *d, const char *name, const char *text, size_t len);
void mlc_error(mlc_diag *d, mlc_loc loc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void mlc_note(mlc_diag *d, mlc_loc loc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Finish: prints "N errors" when there were several. */
void mlc_diag_summary(mlc_diag *d);

#endif
