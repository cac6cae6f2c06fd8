/* mlc calibrate --target cuda|spirv [--device N]: the roofline's two
 * ceilings of one GPU, measured with mlc's own kernels and cached per device
 * (the name it describes itself by) in ~/.cache/mlc/ceilings-cuda.json, where
 * the profiler (runtime/profile.h, mlc_ceilings_gpu) finds them.  The CPU's calibration
 * is in driver/cmd_calibrate.c, which also picks the target's calibrate. */
#ifndef MLC_DRIVER_CALIBRATE_H
#define MLC_DRIVER_CALIBRATE_H

#include <stdbool.h>

#include "driver/target.h"

/* Runs the command for a GPU target t (its descriptor's calibrate); the
 * driver's exit status (0 success, 1 error, e.g. no NVIDIA driver or no
 * Vulkan device, 2 usage error, 3 internal error, 4 not built). */
int mlc_calibrate_gpu(const mlc_driver_target *t, int argc, char **argv);
/* The CUDA target's `clock_open`: NVML for CUDA device `ordinal` (by its PCI
 * bus id), or NULL, saying why on stderr. */
mlc_nvml *mlc_calibrate_cuda_clock(int ordinal);
/* The CUDA target's `available`: the driver library loads. */
mlc_status mlc_calibrate_cuda_available(void);
/* The CPU's calibration (driver/cmd_calibrate.c): memory bandwidth and the
 * f32 GEMM peak, cached in ceilings-cpu.json. */
int mlc_calibrate_cpu(const mlc_driver_target *t, int argc, char **argv);

#endif
