/* mlc devices: the devices of the runtime's drivers (runtime/device.h's
 * registry), one line each, numbered as --device takes them:
 *
 *   cpu 0: Intel(R) Xeon(R) ..., 16.8 GB memory, x86-64-v3: sse4.2 avx avx2 fma f16c; 4 CPUs online
 *   cuda: no NVIDIA driver on this machine: cannot load libcuda.so.1 (...)
 *   vulkan 0: llvmpipe (LLVM 15.0.6, 256 bits), 2.1 GB memory, CPU, Vulkan 1.3.230, driver ..., cooperative matrix: no
 *   metal: not built: ...
 *
 * Without --target every driver is listed and a driver that cannot list
 * its devices (no library, not built) gets one line saying why; with
 * --target T (a target, or a driver's own name) only T's driver, and such
 * a failure is the exit status (4: not available here). */
#include "driver/cli.h"

#include <string.h>

#include "runtime/device.h"

#define MAX_LISTED 64

/* Lists driver d's devices; a failure is returned, not printed. */
static mlc_status list_driver(const mlc_driver *d) {
  static mlc_device_info info[MAX_LISTED];
  uint32_t n = 0;
  MLC_RETURN_IF_ERROR(mlc_device_enumerate(d->name, info, MAX_LISTED, &n));
  if (!n) printf("%s: no devices\n", d->name);
  for (uint32_t i = 0; i < n && i < MAX_LISTED; i++) {
    char memory[32];
    if (info[i].memory) snprintf(memory, sizeof memory, "%.1f GB memory", (double)info[i].memory / 1e9);
    else snprintf(memory, sizeof memory, "memory unknown");
    printf("%s %d: %s, %s, %s\n", d->name, info[i].ordinal, info[i].name, memory, info[i].detail);
  }
  return NULL;
}

static int devices_of(const char *name) {
  /* a target's name stands for the driver its sessions run on */
  const mlc_driver_target *t = mlc_driver_target_find(name);
  const mlc_driver *d;
  mlc_status st = mlc_driver_find(t ? t->device_driver : name, &d);
  if (st && mlc_status_code(st) == MLC_INVALID_ARGUMENT) {
    char targets[128], drivers[128] = "", msg[512];
    uint32_t n;
    const mlc_driver *ds = mlc_drivers(&n);
    for (uint32_t i = 0, len = 0; i < n && len < sizeof drivers; i++)
      len += (uint32_t)snprintf(drivers + len, sizeof drivers - len, "%s%s", i == 0 ? "" : i + 1 == n ? " or " : ", ",
                                ds[i].name);
    mlc_status_free(st);
    snprintf(msg, sizeof msg, "devices --target %s: expected a target (%s) or a runtime driver (%s)", name,
             mlc_driver_target_names(0, ", ", " or ", targets, sizeof targets), drivers);
    return mlc_cli_usage_error("%s", msg);
  }
  if (!st) st = list_driver(d);
  return st ? mlc_cli_fail_status(st) : EXIT_OK;
}

int mlc_cmd_devices(int argc, char **argv) {
  const char *target = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if ((!strcmp(a, "--target") || !strcmp(a, "-t")) && i + 1 < argc) target = argv[++i];
    else if (!strncmp(a, "--target=", 9)) target = a + 9;
    else if (!strcmp(a, "--help") || !strcmp(a, "-h")) { mlc_cli_usage(stdout); return EXIT_OK; }
    else return mlc_cli_usage_error("devices does not take '%s'", a);
  }
  if (target) return devices_of(target);
  uint32_t n;
  const mlc_driver *ds = mlc_drivers(&n);
  for (uint32_t i = 0; i < n; i++) {
    if (ds[i].not_built) {
      printf("%s: not built: %s\n", ds[i].name, ds[i].not_built);
      continue;
    }
    mlc_status st = list_driver(&ds[i]);
    if (st) {
      printf("%s: %s\n", ds[i].name, mlc_status_message(st));
      mlc_status_free(st);
    }
  }
  return EXIT_OK;
}
