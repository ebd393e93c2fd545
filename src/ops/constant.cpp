// Shape queries and generated values: Shape, Size, Constant, ConstantOfShape, Range, EyeLike,
// Trilu.
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

Tensor trilu_mask(OpCtx& c) {
    const Shape& s = c.shape(0);
    int64_t n = s[s.size() - 2], m = s.back(), k = c.has(1) ? c.cval(1).geti(0) : 0;
    bool upper = c.ai("upper", 1) != 0;
    Tensor t = Tensor::zeros(DType::F32, {n, m});
    for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < m; ++j) t.ptr<float>()[i * m + j] = float(upper ? (j - i >= k) : (j - i <= k));
    return t;
}

}  // namespace

O2G_OP_FAMILY(constant) {
    {
        OpDef d;
        d.op_type = "Shape";
        d.shape_only = true;
        auto range = [](OpCtx& c, int64_t& b, int64_t& e) {
            int64_t rk = c.rank(0);
            b = c.ai("start", 0);
            e = c.has_attr("end") ? c.ai("end", rk) : rk;
            if (b < 0) b += rk;
            if (e < 0) e += rk;
            b = std::clamp<int64_t>(b, 0, rk);
            e = std::clamp<int64_t>(e, 0, rk);
        };
        d.infer = [range](OpCtx& c) {
            int64_t b, e;
            range(c, b, e);
            c.set_out(0, DType::I64, {std::max<int64_t>(0, e - b)});
        };
        d.eval = [range](OpCtx& c) {
            int64_t b, e;
            range(c, b, e);
            std::vector<int64_t> v;
            for (int64_t i = b; i < e; ++i) v.push_back(c.shape(0)[i]);
            c.set_const(0, Tensor::from_i64(v, {int64_t(v.size())}));
        };
        r.add(d);
    }
    {
        OpDef d;
        d.op_type = "Size";
        d.shape_only = true;
        d.infer = [](OpCtx& c) { c.set_out(0, DType::I64, {}); };
        d.eval = [](OpCtx& c) { c.set_const(0, Tensor::scalar_i64(shape_numel(c.shape(0)))); };
        r.add(d);
    }
    {
        OpDef d;
        d.op_type = "Constant";
        d.shape_only = true;
        auto value = [](OpCtx& c) -> Tensor {
            if (const Tensor* t = c.at("value")) return *t;
            if (c.has_attr("value_float")) return Tensor::from_f32({c.af("value_float", 0)}, {});
            if (c.has_attr("value_floats")) {
                auto v = c.afs("value_floats");
                return Tensor::from_f32(v, {int64_t(v.size())});
            }
            if (c.has_attr("value_int")) return Tensor::scalar_i64(c.ai("value_int", 0));
            if (c.has_attr("value_ints")) {
                auto v = c.ais("value_ints");
                return Tensor::from_i64(v, {int64_t(v.size())});
            }
            if (c.has_attr("sparse_value")) c.fail_unsupported("sparse Constant values are not supported");
            if (c.has_attr("value_string")) return Tensor::from_strings({c.as("value_string", "")}, {});
            if (c.has_attr("value_strings")) {
                auto v = c.astrs("value_strings");
                int64_t n = int64_t(v.size());
                return Tensor::from_strings(std::move(v), {n});
            }
            c.fail("Constant has no value attribute");
        };
        d.infer = [value](OpCtx& c) {
            Tensor t = value(c);
            c.set_out(0, t.dtype, t.shape);
        };
        d.eval = [value](OpCtx& c) { c.set_const(0, value(c)); };
        r.add(d);
    }
    {
        OpDef d;
        d.op_type = "ConstantOfShape";
        d.host_inputs = {0};
        auto fill = [](OpCtx& c) -> Tensor {
            const Tensor* t = c.at("value");
            return t ? *t : Tensor::from_f32({0.0f}, {1});
        };
        d.infer = [fill](OpCtx& c) { c.set_out(0, fill(c).dtype, c.cints(0)); };
        d.eval = [fill](OpCtx& c) {
            Tensor v = fill(c);
            if (v.numel() != 1) c.fail("value must hold one element");
            Tensor t = Tensor::zeros(v.dtype, c.cints(0));
            size_t es = dtype_size(v.dtype);
            for (int64_t i = 0; i < t.numel(); ++i) std::memcpy(t.data() + i * es, v.data(), es);
            c.set_const(0, t);
        };
        d.lower = [fill](Lc& c) {  // large fills: one scalar weight repeated on the device
            Tensor v = fill(c);
            if (!dtype_is_float(v.dtype)) c.fail_unsupported("ConstantOfShape of a non-float type on the device");
            auto ne = to_ne(c.out(0).shape);
            c.set(0, G(c.b, ggml_repeat_4d, c.scalar(float(v.getf(0))), ne[0], ne[1], ne[2], ne[3]));
        };
        r.add(d);
    }
    {
        OpDef d;
        d.op_type = "Range";
        d.min_inputs = 3;
        d.host_inputs = {0, 1, 2};
        auto count = [](OpCtx& c) {
            double s = c.cval(0).getf(0), l = c.cval(1).getf(0), dl = c.cval(2).getf(0);
            if (dl == 0) c.fail("Range delta is 0");
            return std::max<int64_t>(0, int64_t(std::ceil((l - s) / dl)));
        };
        d.infer = [count](OpCtx& c) { c.set_out(0, c.dtype(0), {count(c)}); };
        d.eval = [count](OpCtx& c) {
            int64_t n = count(c);
            Tensor t = Tensor::zeros(c.dtype(0), {n});
            bool flt = dtype_is_float(c.dtype(0));
            for (int64_t i = 0; i < n; ++i) {
                if (flt) t.setf(i, c.cval(0).getf(0) + double(i) * c.cval(2).getf(0));
                else t.seti(i, c.cval(0).geti(0) + i * c.cval(2).geti(0));
            }
            c.set_const(0, t);
        };
        r.add(d);
    }
    {
        OpDef d;
        d.op_type = "EyeLike";
        d.shape_only = true;
        auto dt = [](OpCtx& c) { return c.has_attr("dtype") ? DType(c.ai("dtype", 1)) : c.dtype(0); };
        d.infer = [dt](OpCtx& c) {
            if (c.rank(0) != 2) c.fail("EyeLike input must be 2-D");
            if (!dtype_known(int(dt(c)))) c.fail_unsupported("EyeLike dtype");
            c.set_out(0, dt(c), c.shape(0));
        };
        d.eval = [dt](OpCtx& c) {
            Tensor t = Tensor::zeros(dt(c), c.shape(0));
            int64_t n = c.shape(0)[0], m = c.shape(0)[1], k = c.ai("k", 0);
            for (int64_t i = 0; i < n; ++i)
                if (i + k >= 0 && i + k < m) t.seti(i * m + i + k, 1);
            c.set_const(0, t);
        };
        r.add(d);
    }
    {
        OpDef d;
        d.op_type = "Trilu";
        d.host_inputs = {1};
        d.infer = [](OpCtx& c) {
            if (c.rank(0) < 2) c.fail("Trilu input must have rank >= 2");
            infer_same(c);
        };
        d.eval = [](OpCtx& c) {
            Tensor m = trilu_mask(c);
            const Tensor& x = c.cval(0);
            Tensor t = Tensor::zeros(x.dtype, x.shape);
            size_t es = dtype_size(x.dtype);
            int64_t mn = m.numel();
            for (int64_t e = 0; e < x.numel(); ++e)
                if (m.ptr<float>()[e % mn] != 0) std::memcpy(t.data() + e * es, x.data() + e * es, es);
            c.set_const(0, t);
        };
        d.lower = [](Lc& c) {  // where(mask, x, 0): exact even for inf/nan
            require_float(c, 0);
            if (c.rank(0) > 4) c.fail_unsupported("Trilu of a rank > 4 tensor");
            auto ne = to_ne(c.shape(0));
            ggml_tensor* x = c.cont(c.x(0));
            ggml_tensor* mask = c.cont(c.repeat_to(c.constant(trilu_mask(c)), ne));
            ggml_tensor* zero = c.cont(c.repeat_to(c.scalar(0.0f), ne));
            c.set(0, G(c.b, ggml_map_custom3, mask, x, zero, o2g::where, GGML_N_TASKS_MAX, nullptr));
        };
        r.add(d);
    }
}

}  // namespace onnx2ggml::core
