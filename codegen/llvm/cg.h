/* Internals of the LLVM CPU backend: the code generator's state and the
 * IR-building helpers that every op emitter shares.
 *
 * An op emitter (emit_*.c) writes the body of one kernel.  When it is
 * called, the builder sits in the kernel's entry block; `g->in[i]` and
 * `g->out` are the node's buffers (base pointer plus storage dtype), and
 * `g->begin`, `g->end` the work-item range.  It sets `g->items` to the
 * number of work items it cut the node into, emits code for the items in
 * [begin, end), and returns false with `g->err` set if it cannot.
 *
 * All shapes are static, so emitters resolve every size, stride, loop bound
 * and tail mask at compile time; only the work-item index is a run-time
 * value.  Values are computed in f32 for the float dtypes (bf16 and f16 are
 * storage formats converted on load and store) and in their own type for
 * the integer dtypes.  A "value" may be a scalar or a vector of g->vw lanes;
 * the math helpers take either.
 */
#ifndef MLC_CODEGEN_LLVM_CG_H
#define MLC_CODEGEN_LLVM_CG_H

#include <llvm-c/Core.h>
#include <stdbool.h>
#include <stdint.h>

#include "ir/ir.h"

#define CG_MAX_CARRY 64

typedef struct {
  LLVMValueRef p; /* i8*: the base address */
  uint8_t dt;     /* mlc_dtype of the elements */
} cg_buf;

/* for (iv = start; iv < end; iv += step), with values carried around it. */
typedef struct {
  LLVMBasicBlockRef pre, head, body, exit;
  LLVMValueRef iv, end;
  int64_t step;
  LLVMValueRef phi[CG_MAX_CARRY];
  int ncarry;
} cg_loop;

typedef struct {
  LLVMContextRef ctx;
  LLVMModuleRef mod;
  LLVMBuilderRef b;
  LLVMTypeRef t_void, t_i1, t_i8, t_i16, t_i32, t_i64, t_f16, t_f32, t_ptr;
  int vw; /* f32 lanes per vector register: 16 with AVX-512, 8 with AVX2, 4 otherwise */
  int mr; /* GEMM micro-tile rows (the micro-tile is mr x 2*vw) */
  bool f16c; /* the target converts f16 in hardware; else integer code does */
  const mlc_program *p;
  const mlc_func *f;
  const char *symbol_prefix; /* mlc_llvm_options.symbol_prefix, or "" */
  /* the kernel being emitted */
  const mlc_node *n;
  uint32_t node;
  LLVMValueRef fn;
  LLVMBasicBlockRef entry;
  cg_buf in[64];
  cg_buf out;
  LLVMValueRef begin, end;
  int64_t items;
  char err[256];
} cg;

/* ---- types and constants (cg.c) ---- */
LLVMTypeRef cg_ctype(cg *g, int dt, int lanes);   /* compute type: f32, i32, i64 or i8 */
LLVMTypeRef cg_stype(cg *g, int dt);              /* storage type of one element */
LLVMTypeRef cg_vec(LLVMTypeRef elem, int lanes);  /* elem itself when lanes == 1 */
int cg_lanes(LLVMValueRef v);                     /* 1 for a scalar */
LLVMValueRef cg_i64(cg *g, int64_t v);
LLVMValueRef cg_i32(cg *g, int32_t v);
LLVMValueRef cg_const(cg *g, LLVMTypeRef ty, double v); /* splat for vectors */
LLVMValueRef cg_const_bits(cg *g, LLVMTypeRef ty, uint64_t bits); /* integer bits, splat */
LLVMValueRef cg_splat(cg *g, LLVMValueRef scalar, int lanes);
LLVMValueRef cg_mask(cg *g, int lanes, int nvalid); /* <lanes x i1>, the first nvalid set */
bool cg_is_float(int dt);
int64_t cg_ceil_div(int64_t a, int64_t b);
int64_t cg_round_up(int64_t a, int64_t b);

/* ---- memory ---- */
/* Element pointer of storage type at element index idx. */
LLVMValueRef cg_elem_ptr(cg *g, cg_buf b, LLVMValueRef idx);
/* Loads `lanes` elements at idx and converts them to the compute type.
 * With a mask (lanes > 1), masked-off lanes are not read and come back 0. */
LLVMValueRef cg_load(cg *g, cg_buf b, LLVMValueRef idx, int lanes, LLVMValueRef mask);
/* Converts v (compute type of b's dtype) to storage and stores it. */
void cg_store(cg *g, cg_buf b, LLVMValueRef idx, LLVMValueRef v, LLVMValueRef mask);
/* The same without conversion: values in the storage type, for copies. */
LLVMValueRef cg_load_raw(cg *g, cg_buf b, LLVMValueRef idx, int lanes, LLVMValueRef mask);
void cg_store_raw(cg *g, cg_buf b, LLVMValueRef idx, LLVMValueRef v, LLVMValueRef mask);
/* A stack buffer of n elements of dtype dt in the entry block, 64-byte aligned. */
cg_buf cg_alloca(cg *g, int dt, int64_t n);
void cg_memcpy(cg *g, cg_buf dst, LLVMValueRef dst_idx, cg_buf src, LLVMValueRef src_idx, LLVMValueRef nelem);
void cg_memset0(cg *g, cg_buf dst, LLVMValueRef idx, LLVMValueRef nelem);

/* ---- control flow ---- */
/* Starts a loop; the builder is left in the body.  Returns the induction
 * variable (i64). */
LLVMValueRef cg_for(cg *g, cg_loop *L, LLVMValueRef start, LLVMValueRef end, int64_t step);
/* Adds a value carried around the loop; call right after cg_for.  Returns
 * its value in this iteration; after cg_end_for, L->phi[k] is its final value. */
LLVMValueRef cg_carry(cg *g, cg_loop *L, LLVMValueRef init);
/* Closes the loop: next[k] are the carried values for the next iteration. */
void cg_end_for(cg *g, cg_loop *L, const LLVMValueRef *next);
/* if (c) { ... } else { ... }: cg_if leaves the builder in the then block,
 * cg_else moves it to the else block, cg_endif joins. */
typedef struct {
  LLVMBasicBlockRef then_bb, else_bb, join;
  bool has_else;
} cg_if_t;
void cg_if(cg *g, cg_if_t *c, LLVMValueRef cond);
void cg_else(cg *g, cg_if_t *c);
void cg_endif(cg *g, cg_if_t *c);
/* The loop over this call's work items: for (item = begin; item < end; item++). */
LLVMValueRef cg_items_begin(cg *g, cg_loop *L);

/* Rows: for j over [0, len) in vectors of g->vw lanes, fn(g, ctx, j, mask)
 * with mask NULL for whole vectors and a constant mask for the last, partial
 * one.  len is static, so the tail costs one masked vector, not a loop. */
typedef void (*cg_row_fn)(cg *g, void *ctx, LLVMValueRef j, LLVMValueRef mask);
void cg_row_map(cg *g, int64_t len, cg_row_fn fn, void *ctx);
/* Reduces the vectors fn returns over a row, with four accumulators for
 * instruction-level parallelism; lanes outside the row count as the neutral
 * element.  Returns a scalar. */
enum { CG_RED_ADD, CG_RED_MAX, CG_RED_MIN };
typedef LLVMValueRef (*cg_row_val_fn)(cg *g, void *ctx, LLVMValueRef j, LLVMValueRef mask);
LLVMValueRef cg_row_reduce(cg *g, int64_t len, int dt, int op, cg_row_val_fn fn, void *ctx);

/* ---- index arithmetic on i64 ---- */
LLVMValueRef cg_add(cg *g, int dt, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef cg_iadd(cg *g, LLVMValueRef a, LLVMValueRef b);                 /* a + b */
LLVMValueRef cg_iaddc(cg *g, LLVMValueRef a, int64_t c);                     /* a + c */
LLVMValueRef cg_imulc(cg *g, LLVMValueRef a, int64_t c);                     /* a * c */
LLVMValueRef cg_idx(cg *g, LLVMValueRef base, LLVMValueRef i, int64_t stride); /* base + i * stride */
/* Length of the block of at most `block` elements that starts at `start`
 * in a dimension of `extent`: min(block, extent - start). */
LLVMValueRef cg_block_len(cg *g, LLVMValueRef start, int64_t extent, int64_t block);

/* ---- arithmetic (cg.c) ---- */
LLVMValueRef cg_intrin(cg *g, const char *name, LLVMTypeRef *over, int nover, LLVMValueRef *args, int nargs);
LLVMValueRef cg_fma(cg *g, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c); /* a*b + c */
LLVMValueRef cg_min_i64(cg *g, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef cg_eq(cg *g, LLVMValueRef a, int64_t b); /* i64 a == b */
/* Lane-wise max of two compute values of dtype dt (cg_add above adds). */
LLVMValueRef cg_max(cg *g, int dt, LLVMValueRef a, LLVMValueRef b);
/* Horizontal reductions of a vector to a scalar. */
LLVMValueRef cg_hsum(cg *g, int dt, LLVMValueRef v);
LLVMValueRef cg_hmax(cg *g, int dt, LLVMValueRef v);
/* -inf for floats, the minimum for integers. */
LLVMValueRef cg_lowest(cg *g, int dt, int lanes);
/* The mirrors for min: lane-wise min, horizontal min, +inf or the maximum. */
LLVMValueRef cg_min(cg *g, int dt, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef cg_hmin(cg *g, int dt, LLVMValueRef v);
LLVMValueRef cg_highest(cg *g, int dt, int lanes);
/* The power of two 2^e (inverse: 2^-e) that quantises a tensor of largest
 * magnitude amax (f32, scalar or vector) into f8 dtype dt: e =
 * mlc_f8_scale_exp(amax, fmax) (ir/ir.h), the exponent of fmax / max(amax,
 * 1e-12).  The caller handles a non-finite amax. */
LLVMValueRef cg_f8_scale(cg *g, LLVMValueRef amax, int dt, bool inverse);
/* Converts a compute value from dtype `from` to dtype `to`. */
LLVMValueRef cg_convert(cg *g, LLVMValueRef v, int from, int to);

/* ---- vector math (vmath.c): f32 scalars or vectors ---- */
LLVMValueRef cg_exp(cg *g, LLVMValueRef x);
LLVMValueRef cg_log(cg *g, LLVMValueRef x);
LLVMValueRef cg_erf(cg *g, LLVMValueRef x);     /* relative accuracy near 0 too (the erf op) */
LLVMValueRef cg_erf_abs(cg *g, LLVMValueRef x); /* absolute error under 1.5e-7 (GELU's 1 + erf) */
LLVMValueRef cg_tanh(cg *g, LLVMValueRef x);
LLVMValueRef cg_sigmoid(cg *g, LLVMValueRef x);
LLVMValueRef cg_sqrt(cg *g, LLVMValueRef x);

/* ---- shapes ---- */
/* Splits `item` into indices over dims[0..rank-1] (row-major) and returns
 * sum(index[k] * stride[s][k]) for each of the nstride stride vectors. */
void cg_unflatten(cg *g, LLVMValueRef item, int rank, const int64_t *dims, int nstride,
                  const int64_t (*stride)[MLC_MAX_RANK], LLVMValueRef *out_offset);

bool cg_fail(cg *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- op emitters: one kernel body each ---- */
bool cg_emit_ew(cg *g);          /* emit_ew.c: binary, unary, cast, broadcast, activation grads */
bool cg_emit_arange(cg *g);
bool cg_emit_dropout(cg *g);    /* Philox4x32-10 mask, training only */
bool cg_emit_reduce(cg *g);      /* emit_reduce.c: sum, mean, max, min */
bool cg_emit_argreduce(cg *g);   /* argmax, argmin */
bool cg_emit_softmax(cg *g);
bool cg_emit_cross_entropy(cg *g);
bool cg_emit_cross_entropy_grad(cg *g);
bool cg_emit_rmsnorm(cg *g);     /* emit_norm.c */
bool cg_emit_layernorm(cg *g);
bool cg_emit_rmsnorm_grad_x(cg *g);
bool cg_emit_rmsnorm_grad_w(cg *g);
bool cg_emit_layernorm_grad_x(cg *g);
bool cg_emit_layernorm_grad_w(cg *g);
bool cg_emit_transpose(cg *g);   /* emit_layout.c */
bool cg_emit_slice(cg *g);
bool cg_emit_slice_grad(cg *g);
bool cg_emit_concat(cg *g);
bool cg_emit_embedding(cg *g);
bool cg_emit_embedding_grad(cg *g);
bool cg_emit_gather(cg *g);
bool cg_emit_gather_grad(cg *g);
bool cg_emit_gemm(cg *g);        /* emit_gemm.c: matmul, linear */
bool cg_gemv_fits(const cg *g);   /* emit_gemv.c: a linear of at most 4 rows, */
bool cg_emit_gemv(cg *g);        /* which cg_emit_gemm hands to this GEMV */
bool cg_emit_qlinear(cg *g);     /* emit_qlinear.c: --quantize's int8/int4 linear */
bool cg_emit_attention(cg *g);   /* emit_attention.c */
bool cg_emit_optim(cg *g);       /* emit_optim.c: adamw, sgd */
bool cg_emit_attention_grad(cg *g); /* emit_attention_grad.c */

#endif
