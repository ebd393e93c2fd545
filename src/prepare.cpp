#include "onnx2ggml_core.h"

#include "onnx/loader.h"

namespace onnx2ggml::core {

Graph prepare(const std::string& model_path, const CompileOptions& opts) {
    Graph g = load_onnx(model_path);
    specialize(g, opts);
    optimize(g, opts);
    validate(g);
    return g;
}

}  // namespace onnx2ggml::core
