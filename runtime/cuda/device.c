/* The CUDA device: see device.h. */
#include "runtime/cuda/device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cuda/compile.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/flush.h"
#include "runtime/plan.h"
#ifdef MLC_HAVE_NVTX
#include <nvtx3/nvToolsExt.h> /* header-only; a no-op unless a tool (nsys, ncu) injects itself */
#endif

enum { FUNC_ATTR_STATIC_SHARED = 1, FUNC_ATTR_NUM_REGS = 4 }; /* CUfunction_attribute */
enum { ATTR_MAX_DYNAMIC_SHARED = 8, ATTR_SHARED_CARVEOUT = 9, ATTR_CC_MAJOR = 75, ATTR_CC_MINOR = 76, ATTR_SM_COUNT = 16,
       ATTR_MEM_CLOCK_KHZ = 36, ATTR_MEM_BUS_BITS = 37, ATTR_CLOCK_KHZ = 13, ATTR_L2_BYTES = 38 };

/* A TMA tensor map's bytes (CUtensorMap: 128 bytes; the driver writes it
 * 64-byte aligned, kept here unaligned, since the launch copies it). */
typedef struct {
  uint64_t w[16];
} tmap_bytes;

typedef struct {
  const mlc_cuda_kernel *k;
  CUfunction fn[MLC_CUDA_MAX_LAUNCH];
  int regs[MLC_CUDA_MAX_LAUNCH], static_smem[MLC_CUDA_MAX_LAUNCH]; /* for the profiler; 0: unknown */
  tmap_bytes map[MLC_CUDA_MAX_TMAP]; /* the tensor maps of the last launch, encoded over map_at's addresses */
  uint64_t map_at[MLC_CUDA_MAX_TMAP];
} kernel;

typedef struct {
  mlc_device base;
  mlc_cuda_driver drv;
  CUdevice dev;
  CUcontext ctx;
  CUstream stream;          /* the current one: streams[cur] */
  CUstream streams[2];      /* compute, communication (made on first use) */
  uint32_t cur;
  CUevent *sig;             /* [cap_sig]: per step that a step of the other stream waits for */
  uint32_t cap_sig;
  CUmodule mod;
  mlc_cuda_code code;
  kernel *kernels;          /* [code.nkernels], resolved lazily */
  mlc_cuda_kernel *table;   /* the launch table made from the plan, or NULL */
  CUdeviceptr scratch;
  uint64_t scratch_bytes;
  CUevent origin;
  CUevent *ev;              /* [2 * cap_ev]: start and end per slot */
  uint32_t cap_ev;
  uint32_t *used;           /* [cap_ev]: slots timed since the last finish */
  mlc_cuda_flush flush;     /* before each timed launch, on request: the L2 emptied */
  char name[256];
  int cc_major, cc_minor, sms;
  bool no_graphs;           /* record_begin refuses: MLC_CUDA_GRAPHS=0 */
  bool pdl;                 /* programmatic dependent launch: sm_90 and later, unless MLC_CUDA_PDL=0 */
} cuda_dev;

#define CK(d, call) mlc_cuda_check(&(d)->drv, (d)->drv.call, #call)

static void cu_destroy(mlc_device *base) {
  cuda_dev *d = (cuda_dev *)base;
  if (!d) return;
  if (d->drv.lib) {
    if (d->ctx) d->drv.cuCtxSetCurrent(d->ctx);
    if (d->ctx) d->drv.cuCtxSynchronize();
    for (uint32_t i = 0; i < d->cap_sig; i++)
      if (d->sig[i]) d->drv.cuEventDestroy(d->sig[i]);
    for (uint32_t i = 0; i < 2 * d->cap_ev; i++)
      if (d->ev[i]) d->drv.cuEventDestroy(d->ev[i]);
    if (d->origin) d->drv.cuEventDestroy(d->origin);
    mlc_cuda_flush_free(&d->drv, &d->flush);
    if (d->scratch) d->drv.cuMemFree(d->scratch);
    if (d->mod) d->drv.cuModuleUnload(d->mod);
    for (int i = 0; i < 2; i++)
      if (d->streams[i]) d->drv.cuStreamDestroy(d->streams[i]);
    if (d->ctx) d->drv.cuDevicePrimaryCtxRelease(d->dev);
    mlc_cuda_driver_unload(&d->drv);
  }
  mlc_allocator_free(d->base.a, d->ev);
  mlc_allocator_free(d->base.a, d->sig);
  mlc_allocator_free(d->base.a, d->used);
  mlc_allocator_free(d->base.a, d->kernels);
  mlc_allocator_free(d->base.a, d->table);
  mlc_allocator_free(d->base.a, d);
}

static mlc_status cu_alloc(mlc_device *base, uint64_t bytes, uint64_t *out) {
  cuda_dev *d = (cuda_dev *)base;
  CUdeviceptr p = 0;
  CUresult r = d->drv.cuMemAlloc(&p, bytes ? bytes : 1);
  if (r) {
    size_t fr = 0, tot = 0;
    d->drv.cuMemGetInfo(&fr, &tot);
    mlc_status st = mlc_cuda_check(&d->drv, r, "cuMemAlloc");
    mlc_status out_st = mlc_status_make(MLC_OUT_OF_MEMORY, "out of GPU memory: %llu bytes asked for, %.2f GB free of %.2f GB (%s)",
                                        (unsigned long long)bytes, fr / 1e9, tot / 1e9, mlc_status_message(st));
    mlc_status_free(st);
    return out_st;
  }
  mlc_status st = CK(d, cuMemsetD8(p, 0, bytes ? bytes : 1));
  if (st) { d->drv.cuMemFree(p); return st; }
  base->allocated += bytes;
  *out = p;
  return NULL;
}

static void cu_free(mlc_device *base, uint64_t addr) {
  cuda_dev *d = (cuda_dev *)base;
  if (addr) d->drv.cuMemFree(addr);
}

static mlc_status cu_write(mlc_device *base, uint64_t dst, const void *src, uint64_t n) {
  cuda_dev *d = (cuda_dev *)base;
  if (!n) return NULL;
  MLC_RETURN_IF_ERROR(CK(d, cuCtxSynchronize()));
  return CK(d, cuMemcpyHtoD(dst, src, n));
}

static mlc_status cu_read(mlc_device *base, void *dst, uint64_t src, uint64_t n) {
  cuda_dev *d = (cuda_dev *)base;
  if (!n) return NULL;
  MLC_RETURN_IF_ERROR(CK(d, cuCtxSynchronize()));
  return CK(d, cuMemcpyDtoH(dst, src, n));
}

enum { PTR_ATTR_MEMORY_TYPE = 2, PTR_ATTR_DEVICE_ORDINAL = 9, MEMORYTYPE_DEVICE = 2 }; /* CUpointer_attribute, CUmemorytype */

/* What the driver knows of a caller's address: device memory, and of which GPU. */
static mlc_status check_external(cuda_dev *d, CUdeviceptr p, const char *which, int ordinal) {
  unsigned type = 0;
  int on = -1;
  CUresult r = d->drv.cuPointerGetAttribute(&type, PTR_ATTR_MEMORY_TYPE, p);
  if (r || type != MEMORYTYPE_DEVICE)
    return mlc_status_make(MLC_INVALID_ARGUMENT, "its %s byte (0x%llx) is not in GPU memory (%s): a host buffer given "
                           "as device memory?", which, (unsigned long long)p,
                           r ? "the driver knows no such address" : "the driver says host memory");
  if (d->drv.cuPointerGetAttribute(&on, PTR_ATTR_DEVICE_ORDINAL, p) == 0 && on != ordinal)
    return mlc_status_make(MLC_INVALID_ARGUMENT, "its %s byte is on GPU %d, the model runs on GPU %d", which, on, ordinal);
  return NULL;
}

static mlc_status cu_check_external(mlc_device *base, uint64_t ext, uint64_t n, int ordinal) {
  cuda_dev *d = (cuda_dev *)base;
  if (ordinal != d->code.ordinal)
    return mlc_status_make(MLC_INVALID_ARGUMENT, "it is said to be on GPU %d, and the model runs on GPU %d", ordinal,
                           d->code.ordinal);
  if (!n) return NULL;
  MLC_RETURN_IF_ERROR(check_external(d, ext, "first", ordinal));
  return check_external(d, ext + n - 1, "last", ordinal);
}

static mlc_status cu_copy_external(mlc_device *base, uint64_t addr, uint64_t ext, uint64_t n, bool in) {
  cuda_dev *d = (cuda_dev *)base;
  if (!n) return NULL;
  MLC_RETURN_IF_ERROR(CK(d, cuCtxSetCurrent(d->ctx)));
  MLC_RETURN_IF_ERROR(CK(d, cuCtxSynchronize()));
  MLC_RETURN_IF_ERROR(in ? CK(d, cuMemcpyDtoD(addr, ext, n)) : CK(d, cuMemcpyDtoD(ext, addr, n)));
  return CK(d, cuCtxSynchronize());
}

/* A caller's device memory as a kernel argument: the kernels run in this
 * context (the device's primary one, which torch's streams share), so any
 * address of its GPU will do once the caller's work on it is done. */
static mlc_status cu_bind_external(mlc_device *base, uint64_t ext, uint64_t n, int ordinal) {
  cuda_dev *d = (cuda_dev *)base;
  MLC_RETURN_IF_ERROR(cu_check_external(base, ext, n, ordinal));
  MLC_RETURN_IF_ERROR(CK(d, cuCtxSetCurrent(d->ctx)));
  return CK(d, cuCtxSynchronize());
}

static mlc_status cu_resolve(mlc_device *base, const char *symbol, void **out) {
  cuda_dev *d = (cuda_dev *)base;
  for (uint32_t i = 0; i < d->code.nkernels; i++) {
    const mlc_cuda_kernel *k = &d->code.kernels[i];
    if (strcmp(k->symbol, symbol)) continue;
    kernel *kk = &d->kernels[i];
    if (!kk->k) {
      for (uint32_t l = 0; l < k->nlaunch; l++) {
        mlc_status st = CK(d, cuModuleGetFunction(&kk->fn[l], d->mod, k->launch[l].fn));
        if (st) {
          mlc_status r = mlc_status_make(MLC_NOT_FOUND, "kernel %s: %s", k->launch[l].fn, mlc_status_message(st));
          mlc_status_free(st);
          return r;
        }
        /* a kernel of over 48 KiB of shared memory asks for all of it: the
         * carveout of L1 that lets two such blocks share a multiprocessor */
        if (k->launch[l].smem > 48 * 1024) {
          MLC_RETURN_IF_ERROR(CK(d, cuFuncSetAttribute(kk->fn[l], ATTR_MAX_DYNAMIC_SHARED, (int)k->launch[l].smem)));
          MLC_RETURN_IF_ERROR(CK(d, cuFuncSetAttribute(kk->fn[l], ATTR_SHARED_CARVEOUT, 100)));
        }
        /* Only the profiler's occupancy hint reads these: a failure leaves 0 (unknown). */
        if (d->drv.cuFuncGetAttribute(&kk->regs[l], FUNC_ATTR_NUM_REGS, kk->fn[l])) kk->regs[l] = 0;
        if (d->drv.cuFuncGetAttribute(&kk->static_smem[l], FUNC_ATTR_STATIC_SHARED, kk->fn[l])) kk->static_smem[l] = 0;
      }
      if (k->scratch > d->scratch_bytes) {
        if (d->scratch) d->drv.cuMemFree(d->scratch);
        d->scratch = 0;
        d->scratch_bytes = 0;
        uint64_t addr;
        MLC_RETURN_IF_ERROR(cu_alloc(base, k->scratch, &addr));
        d->scratch = addr;
        d->scratch_bytes = k->scratch;
      }
      kk->k = k;
    }
    *out = kk;
    return NULL;
  }
  return mlc_status_make(MLC_NOT_FOUND, "kernel %s is not in the CUDA module's launch table", symbol);
}

/* The launch that stands for the kernel: the one with the most registers a
 * thread, then the most shared memory a block, then the most threads.  A
 * kernel's main launch (attention's pass over the keys, a split GEMM's
 * products) holds the most of both; its small helpers (D = dO . o, a sum
 * of slices) have the most threads and 100 % occupancy, which said nothing
 * of where the time goes (the profile's hint on the f32 attention
 * gradient read "stalled at 100 % occupancy" where ncu measured 12.5 %). */
static void cu_kernel_launch(mlc_device *base, void *kh, mlc_profile_launch *out) {
  (void)base;
  const kernel *k = kh;
  memset(out, 0, sizeof *out);
  if (!k || !k->k) return;
  out->nlaunch = k->k->nlaunch;
  uint64_t best[3] = {0, 0, 0};
  for (uint32_t l = 0; l < k->k->nlaunch; l++) {
    const mlc_cuda_launch *L = &k->k->launch[l];
    uint64_t key[3] = {(uint64_t)k->regs[l], L->smem + (uint64_t)k->static_smem[l], (uint64_t)L->grid * L->block};
    bool more = key[0] != best[0] ? key[0] > best[0] : key[1] != best[1] ? key[1] > best[1] : key[2] > best[2];
    if (!more) continue;
    memcpy(best, key, sizeof best);
    out->grid = L->grid, out->block = L->block, out->smem = L->smem + (uint32_t)k->static_smem[l];
    out->regs = (uint32_t)k->regs[l];
  }
}

static mlc_status grow_events(cuda_dev *d, uint32_t slot) {
  if (slot < d->cap_ev) return NULL;
  uint32_t cap = d->cap_ev ? d->cap_ev : 256;
  while (cap <= slot) cap *= 2;
  CUevent *ev = mlc_allocator_alloc_array(d->base.a, 2 * (size_t)cap, sizeof *ev);
  uint32_t *used = mlc_allocator_alloc_array(d->base.a, cap, sizeof *used);
  if (!ev || !used) {
    mlc_allocator_free(d->base.a, ev);
    mlc_allocator_free(d->base.a, used);
    return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory for CUDA events");
  }
  memset(ev, 0, 2 * (size_t)cap * sizeof *ev);
  memset(used, 0, cap * sizeof *used);
  if (d->cap_ev) {
    memcpy(ev, d->ev, 2 * (size_t)d->cap_ev * sizeof *ev);
    memcpy(used, d->used, d->cap_ev * sizeof *used);
  }
  mlc_allocator_free(d->base.a, d->ev);
  mlc_allocator_free(d->base.a, d->used);
  d->ev = ev;
  d->used = used;
  d->cap_ev = cap;
  return NULL;
}

/* Kernel k's tensor maps over this launch's arguments (kernel.h), encoded
 * again only where an address changed; zeroed before sm_90. */
static mlc_status encode_tmaps(cuda_dev *d, kernel *k, const uint64_t *args, uint32_t nargs) {
  enum { SWIZZLE_NONE = 0, SWIZZLE_128B = 3, L2_PROMOTION_256B = 3, OOB_FILL_ZERO = 0, INTERLEAVE_NONE = 0 };
  for (uint32_t t = 0; t < k->k->ntmap; t++) {
    const mlc_cuda_tmap *m = &k->k->tmap[t];
    if ((m->arg >= nargs && m->arg != MLC_CUDA_TMAP_SCRATCH) || m->rank < 1 || m->rank > 5)
      return mlc_status_make(MLC_INVALID_ARGUMENT, "kernel %s: tensor map %u names argument %u of %u", k->k->symbol, t, m->arg, nargs);
    uint64_t at = (m->arg == MLC_CUDA_TMAP_SCRATCH ? d->scratch : args[m->arg]) + m->offset;
    if (k->map_at[t] == at && at) continue;
    memset(&k->map[t], 0, sizeof k->map[t]);
    k->map_at[t] = at;
    if (d->cc_major < 9) continue;
    /* CUtensorMapDataType: UINT8 0, UINT16 1, UINT32 2 (the bytes are copied as they are) */
    int dtype = m->elem_bytes == 1 ? 0 : m->elem_bytes == 2 ? 1 : 2;
    const unsigned ones[5] = {1, 1, 1, 1, 1};
    struct { _Alignas(64) tmap_bytes b; } enc;
    CUresult r = d->drv.cuTensorMapEncodeTiled(&enc.b, dtype, m->rank, (void *)(uintptr_t)at, m->dim, m->stride, m->box,
                                               ones, INTERLEAVE_NONE, m->swizzle == 128 ? SWIZZLE_128B : SWIZZLE_NONE,
                                               L2_PROMOTION_256B, OOB_FILL_ZERO);
    if (r) {
      k->map_at[t] = 0;
      mlc_status st = mlc_cuda_check(&d->drv, r, "cuTensorMapEncodeTiled");
      char what[32];
      if (m->arg == MLC_CUDA_TMAP_SCRATCH) snprintf(what, sizeof what, "the scratch block");
      else snprintf(what, sizeof what, "argument %u", m->arg);
      mlc_status e = mlc_status_make(MLC_INTERNAL, "kernel %s, tensor map %u at %llu bytes into %s: %s", k->k->symbol, t,
                                     (unsigned long long)m->offset, what, mlc_status_message(st));
      mlc_status_free(st);
      return e;
    }
    k->map[t] = enc.b;
  }
  return NULL;
}

static mlc_status cu_launch(mlc_device *base, void *kh, uint64_t work_items, const uint64_t *args, uint32_t nargs,
                            bool timing, uint32_t slot) {
  cuda_dev *d = (cuda_dev *)base;
  kernel *k = kh;
  CUdeviceptr vals[72];
  void *params[72 + MLC_CUDA_MAX_TMAP];
  if (nargs + 2 > 72) return mlc_status_make(MLC_INVALID_ARGUMENT, "kernel %s: too many arguments (%u)", k->k->symbol, nargs);
  for (uint32_t i = 0; i < nargs; i++) vals[i] = args[i];
  vals[nargs] = k->k->scratch ? d->scratch : 0;
  for (uint32_t i = 0; i <= nargs; i++) params[i] = &vals[i];
  /* Then the work items: kernels on a rank's shard read them as their rows
   * (codegen/cuda/emit_shard.c); the others have no such parameter, and
   * the driver reads only the parameters a kernel has. */
  unsigned long long items = work_items;
  params[nargs + 1] = &items;
  /* then the tensor maps */
  MLC_RETURN_IF_ERROR(encode_tmaps(d, k, args, nargs));
  for (uint32_t t = 0; t < k->k->ntmap; t++) params[nargs + 2 + t] = &k->map[t];
  if (timing) {
    MLC_RETURN_IF_ERROR(grow_events(d, slot));
    for (int e = 0; e < 2; e++)
      if (!d->ev[2 * slot + e]) MLC_RETURN_IF_ERROR(CK(d, cuEventCreate(&d->ev[2 * slot + e], 0)));
    MLC_RETURN_IF_ERROR(mlc_cuda_flush_queue(&d->drv, &d->flush, d->stream));
    MLC_RETURN_IF_ERROR(CK(d, cuEventRecord(d->ev[2 * slot], d->stream)));
  }
  for (uint32_t l = 0; l < k->k->nlaunch; l++) {
    const mlc_cuda_launch *L = &k->k->launch[l];
    CUresult r;
    if (d->pdl) { /* the kernel may start under its predecessor's tail: it opens with griddepcontrol.wait */
      CUlaunchAttribute at = {.id = MLC_CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION};
      at.value.programmatic_stream_serialization_allowed = 1;
      CUlaunchConfig cfg = {L->grid, 1, 1, L->block, 1, 1, L->smem, d->stream, &at, 1};
      r = d->drv.cuLaunchKernelEx(&cfg, k->fn[l], params, NULL);
    } else {
      r = d->drv.cuLaunchKernel(k->fn[l], L->grid, 1, 1, L->block, 1, 1, L->smem, d->stream, params, NULL);
    }
    if (r) {
      mlc_status st = mlc_cuda_check(&d->drv, r, d->pdl ? "cuLaunchKernelEx" : "cuLaunchKernel");
      mlc_status e = mlc_status_make(MLC_INTERNAL, "launching %s (grid %u, block %u, %u bytes of shared memory): %s", L->fn,
                                     L->grid, L->block, L->smem, mlc_status_message(st));
      mlc_status_free(st);
      return e;
    }
  }
  if (timing) {
    MLC_RETURN_IF_ERROR(CK(d, cuEventRecord(d->ev[2 * slot + 1], d->stream)));
    d->used[slot] = 1;
  }
  return NULL;
}

static mlc_status cu_finish(mlc_device *base, uint32_t nslots, double *seconds, double *start) {
  cuda_dev *d = (cuda_dev *)base;
  CUresult r = d->drv.cuCtxSynchronize(); /* both streams */
  if (r) {
    mlc_status st = mlc_cuda_check(&d->drv, r, "running the step's kernels");
    return st;
  }
  for (uint32_t i = 0; i < nslots && i < d->cap_ev; i++) {
    if (!d->used[i]) continue;
    float ms = 0, t0 = 0;
    MLC_RETURN_IF_ERROR(CK(d, cuEventElapsedTime(&ms, d->ev[2 * i], d->ev[2 * i + 1])));
    seconds[i] = ms * 1e-3;
    MLC_RETURN_IF_ERROR(CK(d, cuEventElapsedTime(&t0, d->origin, d->ev[2 * i])));
    start[i] = t0 * 1e-3;
    d->used[i] = 0;
  }
  return NULL;
}

static mlc_status cu_flush_caches(mlc_device *base, bool on) {
  cuda_dev *d = (cuda_dev *)base;
  return mlc_cuda_flush_set(&d->drv, &d->flush, on);
}

static uint64_t cu_cache_bytes(mlc_device *base) {
  cuda_dev *d = (cuda_dev *)base;
  return d->flush.l2_bytes > 0 ? (uint64_t)d->flush.l2_bytes : 0;
}

static void cu_describe(mlc_device *base, char *buf, size_t n) {
  cuda_dev *d = (cuda_dev *)base;
  snprintf(buf, n, "%s (sm_%d%d, %d SMs)", d->name, d->cc_major, d->cc_minor, d->sms);
}

#ifdef MLC_HAVE_NVTX
static void cu_range_push(mlc_device *base, const char *name) { nvtxRangePushA(name); }
static void cu_range_pop(mlc_device *base) { nvtxRangePop(); }
#else
#define cu_range_push NULL
#define cu_range_pop NULL
#endif

static mlc_status cu_mark(mlc_device *base, uint32_t slot, bool end) {
  cuda_dev *d = (cuda_dev *)base;
  MLC_RETURN_IF_ERROR(grow_events(d, slot));
  CUevent *ev = &d->ev[2 * slot + end];
  if (!*ev) MLC_RETURN_IF_ERROR(CK(d, cuEventCreate(ev, 0)));
  MLC_RETURN_IF_ERROR(CK(d, cuEventRecord(*ev, d->stream)));
  if (end) d->used[slot] = 1;
  return NULL;
}

static mlc_status cu_order(mlc_device *base, uint32_t stream, const uint32_t *wait, uint32_t nwait) {
  cuda_dev *d = (cuda_dev *)base;
  if (stream > 1) return mlc_status_make(MLC_INVALID_ARGUMENT, "stream %u: the CUDA device has two", stream);
  if (!d->streams[stream]) MLC_RETURN_IF_ERROR(CK(d, cuStreamCreate(&d->streams[stream], 0)));
  d->cur = stream;
  d->stream = d->streams[stream];
  for (uint32_t i = 0; i < nwait; i++) {
    if (wait[i] >= d->cap_sig || !d->sig[wait[i]])
      return mlc_status_make(MLC_INTERNAL, "a step waits for step %u, which was not signalled", wait[i]);
    MLC_RETURN_IF_ERROR(CK(d, cuStreamWaitEvent(d->stream, d->sig[wait[i]], 0)));
  }
  return NULL;
}

static mlc_status cu_signal(mlc_device *base, uint32_t step) {
  cuda_dev *d = (cuda_dev *)base;
  if (step >= d->cap_sig) {
    uint32_t cap = d->cap_sig ? d->cap_sig : 256;
    while (cap <= step) cap *= 2;
    CUevent *sig = mlc_allocator_alloc_array(base->a, cap, sizeof *sig);
    if (!sig) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory for stream events");
    memset(sig, 0, cap * sizeof *sig);
    if (d->cap_sig) memcpy(sig, d->sig, d->cap_sig * sizeof *sig);
    mlc_allocator_free(base->a, d->sig);
    d->sig = sig;
    d->cap_sig = cap;
  }
  if (!d->sig[step]) MLC_RETURN_IF_ERROR(CK(d, cuEventCreate(&d->sig[step], 2 /* CU_EVENT_DISABLE_TIMING */)));
  return CK(d, cuEventRecord(d->sig[step], d->stream));
}

static void *cu_stream(mlc_device *base) { return ((cuda_dev *)base)->stream; }

/* CUDA's extra bytes of a dispatch record (runtime/plan.h): its tensor maps. */
static bool tmaps_from_plan(const mlc_plan_dispatch *ds, mlc_cuda_kernel *k) {
  uint32_t nargs = ds->nargs;
  mlc_plan_cursor c = {ds->extra, ds->extra + ds->extra_bytes};
  if (!ds->extra_bytes) return true;
  if (!mlc_plan_read_u32(&c, &k->ntmap) || k->ntmap > MLC_CUDA_MAX_TMAP) return false;
  for (uint32_t t = 0; t < k->ntmap; t++) {
    mlc_cuda_tmap *m = &k->tmap[t];
    bool ok = mlc_plan_read_u32(&c, &m->arg) && mlc_plan_read_u32(&c, &m->rank) && mlc_plan_read_u32(&c, &m->elem_bytes) &&
              mlc_plan_read_u32(&c, &m->swizzle) && mlc_plan_read_u64(&c, &m->offset);
    for (int i = 0; ok && i < 5; i++) ok = mlc_plan_read_u64(&c, &m->dim[i]);
    for (int i = 0; ok && i < 4; i++) ok = mlc_plan_read_u64(&c, &m->stride[i]);
    for (int i = 0; ok && i < 5; i++) ok = mlc_plan_read_u32(&c, &m->box[i]);
    if (!ok || m->rank < 1 || m->rank > 5 || (m->elem_bytes != 1 && m->elem_bytes != 2 && m->elem_bytes != 4) ||
        (m->swizzle != 0 && m->swizzle != 128) || (m->arg >= nargs && m->arg != MLC_CUDA_TMAP_SCRATCH))
      return false;
  }
  return c.p == c.end;
}

/* The plan's CUDA executable and its kernels' launch table (kernel.h), for
 * a device created with code->plan: the first executable of a CUDA format,
 * and every kernel whose code is in it.  Anything out of range is
 * MLC_DATA_LOSS, as the plan reader's own checks. */
static mlc_status code_from_plan(cuda_dev *d, const mlc_plan *pl) {
  uint32_t x = 0;
  while (x < pl->nexecutables && strcmp(pl->executables[x].format, MLC_PLAN_FORMAT_CUDA_FATBIN) &&
         strcmp(pl->executables[x].format, MLC_PLAN_FORMAT_CUDA_SOURCE))
    x++;
  if (x == pl->nexecutables)
    return mlc_status_make(MLC_INVALID_ARGUMENT, "the plan of %s has no CUDA executable (compile it with --target cuda)",
                           pl->model);
  const mlc_plan_executable *e = &pl->executables[x];
  bool source = !strcmp(e->format, MLC_PLAN_FORMAT_CUDA_SOURCE);
  if (source && memchr(e->code, 0, e->bytes))
    return mlc_status_make(MLC_DATA_LOSS, "corrupt plan: its CUDA source holds a NUL byte");
  d->table = mlc_allocator_alloc_array(d->base.a, pl->nkernels + 1, sizeof *d->table);
  if (!d->table) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory for the CUDA launch table");
  uint32_t n = 0;
  for (uint32_t i = 0; i < pl->nkernels; i++) {
    const mlc_plan_dispatch *ds = &pl->dispatch[i];
    if (ds->executable != x) continue;
    mlc_cuda_kernel *k = &d->table[n++];
    memset(k, 0, sizeof *k);
    k->symbol = pl->kernels[i];
    k->scratch = ds->scratch;
    k->nlaunch = ds->nlaunch;
    if (ds->nlaunch > MLC_CUDA_MAX_LAUNCH)
      return mlc_status_make(MLC_DATA_LOSS, "corrupt plan: CUDA kernel %s has %u launches, more than %d", k->symbol,
                             ds->nlaunch, MLC_CUDA_MAX_LAUNCH);
    for (uint32_t l = 0; l < ds->nlaunch; l++) {
      const mlc_plan_launch *L = &ds->launch[l];
      if (L->grid[0] < 1 || L->grid[1] != 1 || L->grid[2] != 1 || L->block[0] < 1 || L->block[0] > 1024 ||
          L->block[1] != 1 || L->block[2] != 1)
        return mlc_status_make(MLC_DATA_LOSS, "corrupt plan: CUDA kernel %s, launch %u: grid and block must be 1-D, "
                               "with 1..1024 threads", k->symbol, l);
      k->launch[l] = (mlc_cuda_launch){L->entry, L->grid[0], L->block[0], L->smem};
    }
    if (!tmaps_from_plan(ds, k))
      return mlc_status_make(MLC_DATA_LOSS, "corrupt plan: the tensor maps of CUDA kernel %s", k->symbol);
  }
  d->code.kernels = d->table;
  d->code.nkernels = n;
  d->code.image = source ? NULL : e->code;
  d->code.image_size = source ? 0 : e->bytes;
  d->code.source = source ? (const char *)e->code : NULL;
  return NULL;
}

/* Recorded launches: a CUDA graph captured from the compute stream (relaxed
 * mode: the capture refuses nothing the launches do), instantiated once. */
static mlc_status cu_record_begin(mlc_device *base) {
  cuda_dev *d = (cuda_dev *)base;
  if (d->no_graphs) return mlc_status_make(MLC_UNIMPLEMENTED, "CUDA graphs are off (MLC_CUDA_GRAPHS=0)");
  d->cur = 0;
  d->stream = d->streams[0];
  return CK(d, cuStreamBeginCapture(d->stream, 2 /* CU_STREAM_CAPTURE_MODE_RELAXED */));
}

static mlc_status cu_record_end(mlc_device *base, void **out) {
  cuda_dev *d = (cuda_dev *)base;
  CUgraph g = NULL;
  CUgraphExec x = NULL;
  *out = NULL;
  mlc_status st = CK(d, cuStreamEndCapture(d->stream, &g));
  if (!st) st = CK(d, cuGraphInstantiate(&x, g, 0));
  if (g) d->drv.cuGraphDestroy(g);
  if (!st) *out = x;
  return st;
}

static mlc_status cu_replay(mlc_device *base, void *rec) {
  cuda_dev *d = (cuda_dev *)base;
  return CK(d, cuGraphLaunch((CUgraphExec)rec, d->stream));
}

static void cu_record_free(mlc_device *base, void *rec) {
  cuda_dev *d = (cuda_dev *)base;
  if (rec) d->drv.cuGraphExecDestroy((CUgraphExec)rec);
}

static const mlc_device_vt cuda_vt = {
    "cuda", false, false, cu_destroy, cu_alloc, cu_free, cu_write, cu_read, cu_resolve, cu_launch, cu_finish, cu_describe,
    cu_range_push, cu_range_pop, cu_stream, cu_mark, cu_order, cu_signal, cu_kernel_launch, cu_check_external, cu_copy_external,
    cu_record_begin, cu_record_end, cu_replay, cu_record_free, cu_bind_external, cu_flush_caches, cu_cache_bytes,
};

mlc_status mlc_cuda_device_create(const mlc_cuda_code *code, mlc_allocator a, mlc_device **out) {
  *out = NULL;
  cuda_dev *d = mlc_allocator_alloc(a, sizeof *d);
  if (!d) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory");
  memset(d, 0, sizeof *d);
  d->base.vt = &cuda_vt;
  d->base.a = a;
  d->code = *code;
  /* Recorded launches are on unless MLC_CUDA_GRAPHS=0 (opt-in until
   * 2026-12-06, when every CUDA op case and cuda_minillm.py --small passed
   * with them on an H100: bench/results/h100-2026-12-06.md, session 30). */
  const char *graphs = getenv("MLC_CUDA_GRAPHS");
  d->no_graphs = graphs && !strcmp(graphs, "0");
  mlc_status st = code->plan ? code_from_plan(d, code->plan) : NULL;
  if (st) { cu_destroy(&d->base); return st; }
  code = &d->code;
  st = mlc_cuda_driver_load(&d->drv);
  if (st) { cu_destroy(&d->base); return st; }
  int count = 0;
  if ((st = CK(d, cuDeviceGetCount(&count)))) goto fail;
  if (code->ordinal < 0 || code->ordinal >= count) {
    st = mlc_status_make(MLC_NOT_FOUND, "no CUDA device %d: this machine has %d", code->ordinal, count);
    goto fail;
  }
  if ((st = CK(d, cuDeviceGet(&d->dev, code->ordinal)))) goto fail;
  d->drv.cuDeviceGetName(d->name, sizeof d->name, d->dev);
  d->drv.cuDeviceGetAttribute(&d->cc_major, ATTR_CC_MAJOR, d->dev);
  d->drv.cuDeviceGetAttribute(&d->cc_minor, ATTR_CC_MINOR, d->dev);
  d->drv.cuDeviceGetAttribute(&d->sms, ATTR_SM_COUNT, d->dev);
  d->flush.sms = d->sms;
  d->drv.cuDeviceGetAttribute(&d->flush.l2_bytes, ATTR_L2_BYTES, d->dev);
  /* Programmatic dependent launch on sm_90 and later, unless
   * MLC_CUDA_PDL=0: every kernel that mlc emits opens with
   * griddepcontrol.wait (codegen/cuda/prelude.c), and a plan from an mlc
   * before that (version 8) is refused at load.  On an H100 (2026-12-05)
   * it took 2.4 % off a decode step and left the train step as it was. */
  const char *pdl = getenv("MLC_CUDA_PDL");
  d->pdl = !(pdl && !strcmp(pdl, "0")) && d->cc_major >= 9;
  if ((st = CK(d, cuDevicePrimaryCtxRetain(&d->ctx, d->dev)))) goto fail;
  if ((st = CK(d, cuCtxSetCurrent(d->ctx)))) goto fail;
  if ((st = CK(d, cuStreamCreate(&d->streams[0], 0)))) goto fail;
  d->stream = d->streams[0];
  const void *image = code->image;
  void *compiled = NULL;
  if (!image) {
    if (!code->source) {
      st = mlc_status_make(MLC_INVALID_ARGUMENT, "the CUDA code has neither a compiled image nor source");
      goto fail;
    }
    size_t nbytes;
    if ((st = mlc_cuda_compile_nvrtc(code->source, d->cc_major, d->cc_minor, code->progress, &compiled, &nbytes))) goto fail;
    image = compiled;
  }
  st = CK(d, cuModuleLoadData(&d->mod, image));
  free(compiled);
  if (st) goto fail;
  d->kernels = mlc_allocator_alloc_array(a, code->nkernels + 1, sizeof *d->kernels);
  if (!d->kernels) { st = mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory"); goto fail; }
  memset(d->kernels, 0, (code->nkernels + 1) * sizeof *d->kernels);
  if ((st = CK(d, cuEventCreate(&d->origin, 0)))) goto fail;
  if ((st = CK(d, cuEventRecord(d->origin, d->stream)))) goto fail;
  *out = &d->base;
  return NULL;
fail:
  cu_destroy(&d->base);
  return st;
}

mlc_status mlc_cuda_enumerate(mlc_device_info *out, uint32_t cap, uint32_t *out_n) {
  *out_n = 0;
  mlc_cuda_driver drv;
  MLC_RETURN_IF_ERROR(mlc_cuda_driver_load(&drv));
  int count = 0;
  mlc_status st = mlc_cuda_check(&drv, drv.cuDeviceGetCount(&count), "cuDeviceGetCount");
  for (int i = 0; !st && i < count; i++) {
    if ((uint32_t)i >= cap) continue;
    mlc_device_info *info = &out[i];
    memset(info, 0, sizeof *info);
    info->ordinal = i;
    CUdevice dev;
    if ((st = mlc_cuda_check(&drv, drv.cuDeviceGet(&dev, i), "cuDeviceGet"))) break;
    if (drv.cuDeviceGetName(info->name, sizeof info->name, dev)) snprintf(info->name, sizeof info->name, "CUDA device %d", i);
    size_t bytes = 0;
    if (!drv.cuDeviceTotalMem(&bytes, dev)) info->memory = bytes;
    int major = 0, minor = 0, sms = 0;
    drv.cuDeviceGetAttribute(&major, ATTR_CC_MAJOR, dev);
    drv.cuDeviceGetAttribute(&minor, ATTR_CC_MINOR, dev);
    drv.cuDeviceGetAttribute(&sms, ATTR_SM_COUNT, dev);
    char bus[32] = "";
    if (drv.cuDeviceGetPCIBusId(bus, sizeof bus, dev)) bus[0] = 0;
    snprintf(info->detail, sizeof info->detail, "sm_%d%d, %d SMs%s%s", major, minor, sms, bus[0] ? ", PCI " : "", bus);
  }
  if (!st) *out_n = (uint32_t)count;
  mlc_cuda_driver_unload(&drv);
  return st;
}
