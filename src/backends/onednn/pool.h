// onnx2ggml's oneDNN backend (o2g_onednn.h): pooling.
#pragma once
#include "norm.h"

namespace o2g_onednn {

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
    Context::Key key = {-2,   o[0], src_d[0], src_d[1], src_d[2], src_d[3], dst_d[2], dst_d[3],     o[1],
                        o[2], o[3], o[4],     o[5],     o[6],     in_priv,  out_priv, run_threads()};
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

}  // namespace o2g_onednn
