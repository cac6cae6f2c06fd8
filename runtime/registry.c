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
#include "runtime/plan.h"
#ifdef MLC_RT_VULKAN
#include "runtime/vulkan/device.h"
#include "runtime/vulkan/driver.h"
#endif

static mlc_status cpu_create(int ordinal, const void *code, mlc_allocator a, mlc_device **out) {
  const mlc_cpu_code *c = code;
  if (ordinal != 0) return mlc_status_make(MLC_NOT_FOUND, "no CPU device %d: the CPU is device 0", ordinal);
  return mlc_cpu_device_create(c->lookup, c->lookup_ctx, c->threads, a, out);
}

/* A CPU plan's kernels are symbols of the program it is linked into. */
static mlc_status cpu_plan_code(const mlc_plan *plan, FILE *progress, void *code) {
  (void)code;
  (void)progress;
  return mlc_status_make(MLC_INVALID_ARGUMENT,
                         "the plan of %s runs native code, the CPU's kernels, which are linked into its artifact "
                         "(lib%s.a), not carried by the plan: create the CPU device with that program's lookup "
                         "(mlc_cpu_code), use the artifact's %s_create, or run the model's .mdl",
                         plan->model, plan->model, plan->model);
}

static mlc_status cuda_plan_code(const mlc_plan *plan, FILE *progress, void *code) {
  *(mlc_cuda_code *)code = (mlc_cuda_code){.plan = plan, .progress = progress};
  return NULL;
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

#ifdef MLC_RT_VULKAN
static mlc_status vulkan_plan_code(const mlc_plan *plan, FILE *progress, void *code) {
  *(mlc_vk_code *)code = (mlc_vk_code){.plan = plan, .progress = progress};
  return NULL;
}
#endif

#ifdef MLC_RT_METAL
static mlc_status metal_plan_code(const mlc_plan *plan, FILE *progress, void *code) {
  (void)code;
  (void)progress;
  return mlc_status_make(MLC_UNIMPLEMENTED,
                         "the Metal device does not take its kernels from a plan yet: use the artifact's %s_create",
                         plan->model);
}

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

static const char *const cpu_formats[] = {MLC_PLAN_FORMAT_NATIVE, NULL};
static const char *const cuda_formats[] = {MLC_PLAN_FORMAT_CUDA_FATBIN, MLC_PLAN_FORMAT_CUDA_SOURCE, NULL};
static const char *const vulkan_formats[] = {MLC_PLAN_FORMAT_SPIRV, NULL};
static const char *const metal_formats[] = {MLC_PLAN_FORMAT_MSL, MLC_PLAN_FORMAT_METALLIB, NULL};

static const mlc_driver drivers[] = {
  {.name = "cpu", .what = "this machine's CPU: kernels compiled through LLVM, over a thread pool",
   .code_kind = MLC_CODE_CPU, .formats = cpu_formats, .create = cpu_create, .plan_code = cpu_plan_code,
   .enumerate = mlc_cpu_enumerate},
  {.name = "cuda", .what = "NVIDIA GPUs through the driver API (libcuda.so.1, loaded at run time)",
   .code_kind = MLC_CODE_CUDA, .formats = cuda_formats, .create = cuda_create, .plan_code = cuda_plan_code,
   .enumerate = mlc_cuda_enumerate},
  {.name = "vulkan", .alias = "spirv", .what = "Vulkan compute devices (libvulkan.so.1, loaded at run time)",
   .code_kind = MLC_CODE_VULKAN, .formats = vulkan_formats,
#ifdef MLC_RT_VULKAN
   .create = vulkan_create, .plan_code = vulkan_plan_code, .enumerate = mlc_vk_enumerate,
#else
   .not_built = "this libmlcrt was built without Vulkan (configure with -DMLC_BACKEND_SPIRV=ON, which needs "
                "libvulkan-dev)",
#endif
  },
  {.name = "metal", .what = "the system's Metal GPU (Apple platforms)", .code_kind = MLC_CODE_METAL,
   .formats = metal_formats,
#ifdef MLC_RT_METAL
   .create = metal_create, .plan_code = metal_plan_code,
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

/* The row whose formats list `format`; NULL: none. */
static const mlc_driver *format_driver(const char *format) {
  for (size_t i = 0; i < NDRIVERS; i++)
    for (const char *const *f = drivers[i].formats; *f; f++)
      if (!strcmp(*f, format)) return &drivers[i];
  return NULL;
}

mlc_status mlc_driver_for_plan(const mlc_plan *plan, const mlc_driver **out) {
  *out = NULL;
  const mlc_driver *d = NULL;
  const char *first = NULL;
  for (uint32_t i = 0; i < plan->nexecutables; i++) {
    const char *f = plan->executables[i].format;
    const mlc_driver *x = format_driver(f);
    if (!x)
      return mlc_status_make(MLC_UNIMPLEMENTED, "the plan of %s has code in format '%s', which no device driver of "
                             "this libmlcrt runs (a newer mlc's?)", plan->model, f);
    if (d && x != d)
      return mlc_status_make(MLC_INVALID_ARGUMENT, "the plan of %s has code for two device drivers, %s ('%s') and %s "
                             "('%s'): one device cannot run it", plan->model, d->name, first, x->name, f);
    d = x;
    first = first ? first : f;
  }
  if (!d)
    return mlc_status_make(MLC_INVALID_ARGUMENT, "the plan of %s carries no code (no executables): compile it with "
                           "--target cuda or spirv", plan->model);
  return mlc_driver_find(d->name, out); /* MLC_UNIMPLEMENTED with the message when not built */
}

mlc_status mlc_device_create(const char *driver, int ordinal, const mlc_device_options *o, mlc_device **out) {
  *out = NULL;
  static const mlc_device_options none = {0};
  if (!o) o = &none;
  const mlc_driver *d = NULL, *pd = NULL; /* the named driver; the plan's, when the code is the plan's */
  if (o->plan && !o->code) MLC_RETURN_IF_ERROR(mlc_driver_for_plan(o->plan, &pd));
  if (driver) MLC_RETURN_IF_ERROR(mlc_driver_find(driver, &d));
  else if (!(d = pd))
    return mlc_status_make(MLC_INVALID_ARGUMENT, "mlc_device_create: no driver named, and no plan to take it from%s",
                           o->code ? " (the options carry code, which needs its driver named)" : "");
  const void *code = o->code;
  any_code zero;
  if (pd) {
    if (pd != d)
      return mlc_status_make(MLC_INVALID_ARGUMENT, "device driver '%s' cannot run the plan of %s: its code is for %s",
                             d->name, o->plan->model, pd->name);
    memset(&zero, 0, sizeof zero);
    MLC_RETURN_IF_ERROR(d->plan_code(o->plan, o->progress, &zero));
    code = &zero;
  } else if (!code) {
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
