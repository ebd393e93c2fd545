// The C API (include/onnx2ggml/onnx2ggml.h) on the C++ one: each handle holds its C++ object, each
// call catches everything and turns it into a status and the thread's last error message.
#include "onnx2ggml/onnx2ggml.h"

#include <string>
#include <vector>

#include "api/api_internal.h"

using namespace onnx2ggml;

struct o2g_model {
    Model m;
};
struct o2g_options {
    SessionOptions o;
};
struct o2g_session {
    Session s;
    size_t n_outputs;
    o2g_model model;  // s.model(), for o2g_session_model
};
struct o2g_tensor {
    Tensor t;
    std::vector<std::string> strings;  // a string tensor's elements
};

namespace {

thread_local std::string last_error;

template <class F>
o2g_status guarded(F&& f) {
    last_error.clear();
    try {
        f();
        return O2G_OK;
    } catch (...) {
        try {
            rethrow_as_api_error();
        } catch (const Error& e) {
            last_error = e.what();
            return o2g_status(e.exit_code());
        }
    }
}

o2g_status bad(const std::string& msg) {
    last_error = msg;
    return O2G_BAD_INPUT;
}

o2g_status info(const std::vector<TensorInfo>& v, size_t i, const char** name, int* dtype, size_t* rank,
                const int64_t** dims) {
    last_error.clear();
    if (i >= v.size()) return bad("index " + std::to_string(i) + " out of range (" + std::to_string(v.size()) + ")");
    if (name) *name = v[i].name.c_str();
    if (dtype) *dtype = int(v[i].dtype);
    if (rank) *rank = v[i].shape.size();
    if (dims) *dims = v[i].shape.data();
    return O2G_OK;
}

o2g_tensor* new_tensor(Tensor t) {
    std::vector<std::string> strings = t.dtype() == DType::String ? t.strings() : std::vector<std::string>{};
    return new o2g_tensor{std::move(t), std::move(strings)};
}

o2g_session* new_session(Session s) {
    size_t n = s.model().outputs().size();
    Model m = s.model();
    return new o2g_session{std::move(s), n, o2g_model{std::move(m)}};
}

}  // namespace

extern "C" {

const char* o2g_version(void) { return version(); }
const char* o2g_last_error(void) { return last_error.c_str(); }

o2g_status o2g_model_load(const char* path, o2g_model** out) {
    if (!path || !out) return bad("o2g_model_load: NULL argument");
    return guarded([&] { *out = new o2g_model{Model::load(path)}; });
}

o2g_status o2g_model_load_bytes(const void* data, size_t size, const char* base_dir, o2g_model** out) {
    if (!out) return bad("o2g_model_load_bytes: NULL argument");
    return guarded([&] { *out = new o2g_model{Model::from_bytes(data, size, base_dir ? base_dir : ".")}; });
}

void o2g_model_free(o2g_model* model) { delete model; }
size_t o2g_model_input_count(const o2g_model* model) { return model ? model->m.inputs().size() : 0; }
size_t o2g_model_output_count(const o2g_model* model) { return model ? model->m.outputs().size() : 0; }

o2g_status o2g_model_input(const o2g_model* model, size_t i, const char** name, int* dtype, size_t* rank,
                           const int64_t** dims) {
    if (!model) return bad("o2g_model_input: NULL model");
    return info(model->m.inputs(), i, name, dtype, rank, dims);
}

o2g_status o2g_model_output(const o2g_model* model, size_t i, const char** name, int* dtype, size_t* rank,
                            const int64_t** dims) {
    if (!model) return bad("o2g_model_output: NULL model");
    return info(model->m.outputs(), i, name, dtype, rank, dims);
}

const char* o2g_model_input_dim_name(const o2g_model* model, size_t i, size_t d) {
    if (!model || i >= model->m.inputs().size() || d >= model->m.inputs()[i].dim_names.size()) return nullptr;
    return model->m.inputs()[i].dim_names[d].c_str();
}

o2g_options* o2g_options_create(void) { return new o2g_options{}; }
void o2g_options_free(o2g_options* options) { delete options; }

o2g_status o2g_options_set(o2g_options* options, const char* key, const char* value) {
    if (!options || !key || !value) return bad("o2g_options_set: NULL argument");
    std::string k = key, v = value;
    SessionOptions& o = options->o;
    auto number = [&](int64_t lo) {
        size_t used = 0;
        long long n = 0;
        try {
            n = std::stoll(v, &used);
        } catch (...) { used = 0; }
        if (used != v.size() || v.empty() || n < lo)
            throw Error(ErrorCategory::BadInput,
                        "option '" + k + "' takes a whole number >= " + std::to_string(lo) + ", not '" + v + "'");
        return n;
    };
    return guarded([&] {
        if (k == "backend") o.backend = v;
        else if (k == "threads") o.threads = int(number(0));
        else if (k == "weights") o.weights = v;
        else if (k == "weight_rule") o.weight_rules.push_back(v);
        else if (k == "gguf") o.gguf = v;
        else if (k == "max_memory") o.max_memory = parse_size(v);
        else if (k == "optimize") o.optimize = number(0) != 0;
        else if (k == "disable_pass") o.disabled_passes.push_back(v);
        else if (k == "max_specializations") o.max_specializations = size_t(number(1));
        else if (k == "release_host_weights") o.release_host_weights = number(0) != 0;
        else if (k == "verbose") o.verbose = number(0) != 0;
        else
            throw Error(ErrorCategory::BadInput,
                        "unknown option '" + k +
                            "' (backend, threads, weights, weight_rule, gguf, max_memory, optimize, disable_pass, "
                            "max_specializations, release_host_weights, verbose)");
    });
}

o2g_status o2g_session_create(const o2g_model* model, const o2g_options* options, o2g_session** out) {
    if (!model || !out) return bad("o2g_session_create: NULL argument");
    return guarded([&] { *out = new_session(Session(model->m, options ? options->o : SessionOptions{})); });
}

o2g_status o2g_session_load(const char* path, const o2g_options* options, o2g_session** out) {
    if (!path || !out) return bad("o2g_session_load: NULL argument");
    return guarded([&] { *out = new_session(Session(std::string(path), options ? options->o : SessionOptions{})); });
}

const o2g_model* o2g_session_model(const o2g_session* session) { return session ? &session->model : nullptr; }

void o2g_session_free(o2g_session* session) { delete session; }

o2g_status o2g_session_run(o2g_session* session, const o2g_tensor_ref* inputs, size_t n_inputs, o2g_tensor** outputs,
                           size_t n_outputs) {
    if (!session || (n_inputs && !inputs) || (n_outputs && !outputs)) return bad("o2g_session_run: NULL argument");
    if (n_outputs != session->n_outputs)
        return bad("o2g_session_run: the model has " + std::to_string(session->n_outputs) + " outputs, n_outputs is " +
                   std::to_string(n_outputs));
    return guarded([&] {
        bool named = n_inputs > 0 && inputs[0].name;
        std::vector<TensorRef> ordered;
        std::map<std::string, TensorRef> feeds;
        for (size_t k = 0; k < n_inputs; ++k) {
            const o2g_tensor_ref& r = inputs[k];
            if (bool(r.name) != named) throw Error(ErrorCategory::BadInput, "o2g_session_run: name all inputs or none");
            if (r.rank && !r.shape) throw Error(ErrorCategory::BadInput, "o2g_session_run: input without a shape");
            TensorRef t{DType(r.dtype), std::vector<int64_t>(r.shape, r.shape + r.rank), r.data};
            if (named && !feeds.emplace(r.name, t).second)
                throw Error(ErrorCategory::BadInput,
                            std::string("o2g_session_run: input '") + r.name + "' given twice");
            if (!named) ordered.push_back(t);
        }
        std::vector<Tensor> outs = named ? session->s.run(feeds) : session->s.run(ordered);
        std::vector<o2g_tensor*> made;
        for (auto& t : outs) made.push_back(new_tensor(t));
        for (size_t k = 0; k < made.size(); ++k) outputs[k] = made[k];
    });
}

o2g_status o2g_session_stats(const o2g_session* session, uint64_t* runs, uint64_t* hits, uint64_t* misses) {
    if (!session) return bad("o2g_session_stats: NULL session");
    return guarded([&] {
        SessionStats st = session->s.stats();
        if (runs) *runs = st.runs;
        if (hits) *hits = st.hits;
        if (misses) *misses = st.misses;
    });
}

namespace {
// compile's and quantize's options: the session options that apply, and the shapes binding dynamic dims
CompileOptions compile_options(const char* what, const o2g_tensor_ref* shapes, size_t n_shapes,
                               const o2g_options* options) {
    CompileOptions o;
    if (options) {
        o.weights = options->o.weights;
        o.weight_rules = options->o.weight_rules;
        o.gguf = options->o.gguf;
        o.max_memory = options->o.max_memory;
        o.optimize = options->o.optimize;
        o.disabled_passes = options->o.disabled_passes;
    }
    for (size_t k = 0; k < n_shapes; ++k) {
        const o2g_tensor_ref& r = shapes[k];
        if (!r.name || (r.rank && !r.shape))
            throw Error(ErrorCategory::BadInput, std::string(what) + ": a shape without a name or dims");
        o.input_shapes[r.name] = std::vector<int64_t>(r.shape, r.shape + r.rank);
    }
    return o;
}
}  // namespace

o2g_status o2g_compile(const char* model_path, const char* out_dir, const o2g_tensor_ref* shapes, size_t n_shapes,
                       const o2g_options* options) {
    if (!model_path || !out_dir || (n_shapes && !shapes)) return bad("o2g_compile: NULL argument");
    return guarded([&] { compile(model_path, out_dir, compile_options("o2g_compile", shapes, n_shapes, options)); });
}

o2g_status o2g_quantize(const char* model_path, const char* out_gguf, const o2g_tensor_ref* shapes, size_t n_shapes,
                        const o2g_options* options) {
    if (!model_path || !out_gguf || (n_shapes && !shapes)) return bad("o2g_quantize: NULL argument");
    return guarded([&] { quantize(model_path, out_gguf, compile_options("o2g_quantize", shapes, n_shapes, options)); });
}

o2g_status o2g_tensor_load_npy(const char* path, o2g_tensor** out) {
    if (!path || !out) return bad("o2g_tensor_load_npy: NULL argument");
    return guarded([&] { *out = new_tensor(load_npy(path)); });
}

o2g_status o2g_tensor_save_npy(const char* path, const o2g_tensor* t) {
    if (!path || !t) return bad("o2g_tensor_save_npy: NULL argument");
    return guarded([&] { save_npy(path, t->t); });
}

o2g_status o2g_tensor_copy(const o2g_tensor_ref* ref, o2g_tensor** out) {
    if (!ref || !out || (ref->rank && !ref->shape)) return bad("o2g_tensor_copy: NULL argument");
    return guarded([&] {
        TensorRef r{DType(ref->dtype), std::vector<int64_t>(ref->shape, ref->shape + ref->rank), ref->data};
        *out = new_tensor(Tensor::copy(r, ref->name ? ref->name : ""));
    });
}

const char* o2g_tensor_name(const o2g_tensor* t) { return t ? t->t.name().c_str() : nullptr; }
int o2g_tensor_dtype(const o2g_tensor* t) { return t ? int(t->t.dtype()) : 0; }
size_t o2g_tensor_rank(const o2g_tensor* t) { return t ? t->t.shape().size() : 0; }
const int64_t* o2g_tensor_shape(const o2g_tensor* t) { return t ? t->t.shape().data() : nullptr; }
const void* o2g_tensor_data(const o2g_tensor* t) { return t && t->t.dtype() != DType::String ? t->t.raw() : nullptr; }
size_t o2g_tensor_nbytes(const o2g_tensor* t) { return t ? t->t.nbytes() : 0; }
const char* o2g_tensor_string(const o2g_tensor* t, size_t i) {
    return t && i < t->strings.size() ? t->strings[i].c_str() : nullptr;
}
void o2g_tensor_free(o2g_tensor* t) { delete t; }

}  // extern "C"
