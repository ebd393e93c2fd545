"""Tiny models for the `quant` tests (onnx.helper; no download): an MLP whose MatMul/Gemm weights are
big enough to be quantized (rows of 256 and 512: every type's blocks divide them), a small MatMul that the
default rule keeps f32, and a convolution (kernels stay f32). Writes, in OUTDIR:
  mlp.onnx, x.npy, img.npy, ref.npy  (ref: the float64 numpy result, an independent reference)
  mlp_sizes.onnx  (same initializer names, layer1.weight of another shape)
  mlp_names.onnx  (layer2.weight renamed)
usage: make_models.py OUTDIR"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def build(path, k=256, n1=512, rename=False):
    rng = np.random.default_rng(7)
    w1 = (rng.standard_normal((k, n1)) / np.sqrt(k)).astype(np.float32)
    b1 = (0.1 * rng.standard_normal(n1)).astype(np.float32)
    w2 = (rng.standard_normal((128, n1)) / np.sqrt(n1)).astype(np.float32)
    b2 = (0.1 * rng.standard_normal(128)).astype(np.float32)
    w3 = (rng.standard_normal((128, 16)) / np.sqrt(128)).astype(np.float32)
    ck = (rng.standard_normal((8, 4, 3, 3)) / 6).astype(np.float32)
    cb = (0.1 * rng.standard_normal(8)).astype(np.float32)
    w2name = "head.weight" if rename else "layer2.weight"
    inits = [numpy_helper.from_array(a, n) for a, n in
             [(w1, "layer1.weight"), (b1, "layer1.bias"), (w2, w2name), (b2, "layer2.bias"), (w3, "proj.weight"),
              (ck, "conv.weight"), (cb, "conv.bias")]]
    nodes = [
        helper.make_node("MatMul", ["x", "layer1.weight"], ["h1"], name="fc1"),
        helper.make_node("Add", ["h1", "layer1.bias"], ["h1b"], name="fc1_bias"),
        helper.make_node("Relu", ["h1b"], ["a1"], name="relu1"),
        helper.make_node("Gemm", ["a1", w2name, "layer2.bias"], ["h2"], name="fc2", transB=1),
        helper.make_node("Tanh", ["h2"], ["a2"], name="tanh2"),
        helper.make_node("MatMul", ["a2", "proj.weight"], ["y"], name="proj"),
        helper.make_node("Conv", ["img", "conv.weight", "conv.bias"], ["c"], name="conv", pads=[1, 1, 1, 1]),
    ]
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, k]),
                                         helper.make_tensor_value_info("img", TensorProto.FLOAT, [1, 4, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 16]),
                           helper.make_tensor_value_info("c", TensorProto.FLOAT, [1, 8, 8, 8])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    onnx.checker.check_model(m)
    onnx.save(m, path)
    return w1, b1, w2, b2, w3, ck, cb


def conv2d(x, w, b):  # NCHW, stride 1, pad 1
    n, c, h, wd = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((n, w.shape[0], h, wd))
    for i in range(3):
        for j in range(3):
            out += np.einsum("nchw,oc->nohw", xp[:, :, i:i + h, j:j + wd], w[:, :, i, j])
    return out + b[None, :, None, None]


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    w1, b1, w2, b2, w3, ck, cb = [a.astype(np.float64) for a in build(os.path.join(out, "mlp.onnx"))]
    build(os.path.join(out, "mlp_sizes.onnx"), n1=384)
    build(os.path.join(out, "mlp_names.onnx"), rename=True)
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2, 256)).astype(np.float32)
    img = rng.standard_normal((1, 4, 8, 8)).astype(np.float32)
    np.save(os.path.join(out, "x.npy"), x)
    np.save(os.path.join(out, "img.npy"), img)
    a1 = np.maximum(x.astype(np.float64) @ w1 + b1, 0)
    y = np.tanh(a1 @ w2.T + b2) @ w3
    np.save(os.path.join(out, "ref_y.npy"), y)
    np.save(os.path.join(out, "ref_c.npy"), conv2d(img.astype(np.float64), ck, cb))


if __name__ == "__main__":
    main()
