/* fuse: rewrites for the GPU targets (CUDA, Metal), after the optimizer and before the
 * memory plan (so that what it removes is never allocated).  Six rewrites,
 * then every node that nothing uses any more is dropped:
 *
 * 1. matmul(transpose(dY), X) -> matmul_tn(dY, X).  The weight gradients of
 *    linear layers come out of autodiff with dY [tokens, out] transposed
 *    into a fresh [out, tokens] buffer first; a GPU GEMM reads dY
 *    column-wise as it is, so the transpose goes, with its traffic (two
 *    passes over dY; 1 GB for the MiniLLM's head).
 *
 * 2. Elementwise groups and GEMM epilogues -> one FUSED node each
 *    (ir/fused.h).  From the last node back, an elementwise op (EW|FUSE in
 *    ops.def, casts included) takes in every elementwise producer whose
 *    only user is in the group, transitively: a tree of ops whose
 *    intermediates nobody else reads, run as one kernel, one pass over
 *    memory.  Then, if one of the group's outside inputs is a GEMM
 *    (matmul, linear, matmul_tn; on CUDA also qlinear, the weight-only
 *    quantised linear of --quantize, and scaled_mm, the FP8 GEMM of
 *    --matmul=fp8) of the group's shape that only the
 *    group reads, the GEMM joins as the head and the group becomes its
 *    epilogue, applied in the GEMM's store: the bias add, SiLU/GELU,
 *    residual add and cast after a linear layer, the cast of a weight
 *    gradient to f32 (on CUDA only those that pay: epilogue_pays).  Only
 *    groups of two ops or more become FUSED nodes; a lone op keeps its own
 *    kernel.
 *
 * 3. CUDA: an rmsnorm whose only reader is a linear of at most the
 *    target's gemv_prologue_rows rows (a decode step's norms before the
 *    in-projection, the FFN and the head) -> that GEMM's prologue
 *    (fuse_prologues): the matrix-vector kernel normalises x first, and the
 *    norm has no launch of its own.
 *
 * 4. CUDA (one GPU): the AdamW (SGD) updates of a step -> adamw_multi
 *    (sgd_multi) nodes of up to UPDATE_GROUP parameters each, one launch per
 *    group instead of one per tensor, grouped by readiness inside the
 *    backward (group_updates).  A gradient that a cast to f32 only
 *    widens for its update (a bf16 weight gradient under
 *    precision(param=bf16)) is read in 16 bits by the group (update_grad),
 *    and the cast goes.  The forward's cast of a weight to bf16 becomes a
 *    parameter of its own, the weight's shadow, that the group writes as
 *    it updates the weight (shadow_casts), and that cast goes too.  (One
 *    launch for all would need more kernel arguments than the CUDA runtime
 *    passes: 72.  Metal keeps one update per tensor: a Metal kernel takes
 *    at most 31 buffers.)
 *
 * 5. max(abs(x)) -> a max that reads |x| as it loads, and that gives f32
 *    itself where a cast to f32 was its only reader (fold_abs; first of
 *    all, with 1).
 *
 * 6. CUDA and Metal: add(r, rmsnorm_grad_x(g, x, w)) where only the add
 *    reads the norm's gradient -> rmsnorm_grad_x(g, x, w, r), the same for
 *    layernorm (norm_grad_adds): the residual stream's gradient is added
 *    in the norm kernel's store, and dx is not written and read again
 *    (0.87 ms of adds in the MiniLLM's step on an H100).
 *
 * The CPU target packs GEMM operands into its own layout and fuses in its
 * own code generator; it does not run this pass, and no other pass sees
 * matmul_tn, fused, adamw_multi or sgd_multi.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/fused.h"

#include "passes/passes.h"


#define UPDATE_GROUP 16 /* at most, and fewer where the target's max_kernel_args would be passed (CUDA's 72: adamw_multi
                           takes 5 * 13 + 2 inputs, the output and scratch; sgd_multi 4 * 16 + 1) */
#define NONE UINT32_MAX
#define UPDATE_HOLD ((int64_t)32 << 20) /* a group's gradients, in bytes: see group_updates */

static bool rewrite_tn(mlc_func *f) {
  bool changed = false;
  for (uint32_t i = 0; i < f->n; i++) {
    mlc_node *n = &f->nodes[i];
    if (n->op != MLC_OP_MATMUL || n->type.rank != 2) continue;
    const mlc_node *t = &f->nodes[n->in[0]], *b = &f->nodes[n->in[1]];
    if (t->op != MLC_OP_TRANSPOSE || t->type.rank != 2 || b->type.rank != 2) continue;
    n->op = MLC_OP_MATMUL_TN;
    n->in[0] = t->in[0];
    changed = true;
  }
  return changed;
}

static uint32_t *count_uses(mlc_program *p, const mlc_func *f) {
  uint32_t *uses = mlc_arena_alloc(p->arena, (f->n + 1) * sizeof *uses);
  memset(uses, 0, (f->n + 1) * sizeof *uses);
  for (uint32_t i = 0; i < f->n; i++)
    for (uint32_t k = 0; k < f->nodes[i].nin; k++) uses[f->nodes[i].in[k]]++;
  for (uint32_t i = 0; i < f->noutputs; i++) uses[f->outputs[i].node]++;
  return uses;
}

static bool ew(const mlc_node *n) { return (mlc_ops[n->op].flags & (MLC_F_EW | MLC_F_FUSE)) == (MLC_F_EW | MLC_F_FUSE); }
static bool gemm(const mlc_node *n) {
  return n->op == MLC_OP_MATMUL || n->op == MLC_OP_LINEAR || n->op == MLC_OP_MATMUL_TN;
}

typedef struct {
  uint32_t mem[MLC_FUSED_MAX]; /* members, the root first until sorted */
  uint32_t nmem;
  uint32_t ext[MLC_FUSED_MAX_IN]; /* outside inputs, in operand order */
  uint32_t next;
  uint32_t head; /* the GEMM, or UINT32_MAX */
} group;

static bool member(const group *g, uint32_t x) {
  for (uint32_t i = 0; i < g->nmem; i++)
    if (g->mem[i] == x) return true;
  return x == g->head;
}

typedef struct {
  char s[2048];
  size_t n;
  bool full;
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(t->s + t->n, sizeof t->s - t->n, fmt, ap);
  va_end(ap);
  if (k < 0 || (size_t)k >= sizeof t->s - t->n) t->full = true;
  else t->n += (size_t)k;
}

/* Writes the operand of node x inside group g: #j (instruction j) or $k
 * (outside input k, numbered by first use). */
static void operand(group *g, text *t, uint32_t x) {
  if (x == g->head) {
    put(t, "#0");
    return;
  }
  uint32_t base = g->head != UINT32_MAX;
  for (uint32_t j = 0; j < g->nmem; j++)
    if (g->mem[j] == x) {
      put(t, "#%u", j + base);
      return;
    }
  uint32_t e = 0;
  while (e < g->next && g->ext[e] != x) e++;
  if (e == g->next) {
    if (g->next == MLC_FUSED_MAX_IN) {
      t->full = true;
      return;
    }
    g->ext[g->next++] = x;
  }
  put(t, "$%u", e);
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

static bool same_dims(const mlc_type *a, const mlc_type *b) {
  if (a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->dim[i] != b->dim[i]) return false;
  return true;
}

/* Whether a GEMM should take group g as its epilogue.  On CUDA, measured on
 * the H200 (bench/results/cuda-fused-2026-11-30.md): a bias or residual add
 * in the GEMM's store costs about what the separate kernel did, but an
 * epilogue that widens the output (matmul_tn then cast to f32: about 0.03 ms
 * slower per weight gradient) or computes an activation per element
 * (matmul then silu_grad: 0.76 ms against 0.57 ms for the two kernels)
 * loses: the wgmma kernels stored straight from their fragments, so the
 * epilogue's loads were narrow and waited on the stores before them.  The
 * wgmma kernel's store now goes through shared memory, but an activation
 * there still loses: the FFN's linear then SiLU (8192 x 8192 x 2048 bf16)
 * took 0.55 ms fused against 0.41 + 0.085 ms apart
 * (bench/results/attention-wg-2026-12-01/silu-fused/): the epilogue runs
 * with the tensor cores idle, one CTA per SM, and SiLU was then expf and a
 * division to the last ulp, some 30 instructions an element.  SiLU is now
 * the special-function unit's exp and reciprocal on CUDA (mlc_silu in
 * codegen/cuda/prelude.c) and goes into the epilogue, as do ReLU and its
 * gradient (a compare and a select, no dearer than the add); the other
 * activations stay separate kernels on CUDA unless the epilogue overlaps
 * the next tile's main loop, as the persistent ping-pong kernel's does
 * (--cuda-gemm-tile=pp,ST: one consumer warpgroup stores while the other
 * multiplies), which therefore takes them all (acts).  An f32 GEMM of three
 * TF32 products, whose main loop is three times a 16-bit one's, does not
 * change this: gpt2like's c_proj dX GEMM with gelu_tanh_grad in its
 * epilogue took 0.331 ms against 0.266 + 0.038 ms apart
 * (bench/results/h200-2026-12-04b/f32-20e501c/gpt2like_profile.log).
 * Metal's GEMM stores through threadgroup memory, coalesced, and takes
 * every epilogue. */
static bool epilogue_pays(const mlc_func *f, const group *g, bool cuda, bool acts) {
  if (!cuda) return true;
  const mlc_node *h = &f->nodes[g->head];
  if (f->nodes[g->mem[0]].type.dtype != h->type.dtype) return false; /* mem[0] is the root */
  if (acts) return true;
  for (uint32_t j = 0; j < g->nmem; j++) {
    uint16_t op = f->nodes[g->mem[j]].op;
    if (op != MLC_OP_ADD && op != MLC_OP_SUB && op != MLC_OP_MUL && op != MLC_OP_NEG && op != MLC_OP_CAST &&
        op != MLC_OP_SILU && op != MLC_OP_RELU && op != MLC_OP_RELU_GRAD)
      return false;
  }
  return true;
}

/* Whether an optimizer update runs between nodes a and b (a < b).  The
 * interleave pass puts each update after the last reader of what it
 * writes; a GEMM that joins a group as its head would, at the group's
 * root, read its weight after the update (the input gradient's GEMM
 * before a ReLU's gradient, with the weight's update between them). */
static bool update_between(const mlc_func *f, uint32_t a, uint32_t b) {
  for (uint32_t i = a + 1; i < b; i++)
    if (mlc_op_is_update(f->nodes[i].op)) return true;
  return false;
}

/* cast(max of |x|, f32) where only the cast reads the max, x a 16-bit
 * float -> the max gives f32 itself (ir/ir.h), and the cast's readers read
 * it: the fp8 pass's amaxes of bf16 tensors ended in a kernel of their own
 * for one element each, 14 a layer, 0.7 of the MiniLLM's 71 ms FP8 step on
 * an H100 (bench/results/h100-2026-12-06). */
static bool fold_amax_cast(mlc_program *p, mlc_func *f, const uint32_t *uses) {
  bool changed = false;
  for (uint32_t i = 0; i < f->n; i++) {
    mlc_node *c = &f->nodes[i];
    if (c->op != MLC_OP_CAST || c->type.dtype != MLC_DT_F32 || mlc_node_sharded(p, f, c)) continue;
    mlc_node *m = &f->nodes[c->in[0]];
    if (m->op != MLC_OP_MAX || !m->a.abs_in || uses[c->in[0]] != 1 || m->type.dtype == MLC_DT_F32) continue;
    m->type.dtype = MLC_DT_F32;
    for (uint32_t j = i + 1; j < f->n; j++)
      for (uint32_t k = 0; k < f->nodes[j].nin; k++)
        if (f->nodes[j].in[k] == i) f->nodes[j].in[k] = c->in[0];
    for (uint32_t o = 0; o < f->noutputs; o++)
      if (f->outputs[o].node == i) f->outputs[o].node = c->in[0];
    changed = true;
  }
  return changed;
}

/* max(abs(x)) where only the max reads the abs -> max of x with abs_in
 * (ir/ir.h): the reduction takes |x| as it loads, and the abs kernel, a
 * pass that wrote |x| for the max to read again, goes.  The fp8 pass's
 * amaxes are these (5.6 of 80.9 ms of the MiniLLM's FP8 step on an H100
 * went to abs, bench/results/h100-2026-12-06). */
static bool fold_abs(mlc_program *p, mlc_func *f) {
  uint32_t *uses = count_uses(p, f);
  bool changed = false;
  for (uint32_t i = 0; i < f->n; i++) {
    mlc_node *n = &f->nodes[i];
    if (n->op != MLC_OP_MAX || n->a.abs_in) continue;
    const mlc_node *a = &f->nodes[n->in[0]];
    if (a->op != MLC_OP_ABS || uses[n->in[0]] != 1 || !mlc_dtype_is_float(a->type.dtype) || mlc_node_sharded(p, f, a)) continue;
    n->in[0] = a->in[0];
    n->a.abs_in = 1;
    changed = true;
  }
  return changed | fold_amax_cast(p, f, uses);
}

/* Groups elementwise trees (and a GEMM head where allowed) into FUSED nodes. */
static bool fuse_groups(mlc_program *p, mlc_func *f, bool epilogues, bool cuda, bool qlinear, bool scaled) {
  bool acts = p->opts.cuda_gemm_tile[0] == -128; /* the persistent ping-pong GEMM */
  uint32_t *uses = count_uses(p, f);
  bool *taken = mlc_arena_alloc(p->arena, (f->n + 1) * sizeof *taken);
  memset(taken, 0, (f->n + 1) * sizeof *taken);
  bool changed = false;
  for (uint32_t r = f->n; r-- > 0;) {
    /* a sharded cast (fsdp) runs on this rank's rows only: never in a group */
    if (taken[r] || !ew(&f->nodes[r]) || mlc_node_sharded(p, f, &f->nodes[r])) continue;
    group g = {.head = UINT32_MAX};
    g.mem[g.nmem++] = r;
    /* the tree: producers whose only user is a member */
    for (uint32_t w = 0; w < g.nmem; w++) {
      const mlc_node *m = &f->nodes[g.mem[w]];
      for (uint32_t k = 0; k < m->nin; k++) {
        uint32_t x = m->in[k];
        if (taken[x] || uses[x] != 1 || !ew(&f->nodes[x]) || member(&g, x) || mlc_node_sharded(p, f, &f->nodes[x]))
          continue;
        if (g.nmem + 1 == MLC_FUSED_MAX) break;
        g.mem[g.nmem++] = x;
      }
    }
    /* a GEMM of the group's shape that only the group reads becomes its head */
    const mlc_node *root = &f->nodes[r];
    for (uint32_t w = 0; epilogues && w < g.nmem && g.head == UINT32_MAX; w++) {
      const mlc_node *m = &f->nodes[g.mem[w]];
      for (uint32_t k = 0; k < m->nin && g.head == UINT32_MAX; k++) {
        const mlc_node *x = &f->nodes[m->in[k]];
        if (!taken[m->in[k]] && (gemm(x) || (qlinear && x->op == MLC_OP_QLINEAR) || (scaled && x->op == MLC_OP_SCALED_MM)) &&
            uses[m->in[k]] == 1 &&
            same_dims(&x->type, &root->type) && mlc_dtype_is_float(root->type.dtype))
          g.head = m->in[k];
      }
    }
    if (g.head != UINT32_MAX && !epilogue_pays(f, &g, cuda, acts)) g.head = UINT32_MAX;
    if (g.nmem + (g.head != UINT32_MAX) < 2) continue;
    qsort(g.mem, g.nmem, sizeof *g.mem, cmp_u32); /* topological: inputs come first */
    text t = {.n = 0};
    if (g.head != UINT32_MAX) {
      const mlc_node *h = &f->nodes[g.head];
      for (uint32_t k = 0; k < h->nin; k++) g.ext[g.next++] = h->in[k]; /* two; scaled_mm's four */
      if (h->op == MLC_OP_QLINEAR) put(&t, "qlinear.%d.%d%s%s($0, $1)", h->a.qbits, h->a.qgroup, h->a.qscheme & MLC_QS_ASYM ? ".asym" : "",
            h->a.qscheme & MLC_QS_BF16 ? "" : ".sf32");
      else if (h->op == MLC_OP_SCALED_MM) put(&t, "scaled_mm.%s($0, $1, $2, $3)", mlc_dtype_name(h->type.dtype));
      else put(&t, "%s($0, $1)", mlc_ops[h->op].name);
    }
    for (uint32_t j = 0; j < g.nmem; j++) {
      const mlc_node *m = &f->nodes[g.mem[j]];
      put(&t, "%s%s", t.n ? "; " : "", mlc_ops[m->op].name);
      if (m->op == MLC_OP_CAST) put(&t, ".%s", mlc_dtype_name(m->type.dtype));
      put(&t, "(");
      for (uint32_t k = 0; k < m->nin; k++) {
        if (k) put(&t, ", ");
        operand(&g, &t, m->in[k]);
      }
      put(&t, ")");
    }
    if (t.full) continue; /* too many inputs or too long: leave the group unfused */
    /* Where the FUSED node goes: at the root, unless an update runs between
     * the head and the root; then at the head, where every outside input
     * must already be made (else the group stays unfused). */
    uint32_t at = r;
    if (g.head != UINT32_MAX && update_between(f, g.head, r)) {
      at = g.head;
      for (uint32_t e = 0; e < g.next; e++)
        if (g.ext[e] > g.head) at = UINT32_MAX;
      if (at == UINT32_MAX) continue;
    }
    mlc_node *n = &f->nodes[at];
    if (at != r) { /* the head's node becomes the group; the root's readers read it instead */
      n->type = f->nodes[r].type;
      n->scope = f->nodes[r].scope;
      n->loc = f->nodes[r].loc;
      for (uint32_t i = r + 1; i < f->n; i++)
        for (uint32_t k = 0; k < f->nodes[i].nin; k++)
          if (f->nodes[i].in[k] == r) f->nodes[i].in[k] = at;
      for (uint32_t o = 0; o < f->noutputs; o++)
        if (f->outputs[o].node == r) f->outputs[o].node = at;
    }
    n->op = MLC_OP_FUSED;
    n->nin = (uint16_t)g.next;
    n->in = mlc_arena_alloc(p->arena, g.next * sizeof *n->in);
    memcpy(n->in, g.ext, g.next * sizeof *n->in);
    memset(&n->a, 0, sizeof n->a);
    n->a.name = mlc_arena_strndup(p->arena, t.s, t.n);
    for (uint32_t j = 0; j < g.nmem; j++) taken[g.mem[j]] = true;
    if (g.head != UINT32_MAX) taken[g.head] = true;
    char err[256];
    mlc_type ty;
    if (!mlc_infer_type(p, f, n, &ty, err, sizeof err) || !mlc_type_eq(&ty, &n->type))
      MLC_ICE("fuse: group at %%%u: %s", r, err);
    changed = true;
  }
  return changed;
}

/* Writes instruction in of a linear's program (no qlinear: fuse_prologues
 * takes none) as fused.h spells it, its operands
 * renumbered for a prologue before it: #j as #(j + 1), $0 as #0 (the
 * norm) where norm_x, $k as $(k + dk) from $2 on. */
static void put_ins(text *t, const mlc_fused_ins *in, bool norm_x, int dk) {
  put(t, "%s%s", t->n ? "; " : "", mlc_ops[in->op].name);
  if (in->op == MLC_OP_CAST) put(t, ".%s", mlc_dtype_name(in->type.dtype));
  put(t, "(");
  for (int k = 0; k < in->nin; k++) {
    int a = in->arg[k];
    if (a >= 0) put(t, "%s#%d", k ? ", " : "", a + 1);
    else if (a == -1 && norm_x) put(t, "%s#0", k ? ", " : "");
    else put(t, "%s$%d", k ? ", " : "", -1 - a + (-1 - a >= 2 ? dk : 0));
  }
  put(t, ")");
}

/* An rmsnorm whose only reader is a linear (alone or heading an epilogue
 * group) of at most `rows` rows and `bytes` bytes of x -> that GEMM's
 * prologue (ir/fused.h): the decode step's norms before the in-projection,
 * the FFN and the head are then done by the matrix-vector kernel's blocks,
 * each of which normalises x into its shared memory first, with no launch
 * of their own.  The node's inputs become x, the weight, the norm's
 * weight, then the epilogue's.  (Not the qlinear's: its blocks are a warp
 * or a few, each of which would read all of x for the statistics.) */
static bool fuse_prologues(mlc_program *p, mlc_func *f, int rows, int bytes) {
  uint32_t *uses = count_uses(p, f);
  bool changed = false;
  for (uint32_t i = 0; i < f->n; i++) {
    mlc_node *n = &f->nodes[i];
    mlc_fused_prog pr = {.n = 0};
    char err[256];
    bool fused = n->op == MLC_OP_FUSED;
    if (fused && !mlc_fused_program(f, n, &pr, err, sizeof err)) MLC_ICE("fuse: %%%u: %s", i, err);
    if (fused ? pr.gemm != 0 : n->nin != 2) continue;
    uint16_t op = fused ? pr.ins[0].op : n->op;
    if (op != MLC_OP_LINEAR) continue;
    const mlc_node *r = &f->nodes[n->in[0]];
    if (r->op != MLC_OP_RMSNORM || uses[n->in[0]] != 1 || !r->type.rank || mlc_node_sharded(p, f, r) ||
        mlc_node_sharded(p, f, n) || update_between(f, n->in[0], i))
      continue;
    int64_t K = r->type.dim[r->type.rank - 1];
    if (K < 1 || mlc_type_numel(&r->type) / K > rows ||
        mlc_type_numel(&r->type) * mlc_dtype_size(r->type.dtype) > bytes)
      continue;
    int w = r->nin == 2; /* the norm's weight */
    uint32_t nin = n->nin + (uint32_t)w;
    if (nin > MLC_FUSED_MAX_IN || (fused && pr.n + 1 > MLC_FUSED_MAX)) continue;
    text t = {.n = 0};
    put(&t, "rmsnorm.%.17g($0%s)", r->a.f, w ? ", $2" : "");
    if (fused) {
      for (uint32_t j = 0; j < pr.n; j++) put_ins(&t, &pr.ins[j], j == 0, w);
    } else {
      mlc_fused_ins g = {.op = op, .nin = 2, .arg = {-1, -2}};
      put_ins(&t, &g, true, w);
    }
    if (t.full) continue;
    uint32_t *in = mlc_arena_alloc(p->arena, nin * sizeof *in);
    in[0] = r->in[0], in[1] = n->in[1];
    if (w) in[2] = r->in[1];
    for (uint32_t k = 2; k < n->nin; k++) in[k + w] = n->in[k];
    mlc_type ty = n->type;
    n->op = MLC_OP_FUSED;
    n->nin = (uint16_t)nin;
    n->in = in;
    memset(&n->a, 0, sizeof n->a);
    n->a.name = mlc_arena_strndup(p->arena, t.s, t.n);
    mlc_type got;
    if (!mlc_infer_type(p, f, n, &got, err, sizeof err) || !mlc_type_eq(&got, &ty))
      MLC_ICE("fuse: prologue of %%%u (%s): %s", i, n->a.name, err);
    uses[n->in[0]]++; /* the norm's x is read here now; the norm itself goes */
    changed = true;
  }
  return changed;
}

/* Rewrite 6: add(r, norm_grad_x(g, x, w)) -> norm_grad_x(g, x, w, r) in
 * the add's place, where the add reads the norm's gradient and a value r
 * of its type, and is its only reader.  The kernel rounds dx to its dtype
 * before it adds r, as the add read it, so the values are the same. */
static bool norm_grad_adds(mlc_program *p, mlc_func *f) {
  const uint32_t *uses = count_uses(p, f);
  bool changed = false;
  for (uint32_t i = 0; i < f->n; i++) {
    mlc_node *a = &f->nodes[i];
    if (a->op != MLC_OP_ADD || a->nin != 2) continue;
    for (int side = 0; side < 2; side++) {
      const uint32_t q = a->in[side], r = a->in[1 - side];
      const mlc_node *nq = &f->nodes[q];
      if ((nq->op != MLC_OP_RMSNORM_GRAD_X && nq->op != MLC_OP_LAYERNORM_GRAD_X) || nq->nin != 3 || uses[q] != 1 || q == r ||
          !mlc_type_eq(&nq->type, &a->type) || !mlc_type_eq(&f->nodes[r].type, &a->type) || update_between(f, q, i))
        continue; /* (an update between them may write the norm's weight, which the norm then reads later) */
      uint32_t *in = mlc_arena_alloc(p->arena, 4 * sizeof *in);
      memcpy(in, nq->in, 3 * sizeof *in);
      in[3] = r;
      a->op = nq->op;
      a->a = nq->a;
      a->nin = 4;
      a->in = in;
      a->scope = nq->scope;
      a->loc = nq->loc;
      char err[256];
      if (!mlc_infer_type(p, f, a, &a->type, err, sizeof err)) MLC_ICE("fuse: %s", err);
      changed = true;
      break;
    }
  }
  return changed;
}

/* The gradient an update reads.  Under precision(param=bf16) a weight's
 * gradient is a 16-bit value (its GEMM's, norm's or sum's output) widened
 * by a cast to f32 that only the update reads: the group's kernel reads the
 * 16-bit value itself and widens it as it loads.  The values are the same
 * (every bf16 or f16 is an f32); the cast's kernel (2 + 4 bytes an element)
 * and 2 of the update's bytes an element go, and the gradient held until
 * its group runs is half as large. */
static uint32_t update_grad(const mlc_program *p, const mlc_func *f, const uint32_t *uses, uint32_t g) {
  const mlc_node *c = &f->nodes[g];
  if (c->op != MLC_OP_CAST || c->type.dtype != MLC_DT_F32 || uses[g] != 1 || mlc_node_sharded(p, f, c)) return g;
  uint8_t dt = f->nodes[c->in[0]].type.dtype;
  return dt == MLC_DT_BF16 || dt == MLC_DT_F16 ? c->in[0] : g;
}

/* The weights' 16-bit shadows (MLC_ROLE_SHADOW).  Under
 * precision(param=bf16) each step's forward begins by casting every f32
 * weight to bf16 (4 bytes read and 2 written an element: 1.8 ms of the
 * MiniLLM's step on an H100), and the update then reads and writes the
 * same weight again.  Where a weight's cast qualifies, it becomes a
 * parameter of its own, the shadow, that the group's kernel writes beside
 * the weight as it updates it (2 bytes an element, the same conversion as
 * the cast's store), and that the runtime makes from the weight whenever
 * the weight is loaded, drawn or set: the forward reads the very values
 * the cast gave it.  A cast qualifies when it is the only 16-bit cast of
 * an f32 model weight (not inside an fsdp flat) that one update of f
 * (single) updates, and every reader of it, through views, comes before
 * that update, which writes the shadow in place (the interleave pass has
 * placed each update after the last reader of its weight, not of the
 * cast: a backward GEMM that read the old values later would read the new
 * ones; autodiff computes dX before dW, so none does in the models we
 * have).  A plan over its memory budget gives the shadows up again
 * (passes/recompute.c).  shadow[u]: the shadow's node for update u (the
 * cast's node, now a PARAM), or NONE. */
static uint32_t *shadow_casts(mlc_program *p, mlc_func *f, mlc_op one) {
  const uint32_t n = f->n;
  uint32_t *shadow = mlc_arena_alloc(p->arena, (n + 1) * sizeof *shadow), *root = mlc_arena_alloc(p->arena, (n + 1) * sizeof *root);
  uint32_t *last = mlc_arena_alloc(p->arena, (n + 1) * sizeof *last), *cast = mlc_arena_alloc(p->arena, (n + 1) * sizeof *cast);
  for (uint32_t i = 0; i < n; i++) {
    const mlc_node *nd = &f->nodes[i];
    root[i] = (mlc_ops[nd->op].flags & MLC_F_VIEW) && nd->nin ? root[nd->in[0]] : i;
    shadow[i] = cast[i] = NONE;
    last[i] = i;
    for (uint32_t k = 0; k < nd->nin; k++) last[root[nd->in[k]]] = i;
  }
  for (uint32_t o = 0; o < f->noutputs; o++) last[root[f->outputs[o].node]] = n;
  /* cast[w]: weight node w's one 16-bit cast (UINT32_MAX - 1: more than one) */
  for (uint32_t i = 0; i < n; i++) {
    const mlc_node *nd = &f->nodes[i];
    if (nd->op != MLC_OP_CAST || (nd->type.dtype != MLC_DT_BF16 && nd->type.dtype != MLC_DT_F16)) continue;
    uint32_t w = nd->in[0];
    if (f->nodes[w].op == MLC_OP_PARAM) cast[w] = cast[w] == NONE ? i : NONE - 1;
  }
  for (uint32_t u = 0; u < n; u++) {
    const mlc_node *up = &f->nodes[u];
    if (up->op != one || mlc_node_sharded(p, f, up)) continue;
    const uint32_t w = up->in[0], c = cast[w];
    if (f->nodes[w].op != MLC_OP_PARAM || c >= NONE - 1 || last[c] >= u) continue;
    const mlc_param *src = &p->params[f->nodes[w].a.param];
    if (src->role != MLC_ROLE_WEIGHT || src->flat || src->type.dtype != MLC_DT_F32) continue;
    mlc_param sh = {
      .name = mlc_arena_printf(p->arena, "%s:%s", mlc_dtype_name(f->nodes[c].type.dtype), src->name),
      .type = f->nodes[c].type,
      .role = MLC_ROLE_SHADOW,
      .init = MLC_INIT_ZEROS,
      .loc = src->loc,
      .quant_of = f->nodes[w].a.param + 1,
    };
    mlc_node *cn = &f->nodes[c];
    cn->op = MLC_OP_PARAM;
    cn->nin = 0;
    cn->in = NULL;
    cn->a = (mlc_attrs){.param = mlc_program_add_param(p, &sh)}; /* src may have moved */
    shadow[u] = c;
  }
  return shadow;
}

/* The k members gathered in `in` become one multi node, in the place of
 * the last member (every member's inputs come before it). */
static void close_group(mlc_program *p, mlc_func *f, mlc_op multi, uint32_t per, uint32_t tail, uint32_t *in,
                        const uint32_t *members, uint32_t k, uint32_t *tok) {
  const uint32_t last = members[k - 1];
  memcpy(in + per * k, f->nodes[last].in + f->nodes[last].nin - tail, tail * sizeof *in); /* the last member's scalars: the same node for all */
  mlc_node *n = &f->nodes[last];
  n->op = multi;
  n->nin = (uint16_t)(per * k + tail);
  n->in = mlc_arena_alloc(p->arena, n->nin * sizeof *n->in);
  memcpy(n->in, in, n->nin * sizeof *n->in);
  n->scope = "";
  n->loc = f->nodes[members[0]].loc;
  char err[256];
  if (!mlc_infer_type(p, f, n, &n->type, err, sizeof err)) MLC_ICE("fuse: %s", err);
  for (uint32_t j = 0; j < k; j++) tok[members[j]] = last;
}

/* AdamW or SGD updates in groups: one adamw_multi or sgd_multi node per
 * group, in the place of its last member.  The interleave pass has put
 * each update right after its gradient is complete, so the order of the
 * updates is the order in which they become ready; a group is a run of
 * updates of one kind in that order, and each member's gradient stays
 * alive until the group runs.  A group closes at UPDATE_GROUP members, once
 * its gradients reach UPDATE_HOLD bytes, or before a gradient of another
 * dtype (update_grad: a group's kernel reads one): a large gradient is
 * updated, and freed, as soon as it is complete, and the small ones
 * (biases, norm weights) wait for the next large one, holding little.  The
 * outputs that named the single updates name the group's token. */
static bool group_updates(mlc_program *p, mlc_func *f, mlc_op one, mlc_op multi, int max_args) {
  /* per parameter: (param, grad, state..., shadow); then the shared scalars (adamw: step, lr; sgd: lr) */
  uint32_t per1, per, tail;
  mlc_update_layout(one, &per1, &tail);
  mlc_update_layout(multi, &per, &tail);
  /* the inputs, the output and the runtime's scratch argument within max_args */
  uint32_t most = UPDATE_GROUP;
  if (max_args && (uint32_t)(max_args - 2 - (int)tail) / per < most) most = (uint32_t)(max_args - 2 - (int)tail) / per;
  uint32_t n0 = f->n, nup = 0;
  /* A sharded update (fsdp) runs on this rank's rows only and stays where
   * the fsdp pass put it, right after its reduce-scatter. */
  for (uint32_t i = 0; i < n0; i++) nup += f->nodes[i].op == one && !mlc_node_sharded(p, f, &f->nodes[i]);
  if (nup < 2) return false;
  const uint32_t *shadow = shadow_casts(p, f, one);
  const uint32_t *uses = count_uses(p, f);
  uint32_t *tok = mlc_arena_alloc(p->arena, n0 * sizeof *tok);
  for (uint32_t i = 0; i < n0; i++) tok[i] = UINT32_MAX;
  uint32_t in[5 * UPDATE_GROUP + 2], k = 0, members[UPDATE_GROUP];
  int64_t held = 0;
  uint8_t gdt = 0, sdt = 0; /* the group's gradients' dtype, its shadows' (0: none yet) */
  for (uint32_t i = 0; i < n0; i++) {
    if (f->nodes[i].op != one || mlc_node_sharded(p, f, &f->nodes[i])) continue;
    const uint32_t gid = update_grad(p, f, uses, f->nodes[i].in[1]);
    const mlc_node *g = &f->nodes[gid];
    const uint8_t s = shadow[i] == NONE ? 0 : f->nodes[shadow[i]].type.dtype;
    if (k && (g->type.dtype != gdt || (s && sdt && s != sdt))) {
      close_group(p, f, multi, per, tail, in, members, k, tok);
      k = 0;
      held = 0;
      sdt = 0;
    }
    gdt = g->type.dtype;
    if (s) sdt = s;
    memcpy(in + per * k, f->nodes[i].in, per1 * sizeof *in);
    in[per * k + 1] = gid;
    in[per * k + per - 1] = shadow[i] == NONE ? f->nodes[i].in[0] : shadow[i];
    held += mlc_type_numel(&g->type) * mlc_dtype_size(g->type.dtype);
    members[k++] = i;
    if (--nup && k < most && held < UPDATE_HOLD) continue;
    close_group(p, f, multi, per, tail, in, members, k, tok);
    k = 0;
    held = 0;
    sdt = 0;
  }
  for (uint32_t o = 0; o < f->noutputs; o++)
    if (tok[f->outputs[o].node] != UINT32_MAX) f->outputs[o].node = tok[f->outputs[o].node];
  return true;
}

bool mlc_pass_fuse(mlc_pass_ctx *c) {
  const mlc_target *t = c->target;
  if (!t || !t->gpu) return true;
  MLC_ASSERT(!t->update_groups || !t->max_kernel_args || 5 * 4 + 2 + 2 <= t->max_kernel_args); /* groups of 4 at least */
  for (uint32_t k = 0; k < c->p->nfuncs; k++) {
    mlc_func *f = &c->p->funcs[k];
    bool changed = rewrite_tn(f);
    changed |= fold_abs(c->p, f);
    if (changed) mlc_func_compact(c->p, f);
    if (fuse_groups(c->p, f, true, t->epilogues_that_pay, t->qlinear_epilogues, t->scaled_mm_epilogues)) mlc_func_compact(c->p, f);
    /* on the compacted function: a GEMM taken into a group no longer reads its norm */
    if (t->gemv_prologue_rows && fuse_prologues(c->p, f, t->gemv_prologue_rows, t->gemv_prologue_bytes))
      mlc_func_compact(c->p, f);
    if (t->norm_grad_adds && norm_grad_adds(c->p, f)) mlc_func_compact(c->p, f);
    changed = false;
    if (t->update_groups) changed |= group_updates(c->p, f, MLC_OP_ADAMW, MLC_OP_ADAMW_MULTI, t->max_kernel_args);
    if (t->update_groups) changed |= group_updates(c->p, f, MLC_OP_SGD, MLC_OP_SGD_MULTI, t->max_kernel_args);
    if (changed) mlc_func_compact(c->p, f);
  }
  return true;
}
