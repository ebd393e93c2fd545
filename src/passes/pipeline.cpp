#include "passes/pipeline.h"

#include <algorithm>
#include <sstream>

#include "lower/host_kernel.h"
#include "ops/op.h"
#include "util/progress.h"

namespace onnx2ggml::core {

static std::string dims_str(const Shape& s) {
    std::string r;
    for (size_t i = 0; i < s.size(); ++i) r += (i ? "x" : "") + std::to_string(s[i]);
    return r.empty() ? "scalar" : r;
}

static void bind_inputs(Graph& g, const CompileOptions& opts) {
    for (auto& kv : opts.frozen_inputs) {
        int id = g.find(kv.first);
        auto pos = std::find(g.inputs.begin(), g.inputs.end(), id);
        if (id < 0 || pos == g.inputs.end())
            bad_input(g.path + ": --freeze names '" + kv.first + "', which is not a graph input");
        Value& v = g.values[id];
        if (v.dtype != kv.second.dtype)
            bad_input(g.path + ": --freeze " + kv.first + ": dtype " + dtype_name(kv.second.dtype) +
                      ", the model expects " + dtype_name(v.dtype));
        if (v.shape.size() != kv.second.shape.size())
            bad_input(g.path + ": --freeze " + kv.first + ": rank differs from the model's");
        for (size_t i = 0; i < v.shape.size(); ++i)
            if (v.shape[i] >= 0 && v.shape[i] != kv.second.shape[i])
                bad_input(g.path + ": --freeze " + kv.first + ": shape " + shape_str(kv.second.shape) +
                          " differs from the model's");
        v.shape = kv.second.shape;
        v.constant = kv.second;
        g.inputs.erase(pos);
    }
    for (auto& kv : opts.input_shapes) {
        int id = g.find(kv.first);
        if (id < 0 || std::find(g.inputs.begin(), g.inputs.end(), id) == g.inputs.end())
            bad_input(g.path + ": --input-shape names '" + kv.first + "', which is not a graph input");
    }
    for (int id : g.inputs) {
        Value& v = g.values[id];
        auto it = opts.input_shapes.find(v.name);
        if (it != opts.input_shapes.end()) {
            const Shape& s = it->second;
            if (s.size() != v.shape.size())
                bad_input(g.path + ": --input-shape " + v.name + "=" + dims_str(s) + " has rank " +
                          std::to_string(s.size()) + ", the model declares rank " + std::to_string(v.shape.size()));
            for (size_t i = 0; i < s.size(); ++i)
                if (v.shape[i] >= 0 && v.shape[i] != s[i])
                    bad_input(g.path + ": --input-shape " + v.name + "=" + dims_str(s) +
                              " conflicts with the model's static dim " + std::to_string(i) + " = " +
                              std::to_string(v.shape[i]));
            v.shape = s;
        }
        for (size_t i = 0; i < v.shape.size(); ++i)
            if (v.shape[i] < 0)
                bad_input(g.path + ": input '" + v.name + "' has a dynamic dim " + std::to_string(i) + " ('" +
                          v.dim_params[i] + "'): give its shape with --input-shape " + v.name + "=...");
        shape_numel(v.shape);
    }
}

void specialize(Graph& g, const CompileOptions& opts, std::vector<UnsupportedOp>* report) {
    bind_inputs(g, opts);
    g.max_eval_work = opts.max_eval_work;
    // a tensor of zero elements has one possible value: every empty input and output is a known constant
    for (int id : g.inputs)
        if (shape_numel(g.values[id].shape) == 0)
            g.values[id].constant = Tensor::zeros(g.values[id].dtype, g.values[id].shape);
    const Registry& reg = Registry::get();
    std::vector<UnsupportedOp> bad;
    for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
        Node& n = g.nodes[ni];
        OpCtx c(g, int(ni));
        const OpDef* def = reg.find(n.domain, n.op_type);
        if (!def) {
            std::string why =
                n.domain.rfind("local-function:", 0) == 0
                    ? "model-local functions are not supported yet"
                    : (n.domain.empty() ? "operator not implemented" : "unknown domain '" + n.domain + "'");
            bad.push_back({n.op_type, n.name, n.domain, why, c.opset(), ""});
            continue;
        }
        if (c.opset() < def->since || c.opset() > def->until) {
            bad.push_back({n.op_type, n.name, n.domain, "opset " + std::to_string(c.opset()) + " not implemented",
                           c.opset(), ""});
            continue;
        }
        bool known = true, all_const = true;
        for (int i = 0; i < c.nin(); ++i) {
            if (!c.has(i)) continue;
            known &= c.in(i).has_shape;
            all_const &= c.is_const(i);
        }
        if (!known) continue;  // downstream of an unsupported op
        try {
            for (int i = 0; i < c.nin(); ++i)
                if (c.has(i) && c.in(i).seq && !def->seq_inputs)
                    c.fail_unsupported("input '" + c.in(i).name + "' is a sequence, which this operator does not take");
            for (int i = 0; i < c.nin(); ++i) {  // string tensors live on the host only
                if (!c.has(i) || c.dtype(i) != DType::String) continue;
                if (!def->string_inputs)
                    c.fail_unsupported("input '" + c.in(i).name +
                                       "' is a string tensor, which this operator does not take");
                c.cval(i);  // a graph input: --freeze it
            }
            for (int i = 0; i < def->min_inputs; ++i)
                if (!c.has(i))
                    c.fail("needs at least " + std::to_string(def->min_inputs) + " inputs, input " + std::to_string(i) +
                           " is missing");
            if (def->infer) def->infer(c);
            if (c.replacement) {  // a graph-level op rewritten into tensor ops: process those next
                std::vector<Node> repl = std::move(*c.replacement);
                g.nodes.erase(g.nodes.begin() + long(ni));
                g.nodes.insert(g.nodes.begin() + long(ni), repl.begin(), repl.end());
                for (auto& v : g.values) v.producer = -1;
                for (size_t k = 0; k < g.nodes.size(); ++k)
                    for (int o : g.nodes[k].outputs)
                        if (o >= 0) g.values[o].producer = int(k);
                --ni;
                continue;
            }
            bool small = true;
            for (int i = 0; i < c.nout() && !opts.fold_all; ++i)
                if (c.has_out(i) && c.out(i).has_shape && shape_numel(c.out(i).shape) > def->fold_limit) small = false;
            if (small && def->work && (all_const || def->shape_only) && !opts.fold_all)
                small = def->work(c) <= kFoldWork;
            if (def->eval && (all_const || def->shape_only) && small) def->eval(c);
            for (int i = 0; i < c.nout(); ++i)
                if (c.has_out(i) && c.out(i).has_shape && !c.out(i).constant && shape_numel(c.out(i).shape) == 0)
                    c.out(i).constant = Tensor::zeros(c.out(i).dtype, c.out(i).shape);
            bool folded = true;
            for (int i = 0; i < c.nout(); ++i)
                if (c.has_out(i)) folded &= c.out(i).constant.has_value() || c.out(i).seq.has_value();
            n.folded = folded;
        } catch (const Error& e) {
            if (e.code != kExitUnsupported) throw;
            auto* nc = dynamic_cast<const NeedsConstant*>(&e);
            bad.push_back({n.op_type, n.name, n.domain, e.detail.empty() ? e.what() : e.detail, c.opset(),
                           nc ? nc->value : "", dynamic_cast<const LimitExceeded*>(&e) != nullptr});
            for (int i = 0; i < c.nout(); ++i)
                if (c.has_out(i)) c.out(i).has_shape = false;
        }
    }
    for (int id : g.outputs)
        if (g.values[id].seq)
            bad.push_back({"", "", "",
                           "graph output '" + g.values[id].name + "' is a sequence: onnx2ggml outputs tensors only", 0,
                           ""});
    if (report) {
        *report = bad;
        return;
    }
    throw_unsupported(g, bad);
}

void throw_unsupported(const Graph& g, const std::vector<UnsupportedOp>& bad) {
    if (bad.empty()) return;
    std::ostringstream ss;
    ss << g.path << ": " << bad.size() << " unsupported node" << (bad.size() > 1 ? "s" : "") << ":";
    for (auto& u : bad) {
        ss << "\n  node '" << u.node << "' (" << (u.domain.empty() ? "" : u.domain + ".") << u.op_type << ", opset "
           << u.opset << "): " << u.reason;
        int id = u.needs_constant.empty() ? -1 : g.find(u.needs_constant);
        if (id >= 0 && std::find(g.inputs.begin(), g.inputs.end(), id) != g.inputs.end())
            ss << " (a graph input: bind it at compile time with --freeze " << u.needs_constant << "=FILE.npy)";
    }
    throw Error(kExitUnsupported, ss.str());
}

void validate(Graph& g, std::vector<UnsupportedOp>* report) {
    const Registry& reg = Registry::get();
    std::vector<bool> live = live_nodes(g);
    std::vector<UnsupportedOp> bad;
    for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
        if (!live[ni]) continue;
        Node& n = g.nodes[ni];
        OpCtx c(g, int(ni));
        const OpDef* def = reg.find(n.domain, n.op_type);
        std::string why, needs;
        if (!def) why = "operator not implemented";
        else
            for (int hi : def->host_inputs)
                if (c.has(hi) && !c.is_const(hi) && !def->eval) {  // with an evaluator: a host kernel
                    needs = c.in(hi).name;
                    why = "input " + std::to_string(hi) + " ('" + needs + "') must be a compile-time constant";
                    break;
                }
        if (why.empty() && def && !def->lower && !def->eval)
            why = "this operator has neither a ggml lowering nor a host evaluator";
        if (why.empty())
            for (int v : n.inputs)
                if (v >= 0 && g.values[v].has_shape && shape_numel(g.values[v].shape) == 0 && !g.values[v].constant)
                    why = "zero-size tensor '" + g.values[v].name + "' on the device (ggml has no empty tensors)";
        if (why.empty())
            for (int v : n.outputs)
                if (v >= 0 && shape_numel(g.values[v].shape) == 0)
                    why = "zero-size output '" + g.values[v].name + "' on the device (ggml has no empty tensors)";
        if (!why.empty()) bad.push_back({n.op_type, n.name, n.domain, why, c.opset(), needs});
    }
    if (report) {
        report->insert(report->end(), bad.begin(), bad.end());
        return;
    }
    throw_unsupported(g, bad);
}

std::vector<bool> live_nodes(const Graph& g) {
    std::vector<bool> need_value(g.values.size(), false), live(g.nodes.size(), false);
    for (int o : g.outputs) need_value[o] = true;
    for (int i = int(g.nodes.size()) - 1; i >= 0; --i) {
        const Node& n = g.nodes[i];
        bool any = false;
        for (int o : n.outputs) any |= o >= 0 && need_value[o];
        if (!any || n.folded) continue;
        live[i] = true;
        for (int in : n.inputs)
            if (in >= 0) need_value[in] = true;
    }
    return live;
}

// Whether a constant keeps its exact value as a ggml tensor (int64 is held as int32 there).
static bool held_exactly(const Tensor& t) {
    if (ggml_type_for(t.dtype) == GGML_TYPE_COUNT) return false;
    if (t.dtype != DType::I64 && t.dtype != DType::U32) return true;
    for (int64_t i = 0; i < t.numel(); ++i)
        if (t.geti(i) < INT32_MIN || t.geti(i) > INT32_MAX) return false;
    return true;
}

void lower_graph(Graph& g, Builder& b) {
    LowerState st{
        b, std::vector<ggml_tensor*>(g.values.size(), nullptr), {}, {}, std::vector<int>(g.values.size(), 0), {}, {}, {}};
    std::vector<bool> live = live_nodes(g);  // a fused-away node (e.g. o2g.Silu's Sigmoid) reads nothing
    for (size_t ni = 0; ni < g.nodes.size(); ++ni)
        for (int v : g.nodes[ni].inputs)
            if (v >= 0 && live[ni]) st.uses[size_t(v)]++;
    for (int v : g.outputs) st.uses[size_t(v)]++;
    b.inputs.assign(g.inputs.size(), nullptr);
    b.index_bound.assign(g.inputs.size(), 0);
    for (size_t k = 0; k < g.inputs.size(); ++k) {
        Value& v = g.values[g.inputs[k]];
        if (shape_numel(v.shape) == 0) continue;  // empty: a constant (see specialize), no ggml tensor
        if (v.dtype == DType::String) continue;   // read by no device node (string ops take constants only)
        ggml_type t = ggml_type_for(v.dtype);
        if (t == GGML_TYPE_COUNT)
            unsupported(g.path + ": input '" + v.name + "' has dtype " + dtype_name(v.dtype) +
                        " (onnx2ggml holds numeric and bool tensors only)");
        auto ne = to_ne(v.shape);
        b.comment("input " + std::to_string(k) + ": " + v.name + " " + shape_str(v.shape));
        st.vmap[g.inputs[k]] = b.input(int(k), t, ne.data(), v.name);
    }
    const Registry& reg = Registry::get();
    if (b.keep_values) b.node_ops.assign(g.nodes.size(), "");
    ggml_tensor* last = nullptr;  // the compute context's newest tensor before a node's lowering
    for (ggml_tensor* t = ggml_get_first_tensor(b.ctx); t; t = ggml_get_next_tensor(b.ctx, t)) last = t;
    Progress bar("lowering " + g.path, g.nodes.size());
    for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
        bar.update(ni);
        if (!live[ni]) continue;
        Node& n = g.nodes[ni];
        const OpDef* def = reg.find(n.domain, n.op_type);
        LowerCtx c(g, int(ni), st);
        struct OpsOf {  // when keeping values: the ggml ops this node's lowering made, in order, once each
            Builder& b;
            size_t ni;
            ggml_tensor*& last;
            ~OpsOf() {
                if (!b.keep_values) return;
                std::string& s = b.node_ops[ni];
                for (ggml_tensor* t = last ? ggml_get_next_tensor(b.ctx, last) : ggml_get_first_tensor(b.ctx); t;
                     t = ggml_get_next_tensor(b.ctx, t)) {
                    last = t;
                    std::string op = ggml_op_desc(t);
                    if (t->op != GGML_OP_NONE && (" " + s + " ").find(" " + op + " ") == std::string::npos)
                        s += (s.empty() ? "" : " ") + op;
                }
            }
        } ops_of{b, ni, last};
        b.comment(n.describe() + " -> " + (c.has_out(0) ? shape_str(c.out(0).shape) : std::string("")));
        // nodes the ggml lowering cannot take run as host kernels (lower/host_kernel.h)
        std::string host_why = !def->lower ? "the operator has no ggml lowering" : "";
        for (int hi : def->host_inputs)
            if (host_why.empty() && c.has(hi) && !c.is_const(hi))
                host_why = "input '" + c.in(hi).name + "' is only known at run time";
        for (int i = 0; i < c.nin() + c.nout(); ++i) {
            bool in = i < c.nin();
            if (!host_why.empty() || !(in ? c.has(i) : c.has_out(i - c.nin()))) continue;
            const Value& v = in ? c.in(i) : c.out(i - c.nin());
            if (!device_computable(v.dtype))
                host_why = std::string("'") + v.name + "' is " + dtype_name(v.dtype) +
                           " (ggml computes float32, bool and int32/int64)";
        }
        if (!host_why.empty()) {
            lower_on_host(c, host_why);
        } else {
            size_t nlines = b.lines.size();
            try {
                def->lower(c);
            } catch (const Error& e) {
                // what the ggml lowering cannot express, the operator's host evaluator may still compute exactly
                if (e.code != kExitUnsupported || dynamic_cast<const NeedsConstant*>(&e) || !def->eval) throw;
                b.lines.resize(nlines);
                for (int o : n.outputs)
                    if (o >= 0) st.vmap[o] = nullptr;
                lower_on_host(c, e.detail.empty() ? e.what() : e.detail);
            }
        }
        for (int i = 0; i < c.nout(); ++i)
            if (c.has_out(i) && !st.vmap[n.outputs[i]] && !c.out(i).constant && st.uses[size_t(n.outputs[i])] > 0)
                internal_error(c.where() + ": output " + std::to_string(i) + " was not lowered");
    }
    b.values = st.vmap;
    for (size_t k = 0; k < g.outputs.size(); ++k) {
        int id = g.outputs[k];
        Value& v = g.values[id];
        ggml_tensor* t = st.vmap[id];
        if (shape_numel(v.shape) == 0) {  // an empty (folded) output: nothing to compute
            b.mark_output(int(k), nullptr);
            continue;
        }
        if (!t && !held_exactly(*v.constant)) {  // a string, or int64 beyond int32: the session returns the host value
            b.mark_output(int(k), nullptr);
            continue;
        }
        if (!t) {
            if (!v.constant) internal_error("graph output '" + v.name + "' was not computed");
            LowerCtx dummy(g, 0, st);
            t = dummy.constant(*v.constant, ggml_type_for(v.dtype));
        }
        // outputs are read back whole: give them their own contiguous memory
        if (t->op == GGML_OP_NONE || t->view_src || !ggml_is_contiguous(t)) t = G(b, ggml_cont, t);
        b.mark_output(int(k), t);
    }
}

}  // namespace onnx2ggml::core
