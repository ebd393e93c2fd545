// Run-time specialization: one session runs a model with dynamic dims, or with graph inputs whose
// values decide compile-time facts (an If's condition, a Loop's trip count, a Reshape's target, a
// Range's limit: "control inputs"), at any input shapes and values.
//
// The session keeps the loaded, unspecialized graph and specializes a copy of it per *signature*
// (the input shapes and the values of the control inputs): specialize -> optimize -> validate ->
// a Session. Control inputs are found automatically: a specialization that reports a value it
// needs at compile time (UnsupportedOp::needs_constant) has the graph inputs that value depends on
// frozen (integer inputs and float scalars, or the input itself when it is the value), and is
// retried; from then on those inputs' values are part of the signature. --freeze stays an override.
// Specialized graphs and their sessions are cached (LRU, at most max_specializations, the evicted
// one's ggml memory released); the initializers' weights are uploaded once, into a WeightPool
// that every specialization shares.
//
// Staged execution: when the value a node needs at compile time is computed inside the graph (a
// NonZero of a computed mask, an If on a computed condition, a TopK whose k, a Reshape whose shape,
// comes from data), freezing graph inputs cannot help. The graph (specialized as far as it goes for
// this signature) is then cut there: stage 1 is the nodes that value depends on, with the values
// stage 2 reads from them as its outputs; stage 2 is the rest, taking those values as inputs, the
// needed one a control input (frozen per run, so its specialization is cached by that value like
// any other). The cut is cached as this signature's entry; each stage is itself a
// SpecializingSession, so stage 2 cuts again where it must (NonZero, then an If's branch, then the
// NonMaxSuppression inside it). Models that need no cut stay one stage at no extra cost.
#pragma once
#include <list>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "passes/pipeline.h"
#include "runtime/session.h"

namespace onnx2ggml::core {

// The shapes of the inputs `ids` of `model` (graph-input value ids) given `inputs[k]` (nullptr: not
// given, e.g. to be made by --random-inputs): a given tensor is checked (dtype, rank, static dims,
// opts.input_shapes, one value per symbolic dim name across inputs; `sources[k]` names its file
// for the messages, may be empty); a missing one takes opts.input_shapes, the static dims and the
// symbolic dims the given inputs bind, and fails (exit 2) on a dim that stays unknown.
std::vector<Shape> resolve_input_shapes(const Graph& model, const std::vector<int>& ids,
                                        const std::vector<const Tensor*>& inputs, const CompileOptions& opts,
                                        const std::vector<std::string>& sources = {});

struct SpecializationStats {
    uint64_t runs = 0, hits = 0, misses = 0, evictions = 0;
    double specialize_ms = 0;       // all misses: specialize + optimize + build + allocate + upload
    double last_specialize_ms = 0;  // the latest miss
};

class SpecializingSession {
public:
    // copts: passes, --freeze overrides (copts.input_shapes are not used: shapes come from the inputs).
    SpecializingSession(Graph model, const CompileOptions& copts, const SessionOptions& sopts,
                        size_t max_specializations = 8);
    ~SpecializingSession();
    SpecializingSession(const SpecializingSession&) = delete;
    SpecializingSession& operator=(const SpecializingSession&) = delete;

    const Graph& model() const { return model_; }  // graph inputs/outputs as loaded (shapes may be dynamic)
    const SessionOptions& options() const { return sopts_; }
    // What run() takes, in order: the model's graph inputs less those bound with --freeze.
    const std::vector<int>& input_ids() const { return inputs_; }
    std::vector<Tensor> run(const std::vector<Tensor>& inputs);
    // The session for these inputs, specialized (and cached) if their signature is new; not run
    // (a staged model runs once to specialize its stages, and returns the last stage's session).
    Session& session_for(const std::vector<Tensor>& inputs);
    Session* last() { return last_; }  // the session of the latest run / session_for (staged: the last stage's)
    std::vector<std::string> cut_values() const;      // staged execution: the values the model is cut at (all stages)
    SpecializationStats stats() const;                // staged: the stages' specializations counted too
    std::vector<std::string> control_inputs() const;  // found so far, by name (not the --freeze ones)
    size_t cached() const;                            // specializations held (staged: of every stage)
    uint64_t shared_weight_bytes() const { return pool_.bytes(); }
    void set_verbose(bool on) { verbose_ = on; }  // one line per run on stderr: hit or miss, signature, time
    // The caller runs one signature only (the CLI with one input set): with
    // SessionOptions::release_host_constants the host copies of the weights are then dropped after
    // the first specialization, as they are anyway when no other signature can come (static
    // shapes, no control inputs); another signature is then an error (exit 2).
    void expect_one_signature() { one_signature_ = true; }

private:
    struct Cut;  // staged execution (specializing_session.cpp)
    struct Entry {
        std::string key;
        std::unique_ptr<Graph> g;
        std::unique_ptr<Session> s;  // or, staged, the cut (g: the graph as far as it specialized)
        std::shared_ptr<Cut> cut;
        std::vector<size_t> feed;         // per input of the specialized graph: its index in inputs_
        std::vector<std::string> cut_at;  // the values computed in the graph that it needs at compile time
    };
    Entry& lookup_or_specialize(const std::vector<Tensor>& inputs);
    void evict_oldest();  // the least recently used specialization (lru_ not empty)
    Entry specialize_for(const std::vector<Tensor>& inputs, const std::vector<Shape>& shapes);
    std::shared_ptr<Cut> make_cut(const Graph& g, const std::vector<std::string>& values) const;
    std::vector<Tensor> run_entry(Entry& e, const std::vector<Tensor>& inputs);
    [[noreturn]] void fail_specialization(const Graph& g, const std::vector<UnsupportedOp>& bad,
                                          const std::vector<Tensor>& inputs) const;
    std::string control_summary(const std::vector<Tensor>& inputs) const;
    std::string signature(const std::vector<Tensor>& inputs, std::string* readable) const;
    Tensor control_value(size_t k, const Tensor& t) const;

    Graph model_;
    CompileOptions copts_;
    SessionOptions sopts_;
    size_t max_;
    std::vector<int> inputs_;
    std::vector<bool> control_;  // per input: its value is part of the signature (frozen per run)
    bool fixed_shapes_ = true;   // every input's shape is static
    bool single_ = false;        // one signature only: the host copies of the weights are dropped
    bool verbose_ = false, one_signature_ = false;
    WeightPool pool_;       // before the cache: outlives every session that reads it
    std::list<Entry> lru_;  // most recently used first
    std::unordered_map<std::string, std::list<Entry>::iterator> index_;
    Session* last_ = nullptr;
    SpecializationStats stats_;
    SpecializationStats evicted_stages_;  // the stages' counts of evicted staged entries
};

}  // namespace onnx2ggml::core
