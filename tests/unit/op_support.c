/* What tests/unit/op_coverage.py needs from the compiler, in one process
 * (starting mlc once per case would take most of the test's time).
 *
 * The driver's answer, for every target built into this mlc and every op
 * of ir/ops.def, to "does your code generator have a kernel for it?": the
 * registry's supports_op (driver/target.c), which `mlc compile` asks before
 * the passes.  One line per pair:
 *
 *     support TARGET OP yes
 *     support TARGET OP no WHY
 *
 * where WHY is the message mlc compile prints at the op's source.  Then,
 * for each MODEL.mdl argument, the ops of the graph the frontend makes of
 * it (the graph that check runs on), each once:
 *
 *     graph MODEL.mdl OP OP ...
 *
 * Exit status 1 if a model does not compile (its errors on stderr). */
#include <stdio.h>
#include <stdlib.h>

#include "driver/target.h"
#include "frontend/frontend.h"
#include "runtime/profile.h"

static bool print_graph(const char *path) {
  size_t len;
  char *src = mlc_read_file(path, &len);
  if (!src) {
    fprintf(stderr, "op_support: cannot read %s\n", path);
    return false;
  }
  mlc_arena arena;
  mlc_arena_init(&arena);
  mlc_diag diag;
  mlc_diag_init(&diag, stderr);
  mlc_program prog;
  mlc_program_init(&prog, &arena);
  mlc_lower_options lo = {0};
  bool ok = mlc_frontend_run(&prog, &diag, path, src, len, &lo, NULL);
  if (ok) {
    bool seen[MLC_OP_COUNT] = {0};
    printf("graph %s", path);
    for (uint32_t k = 0; k < prog.nfuncs; k++)
      for (uint32_t i = 0; i < prog.funcs[k].n; i++) {
        uint32_t op = prog.funcs[k].nodes[i].op;
        if (!seen[op]) printf(" %s", mlc_ops[op].name);
        seen[op] = true;
      }
    printf("\n");
  }
  mlc_arena_free(&arena);
  free(src);
  return ok;
}

int main(int argc, char **argv) {
  unsigned n;
  const mlc_driver_target *ts = mlc_driver_targets(&n);
  for (unsigned t = 0; t < n; t++) {
    if (!ts[t].supports_op) continue; /* not built in */
    for (int op = 0; op < MLC_OP_COUNT; op++) {
      char why[160] = "";
      bool yes = ts[t].supports_op((mlc_op)op, why, sizeof why);
      printf("support %s %s %s%s%s\n", ts[t].name, mlc_ops[op].name, yes ? "yes" : "no", yes ? "" : " ", yes ? "" : why);
    }
  }
  bool ok = true;
  for (int i = 1; i < argc; i++) ok = print_graph(argv[i]) && ok;
  return ok ? 0 : 1;
}
