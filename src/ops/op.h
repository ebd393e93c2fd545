// The operator registry. Each ONNX operator is one OpDef: which inputs must be host
// constants, its shape/dtype rule, its host evaluator (constant folding) and its
// lowering to ggml. Ops live in src/ops/<family>.cpp, one O2G_OP_FAMILY(<family>) block each
// (docs/adding-an-op.md).
#pragma once
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"
#include "util/error.h"

namespace onnx2ggml::core {

class LowerCtx;

// View of one node while its shapes are inferred, it is folded, or it is lowered.
class OpCtx {
public:
    OpCtx(Graph& g, int node) : g_(g), node_(node) {}
    Graph& graph() { return g_; }
    Node& node() { return g_.nodes[node_]; }
    const Node& node() const { return g_.nodes[node_]; }
    int node_index() const { return node_; }
    int64_t opset() const { return g_.opset(node().domain); }

    int nin() const { return int(node().inputs.size()); }
    int nout() const { return int(node().outputs.size()); }
    bool has(int i) const { return i < nin() && node().inputs[i] >= 0; }
    bool has_out(int i) const { return i < nout() && node().outputs[i] >= 0; }
    Value& in(int i);
    Value& out(int i);
    const Shape& shape(int i) { return in(i).shape; }
    int rank(int i) { return int(in(i).shape.size()); }
    DType dtype(int i) { return in(i).dtype; }
    bool is_const(int i) { return has(i) && in(i).constant.has_value(); }
    const Tensor& cval(int i);  // the host value of input i (error if not constant)
    std::vector<int64_t> cints(int i) { return cval(i).to_i64(); }

    bool has_attr(const std::string& n) const { return node().attrs.count(n) > 0; }
    int64_t ai(const std::string& n, int64_t def) const;
    float af(const std::string& n, float def) const;
    std::string as(const std::string& n, const std::string& def) const;
    std::vector<int64_t> ais(const std::string& n, const std::vector<int64_t>& def = {}) const;
    std::vector<float> afs(const std::string& n, const std::vector<float>& def = {}) const;
    std::vector<std::string> astrs(const std::string& n) const;  // a STRINGS attribute ({} when absent)
    const Tensor* at(const std::string& n) const;

    void set_out(int i, DType t, const Shape& s);    // shape rule result
    void set_seq(int i, std::vector<int> elements);  // a sequence output (value ids of its elements)
    // Shape rules of graph-level ops (sequences) may replace the node by tensor nodes; specialize
    // splices them in place of the node and processes them next.
    void replace_with(std::vector<Node> nodes) { replacement = std::move(nodes); }
    std::optional<std::vector<Node>> replacement;
    int new_const(const Tensor& t, const std::string& hint);  // a fresh value holding a constant
    Node make_node(const std::string& op, std::vector<int> ins, std::vector<int> outs) const;  // named after this node
    void set_const(int i, Tensor t);                                                           // host evaluation result
    int axis(int64_t a, int rank);  // normalizes a negative axis, checks range

    bool op_is_input_axes() const;                                     // axes moved from attribute to input in opset 13
    std::string where() const;                                         // "model.onnx: node 'x' (Op, opset N)"
    [[noreturn]] void fail(const std::string& msg) const;              // bad model (exit 2)
    [[noreturn]] void fail_unsupported(const std::string& msg) const;  // exit 3
    [[noreturn]] void fail_limit(const std::string& msg) const;        // exit 3, a LimitExceeded

private:
    const Attr* attr(const std::string& n, Attr::Kind k) const;
    Graph& g_;
    int node_;
};

struct OpDef {
    std::string op_type;
    std::string domain;  // "" = ai.onnx ("ai.onnx" and "onnx2ggml" read the same; o2g.* ops too)
    int64_t since = 0;   // opsets of the node's domain this entry implements (a domain
    int64_t until = std::numeric_limits<int64_t>::max();  // without an opset import reads 0); outside: exit 3
    std::vector<int> host_inputs;                         // must be host constants to lower
    std::function<void(OpCtx&)> infer;                    // sets dtype and shape of every output
    std::function<void(OpCtx&)> eval;                     // host evaluation (folding); may be empty
    std::function<void(LowerCtx&)> lower;                 // ggml lowering; empty = host-only op
    int64_t fold_limit = int64_t(1) << 24;                // fold only outputs up to this many elements
    std::function<double(OpCtx&)> work;                   // estimated operations of eval (fold only up to kFoldWork)
    bool shape_only = false;                              // eval reads only input shapes (Shape, Size)
    int min_inputs = 0;                                   // inputs that must be present (checked before infer)
    bool seq_inputs = false;                              // takes sequence values (src/ops/sequence.cpp)
    bool string_inputs = false;                           // takes string tensors (host values: they must be constants)
};

// Folding runs at compile time: an evaluation estimated above this many operations is left
// to run time (a host kernel) instead.
constexpr double kFoldWork = 2e8;
// The bound of a host evaluation that must happen to specialize (CompileOptions::max_eval_work) when
// specializing at run time, on the run's own values: about a minute of work.
constexpr double kRunTimeEvalWork = 1e11;

class Registry {
public:
    static const Registry& get();
    // The entry of (domain, op): "", "ai.onnx" and "onnx2ggml" are one domain; others have no entries.
    const OpDef* find(const std::string& domain, const std::string& op) const;
    std::vector<std::string> op_types()
        const;          // sorted, for docs (internal o2g.* ops left out; other domains as domain.Op)
    void add(OpDef d);  // a second entry for the same (domain, op): internal error (exit 4)

private:
    std::unordered_map<std::string, OpDef> defs_;  // by domain + ':' + op
};

// A family's registration function: O2G_OP_FAMILY(conv) { r.add(...); } in src/ops/conv.cpp. The build
// generates the call list from the file names in src/ops (CMakeLists.txt, op_families.inc), so a family is
// never left out by hand and a file without its O2G_OP_FAMILY block fails to link.
#define O2G_OP_FAMILY(name) void register_ops_##name(Registry& r)

}  // namespace onnx2ggml::core
