// The internal API (namespace onnx2ggml::core) in one include: load an ONNX model, specialize and
// optimize it, then either run it in-process on a ggml backend (Session) or write a standalone ggml
// program (emit_project). Applications use the public API instead (include/onnx2ggml/).
#pragma once
#include <string>

#include "codegen/codegen.h"
#include "ir/graph.h"
#include "passes/pipeline.h"
#include "runtime/session.h"
#include "runtime/specializing_session.h"
#include "util/error.h"
#include "util/io.h"

namespace onnx2ggml::core {

// load_onnx + specialize + optimize: the graph that run and compile share.
Graph prepare(const std::string& model_path, const CompileOptions& opts);

}  // namespace onnx2ggml::core
