// `compile`: writes a standalone ggml program for a specialized graph: model.cpp (the
// recorded ggml calls), model.h (I/O tables), main.cpp, npy.h, CMakeLists.txt, model.gguf; for a graph
// with host kernels also o2g_host.h and o2g_host/ (the evaluators' sources, built by the CMakeLists).
#pragma once
#include <memory>
#include <string>
#include <vector>

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

// The steps of emit_project, for codegen/dynamic.cpp. One specialization's program before anything is written:
// the built graph (its weights) and the text of model::build and model::output_shape (where "@DIMS@" stands for
// the dynamic dims' declarations), the host kernels' records.
struct BuiltGraph;
struct Recorded {
    std::unique_ptr<BuiltGraph> bg;
    std::string code;
    std::vector<std::string> blobs;
    size_t max_tensors = 0, graph_size = 0;
    Recorded();
    Recorded(Recorded&&) noexcept;
    Recorded& operator=(Recorded&&) noexcept;
    ~Recorded();
};
Recorded record_program(Graph& g, const WeightRules& weight_rules);
// The dynamic dims of a program (compile --dim): names, the values each takes, per graph input and axis the
// dim it is (-1: none); `note` and `helpers` go at the top of model.cpp.
struct ProgramDims {
    std::vector<std::string> names;
    std::vector<std::vector<int64_t>> values;
    std::vector<std::vector<int>> input_dims;
    std::string note, helpers;
};
// Writes the project of `g` (recorded as `r`) with model.cpp's functions `code`.
EmitReport write_program(const Graph& g, const Recorded& r, const std::string& code, const ProgramDims& dims,
                         const std::string& outdir, const std::string& model_path, const GgufMeta& model_meta);

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
