// Gathers and other index-driven ops: Gather, GatherElements, GatherND, CumSum, Compress,
// ReverseSequence, OneHot. (Scatter*, TopK, NonZero and Unique: src/ops/indexing.cpp.)
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

// flat source index of every output element of GatherElements / GatherND
std::vector<int64_t> gather_elements_index(OpCtx& c) {
    const Shape& s = c.shape(0);
    const Shape& is = c.shape(1);
    int a = c.axis(c.ai("axis", 0), int(s.size()));
    auto idx = c.cints(1);
    auto st = strides_of(s);
    std::vector<int64_t> r(idx.size());
    std::vector<int64_t> pos(is.size(), 0);
    for (size_t e = 0; e < idx.size(); ++e) {
        int64_t v = idx[e];
        if (v < -s[a] || v >= s[a]) c.fail("index " + std::to_string(v) + " out of range");
        if (v < 0) v += s[a];
        int64_t f = 0;
        for (size_t k = 0; k < is.size(); ++k) f += (int(k) == a ? v : pos[k]) * st[k];
        r[e] = f;
        for (int k = int(is.size()) - 1; k >= 0; --k) {
            if (++pos[k] < is[k]) break;
            pos[k] = 0;
        }
    }
    return r;
}

Shape gather_nd_shape(OpCtx& c) {
    const Shape& s = c.shape(0);
    const Shape& is = c.shape(1);
    int64_t b = c.ai("batch_dims", 0);
    if (is.empty() || s.empty()) c.fail("GatherND needs data and indices of rank >= 1");
    if (b < 0 || b >= int64_t(std::min(s.size(), is.size())))
        c.fail("batch_dims " + std::to_string(b) + " is out of range");
    for (int64_t i = 0; i < b; ++i)
        if (s[size_t(i)] != is[size_t(i)]) c.fail("data and indices differ in batch dim " + std::to_string(i));
    int64_t k = is.back();
    if (k < 1 || k > int64_t(s.size()) - b) c.fail("indices last dim " + std::to_string(k) + " is out of range");
    Shape o(is.begin(), is.end() - 1);
    o.insert(o.end(), s.begin() + b + k, s.end());
    return o;
}

std::vector<int64_t> gather_nd_index(OpCtx& c) {
    const Shape& s = c.shape(0);
    const Shape& is = c.shape(1);
    int64_t b = c.ai("batch_dims", 0), k = is.back();
    auto idx = c.cints(1);
    auto st = strides_of(s);
    int64_t inner = 1;
    for (size_t i = size_t(b + k); i < s.size(); ++i) inner *= s[i];
    int64_t nidx = shape_numel(is) / std::max<int64_t>(k, 1), per_batch = 1;
    for (int64_t i = b; i < int64_t(is.size()) - 1; ++i) per_batch *= is[i];
    std::vector<int64_t> r;
    for (int64_t q = 0; q < nidx; ++q) {
        int64_t batch = q / std::max<int64_t>(per_batch, 1), f = 0, rem = batch;
        for (int64_t i = b - 1; i >= 0; --i) {
            f += (rem % s[i]) * st[i];
            rem /= s[i];
        }
        for (int64_t j = 0; j < k; ++j) {
            int64_t v = idx[q * k + j], d = s[b + j];
            if (v < -d || v >= d) c.fail("index " + std::to_string(v) + " out of range");
            f += (v < 0 ? v + d : v) * st[b + j];
        }
        for (int64_t e = 0; e < inner; ++e) r.push_back(f + e);
    }
    return r;
}

Tensor gather_host(OpCtx& c, const std::vector<int64_t>& idx, const Shape& out) {
    const Tensor& x = c.cval(0);
    Tensor t = Tensor::zeros(x.dtype, out);
    size_t es = dtype_size(x.dtype);
    for (size_t e = 0; e < idx.size(); ++e) std::memcpy(t.data() + e * es, x.data() + size_t(idx[e]) * es, es);
    return t;
}

// ReverseSequence: the flat input offset each output position reads (the first sequence_lens[b]
// steps along time_axis reversed, the rest copied).
std::function<int64_t(const std::vector<int64_t>&)> reverse_sequence_source(OpCtx& c) {
    const Shape& s = c.shape(0);
    if (s.size() < 2) c.fail("input must have rank >= 2, got " + shape_str(s));
    int64_t bax = c.ai("batch_axis", 1), tax = c.ai("time_axis", 0);
    if ((bax != 0 && bax != 1) || (tax != 0 && tax != 1) || bax == tax)
        c.fail("batch_axis and time_axis must be 0 and 1 (either order)");
    auto lens = c.cints(1);
    if (int64_t(lens.size()) != s[size_t(bax)])
        c.fail("sequence_lens has " + std::to_string(lens.size()) + " values for a batch of " +
               std::to_string(s[size_t(bax)]));
    for (int64_t L : lens)
        if (L < 0 || L > s[size_t(tax)])
            c.fail("sequence length " + std::to_string(L) + " is out of range [0, " + std::to_string(s[size_t(tax)]) +
                   "]");
    auto st = strides_of(s);
    return [lens, st, bax, tax](const std::vector<int64_t>& pos) {
        std::vector<int64_t> q = pos;
        int64_t L = lens[size_t(pos[size_t(bax)])];
        if (pos[size_t(tax)] < L) q[size_t(tax)] = L - 1 - pos[size_t(tax)];
        return flat(q, st);
    };
}

}  // namespace

O2G_OP_FAMILY(gather) {
    {
        OpDef d;
        d.op_type = "Gather";
        d.min_inputs = 2;
        auto out_shape = [](OpCtx& c) {
            const Shape& s = c.shape(0);
            int a = c.axis(c.ai("axis", 0), int(s.size()));
            Shape o(s.begin(), s.begin() + a);
            for (auto v : c.shape(1)) o.push_back(v);
            o.insert(o.end(), s.begin() + a + 1, s.end());
            return o;
        };
        auto norm_indices = [](OpCtx& c) {
            const Shape& s = c.shape(0);
            int a = c.axis(c.ai("axis", 0), int(s.size()));
            std::vector<int64_t> idx = c.cints(1);
            for (auto& v : idx) {
                if (v < -s[a] || v >= s[a])
                    c.fail("index " + std::to_string(v) + " is out of range for axis dim " + std::to_string(s[a]));
                if (v < 0) v += s[a];
            }
            return idx;
        };
        d.infer = [out_shape](OpCtx& c) {
            require_index(c, 1);
            c.set_out(0, c.dtype(0), out_shape(c));
        };
        d.eval = [out_shape, norm_indices](OpCtx& c) {
            const Shape& s = c.shape(0);
            int a = c.axis(c.ai("axis", 0), int(s.size()));
            auto idx = norm_indices(c);
            int64_t outer = 1, inner = 1, n = int64_t(idx.size());
            for (int i = 0; i < a; ++i) outer *= s[i];
            for (size_t i = a + 1; i < s.size(); ++i) inner *= s[i];
            Shape o = out_shape(c);
            Tensor t = Tensor::zeros(c.dtype(0), o);
            size_t es = dtype_size(t.dtype);
            const Tensor& x = c.cval(0);
            if (inner == 0) {
                c.set_const(0, t);
                return;
            }
            for (int64_t q = 0; q < outer; ++q)
                for (int64_t k = 0; k < n; ++k)
                    std::memcpy(t.data() + size_t((q * n + k) * inner) * es,
                                x.data() + size_t((q * s[a] + idx[k]) * inner) * es, size_t(inner) * es);
            c.set_const(0, t);
        };
        d.lower = [out_shape, norm_indices](Lc& c) {
            const Shape& s = c.shape(0);
            int a = c.axis(c.ai("axis", 0), int(s.size()));
            if (c.dtype(0) != DType::F32)
                c.fail_unsupported(std::string("Gather of ") + dtype_name(c.dtype(0)) + " data on the device");
            Shape o = out_shape(c);
            if (c.is_const(1)) {
                Shape flat_s = s;
                auto idx = norm_indices(c);
                ggml_tensor* g = gather_axis(c, c.x(0), s, a, idx);
                c.set(0, c.reshape(g, o));
                return;
            }
            // device indices (e.g. token ids): rows of a table gathered along axis 0
            int64_t outer = 1;
            for (int i = 0; i < a; ++i) outer *= s[i];
            if (outer != 1)
                c.fail_unsupported("Gather with runtime indices is only supported along the outermost axis");
            // ggml_get_rows needs indices in [0, dim): runtime indices must come straight from a graph
            // input, whose values are range-checked (and negatives wrapped) when they are uploaded
            auto& gin = c.graph().inputs;
            auto pos = std::find(gin.begin(), gin.end(), c.node().inputs[1]);
            if (pos == gin.end())
                c.fail_unsupported("Gather with indices computed at runtime (they must be constants or a graph input)");
            int64_t& bound = c.b.index_bound[pos - gin.begin()];
            if (bound && bound != s[a])
                c.fail_unsupported("graph input '" + c.in(1).name + "' indexes dims of different sizes");
            bound = s[a];
            int64_t inner = 1;
            for (size_t i = a + 1; i < s.size(); ++i) inner *= s[i];
            ggml_tensor* table = c.reshape(c.x(0), {s[a], inner});
            ggml_tensor* idx = c.reshape(c.x(1), {shape_numel(c.shape(1))});
            c.set(0, c.reshape(G(c.b, ggml_get_rows, table, idx), o));
        };
        r.add(d);
    }
    {
        OpDef d;
        d.op_type = "GatherElements";
        d.min_inputs = 2;
        d.host_inputs = {1};
        d.infer = [](OpCtx& c) {
            require_index(c, 1);
            if (c.rank(1) != c.rank(0)) c.fail("indices must have the rank of the data");
            c.set_out(0, c.dtype(0), c.shape(1));
        };
        d.eval = [](OpCtx& c) { c.set_const(0, gather_host(c, gather_elements_index(c), c.shape(1))); };
        d.lower = [](Lc& c) {
            require_float(c, 0);
            c.set(0, gather_flat(c, c.x(0), c.shape(0), gather_elements_index(c), c.shape(1)));
        };
        r.add(d);
    }
    {
        OpDef d;
        d.op_type = "GatherND";
        d.min_inputs = 2;
        d.host_inputs = {1};
        d.infer = [](OpCtx& c) {
            require_index(c, 1);
            c.set_out(0, c.dtype(0), gather_nd_shape(c));
        };
        d.eval = [](OpCtx& c) { c.set_const(0, gather_host(c, gather_nd_index(c), gather_nd_shape(c))); };
        d.lower = [](Lc& c) {
            require_float(c, 0);
            c.set(0, gather_flat(c, c.x(0), c.shape(0), gather_nd_index(c), gather_nd_shape(c)));
        };
        r.add(d);
    }
    {
        OpDef d;
        d.op_type = "CumSum";
        d.min_inputs = 2;
        d.host_inputs = {1};
        d.infer = [](OpCtx& c) {
            if (c.is_const(1)) {  // the axis: a scalar (or one value) in [-r, r)
                if (c.cval(1).numel() != 1) c.fail("axis of shape " + shape_str(c.shape(1)) + " is not a scalar");
                c.axis(c.cval(1).geti(0), c.rank(0));
            }
            infer_same(c);
        };
        d.eval = [](OpCtx& c) {
            const Shape& s = c.shape(0);
            int a = c.axis(c.cval(1).geti(0), int(s.size()));
            bool excl = c.ai("exclusive", 0) != 0, rev = c.ai("reverse", 0) != 0;
            const Tensor& x = c.cval(0);
            Tensor t = Tensor::zeros(x.dtype, s);
            int64_t inner = 1, outer = 1;
            for (size_t i = a + 1; i < s.size(); ++i) inner *= s[i];
            for (int i = 0; i < a; ++i) outer *= s[i];
            bool flt = dtype_is_float(x.dtype);
            for (int64_t o = 0; o < outer; ++o)
                for (int64_t in = 0; in < inner; ++in) {
                    double acc = 0;
                    int64_t iacc = 0;
                    for (int64_t q = 0; q < s[a]; ++q) {
                        int64_t k = rev ? s[a] - 1 - q : q;
                        int64_t e = (o * s[a] + k) * inner + in;
                        if (excl) { flt ? t.setf(e, acc) : t.seti(e, iacc); }
                        acc += x.getf(e);
                        iacc += x.geti(e);
                        if (!excl) { flt ? t.setf(e, acc) : t.seti(e, iacc); }
                    }
                }
            c.set_const(0, t);
        };
        d.lower = [](Lc& c) {
            require_float(c, 0);
            const Shape& s = c.shape(0);
            int rk = int(s.size());
            int a = c.axis(c.cval(1).geti(0), rk);
            bool excl = c.ai("exclusive", 0) != 0, rev = c.ai("reverse", 0) != 0;
            std::vector<int64_t> perm;
            for (int i = 0; i < rk; ++i)
                if (i != a) perm.push_back(i);
            perm.push_back(a);
            Shape ps;
            for (auto v : perm) ps.push_back(s[v]);
            ggml_tensor* x = c.cont(transpose_any(c, c.x(0), s, perm));
            int64_t n = s[a];
            std::vector<int64_t> flip;
            for (int64_t k = n - 1; k >= 0; --k) flip.push_back(k);
            if (rev) x = c.cont(gather_axis(c, x, ps, rk - 1, flip));
            if (excl) {  // shift right by one: a zero first, the last element dropped
                x = G(c.b, ggml_pad_ext, x, 1, 0, 0, 0, 0, 0, 0, 0);
                x = c.cont(c.slice(x, 0, 0, n));
            }
            ggml_tensor* y = G(c.b, ggml_cumsum, x);
            if (rev) y = gather_axis(c, y, ps, rk - 1, flip);
            std::vector<int64_t> inv = inverse_perm(perm);
            c.set(0, transpose_any(c, c.cont(y), ps, inv));
        };
        r.add(d);
    }
    {
        OpDef d;
        d.op_type = "Compress";
        d.min_inputs = 2;
        d.host_inputs = {1};
        auto plan = [](OpCtx& c, int& axis, std::vector<int64_t>& keep, Shape& out) {
            auto cond = c.cints(1);
            bool has_axis = c.has_attr("axis");
            Shape s = c.shape(0);
            axis = has_axis ? c.axis(c.ai("axis", 0), int(s.size())) : 0;
            int64_t dim = has_axis ? s[axis] : shape_numel(s);
            for (int64_t k = 0; k < std::min<int64_t>(dim, int64_t(cond.size())); ++k)
                if (cond[k]) keep.push_back(k);
            if (has_axis) {
                out = s;
                out[axis] = int64_t(keep.size());
            } else out = {int64_t(keep.size())};
        };
        d.infer = [plan](OpCtx& c) {
            int a;
            std::vector<int64_t> k;
            Shape o;
            plan(c, a, k, o);
            c.set_out(0, c.dtype(0), o);
        };
        d.eval = [plan](OpCtx& c) {
            int a;
            std::vector<int64_t> keep;
            Shape o;
            plan(c, a, keep, o);
            bool has_axis = c.has_attr("axis");
            auto st = strides_of(c.shape(0));
            c.set_const(0, remap(c.cval(0), o, [&](const std::vector<int64_t>& i) {
                            if (!has_axis) return keep[size_t(i[0])];
                            std::vector<int64_t> q = i;
                            q[size_t(a)] = keep[size_t(i[size_t(a)])];
                            return flat(q, st);
                        }));
        };
        d.lower = [plan](Lc& c) {
            require_float(c, 0);
            int a;
            std::vector<int64_t> keep;
            Shape o;
            plan(c, a, keep, o);
            if (c.has_attr("axis")) c.set(0, gather_axis(c, c.x(0), c.shape(0), a, keep));
            else c.set(0, gather_flat(c, c.x(0), c.shape(0), keep, o));
        };
        r.add(d);
    }
    {
        OpDef d;
        d.op_type = "ReverseSequence";
        d.min_inputs = 2;
        d.host_inputs = {1};
        d.infer = infer_same;
        d.eval = [](OpCtx& c) { c.set_const(0, remap(c.cval(0), c.shape(0), reverse_sequence_source(c))); };
        d.lower = [](Lc& c) {  // a gather of single elements with host-computed indices
            require_float(c, 0);
            const Shape& s = c.shape(0);
            auto src = reverse_sequence_source(c);
            std::vector<int64_t> idx(size_t(shape_numel(s)));
            for_grid(s, [&](int64_t e, const std::vector<int64_t>& pos) { idx[size_t(e)] = src(pos); });
            c.set(0, gather_flat(c, c.x(0), s, idx, s));
        };
        r.add(d);
    }
    {
        OpDef d;
        d.op_type = "OneHot";
        d.min_inputs = 3;
        d.host_inputs = {0, 1, 2};
        auto out_shape = [](OpCtx& c) {
            Shape o = c.shape(0);
            int a = int(c.ai("axis", -1));
            int64_t depth = int64_t(c.cval(1).getf(0));
            if (a < 0) a += int(o.size()) + 1;
            o.insert(o.begin() + a, depth);
            return o;
        };
        d.infer = [out_shape](OpCtx& c) { c.set_out(0, c.dtype(2), out_shape(c)); };
        d.eval = [out_shape](OpCtx& c) {
            Shape o = out_shape(c);
            int a = int(c.ai("axis", -1));
            if (a < 0) a += int(o.size());
            int64_t depth = o[a];
            auto idx = c.cval(0).to_i64();
            const Tensor& vals = c.cval(2);
            Tensor t = Tensor::zeros(vals.dtype, o);
            int64_t inner = 1;
            for (size_t i = a + 1; i < o.size(); ++i) inner *= o[i];
            for (int64_t e = 0; e < t.numel(); ++e) {
                int64_t k = (e / inner) % depth, src = (e / (inner * depth)) * inner + e % inner;
                int64_t v = idx[src] < 0 ? idx[src] + depth : idx[src];
                t.setf(e, vals.getf(v == k ? 1 : 0));
            }
            c.set_const(0, t);
        };
        r.add(d);
    }
}

}  // namespace onnx2ggml::core
