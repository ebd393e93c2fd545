// Slice and Pad (constant, reflect, edge, wrap).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>

#include "o2g_kernels.h"
#include "ops/common.h"

namespace onnx2ggml::core {
namespace {

using Lc = LowerCtx;

struct SliceSpec {
    std::vector<int64_t> start, step, len;
};  // per axis of the input

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
    if (axes.empty())
        for (size_t i = 0; i < starts.size(); ++i) axes.push_back(int64_t(i));
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

struct PadSpec {
    std::vector<int64_t> lo, hi;
    std::string mode;
    double value = 0;
};

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
    if (c.opset() >= 18 && c.has(3))
        for (int64_t a : c.cints(3)) axes.push_back(c.axis(a, r));
    else
        for (int i = 0; i < r; ++i) axes.push_back(i);
    if (pads.size() != 2 * axes.size())
        c.fail("pads has " + std::to_string(pads.size()) + " values, expected " + std::to_string(2 * axes.size()));
    p.lo.assign(r, 0);
    p.hi.assign(r, 0);
    for (size_t k = 0; k < axes.size(); ++k) {
        p.lo[axes[k]] = pads[k];
        p.hi[axes[k]] = pads[k + axes.size()];
    }
    if (p.mode != "constant" && p.mode != "reflect" && p.mode != "edge" && p.mode != "wrap")
        c.fail("unknown Pad mode '" + p.mode + "'");
    for (int i = 0; i < r; ++i)
        if (c.shape(0)[i] + p.lo[i] + p.hi[i] < 0) c.fail("pads make dim " + std::to_string(i) + " negative");
    return p;
}

}  // namespace

O2G_OP_FAMILY(slice) {
    {
        OpDef d;
        d.op_type = "Slice";
        d.min_inputs = 1;
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
        r.add(d);
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
                    for (int dd = int(o.size()) - 1; dd >= 0; --dd) {
                        if (++idx[dd] < o[dd]) break;
                        idx[dd] = 0;
                    }
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
                    if (p.mode == "reflect" && (lo >= cur[a] || hi >= cur[a]))
                        c.fail("reflect pads must be smaller than the dim");
                    std::vector<int64_t> idx;
                    for (int64_t k = -lo; k < cur[a] + hi; ++k) idx.push_back(pad_index(k, cur[a], p.mode));
                    x = gather_axis(c, x, cur, a, idx);
                    cur[a] += lo + hi;
                }
            }
            c.set(0, x);
        };
        r.add(d);
    }
}

}  // namespace onnx2ggml::core
