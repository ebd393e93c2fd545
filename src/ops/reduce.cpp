// Reductions (ReduceSum/Mean/Max/Min/Prod/L1/L2/SumSquare/LogSum/LogSumExp) and
// ArgMax/ArgMin. On the device the reduced axes are moved innermost and reduced as rows.
#include <algorithm>
#include <cmath>

#include "ops/common.h"

namespace onnx2ggml::core {
namespace {

using Lc = LowerCtx;

struct RedPlan {
    std::vector<bool> red;
    Shape out;
    bool noop = false;
};

RedPlan red_plan(OpCtx& c) {
    const std::string& op = c.node().op_type;
    int rk = c.rank(0);
    bool axes_input = (op == "ReduceSum" && c.opset() >= 13) || c.opset() >= 18;
    std::vector<int64_t> axes;
    if (axes_input) {
        if (c.has(1)) axes = c.cints(1);
    } else axes = c.ais("axes");
    RedPlan p;
    p.red.assign(rk, false);
    if (axes.empty()) {
        if (axes_input && c.ai("noop_with_empty_axes", 0)) p.noop = true;
        else p.red.assign(rk, true);
    }
    for (int64_t a : axes) p.red[c.axis(a, rk)] = true;
    bool keep = c.ai("keepdims", 1) != 0;
    for (int i = 0; i < rk; ++i) {
        if (!p.red[i]) p.out.push_back(c.shape(0)[i]);
        else if (keep) p.out.push_back(1);
    }
    return p;
}

enum class R { Sum, Mean, Max, Min, Prod, L1, L2, SumSquare, LogSum, LogSumExp };

void reduce_op(Registry& reg, const std::string& name, R kind) {
    OpDef d;
    d.op_type = name;
    d.host_inputs = {1};
    d.infer = [](OpCtx& c) { c.set_out(0, c.dtype(0), red_plan(c).out); };
    d.eval = [kind](OpCtx& c) {
        RedPlan p = red_plan(c);
        const Tensor& x = c.cval(0);
        if (p.noop) {
            c.set_const(0, x.reshaped(p.out));
            return;
        }
        const Shape& s = c.shape(0);
        int rk = int(s.size());
        Shape kept;  // output index space with reduced dims = 1
        for (int i = 0; i < rk; ++i) kept.push_back(p.red[i] ? 1 : s[i]);
        int64_t no = shape_numel(kept), n = shape_numel(s);
        std::vector<double> acc(size_t(no), 0.0), mx(size_t(no), -INFINITY);
        std::vector<int64_t> cnt(size_t(no), 0);
        auto kst = strides_of(kept);
        bool is_int = !dtype_is_float(x.dtype);
        std::vector<int64_t> iacc(size_t(no), 0);
        for (int64_t e = 0; e < n; ++e) {
            int64_t rem = e, o = 0;
            for (int k = rk - 1; k >= 0; --k) {
                int64_t v = rem % s[k];
                rem /= s[k];
                if (!p.red[k]) o += v * kst[k];
            }
            double v = x.getf(e);
            double& a = acc[o];
            if (cnt[o] == 0) {
                a = (kind == R::Prod) ? 1 : ((kind == R::Max || kind == R::Min) ? v : 0);
                iacc[o] = (kind == R::Prod) ? 1 : ((kind == R::Max || kind == R::Min) ? x.geti(e) : 0);
            }
            cnt[o]++;
            switch (kind) {
                case R::Sum:
                case R::Mean:
                case R::LogSum:
                    a += v;
                    iacc[o] += x.geti(e);
                    break;
                case R::Max:
                    a = std::max(a, v);
                    iacc[o] = std::max(iacc[o], x.geti(e));
                    break;
                case R::Min:
                    a = std::min(a, v);
                    iacc[o] = std::min(iacc[o], x.geti(e));
                    break;
                case R::Prod:
                    a *= v;
                    iacc[o] *= x.geti(e);
                    break;
                case R::L1:
                    a += std::fabs(v);
                    iacc[o] += std::llabs(x.geti(e));
                    break;
                case R::L2:
                case R::SumSquare:
                    a += v * v;
                    iacc[o] += x.geti(e) * x.geti(e);
                    break;
                case R::LogSumExp: mx[o] = std::max(mx[o], v); break;
            }
        }
        if (kind == R::LogSumExp) {
            for (int64_t e = 0; e < n; ++e) {
                int64_t rem = e, o = 0;
                for (int k = rk - 1; k >= 0; --k) {
                    int64_t v = rem % s[k];
                    rem /= s[k];
                    if (!p.red[k]) o += v * kst[k];
                }
                acc[o] += std::exp(x.getf(e) - mx[o]);
            }
        }
        Tensor t = Tensor::zeros(x.dtype, p.out);
        for (int64_t o = 0; o < no; ++o) {
            double v = acc[o];
            if (cnt[o] == 0) v = (kind == R::Max) ? -INFINITY : (kind == R::Min ? INFINITY : (kind == R::Prod ? 1 : 0));
            if (kind == R::Mean) v = cnt[o] ? v / double(cnt[o]) : NAN;
            if (kind == R::L2) v = std::sqrt(v);
            if (kind == R::LogSum) v = std::log(v);
            if (kind == R::LogSumExp) v = cnt[o] ? std::log(v) + mx[o] : -INFINITY;
            if (is_int && kind != R::Mean && kind != R::L2 && kind != R::LogSum && kind != R::LogSumExp)
                t.seti(o, iacc[o]);
            else if (is_int && kind == R::Mean) t.seti(o, cnt[o] ? iacc[o] / cnt[o] : 0);
            else t.setf(o, v);
        }
        c.set_const(0, t);
    };
    d.lower = [kind](Lc& c) {
        RedPlan p = red_plan(c);
        if (c.dtype(0) != DType::F32) c.fail_unsupported("reductions of non-float tensors on the device");
        if (p.noop) {
            c.set(0, c.x(0));
            return;
        }
        const Shape& s = c.shape(0);
        int rk = int(s.size());
        std::vector<int64_t> perm;
        int64_t rows = 1, red = 1;
        for (int i = 0; i < rk; ++i)
            if (!p.red[i]) {
                perm.push_back(i);
                rows *= s[i];
            }
        for (int i = 0; i < rk; ++i)
            if (p.red[i]) {
                perm.push_back(i);
                red *= s[i];
            }
        ggml_tensor* x = c.x(0);
        bool ident = true;
        for (int i = 0; i < rk; ++i) ident &= perm[i] == i;
        if (!ident) x = transpose_any(c, x, s, perm);
        x = c.reshape(c.cont(x), {rows, red});
        ggml_tensor* y = nullptr;
        auto rowmax = [&](ggml_tensor* t) { return G(c.b, ggml_pool_1d, t, GGML_OP_POOL_MAX, int(red), int(red), 0); };
        switch (kind) {
            case R::Sum: y = G(c.b, ggml_sum_rows, x); break;
            case R::Mean: y = G(c.b, ggml_mean, x); break;
            case R::Max: y = rowmax(x); break;
            case R::Min: y = G(c.b, ggml_neg, rowmax(G(c.b, ggml_neg, x))); break;
            case R::L1: y = G(c.b, ggml_sum_rows, G(c.b, ggml_abs, x)); break;
            case R::L2: y = G(c.b, ggml_sqrt, G(c.b, ggml_sum_rows, G(c.b, ggml_sqr, x))); break;
            case R::SumSquare: y = G(c.b, ggml_sum_rows, G(c.b, ggml_sqr, x)); break;
            case R::LogSum: y = G(c.b, ggml_log, G(c.b, ggml_sum_rows, x)); break;
            case R::LogSumExp: {
                ggml_tensor* m = rowmax(x);
                y = G(c.b, ggml_add, G(c.b, ggml_log, G(c.b, ggml_sum_rows, G(c.b, ggml_exp, G(c.b, ggml_sub, x, m)))),
                      m);
                break;
            }
            case R::Prod: c.fail_unsupported("ReduceProd is only computed at compile time (no ggml kernel)");
        }
        c.set(0, c.reshape(y, p.out));
    };
    reg.add(d);
}

void arg_op(Registry& reg, bool is_max) {
    OpDef d;
    d.op_type = is_max ? "ArgMax" : "ArgMin";
    auto out_shape = [](OpCtx& c) {
        int rk = c.rank(0);
        int a = c.axis(c.ai("axis", 0), rk);
        Shape o = c.shape(0);
        if (c.ai("keepdims", 1)) o[a] = 1;
        else o.erase(o.begin() + a);
        // (an empty axis has no index to return, unless there is no output element to return one for)
        if (c.shape(0)[size_t(a)] == 0 && shape_numel(o) > 0)
            c.fail("axis " + std::to_string(a) + " of input " + shape_str(c.shape(0)) +
                   " is empty: no index to return");
        return o;
    };
    d.infer = [out_shape](OpCtx& c) { c.set_out(0, DType::I64, out_shape(c)); };
    d.eval = [out_shape, is_max](OpCtx& c) {
        const Shape& s = c.shape(0);
        int a = c.axis(c.ai("axis", 0), int(s.size()));
        bool last = c.ai("select_last_index", 0) != 0;
        int64_t outer = 1, inner = 1;
        for (int i = 0; i < a; ++i) outer *= s[i];
        for (size_t i = a + 1; i < s.size(); ++i) inner *= s[i];
        const Tensor& x = c.cval(0);
        Tensor t = Tensor::zeros(DType::I64, out_shape(c));
        for (int64_t o = 0; o < outer; ++o)
            for (int64_t i = 0; i < inner; ++i) {
                int64_t best = 0;
                double bv = x.getf(o * s[a] * inner + i);
                for (int64_t k = 1; k < s[a]; ++k) {
                    double v = x.getf((o * s[a] + k) * inner + i);
                    bool better = is_max ? (last ? v >= bv : v > bv) : (last ? v <= bv : v < bv);
                    if (better) {
                        bv = v;
                        best = k;
                    }
                }
                t.seti(o * inner + i, best);
            }
        c.set_const(0, t);
    };
    d.lower = [out_shape, is_max](Lc& c) {
        if (c.ai("select_last_index", 0)) c.fail_unsupported("ArgMax/ArgMin select_last_index=1 on the device");
        const Shape& s = c.shape(0);
        int rk = int(s.size());
        int a = c.axis(c.ai("axis", 0), rk);
        std::vector<int64_t> perm;
        for (int i = 0; i < rk; ++i)
            if (i != a) perm.push_back(i);
        perm.push_back(a);
        ggml_tensor* x = a == rk - 1 ? c.x(0) : transpose_any(c, c.x(0), s, perm);
        x = c.reshape(c.cont(x), {shape_numel(s) / s[a], s[a]});
        if (!is_max) x = G(c.b, ggml_neg, x);
        c.set(0, c.reshape(G(c.b, ggml_argmax, x), out_shape(c)));
    };
    reg.add(d);
}

}  // namespace

O2G_OP_FAMILY(reduce) {
    reduce_op(r, "ReduceSum", R::Sum);
    reduce_op(r, "ReduceMean", R::Mean);
    reduce_op(r, "ReduceMax", R::Max);
    reduce_op(r, "ReduceMin", R::Min);
    reduce_op(r, "ReduceProd", R::Prod);
    reduce_op(r, "ReduceL1", R::L1);
    reduce_op(r, "ReduceL2", R::L2);
    reduce_op(r, "ReduceSumSquare", R::SumSquare);
    reduce_op(r, "ReduceLogSum", R::LogSum);
    reduce_op(r, "ReduceLogSumExp", R::LogSumExp);
    arg_op(r, true);
    arg_op(r, false);
}

}  // namespace onnx2ggml::core
