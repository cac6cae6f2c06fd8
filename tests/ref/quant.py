"""--quantize int8|int4[:asym][:scales=f32] against numpy: the packing's
arithmetic written again here (symmetric per group: scale = max |w| / qmax,
codes rounded half to even and clamped to [-qmax, qmax]; asymmetric: lo = min
w, scale = (max w - lo) / (2^bits - 1), codes round((w - lo) / scale) clamped
to [0, 2^bits - 1], read back as lo + code * scale; with bf16 scales, the
default, lo rounded to bf16 toward -inf and then the scale toward +inf before
the codes are made), then x @ dequant(w)^T.

- mlc's qlinear output matches numpy's product with the dequantised weight
  to a relative error (max |mlc - numpy| / max |numpy|) of 1e-5: the same
  arithmetic, only the order of the f32 sums differs.  This checks the codes,
  their packing (int4's nibble order), the scales and the kernel.
- The error against the f32 product stays within what the rounding allows:
  each |w - dequant(w)| <= scale / 2, so |y - yq| <= sum_k |x_k| scale_g / 2
  row by row (checked with 1 % slack), and int8's is under int4's.
- Shapes: one row of x (decode's GEMV) and 7 (a prefill), n = 37 (not a
  multiple of the CUDA kernel's 4 columns), k = 256 with groups of 32, 64,
  128 and 256; then 20 rows (the CUDA kernel's 8 a block, twice and a part)
  and k = 2304 with one row (its warps' spans of 160 words, the last
  shorter), groups of 32 and 128.
- Every case with bf16 scales (the default); the first group of each with
  :scales=f32 too.
- Teeth: the reference with int4's nibbles swapped, or scales per 2G (3G
  where 2G does not divide k), is rejected by the same bound; for the asymmetric form also the one that
  reads its codes as two's complement (the symmetric form's), or leaves the
  min out; for bf16 scales the one that takes each group's scale from the
  other half of its word (symmetric: group g ^ 1's; asymmetric: the min).
- The asymmetric form (:asym) through the same checks, int8 and int4, on
  k = 384 (groups 32, 64, 128) and 2304 (32, 128), one row, 7 and 20; the
  weights hold a group of zeros, a constant group, a negative-only and a
  positive-only group (of 32), and an outlier.
- An epilogue: silu(x @ dequant(w)^T + b) + r (a bias, SiLU and a residual
  add, which the CUDA target fuses into the qlinear's kernel, as a decode
  step's layers have them) against numpy in float64 within 1e-5, one row
  and 7, int8 and int4, symmetric and asymmetric.

With --target spirv (a Vulkan device: lavapipe in CI; exit 77 without one)
the same checks run through the SPIR-V target's qlinear kernels: its GEMV
(one row) and its thread-per-output kernel (7 rows).

--target cuda runs them through the CUDA target's qlinear (mlc_qgemv).

Usage: quant.py MLC WORKDIR [--target spirv|cuda]"""
import os
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "runtime", "tests"))
from make_reference_st import write_safetensors  # noqa: E402

N = 37
ALL = (32, 64, 128, 256)
TOL = 1e-5

MODEL = """
config { rows = 1  k = 256  n = 37 }
module Q(k, n) {
    lin = Linear(k, n, bias=false)
    forward(x: f32[rows, k]) { return lin(x) }
}
"""


EPI_MODEL = """
config { rows = 1  k = 256  n = 37 }
module Q(k, n) {
    lin = Linear(k, n, bias=true)
    act = SiLU()
    forward(x: f32[rows, k], r: f32[rows, n]) { return act(lin(x)) + r }
}
"""


def to_bf16(v, up):
    """f32 array v rounded to bf16 (as f32): away from zero where up, else toward it."""
    u = np.ascontiguousarray(v, dtype=np.float32).view(np.uint32).copy()
    bump = up & ((u & 0xFFFF) != 0) & ((u & 0x7F800000) != 0x7F800000)
    u = (u + np.where(bump, 0x10000, 0).astype(np.uint32)) & np.uint32(0xFFFF0000)
    return u.view(np.float32)


def dequant(w, bits, group, swap_nibbles=False, asym=False, signed_codes=False, no_min=False, bf16=True,
            swap_halves=False):
    """w's dequantised form (f32) and its scales (rows, K / group); the
    keyword arguments after asym make the wrong references of the teeth
    (bf16 chooses the scales' type)."""
    g = w.reshape(w.shape[0], -1, group)
    if asym:  # all in f32, as runtime/quant.c computes it
        qmax = np.float32(2 ** bits - 1)
        lo, hi = np.nanmin(g, axis=2, keepdims=True), np.nanmax(g, axis=2, keepdims=True)
        if bf16:
            lo = to_bf16(lo, lo < 0)  # toward -inf
        q0 = ((hi - lo) / qmax).astype(np.float32)
        scale = np.where(q0 > 0, q0, np.float32(1)).astype(np.float32)  # 1 for a constant group, and on underflow
        if bf16:
            scale = to_bf16(scale, True)
        q = np.nan_to_num(np.clip(np.round((g - lo) / scale), 0, qmax), nan=0).astype(np.float32)
        if signed_codes:  # the field read as two's complement
            q = np.where(q >= 2 ** (bits - 1), q - 2 ** bits, q).astype(np.float32)
        if no_min:
            lo = np.zeros_like(lo)
    else:
        qmax = 127.0 if bits == 8 else 7.0
        amax = np.abs(g).max(axis=2, keepdims=True)
        q0 = (amax / np.float32(qmax)).astype(np.float32)
        scale = np.where(q0 > 0, q0, np.float32(1)).astype(np.float32)  # 1 for zeros, and on underflow
        if bf16:
            scale = to_bf16(scale, True)
        q = np.clip(np.round(g / scale), -qmax, qmax).astype(np.float32)
        lo = np.float32(0)
    stored = scale
    if swap_halves and asym:  # the scale and the min of a word read the other way round
        lo, scale = scale, lo
    elif swap_halves:  # group g's scale read from group g ^ 1's half (the last alone where the count is odd)
        ng = scale.shape[1]
        scale = scale[:, [j ^ 1 if (j ^ 1) < ng else j for j in range(ng)]]
    if swap_nibbles:
        q = q.reshape(w.shape[0], -1, 2)[:, :, ::-1].reshape(g.shape)
    return (lo + q * scale).reshape(w.shape).astype(np.float32), stored.reshape(w.shape[0], -1)


TARGET = ["--target", "cpu", "--threads", "2"]


def run(mlc, work, mdl, weights, x, rows, quant, r=None):
    xf, yf, rf = os.path.join(work, "x.bin"), os.path.join(work, "y.bin"), os.path.join(work, "r.bin")
    x.astype(np.float32).tofile(xf)
    if r is not None:
        r.astype(np.float32).tofile(rf)
    cmd = [mlc, "run", mdl, *TARGET, f"rows={rows}", f"k={x.shape[1]}", "--weights", weights, "--input", f"x={xf}",
           *(["--input", f"r={rf}"] if r is not None else []), "-o", f"output={yf}"] + (["--quantize", quant] if quant else [])
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0 or "Vulkan validation" in r.stderr:  # MLC_VK_VALIDATE=1 on spirv: a message of the layer
        sys.exit(f"FAIL: {' '.join(cmd)}\n{r.stderr}")
    return np.fromfile(yf, dtype=np.float32).reshape(rows, N)


def main():
    global TARGET
    mlc, work = sys.argv[1:3]
    os.makedirs(work, exist_ok=True)
    if sys.argv[3:4] == ["--target"] and sys.argv[4:5] in (["spirv"], ["cuda"]):
        if subprocess.run([mlc, "devices", "--target", sys.argv[4]], capture_output=True).returncode != 0:
            print(f"no {sys.argv[4]} device")
            sys.exit(77)
        TARGET = ["--target", sys.argv[4]]
    mdl = os.path.join(work, "q.mdl")
    open(mdl, "w").write(MODEL)
    rng = np.random.default_rng(0)
    failed = 0
    # (k, rows, groups, asym): the CUDA kernel takes 8 rows a block (20: two
    # and a part) and splits a row's words over warps of 160 words where a row
    # has 256 or more (k = 2304: int4's 288 words over 2 warps, int8's 576
    # over 4, the last warp's span short)
    cases = [(256, 1, ALL, False), (256, 7, ALL, False), (256, 20, (32, 128), False), (2304, 1, (32, 128), False),
             (384, 1, (32, 64, 128), True), (384, 7, (32, 128), True), (384, 20, (64,), True), (2304, 1, (32, 128), True)]
    for K, rows, groups, asym in cases:
        w = (rng.standard_normal((N, K)) * 0.05).astype(np.float32)
        w[3, :32] = 0  # a group of zeros: scale 1, codes 0
        w[5, 7] = 1.0  # an outlier: its group's scale grows
        if asym:  # groups of 32 that the asymmetric form reads back in their own way
            w[7, 32:64] = 0.03                      # constant: f32 scales: scale 1, codes 0, read back as lo exactly;
            #                                         bf16: lo rounded down, a tiny scale, within half a step
            w[9, 64:96] = -np.abs(w[9, 64:96])      # negative only: lo < hi <= 0
            w[11, 96:128] = np.abs(w[11, 96:128])   # positive only: 0 <= lo < hi
        weights = os.path.join(work, "w.safetensors")
        write_safetensors(weights, {"lin.weight": torch.from_numpy(w)}, {})
        x = rng.standard_normal((rows, K)).astype(np.float32)
        y32 = x.astype(np.float64) @ w.T.astype(np.float64)
        out = run(mlc, work, mdl, weights, x, rows, None)
        if np.abs(out - y32).max() / np.abs(y32).max() > TOL:
            print(f"FAIL: f32 rows={rows} differs from numpy")
            failed += 1
        worst = {}
        for bits in (8, 4):
            for group, bf16 in [(gr, True) for gr in groups] + [(groups[0], False)]:
                quant = f"int{bits}:group={group}" + (":asym" if asym else "") + ("" if bf16 else ":scales=f32")
                got = run(mlc, work, mdl, weights, x, rows, quant)
                wq, scale = dequant(w, bits, group, asym=asym, bf16=bf16)
                ref = x.astype(np.float64) @ wq.T.astype(np.float64)
                err = np.abs(got - ref).max() / np.abs(ref).max()
                # the rounding's bound, row by row of x and of w
                xs = np.abs(x).reshape(rows, -1, group).sum(axis=2)  # (rows, K / group)
                bound = 0.5 * xs @ scale.T                           # (rows, N)
                drift = np.abs(got - y32)
                within = bool((drift <= bound * 1.01 + 1e-6).all())
                def rejected(wrong):
                    return np.abs(got - x @ wrong.T).max() / np.abs(ref).max() > 100 * TOL
                teeth = bits == 8 or rejected(dequant(w, bits, group, swap_nibbles=True, asym=asym, bf16=bf16)[0])
                coarse = [m * group for m in (2, 3) if K % (m * group) == 0][:1]  # 2G, or 3G where 2G does not divide K
                teeth2 = group == K or rejected(dequant(w, bits, coarse[0], asym=asym, bf16=bf16)[0])
                teeth3 = not asym or (rejected(dequant(w, bits, group, asym=True, signed_codes=True, bf16=bf16)[0]) and
                                      rejected(dequant(w, bits, group, asym=True, no_min=True, bf16=bf16)[0]))
                teeth4 = not bf16 or group == K or rejected(dequant(w, bits, group, asym=asym, swap_halves=True)[0])
                ok = err <= TOL and within and teeth and teeth2 and teeth3 and teeth4
                worst[bits] = max(worst.get(bits, 0), float((drift / np.abs(y32).max()).max()))
                print(f"{'ok' if ok else 'FAIL'}: rows={rows} k={K} {quant}: rel err vs numpy dequant {err:.2e} (tol {TOL}), "
                      f"max |y - y_f32| / max|y_f32| {(drift.max() / np.abs(y32).max()):.3e}, within the rounding "
                      f"bound: {within}")
                failed += not ok
        if not worst[8] < worst[4]:
            print(f"FAIL: rows={rows}: int8's error {worst[8]:.3e} is not under int4's {worst[4]:.3e}")
            failed += 1
    # the epilogue: bias, SiLU, residual
    emdl = os.path.join(work, "qe.mdl")
    open(emdl, "w").write(EPI_MODEL)
    K = 256
    w = (rng.standard_normal((N, K)) * 0.05).astype(np.float32)
    b = (rng.standard_normal(N) * 0.5).astype(np.float32)
    weights = os.path.join(work, "we.safetensors")
    write_safetensors(weights, {"lin.weight": torch.from_numpy(w), "lin.bias": torch.from_numpy(b)}, {})
    for rows in (1, 7):
        x = rng.standard_normal((rows, K)).astype(np.float32)
        r = rng.standard_normal((rows, N)).astype(np.float32)
        for bits, group, asym, bf16 in ((8, 64, False, True), (4, 128, False, False), (8, 64, True, False),
                                        (4, 32, True, True)):
            quant = f"int{bits}:group={group}" + (":asym" if asym else "") + ("" if bf16 else ":scales=f32")
            got = run(mlc, work, emdl, weights, x, rows, quant, r)
            wq, _ = dequant(w, bits, group, asym=asym, bf16=bf16)
            z = x.astype(np.float64) @ wq.T.astype(np.float64) + b
            ref = z / (1 + np.exp(-z)) + r
            err = np.abs(got - ref).max() / np.abs(ref).max()
            plain = z + r  # without the SiLU: the check has teeth
            teeth = np.abs(got - plain).max() / np.abs(ref).max() > 100 * TOL
            ok = err <= TOL and teeth
            print(f"{'ok' if ok else 'FAIL'}: rows={rows} k={K} {quant} with a bias, SiLU and a residual add: rel err vs "
                  f"numpy {err:.2e} (tol {TOL})")
            failed += not ok
    if failed:
        sys.exit(f"{failed} checks failed")
    print("ok")


if __name__ == "__main__":
    main()
