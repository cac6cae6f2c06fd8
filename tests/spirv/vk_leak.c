/* A planted leak: a VkBuffer created through mlc's Vulkan table and never
 * destroyed.  Built only under the sanitizers; tests/spirv/vk_leak.sh runs
 * it and passes only when LeakSanitizer reports that buffer, from this
 * file's plant_vulkan_leak through frames of the driver it names, and
 * nothing else.  It shows that keeping the drivers loaded (driver.c) hides
 * no leak of mlc's.  Exit 77 (ctest's skip) without a Vulkan driver. */
#include <stdio.h>
#include <stdlib.h>

#include "runtime/vulkan/driver.h"

#define SKIP 77

static int fail(mlc_status st) {
  fprintf(stderr, "vk_leak: %s\n", mlc_status_message(st));
  mlc_status_free(st);
  return 1;
}

/* Not inlined, so its name is a frame of the leak's stack. */
__attribute__((noinline)) static mlc_status plant_vulkan_leak(mlc_vk_api *api, VkDevice dev) {
  VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = 4096,
                           .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
  VkBuffer buf = VK_NULL_HANDLE;
  return mlc_vk_check(api->vkCreateBuffer(dev, &bi, NULL, &buf), "vkCreateBuffer"); /* buf is dropped */
}

int main(void) {
  mlc_vk_api api;
  mlc_status st = mlc_vk_load(&api, false, stderr);
  if (st) {
    printf("SKIP: %s\n", mlc_status_message(st));
    mlc_status_free(st);
    return SKIP;
  }
  VkPhysicalDevice *phys = NULL;
  uint32_t n = 0;
  if ((st = mlc_vk_physical_devices(&api, &phys, &n)) || !n) {
    free(phys);
    mlc_vk_unload(&api);
    if (st) return fail(st);
    printf("SKIP: no Vulkan device\n");
    return SKIP;
  }
  float prio = 1.0f;
  VkDeviceQueueCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, .queueFamilyIndex = 0,
                                .queueCount = 1, .pQueuePriorities = &prio};
  VkDeviceCreateInfo di = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .queueCreateInfoCount = 1,
                           .pQueueCreateInfos = &qi};
  VkDevice dev = VK_NULL_HANDLE;
  st = mlc_vk_check(api.vkCreateDevice(phys[0], &di, NULL, &dev), "vkCreateDevice");
  free(phys);
  if (!st) st = mlc_vk_load_device(&api, dev);
  if (!st) st = plant_vulkan_leak(&api, dev);
  if (dev) api.vkDestroyDevice(dev, NULL);
  mlc_vk_unload(&api);
  if (st) return fail(st);
  printf("planted: one VkBuffer never destroyed\n");
  return 0;
}
