/* The fsdp pass's cast of a rank's shard of a flat parameter to the compute
 * dtype (passes/fsdp.c), before its all-gather.  The shard's size is the
 * launcher's business: the kernel covers `rows` rows of MLC_SHARD_ROW
 * elements, an argument the runtime passes after scratch; the grid is sized
 * for the nominal rows (one rank), and the blocks past a smaller shard find
 * nothing to do. */
#include "codegen/cstyle/cc.h"

#define THREADS 256
#define VEC 4 /* MLC_SHARD_ROW is a multiple of it */

bool cc_emit_shard_cast(cc *c) {
  const mlc_type *in = cc_in(c, 0);
  int64_t rows = in->dim[0];
  int64_t blocks = cc_ceil_div(rows * MLC_SHARD_ROW / VEC, THREADS);
  cc_begin(c, (uint64_t)(blocks > 4096 ? 4096 : blocks), THREADS, 0);
  cc_printf(c, "  const $i64 n = ($i64)rows * %d;\n", MLC_SHARD_ROW / VEC);
  cc_printf(c, "  for ($i64 e = ($i64)$bid * %d + $tid; e < n; e += ($i64)$gdim * %d) {\n",
            THREADS, THREADS);
  cc_printf(c, "    float v[%d];\n", VEC);
  cc_vec_load(c, VEC, in->dtype, "v", "0", "in0", cc_fmt(c, "e * %d", VEC));
  cc_vec_store(c, VEC, c->n->type.dtype, "out", cc_fmt(c, "e * %d", VEC), "v");
  cc_printf(c, "  }\n");
  cc_end(c);
  return true;
}
