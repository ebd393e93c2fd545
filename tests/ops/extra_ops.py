#!/usr/bin/env python3
"""Operators the ONNX 1.12 backend test data does not cover (newer opsets, or only in other
forms), each checked with `onnx2ggml check` against an independent reference (PyTorch or numpy)
at the op suite's tolerance (rtol 1e-3, atol 1e-7).

usage: extra_ops.py ONNX2GGML WORKDIR
"""
import os
import subprocess
import sys

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

BIN, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)
rng = np.random.default_rng(0)
failures = 0


def check(name, node, inputs, ref, inits=(), opset=18, flag="--input"):
    """node: a node or a list of them; inputs: name -> array (graph inputs; bound at compile time
    with flag="--freeze"); ref: the expected output 'y'."""
    elem = lambda v: TensorProto.STRING if v.dtype.kind == "U" else onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[v.dtype]  # noqa: E731
    vis = [helper.make_tensor_value_info(k, elem(v), v.shape) for k, v in inputs.items()]
    g = helper.make_graph(node if isinstance(node, list) else [node], name, vis, [helper.make_tensor_value_info("y", TensorProto.UNDEFINED, None)], list(inits))
    path = os.path.join(WORK, name + ".onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]), path)
    args = [BIN, "check", path]
    for k, v in inputs.items():
        np.save(os.path.join(WORK, f"{name}_{k}.npy"), v)
        args += [flag, f"{k}={os.path.join(WORK, f'{name}_{k}.npy')}"]
    np.save(os.path.join(WORK, f"{name}_ref.npy"), np.ascontiguousarray(ref))
    args += ["--expect", f"y={os.path.join(WORK, f'{name}_ref.npy')}"]
    r = subprocess.run(args, capture_output=True, text=True)
    ok = r.returncode == 0
    print(("ok   " if ok else "FAIL ") + name + ": " + (r.stdout + r.stderr).strip().splitlines()[-2 if ok else -1])
    if not ok:
        global failures
        failures += 1
        print(r.stdout + r.stderr)


x = rng.standard_normal((2, 6, 5, 4)).astype(np.float32)
xt = torch.from_numpy(x)

# GroupNormalization: opset 18 scales/biases per group, opset 21 per channel
sc, bi = rng.standard_normal(3).astype(np.float32), rng.standard_normal(3).astype(np.float32)
check("groupnorm18", helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=3, epsilon=1e-5), {"x": x},
      torch.nn.functional.group_norm(xt, 3, torch.from_numpy(np.repeat(sc, 2)), torch.from_numpy(np.repeat(bi, 2)), 1e-5).numpy(),
      [numpy_helper.from_array(sc, "s"), numpy_helper.from_array(bi, "b")], opset=18)
sc6, bi6 = rng.standard_normal(6).astype(np.float32), rng.standard_normal(6).astype(np.float32)
check("groupnorm21", helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2, epsilon=1e-5), {"x": x},
      torch.nn.functional.group_norm(xt, 2, torch.from_numpy(sc6), torch.from_numpy(bi6), 1e-5).numpy(),
      [numpy_helper.from_array(sc6, "s"), numpy_helper.from_array(bi6, "b")], opset=21)
# GroupNormalization -> x * sigmoid(x) -> + x: the affine and the SiLU in place on the normalized
# tensor (one fused pass in the oneDNN backend), values far from 0 (the statistics' shift), batch 2
xo = (x * 2 + 5).astype(np.float32)
check("groupnorm_silu", [helper.make_node("GroupNormalization", ["x", "s", "b"], ["g"], num_groups=3, epsilon=1e-5),
                         helper.make_node("Sigmoid", ["g"], ["sg"]), helper.make_node("Mul", ["g", "sg"], ["m"]),
                         helper.make_node("Add", ["m", "x"], ["y"])], {"x": xo},
      (torch.nn.functional.silu(torch.nn.functional.group_norm(torch.from_numpy(xo), 3, torch.from_numpy(np.repeat(sc, 2)),
                                                              torch.from_numpy(np.repeat(bi, 2)), 1e-5)) + torch.from_numpy(xo)).numpy(),
      [numpy_helper.from_array(sc, "s"), numpy_helper.from_array(bi, "b")], opset=18)
# LpPool / GlobalLpPool
check("lppool", helper.make_node("LpPool", ["x"], ["y"], kernel_shape=[2, 2], p=2, strides=[1, 1]), {"x": x},
      torch.nn.functional.lp_pool2d(xt, 2, 2, 1).numpy(), opset=17)
check("globallppool", helper.make_node("GlobalLpPool", ["x"], ["y"], p=3), {"x": x},
      ((np.abs(x.astype(np.float64)) ** 3).sum(axis=(2, 3), keepdims=True) ** (1 / 3)).astype(np.float32), opset=17)
# host kernels at run time: integer arithmetic, float64, runtime Gather indices along an inner axis
a = rng.integers(-1000, 1000, (3, 4)).astype(np.int64)
b = rng.integers(1, 50, (3, 4)).astype(np.int64)
check("mod_int64_runtime", helper.make_node("Mod", ["a", "b"], ["y"]), {"a": a, "b": b}, np.mod(a, b), opset=17)
d = rng.standard_normal((4, 5))
check("softmax_float64", helper.make_node("Softmax", ["d"], ["y"], axis=-1), {"d": d},
      torch.softmax(torch.from_numpy(d), -1).numpy(), opset=17)
idx = rng.integers(-4, 4, (3,)).astype(np.int64)
check("gather_inner_runtime", helper.make_node("Gather", ["x", "i"], ["y"], axis=3), {"x": x, "i": idx},
      np.take(x, idx, axis=3), opset=17)
# Einsum (attention's form) with runtime operands, LSTM against torch.nn.LSTM
q, k = rng.standard_normal((2, 3, 5, 8)).astype(np.float32), rng.standard_normal((2, 3, 7, 8)).astype(np.float32)
check("einsum_attention", helper.make_node("Einsum", ["q", "k"], ["y"], equation="bhid,bhjd->bhij"), {"q": q, "k": k},
      np.einsum("bhid,bhjd->bhij", q, k), opset=17)
# Einsum as a batched MatMul (rewritten into Transpose/Reshape/MatMul) over the equation shapes it must
# keep straight: maxvit's rank-5 products, operands and output in other orders, several contracted or
# free labels, an outer product, ellipsis, implicit output; then ones left to the host evaluator (a
# label summed in one operand, a diagonal, a size-1 broadcast label)
r5 = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
for tag, eq, shapes in [("maxvit_qk", "bghid,bghjd->bghij", [(1, 4, 2, 6, 5), (1, 4, 2, 7, 5)]),
                        ("maxvit_av", "bghij,bghjd->bghid", [(1, 4, 2, 6, 7), (1, 4, 2, 7, 5)]),
                        ("transposed", "kj,ji->ik", [(3, 4), (4, 5)]),
                        ("out_order", "bij,bjk->kbi", [(2, 3, 4), (2, 4, 5)]),
                        ("multi", "abcd,cdbe->aeb", [(2, 3, 4, 5), (4, 5, 3, 6)]),
                        ("outer", "i,j->ji", [(4,), (5,)]),
                        ("ellipsis", "...ij,...jk->...ik", [(2, 3, 4, 5), (2, 3, 5, 2)]),
                        ("implicit", "ij,jk", [(3, 4), (4, 5)]),
                        ("host_sum", "ij,jk->i", [(3, 4), (4, 5)]),
                        ("host_diag", "ii,ij->ij", [(4, 4), (4, 3)]),
                        ("host_bcast", "bij,bjk->bik", [(1, 3, 4), (2, 4, 5)])]:
    ins = {f"x{i}": r5(*s) for i, s in enumerate(shapes)}
    check("einsum_" + tag, helper.make_node("Einsum", list(ins), ["y"], equation=eq), ins, np.einsum(eq, *ins.values()),
          opset=17)
lstm = torch.nn.LSTM(4, 3)
with torch.no_grad():
    seq = torch.randn(6, 2, 4)
    ref, _ = lstm(seq)
W = lstm.weight_ih_l0.detach().numpy()  # torch gate order i, f, g, o -> ONNX i, o, f, c
R = lstm.weight_hh_l0.detach().numpy()
B = np.concatenate([lstm.bias_ih_l0.detach().numpy(), lstm.bias_hh_l0.detach().numpy()])
reorder = lambda m: np.concatenate([m[0:3], m[9:12], m[3:6], m[6:9]])  # noqa: E731
Wo, Ro = reorder(W)[None], reorder(R)[None]
Bo = np.concatenate([reorder(B[:12]), reorder(B[12:])])[None]
check("lstm_vs_torch", helper.make_node("LSTM", ["x", "W", "R", "B"], ["y"], hidden_size=3), {"x": seq.numpy()},
      ref.numpy()[:, None], [numpy_helper.from_array(Wo.astype(np.float32), "W"), numpy_helper.from_array(Ro.astype(np.float32), "R"),
                             numpy_helper.from_array(Bo.astype(np.float32), "B")], opset=14)
# MatMul with K = 1 and both operands at run time (an outer product: the permuted [K, N] operand has
# a size-1 dim whose stride ggml_mul_mat read as transposed; fuzz_model found the abort)
a1, b1 = rng.standard_normal((2, 3, 1)).astype(np.float32), rng.standard_normal((1, 4)).astype(np.float32)
check("matmul_k1_runtime", helper.make_node("MatMul", ["a", "b"], ["y"]), {"a": a1, "b": b1}, a1 @ b1, opset=13)
# bidirectional RNN with layout 1 (batch first: X, Y and initial_h) and an initial state, against
# torch.nn.RNN(batch_first=True), whose h0 stays [dirs, batch, hidden]
rnn = torch.nn.RNN(4, 3, bidirectional=True, batch_first=True)
with torch.no_grad():
    xs, h0 = torch.randn(2, 5, 4), torch.randn(2, 2, 3)
    ref, _ = rnn(xs, h0)
p = {k: v.detach().numpy() for k, v in rnn.named_parameters()}
Wr = np.stack([p["weight_ih_l0"], p["weight_ih_l0_reverse"]])
Rr = np.stack([p["weight_hh_l0"], p["weight_hh_l0_reverse"]])
Br = np.stack([np.concatenate([p["bias_ih_l0"], p["bias_hh_l0"]]), np.concatenate([p["bias_ih_l0_reverse"], p["bias_hh_l0_reverse"]])])
check("rnn_bidirectional_layout1", helper.make_node("RNN", ["x", "W", "R", "B", "", "h0"], ["y"], hidden_size=3, direction="bidirectional", layout=1),
      {"x": xs.numpy(), "h0": h0.numpy().transpose(1, 0, 2).copy()}, ref.numpy().reshape(2, 5, 2, 3),
      [numpy_helper.from_array(a.astype(np.float32), n) for a, n in ((Wr, "W"), (Rr, "R"), (Br, "B"))], opset=14)
# TfIdfVectorizer in IDF and TFIDF modes with weights and a permuted ngram_indexes (the 1.12 data
# covers TF only); reference: the n-grams listed by brute force over every (start, skip).
tok = rng.integers(0, 5, (3, 9)).astype(np.int64)
pool = [[1], [3], [0, 2], [4, 4], [1, 3]]
w = np.array([0.5, 2.0, 1.5, 3.0, 0.25], np.float32)
out_idx = [4, 0, 3, 1, 2]
for mode in ("IDF", "TFIDF"):
    cnt = np.zeros((3, 5))
    for r_, row in enumerate(tok):
        seen = set()
        for skip in range(3):
            for st in range(9):
                for n in (1, 2):
                    pos = [st + j * (skip + 1) for j in range(n)]
                    if pos[-1] < 9 and (n > 1 or skip == 0) and (n, tuple(pos)) not in seen:
                        seen.add((n, tuple(pos)))
                        g = [int(row[q]) for q in pos]
                        if g in pool:
                            cnt[r_, out_idx[pool.index(g)]] += 1
    wo = np.zeros(5)
    wo[out_idx] = w
    ref = ((cnt > 0) if mode == "IDF" else cnt) * wo
    check(f"tfidf_{mode.lower()}", helper.make_node("TfIdfVectorizer", ["t"], ["y"], mode=mode, min_gram_length=1, max_gram_length=2,
          max_skip_count=2, ngram_counts=[0, 2], ngram_indexes=out_idx, pool_int64s=[1, 3, 0, 2, 4, 4, 1, 3], weights=w.tolist()),
          {"t": tok}, ref.astype(np.float32), opset=9)
# String tensors (host values, bound at compile time): StringNormalizer on non-ASCII text against
# Python's str methods (words whose case mapping is one code point to one), Cast to and from string
words = np.array(["Émile", "naïve", "THE", "σοφία", "Çà", "the"])
for action, fn in (("UPPER", str.upper), ("LOWER", str.lower)):
    check(f"strnorm_{action.lower()}", helper.make_node("StringNormalizer", ["s"], ["y"], case_change_action=action, stopwords=["the"]),
          {"s": words}, np.array([fn(x) for x in words if x.lower() != "the"]), opset=10, flag="--freeze")
nums = np.array(["1e-5", "-INF", "3.25", "nan", "+inf", "12345678901"])
check("cast_string_to_double", helper.make_node("Cast", ["s"], ["y"], to=TensorProto.DOUBLE), {"s": nums}, nums.astype(np.float64), opset=13, flag="--freeze")
ints = np.array(["9007199254740993", "-42", "0"])
check("cast_string_to_int64", helper.make_node("Cast", ["s"], ["y"], to=TensorProto.INT64), {"s": ints}, np.array([9007199254740993, -42, 0]), opset=13, flag="--freeze")
vals = np.array([0.1, -2.5, 1e-7, 3.4028235e38, 100.0, 123456792.0, -0.0, 0.00012, -np.inf, np.nan], np.float32)
check("cast_float_to_string", helper.make_node("Cast", ["v"], ["y"], to=TensorProto.STRING), {"v": vals},
      np.array(["INF" if np.isposinf(x) else "-INF" if np.isneginf(x) else "NaN" if np.isnan(x) else str(x) for x in vals]), opset=13, flag="--freeze")
d64 = np.array([0.1, 1 / 3, 2.5e-300, 1e16, 12345.678901234567])
check("cast_double_to_string", helper.make_node("Cast", ["v"], ["y"], to=TensorProto.STRING), {"v": d64}, np.array([str(x) for x in d64]), opset=13, flag="--freeze")
# Transposes of rank 5 and 6 whose dims cannot be merged into ggml's 4 (swin's qkv split moves all five):
# a slice per index of the output's outermost dim; rank 6 with the outermost dim in place recursively;
# an int64 tensor (int32 on the device)
for tag, shape, perm, dt in [("swin_qkv", (6, 7, 3, 2, 4), (2, 0, 3, 1, 4), np.float32),
                             ("all5", (2, 3, 4, 5, 6), (4, 2, 0, 3, 1), np.float32),
                             ("outer6", (2, 3, 4, 5, 6, 2), (0, 5, 3, 1, 4, 2), np.float32),
                             ("int5", (3, 2, 4, 2, 3), (1, 3, 0, 4, 2), np.int64)]:
    xt5 = (rng.standard_normal(shape) * 100).astype(dt)
    check("transpose_" + tag, helper.make_node("Transpose", ["x"], ["y"], perm=list(perm)), {"x": xt5},
          np.transpose(xt5, perm), opset=17)
# Split and Concat along a merged leading axis of a rank-5 tensor (BERT's q, k, v split after its
# [3, 1, heads, seq, d] transpose; a batch-1 concat): ranges of ggml's ne[3]
x5 = rng.standard_normal((3, 1, 2, 4, 5)).astype(np.float32)
check("split_rank5_axis0", [helper.make_node("Split", ["x"], ["a", "b", "c"], axis=0),
                            helper.make_node("Concat", ["c", "a"], ["y"], axis=0)], {"x": x5},
      np.concatenate([x5[2:3], x5[0:1]], 0), opset=17)
x6 = rng.standard_normal((1, 6, 2, 4, 5)).astype(np.float32)
check("split_concat_rank5_axis1", [helper.make_node("Split", ["x", "sp"], ["a", "b"], axis=1),
                                   helper.make_node("Concat", ["b", "a", "b"], ["y"], axis=1)],
      {"x": x6}, np.concatenate([x6[:, 2:], x6[:, :2], x6[:, 2:]], 1), [numpy_helper.from_array(np.array([2, 4], np.int64), "sp")],
      opset=17)
# Dropout in training mode with ratio 0 (torch exports swin_t so) is the identity; its unread mask output
# is not computed
check("dropout_train_ratio0", [helper.make_node("Constant", [], ["ratio"], value=numpy_helper.from_array(np.array(0.0, np.float32))),
                                helper.make_node("Constant", [], ["train"], value=numpy_helper.from_array(np.array(True))),
                                helper.make_node("Dropout", ["x", "ratio", "train"], ["d", "mask"]),
                                helper.make_node("Relu", ["d"], ["y"])], {"x": x}, np.maximum(x, 0), opset=17)
# A zero Pad read only by Convs and AveragePools counting the padded zeros (count_include_pad=0 with no pads
# of its own) becomes their padding (fold_pad_into_window: no ggml PAD node is left); read by a MaxPool too, it
# stays a Pad (a max pads with -inf). Opset 18's axes input, asymmetric amounts; opset 11's form with a pad value.
xp = rng.standard_normal((1, 3, 9, 8)).astype(np.float32)
wp = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
pad18 = helper.make_node("Pad", ["x", "pads", "", "axes"], ["p"], mode="constant")
pad_inits = [numpy_helper.from_array(np.array([1, 2, 2, 0], np.int64), "pads"),  # H begin, W begin, H end, W end
             numpy_helper.from_array(np.array([2, 3], np.int64), "axes"), numpy_helper.from_array(wp, "w")]
xpt = torch.nn.functional.pad(torch.from_numpy(xp), (2, 0, 1, 2))  # (W begin, W end, H begin, H end)
conv_ref = torch.nn.functional.conv2d(xpt, torch.from_numpy(wp), padding=1).numpy()
# (symmetric in all: a Conv with asymmetric padding pads its input itself)
sym_inits = [numpy_helper.from_array(np.array([1, 2, 1, 2], np.int64), "pads")] + pad_inits[1:]
check("pad_into_conv", [pad18, helper.make_node("Conv", ["p", "w"], ["y"], pads=[1, 0, 1, 0])], {"x": xp},
      torch.nn.functional.conv2d(torch.nn.functional.pad(torch.from_numpy(xp), (2, 2, 1, 1)), torch.from_numpy(wp), padding=(1, 0)).numpy(),
      sym_inits)
check("pad_into_avgpool", [pad18, helper.make_node("AveragePool", ["p"], ["y"], kernel_shape=[3, 3], strides=[2, 2])], {"x": xp},
      torch.nn.functional.avg_pool2d(xpt, 3, 2).numpy(), pad_inits)
check("pad_into_conv_not_maxpool", [pad18, helper.make_node("Conv", ["p", "w"], ["c"], pads=[1, 1, 1, 1]),
                                    helper.make_node("MaxPool", ["p"], ["m"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
                                    helper.make_node("Concat", ["c", "m"], ["y"], axis=1)], {"x": xp},
      np.concatenate([conv_ref, torch.nn.functional.max_pool2d(xpt, 3, 1, 1).numpy()], 1), pad_inits)
check("pad11_value_into_avgpool", [helper.make_node("Pad", ["x", "pads11", "zero"], ["p"]),
                                   helper.make_node("AveragePool", ["p"], ["y"], kernel_shape=[2, 3], pads=[1, 0, 0, 1], count_include_pad=1)],
      {"x": xp}, torch.nn.functional.avg_pool2d(torch.nn.functional.pad(xpt, (0, 1, 1, 0)), (2, 3), 1).numpy(),
      [numpy_helper.from_array(np.array([0, 0, 1, 2, 0, 0, 2, 0], np.int64), "pads11"), numpy_helper.from_array(np.array(0.0, np.float32), "zero")],
      opset=11)
for name in ("pad_into_conv", "pad_into_avgpool", "pad11_value_into_avgpool"):
    r = subprocess.run([BIN, "inspect", os.path.join(WORK, name + ".onnx"), "--ggml"], capture_output=True, text=True)
    if r.returncode != 0 or " PAD" in r.stdout:
        failures += 1
        print(f"FAIL {name}: the Pad was not folded into its readers\n" + r.stdout + r.stderr)
# Kernel taps that read only padding at every output (drop_dead_conv_taps cuts them from the kernel and the pads):
# a rate-5 3x3 kernel on a 4x4 map (only the centre tap reads it: a 1x1 convolution), a 5x3 kernel with dilations
# (3, 2), strides (1, 2) and pads (7, 2) on a 5x7 map (its first and last rows cut), its weight shared with a Conv whose
# taps all read the map (that one keeps it whole), and a 1-D one. References: PyTorch on the explicitly padded input.
xd = rng.standard_normal((2, 3, 4, 4)).astype(np.float32)
wd = rng.standard_normal((5, 3, 3, 3)).astype(np.float32)
check("dead_taps_centre", helper.make_node("Conv", ["x", "w"], ["y"], dilations=[5, 5], pads=[5, 5, 5, 5]), {"x": xd},
      torch.nn.functional.conv2d(torch.from_numpy(xd), torch.from_numpy(wd), padding=5, dilation=5).numpy(),
      [numpy_helper.from_array(wd, "w")])
xa = rng.standard_normal((1, 3, 5, 7)).astype(np.float32)
wa = rng.standard_normal((4, 3, 5, 3)).astype(np.float32)
xat = torch.nn.functional.pad(torch.from_numpy(xa), (2, 2, 7, 7))  # (W begin, W end, H begin, H end)
check("dead_taps_strided_shared", [
    helper.make_node("Conv", ["x", "w"], ["a"], dilations=[3, 2], strides=[1, 2], pads=[7, 2, 7, 2]),
    helper.make_node("Conv", ["x", "w"], ["b"], pads=[2, 1, 2, 1]),
    helper.make_node("Flatten", ["a"], ["fa"]), helper.make_node("Flatten", ["b"], ["fb"]),
    helper.make_node("Concat", ["fa", "fb"], ["y"], axis=1)], {"x": xa},
      np.concatenate([torch.nn.functional.conv2d(xat, torch.from_numpy(wa), stride=(1, 2), dilation=(3, 2)).numpy().reshape(1, -1),
                      torch.nn.functional.conv2d(torch.from_numpy(xa), torch.from_numpy(wa), padding=(2, 1)).numpy().reshape(1, -1)], 1),
      [numpy_helper.from_array(wa, "w")])
x1 = rng.standard_normal((1, 2, 6)).astype(np.float32)
w1 = rng.standard_normal((3, 2, 5)).astype(np.float32)
check("dead_taps_1d", helper.make_node("Conv", ["x", "w"], ["y"], dilations=[4], pads=[8, 8]), {"x": x1},
      torch.nn.functional.conv1d(torch.from_numpy(x1), torch.from_numpy(w1), padding=8, dilation=4).numpy(),
      [numpy_helper.from_array(w1, "w")])
# Concats that extend one another (densenet's dense blocks: each layer concatenates every earlier layer's output):
# one buffer per chain, each input copied into it once, the shorter Concats views of its prefix (ops/concat.cpp).
# Batch 1 (the prefix is consecutive bytes) and batch 2 (it is not: each Concat copies its own); the longest
# Concat lowered before a shorter one (q before r); two extensions of the same prefix (c2, c2b).
def concat_chain(n):
    xc = rng.standard_normal((n, 4, 5, 6)).astype(np.float32)
    nodes = [helper.make_node("Relu", ["x"], ["p1"]), helper.make_node("Neg", ["x"], ["z"]),
             helper.make_node("Concat", ["x", "p1", "z"], ["q"], axis=1), helper.make_node("Concat", ["x", "p1"], ["c1"], axis=1),
             helper.make_node("Tanh", ["c1"], ["p2"]), helper.make_node("Concat", ["x", "p1", "p2"], ["c2"], axis=1),
             helper.make_node("Concat", ["x", "p1", "z", "p2"], ["c2b"], axis=1), helper.make_node("Sigmoid", ["c2"], ["p3"]),
             helper.make_node("Concat", ["x", "p1", "p2", "p3"], ["c3"], axis=1),
             helper.make_node("Concat", ["c3", "c1", "q", "c2b", "c2"], ["y"], axis=1)]
    p1 = np.maximum(xc, 0)
    c1 = np.concatenate([xc, p1], 1)
    p2 = np.tanh(c1)
    c2 = np.concatenate([xc, p1, p2], 1)
    p3 = 1 / (1 + np.exp(-c2))
    ref = np.concatenate([np.concatenate([xc, p1, p2, p3], 1), c1, np.concatenate([xc, p1, -xc], 1),
                          np.concatenate([xc, p1, -xc, p2], 1), c2], 1)
    check(f"concat_prefix_chain_n{n}", nodes, {"x": xc}, ref.astype(np.float32), opset=17)
    r = subprocess.run([BIN, "inspect", os.path.join(WORK, f"concat_prefix_chain_n{n}.onnx"), "--ggml"], capture_output=True, text=True)
    counts = dict(line.split() for line in r.stdout.split("ggml graph")[-1].splitlines()[1:] if line.strip())
    return int(counts.get("SET", 0))


# ggml SETs: batch 1 one per input of a chain's longest Concat (c2b's 4 for q, c1; c3's 4 for c2) and the output's
# 5; batch 2 every Concat's own (2 + 3 + 3 + 4 + 4 + 5)
sets = (concat_chain(1), concat_chain(2))
if sets != (13, 21):
    failures += 1
    print(f"FAIL concat_prefix_chain: {sets} ggml SETs at batch 1 and 2, expected (13, 21)")
print(f"{failures} failed")
sys.exit(1 if failures else 0)
