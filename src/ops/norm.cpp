// Normalizations: BatchNormalization, InstanceNormalization, LayerNormalization,
// GroupNormalization (and the fused o2g.GroupNorm / o2g.Norm), MeanVarianceNormalization, LRN.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>

#include "o2g_kernels.h"
#include "ops/common.h"

namespace onnx2ggml::core {
namespace {

// (x - mean) / sqrt(var + eps) of each of `rows` contiguous rows of n values, in double; the rows'
// means and 1 / sqrt(var + eps) into mean and inv when given.
std::vector<double> normalize_rows(const Tensor& x, int64_t rows, int64_t n, double eps,
                                   std::vector<double>* mean = nullptr, std::vector<double>* invstd = nullptr) {
    std::vector<double> y(size_t(rows * n));
    if (mean) mean->resize(size_t(rows));
    if (invstd) invstd->resize(size_t(rows));
    for (int64_t r = 0; r < rows; ++r) {
        double m = 0, v = 0;
        for (int64_t j = 0; j < n; ++j) m += x.getf(r * n + j);
        m /= double(n);
        for (int64_t j = 0; j < n; ++j) v += (x.getf(r * n + j) - m) * (x.getf(r * n + j) - m);
        double inv = 1 / std::sqrt(v / double(n) + eps);
        for (int64_t j = 0; j < n; ++j) y[size_t(r * n + j)] = (x.getf(r * n + j) - m) * inv;
        if (mean) (*mean)[size_t(r)] = m;
        if (invstd) (*invstd)[size_t(r)] = inv;
    }
    return y;
}

using Lc = LowerCtx;

// ggml_group_norm on x [N, C, ...] viewed as ggml [S, 1, C, N] (it normalizes groups of ne[2]
// over ne[0] x ne[1]), then the per-channel affine y * gamma + beta (either may be null), in place
// on the normalized tensor (its own, fresh): the oneDNN backend runs the chain, and a SiLU in place
// after it (o2g.Silu), as one pass.
void lower_group_norm(Lc& c, ggml_tensor* gamma, ggml_tensor* beta) {
    const Shape& s = c.shape(0);
    int64_t N = s[0], C = s[1], S = shape_numel(s) / std::max<int64_t>(1, N * C);
    ggml_tensor* gn =
        G(c.b, ggml_group_norm, c.reshape(c.x(0), {N, C, 1, S}), int(c.ai("num_groups", 1)), c.af("epsilon", 1e-5f));
    bool in_place = !c.graph_output(0);  // a graph output owns its memory
    ggml_tensor* y = gn;
    if (gamma) y = in_place ? G(c.b, ggml_mul_inplace, y, gamma) : G(c.b, ggml_mul, y, gamma);
    if (beta) y = in_place ? G(c.b, ggml_add_inplace, y, beta) : G(c.b, ggml_add, y, beta);
    c.set(0, c.reshape(y, s));
    if (in_place) c.overwrote(gn);
}

}  // namespace

O2G_OP_FAMILY(norm) {
    {
        OpDef d;
        d.op_type = "BatchNormalization";
        d.min_inputs = 5;
        d.host_inputs = {1, 2, 3, 4};
        d.infer = [](OpCtx& c) {
            bool training = c.ai("training_mode", 0) != 0;
            for (int i = 1; i < c.nout(); ++i)
                if (c.has_out(i)) {
                    if (!training || c.opset() < 14)
                        c.fail_unsupported("BatchNormalization outputs of opset < 14 training (saved mean/var)");
                    c.set_out(i, c.dtype(3), c.shape(3));
                }
            infer_same(c);
        };
        // training mode (opset >= 14): normalized with the batch's statistics (population variance),
        // running statistics updated with `momentum`; evaluation mode with the given ones
        d.eval = [](OpCtx& c) {
            const Shape& xs = c.shape(0);
            int64_t C = xs.size() > 1 ? xs[1] : 1, N = xs.empty() ? 1 : xs[0],
                    sp = shape_numel(xs) / std::max<int64_t>(1, N * C);
            const Tensor &x = c.cval(0), &sc = c.cval(1), &bi = c.cval(2), &mu = c.cval(3), &var = c.cval(4);
            if (sc.numel() != C || bi.numel() != C || mu.numel() != C || var.numel() != C)
                c.fail_unsupported("BatchNormalization with non per-channel parameters (legacy spatial=0)");
            bool training = c.ai("training_mode", 0) != 0;
            double eps = c.af("epsilon", 1e-5f), mom = c.af("momentum", 0.9f);
            Tensor y = Tensor::zeros(x.dtype, xs), rm = Tensor::zeros(mu.dtype, mu.shape),
                   rv = Tensor::zeros(var.dtype, var.shape);
            for (int64_t ch = 0; ch < C; ++ch) {
                double m = mu.getf(ch), v = var.getf(ch);
                if (training) {
                    double s1 = 0, s2 = 0;
                    for (int64_t n = 0; n < N; ++n)
                        for (int64_t i = 0; i < sp; ++i) s1 += x.getf((n * C + ch) * sp + i);
                    double bm = s1 / double(N * sp);
                    for (int64_t n = 0; n < N; ++n)
                        for (int64_t i = 0; i < sp; ++i)
                            s2 += (x.getf((n * C + ch) * sp + i) - bm) * (x.getf((n * C + ch) * sp + i) - bm);
                    double bv = s2 / double(N * sp);
                    rm.setf(ch, m * mom + bm * (1 - mom));
                    rv.setf(ch, v * mom + bv * (1 - mom));
                    m = bm, v = bv;
                }
                double k = sc.getf(ch) / std::sqrt(v + eps);
                for (int64_t n = 0; n < N; ++n)
                    for (int64_t i = 0; i < sp; ++i)
                        y.setf((n * C + ch) * sp + i, (x.getf((n * C + ch) * sp + i) - m) * k + bi.getf(ch));
            }
            c.set_const(0, y);
            if (c.has_out(1)) c.set_const(1, rm);
            if (c.has_out(2)) c.set_const(2, rv);
        };
        d.fold_limit = 1 << 16;
        d.lower = [](Lc& c) {
            if (c.ai("training_mode", 0) != 0 || c.has_out(1) || c.has_out(2))
                c.fail_unsupported("BatchNormalization in training mode has no ggml lowering");
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
            ggml_tensor* x = c.x(0);
            if (c.rank(0) == 4 && c.dtype(0) == DType::F32 && C > 1 && ggml_is_contiguous(x) && !c.graph_output(0)) {
                // a channel product (see channel_product in elementwise.cpp) with the shift in place on it: the
                // oneDNN backend reads and writes them (and a ReLU after them) in one pass, in the layouts its
                // convolutions keep (a BatchNormalization after a convolution is folded into it before this)
                ggml_tensor* y = G(c.b, ggml_mul, x, c.constant(Tensor::from_f32(s, {1, C, 1, 1})));
                c.reads_private(0, y);
                c.set(0, G(c.b, ggml_add_inplace, y, c.constant(Tensor::from_f32(b, {1, C, 1, 1}))));
                c.overwrote(y);
                return;
            }
            ggml_tensor* y = c.binary(LowerCtx::Bin::Mul, x, c.shape(0), c.constant(Tensor::from_f32(s, ps)), ps);
            y = c.binary(LowerCtx::Bin::Add, y, c.shape(0), c.constant(Tensor::from_f32(b, ps)), ps);
            c.set(0, y);
        };
        r.add(d);
    }
    {
        OpDef d;
        d.op_type = "InstanceNormalization";
        d.min_inputs = 3;
        d.infer = [](OpCtx& c) {
            if (c.rank(0) < 2) c.fail("input must have rank >= 2 (N, C, ...), got " + shape_str(c.shape(0)));
            infer_same(c);
        };
        d.eval = [](OpCtx& c) {  // per (n, c) over the spatial positions, then the channel's scale and bias
            const Tensor &x = c.cval(0), &sc = c.cval(1), &bi = c.cval(2);
            const Shape& s = c.shape(0);
            int64_t C = s[1], rows = s[0] * C, sp = rows > 0 ? x.numel() / rows : 0;
            if (sc.numel() != C || bi.numel() != C)
                c.fail("scale and B must have one value per channel (" + std::to_string(C) + ")");
            std::vector<double> y = normalize_rows(x, rows, sp, c.af("epsilon", 1e-5f));
            Tensor t = Tensor::zeros(x.dtype, s);
            for (int64_t r = 0; r < rows; ++r)
                for (int64_t i = 0; i < sp; ++i)
                    t.setf(r * sp + i, y[size_t(r * sp + i)] * sc.getf(r % C) + bi.getf(r % C));
            c.set_const(0, t);
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
        d.min_inputs = 2;
        d.infer = [](OpCtx& c) {
            infer_same(c);
            int rk = c.rank(0);
            int a = c.axis(c.ai("axis", -1), rk);
            Shape red(c.shape(0).begin(), c.shape(0).begin() + a);
            for (int i = a; i < rk; ++i) red.push_back(1);
            if (c.has_out(1)) c.set_out(1, DType::F32, red);
            if (c.has_out(2)) c.set_out(2, DType::F32, red);
        };
        d.eval = [](OpCtx& c) {  // rows of the dims before `axis`; scale and B broadcast to the dims from it
            const Tensor& x = c.cval(0);
            const Shape& s = c.shape(0);
            int a = c.axis(c.ai("axis", -1), int(s.size()));
            Shape qs(s.begin() + a, s.end());
            int64_t q = shape_numel(qs), p = q > 0 ? x.numel() / q : 0;
            auto param = [&](int i) {
                Shape o;
                if (c.rank(i) > int(qs.size()) || !broadcast_shapes(qs, c.shape(i), o) || o != qs)
                    c.fail("input " + std::to_string(i) + " of shape " + shape_str(c.shape(i)) +
                           " does not broadcast to " + shape_str(qs));
                return broadcast_host(c.cval(i), qs);
            };
            Tensor sc = param(1), bi = c.has(2) ? param(2) : Tensor();
            std::vector<double> m, inv, y = normalize_rows(x, p, q, c.af("epsilon", 1e-5f), &m, &inv);
            Tensor t = Tensor::zeros(x.dtype, s);
            for (int64_t r = 0; r < p; ++r)
                for (int64_t j = 0; j < q; ++j)
                    t.setf(r * q + j, y[size_t(r * q + j)] * sc.getf(j) + (c.has(2) ? bi.getf(j) : 0.0));
            auto stat = [&](int i, const std::vector<double>& v) {
                Tensor r = Tensor::zeros(c.out(i).dtype, c.out(i).shape);
                for (size_t k = 0; k < v.size(); ++k) r.setf(int64_t(k), v[k]);
                c.set_const(i, r);
            };
            c.set_const(0, t);
            if (c.has_out(1)) stat(1, m);
            if (c.has_out(2)) stat(2, inv);
        };
        d.lower = [](Lc& c) {
            const Shape& s = c.shape(0);
            int rk = int(s.size());
            int a = c.axis(c.ai("axis", -1), rk);
            int64_t p = 1, q = 1;
            for (int i = 0; i < rk; ++i) (i < a ? p : q) *= s[i];
            ggml_tensor* y = G(c.b, ggml_norm, c.cont(c.reshape(c.x(0), {p, q})), c.af("epsilon", 1e-5f));
            Shape qs(s.begin() + a, s.end());
            y = c.binary(LowerCtx::Bin::Mul, y, {p, q}, c.reshape(c.x(1), {shape_numel(c.shape(1))}),
                         align_rank({shape_numel(c.shape(1))}, 1));
            if (c.has(2))
                y = c.binary(LowerCtx::Bin::Add, y, {p, q}, c.reshape(c.x(2), {shape_numel(c.shape(2))}),
                             {shape_numel(c.shape(2))});
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
    // Internal ops of the normalization fusions (src/passes/fuse_norm.cpp).
    {
        OpDef d;  // GroupNormalization(x [N, C, ...], scale, bias; num_groups, epsilon): per group before opset 21, per
                  // channel from 21
        d.op_type = "GroupNormalization";
        d.min_inputs = 3;
        d.host_inputs = {1, 2};
        auto per_channel = [](OpCtx& c, int i) {  // scale/bias as per-channel values
            const Shape& s = c.shape(0);
            int64_t C = s.size() > 1 ? s[1] : 0, G = c.ai("num_groups", 0);
            if (G <= 0 || C % G != 0)
                c.fail("num_groups " + std::to_string(G) + " does not divide the " + std::to_string(C) + " channels");
            std::vector<float> v = c.cval(i).to_f32(), r(static_cast<size_t>(C), 0.f);
            if (int64_t(v.size()) == C && (c.opset() >= 21 || C == G)) return v;
            if (int64_t(v.size()) != G)
                c.fail("scale/bias of " + std::to_string(v.size()) + " values for " + std::to_string(G) + " groups");
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
            int64_t N = s[0], C = s[1], G = c.ai("num_groups", 0), sp = x.numel() / std::max<int64_t>(1, N * C),
                    gsz = C / G * sp;
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
            lower_group_norm(c, c.constant(Tensor::from_f32(per_channel(c, 1), {C, 1, 1})),
                             c.constant(Tensor::from_f32(per_channel(c, 2), {C, 1, 1})));
        };
        r.add(d);
    }
    {
        OpDef d;  // o2g.GroupNorm(x [N, C, ...], gamma?, beta?; num_groups, epsilon)
        d.op_type = "o2g.GroupNorm";
        d.infer = infer_same;
        d.lower = [](Lc& c) {
            int64_t C = c.shape(0)[1];
            lower_group_norm(c, c.has(1) ? c.reshape(c.x(1), {C, 1, 1}) : nullptr,
                             c.has(2) ? c.reshape(c.x(2), {C, 1, 1}) : nullptr);
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
    {
        OpDef d;
        d.op_type = "MeanVarianceNormalization";
        d.infer = [](OpCtx& c) {
            for (auto a : c.ais("axes", {0, 2, 3})) c.axis(a, c.rank(0));  // each in [-r, r)
            infer_same(c);
        };
        d.eval = [](OpCtx& c) {  // the spec's function: (x - mean) / (sqrt(var) + 1e-9) over `axes`
            const Tensor& x = c.cval(0);
            const Shape& s = c.shape(0);
            int rk = int(s.size());
            std::vector<bool> red(size_t(rk), false);
            for (auto a : c.ais("axes", {0, 2, 3})) red[size_t(c.axis(a, rk))] = true;
            Shape ks = s;  // the shape of the statistics (reduced dims kept as 1)
            for (int i = 0; i < rk; ++i)
                if (red[size_t(i)]) ks[size_t(i)] = 1;
            auto so = strides_of(s), sk = strides_of(ks);
            auto key = [&](int64_t e) {
                int64_t k = 0;
                for (int i = 0; i < rk; ++i)
                    if (!red[size_t(i)]) k += (e / so[size_t(i)] % s[size_t(i)]) * sk[size_t(i)];
                return k;
            };
            int64_t nk = shape_numel(ks), n = nk > 0 ? x.numel() / nk : 0;
            std::vector<double> m(size_t(nk), 0.0), v(size_t(nk), 0.0);
            for (int64_t e = 0; e < x.numel(); ++e) m[size_t(key(e))] += x.getf(e);
            for (auto& a : m) a /= double(n);
            for (int64_t e = 0; e < x.numel(); ++e)
                v[size_t(key(e))] += (x.getf(e) - m[size_t(key(e))]) * (x.getf(e) - m[size_t(key(e))]);
            Tensor t = Tensor::zeros(x.dtype, s);
            for (int64_t e = 0; e < x.numel(); ++e) {
                size_t k = size_t(key(e));
                t.setf(e, (x.getf(e) - m[k]) / (std::sqrt(v[k] / double(n)) + 1e-9));
            }
            c.set_const(0, t);
        };
        d.lower = [](Lc& c) {  // (x - mean) / sqrt(var) over `axes`, with ggml_norm's epsilon 1e-9
            require_float(c, 0);
            const Shape& s = c.shape(0);
            int rk = int(s.size());
            std::vector<bool> red(rk, false);
            for (auto a : c.ais("axes", {0, 2, 3})) red[c.axis(a, rk)] = true;
            std::vector<int64_t> perm;
            int64_t rows = 1, n = 1;
            for (int i = 0; i < rk; ++i)
                if (!red[i]) {
                    perm.push_back(i);
                    rows *= s[i];
                }
            for (int i = 0; i < rk; ++i)
                if (red[i]) {
                    perm.push_back(i);
                    n *= s[i];
                }
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
        d.eval = [](OpCtx& c) {  // x / (bias + alpha / size * sum of x^2 over channels [c - floor, c + ceil of
                                 // (size-1)/2])^beta
            const Tensor& x = c.cval(0);
            const Shape& s = c.shape(0);
            if (s.size() < 2) c.fail("input must have rank >= 2 (N, C, ...), got " + shape_str(s));
            int64_t size = c.ai("size", 0), N = s[0], C = s[1], sp = N * C > 0 ? x.numel() / (N * C) : 0;
            if (size <= 0) c.fail("size must be positive");
            double alpha = c.af("alpha", 1e-4f), beta = c.af("beta", 0.75f), bias = c.af("bias", 1.0f);
            int64_t lo = (size - 1) / 2, hi = size - 1 - lo;
            Tensor t = Tensor::zeros(x.dtype, s);
            for (int64_t n = 0; n < N; ++n)
                for (int64_t ch = 0; ch < C; ++ch)
                    for (int64_t i = 0; i < sp; ++i) {
                        double sq = 0;
                        for (int64_t k = std::max<int64_t>(0, ch - lo); k <= std::min(C - 1, ch + hi); ++k) {
                            double v = x.getf((n * C + k) * sp + i);
                            sq += v * v;
                        }
                        int64_t e = (n * C + ch) * sp + i;
                        t.setf(e, x.getf(e) / std::pow(bias + alpha / double(size) * sq, beta));
                    }
            c.set_const(0, t);
        };
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
}

}  // namespace onnx2ggml::core
