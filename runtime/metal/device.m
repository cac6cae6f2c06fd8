/* The Metal device: see device.h.
 *
 * Objective-C with manual retain/release (ARC OFF; the #error below refuses
 * -fobjc-arc).  Ownership follows Cocoa's rules: objects from new... /
 * MTLCreate... / MTLCopy... are ours (+1) and released in destroy; the
 * autoreleased ones (command buffers from -commandBuffer, encoders, NSString,
 * NSError) live inside an @autoreleasepool in each entry point, and the
 * command buffers we keep past it are retained explicitly.
 *
 * How it works:
 *   - memory: one MTLBuffer per alloc, MTLResourceStorageModeShared, so the
 *     device address handed out is [buffer contents] (host_memory = true).
 *     A table sorted by address maps any address inside an allocation back
 *     to (buffer, offset) for setBuffer:offset:atIndex:.
 *   - launch: the step's launches go into one compute encoder (serial
 *     dispatch, the default, so each dispatch sees the previous one's
 *     writes).  Untimed steps share the current command buffer, committed
 *     every COMMIT_EVERY steps so the GPU starts while encoding goes on;
 *     a timed step gets a command buffer of its own, committed at once, and
 *     its time is GPUEndTime - GPUStartTime (host mach time, in seconds).
 *   - finish: commits what is left, waits for every committed command
 *     buffer, turns the first failed one into an mlc_status.
 *   - write/read first wait for all queued GPU work (the same drain).
 *
 * VERIFIED: nothing on Apple hardware.  It was written where there is no
 * Mac: it has never been compiled by Apple's clang, linked or run.  It
 * follows Apple's documentation (MTLDevice, MTLCommandQueue, MTLLibrary,
 * MTLCompileOptions, MTLComputeCommandEncoder, MTLCommandBuffer,
 * dispatch_data) and was read through by hand for syntax and reference counts.
 * The one mechanical check: Linux clang 14, -fsyntax-only -Wall -Wextra
 * -Werror -Wshadow -Wstrict-prototypes, and --analyze (retain counts),
 * both clean, against hand-written stub Foundation/Metal headers that
 * declare only what this file uses -- so it checks the C and Objective-C,
 * not Apple's real declarations.
 * NOT VERIFIED: that it compiles cleanly under -Wall -Wextra -Werror with a
 * given SDK; that the emitted MSL compiles with languageVersion 3.0; that
 * results match the CPU and CUDA devices; the timing numbers.
 */
#include "runtime/metal/device.h"

#import <Foundation/Foundation.h>
#import <Metal/Metal.h>
#include <TargetConditionals.h>
#include <dispatch/dispatch.h>
#include <mach/mach_time.h>
#include <string.h>

#if __has_feature(objc_arc)
#error "runtime/metal/device.m manages retain counts by hand: compile it without -fobjc-arc"
#endif

/* mlc_metal_device_create refuses to run before macOS 13 / iOS 16 (Metal
 * Shading Language 3.0), and every other function here runs only on a
 * device it made; so the newer-API checks that the compiler cannot see
 * across functions are satisfied at run time. */
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wunguarded-availability"
#pragma clang diagnostic ignored "-Wunguarded-availability-new"

enum {
  MAX_BUFFERS = 31,   /* entries in a compute encoder's buffer argument table */
  COMMIT_EVERY = 32,  /* untimed steps per command buffer before it is committed */
};

typedef struct {
  uint64_t addr, size; /* [buf contents], the bytes asked for (at least 1) */
  id<MTLBuffer> buf;   /* retained */
} mt_buf;

typedef struct {
  const mlc_cuda_kernel *k; /* NULL until resolved */
  id<MTLComputePipelineState> pso[MLC_CUDA_MAX_LAUNCH]; /* retained */
} mt_kernel;

typedef struct {
  id<MTLCommandBuffer> cb; /* retained, committed */
  const char *symbol;      /* the first kernel encoded in it, for errors */
  uint32_t slot;
  bool timed;
} mt_pending;

typedef struct {
  mlc_device base;
  id<MTLDevice> dev;
  id<MTLCommandQueue> queue;
  id<MTLLibrary> lib;
  mlc_metal_code code;
  mt_kernel *kernels;         /* [code.nkernels] */
  mt_buf *bufs;               /* [nbufs], sorted by addr */
  uint32_t nbufs, cap_bufs;
  id<MTLBuffer> scratch;      /* the largest scratch of the resolved kernels */
  uint64_t scratch_bytes;
  id<MTLBuffer> dummy;        /* 16 bytes, bound where a kernel has no scratch */
  id<MTLCommandBuffer> cmd;   /* current untimed command buffer, retained, not committed */
  const char *cmd_symbol;
  uint32_t cmd_steps;
  mt_pending *pend;           /* committed, not yet collected by finish */
  uint32_t npend, cap_pend;
  double origin;              /* host seconds (mach time) when created */
  char name[256];
} metal_dev;

static double host_seconds(void) {
  mach_timebase_info_data_t tb;
  mach_timebase_info(&tb);
  return (double)mach_absolute_time() * (double)tb.numer / (double)tb.denom * 1e-9;
}

static const char *nserr(NSError *e) {
  const char *s = e ? [[e localizedDescription] UTF8String] : NULL;
  return s ? s : "unknown error";
}

/* Room in pend for `extra` more command buffers beyond those committed and
 * the current one, so that committing never needs memory. */
static mlc_status reserve_pending(metal_dev *d, uint32_t extra) {
  uint32_t need = d->npend + (d->cmd ? 1u : 0u) + extra;
  if (need <= d->cap_pend) return NULL;
  uint32_t cap = d->cap_pend ? d->cap_pend : 64;
  while (cap < need) cap *= 2;
  mt_pending *p = mlc_allocator_alloc_array(d->base.a, cap, sizeof *p);
  if (!p) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory for %u Metal command buffers", cap);
  if (d->npend) memcpy(p, d->pend, d->npend * sizeof *p);
  mlc_allocator_free(d->base.a, d->pend);
  d->pend = p;
  d->cap_pend = cap;
  return NULL;
}

/* Commits the current untimed command buffer, if any (room is reserved). */
static void commit_current(metal_dev *d) {
  if (!d->cmd) return;
  [d->cmd commit];
  d->pend[d->npend++] = (mt_pending){d->cmd, d->cmd_symbol, 0, false};
  d->cmd = nil;
  d->cmd_symbol = NULL;
  d->cmd_steps = 0;
}

/* Commits everything and waits for it; the command buffers stay in pend so
 * that finish can report their errors and times. */
static void drain(metal_dev *d) {
  commit_current(d);
  for (uint32_t i = 0; i < d->npend; i++) [d->pend[i].cb waitUntilCompleted];
}

static void release_pending(metal_dev *d) {
  for (uint32_t i = 0; i < d->npend; i++) [d->pend[i].cb release];
  d->npend = 0;
}

/* The allocation holding addr: (buffer, offset), or NULL. */
static const mt_buf *find_buffer(const metal_dev *d, uint64_t addr) {
  uint32_t lo = 0, hi = d->nbufs; /* first entry with .addr > addr is at lo */
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (d->bufs[mid].addr <= addr) lo = mid + 1;
    else hi = mid;
  }
  if (lo == 0) return NULL;
  const mt_buf *b = &d->bufs[lo - 1];
  return addr - b->addr < b->size ? b : NULL;
}

static void mt_destroy(mlc_device *base) {
  metal_dev *d = (metal_dev *)base;
  if (!d) return;
  @autoreleasepool {
    drain(d); /* room in pend is always reserved for cmd, so this needs no memory */
    release_pending(d);
    if (d->kernels)
      for (uint32_t i = 0; i < d->code.nkernels; i++)
        for (uint32_t l = 0; l < MLC_CUDA_MAX_LAUNCH; l++) [d->kernels[i].pso[l] release];
    for (uint32_t i = 0; i < d->nbufs; i++) [d->bufs[i].buf release];
    [d->scratch release];
    [d->dummy release];
    [d->lib release];
    [d->queue release];
    [d->dev release];
  }
  mlc_allocator_free(base->a, d->pend);
  mlc_allocator_free(base->a, d->bufs);
  mlc_allocator_free(base->a, d->kernels);
  mlc_allocator_free(base->a, d);
}

/* A zeroed shared buffer of max(bytes, 1) bytes, retained. */
static mlc_status new_buffer(metal_dev *d, uint64_t bytes, const char *what, id<MTLBuffer> *out) {
  uint64_t len = bytes ? bytes : 1;
  uint64_t max_len = (uint64_t)[d->dev maxBufferLength];
  if (len > max_len)
    return mlc_status_make(MLC_OUT_OF_MEMORY, "%s: %llu bytes is more than the %s's largest buffer (%llu bytes)", what,
                           (unsigned long long)len, d->name, (unsigned long long)max_len);
  id<MTLBuffer> b = [d->dev newBufferWithLength:(NSUInteger)len options:MTLResourceStorageModeShared];
  if (!b)
    return mlc_status_make(MLC_OUT_OF_MEMORY, "%s: the %s could not allocate %llu bytes (%.2f GB allocated so far)", what,
                           d->name, (unsigned long long)len, (double)d->base.allocated / 1e9);
  memset([b contents], 0, (size_t)len); /* newBufferWithLength does not document zeroed contents */
  *out = b;
  return NULL;
}

static mlc_status alloc_buffer(metal_dev *d, uint64_t bytes, uint64_t *out) {
  mlc_device *base = &d->base;
  if (d->nbufs == d->cap_bufs) {
    uint32_t cap = d->cap_bufs ? 2 * d->cap_bufs : 64;
    mt_buf *nb = mlc_allocator_alloc_array(base->a, cap, sizeof *nb);
    if (!nb) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory for the Metal buffer table");
    if (d->nbufs) memcpy(nb, d->bufs, d->nbufs * sizeof *nb);
    mlc_allocator_free(base->a, d->bufs);
    d->bufs = nb;
    d->cap_bufs = cap;
  }
  id<MTLBuffer> b = nil;
  MLC_RETURN_IF_ERROR(new_buffer(d, bytes, "allocating device memory", &b));
  uint64_t addr = (uint64_t)(uintptr_t)[b contents];
  uint32_t at = 0;
  while (at < d->nbufs && d->bufs[at].addr < addr) at++; /* few allocations per session */
  memmove(&d->bufs[at + 1], &d->bufs[at], (d->nbufs - at) * sizeof *d->bufs);
  d->bufs[at] = (mt_buf){addr, bytes ? bytes : 1, b};
  d->nbufs++;
  base->allocated += bytes;
  *out = addr;
  return NULL;
}

static mlc_status mt_alloc(mlc_device *base, uint64_t bytes, uint64_t *out) {
  mlc_status st;
  @autoreleasepool {
    st = alloc_buffer((metal_dev *)base, bytes, out);
  }
  return st;
}

static void mt_free(mlc_device *base, uint64_t addr) {
  metal_dev *d = (metal_dev *)base;
  for (uint32_t i = 0; i < d->nbufs; i++)
    if (d->bufs[i].addr == addr) {
      /* Command buffers retain what they use, so queued work stays safe. */
      [d->bufs[i].buf release];
      memmove(&d->bufs[i], &d->bufs[i + 1], (d->nbufs - i - 1) * sizeof *d->bufs);
      d->nbufs--;
      return;
    }
}

static mlc_status mt_write(mlc_device *base, uint64_t dst, const void *src, uint64_t n) {
  metal_dev *d = (metal_dev *)base;
  if (!n) return NULL;
  @autoreleasepool {
    drain(d);
  }
  if ((const void *)(uintptr_t)dst != src) memcpy((void *)(uintptr_t)dst, src, (size_t)n);
  return NULL;
}

static mlc_status mt_read(mlc_device *base, void *dst, uint64_t src, uint64_t n) {
  metal_dev *d = (metal_dev *)base;
  if (!n) return NULL;
  @autoreleasepool {
    drain(d);
  }
  if (dst != (const void *)(uintptr_t)src) memcpy(dst, (const void *)(uintptr_t)src, (size_t)n);
  return NULL;
}

/* The pipelines of one kernel, and its scratch; kk->k is set only when all
 * of it succeeded. */
static mlc_status make_pipelines(metal_dev *d, const mlc_cuda_kernel *k, mt_kernel *kk) {
  if (k->nlaunch > MLC_CUDA_MAX_LAUNCH)
    return mlc_status_make(MLC_INVALID_ARGUMENT, "kernel %s: %u launches (at most %d)", k->symbol, k->nlaunch,
                           MLC_CUDA_MAX_LAUNCH);
  for (uint32_t l = 0; l < k->nlaunch; l++) {
    const mlc_cuda_launch *L = &k->launch[l];
    if (kk->pso[l]) continue; /* made by an earlier, failed attempt */
    NSString *fname = [NSString stringWithUTF8String:L->fn];
    id<MTLFunction> fn = fname ? [d->lib newFunctionWithName:fname] : nil;
    if (!fn) return mlc_status_make(MLC_NOT_FOUND, "kernel %s: the Metal library has no function %s", k->symbol, L->fn);
    NSError *err = nil;
    id<MTLComputePipelineState> pso = [d->dev newComputePipelineStateWithFunction:fn error:&err];
    [fn release];
    if (!pso)
      return mlc_status_make(MLC_INTERNAL, "kernel %s: creating the compute pipeline for %s: %s", k->symbol, L->fn, nserr(err));
    kk->pso[l] = pso;
    uint64_t max_threads = (uint64_t)[pso maxTotalThreadsPerThreadgroup];
    if (L->block == 0 || L->block > max_threads)
      return mlc_status_make(MLC_INVALID_ARGUMENT, "kernel %s: %s wants %u threads per threadgroup; its pipeline allows %llu on the %s",
                             k->symbol, L->fn, L->block, (unsigned long long)max_threads, d->name);
    uint64_t tg = L->smem < 16 ? 16 : ((uint64_t)L->smem + 15) / 16 * 16;
    uint64_t tg_static = (uint64_t)[pso staticThreadgroupMemoryLength];
    uint64_t tg_max = (uint64_t)[d->dev maxThreadgroupMemoryLength];
    if (tg + tg_static > tg_max)
      return mlc_status_make(MLC_INVALID_ARGUMENT,
                             "kernel %s: %s needs %llu bytes of threadgroup memory (%llu dynamic, %llu static); the %s has %llu",
                             k->symbol, L->fn, (unsigned long long)(tg + tg_static), (unsigned long long)tg,
                             (unsigned long long)tg_static, d->name, (unsigned long long)tg_max);
  }
  if (k->scratch > d->scratch_bytes) {
    /* Queued work that uses the old scratch keeps it alive (command buffers retain their buffers). */
    id<MTLBuffer> s = nil;
    MLC_RETURN_IF_ERROR(new_buffer(d, k->scratch, "allocating kernel scratch", &s));
    [d->scratch release];
    d->scratch = s;
    d->scratch_bytes = k->scratch;
    d->base.allocated += k->scratch;
  }
  kk->k = k;
  return NULL;
}

static mlc_status mt_resolve(mlc_device *base, const char *symbol, void **out) {
  metal_dev *d = (metal_dev *)base;
  for (uint32_t i = 0; i < d->code.nkernels; i++) {
    const mlc_cuda_kernel *k = &d->code.kernels[i];
    if (strcmp(k->symbol, symbol)) continue;
    mt_kernel *kk = &d->kernels[i];
    if (!kk->k) {
      @autoreleasepool {
        MLC_RETURN_IF_ERROR(make_pipelines(d, k, kk));
      }
    }
    *out = kk;
    return NULL;
  }
  return mlc_status_make(MLC_NOT_FOUND, "kernel %s is not in the Metal library's launch table", symbol);
}

static mlc_status mt_launch(mlc_device *base, void *kh, uint64_t work_items, const uint64_t *args, uint32_t nargs,
                            bool timing, uint32_t slot) {
  metal_dev *d = (metal_dev *)base;
  mt_kernel *k = kh;
  id<MTLBuffer> bufs[MAX_BUFFERS];
  NSUInteger offs[MAX_BUFFERS];
  (void)work_items;
  if (nargs + 1 > MAX_BUFFERS)
    return mlc_status_make(MLC_INVALID_ARGUMENT, "kernel %s: %u arguments and the scratch are more than Metal's %d buffers",
                           k->k->symbol, nargs, MAX_BUFFERS);
  /* Everything that can fail comes before the encoder, which must always be ended. */
  for (uint32_t i = 0; i < nargs; i++) {
    const mt_buf *b = find_buffer(d, args[i]);
    if (!b)
      return mlc_status_make(MLC_INVALID_ARGUMENT, "kernel %s: argument %u (0x%llx) is not inside any Metal buffer",
                             k->k->symbol, i, (unsigned long long)args[i]);
    bufs[i] = b->buf;
    offs[i] = (NSUInteger)(args[i] - b->addr);
  }
  bufs[nargs] = k->k->scratch ? d->scratch : d->dummy;
  offs[nargs] = 0;
  MLC_RETURN_IF_ERROR(reserve_pending(d, 1));
  @autoreleasepool {
    id<MTLCommandBuffer> cb;
    if (timing) {
      commit_current(d); /* keeps the queue's order: earlier untimed steps run first */
      cb = [d->queue commandBuffer];
    } else {
      if (!d->cmd) {
        d->cmd = [[d->queue commandBuffer] retain];
        d->cmd_symbol = k->k->symbol;
      }
      cb = d->cmd;
    }
    if (!cb) return mlc_status_make(MLC_INTERNAL, "kernel %s: the Metal command queue gave no command buffer", k->k->symbol);
    id<MTLComputeCommandEncoder> enc = [cb computeCommandEncoder];
    if (!enc) return mlc_status_make(MLC_INTERNAL, "kernel %s: the Metal command buffer gave no compute encoder", k->k->symbol);
    for (uint32_t i = 0; i <= nargs; i++) [enc setBuffer:bufs[i] offset:offs[i] atIndex:i];
    for (uint32_t l = 0; l < k->k->nlaunch; l++) {
      const mlc_cuda_launch *L = &k->k->launch[l];
      if (!L->grid) continue;
      NSUInteger tg = L->smem < 16 ? 16 : ((NSUInteger)L->smem + 15) / 16 * 16;
      [enc setComputePipelineState:k->pso[l]];
      [enc setThreadgroupMemoryLength:tg atIndex:0];
      [enc dispatchThreadgroups:MTLSizeMake(L->grid, 1, 1) threadsPerThreadgroup:MTLSizeMake(L->block, 1, 1)];
    }
    [enc endEncoding];
    if (timing) {
      [cb commit];
      d->pend[d->npend++] = (mt_pending){[cb retain], k->k->symbol, slot, true};
    } else if (++d->cmd_steps >= COMMIT_EVERY) {
      commit_current(d);
    }
  }
  return NULL;
}

static mlc_status mt_finish(mlc_device *base, uint32_t nslots, double *seconds, double *start) {
  metal_dev *d = (metal_dev *)base;
  mlc_status st = NULL;
  @autoreleasepool {
    drain(d);
    for (uint32_t i = 0; i < d->npend; i++) {
      const mt_pending *p = &d->pend[i];
      if ([p->cb status] == MTLCommandBufferStatusError) {
        if (!st) {
          if (p->timed)
            st = mlc_status_make(MLC_INTERNAL, "running step %u (kernel %s) on the %s: %s", p->slot, p->symbol, d->name,
                                 nserr([p->cb error]));
          else
            st = mlc_status_make(MLC_INTERNAL, "running the steps from kernel %s on the %s: %s", p->symbol, d->name,
                                 nserr([p->cb error]));
        }
        continue;
      }
      if (p->timed && p->slot < nslots) {
        CFTimeInterval t0 = [p->cb GPUStartTime], t1 = [p->cb GPUEndTime];
        seconds[p->slot] = t1 - t0;
        start[p->slot] = t0 - d->origin;
      }
    }
    release_pending(d);
  }
  return st;
}

static void mt_describe(mlc_device *base, char *buf, size_t n) {
  metal_dev *d = (metal_dev *)base;
  snprintf(buf, n, "%s (Metal)", d->name);
}

static const mlc_device_vt metal_vt = {
    "metal", true, false, mt_destroy, mt_alloc, mt_free, mt_write, mt_read, mt_resolve, mt_launch, mt_finish, mt_describe,
    NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
};

/* The device: the system default, else (macOS) the first of all of them. */
static id<MTLDevice> pick_device(void) {
  id<MTLDevice> dev = MTLCreateSystemDefaultDevice(); /* +1 */
#if TARGET_OS_OSX
  if (!dev) {
    NSArray<id<MTLDevice>> *all = MTLCopyAllDevices(); /* +1 */
    if ([all count]) dev = [[all objectAtIndex:0] retain];
    [all release];
  }
#endif
  return dev;
}

static mlc_status load_library(metal_dev *d, const mlc_metal_code *code) {
  NSError *err = nil;
  if (code->metallib) {
    if (code->progress)
      fprintf(code->progress, "mlc: loading the Metal library (%zu bytes) on the %s ...\n", code->metallib_size, d->name);
    dispatch_data_t data = dispatch_data_create(code->metallib, code->metallib_size, NULL, DISPATCH_DATA_DESTRUCTOR_DEFAULT);
    if (!data) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory copying the metallib (%zu bytes)", code->metallib_size);
    d->lib = [d->dev newLibraryWithData:data error:&err];
    dispatch_release(data);
    if (!d->lib) return mlc_status_make(MLC_DATA_LOSS, "loading the metallib on the %s: %s", d->name, nserr(err));
    return NULL;
  }
  if (!code->source) return mlc_status_make(MLC_INVALID_ARGUMENT, "the Metal code has neither a metallib nor MSL source");
  NSString *src = [NSString stringWithUTF8String:code->source];
  if (!src) return mlc_status_make(MLC_INVALID_ARGUMENT, "the MSL source is not valid UTF-8");
  MTLCompileOptions *opts = [MTLCompileOptions new]; /* +1 */
  if (!opts) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory for MTLCompileOptions");
  opts.languageVersion = MTLLanguageVersion3_0;
  /* mlc matches PyTorch's numerics: no fast math.  fastMathEnabled = NO is
   * documented to mean mathMode = safe and precise math functions; it is
   * deprecated in the macOS 15 SDK in favour of mathMode, but works from
   * macOS 10.11 on, so it is used (with the warning off). */
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wdeprecated-declarations"
  opts.fastMathEnabled = NO;
#pragma clang diagnostic pop
  if (code->progress) fprintf(code->progress, "mlc: compiling the Metal kernels (MSL 3.0) for the %s ...\n", d->name);
  double t0 = host_seconds();
  d->lib = [d->dev newLibraryWithSource:src options:opts error:&err];
  [opts release];
  if (!d->lib) return mlc_status_make(MLC_INTERNAL, "compiling the MSL for the %s: %s", d->name, nserr(err));
  if (code->progress) fprintf(code->progress, "mlc: compiled in %.1f s\n", host_seconds() - t0);
  return NULL;
}

static mlc_status create(metal_dev *d, const mlc_metal_code *code) {
  if (@available(macOS 13.0, iOS 16.0, *)) {
  } else {
    return mlc_status_make(MLC_UNIMPLEMENTED, "the Metal device needs macOS 13 or iOS 16 (Metal Shading Language 3.0)");
  }
  d->dev = pick_device();
  if (!d->dev) return mlc_status_make(MLC_NOT_FOUND, "no Metal device on this machine");
  const char *nm = [[d->dev name] UTF8String];
  snprintf(d->name, sizeof d->name, "%s", nm ? nm : "Metal GPU");
  d->queue = [d->dev newCommandQueue];
  if (!d->queue) return mlc_status_make(MLC_INTERNAL, "the %s gave no command queue", d->name);
  MLC_RETURN_IF_ERROR(load_library(d, code));
  d->kernels = mlc_allocator_alloc_array(d->base.a, (size_t)code->nkernels + 1, sizeof *d->kernels);
  if (!d->kernels) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory for %u Metal kernels", code->nkernels);
  memset(d->kernels, 0, ((size_t)code->nkernels + 1) * sizeof *d->kernels);
  MLC_RETURN_IF_ERROR(reserve_pending(d, 1));
  MLC_RETURN_IF_ERROR(new_buffer(d, 16, "allocating the placeholder scratch", &d->dummy));
  return NULL;
}

mlc_status mlc_metal_device_create(const mlc_metal_code *code, mlc_allocator a, mlc_device **out) {
  *out = NULL;
  metal_dev *d = mlc_allocator_alloc(a, sizeof *d);
  if (!d) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory");
  memset(d, 0, sizeof *d);
  d->base.vt = &metal_vt;
  d->base.a = a;
  d->code = *code;
  d->origin = host_seconds();
  mlc_status st;
  @autoreleasepool {
    st = create(d, code);
  }
  if (st) {
    mt_destroy(&d->base);
    return st;
  }
  *out = &d->base;
  return NULL;
}

#pragma clang diagnostic pop
