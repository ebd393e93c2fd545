// onnx2ggml's oneDNN backend for ggml: the fast CPU path for convolutions, matrix products,
// pooling, GroupNorm, and the light ops between them (broadcast arithmetic, elementwise functions,
// softmax, LayerNorm's normalization, strided copies, Concat's slots, row means) so that a model's graph stays one
// scheduler split (see dev_supports_op; docs/architecture.md tells which and why).
//
// Modelled on ggml's own BLAS backend: a ggml backend over host memory (it shares the CPU
// buffer type, so no tensor is ever copied between it and the CPU backend) that declares in
// supports_op the nodes it takes; ggml_backend_sched sends every other node to ggml's CPU
// backend. It takes GGML_OP_CONV_2D and GGML_OP_CONV_2D_DW (ggml_conv_2d_direct and
// ggml_conv_2d_dw_direct: F32 input and kernel), with the
// in-place per-channel bias ADD that follows it in onnx2ggml's lowering, and runs the pair as one
// oneDNN direct convolution with bias on the tensors in place (NCHW activations and OIHW kernels
// are exactly ggml's [W,H,C,N] and [KW,KH,IC,OC] layouts: no reorder, no second copy of the
// weights; a ReLU/CLAMP written in place on the output becomes the primitive's post-op), and GGML_OP_MUL_MAT as a
// oneDNN matmul reading both operands through their strides. Primitives are created once per convolution shape and
// cached across runs. oneDNN and ggml's CPU backend both run on the OpenMP runtime; set_n_threads sets the OpenMP
// thread count, so the two never fight over the cores.
//
// Header-only: onnx2ggml's runtime includes it, and `compile` writes it next to every generated
// program (built with -DO2G_ONEDNN=ON). Needs ggml's internal ggml-backend-impl.h (ggml/src).
#pragma once
#ifdef O2G_USE_ONEDNN

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <dnnl.hpp>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "ggml-backend-impl.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "o2g_kernels.h"

namespace o2g_onednn {

// Reordered copies of weights that outlive one backend: the kernels of the weights several sessions of
// one model share (the runtime's WeightPool: one per model, whatever its run-time specializations). A
// specialization for a new input shape makes new convolution primitives, whose kernels often take the
// layout an earlier one already reordered to (resnet18: ~100 ms of reorders per new shape otherwise).
// Only tensors in buffers `owns` accepts (the pool's, which live as long as this) are kept here.
struct SharedKernels {
    std::function<bool(ggml_backend_buffer_t)> owns;
    std::mutex m;
    std::map<const void*, std::vector<std::pair<dnnl::memory::desc, dnnl::memory>>> copies;  // by ggml data
};

// The post-op of an activation: {kind (0 none, 1 relu, 2 clip, 3 swish (SiLU), 4 hardswish, 5 logistic
// (sigmoid)), lo, hi}
struct Activation {
    int kind = 0;
    float lo = 0, hi = 0;
};

struct Context {
    dnnl::engine eng{dnnl::engine::kind::cpu, 0};
    dnnl::stream strm{eng};
    int n_threads = 0;
    // shape key -> primitive (created once, reused by every run)
    using Key = std::vector<int64_t>;
    std::map<Key, dnnl::convolution_forward> convs;
    std::map<Key, dnnl::matmul> matmuls;
    // a pooling whose input and output layouts differ (see pool2d): pooled in the input's layout
    // into the arena (`mid`), then reordered into the output's
    struct Pool {
        dnnl::pooling_forward pool;
        dnnl::memory::desc mid;
        dnnl::reorder to_dst;
    };
    std::map<Key, Pool> pools;
    std::map<Key, dnnl::binary> norms;  // GroupNorm's normalize + affine (+ SiLU) pass
    std::map<Key, dnnl::eltwise_forward> eltwises;
    std::map<Key, dnnl::softmax_forward> softmaxes;
    std::map<Key, dnnl::layer_normalization_forward> layer_norms;
    // Convolutions in the layouts oneDNN picks (blocked: also depthwise ones, whose NCHW kernel is a
    // slow reference path), activations reordered in and out unless already there, the kernel once.
    // One primitive per band of output rows: the whole map, or (Winograd on large maps, whose
    // transform buffers grow with the map) bands small enough for the scratchpad budget.
    struct Band {
        int64_t r0, r1, i0, i1;  // output rows [r0, r1), computed from input rows [i0, i1)
        dnnl::convolution_forward conv;
        dnnl::memory::desc src, w, dst, scratch;  // the primitive's layouts, its scratchpad
        bool act_fused;  // the activation is the primitive's post-op (else an eltwise pass after it)
    };
    struct Blocked {
        std::vector<Band> bands;
        dnnl::memory::desc w;       // the kernel's layout (the same for every band)
        bool add_residual = false;  // the residual is a binary post-op's operand (else a sum post-op's)
        std::map<const void*, dnnl::memory> weights;  // reordered kernels, by ggml data pointer
    };
    std::map<Key, Blocked> blocked;
    std::shared_ptr<SharedKernels> shared;  // set_shared_kernels: kernels reordered by other sessions
    // One arena for every convolution's temporaries (they run one at a time): the scratchpad
    // (Winograd's transformed tiles) and the blocked copies of the activations. Grown, never
    // shrunk: allocated once, not per call (large transient allocations fragment the heap and
    // stay resident), and no scratchpad is held per primitive.
    std::vector<char> arena;
    size_t wino_budget = 0;  // largest scratchpad a Winograd convolution may take (set_compute_bytes)
    // A node's work as prepared for its tensors: the primitives it runs in order, with their
    // arguments (dnnl::memory objects on ggml's data, the arena, reordered kernels), and a last
    // elementwise pass y = act(y + r) on n values where the primitive has no post-op for it. Built
    // on the node's first run and replayed while its signature (addresses, shapes, parameters of
    // the node, its inputs and the nodes fused into it) stays the same: ggml recomputes one graph
    // on the same memory, and making the memory objects, argument maps and reorder primitives anew
    // for every node on every run cost ~6% of mobilenet_v2's time.
    struct Step {
        dnnl::primitive prim;
        std::unordered_map<int, dnnl::memory> args;
    };
    struct Plan {
        std::vector<int64_t> sig;
        std::vector<Step> steps;
        Activation act;
        float* y = nullptr;
        const float* r = nullptr;
        int64_t n = 0;
        // before the steps: hn F16 values at h converted to F32 at hf (an F16 kernel, conv_plan)
        const ggml_fp16_t* h = nullptr;
        float* hf = nullptr;
        int64_t hn = 0;
    };
    std::unordered_map<const ggml_tensor*, Plan> plans;
    std::vector<int64_t> sig;  // the signature being checked (its storage reused)
    // where the tensors in a padded private_layout are (larger than ggml's): by ggml's address
    std::unordered_map<const void*, dnnl::memory> shadows;
    // The cached primitives take their scratchpad from here (user_scratchpad): oneDNN's default
    // one is a thread_local buffer of the thread that created the primitive, and a run from another
    // thread (an application's worker calling Session::run) would write through a buffer that
    // thread never allocated. Grown on demand, which drops the plans (their steps point into it).
    std::vector<char> scratch;
    char* scratch_for(size_t bytes) {
        if (scratch.size() < bytes + 64) {
            plans.clear();
            scratch = std::vector<char>();
            scratch.resize(bytes + 64);
        }
        uintptr_t p = reinterpret_cast<uintptr_t>(scratch.data());
        return reinterpret_cast<char*>((p + 63) & ~uintptr_t(63));
    }
    // Some primitives size per-thread buffers from the OpenMP thread count when created: a compute
    // with more threads than any before makes them anew (reordered kernels are kept where shared).
    int prim_threads = 0;
    void fit_primitives(int threads) {
        if (threads <= prim_threads) return;
        if (prim_threads > 0) {
            convs.clear();
            matmuls.clear();
            pools.clear();
            norms.clear();
            eltwises.clear();
            softmaxes.clear();
            layer_norms.clear();
            blocked.clear();
            plans.clear();
        }
        prim_threads = threads;
    }
    char* reserve(size_t bytes) {
        if (arena.size() < bytes) {
            plans.clear();                // their arguments point into the old block
            arena = std::vector<char>();  // the old block goes before the larger one is made
            arena.resize(bytes);
        }
        return arena.data();
    }
};

// The layout a tensor of C channels keeps between convolutions (o2g::conv_chain): oneDNN's
// blocked nChw16c on AVX-512 machines (nChw8c on others), the layout its fastest kernels (Winograd
// among them) take. When C is not a multiple of the block, the channels are padded with zeros to
// one (mobilenet_v2's 24 -> 32: its 24-channel blocks measured 0.44 -> 0.25 ms against NHWC, whose
// convolutions need their blocked inputs reordered), unless that would take over 1.5x the memory
// (C = 8 on AVX-512): NHWC then. A padded tensor is larger than ggml's (private_memory).
inline int64_t channel_block() {
    static const int64_t b =
        (int(dnnl::get_effective_cpu_isa()) & int(dnnl::cpu_isa::avx512_core)) == int(dnnl::cpu_isa::avx512_core) ? 16
                                                                                                                  : 8;
    return b;
}
inline bool private_blocked(int64_t C) {
    return 2 * ((C + channel_block() - 1) / channel_block() * channel_block()) <= 3 * C;
}
inline dnnl::memory::format_tag private_tag(int64_t C) {
    using tag = dnnl::memory::format_tag;
    return !private_blocked(C) ? tag::nhwc : channel_block() == 16 ? tag::nChw16c : tag::nChw8c;
}
inline dnnl::memory::desc private_layout(const dnnl::memory::dims& nchw) {
    return {nchw, dnnl::memory::data_type::f32, private_tag(nchw[1])};
}
// A tensor in private_layout `md` at ggml's address `data`: there when the layout has the tensor's
// size; a padded one in the context's shadow of that address instead, which every reader of the
// tensor (all in this backend: o2g::conv_chain) finds by the same address. ggml's allocator gives
// tensors that live at the same time distinct addresses, so shadows keyed by address are as
// disjoint as ggml's tensors. A shadow is zeroed when made and kept across runs; the padding
// channels stay finite (oneDNN's kernels write 0 there; an activation run alone writes act(0)) and
// never reach the real ones (the reordered kernels' weights for them are 0).
inline dnnl::memory private_memory(Context& c, const dnnl::memory::desc& md, void* data) {
    dnnl::memory::dims d = md.dims();
    size_t bytes = sizeof(float);
    for (auto n : d) bytes *= size_t(n);
    if (md.get_size() <= bytes) return dnnl::memory(md, c.eng, data);
    dnnl::memory& s = c.shadows[data];
    if (!s || s.get_desc().get_size() < md.get_size()) {
        c.plans.clear();  // their arguments may point into the old shadow
        s = dnnl::memory(md, c.eng);
        std::memset(s.get_data_handle(), 0, md.get_size());
    }
    return dnnl::memory(md, c.eng, s.get_data_handle());
}

// CONV_2D (kernel [KW, KH, IC, OC]) and CONV_2D_DW (depthwise, kernel [KW, KH, 1, C]) on NCHW data; an F16
// kernel (--weights f16) is converted to F32 into the arena before each run of its convolution (conv_plan)
inline bool conv_supported(const ggml_tensor* op) {
    const ggml_tensor* k = op->src[0];
    const ggml_tensor* x = op->src[1];
    return (op->op == GGML_OP_CONV_2D || op->op == GGML_OP_CONV_2D_DW) && op->type == GGML_TYPE_F32 &&
           x->type == GGML_TYPE_F32 && (k->type == GGML_TYPE_F32 || k->type == GGML_TYPE_F16) &&
           ggml_is_contiguous(k) && ggml_is_contiguous(x) && ggml_is_contiguous(op);
}

// Grouped convolutions (o2g::grouped_conv): onnx2ggml lowers one to IM2COL -> batched MUL_MAT -> CONT,
// the three marked, with the convolution's x and w inputs of the CONT too: the CONT is computed here
// as one oneDNN grouped convolution from x and w (conv_plan, with its bias, residual and activation
// like any convolution's), and the IM2COL and MUL_MAT are skipped when their CONT is computed here in
// the same graph (else they are computed, for whichever backend runs the CONT).
inline bool grouped_supported(const ggml_tensor* op) {
    const ggml_tensor* x = op->src[1];
    const ggml_tensor* w = op->src[3];
    return op->op == GGML_OP_CONT && op->op_params[o2g::kGroupedConv] > 0 && x && w && op->type == GGML_TYPE_F32 &&
           x->type == GGML_TYPE_F32 && w->type == GGML_TYPE_F32 && ggml_is_contiguous(x) && ggml_is_contiguous(w) &&
           ggml_is_contiguous(op);
}
// the IM2COL of a grouped_supported CONT (its geometry: s0, s1, p0, p1, d0, d1)
inline const ggml_tensor* grouped_im2col(const ggml_tensor* op) { return op->src[0]->view_src->src[1]->view_src; }
// a convolution this backend computes: CONV_2D, CONV_2D_DW, or a grouped one
inline bool conv_like(const ggml_tensor* op) { return conv_supported(op) || grouped_supported(op); }

// MUL of a map [W, H, C, N] by one value per channel (src1 [1, 1, C, N or 1]: a squeeze-excitation block's
// scale, a BatchNormalization's that no convolution precedes): onnx2ggml's channel products (ops/elementwise.cpp,
// ops/norm.cpp). o2g::conv_chain may keep its map or its product in private_layout, and a per-channel bias
// add and an activation in place on it (is_conv_bias, is_conv_activation) run in the same pass (channel_product).
inline bool is_channel_product(const ggml_tensor* op) {
    const ggml_tensor* s = op->src[1];
    return op->op == GGML_OP_MUL && op->type == GGML_TYPE_F32 && op->src[0]->type == GGML_TYPE_F32 && s &&
           s->type == GGML_TYPE_F32 && ggml_are_same_shape(op, op->src[0]) && ggml_is_contiguous(op) &&
           ggml_is_contiguous(op->src[0]) && ggml_is_contiguous(s) && s->ne[0] == 1 && s->ne[1] == 1 &&
           s->ne[2] == op->ne[2] && (s->ne[3] == 1 || s->ne[3] == op->ne[3]) && op->ne[2] > 1;
}
// what the per-channel bias and the activation of is_conv_bias / is_conv_activation are in place on
inline bool in_place_target(const ggml_tensor* op) { return conv_like(op) || is_channel_product(op); }


// Whether node i (n: a marked IM2COL or MUL_MAT) feeds a marked CONT among the next nodes of g
inline bool grouped_output_follows(ggml_cgraph* g, int i, const ggml_tensor* n) {
    int n_nodes = ggml_graph_n_nodes(g);
    for (int j = i + 1; j < n_nodes && j < i + 32; ++j) {
        const ggml_tensor* o = ggml_graph_node(g, j);
        if (o->op != GGML_OP_CONT || !grouped_supported(o)) continue;
        const ggml_tensor* mm = o->src[0]->view_src;
        if (mm && (mm == n || (mm->src[1] && mm->src[1]->view_src == n))) return true;
    }
    return false;
}

// ADD in place on a convolution's output (conv_like) with a per-channel bias [1, 1, OC, 1]: the Conv bias of
// onnx2ggml's lowering, folded into the convolution primitive.
inline bool is_conv_bias(const ggml_tensor* op) {
    const ggml_tensor* conv = op->src[0];
    const ggml_tensor* b = op->src[1];
    return op->op == GGML_OP_ADD && conv && b && op->view_src == conv && in_place_target(conv) &&
           b->type == GGML_TYPE_F32 && ggml_is_contiguous(b) && b->ne[0] == 1 && b->ne[1] == 1 &&
           b->ne[2] == conv->ne[2] && b->ne[3] == 1;
}

// ADD in place on a convolution's output of a tensor of its shape that o2g::conv_residual made the
// convolution's src[2] (the residual connection of a ResNet block): the primitive's sum post-op.
inline bool is_conv_residual(const ggml_tensor* op) {
    const ggml_tensor* conv = op->view_src;
    const ggml_tensor* r = op->src[1];
    return op->op == GGML_OP_ADD && conv && r && conv->src[2] == r && conv_like(conv) &&
           r->type == GGML_TYPE_F32 && ggml_is_contiguous(r) && ggml_are_same_shape(r, conv) && ggml_is_contiguous(op);
}

// ReLU, CLAMP (ReLU6, Clip), SiLU, HardSwish or Sigmoid in place on a CONV_2D output (onnx2ggml's
// lowering writes an activation in place when the convolution's output has no other reader): run as
// the convolution's eltwise post-op.
inline int unary_activation_kind(const ggml_tensor* op) {
    if (op->op != GGML_OP_UNARY) return 0;
    switch (ggml_get_unary_op(op)) {
        case GGML_UNARY_OP_RELU: return 1;
        case GGML_UNARY_OP_SILU: return 3;
        case GGML_UNARY_OP_HARDSWISH: return 4;
        case GGML_UNARY_OP_SIGMOID: return 5;
        default: return 0;
    }
}
inline bool is_conv_activation(const ggml_tensor* op) {
    const ggml_tensor* conv = op->view_src;
    bool act = op->op == GGML_OP_CLAMP || unary_activation_kind(op) != 0;
    return act && conv && op->src[0] && (op->src[0] == conv || op->src[0]->view_src == conv) && in_place_target(conv) &&
           op->type == GGML_TYPE_F32 && ggml_is_contiguous(op) && ggml_nelements(op) == ggml_nelements(conv);
}

inline Activation activation_of(const ggml_tensor* op) {
    if (!op) return {};
    if (op->op == GGML_OP_CLAMP) {
        float lo, hi;
        std::memcpy(&lo, op->op_params, 4);
        std::memcpy(&hi, reinterpret_cast<const char*>(op->op_params) + 4, 4);
        return {2, lo, hi};
    }
    return {unary_activation_kind(op), 0, 0};
}

// The eltwise algorithm of an activation kind > 0, with its alpha and beta (hardswish:
// x * clamp(alpha x + beta, 0, 1) with ONNX's 1/6 and 1/2; oneDNN 3 reads them, oneDNN 2's fixed
// x * ReLU6(x + 3) / 6 is the same function)
inline std::tuple<dnnl::algorithm, float, float> eltwise_of(const Activation& a) {
    switch (a.kind) {
        case 1: return {dnnl::algorithm::eltwise_relu, 0.0f, 0.0f};
        case 2: return {dnnl::algorithm::eltwise_clip, a.lo, a.hi};
        case 3: return {dnnl::algorithm::eltwise_swish, 1.0f, 0.0f};
        case 4: return {dnnl::algorithm::eltwise_hardswish, 1.0f / 6.0f, 0.5f};
        default: return {dnnl::algorithm::eltwise_logistic, 0.0f, 0.0f};
    }
}

// The post-ops: the residual (`sum`: added from the destination, copied there first; `add`: a
// binary add reading it where it is, in that layout), then the activation.
inline dnnl::primitive_attr post_ops(const Activation& a, bool sum, const dnnl::memory::desc* add = nullptr) {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // carved from Context::arena
    if (a.kind == 0 && !sum && !add) return attr;
    dnnl::post_ops po;
    if (add) po.append_binary(dnnl::algorithm::binary_add, *add);
    else if (sum) po.append_sum(1.0f);
    if (a.kind != 0) {
        auto [alg, alpha, beta] = eltwise_of(a);
        po.append_eltwise(1.0f, alg, alpha, beta);
    }
    attr.set_post_ops(po);
    return attr;
}

// The attributes of every primitive a Context keeps: its scratchpad is the caller's (Context::scratch,
// or the arena for the banded convolutions), never oneDNN's thread_local one.
inline dnnl::primitive_attr user_scratchpad(dnnl::primitive_attr a = dnnl::primitive_attr()) {
    a.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    return a;
}

// The scratchpad a primitive of user_scratchpad's needs (0 bytes: none).
inline size_t scratchpad_bytes(const dnnl::primitive& p, const dnnl_memory_desc_t** md) {
    *md = dnnl_primitive_desc_query_md(p.get_primitive_desc(), dnnl_query_scratchpad_md, 0);
    return *md ? dnnl_memory_desc_get_size(*md) : 0;
}

// Executes a primitive of user_scratchpad's on `args`, adding its scratchpad (in Context::scratch)
// when it needs one and the arguments do not carry it.
inline void execute(Context& c, const dnnl::primitive& p, const std::unordered_map<int, dnnl::memory>& args) {
    const dnnl_memory_desc_t* md;
    size_t bytes = scratchpad_bytes(p, &md);
    if (bytes == 0 || args.count(DNNL_ARG_SCRATCHPAD)) return p.execute(c.strm, args);
    std::unordered_map<int, dnnl::memory> with = args;
    with[DNNL_ARG_SCRATCHPAD] = dnnl::memory(dnnl::memory::desc(*md), c.eng, c.scratch_for(bytes));
    p.execute(c.strm, with);
}

// A new plan's steps get their scratchpads (Context::scratch, grown once for the largest first).
inline void attach_scratchpads(Context& c, Context::Plan& p) {
    size_t most = 0;
    const dnnl_memory_desc_t* md;
    for (const Context::Step& st : p.steps)
        if (!st.args.count(DNNL_ARG_SCRATCHPAD)) most = std::max(most, scratchpad_bytes(st.prim, &md));
    if (most == 0) return;
    char* base = c.scratch_for(most);  // may empty c.plans
    for (Context::Step& st : p.steps)
        if (!st.args.count(DNNL_ARG_SCRATCHPAD) && scratchpad_bytes(st.prim, &md) > 0)
            st.args[DNNL_ARG_SCRATCHPAD] = dnnl::memory(dnnl::memory::desc(*md), c.eng, base);
}

// y = act(y + r) (r: the residual, may be null; act: none, ReLU or Clip, kind < 3)
inline void apply_activation(const Activation& a, float* y, const float* r, int64_t n) {
#pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) {
        float v = r ? y[i] + r[i] : y[i];
        y[i] = a.kind == 0 ? v : a.kind == 1 ? (v > 0 ? v : 0.0f) : std::min(std::max(v, a.lo), a.hi);
    }
}

// A tensor's part of a plan's signature: where its data is, its type, op, shape, strides, parameters.
inline void sign(std::vector<int64_t>& s, const ggml_tensor* t) {
    if (!t) return s.push_back(0);
    s.insert(s.end(), {int64_t(reinterpret_cast<intptr_t>(t->data)), int64_t(t->type), int64_t(t->op)});
    s.insert(s.end(), t->ne, t->ne + GGML_MAX_DIMS);
    for (size_t b : t->nb) s.push_back(int64_t(b));
    s.insert(s.end(), t->op_params, t->op_params + GGML_MAX_OP_PARAMS / sizeof(int32_t));
}
// Runs `node`'s plan (Context::Plan) after checking its signature: the node, its inputs, the nodes
// fused into it (`fused`) and `extra` values; made anew by build() when it changed.
template <class Build>
inline void run_plan(Context& c, const ggml_tensor* node, std::initializer_list<const ggml_tensor*> fused,
                     std::initializer_list<int64_t> extra, Build&& build) {
    c.sig.clear();
    sign(c.sig, node);
    for (const ggml_tensor* s : node->src) sign(c.sig, s);
    for (const ggml_tensor* f : fused) sign(c.sig, f);
    c.sig.insert(c.sig.end(), extra);
    auto it = c.plans.find(node);
    if (it == c.plans.end() || it->second.sig != c.sig) {
        Context::Plan p = build();  // may empty c.plans (Context::reserve)
        attach_scratchpads(c, p);   // likewise (Context::scratch_for)
        p.sig = c.sig;
        it = c.plans.insert_or_assign(node, std::move(p)).first;
    }
    const Context::Plan& p = it->second;
    if (p.hn) {  // ggml's vectorized conversion, in blocks over the threads (oneDNN 2.6's F16 reorder is a
                 // reference loop here: 20x slower)
        const int64_t blk = 1 << 14, nb = (p.hn + blk - 1) / blk;
#pragma omp parallel for schedule(static) if (nb > 1)
        for (int64_t b = 0; b < nb; ++b)
            ggml_cpu_fp16_to_fp32(p.h + b * blk, p.hf + b * blk, std::min(blk, p.hn - b * blk));
    }
    for (const Context::Step& st : p.steps) st.prim.execute(c.strm, st.args);
    c.strm.wait();
    if (p.n) apply_activation(p.act, p.y, p.r, p.n);
}

// The plan of dst = act(conv(src[1], kernel src[0]) (+ bias, when given) (+ residual, when given)), written to `out`
inline Context::Plan conv_plan(Context& c, const ggml_tensor* dst, const ggml_tensor* bias, const ggml_tensor* residual,
                               const Activation& act, void* out) {
    // a CONV_2D(_DW), or the CONT of o2g::grouped_conv (kernel src[3], geometry its IM2COL's)
    bool grouped = dst->op == GGML_OP_CONT;
    const ggml_tensor* k = grouped ? dst->src[3] : dst->src[0];  // [KW, KH, IC / groups, OC]
    const ggml_tensor* x = dst->src[1];                          // [W, H, C, N]
    const int32_t* p = grouped ? grouped_im2col(dst)->op_params : dst->op_params;  // s0, s1, p0, p1, d0, d1 (dim 0 = W)
    const int32_t* flags = dst->op_params;                                        // o2g::conv_chain's
    using dims = dnnl::memory::dims;
    bool dw = dst->op == GGML_OP_CONV_2D_DW;
    int64_t G = grouped ? dst->op_params[o2g::kGroupedConv] : dw ? k->ne[3] : 1;
    dims src_d = {x->ne[3], x->ne[2], x->ne[1], x->ne[0]};
    dims w_d = G > 1 ? dims{G, k->ne[3] / G, k->ne[2], k->ne[1], k->ne[0]}  // goihw (dw: k [KW, KH, 1, C])
                     : dims{k->ne[3], k->ne[2], k->ne[1], k->ne[0]};
    dims dst_d = {dst->ne[3], dst->ne[2], dst->ne[1], dst->ne[0]};
    dims strides = {p[1], p[0]}, pads = {p[3], p[2]}, dil = {p[5] - 1, p[4] - 1};  // oneDNN dilation counts from 0
    using tag = dnnl::memory::format_tag;
    using dt = dnnl::memory::data_type;
    dnnl::memory::desc src_md(src_d, dt::f32, tag::nchw), w_md(w_d, dt::f32, G > 1 ? tag::goihw : tag::oihw),
        dst_md(dst_d, dt::f32, tag::nchw);
    // An F16 kernel (--weights f16) stays where ggml holds it, and the primitives take F32: it is converted into
    // the arena before each run of the convolution (Plan::h; then reordered when the primitive's layout is not
    // the plain one), so no F32 copy of it is kept: that would cost the memory F16 weights are there to save.
    const bool k16 = k->type == GGML_TYPE_F16;
    dnnl::memory::desc b_md({dst_d[1]}, dt::f32, tag::x);
    Context::Key key = {G,    src_d[0], src_d[1], src_d[2], src_d[3], dst_d[1], k->ne[1],        k->ne[0],
                        p[0], p[1],     p[2],     p[3],     p[4],     p[5],     bias != nullptr, residual != nullptr};
    // A convolution's output that only convolutions (or the residual sums of convolutions) read
    // stays in private_layout (o2g::conv_chain marks both ends): written and read with no reorder.
    bool in_priv = flags[o2g::kInPrivate] == 1, out_priv = flags[o2g::kOutPrivate] == 1,
         res_priv = residual && flags[o2g::kResidualPrivate] == 1;
    // Blocked layouts (reorders in and out, a reordered copy of the kernel) pay off on large
    // activation maps (measured: about 2x faster from 56x56 up, 1.3x at 32x32, none at 16x16); on
    // small ones the kernel copy would cost memory for little gain (the UNet's 32x32 latent: 0.5 GB).
    // Depthwise and grouped convolutions take them always (oneDNN's NCHW kernels for them: a
    // reference one, and a gemm-based one 2-4x slower than its blocked JIT kernels on regnet's shapes).
    if (in_priv || out_priv || res_priv || G > 1 || x->ne[0] * x->ne[1] >= 56 * 56) {
        // the activation is the primitive's post-op (free in oneDNN's blocked kernels)
        int32_t lo_bits, hi_bits;
        std::memcpy(&lo_bits, &act.lo, 4);
        std::memcpy(&hi_bits, &act.hi, 4);
        key.insert(key.end(), {act.kind, lo_bits, hi_bits, in_priv, out_priv, res_priv});
        // where the input and the output are (NCHW or private_layout); oneDNN's fast kernels take one
        // layout family on both sides: when the private layouts differ (blocked and NHWC, as the
        // channel counts decide), the output's is taken and the input reordered to it
        dnnl::memory::desc x_md = in_priv ? private_layout(src_d) : src_md,
                           y_md = out_priv ? private_layout(dst_d) : dst_md;
        bool mixed = in_priv && out_priv && private_blocked(src_d[1]) != private_blocked(dst_d[1]);
        auto bt = c.blocked.find(key);
        if (bt == c.blocked.end()) {
            // a residual in the output's own (private) layout is read in place by a binary post-op where
            // the kernel supports one (no copy); otherwise it is copied into the output and summed
            bool add = res_priv && out_priv;
            // the primitive for output rows [r0, r1) (all rows: the whole map)
            auto make = [&](dnnl::algorithm alg, int64_t r0, int64_t r1, bool band_add) {
                bool whole = r0 == 0 && r1 == dst_d[2];
                // a band's first and last input rows (their padding: what lies outside the map)
                int64_t first = r0 * p[1] - p[3], last = (r1 - 1) * p[1] - p[3] + (k->ne[1] - 1) * p[5];
                int64_t i0 = whole ? 0 : std::max<int64_t>(0, first),
                        i1 = whole ? src_d[2] : std::min<int64_t>(src_d[2], last + 1);
                dims bs = {src_d[0], src_d[1], i1 - i0, src_d[3]}, bd = {dst_d[0], dst_d[1], r1 - r0, dst_d[3]};
                dims pl = whole ? pads : dims{i0 - first, p[2]}, pr = whole ? pads : dims{last + 1 - i1, p[2]};
                // (a depthwise convolution is given its input's layout: with `any` oneDNN 2.6 takes its
                // reference kernel for a plain input and a blocked output, 10x slower than its JIT one)
                dnnl::memory::desc any_src =
                                       whole && in_priv && !mixed ? x_md
                                       : dw && out_priv           ? dnnl::memory::desc(bs, dt::f32, private_tag(dst_d[1]))
                                                                  : dnnl::memory::desc(bs, dt::f32, tag::any),
                                   any_w(w_d, dt::f32, tag::any),
                                   // (an input in private_layout and a plain output: the output computed in the
                                   // input's layout, then reordered; oneDNN would pick a reference kernel for
                                   // blocked in, any out)
                    any_dst = whole && out_priv  ? private_layout(dst_d)
                              : whole && in_priv ? dnnl::memory::desc(bd, dt::f32, private_tag(src_d[1]))
                                                 : dnnl::memory::desc(bd, dt::f32, tag::any);
                // the post-ops an optimized kernel takes, in order of preference: the activation and the
                // residual's binary add fused, then without the add, then (SiLU, HardSwish, Sigmoid, where
                // no optimized kernel takes them as a post-op) without the activation, an eltwise pass after it
                dnnl::convolution_forward::primitive_desc pd;
                bool fused_act = true, fused_add = band_add;
                auto pick = [&](const dnnl::memory::desc& s_md, const dnnl::memory::desc& d_md) {
                    auto d = bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, alg, s_md,
                                                                    any_w, b_md, d_md, strides, dil, pl, pr)
                                  : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, alg, s_md,
                                                                    any_w, d_md, strides, dil, pl, pr);
                    for (int t = 0; t < 4; ++t) {
                        fused_act = t < 2, fused_add = t % 2 == 0;
                        if ((fused_add && !band_add) || (!fused_act && act.kind < 3)) continue;
                        pd = dnnl::convolution_forward::primitive_desc(
                            d, post_ops(fused_act ? act : Activation{}, residual != nullptr, fused_add ? &y_md : nullptr),
                            c.eng);
                        if (std::strncmp(pd.impl_info_str(), "ref", 3) != 0) return true;
                    }
                    return false;
                };
                // no blocked kernel: a grouped convolution with 8 or 4 channels per group (regnet_y's, resnext's;
                // onnx2ggml keeps those out of private-layout chains), or a dilation whose kernel extent
                // exceeds the map (deeplabv3's ASPP: rate 36 on 65x65; the reference kernel took minutes):
                // the gemm-based kernel on NCHW (for a grouped one where its neighbours are: no reorders)
                bool found = pick(any_src, any_dst);
                if (!dw && (!found || (G > 1 && std::strncmp(pd.impl_info_str(), "x64:gemm", 8) == 0)))
                    pick(dnnl::memory::desc(bs, dt::f32, tag::nchw), dnnl::memory::desc(bd, dt::f32, tag::nchw));
                if (band_add && !fused_add) add = false;
                return Context::Band{r0,
                                     r1,
                                     i0,
                                     i1,
                                     dnnl::convolution_forward(pd),
                                     pd.src_desc(),
                                     pd.weights_desc(),
                                     pd.dst_desc(),
                                     pd.scratchpad_desc(),
                                     fused_act};
            };
            // 3x3 stride-1 convolutions: Winograd (oneDNN's F(4x4,3x3)/F(2x2,3x3), 3-5x faster than
            // direct on the VAE's shapes, within 1e-5 of the direct result) on maps of 14x14 pixels or
            // more (on fewer, its transformed kernel, 16/9 or 4x the kernel's size, costs more memory
            // than the few tiles gain). Its transform buffers grow with the map (600 MB for 128
            // channels at 512x512): beyond the budget, the map is cut into bands of rows that fit it,
            // each its own primitive (same kernel), read and written through reorders.
            std::vector<Context::Band> bands;
            bool wino = G == 1 && k->ne[0] == 3 && k->ne[1] == 3 && p[0] == 1 && p[1] == 1 && p[4] == 1 && p[5] == 1 &&
                        c.wino_budget > 0 && dst_d[2] * dst_d[3] >= 196;
            try {
                if (wino) {
                    bands.push_back(make(dnnl::algorithm::convolution_winograd, 0, dst_d[2], add));
                    size_t need = bands[0].scratch.get_size();
                    // else bands of a multiple of 4 rows (F(4x4,3x3)'s tiles) whose scratchpad and
                    // copies fit the budget, from an estimate (the scratchpad grows with the rows)
                    int64_t rows = int64_t(double(dst_d[2]) * double(c.wino_budget) / (double(need) * 1.5)) / 4 * 4;
                    bool fits = need <= c.wino_budget;
                    for (; !fits && rows >= 16; rows = rows * 3 / 4 / 4 * 4) {
                        bands.clear();
                        fits = true;
                        for (int64_t r0 = 0; fits && r0 < dst_d[2]; r0 += rows) {
                            bands.push_back(
                                make(dnnl::algorithm::convolution_winograd, r0, std::min(dst_d[2], r0 + rows), false));
                            const Context::Band& bn = bands.back();
                            fits = bn.scratch.get_size() + bn.src.get_size() + bn.dst.get_size() <= c.wino_budget &&
                                   bn.w == bands.front().w;
                        }
                        if (fits) add = false;  // a band's residual is a copy (sum post-op)
                    }
                    wino = fits;
                }
            } catch (const dnnl::error&) {  // no Winograd kernel for this shape or machine
                wino = false;
            }
            if (!wino) {
                add = res_priv && out_priv;
                bands = {make(dnnl::algorithm::convolution_direct, 0, dst_d[2], add)};
            }
            bt = c.blocked.emplace(key, Context::Blocked{bands, bands[0].w, add, {}}).first;
        }
        Context::Blocked& b = bt->second;
        Context::Plan plan;
        dnnl::memory xm = in_priv ? private_memory(c, x_md, x->data) : dnnl::memory(x_md, c.eng, x->data);
        dnnl::memory ym = out_priv ? private_memory(c, y_md, out) : dnnl::memory(y_md, c.eng, out);
        // a weight's reordered copy is made once and kept; a kernel computed at run time is reordered every run
        bool is_weight = k->buffer && ggml_backend_buffer_get_usage(k->buffer) == GGML_BACKEND_BUFFER_USAGE_WEIGHTS;
        auto wt = is_weight ? b.weights.find(k->data) : b.weights.end();
        SharedKernels* sk = is_weight && c.shared && c.shared->owns(k->buffer) ? c.shared.get() : nullptr;
        dnnl::memory wb;
        if (k16) {
            // converted into the arena below, every run
        } else if (wt != b.weights.end()) {
            wb = wt->second;
        } else {
            dnnl::memory wsrc(w_md, c.eng, k->data);
            wb = b.w == w_md ? wsrc : dnnl::memory(b.w, c.eng);
            if (wb != wsrc && sk) {  // another session of the model may have reordered it to this layout
                std::lock_guard<std::mutex> l(sk->m);
                auto& list = sk->copies[k->data];
                auto hit = std::find_if(list.begin(), list.end(), [&](const auto& e) { return e.first == b.w; });
                if (hit != list.end()) {
                    wb = hit->second;
                } else {
                    dnnl::reorder(wsrc, wb).execute(c.strm, wsrc, wb);
                    c.strm.wait();
                    list.emplace_back(b.w, wb);
                }
            } else if (wb != wsrc && is_weight) {
                dnnl::reorder(wsrc, wb).execute(c.strm, wsrc, wb);
                c.strm.wait();
            } else if (wb != wsrc) {
                plan.steps.push_back({dnnl::reorder(dnnl::reorder::primitive_desc(wsrc, wb, user_scratchpad())),
                                      {{DNNL_ARG_FROM, wsrc}, {DNNL_ARG_TO, wb}}});
            }
            if (is_weight) b.weights.emplace(k->data, wb);
        }
        dnnl::memory rm;
        if (residual)
            rm = res_priv ? private_memory(c, private_layout(dst_d), residual->data)
                          : dnnl::memory(dst_md, c.eng, residual->data);
        // rows [a, b) of a map, where it is
        auto rows = [&](const dnnl::memory& m, int64_t a, int64_t e) {
            dnnl::memory::desc md = m.get_desc();
            dims d = md.dims();
            d[2] = e - a;
            return dnnl::memory(md.submemory_desc(d, {0, 0, a, 0}), c.eng, m.get_data_handle());
        };
        // the temporaries of each band (one at a time), carved from the context's arena at
        // page-aligned offsets: the arena is grown once, before any memory object points into it
        bool whole = b.bands.size() == 1;
        struct Carved {
            bool copy_x, copy_y;
            size_t s_off, x_off, y_off;
        };
        std::vector<Carved> carved;
        size_t most = 0;
        for (const Context::Band& bn : b.bands) {
            Carved cv{!whole || bn.src != x_md, !whole || bn.dst != y_md, 0, 0, 0};
            size_t used = 0;
            auto carve = [&](const dnnl::memory::desc& d, bool need) {
                size_t off = used;
                if (need) used += (d.get_size() + 4095) / 4096 * 4096;
                return off;
            };
            cv.s_off = carve(bn.scratch, true), cv.x_off = carve(bn.src, cv.copy_x),
            cv.y_off = carve(bn.dst, cv.copy_y);
            carved.push_back(cv);
            most = std::max(most, used);
        }
        char* arena = c.reserve(most);
        if (k16) {  // converted to F32 in its plain layout, then reordered to the primitive's when that differs
            size_t wb_bytes = b.w == w_md ? 0 : (b.w.get_size() + 4095) / 4096 * 4096;
            arena = c.reserve(most + wb_bytes + w_md.get_size());
            dnnl::memory kf(w_md, c.eng, arena + most + wb_bytes);
            plan.h = static_cast<const ggml_fp16_t*>(k->data), plan.hf = static_cast<float*>(kf.get_data_handle()),
            plan.hn = ggml_nelements(k);
            wb = b.w == w_md ? kf : dnnl::memory(b.w, c.eng, arena + most);
            if (b.w != w_md)
                plan.steps.push_back({dnnl::reorder(dnnl::reorder::primitive_desc(kf, wb, user_scratchpad())),
                                      {{DNNL_ARG_FROM, kf}, {DNNL_ARG_TO, wb}}});
        }
        for (size_t bi = 0; bi < b.bands.size(); ++bi) {
            const Context::Band& bn = b.bands[bi];
            const Carved& cv = carved[bi];
            dnnl::memory bx = cv.copy_x ? dnnl::memory(bn.src, c.eng, arena + cv.x_off) : xm;
            dnnl::memory by = cv.copy_y ? dnnl::memory(bn.dst, c.eng, arena + cv.y_off) : ym;
            if (cv.copy_x) {
                dnnl::memory xs = whole ? xm : rows(xm, bn.i0, bn.i1);
                plan.steps.push_back({dnnl::reorder(dnnl::reorder::primitive_desc(xs, bx, user_scratchpad())),
                                      {{DNNL_ARG_FROM, xs}, {DNNL_ARG_TO, bx}}});
            }
            if (residual && !b.add_residual) {  // for the sum post-op
                dnnl::memory rs = whole ? rm : rows(rm, bn.r0, bn.r1);
                plan.steps.push_back({dnnl::reorder(dnnl::reorder::primitive_desc(rs, by, user_scratchpad())),
                                      {{DNNL_ARG_FROM, rs}, {DNNL_ARG_TO, by}}});
            }
            std::unordered_map<int, dnnl::memory> args = {
                {DNNL_ARG_SRC, bx}, {DNNL_ARG_WEIGHTS, wb}, {DNNL_ARG_DST, by}};
            if (b.add_residual) args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1] = rm;
            if (bias) args[DNNL_ARG_BIAS] = dnnl::memory(b_md, c.eng, bias->data);
            args[DNNL_ARG_SCRATCHPAD] = dnnl::memory(bn.scratch, c.eng, arena + cv.s_off);
            plan.steps.push_back({bn.conv, std::move(args)});
            if (act.kind && !bn.act_fused) {  // in place on the band's output in its layout (padding included)
                dnnl::memory::desc flat(dims{int64_t(bn.dst.get_size() / sizeof(float))}, dt::f32, tag::a);
                dnnl::memory yf(flat, c.eng, by.get_data_handle());
                auto [alg, alpha, beta] = eltwise_of(act);
                dnnl::eltwise_forward::primitive_desc pd(
                    dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_inference, alg, flat, alpha, beta),
                    user_scratchpad(), c.eng);
                plan.steps.push_back({dnnl::eltwise_forward(pd), {{DNNL_ARG_SRC, yf}, {DNNL_ARG_DST, yf}}});
            }
            if (cv.copy_y) {
                dnnl::memory ys = whole ? ym : rows(ym, bn.r0, bn.r1);
                plan.steps.push_back({dnnl::reorder(dnnl::reorder::primitive_desc(by, ys, user_scratchpad())),
                                      {{DNNL_ARG_FROM, by}, {DNNL_ARG_TO, ys}}});
            }
        }
        return plan;
    }
    // NCHW runs oneDNN's gemm convolution, whose eltwise post-ops are several times slower than the
    // convolution itself (measured: mobilenet_v2's 1x1 convolutions): the activation runs after it
    auto it = c.convs.find(key);
    if (it == c.convs.end()) {
        auto d = bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                        dnnl::algorithm::convolution_direct, src_md, w_md, b_md, dst_md,
                                                        strides, dil, pads, pads)
                      : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                        dnnl::algorithm::convolution_direct, src_md, w_md, dst_md,
                                                        strides, dil, pads, pads);
        it = c.convs
                 .emplace(key, dnnl::convolution_forward(
                                   dnnl::convolution_forward::primitive_desc(d, user_scratchpad(), c.eng)))
                 .first;
    }
    Context::Plan plan;
    dnnl::memory xm(src_md, c.eng, x->data), ym(dst_md, c.eng, out), wm;
    if (k16) {
        wm = dnnl::memory(w_md, c.eng, c.reserve(w_md.get_size()));
        plan.h = static_cast<const ggml_fp16_t*>(k->data), plan.hf = static_cast<float*>(wm.get_data_handle()),
        plan.hn = ggml_nelements(k);
    } else {
        wm = dnnl::memory(w_md, c.eng, k->data);
    }
    std::unordered_map<int, dnnl::memory> args = {{DNNL_ARG_SRC, xm}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DST, ym}};
    if (bias) args[DNNL_ARG_BIAS] = dnnl::memory(b_md, c.eng, bias->data);
    plan.steps.push_back({it->second, std::move(args)});
    const float* r = residual ? static_cast<const float*>(residual->data) : nullptr;
    if (act.kind < 3) {  // ReLU, Clip: a pass over the output with the residual's add
        if (act.kind || r) plan.act = act, plan.y = static_cast<float*>(out), plan.r = r, plan.n = ggml_nelements(dst);
        return plan;
    }
    // SiLU, HardSwish, Sigmoid: oneDNN's vectorized eltwise in place, after a binary add of the residual
    dnnl::memory::desc flat(dims{ggml_nelements(dst)}, dt::f32, tag::a);
    dnnl::memory yf(flat, c.eng, out);
    if (r) {
        dnnl::memory rf(flat, c.eng, residual->data);
        dnnl::binary::primitive_desc pd(dnnl::binary::desc(dnnl::algorithm::binary_add, flat, flat, flat),
                                        user_scratchpad(), c.eng);
        plan.steps.push_back({dnnl::binary(pd), {{DNNL_ARG_SRC_0, yf}, {DNNL_ARG_SRC_1, rf}, {DNNL_ARG_DST, yf}}});
    }
    auto [alg, alpha, beta] = eltwise_of(act);
    dnnl::eltwise_forward::primitive_desc pd(
        dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_inference, alg, flat, alpha, beta), user_scratchpad(),
        c.eng);
    plan.steps.push_back({dnnl::eltwise_forward(pd), {{DNNL_ARG_SRC, yf}, {DNNL_ARG_DST, yf}}});
    return plan;
}

inline void conv2d(Context& c, const ggml_tensor* dst, const ggml_tensor* bias, const ggml_tensor* residual,
                   const Activation& act, void* out) {
    int32_t lo, hi;
    std::memcpy(&lo, &act.lo, 4);
    std::memcpy(&hi, &act.hi, 4);
    run_plan(c, dst, {bias, residual}, {act.kind, lo, hi, int64_t(reinterpret_cast<intptr_t>(out))},
             [&] { return conv_plan(c, dst, bias, residual, act, out); });
}

// dst = f(src) on n floats with oneDNN's vectorized eltwise primitive `alg` (in place when src is dst)
inline void run_eltwise(Context& c, dnnl::algorithm alg, float alpha, float beta, const void* src, void* dst,
                        int64_t n) {
    dnnl::memory::desc md(dnnl::memory::dims{n}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::a);
    int32_t a_bits, b_bits;
    std::memcpy(&a_bits, &alpha, 4);
    std::memcpy(&b_bits, &beta, 4);
    Context::Key key = {-4, int64_t(alg), n, a_bits, b_bits};
    auto it = c.eltwises.find(key);
    if (it == c.eltwises.end()) {
        dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_inference, alg, md, alpha, beta);
        it =
            c.eltwises
                .emplace(key, dnnl::eltwise_forward(dnnl::eltwise_forward::primitive_desc(d, user_scratchpad(), c.eng)))
                .first;
    }
    dnnl::memory s(md, c.eng, const_cast<void*>(src)), d(md, c.eng, dst);
    execute(c, it->second, {{DNNL_ARG_SRC, s}, {DNNL_ARG_DST, d}});
    c.strm.wait();
}

// The activation of is_conv_activation when its convolution ran alone: in place, on the
// convolution's output where it is (NCHW, or private_layout with its padding channels).
inline void activation(Context& c, const ggml_tensor* op) {
    const ggml_tensor* conv = op->view_src;
    dnnl::memory::dims d = {conv->ne[3], conv->ne[2], conv->ne[1], conv->ne[0]};
    float* y = static_cast<float*>(op->data);
    int64_t n = ggml_nelements(op);
    if (conv->op_params[o2g::kOutPrivate] == 1) {
        dnnl::memory m = private_memory(c, private_layout(d), conv->data);
        y = static_cast<float*>(m.get_data_handle()), n = int64_t(m.get_desc().get_size() / sizeof(float));
    }
    Activation a = activation_of(op);
    if (a.kind < 3) return apply_activation(a, y, nullptr, n);
    auto [alg, alpha, beta] = eltwise_of(a);
    run_eltwise(c, alg, alpha, beta, y, y, n);
}

// The residual add of is_conv_residual when its convolution ran alone (in place; either side may
// be in private_layout, see conv2d: a reorder that sums then).
inline void add_residual(Context& c, const ggml_tensor* op) {
    const ggml_tensor* r = op->src[1];
    bool y_priv = op->view_src->op_params[o2g::kOutPrivate] == 1,
         r_priv = op->view_src->op_params[o2g::kResidualPrivate] == 1;
    dnnl::memory::dims d = {op->ne[3], op->ne[2], op->ne[1], op->ne[0]};
    dnnl::memory::desc nchw(d, dnnl::memory::data_type::f32, dnnl::memory::format_tag::nchw);
    dnnl::memory rm = r_priv ? private_memory(c, private_layout(d), r->data) : dnnl::memory(nchw, c.eng, r->data);
    dnnl::memory ym = y_priv ? private_memory(c, private_layout(d), op->data) : dnnl::memory(nchw, c.eng, op->data);
    if (y_priv == r_priv)  // one layout: element by element (with the padding channels, if any)
        return apply_activation({}, static_cast<float*>(ym.get_data_handle()),
                                static_cast<const float*>(rm.get_data_handle()),
                                int64_t(ym.get_desc().get_size() / sizeof(float)));
    dnnl::post_ops po;
    po.append_sum(1.0f);
    dnnl::primitive_attr attr;
    attr.set_post_ops(po);
    dnnl::reorder(dnnl::reorder::primitive_desc(rm, ym, attr)).execute(c.strm, rm, ym);
    c.strm.wait();
}

// y (*/+)= b per channel, in place on NCHW data (ADD or MUL with b [1, 1, C, 1]): a convolution's
// bias when the convolution ran alone, the affine of is_norm_affine when its GROUP_NORM did
inline void channel_op(const ggml_tensor* op) {
    const float* b = static_cast<const float*>(op->src[1]->data);
    float* y = static_cast<float*>(op->data);
    int64_t hw = op->ne[0] * op->ne[1], C = op->ne[2], N = op->ne[3];
    bool mul = op->op == GGML_OP_MUL;
#pragma omp parallel for
    for (int64_t r = 0; r < N * C; ++r) {
        float v = b[r % C];
        if (mul)
            for (int64_t i = 0; i < hw; ++i) y[r * hw + i] *= v;
        else
            for (int64_t i = 0; i < hw; ++i) y[r * hw + i] += v;
    }
}

// ADD, SUB, MUL or DIV (F32, dense) of src0 and a src1 that repeats into it (each of src1's dims src0's or 1,
// ggml's broadcast): residual sums, a bias over rows, per-row statistics, a squeeze-excitation block's
// per-channel scale (src1's ne[0] 1: ggml's CPU kernels take each such row as ne[0] one-element operations,
// 27% of efficientnet_b0's time in its 16 SE products), attention's position biases. On this backend so that
// an elementwise step between oneDNN nodes does not split the graph between backends (a split costs more
// than a small operation); the same float operation per element as ggml's, so the values are identical.
inline bool is_binary(const ggml_tensor* op) {
    const ggml_tensor* a = op->src[0];
    const ggml_tensor* b = op->src[1];
    bool binary = op->op == GGML_OP_ADD || op->op == GGML_OP_SUB || op->op == GGML_OP_MUL || op->op == GGML_OP_DIV;
    if (!binary || !a || !b || op->type != GGML_TYPE_F32 || a->type != GGML_TYPE_F32 || b->type != GGML_TYPE_F32 ||
        !ggml_is_contiguous(op) || !ggml_is_contiguous(a) || !ggml_is_contiguous(b) || !ggml_are_same_shape(op, a))
        return false;
    for (int d = 0; d < GGML_MAX_DIMS; ++d)
        if (b->ne[d] != 1 && b->ne[d] != op->ne[d]) return false;
    return true;
}
template <class F>
inline void binary_rows(const ggml_tensor* op, F f) {
    const ggml_tensor* b = op->src[1];
    const float* x = static_cast<const float*>(op->src[0]->data);
    const float* s = static_cast<const float*>(b->data);
    float* y = static_cast<float*>(op->data);
    int64_t n0 = op->ne[0], n1 = op->ne[1], n2 = op->ne[2], rows = ggml_nrows(op);
    bool scalar = b->ne[0] == 1;
#pragma omp parallel for if (size_t(rows * n0) > (size_t(1) << 14))
    for (int64_t r = 0; r < rows; ++r) {
        int64_t i1 = r % n1, i2 = r / n1 % n2, i3 = r / (n1 * n2);
        const float* br = s + (((i3 % b->ne[3]) * b->ne[2] + i2 % b->ne[2]) * b->ne[1] + i1 % b->ne[1]) * b->ne[0];
        const float* xr = x + r * n0;
        float* yr = y + r * n0;
        if (scalar) {
            float v = br[0];
            for (int64_t i = 0; i < n0; ++i) yr[i] = f(xr[i], v);
        } else {
            for (int64_t i = 0; i < n0; ++i) yr[i] = f(xr[i], br[i]);
        }
    }
}
inline void binary(const ggml_tensor* op) {
    switch (op->op) {
        case GGML_OP_ADD: binary_rows(op, [](float u, float v) { return u + v; }); break;
        case GGML_OP_SUB: binary_rows(op, [](float u, float v) { return u - v; }); break;
        case GGML_OP_MUL: binary_rows(op, [](float u, float v) { return u * v; }); break;
        default: binary_rows(op, [](float u, float v) { return u / v; }); break;
    }
}

// SET in place of a dense F32/I32 tensor (onnx2ggml's Concat and rank-5 Transpose copy each part into its
// slot of the output so): parallel row copies here, so that a Concat between oneDNN nodes stays on this
// backend (squeezenet's fire modules, densenet's dense layers: two scheduler splits each on ggml's CPU).
inline bool is_set(const ggml_tensor* op) {
    const ggml_tensor* b = op->src[1];
    return op->op == GGML_OP_SET && op->op_params[4] == 1 && b && op->src[0] &&  // {nb1, nb2, nb3, offset, inplace}
           (op->type == GGML_TYPE_F32 || op->type == GGML_TYPE_I32) && b->type == op->type && ggml_is_contiguous(b);
}
inline void set_rows(const ggml_tensor* op) {
    const ggml_tensor* b = op->src[1];
    size_t nb1 = size_t(op->op_params[0]), nb2 = size_t(op->op_params[1]), nb3 = size_t(op->op_params[2]),
           off = size_t(op->op_params[3]);
    size_t row = size_t(b->ne[0]) * ggml_element_size(b);
    int64_t n1 = b->ne[1], n2 = b->ne[2], rows = ggml_nrows(b);
    char* d = static_cast<char*>(op->data) + off;  // op->data is src0's: a view in place
    const char* s = static_cast<const char*>(b->data);
#pragma omp parallel for if (size_t(rows) * row > (size_t(1) << 16))
    for (int64_t r = 0; r < rows; ++r)
        std::memcpy(d + size_t(r % n1) * nb1 + size_t(r / n1 % n2) * nb2 + size_t(r / (n1 * n2)) * nb3,
                    s + size_t(r) * row, row);
}

// GGML_OP_MEAN (a ReduceMean over the last ONNX axis, a global average pooling as CNNs export it): each row's
// mean, summed in double and divided in float as ggml's CPU kernel does (the same bits); here rather than on the
// CPU backend so that a CNN's head costs no scheduler split.
inline bool is_mean(const ggml_tensor* op) {
    return op->op == GGML_OP_MEAN && op->type == GGML_TYPE_F32 && op->src[0]->type == GGML_TYPE_F32 &&
           op->src[0]->nb[0] == sizeof(float) && ggml_is_contiguous(op);
}
inline void mean_rows(const ggml_tensor* op) {
    const ggml_tensor* a = op->src[0];
    const int64_t n0 = a->ne[0], n1 = a->ne[1], n2 = a->ne[2], rows = ggml_nrows(a);
    float* y = static_cast<float*>(op->data);
#pragma omp parallel for if (rows * n0 > (int64_t(1) << 16))
    for (int64_t r = 0; r < rows; ++r) {
        const float* x = reinterpret_cast<const float*>(static_cast<const char*>(a->data) + size_t(r % n1) * a->nb[1] +
                                                        size_t(r / n1 % n2) * a->nb[2] +
                                                        size_t(r / (n1 * n2)) * a->nb[3]);
        double sum = 0;
        for (int64_t i = 0; i < n0; ++i) sum += double(x[i]);
        y[r] = float(sum) / float(n0);
    }
}

// The per-channel bias add of is_conv_bias when its convolution ran alone (in place; private_layout
// when the convolution keeps its output so, see conv2d).
inline void add_bias(Context& c, const ggml_tensor* op) {
    const float* b = static_cast<const float*>(op->src[1]->data);
    int64_t hw = op->ne[0] * op->ne[1], C = op->ne[2], N = op->ne[3];
    if (!(op->view_src && op->view_src->op_params[o2g::kOutPrivate] == 1)) return channel_op(op);  // NCHW
    // private_layout: runs of `run` consecutive channels (all C in NHWC, a block of the channels
    // padded to a multiple of it in nChw16c/8c; the padding stays 0)
    float* y = static_cast<float*>(
        private_memory(c, private_layout({N, C, op->ne[1], op->ne[0]}), op->data).get_data_handle());
    int64_t run = private_blocked(C) ? channel_block() : C, groups = (C + run - 1) / run;
#pragma omp parallel for
    for (int64_t r = 0; r < N * groups * hw; ++r)
        for (int64_t j = 0, c0 = (r / hw) % groups * run; j < run && c0 + j < C; ++j) y[r * run + j] += b[c0 + j];
}

// channel_product's inner loop on a channel block of B (oneDNN's nChw16c / nChw8c): y = act(x * k + b) over hw
// positions of B channels, the activation (0 none, 1 ReLU, 2 clip to [lo, hi]) and the bias chosen outside the
// loop, so that the compiler vectorizes it (a fixed block; measured: the generic loop, with the choices inside,
// was scalar code taking 7% of efficientnet_b0's time)
template <int B, int Kind, bool Bias>
inline void channel_rows_as(const float* x, float* y, int64_t hw, const float* k, const float* b, float lo,
                            float hi) {
    for (int64_t p = 0; p < hw; ++p, x += B, y += B)
        for (int j = 0; j < B; ++j) {
            float v = x[j] * k[j];
            if (Bias) v += b[j];
            if (Kind == 1) v = v > 0.0f ? v : 0.0f;
            if (Kind == 2) v = std::min(std::max(v, lo), hi);
            y[j] = v;
        }
}
template <int B>
inline void channel_rows(const float* x, float* y, int64_t hw, const float* k, const float* b, int kind, float lo,
                         float hi) {
    auto go = [&](auto kind_c) {
        constexpr int K = decltype(kind_c)::value;
        if (b)
            channel_rows_as<B, K, true>(x, y, hw, k, b, lo, hi);
        else
            channel_rows_as<B, K, false>(x, y, hw, k, b, lo, hi);
    };
    if (kind == 1)
        go(std::integral_constant<int, 1>{});
    else if (kind == 2)
        go(std::integral_constant<int, 2>{});
    else
        go(std::integral_constant<int, 0>{});
}

// is_channel_product: y = act(x * s + b) in one pass (b: the bias of is_conv_bias in place on it, may be null; act:
// the activation of is_conv_activation in place on it), reading and writing the layouts o2g::conv_chain marks
// (NCHW, or private_layout: blocked, padded or NHWC). The same float operations per element as ggml's MUL, ADD and
// ReLU/Clip (the others: oneDNN's eltwise after the pass, as for a convolution's activation run alone).
inline void channel_product(Context& c, const ggml_tensor* op, const ggml_tensor* bias, const Activation& act) {
    const ggml_tensor* x = op->src[0];
    const float* s = static_cast<const float*>(op->src[1]->data);
    const float* bv = bias ? static_cast<const float*>(bias->data) : nullptr;
    int64_t hw = op->ne[0] * op->ne[1], C = op->ne[2], N = op->ne[3], sN = op->src[1]->ne[3] == 1 ? 0 : C;
    const int kind = act.kind < 3 ? act.kind : 0;
    const float lo = act.lo, hi = act.hi;
    auto f = [=](float v, float k, float b) {
        float y = v * k;
        if (bv) y = y + b;
        return kind == 0 ? y : kind == 1 ? (y > 0 ? y : 0.0f) : std::min(std::max(y, lo), hi);
    };
    // a layout as strides: element (n, ch, p) at n * sn + ch / blk * sb + ch % blk * sc + p * sp; its channels
    // padded to cp (a blocked private_layout's padding channels: written as f(0, 0, 0), finite)
    struct Layout {
        float* d;
        int64_t blk, cp, sn, sb, sc, sp;
    };
    auto layout = [&](bool priv, void* data) -> Layout {
        if (!priv) return {static_cast<float*>(data), C, C, C * hw, 0, hw, 1};
        float* d = static_cast<float*>(
            private_memory(c, private_layout({N, C, op->ne[1], op->ne[0]}), data).get_data_handle());
        if (!private_blocked(C)) return {d, C, C, C * hw, 0, 1, C};  // NHWC
        int64_t b = channel_block(), cp = (C + b - 1) / b * b;
        return {d, b, cp, cp * hw, b * hw, 1, b};
    };
    Layout in = layout(op->op_params[o2g::kInPrivate] == 1, x->data),
           out = layout(op->op_params[o2g::kOutPrivate] == 1, op->data);
    bool same = in.sb == out.sb && in.sc == out.sc && in.sp == out.sp;
    // an input at the output's own address (ggml's allocator reuses it) in another layout: read from a copy in the
    // arena (the same layout is read and written element by element)
    const float* xd = in.d;
    if (in.d == out.d && !same) {
        size_t bytes = size_t(N * in.sn) * sizeof(float);
        float* copy = reinterpret_cast<float*>(c.reserve(bytes));
        std::memcpy(copy, in.d, bytes);
        xd = copy;
    }
    auto in_at = [&](int64_t n, int64_t ch) { return xd + n * in.sn + ch / in.blk * in.sb + ch % in.blk * in.sc; };
    if (same && in.sc == 1 && in.blk <= 64) {  // blocked (or NHWC, a few channels: private_blocked) both sides
        int64_t blk = in.blk, groups = in.cp / blk;
#pragma omp parallel for
        for (int64_t r = 0; r < N * groups; ++r) {
            int64_t n = r / groups, c0 = r % groups * blk;
            float k[64], b[64];
            for (int64_t j = 0; j < blk; ++j) {
                k[j] = c0 + j < C ? s[n * sN + c0 + j] : 0.0f;
                b[j] = bv && c0 + j < C ? bv[c0 + j] : 0.0f;
            }
            const float* xr = in_at(n, c0);
            float* yr = out.d + n * out.sn + c0 / blk * out.sb;
            if (blk == 16)
                channel_rows<16>(xr, yr, hw, k, bv ? b : nullptr, kind, lo, hi);
            else if (blk == 8)
                channel_rows<8>(xr, yr, hw, k, bv ? b : nullptr, kind, lo, hi);
            else
                for (int64_t p = 0; p < hw; ++p)
                    for (int64_t j = 0; j < blk; ++j) yr[p * blk + j] = f(xr[p * blk + j], k[j], b[j]);
        }
    } else if (out.sc != 1) {  // NCHW output: a channel's positions contiguous
#pragma omp parallel for
        for (int64_t r = 0; r < N * C; ++r) {
            int64_t n = r / C, ch = r % C;
            float k = s[n * sN + ch], b = bv ? bv[ch] : 0.0f;
            const float* xr = in_at(n, ch);
            float* yr = out.d + n * out.sn + ch * out.sc;
            for (int64_t p = 0; p < hw; ++p) yr[p] = f(xr[p * in.sp], k, b);
        }
    } else {  // a blocked or NHWC output from another layout: a run's channels contiguous; positions in chunks
        const int64_t blk = out.blk, groups = out.cp / blk, chunk = 256, chunks = (hw + chunk - 1) / chunk;
#pragma omp parallel for
        for (int64_t r = 0; r < N * groups * chunks; ++r) {
            int64_t n = r / (groups * chunks), c0 = r / chunks % groups * blk, p0 = r % chunks * chunk;
            int64_t p1 = std::min(hw, p0 + chunk);
            float* yr = out.d + n * out.sn + c0 / blk * out.sb;
            for (int64_t j = 0; j < blk; ++j) {
                if (c0 + j >= C) {
                    for (int64_t p = p0; p < p1; ++p) yr[p * out.sp + j] = f(0.0f, 0.0f, 0.0f);
                    continue;
                }
                float k = s[n * sN + c0 + j], b = bv ? bv[c0 + j] : 0.0f;
                const float* xr = in_at(n, c0 + j);
                for (int64_t p = p0; p < p1; ++p) yr[p * out.sp + j] = f(xr[p * in.sp], k, b);
            }
        }
    }
    if (act.kind >= 3) {
        auto [alg, alpha, beta] = eltwise_of(act);
        run_eltwise(c, alg, alpha, beta, out.d, out.d, N * out.sn);
    }
}

// MUL_MAT: dst[.., M, N] = src1[.., M, K] x src0[.., N, K]^T, each operand read through its strides
// (views such as attention's K need no copy). src0's batch dims must equal src1's or be 1 (oneDNN
// broadcasting). F32 only: F16 weights (--weights f16) stay on ggml's CPU kernels, which read them
// as they are (a converted copy would cost the memory F16 weights are there to save).
inline bool mul_mat_supported(const ggml_tensor* op) {
    const ggml_tensor* a = op->src[0];
    const ggml_tensor* b = op->src[1];
    return a->type == GGML_TYPE_F32 && b->type == GGML_TYPE_F32 && op->type == GGML_TYPE_F32 &&
           ggml_is_contiguous(op) && a->nb[0] == ggml_type_size(a->type) && b->nb[0] == sizeof(float) &&
           (a->ne[2] == b->ne[2] || a->ne[2] == 1) && (a->ne[3] == b->ne[3] || a->ne[3] == 1);
}

// Matrix-vector products (src1 of at most kGemvRows rows per batch: a classifier's fully connected layers at
// batch 1, a decoder's step) are bound by reading src0 once: each of its rows is dotted with the few rows of
// src1 by ggml's vectorized F32 dot product (the same as ggml's CPU backend uses), the rows of src0 split over
// the OpenMP threads. oneDNN 2.6's matmul read the transposed [N, K] weight of such a product at ~31 GB/s here,
// this at ~50 GB/s (alexnet's 9216 x 4096 layer at batch 1: 4.9 -> 3.0 ms).
constexpr int64_t kGemvRows = 4;
inline void gemv(const ggml_tensor* dst) {
    const ggml_tensor* a = dst->src[0];  // [K, N, A2, A3]
    const ggml_tensor* b = dst->src[1];  // [K, M, B2, B3]
    const ggml_vec_dot_t dot = ggml_get_type_traits_cpu(GGML_TYPE_F32)->vec_dot;
    const int64_t K = a->ne[0], N = a->ne[1], M = b->ne[1], B2 = b->ne[2], B3 = b->ne[3];
    const int64_t rows = N * B2 * B3;
    const char* ad = static_cast<const char*>(a->data);
    const char* bd = static_cast<const char*>(b->data);
    char* dd = static_cast<char*>(dst->data);
#pragma omp parallel for schedule(static) if (rows * K * M > (int64_t(1) << 15))
    for (int64_t r = 0; r < rows; ++r) {
        const int64_t n = r % N, i2 = r / N % B2, i3 = r / (N * B2);
        const char* ar = ad + n * a->nb[1] + (a->ne[2] == 1 ? 0 : i2) * a->nb[2] + (a->ne[3] == 1 ? 0 : i3) * a->nb[3];
        for (int64_t m = 0; m < M; ++m) {
            const char* br = bd + m * b->nb[1] + i2 * b->nb[2] + i3 * b->nb[3];
            float* y = reinterpret_cast<float*>(dd + n * dst->nb[0] + m * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3]);
            dot(int(K), y, 0, ar, 0, br, 0, 1);
        }
    }
}

inline void mul_mat(Context& c, ggml_tensor* dst) {
    const ggml_tensor* a = dst->src[0];  // [K, N, A2, A3]
    const ggml_tensor* b = dst->src[1];  // [K, M, B2, B3]
    if (b->ne[1] <= kGemvRows && a->ne[0] <= INT32_MAX) return gemv(dst);
    using dims = dnnl::memory::dims;
    using dt = dnnl::memory::data_type;
    dims a_str = {int64_t(a->nb[3] / 4), int64_t(a->nb[2] / 4), 1, int64_t(a->nb[1] / 4)};
    dims src_d = {b->ne[3], b->ne[2], b->ne[1], b->ne[0]};
    dims src_s = {int64_t(b->nb[3] / 4), int64_t(b->nb[2] / 4), int64_t(b->nb[1] / 4), 1};
    dims w_d = {a->ne[3], a->ne[2], a->ne[0], a->ne[1]};
    dims dst_d = {dst->ne[3], dst->ne[2], dst->ne[1], dst->ne[0]};
    dims dst_s = {int64_t(dst->nb[3] / 4), int64_t(dst->nb[2] / 4), int64_t(dst->nb[1] / 4), 1};
    dnnl::memory::desc src_md(src_d, dt::f32, src_s), w_md(w_d, dt::f32, a_str), dst_md(dst_d, dt::f32, dst_s);
    Context::Key key = {-1};  // shapes and strides
    for (const dims* v : {&src_d, &src_s, &w_d, &a_str, &dst_s}) key.insert(key.end(), v->begin(), v->end());
    auto it = c.matmuls.find(key);
    if (it == c.matmuls.end())
        it = c.matmuls
                 .emplace(key, dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(src_md, w_md, dst_md),
                                                                         user_scratchpad(), c.eng)))
                 .first;
    dnnl::memory sm(src_md, c.eng, b->data), wm(w_md, c.eng, a->data), dm(dst_md, c.eng, dst->data);
    execute(c, it->second, {{DNNL_ARG_SRC, sm}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DST, dm}});
    c.strm.wait();
}

// CONT of a strided view of a 4-byte type (a Transpose made contiguous: shufflenet's channel shuffle,
// maxvit's window partition and merge), in the view's logical order: row copies when its rows are
// contiguous, else 32x32 tiles between its innermost dim and the dim that is contiguous in memory (ggml's
// CPU copy gathers element by element), so that such a copy between oneDNN nodes does not split the graph.
inline bool is_copy(const ggml_tensor* op) {
    const ggml_tensor* s = op->src[0];
    return op->op == GGML_OP_CONT && op->op_params[o2g::kGroupedConv] == 0 && s && !op->src[1] &&
           s->type == op->type && (op->type == GGML_TYPE_F32 || op->type == GGML_TYPE_I32) && ggml_is_contiguous(op);
}
inline void copy_strided(const ggml_tensor* op) {
    const ggml_tensor* s = op->src[0];
    const int64_t* ne = s->ne;
    int64_t st[4], dt[4] = {1, ne[0], ne[0] * ne[1], ne[0] * ne[1] * ne[2]};  // strides in elements
    for (int d = 0; d < 4; ++d) st[d] = int64_t(s->nb[d] / sizeof(uint32_t));
    const uint32_t* src = static_cast<const uint32_t*>(s->data);
    uint32_t* dst = static_cast<uint32_t*>(op->data);
    const bool big = ggml_nbytes(op) > (size_t(1) << 16);
    int k = 0;  // the dim contiguous in memory, when not the innermost
    for (int d = 1; d < 4 && st[0] != 1; ++d)
        if (st[d] == 1 && ne[d] > 1) k = d;
    if (k == 0 || ne[0] == 1) {  // rows: contiguous (memcpy) or gathered
        int64_t rows = ne[1] * ne[2] * ne[3];
#pragma omp parallel for if (big)
        for (int64_t r = 0; r < rows; ++r) {
            int64_t i1 = r % ne[1], i2 = r / ne[1] % ne[2], i3 = r / (ne[1] * ne[2]);
            const uint32_t* a = src + i1 * st[1] + i2 * st[2] + i3 * st[3];
            uint32_t* b = dst + r * ne[0];
            if (st[0] == 1)
                std::memcpy(b, a, size_t(ne[0]) * sizeof(uint32_t));
            else
                for (int64_t i = 0; i < ne[0]; ++i) b[i] = a[i * st[0]];
        }
        return;
    }
    constexpr int64_t T = 32;
    int p = k == 1 ? 2 : 1, q = k == 3 ? 2 : 3;  // the two other dims
    int64_t t0 = (ne[0] + T - 1) / T, tk = (ne[k] + T - 1) / T, n = ne[p] * ne[q] * t0 * tk;
#pragma omp parallel for if (big)
    for (int64_t t = 0; t < n; ++t) {
        int64_t a0 = t % t0 * T, ak = t / t0 % tk * T, ip = t / (t0 * tk) % ne[p], iq = t / (t0 * tk * ne[p]);
        const uint32_t* a = src + ip * st[p] + iq * st[q];
        uint32_t* b = dst + ip * dt[p] + iq * dt[q];
        int64_t e0 = std::min(a0 + T, ne[0]), ek = std::min(ak + T, ne[k]);
        for (int64_t i0 = a0; i0 < e0; ++i0)
            for (int64_t ik = ak; ik < ek; ++ik) b[i0 + ik * dt[k]] = a[i0 * st[0] + ik];
    }
}

// ---- rows: softmax and normalization --------------------------------------------------------
// SOFT_MAX over rows (ggml_soft_max, and ggml_soft_max_ext's x * scale + an F32 mask broadcast over planes
// and batches; no ALiBi, no sinks) and NORM (ggml_norm: (x - mean) / sqrt(var + eps) per row, no affine) as
// oneDNN's softmax and layer normalization primitives, so that attention and LayerNorm between oneDNN matrix
// products do not split the graph between backends.
inline bool softmax_supported(const ggml_tensor* op) {
    const ggml_tensor* x = op->src[0];
    const ggml_tensor* m = op->src[1];
    float max_bias;
    std::memcpy(&max_bias, op->op_params + 1, sizeof(float));
    return op->type == GGML_TYPE_F32 && x->type == GGML_TYPE_F32 && ggml_is_contiguous(op) &&
           ggml_is_contiguous(x) && max_bias == 0.0f && !op->src[2] &&
           (!m || (m->type == GGML_TYPE_F32 && m->nb[0] == sizeof(float) && m->ne[0] == x->ne[0] &&
                   m->ne[1] >= x->ne[1] && x->ne[2] % m->ne[2] == 0 && x->ne[3] % m->ne[3] == 0));
}
inline bool norm_rows_supported(const ggml_tensor* op) {
    return op->type == GGML_TYPE_F32 && op->src[0]->type == GGML_TYPE_F32 && ggml_is_contiguous(op) &&
           ggml_is_contiguous(op->src[0]);
}
// the primitive for `rows` rows of n floats (format ab), made once per shape
template <class P, class Make>
inline P& row_primitive(std::map<Context::Key, P>& cache, Context::Key key, Make make) {
    auto it = cache.find(key);
    if (it == cache.end()) it = cache.emplace(std::move(key), make()).first;
    return it->second;
}
inline void softmax_rows(Context& c, const ggml_tensor* op) {
    const ggml_tensor* x = op->src[0];
    const ggml_tensor* m = op->src[1];
    float scale;
    std::memcpy(&scale, op->op_params, sizeof(float));
    int64_t n0 = x->ne[0], rows = ggml_nrows(x);
    const void* src = x->data;
    if (m || scale != 1.0f) {  // dst = x * scale + mask first, then the softmax in place
        const float* xs = static_cast<const float*>(x->data);
        float* y = static_cast<float*>(op->data);
        int64_t n1 = x->ne[1], n2 = x->ne[2];
#pragma omp parallel for if (size_t(rows * n0) > (size_t(1) << 14))
        for (int64_t r = 0; r < rows; ++r) {
            int64_t i1 = r % n1, i2 = r / n1 % n2, i3 = r / (n1 * n2);
            const float* xr = xs + r * n0;
            float* yr = y + r * n0;
            if (m) {
                const float* mr = reinterpret_cast<const float*>(static_cast<const char*>(m->data) + i1 * m->nb[1] +
                                                                 i2 % m->ne[2] * m->nb[2] + i3 % m->ne[3] * m->nb[3]);
                for (int64_t i = 0; i < n0; ++i) yr[i] = xr[i] * scale + mr[i];
            } else {
                for (int64_t i = 0; i < n0; ++i) yr[i] = xr[i] * scale;
            }
        }
        src = op->data;
    }
    dnnl::memory::desc md(dnnl::memory::dims{rows, n0}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::ab);
    auto& p = row_primitive(c.softmaxes, {-6, rows, n0}, [&] {
        dnnl::softmax_forward::desc d(dnnl::prop_kind::forward_inference, md, 1);
        return dnnl::softmax_forward(dnnl::softmax_forward::primitive_desc(d, user_scratchpad(), c.eng));
    });
    execute(c, p, {{DNNL_ARG_SRC, dnnl::memory(md, c.eng, const_cast<void*>(src))},
                   {DNNL_ARG_DST, dnnl::memory(md, c.eng, op->data)}});
    c.strm.wait();
}
inline void norm_rows(Context& c, const ggml_tensor* op) {
    float eps;
    std::memcpy(&eps, op->op_params, sizeof(float));
    int64_t n0 = op->ne[0], rows = ggml_nrows(op);
    int32_t eps_bits;
    std::memcpy(&eps_bits, &eps, 4);
    dnnl::memory::desc md(dnnl::memory::dims{rows, n0}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::ab);
    auto& p = row_primitive(c.layer_norms, {-7, rows, n0, eps_bits}, [&] {
        dnnl::layer_normalization_forward::desc d(dnnl::prop_kind::forward_inference, md, eps,
                                                  dnnl::normalization_flags::none);
        return dnnl::layer_normalization_forward(
            dnnl::layer_normalization_forward::primitive_desc(d, user_scratchpad(), c.eng));
    });
    execute(c, p, {{DNNL_ARG_SRC, dnnl::memory(md, c.eng, op->src[0]->data)},
                   {DNNL_ARG_DST, dnnl::memory(md, c.eng, op->data)}});
    c.strm.wait();
}

// IM2COL (F32, 2D) when its grouped convolution's CONT runs elsewhere: dst [IC*KH*KW, OW, OH, N]
// of x [IW, IH, IC, N], row (ic, kh, kw), zero outside the input
inline bool im2col_supported(const ggml_tensor* op) {
    return op->op_params[o2g::kGroupedConv] == 1 && op->op_params[6] == 1 && op->type == GGML_TYPE_F32 &&
           op->src[1]->type == GGML_TYPE_F32 && ggml_is_contiguous(op->src[1]) && ggml_is_contiguous(op);
}
inline void im2col(const ggml_tensor* dst) {
    const ggml_tensor* k = dst->src[0];
    const ggml_tensor* x = dst->src[1];
    const int32_t* o = dst->op_params;  // s0, s1, p0, p1, d0, d1, is_2D
    const int64_t KW = k->ne[0], KH = k->ne[1], IW = x->ne[0], IH = x->ne[1], IC = x->ne[2];
    const int64_t OW = dst->ne[1], OH = dst->ne[2], N = dst->ne[3], K = IC * KH * KW;
    const float* xs = static_cast<const float*>(x->data);
    float* d = static_cast<float*>(dst->data);
#pragma omp parallel for collapse(2)
    for (int64_t n = 0; n < N; ++n)
        for (int64_t oh = 0; oh < OH; ++oh)
            for (int64_t ow = 0; ow < OW; ++ow) {
                float* row = d + ((n * OH + oh) * OW + ow) * K;
                for (int64_t ic = 0; ic < IC; ++ic)
                    for (int64_t kh = 0; kh < KH; ++kh) {
                        int64_t iy = oh * o[1] + kh * o[5] - o[3];
                        for (int64_t kw = 0; kw < KW; ++kw) {
                            int64_t ix = ow * o[0] + kw * o[4] - o[2];
                            row[(ic * KH + kh) * KW + kw] = iy >= 0 && iy < IH && ix >= 0 && ix < IW
                                                                ? xs[((n * IC + ic) * IH + iy) * IW + ix]
                                                                : 0.0f;
                        }
                    }
            }
}

// POOL_2D (ggml_pool_2d: padding p on both sides, MAX over the taps inside the input, AVG divided
// by all k0*k1 taps) on NCHW data or, a pooling between convolutions (o2g::conv_chain), in
// private_layout, as oneDNN's pooling (its NCHW kernel is multithreaded, ggml's is not): the right
// padding is what gives ggml's output size (o2g::pool_right_pad).
using o2g::pool_right_pad;

inline bool pool_supported(const ggml_tensor* op) {
    const ggml_tensor* x = op->src[0];
    int64_t pr;
    return op->op == GGML_OP_POOL_2D && x->type == GGML_TYPE_F32 && op->type == GGML_TYPE_F32 &&
           ggml_is_contiguous(x) && ggml_is_contiguous(op) &&
           (op->op_params[0] == GGML_OP_POOL_MAX || op->op_params[0] == GGML_OP_POOL_AVG) &&
           pool_right_pad(op, 0, pr) && pool_right_pad(op, 1, pr);
}

inline void pool2d(Context& c, ggml_tensor* dst) {
    const ggml_tensor* x = dst->src[0];
    const int32_t* o = dst->op_params;
    using dims = dnnl::memory::dims;
    int64_t pr0, pr1;
    pool_right_pad(dst, 0, pr0);
    pool_right_pad(dst, 1, pr1);
    dims src_d = {x->ne[3], x->ne[2], x->ne[1], x->ne[0]}, dst_d = {dst->ne[3], dst->ne[2], dst->ne[1], dst->ne[0]};
    dims strides = {o[4], o[3]}, kernel = {o[2], o[1]}, pl = {o[6], o[5]}, pr = {pr1, pr0};
    bool in_priv = o[o2g::kInPrivate] == 1, out_priv = o[o2g::kOutPrivate] == 1;
    auto layout = [](const dims& d, bool priv) {
        return priv ? private_layout(d)
                    : dnnl::memory::desc(d, dnnl::memory::data_type::f32, dnnl::memory::format_tag::nchw);
    };
    dnnl::memory::desc src_md = layout(src_d, in_priv), dst_md = layout(dst_d, out_priv);
    Context::Key key = {-2,   o[0], src_d[0], src_d[1], src_d[2], src_d[3], dst_d[2], dst_d[3],
                        o[1], o[2], o[3],     o[4],     o[5],     o[6],     in_priv,  out_priv};
    auto it = c.pools.find(key);
    if (it == c.pools.end()) {
        // oneDNN's fast pooling kernels want the input and the output in one layout (a max pooling
        // after a channel Concat, reading NCHW and feeding a convolution in private_layout, ran its
        // reference kernel: 72% of squeezenet1_1's time); when they differ, the pooling writes the
        // input's layout and a reorder (of the pooled map, the smaller one) gives the output's.
        Context::Pool p;
        p.mid = layout(dst_d, in_priv);
        auto alg =
            o[0] == GGML_OP_POOL_MAX ? dnnl::algorithm::pooling_max : dnnl::algorithm::pooling_avg_include_padding;
        dnnl::pooling_forward::desc d(dnnl::prop_kind::forward_inference, alg, src_md, p.mid, strides, kernel, pl, pr);
        p.pool = dnnl::pooling_forward(dnnl::pooling_forward::primitive_desc(d, user_scratchpad(), c.eng));
        if (in_priv != out_priv)
            p.to_dst = dnnl::reorder(dnnl::reorder::primitive_desc(c.eng, p.mid, c.eng, dst_md, user_scratchpad()));
        it = c.pools.emplace(key, std::move(p)).first;
    }
    const Context::Pool& p = it->second;
    dnnl::memory sm = in_priv ? private_memory(c, src_md, x->data) : dnnl::memory(src_md, c.eng, x->data);
    dnnl::memory dm = out_priv ? private_memory(c, dst_md, dst->data) : dnnl::memory(dst_md, c.eng, dst->data);
    if (in_priv == out_priv) {
        execute(c, p.pool, {{DNNL_ARG_SRC, sm}, {DNNL_ARG_DST, dm}});
    } else {
        dnnl::memory mm(p.mid, c.eng, c.reserve(p.mid.get_size()));
        execute(c, p.pool, {{DNNL_ARG_SRC, sm}, {DNNL_ARG_DST, mm}});
        execute(c, p.to_dst, {{DNNL_ARG_FROM, mm}, {DNNL_ARG_TO, dm}});
    }
    c.strm.wait();
}

// GROUP_NORM (ggml_group_norm: groups of ceil(C / G) consecutive channels of [W, H, C, N], each
// normalized over its channels' W x H values), and the in-place ops onnx2ggml's lowering writes on
// its output (lower_group_norm): the per-channel affine (MUL by gamma, ADD of beta, [1, 1, C, 1])
// and a SiLU. ggml's CPU backend runs these as four passes over the tensor (the per-channel ops
// element by element); here they are two: the groups' statistics, then one oneDNN binary
// primitive ((x - mean) * (inv_std * gamma) + beta, SiLU as its post-ops).
inline bool norm_supported(const ggml_tensor* op) {
    const ggml_tensor* x = op->src[0];
    return op->op == GGML_OP_GROUP_NORM && x && x->type == GGML_TYPE_F32 && op->type == GGML_TYPE_F32 &&
           ggml_is_contiguous(x) && ggml_is_contiguous(op) && op->op_params[0] > 0;
}
// The GROUP_NORM whose output `op` overwrites in place (its input being that output or a view of it).
inline const ggml_tensor* norm_behind(const ggml_tensor* op) {
    const ggml_tensor* n = op->view_src;
    const ggml_tensor* x = op->src[0];
    bool on_it =
        n && x && (x == n || x->view_src == n) && ggml_nelements(x) == ggml_nelements(n) && ggml_is_contiguous(x);
    return on_it && norm_supported(n) && ggml_is_contiguous(op) && ggml_nelements(op) == ggml_nelements(n) ? n
                                                                                                           : nullptr;
}
// MUL or ADD in place on a GROUP_NORM output by a per-channel [1, 1, C, 1] F32 tensor
inline bool is_norm_affine(const ggml_tensor* op) {
    const ggml_tensor* n = norm_behind(op);
    const ggml_tensor* b = op->src[1];
    return (op->op == GGML_OP_MUL || op->op == GGML_OP_ADD) && n && ggml_are_same_shape(op, n) && b &&
           b->type == GGML_TYPE_F32 && ggml_is_contiguous(b) && b->ne[0] == 1 && b->ne[1] == 1 &&
           b->ne[2] == n->ne[2] && b->ne[3] == 1;
}
inline bool is_norm_silu(const ggml_tensor* op) {
    return op->op == GGML_OP_UNARY && ggml_get_unary_op(op) == GGML_UNARY_OP_SILU && norm_behind(op);
}

// dst = silu?((x - mean) * inv_std * gamma + beta) per group (gamma, beta: [1, 1, C, 1], or null)
inline void group_norm(Context& c, const ggml_tensor* dst, const ggml_tensor* gamma, const ggml_tensor* beta,
                       bool silu) {
    const ggml_tensor* x = dst->src[0];
    int64_t S = x->ne[0] * x->ne[1], C = x->ne[2], N = x->ne[3], G = dst->op_params[0], cpg = (C + G - 1) / G;
    float eps;
    std::memcpy(&eps, dst->op_params + 1, sizeof(float));
    const float* xd = static_cast<const float*>(x->data);
    // per (batch, group): mean and 1/std over its channels' values (contiguous), in double from float
    // partial sums of blocks, shifted by the group's first value (no cancellation when the values sit
    // far from 0)
    std::vector<float> mean(size_t(N * C)), scale(size_t(N * C));
#pragma omp parallel for schedule(static)
    for (int64_t ng = 0; ng < N * G; ++ng) {
        int64_t nb = ng / G, c0 = ng % G * cpg, c1 = std::min(C, c0 + cpg);
        if (c0 >= C) continue;
        const float* p = xd + (nb * C + c0) * S;
        int64_t cnt = (c1 - c0) * S;
        float k = p[0];
        double s = 0, ss = 0;
        for (int64_t i0 = 0; i0 < cnt; i0 += 1024) {
            int64_t e = std::min(cnt, i0 + 1024);
            float fs = 0, fss = 0;
#pragma omp simd reduction(+ : fs, fss)
            for (int64_t i = i0; i < e; ++i) {
                float d = p[i] - k;
                fs += d;
                fss += d * d;
            }
            s += fs;
            ss += fss;
        }
        double m = s / double(cnt), var = std::max(0.0, ss / double(cnt) - m * m), inv = 1.0 / std::sqrt(var + eps);
        for (int64_t ch = c0; ch < c1; ++ch) {
            mean[size_t(nb * C + ch)] = float(m + k);
            scale[size_t(nb * C + ch)] = float(inv) * (gamma ? static_cast<const float*>(gamma->data)[ch] : 1.0f);
        }
    }
    using dims = dnnl::memory::dims;
    dnnl::memory::desc xd_md(dims{1, C, S}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::abc),
        c_md(dims{1, C, 1}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::abc);
    Context::Key key = {-3, C, S, beta != nullptr, silu};
    auto it = c.norms.find(key);
    if (it == c.norms.end()) {
        dnnl::post_ops po;
        po.append_binary(dnnl::algorithm::binary_mul, c_md);
        if (beta) po.append_binary(dnnl::algorithm::binary_add, c_md);
        if (silu) po.append_eltwise(1.0f, dnnl::algorithm::eltwise_swish, 1.0f, 0.0f);
        dnnl::primitive_attr attr = user_scratchpad();
        attr.set_post_ops(po);
        dnnl::binary::primitive_desc pd(dnnl::binary::desc(dnnl::algorithm::binary_sub, xd_md, c_md, xd_md), attr,
                                        c.eng);
        it = c.norms.emplace(key, dnnl::binary(pd)).first;
    }
    for (int64_t nb = 0; nb < N; ++nb) {  // one batch at a time: the statistics differ per batch
        std::unordered_map<int, dnnl::memory> args = {
            {DNNL_ARG_SRC_0, dnnl::memory(xd_md, c.eng, const_cast<float*>(xd) + nb * C * S)},
            {DNNL_ARG_SRC_1, dnnl::memory(c_md, c.eng, mean.data() + nb * C)},
            {DNNL_ARG_DST, dnnl::memory(xd_md, c.eng, static_cast<float*>(dst->data) + nb * C * S)},
            {DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, dnnl::memory(c_md, c.eng, scale.data() + nb * C)}};
        if (beta) args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(1) | DNNL_ARG_SRC_1] = dnnl::memory(c_md, c.eng, beta->data);
        execute(c, it->second, args);
    }
    c.strm.wait();
}

// Elementwise ops as oneDNN's vectorized eltwise primitive: SIGMOID, GELU_ERF, SILU, HARDSWISH, RELU, TANH, EXP,
// ABS, NEG, SQR, SQRT, SCALE (x * s + b) and CLAMP (a HardSigmoid's SCALE + CLAMP: 18 of mobilenet_v3_small's 19
// scheduler splits when its CLAMP went to ggml's CPU backend). ggml's CPU kernels compute the transcendental ones element by
// element (10% of CLIP's time in its QuickGELU, 3% of the UNet's in its GEGLU, 52% of mobilenet_v3_small's in
// its HardSwish, 36% of GPT-2's in its tanh GELU); and any of them between oneDNN nodes (densenet's ReLU after
// each BatchNorm, the steps of a GELU written out) would cost two scheduler splits on the CPU backend.
using EltwiseAlg = std::tuple<dnnl::algorithm, float, float>;
inline bool eltwise_alg(const ggml_tensor* op, EltwiseAlg* e) {
    using alg = dnnl::algorithm;
    if (op->op == GGML_OP_SCALE) {
        float sb[2];
        std::memcpy(sb, op->op_params, sizeof(sb));
        *e = {alg::eltwise_linear, sb[0], sb[1]};
        return true;
    }
    if (op->op == GGML_OP_CLAMP) {  // ggml's max(min(x, hi), lo) (a HardSigmoid's last step, a Clip)
        float lohi[2];
        std::memcpy(lohi, op->op_params, sizeof(lohi));
        *e = {alg::eltwise_clip, lohi[0], lohi[1]};
        return true;
    }
    if (op->op == GGML_OP_SQR || op->op == GGML_OP_SQRT) {
        *e = {op->op == GGML_OP_SQR ? alg::eltwise_square : alg::eltwise_sqrt, 0.0f, 0.0f};
        return true;
    }
    if (op->op != GGML_OP_UNARY) return false;
    switch (ggml_get_unary_op(op)) {
        case GGML_UNARY_OP_RELU: *e = {alg::eltwise_relu, 0.0f, 0.0f}; return true;
        case GGML_UNARY_OP_SIGMOID: *e = {alg::eltwise_logistic, 0.0f, 0.0f}; return true;
        case GGML_UNARY_OP_SILU: *e = {alg::eltwise_swish, 1.0f, 0.0f}; return true;
        case GGML_UNARY_OP_HARDSWISH: *e = {alg::eltwise_hardswish, 1.0f / 6.0f, 0.5f}; return true;
        case GGML_UNARY_OP_GELU_ERF: *e = {alg::eltwise_gelu_erf, 0.0f, 0.0f}; return true;
        case GGML_UNARY_OP_TANH: *e = {alg::eltwise_tanh, 0.0f, 0.0f}; return true;
        case GGML_UNARY_OP_EXP: *e = {alg::eltwise_exp, 0.0f, 0.0f}; return true;
        case GGML_UNARY_OP_ABS: *e = {alg::eltwise_abs, 0.0f, 0.0f}; return true;
        case GGML_UNARY_OP_NEG: *e = {alg::eltwise_linear, -1.0f, 0.0f}; return true;
        default: return false;
    }
}
inline bool is_eltwise(const ggml_tensor* op) {
    EltwiseAlg e;
    return eltwise_alg(op, &e) && op->type == GGML_TYPE_F32 && op->src[0]->type == GGML_TYPE_F32 &&
           ggml_is_contiguous(op) && ggml_is_contiguous(op->src[0]) && ggml_nelements(op) == ggml_nelements(op->src[0]);
}

// is_eltwise's op, and the SiLU of is_norm_silu when its GROUP_NORM ran alone (swish, in place)
inline void eltwise(Context& c, const ggml_tensor* op) {
    EltwiseAlg e;
    eltwise_alg(op, &e);
    auto [alg, alpha, beta] = e;
    run_eltwise(c, alg, alpha, beta, op->src[0]->data, op->data, ggml_nelements(op));
}

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
    c.fit_primitives(omp_get_max_threads());
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

// A node's work, in multiply-adds (a convolution's or matrix product's) or elements moved (the rest): what
// decides whether the node is worth the threads (threads_for).
inline int64_t node_work(const ggml_tensor* n) {
    switch (n->op) {
        case GGML_OP_CONV_2D:
        case GGML_OP_CONV_2D_DW:
        case GGML_OP_CONT: {
            if (n->op == GGML_OP_CONT && n->op_params[o2g::kGroupedConv] <= 1) break;
            const ggml_tensor* k = n->op == GGML_OP_CONT ? n->src[3] : n->src[0];  // [KW, KH, IC / groups, OC]
            return ggml_nelements(n) * k->ne[0] * k->ne[1] * (n->op == GGML_OP_CONV_2D_DW ? 1 : k->ne[2]);
        }
        case GGML_OP_MUL_MAT: return ggml_nelements(n) * n->src[0]->ne[0];
        default: break;
    }
    return ggml_nelements(n);
}

// The OpenMP threads a node runs on: all of them, or the calling thread alone when the node is too small to gain
// from more: below 512K multiply-adds or 16K elements a parallel region's wake-up and barrier cost more than the
// second thread saves (measured on the zoo's small CNNs, 2 threads: shufflenet_v2_x0_5 1.53 -> 1.28 ms,
// mobilenet_v3_small 1.30 -> 1.16 ms; squeezenet, efficientnet_b0, mnasnet, regnet, googlenet, resnet18 within
// noise). A primitive is created on the thread count it then runs on: the same node shape always
// gets the same count, so the cached primitives stay consistent.
inline int threads_for(const ggml_tensor* n, int all) {
    const bool compute = n->op == GGML_OP_CONV_2D || n->op == GGML_OP_CONV_2D_DW || n->op == GGML_OP_MUL_MAT ||
                         (n->op == GGML_OP_CONT && n->op_params[o2g::kGroupedConv] > 1);
    return node_work(n) < (compute ? int64_t(1) << 19 : int64_t(1) << 14) ? 1 : all;
}

// Sets the OpenMP thread count for the nodes computed next, and restores the graph's on leaving.
struct NodeThreads {
    int all = omp_get_max_threads(), cur = all;
    void set(int n) {
        if (n != cur) omp_set_num_threads(cur = n);
    }
    ~NodeThreads() { set(all); }
};

inline ggml_status compute_nodes(Context& c, ggml_cgraph* g) {
    int n_nodes = ggml_graph_n_nodes(g);
    NodeThreads threads;
    auto next = [&](int j) {  // the next node that computes something (reshapes and views do not)
        while (j < n_nodes && is_view_op(ggml_graph_node(g, j)->op)) ++j;
        return j;
    };
    // the node after node i (views skipped) when `fits` holds for it: i moves to it; else nullptr (i stays)
    auto take = [&](int& i, auto fits) -> const ggml_tensor* {
        int j = next(i + 1);
        if (j >= n_nodes || !fits(ggml_graph_node(g, j))) return nullptr;
        i = j;
        return ggml_graph_node(g, j);
    };
    // the per-channel bias add and the activation in place on n's output that follow node i (i moves past them)
    auto bias_after = [&](int& i, const ggml_tensor* n) {
        const ggml_tensor* b = take(i, [n](const ggml_tensor* m) { return is_conv_bias(m) && m->src[0] == n; });
        return b ? b->src[1] : nullptr;
    };
    auto activation_after = [&](int& i, const ggml_tensor* n) {
        return activation_of(take(i, [n](const ggml_tensor* m) { return is_conv_activation(m) && m->view_src == n; }));
    };
    // a convolution (conv_like) at node i: the bias add, residual sum and activation that follow are in
    // place (same memory): one primitive; i moves to the last of them
    auto convolution = [&](int& i, ggml_tensor* n) {
        const ggml_tensor* bias = bias_after(i, n);
        const ggml_tensor* r = take(i, [n](const ggml_tensor* m) { return is_conv_residual(m) && m->view_src == n; });
        Activation act = activation_after(i, n);
        conv2d(c, n, bias, r ? r->src[1] : nullptr, act, n->data);
    };
    for (int i = 0; i < n_nodes; ++i) {
        ggml_tensor* n = ggml_graph_node(g, i);
        if ((n->flags & GGML_TENSOR_FLAG_COMPUTE) == 0) continue;
        if (!is_view_op(n->op)) threads.set(threads_for(n, threads.all));
        switch (n->op) {
            case GGML_OP_CONV_2D:
            case GGML_OP_CONV_2D_DW: convolution(i, n); break;
            case GGML_OP_GROUP_NORM: {
                // its affine (MUL, then ADD) and SiLU in place after it: one pass
                const ggml_tensor* fused[2] = {nullptr, nullptr};  // gamma, beta
                for (int k = 0; k < 2; ++k) {
                    const ggml_tensor* m = take(i, [n, k](const ggml_tensor* t) {
                        return t->op == (k == 0 ? GGML_OP_MUL : GGML_OP_ADD) && is_norm_affine(t) && t->view_src == n;
                    });
                    if (m) fused[k] = m->src[1];
                }
                bool act = take(i, [n](const ggml_tensor* m) { return is_norm_silu(m) && m->view_src == n; });
                group_norm(c, n, fused[0], fused[1], act);
                break;
            }
            case GGML_OP_MUL:
                if (is_norm_affine(n)) channel_op(n);
                else if (!is_channel_product(n)) binary(n);
                else {  // its per-channel bias and activation in place after it: one pass
                    const ggml_tensor* bias = bias_after(i, n);
                    channel_product(c, n, bias, activation_after(i, n));
                }
                break;
            case GGML_OP_ADD:
                is_conv_residual(n) ? add_residual(c, n)
                : is_norm_affine(n) ? channel_op(n)
                : is_conv_bias(n)   ? add_bias(c, n)
                                    : binary(n);
                break;
            case GGML_OP_SUB:
            case GGML_OP_DIV: binary(n); break;
            case GGML_OP_UNARY:  // (a convolution's output may be in private_layout: activation() reads it so)
                is_conv_activation(n) ? activation(c, n) : eltwise(c, n);
                break;
            case GGML_OP_CLAMP: is_conv_activation(n) ? activation(c, n) : eltwise(c, n); break;
            case GGML_OP_SCALE:
            case GGML_OP_SQR:
            case GGML_OP_SQRT: eltwise(c, n); break;
            case GGML_OP_MUL_MAT:
                if (n->op_params[o2g::kGroupedConv] != 1 || !grouped_output_follows(g, i, n)) mul_mat(c, n);
                break;
            case GGML_OP_IM2COL:
                if (!grouped_output_follows(g, i, n)) im2col(n);
                break;
            case GGML_OP_CONT:
                if (is_copy(n)) copy_strided(n);
                else convolution(i, n);  // (grouped_supported)
                break;
            case GGML_OP_SOFT_MAX: softmax_rows(c, n); break;
            case GGML_OP_NORM: norm_rows(c, n); break;
            case GGML_OP_POOL_2D: pool2d(c, n); break;
            case GGML_OP_SET: set_rows(n); break;
            case GGML_OP_MEAN: mean_rows(n); break;
            default:
                if (!is_view_op(n->op)) return GGML_STATUS_FAILED;
        }
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
inline const char* dev_description(ggml_backend_dev_t) { return "oneDNN CPU convolutions, matmuls and the ops between them (onnx2ggml)"; }
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
    switch (op->op) {
        case GGML_OP_CONV_2D:
        case GGML_OP_CONV_2D_DW: return conv_supported(op);
        case GGML_OP_ADD: return is_conv_bias(op) || is_conv_residual(op) || is_norm_affine(op) || is_binary(op);
        case GGML_OP_MUL: return is_norm_affine(op) || is_channel_product(op) || is_binary(op);
        case GGML_OP_SUB:
        case GGML_OP_DIV: return is_binary(op);
        case GGML_OP_GROUP_NORM: return norm_supported(op);
        case GGML_OP_UNARY: return is_conv_activation(op) || is_norm_silu(op) || is_eltwise(op);
        case GGML_OP_CLAMP: return is_conv_activation(op) || is_eltwise(op);
        case GGML_OP_SCALE:
        case GGML_OP_SQR:
        case GGML_OP_SQRT: return is_eltwise(op);
        case GGML_OP_MUL_MAT: return mul_mat_supported(op);
        case GGML_OP_IM2COL: return im2col_supported(op);
        case GGML_OP_CONT: return grouped_supported(op) || is_copy(op);
        case GGML_OP_SOFT_MAX: return softmax_supported(op);
        case GGML_OP_NORM: return norm_rows_supported(op);
        case GGML_OP_POOL_2D: return pool_supported(op);
        case GGML_OP_SET: return is_set(op);
        case GGML_OP_MEAN: return is_mean(op);
        default: return false;
    }
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

#endif  // O2G_USE_ONEDNN
