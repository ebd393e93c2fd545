// Concat and Split.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>

#include "o2g_kernels.h"
#include "ops/common.h"

namespace onnx2ggml::core {
namespace {

using Lc = LowerCtx;

std::vector<int64_t> split_sizes(OpCtx& c) {
    int r = c.rank(0);
    int a = c.axis(c.ai("axis", 0), r);
    int64_t dim = c.shape(0)[a];
    std::vector<int64_t> sizes;
    if (c.opset() >= 13 && c.has(1)) sizes = c.cints(1);
    else if (c.opset() < 13 && c.has_attr("split")) sizes = c.ais("split");
    else if (c.opset() < 13 && c.has(1)) sizes = c.cints(1);  // opset 2-10 had an optional input too
    int n = c.nout();
    if (sizes.empty()) {
        if (c.opset() >= 18 && c.has_attr("num_outputs")) n = int(c.ai("num_outputs", n));
        int64_t chunk = (dim + n - 1) / n;
        for (int i = 0; i < n; ++i) sizes.push_back(std::max<int64_t>(0, std::min(chunk, dim - chunk * i)));
    }
    int64_t total = 0;
    for (int64_t v : sizes) total += v;
    if (total != dim || int(sizes.size()) != c.nout())
        c.fail("split sizes do not add up to the axis dim " + std::to_string(dim));
    return sizes;
}

// For every Concat whose inputs are the first inputs of another Concat along the same axis: the one with the most
// inputs (ties: the first in the graph). Its output holds theirs as a prefix.
std::unordered_map<int, int> concat_targets(Graph& g) {
    std::unordered_map<int, std::vector<int>> by_first;  // first input -> the Concats that start with it
    std::unordered_map<int, int> axis;
    for (int i = 0; i < int(g.nodes.size()); ++i) {
        const Node& n = g.nodes[size_t(i)];
        if (n.op_type != "Concat" || !n.domain.empty() || n.folded || n.inputs.empty() || n.inputs[0] < 0) continue;
        OpCtx oc(g, i);
        axis[i] = oc.axis(oc.ai("axis", 0), oc.rank(0));
        by_first[n.inputs[0]].push_back(i);
    }
    std::unordered_map<int, int> target;
    for (auto& [first, nodes] : by_first) {
        if (nodes.size() < 2) continue;
        for (int x : nodes) {
            const std::vector<int>& xi = g.nodes[size_t(x)].inputs;
            int best = x;
            for (int y : nodes) {
                const std::vector<int>& yi = g.nodes[size_t(y)].inputs;
                if (y == x || axis[y] != axis[x] || yi.size() <= g.nodes[size_t(best)].inputs.size() ||
                    !std::equal(xi.begin(), xi.end(), yi.begin()))
                    continue;
                best = y;
            }
            if (best != x) target[x] = target[best] = best;
        }
    }
    for (auto& [x, t] : target)  // a node that extends one Concat may itself be extended by another
        if (target.count(t) && target[t] != t) t = target[t];
    return target;
}

// Whether every reader of value v is a Concat that extends `target` (or is it; `targets` as concat_targets
// gives them), each reading it once, and v is no graph output: all of them then read v through the copy of it
// in the target's buffer, and nothing reads v's own tensor after that copy.
bool read_through_prefix(const Graph& g, int v, int target, const std::unordered_map<int, int>& targets,
                         int readers) {
    if (std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end()) return false;
    int seen = 0;
    for (int k = 0; k < int(g.nodes.size()); ++k) {
        const Node& n = g.nodes[size_t(k)];
        int reads = int(std::count(n.inputs.begin(), n.inputs.end(), v));
        if (reads == 0) continue;
        auto t = targets.find(k);
        if (n.folded || reads != 1 || t == targets.end() || t->second != target) return false;
        ++seen;
    }
    return seen == readers;  // (no reader the node list does not show)
}

}  // namespace

O2G_OP_FAMILY(concat) {
    {
        OpDef d;
        d.op_type = "Concat";
        d.infer = [](OpCtx& c) {
            int rk = c.rank(0);
            int a = c.axis(c.ai("axis", 0), rk);
            Shape o = c.shape(0);
            o[a] = 0;
            for (int i = 0; i < c.nin(); ++i) {
                const Shape& s = c.shape(i);
                if (c.dtype(i) != c.dtype(0)) c.fail("inputs have different dtypes");
                if (int(s.size()) != rk) c.fail("inputs have different ranks");
                for (int k = 0; k < rk; ++k)
                    if (k != a && s[k] != o[k])
                        c.fail("input " + std::to_string(i) + " has shape " + shape_str(s) + ", incompatible with " +
                               shape_str(c.shape(0)));
                o[a] += s[a];
            }
            c.set_out(0, c.dtype(0), o);
        };
        d.eval = [](OpCtx& c) {
            int rk = c.rank(0);
            int a = c.axis(c.ai("axis", 0), rk);
            const Shape& o = c.out(0).shape;
            Tensor t = Tensor::zeros(c.dtype(0), o);
            size_t es = dtype_size(t.dtype);
            int64_t outer = 1, inner = 1;
            for (int i = 0; i < a; ++i) outer *= o[i];
            for (int i = a + 1; i < rk; ++i) inner *= o[i];
            int64_t off = 0;
            for (int i = 0; i < c.nin(); ++i) {
                const Tensor& x = c.cval(i).cast(t.dtype);
                int64_t len = x.shape[a] * inner;
                if (len == 0) continue;
                for (int64_t q = 0; q < outer; ++q)
                    std::memcpy(t.data() + size_t(q * o[a] * inner + off) * es, x.data() + size_t(q * len) * es,
                                size_t(len) * es);
                off += len;
            }
            c.set_const(0, t);
        };
        d.lower = [](Lc& c) {
            int rk = c.rank(0);
            int a = c.axis(c.ai("axis", 0), rk);
            int64_t unit;  // (the same for every input: only the axis' own size differs)
            int gd = ggml_dim_range(c.out(0).shape, a, unit);
            if (gd < 0) c.fail_unsupported("Concat along a leading axis of a rank-" + std::to_string(rk) + " tensor");
            std::vector<ggml_tensor*> parts;
            for (int i = 0; i < c.nin(); ++i)
                if (c.shape(i)[a] != 0) parts.push_back(c.reshape(c.x(i), c.shape(i)));
            // Each input copied once into its slot of the output (ggml_set_inplace: row copies, offsets within
            // ggml's int32 op params), rather than ggml_concat, whose CPU kernel copies element by element
            // with index arithmetic (squeezenet1_1: 16% of its time), and which, chained for more inputs,
            // copies the growing prefix again at every step (densenet121's dense blocks of up to 33: 63%).
            if (parts.empty())
                internal_error(c.where() + ": an empty Concat reached the lowering (empty values are constants)");
            auto ne = to_ne(c.out(0).shape);
            ggml_type type = parts[0]->type;
            bool by_slots = parts.size() >= 2 && (type == GGML_TYPE_F32 || type == GGML_TYPE_I32) &&  // ggml_set's
                            size_t(ggml_type_size(type)) * size_t(shape_numel(c.out(0).shape)) <=
                                size_t(std::numeric_limits<int32_t>::max());
            if (!by_slots) {
                ggml_tensor* acc = parts[0];
                for (size_t i = 1; i < parts.size(); ++i) acc = G(c.b, ggml_concat, acc, parts[i], gd);
                return c.set(0, acc);
            }
            // a Concat that another one extends, along an axis with nothing but 1s before it (its slots are
            // consecutive bytes): its inputs copied once into that Concat's output, its own a view of the prefix
            // (densenet121: 593 SETs of every earlier layer's output again -> 120; each part copied once)
            LowerState& st = c.state();
            if (!st.concat_targets_found) {
                st.concat_target = concat_targets(c.graph());
                st.concat_targets_found = true;
            }
            auto tgt = st.concat_target.find(c.node_index());
            bool prefix = tgt != st.concat_target.end() && int(parts.size()) == c.nin() && !c.graph_output(0);
            for (int d = gd + 1; d < 4; ++d) prefix &= ne[d] == 1;
            for (int d = 0; d < a; ++d) prefix &= c.out(0).shape[size_t(d)] == 1;
            if (prefix) {
                LowerState::PrefixConcat& pc = st.prefix_concat[tgt->second];
                if (!pc.acc) {
                    auto te = to_ne(c.graph().values[size_t(c.graph().nodes[size_t(tgt->second)].outputs[0])].shape);
                    pc.acc = G(c.b, ggml_new_tensor_4d, type, te[0], te[1], te[2], te[3]);
                }
                for (size_t i = pc.parts; i < parts.size(); ++i) {
                    pc.acc = G(c.b, ggml_set_inplace, pc.acc, c.cont(parts[i]), pc.acc->nb[1], pc.acc->nb[2],
                               pc.acc->nb[3], pc.offset);
                    // a convolution's output read only by the Concats that extend this one (through this copy):
                    // the convolution may write into its slot (o2g::conv_into_slot, as below; densenet's layers)
                    int v = c.node().inputs[i];
                    if (!c.b.keep_values && c.conv_behind(int(i)) &&
                        read_through_prefix(c.graph(), v, tgt->second, st.concat_target, c.readers(v)))
                        G(c.b, o2g::conv_into_slot, pc.acc);
                    pc.offset += size_t(parts[i]->ne[gd]) * pc.acc->nb[gd];
                }
                pc.parts = std::max(pc.parts, parts.size());
                if (ne[gd] == pc.acc->ne[gd]) return c.set(0, pc.acc);
                size_t es = ggml_type_size(type);
                return c.set(0, G(c.b, ggml_view_4d, pc.acc, ne[0], ne[1], ne[2], ne[3], es * size_t(ne[0]),
                                  es * size_t(ne[0] * ne[1]), es * size_t(ne[0] * ne[1] * ne[2]), size_t(0)));
            }
            ggml_tensor* acc = G(c.b, ggml_new_tensor_4d, type, ne[0], ne[1], ne[2], ne[3]);
            size_t offset = 0;
            bool slots_dense = true;  // each part's slot one run of bytes: nothing but 1s after the axis
            for (int d = gd + 1; d < 4; ++d) slots_dense &= ne[d] == 1;
            for (size_t k = 0, i = 0; k < parts.size(); ++k, ++i) {
                while (c.shape(int(i))[a] == 0) ++i;  // (the input part k came from)
                ggml_tensor* t = parts[k];
                acc = G(c.b, ggml_set_inplace, acc, c.cont(t), acc->nb[1], acc->nb[2], acc->nb[3], offset);
                if (slots_dense && !c.b.keep_values && c.sole_reader(int(i)) && c.conv_behind(int(i)))
                    G(c.b, o2g::conv_into_slot, acc);
                offset += size_t(t->ne[gd]) * acc->nb[gd];
            }
            if (rk == 4 && a == 1 && type == GGML_TYPE_F32) c.joins_private(acc);
            c.set(0, acc);
        };
        r.add(d);
    }
    {
        OpDef d;
        d.op_type = "Split";
        d.host_inputs = {1};
        d.infer = [](OpCtx& c) {
            auto sizes = split_sizes(c);
            int a = c.axis(c.ai("axis", 0), c.rank(0));
            for (int i = 0; i < c.nout(); ++i) {
                Shape s = c.shape(0);
                s[a] = sizes[i];
                c.set_out(i, c.dtype(0), s);
            }
        };
        d.eval = [](OpCtx& c) {
            auto sizes = split_sizes(c);
            int a = c.axis(c.ai("axis", 0), c.rank(0));
            auto st = strides_of(c.shape(0));
            int64_t off = 0;
            for (int i = 0; i < c.nout(); ++i) {
                Shape s = c.shape(0);
                s[a] = sizes[i];
                int64_t o0 = off;
                c.set_const(i, remap(c.cval(0), s, [&](const std::vector<int64_t>& idx) {
                                int64_t f = flat(idx, st);
                                return f + o0 * st[a];
                            }));
                off += sizes[i];
            }
        };
        d.lower = [](Lc& c) {
            auto sizes = split_sizes(c);
            int rk = c.rank(0);
            int a = c.axis(c.ai("axis", 0), rk);
            int64_t unit;
            int gd = ggml_dim_range(c.shape(0), a, unit);
            if (gd < 0) c.fail_unsupported("Split along a leading axis of a rank-" + std::to_string(rk) + " tensor");
            ggml_tensor* x = c.x(0);
            int64_t off = 0;
            for (int i = 0; i < c.nout(); ++i) {
                c.set(i, c.slice(x, gd, off * unit, sizes[i] * unit));
                off += sizes[i];
            }
        };
        r.add(d);
    }
}

}  // namespace onnx2ggml::core
