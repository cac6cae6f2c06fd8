/* The activations' math and dropout's random numbers, in the names both
 * preludes provide (expf, fmaf, erff, mlc_umulhi): the same text for CUDA
 * and MSL. */
#include "codegen/cstyle/cc.h"

const char mlc_cc_math_prelude[] =
    "MLC_FN float mlc_sigmoid(float x) { return 1.f / (1.f + expf(-x)); }\n"
    "MLC_FN float mlc_silu_grad(float g, float x) {\n"
    "  float s = mlc_sigmoid(x); return g * (s * fmaf(x, 1.f - s, 1.f)); }\n"
    "MLC_FN float mlc_gelu_grad(float g, float x) {\n"
    "  float cdf = fmaf(0.5f, erff(x * 0.707106781f), 0.5f);\n"
    "  float pdf = expf(x * x * -0.5f) * 0.398942280f;\n"
    "  return g * fmaf(x, pdf, cdf); }\n"
    "// gelu(approximate='tanh') and PyTorch's GeluBackward for it.\n"
    "MLC_FN float mlc_gelu_tanh(float x) {\n"
    "  float h = 0.5f * x; return fmaf(h, tanhf(0.797884561f * fmaf(x * x * x, 0.044715f, x)), h); }\n"
    "MLC_FN float mlc_gelu_tanh_grad(float g, float x) {\n"
    "  float x2 = x * x, th = tanhf(0.797884561f * fmaf(x2 * x, 0.044715f, x));\n"
    "  float right = 0.5f * x * (1.f - th * th) * (0.797884561f * fmaf(x2, 0.134145f, 1.f));\n"
    "  return g * (0.5f * (1.f + th) + right); }\n"
    "// dropout's mask: the first word of Philox4x32-10 (Salmon et al. 2011) of counter\n"
    "// (x0, x1, x2, x3) under key (k0, k1), as the CPU target's (codegen/llvm/emit_ew.c).\n"
    "MLC_FN unsigned mlc_philox0(unsigned x0, unsigned x1, unsigned x2, unsigned x3, unsigned k0, unsigned k1) {\n"
    "  for (int r = 0; r < 10; r++) {\n"
    "    unsigned h0 = mlc_umulhi(x0, 0xD2511F53u), l0 = x0 * 0xD2511F53u;\n"
    "    unsigned h1 = mlc_umulhi(x2, 0xCD9E8D57u), l1 = x2 * 0xCD9E8D57u;\n"
    "    x0 = h1 ^ x1 ^ k0; x1 = l1; x2 = h0 ^ x3 ^ k1; x3 = l0;\n"
    "    k0 += 0x9E3779B9u; k1 += 0xBB67AE85u;\n"
    "  }\n"
    "  return x0; }\n";
