/* Internals of the SPIR-V code generator: the state an op emitter sees
 * while it writes the module of one node, and the emitters (emit_*.c).
 *
 * One IR node becomes one module (one plan step): bindings 0..nin-1 are the
 * node's inputs, nin its output, nin+1 the scratch block
 * (runtime/vulkan/kernel.h).  An emitter writes up to four entry points,
 * each one dispatch, with sv_begin / sv_end; all shapes are static, so
 * sizes, strides and loop bounds are constants in the code.  Indices are
 * 32-bit: emitters refuse tensors of 2^31 elements or more (sv_check_size).
 */
#ifndef MLC_CODEGEN_SPIRV_EMIT_H
#define MLC_CODEGEN_SPIRV_EMIT_H

#include "codegen/spirv/builder.h"
#include "codegen/spirv/spirv.h"

#define SV_THREADS 256   /* the local size of most kernels */
#define SV_MAX_GROUPS 65535

typedef struct {
  const mlc_program *p;
  const mlc_func *f;
  const mlc_node *n;
  uint32_t node;
  const mlc_spirv_options *o;
  sb *b;
  bool coopmat_variant;   /* write the cooperative-matrix version (GEMMs only) */
  /* set by the emitter */
  mlc_vk_dispatch d[MLC_VK_MAX_DISPATCH];
  uint32_t nd;
  uint64_t scratch;
  bool coopmat;
  bool coop_bf16;         /* its 16-bit matrices hold bf16 bits: KHR form only, A and B typed bf16 there (khr.h) */
  uint32_t mnk[3];
  char err[256];
} sv;

static inline const mlc_type *sv_in(const sv *s, int k) { return &s->f->nodes[s->n->in[k]].type; }
static inline const mlc_node *sv_in_node(const sv *s, int k) { return &s->f->nodes[s->n->in[k]]; }
static inline uint32_t sv_out(const sv *s) { return s->n->nin; }     /* binding of the output */
static inline uint32_t sv_scratch(const sv *s) { return s->n->nin + 1u; }
/* A kernel on 16 x 16 x 16 cooperative matrices (not when emulated with scalar FMAs); bf16: its A and B
 * matrices hold bf16 bits (the KHR form's bf16 matrices). */
static inline void sv_coopmat16(sv *s, bool emulate, bool bf16) {
  if (emulate) return;
  s->coopmat = true;
  s->coop_bf16 = bf16;
  s->mnk[0] = s->mnk[1] = s->mnk[2] = 16;
}
static inline int64_t sv_ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool sv_fail(sv *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* False (with the message) when a tensor has 2^31 elements or more. */
bool sv_check_size(sv *s, int64_t numel);
/* Starts the next entry point, "main<k>", over `groups` workgroups of
 * `lsize` threads; returns the flat group index.  Threads of the padding
 * groups of a 2-D grid (past `groups`) are not excluded: the caller guards
 * (sv_items_begin's loop and sv_rows_begin do). */
uint32_t sv_begin(sv *s, uint64_t groups, uint32_t lsize);
void sv_end(sv *s);

/* A grid-stride loop over n items: begin gives the item index (u32). */
typedef struct {
  sb_loop l;
} sv_gs;
uint32_t sv_gs_begin(sv *s, sv_gs *g, int64_t n);
void sv_gs_end(sv *s, sv_gs *g);
/* An entry point over n items, one per thread, the grid-stride loop open. */
uint32_t sv_items_begin(sv *s, sv_gs *g, int64_t n);
void sv_items_end(sv *s, sv_gs *g);

/* One workgroup per row, rows >= 65535 spread over y: begins the entry
 * point and an `if (row < R)` around the body; returns the row. */
typedef struct {
  sb_if guard;
} sv_rows;
uint32_t sv_rows_begin(sv *s, sv_rows *r, int64_t R, uint32_t lsize);
void sv_rows_end(sv *s, sv_rows *r);

/* Stores that write whole words.  A 16-bit element stored alone is an
 * atomic and + or on its word (builder.h); where a thread owns both halves
 * of a word it stores the word instead.  An element's value comes from a
 * callback as the bits to store (sb_f2bits_dt for f32 values): lo, and hi
 * for 64-bit dtypes. */
typedef void (*sv_bits_fn)(sv *s, void *ctx, uint32_t i, uint32_t *lo, uint32_t *hi);
/* An entry point over the n elements of binding `bind` (dtype dt), a
 * thread per element, or per pair of elements for 16-bit dtypes. */
void sv_items_store(sv *s, int64_t n, uint32_t bind, int dt, sv_bits_fn f, void *ctx);
/* Inside a row kernel: elements base + j, j in [0, L), strided over the
 * workgroup (pairs for 16-bit dtypes when base is even: L even).  f gets j. */
void sv_row_store(sv *s, uint32_t base, int64_t L, uint32_t bind, int dt, sv_bits_fn f, void *ctx);

/* Elementwise pieces (emit_ew.c), for fused programs too.  Values are in
 * compute types: f32 for the float dtypes, 32-bit integers for i32 and
 * bool, 64-bit for i64. */
uint32_t sv_ew_load(sb *b, uint32_t bind, int dt, uint32_t idx);
uint32_t sv_ew_const(sb *b, const mlc_node *k);
/* op on x[0], x[1] (where: x[0..2]) of dtype dt (where: the condition's)
 * giving out_dt; a: the node's attributes (pow's and clamp's constant), NULL
 * in a fused program; 0 if op is not elementwise (or needs a) */
uint32_t sv_ew_value(sb *b, int op, int dt, int out_dt, const mlc_attrs *a, const uint32_t *x);
/* the bits sb_store_bits stores for value y of dtype dt */
void sv_ew_bits(sb *b, int dt, uint32_t y, uint32_t *lo, uint32_t *hi);
/* y rounded to dt as a store and a load would (bf16, f16; others as they are) */
uint32_t sv_ew_round(sb *b, int dt, uint32_t y);

/* ---- op emitters: false with s->err set if they cannot ---- */
bool sv_emit_ew(sv *s);        /* elementwise, cast, broadcast, *_grad activations, where */
bool sv_emit_arange(sv *s);    /* arange: no inputs */
bool sv_emit_reduce(sv *s);    /* sum, mean, max, softmax */
bool sv_emit_layout(sv *s);    /* transpose, slice, concat, slice_grad */
bool sv_emit_gemm(sv *s);      /* matmul, linear, matmul_tn (s->coopmat_variant: cooperative matrices) */
bool sv_emit_norm(sv *s);      /* rmsnorm, layernorm and their grads */
bool sv_emit_misc(sv *s);      /* embedding(+grad), cross_entropy(+grad), adamw, sgd */
bool sv_emit_attention(sv *s); /* attention, attention_grad, attention_kv */
bool sv_emit_qlinear(sv *s);   /* --quantize's int8/int4 linear */
bool sv_emit_fused(sv *s);     /* FUSED: an elementwise program, or a GEMM with it as epilogue */

/* A GEMM (matmul, linear, matmul_tn as op, result type otype) of the node's
 * inputs 0 and 1; epi, if not NULL, gives the bits to store for the f32
 * accumulator acc of output element `at` (flat index) in dtype epi_dt. */
typedef void (*sv_epi_fn)(sv *s, void *ctx, uint32_t at, uint32_t acc, uint32_t *lo, uint32_t *hi);
bool sv_emit_gemm_of(sv *s, int op, const mlc_type *otype, sv_epi_fn epi, void *ctx, int epi_dt);
/* qlinear of inputs 0 and 1 (emit_qlinear.c; scheme: ir/ir.h's MLC_QS_* flags), storing through epi as
 * sv_emit_gemm_of does. */
bool sv_emit_qlinear_of(sv *s, int bits, int group, int scheme, sv_epi_fn epi, void *ctx, int epi_dt);

/* The optimizer (optimize.cpp, SPIRV-Tools' C++ API: 2023.1 has no C API
 * for it): performance passes; false with a message. *out is malloc'ed. */
bool mlc_spirv_optimize(const uint32_t *words, size_t n, bool vulkan13, uint32_t **out, size_t *out_n, char *err, size_t errn);
/* Validation for an environment: Vulkan 1.2, or 1.3 for coopmat modules. */
bool mlc_spirv_validate_env(const uint32_t *words, size_t nwords, bool vulkan13, char *err, size_t errn);

#endif
