/* Lowering internals shared by lower.c (the evaluator) and builtins.c (the
 * built-in modules).  Not part of the frontend's public interface. */
#ifndef MLC_LOWER_H
#define MLC_LOWER_H

#include "frontend/frontend.h"

typedef enum { V_ERR, V_NUM, V_BOOL, V_DTYPE, V_TENSOR, V_MODULE, V_PARAM, V_NONE, V_STR, V_TUPLE } mlc_vkind;

typedef struct mlc_instance mlc_instance;
typedef struct mlc_tuple mlc_tuple;
/* A value while evaluating: a compile-time number, a tensor (an IR node),
 * or a module instance.  V_ERR means an error was already reported: every
 * operation passes it through silently, so one mistake gives one error. */
typedef struct {
  uint8_t kind;
  bool is_int;    /* V_NUM */
  int64_t i;      /* V_NUM (when is_int), V_BOOL, V_DTYPE, V_PARAM (param index) */
  double f;       /* V_NUM */
  uint32_t node;  /* V_TENSOR */
  mlc_instance *mod; /* V_MODULE */
  const char *str;   /* V_STR: a string literal, only an option's value (gelu's approximate=) */
  const mlc_tuple *tuple; /* V_TUPLE */
} mlc_value;

/* What `return a, b` gives: n >= 2 tensors, each named after the returned
 * name (`logits`), or `output<i>` for an expression; the names become the
 * entry's outputs when the model's own forward returns the tuple. */
struct mlc_tuple {
  uint32_t n;
  const mlc_value *v;
  const char *const *names;
  const mlc_loc *locs; /* each returned expression */
};

typedef struct {
  const char *name;
  mlc_value v;
} mlc_binding;

typedef struct {
  mlc_binding *v;
  uint32_t n, cap;
} mlc_scope;

typedef struct mlc_builtin mlc_builtin;

/* A module instance: what `Linear(dim, 4*dim)` evaluates to at construction. */
struct mlc_instance {
  const char *path;           /* state_dict prefix: "layers.3.attn"; "" for the root */
  const char *type_name;      /* "TransformerBlock", "Linear", ... */
  const mlc_ast_module *ast;  /* user module, or NULL */
  const mlc_builtin *builtin; /* built-in module, or NULL */
  bool is_list;               /* repeat(n) or Sequential: children named 0..n-1 */
  bool callable;              /* Sequential is; a repeat list is not */
  mlc_scope args;             /* constructor arguments, by parameter name */
  mlc_scope members;          /* submodules (V_MODULE) and parameters (V_PARAM, index in i) */
  mlc_instance **children;    /* module lists: the elements */
  uint32_t nchildren;
  /* built-in modules: their configuration */
  int64_t dim[3];
  double eps;
  double p;                   /* Dropout */
  bool has_eps, bias, causal;
  uint8_t dtype;
  uint32_t param[4];          /* indices of the built-in's own parameters */
  /* onnx("m.onnx") (frontend/onnx_module.c): the graph imported on its own,
   * and per parameter of it, the model's parameter it became */
  const mlc_program *graph;
  uint32_t *graph_param;
  bool graph_trainable;       /* it has a float initializer that is not frozen */
};

typedef struct mlc_lowerer mlc_lowerer;

typedef struct {
  const mlc_ast_arg *args; /* the call's arguments */
  uint32_t nargs;
  mlc_loc loc;             /* the call */
  const char *callee;
} mlc_call;

struct mlc_builtin {
  const char *name;
  /* Reads the constructor call, makes the parameters.  False on error. */
  bool (*make)(mlc_lowerer *L, mlc_instance *m, const mlc_call *c);
  /* Lowers one forward call; args are already evaluated. */
  mlc_value (*forward)(mlc_lowerer *L, mlc_instance *m, const mlc_value *args, uint32_t nargs, mlc_loc loc);
  int min_args, max_args; /* forward arity */
};

const mlc_builtin *mlc_builtin_find(const char *name);
extern const mlc_builtin mlc_builtins[];
extern const uint32_t mlc_nbuiltins;
/* onnx("m.onnx"): an imported ONNX graph as a module (frontend/onnx_module.c) */
bool mlc_onnx_module_make(mlc_lowerer *L, mlc_instance *m, const mlc_call *c);
mlc_value mlc_onnx_module_forward(mlc_lowerer *L, mlc_instance *m, const mlc_value *args, uint32_t nargs, mlc_loc loc);

/* --- services lower.c offers builtins.c --- */

/* Binds a call's arguments against a spec like {"in_features", "out_features",
 * "bias=", "dtype="}: names ending in '=' are optional keywords.  Evaluates
 * the arguments in the current constant scope.  Reports unknown, missing and
 * duplicate arguments. */
bool mlc_bind(mlc_lowerer *L, const mlc_call *c, const char *const *spec, uint32_t nspec, mlc_value *out, bool *present);
bool mlc_want_int(mlc_lowerer *L, mlc_value v, mlc_loc loc, const char *what, int64_t lo, int64_t hi, int64_t *out);
bool mlc_want_float(mlc_lowerer *L, mlc_value v, mlc_loc loc, const char *what, double *out);
bool mlc_want_bool(mlc_lowerer *L, mlc_value v, mlc_loc loc, const char *what, bool *out);
bool mlc_want_dtype(mlc_lowerer *L, mlc_value v, mlc_loc loc, const char *what, uint8_t *out);
mlc_loc mlc_arg_loc(const mlc_call *c, const char *const *spec, uint32_t nspec, uint32_t which);

uint32_t mlc_new_param(mlc_lowerer *L, mlc_instance *m, const char *name, mlc_type t, int init, double a, double b, mlc_loc loc);
mlc_value mlc_param_value(mlc_lowerer *L, uint32_t param, mlc_loc loc);
/* attention(q, k, v) [b, h, s, d]: the attention op, or, in a decode
 * block's prefill and step entries, attention_kv over this call's KV caches
 * (made the first time, shared by both entries); a non-causal attention is
 * an error there. */
/* dropout(x, p, seed): the op in the train entry, x itself elsewhere (and
 * for p = 0); p in [0, 1) is the caller's to check. */
mlc_value mlc_dropout(mlc_lowerer *L, mlc_value x, double p, uint32_t seed, mlc_loc xloc, mlc_loc loc);
mlc_value mlc_attention(mlc_lowerer *L, const mlc_value *qkv, bool causal, double scale, mlc_loc loc);
/* Adds a node and runs its shape rule; on failure reports at loc. */
mlc_value mlc_emit(mlc_lowerer *L, mlc_op op, const mlc_value *in, uint32_t nin, const mlc_attrs *a, const mlc_type *preset,
                   mlc_loc loc);
const mlc_type *mlc_value_type(mlc_lowerer *L, mlc_value v);
bool mlc_want_tensor(mlc_lowerer *L, mlc_value v, mlc_loc loc, const char *what);
mlc_value mlc_reshape(mlc_lowerer *L, mlc_value x, const int64_t *dims, int rank, mlc_loc loc);
mlc_value mlc_instantiate_child(mlc_lowerer *L, mlc_instance *parent, const char *name, const mlc_ast_expr *ctor);
mlc_value mlc_call_module(mlc_lowerer *L, mlc_instance *m, const mlc_value *args, uint32_t nargs, mlc_loc loc);
mlc_diag *mlc_lower_diag(mlc_lowerer *L);
/* For onnx(...): the integer config values as -D defines (they bind the
 * graph's symbolic dimensions); whether reading files is off (the fuzzer);
 * a parameter's initial value, for the driver to load; the entry point
 * being lowered ("forward", "train", ...; NULL while instantiating). */
uint32_t mlc_lower_config_ints(mlc_lowerer *L, mlc_define **out);
bool mlc_lower_no_files(mlc_lowerer *L);
void mlc_lower_add_weight(mlc_lowerer *L, mlc_onnx_weight w);
const char *mlc_lower_entry(mlc_lowerer *L);
mlc_arena *mlc_lower_arena(mlc_lowerer *L);
/* Marks a parameter as one the optimizer never updates (mlc_param.frozen). */
void mlc_lower_freeze_param(mlc_lowerer *L, uint32_t param);

static inline mlc_value mlc_verr(void) { return (mlc_value){.kind = V_ERR}; }

#endif
