// Sequence operators (ONNX seq(tensor)). onnx2ggml compiles static graphs, so a sequence is
// resolved at compile time to the list of its element values (Value::seq); positions must be
// compile-time constants. SequenceEmpty/Construct/Insert/Erase/Length are computed on that list;
// SequenceAt, ConcatFromSequence and SplitToSequence rewrite themselves into Identity, Unsqueeze
// + Concat and Split (+ Squeeze), which are lowered like any tensor op.
#include "ops/common.h"

namespace onnx2ggml::core {
namespace {

std::vector<int> seq_in(OpCtx& c, int i) {  // a copy: new values may move the graph's values
    if (!c.in(i).seq) c.fail("input " + std::to_string(i) + " is not a sequence");
    return *c.in(i).seq;
}

// position input i of a sequence of n elements (negative counts from the end), within [lo, n + hi]
int64_t seq_pos(OpCtx& c, int i, int64_t n, int64_t def, int64_t hi) {
    int64_t p = c.has(i) ? c.cval(i).geti(0) : def;
    if (p < -n || p > n - 1 + hi)
        c.fail("position " + std::to_string(p) + " is out of range for a sequence of " + std::to_string(n));
    return p < 0 ? p + n : p;
}

void def(Registry& r, const char* op, std::function<void(OpCtx&)> infer) {
    OpDef d;
    d.op_type = op;
    d.seq_inputs = true;
    d.infer = std::move(infer);
    r.add(d);
}

}  // namespace

O2G_OP_FAMILY(sequence) {
    def(r, "SequenceEmpty", [](OpCtx& c) { c.set_seq(0, {}); });
    def(r, "SequenceConstruct", [](OpCtx& c) {
        std::vector<int> e;
        for (int i = 0; i < c.nin(); ++i) {
            if (c.dtype(i) != c.dtype(0)) c.fail("sequence elements of different dtypes");
            e.push_back(c.node().inputs[size_t(i)]);
        }
        c.set_seq(0, e);
    });
    def(r, "SequenceInsert", [](OpCtx& c) {
        if (!c.has(1)) c.fail("no tensor to insert (input 1)");
        std::vector<int> e = seq_in(c, 0);
        int64_t n = int64_t(e.size());
        e.insert(e.begin() + seq_pos(c, 2, n, n, 1), c.node().inputs[1]);
        c.set_seq(0, e);
    });
    def(r, "SequenceErase", [](OpCtx& c) {
        std::vector<int> e = seq_in(c, 0);
        int64_t n = int64_t(e.size());
        if (n == 0) c.fail("erase from an empty sequence");
        e.erase(e.begin() + seq_pos(c, 1, n, n - 1, 0));
        c.set_seq(0, e);
    });
    def(r, "SequenceLength", [](OpCtx& c) { c.set_const(0, Tensor::scalar_i64(int64_t(seq_in(c, 0).size()))); });
    def(r, "SequenceAt", [](OpCtx& c) {
        const std::vector<int> e = seq_in(c, 0);
        int64_t n = int64_t(e.size());
        if (n == 0) c.fail("SequenceAt of an empty sequence");
        c.replace_with({c.make_node("Identity", {e[size_t(seq_pos(c, 1, n, 0, 0))]}, {c.node().outputs[0]})});
    });
    def(r, "ConcatFromSequence", [](OpCtx& c) {
        const std::vector<int> e = seq_in(c, 0);
        if (e.empty()) c.fail("ConcatFromSequence of an empty sequence");
        if (!c.has_attr("axis")) c.fail("attribute 'axis' is required");
        std::vector<Node> nodes;
        std::vector<int> parts = e;
        if (c.ai("new_axis", 0) != 0) {  // stack: unsqueeze every element at the new axis first
            int64_t rank = int64_t(c.graph().values[size_t(e[0])].shape.size()), a = c.ai("axis", 0);
            if (a < -rank - 1 || a > rank)
                c.fail("axis " + std::to_string(a) + " is out of range for new_axis on rank " + std::to_string(rank));
            if (a < 0) a += rank + 1;
            for (int& p : parts) {
                int u = c.graph().new_value(c.node().name + "_unsqueezed");
                nodes.push_back(axes_node(c, "Unsqueeze", p, a, u));
                p = u;
            }
            Node cat = c.make_node("Concat", parts, {c.node().outputs[0]});
            cat.attrs["axis"] = int_attr(a);
            nodes.push_back(cat);
        } else {
            Node cat = c.make_node("Concat", parts, {c.node().outputs[0]});
            cat.attrs["axis"] = int_attr(c.ai("axis", 0));
            nodes.push_back(cat);
        }
        c.replace_with(nodes);
    });
    def(r, "SplitToSequence", [](OpCtx& c) {
        const Shape s = c.shape(0);
        int a = c.axis(c.ai("axis", 0), int(s.size()));
        int64_t dim = s[size_t(a)];
        std::vector<int64_t> sizes;
        bool squeeze = false;
        if (!c.has(1)) {  // pieces of size 1, squeezed unless keepdims
            sizes.assign(size_t(dim), 1);
            squeeze = c.ai("keepdims", 1) == 0;
        } else if (c.rank(1) == 0) {  // pieces of one size, the last one smaller
            int64_t k = c.cval(1).geti(0);
            if (k <= 0) c.fail("split size must be positive");
            for (int64_t p = 0; p < dim; p += k) sizes.push_back(std::min(k, dim - p));
        } else {
            sizes = c.cints(1);
        }
        if (sizes.empty()) c.fail_unsupported("SplitToSequence into an empty sequence");
        std::vector<int> pieces, elems;
        for (size_t i = 0; i < sizes.size(); ++i) pieces.push_back(c.graph().new_value(c.node().name + "_piece"));
        Node split;
        if (c.graph().opset("") >= 13) {
            split = c.make_node("Split",
                                {c.node().inputs[0], c.new_const(Tensor::from_i64(sizes, {int64_t(sizes.size())}),
                                                                 c.node().name + "_split")},
                                pieces);
        } else {
            split = c.make_node("Split", {c.node().inputs[0]}, pieces);
            split.attrs["split"] = ints_attr(sizes);
        }
        split.attrs["axis"] = int_attr(a);
        std::vector<Node> nodes = {split};
        elems = pieces;
        if (squeeze)
            for (int& p : elems) {
                int q = c.graph().new_value(c.node().name + "_element");
                nodes.push_back(axes_node(c, "Squeeze", p, a, q));
                p = q;
            }
        c.set_seq(0, elems);
        c.replace_with(nodes);
    });
}

}  // namespace onnx2ggml::core
