// Shape and data-movement operators: Shape, Size, Constant, ConstantOfShape, Range,
// Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Concat, Split, Slice, Gather,
// Expand, Tile, Pad, DepthToSpace, SpaceToDepth. On the device they become ggml views
// wherever possible.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "o2g_kernels.h"
#include "ops/common.h"

namespace onnx2ggml {
namespace {

using Lc = LowerCtx;

// out[e] = in[f(index of e)], or zero/`fill` when f returns -1
Tensor remap(const Tensor& in, const Shape& out, const std::function<int64_t(const std::vector<int64_t>&)>& f) {
    Tensor r = Tensor::zeros(in.dtype, out);
    size_t es = dtype_size(in.dtype);
    int64_t n = r.numel();
    std::vector<int64_t> idx(out.size(), 0);
    for (int64_t e = 0; e < n; ++e) {
        int64_t src = f(idx);
        if (src >= 0) std::memcpy(r.data() + size_t(e) * es, in.data() + size_t(src) * es, es);
        for (int d = int(out.size()) - 1; d >= 0; --d) {
            if (++idx[d] < out[d]) break;
            idx[d] = 0;
        }
    }
    return r;
}

int64_t flat(const std::vector<int64_t>& idx, const std::vector<int64_t>& st) {
    int64_t o = 0;
    for (size_t i = 0; i < idx.size(); ++i) o += idx[i] * st[i];
    return o;
}

}  // namespace

// ---- general device helpers --------------------------------------------------------------

// Gathers `indices` (already normalized) along ONNX axis of a device tensor of shape s.
// Result has shape s with s[axis] = indices.size().
ggml_tensor* gather_axis(Lc& c, ggml_tensor* x, const Shape& s, int axis, const std::vector<int64_t>& indices) {
    int64_t inner = 1, outer = 1;
    for (size_t i = axis + 1; i < s.size(); ++i) inner *= s[i];
    for (int i = 0; i < axis; ++i) outer *= s[i];
    int64_t n = int64_t(indices.size());
    x = c.reshape(x, {outer, s[axis], inner});
    Tensor idx = Tensor::zeros(DType::I32, {outer, n});
    for (int64_t o = 0; o < outer; ++o)
        for (int64_t k = 0; k < n; ++k) idx.seti(o * n + k, indices[k]);
    ggml_tensor* it = c.constant(idx, GGML_TYPE_I32);
    ggml_tensor* r = G(c.b, ggml_get_rows, x, it);
    Shape os = s;
    os[axis] = n;
    return c.reshape(r, os);
}

// Transpose of any rank: a view for rank <= 4; above, size-1 dims are dropped and dims
// that move together are merged, then it is one permute.
ggml_tensor* transpose_any(Lc& c, ggml_tensor* x, const Shape& s, const std::vector<int64_t>& perm) {
    int r = int(s.size());
    Shape out(r);
    for (int j = 0; j < r; ++j) out[j] = s[perm[j]];
    if (r <= 4) return c.permute(c.reshape(x, s), perm);
    // drop size-1 dims
    std::vector<int> keep;
    for (int i = 0; i < r; ++i) if (s[i] != 1) keep.push_back(i);
    std::vector<int64_t> p2;
    for (int j = 0; j < r; ++j) if (s[perm[j]] != 1) p2.push_back(std::find(keep.begin(), keep.end(), int(perm[j])) - keep.begin());
    Shape s2;
    for (int i : keep) s2.push_back(s[i]);
    // merge input dims i, i+1 that are adjacent in the output order
    std::vector<std::vector<int>> groups;  // groups of input dims, in input order
    std::vector<int> group_of(s2.size());
    for (size_t j = 0; j < p2.size(); ++j) {
        if (j > 0 && p2[j] == p2[j - 1] + 1) groups[group_of[p2[j - 1]]].push_back(int(p2[j])), group_of[p2[j]] = group_of[p2[j - 1]];
        else { groups.push_back({int(p2[j])}); group_of[p2[j]] = int(groups.size()) - 1; }
    }
    if (groups.size() > 4) {
        // the outermost dim stays outermost: transpose each slice along it and stack the results
        if (p2.empty() || p2[0] != 0 || s2.size() < 5)
            c.fail_unsupported("Transpose of rank " + std::to_string(r) + " cannot be folded to 4 ggml dims");
        Shape inner(s2.begin() + 1, s2.end());
        std::vector<int64_t> pin;
        for (size_t j = 1; j < p2.size(); ++j) pin.push_back(p2[j] - 1);
        ggml_tensor* xc = c.cont(c.reshape(x, s2));
        int64_t n = shape_numel(inner);
        ggml_tensor* acc = nullptr;
        for (int64_t i = 0; i < s2[0]; ++i) {
            ggml_tensor* sl = G(c.b, ggml_view_1d, xc, n, size_t(i * n) * ggml_element_size(xc));
            ggml_tensor* t = c.cont(transpose_any(c, sl, inner, pin));
            acc = acc ? G(c.b, ggml_concat, acc, t, 3) : t;
        }
        return c.reshape(acc, out);
    }
    // input shape of the merged groups in input order
    std::vector<int> gorder(groups.size());
    std::iota(gorder.begin(), gorder.end(), 0);
    std::sort(gorder.begin(), gorder.end(), [&](int a, int b) { return groups[a][0] < groups[b][0]; });
    Shape ms;
    std::vector<int> pos_in(groups.size());
    for (size_t k = 0; k < gorder.size(); ++k) {
        int64_t d = 1;
        for (int i : groups[gorder[k]]) d *= s2[i];
        ms.push_back(d);
        pos_in[gorder[k]] = int(k);
    }
    std::vector<int64_t> mp;
    for (size_t g = 0; g < groups.size(); ++g) mp.push_back(pos_in[g]);  // groups are in output order
    ggml_tensor* t = c.permute(c.reshape(x, ms), mp);
    return c.reshape(c.cont(t), out);
}

// Gathers single elements: out (shape `out`) [e] = x_flat[idx[e]] (indices known at compile time).
ggml_tensor* gather_flat(Lc& c, ggml_tensor* x, const Shape& s, const std::vector<int64_t>& idx, const Shape& out) {
    x = c.reshape(x, {shape_numel(s), 1});
    Tensor it = Tensor::zeros(DType::I32, {int64_t(idx.size())});
    for (size_t k = 0; k < idx.size(); ++k) it.seti(int64_t(k), idx[k]);
    return c.reshape(G(c.b, ggml_get_rows, x, c.constant(it, GGML_TYPE_I32)), out);
}

namespace {

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
        for (int k = int(is.size()) - 1; k >= 0; --k) { if (++pos[k] < is[k]) break; pos[k] = 0; }
    }
    return r;
}

Shape gather_nd_shape(OpCtx& c) {
    const Shape& s = c.shape(0);
    const Shape& is = c.shape(1);
    int64_t b = c.ai("batch_dims", 0);
    if (is.empty() || s.empty()) c.fail("GatherND needs data and indices of rank >= 1");
    if (b < 0 || b >= int64_t(std::min(s.size(), is.size()))) c.fail("batch_dims " + std::to_string(b) + " is out of range");
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
        for (int64_t i = b - 1; i >= 0; --i) { f += (rem % s[i]) * st[i]; rem /= s[i]; }
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

Tensor trilu_mask(OpCtx& c) {
    const Shape& s = c.shape(0);
    int64_t n = s[s.size() - 2], m = s.back(), k = c.has(1) ? c.cval(1).geti(0) : 0;
    bool upper = c.ai("upper", 1) != 0;
    Tensor t = Tensor::zeros(DType::F32, {n, m});
    for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < m; ++j) t.ptr<float>()[i * m + j] = float(upper ? (j - i >= k) : (j - i <= k));
    return t;
}

// ---- shape rules shared by host and device ----------------------------------------------

Shape reshape_target(OpCtx& c) {
    std::vector<int64_t> spec = c.opset() < 5 ? c.ais("shape") : c.cints(1);
    bool allowzero = c.ai("allowzero", 0) != 0;
    const Shape& in = c.shape(0);
    Shape out(spec.size());
    int infer = -1;
    int64_t known = 1;
    for (size_t i = 0; i < spec.size(); ++i) {
        int64_t d = spec[i];
        if (d == 0 && !allowzero) {
            if (i >= in.size()) c.fail("shape entry 0 at position " + std::to_string(i) + " has no input dim to copy");
            d = in[i];
        }
        if (d == -1) {
            if (infer >= 0) c.fail("more than one -1 in the target shape");
            infer = int(i);
            out[i] = 1;
            continue;
        }
        if (d < 0) c.fail("invalid target shape entry " + std::to_string(d));
        out[i] = d;
        if (__builtin_mul_overflow(known, d, &known)) c.fail("target shape " + shape_str(Shape(spec)) + " has more elements than int64 holds");
    }
    int64_t n = shape_numel(in);
    if (infer >= 0) {
        if (known == 0 || n % known != 0) c.fail("cannot reshape " + shape_str(in) + " to " + shape_str(Shape(spec)));
        out[infer] = n / known;
    }
    if (shape_numel(out) != n) c.fail("cannot reshape " + shape_str(in) + " (" + std::to_string(n) + " elements) to " + shape_str(out));
    return out;
}

std::vector<int64_t> axes_arg(OpCtx& c, int input, const char* attr) {
    if (c.opset() >= 13 && c.op_is_input_axes()) return c.has(input) ? c.cints(input) : std::vector<int64_t>{};
    return c.ais(attr);
}

struct SliceSpec { std::vector<int64_t> start, step, len; };  // per axis of the input

SliceSpec slice_spec(OpCtx& c) {
    const Shape& s = c.shape(0);
    int r = int(s.size());
    std::vector<int64_t> starts, ends, axes, steps;
    if (c.opset() < 10) {
        starts = c.ais("starts");
        ends = c.ais("ends");
        axes = c.ais("axes");
    } else {
        starts = c.cints(1);
        ends = c.cints(2);
        if (c.has(3)) axes = c.cints(3);
        if (c.has(4)) steps = c.cints(4);
    }
    if (axes.empty()) for (size_t i = 0; i < starts.size(); ++i) axes.push_back(int64_t(i));
    if (steps.empty()) steps.assign(starts.size(), 1);
    if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
        c.fail("starts, ends, axes and steps must have the same length");
    SliceSpec sp;
    sp.start.assign(r, 0);
    sp.step.assign(r, 1);
    sp.len = s;
    std::vector<bool> seen(r, false);
    for (size_t k = 0; k < starts.size(); ++k) {
        int a = c.axis(axes[k], r);
        if (seen[a]) c.fail("axis " + std::to_string(a) + " appears twice");
        seen[a] = true;
        int64_t dim = s[a], st = starts[k], en = ends[k], step = steps[k];
        if (step == 0) c.fail("slice step 0");
        if (st < 0) st += dim;
        if (en < 0) en += dim;
        int64_t len;
        if (step > 0) {
            st = std::clamp<int64_t>(st, 0, dim);
            en = std::clamp<int64_t>(en, 0, dim);
            len = en > st ? (en - st + step - 1) / step : 0;
        } else {
            st = std::clamp<int64_t>(st, 0, dim - 1);
            en = std::clamp<int64_t>(en, -1, dim - 1);
            len = st > en ? (st - en + (-step) - 1) / (-step) : 0;
        }
        sp.start[a] = st;
        sp.step[a] = step;
        sp.len[a] = len;
    }
    return sp;
}

std::vector<int64_t> split_sizes(OpCtx& c) {
    int r = c.rank(0);
    int a = c.axis(c.ai("axis", 0), r);
    int64_t dim = c.shape(0)[a];
    std::vector<int64_t> sizes;
    if (c.opset() >= 13 && c.has(1)) sizes = c.cints(1);
    else if (c.opset() < 13 && c.has_attr("split")) sizes = c.ais("split");
    else if (c.opset() < 13 && c.has(1)) sizes = c.cints(1);  // opset 2-10 had an optional input too
    int n = c.nout();
    if (sizes.empty()) {
        if (c.opset() >= 18 && c.has_attr("num_outputs")) n = int(c.ai("num_outputs", n));
        int64_t chunk = (dim + n - 1) / n;
        for (int i = 0; i < n; ++i) sizes.push_back(std::max<int64_t>(0, std::min(chunk, dim - chunk * i)));
    }
    int64_t total = 0;
    for (int64_t v : sizes) total += v;
    if (total != dim || int(sizes.size()) != c.nout()) c.fail("split sizes do not add up to the axis dim " + std::to_string(dim));
    return sizes;
}

// Reflect/edge padding index of position p (may be outside [0, n)).
int64_t pad_index(int64_t p, int64_t n, const std::string& mode) {
    if (p >= 0 && p < n) return p;
    if (mode == "edge") return p < 0 ? 0 : n - 1;
    if (mode == "wrap") return ((p % n) + n) % n;
    if (n == 1) return 0;  // reflect
    int64_t period = 2 * (n - 1);
    p = ((p % period) + period) % period;
    return p < n ? p : period - p;
}

struct PadSpec { std::vector<int64_t> lo, hi; std::string mode; double value = 0; };

PadSpec pad_spec(OpCtx& c) {
    int r = c.rank(0);
    PadSpec p;
    p.mode = c.as("mode", "constant");
    std::vector<int64_t> pads;
    if (c.opset() < 11) {
        pads = c.ais(c.opset() < 2 ? "paddings" : "pads");
        p.value = c.af("value", 0.0f);
    } else {
        pads = c.cints(1);
        if (c.has(2)) p.value = c.cval(2).getf(0);
    }
    std::vector<int64_t> axes;
    if (c.opset() >= 18 && c.has(3)) for (int64_t a : c.cints(3)) axes.push_back(c.axis(a, r));
    else for (int i = 0; i < r; ++i) axes.push_back(i);
    if (pads.size() != 2 * axes.size()) c.fail("pads has " + std::to_string(pads.size()) + " values, expected " + std::to_string(2 * axes.size()));
    p.lo.assign(r, 0);
    p.hi.assign(r, 0);
    for (size_t k = 0; k < axes.size(); ++k) {
        p.lo[axes[k]] = pads[k];
        p.hi[axes[k]] = pads[k + axes.size()];
    }
    if (p.mode != "constant" && p.mode != "reflect" && p.mode != "edge" && p.mode != "wrap") c.fail("unknown Pad mode '" + p.mode + "'");
    for (int i = 0; i < r; ++i)
        if (c.shape(0)[i] + p.lo[i] + p.hi[i] < 0) c.fail("pads make dim " + std::to_string(i) + " negative");
    return p;
}

void reg(Registry& r, OpDef d) { r.add(std::move(d)); }

}  // namespace

bool OpCtx::op_is_input_axes() const {
    const std::string& op = node().op_type;
    return op == "Squeeze" || op == "Unsqueeze";
}

void register_shape_ops(Registry& r) {
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
        d.infer = [range](OpCtx& c) { int64_t b, e; range(c, b, e); c.set_out(0, DType::I64, {std::max<int64_t>(0, e - b)}); };
        d.eval = [range](OpCtx& c) {
            int64_t b, e;
            range(c, b, e);
            std::vector<int64_t> v;
            for (int64_t i = b; i < e; ++i) v.push_back(c.shape(0)[i]);
            c.set_const(0, Tensor::from_i64(v, {int64_t(v.size())}));
        };
        reg(r, d);
    }
    {
        OpDef d;
        d.op_type = "Size";
        d.shape_only = true;
        d.infer = [](OpCtx& c) { c.set_out(0, DType::I64, {}); };
        d.eval = [](OpCtx& c) { c.set_const(0, Tensor::scalar_i64(shape_numel(c.shape(0)))); };
        reg(r, d);
    }
    {
        OpDef d;
        d.op_type = "Constant";
        d.shape_only = true;
        auto value = [](OpCtx& c) -> Tensor {
            if (const Tensor* t = c.at("value")) return *t;
            if (c.has_attr("value_float")) return Tensor::from_f32({c.af("value_float", 0)}, {});
            if (c.has_attr("value_floats")) { auto v = c.afs("value_floats"); return Tensor::from_f32(v, {int64_t(v.size())}); }
            if (c.has_attr("value_int")) return Tensor::scalar_i64(c.ai("value_int", 0));
            if (c.has_attr("value_ints")) { auto v = c.ais("value_ints"); return Tensor::from_i64(v, {int64_t(v.size())}); }
            if (c.has_attr("sparse_value")) c.fail_unsupported("sparse Constant values are not supported");
            if (c.has_attr("value_string")) return Tensor::from_strings({c.as("value_string", "")}, {});
            if (c.has_attr("value_strings")) { auto v = c.astrs("value_strings"); int64_t n = int64_t(v.size()); return Tensor::from_strings(std::move(v), {n}); }
            c.fail("Constant has no value attribute");
        };
        d.infer = [value](OpCtx& c) { Tensor t = value(c); c.set_out(0, t.dtype, t.shape); };
        d.eval = [value](OpCtx& c) { c.set_const(0, value(c)); };
        reg(r, d);
    }
    {
        OpDef d;
        d.op_type = "ConstantOfShape";
        d.host_inputs = {0};
        auto fill = [](OpCtx& c) -> Tensor { const Tensor* t = c.at("value"); return t ? *t : Tensor::from_f32({0.0f}, {1}); };
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
        reg(r, d);
    }
    {
        OpDef d;
        d.op_type = "Range";
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
        reg(r, d);
    }
    // Reshape-like ops: output shape rule + host reshape + device reshape
    auto reshape_like = [&](const std::string& op, std::function<Shape(OpCtx&)> rule, std::vector<int> host_inputs) {
        OpDef d;
        d.op_type = op;
        d.host_inputs = host_inputs;
        d.infer = [rule](OpCtx& c) { c.set_out(0, c.dtype(0), rule(c)); };
        d.eval = [rule](OpCtx& c) { c.set_const(0, c.cval(0).reshaped(rule(c))); };
        d.lower = [](Lc& c) { c.set(0, c.reshape_view(c.x(0), c.out(0).shape)); };
        reg(r, d);
    };
    reshape_like("Reshape", reshape_target, {1});
    reshape_like("Flatten", [](OpCtx& c) {
        int rk = c.rank(0);
        int64_t a = c.ai("axis", 1);
        if (a < -rk || a > rk) c.fail("axis out of range");
        if (a < 0) a += rk;
        int64_t p = 1, q = 1;
        for (int i = 0; i < rk; ++i) (i < a ? p : q) *= c.shape(0)[i];
        return Shape{p, q};
    }, {});
    reshape_like("Squeeze", [](OpCtx& c) {
        std::vector<int64_t> axes = axes_arg(c, 1, "axes");
        const Shape& s = c.shape(0);
        int rk = int(s.size());
        std::vector<bool> drop(rk, false);
        if (axes.empty()) for (int i = 0; i < rk; ++i) drop[i] = s[i] == 1;
        for (int64_t a : axes) {
            int k = c.axis(a, rk);
            if (s[k] != 1) c.fail("cannot squeeze axis " + std::to_string(k) + " of size " + std::to_string(s[k]));
            drop[k] = true;
        }
        Shape o;
        for (int i = 0; i < rk; ++i) if (!drop[i]) o.push_back(s[i]);
        return o;
    }, {1});
    reshape_like("Unsqueeze", [](OpCtx& c) {
        std::vector<int64_t> axes = axes_arg(c, 1, "axes");
        const Shape& s = c.shape(0);
        int orank = int(s.size() + axes.size());
        std::vector<bool> ins(orank, false);
        for (int64_t a : axes) {
            int k = c.axis(a, orank);
            if (ins[k]) c.fail("axis " + std::to_string(k) + " given twice");
            ins[k] = true;
        }
        Shape o;
        size_t j = 0;
        for (int i = 0; i < orank; ++i) o.push_back(ins[i] ? 1 : s[j++]);
        return o;
    }, {1});

    {
        OpDef d;
        d.op_type = "Transpose";
        auto perm_of = [](OpCtx& c) {
            int rk = c.rank(0);
            std::vector<int64_t> p = c.ais("perm");
            if (p.empty()) for (int i = rk - 1; i >= 0; --i) p.push_back(i);
            if (int(p.size()) != rk) c.fail("perm has " + std::to_string(p.size()) + " entries for rank " + std::to_string(rk));
            std::vector<bool> seen(rk, false);
            for (auto& v : p) {
                v = c.axis(v, rk);
                if (seen[v]) c.fail("perm is not a permutation");
                seen[v] = true;
            }
            return p;
        };
        d.infer = [perm_of](OpCtx& c) {
            auto p = perm_of(c);
            Shape o;
            for (auto v : p) o.push_back(c.shape(0)[v]);
            c.set_out(0, c.dtype(0), o);
        };
        d.eval = [perm_of](OpCtx& c) {
            auto p = perm_of(c);
            const Shape& s = c.shape(0);
            Shape o;
            for (auto v : p) o.push_back(s[v]);
            auto st = strides_of(s);
            c.set_const(0, remap(c.cval(0), o, [&](const std::vector<int64_t>& idx) {
                int64_t f = 0;
                for (size_t j = 0; j < idx.size(); ++j) f += idx[j] * st[p[j]];
                return f;
            }));
        };
        d.lower = [perm_of](Lc& c) { c.set(0, transpose_any(c, c.x(0), c.shape(0), perm_of(c))); };
        reg(r, d);
    }
    {
        OpDef d;
        d.op_type = "Concat";
        d.infer = [](OpCtx& c) {
            int rk = c.rank(0);
            int a = c.axis(c.ai("axis", 0), rk);
            Shape o = c.shape(0);
            o[a] = 0;
            for (int i = 0; i < c.nin(); ++i) {
                const Shape& s = c.shape(i);
                if (c.dtype(i) != c.dtype(0)) c.fail("inputs have different dtypes");
                if (int(s.size()) != rk) c.fail("inputs have different ranks");
                for (int k = 0; k < rk; ++k)
                    if (k != a && s[k] != o[k]) c.fail("input " + std::to_string(i) + " has shape " + shape_str(s) + ", incompatible with " + shape_str(c.shape(0)));
                o[a] += s[a];
            }
            c.set_out(0, c.dtype(0), o);
        };
        d.eval = [](OpCtx& c) {
            int rk = c.rank(0);
            int a = c.axis(c.ai("axis", 0), rk);
            const Shape& o = c.out(0).shape;
            Tensor t = Tensor::zeros(c.dtype(0), o);
            size_t es = dtype_size(t.dtype);
            int64_t outer = 1, inner = 1;
            for (int i = 0; i < a; ++i) outer *= o[i];
            for (int i = a + 1; i < rk; ++i) inner *= o[i];
            int64_t off = 0;
            for (int i = 0; i < c.nin(); ++i) {
                const Tensor& x = c.cval(i).cast(t.dtype);
                int64_t len = x.shape[a] * inner;
                if (len == 0) continue;
                for (int64_t q = 0; q < outer; ++q)
                    std::memcpy(t.data() + size_t(q * o[a] * inner + off) * es, x.data() + size_t(q * len) * es, size_t(len) * es);
                off += len;
            }
            c.set_const(0, t);
        };
        d.lower = [](Lc& c) {
            int rk = c.rank(0);
            int a = c.axis(c.ai("axis", 0), rk);
            int gd = ggml_dim(a, rk);
            if (gd < 0) c.fail_unsupported("Concat along a leading axis of a rank-" + std::to_string(rk) + " tensor");
            ggml_tensor* acc = nullptr;
            for (int i = 0; i < c.nin(); ++i) {
                if (c.shape(i)[a] == 0) continue;
                ggml_tensor* t = c.reshape(c.x(i), c.shape(i));
                acc = acc ? G(c.b, ggml_concat, acc, t, gd) : t;
            }
            c.set(0, acc);
        };
        reg(r, d);
    }
    {
        OpDef d;
        d.op_type = "Split";
        d.host_inputs = {1};
        d.infer = [](OpCtx& c) {
            auto sizes = split_sizes(c);
            int a = c.axis(c.ai("axis", 0), c.rank(0));
            for (int i = 0; i < c.nout(); ++i) { Shape s = c.shape(0); s[a] = sizes[i]; c.set_out(i, c.dtype(0), s); }
        };
        d.eval = [](OpCtx& c) {
            auto sizes = split_sizes(c);
            int a = c.axis(c.ai("axis", 0), c.rank(0));
            auto st = strides_of(c.shape(0));
            int64_t off = 0;
            for (int i = 0; i < c.nout(); ++i) {
                Shape s = c.shape(0);
                s[a] = sizes[i];
                int64_t o0 = off;
                c.set_const(i, remap(c.cval(0), s, [&](const std::vector<int64_t>& idx) {
                    int64_t f = flat(idx, st);
                    return f + o0 * st[a];
                }));
                off += sizes[i];
            }
        };
        d.lower = [](Lc& c) {
            auto sizes = split_sizes(c);
            int rk = c.rank(0);
            int a = c.axis(c.ai("axis", 0), rk);
            int gd = ggml_dim(a, rk);
            if (gd < 0) c.fail_unsupported("Split along a leading axis of a rank-" + std::to_string(rk) + " tensor");
            ggml_tensor* x = c.x(0);
            int64_t off = 0;
            for (int i = 0; i < c.nout(); ++i) {
                c.set(i, c.slice(x, gd, off, sizes[i]));
                off += sizes[i];
            }
        };
        reg(r, d);
    }
    {
        OpDef d;
        d.op_type = "Slice";
        d.host_inputs = {1, 2, 3, 4};
        d.infer = [](OpCtx& c) { c.set_out(0, c.dtype(0), slice_spec(c).len); };
        d.eval = [](OpCtx& c) {
            SliceSpec sp = slice_spec(c);
            auto st = strides_of(c.shape(0));
            c.set_const(0, remap(c.cval(0), sp.len, [&](const std::vector<int64_t>& idx) {
                int64_t f = 0;
                for (size_t k = 0; k < idx.size(); ++k) f += (sp.start[k] + idx[k] * sp.step[k]) * st[k];
                return f;
            }));
        };
        d.lower = [](Lc& c) {
            SliceSpec sp = slice_spec(c);
            const Shape& s = c.shape(0);
            int rk = int(s.size());
            ggml_tensor* x = c.x(0);
            Shape cur = s;
            for (int a = 0; a < rk; ++a) {
                if (sp.start[a] == 0 && sp.step[a] == 1 && sp.len[a] == s[a]) continue;
                int gd = ggml_dim(a, rk);
                if (gd > 0 && sp.step[a] > 0) {
                    x = c.slice(x, gd, sp.start[a], sp.len[a], sp.step[a]);
                } else if (gd == 0 && sp.step[a] == 1) {
                    x = c.slice(x, 0, sp.start[a], sp.len[a], 1);
                } else {  // negative steps, steps along the innermost dim, merged dims: gather
                    std::vector<int64_t> idx;
                    for (int64_t k = 0; k < sp.len[a]; ++k) idx.push_back(sp.start[a] + k * sp.step[a]);
                    x = gather_axis(c, x, cur, a, idx);
                }
                cur[a] = sp.len[a];
            }
            c.set(0, x);
        };
        reg(r, d);
    }
    {
        OpDef d;
        d.op_type = "Gather";
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
                if (v < -s[a] || v >= s[a]) c.fail("index " + std::to_string(v) + " is out of range for axis dim " + std::to_string(s[a]));
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
            if (inner == 0) { c.set_const(0, t); return; }
            for (int64_t q = 0; q < outer; ++q)
                for (int64_t k = 0; k < n; ++k)
                    std::memcpy(t.data() + size_t((q * n + k) * inner) * es, x.data() + size_t((q * s[a] + idx[k]) * inner) * es, size_t(inner) * es);
            c.set_const(0, t);
        };
        d.lower = [out_shape, norm_indices](Lc& c) {
            const Shape& s = c.shape(0);
            int a = c.axis(c.ai("axis", 0), int(s.size()));
            if (c.dtype(0) != DType::F32) c.fail_unsupported(std::string("Gather of ") + dtype_name(c.dtype(0)) + " data on the device");
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
            if (outer != 1) c.fail_unsupported("Gather with runtime indices is only supported along the outermost axis");
            // ggml_get_rows needs indices in [0, dim): runtime indices must come straight from a graph
            // input, whose values are range-checked (and negatives wrapped) when they are uploaded
            auto& gin = c.graph().inputs;
            auto pos = std::find(gin.begin(), gin.end(), c.node().inputs[1]);
            if (pos == gin.end()) c.fail_unsupported("Gather with indices computed at runtime (they must be constants or a graph input)");
            int64_t& bound = c.b.index_bound[pos - gin.begin()];
            if (bound && bound != s[a]) c.fail_unsupported("graph input '" + c.in(1).name + "' indexes dims of different sizes");
            bound = s[a];
            int64_t inner = 1;
            for (size_t i = a + 1; i < s.size(); ++i) inner *= s[i];
            ggml_tensor* table = c.reshape(c.x(0), {s[a], inner});
            ggml_tensor* idx = c.reshape(c.x(1), {shape_numel(c.shape(1))});
            c.set(0, c.reshape(G(c.b, ggml_get_rows, table, idx), o));
        };
        reg(r, d);
    }
    {
        OpDef d;
        d.op_type = "Expand";
        d.host_inputs = {1};
        auto out_shape = [](OpCtx& c) {
            Shape o;
            if (!broadcast_shapes(c.shape(0), c.cints(1), o)) c.fail("cannot expand " + shape_str(c.shape(0)) + " to " + shape_str(c.cints(1)));
            return o;
        };
        d.infer = [out_shape](OpCtx& c) { c.set_out(0, c.dtype(0), out_shape(c)); };
        d.eval = [out_shape](OpCtx& c) { c.set_const(0, broadcast_host(c.cval(0), out_shape(c))); };
        d.lower = [out_shape](Lc& c) {
            Shape o = out_shape(c);
            ggml_tensor* x = c.reshape(c.x(0), align_rank(c.shape(0), o.size()));
            if (o.size() > 4 && canonical4(align_rank(c.shape(0), o.size()))[0] != canonical4(o)[0] &&
                canonical4(align_rank(c.shape(0), o.size()))[0] != 1)
                c.fail_unsupported("Expand along merged leading dims of a rank > 4 tensor");
            c.set(0, c.repeat_to(x, to_ne(o)));
        };
        reg(r, d);
    }
    {
        OpDef d;
        d.op_type = "Tile";
        d.host_inputs = {1};
        auto out_shape = [](OpCtx& c) {
            auto rep = c.cints(1);
            if (int(rep.size()) != c.rank(0)) c.fail("repeats has " + std::to_string(rep.size()) + " entries for rank " + std::to_string(c.rank(0)));
            Shape o = c.shape(0);
            for (size_t i = 0; i < o.size(); ++i) {
                if (rep[i] < 0) c.fail("negative repeat");
                o[i] *= rep[i];
            }
            return o;
        };
        d.infer = [out_shape](OpCtx& c) { c.set_out(0, c.dtype(0), out_shape(c)); };
        d.eval = [out_shape](OpCtx& c) {
            const Shape& s = c.shape(0);
            auto st = strides_of(s);
            c.set_const(0, remap(c.cval(0), out_shape(c), [&](const std::vector<int64_t>& idx) {
                int64_t f = 0;
                for (size_t k = 0; k < idx.size(); ++k) f += (idx[k] % s[k]) * st[k];
                return f;
            }));
        };
        d.lower = [out_shape](Lc& c) {
            if (c.rank(0) > 4) c.fail_unsupported("Tile of a rank > 4 tensor");
            c.set(0, c.repeat_to(c.cont(c.x(0)), to_ne(out_shape(c))));
        };
        reg(r, d);
    }
    {
        OpDef d;
        d.op_type = "Pad";
        d.host_inputs = {1, 2, 3};
        d.infer = [](OpCtx& c) {
            PadSpec p = pad_spec(c);
            Shape o = c.shape(0);
            for (size_t i = 0; i < o.size(); ++i) o[i] += p.lo[i] + p.hi[i];
            c.set_out(0, c.dtype(0), o);
        };
        d.eval = [](OpCtx& c) {
            PadSpec p = pad_spec(c);
            const Shape& s = c.shape(0);
            auto st = strides_of(s);
            const Shape& o = c.out(0).shape;
            bool constant = p.mode == "constant";
            Tensor t = remap(c.cval(0), o, [&](const std::vector<int64_t>& idx) {
                int64_t f = 0;
                for (size_t k = 0; k < idx.size(); ++k) {
                    int64_t q = idx[k] - p.lo[k];
                    if (q < 0 || q >= s[k]) {
                        if (constant || s[k] == 0) return int64_t(-1);
                        q = pad_index(q, s[k], p.mode);
                    }
                    f += q * st[k];
                }
                return f;
            });
            if (constant && p.value != 0) {  // fill the padded positions
                std::vector<int64_t> idx(o.size(), 0);
                for (int64_t e = 0; e < t.numel(); ++e) {
                    bool in = true;
                    for (size_t k = 0; k < o.size(); ++k) in &= idx[k] >= p.lo[k] && idx[k] - p.lo[k] < s[k];
                    if (!in) t.setf(e, p.value);
                    for (int dd = int(o.size()) - 1; dd >= 0; --dd) { if (++idx[dd] < o[dd]) break; idx[dd] = 0; }
                }
            }
            c.set_const(0, t);
        };
        d.lower = [](Lc& c) {
            PadSpec p = pad_spec(c);
            int rk = c.rank(0);
            if (rk > 4) c.fail_unsupported("Pad of a rank > 4 tensor");
            ggml_tensor* x = c.x(0);
            Shape cur = c.shape(0);
            // negative pads crop first
            for (int a = 0; a < rk; ++a) {
                int64_t lo = std::min<int64_t>(p.lo[a], 0), hi = std::min<int64_t>(p.hi[a], 0);
                if (lo == 0 && hi == 0) continue;
                x = c.slice(x, ggml_dim(a, rk), -lo, cur[a] + lo + hi);
                cur[a] += lo + hi;
            }
            if (p.mode == "constant") {
                int lp[4] = {0, 0, 0, 0}, rp[4] = {0, 0, 0, 0};
                bool any = false;
                for (int a = 0; a < rk; ++a) {
                    int gd = ggml_dim(a, rk);
                    lp[gd] = int(std::max<int64_t>(p.lo[a], 0));
                    rp[gd] = int(std::max<int64_t>(p.hi[a], 0));
                    any |= lp[gd] || rp[gd];
                }
                if (any) {
                    x = c.cont(x);
                    if (p.value != 0) x = G(c.b, ggml_scale_bias, x, 1.0f, float(-p.value));
                    x = G(c.b, ggml_pad_ext, x, lp[0], rp[0], lp[1], rp[1], lp[2], rp[2], lp[3], rp[3]);
                    if (p.value != 0) x = G(c.b, ggml_scale_bias, x, 1.0f, float(p.value));
                }
            } else {
                for (int a = 0; a < rk; ++a) {
                    int64_t lo = std::max<int64_t>(p.lo[a], 0), hi = std::max<int64_t>(p.hi[a], 0);
                    if (lo == 0 && hi == 0) continue;
                    if (p.mode == "reflect" && (lo >= cur[a] || hi >= cur[a])) c.fail("reflect pads must be smaller than the dim");
                    std::vector<int64_t> idx;
                    for (int64_t k = -lo; k < cur[a] + hi; ++k) idx.push_back(pad_index(k, cur[a], p.mode));
                    x = gather_axis(c, x, cur, a, idx);
                    cur[a] += lo + hi;
                }
            }
            c.set(0, x);
        };
        reg(r, d);
    }
    {
        OpDef d;
        d.op_type = "GatherElements";
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
        reg(r, d);
    }
    {
        OpDef d;
        d.op_type = "GatherND";
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
        reg(r, d);
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
        reg(r, d);
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
        reg(r, d);
    }
    for (const char* w : {"HannWindow", "HammingWindow", "BlackmanWindow"}) {
        OpDef d;
        d.op_type = w;
        d.host_inputs = {0};
        auto dt = [](OpCtx& c) { return DType(c.ai("output_datatype", 1)); };
        d.infer = [dt](OpCtx& c) { c.set_out(0, dt(c), {c.cval(0).geti(0)}); };
        d.eval = [dt](OpCtx& c) {
            int64_t n = c.cval(0).geti(0);
            double den = c.ai("periodic", 1) ? double(n) : double(n - 1);
            std::string op = c.node().op_type;
            Tensor t = Tensor::zeros(dt(c), {n});
            for (int64_t i = 0; i < n; ++i) {
                double x = 2 * M_PI * double(i) / den, v;
                if (op == "HannWindow") v = 0.5 - 0.5 * std::cos(x);
                else if (op == "HammingWindow") v = 25.0 / 46.0 - 21.0 / 46.0 * std::cos(x);
                else v = 0.42 - 0.5 * std::cos(x) + 0.08 * std::cos(2 * x);
                t.setf(i, v);
            }
            c.set_const(0, t);
        };
        reg(r, d);
    }
    {
        OpDef d;
        d.op_type = "CumSum";
        d.host_inputs = {1};
        d.infer = infer_same;
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
            for (int i = 0; i < rk; ++i) if (i != a) perm.push_back(i);
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
        reg(r, d);
    }
    {
        OpDef d;
        d.op_type = "Compress";
        d.host_inputs = {1};
        auto plan = [](OpCtx& c, int& axis, std::vector<int64_t>& keep, Shape& out) {
            auto cond = c.cints(1);
            bool has_axis = c.has_attr("axis");
            Shape s = c.shape(0);
            axis = has_axis ? c.axis(c.ai("axis", 0), int(s.size())) : 0;
            int64_t dim = has_axis ? s[axis] : shape_numel(s);
            for (int64_t k = 0; k < std::min<int64_t>(dim, int64_t(cond.size())); ++k)
                if (cond[k]) keep.push_back(k);
            if (has_axis) { out = s; out[axis] = int64_t(keep.size()); }
            else out = {int64_t(keep.size())};
        };
        d.infer = [plan](OpCtx& c) { int a; std::vector<int64_t> k; Shape o; plan(c, a, k, o); c.set_out(0, c.dtype(0), o); };
        d.lower = [plan](Lc& c) {
            require_float(c, 0);
            int a;
            std::vector<int64_t> keep;
            Shape o;
            plan(c, a, keep, o);
            if (c.has_attr("axis")) c.set(0, gather_axis(c, c.x(0), c.shape(0), a, keep));
            else c.set(0, gather_flat(c, c.x(0), c.shape(0), keep, o));
        };
        reg(r, d);
    }
    {
        OpDef d;
        d.op_type = "ReverseSequence";
        d.host_inputs = {1};
        d.infer = infer_same;
        d.lower = [](Lc& c) {  // a gather of single elements with host-computed indices
            require_float(c, 0);
            const Shape& s = c.shape(0);
            int bax = int(c.ai("batch_axis", 1)), tax = int(c.ai("time_axis", 0));
            auto lens = c.cints(1);
            auto st = strides_of(s);
            std::vector<int64_t> idx(size_t(shape_numel(s)));
            std::vector<int64_t> pos(s.size(), 0);
            for (size_t e = 0; e < idx.size(); ++e) {
                std::vector<int64_t> q = pos;
                int64_t L = lens.at(size_t(pos[bax]));
                if (pos[tax] < L) q[tax] = L - 1 - pos[tax];
                idx[e] = flat(q, st);
                for (int k = int(s.size()) - 1; k >= 0; --k) { if (++pos[k] < s[k]) break; pos[k] = 0; }
            }
            c.set(0, gather_flat(c, c.x(0), s, idx, s));
        };
        reg(r, d);
    }
    {
        OpDef d;
        d.op_type = "OneHot";
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
        reg(r, d);
    }
    // DepthToSpace / SpaceToDepth as reshape -> transpose -> reshape
    for (bool d2s : {true, false}) {
        OpDef d;
        d.op_type = d2s ? "DepthToSpace" : "SpaceToDepth";
        auto plan = [d2s](OpCtx& c, Shape& mid, std::vector<int64_t>& perm, Shape& out) {
            const Shape& s = c.shape(0);
            if (s.size() != 4) c.fail("input must be 4-D");
            int64_t b = c.ai("blocksize", 0);
            if (b <= 0) c.fail("blocksize must be positive");
            int64_t N = s[0], C = s[1], H = s[2], W = s[3];
            if (d2s) {
                if (C % (b * b)) c.fail("channels not divisible by blocksize^2");
                bool crd = c.as("mode", "DCR") == "CRD";
                mid = crd ? Shape{N, C / (b * b), b, b, H, W} : Shape{N, b, b, C / (b * b), H, W};
                perm = crd ? std::vector<int64_t>{0, 1, 4, 2, 5, 3} : std::vector<int64_t>{0, 3, 4, 1, 5, 2};
                out = {N, C / (b * b), H * b, W * b};
            } else {
                if (H % b || W % b) c.fail("spatial dims not divisible by blocksize");
                mid = {N, C, H / b, b, W / b, b};
                perm = {0, 3, 5, 1, 2, 4};
                out = {N, C * b * b, H / b, W / b};
            }
        };
        d.infer = [plan](OpCtx& c) { Shape m, o; std::vector<int64_t> p; plan(c, m, p, o); c.set_out(0, c.dtype(0), o); };
        d.eval = [plan](OpCtx& c) {
            Shape m, o;
            std::vector<int64_t> p;
            plan(c, m, p, o);
            auto st = strides_of(m);
            Shape tout;
            for (auto v : p) tout.push_back(m[v]);
            Tensor t = remap(c.cval(0).reshaped(m), tout, [&](const std::vector<int64_t>& idx) {
                int64_t f = 0;
                for (size_t j = 0; j < idx.size(); ++j) f += idx[j] * st[p[j]];
                return f;
            });
            c.set_const(0, t.reshaped(o));
        };
        d.lower = [plan](Lc& c) {
            Shape m, o;
            std::vector<int64_t> p;
            plan(c, m, p, o);
            Shape tout;
            for (auto v : p) tout.push_back(m[v]);
            ggml_tensor* t = transpose_any(c, c.reshape(c.x(0), m), m, p);
            c.set(0, c.reshape(t, o));
        };
        reg(r, d);
    }
}

}  // namespace onnx2ggml
