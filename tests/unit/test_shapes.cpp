// Shape rules, one or more tests per op family (src/ops/<family>.cpp): a small Graph built in memory,
// specialize() run over it, and every output's dtype and shape checked against values derived by hand
// from the ONNX operator spec (onnx.defs.get_schema(op).doc; the formula is in the comment of each
// check); the expected values are written down, not computed, so a wrong rule cannot agree with itself.
// Cross-checked with onnx.shape_inference (Debian's onnx): Conv SAME_LOWER, ConvTranspose, MaxPool ceil_mode,
// Pad, Slice agree; AveragePool "cp" differs (onnx says 5: it does not drop a ceil-mode window that starts
// in the end padding, which the spec's text and PyTorch do: 4).
// Also: bad models fail with exit 2 and name the node, and the TEMPLATE family (src/ops/TEMPLATE.cpp,
// registered here into a private Registry only) keeps its documented behaviour.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ops/op.h"
#include "passes/pipeline.h"
#include "util/error.h"

namespace onnx2ggml::core {
O2G_OP_FAMILY(TEMPLATE);  // src/ops/TEMPLATE.cpp, compiled as the object library o2g_op_template
}

using namespace onnx2ggml::core;

namespace {

Attr ai(int64_t v) {
    Attr a;
    a.kind = Attr::Int;
    a.i = v;
    return a;
}
Attr af(float v) {
    Attr a;
    a.kind = Attr::Float;
    a.f = v;
    return a;
}
Attr as(const std::string& v) {
    Attr a;
    a.kind = Attr::String;
    a.s = v;
    return a;
}
Attr ais(std::vector<int64_t> v) {
    Attr a;
    a.kind = Attr::Ints;
    a.ints = std::move(v);
    return a;
}
Attr afs(std::vector<float> v) {
    Attr a;
    a.kind = Attr::Floats;
    a.floats = std::move(v);
    return a;
}
Attr at(const Tensor& t) {
    Attr a;
    a.kind = Attr::TensorK;
    a.t = t;
    return a;
}

Tensor i64(std::vector<int64_t> v) {
    Shape s{int64_t(v.size())};
    return Tensor::from_i64(v, s);
}
Tensor f32(std::vector<float> v) {
    Shape s{int64_t(v.size())};
    return Tensor::from_f32(v, s);
}
Tensor f32_scalar(float v) { return Tensor::from_f32({v}, {}); }
Tensor typed(DType t, const Shape& s) { return Tensor::zeros(t, s); }

// A graph under construction: inputs (shapes known, values not), constants (initializers), nodes.
struct TestGraph {
    Graph g;
    explicit TestGraph(int64_t opset = 17) {
        g.path = "shapes.onnx";
        g.opsets[""] = opset;
    }
    int input(const std::string& name, DType t, const Shape& s) {
        int id = g.value_id(name);
        Value& v = g.values[size_t(id)];
        v.dtype = t;
        v.shape = s;
        v.has_shape = true;
        v.dim_params.assign(s.size(), "");
        g.inputs.push_back(id);
        return id;
    }
    int constant(const std::string& name, const Tensor& t) {
        int id = g.value_id(name);
        Value& v = g.values[size_t(id)];
        v.dtype = t.dtype;
        v.shape = t.shape;
        v.has_shape = true;
        v.constant = t;
        v.is_initializer = true;
        return id;
    }
    // inputs by name ("" = omitted); the node is named "<op>_<first output>"
    Node& node(const std::string& op, const std::vector<std::string>& ins, const std::vector<std::string>& outs,
               std::map<std::string, Attr> attrs = {}) {
        Node n;
        n.op_type = op;
        n.name = op + "_" + outs.at(0);
        for (auto& i : ins) n.inputs.push_back(i.empty() ? -1 : g.value_id(i));
        for (auto& o : outs) {
            int id = o.empty() ? -1 : g.value_id(o);
            n.outputs.push_back(id);
            if (id >= 0) g.values[size_t(id)].producer = int(g.nodes.size());
        }
        n.attrs = std::move(attrs);
        g.nodes.push_back(std::move(n));
        return g.nodes.back();
    }
    // every node output is a graph output, or only `outs` (sequences cannot be graph outputs)
    TestGraph& run(const std::vector<std::string>& outs = {}) {
        for (auto& n : g.nodes)
            for (int o : n.outputs)
                if (o >= 0 && outs.empty() && std::find(g.outputs.begin(), g.outputs.end(), o) == g.outputs.end())
                    g.outputs.push_back(o);
        for (auto& o : outs) g.outputs.push_back(g.find(o));
        specialize(g, {});
        return *this;
    }
    const Value& v(const std::string& name) {
        int id = g.find(name);
        if (id < 0) throw std::runtime_error("no value " + name);
        return g.values[size_t(id)];
    }
};

#define EXPECT_VALUE(tg, name, dt, ...)                   \
    do {                                                  \
        const Value& v_ = (tg).v(name);                   \
        EXPECT_TRUE(v_.has_shape) << name;                \
        EXPECT_EQ(v_.dtype, dt) << name;                  \
        EXPECT_EQ(v_.shape, (Shape __VA_ARGS__)) << name; \
    } while (0)

// specialize must fail with `code`, naming the node and saying `what`.
void expect_error(TestGraph& t, int code, const std::string& node, const std::string& what) {
    try {
        t.run();
        ADD_FAILURE() << "no error for " << node;
    } catch (const Error& e) {
        EXPECT_EQ(e.code, code) << e.what();
        EXPECT_NE(std::string(e.what()).find("'" + node + "'"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
}

constexpr DType F32 = DType::F32, I64 = DType::I64, I32 = DType::I32, U8 = DType::U8, I8 = DType::I8, B = DType::Bool;

}  // namespace

// ---- conv ------------------------------------------------------------------------------------
TEST(Shapes, Conv) {
    TestGraph t;
    t.input("x", F32, {1, 3, 10, 10});
    t.input("w", F32, {8, 3, 3, 3});
    t.input("x7", F32, {1, 3, 7, 7});
    t.input("w7", F32, {4, 3, 3, 3});
    t.input("xg", F32, {1, 4, 9, 9});
    t.input("wg", F32, {6, 2, 3, 3});
    t.input("x1", F32, {2, 3, 20});
    t.input("w1", F32, {5, 3, 4});
    // out = floor((in + pb + pe - ((k - 1) * d + 1)) / s) + 1
    t.node("Conv", {"x", "w"}, {"y"}, {{"strides", ais({2, 2})}, {"pads", ais({1, 1, 1, 1})}});  // (10+2-3)/2+1 = 5
    // SAME_*: out = ceil(in / s) whatever the kernel; VALID: (7-3)/2+1 = 3
    t.node("Conv", {"x7", "w7"}, {"su"}, {{"strides", ais({2, 2})}, {"auto_pad", as("SAME_UPPER")}});
    t.node("Conv", {"x7", "w7"}, {"sl"}, {{"strides", ais({2, 2})}, {"auto_pad", as("SAME_LOWER")}});
    t.node("Conv", {"x7", "w7"}, {"va"}, {{"strides", ais({2, 2})}, {"auto_pad", as("VALID")}});
    // group 2 (w [M, C/group, k..]), dilation 2: effective kernel 5, 9-5+1 = 5
    t.node("Conv", {"xg", "wg"}, {"gd"}, {{"group", ai(2)}, {"dilations", ais({2, 2})}});
    t.node("Conv", {"x1", "w1"}, {"c1"});  // 1-D: 20-4+1 = 17
    t.run();
    EXPECT_VALUE(t, "y", F32, {1, 8, 5, 5});
    EXPECT_VALUE(t, "su", F32, {1, 4, 4, 4});
    EXPECT_VALUE(t, "sl", F32, {1, 4, 4, 4});
    EXPECT_VALUE(t, "va", F32, {1, 4, 3, 3});
    EXPECT_VALUE(t, "gd", F32, {1, 6, 5, 5});
    EXPECT_VALUE(t, "c1", F32, {2, 5, 17});
}

TEST(Shapes, ConvTranspose) {
    TestGraph t;
    t.input("x", F32, {1, 2, 5, 5});
    t.input("w", F32, {2, 3, 3, 3});  // [C, M/group, k..]
    // out = s * (in - 1) + output_padding + ((k - 1) * d + 1) - pb - pe = 8 + 1 + 3 - 2 = 10
    t.node("ConvTranspose", {"x", "w"}, {"y"},
           {{"strides", ais({2, 2})}, {"pads", ais({1, 1, 1, 1})}, {"output_padding", ais({1, 1})}});
    // output_shape given: the output has that spatial shape (pads derived)
    t.node("ConvTranspose", {"x", "w"}, {"z"}, {{"strides", ais({2, 2})}, {"output_shape", ais({10, 11})}});
    t.run();
    EXPECT_VALUE(t, "y", F32, {1, 3, 10, 10});
    EXPECT_VALUE(t, "z", F32, {1, 3, 10, 11});
}

TEST(Shapes, ConvChannelMismatchIsExit2) {
    TestGraph t;
    t.input("x", F32, {1, 3, 10, 10});
    t.input("w", F32, {8, 4, 3, 3});
    t.node("Conv", {"x", "w"}, {"y"});
    expect_error(t, kExitBadInput, "Conv_y", "");
}

// ---- pool ------------------------------------------------------------------------------------
TEST(Shapes, Pool) {
    TestGraph t;
    t.input("x", F32, {1, 2, 8, 8});
    t.input("x10", F32, {1, 1, 10});
    t.input("g", F32, {2, 3, 5, 7});
    // floor((8 - 3) / 2) + 1 = 3; ceil_mode: ceil(5 / 2) + 1 = 4 (the last window starts at 6 < 8)
    t.node("MaxPool", {"x"}, {"fl", "idx"}, {{"kernel_shape", ais({3, 3})}, {"strides", ais({2, 2})}});
    t.node("MaxPool", {"x"}, {"ce"}, {{"kernel_shape", ais({3, 3})}, {"strides", ais({2, 2})}, {"ceil_mode", ai(1)}});
    // ceil_mode and a window that would start in the end padding only: in 8, k 2, s 2, pads 0/1:
    // ceil((8 + 1 - 2) / 2) + 1 = 5, but window 5 would start at 8 >= 8 + 0 (begin pad): 4
    t.node(
        "AveragePool", {"x"}, {"cp"},
        {{"kernel_shape", ais({2, 2})}, {"strides", ais({2, 2})}, {"pads", ais({0, 0, 1, 1})}, {"ceil_mode", ai(1)}});
    t.node("AveragePool", {"x"}, {"su"},
           {{"kernel_shape", ais({3, 3})}, {"strides", ais({3, 3})}, {"auto_pad", as("SAME_UPPER")}});  // ceil(8/3) = 3
    t.node("MaxPool", {"x10"}, {"dl"}, {{"kernel_shape", ais({3})}, {"dilations", ais({2})}});   // 10 - 5 + 1 = 6
    t.node("LpPool", {"x"}, {"lp"}, {{"kernel_shape", ais({2, 2})}, {"strides", ais({2, 2})}});  // 4
    t.node("GlobalAveragePool", {"g"}, {"ga"});
    t.node("GlobalMaxPool", {"g"}, {"gm"});
    t.run();
    EXPECT_VALUE(t, "fl", F32, {1, 2, 3, 3});
    EXPECT_VALUE(t, "idx", I64, {1, 2, 3, 3});
    EXPECT_VALUE(t, "ce", F32, {1, 2, 4, 4});
    EXPECT_VALUE(t, "cp", F32, {1, 2, 4, 4});
    EXPECT_VALUE(t, "su", F32, {1, 2, 3, 3});
    EXPECT_VALUE(t, "dl", F32, {1, 1, 6});
    EXPECT_VALUE(t, "lp", F32, {1, 2, 4, 4});
    EXPECT_VALUE(t, "ga", F32, {2, 3, 1, 1});
    EXPECT_VALUE(t, "gm", F32, {2, 3, 1, 1});
}

// ---- norm ------------------------------------------------------------------------------------
TEST(Shapes, Norm) {
    TestGraph t(18);
    t.input("x", F32, {2, 3, 4, 4});
    for (const char* n : {"s", "b", "m", "v"}) t.input(n, F32, {3});
    t.input("l", F32, {2, 5, 8});
    t.input("ls", F32, {8});
    t.input("lb", F32, {8});
    t.constant("gs", f32({1, 1, 1}));  // GroupNormalization's scale and bias are host inputs ([num_groups] at opset 18)
    t.node("BatchNormalization", {"x", "s", "b", "m", "v"}, {"bn"});
    t.node("InstanceNormalization", {"x", "s", "b"}, {"in"});
    // LayerNormalization axis -1: Y like X; Mean and InvStdDev keep the reduced dims as 1: [2, 5, 1]
    t.node("LayerNormalization", {"l", "ls", "lb"}, {"ln", "mean", "isd"}, {{"axis", ai(-1)}});
    t.node("GroupNormalization", {"x", "gs", "gs"}, {"gn"}, {{"num_groups", ai(3)}});
    t.node("LRN", {"x"}, {"lrn"}, {{"size", ai(3)}});
    t.node("MeanVarianceNormalization", {"x"}, {"mvn"});
    t.run();
    EXPECT_VALUE(t, "bn", F32, {2, 3, 4, 4});
    EXPECT_VALUE(t, "in", F32, {2, 3, 4, 4});
    EXPECT_VALUE(t, "ln", F32, {2, 5, 8});
    EXPECT_VALUE(t, "mean", F32, {2, 5, 1});
    EXPECT_VALUE(t, "isd", F32, {2, 5, 1});
    EXPECT_VALUE(t, "gn", F32, {2, 3, 4, 4});
    EXPECT_VALUE(t, "lrn", F32, {2, 3, 4, 4});
    EXPECT_VALUE(t, "mvn", F32, {2, 3, 4, 4});
}

TEST(Shapes, NormBadAxesIsExit2) {
    TestGraph t(13);
    t.input("x", F32, {2, 3, 4});
    t.node("MeanVarianceNormalization", {"x"}, {"y"}, {{"axes", ais({0, 3})}});  // axes in [-3, 2]
    expect_error(t, kExitBadInput, "MeanVarianceNormalization_y", "axis 3 is out of range");
}

// ---- matmul ----------------------------------------------------------------------------------
TEST(Shapes, MatMulGemmEinsum) {
    TestGraph t;
    t.input("a", F32, {2, 1, 3, 4});
    t.input("b", F32, {5, 4, 6});
    t.input("v", F32, {4});
    t.input("m", F32, {3, 4});
    t.input("n", F32, {4, 6});
    t.input("g", F32, {4, 3});
    t.input("h", F32, {5, 4});
    t.input("e1", F32, {2, 3, 4});
    t.input("e2", F32, {2, 4, 5});
    t.node("MatMul", {"a", "b"}, {"ab"});  // batch dims [2,1] and [5] broadcast to [2,5]
    t.node("MatMul", {"v", "n"}, {"vn"});  // 1-D A: prepended 1 removed
    t.node("MatMul", {"m", "v"}, {"mv"});  // 1-D B: appended 1 removed
    t.node("MatMul", {"v", "v"}, {"vv"});  // both: a scalar
    t.node("Gemm", {"g", "h"}, {"gemm"}, {{"transA", ai(1)}, {"transB", ai(1)}});  // A' [3,4] B' [4,5]
    t.node("Einsum", {"e1", "e2"}, {"es"}, {{"equation", as("bij,bjk->bik")}});
    t.node("Einsum", {"e1"}, {"et"}, {{"equation", as("bij->jb")}});  // b = 2, i = 3 summed, j = 4: [4, 2]
    t.run();
    EXPECT_VALUE(t, "ab", F32, {2, 5, 3, 6});
    EXPECT_VALUE(t, "vn", F32, {6});
    EXPECT_VALUE(t, "mv", F32, {3});
    EXPECT_VALUE(t, "vv", F32, {});
    EXPECT_VALUE(t, "gemm", F32, {3, 5});
    EXPECT_VALUE(t, "es", F32, {2, 3, 5});
    EXPECT_VALUE(t, "et", F32, {4, 2});
}

TEST(Shapes, MatMulInnerMismatchIsExit2) {
    TestGraph t;
    t.input("a", F32, {3, 4});
    t.input("b", F32, {5, 6});
    t.node("MatMul", {"a", "b"}, {"y"});
    expect_error(t, kExitBadInput, "MatMul_y", "");
}

// ---- softmax ---------------------------------------------------------------------------------
TEST(Shapes, SoftmaxAndLosses) {
    TestGraph t(13);
    t.input("x", F32, {2, 5, 3});
    t.input("tg", I64, {2, 3});
    t.node("Softmax", {"x"}, {"sm"}, {{"axis", ai(-2)}});
    t.node("LogSoftmax", {"x"}, {"lsm"});
    t.node("Hardmax", {"x"}, {"hm"}, {{"axis", ai(0)}});
    // losses over [N, C, d1] with target [N, d1]: reduction none keeps the target's shape, mean is a scalar;
    // SoftmaxCrossEntropyLoss's log_prob output has the input's shape
    t.node("NegativeLogLikelihoodLoss", {"x", "tg"}, {"nll"}, {{"reduction", as("none")}});
    t.node("SoftmaxCrossEntropyLoss", {"x", "tg"}, {"sce", "logp"});
    t.run();
    EXPECT_VALUE(t, "sm", F32, {2, 5, 3});
    EXPECT_VALUE(t, "lsm", F32, {2, 5, 3});
    EXPECT_VALUE(t, "hm", F32, {2, 5, 3});
    EXPECT_VALUE(t, "nll", F32, {2, 3});
    EXPECT_VALUE(t, "sce", F32, {});
    EXPECT_VALUE(t, "logp", F32, {2, 5, 3});
}

TEST(Shapes, SoftmaxBadAxisIsExit2) {
    TestGraph t(13);
    t.input("x", F32, {2, 5, 3});
    t.node("Softmax", {"x"}, {"y"}, {{"axis", ai(3)}});  // axis in [-3, 2]
    expect_error(t, kExitBadInput, "Softmax_y", "axis 3 is out of range");
    TestGraph o(11);  // opset < 13 too (default axis 1)
    o.input("x", F32, {2, 5});
    o.node("LogSoftmax", {"x"}, {"y"}, {{"axis", ai(-3)}});
    expect_error(o, kExitBadInput, "LogSoftmax_y", "axis -3 is out of range");
}

// ---- resize ----------------------------------------------------------------------------------
TEST(Shapes, Resize) {
    TestGraph t(18);
    t.input("x", F32, {1, 3, 4, 6});
    t.constant("roi", f32({}));
    t.constant("scales", f32({1, 1, 2, 1.5f}));
    t.constant("down", f32({1, 1, 0.6f, 0.5f}));
    t.constant("sizes", i64({1, 3, 5, 7}));
    t.node("Resize", {"x", "roi", "scales"}, {"sc"});  // floor(in * scale): 8, 9
    t.node("Resize", {"x", "", "down"}, {"dn"});       // floor(4 * 0.6) = 2, floor(6 * 0.5) = 3
    t.node("Resize", {"x", "", "", "sizes"}, {"sz"});  // the sizes themselves
    t.run();
    EXPECT_VALUE(t, "sc", F32, {1, 3, 8, 9});
    EXPECT_VALUE(t, "dn", F32, {1, 3, 2, 3});
    EXPECT_VALUE(t, "sz", F32, {1, 3, 5, 7});
}

// Opset 18's axes and keep_aspect_ratio_policy (sizes [8, 8] for axes [2, 3], not_larger: scale min(8/4, 8/6),
// the spec's output [1, 3, 5, 8]) are not implemented: reported as unsupported (exit 3), not a wrong shape.
TEST(Shapes, ResizeAxesAreUnsupported) {
    TestGraph t(18);
    t.input("x", F32, {1, 3, 4, 6});
    t.constant("hw", i64({8, 8}));
    t.node("Resize", {"x", "", "", "hw"}, {"nl"},
           {{"axes", ais({2, 3})}, {"keep_aspect_ratio_policy", as("not_larger")}});
    expect_error(t, kExitUnsupported, "Resize_nl", "not supported");
}

TEST(Shapes, Upsample) {
    TestGraph t(9);
    t.input("x", F32, {1, 2, 3, 5});
    t.constant("scales", f32({1, 1, 2, 2.5f}));
    t.node("Upsample", {"x", "scales"}, {"y"});  // floor(3 * 2) = 6, floor(5 * 2.5) = 12
    t.run();
    EXPECT_VALUE(t, "y", F32, {1, 2, 6, 12});
}

// ---- gather / scatter ------------------------------------------------------------------------
TEST(Shapes, Gather) {
    TestGraph t;
    t.input("d", F32, {2, 3, 4});
    t.input("i", I64, {5, 6});
    t.input("ge", I64, {2, 3, 7});
    t.input("nd", I64, {2, 1, 2});
    t.input("oh", I64, {2, 3});
    t.constant("zero", Tensor::scalar_i64(0));
    t.constant("depth", Tensor::scalar_i64(5));
    t.constant("ohv", f32({0, 1}));
    t.constant("ax", Tensor::scalar_i64(-1));
    // out = data[:axis] + indices + data[axis+1:]
    t.node("Gather", {"d", "i"}, {"g_neg"}, {{"axis", ai(-1)}});  // [2, 3] + [5, 6]
    t.node("Gather", {"d", "i"}, {"g_mid"}, {{"axis", ai(1)}});   // [2] + [5, 6] + [4]
    t.node("Gather", {"d", "zero"}, {"g_scalar"});                // a scalar index drops the axis
    t.node("GatherElements", {"d", "ge"}, {"gel"}, {{"axis", ai(2)}});
    t.node("GatherND", {"d", "nd"}, {"gnd"});  // indices[:-1] + data[last index dim:] = [2, 1] + [4]
    t.node("CumSum", {"d", "ax"}, {"cs"});
    t.node("OneHot", {"oh", "depth", "ohv"}, {"onehot"}, {{"axis", ai(-1)}});  // a new last axis of depth
    t.node("OneHot", {"oh", "depth", "ohv"}, {"onehot0"}, {{"axis", ai(0)}});
    t.run();
    EXPECT_VALUE(t, "g_neg", F32, {2, 3, 5, 6});
    EXPECT_VALUE(t, "g_mid", F32, {2, 5, 6, 4});
    EXPECT_VALUE(t, "g_scalar", F32, {3, 4});
    EXPECT_VALUE(t, "gel", F32, {2, 3, 7});
    EXPECT_VALUE(t, "gnd", F32, {2, 1, 4});
    EXPECT_VALUE(t, "cs", F32, {2, 3, 4});
    EXPECT_VALUE(t, "onehot", F32, {2, 3, 5});
    EXPECT_VALUE(t, "onehot0", F32, {5, 2, 3});
}

TEST(Shapes, GatherBadAxisIsExit2) {
    TestGraph t;
    t.input("d", F32, {2, 3});
    t.input("i", I64, {4});
    t.node("Gather", {"d", "i"}, {"y"}, {{"axis", ai(-3)}});
    expect_error(t, kExitBadInput, "Gather_y", "axis");
}

TEST(Shapes, CumSumAxis) {
    TestGraph t;
    t.input("x", F32, {2, 3});
    t.constant("a", Tensor::scalar_i64(-1));
    t.node("CumSum", {"x", "a"}, {"y"});
    t.run();
    EXPECT_VALUE(t, "y", F32, {2, 3});  // like x
    TestGraph b;
    b.input("x", F32, {2, 3});
    b.constant("a", Tensor::scalar_i64(2));  // axis in [-2, 1]
    b.node("CumSum", {"x", "a"}, {"y"});
    expect_error(b, kExitBadInput, "CumSum_y", "axis 2 is out of range");
    TestGraph m;
    m.input("x", F32, {2, 3});
    m.constant("a", i64({0, 1}));  // a scalar (or one value)
    m.node("CumSum", {"x", "a"}, {"y"});
    expect_error(m, kExitBadInput, "CumSum_y", "not a scalar");
}

// ---- indexing --------------------------------------------------------------------------------
TEST(Shapes, Indexing) {
    TestGraph t;
    t.input("x", F32, {3, 10});
    t.input("si", I64, {2, 1});
    t.input("su", F32, {2, 10});
    t.constant("k", i64({4}));
    t.constant("nz", Tensor::from_i64({1, 0, 1, 1, 0, 1}, {2, 3}));
    t.constant("u", i64({3, 1, 3, 2, 1}));
    t.node("TopK", {"x", "k"}, {"tv", "ti"}, {{"axis", ai(-1)}});  // values and int64 indices
    t.node("ScatterND", {"x", "si", "su"}, {"snd"});
    t.node("NonZero", {"nz"}, {"nzo"});                                        // [rank, count of nonzeros] = [2, 4]
    t.node("Unique", {"u"}, {"uy", "ui", "uinv", "uc"}, {{"sorted", ai(1)}});  // 3 distinct values
    t.run();
    EXPECT_VALUE(t, "tv", F32, {3, 4});
    EXPECT_VALUE(t, "ti", I64, {3, 4});
    EXPECT_VALUE(t, "snd", F32, {3, 10});
    EXPECT_VALUE(t, "nzo", I64, {2, 4});
    EXPECT_VALUE(t, "uy", I64, {3});
    EXPECT_VALUE(t, "ui", I64, {3});
    EXPECT_VALUE(t, "uinv", I64, {5});
    EXPECT_VALUE(t, "uc", I64, {3});

    TestGraph bad;  // K = 4 > 3 along axis 0
    bad.input("x", F32, {3, 10});
    bad.constant("k", i64({4}));
    bad.node("TopK", {"x", "k"}, {"tv", "ti"}, {{"axis", ai(0)}});
    expect_error(bad, kExitBadInput, "TopK_tv", "");
}

// ---- reshape / transpose / squeeze -----------------------------------------------------------
TEST(Shapes, Reshape) {
    TestGraph t(13);
    t.input("x", F32, {2, 3, 4});
    t.input("s", F32, {2, 1, 3, 1});
    t.input("e", F32, {3, 1});
    t.input("d", F32, {1, 8, 2, 3});
    t.constant("s0", i64({0, -1}));     // 0 copies the input's dim: [2, 12]
    t.constant("s1", i64({-1, 2, 0}));  // 0 is dim 2 of the input (4): 24 / 8 = 3
    t.constant("sq", i64({-1}));
    t.constant("us", i64({0, -1}));
    t.constant("ex", i64({2, 1, 4}));
    t.constant("rep", i64({2, 1, 3}));
    t.node("Reshape", {"x", "s0"}, {"r0"});
    t.node("Reshape", {"x", "s1"}, {"r1"});
    t.node("Flatten", {"x"}, {"f"}, {{"axis", ai(-1)}});  // [2*3, 4]
    t.node("Flatten", {"x"}, {"f0"}, {{"axis", ai(0)}});  // [1, 24]
    t.node("Squeeze", {"s", "sq"}, {"sq1"});              // [2, 1, 3]
    t.node("Squeeze", {"s"}, {"sq0"});                    // every 1 removed: [2, 3]
    t.node("Unsqueeze", {"e", "us"}, {"us1"});            // axes of the output (rank 4): [1, 3, 1, 1]
    t.node("Transpose", {"x"}, {"tr"});                   // default: reversed
    t.node("Transpose", {"x"}, {"tp"}, {{"perm", ais({1, 2, 0})}});
    t.node("Expand", {"e", "ex"}, {"exp"});  // broadcast [3, 1] with [2, 1, 4]: [2, 3, 4]
    t.node("Tile", {"x", "rep"}, {"tile"});
    t.node("DepthToSpace", {"d"}, {"d2s"}, {{"blocksize", ai(2)}});  // [1, 8/4, 2*2, 3*2]
    t.node("SpaceToDepth", {"d2s"}, {"s2d"}, {{"blocksize", ai(2)}});
    t.run();
    EXPECT_VALUE(t, "r0", F32, {2, 12});
    EXPECT_VALUE(t, "r1", F32, {3, 2, 4});
    EXPECT_VALUE(t, "f", F32, {6, 4});
    EXPECT_VALUE(t, "f0", F32, {1, 24});
    EXPECT_VALUE(t, "sq1", F32, {2, 1, 3});
    EXPECT_VALUE(t, "sq0", F32, {2, 3});
    EXPECT_VALUE(t, "us1", F32, {1, 3, 1, 1});
    EXPECT_VALUE(t, "tr", F32, {4, 3, 2});
    EXPECT_VALUE(t, "tp", F32, {3, 4, 2});
    EXPECT_VALUE(t, "exp", F32, {2, 3, 4});
    EXPECT_VALUE(t, "tile", F32, {4, 3, 12});
    EXPECT_VALUE(t, "d2s", F32, {1, 2, 4, 6});
    EXPECT_VALUE(t, "s2d", F32, {1, 8, 2, 3});
}

TEST(Shapes, ReshapeErrorsAreExit2) {
    TestGraph t(13);
    t.input("x", F32, {2, 3, 4});
    t.constant("s", i64({5, -1}));  // 24 is not a multiple of 5
    t.node("Reshape", {"x", "s"}, {"y"});
    expect_error(t, kExitBadInput, "Reshape_y", "");
    TestGraph q(13);
    q.input("x", F32, {2, 3});
    q.constant("a", i64({1}));  // dim 1 is 3, not 1
    q.node("Squeeze", {"x", "a"}, {"y"});
    expect_error(q, kExitBadInput, "Squeeze_y", "");
}

// ---- slice / pad -----------------------------------------------------------------------------
TEST(Shapes, SliceAndPad) {
    TestGraph t(13);
    t.input("x", F32, {10, 20});
    const int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
    t.constant("st_a", i64({-1})), t.constant("en_a", i64({lo})), t.constant("ax_a", i64({0})),
        t.constant("sp_a", i64({-1}));
    t.constant("st_b", i64({8})), t.constant("en_b", i64({1})), t.constant("ax_b", i64({-1})),
        t.constant("sp_b", i64({-3}));
    t.constant("st_c", i64({2, 0})), t.constant("en_c", i64({1000, hi}));
    t.constant("st_d", i64({5})), t.constant("en_d", i64({2})), t.constant("ax_d", i64({1}));
    t.constant("pads", i64({1, 2, 0, 3}));
    t.constant("negp", i64({-1, 0, -2, 1}));
    // Slice, negative step: the whole axis reversed (start -1 = 9, end clamped to -1): 10
    t.node("Slice", {"x", "st_a", "en_a", "ax_a", "sp_a"}, {"rev"});
    // from 8 down to 2 (end 1 exclusive), step -3: 8, 5, 2 = 3 elements on axis -1
    t.node("Slice", {"x", "st_b", "en_b", "ax_b", "sp_b"}, {"neg"});
    t.node("Slice", {"x", "st_c", "en_c"}, {"clamp"});          // ends clamped: [2, 10) = 8 and [0, 20) = 20
    t.node("Slice", {"x", "st_d", "en_d", "ax_d"}, {"empty"});  // start > end, step 1: empty
    // pads [x1_begin, x2_begin, x1_end, x2_end]: [10 + 1 + 0, 20 + 2 + 3]; negative pads crop
    t.node("Pad", {"x", "pads"}, {"pad"});
    t.node("Pad", {"x", "negp"}, {"crop"}, {{"mode", as("constant")}});
    t.run();
    EXPECT_VALUE(t, "rev", F32, {10, 20});
    EXPECT_VALUE(t, "neg", F32, {10, 3});
    EXPECT_VALUE(t, "clamp", F32, {8, 20});
    EXPECT_VALUE(t, "empty", F32, {10, 0});
    EXPECT_VALUE(t, "pad", F32, {11, 25});
    EXPECT_VALUE(t, "crop", F32, {7, 21});
}

TEST(Shapes, SliceBadAxisIsExit2) {
    TestGraph t(13);
    t.input("x", F32, {10, 20});
    t.constant("st", i64({0})), t.constant("en", i64({1})), t.constant("ax", i64({2}));
    t.node("Slice", {"x", "st", "en", "ax"}, {"y"});
    expect_error(t, kExitBadInput, "Slice_y", "axis");
}

// ---- concat / split --------------------------------------------------------------------------
TEST(Shapes, ConcatSplit) {
    TestGraph t(18);
    t.input("a", F32, {2, 3});
    t.input("b", F32, {2, 5});
    t.input("x", F32, {2, 10});
    t.constant("sp", i64({3, 7}));
    t.node("Concat", {"a", "b"}, {"cat"}, {{"axis", ai(-1)}});
    t.node("Split", {"x", "sp"}, {"s0", "s1"}, {{"axis", ai(1)}});                     // the given sizes
    t.node("Split", {"x"}, {"e0", "e1"}, {{"axis", ai(-1)}, {"num_outputs", ai(2)}});  // equal parts
    // opset 18 num_outputs that does not divide: ceil(10 / 3) = 4, 4, and the rest 2
    t.node("Split", {"x"}, {"u0", "u1", "u2"}, {{"axis", ai(1)}, {"num_outputs", ai(3)}});
    t.run();
    EXPECT_VALUE(t, "cat", F32, {2, 8});
    EXPECT_VALUE(t, "s0", F32, {2, 3});
    EXPECT_VALUE(t, "s1", F32, {2, 7});
    EXPECT_VALUE(t, "e0", F32, {2, 5});
    EXPECT_VALUE(t, "e1", F32, {2, 5});
    EXPECT_VALUE(t, "u0", F32, {2, 4});
    EXPECT_VALUE(t, "u1", F32, {2, 4});
    EXPECT_VALUE(t, "u2", F32, {2, 2});

    TestGraph old(11);  // opset < 13: the sizes are an attribute; without it, equal parts per output
    old.input("x", F32, {6, 4});
    old.node("Split", {"x"}, {"a0", "a1"}, {{"split", ais({1, 5})}});
    old.node("Split", {"x"}, {"b0", "b1", "b2"});
    old.run();
    EXPECT_VALUE(old, "a0", F32, {1, 4});
    EXPECT_VALUE(old, "a1", F32, {5, 4});
    EXPECT_VALUE(old, "b2", F32, {2, 4});
}

TEST(Shapes, ConcatErrorsAreExit2) {
    TestGraph t;
    t.input("a", F32, {2, 3});
    t.input("b", F32, {4, 5});  // dim 0 differs outside the axis
    t.node("Concat", {"a", "b"}, {"y"}, {{"axis", ai(1)}});
    expect_error(t, kExitBadInput, "Concat_y", "");
    TestGraph s(13);
    s.input("x", F32, {2, 10});
    s.constant("sp", i64({3, 6}));  // 9 != 10
    s.node("Split", {"x", "sp"}, {"y0", "y1"}, {{"axis", ai(1)}});
    expect_error(s, kExitBadInput, "Split_y0", "");
}

// ---- constant (Shape, Size, ConstantOfShape, Range, EyeLike, Trilu) --------------------------
TEST(Shapes, Constant) {
    TestGraph t(15);
    t.input("x", F32, {2, 3, 4});
    t.constant("cs", i64({2, 3}));
    t.constant("r0", Tensor::scalar_i64(1)), t.constant("r1", Tensor::scalar_i64(10)),
        t.constant("r2", Tensor::scalar_i64(3));
    t.input("m", F32, {3, 4});
    t.node("Shape", {"x"}, {"sh"});
    t.node("Shape", {"x"}, {"sh_tail"}, {{"start", ai(-2)}});  // opset 15: dims [-2, end)
    t.node("Size", {"x"}, {"sz"});
    t.node("ConstantOfShape", {"cs"}, {"zeros"});  // float32 zeros by default
    t.node("ConstantOfShape", {"cs"}, {"ints"}, {{"value", at(Tensor::from_i64({7}, {1}))}});
    t.node("Range", {"r0", "r1", "r2"}, {"rng"});  // ceil((10 - 1) / 3) = 3 elements
    t.node("EyeLike", {"m"}, {"eye"}, {{"dtype", ai(7)}});
    t.node("Trilu", {"m"}, {"tri"});
    t.node("Constant", {}, {"c"}, {{"value", at(Tensor::from_f32({1, 2, 3, 4, 5, 6}, {2, 3}))}});
    t.run();
    EXPECT_VALUE(t, "sh", I64, {3});
    EXPECT_EQ(t.v("sh").constant->to_i64(), (std::vector<int64_t>{2, 3, 4}));
    EXPECT_VALUE(t, "sh_tail", I64, {2});
    EXPECT_EQ(t.v("sh_tail").constant->to_i64(), (std::vector<int64_t>{3, 4}));
    EXPECT_VALUE(t, "sz", I64, {});
    EXPECT_EQ(t.v("sz").constant->to_i64(), (std::vector<int64_t>{24}));
    EXPECT_VALUE(t, "zeros", F32, {2, 3});
    EXPECT_VALUE(t, "ints", I64, {2, 3});
    EXPECT_VALUE(t, "rng", I64, {3});
    EXPECT_EQ(t.v("rng").constant->to_i64(), (std::vector<int64_t>{1, 4, 7}));
    EXPECT_VALUE(t, "eye", I64, {3, 4});
    EXPECT_VALUE(t, "tri", F32, {3, 4});
    EXPECT_VALUE(t, "c", F32, {2, 3});
}

// ---- elementwise -----------------------------------------------------------------------------
TEST(Shapes, Elementwise) {
    TestGraph t(13);
    t.input("a", F32, {2, 1, 4});
    t.input("b", F32, {3, 1});
    t.input("c", B, {3, 1});
    t.input("y", F32, {2, 1, 1});
    t.input("i", I64, {4});
    t.input("s", F32, {});
    t.node("Add", {"a", "b"}, {"add"});        // [2,1,4] with [3,1]: right-aligned, 1s stretched
    t.node("Mul", {"a", "s"}, {"mul"});        // a scalar broadcasts to anything
    t.node("Where", {"c", "a", "y"}, {"wh"});  // three-way broadcast: [2, 3, 4]
    t.node("Equal", {"a", "b"}, {"eq"});       // comparisons are bool
    t.node("Not", {"c"}, {"not"});
    t.node("Sum", {"a", "b", "y"}, {"sum"});  // variadic, broadcast over all
    t.node("Relu", {"a"}, {"relu"});
    t.node("Cast", {"a"}, {"cast"}, {{"to", ai(7)}});
    t.node("Clip", {"i"}, {"clip"});
    t.node("IsNaN", {"b"}, {"isnan"});
    t.run();
    EXPECT_VALUE(t, "add", F32, {2, 3, 4});
    EXPECT_VALUE(t, "mul", F32, {2, 1, 4});
    EXPECT_VALUE(t, "wh", F32, {2, 3, 4});
    EXPECT_VALUE(t, "eq", B, {2, 3, 4});
    EXPECT_VALUE(t, "not", B, {3, 1});
    EXPECT_VALUE(t, "sum", F32, {2, 3, 4});
    EXPECT_VALUE(t, "relu", F32, {2, 1, 4});
    EXPECT_VALUE(t, "cast", I64, {2, 1, 4});
    EXPECT_VALUE(t, "clip", I64, {4});
    EXPECT_VALUE(t, "isnan", B, {3, 1});
}

TEST(Shapes, ElementwiseErrorsAreExit2) {
    TestGraph t(13);
    t.input("a", F32, {2, 3});
    t.input("b", F32, {4});  // 3 vs 4: not broadcastable
    t.node("Add", {"a", "b"}, {"y"});
    expect_error(t, kExitBadInput, "Add_y", "");
}

// ---- reduce ----------------------------------------------------------------------------------
TEST(Shapes, Reduce) {
    TestGraph t(18);
    t.input("x", F32, {2, 3, 4});
    t.constant("last", i64({-1}));
    t.constant("none", i64({}));
    t.constant("two", i64({0, -1}));
    t.node("ReduceSum", {"x", "last"}, {"k0"}, {{"keepdims", ai(0)}});
    t.node("ReduceSum", {"x", "last"}, {"k1"});                                       // keepdims 1 by default
    t.node("ReduceSum", {"x"}, {"all"});                                              // no axes: every axis
    t.node("ReduceSum", {"x"}, {"all0"}, {{"keepdims", ai(0)}});                      // a scalar
    t.node("ReduceSum", {"x", "none"}, {"noop"}, {{"noop_with_empty_axes", ai(1)}});  // the input itself
    t.node("ReduceMean", {"x", "two"}, {"mean"}, {{"keepdims", ai(0)}});
    t.node("ReduceMax", {"x", "two"}, {"max"});
    t.node("ReduceL2", {"x", "last"}, {"l2"}, {{"keepdims", ai(0)}});
    t.node("ArgMax", {"x"}, {"am"}, {{"axis", ai(-1)}, {"keepdims", ai(0)}});  // int64
    t.node("ArgMin", {"x"}, {"an"}, {{"axis", ai(1)}, {"select_last_index", ai(1)}});
    t.run();
    EXPECT_VALUE(t, "k0", F32, {2, 3});
    EXPECT_VALUE(t, "k1", F32, {2, 3, 1});
    EXPECT_VALUE(t, "all", F32, {1, 1, 1});
    EXPECT_VALUE(t, "all0", F32, {});
    EXPECT_VALUE(t, "noop", F32, {2, 3, 4});
    EXPECT_VALUE(t, "mean", F32, {3});
    EXPECT_VALUE(t, "max", F32, {1, 3, 1});
    EXPECT_VALUE(t, "l2", F32, {2, 3});
    EXPECT_VALUE(t, "am", I64, {2, 3});
    EXPECT_VALUE(t, "an", I64, {2, 1, 4});

    TestGraph old(11);  // opset < 13 (ReduceSum) / < 18 (others): axes an attribute
    old.input("x", F32, {2, 3, 4});
    old.node("ReduceMean", {"x"}, {"m"}, {{"axes", ais({0, -1})}, {"keepdims", ai(0)}});
    old.node("ReduceSum", {"x"}, {"s"}, {{"axes", ais({1})}});
    old.run();
    EXPECT_VALUE(old, "m", F32, {3});
    EXPECT_VALUE(old, "s", F32, {2, 1, 4});
}

TEST(Shapes, ReduceBadAxisIsExit2) {
    TestGraph t(18);
    t.input("x", F32, {2, 3, 4});
    t.constant("ax", i64({3}));
    t.node("ReduceSum", {"x", "ax"}, {"y"});
    expect_error(t, kExitBadInput, "ReduceSum_y", "axis");
}

// ---- rnn -------------------------------------------------------------------------------------
TEST(Shapes, Rnn) {
    TestGraph t(14);
    t.input("x", F32, {5, 2, 3});                                    // [seq, batch, input]
    t.input("wl", F32, {1, 24, 3}), t.input("rl", F32, {1, 24, 6});  // LSTM: 4 gates * hidden 6
    t.input("wg", F32, {2, 18, 3}), t.input("rg", F32, {2, 18, 6});  // GRU bidirectional: 3 gates
    t.input("xb", F32, {2, 5, 3});                                   // layout 1: [batch, seq, input]
    t.input("wr", F32, {1, 6, 3}), t.input("rr", F32, {1, 6, 6});
    // Y [seq, dirs, batch, hidden], Y_h / Y_c [dirs, batch, hidden]
    t.node("LSTM", {"x", "wl", "rl"}, {"ly", "lh", "lc"}, {{"hidden_size", ai(6)}});
    t.node("GRU", {"x", "wg", "rg"}, {"gy", "gh"}, {{"hidden_size", ai(6)}, {"direction", as("bidirectional")}});
    // layout 1: Y [batch, seq, dirs, hidden], Y_h [batch, dirs, hidden]
    t.node("RNN", {"xb", "wr", "rr"}, {"ry", "rh"}, {{"hidden_size", ai(6)}, {"layout", ai(1)}});
    t.run();
    EXPECT_VALUE(t, "ly", F32, {5, 1, 2, 6});
    EXPECT_VALUE(t, "lh", F32, {1, 2, 6});
    EXPECT_VALUE(t, "lc", F32, {1, 2, 6});
    EXPECT_VALUE(t, "gy", F32, {5, 2, 2, 6});
    EXPECT_VALUE(t, "gh", F32, {2, 2, 6});
    EXPECT_VALUE(t, "ry", F32, {2, 5, 1, 6});
    EXPECT_VALUE(t, "rh", F32, {2, 1, 6});
}

// ---- quant -----------------------------------------------------------------------------------
TEST(Shapes, Quant) {
    TestGraph t(13);
    t.input("x", F32, {2, 3});
    t.constant("sc", f32_scalar(0.5f));
    t.constant("zu", Tensor::zeros(U8, {}));
    t.constant("zi", Tensor::zeros(I8, {}));
    t.input("q", I8, {2, 3});
    t.input("a", U8, {2, 4});
    t.input("b", U8, {4, 5});
    t.node("QuantizeLinear", {"x", "sc", "zu"}, {"qu"});  // the zero point's type
    t.node("QuantizeLinear", {"x", "sc", "zi"}, {"qi"});
    t.node("QuantizeLinear", {"x", "sc"}, {"qd"});  // no zero point: uint8
    t.node("DequantizeLinear", {"q", "sc", "zi"}, {"dq"});
    t.node("DynamicQuantizeLinear", {"x"}, {"dy", "ds", "dz"});
    t.node("MatMulInteger", {"a", "b"}, {"mi"});  // int32
    t.run();
    EXPECT_VALUE(t, "qu", U8, {2, 3});
    EXPECT_VALUE(t, "qi", I8, {2, 3});
    EXPECT_VALUE(t, "qd", U8, {2, 3});
    EXPECT_VALUE(t, "dq", F32, {2, 3});
    EXPECT_VALUE(t, "dy", U8, {2, 3});
    EXPECT_VALUE(t, "ds", F32, {});
    EXPECT_VALUE(t, "dz", U8, {});
    EXPECT_VALUE(t, "mi", I32, {2, 5});
}

// ---- control ---------------------------------------------------------------------------------
// If with a constant condition takes one branch; the branches read x from the graph around them.
static std::shared_ptr<Graph> branch(const std::string& op, const std::string& out,
                                     std::map<std::string, Attr> attrs = {}) {
    auto sub = std::make_shared<Graph>();
    sub->path = "shapes.onnx";
    sub->name = op + "_branch";
    sub->opsets[""] = 13;
    int x = sub->value_id("x");
    sub->free_vars.push_back("x");
    int o = sub->value_id(out);
    Node n;
    n.op_type = op;
    n.name = op + "_in_branch";
    n.inputs = {x};
    n.outputs = {o};
    n.attrs = std::move(attrs);
    sub->nodes.push_back(n);
    sub->values[size_t(o)].producer = 0;
    sub->outputs.push_back(o);
    return sub;
}

TEST(Shapes, ControlIfTakesTheConstantBranch) {
    for (bool cond : {true, false}) {
        TestGraph t(13);
        t.input("x", F32, {2, 3});
        Tensor c = Tensor::zeros(B, {});
        c.setf(0, cond ? 1 : 0);
        t.constant("cond", c);
        Attr then_b, else_b;
        then_b.kind = else_b.kind = Attr::Graph;
        then_b.g = branch("Relu", "then_out");
        else_b.g = branch("Transpose", "else_out");
        t.node("If", {"cond"}, {"y"}, {{"then_branch", then_b}, {"else_branch", else_b}});
        t.run();
        if (cond) EXPECT_VALUE(t, "y", F32, {2, 3});
        else EXPECT_VALUE(t, "y", F32, {3, 2});
    }
}

// ---- sequence --------------------------------------------------------------------------------
TEST(Shapes, Sequence) {
    TestGraph t(13);
    t.input("a", F32, {2, 3});
    t.input("b", F32, {2, 3});
    t.input("x", F32, {6, 4});
    t.constant("last", Tensor::scalar_i64(-1));
    t.constant("sp", i64({2, 4}));
    t.node("SequenceConstruct", {"a", "b"}, {"seq"});
    t.node("ConcatFromSequence", {"seq"}, {"cat"}, {{"axis", ai(0)}});                          // [4, 3]
    t.node("ConcatFromSequence", {"seq"}, {"stack"}, {{"axis", ai(-1)}, {"new_axis", ai(1)}});  // [2, 3, 2]
    t.node("SequenceAt", {"seq", "last"}, {"at"});
    t.node("SequenceLength", {"seq"}, {"len"});
    t.node("SplitToSequence", {"x", "sp"}, {"parts"});
    t.node("SequenceAt", {"parts", "last"}, {"part"});                                         // [4, 4]
    t.node("SplitToSequence", {"x"}, {"rows"}, {{"axis", ai(1)}, {"keepdims", ai(0)}});        // 4 of [6]
    t.node("ConcatFromSequence", {"rows"}, {"back"}, {{"axis", ai(0)}, {"new_axis", ai(1)}});  // [4, 6]
    t.run({"cat", "stack", "at", "len", "part", "back"});
    EXPECT_VALUE(t, "cat", F32, {4, 3});
    EXPECT_VALUE(t, "stack", F32, {2, 3, 2});
    EXPECT_VALUE(t, "at", F32, {2, 3});
    EXPECT_VALUE(t, "len", I64, {});
    EXPECT_EQ(t.v("len").constant->to_i64(), (std::vector<int64_t>{2}));
    EXPECT_VALUE(t, "part", F32, {4, 4});
    EXPECT_VALUE(t, "back", F32, {4, 6});
}

// ---- signal ----------------------------------------------------------------------------------
TEST(Shapes, Signal) {
    TestGraph t(17);
    t.input("r", F32, {1, 8, 1});  // real signal [batch, n, 1]
    t.input("c", F32, {1, 8, 2});  // complex
    t.input("s", F32, {1, 16, 1});
    t.constant("step", Tensor::scalar_i64(4));
    t.constant("win", f32(std::vector<float>(8, 1.0f)));
    t.constant("len", Tensor::scalar_i64(10));
    t.constant("mel", Tensor::scalar_i64(4)), t.constant("dft", Tensor::scalar_i64(16)),
        t.constant("rate", Tensor::scalar_i64(8000));
    t.constant("lo", f32_scalar(0)), t.constant("hi", f32_scalar(4000));
    t.node("DFT", {"r"}, {"one"}, {{"onesided", ai(1)}});  // n/2 + 1 = 5 bins, complex out: [1, 5, 2]
    t.node("DFT", {"c"}, {"full"});                        // [1, 8, 2]
    t.node("DFT", {"c"}, {"inv"}, {{"inverse", ai(1)}});
    // frames = (16 - 8) / 4 + 1 = 3, bins 8/2 + 1 = 5 (onesided default for a real signal): [1, 3, 5, 2]
    t.node("STFT", {"s", "step", "win"}, {"stft"});
    t.node("HannWindow", {"len"}, {"hann"});
    t.node("MelWeightMatrix", {"mel", "dft", "rate", "lo", "hi"}, {"melw"});  // [dft/2 + 1, mel] = [9, 4]
    t.run();
    EXPECT_VALUE(t, "one", F32, {1, 5, 2});
    EXPECT_VALUE(t, "full", F32, {1, 8, 2});
    EXPECT_VALUE(t, "inv", F32, {1, 8, 2});
    EXPECT_VALUE(t, "stft", F32, {1, 3, 5, 2});
    EXPECT_VALUE(t, "hann", F32, {10});
    EXPECT_VALUE(t, "melw", F32, {9, 4});
}

// ---- text ------------------------------------------------------------------------------------
TEST(Shapes, Text) {
    TestGraph t(10);
    t.constant("s", Tensor::from_strings({"Hello", "World", "a"}, {3}));
    t.constant("tok", Tensor::from_i64({1, 2, 3, 1, 2, 2, 3, 3, 1, 1}, {2, 5}));
    t.node("StringNormalizer", {"s"}, {"low"}, {{"case_change_action", as("LOWER")}});
    t.node("TfIdfVectorizer", {"tok"}, {"tf"},
           {{"mode", as("TF")},
            {"min_gram_length", ai(1)},
            {"max_gram_length", ai(1)},
            {"max_skip_count", ai(0)},
            {"ngram_counts", ais({0})},
            {"ngram_indexes", ais({0, 1, 2})},
            {"pool_int64s", ais({1, 2, 3})}});
    t.run();
    EXPECT_VALUE(t, "low", DType::String, {3});
    EXPECT_VALUE(t, "tf", F32, {2, 3});           // [batch, max(ngram_indexes) + 1]
    EXPECT_EQ(t.v("tf").constant->getf(0), 2.0);  // row 0 = 1 2 3 1 2: token 1 twice
}

// ---- sampling --------------------------------------------------------------------------------
TEST(Shapes, Sampling) {
    TestGraph t(16);
    t.input("x", F32, {1, 3, 4, 5});
    t.input("grid", F32, {1, 6, 7, 2});
    t.input("f", F32, {2, 3, 8, 8});
    t.input("rois", F32, {4, 4});
    t.input("bi", I64, {4});
    t.input("p", F32, {1, 1, 2, 2});
    t.input("pi", I64, {1, 1, 2, 2});
    t.node("GridSample", {"x", "grid"}, {"gs"});  // [N, C, H_out, W_out] of the grid
    t.node("RoiAlign", {"f", "rois", "bi"}, {"ra"},
           {{"output_height", ai(2)}, {"output_width", ai(3)}});  // [rois, C, 2, 3]
    t.node("MaxUnpool", {"p", "pi"}, {"mu"},
           {{"kernel_shape", ais({2, 2})}, {"strides", ais({2, 2})}});  // (2-1)*2+2 = 4
    t.run();
    EXPECT_VALUE(t, "gs", F32, {1, 3, 6, 7});
    EXPECT_VALUE(t, "ra", F32, {4, 3, 2, 3});
    EXPECT_VALUE(t, "mu", F32, {1, 1, 4, 4});
}

// ---- errors that are not about one family ----------------------------------------------------
TEST(Shapes, MissingRequiredInputIsExit2) {
    TestGraph t;
    t.input("x", F32, {1, 3, 4, 4});
    t.node("Conv", {"x"}, {"y"});  // W missing (min_inputs 2)
    expect_error(t, kExitBadInput, "Conv_y", "needs at least 2 inputs");
}

// ---- the TEMPLATE family (src/ops/TEMPLATE.cpp), registered here only --------------------------
TEST(Template, ShapeRuleAndHostEvaluator) {
    Registry r;
    register_ops_TEMPLATE(r);
    EXPECT_EQ(Registry::get().find("", "o2g.TemplateAffine"), nullptr);  // never in the real registry
    const OpDef* d = r.find("", "o2g.TemplateAffine");
    ASSERT_NE(d, nullptr);
    EXPECT_EQ(d->min_inputs, 1);
    EXPECT_EQ(d->host_inputs, (std::vector<int>{1}));
    ASSERT_TRUE(d->infer && d->eval && d->lower);

    TestGraph t;
    t.constant("x", Tensor::from_f32({1, -2, 3.5f}, {3}));
    t.constant("b", f32_scalar(0.25f));
    t.node("o2g.TemplateAffine", {"x", "b"}, {"y"}, {{"alpha", af(2.0f)}});
    OpCtx c(t.g, 0);
    d->infer(c);
    EXPECT_VALUE(t, "y", F32, {3});
    d->eval(c);
    ASSERT_TRUE(t.v("y").constant.has_value());
    const Tensor& y = *t.v("y").constant;
    EXPECT_EQ(y.getf(0), 2.25);   // 2 * 1 + 0.25
    EXPECT_EQ(y.getf(1), -3.75);  // 2 * -2 + 0.25
    EXPECT_EQ(y.getf(2), 7.25);   // 2 * 3.5 + 0.25

    TestGraph bad;
    bad.input("x", F32, {3});
    bad.input("b", F32, {2});
    bad.node("o2g.TemplateAffine", {"x", "b"}, {"y"});
    OpCtx cb(bad.g, 0);
    try {
        d->infer(cb);
        ADD_FAILURE() << "a non-scalar B was accepted";
    } catch (const Error& e) {
        EXPECT_EQ(e.code, kExitBadInput);
        EXPECT_NE(std::string(e.what()).find("'o2g.TemplateAffine_y'"), std::string::npos) << e.what();
    }
}
