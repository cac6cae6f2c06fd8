/* NVML's SM clock: see nvml.h.  Five entry points, declared here with the
 * NVML ABI's types (nvmlReturn_t is an int, 0 on success; a device is an
 * opaque pointer; NVML_CLOCK_SM is 1), so building needs no NVML header. */
#include "driver/nvml.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

enum { NVML_CLOCK_SM = 1 };

struct mlc_nvml {
  void *lib;
  void *dev;
  int (*shutdown)(void);
  int (*clock)(void *dev, int type, unsigned *mhz);
  int (*max_clock)(void *dev, int type, unsigned *mhz);
};

mlc_status mlc_nvml_open(const char *bus, mlc_nvml **out) {
  *out = NULL;
  mlc_nvml *n = calloc(1, sizeof *n);
  if (!n) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory");
  n->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!n->lib) {
    free(n);
    return mlc_status_make(MLC_UNIMPLEMENTED, "no NVML on this machine: cannot load libnvidia-ml.so.1 (%s)", dlerror());
  }
  int (*init)(void) = NULL;
  int (*by_bus)(const char *, void **) = NULL;
  void *sym[5] = {dlsym(n->lib, "nvmlInit_v2"), dlsym(n->lib, "nvmlShutdown"), dlsym(n->lib, "nvmlDeviceGetHandleByPciBusId_v2"),
                  dlsym(n->lib, "nvmlDeviceGetClockInfo"), dlsym(n->lib, "nvmlDeviceGetMaxClockInfo")};
  for (int i = 0; i < 5; i++)
    if (!sym[i]) {
      dlclose(n->lib);
      free(n);
      return mlc_status_make(MLC_UNIMPLEMENTED, "libnvidia-ml.so.1 lacks an entry point NVML has had since 2012: too old");
    }
  memcpy(&init, &sym[0], sizeof init);
  memcpy(&n->shutdown, &sym[1], sizeof n->shutdown);
  memcpy(&by_bus, &sym[2], sizeof by_bus);
  memcpy(&n->clock, &sym[3], sizeof n->clock);
  memcpy(&n->max_clock, &sym[4], sizeof n->max_clock);
  int r = init();
  if (!r && (r = by_bus(bus, &n->dev))) n->shutdown();
  if (r) {
    dlclose(n->lib);
    free(n);
    return mlc_status_make(MLC_NOT_FOUND, "NVML knows no GPU at PCI bus %s (NVML error %d)", bus, r);
  }
  *out = n;
  return NULL;
}

bool mlc_nvml_sm_clock(mlc_nvml *n, unsigned *now_mhz, unsigned *max_mhz) {
  return n && !n->clock(n->dev, NVML_CLOCK_SM, now_mhz) && !n->max_clock(n->dev, NVML_CLOCK_SM, max_mhz) && *max_mhz > 0;
}

void mlc_nvml_close(mlc_nvml *n) {
  if (!n) return;
  n->shutdown();
  dlclose(n->lib);
  free(n);
}
