#!/usr/bin/env python3
"""`compile` on a model whose nodes run as host kernels (onnx2ggml's host evaluators as ggml custom ops: integer
arithmetic, float64, TopK, GatherElements and ScatterND on run-time indices, LSTM; graph inputs and outputs of
float64, uint8 and float16): the generated project carries
the evaluators (OUTDIR/o2g_host/) and its program gives the bits of `run` on every output; `run` matches numpy
(the LSTM is checked by the conformance suites and the zoo's audio model). A run-time error inside a host kernel
(an index out of range in the data) exits 2 naming the node in both. A model without host kernels gets no
o2g_host/ (and loses one left from an earlier compile into the same folder).

usage: compiled_host_kernels.py ONNX2GGML WORKDIR
"""
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))
from check_model import build_project, sh  # noqa: E402

BIN, WORK = sys.argv[1], os.path.abspath(sys.argv[2])
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
rng = np.random.default_rng(0)

H = 3  # LSTM hidden size
nodes = [
    helper.make_node("GatherElements", ["x", "i"], ["y_gather"], axis=1, name="ge"),
    helper.make_node("Add", ["a", "a"], ["y_add_i32"], name="addi"),
    helper.make_node("TopK", ["x", "k"], ["y_topk", "y_topk_idx"], axis=1, name="topk"),
    helper.make_node("Cast", ["x"], ["xd"], to=TensorProto.DOUBLE, name="to_f64"),
    helper.make_node("Mul", ["xd", "xd"], ["x2d"], name="mul_f64"),
    helper.make_node("Cast", ["x2d"], ["y_f64"], to=TensorProto.FLOAT, name="to_f32"),
    helper.make_node("ScatterND", ["x", "si", "su"], ["y_scatter"], name="scatter"),
    helper.make_node("LSTM", ["seq", "W", "R", "B"], ["y_lstm"], hidden_size=H, name="lstm"),
    # graph inputs and outputs of the dtypes held bit for bit (float64, uint8, float16)
    helper.make_node("Mul", ["d", "d"], ["y_d"], name="mul_d"),
    helper.make_node("Cast", ["u"], ["uf"], to=TensorProto.FLOAT, name="from_u8"),
    helper.make_node("Add", ["uf", "uf"], ["y_u"], name="add_u"),
    helper.make_node("Cast", ["x"], ["y_h"], to=TensorProto.FLOAT16, name="to_f16"),
]
inits = [
    numpy_helper.from_array(np.array([3], np.int64), "k"),
    numpy_helper.from_array(rng.standard_normal((1, 4 * H, 4)).astype(np.float32) * 0.5, "W"),
    numpy_helper.from_array(rng.standard_normal((1, 4 * H, H)).astype(np.float32) * 0.5, "R"),
    numpy_helper.from_array(rng.standard_normal((1, 8 * H)).astype(np.float32) * 0.1, "B"),
]
vi = helper.make_tensor_value_info
inputs = {
    "x": rng.standard_normal((2, 6)).astype(np.float32),
    "i": np.array([[5, 0, 2], [1, 1, 4]], np.int64),
    "a": np.array([3, -7, 2**30 - 1, 0], np.int32),
    "si": np.array([[1], [0]], np.int64),
    "su": rng.standard_normal((2, 6)).astype(np.float32),
    "seq": rng.standard_normal((5, 1, 4)).astype(np.float32),
    "d": rng.standard_normal(5),
    "u": np.array([0, 7, 255, 128], np.uint8),
}
outputs = ["y_gather", "y_add_i32", "y_topk", "y_topk_idx", "y_f64", "y_scatter", "y_lstm", "y_d", "y_u", "y_h"]
g = helper.make_graph(nodes, "host_kernels",
                      [vi(n, onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[v.dtype], v.shape) for n, v in inputs.items()],
                      [vi(n, TensorProto.UNDEFINED, None) for n in outputs], inits)
model = os.path.join(WORK, "host_kernels.onnx")
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), model)

x = inputs["x"]
order = np.argsort(-x, axis=1, kind="stable")[:, :3]
scatter = x.copy()
scatter[inputs["si"][:, 0]] = inputs["su"]
ref = {
    "y_gather": np.take_along_axis(x, inputs["i"], axis=1),
    "y_add_i32": inputs["a"] + inputs["a"],
    "y_topk": np.take_along_axis(x, order, axis=1),
    "y_topk_idx": order.astype(np.int64),
    "y_f64": (x.astype(np.float64) ** 2).astype(np.float32),
    "y_scatter": scatter,
    "y_d": inputs["d"] * inputs["d"],
    "y_u": inputs["u"].astype(np.float32) * 2,
    "y_h": x.astype(np.float16),
}


def in_args(values, tag):
    args = []
    for n, v in values.items():
        p = os.path.join(WORK, f"{tag}_{n}.npy")
        np.save(p, v)
        args += ["--input", f"{n}={p}"]
    return args


def outputs_of(folder):
    return [np.load(os.path.join(folder, f"output_{k}.npy")) for k in range(len(outputs))]


args = in_args(inputs, "in")
sh([BIN, "run", model, *args, "--output-dir", os.path.join(WORK, "run"), "--backend", "cpu"])
got = outputs_of(os.path.join(WORK, "run"))
for name, v in zip(outputs, got):
    if name in ref:
        assert v.dtype == ref[name].dtype and np.array_equal(v, ref[name]), f"run: {name} differs from numpy"
print("run vs numpy: equal on", ", ".join(n for n in outputs if n in ref))

gen = os.path.join(WORK, "gen")
r = sh([BIN, "compile", model, "-o", gen])
assert os.path.isfile(os.path.join(gen, "o2g_host", "src", "ops", "op.cpp")), "no evaluator sources written"
with open(os.path.join(gen, "model.cpp")) as f:
    calls = f.read().count("o2g_host::kernel(")
assert calls >= 8, f"{calls} host kernel calls in model.cpp"
program = build_project(gen, True, WORK)
sh([program, *args, "--output-dir", os.path.join(WORK, "compiled"), "--backend", "cpu"])
for name, a, b in zip(outputs, got, outputs_of(os.path.join(WORK, "compiled"))):
    assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes(), f"compiled {name} differs from run"
print(f"compiled ({calls} host kernels) vs run: bit-identical on {len(outputs)} outputs")

# an index out of range, found inside the host kernel at run time: exit 2 naming the node, in run and compiled
bad = dict(inputs, i=np.array([[7, 0, 0], [0, 0, 0]], np.int64))
bad_args = in_args(bad, "bad")
for cmd in ([BIN, "run", model, *bad_args, "--backend", "cpu"], [program, *bad_args, "--backend", "cpu"]):
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 2 and "node 'ge' (GatherElements)" in r.stderr and "index 7 out of range" in r.stderr, \
        (cmd[0], r.returncode, r.stderr)
print("index out of range: exit 2 naming the node, in run and in the compiled program")

# a model without host kernels compiled into the same folder: no evaluator sources
tiny = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "tinycnn", "model.onnx")
sh([BIN, "compile", tiny, "-o", gen])
assert not os.path.exists(os.path.join(gen, "o2g_host")) and not os.path.exists(os.path.join(gen, "o2g_host.h")), \
    "o2g_host/ left for a model without host kernels"
with open(os.path.join(gen, "model.h")) as f:
    assert "n_host_kernels = 0;" in f.read()
print("a model without host kernels: no o2g_host/")
shutil.rmtree(WORK, ignore_errors=True)
