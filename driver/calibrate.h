/* mlc calibrate --target cuda [--device N]: the roofline's two ceilings of
 * one GPU, measured with mlc's own kernels and cached per GPU (its name,
 * sm and SM count) in ~/.cache/mlc/ceilings-cuda.json, where the profiler
 * (runtime/profile.h, mlc_ceilings_gpu) finds them.  The CPU's calibration
 * stays in driver/main.c. */
#ifndef MLC_DRIVER_CALIBRATE_H
#define MLC_DRIVER_CALIBRATE_H

#include <stdbool.h>

/* True when the calibrate command's arguments (after "calibrate") name the
 * CUDA target. */
bool mlc_calibrate_is_cuda(int argc, char **argv);
/* Runs the command; the driver's exit status (0 success, 1 error, e.g. no
 * NVIDIA driver, 2 usage error, 3 internal error). */
int mlc_calibrate_cuda(int argc, char **argv);

#endif
