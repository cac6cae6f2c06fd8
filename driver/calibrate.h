/* mlc calibrate --target cuda|spirv [--device N]: the roofline's two
 * ceilings of one GPU, measured with mlc's own kernels and cached per device
 * (the name it describes itself by) in ~/.cache/mlc/ceilings-cuda.json, where
 * the profiler (runtime/profile.h, mlc_ceilings_gpu) finds them.  The CPU's calibration
 * stays in driver/main.c. */
#ifndef MLC_DRIVER_CALIBRATE_H
#define MLC_DRIVER_CALIBRATE_H

#include <stdbool.h>

/* "cuda" or "spirv" when the calibrate command's arguments (after
 * "calibrate") name a GPU target, else NULL. */
const char *mlc_calibrate_gpu_target(int argc, char **argv);
/* Runs the command; the driver's exit status (0 success, 1 error, e.g. no
 * NVIDIA driver or no Vulkan device, 2 usage error, 3 internal error, 4 not
 * built). */
int mlc_calibrate_gpu(const char *target, int argc, char **argv);

#endif
