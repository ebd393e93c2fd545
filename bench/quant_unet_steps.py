#!/usr/bin/env python3
"""The UNet's error after a whole denoising run, per --weights TYPE (docs/quantization.md): one step's error says
little about what a sampler does with it over 20 steps. A fixed schedule on the UNet alone (no text encoder, no
VAE, no guidance): SD 1.5's sigmas (scaled linear betas 0.00085..0.012, 1000 steps, 20 timesteps spread from 999
to 0 as diffusers' EulerDiscreteScheduler with "linspace" spacing), Euler steps x += (sigma_next - sigma) * eps,
with the model input x / sqrt(sigma^2 + 1), a fixed latent (numpy RandomState(0) noise times the largest sigma)
and a fixed random "text embedding" [1, 77, 768]. Each TYPE runs in its own process (its peak RSS is its own):
the final latents against f32's, relative to max|f32|, and the first step's eps error likewise.

usage: bench/quant_unet_steps.py PYTHONPATH_OF_ONNX2GGML UNET.onnx [--steps 20] [--types f32,q8_0,...] [--threads 2]
A TYPE is a --weights type, optionally with one rule: q8_0:conv=q8_0 (--weights q8_0 --weights-rule conv=q8_0)."""
import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np


def sigmas(steps):
    betas = np.linspace(0.00085 ** 0.5, 0.012 ** 0.5, 1000, dtype=np.float64) ** 2
    ac = np.cumprod(1.0 - betas)
    all_s = np.sqrt((1 - ac) / ac)
    ts = np.linspace(999, 0, steps)
    s = np.interp(ts, np.arange(1000), all_s)
    return ts, np.append(s, 0.0)


def one(a):
    sys.path.insert(0, a.pythonpath)
    import onnx2ggml
    weights, _, rule = a.one.partition(":")
    sess = onnx2ggml.InferenceSession(a.unet, threads=a.threads, weights=weights, weight_rules=[rule] if rule else [])
    names = [i.name for i in sess.get_inputs()]
    types = {i.name: i.type for i in sess.get_inputs()}
    rs = np.random.RandomState(0)
    ts, sig = sigmas(a.steps)
    x = rs.standard_normal((1, 4, 32, 32)) * sig[0]
    ehs = rs.standard_normal((1, 77, 768)).astype(np.float32)
    first, times = None, []
    for k in range(a.steps):
        t = np.array([ts[k]], np.int64 if "int64" in types[names[1]] else np.float32)
        t0 = time.time()
        (eps,) = sess.run(None, {names[0]: (x / np.sqrt(sig[k] ** 2 + 1)).astype(np.float32), names[1]: t, names[2]: ehs})
        times.append(time.time() - t0)
        if first is None:
            first = eps.copy()
        x = x + (sig[k + 1] - sig[k]) * eps.astype(np.float64)
    np.save(a.out + ".latents.npy", x)
    np.save(a.out + ".eps0.npy", first)
    json.dump({"step_s": float(np.median(times[1:])), "first_s": times[0],
               "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}, open(a.out + ".json", "w"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pythonpath")
    ap.add_argument("unet")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--types", default="f32,f16,q8_0,q8_0:conv=q8_0,q4_K:conv=q4_K")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--work", default="/tmp/quant_unet_steps")
    ap.add_argument("--one")
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.one:
        return one(a)
    os.makedirs(a.work, exist_ok=True)
    rows = []
    for t in a.types.split(","):
        out = os.path.join(a.work, t.replace(":", "_").replace("=", "_"))
        subprocess.run([sys.executable, __file__, a.pythonpath, a.unet, "--steps", str(a.steps), "--threads", str(a.threads),
                        "--one", t, "--out", out], check=True)
        rows.append((t, out))
    ref = np.load(rows[0][1] + ".latents.npy")
    ref0 = np.load(rows[0][1] + ".eps0.npy")
    print(f"\nUNet 1x4x32x32, {a.steps} Euler steps, --threads {a.threads}; errors against {rows[0][0]}, relative to its max|.|\n")
    print(f"| --weights | error after 1 step (eps) | error after {a.steps} steps (latents) | s per step | peak RSS MB |")
    print("|---|---|---|---|---|")
    for t, out in rows:
        x, e0, m = np.load(out + ".latents.npy"), np.load(out + ".eps0.npy"), json.load(open(out + ".json"))
        err = float(np.abs(x - ref).max() / np.abs(ref).max())
        err0 = float(np.abs(e0.astype(np.float64) - ref0).max() / np.abs(ref0).max())
        w, _, rule = t.partition(":")
        label = w + (f" --weights-rule {rule}" if rule else "")
        print(f"| {label} | {err0:.2g} | {err:.2g} | {m['step_s']:.2f} | {m['rss_mb']:.0f} |")


if __name__ == "__main__":
    main()
