#include "ops/op.h"

#include <algorithm>
#include <map>

namespace onnx2ggml {

Value& OpCtx::in(int i) {
    if (!has(i)) fail("input " + std::to_string(i) + " is missing");
    return g_.values[node().inputs[i]];
}

Value& OpCtx::out(int i) {
    if (!has_out(i)) internal_error(where() + ": output " + std::to_string(i) + " is missing");
    return g_.values[node().outputs[i]];
}

const Tensor& OpCtx::cval(int i) {
    if (!is_const(i)) {
        std::string name = has(i) ? in(i).name : std::string("");
        std::string msg = "input " + std::to_string(i) + " ('" + name + "') must be a compile-time constant";
        throw NeedsConstant(where() + ": " + msg, msg, name);
    }
    return *in(i).constant;
}

const Attr* OpCtx::attr(const std::string& n, Attr::Kind k) const {
    auto it = node().attrs.find(n);
    if (it == node().attrs.end()) return nullptr;
    if (it->second.kind != k)
        fail("attribute '" + n + "' has type " + attr_kind_name(it->second.kind) + ", expected " + attr_kind_name(k));
    return &it->second;
}

int64_t OpCtx::ai(const std::string& n, int64_t def) const { auto a = attr(n, Attr::Int); return a ? a->i : def; }
float OpCtx::af(const std::string& n, float def) const { auto a = attr(n, Attr::Float); return a ? a->f : def; }
std::string OpCtx::as(const std::string& n, const std::string& def) const { auto a = attr(n, Attr::String); return a ? a->s : def; }
std::vector<int64_t> OpCtx::ais(const std::string& n, const std::vector<int64_t>& def) const {
    auto a = attr(n, Attr::Ints);
    return a ? a->ints : def;
}
std::vector<float> OpCtx::afs(const std::string& n, const std::vector<float>& def) const {
    auto a = attr(n, Attr::Floats);
    return a ? a->floats : def;
}
std::vector<std::string> OpCtx::astrs(const std::string& n) const {
    auto a = attr(n, Attr::Strings);
    return a ? a->strings : std::vector<std::string>{};
}
const Tensor* OpCtx::at(const std::string& n) const { auto a = attr(n, Attr::TensorK); return a ? &a->t : nullptr; }

void OpCtx::set_out(int i, DType t, const Shape& s) {
    if (!has_out(i)) return;
    for (int64_t d : s)
        if (d < 0) fail("computed a negative output dimension: " + shape_str(s));
    shape_numel(s);  // overflow check
    Value& v = out(i);
    v.dtype = t;
    v.shape = s;
    v.has_shape = true;
}

void OpCtx::set_seq(int i, std::vector<int> elements) {
    if (!has_out(i)) return;
    Value& v = out(i);
    v.seq = std::move(elements);
    v.has_shape = true;
    v.shape.clear();
}

int OpCtx::new_const(const Tensor& t, const std::string& hint) {
    int id = g_.new_value(hint);
    Value& v = g_.values[id];
    v.constant = t;
    v.dtype = t.dtype;
    v.shape = t.shape;
    v.has_shape = true;
    return id;
}

Node OpCtx::make_node(const std::string& op, std::vector<int> ins, std::vector<int> outs) const {
    Node n;
    n.op_type = op;
    n.name = node().name + "/" + op + "_" + std::to_string(g_.nodes.size() + g_.values.size());
    n.inputs = std::move(ins);
    n.outputs = std::move(outs);
    return n;
}

void OpCtx::set_const(int i, Tensor t) {
    if (!has_out(i)) return;
    set_out(i, t.dtype, t.shape);
    out(i).constant = std::move(t);
}

int OpCtx::axis(int64_t a, int r) {
    if (r == 0) fail("axis " + std::to_string(a) + " given for a scalar (rank 0) tensor");
    if (a < -r || a >= r) fail("axis " + std::to_string(a) + " is out of range for rank " + std::to_string(r));
    return int(a < 0 ? a + r : a);
}

std::string OpCtx::where() const {
    return g_.path + ": " + node().describe() + ", opset " + std::to_string(opset());
}

void OpCtx::fail(const std::string& msg) const { throw Error(kExitBadInput, where() + ": " + msg, msg); }
void OpCtx::fail_unsupported(const std::string& msg) const { throw Error(kExitUnsupported, where() + ": " + msg, msg); }
void OpCtx::fail_limit(const std::string& msg) const { throw LimitExceeded(where() + ": " + msg, msg); }

// Axes moved from attribute to input in opset 13 (Squeeze, Unsqueeze; src/ops/reshape.cpp).
bool OpCtx::op_is_input_axes() const {
    const std::string& op = node().op_type;
    return op == "Squeeze" || op == "Unsqueeze";
}

void Registry::add(OpDef d) {
    static const std::map<std::string, int> arity = {
        {"Add", 2}, {"Sub", 2}, {"Mul", 2}, {"Div", 2}, {"Pow", 2}, {"Mod", 2}, {"Equal", 2}, {"Less", 2},
        {"Greater", 2}, {"LessOrEqual", 2}, {"GreaterOrEqual", 2}, {"And", 2}, {"Or", 2}, {"Xor", 2}, {"Where", 3},
        {"Conv", 2}, {"ConvTranspose", 2}, {"MatMul", 2}, {"Gemm", 2}, {"Gather", 2}, {"GatherElements", 2},
        {"GatherND", 2}, {"Expand", 2}, {"Tile", 2}, {"PRelu", 2}, {"BatchNormalization", 5},
        {"InstanceNormalization", 3}, {"LayerNormalization", 2}, {"CastLike", 2}, {"Range", 3}, {"Compress", 2},
        {"ReverseSequence", 2}, {"OneHot", 3}, {"CumSum", 2}, {"NegativeLogLikelihoodLoss", 2},
        {"SoftmaxCrossEntropyLoss", 2}, {"Slice", 1}, {"Resize", 1}, {"Upsample", 1}};
    auto it = arity.find(d.op_type);
    if (it != arity.end()) d.min_inputs = it->second;
    defs_.push_back(std::move(d));
}

const OpDef* Registry::find(const std::string& domain, const std::string& op) const {
    if (!(domain.empty() || domain == "ai.onnx" || domain == "onnx2ggml")) return nullptr;
    for (const auto& d : defs_)
        if (d.op_type == op) return &d;
    return nullptr;
}

std::vector<std::string> Registry::op_types() const {
    std::vector<std::string> r;
    for (const auto& d : defs_)
        if (d.op_type.rfind("o2g.", 0) != 0) r.push_back(d.op_type);
    std::sort(r.begin(), r.end());
    return r;
}

const Registry& Registry::get() {
    static Registry r = [] {
        Registry x;
        register_elementwise(x);
        register_constant(x);
        register_reshape(x);
        register_concat(x);
        register_slice(x);
        register_gather(x);
        register_conv(x);
        register_pool(x);
        register_norm(x);
        register_matmul(x);
        register_softmax(x);
        register_resize(x);
        register_reduce(x);
        register_indexing(x);
        register_quant(x);
        register_rnn(x);
        register_signal(x);
        register_text(x);
        register_sampling(x);
        register_sequence(x);
        register_control(x);
        return x;
    }();
    return r;
}

}  // namespace onnx2ggml
