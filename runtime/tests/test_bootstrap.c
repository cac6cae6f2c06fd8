/* The multi-process bootstrap (runtime/dist/bootstrap.h) with real
 * processes and real sockets on this machine:
 *   - each launcher's variables give the rank, world and local rank, and
 *     inconsistent ones are refused with the variable's name;
 *   - 4 forked ranks, launched torchrun-style, all receive rank 0's blob;
 *   - a rank whose rank 0 never comes gives up at the deadline with a
 *     message naming MASTER_ADDR:MASTER_PORT;
 *   - an unresolvable MASTER_ADDR is a clear error at once. */
#define _DEFAULT_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "runtime/dist/bootstrap.h"

static void clear_env(void) {
  const char *vars[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "OMPI_COMM_WORLD_RANK",
                        "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"};
  for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) unsetenv(vars[i]);
}

/* A port for this test run: the process id spreads concurrent runs. */
static int test_port(int k) { return 20000 + (int)(getpid() % 20000) + k; }

static void env_launchers(void **state) {
  (void)state;
  mlc_dist_env e;
  clear_env();
  assert_null(mlc_dist_env_read(&e));
  assert_int_equal(e.world, 1);
  assert_string_equal(e.launcher, "none");
  setenv("OMPI_COMM_WORLD_RANK", "2", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "0", 1);
  assert_null(mlc_dist_env_read(&e));
  assert_int_equal(e.rank, 2);
  assert_int_equal(e.world, 4);
  assert_string_equal(e.launcher, "mpirun");
  clear_env();
  setenv("SLURM_PROCID", "5", 1);
  setenv("SLURM_NTASKS", "8", 1);
  setenv("SLURM_LOCALID", "1", 1);
  setenv("MASTER_ADDR", "node7", 1);
  setenv("MASTER_PORT", "29500", 1);
  assert_null(mlc_dist_env_read(&e));
  assert_int_equal(e.rank, 5);
  assert_int_equal(e.local_rank, 1);
  assert_string_equal(e.master_addr, "node7");
  assert_int_equal(e.master_port, 29500);
  assert_string_equal(e.launcher, "slurm");
  clear_env();
  setenv("RANK", "7", 1);
  setenv("WORLD_SIZE", "4", 1);
  mlc_status st = mlc_dist_env_read(&e);
  assert_non_null(st);
  assert_non_null(strstr(mlc_status_message(st), "RANK=7: expected an integer from 0 to 3"));
  mlc_status_free(st);
  setenv("RANK", "1", 1);
  setenv("MASTER_PORT", "70000", 1);
  st = mlc_dist_env_read(&e);
  assert_non_null(st);
  assert_non_null(strstr(mlc_status_message(st), "MASTER_PORT=70000"));
  mlc_status_free(st);
  clear_env();
}

/* torchrun-style: 4 processes share a 128-byte id from rank 0. */
static void four_ranks_share(void **state) {
  (void)state;
  enum { WORLD = 4 };
  char port[16];
  snprintf(port, sizeof port, "%d", test_port(0));
  uint8_t want[128];
  for (int i = 0; i < 128; i++) want[i] = (uint8_t)(i * 37 + getpid());
  pid_t kids[WORLD];
  for (int r = 0; r < WORLD; r++) {
    if ((kids[r] = fork()) == 0) {
      clear_env();
      char rank[8], world[8];
      snprintf(rank, sizeof rank, "%d", r);
      snprintf(world, sizeof world, "%d", WORLD);
      setenv("RANK", rank, 1);
      setenv("LOCAL_RANK", rank, 1);
      setenv("WORLD_SIZE", world, 1);
      setenv("MASTER_ADDR", "127.0.0.1", 1);
      setenv("MASTER_PORT", port, 1);
      mlc_dist_env e;
      uint8_t blob[128] = {0};
      if (r == 0) memcpy(blob, want, sizeof blob);
      mlc_status st = mlc_dist_env_read(&e);
      if (!st) st = mlc_dist_share(&e, blob, sizeof blob, 20);
      if (st) fprintf(stderr, "rank %d: %s\n", r, mlc_status_message(st));
      _exit(st ? 1 : memcmp(blob, want, sizeof blob) ? 2 : 0);
    }
  }
  for (int r = 0; r < WORLD; r++) {
    int status;
    assert_int_equal(waitpid(kids[r], &status, 0), kids[r]);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
  }
}

/* A rank 1 with no rank 0: an error naming the address within the timeout. */
static void no_rank0_times_out(void **state) {
  (void)state;
  mlc_dist_env e = {.rank = 1, .world = 2, .launcher = "torchrun", .master_addr = "127.0.0.1", .master_port = test_port(1)};
  uint8_t blob[16];
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  mlc_status st = mlc_dist_share(&e, blob, sizeof blob, 1.0);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double dt = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  assert_non_null(st);
  assert_non_null(strstr(mlc_status_message(st), "could not reach rank 0 at 127.0.0.1:"));
  assert_true(dt >= 0.9 && dt < 5);
  mlc_status_free(st);
}

static void bad_master_addr(void **state) {
  (void)state;
  mlc_dist_env e = {.rank = 1, .world = 2, .launcher = "torchrun", .master_addr = "no-such-host.invalid", .master_port = 29500};
  uint8_t blob[16];
  mlc_status st = mlc_dist_share(&e, blob, sizeof blob, 5.0);
  assert_non_null(st);
  assert_non_null(strstr(mlc_status_message(st), "MASTER_ADDR=no-such-host.invalid: cannot resolve it"));
  mlc_status_free(st);
  e.master_addr[0] = 0;
  st = mlc_dist_share(&e, blob, sizeof blob, 5.0);
  assert_non_null(st);
  assert_non_null(strstr(mlc_status_message(st), "no MASTER_ADDR and MASTER_PORT"));
  mlc_status_free(st);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(env_launchers), cmocka_unit_test(four_ranks_share), cmocka_unit_test(no_rank0_times_out),
    cmocka_unit_test(bad_master_addr),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
