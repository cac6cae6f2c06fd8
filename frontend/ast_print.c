/* `mlc compile --emit ast`: the AST as indented S-expressions, stable for
 * golden tests.  Locations are printed as line:col. */
#include "frontend/frontend.h"

static void pexpr(FILE *o, const mlc_ast_expr *e);

static void pargs(FILE *o, const mlc_ast_arg *a, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) {
    fputc(' ', o);
    if (a[i].name) fprintf(o, "%s=", a[i].name);
    pexpr(o, a[i].value);
  }
}

const char *mlc_ast_op_name(char op) {
  switch (op) {
  case '^': return "**";
  case 'l': return "<=";
  case 'g': return ">=";
  case 'e': return "==";
  case 'n': return "!=";
  case '+': return "+";
  case '-': return "-";
  case '*': return "*";
  case '/': return "/";
  case '@': return "@";
  case '<': return "<";
  case '>': return ">";
  default: return "?";
  }
}

static void pexpr(FILE *o, const mlc_ast_expr *e) {
  if (!e) { fprintf(o, "<error>"); return; }
  switch (e->kind) {
  case AST_INT: fprintf(o, "%lld", (long long)e->ival); break;
  case AST_FLOAT: fprintf(o, "%.9g", e->fval); break;
  case AST_BOOL: fprintf(o, e->ival ? "true" : "false"); break;
  case AST_NAME: fprintf(o, "%s", e->name); break;
  case AST_STRING: fprintf(o, "\"%s\"", e->name); break;
  case AST_NEG: fprintf(o, "(neg "); pexpr(o, e->lhs); fputc(')', o); break;
  case AST_BINARY:
    fprintf(o, "(%s ", mlc_ast_op_name(e->op));
    pexpr(o, e->lhs);
    fputc(' ', o);
    pexpr(o, e->rhs);
    fputc(')', o);
    break;
  case AST_CALL: fprintf(o, "(call %s", e->name); pargs(o, e->args, e->nargs); fputc(')', o); break;
  case AST_LIST: fprintf(o, "(list"); pargs(o, e->args, e->nargs); fputc(')', o); break;
  case AST_INDEX: fprintf(o, "(index "); pexpr(o, e->lhs); pargs(o, e->args, e->nargs); fputc(')', o); break;
  case AST_SLICE:
    fprintf(o, "(slice");
    for (uint32_t i = 0; i < e->nargs; i++) {
      fputc(' ', o);
      if (e->args[i].value) pexpr(o, e->args[i].value);
      else fputc('_', o);
    }
    fputc(')', o);
    break;
  }
}

static void ptype(FILE *o, const mlc_ast_type *t) {
  if (!t) return;
  fprintf(o, " : %s[", mlc_dtype_name(t->dtype));
  for (uint32_t i = 0; i < t->rank; i++) {
    if (i) fprintf(o, ", ");
    pexpr(o, t->dims[i]);
  }
  fputc(']', o);
}

static void pparams(FILE *o, const mlc_ast_param *p, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) {
    fprintf(o, "%s%s", i ? ", " : "", p[i].name);
    ptype(o, p[i].type);
    if (p[i].def) { fprintf(o, " = "); pexpr(o, p[i].def); }
  }
}

static void pstmts(FILE *o, mlc_ast_stmt *const *s, uint32_t n, int ind) {
  for (uint32_t i = 0; i < n; i++) {
    fprintf(o, "%*s%u:%u ", ind, "", s[i]->loc.line, s[i]->loc.col);
    switch (s[i]->kind) {
    case ST_ASSIGN:
      for (uint32_t k = 0; k < s[i]->nnames; k++) fprintf(o, "%s%s", k ? ", " : "", s[i]->names[k]);
      fprintf(o, " = ");
      pexpr(o, s[i]->value);
      fputc('\n', o);
      break;
    case ST_RETURN:
      fprintf(o, "return ");
      for (uint32_t k = 0; k < s[i]->nvalues; k++) {
        if (k) fprintf(o, ", ");
        pexpr(o, s[i]->values[k]);
      }
      fputc('\n', o);
      break;
    case ST_FOR:
      fprintf(o, "for %s in %s\n", s[i]->name, s[i]->iter);
      pstmts(o, s[i]->body, s[i]->nbody, ind + 2);
      break;
    }
  }
}

void mlc_ast_print(FILE *o, const mlc_ast_file *f) {
  for (uint32_t i = 0; i < f->nconfig; i++) {
    fprintf(o, "config %s = ", f->config[i].name);
    pexpr(o, f->config[i].value);
    fputc('\n', o);
  }
  for (uint32_t i = 0; i < f->nmodules; i++) {
    const mlc_ast_module *m = &f->modules[i];
    fprintf(o, "%u:%u module %s(", m->loc.line, m->loc.col, m->name);
    pparams(o, m->params, m->nparams);
    fprintf(o, ")\n");
    for (uint32_t k = 0; k < m->nmembers; k++) {
      const mlc_ast_member *mem = &m->members[k];
      fprintf(o, "  %u:%u ", mem->loc.line, mem->loc.col);
      if (mem->kind == MEM_PARAM) {
        fprintf(o, "param %s", mem->name);
        ptype(o, mem->type);
        if (mem->ctor) { fprintf(o, " = "); pexpr(o, mem->ctor); }
      } else if (mem->kind == MEM_TIE) {
        for (uint32_t j = 0; j < mem->target.n; j++) fprintf(o, "%s%s", j ? "." : "tie ", mem->target.name[j]);
        for (uint32_t j = 0; j < mem->source.n; j++) fprintf(o, "%s%s", j ? "." : " = ", mem->source.name[j]);
      } else {
        fprintf(o, "%s = ", mem->name);
        if (mem->repeat) { fprintf(o, "repeat "); pexpr(o, mem->repeat); fputc(' ', o); }
        pexpr(o, mem->ctor);
      }
      fputc('\n', o);
    }
    if (m->has_forward) {
      fprintf(o, "  %u:%u forward(", m->forward_loc.line, m->forward_loc.col);
      pparams(o, m->fparams, m->nfparams);
      fprintf(o, ")\n");
      pstmts(o, m->body, m->nbody, 4);
    }
  }
  if (f->train) {
    const mlc_ast_train *t = f->train;
    fprintf(o, "%u:%u train %s", t->loc.line, t->loc.col, t->model);
    if (t->has_args) { fputc('(', o); pargs(o, t->args, t->nargs); fputc(')', o); }
    fputc('\n', o);
    for (uint32_t i = 0; i < t->ninputs; i++) {
      fprintf(o, "  input %s", t->inputs[i].name);
      ptype(o, t->inputs[i].type);
      fputc('\n', o);
    }
    if (t->loss) { fprintf(o, "  loss = "); pexpr(o, t->loss); fputc('\n', o); }
    if (t->optimizer) { fprintf(o, "  optimizer = "); pexpr(o, t->optimizer); fputc('\n', o); }
    if (t->precision) { fprintf(o, "  "); pexpr(o, t->precision); fputc('\n', o); }
    if (t->shard) { fprintf(o, "  shard = "); pexpr(o, t->shard); fputc('\n', o); }
    if (t->memory_budget) { fprintf(o, "  memory_budget = "); pexpr(o, t->memory_budget); fputc('\n', o); }
    if (t->clip_grad_norm) { fprintf(o, "  clip_grad_norm = "); pexpr(o, t->clip_grad_norm); fputc('\n', o); }
    if (t->accum) { fprintf(o, "  accum = "); pexpr(o, t->accum); fputc('\n', o); }
  }
  if (f->decode) {
    const mlc_ast_decode *t = f->decode;
    fprintf(o, "%u:%u decode %s", t->loc.line, t->loc.col, t->model);
    if (t->has_args) { fputc('(', o); pargs(o, t->args, t->nargs); fputc(')', o); }
    fputc('\n', o);
    if (t->max_ctx) { fprintf(o, "  max_ctx = "); pexpr(o, t->max_ctx); fputc('\n', o); }
    if (t->prefill) { fprintf(o, "  prefill = "); pexpr(o, t->prefill); fputc('\n', o); }
  }
}
