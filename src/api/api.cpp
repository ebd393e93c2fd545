// The public C++ API (include/onnx2ggml/onnx2ggml.hpp) on the internal one (onnx2ggml::core): a
// Model is the loaded graph, a Session a core::SpecializingSession behind a lock, and every
// core::Error leaves as an onnx2ggml::Error of the same category and message.
#include "api/api_internal.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <new>

#include "o2g_build_version.h"
#include "codegen/dynamic.h"
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

core::WeightRules weight_rules(const std::string& base, const std::vector<std::string>& rules) {
    core::WeightRules r;
    r.base = core::weight_type_by_name(base);
    if (r.base == GGML_TYPE_COUNT)
        core::bad_input("SessionOptions::weights takes " + core::weight_type_names() + ", not '" + base + "'");
    for (auto& s : rules) r.rules.push_back(core::parse_weight_rule(s));
    return r;
}

}  // namespace

TensorInfo info(const core::Value& v) {
    TensorInfo t{v.name, DType(int(v.dtype)), v.has_shape ? v.shape : core::Shape{}, v.dim_params};
    t.dim_names.resize(t.shape.size());
    for (size_t i = 0; i < t.shape.size(); ++i)
        if (t.shape[i] >= 0 || t.dim_names[i] == "?") t.dim_names[i].clear();  // static, or dynamic without a name
    return t;
}

core::WeightRules rules_for(const core::Graph& loaded, const std::string& base, const std::vector<std::string>& rules,
                            const std::string& gguf) {
    core::WeightRules r = weight_rules(base, rules);
    core::warn_unmatched_rules(r, loaded);
    if (gguf.empty()) return r;
    auto gw = std::make_shared<const core::GgufWeights>(gguf);
    gw->check_model(loaded);
    if (!r.user_given()) r = gw->recorded_rules();
    r.gguf = gw;
    return r;
}

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
const char* version() { return ONNX2GGML_VERSION " (commit " ONNX2GGML_COMMIT ")"; }

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

double Tensor::at(int64_t i) const {
    const core::Tensor& t = impl_->t;
    if (t.dtype == core::DType::String || t.dtype == core::DType::Undefined || i < 0 || i >= t.numel())
        throw Error(ErrorCategory::BadInput, "Tensor::at(" + std::to_string(i) + ") of a " + core::dtype_name(t.dtype) +
                                                 " tensor of shape " + core::shape_str(t.shape));
    return t.getf(i);
}

TensorRef Tensor::ref() const {
    const core::Tensor& t = impl_->t;
    if (t.dtype == core::DType::String) return TensorRef{DType::String, t.shape, impl_->cstrs.data()};
    return TensorRef{dtype(), t.shape, raw()};
}

Tensor Tensor::copy(const TensorRef& r, const std::string& name) {
    try {
        core::Tensor borrowed = to_core(r, name.empty() ? "Tensor::copy" : name);
        if (borrowed.dtype == core::DType::String) return make_tensor(name, borrowed);  // (already copied)
        core::Tensor t = core::Tensor::zeros(borrowed.dtype, borrowed.shape);
        if (t.nbytes()) std::memcpy(t.data(), borrowed.data(), t.nbytes());
        return make_tensor(name, std::move(t));
    } catch (...) { rethrow_as_api_error(); }
}

Tensor::Tensor(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

Tensor make_tensor(std::string name, core::Tensor t) {
    auto impl = std::make_shared<Tensor::Impl>(Tensor::Impl{std::move(name), std::move(t), {}});
    if (impl->t.dtype == core::DType::String)
        for (const std::string& s : impl->t.strings()) impl->cstrs.push_back(s.c_str());
    return Tensor(std::move(impl));
}

Tensor load_npy(const std::string& path) {
    try {
        return make_tensor("", core::read_npy(path));
    } catch (...) { rethrow_as_api_error(); }
}

void save_npy(const std::string& path, const Tensor& t) {
    try {
        core::write_npy(path, core_of(t));
    } catch (...) { rethrow_as_api_error(); }
}

Tensor random_tensor(DType dtype, const std::vector<int64_t>& shape, uint64_t seed) {
    try {
        if (dtype == DType::String) core::bad_input("random_tensor: no random strings");
        return make_tensor("", core::random_tensor(core::DType(int(dtype)), shape, seed));
    } catch (...) { rethrow_as_api_error(); }
}

Comparison compare(const Tensor& got, const Tensor& expected, double rtol, double atol) {
    try {
        core::Comparison c = core::compare(core_of(got), core_of(expected), rtol, atol);
        return Comparison{c.pass, c.max_abs, c.max_rel, c.ref_max, c.why};
    } catch (...) { rethrow_as_api_error(); }
}

// ---- Model ---------------------------------------------------------------------------------------

Model::Model(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

Model model_of(core::Graph g) {
    auto impl = std::make_shared<Model::Impl>();
    for (int id : g.inputs) impl->inputs.push_back(info(g.values[size_t(id)]));
    for (const core::Value& v : g.declared_outputs) impl->outputs.push_back(info(v));
    impl->graph = std::move(g);
    return Model(std::move(impl));
}

Model Model::load(const std::string& path) {
    try {
        return model_of(core::load_onnx(path));
    } catch (...) { rethrow_as_api_error(); }
}

Model Model::from_bytes(const void* data, size_t size, const std::string& base_dir) {
    try {
        if (!data && size) core::bad_input("Model::from_bytes: no data");
        std::string bytes(static_cast<const char*>(data), size);
        return model_of(core::load_onnx_from_bytes(bytes, "<memory>", base_dir));
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
        // the graph copy shares the initializers' bytes with the Model (storage is reference counted)
        init(model, core::Graph(model.impl_->graph), o);
    } catch (...) { rethrow_as_api_error(); }
}

Session::Session(const std::string& path, const SessionOptions& o) {
    try {
        core::Graph g = core::load_onnx(path);
        core::Graph info = g;  // model(): the names, dtypes and shapes, not the initializers' bytes
        for (core::Value& v : info.values)
            if (v.is_initializer) v.constant.reset();
        init(model_of(std::move(info)), std::move(g), o);
    } catch (...) { rethrow_as_api_error(); }
}

void Session::init(const Model& model, core::Graph&& loaded, const SessionOptions& o) {
    core::CompileOptions copts;
    copts.optimize = o.optimize;
    copts.disabled_passes = o.disabled_passes;
    core::WeightRules rules = rules_for(loaded, o.weights, o.weight_rules, o.gguf);
    if (o.max_memory) core::set_memory_limit(o.max_memory);
    if (o.max_specializations == 0) core::bad_input("SessionOptions::max_specializations must be at least 1");
    if (o.threads < 0) core::bad_input("SessionOptions::threads must be >= 0");
    for (auto& kv : o.frozen_inputs) copts.frozen_inputs[kv.first] = core_of(kv.second);
    core::SessionOptions so{o.backend, o.threads, rules, o.release_host_weights};
    impl_ = std::make_unique<Impl>(model);
    impl_->s = std::make_unique<core::SpecializingSession>(std::move(loaded), copts, so, o.max_specializations);
    impl_->s->set_verbose(o.verbose);
    if (o.one_signature) impl_->s->expect_one_signature();
}

Session::~Session() = default;
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;

const Model& Session::model() const { return impl_->model; }

// run()'s inputs as core tensors reading the caller's memory
static std::vector<core::Tensor> core_inputs(const core::SpecializingSession& s, const std::vector<TensorRef>& inputs) {
    const core::Graph& g = s.model();
    const std::vector<int>& ids = s.input_ids();
    if (inputs.size() != ids.size())
        core::bad_input(g.path + ": run takes " + std::to_string(ids.size()) + " inputs, got " +
                        std::to_string(inputs.size()));
    std::vector<core::Tensor> ins;
    for (size_t k = 0; k < inputs.size(); ++k)
        ins.push_back(to_core(inputs[k], g.path + ": input '" + g.values[size_t(ids[k])].name + "'"));
    return ins;
}

std::vector<TensorInfo> Session::inputs() const {
    std::vector<TensorInfo> r;
    for (int id : impl_->s->input_ids()) r.push_back(info(impl_->s->model().values[size_t(id)]));
    return r;
}

std::vector<std::vector<int64_t>> Session::input_shapes(const std::map<std::string, TensorRef>& given,
                                                        const std::map<std::string, std::vector<int64_t>>& shapes,
                                                        const std::map<std::string, std::string>& sources) const {
    try {
        const core::Graph& g = impl_->s->model();
        const std::vector<int>& ids = impl_->s->input_ids();
        auto known = [&](const std::string& n) {
            return std::any_of(ids.begin(), ids.end(), [&](int id) { return g.values[size_t(id)].name == n; });
        };
        for (auto& kv : given)
            if (!known(kv.first)) core::bad_input(g.path + ": '" + kv.first + "' is not an input of the model");
        for (auto& kv : shapes)
            if (!known(kv.first)) core::bad_input(g.path + ": '" + kv.first + "' is not an input of the model");
        std::vector<core::Tensor> held(ids.size());
        std::vector<const core::Tensor*> in(ids.size(), nullptr);
        std::vector<std::string> src(ids.size());
        core::CompileOptions o;
        for (auto& kv : shapes) o.input_shapes[kv.first] = kv.second;
        for (size_t k = 0; k < ids.size(); ++k) {
            const std::string& name = g.values[size_t(ids[k])].name;
            auto it = given.find(name);
            if (it != given.end()) {
                held[k] = to_core(it->second, g.path + ": input '" + name + "'");
                in[k] = &held[k];
            }
            auto s = sources.find(name);
            if (s != sources.end()) src[k] = s->second;
        }
        return core::resolve_input_shapes(g, ids, in, o, src);
    } catch (...) { rethrow_as_api_error(); }
}

void Session::prepare(const std::vector<TensorRef>& inputs) {
    try {
        std::vector<core::Tensor> ins = core_inputs(*impl_->s, inputs);
        std::lock_guard<std::mutex> lock(impl_->mu);
        impl_->backend = impl_->s->session_for(ins).backend_name();
    } catch (...) { rethrow_as_api_error(); }
}

// the latest run's specialization (locked by the caller)
static core::Session& latest(core::SpecializingSession& s, const char* what) {
    if (!s.last()) core::bad_input(std::string("Session::") + what + ": nothing has run yet");
    return *s.last();
}

void Session::set_profiling(bool on) {
    try {
        std::lock_guard<std::mutex> lock(impl_->mu);
        latest(*impl_->s, "set_profiling").set_profile(on);
    } catch (...) { rethrow_as_api_error(); }
}

Profile Session::profile() const {
    try {
        std::lock_guard<std::mutex> lock(impl_->mu);
        const core::Session& s = latest(*impl_->s, "profile");
        Profile p;
        for (auto& r : s.profile()) p.ops.push_back({r.op, r.backend, r.nodes, r.ms});
        for (auto& n : s.profile_nodes()) p.nodes.push_back({n.name, n.op, n.backend, n.ms});
        return p;
    } catch (...) { rethrow_as_api_error(); }
}

Placement placement_of(const core::Session& s) {
    core::SchedStats st = s.sched_stats();
    Placement p;
    p.backend = s.backend_name();
    p.nodes = st.nodes;
    p.ops = st.ops;
    for (auto& f : st.fallback) p.fallback.push_back({f.name, f.op, f.backend});
    p.splits = st.splits;
    p.copies = st.copies;
    p.copy_bytes = st.copy_bytes;
    return p;
}

Placement Session::placement() const {
    try {
        std::lock_guard<std::mutex> lock(impl_->mu);
        return placement_of(latest(*impl_->s, "placement"));
    } catch (...) { rethrow_as_api_error(); }
}

std::vector<Tensor> Session::run(const std::vector<TensorRef>& inputs) {
    try {
        const core::Graph& g = impl_->s->model();
        std::vector<core::Tensor> ins = core_inputs(*impl_->s, inputs);
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
                        impl_->s->control_inputs(),
                        impl_->s->shared_weight_bytes()};
}

std::string Session::backend() const {
    std::lock_guard<std::mutex> lock(impl_->mu);
    return impl_->backend;
}

core::Tensor to_core(const TensorRef& r, const std::string& what) {
    core::DType dt = core::DType(int(r.dtype));
    if (dt != core::DType::String && !core::dtype_known(int(r.dtype)))  // (dtype_known: the numeric ones)
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

core::CompileOptions graph_options(const CompileOptions& o) {
    core::CompileOptions c;
    for (auto& kv : o.input_shapes) c.input_shapes[kv.first] = kv.second;
    for (auto& kv : o.frozen_inputs) c.frozen_inputs[kv.first] = core_of(kv.second);
    c.optimize = o.optimize;
    c.disabled_passes = o.disabled_passes;
    return c;
}

CompileReport compile(const std::string& model_path, const std::string& out_dir, const CompileOptions& o) {
    try {
        if (out_dir.empty()) core::bad_input("compile needs an output folder");
        if (o.max_memory) core::set_memory_limit(o.max_memory);
        core::Graph g = core::load_onnx(model_path);
        core::WeightRules rules = rules_for(g, o.weights, o.weight_rules, o.gguf);
        core::GgufMeta meta = core::gguf_model_meta(g, rules);
        core::CompileOptions copts = graph_options(o);
        if (!o.dims.empty()) {
            std::vector<core::DynamicDim> dims;
            for (auto& kv : o.dims) {
                core::DynamicDim d{kv.first, kv.second};
                std::sort(d.values.begin(), d.values.end());
                d.values.erase(std::unique(d.values.begin(), d.values.end()), d.values.end());
                if (d.values.empty() || d.values[0] < 1)
                    core::bad_input("CompileOptions::dims['" + kv.first + "']: values of at least 1 expected");
                dims.push_back(std::move(d));
            }
            core::EmitReport r = core::emit_dynamic_project(g, copts, dims, out_dir, model_path, rules, meta);
            return CompileReport{r.lines, r.weights, r.weight_bytes};
        }
        core::specialize(g, copts);
        core::optimize(g, copts);
        core::validate(g);
        core::EmitReport r = core::emit_project(g, out_dir, model_path, rules, meta);
        return CompileReport{r.lines, r.weights, r.weight_bytes};
    } catch (...) { rethrow_as_api_error(); }
}

}  // namespace onnx2ggml
