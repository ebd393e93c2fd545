// Softmax, LogSoftmax, Hardmax, the fused o2g.SoftmaxExt, and the losses built on them
// (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss).
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
        for (int i = 0; i < rk; ++i)
            if (i != a) perm.push_back(i);
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
    if (c.has(2))
        for (int64_t k = 0; k < C; ++k) w[k] = c.cval(2).getf(k);
    bool has_ii = c.has_attr("ignore_index");
    int64_t ii = c.ai("ignore_index", 0);
    std::vector<int64_t> idx(t.size());
    Tensor coef = Tensor::zeros(DType::F32, c.shape(1));
    double wsum = 0;
    for (size_t e = 0; e < t.size(); ++e) {
        int64_t n = int64_t(e) / D, d = int64_t(e) % D, cls = t[e];
        if (has_ii && cls == ii) {
            idx[e] = 0;
            continue;
        }
        if (cls < 0 || cls >= C)
            c.fail("target " + std::to_string(cls) + " is out of range [0, " + std::to_string(C) + ")");
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
    if (shape_numel(s) != shape_numel(c.shape(0)) || s.empty() || s.size() > 4)
        internal_error(c.where() + ": bad fused softmax shape");
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

// Softmax, LogSoftmax, Hardmax: the output is the input's; the axis must be in [-rank, rank - 1] (exit 2)
void infer_softmax(OpCtx& c) {
    c.axis(c.ai("axis", c.opset() < 13 ? 1 : -1), c.rank(0));
    infer_same(c);
}

}  // namespace

O2G_OP_FAMILY(softmax) {
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
        d.infer = infer_softmax;
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
                    for (int64_t j = 0; j < n; ++j)
                        y.setf(at(j), logsm ? x.getf(at(j)) - mx - std::log(sum) : std::exp(x.getf(at(j)) - mx) / sum);
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
        d.infer = infer_softmax;
        d.eval = [](OpCtx& c) {  // 1 at the first maximum along the axis (opset < 13: of the 2-D coercion at the axis)
            const Tensor& x = c.cval(0);
            const Shape& s = c.shape(0);
            int a = c.axis(c.ai("axis", c.opset() < 13 ? 1 : -1), int(s.size()));
            int64_t n = 1, inner = 1;
            if (c.opset() < 13) {
                for (size_t i = size_t(a); i < s.size(); ++i) n *= s[i];
            } else {
                n = s[size_t(a)];
                for (size_t i = size_t(a) + 1; i < s.size(); ++i) inner *= s[i];
            }
            int64_t outer = n * inner > 0 ? x.numel() / (n * inner) : 0;
            Tensor y = Tensor::zeros(x.dtype, s);
            for (int64_t o = 0; o < outer; ++o)
                for (int64_t in = 0; in < inner; ++in) {
                    auto at = [&](int64_t j) { return (o * n + j) * inner + in; };
                    int64_t best = 0;
                    for (int64_t j = 1; j < n; ++j)
                        if (x.getf(at(j)) > x.getf(at(best))) best = j;
                    if (n > 0) y.setf(at(best), 1);
                }
            c.set_const(0, y);
        };
        d.lower = [](Lc& c) {
            require_float(c, 0);
            const Shape& s = c.shape(0);
            int rk = int(s.size());
            int a = c.axis(c.ai("axis", c.opset() < 13 ? 1 : -1), rk);
            if (c.opset() < 13) {  // coerced to 2-D at the axis
                int64_t p = 1, q = 1;
                for (int i = 0; i < rk; ++i) (i < a ? p : q) *= s[i];
                ggml_tensor* y = G(c.b, ggml_map_custom1, c.cont(c.reshape(c.x(0), {p, q})), o2g::hardmax_rows,
                                   GGML_N_TASKS_MAX, nullptr);
                c.set(0, c.reshape(y, s));
                return;
            }
            std::vector<int64_t> perm;
            for (int i = 0; i < rk; ++i)
                if (i != a) perm.push_back(i);
            perm.push_back(a);
            Shape ps;
            for (auto v : perm) ps.push_back(s[v]);
            ggml_tensor* y = G(c.b, ggml_map_custom1, c.cont(transpose_any(c, c.x(0), s, perm)), o2g::hardmax_rows,
                               GGML_N_TASKS_MAX, nullptr);
            std::vector<int64_t> inv = inverse_perm(perm);
            c.set(0, transpose_any(c, y, ps, inv));
        };
        r.add(d);
    }
    for (bool sce : {false, true}) {
        OpDef d;
        d.op_type = sce ? "SoftmaxCrossEntropyLoss" : "NegativeLogLikelihoodLoss";
        d.min_inputs = 2;
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
        d.eval = [sce](OpCtx& c) {
            const Tensor& x = c.cval(0);
            const Shape& s = c.shape(0);
            int64_t N = s[0], C = s[1], D = N * C > 0 ? x.numel() / (N * C) : 0;
            Tensor logp = x;
            if (sce) {  // log-softmax over the classes
                logp = Tensor::zeros(x.dtype, s);
                for (int64_t n = 0; n < N; ++n)
                    for (int64_t d = 0; d < D; ++d) {
                        auto at = [&](int64_t k) { return (n * C + k) * D + d; };
                        double mx = -INFINITY, sum = 0;
                        for (int64_t k = 0; k < C; ++k) mx = std::max(mx, x.getf(at(k)));
                        for (int64_t k = 0; k < C; ++k) sum += std::exp(x.getf(at(k)) - mx);
                        for (int64_t k = 0; k < C; ++k) logp.setf(at(k), x.getf(at(k)) - mx - std::log(sum));
                    }
            }
            std::vector<int64_t> t = c.cints(1);
            bool has_ii = c.has_attr("ignore_index");
            int64_t ii = c.ai("ignore_index", 0);
            Tensor l = Tensor::zeros(x.dtype, c.shape(1));
            double sum = 0, wsum = 0;
            for (size_t e = 0; e < t.size(); ++e) {
                int64_t n = int64_t(e) / D, d = int64_t(e) % D, cls = t[e];
                if (has_ii && cls == ii) continue;
                if (cls < 0 || cls >= C)
                    c.fail("target " + std::to_string(cls) + " is out of range [0, " + std::to_string(C) + ")");
                double w = c.has(2) ? c.cval(2).getf(cls) : 1.0;
                double v = -w * logp.getf((n * C + cls) * D + d);
                l.setf(int64_t(e), v);
                sum += v;
                wsum += w;
            }
            std::string red = c.as("reduction", "mean");
            Tensor r = l;
            if (red != "none") {
                r = Tensor::zeros(x.dtype, {});
                r.setf(0, red == "sum" ? sum : sum / wsum);
            }
            c.set_const(0, r);
            if (sce && c.has_out(1)) c.set_const(1, logp);
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
}

}  // namespace onnx2ggml::core
