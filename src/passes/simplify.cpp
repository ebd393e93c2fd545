// eliminate_identity_arithmetic: x + 0, x - 0, x * 1, x / 1 with a constant that does not
// broadcast x to a larger shape become Identity (no ggml op). PyTorch exports such nodes for
// module constants like diffusers' `output_scale_factor = 1` and `rescale_output_factor = 1`.
//
// global_pool_as_pool: GlobalAveragePool of a 4-D map (and ReduceMean over its two spatial axes,
// keepdims) becomes AveragePool with the map as its kernel: the same mean, lowered to ggml_pool_2d,
// which the oneDNN backend runs as a vectorized multithreaded pooling, where ggml_mean (ggml's CPU
// kernel: one thread, a scalar sum in double) took 20% of efficientnet_b0's time in its SE blocks.
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

}  // namespace onnx2ggml::core
