#!/usr/bin/env python3
"""An ONNX model's values through `mlc compile -o`: the plan does not carry
them (its parameters' init is "given"), so the compiler writes them as
DIR/<name>.safetensors and a session refuses to run until they are loaded,
where it used to run on zeros without a word.

A small graph built with onnx.helper (Gemm with a float initializer and a
bias, Reshape by an int64 initializer, Add of a float Constant node), for the
CPU target (an artifact loaded by the Python binding) and, where Vulkan is
built, spirv (the <name>.mlcplan run by `mlc run`):
  - DIR/<name>.safetensors holds the initializers and the Constant's tensor
    that are parameters (Reshape's shape is folded at compile time) under
    their names, bit for bit;
  - a run before the weights are loaded fails with the message, naming a
    weight and the file (the values moved away from the artifact; for mlc
    run: a plan without its values beside it); beside it, mlc.load and mlc
    run load them (the header names the file: MLC_MODEL_<name>_WEIGHTS);
  - after loading them, the output is numpy's within 1e-6 (f32).
Exits 77 (a skip) without onnx.
Usage: artifact_weights.py --mlc MLC [--work DIR]"""
import argparse
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:  # pragma: no cover - a machine without onnx
    print(f"skipped: {e}")
    sys.exit(77)
import mlc as mlcpy  # noqa: E402
from safetensors_file import read_safetensors  # noqa: E402

TOL = 1e-6
failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        failures.append(what)


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


ap = argparse.ArgumentParser()
ap.add_argument("--mlc", required=True)
ap.add_argument("--work", default="/tmp/mlc_onnx_artifact_weights")
args = ap.parse_args()
shutil.rmtree(args.work, ignore_errors=True)
os.makedirs(args.work)
w = args.work

rng = np.random.default_rng(7)
W = rng.standard_normal((6, 8)).astype(np.float32)
B = rng.standard_normal(6).astype(np.float32)
shape = np.array([3, 4], np.int64)
C = rng.standard_normal((3, 4)).astype(np.float32)
x = rng.standard_normal((2, 8)).astype(np.float32)
want = (x @ W.T + B).reshape(3, 4) + C

nodes = [
    helper.make_node("Gemm", ["x", "W", "B"], ["g"], transB=1),
    helper.make_node("Reshape", ["g", "shape"], ["r"]),
    helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(C, "c")),
    helper.make_node("Add", ["r", "c"], ["y"]),
]
graph = helper.make_graph(nodes, "given", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])],
                          [numpy_helper.from_array(W, "W"), numpy_helper.from_array(B, "B"),
                           numpy_helper.from_array(shape, "shape")])
model = os.path.join(w, "given.onnx")
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), model)
x.tofile(os.path.join(w, "x.bin"))

# The CPU artifact, through the Python binding.
art = os.path.join(w, "cpu")
r = run([args.mlc, "compile", model, "--target", "cpu", "--cpu", "native", "-o", art])
if r.returncode != 0:
    sys.exit(f"mlc compile --target cpu failed ({r.returncode}):\n{r.stderr}")
values = os.path.join(art, "given.safetensors")
check(os.path.exists(values) and "given.safetensors, the values of the model's initializers" in r.stderr,
      "compile -o writes given.safetensors and says so")
if os.path.exists(values):
    got = read_safetensors(values)
    names = sorted(got)
    # Reshape's shape is read at compile time: no parameter; the Constant's
    # tensor is one, named after its output.
    check(names == ["B", "W", "c"], f"the file's tensors: {names} (want B, W, c)")
    same = all(n in got and np.array_equal(got[n], v) for n, v in (("W", W), ("B", B), ("c", C)))
    check(same, "the initializers and the Constant's tensor bit for bit")
with open(os.path.join(art, "given.h")) as f:
    check('#define MLC_MODEL_given_WEIGHTS "given.safetensors"' in f.read(), "given.h names the values' file")
# Under the sanitizers the binding would dlopen the instrumented runtime into a python3 without ASan.
sanitized = bool(os.environ.get("MLC_SANITIZED"))
if sanitized:
    print("the Python binding's part: skipped under the sanitizers (MLC_SANITIZED)")
y = want if sanitized else mlcpy.load(art).forward(x)  # the binding loads the file the header names
err = float(np.max(np.abs(y - want)))
check(err <= TOL, f"the artifact through mlc.load: max |mlc - numpy| {err:.3g} (tolerance {TOL})")
moved = os.path.join(w, "values.safetensors")
os.rename(values, moved)
if not sanitized:
    m = mlcpy.load(art)
    try:
        m.forward(x)
        check(False, "the artifact runs before its weights are loaded")
    except mlcpy.Error as e:
        check("takes its value from the model's file" in str(e) and "given.safetensors" in str(e),
              f"the artifact refuses to run without its weights: {e}")
    m.load_weights(moved)
    y = m.forward(x)
    err = float(np.max(np.abs(y - want)))
    check(err <= TOL, f"the artifact after load_weights: max |mlc - numpy| {err:.3g} (tolerance {TOL})")

# spirv: the plan file, by mlc run.
spv = os.path.join(w, "spirv")
r = run([args.mlc, "compile", model, "--target", "spirv", "-o", spv])
if r.returncode == 4:
    print("spirv: not built here, skipped")
elif r.returncode != 0:
    check(False, f"mlc compile --target spirv: {r.stderr}")
else:
    plan = os.path.join(spv, "given.mlcplan")
    alone = os.path.join(w, "alone.mlcplan")  # without its values beside it
    shutil.copy(plan, alone)
    xin = "x=" + os.path.join(w, "x.bin")
    r = run([args.mlc, "run", alone, "--input", xin])
    if "no Vulkan" in r.stderr:
        print("spirv: no Vulkan driver here, skipped")
    else:
        check(r.returncode == 1 and "the weight '" in r.stderr and "given.safetensors" in r.stderr,
              f"mlc run of a plan without its values: exit {r.returncode}, {r.stderr.strip().splitlines()[-1:]}")
        for how, extra in (("--weights", ["--weights", os.path.join(spv, "given.safetensors")]),
                           ("the values beside the plan", [])):
            out = os.path.join(w, "y.bin")
            r = run([args.mlc, "run", alone if extra else plan, "--input", xin, "--output", "y=" + out, *extra])
            check(r.returncode == 0 and (extra or "the model's values from" in r.stderr),
                  f"mlc run of the plan, {how}: exit {r.returncode} {r.stderr[-300:]}")
            if r.returncode == 0:
                err = float(np.max(np.abs(np.fromfile(out, np.float32).reshape(3, 4) - want)))
                check(err <= TOL, f"the plan, {how}: max |mlc - numpy| {err:.3g} (tolerance {TOL})")

print(f"{'FAILED: ' + str(len(failures)) if failures else 'all passed'}")
sys.exit(1 if failures else 0)
