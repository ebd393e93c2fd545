#!/usr/bin/env python3
"""Hand-made malformed inputs: each case is built here (onnx.helper and raw protobuf edits),
run through the CLI, and must end with its exact exit code and a message naming the problem.
Never a crash, a GGML_ASSERT abort, or an allocation of absurd size.

usage: robustness.py ONNX2GGML WORKDIR      (prints one line per case and 'N passed, M failed')
"""
import os
import re
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

BIN, WORK = sys.argv[1], os.path.abspath(sys.argv[2])
os.makedirs(WORK, exist_ok=True)
CASES = []  # (name, argv, exit code, regex)


def path(name):
    return os.path.join(WORK, name)


def case(name, args, code, pattern):
    CASES.append((name, [BIN] + args, code, pattern))


def save(name, model, raw=None):
    p = path(name)
    with open(p, "wb") as f:
        f.write(raw if raw is not None else model.SerializeToString())
    return p


def vi(name, dims, t=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, t, dims)


def model(nodes, inputs, outputs, inits=(), opset=17, domains=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    ops = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, 1) for d in domains]
    return helper.make_model(g, opset_imports=ops)


def relu_model():
    return model([helper.make_node("Relu", ["x"], ["y"], name="relu0")], [vi("x", [1, 4])], [vi("y", [1, 4])])


def add_init_model(t):
    return model([helper.make_node("Add", ["x", "w"], ["y"], name="add0")], [vi("x", [2, 3])], [vi("y", None)], [t])


def w(dims, vals=None):
    a = np.ones(dims, np.float32) if vals is None else np.array(vals, np.float32).reshape(dims)
    return numpy_helper.from_array(a, "w")


def run(p, *extra):
    return ["run", p, "--random-inputs", "0", "--output-dir", WORK] + list(extra)


# ---- files that are not (whole) ONNX models ---------------------------------------------
case("empty file", ["inspect", save("empty.onnx", None, b"")], 2, r"empty\.onnx: file is empty")
case("text file", ["inspect", save("text.onnx", None, b"hello, I am not a model\n")], 2, r"text\.onnx: not a valid ONNX model")
case("npy as model", ["inspect", save("arr.onnx", None, b"\x93NUMPY\x01\x00v\x00{'descr': '<f4'}")], 2, r"arr\.onnx: not a valid ONNX model")
case("a folder", ["inspect", WORK], 2, r"not a regular file")
case("missing file", ["inspect", path("missing.onnx")], 2, r"missing\.onnx: no such file")
big = path("big.onnx")
with open(big, "wb") as f:
    f.truncate(2**31 + 16)  # sparse: no disk used
case("over 2 GB without external data", ["inspect", big], 2, r"over 2 GB.*external data")
full = relu_model().SerializeToString()
for i, frac in enumerate([0.1, 0.3, 0.5, 0.7, 0.9]):
    n = max(1, int(len(full) * frac))
    cut = full[:n]
    try:
        onnx.ModelProto.FromString(cut)
        continue  # a prefix that happens to parse is a different (valid) file, not a truncation
    except Exception:  # noqa: BLE001
        pass
    case(f"truncated at {int(frac * 100)}%", ["inspect", save(f"trunc{i}.onnx", None, cut)], 2, r"not a valid ONNX model")
tiny = open(os.path.join(os.path.dirname(__file__), "..", "..", "examples", "tinycnn", "model.onnx"), "rb").read()
for i, frac in enumerate([0.05, 0.25, 0.5, 0.75, 0.98]):
    case(f"example truncated at {int(frac * 100)}%", ["run", save(f"tinytrunc{i}.onnx", None, tiny[: int(len(tiny) * frac)]), "--random-inputs", "0", "--output-dir", WORK],
         2, r"tinytrunc%d\.onnx: (not a valid ONNX model|.*no producer|.*raw_data holds)" % i)
flipped = bytearray(tiny)
for k in range(40, len(flipped), 997):
    flipped[k] ^= 0xFF
case("corrupted bytes", ["run", save("flipped.onnx", None, bytes(flipped)), "--random-inputs", "0", "--output-dir", WORK], 2,
     r"flipped\.onnx: ")

# ---- tensors ------------------------------------------------------------------------------
t = w([2, 3]); t.raw_data = t.raw_data[:10]
case("raw_data shorter than dims", run(save("raw_short.onnx", add_init_model(t))), 2, r"tensor 'w': raw_data holds 10 bytes but shape \[2,3\] of float32 needs 24")
t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2, 3], float_data=[1.0, 2.0])
case("float_data count mismatch", run(save("float_count.onnx", add_init_model(t))), 2, r"tensor 'w': holds 2 values but shape \[2,3\] needs 6")
t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2, 3])
case("initializer without data", run(save("nodata.onnx", add_init_model(t))), 2, r"tensor 'w': has no data")
t = w([2, 3]); t.dims[0] = -2
case("negative dim", run(save("negdim.onnx", add_init_model(t))), 2, r"tensor 'w': negative dimension")
t = w([2, 3]); del t.dims[:]; t.dims.extend([2**40, 2**40]); t.raw_data = b""
case("dims overflow int64", run(save("overflow.onnx", add_init_model(t))), 2, r"overflows int64|too large")
t = w([2, 3]); del t.dims[:]; t.dims.extend([10**6, 10**6]); t.raw_data = b""
case("enormous dims", run(save("huge.onnx", add_init_model(t))), 2, r"tensor 'w': (raw_data|shape).*")
case("dims of 0 that do not broadcast", run(save("zero.onnx", add_init_model(numpy_helper.from_array(np.zeros((0, 3), np.float32), "w")))), 2,
     r"add0.*cannot be broadcast")
t = w([2, 3]); t.data_type = 99
case("unknown dtype", run(save("dtype99.onnx", add_init_model(t))), 3, r"tensor 'w': data type 99 is not supported")
t = helper.make_tensor("w", TensorProto.STRING, [1], [b"a"])
case("string tensor into Add", run(save("string.onnx", add_init_model(t))), 3, r"add0.*input 'w' is a string tensor, which this operator does not take")
t = helper.make_tensor("w", TensorProto.STRING, [1], [b"a"]); t.dims[0] = 3
case("string tensor count mismatch", run(save("string_count.onnx", add_init_model(t))), 2, r"tensor 'w': holds 1 strings but shape \[3\] needs 3")
t = helper.make_tensor("w", TensorProto.STRING, [1], [b"a"]); t.raw_data = b"abcd"
case("string tensor in raw_data", run(save("string_raw.onnx", add_init_model(t))), 2, r"tensor 'w': a string tensor must hold its elements in string_data")
sn = model([helper.make_node("StringNormalizer", ["s"], ["y"], name="norm0")], [vi("s", [2], TensorProto.STRING)], [vi("y", None, TensorProto.STRING)], opset=10)
case("string graph input without a value", run(save("strnorm.onnx", sn)), 2, r"input 's' is a string tensor: give --input s=FILE\.npy")
case("string graph input frozen per run (a control input)", ["run", path("strnorm.onnx"), "--input", "s=" + path("strings.npy"), "--output-dir", WORK], 0, r"")
case("compile: string graph input not frozen", ["compile", path("strnorm.onnx"), "-o", path("strnorm_gen0")], 3,
     r"norm0.*must be a compile-time constant \(a graph input: .*--freeze s=FILE\.npy\)")
case("compile with a string output", ["compile", save("strnorm_c.onnx", sn), "-o", path("strnorm_gen"), "--freeze", "s=" + path("strings.npy")], 3,
     r"graph output 'y' has dtype string")
cast = model([helper.make_node("Cast", ["s"], ["y"], name="cast0", to=TensorProto.FLOAT)], [vi("s", [2], TensorProto.STRING)], [vi("y", None)], opset=13)
case("Cast of a string that is no number", ["run", save("strcast.onnx", cast), "--freeze", "s=" + path("strings.npy"), "--output-dir", WORK], 3,
     r"cannot cast the string 'Monday' to a number")
sn3 = model([helper.make_node("StringNormalizer", ["s"], ["y"], name="norm1")], [vi("s", [1, 1, 2], TensorProto.STRING)], [vi("y", None, TensorProto.STRING)], opset=10)
case("StringNormalizer of rank 3", ["run", save("strnorm3.onnx", sn3), "--freeze", "s=" + path("strings3.npy"), "--output-dir", WORK], 2,
     r"norm1.*input must be \[C\] or \[1, C\]")

np.save(path("strings.npy"), np.array(["Monday", "x"]))
np.save(path("strings3.npy"), np.array([[["a", "b"]]]))

# ---- external data ---------------------------------------------------------------------
ext_dir = path("ext")
os.makedirs(ext_dir, exist_ok=True)
with open(os.path.join(ext_dir, "w.bin"), "wb") as f:
    f.write(np.ones(6, np.float32).tobytes())
outside = path("outside.bin")
with open(outside, "wb") as f:
    f.write(np.ones(6, np.float32).tobytes())
link = os.path.join(ext_dir, "link.bin")
if os.path.lexists(link):
    os.remove(link)
os.symlink(outside, link)
os.makedirs(os.path.join(ext_dir, "adir"), exist_ok=True)


def ext_model(name, **kv):
    t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2, 3])
    t.data_location = TensorProto.EXTERNAL
    for k, v in kv.items():
        e = t.external_data.add()
        e.key, e.value = k, str(v)
    p = os.path.join(ext_dir, name)
    with open(p, "wb") as f:
        f.write(add_init_model(t).SerializeToString())
    return p


case("external data ok", run(ext_model("ok.onnx", location="w.bin")), 0, r"")
case("external: absolute path", run(ext_model("abs.onnx", location=outside)), 2, r"location '.*' is an absolute path")
case("external: .. segment", run(ext_model("dotdot.onnx", location="../outside.bin")), 2, r"contains a '\.\.' segment")
case("external: nested ..", run(ext_model("dotdot2.onnx", location="adir/../../outside.bin")), 2, r"contains a '\.\.' segment")
case("external: symlink out", run(ext_model("symlink.onnx", location="link.bin")), 2, r"resolves outside the model's folder")
case("external: missing file", run(ext_model("missing.onnx", location="nope.bin")), 2, r"'nope\.bin' does not exist")
case("external: a folder", run(ext_model("dir.onnx", location="adir")), 2, r"is not a regular file")
case("external: offset past the end", run(ext_model("off.onnx", location="w.bin", offset=100)), 2, r"offset 100 is outside")
case("external: length past the end", run(ext_model("len.onnx", location="w.bin", offset=8, length=24)), 2, r"runs past the end")
case("external: length != shape", run(ext_model("len2.onnx", location="w.bin", length=12)), 2, r"external data holds 12 bytes but shape \[2,3\]")
case("external: bad offset", run(ext_model("badoff.onnx", location="w.bin", offset="12abc")), 2, r"is not a number")
case("external: empty location", run(ext_model("emptyloc.onnx", location="")), 2, r"is empty")

# ---- graph structure -----------------------------------------------------------------------
n = helper.make_node("Conv", ["x", "k"], ["y"], name="conv0")
n.attribute.append(helper.make_attribute("strides", 1.5))
k = numpy_helper.from_array(np.ones((1, 1, 1, 1), np.float32), "k")
case("attribute of the wrong type", run(save("attr_type.onnx", model([n], [vi("x", [1, 1, 4, 4])], [vi("y", None)], [k]))), 2,
     r"conv0.*attribute 'strides' has type float, expected ints")
n = helper.make_node("Relu", ["x"], ["y"], name="relu0")
n.attribute.append(helper.make_attribute("a", 1)); n.attribute.append(helper.make_attribute("a", 2))
case("attribute given twice", run(save("attr_twice.onnx", model([n], [vi("x", [1, 4])], [vi("y", None)]))), 2, r"attribute 'a' given twice")
case("value with no producer", run(save("noprod.onnx", model([helper.make_node("Add", ["x", "ghost"], ["y"], name="add0")], [vi("x", [2])], [vi("y", None)]))), 2,
     r"input 'ghost' of node 'add0' \(Add\) has no producer")
m = add_init_model(w([2, 3])); m.graph.initializer.append(w([2, 3]))
case("duplicate initializer", run(save("dupinit.onnx", m)), 2, r"initializer 'w' is defined twice")
case("value produced twice", run(save("twice.onnx", model([helper.make_node("Relu", ["x"], ["y"], name="a"), helper.make_node("Relu", ["x"], ["y"], name="b")],
                                                        [vi("x", [2])], [vi("y", None)]))), 2, r"value 'y' is produced twice")
case("graph cycle", run(save("cycle.onnx", model([helper.make_node("Relu", ["b"], ["a"], name="n1"), helper.make_node("Relu", ["a"], ["b"], name="n2")],
                                                 [vi("x", [2])], [vi("b", None)]))), 2, r"cycle through node 'n[12]'")
case("nodes out of topological order (valid)", run(save("order.onnx", model([helper.make_node("Relu", ["h"], ["y"], name="second"), helper.make_node("Neg", ["x"], ["h"], name="first")],
                                                                          [vi("x", [2])], [vi("y", None)]))), 0, r"")
case("unknown domain", run(save("domain.onnx", model([helper.make_node("Magic", ["x"], ["y"], name="m0", domain="com.acme")], [vi("x", [2])], [vi("y", None)], domains=["com.acme"]))), 3,
     r"node 'm0' \(com\.acme\.Magic, opset 1\): unknown domain 'com\.acme'")
case("unknown operator", run(save("unknown_op.onnx", model([helper.make_node("FrobnicateV2", ["x"], ["y"], name="f0")], [vi("x", [2])], [vi("y", None)]))), 3,
     r"node 'f0' \(FrobnicateV2, opset 17\): operator not implemented")
case("opset newer than supported", run(save("opset99.onnx", model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2])], [vi("y", None)], opset=99))), 3,
     r"opset 99 .*newer")
m = relu_model(); m.graph.output[0].name = "nothing"
case("output not produced", run(save("noout.onnx", m)), 2, r"graph output 'nothing' is not produced")
m = relu_model(); del m.graph.output[:]
case("graph without outputs", run(save("nooutputs.onnx", m)), 2, r"the graph has no outputs")
m = onnx.ModelProto(); m.ir_version = 8
case("model without a graph", ["inspect", save("nograph.onnx", m)], 2, r"the model has no graph")
m = relu_model(); m.graph.node[0].op_type = ""
case("node without op_type", run(save("noop.onnx", m)), 2, r"has no op_type")
m = relu_model(); m.graph.input[0].ClearField("type")
case("input without a type", run(save("notype.onnx", m)), 2, r"graph input 'x' has no tensor type")
seq = helper.make_tensor_sequence_value_info("x", TensorProto.FLOAT, [2])
case("sequence input", run(save("seq.onnx", model([helper.make_node("Identity", ["x"], ["y"])], [seq], [vi("y", None)]))), 3, r"is a sequence, map or optional")

# ---- shapes and attributes that contradict each other ----------------------------------------
def single(name, node, inputs, inits=()):
    return save(name, model([node], inputs, [vi("y", None)], inits))


shape = numpy_helper.from_array(np.array([5, 5], np.int64), "s")
case("reshape to an incompatible shape", run(single("reshape.onnx", helper.make_node("Reshape", ["x", "s"], ["y"], name="r0"), [vi("x", [2, 3])], [shape])), 2,
     r"r0.*cannot reshape \[2,3\]")
case("conv channel mismatch", run(single("conv_ch.onnx", helper.make_node("Conv", ["x", "k"], ["y"], name="c0"), [vi("x", [1, 3, 8, 8])],
                                         [numpy_helper.from_array(np.ones((4, 2, 3, 3), np.float32), "k")])), 2, r"c0.*input channels 3")
case("conv kernel larger than input", run(single("conv_big.onnx", helper.make_node("Conv", ["x", "k"], ["y"], name="c0"), [vi("x", [1, 1, 2, 2])],
                                                 [numpy_helper.from_array(np.ones((1, 1, 5, 5), np.float32), "k")])), 2, r"kernel is larger than the padded input")
# (found by fuzz_model: the host evaluator read element 0 of the empty axis)
case("argmax over an empty axis", run(single("argmax_empty.onnx", helper.make_node("ArgMax", ["x"], ["y"], name="am", axis=1), [vi("x", [2, 0])])), 2,
     r"am.*axis 1 of input \[2,0\] is empty")
case("matmul inner dims", run(single("matmul.onnx", helper.make_node("MatMul", ["x", "b"], ["y"], name="mm"), [vi("x", [2, 3])],
                                     [numpy_helper.from_array(np.ones((4, 5), np.float32), "b")])), 2, r"mm.*inner dims differ")
rnn_w = [numpy_helper.from_array(np.ones(sh, np.float32), n) for n, sh in (("W", (1, 3, 4)), ("R", (1, 3, 3)), ("h0", (1, 1, 2)))]
case("rnn initial_h of the wrong shape", run(single("rnn_h0.onnx", helper.make_node("RNN", ["x", "W", "R", "", "", "h0"], ["y"], hidden_size=3, name="rn"),
                                                    [vi("x", [5, 1, 4])], rnn_w)), 2, r"rn.*initial_h has shape \[1,1,2\], expected \[1,1,3\]")
case("concat rank mismatch", run(single("concat.onnx", helper.make_node("Concat", ["x", "b"], ["y"], axis=0, name="cc"), [vi("x", [2, 3])],
                                        [numpy_helper.from_array(np.ones((3,), np.float32), "b")])), 2, r"cc.*different ranks")
case("transpose bad perm", run(single("perm.onnx", helper.make_node("Transpose", ["x"], ["y"], perm=[0, 0], name="tp"), [vi("x", [2, 3])])), 2,
     r"tp.*not a permutation")
case("gather index out of range", run(single("gather.onnx", helper.make_node("Gather", ["x", "i"], ["y"], name="g0"), [vi("x", [2, 3])],
                                             [numpy_helper.from_array(np.array([7], np.int64), "i")])), 2, r"g0.*index 7 is out of range")
case("squeeze a non-1 axis", run(single("squeeze.onnx", helper.make_node("Squeeze", ["x", "a"], ["y"], name="sq"), [vi("x", [2, 3])],
                                        [numpy_helper.from_array(np.array([1], np.int64), "a")])), 2, r"sq.*cannot squeeze axis 1 of size 3")
case("axis out of range", run(single("axis.onnx", helper.make_node("Softmax", ["x"], ["y"], axis=5, name="sm"), [vi("x", [2, 3])])), 2,
     r"sm.*axis 5 is out of range for rank 2")
case("slice step 0", run(single("slice.onnx", helper.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["y"], name="sl"), [vi("x", [4])],
                                [numpy_helper.from_array(np.array([v], np.int64), n) for n, v in [("st", 0), ("en", 4), ("ax", 0), ("sp", 0)]])), 2, r"sl.*slice step 0")
seq_empty = helper.make_node("SequenceEmpty", [], ["s0"], name="se")
seq_ins = helper.make_node("SequenceInsert", ["s0"], ["s1"], name="si")  # no tensor to insert (fuzz_model found it)
seq_len = helper.make_node("SequenceLength", ["s1"], ["y"], name="sl")
case("fuzz: SequenceInsert without a tensor", run(save("seq_ins.onnx", model([seq_empty, seq_ins, seq_len], [vi("x", [1])], [vi("y", None, TensorProto.INT64)]))), 2,
     r"si.*SequenceInsert.*no tensor to insert")
case("fuzz: GatherND with scalar indices", run(single("gnd.onnx", helper.make_node("GatherND", ["x", "i"], ["y"], name="gn"), [vi("x", [2, 3])],
                                               [numpy_helper.from_array(np.array(0, np.int64), "i")])), 2, r"gn.*rank >= 1")
case("split sizes do not add up", run(single("split.onnx", helper.make_node("Split", ["x", "sz"], ["y"], name="sp"), [vi("x", [6])],
                                             [numpy_helper.from_array(np.array([2, 2], np.int64), "sz")])), 2, r"sp.*do not add up")
case("expand incompatible", run(single("expand.onnx", helper.make_node("Expand", ["x", "s"], ["y"], name="ex"), [vi("x", [2, 3])],
                                       [numpy_helper.from_array(np.array([4, 4], np.int64), "s")])), 2, r"ex.*cannot expand")
case("tile negative repeat", run(single("tile.onnx", helper.make_node("Tile", ["x", "r"], ["y"], name="tl"), [vi("x", [2, 3])],
                                        [numpy_helper.from_array(np.array([1, -1], np.int64), "r")])), 2, r"tl.*negative repeat")
case("resize negative scale", run(single("resize.onnx", helper.make_node("Resize", ["x", "", "sc"], ["y"], name="rs"), [vi("x", [1, 1, 2, 2])],
                                         [numpy_helper.from_array(np.array([1, 1, -2, 2], np.float32), "sc")])), 2, r"rs.*scales must be positive")
cos = helper.make_node("ConstantOfShape", ["s"], ["c"], name="cos", value=helper.make_tensor("v", TensorProto.FLOAT, [1], [1.0]))
add = helper.make_node("Add", ["x", "c"], ["y"], name="add0")
case("compute buffer above --max-memory", ["run", save("cos.onnx", model([cos, add], [vi("x", [1])], [vi("y", None)],
                                                                        [numpy_helper.from_array(np.array([100000, 100000], np.int64), "s")])),
                                            "--random-inputs", "0", "--output-dir", WORK, "--max-memory", "1G"], 2, r"above the memory limit")
case("weights above --max-memory", ["run", os.path.join(os.path.dirname(__file__), "..", "..", "examples", "tinycnn", "model.onnx"),
                                    "--random-inputs", "0", "--output-dir", WORK, "--max-memory", "4K"], 2, r"above the memory limit")

# host kernels (nodes ggml cannot compute exactly run their host evaluator at run time)
ge_idx = numpy_helper.from_array(np.array([[7, 0, 0]], np.int64), "i")
case("host kernel: index out of range found at run time",
     run(single("ge_host.onnx", helper.make_node("GatherElements", ["x", "i"], ["y"], name="ge"), [vi("x", [2, 3], TensorProto.INT32)], [ge_idx])), 2,
     r"ge_host\.onnx: node 'ge' \(GatherElements\).* at run time: index 7 out of range")

# control flow is resolved at compile time
def branch(out, value):
    c = helper.make_node("Constant", [], [out], value=numpy_helper.from_array(np.array([value], np.float32), out + "_v"))
    return helper.make_graph([c], "b", [], [vi(out, [1])])


if_node = helper.make_node("If", ["cond"], ["y"], name="if0", then_branch=branch("t", 1.0), else_branch=branch("e", 0.0))
if_rt = save("if_rt.onnx", model([if_node], [vi("cond", [], TensorProto.BOOL)], [vi("y", None)]))
case("compile: If with a runtime condition", ["compile", if_rt, "-o", path("if_rt_gen")], 3, r"if0.*input 0 \('cond'\) must be a compile-time constant")
for cv in (True, False):  # run: the condition is a control input, the graph specialized per value
    np.save(path(f"cond_{cv}.npy"), np.array(cv))
    np.save(path(f"if_y_{cv}.npy"), np.array([1.0 if cv else 0.0], np.float32))
case("If with a runtime condition: both branches in one session",
     ["check", if_rt, "--input", "cond=" + path("cond_True.npy"), "--expect", "y=" + path("if_y_True.npy"), "--then",
      "--input", "cond=" + path("cond_False.npy"), "--expect", "y=" + path("if_y_False.npy")], 0, r"")
body = helper.make_graph([helper.make_node("Identity", ["c_in"], ["c_out"]), helper.make_node("Add", ["s_in", "x"], ["s_out"])], "body",
                         [vi("i", [], TensorProto.INT64), vi("c_in", [], TensorProto.BOOL), vi("s_in", [1])], [vi("c_out", [], TensorProto.BOOL), vi("s_out", [1])])
big_trip = numpy_helper.from_array(np.array(10**9, np.int64), "m")
loop = helper.make_node("Loop", ["m", "", "x"], ["y"], name="loop0", body=body)
case("Loop of a billion iterations", run(save("loop_big.onnx", model([loop], [vi("x", [1])], [vi("y", None)], [big_trip]))), 3,
     r"loop0.*more than 4096 iterations")
bad_body = helper.make_graph([helper.make_node("Add", ["s_in", "nowhere"], ["s_out"])], "body",
                             [vi("i", [], TensorProto.INT64), vi("c_in", [], TensorProto.BOOL), vi("s_in", [1])], [vi("c_in", [], TensorProto.BOOL), vi("s_out", [1])])
loop2 = helper.make_node("Loop", ["m", "", "x"], ["y"], name="loop1", body=bad_body)
case("Loop body reading an undefined value", run(save("loop_undef.onnx", model([loop2], [vi("x", [1])], [vi("y", None)],
                                                                              [numpy_helper.from_array(np.array(2, np.int64), "m")]))), 2,
     r"input 'nowhere' of node 'loop1' \(Loop\) has no producer")
nested = branch("t", 1.0)
for _ in range(20):
    nested = helper.make_graph([helper.make_node("If", ["cond"], ["t"], then_branch=nested, else_branch=branch("t", 0.0))], "n", [], [vi("t", [1])])
case("subgraphs nested 20 deep", run(save("nested.onnx", model([helper.make_node("If", ["cond"], ["y"], name="top", then_branch=nested, else_branch=branch("y", 0.0))],
                                                                [vi("cond", [], TensorProto.BOOL)], [vi("y", None)]))), 2, r"nested more than 16 deep")

# regressions found by fuzzing (scripts/fuzz.sh)
case("fuzz: binary op with one input", run(single("mul1.onnx", helper.make_node("Mul", ["x"], ["y"], name="mul1"), [vi("x", [2])])), 2,
     r"mul1.*needs at least 2 inputs")
case("fuzz: ConvTranspose strides of the wrong length", run(single("ct.onnx", helper.make_node("ConvTranspose", ["x", "k"], ["y"], name="ct", strides=[2]),
                                                                  [vi("x", [1, 1, 4, 4])], [numpy_helper.from_array(np.ones((1, 1, 3, 3), np.float32), "k")])), 2,
     r"ct.*strides has 1 values, expected 2")
case("fuzz: Conv weight of rank 1", run(single("convw1.onnx", helper.make_node("Conv", ["x", "k"], ["y"], name="cw"), [vi("x", [1, 1, 4, 4])],
                                               [numpy_helper.from_array(np.ones((3,), np.float32), "k")])), 2, r"cw.*must equal the input rank")
case("fuzz: Conv kernel_shape that contradicts the weight", run(single("convks.onnx", helper.make_node("Conv", ["x", "k"], ["y"], name="ck", kernel_shape=[2, 2]),
                                                                       [vi("x", [1, 1, 4, 4])], [numpy_helper.from_array(np.ones((1, 1, 3, 3), np.float32), "k")])), 2,
     r"ck.*kernel_shape differs")
case("fuzz: huge stride", run(single("stride.onnx", helper.make_node("Conv", ["x", "k"], ["y"], name="cs", strides=[2**62, 1]), [vi("x", [1, 1, 4, 4])],
                                     [numpy_helper.from_array(np.ones((1, 1, 3, 3), np.float32), "k")])), 2, r"cs.*strides value .* is out of range")
case("fuzz: ArgMax of a scalar", run(single("argmax0.onnx", helper.make_node("ArgMax", ["x"], ["y"], name="am"), [vi("x", [])])), 2,
     r"am.*given for a scalar")
case("fuzz: ConvTranspose weight/input channel mismatch", run(single("ctc.onnx", helper.make_node("ConvTranspose", ["x", "k"], ["y"], name="ctc"),
                                                                    [vi("x", [1, 2, 4, 4])], [numpy_helper.from_array(np.ones((3, 1, 3, 3), np.float32), "k")])), 2,
     r"ctc.*does not match input channels 2")
case("fuzz: Conv bias of the wrong size", run(single("convb.onnx", helper.make_node("Conv", ["x", "k", "b"], ["y"], name="cb"), [vi("x", [1, 1, 4, 4])],
                                                   [numpy_helper.from_array(np.ones((2, 1, 3, 3), np.float32), "k"), numpy_helper.from_array(np.ones((3,), np.float32), "b")])), 2,
     r"cb.*bias has 3 values for 2 output channels")
case("fuzz: InstanceNormalization scale of the wrong size", run(single("inorm.onnx", helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"], name="in0"),
                                                                       [vi("x", [1, 2, 4])], [numpy_helper.from_array(np.ones((3,), np.float32), n) for n in "sb"])), 2,
     r"in0.*cannot be used as shape")
case("fuzz: Concat of different dtypes", run(single("concatdt.onnx", helper.make_node("Concat", ["x", "i"], ["y"], axis=0, name="cd"), [vi("x", [2])],
                                                   [numpy_helper.from_array(np.array([1, 2], np.int64), "i")])), 2, r"cd.*different dtypes")
case("fuzz: PRelu slope larger than the input", run(single("prelu.onnx", helper.make_node("PRelu", ["x", "s"], ["y"], name="pr"), [vi("x", [2])],
                                                          [numpy_helper.from_array(np.ones((3, 2), np.float32), "s")])), 2, r"pr.*does not broadcast")
case("fuzz: GlobalAveragePool of a 1-D input", run(single("gap1.onnx", helper.make_node("GlobalAveragePool", ["x"], ["y"], name="gap"), [vi("x", [4])])), 2,
     r"gap.*rank >= 3")
case("fuzz: concat with an empty constant", run(single("concat0.onnx", helper.make_node("Concat", ["x", "e"], ["y"], axis=1, name="c0"), [vi("x", [2, 3])],
                                                       [numpy_helper.from_array(np.zeros((2, 0), np.float32), "e")])), 0, r"")
case("fuzz: AveragePool count_include_pad=0 over a huge output (host work O(H+W), not O(H*W))",
     ["inspect", single("avgbig.onnx", helper.make_node("AveragePool", ["x"], ["y"], name="apb", kernel_shape=[2, 2], pads=[1, 1, 1, 1]),
                        [vi("x", [1, 1, 40000, 40000])]), "--ggml", "--max-memory", "1G"], 0, r"")
case("fuzz: Reshape target whose dims overflow int64 with a -1",
     run(single("reshape_ovf.onnx", helper.make_node("Reshape", ["x", "s"], ["y"], name="rov"), [vi("x", [2, 3])],
                [numpy_helper.from_array(np.array([434110461, 8796093022207, -1], np.int64), "s")])), 2,
     r"rov.*more elements than int64 holds")
case("fuzz: Gather with float indices from a graph input (ggml_get_rows assert)",
     ["compile", save("gatherf.onnx", model([helper.make_node("Gather", ["x", "b"], ["y"], name="gf")], [vi("x", [3, 2]), vi("b", [2])], [vi("y", None)])),
      "-o", path("gatherf_out")], 2, r"gf.*holds indices and must be an integer tensor, not float32")
case("fuzz: DepthToSpace of 111 images (the lowering filled the context the graph object needs)",
     ["compile", save("d2s.onnx", model([helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=2, mode="CRD")], [vi("x", [111, 8, 3, 3])],
                                        [vi("y", None)])), "-o", path("d2s_out")], 0, r"wrote .*model\.cpp")
case("fuzz: InstanceNormalization of a 1-D input", run(single("inorm1.onnx", helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"], name="in1"),
                                                            [vi("x", [4])], [numpy_helper.from_array(np.ones((4,), np.float32), n) for n in "sb"])), 2,
     r"in1.*rank >= 2")

# quantized models (src/ops/quant.cpp): parameters that do not fit their tensor, MatMulNBits' packing
def nbits(name, b_shape, **attrs):
    kw = dict(K=40, N=3, bits=4, block_size=16)
    kw.update(attrs)
    inits = [numpy_helper.from_array(np.zeros(b_shape, np.uint8), "b"), numpy_helper.from_array(np.ones(9, np.float32), "s")]
    node = helper.make_node("MatMulNBits", ["x", "b", "s"], ["y"], name="mnb", domain="com.microsoft", **kw)
    return run(save(name, model([node], [vi("x", [2, 40])], [vi("y", None)], inits, domains=["com.microsoft"])))


case("MatMulNBits: B of the wrong size", nbits("mnb_b.onnx", (3, 3, 7)), 2, r"mnb.*B of uint8\[3,3,7\] is not uint8 \[N, n_blocks, blob\] = \[3,3,8\]")
case("MatMulNBits: K not A's last dim", nbits("mnb_k.onnx", (3, 3, 8), K=48), 2, r"mnb.*does not end in K = 48")
case("MatMulNBits: 3 bits", nbits("mnb_bits.onnx", (3, 3, 6), bits=3), 3, r"mnb.*bits 3 \(2, 4 and 8 are supported\)")
case("MatMulNBits: block_size not a power of two", nbits("mnb_bs.onnx", (3, 2, 12), block_size=24), 2, r"mnb.*block_size 24 must be a power of two")
case("MatMulNBits: runtime weight",
     run(save("mnb_rt.onnx", model([helper.make_node("MatMulNBits", ["x", "b", "s"], ["y"], name="mnb", domain="com.microsoft", K=40, N=3, block_size=16)],
                                   [vi("x", [2, 40]), vi("b", [3, 3, 8], TensorProto.UINT8)], [vi("y", None)],
                                   [numpy_helper.from_array(np.ones(9, np.float32), "s")], domains=["com.microsoft"]))), 3,
     r"mnb.*input 1 \('b'\) is computed at run time")
case("blocked DequantizeLinear: scale of the wrong shape",
     run(save("dq_block.onnx", model([helper.make_node("DequantizeLinear", ["q", "s"], ["y"], name="dqb", axis=1, block_size=4)], [vi("x", [1])], [vi("y", None)],
                                     [numpy_helper.from_array(np.zeros((2, 10), np.int8), "q"), numpy_helper.from_array(np.ones((2, 2), np.float32), "s")],
                                     opset=21))), 2,
     r"dqb.*blocked parameter of shape \[2,2\] does not match \[2,10\] in blocks of 4 along axis 1 \(want \[2,3\]\)")
case("QuantizeLinear: per-axis scale of the wrong length",
     run(save("q_axis.onnx", model([helper.make_node("QuantizeLinear", ["x", "s"], ["y"], name="qax", axis=1)], [vi("x", [2, 5])], [vi("y", None)],
                                   [numpy_helper.from_array(np.ones(4, np.float32), "s")], opset=13))), 2,
     r"qax.*per-axis parameter of shape \[4\] does not match axis 1 of \[2,5\]")

# ---- inputs and the command line --------------------------------------------------------------
dyn = save("dyn.onnx", model([helper.make_node("Relu", ["x"], ["y"], name="relu0")], [vi("x", ["batch", 4])], [vi("y", None)]))
case("dynamic dim without --input-shape", run(dyn), 2, r"input 'x' has a dynamic dim 0 \('batch'\)")
case("--input-shape rank mismatch", run(dyn, "--input-shape", "x=2x4x1"), 2, r"has rank 3, the model declares rank 2")
case("--input-shape unknown input", run(dyn, "--input-shape", "zz=2x4"), 2, r"names 'zz', which is not a graph input")
case("--input-shape conflicts", run(dyn, "--input-shape", "x=2x5"), 2, r"conflicts with the model's static dim 1 = 4")
case("--input-shape bad dims", run(dyn, "--input-shape", "x=2xfoo"), 2, r"bad dims '2xfoo'")
# dims bound from the input files (a symbolic dim name binds one value across inputs)
dyn2 = save("dyn2.onnx", model([helper.make_node("Add", ["a", "b"], ["y"], name="add0")], [vi("a", ["batch", 4]), vi("b", ["batch", 4])], [vi("y", None)]))
for n, shp in (("a24", (2, 4)), ("b34", (3, 4)), ("a14", (1, 4))):
    np.save(path(n + ".npy"), np.ones(shp, np.float32))
case("inputs disagreeing on a symbolic dim", ["run", dyn2, "--input", "a=" + path("a24.npy"), "--input", "b=" + path("b34.npy"), "--output-dir", WORK], 2,
     r"inputs 'a' and 'b' disagree on the symbolic dim 'batch': .*a24\.npy: input 'a' has shape \[2,4\] \(batch=2\), .*b34\.npy: input 'b' has shape \[3,4\] \(batch=3\)")
case("an input file against --input-shape", ["run", dyn, "--input", "x=" + path("a14.npy"), "--input-shape", "x=2x4", "--output-dir", WORK], 2,
     r"a14\.npy: input 'x' has shape \[1,4\] \(batch=1\), but --input-shape gives x=2x4")
case("a random input's dims bound by another input's file", ["run", dyn2, "--input", "a=" + path("b34.npy"), "--random-inputs", "0", "--output-dir", WORK], 0, r"")
case("dims from the input files, three shapes in one session",
     ["run", dyn, "--input", "x=" + path("a24.npy"), "--then", "--input", "x=" + path("b34.npy"), "--then", "--input", "x=" + path("a24.npy"),
      "--output-dir", path("dyn_sets")], 0, r"")
# control inputs (values that decide compile-time facts) too large for what they decide: exit 2, nothing allocated
np.save(path("n_huge.npy"), np.array([10**12], np.int64))
np.save(path("m_big.npy"), np.array(10**9, np.int64))
cos = save("cos_in.onnx", model([helper.make_node("ConstantOfShape", ["n"], ["y"], name="cos0", value=numpy_helper.from_array(np.array([1.0], np.float32)))],
                                [vi("n", [1], TensorProto.INT64)], [vi("y", None)]))
case("control input asking for a huge tensor", ["run", cos, "--input", "n=" + path("n_huge.npy"), "--output-dir", WORK, "--max-memory", "1G"], 2,
     r"cos_in\.onnx: the weights and the largest intermediate tensor needs \d+ MiB, above the memory limit.*control inputs of this run: n = 1000000000000")
loop_in = save("loop_in.onnx", model([helper.make_node("Loop", ["m", "", "x"], ["y"], name="loop1", body=body)], [vi("m", [], TensorProto.INT64), vi("x", [1])],
                                     [vi("y", None)]))
case("control input asking for a billion Loop iterations", ["run", loop_in, "--input", "m=" + path("m_big.npy"), "--random-inputs", "0", "--output-dir", WORK], 2,
     r"loop1.*trip count 1000000000.*more than 4096 iterations.*control inputs of this run: m = 1000000000")
relu = save("relu.onnx", relu_model())


def npy_bytes(header, data=b"", magic=b"\x93NUMPY", version=b"\x01\x00"):
    h = header.encode()
    h += b" " * ((64 - (10 + len(h) + 1) % 64) % 64) + b"\n"
    return magic + version + len(h).to_bytes(2, "little") + h + data


def npy_case(name, raw, pattern):
    p = path(name + ".npy")
    with open(p, "wb") as f:
        f.write(raw)
    case("npy: " + name, ["run", relu, "--input", f"x={p}", "--output-dir", WORK], 2, pattern)


good = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 4), }"
npy_case("wrong magic", npy_bytes(good, b"\0" * 16, magic=b"\x93NUMPZ"), r"bad magic")
npy_case("bad version", npy_bytes(good, b"\0" * 16, version=b"\x07\x00"), r"unsupported \.npy version 7")
npy_case("no descr", npy_bytes("{'fortran_order': False, 'shape': (1, 4), }", b"\0" * 16), r"header has no descr")
npy_case("complex dtype", npy_bytes("{'descr': '<c8', 'fortran_order': False, 'shape': (1, 4), }", b"\0" * 32), r"unsupported dtype '<c8'")
npy_case("invalid code point in a string", npy_bytes("{'descr': '<U1', 'fortran_order': False, 'shape': (1,), }", b"\x00\xd8\x00\x00"),
         r"element 0 holds an invalid code point")
npy_case("string width too large", npy_bytes("{'descr': '<U99999999', 'fortran_order': False, 'shape': (1,), }", b""), r"unsupported dtype '<U99999999'")
npy_case("big-endian", npy_bytes("{'descr': '>f4', 'fortran_order': False, 'shape': (1, 4), }", b"\0" * 16), r"big-endian")
npy_case("fortran order", npy_bytes("{'descr': '<f4', 'fortran_order': True, 'shape': (1, 4), }", b"\0" * 16), r"fortran_order=True")
npy_case("bad shape", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1, x), }", b"\0" * 16), r"bad shape entry")
npy_case("fuzz: shape entry 'L'", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1, L), }", b"\0" * 16), r"bad shape entry")
npy_case("truncated data", npy_bytes(good, b"\0" * 9), r"truncated data")
npy_case("huge declared shape", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (100000000000, 100), }"), r"truncated data|shape too large")
npy_case("trailing bytes", npy_bytes(good, b"\0" * 20), r"trailing bytes")
npy_case("truncated header", b"\x93NUMPY\x01\x00\xff\x00{'descr'", r"truncated header")
npy_case("wrong shape", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", b"\0" * 16), r"input 'x' has shape \[2,2\], the model expects 1x4 \(its static dim 0 = 1\)")
npy_case("wrong dtype", npy_bytes("{'descr': '<i8', 'fortran_order': False, 'shape': (1, 4), }", b"\0" * 32), r"input 'x' has dtype int64, the model expects float32")
case("unknown command", ["frobnicate", relu], 2, r"unknown command 'frobnicate'")
case("bad number", ["run", relu, "--threads", "abc"], 2, r"bad number 'abc' after --threads")
case("unknown backend", run(relu, "--backend", "nosuchgpu"), 2, r"backend 'nosuchgpu' is not available")
case("input that is not in the model", ["run", relu, "--input", f"zz={path('trailing bytes.npy')}", "--random-inputs", "0", "--output-dir", WORK], 2,
     r"'zz' is not an input")

# ---- compile --dim (one program for a grid of input shapes) -----------------------------
grid = save("dimgrid.onnx", model([helper.make_node("Relu", ["x"], ["y"], name="relu0")], [vi("x", [1, "n"])], [vi("y", [1, "n"])]))
case("--dim naming no input dim", ["compile", grid, "-o", path("gen_dim"), "--dim", "m=1:4"], 2,
     r"--dim m: no graph input has a dim of that name \(its symbolic dims: n\)")
case("--dim with too many values", ["compile", grid, "-o", path("gen_dim"), "--dim", "n=1:1000"], 2, r"more than 128 values")
case("--dim not a range", ["compile", grid, "-o", path("gen_dim"), "--dim", "n=4:1"], 2, r"MAX below MIN")
two = save("dimgrid2.onnx", model([helper.make_node("Add", ["x", "z"], ["y"], name="add0")], [vi("x", ["a", "b"]), vi("z", ["a", "b"])],
                              [vi("y", None)]))
case("--dim grid over 128 combinations", ["compile", two, "-o", path("gen_dim"), "--dim", "a=1:12", "--dim", "b=1:12"], 2,
     r"more than 128 combinations")
# a constant folded from the shape (Range(0, n)): its bytes depend on n, and one program holds one model.gguf
ranged = save("dimgrid_range.onnx", model(
    [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "one"], ["n"], axis=0),
     helper.make_node("Range", ["zero", "n", "one"], ["r"]), helper.make_node("Cast", ["r"], ["rf"], to=TensorProto.FLOAT),
     helper.make_node("Add", ["x", "rf"], ["y"], name="add0")],
    [vi("x", [1, "n"])], [vi("y", None)],
    [numpy_helper.from_array(np.array(0, np.int64), "zero"), numpy_helper.from_array(np.array(1, np.int64), "one")]))
case("--dim with a weight folded from the shape", ["compile", ranged, "-o", path("gen_dim"), "--dim", "n=2,3"], 3,
     r"compile --dim: weight w0 \('rf'\) differs between n=2 and n=3")


def main():
    passed = failed = 0
    for name, argv, code, pat in CASES:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        msg = (r.stdout + r.stderr).strip()
        ok = r.returncode == code and re.search(pat, msg) is not None
        if code == 0:
            ok = r.returncode == 0
        print(f"{'ok  ' if ok else 'FAIL'} [{r.returncode}] {name}: {msg.splitlines()[0][:150] if msg else ''}")
        if not ok:
            print(f"      expected exit {code} and /{pat}/; got:\n      " + msg.replace("\n", "\n      ")[:1500])
        passed += ok
        failed += not ok
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
