// onnx2ggml's oneDNN backend (o2g_onednn.h): data movement: Concat's slots, row means, strided copies, im2col.
#pragma once
#include "matmul.h"

namespace o2g_onednn {

// SET in place of a dense F32/I32 tensor (onnx2ggml's Concat and rank-5 Transpose copy each part into its
// slot of the output so): parallel row copies here, so that a Concat between oneDNN nodes stays on this
// backend (squeezenet's fire modules, densenet's dense layers: two scheduler splits each on ggml's CPU).
inline bool is_set(const ggml_tensor* op) {
    const ggml_tensor* b = op->src[1];
    return op->op == GGML_OP_SET && op->op_params[4] == 1 && b && op->src[0] &&  // {nb1, nb2, nb3, offset, inplace}
           (op->type == GGML_TYPE_F32 || op->type == GGML_TYPE_I32) && b->type == op->type && ggml_is_contiguous(b);
}
// A SET marked by o2g::conv_into_slot that copies all of convolution n's output (in place on it) into one
// contiguous slot: n may write there instead.
inline bool is_slot_of(const ggml_tensor* op, const ggml_tensor* n) {
    const ggml_tensor* b = op->src[1];
    if (!is_set(op) || op->op_params[o2g::kIntoSlot] != 1 || b->data != n->data || ggml_nbytes(b) != ggml_nbytes(n))
        return false;
    size_t nb = ggml_element_size(b) * size_t(b->ne[0]);  // the slot's strides must be b's own (dense)
    for (int d = 1; d < 4; ++d) {
        if (b->ne[d] > 1 && size_t(op->op_params[d - 1]) != nb) return false;
        nb *= size_t(b->ne[d]);
    }
    return true;
}
// Whether convolution n keeps its output in a private layout larger than ggml's tensor (channels padded to the
// block: in a shadow, see private_memory)
inline bool padded_private(const ggml_tensor* n) {
    return n->op_params[o2g::kOutPrivate] == 1 && private_blocked(n->ne[2]) && n->ne[2] % channel_block() != 0;
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
        const float* x =
            reinterpret_cast<const float*>(static_cast<const char*>(a->data) + size_t(r % n1) * a->nb[1] +
                                           size_t(r / n1 % n2) * a->nb[2] + size_t(r / (n1 * n2)) * a->nb[3]);
        double sum = 0;
        for (int64_t i = 0; i < n0; ++i) sum += double(x[i]);
        y[r] = float(sum) / float(n0);
    }
}

// CONT of a strided view of a 4-byte type (a Transpose made contiguous: shufflenet's channel shuffle,
// maxvit's window partition and merge), in the view's logical order: row copies when its rows are
// contiguous, else 32x32 tiles between its innermost dim and the dim that is contiguous in memory (ggml's
// CPU copy gathers element by element), so that such a copy between oneDNN nodes does not split the graph.
inline bool is_copy(const ggml_tensor* op) {
    const ggml_tensor* s = op->src[0];
    return op->op == GGML_OP_CONT && op->op_params[o2g::kGroupedConv] == 0 && s && !op->src[1] && s->type == op->type &&
           (op->type == GGML_TYPE_F32 || op->type == GGML_TYPE_I32) && ggml_is_contiguous(op);
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
            if (st[0] == 1) std::memcpy(b, a, size_t(ne[0]) * sizeof(uint32_t));
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

}  // namespace o2g_onednn
