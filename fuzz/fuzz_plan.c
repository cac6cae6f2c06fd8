/* libFuzzer harness for the runtime's plan reader.  The input is a plan
 * payload: the harness writes a valid header (length and checksum) in
 * front of it, so the fuzzer explores the parser rather than the checksum.
 * Corpus: plans written by the compiler (fuzz/corpus/plan: tests/unit/test_plan.c
 * writes them, MLC_PLAN_SEED=DIR: a plan without code and one with an
 * executables section). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "runtime/plan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t *b = malloc(MLC_PLAN_HEADER_BYTES + size);
  if (!b) return 0;
  memcpy(b, MLC_PLAN_MAGIC "\0", 8);
  uint32_t version = MLC_PLAN_VERSION, zero = 0;
  uint64_t len = size, sum = XXH64(data, size, 0);
  memcpy(b + 8, &version, 4); /* little-endian hosts only, as libFuzzer runs here */
  memcpy(b + 12, &zero, 4);
  memcpy(b + 16, &len, 8);
  memcpy(b + 24, &sum, 8);
  memcpy(b + MLC_PLAN_HEADER_BYTES, data, size);
  mlc_plan *pl = NULL;
  mlc_status st = mlc_plan_parse(b, MLC_PLAN_HEADER_BYTES + size, mlc_allocator_default(), &pl);
  if (!st) {
    /* Touch everything the parser promised is valid. */
    volatile uint64_t sink = 0;
    for (uint32_t k = 0; k < pl->nentries; k++) {
      const mlc_plan_entry *e = &pl->entries[k];
      for (uint32_t s = 0; s < e->nsteps; s++)
        for (uint32_t a = 0; a < e->steps[s].nargs; a++) sink += e->values[e->steps[s].args[a]].offset;
      sink += strlen(e->name);
    }
    for (uint32_t k = 0; k < pl->nkernels; k++) {
      const mlc_plan_dispatch *d = &pl->dispatch[k];
      if (d->executable != MLC_PLAN_NO_EXECUTABLE) sink += pl->executables[d->executable].bytes;
      for (uint32_t l = 0; l < d->nlaunch; l++) sink += strlen(d->launch[l].entry) + d->launch[l].grid[2];
      if (d->extra_bytes) sink += d->extra[d->extra_bytes - 1];
    }
    (void)sink;
  }
  mlc_status_free(st);
  mlc_plan_free(pl);
  free(b);
  return 0;
}
