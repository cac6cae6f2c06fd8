/* The Vulkan kernel ABI: the contract between codegen/spirv and
 * runtime/vulkan, as runtime/cuda/kernel.h is for CUDA.
 *
 * A plan step names a kernel by symbol.  On Vulkan a kernel is one SPIR-V
 * module (validated by SPIRV-Tools before it is written) holding up to
 * MLC_VK_MAX_DISPATCH GLCompute entry points, dispatched in order, each
 * after a compute-to-compute memory barrier.  Every entry point sees the
 * same bindings, all storage buffers in descriptor set 0:
 *
 *   binding i, 0 <= i < nargs   the step's arguments (the node's inputs,
 *                               then its output), as the plan lists them;
 *   binding nargs               a scratch block of `scratch` bytes that only
 *                               this step uses (the runtime binds a small
 *                               dummy buffer when scratch is 0).
 *
 * Buffers are dense, row-major, and start 256-byte aligned.  A dispatch is
 * groups[0] x groups[1] x groups[2] workgroups; the module fixes the
 * workgroup size with LocalSize, or with LocalSizeId on specialisation
 * constant ids 0..2, whose values `local` gives (0: keep the default).
 * Kernels that use cooperative matrices (VK_KHR_cooperative_matrix, or
 * NV's, as the module's capability says) set `coopmat`; the runtime builds
 * one only when the device has that extension and lists every multiply the
 * module's words do (shape and types, read by runtime/vulkan/coopmat.h;
 * `coopmat_mnk` is the code generator's note of the shape, for tables), and
 * otherwise takes `fallback`, the index of a kernel with the same arguments:
 * one that needs nothing beyond Vulkan 1.2 compute, or another
 * cooperative-matrix kernel (another shape), checked the same way in turn.
 */
#ifndef MLC_VULKAN_KERNEL_H
#define MLC_VULKAN_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MLC_VK_MAX_DISPATCH 4
#define MLC_VK_NO_FALLBACK 0xffffffffu

typedef struct {
  const char *entry;      /* the OpEntryPoint's name */
  uint32_t groups[3];     /* workgroups in x, y, z (each >= 1) */
  uint32_t local[3];      /* specialisation constants 0..2, or 0 */
} mlc_vk_dispatch;

typedef struct {
  const char *symbol;
  const uint32_t *words;  /* the SPIR-V module */
  size_t nwords;
  uint32_t nargs;         /* bindings 0..nargs-1; binding nargs is scratch */
  uint64_t scratch;
  uint32_t ndispatch;
  mlc_vk_dispatch dispatch[MLC_VK_MAX_DISPATCH];
  uint8_t coopmat;        /* needs VK_KHR_cooperative_matrix */
  uint32_t coopmat_mnk[3];/* the tile it uses: M, N, K */
  uint32_t fallback;      /* kernel index to use without cooperative matrices */
} mlc_vk_kernel;

#ifdef __cplusplus
}
#endif

#endif
