/* libFuzzer harness over the ONNX frontend: protobuf-c's parser, the
 * lowering of every node (which runs the IR's shape rules) and the pass
 * pipeline.  Any crash, sanitizer report, hang or leak is a bug: no input
 * may do that.  Diagnostics go to /dev/null.  Symbolic dimensions named
 * n, batch or seq are bound to 2, so that graphs with them get lowered too.
 * The model is given no path, so a tensor with external data is an error
 * before any file is opened: the fuzzer reads nothing from disk. */
#include <stdint.h>
#include <stdio.h>

#include "frontend/onnx/onnx.h"
#include "passes/passes.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static FILE *sink;
  if (!sink) sink = fopen("/dev/null", "w");
  static const mlc_define defs[] = {{"n", "2"}, {"batch", "2"}, {"seq", "2"}};
  mlc_arena arena;
  mlc_arena_init(&arena);
  mlc_diag diag;
  mlc_diag_init(&diag, sink);
  mlc_program prog;
  mlc_program_init(&prog, &arena);
  mlc_onnx_weights w;
  if (mlc_onnx_import(&prog, &diag, "fuzz.onnx", NULL, data, size, defs, 3, &w)) {
    mlc_pipeline_options po = {NULL, NULL, NULL, NULL, false, false};
    mlc_pipeline_run(&prog, &diag, &po);
    mlc_print_program(sink, &prog);
  }
  mlc_diag_summary(&diag);
  mlc_arena_free(&arena);
  return 0;
}
