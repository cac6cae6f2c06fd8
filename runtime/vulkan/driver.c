/* Loading Vulkan through the symbol table of symbols.def, the instance,
 * the validation messenger and the device list (see driver.h). */
#define _GNU_SOURCE /* dl_iterate_phdr */
#include "runtime/vulkan/driver.h"

#include "runtime/vulkan/coopmat.h"

#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>

#define VALIDATION_LAYER "VK_LAYER_KHRONOS_validation"

const char *mlc_vk_result_name(VkResult r) {
  switch (r) {
#define R(x) case x: return #x;
  R(VK_SUCCESS) R(VK_NOT_READY) R(VK_TIMEOUT) R(VK_EVENT_SET) R(VK_EVENT_RESET) R(VK_INCOMPLETE)
  R(VK_ERROR_OUT_OF_HOST_MEMORY) R(VK_ERROR_OUT_OF_DEVICE_MEMORY) R(VK_ERROR_INITIALIZATION_FAILED)
  R(VK_ERROR_DEVICE_LOST) R(VK_ERROR_MEMORY_MAP_FAILED) R(VK_ERROR_LAYER_NOT_PRESENT)
  R(VK_ERROR_EXTENSION_NOT_PRESENT) R(VK_ERROR_FEATURE_NOT_PRESENT) R(VK_ERROR_INCOMPATIBLE_DRIVER)
  R(VK_ERROR_TOO_MANY_OBJECTS) R(VK_ERROR_FORMAT_NOT_SUPPORTED) R(VK_ERROR_FRAGMENTED_POOL) R(VK_ERROR_UNKNOWN)
  R(VK_ERROR_OUT_OF_POOL_MEMORY) R(VK_ERROR_INVALID_EXTERNAL_HANDLE) R(VK_ERROR_FRAGMENTATION)
  R(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS) R(VK_PIPELINE_COMPILE_REQUIRED) R(VK_ERROR_INVALID_SHADER_NV)
#undef R
  default: return "VkResult";
  }
}

mlc_status mlc_vk_check(VkResult r, const char *what) {
  if (r == VK_SUCCESS) return NULL;
  bool oom = r == VK_ERROR_OUT_OF_HOST_MEMORY || r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_POOL_MEMORY;
  return mlc_status_make(oom ? MLC_OUT_OF_MEMORY : MLC_INTERNAL, "%s: %s (%d)", what, mlc_vk_result_name(r), (int)r);
}

static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                 VkDebugUtilsMessageTypeFlagsEXT type,
                                                 const VkDebugUtilsMessengerCallbackDataEXT *data, void *user) {
  mlc_vk_api *api = user;
  (void)type;
  api->messages++;
  if (api->log)
    fprintf(api->log, "mlc: Vulkan validation %s: %s\n",
            severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT ? "error" : "warning",
            data && data->pMessage ? data->pMessage : "(no message)");
  return VK_FALSE;
}

static bool has_layer(const mlc_vk_api *api, const char *name) {
  uint32_t n = 0;
  if (api->vkEnumerateInstanceLayerProperties(&n, NULL) != VK_SUCCESS || !n) return false;
  VkLayerProperties *p = calloc(n, sizeof *p);
  bool found = false;
  if (p && api->vkEnumerateInstanceLayerProperties(&n, p) == VK_SUCCESS)
    for (uint32_t i = 0; i < n && !found; i++) found = !strcmp(p[i].layerName, name);
  free(p);
  return found;
}

/* Under AddressSanitizer, the drivers and layers the Vulkan loader brings in
 * stay loaded to the end of the process.  The loader dlcloses them when the
 * instance goes; memory a driver keeps in its own globals for the life of
 * the process (lavapipe in Mesa 22.3.6 reallocs 128 bytes it never frees)
 * then has nothing left pointing at it, and LeakSanitizer reports it as
 * leaked, from a module it can no longer name.  Kept loaded, that memory is
 * still reachable and is not reported, while a Vulkan object mlc forgets
 * to destroy still is, with the driver's frames named
 * (tests/spirv/vk_leak.sh plants one).  Objects are listed in load order,
 * so those past `before` came with the loader. */
#if defined(__SANITIZE_ADDRESS__)
#define MLC_KEEP_DRIVERS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MLC_KEEP_DRIVERS 1
#endif
#endif

#ifdef MLC_KEEP_DRIVERS
static int count_object(struct dl_phdr_info *info, size_t size, void *data) {
  (void)info, (void)size;
  ++*(size_t *)data;
  return 0;
}

typedef struct {
  size_t seen, before;
} keep_walk;

static int keep_object(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  keep_walk *w = data;
  if (w->seen++ < w->before || !info->dlpi_name || !*info->dlpi_name) return 0;
  /* RTLD_NOLOAD only finds the object; RTLD_NODELETE marks it to stay.  The
   * reference this takes is never dropped, on purpose. */
  (void)dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
  return 0;
}
#endif

size_t mlc_vk_loaded_objects(void) {
  size_t n = 0;
#ifdef MLC_KEEP_DRIVERS
  dl_iterate_phdr(count_object, &n);
#endif
  return n;
}

void mlc_vk_keep_loaded_since(size_t before) {
#ifdef MLC_KEEP_DRIVERS
  keep_walk w = {0, before};
  dl_iterate_phdr(keep_object, &w);
#else
  (void)before;
#endif
}

mlc_status mlc_vk_load(mlc_vk_api *out, bool validate, FILE *log) {
  memset(out, 0, sizeof *out);
  size_t objects_before = mlc_vk_loaded_objects();
  const char *env = getenv("MLC_VK_VALIDATE");
  out->validate = validate || (env && *env && strcmp(env, "0"));
  out->log = log ? log : stderr;
  out->lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!out->lib)
    return mlc_status_make(MLC_UNIMPLEMENTED, "no Vulkan on this machine: cannot load libvulkan.so.1 (%s); install the "
                           "Vulkan loader (Debian: libvulkan1) and a driver (mesa-vulkan-drivers, or the GPU vendor's)",
                           dlerror());
  void *sym = dlsym(out->lib, "vkGetInstanceProcAddr");
  if (!sym) {
    mlc_vk_unload(out);
    return mlc_status_make(MLC_UNIMPLEMENTED, "libvulkan.so.1 has no vkGetInstanceProcAddr: not a Vulkan loader");
  }
  memcpy(&out->vkGetInstanceProcAddr, &sym, sizeof sym);
  PFN_vkVoidFunction fn;
#define G(name)                                                                                     \
  if (!(fn = out->vkGetInstanceProcAddr(NULL, #name))) {                                            \
    mlc_vk_unload(out);                                                                             \
    return mlc_status_make(MLC_UNIMPLEMENTED, "the Vulkan loader has no %s: it is too old", #name); \
  }                                                                                                 \
  memcpy(&out->name, &fn, sizeof fn);
#define I(name)
#define D(name)
#include "runtime/vulkan/symbols.def"
#undef G
#undef I
#undef D
  uint32_t version = VK_API_VERSION_1_0;
  out->vkEnumerateInstanceVersion(&version);
  if (version < VK_API_VERSION_1_2) {
    mlc_vk_unload(out);
    return mlc_status_make(MLC_UNIMPLEMENTED, "the Vulkan loader is version %u.%u; mlc needs Vulkan 1.2",
                           VK_API_VERSION_MAJOR(version), VK_API_VERSION_MINOR(version));
  }
  out->api_version = version < VK_API_VERSION_1_3 ? version : VK_API_VERSION_1_3;
  if (out->validate && !has_layer(out, VALIDATION_LAYER)) {
    mlc_vk_unload(out);
    return mlc_status_make(MLC_UNIMPLEMENTED, "Vulkan validation was asked for (MLC_VK_VALIDATE) but the layer %s is not "
                           "installed (Debian: vulkan-validationlayers)", VALIDATION_LAYER);
  }
  VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .pApplicationName = "mlc",
                           .pEngineName = "mlc", .apiVersion = out->api_version};
  VkDebugUtilsMessengerCreateInfoEXT mci = {
      .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
      .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
      .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                     VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
      .pfnUserCallback = on_message, .pUserData = out};
  const char *layers[] = {VALIDATION_LAYER};
  const char *exts[] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME};
  VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app};
  if (out->validate) {
    ici.pNext = &mci; /* also covers creating and destroying the instance */
    ici.enabledLayerCount = 1;
    ici.ppEnabledLayerNames = layers;
    ici.enabledExtensionCount = 1;
    ici.ppEnabledExtensionNames = exts;
  }
  VkResult r = out->vkCreateInstance(&ici, NULL, &out->instance);
  mlc_vk_keep_loaded_since(objects_before);
  if (r == VK_ERROR_INCOMPATIBLE_DRIVER) {
    mlc_vk_unload(out);
    return mlc_status_make(MLC_UNIMPLEMENTED, "no Vulkan driver on this machine: vkCreateInstance found none "
                           "(VK_ERROR_INCOMPATIBLE_DRIVER); install one (mesa-vulkan-drivers for lavapipe on the CPU)");
  }
  mlc_status st = mlc_vk_check(r, "vkCreateInstance");
  if (st) { out->instance = NULL; mlc_vk_unload(out); return st; }
#define G(name)
#define I(name)                                                                                          \
  if (!(fn = out->vkGetInstanceProcAddr(out->instance, #name))) {                                        \
    mlc_vk_unload(out);                                                                                  \
    return mlc_status_make(MLC_UNIMPLEMENTED, "the Vulkan instance has no %s: it is too old", #name);    \
  }                                                                                                      \
  memcpy(&out->name, &fn, sizeof fn);
#define D(name)
#include "runtime/vulkan/symbols.def"
#undef G
#undef I
#undef D
  fn = out->vkGetInstanceProcAddr(out->instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR");
  memcpy(&out->vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR, &fn, sizeof fn);
  fn = out->vkGetInstanceProcAddr(out->instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV");
  memcpy(&out->vkGetPhysicalDeviceCooperativeMatrixPropertiesNV, &fn, sizeof fn);
  if (out->validate) {
    fn = out->vkGetInstanceProcAddr(out->instance, "vkCreateDebugUtilsMessengerEXT");
    memcpy(&out->vkCreateDebugUtilsMessengerEXT, &fn, sizeof fn);
    fn = out->vkGetInstanceProcAddr(out->instance, "vkDestroyDebugUtilsMessengerEXT");
    memcpy(&out->vkDestroyDebugUtilsMessengerEXT, &fn, sizeof fn);
    if (!out->vkCreateDebugUtilsMessengerEXT || !out->vkDestroyDebugUtilsMessengerEXT) {
      mlc_vk_unload(out);
      return mlc_status_make(MLC_UNIMPLEMENTED, "Vulkan validation: the instance has no VK_EXT_debug_utils");
    }
    if ((st = mlc_vk_check(out->vkCreateDebugUtilsMessengerEXT(out->instance, &mci, NULL, &out->messenger),
                           "vkCreateDebugUtilsMessengerEXT"))) {
      mlc_vk_unload(out);
      return st;
    }
  }
  return NULL;
}

mlc_status mlc_vk_load_device(mlc_vk_api *api, VkDevice dev) {
  PFN_vkVoidFunction fn;
#define G(name)
#define I(name)
#define D(name)                                                                                     \
  if (!(fn = api->vkGetDeviceProcAddr(dev, #name)))                                                 \
    return mlc_status_make(MLC_UNIMPLEMENTED, "the Vulkan device has no %s: it is too old", #name); \
  memcpy(&api->name, &fn, sizeof fn);
#include "runtime/vulkan/symbols.def"
#undef G
#undef I
#undef D
  return NULL;
}

void mlc_vk_unload(mlc_vk_api *api) {
  if (api->messenger) api->vkDestroyDebugUtilsMessengerEXT(api->instance, api->messenger, NULL);
  if (api->instance) api->vkDestroyInstance(api->instance, NULL);
  if (api->lib) dlclose(api->lib);
  uint32_t messages = api->messages;
  FILE *log = api->log;
  memset(api, 0, sizeof *api);
  api->messages = messages; /* still readable after the instance is gone */
  api->log = log;
}

mlc_status mlc_vk_physical_devices(const mlc_vk_api *api, VkPhysicalDevice **out, uint32_t *out_n) {
  *out = NULL;
  *out_n = 0;
  uint32_t n = 0;
  MLC_RETURN_IF_ERROR(mlc_vk_check(api->vkEnumeratePhysicalDevices(api->instance, &n, NULL), "vkEnumeratePhysicalDevices"));
  VkPhysicalDevice *p = calloc(n + 1, sizeof *p);
  if (!p) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory");
  mlc_status st = mlc_vk_check(api->vkEnumeratePhysicalDevices(api->instance, &n, p), "vkEnumeratePhysicalDevices");
  if (st) { free(p); return st; }
  *out = p;
  *out_n = n;
  return NULL;
}

bool mlc_vk_has_extension(const mlc_vk_api *api, VkPhysicalDevice dev, const char *name) {
  uint32_t n = 0;
  if (api->vkEnumerateDeviceExtensionProperties(dev, NULL, &n, NULL) != VK_SUCCESS || !n) return false;
  VkExtensionProperties *e = calloc(n, sizeof *e);
  bool found = false;
  if (e && api->vkEnumerateDeviceExtensionProperties(dev, NULL, &n, e) == VK_SUCCESS)
    for (uint32_t i = 0; i < n && !found; i++) found = !strcmp(e[i].extensionName, name);
  free(e);
  return found;
}

/* The device's cooperative-matrix properties through one extension
 * (malloc'ed; NV's are converted to KHR's layout), or NULL. */
mlc_vk_coopmat_properties *mlc_vk_coopmat_properties_of(const mlc_vk_api *api, VkPhysicalDevice dev, mlc_vk_coopmat_kind kind,
                                                         uint32_t *out_n) {
  *out_n = 0;
  uint32_t n = 0;
  mlc_vk_coopmat_properties *p = NULL;
  if (kind == MLC_VK_COOPMAT_KHR) {
    if (!api->vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR || !mlc_vk_has_extension(api, dev, MLC_VK_COOPMAT_EXT) ||
        api->vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR(dev, &n, NULL) != VK_SUCCESS || !n ||
        !(p = calloc(n, sizeof *p)))
      return NULL;
    for (uint32_t i = 0; i < n; i++) p[i].sType = MLC_VK_STYPE_COOPMAT_PROPERTIES;
    if (api->vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR(dev, &n, p) != VK_SUCCESS) { free(p); return NULL; }
  } else {
    VkCooperativeMatrixPropertiesNV *q = NULL;
    if (!api->vkGetPhysicalDeviceCooperativeMatrixPropertiesNV || !mlc_vk_has_extension(api, dev, MLC_VK_COOPMAT_NV_EXT) ||
        api->vkGetPhysicalDeviceCooperativeMatrixPropertiesNV(dev, &n, NULL) != VK_SUCCESS || !n ||
        !(q = calloc(n, sizeof *q)) || !(p = calloc(n, sizeof *p))) {
      free(q);
      return NULL;
    }
    for (uint32_t i = 0; i < n; i++) q[i].sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV;
    if (api->vkGetPhysicalDeviceCooperativeMatrixPropertiesNV(dev, &n, q) != VK_SUCCESS) n = 0;
    for (uint32_t i = 0; i < n; i++)
      p[i] = (mlc_vk_coopmat_properties){.MSize = q[i].MSize, .NSize = q[i].NSize, .KSize = q[i].KSize,
                                         .AType = (int32_t)q[i].AType, .BType = (int32_t)q[i].BType,
                                         .CType = (int32_t)q[i].CType, .ResultType = (int32_t)q[i].DType,
                                         .scope = (int32_t)q[i].scope};
    free(q);
  }
  *out_n = n;
  return p;
}

void mlc_vk_coopmat_shapes(const mlc_vk_api *api, VkPhysicalDevice dev, char *buf, size_t n) {
  uint32_t np[2];
  mlc_vk_coopmat_properties *p[2];
  for (int kind = MLC_VK_COOPMAT_KHR; kind <= MLC_VK_COOPMAT_NV; kind++)
    p[kind] = mlc_vk_coopmat_properties_of(api, dev, (mlc_vk_coopmat_kind)kind, &np[kind]);
  /* NV's list is most often KHR's again: then it is not written twice */
  bool same = np[0] == np[1];
  for (uint32_t i = 0; same && i < np[0]; i++) same = mlc_vk_coopmat_offered(&(mlc_vk_coopmat_use){
      p[1][i].MSize, p[1][i].NSize, p[1][i].KSize, p[1][i].AType, p[1][i].BType, p[1][i].CType, p[1][i].ResultType,
      p[1][i].scope}, p[0], np[0]);
  char l[2][512];
  for (int kind = 0; kind < 2; kind++) mlc_vk_coopmat_list(p[kind], np[kind], l[kind], sizeof l[kind]);
  if (!np[0] && !np[1]) snprintf(buf, n, "no");
  else if (!np[1]) snprintf(buf, n, "KHR %s", l[0]);
  else if (!np[0]) snprintf(buf, n, "NV %s", l[1]);
  else if (same) snprintf(buf, n, "KHR and NV %s", l[0]);
  else snprintf(buf, n, "KHR %s; NV %s", l[0], l[1]);
  free(p[0]);
  free(p[1]);
}

static const char *kind_name(VkPhysicalDeviceType t) {
  switch (t) {
  case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated GPU";
  case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete GPU";
  case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual GPU";
  case VK_PHYSICAL_DEVICE_TYPE_CPU: return "CPU";
  default: return "other";
  }
}

mlc_status mlc_vk_enumerate(mlc_device_info *out, uint32_t cap, uint32_t *out_n) {
  *out_n = 0;
  mlc_vk_api *api = malloc(sizeof *api);
  if (!api) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory");
  mlc_status st = mlc_vk_load(api, false, stderr);
  if (st) { free(api); return st; }
  VkPhysicalDevice *devs;
  uint32_t n;
  if ((st = mlc_vk_physical_devices(api, &devs, &n))) goto out;
  for (uint32_t i = 0; i < n && i < cap; i++) {
    mlc_device_info *info = &out[i];
    memset(info, 0, sizeof *info);
    info->ordinal = (int)i;
    VkPhysicalDeviceVulkan12Properties p12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_PROPERTIES};
    VkPhysicalDeviceProperties2 p = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &p12};
    api->vkGetPhysicalDeviceProperties2(devs[i], &p);
    VkPhysicalDeviceMemoryProperties mp;
    api->vkGetPhysicalDeviceMemoryProperties(devs[i], &mp);
    for (uint32_t h = 0; h < mp.memoryHeapCount; h++)
      if (mp.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) info->memory += mp.memoryHeaps[h].size;
    char shapes[400];
    mlc_vk_coopmat_shapes(api, devs[i], shapes, sizeof shapes);
    uint32_t v = p.properties.apiVersion;
    snprintf(info->name, sizeof info->name, "%s", p.properties.deviceName);
    snprintf(info->detail, sizeof info->detail, "%s, Vulkan %u.%u.%u, driver %.48s %.64s, cooperative matrix: %.300s",
             kind_name(p.properties.deviceType), VK_API_VERSION_MAJOR(v), VK_API_VERSION_MINOR(v),
             VK_API_VERSION_PATCH(v), p12.driverName, p12.driverInfo, shapes);
  }
  *out_n = n;
  free(devs);
out:
  mlc_vk_unload(api);
  free(api);
  return st;
}
