// Builds the ggml graph of a specialized Graph: one function used by both the in-process
// Session and the code generator, so `run` and `compile` make the same ggml calls.
#pragma once
#include <map>
#include <memory>
#include <string>

#include "ir/graph.h"
#include "lower/builder.h"

namespace onnx2ggml::core {

struct BuiltGraph {
    ggml_context* wctx = nullptr;  // weight tensors (no data: uploaded or written to GGUF)
    ggml_context* cctx = nullptr;  // compute tensors and the graph
    std::unique_ptr<Builder> b;
    ggml_cgraph* gf = nullptr;
    size_t max_tensors = 0, graph_size = 0;
    BuiltGraph() = default;
    BuiltGraph(const BuiltGraph&) = delete;
    BuiltGraph& operator=(const BuiltGraph&) = delete;
    ~BuiltGraph();
};

// weight_rules: how MatMul/Gemm/Conv weights are stored (--weights, --weights-rule, --gguf; Builder::weight_rules).
// share: where the initializers' weights live when several graphs of the model share them (see WeightShare).
// keep_values: every value's tensor is a graph output too, readable after a run (Builder::keep_values).
// no_inplace: Builder::no_inplace.
std::unique_ptr<BuiltGraph> build_graph(Graph& g, bool record, const WeightRules& weight_rules = {},
                                        WeightShare* share = nullptr, bool keep_values = false,
                                        bool no_inplace = false);

// "OP_NAME" -> count of the ggml graph's nodes
std::map<std::string, int> ggml_op_histogram(const ggml_cgraph* gf);

}  // namespace onnx2ggml::core
