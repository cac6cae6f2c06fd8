/* The .mdl frontend: lexer, parser (to an AST) and lowering (AST to IR).
 *
 * The AST is untyped and close to the source; lowering evaluates it, the way
 * a module's __init__ and forward would run in PyTorch, with every shape
 * known: module instances are created with their arguments, `repeat` makes
 * module lists, and each forward call is expanded in place.  The result is
 * the IR program: parameters with their state_dict names, and one function
 * per entry point.
 */
#ifndef MLC_FRONTEND_H
#define MLC_FRONTEND_H

#include "ir/ir.h"

/* ---- tokens ---- */

typedef enum {
  TK_EOF, TK_IDENT, TK_INT, TK_FLOAT, TK_STRING, TK_PUNCT, TK_KEYWORD,
} mlc_tok_kind;

typedef struct {
  uint8_t kind;   /* mlc_tok_kind */
  bool bol;       /* first token on its line */
  const char *s;  /* points into the source */
  uint32_t len;
  int64_t ival;
  double fval;
  mlc_loc loc;
} mlc_token;

/* Tokenises the whole buffer.  Errors go to diag; bad characters are
 * skipped so parsing can still report what follows. */
mlc_token *mlc_lex(mlc_arena *a, mlc_diag *d, uint32_t file, const char *src, size_t len, uint32_t *out_n);
bool mlc_tok_is(const mlc_token *t, const char *s);

/* ---- AST ---- */

typedef enum {
  AST_INT, AST_FLOAT, AST_BOOL, AST_NAME, AST_BINARY, AST_NEG, AST_CALL, AST_LIST, AST_INDEX, AST_STRING, AST_SLICE,
} mlc_ast_expr_kind;

typedef struct mlc_ast_expr mlc_ast_expr;
typedef struct {
  const char *name; /* NULL for a positional argument */
  mlc_loc loc;
  mlc_ast_expr *value;
} mlc_ast_arg;

struct mlc_ast_expr {
  uint8_t kind;
  char op;            /* AST_BINARY: one of + - * / @, ^ for **, < > for themselves, l (<=), g (>=), e (==), n (!=) */
  mlc_loc loc;
  int64_t ival;       /* AST_INT, AST_BOOL */
  double fval;        /* AST_FLOAT */
  const char *name;   /* AST_NAME, AST_CALL (callee name), AST_STRING (its text) */
  mlc_ast_expr *lhs, *rhs; /* AST_BINARY; AST_NEG uses lhs; AST_INDEX: lhs[args] */
  mlc_ast_arg *args;  /* AST_CALL arguments; AST_LIST elements (unnamed); AST_INDEX: one per axis;
                         AST_SLICE: start, end, step (a NULL value where left out) */
  uint32_t nargs;
};

typedef struct {
  mlc_loc loc;
  uint8_t dtype;          /* mlc_dtype */
  mlc_ast_expr **dims;
  uint32_t rank;
} mlc_ast_type;

typedef enum { ST_ASSIGN, ST_RETURN, ST_FOR } mlc_ast_stmt_kind;
typedef struct mlc_ast_stmt mlc_ast_stmt;
struct mlc_ast_stmt {
  uint8_t kind;
  mlc_loc loc;
  const char *name;     /* ST_ASSIGN target (the first of names); ST_FOR loop variable */
  mlc_ast_expr *value;  /* ST_ASSIGN, ST_RETURN (the first of values) */
  const char **names;   /* ST_ASSIGN: a, b = f(x) unpacks into nnames (>= 1) names */
  mlc_loc *name_locs;
  uint32_t nnames;
  mlc_ast_expr **values; /* ST_RETURN: return a, b gives nvalues (>= 1) outputs */
  uint32_t nvalues;
  const char *iter;     /* ST_FOR: the module list */
  mlc_loc iter_loc;
  mlc_ast_stmt **body;  /* ST_FOR */
  uint32_t nbody;
};

typedef struct {
  const char *name;
  mlc_loc loc;
  mlc_ast_type *type;     /* NULL if untyped */
  mlc_ast_expr *def;      /* module parameter default; NULL if none */
} mlc_ast_param;

typedef enum { MEM_SUBMODULE, MEM_PARAM, MEM_TIE } mlc_ast_member_kind;
/* A dotted member path, `embed.weight` or `layers.0.attn.in_proj_weight`. */
typedef struct {
  const char **name;
  mlc_loc *loc;
  uint32_t n;
} mlc_ast_path;
typedef struct {
  uint8_t kind;
  const char *name;
  mlc_loc loc;
  mlc_ast_expr *repeat;   /* MEM_SUBMODULE: repeat(n) count, or NULL */
  mlc_ast_expr *ctor;     /* MEM_SUBMODULE: a call; MEM_PARAM: the initialiser or NULL */
  mlc_ast_type *type;     /* MEM_PARAM */
  mlc_ast_path target, source; /* MEM_TIE: target = source, both parameters (name is the target's first part) */
} mlc_ast_member;

typedef struct {
  const char *name;
  mlc_loc loc;
  mlc_ast_param *params;  /* constructor parameters */
  uint32_t nparams;
  mlc_ast_member *members;
  uint32_t nmembers;
  bool has_forward;
  mlc_loc forward_loc;
  mlc_ast_param *fparams; /* forward parameters */
  uint32_t nfparams;
  mlc_ast_stmt **body;
  uint32_t nbody;
} mlc_ast_module;

typedef struct {
  const char *name;
  mlc_loc loc;
  mlc_ast_expr *value;
} mlc_ast_config;

typedef struct {
  mlc_loc loc;
  const char *model;        /* module name */
  mlc_loc model_loc;
  mlc_ast_arg *args;        /* constructor arguments; NULL: from config by name */
  uint32_t nargs;
  bool has_args;
  mlc_ast_param *inputs;
  uint32_t ninputs;
  mlc_ast_expr *loss;
  mlc_ast_expr *optimizer;  /* a call: AdamW(lr=...) */
  mlc_ast_expr *precision;  /* a call: precision(param=bf16, reduce=f32) */
  mlc_ast_expr *shard;      /* a call: fsdp(layers) */
  mlc_ast_expr *memory_budget; /* bytes, a number: 14e9 (passes/recompute.c) */
  mlc_ast_expr *clip_grad_norm; /* a number: the largest global gradient norm (passes/optimizer.c) */
  mlc_ast_expr *accum;      /* an integer: micro-batches per step (frontend/lower.c) */
} mlc_ast_train;

/* decode M { max_ctx = 256  prefill = 16 }: the prefill and step entries
 * (frontend/lower.c). */
typedef struct {
  mlc_loc loc;
  const char *model;        /* module name */
  mlc_loc model_loc;
  mlc_ast_arg *args;        /* constructor arguments; NULL: from config by name */
  uint32_t nargs;
  bool has_args;
  mlc_ast_expr *max_ctx;    /* an integer: the cache's positions (prompt and generated tokens) */
  mlc_ast_expr *prefill;    /* an integer: tokens per prefill call; NULL: min(64, max_ctx) */
} mlc_ast_decode;

typedef struct {
  mlc_ast_config *config;
  uint32_t nconfig;
  mlc_ast_module *modules;
  uint32_t nmodules;
  mlc_ast_train *train;     /* NULL if none */
  mlc_ast_decode *decode;   /* NULL if none */
} mlc_ast_file;

/* Parses tokens into an AST; reports syntax errors and recovers at the next
 * statement.  Returns the (possibly partial) AST; check diag->errors. */
mlc_ast_file *mlc_parse(mlc_arena *a, mlc_diag *d, const mlc_token *toks, uint32_t ntoks);
void mlc_ast_print(FILE *out, const mlc_ast_file *f);
/* A binary operator as the source spells it ("<=" for the code 'l'). */
const char *mlc_ast_op_name(char op);

/* ---- lowering ---- */

typedef struct {
  const char *name;
  const char *value; /* text, parsed like a literal */
} mlc_define;

typedef struct {
  const mlc_define *defines;
  uint32_t ndefines;
  const char *entry; /* module to compile; NULL: the train block's (else the decode block's), else the last module */
  uint64_t max_steps; /* statements lowering may evaluate; 0: the default (10 million) */
  bool no_train;      /* the forward alone: a train block's model and config, not its step (--no-train) */
  int64_t accum;      /* --accum: micro-batches per step, over the train block's accum =; 0: the block's */
  bool decode_only;   /* a decode block's entries alone, without the forward (generate) */
} mlc_lower_options;

/* The values that come with a model for some of its parameters: an ONNX
 * model's initializers (frontend/onnx/), whether the model is a .onnx file
 * or a .mdl file that uses one as a module.  Each is the bytes of
 * parameter `param`, little-endian, in the program's arena; `initializer`
 * is false for a tensor of a Constant node. */
typedef struct {
  uint32_t param;
  const void *data;
  size_t bytes;
  bool initializer;
} mlc_onnx_weight;

typedef struct {
  mlc_onnx_weight *w;
  uint32_t n;
} mlc_onnx_weights;

/* What lowering reads and gives besides the program, for onnx("m.onnx")
 * modules (frontend/onnx_module.c).  Without it (NULL), files are read and
 * the values are dropped. */
typedef struct {
  bool no_files;             /* onnx(...) is an error: nothing is read from disk (the fuzzer) */
  mlc_onnx_weights *weights; /* the onnx(...) modules' initial values, for the driver to load; may be NULL */
} mlc_lower_io;

/* Lowers to IR.  Returns false if any error was reported. */
bool mlc_lower(mlc_program *p, mlc_diag *d, const mlc_ast_file *ast, const mlc_lower_options *opt);
bool mlc_lower_io_run(mlc_program *p, mlc_diag *d, const mlc_ast_file *ast, const mlc_lower_options *opt,
                      const mlc_lower_io *io);

/* Convenience for the driver, tests and fuzzers: lex, parse, lower. */
bool mlc_frontend_run(mlc_program *p, mlc_diag *d, const char *name, const char *src, size_t len,
                      const mlc_lower_options *opt, mlc_ast_file **out_ast);
bool mlc_frontend_run_io(mlc_program *p, mlc_diag *d, const char *name, const char *src, size_t len,
                         const mlc_lower_options *opt, const mlc_lower_io *io, mlc_ast_file **out_ast);

#endif
