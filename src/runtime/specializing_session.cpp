#include "runtime/specializing_session.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>

#include "ops/op.h"
#include "util/error.h"

namespace onnx2ggml::core {

// staged execution (make_cut): the model cut where a value computed inside it decides a compile-time fact
struct SpecializingSession::Cut {
    std::vector<std::string> values;  // the values stage 2 needs at compile time
    std::unique_ptr<SpecializingSession> before, after;
    // per stage-1 input: its index among the entry's graph inputs
    std::vector<size_t> before_feed;
    // per stage-2 input: {false, index among the entry's graph inputs} or {true, index of stage 1's output}
    std::vector<std::pair<bool, size_t>> after_feed;
    // per model output: {false, index of stage 2's output} or {true, index of stage 1's output}
    std::vector<std::pair<bool, size_t>> outputs;
};

namespace {

// "batchx3xheightxwidth": the model's dims, symbolic ones by name
std::string model_dims(const Value& v) {
    std::string r;
    for (size_t i = 0; i < v.shape.size(); ++i) {
        std::string p = i < v.dim_params.size() && !v.dim_params[i].empty() ? v.dim_params[i] : "?";
        r += (i ? "x" : "") + (v.shape[i] >= 0 ? std::to_string(v.shape[i]) : p);
    }
    return r.empty() ? "scalar" : r;
}

// a shape as --input-shape writes it: 1x3x224x224
std::string xdims(const Shape& s) {
    std::string r;
    for (size_t i = 0; i < s.size(); ++i) r += (i ? "x" : "") + std::to_string(s[i]);
    return r.empty() ? "scalar" : r;
}

std::string dim_name(const Value& v, size_t i) {
    return i < v.dim_params.size() && !v.dim_params[i].empty() ? "'" + v.dim_params[i] + "'"
                                                               : "dim " + std::to_string(i);
}

// "batch=2, height=64": what a shape binds the model's dynamic dims of v to
std::string implied(const Value& v, const Shape& s) {
    std::string r;
    for (size_t i = 0; i < v.shape.size() && i < s.size(); ++i)
        if (v.shape[i] < 0)
            r += (r.empty() ? "" : ", ") +
                 (i < v.dim_params.size() && !v.dim_params[i].empty() ? v.dim_params[i] : "dim " + std::to_string(i)) +
                 "=" + std::to_string(s[i]);
    return r;
}

std::string ms_str(double ms) {
    char b[32];
    snprintf(b, sizeof b, "%.1f ms", ms);
    return b;
}

}  // namespace

std::vector<Shape> resolve_input_shapes(const Graph& model, const std::vector<int>& ids,
                                        const std::vector<const Tensor*>& inputs, const CompileOptions& opts,
                                        const std::vector<std::string>& sources) {
    if (inputs.size() != ids.size())
        bad_input(model.path + ": expected " + std::to_string(ids.size()) + " inputs, got " +
                  std::to_string(inputs.size()));
    std::vector<Shape> r(ids.size());
    std::vector<std::string> what(ids.size());  // where each shape comes from, for the messages
    struct Binding {
        int64_t value;
        size_t input;
    };
    std::map<std::string, Binding> sym;  // symbolic dim name -> the value the first input binding it gives
    std::vector<bool> known(ids.size(), false);
    for (size_t k = 0; k < ids.size(); ++k) {  // given tensors, else --input-shape: checked, and binding symbolic dims
        const Value& v = model.values[size_t(ids[k])];
        auto given = opts.input_shapes.find(v.name);
        if (inputs[k]) {
            const Tensor& t = *inputs[k];
            what[k] =
                (k < sources.size() && !sources[k].empty() ? sources[k] : model.path) + ": input '" + v.name + "'";
            bool int_ok = !dtype_is_float(v.dtype) && (t.dtype == DType::I64 || t.dtype == DType::I32);
            if (t.dtype != v.dtype && !int_ok)
                bad_input(what[k] + " has dtype " + dtype_name(t.dtype) + ", the model expects " + dtype_name(v.dtype));
            if (given != opts.input_shapes.end() && given->second != t.shape)
                bad_input(what[k] + " has shape " + shape_str(t.shape) +
                          (implied(v, t.shape).empty() ? "" : " (" + implied(v, t.shape) + ")") +
                          ", but --input-shape gives " + v.name + "=" + xdims(given->second) +
                          ": give one of them (dims are taken from the input)");
            r[k] = t.shape;
        } else if (given != opts.input_shapes.end()) {
            what[k] = model.path + ": --input-shape " + v.name + "=";
            r[k] = given->second;
        } else {
            continue;
        }
        known[k] = true;
        bool file = inputs[k] != nullptr;
        auto dims = [&](size_t x) { return inputs[x] ? " has shape " + shape_str(r[x]) : xdims(r[x]); };
        if (r[k].size() != v.shape.size())
            bad_input(
                what[k] + dims(k) +
                (file ? " (rank " + std::to_string(r[k].size()) + ")" : " has rank " + std::to_string(r[k].size())) +
                ", the model declares rank " + std::to_string(v.shape.size()) + " (" + model_dims(v) + ")");
        for (size_t i = 0; i < v.shape.size(); ++i)
            if (v.shape[i] >= 0 && r[k][i] != v.shape[i])
                bad_input(what[k] + dims(k) +
                          (file ? ", the model expects " + model_dims(v) + " (its static dim "
                                : " conflicts with the model's static dim ") +
                          std::to_string(i) + " = " + std::to_string(v.shape[i]) + (file ? ")" : ""));
        for (size_t i = 0; i < v.shape.size(); ++i) {
            if (v.shape[i] >= 0 || i >= v.dim_params.size() || v.dim_params[i].empty()) continue;
            auto b = sym.emplace(v.dim_params[i], Binding{r[k][i], k});
            if (b.second || b.first->second.value == r[k][i]) continue;
            size_t j = b.first->second.input;
            const std::string& p = v.dim_params[i];
            auto side = [&](size_t x, int64_t val) {
                return what[x] + dims(x) + " (" + p + "=" + std::to_string(val) + ")";
            };
            bad_input("inputs '" + model.values[size_t(ids[j])].name + "' and '" + v.name +
                      "' disagree on the symbolic dim '" + p + "': " + side(j, b.first->second.value) + ", " +
                      side(k, r[k][i]));
        }
    }
    for (size_t k = 0; k < ids.size(); ++k) {  // neither: the static dims and the symbolic dims other inputs bind
        if (known[k]) continue;
        const Value& v = model.values[size_t(ids[k])];
        r[k] = v.shape;
        for (size_t i = 0; i < v.shape.size(); ++i) {
            if (v.shape[i] >= 0) continue;
            auto b = i < v.dim_params.size() && !v.dim_params[i].empty() ? sym.find(v.dim_params[i]) : sym.end();
            if (b == sym.end())
                bad_input(model.path + ": input '" + v.name + "' has a dynamic dim " + std::to_string(i) + " (" +
                          dim_name(v, i) + ") that no given input binds (the model declares " + model_dims(v) +
                          "): give --input " + v.name +
                          "=FILE.npy (its dims are taken from the file) or, for --random-inputs, --input-shape " +
                          v.name + "=...");
            r[k][i] = b->second.value;
        }
    }
    return r;
}

SpecializingSession::SpecializingSession(Graph model, const CompileOptions& copts, const SessionOptions& sopts,
                                         size_t max_specializations)
    : model_(std::move(model)), copts_(copts), sopts_(sopts), max_(std::max<size_t>(1, max_specializations)) {
    for (auto& kv : copts_.frozen_inputs) {
        int id = model_.find(kv.first);
        if (id < 0 || std::find(model_.inputs.begin(), model_.inputs.end(), id) == model_.inputs.end())
            bad_input(model_.path + ": --freeze names '" + kv.first + "', which is not a graph input");
    }
    for (auto& kv : copts_.input_shapes) {
        int id = model_.find(kv.first);
        if (id < 0 || std::find(model_.inputs.begin(), model_.inputs.end(), id) == model_.inputs.end())
            bad_input(model_.path + ": --input-shape names '" + kv.first + "', which is not a graph input");
    }
    for (int id : model_.inputs) {
        const Value& v = model_.values[size_t(id)];
        if (copts_.frozen_inputs.count(v.name)) continue;
        inputs_.push_back(id);
        bool dynamic = std::any_of(v.shape.begin(), v.shape.end(), [](int64_t d) { return d < 0; });
        if (dynamic) fixed_shapes_ = false;
    }
    control_.assign(inputs_.size(), false);
    copts_.input_shapes.clear();  // the shapes come from the inputs of each run
    copts_.max_eval_work = std::max(copts_.max_eval_work, kRunTimeEvalWork);  // on the run's own values
}

SpecializingSession::~SpecializingSession() {
    lru_.clear();  // the sessions before the pool whose weights they read
}

std::vector<std::string> SpecializingSession::control_inputs() const {
    std::vector<std::string> r;
    for (size_t k = 0; k < inputs_.size(); ++k)
        if (control_[k]) r.push_back(model_.values[size_t(inputs_[k])].name);
    for (auto& e : lru_)  // staged: the model's inputs that a stage found
        if (e.cut)
            for (auto* st : {e.cut->before.get(), e.cut->after.get()})
                for (auto& n : st->control_inputs()) {
                    int id = model_.find(n);
                    if (std::find(inputs_.begin(), inputs_.end(), id) != inputs_.end() &&
                        std::find(r.begin(), r.end(), n) == r.end())
                        r.push_back(n);
                }
    return r;
}

// A control input's value as the graph holds it (an int32 file for an int64 input is widened).
Tensor SpecializingSession::control_value(size_t k, const Tensor& t) const {
    DType want = model_.values[size_t(inputs_[k])].dtype;
    return t.dtype == want ? t : t.cast(want);
}

std::string SpecializingSession::signature(const std::vector<Tensor>& inputs, std::string* readable) const {
    std::string key;
    for (size_t k = 0; k < inputs_.size(); ++k) {
        const Tensor& t = inputs[k];
        std::string dims = shape_str(t.shape);
        key += dims + ";";
        std::string shown = model_.values[size_t(inputs_[k])].name + "=" + dims;
        if (control_[k]) {
            Tensor c = control_value(k, t);
            if (c.dtype == DType::String) {
                for (auto& s : c.strings()) key += std::to_string(s.size()) + ":" + s;
            } else {
                key.append(reinterpret_cast<const char*>(c.data()), c.nbytes());
            }
            key += ";";
            if (c.dtype != DType::String && c.numel() <= 4) {
                shown += " value ";
                for (int64_t i = 0; i < c.numel(); ++i)
                    shown += (i ? "," : "") +
                             (dtype_is_float(c.dtype) ? std::to_string(c.getf(i)) : std::to_string(c.geti(i)));
            } else {
                shown += " (value)";
            }
        }
        if (readable) *readable += (readable->empty() ? "" : " ") + shown;
    }
    return key;
}

SpecializingSession::Entry SpecializingSession::specialize_for(const std::vector<Tensor>& inputs,
                                                               const std::vector<Shape>& shapes) {
    for (;;) {
        auto g = std::make_unique<Graph>(model_);  // initializer data is shared, not copied
        CompileOptions o = copts_;
        o.input_shapes.clear();
        for (size_t k = 0; k < inputs_.size(); ++k) {
            const std::string& n = model_.values[size_t(inputs_[k])].name;
            if (control_[k]) o.frozen_inputs[n] = control_value(k, inputs[k]);
            else o.input_shapes[n] = shapes[k];
        }
        std::vector<UnsupportedOp> bad;
        specialize(*g, o, &bad);
        if (bad.empty()) {
            optimize(*g, o);
            validate(*g, &bad);
        }
        auto entry = [&](std::vector<std::string> cut_at) {
            Entry e;
            e.g = std::move(g);
            for (int id : e.g->inputs)
                e.feed.push_back(size_t(std::find(inputs_.begin(), inputs_.end(), id) - inputs_.begin()));
            e.cut_at = std::move(cut_at);
            return e;
        };
        if (bad.empty()) return entry({});
        bool needs_only =
            std::all_of(bad.begin(), bad.end(), [](const UnsupportedOp& u) { return !u.needs_constant.empty(); });
        if (!needs_only) fail_specialization(*g, bad, inputs);  // freezing more would not make it run: report all now
        // values needed at compile time: freeze the graph inputs they come from and try again.
        // A graph input that is such a value is frozen whatever its dtype; one it is computed from
        // when it is an integer tensor (indices, shapes) or a scalar (a range's limit), never float data.
        bool progress = false;
        auto freeze = [&](int id, bool direct) {
            auto pos = std::find(inputs_.begin(), inputs_.end(), id);
            if (pos == inputs_.end()) return;
            size_t k = size_t(pos - inputs_.begin());
            const Value& v = model_.values[size_t(id)];
            if (control_[k] || !(direct || !dtype_is_float(v.dtype) || shape_numel(shapes[k]) == 1)) return;
            control_[k] = true;
            progress = true;
        };
        for (auto& u : bad) {
            if (u.needs_constant.empty()) continue;
            std::vector<int> stack = {g->find(u.needs_constant)};
            std::set<int> seen;
            while (!stack.empty()) {
                int v = stack.back();
                stack.pop_back();
                if (v < 0 || !seen.insert(v).second) continue;
                const Value& val = g->values[size_t(v)];
                if (val.producer < 0) {
                    freeze(v, val.name == u.needs_constant);
                    continue;
                }
                for (int in : g->nodes[size_t(val.producer)].inputs) stack.push_back(in);
            }
        }
        if (progress) continue;
        // computed inside the graph: staged execution, the graph as far as it specialized cut at those values
        std::vector<std::string> values;
        for (auto& u : bad) {
            int id = g->find(u.needs_constant);
            if (id < 0 || g->values[size_t(id)].producer < 0 || !g->values[size_t(id)].has_shape)
                fail_specialization(*g, bad, inputs);
            if (std::find(values.begin(), values.end(), u.needs_constant) == values.end())
                values.push_back(u.needs_constant);
        }
        return entry(values);
    }
}

// A limit that a control value exceeds (a Loop's trip count) is bad input (exit 2); the rest is
// unsupported (exit 3), every node listed.
// "n = 5, mode (--freeze)": the control inputs and the scalar values of this run
std::string SpecializingSession::control_summary(const std::vector<Tensor>& inputs) const {
    std::string ctl;
    for (size_t k = 0; k < inputs_.size(); ++k) {
        if (!control_[k]) continue;
        const Tensor& t = inputs[k];
        std::string v = t.dtype != DType::String && t.numel() == 1
                            ? " = " + (dtype_is_float(t.dtype) ? std::to_string(t.getf(0)) : std::to_string(t.geti(0)))
                            : "";
        ctl += (ctl.empty() ? "" : ", ") + model_.values[size_t(inputs_[k])].name + v;
    }
    for (auto& kv : copts_.frozen_inputs) ctl += (ctl.empty() ? "" : ", ") + kv.first + " (--freeze)";
    return ctl;
}

void SpecializingSession::fail_specialization(const Graph& g, const std::vector<UnsupportedOp>& bad,
                                              const std::vector<Tensor>& inputs) const {
    std::string ctl = control_summary(inputs);
    for (auto& u : bad)
        if (u.limit && !ctl.empty())
            bad_input(g.path + ": node '" + u.node + "' (" + u.op_type + ", opset " + std::to_string(u.opset) +
                      "): " + u.reason + " (the control inputs of this run: " + ctl + ")");
    throw_unsupported(g, bad);
    internal_error(g.path + ": specialization failed without naming a node");
}

Session& SpecializingSession::session_for(const std::vector<Tensor>& inputs) {
    Entry& e = lookup_or_specialize(inputs);
    if (e.s) return *e.s;
    run_entry(e, inputs);  // staged: its stages specialize as they run
    return *last_;
}

void SpecializingSession::evict_oldest() {
    if (lru_.back().cut)
        for (auto* st : {lru_.back().cut->before.get(), lru_.back().cut->after.get()}) {
            SpecializationStats x = st->stats();
            evicted_stages_.hits += x.hits, evicted_stages_.misses += x.misses, evicted_stages_.evictions += x.evictions;
            evicted_stages_.specialize_ms += x.specialize_ms;
        }
    index_.erase(lru_.back().key);
    lru_.pop_back();
    stats_.evictions++;
}

SpecializingSession::Entry& SpecializingSession::lookup_or_specialize(const std::vector<Tensor>& inputs) {
    std::vector<const Tensor*> given;
    for (auto& t : inputs) given.push_back(&t);
    std::vector<Shape> shapes = resolve_input_shapes(model_, inputs_, given, copts_);
    std::string shown;
    std::string key = signature(inputs, &shown);
    auto it = index_.find(key);
    if (it != index_.end()) {
        lru_.splice(lru_.begin(), lru_, it->second);
        stats_.hits++;
        if (verbose_) fprintf(stderr, "onnx2ggml: specialization cache hit: %s\n", shown.c_str());
        last_ = lru_.front().s.get();
        return lru_.front();
    }
    if (single_)
        bad_input(model_.path + ": inputs of another shape or control value (" +
                  (shown.empty() ? "a new signature" : shown) +
                  ") for a session that runs one signature (its host copies of the weights are gone)");
    auto t0 = std::chrono::steady_clock::now();
    while (lru_.size() >= max_) evict_oldest();  // make room first: its memory is free for the new one
    last_ = nullptr;
    // Runs f; while it would take the process above its memory budget (--max-memory) and older
    // specializations are cached, the least recently used one goes and f runs again.
    auto making_room = [&](auto&& f) {
        for (;;) {
            try {
                return f();
            } catch (const MemoryLimit&) {
                if (lru_.empty()) throw;
                evict_oldest();
            }
        }
    };
    Entry e = making_room([&] { return specialize_for(inputs, shapes); });
    key = signature(inputs, &(shown = ""));  // the control inputs found may have grown
    if (!e.cut_at.empty()) {                 // staged: the cut is this signature's entry
        e.cut = make_cut(*e.g, e.cut_at);
        e.key = key;
        auto old = index_.find(key);
        if (old != index_.end()) {
            lru_.erase(old->second);
            index_.erase(old);
        }
        lru_.push_front(std::move(e));
        index_[key] = lru_.begin();
        stats_.misses++;
        return lru_.front();
    }
    bool one =
        one_signature_ || (fixed_shapes_ && std::none_of(control_.begin(), control_.end(), [](bool c) { return c; }));
    if (one && lru_.empty()) {
        // the only signature there can be: the host copies of the weights go once they are uploaded
        single_ = sopts_.release_host_constants;
        if (single_)
            for (auto& v : model_.values)
                if (v.is_initializer) v.constant.reset();
    }
    SessionOptions so = sopts_;
    so.release_host_constants = single_;
    so.pool = &pool_;
    try {
        e.s = making_room([&] { return std::make_unique<Session>(*e.g, so); });
    } catch (const Error& err) {  // e.g. over --max-memory: say which control values asked for it
        std::string ctl = control_summary(inputs);
        if (err.code != kExitBadInput || ctl.empty()) throw;
        bad_input(std::string(err.what()) + " (the control inputs of this run: " + ctl + ")");
    }
    if (!single_)
        // the weights are uploaded (and shared by the specializations to come); the host copies stay for
        // the next specialization's folding, but the pages of those mapped from external data files go
        // back to the kernel, which re-reads them if touched again: resident memory holds the weights
        // once, not twice (the SD 1.5 UNet with dynamic dims: 6.8 -> 3.x GB)
        for (auto& v : model_.values)
            if (v.is_initializer && v.constant && v.constant->buf) v.constant->buf->release_pages();
    e.key = key;
    auto old = index_.find(key);  // made before the control inputs had grown to these: replaced
    if (old != index_.end()) {
        lru_.erase(old->second);
        index_.erase(old);
    }
    lru_.push_front(std::move(e));
    index_[key] = lru_.begin();
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    stats_.misses++;
    stats_.specialize_ms += ms;
    stats_.last_specialize_ms = ms;
    if (verbose_) {
        std::string ctl;
        for (auto& n : control_inputs()) ctl += (ctl.empty() ? "" : ", ") + n;
        fprintf(stderr,
                "onnx2ggml: specialization cache miss: %s: specialized in %s (%zu cached, %llu evicted; control "
                "inputs: %s; shared weights %.1f MB)\n",
                shown.c_str(), ms_str(ms).c_str(), lru_.size(), static_cast<unsigned long long>(stats_.evictions),
                ctl.empty() ? "none" : ctl.c_str(), double(pool_.bytes()) / 1048576.0);
    }
    last_ = lru_.front().s.get();
    return lru_.front();
}

std::vector<Tensor> SpecializingSession::run(const std::vector<Tensor>& inputs) {
    return run_entry(lookup_or_specialize(inputs), inputs);
}

std::vector<Tensor> SpecializingSession::run_entry(Entry& e, const std::vector<Tensor>& inputs) {
    stats_.runs++;
    std::vector<Tensor> feed;
    for (size_t k : e.feed) feed.push_back(inputs[k]);
    if (e.s) {
        last_ = e.s.get();
        return e.s->run(feed);
    }
    Cut& c = *e.cut;  // staged: stage 1, then stage 2 on its outputs
    std::vector<Tensor> in1;
    for (size_t k : c.before_feed) in1.push_back(feed[k]);
    std::vector<Tensor> mid = c.before->run(in1);
    std::vector<Tensor> in2;
    for (auto& f : c.after_feed) in2.push_back(f.first ? mid[f.second] : feed[f.second]);
    std::vector<Tensor> out2 = c.after->run(in2);
    last_ = c.after->last();
    std::vector<Tensor> out;
    for (auto& o : c.outputs) out.push_back(o.first ? mid[o.second] : out2[o.second]);
    return out;
}

// ---- staged execution -------------------------------------------------------------------------

namespace {

// The values node n reads: its inputs and the free variables of its subgraphs (an If branch reads
// the values around it by name).
std::vector<int> reads(const Graph& g, const Node& n) {
    std::vector<int> r(n.inputs.begin(), n.inputs.end());
    for (auto& kv : n.attrs)
        if (kv.second.g)
            for (auto& f : kv.second.g->free_vars) r.push_back(g.find(f));
    return r;
}

// g keeping only the nodes `keep` (model order), with `inputs` and `outputs`; producers recomputed
void restrict_graph(Graph& g, const std::vector<bool>& keep, std::vector<int> inputs, std::vector<int> outputs) {
    std::vector<Node> nodes;
    for (size_t i = 0; i < g.nodes.size(); ++i)
        if (keep[i]) nodes.push_back(std::move(g.nodes[i]));
    g.nodes = std::move(nodes);
    for (auto& v : g.values) v.producer = -1;
    for (size_t k = 0; k < g.nodes.size(); ++k)
        for (int o : g.nodes[k].outputs)
            if (o >= 0) g.values[size_t(o)].producer = int(k);
    g.inputs = std::move(inputs);
    g.outputs = std::move(outputs);
}

}  // namespace

std::shared_ptr<SpecializingSession::Cut> SpecializingSession::make_cut(const Graph& m,
                                                                        const std::vector<std::string>& values) const {
    auto cut = std::make_shared<Cut>();
    cut->values = values;
    // a value both stages hold as it is: a constant (an initializer or a folded value)
    auto is_const = [&](int v) { return v < 0 || m.values[size_t(v)].constant.has_value(); };
    // stage 1: every node the cut values depend on (through values not yet constant)
    std::vector<bool> first(m.nodes.size(), false);
    std::vector<int> stack;
    for (auto& n : values) stack.push_back(m.find(n));
    while (!stack.empty()) {
        int v = stack.back();
        stack.pop_back();
        int p = is_const(v) ? -1 : m.values[size_t(v)].producer;
        if (p < 0 || first[size_t(p)]) continue;
        first[size_t(p)] = true;
        for (int in : reads(m, m.nodes[size_t(p)])) stack.push_back(in);
    }
    auto made_first = [&](int v) {
        return !is_const(v) && m.values[size_t(v)].producer >= 0 && first[size_t(m.values[size_t(v)].producer)];
    };
    // what crosses: the cut values, the stage-1 values stage 2 reads, the model outputs stage 1 makes
    std::vector<int> crossing;
    std::set<int> seen, read1, read2;
    for (auto& n : values)
        if (seen.insert(m.find(n)).second) crossing.push_back(m.find(n));
    for (size_t i = 0; i < m.nodes.size(); ++i)
        for (int v : reads(m, m.nodes[i])) {
            (first[i] ? read1 : read2).insert(v);
            if (!first[i] && made_first(v) && seen.insert(v).second) crossing.push_back(v);
        }
    std::vector<int> outs2;
    for (int o : m.outputs) {
        if (made_first(o)) {
            if (seen.insert(o).second) crossing.push_back(o);
            cut->outputs.push_back({true, size_t(std::find(crossing.begin(), crossing.end(), o) - crossing.begin())});
        } else {
            cut->outputs.push_back({false, outs2.size()});
            outs2.push_back(o);
            read2.insert(o);
        }
    }
    std::vector<int> in1,
        in2;  // the graph inputs each stage reads (in the graph's order), then stage 2's crossing values
    for (size_t k = 0; k < m.inputs.size(); ++k) {
        if (read1.count(m.inputs[k])) in1.push_back(m.inputs[k]), cut->before_feed.push_back(k);
        if (read2.count(m.inputs[k])) in2.push_back(m.inputs[k]), cut->after_feed.push_back({false, k});
    }
    for (size_t j = 0; j < crossing.size(); ++j)
        if (read2.count(crossing[j])) in2.push_back(crossing[j]), cut->after_feed.push_back({true, j});
    // each stage specialized by a SpecializingSession of its own (the --freeze values are constants already)
    CompileOptions o = copts_;
    o.frozen_inputs.clear();
    Graph g1 = m, g2 = m;
    restrict_graph(g1, first, in1, crossing);
    std::vector<bool> second(m.nodes.size());
    for (size_t i = 0; i < m.nodes.size(); ++i) second[i] = !first[i];
    restrict_graph(g2, second, in2, outs2);
    for (int v : in2) g2.values[size_t(v)].dim_params.assign(g2.values[size_t(v)].shape.size(), "");
    cut->before = std::make_unique<SpecializingSession>(std::move(g1), o, sopts_, max_);
    cut->after = std::make_unique<SpecializingSession>(std::move(g2), o, sopts_, max_);
    for (auto* st : {cut->before.get(), cut->after.get()}) st->set_verbose(verbose_);
    if (verbose_) {
        std::string v;
        for (auto& n : values) v += (v.empty() ? "" : ", ") + n;
        if (v.size() > 300) v = v.substr(0, 300) + "... (" + std::to_string(values.size()) + " values)";
        fprintf(stderr,
                "onnx2ggml: staged execution: %s computed in the graph decide%s compile-time facts: stage 1 runs %zu "
                "of %zu nodes\n",
                v.c_str(), values.size() == 1 ? "s" : "", size_t(std::count(first.begin(), first.end(), true)),
                m.nodes.size());
    }
    return cut;
}

SpecializationStats SpecializingSession::stats() const {
    SpecializationStats r = stats_;
    auto add = [&](const SpecializationStats& x) {
        r.hits += x.hits, r.misses += x.misses, r.evictions += x.evictions, r.specialize_ms += x.specialize_ms;
    };
    add(evicted_stages_);
    for (auto& e : lru_)
        if (e.cut)
            for (auto* st : {e.cut->before.get(), e.cut->after.get()}) add(st->stats());
    return r;
}

size_t SpecializingSession::cached() const {
    size_t n = lru_.size();
    for (auto& e : lru_)
        if (e.cut) n += e.cut->before->cached() + e.cut->after->cached();
    return n;
}

std::vector<std::string> SpecializingSession::cut_values() const {
    std::vector<std::string> r;
    auto add = [&](const std::string& v) {
        if (std::find(r.begin(), r.end(), v) == r.end()) r.push_back(v);
    };
    for (auto& e : lru_)
        if (e.cut) {
            for (auto& v : e.cut->values) add(v);
            for (auto* st : {e.cut->before.get(), e.cut->after.get()})
                for (auto& v : st->cut_values()) add(v);
        }
    return r;
}

}  // namespace onnx2ggml::core
