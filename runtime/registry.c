/* The registry of device drivers (runtime/device.h): one row per backend,
 * built into this libmlcrt or not, and the one mlc_device_create over them.
 * A backend's own create function (mlc_cuda_device_create, ...) stays
 * public, since generated artifacts call them; each row here is a thin
 * adapter from the common signature to it.
 *
 * Adding a driver: its device in runtime/<name>/ (the vtable, a create and
 * an enumerate), its code kind in device.h, and a row here. */
#include "runtime/device.h"

#include <stdio.h>
#include <string.h>

#include "runtime/cpu/device.h"
#include "runtime/cuda/device.h"
#include "runtime/metal/device.h"
#ifdef MLC_RT_VULKAN
#include "runtime/vulkan/device.h"
#include "runtime/vulkan/driver.h"
#endif

static mlc_status cpu_create(int ordinal, const void *code, mlc_allocator a, mlc_device **out) {
  const mlc_cpu_code *c = code;
  if (ordinal != 0) return mlc_status_make(MLC_NOT_FOUND, "no CPU device %d: the CPU is device 0", ordinal);
  return mlc_cpu_device_create(c->lookup, c->lookup_ctx, c->threads, a, out);
}

static mlc_status cuda_create(int ordinal, const void *code, mlc_allocator a, mlc_device **out) {
  mlc_cuda_code c = *(const mlc_cuda_code *)code;
  c.ordinal = ordinal;
  return mlc_cuda_device_create(&c, a, out);
}

#ifdef MLC_RT_VULKAN
static mlc_status vulkan_create(int ordinal, const void *code, mlc_allocator a, mlc_device **out) {
  mlc_vk_code c = *(const mlc_vk_code *)code;
  c.ordinal = ordinal;
  return mlc_vk_device_create(&c, a, out);
}
#endif

#ifdef MLC_RT_METAL
static mlc_status metal_create(int ordinal, const void *code, mlc_allocator a, mlc_device **out) {
  if (ordinal != 0) return mlc_status_make(MLC_NOT_FOUND, "no Metal device %d: mlc uses the system's default, 0", ordinal);
  return mlc_metal_device_create(code, a, out);
}
#endif

/* The largest of the code structs: the zeroed code of a create without any. */
typedef union {
  mlc_cpu_code cpu;
  mlc_cuda_code cuda;
  mlc_metal_code metal;
#ifdef MLC_RT_VULKAN
  mlc_vk_code vk;
#endif
} any_code;

static const mlc_driver drivers[] = {
  {.name = "cpu", .what = "this machine's CPU: kernels compiled through LLVM, over a thread pool",
   .code_kind = MLC_CODE_CPU, .create = cpu_create, .enumerate = mlc_cpu_enumerate},
  {.name = "cuda", .what = "NVIDIA GPUs through the driver API (libcuda.so.1, loaded at run time)",
   .code_kind = MLC_CODE_CUDA, .create = cuda_create, .enumerate = mlc_cuda_enumerate},
  {.name = "vulkan", .alias = "spirv", .what = "Vulkan compute devices (libvulkan.so.1, loaded at run time)",
   .code_kind = MLC_CODE_VULKAN,
#ifdef MLC_RT_VULKAN
   .create = vulkan_create, .enumerate = mlc_vk_enumerate,
#else
   .not_built = "this libmlcrt was built without Vulkan (configure with -DMLC_BACKEND_SPIRV=ON, which needs "
                "libvulkan-dev)",
#endif
  },
  {.name = "metal", .what = "the system's Metal GPU (Apple platforms)", .code_kind = MLC_CODE_METAL,
#ifdef MLC_RT_METAL
   .create = metal_create,
#else
   .not_built = "this libmlcrt was built without Metal, which runs only on Apple platforms (on macOS, configure "
                "with -DMLC_BACKEND_METAL=ON)",
#endif
  },
};
#define NDRIVERS (sizeof drivers / sizeof *drivers)

const mlc_driver *mlc_drivers(uint32_t *out_n) {
  *out_n = (uint32_t)NDRIVERS;
  return drivers;
}

/* "cpu, cuda and vulkan": the drivers built into this libmlcrt. */
static const char *built_names(char *buf, size_t n) {
  uint32_t count = 0, k = 0;
  for (size_t i = 0; i < NDRIVERS; i++) count += !drivers[i].not_built;
  size_t len = 0;
  buf[0] = 0;
  for (size_t i = 0; i < NDRIVERS && len < n; i++) {
    if (drivers[i].not_built) continue;
    len += (size_t)snprintf(buf + len, n - len, "%s%s", k == 0 ? "" : k + 1 == count ? " and " : ", ", drivers[i].name);
    k++;
  }
  return buf;
}

mlc_status mlc_driver_find(const char *name, const mlc_driver **out) {
  *out = NULL;
  char built[128];
  for (size_t i = 0; name && i < NDRIVERS; i++) {
    const mlc_driver *d = &drivers[i];
    if (strcmp(d->name, name) && !(d->alias && !strcmp(d->alias, name))) continue;
    if (d->not_built)
      return mlc_status_make(MLC_UNIMPLEMENTED, "device driver '%s': %s; its drivers are %s", name, d->not_built,
                             built_names(built, sizeof built));
    *out = d;
    return NULL;
  }
  return mlc_status_make(MLC_INVALID_ARGUMENT, "no device driver '%s': this libmlcrt has %s", name ? name : "(null)",
                         built_names(built, sizeof built));
}

mlc_status mlc_device_create(const char *driver, int ordinal, const mlc_device_options *o, mlc_device **out) {
  *out = NULL;
  const mlc_driver *d;
  MLC_RETURN_IF_ERROR(mlc_driver_find(driver, &d));
  static const mlc_device_options none = {0};
  if (!o) o = &none;
  const void *code = o->code;
  any_code zero;
  if (!code) {
    if (o->code_kind != MLC_CODE_NONE && o->code_kind != d->code_kind)
      return mlc_status_make(MLC_INVALID_ARGUMENT, "device driver '%s': code of kind %d, not its own (%d)", d->name,
                             (int)o->code_kind, (int)d->code_kind);
    memset(&zero, 0, sizeof zero);
    code = &zero;
  } else if (o->code_kind != d->code_kind) {
    return mlc_status_make(MLC_INVALID_ARGUMENT, "device driver '%s' runs code of kind %d; the options carry kind %d",
                           d->name, (int)d->code_kind, (int)o->code_kind);
  }
  mlc_allocator a = o->allocator.alloc ? o->allocator : mlc_allocator_default();
  return d->create(ordinal, code, a, out);
}

mlc_status mlc_device_enumerate(const char *driver, mlc_device_info *out, uint32_t cap, uint32_t *out_n) {
  *out_n = 0;
  const mlc_driver *d;
  MLC_RETURN_IF_ERROR(mlc_driver_find(driver, &d));
  if (!d->enumerate)
    return mlc_status_make(MLC_UNIMPLEMENTED, "device driver '%s' cannot list its devices yet", d->name);
  return d->enumerate(out, cap, out_n);
}
