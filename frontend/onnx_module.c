/* onnx("model.onnx"): an ONNX graph as a module of a .mdl file.
 *
 *   module Tuned {
 *       net = onnx("tinygpt.onnx")        # relative to this .mdl file
 *       forward(idx: i64[batch, seq]) { return net(idx) }
 *   }
 *
 * At construction the file is read and imported on its own (the ONNX
 * frontend, frontend/onnx/, into a program of its own), with the integer
 * config values binding the graph's symbolic dimensions.  Each parameter of
 * that graph (its initializers, and the tensors of Constant nodes that a
 * runtime op reads) becomes a parameter of the model under the module's
 * path and its ONNX name ("net.tok.weight"); their values go to the driver
 * through mlc_lower_add_weight, as `mlc run model.onnx` loads them.  A call
 * copies the graph's nodes into the entry being lowered: the graph's inputs
 * are the call's arguments in order, its parameters the model's, and its
 * outputs the call's value (a tuple when there are several).  So a train
 * block trains the graph, and autodiff sees ordinary IR.
 *
 * Every error points at the .mdl source: the path for a file that cannot be
 * read, the call for the importer's messages (which name the node, its op
 * type and the opset) and for arguments that do not match the graph.
 */
#define _XOPEN_SOURCE 700 /* fileno */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "frontend/lower.h"
#ifdef MLC_HAVE_ONNX
#include "frontend/onnx/onnx.h"
#endif

#define MAX_ONNX_BYTES (2040u << 20) /* protobuf's limit is 2 GiB */

#ifdef MLC_HAVE_ONNX
/* The path as the .mdl file means it: relative to that file's folder. */
static const char *resolve(mlc_lowerer *L, mlc_loc at, const char *path) {
  const mlc_diag *d = mlc_lower_diag(L);
  const char *src = at.file && at.file < d->nfiles ? d->files[at.file].name : NULL;
  const char *slash = src ? strrchr(src, '/') : NULL;
  if (path[0] == '/' || !slash) return path;
  return mlc_arena_printf(mlc_lower_arena(L), "%.*s/%s", (int)(slash - src), src, path);
}

/* The whole file, malloc'd (the caller frees it: the import copies what it
 * keeps into the arena); NULL with an error at `at`. */
static uint8_t *read_all(mlc_lowerer *L, mlc_loc at, const char *shown, const char *path, size_t *out_len) {
  mlc_diag *d = mlc_lower_diag(L);
  FILE *f = fopen(path, "rb");
  if (!f) {
    mlc_error(d, at, "cannot read '%s' (a path relative to this file): %s", shown, strerror(errno));
    return NULL;
  }
  struct stat st;
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
    mlc_error(d, at, "cannot read '%s': it is not a regular file", shown);
    fclose(f);
    return NULL;
  }
  if ((uint64_t)st.st_size > MAX_ONNX_BYTES) {
    mlc_error(d, at, "'%s' is larger than %u MB, protobuf's limit", shown, MAX_ONNX_BYTES >> 20);
    fclose(f);
    return NULL;
  }
  size_t len = (size_t)st.st_size;
  uint8_t *buf = malloc(len + 1);
  if (!buf) {
    mlc_error(d, at, "out of memory reading '%s'", shown);
    fclose(f);
    return NULL;
  }
  size_t got = fread(buf, 1, len, f);
  bool bad = got != len || ferror(f);
  int err = errno;
  fclose(f);
  if (bad) {
    mlc_error(d, at, "cannot read '%s': %s", shown, got != len && !err ? "the file changed while it was read" : strerror(err));
    free(buf);
    return NULL;
  }
  *out_len = len;
  return buf;
}
#endif

#ifdef MLC_HAVE_ONNX
/* Whether float initializer `name` of graph g is the (one) parameter it
 * lowered to: the names in frozen= and trainable= must be such. */
static uint32_t float_initializer(const mlc_program *g, const mlc_onnx_weights *w, const char *name) {
  for (uint32_t i = 0; i < w->n; i++) {
    const mlc_param *gp = &g->params[w->w[i].param];
    if (w->w[i].initializer && mlc_dtype_is_float((mlc_dtype)gp->type.dtype) && !strcmp(gp->name, name))
      return w->w[i].param;
  }
  return UINT32_MAX;
}

/* frozen=[...] or trainable=[...]: which float initializers are trained.
 * Marks the graph's parameters (g->params[].frozen) for the others; false
 * after an error at a name. */
static bool choose_trained(mlc_lowerer *L, mlc_instance *m, mlc_program *g, const mlc_onnx_weights *w,
                           const mlc_ast_expr *list, bool trainable, const char *file) {
  mlc_diag *d = mlc_lower_diag(L);
  const char *opt = trainable ? "trainable" : "frozen";
  if (list->kind != AST_LIST) {
    mlc_error(d, list->loc, "%s takes a list of the graph's initializer names: %s=[\"pos_table\"]", opt, opt);
    return false;
  }
  bool *named = mlc_arena_alloc(mlc_lower_arena(L), (g->nparams + 1) * sizeof *named);
  bool ok = true;
  for (uint32_t k = 0; k < list->nargs; k++) {
    const mlc_ast_expr *e = list->args[k].value;
    if (e->kind != AST_STRING) {
      mlc_error(d, e->loc, "%s takes the names of the graph's initializers as strings", opt);
      ok = false;
      continue;
    }
    uint32_t id = float_initializer(g, w, e->name);
    if (id != UINT32_MAX) {
      named[id] = true;
      continue;
    }
    size_t np = strlen(m->path);
    const char *hint = "";
    if (m->path[0] && !strncmp(e->name, m->path, np) && e->name[np] == '.' &&
        float_initializer(g, w, e->name + np + 1) != UINT32_MAX)
      hint = mlc_arena_printf(mlc_lower_arena(L), " (the names are the ONNX file's, without '%s.': \"%s\")", m->path,
                              e->name + np + 1);
    mlc_error(d, e->loc, "'%s' is not a float initializer of '%s'%s", e->name, file, hint);
    ok = false;
  }
  if (!ok) return false;
  for (uint32_t i = 0; i < w->n; i++) {
    uint32_t id = w->w[i].param;
    if (w->w[i].initializer && mlc_dtype_is_float((mlc_dtype)g->params[id].type.dtype) && named[id] != trainable)
      g->params[id].frozen = true;
  }
  return true;
}
#endif

bool mlc_onnx_module_make(mlc_lowerer *L, mlc_instance *m, const mlc_call *c) {
  static const char *const spec[] = {"path"};
  mlc_diag *d = mlc_lower_diag(L);
  mlc_value v[1];
  bool pr[1];
  /* frozen= and trainable= are lists: taken out by hand, the path bound
   * through mlc_bind. */
  const mlc_ast_expr *frozen = NULL, *trainable = NULL;
  mlc_ast_arg *rest = mlc_arena_alloc(mlc_lower_arena(L), (c->nargs + 1) * sizeof *rest);
  uint32_t nrest = 0;
  for (uint32_t i = 0; i < c->nargs; i++) {
    const mlc_ast_arg *a = &c->args[i];
    if (a->name && !strcmp(a->name, "frozen")) frozen = a->value;
    else if (a->name && !strcmp(a->name, "trainable")) trainable = a->value;
    else rest[nrest++] = *a;
  }
  if (frozen && trainable) {
    mlc_error(d, trainable->loc, "onnx takes frozen= or trainable=, not both: one list says which initializers are "
              "trained");
    return false;
  }
  mlc_call cc = {rest, nrest, c->loc, c->callee};
  if (!mlc_bind(L, &cc, spec, 1, v, pr)) return false;
  if (!pr[0]) {
    mlc_error(d, c->loc, "onnx takes the path of a .onnx file: onnx(\"model.onnx\")");
    return false;
  }
  mlc_loc ploc = mlc_arg_loc(&cc, spec, 1, 0);
  if (v[0].kind != V_STR) {
    if (v[0].kind != V_ERR) mlc_error(d, ploc, "onnx takes the path of a .onnx file as a string: onnx(\"model.onnx\")");
    return false;
  }
  if (mlc_lower_no_files(L)) {
    mlc_error(d, ploc, "onnx(\"%s\"): reading files is turned off here", v[0].str);
    return false;
  }
#ifdef MLC_HAVE_ONNX
  mlc_arena *a = mlc_lower_arena(L);
  size_t len = 0;
  const char *path = resolve(L, ploc, v[0].str);
  uint8_t *buf = read_all(L, ploc, v[0].str, path, &len);
  if (!buf) return false;
  mlc_define *defs;
  uint32_t ndefs = mlc_lower_config_ints(L, &defs);
  mlc_program *g = mlc_arena_alloc(a, sizeof *g);
  mlc_program_init(g, a);
  mlc_onnx_weights w = {0};
  bool ok = mlc_onnx_import_at(g, d, c->loc, v[0].str, path, buf, len, defs, ndefs, &w);
  free(buf);
  if (!ok) return false;
  if ((frozen || trainable) && !choose_trained(L, m, g, &w, frozen ? frozen : trainable, trainable != NULL, v[0].str))
    return false;
  m->graph = g;
  m->graph_param = mlc_arena_alloc(a, (g->nparams + 1) * sizeof *m->graph_param);
  for (uint32_t i = 0; i < g->nparams; i++) {
    const mlc_param *gp = &g->params[i];
    m->graph_param[i] = mlc_new_param(L, m, gp->name, gp->type, MLC_INIT_GIVEN, 0, 0, c->loc);
    if (gp->frozen) mlc_lower_freeze_param(L, m->graph_param[i]);
  }
  for (uint32_t i = 0; i < w.n; i++) {
    mlc_onnx_weight x = w.w[i];
    const mlc_param *gp = &g->params[x.param];
    m->graph_trainable |= !gp->frozen && mlc_dtype_is_float((mlc_dtype)gp->type.dtype);
    x.param = m->graph_param[x.param];
    mlc_lower_add_weight(L, x);
  }
  return true;
#else
  mlc_error(d, c->loc, "this mlc was built without the ONNX frontend (configure with -DMLC_FRONTEND_ONNX=ON, which needs "
            "libprotobuf-c-dev, protobuf-c-compiler and libonnx-dev)");
  return false;
#endif
}

/* Whether the call's arguments are the graph's inputs, in count and type. */
static bool check_args(mlc_lowerer *L, mlc_instance *m, const mlc_func *gf, const mlc_value *args, uint32_t nargs,
                       mlc_loc loc) {
  mlc_diag *d = mlc_lower_diag(L);
  if (nargs != gf->inputs.n) {
    const char *names = "";
    for (uint32_t k = 0; k < gf->inputs.n; k++)
      names = mlc_arena_printf(mlc_lower_arena(L), "%s%s'%s'", names, k ? ", " : "", gf->nodes[gf->inputs.v[k]].a.name);
    mlc_error(d, loc, "%s takes %u argument%s, the graph's input%s%s%s, got %u", m->path, gf->inputs.n,
              gf->inputs.n == 1 ? "" : "s", gf->inputs.n == 1 ? "" : "s", gf->inputs.n ? " " : "", names, nargs);
    return false;
  }
  bool ok = true;
  for (uint32_t k = 0; k < nargs; k++) {
    const mlc_node *in = &gf->nodes[gf->inputs.v[k]];
    const mlc_type *t = mlc_value_type(L, args[k]);
    if (!mlc_type_eq(t, &in->type)) {
      char x[96], y[96];
      mlc_error(d, loc, "argument %u of %s is %s, but the graph's input '%s' is %s", k + 1, m->path,
                mlc_type_str(t, x, sizeof x), in->a.name, mlc_type_str(&in->type, y, sizeof y));
      ok = false;
    }
  }
  return ok;
}

mlc_value mlc_onnx_module_forward(mlc_lowerer *L, mlc_instance *m, const mlc_value *args, uint32_t nargs, mlc_loc loc) {
  mlc_diag *d = mlc_lower_diag(L);
  const mlc_func *gf = &m->graph->funcs[0];
  if (!check_args(L, m, gf, args, nargs, loc)) return mlc_verr();
  const char *entry = mlc_lower_entry(L);
  if (entry && !strcmp(entry, "train") && !m->graph_trainable) {
    mlc_error(d, loc, "%s is an ONNX graph with no trainable float initializer (frozen= and trainable= say which are "
              "trained): the train block has nothing of it to train", m->path);
    return mlc_verr();
  }
  if (gf->noutputs > 64) {
    mlc_error(d, loc, "%s: the graph has %u outputs; a call gives at most 64", m->path, gf->noutputs);
    return mlc_verr();
  }
  mlc_value *v = mlc_arena_alloc(mlc_lower_arena(L), (gf->n + 1) * sizeof *v);
  for (uint32_t k = 0; k < nargs; k++) v[gf->inputs.v[k]] = args[k];
  for (uint32_t j = 0; j < gf->n; j++) {
    const mlc_node *n = &gf->nodes[j];
    if (n->op == MLC_OP_INPUT) continue;
    if (n->op == MLC_OP_PARAM) {
      v[j] = mlc_param_value(L, m->graph_param[n->a.param], loc);
      continue;
    }
    mlc_value in[64];
    if (n->nin > 64) {
      mlc_error(d, loc, "%s: an operation of the graph has %u operands; mlc takes at most 64 here", m->path, n->nin);
      return mlc_verr();
    }
    for (uint32_t k = 0; k < n->nin; k++) in[k] = v[n->in[k]];
    v[j] = mlc_emit(L, (mlc_op)n->op, in, n->nin, &n->a, &n->type, loc);
    if (v[j].kind == V_ERR) return v[j];
  }
  if (gf->noutputs == 1) return v[gf->outputs[0].node];
  mlc_tuple *t = mlc_arena_alloc(mlc_lower_arena(L), sizeof *t);
  mlc_value *tv = mlc_arena_alloc(mlc_lower_arena(L), gf->noutputs * sizeof *tv);
  const char **names = mlc_arena_alloc(mlc_lower_arena(L), gf->noutputs * sizeof *names);
  mlc_loc *locs = mlc_arena_alloc(mlc_lower_arena(L), gf->noutputs * sizeof *locs);
  for (uint32_t k = 0; k < gf->noutputs; k++)
    tv[k] = v[gf->outputs[k].node], names[k] = gf->outputs[k].name, locs[k] = loc;
  *t = (mlc_tuple){gf->noutputs, tv, names, locs};
  return (mlc_value){.kind = V_TUPLE, .tuple = t};
}
