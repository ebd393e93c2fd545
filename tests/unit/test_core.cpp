// Unit tests: layout helpers, broadcasting, host tensors, .npy and GGUF round trips,
// shape rules and constant folding of PyTorch-style shape subgraphs.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "codegen/dynamic.h"
#include "gguf.h"
#include "ir/serialize.h"
#include "lower/builder.h"
#include "lower/layout.h"
#include "lower/weights.h"
#include "onnx/loader.h"
#include "onnx2ggml_core.h"
#include "ops/op.h"

using namespace onnx2ggml::core;

TEST(Layout, OnnxDimsAreReversedGgmlNe) {
    auto ne = to_ne({2, 3, 4, 5});
    EXPECT_EQ(ne[0], 5);
    EXPECT_EQ(ne[1], 4);
    EXPECT_EQ(ne[2], 3);
    EXPECT_EQ(ne[3], 2);
    auto ne2 = to_ne({7});
    EXPECT_EQ(ne2[0], 7);
    EXPECT_EQ(ne2[1], 1);
    EXPECT_EQ(ggml_dim(0, 4), 3);
    EXPECT_EQ(ggml_dim(3, 4), 0);
}

TEST(Layout, Rank6MergesLeadingDims) {
    EXPECT_EQ(canonical4({2, 3, 4, 5, 6, 7}), (Shape{24, 5, 6, 7}));
    EXPECT_EQ(ggml_dim(0, 6), -1);
    EXPECT_EQ(ggml_dim(2, 6), -1);
    EXPECT_EQ(ggml_dim(3, 6), 2);
}

TEST(Layout, RangesOfMergedAxes) {
    int64_t unit = 0;
    EXPECT_EQ(ggml_dim_range({2, 3, 4, 5}, 1, unit), 2);  // rank <= 4: ggml_dim's, unit 1
    EXPECT_EQ(unit, 1);
    EXPECT_EQ(ggml_dim_range({3, 2, 4, 5, 6}, 0, unit), 3);  // outermost: ranges of ne[3] in units of 2
    EXPECT_EQ(unit, 2);
    EXPECT_EQ(ggml_dim_range({1, 3, 4, 5, 6}, 1, unit), 3);  // a size-1 axis outside it
    EXPECT_EQ(unit, 1);
    EXPECT_EQ(ggml_dim_range({2, 3, 4, 5, 6}, 1, unit), -1);  // strided in ne[3]: not a range
    EXPECT_EQ(ggml_dim_range({1, 1, 2, 4, 5, 6}, 2, unit), 3);
    EXPECT_EQ(unit, 1);
    EXPECT_EQ(ggml_dim_range({1, 2, 3, 4, 5, 6}, 1, unit), 3);
    EXPECT_EQ(unit, 3);
    EXPECT_EQ(ggml_dim_range({2, 3, 4, 5, 6, 7}, 3, unit), 2);
}

TEST(Layout, PermuteAxesMatchTorchPermute) {
    // ONNX perm [0,2,3,1] (NCHW -> NHWC). Input ggml dims: W=0,H=1,C=2,N=3.
    // Output ONNX [N,H,W,C] -> ggml ne [C,W,H,N]: W goes to 1, H to 2, C to 0, N to 3.
    auto ax = ggml_permute_axes({0, 2, 3, 1});
    EXPECT_EQ(ax[0], 1);
    EXPECT_EQ(ax[1], 2);
    EXPECT_EQ(ax[2], 0);
    EXPECT_EQ(ax[3], 3);
    // the inverse permutation composes to identity on a real ggml tensor
    ggml_init_params p = {ggml_tensor_overhead() * 8, nullptr, true};
    ggml_context* ctx = ggml_init(p);
    ggml_tensor* t = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 5, 4, 3, 2);  // ONNX [2,3,4,5]
    ggml_tensor* u = ggml_permute(ctx, t, ax[0], ax[1], ax[2], ax[3]);
    EXPECT_EQ(u->ne[0], 3);  // ONNX out [2,4,5,3]
    EXPECT_EQ(u->ne[1], 5);
    EXPECT_EQ(u->ne[2], 4);
    EXPECT_EQ(u->ne[3], 2);
    ggml_free(ctx);
}

TEST(Layout, InversePermutation) {
    EXPECT_EQ(inverse_perm({0, 2, 3, 1}), (std::vector<int64_t>{0, 3, 1, 2}));
    EXPECT_EQ(inverse_perm(inverse_perm({2, 0, 1})), (std::vector<int64_t>{2, 0, 1}));
}

TEST(Layout, ViewStridesFollowTorchViewRule) {
    using A = std::array<int64_t, 4>;
    using B = std::array<size_t, 4>;
    B nb;
    // contiguous [4,3,2] (ggml ne) -> [12,2]: always a view, contiguous strides
    ASSERT_TRUE(view_strides(A{4, 3, 2, 1}, B{4, 16, 48, 96}, A{12, 2, 1, 1}, nb));
    EXPECT_EQ(nb[1], 48u);
    // heads split then permuted (ONNX [1,S=5,H=2,D=3] -> perm 0,2,1,3 -> ggml ne [D,S,H,1]):
    // merging H with the batch of 1 is a view; merging D with S is not
    B perm_nb = {4, 24, 12, 120};
    ASSERT_TRUE(view_strides(A{3, 5, 2, 1}, perm_nb, A{3, 5, 2, 1}, nb));
    ASSERT_TRUE(view_strides(A{3, 5, 2, 1}, perm_nb, A{3, 5, 1, 2}, nb));
    EXPECT_EQ(nb[1], 24u);
    EXPECT_EQ(nb[3], 12u);
    EXPECT_FALSE(view_strides(A{3, 5, 2, 1}, perm_nb, A{15, 2, 1, 1}, nb));
    // a transposed matrix cannot be flattened, but it can be split along its outer dim
    EXPECT_FALSE(view_strides(A{3, 4, 1, 1}, B{16, 4, 48, 48}, A{12, 1, 1, 1}, nb));
    ASSERT_TRUE(view_strides(A{3, 4, 1, 1}, B{16, 4, 48, 48}, A{3, 2, 2, 1}, nb));
    EXPECT_EQ(nb[0], 16u);
    EXPECT_EQ(nb[1], 4u);
    EXPECT_EQ(nb[2], 8u);
    // element counts must agree
    EXPECT_FALSE(view_strides(A{3, 4, 1, 1}, B{4, 12, 48, 48}, A{13, 1, 1, 1}, nb));
}

TEST(Broadcast, NumpyRules) {
    Shape o;
    EXPECT_TRUE(broadcast_shapes({3, 1}, {4}, o));
    EXPECT_EQ(o, (Shape{3, 4}));
    EXPECT_TRUE(broadcast_shapes({2, 1, 5}, {7, 1}, o));
    EXPECT_EQ(o, (Shape{2, 7, 5}));
    EXPECT_TRUE(broadcast_shapes({}, {2, 2}, o));
    EXPECT_EQ(o, (Shape{2, 2}));
    EXPECT_FALSE(broadcast_shapes({3}, {4}, o));
}

TEST(TensorHost, CastAndOverflowChecks) {
    Tensor t = Tensor::from_f32({1.5f, -2.7f, 3.0f}, {3});
    Tensor i = t.cast(DType::I64);
    EXPECT_EQ(i.to_i64(), (std::vector<int64_t>{1, -2, 3}));  // truncation, as C and ONNX Cast
    Tensor h = t.cast(DType::F16).cast(DType::F32);
    EXPECT_FLOAT_EQ(h.to_f32()[0], 1.5f);
    EXPECT_THROW(shape_numel({int64_t(1) << 40, int64_t(1) << 40}), Error);
    EXPECT_THROW(shape_numel({-1, 3}), Error);
}

TEST(Npy, RoundTripAllDtypes) {
    for (DType t : {DType::F32, DType::F16, DType::I64, DType::I32, DType::Bool, DType::U8}) {
        Tensor a = random_tensor(t, {2, 3, 4}, 7);
        std::string path = testing::TempDir() + "/rt.npy";
        write_npy(path, a);
        Tensor b = read_npy(path);
        EXPECT_EQ(b.dtype, t);
        EXPECT_EQ(b.shape, a.shape);
        ASSERT_EQ(b.nbytes(), a.nbytes());
        EXPECT_EQ(std::memcmp(a.data(), b.data(), a.nbytes()), 0);
    }
    Tensor s = Tensor::from_f32({4.0f}, {});  // 0-d
    write_npy(testing::TempDir() + "/s.npy", s);
    EXPECT_EQ(read_npy(testing::TempDir() + "/s.npy").shape, Shape{});
}

TEST(TensorHost, StringsCastAndRoundTripThroughNpy) {
    Tensor f = Tensor::from_f32({0.6048455f, 100.0f, 1e-7f, -0.0f, 0.00012f, INFINITY, NAN}, {7});
    EXPECT_EQ(f.cast(DType::String).strings(), (std::vector<std::string>{"0.6048455", "100.0", "1e-07", "-0.0",
                                                                         "0.00012", "INF", "NaN"}));  // numpy's str()
    Tensor s = Tensor::from_strings({"-INF", "2.5e3", "nan", "9007199254740993"}, {2, 2});
    Tensor d = s.cast(DType::F64);
    EXPECT_TRUE(std::isinf(d.getf(0)) && d.getf(0) < 0);
    EXPECT_EQ(d.getf(1), 2500.0);
    EXPECT_TRUE(std::isnan(d.getf(2)));
    EXPECT_EQ(Tensor::from_strings({"9007199254740993"}, {1}).cast(DType::I64).geti(0),
              9007199254740993);  // beyond double
    EXPECT_THROW(Tensor::from_strings({"Monday"}, {1}).cast(DType::F32), Error);
    EXPECT_THROW(s.getf(0), Error);  // never read as bytes
    Tensor u = Tensor::from_strings({"Émile", "", "σοφία 😀"}, {3});
    std::string path = testing::TempDir() + "/str.npy";
    write_npy(path, u);
    Tensor r = read_npy(path);
    EXPECT_EQ(r.dtype, DType::String);
    EXPECT_EQ(r.shape, u.shape);
    EXPECT_EQ(r.strings(), u.strings());
}

TEST(Npy, RejectsTruncatedAndBadMagic) {
    std::string path = testing::TempDir() + "/bad.npy";
    write_npy(path, random_tensor(DType::F32, {16}, 1));
    FILE* f = fopen(path.c_str(), "r+b");
    ASSERT_TRUE(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    ASSERT_EQ(truncate(path.c_str(), n - 5), 0);
    EXPECT_THROW(read_npy(path), Error);
    FILE* g = fopen(path.c_str(), "wb");
    fputs("hello world, not npy", g);
    fclose(g);
    try {
        read_npy(path);
        FAIL();
    } catch (const Error& e) { EXPECT_NE(std::string(e.what()).find("bad magic"), std::string::npos); }
}

TEST(Gguf, RoundTrip) {
    ggml_init_params p = {ggml_tensor_overhead() * 16, nullptr, true};
    ggml_context* ctx = ggml_init(p);
    Builder b(ctx, ctx, false);
    Tensor w0 = random_tensor(DType::F32, {3, 5}, 3);
    b.weight(w0, GGML_TYPE_F32, "conv.weight");
    std::string path = testing::TempDir() + "/w.gguf";
    write_gguf(path, b.weights, {{"onnx2ggml.source", "x.onnx"}});
    ggml_context* rctx = nullptr;
    gguf_init_params gp = {false, &rctx};
    gguf_context* g = gguf_init_from_file(path.c_str(), gp);
    ASSERT_TRUE(g);
    EXPECT_EQ(gguf_get_n_tensors(g), 1);
    ggml_tensor* t = ggml_get_tensor(rctx, "w0");
    ASSERT_TRUE(t);
    EXPECT_EQ(t->ne[0], 5);
    EXPECT_EQ(t->ne[1], 3);
    EXPECT_EQ(std::memcmp(t->data, w0.data(), w0.nbytes()), 0);
    gguf_free(g);
    ggml_free(rctx);
    ggml_free(ctx);
}

// A graph record (ir/serialize.h: how compile carries a host kernel's node into model.gguf) reads back as the same
// graph, every attribute kind and constant dtype included; every truncation and a bad magic are errors (exit 2).
TEST(GraphRecord, RoundTripAndTruncation) {
    Graph sub;
    sub.name = "body";
    sub.values.push_back(Value{});
    sub.values[0].name = "s";
    sub.values[0].dtype = DType::F32;
    sub.outputs = {0};
    sub.free_vars = {"outer"};
    Graph g;
    g.path = "m.onnx", g.name = "main", g.ir_version = 8, g.producer = "test", g.opsets = {{"", 17}, {"com.x", 1}};
    for (const char* n : {"x", "k", "names", "y", "z"}) g.values[g.value_id(n)].name = n;
    g.values[0].dtype = DType::I32, g.values[0].shape = {2, 3}, g.values[0].has_shape = true;
    g.values[0].dim_params = {"batch", ""};
    g.values[1].constant = Tensor::from_i64({7, -1}, {2});
    g.values[2].constant = Tensor::from_strings({"a", "", "\xce\xbb"}, {3});
    g.values[3].producer = 0, g.values[3].seq = std::vector<int>{0, 1};
    g.values[4].producer = 0, g.values[4].is_initializer = false;
    Node n;
    n.name = "n0", n.op_type = "TopK", n.domain = "", n.inputs = {0, -1, 1}, n.outputs = {3, 4};
    Attr a;
    a.kind = Attr::Float, a.f = -0.5f;
    n.attrs["f"] = a;
    a = Attr{}, a.kind = Attr::Ints, a.ints = {1, -2, INT64_MAX};
    n.attrs["ints"] = a;
    a = Attr{}, a.kind = Attr::Strings, a.strings = {"p", "q"};
    n.attrs["strings"] = a;
    a = Attr{}, a.kind = Attr::TensorK, a.t = random_tensor(DType::F32, {2, 2}, 1);
    n.attrs["t"] = a;
    a = Attr{}, a.kind = Attr::Graph, a.g = std::make_shared<Graph>(sub);
    n.attrs["g"] = a;
    a = Attr{}, a.kind = Attr::Floats, a.floats = {1.5f, NAN};
    n.attrs["floats"] = a;
    g.nodes.push_back(n);
    g.inputs = {0}, g.outputs = {3, 4};
    g.declared_outputs = {g.values[3]};
    g.float64 = true, g.max_eval_work = 123.0;

    std::string bytes = save_graph(g);
    Graph r = load_graph(bytes, "rec");
    EXPECT_EQ(save_graph(r), bytes);  // every field read back (the writer writes all of them)
    EXPECT_EQ(r.nodes[0].attrs.at("g").g->free_vars, std::vector<std::string>{"outer"});
    EXPECT_EQ(r.values[2].constant->strings()[2], "\xce\xbb");
    EXPECT_EQ(r.values[1].constant->to_i64(), (std::vector<int64_t>{7, -1}));
    EXPECT_EQ(r.by_name.at("z"), 4);
    for (size_t len = 0; len < bytes.size(); ++len) {
        try {
            load_graph(bytes.substr(0, len), "rec");
            ADD_FAILURE() << "a record cut at " << len << " bytes was read";
        } catch (const Error& e) { EXPECT_EQ(e.code, kExitBadInput); }
    }
    std::string bad = bytes;
    bad[0] ^= 1;
    EXPECT_THROW(load_graph(bad, "rec"), Error);
}

TEST(CodegenText, LiteralsAndCommentsAreInert) {
    std::string evil = "a\"b\\c*/ d\n#include <x>\x01\xff";
    std::string lit = cpp_string_literal(evil);
    EXPECT_EQ(lit.find('\n'), std::string::npos);
    EXPECT_EQ(lit.find("\\\""), std::string::npos);  // quotes become octal escapes
    EXPECT_EQ(lit.substr(1, lit.size() - 2).find('"'), std::string::npos);
    std::string com = cpp_comment_text(evil);
    EXPECT_EQ(com.find('\n'), std::string::npos);
    EXPECT_EQ(com.find("*/"), std::string::npos);
    EXPECT_EQ(com.find('\\'), std::string::npos);
}

// ---- shape rules and folding on a PyTorch-style shape subgraph ---------------------------

static onnx::ModelProto reshape_model() {
    // y = Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [-1]))  : [2,3,4] -> [2,12]
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(17);
    auto* g = m.mutable_graph();
    auto input = [&](const char* name, std::vector<int64_t> dims) {
        auto* vi = g->add_input();
        vi->set_name(name);
        auto* tt = vi->mutable_type()->mutable_tensor_type();
        tt->set_elem_type(1);
        for (auto d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
    };
    input("x", {2, 3, 4});
    auto init = [&](const char* name, std::vector<int64_t> v) {
        auto* t = g->add_initializer();
        t->set_name(name);
        t->set_data_type(7);
        t->add_dims(int64_t(v.size()));
        for (auto x : v) t->add_int64_data(x);
    };
    init("zero", {0});
    init("minus1", {-1});
    auto node = [&](const char* op, std::vector<const char*> in, const char* out) {
        auto* n = g->add_node();
        n->set_op_type(op);
        n->set_name(std::string(op) + "_" + out);
        for (auto i : in) n->add_input(i);
        n->add_output(out);
        return n;
    };
    node("Shape", {"x"}, "s");
    auto* ga = node("Gather", {"s", "zero"}, "d0");
    auto* ax = ga->add_attribute();
    ax->set_name("axis");
    ax->set_type(onnx::AttributeProto::INT);
    ax->set_i(0);
    node("Concat", {"d0", "minus1"}, "shape")->add_attribute()->CopyFrom(*ax);
    node("Reshape", {"x", "shape"}, "y");
    g->add_output()->set_name("y");
    return m;
}

// compile --dim: the numbers recorded over a grid of dims become polynomials where one gives every point exactly
TEST(DynamicDims, FitsPolynomialsExactlyOrNothing) {
    using onnx2ggml::core::fit_expression;
    std::vector<std::vector<int64_t>> one = {{1, 2, 4, 8}};
    EXPECT_EQ(fit_expression(one, {"n"}, {3, 6, 12, 24}), "3LL * n");
    EXPECT_EQ(fit_expression(one, {"n"}, {7, 7, 7, 7}), "7LL");
    EXPECT_EQ(fit_expression(one, {"n"}, {1, 4, 16, 64}), "n * n");
    EXPECT_EQ(fit_expression(one, {"n"}, {2, 8, 32, 128}), "2LL * n * n");
    EXPECT_EQ(fit_expression(one, {"n"}, {1, 8, 64, 512}), "");  // n^3: not of degree <= 2: a table
    // a stride-2 convolution's size on even heights: (h - 1) / 2 + 1 = h / 2; on 7 and 9 it is not linear
    std::vector<std::vector<int64_t>> h = {{64, 96, 128, 160}};
    EXPECT_EQ(fit_expression(h, {"h"}, {32, 48, 64, 80}), "h / 2LL");
    EXPECT_EQ(fit_expression({{7, 8, 9, 10}}, {"h"}, {4, 4, 5, 5}), "");
    // ceil(h / 32) over three heights and two batches: a quadratic in h passes, dividing by 1536: a table
    EXPECT_EQ(fit_expression({{1, 2}, {64, 96, 112}}, {"b", "h"}, {2, 3, 4, 2, 3, 4}), "");
    // two dims: products and byte strides
    std::vector<std::vector<int64_t>> bs = {{1, 2, 3}, {16, 32, 48}};
    std::vector<int64_t> y;
    for (int64_t b : bs[0])
        for (int64_t s : bs[1]) y.push_back(4 * b * s * s + 8 * s - 4);
    EXPECT_EQ(fit_expression(bs, {"b", "s"}, y), "4LL * b * s * s + 8LL * s - 4LL");
    y[4] += 1;  // one point off: no polynomial gives every point
    EXPECT_EQ(fit_expression(bs, {"b", "s"}, y), "");
}

TEST(Specialize, FoldsShapeSubgraphs) {
    std::string bytes;
    reshape_model().SerializeToString(&bytes);
    Graph g = load_onnx_from_bytes(bytes, "mem.onnx", ".");
    specialize(g, {});
    const Value& y = g.values[g.outputs[0]];
    EXPECT_EQ(y.shape, (Shape{2, 12}));
    int folded = 0;
    for (auto& n : g.nodes) folded += n.folded;
    EXPECT_EQ(folded, 3);  // Shape, Gather, Concat
    auto live = live_nodes(g);
    EXPECT_EQ(std::count(live.begin(), live.end(), true), 1);  // only the Reshape reaches ggml
}

TEST(Specialize, RunsOnCpuBackend) {
    std::string bytes;
    reshape_model().SerializeToString(&bytes);
    Graph g = load_onnx_from_bytes(bytes, "mem.onnx", ".");
    specialize(g, {});
    Session s(g, SessionOptions{"cpu", 1});
    Tensor x = random_tensor(DType::F32, {2, 3, 4}, 5);
    auto out = s.run({x});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].shape, (Shape{2, 12}));
    EXPECT_EQ(std::memcmp(out[0].data(), x.data(), x.nbytes()), 0);
}

TEST(Loader, RejectsCyclesAndMissingProducers) {
    onnx::ModelProto m = reshape_model();
    m.mutable_graph()->mutable_node(0)->set_input(0, "nowhere");
    std::string bytes;
    m.SerializeToString(&bytes);
    try {
        load_onnx_from_bytes(bytes, "mem.onnx", ".");
        FAIL();
    } catch (const Error& e) {
        EXPECT_EQ(e.code, kExitBadInput);
        EXPECT_NE(std::string(e.what()).find("'nowhere'"), std::string::npos);
    }
    onnx::ModelProto c = reshape_model();
    c.mutable_graph()->mutable_node(0)->set_input(0, "y");  // Shape(y) -> ... -> y
    c.SerializeToString(&bytes);
    try {
        load_onnx_from_bytes(bytes, "mem.onnx", ".");
        FAIL();
    } catch (const Error& e) { EXPECT_NE(std::string(e.what()).find("cycle"), std::string::npos); }
}

TEST(Loader, SortsNodesOutOfOrder) {
    onnx::ModelProto m = reshape_model();
    auto* nodes = m.mutable_graph()->mutable_node();
    std::reverse(nodes->begin(), nodes->end());
    std::string bytes;
    m.SerializeToString(&bytes);
    Graph g = load_onnx_from_bytes(bytes, "mem.onnx", ".");
    EXPECT_EQ(g.nodes.front().op_type, "Shape");
    EXPECT_EQ(g.nodes.back().op_type, "Reshape");
}

TEST(Loader, ExternalDataIsConfined) {
    onnx::ModelProto m = reshape_model();
    auto* t = m.mutable_graph()->mutable_initializer(0);
    t->clear_int64_data();
    t->set_data_location(onnx::TensorProto::EXTERNAL);
    auto* kv = t->add_external_data();
    kv->set_key("location");
    for (const char* loc : {"../etc/passwd", "/etc/passwd", "sub/../../x"}) {
        kv->set_value(loc);
        std::string bytes;
        m.SerializeToString(&bytes);
        try {
            load_onnx_from_bytes(bytes, "mem.onnx", testing::TempDir());
            FAIL() << loc;
        } catch (const Error& e) {
            EXPECT_EQ(e.code, kExitBadInput);
            EXPECT_NE(std::string(e.what()).find("zero"), std::string::npos) << e.what();
        }
    }
}

// ---- run-time specialization -------------------------------------------------------------

// y = Reshape(x + w, s): x [n, 3] with a symbolic n, w an initializer [3], s an int64 graph input
// (a control input: Reshape needs its value at compile time).
static Graph dynamic_reshape_graph() {
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(17);
    auto* g = m.mutable_graph();
    auto* x = g->add_input();
    x->set_name("x");
    auto* xt = x->mutable_type()->mutable_tensor_type();
    xt->set_elem_type(1);
    xt->mutable_shape()->add_dim()->set_dim_param("n");
    xt->mutable_shape()->add_dim()->set_dim_value(3);
    auto* s = g->add_input();
    s->set_name("s");
    s->mutable_type()->mutable_tensor_type()->set_elem_type(7);
    s->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(2);
    auto* w = g->add_initializer();
    w->set_name("w");
    w->set_data_type(1);
    w->add_dims(3);
    for (float v : {1.f, 2.f, 3.f}) w->add_float_data(v);
    auto* add = g->add_node();
    add->set_op_type("Add");
    add->add_input("x");
    add->add_input("w");
    add->add_output("a");
    auto* rs = g->add_node();
    rs->set_op_type("Reshape");
    rs->add_input("a");
    rs->add_input("s");
    rs->add_output("y");
    g->add_output()->set_name("y");
    std::string bytes;
    m.SerializeToString(&bytes);
    return load_onnx_from_bytes(bytes, "mem.onnx", ".");
}

TEST(SpecializingSession, BindsDimsFindsControlInputsAndCaches) {
    SpecializingSession ss(dynamic_reshape_graph(), CompileOptions{}, SessionOptions{"cpu", 1}, 2);
    auto run = [&](int64_t n, std::vector<int64_t> shape) {
        Tensor x = random_tensor(DType::F32, {n, 3}, uint64_t(n));
        auto out = ss.run({x, Tensor::from_i64(shape, {2})});
        EXPECT_EQ(out[0].shape, Shape(shape.begin(), shape.end()));
        for (int64_t i = 0; i < x.numel(); ++i) EXPECT_EQ(float(out[0].getf(i)), float(x.getf(i)) + float(1 + i % 3));
    };
    run(2, {3, 2});
    EXPECT_EQ(ss.control_inputs(), std::vector<std::string>{"s"});
    uint64_t shared = ss.shared_weight_bytes();  // w, in one buffer (aligned)
    EXPECT_GE(shared, 3 * sizeof(float));
    run(2, {1, 6});  // same shapes, another control value: a new specialization
    run(2, {3, 2});  // a hit
    run(4, {2, 6});  // a new shape: the least recently used ({1, 6}) is evicted
    const SpecializationStats& st = ss.stats();
    EXPECT_EQ(st.runs, 4u);
    EXPECT_EQ(st.misses, 3u);
    EXPECT_EQ(st.hits, 1u);
    EXPECT_EQ(st.evictions, 1u);
    EXPECT_EQ(ss.cached(), 2u);
    EXPECT_EQ(ss.shared_weight_bytes(), shared);  // w uploaded once for all three specializations
}

TEST(SpecializingSession, InputsDisagreeingOnASymbolicDim) {
    Graph g = dynamic_reshape_graph();
    std::vector<int> ids = {g.inputs[0], g.inputs[0]};  // the same symbolic dim n twice
    Tensor a = Tensor::zeros(DType::F32, {2, 3}), b = Tensor::zeros(DType::F32, {5, 3});
    try {
        resolve_input_shapes(g, ids, {&a, &b}, CompileOptions{});
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_EQ(e.code, kExitBadInput);
        EXPECT_NE(std::string(e.what()).find("(n=2)"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("(n=5)"), std::string::npos) << e.what();
    }
    EXPECT_EQ(resolve_input_shapes(g, ids, {&a, nullptr}, CompileOptions{})[1],
              (Shape{2, 3}));  // bound by the other input
}

// The registry: one entry per (domain, op); "", "ai.onnx" and "onnx2ggml" are one domain (the fusions
// emit onnx2ggml-domain nodes), internal o2g.* ops are found but not listed; a second entry is exit 4.
TEST(Registry, LookupAndDuplicates) {
    const Registry& r = Registry::get();
    for (const char* dom : {"", "ai.onnx", "onnx2ggml"}) {
        EXPECT_NE(r.find(dom, "Gelu"), nullptr) << dom;
        EXPECT_NE(r.find(dom, "o2g.Silu"), nullptr) << dom;
    }
    EXPECT_EQ(r.find("com.microsoft", "Gelu"), nullptr);
    EXPECT_EQ(r.find("", "NoSuchOp"), nullptr);
    EXPECT_EQ(r.find("", "Conv")->min_inputs, 2);
    EXPECT_EQ(r.find("", "BatchNormalization")->min_inputs, 5);
    auto types = r.op_types();
    EXPECT_TRUE(std::is_sorted(types.begin(), types.end()));
    EXPECT_EQ(std::count(types.begin(), types.end(), "o2g.Silu"), 0);
    Registry x;
    OpDef d;
    d.op_type = "Foo";
    x.add(d);
    d.domain = "ai.onnx";
    try {
        x.add(d);
        FAIL() << "a duplicate was accepted";
    } catch (const Error& e) { EXPECT_EQ(e.code, kExitInternal); }
}

// Every op with a ggml lowering also has a host evaluator: `compare --reference host` then computes every
// value independently of ggml's kernels. The ops listed here have none yet (each would need one).
TEST(Registry, HostEvaluators) {
    const Registry& r = Registry::get();
    std::vector<std::string> missing;
    for (auto& t : r.op_types()) {
        const OpDef* d = r.find("", t);
        if (d && d->lower && !d->eval) missing.push_back(t);
    }
    std::string list;
    for (auto& m : missing) list += m + " ";
    EXPECT_EQ(list, "") << "ops with a lowering but no host evaluator";
}

// The weight rule set (lower/weights.h): small weights and vectors stay f32, rows that a type's blocks do not
// divide fall back, convolution kernels are never quantized (f32 under a quantized type, f16 when asked).
TEST(WeightRules, Choose) {
    WeightRules r;
    r.base = GGML_TYPE_Q4_K;
    EXPECT_EQ(r.choose("fc.weight", {512, 256}, false, false), GGML_TYPE_Q4_K);
    EXPECT_EQ(r.choose("fc.weight", {512, 96}, false, false), GGML_TYPE_Q5_0);  // rows of 96: 32-value blocks
    EXPECT_EQ(r.choose("fc.weight", {512, 100}, false, false), GGML_TYPE_F16);  // no block divides 100
    EXPECT_EQ(r.choose("fc.weight", {256, 512}, true, false), GGML_TYPE_Q4_K);  // transposed: rows of 256
    EXPECT_EQ(r.choose("small", {32, 64}, false, false), GGML_TYPE_F32);        // < 4096 elements
    EXPECT_EQ(r.choose("vec", {8192}, false, false), GGML_TYPE_F32);
    EXPECT_EQ(r.choose("conv.weight", {64, 64, 3, 3}, false, true), GGML_TYPE_F32);
    r.rules.push_back(parse_weight_rule("conv=f16"));
    r.rules.push_back(parse_weight_rule("small=q8_0"));
    EXPECT_EQ(r.choose("conv.weight", {64, 64, 3, 3}, false, true), GGML_TYPE_F16);
    EXPECT_EQ(r.choose("small", {32, 64}, false, false), GGML_TYPE_Q8_0);  // a rule overrides the small default
    WeightRules h;
    h.base = GGML_TYPE_F16;
    EXPECT_EQ(h.choose("conv.weight", {64, 64, 3, 3}, false, true), GGML_TYPE_F16);
}
