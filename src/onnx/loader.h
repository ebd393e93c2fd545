// ModelProto -> Graph. Parses initializers (raw, typed and external data confined to
// the model's folder), attributes of every kind, graph inputs with their symbolic dims,
// and sorts the nodes topologically. Errors name the file and the node.
#pragma once
#include <string>

#include "ir/graph.h"

namespace onnx2ggml::core {

Graph load_onnx(const std::string& path);
Graph load_onnx_from_bytes(const std::string& bytes, const std::string& path_for_messages, const std::string& base_dir);

// Reads a serialized onnx.TensorProto (the .pb files of the ONNX backend test data).
Tensor load_tensor_pb(const std::string& path, std::string* name = nullptr);

}  // namespace onnx2ggml::core
