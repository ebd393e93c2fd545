// Quantization operators: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear and the
// integer/quantized MatMul and Conv (MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv).
// ggml's own quantized types (blocks of 32 with per-block scales) do not hold ONNX's
// per-tensor/per-axis uint8/int8 values, so these are computed exactly by their host
// evaluators: folded when constant, else host kernels (lower/host_kernel.h). Integer products
// accumulate in int64 (exact), requantization rounds half to even as the spec says.
#include <algorithm>
#include <cmath>

#include "ops/common.h"

namespace onnx2ggml {
namespace {

int64_t saturate(DType t, double v) {
    double lo = 0, hi = 255;
    switch (t) {
        case DType::U8: break;
        case DType::I8: lo = -128, hi = 127; break;
        case DType::U16: hi = 65535; break;
        case DType::I16: lo = -32768, hi = 32767; break;
        case DType::I32: lo = -2147483648.0, hi = 2147483647.0; break;
        default: throw Error(kExitUnsupported, std::string("quantization to ") + dtype_name(t), std::string("quantization to ") + dtype_name(t));
    }
    return int64_t(std::min(hi, std::max(lo, v)));
}

// Per-element index into a per-axis parameter (scale or zero point) of `n` values.
struct AxisParam {
    int64_t inner = 1, n = 1;
    int64_t at(int64_t flat) const { return n == 1 ? 0 : (flat / inner) % n; }
};

AxisParam axis_param(OpCtx& c, int data, int param) {
    AxisParam p;
    if (!c.has(param)) return p;
    p.n = shape_numel(c.shape(param));
    if (p.n == 1) return p;
    const Shape& s = c.shape(data);
    int a = c.axis(c.ai("axis", 1), int(s.size()));
    if (c.rank(param) != 1 || s[a] != p.n) c.fail("per-axis parameter of shape " + shape_str(c.shape(param)) + " does not match axis " + std::to_string(a) + " of " + shape_str(s));
    for (size_t i = size_t(a) + 1; i < s.size(); ++i) p.inner *= s[i];
    return p;
}

void register_quantize(Registry& r) {
    {
        OpDef d;
        d.op_type = "QuantizeLinear";
        d.min_inputs = 2;
        d.infer = [](OpCtx& c) { c.set_out(0, c.has(2) ? c.dtype(2) : DType::U8, c.shape(0)); };
        d.eval = [](OpCtx& c) {
            const Tensor& x = c.cval(0);
            const Tensor& sc = c.cval(1);
            AxisParam ps = axis_param(c, 0, 1), pz = axis_param(c, 0, 2);
            DType ot = c.has(2) ? c.dtype(2) : DType::U8;
            Tensor y = Tensor::zeros(ot, x.shape);
            for (int64_t i = 0; i < x.numel(); ++i) {
                float q = float(x.getf(i)) / float(sc.getf(ps.at(i)));  // float32 arithmetic, as the spec's reference
                int64_t zp = c.has(2) ? c.cval(2).geti(pz.at(i)) : 0;
                y.seti(i, saturate(ot, std::nearbyint(double(q)) + double(zp)));
            }
            c.set_const(0, y);
        };
        r.add(d);
    }
    {
        OpDef d;
        d.op_type = "DequantizeLinear";
        d.min_inputs = 2;
        d.infer = [](OpCtx& c) { c.set_out(0, c.dtype(1), c.shape(0)); };
        d.eval = [](OpCtx& c) {
            const Tensor& x = c.cval(0);
            const Tensor& sc = c.cval(1);
            AxisParam ps = axis_param(c, 0, 1), pz = axis_param(c, 0, 2);
            Tensor y = Tensor::zeros(c.dtype(1), x.shape);
            for (int64_t i = 0; i < x.numel(); ++i) {
                int64_t zp = c.has(2) ? c.cval(2).geti(pz.at(i)) : 0;
                y.setf(i, double(float(x.geti(i) - zp) * float(sc.getf(ps.at(i)))));
            }
            c.set_const(0, y);
        };
        r.add(d);
    }
    {
        OpDef d;
        d.op_type = "DynamicQuantizeLinear";
        d.infer = [](OpCtx& c) {
            c.set_out(0, DType::U8, c.shape(0));
            c.set_out(1, DType::F32, {});
            c.set_out(2, DType::U8, {});
        };
        d.eval = [](OpCtx& c) {  // uint8, scale = (max(0, x) - min(0, x)) / 255, in float32 as the spec's reference
            const Tensor& x = c.cval(0);
            float lo = 0, hi = 0;
            for (int64_t i = 0; i < x.numel(); ++i) lo = std::min(lo, float(x.getf(i))), hi = std::max(hi, float(x.getf(i)));
            float scale = (hi - lo) / 255.0f;
            double zp = scale == 0 ? 0 : double(saturate(DType::U8, std::nearbyint(double(0.0f - lo / scale))));
            Tensor y = Tensor::zeros(DType::U8, x.shape);
            for (int64_t i = 0; i < x.numel(); ++i)
                y.seti(i, scale == 0 ? int64_t(zp) : saturate(DType::U8, std::nearbyint(double(float(x.getf(i)) / scale)) + zp));
            c.set_const(0, y);
            c.set_const(1, Tensor::from_f32({scale}, {}));
            Tensor z = Tensor::zeros(DType::U8, {});
            z.seti(0, int64_t(zp));
            c.set_const(2, z);
        };
        r.add(d);
    }
}

// ---- integer matmul -----------------------------------------------------------------------

// (A - a_zp) @ (B - b_zp) in int64; a_zp per row of A (or scalar), b_zp per column of B (or scalar)
std::vector<int64_t> matmul_int(OpCtx& c, int ia, int ib, int iaz, int ibz, const MatDims& m) {
    const Tensor &A = c.cval(ia), &B = c.cval(ib);
    auto zp = [&](int i, int64_t k) { return c.has(i) ? c.cval(i).geti(shape_numel(c.shape(i)) == 1 ? 0 : k) : 0; };
    std::vector<int64_t> y(size_t(shape_numel(m.bo) * m.M * m.N), 0);
    for_each_matmul_batch(m, [&](int64_t bi, int64_t oa, int64_t ob) {
        for (int64_t i = 0; i < m.M; ++i)
            for (int64_t j = 0; j < m.N; ++j) {
                int64_t acc = 0, az = zp(iaz, i), bz = zp(ibz, j);
                for (int64_t k = 0; k < m.K; ++k) acc += (A.geti((oa * m.M + i) * m.K + k) - az) * (B.geti((ob * m.K + k) * m.N + j) - bz);
                y[size_t((bi * m.M + i) * m.N + j)] = acc;
            }
    });
    return y;
}

void register_int_matmul(Registry& r) {
    {
        OpDef d;
        d.op_type = "MatMulInteger";
        d.min_inputs = 2;
        d.infer = [](OpCtx& c) { c.set_out(0, DType::I32, matmul_dims(c, 0, 1).out); };
        d.work = [](OpCtx& c) { return double(shape_numel(c.out(0).shape)) * double(c.shape(0).back()); };
        d.eval = [](OpCtx& c) {
            MatDims m = matmul_dims(c, 0, 1);
            auto y = matmul_int(c, 0, 1, 2, 3, m);
            Tensor t = Tensor::zeros(DType::I32, m.out);
            for (size_t i = 0; i < y.size(); ++i) t.seti(int64_t(i), y[i]);
            c.set_const(0, t);
        };
        r.add(d);
    }
    {
        OpDef d;
        d.op_type = "QLinearMatMul";
        d.min_inputs = 8;
        d.infer = [](OpCtx& c) { c.set_out(0, c.dtype(7), matmul_dims(c, 0, 3).out); };
        d.work = [](OpCtx& c) { return double(shape_numel(c.out(0).shape)) * double(c.shape(0).back()); };
        d.eval = [](OpCtx& c) {  // y = saturate(round((a - a_zp) @ (b - b_zp) * a_scale * b_scale / y_scale) + y_zp)
            MatDims m = matmul_dims(c, 0, 3);
            auto y = matmul_int(c, 0, 3, 2, 5, m);
            const Tensor &as = c.cval(1), &bs = c.cval(4);
            double ys = c.cval(6).getf(0);
            int64_t yz = c.cval(7).geti(0);
            Tensor t = Tensor::zeros(c.dtype(7), m.out);
            for (size_t i = 0; i < y.size(); ++i) {
                int64_t row = (int64_t(i) / m.N) % m.M, col = int64_t(i) % m.N;
                double s = as.getf(as.numel() == 1 ? 0 : row) * bs.getf(bs.numel() == 1 ? 0 : col) / ys;
                t.seti(int64_t(i), saturate(c.dtype(7), std::nearbyint(double(y[i]) * s) + double(yz)));
            }
            c.set_const(0, t);
        };
        r.add(d);
    }
}

// ---- integer conv -------------------------------------------------------------------------

// x - x_zp (per tensor) and w - w_zp (per tensor or per output channel), as doubles (exact)
std::vector<double> minus_zp(OpCtx& c, int i, int izp, bool per_channel) {
    const Tensor& t = c.cval(i);
    std::vector<double> r(size_t(t.numel()));
    bool hz = izp >= 0 && c.has(izp);
    int64_t n = hz ? shape_numel(c.shape(izp)) : 1, inner = t.numel() / std::max<int64_t>(1, t.shape.empty() ? 1 : t.shape[0]);
    if (hz && n != 1 && (!per_channel || t.shape.empty() || n != t.shape[0])) c.fail("zero point of shape " + shape_str(c.shape(izp)) + " does not match " + shape_str(t.shape));
    for (int64_t k = 0; k < t.numel(); ++k) r[size_t(k)] = double(t.geti(k) - (hz ? c.cval(izp).geti(n == 1 ? 0 : k / inner) : 0));
    return r;
}

void register_int_conv(Registry& r) {
    {
        OpDef d;
        d.op_type = "ConvInteger";
        d.min_inputs = 2;
        d.infer = [](OpCtx& c) { c.set_out(0, DType::I32, conv_output_shape(c, c.shape(1))); };
        d.work = [](OpCtx& c) { return double(shape_numel(c.out(0).shape)) * double(shape_numel(c.shape(1))) / double(std::max<int64_t>(1, c.shape(1)[0])); };
        d.eval = [](OpCtx& c) {
            auto y = conv_host(c, c.shape(1), minus_zp(c, 0, 2, false), minus_zp(c, 1, 3, true), nullptr);
            Tensor t = Tensor::zeros(DType::I32, c.out(0).shape);
            for (size_t i = 0; i < y.size(); ++i) t.seti(int64_t(i), int64_t(y[i]));
            c.set_const(0, t);
        };
        r.add(d);
    }
    {
        OpDef d;
        d.op_type = "QLinearConv";
        d.min_inputs = 8;
        d.infer = [](OpCtx& c) { c.set_out(0, c.dtype(7), conv_output_shape(c, c.shape(3))); };
        d.work = [](OpCtx& c) { return double(shape_numel(c.out(0).shape)) * double(shape_numel(c.shape(3))) / double(std::max<int64_t>(1, c.shape(3)[0])); };
        d.eval = [](OpCtx& c) {
            std::vector<double> bias;
            if (c.has(8)) bias = minus_zp(c, 8, -1, false);
            auto y = conv_host(c, c.shape(3), minus_zp(c, 0, 2, false), minus_zp(c, 3, 5, true), c.has(8) ? &bias : nullptr);
            const Shape& os = c.out(0).shape;
            int64_t M = os[1], sp = shape_numel(os) / std::max<int64_t>(1, os[0] * M);
            double xs = c.cval(1).getf(0), ys = c.cval(6).getf(0);
            const Tensor& ws = c.cval(4);
            int64_t yz = c.cval(7).geti(0);
            Tensor t = Tensor::zeros(c.dtype(7), os);
            for (size_t i = 0; i < y.size(); ++i) {
                int64_t m = (int64_t(i) / sp) % M;
                double s = xs * ws.getf(ws.numel() == 1 ? 0 : m) / ys;
                t.seti(int64_t(i), saturate(c.dtype(7), std::nearbyint(y[i] * s) + double(yz)));
            }
            c.set_const(0, t);
        };
        r.add(d);
    }
}

}  // namespace

O2G_OP_FAMILY(quant) {
    register_quantize(r);
    register_int_matmul(r);
    register_int_conv(r);
}

}  // namespace onnx2ggml
