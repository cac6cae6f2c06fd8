/* Cooperative matrices: what a module multiplies, and whether a device can.
 *
 * A device lists the cooperative-matrix multiplies it runs
 * (VkCooperativeMatrixPropertiesKHR, or NV's equivalent): each an M x N x K
 * shape, the component types of A, B, C and the result, and a scope.  They
 * differ by vendor (16x16x16 f16 on AMD RDNA3, 8x16x16 on Intel Arc,
 * 16x16x16 and 16x8x16 on NVIDIA), and a pipeline that uses one the device
 * lacks is undefined behaviour in the driver.  So before building a
 * cooperative-matrix kernel the runtime reads, from the module's own words,
 * every OpCooperativeMatrixMulAdd (NV or KHR) it contains, with the shape
 * and types of its operands, and builds the kernel only when each is in the
 * device's list; else it takes the kernel's fallback (which may be another
 * cooperative-matrix kernel, for another shape: one module per shape, the
 * first the device runs wins), and with none left it is a status naming the
 * multiply, the device and the device's list.
 *
 * Nothing here calls Vulkan: the device's lists are passed in, so the tests
 * check the choice on synthetic lists (tests/spirv/test_vk_coopmat.c).
 */
#ifndef MLC_VULKAN_COOPMAT_H
#define MLC_VULKAN_COOPMAT_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/alloc.h"
#include "runtime/status.h"
#include "runtime/vulkan/driver.h"
#include "runtime/vulkan/kernel.h"

/* One multiply a module does: D (r) = A (a, m x k) B (b, k x n) + C (c),
 * component types as VkComponentTypeKHR numbers (NV's agree; bf16 is
 * MLC_VK_COMPONENT_BF16), scope a SPIR-V Scope (3: subgroup). */
typedef struct {
  uint32_t m, n, k;
  int32_t a, b, c, r;
  int32_t scope;
} mlc_vk_coopmat_use;

/* Reads the module words[n]: *out_kind from its capability
 * (CooperativeMatrixNV, else KHR), and every distinct multiply, at most cap
 * of them, into out[*out_n].  MLC_INVALID_ARGUMENT for a module whose
 * cooperative-matrix instructions it cannot read (a malformed stream, a
 * shape that is not an OpConstant, operands that disagree), naming the word. */
MLC_MUST_USE mlc_status mlc_vk_coopmat_scan(mlc_allocator al, const uint32_t *words, size_t n, mlc_vk_coopmat_kind *out_kind,
                                           mlc_vk_coopmat_use *out, uint32_t cap, uint32_t *out_n);
/* Whether u is one of the np properties p. */
bool mlc_vk_coopmat_offered(const mlc_vk_coopmat_use *u, const mlc_vk_coopmat_properties *p, uint32_t np);
/* "16x16x16 f16 x f16 + f32 -> f32" (", workgroup scope" etc. off subgroup). */
void mlc_vk_coopmat_use_name(const mlc_vk_coopmat_use *u, char *buf, size_t n);
/* The list p[np] as "16x16x16 f16->f32, 16x8x16 f16->f16, ..." (A x A + C
 * -> C written "A->C", other combinations in full), or "none". */
void mlc_vk_coopmat_list(const mlc_vk_coopmat_properties *p, uint32_t np, char *buf, size_t n);

/* What a device offers, for mlc_vk_coopmat_pick. */
typedef struct {
  const char *device;                           /* its name, for messages */
  bool enabled[2];                              /* by mlc_vk_coopmat_kind: the extension is enabled */
  const mlc_vk_coopmat_properties *props[2];    /* its multiplies through each, [nprops[kind]] */
  uint32_t nprops[2];
} mlc_vk_coopmat_caps;

/* The kernel to build in place of kernels[i] (of nk): i itself when it has
 * no cooperative matrices or the device runs every multiply it does, else
 * the first along its chain of fallbacks that the device runs.  With none,
 * MLC_UNIMPLEMENTED: "Vulkan kernel S uses 16x16x16 bf16 x bf16 + f32 ->
 * f32 cooperative matrices (KHR), which DEVICE does not offer (it offers:
 * LIST), and has no fallback". */
MLC_MUST_USE mlc_status mlc_vk_coopmat_pick(mlc_allocator al, const mlc_vk_coopmat_caps *caps, const mlc_vk_kernel *kernels,
                                           uint32_t nk, uint32_t i, uint32_t *out);

#endif
