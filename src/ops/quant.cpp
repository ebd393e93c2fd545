// Quantization operators: QuantizeLinear, DequantizeLinear (per tensor, per axis, blocked), DynamicQuantizeLinear,
// the integer/quantized MatMul and Conv (MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv) and
// com.microsoft MatMulNBits. ggml's own quantized types (blocks of 32 with per-block scales) do not hold ONNX's
// per-tensor/per-axis uint8/int8 values, so these are computed exactly by their host evaluators: folded when
// constant, else host kernels (lower/host_kernel.h). Integer products accumulate in int64 (exact), rounding is
// half to even, and the float steps are float32 in ONNX Runtime's order, so that every integer output equals
// ONNX Runtime's (tests/quant/quant_ort_test.py). MatMulNBits is rewritten into a MatMul with its weight
// dequantized once.
#include <algorithm>
#include <cmath>

#include "lower/integer_weights.h"
#include "ops/common.h"

namespace onnx2ggml::core {
namespace {

int64_t saturate(DType t, double v) {
    double lo = 0, hi = 255;
    switch (t) {
        case DType::U8: break;
        case DType::I8: lo = -128, hi = 127; break;
        case DType::U16: hi = 65535; break;
        case DType::I16: lo = -32768, hi = 32767; break;
        case DType::I32: lo = -2147483648.0, hi = 2147483647.0; break;
        default:
            throw Error(kExitUnsupported, std::string("quantization to ") + dtype_name(t),
                        std::string("quantization to ") + dtype_name(t));
    }
    return int64_t(std::min(hi, std::max(lo, v)));
}

// Per-element index into a per-axis or blocked parameter (scale or zero point). Per tensor: one value;
// per axis (opset 13): a 1-D parameter of x's dim `axis`; blocked (opset 21, block_size > 0): a parameter of
// x's rank whose dim `axis` is ceil(D / block_size), one value per block of block_size along that axis.
struct AxisParam {
    int64_t inner = 1, dim = 1, n = 1, block = 0;
    int64_t at(int64_t flat) const {
        if (n == 1 && !block) return 0;
        int64_t i = flat % inner, t = flat / inner, d = t % dim;
        return block ? ((t / dim) * ((dim + block - 1) / block) + d / block) * inner + i : d;
    }
};

AxisParam axis_param(OpCtx& c, int data, int param) {
    AxisParam p;
    if (!c.has(param)) return p;
    p.n = shape_numel(c.shape(param));
    const Shape& s = c.shape(data);
    int64_t block = c.opset() >= 21 ? c.ai("block_size", 0) : 0;
    if (p.n == 1 && block == 0) return p;
    int a = c.axis(c.ai("axis", 1), int(s.size()));
    for (size_t i = size_t(a) + 1; i < s.size(); ++i) p.inner *= s[i];
    p.dim = s[size_t(a)];
    if (block < 0) c.fail("block_size " + std::to_string(block) + " is negative");
    if (block > 0) {
        Shape want = s;
        want[size_t(a)] = (s[size_t(a)] + block - 1) / block;
        if (c.shape(param) != want)
            c.fail("blocked parameter of shape " + shape_str(c.shape(param)) + " does not match " + shape_str(s) +
                   " in blocks of " + std::to_string(block) + " along axis " + std::to_string(a) + " (want " +
                   shape_str(want) + ")");
        p.block = block;
        return p;
    }
    if (c.rank(param) != 1 || s[size_t(a)] != p.n)
        c.fail("per-axis parameter of shape " + shape_str(c.shape(param)) + " does not match axis " +
               std::to_string(a) + " of " + shape_str(s));
    return p;
}

// QuantizeLinear's output type: the zero point's, else (opset 21) output_dtype, else uint8
DType quantized_type(OpCtx& c) {
    if (c.has(2)) return c.dtype(2);
    int64_t t = c.opset() >= 21 ? c.ai("output_dtype", 0) : 0;
    if (t == 0) return DType::U8;
    if (!dtype_known(int(t))) c.fail_unsupported("output_dtype " + std::to_string(t));
    return DType(t);
}

void register_quantize(Registry& r) {
    {
        OpDef d;
        d.op_type = "QuantizeLinear";
        d.min_inputs = 2;
        d.infer = [](OpCtx& c) {
            axis_param(c, 0, 1), axis_param(c, 0, 2);  // the parameters' shapes
            c.set_out(0, quantized_type(c), c.shape(0));
        };
        d.eval = [](OpCtx& c) {
            const Tensor& x = c.cval(0);
            const Tensor& sc = c.cval(1);
            AxisParam ps = axis_param(c, 0, 1), pz = axis_param(c, 0, 2);
            DType ot = quantized_type(c);
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
        d.infer = [](OpCtx& c) {
            axis_param(c, 0, 1), axis_param(c, 0, 2);
            c.set_out(0, c.dtype(1), c.shape(0));
        };
        d.eval = [](OpCtx& c) {
            const Tensor& x = c.cval(0);
            const Tensor& sc = c.cval(1);
            AxisParam ps = axis_param(c, 0, 1), pz = axis_param(c, 0, 2);
            Tensor y = Tensor::zeros(c.dtype(1), x.shape);
            for (int64_t i = 0; i < x.numel(); ++i) {
                int64_t zp = c.has(2) ? c.cval(2).geti(pz.at(i)) : 0;
                y.setf(i, double(float(x.geti(i) - zp) * float(sc.getf(ps.at(i)))));
            }
            // a weight stored in a quantized type later is written from these integers (lower/integer_weights.h)
            if (y.dtype == DType::F32 && (x.dtype == DType::I8 || x.dtype == DType::U8)) {
                auto src = std::make_shared<IntegerSource>();
                Tensor zt = c.has(2) ? c.cval(2) : Tensor();
                src->at = [x, sc, zt, ps, pz](int64_t i, int32_t* code, int32_t* zero, float* scale) {
                    *code = int32_t(x.geti(i));
                    *zero = zt.buf ? int32_t(zt.geti(pz.at(i))) : 0;
                    *scale = float(sc.getf(ps.at(i)));
                };
                attach_integer_source(y, std::move(src));
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
        // uint8, scale = (max(0, x) - min(0, x)) / 255 in float32 as the spec's reference; an all-zero x
        // (max == min) gets scale 1, as ONNX Runtime gives (the spec's formula would divide by zero)
        d.eval = [](OpCtx& c) {
            const Tensor& x = c.cval(0);
            float lo = 0, hi = 0;
            for (int64_t i = 0; i < x.numel(); ++i)
                lo = std::min(lo, float(x.getf(i))), hi = std::max(hi, float(x.getf(i)));
            float scale = hi == lo ? 1.0f : (hi - lo) / 255.0f;
            double zp = double(saturate(DType::U8, std::nearbyint(double(0.0f - lo / scale))));
            Tensor y = Tensor::zeros(DType::U8, x.shape);
            for (int64_t i = 0; i < x.numel(); ++i)
                y.seti(i, saturate(DType::U8, std::nearbyint(double(float(x.getf(i)) / scale)) + zp));
            c.set_const(0, y);
            c.set_const(1, Tensor::from_f32({scale}, {}));
            Tensor z = Tensor::zeros(DType::U8, {});
            z.seti(0, int64_t(zp));
            c.set_const(2, z);
        };
        r.add(d);
    }
}

// The requantization of QLinearMatMul/QLinearConv as ONNX Runtime computes it: the int32 accumulator times
// the float32 scale a_scale * b_scale / y_scale, rounded half to even, plus the zero point, saturated.
int64_t requantize(DType t, int64_t acc, float scale, int64_t zp) {
    return saturate(t, double(std::nearbyint(float(int32_t(acc)) * scale)) + double(zp));
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
                for (int64_t k = 0; k < m.K; ++k)
                    acc += (A.geti((oa * m.M + i) * m.K + k) - az) * (B.geti((ob * m.K + k) * m.N + j) - bz);
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
            float ys = float(c.cval(6).getf(0));
            int64_t yz = c.cval(7).geti(0);
            Tensor t = Tensor::zeros(c.dtype(7), m.out);
            for (size_t i = 0; i < y.size(); ++i) {
                int64_t row = (int64_t(i) / m.N) % m.M, col = int64_t(i) % m.N;
                float s = float(as.getf(as.numel() == 1 ? 0 : row)) * float(bs.getf(bs.numel() == 1 ? 0 : col)) / ys;
                t.seti(int64_t(i), requantize(c.dtype(7), y[i], s, yz));
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
    int64_t n = hz ? shape_numel(c.shape(izp)) : 1,
            inner = t.numel() / std::max<int64_t>(1, t.shape.empty() ? 1 : t.shape[0]);
    if (hz && n != 1 && (!per_channel || t.shape.empty() || n != t.shape[0]))
        c.fail("zero point of shape " + shape_str(c.shape(izp)) + " does not match " + shape_str(t.shape));
    for (int64_t k = 0; k < t.numel(); ++k)
        r[size_t(k)] = double(t.geti(k) - (hz ? c.cval(izp).geti(n == 1 ? 0 : k / inner) : 0));
    return r;
}

void register_int_conv(Registry& r) {
    {
        OpDef d;
        d.op_type = "ConvInteger";
        d.min_inputs = 2;
        d.infer = [](OpCtx& c) { c.set_out(0, DType::I32, conv_output_shape(c, c.shape(1))); };
        d.work = [](OpCtx& c) {
            return double(shape_numel(c.out(0).shape)) * double(shape_numel(c.shape(1))) /
                   double(std::max<int64_t>(1, c.shape(1)[0]));
        };
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
        d.work = [](OpCtx& c) {
            return double(shape_numel(c.out(0).shape)) * double(shape_numel(c.shape(3))) /
                   double(std::max<int64_t>(1, c.shape(3)[0]));
        };
        d.eval = [](OpCtx& c) {
            std::vector<double> bias;
            if (c.has(8)) bias = minus_zp(c, 8, -1, false);
            auto y =
                conv_host(c, c.shape(3), minus_zp(c, 0, 2, false), minus_zp(c, 3, 5, true), c.has(8) ? &bias : nullptr);
            const Shape& os = c.out(0).shape;
            int64_t M = os[1], sp = shape_numel(os) / std::max<int64_t>(1, os[0] * M);
            float xs = float(c.cval(1).getf(0)), ys = float(c.cval(6).getf(0));
            const Tensor& ws = c.cval(4);
            int64_t yz = c.cval(7).geti(0);
            Tensor t = Tensor::zeros(c.dtype(7), os);
            for (size_t i = 0; i < y.size(); ++i) {
                int64_t m = (int64_t(i) / sp) % M;
                float s = xs * float(ws.getf(ws.numel() == 1 ? 0 : m)) / ys;
                t.seti(int64_t(i), requantize(c.dtype(7), int64_t(y[i]), s, yz));
            }
            c.set_const(0, t);
        };
        r.add(d);
    }
}

// ---- com.microsoft MatMulNBits ----------------------------------------------------------------

// Y = A @ dequant(B)^T (+ bias), B [N, ceil(K / block_size), block_size * bits / 8] of `bits`-bit codes packed
// low bits first along K, dequantized per block as (code - zero_point) * scale; zero points packed the same way
// (uint8, one row of ceil(n_blocks * bits / 8) bytes per n) or unpacked floats, default 2^(bits - 1); g_idx
// (deprecated) names each k's block. With constant B, scales, zero points (as published) the node becomes
// MatMul(A, W) with W [K, N] dequantized once here, in float32 as ONNX Runtime's fp32 path computes it; W is
// then a weight like any other (stored f32, or in the --weights / --weights-rule type), written from its codes when
// that type holds them (lower/integer_weights.h); accuracy_level 4 asks for that type by default.
void register_matmul_nbits(Registry& r) {
    OpDef d;
    d.op_type = "MatMulNBits";
    d.domain = "com.microsoft";
    d.min_inputs = 3;
    d.infer = [](OpCtx& c) {
        int64_t K = c.ai("K", -1), N = c.ai("N", -1), bits = c.ai("bits", 4), bs = c.ai("block_size", -1);
        if (K <= 0 || N <= 0) c.fail("attributes K and N are required and positive");
        if (bits != 2 && bits != 4 && bits != 8)
            c.fail_unsupported("bits " + std::to_string(bits) + " (2, 4 and 8 are supported)");
        if (bs < 16 || (bs & (bs - 1))) c.fail("block_size " + std::to_string(bs) + " must be a power of two >= 16");
        if (c.rank(0) < 1 || c.shape(0).back() != K)
            c.fail("A of shape " + shape_str(c.shape(0)) + " does not end in K = " + std::to_string(K));
        int64_t nb = (K + bs - 1) / bs, blob = bs * bits / 8;
        if (c.dtype(1) != DType::U8 || shape_numel(c.shape(1)) != N * nb * blob)
            c.fail("B of " + std::string(dtype_name(c.dtype(1))) + shape_str(c.shape(1)) +
                   " is not uint8 [N, n_blocks, blob] = [" + std::to_string(N) + "," + std::to_string(nb) + "," +
                   std::to_string(blob) + "]");
        if (shape_numel(c.shape(2)) != N * nb)
            c.fail("scales of shape " + shape_str(c.shape(2)) +
                   " do not hold N * n_blocks = " + std::to_string(N * nb) + " values");
        bool zp = c.has(3), packed_zp = zp && c.dtype(3) == DType::U8;
        int64_t zrow = (nb * bits + 7) / 8;
        if (zp && shape_numel(c.shape(3)) != (packed_zp ? N * zrow : N * nb))
            c.fail("zero_points of shape " + shape_str(c.shape(3)) + " do not match N and n_blocks");
        if (c.has(4) && shape_numel(c.shape(4)) != K)
            c.fail("g_idx of shape " + shape_str(c.shape(4)) + " does not hold K values");
        if (c.has(5) && shape_numel(c.shape(5)) != N)
            c.fail("bias of shape " + shape_str(c.shape(5)) + " does not hold N values");
        for (int i = 1; i <= 4; ++i)
            if (c.has(i) && !c.is_const(i))
                c.fail_unsupported(
                    "input " + std::to_string(i) + " ('" + c.in(i).name +
                    "') is computed at run time: MatMulNBits takes constant weights, scales, zero points and g_idx");
        std::vector<int64_t> gidx = c.has(4) ? c.cints(4) : std::vector<int64_t>();
        for (int64_t k = 0; k < int64_t(gidx.size()); ++k)
            if (gidx[size_t(k)] < 0 || gidx[size_t(k)] >= nb)
                c.fail("g_idx[" + std::to_string(k) + "] = " + std::to_string(gidx[size_t(k)]) + " is outside [0, " +
                       std::to_string(nb) + ")");
        // element (k, n): its code, zero point (float zero points: not integers, zero reports 0) and scale
        struct Codes {
            Tensor B, S, Z;
            std::vector<int64_t> gidx;
            int64_t bits, bs, nb, blob, zrow;
            bool zp, packed_zp;
            int bits_at(const uint8_t* p, int64_t idx) const {
                int64_t pos = idx * bits;
                return int((p[pos / 8] >> (pos % 8)) & ((1 << bits) - 1));
            }
            float get(int64_t k, int64_t n, int32_t* code, int32_t* zero, float* scale) const {
                int64_t blk = gidx.empty() ? k / bs : gidx[size_t(k)];
                *code = bits_at(B.data() + (n * nb + k / bs) * blob, k % bs);
                float z = !zp         ? float(1 << (bits - 1))
                          : packed_zp ? float(bits_at(Z.data() + n * zrow, blk))
                                      : float(Z.getf(n * nb + blk));
                *zero = packed_zp || !zp ? int32_t(z) : 0;
                *scale = float(S.getf(n * nb + blk));
                return z;
            }
        };
        auto codes = std::make_shared<Codes>(
            Codes{c.cval(1), c.cval(2), zp ? c.cval(3) : Tensor(), gidx, bits, bs, nb, blob, zrow, zp, packed_zp});
        Tensor W = Tensor::zeros(DType::F32, {K, N});
        float* w = W.ptr<float>();
        for (int64_t n = 0; n < N; ++n)
            for (int64_t k = 0; k < K; ++k) {
                int32_t code, zero;
                float scale, z = codes->get(k, n, &code, &zero, &scale);
                w[k * N + n] = (float(code) - z) * scale;
            }
        // stored from its integers in a quantized type (lower/integer_weights.h); with accuracy_level 4 (ONNX
        // Runtime's leave to quantize A to int8, as ggml's quantized products do) in the type that holds them
        // when no --weights / --weights-rule decides: q4_0 (zero points 8), q4_1 (others), q8_0 (zero points 128)
        if (!zp || packed_zp) {
            auto src = std::make_shared<IntegerSource>();
            src->at = [codes, N](int64_t i, int32_t* code, int32_t* zero, float* scale) {
                codes->get(i / N, i % N, code, zero, scale);
            };
            bool centred = true;  // every zero point 2^(bits - 1)
            for (int64_t n = 0; zp && n < N; ++n)
                for (int64_t blk = 0; blk < nb; ++blk)
                    centred &= codes->bits_at(c.cval(3).data() + n * zrow, blk) == (1 << (bits - 1));
            if (c.ai("accuracy_level", 0) == 4)
                src->preferred = bits == 4              ? (centred ? GGML_TYPE_Q4_0 : GGML_TYPE_Q4_1)
                                 : bits == 8 && centred ? GGML_TYPE_Q8_0
                                                        : GGML_TYPE_COUNT;
            attach_integer_source(W, std::move(src));
        }
        int out = c.node().outputs[0];
        int wv = c.new_const(W, c.in(1).name + ".dequantized");
        if (!c.has(5)) return c.replace_with({c.make_node("MatMul", {c.node().inputs[0], wv}, {out})});
        int mm = c.graph().new_value(c.node().name + "_matmul");
        c.replace_with({c.make_node("MatMul", {c.node().inputs[0], wv}, {mm}),
                        c.make_node("Add", {mm, c.node().inputs[5]}, {out})});
    };
    r.add(d);
}

}  // namespace

O2G_OP_FAMILY(quant) {
    register_quantize(r);
    register_int_matmul(r);
    register_int_conv(r);
    register_matmul_nbits(r);
}

}  // namespace onnx2ggml::core
