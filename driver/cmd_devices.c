/* mlc devices: the devices a target lists (its descriptor's list_devices). */
#include "driver/cli.h"

#include <string.h>

/* devices --target T: the devices of the targets that list them (the
 * Vulkan ones), numbered as --device takes them. */
int mlc_cmd_devices(int argc, char **argv) {
  const char *target = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if ((!strcmp(a, "--target") || !strcmp(a, "-t")) && i + 1 < argc) target = argv[++i];
    else if (!strncmp(a, "--target=", 9)) target = a + 9;
    else if (!strcmp(a, "--help") || !strcmp(a, "-h")) { mlc_cli_usage(stdout); return EXIT_OK; }
    else return mlc_cli_usage_error("devices does not take '%s'", a);
  }
  if (!target) return mlc_cli_usage_error("%s", "devices needs --target (spirv lists Vulkan devices; nvidia-smi lists CUDA GPUs)");
  const mlc_driver_target *t = mlc_driver_target_find(target);
  if (!t || !(t->listed & MLC_CMD_DEVICES)) {
    unsigned nt;
    const mlc_driver_target *ts = mlc_driver_targets(&nt);
    char names[128];
    fprintf(stderr, "mlc: devices --target %s: only %s is listed", target,
            mlc_driver_target_names(MLC_CMD_DEVICES, ", ", " and ", names, sizeof names));
    for (unsigned i = 0; i < nt; i++)
      if (ts[i].devices_hint) fprintf(stderr, " (%s)", ts[i].devices_hint);
    fprintf(stderr, "\nTry 'mlc --help'.\n");
    return EXIT_USAGE;
  }
  if (!t->list_devices) {
    fprintf(stderr, "mlc: %s\n", t->not_built);
    return EXIT_NO_TARGET;
  }
  mlc_status st = t->list_devices(stdout);
  if (!st) return EXIT_OK;
  fprintf(stderr, "mlc: %s\n", mlc_status_message(st));
  int rc = mlc_status_code(st) == MLC_UNIMPLEMENTED ? EXIT_NO_TARGET : EXIT_INTERNAL;
  mlc_status_free(st);
  return rc;
}
