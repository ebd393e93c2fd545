#!/usr/bin/env python3
"""First-run cost of a new input shape (issue 13): one session per runtime, the input shapes A, B, C run in
that order, then again ROUNDS-1 times. The first run of each shape is onnx2ggml's specialization (shape
inference, optimization, graph build, allocation; weights are shared) plus the run; ONNX Runtime's is its
per-shape allocation planning plus the run. The steady time is the median of that shape's later runs.
onnx2ggml (`run --verbose`, its `input set K: run_ms=...` lines) and ONNX Runtime (bench/ort_bench.js
--sequence) alternate, TRIALS times; the table takes medians. Session creation is not timed on either side.

Models (exported here, random weights made informative as the tests do): torchvision resnet18 with dynamic
batch/height/width, and a pre-norm transformer encoder in plain torch (tests/dynamic/dynamic_models.py's,
d=256, 4 heads, 4 blocks) with dynamic batch/sequence.
usage: bench/first_run.py ONNX2GGML WORKDIR [--threads N] [--rounds N] [--trials N]"""
import argparse
import os
import re
import statistics
import subprocess
import sys

import numpy as np
import torch
import torchvision

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "dynamic"))
from dynamic_models import Encoder, export, randomize  # noqa: E402

MODELS = {
    "resnet18": (lambda: torchvision.models.resnet18().eval(), "input", {0: "batch", 2: "height", 3: "width"},
                 [(1, 3, 224, 224), (2, 3, 160, 192), (1, 3, 288, 256)]),
    "encoder": (lambda: Encoder(d=256, heads=4, layers=4).eval(), "x", {0: "batch", 1: "seq"},
                [(1, 64, 256), (2, 128, 256), (1, 200, 256)]),
}


def sh(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: exit {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin")
    ap.add_argument("work")
    ap.add_argument("--threads", default="2")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--trials", type=int, default=3)
    a = ap.parse_args()
    env = dict(os.environ, NODE_PATH=os.path.join(HERE, "node_modules"))
    rows = []
    for name, (make, in_name, axes, shapes) in MODELS.items():
        d = os.path.join(a.work, name)
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "model.onnx")
        gen = torch.Generator().manual_seed(0)
        m = make()
        randomize(m, gen)
        export(m, torch.zeros(shapes[0]), path, [in_name], ["out"], {in_name: axes})
        files = []
        for k, s in enumerate(shapes):
            files.append(os.path.join(d, f"in{k}.npy"))
            np.save(files[-1], torch.randn(s, generator=gen).numpy())
        seq = [k for _ in range(a.rounds) for k in range(len(shapes))]
        o2g = {k: ([], [], []) for k in range(len(shapes))}  # first, steady, specialize ms
        ort = {k: ([], []) for k in range(len(shapes))}
        for _ in range(a.trials):
            args = [a.bin, "run", path, "--threads", a.threads, "--verbose", "--output-dir", os.path.join(d, "out")]
            for i, k in enumerate(seq):
                args += (["--then"] if i else []) + ["--input", f"{in_name}={files[k]}"]
            lines = re.findall(r"input set (\d+): run_ms=([\d.]+) (new_specialization specialize_ms=([\d.]+)|cached)", sh(args).stderr)
            assert len(lines) == len(seq), "onnx2ggml run --verbose printed no per-set times"
            seen = set()
            for i, ms, _, spec in lines:
                k = seq[int(i)]
                if k not in seen:
                    assert spec, f"{name}: shape {k}'s first run was not a new specialization"
                    o2g[k][0].append(float(ms))
                    o2g[k][2].append(float(spec))
                    seen.add(k)
                else:
                    o2g[k][1].append(float(ms))
            r = sh(["node", os.path.join(HERE, "ort_bench.js"), "--sequence", path, a.threads] + [f"{in_name}={files[k]}" for k in seq], env=env)
            seen = set()
            for i, ms in re.findall(r"set (\d+): ms=([\d.]+)", r.stdout):
                k = seq[int(i)]
                ort[k][0 if k not in seen else 1].append(float(ms))
                seen.add(k)
        for k, s in enumerate(shapes):
            med = statistics.median
            rows.append((name, "x".join(map(str, s)), med(o2g[k][0]), med(o2g[k][2]), med(o2g[k][1]), med(ort[k][0]), med(ort[k][1])))
            print(f"{name} {rows[-1][1]}: onnx2ggml first {rows[-1][2]:.1f} ms (specialize {rows[-1][3]:.1f}) steady {rows[-1][4]:.1f}; "
                  f"ORT first {rows[-1][5]:.1f} steady {rows[-1][6]:.1f}", file=sys.stderr)
    print(f"threads {a.threads}, {a.rounds} rounds of the shapes in order, {a.trials} trials (medians)\n")
    print("| model | input shape | onnx2ggml first run ms | of which specialization ms | onnx2ggml steady ms | onnx2ggml first-run extra ms "
          "| ORT first run ms | ORT steady ms | ORT first-run extra ms | steady onnx2ggml / ORT |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for n, s, f, sp, st, of, ost in rows:
        print(f"| {n} | {s} | {f:.1f} | {sp:.1f} | {st:.1f} | {f - st:.1f} | {of:.1f} | {ost:.1f} | {of - ost:.1f} | {st / ost:.2f} |")


if __name__ == "__main__":
    main()
