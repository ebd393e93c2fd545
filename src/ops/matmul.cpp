// Matrix products and linear algebra: MatMul, Gemm (ggml_mul_mat), Einsum (any equation: ellipsis,
// broadcasting, diagonals, implicit output) and Det, the last two computed by their host evaluators
// (folding, or host kernels at run time, lower/host_kernel.h).
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "o2g_kernels.h"
#include "ops/common.h"

namespace onnx2ggml::core {
namespace {

using Lc = LowerCtx;

// ---- matmul ---------------------------------------------------------------------------

// t contiguous with row-major strides: ggml calls a tensor contiguous whatever the strides of its
// size-1 dims (a permuted [K = 1, N] operand keeps nb[0] > nb[1]), which ggml_mul_mat rejects as
// transposed; a reshape to its own shape is then a free view with the row-major strides.
ggml_tensor* dense(Lc& c, ggml_tensor* t) {
    t = c.cont(t);
    size_t nb = ggml_type_size(t->type);
    bool row_major = true;
    for (int i = 0; i < GGML_MAX_DIMS; nb *= size_t(t->ne[i]), ++i) row_major = row_major && t->nb[i] == nb;
    return row_major ? t : G(c.b, ggml_reshape_4d, t, t->ne[0], t->ne[1], t->ne[2], t->ne[3]);
}

// The right-hand side b ([.., K, N] of ONNX shape sb, or [.., N, K] when trans_b) of a product computed
// on the backend, as ggml_mul_mat's first operand: B^T as [.., N, K] (ggml ne [K, N, ..]), a view where
// possible (ggml_mul_mat reads its first operand through its strides: only the K dim must be dense).
ggml_tensor* rhs_operand(Lc& c, ggml_tensor* b, const Shape& sb, bool trans_b) {
    ggml_tensor* x = c.reshape(b, sb);
    if (!trans_b) {
        std::vector<int64_t> p;
        for (size_t i = 0; i < sb.size(); ++i) p.push_back(int64_t(i));
        std::swap(p[sb.size() - 1], p[sb.size() - 2]);
        x = c.permute(x, p);
    }
    return x->nb[0] != ggml_type_size(x->type) ? dense(c, x) : x;
}

// C = A @ B for ggml tensors given ONNX shapes of rank >= 2 (ONNX MatMul semantics, batch broadcast).
ggml_tensor* matmul(Lc& c, int ia, int ib, Shape sa, Shape sb, bool trans_a, bool trans_b) {
    // x = B^T as [.., N, K] (ggml ne [K, N]); y = A as [.., M, K]
    ggml_tensor* x = c.is_const(ib) ? c.matrix_weight(ib, sb, !trans_b) : rhs_operand(c, c.x(ib), sb, trans_b);
    if (trans_b) std::swap(sb[sb.size() - 1], sb[sb.size() - 2]);  // sb now [.., K, N]
    ggml_tensor* y;
    if (c.is_const(ia) && trans_a) {
        y = c.constant(c.cval(ia).reshaped(sa).transposed_last2());
    } else {
        y = c.reshape(c.x(ia), sa);
        if (trans_a) {
            std::vector<int64_t> p;
            for (size_t i = 0; i < sa.size(); ++i) p.push_back(int64_t(i));
            std::swap(p[sa.size() - 1], p[sa.size() - 2]);
            y = c.permute(y, p);
        }
        y = dense(c, y);
    }
    if (trans_a) std::swap(sa[sa.size() - 1], sa[sa.size() - 2]);
    // batch broadcast: y must cover the full batch; x broadcasts inside ggml_mul_mat
    Shape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2), bo;
    if (!broadcast_shapes(ba, bb, bo))
        c.fail("batch dims " + shape_str(ba) + " and " + shape_str(bb) + " cannot be broadcast");
    if (bo.size() > 2) c.fail_unsupported("MatMul with more than 2 batch dims");
    Shape full_a = bo;
    full_a.push_back(sa[sa.size() - 2]);
    full_a.push_back(sa.back());
    if (align_rank(ba, bo.size()) != bo) y = c.repeat_to(c.reshape(y, align_rank(sa, full_a.size())), to_ne(full_a));
    Shape xb = align_rank(bb, bo.size());
    Shape xs = xb;
    xs.push_back(sb.back());
    xs.push_back(sb[sb.size() - 2]);
    x = c.reshape(x, xs);
    // a quantized weight shared by every batch: one product over the batches' rows together, y at most 3-D (ggml's
    // repacked CPU kernels for quantized weights, o2g_runtime::place_cpu_extra, take no 4-D right operand)
    if (ggml_is_quantized(x->type) && ggml_n_dims(x) <= 2 && y->ne[3] > 1) {
        ggml_tensor* r = G(c.b, ggml_mul_mat, x, G(c.b, ggml_reshape_3d, y, y->ne[0], y->ne[1], y->ne[2] * y->ne[3]));
        return G(c.b, ggml_reshape_4d, r, r->ne[0], y->ne[1], y->ne[2], y->ne[3]);
    }
    return G(c.b, ggml_mul_mat, x, y);
}

// o2g.Attention(q, kt, v, mask?; scale, shape, rows, out_shape) of src/passes/fuse_softmax.cpp
// (chunk_attention): softmax(q @ kt * scale + mask) @ v over blocks of `rows` query rows. Each block is
// what the unfused nodes compute for those rows (their own lowerings: q's rows made dense, kt and v read
// as there, the mask as SoftmaxExt adds it in `shape`), then copied into its rows of the output; the
// scores of one block are freed before the next block's are made.
void lower_attention(Lc& c) {
    Shape sq = c.shape(0), skt = c.shape(1), sv = c.shape(2), sm = c.ais("shape");
    size_t rq = sq.size(), rm = sm.size();
    int64_t M = sq[rq - 2], N = skt.back(), rows = c.ai("rows", M);
    if (rows < 1 || rm < 2 || sm[rm - 2] != M || sm[rm - 1] != N) internal_error(c.where() + ": bad attention shape");
    ggml_tensor* kx = rhs_operand(c, c.x(1), skt, false);  // [.., N, K]
    ggml_tensor* vx = rhs_operand(c, c.x(2), sv, false);   // [.., D, N]
    ggml_tensor* q = c.reshape(c.x(0), sq);
    Tensor mask;
    int64_t mask_outer = 0;
    if (c.has(3)) {  // broadcast over the last two dims, as SoftmaxExt does; sliced by rows per block
        Shape t = align_rank(c.shape(3), rm);
        t[rm - 2] = M;
        t[rm - 1] = N;
        mask = broadcast_host(c.cval(3), t).cast(DType::F32);
        mask_outer = shape_numel(t) / (M * N);
    }
    float scale = c.af("scale", 1.0f);
    std::vector<ggml_tensor*> parts;
    for (int64_t m0 = 0; m0 < M; m0 += rows) {
        int64_t mc = std::min(rows, M - m0);
        ggml_tensor* qc = dense(c, c.slice(q, 1, m0, mc));
        ggml_tensor* s = G(c.b, ggml_mul_mat, kx, qc);  // [.., mc, N]
        Shape ms = sm;
        ms[rm - 2] = mc;
        s = c.reshape(s, ms);
        ggml_tensor* mk = nullptr;
        if (mask_outer > 0) {
            Shape bs = align_rank(c.shape(3), rm);
            bs[rm - 2] = mc;
            bs[rm - 1] = N;
            Tensor blk = Tensor::zeros(DType::F32, bs);
            for (int64_t o = 0; o < mask_outer; ++o)
                std::copy_n(mask.ptr<float>() + (o * M + m0) * N, mc * N, blk.ptr<float>() + o * mc * N);
            mk = c.constant(blk);
        }
        ggml_tensor* pb = G(c.b, ggml_soft_max_ext, s, mk, scale, 0.0f);
        Shape ps(sv.begin(), sv.end() - 2);
        ps.push_back(mc);
        ps.push_back(N);
        parts.push_back(G(c.b, ggml_mul_mat, vx, c.reshape(pb, ps)));  // [.., mc, D]
    }
    // each block copied once into its rows of the output, as Concat does (ggml_set_inplace; its offsets are
    // int32 op params: else ggml_concat, joined in pairs)
    Shape os = c.ais("out_shape");
    auto ne = to_ne(os);
    if (size_t(shape_numel(os)) * sizeof(float) <= size_t(std::numeric_limits<int32_t>::max())) {
        ggml_tensor* acc = G(c.b, ggml_new_tensor_4d, GGML_TYPE_F32, ne[0], ne[1], ne[2], ne[3]);
        size_t offset = 0;
        for (ggml_tensor* t : parts) {
            acc = G(c.b, ggml_set_inplace, acc, t, acc->nb[1], acc->nb[2], acc->nb[3], offset);
            offset += size_t(t->ne[1]) * acc->nb[1];
        }
        return c.set(0, c.reshape(acc, os));
    }
    while (parts.size() > 1) {
        std::vector<ggml_tensor*> next;
        for (size_t i = 0; i + 1 < parts.size(); i += 2) next.push_back(G(c.b, ggml_concat, parts[i], parts[i + 1], 1));
        if (parts.size() % 2) next.push_back(parts.back());
        parts = std::move(next);
    }
    c.set(0, c.reshape(parts[0], os));
}

void register_matmul_gemm(Registry& r) {
    {
        OpDef d;
        d.op_type = "o2g.Attention";
        d.infer = [](OpCtx& c) { c.set_out(0, DType::F32, c.ais("out_shape")); };
        d.lower = lower_attention;
        r.add(d);
    }
    {
        OpDef d;
        d.op_type = "MatMul";
        d.min_inputs = 2;
        d.infer = [](OpCtx& c) { c.set_out(0, c.dtype(0), matmul_dims(c, 0, 1).out); };
        d.eval = [](OpCtx& c) {
            MatDims m = matmul_dims(c, 0, 1);
            Tensor t = Tensor::zeros(c.dtype(0), m.out);
            const Tensor &A = c.cval(0), &B = c.cval(1);
            for_each_matmul_batch(m, [&](int64_t bi, int64_t oa, int64_t ob) {
                for (int64_t i = 0; i < m.M; ++i)
                    for (int64_t j = 0; j < m.N; ++j) {
                        double acc = 0;
                        for (int64_t k = 0; k < m.K; ++k)
                            acc += A.getf((oa * m.M + i) * m.K + k) * B.getf((ob * m.K + k) * m.N + j);
                        t.setf((bi * m.M + i) * m.N + j, acc);
                    }
            });
            c.set_const(0, t);
        };
        d.fold_limit = 1 << 16;
        d.work = [](OpCtx& c) { return double(shape_numel(c.out(0).shape)) * double(c.shape(0).back()); };
        d.lower = [](Lc& c) {
            MatDims m = matmul_dims(c, 0, 1);
            // B the same for every batch (a weight, usually): A's batch dims fold into its rows, one product
            // (ViT's in-projection [197, 1, 768] x [768, 2304] was 197 products of one row each: 42 ms, now 3)
            if (m.sa.size() > 2 && m.K > 0 && shape_numel(m.sb) == m.K * m.N) {
                Shape rows = {shape_numel(m.sa) / m.K, m.K}, w = {m.K, m.N};
                return c.set(0, c.reshape(matmul(c, 0, 1, rows, w, false, false), m.out));
            }
            c.set(0, c.reshape(matmul(c, 0, 1, m.sa, m.sb, false, false), m.out));
        };
        r.add(d);
    }
    {
        OpDef d;
        d.op_type = "Gemm";
        d.min_inputs = 2;
        d.infer = [](OpCtx& c) {
            const Shape &a = c.shape(0), &b = c.shape(1);
            if (a.size() != 2 || b.size() != 2) c.fail("Gemm inputs must be 2-D");
            bool ta = c.ai("transA", 0) != 0, tb = c.ai("transB", 0) != 0;
            int64_t M = ta ? a[1] : a[0], K = ta ? a[0] : a[1], K2 = tb ? b[1] : b[0], N = tb ? b[0] : b[1];
            if (K != K2) c.fail("inner dims differ: " + shape_str(a) + " x " + shape_str(b));
            c.set_out(0, c.dtype(0), {M, N});
        };
        d.eval = [](OpCtx& c) {  // alpha * A' B' + beta * C, C broadcast to [M, N]
            const Tensor &A = c.cval(0), &B = c.cval(1);
            bool ta = c.ai("transA", 0) != 0, tb = c.ai("transB", 0) != 0;
            double alpha = c.af("alpha", 1.0f), beta = c.af("beta", 1.0f);
            int64_t M = c.out(0).shape[0], N = c.out(0).shape[1], K = ta ? A.shape[0] : A.shape[1];
            Shape cs;
            const Tensor* C = c.has(2) ? &c.cval(2) : nullptr;
            if (C) {
                cs = align_rank(c.shape(2), 2);
                if (c.shape(2).size() > 2 || (cs[0] != 1 && cs[0] != M) || (cs[1] != 1 && cs[1] != N))
                    c.fail("C of shape " + shape_str(c.shape(2)) + " does not broadcast to [" + std::to_string(M) +
                           ", " + std::to_string(N) + "]");
            }
            Tensor t = Tensor::zeros(c.out(0).dtype, {M, N});
            for (int64_t i = 0; i < M; ++i)
                for (int64_t j = 0; j < N; ++j) {
                    double acc = 0;
                    for (int64_t k = 0; k < K; ++k)
                        acc += A.getf(ta ? k * M + i : i * K + k) * B.getf(tb ? j * K + k : k * N + j);
                    double y = alpha * acc;
                    if (C && beta != 0) y += beta * C->getf((cs[0] == 1 ? 0 : i) * cs[1] + (cs[1] == 1 ? 0 : j));
                    t.setf(i * N + j, y);
                }
            c.set_const(0, t);
        };
        d.fold_limit = 1 << 16;
        d.work = [](OpCtx& c) {
            return double(shape_numel(c.out(0).shape)) * double(c.shape(0)[c.ai("transA", 0) ? 0 : 1]);
        };
        d.lower = [](Lc& c) {
            bool ta = c.ai("transA", 0) != 0, tb = c.ai("transB", 0) != 0;
            float alpha = c.af("alpha", 1.0f), beta = c.af("beta", 1.0f);
            ggml_tensor* y = matmul(c, 0, 1, c.shape(0), c.shape(1), ta, tb);
            if (alpha != 1.0f) y = G(c.b, ggml_scale, y, alpha);
            if (c.has(2) && beta != 0.0f) {
                ggml_tensor* cc = c.x(2);
                if (beta != 1.0f) cc = G(c.b, ggml_scale, c.cont(cc), beta);
                y = c.binary(LowerCtx::Bin::Add, y, c.out(0).shape, cc, operand_shape(c, 2));
            }
            c.set(0, y);
        };
        r.add(d);
    }
}

struct Einsum {
    std::vector<std::string> in;  // one label per dim of each input ('0'.. for ellipsis dims)
    std::string out;
    std::map<char, int64_t> dim;
};

Einsum parse_einsum(OpCtx& c) {
    std::string eq;
    for (char ch : c.as("equation", ""))
        if (ch != ' ') eq += ch;
    Einsum e;
    size_t arrow = eq.find("->");
    std::string lhs = eq.substr(0, arrow);
    std::vector<std::string> terms;
    for (size_t p = 0;;) {
        size_t q = lhs.find(',', p);
        terms.push_back(lhs.substr(p, q == std::string::npos ? std::string::npos : q - p));
        if (q == std::string::npos) break;
        p = q + 1;
    }
    if (int(terms.size()) != c.nin())
        c.fail("equation '" + eq + "' has " + std::to_string(terms.size()) + " operands for " +
               std::to_string(c.nin()) + " inputs");
    auto letters = [&](const std::string& t) {
        int64_t n = 0;
        for (size_t i = 0; i < t.size(); ++i) {
            if (t.compare(i, 3, "...") == 0) {
                i += 2;
                continue;
            }
            if (!std::isalpha(static_cast<unsigned char>(t[i])))
                c.fail("equation '" + eq + "': bad label '" + std::string(1, t[i]) + "'");
            ++n;
        }
        return n;
    };
    int64_t E = 0;
    std::vector<int64_t> ell(terms.size());
    for (size_t i = 0; i < terms.size(); ++i) {
        int64_t rank = c.rank(int(i)), n = letters(terms[i]);
        bool has = terms[i].find("...") != std::string::npos;
        ell[i] = rank - n;
        if (ell[i] < 0 || (!has && ell[i] != 0))
            c.fail("equation term '" + terms[i] + "' does not match input rank " + std::to_string(rank));
        E = std::max(E, ell[i]);
    }
    if (E > 10) c.fail_unsupported("Einsum with more than 10 ellipsis dims");
    auto expand = [&](const std::string& t, int64_t ne) {
        std::string r;
        for (size_t i = 0; i < t.size(); ++i) {
            if (t.compare(i, 3, "...") == 0) {
                for (int64_t j = E - ne; j < E; ++j) r += char('0' + j);
                i += 2;
            } else {
                r += t[i];
            }
        }
        return r;
    };
    std::map<char, int> count;
    for (size_t i = 0; i < terms.size(); ++i) {
        e.in.push_back(expand(terms[i], ell[i]));
        const Shape& s = c.shape(int(i));
        for (size_t p = 0; p < s.size(); ++p) {
            char l = e.in[i][p];
            count[l]++;
            auto it = e.dim.find(l);
            if (it == e.dim.end() || it->second == 1) e.dim[l] = s[p];
            else if (s[p] != 1 && s[p] != it->second)
                c.fail("label '" + std::string(1, l) + "' has sizes " + std::to_string(it->second) + " and " +
                       std::to_string(s[p]));
        }
    }
    if (arrow != std::string::npos) {
        e.out = expand(eq.substr(arrow + 2), E);
        for (char l : e.out)
            if (!e.dim.count(l)) c.fail("output label '" + std::string(1, l) + "' is not in any input");
    } else {
        for (int64_t j = 0; j < E; ++j) e.out += char('0' + j);
        for (auto& kv : count)  // std::map: sorted, and digits (ellipsis) sort before letters
            if (kv.second == 1 && std::isalpha(static_cast<unsigned char>(kv.first))) e.out += kv.first;
    }
    return e;
}

// A two-operand Einsum that is a batched matrix product (each label of an input once, every label in both
// inputs or in the output, shared labels of one size): rewritten into Transpose -> Reshape of each operand
// ([batch, M, K] and [batch, K, N]), one MatMul, Reshape -> Transpose to the output's order, so that it
// runs on the backend as MatMul does (the transposes are views; maxvit's attention products were a host
// kernel). False (and nothing changed) for the other equations, which the host evaluator computes.
bool einsum_as_matmul(OpCtx& c, const Einsum& e) {
    if (c.nin() != 2 || c.dtype(0) != DType::F32 || c.dtype(1) != DType::F32 || (c.is_const(0) && c.is_const(1)))
        return false;
    const std::string &a = e.in[0], &b = e.in[1];
    auto unique = [](const std::string& s) {
        std::string t = s;
        std::sort(t.begin(), t.end());
        return std::adjacent_find(t.begin(), t.end()) == t.end();
    };
    if (!unique(a) || !unique(b) || !unique(e.out)) return false;
    auto in = [](const std::string& s, char l) { return s.find(l) != std::string::npos; };
    std::string batch, m, k, n;  // output order for batch/M/N labels, A's order for the contracted ones
    for (char l : e.out) (in(a, l) && in(b, l) ? batch : in(a, l) ? m : n) += l;
    for (char l : a)
        if (in(b, l) && !in(e.out, l)) k += l;
        else if (!in(b, l) && !in(e.out, l)) return false;  // summed over in A alone
    for (char l : b)
        if (!in(a, l) && !in(e.out, l)) return false;
    for (int i = 0; i < 2; ++i)  // a shared label broadcast from size 1 is not a matrix product; no empty dims
        for (size_t p = 0; p < e.in[i].size(); ++p)
            if (c.shape(i)[p] != e.dim.at(e.in[i][p]) || c.shape(i)[p] == 0) return false;
    auto size = [&](const std::string& ls) {
        int64_t v = 1;
        for (char l : ls) v *= e.dim.at(l);
        return v;
    };
    auto perm_of = [](const std::string& from, const std::string& to) {
        std::vector<int64_t> p;
        for (char l : to) p.push_back(int64_t(from.find(l)));
        return p;
    };
    std::vector<Node> nodes;
    Graph& g = c.graph();
    const std::string& name = c.node().name;
    auto transpose = [&](int x, const std::string& from, const std::string& to, const std::string& hint) {
        std::vector<int64_t> p = perm_of(from, to);
        bool identity = true;
        for (size_t i = 0; i < p.size(); ++i) identity = identity && p[i] == int64_t(i);
        if (identity) return x;
        int y = g.new_value(name + hint);
        Node t = c.make_node("Transpose", {x}, {y});
        t.attrs["perm"] = ints_attr(p);
        nodes.push_back(std::move(t));
        return y;
    };
    auto reshape = [&](int x, std::vector<int64_t> shape, const std::string& hint, int y = -1) {
        if (y < 0) y = g.new_value(name + hint);
        nodes.push_back(c.make_node(
            "Reshape", {x, c.new_const(Tensor::from_i64(shape, {int64_t(shape.size())}), name + hint + "_shape")},
            {y}));
        return y;
    };
    int64_t B = size(batch), M = size(m), K = size(k), N = size(n);
    int xa = reshape(transpose(c.node().inputs[0], a, batch + m + k, "_a_t"), {B, M, K}, "_a");
    int xb = reshape(transpose(c.node().inputs[1], b, batch + k + n, "_b_t"), {B, K, N}, "_b");
    int y = g.new_value(name + "_mm");
    nodes.push_back(c.make_node("MatMul", {xa, xb}, {y}));
    std::vector<int64_t> full;
    for (char l : batch + m + n) full.push_back(e.dim.at(l));
    std::vector<int64_t> p = perm_of(batch + m + n, e.out);
    bool identity = true;
    for (size_t i = 0; i < p.size(); ++i) identity = identity && p[i] == int64_t(i);
    if (identity) {
        reshape(y, full, "_y", c.node().outputs[0]);
    } else {
        int yr = reshape(y, full, "_y");
        Node t = c.make_node("Transpose", {yr}, {c.node().outputs[0]});
        t.attrs["perm"] = ints_attr(p);
        nodes.push_back(std::move(t));
    }
    c.replace_with(std::move(nodes));
    return true;
}

void register_einsum(Registry& r) {
    OpDef d;
    d.op_type = "Einsum";
    d.min_inputs = 1;
    d.infer = [](OpCtx& c) {
        Einsum e = parse_einsum(c);
        if (einsum_as_matmul(c, e)) return;
        Shape o;
        for (char l : e.out) o.push_back(e.dim[l]);
        c.set_out(0, c.dtype(0), o);
    };
    d.eval = [](OpCtx& c) {
        Einsum e = parse_einsum(c);
        std::vector<char> labels;
        std::vector<int64_t> dims;
        for (auto& kv : e.dim) labels.push_back(kv.first), dims.push_back(kv.second);
        size_t L = labels.size(), n = e.in.size();
        // stride of every label in every operand (0 where absent or broadcast); the output last
        std::vector<std::vector<int64_t>> stride(n + 1, std::vector<int64_t>(L, 0));
        auto fill = [&](size_t k, const std::string& lab, const Shape& s) {
            auto st = strides_of(s);
            for (size_t p = 0; p < lab.size(); ++p)
                if (s[p] != 1)
                    stride[k][size_t(std::find(labels.begin(), labels.end(), lab[p]) - labels.begin())] += st[p];
        };
        std::vector<Tensor> ins;
        for (size_t k = 0; k < n; ++k) {
            fill(k, e.in[k], c.shape(int(k)));
            ins.push_back(c.cval(int(k)).cast(DType::F64));
        }
        Shape os;
        for (char l : e.out) os.push_back(e.dim[l]);
        fill(n, e.out, os);
        std::vector<double> acc(size_t(shape_numel(os)), 0.0);
        int64_t total = 1;
        for (int64_t dd : dims) total *= dd;
        std::vector<int64_t> idx(L, 0), off(n + 1, 0);
        for (int64_t p = 0; p < total; ++p) {
            double v = 1;
            for (size_t k = 0; k < n; ++k) v *= ins[k].ptr<double>()[off[k]];
            acc[size_t(off[n])] += v;
            for (int k = int(L) - 1; k >= 0; --k) {  // next grid point, offsets updated incrementally
                for (size_t t = 0; t <= n; ++t) off[t] += stride[t][size_t(k)];
                if (++idx[size_t(k)] < dims[size_t(k)]) break;
                for (size_t t = 0; t <= n; ++t) off[t] -= stride[t][size_t(k)] * dims[size_t(k)];
                idx[size_t(k)] = 0;
            }
        }
        Tensor t = Tensor::zeros(c.dtype(0), os);
        for (size_t i = 0; i < acc.size(); ++i) t.setf(int64_t(i), acc[i]);
        c.set_const(0, t);
    };
    d.work = [](OpCtx& c) {
        double w = 1;
        for (auto& kv : parse_einsum(c).dim) w *= double(kv.second);
        return w * double(c.nin());
    };
    r.add(d);
}

void register_det(Registry& r) {
    OpDef d;
    d.op_type = "Det";
    d.infer = [](OpCtx& c) {
        const Shape& s = c.shape(0);
        if (s.size() < 2 || s[s.size() - 1] != s[s.size() - 2])
            c.fail("input must be [..., M, M], got " + shape_str(s));
        c.set_out(0, c.dtype(0), Shape(s.begin(), s.end() - 2));
    };
    d.work = [](OpCtx& c) { return double(shape_numel(c.shape(0))) * double(c.shape(0).back()); };
    d.eval = [](OpCtx& c) {  // LU decomposition with partial pivoting, in double
        const Shape& s = c.shape(0);
        int64_t m = s.back(), nb = shape_numel(s) / std::max<int64_t>(1, m * m);
        const Tensor& x = c.cval(0);
        Tensor t = Tensor::zeros(c.dtype(0), Shape(s.begin(), s.end() - 2));
        std::vector<double> a(size_t(m * m));
        for (int64_t b = 0; b < nb; ++b) {
            for (int64_t i = 0; i < m * m; ++i) a[size_t(i)] = x.getf(b * m * m + i);
            double det = 1;
            for (int64_t col = 0; col < m && det != 0; ++col) {
                int64_t piv = col;
                for (int64_t i = col + 1; i < m; ++i)
                    if (std::fabs(a[size_t(i * m + col)]) > std::fabs(a[size_t(piv * m + col)])) piv = i;
                if (a[size_t(piv * m + col)] == 0) {
                    det = 0;
                    break;
                }
                if (piv != col) {
                    for (int64_t j = 0; j < m; ++j) std::swap(a[size_t(piv * m + j)], a[size_t(col * m + j)]);
                    det = -det;
                }
                double p = a[size_t(col * m + col)];
                det *= p;
                for (int64_t i = col + 1; i < m; ++i) {
                    double f = a[size_t(i * m + col)] / p;
                    for (int64_t j = col; j < m; ++j) a[size_t(i * m + j)] -= f * a[size_t(col * m + j)];
                }
            }
            t.setf(b, det);
        }
        c.set_const(0, t);
    };
    r.add(d);
}

}  // namespace

O2G_OP_FAMILY(matmul) {
    register_matmul_gemm(r);
    register_einsum(r);
    register_det(r);
}

}  // namespace onnx2ggml::core
