#include "lower/host_kernel.h"

#include <cstring>
#include <utility>

#include "ir/serialize.h"
#include "lower/lower.h"
#include "ops/op.h"

namespace onnx2ggml::core {

Tensor to_storage(const Tensor& t, ggml_type type) {
    if (type == GGML_TYPE_F32) return t.cast(DType::F32);
    if (type == GGML_TYPE_I32 && t.dtype != DType::I32 && t.dtype != DType::U32) {
        Tensor r = Tensor::zeros(DType::I32, t.shape);
        for (int64_t i = 0; i < t.numel(); ++i) {
            int64_t x = t.geti(i);
            if (x < INT32_MIN || x > INT32_MAX)
                throw Error(kExitUnsupported, "the int64 value " + std::to_string(x) +
                                                  " is outside the int32 range ggml holds int64 tensors in");
            r.seti(i, x);
        }
        return r;
    }
    if (dtype_size(t.dtype) != ggml_type_size(type))
        internal_error(std::string("a ") + dtype_name(t.dtype) + " tensor held as ggml " + ggml_type_name(type));
    return t;
}

Tensor from_storage(const void* data, ggml_type type, DType dtype, const Shape& s) {
    DType held =
        type == GGML_TYPE_F32 ? DType::F32 : (type == GGML_TYPE_I32 && dtype != DType::U32 ? DType::I32 : dtype);
    Tensor t = Tensor::zeros(held, s);
    if (dtype_size(held) != ggml_type_size(type))
        internal_error(std::string("a ") + dtype_name(dtype) + " tensor held as ggml " + ggml_type_name(type));
    std::memcpy(t.data(), data, t.nbytes());
    return t.cast(dtype);
}

namespace {

void compute_host_kernel(ggml_tensor* dst, HostKernel* k) {
    Graph g = k->node_graph;  // a fresh copy: the evaluator sets the outputs' values
    try {
        Node& n = g.nodes[0];
        for (size_t j = 0; j < k->arg_input.size(); ++j) {
            Value& v = g.values[n.inputs[k->arg_input[j]]];
            const ggml_tensor* s = dst->src[j];
            if (!s || ggml_nelements(s) != shape_numel(v.shape) || s->type != ggml_type_for(v.dtype))
                bad_input("input '" + v.name + "' does not match its ggml tensor (a record of another model?)");
            v.constant = from_storage(s->data, s->type, v.dtype, v.shape);
        }
        OpCtx c(g, 0);
        k->def->eval(c);
        Value& o = g.values[n.outputs[k->out]];
        if (!o.constant)
            internal_error("the host evaluator of " + n.op_type + " gave no value for output '" + o.name + "'");
        Tensor st = to_storage(*o.constant, dst->type);
        if (st.nbytes() != ggml_nbytes(dst))
            internal_error("host kernel output of " + std::to_string(st.nbytes()) + " bytes for a tensor of " +
                           std::to_string(ggml_nbytes(dst)));
        std::memcpy(dst->data, st.data(), st.nbytes());
    } catch (const std::exception& e) {
        std::memset(dst->data, 0, ggml_nbytes(dst));
        std::lock_guard<std::mutex> l(k->m);
        if (k->error.empty()) {
            auto* err = dynamic_cast<const Error*>(&e);
            k->error_code = err ? err->code : kExitInternal;
            k->error =
                k->node_desc + " at run time: " + (err && !err->detail.empty() ? err->detail : std::string(e.what()));
        }
    }
}

thread_local HostTeam* current_team = nullptr;  // the team whose evaluator runs on this thread

// Takes items of the team's job until none is left to take (the lock held on entry and on return).
void take_items(HostTeam& t, std::unique_lock<std::mutex>& l) {
    while (t.job && t.next < t.items) {
        int64_t i = t.next++;
        const std::function<void(int64_t)>* job = t.job;
        l.unlock();
        std::exception_ptr e;
        try {
            (*job)(i);
        } catch (...) { e = std::current_exception(); }
        l.lock();
        if (e && !t.error) t.error = e;
        if (--t.pending == 0) t.cv.notify_all();
    }
}

void help(HostTeam& t) {
    std::unique_lock<std::mutex> l(t.m);
    for (;;) {
        take_items(t, l);
        if (t.done) break;
        t.cv.wait(l);
    }
    ++t.left;
    t.cv.notify_all();
}

void run_host_kernel(ggml_tensor* dst, int ith, int nth, void* userdata) {
    auto* k = static_cast<HostKernel*>(userdata);
    if (ith != 0) return help(k->team);
    k->team.helpers = nth - 1;
    current_team = &k->team;
    compute_host_kernel(dst, k);
    current_team = nullptr;
    // every helper leaves before the next run of the node can start (ggml's barrier follows)
    std::unique_lock<std::mutex> l(k->team.m);
    k->team.done = true;
    k->team.cv.notify_all();
    k->team.cv.wait(l, [&] { return k->team.left == k->team.helpers; });
    k->team.done = false;
    k->team.left = 0;
}

}  // namespace

void host_parallel_for(int64_t n, const std::function<void(int64_t)>& fn) {
    HostTeam* t = current_team;
    if (!t || t->helpers == 0 || n < 2) {
        for (int64_t i = 0; i < n; ++i) fn(i);
        return;
    }
    std::unique_lock<std::mutex> l(t->m);
    t->job = &fn, t->items = n, t->next = 0, t->pending = n, t->error = nullptr;
    t->cv.notify_all();
    take_items(*t, l);
    t->cv.wait(l, [&] { return t->pending == 0; });
    t->job = nullptr;
    if (t->error) std::rethrow_exception(std::exchange(t->error, nullptr));
}

std::string save_host_kernel(const HostKernel& k) {
    ByteWriter w;
    w.str("o2g host kernel 1");
    w.graph(k.node_graph);
    w.u64(k.arg_input.size());
    for (int i : k.arg_input) w.i64(i);
    w.i64(k.out);
    w.str(k.node_desc);
    return w.bytes;
}

std::shared_ptr<HostKernel> load_host_kernel(const std::string& bytes, const std::string& what) {
    ByteReader r(bytes, what);
    if (r.str() != "o2g host kernel 1") r.malformed("not a host kernel record of this onnx2ggml version");
    auto k = std::make_shared<HostKernel>();
    k->node_graph = r.graph();
    if (k->node_graph.nodes.size() != 1) r.malformed("a host kernel of " + std::to_string(k->node_graph.nodes.size()) + " nodes");
    const Node& n = k->node_graph.nodes[0];
    const int64_t args = r.count(8);
    if (args > GGML_MAX_SRC) r.malformed("a host kernel of " + std::to_string(args) + " arguments");
    for (int64_t m = args; m > 0; --m) {
        int64_t i = r.i64();
        if (i < 0 || i >= int64_t(n.inputs.size()) || n.inputs[i] < 0) r.malformed("a host kernel argument out of range");
        k->arg_input.push_back(int(i));
    }
    int64_t out = r.i64();
    if (out < 0 || out >= int64_t(n.outputs.size()) || n.outputs[out] < 0) r.malformed("a host kernel output out of range");
    k->out = int(out);
    k->node_desc = r.str();
    if (!r.at_end()) r.malformed("bytes after the host kernel");
    k->def = Registry::get().find(n.domain, n.op_type);
    if (!k->def || !k->def->eval)
        bad_input(what + ": no host evaluator for operator " + (n.domain.empty() ? "" : n.domain + ".") + n.op_type);
    return k;
}

ggml_tensor* host_kernel_node(ggml_context* ctx, HostKernel* k, ggml_type type, const int64_t ne[4],
                              std::vector<ggml_tensor*> args) {
    // every thread of the CPU backend enters (a host kernel keeps the others blocked inside, or shares work with
    // them): with one task, a split holding only this node would run it on one thread while the other waits
    // for OpenMP's next parallel region spinning against it
    return ggml_custom_4d(ctx, type, ne[0], ne[1], ne[2], ne[3], args.data(), int(args.size()), run_host_kernel,
                          GGML_N_TASKS_MAX, k);
}

bool take_host_kernel_error(const std::vector<std::shared_ptr<HostKernel>>& kernels, int* code, std::string* msg) {
    for (auto& k : kernels) {
        std::lock_guard<std::mutex> l(k->m);
        if (!k->error.empty()) {
            *code = k->error_code;
            *msg = std::exchange(k->error, std::string());
            return true;
        }
    }
    return false;
}

void lower_on_host(LowerCtx& c, const std::string& why) {
    const Node& node = c.node();
    const OpDef* def = Registry::get().find(node.domain, node.op_type);
    if (!def || !def->eval) c.fail_unsupported(why);
    for (int i = 0; i < c.nin(); ++i)
        if (c.has(i) && !c.is_const(i) && shape_numel(c.shape(i)) == 0)
            c.fail_unsupported(why + " (and its zero-size input '" + c.in(i).name + "' cannot be a ggml tensor)");
    for (int i = 0; i < c.nout(); ++i)
        if (c.has_out(i) && shape_numel(c.out(i).shape) == 0)
            c.fail_unsupported(why + " (and its zero-size output '" + c.out(i).name + "' cannot be a ggml tensor)");
    // the node alone, with its constant inputs; the others come from ggml at run time
    Graph ng;
    ng.path = c.graph().path;
    ng.opsets = c.graph().opsets;
    Node n = node;
    std::vector<ggml_tensor*> args;
    std::vector<int> arg_input;
    for (int i = 0; i < c.nin(); ++i) {
        if (!c.has(i)) continue;
        Value v = c.in(i);
        v.producer = -1;
        if (!v.constant) {
            if (args.size() + 1 >= GGML_MAX_SRC)
                c.fail_unsupported(why + " (and it has too many runtime inputs for a host kernel)");
            args.push_back(c.xc(i));
            arg_input.push_back(i);
        }
        n.inputs[i] = int(ng.values.size());
        ng.values.push_back(v);
    }
    for (int i = 0; i < c.nout(); ++i) {
        if (!c.has_out(i)) continue;
        Value v = c.out(i);
        v.constant.reset();
        v.producer = 0;
        n.outputs[i] = int(ng.values.size());
        ng.values.push_back(v);
    }
    for (size_t i = 0; i < ng.values.size(); ++i) ng.by_name[ng.values[i].name] = int(i);
    ng.nodes.push_back(n);

    for (int i = 0; i < c.nout(); ++i) {
        if (!c.has_out(i) || c.out(i).constant) continue;
        auto k = std::make_shared<HostKernel>();
        k->def = def;
        k->node_graph = ng;
        k->arg_input = arg_input;
        k->out = i;
        k->node_desc = c.where();
        auto ne = to_ne(c.out(i).shape);
        c.set(i, c.b.custom(ggml_type_for(c.out(i).dtype), ne.data(), args, k));
    }
}

}  // namespace onnx2ggml::core
