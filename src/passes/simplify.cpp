// eliminate_identity_arithmetic: x + 0, x - 0, x * 1, x / 1 with a constant that does not
// broadcast x to a larger shape become Identity (no ggml op). PyTorch exports such nodes for
// module constants like diffusers' `output_scale_factor = 1` and `rescale_output_factor = 1`.
//
// global_pool_as_pool: GlobalAveragePool of a 4-D map (and ReduceMean over its two spatial axes,
// keepdims) becomes AveragePool with the map as its kernel: the same mean, lowered to ggml_pool_2d,
// which the oneDNN backend runs as a vectorized multithreaded pooling, where ggml_mean (ggml's CPU
// kernel: one thread, a scalar sum in double) took 20% of efficientnet_b0's time in its SE blocks.
//
// fold_pad_into_window: a constant Pad with zeros on the spatial dims, read only by Conv and by
// AveragePool counting its padding (count_include_pad, or no padding of its own), becomes their
// padding: the same sums, with no padded copy of the map. PyTorch exports avg_pool2d(padding=p)
// (count_include_pad=True, inception_v3's 9 branch pools) and TensorFlow/Paddle converters export
// "SAME" convolutions this way; the padded copy was a ggml CPU node (one thread) between oneDNN nodes.
#include <algorithm>

#include "passes/match.h"
#include "passes/pipeline.h"

namespace onnx2ggml::core {

bool eliminate_identity_arithmetic(Graph& g) {
    bool changed = false;
    for (auto& n : g.nodes) {
        if (n.folded || !n.domain.empty() || n.inputs.size() != 2 || n.outputs.size() != 1) continue;
        double neutral;
        bool commutative;
        if (n.op_type == "Add") neutral = 0, commutative = true;
        else if (n.op_type == "Sub") neutral = 0, commutative = false;
        else if (n.op_type == "Mul") neutral = 1, commutative = true;
        else if (n.op_type == "Div") neutral = 1, commutative = false;
        else continue;
        if (n.attrs.count("broadcast")) continue;  // opset < 7 broadcast semantics: leave to the op
        const Value& out = g.values[n.outputs[0]];
        for (int k = commutative ? 0 : 1; k < 2; ++k) {
            int cst = n.inputs[k], x = n.inputs[1 - k];
            if (x < 0 || cst < 0 || is_const(g, x) || !is_splat_const(g, cst, neutral)) continue;
            const Value& xv = g.values[x];
            if (xv.shape != out.shape || xv.dtype != out.dtype || !dtype_is_float(out.dtype)) continue;
            n.op_type = "Identity";
            n.inputs = {x};
            n.attrs.clear();
            changed = true;
            break;
        }
    }
    return changed;
}

bool global_pool_as_pool(Graph& g) {
    bool changed = false;
    for (auto& n : g.nodes) {
        if (n.folded || !n.domain.empty() || n.inputs.empty() || n.inputs[0] < 0 || n.outputs.size() != 1) continue;
        const Value& x = g.values[n.inputs[0]];
        if (!x.has_shape || x.shape.size() != 4 || x.dtype != DType::F32 || is_const(g, n.inputs[0])) continue;
        if (n.op_type == "ReduceMean") {  // axes as an attribute (opset < 18): {2, 3} or {-2, -1}, keepdims
            auto ax = n.attrs.find("axes");
            auto kd = n.attrs.find("keepdims");
            if (n.inputs.size() != 1 || ax == n.attrs.end() || (kd != n.attrs.end() && kd->second.i == 0)) continue;
            std::vector<int64_t> a = ax->second.ints;
            for (auto& v : a) v = v < 0 ? v + 4 : v;
            std::sort(a.begin(), a.end());
            if (a != std::vector<int64_t>{2, 3}) continue;
        } else if (n.op_type != "GlobalAveragePool") {
            continue;
        }
        n.op_type = "AveragePool";
        n.attrs.clear();
        n.attrs["kernel_shape"] = ints_attr({x.shape[2], x.shape[3]});
        changed = true;
    }
    return changed;
}

namespace {

// A zero-valued constant Pad's pads as [begin..., end...] over all dims of its input, or empty if
// the node is not one (mode, value, axes not constant).
std::vector<int64_t> zero_pad_amounts(const Graph& g, const Node& n, size_t rank) {
    auto mode = n.attrs.find("mode");
    if (mode != n.attrs.end() && mode->second.s != "constant") return {};
    std::vector<int64_t> pads, axes;
    if (g.opset("") < 11) {
        auto p = n.attrs.find("pads");
        auto v = n.attrs.find("value");
        if (p == n.attrs.end() || (v != n.attrs.end() && v->second.f != 0.0f)) return {};
        pads = p->second.ints;
    } else {
        if (n.inputs.size() < 2 || !is_const(g, n.inputs[1])) return {};
        if (n.inputs.size() > 2 && n.inputs[2] >= 0 && !is_splat_const(g, n.inputs[2], 0.0)) return {};
        const Tensor& t = *g.values[n.inputs[1]].constant;
        for (int64_t i = 0; i < t.numel(); ++i) pads.push_back(int64_t(t.getf(i)));
        if (n.inputs.size() > 3 && n.inputs[3] >= 0) {
            if (!is_const(g, n.inputs[3])) return {};
            const Tensor& a = *g.values[n.inputs[3]].constant;
            for (int64_t i = 0; i < a.numel(); ++i) axes.push_back(int64_t(a.getf(i)));
        }
    }
    if (axes.empty())
        for (size_t i = 0; i < pads.size() / 2; ++i) axes.push_back(int64_t(i));
    if (pads.size() != 2 * axes.size()) return {};
    std::vector<int64_t> all(2 * rank, 0);
    for (size_t i = 0; i < axes.size(); ++i) {
        int64_t a = axes[i] < 0 ? axes[i] + int64_t(rank) : axes[i];
        if (a < 0 || a >= int64_t(rank)) return {};
        all[size_t(a)] = pads[i], all[rank + size_t(a)] = pads[axes.size() + i];
    }
    return all;
}

// Whether node `r` reading the padded map can take the padding as its own.
bool takes_padding(const Node& r, int padded) {
    if (!r.domain.empty() || r.inputs.empty() || r.inputs[0] != padded) return false;
    for (size_t i = 1; i < r.inputs.size(); ++i)
        if (r.inputs[i] == padded) return false;
    auto ap = r.attrs.find("auto_pad");
    if (ap != r.attrs.end() && ap->second.s != "NOTSET") return false;
    if (r.op_type == "Conv") return true;
    if (r.op_type != "AveragePool") return false;
    auto ceil = r.attrs.find("ceil_mode");  // (ceil_mode: a last window starting in the padding is dropped)
    if (ceil != r.attrs.end() && ceil->second.i != 0) return false;
    auto cip = r.attrs.find("count_include_pad");
    if (cip != r.attrs.end() && cip->second.i != 0) return true;
    auto p = r.attrs.find("pads");
    return p == r.attrs.end() || std::all_of(p->second.ints.begin(), p->second.ints.end(), [](int64_t v) { return v == 0; });
}

}  // namespace

bool fold_pad_into_window(Graph& g) {
    bool changed = false;
    auto cons = consumers(g);
    Uses uses(g);
    for (auto& n : g.nodes) {
        if (n.folded || !n.domain.empty() || n.op_type != "Pad" || n.inputs.empty() || n.outputs.size() != 1) continue;
        int x = n.inputs[0], y = n.outputs[0];
        if (x < 0 || y < 0 || is_const(g, x) || uses.count[size_t(y)] >= 1000 || cons[size_t(y)].empty()) continue;
        const Value& xv = g.values[size_t(x)];
        if (!xv.has_shape || xv.shape.size() < 3 || !dtype_is_float(xv.dtype)) continue;
        size_t rank = xv.shape.size();
        std::vector<int64_t> pads = zero_pad_amounts(g, n, rank);
        if (pads.empty() || pads[0] || pads[1] || pads[rank] || pads[rank + 1] ||
            std::any_of(pads.begin(), pads.end(), [](int64_t v) { return v < 0; }))
            continue;
        if (!std::all_of(cons[size_t(y)].begin(), cons[size_t(y)].end(),
                         [&](int r) { return takes_padding(g.nodes[size_t(r)], y); }))
            continue;
        size_t sp = rank - 2;
        for (int r : cons[size_t(y)]) {
            Node& rn = g.nodes[size_t(r)];
            auto it = rn.attrs.find("pads");
            std::vector<int64_t> own = it != rn.attrs.end() ? it->second.ints : std::vector<int64_t>(2 * sp, 0);
            if (own.size() != 2 * sp) continue;  // (a malformed node: left for its op's own error)
            for (size_t i = 0; i < sp; ++i) own[i] += pads[2 + i], own[sp + i] += pads[rank + 2 + i];
            rn.attrs["pads"] = ints_attr(own);
            if (rn.op_type == "AveragePool") rn.attrs["count_include_pad"] = int_attr(1);
            rn.inputs[0] = x;
            changed = true;
        }
    }
    return changed;
}

}  // namespace onnx2ggml::core
