"""ctest quant_ort (label quant, issue 16 item 3): quantized ONNX models as they are published, built here with
onnx.helper, run by onnx2ggml and by ONNX Runtime (onnxruntime-node, CPU, scripts/ort_run.js) on the same inputs.
Integer outputs must equal ONNX Runtime's bit for bit, with and without its graph optimizations; float outputs
must be within 1e-5 of max|ref| of ONNX Runtime without graph optimizations, which computes the operators as the
spec writes them. (With its default optimizations ONNX Runtime rewrites DequantizeLinear -> MatMul with
asymmetric int8 weights into its own integer kernel: 3.5e-3 of max|y| away from the spec's arithmetic on
qdq_weights; the test prints that difference for every float output.)

The models cover the parameter forms each operator allows: QuantizeLinear/DequantizeLinear per tensor, per axis
and blocked (opset 21), uint8/int8, ties (x / scale = k + 0.5: round half to even) and saturation;
DynamicQuantizeLinear (including an all-zero input); MatMulInteger with per-row/per-column zero points;
QLinearMatMul with per-column scales; ConvInteger and QLinearConv (groups, strides, pads, dilations, per-channel
scales, int32 bias); a three-layer DynamicQuantizeLinear + ConvInteger CNN (the form of ONNX Runtime's dynamic
quantization); a weight-only QDQ CNN and MLP (DequantizeLinear of int8 weights feeding Conv/MatMul/Gemm); and
com.microsoft MatMulNBits (4 and 8 bits, packed zero points, K not a multiple of the block, bias). Odd sizes
throughout. Skips (exit 77) when onnxruntime-node is not installed (scripts/setup.sh --bench).
usage: quant_ort_test.py ONNX2GGML WORKDIR"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
NODE_MODULES = os.path.join(ROOT, "bench", "node_modules")
FLOAT_TOL = 1e-5  # of max|ref|, float outputs
rng = np.random.default_rng(16)
fails = []

NP2TP = {np.float32: TP.FLOAT, np.uint8: TP.UINT8, np.int8: TP.INT8, np.int32: TP.INT32, np.int64: TP.INT64}


def tp(a):
    return NP2TP[a.dtype.type]


def init(name, a):
    return numpy_helper.from_array(np.asarray(a), name)


def model(name, nodes, inputs, outputs, inits, opset=13, ms=False):
    """inputs: {name: array} (graph inputs, their values written for both runtimes); outputs: [(name, np dtype)]."""
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info(k, tp(v), v.shape) for k, v in inputs.items()],
                          [helper.make_tensor_value_info(k, NP2TP[t], None) for k, t in outputs], [init(k, v) for k, v in inits.items()])
    imports = [helper.make_opsetid("", opset)] + ([helper.make_opsetid("com.microsoft", 1)] if ms else [])
    m = helper.make_model(g, opset_imports=imports)
    m.ir_version = 8 if opset < 21 else 10
    return name, m, inputs


def u8(*s):
    return rng.integers(0, 256, size=s).astype(np.uint8)


def i8(*s):
    return rng.integers(-128, 128, size=s).astype(np.int8)


def f32(*s, scale=1.0):
    return (rng.standard_normal(s) * scale).astype(np.float32)


def cases():
    out = []
    N = helper.make_node
    # QuantizeLinear / DequantizeLinear: per tensor (uint8, ties, saturation) and per axis (int8, axis 1)
    x = f32(3, 5, 7, scale=40.0)
    x[0, 0, :7] = [0.25, 0.75, -0.25, -0.75, 1.25, 300.0, -300.0]  # / 0.5: ties 0.5, 1.5, ...; saturate both ends
    sc_t, zp_t = np.float32(0.5), np.uint8(128)
    sc_a, zp_a = np.array([0.5, 0.25, 1.0, 0.3, 2.0], np.float32), np.array([0, -3, 7, 1, -128], np.int8)
    out.append(model("quantize_linear", [
        N("QuantizeLinear", ["x", "st", "zt"], ["q_tensor"]),
        N("QuantizeLinear", ["x", "sa", "za"], ["q_axis"], axis=1),
        N("DequantizeLinear", ["q_axis", "sa", "za"], ["dq_axis"], axis=1),
        N("DequantizeLinear", ["q_tensor", "st", "zt"], ["dq_tensor"])],
        {"x": x}, [("q_tensor", np.uint8), ("q_axis", np.int8), ("dq_axis", np.float32), ("dq_tensor", np.float32)],
        {"st": sc_t, "zt": zp_t, "sa": sc_a, "za": zp_a}))
    # blocked quantization (opset 21): blocks of 4 along the last axis of 10 (the last block short)
    xb = f32(3, 5, 10, scale=3.0)
    sb = (rng.uniform(0.01, 0.1, size=(3, 5, 3))).astype(np.float32)
    zb = i8(3, 5, 3)
    wq = i8(3, 5, 10)
    out.append(model("quantize_blocked", [
        N("QuantizeLinear", ["x", "s", "z"], ["q"], axis=2, block_size=4),
        N("DequantizeLinear", ["w", "s", "z"], ["dq"], axis=-1, block_size=4)],
        {"x": xb}, [("q", np.int8), ("dq", np.float32)], {"s": sb, "z": zb, "w": wq}, opset=21))
    # DynamicQuantizeLinear: a general input, an all-positive one, an all-zero one
    out.append(model("dynamic_quantize", [N("DynamicQuantizeLinear", ["x"], ["y", "ys", "yz"]),
                                          N("DynamicQuantizeLinear", ["p"], ["py", "pys", "pyz"]),
                                          N("DynamicQuantizeLinear", ["z"], ["zy", "zys", "zyz"])],
                     {"x": f32(4, 9, scale=5.0), "p": np.abs(f32(17)) + np.float32(0.5), "z": np.zeros((2, 3), np.float32)},
                     [("y", np.uint8), ("ys", np.float32), ("yz", np.uint8), ("py", np.uint8), ("pys", np.float32), ("pyz", np.uint8),
                      ("zy", np.uint8), ("zys", np.float32), ("zyz", np.uint8)], {}, opset=11))
    # MatMulInteger: uint8 A (batched) with a scalar zero point, int8 B with per-column zero points; uint8 x uint8
    out.append(model("matmul_integer", [N("MatMulInteger", ["a", "b", "az", "bz"], ["y"]),
                                        N("MatMulInteger", ["a2", "b2", "az2"], ["y2"])],
                     {"a": u8(2, 3, 13), "a2": u8(5, 11)}, [("y", np.int32), ("y2", np.int32)],
                     {"b": i8(13, 7), "az": np.uint8(131), "bz": i8(7), "b2": u8(11, 6), "az2": np.uint8(3)}, opset=10))
    # QLinearMatMul: per-tensor A, per-column B scales (int8 B, zero points 0), uint8 output
    a = u8(4, 13)
    out.append(model("qlinear_matmul", [N("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"])],
                     {"a": a}, [("y", np.uint8)],
                     {"as": np.float32(0.02), "az": np.uint8(120), "b": i8(13, 6), "bs": rng.uniform(0.005, 0.02, 6).astype(np.float32),
                      "bz": np.zeros(6, np.int8), "ys": np.float32(0.07), "yz": np.uint8(100)}, opset=10))
    # ConvInteger: stride 2, pads, per-tensor zero points; a grouped one with dilations
    out.append(model("conv_integer", [N("ConvInteger", ["x", "w", "xz", "wz"], ["y"], strides=[2, 2], pads=[1, 0, 1, 2]),
                                      N("ConvInteger", ["x2", "w2", "xz"], ["y2"], group=2, dilations=[2, 1], pads=[1, 1, 1, 1])],
                     {"x": u8(1, 3, 9, 11), "x2": u8(2, 4, 7, 8)}, [("y", np.int32), ("y2", np.int32)],
                     {"w": u8(4, 3, 3, 3), "xz": np.uint8(77), "wz": np.uint8(140), "w2": u8(6, 2, 3, 2)}, opset=10))
    # QLinearConv: groups, per-channel int8 weight scales, int32 bias, uint8 in and out
    out.append(model("qlinear_conv", [N("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["y"], group=2,
                                        strides=[1, 2], pads=[1, 1, 1, 1])],
                     {"x": u8(1, 4, 8, 9)}, [("y", np.uint8)],
                     {"xs": np.float32(0.03), "xz": np.uint8(110), "w": i8(6, 2, 3, 3), "ws": rng.uniform(0.002, 0.01, 6).astype(np.float32),
                      "wz": np.zeros(6, np.int8), "ys": np.float32(0.09), "yz": np.uint8(90),
                      "b": rng.integers(-3000, 3000, 6).astype(np.int32)}, opset=10))
    # dynamic quantization of a CNN (ONNX Runtime's quantize_dynamic form): per layer
    # DynamicQuantizeLinear -> ConvInteger -> Cast -> Mul(x_scale * w_scale) -> Add(bias) -> Relu
    nodes, inits, prev, cin = [], {}, "x", 3
    for i, (cout, stride) in enumerate([(8, 1), (12, 2), (5, 2)]):
        w = rng.standard_normal((cout, cin, 3, 3)).astype(np.float32) * 0.3
        ws = np.float32((w.max() - w.min()) / 255)
        wz = np.uint8(np.clip(np.round(-w.min() / ws), 0, 255))
        inits.update({f"w{i}": np.clip(np.round(w / ws) + wz, 0, 255).astype(np.uint8), f"wz{i}": wz, f"ws{i}": ws,
                      f"b{i}": (rng.standard_normal((1, cout, 1, 1)) * 0.1).astype(np.float32)})
        nodes += [N("DynamicQuantizeLinear", [prev], [f"q{i}", f"qs{i}", f"qz{i}"]),
                  N("ConvInteger", [f"q{i}", f"w{i}", f"qz{i}", f"wz{i}"], [f"ci{i}"], strides=[stride, stride], pads=[1, 1, 1, 1]),
                  N("Cast", [f"ci{i}"], [f"cf{i}"], to=TP.FLOAT),
                  N("Mul", [f"qs{i}", f"ws{i}"], [f"s{i}"]),
                  N("Mul", [f"cf{i}", f"s{i}"], [f"m{i}"]),
                  N("Add", [f"m{i}", f"b{i}"], [f"a{i}"]),
                  N("Relu", [f"a{i}"], [f"r{i}"])]
        prev, cin = f"r{i}", cout
    out.append(model("dynamic_cnn", nodes, {"x": f32(1, 3, 17, 15)}, [("r2", np.float32), ("ci2", np.int32), ("q1", np.uint8)], inits, opset=13))
    # weight-only QDQ: DequantizeLinear of int8 weights (per output channel, symmetric) into Conv, MatMul and Gemm
    wc = i8(6, 3, 3, 3)
    wm = i8(24, 10)
    wg = i8(5, 10)  # Gemm transB
    out.append(model("qdq_weights", [
        N("DequantizeLinear", ["wc", "wcs", "wcz"], ["wcf"], axis=0),
        N("Conv", ["x", "wcf", "bc"], ["c"], pads=[1, 1, 1, 1]),
        N("Relu", ["c"], ["cr"]),
        N("Flatten", ["cr"], ["fl"]),
        N("DequantizeLinear", ["wm", "wms", "wmz"], ["wmf"], axis=1),
        N("MatMul", ["fl", "wmf"], ["mm"]),
        N("DequantizeLinear", ["wg", "wgs"], ["wgf"]),
        N("Gemm", ["mm", "wgf", "bg"], ["y"], transB=1)],
        {"x": f32(1, 3, 2, 2)}, [("cr", np.float32), ("y", np.float32)],
        {"wc": wc, "wcs": rng.uniform(0.01, 0.03, 6).astype(np.float32), "wcz": np.zeros(6, np.int8), "bc": f32(6, scale=0.1),
         "wm": wm, "wms": rng.uniform(0.01, 0.03, 10).astype(np.float32), "wmz": i8(10),
         "wg": wg, "wgs": np.float32(0.02), "bg": f32(5)}, opset=13))
    # com.microsoft MatMulNBits: 4 bits, block 16, K = 40 (last block short), packed zero points, bias; 8 bits, block 32
    for bits, K, Nn, bs, zp, bias in [(4, 40, 7, 16, True, True), (8, 64, 5, 32, False, False), (4, 64, 9, 32, False, False)]:
        nb, blob = -(-K // bs), bs * bits // 8
        codes = rng.integers(0, 2 ** bits, size=(Nn, nb, bs))
        if bits == 4:
            packed = (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)
        else:
            packed = codes.astype(np.uint8)
        assert packed.shape == (Nn, nb, blob)
        ins_ = ["a", "b", "s"]
        ini = {"b": packed, "s": rng.uniform(0.01, 0.05, Nn * nb).astype(np.float32)}
        if zp:
            zc = rng.integers(0, 16, size=(Nn, nb + (nb % 2)))
            ini["z"] = (zc[:, 0::2] | (zc[:, 1::2] << 4)).astype(np.uint8).reshape(-1)
            ins_.append("z")
        if bias:
            ins_ += ["", "bias"] if zp else ["", "", "bias"]
            ini["bias"] = f32(Nn)
        out.append(model(f"matmul_nbits_{bits}b_k{K}", [helper.make_node("MatMulNBits", ins_, ["y"], domain="com.microsoft", K=K, N=Nn, bits=bits,
                                                                          block_size=bs)],
                         {"a": f32(2, 3, K)}, [("y", np.float32)], ini, opset=17, ms=True))
    return out


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        fails.append(what)


def main():
    bin_, work = sys.argv[1], sys.argv[2]
    if not os.path.isdir(os.path.join(NODE_MODULES, "onnxruntime-node")):
        print("skipped: onnxruntime-node is not installed (scripts/setup.sh --bench)")
        sys.exit(77)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    jobs, runs = [], []
    for name, m, inputs in cases():
        d = os.path.join(work, name)
        os.makedirs(d)
        path = os.path.join(d, "model.onnx")
        onnx.save(m, path)
        files = {}
        for k, v in inputs.items():
            files[k] = os.path.join(d, k + ".npy")
            np.save(files[k], v)
        for sub, opts in (("ort", {"graphOptimizationLevel": "disabled"}), ("ort_opt", {})):
            jobs.append({"model": path, "options": opts, "sets": [{"inputs": files, "outdir": os.path.join(d, sub)}]})
        runs.append((name, path, files, [o.name for o in m.graph.output]))
    manifest = os.path.join(work, "manifest.json")
    json.dump(jobs, open(manifest, "w"))
    subprocess.run(["node", os.path.join(ROOT, "scripts", "ort_run.js"), manifest], env=dict(os.environ, NODE_PATH=NODE_MODULES), check=True)
    for name, path, files, outs in runs:
        d = os.path.dirname(path)
        errs = [os.path.join(d, sub, "error.txt") for sub in ("ort", "ort_opt")]
        if any(os.path.exists(e) for e in errs):
            check(False, f"{name}: ONNX Runtime failed: " + " / ".join(open(e).read() for e in errs if os.path.exists(e)))
            continue
        ins = sum((["--input", f"{k}={f}"] for k, f in files.items()), [])
        r = subprocess.run([bin_, "run", path, *ins, "--threads", "2", "--output-dir", os.path.join(d, "o2g")], capture_output=True, text=True)
        if r.returncode != 0:
            check(False, f"{name}: onnx2ggml run exit {r.returncode}: {r.stderr.strip()}")
            continue
        for k, oname in enumerate(outs):
            ref = np.load(os.path.join(d, "ort", f"output_{k}.npy"))
            opt = np.load(os.path.join(d, "ort_opt", f"output_{k}.npy"))
            got = np.load(os.path.join(d, "o2g", f"output_{k}.npy"))
            if got.dtype != ref.dtype or got.shape != ref.shape:
                check(False, f"{name}/{oname}: {got.dtype}{list(got.shape)}, ONNX Runtime {ref.dtype}{list(ref.shape)}")
            elif ref.dtype.kind in "iu":
                for r, how in ((ref, "unoptimized"), (opt, "optimized")):
                    n = int((got != r).sum())
                    worst = int(np.abs(got.astype(np.int64) - r.astype(np.int64)).max()) if n else 0
                    check(n == 0, f"{name}/{oname}: integers equal to {how} ONNX Runtime's ({n} of {r.size} differ, by up to {worst})")
            else:
                scale = float(np.abs(ref).max()) or 1.0
                e = float(np.abs(got.astype(np.float64) - ref).max()) / scale
                e_opt = float(np.abs(opt.astype(np.float64) - ref).max()) / scale
                check(e <= FLOAT_TOL, f"{name}/{oname}: max|got - ORT| = {e:.2e} of max|ORT| (bound {FLOAT_TOL}; "
                                      f"ONNX Runtime's optimized graph differs from its unoptimized one by {e_opt:.2e})")
    print("PASS" if not fails else f"FAIL ({len(fails)})")
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
