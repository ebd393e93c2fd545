#!/usr/bin/env python3
"""Long-running use in one process (issue 19 item 3): `onnx2ggml bench MODEL --repeat N` while its
resident memory and open descriptors are sampled from /proc every 10 ms. After the warm-up (the
first fifth of the samples: loading, the first runs' allocations) the RSS may grow by less than 1%,
and the fewest descriptors open at a sample in the last quarter may not exceed those of the first
quarter (each run opens and closes /proc files for its thread count: a few more open for a moment is
no leak; a leaked one stays). The thread count is fixed (--threads, default 2): with the default one, which
follows the cores free at each run, the oneDNN backend makes a shape's primitives once more for each new
count a busy machine gives it, a bounded growth this test would take for a leak.
usage: soak.py ONNX2GGML MODEL.onnx [--runs N] [--threads N]   (ctest -L soak: a short run; 10,000 runs by hand)"""
import argparse
import os
import subprocess
import sys
import time


def sample(pid):
    """(RSS kB, open descriptors) of a live process, None once it has gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            rss = next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
        return rss, len(os.listdir(f"/proc/{pid}/fd"))
    except (OSError, StopIteration):
        return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin")
    ap.add_argument("model")
    ap.add_argument("--runs", type=int, default=3000)
    ap.add_argument("--threads", default="2")
    a = ap.parse_args()
    cmd = [a.bin, "bench", a.model, "--random-inputs", "1", "--warmup", "2", "--repeat", str(a.runs), "--threads", a.threads]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    samples = []
    while p.poll() is None:
        s = sample(p.pid)
        if s:
            samples.append(s)
        time.sleep(0.01)
    out, err = p.communicate()
    if p.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {p.returncode}:\n{out[-2000:]}\n{err[-2000:]}")
    samples = [s for s in samples if s[0] > 0]  # a zombie's last sample reads 0
    if len(samples) < 50:
        sys.exit(f"FAIL: only {len(samples)} samples of the process: raise --runs so that it runs for a second or more")
    steady = samples[len(samples) // 5:]
    rss0, rss1 = steady[0][0], max(s[0] for s in steady)
    q = len(steady) // 4
    fd_early, fd_late = min(s[1] for s in steady[:q]), min(s[1] for s in steady[-q:])
    growth = (rss1 - rss0) / rss0
    print(f"{a.runs} runs, {len(samples)} samples: RSS after warm-up {rss0} kB, at most {rss1} kB (+{100 * growth:.2f}%); "
          f"open descriptors (fewest at a sample) {fd_early} in the first quarter after it, {fd_late} in the last")
    if growth >= 0.01:
        sys.exit(f"FAIL: resident memory grew by {100 * growth:.2f}% after the warm-up (limit 1%)")
    if fd_late > fd_early:
        sys.exit(f"FAIL: open descriptors grew from {fd_early} to {fd_late}")
    print("OK")


if __name__ == "__main__":
    main()
