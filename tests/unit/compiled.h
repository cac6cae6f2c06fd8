/* Shared by the unit tests: a compilation whose diagnostics go to memory
 * (c->err), so a test can compare them, and whose arena is freed by
 * compiled_release().  Header-only: each test is one program. */
#ifndef MLC_TESTS_COMPILED_H
#define MLC_TESTS_COMPILED_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"

typedef struct {
  mlc_arena arena;
  mlc_diag diag;
  mlc_program prog;
  char *err;
  size_t errlen;
  FILE *errf;
  uint32_t nfwd; /* test_autodiff: the train function's node count before the passes */
} compiled;

/* Sets up c and runs the frontend on src; false (diagnostics in c->err,
 * after fflush(c->errf)) on an error. */
static inline bool compiled_frontend(compiled *c, const char *src, const mlc_define *defs, uint32_t ndefs) {
  mlc_arena_init(&c->arena);
  c->errf = open_memstream(&c->err, &c->errlen);
  mlc_diag_init(&c->diag, c->errf);
  mlc_program_init(&c->prog, &c->arena);
  mlc_lower_options lo = {defs, ndefs, NULL, 0, false, 0, false};
  return mlc_frontend_run(&c->prog, &c->diag, "t.mdl", src, strlen(src), &lo, NULL);
}

/* A source file's text, in a buffer of its own for each call site's
 * lifetime (static); NULL where it cannot be read or is over 64 KiB. */
static inline const char *compiled_read(const char *path) {
  static char src[65536];
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t len = fread(src, 1, sizeof src, f);
  fclose(f);
  if (len == sizeof src) return NULL;
  src[len] = 0;
  return src;
}

/* The program's function called name, or NULL. */
static inline mlc_func *compiled_func(mlc_program *p, const char *name) {
  for (uint32_t k = 0; k < p->nfuncs; k++)
    if (!strcmp(p->funcs[k].name, name)) return &p->funcs[k];
  return NULL;
}

static inline void release(compiled *c) {
  fclose(c->errf);
  free(c->err);
  mlc_arena_free(&c->arena);
}

#endif
