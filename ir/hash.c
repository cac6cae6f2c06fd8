/* Structural hash of a node group, with xxHash (XXH3-64).
 *
 * Two groups hash the same when they compute the same thing on the same
 * types: same ops, attributes, result types and wiring.  Names, scopes,
 * source locations and absolute node numbers are left out, so the twelve
 * layers of a transformer give twelve equal hashes and codegen can emit
 * one kernel set for them.  An input that comes from outside the group is
 * hashed by its type and by the order in which the group first uses it.
 */
#include <string.h>
#include <xxhash.h>

#include "ir/ir.h"

uint64_t mlc_hash_nodes(const mlc_program *p, const mlc_func *f, const uint32_t *nodes, uint32_t n) {
  (void)p;
  XXH3_state_t *st = XXH3_createState();
  if (!st) MLC_ICE("out of memory");
  XXH3_64bits_reset(st);
  uint32_t next_ext = 0;
  uint32_t ext_ids[64]; /* outside inputs seen so far, numbered by first use */
  uint32_t ext_n = 0;
  for (uint32_t i = 0; i < n; i++) {
    const mlc_node *nd = &f->nodes[nodes[i]];
    struct {
      uint16_t op, nin;
      uint8_t dtype, rank, pad[2];
      int32_t axis, axis2, keepdim, causal;
      int64_t start, end;
      double f;
      int64_t dim[MLC_MAX_RANK];
    } key;
    memset(&key, 0, sizeof key);
    key.op = nd->op;
    key.nin = nd->nin;
    key.dtype = nd->type.dtype;
    key.rank = nd->type.rank;
    key.pad[0] = nd->a.abs_in; /* a max of |x| (fuse.c) is not a max of x */
    memcpy(key.dim, nd->type.dim, nd->type.rank * sizeof key.dim[0]);
    unsigned m = mlc_ops[nd->op].attrs;
    if (m & MLC_A_AXIS) key.axis = nd->a.axis;
    if (m & MLC_A_AXIS2) key.axis2 = nd->a.axis2;
    if (m & MLC_A_KEEPDIM) key.keepdim = nd->a.keepdim;
    if (m & MLC_A_CAUSAL) key.causal = nd->a.causal;
    if (m & (MLC_A_RANGE | MLC_A_RNG)) { key.start = nd->a.start; key.end = nd->a.end; }
    if (m & (MLC_A_VALUE | MLC_A_EPS | MLC_A_SCALE)) key.f = nd->a.f;
    if (m & MLC_A_QUANT) { key.start = nd->a.qbits; key.end = nd->a.qgroup; key.axis2 = nd->a.qscheme; } /* qlinear has no axis2 */
    XXH3_64bits_update(st, &key, sizeof key);
    if (nd->op == MLC_OP_FUSED && nd->a.name) XXH3_64bits_update(st, nd->a.name, strlen(nd->a.name)); /* its program */
    for (uint32_t k = 0; k < nd->nin; k++) {
      uint32_t src = nd->in[k];
      int64_t ref = -1;
      for (uint32_t j = 0; j < i; j++)
        if (nodes[j] == src) { ref = j; break; } /* wiring inside the group: by position */
      if (ref < 0) {
        uint32_t e = 0;
        while (e < ext_n && ext_ids[e] != src) e++;
        if (e == ext_n && ext_n < 64) ext_ids[ext_n++] = src;
        ref = ((int64_t)1 << 40) + (e < 64 ? e : next_ext++ + 64);
        const mlc_type *t = &f->nodes[src].type;
        int64_t tkey[MLC_MAX_RANK + 1] = {t->dtype | (int64_t)t->rank << 8};
        memcpy(tkey + 1, t->dim, t->rank * sizeof t->dim[0]);
        XXH3_64bits_update(st, tkey, sizeof tkey);
      }
      XXH3_64bits_update(st, &ref, sizeof ref);
    }
  }
  uint64_t h = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  return h;
}
