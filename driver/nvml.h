/* The SM clock of an NVIDIA GPU as it runs, read through NVML
 * (libnvidia-ml.so.1, part of the driver, loaded at run time like
 * libcuda.so.1): what `mlc calibrate --target cuda` samples while its GEMM
 * runs, so that the seed's rule can judge kernels against the hardware's
 * peaks at the clock the GPU holds under load, as Nsight Compute's "% of
 * peak sustained elapsed" does. */
#ifndef MLC_DRIVER_NVML_H
#define MLC_DRIVER_NVML_H

#include <stdbool.h>

#include "runtime/status.h"

typedef struct mlc_nvml mlc_nvml;

/* Opens NVML for the GPU at PCI bus id `bus` ("0000:19:00.0", as
 * cuDeviceGetPCIBusId gives it).  MLC_UNIMPLEMENTED without NVML. */
MLC_MUST_USE mlc_status mlc_nvml_open(const char *bus, mlc_nvml **out);
/* The SM clock now and its maximum (boost), in MHz; false if NVML says nothing. */
bool mlc_nvml_sm_clock(mlc_nvml *n, unsigned *now_mhz, unsigned *max_mhz);
void mlc_nvml_close(mlc_nvml *n);

#endif
