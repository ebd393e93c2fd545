#include "ops/common.h"

#include <cstring>

namespace onnx2ggml {

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
        if (first) { out = s; first = false; continue; }
        Shape r;
        if (!broadcast_shapes(out, s, r)) c.fail("input shapes " + shape_str(out) + " and " + shape_str(s) + " cannot be broadcast");
        out = r;
    }
    return out;
}

ggml_tensor* expand_to_out(LowerCtx& c, int i) {
    const Shape& o = c.out(0).shape;
    Shape s = align_rank(operand_shape(c, i), o.size());
    if (o.size() > 4 && s != o && shape_numel(s) != 1) c.fail_unsupported("broadcasting of a rank > 4 tensor in a custom kernel");
    ggml_tensor* t = c.reshape(c.x(i), s);
    return c.cont(c.repeat_to(t, to_ne(o)));
}

void require_float(LowerCtx& c, int i) {
    if (ggml_type_for(c.dtype(i)) != GGML_TYPE_F32)
        c.fail_unsupported(std::string("device tensors of dtype ") + dtype_name(c.dtype(i)) + " are not supported (only float32 and bool)");
}

Attr int_attr(int64_t v) { Attr a; a.kind = Attr::Int; a.i = v; return a; }
Attr ints_attr(std::vector<int64_t> v) { Attr a; a.kind = Attr::Ints; a.ints = std::move(v); return a; }

Node axes_node(OpCtx& c, const std::string& op, int x, int64_t axis, int out) {
    if (c.graph().opset("") >= 13) return c.make_node(op, {x, c.new_const(Tensor::from_i64({axis}, {1}), c.node().name + "_axes")}, {out});
    Node n = c.make_node(op, {x}, {out});
    n.attrs["axes"] = ints_attr({axis});
    return n;
}

void require_index(OpCtx& c, int i) {
    if (c.has(i) && (dtype_is_float(c.dtype(i)) || c.dtype(i) == DType::Bool || c.dtype(i) == DType::Undefined))
        c.fail("input " + std::to_string(i) + " ('" + c.in(i).name + "') holds indices and must be an integer tensor, not " + dtype_name(c.dtype(i)));
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
        for (size_t d = 0; d < rank; ++d) if (shapes[j][d] == 1) s[d] = 0;
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
    if (m.sb[m.sb.size() - 2] != m.K) c.fail("inner dims differ: " + shape_str(c.shape(ia)) + " x " + shape_str(c.shape(ib)));
    Shape ba(m.sa.begin(), m.sa.end() - 2), bb(m.sb.begin(), m.sb.end() - 2);
    if (!broadcast_shapes(ba, bb, m.bo)) c.fail("batch dims " + shape_str(ba) + " and " + shape_str(bb) + " cannot be broadcast");
    m.out = m.bo;
    if (!va) m.out.push_back(m.M);
    if (!vb) m.out.push_back(m.N);
    return m;
}

void for_each_matmul_batch(const MatDims& m, const std::function<void(int64_t, int64_t, int64_t)>& f) {
    Shape xa = align_rank(Shape(m.sa.begin(), m.sa.end() - 2), m.bo.size()), xb = align_rank(Shape(m.sb.begin(), m.sb.end() - 2), m.bo.size());
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

}  // namespace onnx2ggml
