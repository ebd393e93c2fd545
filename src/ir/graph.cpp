#include "ir/graph.h"

namespace onnx2ggml::core {

const char* attr_kind_name(Attr::Kind k) {
    static const char* names[] = {"undefined",      "float",      "int",        "string",  "tensor", "graph",
                                  "floats",         "ints",       "strings",    "tensors", "graphs", "sparse_tensor",
                                  "sparse_tensors", "type_proto", "type_protos"};
    return (k >= 0 && k <= 14) ? names[k] : "unknown";
}

std::string Node::describe() const {
    return "node '" + name + "' (" + (domain.empty() || domain == "ai.onnx" ? "" : domain + ".") + op_type + ")";
}

int Graph::value_id(const std::string& name) {
    auto it = by_name.find(name);
    if (it != by_name.end()) return it->second;
    Value v;
    v.name = name;
    values.push_back(std::move(v));
    by_name[name] = int(values.size()) - 1;
    return int(values.size()) - 1;
}

int Graph::find(const std::string& name) const {
    auto it = by_name.find(name);
    return it == by_name.end() ? -1 : it->second;
}

int64_t Graph::opset(const std::string& domain) const {
    auto it = opsets.find(domain == "ai.onnx" ? "" : domain);
    return it == opsets.end() ? 0 : it->second;
}

int Graph::new_value(const std::string& hint) {
    std::string n = hint;
    for (int k = 1; by_name.count(n); ++k) n = hint + "__" + std::to_string(k);
    return value_id(n);
}

void promote_float64(Graph& g) {
    g.float64 = true;
    for (Value& v : g.values) {
        if (v.dtype == DType::F32) v.dtype = DType::F64;
        if (v.constant && v.constant->dtype == DType::F32) v.constant = v.constant->cast(DType::F64);
    }
    for (Node& n : g.nodes)
        for (auto& kv : n.attrs)
            if (kv.second.g) {  // a copy: subgraphs may be shared with other graphs
                auto sub = std::make_shared<Graph>(*kv.second.g);
                promote_float64(*sub);
                kv.second.g = sub;
            }
}

}  // namespace onnx2ggml::core
