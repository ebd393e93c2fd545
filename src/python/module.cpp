// The Python module's native part (_onnx2ggml), on the C++ API: Model, Session (numpy arrays in and
// out, the GIL released while the graph computes), compile, quantize, inspect, version, and onnx2ggml.Error
// carrying the CLI's exit code. python/onnx2ggml/__init__.py builds ONNX Runtime's interface on it.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <string>
#include <vector>

#include "onnx2ggml/onnx2ggml.hpp"

namespace py = pybind11;
using namespace onnx2ggml;

namespace {

py::object g_error_type;

[[noreturn]] void raise(ErrorCategory c, const std::string& msg) { throw Error(c, msg); }

// numpy dtype -> DType (0: not one onnx2ggml takes)
DType dtype_of(const py::dtype& d) {
    char k = d.kind();
    ssize_t n = d.itemsize();
    if (k == 'f') return n == 4 ? DType::Float : n == 8 ? DType::Double : n == 2 ? DType::Float16 : DType::Undefined;
    if (k == 'b') return DType::Bool;
    if (k == 'i')
        return n == 1   ? DType::Int8
               : n == 2 ? DType::Int16
               : n == 4 ? DType::Int32
               : n == 8 ? DType::Int64
                        : DType::Undefined;
    if (k == 'u')
        return n == 1   ? DType::UInt8
               : n == 2 ? DType::UInt16
               : n == 4 ? DType::UInt32
               : n == 8 ? DType::UInt64
                        : DType::Undefined;
    if (k == 'U' || k == 'S' || k == 'O') return DType::String;
    return DType::Undefined;
}

py::dtype numpy_dtype(DType t, const std::string& name) {
    switch (t) {
        case DType::Float: return py::dtype("float32");
        case DType::Double: return py::dtype("float64");
        case DType::Float16: return py::dtype("float16");
        case DType::Bool: return py::dtype("bool");
        case DType::Int8: return py::dtype("int8");
        case DType::Int16: return py::dtype("int16");
        case DType::Int32: return py::dtype("int32");
        case DType::Int64: return py::dtype("int64");
        case DType::UInt8: return py::dtype("uint8");
        case DType::UInt16: return py::dtype("uint16");
        case DType::UInt32: return py::dtype("uint32");
        case DType::UInt64: return py::dtype("uint64");
        default: raise(ErrorCategory::Unsupported, "output '" + name + "': numpy has no " + dtype_name(t) + " type");
    }
}

// One input: the array (C-contiguous, kept alive by `keep` while the run reads it in place)
struct Feed {
    py::array a;
    std::vector<std::string> strings;
    std::vector<const char*> ptrs;
    TensorRef ref;
};

void make_feed(Feed& f, const std::string& name, const py::handle& obj) {
    f.a = py::array::ensure(obj, py::array::c_style);
    if (!f.a) raise(ErrorCategory::BadInput, "input '" + name + "': not convertible to a numpy array");
    DType t = dtype_of(f.a.dtype());
    if (t == DType::Undefined)
        raise(ErrorCategory::BadInput,
              "input '" + name + "': numpy dtype " + py::str(f.a.dtype()).cast<std::string>() + " is not supported");
    f.ref.dtype = t;
    for (ssize_t d = 0; d < f.a.ndim(); ++d) f.ref.shape.push_back(f.a.shape(d));
    if (t == DType::String) {
        for (auto item : f.a.attr("ravel")()) {
            py::object o = py::reinterpret_borrow<py::object>(item);
            f.strings.push_back(py::isinstance<py::bytes>(o) ? o.cast<std::string>() : py::str(o).cast<std::string>());
        }
        for (auto& s : f.strings) f.ptrs.push_back(s.c_str());
        f.ref.data = f.ptrs.data();
    } else f.ref.data = f.a.data();
}

py::object to_numpy(const Tensor& t) {
    if (t.dtype() == DType::String) {
        std::vector<std::string> items = t.strings();
        py::list l;
        for (auto& s : items) l.append(py::str(s));
        return py::module_::import("numpy").attr("array")(l, "object").attr("reshape")(t.shape());
    }
    py::array a(numpy_dtype(t.dtype(), t.name()), t.shape());
    if (t.nbytes()) std::memcpy(a.mutable_data(), t.raw(), t.nbytes());
    return std::move(a);
}

py::list infos(const std::vector<TensorInfo>& v) {
    py::list r;
    for (auto& i : v) r.append(py::make_tuple(i.name, int(i.dtype), i.shape, i.dim_names));
    return r;
}

}  // namespace

PYBIND11_MODULE(_onnx2ggml, m) {
    m.doc() = "onnx2ggml's native module (use the onnx2ggml package: InferenceSession, compile, check)";
    g_error_type = py::reinterpret_steal<py::object>(
        PyErr_NewExceptionWithDoc("onnx2ggml.Error", "An onnx2ggml error; exit_code is the CLI's exit code for it.",
                                  PyExc_RuntimeError, nullptr));
    m.attr("Error") = g_error_type;
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const Error& e) {
            py::object exc = g_error_type(e.what());
            exc.attr("exit_code") = e.exit_code();
            PyErr_SetObject(g_error_type.ptr(), exc.ptr());
        }
    });

    py::class_<Model>(m, "Model")
        .def_static("load", &Model::load, py::arg("path"), py::call_guard<py::gil_scoped_release>())
        .def_static(
            "from_bytes",
            [](const py::bytes& b, const std::string& base_dir) {
                std::string s = b;
                py::gil_scoped_release nogil;
                return Model::from_bytes(s.data(), s.size(), base_dir);
            },
            py::arg("data"), py::arg("base_dir") = ".")
        .def_property_readonly("path", &Model::path)
        .def_property_readonly("inputs", [](const Model& mo) { return infos(mo.inputs()); })
        .def_property_readonly("outputs", [](const Model& mo) { return infos(mo.outputs()); });

    // Session(model: Model | path: str, backend=..., ...): a path makes the session load the model itself and
    // hold its only copy (release_host_weights then frees the host weights once uploaded, Session(path) in C++)
    py::class_<Session>(m, "Session")
        .def(py::init([](const py::object& model, const std::string& backend, int threads, const std::string& weights,
                         std::vector<std::string> weight_rules, const std::string& gguf, uint64_t max_memory,
                         bool optimize, std::vector<std::string> disabled_passes, size_t max_specializations,
                         bool release_host_weights) {
                 SessionOptions o;
                 o.backend = backend;
                 o.threads = threads;
                 o.weights = weights;
                 o.weight_rules = std::move(weight_rules);
                 o.gguf = gguf;
                 o.max_memory = max_memory;
                 o.optimize = optimize;
                 o.disabled_passes = std::move(disabled_passes);
                 o.max_specializations = max_specializations;
                 o.release_host_weights = release_host_weights;
                 if (py::isinstance<py::str>(model)) {
                     std::string path = model.cast<std::string>();
                     py::gil_scoped_release nogil;
                     return Session(path, o);
                 }
                 const Model& mo = model.cast<const Model&>();
                 py::gil_scoped_release nogil;
                 return Session(mo, o);
             }),
             py::arg("model"), py::arg("backend") = "auto", py::arg("threads") = 0, py::arg("weights") = "f32",
             py::arg("weight_rules") = std::vector<std::string>{}, py::arg("gguf") = "", py::arg("max_memory") = 0,
             py::arg("optimize") = true, py::arg("disabled_passes") = std::vector<std::string>{},
             py::arg("max_specializations") = 8, py::arg("release_host_weights") = false)
        .def_property_readonly("model", &Session::model)
        .def("placement",
             [](const Session& s) {
                 Placement p = s.placement();
                 py::dict d, ops;
                 d["backend"] = p.backend;
                 d["nodes"] = p.nodes;
                 for (auto& kv : p.ops) ops[py::str(kv.first.first + "/" + kv.first.second)] = kv.second;
                 d["ops"] = ops;
                 py::list fb;
                 for (auto& f : p.fallback) fb.append(py::make_tuple(f.name, f.op, f.backend));
                 d["fallback"] = fb;
                 d["splits"] = p.splits, d["copies"] = p.copies, d["copy_bytes"] = p.copy_bytes;
                 return d;
             })
        // run(feeds: dict name -> array, output_names: list or None) -> list of arrays
        .def(
            "run",
            [](Session& s, const py::dict& feeds, const std::vector<std::string>& output_names) {
                std::vector<Feed> keep(feeds.size());
                std::map<std::string, TensorRef> refs;
                size_t k = 0;
                for (auto kv : feeds) {
                    std::string name = py::str(kv.first);
                    make_feed(keep[k], name, kv.second);
                    refs[name] = keep[k++].ref;
                }
                std::vector<Tensor> outs;
                {
                    py::gil_scoped_release nogil;
                    outs = s.run(refs, output_names);
                }
                py::list r;
                for (auto& t : outs) r.append(to_numpy(t));
                return r;
            },
            py::arg("feeds"), py::arg("output_names") = std::vector<std::string>{})
        .def("stats",
             [](const Session& s) {
                 SessionStats st = s.stats();
                 py::dict d;
                 d["runs"] = st.runs, d["hits"] = st.hits, d["misses"] = st.misses, d["evictions"] = st.evictions;
                 d["cached"] = st.cached, d["specialize_ms"] = st.specialize_ms;
                 d["control_inputs"] = st.control_inputs;
                 return d;
             })
        .def_property_readonly("backend", &Session::backend);

    m.def(
        "compile",
        [](const std::string& path, const std::string& out_dir, std::map<std::string, std::vector<int64_t>> shapes,
           const std::string& weights, std::vector<std::string> weight_rules, bool optimize,
           std::map<std::string, std::vector<int64_t>> dims) {
            CompileOptions o;
            o.input_shapes = std::move(shapes);
            o.dims = std::move(dims);
            o.weights = weights;
            o.weight_rules = std::move(weight_rules);
            o.optimize = optimize;
            CompileReport r;
            {
                py::gil_scoped_release nogil;
                r = compile(path, out_dir, o);
            }
            py::dict d;
            d["lines"] = r.lines, d["weights"] = r.weights, d["weight_bytes"] = r.weight_bytes;
            return d;
        },
        py::arg("path"), py::arg("out_dir"), py::arg("input_shapes") = std::map<std::string, std::vector<int64_t>>{},
        py::arg("weights") = "f32", py::arg("weight_rules") = std::vector<std::string>{}, py::arg("optimize") = true,
        py::arg("dims") = std::map<std::string, std::vector<int64_t>>{});
    m.def(
        "quantize",
        [](const std::string& path, const std::string& out, const std::string& weights,
           std::vector<std::string> weight_rules, std::map<std::string, std::vector<int64_t>> shapes) {
            CompileOptions o;
            o.weights = weights;
            o.weight_rules = std::move(weight_rules);
            o.input_shapes = std::move(shapes);
            QuantizeReport r;
            {
                py::gil_scoped_release nogil;
                r = quantize(path, out, o);
            }
            py::dict d;
            d["weights"] = r.weights, d["bytes"] = r.bytes, d["types"] = r.types;
            return d;
        },
        py::arg("path"), py::arg("out_gguf"), py::arg("weights"), py::arg("weight_rules") = std::vector<std::string>{},
        py::arg("input_shapes") = std::map<std::string, std::vector<int64_t>>{});
    m.def(
        "inspect",
        [](const std::string& path, std::map<std::string, std::vector<int64_t>> shapes, bool ggml_ops) {
            InspectOptions o;
            o.graph.input_shapes = std::move(shapes);
            o.ggml_ops = ggml_ops;
            ModelReport r;
            {
                py::gil_scoped_release nogil;
                r = inspect(path, o);
            }
            py::dict d;
            d["producer"] = r.producer, d["opsets"] = r.opsets, d["nodes"] = r.nodes, d["parameters"] = r.parameters;
            d["inputs"] = infos(r.inputs), d["outputs"] = infos(r.outputs), d["op_histogram"] = r.op_histogram;
            py::list bad;
            for (auto& u : r.unsupported) bad.append(py::make_tuple(u.node, u.op_type, u.opset, u.reason));
            d["unsupported"] = bad, d["shape_error"] = r.shape_error, d["ggml_ops"] = r.ggml_ops;
            return d;
        },
        py::arg("path"), py::arg("input_shapes") = std::map<std::string, std::vector<int64_t>>{},
        py::arg("ggml_ops") = false);
    m.def("supported_operators", &supported_operators);
    m.def("version", &version);
}
