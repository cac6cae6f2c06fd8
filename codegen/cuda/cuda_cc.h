/* The CUDA dialect's own pieces of the C-like emitter (codegen/cstyle/cc.h):
 * its GEMM and attention emitters, which run on the tensor cores, the TMA
 * tensor maps they take, and their device code. */
#ifndef MLC_CODEGEN_CUDA_CC_H
#define MLC_CODEGEN_CUDA_CC_H

#include "codegen/cstyle/cc.h"
#include "codegen/cuda/cuda.h"

bool cc_emit_gemm(cc *c);      /* matmul, linear, matmul_tn, fused groups headed by one (emit_gemm.c) */
bool cc_emit_attention(cc *c); /* attention, attention_grad, attention_save, attention_grad_saved */
bool cc_emit_attention_kv(cc *c); /* attention_kv (emit_attention.c) */
bool cc_emit_qlinear(cc *c);      /* qlinear, --quantize's (emit_qlinear.c) */
bool cc_emit_quant(cc *c);        /* quant: x to FP8 under its amax's scale (emit_quant.c) */
bool cc_emit_scaled_mm(cc *c);    /* scaled_mm: the FP8 GEMM (emit_gemm.c) */
/* The multiprocessors the kernels are sized for (--cuda-sms; else an H100
 * SXM's and an H200's 132): the persistent kernels' grids (a block each),
 * the GEMM tile rule's waves.  A GPU with fewer runs the same kernels with
 * a second round of blocks (--cuda-sms N avoids it); one with more leaves
 * its extra multiprocessors idle in those kernels. */
#define MLC_CUDA_SMS 132
static inline int64_t cc_cuda_sms(const cc *c) { return c->p->opts.cuda_sms ? c->p->opts.cuda_sms : MLC_CUDA_SMS; }
/* A persistent or grid-stride kernel's grid: `items` blocks, at most
 * per_sm a multiprocessor. */
static inline uint64_t cc_cuda_grid(const cc *c, int64_t items, int64_t per_sm) {
  int64_t most = cc_cuda_sms(c) * per_sm;
  return (uint64_t)(items < most ? items : most);
}
/* Whether mlc_attn_kv takes heads of dim d; else why not. */
bool cc_attn_kv_fits(int64_t d, char *why, size_t whyn);

/* Adds a tensor map at `offset` bytes into input `arg` (or the scratch
 * block: MLC_CUDA_TMAP_SCRATCH) and returns its parameter's name; the
 * launches begun after it declare it (those before ignore it): a 1- to
 * 5-dimensional view (dims innermost first, strides in bytes of dims 1..)
 * of elem_bytes-byte elements, boxes of box[], swizzle 0 or 128 (tma.c). */
const char *cc_tmap(cc *c, uint32_t arg, uint64_t offset, uint32_t rank, uint32_t elem_bytes, const uint64_t *dim,
                    const uint64_t *stride, const uint32_t *box, uint32_t swizzle);

/* The device helpers the GEMM and attention emitters instantiate, embedded
 * from gemm.cuh and attention.cuh at build time. */
extern const char cc_gemm_prelude[];
extern const char cc_attention_prelude[];

#endif
