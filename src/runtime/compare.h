// `onnx2ggml compare`: runs a model with every intermediate value kept (SessionOptions::keep_values),
// computes the same values with an independent reference, and finds the first node whose error
// exceeds the tolerance while its inputs are within it.
//   reference "host": onnx2ggml's host evaluators (every node folded with the inputs frozen, float32
//                     computed as float64), independent of ggml's kernels;
//   reference "ort":  ONNX Runtime (onnxruntime-node from scripts/setup.sh --bench) on the model
//                     rewritten so that every node output is a graph output;
//   otherwise a folder of NAME.npy files, one per value (names escaped by value_file_name).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "ir/tensor.h"
#include "passes/pipeline.h"
#include "runtime/session.h"

namespace onnx2ggml::core {

struct CompareOptions {
    std::string reference = "host";  // host | ort | DIR
    double tolerance = 1e-4;         // max abs error relative to the reference value's max |ref|
    SessionOptions session;          // backend, threads, weights
    CompileOptions copts;            // --freeze, --disable-pass, --no-optimize (input shapes: from the inputs)
    std::string work_dir;            // ort: where the rewritten model, inputs and outputs go (made if missing)
    bool picture = false;            // fill CompareResult::dot (the graph colored by error, runtime/dot.h)
};

struct CompareRow {
    int node = -1;  // index in the optimized graph
    std::string node_name, op_type, ggml_ops, value;
    Shape shape;
    bool compared = false;                     // both sides known
    double max_abs = 0, max_ref = 0, rel = 0;  // rel = max_abs / max|ref| (inf where a side is NaN alone)
    std::string note;                          // why not compared
    bool over = false;                         // rel above the tolerance
    bool first = false;                        // the first node over the tolerance whose inputs are within it
};

struct CompareResult {
    std::vector<CompareRow> rows;  // graph order (the optimized graph's nodes, each output)
    int first = -1;                // index into rows of the first divergence, -1 if none
    std::string reference, backend;
    std::string dot;             // CompareOptions::picture: Graphviz DOT text
    std::string reference_gaps;  // host: the first nodes it could not compute (their values and all after are unknown)
};

// inputs: every graph input by name (not the frozen ones).
CompareResult compare_model(const std::string& model_path, const std::map<std::string, Tensor>& inputs,
                            const CompareOptions& o);

// The host reference: every value of the model computed by the host evaluators with the inputs frozen
// to `inputs` (by name), float32 values computed and returned as float64. Values the host cannot compute
// (an op without an evaluator, and what follows it) are missing; `gaps` names the first few such nodes.
std::map<std::string, Tensor> host_values(const std::string& model_path, const std::map<std::string, Tensor>& inputs,
                                          const CompileOptions& copts, std::string* gaps);

// The file name of a value in a reference folder: the name with every byte outside [A-Za-z0-9._-]
// written as %XX, then ".npy" ("/conv1/Conv_output_0" -> "%2Fconv1%2FConv_output_0.npy").
std::string value_file_name(const std::string& value);

}  // namespace onnx2ggml::core
