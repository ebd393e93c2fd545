// Resize and Upsample (nearest, linear, cubic; every coordinate transformation mode).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <numeric>

#include "o2g_kernels.h"
#include "ops/common.h"

namespace onnx2ggml::core {
namespace {

using Lc = LowerCtx;

// ---- Resize / Upsample ---------------------------------------------------------------------

struct ResizePlan {
    Shape out;
    std::vector<double> scale;  // per axis
    std::string mode, coord, nearest;
    double cubic_a = -0.75;
    bool from_scales = true;  // output size came from scales (align_corners then uses in * scale)
    bool exclude_outside = false;
    std::vector<double> roi;   // tf_crop_and_resize: [starts..., ends...] (normalized)
    double extrapolation = 0;  // tf_crop_and_resize: the value outside the input
};

ResizePlan resize_plan(OpCtx& c) {
    ResizePlan p;
    const Shape& s = c.shape(0);
    int rk = int(s.size());
    bool upsample = c.node().op_type == "Upsample";
    p.mode = c.as("mode", "nearest");
    std::vector<double> scales;
    std::vector<int64_t> sizes;
    if (upsample) {
        if (c.opset() >= 9)
            for (auto v : c.cval(1).to_f32()) scales.push_back(v);
        else
            for (auto v : c.afs("scales")) scales.push_back(v);
        p.coord = "asymmetric";
        p.nearest = "floor";
        if (p.mode == "bilinear") p.mode = "linear";
    } else {
        p.coord = c.as("coordinate_transformation_mode", "half_pixel");
        p.nearest = c.as("nearest_mode", "round_prefer_floor");
        p.cubic_a = c.af("cubic_coeff_a", -0.75f);
        p.exclude_outside = c.ai("exclude_outside", 0) != 0;
        if (c.opset() < 11) {
            for (auto v : c.cval(1).to_f32()) scales.push_back(v);
            p.coord = "asymmetric";
            p.nearest = "floor";
        } else {
            if (c.has(2) && c.cval(2).numel() > 0)
                for (auto v : c.cval(2).to_f32()) scales.push_back(v);
            if (c.has(3) && c.cval(3).numel() > 0) sizes = c.cints(3);
        }
        if (c.opset() >= 18 &&
            (c.has(4) || c.ai("antialias", 0) != 0 || c.as("keep_aspect_ratio_policy", "stretch") != "stretch"))
            c.fail_unsupported("Resize axes/antialias/keep_aspect_ratio_policy are not supported yet");
    }
    if (p.coord == "tf_crop_and_resize") {
        if (!c.has(1)) c.fail("tf_crop_and_resize needs the roi input");
        for (auto v : c.cval(1).to_f32()) p.roi.push_back(v);
        if (int(p.roi.size()) != 2 * rk)
            c.fail("roi has " + std::to_string(p.roi.size()) + " values for rank " + std::to_string(rk));
        p.extrapolation = c.af("extrapolation_value", 0.0f);
    }
    p.out.resize(rk);
    p.scale.resize(rk);
    if (!sizes.empty()) {
        if (int(sizes.size()) != rk) c.fail("sizes has the wrong length");
        for (int i = 0; i < rk; ++i) {
            p.out[i] = sizes[i];
            p.scale[i] = double(sizes[i]) / double(s[i]);
        }
        p.from_scales = false;
    } else {
        if (int(scales.size()) != rk)
            c.fail("scales has " + std::to_string(scales.size()) + " entries for rank " + std::to_string(rk));
        for (int i = 0; i < rk; ++i) {
            if (!(scales[i] > 0)) c.fail("scales must be positive");
            double o = std::floor(double(s[i]) * scales[i] + 1e-9);
            if (!(o < 0x1p40))
                c.fail("scales give an output dim of " + std::to_string(o) +
                       ", too large");  // (never cast out of range)
            p.scale[i] = scales[i];
            p.out[i] = int64_t(o);
        }
    }
    if (p.mode != "nearest" && p.mode != "linear" && p.mode != "cubic") c.fail("unknown Resize mode '" + p.mode + "'");
    return p;
}

double source_coord(const ResizePlan& p, int a, int64_t x, int64_t in, int64_t out, double scale) {
    const std::string& m = p.coord;
    if (m == "tf_crop_and_resize") {
        double st = p.roi[size_t(a)], en = p.roi[p.roi.size() / 2 + size_t(a)];
        return out > 1 ? st * double(in - 1) + double(x) * (en - st) * double(in - 1) / double(out - 1)
                       : 0.5 * (st + en) * double(in - 1);
    }
    if (m == "asymmetric") return x / scale;
    if (m == "align_corners") {
        double len = p.from_scales ? double(in) * scale : double(out);
        return out == 1 ? 0.0 : double(x) * double(in - 1) / (len - 1);
    }
    if (m == "pytorch_half_pixel") return out > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
    if (m == "tf_half_pixel_for_nn") return (x + 0.5) / scale;
    if (m == "half_pixel_symmetric") {
        double adj = double(out) / (scale * double(in));
        double center = double(in) / 2.0;
        double offset = center * (1 - adj);
        return offset + (x + 0.5) / scale - 0.5;
    }
    return (x + 0.5) / scale - 0.5;  // half_pixel
}

int64_t nearest_index(const ResizePlan& p, double xo, int64_t in) {
    double r;
    if (p.nearest == "floor") r = std::floor(xo);
    else if (p.nearest == "ceil") r = std::ceil(xo);
    else if (p.nearest == "round_prefer_ceil") r = std::floor(xo + 0.5);
    else r = (xo - std::floor(xo) == 0.5) ? std::floor(xo) : std::round(xo);  // round_prefer_floor
    return std::clamp<int64_t>(int64_t(r), 0, in - 1);
}

// tf_crop_and_resize: whether output x of axis a samples inside the input
bool inside(const ResizePlan& p, int a, int64_t x, int64_t in, int64_t out, double scale) {
    if (p.coord != "tf_crop_and_resize") return true;
    double xo = source_coord(p, a, x, in, out, scale);
    return xo >= 0 && xo <= double(in - 1);
}

// The taps of one axis: for each output x, the (input index, weight) pairs it sums (nearest: one
// tap; linear: two; cubic: four; none where tf_crop_and_resize extrapolates).
using Taps = std::vector<std::vector<std::pair<int64_t, double>>>;
Taps axis_taps(const ResizePlan& p, int a, int64_t in, int64_t out, double scale) {
    Taps taps(static_cast<size_t>(out));
    for (int64_t x = 0; x < out; ++x) {
        auto& t = taps[size_t(x)];
        if (!inside(p, a, x, in, out, scale)) continue;  // extrapolated (added after)
        double xo = source_coord(p, a, x, in, out, scale);
        if (p.mode == "nearest") {
            t.push_back({nearest_index(p, xo, in), 1.0});
        } else if (p.mode == "linear") {
            xo = std::clamp(xo, 0.0, double(in - 1));
            int64_t x0 = int64_t(std::floor(xo)), x1 = std::min(x0 + 1, in - 1);
            double f = xo - double(x0);
            t.push_back({x0, 1 - f});
            t.push_back({x1, f});
        } else {  // cubic
            int64_t x0 = int64_t(std::floor(xo));
            double f = xo - double(x0), ca = p.cubic_a;
            double ws[4], sum = 0;
            for (int k = -1; k <= 2; ++k) {
                double d = std::fabs(double(k) - f);
                double v = d <= 1 ? ((ca + 2) * d - (ca + 3)) * d * d + 1
                                  : (d < 2 ? ((ca * d - 5 * ca) * d + 8 * ca) * d - 4 * ca : 0);
                int64_t idx = x0 + k;
                if (p.exclude_outside && (idx < 0 || idx >= in)) v = 0;
                ws[k + 1] = v;
                sum += v;
            }
            for (int k = -1; k <= 2; ++k)
                t.push_back({std::clamp<int64_t>(x0 + k, 0, in - 1), p.exclude_outside ? ws[k + 1] / sum : ws[k + 1]});
        }
    }
    return taps;
}

// Interpolation matrix [out, in] for one axis (linear or cubic), float32 for ggml_mul_mat.
Tensor interp_matrix(const ResizePlan& p, int a, int64_t in, int64_t out, double scale) {
    Tensor m = Tensor::zeros(DType::F32, {out, in});
    float* w = m.ptr<float>();
    Taps taps = axis_taps(p, a, in, out, scale);
    for (int64_t x = 0; x < out; ++x)
        for (auto& t : taps[size_t(x)]) w[x * in + t.first] += float(t.second);
    return m;
}

// Resize on the host, in double: the axes one after the other (every mode is separable), then
// tf_crop_and_resize's extrapolation value where any axis samples outside the input.
void eval_resize(OpCtx& c) {
    ResizePlan p = resize_plan(c);
    const Tensor& x = c.cval(0);
    Shape cur = c.shape(0);
    int rk = int(cur.size());
    std::vector<double> v = to_f64(x);
    for (int a = 0; a < rk; ++a) {
        int64_t in = cur[size_t(a)], out = p.out[size_t(a)], inner = 1;
        for (int i = a + 1; i < rk; ++i) inner *= cur[size_t(i)];
        int64_t outer = in * inner > 0 ? int64_t(v.size()) / (in * inner) : 0;
        Taps taps = axis_taps(p, a, in, out, p.scale[size_t(a)]);
        std::vector<double> y(size_t(outer * out * inner), 0.0);
        for (int64_t o = 0; o < outer; ++o)
            for (int64_t j = 0; j < out; ++j)
                for (auto& t : taps[size_t(j)])
                    for (int64_t i = 0; i < inner; ++i)
                        y[size_t((o * out + j) * inner + i)] += t.second * v[size_t((o * in + t.first) * inner + i)];
        v = std::move(y);
        cur[size_t(a)] = out;
    }
    Tensor r = Tensor::zeros(x.dtype, p.out);
    const Shape& s = c.shape(0);
    for_grid(p.out, [&](int64_t e, const std::vector<int64_t>& idx) {
        bool in = true;
        for (int a = 0; a < rk && in; ++a)
            in = inside(p, a, idx[size_t(a)], s[size_t(a)], p.out[size_t(a)], p.scale[size_t(a)]);
        r.setf(e, in ? v[size_t(e)] : p.extrapolation);
    });
    c.set_const(0, r);
}

// tf_crop_and_resize: y * inside + extrapolation_value * (1 - inside), inside a product over the axes
ggml_tensor* extrapolate(Lc& c, const ResizePlan& p, ggml_tensor* y) {
    if (p.coord != "tf_crop_and_resize") return y;
    const Shape& s = c.shape(0);
    int rk = int(s.size());
    Shape ms(static_cast<size_t>(rk), 1);
    std::vector<std::vector<float>> in_ax(static_cast<size_t>(rk));
    bool all = true;
    for (int a = 0; a < rk; ++a) {
        for (int64_t x = 0; x < p.out[size_t(a)]; ++x)
            in_ax[size_t(a)].push_back(inside(p, a, x, s[size_t(a)], p.out[size_t(a)], p.scale[size_t(a)]) ? 1.f : 0.f);
        bool ax_all = std::all_of(in_ax[size_t(a)].begin(), in_ax[size_t(a)].end(), [](float v) { return v == 1.f; });
        if (!ax_all) ms[size_t(a)] = p.out[size_t(a)];
        all &= ax_all;
    }
    if (all) return y;
    std::vector<float> mask(size_t(shape_numel(ms)), 1.f), ext(mask.size());
    auto st = strides_of(ms);
    for (size_t i = 0; i < mask.size(); ++i) {
        for (int a = 0; a < rk; ++a)
            if (ms[size_t(a)] > 1) mask[i] *= in_ax[size_t(a)][size_t((int64_t(i) / st[size_t(a)]) % ms[size_t(a)])];
        ext[i] = float(p.extrapolation) * (1 - mask[i]);
    }
    y = c.binary(LowerCtx::Bin::Mul, y, p.out, c.constant(Tensor::from_f32(mask, ms)), ms);
    return c.binary(LowerCtx::Bin::Add, y, p.out, c.constant(Tensor::from_f32(ext, ms)), ms);
}

// Whether ggml_interpolate's bilinear mode (ggml-cpu's rule, which the GPU backends share: source coordinate
// (x + o) / sf - o with o = 0.5, or 0 and sf = (out - 1) / (in - 1) for align_corners; taps floor and floor + 1
// clamped to the input; weight clamped to [0, 1]) gives this Resize's taps on the last two axes, the others
// unresized: checked tap by tap against axis_taps, so any coordinate mode or scale that agrees takes it.
bool bilinear_is_ggmls(const ResizePlan& p, const Shape& s) {
    int rk = int(s.size());
    if (p.mode != "linear" || rk < 2 || rk > 4 || p.coord == "tf_crop_and_resize" || p.out == s) return false;
    for (int a = 0; a < rk - 2; ++a)
        if (p.out[size_t(a)] != s[size_t(a)]) return false;
    const bool align = p.coord == "align_corners";
    for (int a = rk - 2; a < rk; ++a) {
        const int64_t in = s[size_t(a)], out = p.out[size_t(a)];
        float sf = float(out) / float(in), offset = 0.5f;
        if (align) {
            offset = 0.0f;
            if (out > 1 && in > 1) sf = float(out - 1) / float(in - 1);
        }
        Taps want = axis_taps(p, a, in, out, p.scale[size_t(a)]);
        for (int64_t i = 0; i < out; ++i) {
            const float x = (float(i) + offset) / sf - offset;
            int64_t x0 = int64_t(std::floor(x)), x1 = x0 + 1;
            x0 = std::clamp<int64_t>(x0, 0, in - 1), x1 = std::clamp<int64_t>(x1, 0, in - 1);
            const double dx = std::clamp(double(x - float(x0)), 0.0, 1.0);
            std::map<int64_t, double> got, w;  // input index -> weight
            got[x0] += 1 - dx, got[x1] += dx;
            for (auto& t : want[size_t(i)]) w[t.first] += t.second;
            for (auto* m : {&got, &w})
                for (auto& kv : *m)
                    if (std::fabs(got[kv.first] - w[kv.first]) > 1e-5) return false;
        }
    }
    return true;
}

void lower_resize(Lc& c) {
    ResizePlan p = resize_plan(c);
    const Shape& s = c.shape(0);
    int rk = int(s.size());
    if (rk > 4) c.fail_unsupported("Resize of a rank > 4 tensor");
    ggml_tensor* x = c.x(0);
    if (p.mode == "nearest") {
        std::vector<std::vector<int64_t>> idx(rk);
        bool fast = true;  // matches ggml's nearest (floor(i * in / out)) on every axis
        for (int a = 0; a < rk; ++a) {
            for (int64_t i = 0; i < p.out[a]; ++i)
                idx[a].push_back(nearest_index(p, source_coord(p, a, i, s[a], p.out[a], p.scale[a]), s[a]));
            bool ident = p.out[a] == s[a];
            for (int64_t i = 0; i < p.out[a]; ++i) ident &= idx[a][i] == i;
            if (ident) {
                idx[a].clear();
                continue;
            }
            bool floor_rule = p.out[a] % s[a] == 0 && ggml_dim(a, rk) < 2;
            for (int64_t i = 0; i < p.out[a] && floor_rule; ++i) floor_rule &= idx[a][i] == i * s[a] / p.out[a];
            fast &= floor_rule;
        }
        if (fast && p.coord != "tf_crop_and_resize") {
            auto ne = to_ne(p.out);
            c.set(0,
                  G(c.b, ggml_interpolate, c.cont(x), ne[0], ne[1], ne[2], ne[3], uint32_t(GGML_SCALE_MODE_NEAREST)));
            return;
        }
        Shape cur = s;
        for (int a = 0; a < rk; ++a) {
            if (idx[a].empty()) continue;
            x = gather_axis(c, x, cur, a, idx[a]);
            cur[a] = p.out[a];
        }
        c.set(0, extrapolate(c, p, x));
        return;
    }
    // linear over the last two axes with ggml's own bilinear rule: one ggml_interpolate (two taps per output
    // and axis, where a matrix product takes the whole axis)
    if (bilinear_is_ggmls(p, s)) {
        auto ne = to_ne(p.out);
        uint32_t mode = uint32_t(GGML_SCALE_MODE_BILINEAR) |
                        (p.coord == "align_corners" ? uint32_t(GGML_SCALE_FLAG_ALIGN_CORNERS) : 0u);
        c.set(0, G(c.b, ggml_interpolate, c.cont(x), ne[0], ne[1], ne[2], ne[3], mode));
        return;
    }
    // linear / cubic: separable, one matrix product per resized axis
    Shape cur = s;
    for (int a = rk - 1; a >= 0; --a) {
        if (p.out[a] == s[a] &&
            (p.coord == "half_pixel" || p.coord == "asymmetric" || p.coord == "align_corners" ||
             p.coord == "pytorch_half_pixel") &&
            p.scale[a] == 1.0)
            continue;
        ggml_tensor* m = c.constant(interp_matrix(p, a, s[a], p.out[a], p.scale[a]));  // ne [in, out]
        // move axis a last, contract, move back
        std::vector<int64_t> perm;
        for (int i = 0; i < rk; ++i)
            if (i != a) perm.push_back(i);
        perm.push_back(a);
        Shape ps;
        for (auto v : perm) ps.push_back(cur[v]);
        ggml_tensor* t = c.cont(c.permute(c.reshape(x, cur), perm));
        int64_t rows = shape_numel(ps) / cur[a];
        ggml_tensor* y = G(c.b, ggml_mul_mat, m, G(c.b, ggml_reshape_2d, t, cur[a], rows));  // [out, rows]
        ps.back() = p.out[a];
        y = c.reshape(y, ps);
        std::vector<int64_t> inv = inverse_perm(perm);
        x = c.permute(y, inv);
        cur[a] = p.out[a];
    }
    c.set(0, extrapolate(c, p, c.cont(x)));
}

}  // namespace

O2G_OP_FAMILY(resize) {
    for (const char* op : {"Resize", "Upsample"}) {
        OpDef d;
        d.op_type = op;
        d.min_inputs = 1;
        d.host_inputs = {1, 2, 3};
        d.infer = [](OpCtx& c) { c.set_out(0, c.dtype(0), resize_plan(c).out); };
        d.eval = eval_resize;
        d.work = [](OpCtx& c) { return 4.0 * double(shape_numel(c.out(0).shape)) * double(c.rank(0)); };
        d.lower = lower_resize;
        r.add(d);
    }
}

}  // namespace onnx2ggml::core
