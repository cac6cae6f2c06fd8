/* The .mdl parser: recursive descent over the token array, one function per
 * grammar rule with the rule above it (docs/language.md has the whole EBNF).
 *
 * Statements have no terminator.  An expression ends at the first token that
 * cannot continue it, and never continues onto a new line unless a bracket
 * is open, so `x = a` followed by a line `-b` is two statements, not a - b.
 *
 * On a syntax error the parser reports it and skips to the start of the
 * next line (or the closing brace of the current block), so one run shows
 * the errors of several statements.
 */
#include <string.h>

#include "frontend/frontend.h"

#define MAX_DEPTH 200
#define MAX_RESULTS 64 /* values of one return, names of one unpacking */
#define MAX_OPS 1000 /* binary operators in one expression: bounds the depth of the tree */

typedef struct {
  mlc_arena *a;
  mlc_diag *d;
  const mlc_token *t; /* current token */
  const mlc_token *end;
  const mlc_token *start; /* first token of the current statement, member or declaration */
  int depth;  /* open ( and [: newlines do not end an expression inside them */
  int nest;   /* recursion depth, to refuse absurdly nested input */
  int ops;    /* binary operators in the current expression */
  int blocks; /* open blocks: for loops nest */
  bool panic; /* an error in this statement was reported; stay quiet until synced */
} parser;

static const char *tokdesc(parser *P, const mlc_token *t) {
  if (t->kind == TK_EOF) return "end of file";
  return mlc_arena_printf(P->a, "'%.*s'", (int)(t->len > 40 ? 40 : t->len), t->s);
}

/* Reports what the parser wanted at the current token.  If that token starts
 * a new line in the middle of a statement, what is missing belongs at the
 * end of the previous line (a ')' or ',', say), so the error points there. */
static void expected(parser *P, const char *what) {
  if (P->panic) return;
  P->panic = true;
  const mlc_token *t = P->t;
  if (t->bol && P->start && t > P->start) {
    const mlc_token *prev = t - 1;
    mlc_loc loc = prev->loc;
    loc.col += prev->len;
    mlc_error(P->d, loc, "expected %s, got %s%s", what, tokdesc(P, t),
              t->kind == TK_EOF ? "" : mlc_arena_printf(P->a, " on line %u", t->loc.line));
    return;
  }
  mlc_error(P->d, t->loc, "expected %s, got %s", what, tokdesc(P, t));
}

static bool is(parser *P, const char *s) { return mlc_tok_is(P->t, s); }
static void next(parser *P) { if (P->t->kind != TK_EOF) P->t++; }
static bool accept(parser *P, const char *s) {
  if (!is(P, s)) return false;
  next(P);
  return true;
}
static bool expect(parser *P, const char *s) {
  if (accept(P, s)) return true;
  expected(P, mlc_arena_printf(P->a, "'%s'", s));
  return false;
}
static const char *ident(parser *P, const char *what) {
  if (P->t->kind != TK_IDENT) {
    expected(P, what);
    return NULL;
  }
  const char *s = mlc_arena_strndup(P->a, P->t->s, P->t->len);
  next(P);
  return s;
}

/* Skip to the start of the next line, or to the '}' that closes the block
 * we are in, whichever comes first.  A line-starting token that looks like
 * the start of a statement (a keyword, or NAME =) is kept unless the failed
 * statement began with it: the error was that the statement ended early (a
 * missing ')'), and this is the next statement. */
static void sync(parser *P) {
  int braces = 0;
  bool next_stmt = P->t->bol && (P->t->kind == TK_KEYWORD || (P->t->kind == TK_IDENT && mlc_tok_is(P->t + 1, "=")));
  if (P->t->kind != TK_EOF && !is(P, "}") && (P->t == P->start || !next_stmt)) next(P);
  while (P->t->kind != TK_EOF) {
    if (is(P, "{")) braces++;
    if (is(P, "}")) {
      if (braces == 0) break;
      braces--;
    } else if (P->t->bol && braces == 0) break;
    next(P);
  }
  P->depth = 0;
  /* Skipped to the end of the file: a '}' missing there is a consequence. */
  P->panic = P->t->kind == TK_EOF;
}

/* A declaration keyword at the start of a line: the block before it was
 * not closed. */
static bool at_decl(parser *P) {
  return P->t->bol && (is(P, "config") || is(P, "module") || is(P, "train") || is(P, "decode"));
}

/* The '}' of a block opened at `open`. */
static void close_block(parser *P, mlc_loc open) {
  if (accept(P, "}") || P->panic) return;
  expected(P, "'}'");
  mlc_note(P->d, open, "to match this '{'");
}

/* A statement ends at a new line or at the '}' of its block. */
static bool end_of_stmt(parser *P, const char *what) {
  if (P->t->kind == TK_EOF || P->t->bol || is(P, "}")) return true;
  expected(P, what);
  return false;
}

/* An expression may continue with this token: it is on the same line, or
 * inside brackets. */
static bool continues(parser *P) { return !P->t->bol || P->depth > 0; }

static mlc_ast_expr *new_expr(parser *P, int kind, mlc_loc loc) {
  mlc_ast_expr *e = mlc_arena_alloc(P->a, sizeof *e);
  e->kind = (uint8_t)kind;
  e->loc = loc;
  return e;
}

static mlc_ast_expr *expr(parser *P);

/* args = [ arg { "," arg } ] ")"     arg = [ IDENT "=" ] expr
 * (the opening parenthesis has been consumed) */
static void args(parser *P, mlc_ast_arg **out, uint32_t *out_n, const char *close) {
  uint32_t n = 0, cap = 0;
  mlc_ast_arg *v = NULL;
  P->depth++;
  while (!is(P, close) && P->t->kind != TK_EOF && !P->panic) {
    if (n && !accept(P, ",")) {
      expected(P, mlc_arena_printf(P->a, "',' or '%s'", close));
      break;
    }
    if (is(P, close)) break; /* trailing comma */
    mlc_ast_arg arg = {.loc = P->t->loc};
    if ((P->t->kind == TK_IDENT || P->t->kind == TK_KEYWORD) && mlc_tok_is(P->t + 1, "=")) {
      arg.name = mlc_arena_strndup(P->a, P->t->s, P->t->len);
      P->t += 2;
    }
    arg.value = expr(P);
    if (!arg.value) break;
    if (n == cap) {
      cap = cap ? cap * 2 : 4;
      v = mlc_arena_grow(P->a, v, n * sizeof *v, cap * sizeof *v);
    }
    v[n++] = arg;
  }
  P->depth--;
  if (!P->panic) expect(P, close);
  *out = v;
  *out_n = n;
}

/* primary = INT | FLOAT | STRING | "true" | "false" | IDENT [ "(" args ")" ]
 *         | "(" expr ")" | "[" [ expr { "," expr } ] "]" */
static mlc_ast_expr *primary(parser *P) {
  const mlc_token *t = P->t;
  mlc_ast_expr *e;
  if (t->bol && P->depth == 0 && t != P->start) { /* `x = a +` at the end of a line: the line ended */
    expected(P, "an expression");
    return NULL;
  }
  switch (t->kind) {
  case TK_INT:
    e = new_expr(P, AST_INT, t->loc);
    e->ival = t->ival;
    e->fval = t->fval;
    next(P);
    return e;
  case TK_STRING:
    e = new_expr(P, AST_STRING, t->loc);
    e->name = mlc_arena_strndup(P->a, t->s, t->len);
    next(P);
    return e;
  case TK_FLOAT:
    e = new_expr(P, AST_FLOAT, t->loc);
    e->fval = t->fval;
    next(P);
    return e;
  case TK_IDENT:
    e = new_expr(P, AST_NAME, t->loc);
    e->name = mlc_arena_strndup(P->a, t->s, t->len);
    next(P);
    if (is(P, "(") && continues(P)) {
      e->kind = AST_CALL;
      next(P);
      args(P, &e->args, &e->nargs, ")");
      if (P->panic) return NULL;
    }
    return e;
  default:
    break;
  }
  if (mlc_tok_is(t, "true") || mlc_tok_is(t, "false")) {
    e = new_expr(P, AST_BOOL, t->loc);
    e->ival = mlc_tok_is(t, "true");
    next(P);
    return e;
  }
  if (accept(P, "(")) {
    P->depth++;
    e = expr(P);
    P->depth--;
    if (!e || !expect(P, ")")) return NULL;
    return e;
  }
  if (is(P, "[")) {
    e = new_expr(P, AST_LIST, t->loc);
    next(P);
    args(P, &e->args, &e->nargs, "]");
    for (uint32_t i = 0; i < e->nargs; i++)
      if (e->args[i].name) {
        mlc_error(P->d, e->args[i].loc, "a list cannot have named elements");
        P->panic = true;
      }
    return P->panic ? NULL : e;
  }
  expected(P, "an expression");
  return NULL;
}

static mlc_ast_expr *binary(parser *P, char op, mlc_ast_expr *lhs, mlc_ast_expr *rhs, mlc_loc loc);
static bool count_op(parser *P);

/* index = "[" item { "," item } "]"     item = expr | [ expr ] ":" [ expr ] [ ":" [ expr ] ]
 * (Python's subscript, one item per axis; the base has been parsed) */
static mlc_ast_expr *subscript(parser *P, mlc_ast_expr *base) {
  mlc_ast_expr *e = new_expr(P, AST_INDEX, P->t->loc);
  e->lhs = base;
  next(P);
  P->depth++;
  uint32_t cap = 0;
  while (!P->panic) {
    mlc_ast_arg item = {.loc = P->t->loc};
    mlc_ast_expr *first = is(P, ":") ? NULL : expr(P);
    if (!first && !is(P, ":")) break;
    if (is(P, ":")) {
      mlc_ast_expr *s = new_expr(P, AST_SLICE, item.loc);
      s->nargs = 3;
      s->args = mlc_arena_alloc(P->a, 3 * sizeof *s->args);
      s->args[0] = (mlc_ast_arg){.loc = item.loc, .value = first};
      for (int k = 1; k < 3 && accept(P, ":"); k++) {
        s->args[k].loc = P->t->loc;
        if (!is(P, ":") && !is(P, ",") && !is(P, "]")) s->args[k].value = expr(P);
        if (P->panic) break;
      }
      first = s;
    }
    item.value = first;
    if (e->nargs == cap) {
      cap = cap ? cap * 2 : 4;
      e->args = mlc_arena_grow(P->a, e->args, e->nargs * sizeof *e->args, cap * sizeof *e->args);
    }
    e->args[e->nargs++] = item;
    if (!accept(P, ",")) break;
  }
  P->depth--;
  if (P->panic || !expect(P, "]")) return NULL;
  return e;
}

/* unary = "-" unary | primary { index } [ "**" unary ]    (so -x ** 2 is -(x ** 2), as in Python) */
static mlc_ast_expr *unary(parser *P) {
  if (++P->nest > MAX_DEPTH) {
    if (!P->panic) mlc_error(P->d, P->t->loc, "expression is nested too deeply (the limit is %d)", MAX_DEPTH);
    P->panic = true;
    P->nest--;
    return NULL;
  }
  mlc_ast_expr *e;
  if (is(P, "-")) {
    e = new_expr(P, AST_NEG, P->t->loc);
    next(P);
    e->lhs = unary(P);
    if (!e->lhs) e = NULL;
  } else {
    e = primary(P);
    while (e && continues(P) && is(P, "[")) e = subscript(P, e);
    if (e && continues(P) && is(P, "**")) {
      mlc_loc loc = P->t->loc;
      if (!count_op(P)) return NULL;
      next(P);
      e = binary(P, '^', e, unary(P), loc);
    }
  }
  P->nest--;
  return e;
}

static mlc_ast_expr *binary(parser *P, char op, mlc_ast_expr *lhs, mlc_ast_expr *rhs, mlc_loc loc) {
  if (!lhs || !rhs) return NULL;
  mlc_ast_expr *e = new_expr(P, AST_BINARY, loc);
  e->op = op;
  e->lhs = lhs;
  e->rhs = rhs;
  return e;
}

/* Counts a binary operator.  Operator chains are not recursion in the
 * parser, but they make the tree deep, and every pass that walks it
 * recurses: too many operators in one expression is refused here. */
static bool count_op(parser *P) {
  if (++P->ops <= MAX_OPS) return true;
  if (!P->panic) mlc_error(P->d, P->t->loc, "expression has more than %d operators; split it into several statements", MAX_OPS);
  P->panic = true;
  return false;
}

/* term = unary { ("*" | "/" | "@") unary } */
static mlc_ast_expr *term(parser *P) {
  mlc_ast_expr *e = unary(P);
  while (e && continues(P) && (is(P, "*") || is(P, "/") || is(P, "@"))) {
    char op = P->t->s[0];
    mlc_loc loc = P->t->loc;
    if (!count_op(P)) return NULL;
    next(P);
    e = binary(P, op, e, unary(P), loc);
  }
  return e;
}

/* sum = term { ("+" | "-") term } */
static mlc_ast_expr *sum(parser *P) {
  mlc_ast_expr *e = term(P);
  while (e && continues(P) && (is(P, "+") || is(P, "-"))) {
    char op = P->t->s[0];
    mlc_loc loc = P->t->loc;
    if (!count_op(P)) return NULL;
    next(P);
    e = binary(P, op, e, term(P), loc);
  }
  return e;
}

/* expr = sum [ ("<" | "<=" | ">" | ">=" | "==" | "!=") sum ]    (comparisons do not chain) */
static mlc_ast_expr *expr(parser *P) {
  if (P->nest == 0) P->ops = 0; /* a new top-level expression */
  mlc_ast_expr *e = sum(P);
  static const char *const ops[] = {"<", "<=", ">", ">=", "==", "!="};
  static const char codes[] = "<l>gen";
  for (int k = 0; e && k < 6; k++) {
    if (!continues(P) || !is(P, ops[k])) continue;
    mlc_loc loc = P->t->loc;
    if (!count_op(P)) return NULL;
    next(P);
    e = binary(P, codes[k], e, sum(P), loc);
    break;
  }
  return e;
}

/* type = DTYPE "[" [ expr { "," expr } ] "]" */
static mlc_ast_type *type(parser *P) {
  mlc_ast_type *ty = mlc_arena_alloc(P->a, sizeof *ty);
  ty->loc = P->t->loc;
  if (P->t->kind != TK_IDENT || !(ty->dtype = mlc_dtype_from_name(P->t->s, P->t->len))) {
    expected(P, "a dtype (f32, bf16, f16, i32, i64, bool)");
    return NULL;
  }
  next(P);
  if (!expect(P, "[")) return NULL;
  mlc_ast_arg *dims;
  args(P, &dims, &ty->rank, "]");
  if (P->panic) return NULL;
  if (ty->rank > MLC_MAX_RANK) {
    mlc_error(P->d, ty->loc, "type has %u dimensions; mlc supports at most %d", ty->rank, MLC_MAX_RANK);
    return NULL;
  }
  ty->dims = mlc_arena_alloc(P->a, (ty->rank + 1) * sizeof *ty->dims);
  for (uint32_t i = 0; i < ty->rank; i++) {
    if (dims[i].name) {
      mlc_error(P->d, dims[i].loc, "a dimension cannot be named");
      return NULL;
    }
    ty->dims[i] = dims[i].value;
  }
  return ty;
}

/* param_list = "(" [ IDENT [ ":" type | "=" expr ] { "," ... } ] ")"
 * Used for module constructor parameters (defaults) and forward
 * parameters (types). */
static void param_list(parser *P, mlc_ast_param **out, uint32_t *out_n, bool typed) {
  uint32_t n = 0, cap = 0;
  mlc_ast_param *v = NULL;
  if (!expect(P, "(")) return;
  P->depth++;
  while (!is(P, ")") && P->t->kind != TK_EOF && !P->panic) {
    if (n && !accept(P, ",")) {
      expected(P, "',' or ')'");
      break;
    }
    mlc_ast_param prm = {.loc = P->t->loc};
    if (!(prm.name = ident(P, "a parameter name"))) break;
    for (uint32_t k = 0; k < n; k++)
      if (!strcmp(v[k].name, prm.name)) {
        mlc_error(P->d, prm.loc, "parameter '%s' is declared twice", prm.name);
        mlc_note(P->d, v[k].loc, "the first '%s' is here", prm.name);
        break;
      }
    if (typed && accept(P, ":")) {
      if (!(prm.type = type(P))) break;
    } else if (!typed && accept(P, "=")) {
      if (!(prm.def = expr(P))) break;
    }
    if (n == cap) {
      cap = cap ? cap * 2 : 4;
      v = mlc_arena_grow(P->a, v, n * sizeof *v, cap * sizeof *v);
    }
    v[n++] = prm;
  }
  P->depth--;
  if (!P->panic) expect(P, ")");
  *out = v;
  *out_n = n;
}

static mlc_ast_stmt **block(parser *P, uint32_t *out_n);

/* stmt = "return" expr { "," expr } | "for" IDENT "in" IDENT block
 *      | IDENT { "," IDENT } "=" expr */
static mlc_ast_stmt *stmt(parser *P) {
  mlc_ast_stmt *s = mlc_arena_alloc(P->a, sizeof *s);
  s->loc = P->t->loc;
  if (accept(P, "return")) {
    s->kind = ST_RETURN;
    do {
      if (s->nvalues == MAX_RESULTS) {
        mlc_error(P->d, P->t->loc, "a return gives at most %d values", MAX_RESULTS);
        P->panic = true;
        return NULL;
      }
      s->values = mlc_arena_grow(P->a, s->values, s->nvalues * sizeof *s->values, (s->nvalues + 1) * sizeof *s->values);
      s->values[s->nvalues++] = expr(P);
    } while (!P->panic && accept(P, ","));
    s->value = s->values[0];
  } else if (accept(P, "for")) {
    s->kind = ST_FOR;
    if (!(s->name = ident(P, "a loop variable")) || !expect(P, "in")) return NULL;
    s->iter_loc = P->t->loc;
    if (!(s->iter = ident(P, "a module list to iterate over"))) return NULL;
    s->body = block(P, &s->nbody);
  } else {
    s->kind = ST_ASSIGN;
    do {
      if (s->nnames == MAX_RESULTS) {
        mlc_error(P->d, P->t->loc, "an assignment unpacks at most %d values", MAX_RESULTS);
        P->panic = true;
        return NULL;
      }
      mlc_loc at = P->t->loc;
      const char *name = ident(P, s->nnames ? "a name to unpack into" : "a statement (name = expression, return or for)");
      if (!name) return NULL;
      s->names = mlc_arena_grow(P->a, s->names, s->nnames * sizeof *s->names, (s->nnames + 1) * sizeof *s->names);
      s->name_locs = mlc_arena_grow(P->a, s->name_locs, s->nnames * sizeof *s->name_locs, (s->nnames + 1) * sizeof *s->name_locs);
      s->name_locs[s->nnames] = at;
      s->names[s->nnames++] = name;
    } while (accept(P, ","));
    s->name = s->names[0];
    if (!expect(P, "=")) return NULL;
    s->value = expr(P);
  }
  if (P->panic || !end_of_stmt(P, "the end of the statement (a new line)")) return NULL;
  return s;
}

/* block = "{" { stmt } "}" */
static mlc_ast_stmt **block(parser *P, uint32_t *out_n) {
  uint32_t n = 0, cap = 0;
  mlc_ast_stmt **v = NULL;
  *out_n = 0;
  mlc_loc open = P->t->loc;
  if (!expect(P, "{")) {
    /* Only the '{' at the end of the line is missing: read the block as if
     * it were there, so that its statements are not taken for members. */
    if (!P->t->bol || P->t->kind == TK_EOF) return NULL;
    open = P->t[-1].loc;
    P->panic = false;
  }
  if (P->blocks >= MAX_DEPTH) {
    mlc_error(P->d, open, "blocks are nested too deeply (the limit is %d)", MAX_DEPTH);
    for (int braces = 1; braces > 0 && P->t->kind != TK_EOF; next(P)) braces += is(P, "{") - is(P, "}");
    P->panic = true;
    return NULL;
  }
  P->blocks++;
  while (!is(P, "}") && P->t->kind != TK_EOF && !at_decl(P)) {
    P->start = P->t;
    mlc_ast_stmt *s = stmt(P);
    if (!s) {
      if (at_decl(P)) break;
      sync(P);
      continue;
    }
    if (n == cap) {
      cap = cap ? cap * 2 : 8;
      v = mlc_arena_grow(P->a, v, n * sizeof *v, cap * sizeof *v);
    }
    v[n++] = s;
  }
  P->blocks--;
  close_block(P, open);
  *out_n = n;
  return v;
}

/* config = "config" "{" { IDENT "=" expr } "}" */
static void config(parser *P, mlc_ast_file *f) {
  mlc_loc open = P->t->loc;
  if (!expect(P, "{")) return;
  while (!is(P, "}") && P->t->kind != TK_EOF && !at_decl(P)) {
    P->start = P->t;
    mlc_ast_config c = {.loc = P->t->loc};
    /* No end_of_stmt() here: entries may share a line, as in
     * config { vocab = 32000  dim = 2048 }, since an entry always starts
     * with IDENT '=' and cannot be read as part of the previous value. */
    if (!(c.name = ident(P, "a config name")) || !expect(P, "=") || !(c.value = expr(P))) {
      if (at_decl(P)) break;
      sync(P);
      continue;
    }
    f->config = mlc_arena_grow(P->a, f->config, f->nconfig * sizeof *f->config, (f->nconfig + 1) * sizeof *f->config);
    f->config[f->nconfig++] = c;
  }
  close_block(P, open);
}

/* path = IDENT { "." ( IDENT | INT ) }
 * The parts after the first, read once `first` has been. */
static bool path(parser *P, mlc_ast_path *out, const char *first, mlc_loc first_loc) {
  *out = (mlc_ast_path){0};
  for (;;) {
    out->name = mlc_arena_grow(P->a, out->name, out->n * sizeof *out->name, (out->n + 1) * sizeof *out->name);
    out->loc = mlc_arena_grow(P->a, out->loc, out->n * sizeof *out->loc, (out->n + 1) * sizeof *out->loc);
    out->name[out->n] = first;
    out->loc[out->n++] = first_loc;
    if (P->t->kind == TK_FLOAT && P->t->s[0] == '.' && !P->t->bol) {
      first_loc = P->t->loc;
      first_loc.col++;
      const mlc_token *t = P->t;
      if (strspn(t->s + 1, "0123456789") != t->len - 1) {
        expected(P, "a member name or index after '.'");
        return false;
      }
      first = mlc_arena_strndup(P->a, t->s + 1, t->len - 1);
      next(P);
      continue;
    }
    if (!is(P, ".") || out->n >= 64) return true;
    next(P);
    first_loc = P->t->loc;
    if (P->t->kind == TK_INT) {
      first = mlc_arena_strndup(P->a, P->t->s, P->t->len);
      next(P);
    } else if (!(first = ident(P, "a member name after '.'"))) {
      return false;
    }
  }
}

/* member = "param" IDENT ":" type [ "=" expr ]
 *        | "forward" param_list block
 *        | IDENT "=" [ "repeat" "(" expr ")" ] call
 *        | path "=" path                      (weight sharing: head.weight = embed.weight) */
static void member(parser *P, mlc_ast_module *m) {
  mlc_ast_member mem = {.loc = P->t->loc};
  if (is(P, "forward")) {
    if (m->has_forward) {
      mlc_error(P->d, P->t->loc, "module %s already has a forward", m->name);
      mlc_note(P->d, m->forward_loc, "the first forward is here");
      P->panic = true;
    }
    m->has_forward = true;
    m->forward_loc = P->t->loc;
    next(P);
    param_list(P, &m->fparams, &m->nfparams, true);
    if (P->panic) return;
    m->body = block(P, &m->nbody);
    return;
  }
  if (accept(P, "param")) {
    mem.kind = MEM_PARAM;
    mem.loc = P->t->loc;
    if (!(mem.name = ident(P, "a parameter name")) || !expect(P, ":") || !(mem.type = type(P))) return;
    if (accept(P, "=") && !(mem.ctor = expr(P))) return;
  } else {
    mem.kind = MEM_SUBMODULE;
    if (!(mem.name = ident(P, "a member (name = Module(...), param or forward)"))) return;
    if (is(P, ".") || (P->t->kind == TK_FLOAT && P->t->s[0] == '.' && !P->t->bol)) {
      mem.kind = MEM_TIE;
      if (!path(P, &mem.target, mem.name, mem.loc) || !expect(P, "=")) return;
      mlc_loc at = P->t->loc;
      const char *first = ident(P, "a parameter to share, such as embed.weight");
      if (!first || !path(P, &mem.source, first, at)) return;
    } else if (!expect(P, "=")) {
      return;
    } else if (accept(P, "repeat")) {
      if (!expect(P, "(")) return;
      P->depth++;
      mem.repeat = expr(P);
      P->depth--;
      if (!mem.repeat || !expect(P, ")")) return;
    }
    const mlc_token *at = P->t;
    if (mem.kind == MEM_SUBMODULE && !(mem.ctor = expr(P))) return;
    if (mem.kind == MEM_SUBMODULE && mem.ctor->kind != AST_CALL) {
      mlc_error(P->d, at->loc, "expected a module constructor such as Linear(16, 16), got %s", tokdesc(P, at));
      P->panic = true;
      return;
    }
  }
  if (P->t->kind != TK_EOF && !P->t->bol && !is(P, "}")) {
    expected(P, "the end of the member (a new line)");
    return;
  }
  m->members = mlc_arena_grow(P->a, m->members, m->nmembers * sizeof *m->members, (m->nmembers + 1) * sizeof *m->members);
  m->members[m->nmembers++] = mem;
}

/* module = "module" IDENT [ param_list ] "{" { member } "}" */
static void module(parser *P, mlc_ast_file *f) {
  mlc_ast_module m = {.loc = P->t->loc};
  if (!(m.name = ident(P, "a module name"))) return;
  if (is(P, "(")) param_list(P, &m.params, &m.nparams, false);
  mlc_loc open = P->t->loc;
  if (P->panic || !expect(P, "{")) return;
  while (!is(P, "}") && P->t->kind != TK_EOF && !at_decl(P)) {
    P->start = P->t;
    member(P, &m);
    if (P->panic) {
      if (at_decl(P)) break;
      sync(P);
    }
  }
  close_block(P, open);
  f->modules = mlc_arena_grow(P->a, f->modules, f->nmodules * sizeof *f->modules, (f->nmodules + 1) * sizeof *f->modules);
  f->modules[f->nmodules++] = m;
}

/* The head of a train or decode block after its keyword: the module's
 * name and its arguments, then the block's "{" (its place in *open); false
 * where they are not there. */
static bool block_head(parser *P, const char *what, const char **model, mlc_ast_arg **out_args, uint32_t *nargs,
                       bool *has_args, mlc_loc *open) {
  if (!(*model = ident(P, what))) return false;
  if (accept(P, "(")) {
    *has_args = true;
    args(P, out_args, nargs, ")");
    if (P->panic) return false;
  }
  *open = P->t->loc;
  return expect(P, "{");
}

/* After a statement of a train or decode block: a new line must follow;
 * true where the block's statements stop (a declaration after an error). */
static bool stmt_end(parser *P) {
  if (!P->panic && P->t->kind != TK_EOF && !P->t->bol && !is(P, "}")) expected(P, "the end of the statement (a new line)");
  if (!P->panic) return false;
  if (at_decl(P)) return true;
  sync(P);
  return false;
}

/* train = "train" IDENT [ "(" args ")" ] "{" { tstmt } "}"
 * tstmt = "input" IDENT ":" type | "loss" "=" expr | "optimizer" "=" call
 *       | "precision" "(" args ")" | "shard" "=" call | "memory_budget" "=" expr
 *       | "clip_grad_norm" "=" expr | "accum" "=" expr */
static void train(parser *P, mlc_ast_file *f, mlc_loc loc) {
  mlc_ast_train *t = mlc_arena_alloc(P->a, sizeof *t);
  t->loc = loc;
  t->model_loc = P->t->loc;
  if (f->train) {
    mlc_error(P->d, loc, "only one train block is allowed");
    mlc_note(P->d, f->train->loc, "the first train block is here");
    P->panic = true;
    return;
  }
  f->train = t;
  mlc_loc open;
  if (!block_head(P, "the name of the module to train", &t->model, &t->args, &t->nargs, &t->has_args, &open)) return;
  while (!is(P, "}") && P->t->kind != TK_EOF && !at_decl(P)) {
    P->start = P->t;
    mlc_loc at = P->t->loc;
    mlc_ast_expr **slot = NULL;
    if (accept(P, "input")) {
      mlc_ast_param in = {.loc = P->t->loc};
      if ((in.name = ident(P, "an input name")) && expect(P, ":") && (in.type = type(P))) {
        t->inputs = mlc_arena_grow(P->a, t->inputs, t->ninputs * sizeof *t->inputs, (t->ninputs + 1) * sizeof *t->inputs);
        t->inputs[t->ninputs++] = in;
      }
    } else if (is(P, "precision")) {
      slot = &t->precision;
      if (*slot) {
        mlc_error(P->d, at, "precision is already set");
        mlc_note(P->d, (*slot)->loc, "it is first set here");
      }
      *slot = expr(P);
    } else if (is(P, "loss") || is(P, "optimizer") || is(P, "shard") || is(P, "memory_budget") || is(P, "clip_grad_norm") ||
               is(P, "accum")) {
      slot = is(P, "loss")             ? &t->loss
             : is(P, "optimizer")      ? &t->optimizer
             : is(P, "shard")          ? &t->shard
             : is(P, "memory_budget")  ? &t->memory_budget
             : is(P, "clip_grad_norm") ? &t->clip_grad_norm
                                       : &t->accum;
      const char *what = mlc_arena_strndup(P->a, P->t->s, P->t->len);
      next(P);
      if (*slot) {
        mlc_error(P->d, at, "%s is already set", what);
        mlc_note(P->d, (*slot)->loc, "it is first set here");
      }
      if (expect(P, "=")) *slot = expr(P);
    } else {
      expected(P, "input, loss, optimizer, precision, shard, memory_budget, clip_grad_norm or accum");
    }
    if (stmt_end(P)) break;
  }
  close_block(P, open);
}

/* decode = "decode" IDENT [ "(" args ")" ] "{" { dstmt } "}"
 * dstmt  = "max_ctx" "=" expr | "prefill" "=" expr */
static void decode(parser *P, mlc_ast_file *f, mlc_loc loc) {
  mlc_ast_decode *t = mlc_arena_alloc(P->a, sizeof *t);
  t->loc = loc;
  t->model_loc = P->t->loc;
  if (f->decode) {
    mlc_error(P->d, loc, "only one decode block is allowed");
    mlc_note(P->d, f->decode->loc, "the first decode block is here");
    P->panic = true;
    return;
  }
  f->decode = t;
  mlc_loc open;
  if (!block_head(P, "the name of the module to decode with", &t->model, &t->args, &t->nargs, &t->has_args, &open)) return;
  while (!is(P, "}") && P->t->kind != TK_EOF && !at_decl(P)) {
    P->start = P->t;
    mlc_loc at = P->t->loc;
    if (is(P, "max_ctx") || is(P, "prefill")) {
      mlc_ast_expr **slot = is(P, "max_ctx") ? &t->max_ctx : &t->prefill;
      const char *what = mlc_arena_strndup(P->a, P->t->s, P->t->len);
      next(P);
      if (*slot) {
        mlc_error(P->d, at, "%s is already set", what);
        mlc_note(P->d, (*slot)->loc, "it is first set here");
      }
      if (expect(P, "=")) *slot = expr(P);
    } else {
      expected(P, "max_ctx or prefill");
    }
    if (stmt_end(P)) break;
  }
  close_block(P, open);
}

/* file = { "config" config | "module" module | "train" train | "decode" decode } EOF */
mlc_ast_file *mlc_parse(mlc_arena *a, mlc_diag *d, const mlc_token *toks, uint32_t ntoks) {
  parser P = {.a = a, .d = d, .t = toks, .end = toks + ntoks};
  mlc_ast_file *f = mlc_arena_alloc(a, sizeof *f);
  while (P.t->kind != TK_EOF) {
    mlc_loc loc = P.t->loc;
    P.start = P.t;
    if (accept(&P, "config")) config(&P, f);
    else if (accept(&P, "module")) module(&P, f);
    else if (accept(&P, "train")) train(&P, f, loc);
    else if (accept(&P, "decode")) decode(&P, f, loc);
    else expected(&P, "'config', 'module', 'train' or 'decode'");
    if (P.panic) {
      /* At the top level, skip to the next line that starts a declaration. */
      while (P.t->kind != TK_EOF &&
             !(P.t->bol && (is(&P, "config") || is(&P, "module") || is(&P, "train") || is(&P, "decode"))))
        next(&P);
      P.panic = false;
      P.depth = 0;
    }
    if (d->errors > MLC_MAX_ERRORS) break;
  }
  return f;
}
