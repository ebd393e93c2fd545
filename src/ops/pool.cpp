// Pooling: MaxPool, AveragePool, LpPool and their Global forms.
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

// ---- pooling ------------------------------------------------------------------------------

// ggml pool_2d pads both sides by p and ignores out-of-bounds taps; pick p >= pb with
// (p - pb) % s == 0 and crop the leading outputs that belong to the extra padding.
void pool_pad(int64_t in, int64_t k, int64_t s, int64_t pb, int64_t out, int& p, int64_t& skip) {
    int64_t m = 0;
    for (;; ++m) {
        int64_t P = pb + m * s;
        int64_t have = (in + 2 * P - k) / s + 1;
        if (have >= m + out) {
            p = int(P);
            skip = m;
            return;
        }
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
    auto sp = [&](const std::vector<int64_t>& v, int i, int64_t def) {
        return g.nsp == 1 ? (i == 0 ? v[0] : def) : v[1 - i];
    };
    int64_t in0 = sp(g.in, 0, 1), in1 = sp(g.in, 1, 1), k0 = sp(g.k, 0, 1), k1 = sp(g.k, 1, 1), s0 = sp(g.s, 0, 1),
            s1 = sp(g.s, 1, 1);
    int64_t pb0 = sp(g.pb, 0, 0), pb1 = sp(g.pb, 1, 0), pe0 = sp(g.pe, 0, 0), pe1 = sp(g.pe, 1, 0);
    int64_t o0 = sp(g.out, 0, 1), o1 = sp(g.out, 1, 1);
    Shape x4 = xs.size() == 3 ? Shape{xs[0], xs[1], 1, xs[2]} : xs;
    ggml_tensor* x = c.cont(c.reshape(c.x(0), x4));
    auto op = is_max ? GGML_OP_POOL_MAX : GGML_OP_POOL_AVG;
    // every window overlaps the input: one pooling of the output's size (o2g::pool_2d_out: any right
    // padding); else a pooling with more padding on both sides, cropped
    auto overlaps = [](int64_t in, int64_t k, int64_t s, int64_t pb, int64_t o) {
        return pb >= 0 && pb < k && (o - 1) * s - pb < in;
    };
    ggml_tensor *pool, *y;
    if (overlaps(in0, k0, s0, pb0, o0) && overlaps(in1, k1, s1, pb1, o1)) {
        pool = y = G(c.b, o2g::pool_2d_out, x, op, int(k0), int(k1), int(s0), int(s1), int(pb0), int(pb1), o0, o1);
    } else {
        int p0, p1;
        int64_t skip0, skip1;
        pool_pad(in0, k0, s0, pb0, o0, p0, skip0);
        pool_pad(in1, k1, s1, pb1, o1, p1, skip1);
        pool = G(c.b, ggml_pool_2d, x, op, int(k0), int(k1), int(s0), int(s1), float(p0), float(p1));
        y = c.slice(c.slice(pool, 0, skip0, o0), 1, skip1, o1);
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
        auto factors = [&](int64_t o, int64_t in, int64_t k, int64_t s, int64_t pb, int64_t pe,
                           const Shape& shape) -> ggml_tensor* {
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
    // a pooling whose output is ggml's whole result (a valid padding, see o2g::pool_right_pad; an average
    // over all k0*k1 taps: no correction above) may read and write a backend's private layout between
    // convolutions (o2g::conv_chain)
    int64_t pr;
    if (xs.size() == 4 && y == pool && o2g::pool_right_pad(pool, 0, pr) && o2g::pool_right_pad(pool, 1, pr)) {
        if (x == c.x(0)) c.reads_private(0, pool);
        c.overwrote(pool);
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

// The global pools: one value per (batch, channel) over all spatial positions.
enum class Global { Average, Max, Lp };
void eval_global_pool(OpCtx& c, Global kind) {
    const Tensor& x = c.cval(0);
    int64_t nc = c.shape(0)[0] * c.shape(0)[1], sp = nc > 0 ? x.numel() / nc : 0;
    double p = double(c.ai("p", 2));
    Tensor y = Tensor::zeros(x.dtype, c.out(0).shape);
    for (int64_t i = 0; i < nc; ++i) {
        double acc = kind == Global::Max ? -INFINITY : 0;
        for (int64_t k = 0; k < sp; ++k) {
            double v = x.getf(i * sp + k);
            if (kind == Global::Max) acc = std::isnan(v) || std::isnan(acc) ? NAN : std::max(acc, v);
            else acc += kind == Global::Lp ? std::pow(std::fabs(v), p) : v;
        }
        y.setf(i, kind == Global::Average ? acc / double(sp) : kind == Global::Lp ? std::pow(acc, 1.0 / p) : acc);
    }
    c.set_const(0, y);
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
                    if (best < 0 || v > acc) {
                        acc = v;
                        best = col_major ? fc : f;
                    }
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

}  // namespace

O2G_OP_FAMILY(pool) {
    for (bool mx : {true, false}) {
        OpDef d;
        d.op_type = mx ? "MaxPool" : "AveragePool";
        d.infer = infer_pool;
        d.eval = [mx](OpCtx& c) { eval_pool(c, mx); };
        d.work = [](OpCtx& c) {
            return double(shape_numel(c.out(0).shape)) * double(shape_numel(c.ais("kernel_shape")));
        };
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
        d.work = [](OpCtx& c) {
            return double(shape_numel(c.out(0).shape)) * double(shape_numel(c.ais("kernel_shape")));
        };
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
        d.eval = [](OpCtx& c) { eval_global_pool(c, Global::Lp); };
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
        d.eval = [mx](OpCtx& c) { eval_global_pool(c, mx ? Global::Max : Global::Average); };
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

}  // namespace onnx2ggml::core
