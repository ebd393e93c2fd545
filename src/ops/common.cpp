#include "ops/common.h"

#include <algorithm>
#include <array>
#include <limits>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>

#include "o2g_kernels.h"

namespace onnx2ggml::core {

using Lc = LowerCtx;

Tensor broadcast_host(const Tensor& t, const Shape& to) {
    Shape s = align_rank(t.shape, to.size());
    auto st = strides_of(s), so = strides_of(to);
    Tensor r = Tensor::zeros(t.dtype, to);
    size_t es = dtype_size(t.dtype);
    for (int64_t i = 0; i < r.numel(); ++i) {
        int64_t rem = i, src = 0;
        for (size_t k = 0; k < to.size(); ++k) {
            int64_t idx = rem / so[k];
            rem %= so[k];
            if (s[k] != 1) src += idx * st[k];
        }
        std::memcpy(r.data() + size_t(i) * es, t.data() + size_t(src) * es, es);
    }
    return r;
}

std::vector<int64_t> strides_of(const Shape& s) {
    std::vector<int64_t> st(s.size(), 1);
    for (int i = int(s.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * s[i + 1];
    return st;
}

Shape operand_shape(OpCtx& c, int i) {
    Shape s = c.shape(i);
    if (i == 1 && c.opset() < 7 && c.ai("broadcast", 0) == 1) {
        int ra = c.rank(0);
        int64_t axis = c.has_attr("axis") ? c.ai("axis", 0) : ra - int64_t(s.size());
        if (axis < 0) axis += ra;
        if (axis < 0 || axis + int64_t(s.size()) > ra) c.fail("legacy broadcast: axis out of range");
        Shape r(size_t(axis), 1);
        r.insert(r.end(), s.begin(), s.end());
        while (int(r.size()) < ra) r.push_back(1);
        return r;
    }
    return s;
}

Shape broadcast_all(OpCtx& c) {
    Shape out;
    bool first = true;
    for (int i = 0; i < c.nin(); ++i) {
        if (!c.has(i)) continue;
        Shape s = operand_shape(c, i);
        if (first) {
            out = s;
            first = false;
            continue;
        }
        Shape r;
        if (!broadcast_shapes(out, s, r))
            c.fail("input shapes " + shape_str(out) + " and " + shape_str(s) + " cannot be broadcast");
        out = r;
    }
    return out;
}

ggml_tensor* expand_to_out(LowerCtx& c, int i) {
    const Shape& o = c.out(0).shape;
    Shape s = align_rank(operand_shape(c, i), o.size());
    if (o.size() > 4 && s != o && shape_numel(s) != 1)
        c.fail_unsupported("broadcasting of a rank > 4 tensor in a custom kernel");
    ggml_tensor* t = c.reshape(c.x(i), s);
    return c.cont(c.repeat_to(t, to_ne(o)));
}

void require_float(LowerCtx& c, int i) {
    if (ggml_type_for(c.dtype(i)) != GGML_TYPE_F32)
        c.fail_unsupported(std::string("device tensors of dtype ") + dtype_name(c.dtype(i)) +
                           " are not supported (only float32 and bool)");
}

Attr int_attr(int64_t v) {
    Attr a;
    a.kind = Attr::Int;
    a.i = v;
    return a;
}
Attr ints_attr(std::vector<int64_t> v) {
    Attr a;
    a.kind = Attr::Ints;
    a.ints = std::move(v);
    return a;
}

Node axes_node(OpCtx& c, const std::string& op, int x, int64_t axis, int out) {
    if (c.graph().opset("") >= 13)
        return c.make_node(op, {x, c.new_const(Tensor::from_i64({axis}, {1}), c.node().name + "_axes")}, {out});
    Node n = c.make_node(op, {x}, {out});
    n.attrs["axes"] = ints_attr({axis});
    return n;
}

void require_index(OpCtx& c, int i) {
    if (c.has(i) && (dtype_is_float(c.dtype(i)) || c.dtype(i) == DType::Bool || c.dtype(i) == DType::Undefined))
        c.fail("input " + std::to_string(i) + " ('" + c.in(i).name +
               "') holds indices and must be an integer tensor, not " + dtype_name(c.dtype(i)));
}

Tensor eval_elementwise(OpCtx& c, DType out_type, const FloatFn& ff, const IntFn& fi) {
    Shape out = broadcast_all(c);
    std::vector<const Tensor*> ins;
    std::vector<Shape> shapes;
    bool all_int = true;
    for (int i = 0; i < c.nin(); ++i) {
        if (!c.has(i)) continue;
        ins.push_back(&c.cval(i));
        shapes.push_back(align_rank(operand_shape(c, i), out.size()));
        all_int &= !dtype_is_float(ins.back()->dtype);
    }
    bool use_int = all_int && fi;
    Tensor r = Tensor::zeros(out_type, out);
    int64_t n = r.numel();
    size_t k = ins.size(), rank = out.size();
    std::vector<std::vector<int64_t>> st(k);
    for (size_t j = 0; j < k; ++j) {
        auto s = strides_of(shapes[j]);
        for (size_t d = 0; d < rank; ++d)
            if (shapes[j][d] == 1) s[d] = 0;
        st[j] = s;
    }
    std::vector<int64_t> idx(rank, 0), off(k, 0);
    std::vector<double> fv(k);
    std::vector<int64_t> iv(k);
    for (int64_t e = 0; e < n; ++e) {
        for (size_t j = 0; j < k; ++j) {
            if (use_int) iv[j] = ins[j]->geti(off[j]);
            else fv[j] = ins[j]->getf(off[j]);
        }
        if (use_int) r.seti(e, fi(iv.data()));
        else r.setf(e, ff(fv.data()));
        for (int d = int(rank) - 1; d >= 0; --d) {  // advance the multi-index
            idx[d]++;
            for (size_t j = 0; j < k; ++j) off[j] += st[j][d];
            if (idx[d] < out[d]) break;
            for (size_t j = 0; j < k; ++j) off[j] -= st[j][d] * out[d];
            idx[d] = 0;
        }
    }
    return r;
}

std::vector<double> to_f64(const Tensor& t) {
    std::vector<double> r(size_t(t.numel()));
    for (size_t i = 0; i < r.size(); ++i) r[i] = t.getf(int64_t(i));
    return r;
}

MatDims matmul_dims(OpCtx& c, int ia, int ib) {
    MatDims m;
    m.sa = c.shape(ia), m.sb = c.shape(ib);
    if (m.sa.empty() || m.sb.empty()) c.fail("MatMul operands must have rank >= 1");
    bool va = m.sa.size() == 1, vb = m.sb.size() == 1;
    if (va) m.sa.insert(m.sa.begin(), 1);
    if (vb) m.sb.push_back(1);
    m.M = m.sa[m.sa.size() - 2], m.K = m.sa.back(), m.N = m.sb.back();
    if (m.sb[m.sb.size() - 2] != m.K)
        c.fail("inner dims differ: " + shape_str(c.shape(ia)) + " x " + shape_str(c.shape(ib)));
    Shape ba(m.sa.begin(), m.sa.end() - 2), bb(m.sb.begin(), m.sb.end() - 2);
    if (!broadcast_shapes(ba, bb, m.bo))
        c.fail("batch dims " + shape_str(ba) + " and " + shape_str(bb) + " cannot be broadcast");
    m.out = m.bo;
    if (!va) m.out.push_back(m.M);
    if (!vb) m.out.push_back(m.N);
    return m;
}

void for_each_matmul_batch(const MatDims& m, const std::function<void(int64_t, int64_t, int64_t)>& f) {
    Shape xa = align_rank(Shape(m.sa.begin(), m.sa.end() - 2), m.bo.size()),
          xb = align_rank(Shape(m.sb.begin(), m.sb.end() - 2), m.bo.size());
    auto sta = strides_of(xa), stb = strides_of(xb);
    for (int64_t b = 0, nb = shape_numel(m.bo); b < nb; ++b) {
        int64_t oa = 0, ob = 0, rem = b;
        for (size_t k = m.bo.size(); k-- > 0;) {
            int64_t v = rem % m.bo[k];
            rem /= m.bo[k];
            if (xa[k] != 1) oa += v * sta[k];
            if (xb[k] != 1) ob += v * stb[k];
        }
        f(b, oa, ob);
    }
}

// ---- host data movement -------------------------------------------------------------------

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
    for (int i = 0; i < r; ++i)
        if (s[i] != 1) keep.push_back(i);
    std::vector<int64_t> p2;
    for (int j = 0; j < r; ++j)
        if (s[perm[j]] != 1) p2.push_back(std::find(keep.begin(), keep.end(), int(perm[j])) - keep.begin());
    Shape s2;
    for (int i : keep) s2.push_back(s[i]);
    // merge input dims i, i+1 that are adjacent in the output order
    std::vector<std::vector<int>> groups;  // groups of input dims, in input order
    std::vector<int> group_of(s2.size());
    for (size_t j = 0; j < p2.size(); ++j) {
        if (j > 0 && p2[j] == p2[j - 1] + 1)
            groups[group_of[p2[j - 1]]].push_back(int(p2[j])), group_of[p2[j]] = group_of[p2[j - 1]];
        else {
            groups.push_back({int(p2[j])});
            group_of[p2[j]] = int(groups.size()) - 1;
        }
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
    if (mp.size() <= 4) return c.reshape(c.cont(c.permute(c.reshape(x, ms), mp)), out);
    // Five or more dims that cannot merge into four (swin's qkv split [windows, tokens, 3, heads, d] ->
    // [3, windows, heads, tokens, d]): cut along one dim d; each slice is a 4-D strided view of the input,
    // permuted to the output's order, made contiguous and copied into its (strided) place in the output.
    // d is neither the input's nor the output's innermost dim (ggml views are dense in ne[0]), the
    // smallest such (fewest slices). Rank 6 and more: only when the outermost dim stays outermost, by
    // contiguous slices transposed recursively.
    ggml_tensor* xc = c.cont(c.reshape(x, {shape_numel(ms)}));
    size_t es = ggml_element_size(xc);
    int R = int(mp.size());
    if ((R > 5 && mp[0] != 0) || (xc->type != GGML_TYPE_F32 && xc->type != GGML_TYPE_I32) ||
        size_t(shape_numel(ms)) * es > size_t(std::numeric_limits<int32_t>::max()))  // ggml_set's types, offsets
        c.fail_unsupported("Transpose of rank " + std::to_string(r) + " cannot be folded to 4 ggml dims");
    std::vector<int64_t> st = strides_of(ms), mo;  // input strides; the output's shape and strides
    for (int64_t v : mp) mo.push_back(ms[size_t(v)]);
    std::vector<int64_t> ost = strides_of(mo);
    ggml_tensor* acc = G(c.b, ggml_new_tensor_1d, xc->type, shape_numel(ms));
    if (R > 5) {
        Shape inner(ms.begin() + 1, ms.end());
        std::vector<int64_t> pin;
        for (int j = 1; j < R; ++j) pin.push_back(mp[size_t(j)] - 1);
        int64_t n = shape_numel(inner);
        for (int64_t i = 0; i < ms[0]; ++i) {
            ggml_tensor* t = transpose_any(c, G(c.b, ggml_view_1d, xc, n, size_t(i * n) * es), inner, pin);
            acc = G(c.b, ggml_set_1d_inplace, acc, c.reshape(c.cont(t), {n}), size_t(i * n) * es);
        }
        return c.reshape(acc, out);
    }
    int d = -1, jd = -1;  // the dim cut (input numbering) and its output position
    for (int j = 0; j < 4; ++j)
        if (mp[size_t(j)] != 4 && (d < 0 || ms[size_t(mp[size_t(j)])] < ms[size_t(d)])) d = int(mp[size_t(j)]), jd = j;
    std::vector<int> S, O;  // the other dims in input order, and their output positions in output order
    for (int k = 0; k < 5; ++k)
        if (k != d) S.push_back(k);
    for (int j = 0; j < 5; ++j)
        if (j != jd) O.push_back(j);
    std::vector<int64_t> perm4;  // ONNX perm from S's order to the output's
    for (int j : O) perm4.push_back(std::find(S.begin(), S.end(), int(mp[size_t(j)])) - S.begin());
    for (int64_t i = 0; i < ms[size_t(d)]; ++i) {
        ggml_tensor* src = G(c.b, ggml_view_4d, xc, ms[size_t(S[3])], ms[size_t(S[2])], ms[size_t(S[1])],
                             ms[size_t(S[0])], size_t(st[size_t(S[2])]) * es, size_t(st[size_t(S[1])]) * es,
                             size_t(st[size_t(S[0])]) * es, size_t(i * st[size_t(d)]) * es);
        ggml_tensor* t = c.cont(c.permute(src, perm4));
        acc = G(c.b, ggml_set_inplace, acc, t, size_t(ost[size_t(O[2])]) * es, size_t(ost[size_t(O[1])]) * es,
                size_t(ost[size_t(O[0])]) * es, size_t(i * ost[size_t(jd)]) * es);
    }
    return c.reshape(acc, out);
}

// Gathers single elements: out (shape `out`) [e] = x_flat[idx[e]] (indices known at compile time).
ggml_tensor* gather_flat(Lc& c, ggml_tensor* x, const Shape& s, const std::vector<int64_t>& idx, const Shape& out) {
    x = c.reshape(x, {shape_numel(s), 1});
    Tensor it = Tensor::zeros(DType::I32, {int64_t(idx.size())});
    for (size_t k = 0; k < idx.size(); ++k) it.seti(int64_t(k), idx[k]);
    return c.reshape(G(c.b, ggml_get_rows, x, c.constant(it, GGML_TYPE_I32)), out);
}

// ---- spatial geometry shared by Conv, ConvTranspose and the pools ------------------------

// Per-spatial-dim attribute: `n` values in [lo, 2^30] (absurd values end here, not in overflow).
void check_dims(OpCtx& c, const char* name, const std::vector<int64_t>& v, size_t n, int64_t lo) {
    if (v.size() != n)
        c.fail(std::string(name) + " has " + std::to_string(v.size()) + " values, expected " + std::to_string(n));
    for (int64_t x : v)
        if (x < lo || x > (int64_t(1) << 30))
            c.fail(std::string(name) + " value " + std::to_string(x) + " is out of range");
}

Geometry conv_geometry(OpCtx& c, const std::vector<int64_t>& kernel, bool ceil_mode) {
    Geometry g;
    const Shape& x = c.shape(0);
    if (x.size() < 3) c.fail("input must have rank >= 3, got " + shape_str(x));
    g.nsp = int(x.size()) - 2;
    g.in.assign(x.begin() + 2, x.end());
    g.k = kernel;
    if (int(g.k.size()) != g.nsp)
        c.fail("kernel_shape has " + std::to_string(g.k.size()) + " dims for " + std::to_string(g.nsp) +
               " spatial dims");
    g.s = c.ais("strides", std::vector<int64_t>(g.nsp, 1));
    g.d = c.ais("dilations", std::vector<int64_t>(g.nsp, 1));
    std::vector<int64_t> pads = c.ais("pads", std::vector<int64_t>(2 * g.nsp, 0));
    check_dims(c, "kernel_shape", g.k, g.nsp, 1);
    check_dims(c, "strides", g.s, g.nsp, 1);
    check_dims(c, "dilations", g.d, g.nsp, 1);
    check_dims(c, "pads", pads, 2 * g.nsp, 0);
    std::string ap = c.as("auto_pad", "NOTSET");
    g.pb.assign(pads.begin(), pads.begin() + g.nsp);
    g.pe.assign(pads.begin() + g.nsp, pads.end());
    g.out.resize(g.nsp);
    for (int i = 0; i < g.nsp; ++i) {
        if (g.s[i] <= 0 || g.d[i] <= 0 || g.k[i] <= 0) c.fail("strides, dilations and kernel dims must be positive");
        int64_t ek = (g.k[i] - 1) * g.d[i] + 1;
        if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
            g.out[i] = (g.in[i] + g.s[i] - 1) / g.s[i];
            int64_t total = std::max<int64_t>(0, (g.out[i] - 1) * g.s[i] + ek - g.in[i]);
            g.pb[i] = ap == "SAME_UPPER" ? total / 2 : total - total / 2;
            g.pe[i] = total - g.pb[i];
        } else {
            if (ap == "VALID") g.pb[i] = g.pe[i] = 0;
            else if (ap != "NOTSET") c.fail("unknown auto_pad '" + ap + "'");
            int64_t span = g.in[i] + g.pb[i] + g.pe[i] - ek;
            if (span < 0) c.fail("kernel is larger than the padded input");
            g.out[i] = ceil_mode ? (span + g.s[i] - 1) / g.s[i] + 1 : span / g.s[i] + 1;
            if (ceil_mode && (g.out[i] - 1) * g.s[i] >= g.in[i] + g.pb[i]) g.out[i]--;  // last window must start inside
        }
    }
    return g;
}

Shape conv_output_shape(OpCtx& c, const Shape& ws) {
    if (ws.size() != c.shape(0).size() || ws.size() < 3)
        c.fail("weight rank " + std::to_string(ws.size()) + " must equal the input rank (>= 3)");
    std::vector<int64_t> kernel = c.ais("kernel_shape", std::vector<int64_t>(ws.begin() + 2, ws.end()));
    if (kernel != std::vector<int64_t>(ws.begin() + 2, ws.end()))
        c.fail("kernel_shape differs from the weight's spatial dims");
    Geometry g = conv_geometry(c, kernel, false);
    int64_t group = c.ai("group", 1);
    if (group <= 0 || c.shape(0)[1] != ws[1] * group)
        c.fail("input channels " + std::to_string(c.shape(0)[1]) + " != weight channels " + std::to_string(ws[1]) +
               " x group " + std::to_string(group));
    Shape o = {c.shape(0)[0], ws[0]};
    o.insert(o.end(), g.out.begin(), g.out.end());
    return o;
}

int64_t prod(const std::vector<int64_t>& v) {
    int64_t n = 1;
    for (int64_t d : v) n *= d;
    return n;
}

std::vector<double> conv_host(OpCtx& c, const Shape& ws, const std::vector<double>& x, const std::vector<double>& w,
                              const std::vector<double>* bias) {
    const Shape& xs = c.shape(0);
    Geometry g = conv_geometry(c, std::vector<int64_t>(ws.begin() + 2, ws.end()), false);
    int64_t N = xs[0], C = xs[1], M = ws[0], group = c.ai("group", 1), cg = C / group, mg = M / group;
    int64_t isz = prod(g.in), osz = prod(g.out), ksz = prod(g.k);
    std::vector<double> y(size_t(N * M * osz), 0.0);
    // input offset (or -1 when in the padding) per (output position, kernel position)
    std::vector<int64_t> off(size_t(osz * ksz));
    for_grid(g.out, [&](int64_t op, const std::vector<int64_t>& o) {
        for_grid(g.k, [&](int64_t kp, const std::vector<int64_t>& k) {
            int64_t f = 0;
            for (int i = 0; i < g.nsp; ++i) {
                int64_t p = o[i] * g.s[i] - g.pb[i] + k[i] * g.d[i];
                if (p < 0 || p >= g.in[i]) {
                    f = -1;
                    break;
                }
                f = f * g.in[i] + p;
            }
            off[size_t(op * ksz + kp)] = f;
        });
    });
    for (int64_t n = 0; n < N; ++n)
        for (int64_t m = 0; m < M; ++m) {
            int64_t gi = m / mg;
            for (int64_t op = 0; op < osz; ++op) {
                double acc = bias ? (*bias)[size_t(m)] : 0.0;
                for (int64_t ci = 0; ci < cg; ++ci) {
                    const double* xp = x.data() + (n * C + gi * cg + ci) * isz;
                    const double* wp = w.data() + (m * cg + ci) * ksz;
                    const int64_t* of = off.data() + op * ksz;
                    for (int64_t kp = 0; kp < ksz; ++kp)
                        if (of[kp] >= 0) acc += xp[of[kp]] * wp[kp];
                }
                y[size_t((n * M + m) * osz + op)] = acc;
            }
        }
    return y;
}

}  // namespace onnx2ggml::core
