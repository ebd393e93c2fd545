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
//
// drop_dead_conv_taps: the kernel rows and columns of a Conv (constant weight, static input) that read only
// padding at every output position are cut from the kernel, and its pads shrunk to match: the same sums
// without the products of zeros. DeepLabV3's ASPP convolves a 33x33 map (520x520 input) at rates 12, 24 and 36:
// at rate 36 only the centre tap ever reads the map, so the 3x3 convolution is a 1x1 one (oneDNN had no blocked
// kernel for a kernel extent larger than the map and ran 8 taps of zeros through gemm).
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
    return p == r.attrs.end() ||
           std::all_of(p->second.ints.begin(), p->second.ints.end(), [](int64_t v) { return v == 0; });
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

bool drop_dead_conv_taps(Graph& g) {
    bool changed = false;
    for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
        Node& n = g.nodes[ni];
        if (n.folded || !n.domain.empty() || n.op_type != "Conv" || n.inputs.size() < 2 || n.outputs.size() != 1 ||
            n.inputs[0] < 0 || !is_const(g, n.inputs[1]) || is_const(g, n.inputs[0]))
            continue;
        auto ap = n.attrs.find("auto_pad");
        if (ap != n.attrs.end() && ap->second.s != "NOTSET") continue;
        const Value& x = g.values[size_t(n.inputs[0])];
        const Tensor& w = *g.values[size_t(n.inputs[1])].constant;
        if (!x.has_shape || x.shape.size() < 3 || w.shape.size() != x.shape.size() || !dtype_is_float(w.dtype))
            continue;
        const size_t sp = x.shape.size() - 2;
        auto ints = [&](const char* name, int64_t dflt, size_t len) {
            auto it = n.attrs.find(name);
            return it != n.attrs.end() ? it->second.ints : std::vector<int64_t>(len, dflt);
        };
        std::vector<int64_t> strides = ints("strides", 1, sp), dil = ints("dilations", 1, sp),
                             pads = ints("pads", 0, 2 * sp);
        if (strides.size() != sp || dil.size() != sp || pads.size() != 2 * sp) continue;  // (the op's own error)
        std::vector<int64_t> first(sp), last(sp);
        bool cut = false, ok = true;
        for (size_t a = 0; a < sp && ok; ++a) {
            const int64_t in = x.shape[2 + a], k = w.shape[2 + a], s = strides[a], d = dil[a];
            const int64_t out = (in + pads[a] + pads[sp + a] - d * (k - 1) - 1) / s + 1;
            if (in < 1 || k < 1 || s < 1 || d < 1 || out < 1) {
                ok = false;
                break;
            }
            // tap t reads input rows o*s - pb + t*d for o in [0, out): some inside [0, in)?
            auto reads_input = [&](int64_t t) {
                const int64_t lo = t * d - pads[a], hi = (out - 1) * s + lo;  // rows of the first and last outputs
                if (hi < 0 || lo >= in) return false;
                if (lo >= 0 || s == 1) return true;
                const int64_t o = (-lo + s - 1) / s;  // the first output whose row is >= 0
                return o < out && o * s + lo < in;
            };
            first[a] = 0, last[a] = k - 1;
            while (first[a] < k && !reads_input(first[a])) ++first[a];
            while (last[a] > first[a] && !reads_input(last[a])) --last[a];
            if (first[a] == k) ok = false;  // no tap reads the map: left to the op (the output is the bias)
            cut |= first[a] > 0 || last[a] < k - 1;
        }
        if (!ok || !cut) continue;
        std::vector<int64_t> np = pads;
        Shape ws = w.shape;
        for (size_t a = 0; a < sp; ++a) {
            np[a] -= first[a] * dil[a];
            np[sp + a] -= (w.shape[2 + a] - 1 - last[a]) * dil[a];
            ws[2 + a] = last[a] - first[a] + 1;
        }
        if (std::any_of(np.begin(), np.end(), [](int64_t v) { return v < 0; })) continue;  // (would crop the map)
        Tensor cutw = Tensor::zeros(w.dtype, ws);
        auto strides_of = [](const Shape& sh) {  // row-major, in elements
            std::vector<int64_t> r(sh.size(), 1);
            for (size_t i = sh.size(); i-- > 1;) r[i - 1] = r[i] * sh[i];
            return r;
        };
        auto wst = strides_of(w.shape), cst = strides_of(ws);
        for (int64_t e = 0; e < cutw.numel(); ++e) {
            int64_t src = 0, rest = e;
            for (size_t dim = 0; dim < ws.size(); ++dim) {
                int64_t i = rest / cst[dim];
                rest %= cst[dim];
                src += (dim >= 2 ? i + first[dim - 2] : i) * wst[dim];
            }
            cutw.setf(e, w.getf(src));
        }
        // a new constant (the weight may have other readers): derived, so the weight rules and GGUF files
        // keep naming the model's own initializers
        const std::string wname = g.values[size_t(n.inputs[1])].name;
        int id = g.new_value(wname + ":taps");
        Value& v = g.values[size_t(id)];
        v.dtype = cutw.dtype;
        v.shape = ws;
        v.has_shape = true;
        v.constant = std::move(cutw);
        Node& m = g.nodes[ni];  // (new_value may have grown g.values, never g.nodes)
        m.inputs[1] = id;
        m.attrs["pads"] = ints_attr(np);
        m.attrs["kernel_shape"] = ints_attr(std::vector<int64_t>(ws.begin() + 2, ws.end()));
        changed = true;
    }
    return changed;
}

}  // namespace onnx2ggml::core
