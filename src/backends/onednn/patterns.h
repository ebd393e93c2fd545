// onnx2ggml's oneDNN backend (o2g_onednn.h): which ggml node patterns the backend takes (convolutions with their in-
// place bias, residual and activation) and the post-ops those become.
#pragma once
#include "context.h"

namespace o2g_onednn {

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
    return op->op == GGML_OP_ADD && conv && r && conv->src[2] == r && conv_like(conv) && r->type == GGML_TYPE_F32 &&
           ggml_is_contiguous(r) && ggml_are_same_shape(r, conv) && ggml_is_contiguous(op);
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

}  // namespace o2g_onednn
