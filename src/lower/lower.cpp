#include "lower/lower.h"
#include "lower/integer_weights.h"
#include "o2g_kernels.h"

#include <cstdlib>
#include <cstring>

namespace onnx2ggml::core {

bool device_computable(DType t) { return t == DType::F32 || t == DType::Bool || t == DType::I32 || t == DType::I64; }

ggml_type ggml_type_for(DType t) {
    switch (t) {
        case DType::F32:
        case DType::Bool: return GGML_TYPE_F32;  // booleans are 0/1 floats on the device
        case DType::I32:
        case DType::I64:
            return GGML_TYPE_I32;  // int64 held as int32 (range-checked)
        // held bit for bit; only host kernels (lower/host_kernel.cpp) compute on these
        case DType::F64: return GGML_TYPE_F64;
        case DType::F16: return GGML_TYPE_F16;
        case DType::BF16: return GGML_TYPE_BF16;
        case DType::I8:
        case DType::U8: return GGML_TYPE_I8;
        case DType::I16:
        case DType::U16: return GGML_TYPE_I16;
        case DType::U32: return GGML_TYPE_I32;
        case DType::U64: return GGML_TYPE_I64;
        default: return GGML_TYPE_COUNT;
    }
}

ggml_tensor* LowerCtx::constant(const Tensor& t, ggml_type type) {
    return b.weight(t.reshaped(canonical4(t.shape)), type, "");  // cast when stored (Weight::data)
}

ggml_tensor* LowerCtx::matrix_weight(int i, const Shape& s, bool transpose, bool conv_kernel) {
    Value& v = in(i);
    if (s.size() > 4) fail_unsupported("constant matrix of rank > 4");
    // the rule set (lower/weights.h); quantized only where ggml's kernels take it
    ggml_type type = v.dtype == DType::F32 ? b.weight_rules.choose(v.name, s, transpose, conv_kernel) : GGML_TYPE_F32;
    Tensor host = cval(i).reshaped(s);
    // a weight the model dequantizes from integers and asks to keep so (MatMulNBits, accuracy_level 4): stored in
    // the ggml type that holds those integers, when no --weights / --weights-rule decides and its blocks fit
    // (lower/integer_weights.h)
    if (auto src = integer_source(host); src && src->preferred != GGML_TYPE_COUNT && !b.weight_rules.user_given() &&
                                         !integer_blocks(host, transpose, src->preferred).empty())
        type = src->preferred;
    return b.weight(host, type, v.name, transpose, v.is_initializer);
}

ggml_tensor* LowerCtx::x(int i) {
    in(i);  // a clean error if the input is missing
    int id = node().inputs[i];
    if (st_.vmap[id]) return st_.vmap[id];
    Value& v = in(i);
    if (!v.constant) internal_error(where() + ": input '" + v.name + "' has no ggml tensor");
    auto it = st_.weight_of.find(id);
    if (it != st_.weight_of.end()) return it->second;
    ggml_type type = ggml_type_for(v.dtype);
    if (type == GGML_TYPE_COUNT)
        fail_unsupported(std::string("constant '") + v.name + "' of dtype " + dtype_name(v.dtype) + " on the device");
    ggml_tensor* w =
        b.weight(v.constant->reshaped(canonical4(v.constant->shape)), type, v.name, false, v.is_initializer);
    st_.weight_of[id] = w;
    return w;
}

// Test only (the `compare` tests): ONNX2GGML_TEST_PERTURB_NODE=NAME scales the float outputs of the node
// of that name by 1.01, a planted error that `compare` must find.
static const char* perturbed_node() {
    static const char* name = std::getenv("ONNX2GGML_TEST_PERTURB_NODE");
    return name;
}

void LowerCtx::set(int i, ggml_tensor* t) {
    if (!has_out(i)) return;
    Value& v = out(i);
    if (perturbed_node() && node().name == perturbed_node() && t->type == GGML_TYPE_F32 && v.dtype == DType::F32)
        t = G(b, ggml_scale, t, 1.01f);
    auto ne = to_ne(v.shape);
    for (int k = 0; k < 4; ++k)
        if (t->ne[k] != ne[k])
            internal_error(where() + ": lowering produced ggml ne [" + std::to_string(t->ne[0]) + "," +
                           std::to_string(t->ne[1]) + "," + std::to_string(t->ne[2]) + "," + std::to_string(t->ne[3]) +
                           "] for output '" + v.name + "' of shape " + shape_str(v.shape));
    ggml_type want = ggml_type_for(v.dtype);
    if (t->type != want)
        internal_error(where() + ": lowering produced ggml type " + ggml_type_name(t->type) + " for output '" + v.name +
                       "'");
    b.name(t, v.name);
    st_.vmap[node().outputs[i]] = t;
}

ggml_tensor* LowerCtx::fused_behind(int i, Fused kind) {
    if (!has(i)) return nullptr;
    ggml_tensor* t = st_.vmap[size_t(node().inputs[size_t(i)])];
    ggml_tensor* s = t && t->view_src ? t->view_src : t;
    bool conv = s && (s->op == GGML_OP_CONV_2D || s->op == GGML_OP_CONV_2D_DW ||
                      (s->op == GGML_OP_CONT && s->op_params[o2g::kGroupedConv] > 0));
    bool op = kind == Fused::Conv      ? conv
              : kind == Fused::Norm    ? s && s->op == GGML_OP_GROUP_NORM
              : kind == Fused::Product ? s && s->op == GGML_OP_MUL
                                       : conv || (s && (s->op == GGML_OP_POOL_2D || s->op == GGML_OP_MUL));
    if (!op || s->type != GGML_TYPE_F32) return nullptr;
    auto it = st_.fused_value.find(s);
    bool whole = ggml_is_contiguous(t) &&
                 (kind != Fused::Norm ? ggml_are_same_shape(t, s) : ggml_nelements(t) == ggml_nelements(s)) &&
                 t->view_offs == 0;
    return it != st_.fused_value.end() && it->second == node().inputs[size_t(i)] && whole ? s : nullptr;
}

std::vector<ggml_tensor*> LowerCtx::private_producers(int i) {
    if (b.keep_values || !has(i)) return {};  // (keep_values: every value stays readable in its plain layout)
    if (ggml_tensor* conv = fused_behind(i, Fused::Private))
        if (conv->src[0]->type == GGML_TYPE_F32 && (!conv->src[1] || conv->src[1]->type == GGML_TYPE_F32))
            return {conv};  // (else not oneDNN's)
    auto it = st_.private_concat.find(st_.vmap[size_t(node().inputs[size_t(i)])]);
    return it != st_.private_concat.end() ? it->second : std::vector<ggml_tensor*>{};
}

void LowerCtx::reads_private(int i, ggml_tensor* reader) {
    std::vector<ggml_tensor*> producers = private_producers(i);
    if (producers.empty()) return;
    int v = node().inputs[size_t(i)];
    auto& rs = st_.private_readers[v];
    rs.push_back(reader);
    // every reader can, and a convolution reads it or the producer reads its own input so (a residual
    // sum alone gains nothing from it otherwise: its convolution reorders the residual either way)
    bool conv_reads = std::any_of(rs.begin(), rs.end(), [](const ggml_tensor* r) { return r->op != GGML_OP_ADD; });
    bool chained = producers.size() == 1 && producers[0]->op_params[o2g::kInPrivate] == 1;
    if (int(rs.size()) == readers(v) && (conv_reads || chained))
        for (ggml_tensor* p : producers)
            for (ggml_tensor* r : rs) G(b, o2g::conv_chain, p, r);
}

void LowerCtx::joins_private(ggml_tensor* out) {
    std::vector<ggml_tensor*> all;
    for (int i = 0; i < nin(); ++i) {
        if (!has(i) || shape(i).size() != 4 || shape(i)[1] == 0) continue;
        std::vector<ggml_tensor*> p = private_producers(i);
        if (p.empty() || shape(i)[1] % 16 != 0 || readers(node().inputs[size_t(i)]) != 1) return;
        all.insert(all.end(), p.begin(), p.end());
    }
    if (!all.empty()) st_.private_concat[out] = std::move(all);
}

bool LowerCtx::graph_output(int i) {
    const auto& outs = graph().outputs;
    return std::find(outs.begin(), outs.end(), node().outputs[size_t(i)]) != outs.end();
}

ggml_tensor* LowerCtx::cont(ggml_tensor* t) {
    if (ggml_is_contiguous(t)) return t;
    ggml_tensor*& c = st_.cont_of[t];  // several consumers of one view share its copy
    if (!c) c = G(b, ggml_cont, t);
    return c;
}

ggml_tensor* LowerCtx::reshape_view(ggml_tensor* t, const Shape& s) {
    auto ne = to_ne(s);
    if (ggml_is_contiguous(t) || ggml_nelements(t) != shape_numel(s)) return reshape(t, s);
    if (t->ne[0] == ne[0] && t->ne[1] == ne[1] && t->ne[2] == ne[2] && t->ne[3] == ne[3]) return t;
    std::array<size_t, 4> nb;
    std::array<int64_t, 4> old_ne = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
    std::array<size_t, 4> old_nb = {t->nb[0], t->nb[1], t->nb[2], t->nb[3]};
    if (!view_strides(old_ne, old_nb, ne, nb) || (ne[0] > 1 && nb[0] != ggml_type_size(t->type))) return reshape(t, s);
    return G(b, ggml_view_4d, t, ne[0], ne[1], ne[2], ne[3], nb[1], nb[2], nb[3], size_t(0));
}

ggml_tensor* LowerCtx::reshape(ggml_tensor* t, const Shape& s) {
    auto ne = to_ne(s);
    if (ggml_nelements(t) != shape_numel(s))  // contradicting shapes in the model (e.g. a bias of the wrong size)
        fail("a tensor of " + std::to_string(ggml_nelements(t)) + " elements cannot be used as shape " + shape_str(s));
    if (t->ne[0] == ne[0] && t->ne[1] == ne[1] && t->ne[2] == ne[2] && t->ne[3] == ne[3]) return t;
    return G(b, ggml_reshape_4d, cont(t), ne[0], ne[1], ne[2], ne[3]);
}

ggml_tensor* LowerCtx::permute(ggml_tensor* t, const std::vector<int64_t>& perm) {
    auto ax = ggml_permute_axes(perm);
    if (ax[0] == 0 && ax[1] == 1 && ax[2] == 2 && ax[3] == 3) return t;
    return G(b, ggml_permute, t, ax[0], ax[1], ax[2], ax[3]);
}

ggml_tensor* LowerCtx::slice(ggml_tensor* t, int d, int64_t start, int64_t len, int64_t step) {
    if (start == 0 && len == t->ne[d] && step == 1) return t;
    if (start < 0 || len < 0 || (len > 0 && start + (len - 1) * step >= t->ne[d]))
        internal_error(where() + ": slice out of bounds");
    int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
    size_t nb[4] = {t->nb[0], t->nb[1], t->nb[2], t->nb[3]};
    ne[d] = len;
    size_t offset = size_t(start) * t->nb[d];
    nb[d] = t->nb[d] * size_t(step);
    if (d == 0 && step != 1) {
        // ggml views keep nb[0] = element size: move dim 0 to a strided dim 1 of a 5-dim-free view
        internal_error("slice with a step along ggml dim 0 needs get_rows");
    }
    return G(b, ggml_view_4d, t, ne[0], ne[1], ne[2], ne[3], nb[1], nb[2], nb[3], offset);
}

ggml_tensor* LowerCtx::repeat_to(ggml_tensor* t, const std::array<int64_t, 4>& ne) {
    if (t->ne[0] == ne[0] && t->ne[1] == ne[1] && t->ne[2] == ne[2] && t->ne[3] == ne[3]) return t;
    for (int k = 0; k < 4; ++k)
        if (t->ne[k] == 0 || ne[k] % t->ne[k] != 0)
            fail("shapes cannot be broadcast (ggml dim " + std::to_string(k) + ")");
    return G(b, ggml_repeat_4d, t, ne[0], ne[1], ne[2], ne[3]);
}

ggml_tensor* LowerCtx::binary(Bin op, ggml_tensor* a, const Shape& sa, ggml_tensor* bt, const Shape& sb) {
    if (a->type != bt->type) fail("operands have different types");
    Shape so;
    if (!broadcast_shapes(sa, sb, so))
        fail("shapes " + shape_str(sa) + " and " + shape_str(sb) + " cannot be broadcast");
    size_t r = so.size();
    Shape xa = align_rank(sa, r), xb = align_rank(sb, r);
    if (r > 4) {  // merge neighbouring dims where each operand is whole in both or broadcast in both
        Shape ca, cb, co;
        int prev = -1;  // broadcast pattern of the last kept dim: bit 0 = a broadcast, bit 1 = b broadcast
        for (size_t i = 0; i < r; ++i) {
            if (so[i] == 1) continue;
            int kind = (xa[i] == 1 ? 1 : 0) | (xb[i] == 1 ? 2 : 0);
            if (kind == prev) {
                ca.back() *= xa[i], cb.back() *= xb[i], co.back() *= so[i];
            } else {
                ca.push_back(xa[i]), cb.push_back(xb[i]), co.push_back(so[i]);
                prev = kind;
            }
        }
        if (co.size() < r) return reshape(binary(op, reshape(a, ca), ca, reshape(bt, cb), cb), so);
    }
    if (r > 4) {  // merged leading dims must agree exactly or be all 1
        auto lead_ok = [&](const Shape& s) {
            bool all1 = true, same = true;
            for (size_t i = 0; i + 3 < r; ++i) {
                all1 &= s[i] == 1;
                same &= s[i] == so[i];
            }
            return all1 || same;
        };
        if (!lead_ok(xa) || !lead_ok(xb))
            fail_unsupported("broadcasting " + shape_str(sa) + " with " + shape_str(sb) +
                             " along merged leading dims (rank > 4)");
    }
    a = reshape(a, xa);
    bt = reshape(bt, xb);
    auto ne = to_ne(so);
    auto same = [&](ggml_tensor* t) {
        return t->ne[0] == ne[0] && t->ne[1] == ne[1] && t->ne[2] == ne[2] && t->ne[3] == ne[3];
    };
    bool commutative = op == Bin::Add || op == Bin::Mul;
    if (!same(a)) {
        if (commutative && same(bt)) std::swap(a, bt);
        else a = repeat_to(a, ne);
    }
    if (a->nb[0] != ggml_type_size(a->type)) a = G(b, ggml_cont, a);
    switch (op) {
        case Bin::Add: return G(b, ggml_add, a, bt);
        case Bin::Sub: return G(b, ggml_sub, a, bt);
        case Bin::Mul: return G(b, ggml_mul, a, bt);
        case Bin::Div: return G(b, ggml_div, a, bt);
    }
    return nullptr;
}

}  // namespace onnx2ggml::core
