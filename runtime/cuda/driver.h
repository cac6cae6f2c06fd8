/* The CUDA driver API, loaded at run time (groundwork for the CUDA target).
 *
 * mlc_cuda_driver_load() dlopens libcuda.so.1 and resolves every entry point
 * of runtime/cuda/symbols.def into a table of function pointers; the runtime
 * calls the driver only through that table.  The few driver types it needs
 * are declared here with the driver ABI's sizes, so building needs no CUDA
 * headers.  Every CUresult becomes an mlc_status naming the call and the
 * driver's own error name and text (mlc_cuda_check).
 */
#ifndef MLC_CUDA_DRIVER_H
#define MLC_CUDA_DRIVER_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/status.h"

typedef int CUresult; /* CUDA_SUCCESS is 0 */
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;
/* cuLaunchKernelEx's configuration, as cuda.h (12.x, 13.x) lays it out: an
 * attribute is its id, padding to 8 bytes, then a 64-byte value. */
enum { MLC_CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6 };
typedef struct {
  int id;
  char pad[4];
  union {
    char bytes[64];
    int programmatic_stream_serialization_allowed;
  } value;
} CUlaunchAttribute;
typedef struct {
  unsigned grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes;
  CUstream stream;
  CUlaunchAttribute *attrs;
  unsigned nattrs;
} CUlaunchConfig;
_Static_assert(sizeof(CUlaunchAttribute) == 72 && offsetof(CUlaunchAttribute, value) == 8 &&
                   (sizeof(void *) != 8 || (sizeof(CUlaunchConfig) == 56 && offsetof(CUlaunchConfig, attrs) == 40)),
               "cuLaunchKernelEx's structures as cuda.h lays them out");

typedef struct {
  void *lib; /* the dlopen handle */
#define X(name, symbol, params) CUresult (*name) params;
#include "runtime/cuda/symbols.def"
#undef X
} mlc_cuda_driver;

/* Loads the driver and calls cuInit.  Without an NVIDIA driver this is
 * MLC_UNIMPLEMENTED with a message saying so; a driver that lacks an entry
 * point names it. */
MLC_MUST_USE mlc_status mlc_cuda_driver_load(mlc_cuda_driver *out);
void mlc_cuda_driver_unload(mlc_cuda_driver *d);
/* NULL for CUDA_SUCCESS, else an MLC_INTERNAL status "what: NAME: text". */
MLC_MUST_USE mlc_status mlc_cuda_check(const mlc_cuda_driver *d, CUresult r, const char *what);

#endif
