// `compile`: writes a standalone ggml program for a specialized graph: model.cpp (the
// recorded ggml calls), model.h (I/O tables), main.cpp, npy.h, CMakeLists.txt, model.gguf.
#pragma once
#include <string>

#include "ggml.h"

#include "ir/graph.h"

namespace onnx2ggml {

struct EmitReport { size_t weights = 0, weight_bytes = 0, lines = 0; };

EmitReport emit_project(Graph& g, const std::string& outdir, const std::string& model_path, ggml_type weight_type = GGML_TYPE_F32);

// GGUF weights writer (also used by the tests' round trip): the tensor data is written one
// weight at a time (Weight::data), after the header.
struct Weight;
void write_gguf(const std::string& path, const std::vector<Weight>& weights, const std::vector<std::pair<std::string, std::string>>& meta);

}  // namespace onnx2ggml
