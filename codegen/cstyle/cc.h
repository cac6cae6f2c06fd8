/* Internals of the C-like kernel emitter: CUDA C and MSL.
 *
 * CUDA C and the Metal Shading Language are both C++ dialects, so one
 * emitter writes both; what differs between them sits in a table,
 * cc_dialect, which codegen/cuda/cuda.c and codegen/metal/metal.c fill in
 * (as tinygrad's renderers override a few hooks of one C-style renderer):
 * the module's opening, the kernel header and footer, address spaces, the
 * type spellings, and the dialect's own GEMM and attention emitters.  The
 * shared op emitters here (emit_*.c) print kernel text with cc_printf,
 * whose templates name what the dialects spell differently as $i64, $ll,
 * $f64 (types), $tid, $bid, $gdim (the thread's place), $barrier and
 * $shared.  The rest (warp shuffles, atomics, expf) is spelled as in CUDA,
 * which the Metal prelude maps.  Tensor-core code (mma.sync, ldmatrix,
 * cp.async, wgmma, TMA) lives in codegen/cuda/, simdgroup_matrix code in
 * codegen/metal/.
 *
 * One IR node becomes one "kernel" in the plan's sense: a step that the
 * runtime runs as one or more launches, in order, on one stream (see
 * runtime/cuda/kernel.h, whose launch table Metal's runtime shares).  Each
 * launch is one kernel function with the same parameter list:
 *
 *   (const T0 *in0, ..., const Tn-1 *in<n-1>, T *out, unsigned char *scratch)
 *
 * inputs in the IR's order, then the output, then a scratch block of the
 * size the emitter asked for (NULL when it asked for none).  Element types
 * are the storage types of the dtypes (cc_stype): float, mlc_bf16, mlc_f16,
 * int, the 64-bit integer, unsigned char.  Launches are 1-D grids; an
 * emitter decodes blockIdx.x into whatever tiling it chose.  All shapes are
 * static, so sizes, strides and loop bounds are printed as literals.
 *
 * The preludes (codegen/cuda/prelude.c, codegen/metal/prelude.c, and
 * prelude.c here for the math both share) give every module its helpers:
 * conversions between the storage types and f32 (to_f32, from_f32<T>),
 * warp and block reductions, and the dialect's matrix-unit wrappers.
 */
#ifndef MLC_CODEGEN_CSTYLE_CC_H
#define MLC_CODEGEN_CSTYLE_CC_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include "ir/fused.h"
#include "codegen/gemm_shape.h"
#include "ir/ir.h"
#include "codegen/cstyle/cstyle.h"
#include "runtime/status.h"
#include "runtime/cuda/kernel.h"

#define CC_MAX_LAUNCH 4

typedef struct cc cc;
typedef struct cc_dialect cc_dialect;

typedef struct {
  uint64_t grid;   /* blocks */
  uint32_t block;  /* threads per block */
  uint32_t smem;   /* dynamic shared memory, bytes */
} cc_launch;

/* A growable text buffer in the program's arena. */
typedef struct {
  mlc_arena *a;
  char *s;
  size_t n, cap;
} cc_text;

void cc_text_printf(cc_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cc_text_vprintf(cc_text *t, const char *fmt, va_list ap);

/* The emitter's state while it writes the launches of one node. */
struct cc {
  const cc_dialect *t;
  const mlc_program *p;
  const mlc_func *f;
  const mlc_node *n;
  uint32_t node;
  cc_text *out;              /* the kernel text goes here */
  /* An op on a rank's shard of a flat parameter (mlc_node_sharded): the
   * kernels take `rows`, the rank's rows of MLC_SHARD_ROW elements, as one
   * more argument after scratch (runtime/cuda/device.c passes it), and
   * cover that many, not the nominal shape's. */
  bool sharded;
  /* The function is a decode step (it has an attention_kv): its kernels are
   * short and bound by latency, so on CUDA each lets the next one launch at
   * once (programmatic dependent launch, prelude.c's mlc_pdl_trigger). */
  bool decode;
  /* set by the emitter */
  cc_launch launch[CC_MAX_LAUNCH];
  uint32_t nlaunch;
  uint64_t scratch;          /* bytes of scratch the launches share */
  /* TMA tensor maps (cc_tmap, CUDA only): every launch takes them after
   * the work items, which it then declares too (runtime/cuda/kernel.h). */
  mlc_cuda_tmap tmap[MLC_CUDA_MAX_TMAP];
  uint32_t ntmap;
  char err[256];
  bool internal;             /* err is a bug in mlc (cc_bug) */
};

typedef bool (*cc_emitter)(cc *c);

/* What differs between the C-like dialects.  Every field is read: a new
 * dialect (HIP, OpenCL C) fills in each. */
struct cc_dialect {
  const char *name;       /* "cuda", "metal": the target, in messages */
  /* Type spellings, which templates name as $i64, $ll and $f64 (cc_printf
   * and cc_fmt put in the dialect's); cc_stype names the 64-bit integer i64. */
  const char *i64;        /* 64-bit integer: "long long"; MSL "long" */
  const char *i64_suffix; /* its literals' suffix: "ll"; MSL "l" */
  const char *f64;        /* the widest float: "double"; MSL, which has none, "float" */
  /* Address spaces of the pointers the shared emitters declare. */
  const char *dev;        /* into device memory: "" or "device " */
  const char *thr;        /* to a thread's own variable: "" or "thread " */
  /* The thread's place and the block's tools, which templates name as
   * $tid, $bid, $gdim, $barrier and $shared. */
  const char *thread_idx; /* thread index in the block: "threadIdx.x" */
  const char *block_idx;  /* block index in the grid: "blockIdx.x" */
  const char *grid_dim;   /* blocks in the grid: "gridDim.x" */
  const char *barrier;    /* the block's barrier: "__syncthreads()" */
  const char *shared;     /* qualifier of a block-shared array: "__shared__" */
  /* The module's first lines: a comment naming the model, and the preludes. */
  void (*module_begin)(cc_text *src, const mlc_program *p);
  /* The header of launch c->nlaunch, with the node's parameter list, up to
   * and including its opening brace; block and min_blocks are the launch
   * bound (threads, resident blocks per multiprocessor). */
  void (*kernel_begin)(cc *c, uint32_t block, uint32_t min_blocks);
  /* What follows a kernel's closing brace: NULL, or Metal's entry point for
   * its CPU emulator. */
  void (*kernel_end)(cc *c);
  /* The dialect's own emitters: matmul, linear, matmul_tn and fused groups
   * headed by one; attention, attention_grad; and, NULL where the dialect
   * has none (the driver then refuses the op), attention_save and
   * attention_grad_saved, attention_kv, qlinear, adamw_multi and
   * sgd_multi, and FP8's quant and scaled_mm (issue 30). */
  cc_emitter emit_gemm, emit_attention, emit_attention_saved, emit_attention_kv, emit_qlinear, emit_update_multi;
  cc_emitter emit_quant, emit_scaled_mm;
  /* Whether fused GEMM epilogues also take eight 16-bit columns at a time
   * (st8: CUDA's wgmma GEMM stores through shared memory). */
  bool epilogue_st8;
  /* Whether emit_gemm takes an rmsnorm prologue (ir/fused.h; CUDA's
   * matrix-vector kernel). */
  bool gemv_prologues;
};

/* Appends kernel text; the template's $i64, $ll, $f64, $tid, $bid, $gdim,
 * $barrier and $shared become the dialect's spellings (cc_dialect), as in
 * cc_fmt. */
void cc_printf(cc *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Starts the next launch: prints the kernel function's header (the
 * dialect's kernel_begin) with the node's parameter list (in0.., out,
 * scratch) and `block` as its launch bound, and records grid/block/smem.
 * The function's name is a placeholder that the driver of the emitter
 * (emit.c) replaces with the kernel's symbol and the launch number, so
 * identical kernels get identical text.  The body follows with cc_printf;
 * cc_end closes it. */
void cc_begin(cc *c, uint64_t grid, uint32_t block, uint32_t smem);
/* cc_begin with min_blocks resident blocks per multiprocessor in the launch
 * bound (CUDA: __launch_bounds__(block, min_blocks), which caps registers). */
void cc_begin_min(cc *c, uint64_t grid, uint32_t block, uint32_t smem, uint32_t min_blocks);
void cc_end(cc *c);
/* The module's text for the program in the dialect: the kernels of every
 * node, each distinct one once, and their launch table (emit.c).  A node
 * that cannot be emitted is an error naming it: MLC_INVALID_ARGUMENT for
 * an op the dialect has no kernel for (as the other targets say it: the
 * model asks what this target cannot do) or a shape or dtype its kernels
 * do not take, MLC_INTERNAL for a bug in mlc. */
MLC_MUST_USE mlc_status cc_emit_module(const mlc_program *p, const cc_dialect *t, mlc_cstyle_module *m);
/* Whether the dialect has a kernel for op, or op needs none. */
bool cc_supports_op(const cc_dialect *t, mlc_op op);

/* Storage type of a dtype: "float", "mlc_bf16", "mlc_f16", "int", the
 * dialect's 64-bit integer, "unsigned char". */
const char *cc_stype(const cc *c, int dt);

/* TF32 products per f32 product on the tensor cores, as the program's
 * --f32-matmul says: 3 (tf32x3), 1 (tf32), or 0 (ieee: SIMT FMAs). */
int cc_f32_products(const cc *c);
/* Compute type: "float" for the float dtypes, else the storage type. */
const char *cc_ctype(const cc *c, int dt);
/* Load of element `idx` (an expression) of a buffer as its compute type, and
 * a store of a compute-type expression; buf is "in0", "out", ... */
const char *cc_load(cc *c, const char *buf, int dt, const char *idx);
const char *cc_store(cc *c, const char *buf, int dt, const char *idx, const char *val);
/* The expression that rounds compute-type value v to dtype dt and back (v itself for f32 and integers): what a
 * reader of v stored as dt would see. */
const char *cc_rounded(cc *c, int dt, const char *v);
/* printf into the program's arena, with the dialect's spellings (cc_printf). */
const char *cc_fmt(cc *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A literal float that round-trips: "1.1920929e-07f", "-INFINITY" */
const char *cc_flit(cc *c, double v);

/* Vector moves of row kernels: the widest of 8, 4, 2 elements (16 bytes at
 * most) that divides n; the unsigned type of that many bytes; and the code
 * that loads elements idx .. idx+vec-1 of src into the f32 array
 * dst[off ..] and stores src[0 .. vec) rounded to dt at dst[idx ..]. */
int cc_pick_vec(int64_t n, int element_bytes);
const char *cc_vtype(int bytes);
void cc_vec_load(cc *c, int vec, int dt, const char *dst, const char *off, const char *src, const char *idx);
void cc_vec_store(cc *c, int vec, int dt, const char *dst, const char *idx, const char *src);

/* 1-byte transposes (FP8 codes) through a 64 x 64 tile of words, CC_BYTE_TILE
 * threads a block: the tile is `unsigned int tile[64][17]`, row y's bytes
 * 4 tx .. 4 tx + 3 as word tile[y][tx], for tx = $tid % 16, ty = $tid / 16,
 * the block's corner at input row r0, column c0 of an [R, C] matrix.  This
 * stores the tile transposed, a word of 4 bytes of an input column a thread,
 * at dst[c * R + r] (dst a byte pointer expression), after a barrier. */
#define CC_BYTE_TILE 256
void cc_byte_tile_store_transposed(cc *c, const char *dst, int64_t R, int64_t C);

/* Row kernels (norms, cross entropy): a warp of 32 threads per row while
 * rows have at most 128 vectors, else a block of CC_ROW_THREADS; rows per
 * block accordingly.  With cache_max > 0, `cache` says whether a thread's
 * share of the row (nit vectors) fits in cache_max floats of registers. */
#define CC_ROW_THREADS 256
typedef struct {
  int64_t R, D;   /* rows, row length */
  int vec;        /* elements per vector access */
  int64_t nv;     /* vectors per row */
  int tpr, rpb;   /* threads per row, rows per block */
  int64_t nit;    /* vectors per thread, rounded up */
  bool cache;
} cc_rowplan;
void cc_plan_rows(cc_rowplan *rp, int64_t R, int64_t D, int dt, int cache_max);
/* The kernel's first lines: lane, row, the guard for a partial last block,
 * shared memory for block reductions. */
void cc_row_head(cc *c, const cc_rowplan *rp);

void cc_error(cc *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* cc_error, as an expression that is false where the compiler can see it, so
 * that `return cc_fail(...)` leaves no "may be used uninitialized" behind in
 * optimised builds (an out-parameter a failing call does not set). */
#define cc_fail(...) (cc_error(__VA_ARGS__), false)
/* cc_fail for a node mlc should never have made (a broken invariant of the
 * passes or the emitters): the module's status is MLC_INTERNAL, not
 * MLC_INVALID_ARGUMENT. */
#define cc_bug(c, ...) (cc_error((c), __VA_ARGS__), (c)->internal = true, false)

static inline int64_t cc_ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* The node's input k and output types. */
static inline const mlc_type *cc_in(const cc *c, int k) { return &c->f->nodes[c->n->in[k]].type; }
static inline const mlc_type *cc_outt(const cc *c) { return &c->n->type; }

/* ---- op emitters: each returns false with c->err set if it cannot ---- */
bool cc_emit_ew(cc *c);          /* elementwise, with broadcasting; cast; broadcast; *_grad of activations */
bool cc_emit_reduce(cc *c);      /* sum, mean, max, min, softmax */
bool cc_emit_argreduce(cc *c);   /* argmax, argmin (emit_reduce.c) */
bool cc_emit_layout(cc *c);      /* transpose, slice, concat, gather, slice_grad */
bool cc_emit_gather_grad(cc *c); /* gather_grad (emit_layout.c) */
bool cc_emit_norm(cc *c);        /* rmsnorm, layernorm and their grads */
bool cc_emit_misc(cc *c);        /* embedding(+grad), cross_entropy(+grad), adamw, sgd */
bool cc_emit_shard_cast(cc *c);  /* the fsdp pass's cast of a rank's shard (c->sharded) */
bool cc_emit_fused(cc *c);       /* fused: elementwise groups; GEMM-headed ones go to the dialect's emit_gemm */
bool cc_emit_update_multi(cc *c); /* adamw_multi, sgd_multi (emit_misc.c), for dialects whose kernels take 72 arguments */

/* Fused nodes (emit_fused.c; program format in ir/fused.h).  The node's
 * program, or false with c->err set; for a program that starts with a
 * GEMM, the GEMM as a node of its own (inputs $0, $1; false if the program
 * has no GEMM); the epilogue struct "@K@_epi" (printed before cc_begin:
 * inputs in2.., out, b0 the batch's offset in out; st1(i, acc) and
 * st2(i, acc0, acc1) store element i (and i + 1) of the batch); and the
 * initialiser of one, for batch offset boff. */
bool cc_fused_program(cc *c, mlc_fused_prog *pr);
bool cc_fused_gemm_node(cc *c, const mlc_fused_prog *pr, mlc_node *g);
void cc_fused_epilogue(cc *c, const mlc_fused_prog *pr);
const char *cc_fused_epilogue_init(cc *c, const mlc_fused_prog *pr, const char *boff);
/* A CONST node's value as a literal of its compute type. */
const char *cc_const_lit(cc *c, const mlc_node *k);

/* The expression for one elementwise op (ew) applied to compute-type
 * expressions x[0], x[1] of input dtype in_dt, giving the output's compute
 * type; NULL if op is not elementwise.  Fused kernels chain these. */
const char *cc_ew_expr(cc *c, int op, int in_dt, int out_dt, const mlc_attrs *a, const char *const *x); /* a: NULL in a fused program */
bool cc_emit_arange(cc *c);
bool cc_emit_dropout(cc *c); /* dropout's Philox mask, as the CPU target's (emit_ew.c) */

/* A GEMM as both dialects' emitters see it: codegen/gemm_shape.h (its dt is
 * also A's and B's dtype here). */
typedef mlc_gemm_shape cc_gemm_desc;
bool cc_gemm_desc_of(cc *c, cc_gemm_desc *d); /* gemm_desc.c: the shape, or a failure for a dtype without GEMMs */
/* The same for the node being emitted, a GEMM or a FUSED group headed by
 * one: then *fused is set and pr holds the group's program. */
bool cc_gemm_desc_node(cc *c, cc_gemm_desc *d, mlc_fused_prog *pr, bool *fused);

/* A qlinear node's shape (--quantize): y[m, n] = x[m, k] dequant(w)^T with
 * x f32 and w packed as runtime/quant.h lays it out; false (cc_fail) where
 * the node is not that layout. */
typedef struct {
  int bits;
  int scheme; /* ir/ir.h's MLC_QS_*: asymmetric (unsigned codes, a min per group), bf16 scales */
  int64_t m, n, k, group;
} cc_qlinear_shape;
bool cc_qlinear_shape_of(cc *c, cc_qlinear_shape *q);

/* The math both preludes end with (prelude.c). */
extern const char mlc_cc_math_prelude[];

#endif
