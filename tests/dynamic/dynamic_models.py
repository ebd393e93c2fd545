#!/usr/bin/env python3
"""Dynamic models in one session (ctest label `dynamic`): exported here with Debian's PyTorch
(random weights made informative as in export_models.py), each run by ONE `onnx2ggml run` at several
input sets (`--then`), every output matched against PyTorch per set: max |run - torch| <= 1e-4 * max |torch|.

  resnet18      dynamic batch, height, width: three shapes
  encoder       a small transformer encoder (plain torch), dynamic batch and sequence: three shapes
                (both also through `compile --dim` over the dims of those shapes: one generated program that
                reads its input shapes at run time, bit for bit `run`'s output at each, exit 2 off its grid)
  if_scripted   torch.jit.script model whose If branches on an int64 scalar input's value: both values (and
                `compile --freeze mode=...` for each: one program per value, bit-identical to run)
  lstm_vad      LSTM voice-activity-style model with state inputs (h, c), dynamic batch: three batches (and
                through `compile --dim` likewise: its host kernel records one per batch)
  rss           a convolution at 50 distinct shapes in one session (cache of 8): peak RSS after the
                50th within 1.2x of after the 8th (evicted specializations release their memory)
  staged        data-dependent shapes and branches decided by values computed inside the graph (staged
                execution): NonZero of a computed mask then Gather, an If on a computed condition, a
                TopK whose k is counted from the data, NonZero then TopK (two cuts); against numpy, at
                several inputs in one session (an empty NonZero among them), exact where the op is
  ssdlite       torchvision ssdlite320_mobilenet_v3_large with its post-processing (per-class score
                masks, TopK, an If, batched NonMaxSuppression; cut three times), two images in one
                session, detections against PyTorch's as sets (boxes within 1e-4 of the image size)
  retinanet     torchvision retinanet_resnet50_fpn (256x256) with its post-processing, the same way

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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))  # export_models, check_model
from export_models import randomize  # noqa: E402

TOL = 1e-4
BIN, WORK = None, None  # set by main (the module is also imported by bench/first_run.py for its models)


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


def check_compiled(name, path, in_names, sets, dims, off_grid):
    """`compile --dim` of the model: ONE generated program that reads its input shapes at run time, built, run at
    every input set: bit for bit what `run` gave for that set (run_sets' outputs); a shape off its grid: exit 2."""
    from check_model import build_project
    d = os.path.join(WORK, name)
    gen = os.path.join(d, "gen")
    args = [BIN, "compile", path, "-o", gen]
    for n, v in dims.items():
        args += ["--dim", f"{n}={','.join(str(x) for x in v)}"]
    sh(args)
    with open(os.path.join(gen, "model.cpp")) as f:
        note = [ln for ln in f.read().splitlines() if "numbers are expressions" in ln]
    prog = build_project(gen, False, WORK)
    for k, ins in enumerate(sets):
        out = os.path.join(d, f"compiled{k}")
        sh([prog, *[x for n in in_names for x in ("--input", f"{n}={os.path.join(d, f'set{k}_{n}.npy')}")],
            "--output-dir", out, "--threads", "2"])
        for i in range(len(os.listdir(os.path.join(d, "out", str(k)))) - 1):  # (outputs.json)
            want = np.load(os.path.join(d, "out", str(k), f"output_{i}.npy"))
            got = np.load(os.path.join(out, f"output_{i}.npy"))
            assert got.shape == want.shape and got.dtype == want.dtype, f"{name} compiled set {k} output {i}: shape"
            assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), f"{name} compiled set {k} output {i} != run"
    print(f"{name}: compile --dim {dims}: one program, {len(sets)} shapes bit-identical to run; {note[0][3:] if note else ''}")
    bad = os.path.join(d, "off_grid.npy")
    np.save(bad, off_grid)
    r = subprocess.run([prog, "--input", f"{in_names[0]}={bad}", "--threads", "2"], capture_output=True, text=True)
    assert r.returncode == 2 and "compiled for" in r.stderr, (r.returncode, r.stderr)
    print(f"{name}: a shape off the grid: exit 2 ({r.stderr.strip()[:160]})")


def export(m, args, path, in_names, out_names, axes):
    torch.onnx.export(m, args, path, input_names=in_names, output_names=out_names, dynamic_axes=axes, opset_version=14)


def check_shapes(gen, name, m, example, in_name, out_name, axes, shapes, off_grid):
    """Exports m with dynamic axes, runs it in one session at each of `shapes`, compares with torch; then the
    program of `compile --dim` over those shapes' dims, against `run`."""
    randomize(m, gen)
    p = os.path.join(WORK, name, "model.onnx")
    export(m, example, p, [in_name], [out_name], {in_name: axes})
    sets = [[torch.randn(s, generator=gen)] for s in shapes]
    with torch.no_grad():
        refs = [[m(*s).numpy()] for s in sets]
    assert run_sets(name, p, [in_name], [[a.numpy() for a in s] for s in sets], refs) == len(shapes)
    check_compiled(name, p, [in_name], sets, {n: sorted({s[a] for s in shapes}) for a, n in axes.items()},
                   np.zeros(off_grid, np.float32))


def test_resnet18(gen):
    check_shapes(gen, "resnet18", torchvision.models.resnet18(num_classes=10).eval(), torch.zeros(1, 3, 64, 64), "input", "out",
                 {0: "batch", 2: "height", 3: "width"}, [(1, 3, 64, 64), (2, 3, 96, 80), (1, 3, 112, 128)], (1, 3, 72, 64))


def test_encoder(gen):
    check_shapes(gen, "encoder", Encoder().eval(), torch.zeros(2, 5, 32), "x", "y", {0: "batch", 1: "seq"},
                 [(1, 7, 32), (3, 12, 32), (2, 33, 32)], (1, 8, 32))


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
    # compile: a control value is bound with --freeze (one program per value; `run` finds and caches them itself)
    from check_model import build_project
    d = os.path.join(WORK, "if_scripted")
    for k in (0, 1):
        gen = os.path.join(d, f"gen{k}")
        sh([BIN, "compile", p, "-o", gen, "--freeze", f"mode={os.path.join(d, f'set{k}_mode.npy')}"])
        out = os.path.join(d, f"compiled{k}")
        sh([build_project(gen, False, WORK), "--input", f"x={os.path.join(d, f'set{k}_x.npy')}", "--output-dir", out, "--threads", "2"])
        got, want = np.load(os.path.join(out, "output_0.npy")), np.load(os.path.join(d, "out", str(k), "output_0.npy"))
        assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), f"if_scripted compiled with mode of set {k} != run"
    print("if_scripted: compile --freeze mode=VALUE, for both values: bit-identical to run")


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
    # the LSTM is a host kernel whose record holds the batch: one record per batch in the program's model.gguf
    check_compiled("lstm_vad", p, ["x", "h", "c"], sets, {"time": [10], "batch": [1, 2, 4]},
                   np.zeros((10, 3, 16), np.float32))


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


def test_staged(gen):
    import onnx
    from onnx import TensorProto as T, helper as h

    def save(name, nodes, ins, outs, inits):
        g = h.make_graph(nodes, name, ins, [h.make_tensor_value_info(o, t, None) for o, t in outs], initializer=inits)
        p = os.path.join(WORK, "staged", name + ".onnx")
        onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), p)
        return p

    consts = [h.make_tensor("zero", T.FLOAT, [], [0.0]), h.make_tensor("two", T.FLOAT, [], [2.0]), h.make_tensor("ax0", T.INT64, [1], [0])]
    rng = np.random.default_rng(0)
    x16 = [rng.standard_normal(16).astype(np.float32) for _ in range(2)] + [-np.abs(rng.standard_normal(16)).astype(np.float32)]

    def nonzero_ref(x):
        r = np.maximum(x, 0)
        return [r[np.nonzero(r > 0)[0]] * 2]
    p = save("nonzero", [h.make_node("Relu", ["x"], ["r"]), h.make_node("Greater", ["r", "zero"], ["m"]), h.make_node("NonZero", ["m"], ["nz"]),
                         h.make_node("Squeeze", ["nz", "ax0"], ["i"]), h.make_node("Gather", ["r", "i"], ["g"]), h.make_node("Mul", ["g", "two"], ["y"])],
             [h.make_tensor_value_info("x", T.FLOAT, [16])], [("y", T.FLOAT)], consts)
    run_staged_sets("nonzero", p, x16, nonzero_ref, exact=True)

    then_g = h.make_graph([h.make_node("Mul", ["x", "two"], ["t"])], "then", [], [h.make_tensor_value_info("t", T.FLOAT, None)])
    else_g = h.make_graph([h.make_node("Sub", ["x", "two"], ["e"])], "else", [], [h.make_tensor_value_info("e", T.FLOAT, None)])
    p = save("if_computed", [h.make_node("ReduceSum", ["x"], ["s"], keepdims=0), h.make_node("Greater", ["s", "zero"], ["c"]),
                             h.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)],
             [h.make_tensor_value_info("x", T.FLOAT, [2, 3])], [("y", T.FLOAT), ("s", T.FLOAT)], consts)
    x23 = [rng.standard_normal((2, 3)).astype(np.float32) + d for d in (1, -1, 1)]
    run_staged_sets("if_computed", p, x23, lambda x: [x * 2 if x.sum() > 0 else x - 2, np.float32(x.sum())])

    def topk_ref(x):  # k = the number of positive values; ties: the lower index first
        ix = np.argsort(-x, kind="stable")[: int((x > 0).sum())]
        return [x[ix], ix]
    p = save("topk_count", [h.make_node("Greater", ["x", "zero"], ["m"]), h.make_node("Cast", ["m"], ["mi"], to=T.INT64),
                            h.make_node("ReduceSum", ["mi"], ["k"], keepdims=1), h.make_node("TopK", ["x", "k"], ["v", "ix"])],
             [h.make_tensor_value_info("x", T.FLOAT, [16])], [("v", T.FLOAT), ("ix", T.INT64)], consts)
    run_staged_sets("topk_count", p, x16, topk_ref, exact=True)

    def two_cuts_ref(x):  # y = twice the positive values, then the top k of y, k = how many of y exceed 2
        y = nonzero_ref(x)[0]
        ix = np.argsort(-y, kind="stable")[: int((y > 2).sum())]
        return [y[ix]]
    p = save("two_cuts", [h.make_node("Relu", ["x"], ["r"]), h.make_node("Greater", ["r", "zero"], ["m"]), h.make_node("NonZero", ["m"], ["nz"]),
                          h.make_node("Squeeze", ["nz", "ax0"], ["i"]), h.make_node("Gather", ["r", "i"], ["g"]), h.make_node("Mul", ["g", "two"], ["y"]),
                          h.make_node("Greater", ["y", "two"], ["big"]), h.make_node("Cast", ["big"], ["bi"], to=T.INT64),
                          h.make_node("ReduceSum", ["bi"], ["k"], keepdims=1), h.make_node("TopK", ["y", "k"], ["v", "ix"])],
             [h.make_tensor_value_info("x", T.FLOAT, [16])], [("v", T.FLOAT)], consts)
    run_staged_sets("two_cuts", p, x16, two_cuts_ref, exact=True, cuts=2)


def test_ssdlite(gen):
    m = torchvision.models.detection.ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=11,
                                                                    score_thresh=0.05, detections_per_img=40).eval()
    check_detection(gen, "ssdlite", m, 320, 0.3)


def test_retinanet(gen):
    m = torchvision.models.detection.retinanet_resnet50_fpn(weights=None, weights_backbone=None, num_classes=11, score_thresh=0.05,
                                                             detections_per_img=40, min_size=256, max_size=256).eval()
    check_detection(gen, "retinanet", m, 256, 0.01)


def check_detection(gen, name, m, size, head_std):
    """A torchvision detector exported with its post-processing, two images in one session, detections
    against PyTorch's as sets."""
    randomize(m, gen)

    def image():  # structure (smooth blobs) and noise
        blobs = torch.nn.functional.interpolate(torch.rand(1, 3, 6, 6, generator=gen), size=(size, size), mode="bilinear", align_corners=True)[0]
        return 0.8 * blobs + 0.2 * torch.rand(3, size, size, generator=gen)
    with torch.no_grad():
        # BatchNorm statistics recalibrated on such images (random weights with made-up statistics saturate
        # the activations: constant features, detections whose scores tie to 1e-7 and whose NMS is then a
        # coin toss), and informative head weights (the default init gives near-uniform scores)
        for mod in m.backbone.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.reset_running_stats()
                mod.momentum = None
        m.backbone.train()
        m.backbone((torch.stack([image() for _ in range(4)]) - 0.45) / 0.225)
        m.backbone.eval()
        for prm in m.head.parameters():
            prm.copy_(torch.randn(prm.shape, generator=gen) * head_std)
    d = os.path.join(WORK, name)
    p = os.path.join(d, "model.onnx")
    xs = [image() for _ in range(2)]
    torch.onnx.export(m, ([xs[0]],), p, opset_version=17, input_names=["x"], output_names=["boxes", "scores", "labels"])
    args = [BIN, "run", p, "--output-dir", os.path.join(d, "out"), "--threads", "2", "--verbose"]
    for k, x in enumerate(xs):
        f = os.path.join(d, f"x{k}.npy")
        np.save(f, x.numpy())
        args += (["--then"] if k else []) + ["--input", f"x={f}"]
    r = sh(args)
    assert r.stderr.count("staged execution") >= 2, r.stderr[-3000:]
    for k, x in enumerate(xs):
        with torch.no_grad():
            ref = m([x])[0]
        want = [ref["boxes"].numpy(), ref["scores"].numpy(), ref["labels"].numpy()]
        got = [np.load(os.path.join(d, "out", str(k), f"output_{i}.npy")) for i in range(3)]
        assert len(np.unique(want[1])) >= 5, f"{name} image {k}: {len(np.unique(want[1]))} distinct scores (degenerate test)"
        assert [g.shape for g in got] == [w.shape for w in want], f"{name} image {k}: shapes {[g.shape for g in got]} vs {[w.shape for w in want]}"
        assert got[2].dtype == np.int64 and np.array_equal(np.sort(got[2]), np.sort(want[2])), f"{name} image {k}: labels differ"

        # detections as sets: each of PyTorch's matched to one of ours with its label, its score (near-ties
        # order either way) and its box
        used, score_err, box_err = set(), 0.0, 0.0
        smax = float(np.abs(want[1]).max())
        for j in range(len(want[1])):
            cand = [i for i in range(len(got[1])) if i not in used and got[2][i] == want[2][j] and abs(float(got[1][i]) - float(want[1][j])) <= TOL * smax]
            best = min(cand, key=lambda i: float(np.abs(got[0][i].astype(np.float64) - want[0][j]).max()), default=None)
            assert best is not None, f"{name} image {k}: PyTorch's detection {j} (label {want[2][j]}, score {want[1][j]}) has no match"
            used.add(best)
            score_err = max(score_err, abs(float(got[1][best]) - float(want[1][j])) / smax)
            box_err = max(box_err, float(np.abs(got[0][best].astype(np.float64) - want[0][j]).max()) / size)
        print(f"{name} image {k}: {len(want[1])} detections matched, scores error / max {score_err:.3g}, boxes error / image size {box_err:.3g}")
        assert score_err <= TOL and box_err <= TOL, f"{name} image {k}: detections differ from PyTorch's"


def run_staged_sets(name, path, xs, ref, exact=False, cuts=1):  # cuts: at least, nested (a cut per stage-2 signature)
    """One `onnx2ggml run --verbose` over every input; each output against numpy's (exact, or within TOL)."""
    d = os.path.join(WORK, "staged", name)
    os.makedirs(d, exist_ok=True)
    args = [BIN, "run", path, "--output-dir", os.path.join(d, "out"), "--threads", "2", "--verbose"]
    for k, x in enumerate(xs):
        f = os.path.join(d, f"x{k}.npy")
        np.save(f, x)
        args += (["--then"] if k else []) + ["--input", f"x={f}"]
    r = sh(args)
    assert r.stderr.count("staged execution") >= cuts, f"{name}: not cut {cuts} time(s)\n{r.stderr[-2000:]}"
    for k, x in enumerate(xs):
        for i, want in enumerate(ref(x)):
            want = np.asarray(want)
            got = np.load(os.path.join(d, "out", str(k), f"output_{i}.npy"))
            assert got.shape == want.shape and got.dtype == want.dtype, f"{name} input {k} output {i}: {got.shape} {got.dtype}, numpy {want.shape} {want.dtype}"
            if exact:
                assert np.array_equal(got, want), f"{name} input {k} output {i}: {got} != {want}"
            else:
                err = float(np.abs(got.astype(np.float64) - want).max()) / max(float(np.abs(want).max()), 1e-30)
                assert err <= TOL, f"{name} input {k} output {i}: error {err:.3g}"
            print(f"{name} input {k} output {i}: shape {got.shape} matches numpy{' exactly' if exact else ''}")


def main():
    global BIN, WORK
    BIN, WORK = sys.argv[1], os.path.abspath(sys.argv[2])
    names = sys.argv[3:] or ["resnet18", "encoder", "if_scripted", "lstm_vad", "rss", "staged", "ssdlite", "retinanet"]
    for n in names:
        shutil.rmtree(os.path.join(WORK, n), ignore_errors=True)
        os.makedirs(os.path.join(WORK, n))
        gen = torch.Generator().manual_seed(0)
        torch.manual_seed(0)
        globals()["test_" + n](gen)
        print(f"{n}: PASS")


if __name__ == "__main__":
    main()
