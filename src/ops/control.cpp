// Control flow: If, Loop and Scan, resolved at compile time. onnx2ggml compiles static graphs, so
//   If    takes the branch of its condition, which must be a compile-time constant;
//   Loop  is unrolled: its trip count and condition must fold to constants, iteration by iteration
//         (at most kMaxUnroll iterations);
//   Scan  is unrolled over the static length of its scan inputs.
// Each op rewrites itself into the nodes of its subgraph(s), renamed and bound to the caller's
// values (OpCtx::replace_with), which specialize then folds and lowers like any other node.
#include <algorithm>
#include <map>

#include "ops/common.h"

namespace onnx2ggml::core {
namespace {

constexpr int64_t kMaxUnroll = 4096;

const Graph& subgraph(OpCtx& c, const std::string& name) {
    auto it = c.node().attrs.find(name);
    if (it == c.node().attrs.end() || !it->second.g) c.fail("graph attribute '" + name + "' is missing");
    return *it->second.g;
}

// Renames the free variables of `sub` (and of the subgraphs inside it) that `names` maps.
void rename_free(Graph& sub, const std::map<std::string, std::string>& names) {
    for (std::string& f : sub.free_vars) {
        auto it = names.find(f);
        if (it == names.end()) continue;
        int id = sub.find(f);
        if (id >= 0) {
            sub.by_name.erase(f);
            sub.values[size_t(id)].name = it->second;
            sub.by_name[it->second] = id;
        }
        f = it->second;
    }
    for (Node& n : sub.nodes)
        for (auto& kv : n.attrs)
            if (kv.second.g) {
                auto copy = std::make_shared<Graph>(*kv.second.g);
                rename_free(*copy, names);
                kv.second.g = copy;
            }
}

// The nodes of `sub` copied into the caller's graph: sub inputs bound to `bind` (caller value ids),
// free variables read from the caller, everything else renamed with `prefix`. Returns the nodes
// and, in `outs`, the caller value ids of the subgraph's outputs.
std::vector<Node> inline_graph(OpCtx& c, const Graph& sub, const std::vector<int>& bind, const std::string& prefix,
                               std::vector<int>& outs) {
    Graph& g = c.graph();
    if (bind.size() != sub.inputs.size())
        c.fail("subgraph '" + sub.name + "' takes " + std::to_string(sub.inputs.size()) + " inputs, given " +
               std::to_string(bind.size()));
    std::vector<int> map(sub.values.size(), -1);
    for (size_t i = 0; i < bind.size(); ++i) map[size_t(sub.inputs[i])] = bind[i];
    std::map<std::string, std::string> renamed;
    auto id_of = [&](int v) {
        int& m = map[size_t(v)];
        if (m >= 0) return m;
        const Value& sv = sub.values[size_t(v)];
        if (sv.constant) {
            m = c.new_const(*sv.constant, prefix + sv.name);
        } else if (sv.producer >= 0) {
            m = g.new_value(prefix + sv.name);
            renamed[sv.name] = g.values[size_t(m)].name;
        } else {  // a free variable: the caller's value of that name
            m = g.find(sv.name);
            if (m < 0) c.fail("subgraph '" + sub.name + "' reads '" + sv.name + "', which is not defined around it");
        }
        return m;
    };
    std::vector<Node> nodes;
    for (const Node& sn : sub.nodes) {
        Node n = sn;
        n.name = prefix + sn.name;
        for (int& i : n.inputs)
            if (i >= 0) i = id_of(i);
        for (int& o : n.outputs)
            if (o >= 0) o = id_of(o);
        nodes.push_back(std::move(n));
    }
    for (Node& n : nodes)  // nested subgraphs read this one's values under their new names
        for (auto& kv : n.attrs)
            if (kv.second.g) {
                auto copy = std::make_shared<Graph>(*kv.second.g);
                rename_free(*copy, renamed);
                kv.second.g = copy;
            }
    outs.clear();
    for (int o : sub.outputs) outs.push_back(id_of(o));
    return nodes;
}

Node identity(OpCtx& c, int from, int to) { return c.make_node("Identity", {from}, {to}); }

// Stacks `parts` along a new `axis` into `out` (reversed when `reverse`).
void stack(OpCtx& c, std::vector<int> parts, int64_t axis, bool reverse, int out, std::vector<Node>& nodes) {
    if (parts.empty()) c.fail_unsupported("a scan output of zero iterations (an empty tensor)");
    if (reverse) std::reverse(parts.begin(), parts.end());
    std::vector<int> us;
    for (int p : parts) {
        int u = c.graph().new_value(c.node().name + "_scan");
        nodes.push_back(axes_node(c, "Unsqueeze", p, axis, u));
        us.push_back(u);
    }
    Node cat = c.make_node("Concat", us, {out});
    cat.attrs["axis"] = int_attr(axis);
    nodes.push_back(cat);
}

void infer_if(OpCtx& c) {
    bool cond = c.cval(0).getf(0) != 0;
    const Graph& branch = subgraph(c, cond ? "then_branch" : "else_branch");
    std::vector<int> outs;
    std::vector<Node> nodes = inline_graph(c, branch, {}, c.node().name + (cond ? "/then/" : "/else/"), outs);
    if (int(outs.size()) != c.nout())
        c.fail("branch has " + std::to_string(outs.size()) + " outputs for " + std::to_string(c.nout()));
    for (int i = 0; i < c.nout(); ++i)
        if (c.has_out(i)) nodes.push_back(identity(c, outs[size_t(i)], c.node().outputs[size_t(i)]));
    c.replace_with(nodes);
}

// One iteration at a time: the body's nodes, then this Loop again with the next iteration's
// state (attributes __iter, __scan_k), until the trip count or a constant false condition ends it.
void infer_loop(OpCtx& c) {
    const Graph& body = subgraph(c, "body");
    int nstate = c.nin() - 2, nscan = c.nout() - nstate;
    if (nstate < 0 || nscan < 0 || int(body.outputs.size()) != 1 + nstate + nscan)
        c.fail("body outputs do not match the loop's inputs and outputs");
    int64_t iter = c.ai("__iter", 0);
    int64_t trip = c.has(0) ? c.cval(0).geti(0) : -1;  // -1: until the condition is false
    bool go = !c.has(1) || c.cval(1).getf(0) != 0;
    if (trip < 0 && !c.has(1)) c.fail_unsupported("Loop without a trip count or condition (an infinite loop)");
    if (trip > kMaxUnroll)
        c.fail_limit("trip count " + std::to_string(trip) + ": a Loop of more than " + std::to_string(kMaxUnroll) +
                     " iterations (unrolled at compile time)");
    std::vector<std::vector<int64_t>> scans(static_cast<size_t>(nscan));
    for (int k = 0; k < nscan; ++k) scans[size_t(k)] = c.ais("__scan_" + std::to_string(k));
    std::vector<Node> nodes;
    if (!go || (trip >= 0 && iter >= trip)) {  // done: the final state and the stacked scan outputs
        for (int k = 0; k < nstate; ++k)
            if (c.has_out(k)) nodes.push_back(identity(c, c.node().inputs[size_t(k + 2)], c.node().outputs[size_t(k)]));
        for (int k = 0; k < nscan; ++k)
            if (c.has_out(nstate + k)) {
                std::vector<int> parts(scans[size_t(k)].begin(), scans[size_t(k)].end());
                stack(c, parts, 0, false, c.node().outputs[size_t(nstate + k)], nodes);
            }
        c.replace_with(nodes);
        return;
    }
    if (iter >= kMaxUnroll)
        c.fail_limit("Loop of more than " + std::to_string(kMaxUnroll) + " iterations (unrolled at compile time)");
    int cond_in = c.has(1) ? c.node().inputs[1]
                           : c.new_const(
                                 [] {
                                     Tensor t = Tensor::zeros(DType::Bool, {});
                                     t.seti(0, 1);
                                     return t;
                                 }(),
                                 c.node().name + "_cond");
    std::vector<int> bind = {c.new_const(Tensor::scalar_i64(iter), c.node().name + "_iter"), cond_in};
    for (int k = 0; k < nstate; ++k) bind.push_back(c.node().inputs[size_t(k + 2)]);
    std::vector<int> outs;
    nodes = inline_graph(c, body, bind, c.node().name + "/" + std::to_string(iter) + "/", outs);
    Node next = c.node();
    next.inputs[1] = outs[0];
    for (int k = 0; k < nstate; ++k) next.inputs[size_t(k + 2)] = outs[size_t(1 + k)];
    next.attrs["__iter"] = int_attr(iter + 1);
    for (int k = 0; k < nscan; ++k) {
        scans[size_t(k)].push_back(outs[size_t(1 + nstate + k)]);
        next.attrs["__scan_" + std::to_string(k)] = ints_attr(scans[size_t(k)]);
    }
    nodes.push_back(next);
    c.replace_with(nodes);
}

// Scan (opset 9+; opset 8's batch axis is looped over too): unrolled over the scan axis.
void infer_scan(OpCtx& c) {
    const Graph& body = subgraph(c, "body");
    bool v8 = c.opset() < 9;
    int first = v8 ? 1 : 0;  // opset 8: sequence_lens first
    int64_t nscan_in = c.ai("num_scan_inputs", -1);
    int nstate = c.nin() - first - int(nscan_in), nscan_out = c.nout() - nstate;
    if (nscan_in <= 0 || nstate < 0 || nscan_out < 0) c.fail("num_scan_inputs does not match the inputs");
    if (int(body.outputs.size()) != nstate + nscan_out) c.fail("body outputs do not match the scan's outputs");
    if (v8 && c.has(0)) c.fail_unsupported("Scan (opset 8) with sequence_lens");
    auto in_axes = c.ais("scan_input_axes", std::vector<int64_t>(size_t(nscan_in), 0));
    auto in_dirs = c.ais(v8 ? "directions" : "scan_input_directions", std::vector<int64_t>(size_t(nscan_in), 0));
    auto out_axes = c.ais("scan_output_axes", std::vector<int64_t>(size_t(nscan_out), 0));
    auto out_dirs = c.ais("scan_output_directions", std::vector<int64_t>(size_t(nscan_out), 0));
    if (in_axes.size() != size_t(nscan_in) || in_dirs.size() != size_t(nscan_in) ||
        out_axes.size() != size_t(nscan_out) || out_dirs.size() != size_t(nscan_out))
        c.fail("scan axes/directions do not match the scan inputs/outputs");
    int64_t batches = v8 ? c.shape(first + nstate)[0] : 1;
    std::vector<Node> nodes;
    // Gather(x, constant index, axis): one slice, the axis removed
    auto take = [&](int x, int64_t index, int64_t axis, const std::string& what) {
        int out = c.graph().new_value(c.node().name + "_" + what);
        Node gn = c.make_node("Gather", {x, c.new_const(Tensor::scalar_i64(index), c.node().name + "_index")}, {out});
        gn.attrs["axis"] = int_attr(axis);
        nodes.push_back(gn);
        return out;
    };
    std::vector<std::vector<int>> final_state(static_cast<size_t>(nstate)), scan_parts(static_cast<size_t>(nscan_out));
    for (int64_t b = 0; b < batches; ++b) {
        std::vector<int> state;
        for (int k = 0; k < nstate; ++k)
            state.push_back(v8 ? take(c.node().inputs[size_t(first + k)], b, 0, "state")
                               : c.node().inputs[size_t(first + k)]);
        std::vector<int> xs;
        int64_t len = -1;
        for (int k = 0; k < nscan_in; ++k) {
            int in = first + nstate + k;
            int x = v8 ? take(c.node().inputs[size_t(in)], b, 0, "batch") : c.node().inputs[size_t(in)];
            int64_t rank = c.rank(in) - (v8 ? 1 : 0);
            int64_t ax = in_axes[size_t(k)] < 0 ? in_axes[size_t(k)] + rank : in_axes[size_t(k)];
            if (ax < 0 || ax >= rank) c.fail("scan_input_axes value out of range");
            int64_t l = c.shape(in)[size_t(ax + (v8 ? 1 : 0))];
            if (len >= 0 && l != len) c.fail("scan inputs of different lengths");
            len = l;
            in_axes[size_t(k)] = ax;
            xs.push_back(x);
        }
        if (len > kMaxUnroll)
            c.fail_unsupported("Scan of more than " + std::to_string(kMaxUnroll) + " steps (unrolled at compile time)");
        std::vector<std::vector<int>> steps(static_cast<size_t>(nscan_out));
        for (int64_t t = 0; t < len; ++t) {
            std::vector<int> bind = state;
            for (int k = 0; k < nscan_in; ++k)
                bind.push_back(take(xs[size_t(k)], in_dirs[size_t(k)] ? len - 1 - t : t, in_axes[size_t(k)], "step"));
            std::vector<int> outs;
            std::vector<Node> bn = inline_graph(
                c, body, bind, c.node().name + "/" + std::to_string(b) + "_" + std::to_string(t) + "/", outs);
            nodes.insert(nodes.end(), bn.begin(), bn.end());
            state.assign(outs.begin(), outs.begin() + nstate);
            for (int k = 0; k < nscan_out; ++k) steps[size_t(k)].push_back(outs[size_t(nstate + k)]);
        }
        for (int k = 0; k < nstate; ++k) final_state[size_t(k)].push_back(state[size_t(k)]);
        for (int k = 0; k < nscan_out; ++k) {
            int64_t ax = out_axes[size_t(k)];
            if (ax < 0) c.fail_unsupported("negative scan_output_axes");
            int out = v8 ? c.graph().new_value(c.node().name + "_batch_out") : c.node().outputs[size_t(nstate + k)];
            if (v8 || c.has_out(nstate + k)) stack(c, steps[size_t(k)], ax, out_dirs[size_t(k)] != 0, out, nodes);
            scan_parts[size_t(k)].push_back(out);
        }
    }
    for (int k = 0; k < nstate; ++k) {
        if (!c.has_out(k)) continue;
        if (v8) stack(c, final_state[size_t(k)], 0, false, c.node().outputs[size_t(k)], nodes);
        else nodes.push_back(identity(c, final_state[size_t(k)][0], c.node().outputs[size_t(k)]));
    }
    if (v8)
        for (int k = 0; k < nscan_out; ++k)
            if (c.has_out(nstate + k))
                stack(c, scan_parts[size_t(k)], 0, false, c.node().outputs[size_t(nstate + k)], nodes);
    c.replace_with(nodes);
}

}  // namespace

O2G_OP_FAMILY(control) {
    for (auto [op, fn] :
         {std::pair<const char*, void (*)(OpCtx&)>{"If", infer_if}, {"Loop", infer_loop}, {"Scan", infer_scan}}) {
        OpDef d;
        d.op_type = op;
        d.infer = fn;
        r.add(d);
    }
}

}  // namespace onnx2ggml::core
