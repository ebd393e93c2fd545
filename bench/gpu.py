#!/usr/bin/env python3
"""onnx2ggml against PyTorch on one GPU: `onnx2ggml bench --backend B` (f32 weights and `--weights f16`) and the
same PyTorch modules in eager mode on the same device (fp32, and `.half()` for fp16), interleaved per model.
Prints a markdown table (and writes it to --out). Run by scripts/device-check.sh on a machine with a GPU.

usage: bench/gpu.py BIN MODELDIR... [--backend cuda] [--torch-device cuda] [--repeat 20] [--out FILE]
Each MODELDIR was written by tests/models/export_models.py or export_sd.py (its name picks the PyTorch module).
--torch-device cpu --backend cpu: a dry run of the script on a machine without a GPU (fp32 only).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

import numpy as np
import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "models"))
import export_models  # noqa: E402
import export_sd  # noqa: E402
from check_model import input_args  # noqa: E402


def inputs_of(d):
    meta = os.path.join(d, "meta.json")
    if os.path.exists(meta):
        names = json.load(open(meta))["inputs"]
        return [np.load(os.path.join(d, f"in_{n}.npy")) for n in names]
    return [np.load(os.path.join(d, "input.npy"))]


def torch_ms(name, d, device, half, repeat):
    ctor = (export_models.MODELS.get(name) or export_sd.MODELS[name])[0]
    torch.manual_seed(0)
    m = ctor().eval().to(device)
    args = [torch.from_numpy(x).to(device) for x in inputs_of(d)]
    if half:
        m = m.half()
        args = [a.half() if a.is_floating_point() else a for a in args]
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    times = []
    with torch.no_grad():
        for i in range(repeat + 3):
            sync()
            t0 = time.perf_counter()
            m(*args)
            sync()
            if i >= 3:
                times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def o2g_ms(bin_, d, backend, weights, repeat):
    cmd = [bin_, "bench", os.path.join(d, "model.onnx"), *input_args(d), "--backend", backend, "--repeat", str(repeat),
           "--warmup", "3", "--weights", weights]
    r = subprocess.run(cmd, capture_output=True, text=True)
    m = re.search(r"median_ms=([\d.]+)", r.stdout)
    if r.returncode != 0 or not m:
        sys.exit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    return float(m.group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("bin")
    ap.add_argument("models", nargs="+")
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--torch-device", default="cuda")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--out")
    a = ap.parse_args()
    kinds = [("f32", False)] + ([("f16", True)] if a.torch_device != "cpu" else [])
    head = "| model | " + " | ".join(f"onnx2ggml {k} ms | PyTorch {k} ms | ratio" for k, _ in kinds) + " |"
    rows = [head, "|---|" + "---|---|---|" * len(kinds)]
    for d in a.models:
        name = os.path.basename(os.path.normpath(d))
        cells = []
        for k, half in kinds:
            o = o2g_ms(a.bin, d, a.backend, k, a.repeat)
            t = torch_ms(name, d, a.torch_device, half, a.repeat)
            cells.append(f"{o:.2f} | {t:.2f} | {o / t:.2f}")
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
        print(rows[-1], flush=True)
    dev = torch.cuda.get_device_name(0) if a.torch_device.startswith("cuda") else "CPU"
    text = (f"{dev}, onnx2ggml `--backend {a.backend}` against PyTorch {torch.__version__} eager on the same device "
            f"(median of {a.repeat} runs each, interleaved per model; ratio = onnx2ggml / PyTorch, below 1 is faster; "
            "f16: `--weights f16` against the module in half precision).\n\n" + "\n".join(rows) + "\n")
    print(text)
    if a.out:
        open(a.out, "w").write(text)


if __name__ == "__main__":
    main()
