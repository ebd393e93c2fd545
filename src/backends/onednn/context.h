// onnx2ggml's oneDNN backend (o2g_onednn.h): the context of one backend instance (cached primitives, plans, the
// arena, shadows) and the private layout activations keep between convolutions.
#pragma once
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

// The OpenMP threads the node being computed runs on (graph_compute's count, or one for a small node:
// threads_for). A primitive is made for the count it runs on (oneDNN sizes per-thread buffers and splits
// the work when it makes one), so the count is part of every cached primitive's key and plan's: with the
// default thread count, which follows the cores free at each run (o2g_runtime.h), a backend keeps one
// primitive per count it has run a shape on, and never runs one on more threads than it was made for.
inline int64_t run_threads() { return omp_get_max_threads(); }

struct Context {
    dnnl::engine eng{dnnl::engine::kind::cpu, 0};
    dnnl::stream strm{eng};
    int n_threads = 0;
    // key (shape, parameters, run_threads) -> primitive (created once, reused by every run)
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
    };
    std::map<Key, Blocked> blocked;
    std::shared_ptr<SharedKernels> shared;  // set_shared_kernels: kernels reordered by other sessions
    // the weights' kernels this backend reordered (those not in `shared`), by ggml data: one copy per layout,
    // shared by every primitive that takes it (a shape's primitives for one thread count and for another)
    std::map<const void*, std::vector<std::pair<dnnl::memory::desc, dnnl::memory>>> kernels;
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
    std::map<std::pair<const ggml_tensor*, int64_t>, Plan> plans;  // by node and run_threads
    std::vector<int64_t> sig;                                      // the signature being checked (its storage reused)
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

}  // namespace o2g_onednn
