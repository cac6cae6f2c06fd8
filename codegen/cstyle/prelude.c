/* The activations' math, in the names both preludes provide (expf, fmaf,
 * erff): the same text for CUDA and MSL. */
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
    "  return g * (0.5f * (1.f + th) + right); }\n";
