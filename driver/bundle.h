/* The artifact's bundle (bundle.c). */
#ifndef MLC_DRIVER_BUNDLE_H
#define MLC_DRIVER_BUNDLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/status.h"

/* After a target wrote <name>.h, <name>.c and the kernel objects
 * (`objects`, file names in dir): copies the runtime headers that <name>.h
 * includes into dir/runtime/, compiles <name>.c with `cc`, and archives it,
 * the objects and every object of libmlcrt.a into dir/lib<name>.a.  MLC_IO
 * when a file cannot be written, MLC_INVALID_ARGUMENT when `cc` cannot run,
 * MLC_UNIMPLEMENTED when libmlcrt.a or ar is missing, MLC_INTERNAL when
 * they fail on what mlc wrote. */
MLC_MUST_USE mlc_status mlc_bundle_artifact(const char *dir, const char *name, const char *const *objects,
                                            uint32_t nobjects, const char *cc);

#endif
