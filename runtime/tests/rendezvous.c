/* The bootstrap's rendezvous as a program of its own, for tests that put
 * its ranks where a test binary's forks cannot go (tests/dist/
 * netns_rendezvous.sh: two network namespaces joined by a veth pair, as two
 * machines would be).  The rank comes from the launcher's variables
 * (runtime/dist/bootstrap.h); rank 0 makes a 128-byte blob from SEED, as it
 * would make NCCL's unique id, every rank receives it, and each prints
 *   rank R of W (LAUNCHER): blob CHECKSUM
 * or, on failure, the status's message, exiting 1.
 * Usage: mlcrt_rendezvous SEED [TIMEOUT_S] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "runtime/dist/bootstrap.h"

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s SEED [TIMEOUT_S]\n", argv[0]);
    return 2;
  }
  uint32_t seed = (uint32_t)strtoul(argv[1], NULL, 10);
  double timeout = argc > 2 ? atof(argv[2]) : 20.0;
  mlc_dist_env e;
  mlc_status st = mlc_dist_env_read(&e);
  unsigned char blob[128] = {0};
  if (!st && e.rank == 0)
    for (int i = 0; i < 128; i++) blob[i] = (unsigned char)((seed * 2654435761u) >> (i % 24) ^ (uint32_t)i * 31u);
  if (!st) st = mlc_dist_share(&e, blob, sizeof blob, timeout);
  if (st) {
    printf("%s\n", mlc_status_message(st));
    mlc_status_free(st);
    return 1;
  }
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (int i = 0; i < 128; i++) h = (h ^ blob[i]) * 1099511628211ull;
  printf("rank %d of %d (%s): blob %016llx\n", e.rank, e.world, e.launcher, (unsigned long long)h);
  return 0;
}
