/* The launcher's environment and the TCP rendezvous (see bootstrap.h). */
#define _DEFAULT_SOURCE /* getaddrinfo, NI_* */
#include "runtime/dist/bootstrap.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static bool env_int(const char *name, long lo, long hi, long *out, mlc_status *st) {
  const char *v = getenv(name);
  if (!v) return false;
  char *end;
  errno = 0;
  long x = strtol(v, &end, 10);
  if (!*v || *end || errno || x < lo || x > hi) {
    *st = mlc_status_make(MLC_INVALID_ARGUMENT, "%s=%s: expected an integer from %ld to %ld", name, v, lo, hi);
    return false;
  }
  *out = x;
  return true;
}

mlc_status mlc_dist_env_read(mlc_dist_env *e) {
  memset(e, 0, sizeof *e);
  e->world = 1;
  e->launcher = "none";
  static const struct { const char *launcher, *rank, *world, *local; } kinds[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
    {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
  };
  mlc_status st = NULL;
  for (size_t k = 0; k < sizeof kinds / sizeof *kinds && !st; k++) {
    long rank, world, local = 0;
    if (!env_int(kinds[k].world, 1, 1 << 20, &world, &st)) continue;
    if (!env_int(kinds[k].rank, 0, world - 1, &rank, &st)) {
      if (!st)
        st = mlc_status_make(MLC_INVALID_ARGUMENT, "%s is set but %s is not (launched by %s?)", kinds[k].world,
                             kinds[k].rank, kinds[k].launcher);
      break;
    }
    if (getenv(kinds[k].local) && !env_int(kinds[k].local, 0, world - 1, &local, &st)) break;
    e->rank = (int)rank;
    e->world = (int)world;
    e->local_rank = (int)local;
    e->launcher = kinds[k].launcher;
    break;
  }
  if (st) return st;
  const char *addr = getenv("MASTER_ADDR");
  long port = 0;
  if (addr) {
    if (strlen(addr) >= sizeof e->master_addr || !*addr)
      return mlc_status_make(MLC_INVALID_ARGUMENT, "MASTER_ADDR=%s: expected a host name or address", addr);
    snprintf(e->master_addr, sizeof e->master_addr, "%s", addr);
  }
  if (env_int("MASTER_PORT", 1, 65535, &port, &st)) e->master_port = (int)port;
  /* torchrun's own store listens on MASTER_PORT: mlc's rendezvous takes the next port. */
  if (!st && e->master_port && getenv("TORCHELASTIC_RUN_ID")) {
    if (e->master_port == 65535) return mlc_status_make(MLC_INVALID_ARGUMENT, "MASTER_PORT=65535: under torchrun mlc uses MASTER_PORT + 1");
    e->master_port++;
  }
  return st;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static mlc_status resolve(const mlc_dist_env *e, struct addrinfo **out) {
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
  char port[16];
  snprintf(port, sizeof port, "%d", e->master_port);
  int rc = getaddrinfo(e->master_addr, port, &hints, out);
  if (rc) return mlc_status_make(MLC_INVALID_ARGUMENT, "MASTER_ADDR=%s: cannot resolve it: %s", e->master_addr, gai_strerror(rc));
  return NULL;
}

/* Waits until fd is ready for `events` or the deadline passes. */
static bool wait_fd(int fd, short events, double deadline) {
  for (;;) {
    double left = deadline - now();
    if (left <= 0) return false;
    struct pollfd p = {fd, events, 0};
    int rc = poll(&p, 1, (int)(left * 1e3) + 1);
    if (rc > 0) return true;
    if (rc < 0 && errno != EINTR) return false;
  }
}

static bool send_all(int fd, const void *buf, size_t n, double deadline) {
  const uint8_t *p = buf;
  while (n) {
    if (!wait_fd(fd, POLLOUT, deadline)) return false;
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= (size_t)w;
  }
  return true;
}

static bool recv_all(int fd, void *buf, size_t n, double deadline) {
  uint8_t *p = buf;
  while (n) {
    if (!wait_fd(fd, POLLIN, deadline)) return false;
    ssize_t r = recv(fd, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= (size_t)r;
  }
  return true;
}

/* Rank 0: listen, then send the blob to world - 1 connections, each first
 * saying its rank (so a stray connection is refused, not counted). */
static mlc_status serve(const mlc_dist_env *e, const void *blob, size_t n, double deadline) {
  struct addrinfo *ai;
  MLC_RETURN_IF_ERROR(resolve(e, &ai));
  int fd = socket(ai->ai_family, SOCK_STREAM, 0), one = 1;
  mlc_status st = NULL;
  if (fd < 0) st = mlc_status_make(MLC_IO, "rank 0: socket: %s", strerror(errno));
  if (!st) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (!st && (bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, 128)))
    st = mlc_status_make(MLC_IO, "rank 0: cannot listen on %s:%d: %s (is the port in use, or MASTER_ADDR not this host?)",
                         e->master_addr, e->master_port, strerror(errno));
  freeaddrinfo(ai);
  int served = 0;
  while (!st && served < e->world - 1) {
    if (!wait_fd(fd, POLLIN, deadline)) {
      st = mlc_status_make(MLC_IO, "rank 0: only %d of the %d other ranks connected to %s:%d before the timeout", served,
                           e->world - 1, e->master_addr, e->master_port);
      break;
    }
    int c = accept(fd, NULL, NULL);
    if (c < 0) continue;
    int32_t rank = -1;
    uint64_t len = n;
    if (recv_all(c, &rank, sizeof rank, deadline) && rank > 0 && rank < e->world && send_all(c, &len, sizeof len, deadline) &&
        send_all(c, blob, n, deadline))
      served++;
    close(c);
  }
  if (fd >= 0) close(fd);
  return st;
}

/* The other ranks: connect (retrying while rank 0 is not listening yet),
 * say the rank, read the blob. */
static mlc_status fetch(const mlc_dist_env *e, void *blob, size_t n, double deadline, double timeout_s) {
  struct addrinfo *ai;
  MLC_RETURN_IF_ERROR(resolve(e, &ai));
  mlc_status st = NULL;
  int last = 0;
  for (;;) {
    int fd = socket(ai->ai_family, SOCK_STREAM, 0);
    if (fd < 0) {
      st = mlc_status_make(MLC_IO, "rank %d: socket: %s", e->rank, strerror(errno));
      break;
    }
    if (!connect(fd, ai->ai_addr, ai->ai_addrlen)) {
      int32_t rank = e->rank;
      uint64_t len = 0;
      bool ok = send_all(fd, &rank, sizeof rank, deadline) && recv_all(fd, &len, sizeof len, deadline) && len == n &&
                recv_all(fd, blob, n, deadline);
      close(fd);
      if (!ok)
        st = mlc_status_make(MLC_IO, "rank %d: rank 0 at %s:%d did not send the %zu-byte id", e->rank, e->master_addr,
                             e->master_port, n);
      break;
    }
    last = errno;
    close(fd);
    if (now() + 0.05 > deadline) {
      st = mlc_status_make(MLC_IO, "rank %d: could not reach rank 0 at %s:%d within %.0f s (%s); is MASTER_ADDR right and "
                           "rank 0 running?", e->rank, e->master_addr, e->master_port, timeout_s, strerror(last));
      break;
    }
    struct timespec ts = {0, 50 * 1000 * 1000}; /* retry every 50 ms */
    nanosleep(&ts, NULL);
  }
  freeaddrinfo(ai);
  return st;
}

mlc_status mlc_dist_share(const mlc_dist_env *e, void *blob, size_t n, double timeout_s) {
  if (e->world == 1) return NULL;
  if (!e->master_addr[0] || !e->master_port)
    return mlc_status_make(MLC_INVALID_ARGUMENT, "%d ranks (launched by %s) but no MASTER_ADDR and MASTER_PORT: set them "
                           "to rank 0's host and a free port", e->world, e->launcher);
  double deadline = now() + timeout_s;
  return e->rank == 0 ? serve(e, blob, n, deadline) : fetch(e, blob, n, deadline, timeout_s);
}
