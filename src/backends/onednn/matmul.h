// onnx2ggml's oneDNN backend (o2g_onednn.h): matrix products (oneDNN's matmul, matrix-vector products).
#pragma once
#include "binary.h"

namespace o2g_onednn {

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
            float* y =
                reinterpret_cast<float*>(dd + n * dst->nb[0] + m * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3]);
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
    key.push_back(run_threads());
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

}  // namespace o2g_onednn
