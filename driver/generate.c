/* mlc generate's prompt: token ids from the command line (the loop itself
 * is the runtime's mlc_generate, runtime/generate.c). */
#include "driver/generate.h"

#include <errno.h>
#include <stdlib.h>

#define MAX_PROMPT 1000000

mlc_status mlc_generate_parse_prompt(const char *s, int32_t **out, uint32_t *out_n) {
  uint32_t n = 0, cap = 16;
  int32_t *v = malloc(cap * sizeof *v);
  if (!v) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory");
  const char *p = s;
  for (;;) {
    while (*p == ',' || *p == ' ' || *p == '\t' || *p == '\n') p++;
    if (!*p) break;
    char *end;
    errno = 0;
    long x = strtol(p, &end, 10);
    if (end == p || errno || x < 0 || x > INT32_MAX || (*end && *end != ',' && *end != ' ' && *end != '\t' && *end != '\n')) {
      free(v);
      return mlc_status_make(MLC_INVALID_ARGUMENT, "--prompt: '%.20s' is not a token id (expected non-negative integers "
                             "separated by commas or spaces: --prompt 1,2,3)", p);
    }
    if (n == cap) {
      int32_t *w = n < MAX_PROMPT ? realloc(v, 2 * cap * sizeof *v) : NULL;
      if (!w) {
        free(v);
        return mlc_status_make(MLC_INVALID_ARGUMENT, "--prompt: more than %d tokens", MAX_PROMPT);
      }
      v = w, cap *= 2;
    }
    v[n++] = (int32_t)x;
    p = end;
  }
  if (!n) {
    free(v);
    return mlc_status_make(MLC_INVALID_ARGUMENT, "--prompt: no tokens (expected token ids: --prompt 1,2,3)");
  }
  *out = v, *out_n = n;
  return NULL;
}
