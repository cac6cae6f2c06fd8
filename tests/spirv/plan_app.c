/* Runs a plan file with the runtime alone (libmlcrt; no <name>.h, no
 * generated code): mlc_plan_read_file, a device made from the plan alone,
 * a session, the forward of tests/spirv/plan_file.sh's ew.mdl (a * b + a
 * over 1000 floats), checked bit for bit against C's f32 arithmetic: the
 * product rounded and then the sum, or both in one fused multiply-add
 * (fmaf), which NVIDIA's compilers make of it (nvcc's default --fmad=true,
 * and the Vulkan driver's).
 * Usage: test_plan_app FILE.mlcplan.  Exit 1 on any error or difference. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "runtime/plan.h"
#include "runtime/session.h"
static int fail(mlc_status st) {
  fprintf(stderr, "plan_app: %s\n", mlc_status_message(st));
  mlc_status_free(st);
  return 1;
}
int main(int argc, char **argv) {
  static float a[1000], b[1000];
  for (int i = 0; i < 1000; i++) { a[i] = (float)i * 0.25f - 7.0f; b[i] = 2.0f - (float)i * 0.01f; }
  mlc_plan *plan;
  mlc_status st = mlc_plan_read_file(argv[1], mlc_allocator_default(), &plan);
  if (st) return fail(st);
  mlc_device_options dopt = {.plan = plan, .progress = stderr};
  mlc_session_options so = {0};
  if ((st = mlc_device_create(NULL, 0, &dopt, &so.device))) return fail(st);
  mlc_session *s;
  if ((st = mlc_session_create(plan, &so, &s))) return fail(st);
  const void *out = NULL;
  const mlc_plan_shape *shape;
  if (!st) st = mlc_session_set_input(s, "forward", "a", a, sizeof a);
  if (!st) st = mlc_session_set_input(s, "forward", "b", b, sizeof b);
  if (!st) st = mlc_session_run(s, "forward");
  if (!st) st = mlc_session_output(s, "forward", "output", &out, &shape);
  if (st) return fail(st);
  int bad = shape->rank != 1 || shape->dims[0] != 1000;
  for (int i = 0; i < 1000 && shape->rank == 1 && shape->dims[0] == 1000; i++) {
    float p = a[i] * b[i], want = p + a[i], fused = fmaf(a[i], b[i], a[i]);
    bad += memcmp(&want, (const float *)out + i, sizeof want) != 0 && memcmp(&fused, (const float *)out + i, sizeof fused) != 0;
  }
  mlc_session_destroy(s);
  mlc_plan_free(plan);
  printf("%d of 1000 outputs differ from a * b + a (rounded once or twice)\n", bad);
  return bad != 0;
}
