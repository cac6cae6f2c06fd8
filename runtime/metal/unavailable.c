/* mlc_metal_device_create where Metal does not exist (every platform but
 * Apple's): a clear error, so that an application built against a Metal
 * artifact fails cleanly instead of at link time. */
#include "runtime/metal/device.h"

mlc_status mlc_metal_device_create(const mlc_metal_code *code, mlc_allocator a, mlc_device **out) {
  (void)code, (void)a;
  *out = NULL;
  return mlc_status_make(MLC_UNIMPLEMENTED, "Metal runs only on Apple platforms: this libmlcrt was built without it "
                                            "(on macOS, configure with -DMLC_BACKEND_METAL=ON)");
}
