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
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ir/arena.h"

/* The frontend expands each module call in place, so a mistake inside a
 * module that is used twice would be reported twice, word for word.  An
 * error already reported at the same place with the same text is dropped,
 * with its notes. */
#define SEEN_MAX 64
static struct {
  const mlc_diag *d;
  mlc_loc loc;
  uint64_t hash;
} seen[SEEN_MAX];
static unsigned nseen;
static const mlc_diag *muted; /* this diag's last error was a repeat: drop its notes */

static bool repeated(const mlc_diag *d, mlc_loc loc, const char *msg) {
  uint64_t h = 14695981039346656037u; /* FNV-1a */
  for (const char *c = msg; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211u;
  for (unsigned i = 0; i < nseen; i++)
    if (seen[i].d == d && seen[i].hash == h && seen[i].loc.file == loc.file && seen[i].loc.line == loc.line &&
        seen[i].loc.col == loc.col)
      return true;
  if (nseen < SEEN_MAX) {
    seen[nseen].d = d, seen[nseen].loc = loc, seen[nseen].hash = h;
    nseen++;
  }
  return false;
}

void mlc_diag_init(mlc_diag *d, FILE *out) {
  memset(d, 0, sizeof *d);
  d->out = out;
  d->nfiles = 1;
  nseen = 0;
  muted = NULL;
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

static void report(mlc_diag *d, mlc_loc loc, const char *kind, const char *msg) {
  if (loc.file && loc.file < d->nfiles)
    fprintf(d->out, "%s:%u:%u: %s: ", d->files[loc.file].name, loc.line, loc.col, kind);
  else
    fprintf(d->out, "mlc: %s: ", kind);
  fputs(msg, d->out);
  fputc('\n', d->out);
  print_line(d, loc);
}

void mlc_error(mlc_diag *d, mlc_loc loc, const char *fmt, ...) {
  char msg[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  muted = repeated(d, loc, msg) ? d : NULL;
  if (muted) return;
  if (++d->errors > MLC_MAX_ERRORS) { d->suppressed++; return; }
  report(d, loc, "error", msg);
}

void mlc_note(mlc_diag *d, mlc_loc loc, const char *fmt, ...) {
  if (d->errors > MLC_MAX_ERRORS || muted == d) return;
  char msg[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  report(d, loc, "note", msg);
}

void mlc_diag_summary(mlc_diag *d) {
  if (d->suppressed) fprintf(d->out, "mlc: %d more error%s not shown\n", d->suppressed, d->suppressed == 1 ? "" : "s");
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
