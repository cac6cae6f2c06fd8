/* The Vulkan device (runtime/device.h) on one compute queue.
 *
 * Memory: one VkBuffer with its own VkDeviceMemory per allocation, in
 * device-local memory; data goes through a host-visible staging buffer,
 * except on a device that shares the host's memory (an integrated GPU, or
 * lavapipe on the CPU), where the buffer is host-visible device-local memory
 * mapped once and read and written with no copies.  Device addresses are
 * mlc's own: each allocation gets a range of a 64-bit space, and an
 * argument address is bound as (buffer, offset).
 *
 * Kernels (runtime/vulkan/kernel.h): one VkShaderModule per kernel and one
 * compute pipeline per entry point, with the local size as specialisation
 * constants, built through a VkPipelineCache saved under
 * ~/.cache/mlc/vulkan/ (one file per driver and device, by its
 * pipelineCacheUUID).  A cooperative-matrix kernel is replaced by its
 * fallback when the device lacks the extension or the shape.
 *
 * Launches are recorded, not run: finish records them into a command buffer
 * (descriptor sets are made once per kernel and arguments, command buffers
 * once per sequence of launches and reused when the same sequence comes
 * again, as every run of an entry point does), submits it and waits.  Every
 * step sees everything before it (a compute-to-compute barrier between
 * dispatches).  With timing, timestamps around each step go to a query pool.
 */
#ifndef MLC_VULKAN_DEVICE_H
#define MLC_VULKAN_DEVICE_H

#include <stdbool.h>
#include <stdio.h>

#include "runtime/device.h"
#include "runtime/vulkan/kernel.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  int ordinal;                   /* which device, as `mlc devices --target spirv` lists them */
  const mlc_vk_kernel *kernels;  /* the kernel table (must outlive the device) */
  uint32_t nkernels;
  FILE *progress;                /* notes (which device, validation messages); NULL: quiet */
  bool validate;                 /* the Khronos validation layer (also MLC_VK_VALIDATE=1) */
  uint32_t *messages;            /* if not NULL: set to the validation messages counted when the device is destroyed */
  /* The plan whose executables section holds the kernels ("spirv"
   * executables and their kernels' dispatch records): then kernels above
   * are unused.  It must outlive the device. */
  const struct mlc_plan *plan;
} mlc_vk_code;

MLC_MUST_USE mlc_status mlc_vk_device_create(const mlc_vk_code *code, mlc_allocator a, mlc_device **out);
/* Validation warnings and errors so far (0 without validation). */
uint32_t mlc_vk_device_messages(const mlc_device *d);
/* Whether the device runs cooperative-matrix kernels (else their fallbacks). */
bool mlc_vk_device_coopmat(const mlc_device *d);

#ifdef __cplusplus
}
#endif

#endif
