#!/usr/bin/env python3
"""Runs the ONNX backend test data (Debian's libonnx-testdata) through `onnx2ggml check`.

Every case goes through the full pipeline (load -> fold -> lower -> ggml CPU) and gets a verdict:
  pass         outputs match (numpy assert_allclose semantics, rtol 1e-3, atol 1e-7; integers exact)
  fail         numbers differ (exit 1)
  unsupported  a clear error, exit 3
  error        anything else: bad-input exit 2, crash, hang (time limit), exit without a verdict

usage: run_conformance.py ONNX2GGML [--suites node,...] [--expect FILE] [--update FILE] [--docs FILE] [--jobs N] [--reference host]
With --reference host, the outputs are those of `compare`'s host reference (every node computed by its host
evaluator, float32 as float64: `check TESTDIR --reference host`): the reference is itself checked against the
test data, with the same tolerances.
With --expect, exits 1 if a case listed there does not pass (regression) or any case crashes or hangs.
Inputs that an operator needs as compile-time values (Reshape's shape, Resize's scales, ...) are
frozen to the test set's values by `check` (as `--freeze` does): integer inputs, float scalars and
string tensors, never float tensors; the rest run on the device.
"""
import argparse
import collections
import concurrent.futures
import os
import subprocess
import sys

DATA = "/usr/share/libonnx-testdata/data"
SUITES = ["node", "pytorch-converted", "pytorch-operator", "simple"]
TIMEOUT = 60


FLOATS = {1, 10, 11, 16}  # float32, float16, float64, bfloat16


def load_model(model):
    import onnx  # Debian's python3-onnx (run with /usr/bin/python3)
    try:
        return onnx.load(model, load_external_data=False)
    except Exception:  # noqa: BLE001 - a model the old onnx package cannot read
        return None


def op_types(model):
    m = load_model(model)
    if m is None:
        return ["?"]
    ops = sorted({n.op_type for n in m.graph.node if n.op_type != "Constant"})
    return ops or ["Constant"]


def is_float_case(model):
    """Inputs and outputs are float tensors; integer/bool inputs only as shapes or indices (an
    operand other than a node's first)."""
    m = load_model(model)
    if m is None:
        return False
    inits = {t.name for t in m.graph.initializer}
    elem = lambda vi: vi.type.tensor_type.elem_type if vi.type.HasField("tensor_type") else 0  # noqa: E731
    if any(elem(o) not in FLOATS for o in m.graph.output):
        return False
    for vi in m.graph.input:
        if vi.name in inits or elem(vi) in FLOATS:
            continue
        if not vi.type.HasField("tensor_type"):
            return False
        if any(list(n.input).index(vi.name) == 0 for n in m.graph.node if vi.name in n.input):
            return False
    return True


def is_numeric_case(model):
    """Every graph input and output a float or integer tensor, at least one input a float."""
    m = load_model(model)
    if m is None:
        return False
    elem = lambda vi: vi.type.tensor_type.elem_type if vi.type.HasField("tensor_type") else 0  # noqa: E731
    nums = FLOATS | {2, 3, 4, 5, 6, 7, 12, 13}
    ins = [elem(v) for v in m.graph.input]
    return all(e in nums for e in ins + [elem(o) for o in m.graph.output]) and any(e in FLOATS for e in ins)


ORT_RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ort_results.txt")


def read_ort():
    """ONNX Runtime's verdict per case (tests/conformance/ort_reference.py), {} if not generated."""
    if not os.path.exists(ORT_RESULTS):
        return {}
    r = {}
    for line in open(ORT_RESULTS):
        if line.startswith("#"):
            r["#"] = line[1:].split(";")[0].strip()
            continue
        k, v, *why = line.rstrip("\n").split(" ", 2)
        r[k] = (v, why[0] if why else "")
    return r


def ORT_HEADER(ort):  # noqa: N802 - the results file's first line: which ONNX Runtime
    return ort.get("#", "ONNX Runtime").split(" over ")[0]


def run_case(bin_, suite, case, extra=()):
    d = os.path.join(DATA, suite, case)
    try:
        r = subprocess.run([bin_, "check", d, "--threads", "1", *extra], capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return "error", f"hang: no verdict within {TIMEOUT} s"
    out = (r.stdout + r.stderr).strip().splitlines()
    if r.returncode == 0 and out and out[-1] == "PASS":
        return "pass", ""
    if r.returncode == 1 and out and out[-1] == "FAIL":
        first = next((l for l in out if "FAIL" in l), "numbers differ")
        return "fail", first.strip()
    if r.returncode == 3:
        lines = [l.strip() for l in out if l.strip() and "frozen at compile time" not in l]
        why = lines[1] if len(lines) > 1 and lines[0].endswith(":") else (lines[0] if lines else "")
        return "unsupported", why.replace(os.path.join(DATA, suite, case) + "//model.onnx: ", "")
    if r.returncode < 0 or r.returncode > 128:
        return "error", f"crash (signal {-r.returncode if r.returncode < 0 else r.returncode - 128})"
    return "error", f"exit {r.returncode}: " + (out[0] if out else "no output")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin")
    ap.add_argument("--suites", default=",".join(SUITES))
    ap.add_argument("--expect")
    ap.add_argument("--update")
    ap.add_argument("--docs")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--reference", choices=["host"])
    a = ap.parse_args()
    extra = ["--reference", a.reference] if a.reference else []
    cases = [(s, c) for s in a.suites.split(",") for c in sorted(os.listdir(os.path.join(DATA, s)))]
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as ex:
        results = list(ex.map(lambda sc: run_case(a.bin, *sc, extra), cases))
    res = {f"{s}/{c}": r for (s, c), r in zip(cases, results)}

    table = collections.defaultdict(collections.Counter)
    for s in a.suites.split(","):
        for k, (v, _) in res.items():
            if k.startswith(s + "/"):
                table[s][v] += 1
    print("suite                 pass  fail  unsupported  error  total")
    for s, cnt in table.items():
        print(f"{s:20s} {cnt['pass']:5d} {cnt['fail']:5d} {cnt['unsupported']:12d} {cnt['error']:6d} {sum(cnt.values()):6d}")

    bad = 0
    if a.expect:
        expected = [l.strip() for l in open(a.expect) if l.strip() and not l.startswith("#")]
        for k in expected:
            if k in res and res[k][0] != "pass":
                print(f"REGRESSION: {k}: {res[k][0]}: {res[k][1]}")
                bad += 1
    for k, (v, why) in res.items():
        if v == "error" and (why.startswith("crash") or why.startswith("hang")):
            print(f"RUNNER FAILURE: {k}: {why}")
            bad += 1
    if a.update:
        with open(a.update, "w") as f:
            f.write("# cases that pass; a regression fails ctest (tests/conformance/run_conformance.py --update)\n")
            for k, (v, _) in sorted(res.items()):
                if v == "pass":
                    f.write(k + "\n")
    if a.docs:
        write_docs(a.docs, res, table)
    print(f"{sum(1 for v in res.values() if v[0] == 'pass')} passed, {bad} failed")
    sys.exit(1 if bad else 0)


def write_docs(path, res, table):
    per_op = collections.defaultdict(lambda: [0, 0])
    for k, (v, _) in res.items():
        suite, case = k.split("/", 1)
        if suite != "node":
            continue
        for op in op_types(os.path.join(DATA, suite, case, "model.onnx")):
            per_op[op][1] += 1
            per_op[op][0] += v == "pass"
    L = ["# ONNX conformance", "",
         "Generated by `tests/conformance/run_conformance.py --docs` (do not edit by hand) over Debian's "
         "`libonnx-testdata` (ONNX 1.12 backend test data). Each case runs through the full pipeline "
         "(load -> fold -> lower -> ggml CPU) and is compared with numpy's assert_allclose semantics, "
         "rtol 1e-3, atol 1e-7, integers exact. Inputs that an operator needs as compile-time values "
         "(Reshape's shape, Resize's scales, Slice's starts, a Loop's trip count, ...) are frozen to the test set's "
         "values, as `--freeze` does: integer inputs, float scalars and string tensors, never float tensors "
         "(onnx2ggml compiles static graphs).", "",
         "| suite | pass | fail | unsupported | error | total | ONNX Runtime passes |", "|---|---|---|---|---|---|---|"]
    ort = read_ort()
    ort_pass = lambda keys: sum(1 for k in keys if ort.get(k, ("",))[0] == "pass")  # noqa: E731
    for s, c in table.items():
        L.append(f"| {s} | {c['pass']} | {c['fail']} | {c['unsupported']} | {c['error']} | {sum(c.values())} | "
                 f"{ort_pass([k for k in res if k.startswith(s + '/')]) if ort else '-'} |")
    if ort:
        nr = sum(1 for k in res if ort.get(k, ("",))[0] == "not-run")
        L += ["", f"ONNX Runtime column: {ORT_HEADER(ort)}, run over the same folders with the same comparison by "
              f"`tests/conformance/ort_reference.py` (results in `tests/conformance/ort_results.txt`); {nr} cases cannot be "
              "given to it through its JavaScript API (sequence or optional inputs/outputs, bfloat16) and count as not passed."]
    fl = [k for k in res if k.startswith("node/") and is_float_case(os.path.join(DATA, k, "model.onnx"))]
    fp = sum(1 for k in fl if res[k][0] == "pass")
    L += ["", f"**node float cases** (inputs and outputs float tensors; integer or bool inputs only as a shape or "
          f"index operand, i.e. not a node's first input): **{fp} / {len(fl)}** pass"
          + (f" (ONNX Runtime: {ort_pass(fl)})" if ort else "") + ". The float cases that do not pass:", ""]
    L += [f"- {k}: {res[k][0]}: {res[k][1].replace('|', '/')[:160]}" for k in sorted(fl) if res[k][0] != "pass"]
    wide = [k for k in res if k.startswith("node/") and is_numeric_case(os.path.join(DATA, k, "model.onnx"))]
    wp = sum(1 for k in wide if res[k][0] == "pass")
    added = sorted(k for k in wide if k not in fl and res[k][0] != "pass")
    L += ["", f"A wider reading (every input and output a float or integer tensor, at least one input float): **{wp} / {len(wide)}** "
          f"pass" + (f" (ONNX Runtime: {ort_pass(wide)})" if ort else "") + f"; of the cases it adds to the list above, {len(added)} do not pass"
          + (": " + ", ".join(added) if added else ".")]
    if ort:
        theirs = sorted(k for k in res if ort.get(k, ("",))[0] == "pass" and res[k][0] != "pass")
        L += ["", f"**Cases ONNX Runtime passes and onnx2ggml does not: {len(theirs)}**" + (":" if theirs else "."), ""]
        L += [f"- {k}: {res[k][0]}: {res[k][1].replace('|', '/')[:160]}" for k in theirs]
    L += ["", "## Why the rest do not pass", "",
          "- **Training** (`ai.onnx.preview.training` Adagrad/Adam/Momentum, `simple/test_gradient_*`): out of scope for an "
          "inference compiler.",
          "- **Random** (Bernoulli, RandomUniformLike, Dropout in training mode with a ratio > 0): the reference values come "
          "from numpy's generator; no implementation can reproduce them.",
          "- (Strings pass: string tensors are host values, bound at compile time and folded; `check` freezes a string "
          "input, and the float input of a Cast to string, as `--freeze` would.)",
          "- **Sequence, optional or string graph inputs/outputs**: onnx2ggml resolves sequences at compile time "
          "(`src/ops/sequence.cpp`), so they cannot cross the graph boundary.",
          "- **test_cast_FLOAT_to_BFLOAT16**: ONNX 1.12's reference truncates to bfloat16; onnx2ggml rounds to nearest even, "
          "as PyTorch does (the difference is one bfloat16 ulp).",
          "- **test_castlike_\\*BFLOAT16\\***: the test data's `like` input has shape [1] where the model declares [3,4]; "
          "onnx2ggml rejects inputs of the wrong shape (exit 2) by design.",
          "", "## Node cases per operator", "", "| operator | passed / total |", "|---|---|"]
    for op in sorted(per_op):
        p, t = per_op[op]
        L.append(f"| {op} | {p} / {t} |")
    L += ["", "## Every case that does not pass, with its reason", "", "| case | verdict | reason | ONNX Runtime |", "|---|---|---|---|"]
    for k, (v, why) in sorted(res.items()):
        if v != "pass":
            L.append(f"| {k} | {v} | {why.replace('|', '/')[:200]} | {ort.get(k, ('-',))[0]} |")
    open(path, "w").write("\n".join(L) + "\n")


if __name__ == "__main__":
    main()
