/* The registry of the driver's target descriptors (driver/target.h): the
 * one place in driver/ that spells a target's name. */
#include "driver/target.h"

#include <string.h>

#include "driver/calibrate.h"
#ifdef MLC_HAVE_CPU
#include "driver/target_cpu.h"
#endif
#ifdef MLC_HAVE_SPIRV
#include "driver/target_spirv.h"
#endif
#ifdef MLC_HAVE_CUDA
#include "driver/target_cuda.h"
#include "driver/target_metal.h"
#endif

/* Where --help lists the GPU targets: everything but devices. */
#define RUNS (MLC_CMD_COMPILE | MLC_CMD_RUN | MLC_CMD_BENCH | MLC_CMD_TRAIN | MLC_CMD_PROFILE | MLC_CMD_CALIBRATE)

#define CUDA_NOT_BUILT "this mlc was built without the CUDA and Metal code generators (configure with -DMLC_BACKEND_CUDA=ON)"

/* The SPIR-V target's options of emitted code (mlc_options_set). */
static const struct option spirv_options[] = {
  {"spirv-attention", required_argument, 0, MLC_OPT_CODEGEN},
  {"spirv-emulate-coopmat", no_argument, 0, MLC_OPT_CODEGEN},
  {"spirv-coopmat", required_argument, 0, MLC_OPT_CODEGEN},
  {"spirv-attention-rescale", required_argument, 0, MLC_OPT_CODEGEN},
  {"spirv-attention-keys", required_argument, 0, MLC_OPT_CODEGEN},
  {"spirv-gemm-tile", required_argument, 0, MLC_OPT_CODEGEN},
  {0, 0, 0, 0},
};

/* The CUDA target's options of emitted code. */
static const struct option cuda_options[] = {
  {"cuda-gemm-tile", required_argument, 0, MLC_OPT_CODEGEN},
  {"cuda-gemv-ks", required_argument, 0, MLC_OPT_CODEGEN},
  {"cuda-sms", required_argument, 0, MLC_OPT_CODEGEN},
  {0, 0, 0, 0},
};

/* The CPU target's options of emitted code. */
static const struct option cpu_options[] = {
  {"cpu", required_argument, 0, MLC_OPT_CODEGEN},
  {"triple", required_argument, 0, MLC_OPT_CODEGEN},
  {0, 0, 0, 0},
};

static const mlc_driver_target targets[] = {
  {
    .name = "cpu", .what = "native CPU code through the LLVM C API", .listed = RUNS, .device_driver = "cpu",
    .options = cpu_options,
    .options_help =
      "      --cpu NAME        (cpu) the CPU the code is for: native (this one, the default for run,\n"
      "                        bench and train), baseline (x86-64-v2 on x86-64: SSE4.2, any x86-64\n"
      "                        since about 2009) or an LLVM CPU name (x86-64-v3, haswell, znver3,\n"
      "                        sapphirerapids); an artifact refuses at create a machine that lacks\n"
      "                        one of its features.  Without --cpu, compile -o builds the kernels\n"
      "                        for x86-64-v2, x86-64-v3 (AVX2, FMA) and x86-64-v4 (AVX-512), and\n"
      "                        create runs the best the machine has; with it, one build\n"
      "      --triple T        (cpu) the LLVM target triple (default: this machine's)\n",
    .not_built = "this mlc was built without the CPU target (configure with -DMLC_BACKEND_CPU=ON, which needs llvm-14-dev)",
#ifdef MLC_HAVE_CPU
    .build_bytes = sizeof(mlc_cpu_build), .build = mlc_cpu_target_build, .write = mlc_cpu_target_write,
    .open = mlc_cpu_target_open, .release = mlc_cpu_target_release, .calibrate = mlc_calibrate_cpu,
    .supports_op = mlc_cpu_target_supports_op,
#endif
  },
  {
    .name = "cuda", .what = "CUDA C for one GPU", .listed = RUNS, .one_device = true, .device_memory = true,
    .ncu = true, .device_driver = "cuda", .not_built = CUDA_NOT_BUILT, .options = cuda_options,
    .options_help =
      "      --cuda-gemm-tile BN,ST,OCC,LAG  (cuda) every bf16/f16 wgmma GEMM's tile: 128 x BN, ST stages,\n"
      "                        OCC blocks a multiprocessor, LAG k-tiles of products left running (for\n"
      "                        measuring the tile table: bench/gemm_tune.py); pp,ST: the persistent\n"
      "                        ping-pong kernel with ST stages (2-6); co,ST: the persistent\n"
      "                        cooperative kernel, 128 x 256 tiles, ST stages (2-4); cs,ST: the same\n"
      "                        with its stores by TMA (not yet run on a GPU)\n"
      "      --cuda-gemv-ks N  (cuda) warps per output column (1, 2, 4 or 8) of every linear of at most 4\n"
      "                        rows (a decode step's), in place of the rule (for measuring it)\n"
      "      --cuda-sms N      (cuda) the multiprocessors of the GPU the kernels are for (default 132: an\n"
      "                        H100 SXM's, an H200's; 114 on an H100 PCIe): the persistent kernels take\n"
      "                        one block each, and the GEMM tile rule counts its waves in them\n",
#ifdef MLC_HAVE_CUDA
    .build_bytes = sizeof(mlc_cuda_build), .build = mlc_cuda_target_build, .write = mlc_cuda_target_write,
    .open = mlc_cuda_target_open, .release = mlc_cuda_target_release, .calibrate = mlc_calibrate_gpu,
    .available = mlc_calibrate_cuda_available, .clock_open = mlc_calibrate_cuda_clock,
    .supports_op = mlc_cuda_target_supports_op,
    .supports_node = mlc_cuda_supports_node,
#endif
  },
  {
    .name = "cuda-nccl", .what = "CUDA C with NCCL, FSDP-sharded over several GPUs", .listed = MLC_CMD_COMPILE | MLC_CMD_TRAIN,
    .nccl = true, .one_device = true, .device_memory = true, .ncu = true, .device_driver = "cuda",
    .not_built = CUDA_NOT_BUILT,
#ifdef MLC_HAVE_CUDA
    .build_bytes = sizeof(mlc_cuda_build), .build = mlc_cuda_target_build, .write = mlc_cuda_target_write,
    .open = mlc_cuda_target_open, .release = mlc_cuda_target_release, .supports_op = mlc_cuda_target_supports_op,
    .supports_node = mlc_cuda_supports_node,
#endif
  },
  {
    .name = "spirv", .what = "SPIR-V for Vulkan compute", .listed = RUNS, .device_memory = true, .device_driver = "vulkan",
    .calibrate_grows = true, .options = spirv_options,
    .options_help =
      "      --spirv-attention coopmat|tiled  (spirv) the attention forward and gradient on cooperative\n"
      "                        matrices for devices that have them, the tiled kernels their fallback\n"
      "                        (default coopmat); tiled: the tiled kernels alone\n"
      "      --spirv-emulate-coopmat  (spirv) the cooperative-matrix kernels with scalar FMAs in their\n"
      "                        place, on any device (to check them where there are none)\n"
      "      --spirv-coopmat khr|nv  (spirv) the cooperative-matrix extension the kernels use (default\n"
      "                        khr: translated from the validated NV module, bf16 on bf16 matrices, the NV\n"
      "                        form of the others their fallback; nv: the NV modules alone)\n"
      "      --spirv-attention-rescale lazy|always  (spirv) when that attention rescales its output\n"
      "      --spirv-attention-keys 32|64  (spirv) keys a block of that attention forward (default 32)\n"
      "      --spirv-gemm-tile BMxBNxWMxWN[xBK[xSTAGES]]  (spirv) the cooperative-matrix GEMM's tile\n",
    .not_built = "this mlc was built without the SPIR-V target (configure with -DMLC_BACKEND_SPIRV=ON, which needs "
                 "spirv-tools, spirv-headers and libvulkan-dev)",
#ifdef MLC_HAVE_SPIRV
    .build_bytes = sizeof(mlc_spirv_build), .build = mlc_spirv_target_build, .write = mlc_spirv_target_write,
    .open = mlc_spirv_target_open, .release = mlc_spirv_target_release, .supports_op = mlc_spirv_target_supports_op,
    .supports_node = mlc_spirv_supports_node,
#ifdef MLC_HAVE_CUDA
    .calibrate = mlc_calibrate_gpu, /* calibrate.c builds with the CUDA target */
#endif
#endif
  },
  {
    .name = "metal", .what = "Metal Shading Language", .listed = MLC_CMD_COMPILE, .device_driver = "metal",
    .not_built = CUDA_NOT_BUILT,
    .calibrate_missing = "calibrate does not measure Metal GPUs yet; the profiler uses built-in ceilings and says so in its table",
#ifdef MLC_HAVE_CUDA
    .build_bytes = sizeof(mlc_metal_build), .build = mlc_metal_target_build, .write = mlc_metal_target_write,
    .open = mlc_metal_target_open, .supports_op = mlc_metal_target_supports_op, .supports_node = mlc_metal_supports_node,
#endif
  },
};

int mlc_exit_status(mlc_status_code_t code) {
  switch (code) {
  case MLC_OK: return MLC_EXIT_OK;
  case MLC_INTERNAL: return MLC_EXIT_INTERNAL;
  case MLC_UNIMPLEMENTED: return MLC_EXIT_NO_TARGET;
  default: return MLC_EXIT_USER;
  }
}

const mlc_driver_target *mlc_driver_target_find(const char *name) {
  for (unsigned i = 0; name && i < sizeof targets / sizeof *targets; i++)
    if (!strcmp(targets[i].name, name)) return &targets[i];
  return NULL;
}

const char *mlc_driver_default_target(void) { return "cpu"; }

const mlc_driver_target *mlc_driver_targets(unsigned *n) {
  *n = sizeof targets / sizeof *targets;
  return targets;
}

const char *mlc_driver_target_names(unsigned cmd, const char *sep, const char *last, char *buf, size_t n) {
  unsigned count = 0, k = 0;
  for (unsigned i = 0; i < sizeof targets / sizeof *targets; i++) count += !cmd || (targets[i].listed & cmd);
  size_t len = 0;
  buf[0] = 0;
  for (unsigned i = 0; i < sizeof targets / sizeof *targets && len < n; i++) {
    if (cmd && !(targets[i].listed & cmd)) continue;
    len += (size_t)snprintf(buf + len, n - len, "%s%s", k == 0 ? "" : k + 1 == count ? last : sep, targets[i].name);
    k++;
  }
  return buf;
}
