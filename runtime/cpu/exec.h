/* UNUSED, TO BE DELETED (issue 22, item 7).  Nothing calls this any more:
 * opcheck's CPU path and runtime/cpu/tests run through sessions, like the
 * GPU targets.  The file stays only because codegen/llvm/CMakeLists.txt
 * still builds it into mlccpurt, which is not ours to edit while codegen/
 * is being restructured; deleting it is that file's three-line change.
 *
 * A CPU executor for one IR function, enough to run and test compiled code.
 *
 * It takes the function's nodes and the compiled kernels (one per node that
 * computes something; see kernel.h for the ABI), allocates one buffer per
 * node, and runs the kernels in node order over a thread pool.  Leaf nodes
 * get buffers that the caller fills: INPUT nodes by name, PARAM nodes by
 * parameter index; CONST nodes are filled here with their value.  A RESHAPE
 * is a view: it shares its input's buffer and has no kernel.
 *
 * This is the simple form the tests need.  The real runtime will read a plan
 * (buffers at arena offsets from the memplan pass, entry points, streams);
 * until then each node owns its buffer, which costs memory but nothing else.
 *
 * It is a library: nothing is printed, every failure is a status.
 */
#ifndef MLC_CPU_EXEC_H
#define MLC_CPU_EXEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir/ir.h"
#include "runtime/alloc.h"
#include "runtime/cpu/kernel.h"
#include "runtime/cpu/threadpool.h"
#include "runtime/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One kernel launch: the node it computes and how its work is cut. */
typedef struct {
  uint32_t node;
  mlc_cpu_kernel_fn fn;
  int64_t items;    /* work items: the kernel's [begin, end) range is within [0, items) */
  const char *name; /* for messages and the profile */
} mlc_cpu_step;

typedef struct mlc_cpu_exec mlc_cpu_exec;

/* Steps are copied; p, f and the pool must outlive the executor.  Every
 * non-leaf, non-view node of f must have exactly one step. */
MLC_MUST_USE mlc_status mlc_cpu_exec_create(const mlc_program *p, const mlc_func *f, const mlc_cpu_step *steps,
                                            uint32_t nsteps, mlc_cpu_pool *pool, mlc_allocator a,
                                            mlc_cpu_exec **out_exec);
void mlc_cpu_exec_destroy(mlc_cpu_exec *e);

/* Copies `bytes` (which must equal the input's size) into the named input. */
MLC_MUST_USE mlc_status mlc_cpu_exec_set_input(mlc_cpu_exec *e, const char *name, const void *data, size_t bytes);
/* Copies a parameter's value; a parameter the function does not read is
 * accepted and ignored. */
MLC_MUST_USE mlc_status mlc_cpu_exec_set_param(mlc_cpu_exec *e, uint32_t param, const void *data, size_t bytes);

/* Runs every step in order.  With profiling on, per-step wall times are
 * added up (see mlc_cpu_exec_step_seconds). */
MLC_MUST_USE mlc_status mlc_cpu_exec_run(mlc_cpu_exec *e);
void mlc_cpu_exec_set_profiling(mlc_cpu_exec *e, bool on);
/* Seconds spent in step i over all profiled runs. */
double mlc_cpu_exec_step_seconds(const mlc_cpu_exec *e, uint32_t i);

/* The buffer of a node (views included), and the named output's buffer and
 * type.  Valid until the executor is destroyed. */
void *mlc_cpu_exec_node_buffer(const mlc_cpu_exec *e, uint32_t node);
MLC_MUST_USE mlc_status mlc_cpu_exec_output(const mlc_cpu_exec *e, const char *name, const void **out_data,
                                            const mlc_type **out_type);

#ifdef __cplusplus
}
#endif

#endif
