// eliminate_identity_arithmetic: x + 0, x - 0, x * 1, x / 1 with a constant that does not
// broadcast x to a larger shape become Identity (no ggml op). PyTorch exports such nodes for
// module constants like diffusers' `output_scale_factor = 1` and `rescale_output_factor = 1`.
#include "passes/match.h"
#include "passes/pipeline.h"

namespace onnx2ggml {

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

}  // namespace onnx2ggml
