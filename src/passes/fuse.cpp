// The pass manager and the activation fusions. Each pass is named and can be disabled
// (CompileOptions); optimize() runs them in order until none changes the graph.
//   fuse_gelu: x * 0.5 * (1 + erf(x / sqrt(2)))  (any operand order)  -> Gelu
//   fuse_silu: x * sigmoid(x)                                          -> o2g.Silu
// The normalization and attention-score fusions are in fuse_norm.cpp and fuse_softmax.cpp,
// the algebraic simplifications in simplify.cpp.
#include <algorithm>
#include <cmath>

#include "passes/match.h"
#include "passes/pipeline.h"

namespace onnx2ggml::core {
bool fuse_gelu(Graph& g) {
    bool changed = false;
    Uses uses(g);
    for (auto& erf : g.nodes) {
        if (erf.folded || erf.op_type != "Erf" || !erf.domain.empty()) continue;
        const Node* div = producer(g, erf.inputs[0]);
        if (!div) continue;
        int x = -1;
        if (div->op_type == "Div" && is_scalar_const(g, div->inputs[1], std::sqrt(2.0), 1e-3)) x = div->inputs[0];
        else if (div->op_type == "Mul") {
            if (is_scalar_const(g, div->inputs[1], 1 / std::sqrt(2.0), 1e-4)) x = div->inputs[0];
            else if (is_scalar_const(g, div->inputs[0], 1 / std::sqrt(2.0), 1e-4)) x = div->inputs[1];
        }
        if (x < 0 || uses.count[erf.outputs[0]] != 1) continue;
        // find Add(erf, 1)
        Node* add = nullptr;
        for (auto& n : g.nodes)
            if (!n.folded && n.op_type == "Add" && other(n, erf.outputs[0]) >= 0 &&
                is_scalar_const(g, other(n, erf.outputs[0]), 1.0, 0))
                add = &n;
        if (!add || uses.count[add->outputs[0]] != 1) continue;
        // two Muls: by x and by 0.5, in either order
        Node* m1 = nullptr;
        for (auto& n : g.nodes)
            if (!n.folded && n.op_type == "Mul" && other(n, add->outputs[0]) >= 0) m1 = &n;
        if (!m1) continue;
        int o1 = other(*m1, add->outputs[0]);
        Node* last = nullptr;
        if (o1 == x) {  // (x * (1+erf)) * 0.5
            if (uses.count[m1->outputs[0]] != 1) continue;
            for (auto& n : g.nodes)
                if (!n.folded && n.op_type == "Mul" && other(n, m1->outputs[0]) >= 0 &&
                    is_scalar_const(g, other(n, m1->outputs[0]), 0.5, 0))
                    last = &n;
        } else {  // (x * 0.5) * (1+erf)
            const Node* half = producer(g, o1);
            if (half && half->op_type == "Mul" && other(*half, x) >= 0 && is_scalar_const(g, other(*half, x), 0.5, 0) &&
                uses.count[o1] == 1)
                last = m1;
        }
        if (!last) continue;
        last->op_type = "Gelu";
        last->domain = "onnx2ggml";
        last->inputs = {x};
        last->attrs.clear();
        changed = true;
        uses = Uses(g);
    }
    return changed;
}

bool fuse_silu(Graph& g) {
    bool changed = false;
    Uses uses(g);
    for (auto& mul : g.nodes) {
        if (mul.folded || mul.op_type != "Mul" || !mul.domain.empty() || mul.inputs.size() != 2) continue;
        for (int k = 0; k < 2; ++k) {
            const Node* sig = producer(g, mul.inputs[k]);
            if (sig && sig->op_type == "Sigmoid" && sig->inputs[0] == mul.inputs[1 - k] &&
                uses.count[mul.inputs[k]] == 1 && g.values[mul.inputs[0]].shape == g.values[mul.inputs[1]].shape) {
                int x = mul.inputs[1 - k];
                mul.op_type = "o2g.Silu";
                mul.domain = "onnx2ggml";
                mul.inputs = {x};
                changed = true;
                uses = Uses(g);
                break;
            }
        }
    }
    return changed;
}

std::vector<std::string> optimize(Graph& g, const CompileOptions& opts) {
    std::vector<std::string> applied;
    if (!opts.optimize) return applied;
    struct Pass {
        const char* name;
        bool (*fn)(Graph&);
    };
    const Pass passes[] = {{"eliminate_identity_arithmetic", eliminate_identity_arithmetic},
                           {"global_pool_as_pool", global_pool_as_pool},
                           {"fold_pad_into_window", fold_pad_into_window},
                           {"drop_dead_conv_taps", drop_dead_conv_taps},
                           {"fuse_gelu", fuse_gelu},
                           {"fuse_silu", fuse_silu},
                           {"fuse_groupnorm", fuse_groupnorm},
                           {"fuse_layernorm", fuse_layernorm},
                           {"fuse_softmax_ext", fuse_softmax_ext},
                           {"chunk_attention", chunk_attention}};
    for (const std::string& d : opts.disabled_passes)  // a misspelt name must not silently keep the pass
        if (std::none_of(std::begin(passes), std::end(passes), [&](const Pass& p) { return d == p.name; })) {
            std::string names;
            for (const Pass& p : passes) names += std::string(names.empty() ? "" : ", ") + p.name;
            bad_input("--disable-pass " + d + ": no such pass (the passes: " + names + ")");
        }
    for (int round = 0; round < 8; ++round) {
        bool any = false;
        for (const Pass& p : passes) {
            if (std::find(opts.disabled_passes.begin(), opts.disabled_passes.end(), p.name) !=
                opts.disabled_passes.end())
                continue;
            if (p.fn(g)) {
                any = true;
                if (std::find(applied.begin(), applied.end(), p.name) == applied.end()) applied.push_back(p.name);
            }
        }
        if (!any) break;
    }
    return applied;
}

}  // namespace onnx2ggml::core
