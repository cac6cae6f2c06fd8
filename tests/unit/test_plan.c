/* The plan format end to end: the compiler encodes the small MiniLLM's plan
 * (codegen/plan.c), the runtime parses it (runtime/plan.c), and what comes
 * back must be what went in.  Then corrupted plans, one fault at a time,
 * must be refused with MLC_DATA_LOSS, and a failing allocator must give a
 * clean error.  The executables section (code blobs and dispatch records)
 * goes through the same round trip and the same faults. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <xxhash.h>

#include "codegen/plan.h"
#include "frontend/frontend.h"
#include "passes/passes.h"
#include "runtime/cuda/device.h"
#include "runtime/plan.h"
#include "runtime/session.h"

static mlc_arena arena;
static mlc_program prog;
static uint8_t *bytes;
static size_t nbytes;

/* Any node that computes something is a step; the kernel is named by op and
 * dtype, so identical ops share one kernel entry. */
static const char *namer(void *ctx, const mlc_func *f, uint32_t node, uint64_t *work) {
  (void)ctx;
  const mlc_node *n = &f->nodes[node];
  if (mlc_ops[n->op].flags & (MLC_F_LEAF | MLC_F_VIEW)) return NULL;
  *work = (uint64_t)mlc_type_numel(&n->type);
  return mlc_arena_printf(&arena, "k_%s_%s", mlc_ops[n->op].name, mlc_dtype_name(n->type.dtype));
}

static int setup(void **state) {
  (void)state;
  mlc_arena_init(&arena);
  mlc_diag diag;
  mlc_diag_init(&diag, stderr);
  mlc_program_init(&prog, &arena);
  FILE *f = fopen(MLC_SOURCE_DIR "/examples/minillm.mdl", "rb");
  if (!f) return -1;
  static char src[8192];
  size_t len = fread(src, 1, sizeof src - 1, f);
  fclose(f);
  mlc_define defs[6] = {{"vocab", "512"}, {"dim", "128"}, {"layers", "2"}, {"heads", "4"}, {"batch", "2"}, {"seq", "64"}};
  mlc_lower_options lo = {defs, 6, NULL, 0, false, 0, false};
  mlc_pipeline_options po = {0};
  if (!mlc_frontend_run(&prog, &diag, "minillm.mdl", src, len, &lo, NULL) || !mlc_pipeline_run(&prog, &diag, &po)) return -1;
  mlc_plan_encode(&prog, namer, NULL, &bytes, &nbytes);
  return 0;
}

/* MLC_PLAN_SEED=DIR writes a plan's payload as DIR/<name> for fuzz/fuzz_plan. */
static void write_seed(const char *name, const uint8_t *b, size_t n) {
  const char *dir = getenv("MLC_PLAN_SEED");
  if (!dir) return;
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *o = fopen(path, "wb");
  assert_non_null(o);
  assert_int_equal(fwrite(b + MLC_PLAN_HEADER_BYTES, 1, n - MLC_PLAN_HEADER_BYTES, o), n - MLC_PLAN_HEADER_BYTES);
  fclose(o);
}

static int teardown(void **state) {
  (void)state;
  mlc_arena_free(&arena);
  return 0;
}

static void test_roundtrip(void **state) {
  (void)state;
  write_seed("minillm_small.payload", bytes, nbytes);
  mlc_plan *pl;
  mlc_status st = mlc_plan_parse(bytes, nbytes, mlc_allocator_default(), &pl);
  assert_null(st);
  assert_string_equal(pl->model, "minillm");
  assert_int_equal(pl->nparams, prog.nparams);
  for (uint32_t i = 0; i < prog.nparams; i++) {
    assert_string_equal(pl->params[i].name, prog.params[i].name);
    assert_int_equal(pl->params[i].shape.rank, prog.params[i].type.rank);
    assert_int_equal(pl->params[i].shape.dims[0], prog.params[i].type.dim[0]);
    assert_int_equal(pl->params[i].init, prog.params[i].init);
  }
  assert_int_equal(pl->nentries, 2);
  for (uint32_t k = 0; k < 2; k++) {
    const mlc_func *f = &prog.funcs[k];
    const mlc_plan_entry *e = mlc_plan_find_entry(pl, f->name);
    assert_non_null(e);
    assert_int_equal(e->arena_bytes, f->arena_bytes);
    assert_int_equal(e->nvalues, f->n);
    assert_int_equal(e->ninputs, f->inputs.n);
    assert_string_equal(e->outputs[0].name, f->outputs[0].name);
    uint32_t steps = 0;
    for (uint32_t i = 0; i < f->n; i++) {
      const mlc_node *n = &f->nodes[i];
      if (mlc_ops[n->op].flags & (MLC_F_LEAF | MLC_F_VIEW)) continue;
      const mlc_plan_step *s = &e->steps[steps++];
      assert_int_equal(s->nargs, n->nin + 1);
      assert_int_equal(s->args[s->nargs - 1], i);
      assert_string_equal(s->scope, n->scope);
      double fl, by;
      mlc_node_cost(f, n, &fl, &by);
      assert_true(s->flops == fl && s->bytes == by);
      assert_true(e->values[i].offset == f->offset[i] || e->values[i].param != MLC_PLAN_NO_PARAM);
    }
    assert_int_equal(e->nsteps, steps);
  }
  /* Identical ops share a kernel: far fewer kernels than steps. */
  uint32_t total = 0;
  for (uint32_t k = 0; k < pl->nentries; k++) total += pl->entries[k].nsteps;
  assert_true(pl->nkernels < total / 4);
  mlc_plan_free(pl);
}

static mlc_status parse_copy(const uint8_t *b, size_t n, bool fix_checksum) {
  uint8_t *c = malloc(n ? n : 1);
  memcpy(c, b, n);
  if (fix_checksum && n >= MLC_PLAN_HEADER_BYTES) {
    uint64_t len = n - MLC_PLAN_HEADER_BYTES, sum = XXH64(c + MLC_PLAN_HEADER_BYTES, (size_t)len, 0);
    for (int i = 0; i < 8; i++) {
      c[16 + i] = (uint8_t)(len >> (8 * i));
      c[24 + i] = (uint8_t)(sum >> (8 * i));
    }
  }
  mlc_plan *pl = NULL;
  mlc_status st = mlc_plan_parse(c, n, mlc_allocator_default(), &pl);
  mlc_plan_free(pl);
  free(c);
  return st;
}

static void expect_loss(mlc_status st, const char *want) {
  assert_non_null(st);
  assert_int_equal(mlc_status_code(st), MLC_DATA_LOSS);
  if (!strstr(mlc_status_message(st), want)) fail_msg("want '%s' in '%s'", want, mlc_status_message(st));
  mlc_status_free(st);
}

static void test_corrupt(void **state) {
  (void)state;
  uint8_t *c = malloc(nbytes);
  memcpy(c, bytes, nbytes);
  c[nbytes / 2] ^= 0x40;
  expect_loss(parse_copy(c, nbytes, false), "checksum mismatch");
  expect_loss(parse_copy(bytes, nbytes - 1, false), "truncated?");
  expect_loss(parse_copy(bytes, 10, false), "not an mlc plan");
  memcpy(c, bytes, nbytes);
  c[8] = 1;
  expect_loss(parse_copy(c, nbytes, false), "plan format version 1");
  /* With the checksum fixed up, the structural checks must catch it.  The
   * parameter count is the u32 at byte 32 + 4 + len("minillm") = 43. */
  memcpy(c, bytes, nbytes);
  c[45] = 0xff; /* nparams: a huge count */
  c[46] = 0xff;
  expect_loss(parse_copy(c, nbytes, true), "corrupt plan: parameter count too large at byte 47");
  /* Every single-byte truncation of the payload must be refused, not crash. */
  for (size_t n = MLC_PLAN_HEADER_BYTES; n < nbytes; n += 1 + n / 64) {
    mlc_status st = parse_copy(bytes, n, true);
    assert_non_null(st);
    mlc_status_free(st);
  }
  /* Flip every byte in turn: refused or parsed, never a crash (ASan watches). */
  for (size_t i = MLC_PLAN_HEADER_BYTES; i < nbytes; i += 7) {
    memcpy(c, bytes, nbytes);
    c[i] ^= 0xa5;
    mlc_status_free(parse_copy(c, nbytes, true));
  }
  free(c);
}

/* --quantize int4:group=64[:asym][:scales=f32]: each packed weight travels as role 4
 * with its bits, group, scheme (init: MLC_PLAN_QUANT_ASYM | MLC_PLAN_QUANT_BF16 flags) and f32
 * weight, and the reader refuses one whose f32 weight does not match it,
 * or whose words do not match its scheme. */
static void test_quantized(void **state) {
  (void)state;
  mlc_arena a;
  mlc_arena_init(&a);
  mlc_diag diag;
  mlc_diag_init(&diag, stderr);
  FILE *f = fopen(MLC_SOURCE_DIR "/examples/minillm.mdl", "rb");
  assert_non_null(f);
  static char src[8192];
  size_t len = fread(src, 1, sizeof src - 1, f);
  fclose(f);
  mlc_define defs[6] = {{"vocab", "512"}, {"dim", "128"}, {"layers", "2"}, {"heads", "4"}, {"batch", "2"}, {"seq", "64"}};
  mlc_lower_options lo = {defs, 6, NULL, 0, true, 0, false}; /* no train step: --quantize implies --no-train */
  mlc_pipeline_options po = {0};
  for (int scheme = 0; scheme < 4; scheme++) { /* MLC_QS_ASYM | MLC_QS_BF16 */
    bool asym = scheme & MLC_QS_ASYM, bf16 = scheme & MLC_QS_BF16;
    mlc_program q;
    mlc_program_init(&q, &a);
    assert_true(mlc_frontend_run(&q, &diag, "minillm.mdl", src, len, &lo, NULL));
    q.opts.quant_bits = 4, q.opts.quant_group = 64, q.opts.quant_scheme = (uint8_t)scheme;
    assert_true(mlc_pipeline_run(&q, &diag, &po));
    uint8_t *b;
    size_t n;
    mlc_plan_encode(&q, namer, NULL, &b, &n);
    mlc_plan *pl;
    assert_null(mlc_plan_parse(b, n, mlc_allocator_default(), &pl));
    uint32_t packed = 0, last = 0;
    for (uint32_t i = 0; i < pl->nparams; i++) {
      const mlc_plan_param *p = &pl->params[i];
      if (p->role != 4) continue;
      const mlc_plan_param *w = &pl->params[p->flat_offset];
      assert_true(p->a == 4 && p->b == 64 && p->shape.dtype == 4);
      assert_int_equal(p->init, (asym ? MLC_PLAN_QUANT_ASYM : 0) | (bf16 ? MLC_PLAN_QUANT_BF16 : 0));
      assert_string_equal(p->name + strlen("quant:"), w->name);
      int64_t groups = w->shape.dims[1] / 64; /* even here: bf16's halves fill whole words */
      assert_int_equal(p->shape.dims[1], w->shape.dims[1] / 8 + (asym ? 2 : 1) * groups / (bf16 ? 2 : 1));
      packed++, last = i;
    }
    assert_int_equal(packed, 2 * 4 + 1); /* per layer: in_proj, out_proj, two ffn linears; and the head */
    mlc_plan_free(pl);
    /* the head's packed weight said to have the other scheme (asymmetric or not, then bf16 scales or not):
     * its words are this one's */
    for (int flip = MLC_QS_ASYM; flip <= MLC_QS_BF16; flip <<= 1) {
      q.params[last].quant_scheme ^= (uint8_t)flip;
      mlc_plan_encode(&q, namer, NULL, &b, &n);
      expect_loss(parse_copy(b, n, false), "a quantised weight does not match its f32 weight");
      q.params[last].quant_scheme ^= (uint8_t)flip;
    }
    /* the head's packed weight, pointed at a norm's weight instead */
    for (uint32_t i = 0; i < q.nparams; i++)
      if (q.params[i].type.rank == 1) q.params[last].quant_of = i + 1;
    mlc_plan_encode(&q, namer, NULL, &b, &n);
    expect_loss(parse_copy(b, n, false), "a quantised weight does not match its f32 weight");
  }
  mlc_arena_free(&a); /* the plans' bytes too */
}

/* The encoded record of value v (plan.h's layout), found in the plan's
 * bytes by its content; NULL if it is not there. */
static uint8_t *value_record(uint8_t *b, size_t n, const mlc_plan_value *v, size_t *out_len) {
  uint8_t rec[80];
  size_t k = 0;
  uint64_t u;
  rec[k++] = v->shape.dtype;
  rec[k++] = v->shape.rank;
  for (int i = 0; i < v->shape.rank + 4; i++) {
    if (i < v->shape.rank) u = (uint64_t)v->shape.dims[i];
    else if (i == v->shape.rank) u = (uint64_t)(v->param == MLC_PLAN_NO_PARAM ? v->offset : 0);
    else if (i == v->shape.rank + 1) u = v->param;
    else if (i == v->shape.rank + 2) u = v->is_const;
    else memcpy(&u, &v->value, 8);
    int width = i < v->shape.rank + 1 || i == v->shape.rank + 3 ? 8 : i == v->shape.rank + 1 ? 4 : 1;
    for (int j = 0; j < width; j++) rec[k++] = (uint8_t)(u >> (8 * j));
  }
  rec[k++] = v->rank_slice;
  for (int j = 0; j < 4; j++) rec[k++] = (uint8_t)(v->view_of >> (8 * j));
  *out_len = k;
  for (size_t i = 0; i + k <= n; i++)
    if (!memcmp(b + i, rec, k)) return b + i;
  return NULL;
}

/* Plan v8's view_of: memplan's root of every view, none for the rest; and
 * the reader's checks of it, each on a copy of the plan with one view's
 * root replaced. */
static void test_views(void **state) {
  (void)state;
  mlc_plan *pl;
  assert_null(mlc_plan_parse(bytes, nbytes, mlc_allocator_default(), &pl));
  const mlc_func *f = &prog.funcs[0];
  const mlc_plan_entry *e = mlc_plan_find_entry(pl, f->name);
  assert_non_null(e);
  uint32_t nviews = 0, first = UINT32_MAX, second = UINT32_MAX, param_root = UINT32_MAX;
  for (uint32_t i = 0; i < e->nvalues; i++) {
    uint32_t root = mlc_memplan_root(f, i);
    assert_int_equal(e->values[i].view_of, root == i ? MLC_PLAN_NO_VALUE : root);
    if (root == i && e->values[i].param != MLC_PLAN_NO_PARAM && param_root == UINT32_MAX) param_root = i;
    if (root == i || e->values[i].param != MLC_PLAN_NO_PARAM) continue;
    nviews++;
    if (first == UINT32_MAX) first = i;
    else if (second == UINT32_MAX && e->values[i].offset == e->values[first].offset) second = i;
  }
  printf("  %u views of arena values among %u values of %s\n", nviews, e->nvalues, e->name);
  assert_true(nviews >= 2 && second != UINT32_MAX && param_root < first);
  /* a root that holds none of first's bytes: the earliest arena root elsewhere */
  uint32_t elsewhere = UINT32_MAX;
  const mlc_plan_value *fv = &e->values[first];
  for (uint32_t i = 0; i < first && elsewhere == UINT32_MAX; i++) {
    const mlc_plan_value *v = &e->values[i];
    if (v->view_of == MLC_PLAN_NO_VALUE && v->param == MLC_PLAN_NO_PARAM &&
        (v->offset + (int64_t)mlc_plan_shape_bytes(&v->shape) <= fv->offset || v->offset > fv->offset))
      elsewhere = i;
  }
  assert_int_not_equal(elsewhere, UINT32_MAX);
  struct {
    uint32_t value, root;
    const char *want;
  } cases[] = {
    {second, first, "views a value that is a view itself"},
    {first, second, "a value views itself or a later value"},
    {first, first, "a value views itself or a later value"},
    {first, param_root, "views a value in another place"},
    {first, elsewhere, "views bytes outside its root"},
  };
  uint8_t *c = malloc(nbytes);
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    memcpy(c, bytes, nbytes);
    size_t len;
    uint8_t *rec = value_record(c, nbytes, &e->values[cases[k].value], &len);
    assert_non_null(rec);
    for (int j = 0; j < 4; j++) rec[len - 4 + j] = (uint8_t)(cases[k].root >> (8 * j));
    expect_loss(parse_copy(c, nbytes, true), cases[k].want);
  }
  free(c);
  mlc_plan_free(pl);
}

static void test_failing_allocator(void **state) {
  (void)state;
  mlc_failing_allocator fa;
  mlc_allocator a = mlc_allocator_failing(&fa, mlc_allocator_default(), 1);
  mlc_plan *pl = NULL;
  mlc_status st = mlc_plan_parse(bytes, nbytes, a, &pl);
  assert_non_null(st);
  assert_int_equal(mlc_status_code(st), MLC_OUT_OF_MEMORY);
  assert_null(pl);
  assert_int_equal(fa.live, 0);
  mlc_status_free(st);
}

/* Session creation and a first run (which makes the entry's arena) through
 * a failing allocator: every allocation they make is refused once, in turn;
 * each refusal must give OUT_OF_MEMORY and leave nothing allocated once the
 * session is gone, and with none refused both must succeed. */
static void dummy_kernel(void **bufs, int64_t begin, int64_t end) {
  (void)bufs, (void)begin, (void)end;
}

static void *dummy_lookup(void *ctx, const char *symbol) {
  (void)ctx, (void)symbol;
  void (*fn)(void **, int64_t, int64_t) = dummy_kernel;
  void *p;
  memcpy(&p, &fn, sizeof p);
  return p;
}

/* The CPU's code is native: a session looks each kernel up by its launch's
 * entry point, as the dispatch record names it (here not the kernel's own
 * name), and a native kernel of two launches is refused. */
static void *entry_lookup(void *ctx, const char *symbol) { return strncmp(symbol, "entry.", 6) ? NULL : dummy_lookup(ctx, symbol); }

static void test_native(void **state) {
  (void)state;
  mlc_plan *pl;
  assert_null(mlc_plan_parse(bytes, nbytes, mlc_allocator_default(), &pl));
  uint32_t n = pl->nkernels;
  mlc_plan_kernel_code *r = mlc_arena_alloc(&arena, n * sizeof *r);
  for (uint32_t i = 0; i < n; i++) {
    r[i] = (mlc_plan_kernel_code){.symbol = mlc_arena_strdup(&arena, pl->kernels[i]), .nlaunch = 1};
    r[i].launch[0].entry = mlc_arena_printf(&arena, "entry.%u", i);
  }
  mlc_plan_free(pl);
  static const mlc_plan_executable native = {MLC_PLAN_FORMAT_NATIVE, NULL, 0};
  mlc_plan_code code = {1, &native, n, r, false};
  uint8_t *b;
  size_t nb;
  mlc_plan_encode_code(&prog, namer, NULL, NULL, &code, &b, &nb);
  assert_null(mlc_plan_parse(b, nb, mlc_allocator_default(), &pl));
  mlc_session_options so = {NULL, entry_lookup, NULL, 1, false, {0}, NULL};
  mlc_session *s = NULL;
  mlc_status st = mlc_session_create(pl, &so, &s);
  if (st) fail_msg("%s", mlc_status_message(st));
  mlc_session_destroy(s);
  mlc_plan_free(pl);
  r[0].nlaunch = 2;
  r[0].launch[1].entry = "entry.again";
  mlc_plan_encode_code(&prog, namer, NULL, NULL, &code, &b, &nb);
  assert_null(mlc_plan_parse(b, nb, mlc_allocator_default(), &pl));
  expect_loss(mlc_session_create(pl, &so, &s), "native kernel");
  mlc_plan_free(pl);
}

static void test_session_failing_allocator(void **state) {
  (void)state;
  mlc_plan *pl;
  assert_null(mlc_plan_parse(bytes, nbytes, mlc_allocator_default(), &pl));
  size_t n;
  for (n = 1; n < 100000; n++) {
    mlc_failing_allocator fa;
    mlc_session_options so = {NULL, dummy_lookup, NULL, 1, false, mlc_allocator_failing(&fa, mlc_allocator_default(), n), NULL};
    mlc_session *s = NULL;
    mlc_status st = mlc_session_create(pl, &so, &s);
    if (!st) { /* the arena comes at the first run: refused too, in turn */
      st = mlc_session_run(s, "forward");
      mlc_session_destroy(s);
      assert_int_equal(fa.live, 0);
      if (!st) {
        assert_int_equal(fa.failed, 0); /* every allocation succeeded: done */
        break;
      }
      assert_int_equal(mlc_status_code(st), MLC_OUT_OF_MEMORY);
      mlc_status_free(st);
      continue;
    }
    assert_int_equal(mlc_status_code(st), MLC_OUT_OF_MEMORY);
    assert_null(s);
    assert_int_equal(fa.live, 0);
    mlc_status_free(st);
  }
  assert_true(n > 5 && n < 100000);
  /* A kernel the code does not have is a clear error naming it. */
  mlc_session_options none = {0};
  mlc_session *s = NULL;
  mlc_status st = mlc_session_create(pl, &none, &s);
  assert_non_null(st);
  assert_int_equal(mlc_status_code(st), MLC_NOT_FOUND);
  assert_non_null(strstr(mlc_status_message(st), "is not in the compiled code"));
  mlc_status_free(st);
  mlc_plan_free(pl);
}

/* The plan's code: a CUDA source executable for the even kernels, a
 * "spirv" one for the odd ones, each kernel two launches and, for the even
 * ones, a tensor map in the extra bytes. */
static const char cuda_text[] = "extern \"C\" __global__ void k(float *x) {}\n";
static const uint8_t spirv_bytes[20] = {0x03, 0x02, 0x23, 0x07, 0, 3, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0};

static void code_plan(mlc_arena *a, uint8_t **out, size_t *out_n, uint32_t *out_nkernels) {
  mlc_plan *pl;
  assert_null(mlc_plan_parse(bytes, nbytes, mlc_allocator_default(), &pl));
  uint32_t n = pl->nkernels;
  mlc_plan_executable *x = mlc_arena_alloc(a, 2 * sizeof *x);
  x[0] = (mlc_plan_executable){MLC_PLAN_FORMAT_CUDA_SOURCE, (const uint8_t *)cuda_text, sizeof cuda_text - 1};
  x[1] = (mlc_plan_executable){MLC_PLAN_FORMAT_SPIRV, spirv_bytes, sizeof spirv_bytes};
  mlc_plan_kernel_code *r = mlc_arena_alloc(a, n * sizeof *r);
  for (uint32_t i = 0; i < n; i++) {
    r[i] = (mlc_plan_kernel_code){.symbol = mlc_arena_strdup(a, pl->kernels[i]), .executable = i % 2,
                                  .scratch = 1000 + i, .nlaunch = 2};
    r[i].launch[0] = (mlc_plan_launch){"first", {i + 1, 1, 1}, {128, 1, 1}, 64 * i};
    r[i].launch[1] = (mlc_plan_launch){"second", {2, 1, 1}, {256, 1, 1}, 0};
    if (i % 2) {
      r[i].launch[1].grid[1] = 3; /* SPIR-V grids are 3-D */
      continue;
    }
    mlc_cuda_kernel k = {.symbol = "k", .nlaunch = 1, .launch = {{"k", 1, 32, 0}}, .ntmap = 1};
    k.tmap[0] = (mlc_cuda_tmap){.arg = 0, .rank = 2, .elem_bytes = 2, .swizzle = 128, .offset = 16,
                                .dim = {64, 32}, .stride = {128}, .box = {64, 8}};
    mlc_plan_code one;
    mlc_plan_code_cuda(a, &k, 1, MLC_PLAN_FORMAT_CUDA_SOURCE, cuda_text, 0, &one);
    r[i].extra = one.kernels[0].extra;
    r[i].extra_bytes = one.kernels[0].extra_bytes;
  }
  mlc_plan_free(pl);
  mlc_plan_code code = {2, x, n, r, false};
  mlc_plan_encode_code(&prog, namer, NULL, NULL, &code, out, out_n);
  *out_nkernels = n;
}

/* Where the u32 after kernel `sym`'s name starts (its executable). */
static size_t after_symbol(const uint8_t *b, size_t n, const char *sym) {
  size_t len = strlen(sym);
  for (size_t i = MLC_PLAN_HEADER_BYTES; i + 4 + len <= n; i++)
    if (b[i] == (uint8_t)len && !b[i + 1] && !b[i + 2] && !b[i + 3] && !memcmp(b + i + 4, sym, len)) return i + 4 + len;
  fail_msg("no kernel %s in the plan", sym);
  return 0;
}

static void test_executables(void **state) {
  (void)state;
  uint8_t *b;
  size_t n;
  uint32_t nk;
  code_plan(&arena, &b, &n, &nk);
  write_seed("code.payload", b, n);
  mlc_plan *pl;
  assert_null(mlc_plan_parse(b, n, mlc_allocator_default(), &pl));
  assert_int_equal(pl->nexecutables, 2);
  assert_string_equal(pl->executables[0].format, "cuda-source");
  assert_int_equal(pl->executables[0].bytes, sizeof cuda_text - 1);
  assert_string_equal((const char *)pl->executables[0].code, cuda_text); /* NUL-terminated by the reader */
  assert_memory_equal(pl->executables[1].code, spirv_bytes, sizeof spirv_bytes);
  assert_int_equal(pl->nkernels, nk);
  for (uint32_t i = 0; i < nk; i++) {
    const mlc_plan_dispatch *d = &pl->dispatch[i];
    assert_ptr_equal(mlc_plan_find_kernel(pl, pl->kernels[i]), d);
    assert_int_equal(d->executable, i % 2);
    assert_int_equal(d->scratch, 1000 + i);
    assert_int_equal(d->nlaunch, 2);
    assert_string_equal(d->launch[0].entry, "first");
    assert_int_equal(d->launch[0].grid[0], i + 1);
    assert_int_equal(d->launch[0].smem, 64 * i);
    assert_int_equal(d->launch[1].block[0], 256);
    assert_int_equal(d->launch[1].grid[1], i % 2 ? 3 : 1);
    assert_int_equal(d->extra_bytes, i % 2 ? 0 : 4 + 4 * 4 + 8 + 9 * 8 + 5 * 4);
    assert_true(d->nargs >= 1);
  }
  /* Every step passes its kernel's argument count (the reader checked). */
  for (uint32_t k = 0; k < pl->nentries; k++)
    for (uint32_t i = 0; i < pl->entries[k].nsteps; i++)
      assert_int_equal(pl->entries[k].steps[i].nargs, pl->dispatch[pl->entries[k].steps[i].kernel].nargs);
  assert_null(mlc_plan_find_kernel(pl, "no such kernel"));

  /* The CUDA device reads its launch table and tensor maps from the plan
   * before it looks for a GPU: a corrupt map is refused here too. */
  mlc_cuda_code code = {.plan = pl};
  mlc_device *dev = NULL;
  mlc_status st = mlc_cuda_device_create(&code, mlc_allocator_default(), &dev);
  if (dev) dev->vt->destroy(dev);
  assert_true(!st || mlc_status_code(st) != MLC_DATA_LOSS);
  mlc_status_free(st);
  uint8_t *ext = (uint8_t *)pl->dispatch[0].extra;
  ext[4 + 4] = 9; /* the map's rank */
  st = mlc_cuda_device_create(&code, mlc_allocator_default(), &dev);
  expect_loss(st, "corrupt plan: the tensor maps of CUDA kernel");
  mlc_plan_free(pl);

  /* Faults, each with the checksum fixed up so the structure is what fails. */
  uint8_t *c = malloc(n);
  const char *k0 = NULL, *k1 = NULL;
  assert_null(mlc_plan_parse(b, n, mlc_allocator_default(), &pl));
  k0 = mlc_arena_strdup(&arena, pl->kernels[0]);
  k1 = mlc_arena_strdup(&arena, pl->kernels[1]);
  mlc_plan_free(pl);
  size_t at0 = after_symbol(b, n, k0), at1 = after_symbol(b, n, k1);
  memcpy(c, b, n);
  c[at0] = 7; /* executable 7 of 2 */
  expect_loss(parse_copy(c, n, true), "a kernel's executable does not exist");
  memcpy(c, b, n);
  c[at0 + 4] ^= 1; /* nargs: the steps no longer agree */
  expect_loss(parse_copy(c, n, true), "arguments to kernel");
  memcpy(c, b, n);
  c[at0 + 16] = MLC_PLAN_MAX_LAUNCH + 1; /* nlaunches */
  expect_loss(parse_copy(c, n, true), "corrupt plan:");
  memcpy(c, b, n);
  c[at0 + 20 + 4 + 5] = 0; /* launch 0's grid[0] ("first" is 5 bytes) */
  expect_loss(parse_copy(c, n, true), "a launch's grid has an empty dimension");
  memcpy(c, b, n);
  c[at0 + 20 + 4 + 5 + 12 + 2] = 0x10; /* launch 0's block[0]: 128 + 2^20 threads */
  expect_loss(parse_copy(c, n, true), "a launch's block is too large");
  memcpy(c, b, n);
  c[at1 + 16] = 0; /* no launches, with an executable */
  expect_loss(parse_copy(c, n, true), "corrupt plan:");
  /* The executables: their count, and the first one's length. */
  size_t ex = after_symbol(b, n, "cuda-source") - strlen("cuda-source") - 8;
  memcpy(c, b, n);
  c[ex + 3] = 0x40;
  expect_loss(parse_copy(c, n, true), "executable count too large");
  memcpy(c, b, n);
  c[ex + 4 + 4 + strlen("cuda-source") + 2] = 0x7f;
  expect_loss(parse_copy(c, n, true), "blob runs past the end");
  /* Every truncation inside the section is refused with a message. */
  for (size_t cut = ex; cut < at1 + 64; cut++) {
    mlc_status t = parse_copy(b, cut, true);
    assert_non_null(t);
    assert_int_equal(mlc_status_code(t), MLC_DATA_LOSS);
    assert_non_null(strstr(mlc_status_message(t), "corrupt plan:"));
    mlc_status_free(t);
  }
  free(c);
}

/* Asserts st has the code and its message contains `part`, then frees it. */
static void fails(mlc_status st, mlc_status_code_t code, const char *part) {
  if (!st) fail_msg("expected %s with '%s', got success", mlc_status_code_name(code), part);
  if (mlc_status_code(st) != code || !strstr(mlc_status_message(st), part))
    fail_msg("expected %s with '%s', got %s: %s", mlc_status_code_name(code), part,
             mlc_status_code_name(mlc_status_code(st)), mlc_status_message(st));
  mlc_status_free(st);
}

/* The test plan with every kernel in one executable of `format`: one launch
 * of one block, or none for native code. */
static mlc_plan *format_plan(const char *format, const uint8_t *code, uint32_t code_bytes) {
  mlc_plan *pl;
  assert_null(mlc_plan_parse(bytes, nbytes, mlc_allocator_default(), &pl));
  uint32_t n = pl->nkernels;
  bool native = !strcmp(format, MLC_PLAN_FORMAT_NATIVE);
  mlc_plan_kernel_code *r = mlc_arena_alloc(&arena, n * sizeof *r);
  for (uint32_t i = 0; i < n; i++) {
    r[i] = (mlc_plan_kernel_code){.symbol = mlc_arena_strdup(&arena, pl->kernels[i]), .nlaunch = 1};
    r[i].launch[0] = native ? (mlc_plan_launch){.entry = "k"} : (mlc_plan_launch){"k", {1, 1, 1}, {64, 1, 1}, 0};
  }
  mlc_plan_free(pl);
  mlc_plan_executable *x = mlc_arena_alloc(&arena, sizeof *x);
  *x = (mlc_plan_executable){mlc_arena_strdup(&arena, format), code, code_bytes};
  mlc_plan_code c = {1, x, n, r, false};
  uint8_t *b;
  size_t nb;
  mlc_plan_encode_code(&prog, namer, NULL, NULL, &c, &b, &nb);
  assert_null(mlc_plan_parse(b, nb, mlc_allocator_default(), &pl));
  return pl;
}

/* mlc_device_create from a plan alone: the driver its executables' format
 * names, and the errors for plans that name none, two, an unknown one, or
 * native code (which a plan cannot carry). */
static void test_device_from_plan(void **state) {
  (void)state;
  const mlc_driver *d = (const mlc_driver *)&d;
  mlc_device *dev = (mlc_device *)&d;
  mlc_device_options o = {.plan = NULL};
  fails(mlc_device_create(NULL, 0, &o, &dev), MLC_INVALID_ARGUMENT, "no driver named, and no plan");
  assert_null(dev);

  mlc_plan *pl;
  assert_null(mlc_plan_parse(bytes, nbytes, mlc_allocator_default(), &pl));
  fails(mlc_driver_for_plan(pl, &d), MLC_INVALID_ARGUMENT, "carries no code (no executables)");
  assert_null(d);
  o.plan = pl;
  fails(mlc_device_create(NULL, 0, &o, &dev), MLC_INVALID_ARGUMENT, "carries no code");
  mlc_plan_free(pl);

  uint8_t *b;
  size_t n;
  uint32_t nk;
  code_plan(&arena, &b, &n, &nk);
  assert_null(mlc_plan_parse(b, n, mlc_allocator_default(), &pl));
  fails(mlc_driver_for_plan(pl, &d), MLC_INVALID_ARGUMENT,
        "has code for two device drivers, cuda ('cuda-source') and vulkan ('spirv'): one device cannot run it");
  mlc_plan_free(pl);

  pl = format_plan("hip-hsaco", spirv_bytes, sizeof spirv_bytes);
  fails(mlc_driver_for_plan(pl, &d), MLC_UNIMPLEMENTED, "code in format 'hip-hsaco', which no device driver");
  mlc_plan_free(pl);

  pl = format_plan(MLC_PLAN_FORMAT_NATIVE, NULL, 0);
  assert_null(mlc_driver_for_plan(pl, &d));
  assert_string_equal(d->name, "cpu");
  o.plan = pl;
  fails(mlc_device_create(NULL, 0, &o, &dev), MLC_INVALID_ARGUMENT, "runs native code, the CPU's kernels");
  fails(mlc_device_create("cpu", 0, &o, &dev), MLC_INVALID_ARGUMENT, "which are linked into its artifact");
  mlc_plan_free(pl);

  pl = format_plan(MLC_PLAN_FORMAT_CUDA_SOURCE, (const uint8_t *)cuda_text, sizeof cuda_text - 1);
  assert_null(mlc_driver_for_plan(pl, &d));
  assert_string_equal(d->name, "cuda");
  o.plan = pl;
  fails(mlc_device_create("cpu", 0, &o, &dev), MLC_INVALID_ARGUMENT,
        "device driver 'cpu' cannot run the plan of minillm: its code is for cuda");
  /* Without a GPU the CUDA driver says so; with one, the kernel does not
   * compile or the device is made: never an argument error. */
  mlc_status st = mlc_device_create(NULL, 0, &o, &dev);
  if (dev) dev->vt->destroy(dev);
  assert_true(!st || mlc_status_code(st) != MLC_INVALID_ARGUMENT);
  mlc_status_free(st);
  mlc_plan_free(pl);

  pl = format_plan(MLC_PLAN_FORMAT_SPIRV, spirv_bytes, sizeof spirv_bytes);
  const mlc_driver *vk;
  mlc_status built = mlc_driver_find("vulkan", &vk);
  if (built) fails(mlc_driver_for_plan(pl, &d), MLC_UNIMPLEMENTED, "built without Vulkan");
  else {
    assert_null(mlc_driver_for_plan(pl, &d));
    assert_ptr_equal(d, vk);
  }
  mlc_status_free(built);
  mlc_plan_free(pl);
}

/* mlc_plan_read_file: the plan back from its file, and a clear refusal,
 * naming the file, of a missing, foreign, truncated, longer or corrupt one. */
static void test_read_file(void **state) {
  (void)state;
  char path[] = "/tmp/mlc_test_plan_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  const uint8_t *b = bytes;
  struct { size_t len; const char *tail; mlc_status_code_t code; const char *part; } cases[] = {
    {nbytes, NULL, MLC_OK, NULL},
    {nbytes - 1, NULL, MLC_DATA_LOSS, "bytes of plan follow it, but"},
    {nbytes, "x", MLC_DATA_LOSS, "bytes of plan follow it, but"},
    {10, NULL, MLC_DATA_LOSS, "not an mlc plan (it does not start with \"MLCPLAN\")"},
    {0, "hello\n", MLC_DATA_LOSS, "not an mlc plan"},
    {nbytes, "", MLC_DATA_LOSS, "checksum mismatch"}, /* a flipped byte, below */
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    uint8_t *c = malloc(nbytes);
    memcpy(c, b, nbytes);
    if (i == 5) c[nbytes - 3] ^= 0x20;
    assert_int_equal(fwrite(c, 1, cases[i].len, f), cases[i].len);
    free(c);
    if (cases[i].tail) fputs(cases[i].tail, f);
    fclose(f);
    mlc_plan *pl = (mlc_plan *)path;
    mlc_status st = mlc_plan_read_file(path, mlc_allocator_default(), &pl);
    if (cases[i].code == MLC_OK) {
      if (st) fail_msg("%s", mlc_status_message(st));
      assert_string_equal(pl->model, "minillm");
      mlc_plan_free(pl);
      continue;
    }
    assert_null(pl);
    assert_non_null(st);
    assert_non_null(strstr(mlc_status_message(st), path)); /* the message names the file */
    fails(st, cases[i].code, cases[i].part);
  }
  unlink(path);
  mlc_plan *pl;
  fails(mlc_plan_read_file(path, mlc_allocator_default(), &pl), MLC_NOT_FOUND, "cannot open");
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_roundtrip),
    cmocka_unit_test(test_corrupt),
    cmocka_unit_test(test_views),
    cmocka_unit_test(test_executables),
    cmocka_unit_test(test_native),
    cmocka_unit_test(test_device_from_plan),
    cmocka_unit_test(test_read_file),
    cmocka_unit_test(test_quantized),
    cmocka_unit_test(test_failing_allocator),
    cmocka_unit_test(test_session_failing_allocator),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
