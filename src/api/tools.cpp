// The public API's model tools and process-wide settings (include/onnx2ggml/onnx2ggml.hpp): what
// `onnx2ggml quantize`, `inspect`, `compare`, `check TESTDIR`, `ops`, `--version` and `rpc-server`
// report or do, on the internal API. The CLI is written on these (src/cli/), as an application would be.
#include <cstdio>
#include <set>

#include "api/api_internal.h"
#include "o2g_build_version.h"
#include "o2g_info.h"
#include "o2g_runtime.h"
#include "onnx/loader.h"
#include "onnx2ggml_core.h"
#include "ops/op.h"
#include "runtime/compare.h"
#include "runtime/dot.h"
#include "util/limits.h"
#include "util/progress.h"

namespace onnx2ggml {

// ---- quantize ------------------------------------------------------------------------------------

QuantizeReport quantize(const std::string& model_path, const std::string& out_gguf, const CompileOptions& o) {
    try {
        if (out_gguf.empty()) core::bad_input("quantize needs an output file (.gguf)");
        if (!o.gguf.empty()) core::bad_input("quantize takes the weights from the model, not from a GGUF");
        if (o.max_memory) core::set_memory_limit(o.max_memory);
        core::Graph g = core::load_onnx(model_path);
        core::WeightRules rules = rules_for(g, o.weights, o.weight_rules, "");
        core::GgufMeta meta = core::gguf_model_meta(g, rules);
        const core::CompileOptions copts = graph_options(o);
        core::specialize(g, copts);
        core::optimize(g, copts);
        core::validate(g);
        auto bg = core::build_graph(g, false, rules);
        // the stored forms are the lowering's: a weight read in two forms (type, transposition, shape) is
        // written in each; constants derived at load time are not written
        std::vector<core::Weight> ws;
        std::set<std::string> seen;
        QuantizeReport r;
        for (const core::Weight& w : bg->b->weights) {
            if (!w.initializer || w.onnx_name.empty()) continue;
            std::string key = w.onnx_name + "|" + std::to_string(w.transpose) + "|" + ggml_type_name(w.t->type);
            for (int d = 0; d < 4; ++d) key += "|" + std::to_string(w.t->ne[d]);
            if (!seen.insert(key).second) continue;
            ws.push_back(w);
            r.types[ggml_type_name(w.t->type)]++;
            r.bytes += ggml_nbytes(w.t);
        }
        std::vector<std::pair<std::string, std::string>> strings = {
            {"general.architecture", "onnx2ggml"},
            {"onnx2ggml.source", model_path},
            {"onnx2ggml.producer", g.producer},
            {"onnx2ggml.version", ONNX2GGML_VERSION " (commit " ONNX2GGML_COMMIT ")"}};
        strings.insert(strings.end(), meta.strings.begin(), meta.strings.end());
        core::write_gguf(out_gguf, ws, strings, meta.arrays);
        r.weights = ws.size();
        return r;
    } catch (...) { rethrow_as_api_error(); }
}

// ---- inspect -------------------------------------------------------------------------------------

ModelReport inspect(const std::string& model_path, const InspectOptions& o) {
    try {
        if (o.graph.max_memory) core::set_memory_limit(o.graph.max_memory);
        core::Graph g = core::load_onnx(model_path);
        ModelReport r;
        r.path = model_path;
        r.producer = g.producer;
        for (auto& kv : g.opsets) r.opsets.push_back({kv.first.empty() ? "ai.onnx" : kv.first, kv.second});
        r.nodes = g.nodes.size();
        for (auto& n : g.nodes) r.op_histogram[(n.domain.empty() ? "" : n.domain + ".") + n.op_type]++;
        for (auto& v : g.values)
            if (v.is_initializer && v.constant) r.parameters += v.constant->numel();
        const bool on_backend = o.picture != InspectOptions::Picture::None || !o.backend.empty();
        core::WeightRules rules;  // (checked on the model as loaded)
        if (on_backend) rules = rules_for(g, o.graph.weights, o.graph.weight_rules, o.graph.gguf);
        const core::CompileOptions copts = graph_options(o.graph);
        std::vector<core::UnsupportedOp> bad;
        bool shapes_ok = true;
        try {
            core::specialize(g, copts, &bad);
        } catch (const core::Error& e) {
            if (e.code != core::kExitBadInput) throw;
            shapes_ok = false;  // e.g. a dynamic dim without a shape: still report what is known
            r.shape_error = e.what();
        }
        if (bad.empty() && shapes_ok) {
            core::optimize(g, copts);
            core::validate(g, &bad);
        }
        for (auto& u : bad) r.unsupported.push_back({u.node, u.op_type, u.reason, u.opset});
        for (int id : g.inputs) r.inputs.push_back(info(g.values[size_t(id)]));
        for (int id : g.outputs) r.outputs.push_back(info(g.values[size_t(id)]));
        const bool builds = bad.empty() && shapes_ok;
        if (!builds) {
            if (o.picture != InspectOptions::Picture::None && shapes_ok)
                r.dot = core::onnx_graph_dot(g, core::DotOptions{});  // the graph's own structure
            return r;
        }
        if (o.ggml_ops) r.ggml_ops = core::ggml_op_histogram(core::build_graph(g, false)->gf);
        if (!on_backend) return r;
        // built on the backend (weights uploaded): the picture's colors and the placement
        core::Session s(g, core::SessionOptions{o.backend.empty() ? "auto" : o.backend, o.threads, rules});
        if (o.picture == InspectOptions::Picture::Ggml) r.dot = core::ggml_graph_dot(s);
        if (o.picture == InspectOptions::Picture::Onnx) {
            core::DotOptions d;
            d.session = &s;
            r.dot = core::onnx_graph_dot(g, d);
        }
        if (!o.backend.empty()) {
            r.placed = true;
            r.placement = placement_of(s);
        }
        return r;
    } catch (...) { rethrow_as_api_error(); }
}

// ---- compare_model, reference_outputs --------------------------------------------------------------

ModelComparison compare_model(const std::string& model_path, const std::map<std::string, Tensor>& inputs,
                              const CompareModelOptions& o) {
    try {
        const SessionOptions& so = o.session;
        if (so.max_memory) core::set_memory_limit(so.max_memory);
        core::CompareOptions c;
        c.reference = o.reference;
        c.tolerance = o.tolerance;
        {
            core::Graph loaded = core::load_onnx(model_path);  // (the rules are checked on the model as loaded)
            c.session =
                core::SessionOptions{so.backend, so.threads, rules_for(loaded, so.weights, so.weight_rules, so.gguf)};
        }
        c.session.no_inplace = o.no_inplace;
        c.copts.optimize = so.optimize;
        c.copts.disabled_passes = so.disabled_passes;
        for (auto& kv : so.frozen_inputs) c.copts.frozen_inputs[kv.first] = core_of(kv.second);
        c.picture = o.picture;
        c.work_dir = o.work_dir;
        std::map<std::string, core::Tensor> ins;
        for (auto& kv : inputs) ins[kv.first] = core_of(kv.second);
        core::CompareResult cr = core::compare_model(model_path, ins, c);
        ModelComparison r;
        for (const core::CompareRow& w : cr.rows)
            r.rows.push_back({w.node_name, w.op_type, w.ggml_ops, w.value, w.shape, w.compared, w.max_abs, w.max_ref,
                              w.rel, w.note, w.over, w.first});
        r.first = cr.first;
        r.reference = cr.reference;
        r.backend = cr.backend;
        r.dot = cr.dot;
        r.reference_gaps = cr.reference_gaps;
        return r;
    } catch (...) { rethrow_as_api_error(); }
}

std::vector<Tensor> reference_outputs(const std::string& model_path, const std::map<std::string, Tensor>& inputs,
                                      const CompileOptions& o) {
    try {
        std::map<std::string, core::Tensor> ins;
        for (auto& kv : inputs) ins[kv.first] = core_of(kv.second);
        std::string gaps;
        std::map<std::string, core::Tensor> host = core::host_values(model_path, ins, graph_options(o), &gaps);
        core::Graph g = core::load_onnx(model_path);
        std::vector<Tensor> r;
        for (int id : g.outputs) {
            const core::Value& v = g.values[size_t(id)];
            auto it = host.find(v.name);
            if (it == host.end())
                throw core::Error(core::kExitUnsupported,
                                  model_path + ": the host reference cannot compute output '" + v.name + "':\n" + gaps);
            const core::Tensor& t = it->second;  // float32 values were computed as float64
            bool narrow =
                t.dtype == core::DType::F64 && v.dtype != core::DType::F64 && v.dtype != core::DType::Undefined;
            r.push_back(make_tensor(v.name, narrow ? t.cast(v.dtype) : t));
        }
        return r;
    } catch (...) { rethrow_as_api_error(); }
}

Tensor load_tensor_proto(const std::string& path) {
    try {
        std::string name;
        core::Tensor t = core::load_tensor_pb(path, &name);
        return make_tensor(name, std::move(t));
    } catch (...) { rethrow_as_api_error(); }
}

std::vector<std::string> supported_operators() { return core::Registry::get().op_types(); }

std::string build_info() { return o2g_info::build_info(); }

// ---- process-wide settings -------------------------------------------------------------------------

void set_max_memory(uint64_t bytes) { core::set_memory_limit(bytes); }

uint64_t parse_size(const std::string& s) {
    try {
        return core::parse_size(s);
    } catch (...) { rethrow_as_api_error(); }
}

void set_progress_bars(bool on) { core::set_progress_quiet(!on); }

void check_weights(const std::string& weights, const std::vector<std::string>& rules) {
    try {
        if (core::weight_type_by_name(weights) == GGML_TYPE_COUNT)
            core::bad_input("--weights takes " + core::weight_type_names() + ", not '" + weights + "'");
        for (auto& x : rules) core::parse_weight_rule(x);
    } catch (...) { rethrow_as_api_error(); }
}

void exit_on_ggml_abort() { ggml_set_abort_callback(o2g_runtime::exit_on_ggml_abort); }

void serve_rpc(const std::string& host, int port, const std::string& backend, int threads) {
    try {
        using start_t = void (*)(const char*, const char*, size_t, size_t, ggml_backend_dev_t*);
        auto start = reinterpret_cast<start_t>(o2g_runtime::rpc_proc("ggml_backend_rpc_start_server"));
        if (!start) core::bad_input("rpc-server: this build has no ggml RPC (configure with -DGGML_RPC=ON)");
        if (port < 1 || port > 65535) core::bad_input("rpc-server: bad port " + std::to_string(port));
        ggml_backend_t be = core::init_backend(backend, threads);  // the device, by the name --backend takes
        ggml_backend_dev_t dev = ggml_backend_get_device(be);
        ggml_backend_free(be);
        std::string ep = (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
        printf("rpc-server: serving %s (%s) on %s\n", ggml_backend_dev_name(dev), ggml_backend_dev_description(dev),
               ep.c_str());
        fflush(stdout);
        start(ep.c_str(), nullptr, size_t(threads > 0 ? threads : o2g_runtime::usable_cores()), 1, &dev);
        core::bad_input("rpc-server: cannot serve on " + ep + " (address in use, or not an address of this machine)");
    } catch (...) { rethrow_as_api_error(); }
}

}  // namespace onnx2ggml
