#!/usr/bin/python3
"""Writes the small ONNX models that the onnx_*.mdl diagnostics tests use as
modules (run from this folder; the .onnx files are committed)."""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def save(name, nodes, inputs, outputs, inits=(), opset=13):
    g = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    onnx.save(m, name + ".onnx")


f = lambda n, s: helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
# y = x w^T + b, with a symbolic batch
save("linear", [helper.make_node("Gemm", ["x", "fc.weight", "fc.bias"], ["y"], transB=1, name="fc")], [f("x", ["batch", 4])],
     [f("y", ["batch", 3])], [numpy_helper.from_array(np.ones((3, 4), np.float32), "fc.weight"),
                              numpy_helper.from_array(np.zeros(3, np.float32), "fc.bias")])
# Round is an op mlc does not lower
save("round", [helper.make_node("Relu", ["x"], ["r"], name="relu0"), helper.make_node("Round", ["r"], ["y"], name="round0")],
     [f("x", [2, 4])], [f("y", [2, 4])])
# nothing to train
save("relu", [helper.make_node("Relu", ["x"], ["y"])], [f("x", [2, 4])], [f("y", [2, 4])])
with open("garbage.onnx", "wb") as out:
    out.write(b"\xff\xff\xff\xff not a protobuf\n")
