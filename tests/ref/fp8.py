"""FP8 on the CPU target (issue 30): the quant and scaled_mm kernels, and a
train step under precision(matmul=fp8), against tests/ref/fp8_ref.py.

  fp8.py OPCHECK TRAIN_ENTRY ROOT WORKDIR
  fp8.py OPCHECK MLC ROOT WORKDIR --target cuda     (on a GPU: parts 1-3 on
                                                    CUDA's kernels, and 4b)

1. The reference itself: known code points (448 is 0x7e, 57344 is 0x7b,
   2^-9 and 2^-16 the smallest subnormals), ties to even (464 between 448
   and 480 goes to 448), saturation, NaN, and that decoding every finite
   code and quantising it again gives the code back.
2. quant (mlc_opcheck --op quant), byte for byte against the reference, for
   e4m3 and e5m2: every finite code's value and every midpoint between
   neighbours, the f32 values just either side of each midpoint, +-0,
   values past the largest, +-inf and NaN, at amax = fmax (scale 1); random
   values at amax 3, 1e-30 (the 1e-12 floor) and 3e38; amax 0 (zeros); amax
   NaN and inf (every code NaN); and bf16 input.
3. scaled_mm (--op scaled_mm) on random finite codes: f32 output within
   1e-6 of max |ref| (f32 accumulation over k = 208; on CUDA 2^-10: the FP8
   tensor cores' own sums) and bf16 output within 2^-8 (bf16's rounding), where ref is numpy's float64 product of the
   decoded, unscaled operands; an amax of NaN makes every output NaN.
4. A train step of tests/ref/fp8.mdl (l1, l2 in FP8, the head in f32)
   through train_entry: the loss and every gradient against numpy running
   the same recipe (x, w e4m3, g e5m2, a power-of-two scale per tensor,
   f32 storage between ops, float64 products rounded to f32), within 1e-5
   of max |ref|; and against the plain f32 step, whose gradients each must
   differ by between 1e-3 (FP8 really ran) and 0.5 (a loose bound: e5m2's
   rounding alone is up to 1/8 of each value) in relative L2.

4b. (--target cuda) `mlc train --target cuda --steps 2` of tests/ref/fp8.mdl
   from the same weights and batch: step 1's loss within 1e-4 of numpy's
   recipe (not 1e-5: the tensor cores sum FP8 products in about 14 bits),
   and step 2's (after SGD with the FP8 gradients) within 1e-4 of
   the recipe's second step, so the CUDA gradients are checked through the
   update.

Run with /usr/bin/python3 (Debian's numpy and torch)."""
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import fp8_ref as R  # noqa: E402
from models import Checks, run_entry, write_safetensors  # noqa: E402

opcheck, train_entry, root, work = sys.argv[1:5]
target = sys.argv[6] if len(sys.argv) > 6 and sys.argv[5] == "--target" else "cpu"
os.makedirs(work, exist_ok=True)
check = Checks()
F32 = np.float32


# ---- 1. the reference ----
for fmt, big, top in (("e4m3", 448.0, 0x7E), ("e5m2", 57344.0, 0x7B)):
    t = R.decode(fmt)
    check(t[top] == big and R.quantize([big], fmt)[0] == top, f"{fmt}: the largest finite value {big} is code {top:#x}")
    fin = [c for c in range(256) if np.isfinite(t[c])]
    back = R.quantize(t[fin], fmt)
    check(list(back) == fin, f"{fmt}: decoding each of its {len(fin)} finite codes and quantising gives the code back")
    check(R.quantize([1e30, -np.inf], fmt).tolist() == [top, top | 0x80], f"{fmt}: 1e30 and -inf saturate to +-{big}")
    check(R.quantize([np.nan], fmt)[0] & 0x7F == 0x7F and np.isnan(t[0x7F]), f"{fmt}: NaN gives a NaN code")
check(R.decode("e4m3")[1] == 2.0 ** -9 and R.decode("e5m2")[1] == 2.0 ** -16, "the smallest subnormals are 2^-9 and 2^-16")
check(R.quantize([464.0, 465.0, 3 * 2.0 ** -10], "e4m3").tolist() == [0x7E, 0x7E, 0x02],
      "e4m3: 464 (a tie between 448 and 480) and 465 give 448; 1.5 * 2^-9 ties to the even 2^-8")
check(R.quantize([61440.0, 2.5 * 2.0 ** -16], "e5m2").tolist() == [0x7B, 0x02],
      "e5m2: 61440 (a tie between 57344 and inf) saturates to 57344; 2.5 * 2^-16 ties to 2 * 2^-16")
check(R.scale_exp(448.0, "e4m3") == 0 and R.scale_exp(1.0, "e4m3") == 8 and R.scale_exp(0.0, "e4m3") == 48,
      "scale exponents: amax 448 -> 0, 1 -> 8 (448 / 1 = 2^8.8), 0 -> 48 (the 1e-12 floor)")


# ---- 2. quant ----
def opcheck_run(name, op, ins, dtype, files):
    """mlc_opcheck --op op with inputs from raw files; returns the output's bytes."""
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    cmd = [opcheck, "--op", op, d, "--dtype", dtype, "--target", target]
    for n, t in ins:
        cmd += ["--in", f"{n}:{t}"]
    for n, data in files.items():
        path = os.path.join(d, f"{n}.raw")
        data.tofile(path)
        cmd += ["--input-file", f"{n}={path}"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"{' '.join(cmd)} failed:\n{r.stdout}{r.stderr}")
    return np.fromfile(os.path.join(d, "output.output.bin"), dtype=np.uint8)


def probes(fmt):
    """Every finite code's value, every midpoint, the f32 neighbours of each midpoint, and the edges."""
    t = R.decode(fmt)
    v = np.sort(t[[c for c in range(128) if np.isfinite(t[c])]])
    mid = (v[:-1] + v[1:]) / 2
    m32 = mid.astype(F32)
    assert np.all(m32 == mid), "midpoints are exact in f32"
    near = np.concatenate([np.nextafter(m32, F32(0)), np.nextafter(m32, F32(np.inf))])
    edge = np.array([0.0, R.FORMATS[fmt][3] * 1.03, R.FORMATS[fmt][3] * 2, 1e30, np.inf, np.nan, 2.0 ** -30], F32)
    p = np.concatenate([v.astype(F32), m32, near, edge])
    return np.concatenate([p, -p]).astype(F32)


rng = np.random.default_rng(7)
for fmt in ("e4m3", "e5m2"):
    dt = "f8" + fmt
    fmax = R.FORMATS[fmt][3]
    p = probes(fmt)
    got = opcheck_run(f"quant_{fmt}_probes", "quant", [("x", f"f32[{p.size}]"), ("amax", "f32[]")], dt,
                      {"x": p, "amax": np.array(fmax, F32)})
    want = R.quant(p.astype(np.float64), fmax, fmt)
    bad = np.nonzero(got != want)[0]
    check(bad.size == 0, f"quant {fmt} at amax {fmax:g} (scale 1): {p.size} code points, midpoints, their f32 "
          f"neighbours and edges byte for byte" + (f"; first differences: x={p[bad[:4]]} got {got[bad[:4]]} want "
                                                   f"{want[bad[:4]]}" if bad.size else ""))
    for amax in (3.0, 1e-30, 3e38, 0.0, np.nan, np.inf):
        scale = 2.0 ** R.scale_exp(amax, fmt) if np.isfinite(amax) else 1.0
        x = (rng.uniform(-1, 1, 4099) * (amax if np.isfinite(amax) and amax > 0 else 1.0)).astype(F32)
        if np.isfinite(amax) and amax > 0:  # the probes moved to where the scale puts them on the codes
            with np.errstate(over="ignore"):  # at amax 3e38, e5m2's largest ones overflow f32: inf, saturated
                x = np.concatenate([x, (p[np.isfinite(p) & (np.abs(p) <= fmax)] / scale).astype(F32)])
        if amax == 0.0:
            x = np.zeros(1000, F32)
        got = opcheck_run(f"quant_{fmt}_{amax:g}", "quant", [("x", f"f32[{x.size}]"), ("amax", "f32[]")], dt,
                          {"x": x, "amax": np.array(amax, F32)})
        if np.isfinite(amax):
            check(np.array_equal(got, R.quant(x.astype(np.float64), amax, fmt)),
                  f"quant {fmt} at amax {amax:g}: {x.size} values byte for byte")
        else:  # the NaN's sign and payload are not specified
            check(np.all(np.isnan(R.decode(fmt)[got])), f"quant {fmt} at amax {amax:g}: all {x.size} codes NaN")
    # bf16 input: the code points and midpoints (at most 5 significant bits) are exact in bf16
    t = R.decode(fmt)
    v = np.sort(t[[c for c in range(128) if np.isfinite(t[c])]])
    xb = np.concatenate([v, (v[:-1] + v[1:]) / 2]).astype(F32)
    xb = np.concatenate([xb, -xb])
    bits = (xb.view(np.uint32) >> 16).astype(np.uint16)
    assert np.all((bits.astype(np.uint32) << 16).view(F32) == xb)
    got = opcheck_run(f"quant_{fmt}_bf16", "quant", [("x", f"bf16[{xb.size}]"), ("amax", "f32[]")], dt,
                      {"x": bits, "amax": np.array(fmax, F32)})
    check(np.array_equal(got, R.quant(xb.astype(np.float64), fmax, fmt)), f"quant {fmt} from bf16: {xb.size} values byte for byte")
    if target == "cuda":  # quant_both (the fp8 pass's on CUDA): the codes, then the same codes transposed
        for rows, cols, src in ((80, 208, "f32"), (1040, 336, "bf16")):  # tiles of 64 cut at both edges
            x = rng.normal(0, 2, (rows, cols)).astype(F32)
            x.flat[: p.size] = p[: x.size]  # the probes (inf, NaN, midpoints) among them
            x.flat[5] = -100.0  # amax 100: a scale that moves them
            if src == "bf16":
                x = ((x.view(np.uint32) >> 16) << 16).view(F32)  # exactly bf16
            raw = (x.view(np.uint32) >> 16).astype(np.uint16) if src == "bf16" else x
            got = opcheck_run(f"quant_both_{fmt}_{src}", "quant_both", [("x", f"{src}[{rows}, {cols}]"), ("amax", "f32[]")], dt,
                              {"x": raw, "amax": np.array(100.0, F32)})
            want = R.quant(x.astype(np.float64).ravel(), 100.0, fmt).reshape(rows, cols)
            check(np.array_equal(got, np.concatenate([want.ravel(), want.T.ravel()])),
                  f"quant_both {fmt} of {src}[{rows}, {cols}] at amax 100: the codes and their transpose byte for byte")


# ---- 3. scaled_mm ----
def finite_codes(fmt, shape):
    t = R.decode(fmt)
    fin = np.array([c for c in range(256) if np.isfinite(t[c])], np.uint8)
    return fin[rng.integers(0, fin.size, shape)]


M, N, K = 37, 50, 208
for fa, fb, out in (("e4m3", "e4m3", "f32"), ("e5m2", "e4m3", "f32"), ("e4m3", "e4m3", "bf16")):
    a, b = finite_codes(fa, (M, K)), finite_codes(fb, (N, K))
    aa, ab = F32(5.5), F32(0.0123)
    ref = R.dequant(a, aa, fa) @ R.dequant(b, ab, fb).T
    raw = opcheck_run(f"scaled_mm_{fa}_{fb}_{out}", "scaled_mm",
                      [("a", f"f8{fa}[{M}, {K}]"), ("b", f"f8{fb}[{N}, {K}]"), ("aa", "f32[]"), ("ab", "f32[]")], out,
                      {"a": a, "b": b, "aa": np.array(aa), "ab": np.array(ab)})
    got = raw.view(F32) if out == "f32" else (raw.view(np.uint16).astype(np.uint32) << 16).view(F32)
    err = float(np.abs(got.reshape(M, N) - ref).max() / np.abs(ref).max())
    # f32 out: the CPU sums in f32 (1e-6); CUDA's FP8 wgmma keeps about 14 bits as it sums inside the
    # tensor core (DeepSeek-V3's report, 3.5.2) before mlc adds each k-tile of 128 into f32 registers:
    # 2^-10 of max |ref| bounds that with room (measured 3.6e-4 at this shape with no such promotion)
    tol = (1e-6 if target == "cpu" else 2.0 ** -10) if out == "f32" else 2.0 ** -8
    check(err <= tol, f"scaled_mm {fa} x {fb} -> {out} [{M}, {K}] x [{N}, {K}]: error {err:.2e} of max |ref| (tolerance {tol:.1e})")
a, b = finite_codes("e4m3", (M, K)), finite_codes("e4m3", (N, K))
raw = opcheck_run("scaled_mm_nan", "scaled_mm", [("a", f"f8e4m3[{M}, {K}]"), ("b", f"f8e4m3[{N}, {K}]"), ("aa", "f32[]"),
                                                 ("ab", "f32[]")], "f32",
                  {"a": R.quant(R.decode("e4m3")[a], np.nan, "e4m3"), "b": b, "aa": np.array(np.nan, F32), "ab": np.array(1.0, F32)})
check(np.all(np.isnan(raw.view(F32))), "scaled_mm: the codes quant gives at amax NaN make every output NaN")


# ---- 4. a train step of tests/ref/fp8.mdl ----
import torch  # noqa: E402  (models.py's safetensors writer takes torch tensors)

B, I, H, C = 32, 48, 64, 16
W = {"l1.weight": rng.uniform(-0.14, 0.14, (H, I)), "l1.bias": rng.uniform(-0.1, 0.1, H),
     "l2.weight": rng.uniform(-0.12, 0.12, (H, H)), "l2.bias": rng.uniform(-0.1, 0.1, H),
     "head.weight": rng.uniform(-0.12, 0.12, (C, H)), "head.bias": rng.uniform(-0.1, 0.1, C)}
W = {k: v.astype(F32) for k, v in W.items()}
x = rng.normal(0, 1, (B, I)).astype(F32)
labels = rng.integers(0, C, B).astype(np.int32)
wpath = os.path.join(work, "w.safetensors")
write_safetensors(wpath, {k: torch.from_numpy(v) for k, v in W.items()}, {"format": "pt"})
x.tofile(os.path.join(work, "x.raw"))
labels.tofile(os.path.join(work, "labels.raw"))
inputs = {"x": os.path.join(work, "x.raw"), "labels": os.path.join(work, "labels.raw")}


def f32(v):
    return np.asarray(v, np.float64).astype(F32)


def q(v, fmt):
    """v (f32) as the scaled_mm sees it after quant: decoded and unscaled, float64."""
    amax = F32(np.abs(v).max())
    return R.dequant(R.quant(v.astype(np.float64), amax, fmt), amax, fmt)


def step(fp8):
    """numpy's train step: loss and gradients, as mlc computes them (f32 between ops)."""
    def mm(a, b_t, fa, fb):  # a [m, k] @ b_t [n, k]^T
        return f32(q(a, fa) @ q(b_t, fb).T) if fp8 else f32(a.astype(np.float64) @ b_t.astype(np.float64).T)
    y1 = mm(x, W["l1.weight"], "e4m3", "e4m3") + W["l1.bias"]
    h1 = np.maximum(y1, 0)
    y2 = mm(h1, W["l2.weight"], "e4m3", "e4m3") + W["l2.bias"]
    h2 = np.maximum(y2, 0)
    logits = f32(h2.astype(np.float64) @ W["head.weight"].T.astype(np.float64)) + W["head.bias"]
    z = logits.astype(np.float64) - logits.max(1, keepdims=True)
    lse = np.log(np.exp(z).sum(1))
    loss = float(np.mean(lse - z[np.arange(B), labels]))
    p = np.exp(z - lse[:, None])
    p[np.arange(B), labels] -= 1
    dlog = f32(p / B)
    G = {"head.weight": f32(dlog.T.astype(np.float64) @ h2), "head.bias": f32(dlog.sum(0))}
    dh2 = f32(dlog.astype(np.float64) @ W["head.weight"])
    g2 = np.where(h2 > 0, dh2, 0).astype(F32)
    G["l2.weight"] = mm(g2.T.copy(), h1.T.copy(), "e5m2", "e4m3")
    G["l2.bias"] = f32(g2.sum(0))
    dh1 = mm(g2, W["l2.weight"].T.copy(), "e5m2", "e4m3")
    g1 = np.where(h1 > 0, dh1, 0).astype(F32)
    G["l1.weight"] = mm(g1.T.copy(), x.T.copy(), "e5m2", "e4m3")
    G["l1.bias"] = f32(g1.sum(0))
    return loss, G


if target == "cuda":  # 4b: train_entry is the mlc binary; two steps of SGD on the GPU
    import re
    mlc = train_entry
    rl8, ref8 = step(True)
    np.save(os.path.join(work, "x.npy"), x)
    np.save(os.path.join(work, "labels.npy"), labels)
    r = subprocess.run([mlc, "train", os.path.join(root, "tests/ref/fp8.mdl"), "--target", "cuda", "--steps", "2",
                        "--weights", wpath, "--input", f"x={work}/x.npy", "--input", f"labels={work}/labels.npy"],
                       capture_output=True, text=True)
    losses = [float(v) for v in re.findall(r"step \d+: loss ([-0-9.e+naif]+)", r.stdout)]
    check(r.returncode == 0 and len(losses) == 2, f"mlc train --target cuda --steps 2 ran: {r.stdout[-300:]}{r.stderr[-600:]}")
    if len(losses) == 2:
        W1 = dict(W)
        for k in W:
            W[k] = (W1[k] - F32(0.1) * ref8[k]).astype(F32)
        rl8b, _ = step(True)
        W.update(W1)
        check(abs(losses[0] - rl8) <= 1e-4 * abs(rl8),
              f"cuda fp8 step 1: loss {losses[0]:.7f}, numpy's recipe {rl8:.7f} (tolerance 1e-4: the FP8 tensor cores' sums)")
        check(abs(losses[1] - rl8b) <= 1e-4 * abs(rl8b),
              f"cuda fp8 step 2 (after SGD on the FP8 gradients): loss {losses[1]:.7f}, numpy's recipe {rl8b:.7f} (tolerance 1e-4)")
    sys.exit(check.finish())


def mlc_step(mdl, name):
    os.makedirs(os.path.join(work, name), exist_ok=True)
    outs = run_entry(train_entry, mdl, os.path.join(work, name), wpath, inputs)
    return float(outs["loss"].reshape(-1)[0]), {k[5:]: outs[k].numpy() for k in outs if k.startswith("grad:")}


mdl8 = os.path.join(root, "tests/ref/fp8.mdl")
plain = os.path.join(work, "plain.mdl")
with open(mdl8) as f:
    open(plain, "w").write(f.read().replace("precision(matmul=fp8)", ""))
loss8, got8 = mlc_step(mdl8, "step_fp8")
loss32, got32 = mlc_step(plain, "step_f32")
rl8, ref8 = step(True)
rl32, ref32 = step(False)
check(sorted(got8) == sorted(W), f"the fp8 step has a gradient for each parameter: {sorted(got8)}")
check(abs(loss8 - rl8) <= 1e-5 * abs(rl8), f"fp8 step: loss {loss8:.7f}, numpy's recipe {rl8:.7f}")
for k in W:
    e = float(np.abs(got8[k] - ref8[k]).max() / np.abs(ref8[k]).max())
    moved = float(np.linalg.norm(got8[k] - got32[k]) / np.linalg.norm(got32[k]))
    check(e <= 1e-5 and 1e-3 < moved < 0.5,
          f"fp8 step: grad {k} within {e:.1e} of numpy's recipe (tolerance 1e-5); {moved:.3f} from the f32 step's in "
          f"relative L2 (in (1e-3, 0.5): FP8 really ran, and e5m2's 2 mantissa bits did not wreck it)")
check(abs(loss32 - rl32) <= 1e-5 * abs(rl32), f"the f32 step's loss {loss32:.7f} against numpy's {rl32:.7f}")
sys.exit(check.finish())
