// CPU kernels for ONNX elementwise ops that ggml has no kernel for, run as ggml custom ops
// (ggml_map_custom1/2/3). Header-only and shared verbatim by onnx2ggml and by the programs it
// generates, so `run` and the compiled program compute the same bits. Inputs are contiguous
// F32 tensors of the output's shape (the lowering broadcasts them first); booleans are 0/1.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "ggml.h"

namespace o2g {

template <class F>
inline void map1(ggml_tensor* dst, const ggml_tensor* a, int ith, int nth, F f) {
    const int64_t n = ggml_nelements(dst), chunk = (n + nth - 1) / nth;
    const int64_t i0 = chunk * ith, i1 = i0 + chunk < n ? i0 + chunk : n;
    float* d = static_cast<float*>(dst->data);
    const float* x = static_cast<const float*>(a->data);
    for (int64_t i = i0; i < i1; ++i) d[i] = f(x[i]);
}

template <class F>
inline void map2(ggml_tensor* dst, const ggml_tensor* a, const ggml_tensor* b, int ith, int nth, F f) {
    const int64_t n = ggml_nelements(dst), chunk = (n + nth - 1) / nth;
    const int64_t i0 = chunk * ith, i1 = i0 + chunk < n ? i0 + chunk : n;
    float* d = static_cast<float*>(dst->data);
    const float* x = static_cast<const float*>(a->data);
    const float* y = static_cast<const float*>(b->data);
    for (int64_t i = i0; i < i1; ++i) d[i] = f(x[i], y[i]);
}

#define O2G_UNARY(name, expr)                                                           \
    inline void name(ggml_tensor* dst, const ggml_tensor* a, int ith, int nth, void*) { \
        map1(dst, a, ith, nth, [](float x) -> float { return expr; });                  \
    }
#define O2G_BINARY(name, expr)                                                                                \
    inline void name(ggml_tensor* dst, const ggml_tensor* a, const ggml_tensor* b, int ith, int nth, void*) { \
        map2(dst, a, b, ith, nth, [](float x, float y) -> float { return expr; });                            \
    }

// Marks convolution (or pooling) `a`'s output as read by `b`: a convolution or pooling
// (its input), or the residual add of o2g::conv_residual (its second operand, summed into the
// add's convolution). onnx2ggml marks a node so only when every reader of its output is one of
// these, or a channel Concat whose readers all are (LowerCtx::joins_private: `b` is then a reader
// of the Concat, which copies the private layout's bytes as they are): a backend may then keep the
// tensor in a private layout (onednn/: oneDNN's blocked layout, no reorders). The flags sit in op_params slots past
// every marked op's own (CONV_2D uses 6, POOL_2D 7); other backends ignore them.
enum { kOutPrivate = 13, kInPrivate = 14, kResidualPrivate = 15 };
inline ggml_tensor* conv_chain(ggml_context*, ggml_tensor* a, ggml_tensor* b) {
    a->op_params[kOutPrivate] = 1;
    if (b->op == GGML_OP_ADD) b->view_src->op_params[kResidualPrivate] = 1;
    else b->op_params[kInPrivate] = 1;
    return b;
}

// POOL_2D (ggml_pool_2d, or o2g::pool_2d_out: windows from -p on, the taps inside the input) as a
// pooling with left padding p and right padding `pr` along dim d: the smallest pr >= 0 that gives
// the output's size; whether that padding is a valid one (every window overlaps the input)
inline bool pool_right_pad(const ggml_tensor* op, int d, int64_t& pr) {
    const int32_t* o = op->op_params;  // op, k0, k1, s0, s1, p0, p1
    int64_t k = o[1 + d], s = o[3 + d], p = o[5 + d], in = op->src[0]->ne[d], n = op->ne[d];
    pr = std::max<int64_t>(0, (n - 1) * s + k - in - p);
    return pr < k && p >= 0 && p < k && (in + p + pr - k) / s + 1 == n;
}

// ggml_pool_2d whose output is [o0, o1] (ggml_pool_2d's own is (in + 2p - k) / s + 1): window i
// starts at i*s - p and the taps outside the input are skipped, as in ggml_pool_2d; so a pooling with
// another right padding than the left one (ONNX's ceil_mode, asymmetric pads) is one node, not a
// larger pooling and a crop. Every window must overlap the input (the caller checks). ggml's
// kernels (CPU, CUDA, Vulkan, Metal) bound each window by the input and size the loop by the output.
inline ggml_tensor* pool_2d_out(ggml_context* ctx, ggml_tensor* a, ggml_op_pool op, int k0, int k1, int s0, int s1,
                                int p0, int p1, int64_t o0, int64_t o1) {
    if ((a->ne[0] + 2 * p0 - k0) / s0 + 1 == o0 && (a->ne[1] + 2 * p1 - k1) / s1 + 1 == o1)
        return ggml_pool_2d(ctx, a, op, k0, k1, s0, s1, float(p0), float(p1));
    ggml_tensor* r = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, o0, o1, a->ne[2], a->ne[3]);
    const int32_t params[] = {op, k0, k1, s0, s1, p0, p1};  // ggml_pool_2d's
    std::memcpy(r->op_params, params, sizeof(params));
    r->op = GGML_OP_POOL_2D;
    r->src[0] = a;
    return r;
}

// `add` is ggml_add_inplace(conv output, r): makes r an input of the convolution too, so a graph
// computes r first and a backend may run convolution and sum as one (onednn/conv.h: a sum post-op).
// ggml's CPU backend ignores the convolution's src[2].
inline ggml_tensor* conv_residual(ggml_context*, ggml_tensor* add) {
    add->view_src->src[2] = add->src[1];
    return add;
}

// `set` is the ggml_set_inplace that copies a convolution's output (or the last in-place op on it) into its slot
// of a Concat: marks it when the Concat is that output's only reader and the slot is one contiguous run of bytes
// (a channel Concat at batch 1). A backend may then compute the convolution straight into the slot and skip the
// copy (onednn/backend.h: squeezenet's and googlenet's branches); ggml's CPU backend copies as usual.
enum { kIntoSlot = 11 };
inline ggml_tensor* conv_into_slot(ggml_context*, ggml_tensor* set) {
    set->op_params[kIntoSlot] = 1;
    return set;
}

// A grouped convolution as onnx2ggml lowers it (ops/conv.cpp grouped_conv2d): IM2COL -> a batched
// MUL_MAT (the groups as the batch) -> CONT `out`. Marks the three and makes the convolution's input
// x and kernel w inputs of `out` too (src[1], src[3]; src[2] stays free for o2g::conv_residual), so
// that a backend may compute `out` as one grouped convolution from x and w and skip the other two
// (onednn/conv.h); ggml's CPU backend computes the three as they are and ignores the extra inputs.
// The slot is past IM2COL's 7 parameters; `out` keeps the group count there.
enum { kGroupedConv = 12 };
inline ggml_tensor* grouped_conv(ggml_context*, ggml_tensor* out, ggml_tensor* x, ggml_tensor* w, int group) {
    ggml_tensor* mm = out->src[0]->view_src;
    mm->src[1]->view_src->op_params[kGroupedConv] = 1;
    mm->op_params[kGroupedConv] = 1;
    out->op_params[kGroupedConv] = group;
    out->src[1] = x;
    out->src[3] = w;
    return out;
}

// The elementwise kernels, each as X(name, expression of x (and y)): defined below, and named for the generated
// code by lower/kernels.cpp from the same lists (one list, so the two cannot drift).
#define O2G_UNARY_KERNELS(X)                    \
    X(erf, std::erf(x))                         \
    X(sign, float((x > 0) - (x < 0)))           \
    X(round_even, std::nearbyint(x))            \
    X(isnan, float(std::isnan(x)))              \
    X(isinf, float(std::isinf(x)))              \
    X(isinf_pos, float(std::isinf(x) && x > 0)) \
    X(isinf_neg, float(std::isinf(x) && x < 0)) \
    X(logical_not, float(x == 0))               \
    X(softsign, x / (1.0f + std::fabs(x)))      \
    X(tan, std::tan(x))                         \
    X(asin, std::asin(x))                       \
    X(acos, std::acos(x))                       \
    X(atan, std::atan(x))                       \
    X(sinh, std::sinh(x))                       \
    X(cosh, std::cosh(x))                       \
    X(asinh, std::asinh(x))                     \
    X(acosh, std::acosh(x))                     \
    X(atanh, std::atanh(x))
#define O2G_BINARY_KERNELS(X)                                        \
    X(equal, float(x == y))                                          \
    X(less, float(x < y))                                            \
    X(greater, float(x > y))                                         \
    X(less_equal, float(x <= y))                                     \
    X(greater_equal, float(x >= y))                                  \
    X(logical_and, float(x != 0 && y != 0))                          \
    X(logical_or, float(x != 0 || y != 0))                           \
    X(logical_xor, float((x != 0) != (y != 0)))                      \
    X(pow, std::pow(x, y))                                           \
    X(fmod, std::fmod(x, y))                                         \
    X(max, (std::isnan(x) || std::isnan(y)) ? NAN : (x > y ? x : y)) \
    X(min, (std::isnan(x) || std::isnan(y)) ? NAN : (x < y ? x : y))
O2G_UNARY_KERNELS(O2G_UNARY)
O2G_BINARY_KERNELS(O2G_BINARY)

// Where(cond, x, y)
inline void where(ggml_tensor* dst, const ggml_tensor* c, const ggml_tensor* a, const ggml_tensor* b, int ith, int nth,
                  void*) {
    const int64_t n = ggml_nelements(dst), chunk = (n + nth - 1) / nth;
    const int64_t i0 = chunk * ith, i1 = i0 + chunk < n ? i0 + chunk : n;
    float* d = static_cast<float*>(dst->data);
    const float* cc = static_cast<const float*>(c->data);
    const float* x = static_cast<const float*>(a->data);
    const float* y = static_cast<const float*>(b->data);
    for (int64_t i = i0; i < i1; ++i) d[i] = cc[i] != 0 ? x[i] : y[i];
}

// Hardmax along rows (dim 0): 1 at the first maximum of each row, 0 elsewhere.
inline void hardmax_rows(ggml_tensor* dst, const ggml_tensor* a, int ith, int nth, void*) {
    const int64_t n = dst->ne[0], rows = ggml_nelements(dst) / (n ? n : 1), chunk = (rows + nth - 1) / nth;
    const int64_t r0 = chunk * ith, r1 = r0 + chunk < rows ? r0 + chunk : rows;
    for (int64_t r = r0; r < r1; ++r) {
        const float* x = static_cast<const float*>(a->data) + r * n;
        float* d = static_cast<float*>(dst->data) + r * n;
        int64_t best = 0;
        for (int64_t i = 1; i < n; ++i)
            if (x[i] > x[best]) best = i;
        for (int64_t i = 0; i < n; ++i) d[i] = i == best ? 1.0f : 0.0f;
    }
}

#undef O2G_UNARY
#undef O2G_BINARY

}  // namespace o2g
