// Normalization patterns of exported graphs, rewritten into ggml's fused normalizations.
//   fuse_groupnorm: PyTorch's GroupNorm export
//       Reshape(x, [N, G, -1]) -> InstanceNormalization(scale 1, bias 0) -> Reshape(back to x's shape)
//       [-> Mul(per-channel gamma) [-> Add(per-channel beta)]]
//     -> o2g.GroupNorm(x, gamma, beta; num_groups, epsilon)        (ggml_group_norm, then mul/add)
//   fuse_layernorm: the LayerNorm of exports below opset 17
//       d = x - ReduceMean(x); d / Sqrt(ReduceMean(Pow(d, 2)) + eps)   (last axis, keepdims)
//     -> o2g.Norm(x; epsilon)                                             (ggml_norm; the affine Mul/Add stay)
#include "lower/layout.h"
#include "passes/match.h"
#include "passes/pipeline.h"

namespace onnx2ggml::core {
namespace {

// A constant that broadcasts per channel (axis 1) against a tensor of shape xs: [C], [C,1,..], [1,C,1,..].
bool per_channel(const Graph& g, int v, const Shape& xs) {
    if (!is_const(g, v) || g.values[v].dtype != DType::F32) return false;
    const Shape& s = g.values[v].shape;
    if (s.size() > xs.size() || s.size() + 1 < xs.size()) return false;
    Shape a = align_rank(s, xs.size());
    for (size_t i = 0; i < a.size(); ++i)
        if (a[i] != (i == 1 ? xs[1] : 1)) return false;
    return true;
}

// The single axis a ReduceMean reduces (normalized), or -1; keepdims must be 1.
int reduce_mean_axis(const Graph& g, const Node& n) {
    if (n.inputs.empty() || n.inputs[0] < 0) return -1;
    auto kd = n.attrs.find("keepdims");
    if (kd != n.attrs.end() && kd->second.i != 1) return -1;
    std::vector<int64_t> axes;
    auto ax = n.attrs.find("axes");
    if (ax != n.attrs.end()) axes = ax->second.ints;
    else if (n.inputs.size() > 1 && is_const(g, n.inputs[1])) axes = g.values[n.inputs[1]].constant->to_i64();
    int64_t r = int64_t(g.values[n.inputs[0]].shape.size());
    if (axes.size() != 1 || axes[0] < -r || axes[0] >= r) return -1;
    return int(axes[0] < 0 ? axes[0] + r : axes[0]);
}

}  // namespace

bool fuse_groupnorm(Graph& g) {
    bool changed = false;
    Uses uses(g);
    auto cons = consumers(g);
    for (auto& in : g.nodes) {
        if (in.folded || !in.domain.empty() || in.op_type != "InstanceNormalization" || in.inputs.size() != 3) continue;
        Node* r1 = producer_op(g, in.inputs[0], "Reshape");
        if (!r1 || !uses.single(in.inputs[0])) continue;
        int x = r1->inputs[0];
        const Shape xs = g.values[x].shape;
        const Shape& rs = g.values[in.inputs[0]].shape;
        if (xs.size() < 3 || rs.size() != 3 || rs[0] != xs[0] || g.values[x].dtype != DType::F32) continue;
        int64_t C = xs[1], G = rs[1];
        if (G <= 0 || C % G != 0 || !is_splat_const(g, in.inputs[1], 1.0) || !is_splat_const(g, in.inputs[2], 0.0))
            continue;
        Node* r2 = sole_consumer_op(g, uses, cons, in.outputs[0], "Reshape");
        if (!r2 || g.values[r2->outputs[0]].shape != xs) continue;
        std::vector<int> inputs = {x};
        Node* last = r2;
        Node* mul = sole_consumer_op(g, uses, cons, r2->outputs[0], "Mul");
        int gamma = mul ? other(*mul, r2->outputs[0]) : -1;
        if (mul && gamma >= 0 && per_channel(g, gamma, xs)) {
            inputs.push_back(gamma);
            last = mul;
            Node* add = sole_consumer_op(g, uses, cons, mul->outputs[0], "Add");
            int beta = add ? other(*add, mul->outputs[0]) : -1;
            if (add && beta >= 0 && per_channel(g, beta, xs)) {
                inputs.push_back(beta);
                last = add;
            }
        }
        float eps = in.attrs.count("epsilon") ? in.attrs.at("epsilon").f : 1e-5f;
        make_internal(*last, "o2g.GroupNorm", inputs);
        last->attrs["num_groups"] = int_attr(G);
        last->attrs["epsilon"] = float_attr(eps);
        changed = true;
        uses = Uses(g);
        cons = consumers(g);
    }
    return changed;
}

bool fuse_layernorm(Graph& g) {
    bool changed = false;
    Uses uses(g);
    for (auto& div : g.nodes) {
        if (div.folded || !div.domain.empty() || div.op_type != "Div" || div.inputs.size() != 2) continue;
        int d = div.inputs[0];
        Node* sq = producer_op(g, div.inputs[1], "Sqrt");
        Node* sub = producer_op(g, d, "Sub");
        if (!sq || !sub || !uses.single(div.inputs[1]) || uses.count[d] != 2) continue;
        Node* add = producer_op(g, sq->inputs[0], "Add");
        if (!add || !uses.single(sq->inputs[0])) continue;
        int var = -1;
        float eps = 0;
        for (int k = 0; k < 2; ++k)
            if (is_const(g, add->inputs[k]) && g.values[add->inputs[k]].constant->numel() == 1) {
                var = add->inputs[1 - k];
                eps = float(g.values[add->inputs[k]].constant->getf(0));
            }
        Node* rm2 = var >= 0 ? producer_op(g, var, "ReduceMean") : nullptr;
        if (!rm2 || !uses.single(var)) continue;
        Node* pw = producer_op(g, rm2->inputs[0], "Pow");
        if (!pw || !uses.single(rm2->inputs[0]) || pw->inputs[0] != d || !is_scalar_const(g, pw->inputs[1], 2.0, 0))
            continue;
        int x = sub->inputs[0];
        Node* rm1 = producer_op(g, sub->inputs[1], "ReduceMean");
        if (!rm1 || rm1->inputs[0] != x || !uses.single(sub->inputs[1])) continue;
        int last = int(g.values[x].shape.size()) - 1;
        if (last < 0 || reduce_mean_axis(g, *rm1) != last || reduce_mean_axis(g, *rm2) != last) continue;
        if (g.values[x].dtype != DType::F32 || g.values[div.outputs[0]].shape != g.values[x].shape) continue;
        make_internal(div, "o2g.Norm", {x});
        div.attrs["epsilon"] = float_attr(eps);
        changed = true;
        uses = Uses(g);
    }
    return changed;
}

}  // namespace onnx2ggml::core
