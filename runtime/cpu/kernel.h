/* The CPU kernel ABI: the contract between codegen/llvm and runtime/cpu.
 *
 * Every kernel the LLVM backend emits, whether JIT-compiled in process or
 * written to an object file, has this one signature:
 *
 *   void kernel(void **bufs, int64_t begin, int64_t end);
 *
 * `bufs` holds the base addresses of the node's inputs, in the IR's input
 * order, followed by its output.  A kernel's work is cut into `items`
 * independent work items (rows, tiles of a GEMM output, query blocks of an
 * attention); a call does the items in [begin, end).  Different items write
 * disjoint parts of the output and read nothing another item writes, so a
 * thread pool may hand out any partition of [0, items) to any threads.
 *
 * Buffers are dense and row-major in the node's dtype.  Kernels allocate
 * their scratch (packed GEMM panels, attention tiles) on the stack: up to
 * about 2 MiB, so threads that run them need stacks larger than that
 * (runtime/cpu/threadpool.c gives its workers MLC_CPU_STACK_BYTES).
 */
#ifndef MLC_CPU_KERNEL_H
#define MLC_CPU_KERNEL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef void (*mlc_cpu_kernel_fn)(void **bufs, int64_t begin, int64_t end);

/* The stack a thread needs to run any kernel, with room to spare. */
#define MLC_CPU_STACK_BYTES ((size_t)16 << 20)

#ifdef __cplusplus
}
#endif

#endif
