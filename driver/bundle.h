/* The artifact's bundle (bundle.c). */
#ifndef MLC_DRIVER_BUNDLE_H
#define MLC_DRIVER_BUNDLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* After a target wrote <name>.h, <name>.c and the kernel objects
 * (`objects`, file names in dir): copies the runtime headers that <name>.h
 * includes into dir/runtime/, compiles <name>.c with `cc`, and archives it,
 * the objects and every object of libmlcrt.a into dir/lib<name>.a.  False
 * with a message in err when a step fails. */
bool mlc_bundle_artifact(const char *dir, const char *name, const char *const *objects, uint32_t nobjects,
                         const char *cc, char *err, size_t errn);

#endif
