// What the C++ API's implementation shares with the C API and the Python module: the data behind
// the public handles, and the conversions between public and core types and errors.
#pragma once
#include <string>
#include <vector>

#include "ir/graph.h"
#include "onnx2ggml/onnx2ggml.hpp"

namespace onnx2ggml {

struct Model::Impl {
    core::Graph graph;  // as loaded: unspecialized, shapes possibly dynamic
    std::vector<TensorInfo> inputs, outputs;
};

struct Tensor::Impl {
    std::string name;
    core::Tensor t;
};

Tensor make_tensor(std::string name, core::Tensor t);
// A core tensor reading the caller's memory in place (`what` names it in errors).
core::Tensor to_core(const TensorRef& r, const std::string& what);
// Inside a catch block: rethrows the exception in flight as an onnx2ggml::Error.
[[noreturn]] void rethrow_as_api_error();

}  // namespace onnx2ggml
