#!/usr/bin/python3
"""Numerics of the CPU backend against PyTorch (CPU, float64 references).

    opcheck.py ops     --opcheck BIN --work DIR [--threads N] [--cpu NAME] [-k SUBSTR]
    opcheck.py minillm --opcheck BIN --work DIR --model examples/minillm.mdl [--threads N]
    opcheck.py objfile --opcheck BIN --work DIR --model examples/minillm.mdl [--cc CC]
    opcheck.py bench   --opcheck BIN --work DIR [--threads N] [--size 1024] [--iters 10]

With --target cuda, `ops` and `minillm` run the same cases through the CUDA
target on GPU 0 (mlc_opcheck built with it); `same_bits` cases then run
twice and must give the same bits.  --target spirv does the same on Vulkan
device $MLC_VK_DEVICE (lavapipe in CI, with MLC_VK_VALIDATE=1: a validation
message fails the case); exit status 77 when no Vulkan driver is installed.

`ops` compiles one small .mdl model per case with mlc_opcheck (the C driver
next to this file), which runs it through the LLVM JIT on pseudo-random data
and writes inputs, parameters and outputs to DIR/<case>/.  The gradient ops,
which only the autodiff pass creates, are cases of their own: mlc_opcheck
builds a one-op function by hand (--op), and the reference is what
torch.autograd.grad gives for the forward op.  The case's reference function
recomputes the output with torch in float64 (bf16/f16 cases round where the
compiled graph rounds), and the error is

    err = max |out - ref| / max |ref|

which must not exceed the case's tolerance: 1e-5 for elementwise ops, 1e-4
for reductions, GEMMs, norms and attention, 1e-2 for bf16/f16, and 0 (bit
for bit) for data movement and integer ops.  Cases marked `same_bits` run a second
time on 3 threads and must give the same bits (the kernels that sum across
work items' data: embedding_grad, the norm weight gradients, attention_grad,
cross_entropy_grad).  One PASS/FAIL line per case; the exit status is 1 if
any case failed.

`minillm` runs examples/minillm.mdl (vocab 512, dim 128, 2 layers, 4 heads,
batch 2, seq 64) and compares the logits with a hand-written PyTorch model
(nn.Embedding, nn.MultiheadAttention(batch_first=True), an RMSNorm with
eps = finfo(float32).eps, Linear/SiLU/Linear, head) loaded with the same
weights through load_state_dict, which also checks the parameter names.

`objfile` writes the MiniLLM's kernels to an object file, links it into a
shared library with the C compiler, runs them from there (dlsym instead of
the JIT) and requires logits bit-identical to the JIT's.

`bench` times a size^3 f32 GEMM (matmul, and linear = x @ W^T), median of
`iters` runs after a warm-up, against torch at the same thread count:
torch.matmul / F.linear, and for linear also torch's oneDNN path
(torch.utils.mkldnn), since Debian's torch sends matmul to reference BLAS.
"""
import argparse
import os
import re
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

EW, RED, LOW, EXACT = 1e-5, 1e-4, 1e-2, 0.0


# ---- running mlc_opcheck and reading what it wrote ----

def read_manifest(d):
    m = {"input": {}, "param": {}, "output": {}, "state": {}, "updated": {}, "kernel": [], "bench": None}
    for line in open(os.path.join(d, "manifest.txt")):
        f = line.split()
        if f[0] in ("input", "param", "output", "state", "updated"):
            m[f[0]][f[1]] = (f[2], [int(x) for x in f[4:4 + int(f[3])]])
        elif f[0] == "kernel":
            m["kernel"].append((f[1], int(f[2]), float(f[3]), float(f[4]), float(f[5])))
        elif f[0] == "bench":
            m["bench"] = (float(f[1]), float(f[2]))
        elif f[0] == "target":
            m["target"] = (f[1], int(f[2]))
    return m


def read_tensor(d, kind, name, dtype, shape):
    """The raw file as a torch tensor: float64 for float dtypes, int64 for ints."""
    path = os.path.join(d, "%s.%s.bin" % (kind, name))
    if dtype == "bf16":
        raw = np.fromfile(path, dtype=np.int16)
        t = torch.from_numpy(raw.copy()).view(torch.bfloat16).to(torch.float64)
    else:
        npt = {"f32": np.float32, "f16": np.float16, "i32": np.int32, "i64": np.int64, "bool": np.uint8}[dtype]
        t = torch.from_numpy(np.fromfile(path, dtype=npt).copy())
        t = t.to(torch.float64) if dtype in ("f32", "f16") else t.to(torch.int64)
    return t.reshape(shape)


SKIP = 77  # mlc_opcheck's exit status when the target's device is absent (ctest's SKIP_RETURN_CODE)


class NoDevice(Exception):
    pass


def run_opcheck(args, model, outdir, extra, threads=None):
    """model: a .mdl path, or the --op arguments of a hand-built op."""
    model = model if isinstance(model, list) else [model]
    cmd = [args.opcheck] + model + [outdir, "--threads", str(threads or args.threads), "--target", args.target] + extra
    cmd += args.option or []  # options of emitted code, as mlc takes them (--f32-matmul=..., --spirv-...)
    if args.cpu:  # NAME or NAME:FEATURES
        name, _, feats = args.cpu.partition(":")
        cmd += ["--cpu", name, "--features", feats]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode == SKIP:
        raise NoDevice(r.stderr.strip())
    if r.returncode != 0:
        raise RuntimeError("mlc_opcheck failed (%s):\n%s%s" % (" ".join(cmd), r.stdout, r.stderr))
    m = read_manifest(outdir)
    tensors = {k: {n: read_tensor(outdir, k, n, dt, sh) for n, (dt, sh) in m[k].items()}
               for k in ("input", "param", "output")}
    return m, tensors


def rel_err(out, ref):
    out, ref = out.to(torch.float64), ref.to(torch.float64)
    if out.shape != ref.shape:
        return float("inf"), "shape %s, expected %s" % (list(out.shape), list(ref.shape))
    if not torch.equal(torch.isfinite(out), torch.isfinite(ref)):
        return float("inf"), "non-finite values differ"
    fin = torch.isfinite(ref)
    diff = (out[fin] - ref[fin]).abs().max().item() if fin.any() else 0.0
    scale = ref[fin].abs().max().item() if fin.any() else 0.0
    return (diff / scale if scale > 0 else diff), ""


# ---- the cases ----

def bf16(t):  # round as the compiled graph does when it stores bf16
    return t.to(torch.bfloat16).to(torch.float64)


def f16(t):
    return t.to(torch.float16).to(torch.float64)


def attn_ref(q, k, v, scale, causal):
    s = q @ k.transpose(-1, -2) * scale
    if causal:
        sq, sk = s.shape[-2:]
        s = s.masked_fill(~torch.ones(sq, sk, dtype=torch.bool).tril(), float("-inf"))
    return torch.softmax(s, -1) @ v


def mha_ref(causal, heads=2, rnd=None):
    """nn.MultiheadAttention's computation, rounded to bf16 (or rnd) where the compiled graph stores."""
    rnd = rnd or bf16
    def ref(I, P):
        x = I["x"]
        B, S, E = x.shape
        d = E // heads
        def lin(t, w, b):  # the product rounded, then the bias added and rounded
            return rnd(rnd(t @ P[w].T) + P[b])
        qkv = lin(x, "attn.in_proj_weight", "attn.in_proj_bias")
        q, k, v = (t.reshape(B, S, heads, d).transpose(1, 2) for t in qkv.split(E, -1))
        o = rnd(attn_ref(q, k, v, d ** -0.5, causal)).transpose(1, 2).reshape(B, S, E)
        return lin(o, "attn.out_proj.weight", "attn.out_proj.bias")
    return ref


def rmsnorm_ref(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


FEPS = float(torch.finfo(torch.float32).eps)
BEPS = float(torch.finfo(torch.bfloat16).eps)
I27 = ("cpu", "cuda", "metal")  # issue 27's ops: the targets that have kernels for them (Metal: CUDA's emitters)


class Case:
    def __init__(self, name, sig, expr, ref, tol, ranges=None, members="", defines=None, targets=("cpu", "cuda", "metal", "spirv")):
        self.name, self.sig, self.expr, self.ref, self.tol = name, sig, expr, ref, tol
        self.ranges, self.members, self.defines = ranges or {}, members, defines or []
        self.targets = targets

    same_bits = False

    def source(self):
        return "module T {\n    %s\n    forward(%s) {\n        return %s\n    }\n}\n" % (
            self.members, self.sig, self.expr)

    def model(self, d):
        src = os.path.join(d, "model.mdl")
        with open(src, "w") as f:
            f.write(self.source())
        return src


def unary(name, fn, lo=-2.0, hi=2.0, tol=EW):
    return Case(name, "x: f32[3, 1000]", "%s(x)" % name, lambda I, P: fn(I["x"]), tol, {"x": (lo, hi)})


CASES = [
    # binary elementwise, broadcasting
    Case("add_bcast_col", "a: f32[4, 37, 53], b: f32[37, 1]", "a + b", lambda I, P: I["a"] + I["b"], EW),
    Case("sub_bcast_3d", "a: f32[5, 1, 7], b: f32[3, 1]", "a - b", lambda I, P: I["a"] - I["b"], EW),
    Case("mul_row", "a: f32[2, 3, 4, 45], b: f32[45]", "a * b", lambda I, P: I["a"] * I["b"], EW),
    Case("mul_outer", "a: f32[33, 1], b: f32[1, 70]", "a * b", lambda I, P: I["a"] * I["b"], EW),
    Case("mul_scalar", "x: f32[3, 1000]", "x * 2.5", lambda I, P: I["x"] * 2.5, EW),
    Case("div", "a: f32[37, 53], b: f32[37, 53]", "a / b", lambda I, P: I["a"] / I["b"], EW, {"b": (0.5, 2)}),
    Case("div_scalar_left", "b: f32[5, 99]", "1.0 / b", lambda I, P: 1.0 / I["b"], EW, {"b": (0.5, 2)}),
    Case("add_same_big", "a: f32[3, 5000], b: f32[3, 5000]", "a + b", lambda I, P: I["a"] + I["b"], EW),
    Case("add_i32_bcast", "a: i32[7, 33], b: i32[33]", "a + b", lambda I, P: I["a"] + I["b"], EXACT,
         {"a": (-100, 100), "b": (-100, 100)}),
    Case("mul_i32", "a: i32[7, 33], b: i32[7, 33]", "a * b", lambda I, P: I["a"] * I["b"], EXACT,
         {"a": (-100, 100), "b": (-100, 100)}),
    Case("div_i32_trunc", "a: i32[7, 33], b: i32[7, 33]", "a / b",
         lambda I, P: torch.div(I["a"], I["b"], rounding_mode="trunc"), EXACT, {"a": (-100, 100), "b": (1, 20)}),
    Case("sub_i64", "a: i64[40], b: i64[40]", "a - b", lambda I, P: I["a"] - I["b"], EXACT,
         {"a": (-1000, 1000), "b": (-1000, 1000)}),
    # unary
    Case("neg", "x: f32[3, 1000]", "-x", lambda I, P: -I["x"], EW),
    unary("exp", torch.exp),
    Case("exp_wide", "x: f32[4, 1000]", "exp(x)", lambda I, P: torch.exp(I["x"]), EW, {"x": (-87, 88)}),
    unary("log", torch.log, 0.001, 100),
    unary("sqrt", torch.sqrt, 0, 4),
    unary("rsqrt", torch.rsqrt, 0.1, 4),
    unary("tanh", torch.tanh, -5, 5),
    unary("sigmoid", torch.sigmoid, -12, 12),
    unary("relu", torch.relu),
    unary("silu", F.silu, -8, 8),
    unary("gelu", F.gelu, -5, 5),
    Case("relu_i32", "x: i32[5, 31]", "relu(x)", lambda I, P: torch.relu(I["x"]), EXACT, {"x": (-50, 50)}),
    # issue 27's elementwise ops and arange: kernels on every target (Metal untested here)
    Case("abs", "x: f32[3, 1000]", "abs(x)", lambda I, P: I["x"].abs(), EXACT),
    Case("abs_i32", "x: i32[5, 31]", "abs(x)", lambda I, P: I["x"].abs(), EXACT, {"x": (-50, 50)}),
    Case("erf", "x: f32[3, 1000]", "erf(x)", lambda I, P: torch.erf(I["x"]), EW, {"x": (-4, 4)}),
    # near 0, where 1 - erfc(x) keeps only an absolute error (the CPU target's was 3.6e-4 of the values here)
    Case("erf_near_zero", "x: f32[3, 1000]", "erf(x)", lambda I, P: torch.erf(I["x"]), EW, {"x": (-1e-3, 1e-3)}),
    Case("pow_square", "x: f32[3, 1000]", "x ** 2", lambda I, P: I["x"] ** 2, EW),
    Case("pow_int_neg", "x: f32[3, 1000]", "pow(x, -3)", lambda I, P: I["x"] ** -3, EW, {"x": (0.5, 2)}),
    Case("pow_frac", "x: f32[3, 1000]", "pow(x, 1.7)", lambda I, P: I["x"] ** 1.7, EW, {"x": (0, 10)}),
    Case("pow_frac_neg_base", "x: f32[3, 1000]", "x ** 0.5 + x ** 2.5", lambda I, P: I["x"] ** 0.5 + I["x"] ** 2.5,
         EW, {"x": (-1, 1)}),  # NaN where x < 0, as torch
    Case("pow_bf16", "x: f32[5, 333]", "cast(pow(cast(x, bf16), 3), f32)", lambda I, P: bf16(bf16(I["x"]) ** 3), LOW),
    Case("clamp", "x: f32[3, 1000]", "clamp(x, min=-0.5, max=1.25)", lambda I, P: I["x"].clamp(-0.5, 1.25), EXACT),
    Case("clamp_min_only", "x: f32[3, 1000]", "clamp(x, min=0.25)", lambda I, P: I["x"].clamp(min=0.25), EXACT),
    Case("clamp_crossed", "x: f32[3, 1000]", "clamp(x, min=1.0, max=-1.0)", lambda I, P: I["x"].clamp(1.0, -1.0),
         EXACT),  # min > max: max everywhere, as torch.clamp
    Case("gelu_tanh", "x: f32[3, 1000]", 'gelu(x, approximate="tanh")', lambda I, P: F.gelu(I["x"], approximate="tanh"),
         EW, {"x": (-5, 5)}),
    Case("gelu_tanh_bf16", "x: f32[5, 333]", 'cast(gelu(cast(x, bf16), approximate="tanh"), f32)',
         lambda I, P: bf16(F.gelu(bf16(I["x"]), approximate="tanh")), LOW, {"x": (-5, 5)}),
    Case("lt_bcast", "a: f32[4, 37, 53], b: f32[37, 1]", "a < b", lambda I, P: I["a"] < I["b"], EXACT),
    Case("gt_scalar", "x: f32[3, 1000]", "x > 0.5", lambda I, P: I["x"] > 0.5, EXACT),
    Case("le_ge_int", "a: i32[7, 33], b: i32[33]", "cast(a <= b, i32) + cast(a >= b, i32) * 2",
         lambda I, P: (I["a"] <= I["b"]).long() + (I["a"] >= I["b"]).long() * 2, EXACT,
         {"a": (-5, 5), "b": (-5, 5)}),
    Case("eq_ne", "a: f32[7, 33], b: f32[7, 33]", "cast(a == b, f32) + cast(a != b, f32) * 2.0",
         lambda I, P: (I["a"] == I["b"]).double() + (I["a"] != I["b"]).double() * 2, EXACT,
         {"a": (-3, 3, "int"), "b": (-3, 3, "int")}),
    Case("where_bcast", "c: f32[4, 1, 53], a: f32[37, 53], b: f32[4, 37, 1]", "where(c > 0.0, a, b)",
         lambda I, P: torch.where(I["c"] > 0, I["a"], I["b"]), EXACT),
    Case("where_scalar", "x: f32[3, 1000]", "where(x < 0.0, 0.0, x * 2.0)",
         lambda I, P: torch.where(I["x"] < 0, torch.zeros(()).double(), I["x"] * 2), EXACT),
    Case("arange", "x: i64[1]", "arange(37) + x", lambda I, P: torch.arange(37) + I["x"], EXACT,
         {"x": (-100, 100)}),
    Case("arange_positions", "x: f32[2, 16, 8]", "x + pos(arange(16))", lambda I, P: I["x"] + P["pos.weight"], EW,
         members="pos = Embedding(16, 8)"),
    # issue 27, part 2: views lowered onto transpose/reshape/broadcast/slice/concat (so on every target), and
    # gather, min, argmax, argmin (kernels on cpu and cuda)
    Case("permute_3d", "x: f32[4, 37, 53]", "permute(x, [2, 0, 1])", lambda I, P: I["x"].permute(2, 0, 1), EXACT),
    Case("permute_4d_neg", "x: f32[2, 5, 3, 7]", "permute(x, [0, -2, -1, 1])", lambda I, P: I["x"].permute(0, 2, 3, 1),
         EXACT),
    Case("permute_view", "x: f32[3, 1, 40]", "permute(x, [1, 0, 2]) * 1.0", lambda I, P: I["x"].permute(1, 0, 2), EXACT),
    Case("unsqueeze_squeeze", "x: f32[6, 1, 40], y: f32[6, 40]", "squeeze(x, 1) + squeeze(unsqueeze(y, -1), -1)",
         lambda I, P: I["x"].squeeze(1) + I["y"].unsqueeze(-1).squeeze(-1), EW),
    Case("unsqueeze_bcast", "x: f32[6, 40], y: f32[6]", "x * unsqueeze(y, 1)", lambda I, P: I["x"] * I["y"].unsqueeze(1),
         EW),
    Case("squeeze_all_noop", "x: f32[1, 6, 1, 5]", "squeeze(squeeze(x), 0) * 1.0",
         lambda I, P: I["x"].squeeze().squeeze(0), EXACT),  # squeeze(dim) of a dim longer than 1 is a no-op
    Case("expand", "x: f32[37, 1]", "expand(x, [4, -1, 53])", lambda I, P: I["x"].expand(4, -1, 53), EXACT),
    Case("expand_i32", "x: i32[1, 3, 1]", "expand(x, [2, 3, 5])", lambda I, P: I["x"].expand(2, 3, 5), EXACT,
         {"x": (-100, 100)}),
    Case("slice_step", "x: f32[4, 37, 53]", "slice(x, 1, 2, 30, step=3)", lambda I, P: I["x"][:, 2:30:3], EXACT),
    Case("slice_step_fits", "x: f32[4, 36, 5]", "slice(x, -2, 0, 36, step=4)", lambda I, P: I["x"][:, 0:36:4], EXACT),
    Case("index_mixed", "x: f32[4, 37, 53]", "x[1, ::5, -20:-2:7]", lambda I, P: I["x"][1, ::5, -20:-2:7], EXACT),
    Case("index_clamped", "x: f32[4, 37, 53]", "x[-100:100, 36, 3:]", lambda I, P: I["x"][-100:100, 36, 3:], EXACT),
    Case("index_bf16", "x: bf16[9, 20]", "cast(x[1::2, ::3], f32)", lambda I, P: I["x"][1::2, ::3], EXACT),
    Case("gather_last", "x: f32[4, 37, 53], i: i64[4, 37, 9]", "gather(x, -1, i)",
         lambda I, P: torch.gather(I["x"], -1, I["i"]), EXACT, {"i": (0, 53)}, targets=I27),
    Case("gather_mid_small", "x: f32[4, 37, 53], i: i32[3, 50, 20]", "gather(x, 1, i)",
         lambda I, P: torch.gather(I["x"], 1, I["i"]), EXACT, {"i": (0, 37)}, targets=I27),
    Case("gather_out_of_range", "x: f32[5, 8], i: i64[5, 8]", "gather(x, 1, i)",
         lambda I, P: torch.where((I["i"] >= 0) & (I["i"] < 8), torch.gather(I["x"], 1, I["i"].clamp(0, 7)),
                                  torch.zeros((), dtype=torch.float64)), EXACT, {"i": (-3, 11)}, targets=I27),
    Case("gather_bf16", "x: bf16[6, 40], i: i64[6, 7]", "cast(gather(x, 1, i), f32)",
         lambda I, P: torch.gather(I["x"], 1, I["i"]), EXACT, {"i": (0, 40)}, targets=I27),
    Case("min_last_keepdim", "x: f32[4, 37, 53]", "min(x, dim=2, keepdim=true)",
         lambda I, P: I["x"].amin(2, keepdim=True), EXACT, targets=I27),
    Case("min_axis1_long", "x: f32[2, 100, 45]", "min(x, dim=1)", lambda I, P: I["x"].amin(1), EXACT, targets=I27),
    Case("min_axis0", "x: f32[300, 7]", "min(x, dim=0)", lambda I, P: I["x"].amin(0), EXACT, targets=I27),
    # not on Metal yet: the kernel's NaN test (v != v) on ints fails the emulator's -Werror (-Wtautological-compare)
    Case("min_all_i32", "x: i32[6, 70]", "min(x)", lambda I, P: I["x"].amin(), EXACT, {"x": (-1000, 1000)},
         targets=("cpu", "cuda")),
    Case("min_bf16", "x: bf16[4, 300]", "cast(min(x, dim=1), f32)", lambda I, P: I["x"].amin(1), EXACT, targets=I27),
    Case("argmax_last", "x: f32[4, 37, 53]", "argmax(x, dim=-1)", lambda I, P: I["x"].argmax(-1), EXACT, targets=I27),
    Case("argmax_ties", "x: f32[6, 40]", "argmax(x, dim=1, keepdim=true)", lambda I, P: I["x"].argmax(1, keepdim=True),
         EXACT, {"x": (-2, 2, "int")}, targets=I27),  # the first of equal maxima, as torch
    Case("argmin_axis0_i32", "x: i32[30, 7]", "cast(argmin(x, dim=0), i32)", lambda I, P: I["x"].argmin(0), EXACT,
         {"x": (-3, 3)}, targets=I27),
    Case("argmax_all", "x: f32[6, 70]", "argmax(x)", lambda I, P: I["x"].argmax(), EXACT, targets=I27),
    Case("argmin_bf16", "x: bf16[5, 33]", "argmin(x, dim=1)", lambda I, P: I["x"].argmin(1), EXACT,
         {"x": (-2, 2, "int")}, targets=I27),
    # cast, and bf16/f16 storage with f32 compute
    Case("cast_bf16_roundtrip", "x: f32[7, 301]", "cast(cast(x, bf16), f32)", lambda I, P: bf16(I["x"]), EXACT,
         {"x": (-100, 100)}),
    Case("cast_f16_roundtrip", "x: f32[7, 301]", "cast(cast(x, f16), f32)", lambda I, P: f16(I["x"]), EXACT,
         {"x": (-100, 100)}),
    Case("cast_f16_subnormal", "x: f32[7, 301]", "cast(cast(x, f16), f32)", lambda I, P: f16(I["x"]), EXACT,
         {"x": (-2e-4, 2e-4)}),
    Case("cast_f16_overflow", "x: f32[7, 301]", "cast(cast(x, f16), f32)", lambda I, P: f16(I["x"]), EXACT,
         {"x": (-70000, 70000)}),
    # around f16's smallest subnormal, 2^-24 = 6e-8: ties at 2^-25 and rounding up from there (round to nearest even)
    Case("cast_f16_tiny", "x: f32[7, 301]", "cast(cast(x, f16), f32)", lambda I, P: f16(I["x"]), EXACT,
         {"x": (-2e-7, 2e-7)}),
    Case("cast_bf16_tiny", "x: f32[7, 301]", "cast(cast(x, bf16), f32)", lambda I, P: bf16(I["x"]), EXACT,
         {"x": (-1e-38, 1e-38)}),
    Case("cast_f32_i32", "x: f32[7, 301]", "cast(x, i32)", lambda I, P: I["x"].trunc(), EXACT, {"x": (-100, 100)}),
    Case("cast_i32_f32", "x: i32[7, 301]", "cast(x, f32)", lambda I, P: I["x"].double(), EXACT,
         {"x": (-1000, 1000)}),
    Case("cast_i32_i64", "x: i32[7, 31]", "cast(x, i64)", lambda I, P: I["x"], EXACT, {"x": (-1000, 1000)}),
    Case("gelu_bf16", "x: f32[5, 333]", "cast(gelu(cast(x, bf16)), f32)", lambda I, P: bf16(F.gelu(bf16(I["x"]))),
         LOW, {"x": (-5, 5)}),
    Case("silu_bf16_input", "x: bf16[5, 77]", "cast(silu(x), f32)", lambda I, P: bf16(F.silu(I["x"])), LOW,
         {"x": (-6, 6)}),
    Case("add_f16_input", "a: f16[9, 40], b: f16[40]", "cast(a + b, f32)", lambda I, P: f16(I["a"] + I["b"]), LOW),
    # reductions
    Case("sum_axis1_keepdim", "x: f32[4, 37, 53]", "sum(x, dim=1, keepdim=true)",
         lambda I, P: I["x"].sum(1, keepdim=True), RED),
    Case("sum_last", "x: f32[6, 1000]", "sum(x, dim=-1)", lambda I, P: I["x"].sum(-1), RED),
    Case("sum_all", "x: f32[6, 70]", "sum(x)", lambda I, P: I["x"].sum(), RED),
    Case("mean_axis0", "x: f32[4, 37, 53]", "mean(x, dim=0)", lambda I, P: I["x"].mean(0), RED),
    Case("mean_last_keepdim", "x: f32[4, 37, 53]", "mean(x, dim=2, keepdim=true)",
         lambda I, P: I["x"].mean(2, keepdim=True), RED),
    Case("max_last_keepdim", "x: f32[4, 37, 53]", "max(x, dim=2, keepdim=true)",
         lambda I, P: I["x"].amax(2, keepdim=True), EXACT),
    Case("max_axis1", "x: f32[4, 37, 53]", "max(x, dim=1)", lambda I, P: I["x"].amax(1), EXACT),
    Case("sum_i32_last", "x: i32[5, 40]", "sum(x, dim=1)", lambda I, P: I["x"].sum(1), EXACT, {"x": (-50, 50)}),
    Case("sum_bf16", "x: bf16[4, 300]", "cast(sum(x, dim=1), f32)", lambda I, P: bf16(I["x"].sum(1)), LOW),
    # long axes over wide columns (the bias gradients): the GPU splits the axis
    Case("sum_axis0_long", "x: f32[300, 70]", "sum(x, dim=0)", lambda I, P: I["x"].sum(0), RED),
    Case("max_axis1_long", "x: f32[2, 100, 45]", "max(x, dim=1)", lambda I, P: I["x"].amax(1), EXACT),
    Case("mean_axis0_bf16", "x: bf16[512, 96]", "cast(mean(x, dim=0), f32)", lambda I, P: bf16(I["x"].mean(0)), LOW),
    # the GPU's column reduction at 8, 16 and 32 columns a block, rows off its unrolled stride; the axis
    # cut into chunks (wide, i32, mean, max: partials in scratch, a second launch) and not (cols16, min)
    Case("sum_axis0_wide", "x: f32[1001, 777]", "sum(x, dim=0)", lambda I, P: I["x"].sum(0), RED),
    # whole 16-byte vectors of columns (8 bf16, 4 f32): the GPU's vector form, with chunks (the bias gradients'
    # bf16), a last block of vectors part full and rows off its stride (f32 [777, 1000]: 250 vectors)
    Case("sum_axis0_bf16_vec", "x: bf16[2048, 768]", "cast(sum(x, dim=0), f32)", lambda I, P: I["x"].float().sum(0), LOW),
    Case("sum_axis0_vec_tail", "x: f32[777, 1000]", "sum(x, dim=0)", lambda I, P: I["x"].sum(0), RED),
    Case("sum_axis1_cols16", "x: f32[3, 333, 1500]", "sum(x, dim=1)", lambda I, P: I["x"].sum(1), RED),
    Case("sum_i32_axis0_long", "x: i32[203, 33]", "sum(x, dim=0)", lambda I, P: I["x"].sum(0), EXACT, {"x": (-50, 50)}),
    Case("min_axis0_long", "x: f32[129, 16]", "min(x, dim=0)", lambda I, P: I["x"].amin(0), EXACT, targets=I27),
    Case("mean_axis0_chunks", "x: f32[700, 40]", "mean(x, dim=0)", lambda I, P: I["x"].mean(0), RED),
    Case("max_axis1_chunks", "x: f32[3, 500, 64]", "max(x, dim=1)", lambda I, P: I["x"].amax(1), EXACT),
    # few long rows cut into chunks, one block each, then combined (the GPU targets; FP8's amax over a tensor)
    Case("max_all_chunks", "x: f32[300, 400]", "max(abs(x))", lambda I, P: I["x"].abs().amax(), EXACT),
    Case("amax_cols", "x: f32[700, 40]", "max(abs(x), dim=0)", lambda I, P: I["x"].abs().amax(0), EXACT),
    Case("amax_rows_bf16", "x: bf16[6, 1000]", "cast(max(abs(x), dim=1), f32)", lambda I, P: I["x"].abs().amax(1).float(), EXACT),
    Case("sum_rows_chunks", "x: f32[3, 70001]", "sum(x, dim=1)", lambda I, P: I["x"].sum(1), RED),
    Case("min_bf16_chunks", "x: bf16[2, 50000]", "cast(min(x, dim=1), f32)", lambda I, P: I["x"].amin(1).float(), EXACT, targets=I27),
    Case("sum_i32_chunks", "x: i32[40000]", "sum(x)", lambda I, P: I["x"].sum(), EXACT, {"x": (-50, 50)}),
    Case("softmax_last", "x: f32[6, 1000]", "softmax(x, dim=-1)", lambda I, P: torch.softmax(I["x"], -1), RED,
         {"x": (-10, 10)}),
    Case("softmax_short_rows", "x: f32[50, 7]", "softmax(x)", lambda I, P: torch.softmax(I["x"], -1), RED,
         {"x": (-10, 10)}),
    Case("softmax_axis1", "x: f32[4, 37, 53]", "softmax(x, dim=1)", lambda I, P: torch.softmax(I["x"], 1), RED,
         {"x": (-10, 10)}),
    Case("softmax_bf16", "x: f32[6, 200]", "cast(softmax(cast(x, bf16)), f32)",
         lambda I, P: bf16(torch.softmax(bf16(I["x"]), -1)), LOW, {"x": (-5, 5)}),
    # layout: bit-exact
    Case("transpose_0_2", "x: f32[4, 37, 53]", "transpose(x, 0, 2)", lambda I, P: I["x"].transpose(0, 2), EXACT),
    Case("transpose_heads", "x: f32[2, 64, 4, 32]", "transpose(x, 1, 2)", lambda I, P: I["x"].transpose(1, 2), EXACT),
    Case("transpose_last2", "x: f32[3, 37, 53]", "transpose(x, -1, -2)", lambda I, P: I["x"].transpose(-1, -2),
         EXACT),
    Case("transpose_2d_big", "x: f32[300, 170]", "transpose(x, 0, 1)", lambda I, P: I["x"].t(), EXACT),
    # 1-byte elements (FP8's codes move so): 64 x 64 tiles of words; ragged edges, a batch
    Case("transpose_bool_words", "x: f32[3, 132, 200]", "cast(transpose(x > 0.0, 1, 2), f32)",
         lambda I, P: (I["x"] > 0).transpose(1, 2).float(), EXACT),
    Case("transpose_bf16", "x: bf16[3, 17, 20]", "cast(transpose(x, 0, 2), f32)",
         lambda I, P: I["x"].transpose(0, 2), EXACT),
    Case("slice_last", "x: f32[2, 64, 384]", "slice(x, 2, 128, 256)", lambda I, P: I["x"][:, :, 128:256], EXACT),
    Case("slice_first", "x: f32[4, 37, 53]", "slice(x, 0, 1, 3)", lambda I, P: I["x"][1:3], EXACT),
    Case("slice_negative", "x: f32[4, 37, 53]", "slice(x, -1, 5, -3)", lambda I, P: I["x"][..., 5:-3], EXACT),
    Case("slice_big_row", "x: f32[2, 40000]", "slice(x, 1, 3, 39000)", lambda I, P: I["x"][:, 3:39000], EXACT),
    Case("concat_mid", "a: f32[2, 3, 5], b: f32[2, 7, 5], c: f32[2, 1, 5]", "concat([a, b, c], dim=1)",
         lambda I, P: torch.cat([I["a"], I["b"], I["c"]], 1), EXACT),
    Case("concat_first", "a: f32[3, 5], b: f32[4, 5]", "concat([a, b])", lambda I, P: torch.cat([I["a"], I["b"]], 0),
         EXACT),
    Case("concat_last_i32", "a: i32[3, 5], b: i32[3, 2]", "concat([a, b], dim=-1)",
         lambda I, P: torch.cat([I["a"], I["b"]], -1), EXACT),
    Case("reshape_transpose", "x: f32[2, 64, 128]", "transpose(reshape(x, [2, 64, 4, 32]), 1, 2) * 1.0",
         lambda I, P: I["x"].reshape(2, 64, 4, 32).transpose(1, 2), EXACT),
    # matmul and linear: sizes that are not multiples of the tiles
    Case("matmul_37x53x29", "a: f32[37, 53], b: f32[53, 29]", "a @ b", lambda I, P: I["a"] @ I["b"], RED),
    Case("matmul_1x1x1", "a: f32[1, 1], b: f32[1, 1]", "a @ b", lambda I, P: I["a"] @ I["b"], RED),
    Case("matmul_64", "a: f32[64, 64], b: f32[64, 64]", "a @ b", lambda I, P: I["a"] @ I["b"], RED),
    Case("matmul_k_blocks", "a: f32[130, 600], b: f32[600, 97]", "a @ b", lambda I, P: I["a"] @ I["b"], RED),
    Case("matmul_batch_bcast", "a: f32[3, 1, 37, 53], b: f32[4, 53, 29]", "a @ b", lambda I, P: I["a"] @ I["b"], RED),
    Case("matmul_batch_2d_lhs", "a: f32[37, 20], b: f32[5, 20, 45]", "a @ b", lambda I, P: I["a"] @ I["b"], RED),
    Case("matmul_bf16", "a: f32[37, 53], b: f32[53, 29]", "cast(cast(a, bf16) @ cast(b, bf16), f32)",
         lambda I, P: bf16(bf16(I["a"]) @ bf16(I["b"])), LOW),
    Case("matmul_f16_k_blocks", "a: f16[40, 300], b: f16[300, 50]", "cast(a @ b, f32)",
         lambda I, P: f16(I["a"] @ I["b"]), LOW),
    Case("linear_37x53x29", "x: f32[2, 37, 53]", "lin(x)", lambda I, P: I["x"] @ P["lin.weight"].T, RED,
         members="lin = Linear(53, 29, bias=false)"),
    # at most 4 rows: the CPU's GEMV (a decode step's linear); k and n off the vectors and row groups
    Case("linear_gemv_1row", "x: f32[1, 1, 53]", "lin(x)", lambda I, P: I["x"] @ P["lin.weight"].T, RED,
         members="lin = Linear(53, 29, bias=false)"),
    Case("linear_gemv_bf16", "x: bf16[3, 64]", "cast(lin(x), f32)", lambda I, P: bf16(I["x"] @ P["lin.weight"].T), LOW,
         members="lin = Linear(64, 130, bias=false, dtype=bf16)"),
    # four rows, an odd k (no word pairs) and a bias: the spirv GEMV with its epilogue, 16-bit stores alone
    Case("linear_gemv_bf16_odd_k_bias", "x: bf16[2, 2, 45]", "cast(lin(x), f32)",
         lambda I, P: bf16(F.linear(I["x"], P["lin.weight"], P["lin.bias"])), LOW,
         members="lin = Linear(45, 67, dtype=bf16)"),
    # one row, k past the 16-byte vectors of a warp's pass (2056 = 8 x 256 + 8: one lane's tail) with
    # SiLU in the epilogue; f32 in vectors of four
    Case("linear_gemv_bf16_k2056_silu", "x: bf16[1, 2056]", "cast(silu(lin(x)), f32)",
         lambda I, P: bf16(F.silu(bf16(I["x"] @ P["lin.weight"].T))), LOW,
         members="lin = Linear(2056, 40, bias=false, dtype=bf16)"),
    Case("linear_gemv_f32_k516", "x: f32[2, 516]", "lin(x)", lambda I, P: I["x"] @ P["lin.weight"].T, RED,
         members="lin = Linear(516, 33, bias=false)"),
    # two rows and a bias, k = 4100 f32 (16 KiB a row): CUDA's GEMV splits each row over 8 warps of 640
    # elements, the seventh with a one-lane tail and the eighth past the row's end
    Case("linear_gemv_f32_k4100_bias", "x: f32[2, 4100]", "lin(x)",
         lambda I, P: F.linear(I["x"], P["lin.weight"], P["lin.bias"]), RED, members="lin = Linear(4100, 20)"),
    # an rmsnorm read only by a linear of at most 4 rows: on CUDA the GEMV's prologue (passes/fuse.c,
    # gemv_prologue_rows) normalises x as it reads it.  k odd: scalar loads, the norm's warp a row
    Case("rmsnorm_gemv_prologue_f32", "x: f32[1, 1, 53]", "lin(norm(x))",
         lambda I, P: F.linear(rmsnorm_ref(I["x"], P["norm.weight"], FEPS), P["lin.weight"], P["lin.bias"]), RED,
         members="norm = RMSNorm(53)\n    lin = Linear(53, 29)"),
    # bf16, k = 2048: the norm's block of 256 threads a row (each warp plays all of them); two rows, and
    # a bias, SiLU and a residual add in the epilogue
    Case("rmsnorm_gemv_prologue_bf16_k2048", "x: bf16[2, 2048], r: bf16[2, 96]", "cast(silu(lin(norm(x))) + r, f32)",
         lambda I, P: bf16(bf16(F.silu(bf16(bf16(bf16(rmsnorm_ref(I["x"], P["norm.weight"], BEPS)) @ P["lin.weight"].T)
                                            + P["lin.bias"]))) + I["r"]), LOW,
         members="norm = RMSNorm(2048, dtype=bf16)\n    lin = Linear(2048, 96, dtype=bf16)"),
    # four rows, a norm without a weight, k = 300 f32 (vectors of four, 75 of them: a warp a row)
    Case("rmsnorm_gemv_prologue_plain", "x: f32[4, 300]", "lin(norm(x))",
         lambda I, P: rmsnorm_ref(I["x"], 1.0, FEPS) @ P["lin.weight"].T, RED,
         members="norm = RMSNorm(300, elementwise_affine=false)\n    lin = Linear(300, 50, bias=false)"),
    Case("linear_bias", "x: f32[37, 53]", "lin(x)", lambda I, P: F.linear(I["x"], P["lin.weight"], P["lin.bias"]),
         RED, members="lin = Linear(53, 29)"),
    Case("linear_k_blocks", "x: f32[100, 600]", "lin(x)", lambda I, P: I["x"] @ P["lin.weight"].T, RED,
         members="lin = Linear(600, 70, bias=false)"),
    Case("linear_bf16", "x: bf16[33, 64]", "cast(lin(x), f32)", lambda I, P: bf16(I["x"] @ P["lin.weight"].T), LOW,
         members="lin = Linear(64, 48, bias=false, dtype=bf16)"),
    # big enough for the GPU's wgmma path (>= 132 tiles of 128 x 128, K % 64 == 0)
    Case("matmul_bf16_wgmma", "a: bf16[2048, 256], b: bf16[256, 1152]", "cast(a @ b, f32)",
         lambda I, P: bf16(I["a"] @ I["b"]), LOW),
    # one wave of 128 x 256 tiles (128 of them): the cooperative kernel, a tile a block
    Case("matmul_bf16_one_wave", "a: bf16[1024, 512], b: bf16[512, 4096]", "cast(a @ b, f32)",
         lambda I, P: bf16(I["a"] @ I["b"]), LOW, targets=("cuda",)),
    Case("linear_bf16_wgmma", "x: bf16[2048, 256]", "cast(lin(x), f32)", lambda I, P: bf16(I["x"] @ P["lin.weight"].T),
         LOW, members="lin = Linear(256, 1152, bias=false, dtype=bf16)"),
    # groups the GPU fuse pass makes one kernel of (passes/fuse.c): elementwise chains (bf16 values rounded
    # where the unfused ops store them) and GEMM epilogues (bias, activation, residual, cast)
    Case("fused_ew_chain", "a: f32[4, 37, 53], b: f32[53], c: f32[37, 1]", "exp(a * b) - c / 2.0",
         lambda I, P: torch.exp(I["a"] * I["b"]) - I["c"] / 2.0, EW, {"a": (-1, 1), "b": (-1, 1)}),
    Case("fused_bf16_chain", "x: bf16[5, 77], y: bf16[77]", "cast(silu(x) * y + x, f32)",
         lambda I, P: bf16(bf16(bf16(F.silu(I["x"])) * I["y"]) + I["x"]), LOW, {"x": (-6, 6)}),
    Case("fused_linear_bias_silu_residual", "x: bf16[64, 96], r: bf16[64, 80]", "cast(silu(lin(x)) + r, f32)",
         lambda I, P: bf16(bf16(F.silu(bf16(bf16(I["x"] @ P["lin.weight"].T) + P["lin.bias"]))) + I["r"]), LOW,
         members="lin = Linear(96, 80, dtype=bf16)"),
    Case("fused_linear_odd_n_gelu", "x: bf16[33, 64]", "cast(gelu(lin(x)), f32)",
         lambda I, P: bf16(F.gelu(bf16(bf16(I["x"] @ P["lin.weight"].T) + P["lin.bias"]))), LOW,
         members="lin = Linear(64, 47, dtype=bf16)"),
    Case("fused_matmul_batch_relu_mul", "a: f32[3, 1, 37, 53], b: f32[4, 53, 29], d: f32[3, 4, 37, 29]",
         "relu(a @ b) * d", lambda I, P: torch.relu(I["a"] @ I["b"]) * I["d"], RED),
    Case("fused_linear_bf16_wgmma_gelu", "x: bf16[2048, 256]", "cast(gelu(lin(x)), f32)",
         lambda I, P: bf16(F.gelu(bf16(bf16(I["x"] @ P["lin.weight"].T) + P["lin.bias"]))), LOW,
         members="lin = Linear(256, 1152, dtype=bf16)"),
    # the FFN's linear then SiLU at the wgmma kernel's size (fused on Metal; on CUDA two kernels: passes/fuse.c says why)
    Case("fused_linear_bf16_wgmma_silu", "x: bf16[2048, 256]", "cast(silu(lin(x)), f32)",
         lambda I, P: bf16(F.silu(bf16(I["x"] @ P["lin.weight"].T))), LOW,
         members="lin = Linear(256, 1152, bias=false, dtype=bf16)"),
    # the wgmma GEMM's 128 x 256 tiles (>= 2 waves of them), its epilogue through shared memory: bias and residual
    Case("fused_linear_bf16_wgmma256_bias_residual", "x: bf16[8192, 64], r: bf16[8192, 1536]", "cast(lin(x) + r, f32)",
         lambda I, P: bf16(bf16(bf16(I["x"] @ P["lin.weight"].T) + P["lin.bias"]) + I["r"]), LOW,
         members="lin = Linear(64, 1536, dtype=bf16)"),
    # the wgmma GEMM with partial tiles at every edge (M % 128, N % 128, K % 64 not 0; rows 16-byte aligned)
    Case("fused_linear_bf16_wgmma_edges", "x: bf16[2040, 200]", "cast(lin(x), f32)",
         lambda I, P: bf16(bf16(I["x"] @ P["lin.weight"].T) + P["lin.bias"]), LOW,
         members="lin = Linear(200, 1160, dtype=bf16)"),
    Case("matmul_bf16_wgmma_edges", "a: bf16[2040, 200], b: bf16[200, 1160]", "cast(a @ b, f32)",
         lambda I, P: bf16(I["a"] @ I["b"]), LOW),
    # rows only 4-byte aligned (K, N even, not multiples of 8): the wgmma GEMM copies them in pairs,
    # and an odd N stores element by element
    Case("matmul_bf16_wgmma_rows4", "a: bf16[2040, 202], b: bf16[202, 1162]", "cast(a @ b, f32)",
         lambda I, P: bf16(I["a"] @ I["b"]), LOW),
    Case("fused_linear_bf16_wgmma_odd_n", "x: bf16[2040, 202]", "cast(lin(x), f32)",
         lambda I, P: bf16(bf16(I["x"] @ P["lin.weight"].T) + P["lin.bias"]), LOW,
         members="lin = Linear(202, 1161, dtype=bf16)"),
    # the rest
    Case("embedding", "idx: i32[3, 17]", "emb(idx)", lambda I, P: P["emb.weight"][I["idx"]], EXACT,
         {"idx": (0, 100)}, members="emb = Embedding(100, 24)"),
    Case("rmsnorm", "x: f32[4, 37, 53]", "norm(x)", lambda I, P: rmsnorm_ref(I["x"], P["norm.weight"], FEPS), RED,
         members="norm = RMSNorm(53)"),
    Case("rmsnorm_eps", "x: f32[5, 300]", "norm(x)", lambda I, P: rmsnorm_ref(I["x"], P["norm.weight"], 1e-5), RED,
         {"x": (-0.01, 0.01)}, members="norm = RMSNorm(300, eps=1e-5)"),
    Case("layernorm", "x: f32[4, 37, 53]", "norm(x)",
         lambda I, P: F.layer_norm(I["x"], (53,), P["norm.weight"], P["norm.bias"]), RED, {"x": (3, 5)},
         members="norm = LayerNorm(53)"),
    Case("layernorm_plain", "x: f32[6, 100]", "norm(x)", lambda I, P: F.layer_norm(I["x"], (100,), eps=1e-3), RED,
         members="norm = LayerNorm(100, eps=1e-3, elementwise_affine=false)"),
    Case("attention", "q: f32[2, 3, 37, 24], k: f32[2, 3, 37, 24], v: f32[2, 3, 37, 24]", "attention(q, k, v)",
         lambda I, P: attn_ref(I["q"], I["k"], I["v"], 24 ** -0.5, False), RED),
    Case("attention_causal", "q: f32[2, 3, 70, 16], k: f32[2, 3, 70, 16], v: f32[2, 3, 70, 16]",
         "attention(q, k, v, causal=true)", lambda I, P: attn_ref(I["q"], I["k"], I["v"], 0.25, True), RED),
    Case("attention_cross_dv", "q: f32[1, 2, 20, 32], k: f32[1, 2, 45, 32], v: f32[1, 2, 45, 40]",
         "attention(q, k, v, scale=0.3)", lambda I, P: attn_ref(I["q"], I["k"], I["v"], 0.3, False), RED),
    Case("attention_causal_rect", "q: f32[1, 2, 50, 32], k: f32[1, 2, 45, 32], v: f32[1, 2, 45, 32]",
         "attention(q, k, v, causal=true)", lambda I, P: attn_ref(I["q"], I["k"], I["v"], 32 ** -0.5, True), RED),
    Case("attention_causal_long", "q: f32[1, 2, 200, 64], k: f32[1, 2, 200, 64], v: f32[1, 2, 200, 64]",
         "attention(q, k, v, causal=true)", lambda I, P: attn_ref(I["q"], I["k"], I["v"], 0.125, True), RED,
         {"q": (-3, 3), "k": (-3, 3)}),
    Case("attention_bf16", "q: bf16[1, 2, 40, 32], k: bf16[1, 2, 40, 32], v: bf16[1, 2, 40, 32]",
         "cast(attention(q, k, v), f32)", lambda I, P: bf16(attn_ref(I["q"], I["k"], I["v"], 32 ** -0.5, False)),
         LOW),
    # 16-bit attention at head dims up to 128, lengths off the 64-row and 64-key blocks, cross and causal,
    # and scores large enough that the running max moves (the tensor-core and cooperative-matrix kernels)
    Case("attention_f16_d128_causal", "q: f16[1, 2, 150, 128], k: f16[1, 2, 150, 128], v: f16[1, 2, 150, 128]",
         "cast(attention(q, k, v, causal=true), f32)", lambda I, P: f16(attn_ref(I["q"], I["k"], I["v"], 128 ** -0.5, True)), LOW,
         {"q": (-3, 3), "k": (-3, 3)}),
    Case("attention_bf16_d128", "q: bf16[2, 1, 130, 128], k: bf16[2, 1, 130, 128], v: bf16[2, 1, 130, 128]",
         "cast(attention(q, k, v), f32)", lambda I, P: bf16(attn_ref(I["q"], I["k"], I["v"], 128 ** -0.5, False)), LOW),
    Case("attention_bf16_cross", "q: bf16[1, 2, 20, 64], k: bf16[1, 2, 77, 64], v: bf16[1, 2, 77, 64]",
         "cast(attention(q, k, v, scale=0.3), f32)", lambda I, P: bf16(attn_ref(I["q"], I["k"], I["v"], 0.3, False)), LOW),
    Case("attention_f16_causal_rect", "q: f16[1, 2, 90, 16], k: f16[1, 2, 45, 16], v: f16[1, 2, 45, 16]",
         "cast(attention(q, k, v, causal=true), f32)", lambda I, P: f16(attn_ref(I["q"], I["k"], I["v"], 0.25, True)), LOW),
    Case("attention_bf16_d64_long", "q: bf16[1, 2, 200, 64], k: bf16[1, 2, 200, 64], v: bf16[1, 2, 200, 64]",
         "cast(attention(q, k, v, causal=true), f32)", lambda I, P: bf16(attn_ref(I["q"], I["k"], I["v"], 0.125, True)), LOW,
         {"q": (-3, 3), "k": (-3, 3)}),
    # head dim 128 not causal runs the wgmma forward on sm_90a: cross lengths off its 128-row and 128-key blocks,
    # scores large enough that the running max moves, and the packed MultiheadAttention below
    Case("attention_f16_d128_cross", "q: f16[1, 2, 100, 128], k: f16[1, 2, 300, 128], v: f16[1, 2, 300, 128]",
         "cast(attention(q, k, v), f32)", lambda I, P: f16(attn_ref(I["q"], I["k"], I["v"], 128 ** -0.5, False)), LOW,
         {"q": (-3, 3), "k": (-3, 3)}),
    Case("mha_bf16_d128", "x: bf16[2, 200, 256]", "cast(attn(x, x, x), f32)", mha_ref(False), LOW,
         members="attn = MultiheadAttention(256, 2, dtype=bf16)"),
    # head dim 64 on the same wgmma forward: causal and cross, lengths off its blocks, f16 and bf16, and packed
    Case("attention_f16_d64_causal", "q: f16[2, 2, 333, 64], k: f16[2, 2, 333, 64], v: f16[2, 2, 333, 64]",
         "cast(attention(q, k, v, causal=true), f32)", lambda I, P: f16(attn_ref(I["q"], I["k"], I["v"], 0.125, True)), LOW,
         {"q": (-3, 3), "k": (-3, 3)}),
    Case("attention_bf16_d64_cross", "q: bf16[1, 3, 260, 64], k: bf16[1, 3, 129, 64], v: bf16[1, 3, 129, 64]",
         "cast(attention(q, k, v), f32)", lambda I, P: bf16(attn_ref(I["q"], I["k"], I["v"], 0.125, False)), LOW,
         {"q": (-3, 3), "k": (-3, 3)}),
    Case("mha_bf16_d64_causal", "x: bf16[2, 300, 128]", "cast(attn(x, x, x), f32)", mha_ref(True), LOW,
         members="attn = MultiheadAttention(128, 2, causal=true, dtype=bf16)"),
    # more 128-row work items than an H200 has multiprocessors: the persistent wgmma forward's blocks take several
    # each, one key/value ring over all of them (causal: a different number of key blocks an item)
    Case("attention_bf16_d128_items", "q: bf16[4, 12, 390, 128], k: bf16[4, 12, 390, 128], v: bf16[4, 12, 390, 128]",
         "cast(attention(q, k, v), f32)", lambda I, P: bf16(attn_ref(I["q"], I["k"], I["v"], 128 ** -0.5, False)), LOW,
         {"q": (-3, 3), "k": (-3, 3)}, targets=("cuda",)),
    Case("attention_f16_d64_causal_items", "q: f16[4, 8, 600, 64], k: f16[4, 8, 600, 64], v: f16[4, 8, 600, 64]",
         "cast(attention(q, k, v, causal=true), f32)", lambda I, P: f16(attn_ref(I["q"], I["k"], I["v"], 0.125, True)), LOW,
         {"q": (-3, 3), "k": (-3, 3)}, targets=("cuda",)),
    Case("mha_bf16_d64_causal_items", "x: bf16[8, 520, 256]", "cast(attn(x, x, x), f32)", mha_ref(True, 4), LOW,
         members="attn = MultiheadAttention(256, 4, causal=true, dtype=bf16)", targets=("cuda",)),
    # not causal with an even number of 128-row query tiles a head (as a forward whose blocks paired up a head's
    # tiles would take them, tried in e8aaf76): keys off the 128-key block (cross), and packed with more pairs of
    # items than an H200 has pairs of multiprocessors
    Case("attention_f16_d64_cross_pairs", "q: f16[1, 3, 256, 64], k: f16[1, 3, 77, 64], v: f16[1, 3, 77, 64]",
         "cast(attention(q, k, v), f32)", lambda I, P: f16(attn_ref(I["q"], I["k"], I["v"], 0.125, False)), LOW,
         {"q": (-3, 3), "k": (-3, 3)}),
    Case("mha_bf16_d128_pairs_items", "x: bf16[8, 1000, 512]", "cast(attn(x, x, x), f32)", mha_ref(False, 4), LOW,
         members="attn = MultiheadAttention(512, 4, dtype=bf16)", targets=("cuda",)),
    # MultiheadAttention in bf16: on CUDA the attnsave pass reads q, k, v from the in-projection as they lie
    Case("mha_bf16", "x: bf16[2, 40, 64]", "cast(attn(x, x, x), f32)", mha_ref(False), LOW,
         members="attn = MultiheadAttention(64, 2, dtype=bf16)"),
    Case("mha_bf16_causal", "x: bf16[2, 40, 64]", "cast(attn(x, x, x), f32)", mha_ref(True), LOW,
         members="attn = MultiheadAttention(64, 2, causal=true, dtype=bf16)"),
    # f32 on CUDA's tensor cores (3xTF32, the default --f32-matmul): within 1e-5 of float64 at K up to
    # 8192, where one TF32 product (about 1e-4 here) would fail; shapes off every tile and 16-byte row
    Case("matmul_f32_k8192", "a: f32[192, 8192], b: f32[8192, 136]", "a @ b", lambda I, P: I["a"] @ I["b"], EW,
         targets=("cpu", "cuda")),
    Case("matmul_f32_odd", "a: f32[333, 1001], b: f32[1001, 257]", "a @ b", lambda I, P: I["a"] @ I["b"], EW,
         targets=("cpu", "cuda")),
    Case("linear_f32_k4100", "x: f32[130, 4100]", "lin(x)",
         lambda I, P: F.linear(I["x"], P["lin.weight"], P["lin.bias"]), EW, members="lin = Linear(4100, 333)",
         targets=("cpu", "cuda")),
    Case("fused_linear_f32_gelu_residual", "x: f32[300, 2048], r: f32[300, 520]", "gelu(lin(x)) + r",
         lambda I, P: F.gelu(F.linear(I["x"], P["lin.weight"], P["lin.bias"])) + I["r"], EW,
         members="lin = Linear(2048, 520)", targets=("cpu", "cuda")),
    # a wave of 128 x 128 tiles: the wgmma kernel (sm_90a), every layout, edges in M, N and K, odd rows
    Case("matmul_f32_wg_k8192", "a: f32[1536, 8192], b: f32[8192, 1544]", "a @ b", lambda I, P: I["a"] @ I["b"], EW,
         targets=("cuda",)),
    Case("matmul_f32_wg_odd", "a: f32[1600, 700], b: f32[700, 1601]", "a @ b", lambda I, P: I["a"] @ I["b"], EW,
         targets=("cuda",)),
    Case("linear_f32_wg_odd", "x: f32[2000, 1003]", "lin(x)",
         lambda I, P: F.linear(I["x"], P["lin.weight"], P["lin.bias"]), EW, members="lin = Linear(1003, 1500)",
         targets=("cuda",)),
    Case("attention_f32_d64_causal", "q: f32[2, 2, 333, 64], k: f32[2, 2, 333, 64], v: f32[2, 2, 333, 64]",
         "attention(q, k, v, causal=true)", lambda I, P: attn_ref(I["q"], I["k"], I["v"], 0.125, True), EW,
         {"q": (-3, 3), "k": (-3, 3)}, targets=("cpu", "cuda")),
    Case("attention_f32_d128_cross", "q: f32[1, 2, 200, 128], k: f32[1, 2, 150, 128], v: f32[1, 2, 150, 128]",
         "attention(q, k, v)", lambda I, P: attn_ref(I["q"], I["k"], I["v"], 128 ** -0.5, False), EW,
         {"q": (-3, 3), "k": (-3, 3)}, targets=("cpu", "cuda")),
    Case("attention_f32_d256", "q: f32[1, 1, 100, 256], k: f32[1, 1, 100, 256], v: f32[1, 1, 100, 256]",
         "attention(q, k, v, causal=true)", lambda I, P: attn_ref(I["q"], I["k"], I["v"], 256 ** -0.5, True), EW,
         targets=("cpu", "cuda")),
    # head dims the tensor-core kernels do not take: on CUDA the attnpad pass pads them with zero columns
    # (36 and 20 -> 40 here; 16-bit 200 -> 208); past 256 the generic kernel (a warp per row) stays
    Case("attention_f32_d36_cross_dv", "q: f32[1, 2, 50, 36], k: f32[1, 2, 70, 36], v: f32[1, 2, 70, 20]",
         "attention(q, k, v)", lambda I, P: attn_ref(I["q"], I["k"], I["v"], 36 ** -0.5, False), EW,
         targets=("cpu", "cuda")),
    Case("attention_bf16_d200", "q: bf16[1, 1, 40, 200], k: bf16[1, 1, 40, 200], v: bf16[1, 1, 40, 200]",
         "cast(attention(q, k, v, causal=true), f32)", lambda I, P: bf16(attn_ref(I["q"], I["k"], I["v"], 200 ** -0.5, True)),
         LOW, targets=("cpu", "cuda")),
    # head dims 129 to 256 on the tensor cores: one row tile a warp (16-bit), lengths off every tile
    Case("attention_bf16_d256", "q: bf16[2, 2, 300, 256], k: bf16[2, 2, 300, 256], v: bf16[2, 2, 300, 256]",
         "cast(attention(q, k, v), f32)", lambda I, P: bf16(attn_ref(I["q"], I["k"], I["v"], 256 ** -0.5, False)), LOW,
         {"q": (-3, 3), "k": (-3, 3)}, targets=("cpu", "cuda")),
    Case("attention_f16_d192_causal", "q: f16[1, 2, 333, 192], k: f16[1, 2, 333, 192], v: f16[1, 2, 333, 192]",
         "cast(attention(q, k, v, causal=true), f32)", lambda I, P: f16(attn_ref(I["q"], I["k"], I["v"], 192 ** -0.5, True)),
         LOW, targets=("cpu", "cuda")),
    Case("mha_f32", "x: f32[2, 100, 128]", "attn(x, x, x)", mha_ref(False, rnd=lambda t: t), EW,
         members="attn = MultiheadAttention(128, 2)", targets=("cpu", "cuda")),
    Case("mha_f32_causal_d40", "x: f32[2, 77, 120]", "attn(x, x, x)", mha_ref(True, 3, rnd=lambda t: t), EW,
         members="attn = MultiheadAttention(120, 3, causal=true)", targets=("cpu", "cuda")),
    Case("cross_entropy", "x: f32[2, 37, 100], t: i32[2, 37]", "cross_entropy(x, t)",
         lambda I, P: F.cross_entropy(I["x"].reshape(-1, 100), I["t"].reshape(-1)), RED, {"t": (0, 100), "x": (-5, 5)}),
    Case("cross_entropy_i64", "x: f32[10, 7], t: i64[10]", "cross_entropy(x, t)",
         lambda I, P: F.cross_entropy(I["x"], I["t"]), RED, {"t": (0, 7)}),
]


# ---- the gradient ops, against torch.autograd ----

class GradCase(Case):
    """One op built by hand (mlc_opcheck --op).  operands: "name: type" for an
    input, or ("const", value, "type"); attrs go to --attr, shape to --shape."""

    def __init__(self, name, op, operands, ref, tol, ranges=None, attrs=None, shape=None, same_bits=False,
                 targets=("cpu", "cuda", "metal", "spirv")):
        super().__init__(name, None, None, ref, tol, ranges, targets=targets)
        self.op, self.operands, self.attrs, self.shape = op, operands, attrs or {}, shape
        self.same_bits = same_bits

    def model(self, d):
        a = ["--op", self.op]
        for o in self.operands:
            if isinstance(o, tuple):
                a += ["--const", "%r:%s" % (o[1], o[2])]
            else:
                n, t = o.split(":", 1)
                a += ["--in", "%s:%s" % (n.strip(), t.replace(" ", ""))]
        for k, v in self.attrs.items():
            a += ["--attr", "%s=%r" % (k, v)]
        if self.shape:
            a += ["--shape", ",".join(str(x) for x in self.shape)]
        return a


def grad_of(f, g, xs, wrt):
    """torch.autograd.grad of f(*xs) at output gradient g, for xs[i], i in wrt."""
    xs = [x.detach().clone().requires_grad_(i in wrt) for i, x in enumerate(xs)]
    return torch.autograd.grad(f(*xs), [xs[i] for i in wrt], g)


def act_grad(fn, rnd=lambda t: t):
    return lambda I, P: rnd(grad_of(fn, I["g"], [I["x"]], [0])[0])


def slice_grad_ref(shape, axis, start, end):
    return lambda I, P: grad_of(lambda x: x.narrow(axis, start, end - start), I["g"],
                                [torch.zeros(shape, dtype=torch.float64)], [0])[0]


def embedding_grad_ref(V, D, rnd=lambda t: t):
    """Indices outside [0, V) contribute nothing (the forward gives them zeros)."""
    def ref(I, P):
        idx = I["idx"]
        ok = ((idx >= 0) & (idx < V)).unsqueeze(-1)
        return rnd(grad_of(lambda w: F.embedding(idx.clamp(0, V - 1), w) * ok, I["g"],
                           [torch.zeros(V, D, dtype=torch.float64)], [0])[0])
    return ref


def norm_grad_ref(kind, eps, wrt, has_w=False, rnd=lambda t: t):
    """d/dx (wrt 0) or d/dw (wrt 1) of rmsnorm or layernorm; w = 1 when the op has none."""
    def ref(I, P):
        x = I["x"]
        D = x.shape[-1]
        w = I["w"] if has_w else torch.ones(D, dtype=torch.float64)
        f = (lambda x, w: rmsnorm_ref(x, w, eps)) if kind == "rms" else (lambda x, w: F.layer_norm(x, (D,), w, None, eps))
        return rnd(grad_of(f, I["g"], [x, w], [wrt])[0])
    return ref


def attention_grad_ref(scale, causal, rnd=lambda t: t):
    return lambda I, P: rnd(torch.stack(grad_of(lambda q, k, v: attn_ref(q, k, v, scale, causal), I["g"],
                                                [I["q"], I["k"], I["v"]], [0, 1, 2])))


KV = ("cpu", "cuda", "metal", "spirv")  # the targets with attention_kv


def kv_ops(dt, b, h, t, d, ctx):
    """attention_kv's operands: q, k, v [b, h, t, d], the caches [b, h, ctx, d], pos."""
    return [f"{n}: {dt}[{b}, {h}, {t}, {d}]" for n in "qkv"] + [f"{n}: {dt}[{b}, {h}, {ctx}, {d}]" for n in ("kc", "vc")] + \
           ["pos: i32[]"]


def attention_kv_ref(scale, rnd=lambda t: t):
    """k, v into cache rows [pos, pos + t) (pos clamped to [0, ctx - t], as the kernels do), then query i
    attends over rows [0, pos + i]: the rows before pos are the caches' (random here, as earlier tokens')."""
    def ref(I, P):
        q, kc, vc = I["q"], I["kc"].clone(), I["vc"].clone()
        t, ctx = q.shape[2], kc.shape[2]
        pos = max(0, min(int(I["pos"]), ctx - t))
        kc[:, :, pos:pos + t], vc[:, :, pos:pos + t] = I["k"], I["v"]
        s = (q @ kc.transpose(-1, -2)) * scale
        masked = torch.arange(ctx)[None, :] > pos + torch.arange(t)[:, None]
        return rnd(s.masked_fill(masked, float("-inf")).softmax(-1) @ vc)
    return ref


def ce_grad_ref(rnd=lambda t: t):
    """Targets outside [0, C) are skipped and left out of the mean, as the
    forward kernel does: PyTorch's ignore_index."""
    def ref(I, P):
        x, t = I["x"], I["t"]
        C = x.shape[-1]
        t = torch.where((t >= 0) & (t < C), t, torch.full_like(t, -100)).reshape(-1)
        return rnd(grad_of(lambda x: F.cross_entropy(x.reshape(-1, C), t, ignore_index=-100), I["g"], [x], [0])[0])
    return ref


def dropout_ref(p, stream, seed, rnd=lambda t: t):
    """tests/ref/philox.py's mask (checked there against Philox's known-answer
    vectors), x scaled by 1 / (1 - p) in f32 where kept."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ref"))
    from philox import dropout_mask

    def ref(I, P):
        x = I["x"]
        keep = dropout_mask(tuple(x.shape), p, int(I["step"]), stream, seed)
        scale = float(np.float32(1.0 / (1.0 - p)))
        return rnd(torch.where(torch.from_numpy(keep), x * scale, torch.zeros_like(x)))
    return ref


def gather_grad_ref(shape, axis, rnd=lambda t: t):
    """torch.gather's gradient; indices outside the axis contribute nothing
    (the forward gives them 0)."""
    def ref(I, P):
        idx, n = I["idx"], shape[axis]
        ok = (idx >= 0) & (idx < n)
        return rnd(grad_of(lambda x: torch.gather(x, axis, idx.clamp(0, n - 1)) * ok, I["g"],
                           [torch.zeros(shape, dtype=torch.float64)], [0])[0])
    return ref


def attn_ops(dt, shape):
    return ["%s: %s%s" % (n, dt, list(shape)) for n in ("g", "q", "k", "v")]


GRAD_CASES = [
    # matmul_tn: made by the GPU targets' fuse pass only (a[k, m]^T @ b[k, n])
    GradCase("matmul_tn", "matmul_tn", ["a: f32[37, 29]", "b: f32[37, 53]"], lambda I, P: I["a"].T @ I["b"], RED,
             targets=("cuda", "metal", "spirv")),
    GradCase("matmul_tn_bf16", "matmul_tn", ["a: bf16[64, 72]", "b: bf16[64, 40]"],
             lambda I, P: bf16(I["a"].T @ I["b"]), LOW, targets=("cuda", "metal", "spirv")),
    GradCase("matmul_tn_bf16_wgmma", "matmul_tn", ["a: bf16[256, 2048]", "b: bf16[256, 1152]"],
             lambda I, P: bf16(I["a"].T @ I["b"]), LOW, targets=("cuda", "metal", "spirv")),
    GradCase("matmul_tn_bf16_wgmma_edges", "matmul_tn", ["a: bf16[200, 2040]", "b: bf16[200, 1160]"],
             lambda I, P: bf16(I["a"].T @ I["b"]), LOW, targets=("cuda", "metal", "spirv")),
    GradCase("matmul_tn_bf16_wgmma_rows4", "matmul_tn", ["a: bf16[203, 2042]", "b: bf16[203, 1162]"],
             lambda I, P: bf16(I["a"].T @ I["b"]), LOW, targets=("cuda", "metal", "spirv")),
    # broadcast: numpy rules to the node's shape
    GradCase("broadcast_rank_up", "broadcast", ["x: f32[37, 1]"], lambda I, P: I["x"].broadcast_to(4, 37, 53), EXACT,
             shape=[4, 37, 53]),
    GradCase("broadcast_mid_axis", "broadcast", ["x: f32[5, 1, 7]"], lambda I, P: I["x"].broadcast_to(3, 5, 4, 7),
             EXACT, shape=[3, 5, 4, 7]),
    GradCase("broadcast_row", "broadcast", ["x: f32[53]"], lambda I, P: I["x"].broadcast_to(2, 37, 53), EXACT,
             shape=[2, 37, 53]),
    GradCase("broadcast_scalar", "broadcast", ["x: f32[]"], lambda I, P: I["x"].broadcast_to(6, 33), EXACT,
             shape=[6, 33]),
    GradCase("broadcast_const", "broadcast", [("const", 2.5, "f32[]")],
             lambda I, P: torch.full((3, 70), 2.5, dtype=torch.float64), EXACT, shape=[3, 70]),
    GradCase("broadcast_bf16", "broadcast", ["x: bf16[1, 53]"], lambda I, P: I["x"].broadcast_to(4, 37, 53), EXACT,
             shape=[4, 37, 53]),
    GradCase("broadcast_i32", "broadcast", ["x: i32[3, 1]"], lambda I, P: I["x"].broadcast_to(3, 40), EXACT,
             {"x": (-100, 100)}, shape=[3, 40]),
    # activation gradients (g, x); relu at integer x, so that x == 0 occurs
    GradCase("relu_grad", "relu_grad", ["g: f32[3, 1000]", "x: f32[3, 1000]"], act_grad(F.relu), EXACT,
             {"x": (-3, 3, "int")}),
    GradCase("relu_grad_nan", "relu_grad", ["g: f32[]", ("const", float("nan"), "f32[]")],  # NaN x passes g, as torch
             lambda I, P: grad_of(F.relu, I["g"], [torch.tensor(float("nan"), dtype=torch.float64)], [0])[0], EXACT),
    GradCase("relu_grad_bf16", "relu_grad", ["g: bf16[5, 77]", "x: bf16[5, 77]"], act_grad(F.relu), EXACT,
             {"x": (-3, 3, "int")}),
    GradCase("silu_grad", "silu_grad", ["g: f32[3, 1000]", "x: f32[3, 1000]"], act_grad(F.silu), EW, {"x": (-8, 8)}),
    GradCase("gelu_grad", "gelu_grad", ["g: f32[3, 1000]", "x: f32[3, 1000]"], act_grad(F.gelu), EW, {"x": (-5, 5)}),
    GradCase("silu_grad_bf16", "silu_grad", ["g: bf16[5, 333]", "x: bf16[5, 333]"], act_grad(F.silu, bf16), LOW,
             {"x": (-8, 8)}),
    GradCase("gelu_tanh_grad", "gelu_tanh_grad", ["g: f32[3, 1000]", "x: f32[3, 1000]"],
             act_grad(lambda x: F.gelu(x, approximate="tanh")), EW, {"x": (-5, 5)}),
    GradCase("gelu_tanh_grad_bf16", "gelu_tanh_grad", ["g: bf16[5, 333]", "x: bf16[5, 333]"],
             act_grad(lambda x: F.gelu(x, approximate="tanh"), bf16), LOW, {"x": (-5, 5)}),
    GradCase("gelu_grad_f16", "gelu_grad", ["g: f16[5, 333]", "x: f16[5, 333]"], act_grad(F.gelu, f16), LOW,
             {"x": (-5, 5)}),
    # slice_grad: zeros with g at [start, end) on axis
    GradCase("slice_grad_mid", "slice_grad", ["g: f32[4, 20, 53]"], slice_grad_ref((4, 37, 53), 1, 5, 25), EXACT,
             attrs={"axis": 1, "start": 5, "end": 25}, shape=[4, 37, 53]),
    GradCase("slice_grad_last", "slice_grad", ["g: f32[2, 64, 128]"], slice_grad_ref((2, 64, 384), 2, 128, 256),
             EXACT, attrs={"axis": 2, "start": 128, "end": 256}, shape=[2, 64, 384]),
    GradCase("slice_grad_first", "slice_grad", ["g: f32[2, 37, 53]"], slice_grad_ref((4, 37, 53), 0, 1, 3), EXACT,
             attrs={"axis": 0, "start": 1, "end": 3}, shape=[4, 37, 53]),
    GradCase("slice_grad_big_row", "slice_grad", ["g: f32[2, 30000]"], slice_grad_ref((2, 40000), 1, 3000, 33000),
             EXACT, attrs={"axis": 1, "start": 3000, "end": 33000}, shape=[2, 40000]),
    GradCase("slice_grad_bf16", "slice_grad", ["g: bf16[3, 7, 5]"], slice_grad_ref((3, 12, 5), 1, 0, 7), EXACT,
             attrs={"axis": 1, "start": 0, "end": 7}, shape=[3, 12, 5]),
    # embedding_grad: scatter-add with repeated and out-of-range indices
    GradCase("embedding_grad", "embedding_grad", ["g: f32[3, 17, 24]", "idx: i32[3, 17]"],
             embedding_grad_ref(28, 24), RED, {"idx": (-2, 30)}, shape=[28, 24], same_bits=True),
    GradCase("embedding_grad_vocab", "embedding_grad", ["g: f32[2, 300, 40]", "idx: i64[2, 300]"],
             embedding_grad_ref(1000, 40), RED, {"idx": (-5, 1005)}, shape=[1000, 40], same_bits=True),
    GradCase("embedding_grad_bf16", "embedding_grad", ["g: bf16[50, 33]", "idx: i32[50]"],
             embedding_grad_ref(12, 33, bf16), LOW, {"idx": (0, 10)}, shape=[12, 33], same_bits=True),
    # norms: dx with and without a weight, dw summed over rows
    GradCase("rmsnorm_grad_x", "rmsnorm_grad_x", ["g: f32[4, 37, 53]", "x: f32[4, 37, 53]", "w: f32[53]"],
             norm_grad_ref("rms", FEPS, 0, True), RED, attrs={"eps": FEPS}),
    GradCase("rmsnorm_grad_x_plain", "rmsnorm_grad_x", ["g: f32[5, 300]", "x: f32[5, 300]"],
             norm_grad_ref("rms", 1e-5, 0), RED, {"x": (-0.01, 0.01)}, attrs={"eps": 1e-5}),
    GradCase("rmsnorm_grad_w", "rmsnorm_grad_w", ["g: f32[4, 37, 53]", "x: f32[4, 37, 53]"],
             norm_grad_ref("rms", FEPS, 1), RED, attrs={"eps": FEPS}, same_bits=True),
    GradCase("rmsnorm_grad_w_wide", "rmsnorm_grad_w", ["g: f32[200, 300]", "x: f32[200, 300]"],
             norm_grad_ref("rms", 1e-5, 1), RED, attrs={"eps": 1e-5}, same_bits=True),
    GradCase("rmsnorm_grad_x_bf16", "rmsnorm_grad_x", ["g: bf16[6, 64]", "x: bf16[6, 64]", "w: bf16[64]"],
             norm_grad_ref("rms", 1e-5, 0, True, bf16), LOW, attrs={"eps": 1e-5}),
    # with the residual the fuse pass adds in the norm's store (CUDA and Metal: norm_grad_adds): dx rounded, then + r
    GradCase("rmsnorm_grad_x_add_bf16", "rmsnorm_grad_x", ["g: bf16[16, 2048]", "x: bf16[16, 2048]", "w: bf16[2048]",
                                                          "r: bf16[16, 2048]"],
             lambda I, P: bf16(norm_grad_ref("rms", 1e-5, 0, True, bf16)(I, P) + I["r"]), LOW, attrs={"eps": 1e-5},
             targets=("cuda", "metal")),
    GradCase("layernorm_grad_x_add", "layernorm_grad_x", ["g: f32[6, 100]", "x: f32[6, 100]", "w: f32[100]", "r: f32[6, 100]"],
             lambda I, P: norm_grad_ref("layer", 1e-5, 0, True)(I, P) + I["r"], RED, attrs={"eps": 1e-5},
             targets=("cuda", "metal")),
    GradCase("layernorm_grad_x", "layernorm_grad_x", ["g: f32[4, 37, 53]", "x: f32[4, 37, 53]", "w: f32[53]"],
             norm_grad_ref("layer", 1e-5, 0, True), RED, {"x": (3, 5)}, attrs={"eps": 1e-5}),
    GradCase("layernorm_grad_x_plain", "layernorm_grad_x", ["g: f32[6, 100]", "x: f32[6, 100]"],
             norm_grad_ref("layer", 1e-3, 0), RED, attrs={"eps": 1e-3}),
    GradCase("layernorm_grad_w", "layernorm_grad_w", ["g: f32[4, 37, 53]", "x: f32[4, 37, 53]"],
             norm_grad_ref("layer", 1e-5, 1), RED, {"x": (3, 5)}, attrs={"eps": 1e-5}, same_bits=True),
    GradCase("layernorm_grad_w_wide", "layernorm_grad_w", ["g: f32[200, 300]", "x: f32[200, 300]"],
             norm_grad_ref("layer", 1e-5, 1), RED, attrs={"eps": 1e-5}, same_bits=True),
    GradCase("layernorm_grad_w_bf16", "layernorm_grad_w", ["g: bf16[40, 48]", "x: bf16[40, 48]"],
             norm_grad_ref("layer", 1e-5, 1, rnd=bf16), LOW, attrs={"eps": 1e-5}),
    # GPU targets (codegen/cstyle/emit_norm.c): rows of up to 64 x 32 elements take the one-pass kernel (a warp per
    # row), longer ones the two-pass form; the MiniLLM's bf16 rows of 2048 (70 rows: a partial last chunk of warps),
    # f32 rows of 2500 (80 floats a lane) and bf16 rows of 4096 (128): two-pass
    GradCase("rmsnorm_grad_w_bf16_2048", "rmsnorm_grad_w", ["g: bf16[70, 2048]", "x: bf16[70, 2048]"],
             norm_grad_ref("rms", 1e-5, 1, rnd=bf16), LOW, attrs={"eps": 1e-5}, same_bits=True),
    GradCase("layernorm_grad_w_two_pass", "layernorm_grad_w", ["g: f32[24, 2500]", "x: f32[24, 2500]"],
             norm_grad_ref("layer", 1e-5, 1), RED, attrs={"eps": 1e-5}, same_bits=True),
    GradCase("rmsnorm_grad_w_bf16_two_pass", "rmsnorm_grad_w", ["g: bf16[20, 4096]", "x: bf16[20, 4096]"],
             norm_grad_ref("rms", 1e-5, 1, rnd=bf16), LOW, attrs={"eps": 1e-5}, same_bits=True),
    # attention_grad -> [3, b, h, s, d]: s not a multiple of the key block (2 vectors) or row group
    GradCase("attention_grad", "attention_grad", attn_ops("f32", [2, 3, 37, 24]),
             attention_grad_ref(24 ** -0.5, False), RED, attrs={"causal": 0, "scale": 24 ** -0.5}, same_bits=True),
    GradCase("attention_grad_causal", "attention_grad", attn_ops("f32", [2, 3, 70, 16]),
             attention_grad_ref(0.25, True), RED, attrs={"causal": 1, "scale": 0.25}, same_bits=True),
    GradCase("attention_grad_causal_d20", "attention_grad", attn_ops("f32", [1, 2, 45, 20]),
             attention_grad_ref(0.3, True), RED, attrs={"causal": 1, "scale": 0.3}),
    GradCase("attention_grad_tiny", "attention_grad", attn_ops("f32", [1, 1, 3, 8]),
             attention_grad_ref(0.5, True), RED, attrs={"causal": 1, "scale": 0.5}),
    GradCase("attention_grad_causal_long", "attention_grad", attn_ops("f32", [1, 2, 200, 64]),
             attention_grad_ref(0.125, True), RED, {"q": (-3, 3), "k": (-3, 3)}, attrs={"causal": 1, "scale": 0.125}),
    # f32 on CUDA's tensor cores (3xTF32): lengths off the 64-row and 64-key tiles, head dims 64 and 128
    GradCase("attention_grad_f32_d64_causal", "attention_grad", attn_ops("f32", [1, 2, 333, 64]),
             attention_grad_ref(0.125, True), EW, {"q": (-3, 3), "k": (-3, 3)}, attrs={"causal": 1, "scale": 0.125},
             targets=("cpu", "cuda")),
    GradCase("attention_grad_f32_d128", "attention_grad", attn_ops("f32", [2, 1, 150, 128]),
             attention_grad_ref(128 ** -0.5, False), EW, attrs={"causal": 0, "scale": 128 ** -0.5},
             targets=("cpu", "cuda")),
    # head dim 36: padded to 40 on CUDA (attnpad); 136: past the tensor-core kernels, the generic one
    GradCase("attention_grad_f32_d36_causal", "attention_grad", attn_ops("f32", [1, 2, 130, 36]),
             attention_grad_ref(36 ** -0.5, True), EW, attrs={"causal": 1, "scale": 36 ** -0.5},
             targets=("cpu", "cuda")),
    GradCase("attention_grad_f32_d136", "attention_grad", attn_ops("f32", [1, 1, 40, 136]),
             attention_grad_ref(136 ** -0.5, True), EW, attrs={"causal": 1, "scale": 136 ** -0.5},
             targets=("cpu", "cuda")),
    GradCase("attention_grad_bf16_d80", "attention_grad", attn_ops("bf16", [1, 2, 150, 80]),
             attention_grad_ref(80 ** -0.5, True, bf16), LOW, attrs={"causal": 1, "scale": 80 ** -0.5},
             targets=("cpu", "cuda")),
    GradCase("attention_grad_bf16_d136", "attention_grad", attn_ops("bf16", [1, 1, 40, 136]),
             attention_grad_ref(136 ** -0.5, False, bf16), LOW, attrs={"causal": 0, "scale": 136 ** -0.5},
             targets=("cpu", "cuda")),
    # head dims 129 to 256 on the tensor cores: dv and dk in a launch each (16-bit and f32), the 16-bit
    # dq by atomics, lengths off every tile
    GradCase("attention_grad_bf16_d256_causal", "attention_grad", attn_ops("bf16", [1, 2, 333, 256]),
             attention_grad_ref(256 ** -0.5, True, bf16), LOW, attrs={"causal": 1, "scale": 256 ** -0.5},
             targets=("cpu", "cuda")),
    GradCase("attention_grad_f16_d160", "attention_grad", attn_ops("f16", [2, 1, 150, 160]),
             attention_grad_ref(160 ** -0.5, False, f16), LOW, attrs={"causal": 0, "scale": 160 ** -0.5},
             targets=("cpu", "cuda")),
    GradCase("attention_grad_f32_d256_causal", "attention_grad", attn_ops("f32", [1, 2, 200, 256]),
             attention_grad_ref(256 ** -0.5, True), EW, attrs={"causal": 1, "scale": 256 ** -0.5},
             targets=("cpu", "cuda")),
    GradCase("attention_grad_f32_d200", "attention_grad", attn_ops("f32", [1, 1, 150, 200]),
             attention_grad_ref(200 ** -0.5, False), EW, attrs={"causal": 0, "scale": 200 ** -0.5},
             targets=("cpu", "cuda")),
    GradCase("matmul_tn_f32_wg", "matmul_tn", ["a: f32[1003, 1536]", "b: f32[1003, 1600]"],
             lambda I, P: I["a"].T @ I["b"], EW, targets=("cuda",)),
    GradCase("matmul_tn_f32_k8192", "matmul_tn", ["a: f32[8192, 136]", "b: f32[8192, 72]"],
             lambda I, P: I["a"].T @ I["b"], EW, targets=("cuda",)),
    # split-K (few tiles, long K): slices summed in a second launch; float4 and scalar sums
    GradCase("matmul_tn_f32_split", "matmul_tn", ["a: f32[4000, 384]", "b: f32[4000, 256]"],
             lambda I, P: I["a"].T @ I["b"], EW, targets=("cuda",)),
    GradCase("matmul_tn_f32_split_odd", "matmul_tn", ["a: f32[2000, 301]", "b: f32[2000, 101]"],
             lambda I, P: I["a"].T @ I["b"], EW, targets=("cuda",)),
    GradCase("attention_grad_bf16", "attention_grad", attn_ops("bf16", [1, 2, 40, 32]),
             attention_grad_ref(32 ** -0.5, False, bf16), LOW, attrs={"causal": 0, "scale": 32 ** -0.5}),
    GradCase("attention_grad_bf16_causal", "attention_grad", attn_ops("bf16", [1, 2, 45, 20]),
             attention_grad_ref(0.3, True, bf16), LOW, attrs={"causal": 1, "scale": 0.3}),
    # head dim 128 on 16 bits: the wgmma gradient on sm_90a (mlc_attn_bwd_wg), lengths off its 128-key
    # block and 64-row query tile, causal or not
    GradCase("attention_grad_bf16_d128", "attention_grad", attn_ops("bf16", [2, 2, 300, 128]),
             attention_grad_ref(128 ** -0.5, False, bf16), LOW, attrs={"causal": 0, "scale": 128 ** -0.5}),
    GradCase("attention_grad_bf16_d128_causal", "attention_grad", attn_ops("bf16", [1, 2, 333, 128]),
             attention_grad_ref(128 ** -0.5, True, bf16), LOW, attrs={"causal": 1, "scale": 128 ** -0.5}),
    GradCase("attention_grad_f16_d128_causal_long", "attention_grad", attn_ops("f16", [1, 1, 700, 128]),
             attention_grad_ref(0.1, True, f16), LOW, attrs={"causal": 1, "scale": 0.1}),
    # head dim 64 on the same wgmma gradient: warpgroup 0 alone takes dq's columns
    GradCase("attention_grad_bf16_d64", "attention_grad", attn_ops("bf16", [2, 2, 300, 64]),
             attention_grad_ref(0.125, False, bf16), LOW, attrs={"causal": 0, "scale": 0.125}),
    GradCase("attention_grad_f16_d64_causal", "attention_grad", attn_ops("f16", [1, 3, 333, 64]),
             attention_grad_ref(0.125, True, f16), LOW, attrs={"causal": 1, "scale": 0.125}),
    # more 128-key work items than an H200 has multiprocessors (a second wave of the wgmma gradient's blocks):
    # lse2 and D by cp.async where S % 4 != 0; causal, items of different lengths, the last key block's only
    # two query tiles
    GradCase("attention_grad_bf16_d128_items", "attention_grad", attn_ops("bf16", [4, 12, 390, 128]),
             attention_grad_ref(128 ** -0.5, False, bf16), LOW, attrs={"causal": 0, "scale": 128 ** -0.5},
             targets=("cuda",)),
    GradCase("attention_grad_f16_d64_causal_items", "attention_grad", attn_ops("f16", [4, 8, 600, 64]),
             attention_grad_ref(0.125, True, f16), LOW, {"q": (-3, 3), "k": (-3, 3)}, attrs={"causal": 1, "scale": 0.125},
             targets=("cuda",)),
    # head dim 16 and f16 without the mask: spirv's cooperative-matrix gradient (--spirv-attention=coopmat,
    # --spirv-emulate-coopmat) takes 16-bit heads of d % 16 == 0 up to 128; lengths off its 16 and 64 blocks
    GradCase("attention_grad_f16_d16", "attention_grad", attn_ops("f16", [2, 2, 50, 16]),
             attention_grad_ref(0.25, False, f16), LOW, attrs={"causal": 0, "scale": 0.25}),
    GradCase("attention_grad_bf16_d16_causal", "attention_grad", attn_ops("bf16", [1, 3, 77, 16]),
             attention_grad_ref(0.25, True, bf16), LOW, attrs={"causal": 1, "scale": 0.25}),
    GradCase("attention_grad_f16_d128", "attention_grad", attn_ops("f16", [1, 2, 130, 128]),
             attention_grad_ref(128 ** -0.5, False, f16), LOW, attrs={"causal": 0, "scale": 128 ** -0.5}),
    GradCase("attention_grad_f16_tiles", "attention_grad", attn_ops("f16", [1, 1, 150, 24]),
             attention_grad_ref(0.2, True, f16), LOW, attrs={"causal": 1, "scale": 0.2}, same_bits=True),
    # gather_grad: scatter-add along the axis, repeated and out-of-range indices, an index shorter than x
    GradCase("gather_grad_last", "gather_grad", ["g: f32[4, 37, 9]", "idx: i64[4, 37, 9]"],
             gather_grad_ref((4, 37, 53), -1), RED, {"idx": (0, 53)}, attrs={"axis": 2}, shape=[4, 37, 53],
             same_bits=True, targets=I27),
    GradCase("gather_grad_mid_small", "gather_grad", ["g: f32[3, 50, 20]", "idx: i32[3, 50, 20]"],
             gather_grad_ref((4, 37, 53), 1), RED, {"idx": (-2, 40)}, attrs={"axis": 1}, shape=[4, 37, 53],
             same_bits=True, targets=I27),
    GradCase("gather_grad_first", "gather_grad", ["g: f32[30, 6]", "idx: i64[30, 6]"],
             gather_grad_ref((5, 6), 0), RED, {"idx": (0, 5)}, attrs={"axis": 0}, shape=[5, 6], targets=I27),
    GradCase("gather_grad_bf16", "gather_grad", ["g: bf16[6, 7]", "idx: i64[6, 7]"],
             gather_grad_ref((6, 40), 1, bf16), LOW, {"idx": (0, 40)}, attrs={"axis": 1}, shape=[6, 40], targets=I27),
    # dropout (training only, so built by hand): the Philox mask, steps past 2^32 (the counter's high word)
    GradCase("dropout_f32", "dropout", ["x: f32[3, 1000, 7]", "step: i64[]"], dropout_ref(0.25, 0, 0), EW,
             {"step": (1, 1 << 40)}, attrs={"p": 0.25, "stream": 0, "seed": 0}, targets=I27),
    GradCase("dropout_stream_seed", "dropout", ["x: f32[5, 9001]", "step: i64[]"], dropout_ref(0.9, 3, 77), EW,
             {"step": (1, 100)}, attrs={"p": 0.9, "stream": 3, "seed": 77}, targets=I27),
    GradCase("dropout_bf16", "dropout", ["x: bf16[6, 333]", "step: i64[]"], dropout_ref(0.5, 1, 5, bf16), LOW,
             {"step": (1, 1000)}, attrs={"p": 0.5, "stream": 1, "seed": 5}, targets=I27),
    # cross_entropy_grad: targets outside [0, C) skipped and not counted, as in the forward
    GradCase("cross_entropy_grad", "cross_entropy_grad", ["g: f32[]", "x: f32[2, 37, 100]", "t: i32[2, 37]"],
             ce_grad_ref(), RED, {"t": (-3, 103), "x": (-5, 5)}, same_bits=True),
    GradCase("cross_entropy_grad_i64", "cross_entropy_grad", ["g: f32[]", "x: f32[10, 7]", "t: i64[10]"],
             ce_grad_ref(), RED, {"t": (0, 7)}),
    GradCase("cross_entropy_grad_bf16", "cross_entropy_grad", ["g: f32[]", "x: bf16[6, 50]", "t: i32[6]"],
             ce_grad_ref(bf16), LOW, {"t": (0, 50), "x": (-5, 5)}),
    # attention_kv (a decode block's prefill and step; the caches as inputs here): a chunk at pos, one
    # token, a bf16 chunk, a head dim off the multiples, and a pos past max_ctx - t (clamped)
    GradCase("attention_kv_chunk", "attention_kv", kv_ops("f32", 1, 2, 5, 16, 24), attention_kv_ref(0.25), RED,
             {"pos": (6, 7)}, attrs={"scale": 0.25}, targets=KV),
    GradCase("attention_kv_step", "attention_kv", kv_ops("f32", 2, 3, 1, 32, 40), attention_kv_ref(32 ** -0.5), RED,
             {"pos": (17, 18)}, attrs={"scale": 32 ** -0.5}, targets=KV),
    GradCase("attention_kv_bf16", "attention_kv", kv_ops("bf16", 1, 2, 7, 64, 80), attention_kv_ref(0.125, bf16), LOW,
             {"pos": (30, 31)}, attrs={"scale": 0.125}, targets=KV),
    GradCase("attention_kv_d20_clamped", "attention_kv", kv_ops("f32", 1, 1, 4, 20, 9), attention_kv_ref(0.3), RED,
             {"pos": (8, 9)}, attrs={"scale": 0.3}, targets=KV),
    # a decode step over a long prefix (CUDA: 251 keys, eight rounds of its four warps' eight keys), and
    # a head dim of 96 (three elements a lane, no vector loads) in a chunk
    GradCase("attention_kv_bf16_d128_long", "attention_kv", kv_ops("bf16", 1, 2, 1, 128, 300), attention_kv_ref(128 ** -0.5, bf16),
             LOW, {"pos": (250, 251)}, attrs={"scale": 128 ** -0.5}, targets=KV),
    GradCase("attention_kv_d96_chunk", "attention_kv", kv_ops("f32", 2, 1, 3, 96, 70), attention_kv_ref(96 ** -0.5), RED,
             {"pos": (41, 42)}, attrs={"scale": 96 ** -0.5}, targets=KV),
]
CASES += GRAD_CASES


def run_case(args, c):
    """Runs one case; returns (err, why)."""
    d = os.path.join(args.work, c.name)
    os.makedirs(d, exist_ok=True)
    extra = []
    for n, r in c.ranges.items():  # (lo, hi) or (lo, hi, "int")
        extra += ["--range", "%s=%r,%r%s" % (n, r[0], r[1], ",int" if len(r) > 2 else "")]
    try:
        model = c.model(d)
        m, T = run_opcheck(args, model, d, extra + c.defines)
        ref = c.ref(T["input"], T["param"])
        err, why = rel_err(T["output"]["output"], ref)
        if c.same_bits and err <= c.tol:  # on the GPU: a second run
            _, T3 = run_opcheck(args, model, d + ".t3", extra + c.defines, threads=3)
            if not torch.equal(T3["output"]["output"], T["output"]["output"]):
                err, why = float("inf"), "3 threads give different bits" if args.target == "cpu" else "a second run gives different bits"
    except NoDevice as e:
        return None, str(e)
    except Exception as e:  # a compile or run failure is a failed case
        err, why = float("inf"), str(e).strip().replace("\n", " | ")
    return err, why


def sample_arg(text):
    """K/N with 0 <= K < N, for --sample."""
    m = re.fullmatch(r"(\d+)/(\d+)", text)
    if not m or int(m.group(2)) == 0 or int(m.group(1)) >= int(m.group(2)):
        raise argparse.ArgumentTypeError("expected K/N with 0 <= K < N, got %r" % text)
    return int(m.group(1)), int(m.group(2))


def cmd_ops(args):
    os.makedirs(args.work, exist_ok=True)
    cases = [c for c in CASES if (not args.k or args.k in c.name) and args.target in c.targets]
    if args.sample:  # K/N: the cases whose place in that list is K modulo N
        k, n = args.sample
        print("sample %d/%d: %d of %d cases" % (k, n, len(cases[k::n]), len(cases)))
        cases = cases[k::n]
    # Cases are independent processes; with --jobs they overlap (compiling
    # CUDA kernels with nvcc is most of a GPU case's time).
    import concurrent.futures
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as ex:
        results = list(ex.map(lambda c: run_case(args, c), cases))
    if results and all(err is None for err, _ in results):
        print("SKIP: %s" % results[0][1])
        return SKIP
    failed = 0
    for c, (err, why) in zip(cases, results):
        err = float("inf") if err is None else err
        ok = err <= c.tol
        failed += not ok
        print("%s %-24s err %.2e  tol %.0e  %s" % ("PASS" if ok else "FAIL", c.name, err, c.tol, why), flush=True)
    print("%d of %d cases passed" % (len(cases) - failed, len(cases)))
    return 1 if failed else 0


# ---- the whole MiniLLM ----

class RMSNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = torch.finfo(torch.float32).eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.norm1 = RMSNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm2 = RMSNorm(dim)
        self.ffn = nn.Sequential(nn.Linear(dim, 4 * dim, bias=False), nn.SiLU(), nn.Linear(4 * dim, dim, bias=False))

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.ffn(self.norm2(x))


class MiniLLM(nn.Module):
    def __init__(self, vocab, dim, layers, heads):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList([Block(dim, heads) for _ in range(layers)])
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx):
        x = self.embed(idx)
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


MINI = dict(vocab=512, dim=128, layers=2, heads=4, batch=2, seq=64)


def run_minillm(args, outdir, extra):
    os.makedirs(outdir, exist_ok=True)
    defines = ["%s=%d" % kv for kv in MINI.items()]
    return run_opcheck(args, args.model, outdir, ["--range", "idx=0,%d" % MINI["vocab"]] + extra + defines)


def minillm_ref(T):
    model = MiniLLM(MINI["vocab"], MINI["dim"], MINI["layers"], MINI["heads"]).double()
    model.load_state_dict(T["param"], strict=True)  # the names must be PyTorch's
    model.eval()
    with torch.no_grad():
        return model(T["input"]["idx"])


def cmd_minillm(args):
    m, T = run_minillm(args, args.work, ["--bench", "5"])
    ref = minillm_ref(T)
    err, why = rel_err(T["output"]["output"], ref)
    ok = err <= RED
    print("%s minillm logits  err %.2e (max |out - ref| / max |ref|)  tol %.0e  %s" % (
        "PASS" if ok else "FAIL", err, RED, why))
    print("     max abs err %.3e, max |ref| %.3f; %d kernels, %.2f ms per forward on %s" % (
        (T["output"]["output"] - ref).abs().max().item(), ref.abs().max().item(), len(m.get("kernel", [])),
        m["bench"][0] * 1e3, "the GPU" if args.target == "cuda" else "%d thread(s) (%s, %s lanes)" % (
            args.threads, m["target"][0], m["target"][1])))
    return 0 if ok else 1


def cmd_objfile(args):
    obj, so = os.path.join(args.work, "minillm.o"), os.path.join(args.work, "libminillm.so")
    _, J = run_minillm(args, os.path.join(args.work, "jit"), ["--emit-obj", obj])
    subprocess.run([args.cc, "-shared", "-o", so, obj], check=True)
    _, S = run_minillm(args, os.path.join(args.work, "so"), ["--so", so])
    same = torch.equal(J["output"]["output"], S["output"]["output"])
    err, why = rel_err(S["output"]["output"], minillm_ref(S))
    ok = same and err <= RED
    print("%s minillm from %s: %s the JIT's logits; err against torch %.2e  tol %.0e  %s" % (
        "PASS" if ok else "FAIL", os.path.basename(so), "bit-identical to" if same else "DIFFERENT from", err, RED, why))
    return 0 if ok else 1


# ---- GEMM speed ----

def torch_time(fn, iters):
    for _ in range(3):
        fn()
    ts = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return sorted(ts)[len(ts) // 2]


def cmd_bench(args):
    os.makedirs(args.work, exist_ok=True)
    n = args.size
    flops = 2.0 * n * n * n
    torch.set_num_threads(args.threads)
    models = {
        "matmul": ("a: f32[%d, %d], b: f32[%d, %d]" % (n, n, n, n), "a @ b", ""),
        "linear": ("x: f32[%d, %d]" % (n, n), "lin(x)", "lin = Linear(%d, %d, bias=false)" % (n, n)),
    }
    print("%d x %d x %d f32 GEMM, %d thread(s), median of %d runs" % (n, n, n, args.threads, args.iters))
    for name, (sig, expr, members) in models.items():
        d = os.path.join(args.work, name)
        os.makedirs(d, exist_ok=True)
        src = os.path.join(d, "model.mdl")
        with open(src, "w") as f:
            f.write(Case(name, sig, expr, None, 0, members=members).source())
        m, T = run_opcheck(args, src, d, ["--bench", str(args.iters)])
        I, P = T["input"], T["param"]
        if name == "matmul":
            a, b = I["a"].float(), I["b"].float()
            ref = a.double() @ b.double()
            tt = torch_time(lambda: torch.matmul(a, b), args.iters)
        else:
            x, w = I["x"].float(), P["lin.weight"].float()
            ref = x.double() @ w.double().T
            tt = torch_time(lambda: F.linear(x, w), args.iters)
        err, _ = rel_err(T["output"]["output"], ref)
        ours = m["bench"][0]
        print("  %-6s mlc %7.1f GFLOP/s (%.2f ms)   torch %7.1f GFLOP/s (%.2f ms)   ratio %.2fx   err %.1e" % (
            name, flops / ours / 1e9, ours * 1e3, flops / tt / 1e9, tt * 1e3, tt / ours, err))
        if name == "linear":  # Debian's torch.matmul uses reference BLAS; its oneDNN path is the fast one
            try:
                from torch.utils import mkldnn
                lin = nn.Linear(n, n, bias=False)
                lin.weight.data = w
                ml, xm = mkldnn.to_mkldnn(lin), x.to_mkldnn()
                td = torch_time(lambda: ml(xm), args.iters)
                print("  %-6s (torch oneDNN linear %7.1f GFLOP/s (%.2f ms); mlc/oneDNN %.2fx)" % (
                    "", flops / td / 1e9, td * 1e3, td / ours))
            except Exception as e:
                print("  (torch oneDNN not available: %s)" % e)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["ops", "minillm", "objfile", "bench"])
    ap.add_argument("--cc", default="cc", help="objfile: the C compiler that links the .so")
    ap.add_argument("--opcheck", required=True, help="the mlc_opcheck binary")
    ap.add_argument("--work", required=True, help="directory for the models and tensors")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=1, help="ops: cases run at once")
    ap.add_argument("--target", default="cpu", choices=["cpu", "cuda", "metal", "spirv"], help="where mlc_opcheck runs the cases")
    ap.add_argument("--model", help="minillm: examples/minillm.mdl")
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("-k", help="ops: only cases whose name contains this")
    ap.add_argument("--sample", type=sample_arg, metavar="K/N",
                    help="ops: only every Nth case, starting at the Kth (the suite built with sanitizers)")
    ap.add_argument("--option", action="append", metavar="--NAME[=VALUE]",
                    help="an option of emitted code passed to mlc_opcheck, e.g. --option=--spirv-emulate-coopmat")
    ap.add_argument("--cpu", help="compile for LLVM CPU NAME[:FEATURES] instead of the host, "
                    "e.g. haswell:+avx2,+fma,+f16c (8-lane kernels) or x86-64 (SSE2, 4 lanes, no F16C)")
    args = ap.parse_args()
    torch.manual_seed(0)
    if args.target == "metal":  # the emulator's header, precompiled once for every case (tests/metal/emu_device.c)
        os.makedirs(args.work, exist_ok=True)
        os.environ.setdefault("MLC_EMU_PCH", os.path.join(os.path.abspath(args.work), "msl_emu.pch"))
    return {"ops": cmd_ops, "minillm": cmd_minillm, "objfile": cmd_objfile, "bench": cmd_bench}[args.mode](args)


if __name__ == "__main__":
    sys.exit(main())
