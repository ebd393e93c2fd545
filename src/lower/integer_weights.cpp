#include "lower/integer_weights.h"

#include <cmath>
#include <cstring>

namespace onnx2ggml::core {

namespace {
constexpr const char* kKey = "integer_source";
}

void attach_integer_source(const Tensor& t, std::shared_ptr<const IntegerSource> src) {
    if (t.buf && t.dtype == DType::F32) t.buf->derived(kKey, [&] { return std::shared_ptr<const void>(src); });
}

std::shared_ptr<const IntegerSource> integer_source(const Tensor& t) {
    if (!t.buf || t.dtype != DType::F32) return nullptr;
    return std::static_pointer_cast<const IntegerSource>(t.buf->find_derived(kKey));
}

std::vector<uint8_t> integer_blocks(const Tensor& host, bool transpose, ggml_type type) {
    std::shared_ptr<const IntegerSource> src = integer_source(host);
    if (!src || (type != GGML_TYPE_Q8_0 && type != GGML_TYPE_Q4_0 && type != GGML_TYPE_Q4_1)) return {};
    const Shape& s = host.shape;
    int64_t R = s.size() >= 2 ? s[s.size() - 2] : 1, C = s.empty() ? 1 : s.back();
    if (host.numel() != R * C) return {};  // leading dims above 1
    const int64_t rows = transpose ? C : R, len = transpose ? R : C, qk = 32;
    const size_t bs = ggml_type_size(type);
    if (ggml_blck_size(type) != qk || len % qk != 0) return {};
    std::vector<uint8_t> out(size_t(rows * (len / qk)) * bs);
    float back[32];
    const float* w = host.ptr<float>();
    const auto* traits = ggml_get_type_traits(type);
    int32_t code[32], zero[32];
    float scale[32];
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t b = 0; b < len / qk; ++b) {
            uint8_t* blk = out.data() + size_t(r * (len / qk) + b) * bs;
            auto flat = [&](int64_t j) { return transpose ? (b * qk + j) * C + r : r * C + b * qk + j; };
            for (int64_t j = 0; j < qk; ++j) {
                src->at(flat(j), &code[j], &zero[j], &scale[j]);
                if (scale[j] != scale[0] || zero[j] != zero[0]) return {};
            }
            ggml_fp16_t d = ggml_fp32_to_fp16(scale[0]);
            std::memcpy(blk, &d, sizeof d);
            if (type == GGML_TYPE_Q8_0) {
                for (int64_t j = 0; j < qk; ++j) {
                    int32_t q = code[j] - zero[j];
                    if (q < -128 || q > 127) return {};
                    blk[2 + j] = uint8_t(int8_t(q));
                }
            } else {
                bool q41 = type == GGML_TYPE_Q4_1;
                if (q41) {
                    ggml_fp16_t m = ggml_fp32_to_fp16(-scale[0] * float(zero[0]));
                    std::memcpy(blk + 2, &m, sizeof m);
                }
                uint8_t* qs = blk + (q41 ? 4 : 2);
                for (int64_t j = 0; j < qk; ++j) {
                    int32_t q = q41 ? code[j] : code[j] - zero[j] + 8;
                    if (q < 0 || q > 15) return {};
                    if (j < 16) qs[j] = uint8_t(q);
                    else qs[j - 16] = uint8_t(qs[j - 16] | (q << 4));
                }
            }
            // the values the block gives back, against the float32 weight: within the bound above (a wrong source
            // falls back to ggml's quantizer rather than storing other numbers)
            traits->to_float(blk, back, qk);
            bool q41 = type == GGML_TYPE_Q4_1;
            float m = q41 ? std::fabs(scale[0] * float(zero[0])) : 0.0f;
            for (int64_t j = 0; j < qk; ++j) {
                float dq = std::fabs(scale[0] * float(q41 ? code[j] : code[j] - zero[j]));  // the part d scales
                if (std::fabs(back[j] - w[flat(j)]) > std::ldexp(dq + m, -11) + 1e-30f) return {};
            }
        }
    return out;
}

}  // namespace onnx2ggml::core
