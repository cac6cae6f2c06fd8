/* The Vulkan device (runtime/vulkan) on its own, with a hand-written SPIR-V
 * kernel assembled by SPIRV-Tools: two entry points (a + b into the
 * scratch block, then twice that into the output), the local size as
 * specialisation constants, arguments at offsets inside one allocation (as
 * a session's arena gives them), two runs that replay one command buffer,
 * per-step timestamps, and the errors a caller can cause.  Validation is on
 * and any validation message fails the test.  Exit 77 (ctest's skip) only
 * when this machine has no Vulkan driver. */
#include <math.h>
#include <spirv-tools/libspirv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/vulkan/device.h"

#define N 1000
#define SKIP 77

static const char *const source =
    "OpCapability Shader\n"
    "OpMemoryModel Logical GLSL450\n"
    "OpEntryPoint GLCompute %add \"add\" %gid %a %b %s\n"
    "OpEntryPoint GLCompute %dbl \"dbl\" %gid %s %c\n"
    "OpExecutionMode %add LocalSize 1 1 1\n"
    "OpExecutionMode %dbl LocalSize 1 1 1\n"
    "OpDecorate %gid BuiltIn GlobalInvocationId\n"
    "OpDecorate %wg BuiltIn WorkgroupSize\n"
    "OpDecorate %sx SpecId 0\n"
    "OpDecorate %sy SpecId 1\n"
    "OpDecorate %sz SpecId 2\n"
    "OpDecorate %rta ArrayStride 4\n"
    "OpMemberDecorate %blk 0 Offset 0\n"
    "OpDecorate %blk Block\n"
    "OpDecorate %a DescriptorSet 0\nOpDecorate %a Binding 0\n"
    "OpDecorate %b DescriptorSet 0\nOpDecorate %b Binding 1\n"
    "OpDecorate %c DescriptorSet 0\nOpDecorate %c Binding 2\n"
    "OpDecorate %s DescriptorSet 0\nOpDecorate %s Binding 3\n"
    "%void = OpTypeVoid\n%fn = OpTypeFunction %void\n%uint = OpTypeInt 32 0\n%float = OpTypeFloat 32\n"
    "%bool = OpTypeBool\n%v3uint = OpTypeVector %uint 3\n%rta = OpTypeRuntimeArray %float\n"
    "%blk = OpTypeStruct %rta\n%pblk = OpTypePointer StorageBuffer %blk\n%pf = OpTypePointer StorageBuffer %float\n"
    "%pin = OpTypePointer Input %v3uint\n"
    "%a = OpVariable %pblk StorageBuffer\n%b = OpVariable %pblk StorageBuffer\n"
    "%c = OpVariable %pblk StorageBuffer\n%s = OpVariable %pblk StorageBuffer\n"
    "%gid = OpVariable %pin Input\n"
    "%sx = OpSpecConstant %uint 1\n%sy = OpSpecConstant %uint 1\n%sz = OpSpecConstant %uint 1\n"
    "%wg = OpSpecConstantComposite %v3uint %sx %sy %sz\n"
    "%u0 = OpConstant %uint 0\n%n = OpConstant %uint 1000\n%two = OpConstant %float 2\n"
    "%add = OpFunction %void None %fn\n%l0 = OpLabel\n"
    "%g0 = OpLoad %v3uint %gid\n%i0 = OpCompositeExtract %uint %g0 0\n%in0 = OpULessThan %bool %i0 %n\n"
    "OpSelectionMerge %e0 None\nOpBranchConditional %in0 %b0 %e0\n%b0 = OpLabel\n"
    "%pa = OpAccessChain %pf %a %u0 %i0\n%va = OpLoad %float %pa\n"
    "%pb = OpAccessChain %pf %b %u0 %i0\n%vb = OpLoad %float %pb\n"
    "%sum = OpFAdd %float %va %vb\n%ps0 = OpAccessChain %pf %s %u0 %i0\nOpStore %ps0 %sum\n"
    "OpBranch %e0\n%e0 = OpLabel\nOpReturn\nOpFunctionEnd\n"
    "%dbl = OpFunction %void None %fn\n%l1 = OpLabel\n"
    "%g1 = OpLoad %v3uint %gid\n%i1 = OpCompositeExtract %uint %g1 0\n%in1 = OpULessThan %bool %i1 %n\n"
    "OpSelectionMerge %e1 None\nOpBranchConditional %in1 %b1 %e1\n%b1 = OpLabel\n"
    "%ps1 = OpAccessChain %pf %s %u0 %i1\n%vs = OpLoad %float %ps1\n%tw = OpFMul %float %vs %two\n"
    "%pc = OpAccessChain %pf %c %u0 %i1\nOpStore %pc %tw\n"
    "OpBranch %e1\n%e1 = OpLabel\nOpReturn\nOpFunctionEnd\n";

static int failures;
#define EXPECT(cond, ...)                                 \
  do {                                                    \
    if (!(cond)) {                                        \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                       \
      fputc('\n', stderr);                                \
      failures++;                                         \
    }                                                     \
  } while (0)

/* Fails the test on an unexpected error. */
static void ok(mlc_status st, const char *what) {
  EXPECT(!st, "%s: %s", what, mlc_status_message(st));
  mlc_status_free(st);
}

/* An error whose message contains `needle`. */
static void fails(mlc_status st, mlc_status_code_t code, const char *needle, const char *what) {
  EXPECT(st && mlc_status_code(st) == code && strstr(mlc_status_message(st), needle), "%s: expected %s with '%s', got %s: %s",
         what, mlc_status_code_name(code), needle, mlc_status_code_name(mlc_status_code(st)), mlc_status_message(st));
  mlc_status_free(st);
}

int main(void) {
  spv_context ctx = spvContextCreate(SPV_ENV_VULKAN_1_2);
  spv_binary bin = NULL;
  spv_diagnostic diag = NULL;
  if (spvTextToBinary(ctx, source, strlen(source), &bin, &diag) != SPV_SUCCESS) {
    fprintf(stderr, "FAIL: the test's SPIR-V does not assemble: %s\n", diag ? diag->error : "?");
    return 1;
  }
  spv_const_binary_t cb = {bin->code, bin->wordCount};
  if (spvValidate(ctx, &cb, &diag) != SPV_SUCCESS) {
    fprintf(stderr, "FAIL: the test's SPIR-V is not valid for Vulkan 1.2: %s\n", diag ? diag->error : "?");
    return 1;
  }
  /* Groups of 64 (through the specialisation constants) cover N. */
  mlc_vk_kernel kernels[2] = {
      {"add_dbl", bin->code, bin->wordCount, 3, N * 4, 2,
       {{"add", {(N + 63) / 64, 1, 1}, {64, 0, 0}}, {"dbl", {(N + 127) / 128, 1, 1}, {128, 1, 1}}}, 0, {0, 0, 0},
       MLC_VK_NO_FALLBACK},
      /* A cooperative-matrix kernel no device here has (shape 3x5x7): its fallback runs instead. */
      {"coop", bin->code, bin->wordCount, 3, N * 4, 2,
       {{"add", {(N + 63) / 64, 1, 1}, {64, 0, 0}}, {"dbl", {(N + 127) / 128, 1, 1}, {128, 1, 1}}}, 1, {3, 5, 7}, 0},
  };
  uint32_t messages = 0;
  mlc_vk_code code = {0, kernels, 2, stderr, true, &messages, NULL};
  mlc_device *d = NULL;
  mlc_status st = mlc_vk_device_create(&code, mlc_allocator_default(), &d);
  if (st && mlc_status_code(st) == MLC_UNIMPLEMENTED && strstr(mlc_status_message(st), "no Vulkan")) {
    printf("SKIP: %s\n", mlc_status_message(st));
    mlc_status_free(st);
    return SKIP;
  }
  if (st) {
    fprintf(stderr, "FAIL: creating the Vulkan device: %s\n", mlc_status_message(st));
    return 1;
  }
  char name[512];
  d->vt->describe(d, name, sizeof name);
  printf("device: %s\n", name);

  /* One "arena" with a, b and c at 256-aligned offsets, as a session lays them out. */
  uint64_t arena = 0, off_a = 0, off_b = 4096, off_c = 8192;
  ok(d->vt->alloc(d, 12288, &arena), "alloc");
  float a[N], b[N], c[N];
  for (int i = 0; i < N; i++) { a[i] = (float)i * 0.5f; b[i] = 3.0f - (float)i; }
  ok(d->vt->write(d, arena + off_a, a, sizeof a), "write a");
  ok(d->vt->write(d, arena + off_b, b, sizeof b), "write b");
  memset(c, 0, sizeof c);
  ok(d->vt->read(d, c, arena + off_c, sizeof c), "read zeroed c");
  EXPECT(c[0] == 0 && c[N - 1] == 0, "a new allocation is not zeroed");
  void *k = NULL, *coop = NULL;
  ok(d->vt->resolve(d, "add_dbl", &k), "resolve");
  ok(d->vt->resolve(d, "coop", &coop), "resolve the cooperative-matrix kernel");
  uint64_t args[3] = {arena + off_a, arena + off_b, arena + off_c};
  double sec[4] = {0}, start[4] = {0};
  for (int run = 0; run < 3; run++) { /* runs 2 and 3 replay the recorded command buffer */
    if (run == 2) { /* new inputs between runs */
      for (int i = 0; i < N; i++) a[i] = 1.0f;
      ok(d->vt->write(d, arena + off_a, a, sizeof a), "write a again");
    }
    ok(d->vt->launch(d, k, N, args, 3, true, 0), "launch");
    ok(d->vt->launch(d, coop, N, args, 3, true, 1), "launch the fallback");
    ok(d->vt->finish(d, 2, sec, start), "finish");
    ok(d->vt->read(d, c, arena + off_c, sizeof c), "read c");
    int bad = 0;
    for (int i = 0; i < N; i++) bad += c[i] != 2 * (a[i] + b[i]);
    EXPECT(!bad, "run %d: %d of %d outputs differ from 2 (a + b) (c[7] = %g, expected %g)", run, bad, N, c[7],
           2 * (a[7] + b[7]));
    EXPECT(sec[0] > 0 && sec[0] < 10 && sec[1] > 0 && start[1] >= start[0], "run %d: step times %g s at %g, %g s at %g",
           run, sec[0], start[0], sec[1], start[1]);
  }
  /* Errors a caller can cause. */
  void *none = NULL;
  fails(d->vt->resolve(d, "nope", &none), MLC_NOT_FOUND, "not in the Vulkan kernel table", "unknown kernel");
  uint64_t bad_args[3] = {arena + off_a, 12345, arena + off_c};
  fails(d->vt->launch(d, k, N, bad_args, 3, false, 0), MLC_INVALID_ARGUMENT, "not in any allocation", "stray address");
  fails(d->vt->launch(d, k, N, args, 2, false, 0), MLC_INVALID_ARGUMENT, "takes 3 arguments", "argument count");
  fails(d->vt->write(d, arena + 12000, a, sizeof a), MLC_INVALID_ARGUMENT, "not in any allocation", "write past the end");
  d->vt->free(d, arena);
  d->vt->destroy(d);
  EXPECT(messages == 0, "%u Vulkan validation messages", messages);
  code.ordinal = 99;
  fails(mlc_vk_device_create(&code, mlc_allocator_default(), &d), MLC_NOT_FOUND, "no Vulkan device 99", "--device 99");
  EXPECT(messages == 0, "%u Vulkan validation messages", messages);
  spvBinaryDestroy(bin);
  spvContextDestroy(ctx);
  if (failures) return 1;
  printf("ok: 3 runs of a two-dispatch kernel and its cooperative-matrix stand-in match, times %.3g and %.3g ms, "
         "0 validation messages\n", sec[0] * 1e3, sec[1] * 1e3);
  return 0;
}
