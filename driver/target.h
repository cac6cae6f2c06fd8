/* The driver's side of a target: one descriptor per --target name, in one
 * registry (driver/target.c), so that no part of the driver compares target
 * names.  `mlc --help`, the --target check and its message, `mlc devices`
 * and `mlc calibrate` are generated from the registry.
 *
 * A descriptor carries what the driver needs to tell targets apart (the
 * subcommands --help lists it under, its own options, whether it runs over
 * NCCL, the runtime driver its devices come from) and its operations:
 * compile the program, write the artifact, open a device (or the CPU's
 * kernels) for a session, calibrate, and
 * say whether its code generator has a kernel for an op.  The operations of
 * a target that is not built into this mlc are NULL; its `not_built` says
 * how to build it.  The pass-side capabilities stay in ir/target.h.
 *
 * Adding a target: a row here (driver/target.c), its operations in
 * driver/target_<name>.c, its code generator in codegen/<name>/, its
 * device in runtime/<name>/, and its descriptor in ir/target.c. */
#ifndef MLC_DRIVER_TARGET_H
#define MLC_DRIVER_TARGET_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "driver/nvml.h"
#include "ir/ir.h"
#include "runtime/session.h"

/* The driver's exit statuses (also in --help and docs/cli.md). */
enum {
  MLC_EXIT_OK = 0, MLC_EXIT_USER = 1, MLC_EXIT_USAGE = 2, MLC_EXIT_INTERNAL = 3, MLC_EXIT_NO_TARGET = 4,
};

/* The one map from a status code (runtime/status.h, which the code
 * generators and the runtime return) to an exit status: MLC_INTERNAL is a
 * bug in mlc (3); MLC_UNIMPLEMENTED is something this build or this machine
 * does not have, a target, driver or library (4); every other code is an
 * error in the model, its data or the files asked for (1). */
int mlc_exit_status(mlc_status_code_t code);

/* getopt's code for an option of emitted code (mlc_options_set), as the
 * targets' own options have it. */
#define MLC_OPT_CODEGEN 1000

/* The subcommands, as bits of mlc_driver_target.listed. */
enum {
  MLC_CMD_COMPILE = 1 << 0, MLC_CMD_RUN = 1 << 1, MLC_CMD_BENCH = 1 << 2, MLC_CMD_TRAIN = 1 << 3,
  MLC_CMD_PROFILE = 1 << 4, MLC_CMD_CALIBRATE = 1 << 5,
};

/* What an artifact holds beyond the C API, for the message after it. */
typedef struct {
  const char *what;        /* "foo.cu, foo.fatbin" */
  const char *objects[64]; /* object files the bundle archives (the CPU's: one per entry point) */
  uint32_t nobjects;
} mlc_target_files;

typedef struct mlc_driver_target mlc_driver_target;
struct mlc_driver_target {
  const char *name;      /* as --target spells it */
  const char *what;      /* one line for --help and docs */
  const char *not_built; /* the message when its operations are not built in (how to build them) */
  unsigned listed;       /* MLC_CMD_ bits: the subcommands --help lists it under; calibrate
                            also takes only these */
  bool nccl;             /* ranks joined over NCCL, one GPU per local rank (the id goes round first) */
  bool one_device;       /* several ranks need another target (its NCCL variant) */
  bool device_memory;    /* run, bench and train print the device memory mlc holds */
  bool ncu;              /* profile --ncu and --ncu-csv compare its kernels with Nsight Compute's */
  const char *device_driver;     /* the runtime's driver its sessions run on (runtime/device.h):
                                    what `mlc devices --target T` lists */
  const char *calibrate_missing; /* calibrate does not measure it: why (exit status 4) */
  bool calibrate_grows;  /* calibrate: its devices range from a GPU to a CPU (lavapipe): the probes
                            grow from small sizes, built without progress messages */
  /* Its own options (val: the driver's code for options of emitted code),
   * ended by a zero entry, and their --help text; NULL: none. */
  const struct option *options;
  const char *options_help;

  /* The operations; NULL when not built.  `b` is build_bytes of zeroed
   * memory that the driver owns.  Each returns a status whose code the
   * driver maps to the exit status (mlc_exit_status); progress goes to
   * `progress` (NULL: none), some of it only on rank 0. */
  size_t build_bytes;
  mlc_status (*build)(void *b, mlc_program *p, FILE *progress, int rank);
  mlc_status (*write)(void *b, const char *dir, const char *source, mlc_target_files *out);
  mlc_status (*open)(void *b, int ordinal, FILE *progress, int rank, mlc_session_options *so, const uint8_t **plan,
                     size_t *plan_bytes);
  void (*release)(void *b);
  /* Whether its devices can be reached at all (a driver library): checked
   * before calibrate compiles anything; NULL: nothing to check. */
  mlc_status (*available)(void);
  int (*calibrate)(const mlc_driver_target *t, int argc, char **argv);
  /* A reader of its GPU's SM clock, which calibrate samples while its GEMM
   * runs (driver/nvml.h); NULL, or NULL returned: the clock is not measured. */
  mlc_nvml *(*clock_open)(int ordinal);
  /* Whether its code generator has a kernel for op; false with the message
   * that the code generator gives when it meets one. */
  bool (*supports_op)(mlc_op op, char *why, size_t whyn);
  /* Whether its kernel for a node's op (supports_op said yes) takes the
   * node's shapes and dtypes; false with the message; NULL: every node. */
  bool (*supports_node)(const mlc_func *f, const mlc_node *n, char *why, size_t whyn);
};

/* The descriptor of --target NAME; NULL if there is none of that name. */
const mlc_driver_target *mlc_driver_target_find(const char *name);
/* The target of a command run without --target (generate): the host's, the CPU. */
const char *mlc_driver_default_target(void);
/* Every descriptor, in --help's order: n of them. */
const mlc_driver_target *mlc_driver_targets(unsigned *n);
/* The names of the targets listed under `cmd` (MLC_CMD_ bits; 0: every
 * target), joined by sep and, before the last, by last: "cpu|cuda|spirv". */
const char *mlc_driver_target_names(unsigned cmd, const char *sep, const char *last, char *buf, size_t n);

#endif
