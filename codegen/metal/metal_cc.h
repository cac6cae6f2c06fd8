/* The MSL dialect's own pieces of the C-like emitter (codegen/cstyle/cc.h):
 * its GEMM and attention emitters on simdgroup_matrix and SIMT lanes, and
 * their device code. */
#ifndef MLC_CODEGEN_METAL_CC_H
#define MLC_CODEGEN_METAL_CC_H

#include "codegen/cstyle/cc.h"

bool cc_emit_gemm_msl(cc *c);      /* matmul, linear, matmul_tn, fused groups headed by one (emit_gemm.c) */
bool cc_emit_qlinear_msl(cc *c);   /* qlinear, --quantize's (emit_gemm.c) */
bool cc_emit_attention_msl(cc *c); /* attention, attention_grad (emit_attention.c) */
bool cc_emit_attention_kv_msl(cc *c); /* attention_kv, a decode block's (emit_attention.c) */
/* Whether attention_kv's kernel takes heads of dim d; else why not. */
bool cc_attn_kv_fits_msl(int64_t d, char *why, size_t whyn);

/* The device helpers they instantiate, embedded from gemm.metal and
 * attention.metal at build time. */
extern const char cc_gemm_prelude_msl[];
extern const char cc_attention_prelude_msl[];

#endif
