#!/usr/bin/env python3
"""Dynamic models in one session (ctest label `dynamic`): exported here with Debian's PyTorch
(random weights made informative as in export_models.py), each run by ONE `onnx2ggml run` at several
input sets (`--then`), every output matched against PyTorch per set: max |run - torch| <= 1e-4 * max |torch|.

  resnet18      dynamic batch, height, width: three shapes
  encoder       a small transformer encoder (plain torch), dynamic batch and sequence: three shapes
  if_scripted   torch.jit.script model whose If branches on an int64 scalar input's value: both values
  lstm_vad      LSTM voice-activity-style model with state inputs (h, c), dynamic batch: three batches
  rss           a convolution at 50 distinct shapes in one session (cache of 8): peak RSS after the
                50th within 1.2x of after the 8th (evicted specializations release their memory)

usage: dynamic_models.py ONNX2GGML WORKDIR [NAME ...]
"""
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import torch
import torch.nn as nn
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))
from export_models import randomize  # noqa: E402

TOL = 1e-4
BIN, WORK = sys.argv[1], os.path.abspath(sys.argv[2])


class Encoder(nn.Module):
    """Two pre-norm transformer encoder blocks written out in plain torch ops."""

    def __init__(self, d=32, heads=4, layers=2):
        super().__init__()
        self.heads = heads
        self.blocks = nn.ModuleList()
        for _ in range(layers):
            self.blocks.append(nn.ModuleDict({"ln1": nn.LayerNorm(d), "qkv": nn.Linear(d, 3 * d), "proj": nn.Linear(d, d),
                                               "ln2": nn.LayerNorm(d), "fc1": nn.Linear(d, 4 * d), "fc2": nn.Linear(4 * d, d)}))
        self.head = nn.Linear(d, 8)

    def forward(self, x):
        b, s, d = x.shape
        h = self.heads
        for blk in self.blocks:
            q, k, v = blk["qkv"](blk["ln1"](x)).chunk(3, dim=-1)
            q = q.reshape(b, s, h, d // h).transpose(1, 2)
            k = k.reshape(b, s, h, d // h).transpose(1, 2)
            v = v.reshape(b, s, h, d // h).transpose(1, 2)
            a = torch.softmax(q @ k.transpose(-1, -2) / (d // h) ** 0.5, dim=-1) @ v
            x = x + blk["proj"](a.transpose(1, 2).reshape(b, s, d))
            x = x + blk["fc2"](nn.functional.gelu(blk["fc1"](blk["ln2"](x))))
        return self.head(x)


class IfScripted(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 8)

    def forward(self, x, mode):
        if bool(mode > 0):
            y = torch.tanh(self.a(x)) * 2.0
        else:
            y = torch.sigmoid(self.b(x)) - 0.5
        return y


class LstmVad(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(16, 24)
        self.out = nn.Linear(24, 1)

    def forward(self, x, h, c):
        y, (hn, cn) = self.lstm(x, (h, c))
        return torch.sigmoid(self.out(y)), hn, cn


def sh(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print("$ " + " ".join(cmd), file=sys.stderr)
        print(r.stdout[-4000:], r.stderr[-4000:], file=sys.stderr)
        sys.exit(f"command failed with exit code {r.returncode}")
    return r


def run_sets(name, path, in_names, sets, refs):
    """One `onnx2ggml run` for every input set; each output against PyTorch's."""
    d = os.path.join(WORK, name)
    args = [BIN, "run", path, "--output-dir", os.path.join(d, "out"), "--threads", "2", "--verbose"]
    for k, ins in enumerate(sets):
        if k:
            args.append("--then")
        for n, a in zip(in_names, ins):
            f = os.path.join(d, f"set{k}_{n}.npy")
            np.save(f, a)
            args += ["--input", f"{n}={f}"]
    r = sh(args)
    misses = len(re.findall(r"specialization cache miss", r.stderr))
    for k, ref in enumerate(refs):
        for i, want in enumerate(ref):
            got = np.load(os.path.join(d, "out", str(k), f"output_{i}.npy"))
            assert got.shape == want.shape, f"{name} set {k} output {i}: shape {got.shape} != {want.shape}"
            scale = float(np.abs(want).max())
            assert scale > 1e-3, f"{name}: degenerate reference"
            err = float(np.abs(got.astype(np.float64) - want).max()) / scale
            print(f"{name} set {k} {[tuple(a.shape) for a in sets[k]]} output {i}: max error / max |ref| = {err:.3g}")
            assert err <= TOL, f"{name} set {k} output {i} does not match PyTorch"
    return misses


def export(m, args, path, in_names, out_names, axes):
    torch.onnx.export(m, args, path, input_names=in_names, output_names=out_names, dynamic_axes=axes, opset_version=14)


def check_shapes(gen, name, m, example, in_name, out_name, axes, shapes):
    """Exports m with dynamic axes, runs it in one session at each of `shapes`, compares with torch."""
    randomize(m, gen)
    p = os.path.join(WORK, name, "model.onnx")
    export(m, example, p, [in_name], [out_name], {in_name: axes})
    sets = [[torch.randn(s, generator=gen)] for s in shapes]
    with torch.no_grad():
        refs = [[m(*s).numpy()] for s in sets]
    assert run_sets(name, p, [in_name], [[a.numpy() for a in s] for s in sets], refs) == len(shapes)


def test_resnet18(gen):
    check_shapes(gen, "resnet18", torchvision.models.resnet18(num_classes=10).eval(), torch.zeros(1, 3, 64, 64), "input", "out",
                 {0: "batch", 2: "height", 3: "width"}, [(1, 3, 64, 64), (2, 3, 96, 80), (1, 3, 112, 128)])


def test_encoder(gen):
    check_shapes(gen, "encoder", Encoder().eval(), torch.zeros(2, 5, 32), "x", "y", {0: "batch", 1: "seq"},
                 [(1, 7, 32), (3, 12, 32), (2, 33, 32)])


def test_if_scripted(gen):
    m = IfScripted().eval()
    randomize(m, gen)
    sm = torch.jit.script(m)
    p = os.path.join(WORK, "if_scripted", "model.onnx")
    x = torch.randn(3, 8, generator=gen)
    export(sm, (x, torch.tensor(1, dtype=torch.int64)), p, ["x", "mode"], ["y"], None)
    sets = [[x, torch.tensor(v, dtype=torch.int64)] for v in (3, -2, 3)]
    with torch.no_grad():
        refs = [[m(*s).numpy()] for s in sets]
    assert not np.allclose(refs[0][0], refs[1][0]), "both branches give the same output"
    assert run_sets("if_scripted", p, ["x", "mode"], [[a.numpy() for a in s] for s in sets], refs) == 2  # set 2 repeats set 0: a cache hit


def test_lstm_vad(gen):
    m = LstmVad().eval()
    with torch.no_grad():
        for prm in m.parameters():
            prm.copy_(torch.randn(prm.shape, generator=gen) * 0.3)
    p = os.path.join(WORK, "lstm_vad", "model.onnx")
    axes = {"x": {0: "time", 1: "batch"}, "h": {1: "batch"}, "c": {1: "batch"}, "prob": {0: "time", 1: "batch"}, "hn": {1: "batch"}, "cn": {1: "batch"}}
    export(m, (torch.zeros(10, 1, 16), torch.zeros(1, 1, 24), torch.zeros(1, 1, 24)), p, ["x", "h", "c"], ["prob", "hn", "cn"], axes)
    sets = [[torch.randn(10, b, 16, generator=gen), torch.randn(1, b, 24, generator=gen) * 0.5, torch.randn(1, b, 24, generator=gen) * 0.5] for b in (1, 4, 2)]
    with torch.no_grad():
        refs = [[t.numpy() for t in m(*s)] for s in sets]
    assert run_sets("lstm_vad", p, ["x", "h", "c"], [[a.numpy() for a in s] for s in sets], refs) == 3


def test_rss(gen):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    w = numpy_helper.from_array((np.random.default_rng(0).standard_normal((16, 16, 3, 3)) * 0.1).astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Conv", ["r", "w"], ["y"], pads=[1, 1, 1, 1])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, "h", "w"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=[w])
    p = os.path.join(WORK, "rss", "model.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), p)
    args = [BIN, "run", p, "--random-inputs", "0", "--output-dir", os.path.join(WORK, "rss", "out"), "--verbose", "--threads", "2"]
    for k in range(50):
        args += (["--then"] if k else []) + ["--random-inputs", "0", "--input-shape", f"x=1x16x{200 + k}x{240 + 3 * k}"]
    r = sh(args)
    rss = [float(v) for v in re.findall(r"after input set \d+: peak_rss_mb=([\d.]+)", r.stderr)]
    ev = re.search(r"evictions=(\d+)", r.stderr)
    assert len(rss) == 50 and ev and int(ev.group(1)) == 42, r.stderr[-2000:]
    print(f"rss: peak RSS after 8 shapes {rss[7]:.1f} MB, after 50 {rss[49]:.1f} MB (ratio {rss[49] / rss[7]:.3f}), {ev.group(1)} evictions")
    assert rss[49] <= 1.2 * rss[7], "peak memory grows with the number of shapes seen"


def main():
    names = sys.argv[3:] or ["resnet18", "encoder", "if_scripted", "lstm_vad", "rss"]
    for n in names:
        shutil.rmtree(os.path.join(WORK, n), ignore_errors=True)
        os.makedirs(os.path.join(WORK, n))
        gen = torch.Generator().manual_seed(0)
        torch.manual_seed(0)
        globals()["test_" + n](gen)
        print(f"{n}: PASS")


if __name__ == "__main__":
    main()
