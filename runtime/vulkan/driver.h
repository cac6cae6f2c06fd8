/* Vulkan, loaded at run time: the instance and the choice of device.
 *
 * mlc_vk_load() dlopens libvulkan.so.1 (the Khronos loader, which finds the
 * installed drivers), creates an instance and resolves every entry point of
 * runtime/vulkan/symbols.def into a table of function pointers; the runtime
 * calls Vulkan only through that table.  Types come from the Vulkan headers
 * (VK_NO_PROTOTYPES: building links nothing).  With validation (asked for,
 * or MLC_VK_VALIDATE=1 in the environment) the instance enables the Khronos
 * validation layer and a VK_EXT_debug_utils messenger that prints every
 * warning and error and counts them, so tests can fail on any.  Every
 * VkResult becomes an mlc_status naming the call and the result
 * (VK_ERROR_OUT_OF_DEVICE_MEMORY, ...).
 */
#ifndef MLC_VULKAN_DRIVER_H
#define MLC_VULKAN_DRIVER_H

#define VK_NO_PROTOTYPES
#include <stdbool.h>
#include <stdio.h>
#include <vulkan/vulkan.h>

#include "runtime/device.h"
#include "runtime/status.h"

/* Cooperative matrices come in two extensions: VK_NV_cooperative_matrix
 * (SPV_NV_cooperative_matrix, which Debian 12's SPIRV-Tools validates and
 * the code generator emits) and VK_KHR_cooperative_matrix, which these
 * headers may predate (it came in 1.3.255; the values below are the
 * registry's).  Their component and scope enums agree. */
#define MLC_VK_COOPMAT_NV_EXT "VK_NV_cooperative_matrix"
#define MLC_VK_COOPMAT_EXT "VK_KHR_cooperative_matrix"
#define MLC_VK_STYPE_COOPMAT_FEATURES ((VkStructureType)1000506000)
#define MLC_VK_STYPE_COOPMAT_PROPERTIES ((VkStructureType)1000506001)
enum { MLC_VK_COMPONENT_F16 = 0, MLC_VK_COMPONENT_F32 = 1, MLC_VK_COMPONENT_BF16 = 1000141000, MLC_VK_SCOPE_SUBGROUP = 3 };
typedef struct {
  VkStructureType sType;
  void *pNext;
  VkBool32 cooperativeMatrix;
  VkBool32 cooperativeMatrixRobustBufferAccess;
} mlc_vk_coopmat_features;
typedef struct {
  VkStructureType sType;
  void *pNext;
  uint32_t MSize, NSize, KSize;
  int32_t AType, BType, CType, ResultType;
  VkBool32 saturatingAccumulation;
  int32_t scope;
} mlc_vk_coopmat_properties;
/* VK_KHR_shader_bfloat16 (1.4.311): bf16 as a cooperative matrix's component
 * (VkPhysicalDeviceShaderBfloat16FeaturesKHR). */
#define MLC_VK_BF16_EXT "VK_KHR_shader_bfloat16"
#define MLC_VK_STYPE_BF16_FEATURES ((VkStructureType)1000141000)
typedef struct {
  VkStructureType sType;
  void *pNext;
  VkBool32 shaderBFloat16Type;
  VkBool32 shaderBFloat16DotProduct;
  VkBool32 shaderBFloat16CooperativeMatrix;
} mlc_vk_bf16_features;
typedef VkResult (*mlc_vk_coopmat_query)(VkPhysicalDevice, uint32_t *, mlc_vk_coopmat_properties *);
typedef enum { MLC_VK_COOPMAT_KHR, MLC_VK_COOPMAT_NV } mlc_vk_coopmat_kind;

typedef struct {
  void *lib; /* the dlopen handle */
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr;
#define G(name) PFN_##name name;
#define I(name) PFN_##name name;
#define D(name) PFN_##name name;
#include "runtime/vulkan/symbols.def"
#undef G
#undef I
#undef D
  /* Optional: NULL when the instance lacks them. */
  PFN_vkCreateDebugUtilsMessengerEXT vkCreateDebugUtilsMessengerEXT;
  PFN_vkDestroyDebugUtilsMessengerEXT vkDestroyDebugUtilsMessengerEXT;
  mlc_vk_coopmat_query vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR;
  PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV vkGetPhysicalDeviceCooperativeMatrixPropertiesNV;
  VkInstance instance;
  uint32_t api_version;      /* the instance's */
  bool validate;
  VkDebugUtilsMessengerEXT messenger;
  uint32_t messages;         /* validation warnings and errors so far */
  FILE *log;                 /* where they are printed */
} mlc_vk_api;

/* Loads Vulkan and creates an instance.  The struct must not move while
 * the instance lives (the messenger points at it).  Without a loader or
 * without any driver this is MLC_UNIMPLEMENTED with a message saying so. */
MLC_MUST_USE mlc_status mlc_vk_load(mlc_vk_api *out, bool validate, FILE *log);
/* Under AddressSanitizer (else they do nothing): how many shared objects
 * the process has loaded, and keeping every one loaded after the first
 * `before` of them to the end of the process.  mlc_vk_load does this
 * around vkCreateInstance, so that memory a driver keeps for the life of
 * the process is not reported as leaked once the loader unloads it (see
 * driver.c); code that creates its own instance can do the same. */
size_t mlc_vk_loaded_objects(void);
void mlc_vk_keep_loaded_since(size_t before);
/* Resolves the device-level entry points for dev. */
MLC_MUST_USE mlc_status mlc_vk_load_device(mlc_vk_api *api, VkDevice dev);
void mlc_vk_unload(mlc_vk_api *api);
/* The physical devices, in the loader's order (what --device N counts);
 * *out is malloc'ed. */
MLC_MUST_USE mlc_status mlc_vk_physical_devices(const mlc_vk_api *api, VkPhysicalDevice **out, uint32_t *out_n);
/* Whether dev has the extension. */
bool mlc_vk_has_extension(const mlc_vk_api *api, VkPhysicalDevice dev, const char *name);
/* The device's cooperative-matrix multiplies through the extension `kind`
 * (VkCooperativeMatrixPropertiesKHR, or NV's in that layout), *out_n of
 * them, malloc'ed; NULL without the extension or its query. */
mlc_vk_coopmat_properties *mlc_vk_coopmat_properties_of(const mlc_vk_api *api, VkPhysicalDevice dev, mlc_vk_coopmat_kind kind,
                                                         uint32_t *out_n);
/* Both lists for `mlc devices`: "KHR and NV 16x16x16 f16->f32, ...",
 * "KHR ...; NV ..." when they differ, or "no" (coopmat.h's notation). */
void mlc_vk_coopmat_shapes(const mlc_vk_api *api, VkPhysicalDevice dev, char *buf, size_t n);
/* "VK_ERROR_DEVICE_LOST", ... */
const char *mlc_vk_result_name(VkResult r);
/* NULL for VK_SUCCESS, else "what: NAME (code)" (MLC_OUT_OF_MEMORY for the
 * out-of-memory results, MLC_INTERNAL otherwise). */
MLC_MUST_USE mlc_status mlc_vk_check(VkResult r, const char *what);
/* The physical devices for the registry (runtime/device.h), numbered as
 * mlc_vk_physical_devices orders them: name, device-local memory, and in
 * `detail` the kind, API and driver versions and cooperative-matrix shapes. */
MLC_MUST_USE mlc_status mlc_vk_enumerate(mlc_device_info *out, uint32_t cap, uint32_t *out_n);

#endif
