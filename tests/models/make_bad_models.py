#!/usr/bin/env python3
"""Writes small models for the error-path tests (made with onnx.helper, not PyTorch):
  unsupported.onnx  two branches, each with an unsupported node (FancyOp in a custom domain, Unique)
  dynamic.onnx      an input with a symbolic batch dim
usage: make_bad_models.py OUTDIR
"""
import os
import sys

import onnx
from onnx import TensorProto, helper

out = sys.argv[1]
os.makedirs(out, exist_ok=True)

x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
z = helper.make_tensor_value_info("z", TensorProto.FLOAT, None)
g = helper.make_graph([
    helper.make_node("Relu", ["x"], ["r"], name="relu0"),
    helper.make_node("FancyOp", ["r"], ["y"], name="fancy_node", domain="com.example"),
    helper.make_node("Unique", ["x"], ["z"], name="unique_node"),
], "g", [x], [y, z])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])
onnx.save(m, os.path.join(out, "unsupported.onnx"))

xd = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])
yd = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])
g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu0")], "g", [xd], [yd])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), os.path.join(out, "dynamic.onnx"))
