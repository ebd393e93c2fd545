// Small graph-matching helpers shared by the fusion passes.
#pragma once
#include <cmath>

#include "ir/graph.h"

namespace onnx2ggml::core {

// How many live nodes read each value (graph outputs count as many readers: never internal).
struct Uses {
    std::vector<int> count;
    explicit Uses(const Graph& g) : count(g.values.size(), 0) {
        for (auto& n : g.nodes)
            if (!n.folded)
                for (int i : n.inputs)
                    if (i >= 0) count[i]++;
        for (int o : g.outputs) count[o] += 1000;
    }
    // counting only the nodes marked in `live` (pipeline.h's live_nodes: those the outputs need)
    Uses(const Graph& g, const std::vector<bool>& live) : count(g.values.size(), 0) {
        for (size_t i = 0; i < g.nodes.size(); ++i)
            if (live[i])
                for (int v : g.nodes[i].inputs)
                    if (v >= 0) count[v]++;
        for (int o : g.outputs) count[o] += 1000;
    }
    bool single(int v) const { return v >= 0 && count[v] == 1; }
};

// value id -> the live nodes reading it
inline std::vector<std::vector<int>> consumers(const Graph& g) {
    std::vector<std::vector<int>> r(g.values.size());
    for (size_t i = 0; i < g.nodes.size(); ++i)
        if (!g.nodes[i].folded)
            for (int v : g.nodes[i].inputs)
                if (v >= 0) r[v].push_back(int(i));
    return r;
}

// The only live consumer of v if it is an ai.onnx node of type `op` (nullptr otherwise).
inline Node* sole_consumer_op(Graph& g, const Uses& uses, const std::vector<std::vector<int>>& cons, int v,
                              const char* op) {
    if (!uses.single(v) || cons[v].size() != 1) return nullptr;
    Node& n = g.nodes[cons[v][0]];
    return n.domain.empty() && n.op_type == op ? &n : nullptr;
}

// The live node producing value v, or nullptr (graph input, initializer, folded constant).
inline Node* producer(Graph& g, int v) {
    if (v < 0 || g.values[v].producer < 0) return nullptr;
    Node& n = g.nodes[g.values[v].producer];
    return n.folded ? nullptr : &n;
}

// The live producer of v if it is an ai.onnx node of type `op`.
inline Node* producer_op(Graph& g, int v, const char* op) {
    Node* n = producer(g, v);
    return n && n->domain.empty() && n->op_type == op ? n : nullptr;
}

inline bool is_const(const Graph& g, int v) { return v >= 0 && g.values[v].constant.has_value(); }

// A constant holding one value (any shape of one element) equal to `want` within tol.
inline bool is_scalar_const(const Graph& g, int v, double want, double tol) {
    if (!is_const(g, v) || g.values[v].constant->numel() != 1) return false;
    return std::fabs(g.values[v].constant->getf(0) - want) <= tol;
}

// A constant whose every element equals `want`.
inline bool is_splat_const(const Graph& g, int v, double want) {
    if (!is_const(g, v)) return false;
    const Tensor& t = *g.values[v].constant;
    for (int64_t i = 0; i < t.numel(); ++i)
        if (t.getf(i) != want) return false;
    return true;
}

// The other operand of a binary node, given one of them (-2 if v is not an operand).
inline int other(const Node& n, int v) {
    if (n.inputs.size() != 2) return -2;
    return n.inputs[0] == v ? n.inputs[1] : (n.inputs[1] == v ? n.inputs[0] : -2);
}

// Rewrites node n into an internal op of onnx2ggml's own domain.
inline void make_internal(Node& n, const std::string& op, std::vector<int> inputs) {
    n.op_type = op;
    n.domain = "onnx2ggml";
    n.inputs = std::move(inputs);
    n.attrs.clear();
}

inline Attr int_attr(int64_t v) {
    Attr a;
    a.kind = Attr::Int;
    a.i = v;
    return a;
}
inline Attr float_attr(float v) {
    Attr a;
    a.kind = Attr::Float;
    a.f = v;
    return a;
}
inline Attr ints_attr(const std::vector<int64_t>& v) {
    Attr a;
    a.kind = Attr::Ints;
    a.ints = v;
    return a;
}

// The passes (one file each under src/passes/), run by optimize() to a fixed point.
bool fuse_gelu(Graph& g);
bool fuse_silu(Graph& g);
bool fuse_groupnorm(Graph& g);
bool fuse_layernorm(Graph& g);
bool fuse_softmax_ext(Graph& g);
bool chunk_attention(Graph& g);
bool eliminate_identity_arithmetic(Graph& g);
bool global_pool_as_pool(Graph& g);
bool fold_pad_into_window(Graph& g);
bool drop_dead_conv_taps(Graph& g);

}  // namespace onnx2ggml::core
