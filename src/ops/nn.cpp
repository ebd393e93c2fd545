// Neural-network operators: Conv, ConvTranspose, pooling, BatchNormalization,
// Instance/LayerNormalization, Gemm, MatMul, Softmax/LogSoftmax, PRelu, Resize/Upsample.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "o2g_kernels.h"
#include "ops/common.h"

namespace onnx2ggml {
namespace {

using Lc = LowerCtx;

// ---- spatial geometry shared by Conv, ConvTranspose and the pools ------------------------

// Per-spatial-dim attribute: `n` values in [lo, 2^30] (absurd values end here, not in overflow).
void check_dims(OpCtx& c, const char* name, const std::vector<int64_t>& v, size_t n, int64_t lo) {
    if (v.size() != n) c.fail(std::string(name) + " has " + std::to_string(v.size()) + " values, expected " + std::to_string(n));
    for (int64_t x : v)
        if (x < lo || x > (int64_t(1) << 30)) c.fail(std::string(name) + " value " + std::to_string(x) + " is out of range");
}

struct Geometry {
    int nsp = 0;                       // spatial dims
    std::vector<int64_t> in, k, s, d, pb, pe, out;
};

Geometry conv_geometry(OpCtx& c, const std::vector<int64_t>& kernel, bool ceil_mode) {
    Geometry g;
    const Shape& x = c.shape(0);
    if (x.size() < 3) c.fail("input must have rank >= 3, got " + shape_str(x));
    g.nsp = int(x.size()) - 2;
    g.in.assign(x.begin() + 2, x.end());
    g.k = kernel;
    if (int(g.k.size()) != g.nsp) c.fail("kernel_shape has " + std::to_string(g.k.size()) + " dims for " + std::to_string(g.nsp) + " spatial dims");
    g.s = c.ais("strides", std::vector<int64_t>(g.nsp, 1));
    g.d = c.ais("dilations", std::vector<int64_t>(g.nsp, 1));
    std::vector<int64_t> pads = c.ais("pads", std::vector<int64_t>(2 * g.nsp, 0));
    check_dims(c, "kernel_shape", g.k, g.nsp, 1);
    check_dims(c, "strides", g.s, g.nsp, 1);
    check_dims(c, "dilations", g.d, g.nsp, 1);
    check_dims(c, "pads", pads, 2 * g.nsp, 0);
    std::string ap = c.as("auto_pad", "NOTSET");
    g.pb.assign(pads.begin(), pads.begin() + g.nsp);
    g.pe.assign(pads.begin() + g.nsp, pads.end());
    g.out.resize(g.nsp);
    for (int i = 0; i < g.nsp; ++i) {
        if (g.s[i] <= 0 || g.d[i] <= 0 || g.k[i] <= 0) c.fail("strides, dilations and kernel dims must be positive");
        int64_t ek = (g.k[i] - 1) * g.d[i] + 1;
        if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
            g.out[i] = (g.in[i] + g.s[i] - 1) / g.s[i];
            int64_t total = std::max<int64_t>(0, (g.out[i] - 1) * g.s[i] + ek - g.in[i]);
            g.pb[i] = ap == "SAME_UPPER" ? total / 2 : total - total / 2;
            g.pe[i] = total - g.pb[i];
        } else {
            if (ap == "VALID") g.pb[i] = g.pe[i] = 0;
            else if (ap != "NOTSET") c.fail("unknown auto_pad '" + ap + "'");
            int64_t span = g.in[i] + g.pb[i] + g.pe[i] - ek;
            if (span < 0) c.fail("kernel is larger than the padded input");
            g.out[i] = ceil_mode ? (span + g.s[i] - 1) / g.s[i] + 1 : span / g.s[i] + 1;
            if (ceil_mode && (g.out[i] - 1) * g.s[i] >= g.in[i] + g.pb[i]) g.out[i]--;  // last window must start inside
        }
    }
    return g;
}

ggml_tensor* conv2d_f32(Lc& c, ggml_tensor* w, ggml_tensor* x, int s0, int s1, int p0, int p1, int d0, int d1) {
    // im2col in F32 (ggml_conv_2d would round the input to F16), then one mul_mat; with F16
    // weights (--weights f16) the columns are F16 too, as ggml_mul_mat would convert them anyway
    ggml_type ct = w->type == GGML_TYPE_F16 ? GGML_TYPE_F16 : GGML_TYPE_F32;
    ggml_tensor* col = G(c.b, ggml_im2col, w, x, s0, s1, p0, p1, d0, d1, true, ct);  // [K, OW, OH, N]
    int64_t K = col->ne[0], OW = col->ne[1], OH = col->ne[2], N = col->ne[3], OC = w->ne[3];
    ggml_tensor* r = G(c.b, ggml_mul_mat, G(c.b, ggml_reshape_2d, col, K, OW * OH * N), G(c.b, ggml_reshape_2d, w, K, OC));
    if (N == 1) return G(c.b, ggml_reshape_4d, r, OW, OH, OC, int64_t(1));
    r = G(c.b, ggml_reshape_4d, r, OW, OH, N, OC);
    return G(c.b, ggml_cont, G(c.b, ggml_permute, r, 0, 1, 3, 2));
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
    auto sp = [&](const std::vector<int64_t>& v, int i, int64_t def) { return g.nsp == 1 ? (i == 0 ? v[0] : def) : v[1 - i]; };
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
    ggml_tensor* w = c.is_const(1) && !depthwise ? c.matrix_weight(1, w4, false, true) : c.reshape(c.x(1), w4);
    if (C % group || M % group || w4[1] != C / group) c.fail("weight shape " + shape_str(ws) + " does not match input " + shape_str(xs) + " with group " + std::to_string(group));
    ggml_tensor* y = nullptr;
    if (group == 1) {
        // GGML_OP_CONV_2D: ggml's CPU backend tiles im2col + gemm in its work buffer (as fast as a
        // whole im2col + mul_mat, without the im2col tensor); the oneDNN backend takes it whole
        y = G(c.b, ggml_conv_2d_direct, w, x, s0, s1, p0, p1, d0, d1);
    } else if (depthwise) {
        y = G(c.b, ggml_conv_2d_dw_direct, w, x, s0, s1, p0, p1, d0, d1);
    }
    ggml_tensor* conv = y;
    if (group == 1 || depthwise) {  // reading a convolution's output, this one may take it in a backend's layout
        if (w->type == GGML_TYPE_F32 && x == c.x(0)) c.reads_private(0, conv);
    } else {
        int64_t cg = C / group, mg = M / group;
        for (int64_t gi = 0; gi < group; ++gi) {
            ggml_tensor* xg = c.cont(c.slice(x, 2, gi * cg, cg));
            ggml_tensor* wg = c.cont(c.slice(w, 3, gi * mg, mg));
            ggml_tensor* yg = conv2d_f32(c, wg, xg, s0, s1, p0, p1, d0, d1);
            y = y ? G(c.b, ggml_concat, y, yg, 2) : yg;
        }
    }
    // the bias in one add, in place on the convolution's own output (the oneDNN backend folds it
    // into the convolution); not for a graph output, which must own its memory (no view)
    if (c.has(2)) {
        y = c.graph_output(0) ? G(c.b, ggml_add, y, c.reshape(c.x(2), {M, 1, 1})) : G(c.b, ggml_add_inplace, y, c.reshape(c.x(2), {M, 1, 1}));
    }
    c.set(0, c.reshape(y, c.out(0).shape));
    if (conv) c.overwrote(conv);
}

}  // namespace

Shape conv_output_shape(OpCtx& c, const Shape& ws) {
    if (ws.size() != c.shape(0).size() || ws.size() < 3) c.fail("weight rank " + std::to_string(ws.size()) + " must equal the input rank (>= 3)");
    std::vector<int64_t> kernel = c.ais("kernel_shape", std::vector<int64_t>(ws.begin() + 2, ws.end()));
    if (kernel != std::vector<int64_t>(ws.begin() + 2, ws.end())) c.fail("kernel_shape differs from the weight's spatial dims");
    Geometry g = conv_geometry(c, kernel, false);
    int64_t group = c.ai("group", 1);
    if (group <= 0 || c.shape(0)[1] != ws[1] * group) c.fail("input channels " + std::to_string(c.shape(0)[1]) + " != weight channels " + std::to_string(ws[1]) + " x group " + std::to_string(group));
    Shape o = {c.shape(0)[0], ws[0]};
    o.insert(o.end(), g.out.begin(), g.out.end());
    return o;
}

namespace {

void infer_conv(OpCtx& c) {
    const Shape& ws = c.shape(1);
    Shape o = conv_output_shape(c, ws);
    if (c.has(2) && shape_numel(c.shape(2)) != ws[0]) c.fail("bias has " + std::to_string(shape_numel(c.shape(2))) + " values for " + std::to_string(ws[0]) + " output channels");
    c.set_out(0, c.dtype(0), o);
}

// ConvTranspose output geometry (per spatial dim)
struct TGeom { int nsp; std::vector<int64_t> in, k, s, d, pb, pe, op, out; };

TGeom tconv_geometry(OpCtx& c) {
    TGeom g;
    const Shape& x = c.shape(0);
    const Shape& ws = c.shape(1);
    if (x.size() < 3 || ws.size() != x.size()) c.fail("input and weight must have the same rank >= 3");
    g.nsp = int(x.size()) - 2;
    g.in.assign(x.begin() + 2, x.end());
    g.k = c.ais("kernel_shape", std::vector<int64_t>(ws.begin() + 2, ws.end()));
    if (g.k != std::vector<int64_t>(ws.begin() + 2, ws.end())) c.fail("kernel_shape differs from the weight's spatial dims");
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
    if (!oshape.empty()) check_dims(c, "output_shape", std::vector<int64_t>(oshape.end() - std::min<size_t>(oshape.size(), g.nsp), oshape.end()), g.nsp, 1);
    g.pb.assign(pads.begin(), pads.begin() + g.nsp);
    g.pe.assign(pads.begin() + g.nsp, pads.end());
    g.out.resize(g.nsp);
    if (!oshape.empty() && int(oshape.size()) > g.nsp) oshape.erase(oshape.begin(), oshape.begin() + (oshape.size() - g.nsp));
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
    if (g.nsp == 2 && g.s[0] != g.s[1]) c.fail_unsupported("ConvTranspose with different strides per dim is not lowered yet");
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
            y = G(c.b, ggml_pad_ext, c.cont(y), gd == 0 ? 0 : 0, gd == 0 ? extra : 0, 0, gd == 1 ? extra : 0, 0, 0, 0, 0);
        }
        y = c.slice(y, gd, g.pb[i], g.out[i]);
    }
    y = c.cont(y);
    if (c.has(2)) y = G(c.b, ggml_add, y, c.reshape(c.x(2), {Mg * group, 1, 1}));
    c.set(0, c.reshape(y, c.out(0).shape));
}

// ---- pooling ------------------------------------------------------------------------------

// ggml pool_2d pads both sides by p and ignores out-of-bounds taps; pick p >= pb with
// (p - pb) % s == 0 and crop the leading outputs that belong to the extra padding.
void pool_pad(int64_t in, int64_t k, int64_t s, int64_t pb, int64_t out, int& p, int64_t& skip) {
    int64_t m = 0;
    for (;; ++m) {
        int64_t P = pb + m * s;
        int64_t have = (in + 2 * P - k) / s + 1;
        if (have >= m + out) { p = int(P); skip = m; return; }
    }
}

void lower_pool(Lc& c, bool is_max) {
    const Shape& xs = c.shape(0);
    Geometry g = conv_geometry(c, c.ais("kernel_shape"), c.ai("ceil_mode", 0) != 0);
    if (g.nsp > 2) c.fail_unsupported("pooling with " + std::to_string(g.nsp) + " spatial dims is not lowered yet");
    for (int i = 0; i < g.nsp; ++i)
        if (g.d[i] != 1) c.fail_unsupported("pooling with dilations is not lowered yet");
    if (c.has_out(1)) c.fail_unsupported("MaxPool with an Indices output is not supported");
    if (c.dtype(0) != DType::F32) c.fail_unsupported(std::string("pooling of ") + dtype_name(c.dtype(0)));
    auto sp = [&](const std::vector<int64_t>& v, int i, int64_t def) { return g.nsp == 1 ? (i == 0 ? v[0] : def) : v[1 - i]; };
    int64_t in0 = sp(g.in, 0, 1), in1 = sp(g.in, 1, 1), k0 = sp(g.k, 0, 1), k1 = sp(g.k, 1, 1), s0 = sp(g.s, 0, 1), s1 = sp(g.s, 1, 1);
    int64_t pb0 = sp(g.pb, 0, 0), pb1 = sp(g.pb, 1, 0), pe0 = sp(g.pe, 0, 0), pe1 = sp(g.pe, 1, 0);
    int64_t o0 = sp(g.out, 0, 1), o1 = sp(g.out, 1, 1);
    int p0, p1;
    int64_t skip0, skip1;
    pool_pad(in0, k0, s0, pb0, o0, p0, skip0);
    pool_pad(in1, k1, s1, pb1, o1, p1, skip1);
    Shape x4 = xs.size() == 3 ? Shape{xs[0], xs[1], 1, xs[2]} : xs;
    ggml_tensor* x = c.cont(c.reshape(c.x(0), x4));
    ggml_tensor* pool = G(c.b, ggml_pool_2d, x, is_max ? GGML_OP_POOL_MAX : GGML_OP_POOL_AVG, int(k0), int(k1), int(s0), int(s1), float(p0), float(p1));
    ggml_tensor* y = c.slice(c.slice(pool, 0, skip0, o0), 1, skip1, o1);
    // a max pooling whose output is ggml's whole result (a valid padding, see o2g::pool_right_pad)
    // may read and write a backend's private layout between convolutions (o2g::conv_chain)
    int64_t pr;
    if (is_max && xs.size() == 4 && y == pool && o2g::pool_right_pad(pool, 0, pr) && o2g::pool_right_pad(pool, 1, pr)) {
        if (x == c.x(0)) c.reads_private(0, pool);
        c.overwrote(pool);
    }
    if (!is_max) {
        // ggml divides by k0*k1; ONNX divides by the taps inside the input (or the padded input)
        bool include_pad = c.ai("count_include_pad", 0) != 0;
        auto count = [&](int64_t o, int64_t in, int64_t k, int64_t s, int64_t pb, int64_t pe) {
            int64_t start = o * s - pb, end = start + k;
            int64_t lo = include_pad ? -pb : 0, hi = include_pad ? in + pe : in;
            return std::max<int64_t>(0, std::min(end, hi) - std::max(start, lo));
        };
        // the correction k / taps is separable: one factor per spatial dim (host work O(o0 + o1))
        auto factors = [&](int64_t o, int64_t in, int64_t k, int64_t s, int64_t pb, int64_t pe, const Shape& shape) -> ggml_tensor* {
            Tensor f = Tensor::zeros(DType::F32, shape);
            bool trivial = true;
            for (int64_t i = 0; i < o; ++i) {
                int64_t n = count(i, in, k, s, pb, pe);
                f.ptr<float>()[i] = n > 0 ? float(double(k) / double(n)) : 0.0f;
                trivial &= f.ptr<float>()[i] == 1.0f;
            }
            return trivial ? nullptr : c.constant(f);
        };
        ggml_tensor* f0 = factors(o0, in0, k0, s0, pb0, pe0, {o0});     // ggml [o0, 1]
        ggml_tensor* f1 = factors(o1, in1, k1, s1, pb1, pe1, {o1, 1});  // ggml [1, o1]
        if (f0) y = G(c.b, ggml_mul, c.cont(y), f0);
        if (f1) y = G(c.b, ggml_mul, c.cont(y), f1);
    }
    c.set(0, c.reshape(y, c.out(0).shape));
}

void infer_pool(OpCtx& c) {
    Geometry g = conv_geometry(c, c.ais("kernel_shape"), c.ai("ceil_mode", 0) != 0);
    Shape o = {c.shape(0)[0], c.shape(0)[1]};
    o.insert(o.end(), g.out.begin(), g.out.end());
    c.set_out(0, c.dtype(0), o);
    if (c.has_out(1)) c.set_out(1, DType::I64, o);
}

// ---- matmul ---------------------------------------------------------------------------

// t contiguous with row-major strides: ggml calls a tensor contiguous whatever the strides of its
// size-1 dims (a permuted [K = 1, N] operand keeps nb[0] > nb[1]), which ggml_mul_mat rejects as
// transposed; a reshape to its own shape is then a free view with the row-major strides.
ggml_tensor* dense(Lc& c, ggml_tensor* t) {
    t = c.cont(t);
    size_t nb = ggml_type_size(t->type);
    bool row_major = true;
    for (int i = 0; i < GGML_MAX_DIMS; nb *= size_t(t->ne[i]), ++i) row_major = row_major && t->nb[i] == nb;
    return row_major ? t : G(c.b, ggml_reshape_4d, t, t->ne[0], t->ne[1], t->ne[2], t->ne[3]);
}

// C = A @ B for ggml tensors given ONNX shapes of rank >= 2 (ONNX MatMul semantics, batch broadcast).
ggml_tensor* matmul(Lc& c, int ia, int ib, Shape sa, Shape sb, bool trans_a, bool trans_b) {
    // x = B^T as [.., N, K] (ggml ne [K, N]); y = A as [.., M, K]
    ggml_tensor* x;
    if (c.is_const(ib)) {
        x = c.matrix_weight(ib, sb, !trans_b);
    } else {
        x = c.reshape(c.x(ib), sb);
        if (!trans_b) {
            std::vector<int64_t> p;
            for (size_t i = 0; i < sb.size(); ++i) p.push_back(int64_t(i));
            std::swap(p[sb.size() - 1], p[sb.size() - 2]);
            x = c.permute(x, p);
        }
        // ggml_mul_mat reads its first operand through its strides: only the K dim must be dense
        if (x->nb[0] != ggml_type_size(x->type)) x = dense(c, x);
    }
    if (trans_b) std::swap(sb[sb.size() - 1], sb[sb.size() - 2]);  // sb now [.., K, N]
    ggml_tensor* y;
    if (c.is_const(ia) && trans_a) {
        y = c.constant(c.cval(ia).reshaped(sa).transposed_last2());
    } else {
        y = c.reshape(c.x(ia), sa);
        if (trans_a) {
            std::vector<int64_t> p;
            for (size_t i = 0; i < sa.size(); ++i) p.push_back(int64_t(i));
            std::swap(p[sa.size() - 1], p[sa.size() - 2]);
            y = c.permute(y, p);
        }
        y = dense(c, y);
    }
    if (trans_a) std::swap(sa[sa.size() - 1], sa[sa.size() - 2]);
    // batch broadcast: y must cover the full batch; x broadcasts inside ggml_mul_mat
    Shape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2), bo;
    if (!broadcast_shapes(ba, bb, bo)) c.fail("batch dims " + shape_str(ba) + " and " + shape_str(bb) + " cannot be broadcast");
    if (bo.size() > 2) c.fail_unsupported("MatMul with more than 2 batch dims");
    Shape full_a = bo;
    full_a.push_back(sa[sa.size() - 2]);
    full_a.push_back(sa.back());
    if (align_rank(ba, bo.size()) != bo) y = c.repeat_to(c.reshape(y, align_rank(sa, full_a.size())), to_ne(full_a));
    Shape xb = align_rank(bb, bo.size());
    Shape xs = xb;
    xs.push_back(sb.back());
    xs.push_back(sb[sb.size() - 2]);
    x = c.reshape(x, xs);
    return G(c.b, ggml_mul_mat, x, y);
}

// ---- host evaluators of Conv, ConvTranspose and the pools (any rank, any dtype) ------------
// Run as folding or as host kernels (3-D, dilated pooling, MaxPool's Indices, integer inputs).

// Calls f(flat output position, per-dim output index) for every position of an N-d grid.
template <class F>
void for_grid(const std::vector<int64_t>& dims, F f) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    std::vector<int64_t> idx(dims.size(), 0);
    for (int64_t p = 0; p < n; ++p) {
        f(p, idx);
        for (int k = int(dims.size()) - 1; k >= 0; --k) { if (++idx[k] < dims[k]) break; idx[k] = 0; }
    }
}

int64_t prod(const std::vector<int64_t>& v) {
    int64_t n = 1;
    for (int64_t d : v) n *= d;
    return n;
}

}  // namespace

std::vector<double> conv_host(OpCtx& c, const Shape& ws, const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>* bias) {
    const Shape& xs = c.shape(0);
    Geometry g = conv_geometry(c, std::vector<int64_t>(ws.begin() + 2, ws.end()), false);
    int64_t N = xs[0], C = xs[1], M = ws[0], group = c.ai("group", 1), cg = C / group, mg = M / group;
    int64_t isz = prod(g.in), osz = prod(g.out), ksz = prod(g.k);
    std::vector<double> y(size_t(N * M * osz), 0.0);
    // input offset (or -1 when in the padding) per (output position, kernel position)
    std::vector<int64_t> off(size_t(osz * ksz));
    for_grid(g.out, [&](int64_t op, const std::vector<int64_t>& o) {
        for_grid(g.k, [&](int64_t kp, const std::vector<int64_t>& k) {
            int64_t f = 0;
            for (int i = 0; i < g.nsp; ++i) {
                int64_t p = o[i] * g.s[i] - g.pb[i] + k[i] * g.d[i];
                if (p < 0 || p >= g.in[i]) { f = -1; break; }
                f = f * g.in[i] + p;
            }
            off[size_t(op * ksz + kp)] = f;
        });
    });
    for (int64_t n = 0; n < N; ++n)
        for (int64_t m = 0; m < M; ++m) {
            int64_t gi = m / mg;
            for (int64_t op = 0; op < osz; ++op) {
                double acc = bias ? (*bias)[size_t(m)] : 0.0;
                for (int64_t ci = 0; ci < cg; ++ci) {
                    const double* xp = x.data() + (n * C + gi * cg + ci) * isz;
                    const double* wp = w.data() + (m * cg + ci) * ksz;
                    const int64_t* of = off.data() + op * ksz;
                    for (int64_t kp = 0; kp < ksz; ++kp)
                        if (of[kp] >= 0) acc += xp[of[kp]] * wp[kp];
                }
                y[size_t((n * M + m) * osz + op)] = acc;
            }
        }
    return y;
}

namespace {

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

// MaxPool (with its Indices output) and AveragePool, any number of spatial dims, dilations.
void eval_pool(OpCtx& c, bool is_max, bool lp = false) {
    Geometry g = conv_geometry(c, c.ais("kernel_shape"), c.ai("ceil_mode", 0) != 0);
    const Shape& xs = c.shape(0);
    int64_t NC = xs[0] * xs[1], isz = prod(g.in), osz = prod(g.out);
    bool include_pad = c.ai("count_include_pad", 0) != 0, col_major = c.ai("storage_order", 0) != 0;
    std::vector<double> x = to_f64(c.cval(0));
    Tensor y = Tensor::zeros(c.dtype(0), c.out(0).shape);
    Tensor ind = Tensor::zeros(DType::I64, c.out(0).shape);
    for (int64_t nc = 0; nc < NC; ++nc)
        for_grid(g.out, [&](int64_t op, const std::vector<int64_t>& o) {
            double acc = is_max ? -INFINITY : 0.0;
            int64_t best = -1, count = 0, padded = 1;
            for (int i = 0; i < g.nsp && include_pad; ++i) {  // the window clipped to the padded input
                int64_t lo = o[i] * g.s[i] - g.pb[i], hi = std::min(lo + (g.k[i] - 1) * g.d[i] + 1, g.in[i] + g.pe[i]);
                padded *= (hi - lo + g.d[i] - 1) / g.d[i];
            }
            for_grid(g.k, [&](int64_t, const std::vector<int64_t>& k) {
                int64_t f = 0, fc = 0, mul = 1;
                for (int i = 0; i < g.nsp; ++i) {
                    int64_t p = o[i] * g.s[i] - g.pb[i] + k[i] * g.d[i];
                    if (p < 0 || p >= g.in[i]) return;
                    f = f * g.in[i] + p;
                    fc += p * mul;  // column-major offset
                    mul *= g.in[i];
                }
                double v = x[size_t(nc * isz + f)];
                ++count;
                if (lp) {
                    acc += std::pow(std::fabs(v), double(c.ai("p", 2)));
                } else if (is_max) {
                    if (best < 0 || v > acc) { acc = v; best = col_major ? fc : f; }
                } else {
                    acc += v;
                }
            });
            if (lp) acc = std::pow(acc, 1.0 / double(c.ai("p", 2)));
            else if (!is_max) acc = count ? acc / double(include_pad ? padded : count) : 0.0;
            y.setf(nc * osz + op, acc);
            ind.seti(nc * osz + op, nc * isz + std::max<int64_t>(best, 0));
        });
    c.set_const(0, y);
    if (is_max && c.has_out(1)) c.set_const(1, ind);
}

void register_conv_pool(Registry& r) {
    {
        OpDef d;
        d.op_type = "Conv";
        d.infer = infer_conv;
        d.eval = eval_conv;
        d.work = [](OpCtx& c) { return double(shape_numel(c.out(0).shape)) * double(shape_numel(c.shape(1))) / double(std::max<int64_t>(1, c.shape(1)[0])); };
        d.lower = lower_conv;
        r.add(d);
    }
    {
        OpDef d;
        d.op_type = "ConvTranspose";
        d.infer = [](OpCtx& c) {
            TGeom g = tconv_geometry(c);
            int64_t group = c.ai("group", 1);
            if (group <= 0 || c.shape(1)[0] != c.shape(0)[1] || c.shape(0)[1] % group != 0)
                c.fail("weight " + shape_str(c.shape(1)) + " does not match input channels " + std::to_string(c.shape(0)[1]) + " with group " + std::to_string(group));
            Shape o = {c.shape(0)[0], c.shape(1)[1] * group};
            o.insert(o.end(), g.out.begin(), g.out.end());
            c.set_out(0, c.dtype(0), o);
        };
        d.eval = eval_conv_transpose;
        d.work = [](OpCtx& c) { return double(shape_numel(c.shape(0))) * double(shape_numel(c.shape(1))) / double(std::max<int64_t>(1, c.shape(1)[0])); };
        d.lower = lower_conv_transpose;
        r.add(d);
    }
    for (bool mx : {true, false}) {
        OpDef d;
        d.op_type = mx ? "MaxPool" : "AveragePool";
        d.infer = infer_pool;
        d.eval = [mx](OpCtx& c) { eval_pool(c, mx); };
        d.work = [](OpCtx& c) { return double(shape_numel(c.out(0).shape)) * double(shape_numel(c.ais("kernel_shape"))); };
        d.lower = [mx](Lc& c) { lower_pool(c, mx); };
        r.add(d);
    }
    {
        OpDef d;  // (sum |x|^p)^(1/p) over each window: host evaluation only (ggml has no such pool)
        d.op_type = "LpPool";
        d.infer = [](OpCtx& c) {
            if (c.ai("p", 2) <= 0) c.fail("p must be positive");
            infer_pool(c);
        };
        d.eval = [](OpCtx& c) { eval_pool(c, false, true); };
        d.work = [](OpCtx& c) { return double(shape_numel(c.out(0).shape)) * double(shape_numel(c.ais("kernel_shape"))); };
        r.add(d);
    }
    {
        OpDef d;
        d.op_type = "GlobalLpPool";
        d.infer = [](OpCtx& c) {
            Shape o = c.shape(0);
            if (o.size() < 3) c.fail("input must have rank >= 3, got " + shape_str(o));
            if (c.ai("p", 2) <= 0) c.fail("p must be positive");
            for (size_t i = 2; i < o.size(); ++i) o[i] = 1;
            c.set_out(0, c.dtype(0), o);
        };
        d.eval = [](OpCtx& c) {
            const Tensor& x = c.cval(0);
            int64_t nc = c.shape(0)[0] * c.shape(0)[1], sp = x.numel() / std::max<int64_t>(1, nc);
            double p = double(c.ai("p", 2));
            Tensor y = Tensor::zeros(x.dtype, c.out(0).shape);
            for (int64_t i = 0; i < nc; ++i) {
                double acc = 0;
                for (int64_t k = 0; k < sp; ++k) acc += std::pow(std::fabs(x.getf(i * sp + k)), p);
                y.setf(i, std::pow(acc, 1.0 / p));
            }
            c.set_const(0, y);
        };
        r.add(d);
    }
    for (bool mx : {false, true}) {
        OpDef d;
        d.op_type = mx ? "GlobalMaxPool" : "GlobalAveragePool";
        d.infer = [](OpCtx& c) {
            Shape o = c.shape(0);
            if (o.size() < 3) c.fail("input must have rank >= 3, got " + shape_str(o));
            for (size_t i = 2; i < o.size(); ++i) o[i] = 1;
            c.set_out(0, c.dtype(0), o);
        };
        d.lower = [mx](Lc& c) {
            const Shape& s = c.shape(0);
            int64_t sp = 1;
            for (size_t i = 2; i < s.size(); ++i) sp *= s[i];
            ggml_tensor* x = c.reshape(c.x(0), {s[0], s[1], sp});
            ggml_tensor* y = mx ? G(c.b, ggml_pool_1d, x, GGML_OP_POOL_MAX, int(sp), int(sp), 0) : G(c.b, ggml_mean, x);
            c.set(0, c.reshape(y, c.out(0).shape));
        };
        r.add(d);
    }
}

void register_norm(Registry& r) {
    {
        OpDef d;
        d.op_type = "BatchNormalization";
        d.host_inputs = {1, 2, 3, 4};
        d.infer = [](OpCtx& c) {
            bool training = c.ai("training_mode", 0) != 0;
            for (int i = 1; i < c.nout(); ++i)
                if (c.has_out(i)) {
                    if (!training || c.opset() < 14) c.fail_unsupported("BatchNormalization outputs of opset < 14 training (saved mean/var)");
                    c.set_out(i, c.dtype(3), c.shape(3));
                }
            infer_same(c);
        };
        // training mode (opset >= 14): normalized with the batch's statistics (population variance),
        // running statistics updated with `momentum`; evaluation mode with the given ones
        d.eval = [](OpCtx& c) {
            const Shape& xs = c.shape(0);
            int64_t C = xs.size() > 1 ? xs[1] : 1, N = xs.empty() ? 1 : xs[0], sp = shape_numel(xs) / std::max<int64_t>(1, N * C);
            const Tensor &x = c.cval(0), &sc = c.cval(1), &bi = c.cval(2), &mu = c.cval(3), &var = c.cval(4);
            if (sc.numel() != C || bi.numel() != C || mu.numel() != C || var.numel() != C)
                c.fail_unsupported("BatchNormalization with non per-channel parameters (legacy spatial=0)");
            bool training = c.ai("training_mode", 0) != 0;
            double eps = c.af("epsilon", 1e-5f), mom = c.af("momentum", 0.9f);
            Tensor y = Tensor::zeros(x.dtype, xs), rm = Tensor::zeros(mu.dtype, mu.shape), rv = Tensor::zeros(var.dtype, var.shape);
            for (int64_t ch = 0; ch < C; ++ch) {
                double m = mu.getf(ch), v = var.getf(ch);
                if (training) {
                    double s1 = 0, s2 = 0;
                    for (int64_t n = 0; n < N; ++n)
                        for (int64_t i = 0; i < sp; ++i) s1 += x.getf((n * C + ch) * sp + i);
                    double bm = s1 / double(N * sp);
                    for (int64_t n = 0; n < N; ++n)
                        for (int64_t i = 0; i < sp; ++i) s2 += (x.getf((n * C + ch) * sp + i) - bm) * (x.getf((n * C + ch) * sp + i) - bm);
                    double bv = s2 / double(N * sp);
                    rm.setf(ch, m * mom + bm * (1 - mom));
                    rv.setf(ch, v * mom + bv * (1 - mom));
                    m = bm, v = bv;
                }
                double k = sc.getf(ch) / std::sqrt(v + eps);
                for (int64_t n = 0; n < N; ++n)
                    for (int64_t i = 0; i < sp; ++i) y.setf((n * C + ch) * sp + i, (x.getf((n * C + ch) * sp + i) - m) * k + bi.getf(ch));
            }
            c.set_const(0, y);
            if (c.has_out(1)) c.set_const(1, rm);
            if (c.has_out(2)) c.set_const(2, rv);
        };
        d.fold_limit = 1 << 16;
        d.lower = [](Lc& c) {
            if (c.ai("training_mode", 0) != 0 || c.has_out(1) || c.has_out(2)) c.fail_unsupported("BatchNormalization in training mode has no ggml lowering");
            double eps = c.af("epsilon", 1e-5f);
            const Tensor &sc = c.cval(1), &bi = c.cval(2), &mu = c.cval(3), &var = c.cval(4);
            int64_t C = c.shape(0).size() > 1 ? c.shape(0)[1] : 1;
            if (sc.numel() != C || bi.numel() != C || mu.numel() != C || var.numel() != C)
                c.fail_unsupported("BatchNormalization with non per-channel parameters (legacy spatial=0)");
            std::vector<float> s(C), b(C);
            for (int64_t i = 0; i < C; ++i) {
                double k = sc.getf(i) / std::sqrt(var.getf(i) + eps);
                s[i] = float(k);
                b[i] = float(bi.getf(i) - mu.getf(i) * k);
            }
            Shape ps(c.rank(0) - 1, 1);
            ps[0] = C;
            ggml_tensor* y = c.binary(LowerCtx::Bin::Mul, c.x(0), c.shape(0), c.constant(Tensor::from_f32(s, ps)), ps);
            y = c.binary(LowerCtx::Bin::Add, y, c.shape(0), c.constant(Tensor::from_f32(b, ps)), ps);
            c.set(0, y);
        };
        r.add(d);
    }
    {
        OpDef d;
        d.op_type = "InstanceNormalization";
        d.infer = [](OpCtx& c) {
            if (c.rank(0) < 2) c.fail("input must have rank >= 2 (N, C, ...), got " + shape_str(c.shape(0)));
            infer_same(c);
        };
        d.lower = [](Lc& c) {
            const Shape& s = c.shape(0);
            int64_t sp = 1;
            for (size_t i = 2; i < s.size(); ++i) sp *= s[i];
            ggml_tensor* x = c.reshape(c.x(0), {s[0], s[1], sp});
            ggml_tensor* y = G(c.b, ggml_norm, c.cont(x), c.af("epsilon", 1e-5f));
            y = G(c.b, ggml_mul, y, c.reshape(c.x(1), {s[1], 1}));
            y = G(c.b, ggml_add, y, c.reshape(c.x(2), {s[1], 1}));
            c.set(0, c.reshape(y, s));
        };
        r.add(d);
    }
    {
        OpDef d;
        d.op_type = "LayerNormalization";
        d.infer = [](OpCtx& c) {
            infer_same(c);
            int rk = c.rank(0);
            int a = c.axis(c.ai("axis", -1), rk);
            Shape red(c.shape(0).begin(), c.shape(0).begin() + a);
            for (int i = a; i < rk; ++i) red.push_back(1);
            if (c.has_out(1)) c.set_out(1, DType::F32, red);
            if (c.has_out(2)) c.set_out(2, DType::F32, red);
        };
        d.lower = [](Lc& c) {
            const Shape& s = c.shape(0);
            int rk = int(s.size());
            int a = c.axis(c.ai("axis", -1), rk);
            int64_t p = 1, q = 1;
            for (int i = 0; i < rk; ++i) (i < a ? p : q) *= s[i];
            ggml_tensor* y = G(c.b, ggml_norm, c.cont(c.reshape(c.x(0), {p, q})), c.af("epsilon", 1e-5f));
            Shape qs(s.begin() + a, s.end());
            y = c.binary(LowerCtx::Bin::Mul, y, {p, q}, c.reshape(c.x(1), {shape_numel(c.shape(1))}), align_rank({shape_numel(c.shape(1))}, 1));
            if (c.has(2)) y = c.binary(LowerCtx::Bin::Add, y, {p, q}, c.reshape(c.x(2), {shape_numel(c.shape(2))}), {shape_numel(c.shape(2))});
            if (shape_numel(c.shape(1)) != q) c.fail_unsupported("LayerNormalization with a broadcast scale");
            c.set(0, c.reshape(y, s));
            if (c.has_out(1) || c.has_out(2)) {  // Mean and InvStdDev = 1 / sqrt(var + eps)
                ggml_tensor* x2 = c.cont(c.reshape(c.x(0), {p, q}));
                ggml_tensor* m = G(c.b, ggml_mean, x2);
                c.set(1, c.reshape(m, c.out(1).shape));
                if (c.has_out(2)) {
                    ggml_tensor* var = G(c.b, ggml_mean, G(c.b, ggml_sqr, G(c.b, ggml_sub, x2, m)));
                    ggml_tensor* sd = G(c.b, ggml_sqrt, G(c.b, ggml_scale_bias, var, 1.0f, c.af("epsilon", 1e-5f)));
                    ggml_tensor* one = c.repeat_to(c.scalar(1.0f), {sd->ne[0], sd->ne[1], sd->ne[2], sd->ne[3]});
                    c.set(2, c.reshape(G(c.b, ggml_div, one, sd), c.out(2).shape));
                }
            }
        };
        r.add(d);
    }
}

// ggml_group_norm on x [N, C, ...] viewed as ggml [S, 1, C, N] (it normalizes groups of ne[2]
// over ne[0] x ne[1]), then the per-channel affine y * gamma + beta (either may be null), in place
// on the normalized tensor (its own, fresh): the oneDNN backend runs the chain, and a SiLU in place
// after it (o2g.Silu), as one pass.
void lower_group_norm(Lc& c, ggml_tensor* gamma, ggml_tensor* beta) {
    const Shape& s = c.shape(0);
    int64_t N = s[0], C = s[1], S = shape_numel(s) / std::max<int64_t>(1, N * C);
    ggml_tensor* gn = G(c.b, ggml_group_norm, c.reshape(c.x(0), {N, C, 1, S}), int(c.ai("num_groups", 1)), c.af("epsilon", 1e-5f));
    bool in_place = !c.graph_output(0);  // a graph output owns its memory
    ggml_tensor* y = gn;
    if (gamma) y = in_place ? G(c.b, ggml_mul_inplace, y, gamma) : G(c.b, ggml_mul, y, gamma);
    if (beta) y = in_place ? G(c.b, ggml_add_inplace, y, beta) : G(c.b, ggml_add, y, beta);
    c.set(0, c.reshape(y, s));
    if (in_place) c.overwrote(gn);
}

// Internal ops of the normalization fusions (src/passes/fuse_norm.cpp).
void register_fused_norm(Registry& r) {
    {
        OpDef d;  // GroupNormalization(x [N, C, ...], scale, bias; num_groups, epsilon): per group before opset 21, per channel from 21
        d.op_type = "GroupNormalization";
        d.min_inputs = 3;
        d.host_inputs = {1, 2};
        auto per_channel = [](OpCtx& c, int i) {  // scale/bias as per-channel values
            const Shape& s = c.shape(0);
            int64_t C = s.size() > 1 ? s[1] : 0, G = c.ai("num_groups", 0);
            if (G <= 0 || C % G != 0) c.fail("num_groups " + std::to_string(G) + " does not divide the " + std::to_string(C) + " channels");
            std::vector<float> v = c.cval(i).to_f32(), r(static_cast<size_t>(C), 0.f);
            if (int64_t(v.size()) == C && (c.opset() >= 21 || C == G)) return v;
            if (int64_t(v.size()) != G) c.fail("scale/bias of " + std::to_string(v.size()) + " values for " + std::to_string(G) + " groups");
            for (int64_t ch = 0; ch < C; ++ch) r[size_t(ch)] = v[size_t(ch / (C / G))];
            return r;
        };
        d.infer = [per_channel](OpCtx& c) {
            if (c.rank(0) < 3) c.fail("input must have rank >= 3");
            per_channel(c, 1);
            per_channel(c, 2);
            infer_same(c);
        };
        d.eval = [per_channel](OpCtx& c) {
            const Tensor& x = c.cval(0);
            const Shape& s = c.shape(0);
            int64_t N = s[0], C = s[1], G = c.ai("num_groups", 0), sp = x.numel() / std::max<int64_t>(1, N * C), gsz = C / G * sp;
            double eps = c.af("epsilon", 1e-5f);
            auto sc = per_channel(c, 1), bi = per_channel(c, 2);
            Tensor y = Tensor::zeros(x.dtype, s);
            for (int64_t n = 0; n < N; ++n)
                for (int64_t g = 0; g < G; ++g) {
                    int64_t base = (n * G + g) * gsz;
                    double m = 0, v = 0;
                    for (int64_t i = 0; i < gsz; ++i) m += x.getf(base + i);
                    m /= double(gsz);
                    for (int64_t i = 0; i < gsz; ++i) v += (x.getf(base + i) - m) * (x.getf(base + i) - m);
                    double inv = 1 / std::sqrt(v / double(gsz) + eps);
                    for (int64_t i = 0; i < gsz; ++i) {
                        int64_t ch = g * (C / G) + i / sp;
                        y.setf(base + i, (x.getf(base + i) - m) * inv * sc[size_t(ch)] + bi[size_t(ch)]);
                    }
                }
            c.set_const(0, y);
        };
        d.lower = [per_channel](Lc& c) {
            require_float(c, 0);
            int64_t C = c.shape(0)[1];
            lower_group_norm(c, c.constant(Tensor::from_f32(per_channel(c, 1), {C, 1, 1})), c.constant(Tensor::from_f32(per_channel(c, 2), {C, 1, 1})));
        };
        r.add(d);
    }
    {
        OpDef d;  // o2g.GroupNorm(x [N, C, ...], gamma?, beta?; num_groups, epsilon)
        d.op_type = "o2g.GroupNorm";
        d.infer = infer_same;
        d.lower = [](Lc& c) {
            int64_t C = c.shape(0)[1];
            lower_group_norm(c, c.has(1) ? c.reshape(c.x(1), {C, 1, 1}) : nullptr, c.has(2) ? c.reshape(c.x(2), {C, 1, 1}) : nullptr);
        };
        r.add(d);
    }
    {
        OpDef d;  // o2g.Norm(x; epsilon): (x - mean) / sqrt(var + eps) over the last axis
        d.op_type = "o2g.Norm";
        d.infer = infer_same;
        d.lower = [](Lc& c) {
            const Shape& s = c.shape(0);
            int64_t q = s.empty() ? 1 : s.back(), p = shape_numel(s) / std::max<int64_t>(1, q);
            ggml_tensor* y = G(c.b, ggml_norm, c.cont(c.reshape(c.x(0), {p, q})), c.af("epsilon", 1e-5f));
            c.set(0, c.reshape(y, s));
        };
        r.add(d);
    }
}

void register_matmul(Registry& r) {
    {
        OpDef d;
        d.op_type = "MatMul";
        d.infer = [](OpCtx& c) { c.set_out(0, c.dtype(0), matmul_dims(c, 0, 1).out); };
        d.eval = [](OpCtx& c) {
            MatDims m = matmul_dims(c, 0, 1);
            Tensor t = Tensor::zeros(c.dtype(0), m.out);
            const Tensor &A = c.cval(0), &B = c.cval(1);
            for_each_matmul_batch(m, [&](int64_t bi, int64_t oa, int64_t ob) {
                for (int64_t i = 0; i < m.M; ++i)
                    for (int64_t j = 0; j < m.N; ++j) {
                        double acc = 0;
                        for (int64_t k = 0; k < m.K; ++k) acc += A.getf((oa * m.M + i) * m.K + k) * B.getf((ob * m.K + k) * m.N + j);
                        t.setf((bi * m.M + i) * m.N + j, acc);
                    }
            });
            c.set_const(0, t);
        };
        d.fold_limit = 1 << 16;
        d.work = [](OpCtx& c) { return double(shape_numel(c.out(0).shape)) * double(c.shape(0).back()); };
        d.lower = [](Lc& c) {
            MatDims m = matmul_dims(c, 0, 1);
            c.set(0, c.reshape(matmul(c, 0, 1, m.sa, m.sb, false, false), m.out));
        };
        r.add(d);
    }
    {
        OpDef d;
        d.op_type = "Gemm";
        d.infer = [](OpCtx& c) {
            const Shape &a = c.shape(0), &b = c.shape(1);
            if (a.size() != 2 || b.size() != 2) c.fail("Gemm inputs must be 2-D");
            bool ta = c.ai("transA", 0) != 0, tb = c.ai("transB", 0) != 0;
            int64_t M = ta ? a[1] : a[0], K = ta ? a[0] : a[1], K2 = tb ? b[1] : b[0], N = tb ? b[0] : b[1];
            if (K != K2) c.fail("inner dims differ: " + shape_str(a) + " x " + shape_str(b));
            c.set_out(0, c.dtype(0), {M, N});
        };
        d.lower = [](Lc& c) {
            bool ta = c.ai("transA", 0) != 0, tb = c.ai("transB", 0) != 0;
            float alpha = c.af("alpha", 1.0f), beta = c.af("beta", 1.0f);
            ggml_tensor* y = matmul(c, 0, 1, c.shape(0), c.shape(1), ta, tb);
            if (alpha != 1.0f) y = G(c.b, ggml_scale, y, alpha);
            if (c.has(2) && beta != 0.0f) {
                ggml_tensor* cc = c.x(2);
                if (beta != 1.0f) cc = G(c.b, ggml_scale, c.cont(cc), beta);
                y = c.binary(LowerCtx::Bin::Add, y, c.out(0).shape, cc, operand_shape(c, 2));
            }
            c.set(0, y);
        };
        r.add(d);
    }
}

// Softmax / LogSoftmax over one axis (coerce2d: opset < 13, flattened at the axis).
ggml_tensor* softmax_axis(Lc& c, ggml_tensor* x, const Shape& s, int a, bool logsm, bool coerce2d) {
    int rk = int(s.size());
    std::vector<int64_t> perm;
    Shape work;
    if (coerce2d) {
        int64_t p = 1, q = 1;
        for (int i = 0; i < rk; ++i) (i < a ? p : q) *= s[i];
        work = {p, q};
        x = c.reshape(x, work);
    } else if (a != rk - 1) {
        for (int i = 0; i < rk; ++i) if (i != a) perm.push_back(i);
        perm.push_back(a);
        x = transpose_any(c, x, s, perm);
    }
    x = c.cont(x);
    ggml_tensor* y;
    if (!logsm) {
        y = G(c.b, ggml_soft_max, x);
    } else {  // x - max - log(sum(exp(x - max)))
        int64_t n = x->ne[0];
        ggml_tensor* mx = G(c.b, ggml_pool_1d, x, GGML_OP_POOL_MAX, int(n), int(n), 0);
        ggml_tensor* sh = G(c.b, ggml_sub, x, mx);
        ggml_tensor* lse = G(c.b, ggml_log, G(c.b, ggml_sum_rows, G(c.b, ggml_exp, sh)));
        y = G(c.b, ggml_sub, sh, lse);
    }
    if (!perm.empty()) {
        Shape ps;
        for (auto v : perm) ps.push_back(s[v]);
        std::vector<int64_t> inv = inverse_perm(perm);
        y = transpose_any(c, y, ps, inv);
    }
    return c.reshape(y, s);
}

// NegativeLogLikelihoodLoss of log-probabilities [N, C, d...] with compile-time targets (input 1)
// and weights (input 2): a gather of the target entries times -weight, then the reduction.
ggml_tensor* nll_loss(Lc& c, ggml_tensor* logp) {
    const Shape& s = c.shape(0);
    std::vector<int64_t> t = c.cints(1);
    int64_t N = s[0], C = s[1], D = shape_numel(s) / std::max<int64_t>(1, N * C);
    std::vector<double> w(size_t(C), 1.0);
    if (c.has(2)) for (int64_t k = 0; k < C; ++k) w[k] = c.cval(2).getf(k);
    bool has_ii = c.has_attr("ignore_index");
    int64_t ii = c.ai("ignore_index", 0);
    std::vector<int64_t> idx(t.size());
    Tensor coef = Tensor::zeros(DType::F32, c.shape(1));
    double wsum = 0;
    for (size_t e = 0; e < t.size(); ++e) {
        int64_t n = int64_t(e) / D, d = int64_t(e) % D, cls = t[e];
        if (has_ii && cls == ii) { idx[e] = 0; continue; }
        if (cls < 0 || cls >= C) c.fail("target " + std::to_string(cls) + " is out of range [0, " + std::to_string(C) + ")");
        idx[e] = (n * C + cls) * D + d;
        coef.ptr<float>()[e] = float(-w[cls]);
        wsum += w[cls];
    }
    ggml_tensor* g = gather_flat(c, logp, s, idx, c.shape(1));
    ggml_tensor* l = G(c.b, ggml_mul, g, c.constant(coef));
    std::string red = c.as("reduction", "mean");
    if (red == "none") return l;
    ggml_tensor* sum = G(c.b, ggml_sum, l);
    if (red == "sum") return sum;
    return G(c.b, ggml_scale, sum, float(1.0 / wsum));
}

// o2g.SoftmaxExt(x, mask?; scale, shape, out_shape) of src/passes/fuse_softmax.cpp:
// softmax over the last axis of x * scale + mask, x and mask seen in `shape` (rank <= 4).
void lower_softmax_ext(Lc& c) {
    Shape s = c.ais("shape");
    if (shape_numel(s) != shape_numel(c.shape(0)) || s.empty() || s.size() > 4) internal_error(c.where() + ": bad fused softmax shape");
    ggml_tensor* x = c.cont(c.reshape(c.x(0), s));
    ggml_tensor* mask = nullptr;
    if (c.has(1)) {
        // the constant mask broadcast over the last two dims (ggml_soft_max_ext broadcasts the others)
        size_t r = s.size();
        Shape t = align_rank(c.shape(1), r);
        for (size_t i = r >= 2 ? r - 2 : 0; i < r; ++i) t[i] = s[i];
        Tensor full = broadcast_host(c.cval(1), t);
        mask = c.constant(full);
    }
    ggml_tensor* y = G(c.b, ggml_soft_max_ext, x, mask, c.af("scale", 1.0f), 0.0f);
    c.set(0, c.reshape(y, c.out(0).shape));
}

void register_softmax_misc(Registry& r) {
    {
        OpDef d;
        d.op_type = "o2g.SoftmaxExt";
        d.infer = [](OpCtx& c) { c.set_out(0, DType::F32, c.ais("out_shape")); };
        d.lower = lower_softmax_ext;
        r.add(d);
    }
    for (bool logsm : {false, true}) {
        OpDef d;
        d.op_type = logsm ? "LogSoftmax" : "Softmax";
        d.infer = infer_same;
        d.eval = [logsm](OpCtx& c) {  // host evaluation (float64/float16 tensors, folding)
            const Shape& s = c.shape(0);
            int a = c.axis(c.ai("axis", c.opset() < 13 ? 1 : -1), c.rank(0));
            int64_t n = 1, inner = 1, outer = 1;  // opset < 13: over all dims from `axis` (a 2-D view)
            if (c.opset() < 13) {
                for (int i = a; i < int(s.size()); ++i) n *= s[size_t(i)];
            } else {
                n = s[size_t(a)];
                for (size_t i = size_t(a) + 1; i < s.size(); ++i) inner *= s[i];
            }
            outer = shape_numel(s) / std::max<int64_t>(1, n * inner);
            const Tensor& x = c.cval(0);
            Tensor y = Tensor::zeros(x.dtype, s);
            for (int64_t o = 0; o < outer; ++o)
                for (int64_t in = 0; in < inner; ++in) {
                    auto at = [&](int64_t j) { return (o * n + j) * inner + in; };
                    double mx = -INFINITY, sum = 0;
                    for (int64_t j = 0; j < n; ++j) mx = std::max(mx, x.getf(at(j)));
                    for (int64_t j = 0; j < n; ++j) sum += std::exp(x.getf(at(j)) - mx);
                    for (int64_t j = 0; j < n; ++j) y.setf(at(j), logsm ? x.getf(at(j)) - mx - std::log(sum) : std::exp(x.getf(at(j)) - mx) / sum);
                }
            c.set_const(0, y);
        };
        d.lower = [logsm](Lc& c) {
            int a = c.axis(c.ai("axis", c.opset() < 13 ? 1 : -1), c.rank(0));
            c.set(0, softmax_axis(c, c.x(0), c.shape(0), a, logsm, c.opset() < 13));
        };
        r.add(d);
    }
    {
        OpDef d;
        d.op_type = "Hardmax";
        d.infer = infer_same;
        d.lower = [](Lc& c) {
            require_float(c, 0);
            const Shape& s = c.shape(0);
            int rk = int(s.size());
            int a = c.axis(c.ai("axis", c.opset() < 13 ? 1 : -1), rk);
            if (c.opset() < 13) {  // coerced to 2-D at the axis
                int64_t p = 1, q = 1;
                for (int i = 0; i < rk; ++i) (i < a ? p : q) *= s[i];
                ggml_tensor* y = G(c.b, ggml_map_custom1, c.cont(c.reshape(c.x(0), {p, q})), o2g::hardmax_rows, GGML_N_TASKS_MAX, nullptr);
                c.set(0, c.reshape(y, s));
                return;
            }
            std::vector<int64_t> perm;
            for (int i = 0; i < rk; ++i) if (i != a) perm.push_back(i);
            perm.push_back(a);
            Shape ps;
            for (auto v : perm) ps.push_back(s[v]);
            ggml_tensor* y = G(c.b, ggml_map_custom1, c.cont(transpose_any(c, c.x(0), s, perm)), o2g::hardmax_rows, GGML_N_TASKS_MAX, nullptr);
            std::vector<int64_t> inv = inverse_perm(perm);
            c.set(0, transpose_any(c, y, ps, inv));
        };
        r.add(d);
    }
    {
        OpDef d;
        d.op_type = "MeanVarianceNormalization";
        d.infer = infer_same;
        d.lower = [](Lc& c) {  // (x - mean) / sqrt(var) over `axes`, with ggml_norm's epsilon 1e-9
            require_float(c, 0);
            const Shape& s = c.shape(0);
            int rk = int(s.size());
            std::vector<bool> red(rk, false);
            for (auto a : c.ais("axes", {0, 2, 3})) red[c.axis(a, rk)] = true;
            std::vector<int64_t> perm;
            int64_t rows = 1, n = 1;
            for (int i = 0; i < rk; ++i) if (!red[i]) { perm.push_back(i); rows *= s[i]; }
            for (int i = 0; i < rk; ++i) if (red[i]) { perm.push_back(i); n *= s[i]; }
            Shape ps;
            for (auto v : perm) ps.push_back(s[v]);
            ggml_tensor* x = c.reshape(c.cont(transpose_any(c, c.x(0), s, perm)), {rows, n});
            ggml_tensor* y = c.reshape(G(c.b, ggml_norm, x, 1e-9f), ps);
            std::vector<int64_t> inv = inverse_perm(perm);
            c.set(0, transpose_any(c, y, ps, inv));
        };
        r.add(d);
    }
    {
        OpDef d;
        d.op_type = "LRN";
        d.infer = infer_same;
        d.lower = [](Lc& c) {  // x / (bias + alpha/size * sum over a channel window of x^2)^beta
            require_float(c, 0);
            const Shape& s = c.shape(0);
            if (s.size() != 4) c.fail_unsupported("LRN of a non 4-D tensor");
            int64_t size = c.ai("size", 0);
            float alpha = c.af("alpha", 1e-4f), beta = c.af("beta", 0.75f), bias = c.af("bias", 1.0f);
            int lo = int((size - 1) / 2), hi = int(size - 1 - (size - 1) / 2);
            // channels innermost, zero-padded, summed by an average pool over the window
            ggml_tensor* sq = G(c.b, ggml_sqr, c.cont(c.x(0)));
            ggml_tensor* t = c.cont(c.permute(sq, {0, 2, 3, 1}));  // [N, H, W, C]
            t = G(c.b, ggml_pad_ext, t, lo, hi, 0, 0, 0, 0, 0, 0);
            ggml_tensor* sum = G(c.b, ggml_pool_1d, t, GGML_OP_POOL_AVG, int(size), 1, 0);  // mean over the window
            ggml_tensor* den = G(c.b, ggml_scale_bias, sum, alpha, bias);  // alpha/size * sum = alpha * mean
            ggml_tensor* p = G(c.b, ggml_exp, G(c.b, ggml_scale, G(c.b, ggml_log, den), beta));
            ggml_tensor* back = c.cont(c.permute(p, {0, 3, 1, 2}));
            c.set(0, G(c.b, ggml_div, c.cont(c.x(0)), back));
        };
        r.add(d);
    }
    for (bool sce : {false, true}) {
        OpDef d;
        d.op_type = sce ? "SoftmaxCrossEntropyLoss" : "NegativeLogLikelihoodLoss";
        d.host_inputs = {1, 2};
        d.infer = [sce](OpCtx& c) {
            const Shape& s = c.shape(0);
            const Shape& t = c.shape(1);
            if (s.size() < 2 || t.size() + 1 != s.size()) c.fail("target must have the input's rank minus one");
            std::string red = c.as("reduction", "mean");
            if (red != "none" && red != "sum" && red != "mean") c.fail("unknown reduction '" + red + "'");
            c.set_out(0, c.dtype(0), red == "none" ? t : Shape{});
            if (sce && c.has_out(1)) c.set_out(1, c.dtype(0), s);
        };
        d.lower = [sce](Lc& c) {
            require_float(c, 0);
            ggml_tensor* logp = c.x(0);
            if (sce) {
                logp = softmax_axis(c, logp, c.shape(0), 1, true, false);
                if (c.has_out(1)) c.set(1, logp);
            }
            c.set(0, nll_loss(c, logp));
        };
        r.add(d);
    }
    {
        OpDef d;
        d.op_type = "PRelu";
        d.infer = [](OpCtx& c) {  // the slope broadcasts to X (one way), or is per channel (opset < 7)
            Shape o;
            bool channel = c.opset() < 7 && c.rank(1) == 1 && c.rank(0) >= 2 && c.shape(1)[0] == c.shape(0)[1];
            if (!channel && (!broadcast_shapes(c.shape(0), c.shape(1), o) || o != c.shape(0)))
                c.fail("slope " + shape_str(c.shape(1)) + " does not broadcast to the input " + shape_str(c.shape(0)));
            infer_same(c);
        };
        d.lower = [](Lc& c) {
            ggml_tensor* x = c.xc(0);
            if (c.is_const(1) && c.cval(1).numel() == 1) {
                c.set(0, G(c.b, ggml_leaky_relu, x, float(c.cval(1).getf(0)), false));
                return;
            }
            // relu(x) - slope * relu(-x)
            Shape ss = c.shape(1);
            if (c.opset() < 7 && ss.size() == 1 && c.rank(0) >= 2 && ss[0] == c.shape(0)[1]) {
                ss = Shape(c.rank(0) - 1, 1);  // opset 6: one slope per channel
                ss[0] = c.shape(0)[1];
            }
            ggml_tensor* neg = G(c.b, ggml_relu, G(c.b, ggml_neg, x));
            ggml_tensor* t = c.binary(LowerCtx::Bin::Mul, neg, c.shape(0), c.x(1), ss);
            c.set(0, G(c.b, ggml_sub, G(c.b, ggml_relu, x), t));
        };
        r.add(d);
    }
}

// ---- Resize / Upsample ---------------------------------------------------------------------

struct ResizePlan {
    Shape out;
    std::vector<double> scale;   // per axis
    std::string mode, coord, nearest;
    double cubic_a = -0.75;
    bool from_scales = true;  // output size came from scales (align_corners then uses in * scale)
    bool exclude_outside = false;
    std::vector<double> roi;   // tf_crop_and_resize: [starts..., ends...] (normalized)
    double extrapolation = 0;  // tf_crop_and_resize: the value outside the input
};

ResizePlan resize_plan(OpCtx& c) {
    ResizePlan p;
    const Shape& s = c.shape(0);
    int rk = int(s.size());
    bool upsample = c.node().op_type == "Upsample";
    p.mode = c.as("mode", "nearest");
    std::vector<double> scales;
    std::vector<int64_t> sizes;
    if (upsample) {
        if (c.opset() >= 9) for (auto v : c.cval(1).to_f32()) scales.push_back(v);
        else for (auto v : c.afs("scales")) scales.push_back(v);
        p.coord = "asymmetric";
        p.nearest = "floor";
        if (p.mode == "bilinear") p.mode = "linear";
    } else {
        p.coord = c.as("coordinate_transformation_mode", "half_pixel");
        p.nearest = c.as("nearest_mode", "round_prefer_floor");
        p.cubic_a = c.af("cubic_coeff_a", -0.75f);
        p.exclude_outside = c.ai("exclude_outside", 0) != 0;
        if (c.opset() < 11) {
            for (auto v : c.cval(1).to_f32()) scales.push_back(v);
            p.coord = "asymmetric";
            p.nearest = "floor";
        } else {
            if (c.has(2) && c.cval(2).numel() > 0) for (auto v : c.cval(2).to_f32()) scales.push_back(v);
            if (c.has(3) && c.cval(3).numel() > 0) sizes = c.cints(3);
        }
        if (c.opset() >= 18 && (c.has(4) || c.ai("antialias", 0) != 0 || c.as("keep_aspect_ratio_policy", "stretch") != "stretch"))
            c.fail_unsupported("Resize axes/antialias/keep_aspect_ratio_policy are not supported yet");
    }
    if (p.coord == "tf_crop_and_resize") {
        if (!c.has(1)) c.fail("tf_crop_and_resize needs the roi input");
        for (auto v : c.cval(1).to_f32()) p.roi.push_back(v);
        if (int(p.roi.size()) != 2 * rk) c.fail("roi has " + std::to_string(p.roi.size()) + " values for rank " + std::to_string(rk));
        p.extrapolation = c.af("extrapolation_value", 0.0f);
    }
    p.out.resize(rk);
    p.scale.resize(rk);
    if (!sizes.empty()) {
        if (int(sizes.size()) != rk) c.fail("sizes has the wrong length");
        for (int i = 0; i < rk; ++i) { p.out[i] = sizes[i]; p.scale[i] = double(sizes[i]) / double(s[i]); }
        p.from_scales = false;
    } else {
        if (int(scales.size()) != rk) c.fail("scales has " + std::to_string(scales.size()) + " entries for rank " + std::to_string(rk));
        for (int i = 0; i < rk; ++i) {
            if (!(scales[i] > 0)) c.fail("scales must be positive");
            double o = std::floor(double(s[i]) * scales[i] + 1e-9);
            if (!(o < 0x1p40)) c.fail("scales give an output dim of " + std::to_string(o) + ", too large");  // (never cast out of range)
            p.scale[i] = scales[i];
            p.out[i] = int64_t(o);
        }
    }
    if (p.mode != "nearest" && p.mode != "linear" && p.mode != "cubic") c.fail("unknown Resize mode '" + p.mode + "'");
    return p;
}

double source_coord(const ResizePlan& p, int a, int64_t x, int64_t in, int64_t out, double scale) {
    const std::string& m = p.coord;
    if (m == "tf_crop_and_resize") {
        double st = p.roi[size_t(a)], en = p.roi[p.roi.size() / 2 + size_t(a)];
        return out > 1 ? st * double(in - 1) + double(x) * (en - st) * double(in - 1) / double(out - 1) : 0.5 * (st + en) * double(in - 1);
    }
    if (m == "asymmetric") return x / scale;
    if (m == "align_corners") {
        double len = p.from_scales ? double(in) * scale : double(out);
        return out == 1 ? 0.0 : double(x) * double(in - 1) / (len - 1);
    }
    if (m == "pytorch_half_pixel") return out > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
    if (m == "tf_half_pixel_for_nn") return (x + 0.5) / scale;
    if (m == "half_pixel_symmetric") {
        double adj = double(out) / (scale * double(in));
        double center = double(in) / 2.0;
        double offset = center * (1 - adj);
        return offset + (x + 0.5) / scale - 0.5;
    }
    return (x + 0.5) / scale - 0.5;  // half_pixel
}

int64_t nearest_index(const ResizePlan& p, double xo, int64_t in) {
    double r;
    if (p.nearest == "floor") r = std::floor(xo);
    else if (p.nearest == "ceil") r = std::ceil(xo);
    else if (p.nearest == "round_prefer_ceil") r = std::floor(xo + 0.5);
    else r = (xo - std::floor(xo) == 0.5) ? std::floor(xo) : std::round(xo);  // round_prefer_floor
    return std::clamp<int64_t>(int64_t(r), 0, in - 1);
}

// Interpolation matrix [out, in] for one axis (linear or cubic).
// tf_crop_and_resize: whether output x of axis a samples inside the input
bool inside(const ResizePlan& p, int a, int64_t x, int64_t in, int64_t out, double scale) {
    if (p.coord != "tf_crop_and_resize") return true;
    double xo = source_coord(p, a, x, in, out, scale);
    return xo >= 0 && xo <= double(in - 1);
}

Tensor interp_matrix(const ResizePlan& p, int a, int64_t in, int64_t out, double scale) {
    Tensor m = Tensor::zeros(DType::F32, {out, in});
    float* w = m.ptr<float>();
    for (int64_t x = 0; x < out; ++x) {
        if (!inside(p, a, x, in, out, scale)) continue;  // extrapolated (added after)
        double xo = source_coord(p, a, x, in, out, scale);
        if (p.mode == "linear") {
            xo = std::clamp(xo, 0.0, double(in - 1));
            int64_t x0 = int64_t(std::floor(xo)), x1 = std::min(x0 + 1, in - 1);
            double f = xo - double(x0);
            w[x * in + x0] += float(1 - f);
            w[x * in + x1] += float(f);
        } else {  // cubic
            int64_t x0 = int64_t(std::floor(xo));
            double f = xo - double(x0), a = p.cubic_a;
            double ws[4], sum = 0;
            for (int k = -1; k <= 2; ++k) {
                double t = std::fabs(double(k) - f);
                double v = t <= 1 ? ((a + 2) * t - (a + 3)) * t * t + 1 : (t < 2 ? ((a * t - 5 * a) * t + 8 * a) * t - 4 * a : 0);
                int64_t idx = x0 + k;
                if (p.exclude_outside && (idx < 0 || idx >= in)) v = 0;
                ws[k + 1] = v;
                sum += v;
            }
            for (int k = -1; k <= 2; ++k) {
                int64_t idx = std::clamp<int64_t>(x0 + k, 0, in - 1);
                w[x * in + idx] += float(p.exclude_outside ? ws[k + 1] / sum : ws[k + 1]);
            }
        }
    }
    return m;
}

// tf_crop_and_resize: y * inside + extrapolation_value * (1 - inside), inside a product over the axes
ggml_tensor* extrapolate(Lc& c, const ResizePlan& p, ggml_tensor* y) {
    if (p.coord != "tf_crop_and_resize") return y;
    const Shape& s = c.shape(0);
    int rk = int(s.size());
    Shape ms(static_cast<size_t>(rk), 1);
    std::vector<std::vector<float>> in_ax(static_cast<size_t>(rk));
    bool all = true;
    for (int a = 0; a < rk; ++a) {
        for (int64_t x = 0; x < p.out[size_t(a)]; ++x) in_ax[size_t(a)].push_back(inside(p, a, x, s[size_t(a)], p.out[size_t(a)], p.scale[size_t(a)]) ? 1.f : 0.f);
        bool ax_all = std::all_of(in_ax[size_t(a)].begin(), in_ax[size_t(a)].end(), [](float v) { return v == 1.f; });
        if (!ax_all) ms[size_t(a)] = p.out[size_t(a)];
        all &= ax_all;
    }
    if (all) return y;
    std::vector<float> mask(size_t(shape_numel(ms)), 1.f), ext(mask.size());
    auto st = strides_of(ms);
    for (size_t i = 0; i < mask.size(); ++i) {
        for (int a = 0; a < rk; ++a)
            if (ms[size_t(a)] > 1) mask[i] *= in_ax[size_t(a)][size_t((int64_t(i) / st[size_t(a)]) % ms[size_t(a)])];
        ext[i] = float(p.extrapolation) * (1 - mask[i]);
    }
    y = c.binary(LowerCtx::Bin::Mul, y, p.out, c.constant(Tensor::from_f32(mask, ms)), ms);
    return c.binary(LowerCtx::Bin::Add, y, p.out, c.constant(Tensor::from_f32(ext, ms)), ms);
}

void lower_resize(Lc& c) {
    ResizePlan p = resize_plan(c);
    const Shape& s = c.shape(0);
    int rk = int(s.size());
    if (rk > 4) c.fail_unsupported("Resize of a rank > 4 tensor");
    ggml_tensor* x = c.x(0);
    if (p.mode == "nearest") {
        std::vector<std::vector<int64_t>> idx(rk);
        bool fast = true;  // matches ggml's nearest (floor(i * in / out)) on every axis
        for (int a = 0; a < rk; ++a) {
            for (int64_t i = 0; i < p.out[a]; ++i) idx[a].push_back(nearest_index(p, source_coord(p, a, i, s[a], p.out[a], p.scale[a]), s[a]));
            bool ident = p.out[a] == s[a];
            for (int64_t i = 0; i < p.out[a]; ++i) ident &= idx[a][i] == i;
            if (ident) { idx[a].clear(); continue; }
            bool floor_rule = p.out[a] % s[a] == 0 && ggml_dim(a, rk) < 2;
            for (int64_t i = 0; i < p.out[a] && floor_rule; ++i) floor_rule &= idx[a][i] == i * s[a] / p.out[a];
            fast &= floor_rule;
        }
        if (fast && p.coord != "tf_crop_and_resize") {
            auto ne = to_ne(p.out);
            c.set(0, G(c.b, ggml_interpolate, c.cont(x), ne[0], ne[1], ne[2], ne[3], uint32_t(GGML_SCALE_MODE_NEAREST)));
            return;
        }
        Shape cur = s;
        for (int a = 0; a < rk; ++a) {
            if (idx[a].empty()) continue;
            x = gather_axis(c, x, cur, a, idx[a]);
            cur[a] = p.out[a];
        }
        c.set(0, extrapolate(c, p, x));
        return;
    }
    // linear / cubic: separable, one matrix product per resized axis
    Shape cur = s;
    for (int a = rk - 1; a >= 0; --a) {
        if (p.out[a] == s[a] && (p.coord == "half_pixel" || p.coord == "asymmetric" || p.coord == "align_corners" ||
                                 p.coord == "pytorch_half_pixel") && p.scale[a] == 1.0)
            continue;
        ggml_tensor* m = c.constant(interp_matrix(p, a, s[a], p.out[a], p.scale[a]));  // ne [in, out]
        // move axis a last, contract, move back
        std::vector<int64_t> perm;
        for (int i = 0; i < rk; ++i) if (i != a) perm.push_back(i);
        perm.push_back(a);
        Shape ps;
        for (auto v : perm) ps.push_back(cur[v]);
        ggml_tensor* t = c.cont(c.permute(c.reshape(x, cur), perm));
        int64_t rows = shape_numel(ps) / cur[a];
        ggml_tensor* y = G(c.b, ggml_mul_mat, m, G(c.b, ggml_reshape_2d, t, cur[a], rows));  // [out, rows]
        ps.back() = p.out[a];
        y = c.reshape(y, ps);
        std::vector<int64_t> inv = inverse_perm(perm);
        x = c.permute(y, inv);
        cur[a] = p.out[a];
    }
    c.set(0, extrapolate(c, p, c.cont(x)));
}

void register_resize(Registry& r) {
    for (const char* op : {"Resize", "Upsample"}) {
        OpDef d;
        d.op_type = op;
        d.host_inputs = {1, 2, 3};
        d.infer = [](OpCtx& c) { c.set_out(0, c.dtype(0), resize_plan(c).out); };
        d.lower = lower_resize;
        r.add(d);
    }
}

}  // namespace

void register_nn(Registry& r) {
    register_conv_pool(r);
    register_norm(r);
    register_matmul(r);
    register_fused_norm(r);
    register_softmax_misc(r);
    register_resize(r);
}

}  // namespace onnx2ggml
