/* autodiff: reverse-mode differentiation of the train function.
 *
 * From the train function's "loss" output (a float scalar), seeds
 * d(loss) = 1, walks the nodes in reverse topological order (the reverse of
 * the node array) and runs each node's VJP rule, which appends the nodes
 * computing the gradients of its inputs from the gradient of its output.
 * The rules come from the VJP column of ir/ops.def: one function per name
 * in that column, below, so an op added to the table without a rule does
 * not compile.  Where a value feeds several nodes its gradients are summed
 * with ADD, except that slices which tile a value (MultiheadAttention's
 * q, k, v) give their gradients back as one CONCAT.  Each parameter the loss depends on gets one more output,
 * "grad:<state_dict name>", after "loss", in parameter order; parameters it
 * does not depend on get none.
 *
 * Only values on a path from a parameter to the loss get a gradient: INPUT
 * and CONST nodes, integer values and whatever they alone feed are skipped,
 * so the backward of cross_entropy(model(tokens), targets) computes nothing
 * for the tokens.  The backward reads the forward's values by referring to
 * the forward nodes; memplan's liveness keeps those alive until their last
 * use.  Every gradient node carries the scope and source location of the
 * forward node it comes from, so kernels and diagnostics keep the user's
 * module names.
 *
 * A rule that needs something autodiff cannot differentiate yet (attention
 * with q, k, v of different shapes) is a user error at the
 * forward node's location.
 */
#include <math.h>
#include <string.h>

#include "passes/passes.h"

#define NONE UINT32_MAX

/* A slice's gradient, held back until every slice of the same value has
 * given its own (see finish_windows). */
typedef struct window {
  uint32_t slice, g; /* the forward slice node, its gradient */
  struct window *next;
} window;

typedef struct {
  mlc_program *p;
  mlc_func *f;
  mlc_diag *d;
  uint32_t *grad;   /* per forward node: the node holding d(loss)/d(node), or NONE */
  bool *needs;      /* per forward node: on a path from a parameter to the loss */
  window **windows; /* per forward node: gradients of slices of it, not yet added */
  uint32_t cur;     /* the forward node whose rule is running: scope and loc */
  bool failed;
} ad;

typedef void (*vjp_fn)(ad *c, uint32_t node, uint32_t g);

/* ---- building gradient nodes ---- */

/* Copies, not pointers: appending a node may move the node array. */
static mlc_type ty(const ad *c, uint32_t id) { return c->f->nodes[id].type; }
static uint32_t in(const ad *c, uint32_t id, uint32_t k) { return c->f->nodes[id].in[k]; }
static mlc_attrs at(const ad *c, uint32_t id) { return c->f->nodes[id].a; }

/* Appends a node with the current forward node's scope and location.  The
 * rules build only well-typed nodes, so a shape rule failing here is a bug
 * in a rule. */
static uint32_t emit(ad *c, mlc_op op, const uint32_t *ins, uint32_t nin, const mlc_attrs *a, const mlc_type *preset) {
  mlc_loc loc = c->f->nodes[c->cur].loc;
  const char *scope = c->f->nodes[c->cur].scope;
  uint32_t id = mlc_func_add(c->p, c->f, op, ins, nin, a, loc, scope);
  mlc_node *n = &c->f->nodes[id];
  if (preset) n->type = *preset;
  char err[256];
  mlc_type t;
  if (!mlc_infer_type(c->p, c->f, n, &t, err, sizeof err))
    MLC_ICE("autodiff: %s for node %%%u (%s): %s", mlc_ops[op].name, c->cur, mlc_ops[c->f->nodes[c->cur].op].name, err);
  c->f->nodes[id].type = t;
  return id;
}

static uint32_t unary(ad *c, mlc_op op, uint32_t x) { return emit(c, op, &x, 1, NULL, NULL); }

static uint32_t binary(ad *c, mlc_op op, uint32_t a, uint32_t b) {
  uint32_t ins[2] = {a, b};
  return emit(c, op, ins, 2, NULL, NULL);
}

/* A scalar of x's dtype; it broadcasts against anything. */
static uint32_t scalar(ad *c, double v, uint32_t like) {
  mlc_type t = {.dtype = ty(c, like).dtype, .rank = 0};
  mlc_attrs a = {.f = v};
  return emit(c, MLC_OP_CONST, NULL, 0, &a, &t);
}

static uint32_t scale(ad *c, uint32_t x, double v) { return binary(c, MLC_OP_MUL, x, scalar(c, v, x)); }

/* x viewed with the dims of `shape` (x's own dtype); x itself if they agree. */
static uint32_t reshape_to(ad *c, uint32_t x, const mlc_type *shape) {
  mlc_type t = *shape;
  t.dtype = ty(c, x).dtype;
  mlc_type tx = ty(c, x);
  if (mlc_type_eq(&t, &tx)) return x;
  /* The same view of x was often just made (linear reshapes g for dw, the
   * bias's sum for db): reuse it. */
  for (uint32_t i = c->f->n, lo = i > 16 ? i - 16 : 0; i-- > lo;) {
    const mlc_node *n = &c->f->nodes[i];
    if (n->op == MLC_OP_RESHAPE && n->in[0] == x && mlc_type_eq(&n->type, &t)) return i;
  }
  return emit(c, MLC_OP_RESHAPE, &x, 1, NULL, &t);
}

static uint32_t reshape2(ad *c, uint32_t x, int64_t rows, int64_t cols) {
  mlc_type t = {.rank = 2, .dim = {rows, cols}};
  return reshape_to(c, x, &t);
}

static uint32_t sum_axis(ad *c, uint32_t x, int axis, bool keepdim) {
  mlc_attrs a = {.axis = axis, .keepdim = keepdim};
  return emit(c, MLC_OP_SUM, &x, 1, &a, NULL);
}

static uint32_t transpose(ad *c, uint32_t x, int a0, int a1) {
  mlc_attrs a = {.axis = a0, .axis2 = a1};
  return emit(c, MLC_OP_TRANSPOSE, &x, 1, &a, NULL);
}

static uint32_t transpose_last2(ad *c, uint32_t x) {
  int r = ty(c, x).rank;
  return transpose(c, x, r - 2, r - 1);
}

/* g has the broadcast shape of a binary op's output; `want` is one
 * operand's type.  Sums g over the axes that broadcasting stretched, keeping
 * them (so axis numbers stay put), then drops the leading axes the operand
 * never had with a reshape. */
static uint32_t unbroadcast(ad *c, uint32_t g, const mlc_type *want) {
  mlc_type tg = ty(c, g);
  int lead = tg.rank - want->rank;
  MLC_ASSERT(lead >= 0);
  /* The common case, a bias: the stretched axes are a prefix of g's.  Then
   * one sum over the rows of g viewed as a matrix does it. */
  int prefix = 0;
  int64_t rows = 1;
  while (prefix < tg.rank && (prefix < lead || want->dim[prefix - lead] == 1)) rows *= tg.dim[prefix++];
  bool rest_equal = true;
  for (int i = prefix; i < tg.rank; i++) rest_equal &= tg.dim[i] == want->dim[i - lead];
  if (rest_equal && rows > 1) {
    mlc_type m = {.rank = (uint8_t)(tg.rank - prefix + 1), .dim = {rows}};
    for (int i = prefix; i < tg.rank; i++) m.dim[i - prefix + 1] = tg.dim[i];
    return reshape_to(c, sum_axis(c, reshape_to(c, g, &m), 0, false), want);
  }
  for (int i = 0; i < tg.rank; i++) {
    int64_t d = i >= lead ? want->dim[i - lead] : 1;
    if (d == 1 && tg.dim[i] != 1) g = sum_axis(c, g, i, true);
    else MLC_ASSERT(d == tg.dim[i]);
  }
  return reshape_to(c, g, want);
}

/* ---- accumulating ---- */

static bool needs(const ad *c, uint32_t id) { return c->needs[id]; }

/* d(loss)/d(x) += g */
static void accum(ad *c, uint32_t x, uint32_t g) {
  if (!needs(c, x)) return;
  mlc_type tx = ty(c, x), tg = ty(c, g);
  if (!mlc_type_eq(&tx, &tg)) {
    char a[96], b[96];
    MLC_ICE("autodiff: gradient %s for %%%u of type %s (from %%%u %s)", mlc_type_str(&tg, b, sizeof b), x,
            mlc_type_str(&tx, a, sizeof a), c->cur, mlc_ops[c->f->nodes[c->cur].op].name);
  }
  c->grad[x] = c->grad[x] == NONE ? g : binary(c, MLC_OP_ADD, c->grad[x], g);
}

static void no_gradient(ad *c, uint32_t node) {
  const mlc_node *n = &c->f->nodes[node];
  mlc_error(c->d, n->loc, "%s has no gradient yet", mlc_ops[n->op].name);
  c->failed = true;
}

/* ---- the VJP rules, named as in ops.def's VJP column ----
 * y is the forward node, g its gradient (y's type); each rule adds to the
 * gradients of y's inputs. */

/* Sources: a parameter's gradient is what has been summed into it; inputs
 * and constants get none. */
static void vjp_leaf(ad *c, uint32_t y, uint32_t g) { (void)c, (void)y, (void)g; }

static void vjp_none(ad *c, uint32_t y, uint32_t g) {
  (void)g;
  no_gradient(c, y);
}

static void vjp_add(ad *c, uint32_t y, uint32_t g) {
  uint32_t a = in(c, y, 0), b = in(c, y, 1);
  mlc_type ta = ty(c, a), tb = ty(c, b);
  if (needs(c, a)) accum(c, a, unbroadcast(c, g, &ta));
  if (needs(c, b)) accum(c, b, unbroadcast(c, g, &tb));
}

static void vjp_sub(ad *c, uint32_t y, uint32_t g) {
  uint32_t a = in(c, y, 0), b = in(c, y, 1);
  mlc_type ta = ty(c, a), tb = ty(c, b);
  if (needs(c, a)) accum(c, a, unbroadcast(c, g, &ta));
  if (needs(c, b)) accum(c, b, unary(c, MLC_OP_NEG, unbroadcast(c, g, &tb))); /* negate the smaller tensor */
}

/* d(a b) = b da + a db */
static void vjp_mul(ad *c, uint32_t y, uint32_t g) {
  uint32_t a = in(c, y, 0), b = in(c, y, 1);
  mlc_type ta = ty(c, a), tb = ty(c, b);
  if (needs(c, a)) accum(c, a, unbroadcast(c, binary(c, MLC_OP_MUL, g, b), &ta));
  if (needs(c, b)) accum(c, b, unbroadcast(c, binary(c, MLC_OP_MUL, g, a), &tb));
}

/* y = a / b: da = g / b, db = -g a / b^2 = -(g y) / b */
static void vjp_div(ad *c, uint32_t y, uint32_t g) {
  uint32_t a = in(c, y, 0), b = in(c, y, 1);
  mlc_type ta = ty(c, a), tb = ty(c, b);
  if (needs(c, a)) accum(c, a, unbroadcast(c, binary(c, MLC_OP_DIV, g, b), &ta));
  if (needs(c, b)) {
    uint32_t t = binary(c, MLC_OP_DIV, binary(c, MLC_OP_MUL, g, y), b);
    accum(c, b, unary(c, MLC_OP_NEG, unbroadcast(c, t, &tb)));
  }
}

static void vjp_neg(ad *c, uint32_t y, uint32_t g) { accum(c, in(c, y, 0), unary(c, MLC_OP_NEG, g)); }

/* d exp(x) = exp(x) dx: reuse y */
static void vjp_exp(ad *c, uint32_t y, uint32_t g) { accum(c, in(c, y, 0), binary(c, MLC_OP_MUL, g, y)); }

static void vjp_log(ad *c, uint32_t y, uint32_t g) {
  uint32_t x = in(c, y, 0);
  accum(c, x, binary(c, MLC_OP_DIV, g, x));
}

/* d sqrt(x) = dx / (2 sqrt(x)) */
static void vjp_sqrt(ad *c, uint32_t y, uint32_t g) {
  accum(c, in(c, y, 0), binary(c, MLC_OP_DIV, scale(c, g, 0.5), y));
}

/* d x^(-1/2) = -1/2 x^(-3/2) dx = -1/2 y^3 dx; y^3 stays finite where y/x would not */
static void vjp_rsqrt(ad *c, uint32_t y, uint32_t g) {
  uint32_t y3 = binary(c, MLC_OP_MUL, binary(c, MLC_OP_MUL, y, y), y);
  accum(c, in(c, y, 0), scale(c, binary(c, MLC_OP_MUL, g, y3), -0.5));
}

/* d tanh(x) = (1 - y^2) dx */
static void vjp_tanh(ad *c, uint32_t y, uint32_t g) {
  uint32_t d = binary(c, MLC_OP_SUB, scalar(c, 1.0, y), binary(c, MLC_OP_MUL, y, y));
  accum(c, in(c, y, 0), binary(c, MLC_OP_MUL, g, d));
}

/* d sigmoid(x) = y (1 - y) dx */
static void vjp_sigmoid(ad *c, uint32_t y, uint32_t g) {
  uint32_t d = binary(c, MLC_OP_SUB, scalar(c, 1.0, y), y);
  accum(c, in(c, y, 0), binary(c, MLC_OP_MUL, binary(c, MLC_OP_MUL, g, y), d));
}

/* The activations' derivatives need x, not y: one fused gradient op each. */
static void act_grad(ad *c, uint32_t y, uint32_t g, mlc_op op) {
  uint32_t x = in(c, y, 0);
  accum(c, x, binary(c, op, g, x));
}
/* relu's gradient reads the output, as PyTorch's ReluBackward does
 * (threshold_backward(g, result, 0)): y <= 0 exactly where x <= 0, and a NaN
 * passes through relu.  The input then has relu as its only reader, so on
 * the GPU targets a linear layer's GEMM takes relu into its epilogue, and the
 * pre-activation is not kept for the backward. */
static void vjp_relu(ad *c, uint32_t y, uint32_t g) { accum(c, in(c, y, 0), binary(c, MLC_OP_RELU_GRAD, g, y)); }
static void vjp_silu(ad *c, uint32_t y, uint32_t g) { act_grad(c, y, g, MLC_OP_SILU_GRAD); }
static void vjp_gelu(ad *c, uint32_t y, uint32_t g) { act_grad(c, y, g, MLC_OP_GELU_GRAD); }

/* issue 27's ops.  Their rules follow PyTorch's derivatives.yaml, op for op,
 * so the gradients round as PyTorch's do in 16-bit dtypes. */

/* Comparisons are piecewise constant: their gradient is zero (and a bool
 * result never needs one, so this rule does not run). */
static void vjp_zero(ad *c, uint32_t y, uint32_t g) { (void)c, (void)y, (void)g; }

static uint32_t where3(ad *c, uint32_t k, uint32_t a, uint32_t b) {
  uint32_t ins[3] = {k, a, b};
  return emit(c, MLC_OP_WHERE, ins, 3, NULL, NULL);
}

/* abs: g * sgn(x), sgn(0) = 0: where(x > 0, g, where(x < 0, -g, 0)). */
static void vjp_abs(ad *c, uint32_t y, uint32_t g) {
  uint32_t x = in(c, y, 0), z = scalar(c, 0.0, x);
  uint32_t neg = where3(c, binary(c, MLC_OP_LT, x, z), unary(c, MLC_OP_NEG, g), scalar(c, 0.0, g));
  accum(c, x, where3(c, binary(c, MLC_OP_LT, z, x), g, neg));
}

/* erf: g * 2/sqrt(pi) * exp(-x^2) */
static void vjp_erf(ad *c, uint32_t y, uint32_t g) {
  uint32_t x = in(c, y, 0);
  uint32_t e = unary(c, MLC_OP_EXP, unary(c, MLC_OP_NEG, binary(c, MLC_OP_MUL, x, x)));
  accum(c, x, binary(c, MLC_OP_MUL, g, scale(c, e, 1.12837916709551257390)));
}

/* pow: g * p x^(p-1), and 0 for p = 0 (pow_backward). */
static void vjp_pow(ad *c, uint32_t y, uint32_t g) {
  uint32_t x = in(c, y, 0);
  double p = at(c, y).f;
  if (p == 0) {
    accum(c, x, binary(c, MLC_OP_MUL, g, scalar(c, 0.0, g)));
    return;
  }
  uint32_t d = x;
  if (p != 2) {
    mlc_attrs a = {.f = p - 1};
    d = emit(c, MLC_OP_POW, &x, 1, &a, NULL);
  }
  accum(c, x, binary(c, MLC_OP_MUL, g, scale(c, d, p)));
}

/* clamp_min, clamp_max: g where x is inside the bound (x >= lo, x <= hi;
 * a NaN x gets 0), as clamp_backward's mask. */
static void vjp_clamp_min(ad *c, uint32_t y, uint32_t g) {
  uint32_t x = in(c, y, 0);
  accum(c, x, where3(c, binary(c, MLC_OP_LE, scalar(c, at(c, y).f, x), x), g, scalar(c, 0.0, g)));
}
static void vjp_clamp_max(ad *c, uint32_t y, uint32_t g) {
  uint32_t x = in(c, y, 0);
  accum(c, x, where3(c, binary(c, MLC_OP_LE, x, scalar(c, at(c, y).f, x)), g, scalar(c, 0.0, g)));
}

static void vjp_gelu_tanh(ad *c, uint32_t y, uint32_t g) { act_grad(c, y, g, MLC_OP_GELU_TANH_GRAD); }

/* where: the gradient goes to a where cond holds, to b elsewhere. */
static void vjp_where(ad *c, uint32_t y, uint32_t g) {
  uint32_t k = in(c, y, 0), a = in(c, y, 1), b = in(c, y, 2);
  mlc_type ta = ty(c, a), tb = ty(c, b);
  if (needs(c, a)) accum(c, a, unbroadcast(c, where3(c, k, g, scalar(c, 0.0, g)), &ta));
  if (needs(c, b)) accum(c, b, unbroadcast(c, where3(c, k, scalar(c, 0.0, g), g), &tb));
}

/* dropout: the mask depends only on the element's index, the step and the
 * op's stream and seed, so g goes back through the same mask and scale by a
 * dropout of g with the same attributes and step. */
static void vjp_dropout(ad *c, uint32_t y, uint32_t g) {
  uint32_t ins[2] = {g, in(c, y, 1)};
  mlc_attrs a = at(c, y);
  accum(c, in(c, y, 0), emit(c, MLC_OP_DROPOUT, ins, 2, &a, NULL));
}

/* The gradient goes back in the source's dtype. */
static void vjp_cast(ad *c, uint32_t y, uint32_t g) {
  uint32_t x = in(c, y, 0);
  if (!needs(c, x)) return;
  mlc_type t = {.dtype = ty(c, x).dtype};
  accum(c, x, emit(c, MLC_OP_CAST, &g, 1, NULL, &t));
}

/* Spreads a reduction's gradient back over the reduced axis: g gets the
 * axis back (size 1) if it was dropped, then broadcasts to x's shape. */
static uint32_t spread(ad *c, uint32_t g, uint32_t x, int axis, bool keepdim) {
  mlc_type tx = ty(c, x);
  if (!keepdim) {
    mlc_type kept = tx;
    kept.dim[axis] = 1;
    g = reshape_to(c, g, &kept);
  }
  mlc_type tg = ty(c, g);
  if (mlc_type_eq(&tg, &tx)) return g;
  return emit(c, MLC_OP_BROADCAST, &g, 1, NULL, &tx);
}

static void vjp_sum(ad *c, uint32_t y, uint32_t g) {
  mlc_attrs a = at(c, y);
  uint32_t x = in(c, y, 0);
  accum(c, x, spread(c, g, x, a.axis, a.keepdim));
}

/* Scale before spreading: the gradient is smaller then. */
static void vjp_mean(ad *c, uint32_t y, uint32_t g) {
  mlc_attrs a = at(c, y);
  uint32_t x = in(c, y, 0);
  accum(c, x, spread(c, scale(c, g, 1.0 / (double)ty(c, x).dim[a.axis]), x, a.axis, a.keepdim));
}

/* max, min (torch.amax, amin): g goes to the elements equal to the result,
 * shared evenly among ties, as PyTorch's scale_grad_by_count does:
 * (g / count) * mask. */
static void vjp_extreme(ad *c, uint32_t y, uint32_t g) {
  mlc_attrs a = at(c, y);
  uint32_t x = in(c, y, 0);
  mlc_type kept = ty(c, x);
  kept.dim[a.axis] = 1;
  uint32_t yk = reshape_to(c, y, &kept), gk = reshape_to(c, g, &kept);
  mlc_type mt = {.dtype = ty(c, x).dtype};
  uint32_t eq = binary(c, MLC_OP_EQ, x, yk);
  uint32_t mask = emit(c, MLC_OP_CAST, &eq, 1, NULL, &mt);
  uint32_t count = sum_axis(c, mask, a.axis, true);
  accum(c, x, binary(c, MLC_OP_MUL, binary(c, MLC_OP_DIV, gk, count), mask));
}

/* broadcast (expand): the stretched axes sum back. */
static void vjp_broadcast(ad *c, uint32_t y, uint32_t g) {
  uint32_t x = in(c, y, 0);
  mlc_type tx = ty(c, x);
  accum(c, x, unbroadcast(c, g, &tx));
}

/* gather: g scatter-adds into x's shape at the indices; the index gets nothing. */
static void vjp_gather(ad *c, uint32_t y, uint32_t g) {
  uint32_t x = in(c, y, 0);
  if (!needs(c, x)) return;
  mlc_type tx = ty(c, x);
  mlc_attrs a = {.axis = at(c, y).axis};
  uint32_t ins[2] = {g, in(c, y, 1)};
  accum(c, x, emit(c, MLC_OP_GATHER_GRAD, ins, 2, &a, &tx));
}

/* dx = y (g - sum(g y, axis)) */
static void vjp_softmax(ad *c, uint32_t y, uint32_t g) {
  int axis = at(c, y).axis;
  uint32_t s = sum_axis(c, binary(c, MLC_OP_MUL, g, y), axis, true);
  accum(c, in(c, y, 0), binary(c, MLC_OP_MUL, y, binary(c, MLC_OP_SUB, g, s)));
}

static void vjp_reshape(ad *c, uint32_t y, uint32_t g) {
  uint32_t x = in(c, y, 0);
  mlc_type tx = ty(c, x);
  accum(c, x, reshape_to(c, g, &tx));
}

/* A swap of two axes is its own inverse. */
static void vjp_transpose(ad *c, uint32_t y, uint32_t g) {
  mlc_attrs a = at(c, y);
  accum(c, in(c, y, 0), transpose(c, g, a.axis, a.axis2));
}

/* A slice's gradient goes back into its window of x.  The windows of all
 * slices of x are gathered first (the walk reaches x after every node that
 * reads it): slices that tile x along one axis, as MultiheadAttention's
 * q, k, v do, give their gradients back as one concat; anything else, each
 * window as a slice_grad (zeros around it), summed. */
static void vjp_slice(ad *c, uint32_t y, uint32_t g) {
  uint32_t x = in(c, y, 0);
  if (!needs(c, x)) return;
  window *w = mlc_arena_alloc(c->p->arena, sizeof *w);
  *w = (window){y, g, c->windows[x]};
  c->windows[x] = w;
}

static void finish_windows(ad *c, uint32_t x) {
  uint32_t n = 0;
  for (window *w = c->windows[x]; w; w = w->next) n++;
  if (!n) return;
  window **v = mlc_arena_alloc(c->p->arena, n * sizeof *v);
  n = 0;
  for (window *w = c->windows[x]; w; w = w->next) { /* insertion sort by start */
    uint32_t k = n++;
    for (; k > 0 && c->f->nodes[v[k - 1]->slice].a.start > c->f->nodes[w->slice].a.start; k--) v[k] = v[k - 1];
    v[k] = w;
  }
  c->windows[x] = NULL;
  mlc_type tx = ty(c, x);
  int axis = c->f->nodes[v[0]->slice].a.axis;
  bool tiles = n > 1 && c->f->nodes[v[0]->slice].a.start == 0 && c->f->nodes[v[n - 1]->slice].a.end == tx.dim[axis];
  for (uint32_t k = 1; k < n && tiles; k++)
    tiles = c->f->nodes[v[k]->slice].a.axis == axis && c->f->nodes[v[k]->slice].a.start == c->f->nodes[v[k - 1]->slice].a.end;
  if (tiles && n <= 64) {
    uint32_t ins[64];
    for (uint32_t k = 0; k < n; k++) ins[k] = v[k]->g;
    mlc_attrs a = {.axis = axis};
    c->cur = v[0]->slice;
    accum(c, x, emit(c, MLC_OP_CONCAT, ins, n, &a, NULL));
    return;
  }
  for (uint32_t k = 0; k < n; k++) {
    mlc_attrs a = c->f->nodes[v[k]->slice].a;
    mlc_attrs sa = {.axis = a.axis, .start = a.start, .end = a.end};
    c->cur = v[k]->slice;
    accum(c, x, emit(c, MLC_OP_SLICE_GRAD, &v[k]->g, 1, &sa, &tx));
  }
}

/* Each input gets its own window of g. */
static void vjp_concat(ad *c, uint32_t y, uint32_t g) {
  int axis = at(c, y).axis;
  int64_t off = 0;
  for (uint32_t k = 0; k < c->f->nodes[y].nin; k++) {
    uint32_t x = in(c, y, k);
    int64_t d = ty(c, x).dim[axis];
    mlc_type tg = ty(c, g);
    if (needs(c, x)) {
      mlc_attrs sa = {.axis = axis, .start = off, .end = off + d};
      /* A window that covers g is g itself. */
      accum(c, x, d == tg.dim[axis] ? g : emit(c, MLC_OP_SLICE, &g, 1, &sa, NULL));
    }
    off += d;
  }
}

/* y[.., m, n] = a[.., m, k] @ b[.., k, n]: da = g b^T, db = a^T g, each
 * summed over the batch axes its operand was broadcast along. */
static void vjp_matmul(ad *c, uint32_t y, uint32_t g) {
  uint32_t a = in(c, y, 0), b = in(c, y, 1);
  mlc_type ta = ty(c, a), tb = ty(c, b), tg = ty(c, g);
  if (needs(c, a)) accum(c, a, unbroadcast(c, binary(c, MLC_OP_MATMUL, g, transpose_last2(c, b)), &ta));
  if (!needs(c, b)) return;
  if (tb.rank == 2 && ta.rank > 2) {
    /* a batch of rows times one matrix (x @ w): fold the batch into the rows,
     * one GEMM [k, M] @ [M, n] instead of a batch of them and a sum. */
    int64_t k = ta.dim[ta.rank - 1], n = tg.dim[tg.rank - 1];
    int64_t rows = mlc_type_numel(&ta) / k;
    uint32_t a2 = reshape2(c, a, rows, k), g2 = reshape2(c, g, rows, n);
    accum(c, b, binary(c, MLC_OP_MATMUL, transpose(c, a2, 0, 1), g2));
  } else {
    accum(c, b, unbroadcast(c, binary(c, MLC_OP_MATMUL, transpose_last2(c, a), g), &tb));
  }
}

/* y[.., n] = x[.., k] @ w[n, k]^T: dx = g @ w; dw = g^T x over all rows. */
/* The matmul mm of linear y's gradient, tagged for the fp8 pass. */
static uint32_t tag_mm(ad *c, uint32_t mm, uint32_t y, uint8_t role) {
  c->f->nodes[mm].a.mm_of = y + 1;
  c->f->nodes[mm].a.mm_role = role;
  return mm;
}

static void vjp_linear(ad *c, uint32_t y, uint32_t g) {
  uint32_t x = in(c, y, 0), w = in(c, y, 1);
  mlc_type tx = ty(c, x), tw = ty(c, w);
  int64_t n = tw.dim[0], k = tw.dim[1], rows = mlc_type_numel(&tx) / k;
  if (needs(c, x)) {
    if (tx.rank >= 2) {
      accum(c, x, tag_mm(c, binary(c, MLC_OP_MATMUL, g, w), y, MLC_MM_DX));
    } else { /* x[k]: matmul needs a matrix */
      uint32_t dx = binary(c, MLC_OP_MATMUL, reshape2(c, g, 1, n), w);
      accum(c, x, reshape_to(c, dx, &tx));
    }
  }
  if (needs(c, w)) {
    uint32_t gt = transpose(c, reshape2(c, g, rows, n), 0, 1); /* [n, rows] */
    accum(c, w, tag_mm(c, binary(c, MLC_OP_MATMUL, gt, reshape2(c, x, rows, k)), y, MLC_MM_DW));
  }
}

/* Rows of g scatter-add into the table's rows; the indices get nothing. */
static void vjp_embedding(ad *c, uint32_t y, uint32_t g) {
  uint32_t w = in(c, y, 0);
  if (!needs(c, w)) return;
  mlc_type tw = ty(c, w);
  uint32_t ins[2] = {g, in(c, y, 1)};
  accum(c, w, emit(c, MLC_OP_EMBEDDING_GRAD, ins, 2, NULL, &tw));
}

/* x [, weight [, bias]]: dx and dweight from the norms' gradient ops; a
 * LayerNorm bias gets g summed over every row. */
static void norm_vjp(ad *c, uint32_t y, uint32_t g, mlc_op grad_x, mlc_op grad_w) {
  uint32_t nin = c->f->nodes[y].nin, x = in(c, y, 0);
  mlc_attrs eps = {.f = at(c, y).f};
  if (needs(c, x)) {
    uint32_t ins[3] = {g, x, nin > 1 ? in(c, y, 1) : 0};
    accum(c, x, emit(c, grad_x, ins, nin > 1 ? 3 : 2, &eps, NULL));
  }
  if (nin > 1 && needs(c, in(c, y, 1))) {
    uint32_t ins[2] = {g, x};
    accum(c, in(c, y, 1), emit(c, grad_w, ins, 2, &eps, NULL));
  }
  if (nin > 2 && needs(c, in(c, y, 2))) {
    mlc_type tx = ty(c, x);
    int64_t d = tx.dim[tx.rank - 1];
    uint32_t db = tx.rank == 1 ? g : sum_axis(c, reshape2(c, g, mlc_type_numel(&tx) / d, d), 0, false);
    accum(c, in(c, y, 2), db);
  }
}
static void vjp_rmsnorm(ad *c, uint32_t y, uint32_t g) { norm_vjp(c, y, g, MLC_OP_RMSNORM_GRAD_X, MLC_OP_RMSNORM_GRAD_W); }
static void vjp_layernorm(ad *c, uint32_t y, uint32_t g) {
  norm_vjp(c, y, g, MLC_OP_LAYERNORM_GRAD_X, MLC_OP_LAYERNORM_GRAD_W);
}

/* Attention whose q, k and v differ in shape (cross-attention: sq query
 * rows over sk keys, v's head dim dv): the gradient from the ops that
 * attention is made of, recomputing the probabilities.  An [sq, sk] matrix
 * per head lives in the arena, where attention_grad's kernels keep tiles:
 *   s = q k^T scale, masked to -inf where key j > query i when causal (the
 *   forward's mask, PyTorch's is_causal: top-left aligned);  p = softmax(s)
 *   dv = p^T g;  dp = g v^T;  ds = p (dp - sum(dp p, keys))
 *   dq = ds k scale;  dk = ds^T q scale */
static void attention_vjp_composed(ad *c, uint32_t y, uint32_t g) {
  uint32_t q = in(c, y, 0), k = in(c, y, 1), v = in(c, y, 2);
  mlc_attrs a = at(c, y);
  mlc_type tq = ty(c, q), tk = ty(c, k);
  uint32_t s = scale(c, binary(c, MLC_OP_MATMUL, q, transpose_last2(c, k)), a.f);
  if (a.causal) {
    mlc_type ti = {.dtype = MLC_DT_I64, .rank = 1, .dim = {tq.dim[2]}}, tj = {.dtype = MLC_DT_I64, .rank = 1, .dim = {tk.dim[2]}};
    mlc_type ri = {.dtype = MLC_DT_I64, .rank = 2, .dim = {tq.dim[2], 1}}, rj = {.dtype = MLC_DT_I64, .rank = 2, .dim = {1, tk.dim[2]}};
    uint32_t i = reshape_to(c, emit(c, MLC_OP_ARANGE, NULL, 0, NULL, &ti), &ri);
    uint32_t j = reshape_to(c, emit(c, MLC_OP_ARANGE, NULL, 0, NULL, &tj), &rj);
    uint32_t ins[3] = {binary(c, MLC_OP_LT, i, j), scalar(c, -INFINITY, s), s};
    s = emit(c, MLC_OP_WHERE, ins, 3, NULL, NULL);
  }
  mlc_attrs last = {.axis = 3};
  uint32_t p = emit(c, MLC_OP_SOFTMAX, &s, 1, &last, NULL);
  if (needs(c, v)) accum(c, v, binary(c, MLC_OP_MATMUL, transpose_last2(c, p), g));
  if (!needs(c, q) && !needs(c, k)) return;
  uint32_t dp = binary(c, MLC_OP_MATMUL, g, transpose_last2(c, v));
  uint32_t rows = sum_axis(c, binary(c, MLC_OP_MUL, dp, p), 3, true);
  uint32_t ds = binary(c, MLC_OP_MUL, p, binary(c, MLC_OP_SUB, dp, rows));
  if (needs(c, q)) accum(c, q, scale(c, binary(c, MLC_OP_MATMUL, ds, k), a.f));
  if (needs(c, k)) accum(c, k, scale(c, binary(c, MLC_OP_MATMUL, transpose_last2(c, ds), q), a.f));
}

/* attention_grad gives dq, dk, dv stacked on a new leading axis; each is a
 * slice of it, viewed back as [b, h, s, d]. */
static void vjp_attention(ad *c, uint32_t y, uint32_t g) {
  uint32_t q = in(c, y, 0), k = in(c, y, 1), v = in(c, y, 2);
  mlc_type tq = ty(c, q), tk = ty(c, k), tv = ty(c, v);
  if (!mlc_type_eq(&tq, &tk) || !mlc_type_eq(&tq, &tv)) {
    attention_vjp_composed(c, y, g);
    return;
  }
  mlc_attrs a = at(c, y);
  mlc_attrs ga = {.causal = a.causal, .f = a.f};
  uint32_t ins[4] = {g, q, k, v};
  uint32_t all = emit(c, MLC_OP_ATTENTION_GRAD, ins, 4, &ga, NULL);
  for (int i = 0; i < 3; i++) {
    if (!needs(c, ins[i + 1])) continue;
    mlc_attrs sa = {.axis = 0, .start = i, .end = i + 1};
    accum(c, ins[i + 1], reshape_to(c, emit(c, MLC_OP_SLICE, &all, 1, &sa, NULL), &tq));
  }
}

static void vjp_cross_entropy(ad *c, uint32_t y, uint32_t g) {
  uint32_t logits = in(c, y, 0);
  if (!needs(c, logits)) return;
  uint32_t ins[3] = {g, logits, in(c, y, 1)};
  accum(c, logits, emit(c, MLC_OP_CROSS_ENTROPY_GRAD, ins, 3, NULL, NULL));
}

static const vjp_fn vjps[MLC_OP_COUNT] = {
#define X(e, name, arity, flags, attrs, shape, cost, vjp) [MLC_OP_##e] = vjp,
#include "ir/ops.def"
#undef X
};

/* ---- the pass ---- */

static bool differentiate(mlc_pass_ctx *pc, mlc_func *f) {
  mlc_program *p = pc->p;
  uint32_t loss = NONE;
  for (uint32_t i = 0; i < f->noutputs; i++)
    if (!strcmp(f->outputs[i].name, "loss")) loss = f->outputs[i].node;
  if (loss == NONE) return true; /* lowering guarantees one; nothing to do without */
  uint32_t n = f->n;
  ad c = {.p = p, .f = f, .d = pc->d};
  c.grad = mlc_arena_alloc(p->arena, (n + 1) * sizeof *c.grad);
  c.windows = mlc_arena_alloc(p->arena, (n + 1) * sizeof *c.windows);
  c.needs = mlc_arena_alloc(p->arena, (n + 1) * sizeof *c.needs);
  bool *reach = mlc_arena_alloc(p->arena, (n + 1) * sizeof *reach); /* depends on a parameter */
  bool *live = mlc_arena_alloc(p->arena, (n + 1) * sizeof *live);   /* the loss depends on it */
  for (uint32_t i = 0; i < n; i++) {
    const mlc_node *nd = &f->nodes[i];
    c.grad[i] = NONE;
    if (!mlc_dtype_is_float(nd->type.dtype)) continue; /* integers carry no gradient */
    reach[i] = nd->op == MLC_OP_PARAM && !p->params[nd->a.param].frozen;
    for (uint32_t k = 0; k < nd->nin && !reach[i]; k++) reach[i] = reach[nd->in[k]];
  }
  live[loss] = true;
  for (uint32_t i = loss + 1; i-- > 0;) {
    if (!live[i]) continue;
    for (uint32_t k = 0; k < f->nodes[i].nin; k++) live[f->nodes[i].in[k]] = true;
  }
  for (uint32_t i = 0; i < n; i++) c.needs[i] = reach[i] && live[i];
  if (!c.needs[loss]) return true; /* the loss depends on no parameter: no gradients */

  c.cur = loss;
  c.grad[loss] = scalar(&c, 1.0, loss);
  for (uint32_t i = loss + 1; i-- > 0;) {
    if (!c.needs[i]) continue;
    finish_windows(&c, i); /* every reader of i has run: its slices' gradients are all in */
    if (c.grad[i] == NONE) continue;
    c.cur = i;
    vjps[f->nodes[i].op](&c, i, c.grad[i]);
  }
  if (c.failed) return false;

  /* One gradient per parameter, summed over the parameter's nodes (the
   * frontend makes one per function, but nothing requires it). */
  uint32_t *pgrad = mlc_arena_alloc(p->arena, (p->nparams + 1) * sizeof *pgrad);
  for (uint32_t k = 0; k < p->nparams; k++) pgrad[k] = NONE;
  for (uint32_t i = 0; i < n; i++) {
    const mlc_node *nd = &f->nodes[i];
    if (nd->op != MLC_OP_PARAM || c.grad[i] == NONE) continue;
    uint32_t k = nd->a.param;
    c.cur = i;
    pgrad[k] = pgrad[k] == NONE ? c.grad[i] : binary(&c, MLC_OP_ADD, pgrad[k], c.grad[i]);
  }
  for (uint32_t k = 0; k < p->nparams; k++)
    if (pgrad[k] != NONE) mlc_func_add_output(p, f, mlc_arena_printf(p->arena, "grad:%s", p->params[k].name), pgrad[k]);
  return true;
}

bool mlc_pass_autodiff(mlc_pass_ctx *c) {
  for (uint32_t k = 0; k < c->p->nfuncs; k++)
    if (!strcmp(c->p->funcs[k].name, "train") && !differentiate(c, &c->p->funcs[k])) return false;
  return true;
}
