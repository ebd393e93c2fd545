// onnx2ggml's oneDNN backend (o2g_onednn.h): softmax, LayerNorm's and GroupNorm's normalizations.
#pragma once
#include "copy.h"

namespace o2g_onednn {

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
    return op->type == GGML_TYPE_F32 && x->type == GGML_TYPE_F32 && ggml_is_contiguous(op) && ggml_is_contiguous(x) &&
           max_bias == 0.0f && !op->src[2] &&
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
    key.push_back(run_threads());
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
    execute(c, p,
            {{DNNL_ARG_SRC, dnnl::memory(md, c.eng, const_cast<void*>(src))},
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
    execute(
        c, p,
        {{DNNL_ARG_SRC, dnnl::memory(md, c.eng, op->src[0]->data)}, {DNNL_ARG_DST, dnnl::memory(md, c.eng, op->data)}});
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
    Context::Key key = {-3, C, S, beta != nullptr, silu, run_threads()};
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

}  // namespace o2g_onednn
