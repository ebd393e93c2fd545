// fuse_softmax_ext: the attention-score pattern
//     Softmax(last axis) of  [Reshape] Add(mask constant) [Reshape]  of  Mul/Div(scalar constant)  of  x
// (either the mask or the scale may be absent; the reshapes must keep the last dim)
//   -> o2g.SoftmaxExt(x, mask; scale, shape, out_shape)  = one ggml_soft_max_ext(x*scale + mask).
// `shape` is where the mask is added (the Add's shape), `out_shape` the Softmax's. Together with
// MatMul reading its operands through views (no copies of K) this is the attention of SD exports:
// MatMul -> scale -> (mask) -> Softmax -> MatMul, with one softmax kernel and no scale/mask passes.
#include "lower/layout.h"
#include "passes/match.h"
#include "passes/pipeline.h"

namespace onnx2ggml::core {
namespace {

bool keeps_last_dim(const Graph& g, const Node& reshape) {
    const Shape& a = g.values[reshape.inputs[0]].shape;
    const Shape& b = g.values[reshape.outputs[0]].shape;
    return !a.empty() && !b.empty() && a.back() == b.back();
}

}  // namespace

bool fuse_softmax_ext(Graph& g) {
    bool changed = false;
    Uses uses(g);
    for (auto& sm : g.nodes) {
        if (sm.folded || !sm.domain.empty() || sm.op_type != "Softmax" || sm.inputs.size() != 1 ||
            sm.outputs.size() != 1)
            continue;
        const Value& out = g.values[sm.outputs[0]];
        int64_t r = int64_t(out.shape.size());
        int64_t opset = g.opset("");
        int64_t axis = sm.attrs.count("axis") ? sm.attrs.at("axis").i : (opset >= 13 ? -1 : 1);
        if (axis < 0) axis += r;
        if (r < 1 || axis != r - 1 || out.dtype != DType::F32) continue;
        int v = sm.inputs[0];
        int mask = -1;
        float scale = 1.0f;
        Shape add_shape;
        auto skip_reshape = [&]() {
            Node* n = producer_op(g, v, "Reshape");
            if (n && uses.single(v) && keeps_last_dim(g, *n)) v = n->inputs[0];
        };
        skip_reshape();
        if (Node* add = producer_op(g, v, "Add"); add && uses.single(v) && add->inputs.size() == 2) {
            for (int k = 0; k < 2; ++k) {
                int m = add->inputs[k], x = add->inputs[1 - k];
                if (is_const(g, m) && !is_const(g, x) && g.values[x].shape == g.values[v].shape &&
                    g.values[v].shape.size() <= 4 && g.values[v].shape.size() >= g.values[m].shape.size()) {
                    Shape b;
                    if (!broadcast_shapes(g.values[m].shape, g.values[v].shape, b) || b != g.values[v].shape) continue;
                    mask = m;
                    add_shape = g.values[v].shape;
                    v = x;
                    skip_reshape();
                    break;
                }
            }
        }
        Node* sc = producer(g, v);
        if (sc && sc->domain.empty() && (sc->op_type == "Mul" || sc->op_type == "Div") && uses.single(v) &&
            sc->inputs.size() == 2) {
            for (int k = sc->op_type == "Mul" ? 0 : 1; k < 2; ++k) {
                int s = sc->inputs[k], x = sc->inputs[1 - k];
                if (is_const(g, s) && g.values[s].constant->numel() == 1 && !is_const(g, x) &&
                    g.values[x].shape == g.values[v].shape) {
                    double f = g.values[s].constant->getf(0);
                    if (sc->op_type == "Div") {
                        if (f == 0) break;
                        f = 1.0 / f;
                    }
                    scale = float(f);
                    v = x;
                    break;
                }
            }
        }
        if (mask < 0 && scale == 1.0f) continue;
        const Shape& base = g.values[v].shape;
        if (base.empty() || base.back() != out.shape.back() || g.values[v].dtype != DType::F32) continue;
        if (add_shape.empty()) add_shape = base;
        if (add_shape.size() > 4) continue;
        std::vector<int> inputs = {v};
        if (mask >= 0) inputs.push_back(mask);
        Shape out_shape = out.shape;
        make_internal(sm, "o2g.SoftmaxExt", inputs);
        sm.attrs["scale"] = float_attr(scale);
        sm.attrs["shape"] = ints_attr(add_shape);
        sm.attrs["out_shape"] = ints_attr(out_shape);
        changed = true;
        uses = Uses(g);
    }
    return changed;
}

// chunk_attention: attention whose score matrix is large (SD's UNet at 512x512: 4096 tokens, 8 heads,
// both halves of classifier-free guidance: 1 GiB of scores per attention)
//     MatMul(q, kt) -> o2g.SoftmaxExt -> MatMul(., v)
// with equal batch dims in each product (no broadcasting) and scores of more than kAttentionScoreBytes
//   -> o2g.Attention(q, kt, v, mask; scale, shape, rows, out_shape): the same two products and softmax,
// computed over blocks of `rows` query rows (rows are independent in all three), so that one block's
// scores are live at a time (ops/matmul.cpp). Smaller attentions are left as they are.
namespace {
constexpr int64_t kAttentionScoreBytes = int64_t(64) << 20;

Shape batch_of(const Shape& s) { return Shape(s.begin(), s.end() - 2); }
}  // namespace

bool chunk_attention(Graph& g) {
    bool changed = false;
    Uses uses(g, live_nodes(g));  // the fusions before leave their matched nodes behind, unread
    for (auto& mm2 : g.nodes) {
        if (mm2.folded || !mm2.domain.empty() || mm2.op_type != "MatMul" || mm2.inputs.size() != 2) continue;
        int p = mm2.inputs[0], v = mm2.inputs[1];
        Node* sm = producer(g, p);
        if (!sm || sm->op_type != "o2g.SoftmaxExt" || !uses.single(p)) continue;
        int s = sm->inputs[0];
        Node* mm1 = producer_op(g, s, "MatMul");
        if (!mm1 || !uses.single(s) || mm1->inputs.size() != 2) continue;
        int q = mm1->inputs[0], kt = mm1->inputs[1];
        const Shape &sq = g.values[q].shape, &skt = g.values[kt].shape, &ss = g.values[s].shape;
        const Shape &sp = g.values[p].shape, &sv = g.values[v].shape;
        auto ok_rank = [](const Shape& x) { return x.size() >= 3 && x.size() <= 4; };
        if (!ok_rank(sq) || !ok_rank(skt) || !ok_rank(ss) || !ok_rank(sp) || !ok_rank(sv)) continue;
        if (is_const(g, q) || is_const(g, kt) || is_const(g, v)) continue;
        bool f32 = true;
        for (int x : {q, kt, v, s, p}) f32 = f32 && g.values[x].dtype == DType::F32;
        if (!f32) continue;
        int64_t M = ss[ss.size() - 2], N = ss.back();
        Shape sm_shape = sm->attrs.at("shape").ints;
        // the softmax's reshapes (around its mask) may regroup the batch dims only
        if (batch_of(sq) != batch_of(skt) || batch_of(ss) != batch_of(sq) || batch_of(sp) != batch_of(sv) ||
            shape_numel(batch_of(ss)) != shape_numel(batch_of(sp)) || sm_shape.size() < 2 ||
            sm_shape[sm_shape.size() - 2] != M || sm_shape.back() != N || sp[sp.size() - 2] != M ||
            sp.back() != N || sv[sv.size() - 2] != N)
            continue;
        int64_t bytes = shape_numel(ss) * 4;
        if (bytes <= kAttentionScoreBytes) continue;
        int64_t blocks = (bytes + kAttentionScoreBytes - 1) / kAttentionScoreBytes;
        int64_t rows = (M + blocks - 1) / blocks;
        if (rows >= M) continue;
        std::vector<int> inputs = {q, kt, v};
        if (sm->inputs.size() > 1 && sm->inputs[1] >= 0) inputs.push_back(sm->inputs[1]);
        float scale = sm->attrs.at("scale").f;
        Shape out_shape = g.values[mm2.outputs[0]].shape;
        make_internal(mm2, "o2g.Attention", inputs);
        mm2.attrs["scale"] = float_attr(scale);
        mm2.attrs["shape"] = ints_attr(sm_shape);
        mm2.attrs["rows"] = int_attr(rows);
        mm2.attrs["out_shape"] = ints_attr(out_shape);
        changed = true;
        uses = Uses(g, live_nodes(g));
    }
    return changed;
}

}  // namespace onnx2ggml::core
