// The compile pipeline up to the ggml graph:
//   specialize (bind input shapes, infer shapes, fold host values, report unsupported ops)
//   -> optimize (named passes) -> lower (through the Builder).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "lower/lower.h"

namespace onnx2ggml::core {

struct CompileOptions {
    std::map<std::string, Shape> input_shapes;  // --input-shape NAME=1x3x224x224
    bool optimize = true;
    std::vector<std::string> disabled_passes;
    std::map<std::string, Tensor> frozen_inputs;  // graph inputs bound to values at compile time (--freeze)
    // fold every node whose inputs are constants, whatever its size or work: with every input frozen,
    // the host evaluators compute the whole graph (`compare --reference host`)
    bool fold_all = false;
    // the most work (operations) a host evaluation that cannot be left to run time may take (an op whose
    // output shape depends on its input values: NonMaxSuppression): kFoldWork when compiling, where the
    // values come from the model file; run-time specialization raises it (kRunTimeEvalWork), since the
    // evaluation is then the run itself
    double max_eval_work = 2e8;
};

struct UnsupportedOp {
    std::string op_type, node, domain, reason;
    int64_t opset;
    std::string needs_constant;  // a value whose host value would make the node supported
    bool limit = false;          // a value exceeds a limit (LimitExceeded)
};

// Infers every shape and folds every value computable on the host. Throws Error(3) listing
// every unsupported node at once (or fills `report` and returns instead when given).
void specialize(Graph& g, const CompileOptions& opts, std::vector<UnsupportedOp>* report = nullptr);

// After optimize: every live node must be lowerable (host-only ops folded, host inputs constant).
void validate(Graph& g, std::vector<UnsupportedOp>* report = nullptr);
void throw_unsupported(const Graph& g, const std::vector<UnsupportedOp>& bad);

// Fusions and cleanups; returns the names of the passes that changed the graph.
std::vector<std::string> optimize(Graph& g, const CompileOptions& opts);

// Marks the nodes needed for the graph outputs; others are skipped by lower().
std::vector<bool> live_nodes(const Graph& g);

// Lowers the specialized graph: creates the graph inputs, lowers every live non-folded node,
// marks the outputs. Returns the ggml tensors of the graph outputs.
void lower_graph(Graph& g, Builder& b);

}  // namespace onnx2ggml::core
