// The public C++ API (include/onnx2ggml/onnx2ggml.hpp) on the internal one (onnx2ggml::core): a
// Model is the loaded graph, a Session a core::SpecializingSession behind a lock, and every
// core::Error leaves as an onnx2ggml::Error of the same category and message.
#include "api/api_internal.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <new>

#include "o2g_build_version.h"
#include "onnx/loader.h"
#include "onnx2ggml_core.h"
#include "util/limits.h"

namespace onnx2ggml {

namespace {

// The caller's memory as a core tensor's storage: read in place for the duration of run().
struct BorrowedStorage : core::Storage {
    BorrowedStorage(const void* p, size_t n) {
        data = static_cast<uint8_t*>(const_cast<void*>(p));
        size = n;
    }
};

TensorInfo info(const core::Value& v) {
    TensorInfo t{v.name, DType(int(v.dtype)), v.has_shape ? v.shape : core::Shape{}, v.dim_params};
    t.dim_names.resize(t.shape.size());
    for (auto& d : t.dim_names)
        if (d == "?") d.clear();  // a dynamic dim without a name
    return t;
}

core::WeightRules weight_rules(const std::string& base, const std::vector<std::string>& rules) {
    core::WeightRules r;
    r.base = core::weight_type_by_name(base);
    if (r.base == GGML_TYPE_COUNT)
        core::bad_input("SessionOptions::weights takes " + core::weight_type_names() + ", not '" + base + "'");
    for (auto& s : rules) r.rules.push_back(core::parse_weight_rule(s));
    return r;
}

}  // namespace

[[noreturn]] void rethrow_as_api_error() {
    try {
        throw;
    } catch (const Error&) { throw; } catch (const core::Error& e) {
        throw Error(ErrorCategory(e.code), e.what());
    } catch (const std::bad_alloc&) {
        throw Error(ErrorCategory::BadInput, "out of memory");
    } catch (const std::exception& e) {
        throw Error(ErrorCategory::Internal, std::string("internal error: ") + e.what());
    }
}

// the public DType is core's, value for value (both are onnx.TensorProto.DataType)
#define O2G_SAME_DTYPE(pub, in) static_assert(int(DType::pub) == int(core::DType::in), "DType::" #pub);
O2G_SAME_DTYPE(Float, F32)
O2G_SAME_DTYPE(UInt8, U8)
O2G_SAME_DTYPE(Int8, I8)
O2G_SAME_DTYPE(UInt16, U16)
O2G_SAME_DTYPE(Int16, I16)
O2G_SAME_DTYPE(Int32, I32)
O2G_SAME_DTYPE(Int64, I64)
O2G_SAME_DTYPE(String, String)
O2G_SAME_DTYPE(Bool, Bool)
O2G_SAME_DTYPE(Float16, F16)
O2G_SAME_DTYPE(Double, F64)
O2G_SAME_DTYPE(UInt32, U32)
O2G_SAME_DTYPE(UInt64, U64)
O2G_SAME_DTYPE(BFloat16, BF16)
#undef O2G_SAME_DTYPE

size_t dtype_size(DType t) { return t == DType::String ? 0 : core::dtype_size(core::DType(int(t))); }
const char* dtype_name(DType t) { return core::dtype_name(core::DType(int(t))); }
const char* version() { return ONNX2GGML_VERSION " (git " ONNX2GGML_COMMIT ")"; }

// ---- Tensor --------------------------------------------------------------------------------------

Tensor::Tensor() : impl_(std::make_shared<Impl>()) {}
const std::string& Tensor::name() const { return impl_->name; }
DType Tensor::dtype() const { return DType(int(impl_->t.dtype)); }
const std::vector<int64_t>& Tensor::shape() const { return impl_->t.shape; }
int64_t Tensor::numel() const { return impl_->t.dtype == core::DType::Undefined ? 0 : impl_->t.numel(); }
size_t Tensor::nbytes() const { return impl_->t.dtype == core::DType::String ? 0 : impl_->t.nbytes(); }
const void* Tensor::raw() const { return impl_->t.buf ? impl_->t.data() : nullptr; }
std::vector<std::string> Tensor::strings() const {
    if (impl_->t.dtype != core::DType::String)
        throw Error(ErrorCategory::BadInput, "output '" + impl_->name + "' is a " + core::dtype_name(impl_->t.dtype) +
                                                 " tensor, not a string tensor");
    return impl_->t.strings();
}

Tensor::Tensor(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

Tensor make_tensor(std::string name, core::Tensor t) {
    return Tensor(std::make_shared<Tensor::Impl>(Tensor::Impl{std::move(name), std::move(t)}));
}

// ---- Model ---------------------------------------------------------------------------------------

Model::Model(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

static Model make_model(core::Graph g) {
    auto impl = std::make_shared<Model::Impl>();
    for (int id : g.inputs) impl->inputs.push_back(info(g.values[size_t(id)]));
    for (const core::Value& v : g.declared_outputs) impl->outputs.push_back(info(v));
    impl->graph = std::move(g);
    return Model(std::move(impl));
}

Model Model::load(const std::string& path) {
    try {
        return make_model(core::load_onnx(path));
    } catch (...) { rethrow_as_api_error(); }
}

Model Model::from_bytes(const void* data, size_t size, const std::string& base_dir) {
    try {
        if (!data && size) core::bad_input("Model::from_bytes: no data");
        std::string bytes(static_cast<const char*>(data), size);
        return make_model(core::load_onnx_from_bytes(bytes, "<memory>", base_dir));
    } catch (...) { rethrow_as_api_error(); }
}

const std::string& Model::path() const { return impl_->graph.path; }
const std::vector<TensorInfo>& Model::inputs() const { return impl_->inputs; }
const std::vector<TensorInfo>& Model::outputs() const { return impl_->outputs; }

// ---- Session -------------------------------------------------------------------------------------

struct Session::Impl {
    explicit Impl(const Model& m) : model(m) {}
    Model model;
    std::unique_ptr<core::SpecializingSession> s;
    mutable std::mutex mu;
    std::string backend;
};

Session::Session(const Model& model, const SessionOptions& o) {
    try {
        const core::Graph& loaded = model.impl_->graph;
        core::CompileOptions copts;
        copts.optimize = o.optimize;
        copts.disabled_passes = o.disabled_passes;
        core::WeightRules rules = weight_rules(o.weights, o.weight_rules);
        core::warn_unmatched_rules(rules, loaded);
        if (!o.gguf.empty()) {
            auto gw = std::make_shared<const core::GgufWeights>(o.gguf);
            gw->check_model(loaded);
            if (!rules.user_given()) rules = gw->recorded_rules();
            rules.gguf = gw;
        }
        if (o.max_memory) core::set_memory_limit(o.max_memory);
        if (o.max_specializations == 0) core::bad_input("SessionOptions::max_specializations must be at least 1");
        if (o.threads < 0) core::bad_input("SessionOptions::threads must be >= 0");
        core::SessionOptions so{o.backend, o.threads, rules, false};
        impl_ = std::make_unique<Impl>(model);
        // the graph copy shares the initializers' bytes with the Model (storage is reference counted)
        impl_->s = std::make_unique<core::SpecializingSession>(loaded, copts, so, o.max_specializations);
    } catch (...) { rethrow_as_api_error(); }
}

Session::~Session() = default;
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;

const Model& Session::model() const { return impl_->model; }

std::vector<Tensor> Session::run(const std::vector<TensorRef>& inputs) {
    try {
        const core::Graph& g = impl_->s->model();
        const std::vector<int>& ids = impl_->s->input_ids();
        if (inputs.size() != ids.size())
            core::bad_input(g.path + ": run takes " + std::to_string(ids.size()) + " inputs, got " +
                            std::to_string(inputs.size()));
        std::vector<core::Tensor> ins;
        for (size_t k = 0; k < inputs.size(); ++k)
            ins.push_back(to_core(inputs[k], g.path + ": input '" + g.values[size_t(ids[k])].name + "'"));
        std::lock_guard<std::mutex> lock(impl_->mu);
        std::vector<core::Tensor> outs = impl_->s->run(ins);
        if (core::Session* last = impl_->s->last()) impl_->backend = last->backend_name();
        std::vector<Tensor> r;
        for (size_t k = 0; k < outs.size(); ++k) r.push_back(make_tensor(g.values[size_t(g.outputs[k])].name, outs[k]));
        return r;
    } catch (...) { rethrow_as_api_error(); }
}

std::vector<Tensor> Session::run(const std::map<std::string, TensorRef>& feeds,
                                 const std::vector<std::string>& output_names) {
    std::vector<TensorRef> ordered;
    std::vector<size_t> picks;
    try {
        const core::Graph& g = impl_->s->model();
        const std::vector<int>& ids = impl_->s->input_ids();
        for (auto& kv : feeds)
            if (std::none_of(ids.begin(), ids.end(), [&](int id) { return g.values[size_t(id)].name == kv.first; }))
                core::bad_input(g.path + ": '" + kv.first + "' is not an input of the model");
        for (int id : ids) {
            const std::string& name = g.values[size_t(id)].name;
            auto it = feeds.find(name);
            if (it == feeds.end()) core::bad_input(g.path + ": no value for input '" + name + "'");
            ordered.push_back(it->second);
        }
        for (auto& n : output_names) {
            size_t k = 0;
            while (k < g.outputs.size() && g.values[size_t(g.outputs[k])].name != n) ++k;
            if (k == g.outputs.size()) core::bad_input(g.path + ": '" + n + "' is not an output of the model");
            picks.push_back(k);
        }
    } catch (...) { rethrow_as_api_error(); }
    std::vector<Tensor> all = run(ordered);
    if (output_names.empty()) return all;
    std::vector<Tensor> r;
    for (size_t k : picks) r.push_back(all[k]);
    return r;
}

SessionStats Session::stats() const {
    std::lock_guard<std::mutex> lock(impl_->mu);
    core::SpecializationStats st = impl_->s->stats();
    return SessionStats{st.runs,
                        st.hits,
                        st.misses,
                        st.evictions,
                        impl_->s->cached(),
                        st.specialize_ms,
                        st.last_specialize_ms,
                        impl_->s->control_inputs()};
}

std::string Session::backend() const {
    std::lock_guard<std::mutex> lock(impl_->mu);
    return impl_->backend;
}

core::Tensor to_core(const TensorRef& r, const std::string& what) {
    core::DType dt = core::DType(int(r.dtype));
    if (!core::dtype_known(int(r.dtype)) || dt == core::DType::Undefined)
        core::bad_input(what + ": unknown dtype " + std::to_string(int(r.dtype)));
    for (int64_t d : r.shape)
        if (d < 0) core::bad_input(what + ": negative dim in shape " + core::shape_str(r.shape));
    int64_t n = core::shape_numel(r.shape);
    if (n > 0 && !r.data) core::bad_input(what + ": no data");
    if (dt == core::DType::String) {
        std::vector<std::string> items;
        auto strs = static_cast<const char* const*>(r.data);
        for (int64_t i = 0; i < n; ++i) items.emplace_back(strs[i] ? strs[i] : "");
        return core::Tensor::from_strings(std::move(items), r.shape);
    }
    core::Tensor t;
    t.dtype = dt;
    t.shape = r.shape;
    t.buf = std::make_shared<BorrowedStorage>(r.data, size_t(n) * core::dtype_size(dt));
    return t;
}

// ---- compile -------------------------------------------------------------------------------------

CompileReport compile(const std::string& model_path, const std::string& out_dir, const CompileOptions& o) {
    try {
        if (out_dir.empty()) core::bad_input("compile needs an output folder");
        core::Graph g = core::load_onnx(model_path);
        core::WeightRules rules = weight_rules(o.weights, o.weight_rules);
        core::warn_unmatched_rules(rules, g);
        core::GgufMeta meta = core::gguf_model_meta(g, rules);
        core::CompileOptions copts;
        copts.optimize = o.optimize;
        for (auto& kv : o.input_shapes) copts.input_shapes[kv.first] = kv.second;
        core::specialize(g, copts);
        core::optimize(g, copts);
        core::validate(g);
        core::EmitReport r = core::emit_project(g, out_dir, model_path, rules, meta);
        return CompileReport{r.lines, r.weights, r.weight_bytes};
    } catch (...) { rethrow_as_api_error(); }
}

}  // namespace onnx2ggml
