// Pictures of a model (`inspect --dot/--svg`, `compare --svg`): Graphviz DOT text of the ONNX graph
// after specialization and fusion (nodes colored by the backend that computes them, host kernels
// marked, shapes on the edges, clusters by the ONNX node-name prefix: PyTorch's module path), or of
// the lowered ggml graph; in compare mode nodes are colored by their error against the reference.
#pragma once
#include <string>

#include "ir/graph.h"
#include "runtime/compare.h"
#include "runtime/session.h"

namespace onnx2ggml::core {

struct DotOptions {
    const Session* session = nullptr;        // backend colors (needs a built session)
    const CompareResult* compare = nullptr;  // error colors instead
    double tolerance = 1e-4;
    int cluster_depth = 3;  // nested clusters of at most this many name components
};

std::string onnx_graph_dot(const Graph& g, const DotOptions& o);
std::string ggml_graph_dot(const Session& s);

// Writes `dot` to `file`: as DOT text, or as SVG through Graphviz's `dot -Tsvg` when `svg`.
void write_picture(const std::string& dot, const std::string& file, bool svg);

}  // namespace onnx2ggml::core
