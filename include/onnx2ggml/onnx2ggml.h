// onnx2ggml public API: load an ONNX model, specialize and optimize it, then either run it
// in-process on a ggml backend (Session) or write a standalone ggml program (emit_project).
#pragma once
#include <string>

#include "codegen/codegen.h"
#include "ir/graph.h"
#include "passes/pipeline.h"
#include "runtime/session.h"
#include "runtime/specializing_session.h"
#include "util/error.h"
#include "util/io.h"

namespace onnx2ggml {

// load_onnx + specialize + optimize: the graph that run and compile share.
Graph prepare(const std::string& model_path, const CompileOptions& opts);

}  // namespace onnx2ggml
