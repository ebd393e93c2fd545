// onnx2ggml's oneDNN backend (o2g_onednn.h): per-channel and broadcast arithmetic (bias, affine, channel products,
// binary ops).
#pragma once
#include "conv.h"

namespace o2g_onednn {

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

// ADD, SUB, MUL or DIV (F32, dense output) of src0 and a dense src1 that repeats into it (each of src1's dims src0's
// or 1, ggml's broadcast): residual sums, a bias over rows, per-row statistics, a squeeze-excitation block's per-
// channel scale (src1's ne[0] 1: ggml's CPU kernels take each such row as ne[0] one-element operations, 27% of
// efficientnet_b0's time in its 16 SE products), attention's position biases. src0 may be a view with strided rows
// (its elements dense, as ggml's CPU kernels take it) (attention's query scaled after its heads were transposed out:
// vit_b_16's 12 DIVs, each a scheduler split on ggml's CPU backend before). On this backend so that an elementwise
// step between oneDNN nodes does not split the graph between backends (a split costs more than a small operation);
// the same float operation per element as ggml's, so the values are identical.
inline bool is_binary(const ggml_tensor* op) {
    const ggml_tensor* a = op->src[0];
    const ggml_tensor* b = op->src[1];
    bool binary = op->op == GGML_OP_ADD || op->op == GGML_OP_SUB || op->op == GGML_OP_MUL || op->op == GGML_OP_DIV;
    if (!binary || !a || !b || op->type != GGML_TYPE_F32 || a->type != GGML_TYPE_F32 || b->type != GGML_TYPE_F32 ||
        !ggml_is_contiguous(op) || !ggml_is_contiguous(b) || !ggml_are_same_shape(op, a) || a->nb[0] != sizeof(float))
        return false;
    for (int d = 0; d < GGML_MAX_DIMS; ++d)
        if (b->ne[d] != 1 && b->ne[d] != op->ne[d]) return false;
    return true;
}
template <class F>
inline void binary_rows(const ggml_tensor* op, F f) {
    const ggml_tensor* a = op->src[0];
    const ggml_tensor* b = op->src[1];
    const char* x = static_cast<const char*>(a->data);
    const float* s = static_cast<const float*>(b->data);
    float* y = static_cast<float*>(op->data);
    int64_t n0 = op->ne[0], n1 = op->ne[1], n2 = op->ne[2], rows = ggml_nrows(op);
    bool scalar = b->ne[0] == 1;
#pragma omp parallel for if (size_t(rows * n0) > (size_t(1) << 14))
    for (int64_t r = 0; r < rows; ++r) {
        int64_t i1 = r % n1, i2 = r / n1 % n2, i3 = r / (n1 * n2);
        const float* br = s + (((i3 % b->ne[3]) * b->ne[2] + i2 % b->ne[2]) * b->ne[1] + i1 % b->ne[1]) * b->ne[0];
        const float* xr = reinterpret_cast<const float*>(x + i1 * a->nb[1] + i2 * a->nb[2] + i3 * a->nb[3]);
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
inline void channel_rows_as(const float* x, float* y, int64_t hw, const float* k, const float* b, float lo, float hi) {
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
        if (b) channel_rows_as<B, K, true>(x, y, hw, k, b, lo, hi);
        else channel_rows_as<B, K, false>(x, y, hw, k, b, lo, hi);
    };
    if (kind == 1) go(std::integral_constant<int, 1>{});
    else if (kind == 2) go(std::integral_constant<int, 2>{});
    else go(std::integral_constant<int, 0>{});
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
            if (blk == 16) channel_rows<16>(xr, yr, hw, k, bv ? b : nullptr, kind, lo, hi);
            else if (blk == 8) channel_rows<8>(xr, yr, hw, k, bv ? b : nullptr, kind, lo, hi);
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

}  // namespace o2g_onednn
