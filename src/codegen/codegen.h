// `compile`: writes a standalone ggml program for a specialized graph: model.cpp (the
// recorded ggml calls), model.h (I/O tables), main.cpp, npy.h, CMakeLists.txt, model.gguf; for a graph
// with host kernels also o2g_host.h and o2g_host/ (the evaluators' sources, built by the CMakeLists).
#pragma once
#include <string>

#include "ggml.h"

#include "ir/graph.h"
#include "lower/weights.h"

namespace onnx2ggml::core {

struct EmitReport {
    size_t weights = 0, weight_bytes = 0, lines = 0;
};

// `model_meta`: what identifies the model and the weights' rules in model.gguf (gguf_model_meta), so that
// `run --gguf` can take it
struct GgufMeta {
    std::vector<std::pair<std::string, std::string>> strings;
    std::vector<std::pair<std::string, std::vector<std::string>>> arrays;
};
EmitReport emit_project(Graph& g, const std::string& outdir, const std::string& model_path,
                        const WeightRules& weight_rules = {}, const GgufMeta& model_meta = {});

// The GGUF metadata of a model as loaded (before passes) and its rules: gguf_keys::model_key, initializers,
// weights, rules
GgufMeta gguf_model_meta(const Graph& loaded, const WeightRules& rules);

// The GGUF weights writer of `compile` and `quantize` (also used by the tests' round trip): the tensor data
// is written one weight at a time (Weight::data: converted or quantized then), after the header, with a
// progress bar. Per tensor it records the initializer it comes from and whether it is stored transposed
// (gguf_keys::onnx_names, transposed). `blobs`: byte strings stored as arrays of uint8 (the host kernels' records).
struct Weight;
void write_gguf(const std::string& path, const std::vector<Weight>& weights,
                const std::vector<std::pair<std::string, std::string>>& meta,
                const std::vector<std::pair<std::string, std::vector<std::string>>>& arrays = {},
                const std::vector<std::pair<std::string, std::string>>& blobs = {});

}  // namespace onnx2ggml::core
