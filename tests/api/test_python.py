"""The Python module (python/onnx2ggml, ONNX Runtime's interface), run by pytest from ctest (label api).

InferenceSession's outputs are the CLI's bit for bit (resnet18, the SD VAE decoder) and within 1e-4
of max|ref| of ONNX Runtime's (onnxruntime-node on the same inputs); dynamic dims and control inputs
specialize per signature; bad feeds raise onnx2ggml.Error naming the input; sessions on two threads
give what they give one after another; compile() and check().
Environment: O2G_CLI, O2G_MODELS (test-models), O2G_SD (sd-models), O2G_WORK (scratch), PYTHONPATH
reaching the built module (build/python).
"""
import json
import os
import subprocess
import sys
import threading

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import onnx2ggml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLI = os.environ["O2G_CLI"]
MODELS = os.environ["O2G_MODELS"]
SD = os.environ["O2G_SD"]
WORK = os.environ["O2G_WORK"]
NODE_MODULES = os.path.join(ROOT, "bench", "node_modules")

CASES = {  # name: (model folder, input file, input name)
    "resnet18": (os.path.join(MODELS, "resnet18"), "input.npy", "input"),
    "vae_decoder": (os.path.join(SD, "vae_decoder"), "in_latent.npy", "latent"),
}


def cli_outputs(name):
    folder, infile, inname = CASES[name]
    out = os.path.join(WORK, "py_cli_" + name)
    subprocess.run([CLI, "run", os.path.join(folder, "model.onnx"), "--input",
                    "%s=%s" % (inname, os.path.join(folder, infile)), "--threads", "2", "--output-dir", out],
                   check=True, stderr=subprocess.DEVNULL)
    files = json.load(open(os.path.join(out, "outputs.json")))
    return [np.load(os.path.join(out, f)) for f in files.values()]


def ort_outputs(name):
    folder, infile, inname = CASES[name]
    out = os.path.join(WORK, "py_ort_" + name)
    os.makedirs(out, exist_ok=True)
    manifest = os.path.join(WORK, "py_ort_%s.json" % name)
    json.dump([{"model": os.path.join(folder, "model.onnx"),
                "sets": [{"inputs": {inname: os.path.join(folder, infile)}, "outdir": out}]}], open(manifest, "w"))
    subprocess.run(["node", os.path.join(ROOT, "scripts", "ort_run.js"), manifest],
                   env=dict(os.environ, NODE_PATH=NODE_MODULES), check=True)
    assert not os.path.exists(os.path.join(out, "error.txt")), open(os.path.join(out, "error.txt")).read()
    return [np.load(os.path.join(out, "output_0.npy"))]


def session_outputs(name, **kw):
    folder, infile, inname = CASES[name]
    sess = onnx2ggml.InferenceSession(os.path.join(folder, "model.onnx"), threads=2, **kw)
    assert [i.name for i in sess.get_inputs()] == [inname]
    return sess.run(None, {inname: np.load(os.path.join(folder, infile))})


@pytest.mark.parametrize("name", sorted(CASES))
def test_inference_session_equals_cli_bit_for_bit(name):
    got, ref = session_outputs(name), cli_outputs(name)
    assert len(got) == len(ref)
    for g, r in zip(got, ref):
        assert g.dtype == r.dtype and g.shape == r.shape
        assert g.tobytes() == r.tobytes(), "%s: not bit for bit the CLI's output" % name


@pytest.mark.skipif(not os.path.isdir(os.path.join(NODE_MODULES, "onnxruntime-node")),
                    reason="onnxruntime-node not installed (scripts/setup.sh --bench)")
@pytest.mark.parametrize("name", sorted(CASES))
def test_inference_session_agrees_with_onnx_runtime(name):
    got, ref = session_outputs(name), ort_outputs(name)
    for g, r in zip(got, ref):
        scale = float(np.abs(r).max())
        err = float(np.abs(g.astype(np.float64) - r).max())
        assert err <= 1e-4 * scale, "%s: max abs error %g > 1e-4 of max|ref| %g" % (name, err, scale)


def dynamic_model(path):
    """Y = Relu(X @ W) with X [batch, 3], and Z = If(flag != 0, Y * 2, Y - 1): a dynamic dim and a control input."""
    w = helper.make_tensor("W", TensorProto.FLOAT, [3, 4], np.arange(12, dtype=np.float32) / 10 - 0.5)
    two = helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])
    one = helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])
    then_g = helper.make_graph([helper.make_node("Mul", ["Y", "two"], ["t"])], "then", [],
                               [helper.make_tensor_value_info("t", TensorProto.FLOAT, None)])
    else_g = helper.make_graph([helper.make_node("Sub", ["Y", "one"], ["e"])], "else", [],
                               [helper.make_tensor_value_info("e", TensorProto.FLOAT, None)])
    nodes = [helper.make_node("MatMul", ["X", "W"], ["XW"]), helper.make_node("Relu", ["XW"], ["Y"]),
             helper.make_node("Cast", ["flag"], ["cond"], to=TensorProto.BOOL),
             helper.make_node("If", ["cond"], ["Z"], then_branch=then_g, else_branch=else_g)]
    g = helper.make_graph(nodes, "dyn",
                          [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["batch", 3]),
                           helper.make_tensor_value_info("flag", TensorProto.INT64, [])],
                          [helper.make_tensor_value_info("Z", TensorProto.FLOAT, ["batch", 4]),
                           helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["batch", 4])], [w, two, one])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(m, path)
    return np.arange(12, dtype=np.float32).reshape(3, 4) / 10 - 0.5


def test_dynamic_dims_and_control_inputs_specialize_per_signature():
    os.makedirs(WORK, exist_ok=True)
    path = os.path.join(WORK, "py_dynamic.onnx")
    w = dynamic_model(path)
    sess = onnx2ggml.InferenceSession(path)
    ins, outs = sess.get_inputs(), sess.get_outputs()
    assert [(i.name, i.shape, i.type) for i in ins] == [("X", ["batch", 3], "tensor(float)"),
                                                        ("flag", [], "tensor(int64)")]
    assert [(o.name, o.shape) for o in outs] == [("Z", ["batch", 4]), ("Y", ["batch", 4])]
    rng = np.random.default_rng(0)
    for batch, flag in [(2, 1), (5, 1), (2, 0), (2, 1)]:
        x = rng.standard_normal((batch, 3)).astype(np.float32)
        y = np.maximum(x @ w, 0)
        z, y_got = sess.run(None, {"X": x, "flag": np.array(flag, dtype=np.int64)})
        np.testing.assert_allclose(y_got, y, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(z, y * 2 if flag else y - 1, rtol=1e-6, atol=1e-6)
        (only_y,) = sess.run(["Y"], {"X": x, "flag": np.array(flag, dtype=np.int64)})
        assert only_y.tobytes() == y_got.tobytes()
    st = sess.stats()
    assert st["misses"] == 3 and st["hits"] == 5 and st["runs"] == 8, st
    assert st["control_inputs"] == ["flag"], st


def test_memory_budget_evicts_older_specializations():
    """--max-memory is the process's: a new signature that would take the process above it first drops the least
    recently used specializations, and fails (exit 2, naming the limit) only when alone it does not fit. Batch 10^6:
    a specialization holds X, the outputs Y and Z and perhaps XW, 44-60 MB; two never fit in 75 MB. In a fresh
    interpreter: the budget is process-wide and sessions of the other tests must not count."""
    os.makedirs(WORK, exist_ok=True)
    path = os.path.join(WORK, "py_budget.onnx")
    w = dynamic_model(path)
    code = """
import sys, numpy as np, onnx2ggml
path, w = sys.argv[1], np.load(sys.argv[2])
sess = onnx2ggml.InferenceSession(path, threads=2, max_memory=75 << 20)
x = np.random.default_rng(0).standard_normal((1000000, 3)).astype(np.float32)
y = np.maximum(x @ w, 0)
for flag in (1, 0, 1):
    z, y_got = sess.run(None, {"X": x, "flag": np.array(flag, dtype=np.int64)})
    np.testing.assert_allclose(y_got, y, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(z, y * 2 if flag else y - 1, rtol=1e-5, atol=1e-5)
st = sess.stats()
assert st["misses"] == 3 and st["evictions"] == 2, st
try:
    sess.run(None, {"X": np.zeros((3000000, 3), np.float32), "flag": np.array(1, dtype=np.int64)})
    raise SystemExit("a 180 MB specialization ran in a 75 MB budget")
except onnx2ggml.Error as e:
    assert e.exit_code == 2 and "--max-memory" in str(e), str(e)
print("ok")
"""
    wpath = os.path.join(WORK, "py_budget_w.npy")
    np.save(wpath, w)
    r = subprocess.run([sys.executable, "-c", code, path, wpath], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr


def test_bad_feeds_raise_errors_naming_the_input():
    sess = onnx2ggml.InferenceSession(os.path.join(MODELS, "tinycnn", "model.onnx"))
    name, shape = sess.get_inputs()[0].name, sess.get_inputs()[0].shape
    x = np.zeros(shape, dtype=np.float32)
    bad = [({"nope": x}, "'nope' is not an input"), ({name: x.astype(np.float64)}, "'%s'" % name),
           ({name: x[..., :-1]}, "'%s'" % name), ({}, "no value for input '%s'" % name),
           ({name: np.zeros(shape, dtype=np.complex64)}, "'%s'" % name)]
    for feeds, text in bad:
        with pytest.raises(onnx2ggml.Error) as e:
            sess.run(None, feeds)
        assert e.value.exit_code == 2 and text in str(e.value), str(e.value)
    with pytest.raises(onnx2ggml.Error) as e:
        sess.run(["nope"], {name: x})
    assert "'nope' is not an output" in str(e.value)
    with pytest.raises(TypeError):
        sess.run(None, [x])
    with pytest.raises(onnx2ggml.Error) as e:
        onnx2ggml.InferenceSession(os.path.join(WORK, "missing.onnx"))
    assert e.value.exit_code == 2 and "missing.onnx" in str(e.value)
    with pytest.raises(onnx2ggml.Error) as e:
        onnx2ggml.InferenceSession(b"not a model")
    assert e.value.exit_code == 2
    with pytest.raises(onnx2ggml.Error) as e:
        onnx2ggml.InferenceSession(os.path.join(MODELS, "tinycnn", "model.onnx"), weights="q3_z")
    assert e.value.exit_code == 2
    # a non-contiguous feed is made contiguous, not misread
    big = np.zeros([s * 2 if i == 0 else s for i, s in enumerate(shape)], dtype=np.float32)
    big[::2] = np.random.default_rng(1).standard_normal(shape)
    a = sess.run(None, {name: big[::2]})[0]
    b = sess.run(None, {name: np.ascontiguousarray(big[::2])})[0]
    assert a.tobytes() == b.tobytes()


def test_two_sessions_on_two_threads_equal_one_after_another():
    names = ["resnet18", "mobilenet_v2"]
    feeds = {m: np.load(os.path.join(MODELS, m, "input.npy")) for m in names}
    sessions = {m: onnx2ggml.InferenceSession(os.path.join(MODELS, m, "model.onnx"), threads=1) for m in names}
    seq = {m: sessions[m].run(None, {sessions[m].get_inputs()[0].name: feeds[m]})[0] for m in names}
    got = {}

    def work(m):
        for _ in range(3):
            got.setdefault(m, []).append(sessions[m].run(None, {sessions[m].get_inputs()[0].name: feeds[m]})[0])

    threads = [threading.Thread(target=work, args=(m,)) for m in names]
    [t.start() for t in threads]
    [t.join() for t in threads]
    for m in names:
        assert len(got[m]) == 3 and all(g.tobytes() == seq[m].tobytes() for g in got[m]), m


def test_objects_freed_mid_run_stay_alive_until_it_ends():
    path = os.path.join(MODELS, "resnet18", "model.onnx")
    x = np.load(os.path.join(MODELS, "resnet18", "input.npy"))
    ref = onnx2ggml.InferenceSession(path, threads=1).run(None, {"input": x})[0]
    sess = onnx2ggml.InferenceSession(path, threads=1)
    feed = {"input": x.copy()}
    result = []
    t = threading.Thread(target=lambda s=sess, f=feed: result.append(s.run(None, f)[0]))
    t.start()
    del sess, feed  # the running call holds its own references
    t.join()
    assert result and result[0].tobytes() == ref.tobytes()


def test_compile_and_check():
    folder = os.path.join(MODELS, "tinycnn")
    out = os.path.join(WORK, "py_compile_tinycnn")
    r = onnx2ggml.compile(os.path.join(folder, "model.onnx"), out)
    assert r["lines"] > 0 and r["weights"] > 0
    for f in ["model.cpp", "main.cpp", "CMakeLists.txt", "model.gguf"]:
        assert os.path.isfile(os.path.join(out, f)), f
    x, expected = np.load(os.path.join(folder, "input.npy")), np.load(os.path.join(folder, "expected.npy"))
    model = onnx.load(os.path.join(folder, "model.onnx"))
    inname, outname = model.graph.input[0].name, model.graph.output[0].name
    errs = onnx2ggml.check(os.path.join(folder, "model.onnx"), {inname: x}, {outname: expected}, rtol=1e-3, atol=1e-5)
    assert errs[outname] <= 1e-5 + 1e-3 * float(np.abs(expected).max())
    with pytest.raises(onnx2ggml.Error) as e:
        onnx2ggml.check(os.path.join(folder, "model.onnx"), {inname: x}, {outname: expected + 1.0})
    assert e.value.exit_code == 1 and outname in str(e.value)
    with pytest.raises(onnx2ggml.Error) as e:
        onnx2ggml.compile(os.path.join(WORK, "missing.onnx"), out)
    assert e.value.exit_code == 2


def test_the_gil_is_released_while_the_graph_computes():
    """A Python thread keeps running while another one's run() computes (the VAE decoder: seconds)."""
    folder, infile, inname = CASES["vae_decoder"]
    sess = onnx2ggml.InferenceSession(os.path.join(folder, "model.onnx"), threads=1)
    feeds = {inname: np.load(os.path.join(folder, infile))}
    sess.run(None, feeds)  # specialized: the timed run below is compute only
    import time
    t = threading.Thread(target=lambda: sess.run(None, feeds))
    start = time.perf_counter()
    t.start()
    last, gap = start, 0.0
    while t.is_alive():
        now = time.perf_counter()
        gap, last = max(gap, now - last), now
    t.join()
    took = time.perf_counter() - start
    assert took > 0.5, "the run took %.2f s: too short to tell" % took
    assert gap < 0.25 * took, "this thread stood still %.2f s of the run's %.2f s: the GIL was held" % (gap, took)


def test_a_session_of_a_path_frees_the_host_weights():
    """InferenceSession(path) holds the model's only copy, so a static model's host weights go once uploaded, as in
    `onnx2ggml run`; a Model the caller keeps holds them. VmRSS in fresh interpreters (large blocks from mmap:
    RSS follows what is live), resnet18's 45 MB of weights."""
    code = """
import ctypes, sys, numpy as np, onnx2ggml
ctypes.CDLL("libc.so.6").mallopt(-3, 1 << 20)  # M_MMAP_THRESHOLD
def rss_kb():
    return int([l for l in open("/proc/self/status") if l.startswith("VmRSS")][0].split()[1])
x = np.load(sys.argv[2])
onnx2ggml.InferenceSession(sys.argv[1], threads=2).run(None, {"input": x})  # warm-up: pools, caches
before = rss_kb()
if sys.argv[3] == "path":
    s = onnx2ggml.InferenceSession(sys.argv[1], threads=2)
    s.run(None, {"input": x})
else:
    m = onnx2ggml.Model.load(sys.argv[1])
    s = onnx2ggml.Session(m, threads=2, release_host_weights=True)
    s.run({"input": x}, [])
print(rss_kb() - before)
"""
    folder = os.path.join(MODELS, "resnet18")
    grown = {}
    for how in ("path", "model"):
        r = subprocess.run([sys.executable, "-c", code, os.path.join(folder, "model.onnx"),
                            os.path.join(folder, "input.npy"), how], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        grown[how] = int(r.stdout.strip())
    assert grown["path"] < grown["model"] - 10 * 1024, grown


def test_quantize_inspect_and_placement():
    folder = os.path.join(MODELS, "resnet18")
    model = os.path.join(folder, "model.onnx")
    gguf = os.path.join(WORK, "py_r18_q8.gguf")
    rep = onnx2ggml.quantize(model, gguf, "q8_0")
    assert rep["weights"] > 0 and rep["types"].get("q8_0", 0) >= 1, rep
    x = np.load(os.path.join(folder, "input.npy"))
    sess = onnx2ggml.InferenceSession(model, threads=2, gguf=gguf)
    (y,) = sess.run(None, {"input": x})
    out = os.path.join(WORK, "py_cli_r18_q8")
    subprocess.run([CLI, "run", model, "--input", "input=" + os.path.join(folder, "input.npy"), "--gguf", gguf,
                    "--threads", "2", "--output-dir", out], check=True, stderr=subprocess.DEVNULL)
    np.testing.assert_array_equal(y, np.load(os.path.join(out, "output_0.npy")))  # the CLI's bits
    p = sess.placement()  # (the quantized classifier's product: ggml's CPU kernels, beside the default backend's)
    assert sum(p["nodes"].values()) > 0 and all(op == "MUL_MAT" for _, op, _ in p["fallback"]), p
    info = onnx2ggml.inspect(model, ggml_ops=True)
    assert info["unsupported"] == [] and info["op_histogram"]["Conv"] == 20, info["op_histogram"]
    assert info["inputs"][0].shape == [1, 3, 224, 224] and info["ggml_ops"], info
    assert "Conv" in onnx2ggml.supported_operators()
    with pytest.raises(onnx2ggml.Error) as e:
        onnx2ggml.quantize(model, gguf, "q9_9")
    assert e.value.exit_code == 2 and "q9_9" in str(e.value)
