/* Unit tests of the SPIR-V code generator (codegen/spirv/).
 *
 *   test_spirv_builder builder   the builder and the validator: interning,
 *                                a hand-built module that validates and
 *                                broken ones that do not, kernel naming and
 *                                deduplication, work items;
 *   test_spirv_builder run       emitted kernels run on a Vulkan device
 *                                (lavapipe in CI: VK_ICD_FILENAMES) against
 *                                references computed here in double, with
 *                                the Khronos validation layer where it is
 *                                installed (a message fails the case); exits
 *                                77 (skipped) when no Vulkan device is there.
 *
 * Each numeric case builds a one-op program directly in the IR with sizes
 * that are not multiples of the tiles or of two (16-bit elements share
 * words, GEMM tiles have edges), emits it, runs the node's kernel (all its
 * dispatches, barriers between) on random inputs and compares.  Tolerances:
 * f32 results within 2e-5 relative (plus 1e-6 absolute) of the double
 * reference; bf16/f16 results within one unit in the last place of the
 * reference rounded to that type.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <vulkan/vulkan.h>
#include <xxhash.h>

#include "codegen/spirv/builder.h"
#include "codegen/spirv/spirv.h"
#include "runtime/vulkan/driver.h" /* mlc_vk_keep_loaded_since */

/* ---------------------------------------------------------------- programs */

typedef struct {
  mlc_arena a;
  mlc_program p;
  mlc_func *f;
} prog;

/* The options of emitted code that the programs below are made with. */

/* mlc_spirv_emit, failing the test with its message. */
static void emit_ok(const mlc_program *p, const mlc_spirv_options *o, mlc_spirv_module *m) {
  mlc_status st = mlc_spirv_emit(p, o, m);
  if (st) fail_msg("emit: %s", mlc_status_message(st));
}
static mlc_options g_opts;

static prog *prog_new(void) {
  prog *g = calloc(1, sizeof *g);
  mlc_arena_init(&g->a);
  mlc_program_init(&g->p, &g->a);
  g->p.opts = g_opts;
  g->f = mlc_program_add_func(&g->p, "forward");
  return g;
}

static void prog_free(prog *g) {
  mlc_arena_free(&g->a);
  free(g);
}

static uint32_t input(prog *g, int dt, int rank, const int64_t *dims) {
  mlc_attrs a = {.name = "x"};
  uint32_t i = mlc_func_add(&g->p, g->f, MLC_OP_INPUT, NULL, 0, &a, (mlc_loc){0, 0, 0}, "");
  mlc_type *t = &g->f->nodes[i].type;
  t->dtype = (uint8_t)dt;
  t->rank = (uint8_t)rank;
  for (int k = 0; k < rank; k++) t->dim[k] = dims[k];
  return i;
}

static uint32_t node(prog *g, mlc_op op, const uint32_t *in, uint32_t nin, const mlc_attrs *a, int out_dt) {
  uint32_t i = mlc_func_add(&g->p, g->f, op, in, nin, a, (mlc_loc){0, 0, 0}, "");
  mlc_node *n = &g->f->nodes[i];
  if (out_dt) n->type.dtype = (uint8_t)out_dt; /* cast: the builder gives the type */
  char err[256];
  mlc_type t = n->type;
  if (!mlc_infer_type(&g->p, g->f, n, &t, err, sizeof err)) fail_msg("%s: %s", mlc_ops[op].name, err);
  n->type = t;
  return i;
}

/* ---------------------------------------------------------------- builder */

static void test_interning(void **state) {
  (void)state;
  sb b;
  sb_init(&b, 2);
  assert_int_equal(sb_u32(&b, 5), sb_u32(&b, 5));
  assert_int_not_equal(sb_u32(&b, 5), sb_u32(&b, 6));
  assert_int_not_equal(sb_f32(&b, 1.f), sb_u32(&b, 0x3f800000u)); /* same bits, other type */
  uint32_t o[2] = {32, 0};
  assert_int_equal(sb_type(&b, SpvOpTypeInt, 2, o), b.t_u32);
  assert_int_equal(sb_ptr(&b, SpvStorageClassWorkgroup, b.t_f32), sb_ptr(&b, SpvStorageClassWorkgroup, b.t_f32));
  sb_free(&b);
}

/* out[i] = in[i] * 2 + 1 over 10 words, a loop and an if: valid for Vulkan 1.2. */
static uint32_t *small_module(size_t *n) {
  sb b;
  sb_init(&b, 3);
  uint32_t gxy[2];
  sb_entry_begin(&b, "main0", 64, 1, gxy);
  assert_int_equal(gxy[0], 1);
  assert_int_equal(gxy[1], 1);
  sb_loop l;
  uint32_t i = sb_for(&b, &l, sb_lid(&b), sb_u32(&b, 10), sb_u32(&b, 64));
  sb_if c;
  sb_if_begin(&b, &c, sb_ult(&b, i, sb_u32(&b, 10)), true);
  sb_store_f(&b, 1, MLC_DT_F32, i, sb_fma(&b, sb_load_f(&b, 0, MLC_DT_F32, i), sb_f32(&b, 2.f), sb_f32(&b, 1.f)));
  sb_if_else(&b, &c);
  sb_if_end(&b, &c);
  sb_for_end(&b, &l);
  sb_entry_end(&b);
  uint32_t *w = sb_finish(&b, n);
  sb_free(&b);
  return w;
}

static void test_validate(void **state) {
  (void)state;
  size_t n;
  uint32_t *w = small_module(&n);
  char err[512];
  assert_true(mlc_spirv_validate(w, n, err, sizeof err));
  assert_int_equal(w[0], SpvMagicNumber);
  /* Without its last instruction (OpFunctionEnd) the module is invalid. */
  assert_int_equal(w[n - 1], (1u << 16) | SpvOpFunctionEnd);
  assert_false(mlc_spirv_validate(w, n - 1, err, sizeof err));
  assert_true(strlen(err) > 0);
  /* A result id at or past the bound is invalid too. */
  uint32_t bound = w[3];
  w[3] = 2;
  assert_false(mlc_spirv_validate(w, n, err, sizeof err));
  w[3] = bound;
  /* The same calls give the same words. */
  size_t n2;
  uint32_t *w2 = small_module(&n2);
  assert_int_equal(n, n2);
  assert_memory_equal(w, w2, n * 4);
  free(w);
  free(w2);
}

/* 16-byte loads through a second, uvec4 view of two bindings (made once
 * each, their type decorated once) and a subgroup barrier: out[i] = the sum
 * of the 8 words of quad i of each input, valid for Vulkan 1.2. */
static void test_quad_view(void **state) {
  (void)state;
  sb b;
  sb_init(&b, 3);
  uint32_t gxy[2];
  sb_entry_begin(&b, "main0", 64, 1, gxy);
  uint32_t i = sb_lid(&b), sum = sb_u32(&b, 0);
  for (uint32_t k = 0; k < 4; k++) {
    uint32_t q = sb_ld4(&b, k % 2, i), a[2] = {q, k};
    sum = sb_add(&b, sum, sb_op(&b, SpvOpCompositeExtract, b.t_u32, 2, a));
  }
  sb_subgroup_barrier(&b);
  sb_stw(&b, 2, i, sum);
  sb_entry_end(&b);
  assert_int_not_equal(b.buf4[0], 0);
  assert_int_not_equal(b.buf4[1], 0);
  assert_int_equal(b.buf4[2], 0);
  size_t n;
  uint32_t *w = sb_finish(&b, &n);
  sb_free(&b);
  char err[512];
  assert_true(mlc_spirv_validate(w, n, err, sizeof err));
  size_t blocks = 0; /* OpDecorate <struct> Block: the words' struct and the quads' */
  for (size_t at = 5; at < n; at += w[at] >> 16)
    if ((w[at] & 0xffff) == SpvOpDecorate && w[at + 2] == SpvDecorationBlock) blocks++;
  assert_int_equal(blocks, 2);
  free(w);
}

/* Twelve identical adds are one kernel named mlc_add_<xxh64 of its words>;
 * an add of another shape is another. */
static void test_dedup_and_names(void **state) {
  (void)state;
  prog *g = prog_new();
  int64_t d[2] = {8, 33};
  uint32_t x = input(g, MLC_DT_F32, 2, d), y = input(g, MLC_DT_F32, 2, d), adds[12];
  for (int k = 0; k < 12; k++) {
    uint32_t in[2] = {k ? adds[k - 1] : x, y};
    adds[k] = node(g, MLC_OP_ADD, in, 2, NULL, 0);
  }
  int64_t d2[1] = {33};
  uint32_t z = input(g, MLC_DT_F32, 1, d2), in[2] = {adds[11], z};
  uint32_t other = node(g, MLC_OP_ADD, in, 2, NULL, 0);
  mlc_spirv_module m;
  mlc_spirv_options o = {.coopmat = false, .optimize = true};
  char err[512];
  emit_ok(&g->p, &o, &m);
  assert_int_equal(m.nkernels, 2);
  uint64_t work;
  const char *s0 = mlc_spirv_kernel_namer(&m, g->f, adds[0], &work);
  for (int k = 1; k < 12; k++) {
    uint64_t w2;
    assert_string_equal(mlc_spirv_kernel_namer(&m, g->f, adds[k], &w2), s0);
  }
  const mlc_vk_kernel *kd = &m.kernels[m.kernel_of[0][adds[0]]];
  char want[64];
  snprintf(want, sizeof want, "mlc_add_%016llx", (unsigned long long)XXH64(kd->words, kd->nwords * 4, 0));
  assert_string_equal(s0, want);
  assert_int_equal(work, (uint64_t)kd->dispatch[0].groups[0] * kd->dispatch[0].groups[1]);
  assert_int_equal(kd->nargs, 3);
  assert_int_equal(kd->fallback, MLC_VK_NO_FALLBACK);
  assert_string_not_equal(mlc_spirv_kernel_namer(&m, g->f, other, &work), s0);
  assert_null(mlc_spirv_kernel_namer(&m, g->f, x, &work)); /* inputs have no kernel */
  for (uint32_t k = 0; k < m.nkernels; k++) assert_true(mlc_spirv_validate(m.kernels[k].words, m.kernels[k].nwords, err, sizeof err));
  prog_free(g);
}

/* The optimizer runs (the optimised softmax is smaller) and its output
 * validates; without it the builder's words are emitted as they are. */
static void test_optimizer(void **state) {
  (void)state;
  prog *g = prog_new();
  int64_t d[2] = {4, 1000};
  uint32_t x = input(g, MLC_DT_BF16, 2, d);
  mlc_attrs a1 = {.axis = 1};
  uint32_t sm = node(g, MLC_OP_SOFTMAX, &x, 1, &a1, 0);
  mlc_spirv_module m0, m1;
  mlc_spirv_options plain = {.coopmat = false, .optimize = false}, opt = {.coopmat = false, .optimize = true};
  char err[512];
  emit_ok(&g->p, &plain, &m0);
  emit_ok(&g->p, &opt, &m1);
  const mlc_vk_kernel *k0 = &m0.kernels[m0.kernel_of[0][sm]], *k1 = &m1.kernels[m1.kernel_of[0][sm]];
  assert_true(k1->nwords < k0->nwords);
  assert_true(mlc_spirv_validate(k0->words, k0->nwords, err, sizeof err));
  assert_true(mlc_spirv_validate(k1->words, k1->nwords, err, sizeof err));
  assert_int_equal(k0->ndispatch, k1->ndispatch);
  prog_free(g);
}

/* With coopmat (the KHR form, the default), an f16 GEMM names the
 * cooperative-matrix kernel, whose fallback is its NV form, whose fallback
 * is the portable kernel, all with the same arguments; a bf16 GEMM's KHR
 * kernel (bf16 matrices) falls back to the portable one directly (its NV
 * form would stage bf16 as f16, losing everything under 2^-24); an f32
 * GEMM keeps the portable one. */
static void test_coopmat_table(void **state) {
  (void)state;
  prog *g = prog_new();
  int64_t da[2] = {40, 48}, db[2] = {48, 24};
  uint32_t a = input(g, MLC_DT_F16, 2, da), b = input(g, MLC_DT_F16, 2, db), in[2] = {a, b};
  uint32_t mm = node(g, MLC_OP_MATMUL, in, 2, NULL, 0);
  uint32_t a2 = input(g, MLC_DT_F32, 2, da), b2 = input(g, MLC_DT_F32, 2, db), in2[2] = {a2, b2};
  uint32_t mm2 = node(g, MLC_OP_MATMUL, in2, 2, NULL, 0);
  uint32_t a3 = input(g, MLC_DT_BF16, 2, da), b3 = input(g, MLC_DT_BF16, 2, db), in3[2] = {a3, b3};
  uint32_t mm3 = node(g, MLC_OP_MATMUL, in3, 2, NULL, 0);
  mlc_spirv_module m;
  mlc_spirv_options o = {.coopmat = true, .optimize = true};
  char err[512];
  emit_ok(&g->p, &o, &m);
  const mlc_vk_kernel *k = &m.kernels[m.kernel_of[0][mm]];
  assert_true(k->coopmat);
  assert_int_equal(k->coopmat_mnk[0], 16);
  assert_int_not_equal(k->fallback, MLC_VK_NO_FALLBACK);
  const mlc_vk_kernel *nv = &m.kernels[k->fallback];
  assert_true(nv->coopmat);
  assert_int_equal(nv->nargs, k->nargs);
  assert_memory_not_equal(nv->words, k->words, 20 * 4); /* not the same module */
  assert_int_not_equal(nv->fallback, MLC_VK_NO_FALLBACK);
  const mlc_vk_kernel *fb = &m.kernels[nv->fallback];
  assert_false(fb->coopmat);
  assert_int_equal(fb->fallback, MLC_VK_NO_FALLBACK);
  assert_int_equal(fb->nargs, k->nargs);
  assert_true(mlc_spirv_validate(fb->words, fb->nwords, err, sizeof err));
  assert_false(m.kernels[m.kernel_of[0][mm2]].coopmat);
  const mlc_vk_kernel *k3 = &m.kernels[m.kernel_of[0][mm3]];
  assert_true(k3->coopmat);
  assert_false(m.kernels[k3->fallback].coopmat);
  prog_free(g);
  /* a fused GEMM with an epilogue too */
  g = prog_new();
  int64_t dx[2] = {40, 48}, dw[2] = {24, 48}, dbias[1] = {24};
  uint32_t fin[3] = {input(g, MLC_DT_F16, 2, dx), input(g, MLC_DT_F16, 2, dw), input(g, MLC_DT_F16, 1, dbias)};
  mlc_attrs fa = {.name = "linear($0, $1); add(#0, $2); silu(#1)"};
  uint32_t fz = node(g, MLC_OP_FUSED, fin, 3, &fa, 0);
  emit_ok(&g->p, &o, &m);
  k = &m.kernels[m.kernel_of[0][fz]];
  assert_true(k->coopmat);
  assert_int_equal(m.kernels[k->fallback].nargs, 4);
  prog_free(g);
}

/* ---------------------------------------------------------------- Vulkan */

typedef struct {
  VkInstance inst;
  VkPhysicalDevice pd;
  VkDevice dev;
  VkQueue q;
  uint32_t qf;
  VkCommandPool pool;
} vk;

static vk V;
static int vk_messages; /* warnings and errors of the validation layer */
static VkDebugUtilsMessengerEXT vk_messenger;

static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT sev, VkDebugUtilsMessageTypeFlagsEXT type,
                                                 const VkDebugUtilsMessengerCallbackDataEXT *d, void *user) {
  (void)type, (void)user;
  if (sev >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) {
    print_error("Vulkan validation: %s\n", d->pMessage);
    vk_messages++;
  }
  return VK_FALSE;
}

/* With the Khronos validation layer where it is installed (Debian's
 * vulkan-validationlayers): every warning or error fails the case. */
static bool has_layer(const char *name) {
  uint32_t n = 0;
  vkEnumerateInstanceLayerProperties(&n, NULL);
  VkLayerProperties lp[64];
  if (n > 64) n = 64;
  vkEnumerateInstanceLayerProperties(&n, lp);
  for (uint32_t i = 0; i < n; i++)
    if (!strcmp(lp[i].layerName, name)) return true;
  return false;
}

static bool vk_open(void) {
  VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .apiVersion = VK_API_VERSION_1_2};
  const char *layer = "VK_LAYER_KHRONOS_validation", *ext = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
  bool validate = has_layer(layer);
  VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app,
                              .enabledLayerCount = validate, .ppEnabledLayerNames = &layer,
                              .enabledExtensionCount = validate, .ppEnabledExtensionNames = &ext};
  size_t before = mlc_vk_loaded_objects();
  VkResult r = vkCreateInstance(&ici, NULL, &V.inst);
  mlc_vk_keep_loaded_since(before); /* the driver stays loaded under ASan, as in the runtime */
  if (r != VK_SUCCESS) return false;
  if (validate) {
    PFN_vkCreateDebugUtilsMessengerEXT mk = (PFN_vkCreateDebugUtilsMessengerEXT)vkGetInstanceProcAddr(V.inst, "vkCreateDebugUtilsMessengerEXT");
    VkDebugUtilsMessengerCreateInfoEXT mi = {
        .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
        .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
        .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
        .pfnUserCallback = on_message};
    if (mk) mk(V.inst, &mi, NULL, &vk_messenger);
    printf("validation: %s\n", layer);
  }
  uint32_t n = 0;
  if (vkEnumeratePhysicalDevices(V.inst, &n, NULL) != VK_SUCCESS || n == 0) return false;
  VkPhysicalDevice pds[8];
  if (n > 8) n = 8;
  vkEnumeratePhysicalDevices(V.inst, &n, pds);
  V.pd = pds[0];
  uint32_t nq = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(V.pd, &nq, NULL);
  VkQueueFamilyProperties qp[16];
  if (nq > 16) nq = 16;
  vkGetPhysicalDeviceQueueFamilyProperties(V.pd, &nq, qp);
  V.qf = UINT32_MAX;
  for (uint32_t i = 0; i < nq && V.qf == UINT32_MAX; i++)
    if (qp[i].queueFlags & VK_QUEUE_COMPUTE_BIT) V.qf = i;
  if (V.qf == UINT32_MAX) return false;
  float prio = 1.f;
  VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, .queueFamilyIndex = V.qf,
                                 .queueCount = 1, .pQueuePriorities = &prio};
  VkPhysicalDeviceFeatures feat; /* all it has: the i64 kernels need shaderInt64 */
  vkGetPhysicalDeviceFeatures(V.pd, &feat);
  feat.robustBufferAccess = VK_FALSE;
  VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .queueCreateInfoCount = 1, .pQueueCreateInfos = &qci,
                            .pEnabledFeatures = &feat};
  if (vkCreateDevice(V.pd, &dci, NULL, &V.dev) != VK_SUCCESS) return false;
  vkGetDeviceQueue(V.dev, V.qf, 0, &V.q);
  VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, .queueFamilyIndex = V.qf};
  return vkCreateCommandPool(V.dev, &pci, NULL, &V.pool) == VK_SUCCESS;
}

static void vk_close(void) {
  if (V.dev) {
    vkDestroyCommandPool(V.dev, V.pool, NULL);
    vkDestroyDevice(V.dev, NULL);
  }
  if (vk_messenger) {
    PFN_vkDestroyDebugUtilsMessengerEXT rm = (PFN_vkDestroyDebugUtilsMessengerEXT)vkGetInstanceProcAddr(V.inst, "vkDestroyDebugUtilsMessengerEXT");
    if (rm) rm(V.inst, vk_messenger, NULL);
    vk_messenger = VK_NULL_HANDLE;
  }
  if (V.inst) vkDestroyInstance(V.inst, NULL);
  memset(&V, 0, sizeof V);
}

#define CK(x) do { VkResult r_ = (x); if (r_ != VK_SUCCESS) fail_msg("%s: VkResult %d", #x, (int)r_); } while (0)

/* Runs kernel k with bindings bufs[0..nargs-1] (bytes[i] each; the last is
 * the output) and its scratch; copies every buffer back. */
static void vk_run(const mlc_vk_kernel *k, void **bufs, const size_t *bytes) {
  uint32_t nb = k->nargs + 1;
  int messages = vk_messages;
  VkBuffer b[40];
  VkDeviceMemory mem[40];
  void *map[40];
  size_t sz[40];
  assert_true(nb <= 40);
  VkPhysicalDeviceMemoryProperties mp;
  vkGetPhysicalDeviceMemoryProperties(V.pd, &mp);
  for (uint32_t i = 0; i < nb; i++) {
    sz[i] = i < k->nargs ? bytes[i] : (size_t)k->scratch;
    size_t alloc = (sz[i] + 15) / 16 * 16 + 16; /* words past a 16-bit tensor's end exist */
    VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = alloc,
                              .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT};
    CK(vkCreateBuffer(V.dev, &bci, NULL, &b[i]));
    VkMemoryRequirements mr;
    vkGetBufferMemoryRequirements(V.dev, b[i], &mr);
    uint32_t want = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT, t = 0;
    while (t < mp.memoryTypeCount && !((mr.memoryTypeBits >> t & 1) && (mp.memoryTypes[t].propertyFlags & want) == want)) t++;
    assert_true(t < mp.memoryTypeCount);
    VkMemoryAllocateInfo mai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = mr.size, .memoryTypeIndex = t};
    CK(vkAllocateMemory(V.dev, &mai, NULL, &mem[i]));
    CK(vkBindBufferMemory(V.dev, b[i], mem[i], 0));
    CK(vkMapMemory(V.dev, mem[i], 0, VK_WHOLE_SIZE, 0, &map[i]));
    memset(map[i], 0xcd, alloc); /* garbage: kernels must write what they own */
    if (i < k->nargs) memcpy(map[i], bufs[i], sz[i]);
  }
  VkDescriptorSetLayoutBinding lb[40];
  for (uint32_t i = 0; i < nb; i++)
    lb[i] = (VkDescriptorSetLayoutBinding){i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, NULL};
  VkDescriptorSetLayoutCreateInfo dl = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, .bindingCount = nb, .pBindings = lb};
  VkDescriptorSetLayout dsl;
  CK(vkCreateDescriptorSetLayout(V.dev, &dl, NULL, &dsl));
  VkPipelineLayoutCreateInfo pl = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, .setLayoutCount = 1, .pSetLayouts = &dsl};
  VkPipelineLayout layout;
  CK(vkCreatePipelineLayout(V.dev, &pl, NULL, &layout));
  VkShaderModuleCreateInfo smi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, .codeSize = k->nwords * 4, .pCode = k->words};
  VkShaderModule sm;
  CK(vkCreateShaderModule(V.dev, &smi, NULL, &sm));
  VkPipeline pipe[MLC_VK_MAX_DISPATCH];
  for (uint32_t d = 0; d < k->ndispatch; d++) {
    VkComputePipelineCreateInfo cp = {.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO, .layout = layout,
                                      .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                                                .stage = VK_SHADER_STAGE_COMPUTE_BIT, .module = sm, .pName = k->dispatch[d].entry}};
    CK(vkCreateComputePipelines(V.dev, VK_NULL_HANDLE, 1, &cp, NULL, &pipe[d]));
  }
  VkDescriptorPoolSize ps = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, nb};
  VkDescriptorPoolCreateInfo dp = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, .maxSets = 1, .poolSizeCount = 1, .pPoolSizes = &ps};
  VkDescriptorPool pool;
  CK(vkCreateDescriptorPool(V.dev, &dp, NULL, &pool));
  VkDescriptorSetAllocateInfo dsa = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO, .descriptorPool = pool,
                                     .descriptorSetCount = 1, .pSetLayouts = &dsl};
  VkDescriptorSet set;
  CK(vkAllocateDescriptorSets(V.dev, &dsa, &set));
  VkDescriptorBufferInfo bi[40];
  VkWriteDescriptorSet wr[40];
  for (uint32_t i = 0; i < nb; i++) {
    bi[i] = (VkDescriptorBufferInfo){b[i], 0, VK_WHOLE_SIZE};
    wr[i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, .dstSet = set, .dstBinding = i,
                                   .descriptorCount = 1, .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .pBufferInfo = &bi[i]};
  }
  vkUpdateDescriptorSets(V.dev, nb, wr, 0, NULL);
  VkCommandBufferAllocateInfo cba = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .commandPool = V.pool,
                                     .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1};
  VkCommandBuffer cb;
  CK(vkAllocateCommandBuffers(V.dev, &cba, &cb));
  VkCommandBufferBeginInfo cbi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  CK(vkBeginCommandBuffer(cb, &cbi));
  for (uint32_t d = 0; d < k->ndispatch; d++) {
    if (d) {
      VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                            .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
      vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
    }
    vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipe[d]);
    vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1, &set, 0, NULL);
    vkCmdDispatch(cb, k->dispatch[d].groups[0], k->dispatch[d].groups[1], k->dispatch[d].groups[2]);
  }
  CK(vkEndCommandBuffer(cb));
  VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cb};
  CK(vkQueueSubmit(V.q, 1, &si, VK_NULL_HANDLE));
  CK(vkQueueWaitIdle(V.q));
  for (uint32_t i = 0; i < k->nargs; i++) memcpy(bufs[i], map[i], sz[i]);
  vkFreeCommandBuffers(V.dev, V.pool, 1, &cb);
  vkDestroyDescriptorPool(V.dev, pool, NULL);
  for (uint32_t d = 0; d < k->ndispatch; d++) vkDestroyPipeline(V.dev, pipe[d], NULL);
  vkDestroyShaderModule(V.dev, sm, NULL);
  vkDestroyPipelineLayout(V.dev, layout, NULL);
  vkDestroyDescriptorSetLayout(V.dev, dsl, NULL);
  for (uint32_t i = 0; i < nb; i++) {
    vkUnmapMemory(V.dev, mem[i]);
    vkDestroyBuffer(V.dev, b[i], NULL);
    vkFreeMemory(V.dev, mem[i], NULL);
  }
  if (vk_messages != messages) fail_msg("%s: %d Vulkan validation messages (above)", k->symbol, vk_messages - messages);
}

/* ---------------------------------------------------------------- data */

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double urand(void) { /* [-1, 1) */
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (double)(rng >> 11) / (double)(1ull << 52) - 1.0;
}

static float bf16_to_f(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static uint16_t f_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}
static float f16_to_f(uint16_t h) {
  int e = (h >> 10) & 31, m = h & 1023;
  double v = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
  return (float)((h & 0x8000) ? -v : v);
}
static uint16_t f_to_f16(float f) { /* round to nearest even */
  uint32_t u;
  memcpy(&u, &f, 4);
  uint32_t sg = (u >> 16) & 0x8000u, m = u & 0x7fffffu, r, rem, half;
  int e = (int)((u >> 23) & 0xff) - 127 + 15, shift;
  if (e >= 31) return (uint16_t)(sg | 0x7c00u);
  if (e <= 0) { /* subnormal */
    if (e < -10) return (uint16_t)sg;
    m |= 0x800000u;
    shift = 14 - e;
  } else {
    shift = 13;
  }
  r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
  if (e > 0) r |= (uint32_t)e << 10;
  if (rem > half || (rem == half && (r & 1))) r++;
  return (uint16_t)(sg | r);
}

/* A tensor's data in its dtype, with a double copy of its values. */
typedef struct {
  int dt;
  size_t n;
  void *raw;
  double *v;
} tensor;

static tensor make(int dt, size_t n, double scale) {
  tensor t = {dt, n, calloc(n ? n : 1, (size_t)mlc_dtype_size((mlc_dtype)dt)), calloc(n ? n : 1, sizeof(double))};
  for (size_t i = 0; i < n; i++) {
    float f = (float)(urand() * scale);
    if (dt == MLC_DT_F32) ((float *)t.raw)[i] = f, t.v[i] = f;
    else if (dt == MLC_DT_BF16) ((uint16_t *)t.raw)[i] = f_to_bf16(f), t.v[i] = bf16_to_f(f_to_bf16(f));
    else if (dt == MLC_DT_F16) ((uint16_t *)t.raw)[i] = f_to_f16(f), t.v[i] = f16_to_f(((uint16_t *)t.raw)[i]);
  }
  return t;
}

static tensor make_idx(int dt, size_t n, int64_t lo, int64_t hi) {
  tensor t = {dt, n, calloc(n, (size_t)mlc_dtype_size((mlc_dtype)dt)), calloc(n, sizeof(double))};
  for (size_t i = 0; i < n; i++) {
    int64_t k = lo + (int64_t)((urand() + 1) / 2 * (double)(hi - lo));
    if (dt == MLC_DT_I32) ((int32_t *)t.raw)[i] = (int32_t)k;
    else ((int64_t *)t.raw)[i] = k;
    t.v[i] = (double)k;
  }
  return t;
}

static double get(const tensor *t, size_t i) {
  switch (t->dt) {
  case MLC_DT_F32: return ((float *)t->raw)[i];
  case MLC_DT_BF16: return bf16_to_f(((uint16_t *)t->raw)[i]);
  case MLC_DT_F16: return f16_to_f(((uint16_t *)t->raw)[i]);
  case MLC_DT_I32: return ((int32_t *)t->raw)[i];
  default: return (double)((int64_t *)t->raw)[i];
  }
}

static void drop(tensor *t) {
  free(t->raw);
  free(t->v);
}

/* Compares out (as computed) with ref[] (double). */
static void check(const char *what, const tensor *out, const double *ref) {
  int bad = 0;
  for (size_t i = 0; i < out->n; i++) {
    double got = get(out, i), want = ref[i], tol;
    if (out->dt == MLC_DT_F32) tol = 2e-5 * fabs(want) + 1e-6;
    else if (out->dt == MLC_DT_BF16) tol = ldexp(fabs(want), -7) + 1e-6;
    else tol = ldexp(fabs(want), -10) + 1e-6;
    if (!(fabs(got - want) <= tol)) {
      if (bad < 5) print_error("%s[%zu]: got %.8g, want %.8g\n", what, i, got, want);
      bad++;
    }
  }
  if (bad) fail_msg("%s: %d of %zu elements differ", what, bad, out->n);
}

/* Emits g and runs node `at` with the given inputs; out gets the result. */
static void run_node(prog *g, uint32_t at, tensor *ins, int nin, tensor *out) {
  mlc_spirv_module m;
  mlc_spirv_options o = {.coopmat = false, .optimize = true};
  emit_ok(&g->p, &o, &m);
  const mlc_vk_kernel *k = &m.kernels[m.kernel_of[0][at]];
  void *bufs[40];
  size_t bytes[40];
  for (int i = 0; i < nin; i++) bufs[i] = ins[i].raw, bytes[i] = ins[i].n * (size_t)mlc_dtype_size((mlc_dtype)ins[i].dt);
  bufs[nin] = out->raw;
  bytes[nin] = out->n * (size_t)mlc_dtype_size((mlc_dtype)out->dt);
  vk_run(k, bufs, bytes);
}

/* ---------------------------------------------------------------- cases */

/* x[R, C] + y[C] in bf16: odd sizes (a lone 16-bit element at the end) and even ones (whole words) */
static void add_case(int R, int C) {
  prog *g = prog_new();
  int64_t da[2] = {R, C}, db[1] = {C};
  uint32_t in[2] = {input(g, MLC_DT_BF16, 2, da), input(g, MLC_DT_BF16, 1, db)};
  uint32_t n = node(g, MLC_OP_ADD, in, 2, NULL, 0);
  tensor x[2] = {make(MLC_DT_BF16, (size_t)(R * C), 2), make(MLC_DT_BF16, (size_t)C, 2)}, out = make(MLC_DT_BF16, (size_t)(R * C), 0);
  run_node(g, n, x, 2, &out);
  double *ref = calloc((size_t)(R * C), sizeof *ref);
  for (int i = 0; i < R * C; i++) ref[i] = bf16_to_f(f_to_bf16((float)(x[0].v[i] + x[1].v[i % C])));
  check("add bf16", &out, ref);
  free(ref);
  drop(&x[0]), drop(&x[1]), drop(&out);
  prog_free(g);
}

static void test_add_broadcast_bf16(void **state) {
  (void)state;
  add_case(5, 7);
  add_case(6, 8);
}

static void test_unary_f16(void **state) {
  (void)state;
  static const mlc_op ops[] = {MLC_OP_GELU, MLC_OP_SILU, MLC_OP_TANH, MLC_OP_SIGMOID, MLC_OP_EXP};
  for (size_t o = 0; o < 2 * sizeof ops / sizeof *ops; o++) {
    prog *g = prog_new();
    int N = o % 2 ? 100 : 101;
    int64_t d[1] = {N};
    uint32_t in = input(g, MLC_DT_F16, 1, d), n = node(g, ops[o / 2], &in, 1, NULL, 0);
    tensor x = make(MLC_DT_F16, (size_t)N, 4), out = make(MLC_DT_F16, (size_t)N, 0);
    run_node(g, n, &x, 1, &out);
    double ref[101];
    for (int i = 0; i < N; i++) {
      double v = x.v[i], r;
      switch (ops[o / 2]) {
      case MLC_OP_GELU: r = 0.5 * v * (1 + erf(v / sqrt(2))); break;
      case MLC_OP_SILU: r = v / (1 + exp(-v)); break;
      case MLC_OP_TANH: r = tanh(v); break;
      case MLC_OP_SIGMOID: r = 1 / (1 + exp(-v)); break;
      default: r = exp(v); break;
      }
      ref[i] = f16_to_f(f_to_f16((float)r));
    }
    check(mlc_ops[ops[o / 2]].name, &out, ref);
    drop(&x), drop(&out);
    prog_free(g);
  }
}

static void test_gelu_grad_cast(void **state) {
  (void)state;
  prog *g = prog_new();
  int64_t d[1] = {77};
  uint32_t in[2] = {input(g, MLC_DT_F32, 1, d), input(g, MLC_DT_F32, 1, d)};
  uint32_t n = node(g, MLC_OP_GELU_GRAD, in, 2, NULL, 0);
  uint32_t c = node(g, MLC_OP_CAST, &n, 1, NULL, MLC_DT_BF16);
  tensor x[2] = {make(MLC_DT_F32, 77, 1), make(MLC_DT_F32, 77, 5)}, out = make(MLC_DT_F32, 77, 0);
  run_node(g, n, x, 2, &out);
  double ref[77];
  for (int i = 0; i < 77; i++) {
    double v = x[1].v[i];
    ref[i] = x[0].v[i] * (0.5 * (1 + erf(v / sqrt(2))) + v * exp(-v * v / 2) / 2.5066282746310002);
  }
  check("gelu_grad", &out, ref);
  tensor cb = make(MLC_DT_BF16, 77, 0);
  run_node(g, c, &out, 1, &cb);
  for (int i = 0; i < 77; i++) ref[i] = bf16_to_f(f_to_bf16((float)get(&out, (size_t)i)));
  check("cast to bf16", &cb, ref);
  drop(&x[0]), drop(&x[1]), drop(&out), drop(&cb);
  prog_free(g);
}

static void test_softmax_and_sums(void **state) {
  (void)state;
  prog *g = prog_new();
  int64_t d[2] = {3, 300};
  uint32_t x = input(g, MLC_DT_F32, 2, d);
  mlc_attrs a1 = {.axis = 1}, a0 = {.axis = 0};
  uint32_t sm = node(g, MLC_OP_SOFTMAX, &x, 1, &a1, 0), s0 = node(g, MLC_OP_SUM, &x, 1, &a0, 0);
  uint32_t mx = node(g, MLC_OP_MAX, &x, 1, &a1, 0);
  tensor in = make(MLC_DT_F32, 900, 3), o1 = make(MLC_DT_F32, 900, 0), o2 = make(MLC_DT_F32, 300, 0), o3 = make(MLC_DT_F32, 3, 0);
  run_node(g, sm, &in, 1, &o1);
  run_node(g, s0, &in, 1, &o2);
  run_node(g, mx, &in, 1, &o3);
  double ref[900], r2[300], r3[3];
  for (int r = 0; r < 3; r++) {
    double m = -INFINITY, s = 0;
    for (int j = 0; j < 300; j++) m = fmax(m, in.v[r * 300 + j]);
    for (int j = 0; j < 300; j++) s += exp(in.v[r * 300 + j] - m);
    for (int j = 0; j < 300; j++) ref[r * 300 + j] = exp(in.v[r * 300 + j] - m) / s;
    r3[r] = m;
  }
  for (int j = 0; j < 300; j++) r2[j] = in.v[j] + in.v[300 + j] + in.v[600 + j];
  check("softmax", &o1, ref);
  check("sum axis 0", &o2, r2);
  check("max axis 1", &o3, r3);
  drop(&in), drop(&o1), drop(&o2), drop(&o3);
  prog_free(g);
}

/* transpose(0, 2), slice of the last axis, concat on it, in f16 */
static void layout_case(int A, int B, int C) {
  prog *g = prog_new();
  int64_t d[3] = {A, B, C};
  int n = A * B * C, sl = C - 3, nc = A * B * (C + sl);
  uint32_t x = input(g, MLC_DT_F16, 3, d);
  mlc_attrs at = {.axis = 0, .axis2 = 2}, as = {.axis = 2, .start = 2, .end = C - 1};
  uint32_t t = node(g, MLC_OP_TRANSPOSE, &x, 1, &at, 0), sn = node(g, MLC_OP_SLICE, &x, 1, &as, 0);
  uint32_t cin[2] = {x, sn};
  mlc_attrs ac = {.axis = 2};
  uint32_t cc = node(g, MLC_OP_CONCAT, cin, 2, &ac, 0);
  tensor in = make(MLC_DT_F16, (size_t)n, 1), o1 = make(MLC_DT_F16, (size_t)n, 0), o2 = make(MLC_DT_F16, (size_t)(A * B * sl), 0);
  tensor o3 = make(MLC_DT_F16, (size_t)nc, 0);
  run_node(g, t, &in, 1, &o1);
  run_node(g, sn, &in, 1, &o2);
  tensor cins[2] = {in, o2};
  run_node(g, cc, cins, 2, &o3);
  double *r1 = calloc((size_t)n, sizeof *r1), *r2 = calloc((size_t)(A * B * sl), sizeof *r2), *r3 = calloc((size_t)nc, sizeof *r3);
  for (int i = 0; i < A; i++)
    for (int j = 0; j < B; j++)
      for (int k = 0; k < C; k++) r1[(k * B + j) * A + i] = in.v[(i * B + j) * C + k];
  for (int i = 0; i < A * B; i++)
    for (int k = 0; k < sl; k++) r2[i * sl + k] = in.v[i * C + 2 + k];
  for (int i = 0; i < A * B; i++)
    for (int k = 0; k < C + sl; k++) r3[i * (C + sl) + k] = k < C ? in.v[i * C + k] : in.v[i * C + 2 + k - C];
  check("transpose f16", &o1, r1);
  check("slice f16", &o2, r2);
  check("concat f16", &o3, r3);
  free(r1), free(r2), free(r3);
  drop(&in), drop(&o1), drop(&o2), drop(&o3);
  prog_free(g);
}

/* sum, mean, max over a long leading axis (chunked), bf16 input */
static void test_long_axis(void **state) {
  (void)state;
  prog *g = prog_new();
  int64_t d[3] = {2, 300, 7};
  uint32_t x = input(g, MLC_DT_BF16, 3, d);
  mlc_attrs a1 = {.axis = 1};
  uint32_t sm = node(g, MLC_OP_SUM, &x, 1, &a1, 0), mn = node(g, MLC_OP_MEAN, &x, 1, &a1, 0), mx = node(g, MLC_OP_MAX, &x, 1, &a1, 0);
  tensor in = make(MLC_DT_BF16, 4200, 2), o[3] = {make(MLC_DT_BF16, 14, 0), make(MLC_DT_BF16, 14, 0), make(MLC_DT_BF16, 14, 0)};
  ((uint16_t *)in.raw)[7 * 150 + 3] = 0x7fc0; /* a NaN in (0, 150, 3): max gives NaN there */
  in.v[7 * 150 + 3] = NAN;
  run_node(g, sm, &in, 1, &o[0]);
  run_node(g, mn, &in, 1, &o[1]);
  run_node(g, mx, &in, 1, &o[2]);
  double rs[14], rm[14], rx[14];
  for (int b = 0; b < 2; b++)
    for (int c = 0; c < 7; c++) {
      double s = 0, m = -INFINITY;
      for (int j = 0; j < 300; j++) {
        double v = in.v[(b * 300 + j) * 7 + c];
        s += v;
        m = isnan(v) || v > m ? v : m;
      }
      rs[b * 7 + c] = s, rm[b * 7 + c] = s / 300, rx[b * 7 + c] = m;
    }
  for (int i = 0; i < 14; i++) {
    if (i == 3) { /* the NaN column */
      assert_true(isnan(get(&o[0], 3)) && isnan(get(&o[2], 3)));
      rs[3] = rm[3] = rx[3] = 0;
      ((uint16_t *)o[0].raw)[3] = ((uint16_t *)o[1].raw)[3] = ((uint16_t *)o[2].raw)[3] = 0;
    }
  }
  check("sum long axis", &o[0], rs);
  check("mean long axis", &o[1], rm);
  check("max long axis", &o[2], rx);
  drop(&in), drop(&o[0]), drop(&o[1]), drop(&o[2]);
  prog_free(g);
}

static void test_layout(void **state) {
  (void)state;
  layout_case(3, 5, 7);
  layout_case(4, 6, 8);
}

/* C[b] = A[b] B[b] with A, B as given by the op; double reference. */
static void gemm_case(mlc_op op, int dt, int64_t M, int64_t N, int64_t K) {
  prog *g = prog_new();
  int64_t da[2], db[2];
  if (op == MLC_OP_MATMUL_TN) da[0] = K, da[1] = M, db[0] = K, db[1] = N;
  else if (op == MLC_OP_LINEAR) da[0] = M, da[1] = K, db[0] = N, db[1] = K;
  else da[0] = M, da[1] = K, db[0] = K, db[1] = N;
  uint32_t in[2] = {input(g, dt, 2, da), input(g, dt, 2, db)};
  uint32_t n = node(g, op, in, 2, NULL, 0);
  tensor x[2] = {make(dt, (size_t)(M * K), 1), make(dt, (size_t)(K * N), 1)}, out = make(dt, (size_t)(M * N), 0);
  run_node(g, n, x, 2, &out);
  double *ref = calloc((size_t)(M * N), sizeof *ref);
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      double s = 0;
      for (int64_t k = 0; k < K; k++) {
        double a = op == MLC_OP_MATMUL_TN ? x[0].v[k * M + i] : x[0].v[i * K + k];
        double b = op == MLC_OP_LINEAR ? x[1].v[j * K + k] : x[1].v[k * N + j];
        s += a * b;
      }
      ref[i * N + j] = dt == MLC_DT_BF16 ? bf16_to_f(f_to_bf16((float)s)) : s;
    }
  char what[64];
  snprintf(what, sizeof what, "%s %s %lldx%lldx%lld", mlc_ops[op].name, mlc_dtype_name((mlc_dtype)dt), (long long)M, (long long)N,
           (long long)K);
  check(what, &out, ref);
  free(ref);
  drop(&x[0]), drop(&x[1]), drop(&out);
  prog_free(g);
}

static void test_gemms(void **state) {
  (void)state;
  gemm_case(MLC_OP_MATMUL, MLC_DT_F32, 70, 33, 45);
  gemm_case(MLC_OP_LINEAR, MLC_DT_BF16, 19, 130, 37);
  gemm_case(MLC_OP_MATMUL_TN, MLC_DT_F32, 20, 50, 37);
  /* enough tiles for the 128 x 128 kernel, with edges */
  gemm_case(MLC_OP_LINEAR, MLC_DT_BF16, 1500, 1502, 20);
  gemm_case(MLC_OP_MATMUL_TN, MLC_DT_F32, 1500, 1499, 19);
  /* 16-bit operands loaded a word at a time: along k (linear), along rows (matmul's B, matmul_tn's A) */
  gemm_case(MLC_OP_LINEAR, MLC_DT_F16, 30, 66, 40);
  gemm_case(MLC_OP_MATMUL, MLC_DT_BF16, 34, 70, 38);
  gemm_case(MLC_OP_MATMUL_TN, MLC_DT_BF16, 70, 34, 37);
  gemm_case(MLC_OP_MATMUL, MLC_DT_BF16, 33, 71, 38); /* odd n: B along rows one at a time */
}

/* The cooperative-matrix kernel's staging (16-byte quads, checked and
 * exact loads, one and two stages) and its store, through its emulation
 * (emit_gemm.c: scalar FMAs in place of the cooperative matrices, which
 * lavapipe lacks), as the portable kernel of these 16-bit GEMMs. */
static void test_coopmat_emulated(void **state) {
  (void)state;
  char err[256];
  g_opts.spirv_emulate_coopmat = true;
  gemm_case(MLC_OP_MATMUL, MLC_DT_F16, 128, 128, 64);  /* whole tiles: loads without checks */
  gemm_case(MLC_OP_LINEAR, MLC_DT_BF16, 37, 72, 40);   /* quads, rows checked */
  gemm_case(MLC_OP_MATMUL, MLC_DT_BF16, 33, 70, 38);   /* element by element */
  gemm_case(MLC_OP_MATMUL_TN, MLC_DT_F16, 70, 64, 48); /* A along m, B along n */
  assert_true(mlc_options_set(&g_opts, "spirv-gemm-tile", "64x64x32x32x64x1", err, sizeof err)); /* one stage, slices of 64 */
  gemm_case(MLC_OP_MATMUL, MLC_DT_F16, 128, 192, 128);
  gemm_case(MLC_OP_LINEAR, MLC_DT_F16, 50, 64, 72);
  /* subgroup tiles of 8 x 2 and 2 x 8 accumulators (more than 4 a side:
   * the emitter once kept them in 4 x 4 arrays) */
  assert_true(mlc_options_set(&g_opts, "spirv-gemm-tile", "128x64x128x32x32x2", err, sizeof err));
  gemm_case(MLC_OP_MATMUL, MLC_DT_F16, 128, 128, 64);
  assert_true(mlc_options_set(&g_opts, "spirv-gemm-tile", "64x128x32x128x32x2", err, sizeof err));
  gemm_case(MLC_OP_MATMUL_TN, MLC_DT_F16, 70, 130, 48);
  /* bf16 staged as its own bits, as the KHR form's bf16 kernel stages it
   * (--spirv-coopmat=khr): whole tiles, checked quads, element by element,
   * A along m and B along n */
  g_opts.spirv_coopmat_nv = false;
  /* the attention's block of keys: 32 or 64, nothing else, said so */
  assert_false(mlc_options_set(&g_opts, "spirv-attention-keys", "48", err, sizeof err));
  assert_string_equal(err, "--spirv-attention-keys 48: expected 32 (the default) or 64 (where shared memory allows)");
  assert_int_equal(g_opts.spirv_attention_keys, 0);
  assert_true(mlc_options_set(&g_opts, "spirv-attention-keys", "32", err, sizeof err));
  assert_int_equal(g_opts.spirv_attention_keys, 32);
  assert_true(mlc_options_set(&g_opts, "spirv-gemm-tile", "64x64x32x32x32x2", err, sizeof err));
  gemm_case(MLC_OP_MATMUL, MLC_DT_BF16, 128, 128, 64);
  gemm_case(MLC_OP_LINEAR, MLC_DT_BF16, 37, 72, 40);
  gemm_case(MLC_OP_MATMUL, MLC_DT_BF16, 33, 70, 38);
  gemm_case(MLC_OP_MATMUL_TN, MLC_DT_BF16, 70, 64, 48);
}

static int coopmat_emulated_end(void **state) { /* also after a failed case */
  (void)state;
  g_opts = (mlc_options){0};
  return 0;
}

static void test_batched_matmul(void **state) {
  (void)state;
  prog *g = prog_new();
  int64_t da[3] = {2, 9, 5}, db[3] = {2, 5, 6};
  uint32_t in[2] = {input(g, MLC_DT_F32, 3, da), input(g, MLC_DT_F32, 3, db)};
  uint32_t n = node(g, MLC_OP_MATMUL, in, 2, NULL, 0);
  tensor x[2] = {make(MLC_DT_F32, 90, 1), make(MLC_DT_F32, 60, 1)}, out = make(MLC_DT_F32, 108, 0);
  run_node(g, n, x, 2, &out);
  double ref[108];
  for (int b = 0; b < 2; b++)
    for (int i = 0; i < 9; i++)
      for (int j = 0; j < 6; j++) {
        double s = 0;
        for (int k = 0; k < 5; k++) s += x[0].v[b * 45 + i * 5 + k] * x[1].v[b * 30 + k * 6 + j];
        ref[b * 54 + i * 6 + j] = s;
      }
  check("batched matmul", &out, ref);
  drop(&x[0]), drop(&x[1]), drop(&out);
  prog_free(g);
}

/* rmsnorm, layernorm_grad_x, rmsnorm_grad_w over rows of 300 in dtype dt */
static void norms_case(int dt, int R, int D) {
  prog *g = prog_new();
  int64_t d[2] = {R, D}, dw[1] = {D};
  uint32_t x = input(g, dt, 2, d), w = input(g, dt, 1, dw), gr = input(g, dt, 2, d);
  mlc_attrs eps = {.f = 1e-5};
  uint32_t in2[2] = {x, w}, in3[3] = {gr, x, w}, ing[2] = {gr, x};
  uint32_t rms = node(g, MLC_OP_RMSNORM, in2, 2, &eps, 0), lgx = node(g, MLC_OP_LAYERNORM_GRAD_X, in3, 3, &eps, 0);
  uint32_t rgw = node(g, MLC_OP_RMSNORM_GRAD_W, ing, 2, &eps, 0);
  size_t n = (size_t)(R * D);
  tensor X = make(dt, n, 2), W = make(dt, (size_t)D, 1), G = make(dt, n, 1);
  tensor o1 = make(dt, n, 0), o2 = make(dt, n, 0), o3 = make(dt, (size_t)D, 0);
  tensor a[2] = {X, W}, b[3] = {G, X, W}, c[2] = {G, X};
  run_node(g, rms, a, 2, &o1);
  run_node(g, lgx, b, 3, &o2);
  run_node(g, rgw, c, 2, &o3);
  double *r1 = calloc(n, sizeof *r1), *r2 = calloc(n, sizeof *r2), *r3 = calloc((size_t)D, sizeof *r3);
  double *a3 = calloc((size_t)D, sizeof *a3); /* sum of |terms| of r3 */
  for (int r = 0; r < R; r++) {
    const double *xr = X.v + r * D, *gg = G.v + r * D;
    double ss = 0, mu = 0, var = 0, hx = 0, hs = 0;
    for (int j = 0; j < D; j++) ss += xr[j] * xr[j], mu += xr[j];
    mu /= D;
    double rr = 1 / sqrt(ss / D + 1e-5);
    for (int j = 0; j < D; j++) r1[r * D + j] = xr[j] * rr * W.v[j], var += (xr[j] - mu) * (xr[j] - mu), r3[j] += gg[j] * xr[j] * rr, a3[j] += fabs(gg[j] * xr[j] * rr);
    double rl = 1 / sqrt(var / D + 1e-5);
    for (int j = 0; j < D; j++) hx += gg[j] * W.v[j] * (xr[j] - mu), hs += gg[j] * W.v[j];
    for (int j = 0; j < D; j++)
      r2[r * D + j] = gg[j] * W.v[j] * rl - rl * hs / D - (xr[j] - mu) * rl * rl * rl * hx / D;
  }
  check("rmsnorm", &o1, r1);
  check("layernorm_grad_x", &o2, r2);
  /* a sum over R rows: f32 rounding relative to the terms' size, where they cancel */
  for (int j = 0; j < D; j++) {
    double got = get(&o3, (size_t)j), tol = (dt == MLC_DT_F32 ? 2e-5 * fabs(r3[j]) : ldexp(fabs(r3[j]), -7)) + 1e-6 * a3[j] + 1e-7;
    if (!(fabs(got - r3[j]) <= tol)) fail_msg("rmsnorm_grad_w[%d]: got %.8g, want %.8g", j, got, r3[j]);
  }
  free(r1), free(r2), free(r3), free(a3);
  drop(&X), drop(&W), drop(&G), drop(&o1), drop(&o2), drop(&o3);
  prog_free(g);
}

static void test_norms(void **state) {
  (void)state;
  norms_case(MLC_DT_F32, 4, 300);
  norms_case(MLC_DT_BF16, 4, 300);
  norms_case(MLC_DT_F32, 150, 33); /* grad_w over three chunks of rows */
}

/* over rows of C logits (bf16) with i64 targets, two of them ignored */
static void ce_case(int C) {
  prog *g = prog_new();
  int64_t dl[2] = {6, C}, dt[1] = {6};
  uint32_t lg = input(g, MLC_DT_BF16, 2, dl), tg = input(g, MLC_DT_I64, 1, dt);
  uint32_t in[2] = {lg, tg}, ce = node(g, MLC_OP_CROSS_ENTROPY, in, 2, NULL, 0);
  int64_t none[1] = {0};
  uint32_t gs = input(g, MLC_DT_F32, 0, none), in3[3] = {gs, lg, tg};
  uint32_t ceg = node(g, MLC_OP_CROSS_ENTROPY_GRAD, in3, 3, NULL, 0);
  tensor L = make(MLC_DT_BF16, (size_t)(6 * C), 4), T = make_idx(MLC_DT_I64, 6, 0, C), out = make(MLC_DT_F32, 1, 0);
  ((int64_t *)T.raw)[2] = -1, T.v[2] = -1;   /* ignored */
  ((int64_t *)T.raw)[4] = C, T.v[4] = C; /* ignored */
  tensor ins[2] = {L, T};
  run_node(g, ce, ins, 2, &out);
  tensor G = make(MLC_DT_F32, 1, 0), og = make(MLC_DT_BF16, (size_t)(6 * C), 0);
  ((float *)G.raw)[0] = 1.5f, G.v[0] = 1.5;
  tensor ins3[3] = {G, L, T};
  run_node(g, ceg, ins3, 3, &og);
  double loss = 0, rg[6 * 301];
  int cnt = 0;
  for (int r = 0; r < 6; r++) {
    int64_t t = (int64_t)T.v[r];
    double m = -INFINITY, s = 0;
    for (int j = 0; j < C; j++) m = fmax(m, L.v[r * C + j]);
    for (int j = 0; j < C; j++) s += exp(L.v[r * C + j] - m);
    if (t >= 0 && t < C) loss += m + log(s) - L.v[r * C + t], cnt++;
  }
  for (int r = 0; r < 6; r++) {
    int64_t t = (int64_t)T.v[r];
    double m = -INFINITY, s = 0;
    for (int j = 0; j < C; j++) m = fmax(m, L.v[r * C + j]);
    for (int j = 0; j < C; j++) s += exp(L.v[r * C + j] - m);
    for (int j = 0; j < C; j++) {
      double p = exp(L.v[r * C + j] - m) / s - (j == t);
      rg[r * C + j] = t >= 0 && t < C ? bf16_to_f(f_to_bf16((float)(p * 1.5 / cnt))) : 0;
    }
  }
  double rl = loss / cnt;
  check("cross_entropy", &out, &rl);
  check("cross_entropy_grad", &og, rg);
  drop(&L), drop(&T), drop(&out), drop(&G), drop(&og);
  prog_free(g);
}

static void test_cross_entropy(void **state) {
  (void)state;
  ce_case(301);
  ce_case(300);
}

/* rows of D (bf16 table), i32 indices, two out of range */
static void emb_case(int D) {
  prog *g = prog_new();
  int64_t dw[2] = {11, D}, di[1] = {20}, dg[2] = {20, D};
  uint32_t w = input(g, MLC_DT_BF16, 2, dw), ix = input(g, MLC_DT_I32, 1, di), gg = input(g, MLC_DT_F32, 2, dg);
  uint32_t in[2] = {w, ix}, e = node(g, MLC_OP_EMBEDDING, in, 2, NULL, 0);
  mlc_attrs sh = {0};
  uint32_t ing[2] = {gg, ix}, eg = mlc_func_add(&g->p, g->f, MLC_OP_EMBEDDING_GRAD, ing, 2, &sh, (mlc_loc){0, 0, 0}, "");
  g->f->nodes[eg].type = (mlc_type){.dtype = MLC_DT_F32, .rank = 2, .dim = {11, D}};
  tensor W = make(MLC_DT_BF16, (size_t)(11 * D), 1), I = make_idx(MLC_DT_I32, 20, 0, 6), G = make(MLC_DT_F32, (size_t)(20 * D), 1);
  ((int32_t *)I.raw)[3] = -2, I.v[3] = -2;
  ((int32_t *)I.raw)[7] = 11, I.v[7] = 11;
  tensor o1 = make(MLC_DT_BF16, (size_t)(20 * D), 0), o2 = make(MLC_DT_F32, (size_t)(11 * D), 0);
  tensor a[2] = {W, I}, b[2] = {G, I};
  run_node(g, e, a, 2, &o1);
  run_node(g, eg, b, 2, &o2);
  double r1[20 * 9], r2[11 * 9] = {0};
  for (int t = 0; t < 20; t++) {
    int k = (int)I.v[t];
    for (int d = 0; d < D; d++) {
      r1[t * D + d] = k >= 0 && k < 11 ? W.v[k * D + d] : 0;
      if (k >= 0 && k < 11) r2[k * D + d] += G.v[t * D + d];
    }
  }
  check("embedding", &o1, r1);
  check("embedding_grad", &o2, r2);
  drop(&W), drop(&I), drop(&G), drop(&o1), drop(&o2);
  prog_free(g);
}

static void test_embedding(void **state) {
  (void)state;
  emb_case(9);
  emb_case(8);
}

/* attention and attention_grad (causal and not) against double references;
 * the gradient's reference is the analytic one, checked itself against a
 * finite difference of the reference forward. */
static void attn_ref(const double *q, const double *k, const double *v, int S, int D, bool causal, double sc, double *o) {
  for (int i = 0; i < S; i++) {
    double p[64], m = -INFINITY, s = 0;
    for (int j = 0; j < S; j++) {
      double d = 0;
      for (int c = 0; c < D; c++) d += q[i * D + c] * k[j * D + c];
      p[j] = causal && j > i ? -INFINITY : d * sc;
      m = fmax(m, p[j]);
    }
    for (int j = 0; j < S; j++) s += p[j] = exp(p[j] - m);
    for (int c = 0; c < D; c++) {
      double a = 0;
      for (int j = 0; j < S; j++) a += p[j] / s * v[j * D + c];
      o[i * D + c] = a;
    }
  }
}

static void test_attention(void **state) {
  (void)state;
  for (int causal = 0; causal < 2; causal++) {
    enum { B = 2, S = 7, D = 5, N = B * S * D };
    prog *g = prog_new();
    int64_t d[4] = {1, B, S, D};
    uint32_t q = input(g, MLC_DT_F32, 4, d), k = input(g, MLC_DT_F32, 4, d), v = input(g, MLC_DT_F32, 4, d), go = input(g, MLC_DT_F32, 4, d);
    mlc_attrs a = {.causal = causal, .f = 0.37};
    uint32_t in[3] = {q, k, v}, at = node(g, MLC_OP_ATTENTION, in, 3, &a, 0);
    uint32_t ig[4] = {go, q, k, v}, ag = node(g, MLC_OP_ATTENTION_GRAD, ig, 4, &a, 0);
    tensor Q = make(MLC_DT_F32, N, 1), K = make(MLC_DT_F32, N, 1), Vv = make(MLC_DT_F32, N, 1), G = make(MLC_DT_F32, N, 1);
    tensor o = make(MLC_DT_F32, N, 0), og = make(MLC_DT_F32, 3 * N, 0);
    tensor ins[3] = {Q, K, Vv}, insg[4] = {G, Q, K, Vv};
    run_node(g, at, ins, 3, &o);
    run_node(g, ag, insg, 4, &og);
    double ref[N], rg[3 * N];
    for (int b = 0; b < B; b++) attn_ref(Q.v + b * S * D, K.v + b * S * D, Vv.v + b * S * D, S, D, causal, 0.37, ref + b * S * D);
    check(causal ? "attention causal" : "attention", &o, ref);
    /* d(sum(g * out)) / d(each input), by central differences of the reference */
    double *ops[3] = {Q.v, K.v, Vv.v};
    for (int w = 0; w < 3; w++)
      for (int e = 0; e < N; e++) {
        double keep = ops[w][e], h = 1e-5, f[2];
        for (int sgn = 0; sgn < 2; sgn++) {
          ops[w][e] = keep + (sgn ? -h : h);
          double tmp[N];
          for (int b = 0; b < B; b++) attn_ref(Q.v + b * S * D, K.v + b * S * D, Vv.v + b * S * D, S, D, causal, 0.37, tmp + b * S * D);
          f[sgn] = 0;
          for (int t = 0; t < N; t++) f[sgn] += G.v[t] * tmp[t];
        }
        ops[w][e] = keep;
        rg[w * N + e] = (f[0] - f[1]) / (2 * h);
      }
    /* finite differences carry ~1e-9 absolute error: compare with a looser bound */
    int bad = 0;
    for (int t = 0; t < 3 * N; t++)
      if (fabs(get(&og, (size_t)t) - rg[t]) > 1e-4 * fabs(rg[t]) + 1e-5) {
        if (bad++ < 5) print_error("attention_grad[%d]: got %.8g, want %.8g\n", t, get(&og, (size_t)t), rg[t]);
      }
    if (bad) fail_msg("attention_grad%s: %d of %d differ", causal ? " causal" : "", bad, 3 * N);
    drop(&Q), drop(&K), drop(&Vv), drop(&G), drop(&o), drop(&og);
    prog_free(g);
  }
}

/* Integer paths: i64 add / div (truncating, 0 for a zero divisor) / neg,
 * i32 -> i64 and f32 -> i32 casts, an i32 sum and max over an axis. */
static void test_integers(void **state) {
  (void)state;
  prog *g = prog_new();
  int64_t d[2] = {3, 5}, none[1] = {0};
  uint32_t a = input(g, MLC_DT_I64, 2, d), b = input(g, MLC_DT_I64, 2, d), xi = input(g, MLC_DT_I32, 2, d), xf = input(g, MLC_DT_F32, 2, d);
  uint32_t ab[2] = {a, b};
  uint32_t add = node(g, MLC_OP_ADD, ab, 2, NULL, 0), dv = node(g, MLC_OP_DIV, ab, 2, NULL, 0), ng = node(g, MLC_OP_NEG, &a, 1, NULL, 0);
  uint32_t c64 = node(g, MLC_OP_CAST, &xi, 1, NULL, MLC_DT_I64), c32 = node(g, MLC_OP_CAST, &xf, 1, NULL, MLC_DT_I32);
  mlc_attrs ax1 = {.axis = 1}, ax0 = {.axis = 0};
  uint32_t sm = node(g, MLC_OP_SUM, &xi, 1, &ax1, 0), mx = node(g, MLC_OP_MAX, &xi, 1, &ax0, 0);
  (void)none;
  tensor A = make_idx(MLC_DT_I64, 15, -5000000000ll, 5000000000ll), B = make_idx(MLC_DT_I64, 15, -7, 7);
  tensor XI = make_idx(MLC_DT_I32, 15, -1000, 1000), XF = make(MLC_DT_F32, 15, 100);
  ((int64_t *)B.raw)[4] = 0, B.v[4] = 0;
  tensor o = make_idx(MLC_DT_I64, 15, 0, 0), o32 = make_idx(MLC_DT_I32, 15, 0, 0), os = make_idx(MLC_DT_I32, 3, 0, 0), om = make_idx(MLC_DT_I32, 5, 0, 0);
  tensor ins[2] = {A, B};
  int64_t *ra = A.raw, *rb = B.raw, *ro = o.raw;
  int32_t *xi_ = XI.raw, *o32_ = o32.raw;
  run_node(g, add, ins, 2, &o);
  for (int i = 0; i < 15; i++) assert_true(ro[i] == ra[i] + rb[i]);
  run_node(g, dv, ins, 2, &o);
  for (int i = 0; i < 15; i++) assert_true(ro[i] == (rb[i] ? ra[i] / rb[i] : 0));
  run_node(g, ng, &A, 1, &o);
  for (int i = 0; i < 15; i++) assert_true(ro[i] == -ra[i]);
  run_node(g, c64, &XI, 1, &o);
  for (int i = 0; i < 15; i++) assert_true(ro[i] == (int64_t)xi_[i]);
  run_node(g, c32, &XF, 1, &o32);
  for (int i = 0; i < 15; i++) assert_int_equal(o32_[i], (int32_t)((float *)XF.raw)[i]);
  run_node(g, sm, &XI, 1, &os);
  for (int r = 0; r < 3; r++) {
    int32_t t = 0;
    for (int k = 0; k < 5; k++) t += xi_[r * 5 + k];
    assert_int_equal(((int32_t *)os.raw)[r], t);
  }
  run_node(g, mx, &XI, 1, &om);
  for (int k = 0; k < 5; k++) {
    int32_t t = xi_[k];
    for (int r = 1; r < 3; r++) t = xi_[r * 5 + k] > t ? xi_[r * 5 + k] : t;
    assert_int_equal(((int32_t *)om.raw)[k], t);
  }
  drop(&A), drop(&B), drop(&XI), drop(&XF), drop(&o), drop(&o32), drop(&os), drop(&om);
  prog_free(g);
}

/* The forward in shapes the tiled kernel splits: several query tiles and
 * key blocks, sq != sk, dv != d, causal, bf16 output. */
static void attn_fwd_case(int H, int SQ, int SK, int D, int DV, bool causal, int dt) {
  prog *g = prog_new();
  int64_t dq[4] = {1, H, SQ, D}, dk[4] = {1, H, SK, D}, dv[4] = {1, H, SK, DV};
  uint32_t in[3] = {input(g, dt, 4, dq), input(g, dt, 4, dk), input(g, dt, 4, dv)};
  mlc_attrs a = {.causal = causal, .f = 1.0 / sqrt(D)};
  uint32_t at = node(g, MLC_OP_ATTENTION, in, 3, &a, 0);
  tensor x[3] = {make(dt, (size_t)(H * SQ * D), 2), make(dt, (size_t)(H * SK * D), 2), make(dt, (size_t)(H * SK * DV), 1)};
  tensor o = make(dt, (size_t)(H * SQ * DV), 0);
  run_node(g, at, x, 3, &o);
  double *ref = calloc((size_t)(H * SQ * DV), sizeof *ref), *p = calloc((size_t)SK, sizeof *p);
  for (int h = 0; h < H; h++)
    for (int i = 0; i < SQ; i++) {
      double m = -INFINITY, sum = 0;
      for (int j = 0; j < SK; j++) {
        double d = 0;
        for (int c = 0; c < D; c++) d += x[0].v[(h * SQ + i) * D + c] * x[1].v[(h * SK + j) * D + c];
        p[j] = causal && j > i ? -INFINITY : d / sqrt(D);
        m = fmax(m, p[j]);
      }
      for (int j = 0; j < SK; j++) sum += p[j] = exp(p[j] - m);
      for (int c = 0; c < DV; c++) {
        double acc = 0;
        for (int j = 0; j < SK; j++) acc += p[j] / sum * x[2].v[(h * SK + j) * DV + c];
        ref[(h * SQ + i) * DV + c] = acc;
      }
    }
  char what[96];
  snprintf(what, sizeof what, "attention h%d sq%d sk%d d%d dv%d%s %s", H, SQ, SK, D, DV, causal ? " causal" : "",
           mlc_dtype_name((mlc_dtype)dt));
  check(what, &o, ref);
  free(ref), free(p);
  drop(&x[0]), drop(&x[1]), drop(&x[2]), drop(&o);
  prog_free(g);
}

static void test_attention_tiles(void **state) {
  (void)state;
  attn_fwd_case(2, 70, 37, 5, 6, false, MLC_DT_F32);
  attn_fwd_case(2, 70, 70, 8, 8, true, MLC_DT_BF16);
  attn_fwd_case(1, 65, 100, 16, 16, true, MLC_DT_F16);
  attn_fwd_case(1, 3, 5, 130, 7, false, MLC_DT_F32); /* d > 128: the plain kernel */
}

/* FUSED nodes (as the fuse pass makes them): an elementwise program with a
 * broadcast input and a cast, and GEMM programs with an epilogue (bias,
 * GELU, residual), in bf16 with odd and even widths. */
static double gelu_d(double v) { return 0.5 * v * (1 + erf(v / sqrt(2))); }
static double rbf(double v) { return bf16_to_f(f_to_bf16((float)v)); }

static void test_fused(void **state) {
  (void)state;
  {
    prog *g = prog_new();
    int64_t dx[2] = {6, 10}, db[1] = {10};
    uint32_t in[2] = {input(g, MLC_DT_BF16, 2, dx), input(g, MLC_DT_F32, 1, db)};
    mlc_attrs a = {.name = "cast.bf16($1); add($0, #0); silu(#1)"};
    uint32_t n = node(g, MLC_OP_FUSED, in, 2, &a, 0);
    tensor x[2] = {make(MLC_DT_BF16, 60, 3), make(MLC_DT_F32, 10, 1)}, out = make(MLC_DT_BF16, 60, 0);
    run_node(g, n, x, 2, &out);
    double ref[60];
    for (int i = 0; i < 60; i++) {
      double t = rbf(x[0].v[i] + rbf(x[1].v[i % 10]));
      ref[i] = rbf(t / (1 + exp(-t)));
    }
    check("fused ew", &out, ref);
    drop(&x[0]), drop(&x[1]), drop(&out);
    prog_free(g);
  }
  for (int N = 39; N <= 40; N++) {
    prog *g = prog_new();
    int64_t dx[2] = {33, 21}, dw[2] = {N, 21}, db[1] = {N}, dr[2] = {33, N};
    uint32_t in[4] = {input(g, MLC_DT_BF16, 2, dx), input(g, MLC_DT_BF16, 2, dw), input(g, MLC_DT_BF16, 1, db),
                      input(g, MLC_DT_BF16, 2, dr)};
    mlc_attrs a = {.name = "linear($0, $1); add(#0, $2); gelu(#1); add(#2, $3)"};
    uint32_t n = node(g, MLC_OP_FUSED, in, 4, &a, 0);
    tensor x[4] = {make(MLC_DT_BF16, 33 * 21, 1), make(MLC_DT_BF16, (size_t)(N * 21), 1), make(MLC_DT_BF16, (size_t)N, 1),
                   make(MLC_DT_BF16, (size_t)(33 * N), 1)};
    tensor out = make(MLC_DT_BF16, (size_t)(33 * N), 0);
    run_node(g, n, x, 4, &out);
    double ref[33 * 40];
    for (int i = 0; i < 33; i++)
      for (int j = 0; j < N; j++) {
        double acc = 0;
        for (int k = 0; k < 21; k++) acc += x[0].v[i * 21 + k] * x[1].v[j * 21 + k];
        double t = rbf(rbf(acc) + x[2].v[j]);
        ref[i * N + j] = rbf(rbf(gelu_d(t)) + x[3].v[i * N + j]);
      }
    check(N % 2 ? "fused linear epilogue (odd n)" : "fused linear epilogue", &out, ref);
    drop(&x[0]), drop(&x[1]), drop(&x[2]), drop(&x[3]), drop(&out);
    prog_free(g);
  }
}

/* attention_grad at sizes the tiled kernels split (several tiles of 64 rows
 * and blocks of 16), against the analytic gradient in double:
 * P = softmax(s Q K^T), dV = P^T dO, dS = P (dO V^T - rowsum(P (dO V^T))),
 * dQ = s dS K, dK = s dS^T Q. */
static void attn_grad_case(int BH, int S, int D, bool causal, int dt) {
  prog *g = prog_new();
  int64_t d[4] = {1, BH, S, D};
  uint32_t in[4] = {input(g, dt, 4, d), input(g, dt, 4, d), input(g, dt, 4, d), input(g, dt, 4, d)};
  double sc = 1.0 / sqrt(D);
  mlc_attrs a = {.causal = causal, .f = sc};
  uint32_t ag = node(g, MLC_OP_ATTENTION_GRAD, in, 4, &a, 0);
  size_t N = (size_t)(BH * S * D);
  tensor x[4] = {make(dt, N, 1), make(dt, N, 1), make(dt, N, 1), make(dt, N, 1)}, out = make(dt, 3 * N, 0);
  run_node(g, ag, x, 4, &out);
  const double *G = x[0].v, *Q = x[1].v, *K = x[2].v, *Vv = x[3].v;
  double *ref = calloc(3 * N, sizeof *ref), *P = calloc((size_t)(S * S), sizeof *P), *dS = calloc((size_t)(S * S), sizeof *dS);
  for (int h = 0; h < BH; h++) {
    const double *q = Q + h * S * D, *k = K + h * S * D, *v = Vv + h * S * D, *go = G + h * S * D;
    for (int i = 0; i < S; i++) {
      double m = -INFINITY, sum = 0, Di = 0;
      for (int j = 0; j < S; j++) {
        double t = 0;
        for (int c = 0; c < D; c++) t += q[i * D + c] * k[j * D + c];
        P[i * S + j] = causal && j > i ? -INFINITY : t * sc;
        m = fmax(m, P[i * S + j]);
      }
      for (int j = 0; j < S; j++) sum += P[i * S + j] = exp(P[i * S + j] - m);
      for (int j = 0; j < S; j++) {
        P[i * S + j] /= sum;
        double dp = 0;
        for (int c = 0; c < D; c++) dp += go[i * D + c] * v[j * D + c];
        dS[i * S + j] = dp;
        Di += P[i * S + j] * dp;
      }
      for (int j = 0; j < S; j++) dS[i * S + j] = P[i * S + j] * (dS[i * S + j] - Di);
    }
    double *dq = ref + h * S * D, *dk = ref + N + h * S * D, *dv = ref + 2 * N + h * S * D;
    for (int i = 0; i < S; i++)
      for (int j = 0; j < S; j++)
        for (int c = 0; c < D; c++) {
          dq[i * D + c] += sc * dS[i * S + j] * k[j * D + c];
          dk[j * D + c] += sc * dS[i * S + j] * q[i * D + c];
          dv[j * D + c] += P[i * S + j] * go[i * D + c];
        }
  }
  /* 16-bit: the output rounding, and the sums of rounded terms; scale by the row's size */
  int bad = 0;
  for (size_t t = 0; t < 3 * N; t++) {
    double got = get(&out, t), tol = dt == MLC_DT_F32 ? 1e-4 * fabs(ref[t]) + 1e-5 : ldexp(fabs(ref[t]), -7) + 2e-3;
    if (!(fabs(got - ref[t]) <= tol) && bad++ < 5) print_error("attention_grad[%zu]: got %.8g, want %.8g\n", t, got, ref[t]);
  }
  if (bad) fail_msg("attention_grad S=%d D=%d%s: %d of %zu differ", S, D, causal ? " causal" : "", bad, 3 * N);
  free(ref), free(P), free(dS);
  for (int k2 = 0; k2 < 4; k2++) drop(&x[k2]);
  drop(&out);
  prog_free(g);
}

static void test_attention_grad_tiles(void **state) {
  (void)state;
  attn_grad_case(2, 70, 8, true, MLC_DT_F32);
  attn_grad_case(1, 65, 16, false, MLC_DT_F32);
  attn_grad_case(2, 40, 12, true, MLC_DT_BF16);
  attn_grad_case(1, 20, 128, false, MLC_DT_F32); /* the largest tiled head dim: shared memory within 32 KiB */
  attn_grad_case(1, 6, 130, true, MLC_DT_F32);   /* d > 128: the plain kernels */
}

static void test_adamw(void **state) {
  (void)state;
  prog *g = prog_new();
  g->p.train = (mlc_train_config){.present = true, .opt = MLC_OPT_ADAMW, .lr = 3e-4, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
                                  .weight_decay = 0.01};
  int64_t d[1] = {37}, none[1] = {0};
  uint32_t in[6] = {input(g, MLC_DT_F32, 1, d), input(g, MLC_DT_F32, 1, d), input(g, MLC_DT_F32, 1, d), input(g, MLC_DT_F32, 1, d),
                    input(g, MLC_DT_I64, 0, none), input(g, MLC_DT_F32, 0, none)};
  uint32_t n = node(g, MLC_OP_ADAMW, in, 6, NULL, 0);
  tensor P = make(MLC_DT_F32, 37, 1), G = make(MLC_DT_F32, 37, 1), M = make(MLC_DT_F32, 37, 0.1), Vs = make(MLC_DT_F32, 37, 0.1);
  for (int i = 0; i < 37; i++) ((float *)Vs.raw)[i] = fabsf(((float *)Vs.raw)[i]), Vs.v[i] = fabs(Vs.v[i]);
  tensor step = make_idx(MLC_DT_I64, 1, 3, 3), tok = make(MLC_DT_F32, 1, 0), lr = make(MLC_DT_F32, 1, 0);
  ((float *)lr.raw)[0] = 2e-4f, lr.v[0] = 2e-4f; /* the runtime's rate, not the train block's */
  tensor ins[6] = {P, G, M, Vs, step, lr};
  double rp[37], rm[37], rv[37];
  for (int i = 0; i < 37; i++) {
    double gg = G.v[i], p = P.v[i] * (1 - (double)2e-4f * 0.01);
    rm[i] = 0.9 * M.v[i] + 0.1 * gg;
    rv[i] = 0.999 * Vs.v[i] + 0.001 * gg * gg;
    double bc1 = 1 - pow(0.9, 3), bc2 = 1 - pow(0.999, 3);
    rp[i] = p - (double)2e-4f / bc1 * rm[i] / (sqrt(rv[i]) / sqrt(bc2) + 1e-8);
  }
  run_node(g, n, ins, 6, &tok);
  check("adamw param", &P, rp);
  check("adamw m", &M, rm);
  check("adamw v", &Vs, rv);
  drop(&P), drop(&G), drop(&M), drop(&Vs), drop(&step), drop(&tok), drop(&lr);
  prog_free(g);
}

/* SGD with momentum and weight decay, as torch.optim.SGD: d = g + wd p,
 * buf = momentum buf + d, p -= lr buf. */
static void test_sgd(void **state) {
  (void)state;
  prog *g = prog_new();
  g->p.train = (mlc_train_config){.present = true, .opt = MLC_OPT_SGD, .lr = 0.01, .momentum = 0.9, .weight_decay = 0.001};
  int64_t d[2] = {3, 11};
  int64_t none[1] = {0};
  uint32_t in[4] = {input(g, MLC_DT_F32, 2, d), input(g, MLC_DT_F32, 2, d), input(g, MLC_DT_F32, 2, d), input(g, MLC_DT_F32, 0, none)};
  uint32_t n = node(g, MLC_OP_SGD, in, 4, NULL, 0);
  tensor P = make(MLC_DT_F32, 33, 1), G = make(MLC_DT_F32, 33, 1), M = make(MLC_DT_F32, 33, 0.5), tok = make(MLC_DT_F32, 1, 0);
  double rp[33], rm[33];
  for (int i = 0; i < 33; i++) {
    double dd = G.v[i] + 0.001 * P.v[i];
    rm[i] = 0.9 * M.v[i] + dd;
    rp[i] = P.v[i] - 0.01 * rm[i];
  }
  tensor lr = make(MLC_DT_F32, 1, 0);
  ((float *)lr.raw)[0] = 0.01f, lr.v[0] = 0.01f;
  tensor ins[4] = {P, G, M, lr};
  run_node(g, n, ins, 4, &tok);
  check("sgd param", &P, rp);
  check("sgd momentum", &M, rm);
  drop(&P), drop(&G), drop(&M), drop(&tok), drop(&lr);
  prog_free(g);
}

int main(int argc, char **argv) {
  const struct CMUnitTest builder[] = {
      cmocka_unit_test(test_interning),
      cmocka_unit_test(test_validate),
      cmocka_unit_test(test_quad_view),
      cmocka_unit_test(test_dedup_and_names),
      cmocka_unit_test(test_coopmat_table),
      cmocka_unit_test(test_optimizer),
  };
  const struct CMUnitTest run[] = {
      cmocka_unit_test(test_add_broadcast_bf16), cmocka_unit_test(test_unary_f16),  cmocka_unit_test(test_gelu_grad_cast),
      cmocka_unit_test(test_softmax_and_sums),   cmocka_unit_test(test_layout),     cmocka_unit_test(test_gemms),
      cmocka_unit_test_teardown(test_coopmat_emulated, coopmat_emulated_end),
      cmocka_unit_test(test_batched_matmul),     cmocka_unit_test(test_norms),      cmocka_unit_test(test_cross_entropy),
      cmocka_unit_test(test_embedding),          cmocka_unit_test(test_attention),  cmocka_unit_test(test_adamw),
      cmocka_unit_test(test_integers),           cmocka_unit_test(test_sgd),    cmocka_unit_test(test_attention_tiles),
      cmocka_unit_test(test_fused),             cmocka_unit_test(test_long_axis),
      cmocka_unit_test(test_attention_grad_tiles),
  };
  if (argc > 1 && !strcmp(argv[1], "run")) {
    if (!vk_open()) {
      vk_close();
      printf("no Vulkan device: skipped\n");
      return 77;
    }
    VkPhysicalDeviceProperties pp;
    vkGetPhysicalDeviceProperties(V.pd, &pp);
    printf("device: %s\n", pp.deviceName);
    int r = cmocka_run_group_tests_name("spirv.run", run, NULL, NULL);
    vk_close();
    return r;
  }
  return cmocka_run_group_tests_name("spirv.builder", builder, NULL, NULL);
}
