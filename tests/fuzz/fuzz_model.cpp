// libFuzzer target: model loading + shape inference + folding + lowering (graph build, no
// compute). Every input must end in a result or an onnx2ggml::core::Error, never a crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "onnx/loader.h"
#include "onnx2ggml_core.h"
#include "runtime/build.h"
#include "util/limits.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    onnx2ggml::core::set_memory_limit(uint64_t(256) << 20);
    try {
        std::string bytes(reinterpret_cast<const char*>(data), size);
        onnx2ggml::core::Graph g = onnx2ggml::core::load_onnx_from_bytes(bytes, "fuzz.onnx", "/nonexistent-fuzz-dir");
        onnx2ggml::core::CompileOptions opts;
        for (int id : g.inputs)  // bind dynamic dims to 1 so that shape inference runs
            for (auto& d : g.values[id].shape)
                if (d < 0) d = 1;
        onnx2ggml::core::specialize(g, opts);
        onnx2ggml::core::optimize(g, opts);
        onnx2ggml::core::validate(g);
        auto bg = onnx2ggml::core::build_graph(g, true);
    } catch (const onnx2ggml::core::Error&) {}
    return 0;
}
