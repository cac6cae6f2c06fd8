/* A SPIR-V module builder for compute kernels, written word by word.
 *
 * One sb builds one module: the sections of the SPIR-V logical layout
 * (capabilities, extensions, imports, entry points, execution modes,
 * decorations, types/constants/globals, functions) are separate word
 * vectors joined by sb_finish.  Types and constants are interned, so asking
 * twice gives the same id.  Ids are handed out in order, so the same calls
 * give the same words (identical kernels hash the same).
 *
 * The kernels' conventions (runtime/vulkan/kernel.h):
 *   - every binding is a storage buffer `struct { uint w[]; }` in set 0:
 *     kernels address 32-bit words and convert in the shader, so 16-bit
 *     and 8-bit data need no 16-bit storage feature (a 16-bit store is an
 *     atomic and + or on its word, so two threads can write the two halves);
 *   - one or more GLCompute entry points, each with its LocalSize;
 *   - workgroup grids are flattened: group = WorkgroupId.y * gx +
 *     WorkgroupId.x, with gx <= 65535 (the smallest maxComputeWorkGroupCount
 *     Vulkan allows), see sb_entry_begin;
 *   - locals are Function variables (loads and stores), which the
 *     optimizer's passes turn into SSA; loops and ifs are structured
 *     (OpLoopMerge / OpSelectionMerge) through sb_for / sb_if.
 * Integers are 32-bit and unsigned in type; signed ops are used where the
 * semantics ask for them.  i64 data is read as its low word where it is an
 * index (validated in range by the kernel), and as a 64-bit integer (Int64
 * capability) only by the elementwise kernels.
 */
#ifndef MLC_CODEGEN_SPIRV_BUILDER_H
#define MLC_CODEGEN_SPIRV_BUILDER_H

#include <spirv/unified1/GLSL.std.450.h>
#include <spirv/unified1/spirv.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir/arena.h"

typedef struct {
  uint32_t *w;
  size_t n, cap;
} sb_words;

#define SB_MAX_BIND 34
#define SB_MAX_ENTRY 4

typedef struct {
  sb_words caps, exts, imports, entries, modes, debug, annot, globals, funcs;
  sb_words fvars, fbody; /* the function being written: its variables, its blocks */
  uint32_t bound;
  /* interned types and constants: key words (opcode, operands) -> id */
  sb_words ikeys;
  struct sb_intern { size_t off; uint32_t n, id; } *ient;
  size_t nient, capient;
  /* common ids */
  uint32_t glsl;
  uint32_t t_void, t_bool, t_u32, t_f32, t_u64, t_v2f, t_v3u, t_fn;
  uint32_t t_buf_struct, p_buf, p_sb_u32;
  uint32_t buf[SB_MAX_BIND];
  uint32_t buf4[SB_MAX_BIND]; /* the same bindings as uvec4[] (sb_ld4), made on first use */
  uint32_t nbuf;
  uint32_t v_wid, v_lid; /* builtin Input variables */
  bool int64, f16, coopmat;
  /* entry point being written */
  uint32_t gx;        /* workgroups along x; the grid is flattened with it */
  uint32_t lsize;     /* local size x */
  uint32_t nentry;
  bool in_fn;
} sb;

/* A Function variable. */
typedef struct {
  uint32_t id, type;
} sb_lv;

typedef struct {
  uint32_t header, cont, merge, body;
  sb_lv var;
  uint32_t end, step;
} sb_loop;

typedef struct {
  uint32_t merge, els;
  bool has_else;
} sb_if;

/* A module whose bindings 0..nbuf-1 are the uint[] storage buffers. */
void sb_init(sb *b, uint32_t nbuf);
void sb_free(sb *b);
/* The words of the whole module (malloc'ed; the caller frees). */
uint32_t *sb_finish(sb *b, size_t *out_n);

void sb_capability(sb *b, uint32_t cap);
void sb_extension(sb *b, const char *name);

/* Starts entry point `name` (a void function) with LocalSize (lx, 1, 1),
 * run over `groups` workgroups; *gxy receives the dispatch's x and y counts.
 * sb_group is the flat workgroup index; threads of groups past `groups` in
 * the 2-D grid's last row must be skipped by the caller (sb_group_ok). */
void sb_entry_begin(sb *b, const char *name, uint32_t lx, uint64_t groups, uint32_t gxy[2]);
void sb_entry_end(sb *b);

/* ---- types and constants ---- */
uint32_t sb_type(sb *b, SpvOp op, uint32_t n, const uint32_t *operands);
uint32_t sb_ptr(sb *b, SpvStorageClass sc, uint32_t type);
uint32_t sb_array_type(sb *b, uint32_t elem, uint32_t n);
/* An interned constant instruction (OpConstant, OpConstantComposite, ...)
 * of `type` with n operand words. */
uint32_t sb_constant(sb *b, SpvOp op, uint32_t type, uint32_t n, const uint32_t *v);
uint32_t sb_u32(sb *b, uint32_t v);
uint32_t sb_f32(sb *b, float v);
/* Whether id is the f32 constant v, bit for bit (-0.0 is not 0.0). */
bool sb_is_f32(sb *b, uint32_t id, float v);
uint32_t sb_u64(sb *b, uint64_t v);
uint32_t sb_u64_type(sb *b); /* adds the Int64 capability */
uint32_t sb_bool(sb *b, bool v);
uint32_t sb_f16_type(sb *b);
uint32_t sb_uvec4_type(sb *b);

/* ---- instructions ---- */
/* Appends an instruction with a result type and a fresh result id. */
uint32_t sb_op(sb *b, SpvOp op, uint32_t type, uint32_t n, const uint32_t *args);
/* One with neither. */
void sb_op0(sb *b, SpvOp op, uint32_t n, const uint32_t *args);
uint32_t sb_op1(sb *b, SpvOp op, uint32_t type, uint32_t x);
uint32_t sb_op2(sb *b, SpvOp op, uint32_t type, uint32_t x, uint32_t y);
uint32_t sb_glsl(sb *b, enum GLSLstd450 f, uint32_t type, uint32_t n, const uint32_t *args);
uint32_t sb_glsl1(sb *b, enum GLSLstd450 f, uint32_t type, uint32_t x);
uint32_t sb_select(sb *b, uint32_t type, uint32_t c, uint32_t x, uint32_t y);

/* u32 arithmetic */
uint32_t sb_add(sb *b, uint32_t x, uint32_t y);
uint32_t sb_sub(sb *b, uint32_t x, uint32_t y);
uint32_t sb_mul(sb *b, uint32_t x, uint32_t y);
uint32_t sb_div(sb *b, uint32_t x, uint32_t y);
uint32_t sb_mod(sb *b, uint32_t x, uint32_t y);
uint32_t sb_shr(sb *b, uint32_t x, uint32_t y);
uint32_t sb_shl(sb *b, uint32_t x, uint32_t y);
uint32_t sb_and(sb *b, uint32_t x, uint32_t y);
uint32_t sb_or(sb *b, uint32_t x, uint32_t y);
uint32_t sb_ult(sb *b, uint32_t x, uint32_t y);
uint32_t sb_ieq(sb *b, uint32_t x, uint32_t y);
uint32_t sb_land(sb *b, uint32_t x, uint32_t y);
uint32_t sb_addc(sb *b, uint32_t x, uint32_t k); /* x + k, k a literal */
uint32_t sb_mulc(sb *b, uint32_t x, uint32_t k);
/* f32 arithmetic */
uint32_t sb_fadd(sb *b, uint32_t x, uint32_t y);
uint32_t sb_fsub(sb *b, uint32_t x, uint32_t y);
uint32_t sb_fmul(sb *b, uint32_t x, uint32_t y);
uint32_t sb_fdiv(sb *b, uint32_t x, uint32_t y);
uint32_t sb_fma(sb *b, uint32_t x, uint32_t y, uint32_t z);
uint32_t sb_fmax(sb *b, uint32_t x, uint32_t y);
uint32_t sb_exp(sb *b, uint32_t x);
uint32_t sb_flt(sb *b, uint32_t x, uint32_t y); /* ordered x < y */
uint32_t sb_u2f(sb *b, uint32_t x);
uint32_t sb_bits2f(sb *b, uint32_t x);
uint32_t sb_f2bits(sb *b, uint32_t x);

/* ---- locals and control flow ---- */
sb_lv sb_local(sb *b, uint32_t type, uint32_t init); /* init 0: none */
sb_lv sb_local_array(sb *b, uint32_t elem, uint32_t n);
uint32_t sb_ld(sb *b, sb_lv v);
void sb_st(sb *b, sb_lv v, uint32_t x);
uint32_t sb_arr_ld(sb *b, sb_lv a, uint32_t idx);
void sb_arr_st(sb *b, sb_lv a, uint32_t idx, uint32_t x);
/* for (i = start; i < end; i += step), u32 ids; returns i in the body. */
uint32_t sb_for(sb *b, sb_loop *l, uint32_t start, uint32_t end, uint32_t step);
void sb_for_end(sb *b, sb_loop *l);
void sb_if_begin(sb *b, sb_if *s, uint32_t cond, bool with_else);
void sb_if_else(sb *b, sb_if *s);
void sb_if_end(sb *b, sb_if *s);

/* ---- builtins, shared memory, barriers ---- */
uint32_t sb_lid(sb *b);           /* LocalInvocationId.x */
uint32_t sb_group(sb *b);         /* flat workgroup index */
uint32_t sb_shared(sb *b, uint32_t elem, uint32_t n); /* a Workgroup array variable */
uint32_t sb_sh_ld(sb *b, uint32_t var, uint32_t elem, uint32_t idx);
void sb_sh_st(sb *b, uint32_t var, uint32_t elem, uint32_t idx, uint32_t x);
void sb_barrier(sb *b);
/* A barrier among the threads of a subgroup, ordering their shared-memory
 * accesses (subgroupBarrier()). */
void sb_subgroup_barrier(sb *b);
/* The workgroup's sum (max when is_max: NaN-propagating) of f32 v, through
 * the shared float array sh of lsize elements; every thread gets it. */
uint32_t sb_wg_reduce(sb *b, uint32_t sh, uint32_t v, bool is_max);

/* ---- buffers ---- */
uint32_t sb_word_ptr(sb *b, uint32_t bind, uint32_t widx);
uint32_t sb_ldw(sb *b, uint32_t bind, uint32_t widx);
/* The 16 bytes at byte 16 * qidx of binding `bind`, a uvec4 (a second view
 * of the binding: struct { uvec4 q[]; }, same set and binding). */
uint32_t sb_ld4(sb *b, uint32_t bind, uint32_t qidx);
void sb_stw(sb *b, uint32_t bind, uint32_t widx, uint32_t x);
uint32_t sb_atomic(sb *b, SpvOp op, uint32_t bind, uint32_t widx, uint32_t x);
/* Element idx of a buffer of dtype dt (mlc_dtype), as f32 (float dtypes). */
uint32_t sb_load_f(sb *b, uint32_t bind, int dt, uint32_t idx);
void sb_store_f(sb *b, uint32_t bind, int dt, uint32_t idx, uint32_t val);
/* An integer element (i32, i64's low word, bool) as u32 bits; for i64 *hi
 * (if not NULL) receives the high word. */
uint32_t sb_load_i(sb *b, uint32_t bind, int dt, uint32_t idx, uint32_t *hi);
/* Stores the raw bits of an element of dt: 8/16/32 bits in `lo`, i64 as lo/hi. */
void sb_store_bits(sb *b, uint32_t bind, int dt, uint32_t idx, uint32_t lo, uint32_t hi);
/* Loads the raw bits (zero-extended) of an element; i64 gives *hi too. */
uint32_t sb_load_bits(sb *b, uint32_t bind, int dt, uint32_t idx, uint32_t *hi);
/* f32 -> bf16 / f16 bits (round to nearest even; NaN stays NaN) */
uint32_t sb_f2bf16(sb *b, uint32_t f);
/* Two f32 as the f16 pair of one u32 word (x0 in the low half). */
uint32_t sb_pack_h2(sb *b, uint32_t x0, uint32_t x1);
uint32_t sb_f2f16(sb *b, uint32_t f);
uint32_t sb_bf16tof(sb *b, uint32_t bits);
/* The bits sb_store_f would store for f32 value f in dtype dt. */
uint32_t sb_f2bits_dt(sb *b, int dt, uint32_t f);
uint32_t sb_f16tof(sb *b, uint32_t bits);

#endif
