#!/usr/bin/python3
"""Writes the seed corpus of fuzz_onnx: small models, one per family of ops the
frontend lowers (run from this folder; the .onnx files are committed)."""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def save(name, nodes, inputs, outputs, inits=(), opset=13):
    g = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    onnx.save(m, name + ".onnx")


f = lambda n, s: helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
save("relu", [helper.make_node("Relu", ["x"], ["y"])], [f("x", [2, 3])], [f("y", [2, 3])])
save("gemm", [helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1, alpha=0.5)], [f("x", ["batch", 4])],
     [f("y", ["batch", 3])], [numpy_helper.from_array(np.ones((3, 4), np.float32), "w"),
                              numpy_helper.from_array(np.zeros(3, np.float32), "b")])
save("reshape", [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Reshape", ["x", "s"], ["r"]),
                 helper.make_node("Transpose", ["r"], ["t"], perm=[1, 0]),
                 helper.make_node("Softmax", ["t"], ["y"], axis=-1)], [f("x", [2, 3])], [f("y", [3, 2])])
save("gather", [helper.make_node("Constant", [], ["i"], value=numpy_helper.from_array(np.array([1, -1], np.int64))),
                helper.make_node("Gather", ["x", "i"], ["y"], axis=1)], [f("x", [2, 3])], [f("y", [2, 2])])
save("layernorm", [helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1, epsilon=1e-5)],
     [f("x", ["n", 4]), f("g", [4]), f("b", [4])], [f("y", ["n", 4])], opset=17)
save("reduce", [helper.make_node("ReduceMean", ["x"], ["m"], axes=[1], keepdims=1),
                helper.make_node("Sub", ["x", "m"], ["c"]),
                helper.make_node("Slice", ["c", "st", "en", "ax"], ["y"])], [f("x", [2, 4])], [f("y", [2, 2])],
     [numpy_helper.from_array(np.array([1], np.int64), "st"), numpy_helper.from_array(np.array([3], np.int64), "en"),
      numpy_helper.from_array(np.array([1], np.int64), "ax")])
