#!/usr/bin/env python3
"""Times PyTorch (eager, no grad) on one of the test models: prints
`median_ms=... min_ms=... peak_rss_mb=... times_ms=...`.
usage: torch_bench.py NAME NAME=INPUT.npy[,NAME=INPUT.npy...] THREADS WARMUP REPEAT
NAME is a model of tests/models/export_models.py or tests/models/export_sd.py."""
import os
import resource
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "models"))
import export_models  # noqa: E402
import export_sd  # noqa: E402

name, inputs, threads, warmup, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
torch.set_num_threads(threads)
torch.set_num_interop_threads(1)
table = export_sd.MODELS if name in export_sd.MODELS else export_models.MODELS
m = table[name][0]().eval()
xs = tuple(torch.from_numpy(np.load(kv.split("=", 1)[1])) for kv in inputs.split(","))
ms = []
with torch.no_grad():
    for _ in range(warmup):
        m(*xs)
    for _ in range(repeat):
        t0 = time.perf_counter()
        m(*xs)
        ms.append((time.perf_counter() - t0) * 1e3)
ms.sort()
med = float(np.median(ms))
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(f"median_ms={med:.3f} min_ms={ms[0]:.3f} peak_rss_mb={rss:.1f} times_ms=" + ",".join(f"{t:.3f}" for t in ms))
