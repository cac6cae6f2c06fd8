"""Gradient checks of the autodiff pass on the CPU target.

  grad_check.py ops TRAIN_ENTRY WORKDIR [-k SUBSTRING]
  grad_check.py minillm TRAIN_ENTRY WORKDIR --model examples/minillm.mdl

ops: one tiny .mdl model per op (or a few ops), each with raw parameters so
that every operand gets a gradient, and a train block whose loss is
sum(model() * r) for a fixed random input r (so every output element gets a
different upstream gradient), or a cross_entropy.  Weights are random f32
values written as safetensors.  TRAIN_ENTRY (tests/ref/train_entry.c)
compiles the model for the CPU, runs its train entry and writes every
output.  Each grad:<param> output is then checked three ways, each with the
error measure max|mlc - ref| / max|ref| over the whole tensor:

  1. torch.autograd in float64 on the same weights (a PyTorch module or
     functional op per mlc op): tolerance 1e-4.
  2. central differences of the same loss computed in float64 by the same
     Python forward (no autograd), step 1e-6, every element: tolerance 1e-4.
  3. central differences of the compiled model's own f32 loss (train_entry
     --fd, step 5e-3, up to 8 elements per parameter), measured against
     max|grad|: tolerance 1e-3.  This ties the backward to the forward it
     was derived from, with no reference implementation in between.

The loss itself must match the float64 reference to 1e-5 relative.  The
cast case rounds through bf16: it is checked against autograd with the same
casts only, to 1e-2 (bf16 keeps 8 significant bits), since its loss is a
step function that central differences cannot follow.  Also
checks that the set of grad:* outputs is exactly the set of parameters.

minillm: the small MiniLLM of examples/minillm.mdl (vocab 512, dim 128, 2
layers, 4 heads, batch 2, seq 64) with weights from tests/ref/models.py's
MiniLLM (biases made non-zero): every parameter's gradient after one step
must match PyTorch fp32 autograd of F.cross_entropy(logits.view(-1, V),
targets.view(-1)) to 1e-4 relative; the float64 autograd error of both is
printed for scale.

Run with /usr/bin/python3 (Debian's torch 1.13 and numpy)."""
import argparse
import os
import sys
import time
import zlib

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from models import MiniLLM, RMSNorm, rel_err, run_entry, write_safetensors  # noqa: E402

TOL_AUTOGRAD = 1e-4
TOL_FD64 = 1e-4
TOL_FD32 = 1e-3
TOL_LOSS = 1e-5
TOL_LOSSY = 1e-2  # through bf16 (8 significant bits): autograd only, loss and gradients
FD64_STEP = 1e-6
FD32_STEP = 5e-3
FD32_POINTS = 8
RMS_EPS = 1.1920928955078125e-07  # torch.finfo(torch.float32).eps: RMSNorm's default in mlc and PyTorch

torch.set_default_dtype(torch.float64)


# ---- the cases ----

class Case:
    """A model: the body of `module T` (raw params and submodules), its
    forward's arguments and expression, the parameters' shapes and how to
    draw them, integer inputs, and the same computation in torch."""

    def __init__(self, name, members, expr, params, fn, ints=None, ce=None, lossy=False):
        self.name, self.members, self.expr, self.params, self.fn = name, members, expr, params, fn
        self.ints = ints or {}  # name -> (shape, high): i32 inputs in [0, high)
        self.ce = ce            # name of the targets input: loss = cross_entropy(model(...), targets)
        # Rounds through bf16: the loss is a step function, so no central
        # differences, and autograd (with the same casts) agrees to bf16's precision.
        self.lossy = lossy


def normal(*shape):
    return ("normal", shape)


def positive(*shape):  # [0.5, 2): log, sqrt, rsqrt, divisors
    return ("positive", shape)


def away0(*shape):  # |x| in [0.2, 1.2): relu's kink stays outside every step
    return ("away0", shape)


def around1(*shape):  # norm weights: 1 + N(0, 0.2)
    return ("around1", shape)


def draw(kind, shape, g):
    if kind == "normal":
        t = torch.randn(shape, generator=g)
    elif kind == "positive":
        t = 0.5 + 1.5 * torch.rand(shape, generator=g)
    elif kind == "away0":
        t = (0.2 + torch.rand(shape, generator=g)) * torch.sign(torch.randn(shape, generator=g))
    else:
        t = 1 + 0.2 * torch.randn(shape, generator=g)
    return t.float()


def rmsnorm(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + RMS_EPS) * w


def mha(prefix, P, q, k, v, heads, bias=True, causal=False):
    """nn.MultiheadAttention (batch_first) with mlc's parameters, float64."""
    e = q.shape[-1]
    m = nn.MultiheadAttention(e, heads, bias=bias, batch_first=True)
    # Swap the module's parameters for ours (which carry requires_grad).
    del m.in_proj_weight
    m.in_proj_weight = P[prefix + "in_proj_weight"]
    del m.out_proj.weight
    m.out_proj.weight = P[prefix + "out_proj.weight"]
    if bias:
        del m.in_proj_bias, m.out_proj.bias
        m.in_proj_bias = P[prefix + "in_proj_bias"]
        m.out_proj.bias = P[prefix + "out_proj.bias"]
    mask = None
    if causal:  # PyTorch's is_causal mask, top-left aligned when q and k differ in length
        mask = torch.triu(torch.ones(q.shape[1], k.shape[1], dtype=torch.bool), diagonal=1)
    out, _ = m(q, k, v, need_weights=False, attn_mask=mask)
    return out


def sdpa(q, k, v, scale, causal):
    """softmax(q k^T scale [+ is_causal's mask]) v, written out (torch 1.13)."""
    s = (q @ k.transpose(-2, -1)) * scale
    if causal:
        s = s.masked_fill(torch.triu(torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool), diagonal=1), float("-inf"))
    return torch.softmax(s, -1) @ v


def unary(name, fn, kind=normal):
    return Case(name, "param x: f32[4, 6]", f"{name}(x)" if name != "neg" else "-x", {"x": kind(4, 6)},
                lambda P, I: fn(P["x"]))


CASES = [
    Case("add_sub_broadcast", "param a: f32[3, 1, 5]\n param b: f32[4, 5]\n param c: f32[5]\n param d: f32[1, 4, 1]",
         "a + b - d + c", {"a": normal(3, 1, 5), "b": normal(4, 5), "c": normal(5), "d": normal(1, 4, 1)},
         lambda P, I: P["a"] + P["b"] - P["d"] + P["c"]),
    Case("mul", "param a: f32[4, 5]\n param b: f32[5]", "a * b * a", {"a": normal(4, 5), "b": normal(5)},
         lambda P, I: P["a"] * P["b"] * P["a"]),
    Case("div", "param a: f32[4, 5]\n param b: f32[4, 1]\n param c: f32[5]", "a / b + b / c",
         {"a": normal(4, 5), "b": positive(4, 1), "c": positive(5)},
         lambda P, I: P["a"] / P["b"] + P["b"] / P["c"]),
    unary("neg", lambda x: -x),
    unary("exp", torch.exp),
    unary("log", torch.log, positive),
    unary("sqrt", torch.sqrt, positive),
    unary("rsqrt", torch.rsqrt, positive),
    unary("tanh", torch.tanh),
    unary("sigmoid", torch.sigmoid),
    unary("relu", torch.relu, away0),
    unary("silu", F.silu),
    unary("gelu", F.gelu),
    # issue 27: rules composed of other ops (abs, erf, pow, clamp, where) and gelu_tanh_grad
    unary("abs", torch.abs, away0),
    unary("erf", torch.erf),
    Case("gelu_tanh", "param x: f32[4, 6]", 'gelu(x, approximate="tanh")', {"x": normal(4, 6)},
         lambda P, I: F.gelu(P["x"], approximate="tanh")),
    Case("pow", "param x: f32[4, 6]", "pow(x, 1.5) + x ** -2 + x ** 3 + x ** 0", {"x": positive(4, 6)},
         lambda P, I: P["x"] ** 1.5 + P["x"] ** -2 + P["x"] ** 3 + P["x"] ** 0),
    Case("clamp", "param x: f32[4, 6]", "clamp(x, min=-0.15, max=1.3) * x + clamp(x, max=0.1)", {"x": away0(4, 6)},  # bounds outside away0's |x| in [0.2, 1.2)
         lambda P, I: P["x"].clamp(-0.15, 1.3) * P["x"] + P["x"].clamp(max=0.1)),
    Case("where", "param x: f32[4, 6]\n param w: f32[6]", "where(x > 0.0, x * w, w - x) + where(w <= 0.0, x, 1.0)",
         {"x": away0(4, 6), "w": away0(6)},
         lambda P, I: torch.where(P["x"] > 0, P["x"] * P["w"], P["w"] - P["x"]) +
         torch.where(P["w"] <= 0, P["x"], torch.ones((), dtype=torch.float64))),
    # issue 27, part 2: views lowered onto transpose/reshape/slice/concat, expand (broadcast's rule), strided
    # indexing, gather (gather_grad's scatter-add), max/min (torch.amax/amin: ties share the gradient)
    Case("views", "param x: f32[2, 1, 3]\n param w: f32[3, 4]",
         "squeeze(permute(x, [2, 0, 1]), -1) * w[:, 1::2] + squeeze(unsqueeze(w, 0), 0)[:, :2]",
         {"x": normal(2, 1, 3), "w": normal(3, 4)},
         lambda P, I: P["x"].permute(2, 0, 1).squeeze(-1) * P["w"][:, 1::2] + P["w"][:, :2]),
    Case("expand", "param x: f32[2, 1, 3]\n param w: f32[4, 2, 5, 3]", "expand(x, [4, 2, 5, -1]) * w",
         {"x": normal(2, 1, 3), "w": normal(4, 2, 5, 3)}, lambda P, I: P["x"].expand(4, 2, 5, -1) * P["w"]),
    Case("index_strided", "param x: f32[5, 7]", "x[1::2, ::3] * x[0:4:2, 2:5] + sum(slice(x, 1, 0, 7, step=2) ** 2)",
         {"x": normal(5, 7)},
         lambda P, I: P["x"][1::2, ::3] * P["x"][0:4:2, 2:5] + (P["x"][:, 0:7:2] ** 2).sum()),
    Case("gather", "param x: f32[4, 6]\n param w: f32[4, 9]", "gather(x, 1, idx) * w + sum(gather(x, 0, jdx))",
         {"x": normal(4, 6), "w": normal(4, 9)},
         lambda P, I: torch.gather(P["x"], 1, I["idx"].long()) * P["w"] + torch.gather(P["x"], 0, I["jdx"].long()).sum(),
         ints={"idx": ((4, 9), 6), "jdx": ((7, 5), 4)}),  # repeated indices, an index shorter than x on axis 1
    Case("max_min", "param x: f32[3, 4, 5]",
         "max(x, dim=1, keepdim=true) * min(x, dim=-1, keepdim=true) + max(concat([x, x], dim=2), dim=2, keepdim=true) + min(x)",
         {"x": normal(3, 4, 5)},
         lambda P, I: P["x"].amax(1, keepdim=True) * P["x"].amin(-1, keepdim=True) + torch.cat([P["x"], P["x"]], 2).amax(2, keepdim=True)
         + P["x"].amin()),
    Case("cast_bf16", "param x: f32[4, 6]\n param w: f32[6]", "cast(cast(x, bf16) * cast(w, bf16), f32) + x",
         {"x": normal(4, 6), "w": normal(6)},
         lambda P, I: (P["x"].to(torch.bfloat16) * P["w"].to(torch.bfloat16)).double() + P["x"], lossy=True),
    Case("sum", "param x: f32[3, 4, 5]", "sum(x, dim=1, keepdim=true) * x + reshape(sum(x, dim=2), [3, 4, 1])",
         {"x": normal(3, 4, 5)},
         lambda P, I: P["x"].sum(1, keepdim=True) * P["x"] + P["x"].sum(2).reshape(3, 4, 1)),
    Case("mean", "param x: f32[3, 4, 5]", "x - mean(x, dim=-1, keepdim=true) + reshape(mean(x, dim=0), [1, 4, 5])",
         {"x": normal(3, 4, 5)},
         lambda P, I: P["x"] - P["x"].mean(-1, keepdim=True) + P["x"].mean(0).reshape(1, 4, 5)),
    Case("softmax", "param x: f32[3, 4, 5]", "softmax(x, dim=-1) + softmax(x, dim=1)", {"x": normal(3, 4, 5)},
         lambda P, I: torch.softmax(P["x"], -1) + torch.softmax(P["x"], 1)),
    Case("reshape", "param x: f32[2, 3, 4]\n param w: f32[6]", "reshape(x, [4, -1]) * w",
         {"x": normal(2, 3, 4), "w": normal(6)}, lambda P, I: P["x"].reshape(4, -1) * P["w"]),
    Case("transpose", "param x: f32[2, 3, 4]\n param w: f32[4, 3, 1]", "transpose(x, 0, 2) * w",
         {"x": normal(2, 3, 4), "w": normal(4, 3, 1)}, lambda P, I: P["x"].transpose(0, 2) * P["w"]),
    Case("slice", "param x: f32[3, 6]", "slice(x, 1, 1, 4) + slice(x, 1, 2, 5) * slice(x, -1, -3, 6)",
         {"x": normal(3, 6)}, lambda P, I: P["x"][:, 1:4] + P["x"][:, 2:5] * P["x"][:, 3:6]),
    Case("slice_tiling", "param x: f32[3, 6]", "concat([slice(x, 1, 3, 6), slice(x, 1, 0, 3)], dim=1) * x",
         {"x": normal(3, 6)}, lambda P, I: torch.cat([P["x"][:, 3:6], P["x"][:, 0:3]], 1) * P["x"]),
    Case("concat", "param a: f32[2, 3]\n param b: f32[2, 2]", "concat([a, b, a], dim=1) * concat([b, a, a], dim=-1)",
         {"a": normal(2, 3), "b": normal(2, 2)},
         lambda P, I: torch.cat([P["a"], P["b"], P["a"]], 1) * torch.cat([P["b"], P["a"], P["a"]], -1)),
    Case("matmul_batch_broadcast", "param a: f32[2, 1, 3, 4]\n param b: f32[5, 4, 6]\n param w: f32[6, 2]",
         "(a @ b) @ w", {"a": normal(2, 1, 3, 4), "b": normal(5, 4, 6), "w": normal(6, 2)},
         lambda P, I: (P["a"] @ P["b"]) @ P["w"]),
    Case("matmul_left_matrix", "param m: f32[3, 4]\n param b: f32[5, 4, 6]", "m @ b",
         {"m": normal(3, 4), "b": normal(5, 4, 6)}, lambda P, I: P["m"] @ P["b"]),
    Case("linear", "param x: f32[2, 3, 6]\n param v: f32[6]\n l = Linear(6, 5)", "l(x) + l(v)",
         {"x": normal(2, 3, 6), "v": normal(6), "l.weight": normal(5, 6), "l.bias": normal(5)},
         lambda P, I: F.linear(P["x"], P["l.weight"], P["l.bias"]) + F.linear(P["v"], P["l.weight"], P["l.bias"])),
    Case("embedding", "e = Embedding(10, 4)", "e(idx)", {"e.weight": normal(10, 4)},
         lambda P, I: F.embedding(I["idx"].long(), P["e.weight"]), ints={"idx": ((2, 7), 5)}),  # repeated rows
    Case("rmsnorm", "param x: f32[2, 3, 8]\n n = RMSNorm(8)", "n(x)", {"x": normal(2, 3, 8), "n.weight": around1(8)},
         lambda P, I: rmsnorm(P["x"], P["n.weight"])),
    Case("layernorm", "param x: f32[2, 3, 8]\n n = LayerNorm(8)\n m = LayerNorm(8, elementwise_affine=false)",
         "n(x) * m(x)", {"x": normal(2, 3, 8), "n.weight": around1(8), "n.bias": normal(8)},
         lambda P, I: F.layer_norm(P["x"], (8,), P["n.weight"], P["n.bias"], 1e-5) * F.layer_norm(P["x"], (8,), eps=1e-5)),
    Case("mha", "param x: f32[2, 5, 8]\n a = MultiheadAttention(8, 2)", "a(x, x, x)",
         {"x": normal(2, 5, 8), "a.in_proj_weight": normal(24, 8), "a.in_proj_bias": normal(24),
          "a.out_proj.weight": normal(8, 8), "a.out_proj.bias": normal(8)},
         lambda P, I: mha("a.", P, P["x"], P["x"], P["x"], 2)),
    Case("mha_causal", "param x: f32[2, 6, 8]\n a = MultiheadAttention(8, 4, causal=true)", "a(x)",
         {"x": normal(2, 6, 8), "a.in_proj_weight": normal(24, 8), "a.in_proj_bias": normal(24),
          "a.out_proj.weight": normal(8, 8), "a.out_proj.bias": normal(8)},
         lambda P, I: mha("a.", P, P["x"], P["x"], P["x"], 4, causal=True)),
    Case("mha_cross_nobias", "param x: f32[2, 5, 8]\n param y: f32[2, 5, 8]\n a = MultiheadAttention(8, 2, bias=false)",
         "a(x, y, y)", {"x": normal(2, 5, 8), "y": normal(2, 5, 8), "a.in_proj_weight": normal(24, 8),
                        "a.out_proj.weight": normal(8, 8)},
         lambda P, I: mha("a.", P, P["x"], P["y"], P["y"], 2, bias=False)),
    # cross-attention: query and key lengths differ, so the gradient is composed of matmuls and softmax
    Case("mha_cross_lengths", "param x: f32[2, 5, 8]\n param y: f32[2, 7, 8]\n a = MultiheadAttention(8, 2)", "a(x, y, y)",
         {"x": normal(2, 5, 8), "y": normal(2, 7, 8), "a.in_proj_weight": normal(24, 8), "a.in_proj_bias": normal(24),
          "a.out_proj.weight": normal(8, 8), "a.out_proj.bias": normal(8)},
         lambda P, I: mha("a.", P, P["x"], P["y"], P["y"], 2)),
    Case("mha_cross_causal", "param x: f32[2, 4, 8]\n param y: f32[2, 6, 8]\n a = MultiheadAttention(8, 2, causal=true)",
         "a(x, y, y)", {"x": normal(2, 4, 8), "y": normal(2, 6, 8), "a.in_proj_weight": normal(24, 8),
                        "a.in_proj_bias": normal(24), "a.out_proj.weight": normal(8, 8), "a.out_proj.bias": normal(8)},
         lambda P, I: mha("a.", P, P["x"], P["y"], P["y"], 2, causal=True)),
    Case("attention_cross_dv", "param q: f32[2, 3, 6, 4]\n param k: f32[2, 3, 5, 4]\n param v: f32[2, 3, 5, 7]",
         "attention(q, k, v, causal=true, scale=0.3) + attention(q, k, v)",
         {"q": normal(2, 3, 6, 4), "k": normal(2, 3, 5, 4), "v": normal(2, 3, 5, 7)},
         lambda P, I: sdpa(P["q"], P["k"], P["v"], 0.3, True) + sdpa(P["q"], P["k"], P["v"], 0.5, False)),
    Case("cross_entropy", "param z: f32[2, 3, 7]", "z", {"z": normal(2, 3, 7)}, lambda P, I: P["z"],
         ints={"t": ((2, 3), 7)}, ce="t"),
    Case("cross_entropy_linear", "l = Linear(6, 7)\n param x: f32[4, 6]", "l(x)",
         {"l.weight": normal(7, 6), "l.bias": normal(7), "x": normal(4, 6)},
         lambda P, I: F.linear(P["x"], P["l.weight"], P["l.bias"]), ints={"t": ((4,), 7)}, ce="t"),
]


def mdl_source(c, out_shape):
    args = [n for n in c.ints if n != c.ce]
    sig = ", ".join(f"{n}: i32[{', '.join(map(str, c.ints[n][0]))}]" for n in args)
    ins = "".join(f"    input {n}: i32[{', '.join(map(str, s))}]\n" for n, (s, _) in c.ints.items())
    if c.ce:
        loss = f"cross_entropy(model({', '.join(args)}), {c.ce})"
    else:
        ins += f"    input r: f32[{', '.join(map(str, out_shape))}]\n"
        loss = f"sum(model({', '.join(args)}) * r)"
    return (f"# grad_check case {c.name}\nmodule T {{\n {c.members}\n forward({sig}) {{ return {c.expr} }}\n}}\n"
            f"train T {{\n{ins}    loss = {loss}\n}}\n")


def ref_loss(c, P, I):
    y = c.fn(P, I)
    if c.ce:
        return F.cross_entropy(y.reshape(-1, y.shape[-1]), I[c.ce].long().reshape(-1))
    return (y * I["r"]).sum()


def fd64(c, P, I):
    """Central differences of the float64 loss, every element of every parameter."""
    grads = {}
    with torch.no_grad():
        for name, t in P.items():
            g = torch.zeros_like(t)
            flat, gflat = t.view(-1), g.view(-1)
            for i in range(flat.numel()):
                x0 = flat[i].item()
                flat[i] = x0 + FD64_STEP
                lp = ref_loss(c, P, I).item()
                flat[i] = x0 - FD64_STEP
                lm = ref_loss(c, P, I).item()
                flat[i] = x0
                gflat[i] = (lp - lm) / (2 * FD64_STEP)
            grads[name] = g
    return grads


def check_case(c, exe, root, seed):
    work = os.path.join(root, c.name)
    os.makedirs(work, exist_ok=True)
    g = torch.Generator().manual_seed(seed)
    W = {n: draw(kind, shape, g) for n, (kind, shape) in c.params.items()}
    I32 = {n: torch.randint(0, high, shape, generator=g, dtype=torch.int32) for n, (shape, high) in c.ints.items()}
    P = {n: w.double().requires_grad_() for n, w in W.items()}
    I = dict(I32)
    with torch.no_grad():
        out_shape = tuple(c.fn(P, I).shape)
    if not c.ce:
        I["r"] = torch.randn(out_shape, generator=g).float()
    mdl = os.path.join(work, "model.mdl")
    with open(mdl, "w") as f:
        f.write(mdl_source(c, out_shape))
    weights = os.path.join(work, "weights.safetensors")
    write_safetensors(weights, W, {"format": "pt"})
    files = {}
    for n, t in I.items():
        files[n] = os.path.join(work, f"{n}.bin")
        t.numpy().tofile(files[n])
    outs = run_entry(exe, mdl, work, weights, files,
                     [] if c.lossy else ["--fd", str(FD32_POINTS), "--fd-step", str(FD32_STEP)])

    # The float64 references, from the f32 weights and inputs exactly.
    Iref = {n: (t.double() if t.dtype == torch.float32 else t) for n, t in I.items()}
    loss = ref_loss(c, P, Iref)
    loss.backward()
    auto = {n: p.grad for n, p in P.items()}
    fd = None if c.lossy else fd64(c, {n: p.detach().clone() for n, p in P.items()}, Iref)
    tol_auto = TOL_LOSSY if c.lossy else TOL_AUTOGRAD

    failures = []
    want = {f"grad:{n}" for n in P}
    got = {n for n in outs if n.startswith("grad:")}
    if got != want:
        failures.append(f"grad outputs {sorted(got)}, want {sorted(want)}")
    lerr = abs(outs["loss"].item() - loss.item()) / max(abs(loss.item()), 1e-30)
    if lerr > (TOL_LOSSY if c.lossy else TOL_LOSS):
        failures.append(f"loss {outs['loss'].item():.9g} against {loss.item():.9g}: relative error {lerr:.3g}")
    worst = {"autograd": 0.0, "fd64": float("nan") if c.lossy else 0.0, "fd32": float("nan") if c.lossy else 0.0}
    for n in P:
        if f"grad:{n}" not in outs:
            continue
        gm = outs[f"grad:{n}"]
        ea = rel_err(gm, auto[n])
        worst["autograd"] = max(worst["autograd"], ea)
        if ea > tol_auto:
            failures.append(f"grad:{n}: relative error {ea:.3g} against torch.autograd (tolerance {tol_auto})")
        if fd is None:
            continue
        ef = rel_err(gm, fd[n])
        worst["fd64"] = max(worst["fd64"], ef)
        if ef > TOL_FD64:
            failures.append(f"grad:{n}: relative error {ef:.3g} against float64 central differences (tolerance {TOL_FD64})")
    # The compiled model's own central differences.
    scale = {n: float(outs[f"grad:{n}"].abs().max()) for n in P if f"grad:{n}" in outs}
    if c.lossy:
        return worst, failures
    with open(os.path.join(work, "fd.txt")) as f:
        for line in f:
            n, idx, gv, fv = line.split()
            e = abs(float(gv) - float(fv)) / max(scale[n], 1e-30)
            worst["fd32"] = max(worst["fd32"], e)
            if e > TOL_FD32:
                failures.append(f"grad:{n}[{idx}] = {float(gv):.6g}, its own f32 central difference {float(fv):.6g}: "
                                f"error {e:.3g} of max|grad| (tolerance {TOL_FD32})")
    return worst, failures


def cmd_ops(a):
    cases = [c for c in CASES if not a.k or a.k in c.name]
    if not cases:
        sys.exit(f"no case matches {a.k!r}")
    print(f"{'case':26s} {'vs autograd f64':>16s} {'vs f64 central diff':>20s} {'vs own f32 central diff':>24s}")
    bad = 0
    for c in cases:
        t0 = time.time()
        try:
            worst, failures = check_case(c, a.train_entry, a.work, zlib.crc32(c.name.encode()))
        except RuntimeError as e:
            print(f"{c.name:26s} FAILED to run\n{e}")
            bad += 1
            continue
        status = "ok" if not failures else "FAIL"
        print(f"{c.name:26s} {worst['autograd']:16.3g} {worst['fd64']:20.3g} {worst['fd32']:24.3g}  {status}"
              f"  ({time.time() - t0:.1f} s)")
        for f in failures:
            print("    " + f)
        bad += bool(failures)
    print(f"tolerances: {TOL_AUTOGRAD} (autograd), {TOL_FD64} (float64 central differences, step {FD64_STEP}), "
          f"{TOL_FD32} of max|grad| (the compiled model's f32 central differences, step {FD32_STEP}); "
          f"error = max|mlc - ref| / max|ref|")
    print(f"{len(cases) - bad} of {len(cases)} cases pass")
    return 1 if bad else 0


def cmd_minillm(a):
    cfg = dict(vocab=512, dim=128, layers=2, heads=4)
    batch, seq = 2, 64
    work = os.path.join(a.work, "minillm")
    os.makedirs(work, exist_ok=True)
    torch.manual_seed(0)
    ref = MiniLLM(**cfg).float()
    with torch.no_grad():  # the attention biases start at zero in PyTorch; make them count
        for p in ref.parameters():
            if p.dim() == 1:
                p.add_(torch.randn_like(p) * 0.1)
    weights = os.path.join(work, "weights.safetensors")
    write_safetensors(weights, {k: v.detach() for k, v in ref.state_dict().items()}, {"format": "pt"})
    tokens = torch.randint(0, cfg["vocab"], (batch, seq), dtype=torch.int32)
    targets = torch.randint(0, cfg["vocab"], (batch, seq), dtype=torch.int32)
    files = {"tokens": os.path.join(work, "tokens.bin"), "targets": os.path.join(work, "targets.bin")}
    tokens.numpy().tofile(files["tokens"])
    targets.numpy().tofile(files["targets"])
    defines = [f"{k}={v}" for k, v in cfg.items()] + [f"batch={batch}", f"seq={seq}", "compute=f32"]  # fp32: the 1e-4 check
    t0 = time.time()
    outs = run_entry(a.train_entry, a.model, work, weights, files, defines + ["--threads", "2"])
    t1 = time.time()

    def grads(model):
        model.zero_grad()
        logits = model(tokens.long())
        loss = F.cross_entropy(logits.view(-1, cfg["vocab"]), targets.view(-1).long())
        loss.backward()
        return loss.item(), {n: p.grad.detach().clone() for n, p in model.named_parameters()}

    loss32, g32 = grads(ref)
    ref64 = MiniLLM(**cfg).double()
    ref64.load_state_dict({k: v.double() for k, v in ref.state_dict().items()})
    for m in ref64.modules():  # keep f32's eps, as mlc does, instead of finfo(float64).eps
        if isinstance(m, RMSNorm):
            m.forward = lambda x, m=m: rmsnorm(x, m.weight)
    loss64, g64 = grads(ref64)
    failures = []
    lerr = abs(outs["loss"].item() - loss64) / abs(loss64)
    print(f"small MiniLLM train entry ({t1 - t0:.1f} s): loss {outs['loss'].item():.7g}, torch fp32 {loss32:.7g}, "
          f"fp64 {loss64:.7g}; relative error vs fp64 {lerr:.3g}")
    if lerr > TOL_LOSS:
        failures.append(f"loss relative error {lerr:.3g} (tolerance {TOL_LOSS})")
    want = {f"grad:{n}" for n in g32}
    got = {n for n in outs if n.startswith("grad:")}
    if got != want:
        failures.append(f"grad outputs {sorted(got ^ want)} differ from the parameters")
    print(f"{'parameter':36s} {'vs torch fp32':>14s} {'mlc vs fp64':>12s} {'torch fp32 vs fp64':>19s}")
    worst = 0.0
    for n in g32:
        if f"grad:{n}" not in outs:
            continue
        gm = outs[f"grad:{n}"]
        e32, e64, t64 = rel_err(gm, g32[n]), rel_err(gm, g64[n]), rel_err(g32[n], g64[n])
        worst = max(worst, e32)
        print(f"{n:36s} {e32:14.3g} {e64:12.3g} {t64:19.3g}")
        if e32 > TOL_AUTOGRAD:
            failures.append(f"grad:{n}: relative error {e32:.3g} against torch fp32 autograd (tolerance {TOL_AUTOGRAD})")
    print(f"worst relative error against torch fp32 autograd: {worst:.3g} (tolerance {TOL_AUTOGRAD}; "
          f"error = max|mlc - torch| / max|torch| per parameter)")
    for f in failures:
        print("FAIL " + f)
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["ops", "minillm"])
    ap.add_argument("train_entry")
    ap.add_argument("work")
    ap.add_argument("-k", default=None, help="only the cases whose name contains this")
    ap.add_argument("--model", default=None)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    sys.exit(cmd_ops(a) if a.what == "ops" else cmd_minillm(a))


if __name__ == "__main__":
    main()
