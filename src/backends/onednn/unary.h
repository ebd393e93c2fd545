// onnx2ggml's oneDNN backend (o2g_onednn.h): elementwise functions.
#pragma once
#include "resize.h"

namespace o2g_onednn {

// Elementwise ops as oneDNN's vectorized eltwise primitive: SIGMOID, GELU_ERF, SILU, HARDSWISH, RELU, TANH, EXP,
// ABS, NEG, SQR, SQRT, SCALE (x * s + b) and CLAMP (a HardSigmoid's SCALE + CLAMP: 18 of mobilenet_v3_small's 19
// scheduler splits when its CLAMP went to ggml's CPU backend). ggml's CPU kernels compute the transcendental ones
// element by element (10% of CLIP's time in its QuickGELU, 3% of the UNet's in its GEGLU, 52% of mobilenet_v3_small's
// in its HardSwish, 36% of GPT-2's in its tanh GELU); and any of them between oneDNN nodes (densenet's ReLU after each
// BatchNorm, the steps of a GELU written out) would cost two scheduler splits on the CPU backend.
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

}  // namespace o2g_onednn
