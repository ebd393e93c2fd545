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
com.microsoft MatMulNBits (4 and 8 bits, packed zero points, K not a multiple of the block, bias), and with
accuracy_level 4 (stored in ggml's q4_0 / q4_1 / q8_0 from its codes: compile's GGUF read back here; output within
ACC4_TOL of ONNX Runtime's, which quantizes A too). Odd sizes throughout. Skips (exit 77) when onnxruntime-node is not installed (scripts/setup.sh --bench).
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
        out.append(matmul_nbits(f"matmul_nbits_{bits}b_k{K}", bits, K, Nn, bs, zp, bias))
    # accuracy_level 4 (A may be quantized to int8): the weight is stored in the ggml type that holds its codes, A
    # quantized to q8_0 by ggml's product, as ONNX Runtime quantizes it per block (checked against its output within
    # ACC4_TOL, and the stored blocks against the codes: main). Float16 scales (exact) and float32 ones (bound).
    for name, bits, K, Nn, bs, zp, f16_scales, want in [("nbits_acc4_q4_0", 4, 256, 48, 32, False, True, "Q4_0"),
                                                        ("nbits_acc4_q4_1", 4, 192, 40, 64, True, False, "Q4_1"),
                                                        ("nbits_acc4_q8_0", 8, 128, 24, 32, False, False, "Q8_0")]:
        out.append(matmul_nbits(name, bits, K, Nn, bs, zp, False, accuracy_level=4, f16_scales=f16_scales))
        ACC4[name] = want
    # weight-only QDQ MatMul (int8, symmetric, per column, float16 scales) run with --weights q8_0: stored from its
    # int8 values (exact), not quantized again by ggml's quantizer (main: check_stored_codes)
    K, Nn = 128, 48
    codes = i8(K, Nn)
    scales = rng.uniform(0.005, 0.02, Nn).astype(np.float16).astype(np.float32)
    NBITS["qdq_matmul_as_q8_0"] = (codes.astype(np.float32) * scales, np.zeros((K, Nn), np.float32))
    out.append(model("qdq_matmul_as_q8_0", [N("DequantizeLinear", ["w", "ws", "wz"], ["wf"], axis=1), N("MatMul", ["a", "wf"], ["y"])],
                     {"a": f32(3, K)}, [("y", np.float32)], {"w": codes, "ws": scales, "wz": np.zeros(Nn, np.int8)}, opset=13))
    return out


ACC4 = {}  # accuracy_level 4 cases: the ggml type their weight must be stored in
ACC4_TOL = 1e-2  # of max|ref| (measured: 2.5e-4 for q4_0/q8_0, 6.9e-3 for q4_1; ONNX Runtime's own distance
                 # from float32 arithmetic on these models is 6.4e-3 to 7.5e-3)
NBITS = {}  # name: the float32 weight [K, N] the codes give ((code - zero) * scale), the largest |scale * zero|


def matmul_nbits(name, bits, K, Nn, bs, zp, bias, accuracy_level=None, f16_scales=False):
    nb, blob = -(-K // bs), bs * bits // 8
    codes = rng.integers(0, 2 ** bits, size=(Nn, nb, bs))
    if bits == 4:
        packed = (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)
    else:
        packed = codes.astype(np.uint8)
    assert packed.shape == (Nn, nb, blob)
    scales = rng.uniform(0.01, 0.05, Nn * nb).astype(np.float32)
    if f16_scales:
        scales = scales.astype(np.float16).astype(np.float32)
    ins_ = ["a", "b", "s"]
    ini = {"b": packed, "s": scales}
    zeros = np.full((Nn, nb), 2 ** (bits - 1))
    if zp:
        zc = rng.integers(0, 16, size=(Nn, nb + (nb % 2)))
        ini["z"] = (zc[:, 0::2] | (zc[:, 1::2] << 4)).astype(np.uint8).reshape(-1)
        ins_.append("z")
        zeros = zc[:, :nb]
    if bias:
        ins_ += ["", "bias"] if zp else ["", "", "bias"]
        ini["bias"] = f32(Nn)
    s2 = scales.reshape(Nn, nb)
    w = ((codes - zeros[..., None]).astype(np.float32) * s2[..., None]).reshape(Nn, nb * bs)[:, :K]
    # the bound on each stored value when the scales are not float16 values: 2^-11 of what d scales (+ q4_1's m)
    q41 = bits == 4 and zp
    scaled = np.abs((codes if q41 else codes - zeros[..., None]) * s2[..., None]) + (np.abs(s2 * zeros)[..., None] if q41 else 0)
    NBITS[name] = (np.ascontiguousarray(w.T), np.ascontiguousarray((scaled.reshape(Nn, nb * bs)[:, :K] * 2.0 ** -11).T))
    attrs = dict(K=K, N=Nn, bits=bits, block_size=bs)
    if accuracy_level is not None:
        attrs["accuracy_level"] = accuracy_level
    return model(name, [helper.make_node("MatMulNBits", ins_, ["y"], domain="com.microsoft", **attrs)],
                 {"a": f32(2, 3, K)}, [("y", np.float32)], ini, opset=17, ms=True)


GGML_TYPES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 8: "Q8_0"}


def gguf_tensors(path):
    """{name: (ggml type name, ne, bytes)} of a GGUF file (version 3, read here: the format of ggml's gguf.h)."""
    import struct
    b = open(path, "rb").read()
    pos = [0]

    def take(fmt):
        v = struct.unpack_from("<" + fmt, b, pos[0])
        pos[0] += struct.calcsize("<" + fmt)
        return v[0]

    def string():
        n = take("Q")
        pos[0] += n
        return b[pos[0] - n:pos[0]].decode()
    sizes = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et, n = take("I"), take("Q")
            return [value(et) for _ in range(n)]
        return take(sizes[t])
    assert b[:4] == b"GGUF" and struct.unpack_from("<I", b, 4)[0] == 3, path
    pos[0] = 8
    n_tensors, n_kv = take("Q"), take("Q")
    kv = {}
    for _ in range(n_kv):
        k = string()
        kv[k] = value(take("I"))
    infos = []
    for _ in range(n_tensors):
        name = string()
        ne = [take("Q") for _ in range(take("I"))]
        infos.append((name, take("I"), ne, take("Q")))
    align = kv.get("general.alignment", 32)
    data = (pos[0] + align - 1) // align * align
    block = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 8: (32, 34)}
    out = {}
    for name, t, ne, off in infos:
        n = int(np.prod(ne))
        if t in block:
            out[name] = (GGML_TYPES[t], ne, b[data + off:data + off + n // block[t][0] * block[t][1]])
    return out


def dequantize(t, raw, n):
    """ggml's Q4_0 / Q4_1 / Q8_0 blocks of 32 (d f16 [m f16] codes) as float32."""
    if t == "Q8_0":
        blk = np.frombuffer(raw, dtype=[("d", "<f2"), ("q", "i1", 32)])
        return (blk["d"].astype(np.float32)[:, None] * blk["q"].astype(np.float32)).reshape(n)
    blk = np.frombuffer(raw, dtype=[("d", "<f2"), ("m", "<f2"), ("q", "u1", 16)] if t == "Q4_1" else
                        [("d", "<f2"), ("q", "u1", 16)])
    q = np.concatenate([blk["q"] & 15, blk["q"] >> 4], axis=1).astype(np.float32)
    d = blk["d"].astype(np.float32)[:, None]
    return (q * d + blk["m"].astype(np.float32)[:, None] if t == "Q4_1" else (q - 8) * d).reshape(n)


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        fails.append(what)


def check_stored_codes(bin_, name, path, ins, want, args, run_out):
    """A weight the model dequantizes from integers (a MatMulNBits with accuracy_level 4; a QDQ MatMul under
    `args` --weights q8_0): compile's model.gguf stores it as `want`, and those blocks give back the weight the
    integers define: exactly with float16 scales, else within 2^-11 of what the block scale multiplies (+ 2^-11
    of |scale * zero| for q4_1: its offset rounded to float16 too). For MatMulNBits, `--weights-rule '.*=f32'`
    keeps it float32: within FLOAT_TOL of float64 arithmetic on the codes' weight."""
    d = os.path.dirname(path)
    r = subprocess.run([bin_, "compile", path, "-o", os.path.join(d, "compiled"), *args], capture_output=True, text=True)
    if r.returncode != 0:
        return check(False, f"{name}: compile exit {r.returncode}: {r.stderr.strip()}")
    w, bound = NBITS[name]
    stored = [v for v in gguf_tensors(os.path.join(d, "compiled", "model.gguf")).values() if v[1][:2] == [w.shape[0], w.shape[1]]]
    if len(stored) != 1 or stored[0][0] != want:
        return check(False, f"{name}: the weight is stored as {[v[0] for v in stored]}, want {want}")
    back = dequantize(stored[0][0], stored[0][2], w.size).reshape(w.shape[1], w.shape[0]).T
    diff = np.abs(back - w)
    exact = bool(np.array_equal(back, w))
    within = bool((diff <= bound).all())
    f16 = bool(np.array_equal(w, w.astype(np.float16).astype(np.float32))) and not name.endswith("q4_1")
    check(within and (exact or not f16), f"{name}: stored as {want}, its blocks give back the integers' weight "
                                         f"({'exactly' if exact else f'within 2^-11: max diff {diff.max():.2e}'})")
    if run_out is None:
        return
    f32_dir = os.path.join(d, "o2g_f32")
    r = subprocess.run([bin_, "run", path, *ins, "--weights-rule", ".*=f32", "--output-dir", f32_dir], capture_output=True, text=True)
    if r.returncode != 0:
        return check(False, f"{name}: run --weights-rule '.*=f32' exit {r.returncode}: {r.stderr.strip()}")
    a = np.load(ins[1].split("=", 1)[1]).astype(np.float64)
    ref = a @ w.astype(np.float64)
    got = np.load(os.path.join(f32_dir, "output_0.npy"))
    e = float(np.abs(got - ref).max() / np.abs(ref).max())
    e_q = float(np.abs(np.load(run_out) - ref).max() / np.abs(ref).max())
    check(e <= FLOAT_TOL, f"{name}: --weights-rule '.*=f32' keeps float32 arithmetic: {e:.2e} of max|ref| from "
                          f"float64 (the default, A quantized: {e_q:.2e})")


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
                tol = ACC4_TOL if name in ACC4 else FLOAT_TOL
                check(e <= tol, f"{name}/{oname}: max|got - ORT| = {e:.2e} of max|ORT| (bound {tol}; "
                                f"ONNX Runtime's optimized graph differs from its unoptimized one by {e_opt:.2e})")
        if name in ACC4:
            check_stored_codes(bin_, name, path, ins, ACC4[name], [], os.path.join(d, "o2g", "output_0.npy"))
        if name == "qdq_matmul_as_q8_0":
            check_stored_codes(bin_, name, path, ins, "Q8_0", ["--weights", "q8_0"], None)
    print("PASS" if not fails else f"FAIL ({len(fails)})")
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
