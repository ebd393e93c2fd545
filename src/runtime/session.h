// In-process execution: weights uploaded once, the graph built and allocated once with
// ggml_backend_sched (the chosen backend first, the CPU as fallback), then run per call.
#pragma once
#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "ir/graph.h"
#include "runtime/build.h"
#include "util/limits.h"

namespace o2g_runtime {
struct WeightPlacement;  // o2g_runtime.h
}

namespace onnx2ggml::core {

class WeightPool;

struct SessionOptions {
    std::string backend = "auto";  // a ggml device name (case-insensitive prefix), "cpu" (pure ggml) or "auto"
    int threads = 0;               // 0 = the usable cores not busy elsewhere, taken at every run (o2g_runtime.h)
    WeightRules
        weights;  // how MatMul/Gemm/Conv weights are stored (--weights, --weights-rule, --gguf; Builder::weight_rules)
    // Drop the graph's initializer data once the weights are uploaded (the graph cannot be
    // lowered again afterwards): peak memory is then one copy of the weights.
    bool release_host_constants = false;
    WeightPool* pool = nullptr;  // initializers' weights shared with other sessions of the model
    bool keep_values = false;    // every intermediate value readable after run (Session::value; `compare`)
    bool no_inplace = false;     // no in-place writes across nodes (keep_values then sees every value)
};

// The weights that several sessions of one model share (the Builder's WeightShare): the tensors a
// lowering asks for are made in a pending context, allocated and uploaded by the session whose
// graph made them (alloc, then publish once uploaded), and kept until the pool goes, so that each
// initializer is uploaded once for every run-time specialization (runtime/specializing_session.h).
class WeightPool : public WeightShare {
public:
    WeightPool() = default;
    WeightPool(const WeightPool&) = delete;
    WeightPool& operator=(const WeightPool&) = delete;
    ~WeightPool() override;
    ggml_tensor* get(const std::string& key, ggml_type type, const int64_t ne[4], bool* fresh) override;
    void begin(size_t max_tensors) override;
    uint64_t pending_bytes() const;
    void alloc(const o2g_runtime::WeightPlacement& place);  // the pending tensors' memory, where `place` says
    void publish();                                         // they hold their data: later graphs may use them
    uint64_t bytes() const { return bytes_; }               // published
    size_t size() const { return published_.size(); }
    bool owns(ggml_backend_buffer_t b) const { return std::find(bufs_.begin(), bufs_.end(), b) != bufs_.end(); }
    // What a backend derives from these weights and keeps as long as they live (the oneDNN backend's
    // reordered kernels: o2g_onednn::set_shared_kernels), shared by the sessions of the model
    std::shared_ptr<void> backend_state;

private:
    void drop_pending();
    std::map<std::string, ggml_tensor*> published_, pending_;
    ggml_context* pending_ctx_ = nullptr;
    std::vector<ggml_backend_buffer_t> pending_bufs_;
    std::vector<ggml_context*> ctxs_;
    std::vector<ggml_backend_buffer_t> bufs_;
    ggml_backend_buffer_type_t buft_ = nullptr;
    uint64_t bytes_ = 0;
    MemoryHold held_;  // bytes_, in the process's --max-memory budget
};

// Backend by name through ggml's registry; throws with the list of available devices.
ggml_backend_t init_backend(const std::string& name, int threads);
// The devices a --backend names: one, or one per server of an `rpc:HOST:PORT[,...]` list; throws (exit 2).
std::vector<ggml_backend_t> init_backends(const std::string& name, int threads);
std::vector<std::string> backend_names();

// Time spent per ggml op type and backend over the profiled runs (Session::set_profile).
struct ProfileRow {
    std::string op, backend;
    int nodes = 0;  // graph nodes of this op on this backend (per run)
    double ms = 0;  // total over the profiled runs
};

// One profiled node: its ggml name (the ONNX value it computes), op and backend.
struct ProfileNode {
    std::string name, op, backend;
    double ms = 0;  // total over the profiled runs
};

// How ggml_backend_sched cut the graph: splits (runs of nodes on one backend, each a separate
// graph_compute call) and the tensors it copies from one backend's memory to another's.
struct SchedStats {
    int splits = 0, copies = 0;
    size_t copy_bytes = 0;
    std::map<std::string, int> nodes;  // graph nodes per backend
    // computing nodes (views left out) per backend and ggml op ("host" for onnx2ggml's host kernels)
    std::map<std::pair<std::string, std::string>, int> ops;
    // computing nodes not on the session's own device (its servers' for RPC): the CPU's fallback (named
    // after the ONNX value they compute, or node_N for a lowering's intermediate tensors)
    struct Fallback {
        std::string name, op, backend;
    };
    std::vector<Fallback> fallback;
};

class Session {
public:
    Session(Graph& g, const SessionOptions& opts);
    ~Session();
    // Inputs in graph-input order; checked against the model's shapes and dtypes.
    std::vector<Tensor> run(const std::vector<Tensor>& inputs);
    const Graph& graph() const { return g_; }
    std::string backend_name() const;
    std::map<std::string, int> op_histogram() const { return ggml_op_histogram(bg_->gf); }
    size_t weight_bytes() const;  // this session's own weight buffer (not the shared pool)
    size_t buffer_bytes() const;  // its own weight and compute buffers
    // Profiling: each node is then computed on its own and timed (slower than a plain run).
    void set_profile(bool on);
    std::vector<ProfileRow> profile() const;         // by time, largest first
    std::vector<ProfileNode> profile_nodes() const;  // by time, largest first
    SchedStats sched_stats() const;
    // With SessionOptions::keep_values, after run: the value `id` of the graph as the last run computed it.
    // None when no ggml tensor holds it (a folded constant, a value fused away) or when a later node
    // overwrote its memory in place (a bias, activation or residual sum written onto a convolution's
    // output): `why` says which.
    std::optional<Tensor> value(int id, std::string* why) const;
    // The ggml ops the lowering of graph node `node` made ("" when none; keep_values only).
    std::string node_ops(int node) const;
    // Where value `id` is computed: a backend's name, "host" for a host kernel, "" for none (a
    // constant, an input, a value fused away). The ggml graph and the backend of one of its tensors.
    std::string value_backend(int id) const;
    const ggml_cgraph* ggml_graph() const { return bg_->gf; }
    std::string tensor_backend(const ggml_tensor* t) const;

private:
    void init(const SessionOptions& opts);
    void release();
    Graph& g_;
    std::unique_ptr<BuiltGraph> bg_;
    std::map<size_t, Tensor> host_outs_;  // outputs returned as host values (strings, wide int64 constants)
    ggml_backend_t backend_ = nullptr, cpu_ = nullptr;
    std::vector<ggml_backend_t> more_;  // the other RPC servers' devices (--backend rpc:A,rpc:B: A is backend_)
    int threads_ = 0;                   // SessionOptions::threads: 0 = taken again before every compute (o2g_runtime.h)
    std::vector<ggml_backend_buffer_t> wbufs_;  // weights: on the backend, and in host memory (see init)
    ggml_backend_sched_t sched_ = nullptr;
    struct Prof;
    std::unique_ptr<Prof> prof_;
    bool keep_values_ = false;
    MemoryHold held_;  // buffer_bytes(), in the process's --max-memory budget
};

}  // namespace onnx2ggml::core
