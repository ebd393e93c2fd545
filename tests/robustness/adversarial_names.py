#!/usr/bin/env python3
"""Code-generation safety: a model whose node, value, graph and metadata names are hostile
(comment terminators, quotes, backslashes, newlines, Unicode, C++ keywords, preprocessor
lines, names that collide after sanitising, a 10 000-character name) must compile with
-Wall -Wextra -Werror and give the same outputs as `run`, bit for bit.

usage: adversarial_names.py ONNX2GGML WORKDIR
"""
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

BIN, WORK = sys.argv[1], sys.argv[2]
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
EVIL = ["*/ int x = 1; /*", '"; system("rm -rf /"); "', "back\\slash\\", "new\nline\r\n#include <cstdio>", "??=define trigraph",
        "ünïcødé 名前 \u202e", "int", "class", "a-b", "a_b", "a b", "t0", "w[0]", "in[0]", "\\", "x" * 10000, "", " ", "\x01\x7f"]
nodes, inits = [], []
prev = EVIL[0]
x = helper.make_tensor_value_info(prev, TensorProto.FLOAT, [1, 3, 8, 8])
k = np.random.RandomState(0).randn(4, 3, 3, 3).astype(np.float32)
inits.append(numpy_helper.from_array(k, EVIL[1]))
nodes.append(helper.make_node("Conv", [prev, EVIL[1]], [EVIL[2]], name=EVIL[3], pads=[1, 1, 1, 1]))
prev = EVIL[2]
for i, name in enumerate(EVIL[4:-1]):
    out = name if name else f"unnamed{i}"
    op = ["Relu", "Sigmoid", "Tanh", "Erf", "Neg", "Abs"][i % 6]
    nodes.append(helper.make_node(op, [prev], [out], name=EVIL[(i + 5) % len(EVIL)]))
    prev = out
y = helper.make_tensor_value_info(prev, TensorProto.FLOAT, None)
g = helper.make_graph(nodes, "graph */ \" \\ \n name", [x], [y], initializer=inits, doc_string="*/ doc \" \\")
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="evil */ \"producer\\\n")
helper.set_model_props(m, {"key */": "value \"\\\n"})
mp = os.path.join(WORK, "evil.onnx")
onnx.save(m, mp)
np.save(os.path.join(WORK, "x.npy"), np.random.RandomState(1).randn(1, 3, 8, 8).astype(np.float32))


def sh(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        print(r.stdout[-3000:], r.stderr[-3000:])
        sys.exit(f"failed: {' '.join(c[:40] for c in cmd)}")
    return r


inp = "=".join([EVIL[0], os.path.join(WORK, "x.npy")])
sh([BIN, "run", mp, "--input", inp, "--output-dir", os.path.join(WORK, "run")])
gen = os.path.join(WORK, "gen")
sh([BIN, "compile", mp, "-o", gen])
cfg = ["cmake", "-S", gen, "-B", os.path.join(gen, "build"), "-DCMAKE_BUILD_TYPE=Release"]
if shutil.which("ccache"):
    cfg += ["-DCMAKE_C_COMPILER_LAUNCHER=ccache", "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"]
    os.environ.setdefault("CCACHE_DIR", os.path.join(os.path.dirname(os.path.abspath(WORK)), "ccache"))
    os.environ.setdefault("CCACHE_NOHASHDIR", "1")
sh(cfg)
sh(["cmake", "--build", os.path.join(gen, "build"), "-j", str(os.cpu_count() or 2)])  # -Wall -Wextra -Werror
os.makedirs(os.path.join(WORK, "compiled"))
sh([os.path.join(gen, "build", "model"), "--input", inp, "--output-dir", os.path.join(WORK, "compiled")])
a = np.load(os.path.join(WORK, "run", "output_0.npy"))
b = np.load(os.path.join(WORK, "compiled", "output_0.npy"))
assert a.shape == (1, 4, 8, 8) and np.abs(a).max() > 0
assert np.array_equal(a.view(np.uint32), b.view(np.uint32)), "compiled program and run disagree"
src = open(os.path.join(gen, "model.cpp"), encoding="utf-8", errors="replace").read()
assert "system(" not in src.replace("\\042", ""), "an unescaped name reached the source"
print("adversarial names: compiled with -Werror, outputs bit-identical to run: 1 passed, 0 failed")
