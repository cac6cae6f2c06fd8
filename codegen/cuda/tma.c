/* TMA tensor maps of a CUDA kernel (cuda_cc.h): recorded with the launches,
 * encoded by the runtime at launch (runtime/cuda/kernel.h). */
#include <string.h>

#include "codegen/cuda/cuda_cc.h"

const char *cc_tmap(cc *c, uint32_t arg, uint64_t offset, uint32_t rank, uint32_t elem_bytes, const uint64_t *dim,
                    const uint64_t *stride, const uint32_t *box, uint32_t swizzle) {
  MLC_ASSERT(!c->sharded && c->ntmap < MLC_CUDA_MAX_TMAP && rank >= 1 && rank <= 5 && offset % 16 == 0);
  mlc_cuda_tmap *m = &c->tmap[c->ntmap];
  memset(m, 0, sizeof *m);
  /* field by field: the padding stays zero for the kernel's hash */
  m->arg = arg, m->offset = offset, m->rank = rank, m->elem_bytes = elem_bytes, m->swizzle = swizzle;
  for (uint32_t d = 0; d < rank; d++) {
    m->dim[d] = dim[d];
    m->box[d] = box[d];
    if (d) m->stride[d - 1] = stride[d - 1];
  }
  return cc_fmt(c, "tm%u", c->ntmap++);
}
