// onnx2ggml's oneDNN backend (o2g_onednn.h): UPSCALE (ggml_interpolate), nearest and bilinear.
#pragma once
#include <cmath>
#include <vector>

#include "pool.h"

namespace o2g_onednn {

// ggml_interpolate on contiguous F32 data: NEAREST (source index i / (out / in) truncated, on every dim) and BILINEAR
// over dims 0 and 1 (nearest on dims 2 and 3), plain or with GGML_SCALE_FLAG_ALIGN_CORNERS; ggml-cpu's
// coordinates and clamping (source x = (i + o) / sf - o, o = 0.5, or 0 with sf = (out - 1) / (in - 1) for
// align_corners; taps floor(x) and floor(x) + 1 clamped to the input, weight clamped to [0, 1]). ggml's CPU
// kernel computes every output pixel's coordinates and four taps alone, on one thread per channel; here the
// taps of each column are computed once, each output row blends two input rows first (a short vector loop),
// then two taps per pixel, rows in parallel: lraspp's 21x65x65 -> 520x520 head (ONNX Resize, linear).
// Results match ggml-cpu's to float rounding (the blend's order differs), not bit for bit.
inline bool upscale_supported(const ggml_tensor* op) {
    const ggml_tensor* x = op->src[0];
    const int32_t flags = op->op_params[0], mode = flags & 0xFF;
    const bool plain = (flags & ~0xFF) == 0, align = (flags & ~0xFF) == GGML_SCALE_FLAG_ALIGN_CORNERS;
    return op->op == GGML_OP_UPSCALE && x->type == GGML_TYPE_F32 && op->type == GGML_TYPE_F32 &&
           ggml_is_contiguous(x) && ggml_is_contiguous(op) &&
           ((mode == GGML_SCALE_MODE_NEAREST && plain) || (mode == GGML_SCALE_MODE_BILINEAR && (plain || align)));
}

// The taps of one bilinear dim: for output i, input indices i0[i], i1[i] and the weight w[i] of i1
struct LinearTaps {
    std::vector<int64_t> i0, i1;
    std::vector<float> w;
    LinearTaps(int64_t in, int64_t out, bool align) : i0(size_t(out)), i1(size_t(out)), w(size_t(out)) {
        float sf = float(out) / float(in), offset = 0.5f;
        if (align) {
            offset = 0.0f;
            if (out > 1 && in > 1) sf = float(out - 1) / float(in - 1);
        }
        for (int64_t i = 0; i < out; ++i) {
            const float x = (float(i) + offset) / sf - offset;
            int64_t a = int64_t(std::floor(x)), b = a + 1;
            a = std::max<int64_t>(0, std::min(a, in - 1)), b = std::max<int64_t>(0, std::min(b, in - 1));
            i0[size_t(i)] = a, i1[size_t(i)] = b;
            w[size_t(i)] = std::max(0.0f, std::min(x - float(a), 1.0f));
        }
    }
};

inline void upscale(ggml_tensor* dst) {
    const ggml_tensor* x = dst->src[0];
    const int64_t* ne = dst->ne;
    const int64_t* in = x->ne;
    const float* src = static_cast<const float*>(x->data);
    float* out = static_cast<float*>(dst->data);
    const int64_t rows = ne[1] * ne[2] * ne[3];  // output rows, each ne[0] floats
    const bool big = ggml_nbytes(dst) > (size_t(1) << 16);
    // nearest source index along dim d, as ggml-cpu computes it: i / (float(out) / in), truncated
    auto near = [&](int64_t i, int d) { return int64_t(float(i) / (float(ne[d]) / float(in[d]))); };
    auto plane = [&](int64_t r) {  // the input plane (dims 0, 1) of output row r: nearest on dims 2 and 3
        const int64_t i2 = r / ne[1] % ne[2], i3 = r / (ne[1] * ne[2]);
        return src + near(i3, 3) * in[0] * in[1] * in[2] + near(i2, 2) * in[0] * in[1];
    };
    if ((dst->op_params[0] & 0xFF) == GGML_SCALE_MODE_NEAREST) {
        std::vector<int64_t> col(static_cast<size_t>(ne[0]));
        for (int64_t i = 0; i < ne[0]; ++i) col[size_t(i)] = near(i, 0);
#pragma omp parallel for if (big)
        for (int64_t r = 0; r < rows; ++r) {
            const float* s = plane(r) + near(r % ne[1], 1) * in[0];
            float* d = out + r * ne[0];
            for (int64_t i = 0; i < ne[0]; ++i) d[i] = s[col[size_t(i)]];
        }
        return;
    }
    const bool align = (dst->op_params[0] & GGML_SCALE_FLAG_ALIGN_CORNERS) != 0;
    const LinearTaps cols(in[0], ne[0], align), lines(in[1], ne[1], align);
    const int64_t w_in = in[0];
#pragma omp parallel if (big)
    {
        std::vector<float> blend(static_cast<size_t>(w_in));
#pragma omp for
        for (int64_t r = 0; r < rows; ++r) {
            const int64_t i1 = r % ne[1];
            const float* p = plane(r);
            const float* a = p + lines.i0[size_t(i1)] * w_in;
            const float* b = p + lines.i1[size_t(i1)] * w_in;
            const float wb = lines.w[size_t(i1)], wa = 1.0f - wb;
            for (int64_t k = 0; k < w_in; ++k) blend[size_t(k)] = a[k] * wa + b[k] * wb;
            float* d = out + r * ne[0];
            const int64_t* c0 = cols.i0.data();
            const int64_t* c1 = cols.i1.data();
            const float* cw = cols.w.data();
            const float* t = blend.data();
            for (int64_t i = 0; i < ne[0]; ++i) d[i] = t[c0[i]] * (1.0f - cw[i]) + t[c1[i]] * cw[i];
        }
    }
}

}  // namespace o2g_onednn
