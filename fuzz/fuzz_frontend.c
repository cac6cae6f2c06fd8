/* libFuzzer harness over the whole frontend: lex, parse, lower (which runs
 * every shape rule) and the pass pipeline (shapes, and the verifier between
 * passes).  Any crash, sanitizer report, hang or leak is a bug: no input may
 * do that.  Diagnostics go to /dev/null.
 *
 * The first line of the input may be "#D name=value ..." to fuzz -D overrides too. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"
#include "passes/passes.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static FILE *sink;
  if (!sink) sink = fopen("/dev/null", "w");
  char *src = malloc(size + 1);
  if (!src) return 0;
  memcpy(src, data, size);
  src[size] = 0;

  mlc_define defs[4];
  char *defbuf = NULL;
  uint32_t ndefs = 0;
  if (size > 3 && !memcmp(src, "#D ", 3)) {
    char *nl = memchr(src, '\n', size);
    size_t n = nl ? (size_t)(nl - src) : size;
    defbuf = strndup(src + 3, n - 3);
    for (char *tok = strtok(defbuf, " "); tok && ndefs < 4; tok = strtok(NULL, " ")) {
      char *eq = strchr(tok, '=');
      if (!eq || eq == tok) continue;
      *eq = 0;
      defs[ndefs++] = (mlc_define){tok, eq + 1};
    }
  }

  mlc_arena arena;
  mlc_arena_init(&arena);
  mlc_diag diag;
  mlc_diag_init(&diag, sink);
  mlc_program prog;
  mlc_program_init(&prog, &arena);
  mlc_lower_options lo = {defs, ndefs, NULL, 200000, false, 0, false};
  mlc_lower_io io = {true, NULL}; /* onnx("...") reads no file here */
  mlc_ast_file *ast = NULL;
  if (mlc_frontend_run_io(&prog, &diag, "fuzz.mdl", src, size, &lo, &io, &ast)) {
    mlc_pipeline_options po = {NULL, NULL, NULL, NULL, false, false};
    mlc_pipeline_run(&prog, &diag, &po);
    mlc_print_program(sink, &prog);
    mlc_print_stats(sink, &prog);
  }
  if (ast) mlc_ast_print(sink, ast);
  mlc_diag_summary(&diag);
  mlc_arena_free(&arena);
  free(defbuf);
  free(src);
  return 0;
}
