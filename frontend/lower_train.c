/* Lowering, the file's top level: config values (with -D overrides),
 * the entry points (forward and its inputs), the train block (optimizer,
 * schedule, precision, accumulation: the train entry) and the decode
 * block's prefill and step entries; and mlc_lower, which runs them. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/lower_impl.h"

/* ---- config, entry points, train block ---- */

static mlc_value parse_define(mlc_lowerer *L, const mlc_define *def) {
  const char *s = def->value;
  char *end;
  if (!strcmp(s, "true") || !strcmp(s, "false")) return (mlc_value){.kind = V_BOOL, .i = !strcmp(s, "true")};
  uint8_t dt = mlc_dtype_from_name(s, strlen(s));
  if (dt) return (mlc_value){.kind = V_DTYPE, .i = dt};
  errno = 0;
  long long i = strtoll(s, &end, 10);
  if (*s && !*end && errno == 0) return vnum_i(i);
  if (*s && !*end) {
    mlc_error(L->d, (mlc_loc){0}, "-D %s=%s: the integer is too large (the limit is 2^63-1)", def->name, s);
    return mlc_verr();
  }
  errno = 0;
  double f = strtod(s, &end);
  if (*s && !*end && errno == 0 && isfinite(f)) return vnum_f(f);
  mlc_error(L->d, (mlc_loc){0}, "-D %s=%s: '%s' is not a number, true/false or a dtype", def->name, s, s);
  return mlc_verr();
}

static void eval_config(mlc_lowerer *L, const mlc_lower_options *opt) {
  const mlc_ast_file *f = L->ast;
  bool *used = mlc_arena_alloc(L->a, (opt->ndefines + 1) * sizeof *used);
  for (uint32_t i = 0; i < f->nconfig; i++) {
    const mlc_ast_config *c = &f->config[i];
    if (lw_scope_get(&L->config, c->name)) {
      mlc_error(L->d, c->loc, "config value '%s' is defined twice", c->name);
      for (uint32_t k = 0; k < i; k++)
        if (!strcmp(f->config[k].name, c->name)) { mlc_note(L->d, f->config[k].loc, "the first '%s' is here", c->name); break; }
      continue;
    }
    mlc_value v = lw_eval(L, c->value);
    for (uint32_t k = 0; k < opt->ndefines; k++)
      if (!strcmp(opt->defines[k].name, c->name)) {
        v = parse_define(L, &opt->defines[k]);
        used[k] = true;
      }
    if (v.kind == V_TENSOR || v.kind == V_MODULE) {
      mlc_error(L->d, c->value->loc, "a config value must be a number, a bool or a dtype");
      v = mlc_verr();
    }
    lw_scope_set(L, &L->config, c->name, v);
  }
  for (uint32_t k = 0; k < opt->ndefines; k++) {
    if (used[k]) continue;
    suggest s = {.want = opt->defines[k].name, .dist = 99};
    lw_consider_scope(&s, &L->config);
    mlc_error(L->d, (mlc_loc){0}, "-D %s: the model has no config value named '%s'%s", opt->defines[k].name,
              opt->defines[k].name, lw_hint(L, &s));
  }
}

/* The model's constructor call: explicit arguments from the train block, or
 * each constructor parameter taken from the config value of the same name. */
static mlc_instance *instantiate_root(mlc_lowerer *L, const mlc_ast_module *mod, const mlc_ast_train *t, mlc_loc loc) {
  mlc_ast_expr *ctor = mlc_arena_alloc(L->a, sizeof *ctor);
  ctor->kind = AST_CALL;
  ctor->loc = loc;
  ctor->name = mod->name;
  if (t && t->has_args) {
    ctor->args = t->args;
    ctor->nargs = t->nargs;
  } else {
    ctor->args = mlc_arena_alloc(L->a, (mod->nparams + 1) * sizeof *ctor->args);
    bool ok = true;
    for (uint32_t i = 0; i < mod->nparams; i++) {
      if (!lw_scope_get(&L->config, mod->params[i].name)) {
        if (!mod->params[i].def) {
          mlc_error(L->d, mod->params[i].loc, "model parameter '%s' has no value: add it to config, give it a default, "
                    "or pass it in the train block", mod->params[i].name);
          ok = false;
        }
        continue;
      }
      mlc_ast_expr *name = mlc_arena_alloc(L->a, sizeof *name);
      *name = (mlc_ast_expr){.kind = AST_NAME, .loc = mod->params[i].loc, .name = mod->params[i].name};
      ctor->args[ctor->nargs++] = (mlc_ast_arg){.name = mod->params[i].name, .loc = mod->params[i].loc, .value = name};
    }
    if (!ok) return NULL;
  }
  return lw_instantiate(L, "", ctor);
}

static void begin_func(mlc_lowerer *L, const char *name) {
  L->f = mlc_program_add_func(L->p, name);
  L->param_node = mlc_arena_alloc(L->a, (L->p->nparams + 1) * sizeof *L->param_node);
  for (uint32_t i = 0; i < L->p->nparams; i++) L->param_node[i] = UINT32_MAX;
}

/* An entry's inputs and outputs are parameters of the generated C
 * functions (<name>_forward(m, x, ..., logits, loss)), which take the model
 * as `m` and keep a status in `st`: those names, and C's keywords, cannot
 * name them. */
static bool c_param_name_ok(mlc_lowerer *L, const char *name, mlc_loc loc, const char *what) {
  static const char *const c_words[] = {
    "m", "st", "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else", "enum",
    "extern", "float", "for", "goto", "if", "inline", "int", "long", "register", "restrict", "return", "short",
    "signed", "sizeof", "static", "struct", "switch", "typedef", "union", "unsigned", "void", "volatile", "while"};
  for (size_t i = 0; i < sizeof c_words / sizeof *c_words; i++)
    if (!strcmp(name, c_words[i])) {
      mlc_error(L->d, loc, "%s '%s' would be a parameter of the generated C API, where %s; give it another name", what,
                name, i < 2 ? "'m' is the model and 'st' a status" : "it is a C keyword");
      return false;
    }
  return true;
}

static mlc_value add_input(mlc_lowerer *L, const mlc_ast_param *prm) {
  mlc_type t;
  if (!c_param_name_ok(L, prm->name, prm->loc, "input")) return mlc_verr();
  if (!lw_eval_type(L, prm->type, &t)) return mlc_verr();
  for (uint32_t i = 0; i < L->f->inputs.n; i++)
    if (!strcmp(L->f->nodes[L->f->inputs.v[i]].a.name, prm->name)) {
      mlc_error(L->d, prm->loc, "input '%s' is declared twice", prm->name);
      return mlc_verr();
    }
  mlc_attrs a = {.name = prm->name};
  mlc_value v = mlc_emit(L, MLC_OP_INPUT, NULL, 0, &a, &t, prm->loc);
  if (v.kind == V_TENSOR) mlc_u32vec_push(L->a, &L->f->inputs, v.node);
  return v;
}

static void lower_forward(mlc_lowerer *L, mlc_instance *root) {
  const mlc_ast_module *mod = root->ast;
  if (!mod->has_forward) {
    mlc_error(L->d, mod->loc, "module %s has no forward", mod->name);
    return;
  }
  begin_func(L, "forward");
  mlc_value args[64];
  if (mod->nfparams > 64) { mlc_error(L->d, mod->forward_loc, "forward has more than 64 inputs"); return; }
  bool ok = true;
  for (uint32_t i = 0; i < mod->nfparams; i++) {
    const mlc_ast_param *prm = &mod->fparams[i];
    if (!prm->type) {
      mlc_error(L->d, prm->loc, "input '%s' of the model's forward needs a type, such as %s: f32[batch, 64]", prm->name,
                prm->name);
      ok = false;
      continue;
    }
    L->self = root; /* dims may use the model's arguments */
    args[i] = add_input(L, prm);
    L->self = NULL;
    ok &= args[i].kind == V_TENSOR;
  }
  if (!ok) return;
  mlc_value out = mlc_call_module(L, root, args, mod->nfparams, mod->forward_loc);
  if (out.kind == V_TENSOR) mlc_func_add_output(L->p, L->f, "output", out.node);
  if (out.kind != V_TUPLE) return;
  /* Several outputs: their names are the C API's parameters beside the
   * inputs', so they must differ from one another and from the inputs. */
  const mlc_tuple *t = out.tuple;
  for (uint32_t k = 0; k < t->n; k++) {
    bool clash = false;
    for (uint32_t j = 0; j < k && !clash; j++)
      if (!strcmp(t->names[j], t->names[k])) {
        mlc_error(L->d, t->locs[k], "the forward's outputs are named after what it returns, and '%s' is returned twice; "
                  "give the second a name of its own", t->names[k]);
        clash = true;
      }
    for (uint32_t i = 0; i < mod->nfparams && !clash; i++)
      if (!strcmp(mod->fparams[i].name, t->names[k])) {
        mlc_error(L->d, t->locs[k], "output '%s' would have the name of the forward's input '%s'; give it a name of its own",
                  t->names[k], t->names[k]);
        clash = true;
      }
    if (!clash && c_param_name_ok(L, t->names[k], t->locs[k], "output")) mlc_func_add_output(L->p, L->f, t->names[k], t->v[k].node);
  }
}

/* The schedule's arguments of either optimizer, spec[first..first+3):
 * warmup=, min_lr=, steps= (decay= names a curve, a word: taken out before
 * binding, as betas= is). */
static void lower_schedule(mlc_lowerer *L, const mlc_call *c, const char *const *spec, int nspec, int first,
                           const mlc_value *v, const bool *pr) {
  mlc_train_config *tc = &L->p->train;
  if (pr[first]) mlc_want_int(L, v[first], mlc_arg_loc(c, spec, nspec, first), "warmup (steps)", 0, (int64_t)1 << 40, &tc->warmup);
  if (pr[first + 1]) {
    mlc_loc at = mlc_arg_loc(c, spec, nspec, first + 1);
    if (mlc_want_float(L, v[first + 1], at, "min_lr", &tc->min_lr) && !(tc->min_lr >= 0 && tc->min_lr <= tc->lr))
      mlc_error(L->d, at, "min_lr must be between 0 and lr (%g), got %g", tc->lr, tc->min_lr);
    else if (tc->decay == MLC_DECAY_NONE)
      mlc_error(L->d, at, "min_lr is where the rate decays to: it needs decay=cosine or decay=linear");
  }
  if (pr[first + 2]) {
    mlc_loc at = mlc_arg_loc(c, spec, nspec, first + 2);
    if (mlc_want_int(L, v[first + 2], at, "steps", 1, (int64_t)1 << 40, &tc->lr_steps) && tc->decay != MLC_DECAY_NONE &&
        tc->lr_steps <= tc->warmup)
      mlc_error(L->d, at, "steps (%lld) must be more than warmup (%lld): the rate decays between them",
                (long long)tc->lr_steps, (long long)tc->warmup);
  }
}

/* Takes decay= out of an optimizer's arguments, into args[0..*n) the rest. */
static void take_decay(mlc_lowerer *L, const mlc_ast_expr *e, mlc_ast_arg *args, uint32_t *n, const mlc_ast_expr **betas) {
  mlc_train_config *tc = &L->p->train;
  for (uint32_t i = 0; i < e->nargs && *n < 12; i++) {
    const mlc_ast_arg *a = &e->args[i];
    if (betas && a->name && !strcmp(a->name, "betas")) *betas = a->value;
    else if (a->name && !strcmp(a->name, "decay")) {
      const char *w = a->value->kind == AST_NAME ? a->value->name : "";
      if (!strcmp(w, "cosine")) tc->decay = MLC_DECAY_COSINE;
      else if (!strcmp(w, "linear")) tc->decay = MLC_DECAY_LINEAR;
      else if (!strcmp(w, "none")) tc->decay = MLC_DECAY_NONE;
      else mlc_error(L->d, a->value->loc, "decay must be cosine, linear or none");
    } else args[(*n)++] = *a;
  }
}

static void lower_train_config(mlc_lowerer *L, const mlc_ast_train *t, mlc_instance *root) {
  mlc_train_config *tc = &L->p->train;
  tc->present = true;
  tc->loc = t->loc;
  tc->accum = 1;
  if (t->optimizer) {
    const mlc_ast_expr *e = t->optimizer;
    int errors0 = L->d->errors;
    mlc_ast_arg args[12];
    uint32_t n = 0;
    if (e->kind == AST_CALL && !strcmp(e->name, "AdamW")) {
      static const char *const spec[] = {"lr=", "betas=", "eps=", "weight_decay=", "warmup=", "min_lr=", "steps="};
      /* betas is a list: bind it by hand, the rest through mlc_bind. */
      const mlc_ast_expr *betas = NULL;
      take_decay(L, e, args, &n, &betas);
      mlc_call cc = {args, n, e->loc, "AdamW"};
      mlc_value v[7];
      bool pr[7];
      tc->opt = MLC_OPT_ADAMW;
      tc->lr = 1e-3, tc->beta1 = 0.9, tc->beta2 = 0.999, tc->eps = 1e-8, tc->weight_decay = 0.01;
      if (mlc_bind(L, &cc, spec, 7, v, pr)) {
        if (pr[0]) mlc_want_float(L, v[0], mlc_arg_loc(&cc, spec, 7, 0), "lr", &tc->lr);
        if (pr[2]) mlc_want_float(L, v[2], mlc_arg_loc(&cc, spec, 7, 2), "eps", &tc->eps);
        if (pr[3]) mlc_want_float(L, v[3], mlc_arg_loc(&cc, spec, 7, 3), "weight_decay", &tc->weight_decay);
        lower_schedule(L, &cc, spec, 7, 4, v, pr);
      }
      if (betas) {
        if (betas->kind != AST_LIST || betas->nargs != 2) mlc_error(L->d, betas->loc, "betas must be a list of two numbers: [0.9, 0.999]");
        else {
          mlc_want_float(L, lw_eval(L, betas->args[0].value), betas->args[0].loc, "beta1", &tc->beta1);
          mlc_want_float(L, lw_eval(L, betas->args[1].value), betas->args[1].loc, "beta2", &tc->beta2);
        }
      }
    } else if (e->kind == AST_CALL && !strcmp(e->name, "SGD")) {
      static const char *const spec[] = {"lr", "momentum=", "weight_decay=", "warmup=", "min_lr=", "steps="};
      take_decay(L, e, args, &n, NULL);
      mlc_call c = {args, n, e->loc, e->name};
      mlc_value v[6];
      bool pr[6];
      tc->opt = MLC_OPT_SGD;
      if (mlc_bind(L, &c, spec, 6, v, pr)) {
        mlc_want_float(L, v[0], mlc_arg_loc(&c, spec, 6, 0), "lr", &tc->lr);
        if (pr[1]) mlc_want_float(L, v[1], mlc_arg_loc(&c, spec, 6, 1), "momentum", &tc->momentum);
        if (pr[2]) mlc_want_float(L, v[2], mlc_arg_loc(&c, spec, 6, 2), "weight_decay", &tc->weight_decay);
        lower_schedule(L, &c, spec, 6, 3, v, pr);
      }
    } else if (e->kind == AST_NAME && (!strcmp(e->name, "AdamW") || !strcmp(e->name, "SGD"))) {
      mlc_error(L->d, e->loc, "the optimizer is a call: %s(lr=...)", e->name);
    } else if (e->kind == AST_CALL || e->kind == AST_NAME) {
      suggest s = {.want = e->name, .dist = 99};
      lw_consider(&s, "AdamW");
      lw_consider(&s, "SGD");
      mlc_error(L->d, e->loc, "unknown optimizer '%s'%s", e->name,
                s.best ? lw_hint(L, &s) : ": expected AdamW(lr=...) or SGD(lr=...)");
    } else {
      mlc_error(L->d, e->loc, "expected an optimizer: AdamW(lr=...) or SGD(lr=...)");
    }
    if (tc->opt && L->d->errors == errors0 && !(tc->lr > 0)) {
      mlc_loc at = e->loc; /* point at lr=, given by name or first */
      for (uint32_t i = 0; i < e->nargs; i++)
        if (e->args[i].name ? !strcmp(e->args[i].name, "lr") : i == 0) at = e->args[i].loc;
      mlc_error(L->d, at, "the learning rate must be positive, got %g", tc->lr);
    }
  }
  if (t->precision) {
    const mlc_ast_expr *e = t->precision;
    static const char *const spec[] = {"param", "reduce="};
    /* f32_matmul= names a mode (a word, not a value): taken out before the rest is bound */
    mlc_ast_arg *rest = mlc_arena_alloc(L->a, (e->nargs + 1) * sizeof *rest);
    uint32_t nrest = 0;
    bool mm = false;
    const mlc_ast_arg *fp8_grad = NULL, *fp8_keep = NULL;
    bool fp8 = false, grad_e4m3 = false;
    for (uint32_t i = 0; e->kind == AST_CALL && i < e->nargs; i++) {
      const mlc_ast_arg *a = &e->args[i];
      const char *word = a->name && a->value->kind == AST_NAME ? a->value->name : "";
      if (a->name && !strcmp(a->name, "f32_matmul")) {
        mlc_f32_matmul m = mlc_f32_matmul_parse(word);
        if (m == MLC_F32MM_DEFAULT) mlc_error(L->d, a->value->loc, "f32_matmul must be tf32x3, ieee or tf32");
        L->p->opts.f32_matmul = (uint8_t)m;
      } else if (a->name && !strcmp(a->name, "matmul")) { /* issue 30: the linears' GEMMs in FP8 (passes/fp8.c) */
        if (strcmp(word, "fp8")) mlc_error(L->d, a->value->loc, "matmul must be fp8 (the GEMMs of the linears in FP8)");
        else fp8 = true;
      } else if (a->name && !strcmp(a->name, "fp8_keep")) { /* ["layers.0", "head"]: scopes whose linears stay plain */
        const mlc_ast_expr *l = a->value;
        size_t len = 1;
        bool ok = l->kind == AST_LIST;
        for (uint32_t k = 0; ok && k < l->nargs; k++) {
          ok = l->args[k].value->kind == AST_STRING && l->args[k].value->name[0] && !strchr(l->args[k].value->name, ',');
          if (ok) len += strlen(l->args[k].value->name) + 1;
        }
        if (!ok) {
          mlc_error(L->d, a->value->loc, "fp8_keep must be a list of module scopes as strings: [\"layers.0\", \"head\"]");
        } else {
          char *keep = mlc_arena_alloc(L->p->arena, len);
          for (uint32_t k = 0; k < l->nargs; k++) {
            if (k) strcat(keep, ",");
            strcat(keep, l->args[k].value->name);
          }
          L->p->opts.fp8_keep = keep;
        }
        fp8_keep = a;
      } else if (a->name && !strcmp(a->name, "fp8_grad")) {
        fp8_grad = a;
        if (strcmp(word, "e5m2") && strcmp(word, "e4m3")) mlc_error(L->d, a->value->loc, "fp8_grad must be e5m2 or e4m3");
        grad_e4m3 = !strcmp(word, "e4m3");
      } else {
        rest[nrest++] = *a;
        continue;
      }
      mm = true;
    }
    if (fp8) L->p->opts.matmul = grad_e4m3 ? MLC_MATMUL_FP8_E4M3_GRAD : MLC_MATMUL_FP8;
    else if (fp8_grad || fp8_keep)
      mlc_error(L->d, (fp8_grad ? fp8_grad : fp8_keep)->loc, "%s is for matmul=fp8, which this precision() does not ask for",
                fp8_grad ? "fp8_grad" : "fp8_keep");
    mlc_call c = {rest, nrest, e->loc, "precision"};
    mlc_value v[2];
    bool pr[2];
    if (e->kind != AST_CALL) mlc_error(L->d, e->loc, "expected precision(param=bf16, reduce=f32)");
    else if (mm && nrest == 0) { /* precision(f32_matmul=...) or precision(matmul=fp8) alone */ }
    else if (mlc_bind(L, &c, spec, 2, v, pr) && mlc_want_dtype(L, v[0], mlc_arg_loc(&c, spec, 2, 0), "param", &tc->param_dtype)) {
      tc->reduce_dtype = MLC_DT_F32;
      if (pr[1] && mlc_want_dtype(L, v[1], mlc_arg_loc(&c, spec, 2, 1), "reduce", &tc->reduce_dtype) &&
          tc->reduce_dtype != MLC_DT_F32 && tc->reduce_dtype != MLC_DT_BF16 && tc->reduce_dtype != MLC_DT_F16)
        mlc_error(L->d, mlc_arg_loc(&c, spec, 2, 1), "reduce=%s: sharded gradients are reduced in f32, bf16 or f16",
                  mlc_dtype_name((mlc_dtype)tc->reduce_dtype));
      else if (!mlc_dtype_is_float(tc->param_dtype))
        mlc_error(L->d, e->loc, "precision dtypes must be floating point (f32, bf16, f16)");
    }
  }
  if (t->clip_grad_norm) {
    double cl = 0;
    tc->clip_loc = t->clip_grad_norm->loc;
    if (mlc_want_float(L, lw_eval(L, t->clip_grad_norm), t->clip_grad_norm->loc, "clip_grad_norm", &cl)) {
      if (!(cl > 0 && cl < 1e30)) mlc_error(L->d, t->clip_grad_norm->loc, "clip_grad_norm is the largest gradient norm and must be positive, got %g", cl);
      else if (!t->optimizer) mlc_error(L->d, t->clip_grad_norm->loc, "clip_grad_norm clips the gradients the optimizer takes: it needs an optimizer");
      else tc->clip = cl;
    }
  }
  if (t->accum) {
    tc->accum_loc = t->accum->loc;
    mlc_want_int(L, lw_eval(L, t->accum), t->accum->loc, "accum (micro-batches per step)", 1, 1 << 16, &tc->accum);
  }
  if (L->accum_flag) tc->accum = L->accum_flag;
  if (t->memory_budget) {
    double b = 0;
    if (mlc_want_float(L, lw_eval(L, t->memory_budget), t->memory_budget->loc, "memory_budget", &b)) {
      if (!(b >= 1 && b < 9.2e18)) mlc_error(L->d, t->memory_budget->loc, "memory_budget is a size in bytes, such as 14e9; got %g", b);
      else L->p->opts.memory_budget = (int64_t)b;
    }
  }
  if (t->shard) {
    const mlc_ast_expr *e = t->shard;
    if (e->kind != AST_CALL || strcmp(e->name, "fsdp")) {
      mlc_error(L->d, e->loc, "unknown sharding: expected fsdp(list, ...) naming the model's module lists");
    } else {
      tc->shard = "fsdp";
      tc->shard_units = mlc_arena_alloc(L->a, (e->nargs + 1) * sizeof *tc->shard_units);
      for (uint32_t i = 0; i < e->nargs; i++) {
        const mlc_ast_expr *a = e->args[i].value;
        mlc_value *m = a->kind == AST_NAME && !e->args[i].name ? lw_scope_get(&root->members, a->name) : NULL;
        if (a->kind == AST_NAME && !e->args[i].name && !m) {
          suggest s = {.want = a->name, .dist = 99};
          lw_consider_scope(&s, &root->members);
          mlc_error(L->d, e->args[i].loc, "fsdp: model %s has no submodule named '%s'%s", root->type_name, a->name,
                    lw_hint(L, &s));
          continue;
        }
        if (m && m->kind == V_PARAM) {
          mlc_error(L->d, e->args[i].loc, "fsdp: '%s' is a parameter of %s, not a submodule; fsdp takes submodules, "
                    "such as fsdp(layers)", a->name, root->type_name);
          continue;
        }
        if (!m || m->kind != V_MODULE) {
          mlc_error(L->d, e->args[i].loc, "fsdp needs the names of the model's submodules, such as fsdp(layers)");
          continue;
        }
        tc->shard_units[tc->nshard_units++] = a->name;
      }
    }
  }
}

/* The loss of one micro-batch: micro k of n takes rows [k b, (k + 1) b) of
 * every input (b = rows / n, the declared rows); n = 1 takes them whole. */
static mlc_value micro_loss(mlc_lowerer *L, const mlc_ast_train *t, mlc_instance *root, const mlc_value *in, int64_t k,
                            int64_t n) {
  mlc_scope locals = {0};
  lw_scope_set(L, &locals, "model", (mlc_value){.kind = V_MODULE, .mod = root});
  for (uint32_t i = 0; i < t->ninputs; i++) {
    if (in[i].kind != V_TENSOR) continue;
    mlc_value v = in[i];
    if (n > 1) {
      int64_t b = mlc_value_type(L, v)->dim[0] / n;
      mlc_attrs a = {.axis = 0, .start = k * b, .end = (k + 1) * b};
      v = mlc_emit(L, MLC_OP_SLICE, &in[i], 1, &a, NULL, t->inputs[i].loc);
    }
    lw_scope_set(L, &locals, t->inputs[i].name, v);
  }
  L->locals = &locals;
  mlc_value loss = lw_eval(L, t->loss);
  L->locals = NULL;
  if (loss.kind == V_ERR) return loss;
  if (!mlc_want_tensor(L, loss, t->loss->loc, "the loss")) return mlc_verr();
  const mlc_type *lt = mlc_value_type(L, loss);
  if (lt->rank != 0 || !mlc_dtype_is_float(lt->dtype)) {
    char b[96];
    mlc_error(L->d, t->loss->loc, "the loss must be a floating-point scalar, got %s; reduce it with sum() or mean()",
              mlc_type_str(lt, b, sizeof b));
    return mlc_verr();
  }
  return loss;
}

/* train: the loss over the inputs.  With accum = n > 1, a declared input
 * (x: f32[batch, 64]) is one micro-batch: the step's input holds n of them
 * along the first axis (f32[n * batch, 64]), each micro-batch's loss is
 * lowered on its own (the forward n times over, on its rows), and the step's
 * loss is their mean.  The gradients are then the mean of the micro-batches'
 * gradients, as llm.c's and nanoGPT's loss / grad_accum_steps give them,
 * and for a loss that is a mean over rows the same as one batch n times as
 * large. */
static void lower_train(mlc_lowerer *L, const mlc_ast_train *t, mlc_instance *root) {
  begin_func(L, "train");
  lower_train_config(L, t, root);
  int64_t n = L->p->train.accum;
  mlc_value *in = mlc_arena_alloc(L->a, (t->ninputs + 1) * sizeof *in);
  for (uint32_t i = 0; i < t->ninputs; i++) {
    in[i] = mlc_verr();
    if (!strcmp(t->inputs[i].name, "model")) {
      mlc_error(L->d, t->inputs[i].loc, "'model' is reserved for the model in a train block");
      continue;
    }
    in[i] = add_input(L, &t->inputs[i]);
    if (n > 1 && in[i].kind == V_TENSOR) {
      mlc_type *ty = &L->f->nodes[in[i].node].type;
      char b[96];
      if (ty->rank == 0 || mlc_type_numel(ty) > MLC_MAX_NUMEL / n) {
        mlc_error(L->d, t->inputs[i].loc, "accum = %lld stacks %lld micro-batches of every input along its first axis, "
                  "but input '%s' is %s%s", (long long)n, (long long)n, t->inputs[i].name, mlc_type_str(ty, b, sizeof b),
                  ty->rank ? ": too large" : ", a scalar");
        if (!L->accum_flag && t->accum) mlc_note(L->d, t->accum->loc, "accum is set here");
        in[i] = mlc_verr();
      } else {
        ty->dim[0] *= n; /* the leaf has no users yet */
      }
    }
  }
  if (!t->loss) {
    mlc_error(L->d, t->loc, "the train block needs a loss: loss = cross_entropy(model(tokens), targets)");
    return;
  }
  mlc_value loss = mlc_verr();
  for (int64_t k = 0; k < n; k++) {
    mlc_value l = micro_loss(L, t, root, in, k, n);
    if (l.kind == V_ERR) return;
    if (k == 0) loss = l;
    else {
      mlc_value ab[2] = {loss, l};
      loss = mlc_emit(L, MLC_OP_ADD, ab, 2, NULL, NULL, t->loss->loc);
    }
  }
  if (n > 1) {
    mlc_value ab[2] = {loss, lw_mk_const(L, (double)n, mlc_value_type(L, loss)->dtype, t->loss->loc)};
    loss = mlc_emit(L, MLC_OP_DIV, ab, 2, NULL, NULL, t->loss->loc);
  }
  if (loss.kind == V_ERR) return;
  mlc_func_add_output(L->p, L->f, "loss", loss.node);
}

/* decode M { max_ctx = C  prefill = P }: two entries over the model's
 * forward, which takes token ids [batch, seq] and returns logits
 * [batch, seq, vocab]:
 *   prefill(tokens i32[batch, P], pos i32[]) -> logits [batch, P, vocab]
 *   step(tokens i32[batch, 1], pos i32[])    -> logits [batch, 1, vocab]
 * Both run the forward at positions pos, pos + 1, ...: every causal
 * attention becomes attention_kv over its own KV caches [batch, heads, C,
 * dim] (mlc_attention), which the two entries share and update in place.  A
 * prompt goes through prefill P tokens at a time (the last chunk padded:
 * causality keeps the padding out of the real rows, and the step
 * overwrites its cache rows before anything reads them); each new token
 * through step. */
static void lower_decode(mlc_lowerer *L, const mlc_ast_decode *dc, mlc_instance *root) {
  const mlc_ast_module *mod = root->ast;
  int64_t max_ctx = 0, prefill = 0;
  if (!dc->max_ctx) {
    mlc_error(L->d, dc->loc, "the decode block needs max_ctx = N: how many positions (prompt and generated tokens) its KV "
              "caches hold");
    return;
  }
  L->self = root; /* values may use the model's arguments, as its types do */
  bool ok = mlc_want_int(L, lw_eval(L, dc->max_ctx), dc->max_ctx->loc, "max_ctx", 1, (int64_t)1 << 24, &max_ctx);
  prefill = max_ctx < 64 ? max_ctx : 64;
  if (ok && dc->prefill) ok = mlc_want_int(L, lw_eval(L, dc->prefill), dc->prefill->loc, "prefill (tokens per call, at most max_ctx)",
                                           1, max_ctx, &prefill);
  L->self = NULL;
  if (!ok) return;
  if (!mod->has_forward || mod->nfparams != 1 || !mod->fparams[0].type) {
    mlc_error(L->d, mod->has_forward ? mod->forward_loc : mod->loc, "a decode block needs the model's forward to take one "
              "typed input of token ids, such as forward(idx: i32[batch, seq])");
    mlc_note(L->d, dc->model_loc, "the decode block is here");
    return;
  }
  const mlc_ast_param *prm = &mod->fparams[0];
  mlc_type t;
  L->self = root;
  ok = lw_eval_type(L, prm->type, &t);
  L->self = NULL;
  if (!ok) return;
  if (t.dtype != MLC_DT_I32 || t.rank != 2) {
    char b[96];
    mlc_error(L->d, prm->loc, "a decode block needs the model's forward to take token ids i32[batch, seq], but '%s' is %s",
              prm->name, mlc_type_str(&t, b, sizeof b));
    mlc_note(L->d, dc->model_loc, "the decode block is here");
    return;
  }
  static const char *const names[2] = {"prefill", "step"};
  const int64_t len[2] = {prefill, 1};
  for (int e = 0; e < 2; e++) {
    begin_func(L, names[e]);
    mlc_type tt = t;
    tt.dim[1] = len[e];
    mlc_attrs a = {.name = "tokens"};
    mlc_value tok = mlc_emit(L, MLC_OP_INPUT, NULL, 0, &a, &tt, prm->loc);
    mlc_type pt = {.dtype = MLC_DT_I32, .rank = 0};
    a.name = "pos";
    mlc_value pos = mlc_emit(L, MLC_OP_INPUT, NULL, 0, &a, &pt, dc->loc);
    if (tok.kind != V_TENSOR || pos.kind != V_TENSOR) return;
    mlc_u32vec_push(L->a, &L->f->inputs, tok.node);
    mlc_u32vec_push(L->a, &L->f->inputs, pos.node);
    L->dec.on = true, L->dec.pos = pos.node, L->dec.max_ctx = max_ctx, L->dec.root = root, L->dec.used = 0;
    mlc_value out = mlc_call_module(L, root, &tok, 1, mod->forward_loc);
    L->dec.on = false;
    if (out.kind == V_TUPLE)
      mlc_error(L->d, out.tuple->locs[0], "a decode block needs the model's forward to return logits only, but it returns "
                "%u values (%s)", out.tuple->n, lw_tuple_names(L, out.tuple));
    if (out.kind != V_TENSOR) return;
    const mlc_type *ot = mlc_value_type(L, out);
    if (!mlc_dtype_is_float(ot->dtype) || ot->rank != 3 || ot->dim[0] != t.dim[0] || ot->dim[1] != len[e]) {
      char b[96];
      mlc_error(L->d, mod->forward_loc, "a decode block needs the model's forward to return logits [batch, seq, vocab], but "
                "for %lld tokens it returns %s", (long long)len[e], mlc_type_str(ot, b, sizeof b));
      return;
    }
    if (e == 1 && L->dec.used != L->dec.ncache) {
      mlc_error(L->d, mod->forward_loc, "the step entry runs %u attentions over KV caches but the prefill entry %u: the model "
                "must attend the same way whatever the sequence length", L->dec.used, L->dec.ncache);
      return;
    }
    mlc_func_add_output(L->p, L->f, "logits", out.node);
  }
}

bool mlc_lower(mlc_program *p, mlc_diag *d, const mlc_ast_file *ast, const mlc_lower_options *opt) {
  return mlc_lower_io_run(p, d, ast, opt, NULL);
}

bool mlc_lower_io_run(mlc_program *p, mlc_diag *d, const mlc_ast_file *ast, const mlc_lower_options *opt,
                      const mlc_lower_io *io) {
  mlc_lowerer L = {.p = p, .d = d, .a = p->arena, .ast = ast, .max_steps = opt->max_steps ? opt->max_steps : MAX_STEPS,
                   .accum_flag = opt->accum, .io = io};
  int errors0 = d->errors;
  eval_config(&L, opt);
  /* Module names must be unique and must not shadow built-ins. */
  for (uint32_t i = 0; i < ast->nmodules; i++) {
    if (mlc_builtin_find(ast->modules[i].name))
      mlc_error(d, ast->modules[i].loc, "module %s has the name of a built-in module", ast->modules[i].name);
    for (uint32_t k = 0; k < i; k++)
      if (!strcmp(ast->modules[k].name, ast->modules[i].name)) {
        mlc_error(d, ast->modules[i].loc, "module %s is defined twice", ast->modules[i].name);
        mlc_note(d, ast->modules[k].loc, "the first module %s is here", ast->modules[k].name);
        break;
      }
  }
  const char *entry = opt->entry ? opt->entry : ast->train ? ast->train->model : ast->decode ? ast->decode->model : NULL;
  mlc_loc entry_loc = opt->entry ? (mlc_loc){0} : ast->train ? ast->train->model_loc : ast->decode ? ast->decode->model_loc
                                                                                                     : (mlc_loc){0};
  const mlc_ast_module *mod = NULL;
  if (entry) {
    mod = lw_find_module(&L, entry);
    if (!mod) {
      if (mlc_builtin_find(entry))
        mlc_error(d, entry_loc, "the model must be a module defined in the file; wrap built-in %s in a module", entry);
      else {
        suggest s = {.want = entry, .dist = 99};
        for (uint32_t i = 0; i < ast->nmodules; i++) lw_consider(&s, ast->modules[i].name);
        if (opt->entry)
          mlc_error(d, entry_loc, "--entry %s: the file defines no module named '%s'%s", entry, entry, lw_hint(&L, &s));
        else
          mlc_error(d, entry_loc, "unknown module '%s'%s", entry, lw_hint(&L, &s));
      }
      return false;
    }
  } else if (ast->nmodules) {
    mod = &ast->modules[ast->nmodules - 1];
  } else {
    mlc_error(d, (mlc_loc){0}, "the file defines no module, so there is no model to compile");
    return false;
  }
  if (d->errors > errors0) return false;
  char *lname = mlc_arena_strdup(L.a, mod->name);
  for (char *c = lname; *c; c++)
    if (*c >= 'A' && *c <= 'Z') *c = (char)(*c - 'A' + 'a');
  p->name = lname;
  p->name_loc = mod->loc;
  /* The constructor's arguments: the train block's, else the decode block's. */
  mlc_ast_train dargs = {0};
  const mlc_ast_train *ctor = ast->train;
  if (!ctor && ast->decode) {
    dargs.has_args = ast->decode->has_args, dargs.args = ast->decode->args, dargs.nargs = ast->decode->nargs;
    ctor = &dargs;
  }
  mlc_instance *root = instantiate_root(&L, mod, opt->entry ? NULL : ctor, mod->loc);
  if (!root || d->errors > errors0) return false;
  if (!(opt->decode_only && ast->decode)) lower_forward(&L, root);
  if (ast->train && !opt->no_train && (!opt->entry || !strcmp(opt->entry, ast->train->model)))
    lower_train(&L, ast->train, root);
  if (ast->decode && d->errors == errors0 && (!opt->entry || !strcmp(opt->entry, ast->decode->model))) {
    if (strcmp(ast->decode->model, mod->name))
      mlc_error(d, ast->decode->model_loc, "the decode block names %s, but the model compiled is %s", ast->decode->model,
                mod->name);
    else
      lower_decode(&L, ast->decode, root);
  }
  if (d->errors != errors0) return false;
  /* An onnx(...) parameter tied to another takes that one's value. */
  uint32_t nw = 0;
  for (uint32_t i = 0; i < L.nw; i++)
    if (!p->params[L.w[i].param].tie) L.w[nw++] = L.w[i];
  const uint32_t *to = lw_fold_ties(p);
  for (uint32_t i = 0; to && i < nw; i++) L.w[i].param = to[L.w[i].param];
  if (io && io->weights) *io->weights = (mlc_onnx_weights){L.w, nw};
  return true;
}

bool mlc_frontend_run(mlc_program *p, mlc_diag *d, const char *name, const char *src, size_t len,
                      const mlc_lower_options *opt, mlc_ast_file **out_ast) {
  return mlc_frontend_run_io(p, d, name, src, len, opt, NULL, out_ast);
}

bool mlc_frontend_run_io(mlc_program *p, mlc_diag *d, const char *name, const char *src, size_t len,
                         const mlc_lower_options *opt, const mlc_lower_io *io, mlc_ast_file **out_ast) {
  uint32_t file = mlc_diag_add_source(d, name, src, len);
  uint32_t ntoks;
  mlc_token *toks = mlc_lex(p->arena, d, file, src, len, &ntoks);
  mlc_ast_file *ast = mlc_parse(p->arena, d, toks, ntoks);
  if (out_ast) *out_ast = ast;
  if (d->errors) return false;
  return mlc_lower_io_run(p, d, ast, opt, io);
}
