#!/usr/bin/env python3
"""The table of docs/quantization.md: per model and --weights TYPE, `quantize` then `run --gguf` / `bench --gguf`:
max|got - ref| / max|ref| against PyTorch's f32 output, the GGUF's size and the median CPU time against f32.
Models are exported by tests/models/zoo_models.py (random weights made informative, fixed seeds).
Times are medians of --repeat runs on a machine shared with other work: noisy, read the ratios loosely.

usage: bench/quant.py ONNX2GGML WORKDIR [--models resnet18,vit_small] [--types f32,f16,q8_0,...] [--threads N] [--repeat N]"""
import argparse
import json
import os
import platform
import re
import resource
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def cpu_s():  # user + system seconds of the finished children
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def sh(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: exit {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin")
    ap.add_argument("work")
    ap.add_argument("--models", default="resnet18,vit_small")
    ap.add_argument("--types", default="f32,f16,q8_0,q6_K,q5_0,q4_K,q4_0")
    ap.add_argument("--threads", default="2")
    ap.add_argument("--repeat", default="5")
    a = ap.parse_args()
    rows = []
    for m in a.models.split(","):
        d = os.path.join(a.work, m)
        if not os.path.exists(os.path.join(d, "model.onnx")):
            sh([sys.executable, os.path.join(HERE, "..", "tests", "models", "zoo_models.py"), a.work, m])
        meta = json.load(open(os.path.join(d, "meta.json")))
        ins = [x for n in meta["inputs"] for x in ("--input", f"{n}={d}/in_{n}.npy")]
        ref = np.load(os.path.join(d, "expected.npy"))
        base = None
        for t in a.types.split(","):
            g = os.path.join(a.work, f"{m}.{t}.gguf")
            sh([a.bin, "quantize", os.path.join(d, "model.onnx"), "-o", g, "--weights", t, "--quiet"])
            out = os.path.join(a.work, f"out_{m}_{t}")
            sh([a.bin, "run", os.path.join(d, "model.onnx"), *ins, "--gguf", g, "--output-dir", out, "--threads", a.threads, "--quiet"])
            got = np.load(os.path.join(out, "output_0.npy"))
            err = float(np.abs(got.astype(np.float64) - ref).max() / np.abs(ref).max())
            bench = [a.bin, "bench", os.path.join(d, "model.onnx"), *ins, "--gguf", g, "--threads", a.threads, "--warmup", "1", "--quiet"]
            c0 = cpu_s()
            b1 = sh(bench + ["--repeat", "1"])
            c1 = cpu_s()
            # enough runs that their CPU time stands above the load's noise (a fast model, e.g. the text encoder at
            # 65 ms, loads for longer than a few runs take): at least 3 s of runs
            n = max(int(a.repeat), int(3000 / max(1.0, float(re.search(r"median_ms=([0-9.]+)", b1).group(1)))))
            b = sh(bench + ["--repeat", str(n + 1)])
            cpu_ms = (cpu_s() - 2 * c1 + c0) * 1000 / n  # the CPU time of n runs: load and warmup cancel
            ms = float(re.search(r"median_ms=([0-9.]+)", b).group(1))
            rss = float(re.search(r"peak_rss_mb=([0-9.]+)", b).group(1))
            base = base or cpu_ms
            rows.append((m, t, err, os.path.getsize(g), ms, cpu_ms, cpu_ms / base, rss))
            print(f"{m:10s} {t:5s} err={err:.3g} gguf={os.path.getsize(g) / 1e6:.1f}MB median_ms={ms:.1f} cpu_ms={cpu_ms:.1f} x{cpu_ms / base:.2f} "
                  f"rss={rss:.0f}MB", flush=True)
    print(f"\nmachine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, --threads {a.threads}, "
          f"{a.repeat} runs; CPU time per run = user+system of `bench --repeat N+1` less `--repeat 1` (shared machine: noisy)\n")
    print("| model | --weights | max err / max\\|ref\\| | GGUF MB | median wall ms | CPU ms per run | CPU time / f32 | peak RSS MB |")
    print("|---|---|---|---|---|---|---|---|")
    for m, t, err, size, ms, cpu_ms, ratio, rss in rows:
        print(f"| {m} | {t} | {err:.2g} | {size / 1e6:.1f} | {ms:.1f} | {cpu_ms:.0f} | {ratio:.2f} | {rss:.0f} |")


if __name__ == "__main__":
    main()
