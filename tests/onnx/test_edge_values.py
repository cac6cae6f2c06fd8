#!/usr/bin/python3
"""The ONNX ops mlc builds from other IR ops, at the values the node tests do not hold.

Comparisons, Where, IsNaN/IsInf, ArgMax/ArgMin, GatherElements and the losses are
lowered onto relu, cast and integer arithmetic (frontend/onnx/onnx.c).  The ONNX
node tests feed them small random numbers; this runs each on NaN, infinities,
signed zeros, denormals and the extreme integers, through `mlc run --target cpu`,
and compares with numpy exactly (bit for bit for floats, NaNs equal).

  tests/onnx/test_edge_values.py --mlc build/mlc
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto

F32, I32, I64, BOOL = TensorProto.FLOAT, TensorProto.INT32, TensorProto.INT64, TensorProto.BOOL
NP = {F32: np.float32, I32: np.int32, I64: np.int64, BOOL: np.bool_}

fvals = np.array([0.0, -0.0, 1.0, -1.0, 1e-45, -1e-45, 3.4e38, -3.4e38, np.inf, -np.inf, np.nan, 2.5],
                 dtype=np.float32)
i32vals = np.array([0, 1, -1, 2**31 - 1, -2**31, 7, -7, 2**30], dtype=np.int32)
i64vals = np.array([0, 1, -1, 2**63 - 1, -2**63, 7, -7, 2**62], dtype=np.int64)


def pairs(v):
    """Every ordered pair of v, as two flat arrays."""
    a, b = np.meshgrid(v, v, indexing="ij")
    return a.ravel().copy(), b.ravel().copy()


def run(mlc, work, name, nodes, inputs, outputs, opset=17):
    """Builds a one-graph model, runs it, returns the outputs as numpy arrays."""
    g = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info(n, t, list(v.shape)) for n, (t, v) in inputs.items()],
        [helper.make_tensor_value_info(n, t, shape) for n, (t, shape) in outputs.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    path = os.path.join(work, name + ".onnx")
    onnx.save(m, path)
    cmd = [mlc, "run", path, "--target", "cpu"]
    for n, (t, v) in inputs.items():
        f = os.path.join(work, "%s.%s.in" % (name, n))
        np.ascontiguousarray(v.astype(NP[t])).tofile(f)
        cmd += ["--input", "%s=%s" % (n, f)]
    for n in outputs:
        cmd += ["--output", "%s=%s" % (n, os.path.join(work, "%s.%s.out" % (name, n)))]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        raise RuntimeError("%s: mlc failed: %s" % (name, p.stderr.strip()))
    return {n: np.fromfile(os.path.join(work, "%s.%s.out" % (name, n)), dtype=NP[t]).reshape(shape)
            for n, (t, shape) in outputs.items()}


def same(got, want):
    if got.dtype.kind == "f":
        return got.shape == want.shape and np.array_equal(got.view(np.uint32), want.astype(got.dtype).view(np.uint32)) \
            or (np.array_equal(np.isnan(got), np.isnan(want)) and np.array_equal(got[~np.isnan(got)], want[~np.isnan(want)]))
    return got.shape == want.shape and np.array_equal(got, want)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--mlc", required=True)
    args = ap.parse_args()
    failed = 0
    checks = 0

    def check(name, got, want):
        nonlocal failed, checks
        checks += 1
        if not same(got, want):
            failed += 1
            bad = np.nonzero(np.asarray(got != want).ravel())[0][:5]
            print("FAIL %s: first differences at %s: got %s, want %s" % (
                name, bad, got.ravel()[bad], np.asarray(want).ravel()[bad]))

    with tempfile.TemporaryDirectory() as work:
        cmps = {"Equal": np.equal, "Less": np.less, "LessOrEqual": np.less_equal,
                "Greater": np.greater, "GreaterOrEqual": np.greater_equal}
        for t, vals in ((F32, fvals), (I32, i32vals), (I64, i64vals)):
            a, b = pairs(vals)
            for op, fn in cmps.items():
                name = "%s_%s" % (op, NP[t].__name__)
                out = run(args.mlc, work, name, [helper.make_node(op, ["a", "b"], ["y"])],
                          {"a": (t, a), "b": (t, b)}, {"y": (BOOL, [a.size])})
                check(name, out["y"], fn(a, b))
            c = (np.arange(a.size) % 3 == 0)
            name = "Where_%s" % NP[t].__name__
            out = run(args.mlc, work, name, [helper.make_node("Where", ["c", "a", "b"], ["y"])],
                      {"c": (BOOL, c), "a": (t, a), "b": (t, b)}, {"y": (t, [a.size])})
            check(name, out["y"], np.where(c, a, b))
        out = run(args.mlc, work, "IsNaN", [helper.make_node("IsNaN", ["x"], ["y"])],
                  {"x": (F32, fvals)}, {"y": (BOOL, [fvals.size])})
        check("IsNaN", out["y"], np.isnan(fvals))
        for pos, neg in ((1, 1), (1, 0), (0, 1)):
            name = "IsInf_%d%d" % (pos, neg)
            out = run(args.mlc, work, name, [helper.make_node("IsInf", ["x"], ["y"], detect_positive=pos, detect_negative=neg)],
                      {"x": (F32, fvals)}, {"y": (BOOL, [fvals.size])})
            check(name, out["y"], np.isinf(fvals) & (((fvals > 0) & bool(pos)) | ((fvals < 0) & bool(neg))))
        # ArgMax / ArgMin: ties, infinities, the first and the last index
        x = np.array([[1, 5, 5, -np.inf], [np.inf, 2, np.inf, 0], [-1, -1, -1, -1]], dtype=np.float32)
        for op, fn in (("ArgMax", np.argmax), ("ArgMin", np.argmin)):
            for last in (0, 1):
                for axis in (0, 1):
                    name = "%s_%d_%d" % (op, axis, last)
                    shape = [1, 4] if axis == 0 else [3, 1]
                    out = run(args.mlc, work, name, [helper.make_node(op, ["x"], ["y"], axis=axis, select_last_index=last)],
                              {"x": (F32, x)}, {"y": (I64, shape)})
                    xf = np.flip(x, axis) if last else x
                    want = fn(xf, axis=axis)
                    if last:
                        want = x.shape[axis] - 1 - want
                    check(name, out["y"], np.expand_dims(want, axis))
        xi = np.array([[2**31 - 1, -2**31, 0], [-2**31, -2**31, 2**31 - 1]], dtype=np.int32)
        for op, fn in (("ArgMax", np.argmax), ("ArgMin", np.argmin)):
            name = op + "_int32"
            out = run(args.mlc, work, name, [helper.make_node(op, ["x"], ["y"], axis=1, keepdims=0)],
                      {"x": (I32, xi)}, {"y": (I64, [2])})
            check(name, out["y"], fn(xi, axis=1))
        # GatherElements: negative indices, and values an arithmetic select would spoil
        d = np.array([[np.inf, -np.inf, np.nan], [1, -0.0, 3]], dtype=np.float32)
        idx = np.array([[2, -3, 1], [-1, 1, 0]], dtype=np.int64)
        out = run(args.mlc, work, "GatherElements", [helper.make_node("GatherElements", ["d", "i"], ["y"], axis=1)],
                  {"d": (F32, d), "i": (I64, idx)}, {"y": (F32, [2, 3])})
        check("GatherElements", out["y"], np.take_along_axis(d, np.where(idx < 0, idx + 3, idx), axis=1))
        # NegativeLogLikelihoodLoss: an ignored target whose log-probability is -inf
        lp = np.array([[-np.inf, -1.0, -2.0], [-0.5, -np.inf, -3.0]], dtype=np.float32)
        tg = np.array([0, 2], dtype=np.int64)
        for red, want in (("none", np.array([0.0, 3.0], np.float32)), ("sum", np.float32(3.0)), ("mean", np.float32(3.0))):
            name = "NLL_" + red
            out = run(args.mlc, work, name, [helper.make_node("NegativeLogLikelihoodLoss", ["x", "t"], ["y"], reduction=red, ignore_index=0)],
                      {"x": (F32, lp), "t": (I64, tg)}, {"y": (F32, list(np.shape(want)))})
            check(name, out["y"], np.asarray(want))
    print("%d checks, %d failed" % (checks, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
