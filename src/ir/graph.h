// The IR: values (dtype, static shape, optional host constant), nodes with parsed
// attributes, and the graph that owns them. Nodes are kept in topological order.
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/tensor.h"

namespace onnx2ggml::core {

struct Graph;

struct Attr {
    enum Kind {
        Undefined = 0,
        Float = 1,
        Int = 2,
        String = 3,
        TensorK = 4,
        Graph = 5,
        Floats = 6,
        Ints = 7,
        Strings = 8,
        Tensors = 9,
        Graphs = 10,
        SparseTensor = 11,
        SparseTensors = 12,
        TypeProto = 13,
        TypeProtos = 14
    };
    Kind kind = Undefined;
    float f = 0;
    int64_t i = 0;
    std::string s;
    Tensor t;
    std::vector<float> floats;
    std::vector<int64_t> ints;
    std::vector<std::string> strings;
    std::shared_ptr<core::Graph> g;  // kind Graph: a subgraph (If branch, Loop/Scan body)
};
const char* attr_kind_name(Attr::Kind k);

struct Value {
    std::string name;
    DType dtype = DType::Undefined;
    Shape shape;
    bool has_shape = false;               // shape (and dtype) known
    std::vector<std::string> dim_params;  // graph inputs: symbolic dims ("" where static)
    std::optional<Tensor> constant;       // host value known at compile time
    // a sequence (ONNX seq(tensor)): resolved at compile time to the value ids of its elements;
    // sequence ops rewrite themselves into tensor ops (src/ops/sequence.cpp)
    std::optional<std::vector<int>> seq;
    int producer = -1;  // node index, -1 for inputs/initializers
    bool is_initializer = false;
};

struct Node {
    std::string name, op_type, domain;
    std::vector<int> inputs;   // value ids; -1 = omitted optional input
    std::vector<int> outputs;  // value ids; -1 = omitted optional output
    std::map<std::string, Attr> attrs;
    bool folded = false;           // every output is a host constant: nothing to lower
    std::string describe() const;  // "node 'name' (Op)"
};

struct Graph {
    std::string path;  // model file, for messages
    std::string name;
    int64_t ir_version = 0;
    std::string producer;
    std::map<std::string, int64_t> opsets;  // domain ("" = ai.onnx) -> version
    std::vector<Value> values;
    std::vector<Node> nodes;
    std::vector<int> inputs, outputs;  // graph inputs exclude initializers
    // the graph outputs' types as the model declares them (what the API reports before a run; the
    // shapes onnx2ggml computes come from shape inference, never from these)
    std::vector<Value> declared_outputs;
    std::unordered_map<std::string, int> by_name;
    std::vector<std::string> free_vars;  // subgraphs: names read from the graphs around them
    // compare's host reference: float32 is computed as float64 (OpCtx::set_out/set_const promote it), so
    // the reference does not share float32's rounding with the values it checks (promote_float64)
    bool float64 = false;
    double max_eval_work = 2e8;  // CompileOptions::max_eval_work, set by specialize

    int value_id(const std::string& name);    // creates the value if missing
    int find(const std::string& name) const;  // -1 if missing
    int64_t opset(const std::string& domain) const;
    int new_value(const std::string& hint);  // fresh, unique name
};

// Makes every float32 value of g (and of its subgraphs) float64 and sets Graph::float64.
void promote_float64(Graph& g);

}  // namespace onnx2ggml::core
