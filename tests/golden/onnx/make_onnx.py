#!/usr/bin/python3
"""Writes mlp.onnx, the graph that tests/golden/onnx_module.mdl uses as a module
(run from this folder; the .onnx file is committed): x [batch, 4] -> MatMul,
Add, Relu -> hidden [batch, 8] -> MatMul, Add -> logits [batch, 3]; both
are outputs."""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(0)
f = lambda n, s: helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
w = lambda a, n: numpy_helper.from_array(a.astype(np.float32), n)
nodes = [helper.make_node("MatMul", ["x", "fc1.weight"], ["a"]), helper.make_node("Add", ["a", "fc1.bias"], ["b"]),
         helper.make_node("Relu", ["b"], ["hidden"]), helper.make_node("MatMul", ["hidden", "fc2.weight"], ["c"]),
         helper.make_node("Add", ["c", "fc2.bias"], ["logits"])]
g = helper.make_graph(nodes, "mlp", [f("x", ["batch", 4])], [f("logits", ["batch", 3]), f("hidden", ["batch", 8])],
                      [w(rng.normal(size=(4, 8)), "fc1.weight"), w(rng.normal(size=8), "fc1.bias"),
                       w(rng.normal(size=(8, 3)), "fc2.weight"), w(rng.normal(size=3), "fc2.bias")])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), "mlp.onnx")
