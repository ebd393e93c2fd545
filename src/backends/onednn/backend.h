// onnx2ggml's oneDNN backend (o2g_onednn.h): the ggml backend interface: compute, supports_op, the device and its
// registration.
#pragma once
#include "unary.h"

namespace o2g_onednn {

// ---- ggml backend interface ---------------------------------------------------------------

inline const char* name(ggml_backend_t) { return "oneDNN"; }

inline void free_backend(ggml_backend_t be) {
    delete static_cast<Context*>(be->context);
    delete be;
}

inline ggml_status compute_nodes(Context& c, ggml_cgraph* g);

inline ggml_status graph_compute(ggml_backend_t be, ggml_cgraph* g) {
    Context& c = *static_cast<Context*>(be->context);
    if (c.n_threads > 0) omp_set_num_threads(c.n_threads);
    try {  // a oneDNN error (e.g. a primitive it cannot create) fails the compute, never unwinds through ggml
        return compute_nodes(c, g);
    } catch (const std::exception& e) {
        fprintf(stderr, "oneDNN backend: %s\n", e.what());
        return GGML_STATUS_FAILED;
    }
}

// Ops that compute nothing (a view of their source): taken by the backend (no split around them), skipped.
inline bool is_view_op(ggml_op op) {
    return op == GGML_OP_NONE || op == GGML_OP_RESHAPE || op == GGML_OP_VIEW || op == GGML_OP_PERMUTE ||
           op == GGML_OP_TRANSPOSE;
}

// A node's work: the multiply-adds of a convolution or matrix product (`product`), else the elements it moves;
// what decides whether the node is worth the threads (threads_for).
struct NodeWork {
    int64_t n;
    bool product;
};
inline NodeWork node_work(const ggml_tensor* n) {
    switch (n->op) {
        case GGML_OP_CONV_2D:
        case GGML_OP_CONV_2D_DW:
        case GGML_OP_CONT: {
            if (n->op == GGML_OP_CONT && n->op_params[o2g::kGroupedConv] <= 1) break;
            const ggml_tensor* k = n->op == GGML_OP_CONT ? n->src[3] : n->src[0];  // [KW, KH, IC / groups, OC]
            return {ggml_nelements(n) * k->ne[0] * k->ne[1] * (n->op == GGML_OP_CONV_2D_DW ? 1 : k->ne[2]), true};
        }
        case GGML_OP_MUL_MAT: return {ggml_nelements(n) * n->src[0]->ne[0], true};
        default: break;
    }
    return {ggml_nelements(n), false};
}

// The OpenMP threads a node runs on: all of them, or the calling thread alone when the node is too small to gain
// from more: below 512K multiply-adds or 16K elements a parallel region's wake-up and barrier cost more than the
// second thread saves (measured on the zoo's small CNNs, 2 threads: shufflenet_v2_x0_5 1.53 -> 1.28 ms,
// mobilenet_v3_small 1.30 -> 1.16 ms; squeezenet, efficientnet_b0, mnasnet, regnet, googlenet, resnet18 within
// noise). A primitive is created on the thread count it then runs on: the same node shape always
// gets the same count, so the cached primitives stay consistent.
inline int threads_for(const ggml_tensor* n, int all) {
    NodeWork w = node_work(n);
    return w.n < (w.product ? int64_t(1) << 19 : int64_t(1) << 14) ? 1 : all;
}

// Sets the OpenMP thread count for the nodes computed next, and restores the graph's on leaving.
struct NodeThreads {
    int all = omp_get_max_threads(), cur = all;
    void set(int n) {
        if (n != cur) omp_set_num_threads(cur = n);
    }
    ~NodeThreads() { set(all); }
};

// The graph as compute_nodes walks it: node i is being computed; a fused pattern takes the in-place nodes after
// it (take), and i moves past them.
struct Walk {
    Context& c;
    ggml_cgraph* g;
    int n_nodes, i;
    int next(int j) const {  // the next node that computes something (reshapes and views do not)
        while (j < n_nodes && is_view_op(ggml_graph_node(g, j)->op)) ++j;
        return j;
    }
    // the node after node i (views skipped) when `fits` holds for it: i moves to it; else nullptr (i stays)
    template <class F>
    const ggml_tensor* take(F fits) {
        int j = next(i + 1);
        if (j >= n_nodes || !fits(ggml_graph_node(g, j))) return nullptr;
        i = j;
        return ggml_graph_node(g, j);
    }
    // the per-channel bias add and the activation in place on n's output that follow node i (i moves past them)
    const ggml_tensor* bias_after(const ggml_tensor* n) {
        const ggml_tensor* b = take([n](const ggml_tensor* m) { return is_conv_bias(m) && m->src[0] == n; });
        return b ? b->src[1] : nullptr;
    }
    Activation activation_after(const ggml_tensor* n) {
        return activation_of(take([n](const ggml_tensor* m) { return is_conv_activation(m) && m->view_src == n; }));
    }
    // a convolution (conv_like) at node i: the bias add, residual sum and activation that follow are in
    // place (same memory): one primitive; i moves to the last of them. When the next node copies that output into
    // its slot of a Concat that is its only reader (o2g::conv_into_slot), the convolution writes into the slot and
    // the copy is skipped.
    void convolution(ggml_tensor* n) {
        const ggml_tensor* bias = bias_after(n);
        const ggml_tensor* r = take([n](const ggml_tensor* m) { return is_conv_residual(m) && m->view_src == n; });
        Activation act = activation_after(n);
        void* out = n->data;
        if (!padded_private(n))
            if (const ggml_tensor* s = take([n](const ggml_tensor* m) { return is_slot_of(m, n); }))
                out = static_cast<char*>(s->data) + s->op_params[3];
        conv2d(c, n, bias, r ? r->src[1] : nullptr, act, out);
    }
    // a GROUP_NORM: its affine (MUL, then ADD) and SiLU in place after it, one pass
    void group_norm(ggml_tensor* n) {
        const ggml_tensor* fused[2] = {nullptr, nullptr};  // gamma, beta
        for (int k = 0; k < 2; ++k) {
            const ggml_tensor* m = take([n, k](const ggml_tensor* t) {
                return t->op == (k == 0 ? GGML_OP_MUL : GGML_OP_ADD) && is_norm_affine(t) && t->view_src == n;
            });
            if (m) fused[k] = m->src[1];
        }
        bool act = take([n](const ggml_tensor* m) { return is_norm_silu(m) && m->view_src == n; });
        o2g_onednn::group_norm(c, n, fused[0], fused[1], act);
    }
};

// The ops this backend takes, one row per ggml op: which of its nodes (supports: dev_supports_op) and how one is
// computed, with the in-place nodes a fused pattern takes after it (compute: compute_nodes). A node of another op,
// or one `supports` refuses, runs on ggml's CPU backend (the scheduler's fallback).
struct OpEntry {
    ggml_op op;
    bool (*supports)(const ggml_tensor*);
    void (*compute)(Walk&, ggml_tensor*);
};
inline bool supports_add(const ggml_tensor* op) {
    return is_conv_bias(op) || is_conv_residual(op) || is_norm_affine(op) || is_binary(op);
}
inline bool supports_mul(const ggml_tensor* op) {
    return is_norm_affine(op) || is_channel_product(op) || is_binary(op);
}
inline bool supports_unary(const ggml_tensor* op) {
    return is_conv_activation(op) || is_norm_silu(op) || is_eltwise(op);
}
inline bool supports_clamp(const ggml_tensor* op) { return is_conv_activation(op) || is_eltwise(op); }
inline bool supports_cont(const ggml_tensor* op) { return grouped_supported(op) || is_copy(op); }
inline void compute_convolution(Walk& w, ggml_tensor* n) { w.convolution(n); }
inline void compute_binary(Walk&, ggml_tensor* n) { binary(n); }
inline void compute_eltwise(Walk& w, ggml_tensor* n) { eltwise(w.c, n); }
// (a convolution's output may be in private_layout: activation() reads it so)
inline void compute_activation(Walk& w, ggml_tensor* n) {
    is_conv_activation(n) ? activation(w.c, n) : eltwise(w.c, n);
}

inline const OpEntry* op_entry(ggml_op op) {
    static const OpEntry table[] = {
        {GGML_OP_CONV_2D, conv_supported, compute_convolution},
        {GGML_OP_CONV_2D_DW, conv_supported, compute_convolution},
        {GGML_OP_GROUP_NORM, norm_supported, [](Walk& w, ggml_tensor* n) { w.group_norm(n); }},
        {GGML_OP_MUL, supports_mul,
         [](Walk& w, ggml_tensor* n) {
             if (is_norm_affine(n)) channel_op(n);
             else if (!is_channel_product(n)) binary(n);
             else {  // its per-channel bias and activation in place after it: one pass
                 const ggml_tensor* bias = w.bias_after(n);
                 channel_product(w.c, n, bias, w.activation_after(n));
             }
         }},
        {GGML_OP_ADD, supports_add,
         [](Walk& w, ggml_tensor* n) {
             is_conv_residual(n) ? add_residual(w.c, n)
             : is_norm_affine(n) ? channel_op(n)
             : is_conv_bias(n)   ? add_bias(w.c, n)
                                 : binary(n);
         }},
        {GGML_OP_SUB, is_binary, compute_binary},
        {GGML_OP_DIV, is_binary, compute_binary},
        {GGML_OP_UNARY, supports_unary, compute_activation},
        {GGML_OP_CLAMP, supports_clamp, compute_activation},
        {GGML_OP_SCALE, is_eltwise, compute_eltwise},
        {GGML_OP_SQR, is_eltwise, compute_eltwise},
        {GGML_OP_SQRT, is_eltwise, compute_eltwise},
        {GGML_OP_MUL_MAT, mul_mat_supported,
         [](Walk& w, ggml_tensor* n) {  // (a grouped convolution's product: its CONT computes it)
             if (n->op_params[o2g::kGroupedConv] != 1 || !grouped_output_follows(w.g, w.i, n)) mul_mat(w.c, n);
         }},
        {GGML_OP_IM2COL, im2col_supported,
         [](Walk& w, ggml_tensor* n) {
             if (!grouped_output_follows(w.g, w.i, n)) im2col(n);
         }},
        {GGML_OP_CONT, supports_cont,
         [](Walk& w, ggml_tensor* n) {
             if (is_copy(n)) copy_strided(n);
             else w.convolution(n);  // (grouped_supported)
         }},
        {GGML_OP_SOFT_MAX, softmax_supported, [](Walk& w, ggml_tensor* n) { softmax_rows(w.c, n); }},
        {GGML_OP_NORM, norm_rows_supported, [](Walk& w, ggml_tensor* n) { norm_rows(w.c, n); }},
        {GGML_OP_POOL_2D, pool_supported, [](Walk& w, ggml_tensor* n) { pool2d(w.c, n); }},
        {GGML_OP_UPSCALE, upscale_supported, [](Walk&, ggml_tensor* n) { upscale(n); }},
        {GGML_OP_SET, is_set, [](Walk&, ggml_tensor* n) { set_rows(n); }},
        {GGML_OP_MEAN, is_mean, [](Walk&, ggml_tensor* n) { mean_rows(n); }},
    };
    static const std::vector<const OpEntry*> by_op = [] {
        std::vector<const OpEntry*> v(GGML_OP_COUNT, nullptr);
        for (const OpEntry& e : table) v[e.op] = &e;
        return v;
    }();
    return op >= 0 && op < GGML_OP_COUNT ? by_op[op] : nullptr;
}

inline ggml_status compute_nodes(Context& c, ggml_cgraph* g) {
    NodeThreads threads;
    Walk w{c, g, ggml_graph_n_nodes(g), 0};
    for (; w.i < w.n_nodes; ++w.i) {
        ggml_tensor* n = ggml_graph_node(g, w.i);
        if ((n->flags & GGML_TENSOR_FLAG_COMPUTE) == 0 || is_view_op(n->op)) continue;
        const OpEntry* e = op_entry(n->op);
        if (!e) return GGML_STATUS_FAILED;
        threads.set(threads_for(n, threads.all));
        e->compute(w, n);
    }
    return GGML_STATUS_SUCCESS;
}

inline ggml_guid_t guid() {
    static ggml_guid g = {0x6f, 0x32, 0x67, 0x2d, 0x6f, 0x6e, 0x65, 0x64,
                          0x6e, 0x6e, 0x2d, 0x62, 0x61, 0x63, 0x6b, 0x31};
    return &g;
}

inline void set_n_threads(ggml_backend_t be, int n) { static_cast<Context*>(be->context)->n_threads = n; }

// Called once the scheduler has allocated the compute buffers: Winograd convolutions may then take
// transform buffers (one shared scratchpad) of up to half the compute buffers' size or 32 MB,
// whichever is larger, so the peak memory grows by at most half the activations' (small models: a
// fixed 32 MB, which buys resnet50's 28x28 convolutions oneDNN's F(4x4,3x3), 3x faster than direct).
// No-op when `be` is not this backend.
inline void set_compute_bytes(ggml_backend_t be, ggml_backend_sched_t sched) {
    if (!be || !ggml_guid_matches(ggml_backend_guid(be), guid())) return;
    size_t total = 0;
    for (int i = 0; i < ggml_backend_sched_get_n_backends(sched); ++i)
        total += ggml_backend_sched_get_buffer_size(sched, ggml_backend_sched_get_backend(sched, i));
    static_cast<Context*>(be->context)->wino_budget = std::max(total / 2, size_t(32) << 20);
}

// The kernels of the weights in the buffers `owns` accepts are reordered once for every backend given the
// same `slot` (made here when empty; it must live as long as those buffers). No-op when `be` is not this
// backend.
inline void set_shared_kernels(ggml_backend_t be, std::shared_ptr<void>& slot,
                               std::function<bool(ggml_backend_buffer_t)> owns) {
    if (!be || !ggml_guid_matches(ggml_backend_guid(be), guid())) return;
    if (!slot) {
        auto sk = std::make_shared<SharedKernels>();
        sk->owns = std::move(owns);
        slot = sk;
    }
    static_cast<Context*>(be->context)->shared = std::static_pointer_cast<SharedKernels>(slot);
}

inline ggml_backend_t init(ggml_backend_dev_t dev, const char*) {
    static const ggml_backend_i iface = {
        /* .get_name = */ name,
        /* .free = */ free_backend,
        /* .set_tensor_async = */ nullptr,
        /* .get_tensor_async = */ nullptr,
        /* .set_tensor_2d_async = */ nullptr,
        /* .get_tensor_2d_async = */ nullptr,
        /* .cpy_tensor_async = */ nullptr,
        /* .synchronize = */ nullptr,
        /* .graph_plan_create = */ nullptr,
        /* .graph_plan_free = */ nullptr,
        /* .graph_plan_update = */ nullptr,
        /* .graph_plan_compute = */ nullptr,
        /* .graph_compute = */ graph_compute,
        /* .event_record = */ nullptr,
        /* .event_wait = */ nullptr,
        /* .graph_optimize = */ nullptr,
    };
    return new ggml_backend{guid(), iface, dev, new Context()};
}

inline const char* dev_name(ggml_backend_dev_t) { return "oneDNN"; }
inline const char* dev_description(ggml_backend_dev_t) {
    return "oneDNN CPU convolutions, matmuls and the ops between them (onnx2ggml)";
}
inline void dev_memory(ggml_backend_dev_t, size_t* free, size_t* total) { *free = *total = 0; }
inline enum ggml_backend_dev_type dev_type(ggml_backend_dev_t) { return GGML_BACKEND_DEVICE_TYPE_ACCEL; }
inline void dev_props(ggml_backend_dev_t d, ggml_backend_dev_props* p) {
    p->name = dev_name(d);
    p->description = dev_description(d);
    p->type = dev_type(d);
    dev_memory(d, &p->memory_free, &p->memory_total);
    p->caps = {false, false, true, false, true};
}
inline ggml_backend_buffer_type_t dev_buft(ggml_backend_dev_t) { return ggml_backend_cpu_buffer_type(); }
inline ggml_backend_buffer_t dev_from_ptr(ggml_backend_dev_t, void* ptr, size_t size, size_t) {
    return ggml_backend_cpu_buffer_from_ptr(ptr, size);
}
inline bool dev_supports_op(ggml_backend_dev_t, const ggml_tensor* op) {
    if (is_view_op(op->op)) return true;
    const OpEntry* e = op_entry(op->op);
    return e && e->supports(op);
}
inline bool dev_supports_buft(ggml_backend_dev_t, ggml_backend_buffer_type_t b) { return ggml_backend_buft_is_host(b); }

inline const char* reg_name(ggml_backend_reg_t) { return "oneDNN"; }
inline size_t reg_count(ggml_backend_reg_t) { return 1; }
inline ggml_backend_dev_t reg_device(ggml_backend_reg_t r, size_t) {
    static const ggml_backend_device_i iface = {
        /* .get_name = */ dev_name,
        /* .get_description = */ dev_description,
        /* .get_memory = */ dev_memory,
        /* .get_type = */ dev_type,
        /* .get_props = */ dev_props,
        /* .init_backend = */ init,
        /* .get_buffer_type = */ dev_buft,
        /* .get_host_buffer_type = */ nullptr,
        /* .buffer_from_host_ptr = */ dev_from_ptr,
        /* .supports_op = */ dev_supports_op,
        /* .supports_buft = */ dev_supports_buft,
        /* .offload_op = */ nullptr,
        /* .event_new = */ nullptr,
        /* .event_free = */ nullptr,
        /* .event_synchronize = */ nullptr,
    };
    static ggml_backend_device dev = {iface, r, nullptr};
    return &dev;
}
inline void* reg_proc(ggml_backend_reg_t, const char* n) {
    return std::strcmp(n, "ggml_backend_set_n_threads") == 0 ? reinterpret_cast<void*>(set_n_threads) : nullptr;
}

inline ggml_backend_reg_t reg() {
    static const ggml_backend_reg_i iface = {reg_name, reg_count, reg_device, reg_proc};
    static ggml_backend_reg r = {GGML_BACKEND_API_VERSION, iface, nullptr};
    return &r;
}

// Adds the oneDNN device to ggml's registry (once).
inline void register_backend() {
    static std::once_flag once;
    std::call_once(once, [] { ggml_backend_register(reg()); });
}

}  // namespace o2g_onednn
