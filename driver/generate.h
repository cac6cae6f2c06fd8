/* mlc generate's prompt from the command line (generate.c); the loop is the
 * runtime's (runtime/generate.h). */
#ifndef MLC_DRIVER_GENERATE_H
#define MLC_DRIVER_GENERATE_H

#include <stdint.h>

#include "runtime/generate.h"
#include "runtime/status.h"

/* Token ids separated by commas or white space, "1,2,3" or "1 2 3", into
 * *out (malloc'd) and *out_n. */
mlc_status mlc_generate_parse_prompt(const char *s, int32_t **out, uint32_t *out_n);

#endif
