/* The Vulkan device: see device.h. */
#include "runtime/vulkan/device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "runtime/plan.h"
#include "runtime/profile.h"      /* mlc_cache_path, mlc_read_file, mlc_write_file */
#include "runtime/vulkan/coopmat.h"
#include "runtime/vulkan/driver.h"

#define MAX_ARGS 72           /* arguments of one step, as on CUDA */
#define ADDR_ALIGN (1u << 16) /* mlc's device addresses: each allocation starts on a 64 KiB boundary */
#define STAGING_BYTES (64u << 20)
#define SETS_PER_POOL 256
#define CACHED_CMDS 16        /* command buffers kept for replay */

typedef struct {
  uint64_t base, size;        /* mlc's address range; size 0 once freed */
  VkBuffer buf;
  VkDeviceMemory mem;
  uint8_t *map;               /* host view, on unified memory */
} block;

typedef struct {
  const mlc_vk_kernel *k;     /* what runs: the kernel, or its fallback */
  VkShaderModule mod;
  VkPipeline pipe[MLC_VK_MAX_DISPATCH];
} kernel;

typedef struct {
  kernel *k;
  VkDescriptorSet set;
  uint32_t slot;
  bool timing;
} launch_rec;

typedef struct {              /* a descriptor set for one kernel over one set of arguments */
  kernel *k;
  uint64_t *args;             /* [nargs] */
  VkDescriptorSet set;
} set_entry;

typedef struct {              /* a recorded command buffer, for the same launches again */
  uint64_t hash, last_use;
  launch_rec *recs;           /* [n] */
  uint32_t n;
  VkCommandBuffer cb;
} cmd_entry;

typedef struct {
  mlc_device base;
  mlc_vk_api api;
  mlc_vk_code code;
  VkPhysicalDevice phys;
  VkPhysicalDeviceProperties props;
  VkPhysicalDeviceMemoryProperties memp;
  VkDevice dev;
  VkQueue queue;
  uint32_t family;
  bool unified, coopmat_khr, coopmat_nv, timestamps;
  mlc_vk_coopmat_properties *coopmat_props[2]; /* by mlc_vk_coopmat_kind, [n_coopmat_props[kind]] (malloc'ed) */
  uint32_t n_coopmat_props[2];
  char driver[2 * VK_MAX_DRIVER_NAME_SIZE + 2 * VK_MAX_DRIVER_INFO_SIZE];
  VkCommandPool cmd_pool;
  VkCommandBuffer once;       /* copies, fills, the clock's origin */
  VkFence fence;
  VkPipelineCache cache;
  char cache_path[1024];
  uint32_t new_pipelines;
  kernel *kernels;            /* [code.nkernels], built on first resolve */
  mlc_vk_kernel *table;       /* the kernel table made from the plan, or NULL */
  VkDescriptorSetLayout dsl[MAX_ARGS + 1]; /* by nargs: nargs + 1 storage buffers */
  VkPipelineLayout layout[MAX_ARGS + 1];
  VkDescriptorPool *pools;    /* [made_pools]; the first npools in use, the last of those filling */
  uint32_t npools, made_pools, pool_used;
  set_entry *sets;            /* open addressing, [cap_sets] (a power of two) */
  uint32_t nsets, cap_sets;
  cmd_entry cmds[CACHED_CMDS];
  uint64_t clock;
  block *blocks;              /* [nblocks], by increasing base */
  uint32_t nblocks, cap_blocks;
  uint64_t next_addr;
  block staging, scratch, dummy;
  launch_rec *pending;        /* launches since the last flush */
  uint32_t npending, cap_pending;
  VkQueryPool queries;        /* 2 per slot: start, end */
  uint32_t cap_slots;
  double *t_sec, *t_start;    /* [cap_slots]: results of the flushed launches */
  uint8_t *t_used;
  uint64_t origin, ts_mask;
  double tick_s;
  /* MLC_VK_PIPELINE_STATS=1: each pipeline's statistics (registers, shared
   * memory, ...) on stderr, and with MLC_VK_PIPELINE_IR=DIR its internal
   * representations as files there (VK_KHR_pipeline_executable_properties) */
  bool pipe_stats;
  PFN_vkGetPipelineExecutablePropertiesKHR exec_props;
  PFN_vkGetPipelineExecutableStatisticsKHR exec_stats;
  PFN_vkGetPipelineExecutableInternalRepresentationsKHR exec_ir;
} vk_dev;

#define CK(d, call) mlc_vk_check((d)->api.call, #call)

static void *grow(mlc_allocator a, void *old, size_t n_old, size_t n_new, size_t size) {
  uint8_t *p = mlc_allocator_alloc_array(a, n_new, size);
  if (!p) return NULL;
  if (n_old) memcpy(p, old, n_old * size);
  memset(p + n_old * size, 0, (n_new - n_old) * size);
  mlc_allocator_free(a, old);
  return p;
}

/* ---- memory ---- */

static int memory_type(const vk_dev *d, uint32_t bits, VkMemoryPropertyFlags want) {
  for (uint32_t i = 0; i < d->memp.memoryTypeCount; i++)
    if ((bits & (1u << i)) && (d->memp.memoryTypes[i].propertyFlags & want) == want) return (int)i;
  return -1;
}

static void destroy_block(vk_dev *d, block *b) {
  if (b->map) d->api.vkUnmapMemory(d->dev, b->mem);
  if (b->buf) d->api.vkDestroyBuffer(d->dev, b->buf, NULL);
  if (b->mem) d->api.vkFreeMemory(d->dev, b->mem, NULL);
  b->map = NULL;
  b->buf = VK_NULL_HANDLE;
  b->mem = VK_NULL_HANDLE;
  b->size = 0;
}

/* A buffer of `bytes` in memory with `want` (falling back to `fallback`);
 * mapped when host-visible. */
static mlc_status make_block(vk_dev *d, uint64_t bytes, VkMemoryPropertyFlags want, VkMemoryPropertyFlags fallback,
                             block *out) {
  memset(out, 0, sizeof *out);
  VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = bytes,
                           .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                    VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                           .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
  MLC_RETURN_IF_ERROR(CK(d, vkCreateBuffer(d->dev, &bi, NULL, &out->buf)));
  VkMemoryRequirements req;
  d->api.vkGetBufferMemoryRequirements(d->dev, out->buf, &req);
  int type = memory_type(d, req.memoryTypeBits, want);
  if (type < 0) type = memory_type(d, req.memoryTypeBits, fallback);
  if (type < 0) {
    destroy_block(d, out);
    return mlc_status_make(MLC_INTERNAL, "Vulkan: no memory type for a buffer of %llu bytes", (unsigned long long)bytes);
  }
  VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = req.size,
                             .memoryTypeIndex = (uint32_t)type};
  VkResult r = d->api.vkAllocateMemory(d->dev, &ai, NULL, &out->mem);
  if (r) {
    out->mem = VK_NULL_HANDLE;
    destroy_block(d, out);
    return mlc_status_make(MLC_OUT_OF_MEMORY, "out of Vulkan device memory: %llu bytes asked for (vkAllocateMemory: %s)",
                           (unsigned long long)bytes, mlc_vk_result_name(r));
  }
  mlc_status st = CK(d, vkBindBufferMemory(d->dev, out->buf, out->mem, 0));
  if (!st && (d->memp.memoryTypes[type].propertyFlags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT)) {
    void *p = NULL;
    st = CK(d, vkMapMemory(d->dev, out->mem, 0, VK_WHOLE_SIZE, 0, &p));
    out->map = p;
  }
  if (st) { destroy_block(d, out); return st; }
  out->size = bytes;
  return NULL;
}

/* Begins the one-off command buffer, after a barrier that orders it after
 * everything earlier (compute or transfer). */
static mlc_status once_begin(vk_dev *d) {
  VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                 .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
  MLC_RETURN_IF_ERROR(CK(d, vkBeginCommandBuffer(d->once, &bi)));
  VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                        .dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT};
  d->api.vkCmdPipelineBarrier(d->once, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                              VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
  return NULL;
}

static mlc_status submit_wait(vk_dev *d, VkCommandBuffer cb, const char *what) {
  VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cb};
  VkResult r = d->api.vkQueueSubmit(d->queue, 1, &si, d->fence);
  if (!r) r = d->api.vkWaitForFences(d->dev, 1, &d->fence, VK_TRUE, UINT64_MAX);
  if (!r) r = d->api.vkResetFences(d->dev, 1, &d->fence);
  if (r) {
    mlc_status st = mlc_vk_check(r, "vkQueueSubmit");
    return mlc_status_annotate(st, "%s", what);
  }
  return NULL;
}

/* Ends the one-off command buffer (making its transfers visible to the
 * host and to compute), submits it and waits. */
static mlc_status once_end(vk_dev *d, const char *what) {
  VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                        .dstAccessMask = VK_ACCESS_HOST_READ_BIT | VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
  d->api.vkCmdPipelineBarrier(d->once, VK_PIPELINE_STAGE_TRANSFER_BIT,
                              VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
  MLC_RETURN_IF_ERROR(CK(d, vkEndCommandBuffer(d->once)));
  return submit_wait(d, d->once, what);
}

/* The block holding [addr, addr + bytes), and the offset of addr in it. */
static mlc_status find_block(vk_dev *d, uint64_t addr, uint64_t bytes, block **out, uint64_t *off) {
  uint32_t lo = 0, hi = d->nblocks;
  while (lo < hi) { /* the last block whose base is <= addr */
    uint32_t mid = (lo + hi) / 2;
    if (d->blocks[mid].base <= addr) lo = mid + 1;
    else hi = mid;
  }
  block *b = lo ? &d->blocks[lo - 1] : NULL;
  if (!b || !b->size || addr - b->base > b->size || bytes > b->size - (addr - b->base))
    return mlc_status_make(MLC_INVALID_ARGUMENT, "Vulkan: address 0x%llx (+%llu bytes) is not in any allocation",
                           (unsigned long long)addr, (unsigned long long)bytes);
  *out = b;
  *off = addr - b->base;
  return NULL;
}

static void drop_caches(vk_dev *d, bool sets);
static mlc_status flush(vk_dev *d);

static mlc_status vk_alloc(mlc_device *base, uint64_t bytes, uint64_t *out) {
  vk_dev *d = (vk_dev *)base;
  if (d->nblocks == d->cap_blocks) {
    uint32_t cap = d->cap_blocks ? 2 * d->cap_blocks : 16;
    block *nb = grow(base->a, d->blocks, d->nblocks, cap, sizeof *nb);
    if (!nb) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory");
    d->blocks = nb;
    d->cap_blocks = cap;
  }
  uint64_t n = bytes ? (bytes + 255) / 256 * 256 : 256;
  VkMemoryPropertyFlags want = d->unified ? VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                                VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
                                          : VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
  block b;
  MLC_RETURN_IF_ERROR(make_block(d, n, want, 0, &b));
  if (b.map) {
    memset(b.map, 0, n);
  } else {
    mlc_status st = once_begin(d);
    if (!st) {
      d->api.vkCmdFillBuffer(d->once, b.buf, 0, VK_WHOLE_SIZE, 0);
      st = once_end(d, "zeroing a new buffer");
    }
    if (st) { destroy_block(d, &b); return st; }
  }
  b.base = d->next_addr;
  d->next_addr += (n + ADDR_ALIGN - 1) / ADDR_ALIGN * ADDR_ALIGN + ADDR_ALIGN;
  d->blocks[d->nblocks++] = b;
  base->allocated += bytes;
  *out = b.base;
  return NULL;
}

static void vk_free(mlc_device *base, uint64_t addr) {
  vk_dev *d = (vk_dev *)base;
  block *b;
  uint64_t off;
  mlc_status st = find_block(d, addr, 0, &b, &off);
  if (!st) st = flush(d); /* queued launches may use it */
  if (st) { mlc_status_free(st); return; }
  d->api.vkDeviceWaitIdle(d->dev);
  drop_caches(d, true); /* descriptor sets may name the buffer */
  destroy_block(d, b);
}

static mlc_status staging(vk_dev *d) {
  if (d->staging.buf) return NULL;
  return make_block(d, STAGING_BYTES, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT |
                    VK_MEMORY_PROPERTY_HOST_CACHED_BIT,
                    VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT, &d->staging);
}

/* Copies between host memory and [addr, addr + n): through the mapping on
 * unified memory, else in chunks through the staging buffer. */
static mlc_status transfer(vk_dev *d, uint64_t addr, void *host, uint64_t n, bool to_device) {
  if (!n) return NULL;
  block *b;
  uint64_t off;
  MLC_RETURN_IF_ERROR(find_block(d, addr, n, &b, &off));
  MLC_RETURN_IF_ERROR(flush(d));
  if (b->map) {
    if (to_device) memcpy(b->map + off, host, n);
    else memcpy(host, b->map + off, n);
    return NULL;
  }
  MLC_RETURN_IF_ERROR(staging(d));
  for (uint64_t done = 0; done < n;) {
    uint64_t c = n - done < STAGING_BYTES ? n - done : STAGING_BYTES;
    if (to_device) memcpy(d->staging.map, (uint8_t *)host + done, c);
    MLC_RETURN_IF_ERROR(once_begin(d));
    VkBufferCopy region = {to_device ? 0 : off + done, to_device ? off + done : 0, c};
    d->api.vkCmdCopyBuffer(d->once, to_device ? d->staging.buf : b->buf, to_device ? b->buf : d->staging.buf, 1, &region);
    MLC_RETURN_IF_ERROR(once_end(d, to_device ? "copying to the device" : "copying from the device"));
    if (!to_device) memcpy((uint8_t *)host + done, d->staging.map, c);
    done += c;
  }
  return NULL;
}

static mlc_status vk_write(mlc_device *base, uint64_t dst, const void *src, uint64_t n) {
  return transfer((vk_dev *)base, dst, (void *)src, n, true);
}

static mlc_status vk_read(mlc_device *base, void *dst, uint64_t src, uint64_t n) {
  return transfer((vk_dev *)base, src, dst, n, false);
}

/* ---- kernels ---- */

static mlc_status layout_for(vk_dev *d, uint32_t nargs) {
  if (d->layout[nargs]) return NULL;
  VkDescriptorSetLayoutBinding b[MAX_ARGS + 1];
  for (uint32_t i = 0; i <= nargs; i++)
    b[i] = (VkDescriptorSetLayoutBinding){i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, NULL};
  VkDescriptorSetLayoutCreateInfo li = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                        .bindingCount = nargs + 1, .pBindings = b};
  MLC_RETURN_IF_ERROR(CK(d, vkCreateDescriptorSetLayout(d->dev, &li, NULL, &d->dsl[nargs])));
  VkPipelineLayoutCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, .setLayoutCount = 1,
                                   .pSetLayouts = &d->dsl[nargs]};
  return CK(d, vkCreatePipelineLayout(d->dev, &pi, NULL, &d->layout[nargs]));
}

/* What the driver says it made of a pipeline (MLC_VK_PIPELINE_STATS=1):
 * one stderr line of statistics per executable, and, with
 * MLC_VK_PIPELINE_IR=DIR, each internal representation as
 * DIR/<symbol>.<entry>.<executable>.<k>.txt (or .bin).  For studying the
 * kernels' code; failures only mean less is reported. */
static void report_pipeline(vk_dev *d, VkPipeline p, const char *symbol, const char *entry) {
  VkPipelineInfoKHR pi = {.sType = VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR, .pipeline = p};
  VkPipelineExecutablePropertiesKHR ex[4];
  uint32_t n = 4;
  for (uint32_t i = 0; i < n; i++)
    ex[i] = (VkPipelineExecutablePropertiesKHR){.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR};
  if (d->exec_props(d->dev, &pi, &n, ex) < 0) return;
  const char *dir = getenv("MLC_VK_PIPELINE_IR");
  for (uint32_t e = 0; e < n; e++) {
    VkPipelineExecutableInfoKHR ei = {.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR, .pipeline = p,
                                      .executableIndex = e};
    VkPipelineExecutableStatisticKHR st[32];
    uint32_t ns = 32;
    for (uint32_t i = 0; i < ns; i++)
      st[i] = (VkPipelineExecutableStatisticKHR){.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR};
    if (d->exec_stats(d->dev, &ei, &ns, st) < 0) ns = 0;
    fprintf(stderr, "mlc: pipeline %s %s, executable %u (%s):", symbol, entry, e, ex[e].name);
    for (uint32_t i = 0; i < ns; i++) {
      const VkPipelineExecutableStatisticValueKHR *v = &st[i].value;
      const char *name = st[i].name;
      switch (st[i].format) {
      case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR: fprintf(stderr, " %s=%s;", name, v->b32 ? "true" : "false"); break;
      case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR: fprintf(stderr, " %s=%lld;", name, (long long)v->i64); break;
      case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR: fprintf(stderr, " %s=%llu;", name, (unsigned long long)v->u64); break;
      default: fprintf(stderr, " %s=%g;", name, v->f64); break;
      }
    }
    fprintf(stderr, "\n");
    if (!dir || !d->exec_ir) continue;
    VkPipelineExecutableInternalRepresentationKHR ir[8];
    uint32_t nr = 8;
    for (uint32_t i = 0; i < nr; i++)
      ir[i] = (VkPipelineExecutableInternalRepresentationKHR){
          .sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INTERNAL_REPRESENTATION_KHR};
    if (d->exec_ir(d->dev, &ei, &nr, ir) < 0) continue; /* the sizes */
    for (uint32_t i = 0; i < nr; i++) ir[i].pData = ir[i].dataSize ? malloc(ir[i].dataSize) : NULL;
    if (d->exec_ir(d->dev, &ei, &nr, ir) >= 0)
      for (uint32_t i = 0; i < nr; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s.%s.%u.%u.%s", dir, symbol, entry, e, i, ir[i].isText ? "txt" : "bin");
        FILE *f = ir[i].pData ? fopen(path, "wb") : NULL;
        if (f) {
          fwrite(ir[i].pData, 1, ir[i].isText && ir[i].dataSize ? ir[i].dataSize - 1 : ir[i].dataSize, f);
          fclose(f);
          fprintf(stderr, "mlc:   %s (%s): %s\n", ir[i].name, ir[i].description, path);
        }
      }
    for (uint32_t i = 0; i < nr; i++) free(ir[i].pData);
  }
}

static mlc_status build_kernel(vk_dev *d, kernel *kk, const mlc_vk_kernel *k) {
  if (k->nargs > MAX_ARGS || !k->ndispatch || k->ndispatch > MLC_VK_MAX_DISPATCH)
    return mlc_status_make(MLC_INVALID_ARGUMENT, "Vulkan kernel %s: %u arguments and %u dispatches (at most %d and %d)",
                           k->symbol, k->nargs, k->ndispatch, MAX_ARGS, MLC_VK_MAX_DISPATCH);
  for (uint32_t j = 0; j < k->ndispatch; j++)
    for (int c = 0; c < 3; c++)
      if (!k->dispatch[j].groups[c] || k->dispatch[j].groups[c] > d->props.limits.maxComputeWorkGroupCount[c])
        return mlc_status_make(MLC_UNIMPLEMENTED, "Vulkan kernel %s (%s): %u workgroups in %c; this device allows 1 to %u",
                               k->symbol, k->dispatch[j].entry, k->dispatch[j].groups[c], "xyz"[c],
                               d->props.limits.maxComputeWorkGroupCount[c]);
  MLC_RETURN_IF_ERROR(layout_for(d, k->nargs));
  VkShaderModuleCreateInfo mi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, .codeSize = k->nwords * 4,
                                 .pCode = k->words};
  MLC_RETURN_IF_ERROR(mlc_status_annotate(CK(d, vkCreateShaderModule(d->dev, &mi, NULL, &kk->mod)), "kernel %s", k->symbol));
  for (uint32_t j = 0; j < k->ndispatch; j++) {
    VkSpecializationMapEntry me[3];
    uint32_t vals[3], n = 0;
    for (uint32_t c = 0; c < 3; c++)
      if (k->dispatch[j].local[c]) {
        me[n] = (VkSpecializationMapEntry){c, n * 4, 4};
        vals[n++] = k->dispatch[j].local[c];
      }
    VkSpecializationInfo si = {n, me, n * 4, vals};
    VkComputePipelineCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                  .module = kk->mod, .pName = k->dispatch[j].entry, .pSpecializationInfo = n ? &si : NULL},
        .layout = d->layout[k->nargs]};
    if (d->pipe_stats)
      ci.flags = VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR | VK_PIPELINE_CREATE_CAPTURE_INTERNAL_REPRESENTATIONS_BIT_KHR;
    mlc_status st = CK(d, vkCreateComputePipelines(d->dev, d->cache, 1, &ci, NULL, &kk->pipe[j]));
    if (st) return mlc_status_annotate(st, "kernel %s, entry point %s", k->symbol, k->dispatch[j].entry);
    if (d->pipe_stats) report_pipeline(d, kk->pipe[j], k->symbol, k->dispatch[j].entry);
    d->new_pipelines++;
  }
  kk->k = k;
  return NULL;
}

static mlc_status vk_resolve(mlc_device *base, const char *symbol, void **out) {
  vk_dev *d = (vk_dev *)base;
  for (uint32_t i = 0; i < d->code.nkernels; i++) {
    const mlc_vk_kernel *k = &d->code.kernels[i];
    if (strcmp(k->symbol, symbol)) continue;
    kernel *kk = &d->kernels[i];
    if (!kk->k) {
      /* a cooperative-matrix kernel only when the device offers every
       * multiply its words do, else the first fallback it runs (coopmat.h) */
      mlc_vk_coopmat_caps caps = {.device = d->props.deviceName,
                                  .enabled = {d->coopmat_khr, d->coopmat_nv},
                                  .props = {d->coopmat_props[0], d->coopmat_props[1]},
                                  .nprops = {d->n_coopmat_props[0], d->n_coopmat_props[1]}};
      uint32_t pick;
      MLC_RETURN_IF_ERROR(mlc_vk_coopmat_pick(base->a, &caps, d->code.kernels, d->code.nkernels, i, &pick));
      const mlc_vk_kernel *use = &d->code.kernels[pick];
      if (use->nargs != k->nargs)
        return mlc_status_make(MLC_INVALID_ARGUMENT, "Vulkan kernel %s: its fallback %s takes %u arguments, not %u", symbol,
                               use->symbol, use->nargs, k->nargs);
      if (use->scratch > d->scratch.size) {
        MLC_RETURN_IF_ERROR(flush(d));
        d->api.vkDeviceWaitIdle(d->dev);
        drop_caches(d, true);
        destroy_block(d, &d->scratch);
        MLC_RETURN_IF_ERROR(make_block(d, use->scratch, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0, &d->scratch));
        base->allocated += use->scratch;
      }
      MLC_RETURN_IF_ERROR(build_kernel(d, kk, use));
    }
    *out = kk;
    return NULL;
  }
  return mlc_status_make(MLC_NOT_FOUND, "kernel %s is not in the Vulkan kernel table", symbol);
}

/* ---- descriptor sets and command buffers ---- */

static uint64_t set_hash(const kernel *k, const uint64_t *args, uint32_t nargs) {
  uint64_t key[MAX_ARGS + 1];
  key[0] = (uint64_t)(uintptr_t)k;
  memcpy(key + 1, args, nargs * sizeof *args);
  return XXH64(key, (nargs + 1) * sizeof *key, 0);
}

static void drop_caches(vk_dev *d, bool sets) {
  for (uint32_t i = 0; i < CACHED_CMDS; i++) {
    cmd_entry *c = &d->cmds[i];
    if (c->cb) d->api.vkFreeCommandBuffers(d->dev, d->cmd_pool, 1, &c->cb);
    mlc_allocator_free(d->base.a, c->recs);
    memset(c, 0, sizeof *c);
  }
  if (!sets) return;
  for (uint32_t i = 0; i < d->cap_sets; i++) mlc_allocator_free(d->base.a, d->sets[i].args);
  if (d->cap_sets) memset(d->sets, 0, d->cap_sets * sizeof *d->sets);
  d->nsets = 0;
  for (uint32_t i = 0; i < d->made_pools; i++) d->api.vkResetDescriptorPool(d->dev, d->pools[i], 0);
  d->npools = 0;
  d->pool_used = 0;
}

static mlc_status new_set(vk_dev *d, kernel *k, VkDescriptorSet *out) {
  if (!d->npools || d->pool_used == SETS_PER_POOL) {
    if (d->npools == d->made_pools) {
      VkDescriptorPool *np = grow(d->base.a, d->pools, d->made_pools, d->made_pools + 1, sizeof *np);
      if (!np) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory");
      d->pools = np;
      VkDescriptorPoolSize ps = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, SETS_PER_POOL * 16};
      VkDescriptorPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, .maxSets = SETS_PER_POOL,
                                       .poolSizeCount = 1, .pPoolSizes = &ps};
      MLC_RETURN_IF_ERROR(CK(d, vkCreateDescriptorPool(d->dev, &pi, NULL, &d->pools[d->made_pools])));
      d->made_pools++;
    }
    d->npools++;
    d->pool_used = 0;
  }
  VkDescriptorSetAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                    .descriptorPool = d->pools[d->npools - 1], .descriptorSetCount = 1,
                                    .pSetLayouts = &d->dsl[k->k->nargs]};
  VkResult r = d->api.vkAllocateDescriptorSets(d->dev, &ai, out);
  if ((r == VK_ERROR_OUT_OF_POOL_MEMORY || r == VK_ERROR_FRAGMENTED_POOL) && d->pool_used) { /* the pool is full: the next */
    d->pool_used = SETS_PER_POOL;
    return new_set(d, k, out);
  }
  d->pool_used++;
  return mlc_vk_check(r, "vkAllocateDescriptorSets");
}

/* The descriptor set for kernel k over args, made on first use. */
static mlc_status get_set(vk_dev *d, kernel *k, const uint64_t *args, uint32_t nargs, VkDescriptorSet *out) {
  if (2 * (d->nsets + 1) > d->cap_sets) { /* rehash into twice the room */
    uint32_t cap = d->cap_sets ? 2 * d->cap_sets : 256;
    set_entry *ns = mlc_allocator_alloc_array(d->base.a, cap, sizeof *ns);
    if (!ns) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory");
    memset(ns, 0, cap * sizeof *ns);
    for (uint32_t i = 0; i < d->cap_sets; i++) {
      set_entry *e = &d->sets[i];
      if (!e->k) continue;
      uint32_t j = (uint32_t)set_hash(e->k, e->args, e->k->k->nargs) & (cap - 1);
      while (ns[j].k) j = (j + 1) & (cap - 1);
      ns[j] = *e;
    }
    mlc_allocator_free(d->base.a, d->sets);
    d->sets = ns;
    d->cap_sets = cap;
  }
  uint32_t j = (uint32_t)set_hash(k, args, nargs) & (d->cap_sets - 1);
  for (; d->sets[j].k; j = (j + 1) & (d->cap_sets - 1))
    if (d->sets[j].k == k && !memcmp(d->sets[j].args, args, nargs * sizeof *args)) {
      *out = d->sets[j].set;
      return NULL;
    }
  VkDescriptorBufferInfo bi[MAX_ARGS + 1];
  VkWriteDescriptorSet w[MAX_ARGS + 1];
  uint64_t max_range = d->props.limits.maxStorageBufferRange;
  for (uint32_t i = 0; i < nargs; i++) {
    block *b;
    uint64_t off;
    MLC_RETURN_IF_ERROR(find_block(d, args[i], 0, &b, &off));
    if (off % d->props.limits.minStorageBufferOffsetAlignment)
      return mlc_status_make(MLC_INVALID_ARGUMENT, "Vulkan kernel %s: argument %u starts at offset %llu, not a multiple of "
                             "this device's storage-buffer alignment (%llu)", k->k->symbol, i, (unsigned long long)off,
                             (unsigned long long)d->props.limits.minStorageBufferOffsetAlignment);
    uint64_t range = b->size - off < max_range ? b->size - off : max_range;
    bi[i] = range ? (VkDescriptorBufferInfo){b->buf, off, range} : (VkDescriptorBufferInfo){d->dummy.buf, 0, VK_WHOLE_SIZE};
  }
  bi[nargs] = k->k->scratch ? (VkDescriptorBufferInfo){d->scratch.buf, 0, d->scratch.size < max_range ? d->scratch.size : max_range}
                            : (VkDescriptorBufferInfo){d->dummy.buf, 0, VK_WHOLE_SIZE};
  VkDescriptorSet set;
  MLC_RETURN_IF_ERROR(new_set(d, k, &set));
  for (uint32_t i = 0; i <= nargs; i++)
    w[i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, .dstSet = set, .dstBinding = i,
                                  .descriptorCount = 1, .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                  .pBufferInfo = &bi[i]};
  d->api.vkUpdateDescriptorSets(d->dev, nargs + 1, w, 0, NULL);
  uint64_t *copy = mlc_allocator_alloc_array(d->base.a, nargs + 1, sizeof *copy);
  if (!copy) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory");
  memcpy(copy, args, nargs * sizeof *args);
  d->sets[j] = (set_entry){k, copy, set};
  d->nsets++;
  *out = set;
  return NULL;
}

static mlc_status ensure_slots(vk_dev *d, uint32_t slot) {
  if (slot < d->cap_slots) return NULL;
  uint32_t cap = d->cap_slots ? d->cap_slots : 256;
  while (cap <= slot) cap *= 2;
  double *sec = grow(d->base.a, d->t_sec, d->cap_slots, cap, sizeof *sec);
  if (sec) d->t_sec = sec;
  double *start = sec ? grow(d->base.a, d->t_start, d->cap_slots, cap, sizeof *start) : NULL;
  if (start) d->t_start = start;
  uint8_t *used = start ? grow(d->base.a, d->t_used, d->cap_slots, cap, sizeof *used) : NULL;
  if (!used) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory for timing slots");
  d->t_used = used;
  if (d->queries) d->api.vkDestroyQueryPool(d->dev, d->queries, NULL);
  d->queries = VK_NULL_HANDLE;
  d->cap_slots = cap;
  drop_caches(d, false); /* recorded command buffers name the old pool */
  VkQueryPoolCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO, .queryType = VK_QUERY_TYPE_TIMESTAMP,
                              .queryCount = 2 * cap};
  return CK(d, vkCreateQueryPool(d->dev, &qi, NULL, &d->queries));
}

static mlc_status vk_launch(mlc_device *base, void *kh, uint64_t work_items, const uint64_t *args, uint32_t nargs,
                            bool timing, uint32_t slot) {
  vk_dev *d = (vk_dev *)base;
  kernel *k = kh;
  (void)work_items; /* the kernel table fixes the dispatch */
  if (nargs != k->k->nargs)
    return mlc_status_make(MLC_INVALID_ARGUMENT, "Vulkan kernel %s takes %u arguments; the plan gives %u", k->k->symbol,
                           k->k->nargs, nargs);
  VkDescriptorSet set;
  MLC_RETURN_IF_ERROR(get_set(d, k, args, nargs, &set));
  timing = timing && d->timestamps;
  if (timing) MLC_RETURN_IF_ERROR(ensure_slots(d, slot));
  if (d->npending == d->cap_pending) {
    uint32_t cap = d->cap_pending ? 2 * d->cap_pending : 256;
    launch_rec *np = grow(base->a, d->pending, d->npending, cap, sizeof *np);
    if (!np) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory");
    d->pending = np;
    d->cap_pending = cap;
  }
  launch_rec *r = &d->pending[d->npending++];
  memset(r, 0, sizeof *r); /* hashed and compared as bytes */
  r->k = k;
  r->set = set;
  r->slot = timing ? slot : 0;
  r->timing = timing;
  return NULL;
}

static void barrier(vk_dev *d, VkCommandBuffer cb, VkPipelineStageFlags src, VkAccessFlags src_access,
                    VkPipelineStageFlags dst, VkAccessFlags dst_access) {
  VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = src_access, .dstAccessMask = dst_access};
  d->api.vkCmdPipelineBarrier(cb, src, dst, 0, 1, &mb, 0, NULL, 0, NULL);
}

/* Records the launches into cb: each step after everything before it, and
 * the results visible to copies and the host at the end. */
static mlc_status record(vk_dev *d, VkCommandBuffer cb, const launch_rec *recs, uint32_t n) {
  VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  MLC_RETURN_IF_ERROR(CK(d, vkBeginCommandBuffer(cb, &bi)));
  const VkAccessFlags rw = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
  const VkPipelineStageFlags cs = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT;
  barrier(d, cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, cs, rw);
  for (uint32_t i = 0; i < n; i++)
    if (recs[i].timing) d->api.vkCmdResetQueryPool(cb, d->queries, 2 * recs[i].slot, 2);
  for (uint32_t i = 0; i < n; i++) {
    const launch_rec *r = &recs[i];
    const mlc_vk_kernel *k = r->k->k;
    if (i) barrier(d, cb, cs, VK_ACCESS_SHADER_WRITE_BIT, cs, rw);
    if (r->timing) d->api.vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, d->queries, 2 * r->slot);
    for (uint32_t j = 0; j < k->ndispatch; j++) {
      if (j) barrier(d, cb, cs, VK_ACCESS_SHADER_WRITE_BIT, cs, rw);
      d->api.vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, r->k->pipe[j]);
      if (!j) d->api.vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, d->layout[k->nargs], 0, 1, &r->set, 0, NULL);
      d->api.vkCmdDispatch(cb, k->dispatch[j].groups[0], k->dispatch[j].groups[1], k->dispatch[j].groups[2]);
    }
    if (r->timing) d->api.vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, d->queries, 2 * r->slot + 1);
  }
  barrier(d, cb, cs, VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_HOST_BIT,
          VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_HOST_READ_BIT);
  return CK(d, vkEndCommandBuffer(cb));
}

/* Runs the launches recorded so far and waits for them; their times go to
 * t_sec and t_start. */
static mlc_status flush(vk_dev *d) {
  uint32_t n = d->npending;
  if (!n) return NULL;
  d->npending = 0;
  uint64_t h = XXH64(d->pending, n * sizeof *d->pending, 0);
  cmd_entry *c = NULL, *victim = &d->cmds[0];
  for (uint32_t i = 0; i < CACHED_CMDS && !c; i++) {
    cmd_entry *e = &d->cmds[i];
    if (e->cb && e->hash == h && e->n == n && !memcmp(e->recs, d->pending, n * sizeof *e->recs)) c = e;
    if (!e->cb || (victim->cb && e->last_use < victim->last_use)) victim = e;
  }
  if (!c) {
    c = victim;
    if (c->cb) d->api.vkFreeCommandBuffers(d->dev, d->cmd_pool, 1, &c->cb);
    mlc_allocator_free(d->base.a, c->recs);
    memset(c, 0, sizeof *c);
    if (!(c->recs = mlc_allocator_alloc_array(d->base.a, n, sizeof *c->recs)))
      return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory");
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .commandPool = d->cmd_pool,
                                      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1};
    mlc_status st = CK(d, vkAllocateCommandBuffers(d->dev, &ai, &c->cb));
    if (!st) st = record(d, c->cb, d->pending, n);
    if (st) {
      if (c->cb) d->api.vkFreeCommandBuffers(d->dev, d->cmd_pool, 1, &c->cb);
      mlc_allocator_free(d->base.a, c->recs);
      memset(c, 0, sizeof *c);
      return st;
    }
    memcpy(c->recs, d->pending, n * sizeof *c->recs);
    c->n = n;
    c->hash = h;
  }
  c->last_use = ++d->clock;
  MLC_RETURN_IF_ERROR(submit_wait(d, c->cb, "running the step's kernels"));
  for (uint32_t i = 0; i < n; i++) {
    const launch_rec *r = &c->recs[i];
    if (!r->timing) continue;
    uint64_t t[2];
    MLC_RETURN_IF_ERROR(CK(d, vkGetQueryPoolResults(d->dev, d->queries, 2 * r->slot, 2, sizeof t, t, sizeof *t,
                                                    VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT)));
    d->t_sec[r->slot] = (double)((t[1] - t[0]) & d->ts_mask) * d->tick_s;
    d->t_start[r->slot] = (double)((t[0] - d->origin) & d->ts_mask) * d->tick_s;
    d->t_used[r->slot] = 1;
  }
  return NULL;
}

static mlc_status vk_finish(mlc_device *base, uint32_t nslots, double *seconds, double *start) {
  vk_dev *d = (vk_dev *)base;
  MLC_RETURN_IF_ERROR(flush(d));
  for (uint32_t i = 0; i < nslots && i < d->cap_slots; i++) {
    if (!d->t_used[i]) continue;
    seconds[i] = d->t_sec[i];
    start[i] = d->t_start[i];
    d->t_used[i] = 0;
  }
  return NULL;
}

static void vk_describe(mlc_device *base, char *buf, size_t n) {
  vk_dev *d = (vk_dev *)base;
  snprintf(buf, n, "%s (Vulkan, %s)", d->props.deviceName, d->driver);
}

/* ---- the device ---- */

static void save_cache(vk_dev *d) {
  size_t n = 0;
  if (!d->cache || !d->new_pipelines || !d->cache_path[0]) return;
  if (d->api.vkGetPipelineCacheData(d->dev, d->cache, &n, NULL) || !n) return;
  void *data = malloc(n);
  if (data && d->api.vkGetPipelineCacheData(d->dev, d->cache, &n, data) == VK_SUCCESS) mlc_write_file(d->cache_path, data, n);
  free(data);
}

static void vk_destroy(mlc_device *base) {
  vk_dev *d = (vk_dev *)base;
  if (!d) return;
  mlc_allocator a = base->a;
  if (d->dev) {
    d->api.vkDeviceWaitIdle(d->dev);
    save_cache(d);
    drop_caches(d, true);
    for (uint32_t i = 0; i < d->made_pools; i++) d->api.vkDestroyDescriptorPool(d->dev, d->pools[i], NULL);
    for (uint32_t i = 0; d->kernels && i < d->code.nkernels; i++) {
      for (uint32_t j = 0; j < MLC_VK_MAX_DISPATCH; j++)
        if (d->kernels[i].pipe[j]) d->api.vkDestroyPipeline(d->dev, d->kernels[i].pipe[j], NULL);
      if (d->kernels[i].mod) d->api.vkDestroyShaderModule(d->dev, d->kernels[i].mod, NULL);
    }
    for (uint32_t i = 0; i <= MAX_ARGS; i++) {
      if (d->layout[i]) d->api.vkDestroyPipelineLayout(d->dev, d->layout[i], NULL);
      if (d->dsl[i]) d->api.vkDestroyDescriptorSetLayout(d->dev, d->dsl[i], NULL);
    }
    for (uint32_t i = 0; i < d->nblocks; i++) destroy_block(d, &d->blocks[i]);
    destroy_block(d, &d->staging);
    destroy_block(d, &d->scratch);
    destroy_block(d, &d->dummy);
    if (d->queries) d->api.vkDestroyQueryPool(d->dev, d->queries, NULL);
    if (d->fence) d->api.vkDestroyFence(d->dev, d->fence, NULL);
    if (d->cmd_pool) d->api.vkDestroyCommandPool(d->dev, d->cmd_pool, NULL);
    if (d->cache) d->api.vkDestroyPipelineCache(d->dev, d->cache, NULL);
    d->api.vkDestroyDevice(d->dev, NULL);
  }
  mlc_vk_unload(&d->api);
  free(d->coopmat_props[0]);
  free(d->coopmat_props[1]);
  if (d->code.messages) *d->code.messages = d->api.messages;
  if (d->api.messages && d->code.progress)
    fprintf(d->code.progress, "mlc: %u Vulkan validation message%s (see above)\n", d->api.messages,
            d->api.messages == 1 ? "" : "s");
  mlc_allocator_free(a, d->kernels);
  mlc_allocator_free(a, d->table);
  mlc_allocator_free(a, d->pools);
  mlc_allocator_free(a, d->sets);
  mlc_allocator_free(a, d->blocks);
  mlc_allocator_free(a, d->pending);
  mlc_allocator_free(a, d->t_sec);
  mlc_allocator_free(a, d->t_start);
  mlc_allocator_free(a, d->t_used);
  mlc_allocator_free(a, d);
}

static const mlc_device_vt vk_vt = {
    "vulkan", false, false, vk_destroy, vk_alloc, vk_free, vk_write, vk_read, vk_resolve, vk_launch, vk_finish, vk_describe,
    NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
};

uint32_t mlc_vk_device_messages(const mlc_device *base) { return ((const vk_dev *)base)->api.messages; }
bool mlc_vk_device_coopmat(const mlc_device *base) {
  const vk_dev *d = (const vk_dev *)base;
  return d->coopmat_khr || d->coopmat_nv;
}

/* A queue family that computes, with timestamps if one has them. */
static bool pick_family(vk_dev *d) {
  uint32_t n = 0;
  d->api.vkGetPhysicalDeviceQueueFamilyProperties(d->phys, &n, NULL);
  VkQueueFamilyProperties *q = calloc(n + 1, sizeof *q);
  if (!q) return false;
  d->api.vkGetPhysicalDeviceQueueFamilyProperties(d->phys, &n, q);
  int best = -1;
  for (uint32_t i = 0; i < n; i++) {
    if (!(q[i].queueFlags & VK_QUEUE_COMPUTE_BIT)) continue;
    if (best < 0 || (!q[best].timestampValidBits && q[i].timestampValidBits)) best = (int)i;
  }
  if (best >= 0) {
    d->family = (uint32_t)best;
    uint32_t bits = q[best].timestampValidBits;
    d->timestamps = bits > 0 && d->props.limits.timestampPeriod > 0;
    d->ts_mask = bits >= 64 ? UINT64_MAX : (1ull << bits) - 1;
    d->tick_s = d->props.limits.timestampPeriod * 1e-9;
  }
  free(q);
  return best >= 0;
}

static mlc_status make_device(vk_dev *d) {
  mlc_vk_coopmat_features khr = {.sType = MLC_VK_STYPE_COOPMAT_FEATURES};
  VkPhysicalDeviceCooperativeMatrixFeaturesNV nv = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};
  VkPhysicalDeviceVulkan13Features f13 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES};
  VkPhysicalDeviceVulkan12Features f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceVulkan11Features f11 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES, .pNext = &f12};
  VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f11};
  void **tail = &f12.pNext;
  if (d->props.apiVersion >= VK_API_VERSION_1_3 && d->api.api_version >= VK_API_VERSION_1_3) {
    *tail = &f13;
    tail = &f13.pNext;
  }
  bool has_khr = mlc_vk_has_extension(&d->api, d->phys, MLC_VK_COOPMAT_EXT);
  bool has_nv = mlc_vk_has_extension(&d->api, d->phys, MLC_VK_COOPMAT_NV_EXT);
  /* MLC_VK_COOPMAT=nv (or khr): enable that form alone, e.g. for a validation
   * layer older than VK_KHR_cooperative_matrix (Debian 12's 1.3.239), which
   * rejects the KHR features structure at vkCreateDevice */
  const char *only = getenv("MLC_VK_COOPMAT");
  if (only && *only && strcmp(only, "nv") && strcmp(only, "khr"))
    return mlc_status_make(MLC_INVALID_ARGUMENT, "MLC_VK_COOPMAT=%s: expected nv or khr (the cooperative-matrix "
                           "extension to enable alone), or unset for both", only);
  if (only && !strcmp(only, "nv")) has_khr = false;
  if (only && !strcmp(only, "khr")) has_nv = false;
  bool has_bf16 = has_khr && mlc_vk_has_extension(&d->api, d->phys, MLC_VK_BF16_EXT);
  mlc_vk_bf16_features bf = {.sType = MLC_VK_STYPE_BF16_FEATURES};
  void **core_tail = tail;
  if (has_khr) { *tail = &khr; tail = &khr.pNext; }
  if (has_bf16) { *tail = &bf; tail = &bf.pNext; }
  if (has_nv) *tail = &nv;
  d->api.vkGetPhysicalDeviceFeatures2(d->phys, &f2);
  /* Everything the device offers (the kernels declare what they use),
   * less the robustness checks that cost speed and capture-replay. */
  f2.features.robustBufferAccess = VK_FALSE;
  f13.robustImageAccess = VK_FALSE;
  f12.bufferDeviceAddressCaptureReplay = VK_FALSE;
  f12.bufferDeviceAddressMultiDevice = VK_FALSE;
  khr.cooperativeMatrixRobustBufferAccess = VK_FALSE;
  nv.cooperativeMatrixRobustBufferAccess = VK_FALSE;
  d->coopmat_khr = has_khr && khr.cooperativeMatrix;
  d->coopmat_nv = has_nv && nv.cooperativeMatrix;
  /* bf16 matrices (the KHR bf16 GEMMs) where the driver has them; the
   * cooperative-matrix check (coopmat.h) finds out whether it lists them */
  bool bf16_coop = d->coopmat_khr && has_bf16 && bf.shaderBFloat16Type && bf.shaderBFloat16CooperativeMatrix;
  for (int kind = MLC_VK_COOPMAT_KHR; kind <= MLC_VK_COOPMAT_NV; kind++) {
    if (!(kind == MLC_VK_COOPMAT_KHR ? d->coopmat_khr : d->coopmat_nv)) continue;
    mlc_vk_coopmat_properties *p = mlc_vk_coopmat_properties_of(&d->api, d->phys, (mlc_vk_coopmat_kind)kind, &d->n_coopmat_props[kind]);
    uint32_t n = 0; /* without the bf16 feature enabled, a listed bf16 multiply cannot be used */
    for (uint32_t j = 0; p && j < d->n_coopmat_props[kind]; j++)
      if (bf16_coop || (p[j].AType != MLC_VK_COMPONENT_BF16 && p[j].BType != MLC_VK_COMPONENT_BF16)) p[n++] = p[j];
    d->coopmat_props[kind] = p;
    d->n_coopmat_props[kind] = n;
  }
  /* Chain again with only the extensions that are enabled. */
  const char *exts[4];
  uint32_t next = 0;
  tail = core_tail;
  *tail = NULL;
  khr.pNext = nv.pNext = bf.pNext = NULL;
  if (d->coopmat_khr) { *tail = &khr; tail = &khr.pNext; exts[next++] = MLC_VK_COOPMAT_EXT; }
  if (bf16_coop) { *tail = &bf; tail = &bf.pNext; exts[next++] = MLC_VK_BF16_EXT; }
  if (d->coopmat_nv) { *tail = &nv; exts[next++] = MLC_VK_COOPMAT_NV_EXT; }
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR pe = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR, .pipelineExecutableInfo = VK_TRUE};
  d->pipe_stats = getenv("MLC_VK_PIPELINE_STATS") &&
                  mlc_vk_has_extension(&d->api, d->phys, VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
  if (d->pipe_stats) {
    pe.pNext = f2.pNext;
    f2.pNext = &pe;
    exts[next++] = VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME;
  }
  float priority = 1;
  VkDeviceQueueCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, .queueFamilyIndex = d->family,
                                .queueCount = 1, .pQueuePriorities = &priority};
  VkDeviceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .pNext = &f2, .queueCreateInfoCount = 1,
                           .pQueueCreateInfos = &qi, .enabledExtensionCount = next, .ppEnabledExtensionNames = exts};
  MLC_RETURN_IF_ERROR(CK(d, vkCreateDevice(d->phys, &ci, NULL, &d->dev)));
  MLC_RETURN_IF_ERROR(mlc_vk_load_device(&d->api, d->dev));
  if (d->pipe_stats) {
    PFN_vkVoidFunction fn[3] = {d->api.vkGetDeviceProcAddr(d->dev, "vkGetPipelineExecutablePropertiesKHR"),
                                d->api.vkGetDeviceProcAddr(d->dev, "vkGetPipelineExecutableStatisticsKHR"),
                                d->api.vkGetDeviceProcAddr(d->dev, "vkGetPipelineExecutableInternalRepresentationsKHR")};
    memcpy(&d->exec_props, &fn[0], sizeof fn[0]);
    memcpy(&d->exec_stats, &fn[1], sizeof fn[1]);
    memcpy(&d->exec_ir, &fn[2], sizeof fn[2]);
    d->pipe_stats = d->exec_props && d->exec_stats;
  }
  return NULL;
}

static mlc_status make_cache(vk_dev *d) {
  char name[128];
  int k = snprintf(name, sizeof name, "vulkan/%04x-%04x-", d->props.vendorID, d->props.deviceID);
  for (int i = 0; i < (int)VK_UUID_SIZE; i++) k += snprintf(name + k, sizeof name - (size_t)k, "%02x", d->props.pipelineCacheUUID[i]);
  snprintf(name + k, sizeof name - (size_t)k, ".bin");
  size_t n = 0;
  void *data = NULL;
  if (mlc_cache_path(d->cache_path, sizeof d->cache_path, name)) data = mlc_read_file(d->cache_path, &n);
  else d->cache_path[0] = 0;
  VkPipelineCacheCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO, .initialDataSize = data ? n : 0,
                                  .pInitialData = data};
  VkResult r = d->api.vkCreatePipelineCache(d->dev, &ci, NULL, &d->cache);
  if (r && data) { /* a file the driver does not take: start afresh */
    ci.initialDataSize = 0;
    ci.pInitialData = NULL;
    r = d->api.vkCreatePipelineCache(d->dev, &ci, NULL, &d->cache);
  }
  free(data);
  return mlc_vk_check(r, "vkCreatePipelineCache");
}

/* The device clock's zero: a timestamp taken now. */
static mlc_status read_origin(vk_dev *d) {
  MLC_RETURN_IF_ERROR(ensure_slots(d, 0));
  MLC_RETURN_IF_ERROR(once_begin(d));
  d->api.vkCmdResetQueryPool(d->once, d->queries, 0, 1);
  d->api.vkCmdWriteTimestamp(d->once, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, d->queries, 0);
  MLC_RETURN_IF_ERROR(once_end(d, "reading the device's clock"));
  return CK(d, vkGetQueryPoolResults(d->dev, d->queries, 0, 1, sizeof d->origin, &d->origin, sizeof d->origin,
                                     VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT));
}

/* The kernel table (kernel.h) of a device created with code->plan: one
 * entry per kernel of the plan, so that a fallback's index is the same in
 * both; a kernel whose code is not SPIR-V gets no dispatches, which resolve
 * refuses.  Anything out of range is MLC_DATA_LOSS, as the plan reader's
 * own checks. */
static mlc_status code_from_plan(vk_dev *d, const mlc_plan *pl) {
  d->table = mlc_allocator_alloc_array(d->base.a, pl->nkernels + 1, sizeof *d->table);
  if (!d->table) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory for the Vulkan kernel table");
  bool any = false;
  for (uint32_t i = 0; i < pl->nkernels; i++) {
    const mlc_plan_dispatch *ds = &pl->dispatch[i];
    mlc_vk_kernel *k = &d->table[i];
    memset(k, 0, sizeof *k);
    k->symbol = pl->kernels[i];
    k->fallback = MLC_VK_NO_FALLBACK;
    if (ds->executable == MLC_PLAN_NO_EXECUTABLE || strcmp(pl->executables[ds->executable].format, MLC_PLAN_FORMAT_SPIRV))
      continue;
    any = true;
    const mlc_plan_executable *e = &pl->executables[ds->executable];
    /* The words are little-endian, as this host's (the plan copied them 16-byte aligned). */
    uint32_t magic = e->bytes >= 20 ? (uint32_t)e->code[0] | (uint32_t)e->code[1] << 8 | (uint32_t)e->code[2] << 16 |
                                          (uint32_t)e->code[3] << 24
                                    : 0;
    if (e->bytes % 4 || magic != 0x07230203u)
      return mlc_status_make(MLC_DATA_LOSS, "corrupt plan: Vulkan kernel %s's executable is no SPIR-V module", k->symbol);
    k->words = (const uint32_t *)(const void *)e->code;
    k->nwords = e->bytes / 4;
    k->nargs = ds->nargs;
    k->scratch = ds->scratch;
    k->ndispatch = ds->nlaunch;
    if (ds->nlaunch > MLC_VK_MAX_DISPATCH)
      return mlc_status_make(MLC_DATA_LOSS, "corrupt plan: Vulkan kernel %s has %u dispatches, more than %d", k->symbol,
                             ds->nlaunch, MLC_VK_MAX_DISPATCH);
    for (uint32_t l = 0; l < ds->nlaunch; l++) {
      const mlc_plan_launch *L = &ds->launch[l];
      if (!L->grid[0])
        return mlc_status_make(MLC_DATA_LOSS, "corrupt plan: Vulkan kernel %s, dispatch %u: no workgroups", k->symbol, l);
      k->dispatch[l] = (mlc_vk_dispatch){L->entry, {L->grid[0], L->grid[1], L->grid[2]},
                                         {L->block[0], L->block[1], L->block[2]}};
    }
    /* The extra bytes (runtime/plan.h): the cooperative-matrix tile and the fallback. */
    mlc_plan_cursor c = {ds->extra, ds->extra + ds->extra_bytes};
    bool ok = mlc_plan_read_u8(&c, &k->coopmat);
    for (int j = 0; ok && j < 3; j++) ok = mlc_plan_read_u32(&c, &k->coopmat_mnk[j]);
    ok = ok && mlc_plan_read_u32(&c, &k->fallback) && c.p == c.end && k->coopmat <= 1 &&
         (k->fallback < pl->nkernels || k->fallback == MLC_VK_NO_FALLBACK);
    if (!ok) return mlc_status_make(MLC_DATA_LOSS, "corrupt plan: the cooperative-matrix record of Vulkan kernel %s", k->symbol);
  }
  if (!any && pl->nkernels)
    return mlc_status_make(MLC_INVALID_ARGUMENT, "the plan of %s has no SPIR-V executable (compile it with --target spirv)",
                           pl->model);
  d->code.kernels = d->table;
  d->code.nkernels = pl->nkernels;
  return NULL;
}

mlc_status mlc_vk_device_create(const mlc_vk_code *code, mlc_allocator a, mlc_device **out) {
  *out = NULL;
  vk_dev *d = mlc_allocator_alloc(a, sizeof *d);
  if (!d) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory");
  memset(d, 0, sizeof *d);
  d->base.vt = &vk_vt;
  d->base.a = a;
  d->code = *code;
  d->next_addr = ADDR_ALIGN;
  mlc_status st = mlc_vk_load(&d->api, code->validate, code->progress);
  if (st) {
    if (code->messages) *code->messages = d->api.messages;
    mlc_allocator_free(a, d);
    return st;
  }
  if (code->plan && (st = code_from_plan(d, code->plan))) goto fail;
  code = &d->code;
  VkPhysicalDevice *devs = NULL;
  uint32_t n = 0;
  if ((st = mlc_vk_physical_devices(&d->api, &devs, &n))) goto fail;
  if (!n) st = mlc_status_make(MLC_UNIMPLEMENTED, "no Vulkan device on this machine (the loader found drivers but no devices)");
  else if (code->ordinal < 0 || (uint32_t)code->ordinal >= n)
    st = mlc_status_make(MLC_NOT_FOUND, "no Vulkan device %d: this machine has %u (mlc devices --target spirv lists them)",
                         code->ordinal, n);
  else d->phys = devs[code->ordinal];
  free(devs);
  if (st) goto fail;
  VkPhysicalDeviceVulkan12Properties p12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_PROPERTIES};
  VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  d->api.vkGetPhysicalDeviceProperties(d->phys, &d->props);
  if (d->props.apiVersion < VK_API_VERSION_1_2) {
    st = mlc_status_make(MLC_UNIMPLEMENTED, "Vulkan device %d (%s) supports Vulkan %u.%u; mlc needs 1.2", code->ordinal,
                         d->props.deviceName, VK_API_VERSION_MAJOR(d->props.apiVersion),
                         VK_API_VERSION_MINOR(d->props.apiVersion));
    goto fail;
  }
  p2.pNext = &p12;
  d->api.vkGetPhysicalDeviceProperties2(d->phys, &p2);
  snprintf(d->driver, sizeof d->driver, "%s %s", p12.driverName, p12.driverInfo);
  d->api.vkGetPhysicalDeviceMemoryProperties(d->phys, &d->memp);
  bool shared = d->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU ||
                d->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
  d->unified = shared && memory_type(d, ~0u, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                                 VK_MEMORY_PROPERTY_HOST_COHERENT_BIT) >= 0;
  if (!pick_family(d)) {
    st = mlc_status_make(MLC_UNIMPLEMENTED, "Vulkan device %s has no compute queue", d->props.deviceName);
    goto fail;
  }
  if ((st = make_device(d))) goto fail;
  d->api.vkGetDeviceQueue(d->dev, d->family, 0, &d->queue);
  VkCommandPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT, .queueFamilyIndex = d->family};
  if ((st = CK(d, vkCreateCommandPool(d->dev, &pi, NULL, &d->cmd_pool)))) goto fail;
  VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .commandPool = d->cmd_pool,
                                    .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1};
  if ((st = CK(d, vkAllocateCommandBuffers(d->dev, &ai, &d->once)))) goto fail;
  VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  if ((st = CK(d, vkCreateFence(d->dev, &fi, NULL, &d->fence)))) goto fail;
  if ((st = make_cache(d))) goto fail;
  if ((st = make_block(d, 256, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0, &d->dummy))) goto fail;
  d->kernels = mlc_allocator_alloc_array(a, code->nkernels + 1, sizeof *d->kernels);
  if (!d->kernels) { st = mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory"); goto fail; }
  memset(d->kernels, 0, (code->nkernels + 1) * sizeof *d->kernels);
  if (d->timestamps && (st = read_origin(d))) goto fail;
  if (code->progress)
    fprintf(code->progress, "mlc: Vulkan device %d: %s (%s)%s%s%s\n", code->ordinal, d->props.deviceName, d->driver,
            d->unified ? ", unified memory" : "",
            d->coopmat_khr && d->coopmat_nv ? ", cooperative matrix (KHR, NV)"
            : d->coopmat_khr                ? ", cooperative matrix (KHR)"
            : d->coopmat_nv                 ? ", cooperative matrix (NV)" : "",
            d->api.validate ? ", validation on" : "");
  *out = &d->base;
  return NULL;
fail:
  vk_destroy(&d->base);
  return st;
}
