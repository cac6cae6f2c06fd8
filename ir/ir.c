/* IR construction: dtypes, the op table generated from ops.def, and the
 * append-only builders for programs and functions. */
#include "ir/ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct { const char *name; int size; bool is_float; } dtypes[MLC_DT_COUNT] = {
  [MLC_DT_INVALID] = {"?", 0, false},
#define X(e, n, b, f) [MLC_DT_##e] = {n, b, f},
  MLC_DTYPES(X)
#undef X
};

const char *mlc_dtype_name(mlc_dtype t) { return t < MLC_DT_COUNT ? dtypes[t].name : "?"; }
int mlc_dtype_size(mlc_dtype t) { return t < MLC_DT_COUNT ? dtypes[t].size : 0; }
bool mlc_dtype_is_float(mlc_dtype t) { return t < MLC_DT_COUNT && dtypes[t].is_float; }

int mlc_f8_scale_exp(float amax, float fmax) {
  float r = fmax / (amax > 1e-12f ? amax : 1e-12f); /* a normal f32 from 2^-126 up for every finite amax */
  uint32_t u;
  memcpy(&u, &r, sizeof u);
  return (int)((u >> 23) & 0xff) - 127;
}

mlc_dtype mlc_dtype_from_name(const char *s, size_t n) {
  for (int t = 1; t < MLC_DT_COUNT; t++)
    if (strlen(dtypes[t].name) == n && !memcmp(dtypes[t].name, s, n)) return (mlc_dtype)t;
  return MLC_DT_INVALID;
}

int64_t mlc_type_numel(const mlc_type *t) {
  int64_t n = 1;
  for (int i = 0; i < t->rank; i++) n *= t->dim[i];
  return n;
}

void mlc_type_strides(const mlc_type *t, int64_t *stride) {
  int64_t s = 1;
  for (int i = t->rank; i-- > 0;) {
    stride[i] = s;
    s *= t->dim[i];
  }
}

int mlc_ew_layout(const mlc_func *f, const mlc_node *n, int64_t dims[MLC_MAX_RANK],
                  int64_t st[MLC_EW_MAX_IN + 1][MLC_MAX_RANK]) {
  const mlc_type *ot = &n->type;
  int r = ot->rank, nin = n->nin;
  MLC_ASSERT(nin >= 1 && nin <= MLC_EW_MAX_IN);
  memset(st, 0, (MLC_EW_MAX_IN + 1) * sizeof *st);
  mlc_type_strides(ot, st[0]);
  for (int k = 0; k < r; k++) dims[k] = ot->dim[k];
  for (int i = 0; i < nin; i++) {
    const mlc_type *it = &f->nodes[n->in[i]].type;
    int64_t is[MLC_MAX_RANK];
    mlc_type_strides(it, is);
    for (int k = 0; k < r; k++) {
      int ik = k - (r - it->rank);
      st[i + 1][k] = ik >= 0 && it->dim[ik] != 1 ? is[ik] : 0;
    }
  }
  /* Drop size-1 dimensions, then merge contiguous neighbours. */
  int m = 0;
  for (int k = 0; k < r; k++) {
    if (dims[k] == 1) continue;
    dims[m] = dims[k];
    for (int o = 0; o <= nin; o++) st[o][m] = st[o][k];
    m++;
  }
  r = m;
  m = 0;
  for (int k = 0; k < r; k++) {
    bool merge = m > 0;
    for (int o = 0; merge && o <= nin; o++) merge = st[o][m - 1] == st[o][k] * dims[k];
    if (merge) {
      dims[m - 1] *= dims[k];
      for (int o = 0; o <= nin; o++) st[o][m - 1] = st[o][k];
    } else {
      dims[m] = dims[k];
      for (int o = 0; o <= nin; o++) st[o][m] = st[o][k];
      m++;
    }
  }
  return m;
}

bool mlc_type_eq(const mlc_type *a, const mlc_type *b) {
  if (a->dtype != b->dtype || a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->dim[i] != b->dim[i]) return false;
  return true;
}

char *mlc_type_str(const mlc_type *t, char *buf, size_t n) {
  size_t k = (size_t)snprintf(buf, n, "%s[", mlc_dtype_name(t->dtype));
  for (int i = 0; i < t->rank && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)t->dim[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
  return buf;
}

#define EW MLC_F_EW
#define RED MLC_F_RED
#define FUSE MLC_F_FUSE
#define MM MLC_F_MM
#define VIEW MLC_F_VIEW
#define LEAF MLC_F_LEAF
#define COLL MLC_F_COLL
#define CALL MLC_F_CALL
#define ARG MLC_F_ARG
#define A_NAME MLC_A_NAME
#define A_PARAM MLC_A_PARAM
#define A_VALUE MLC_A_VALUE
#define A_DTYPE MLC_A_DTYPE
#define A_AXIS MLC_A_AXIS
#define A_AXIS2 MLC_A_AXIS2
#define A_KEEPDIM MLC_A_KEEPDIM
#define A_SHAPE MLC_A_SHAPE
#define A_RANGE MLC_A_RANGE
#define A_EPS MLC_A_EPS
#define A_CAUSAL MLC_A_CAUSAL
#define A_SCALE MLC_A_SCALE
#define A_QUANT MLC_A_QUANT
#define A_RNG MLC_A_RNG
const mlc_opinfo mlc_ops[MLC_OP_COUNT] = {
#define X(e, name, arity, flags, attrs, shape, cost, vjp) [MLC_OP_##e] = {name, arity, flags, attrs},
#include "ir/ops.def"
#undef X
};

void mlc_program_init(mlc_program *p, mlc_arena *a) {
  memset(p, 0, sizeof *p);
  p->arena = a;
  p->name = "model";
}

mlc_f32_matmul mlc_f32_matmul_parse(const char *s) {
  if (!strcmp(s, "tf32x3") || !strcmp(s, "3xtf32")) return MLC_F32MM_TF32X3;
  if (!strcmp(s, "ieee")) return MLC_F32MM_IEEE;
  if (!strcmp(s, "tf32")) return MLC_F32MM_TF32;
  return MLC_F32MM_DEFAULT;
}

const char *mlc_f32_matmul_name(mlc_f32_matmul m) {
  switch (m) {
  case MLC_F32MM_IEEE: return "ieee";
  case MLC_F32MM_TF32: return "tf32";
  default: return "tf32x3";
  }
}

mlc_matmul_mode mlc_matmul_parse(const char *s) {
  if (!strcmp(s, "fp8") || !strcmp(s, "fp8:grad=e5m2")) return MLC_MATMUL_FP8;
  if (!strcmp(s, "fp8:grad=e4m3")) return MLC_MATMUL_FP8_E4M3_GRAD;
  if (!strcmp(s, "plain")) return MLC_MATMUL_PLAIN;
  return MLC_MATMUL_DEFAULT;
}

const char *mlc_matmul_name(mlc_matmul_mode m) {
  switch (m) {
  case MLC_MATMUL_FP8: return "fp8";
  case MLC_MATMUL_FP8_E4M3_GRAD: return "fp8:grad=e4m3";
  default: return "plain";
  }
}

bool mlc_options_set(mlc_options *o, const char *name, const char *value, char *err, size_t errn) {
  const char *v = value ? value : "";
  if (!strcmp(name, "f32-matmul")) {
    o->f32_matmul = (uint8_t)mlc_f32_matmul_parse(v);
    if (!o->f32_matmul) snprintf(err, errn, "--f32-matmul %s: expected tf32x3 (or 3xtf32), ieee or tf32", v);
    return o->f32_matmul != MLC_F32MM_DEFAULT;
  }
  if (!strcmp(name, "matmul")) {
    o->matmul = (uint8_t)mlc_matmul_parse(v);
    if (!o->matmul) snprintf(err, errn, "--matmul %s: expected fp8, fp8:grad=e4m3 (or e5m2, fp8's own) or plain", v);
    return o->matmul != MLC_MATMUL_DEFAULT;
  }
  if (!strcmp(name, "fp8-keep")) {
    o->fp8_keep = v; /* "" keeps none */
    return true;
  }
  if (!strcmp(name, "spirv-attention")) {
    bool ok = !strcmp(v, "coopmat") || !strcmp(v, "tiled");
    if (!ok) snprintf(err, errn, "--spirv-attention %s: expected coopmat (the default) or tiled", v);
    o->spirv_attention_tiled = !strcmp(v, "tiled");
    return ok;
  }
  if (!strcmp(name, "spirv-emulate-coopmat")) {
    if (value) snprintf(err, errn, "--spirv-emulate-coopmat takes no value");
    o->spirv_emulate_coopmat = true;
    return !value;
  }
  if (!strcmp(name, "spirv-coopmat")) {
    bool ok = !strcmp(v, "nv") || !strcmp(v, "khr");
    if (!ok) snprintf(err, errn, "--spirv-coopmat %s: expected khr (the default) or nv", v);
    o->spirv_coopmat_nv = !strcmp(v, "nv");
    return ok;
  }
  if (!strcmp(name, "spirv-attention-rescale")) {
    bool ok = !strcmp(v, "always") || !strcmp(v, "lazy");
    if (!ok) snprintf(err, errn, "--spirv-attention-rescale %s: expected lazy (the default) or always", v);
    o->spirv_rescale_always = !strcmp(v, "always");
    return ok;
  }
  if (!strcmp(name, "spirv-attention-keys")) {
    bool ok = !strcmp(v, "32") || !strcmp(v, "64");
    if (!ok) snprintf(err, errn, "--spirv-attention-keys %s: expected 32 (the default) or 64 (where shared memory allows)", v);
    o->spirv_attention_keys = (int8_t)(ok ? atoi(v) : 0);
    return ok;
  }
  if (!strcmp(name, "spirv-gemm-tile")) {
    int t[6] = {0}, n = sscanf(v, "%dx%dx%dx%dx%dx%d", &t[0], &t[1], &t[2], &t[3], &t[4], &t[5]);
    bool ok = n >= 4;
    for (int i = 0; ok && i < n; i++) ok = t[i] > 0 && t[i] <= 4096;
    if (!ok) {
      snprintf(err, errn, "--spirv-gemm-tile %s: expected BMxBNxWMxWN[xBK[xSTAGES]], e.g. 128x128x64x32", v);
      return false;
    }
    for (int i = 0; i < 6; i++) o->spirv_gemm_tile[i] = (int16_t)(i < n ? t[i] : 0);
    return true;
  }
  if (!strcmp(name, "cuda-gemv-ks")) {
    int ks, n;
    if (sscanf(v, "%d%n", &ks, &n) != 1 || v[n] || (ks != 1 && ks != 2 && ks != 4 && ks != 8)) {
      snprintf(err, errn, "--cuda-gemv-ks %s: expected 1, 2, 4 or 8 warps per output column", v);
      return false;
    }
    o->cuda_gemv_ks = (int8_t)ks;
    return true;
  }
  if (!strcmp(name, "cuda-sms")) {
    int sms, n;
    if (sscanf(v, "%d%n", &sms, &n) != 1 || v[n] || sms < 1 || sms > 1024) {
      snprintf(err, errn, "--cuda-sms %s: expected the GPU's multiprocessors, 1 to 1024 (132 on an H100 SXM or an "
               "H200, 114 on an H100 PCIe; nvidia-smi -q or deviceQuery says)", v);
      return false;
    }
    o->cuda_sms = (int16_t)sms;
    return true;
  }
  if (!strcmp(name, "cuda-gemm-tile")) {
    int t[4] = {0}, n;
    /* the persistent kernels, ST stages: pp (ping-pong, 128 x 128 a consumer) or co (cooperative, 128 x 256) */
    char kind[3] = {0};
    if (sscanf(v, "%2[a-z],%d%n", kind, &t[1], &n) == 2 && !v[n] &&
        (!strcmp(kind, "pp") || !strcmp(kind, "co") || !strcmp(kind, "cs"))) {
      bool co = kind[0] == 'c';
      if (t[1] < 2 || t[1] > (co ? 4 : 6)) { /* co: 48 KiB a stage and 33 or 66 KiB of staging rows */
        snprintf(err, errn, "--cuda-gemm-tile %s: %s takes 2 to %d stages (%d KiB each)", v, kind, co ? 4 : 6, co ? 48 : 32);
        return false;
      }
      o->cuda_gemm_tile[0] = co ? -256 : -128, o->cuda_gemm_tile[1] = (int16_t)t[1];
      o->cuda_gemm_tile[2] = !strcmp(kind, "cs"), o->cuda_gemm_tile[3] = 0; /* cs: co with its stores by TMA */
      return true;
    }
    n = sscanf(v, "%d,%d,%d,%d", &t[0], &t[1], &t[2], &t[3]);
    bool ok = n == 4 && (t[0] == 128 || t[0] == 256) && t[1] >= 3 && t[1] <= 8 && t[2] >= 1 && t[2] <= 2 &&
              t[3] >= 0 && t[3] <= 1 && (t[0] == 128 ? 32 : 48) * t[1] * t[2] <= 224; /* KiB of stages a multiprocessor */
    if (!ok) {
      snprintf(err, errn, "--cuda-gemm-tile %s: expected BN,ST,OCC,LAG: BN 128 or 256, ST 3..8 stages, OCC 1 or 2 "
               "blocks a multiprocessor, LAG 0 or 1, with the stages of OCC blocks in 224 KiB (e.g. 256,4,1,1); or "
               "pp,ST, co,ST or cs,ST for the persistent kernels", v);
      return false;
    }
    for (int i = 0; i < 4; i++) o->cuda_gemm_tile[i] = (int16_t)t[i];
    return true;
  }
  if (!strcmp(name, "cpu") || !strcmp(name, "triple")) { /* checked by the code generator, which knows LLVM's names */
    bool cpu = !strcmp(name, "cpu");
    if (!*v) {
      snprintf(err, errn, "--%s needs a value (%s)", name, cpu ? "native, baseline or an LLVM CPU name" : "an LLVM target triple");
      return false;
    }
    if (cpu) o->cpu = value;
    else o->triple = value;
    return true;
  }
  if (!strcmp(name, "quantize")) { /* int8|int4, then :group=G, :asym and :scales=bf16|f32, each at most once, in any order */
    int bits = !strncmp(v, "int8", 4) ? 8 : !strncmp(v, "int4", 4) ? 4 : 0, group = 128, n = 0;
    bool ok = bits, grouped = false, asym = false, scaled = false, f32 = false;
    for (const char *rest = v + (bits ? 4 : 0); ok && *rest; rest += n) {
      int s = !strncmp(rest, ":scales=f32", 11) ? 11 : !strncmp(rest, ":scales=bf16", 12) ? 12 : 0; /* its length */
      n = 0;
      if (!strncmp(rest, ":asym", 5) && (!rest[5] || rest[5] == ':') && !asym) asym = true, n = 5;
      else if (s && (!rest[s] || rest[s] == ':') && !scaled) scaled = true, f32 = s == 11, n = s;
      else if (!grouped && sscanf(rest, ":group=%d%n", &group, &n) == 1 && (!rest[n] || rest[n] == ':')) grouped = true;
      else ok = false;
    }
    if (!ok) {
      snprintf(err, errn, "--quantize %s: expected int8 or int4, optionally with :group=G, :asym and :scales=bf16|f32 "
               "(int4:group=64, int4:asym, int8:group=64:asym:scales=f32)", v);
      return false;
    }
    if (group < 8 || group > 65536 || group % 8) {
      snprintf(err, errn, "--quantize %s: the group must be a multiple of 8 from 8 to 65536", v);
      return false;
    }
    o->quant_bits = (uint8_t)bits, o->quant_group = group;
    o->quant_scheme = (uint8_t)((asym ? MLC_QS_ASYM : 0) | (f32 ? 0 : MLC_QS_BF16));
    return true;
  }
  if (!strcmp(name, "memory-budget")) {
    o->memory_budget = mlc_bytes_parse(v);
    if (o->memory_budget <= 0) snprintf(err, errn, "--memory-budget %s: expected a size in bytes, such as 14GB, 12.5GiB or 9e9", v);
    return o->memory_budget > 0;
  }
  snprintf(err, errn, "--%s: no such option", name);
  return false;
}

const char *mlc_bytes_str(char *buf, size_t n, double bytes) {
  const char *unit = bytes >= 1e9 ? "GB" : bytes >= 1e6 ? "MB" : bytes >= 1e3 ? "KB" : "B";
  double scale = bytes >= 1e9 ? 1e9 : bytes >= 1e6 ? 1e6 : bytes >= 1e3 ? 1e3 : 1;
  snprintf(buf, n, "%.4g%s", bytes / scale, unit);
  return buf;
}

int64_t mlc_bytes_parse(const char *s) {
  static const struct {
    const char *unit;
    double scale;
  } units[] = {{"", 1}, {"B", 1}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
               {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}};
  char *end;
  double v = strtod(s, &end);
  if (end == s || !(v > 0)) return -1;
  for (size_t i = 0; i < sizeof units / sizeof *units; i++)
    if (!strcmp(end, units[i].unit)) {
      double b = v * units[i].scale;
      return b >= 1 && b < 9.2e18 ? (int64_t)b : -1;
    }
  return -1;
}

void mlc_options_apply(mlc_program *p, const mlc_options *flags) {
  uint8_t mm = p->opts.f32_matmul, matmul = p->opts.matmul;
  int64_t budget = p->opts.memory_budget;
  const char *keep = p->opts.fp8_keep;
  p->opts = *flags;
  if (!flags->fp8_keep) p->opts.fp8_keep = keep;
  if (!flags->f32_matmul) p->opts.f32_matmul = mm;
  if (!flags->matmul) p->opts.matmul = matmul;
  if (!flags->memory_budget) p->opts.memory_budget = budget;
}

void mlc_options_print(FILE *out, const mlc_options *o) {
  fprintf(out, "options: --f32-matmul=%s --spirv-attention=%s%s%s --spirv-attention-rescale=%s --spirv-gemm-tile=",
          mlc_f32_matmul_name((mlc_f32_matmul)o->f32_matmul), o->spirv_attention_tiled ? "tiled" : "coopmat",
          o->spirv_emulate_coopmat ? " --spirv-emulate-coopmat" : "", o->spirv_coopmat_nv ? " --spirv-coopmat=nv" : "",
          o->spirv_rescale_always ? "always" : "lazy");
  if (!o->spirv_gemm_tile[0]) fprintf(out, "auto");
  for (int i = 0; i < 6 && o->spirv_gemm_tile[i]; i++) fprintf(out, "%s%d", i ? "x" : "", o->spirv_gemm_tile[i]);
  if (o->spirv_attention_keys) fprintf(out, " --spirv-attention-keys=%d", o->spirv_attention_keys);
  if (o->cuda_gemm_tile[0] < 0)
    fprintf(out, " --cuda-gemm-tile=%s,%d",
            o->cuda_gemm_tile[0] == -128 ? "pp" : o->cuda_gemm_tile[2] ? "cs" : "co", o->cuda_gemm_tile[1]);
  else if (o->cuda_gemm_tile[0])
    fprintf(out, " --cuda-gemm-tile=%d,%d,%d,%d", o->cuda_gemm_tile[0], o->cuda_gemm_tile[1], o->cuda_gemm_tile[2],
            o->cuda_gemm_tile[3]);
  if (o->cuda_gemv_ks) fprintf(out, " --cuda-gemv-ks=%d", o->cuda_gemv_ks);
  if (o->cuda_sms) fprintf(out, " --cuda-sms=%d", o->cuda_sms);
  char b[32];
  if (o->memory_budget) fprintf(out, " --memory-budget=%s", mlc_bytes_str(b, sizeof b, (double)o->memory_budget));
  if (o->cpu) fprintf(out, " --cpu=%s", o->cpu);
  if (o->triple) fprintf(out, " --triple=%s", o->triple);
  if (o->quant_bits)
    fprintf(out, " --quantize=int%d:group=%d%s", o->quant_bits, o->quant_group, mlc_quant_scheme_str(o->quant_scheme));
  if (mlc_matmul_is_fp8(o->matmul)) fprintf(out, " --matmul=%s", mlc_matmul_name((mlc_matmul_mode)o->matmul));
  if (mlc_matmul_is_fp8(o->matmul) && o->fp8_keep) fprintf(out, " --fp8-keep=%s", o->fp8_keep);
  fputc('\n', out);
}

mlc_func *mlc_program_add_func(mlc_program *p, const char *name) {
  MLC_ASSERT(p->nfuncs < MLC_MAX_FUNCS);
  mlc_func *f = &p->funcs[p->nfuncs++];
  memset(f, 0, sizeof *f);
  f->name = name;
  return f;
}

uint32_t mlc_program_add_param(mlc_program *p, const mlc_param *prm) {
  if (p->nparams == p->pcap) {
    uint32_t cap = p->pcap ? p->pcap * 2 : 64;
    p->params = mlc_arena_grow(p->arena, p->params, p->nparams * sizeof *p->params, cap * sizeof *p->params);
    p->pcap = cap;
  }
  p->params[p->nparams] = *prm;
  return p->nparams++;
}

uint32_t mlc_func_add(mlc_program *p, mlc_func *f, mlc_op op, const uint32_t *in, uint32_t nin,
                      const mlc_attrs *a, mlc_loc loc, const char *scope) {
  if (f->n == f->cap) {
    uint32_t cap = f->cap ? f->cap * 2 : 256;
    f->nodes = mlc_arena_grow(p->arena, f->nodes, f->n * sizeof *f->nodes, cap * sizeof *f->nodes);
    f->cap = cap;
  }
  MLC_ASSERT(nin <= UINT16_MAX);
  mlc_node *n = &f->nodes[f->n];
  memset(n, 0, sizeof *n);
  n->op = (uint16_t)op;
  n->nin = (uint16_t)nin;
  if (nin) {
    n->in = mlc_arena_alloc(p->arena, nin * sizeof *n->in);
    memcpy(n->in, in, nin * sizeof *n->in);
  }
  if (a) n->a = *a;
  n->loc = loc;
  n->scope = scope ? scope : "";
  return f->n++;
}

void mlc_func_add_output(mlc_program *p, mlc_func *f, const char *name, uint32_t node) {
  f->outputs = mlc_arena_grow(p->arena, f->outputs, f->noutputs * sizeof *f->outputs,
                              (f->noutputs + 1) * sizeof *f->outputs);
  f->outputs[f->noutputs++] = (mlc_output){name, node};
}

/* A reduce-scatter's result (this rank's rows of a gradient), or its cast
 * to f32 (fsdp's reduce=bf16 or f16). */
static bool reduced_shard(const mlc_func *f, uint32_t v) {
  const mlc_node *x = &f->nodes[v];
  return x->op == MLC_OP_REDUCE_SCATTER || (x->op == MLC_OP_CAST && f->nodes[x->in[0]].op == MLC_OP_REDUCE_SCATTER);
}

bool mlc_node_in_place(const mlc_func *f, uint32_t i) {
  const mlc_node *n = &f->nodes[i];
  if (n->op != MLC_OP_CONCAT || n->a.axis != 0 || !n->nin || !f->offset) return false;
  int64_t at = f->offset[i];
  for (uint32_t k = 0; k < n->nin; k++) {
    const mlc_node *x = &f->nodes[n->in[k]];
    if (x->op == MLC_OP_PARAM || f->offset[n->in[k]] != at) return false;
    at += (int64_t)mlc_type_numel(&x->type) * mlc_dtype_size(x->type.dtype);
  }
  return true;
}

bool mlc_node_sharded(const mlc_program *p, const mlc_func *f, const mlc_node *n) {
  if (n->op == MLC_OP_MUL) return reduced_shard(f, n->in[0]); /* fsdp's clipping of a gradient shard */
  if (n->op == MLC_OP_CAST && f->nodes[n->in[0]].op == MLC_OP_REDUCE_SCATTER) return true; /* reduce=bf16's f32 shard */
  if (n->op != MLC_OP_CAST && n->op != MLC_OP_ADAMW && n->op != MLC_OP_SGD) return false;
  const mlc_node *x = &f->nodes[n->in[0]];
  return x->op == MLC_OP_PARAM && p->params[x->a.param].sharded;
}

/* Drops the nodes that no output depends on (inputs stay: they are the
 * signature), renumbering the rest in order. */
void mlc_func_compact(mlc_program *p, mlc_func *f) {
  bool *live = mlc_arena_alloc(p->arena, (f->n + 1) * sizeof *live);
  uint32_t *map = mlc_arena_alloc(p->arena, (f->n + 1) * sizeof *map);
  memset(live, 0, (f->n + 1) * sizeof *live);
  for (uint32_t i = 0; i < f->noutputs; i++) live[f->outputs[i].node] = true;
  for (uint32_t i = 0; i < f->inputs.n; i++) live[f->inputs.v[i]] = true;
  for (uint32_t i = f->n; i-- > 0;)
    if (live[i])
      for (uint32_t k = 0; k < f->nodes[i].nin; k++) live[f->nodes[i].in[k]] = true;
  uint32_t m = 0;
  for (uint32_t i = 0; i < f->n; i++) {
    if (!live[i]) continue;
    map[i] = m;
    mlc_node n = f->nodes[i];
    for (uint32_t k = 0; k < n.nin; k++) n.in[k] = map[n.in[k]]; /* inputs come first: mapped already */
    f->nodes[m++] = n;
  }
  f->n = m;
  for (uint32_t i = 0; i < f->inputs.n; i++) f->inputs.v[i] = map[f->inputs.v[i]];
  for (uint32_t i = 0; i < f->noutputs; i++) f->outputs[i].node = map[f->outputs[i].node];
}

void mlc_func_permute(mlc_program *p, mlc_func *f, const uint32_t *order) {
  uint32_t *map = mlc_arena_alloc(p->arena, (f->n + 1) * sizeof *map);
  mlc_node *nodes = mlc_arena_alloc(p->arena, (f->cap + 1) * sizeof *nodes);
  for (uint32_t j = 0; j < f->n; j++) map[order[j]] = j;
  for (uint32_t j = 0; j < f->n; j++) {
    nodes[j] = f->nodes[order[j]];
    for (uint32_t k = 0; k < nodes[j].nin; k++) {
      nodes[j].in[k] = map[nodes[j].in[k]];
      MLC_ASSERT(nodes[j].in[k] < j);
    }
  }
  f->nodes = nodes;
  for (uint32_t i = 0; i < f->inputs.n; i++) f->inputs.v[i] = map[f->inputs.v[i]];
  for (uint32_t i = 0; i < f->noutputs; i++) f->outputs[i].node = map[f->outputs[i].node];
}

mlc_func mlc_func_take(mlc_func *f) {
  mlc_func old = *f;
  f->nodes = NULL;
  f->n = f->cap = 0;
  f->inputs = (mlc_u32vec){0};
  f->outputs = NULL;
  f->noutputs = 0;
  return old;
}

uint32_t mlc_func_copy_node(mlc_program *p, mlc_func *f, const mlc_node *n, const uint32_t *in) {
  uint32_t id = mlc_func_add(p, f, (mlc_op)n->op, in, n->nin, &n->a, n->loc, n->scope);
  f->nodes[id].type = n->type;
  if (n->op == MLC_OP_INPUT) mlc_u32vec_push(p->arena, &f->inputs, id);
  return id;
}
