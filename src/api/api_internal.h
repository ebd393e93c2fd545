// What the C++ API's implementation shares with the C API and the Python module: the data behind
// the public handles, and the conversions between public and core types and errors.
#pragma once
#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/pipeline.h"
#include "runtime/session.h"
#include "onnx2ggml/onnx2ggml.hpp"

namespace onnx2ggml {

struct Model::Impl {
    core::Graph graph;  // as loaded: unspecialized, shapes possibly dynamic
    std::vector<TensorInfo> inputs, outputs;
};

struct Tensor::Impl {
    std::string name;
    core::Tensor t;
    std::vector<const char*> cstrs;  // a String tensor's elements as TensorRef reads them (ref())
};

Tensor make_tensor(std::string name, core::Tensor t);
Model model_of(core::Graph loaded);     // a Model of a graph as loaded
TensorInfo info(const core::Value& v);  // a graph input's or output's name, dtype, shape and dim names
struct TensorAccess {
    static const Tensor::Impl& impl(const Tensor& t) { return *t.impl_; }
};
inline const core::Tensor& core_of(const Tensor& t) { return TensorAccess::impl(t).t; }
// The weights' rules on the model `loaded` (as loaded, before passes), a warning for a rule naming no
// initializer; with a GGUF, its weights (refused when written for another model) and, unless rules are
// given, the rules it was written with.
core::WeightRules rules_for(const core::Graph& loaded, const std::string& base, const std::vector<std::string>& rules,
                            const std::string& gguf);
// Where a built core Session's nodes run (Session::placement, and `inspect --backend`).
Placement placement_of(const core::Session& s);
// The graph options of CompileOptions as the core takes them (input shapes, frozen inputs, passes).
core::CompileOptions graph_options(const CompileOptions& o);
// A core tensor reading the caller's memory in place (`what` names it in errors).
core::Tensor to_core(const TensorRef& r, const std::string& what);
// Inside a catch block: rethrows the exception in flight as an onnx2ggml::Error.
[[noreturn]] void rethrow_as_api_error();

}  // namespace onnx2ggml
