#!/usr/bin/env python3
"""Model parity test: `onnx2ggml run` against PyTorch's output, and the built output of
`onnx2ggml compile` against `run`, bit for bit.

usage: check_model.py ONNX2GGML MODELDIR WORKDIR [--no-compile] [--threads N] [--weights f16] [--tol T] [--backend B] [--profile]
MODELDIR holds model.onnx, expected.npy and either input.npy (input named "input") or
meta.json + in_<name>.npy per input (tests/models/export_sd.py).
Tolerance: max |run - torch| <= 1e-4 * max |torch| (fp32); 1e-2 with --weights f16.
WORKDIR is removed when the test passes, its GGUF (3.4 GB for the full UNet) also when it fails;
--keep keeps both.
"""
import json
import argparse
import os
import shutil
import subprocess
import sys

import numpy as np

TOL = 1e-4


def sh(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        print("$ " + " ".join(cmd), file=sys.stderr)
        print(r.stdout[-4000:], r.stderr[-4000:], file=sys.stderr)
        sys.exit(f"command failed with exit code {r.returncode}")
    return r


def input_args(model_dir):
    """`--input NAME=FILE` arguments for MODELDIR's inputs (see the module's doc)."""
    meta = os.path.join(model_dir, "meta.json")
    if os.path.exists(meta):
        with open(meta) as f:
            names = json.load(f)["inputs"]
        inputs = [f"{n}={os.path.join(model_dir, 'in_' + n + '.npy')}" for n in names]
    else:
        inputs = [f"input={os.path.join(model_dir, 'input.npy')}"]
    return [x for i in inputs for x in ("--input", i)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin")
    ap.add_argument("model_dir")
    ap.add_argument("work")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--threads", default="2")
    ap.add_argument("--weights", default="f32", choices=["f32", "f16", "q8_0", "q5_0", "q5_1", "q4_0", "q4_1", "q2_K", "q3_K", "q4_K", "q5_K", "q6_K"])
    ap.add_argument("--tol", type=float)
    ap.add_argument("--backend", default="cpu", help="backend of `run` (cpu = pure ggml, auto = fastest)")
    ap.add_argument("--keep", action="store_true", help="keep WORKDIR after a pass")
    ap.add_argument("--profile", action="store_true", help="also check `run --profile` (every node computed alone)")
    a = ap.parse_args()
    # f16: 1e-2; ggml's quantized kernels also quantize the activations (q8 for src1): 5e-2 for 8-bit, 2e-1 below
    qtol = {"f32": TOL, "f16": 1e-2, "q8_0": 5e-2, "q6_K": 5e-2}
    tol = a.tol if a.tol is not None else qtol.get(a.weights, 2e-1)
    model = os.path.join(a.model_dir, "model.onnx")
    in_args = input_args(a.model_dir)
    ref = np.load(os.path.join(a.model_dir, "expected.npy"))
    assert np.abs(ref).max() > 1e-3, "degenerate reference"
    shutil.rmtree(a.work, ignore_errors=True)
    run_dir = os.path.join(a.work, "run")
    os.makedirs(run_dir)
    sh([a.bin, "run", model, *in_args, "--output-dir", run_dir, "--threads", a.threads, "--weights", a.weights, "--backend", a.backend])
    got = np.load(os.path.join(run_dir, "output_0.npy"))
    assert got.shape == ref.shape, f"shape {got.shape} != {ref.shape}"
    err = float(np.abs(got.astype(np.float64) - ref).max() / np.abs(ref).max())
    print(f"run ({a.backend}) vs PyTorch ({a.weights} weights): max error / max |ref| = {err:.3g} (tolerance {tol})")
    assert err <= tol, "run does not match PyTorch"
    if a.profile:  # every node computed alone: the backend's unfused paths must agree too
        prof_dir = os.path.join(a.work, "profile")
        os.makedirs(prof_dir)
        sh([a.bin, "run", model, *in_args, "--output-dir", prof_dir, "--threads", a.threads, "--weights", a.weights, "--backend", a.backend, "--profile"])
        prof = np.load(os.path.join(prof_dir, "output_0.npy"))
        perr = float(np.abs(prof.astype(np.float64) - ref).max() / np.abs(ref).max())
        print(f"run --profile vs PyTorch: max error / max |ref| = {perr:.3g} (tolerance {tol})")
        assert perr <= tol, "run --profile does not match PyTorch"
    if not a.no_compile:
        try:
            check_compiled(a, model, in_args, got)
        finally:  # pass or fail, the GGUF copy of the weights is the bulk of WORKDIR
            if not a.keep and os.path.exists(os.path.join(a.work, "gen", "model.gguf")):
                os.remove(os.path.join(a.work, "gen", "model.gguf"))
    if not a.keep:
        shutil.rmtree(a.work, ignore_errors=True)


def build_project(gen, pure_ggml, work):
    """Builds the generated project in GEN/build (its program: GEN/build/model); pure_ggml: without oneDNN, the
    kernels of `run --backend cpu`. The ggml objects are shared by every project through ccache (next to WORK)."""
    cfg = ["cmake", "-S", gen, "-B", os.path.join(gen, "build"), "-DCMAKE_BUILD_TYPE=Release"]
    if pure_ggml:
        cfg.append("-DO2G_ONEDNN=OFF")
    env = dict(os.environ)
    if shutil.which("ccache"):  # every generated project builds the same ggml: share the objects
        cfg += ["-DCMAKE_C_COMPILER_LAUNCHER=ccache", "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"]
        env.setdefault("CCACHE_DIR", os.path.join(os.path.dirname(os.path.abspath(work)), "ccache"))
        env.setdefault("CCACHE_NOHASHDIR", "1")
    sh(cfg, env=env)
    sh(["cmake", "--build", os.path.join(gen, "build"), "-j", str(os.cpu_count() or 2)], env=env)
    return os.path.join(gen, "build", "model")


def check_compiled(a, model, in_args, got):
    gen = os.path.join(a.work, "gen")
    sh([a.bin, "compile", model, "-o", gen, "--weights", a.weights])
    build_project(gen, a.backend == "cpu", a.work)
    comp_dir = os.path.join(a.work, "compiled")
    os.makedirs(comp_dir)
    sh([os.path.join(gen, "build", "model"), *in_args, "--output-dir", comp_dir, "--threads", a.threads, "--backend", a.backend])
    comp = np.load(os.path.join(comp_dir, "output_0.npy"))
    assert comp.shape == got.shape and comp.dtype == got.dtype
    same = np.array_equal(comp.view(np.uint32), got.view(np.uint32))
    print(f"compiled vs run: {'bit-identical' if same else 'DIFFERENT'}")
    assert same, "compiled program and run disagree"


if __name__ == "__main__":
    main()
