"""The `quant` label (issue 16): --weights TYPE, --weights-rule, `quantize` and --gguf on the tiny models of
make_models.py. For each TYPE in q8_0, q4_0, q4_K, f16:
  - `quantize` then `run --gguf` gives outputs bit-identical to `run --weights TYPE`;
  - the program `compile --weights TYPE` writes (one build; each TYPE's model.gguf) is bit-identical to run;
  - the error against the float64 numpy reference, relative to max|ref|, is within the bound stated in BOUND
    (and above 1e-5 for the MLP output: the weights really are stored in that type), the convolution output
    (small kernel: f32 by the default rule) within 1e-5.
Robustness: a GGUF for another model (sizes, names) or with other types, a rule naming nothing (a warning,
exit 0), an unknown type and a bad regex (exit 2).
usage: quant_test.py ONNX2GGML WORKDIR"""
import os
import shutil
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
# max|got - ref| / max|ref| on the MLP output (measured: f16 3.4e-4, q8_0 6.9e-3, q4_0 0.127, q4_K 0.093)
BOUND = {"f16": 2e-3, "q8_0": 2e-2, "q4_0": 0.25, "q4_K": 0.2}
fails = []


def sh(cmd, want=0, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if want is not None and r.returncode != want:
        sys.exit(f"FAIL: {' '.join(cmd)}: exit {r.returncode} (want {want})\n{r.stdout}\n{r.stderr}")
    return r


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        fails.append(what)


def outs(d):
    return [np.load(os.path.join(d, f"output_{k}.npy")) for k in range(2)]


def same(a, b):
    return all(x.shape == y.shape and np.array_equal(x.view(np.uint32), y.view(np.uint32)) for x, y in zip(a, b))


def main():
    bin_, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    sh([sys.executable, os.path.join(HERE, "make_models.py"), work])
    m = os.path.join(work, "mlp.onnx")
    ins = ["--input", f"x={work}/x.npy", "--input", f"img={work}/img.npy"]
    common = ins + ["--backend", "cpu", "--threads", "2"]
    refs = [np.load(os.path.join(work, "ref_y.npy")), np.load(os.path.join(work, "ref_c.npy"))]
    runs = {}
    for t in BOUND:
        d_run, d_gg = os.path.join(work, "run_" + t), os.path.join(work, "gguf_" + t)
        sh([bin_, "run", m, *common, "--weights", t, "--output-dir", d_run])
        q = sh([bin_, "quantize", m, "-o", os.path.join(work, t + ".gguf"), "--weights", t])
        check(f"{t}: 2" in q.stdout, f"{t}: quantize stores the two big MatMul/Gemm weights as {t}: {q.stdout.strip()}")
        sh([bin_, "run", m, *common, "--gguf", os.path.join(work, t + ".gguf"), "--output-dir", d_gg])
        runs[t] = outs(d_run)
        check(same(runs[t], outs(d_gg)), f"{t}: run --gguf bit-identical to run --weights {t}")
        e = [float(np.abs(g - r).max() / np.abs(r).max()) for g, r in zip(runs[t], refs)]
        check(1e-5 < e[0] <= BOUND[t], f"{t}: MLP error {e[0]:.3g} of max|ref| (bound {BOUND[t]}, above 1e-5)")
        check(e[1] <= 1e-5, f"{t}: convolution error {e[1]:.3g} of max|ref| (bound 1e-5)")

    # compiled programs: one build (model.cpp does not depend on the weights' types), each TYPE's GGUF
    gens = {}
    for t in BOUND:
        gens[t] = os.path.join(work, "gen_" + t)
        sh([bin_, "compile", m, "-o", gens[t], "--weights", t])
    built, prog = None, None
    for t in BOUND:
        src = open(os.path.join(gens[t], "model.cpp")).read()
        if built is None or src != built[1]:
            gen = gens[t]
            env = dict(os.environ, CCACHE_DIR=os.path.join(os.path.dirname(os.path.abspath(work)), "ccache"), CCACHE_NOHASHDIR="1")
            cfg = ["cmake", "-S", gen, "-B", os.path.join(gen, "build"), "-DCMAKE_BUILD_TYPE=Release", "-DO2G_ONEDNN=OFF"]
            if shutil.which("ccache"):
                cfg += ["-DCMAKE_C_COMPILER_LAUNCHER=ccache", "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"]
            sh(cfg, env=env)
            sh(["cmake", "--build", os.path.join(gen, "build"), "-j", "2"], env=env)
            built, prog = (t, src), os.path.join(gen, "build", "model")
        d = os.path.join(work, "compiled_" + t)
        sh([prog, *common, "--weights", os.path.join(gens[t], "model.gguf"), "--output-dir", d])
        check(same(runs[t], outs(d)), f"{t}: compiled program bit-identical to run --weights {t}")
    # compile's model.gguf is read by run --gguf too
    d = os.path.join(work, "gguf_compiled")
    sh([bin_, "run", m, *common, "--gguf", os.path.join(gens["q4_K"], "model.gguf"), "--output-dir", d])
    check(same(runs["q4_K"], outs(d)), "compile's model.gguf: run --gguf bit-identical to run --weights q4_K")

    # rules: first match wins, explicit rules over the default, rules applied on top of --weights
    d = os.path.join(work, "rules")
    r = sh([bin_, "quantize", m, "-o", os.path.join(work, "rules.gguf"), "--weights", "q8_0", "--weights-rule", "layer2=q4_K",
            "--weights-rule", "layer=f16", "--weights-rule", "proj=q4_0"])
    check("f16: 1" in r.stdout and "q4_K: 1" in r.stdout and "q4_0: 1" in r.stdout, f"rules: layer1 f16, layer2 q4_K, proj q4_0: {r.stdout.strip()}")
    sh([bin_, "run", m, *common, "--gguf", os.path.join(work, "rules.gguf"), "--output-dir", d])
    sh([bin_, "run", m, *common, "--weights", "q8_0", "--weights-rule", "layer2=q4_K", "--weights-rule", "layer=f16",
        "--weights-rule", "proj=q4_0", "--output-dir", d + "_run"])
    check(same(outs(d), outs(d + "_run")), "rules: run --gguf (rules recorded in the GGUF) bit-identical to run with the rules")

    # a convolution kernel: f32 under --weights q8_0 (default rule), quantized when a rule names it (im2col and a
    # quantized matrix product: ops/conv.cpp); both against the float64 reference
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    sys.path.insert(0, HERE)
    from make_models import conv2d
    rng = np.random.default_rng(5)
    ck = (rng.standard_normal((16, 32, 3, 3)) / 17).astype(np.float32)  # rows of 32*3*3 = 288 = 9 blocks of 32
    cb = (0.1 * rng.standard_normal(16)).astype(np.float32)
    img = rng.standard_normal((2, 32, 9, 7)).astype(np.float32)
    g = helper.make_graph([helper.make_node("Conv", ["img", "qconv.weight", "qconv.bias"], ["c"], pads=[1, 1, 1, 1])],
                          "qconv", [helper.make_tensor_value_info("img", TensorProto.FLOAT, list(img.shape))],
                          [helper.make_tensor_value_info("c", TensorProto.FLOAT, [2, 16, 9, 7])],
                          [numpy_helper.from_array(ck, "qconv.weight"), numpy_helper.from_array(cb, "qconv.bias")])
    cm = os.path.join(work, "qconv.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), cm)
    np.save(os.path.join(work, "qimg.npy"), img)
    cref = conv2d(img.astype(np.float64), ck.astype(np.float64), cb.astype(np.float64))
    cin = ["--input", f"img={work}/qimg.npy", "--threads", "2"]
    for backend in ("cpu", "auto"):
        errs = {}
        for rule in ([], ["--weights-rule", "qconv=q8_0"]):
            d = os.path.join(work, f"qconv_{backend}_{len(rule)}")
            sh([bin_, "run", cm, *cin, "--backend", backend, "--weights", "q8_0", *rule, "--output-dir", d])
            errs[bool(rule)] = float(np.abs(np.load(os.path.join(d, "output_0.npy")) - cref).max() / np.abs(cref).max())
        check(errs[False] <= 1e-5, f"conv kernel under --weights q8_0 stays f32 ({backend}): error {errs[False]:.3g} (bound 1e-5)")
        check(1e-5 < errs[True] <= BOUND["q8_0"],
              f"conv kernel ruled q8_0 ({backend}): error {errs[True]:.3g} (bound {BOUND['q8_0']}, above 1e-5)")
    q = sh([bin_, "quantize", cm, "-o", os.path.join(work, "qconv.gguf"), "--weights", "q8_0", "--weights-rule", "qconv=q8_0"])
    check("q8_0: 1" in q.stdout, f"quantize stores the ruled conv kernel as q8_0: {q.stdout.strip()}")
    d = os.path.join(work, "qconv_gguf")
    sh([bin_, "run", cm, *cin, "--backend", "cpu", "--gguf", os.path.join(work, "qconv.gguf"), "--output-dir", d])
    check(same([np.load(os.path.join(d, "output_0.npy"))], [np.load(os.path.join(work, "qconv_cpu_2", "output_0.npy"))]),
          "ruled q8_0 conv: run --gguf bit-identical to run --weights-rule")

    # a model without weights: its GGUF holds no tensors (and no transposition array) and reads back
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "noweights", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 5])])
    nw = os.path.join(work, "noweights.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), nw)
    xin = os.path.join(work, "x35.npy")
    np.save(xin, np.linspace(-1, 1, 15, dtype=np.float32).reshape(3, 5))
    r = sh([bin_, "quantize", nw, "-o", os.path.join(work, "noweights.gguf"), "--weights", "q8_0"])
    sh([bin_, "run", nw, "--input", f"x={xin}", "--gguf", os.path.join(work, "noweights.gguf"), "--output-dir", os.path.join(work, "nw")])
    got = np.load(os.path.join(work, "nw", "output_0.npy"))
    check(np.array_equal(got, np.maximum(np.load(xin), 0)), "a model without weights: quantize, then run --gguf reads the empty GGUF")

    # robustness
    g8 = os.path.join(work, "q8_0.gguf")
    r = sh([bin_, "run", m, *ins, "--gguf", g8, "--weights", "q4_0"], want=2)
    check(g8 in r.stderr and "layer1.weight" in r.stderr and "q8_0" in r.stderr, "GGUF of other types (--weights q4_0): exit 2 naming file and tensor: " + r.stderr.strip())
    tampered = os.path.join(work, "tampered.gguf")  # the recorded rules say q4_0, the tensors are q8_0
    data = open(g8, "rb").read()
    key = b"onnx2ggml.weights"
    at = data.index(key) + len(key) + 4 + 8  # value type (u32), string length (u64)
    assert data[at:at + 4] == b"q8_0"
    open(tampered, "wb").write(data[:at] + b"q4_0" + data[at + 4:])
    r = sh([bin_, "run", m, *ins, "--gguf", tampered], want=2)
    check(tampered in r.stderr and "layer1.weight" in r.stderr, "GGUF whose tensor types disagree with its rules: exit 2: " + r.stderr.strip())
    for other, name in [("mlp_sizes.onnx", "layer1.weight"), ("mlp_names.onnx", "head.weight")]:
        o_ins = ["--input", f"x={work}/x.npy", "--input", f"img={work}/img.npy"]
        r = sh([bin_, "run", os.path.join(work, other), *o_ins, "--gguf", g8], want=2)
        check(g8 in r.stderr and name in r.stderr, f"GGUF for another model ({other}): exit 2 naming '{name}': " + r.stderr.strip())
    trunc = os.path.join(work, "truncated.gguf")
    open(trunc, "wb").write(data[:len(data) - 1000])
    r = sh([bin_, "run", m, *ins, "--gguf", trunc], want=2)
    check(trunc in r.stderr, "truncated GGUF: exit 2 naming the file: " + r.stderr.strip())
    r = sh([bin_, "run", m, *ins, "--weights", "q8_0", "--weights-rule", "nothing_like_this=q4_0"])
    check("nothing_like_this=q4_0" in r.stderr and "warning" in r.stderr, "a rule naming no initializer: warning, exit 0: " + r.stderr.strip())
    r = sh([bin_, "quantize", m, "-o", os.path.join(work, "x.gguf"), "--weights-rule", "zzz=q8_0"])
    check("zzz=q8_0" in r.stderr, "quantize: a rule naming no initializer: warning, exit 0")
    for args, what in [(["--weights", "q9_0"], "unknown --weights type"), (["--weights-rule", "layer1=q9_0"], "unknown rule type"),
                       (["--weights-rule", "(layer1=q8_0"], "bad regex"), (["--weights-rule", "layer1"], "rule without =TYPE")]:
        for cmd in (["run", m, *ins], ["quantize", m, "-o", os.path.join(work, "y.gguf")]):
            r = sh([bin_, *cmd, *args], want=2)
            check("error:" in r.stderr and (args[1] in r.stderr or args[1].split("=")[-1] in r.stderr), f"{cmd[0]} {what}: exit 2: " + r.stderr.strip())
    print("PASS" if not fails else f"FAIL ({len(fails)})")
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
