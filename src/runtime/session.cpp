#include "runtime/session.h"

#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>

#include "ggml-alloc.h"
#include "lower/host_kernel.h"
#include "o2g_onednn.h"
#include "o2g_runtime.h"
#include "util/progress.h"
#include "util/error.h"
#include "util/limits.h"

namespace onnx2ggml::core {

std::vector<std::string> backend_names() { return o2g_runtime::backend_names(); }

ggml_backend_t init_backend(const std::string& name, int threads) {
    std::string err;
    ggml_backend_t be = o2g_runtime::init_backend(name, threads, &err);
    if (!be) bad_input(err);
    return be;
}

std::vector<ggml_backend_t> init_backends(const std::string& name, int threads) {
    std::string err;
    std::vector<ggml_backend_t> devs = o2g_runtime::init_backends(name, threads, &err);
    if (devs.empty()) bad_input(err);
    return devs;
}

Session::Session(Graph& g, const SessionOptions& opts) : g_(g) {
    try {
        init(opts);
    } catch (...) {
        release();  // a constructor that throws runs no destructor
        throw;
    }
}

WeightPool::~WeightPool() {
    drop_pending();
    for (auto b : bufs_) ggml_backend_buffer_free(b);
    for (auto c : ctxs_) ggml_free(c);
}

void WeightPool::drop_pending() {
    for (auto b : pending_bufs_) ggml_backend_buffer_free(b);
    if (pending_ctx_) ggml_free(pending_ctx_);
    pending_bufs_.clear();
    pending_ctx_ = nullptr;
    pending_.clear();
}

void WeightPool::begin(size_t max_tensors) {
    drop_pending();
    ggml_init_params p = {ggml_tensor_overhead() * (max_tensors + 64), nullptr, true};
    pending_ctx_ = ggml_init(p);
    if (!pending_ctx_) fail(kExitInternal, "cannot allocate a ggml context");
}

ggml_tensor* WeightPool::get(const std::string& key, ggml_type type, const int64_t ne[4], bool* fresh) {
    *fresh = false;
    auto it = published_.find(key);
    if (it != published_.end()) return it->second;
    it = pending_.find(key);
    if (it != pending_.end()) return it->second;  // uploaded by the first reader in this graph
    if (!pending_ctx_ || ggml_used_mem(pending_ctx_) + 8 * ggml_tensor_overhead() > ggml_get_mem_size(pending_ctx_))
        throw Builder::ContextFull{};
    ggml_tensor* t = ggml_new_tensor(pending_ctx_, type, 4, ne);
    std::string name = "s" + std::to_string(published_.size() + pending_.size());
    ggml_set_name(t, name.c_str());
    pending_[key] = t;
    *fresh = true;
    return t;
}

uint64_t WeightPool::pending_bytes() const {
    uint64_t n = 0;
    for (auto& kv : pending_) n += ggml_nbytes(kv.second);
    return n;
}

// A weight buffer in host memory is asked for transparent huge pages (2 MB): filling gigabytes of
// weights then takes one page fault per 2 MB instead of per 4 KB (the first run of the SD 1.5 UNet
// spent a fifth of its time in page faults), and the kernels reading them miss the TLB less. Advice
// only: without THP (or with "never") nothing changes.
static void advise_huge_pages(ggml_backend_buffer_t buf) {
#ifdef MADV_HUGEPAGE
    if (!buf || !ggml_backend_buffer_is_host(buf)) return;
    const uintptr_t huge = uintptr_t(2) << 20;
    const uintptr_t b = reinterpret_cast<uintptr_t>(ggml_backend_buffer_get_base(buf));
    const uintptr_t first = (b + huge - 1) / huge * huge, last = (b + ggml_backend_buffer_get_size(buf)) / huge * huge;
    if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
#else
    (void)buf;
#endif
}

void WeightPool::alloc(const o2g_runtime::WeightPlacement& place) {
    if (pending_.empty()) return;
    if (buft_ && place.bufts[0] != buft_) internal_error("shared weights on two buffer types");
    buft_ = place.bufts[0];
    size_t n = pending_bufs_.size();
    if (!o2g_runtime::alloc_weights(pending_ctx_, place, pending_bufs_))
        fail(kExitInternal, "cannot allocate the shared weight buffer");
    for (size_t i = n; i < pending_bufs_.size(); ++i) advise_huge_pages(pending_bufs_[i]);
}

void WeightPool::publish() {
    if (pending_.empty() || pending_bufs_.empty()) return drop_pending();
    for (auto b : pending_bufs_) bytes_ += ggml_backend_buffer_get_size(b);
    held_.set(bytes_);
    published_.insert(pending_.begin(), pending_.end());
    bufs_.insert(bufs_.end(), pending_bufs_.begin(), pending_bufs_.end());
    ctxs_.push_back(pending_ctx_);
    pending_bufs_.clear();
    pending_ctx_ = nullptr;
    pending_.clear();
}

void Session::init(const SessionOptions& opts) {
    Graph& g = g_;
    keep_values_ = opts.keep_values;
    bg_ = build_graph(g, false, opts.weights, opts.pool, opts.keep_values, opts.no_inplace);
    for (size_t k = 0; k < g.outputs.size(); ++k)  // kept before release_host_constants drops initializers
        if (!bg_->b->outputs[k] && g.values[g.outputs[k]].constant) host_outs_[k] = *g.values[g.outputs[k]].constant;
    threads_ = opts.threads;
    // the device, or one per RPC server (--backend rpc:...), and ggml's CPU backend for the nodes they cannot run
    std::vector<ggml_backend_t> devs = init_backends(opts.backend, opts.threads);
    backend_ = devs[0];
    more_.assign(devs.begin() + 1, devs.end());
    bool is_cpu = ggml_backend_dev_type(ggml_backend_get_device(backend_)) == GGML_BACKEND_DEVICE_TYPE_CPU;
    if (!is_cpu) cpu_ = init_backend("cpu", opts.threads);
    // weights: uploaded once, where o2g_runtime::place_weights puts them; the host copies are dropped.
    // (The checks count what the process holds already: other sessions, the shared weights uploaded.)
    size_t wbytes = 0;
    for (auto& w : bg_->b->weights) wbytes += ggml_nbytes(w.t);
    check_memory(wbytes, g.path + ": the weights");
    if (!bg_->b->weights.empty()) {
        // on the device(s); cut into runs of layers over several; in host memory where a reader of one cannot run
        // on its device (o2g_runtime::place_weights)
        o2g_runtime::WeightPlacement place = o2g_runtime::place_weights(devs, cpu_, bg_->gf);
        if (opts.pool) opts.pool->alloc(place);
        if (!o2g_runtime::alloc_weights(bg_->wctx, place, wbufs_))
            fail(kExitInternal, "cannot allocate the weight buffer on " + backend_name());
        for (auto b : wbufs_) advise_huge_pages(b);
        // one weight at a time: its stored form is made, uploaded and dropped; with
        // release_host_constants the graph's own copy goes too, so a file mapping is unmapped
        if (opts.release_host_constants)
            for (auto& v : g.values)
                if (v.is_initializer) v.constant.reset();
        Progress bar("uploading weights", bg_->b->weights.size());
        std::vector<Weight>& ws = bg_->b->weights;
        // a weight whose bytes come from a GGUF (--gguf) never reads its initializer: dropped before any upload, so
        // the initializers go at once rather than one by one behind the uploads (CLIP from a GGUF on one thread
        // peaked at its first weight with every initializer, its GGUF copy and its buffer pages held)
        for (Weight& w : ws)
            if (w.gguf) w.host = Tensor();
        auto upload = [](Weight& w) {
            if (w.host.buf) w.host.buf->prefetch();
            if (ggml_backend_buffer_is_host(w.t->buffer)) {  // made in place: no intermediate copy
                w.write(w.t->data);
            } else {
                Tensor d = w.data();
                ggml_backend_tensor_set(w.t, d.data(), 0, ggml_nbytes(w.t));
            }
            // uploaded: the pages of its source mapped from an external data file go back to the
            // kernel now (a later specialization re-reads them), so the process never holds the
            // mapped and the uploaded weights at once
            if (w.host.buf) w.host.buf->release_pages();
            w.host = Tensor();
        };
        // Into host memory the weights are made by several threads, each its own weights (copies,
        // transposes, f16 conversion and the first touch of fresh pages are bound by one core's memory
        // traffic: the SD UNet's 3.3 GB took 11 s on one), also into the CPU's repacking buffers
        // (o2g_runtime::place_cpu_extra: CPU work per tensor); a device's uploads stay on this thread.
        ggml_backend_dev_t cpu_dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
        bool host = std::all_of(ws.begin(), ws.end(), [cpu_dev](const Weight& w) {
            return ggml_backend_buffer_is_host(w.t->buffer) ||
                   (cpu_dev && ggml_backend_dev_supports_buft(cpu_dev, ggml_backend_buffer_get_type(w.t->buffer)));
        });
        int nt = host ? std::clamp(opts.threads > 0 ? opts.threads : o2g_runtime::usable_cores(), 1, 8) : 1;
        std::atomic<size_t> next{0}, done{0};
        std::exception_ptr err;
        std::mutex err_m;
        auto work = [&](bool main) {
            try {
                for (size_t i; (i = next++) < ws.size();) {
                    upload(ws[i]);
                    size_t d = ++done;
                    if (main) bar.update(d);
                }
            } catch (...) {
                std::lock_guard<std::mutex> l(err_m);
                if (!err) err = std::current_exception();
                next = ws.size();
            }
        };
        std::vector<std::thread> helpers;
        for (int t = 1; t < nt; ++t) helpers.emplace_back(work, false);
        work(true);
        for (std::thread& t : helpers) t.join();
        if (err) std::rethrow_exception(err);
    }
    if (opts.pool) {  // the pool's new weights are held by the pool from here on
        wbytes -= std::min<size_t>(wbytes, opts.pool->pending_bytes());
        opts.pool->publish();
    }
    if (ggml_graph_n_nodes(bg_->gf) == 0) {  // nothing to compute: every output is empty
        held_.set(buffer_bytes());
        return;
    }
    std::vector<ggml_backend_t> backends = devs;
    if (cpu_) backends.push_back(cpu_);
    sched_ = ggml_backend_sched_new(backends.data(), nullptr, int(backends.size()), bg_->graph_size, false, true);
    // the largest single tensor is a lower bound of the compute memory: check it before reserving
    size_t largest = 0;
    for (int i = 0; i < ggml_graph_n_nodes(bg_->gf); ++i) {
        ggml_tensor* t = ggml_graph_node(bg_->gf, i);
        if (!t->view_src) largest = std::max(largest, ggml_nbytes(t));
    }
    check_memory(wbytes + largest, g.path + ": the weights and the largest intermediate tensor");
    // ggml_backend_sched_reserve splits the graph it is given, and splitting points every node that reads a
    // tensor held by another backend at the copy made for it (node->src); a second split of that graph (the
    // alloc_graph below) would then take the copies for tensors of the node's own backend and never fill them
    // (seen with Vulkan: graph inputs and host-kernel outputs read as stale device memory). The sources are
    // put back after the reserve, so alloc_graph splits the graph as it was built. (By node, not by index: a
    // backend may reorder the nodes of its splits, as ggml-vulkan's graph_optimize does.)
    std::vector<std::pair<ggml_tensor*, std::array<ggml_tensor*, GGML_MAX_SRC>>> srcs;
    for (int i = 0; i < ggml_graph_n_nodes(bg_->gf); ++i) {
        ggml_tensor* t = ggml_graph_node(bg_->gf, i);
        srcs.emplace_back(t, std::array<ggml_tensor*, GGML_MAX_SRC>{});
        std::copy_n(t->src, GGML_MAX_SRC, srcs.back().second.begin());
    }
    bool reserved = ggml_backend_sched_reserve(sched_, bg_->gf);
    for (auto& [t, s] : srcs) std::copy_n(s.begin(), GGML_MAX_SRC, t->src);
    if (!reserved) bad_input(g.path + ": cannot allocate the compute buffers (out of memory)");
    size_t cbytes = 0;
    for (ggml_backend_t be : backends) cbytes += ggml_backend_sched_get_buffer_size(sched_, be);
    check_memory(wbytes + cbytes, g.path + ": the weights and compute buffers");
#ifdef O2G_USE_ONEDNN
    o2g_onednn::set_compute_bytes(backend_, sched_);
    if (opts.pool) {
        WeightPool* pool = opts.pool;
        o2g_onednn::set_shared_kernels(backend_, pool->backend_state,
                                       [pool](ggml_backend_buffer_t b) { return pool->owns(b); });
    }
#endif
    if (!ggml_backend_sched_alloc_graph(sched_, bg_->gf)) fail(kExitInternal, "cannot allocate the compute graph");
    held_.set(buffer_bytes());
}

struct Session::Prof {
    ggml_backend_sched_t sched = nullptr;
    std::chrono::steady_clock::time_point t0;
    std::map<std::pair<std::string, std::string>, ProfileRow> rows;
    std::map<const ggml_tensor*, bool> seen;
    std::map<const ggml_tensor*, ProfileNode> nodes;
    static bool eval(ggml_tensor* t, bool ask, void* user) {
        Prof& p = *static_cast<Prof*>(user);
        if (ask) {  // every node is computed alone: time it from here to its answer
            p.t0 = std::chrono::steady_clock::now();
            return true;
        }
        double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - p.t0).count();
        ggml_backend_t be = ggml_backend_sched_get_tensor_backend(p.sched, t);
        std::string op = ggml_op_desc(t), bn = be ? ggml_backend_name(be) : "?";
        ProfileRow& r = p.rows[{op, bn}];
        r.op = op;
        r.backend = bn;
        if (!p.seen[t]) r.nodes++, p.seen[t] = true;
        r.ms += ms;
        ProfileNode& n = p.nodes[t];
        if (n.op.empty()) n = ProfileNode{t->name, op, bn, 0};
        n.ms += ms;
        return true;
    }
};

void Session::set_profile(bool on) {
    if (!sched_) return;  // nothing is computed
    if (on) {
        prof_ = std::make_unique<Prof>();
        prof_->sched = sched_;
        ggml_backend_sched_set_eval_callback(sched_, &Prof::eval, prof_.get());
    } else {
        ggml_backend_sched_set_eval_callback(sched_, nullptr, nullptr);
        prof_.reset();
    }
}

// the rows of a profile map, largest time first
template <class Map>
static std::vector<typename Map::mapped_type> by_time(const Map& m) {
    std::vector<typename Map::mapped_type> r;
    for (auto& kv : m) r.push_back(kv.second);
    std::sort(r.begin(), r.end(), [](const auto& a, const auto& b) { return a.ms > b.ms; });
    return r;
}

std::vector<ProfileRow> Session::profile() const { return prof_ ? by_time(prof_->rows) : std::vector<ProfileRow>{}; }

std::vector<ProfileNode> Session::profile_nodes() const {
    return prof_ ? by_time(prof_->nodes) : std::vector<ProfileNode>{};
}

SchedStats Session::sched_stats() const {
    SchedStats st;
    if (!sched_) return st;
    st.splits = ggml_backend_sched_get_n_splits(sched_);
    // the scheduler gives a node a copy of each input it cannot read where it is, named
    // "<backend>#<tensor>#<copy>", in place of that input
    std::map<const ggml_tensor*, bool> copies;
    for (int i = 0; i < ggml_graph_n_nodes(bg_->gf); ++i) {
        ggml_tensor* t = ggml_graph_node(bg_->gf, i);
        ggml_backend_t be = ggml_backend_sched_get_tensor_backend(sched_, t);
        std::string bn = be ? ggml_backend_name(be) : "?";
        st.nodes[bn]++;
        bool view = t->op == GGML_OP_NONE || t->op == GGML_OP_RESHAPE || t->op == GGML_OP_VIEW ||
                    t->op == GGML_OP_PERMUTE || t->op == GGML_OP_TRANSPOSE;
        if (!view) {
            std::string where = t->op == GGML_OP_CUSTOM ? "host" : bn;
            st.ops[{where, ggml_op_desc(t)}]++;
            if (be != backend_ && std::find(more_.begin(), more_.end(), be) == more_.end())
                st.fallback.push_back({t->name, ggml_op_desc(t), where});
        }
        for (ggml_tensor* s : t->src)
            if (s && std::strncmp(s->name, (bn + "#").c_str(), bn.size() + 1) == 0 && !copies[s]) {
                copies[s] = true;
                st.copies++;
                st.copy_bytes += ggml_nbytes(s);
            }
    }
    return st;
}

std::string Session::node_ops(int node) const {
    const auto& ops = bg_->b->node_ops;
    return size_t(node) < ops.size() ? ops[size_t(node)] : "";
}

std::string Session::tensor_backend(const ggml_tensor* t) const {
    if (!t) return "";
    const ggml_tensor* base = t->view_src ? t->view_src : t;
    if (base->op == GGML_OP_CUSTOM) return "host";  // a host kernel (lower/host_kernel.h)
    if (base->op == GGML_OP_NONE || !sched_) return "";
    ggml_backend_t be = ggml_backend_sched_get_tensor_backend(sched_, const_cast<ggml_tensor*>(base));
    return be ? ggml_backend_name(be) : "";
}

std::string Session::value_backend(int id) const {
    const auto& vals = bg_->b->values;
    return size_t(id) < vals.size() ? tensor_backend(vals[size_t(id)]) : "";
}

// whether a node after `t` in the graph writes into t's memory (an in-place op on it or on a view of it)
static bool overwritten_later(const ggml_cgraph* gf, const ggml_tensor* t) {
    ggml_cgraph* g = const_cast<ggml_cgraph*>(gf);
    const ggml_tensor* base = t->view_src ? t->view_src : t;
    bool after = t->op == GGML_OP_NONE;  // an input or weight: every node comes after it
    for (int i = 0; i < ggml_graph_n_nodes(g); ++i) {
        const ggml_tensor* n = ggml_graph_node(g, i);
        if (n == t) {
            after = true;
            continue;
        }
        bool view =
            n->op == GGML_OP_VIEW || n->op == GGML_OP_RESHAPE || n->op == GGML_OP_PERMUTE || n->op == GGML_OP_TRANSPOSE;
        if (after && n->view_src == base && !view) return true;
    }
    return false;
}

std::optional<Tensor> Session::value(int id, std::string* why) const {
    const auto& vals = bg_->b->values;
    const Value& v = g_.values[size_t(id)];
    ggml_tensor* t = size_t(id) < vals.size() ? vals[size_t(id)] : nullptr;
    auto none = [&](const std::string& w) -> std::optional<Tensor> {
        if (why) *why = w;
        return std::nullopt;
    };
    if (!keep_values_) return none("the session does not keep values (SessionOptions::keep_values)");
    if (!t) return none(v.constant ? "folded on the host" : "no ggml tensor (fused away)");
    if (!t->buffer) return none("not computed");
    if (overwritten_later(bg_->gf, t)) return none("overwritten in place by a later node");
    if (ggml_nelements(t) != shape_numel(v.shape)) return none("held in another shape");
    if (ggml_blck_size(t->type) != 1) return none(std::string("held as ") + ggml_type_name(t->type));
    const size_t es = ggml_type_size(t->type);
    std::vector<uint8_t> raw(ggml_nbytes(t)), packed(size_t(ggml_nelements(t)) * es);
    ggml_backend_tensor_get(t, raw.data(), 0, raw.size());
    uint8_t* q = packed.data();  // ONNX's row-major order is ggml's ne[3], ne[2], ne[1], ne[0]
    for (int64_t i3 = 0; i3 < t->ne[3]; ++i3)
        for (int64_t i2 = 0; i2 < t->ne[2]; ++i2)
            for (int64_t i1 = 0; i1 < t->ne[1]; ++i1)
                for (int64_t i0 = 0; i0 < t->ne[0]; ++i0, q += es)
                    std::memcpy(q, raw.data() + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3], es);
    Tensor r = from_storage(packed.data(), t->type, v.dtype, v.shape);
    return r;
}

Session::~Session() { release(); }

void Session::release() {
    held_.set(0);
    if (sched_) ggml_backend_sched_free(sched_);
    for (auto b : wbufs_) ggml_backend_buffer_free(b);
    bg_.reset();
    if (cpu_) ggml_backend_free(cpu_);
    if (backend_) ggml_backend_free(backend_);
    for (ggml_backend_t b : more_) ggml_backend_free(b);
    more_.clear();
    sched_ = nullptr;
    wbufs_.clear();
    cpu_ = backend_ = nullptr;
}

std::string Session::backend_name() const { return ggml_backend_name(backend_); }

size_t Session::weight_bytes() const {
    size_t n = 0;
    for (auto b : wbufs_) n += ggml_backend_buffer_get_size(b);
    return n;
}

size_t Session::buffer_bytes() const {
    size_t n = weight_bytes();
    std::vector<ggml_backend_t> all = more_;
    all.push_back(backend_);
    if (cpu_) all.push_back(cpu_);
    for (ggml_backend_t be : all)
        if (be && sched_) n += ggml_backend_sched_get_buffer_size(sched_, be);
    return n;
}

std::vector<Tensor> Session::run(const std::vector<Tensor>& inputs) {
    if (inputs.size() != g_.inputs.size())
        bad_input(g_.path + ": expected " + std::to_string(g_.inputs.size()) + " inputs, got " +
                  std::to_string(inputs.size()));
    for (size_t k = 0; k < inputs.size(); ++k) {
        const Value& v = g_.values[g_.inputs[k]];
        const Tensor& t = inputs[k];
        if (t.shape != v.shape)
            bad_input(g_.path + ": input '" + v.name + "' has shape " + shape_str(t.shape) + ", the model expects " +
                      shape_str(v.shape));
        ggml_tensor* gt = bg_->b->inputs[k];
        if (!gt || !gt->buffer) continue;  // the graph only uses the input's shape
        if (gt->type == GGML_TYPE_F32) {
            if (t.dtype != v.dtype)
                bad_input(g_.path + ": input '" + v.name + "' has dtype " + dtype_name(t.dtype) +
                          ", the model expects " + dtype_name(v.dtype));
            Tensor f = t.cast(DType::F32);  // bool inputs are 0/1 floats on the device
            ggml_backend_tensor_set(gt, f.data(), 0, ggml_nbytes(gt));
        } else if (gt->type != GGML_TYPE_I32) {  // held bit for bit, for host kernels
            if (t.dtype != v.dtype)
                bad_input(g_.path + ": input '" + v.name + "' has dtype " + dtype_name(t.dtype) +
                          ", the model expects " + dtype_name(v.dtype));
            ggml_backend_tensor_set(gt, t.data(), 0, ggml_nbytes(gt));
        } else {
            if (dtype_is_float(t.dtype) || t.dtype == DType::Bool)
                bad_input(g_.path + ": input '" + v.name + "' has dtype " + dtype_name(t.dtype) +
                          ", the model expects " + dtype_name(v.dtype));
            Tensor i32 = Tensor::zeros(DType::I32, t.shape);
            int64_t bound = bg_->b->index_bound[k];
            for (int64_t i = 0; i < t.numel(); ++i) {
                int64_t x = t.geti(i);
                if (bound > 0) {
                    if (x < -bound || x >= bound)
                        bad_input(g_.path + ": input '" + v.name + "' holds index " + std::to_string(x) +
                                  ", out of range [" + std::to_string(-bound) + ", " + std::to_string(bound) + ")");
                    if (x < 0) x += bound;
                }
                if (x < INT32_MIN || x > INT32_MAX)
                    bad_input(g_.path + ": input '" + v.name + "' holds " + std::to_string(x) +
                              ", outside the int32 range ggml indexes with");
                i32.seti(i, x);
            }
            ggml_backend_tensor_set(gt, i32.data(), 0, ggml_nbytes(gt));
        }
    }
    if (sched_ && threads_ <= 0) o2g_runtime::set_threads_now(backend_, cpu_);  // cores free now
    if (sched_ && ggml_backend_sched_graph_compute(sched_, bg_->gf) != GGML_STATUS_SUCCESS)
        fail(kExitInternal, "graph compute failed");
    int code = 0;  // a host kernel that failed (e.g. an index out of range in the data)
    std::string msg;
    if (take_host_kernel_error(bg_->b->host_kernels, &code, &msg)) fail(code, msg);
    std::vector<Tensor> outs;
    for (size_t k = 0; k < g_.outputs.size(); ++k) {
        const Value& v = g_.values[g_.outputs[k]];
        ggml_tensor* gt = bg_->b->outputs[k];
        if (!gt) {  // nothing computed: an empty output or a folded string tensor
            auto h = host_outs_.find(k);
            outs.push_back(h != host_outs_.end() ? h->second : Tensor::zeros(v.dtype, v.shape));
            continue;
        }
        if (gt->type == GGML_TYPE_F32) {
            Tensor t = Tensor::zeros(DType::F32, v.shape);
            ggml_backend_tensor_get(gt, t.data(), 0, ggml_nbytes(gt));
            outs.push_back(v.dtype == DType::F32 ? t : t.cast(v.dtype));
        } else {
            std::vector<uint8_t> bytes(ggml_nbytes(gt));
            ggml_backend_tensor_get(gt, bytes.data(), 0, bytes.size());
            outs.push_back(from_storage(bytes.data(), gt->type, v.dtype, v.shape));
        }
    }
    return outs;
}

}  // namespace onnx2ggml::core
