#!/usr/bin/env python3
"""The reference column of the conformance report: runs every case of the ONNX backend test data
through ONNX Runtime (onnxruntime-node 1.30, CPU, installed by `scripts/setup.sh --bench`) with the
same comparison as run_conformance.py (rtol 1e-3, atol 1e-7, integers and strings exact), and writes
one line per case to tests/conformance/ort_results.txt: `CASE VERDICT REASON`.

usage: /usr/bin/python3 ort_reference.py WORKDIR [--out FILE] [--suites node,...]
Cases ONNX Runtime cannot be given through its JavaScript API (sequence or optional inputs,
bfloat16 tensors) are recorded as `not-run`.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper

from run_conformance import DATA, SUITES

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def tensor_type(vi):
    return vi.type.tensor_type.elem_type if vi.type.HasField("tensor_type") else None


def prepare(suite, case, work):
    """Writes the inputs of every test set as .npy; returns (job, expected outputs per set) or a reason."""
    d = os.path.join(DATA, suite, case)
    try:
        m = onnx.load(os.path.join(d, "model.onnx"), load_external_data=False)
    except Exception as e:  # noqa: BLE001
        return None, f"the onnx package cannot read the model: {e}"
    inits = {t.name for t in m.graph.initializer}
    ins = [vi for vi in m.graph.input if vi.name not in inits]
    for vi in list(ins) + list(m.graph.output):
        t = tensor_type(vi)
        if t is None:
            return None, f"'{vi.name}' is a sequence or optional (not passed through the JavaScript API)"
        if t == onnx.TensorProto.BFLOAT16:
            return None, "bfloat16 tensors (onnxruntime-node has none)"
    job = {"model": os.path.join(d, "model.onnx"), "sets": []}
    expected = []
    for s in sorted(x for x in os.listdir(d) if x.startswith("test_data_set_")):
        sd = os.path.join(d, s)
        files = sorted(f for f in os.listdir(sd) if f.startswith("input_"))
        inputs = {}
        for k, f in enumerate(files):
            tp = onnx.TensorProto()
            tp.ParseFromString(open(os.path.join(sd, f), "rb").read())
            names = [vi.name for vi in ins]
            name = tp.name if tp.name in names else (names[k] if k < len(names) else f"input_{k}")
            a = numpy_helper.to_array(tp)
            if a.dtype == object:
                a = a.astype(str)
            p = os.path.join(work, suite, case, s, f"{name.replace('/', '_')}.npy")
            os.makedirs(os.path.dirname(p), exist_ok=True)
            np.save(p, a)
            inputs[name] = p
        outs = []
        for f in sorted(f for f in os.listdir(sd) if f.startswith("output_")):
            tp = onnx.TensorProto()
            tp.ParseFromString(open(os.path.join(sd, f), "rb").read())
            outs.append(numpy_helper.to_array(tp))
        job["sets"].append({"inputs": inputs, "outdir": os.path.join(work, suite, case, s, "ort")})
        expected.append(outs)
    return (job, expected), ""


def compare(got, exp):
    """'' when equal under the runner's rule, else why not."""
    if exp.dtype == object or got.dtype.kind == "U":
        ok = got.shape == exp.shape and all(str(x) == (y.decode() if isinstance(y, bytes) else str(y)) for x, y in zip(got.ravel(), exp.ravel()))
        return "" if ok else "strings differ"
    if got.shape != exp.shape:
        return f"shape {got.shape} != {exp.shape}"
    if exp.dtype.kind in "iub":
        return "" if np.array_equal(got.astype(exp.dtype), exp) else "integers differ"
    try:
        np.testing.assert_allclose(got.astype(np.float64), exp.astype(np.float64), rtol=1e-3, atol=1e-7)
    except AssertionError:
        return f"max abs error {np.nanmax(np.abs(got.astype(np.float64) - exp.astype(np.float64))):.3g}"
    return ""


def verdict(job, expected):
    for st, outs in zip(job["sets"], expected):
        err = os.path.join(st["outdir"], "error.txt")
        if os.path.exists(err):
            return "error", open(err).read().strip()[:160]
        for k, e in enumerate(outs):
            pj, pn = os.path.join(st["outdir"], f"output_{k}.json"), os.path.join(st["outdir"], f"output_{k}.npy")
            if os.path.exists(pj):
                j = json.load(open(pj))
                got = np.array(j["data"], dtype=str).reshape(j["dims"])
            elif os.path.exists(pn):
                got = np.load(pn)
            else:
                return "error", f"no output {k}"
            why = compare(got, e)
            if why:
                return "fail", f"output {k}: {why}"
    return "pass", ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("work")
    ap.add_argument("--out", default=os.path.join(HERE, "ort_results.txt"))
    ap.add_argument("--suites", default=",".join(SUITES))
    a = ap.parse_args()
    mod = os.path.join(ROOT, "bench", "node_modules")
    if not os.path.isdir(os.path.join(mod, "onnxruntime-node")):
        sys.exit("onnxruntime-node is not installed: run scripts/setup.sh --bench")
    shutil.rmtree(a.work, ignore_errors=True)
    res, jobs = {}, []
    for s in a.suites.split(","):
        for c in sorted(os.listdir(os.path.join(DATA, s))):
            prepared, why = prepare(s, c, a.work)
            if prepared is None:
                res[f"{s}/{c}"] = ("not-run", why)
            else:
                jobs.append((f"{s}/{c}", *prepared))
    manifest = os.path.join(a.work, "manifest.json")
    json.dump([j for _, j, _ in jobs], open(manifest, "w"))
    env = dict(os.environ, NODE_PATH=mod)
    subprocess.run(["node", os.path.join(HERE, "..", "..", "scripts", "ort_run.js"), manifest], env=env, check=True)
    for key, job, expected in jobs:
        res[key] = verdict(job, expected)
    version = json.load(open(os.path.join(mod, "onnxruntime-node", "package.json")))["version"]
    with open(a.out, "w") as f:
        f.write(f"# ONNX Runtime {version} (onnxruntime-node, CPU) over the ONNX backend test data; generated by "
                "tests/conformance/ort_reference.py: CASE VERDICT REASON\n")
        for k in sorted(res):
            f.write(f"{k} {res[k][0]} {res[k][1]}".rstrip() + "\n")
    for s in a.suites.split(","):
        n = [v for k, (v, _) in res.items() if k.startswith(s + "/")]
        print(f"{s}: ONNX Runtime passes {n.count('pass')} / {len(n)} (not run: {n.count('not-run')})")


if __name__ == "__main__":
    main()
