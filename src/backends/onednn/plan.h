// onnx2ggml's oneDNN backend (o2g_onednn.h): executing primitives: scratchpads, and the per-node plans replayed
// while a node's signature stays.
#pragma once
#include "patterns.h"

namespace o2g_onednn {

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
    const std::pair<const ggml_tensor*, int64_t> key(node, run_threads());
    auto it = c.plans.find(key);
    if (it == c.plans.end() || it->second.sig != c.sig) {
        Context::Plan p = build();  // may empty c.plans (Context::reserve)
        attach_scratchpads(c, p);   // likewise (Context::scratch_for)
        p.sig = c.sig;
        it = c.plans.insert_or_assign(key, std::move(p)).first;
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

}  // namespace o2g_onednn
