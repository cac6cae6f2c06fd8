/* Status values (see status.h).
 *
 * An error status is one heap block: the struct followed by its message, so
 * making and freeing one is a single malloc and a single free.
 */
#include "runtime/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct mlc_status_t {
  mlc_status_code_t code;
  const char *message; /* points just past the struct, or to a literal */
};

/* Returned when the heap cannot even hold a status.  It is const and never
 * freed; mlc_status_free and mlc_status_annotate recognise it by address. */
static const struct mlc_status_t mlc_status_oom_ = {
    MLC_OUT_OF_MEMORY, "out of memory (while allocating an error status)"};

static mlc_status mlc_status_oom(void) {
  /* Casting away const is safe: nothing ever writes through a status. */
  return (mlc_status)&mlc_status_oom_;
}

/* Allocates a status whose message is the formatted text, then `sep` and
 * `tail` (both NULL for none): annotation puts the old message in `tail`. */
static mlc_status mlc_status_vmake(mlc_status_code_t code, const char *sep,
                                   const char *tail, const char *fmt,
                                   va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (n < 0)
    n = 0; /* an encoding error in the caller's format: keep the code at least */
  size_t seplen = sep ? strlen(sep) : 0, taillen = tail ? strlen(tail) : 0;
  struct mlc_status_t *st = malloc(sizeof *st + (size_t)n + seplen + taillen + 1);
  if (!st)
    return mlc_status_oom();
  char *msg = (char *)(st + 1);
  msg[0] = '\0';
  if (n > 0)
    vsnprintf(msg, (size_t)n + 1, fmt, ap);
  if (seplen)
    memcpy(msg + n, sep, seplen);
  if (taillen)
    memcpy(msg + n + seplen, tail, taillen);
  msg[(size_t)n + seplen + taillen] = '\0';
  st->code = code;
  st->message = msg;
  return st;
}

mlc_status mlc_status_make(mlc_status_code_t code, const char *fmt, ...) {
  if (code == MLC_OK)
    return NULL;
  va_list ap;
  va_start(ap, fmt);
  mlc_status st = mlc_status_vmake(code, NULL, NULL, fmt, ap);
  va_end(ap);
  return st;
}

mlc_status mlc_status_annotate(mlc_status st, const char *fmt, ...) {
  if (!st || st == mlc_status_oom())
    return st;
  va_list ap;
  va_start(ap, fmt);
  mlc_status out = mlc_status_vmake(st->code, ": ", st->message, fmt, ap);
  va_end(ap);
  if (out == mlc_status_oom())
    return st;
  mlc_status_free(st);
  return out;
}

mlc_status_code_t mlc_status_code(mlc_status st) {
  return st ? st->code : MLC_OK;
}

const char *mlc_status_message(mlc_status st) {
  return st ? st->message : "OK";
}

const char *mlc_status_code_name(mlc_status_code_t code) {
  switch (code) {
  case MLC_OK: return "OK";
  case MLC_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
  case MLC_NOT_FOUND: return "NOT_FOUND";
  case MLC_OUT_OF_MEMORY: return "OUT_OF_MEMORY";
  case MLC_DATA_LOSS: return "DATA_LOSS";
  case MLC_IO: return "IO";
  case MLC_UNIMPLEMENTED: return "UNIMPLEMENTED";
  case MLC_INTERNAL: return "INTERNAL";
  case MLC_STATUS_CODE_COUNT: break;
  }
  return "UNKNOWN";
}

void mlc_status_free(mlc_status st) {
  if (st && st != mlc_status_oom())
    free(st);
}
