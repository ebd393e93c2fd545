"""onnx2ggml from Python, with ONNX Runtime's interface.

    import onnx2ggml as ort          # was: import onnxruntime as ort
    sess = ort.InferenceSession("model.onnx")
    name = sess.get_inputs()[0].name
    (y,) = sess.run(None, {name: x})

InferenceSession(path_or_bytes, sess_options=None, providers=None, *, backend="auto", threads=0,
weights="f32", ...) runs the model on a ggml backend (the same engine as `onnx2ggml run`: dynamic
dims bound from the feeds, specializations cached). `providers` and `sess_options` are accepted
for ONNX Runtime compatibility and ignored, except that "CUDAExecutionProvider" asks for the
"cuda" backend. Errors raise onnx2ggml.Error (a RuntimeError) whose exit_code is the CLI's.
"""
import numpy as _np

from ._onnx2ggml import Error, Model, Session, supported_operators, version
from ._onnx2ggml import compile as _compile
from ._onnx2ggml import inspect as _inspect
from ._onnx2ggml import quantize as _quantize

__all__ = ["InferenceSession", "NodeArg", "Error", "compile", "quantize", "inspect", "check", "version",
           "supported_operators", "get_available_providers"]
__version__ = version().split()[0]

# DType (onnx.TensorProto.DataType) -> ONNX Runtime's type string
_TYPE_NAMES = {
    1: "float", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64", 8: "string",
    9: "bool", 10: "float16", 11: "double", 12: "uint32", 13: "uint64", 16: "bfloat16",
}


class NodeArg:
    """A graph input or output as ONNX Runtime describes it: name, shape (ints; the dim's name, or
    None, where dynamic) and type ("tensor(float)")."""

    def __init__(self, info):
        name, dtype, shape, dim_names = info
        self.name = name
        self.type = "tensor(%s)" % _TYPE_NAMES.get(dtype, "undefined")
        self.shape = [d if d >= 0 else (dim_names[i] or None) for i, d in enumerate(shape)]

    def __repr__(self):
        return "NodeArg(name=%r, type=%r, shape=%r)" % (self.name, self.type, self.shape)


def get_available_providers():
    return ["CPUExecutionProvider"]


class InferenceSession:
    def __init__(self, path_or_bytes, sess_options=None, providers=None, provider_options=None, *,
                 backend="auto", threads=0, weights="f32", weight_rules=(), gguf="", max_memory=0,
                 optimize=True, disabled_passes=(), max_specializations=8, **kwargs):
        if kwargs:
            raise TypeError("InferenceSession: unknown argument(s) %s" % ", ".join(sorted(kwargs)))
        if providers and backend == "auto":
            first = providers[0][0] if isinstance(providers[0], tuple) else providers[0]
            if first == "CUDAExecutionProvider":
                backend = "cuda"
        # from a path the session loads the model itself and holds its only copy: the host weights are freed
        # once uploaded when no other signature can come (static shapes, no control inputs), as in `onnx2ggml run`
        if isinstance(path_or_bytes, (bytes, bytearray)):
            model = Model.from_bytes(bytes(path_or_bytes))
        else:
            model = str(path_or_bytes)
        self._session = Session(model, backend=backend, threads=threads, weights=weights,
                                weight_rules=list(weight_rules), gguf=gguf, max_memory=max_memory,
                                optimize=optimize, disabled_passes=list(disabled_passes),
                                max_specializations=max_specializations, release_host_weights=True)
        self._inputs = [NodeArg(i) for i in self._session.model.inputs]
        self._outputs = [NodeArg(o) for o in self._session.model.outputs]

    def get_inputs(self):
        return list(self._inputs)

    def get_outputs(self):
        return list(self._outputs)

    def get_providers(self):
        return ["CPUExecutionProvider"]

    def run(self, output_names, input_feed, run_options=None):
        """The outputs named (None: all, in the model's order) for the feeds {input name: array}."""
        if not isinstance(input_feed, dict):
            raise TypeError("run: input_feed must be a dict {input name: numpy array}")
        return self._session.run(input_feed, list(output_names or []))

    def stats(self):
        """The specialization cache's counters: runs, hits, misses, evictions, cached, specialize_ms,
        control_inputs."""
        return self._session.stats()

    def placement(self):
        """Where the latest run's nodes ran: {"backend", "nodes" (per backend), "ops" ({"backend/op": n}),
        "fallback" ([(value, op, backend)]: nodes the device could not run), "splits", "copies", "copy_bytes"}."""
        return self._session.placement()

    @property
    def backend(self):
        return self._session.backend


def compile(path, out_dir, input_shapes=None, weights="f32", weight_rules=(), optimize=True, dims=None):
    """`onnx2ggml compile`: writes the standalone ggml program of the model into out_dir; returns
    {"lines", "weights", "weight_bytes"}. dims: {symbolic dim name: [values]} (`--dim`): the program then reads
    those dims from its inputs at run time."""
    shapes = {k: [int(d) for d in v] for k, v in (input_shapes or {}).items()}
    dyn = {k: [int(d) for d in v] for k, v in (dims or {}).items()}
    return _compile(str(path), str(out_dir), shapes, weights, list(weight_rules), optimize, dyn)


def quantize(path, out_gguf, weights, weight_rules=(), input_shapes=None):
    """`onnx2ggml quantize`: the model's weights stored as `weights` (q8_0, q4_K, f16, ...; rules "REGEX=TYPE" first)
    into out_gguf, which InferenceSession(..., gguf=out_gguf) and compile take as they are; returns
    {"weights", "bytes", "types": {ggml type: tensors}}."""
    shapes = {k: [int(d) for d in v] for k, v in (input_shapes or {}).items()}
    return _quantize(str(path), str(out_gguf), weights, list(weight_rules), shapes)


def inspect(path, input_shapes=None, ggml_ops=False):
    """`onnx2ggml inspect`: {"producer", "opsets", "nodes", "parameters", "inputs", "outputs", "op_histogram",
    "unsupported" ([(node, op_type, opset, reason)]: empty when the model runs), "shape_error", "ggml_ops"}."""
    shapes = {k: [int(d) for d in v] for k, v in (input_shapes or {}).items()}
    r = _inspect(str(path), shapes, ggml_ops)
    r["inputs"] = [NodeArg(i) for i in r["inputs"]]
    r["outputs"] = [NodeArg(o) for o in r["outputs"]]
    return r


def check(path, feeds, expected, rtol=1e-3, atol=1e-7, **session_args):
    """`onnx2ggml check`: runs the model on feeds and compares each output with expected
    ({output name: array}) as numpy.testing.assert_allclose does (|got - ref| <= atol + rtol*|ref|).
    Returns {name: max abs error}; raises onnx2ggml.Error (exit_code 1) on a mismatch."""
    sess = InferenceSession(path, **session_args)
    names = list(expected)
    outs = sess.run(names, feeds)
    report, bad = {}, []
    for name, got in zip(names, outs):
        ref = _np.asarray(expected[name])
        if got.shape != ref.shape:
            bad.append("%s: shape %s, expected %s" % (name, got.shape, ref.shape))
            continue
        if got.dtype.kind in "fc" or ref.dtype.kind in "fc":
            err = _np.abs(got.astype(_np.float64) - ref.astype(_np.float64))
            report[name] = float(err.max()) if err.size else 0.0
            over = err > atol + rtol * _np.abs(ref.astype(_np.float64))
            if over.any():
                bad.append("%s: %d of %d elements off (max abs error %g)" % (name, int(over.sum()), err.size,
                                                                          report[name]))
        else:
            same = _np.array_equal(got, ref)
            report[name] = 0.0 if same else float("inf")
            if not same:
                bad.append("%s: values differ" % name)
    if bad:
        e = Error("%s: outputs differ from the reference: %s" % (path, "; ".join(bad)))
        e.exit_code = 1
        raise e
    return report
