// Convolutions: Conv and ConvTranspose (any number of spatial dims on the host; 1-D and 2-D
// on the device). Geometry and the host convolution shared with pooling and the integer
// convolutions are in ops/common.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>

#include "o2g_kernels.h"
#include "ops/common.h"

namespace onnx2ggml::core {
namespace {

using Lc = LowerCtx;

// A grouped convolution (1 < group, not depthwise) as one im2col and one batched matrix product
// (a product per group, the group a batch dim): x [W, H, C, N] is, as it is in memory, the batch of
// group*N maps [W, H, cg] (group fastest), so one im2col of it gives every group's columns
// [cg*KH*KW, OW*OH] as a dense batch, and the kernel [KW, KH, cg, M] is the batch of the groups'
// [cg*KH*KW, M/group] matrices as it is (broadcast over N). Every group at once: no per-group slices,
// copies and concatenations (regnet_y_400mf: 1128 scheduler splits and 515 CONCATs before), and both
// operands of the product dense (ggml-vulkan converts a strided F32 src1 to F16 first: 4e-4 of
// regnet_y_400mf's range lost when the columns were a permuted view).
ggml_tensor* grouped_conv2d(Lc& c, ggml_tensor* w, ggml_tensor* x, int64_t group, int s0, int s1, int p0, int p1,
                            int d0, int d1) {
    int64_t KW = w->ne[0], KH = w->ne[1], cg = w->ne[2], M = w->ne[3], mg = M / group, N = x->ne[3];
    ggml_type ct = w->type == GGML_TYPE_F16 ? GGML_TYPE_F16 : GGML_TYPE_F32;
    ggml_tensor* xg = G(c.b, ggml_reshape_4d, c.cont(x), x->ne[0], x->ne[1], cg, group * N);
    // im2col reads only its kernel operand's shape [KW, KH, cg, *]
    ggml_tensor* col = G(c.b, ggml_im2col, w, xg, s0, s1, p0, p1, d0, d1, true, ct);  // [cg*KH*KW, OW, OH, g*N]
    int64_t Kg = KW * KH * cg, OW = col->ne[1], OH = col->ne[2];
    ggml_tensor* cols = G(c.b, ggml_reshape_4d, col, Kg, OW * OH, group, N);
    ggml_tensor* r = G(c.b, ggml_mul_mat, G(c.b, ggml_reshape_4d, w, Kg, mg, group, 1), cols);  // [mg, OW*OH, g, N]
    // -> [OW*OH, mg, g, N]: channel g*mg + j of batch n
    ggml_tensor* y = G(c.b, ggml_cont_4d, G(c.b, ggml_permute, r, 1, 0, 2, 3), OW, OH, M, N);
    // a backend may compute y as one grouped convolution of x and w (the oneDNN backend does)
    return w->type == GGML_TYPE_F32 ? G(c.b, o2g::grouped_conv, y, x, w, int(group)) : y;
}

void lower_conv(Lc& c) {
    const Shape& ws = c.shape(1);
    std::vector<int64_t> kernel(ws.begin() + 2, ws.end());
    Geometry g = conv_geometry(c, kernel, false);
    if (g.nsp > 2) c.fail_unsupported("Conv with " + std::to_string(g.nsp) + " spatial dims is not lowered yet");
    if (c.dtype(0) != DType::F32) c.fail_unsupported("Conv on " + std::string(dtype_name(c.dtype(0))));
    int64_t group = c.ai("group", 1);
    const Shape& xs = c.shape(0);
    Shape x4 = xs.size() == 3 ? Shape{xs[0], xs[1], 1, xs[2]} : xs;
    Shape w4 = ws.size() == 3 ? Shape{ws[0], ws[1], 1, ws[2]} : ws;
    auto sp = [&](const std::vector<int64_t>& v, int i, int64_t def) {
        return g.nsp == 1 ? (i == 0 ? v[0] : def) : v[1 - i];
    };
    // ggml dim 0 = W (last spatial), dim 1 = H
    int s0 = int(sp(g.s, 0, 1)), s1 = int(sp(g.s, 1, 1)), d0 = int(sp(g.d, 0, 1)), d1 = int(sp(g.d, 1, 1));
    int pb0 = int(sp(g.pb, 0, 0)), pb1 = int(sp(g.pb, 1, 0)), pe0 = int(sp(g.pe, 0, 0)), pe1 = int(sp(g.pe, 1, 0));
    ggml_tensor* x = c.cont(c.reshape(c.x(0), x4));
    int p0 = pb0, p1 = pb1;
    if (pb0 != pe0 || pb1 != pe1) {  // asymmetric: pad explicitly
        x = G(c.b, ggml_pad_ext, x, pb0, pe0, pb1, pe1, 0, 0, 0, 0);
        p0 = p1 = 0;
    }
    int64_t C = x4[1], M = w4[0];
    bool depthwise = group == C && M == C && group > 1;
    if (C % group || M % group || w4[1] != C / group)
        c.fail("weight shape " + shape_str(ws) + " does not match input " + shape_str(xs) + " with group " +
               std::to_string(group));
    // a kernel a --weights-rule quantizes (lower/weights.h): stored [OC, IC*KH*KW] (rows a quantized type's
    // blocks run along), the convolution an im2col and a quantized matrix product
    Shape w2 = {M, shape_numel(w4) / M};
    if (group == 1 && c.is_const(1) && c.dtype(1) == DType::F32 &&
        ggml_is_quantized(c.b.weight_rules.choose(c.in(1).name, w2, false, true))) {
        ggml_tensor* wq = c.matrix_weight(1, w2, false, true);  // [K, M]
        // im2col reads only the shape [KW, KH, IC] of its kernel operand (IC*KH*KW floats, never read)
        ggml_tensor* shape_of = c.constant(Tensor::zeros(DType::F32, {w4[1], w4[2], w4[3]}));
        ggml_tensor* col = G(c.b, ggml_im2col, shape_of, x, s0, s1, p0, p1, d0, d1, true, GGML_TYPE_F32);
        int64_t K = col->ne[0], OW = col->ne[1], OH = col->ne[2], N = col->ne[3];
        ggml_tensor* r = G(c.b, ggml_mul_mat, wq, G(c.b, ggml_reshape_2d, col, K, OW * OH * N));  // [M, OW*OH*N]
        r = G(c.b, ggml_reshape_3d, r, M, OW * OH, N);
        ggml_tensor* y = G(c.b, ggml_cont_4d, G(c.b, ggml_permute, r, 1, 0, 2, 3), OW, OH, M, N);
        if (c.has(2))  // in place, except on a graph output (which owns its memory: no view)
            y = c.graph_output(0) ? G(c.b, ggml_add, y, c.reshape(c.x(2), {M, 1, 1}))
                                  : G(c.b, ggml_add_inplace, y, c.reshape(c.x(2), {M, 1, 1}));
        return c.set(0, c.reshape(y, c.out(0).shape));
    }
    ggml_tensor* w = c.is_const(1) && !depthwise ? c.matrix_weight(1, w4, false, true) : c.reshape(c.x(1), w4);
    ggml_tensor* y = nullptr;
    if (group == 1) {
        // GGML_OP_CONV_2D: ggml's CPU backend tiles im2col + gemm in its work buffer (as fast as a
        // whole im2col + mul_mat, without the im2col tensor); the oneDNN backend takes it whole
        y = G(c.b, ggml_conv_2d_direct, w, x, s0, s1, p0, p1, d0, d1);
    } else if (depthwise) {
        y = G(c.b, ggml_conv_2d_dw_direct, w, x, s0, s1, p0, p1, d0, d1);
    }
    if (group > 1 && !depthwise) y = grouped_conv2d(c, w, x, group, s0, s1, p0, p1, d0, d1);
    // a convolution of one node: reading a convolution's output, it may take it in a backend's layout, and its
    // bias, residual sum and activation go in place. A grouped one (o2g::grouped_conv: F32) only with 16k
    // channels per group in and out: oneDNN's blocked kernels (what the private layout is) need them; with
    // fewer (regnet_y's 8, resnext's 4) it runs a gemm-based kernel on NCHW, reorders around it cost more.
    bool blocks = w->type == GGML_TYPE_F32 && (C / group) % 16 == 0 && (M / group) % 16 == 0;
    ggml_tensor* conv = group == 1 || depthwise || blocks ? y : nullptr;
    if (conv && w->type == GGML_TYPE_F32 && x == c.x(0)) c.reads_private(0, conv);
    // the bias in one add, in place on the convolution's own output (the oneDNN backend folds it
    // into the convolution); not for a graph output, which must own its memory (no view)
    if (c.has(2)) {
        y = c.graph_output(0) ? G(c.b, ggml_add, y, c.reshape(c.x(2), {M, 1, 1}))
                              : G(c.b, ggml_add_inplace, y, c.reshape(c.x(2), {M, 1, 1}));
    }
    c.set(0, c.reshape(y, c.out(0).shape));
    if (conv) c.overwrote(conv);
}

void infer_conv(OpCtx& c) {
    const Shape& ws = c.shape(1);
    Shape o = conv_output_shape(c, ws);
    if (c.has(2) && shape_numel(c.shape(2)) != ws[0])
        c.fail("bias has " + std::to_string(shape_numel(c.shape(2))) + " values for " + std::to_string(ws[0]) +
               " output channels");
    c.set_out(0, c.dtype(0), o);
}

// ConvTranspose output geometry (per spatial dim)
struct TGeom {
    int nsp;
    std::vector<int64_t> in, k, s, d, pb, pe, op, out;
};

TGeom tconv_geometry(OpCtx& c) {
    TGeom g;
    const Shape& x = c.shape(0);
    const Shape& ws = c.shape(1);
    if (x.size() < 3 || ws.size() != x.size()) c.fail("input and weight must have the same rank >= 3");
    g.nsp = int(x.size()) - 2;
    g.in.assign(x.begin() + 2, x.end());
    g.k = c.ais("kernel_shape", std::vector<int64_t>(ws.begin() + 2, ws.end()));
    if (g.k != std::vector<int64_t>(ws.begin() + 2, ws.end()))
        c.fail("kernel_shape differs from the weight's spatial dims");
    g.s = c.ais("strides", std::vector<int64_t>(g.nsp, 1));
    g.d = c.ais("dilations", std::vector<int64_t>(g.nsp, 1));
    g.op = c.ais("output_padding", std::vector<int64_t>(g.nsp, 0));
    std::vector<int64_t> pads = c.ais("pads", std::vector<int64_t>(2 * g.nsp, 0));
    std::vector<int64_t> oshape = c.ais("output_shape");
    std::string ap = c.as("auto_pad", "NOTSET");
    check_dims(c, "kernel_shape", g.k, g.nsp, 1);
    check_dims(c, "strides", g.s, g.nsp, 1);
    check_dims(c, "dilations", g.d, g.nsp, 1);
    check_dims(c, "output_padding", g.op, g.nsp, 0);
    check_dims(c, "pads", pads, 2 * g.nsp, 0);
    if (!oshape.empty())
        check_dims(c, "output_shape",
                   std::vector<int64_t>(oshape.end() - std::min<size_t>(oshape.size(), g.nsp), oshape.end()), g.nsp, 1);
    g.pb.assign(pads.begin(), pads.begin() + g.nsp);
    g.pe.assign(pads.begin() + g.nsp, pads.end());
    g.out.resize(g.nsp);
    if (!oshape.empty() && int(oshape.size()) > g.nsp)
        oshape.erase(oshape.begin(), oshape.begin() + (oshape.size() - g.nsp));
    for (int i = 0; i < g.nsp; ++i) {
        int64_t full = g.s[i] * (g.in[i] - 1) + g.op[i] + (g.k[i] - 1) * g.d[i] + 1;
        if (!oshape.empty() || ap == "SAME_UPPER" || ap == "SAME_LOWER") {
            int64_t out = !oshape.empty() ? oshape[i] : g.in[i] * g.s[i];
            int64_t total = full - out;
            bool upper = ap != "SAME_LOWER";  // output_shape follows SAME_UPPER
            g.pb[i] = upper ? total / 2 : total - total / 2;
            g.pe[i] = total - g.pb[i];
            g.out[i] = out;
        } else {
            if (ap == "VALID") g.pb[i] = g.pe[i] = 0;
            g.out[i] = full - g.pb[i] - g.pe[i];
        }
        if (g.out[i] <= 0) c.fail("non-positive output size");
    }
    return g;
}

void lower_conv_transpose(Lc& c) {
    TGeom g = tconv_geometry(c);
    if (g.nsp > 2) c.fail_unsupported("ConvTranspose with 3 spatial dims is not lowered yet");
    for (int i = 0; i < g.nsp; ++i)
        if (g.d[i] != 1) c.fail_unsupported("ConvTranspose with dilations is not lowered yet");
    if (g.nsp == 2 && g.s[0] != g.s[1])
        c.fail_unsupported("ConvTranspose with different strides per dim is not lowered yet");
    for (int i = 0; i < g.nsp; ++i)
        if (g.pb[i] < 0 || g.pe[i] < 0) c.fail_unsupported("ConvTranspose output_shape larger than the full output");
    int64_t group = c.ai("group", 1);
    const Shape& xs = c.shape(0);
    const Shape& ws = c.shape(1);
    Shape x4 = xs.size() == 3 ? Shape{xs[0], xs[1], 1, xs[2]} : xs;
    Shape w4 = ws.size() == 3 ? Shape{ws[0], ws[1], 1, ws[2]} : ws;
    int stride = int(g.s[g.nsp - 1]);
    ggml_tensor* x = c.cont(c.reshape(c.x(0), x4));
    ggml_tensor* w = c.cont(c.reshape(c.x(1), w4));
    int64_t C = x4[1], Mg = w4[1];
    ggml_tensor* y = nullptr;
    for (int64_t gi = 0; gi < group; ++gi) {
        ggml_tensor* xg = group == 1 ? x : c.cont(c.slice(x, 2, gi * (C / group), C / group));
        ggml_tensor* wg = group == 1 ? w : c.cont(c.slice(w, 3, gi * (C / group), C / group));
        ggml_tensor* yg = G(c.b, ggml_conv_transpose_2d_p0, wg, xg, stride);
        y = y ? G(c.b, ggml_concat, y, yg, 2) : yg;
    }
    // y holds the unpadded full output: crop pads at the start, extend with zeros at the end
    for (int i = 0; i < g.nsp; ++i) {
        int gd = g.nsp - 1 - i;  // ggml dim of spatial i
        int64_t have = y->ne[gd] - g.pb[i];
        if (have < g.out[i]) {
            int extra = int(g.out[i] - have);
            y = G(c.b, ggml_pad_ext, c.cont(y), gd == 0 ? 0 : 0, gd == 0 ? extra : 0, 0, gd == 1 ? extra : 0, 0, 0, 0,
                  0);
        }
        y = c.slice(y, gd, g.pb[i], g.out[i]);
    }
    y = c.cont(y);
    if (c.has(2)) y = G(c.b, ggml_add, y, c.reshape(c.x(2), {Mg * group, 1, 1}));
    c.set(0, c.reshape(y, c.out(0).shape));
}

void eval_conv(OpCtx& c) {
    std::vector<double> b;
    if (c.has(2)) b = to_f64(c.cval(2));
    std::vector<double> y = conv_host(c, c.shape(1), to_f64(c.cval(0)), to_f64(c.cval(1)), c.has(2) ? &b : nullptr);
    Tensor t = Tensor::zeros(c.dtype(0), c.out(0).shape);
    for (size_t i = 0; i < y.size(); ++i) t.setf(int64_t(i), y[i]);
    c.set_const(0, t);
}

void eval_conv_transpose(OpCtx& c) {
    TGeom g = tconv_geometry(c);
    const Shape& xs = c.shape(0);
    const Shape& ws = c.shape(1);  // [C, M/group, k...]
    int64_t N = xs[0], C = xs[1], group = c.ai("group", 1), cg = C / group, mg = ws[1], M = mg * group;
    std::vector<double> x = to_f64(c.cval(0)), w = to_f64(c.cval(1));
    int64_t isz = prod(g.in), osz = prod(g.out), ksz = prod(g.k);
    std::vector<double> y(size_t(N * M * osz), 0.0);
    if (c.has(2)) {
        std::vector<double> b = to_f64(c.cval(2));
        for (int64_t n = 0; n < N; ++n)
            for (int64_t m = 0; m < M; ++m) std::fill_n(y.begin() + (n * M + m) * osz, osz, b[size_t(m)]);
    }
    for_grid(g.in, [&](int64_t ip, const std::vector<int64_t>& iv) {
        for_grid(g.k, [&](int64_t kp, const std::vector<int64_t>& k) {
            int64_t f = 0;
            for (int i = 0; i < g.nsp; ++i) {
                int64_t p = iv[i] * g.s[i] - g.pb[i] + k[i] * g.d[i];
                if (p < 0 || p >= g.out[i]) return;
                f = f * g.out[i] + p;
            }
            for (int64_t n = 0; n < N; ++n)
                for (int64_t ci = 0; ci < C; ++ci) {
                    double xv = x[size_t((n * C + ci) * isz + ip)];
                    int64_t gi = ci / cg;
                    for (int64_t m = 0; m < mg; ++m)
                        y[size_t((n * M + gi * mg + m) * osz + f)] += xv * w[size_t((ci * mg + m) * ksz + kp)];
                }
        });
    });
    Tensor t = Tensor::zeros(c.dtype(0), c.out(0).shape);
    for (size_t i = 0; i < y.size(); ++i) t.setf(int64_t(i), y[i]);
    c.set_const(0, t);
}

}  // namespace

O2G_OP_FAMILY(conv) {
    {
        OpDef d;
        d.op_type = "Conv";
        d.min_inputs = 2;
        d.infer = infer_conv;
        d.eval = eval_conv;
        d.work = [](OpCtx& c) {
            return double(shape_numel(c.out(0).shape)) * double(shape_numel(c.shape(1))) /
                   double(std::max<int64_t>(1, c.shape(1)[0]));
        };
        d.lower = lower_conv;
        r.add(d);
    }
    {
        OpDef d;
        d.op_type = "ConvTranspose";
        d.min_inputs = 2;
        d.infer = [](OpCtx& c) {
            TGeom g = tconv_geometry(c);
            int64_t group = c.ai("group", 1);
            if (group <= 0 || c.shape(1)[0] != c.shape(0)[1] || c.shape(0)[1] % group != 0)
                c.fail("weight " + shape_str(c.shape(1)) + " does not match input channels " +
                       std::to_string(c.shape(0)[1]) + " with group " + std::to_string(group));
            Shape o = {c.shape(0)[0], c.shape(1)[1] * group};
            o.insert(o.end(), g.out.begin(), g.out.end());
            c.set_out(0, c.dtype(0), o);
        };
        d.eval = eval_conv_transpose;
        d.work = [](OpCtx& c) {
            return double(shape_numel(c.shape(0))) * double(shape_numel(c.shape(1))) /
                   double(std::max<int64_t>(1, c.shape(1)[0]));
        };
        d.lower = lower_conv_transpose;
        r.add(d);
    }
}

}  // namespace onnx2ggml::core
