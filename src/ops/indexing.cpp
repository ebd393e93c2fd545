// Sorting and scattering operators: TopK, ScatterElements (and the older Scatter), ScatterND.
// ggml has no kernels for them (ggml_top_k returns unsorted indices and no values of other
// dtypes); they are computed by their host evaluators: folded when their inputs are
// constant, else as host kernels (lower/host_kernel.h).
#include <algorithm>
#include <numeric>

#include "ops/common.h"

namespace onnx2ggml::core {
namespace {

int64_t topk_k(OpCtx& c) {
    int64_t k = c.opset() < 10 ? c.ai("k", -1) : c.cval(1).geti(0);
    int a = c.axis(c.ai("axis", -1), c.rank(0));
    if (k < 0 || k > c.shape(0)[a])
        c.fail("k = " + std::to_string(k) + " is out of range for axis size " + std::to_string(c.shape(0)[a]));
    return k;
}

void register_topk(Registry& r) {
    OpDef d;
    d.op_type = "TopK";
    d.host_inputs = {1};
    d.infer = [](OpCtx& c) {
        Shape o = c.shape(0);
        o[c.axis(c.ai("axis", -1), c.rank(0))] = topk_k(c);
        c.set_out(0, c.dtype(0), o);
        c.set_out(1, DType::I64, o);
    };
    d.eval = [](OpCtx& c) {
        const Tensor& x = c.cval(0);
        const Shape& s = c.shape(0);
        int a = c.axis(c.ai("axis", -1), c.rank(0));
        int64_t k = topk_k(c), n = s[a], inner = 1, outer = 1;
        for (int i = a + 1; i < int(s.size()); ++i) inner *= s[i];
        for (int i = 0; i < a; ++i) outer *= s[i];
        bool largest = c.ai("largest", 1) != 0, is_int = !dtype_is_float(x.dtype);
        Shape os = s;
        os[a] = k;
        Tensor v = Tensor::zeros(x.dtype, os), ix = Tensor::zeros(DType::I64, os);
        std::vector<int64_t> order(static_cast<size_t>(n), 0);
        for (int64_t o = 0; o < outer; ++o)
            for (int64_t in = 0; in < inner; ++in) {
                auto at = [&](int64_t j) { return (o * n + j) * inner + in; };
                std::iota(order.begin(), order.end(), 0);
                // sorted by value (largest or smallest first); equal values keep the lower index first
                std::stable_sort(order.begin(), order.end(), [&](int64_t p, int64_t q) {
                    if (is_int) return largest ? x.geti(at(p)) > x.geti(at(q)) : x.geti(at(p)) < x.geti(at(q));
                    return largest ? x.getf(at(p)) > x.getf(at(q)) : x.getf(at(p)) < x.getf(at(q));
                });
                for (int64_t j = 0; j < k; ++j) {
                    int64_t dst = (o * k + j) * inner + in;
                    if (is_int) v.seti(dst, x.geti(at(order[size_t(j)])));
                    else v.setf(dst, x.getf(at(order[size_t(j)])));
                    ix.seti(dst, order[size_t(j)]);
                }
            }
        c.set_const(0, v);
        c.set_const(1, ix);
    };
    r.add(d);
}

// out = data with `updates` written (or combined by `reduction`) at element index `dst[e]`.
Tensor scatter_into(OpCtx& c, const Tensor& data, const Tensor& upd, const std::vector<int64_t>& dst, int64_t block) {
    std::string red = c.as("reduction", "none");
    if (red != "none" && red != "add" && red != "mul" && red != "max" && red != "min")
        c.fail("unknown reduction '" + red + "'");
    Tensor out = Tensor::zeros(data.dtype, data.shape);
    std::copy(data.data(), data.data() + data.nbytes(), out.data());
    bool is_int = !dtype_is_float(data.dtype);
    for (size_t e = 0; e < dst.size(); ++e)
        for (int64_t j = 0; j < block; ++j) {
            int64_t o = dst[e] * block + j, u = int64_t(e) * block + j;
            if (is_int) {
                int64_t a = out.geti(o), b = upd.geti(u);
                out.seti(o, red == "add"   ? a + b
                            : red == "mul" ? a * b
                            : red == "max" ? std::max(a, b)
                            : red == "min" ? std::min(a, b)
                                           : b);
            } else {
                double a = out.getf(o), b = upd.getf(u);
                out.setf(o, red == "add"   ? a + b
                            : red == "mul" ? a * b
                            : red == "max" ? std::max(a, b)
                            : red == "min" ? std::min(a, b)
                                           : b);
            }
        }
    return out;
}

void register_scatter(Registry& r) {
    for (const char* op : {"ScatterElements", "Scatter"}) {
        OpDef d;
        d.op_type = op;
        d.min_inputs = 3;
        d.infer = [](OpCtx& c) {
            require_index(c, 1);
            if (c.rank(1) != c.rank(0) || c.shape(2) != c.shape(1))
                c.fail("indices and updates must have one shape, of the data's rank");
            c.set_out(0, c.dtype(0), c.shape(0));
        };
        d.eval = [](OpCtx& c) {
            const Shape& s = c.shape(0);
            const Shape& is = c.shape(1);
            int a = c.axis(c.ai("axis", 0), int(s.size()));
            auto idx = c.cints(1);
            auto st = strides_of(s);
            std::vector<int64_t> dst(idx.size()), pos(is.size(), 0);
            for (size_t e = 0; e < idx.size(); ++e) {
                int64_t v = idx[e];
                if (v < -s[a] || v >= s[a])
                    c.fail("index " + std::to_string(v) + " is out of range for axis size " + std::to_string(s[a]));
                if (v < 0) v += s[a];
                int64_t f = 0;
                for (size_t k = 0; k < is.size(); ++k) f += (int(k) == a ? v : pos[k]) * st[k];
                dst[e] = f;
                for (int k = int(is.size()) - 1; k >= 0; --k) {
                    if (++pos[k] < is[k]) break;
                    pos[k] = 0;
                }
            }
            c.set_const(0, scatter_into(c, c.cval(0), c.cval(2), dst, 1));
        };
        r.add(d);
    }
    OpDef d;
    d.op_type = "ScatterND";
    d.min_inputs = 3;
    d.infer = [](OpCtx& c) {
        require_index(c, 1);
        const Shape &s = c.shape(0), &is = c.shape(1), &us = c.shape(2);
        if (is.empty() || is.back() > int64_t(s.size())) c.fail("indices' last dim exceeds the data's rank");
        Shape want(is.begin(), is.end() - 1);
        want.insert(want.end(), s.begin() + is.back(), s.end());
        if (us != want) c.fail("updates have shape " + shape_str(us) + ", expected " + shape_str(want));
        c.set_out(0, c.dtype(0), s);
    };
    d.eval = [](OpCtx& c) {
        const Shape& s = c.shape(0);
        int64_t k = c.shape(1).back(), block = 1;
        for (size_t i = size_t(k); i < s.size(); ++i) block *= s[i];
        auto idx = c.cints(1);
        std::vector<int64_t> dst(idx.size() / std::max<int64_t>(k, 1));
        for (size_t e = 0; e < dst.size(); ++e) {
            int64_t f = 0;
            for (int64_t j = 0; j < k; ++j) {
                int64_t v = idx[e * size_t(k) + size_t(j)];
                if (v < -s[j] || v >= s[j])
                    c.fail("index " + std::to_string(v) + " is out of range for dim size " + std::to_string(s[j]));
                f = f * s[j] + (v < 0 ? v + s[j] : v);
            }
            dst[e] = f;
        }
        c.set_const(0, scatter_into(c, c.cval(0), c.cval(2), dst, block));
    };
    r.add(d);
}

// ---- ops whose output shape depends on the input's values ---------------------------------
// onnx2ggml compiles static graphs: NonZero and Unique need their input at compile time (a
// runtime one asks for a constant, as Reshape's shape does; `check` and `--freeze` provide it).

void register_value_shaped(Registry& r) {
    {
        OpDef d;
        d.op_type = "NonZero";
        d.host_inputs = {0};
        d.infer = [](OpCtx& c) {
            const Tensor& x = c.cval(0);
            int64_t nz = 0;
            for (int64_t i = 0; i < x.numel(); ++i) nz += x.getf(i) != 0;
            c.set_out(0, DType::I64, {int64_t(x.shape.size()), nz});
        };
        d.eval = [](OpCtx& c) {
            const Tensor& x = c.cval(0);
            const Shape& s = x.shape;
            std::vector<int64_t> hits;
            for (int64_t i = 0; i < x.numel(); ++i)
                if (x.getf(i) != 0) hits.push_back(i);
            int64_t nz = int64_t(hits.size()), rank = int64_t(s.size());
            Tensor y = Tensor::zeros(DType::I64, {rank, nz});
            for (int64_t j = 0; j < nz; ++j) {
                int64_t rem = hits[size_t(j)];
                for (int64_t k = rank - 1; k >= 0; --k) {
                    y.seti(k * nz + j, rem % s[size_t(k)]);
                    rem /= s[size_t(k)];
                }
            }
            c.set_const(0, y);
        };
        r.add(d);
    }
    OpDef d;
    d.op_type = "Unique";
    d.host_inputs = {0};
    // slices along `axis` (the flattened elements without it), compared lexicographically
    struct Slices {
        int64_t n = 0, outer = 1, inner = 1;
        std::vector<std::vector<double>> v;
    };
    auto slices = [](OpCtx& c) {
        const Tensor& x = c.cval(0);
        Slices sl;
        if (!c.has_attr("axis")) {
            sl.n = x.numel();
            for (int64_t i = 0; i < sl.n; ++i) sl.v.push_back({x.getf(i)});
            return sl;
        }
        int a = c.axis(c.ai("axis", 0), int(x.shape.size()));
        sl.n = x.shape[size_t(a)];
        for (int i = 0; i < a; ++i) sl.outer *= x.shape[size_t(i)];
        for (size_t i = size_t(a) + 1; i < x.shape.size(); ++i) sl.inner *= x.shape[i];
        sl.v.assign(size_t(sl.n), {});
        for (int64_t j = 0; j < sl.n; ++j)
            for (int64_t o = 0; o < sl.outer; ++o)
                for (int64_t i = 0; i < sl.inner; ++i) sl.v[size_t(j)].push_back(x.getf((o * sl.n + j) * sl.inner + i));
        return sl;
    };
    // unique slice ids in output order, and for every slice the output slot it maps to
    auto uniq = [slices](OpCtx& c, Slices& sl, std::vector<int64_t>& first, std::vector<int64_t>& inverse,
                         std::vector<int64_t>& counts) {
        sl = slices(c);
        std::vector<int64_t> order(static_cast<size_t>(sl.n), 0);
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(),
                         [&](int64_t p, int64_t q) { return sl.v[size_t(p)] < sl.v[size_t(q)]; });
        std::vector<int64_t> group(size_t(sl.n));
        for (size_t k = 0; k < order.size(); ++k) {
            if (k == 0 || sl.v[size_t(order[k])] != sl.v[size_t(order[k - 1])])
                first.push_back(order[k]);  // stable: lowest index
            group[size_t(order[k])] = int64_t(first.size()) - 1;
        }
        std::vector<int64_t> slot(first.size());
        std::iota(slot.begin(), slot.end(), 0);
        if (c.ai("sorted", 1) == 0) {  // order of first occurrence
            std::vector<int64_t> by_first(first.size());
            std::iota(by_first.begin(), by_first.end(), 0);
            std::sort(by_first.begin(), by_first.end(),
                      [&](int64_t p, int64_t q) { return first[size_t(p)] < first[size_t(q)]; });
            std::vector<int64_t> f2;
            for (size_t k = 0; k < by_first.size(); ++k)
                slot[size_t(by_first[k])] = int64_t(k), f2.push_back(first[size_t(by_first[k])]);
            first = f2;
        }
        counts.assign(first.size(), 0);
        for (int64_t j = 0; j < sl.n; ++j) {
            inverse.push_back(slot[size_t(group[size_t(j)])]);
            counts[size_t(inverse.back())]++;
        }
    };
    d.infer = [uniq](OpCtx& c) {
        Slices sl;
        std::vector<int64_t> first, inverse, counts;
        uniq(c, sl, first, inverse, counts);
        int64_t u = int64_t(first.size());
        Shape ys = {u};
        if (c.has_attr("axis")) {
            ys = c.shape(0);
            ys[size_t(c.axis(c.ai("axis", 0), c.rank(0)))] = u;
        }
        c.set_out(0, c.dtype(0), ys);
        for (int i = 1; i < 4; ++i)
            if (c.has_out(i)) c.set_out(i, DType::I64, {i == 2 ? sl.n : u});
    };
    d.eval = [uniq](OpCtx& c) {
        Slices sl;
        std::vector<int64_t> first, inverse, counts;
        uniq(c, sl, first, inverse, counts);
        int64_t u = int64_t(first.size());
        const Tensor& x = c.cval(0);
        Shape ys = {u};
        if (c.has_attr("axis")) {
            ys = x.shape;
            ys[size_t(c.axis(c.ai("axis", 0), c.rank(0)))] = u;
        }
        Tensor y = Tensor::zeros(x.dtype, ys);
        size_t es = dtype_size(x.dtype);
        for (int64_t k = 0; k < u; ++k)
            for (int64_t o = 0; o < sl.outer; ++o)
                for (int64_t i = 0; i < sl.inner; ++i) {
                    int64_t src = (o * sl.n + first[size_t(k)]) * sl.inner + i, dst = (o * u + k) * sl.inner + i;
                    std::copy(x.data() + size_t(src) * es, x.data() + size_t(src + 1) * es,
                              y.data() + size_t(dst) * es);
                }
        c.set_const(0, y);
        auto put = [&](int i, const std::vector<int64_t>& v) {
            if (c.has_out(i)) c.set_const(i, Tensor::from_i64(v, {int64_t(v.size())}));
        };
        put(1, first);
        put(2, inverse);
        put(3, counts);
    };
    r.add(d);
}

}  // namespace

O2G_OP_FAMILY(indexing) {
    register_topk(r);
    register_scatter(r);
    register_value_shaped(r);
}

}  // namespace onnx2ggml::core
