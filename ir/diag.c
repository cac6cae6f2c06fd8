/* Diagnostic printing, in the style of chibicc's verror_at and of gcc:
 *
 *   model.mdl:3:11: error: unknown name 'foo'
 *       3 |   x = foo(y)
 *         |       ^~~
 *
 * The caret underlines one column; binary garbage in the source line is
 * printed as '?' so a diagnostic never writes control bytes to a terminal.
 */
#include "ir/diag.h"

#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ir/arena.h"

void mlc_diag_init(mlc_diag *d, FILE *out) {
  memset(d, 0, sizeof *d);
  d->out = out;
  d->nfiles = 1;
}

uint32_t mlc_diag_add_source(mlc_diag *d, const char *name, const char *text, size_t len) {
  if (d->nfiles >= MLC_MAX_SOURCES) MLC_ICE("too many source files");
  d->files[d->nfiles] = (mlc_source){name, text, len};
  return d->nfiles++;
}

static void print_line(mlc_diag *d, mlc_loc loc) {
  if (loc.file == 0 || loc.file >= d->nfiles) return;
  const mlc_source *s = &d->files[loc.file];
  const char *p = s->text, *end = s->text + s->len;
  for (uint32_t l = 1; l < loc.line && p < end; p++)
    if (*p == '\n') l++;
  const char *eol = p;
  while (eol < end && *eol != '\n') eol++;
  /* At most 200 columns of the line; a longer line is cut around the caret. */
  size_t off = loc.col ? loc.col - 1 : 0;
  if (off > (size_t)(eol - p)) off = (size_t)(eol - p);
  const char *at = p + off, *from = off > 160 ? at - 100 : p;
  const char *q = eol - from > 200 ? from + 200 : eol;
  fprintf(d->out, "%5u | %s", loc.line, from > p ? "..." : "");
  for (const char *c = from; c < q; c++) {
    unsigned char ch = (unsigned char)*c;
    fputc(ch == '\t' || (ch >= 32 && ch < 127) ? ch : '?', d->out);
  }
  fprintf(d->out, "%s\n      | %s", q < eol ? "..." : "", from > p ? "   " : "");
  for (const char *c = from; c < at; c++) fputc(*c == '\t' ? '\t' : ' ', d->out);
  fprintf(d->out, "^\n");
}

static void vreport(mlc_diag *d, mlc_loc loc, const char *kind, const char *fmt, va_list ap) {
  if (loc.file && loc.file < d->nfiles)
    fprintf(d->out, "%s:%u:%u: %s: ", d->files[loc.file].name, loc.line, loc.col, kind);
  else
    fprintf(d->out, "mlc: %s: ", kind);
  vfprintf(d->out, fmt, ap);
  fputc('\n', d->out);
  print_line(d, loc);
}

void mlc_error(mlc_diag *d, mlc_loc loc, const char *fmt, ...) {
  if (++d->errors > MLC_MAX_ERRORS) { d->suppressed++; return; }
  va_list ap;
  va_start(ap, fmt);
  vreport(d, loc, "error", fmt, ap);
  va_end(ap);
}

void mlc_note(mlc_diag *d, mlc_loc loc, const char *fmt, ...) {
  if (d->errors > MLC_MAX_ERRORS) return;
  va_list ap;
  va_start(ap, fmt);
  vreport(d, loc, "note", fmt, ap);
  va_end(ap);
}

void mlc_diag_summary(mlc_diag *d) {
  if (d->suppressed) fprintf(d->out, "mlc: %d more errors not shown\n", d->suppressed);
  if (d->errors > 1) fprintf(d->out, "%d errors\n", d->errors);
}

void mlc_internal_error(const char *file, int line, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "mlc: internal error at %s:%d: ", file, line);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\nThis is a bug in mlc, not in your model. Please report it.\n");
  va_end(ap);
  abort();
}
