/* The artifact's bundle: what makes the folder `mlc compile -o DIR` writes
 * build into an application with a C compiler alone, wherever the folder is
 * moved, with neither the mlc source and build trees nor any development
 * package (docs/cli.md, "The artifact").
 *
 * The target has written <name>.h, <name>.c and its kernel objects.  Here:
 *   - the runtime headers that <name>.h includes go to DIR/runtime/;
 *   - <name>.c is compiled with the C compiler (cc, or --cc) against the
 *     runtime's full headers;
 *   - that object, the kernel objects and every object of libmlcrt.a go into
 *     DIR/lib<name>.a.  ar's MRI script does the merge: libmlcrt.a holds two
 *     members of one name (cpu/ and cuda/device.c.o), which extracting it
 *     into a folder would collapse into one.
 * The runtime is the installed one when this mlc is installed (found from
 * its own folder through MLC_BIN_TO_LIB and MLC_BIN_TO_INCLUDE), else the
 * build tree's that built it.  ar and the C compiler run in DIR, so that
 * every path they see is a plain file name.
 */
#define _XOPEN_SOURCE 700 /* readlink */
#include "driver/bundle.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mlc_version.h"

/* The headers <name>.h includes, with the ones they include. */
static const char *const public_headers[] = {"alloc.h", "status.h", "tensor.h", "version.h"};

static bool exists(const char *path) { return access(path, R_OK) == 0; }

/* The runtime's include folder (holding runtime/) and libmlcrt.a. */
static bool find_runtime(char *inc, size_t incn, char *lib, size_t libn) {
  char exe[3072];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) *slash = 0;
    snprintf(inc, incn, "%s/%s", exe, MLC_BIN_TO_INCLUDE);
    snprintf(lib, libn, "%s/%s/libmlcrt.a", exe, MLC_BIN_TO_LIB);
    char probe[4200];
    snprintf(probe, sizeof probe, "%s/runtime/session.h", inc);
    if (exists(lib) && exists(probe)) return true;
    /* a build folder inside the source tree, wherever the tree now is (one copied to another machine) */
    snprintf(inc, incn, "%s/..", exe);
    snprintf(lib, libn, "%s/runtime/libmlcrt.a", exe);
    snprintf(probe, sizeof probe, "%s/runtime/session.h", inc);
    if (exists(lib) && exists(probe)) return true;
  }
  snprintf(inc, incn, "%s", MLC_RUNTIME_INCLUDE_DIR);
  snprintf(lib, libn, "%s", MLC_RUNTIME_LIBRARY);
  return exists(lib);
}

/* Runs argv[0] (looked up on PATH) in the folder `dir`, its standard input
 * from the file `in` there (NULL: /dev/null): its exit status, or -1. */
static int run_in(const char *dir, const char *const *argv, const char *in) {
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    int fd = -1;
    if (chdir(dir) == 0 && (fd = open(in ? in : "/dev/null", O_RDONLY)) >= 0 && dup2(fd, 0) == 0)
      execvp(argv[0], (char *const *)argv);
    _exit(127);
  }
  int status;
  if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

static mlc_status copy_file(const char *from, const char *to) {
  FILE *in = fopen(from, "rb"), *out = in ? fopen(to, "wb") : NULL;
  bool ok = in && out;
  char buf[1 << 16];
  size_t n;
  while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0) ok = fwrite(buf, 1, n, out) == n;
  ok = ok && !ferror(in);
  if (out && fclose(out)) ok = false;
  if (in) fclose(in);
  return ok ? NULL : mlc_status_make(MLC_IO, "cannot copy %s to %s: %s", from, to, strerror(errno));
}

mlc_status mlc_bundle_artifact(const char *dir, const char *name, const char *const *objects, uint32_t nobjects,
                               const char *cc) {
  char inc[4096], lib[4096], from[4300], to[4300];
  if (!find_runtime(inc, sizeof inc, lib, sizeof lib))
    return mlc_status_make(MLC_UNIMPLEMENTED, "cannot find libmlcrt.a to bundle into the artifact (looked for %s)", lib);
  snprintf(to, sizeof to, "%s/runtime", dir);
  if (mkdir(to, 0777) && errno != EEXIST) return mlc_status_make(MLC_IO, "cannot create the folder %s: %s", to, strerror(errno));
  for (size_t i = 0; i < sizeof public_headers / sizeof *public_headers; i++) {
    snprintf(from, sizeof from, "%s/runtime/%s", inc, public_headers[i]);
    snprintf(to, sizeof to, "%s/runtime/%s", dir, public_headers[i]);
    MLC_RETURN_IF_ERROR(copy_file(from, to));
  }

  char src[256], glue[256], archive[256], rt[256], mri[256], iflag[4200];
  snprintf(src, sizeof src, "%s.c", name);
  snprintf(glue, sizeof glue, "%s.glue.o", name);
  snprintf(archive, sizeof archive, "lib%s.a", name);
  snprintf(rt, sizeof rt, "%s.mlcrt.a", name);
  snprintf(mri, sizeof mri, "%s.mri", name);
  snprintf(iflag, sizeof iflag, "-I%s", inc);
  const char *compile[] = {cc, "-std=c11", "-O2", "-fPIC", iflag, "-c", src, "-o", glue, NULL};
  int rc = run_in(dir, compile, NULL);
  if (rc < 0 || rc == 127) return mlc_status_make(MLC_INVALID_ARGUMENT, "cannot run the C compiler '%s' (--cc names another)", cc);
  if (rc) return mlc_status_make(MLC_INTERNAL, "the C compiler '%s' could not compile %s/%s.c (a bug in mlc)", cc, dir, name);

  snprintf(to, sizeof to, "%s/%s", dir, rt);
  MLC_RETURN_IF_ERROR(copy_file(lib, to));
  snprintf(to, sizeof to, "%s/%s", dir, mri);
  FILE *f = fopen(to, "w");
  if (!f) return mlc_status_make(MLC_IO, "cannot write %s: %s", to, strerror(errno));
  fprintf(f, "CREATE %s\nADDMOD %s\n", archive, glue);
  for (uint32_t i = 0; i < nobjects; i++) fprintf(f, "ADDMOD %s\n", objects[i]);
  fprintf(f, "ADDLIB %s\nSAVE\nEND\n", rt);
  mlc_status st = fclose(f) == 0 ? NULL : mlc_status_make(MLC_IO, "cannot write %s: %s", to, strerror(errno));
  snprintf(to, sizeof to, "%s/%s", dir, archive);
  remove(to);
  const char *ar[] = {"ar", "-M", NULL};
  if (!st && (rc = run_in(dir, ar, mri)) != 0)
    st = rc < 0 || rc == 127 ? mlc_status_make(MLC_UNIMPLEMENTED, "cannot run ar (binutils) to make %s/%s", dir, archive)
                             : mlc_status_make(MLC_INTERNAL, "ar could not make %s/%s", dir, archive);
  const char *temps[] = {glue, rt, mri};
  for (size_t i = 0; i < 3; i++) {
    snprintf(to, sizeof to, "%s/%s", dir, temps[i]);
    remove(to);
  }
  return st;
}
