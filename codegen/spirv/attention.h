/* Attention on SPIR-V, inside codegen/spirv: what the three kernels share.
 * emit_attention.c picks one per node (sv_emit_attention); each algorithm
 * has its file:
 *   attention_plain.c  a thread per row with rows in private arrays (any d);
 *   attention_tiled.c  the tiled kernels, rows through shared memory (d <= 128);
 *   attention_coop.c   the cooperative-matrix forward and gradient of 16-bit
 *                      heads.
 * The overview of the algorithms is at the top of emit_attention.c. */
#ifndef MLC_CODEGEN_SPIRV_ATTENTION_H
#define MLC_CODEGEN_SPIRV_ATTENTION_H

#include <stdbool.h>

#include "codegen/spirv/emit.h"

/* One attention node as the kernels see it: q [BH, SQ, D], k [BH, SK, D],
 * v [BH, SK, DV], the storage dtype of q, k and v. */
typedef struct {
  sv *s;
  sb *b;
  int dt;
  int64_t BH, SQ, SK, D, DV;
  bool causal;
  float scale;
  bool kv;       /* attention_kv: k, v the chunk's (bindings 1, 2), the caches at 3, 4, pos at 5 */
  bool raw;      /* the cooperative-matrix kernels: bf16 heads staged as their own bits, on bf16
                    matrices (--spirv-coopmat=khr), not converted to f16 */
} attn;

/* attention_plain.c */
bool attn_fwd_plain(attn *A);
bool attn_grad_plain(attn *A);
/* attention_tiled.c */
bool attn_fwd_tiled(attn *A);
bool attn_grad_tiled(attn *A);
/* attention_kv (a decode block's prefill and step): the chunk's keys and
 * values into the caches, then the tiled forward over the caches; whether it
 * takes heads of dims d and dv of dtype dt (false with the message). */
bool attn_kv_tiled(attn *A);
bool attn_kv_fits(int dt, int64_t d, int64_t dv, char *why, size_t whyn);
/* attention_coop.c: whether the cooperative-matrix forward (grad: the
 * gradient) takes the node (variant: as the variant for devices with cooperative matrices), and the
 * kernel (emulate: scalar FMAs in place of the matrices, for lavapipe). */
bool attn_coop_fits(const attn *A, bool grad, bool variant);
void attn_fwd_coop(attn *A, bool emulate);
/* attention_grad by cooperative matrices: L and D by the forward's kernel
 * (dispatch 0), then dv and dk, then dq (emulate as above). */
void attn_grad_coop(attn *A, bool emulate);

#endif
