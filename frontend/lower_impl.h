/* The lowerer's own state and the helpers its three files share (not for
 * builtins.c or onnx_module.c, which use frontend/lower.h):
 *   lower.c        values, scopes, expressions, module instances, forward calls
 *   lower_prims.c  the primitive functions usable in forward (exp, reshape,
 *                  attention, dropout, ...) and calls by name
 *   lower_train.c  config, entry points, the train block, the decode block,
 *                  and mlc_lower itself
 */
#ifndef MLC_FRONTEND_LOWER_IMPL_H
#define MLC_FRONTEND_LOWER_IMPL_H

#include "frontend/lower.h"

#define MAX_INSTANCES 100000
#define MAX_NODES (1u << 20)
#define MAX_STEPS 10000000 /* statements evaluated: bounds nested for loops that build nothing */
#define MAX_REPEAT 100000
#define MAX_CALL_DEPTH 64

struct mlc_lowerer {
  mlc_program *p;
  mlc_diag *d;
  mlc_arena *a;
  mlc_scope config;
  mlc_func *f;                 /* function being built, or NULL while instantiating */
  uint32_t *param_node;        /* per param: its PARAM node in f, or UINT32_MAX */
  mlc_instance *self;          /* module whose members and arguments are visible */
  mlc_scope *locals;           /* forward locals, or NULL */
  const mlc_ast_file *ast;
  const mlc_ast_module *stack[MAX_CALL_DEPTH]; /* modules being instantiated, for recursion */
  uint32_t nstack;
  uint32_t ninstances;
  uint32_t call_depth;
  uint64_t steps, max_steps;
  int64_t accum_flag; /* --accum, 0 if not given */
  struct {              /* a decode block's entries (lower_decode) */
    bool on;            /* lowering prefill or step: attention goes over the KV caches */
    uint32_t pos;       /* the entry's pos input */
    int64_t max_ctx;
    mlc_instance *root; /* the model, whose forward's declared input the entry replaces */
    uint32_t used;      /* attentions lowered so far in this entry */
    uint32_t *cache;    /* per attention, in call order: its k cache (its v cache is the next parameter) */
    uint32_t ncache, cap;
  } dec;
  bool too_big;                /* a size limit was hit and reported: stop */
  uint32_t ndropout;           /* dropouts lowered into the train entry: the next one's RNG stream */
  const mlc_lower_io *io;      /* may be NULL */
  mlc_onnx_weight *w;          /* onnx(...) modules' initial values */
  uint32_t nw, wcap;
};

static inline mlc_value vnum_i(int64_t i) { return (mlc_value){.kind = V_NUM, .is_int = true, .i = i, .f = (double)i}; }
static inline mlc_value vnum_f(double f) { return (mlc_value){.kind = V_NUM, .f = f}; }
static inline mlc_value vtensor(uint32_t n) { return (mlc_value){.kind = V_TENSOR, .node = n}; }

/* "did you mean": the nearest of the candidates considered */
typedef struct {
  const char *want, *best;
  unsigned dist;
} suggest;
void lw_consider(suggest *s, const char *cand);
void lw_consider_scope(suggest *s, const mlc_scope *sc);
const char *lw_hint(mlc_lowerer *L, suggest *s); /* ", did you mean 'x'?" or "" */

const char *lw_tuple_names(mlc_lowerer *L, const mlc_tuple *t);
const char *lw_kind_name(mlc_lowerer *L, mlc_value v);
void lw_scope_set(mlc_lowerer *L, mlc_scope *s, const char *name, mlc_value v);
mlc_value *lw_scope_get(mlc_scope *s, const char *name);
mlc_value lw_mk_const(mlc_lowerer *L, double v, uint8_t dtype, mlc_loc loc);
mlc_value lw_as_tensor_like(mlc_lowerer *L, mlc_value num, mlc_value t, mlc_loc loc);
mlc_value lw_power(mlc_lowerer *L, mlc_value x, mlc_value p, mlc_loc loc, mlc_loc ploc);

/* expressions (lower.c), indexing and calls by name (lower_prims.c) */
mlc_value lw_eval(mlc_lowerer *L, const mlc_ast_expr *e);
bool lw_eval_type(mlc_lowerer *L, const mlc_ast_type *ty, mlc_type *out);
mlc_value lw_eval_index(mlc_lowerer *L, const mlc_ast_expr *e);
mlc_value lw_call(mlc_lowerer *L, const mlc_ast_expr *e);

/* module instances and weight sharing (lower.c) */
const mlc_ast_module *lw_find_module(mlc_lowerer *L, const char *name);
mlc_instance *lw_instantiate(mlc_lowerer *L, const char *path, const mlc_ast_expr *ctor);
void lw_tie(mlc_lowerer *L, mlc_instance *m, const mlc_ast_member *mem);
const uint32_t *lw_fold_ties(mlc_program *p);

#endif
