#include "lower/builder.h"

#include <cmath>
#include <cstdio>
#include <cstring>

#include "lower/host_kernel.h"
#include "lower/integer_weights.h"
#include "util/error.h"

namespace onnx2ggml::core {

std::string Builder::upper(std::string s) {
    for (auto& c : s) c = char(toupper(static_cast<unsigned char>(c)));
    return s;
}

std::string Builder::fmt(float v) {
    if (std::isnan(v)) return "NAN";
    if (std::isinf(v)) return v > 0 ? "INFINITY" : "-INFINITY";
    char buf[64];
    snprintf(buf, sizeof buf, "%af", double(v));  // hex float: exact round trip
    return buf;
}

std::string Builder::var(const ggml_tensor* t) const {
    if (!t) return "nullptr";
    auto it = vars_.find(t);
    if (it == vars_.end()) internal_error("tensor without a variable in the recorded program");
    return it->second;
}

void Builder::emit(ggml_tensor* r, const char* fn, std::vector<std::string> args) {
    std::string v = "t" + std::to_string(next_++);
    std::string line = "ggml_tensor * " + v + " = " + fn + "(ctx";
    for (auto& a : args) line += ", " + a;
    line += ");";
    lines.push_back(line);
    vars_[r] = v;
}

static const ggml_type kWeightTypes[] = {GGML_TYPE_F32,  GGML_TYPE_F16,  GGML_TYPE_Q8_0, GGML_TYPE_Q5_0,
                                         GGML_TYPE_Q5_1, GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q2_K,
                                         GGML_TYPE_Q3_K, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K};

ggml_type weight_type_by_name(const std::string& name) {
    for (ggml_type t : kWeightTypes)
        if (name == ggml_type_name(t)) return t;
    return GGML_TYPE_COUNT;
}

std::string weight_type_names() {
    std::string r;
    for (ggml_type t : kWeightTypes) r += std::string(r.empty() ? "" : ", ") + ggml_type_name(t);
    return r;
}

Tensor Weight::data() const {
    if (gguf) {
        Tensor d = gguf->read(gguf_index);
        if (d.nbytes() != ggml_nbytes(t)) internal_error("GGUF weight size differs from its ggml tensor");
        return d;
    }
    Tensor h = transpose ? host.transposed_last2() : host;
    if (ggml_is_quantized(t->type)) {
        // a weight dequantized from integers (lower/integer_weights.h): its blocks from those integers
        if (std::vector<uint8_t> q = integer_blocks(host, transpose, t->type); q.size() == ggml_nbytes(t)) {
            Tensor d = Tensor::zeros(DType::U8, {int64_t(q.size())});
            std::memcpy(d.data(), q.data(), q.size());
            return d;
        }
        // else ggml's quantizer, row by row (a row: ne[0] elements)
        Tensor f = h.cast(DType::F32);
        Tensor q = Tensor::zeros(DType::U8, {int64_t(ggml_nbytes(t))});
        ggml_quantize_chunk(t->type, f.ptr<float>(), q.data(), 0, ggml_nrows(t), t->ne[0], nullptr);
        return q;
    }
    switch (t->type) {
        case GGML_TYPE_F32: h = h.cast(DType::F32); break;
        case GGML_TYPE_F16: h = h.cast(DType::F16); break;
        case GGML_TYPE_I32:
            if (h.dtype == DType::U32) break;        // held bit for bit
            for (int64_t i = 0; i < h.numel(); ++i)  // int64 constants are held as int32: never wrap silently
                if (h.geti(i) < INT32_MIN || h.geti(i) > INT32_MAX)
                    unsupported("constant '" + onnx_name + "' holds " + std::to_string(h.geti(i)) +
                                ", outside the int32 range ggml computes integers in");
            h = h.cast(DType::I32);
            break;
        default:  // held bit for bit (float64, int8/uint8, ...: see ggml_type_for)
            if (dtype_size(h.dtype) != ggml_type_size(t->type))
                internal_error(std::string("weight of ggml type ") + ggml_type_name(t->type));
    }
    if (h.nbytes() != ggml_nbytes(t)) internal_error("weight data size differs from its ggml tensor");
    return h;
}

void Weight::write(void* dst) const {
    const size_t nb = ggml_nbytes(t);
    const bool f32 = t->type == GGML_TYPE_F32 && host.dtype == DType::F32,
               f16 = t->type == GGML_TYPE_F16 && host.dtype == DType::F16;
    if (!gguf && (f32 || f16) && host.nbytes() == nb) {  // stored as held: copied, or transposed, into dst
        if (transpose) host.transposed_last2_into(dst);
        else std::memcpy(dst, host.data(), nb);
        return;
    }
    if (!gguf && !transpose && t->type == GGML_TYPE_F16 && host.dtype == DType::F32 &&
        host.numel() * 2 == int64_t(nb)) {
        ggml_fp32_to_fp16_row(host.ptr<float>(), static_cast<ggml_fp16_t*>(dst), host.numel());
        return;
    }
    Tensor d = data();
    std::memcpy(dst, d.data(), nb);
}

ggml_tensor* Builder::weight(const Tensor& host, ggml_type type, const std::string& onnx_name, bool transpose,
                             bool shareable) {
    int64_t ne[4] = {1, 1, 1, 1};
    int r = int(host.shape.size());
    if (r > 4) internal_error("weight of rank > 4 must be reshaped before upload");
    if (transpose && r < 2) internal_error("transposed weight of rank < 2");
    for (int i = 0; i < r; ++i) ne[i] = host.shape[r - 1 - i];
    if (transpose) std::swap(ne[0], ne[1]);
    auto made = [&](ggml_tensor* t) {
        Weight w;
        w.onnx_name = onnx_name, w.host = host, w.t = t, w.transpose = transpose, w.initializer = shareable;
        if (weight_rules.gguf && shareable && !onnx_name.empty()) {
            w.gguf = weight_rules.gguf;
            w.gguf_index = w.gguf->find(onnx_name, transpose, type, ne);
        }
        weights.push_back(std::move(w));
    };
    if (share && shareable && !record_) {
        std::string key = onnx_name + "|" + ggml_type_name(type) + "|" + std::to_string(ne[0]) + "x" +
                          std::to_string(ne[1]) + "x" + std::to_string(ne[2]) + "x" + std::to_string(ne[3]) +
                          (transpose ? "|T" : "");
        bool fresh = false;
        ggml_tensor* t = share->get(key, type, ne, &fresh);
        if (fresh) made(t);
        return t;
    }
    reserve(wctx);
    ggml_tensor* t = ggml_new_tensor(wctx, type, 4, ne);
    std::string wname = "w" + std::to_string(weights.size());
    ggml_set_name(t, wname.c_str());
    if (record_) vars_[t] = "w[" + std::to_string(weights.size()) + "]";
    made(t);
    return t;
}

ggml_tensor* Builder::custom(ggml_type type, const int64_t ne[4], std::vector<ggml_tensor*> args,
                             std::shared_ptr<HostKernel> k) {
    reserve(ctx);
    ggml_tensor* r = host_kernel_node(ctx, k.get(), type, ne, args);
    if (record_) {
        std::string line = "ggml_tensor * t" + std::to_string(next_) + " = o2g_host::kernel(ctx, " +
                           std::to_string(host_kernels.size()) + ", " + fmt(type);
        for (int i = 0; i < 4; ++i) line += ", " + fmt(ne[i]);
        line += ", {";
        for (size_t i = 0; i < args.size(); ++i) line += (i ? ", " : "") + var(args[i]);
        lines.push_back(line + "});");
        vars_[r] = "t" + std::to_string(next_++);
    }
    host_kernels.push_back(std::move(k));
    return r;
}

ggml_tensor* Builder::input(int index, ggml_type type, const int64_t ne[4], const std::string& onnx_name) {
    reserve(ctx);
    ggml_tensor* t = ggml_new_tensor(ctx, type, 4, ne);
    ggml_set_input(t);
    std::string n = onnx_name.substr(0, GGML_MAX_NAME - 1);
    ggml_set_name(t, n.c_str());
    if (int(inputs.size()) <= index) inputs.resize(index + 1, nullptr), index_bound.resize(index + 1, 0);
    inputs[index] = t;
    if (record_) {
        std::string v = "in[" + std::to_string(index) + "]";
        vars_[t] = v;
        lines.push_back(v + " = ggml_new_tensor_4d(ctx, " + fmt(type) + ", " + fmt(ne[0]) + ", " + fmt(ne[1]) + ", " +
                        fmt(ne[2]) + ", " + fmt(ne[3]) + ");");
        lines.push_back("ggml_set_input(" + v + "); ggml_set_name(" + v + ", " + cpp_string_literal(n) + ");");
    }
    return t;
}

void Builder::name(ggml_tensor* t, const std::string& onnx_name) {
    if (t->op == GGML_OP_NONE) return;  // inputs and weights are named by their slot
    std::string n = onnx_name.substr(0, GGML_MAX_NAME - 1);
    ggml_set_name(t, n.c_str());
    if (record_) lines.push_back("ggml_set_name(" + var(t) + ", " + cpp_string_literal(n) + ");");
}

void Builder::comment(const std::string& text) {
    if (record_) lines.push_back("// " + cpp_comment_text(text));
}

void Builder::mark_output(int index, ggml_tensor* t) {
    if (int(outputs.size()) <= index) outputs.resize(index + 1, nullptr);
    outputs[index] = t;
    if (!t) {
        if (record_) lines.push_back("out[" + std::to_string(index) + "] = nullptr;  // empty output");
        return;
    }
    ggml_set_output(t);
    if (record_)
        lines.push_back("out[" + std::to_string(index) + "] = " + var(t) + "; ggml_set_output(" + var(t) + ");");
}

std::string cpp_string_literal(const std::string& s) {
    std::string r = "\"";
    for (unsigned char c : s) {
        if (isalnum(c) || c == '_' || c == '.' || c == ' ' || c == '-' || c == '/' || c == ':') r += char(c);
        else {
            char buf[8];
            snprintf(buf, sizeof buf, "\\%03o", c);  // fixed-width octal: never merges with what follows
            r += buf;
        }
    }
    return r + "\"";
}

std::string cpp_comment_text(const std::string& s) {
    std::string r;
    for (unsigned char c : s) {
        if (c >= 0x20 && c < 0x7f && c != '\\' && c != '*' && c != '?') r += char(c);
        else r += '_';
        if (r.size() >= 160) {
            r += "...";
            break;
        }
    }
    return r;
}

}  // namespace onnx2ggml::core
