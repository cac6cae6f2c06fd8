#!/usr/bin/env python3
"""`mlc run MODEL.onnx --quantize ...`: an ONNX model's initializers reach
the session after its weights are drawn (mlc_session_set_param), and the
packed weights that --quantize makes of them must follow.  They were packed
once, from the zeros a given weight starts as, and never again: every output
was 0, without a word (found 2026-12-07).

A Gemm over a float initializer (transB=1, a bias; K = 64, N = 48) with a
ReLU, run on the CPU target with int8 and int4, symmetric and asymmetric, in
groups of 32: the output must be numpy's with the dequantised weight
(tests/ref/quant.py's dequant, bf16 scales) within 1e-5 of its largest
value; the f32 run numpy's with the weight itself within 1e-6.  Exits 77 (a
skip) without onnx.
Usage: quantize_given.py --mlc MLC [--work DIR]"""
import argparse
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "ref"))
try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:  # pragma: no cover - a machine without onnx
    print(f"skipped: {e}")
    sys.exit(77)
from quant import dequant  # noqa: E402

M, K, N, GROUP = 3, 64, 48, 32


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mlc", required=True)
    ap.add_argument("--work")
    a = ap.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="mlc-quantize-given-")
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(7)
    w = rng.standard_normal((N, K)).astype(np.float32)
    b = rng.standard_normal(N).astype(np.float32)
    x = rng.standard_normal((M, K)).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w", "b"], ["h"], transB=1), helper.make_node("Relu", ["h"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [M, K])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [M, N])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = os.path.join(work, "gemm.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), model)
    xin = os.path.join(work, "x.bin")
    x.tofile(xin)
    fails = 0
    for q in ["", "int8", "int4", "int8:asym", "int4:asym"]:
        out = os.path.join(work, f"y{q.replace(':', '_')}.bin")
        cmd = [a.mlc, "run", model, "--target", "cpu", "--input", f"x={xin}", "--output", f"y={out}"]
        if q:
            cmd += ["--quantize", f"{q.split(':')[0]}:group={GROUP}{q[len(q.split(':')[0]):]}"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            print(f"FAIL {q or 'f32'}: mlc exited {r.returncode}: {r.stderr.strip()[-300:]}")
            fails += 1
            continue
        y = np.fromfile(out, np.float32).reshape(M, N)
        wq = w if not q else dequant(w, 8 if q.startswith("int8") else 4, GROUP, asym=q.endswith("asym"))[0]
        ref = np.maximum(x.astype(np.float64) @ wq.astype(np.float64).T + b, 0)
        err = float(np.abs(y - ref).max() / np.abs(ref).max())
        tol = 1e-6 if not q else 1e-5
        ok = err <= tol
        fails += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {q or 'f32':10s} err {err:.2e} (tol {tol:g}), output's mean |y| {np.abs(y).mean():.4f}")
    print("all checks passed" if not fails else f"{fails} failed")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
