/* The IR: a flat SSA dataflow graph per entry point.
 *
 * A program holds the model's parameters (with their PyTorch state_dict
 * names, shapes and initialisers) and one function per entry point:
 * `forward`, and `train` when the model has a train block.  A function is an
 * array of nodes in topological order; a node is one op producing one value
 * with a dtype and a static shape, and it refers to its inputs by 32-bit
 * index into the same array.  Nodes carry the source location and the scope
 * (`layers.3.attn`) they came from, so later passes can still report errors
 * against the user's source and kernels can be named after modules.
 *
 * All memory comes from the program's arena.
 */
#ifndef MLC_IR_H
#define MLC_IR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "ir/arena.h"
#include "ir/diag.h"

#define MLC_MAX_RANK 6

/*      enum   name    bytes float */
#define MLC_DTYPES(X)          \
  X(F32,  "f32",  4, 1)        \
  X(BF16, "bf16", 2, 1)        \
  X(F16,  "f16",  2, 1)        \
  X(I32,  "i32",  4, 0)        \
  X(I64,  "i64",  8, 0)        \
  X(BOOL, "bool", 1, 0)        \
  X(F8E4M3, "f8e4m3", 1, 0)    \
  X(F8E5M2, "f8e5m2", 1, 0)

/* f8e4m3 and f8e5m2 (OCP 8-bit floating point: e4m3fn, max 448, no inf,
 * NaN S.1111.111; e5m2, max 57344, IEEE inf and NaN) are storage formats
 * of the fp8 pass (passes/fp8.c): only quant makes them, only scaled_mm,
 * transpose, reshape and view read them (mlc_infer_type refuses them
 * everywhere else), so they count as no float dtype.  Quantising x with a
 * tensor's amax: e = mlc_f8_scale_exp(amax, fmax), code = RNE(x * 2^e),
 * finite values past +-fmax saturate to +-fmax, NaN stays NaN; a NaN or
 * infinite amax makes every code NaN, so a blow-up shows in the loss. */
typedef enum {
  MLC_DT_INVALID,
#define X(e, n, b, f) MLC_DT_##e,
  MLC_DTYPES(X)
#undef X
  MLC_DT_COUNT
} mlc_dtype;

const char *mlc_dtype_name(mlc_dtype t);
int mlc_dtype_size(mlc_dtype t);
bool mlc_dtype_is_float(mlc_dtype t);
static inline bool mlc_dtype_is_f8(int t) { return t == MLC_DT_F8E4M3 || t == MLC_DT_F8E5M2; }
/* The largest finite value of an f8 dtype: 448 or 57344. */
static inline float mlc_f8_max(int t) { return t == MLC_DT_F8E4M3 ? 448.0f : 57344.0f; }
/* The power of two that scales a tensor of largest magnitude amax (finite)
 * into an f8 dtype of largest value fmax: floor(log2(fmax / max(amax,
 * 1e-12))), the quotient rounded to f32 first, as every target computes it
 * (torchao's amax_to_scale with round_scales_to_power_of_2). */
int mlc_f8_scale_exp(float amax, float fmax);
mlc_dtype mlc_dtype_from_name(const char *s, size_t n); /* MLC_DT_INVALID if none */

/* FSDP's flat parameters (passes/fsdp.c): a unit's parameters, each padded
 * to MLC_SHARD_ALIGN elements, laid end to end and rounded up to whole rows
 * of MLC_SHARD_ROW elements; its IR shape is [rows, MLC_SHARD_ROW].  At run
 * time each of `world` ranks holds mlc_shard_rows(rows, world) rows (the
 * flat is padded with zeros to a multiple of world rows), so one artifact
 * runs at any world size up to MLC_SHARD_MAX_WORLD, and a gathered flat
 * buffer is sized for the largest of them. */
#define MLC_SHARD_ROW 4096
#define MLC_SHARD_ALIGN 128
#define MLC_SHARD_MAX_WORLD 256
static inline int64_t mlc_shard_rows(int64_t rows, int world) { return (rows + world - 1) / world; }
static inline int64_t mlc_gather_numel(int64_t rows) { return (rows + MLC_SHARD_MAX_WORLD - 1) * MLC_SHARD_ROW; }

typedef struct {
  uint8_t dtype; /* mlc_dtype */
  uint8_t rank;
  int64_t dim[MLC_MAX_RANK];
} mlc_type;

int64_t mlc_type_numel(const mlc_type *t);
/* Row-major element strides of a type. */
void mlc_type_strides(const mlc_type *t, int64_t *stride);
bool mlc_type_eq(const mlc_type *a, const mlc_type *b);
/* "f32[8, 1024, 2048]" into buf; returns buf. */
char *mlc_type_str(const mlc_type *t, char *buf, size_t n);

/* Largest tensor the compiler accepts: 2^48 elements.  Keeps every byte
 * count and FLOP count well inside int64 and double precision. */
#define MLC_MAX_NUMEL ((int64_t)1 << 48)

typedef enum {
#define X(e, name, arity, flags, attrs, shape, cost, vjp) MLC_OP_##e,
#include "ir/ops.def"
#undef X
  MLC_OP_COUNT
} mlc_op;

/* Op flags and attribute masks.  ops.def spells them without the prefix. */
enum {
  MLC_F_EW = 1 << 0, MLC_F_RED = 1 << 1, MLC_F_FUSE = 1 << 2, MLC_F_MM = 1 << 3,
  MLC_F_VIEW = 1 << 4, MLC_F_LEAF = 1 << 5, MLC_F_COLL = 1 << 6, MLC_F_CALL = 1 << 7, MLC_F_ARG = 1 << 8,
};
enum {
  MLC_A_NAME = 1 << 0, MLC_A_PARAM = 1 << 1, MLC_A_VALUE = 1 << 2, MLC_A_DTYPE = 1 << 3,
  MLC_A_AXIS = 1 << 4, MLC_A_AXIS2 = 1 << 5, MLC_A_KEEPDIM = 1 << 6, MLC_A_SHAPE = 1 << 7,
  MLC_A_RANGE = 1 << 8, MLC_A_EPS = 1 << 9, MLC_A_CAUSAL = 1 << 10, MLC_A_SCALE = 1 << 11,
  MLC_A_QUANT = 1 << 12,
  MLC_A_RNG = 1 << 13, /* dropout's stream (start) and seed (end) */
};

typedef struct {
  const char *name;
  int arity;
  unsigned flags, attrs;
} mlc_opinfo;
extern const mlc_opinfo mlc_ops[MLC_OP_COUNT];

typedef struct {
  int32_t axis, axis2; /* normalised to 0..rank-1 by the builder */
  int32_t keepdim, causal;
  int64_t start, end;  /* slice; dropout: the RNG stream and seed */
  double f;            /* const value, eps, or attention scale */
  uint32_t param;      /* index into mlc_program.params */
  const char *name;    /* input name */
  int32_t qbits, qgroup; /* qlinear: 4 or 8 bits a weight, a scale per qgroup weights of a row */
  uint8_t qscheme;       /* qlinear: MLC_QS_* flags (mlc_quant_row_words below) */
  /* Set by autodiff on the two matmuls of a linear's gradient, for the fp8
   * pass: 1 + the linear's node, and which GEMM (MLC_MM_DX: dx = g w;
   * MLC_MM_DW: dw = g^T x).  Not printed or hashed: no attribute bit. */
  uint32_t mm_of;
  uint8_t mm_role;
  /* Set by the fuse pass (GPU targets) on a max whose input was abs of x,
   * which it then reads in abs's place: the max of |x| in one pass (the
   * fp8 pass's amax).  Printed as abs=1.  Such a max of a float narrower
   * than f32 may give f32 (the node's type says which): the fuse pass folds
   * the amax's cast to f32 into it, exactly, as a max is one of its inputs. */
  uint8_t abs_in;
} mlc_attrs;
enum { MLC_MM_NONE, MLC_MM_DX, MLC_MM_DW };

typedef struct {
  uint16_t op;
  uint16_t nin;
  uint32_t *in; /* nin node indices, all smaller than this node's */
  mlc_type type;
  mlc_attrs a;
  mlc_loc loc;
  const char *scope; /* "" at the top level */
} mlc_node;

typedef struct {
  const char *name;
  uint32_t node;
} mlc_output;

typedef struct {
  const char *name; /* "forward", "train" */
  mlc_node *nodes;
  uint32_t n, cap;
  mlc_u32vec inputs; /* INPUT nodes, in signature order */
  mlc_output *outputs;
  uint32_t noutputs;
  /* Set by the memplan pass: each node's byte offset in the function's
   * arena (PARAM nodes: -1, they live outside it), and the arena's size. */
  int64_t *offset;
  int64_t arena_bytes;
} mlc_func;

/* How a parameter starts: zeros, ones, uniform(a, b), normal(a, b), or
 * given, its value in the model's file (an ONNX initializer or Constant
 * tensor), which the plan does not carry: a session must load it before it
 * runs (mlc compile -o writes those values as DIR/<name>.safetensors). */
typedef enum { MLC_INIT_ZEROS, MLC_INIT_ONES, MLC_INIT_UNIFORM, MLC_INIT_NORMAL, MLC_INIT_GIVEN } mlc_init_kind;

typedef enum {
  MLC_ROLE_WEIGHT,    /* a model parameter: in the state_dict */
  MLC_ROLE_OPT_STATE, /* optimizer state (AdamW's moments, SGD's momentum): in checkpoints only */
  MLC_ROLE_FLAT,      /* an FSDP unit's flat parameter (passes/fsdp.c): its weights live in it */
  MLC_ROLE_CACHE,     /* a decode block's KV cache (attention_kv): zero at the start, in no weights file or checkpoint */
  MLC_ROLE_QUANT,     /* a weight quantised by passes/quantize.c: packed by the runtime from its f32 weight (quant_of)
                         whenever that one is loaded or initialised; in no weights file or checkpoint */
  MLC_ROLE_SHADOW,    /* the 16-bit copy of an f32 weight (quant_of) that a CUDA train step's forward reads in place
                         of casting the weight, and that its grouped update writes beside the weight (passes/fuse.c's
                         shadow_casts): made by the runtime from the weight whenever that one is loaded, drawn or set,
                         held beside the optimizer state (only by a session that trains); in no weights file or
                         checkpoint */
} mlc_param_role;

/* The packed form of a quantised weight w[n, k] (passes/quantize.c, the
 * runtime's mlc_quant_pack, every target's qlinear kernel): i32 [n,
 * mlc_quant_row_words], each row its k codes (bits / 32 words each: int8 four
 * to a word, int4 eight, element j in bits [bits * (j % per_word), +bits) of
 * word j / per_word), then the k / group groups' scales, and asymmetric
 * (MLC_QS_ASYM) their mins:
 * - MLC_QS_BF16 (the default): bf16.  Symmetric, group g's scale in bits
 *   [16 * (g % 2), +16) of word g / 2 after the codes (the last word's top
 *   half 0 where k / group is odd); asymmetric, word g after the codes holds
 *   group g's scale in its low 16 bits and its min in its high 16.
 * - otherwise (:scales=f32) f32: k / group scales a word each, then
 *   (asymmetric) k / group mins.
 * Symmetric: scale = max |w| over the group / qmax (qmax 127 or 7), code =
 * round(w / scale) clamped to [-qmax, qmax] in two's complement, w ~ code * scale.
 * Asymmetric (--quantize int4:asym): lo = min w, scale = (max w - lo) /
 * (2^bits - 1), code = round((w - lo) / scale) clamped to [0, 2^bits - 1]
 * unsigned, w ~ lo + code * scale.  bf16 rounds lo down and the scale up
 * before the codes are made from them, so every weight of the group stays
 * in range and within scale / 2 of what is read back (runtime/quant.h). */
enum { MLC_QS_ASYM = 1, MLC_QS_BF16 = 2 };
static inline int64_t mlc_quant_row_words(int64_t k, int bits, int group, int scheme) {
  int64_t halves = (scheme & MLC_QS_ASYM ? 2 : 1) * (k / group); /* scales and mins */
  return k * bits / 32 + (scheme & MLC_QS_BF16 ? (halves + 1) / 2 : halves);
}
/* The scheme as --quantize spells it after int<bits>[:group=G]: "", ":asym", ":scales=f32", ":asym:scales=f32". */
static inline const char *mlc_quant_scheme_str(int scheme) {
  static const char *const s[4] = {":scales=f32", ":asym:scales=f32", "", ":asym"};
  return s[scheme & 3];
}

typedef struct {
  const char *name; /* state_dict key: "layers.3.attn.in_proj_weight" */
  mlc_type type;
  uint8_t role;     /* mlc_param_role */
  uint8_t init;     /* mlc_init_kind */
  double init_a, init_b; /* uniform: [a, b); normal: mean a, std b */
  mlc_loc loc;
  bool sharded;     /* each rank holds a shard: a flat parameter or its optimizer state */
  uint32_t flat;    /* a weight of an FSDP unit: 1 + the index of its flat parameter; 0: none */
  int64_t flat_offset; /* where in the flat it starts, in elements */
  uint32_t tie;     /* while lowering: 1 + the parameter whose tensor this one is now; 0: its own */
  bool frozen;      /* a weight that is no model parameter of PyTorch's (an ONNX graph's buffer or constant): in the
                       state_dict, but autodiff gives it no gradient, so no optimizer updates it */
  uint32_t quant_of;   /* MLC_ROLE_QUANT, MLC_ROLE_SHADOW: 1 + the f32 weight it is packed or copied from */
  int32_t quant_bits, quant_group;
  uint8_t quant_scheme; /* MLC_ROLE_QUANT: MLC_QS_* flags */
} mlc_param;

/* Weight sharing (`head.weight = embed.weight`): one more state_dict name
 * for a parameter's tensor.  The parameter keeps the first of its names in
 * state_dict order (the one torch's named_parameters() yields); each other
 * name is a tie.  Weights files list every name, as torch's state_dict(). */
typedef struct {
  const char *name;  /* "head.weight" */
  uint32_t param;    /* index into mlc_program.params */
  mlc_loc loc;       /* the tying member */
} mlc_tie;

typedef enum { MLC_OPT_NONE, MLC_OPT_ADAMW, MLC_OPT_SGD } mlc_opt_kind;
/* After the warmup: the learning rate stays (none), or falls to min_lr along
 * a half cosine or a line by the schedule's last step (llm.c, nanoGPT). */
typedef enum { MLC_DECAY_NONE, MLC_DECAY_COSINE, MLC_DECAY_LINEAR } mlc_lr_decay;

/* What a train block asks for.  Later passes (autodiff, optimizer,
 * precision, fsdp) read it. */
typedef struct {
  bool present;
  uint8_t opt;          /* mlc_opt_kind */
  double lr, beta1, beta2, eps, weight_decay, momentum;
  /* The learning-rate schedule (optimizer arguments warmup=, decay=,
   * min_lr=, steps=): it travels in the plan, and the runtime feeds each
   * step's rate to the update kernels through the input "opt.lr". */
  int64_t warmup;       /* steps of linear warmup: step k (from 0) takes lr * (k + 1) / warmup */
  uint8_t decay;        /* mlc_lr_decay */
  double min_lr;
  int64_t lr_steps;     /* the schedule's length; 0: the run's, given at run time (mlc train --steps) */
  double clip;          /* clip_grad_norm =: the largest global gradient norm; 0: no clipping */
  int64_t accum;        /* accum =: micro-batches a step's batch is split into (frontend/lower.c); 1: none */
  mlc_loc clip_loc, accum_loc;
  uint8_t param_dtype;  /* mlc_dtype; MLC_DT_INVALID: no precision() */
  uint8_t reduce_dtype;
  const char *shard;    /* "fsdp" or NULL */
  const char **shard_units; /* module-list names: "layers" */
  uint32_t nshard_units;
  mlc_loc loc;
} mlc_train_config;

/* How f32 matrix products run on targets with tensor cores, as PyTorch's
 * torch.set_float32_matmul_precision: tf32x3 (each operand split into a
 * TF32 high part and its TF32 residual, three products: about f32's
 * accuracy; the default), ieee (plain f32 FMAs), tf32 (one TF32 product).
 * Set by precision(f32_matmul=...) in a train block and --f32-matmul. */
typedef enum { MLC_F32MM_DEFAULT, MLC_F32MM_TF32X3, MLC_F32MM_IEEE, MLC_F32MM_TF32 } mlc_f32_matmul;

/* "tf32x3" (also "3xtf32"), "ieee", "tf32" -> the mode; MLC_F32MM_DEFAULT if none. */
mlc_f32_matmul mlc_f32_matmul_parse(const char *s);
const char *mlc_f32_matmul_name(mlc_f32_matmul m);

/* The choices that change emitted code, besides the model: filled by the
 * driver from its flags (and by a train block's precision(f32_matmul=)),
 * printed by --stats; the code they change keys every kernel cache.  Zero
 * is each one's default.  Codegen reads them here, never the environment. */
typedef struct {
  uint8_t f32_matmul;            /* --f32-matmul: mlc_f32_matmul */
  bool spirv_attention_tiled;    /* --spirv-attention=tiled: no cooperative-matrix attention variant (default
                                    coopmat: the forward and gradient on cooperative matrices as the variant
                                    for devices that have them, the tiled kernels their fallback) */
  bool spirv_emulate_coopmat;    /* --spirv-emulate-coopmat: the cooperative-matrix GEMM and attention
                                    forward with scalar FMAs in their place, on any device (their check
                                    on lavapipe) */
  bool spirv_coopmat_nv;         /* --spirv-coopmat=nv: cooperative-matrix modules in their validated
                                    SPV_NV_cooperative_matrix form alone (default khr: translated from
                                    it, codegen/spirv/khr.h, bf16 on bf16 matrices) */
  bool spirv_rescale_always;     /* --spirv-attention-rescale=always: that attention rescales its output at
                                    every block of keys (default lazy: when a row's max grew past 2^8) */
  int8_t spirv_attention_keys;   /* --spirv-attention-keys=32|64: the keys a block of the cooperative-matrix
                                    attention forward (0: 32; 64 where shared memory allows, for measuring) */
  int16_t spirv_gemm_tile[6];    /* --spirv-gemm-tile=BMxBNxWMxWN[xBK[xSTAGES]] for the cooperative-matrix
                                    GEMM (all zero: its rule's) */
  int8_t cuda_gemv_ks;           /* --cuda-gemv-ks=1|2|4|8: the warps per output column of every linear of
                                    at most 4 rows (0: emit_gemm.c's rule; for measuring it) */
  int16_t cuda_gemm_tile[4];     /* --cuda-gemm-tile=BN,ST,OCC,LAG for every bf16/f16 wgmma GEMM (all
                                    zero: the tile table's; bench/gemm_tune.py measures with it) */
  int16_t cuda_sms;              /* --cuda-sms=N: the multiprocessors the CUDA kernels are sized for (the
                                    persistent kernels' grids, the GEMM tile rule's waves); 0: 132, an H100
                                    SXM's and an H200's (codegen/cuda/cuda_cc.h, cc_cuda_sms) */
  int64_t memory_budget;         /* --memory-budget (or the train block's memory_budget =): the bytes a
                                    training session may hold; the recompute pass recomputes cheap
                                    activations, then whole layers' forwards, in the backward to stay
                                    within it (0: no budget) */
  const char *cpu;               /* --cpu (cpu target): the LLVM CPU; NULL: native for run, bench and
                                    train, "baseline" (portable) for compile -o */
  const char *triple;            /* --triple (cpu target): the LLVM target triple; NULL: the host's */
  bool cpu_versions;             /* compile -o without --cpu, on x86-64: the artifact carries its kernels for
                                    x86-64-v3 and x86-64-v4 beside the x86-64-v2 baseline, and create runs the
                                    best build the machine has (function multiversioning) */
  uint8_t quant_bits;            /* --quantize int8|int4[:group=G][:asym][:scales=f32]: weight-only quantisation of the
                                    linear layers' weights (passes/quantize.c); 0: none */
  int32_t quant_group;           /* weights per scale along a row (default 128) */
  uint8_t quant_scheme;          /* MLC_QS_*: :asym a min per group beside the scale, unsigned codes (default
                                    symmetric); scales (and mins) bf16 unless :scales=f32 */
  uint8_t matmul;                /* --matmul (or a train block's precision(matmul=fp8, fp8_grad=)):
                                    mlc_matmul_mode, FP8 GEMMs for the train entry's linears (passes/fp8.c) */
  const char *fp8_keep;          /* --fp8-keep (or precision(fp8_keep=[...])): comma-separated scopes whose
                                    linears (the scope or below it) keep the compute dtype under fp8, in
                                    place of the default rule (the linear that feeds the loss); "" keeps
                                    none; NULL: the default */
} mlc_options;

/* How a train entry's linears multiply (issue 30).  FP8: forward and both
 * gradient GEMMs on e4m3 x and w, the output's gradient in e5m2 (torchao's
 * tensorwise recipe) or e4m3, each scaled per tensor by a power of two. */
typedef enum { MLC_MATMUL_DEFAULT, MLC_MATMUL_PLAIN, MLC_MATMUL_FP8, MLC_MATMUL_FP8_E4M3_GRAD } mlc_matmul_mode;
static inline bool mlc_matmul_is_fp8(int m) { return m == MLC_MATMUL_FP8 || m == MLC_MATMUL_FP8_E4M3_GRAD; }
/* "fp8", "fp8:grad=e5m2", "fp8:grad=e4m3", "plain" -> the mode; MLC_MATMUL_DEFAULT if none. */
mlc_matmul_mode mlc_matmul_parse(const char *s);
const char *mlc_matmul_name(mlc_matmul_mode m);

/* "10GB", "9.5GiB", "512MB", "14e9" (bytes) -> bytes; -1 if it is none. */
int64_t mlc_bytes_parse(const char *s);
/* bytes -> "14.16GB", "512.3MB", "4.1KB", "100B" (four digits; mlc_bytes_parse reads it back); returns buf. */
const char *mlc_bytes_str(char *buf, size_t n, double bytes);

/* Sets option NAME (a flag's name without its dashes) to VALUE (NULL for a
 * flag without one).  Returns false with a message in err when NAME is no
 * option or VALUE is not one of its values. */
bool mlc_options_set(mlc_options *o, const char *name, const char *value, char *err, size_t errn);
/* One line: every option and its value, as the flags spell them. */
void mlc_options_print(FILE *out, const mlc_options *o);

/* A value the recompute pass computes again in the backward, or a whole
 * segment (a layer's forward: nops > 0) (--stats lists them). */
typedef struct {
  mlc_op op;           /* a single value's op */
  mlc_type type;       /* a single value's type */
  const char *scope;   /* the value's scope, or the segment's ("layers.3") */
  uint32_t nops;       /* a segment: the nodes it runs again; 0: a single value */
  int64_t bytes;       /* what it no longer holds between the forward and the backward */
  double flops, moved; /* what computing it again costs */
} mlc_recomputed;

/* A linear of the train entry under --matmul=fp8 (passes/fp8.c), for --stats. */
typedef struct {
  const char *scope;
  int64_t m, n, k;
  const char *why; /* NULL: its three GEMMs run in FP8; else why it keeps the compute dtype */
} mlc_fp8_linear;

#define MLC_MAX_FUNCS 4
typedef struct {
  mlc_arena *arena;
  const char *name;     /* artifact name: the model module's name, lower-cased */
  mlc_loc name_loc;     /* that module's name in the source ({0}: none, e.g. ONNX) */
  mlc_param *params;
  uint32_t nparams, pcap;
  mlc_tie *ties;        /* state_dict names that share another parameter's tensor */
  uint32_t nties;
  mlc_func funcs[MLC_MAX_FUNCS];
  uint32_t nfuncs;
  mlc_train_config train;
  mlc_options opts;
  struct {
    int64_t budget, before, after; /* the train entry's planned total without and with them */
    double step_flops;             /* the train entry's FLOPs without them */
    mlc_recomputed *v;
    uint32_t n;
  } recompute; /* passes/recompute.c, when there is a memory budget */
  struct {
    mlc_fp8_linear *v;
    uint32_t n, cap;
  } fp8; /* passes/fp8.c, under --matmul=fp8 */
} mlc_program;

void mlc_program_init(mlc_program *p, mlc_arena *a);
/* The flags' options onto p's: all of them, but f32_matmul, matmul,
 * fp8_keep and memory_budget only where the flag was given (they override the train
 * block's). */
void mlc_options_apply(mlc_program *p, const mlc_options *flags);
mlc_func *mlc_program_add_func(mlc_program *p, const char *name);
uint32_t mlc_program_add_param(mlc_program *p, const mlc_param *prm);
/* Append a node; its inputs are copied into the arena.  The caller sets the
 * type (or runs mlc_infer_node). */
uint32_t mlc_func_add(mlc_program *p, mlc_func *f, mlc_op op, const uint32_t *in, uint32_t nin,
                      const mlc_attrs *a, mlc_loc loc, const char *scope);
void mlc_func_add_output(mlc_program *p, mlc_func *f, const char *name, uint32_t node);
/* Drops the nodes that no output depends on (inputs stay: they are the
 * signature), renumbering the rest in order. */
void mlc_func_compact(mlc_program *p, mlc_func *f);
/* Reorders f's nodes: the node at j is the one that was at order[j]
 * (a permutation that keeps every input before its users); inputs and
 * outputs follow their nodes. */
void mlc_func_permute(mlc_program *p, mlc_func *f, const uint32_t *order);
/* For a pass that rebuilds f: returns f as it is and leaves it with no
 * nodes, inputs or outputs (its name stays), to be added to again. */
mlc_func mlc_func_take(mlc_func *f);
/* Appends a copy of node n (of another function) with inputs `in`, its type
 * as it was; an INPUT also joins f's signature. */
uint32_t mlc_func_copy_node(mlc_program *p, mlc_func *f, const mlc_node *n, const uint32_t *in);

/* Shape and dtype rules (ir/shape.c).  Computes n's type from its inputs'
 * types and its attributes.  For ops whose result type is given by the
 * builder (input, param, const, cast, reshape), checks it instead.  On
 * failure writes a one-line message to err and returns false. */
bool mlc_infer_type(const mlc_program *p, const mlc_func *f, const mlc_node *n, mlc_type *out,
                    char *err, size_t errn);
/* The iteration space of an elementwise node with up to MLC_EW_MAX_IN
 * inputs (numpy
 * broadcasting): dims[0..r) and, per operand (0 the output, 1.. the
 * inputs), element strides over them, 0 along a broadcast dimension.  Size-1
 * dimensions are dropped and neighbours merged where every operand is
 * contiguous across them, so a same-shape add has r = 1 and
 * x[b, s, d] + bias[d] has r = 2.  Returns r (0 for a single element). */
#define MLC_EW_MAX_IN 3 /* where(cond, a, b) */
int mlc_ew_layout(const mlc_func *f, const mlc_node *n, int64_t dims[MLC_MAX_RANK],
                  int64_t st[MLC_EW_MAX_IN + 1][MLC_MAX_RANK]);
/* Whether node i is a concat whose pieces memplan placed inside it, each
 * at its offset (FSDP's packed gradients, passes/memplan.c): it copies
 * nothing and has no kernel.  Read from f->offset (false before memplan). */
bool mlc_node_in_place(const mlc_func *f, uint32_t i);
/* An op on a sharded flat parameter (the fsdp pass's cast of a shard, the
 * optimizer's update of one), the cast of a reduce-scatter's result to f32
 * (reduce=bf16 or f16), or a mul of either (the fsdp pass's clipping:
 * squares, scaling): each rank runs it on its own rows only. */
bool mlc_node_sharded(const mlc_program *p, const mlc_func *f, const mlc_node *n);
/* An optimizer update (it writes its parameter and state in place): adamw, sgd, or a group of either. */
static inline bool mlc_op_is_update(int op) {
  return op == MLC_OP_ADAMW || op == MLC_OP_SGD || op == MLC_OP_ADAMW_MULTI || op == MLC_OP_SGD_MULTI;
}
/* An update's inputs: *per a parameter (adamw: param, grad, m, v; sgd:
 * param, grad, momentum buffer; adamw_multi and sgd_multi then the
 * parameter's 16-bit shadow, MLC_ROLE_SHADOW, which they write beside it,
 * or the parameter itself where it has none), then *tail shared scalars
 * (adamw: the step and the learning rate; sgd: the learning rate).  A
 * single update is one parameter's worth; the multi ops repeat the first
 * part. */
static inline void mlc_update_layout(int op, uint32_t *per, uint32_t *tail) {
  bool adamw = op == MLC_OP_ADAMW || op == MLC_OP_ADAMW_MULTI, multi = op == MLC_OP_ADAMW_MULTI || op == MLC_OP_SGD_MULTI;
  *per = (adamw ? 4 : 3) + multi;
  *tail = adamw ? 2 : 1;
}
/* FLOPs and bytes moved by one node, for --stats and the roofline. */
void mlc_node_cost(const mlc_func *f, const mlc_node *n, double *flops, double *bytes);

/* Text printer (ir/print.c): stable output for golden tests. */
void mlc_print_program(FILE *out, const mlc_program *p);
void mlc_print_func(FILE *out, const mlc_program *p, const mlc_func *f);

/* Verifier (ir/verify.c): structural invariants.  A failure is a compiler
 * bug, so it is reported as an internal error naming the pass that broke
 * it; returns false and prints to `out` instead of aborting when asked. */
bool mlc_verify_program(const mlc_program *p, FILE *out, const char *after_pass);

/* Structural hash (ir/hash.c) of a group of nodes: op, attributes, types,
 * and the wiring inside the group, but not names, scopes or locations, so
 * the same layer at a different depth hashes the same.  Inputs from outside
 * the group count by their type and position. */
uint64_t mlc_hash_nodes(const mlc_program *p, const mlc_func *f, const uint32_t *nodes, uint32_t n);

#endif
