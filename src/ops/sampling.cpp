// Sampling and detection operators without ggml kernels: GridSample (PyTorch's grid_sample
// semantics, which the spec follows), RoiAlign (as ONNX Runtime computes it), MaxUnpool and
// NonMaxSuppression. Computed by their
// host evaluators: folded when constant, else host kernels (lower/host_kernel.h).
#include <algorithm>
#include <array>
#include <cmath>

#include "ops/common.h"

namespace onnx2ggml::core {
namespace {

// ---- GridSample ---------------------------------------------------------------------------

struct Sampler {
    bool align, zeros, border, reflection;
    double unnormalize(double g, int64_t size) const {
        return align ? (g + 1) / 2 * double(size - 1) : ((g + 1) * double(size) - 1) / 2;
    }
    static double reflect(double x, double twice_lo, double twice_hi) {
        if (twice_lo == twice_hi) return 0;
        double lo = twice_lo / 2, span = (twice_hi - twice_lo) / 2;
        x = std::fabs(x - lo);
        double extra = std::fmod(x, span);
        int64_t flips = int64_t(std::floor(x / span));
        return flips % 2 == 0 ? extra + lo : span - extra + lo;
    }
    double coordinate(double x, int64_t size) const {  // the padding mode applied to a source coordinate
        if (border) return std::min(double(size - 1), std::max(0.0, x));
        if (reflection) {
            x = align ? reflect(x, 0, 2 * double(size - 1)) : reflect(x, -1, 2 * double(size) - 1);
            return std::min(double(size - 1), std::max(0.0, x));
        }
        return x;
    }
};

double cubic_w(double t, int i) {  // Keys' cubic convolution, A = -0.75 (PyTorch)
    const double A = -0.75;
    auto near = [A](double x) { return ((A + 2) * x - (A + 3)) * x * x + 1; };
    auto far = [A](double x) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; };
    switch (i) {
        case 0: return far(t + 1);
        case 1: return near(t);
        case 2: return near(1 - t);
        default: return far(2 - t);
    }
}

void register_gridsample(Registry& r) {
    OpDef d;
    d.op_type = "GridSample";
    d.min_inputs = 2;
    d.infer = [](OpCtx& c) {
        const Shape &x = c.shape(0), &g = c.shape(1);
        if (x.size() != 4 || g.size() != 4 || g[3] != 2 || g[0] != x[0])
            c.fail("expects X [N,C,H,W] and grid [N,H_out,W_out,2], got " + shape_str(x) + " and " + shape_str(g));
        std::string mode = c.as("mode", "bilinear"), pad = c.as("padding_mode", "zeros");
        if (mode != "bilinear" && mode != "nearest" && mode != "bicubic") c.fail("unknown mode '" + mode + "'");
        if (pad != "zeros" && pad != "border" && pad != "reflection") c.fail("unknown padding_mode '" + pad + "'");
        c.set_out(0, c.dtype(0), {x[0], x[1], g[1], g[2]});
    };
    d.work = [](OpCtx& c) { return 16.0 * double(shape_numel(c.out(0).shape)); };
    d.eval = [](OpCtx& c) {
        const Shape &xs = c.shape(0), &gs = c.shape(1);
        std::string mode = c.as("mode", "bilinear"), pad = c.as("padding_mode", "zeros");
        Sampler s{c.ai("align_corners", 0) != 0, pad == "zeros", pad == "border", pad == "reflection"};
        const Tensor &x = c.cval(0), &grid = c.cval(1);
        int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], HO = gs[1], WO = gs[2];
        Tensor y = Tensor::zeros(c.dtype(0), c.out(0).shape);
        for (int64_t n = 0; n < N; ++n)
            for (int64_t ch = 0; ch < C; ++ch) {
                auto at = [&](int64_t yy, int64_t xx) {
                    return yy < 0 || yy >= H || xx < 0 || xx >= W ? 0.0 : x.getf(((n * C + ch) * H + yy) * W + xx);
                };
                for (int64_t oh = 0; oh < HO; ++oh)
                    for (int64_t ow = 0; ow < WO; ++ow) {
                        int64_t gb = ((n * HO + oh) * WO + ow) * 2;
                        double ux = s.unnormalize(grid.getf(gb), W), uy = s.unnormalize(grid.getf(gb + 1), H), v = 0;
                        if (mode == "bicubic") {
                            double x0 = std::floor(ux), y0 = std::floor(uy), tx = ux - x0, ty = uy - y0;
                            for (int i = 0; i < 4; ++i) {
                                double row = 0;
                                for (int j = 0; j < 4; ++j) {
                                    double px = s.coordinate(x0 - 1 + j, W), py = s.coordinate(y0 - 1 + i, H);
                                    row += cubic_w(tx, j) * at(int64_t(py), int64_t(px));
                                }
                                v += cubic_w(ty, i) * row;
                            }
                        } else {
                            double ix = s.coordinate(ux, W), iy = s.coordinate(uy, H);
                            if (mode == "nearest") {
                                v = at(int64_t(std::nearbyint(iy)), int64_t(std::nearbyint(ix)));
                            } else {
                                double fx = std::floor(ix), fy = std::floor(iy), lx = ix - fx, ly = iy - fy;
                                int64_t x0 = int64_t(fx), y0 = int64_t(fy);
                                v = at(y0, x0) * (1 - lx) * (1 - ly) + at(y0, x0 + 1) * lx * (1 - ly) +
                                    at(y0 + 1, x0) * (1 - lx) * ly + at(y0 + 1, x0 + 1) * lx * ly;
                            }
                        }
                        y.setf(((n * C + ch) * HO + oh) * WO + ow, v);
                    }
            }
        c.set_const(0, y);
    };
    r.add(d);
}

// ---- RoiAlign -----------------------------------------------------------------------------

void register_roialign(Registry& r) {
    OpDef d;
    d.op_type = "RoiAlign";
    d.min_inputs = 3;
    d.infer = [](OpCtx& c) {
        require_index(c, 2);
        const Shape &x = c.shape(0), &rois = c.shape(1), &bi = c.shape(2);
        if (x.size() != 4 || rois.size() != 2 || rois[1] != 4 || bi != Shape{rois[0]})
            c.fail("expects X [N,C,H,W], rois [R,4], batch_indices [R], got " + shape_str(x) + ", " + shape_str(rois) +
                   ", " + shape_str(bi));
        int64_t oh = c.ai("output_height", 1), ow = c.ai("output_width", 1);
        if (oh <= 0 || ow <= 0 || oh > (1 << 20) || ow > (1 << 20)) c.fail("output_height/width must be positive");
        std::string mode = c.as("mode", "avg");
        if (mode != "avg" && mode != "max") c.fail("unknown mode '" + mode + "'");
        c.set_out(0, c.dtype(0), {rois[0], x[1], oh, ow});
    };
    d.eval = [](OpCtx& c) {
        const Shape& xs = c.shape(0);
        const Tensor &x = c.cval(0), &rois = c.cval(1);
        auto bidx = c.cints(2);
        int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], R = c.shape(1)[0];
        int64_t OH = c.ai("output_height", 1), OW = c.ai("output_width", 1), ratio = c.ai("sampling_ratio", 0);
        double scale = c.af("spatial_scale", 1.0f);
        bool half_pixel = c.as("coordinate_transformation_mode", "half_pixel") == "half_pixel",
             is_max = c.as("mode", "avg") == "max";
        double off = half_pixel ? 0.5 : 0.0;
        Tensor y = Tensor::zeros(c.dtype(0), c.out(0).shape);
        for (int64_t ri = 0; ri < R; ++ri) {
            int64_t b = bidx[size_t(ri)];
            if (b < 0 || b >= N) c.fail("batch index " + std::to_string(b) + " is out of range");
            double x1 = rois.getf(ri * 4) * scale - off, y1 = rois.getf(ri * 4 + 1) * scale - off;
            double rw = rois.getf(ri * 4 + 2) * scale - off - x1, rh = rois.getf(ri * 4 + 3) * scale - off - y1;
            if (!half_pixel) rw = std::max(rw, 1.0), rh = std::max(rh, 1.0);
            double bh = rh / double(OH), bw = rw / double(OW);
            if (!(std::fabs(rh) < 1e9 && std::fabs(rw) < 1e9))
                c.fail("roi " + std::to_string(ri) + " is not a finite box of sane size");
            int64_t gh = ratio > 0 ? ratio : int64_t(std::ceil(rh / double(OH))),
                    gw = ratio > 0 ? ratio : int64_t(std::ceil(rw / double(OW)));
            gh = std::max<int64_t>(gh, 0), gw = std::max<int64_t>(gw, 0);
            if (double(gh) * double(gw) > 1e6)
                c.fail("RoiAlign sampling grid of " + std::to_string(gh) + " x " + std::to_string(gw) +
                       " points per bin (a huge roi?)");
            double count = double(std::max<int64_t>(gh * gw, 1));
            for (int64_t ch = 0; ch < C; ++ch) {
                auto at = [&](int64_t yy, int64_t xx) { return x.getf(((b * C + ch) * H + yy) * W + xx); };
                for (int64_t ph = 0; ph < OH; ++ph)
                    for (int64_t pw = 0; pw < OW; ++pw) {
                        double acc = 0;
                        bool first = true;
                        for (int64_t iy = 0; iy < gh; ++iy)
                            for (int64_t ix = 0; ix < gw; ++ix) {
                                double yy = y1 + double(ph) * bh + (double(iy) + 0.5) * bh / double(gh);
                                double xx = x1 + double(pw) * bw + (double(ix) + 0.5) * bw / double(gw);
                                double v = 0, w[4] = {0, 0, 0, 0}, p[4] = {0, 0, 0, 0};
                                if (!(yy < -1.0 || yy > double(H) || xx < -1.0 || xx > double(W))) {
                                    yy = std::max(yy, 0.0), xx = std::max(xx, 0.0);
                                    int64_t yl = int64_t(yy), xl = int64_t(xx), yhi, xhi;
                                    if (yl >= H - 1) yhi = yl = H - 1, yy = double(yl);
                                    else yhi = yl + 1;
                                    if (xl >= W - 1) xhi = xl = W - 1, xx = double(xl);
                                    else xhi = xl + 1;
                                    double ly = yy - double(yl), lx = xx - double(xl), hy = 1 - ly, hx = 1 - lx;
                                    w[0] = hy * hx, w[1] = hy * lx, w[2] = ly * hx, w[3] = ly * lx;
                                    p[0] = at(yl, xl), p[1] = at(yl, xhi), p[2] = at(yhi, xl), p[3] = at(yhi, xhi);
                                }
                                if (is_max) {  // ONNX Runtime: the largest weighted corner of each sample
                                    v = std::max(std::max(w[0] * p[0], w[1] * p[1]),
                                                 std::max(w[2] * p[2], w[3] * p[3]));
                                    acc = first ? v : std::max(acc, v);
                                    first = false;
                                } else {
                                    acc += w[0] * p[0] + w[1] * p[1] + w[2] * p[2] + w[3] * p[3];
                                }
                            }
                        y.setf(((ri * C + ch) * OH + ph) * OW + pw, is_max ? acc : acc / count);
                    }
            }
        }
        c.set_const(0, y);
    };
    r.add(d);
}

// ---- MaxUnpool ----------------------------------------------------------------------------

void register_maxunpool(Registry& r) {
    OpDef d;
    d.op_type = "MaxUnpool";
    d.min_inputs = 2;
    d.host_inputs = {2};
    d.infer = [](OpCtx& c) {
        const Shape& x = c.shape(0);
        require_index(c, 1);
        if (x.size() < 3 || c.shape(1) != x)
            c.fail("X must have rank >= 3 and I its shape, got " + shape_str(x) + " and " + shape_str(c.shape(1)));
        size_t nsp = x.size() - 2;
        std::vector<int64_t> k = c.ais("kernel_shape"), s = c.ais("strides", std::vector<int64_t>(nsp, 1)),
                             p = c.ais("pads", std::vector<int64_t>(2 * nsp, 0));
        if (k.size() != nsp || s.size() != nsp || p.size() != 2 * nsp)
            c.fail("kernel_shape, strides and pads must match the spatial dims");
        Shape o = {x[0], x[1]};
        if (c.has(2)) {
            o = c.cints(2);
            if (o.size() != x.size() || o[0] != x[0] || o[1] != x[1])
                c.fail("output_shape " + shape_str(o) + " does not fit X " + shape_str(x));
        } else {
            for (size_t i = 0; i < nsp; ++i) o.push_back((x[i + 2] - 1) * s[i] + k[i] - p[i] - p[i + nsp]);
        }
        for (int64_t v : o)
            if (v <= 0 || v > (int64_t(1) << 30)) c.fail("output shape " + shape_str(o) + " is out of range");
        c.set_out(0, c.dtype(0), o);
    };
    d.eval = [](OpCtx& c) {
        // the indices address MaxPool's input, of the default unpooled shape; an output_shape that
        // is larger keeps each element at the same coordinates (the spec's reference)
        const Tensor& x = c.cval(0);
        const Shape& xs = c.shape(0);
        size_t nsp = xs.size() - 2;
        std::vector<int64_t> k = c.ais("kernel_shape"), s = c.ais("strides", std::vector<int64_t>(nsp, 1)),
                             p = c.ais("pads", std::vector<int64_t>(2 * nsp, 0));
        Shape def = {xs[0], xs[1]};
        for (size_t i = 0; i < nsp; ++i) def.push_back((xs[i + 2] - 1) * s[i] + k[i] - p[i] - p[i + nsp]);
        auto idx = c.cints(1);
        const Shape& os = c.out(0).shape;
        Tensor y = Tensor::zeros(c.dtype(0), os);
        int64_t n = shape_numel(def);
        size_t es = dtype_size(x.dtype);
        for (size_t i = 0; i < idx.size(); ++i) {
            if (idx[i] < 0 || idx[i] >= n)
                c.fail("index " + std::to_string(idx[i]) + " is out of range for an unpooled shape " + shape_str(def));
            int64_t rem = idx[i], o = 0, mul = 1;
            bool inside = true;
            for (int d = int(def.size()) - 1; d >= 0; --d) {
                int64_t v = rem % def[size_t(d)];
                rem /= def[size_t(d)];
                inside &= v < os[size_t(d)];
                o += v * mul;
                mul *= os[size_t(d)];
            }
            if (inside) std::copy(x.data() + i * es, x.data() + (i + 1) * es, y.data() + size_t(o) * es);
        }
        c.set_const(0, y);
    };
    r.add(d);
}

// ---- NonMaxSuppression ----------------------------------------------------------------------
// The number of selected boxes depends on the values: like NonZero, the inputs are needed at
// compile time (onnx2ggml compiles static graphs). Greedy selection per batch and class, as
// ONNX Runtime does it: boxes above score_threshold by descending score (ties: lower index),
// dropped when their IoU with a selected box exceeds iou_threshold.

std::vector<int64_t> nms(OpCtx& c) {
    const Shape &bs = c.shape(0), &ss = c.shape(1);
    if (bs.size() != 3 || bs[2] != 4 || ss.size() != 3 || ss[0] != bs[0] || ss[2] != bs[1])
        c.fail("expects boxes [B,N,4] and scores [B,C,N], got " + shape_str(bs) + " and " + shape_str(ss));
    const Tensor &boxes = c.cval(0), &scores = c.cval(1);
    int64_t max_out = c.has(2) ? c.cval(2).geti(0) : 0;
    double iou_t = c.has(3) ? c.cval(3).getf(0) : 0.0;
    bool has_st = c.has(4);
    double score_t = has_st ? c.cval(4).getf(0) : 0.0;
    bool center = c.ai("center_point_box", 0) != 0;
    int64_t B = bs[0], N = bs[1], C = ss[1];
    double work = double(B) * double(C) * double(N) * double(std::min(N, std::max<int64_t>(max_out, 0)));
    if (work > c.graph().max_eval_work)
        c.fail_unsupported("NonMaxSuppression over " + std::to_string(B * C) + " x " + std::to_string(N) +
                           " boxes is too large to evaluate on the host (" + std::to_string(work) +
                           " operations, limit " + std::to_string(c.graph().max_eval_work) + ")");
    auto corners = [&](int64_t b, int64_t i, double* o) {  // y1, x1, y2, x2 with y1 <= y2, x1 <= x2
        const int64_t base = (b * N + i) * 4;
        double v0 = boxes.getf(base), v1 = boxes.getf(base + 1), v2 = boxes.getf(base + 2), v3 = boxes.getf(base + 3);
        if (center) {  // [x_center, y_center, width, height]
            o[0] = v1 - v3 / 2, o[1] = v0 - v2 / 2, o[2] = v1 + v3 / 2, o[3] = v0 + v2 / 2;
        } else {
            o[0] = std::min(v0, v2), o[1] = std::min(v1, v3), o[2] = std::max(v0, v2), o[3] = std::max(v1, v3);
        }
    };
    auto iou = [](const double* a, const double* b) {
        double ih = std::min(a[2], b[2]) - std::max(a[0], b[0]), iw = std::min(a[3], b[3]) - std::max(a[1], b[1]);
        double aa = (a[2] - a[0]) * (a[3] - a[1]), ab = (b[2] - b[0]) * (b[3] - b[1]);
        if (ih <= 0 || iw <= 0 || aa <= 0 || ab <= 0) return 0.0;
        double inter = ih * iw;
        return inter / (aa + ab - inter);
    };
    std::vector<int64_t> sel;
    for (int64_t b = 0; b < B; ++b)
        for (int64_t cl = 0; cl < C; ++cl) {
            std::vector<int64_t> cand;
            for (int64_t i = 0; i < N; ++i)
                if (!has_st || scores.getf((b * C + cl) * N + i) > score_t) cand.push_back(i);
            std::stable_sort(cand.begin(), cand.end(), [&](int64_t p, int64_t q) {
                return scores.getf((b * C + cl) * N + p) > scores.getf((b * C + cl) * N + q);
            });
            std::vector<std::array<double, 4>> kept;
            for (int64_t i : cand) {
                if (int64_t(kept.size()) >= max_out) break;
                std::array<double, 4> bx;
                corners(b, i, bx.data());
                bool keep = true;
                for (auto& k : kept) keep &= iou(k.data(), bx.data()) <= iou_t;
                if (!keep) continue;
                kept.push_back(bx);
                sel.insert(sel.end(), {b, cl, i});
            }
        }
    return sel;
}

void register_nms(Registry& r) {
    OpDef d;
    d.op_type = "NonMaxSuppression";
    d.min_inputs = 2;
    d.host_inputs = {0, 1, 2, 3, 4};
    d.infer = [](OpCtx& c) { c.set_out(0, DType::I64, {int64_t(nms(c).size() / 3), 3}); };
    d.eval = [](OpCtx& c) {
        auto sel = nms(c);
        c.set_const(0, Tensor::from_i64(sel, {int64_t(sel.size() / 3), 3}));
    };
    r.add(d);
}

}  // namespace

O2G_OP_FAMILY(sampling) {
    register_nms(r);
    register_gridsample(r);
    register_roialign(r);
    register_maxunpool(r);
}

}  // namespace onnx2ggml::core
